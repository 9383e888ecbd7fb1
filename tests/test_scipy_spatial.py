"""scipy.spatial.distance cdist, pdist and squareform on traced values
(fusegrad.scipy.spatial)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as sd
from traced_values import traced_value

import fusegrad as fg
import fusegrad.scipy.spatial as fsd
from fusegrad.testing import check_grads

RNG = np.random.default_rng(11)
A, B = RNG.standard_normal((5, 3)), RNG.standard_normal((4, 3))
W = RNG.uniform(0.5, 2.0, 3)
METRICS = [
    ("euclidean", {}), ("sqeuclidean", {}), ("cityblock", {}), ("chebyshev", {}),
    ("minkowski", {"p": 3}), ("minkowski", {"p": 1.5}), ("minkowski", {"p": 0.7}),
    ("minkowski", {"p": np.inf}), ("cosine", {}), ("correlation", {}), ("seuclidean", {}),
    ("seuclidean", {"V": RNG.uniform(0.5, 2.0, 3)}), ("mahalanobis", {}),
    ("mahalanobis", {"VI": np.eye(3) + 0.1}), ("euclidean", {"w": W}), ("cityblock", {"w": W}),
    ("sqeuclidean", {"w": W}), ("minkowski", {"p": 3, "w": W}),
]  # fmt: skip


def _same(ours, theirs):
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("metric", "kwargs"), METRICS, ids=lambda m: str(m))
def test_cdist_pdist_match_scipy_and_differentiate(metric, kwargs):
    ours, theirs, loss = traced_value(sd.cdist, A, B, metric=metric, **kwargs)
    _same(ours, theirs)
    check_grads(loss, ("rev", "fwd"), order=2)(A, B)
    ours, theirs, loss = traced_value(sd.pdist, A, metric=metric, **kwargs)
    _same(ours, theirs)
    check_grads(loss, ("rev", "fwd"), order=2)(A)
    ours, theirs, _ = traced_value(sd.cdist, A.astype(np.float32), B, metric=metric, **kwargs)
    _same(ours, theirs)  # float64, as SciPy's


def test_callables_and_squareform():
    _same(*traced_value(sd.cdist, A, B, metric=lambda u, v: np.sqrt(np.sum((u - v) ** 2)))[:2])
    _same(*traced_value(sd.pdist, A, metric=lambda u, v: np.sum(np.abs(u - v)))[:2])
    _same(*traced_value(lambda x: sd.squareform(sd.pdist(x)), A)[:2])
    _same(*traced_value(lambda x: sd.squareform(sd.squareform(sd.pdist(x))), A)[:2])
    _same(*traced_value(lambda x: sd.squareform(x[:0]), A[:, 0])[:2])
    _same(*traced_value(lambda x: sd.squareform(x.astype(np.float32)), A[:3, 0])[:2])
    check_grads(lambda v: np.sum(sd.squareform(v) @ np.arange(4.0)), ("rev", "fwd"))(RNG.random(6))
    with pytest.raises(ValueError, match="Incompatible vector size"):
        fg.grad(lambda v: np.sum(sd.squareform(v)))(np.ones(4))
    with pytest.raises(ValueError, match="symmetric"):
        fg.grad(lambda m: np.sum(sd.squareform(m)))(RNG.standard_normal((3, 3)))


def test_zero_distances_have_finite_derivatives():
    p = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]])  # two equal rows
    for metric, kwargs in [("euclidean", {}), ("minkowski", {"p": 3}), ("minkowski", {"p": 0.5}),
                           ("seuclidean", {}), ("mahalanobis", {"VI": np.eye(2)})]:  # fmt: skip
        g = fg.grad(lambda x, m=metric, k=kwargs: np.sum(sd.pdist(x, m, **k)))(p)
        h = fg.hessian(lambda x, m=metric, k=kwargs: np.sum(sd.cdist(x, x, m, **k)))(p)
        assert np.all(np.isfinite(g)) and np.all(np.isfinite(h)), metric
    # the equal pair contributes 0 (JAX's safe where): only the pairs with the third row count
    g = fg.grad(lambda x: np.sum(sd.pdist(x)))(p)
    np.testing.assert_allclose(g[0], p[0] / np.linalg.norm(p[0]))


def test_plain_calls_and_errors():
    np.testing.assert_array_equal(fsd.cdist(A, B), sd.cdist(A, B))
    with pytest.raises(TypeError, match="hamming"):
        fg.grad(lambda x: np.sum(sd.pdist(x, "hamming")))(A)
    with pytest.raises(TypeError, match="out"):
        fg.grad(lambda x: np.sum(sd.pdist(x, out=np.empty(10))))(A)
    with pytest.raises(TypeError, match="w"):
        fg.grad(lambda x: np.sum(sd.pdist(x, "cosine", w=W)))(A)


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_cdist(a, b):
        d2 = jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)
        return jnp.sqrt(d2)

    ours = fg.grad(lambda a: np.sum(sd.cdist(a, B) ** 3))(A)
    theirs = jax.grad(lambda a: jnp.sum(jax_cdist(a, B) ** 3))(A)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-10)

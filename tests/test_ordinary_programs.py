"""Plain ``grad`` on ordinary programs (issue 16): large outer products are fused into the kernels
that consume them, a cotangent a matrix product needs is evaluated with the sums over its
domain, and every gradient is exact (against derivatives by hand and finite differences), on
both engines, with the small-array path on and off."""

import numpy as np
import pytest
import test_small_traces as small_traces

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import small
from fusegrad.memory import track_allocations

# the MLP and its gradient by hand, as test_small_traces has them
_kernels, mlp, mlp_by_hand = small_traces._kernels, small_traces.mlp, small_traces.mlp_by_hand


def _mlp_args(batch, n_in, hidden):
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal((n_in, hidden)) / np.sqrt(n_in),
        0.1 * rng.standard_normal(hidden),
        rng.standard_normal((hidden, 1)) / np.sqrt(hidden),
        0.1 * rng.standard_normal(1),
        rng.standard_normal((batch, n_in)),
        rng.standard_normal((batch, 1)),
    )


@pytest.mark.parametrize("eager_below", [small.DEFAULT_EAGER_BELOW, 0])
def test_a_large_mlp_fuses_its_outer_product_and_bias_sum(engine, eager_below, monkeypatch):
    # 2304 x 128 hidden activations: above the small-array path, so lazy and fused
    monkeypatch.setattr(small, "EAGER_BELOW", eager_below)
    args = _mlp_args(2304, 20, 128)
    with fl.recording() as rec:
        got = fg.grad(mlp, argnums=(0, 1, 2, 3))(*args)
    for g, want in zip(got, mlp_by_hand(*args)):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-13)
    big = [k for k in _kernels(rec) if k["domain"] == (2304, 128)]
    # the forward's tanh with its row products with W2 (h @ W2: no GEMV reading h back), then
    # one pass for dZ = (dY W2ᵀ)(1 - h²), b1's column sum and W2's (hᵀ dY, a column sum of
    # h * dY): the outer product dY W2ᵀ is never stored, dZ is not read back for b1's sum, nor
    # h for W2's
    assert len(big) == 2
    forward, backward = big
    assert sorted(o[0] for o in forward["outputs"]) == ["map", "sum"]
    assert sorted(o[0] for o in backward["outputs"]) == ["map", "sum", "sum"]


def test_a_large_mlp_frees_its_first_product_after_the_forward_kernel(engine):
    # X @ W1 is dead once tanh(X @ W1 + b1) is computed: neither the node of tanh (a computed
    # map forgets its arguments) nor the pullback of + b1 (its partials read no argument) keeps
    # it, so the backward kernel's output can take its memory. The peak is two activation
    # arrays (tanh's output and dZ) and small change, where three were alive before.
    args = _mlp_args(2304, 20, 128)
    g = fg.grad(mlp, argnums=(0, 1, 2, 3))
    g(*args)  # (compiled, caches warm)
    with track_allocations() as report:
        got = g(*args)
    activations = 2304 * 128 * 8
    assert report.peak_bytes < 2.6 * activations
    for g_, want in zip(got, mlp_by_hand(*args)):
        np.testing.assert_allclose(g_, want, rtol=1e-10, atol=1e-13)


def test_a_computed_map_forgets_its_arguments_and_stays_exact():
    # the node keeps its value; an equal expression built later is a new node (the old one left
    # the hash-consing table, whose keys are the arguments' identities) with the same value
    x = np.linspace(-2.0, 2.0, 7)
    with small.fusing():
        lx = fl.asarray(x)
        t = np.tanh(lx * 2.0 + 1.0)
        first = np.asarray(t)
        assert t.args == ()
        again = np.tanh(lx * 2.0 + 1.0)
        assert again is not t
        np.testing.assert_array_equal(np.asarray(again), first)
        np.testing.assert_array_equal(np.asarray(t * 3.0), first * 3.0)  # read as a value
        np.testing.assert_array_equal(np.asarray(t[::-1] + t), first[::-1] + first)
    np.testing.assert_allclose(first, np.tanh(x * 2.0 + 1.0), rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("vector", [False, True])
def test_a_lazy_matrix_times_a_column_is_its_row_sums(engine, dtype, vector):
    # h = tanh(X @ W + c) is not evaluated when h @ w is taken: the product is computed in the
    # pass that evaluates h, as sum(h * wᵀ, axis=1), and h is kept for the pullback
    rng = np.random.default_rng(3)
    X, W = rng.standard_normal((300, 7)).astype(dtype), rng.standard_normal((7, 40)).astype(dtype)
    c = rng.standard_normal(40).astype(dtype)
    w = rng.standard_normal(40 if vector else (40, 1)).astype(dtype)

    def f(W, c, w):
        h = np.tanh(X @ W + c)
        return np.sum(np.sin(h @ w)) + np.sum(h**2)

    with fl.recording() as rec:
        value, (gW, gc, gw) = fg.value_and_grad(f, argnums=(0, 1, 2))(W, c, w)
    h = np.tanh(X @ W + c)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(value, f(W, c, w), **tol)
    dy = np.cos(h @ w)
    dh = (dy[:, None] * w[None, :] if vector else dy @ w.T) + 2 * h
    dz = dh * (1 - h**2)
    np.testing.assert_allclose(gW, X.T @ dz, **tol)
    np.testing.assert_allclose(gc, dz.sum(axis=0), **tol)
    np.testing.assert_allclose(gw, h.T @ dy, **tol)
    assert all(g.dtype == dtype for g in (gW, gc, gw))
    # one forward kernel over h's domain writes h and its row products: no product reads h back
    forward = [k for k in _kernels(rec) if k["domain"] == (300, 40)][0]
    assert sorted(o[0] for o in forward["outputs"]) == ["map", "sum"]


_X = np.random.default_rng(4).standard_normal((50, 30))
_NO_LAZY_CASE = {
    "two columns": lambda W: np.exp(_X * W) @ np.ones((30, 2)),
    "complex": lambda W: np.abs(np.exp(1j * _X * W) @ np.ones((30, 1))),
    "float32 column": lambda W: np.exp(_X * W) @ np.ones((30, 1), np.float32),
    "on the right": lambda W: np.ones((1, 50)) @ np.exp(_X * W),
}


@pytest.mark.parametrize("case", sorted(_NO_LAZY_CASE))
def test_a_lazy_matrix_product_with_no_lazy_case_is_unchanged(engine, case):
    # matmul's rule on the evaluated matrix, checked against NumPy and finite differences
    rng = np.random.default_rng(5)
    g = _NO_LAZY_CASE[case]

    def f(W):
        return np.sum(np.sin(g(W)))

    W = 0.1 * rng.standard_normal((50, 30))
    value, gW = fg.value_and_grad(f)(W)
    np.testing.assert_allclose(value, f(W), rtol=1e-12)
    d = rng.standard_normal(W.shape)
    eps = 1e-6
    fd = (f(W + eps * d) - f(W - eps * d)) / (2 * eps)
    np.testing.assert_allclose(np.sum(gW * d), fd, rtol=1e-6)

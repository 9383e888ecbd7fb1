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
    # 1024 x 128 hidden activations: above the small-array path, so lazy and fused
    monkeypatch.setattr(small, "EAGER_BELOW", eager_below)
    args = _mlp_args(1024, 20, 128)
    with fl.recording() as rec:
        got = fg.grad(mlp, argnums=(0, 1, 2, 3))(*args)
    for g, want in zip(got, mlp_by_hand(*args)):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-13)
    big = [k for k in _kernels(rec) if k["domain"] == (1024, 128)]
    # the forward's tanh, then one pass for dZ = (dY W2ᵀ)(1 - h²), b1's column sum and W2's
    # (hᵀ dY, a column sum of h * dY): the outer product dY W2ᵀ is never stored, dZ is not read
    # back for b1's sum, nor h for W2's (no GEMV of its own)
    assert len(big) == 2
    backward = big[1]
    assert sorted(o[0] for o in backward["outputs"]) == ["map", "sum", "sum"]


@pytest.mark.parametrize("eager_below", [small.DEFAULT_EAGER_BELOW, 0])
def test_outer_products_on_either_side_match_finite_differences(engine, eager_below, monkeypatch):
    monkeypatch.setattr(small, "EAGER_BELOW", eager_below)
    rng = np.random.default_rng(2)
    u = rng.standard_normal((1, 300))  # one row: the cotangent of V is the outer product uᵀ dY
    V = rng.standard_normal((300, 280)) / 20
    c = rng.standard_normal((280, 1))  # one column: the cotangent of H is dY cᵀ

    def f(u, V, c):
        H = np.sin(np.ones((400, 1)) @ (u @ V))  # (400, 280): an outer product forward too
        return np.sum(np.cos(H @ c))

    gu, gV, gc = fg.grad(f, argnums=(0, 1, 2))(u, V, c)
    row = u @ V
    H = np.sin(np.ones((400, 1)) @ row)
    dH = -np.sin(H @ c) @ c.T  # (400, 280)
    drow = np.sum(dH * np.cos(row), axis=0, keepdims=True)
    np.testing.assert_allclose(gV, u.T @ drow, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gu, drow @ V.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gc, H.T @ -np.sin(H @ c), rtol=1e-10, atol=1e-12)
    # and a central difference along a random direction of V
    d = rng.standard_normal(V.shape)
    eps = 1e-6
    fd = (f(u, V + eps * d, c) - f(u, V - eps * d, c)) / (2 * eps)
    np.testing.assert_allclose(np.sum(gV * d), fd, rtol=1e-6)


def test_the_cotangent_of_untraced_data_is_not_computed(monkeypatch):
    # X is data (not differentiated): its cotangent dY @ W1ᵀ would be a 2048 x 200 product
    monkeypatch.setattr(small, "EAGER_BELOW", small.DEFAULT_EAGER_BELOW)
    args = _mlp_args(2048, 200, 64)
    with fl.recording() as rec:
        fg.grad(mlp, argnums=(0, 1, 2, 3))(*args)
    assert not [k for k in _kernels(rec) if k["domain"][-1] == 200]

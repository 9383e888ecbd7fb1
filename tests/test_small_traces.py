"""The small-array path inside traces: ``grad``/``vjp`` run ops on small concrete values eagerly
(no graph, no plan, no kernel), give the gradients of the fused path, and keep fused laziness
for large arrays and for anything that touches one."""

import numpy as np
import pytest
import test_jit_fuzz as fuzz
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import small
from fusegrad.memory import track_allocations


def _kernels(rec):
    return [e for e in rec if e["event"] == "kernel"]


def mlp(W1, b1, W2, b2, X, y):
    return np.mean((np.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)


def mlp_by_hand(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    r = h @ W2 + b2 - y
    dr = 2 * r / r.size
    dh = (dr @ W2.T) * (1 - h**2)
    return X.T @ dh, dh.sum(0), h.T @ dr, dr.sum(0)


def rnn(Wx, Wh, b, wo, xs, y):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for x in xs:
        h = np.tanh(x @ Wx + h @ Wh + b)
    return np.mean((h @ wo - y) ** 2)


def ema(x):
    s = 0.0
    for v in x:
        s = 0.9 * s + 0.1 * v
    return s


def _both_ways(fun, args, argnums):
    """The gradient with the path on and with it off (fused at every size)."""
    small.EAGER_BELOW = small.DEFAULT_EAGER_BELOW
    try:
        on = fg.grad(fun, argnums=argnums)(*args)
    finally:
        small.EAGER_BELOW = 0
    off = fg.grad(fun, argnums=argnums)(*args)
    return on, off


def test_the_mlp_is_computed_eagerly_and_matches_by_hand(small_path):
    rng = np.random.default_rng(0)
    args = (
        rng.standard_normal((10, 16)),
        rng.standard_normal(16),
        rng.standard_normal((16, 1)),
        rng.standard_normal(1),
        rng.standard_normal((32, 10)),
        rng.standard_normal((32, 1)),
    )
    with fl.recording() as rec:
        got = fg.grad(mlp, argnums=(0, 1, 2, 3))(*args)
    assert not _kernels(rec)
    for g, w in zip(got, mlp_by_hand(*args)):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@given(
    st.integers(1, 6),
    st.integers(1, 5),
    st.integers(1, 8),
    st.integers(0, 2**32 - 1),
)
def test_rnn_gradients_agree_with_the_fused_path(steps, batch, hidden, seed):
    rng = np.random.default_rng(seed)
    args = (
        rng.standard_normal((3, hidden)),
        rng.standard_normal((hidden, hidden)) * 0.5,
        rng.standard_normal(hidden),
        rng.standard_normal((hidden, 1)),
        rng.standard_normal((steps, batch, 3)),
        rng.standard_normal((batch, 1)),
    )
    on, off = _both_ways(rnn, args, (0, 1, 2, 3))
    for a, b in zip(on, off):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_ema_gradient_is_exact(small_path):
    x = np.linspace(-1.0, 1.0, 50)
    g = fg.grad(ema)(x)
    np.testing.assert_allclose(g, 0.1 * 0.9 ** np.arange(49, -1, -1), rtol=1e-12)


def test_anything_that_touches_a_large_array_stays_fused(small_path):
    v = np.linspace(-1.0, 1.0, 400)  # 160,000 pairs
    w = np.linspace(0.5, 1.5, 3)  # small, and used eagerly

    def f(v, w):
        s = np.sum(w * w)  # small: eager
        return np.sum(np.tanh(s * (v[:, None] - v[None, :])))

    fg.grad(f, argnums=(0, 1))(v, w)  # compiles the kernels (the compiler's memory is not ours)
    with fl.recording() as rec, track_allocations() as report:
        gv, gw = fg.grad(f, argnums=(0, 1))(v, w)
    assert _kernels(rec)
    assert report.peak_bytes < 400 * 400 * 8  # no N x N temporary
    s = np.sum(w * w)
    d = 1 - np.tanh(s * (v[:, None] - v[None, :])) ** 2
    np.testing.assert_allclose(gv, s * (d.sum(1) - d.sum(0)), rtol=1e-9, atol=1e-9)
    dsum = np.sum(d * (v[:, None] - v[None, :]))
    np.testing.assert_allclose(gw, 2 * w * dsum, rtol=1e-9, atol=1e-9)


def test_vjp_pullback_sees_call_time_values(small_path):
    x = np.linspace(0.0, 1.0, 5)
    out, pull = fg.vjp(lambda x: np.sin(x) * x, x)
    x[:] = 7.0  # the pullback works on copies
    (g,) = pull(np.ones(5))
    x0 = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(g, np.cos(x0) * x0 + np.sin(x0))


def test_grad_of_grad_with_the_path_on(small_path):
    x = np.linspace(-1.0, 1.0, 7)
    h = fg.grad(lambda x: np.sum(fg.grad(lambda y: np.sum(np.tanh(y) ** 2))(x)))(x)
    t = np.tanh(x)
    # d/dx of 2 t (1 - t^2) = 2 (1 - t^2) (1 - 3 t^2)
    np.testing.assert_allclose(h, 2 * (1 - t**2) * (1 - 3 * t**2), rtol=1e-12)


@pytest.mark.parametrize("n", [10, 1000, small.DEFAULT_EAGER_BELOW - 1])
def test_w1_below_the_threshold_is_eager_and_exact(small_path, n):
    x = np.linspace(0.0, 1.0, n)
    with fl.recording() as rec:
        g = fg.grad(lambda x: np.sum((1 - x) / 2))(x)
    assert not _kernels(rec)
    np.testing.assert_array_equal(g, np.full(n, -0.5))


def test_gradients_are_the_callers_own_arrays(small_path):
    # Eager cotangents may be read-only broadcasts (of a sum), passed through (x + 0), or handed
    # to two arguments (x + y): what grad and vjp return is fresh, writable and unshared.
    x = np.linspace(0.0, 1.0, 5)
    g = fg.grad(np.sum)(x)
    assert g.flags.writeable and g.base is None
    gx, gy = fg.grad(lambda x, y: np.sum(x + y), argnums=(0, 1))(x, x.copy())
    assert gx is not gy and not np.shares_memory(gx, gy)
    gx += 1.0
    np.testing.assert_array_equal(gy, 1.0)
    ct = np.ones(5)
    _, pull = fg.vjp(lambda x: x + 0.0, x)
    (gx,) = pull(ct)
    assert not np.shares_memory(gx, ct)
    gx[:] = 3.0
    np.testing.assert_array_equal(ct, 1.0)


def test_reductions_broadcast_their_cotangent_back(small_path):
    x = np.random.default_rng(3).standard_normal((3, 4))
    cases = {
        lambda x: np.sum(np.sum(x, axis=0) ** 2): 2 * np.sum(x, axis=0)[None, :] + 0 * x,
        lambda x: np.sum(np.sum(x, axis=1, keepdims=True) ** 2): 2 * np.sum(x, 1, keepdims=True)
        + 0 * x,
        lambda x: np.sum(np.mean(x, axis=(0, 1)) ** 2): 2 * np.mean(x) / x.size + 0 * x,
        lambda x: np.sum(np.max(x, axis=1)): (x == x.max(1, keepdims=True)).astype(float),
    }
    for f, want in cases.items():
        g = fg.grad(f)(x)
        assert type(g) is np.ndarray and g.shape == x.shape
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)


@pytest.mark.property
@given(program=fuzz.programs, seed=st.integers(0, 2**16))
def test_random_programs_agree_with_the_fused_path(program, seed):
    # The programs of test_jit_fuzz (elementwise ops, broadcasts, reductions, gathers, matmul,
    # solve, sort, reads into Python, a Python-float argument): small path on and off agree,
    # values and types.
    rng = np.random.default_rng(seed)
    x, y, s = rng.uniform(-1.5, 1.5, fuzz.N), rng.uniform(-2.0, 2.0, fuzz.N), 0.75
    on, off = _both_ways(lambda x, y, s: fuzz.run(program, x, y, s), (x, y, s), (0, 2))
    fuzz._close(on, off)


def _logistic(w, X, y):
    return np.mean(np.logaddexp(0, -y * (X @ w))) + 0.5 * np.sum(w**2)


def _logistic_hessian(w, X, y):
    s = 1 / (1 + np.exp(y * (X @ w)))
    return (X.T * (s * (1 - s))) @ X / len(y) + np.eye(len(w))


def test_jvp_and_hvp_of_small_arrays_run_eagerly_and_match_by_hand(small_path):
    """An hvp (forward over reverse) over 8 weights took ~2.6 ms with its jvp fused at every
    size, ~0.8 ms eagerly (autograd's reverse over reverse ~0.6 ms)."""
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((40, 8)), np.sign(rng.standard_normal(40))
    w, v = rng.standard_normal(8) * 0.3, rng.standard_normal(8)
    with fl.recording() as rec:
        hv = fg.hvp(lambda u: _logistic(u, X, y), (w,), (v,))
        out, dot = fg.jvp(lambda u: np.tanh(X @ u), (w,), (v,))
    assert not _kernels(rec)
    np.testing.assert_allclose(hv, _logistic_hessian(w, X, y) @ v, rtol=1e-12)
    t = np.tanh(X @ w)
    np.testing.assert_allclose(out, t, rtol=1e-15)
    np.testing.assert_allclose(dot, (1 - t**2) * (X @ v), rtol=1e-12)
    small.EAGER_BELOW = 0  # the fused path gives the same
    fused = fg.hvp(lambda u: _logistic(u, X, y), (w,), (v,))
    np.testing.assert_allclose(fused, hv, rtol=1e-12)

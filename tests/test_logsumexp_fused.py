"""``scipy.special.logsumexp`` of a broadcast blow-up (``-(x[:, None] - y[None, :])**2``): fused
passes that store nothing of the blow-up's size, forward and backward (``rules.scans``'s lazy
case), with SciPy's values and the softmax as the gradient."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.memory import track_allocations
from fusegrad.rules import scans
from fusegrad.scipy import _dispatch
from fusegrad.testing import check_grads

SCIPY_LOGSUMEXP = _dispatch.original(sp.logsumexp)


@pytest.fixture
def fused_at_every_size(monkeypatch):
    """The lazy case takes blow-ups of any size (by default only those above 1 MiB)."""
    monkeypatch.setattr(scans, "LSE_STORE_BYTES", 0)


def _pairs(x, y):
    return -((x[:, None] - y[None, :]) ** 2)


def _softmax(a, axis):
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 9),
    k=st.integers(1, 9),
    axis=st.sampled_from([0, 1, -1, None, (0, 1)]),
    keepdims=st.booleans(),
    dtype=st.sampled_from([np.float64, np.float32]),
    seed=st.integers(0, 2**16),
)
def test_value_and_gradient_are_scipys_and_the_softmax(n, k, axis, keepdims, dtype, seed):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scans, "LSE_STORE_BYTES", 0)
        _value_and_gradient(n, k, axis, keepdims, dtype, seed)


def _value_and_gradient(n, k, axis, keepdims, dtype, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(0, 2, n).astype(dtype), rng.normal(0, 2, k).astype(dtype)
    x[rng.integers(0, n)] = y[0]  # a tie of the maximum in some row
    w = rng.normal(size=np.shape(SCIPY_LOGSUMEXP(_pairs(x, y), axis=axis, keepdims=keepdims)))

    def f(x, y):
        return np.sum(w * sp.logsumexp(_pairs(x, y), axis=axis, keepdims=keepdims))

    got = fg.value_and_grad(lambda x, y: sp.logsumexp(_pairs(x, y), axis=axis, keepdims=keepdims))
    a = _pairs(x, y)
    want = SCIPY_LOGSUMEXP(a, axis=axis, keepdims=keepdims)
    value = fg.jvp(lambda x: sp.logsumexp(_pairs(x, y), axis=axis, keepdims=keepdims), (x,), (x,))
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(value[0], want, rtol=8 * eps, atol=8 * eps)
    assert np.asarray(value[0]).dtype == want.dtype
    if np.ndim(want) == 0:
        np.testing.assert_allclose(got(x, y)[0], want, rtol=8 * eps, atol=8 * eps)
    # d/da = w * softmax(a); a = -(x_i - y_j)^2: dx_i = sum_j -2 (x_i - y_j) g_ij, dy_j = -sum_i
    ax = (0, 1) if axis is None else axis
    g = np.expand_dims(w, ax) if not keepdims and np.ndim(w) < 2 else w
    g = g * _softmax(a.astype(np.float64), ax)
    d = x[:, None].astype(np.float64) - y[None, :]
    gx, gy = fg.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.sum(-2 * d * g, axis=1), rtol=64 * eps, atol=64 * eps)
    np.testing.assert_allclose(gy, np.sum(2 * d * g, axis=0), rtol=64 * eps, atol=64 * eps)
    assert gx.dtype == x.dtype and gy.dtype == y.dtype


def test_both_engines_and_finite_differences(engine, fused_at_every_size):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=7), rng.normal(size=5)
    check_grads(lambda x, y: np.sum(sp.logsumexp(_pairs(x, y), axis=1) ** 2))(x, y)
    check_grads(lambda x, y: sp.logsumexp(_pairs(x, y)))(x, y)
    want = SCIPY_LOGSUMEXP(_pairs(x, y), axis=0)
    np.testing.assert_allclose(fg.jvp(lambda x: sp.logsumexp(_pairs(x, y), axis=0), (x,), (x,))[0],
                               want, rtol=1e-14)  # fmt: skip


def test_infinities_and_nan_as_scipy(fused_at_every_size):
    x = np.array([np.inf, -np.inf, np.nan, 1.0, 2.0])
    y = np.array([0.0, -np.inf, 3.0])

    def lse(x, y, axis):
        return sp.logsumexp(x[:, None] + y[None, :], axis=axis)

    with np.errstate(invalid="ignore"):
        for axis in (0, 1, None):
            got = fg.jvp(lambda x, axis=axis: lse(x, y, axis), (x,), (np.zeros_like(x),))[0]
            want = SCIPY_LOGSUMEXP(x[:, None] + y[None, :], axis=axis)
            np.testing.assert_array_equal(got, want)


def test_weights_sum_to_one_at_large_magnitudes(fused_at_every_size):
    # exp(a - y) with y rounded at the scale of max(a) gave [1, 1] for [1e17, 1e17]
    x = np.array([1e17, 1e17 + 16.0])
    y = np.array([0.0, 0.0])
    g = fg.grad(lambda y: np.sum(sp.logsumexp(x[:, None] + y[None, :], axis=1)))(y)
    np.testing.assert_allclose(g, [1.0, 1.0], rtol=4 * np.finfo(float).eps)
    g = fg.grad(lambda x: sp.logsumexp(x[:, None] + y[None, :]))(x)
    t = np.exp(-16.0)
    np.testing.assert_allclose(g, [t / (1 + t), 1 / (1 + t)], rtol=16 * np.finfo(float).eps)


def test_pairwise_gradient_stores_nothing_of_the_blow_ups_size():
    """At the default threshold: 700 x 700 float64 (3.9 MB) is a blow-up the case fuses."""
    n = 700
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=n), rng.normal(size=n)

    def f(x, y):
        return np.sum(sp.logsumexp(_pairs(x, y), axis=1))

    g = fg.grad(f, argnums=(0, 1))
    g(x, y)
    with track_allocations() as r:
        gx, gy = g(x, y)
    assert r.arrays_at_least(n * n * 8 // 8) == 0, r
    a = _pairs(x, y)
    s = _softmax(a, 1)
    d = x[:, None] - y[None, :]
    np.testing.assert_allclose(gx, np.sum(-2 * d * s, axis=1), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gy, np.sum(2 * d * s, axis=0), rtol=1e-12, atol=1e-13)


def test_jit_records_the_fused_passes_and_replays_mutated_inputs(fused_at_every_size):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=6), rng.normal(size=4)

    def f(x, y):
        return np.sum(np.tanh(sp.logsumexp(_pairs(x, y), axis=0)))

    g = fg.jit(fg.grad(f, argnums=(0, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "will run uncompiled" would be a warning
        for _ in range(4):
            got = g(x, y)
            want = fg.grad(f, argnums=(0, 1))(x, y)
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
            x *= 1.3
            y[1] += 0.5


def test_array_arguments_take_the_rule_with_scipys_values(small_path, monkeypatch):
    """On the small-array path the argument is an array: the rule, SciPy's values bit for bit
    (the case is for unevaluated arguments)."""
    calls = []
    monkeypatch.setattr(scans, "_logsumexp_fused", lambda *a, **k: calls.append(a))
    x, y = np.linspace(-1, 1, 5), np.linspace(0, 2, 3)
    v, _ = fg.value_and_grad(lambda x: np.sum(sp.logsumexp(_pairs(x, y), axis=1)))(x)
    assert calls == []
    assert v == np.sum(SCIPY_LOGSUMEXP(_pairs(x, y), axis=1))


def _hmm(log_a, obs_terms):
    alpha = obs_terms[0]
    for t in range(1, obs_terms.shape[0]):
        alpha = sp.logsumexp(alpha[:, None] + log_a, axis=0) + obs_terms[t]
    return sp.logsumexp(alpha)


def test_a_chain_of_logsumexps_replays_as_kernels():
    """Under jit an HMM's steps are recorded kernels (the argument, max and sums stored), not
    Python calls of the rule; the cotangents down the chain are stored too (lazy, they nested
    into one kernel growing with the steps)."""
    rng = np.random.default_rng(4)
    log_a, obs = rng.normal(0, 0.3, (4, 4)), rng.normal(size=(30, 4))
    g = fg.jit(fg.grad(_hmm))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            np.testing.assert_allclose(g(log_a, obs), fg.grad(_hmm)(log_a, obs), rtol=1e-12)
            log_a = log_a * 1.1
    program = next(e for e in g.cache_info().entries)
    assert program.replayable
    from fusegrad.lazy import replay

    (prog,) = [p for p in _programs(replay) if p.n_inputs == 2]
    calls = [s for s in prog.steps if s[0] == "call"]
    assert not calls, [getattr(s[1], "__name__", s[1]) for s in calls]
    assert max(len(s[1].program) for s in prog.steps if s[0] != "call" and s[1]) < 40


def _programs(replay):
    import gc

    # type(), not isinstance(): another test's dead weakref.proxy among the objects raises
    # ReferenceError when isinstance looks through it
    return [o for o in gc.get_objects() if type(o) is replay.Program]


def test_a_softmax_cross_entropy_in_kernels_matches_scipy():
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(300, 8)), rng.normal(size=(8, 50)) * 0.3
    onehot = np.eye(50)[rng.integers(0, 50, 300)]

    def loss(w):
        z = x @ w
        return -np.sum(onehot * (z - sp.logsumexp(z, axis=1, keepdims=True)))

    z = x @ w
    want_value = -np.sum(onehot * (z - SCIPY_LOGSUMEXP(z, axis=1, keepdims=True)))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want_grad = x.T @ (e / e.sum(axis=1, keepdims=True) - onehot)
    for f in (fg.value_and_grad(loss), fg.jit(fg.value_and_grad(loss))):
        for _ in range(3):
            v, g = f(w)
            assert v == pytest.approx(want_value, rel=1e-13)
            np.testing.assert_allclose(g, want_grad, rtol=1e-11, atol=1e-12)


def test_a_slice_of_only_minus_inf_has_a_nan_derivative_and_no_warning():
    # an HMM's column of zero probabilities: SciPy's logsumexp raises no warning there, and the
    # gradient was computed with "invalid value encountered in subtract" (-inf - -inf)
    L, x = np.array([-np.inf, 0.3, -1.0]), np.array([0.5, 0.1, 0.7])

    def f(x):
        return np.sum(sp.logsumexp(np.stack([L, L + x]), axis=0))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = fg.grad(f)(x)
    w = np.exp(x[1:]) / (1 + np.exp(x[1:]))  # d/dx log(e^L + e^(L+x)) = e^x / (1 + e^x)
    assert np.isnan(g[0])  # 0/0, as JAX's
    np.testing.assert_allclose(g[1:], w, rtol=1e-14)

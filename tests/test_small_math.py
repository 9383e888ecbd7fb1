"""The small-array path's compiled transcendentals (``small.call_ufunc``, ``numba_eager``): once
hot, float64 ``tanh/exp/expm1/log/log1p`` of ``FAST_MATH_MIN`` points or more run in numba_math's
loops within 1 ulp of NumPy; everything else (other dtypes, small or strided arrays, the numpy
engine, cold ufuncs) is NumPy's own call; gradients through the loops are the fused path's."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.lazy import small
from fusegrad.lazy.engines import numba_engine
from fusegrad.lazy.engines.registry import HOT_CALLS

pytestmark = pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")

UFUNCS = [np.tanh, np.exp, np.expm1, np.log, np.log1p]


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Counts and loops as in a new process on a machine where they are used (x86-64 without
    AVX-512: ``small.numpy_math_is_scalar``)."""
    monkeypatch.setattr(small, "_fast_calls", {})
    monkeypatch.setattr(small, "_fast_loops", {})
    monkeypatch.setattr(small, "_LOOPED", set(small.LOOPABLE))


def test_loops_only_where_numpys_own_are_scalar(monkeypatch):
    import numpy._core._multiarray_umath as umath

    features = dict(umath.__cpu_features__)
    monkeypatch.setattr(small.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(umath, "__cpu_features__", {**features, "AVX512_SKX": False})
    assert small.numpy_math_is_scalar()
    monkeypatch.setattr(umath, "__cpu_features__", {**features, "AVX512_SKX": True})
    assert not small.numpy_math_is_scalar()
    monkeypatch.setattr(small.platform, "machine", lambda: "arm64")
    assert not small.numpy_math_is_scalar()


def test_without_loops_every_call_is_numpys(monkeypatch):
    monkeypatch.setattr(small, "_LOOPED", set())
    a = np.linspace(0.1, 2.0, 1024)
    for _ in range(2 * HOT_CALLS):
        np.testing.assert_array_equal(small.call_ufunc(np.tanh, [a]), np.tanh(a))
    assert not small._fast_loops


def _hot(uf):
    """Make ``uf`` hot on the path and return its compiled loop."""
    a = np.ones(small.FAST_MATH_MIN)
    for _ in range(HOT_CALLS):
        small.call_ufunc(uf, [a])
    return small._fast_loops[uf]


def _ulps(got, want):
    """Distance in float64 units in the last place; NaN and infinities must match exactly."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    spacing = np.spacing(np.abs(want[finite]))
    return np.abs(got[finite] - want[finite]) / np.where(spacing > 0, spacing, 5e-324)


@pytest.mark.parametrize("uf", UFUNCS, ids=lambda u: u.__name__)
def test_a_cold_ufunc_is_numpys_call_and_a_hot_one_is_the_loop(uf):
    a = np.linspace(0.1, 3.0, small.FAST_MATH_MIN)
    for _ in range(HOT_CALLS - 1):
        np.testing.assert_array_equal(small.call_ufunc(uf, [a]), uf(a))
    assert uf not in small._fast_loops
    small.call_ufunc(uf, [a])
    assert small._fast_loops[uf] is not None


@pytest.mark.parametrize("uf", UFUNCS, ids=lambda u: u.__name__)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40).filter(
        lambda s: np.prod(s) >= 256
    ),
    data=st.data(),
)
def test_hot_loops_are_within_one_ulp_of_numpy(uf, shape, data):
    _hot(uf)
    specials = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1.0, 710.0, -746.0])
    finite = st.floats(-800, 800, allow_nan=False, allow_infinity=False)
    a = data.draw(hnp.arrays(np.float64, shape, elements=st.one_of(finite, specials)))
    with np.errstate(all="ignore"):
        want = uf(a)
        got = small.call_ufunc(uf, [a])
    assert got.shape == a.shape and got.dtype == np.float64
    assert _ulps(got, want).max(initial=0) <= 1


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(lambda: np.linspace(0.1, 2, 512)[::2], id="strided"),
        pytest.param(lambda: np.linspace(0.1, 2, 512).reshape(16, 32).T, id="fortran"),
        pytest.param(lambda: np.linspace(0.1, 2, 512, dtype=np.float32), id="float32"),
        pytest.param(lambda: np.linspace(0.1, 2, small.FAST_MATH_MIN - 1), id="below-threshold"),
        pytest.param(lambda: np.linspace(0.1, 2, 512).view(_Sub), id="subclass"),
    ],
)
def test_other_arrays_take_numpys_call(case, monkeypatch):
    _hot(np.tanh)
    monkeypatch.setitem(small._fast_loops, np.tanh, _refuse)
    a = case()
    got = small.call_ufunc(np.tanh, [a])
    assert type(got) is type(np.tanh(a))
    np.testing.assert_array_equal(got, np.tanh(a))


class _Sub(np.ndarray):
    pass


def _refuse(a):
    raise AssertionError("the compiled loop ran on an array NumPy should have taken")


def test_the_numpy_engine_never_runs_a_loop(monkeypatch):
    a = np.linspace(0.1, 2.0, 1024)
    with fg.use_engine("numpy"):
        for _ in range(2 * HOT_CALLS):
            np.testing.assert_array_equal(small.call_ufunc(np.log, [a]), np.log(a))
    assert np.log not in small._fast_loops
    _hot(np.log)
    monkeypatch.setitem(small._fast_loops, np.log, _refuse)
    with fg.use_engine("numpy"):
        np.testing.assert_array_equal(small.call_ufunc(np.log, [a]), np.log(a))


def _rnn(Wx, Wh, b, wo, xs, y):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for x in xs:
        h = np.tanh(x @ Wx + h @ Wh + b)
    return np.mean(np.log1p(np.exp(h @ wo - y)))


def _rnn_by_hand(Wx, Wh, b, wo, xs, y):
    hs = [np.zeros((xs.shape[1], Wh.shape[0]))]
    for x in xs:
        hs.append(np.tanh(x @ Wx + hs[-1] @ Wh + b))
    z = hs[-1] @ wo - y
    dz = 1 / (1 + np.exp(-z)) / z.size
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    dh = dz @ wo.T
    for t in range(len(xs) - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)
        dWx += xs[t].T @ da
        dWh += hs[t].T @ da
        db += da.sum(0)
        dh = da @ Wh.T
    return dWx, dWh, db, hs[-1].T @ dz


def test_rnn_gradient_through_hot_loops_is_the_hand_derived_one(small_path):
    rng = np.random.default_rng(0)
    hidden, batch = 64, 16  # 1024-point tanh per step: the loops' case
    args = (
        rng.standard_normal((8, hidden)) * 0.3,
        rng.standard_normal((hidden, hidden)) * 0.1,
        rng.standard_normal(hidden),
        rng.standard_normal((hidden, batch)) * 0.2,
        rng.standard_normal((3 * HOT_CALLS, batch, 8)),
        rng.standard_normal((batch, batch)),
    )
    with fg.use_engine("numba"):
        got = fg.grad(_rnn, argnums=(0, 1, 2, 3))(*args)
    assert np.tanh in small._fast_loops  # 24 steps' tanh ran in the loop
    for g, w in zip(got, _rnn_by_hand(*args)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def _force_logaddexp_speed(monkeypatch, slow: bool) -> None:
    from fusegrad.lazy.engines import numpy_speed

    monkeypatch.setattr(numpy_speed, "_slow", {np.logaddexp: slow})


@pytest.mark.parametrize("order", ["number first", "array first", "two arrays"])
def test_logaddexp_runs_in_a_loop_where_numpy_computes_it_slowly(monkeypatch, order):
    _force_logaddexp_speed(monkeypatch, True)
    rng = np.random.default_rng(7)
    z = np.concatenate([rng.standard_normal(2000) * 4, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    other = rng.standard_normal(z.size) * 4
    args = {"number first": [0.0, z], "array first": [z, 1.5], "two arrays": [z, other]}[order]
    with np.errstate(invalid="ignore"):  # NumPy's nan, and its warning before the loop is hot
        want = np.logaddexp(*args)
        for _ in range(HOT_CALLS + 1):
            got = small.call_ufunc(np.logaddexp, list(args))
    assert np.logaddexp in small._fast_loops  # hot: the loop ran the last call
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    a, b = np.broadcast_arrays(*args)
    finite = np.isfinite(a) & np.isfinite(b)
    exact = ~finite & ~np.isnan(want)  # an infinite operand: NumPy's value exactly
    np.testing.assert_array_equal(got[exact], want[exact])
    # within 2 ulp of the largest operand (the result can cancel to near 0, as NumPy's does)
    scale = np.spacing(np.maximum(np.maximum(np.abs(a), np.abs(b)), np.abs(want)))
    assert np.all(np.abs(got[finite] - want[finite]) <= 2 * scale[finite])


def test_logaddexp_stays_numpys_where_numpy_is_fast_and_for_other_operands(monkeypatch):
    _force_logaddexp_speed(monkeypatch, False)
    z = np.linspace(-3.0, 3.0, 1024)
    for _ in range(2 * HOT_CALLS):
        np.testing.assert_array_equal(small.call_ufunc(np.logaddexp, [0.0, z]), np.logaddexp(0, z))
    assert not small._fast_loops
    _force_logaddexp_speed(monkeypatch, True)
    others = [[z[::2], 0.0], [z.astype(np.float32), 0.0], [z, z[:1]], [z[:100], 0.0], [z, True]]
    for args in others:  # strided, float32, broadcast, small, a bool: NumPy's own call
        for _ in range(2 * HOT_CALLS):
            np.testing.assert_array_equal(small.call_ufunc(np.logaddexp, args), np.logaddexp(*args))
    assert not small._fast_loops


def test_the_logistic_loss_gradient_through_the_loop_is_exact(monkeypatch, small_path):
    _force_logaddexp_speed(monkeypatch, True)
    rng = np.random.default_rng(3)
    X, t = rng.standard_normal((3000, 5)), np.sign(rng.standard_normal(3000))
    w = rng.standard_normal(5) / 3

    def loss(w):
        return np.mean(np.logaddexp(0.0, -t * (X @ w)))

    g = fg.grad(loss)
    for _ in range(HOT_CALLS + 1):
        got = g(w)
    assert np.logaddexp in small._fast_loops
    z = -t * (X @ w)
    want = X.T @ (-t / (1 + np.exp(-z))) / len(t)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)

"""Reverse rules of fusegrad.rules.scans: cumsum, cumprod, diff, sort, logsumexp, linalg.norm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.rules.scans  # noqa: F401  (registers the rules)
from fusegrad.rules.registry import rrule
from fusegrad.scipy import _dispatch
from fusegrad.tangents import NoTangent, ZeroTangent
from fusegrad.testing import check_grads, check_rrule

DTYPES = [np.float64, np.float32]


def rand(rng, shape, dtype=np.float64):
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


# ------------------------------------------------------------------------------ cumsum


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [((5,), (), {}), ((2, 3), (), {}), ((2, 3), (1,), {}), ((2, 3, 2), (), {"axis": -2})],
)
def test_cumsum(shape, args, kw, dtype):
    rng = np.random.default_rng(0)
    check_rrule(np.cumsum, rand(rng, shape, dtype), *args, **kw)


# ----------------------------------------------------------------------------- cumprod


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [((5,), (), {}), ((2, 3), (), {}), ((3, 4), (1,), {}), ((3, 4), (), {"axis": 0})],
)
def test_cumprod(shape, args, kw, dtype):
    rng = np.random.default_rng(1)
    x = np.asarray(rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape), dtype)
    check_rrule(np.cumprod, x, *args, **kw)


@pytest.mark.parametrize(
    "x,axis",
    [
        (np.array([2.0, 0.0, 3.0, 4.0]), None),
        (np.array([0.0, 0.0, 3.0]), None),
        (np.array([[1.5, 0.0, 2.0], [0.0, 3.0, -1.0]]), 1),
        (np.array([[1.5, 0.0, 2.0], [0.0, 3.0, -1.0]]), 0),
    ],
)
def test_cumprod_with_zeros(x, axis):
    check_rrule(np.cumprod, x, axis=axis)


# -------------------------------------------------------------------------------- diff


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [
        ((5,), (), {}),
        ((5,), (2,), {}),
        ((3, 4), (), {"axis": 0}),
        ((3, 4), (3, 1), {}),
        ((4,), (), {"prepend": 1.0}),
        ((4,), (), {"append": np.array([1.0, 2.0])}),
        ((2, 3), (), {"prepend": np.zeros((2, 1)), "append": 3.0}),
    ],
)
def test_diff(shape, args, kw, dtype):
    rng = np.random.default_rng(2)
    check_rrule(np.diff, rand(rng, shape, dtype), *args, **kw)


@pytest.mark.parametrize(
    "f",
    [
        lambda a: np.diff(a, prepend=a[0] * 2.0),
        lambda a: np.diff(a, append=a[:1] ** 2),
        lambda a: np.diff(a, 2, prepend=np.sin(a[:2]), append=a[-1]),
        lambda a: np.diff(np.outer(a, a[:3]), axis=0, prepend=a[None, :3] * 0.5),
        lambda a: np.diff(np.outer(a, a[:3]), 1, 1, prepend=a[:, None], append=a[0]),
    ],
    ids=["prepend scalar", "append array", "n=2 both", "axis 0 row", "axis 1 both"],
)
def test_diff_with_traced_prepend_and_append(f):
    # prepend and append are joined to a, and differentiated with it (the rule took them as
    # constants: a traced one's gradient was dropped)
    a = np.array([1.0, 4.0, 9.0, 16.0])
    want = f(a)
    np.testing.assert_allclose(fg.jit(f)(a), want, rtol=1e-15)
    check_grads(lambda a: np.sum(f(a) * np.arange(1.0, want.size + 1).reshape(want.shape)))(a)


# -------------------------------------------------------------------------------- sort


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [((6,), (), {}), ((3, 4), (), {}), ((3, 4), (0,), {}), ((3, 4), (), {"axis": None})],
)
def test_sort(shape, args, kw, dtype):
    rng = np.random.default_rng(3)
    check_rrule(np.sort, rand(rng, shape, dtype), *args, **kw)


def test_sort_is_a_permutation_of_dy():
    x = np.array([3.0, 1.0, 2.0])
    y, pb = rrule(np.sort, x)
    (g,) = pb(np.array([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(g, [30.0, 10.0, 20.0])


def test_sort_ties_give_a_permutation():
    x = np.array([1.0, 1.0, 0.0])
    _, pb = rrule(np.sort, x)
    (g,) = pb(np.array([1.0, 2.0, 3.0]))
    assert sorted(g.tolist()) == [1.0, 2.0, 3.0]


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_sort_hypothesis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(4)
    # distinct values at least 0.5 apart: finite differences must not cross a swap of two
    # (normal draws over (4, 4, 3) had two within the step along axis 1)
    size = int(np.prod(shape))
    x = rng.permutation(size).reshape(shape) + 0.5 * rng.random(tuple(shape))
    check_rrule(np.sort, x, axis=axis)


# --------------------------------------------------------------------------- logsumexp

sp = pytest.importorskip("scipy.special")
scans = fusegrad.rules.scans
SCIPY_LOGSUMEXP = _dispatch.original(sp.logsumexp)  # SciPy's own, not fusegrad's dispatcher


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [
        ((5,), (), {}),
        ((3, 4), (), {}),
        ((3, 4), (1,), {}),
        ((3, 4), (), {"axis": 0, "keepdims": True}),
        ((2, 3, 4), (), {"axis": (0, 2)}),
        ((3, 4), (-1,), {"keepdims": True}),
    ],
)
def test_logsumexp(shape, args, kw, dtype):
    rng = np.random.default_rng(5)
    check_rrule(sp.logsumexp, rand(rng, shape, dtype), *args, **kw)


def test_logsumexp_b():
    rng = np.random.default_rng(6)
    a = rand(rng, (3, 4))
    b = rng.uniform(0.5, 2.0, (4,))
    check_rrule(sp.logsumexp, a, 1, b)  # b positional: it gets a cotangent
    check_rrule(sp.logsumexp, a, axis=1, b=b)  # b keyword: no cotangent
    check_rrule(sp.logsumexp, a, None, rng.uniform(0.5, 2.0, (3, 1)))


def test_logsumexp_softmax_hand_derived():
    x = np.array([1.0, 2.0, 3.0])
    _, pb = rrule(sp.logsumexp, x)
    (g,) = pb(1.0)
    np.testing.assert_allclose(g, np.exp(x) / np.exp(x).sum())


def test_logsumexp_return_sign_has_no_rule():
    assert rrule(sp.logsumexp, np.ones(3), return_sign=True) is None


_SPECIAL = st.sampled_from([np.inf, -np.inf, np.nan, 0.0, 700.0, -745.0, 1e308])


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3),
    dtype=st.sampled_from([np.float64, np.float32]),
    keepdims=st.booleans(),
    data=st.data(),
)
def test_logsumexp_value_is_scipys_bit_for_bit(shape, dtype, keepdims, data):
    """The rule's own NumPy logsumexp (SciPy's algorithm, without its array-API dispatch) gives
    SciPy's values exactly: ties of the maximum, infinities, NaN, every axis form."""
    shape = tuple(shape)
    values = st.one_of(st.floats(-50, 50, width=32), st.sampled_from([1.0, 1.0, 2.0]), _SPECIAL)
    with np.errstate(over="ignore"):  # 1e308 is inf in float32
        a = np.asarray(
            data.draw(st.lists(values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
            dtype,
        ).reshape(shape)
    axes = [None] + list(range(-a.ndim, a.ndim)) + ([tuple(range(a.ndim))] if a.ndim > 1 else [])
    axis = data.draw(st.sampled_from(axes)) if a.ndim else None
    with np.errstate(all="ignore"):
        want = SCIPY_LOGSUMEXP(a, axis=axis, keepdims=keepdims)
        got, _ = rrule(sp.logsumexp, a, axis=axis, keepdims=keepdims)
    assert type(got) is type(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


def test_logsumexp_falls_back_to_scipy_when_they_differ(monkeypatch):
    monkeypatch.setattr(scans, "_LSE_SAME", [])
    monkeypatch.setattr(scans, "_logsumexp_numpy", lambda a, axis, keepdims: a.sum() + 1.0)
    assert not scans._same_as_scipy()
    x = np.array([1.0, 2.0, 3.0])
    y, _ = rrule(sp.logsumexp, x)
    assert y == SCIPY_LOGSUMEXP(x)
    assert scans._LSE_SAME == [False]  # checked once: later calls go straight to SciPy


# -------------------------------------------------------------------------------- norm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [
        ((5,), (), {}),
        ((3, 4), (), {}),  # Frobenius of the whole array
        ((2, 3, 2), (), {}),  # 2-norm of the flattened array
        ((5,), (1,), {}),
        ((5,), (2,), {}),
        ((5,), (), {"ord": np.inf}),
        ((5,), (), {"ord": -np.inf}),
        ((5,), (3,), {}),
        ((5,), (3.0,), {}),  # a float ord gets d norm / d ord
        ((5,), (0.5,), {}),
        ((3, 4), (None, 1), {}),
        ((3, 4), (1,), {"axis": 0, "keepdims": True}),
        ((3, 4), (), {"ord": np.inf, "axis": 1}),
        ((3, 4), ("fro",), {}),
        ((2, 3, 4), ("fro", (0, 2)), {}),
        ((3, 4), ("nuc",), {}),
        ((3, 4), (2,), {}),
        ((2, 3, 4), (), {"ord": "nuc", "axis": (2, 1), "keepdims": True}),
        ((2, 3, 4), (2, (1, 2)), {}),
    ],
)
def test_norm(shape, args, kw, dtype):
    rng = np.random.default_rng(7)
    # Keep |x| away from 0 (kinks of ord 1/inf, singular |x|^(p-1)) and from ties.
    x = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    check_rrule(np.linalg.norm, np.asarray(x, dtype), *args, **kw)


def test_norm_at_zero_is_zero():
    _, pb = rrule(np.linalg.norm, np.zeros(3))
    (g,) = pb(1.0)
    np.testing.assert_array_equal(g, 0.0)


def test_norm_inf_ties_split_evenly():
    x = np.array([3.0, -3.0, 1.0])
    _, pb = rrule(np.linalg.norm, x, np.inf)
    g, dord = pb(1.0)
    np.testing.assert_allclose(g, [0.5, -0.5, 0.0])
    assert isinstance(dord, ZeroTangent)


def test_norm_int_ord_gets_no_tangent():
    _, pb = rrule(np.linalg.norm, np.ones(3), 1)
    assert isinstance(pb(1.0)[1], NoTangent)


def test_norm_unsupported_orders_have_no_rule():
    assert rrule(np.linalg.norm, np.ones((2, 2)), 1) is None  # matrix 1-norm
    assert rrule(np.linalg.norm, np.ones(3), "fro") is None


@pytest.mark.parametrize(
    "x",
    [np.array([1e3, 1e3, 999.0, 998.0], np.float32), np.array([1e12, 1e12, 1e12 - 1, 1e12 - 2]),
     np.array([1e17, 1e17])],
    ids=["float32-1e3", "float64-1e12", "float64-1e17"],
)  # fmt: skip
def test_logsumexp_and_log_softmax_at_large_magnitudes(x):
    import scipy.special as sp

    # logsumexp's derivative is softmax: exp(a - y) alone carried y's rounding at the scale of
    # max(a) ([1e17, 1e17] gave [1, 1]); log_softmax as x - logsumexp(x) carried it into values
    want = sp.softmax(x.astype(np.float64)).astype(x.dtype)
    eps = np.finfo(x.dtype).eps
    np.testing.assert_allclose(fg.grad(sp.logsumexp)(x), want, rtol=4 * eps)
    np.testing.assert_allclose(fg.jvp(sp.logsumexp, (x,), (np.ones_like(x),))[1], 1.0,
                               rtol=4 * eps)  # fmt: skip
    value = fg.value_and_grad(lambda a: (np.sum(sp.log_softmax(a)), sp.log_softmax(a)),
                                    has_aux=True)(x)[0][1]  # fmt: skip
    np.testing.assert_allclose(value, sp.log_softmax(x), rtol=4 * eps, atol=0)
    b = np.linspace(0.5, 2.0, x.size).astype(x.dtype)  # with weights: Σ b w = 1
    gb = fg.grad(lambda v: sp.logsumexp(x, b=v))(b)
    np.testing.assert_allclose(np.sum(b * gb), 1.0, rtol=4 * eps)


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_running_maximum_and_minimum(ufunc, axis):
    # np.maximum.accumulate (JAX's cummax) had no rule
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 7)), rng.standard_normal((4, 7))
    value = fg.value_and_grad(lambda v: np.sum(w * ufunc.accumulate(v, axis=axis)))(x)[0]
    np.testing.assert_allclose(value, np.sum(w * ufunc.accumulate(x, axis=axis)))
    check_grads(lambda v: np.sum(w * ufunc.accumulate(v, axis=axis)), ("rev", "fwd"), order=2)(x)


def test_running_maximum_splits_ties_as_max_does():
    # y[i] = max(a[:i+1]): with ties, the derivative is np.max's of each prefix (split evenly)
    v = np.array([1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0, 4.0])
    w = np.arange(1.0, 9.0)
    prefix = lambda a: np.stack([np.max(a[: i + 1]) for i in range(len(a))])  # noqa: E731
    np.testing.assert_allclose(fg.grad(lambda a: np.sum(w * np.maximum.accumulate(a)))(v),
                               fg.grad(lambda a: np.sum(w * prefix(a)))(v))  # fmt: skip
    t = np.arange(8.0)
    np.testing.assert_allclose(fg.jvp(np.maximum.accumulate, (v,), (t,))[1],
                               fg.jvp(prefix, (v,), (t,))[1])  # fmt: skip

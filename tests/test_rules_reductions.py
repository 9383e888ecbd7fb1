"""Reduction rules (sum, mean, prod, max, min, var, std) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.testing import check_grads, check_rrule

SHAPE_AXES = [
    ((5,), None),
    ((5,), 0),
    ((5,), -1),
    ((3, 4), None),
    ((3, 4), 0),
    ((3, 4), 1),
    ((3, 4), -1),
    ((3, 4), (0, 1)),
    ((2, 3, 4), (0, 2)),
    ((2, 3, 4), (-1, -3)),
    ((2, 3, 4), 1),
    ((2, 3, 4), (1,)),
]
DTYPES = [np.float64, np.float32]
REDUCTIONS = [np.sum, np.mean, np.max, np.min, np.var, np.std, np.prod]


def _distinct(rng, shape, dtype):
    # distinct values (no ties) away from zero, so every rule is smooth there
    n = int(np.prod(shape))
    vals = (rng.permutation(n) + 1.0) / n + 0.5
    vals *= rng.choice([-1.0, 1.0], n)
    return vals.reshape(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", SHAPE_AXES)
@pytest.mark.parametrize("f", REDUCTIONS, ids=lambda f: f.__name__)
def test_check_rrule(f, shape, axis, keepdims, dtype):
    rng = np.random.default_rng(0)
    x = _distinct(rng, shape, dtype)
    check_rrule(f, x, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f", [np.var, np.std])
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_ddof(f, ddof, dtype):
    x = _distinct(np.random.default_rng(1), (4, 5), dtype)
    check_rrule(f, x, axis=1, ddof=ddof)
    check_rrule(f, x, ddof=ddof)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, axis", SHAPE_AXES)
def test_prod_with_zeros(shape, axis, dtype):
    rng = np.random.default_rng(2)
    x = _distinct(rng, shape, dtype)
    flat = x.reshape(-1)
    flat[0] = 0.0
    if flat.size > 3:
        flat[3] = 0.0  # two zeros: in slices that hold both, every derivative is 0
    check_rrule(np.prod, x, axis=axis)
    want = np.empty(x.shape)
    for idx in np.ndindex(x.shape):
        # hand-derived: product of the other elements of the reduced slice
        sl = list(idx)
        axes = range(x.ndim) if axis is None else np.atleast_1d(axis) % x.ndim
        for a in axes:
            sl[a] = slice(None)
        block = x[tuple(sl)].astype(np.float64).copy()
        own = tuple(idx[a] for a in sorted(axes))
        block[own] = 1.0
        want[idx] = np.prod(block)
    got = fg.grad(lambda x: np.sum(np.prod(x, axis=axis)))(x)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float64 else 1e-3)


@pytest.mark.parametrize("zeros", [(), (1,), (1, 3), (0, 1, 3)])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_prod_second_derivatives_at_zeros(zeros, axis):
    """d²∏x / dxᵢdxₖ = ∏_{j≠i,k} x_j: the first-order formula's branches are constants where
    x has a zero, so a Hessian lost the zero's row (hessian, hvp, grad of grad, jvp of grad)."""
    x = np.array([[1.5, -2.0], [3.0, 0.5], [2.0, 1.25]]).T.copy()  # (2, 3)
    x.reshape(-1)[list(zeros)] = 0.0
    w = np.array([1.0, -2.0, 0.5])[: x.shape[1]]

    def f(v):
        p = np.prod(v, axis=axis)
        return np.sum(p * (w if np.ndim(p) == 1 and np.size(p) == 3 else 1.0))

    n = x.size

    def at(values):  # f with the entries in ``values`` (index -> value) set
        v = x.copy().reshape(-1)
        for idx, val in values.items():
            v[idx] = val
        return f(v.reshape(x.shape))

    # f is linear in each entry, so each mixed partial is exact from four values (hand-derived:
    # no derivative code involved); the diagonal is 0
    def mixed(i, k):
        return at({i: 1, k: 1}) - at({i: 1, k: 0}) - at({i: 0, k: 1}) + at({i: 0, k: 0})

    want = np.array([[0.0 if i == k else mixed(i, k) for k in range(n)] for i in range(n)])
    got = fg.hessian(f)(x).reshape(n, n)
    np.testing.assert_allclose(got, want, atol=1e-12)
    v = np.linspace(-1.0, 1.0, n).reshape(x.shape)
    np.testing.assert_allclose(fg.hvp(f, (x,), (v,)).reshape(-1), want @ v.reshape(-1), atol=1e-12)


def test_prod_replays_under_jit_whatever_zeros_a_later_call_has():
    # the pullback of np.prod looked at the values (any zero?): jit ran it uncompiled. It is
    # branch-free now, so a program recorded without zeros replays right with one and two
    from fusegrad.lazy import replay

    def f(x):
        return np.sum(np.prod(x, axis=1) * np.array([1.0, 2.0, 3.0]))

    jg = fg.jit(fg.grad(f))
    x = np.array([[2.0, 3.0, 4.0], [1.0, 5.0, 2.0], [0.5, 2.0, 3.0]])
    for k in range(replay.HOT_REPLAYS + 3):
        xk = x.copy()
        if k % 3 == 1:
            xk[0, 1] = 0.0  # one zero in row 0
        if k % 3 == 2:
            xk[1, :2] = 0.0  # two zeros in row 1
        np.testing.assert_allclose(jg(xk), fg.grad(f)(xk), rtol=1e-14)
    (info,) = jg.cache_info().entries
    assert info.replayable


def test_prod_single_zero_exact():
    x = np.array([2.0, 0.0, 3.0, 4.0])
    np.testing.assert_array_equal(fg.grad(np.prod)(x), [0.0, 24.0, 0.0, 0.0])
    x = np.array([[0.0, 0.0], [2.0, 5.0]])
    np.testing.assert_array_equal(
        fg.grad(lambda x: np.sum(np.prod(x, axis=1)))(x), [[0.0, 0.0], [5.0, 2.0]]
    )


def test_an_extremum_found_by_another_engine_still_has_its_elements():
    # under auto, the backward pass may compute a max's argument again on another engine, whose
    # tanh differs by an ulp: no element then equaled the max, and the gradient was 0/0. Here
    # the max is off by a few ulps, as another engine's would be
    import fusegrad.lazy as fl
    from fusegrad.rules import reductions

    x = np.random.default_rng(2).normal(size=(6, 5))
    la = np.tanh(fl.asarray(x))
    y = np.max(np.tanh(x), axis=1, keepdims=True) * (1 + 3 * np.finfo(float).eps)
    with fg.use_engine("auto"):
        mask = fl.materialize(reductions._at_extremum(la, y, False, (1,)))
    np.testing.assert_array_equal(mask, np.tanh(x) == np.tanh(x).max(axis=1, keepdims=True))
    with fg.use_engine("numpy"):  # one engine computes the same values again: exact equality
        assert not fl.materialize(reductions._at_extremum(la, y, False, (1,))).any()


@pytest.mark.parametrize("engine_name", ["auto", "numpy", "numba"])
def test_a_pairwise_min_beside_a_kernel_numba_does_not_take(engine_name):
    # the program sweep C found: its min's mask kernel went to NumPy (a cosh beside it), its
    # forward min to numba, and 699 of 700 gradient entries were NaN on auto
    pytest.importorskip("numba")

    def f(x, y):
        d = x[:, None] - y[None, :]
        return np.sum(np.min(np.tanh(d), axis=0) ** 2) + np.sum(np.sinh(0.1 * d))

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(700), rng.standard_normal(600)
    with fg.use_engine("numpy"):
        want = fg.grad(f, (0, 1))(x, y)
    with fg.use_engine(engine_name):
        got = fg.grad(f, (0, 1))(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f, pick", [(np.max, np.argmax), (np.min, np.argmin)])
def test_extremum_ties_split_evenly(f, pick, dtype):
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0], [5.0, 4.0, 5.0, 5.0]], dtype)
    if f is np.min:
        x = -x
    g = fg.grad(lambda x: np.sum(f(x, axis=1) * np.array([1.0, 2.0, 3.0], dtype)))(x)
    want = np.array(
        [[0, 0.5, 0.5, 0], [2 / 3, 2 / 3, 2 / 3, 0], [1, 0, 1, 1]], dtype
    )  # 3 split over three ties in the last row
    want[2] = [1.0, 0.0, 1.0, 1.0]
    np.testing.assert_allclose(g, want, rtol=1e-6)
    assert g.dtype == dtype
    g = fg.grad(lambda x: f(x))(x)
    assert g.sum() == pytest.approx(1.0)
    # keepdims and negative axes
    g = fg.grad(lambda x: np.sum(f(x, axis=-2, keepdims=True)))(x)
    assert g.shape == x.shape and np.allclose(g.sum(axis=0), 1.0)


def test_max_min_method_and_amax():
    x = np.array([[1.0, 4.0], [4.0, 2.0]])
    np.testing.assert_allclose(fg.grad(lambda x: x.max())(x), [[0, 0.5], [0.5, 0]])
    np.testing.assert_allclose(fg.grad(lambda x: np.amin(x))(x), [[1, 0], [0, 0]])
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(x.min(axis=0)))(x), [[1, 0], [0, 1]])


@pytest.mark.parametrize("f", REDUCTIONS, ids=lambda f: f.__name__)
def test_method_forms_through_the_tracer(f):
    x = _distinct(np.random.default_rng(3), (3, 4), np.float64)
    name = f.__name__

    def fun(x):
        return getattr(np.tanh(x), name)(axis=0) * 2.0

    check_grads(fun)(x)
    check_grads(lambda x: getattr(x, name)())(x)


def test_mean_var_std_hand_derived():
    x = np.array([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]])
    n = 3
    np.testing.assert_allclose(
        fg.grad(lambda x: np.sum(np.mean(x, axis=1)))(x), np.full((2, 3), 1 / n)
    )
    c = x - x.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(np.var(x, axis=1)))(x), 2 * c / n)
    s = x.std(axis=1, keepdims=True)
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(np.std(x, axis=1)))(x), c / (n * s))


def test_sum_dtype_and_integer_input():
    x = np.ones((2, 3), np.float32)
    g = fg.grad(lambda x: np.sum(x, dtype=np.float64))(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.ones((2, 3)))
    _, pb = fg.rrule(np.sum, np.arange(6).reshape(2, 3), axis=0)
    assert isinstance(pb(np.ones(3))[0], fg.NoTangent)


def test_reductions_in_broadcast_expressions():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(5), rng.standard_normal(4)

    def f(x, y):
        d = np.tanh(x[:, None] - y[None, :])
        return np.sum(np.max(d, axis=1)) + np.mean(np.var(d, axis=0)) + np.std(d)

    check_grads(f)(x, y)


def test_std_of_one_value_has_a_zero_derivative():
    # a slice of one value has std 0 whatever the value: 0/0 gave nan in both directions
    x = np.array([[2.0], [3.0]])
    np.testing.assert_array_equal(fg.grad(lambda v: np.sum(np.std(v, axis=1)))(x), 0 * x)
    np.testing.assert_array_equal(fg.jvp(lambda v: np.std(v, axis=1), (x,), (x,))[1], [0.0, 0.0])

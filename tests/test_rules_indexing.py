"""Reverse rules of fusegrad.rules.indexing: x[index], scatter_add, take, diag, diagonal."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad.rules.indexing  # noqa: F401  (registers the rules)
from fusegrad.rules.indexing import getitem, is_basic_index, scatter_add
from fusegrad.rules.registry import RRULES, rrule
from fusegrad.tangents import NoTangent, Thunk
from fusegrad.testing import check_grads, check_rrule

DTYPES = [np.float64, np.float32]


def rand(rng, shape, dtype=np.float64):
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


X = np.arange(24.0).reshape(2, 3, 4)
MASK = np.array([[True, False, True], [False, False, True]])

INDEXES = [
    # basic
    1,
    -1,
    (1, 2),
    (slice(None), 0),
    (Ellipsis, 1),
    (None, 1),
    (slice(None), None, slice(1, 3)),
    (slice(None, None, -1), slice(0, 3, 2)),
    (0, slice(None), slice(3, 0, -2)),
    (Ellipsis, None),
    (),
    # advanced
    np.array([1, 0, 1]),
    [0, 0],
    (slice(None), np.array([0, 2, 2, 0])),
    (np.array([0, 1]), np.array([2, 0])),
    (np.array([[0, 1], [1, 1]]), slice(None), np.array([0, 3])),
    (slice(None), np.array([0, 0]), 1),
    (0, np.array([1, 1, 1]), None),
    # boolean
    MASK,
    (MASK, 0),
    (slice(None), np.array([True, False, True]), slice(1, 3)),
    (Ellipsis, np.array([False, True, True, False])),
    X > 10,
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem(index, dtype):
    rng = np.random.default_rng(0)
    check_rrule(operator.getitem, rand(rng, (2, 3, 4), dtype), index)


def test_getitem_is_registered_lazy_under_operator_getitem():
    assert RRULES[operator.getitem] == (getitem, True)


def test_repeated_indices_scatter_add():
    x = np.zeros(4)
    y, pb = rrule(operator.getitem, x, np.array([0, 0, 2, 0]))
    g, idx = pb(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(g, [7.0, 0.0, 3.0, 0.0])
    assert isinstance(idx, NoTangent)


def test_repeated_indices_2d():
    x = np.zeros((3, 2))
    y, pb = rrule(operator.getitem, x, (np.array([1, 1, 2]), np.array([0, 0, 1])))
    g, _ = pb(np.ones(3))
    np.testing.assert_array_equal(g, [[0, 0], [2, 0], [0, 1]])


def test_lazy_embed_matches_scatter():
    """A non-ndarray dy with an int/None/full-slice index takes the where() path."""

    class Wrapped:  # stands in for a lazy array: speaks NumPy, is not an ndarray
        def __init__(self, a):
            self.a = a
            self.shape = a.shape
            self.dtype = a.dtype

        def __array__(self, dtype=None, copy=None):
            return self.a

    for index in [1, (slice(None), 2), (None, 0, Ellipsis, -1), (Ellipsis, 1, slice(None))]:
        x = X
        y, pb = rrule(operator.getitem, x, index)
        dy = np.arange(np.size(y), dtype=float).reshape(np.shape(y)) + 1
        g_lazy, _ = pb(Wrapped(dy))
        g_eager, _ = pb(dy)
        np.testing.assert_array_equal(np.asarray(g_lazy), g_eager)


def test_thunk_cotangent():
    x = np.ones((3, 2))
    _, pb = rrule(operator.getitem, x, (slice(1, None), 0))
    g, _ = pb(Thunk(lambda: np.array([2.0, 3.0])))
    np.testing.assert_array_equal(g, [[0, 0], [2, 0], [3, 0]])


def test_is_basic_index():
    assert is_basic_index((1, slice(None), None, Ellipsis))
    assert not is_basic_index([0, 1])
    assert not is_basic_index((np.array([0]),))
    assert not is_basic_index(np.True_)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 5),
    idx=st.lists(st.integers(-5, 4), min_size=1, max_size=8),
)
def test_advanced_repeated_hypothesis(n, idx):
    idx = np.array([i % n for i in idx])
    rng = np.random.default_rng(1)
    check_rrule(operator.getitem, rand(rng, (n, 2)), idx)


@settings(max_examples=20, deadline=None)
@given(
    start=st.integers(-4, 4) | st.none(),
    stop=st.integers(-4, 4) | st.none(),
    step=st.sampled_from([None, 1, 2, -1, -3]),
)
def test_slice_hypothesis(start, stop, step):
    rng = np.random.default_rng(2)
    check_rrule(operator.getitem, rand(rng, (4, 3)), (slice(None), slice(start, stop, step)))


# ---------------------------------------------------------------------------- scatter_add


def test_scatter_add_rule():
    rng = np.random.default_rng(3)
    check_rrule(scatter_add, rand(rng, (5,)), np.array([0, 2, 2, 1, 0]), (3,))
    check_rrule(scatter_add, rand(rng, (2, 2)), (slice(None), np.array([1, 1])), (2, 3))
    check_rrule(scatter_add, rand(rng, (2,)), (slice(1, 3),), (4,))


def test_scatter_add_does_not_mutate():
    dy = np.ones(3)
    out = scatter_add(dy, np.array([0, 0, 1]), (2,))
    np.testing.assert_array_equal(out, [2, 1])
    np.testing.assert_array_equal(dy, 1)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12),
    st.lists(st.integers(1, 4), min_size=0, max_size=2),
    st.sampled_from([np.float64, np.float32, np.complex128]),
    st.integers(-3, 2),
    st.data(),
)
def test_scatter_add_vector_matches_add_at(n, index_shape, dtype, low, data):
    # a vector target takes np.bincount where it gives add.at's sums (float64, signed
    # non-negative indices): the same values, duplicates summed in the same order
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    index = rng.integers(min(max(low, -n), n - 1), n, size=index_shape)
    dy = (rng.standard_normal(index_shape) * 1e3).astype(dtype)
    want = np.zeros(n, dtype)
    np.add.at(want, index, dy)
    got = scatter_add(dy, index, (n,))
    assert got.dtype == want.dtype and got.shape == (n,)
    np.testing.assert_array_equal(got, want)


def test_scatter_add_vector_errors_and_other_indices():
    with pytest.raises(IndexError, match="out of bounds"):
        scatter_add(np.ones(3), np.array([0, 0, 7]), (4,))
    unsigned = scatter_add(np.ones(3), np.array([0, 0, 2], np.uint64), (4,))
    np.testing.assert_array_equal(unsigned, [2, 0, 1, 0])
    broadcast = scatter_add(np.ones(()), np.array([1, 1]), (3,))  # dy broadcast to the index
    np.testing.assert_array_equal(broadcast, [0, 2, 0])


# ------------------------------------------------------------------ take, take_along_axis


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args,kw",
    [
        ((5,), ([0, 0, 3, 4],), {}),
        ((2, 3), ([5, 0, 5],), {}),  # axis=None: flattened
        ((2, 3), ([[0, 2], [2, 2]], 1), {}),
        ((2, 3), (np.array([1, 1, 0]),), {"axis": 0}),
        ((2, 3), (np.array([-1, 4]),), {"axis": 1, "mode": "wrap"}),
        ((2, 3), (np.array([-1, 7]),), {"axis": 1, "mode": "clip"}),
        ((2, 3), (1,), {"axis": 1}),
    ],
)
def test_take(shape, args, kw, dtype):
    rng = np.random.default_rng(4)
    check_rrule(np.take, rand(rng, shape, dtype), *args, **kw)


@pytest.mark.parametrize(
    "shape,idx,axis",
    [
        ((3, 4), np.array([[0, 0, 3], [1, 1, 1], [2, 3, 0]]), 1),
        ((3, 4), np.array([[2, 0, 2, 1]]), 0),  # broadcasts along axis 0's partner
        ((3, 4), np.array([[1], [0], [3]]), -1),
        ((6,), np.array([5, 5, 0]), None),
    ],
)
def test_take_along_axis(shape, idx, axis):
    rng = np.random.default_rng(5)
    check_rrule(np.take_along_axis, rand(rng, shape), idx, axis)


# ----------------------------------------------------------------------- diag, diagonal


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,args",
    [((3,), ()), ((3,), (1,)), ((3,), (-2,)), ((3, 3), ()), ((3, 4), (1,)), ((4, 3), (-1,)),
     ((2, 3), (5,))],
)  # fmt: skip
def test_diag(shape, args, dtype):
    rng = np.random.default_rng(6)
    check_rrule(np.diag, rand(rng, shape, dtype), *args)


@pytest.mark.parametrize(
    "shape,args,kw",
    [
        ((3, 3), (), {}),
        ((3, 4), (1,), {}),
        ((2, 3, 4), (), {"axis1": 1, "axis2": 2}),
        ((3, 2, 4), (-1, 0, 2), {}),
        ((3, 2, 4), (), {"offset": 1, "axis1": 2, "axis2": 0}),
    ],
)
def test_diagonal(shape, args, kw):
    rng = np.random.default_rng(7)
    check_rrule(np.diagonal, rand(rng, shape), *args, **kw)


@pytest.mark.parametrize("index", [(slice(None), 0), (None, 1), -1, (Ellipsis, 2)], ids=repr)
def test_basic_getitem_keeps_broadcast_thunk_lazy(index):
    from fusegrad import tangents

    BroadcastThunk = getattr(tangents, "BroadcastThunk", None)
    if BroadcastThunk is None:
        pytest.skip("BroadcastThunk not available")
    import fusegrad.lazy as fl

    x = np.arange(6.0).reshape(2, 3)
    y, pb = rrule(operator.getitem, x, index)
    dy = np.cos(np.arange(np.size(y), dtype=float).reshape(np.shape(y)))
    g = pb(BroadcastThunk(np.cos(fl.asarray(dy.copy()))))[0]
    assert isinstance(g, BroadcastThunk)
    np.testing.assert_allclose(np.asarray(tangents.unthunk(g)), pb(np.cos(dy))[0])


def test_scalar_cotangent_for_scalar_result():
    _, pb = rrule(operator.getitem, np.arange(3.0), 1)
    g, _ = pb(2.0)  # a Python float ȳ for a 0-d result
    np.testing.assert_array_equal(g, [0.0, 2.0, 0.0])


def test_end_to_end_grad_through_these_rules():
    fg = pytest.importorskip("fusegrad")
    if not hasattr(fg, "grad"):
        pytest.skip("fusegrad.grad not available")
    from fusegrad.testing import check_grads

    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    x = rng.standard_normal(3)
    w = rng.standard_normal((4, 3))

    def f(a, x, w):
        _, ld = np.linalg.slogdet(a)
        z = np.linalg.solve(a, x)
        c = np.concatenate([np.tanh(w @ z), z[[0, 0, 2]]])
        return (
            ld
            + np.sum(np.cumsum(c) ** 2)
            + np.linalg.norm(w[:, 1:])
            + np.einsum("ij,j->", w, x)
            + 3 * np.sort(c)[0]
            + np.trace(np.linalg.inv(a))
            + np.sum(np.stack([x, 2 * x])[1])
            + np.sum(np.pad(w, 1)[0:2] ** 2)
        )

    check_grads(f)(a, x, w)


@pytest.mark.parametrize(
    "shape,index_shape,axis",
    [((2, 3, 3), (2, 3, 1), -2), ((2, 1, 3), (2, 4, 3), 2), ((2, 3, 1), (2, 3, 4), 1),
     ((4, 5), (1, 5), 0)],
)  # fmt: skip
def test_take_along_axis_with_indices_broadcast_against_the_array(shape, index_shape, axis):
    # indices and array broadcast against each other off the axis: the pullback indexed only
    # the first position of a broadcast dimension (a crash)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape)
    idx = rng.integers(0, shape[axis], index_shape)
    w = rng.standard_normal(np.take_along_axis(x, idx, axis=axis).shape)
    check_grads(lambda v: np.sum(w * np.take_along_axis(v, idx, axis=axis)), ("rev", "fwd"), 2)(x)


def test_an_element_cotangent_keeps_the_leading_size_1_axes():
    """``x[..., 0]`` of a (1, n) or (1, 1) value: the lazy embedding skipped reshaping a lazy
    cotangent to the leading size-1 axes the one-hot mask does not span, so the cotangent lost
    them (a crash in the transpose's pullback, and in grad of jvp through a 1x1 solve)."""
    y = np.array([[0.5], [1.0], [2.0]])
    b = np.array([[0.3], [0.2], [0.1]])
    f = lambda y: np.sum(-(y.T)[..., 0] * 2.0) + np.sum(y * b)  # noqa: E731
    np.testing.assert_allclose(fusegrad.grad(f)(y), b + np.array([[-2.0], [0.0], [0.0]]))
    a, r = np.array([[3.0]]), np.array([0.5])

    def g(x):
        return fusegrad.jvp(h, (x,), (np.ones(2),))[1]

    def h(x):
        return np.sum(np.linalg.solve(a * x[0], r * x[1]) ** 2)

    x = np.array([0.7, 1.3])
    want = fusegrad.hessian(h)(x) @ np.ones(2)
    np.testing.assert_allclose(fusegrad.grad(g)(x), want, rtol=1e-12)

"""Reverse rules of fusegrad.rules.shapes against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad.rules.shapes  # noqa: F401  (registers the rules)
from fusegrad.rules.registry import RRULES, rrule
from fusegrad.rules.shapes import _roll, unbroadcast_to
from fusegrad.tangents import NoTangent, Thunk, ZeroTangent
from fusegrad.testing import check_rrule

DTYPES = [np.float64, np.float32]


def rand(rng, shape, dtype=np.float64):
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


def raw_rule(f):
    return RRULES[f][0]


def fd_list_grads(f, arrays, dy, eps=1e-6, **kw):
    """Finite-difference gradients of <dy, f(list(arrays), **kw)> for each array."""
    out = []
    for i, a in enumerate(arrays):
        a = np.asarray(a, np.float64)
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            e = np.zeros_like(a)
            e[idx] = eps
            up = [np.asarray(x, np.float64) for x in arrays]
            dn = [np.asarray(x, np.float64) for x in arrays]
            up[i] = a + e
            dn[i] = a - e
            g[idx] = (np.sum(dy * f(up, **kw)) - np.sum(dy * f(dn, **kw))) / (2 * eps)
        out.append(g)
    return out


# ------------------------------------------------------------------------- unbroadcast_to


def test_unbroadcast_to():
    g = np.ones((4, 2, 3))
    assert unbroadcast_to(g, (2, 1)).shape == (2, 1)
    np.testing.assert_allclose(unbroadcast_to(g, (2, 1)), 12.0)
    np.testing.assert_allclose(unbroadcast_to(g, ()), 24.0)
    assert unbroadcast_to(g, (4, 2, 3)) is g
    assert unbroadcast_to(2.5, ()) == 2.5  # Python scalars have no .shape


# ----------------------------------------------------------------------- movement (lazy)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "f,shape,args,kw",
    [
        (np.reshape, (2, 3, 4), ((6, 4),), {}),
        (np.reshape, (2, 3, 4), ((4, -1),), {"order": "F"}),
        (np.reshape, (6,), ((2, 3), "F"), {}),
        (np.ravel, (2, 3), (), {}),
        (np.ravel, (2, 3), ("F",), {}),
        (np.transpose, (2, 3, 4), (), {}),
        (np.transpose, (2, 3, 4), ((1, 2, 0),), {}),
        (np.transpose, (2, 3, 4), ((-1, 0, 1),), {}),
        (np.moveaxis, (2, 3, 4), (0, -1), {}),
        (np.moveaxis, (2, 3, 4), ((0, 1), (2, 0)), {}),
        (np.swapaxes, (2, 3, 4), (0, 2), {}),
        (np.squeeze, (1, 3, 1), (), {}),
        (np.squeeze, (1, 3, 1), (2,), {}),
        (np.expand_dims, (2, 3), ((0, 3),), {}),
        (np.broadcast_to, (3,), ((2, 3),), {}),
        (np.broadcast_to, (2, 1), ((4, 2, 3),), {}),
        (np.broadcast_to, (), ((2, 2),), {}),
        (np.flip, (2, 3), (), {}),
        (np.flip, (2, 3), (1,), {}),
        (np.flip, (2, 3, 2), (), {"axis": (0, 2)}),
    ],
)
def test_movement(f, shape, args, kw, dtype):
    rng = np.random.default_rng(0)
    check_rrule(f, rand(rng, shape, dtype), *args, **kw)


def test_movement_rules_are_lazy():
    for f in [np.reshape, np.ravel, np.transpose, np.moveaxis, np.swapaxes, np.squeeze,
              np.expand_dims, np.broadcast_to, np.flip]:  # fmt: skip
        assert RRULES[f][1] is True, f


def test_broadcast_to_python_float():
    y, pb = rrule(np.broadcast_to, 2.0, (2, 3))
    (g, s) = pb(np.ones((2, 3)))
    assert np.shape(g) == () and float(g) == 6.0 and isinstance(s, NoTangent)


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), data=st.data())
def test_transpose_hypothesis(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    rng = np.random.default_rng(1)
    check_rrule(np.transpose, rand(rng, tuple(shape)), tuple(perm))


# ------------------------------------------------------------------ joining and splitting


CONCAT_CASES = [
    (np.concatenate, [(2, 3), (1, 3)], {}),
    (np.concatenate, [(2, 3), (2, 1), (2, 2)], {"axis": 1}),
    (np.concatenate, [(2, 3), (4,)], {"axis": None}),
    (np.stack, [(2, 3), (2, 3)], {}),
    (np.stack, [(2, 3), (2, 3), (2, 3)], {"axis": -1}),
    (np.hstack, [(3,), (2,)], {}),
    (np.hstack, [(2, 3), (2, 1)], {}),
    (np.vstack, [(3,), (3,)], {}),
    (np.vstack, [(2, 3), (1, 3)], {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f,shapes,kw", CONCAT_CASES)
def test_join(f, shapes, kw, dtype):
    """The raw rule (a list cotangent, one entry per array) against finite differences."""
    rng = np.random.default_rng(2)
    arrays = [rand(rng, s, dtype) for s in shapes]
    y, pb = raw_rule(f)(arrays, **kw)
    np.testing.assert_array_equal(y, f(arrays, **kw))
    dy = rand(rng, y.shape)
    (grads,) = pb(dy)
    want = fd_list_grads(f, arrays, dy, **kw)
    tol = 2e-3 if dtype == np.float32 else 1e-7
    for g, w, a in zip(grads, want, arrays, strict=True):
        assert g.shape == a.shape and g.dtype == a.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_join_mixed_dtypes_and_positional_axis():
    a, b = np.ones((2, 2), np.float32), np.ones((2, 1))
    y, pb = raw_rule(np.concatenate)([a, b], 1)
    grads, ax = pb(np.ones(y.shape))
    assert grads[0].dtype == np.float32 and grads[1].dtype == np.float64
    assert isinstance(ax, NoTangent)


@pytest.mark.parametrize("f,shapes,kw", CONCAT_CASES)
def test_join_through_registry(f, shapes, kw):
    """Through ``rrule``: the sequence argument's cotangent is a list (needs the registry's
    container support in ``is_differentiable``)."""
    rng = np.random.default_rng(3)
    check_rrule(f, [rand(rng, s) for s in shapes], **kw)


def test_join_through_registry_float32_mixed():
    rng = np.random.default_rng(3)
    check_rrule(np.concatenate, [rand(rng, (2,), np.float32), rand(rng, (3,), np.float32)])
    check_rrule(np.stack, (rand(rng, (2,)), rand(rng, (2,))), 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "f,shape,args,kw",
    [
        (np.split, (6, 2), (3,), {}),
        (np.split, (2, 6), ([1, 4],), {"axis": 1}),
        (np.split, (2, 6), ([1, 4], 1), {}),
        (np.array_split, (7,), (3,), {}),
    ],
)
def test_split(f, shape, args, kw, dtype):
    rng = np.random.default_rng(4)
    check_rrule(f, rand(rng, shape, dtype), *args, **kw)


def test_split_zero_entries():
    x = np.arange(6.0)
    ys, pb = rrule(np.split, x, 3)
    g, n = pb([ZeroTangent(), np.ones(2), Thunk(lambda: 2 * np.ones(2))])
    np.testing.assert_array_equal(g, [0, 0, 1, 1, 2, 2])
    assert isinstance(n, NoTangent)
    g, _ = pb((ZeroTangent(), ZeroTangent(), ZeroTangent()))
    assert isinstance(g, ZeroTangent)


# ------------------------------------------------------------------------- replication


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "f,shape,args,kw",
    [
        (np.tile, (2, 3), (2,), {}),
        (np.tile, (2, 3), ((2, 1),), {}),
        (np.tile, (3,), ((2, 2),), {}),
        (np.tile, (2, 1, 2), ((3, 1),), {}),
        (np.repeat, (3,), (2,), {}),
        (np.repeat, (2, 3), (2,), {}),  # axis=None flattens
        (np.repeat, (2, 3), (2,), {"axis": 1}),
        (np.repeat, (2, 3), ([1, 0, 3],), {"axis": 1}),
        (np.repeat, (2, 3), ([2, 1], 0), {}),
        (np.roll, (5,), (2,), {}),
        (np.roll, (2, 3), (1,), {}),  # axis=None rolls the flattened array
        (np.roll, (2, 3), (-1, 1), {}),
        (np.roll, (2, 3), ((1, 2), (0, 1)), {}),
        (np.pad, (2, 3), (1,), {}),
        (np.pad, (2, 3), (((1, 0), (2, 3)),), {}),
        (np.pad, (2, 3), ((0, 2),), {"constant_values": 5.0}),
        (np.triu, (3, 3), (), {}),
        (np.triu, (3, 4), (1,), {}),
        (np.tril, (2, 3, 3), (), {"k": -1}),
        (np.tril, (3,), (), {}),  # 1-d input is broadcast to a matrix
    ],
)
def test_replication(f, shape, args, kw, dtype):
    rng = np.random.default_rng(5)
    check_rrule(f, rand(rng, shape, dtype), *args, **kw)


def test_pad_other_modes_have_no_rule():
    assert rrule(np.pad, np.ones(3), 1, mode="reflect") is None
    assert rrule(np.pad, np.ones(3), 1, "edge") is None


@settings(max_examples=15, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    reps=st.lists(st.integers(1, 3), min_size=1, max_size=3),
)
def test_tile_hypothesis(shape, reps):
    rng = np.random.default_rng(6)
    check_rrule(np.tile, rand(rng, tuple(shape)), tuple(reps))


# ------------------------------------------------------------------ laziness of movement rules


@pytest.mark.parametrize(
    "f,args",
    [
        (np.reshape, ((3, 2),)),
        (np.transpose, ()),
        (np.moveaxis, (0, 1)),
        (np.swapaxes, (0, 1)),
        (np.expand_dims, (1,)),
        (np.broadcast_to, ((4, 2, 3),)),
    ],
)
def test_movement_keeps_broadcast_thunk_lazy(f, args):
    tangents = pytest.importorskip("fusegrad.tangents")
    BroadcastThunk = getattr(tangents, "BroadcastThunk", None)
    if BroadcastThunk is None:
        pytest.skip("BroadcastThunk not available")
    import fusegrad.lazy as fl

    x = np.arange(6.0).reshape(2, 3)
    y, pb = rrule(f, x, *args)
    base = np.cos(np.arange(np.size(y), dtype=float).reshape(np.shape(y)))
    g = pb(BroadcastThunk(np.cos(fl.asarray(np.arange(np.size(y), dtype=float)).reshape(y.shape))))[
        0
    ]
    assert isinstance(g, BroadcastThunk)
    np.testing.assert_allclose(np.asarray(tangents.unthunk(g)), pb(base)[0])


# ---------------------------------------------- keyword arguments, sequences that are arrays


@pytest.mark.parametrize(
    "f,args,kw",
    [
        (np.moveaxis, (), {"source": 0, "destination": -1}),
        (np.moveaxis, (0,), {"destination": 2}),
        (np.swapaxes, (), {"axis1": 0, "axis2": 2}),
        (np.tile, (), {"reps": (2, 1, 1)}),
        (np.repeat, (), {"repeats": 2, "axis": 1}),
        (np.repeat, (np.array([1, 0, 2]),), {"axis": 1}),
        (np.roll, (), {"shift": 1, "axis": 0}),
        (np.expand_dims, (), {"axis": 1}),
        (np.broadcast_to, (), {"shape": (3, 2, 3, 4)}),
        (np.split, (), {"indices_or_sections": 2, "axis": 0}),
        (np.array_split, ([1],), {"axis": 2}),
    ],
)
def test_rules_take_their_arguments_by_keyword(f, args, kw):
    """One cotangent per positional argument, whichever way the others are passed (issue 15)."""
    x = rand(np.random.default_rng(0), (2, 3, 4))
    check_rrule(f, x, *args, **kw)


@pytest.mark.parametrize("f", [np.concatenate, np.hstack, np.vstack, np.stack])
def test_sequence_argument_that_is_an_array(f):
    """np.vstack(x) of an array iterates over its rows: the cotangent is an array like x."""
    x = rand(np.random.default_rng(1), (3, 2, 2))
    check_rrule(f, x)
    y, pb = rrule(f, x)
    (g,) = pb(np.ones_like(y))
    assert isinstance(g, np.ndarray) and g.shape == x.shape


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=0, max_size=4),
    st.integers(-13, 13),
    st.integers(-5, 4),
    st.sampled_from([np.float64, np.float32, np.complex64, np.int32, np.bool_]),
    st.booleans(),
)
def test_roll_is_np_roll(shape, shift, axis, dtype, fortran):
    # np.roll's rule computes with two slices concatenated for an int shift along one axis
    a = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) % 7, dtype)
    a = np.asfortranarray(a) if fortran else a
    if not -a.ndim <= axis < a.ndim:
        with pytest.raises(np.exceptions.AxisError):
            np.roll(a, shift, axis)
        with pytest.raises(np.exceptions.AxisError):
            _roll(a, shift, axis)
        return
    got = _roll(a, shift, axis)
    want = np.roll(a, shift, axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, a)


def test_roll_gradient_on_the_fast_path():
    rng = np.random.default_rng(5)
    x, dy = rand(rng, (4, 6)), rand(rng, (4, 6))
    for shift, axis in [(1, 0), (-1, 1), (9, -1), (0, 0), (np.int64(2), 1), ((1, 2), (0, 1))]:
        y, pb = rrule(np.roll, x, shift, axis)
        np.testing.assert_array_equal(y, np.roll(x, shift, axis))
        np.testing.assert_array_equal(pb(dy)[0], np.roll(dy, np.negative(shift), axis))
        check_rrule(np.roll, x, shift, axis)

"""fusegrad.rules.registry: registering, looking up, opting out, and the pullback wrapper."""

import numpy as np
import pytest

from fusegrad.rules.registry import (
    frule,
    has_rrule,
    opt_out,
    register_frule,
    register_rrule,
    rrule,
)
from fusegrad.tangents import NoTangent, Thunk, ZeroTangent


def square(x):
    return x * x


CALLS = []


@register_rrule(square)
def _square_rrule(x):
    def pullback(dy):
        CALLS.append(dy)
        return (2 * x * dy,)

    return x * x, pullback


@register_frule(square)
def _square_frule(tangents, x):
    return x * x, 2 * x * tangents[0]


def test_rrule_returns_value_and_pullback():
    y, pb = rrule(square, np.array([1.0, 2.0]))
    assert np.array_equal(y, [1.0, 4.0])
    (dx,) = pb(np.ones(2))
    assert np.array_equal(dx, [2.0, 4.0])
    assert has_rrule(square)


def test_frule_pushes_forward():
    y, dy = frule((np.ones(2),), square, np.array([1.0, 3.0]))
    assert np.array_equal(dy, [2.0, 6.0])


def test_unregistered_function_has_no_rule():
    def nothing(x):
        return x

    assert rrule(nothing, 1.0) is None and frule((1.0,), nothing, 1.0) is None
    assert not has_rrule(nothing)


def test_zero_cotangent_short_circuits():
    CALLS.clear()
    _, pb = rrule(square, np.ones(2))
    assert pb(ZeroTangent()) == (ZeroTangent(),)
    assert pb(NoTangent()) == (ZeroTangent(),)
    assert CALLS == []


def test_thunks_are_unthunked_for_eager_rules():
    CALLS.clear()
    _, pb = rrule(square, np.ones(2))
    (dx,) = pb(Thunk(lambda: np.ones(2)))
    assert isinstance(CALLS[0], np.ndarray) and np.array_equal(dx, [2.0, 2.0])


def lazy_identity(x):
    return x


@register_rrule(lazy_identity, lazy=True)
def _lazy_identity_rrule(x):
    return x, lambda dy: (dy,)


def test_lazy_rules_receive_thunks_as_they_are():
    t = Thunk(lambda: np.ones(2))
    _, pb = rrule(lazy_identity, np.ones(2))
    assert pb(t)[0] is t


def takes_int(x, n):
    return x * n


@register_rrule(takes_int)
def _takes_int_rrule(x, n):
    return x * n, lambda dy: (dy * n, dy * x)  # the second is wrong on purpose


def test_integer_arguments_get_notangent():
    _, pb = rrule(takes_int, np.ones(2), 3)
    dx, dn = pb(np.ones(2))
    assert np.array_equal(dx, [3.0, 3.0]) and dn is NoTangent()
    _, pb = rrule(takes_int, np.ones(2), np.array([True, False]))
    assert pb(np.ones(2))[1] is NoTangent()
    _, pb = rrule(takes_int, np.ones(2), 3)
    assert pb(ZeroTangent()) == (ZeroTangent(), NoTangent())


def bad_count(x, y):
    return x + y


@register_rrule(bad_count)
def _bad_count_rrule(x, y):
    return x + y, lambda dy: (dy,)


def test_wrong_cotangent_count_is_an_error():
    _, pb = rrule(bad_count, 1.0, 2.0)
    with pytest.raises(TypeError, match="returned 1 cotangents for 2 positional arguments"):
        pb(1.0)


def composite(x):
    return x + 1.0


@register_rrule(composite)
def _composite_rrule(x):
    return x + 1.0, lambda dy: (dy,)


def test_opt_out_and_reregister():
    assert has_rrule(composite)
    assert opt_out(composite) is composite
    assert not has_rrule(composite) and rrule(composite, 1.0) is None
    register_rrule(composite)(_composite_rrule)
    assert has_rrule(composite) and rrule(composite, 1.0) is not None


def test_numpy_functions_and_ufuncs_are_keys():
    def mine(x):
        return np.cos(x), lambda dy: (-np.sin(x) * dy,)

    from fusegrad.rules import registry

    saved = registry.RRULES.get(np.cos)  # fusegrad's own rule: put it back afterwards
    register_rrule(np.cos)(mine)
    try:
        y, pb = rrule(np.cos, 0.5)
        assert y == np.cos(0.5) and pb(1.0)[0] == -np.sin(0.5)
    finally:
        if saved is None:
            registry.RRULES.pop(np.cos, None)
        else:
            registry.RRULES[np.cos] = saved


def test_a_primitive_uses_its_rule_under_grad():
    import fusegrad as fg

    used = []

    @fg.primitive
    def my_solve(A, b):
        return np.linalg.solve(A, b)

    @fg.register_rrule(my_solve)
    def _(A, b):
        x = my_solve(A, b)

        def pullback(dx):
            used.append(True)
            db = my_solve(A.T, dx)
            return -np.outer(db, x), db

        return x, pullback

    A = np.array([[3.0, 0.5], [0.2, 2.0]])
    b = np.array([1.0, -1.0])
    gA, gb = fg.grad(lambda A, b: np.sum(my_solve(A, b) ** 2), argnums=(0, 1))(A, b)
    x = np.linalg.solve(A, b)
    want_b = np.linalg.solve(A.T, 2 * x)
    np.testing.assert_allclose(gb, want_b, rtol=1e-12)
    np.testing.assert_allclose(gA, -np.outer(want_b, x), rtol=1e-12)
    assert used  # the registered pullback ran, not a trace of the body

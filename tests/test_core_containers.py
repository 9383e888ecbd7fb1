"""Primitives whose arguments are (nested) containers, thunked container cotangents, and rules
that decline: the tracer core (ad/core.py) against hand-derived gradients."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.rules.registry import RRULES, primitive
from fusegrad.tangents import Thunk


@primitive
def _nested(t):
    (a, b), c = t[0]
    return a * 2.0 + b * c


@fg.register_rrule(_nested)
def _(t):
    (a, b), c = t[0]

    def pullback(dy):
        return ((((dy * 2.0, dy * c), dy * b),),)

    return a * 2.0 + b * c, pullback


@primitive
def _pair(t):
    return t[0] * 3.0 + t[1]


@fg.register_rrule(_pair)
def _(t):
    a, b = t

    def pullback(dy):
        return (Thunk(lambda: (dy * 3.0, dy)),)

    return a * 3.0 + b, pullback


@primitive
def _declines(x):
    return x


@fg.register_rrule(_declines)
def _(x):
    return None


def test_nested_container_argument():
    a, b, c = np.arange(3.0), np.linspace(1, 2, 3), np.array([0.5, -1.0, 2.0])
    ga, gb, gc = fg.grad(lambda a, b, c: np.sum(_nested((([a, b], c),))), argnums=(0, 1, 2))(
        a, b, c
    )
    np.testing.assert_allclose(ga, np.full(3, 2.0))
    np.testing.assert_allclose(gb, c)
    np.testing.assert_allclose(gc, b)


def test_nested_container_with_a_constant_inside():
    a, c = np.arange(3.0), np.array([0.5, -1.0, 2.0])
    ga = fg.grad(lambda a: np.sum(_nested((([a, np.ones(3)], c),))))(a)
    np.testing.assert_allclose(ga, np.full(3, 2.0))


def test_thunk_as_the_cotangent_of_a_tuple_argument():
    a, b = np.arange(3.0), np.ones(3)
    ga, gb = fg.grad(lambda a, b: np.sum(_pair((a, b)) ** 2), argnums=(0, 1))(a, b)
    y = a * 3.0 + b
    np.testing.assert_allclose(ga, 6.0 * y)
    np.testing.assert_allclose(gb, 2.0 * y)


def test_a_declining_rule_is_named_with_its_arguments():
    assert _declines in RRULES
    with pytest.raises(TypeError, match=r"_declines returned None.*shape=\(3,\), dtype=float64"):
        fg.grad(lambda x: np.sum(_declines(x)))(np.ones(3))

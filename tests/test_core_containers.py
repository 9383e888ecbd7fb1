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


# ------------------------------------------------------------ dict and namedtuple containers

_XS = np.array([0.3, 1.2])


@primitive
def _sincos(v):
    return {"s": np.sin(v), "c": np.cos(v)}


@fg.register_rrule(_sincos)
def _(v):
    def pullback(dy):
        from fusegrad.tangents import unthunk

        return (np.cos(v) * unthunk(dy["s"]) - np.sin(v) * unthunk(dy["c"]),)

    return {"s": np.sin(v), "c": np.cos(v)}, pullback


@fg.register_frule(_sincos)
def _(t, v):
    return {"s": np.sin(v), "c": np.cos(v)}, {"s": np.cos(v) * t[0], "c": -np.sin(v) * t[0]}


def test_a_rule_with_a_dict_output():
    # the dict's values were not boxed: a silently zero gradient and tangent
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(_sincos(v)["s"]))(_XS), np.cos(_XS))
    both = fg.grad(lambda v: np.sum(_sincos(v)["s"] * _sincos(v)["c"]))(_XS)
    np.testing.assert_allclose(both, np.cos(2 * _XS))
    _, dot = fg.jvp(lambda v: _sincos(v)["s"], (_XS,), (np.ones(2),))
    np.testing.assert_allclose(dot, np.cos(_XS))


@primitive
def _half_gradient(p):
    return p["w"] * 1.0


@fg.register_rrule(_half_gradient)
def _(p):
    return p["w"] * 1.0, lambda dy: ({"w": 0.5 * dy},)


def test_a_rule_with_a_dict_argument():
    # a dict argument was not searched for tracers: the body ran instead of the rule
    g = fg.grad(lambda p: np.sum(_half_gradient(p)))({"w": _XS})
    np.testing.assert_allclose(g["w"], [0.5, 0.5])


def test_rules_with_namedtuple_arguments():
    import collections

    pair = collections.namedtuple("pair", "w b")

    @primitive
    def affine(p, v):
        return p.w * v + p.b

    @fg.register_rrule(affine)
    def _(p, v):
        return p.w * v + p.b, lambda dy: (pair(dy * v, np.sum(dy)), dy * p.w)

    @fg.register_frule(affine)
    def _(t, p, v):
        return p.w * v + p.b, t[0].w * v + p.w * t[1]

    # the rule got raw tracers (reverse) and recursed (forward)
    g = fg.grad(lambda w: np.sum(affine(pair(w, 2.0), _XS)))(_XS)
    np.testing.assert_allclose(g, _XS)
    _, dot = fg.jvp(lambda w: affine(pair(w, 0.5), _XS), (_XS,), (np.ones(2),))
    np.testing.assert_allclose(dot, _XS)

"""The three conversions every lazy rule needs, in one place.

Rules registered with ``lazy=True`` take lazy arguments and cotangents and keep them lazy:
``as_lazy`` turns a NumPy array into a lazy leaf (so what a rule builds on it is an expression,
not a computation), ``operand`` turns a cotangent into something a NumPy operation can consume
lazily, and ``as_cotangent`` wraps a lazy result as a ``BroadcastThunk``.

>>> import numpy as np
>>> type(as_lazy(np.ones(2))).__name__, as_lazy(2.0)
('Leaf', 2.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lazy import LazyArray, asarray, replay, small
from ..lazy.nodes import DYNAMIC_NUMBERS, make_map
from ..tangents import BroadcastThunk, unthunk
from ..tangents.thunks import AbstractThunk


def as_lazy(x: Any, scalars: bool = False) -> Any:
    """Arrays as lazy leaves; lazy values and tracers as they are. Numbers stay weak constants
    unless ``scalars`` (then they become 0-d leaves, so that broadcasting them costs nothing)."""
    if scalars and type(x) in DYNAMIC_NUMBERS:
        # a jit recording's number argument (a cotangent s of s * f(x)): a 0-d kernel of it,
        # computed again from the call's number at each replay; np.asarray would read its value.
        # It multiplies a 0-d leaf of ones: movement (a broadcast) goes down to leaves, and a
        # kernel of constants alone has none to carry the new shape
        one = np.ones((), np.complex128 if isinstance(x, complex) else np.float64)
        replay.note_literal(one)
        return make_map("multiply", (asarray(one), x))
    if scalars and isinstance(x, np.generic | float | int):
        node: Any = asarray(x)  # a Leaf: it has the array it wraps
        replay.note_literal(node.array)  # made here from a number: a replay may fold it
        return node
    return asarray(x) if isinstance(x, np.ndarray) else x


def operand(dy: Any, scalars: bool = False) -> Any:
    """A cotangent as a lazy operand: a ``BroadcastThunk``'s node, any other thunk unthunked."""
    if isinstance(dy, BroadcastThunk):
        return dy.node
    if isinstance(dy, AbstractThunk):
        dy = unthunk(dy)
    return as_lazy(dy, scalars)


def concrete_ct(dy: Any) -> Any:
    """A cotangent for a rule that took the small-array path: a ``BroadcastThunk``'s lazy node
    (the cotangent stays fused), any other thunk unthunked, anything else as it is."""
    if isinstance(dy, AbstractThunk):
        return dy.node if isinstance(dy, BroadcastThunk) else unthunk(dy)
    return dy


# Read as module globals: numpy's module __getattr__ keeps CPython 3.11 from specialising
# `np.name` lookups, and this test runs in every small pullback.
_NDARRAY = np.ndarray
_empty = np.empty
_CONCRETE_SCALARS = (float, int, complex, np.generic)


def is_concrete(x: Any) -> bool:
    """Whether ``x`` is a NumPy array or a number (not lazy, not traced, not a thunk).

    >>> is_concrete(np.ones(2)), is_concrete(2.0), is_concrete(as_lazy(np.ones(2)))
    (True, True, False)
    """
    return type(x) is _NDARRAY or isinstance(x, _CONCRETE_SCALARS)


def as_cotangent(g: Any) -> Any:
    """A lazy result wrapped as a ``BroadcastThunk``; anything else as it is."""
    return BroadcastThunk(g) if isinstance(g, LazyArray) else g


def expand_back(dy: Any, shape: tuple, axes: tuple, keepdims: bool, held: bool = True) -> Any:
    """``dy`` of a reduction over ``axes`` broadcast back to the argument's ``shape``: lazily, or
    for a concrete ``dy`` and a small ``shape`` (the small-array path) as a new NumPy array.
    ``held``: whether the argument itself was in memory (``reductions._held``); when it was not
    (a fused broadcast blow-up, ``v[:, None] - v[None, :]``), its cotangent is not stored
    either, from the size the small-array path fuses such blow-ups at (``small.grown_fits``)."""
    if is_concrete(dy) and (small.fits(shape) if held else small.grown_fits(shape)):
        if type(dy) is float:  # the seed of grad: no dtype to look for, a fill and no copy loop
            out = _empty(shape)
            out.fill(dy)
            return out
        if not keepdims and axes and type(dy) is _NDARRAY:
            dy = dy.reshape([1 if i in axes else n for i, n in enumerate(shape)])
        out = _empty(shape, getattr(dy, "dtype", None) or type(dy))
        out[...] = dy
        return out
    d = operand(dy, scalars=True)
    if not keepdims and axes:
        d = np.expand_dims(d, axes)
    return np.broadcast_to(d, shape)

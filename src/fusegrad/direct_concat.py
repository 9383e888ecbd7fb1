"""``np.concatenate(arrays, axis)`` as ``jit`` records it: bare NumPy calls, not the rule.

A replayed rule step costs its rule's Python (the registry, the pullback's closure, projection,
the layout check of its results: ~10 us each way on an LSTM's ``concatenate([x_t, h], axis=1)``)
around a copy of a few hundred numbers. For the common case, arrays of one real float dtype
concatenated along one axis, the forward step here is ``np.concatenate`` into the program's
buffer and the pullback step copies out the slices of the cotangent of the arrays that are
differentiated, the values the rule gives (``rules/shapes.py``: ``_split_back``).

Example::

    >>> y = forward(1, np.ones((2, 1)), np.zeros((2, 2)))[0]
    >>> y.tolist()
    [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    >>> ct = np.arange(6.0).reshape(2, 3)
    >>> [g.tolist() for g in backward(1, (1, 2), (False, True), np.dtype("f8"), ct)]
    [[[1.0, 2.0], [4.0, 5.0]]]
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .lazy import LazyArray, replay
from .tangents import AbstractZero, NoTangent, ZeroTangent

_FLOATS = (np.dtype("float32"), np.dtype("float64"))


def axis_of(args: tuple, kwargs: dict) -> int | None:
    """The axis of ``np.concatenate(*args, **kwargs)`` when this module replays the call: a
    list or tuple of 2+ arrays (or lazy values) of one real float dtype and one number of
    dimensions, joined along an int axis, no other keyword; else None.

    >>> axis_of(([np.ones((2, 1)), np.ones((2, 2))],), {"axis": 1})
    1
    >>> axis_of(([np.ones(2), np.ones(2, np.float32)],), {}) is None
    True
    """
    if not args or len(args) > 2 or set(kwargs) - {"axis"} or (len(args) == 2 and kwargs):
        return None
    seq = args[0]
    if not isinstance(seq, list | tuple) or len(seq) < 2:
        return None
    if not all(isinstance(a, np.ndarray | LazyArray) for a in seq):
        return None
    dtype, ndim = seq[0].dtype, seq[0].ndim
    if dtype not in _FLOATS or ndim == 0:
        return None
    if any(a.dtype != dtype or a.ndim != ndim for a in seq):
        return None
    axis = args[1] if len(args) == 2 else kwargs.get("axis", 0)
    if type(axis) is not int or not -ndim <= axis < ndim:
        return None
    axis %= ndim
    rest = [a.shape[:axis] + a.shape[axis + 1 :] for a in seq]
    return axis if all(r == rest[0] for r in rest) else None


def forward(axis: int, *arrays: np.ndarray, outs: list | None = None) -> list:
    """``[np.concatenate(arrays, axis)]``, into ``outs[0]`` when given (the program's buffer)."""
    out = None if outs is None else outs[0]
    return [np.concatenate(arrays, axis=axis, out=out)]


def backward(
    axis: int,
    sizes: tuple,
    needed: tuple,
    dtype: np.dtype,
    ct: np.ndarray,
    outs: list | None = None,
) -> list:
    """The cotangents of the ``needed`` arrays: their slices of ``ct`` along ``axis`` as
    ``dtype`` (the arrays'), copied (into ``outs`` when given); the real part of a complex
    ``ct`` (the arrays are real)."""
    if ct.dtype.kind == "c":
        ct = ct.real
    grads, start, k = [], 0, 0
    index = [slice(None)] * ct.ndim
    for n, want in zip(sizes, needed):
        if want:
            index[axis] = slice(start, start + n)
            part = ct[tuple(index)]
            out = None if outs is None or k >= len(outs) else outs[k]
            if out is None:
                out = np.array(part, dtype=dtype, order="C")
            else:
                np.copyto(out, part, casting="same_kind")
            grads.append(out)
            k += 1
        start += n
    return grads


def rule_step(args: tuple, kwargs: dict, axis: int, needed: tuple, prepare: Any) -> tuple:
    """``(y, pullback)`` of ``np.concatenate(*args, **kwargs)`` as two direct steps of the
    recording; ``needed``: which arrays are differentiated. The pullback returns what the rule's
    would (a list or tuple of cotangents, then none for the axis argument)."""
    seq = args[0]
    y = replay.step(functools.partial(forward, axis), tuple(seq), {}, prepare, direct=True)[0]
    dtype = np.dtype(y.dtype)
    sizes = tuple(int(a.shape[axis]) for a in seq)
    extra = (NoTangent(),) * (len(args) - 1)

    def pullback(ct: Any) -> tuple:
        if isinstance(ct, AbstractZero):
            cts: list = [ct] * len(seq)
        else:
            step = functools.partial(backward, axis, sizes, needed, dtype)
            grads = iter(replay.step(step, (ct,), {}, prepare, direct=True))
            cts = [next(grads) if k else ZeroTangent() for k in needed]
        return (cts if isinstance(seq, list) else tuple(cts), *extra)

    return y, pullback

"""Lazy reductions: ``sum``, ``prod``, ``max``, ``min``, and ``mean``/``var``/``std`` built on them.

A reduction over an axis along which its argument does not vary is simplified away: the sum of
a broadcast value over ``n`` copies is ``n`` times the value (``prod``: the ``n``-th power; ``max``
and ``min``: the value). So the adjoint of ``sum((v[:, None] - v[None, :]) / 2)`` costs O(N), not
O(N²), as under ``jax.jit``.

Example::

    >>> from .nodes import asarray
    >>> s = reduce("sum", asarray(np.ones((2, 3))), axis=1)
    >>> s.shape
    (2,)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import movement, small
from .nodes import LazyArray, make_map, make_reduce, reduce_dtype, varying


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative axes; NumPy's AxisError for an axis out of range."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple | list) else (axis,)
    out = sorted(np.lib.array_utils.normalize_axis_index(int(a), ndim) for a in items)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return tuple(out)


def _result_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


# What np.sum/prod/max/min call for an ndarray, without their Python wrappers (~0.7 us each).
REDUCE_UFUNC: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


def reduce(kind: str, x: LazyArray, axis: Any = None, keepdims: bool = False) -> LazyArray:
    """``kind`` in sum/prod/max/min over ``axis`` with NumPy's ``keepdims`` semantics, lazily."""
    v = small.value_if_small(x)
    if v is not None:
        return small.wrap(REDUCE_UFUNC[kind].reduce(v, axis=axis, keepdims=keepdims))
    axes = normalize_axes(axis, x.ndim)
    shape = _result_shape(x.shape, axes, keepdims)
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes) and 0 not in shape:
        name = "maximum" if kind == "max" else "minimum"
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    flat = [a for a in axes if x.shape[a] > 1 or x.shape[a] == 0]
    var = varying(x)
    constant = [a for a in flat if not var[a] and x.shape[a] > 0]
    if constant and x.size > 0:
        # Take index 0 along the constant axes (keepdims), reduce what varies, scale.
        index = tuple(slice(0, 1) if i in constant else slice(None) for i in range(x.ndim))
        x1 = movement.getitem(x, index)
        count = int(np.prod([x.shape[a] for a in constant]))
        rest = tuple(a for a in flat if a not in constant)
        r = reduce(kind, x1, rest, keepdims=True) if rest else x1
        if kind == "sum":
            r = make_map("multiply", (r, count))
        elif kind == "prod":
            r = make_map("power", (r, count))
        if r.dtype != x.dtype and kind in ("max", "min"):
            r = make_map("cast", (r,), x.dtype)
        elif kind in ("sum", "prod"):
            want = reduce_dtype(kind, x.dtype)
            if r.dtype != want:
                r = make_map("cast", (r,), want)
        return movement.reshape(r, shape)
    if not flat:
        r = x
        want = reduce_dtype(kind, x.dtype)
        if r.dtype != want:
            r = make_map("cast", (r,), want)
        return movement.reshape(r, shape)
    return make_reduce(kind, x, tuple(flat), shape)


UNROLL = 8  # a reduction over at most this many elements, inside an expression, is inlined


_COMBINE = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}


def unrolled(kind: str, x: LazyArray, axes: tuple[int, ...]) -> LazyArray:
    """A short reduction (the 3 coordinates of ``sum(d**2, axis=-1)``) as a chain of elementwise
    ops over slices, keepdims. The planner inlines a short reduction nested in an expression this
    way, so it fuses into its consumer's kernel instead of being materialised at the consumer's
    size (an N×N array for pairwise distances)."""
    want = reduce_dtype(kind, x.dtype)
    if kind in ("sum", "prod") and x.dtype != want:
        x = make_map("cast", (x,), want)
    for a in axes:
        parts = [
            movement.getitem(
                x, tuple(slice(k, k + 1) if i == a else slice(None) for i in range(x.ndim))
            )
            for k in range(x.shape[a])
        ]
        acc = parts[0]
        for p in parts[1:]:
            acc = make_map(_COMBINE[kind], (acc, p))
        x = acc
    return x


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def _per_count(total: LazyArray, count: int) -> LazyArray:
    """``total / count``; a float16 total divided in float32 (as NumPy, whose count is an
    integer array: a Python count became a float16 constant, inf above 65504)."""
    if total.dtype != _F16:
        return make_map("divide", (total, count))
    quotient = make_map("divide", (make_map("cast", (total,), _F32), np.float32(count)))
    return make_map("cast", (quotient,), _F16)


def mean(x: LazyArray, axis: Any = None, keepdims: bool = False) -> LazyArray:
    """``np.mean``: the sum divided by the count (integers give float64, float32 stays, float16
    is summed in float32 as NumPy's)."""
    axes = normalize_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    if x.dtype.kind in "biu":  # summed in float64, as NumPy (an int64 sum may wrap)
        x = make_map("cast", (x,), np.dtype(np.float64))
    if x.dtype == _F16:  # (a float16 sum overflows at 65504)
        total = reduce("sum", make_map("cast", (x,), _F32), axes, keepdims)
        return make_map("cast", (make_map("divide", (total, np.float32(count))),), _F16)
    total = reduce("sum", x, axes, keepdims)
    return make_map("divide", (total, count))


def var(x: LazyArray, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> LazyArray:
    """``np.var``: the mean squared deviation from the mean (two passes, as NumPy)."""
    axes = normalize_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    # NumPy's var takes float16's mean from a float16 sum (its mean() sums in float32)
    centre = (
        _per_count(reduce("sum", x, axes, True), count)
        if x.dtype == _F16
        else mean(x, axes, keepdims=True)
    )
    dev = make_map("subtract", (x, centre))
    if dev.dtype.kind == "c":  # |dev|^2, as NumPy: real(dev * conj(dev)), a real variance
        sq = make_map("real", (make_map("multiply", (dev, make_map("conjugate", (dev,)))),))
    else:
        sq = make_map("square", (dev,))
    total = reduce("sum", sq, axes, keepdims)
    return _per_count(total, max(count - ddof, 0))


def std(x: LazyArray, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> LazyArray:
    """``np.std``: the square root of ``var``."""
    return make_map("sqrt", (var(x, axis, ddof, keepdims),))

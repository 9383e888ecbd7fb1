"""Rules for indexing and gathers: ``x[index]``, take, take_along_axis, diag, diagonal. Forward:
``ẏ = ẋ[index]`` (lazy for basic indexes), and the gathers are ``linear``.

A gather's pullback is a scatter-add of ``dy`` into zeros of the argument's shape. The scatter is
its own differentiable primitive, ``scatter_add(dy, index, shape)``: the only place where an
in-place update (``np.add.at``) happens, inside the primitive, so that higher-order AD traces
pullbacks as ordinary calls. Its own pullback is the gather ``g[index]``.

| NumPy function | pullback |
|---|---|
| ``operator.getitem`` (``x[index]``) | ``dx = scatter_add(dy, index, x.shape)`` |
| ``np.take(a, idx, axis)`` | ``da = scatter_add(dy, (:,)*axis + (idx,), a.shape)`` |
| ``np.take_along_axis(a, idx, axis)`` | ``da = scatter_add(dy, <full fancy index>, a.shape)`` |
| ``np.diagonal(a, k, ax1, ax2)`` | ``da = scatter_add(dy, (..., rows, cols))`` (axes moved last) |
| ``np.diag(v, k)`` 1-d → 2-d | ``dv = diagonal(dy, k)`` |
| ``np.diag(a, k)`` 2-d → 1-d | ``da = scatter_add(dy, (rows, cols), a.shape)`` |
| ``scatter_add(dy, index, shape)`` | ``ddy = g[index]`` |

Repeated integer indices accumulate (``x[[0, 0]]`` gives ``2 * dy`` at 0). Boolean masks are
turned into their ``nonzero()`` integer arrays for the scatter; indexes without integer arrays
(basic indexing, masks) scatter by plain assignment, which is exact since they cannot repeat.

``getitem`` is registered with ``lazy=True``:
- the forward ``x[index]`` is lazy for basic indexes (ints, slices, None, Ellipsis) on a lazy ``x``;
  advanced indexes materialise a lazy ``x`` first;
- the pullback keeps a lazy ``dy`` lazy when the index holds only ints, ``None``, ``Ellipsis`` and
  full slices (``x[i]``, ``x[:, 0]``, ``x[None]``): ``dx = where(onehot masks, dy expanded, 0)``,
  elementwise and broadcast, so it fuses with its consumer. Any other index (slices with bounds
  or steps, integer arrays, masks) unthunks and materialises ``dy`` and calls ``scatter_add``
  (slices alone: ``_embed_slices``, which a jit replay writes into the program's buffer).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..lazy import LazyArray, materialize_many, replay
from ..tangents import NoTangent, ZeroTangent, unthunk
from .common import as_index_tuple as _as_tuple
from .common import (
    is_basic_index,
    is_zero,
    lazy_ct,
    lazy_frule,
    lazy_tangent,
    linear,
    no_tangents,
    params,
    project,
    scatter_add,
)
from .common import materialize as _materialize
from .lazy_values import as_lazy
from .registry import register_rrule

# --------------------------------------------------------------------------------------------------
# x[index]
# --------------------------------------------------------------------------------------------------


def _lazy_embed(dy: Any, index: tuple, shape: tuple[int, ...], dtype: Any) -> Any | None:
    """``dx`` for an index of ints, None, Ellipsis and full slices, as a broadcast
    ``where(mask, dy_expanded, 0)`` (lazy-friendly), or None for other indexes."""
    if any(isinstance(i, slice) and i != slice(None) for i in index):
        return None
    n_used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1 or n_used > len(shape):
        return None
    # Expand the Ellipsis into full slices.
    full: list = []
    for i in index:
        if i is Ellipsis:
            full.extend([slice(None)] * (len(shape) - n_used))
        else:
            full.append(i)
    full.extend([slice(None)] * (len(shape) - sum(1 for i in full if i is not None)))
    # dy has one axis per None and per slice; drop the None axes, insert size-1 axes at ints.
    expanded: list[int] = []
    mask = None
    ax = 0
    dy_shape = tuple(dy.shape) if hasattr(dy, "shape") else np.shape(dy)
    d = 0
    for i in full:
        if i is None:
            d += 1
            continue
        if isinstance(i, slice):
            expanded.append(dy_shape[d])
            d += 1
        else:
            n = shape[ax]
            onehot = np.arange(n) == (int(i) % n if n else 0)
            onehot = np.reshape(onehot, (n,) + (1,) * (len(shape) - ax - 1))
            mask = onehot if mask is None else mask & onehot
            expanded.append(1)
        ax += 1
    lead = len(expanded) - len(dy_shape)
    if lead < 0 or tuple(expanded[lead:]) != dy_shape or any(k != 1 for k in expanded[:lead]):
        g = np.reshape(dy, tuple(expanded))
    else:
        g = dy  # only leading size-1 axes to add: broadcasting adds them (a reshape rebuilds dy)
    out = g if mask is None else np.where(mask, g, np.zeros((), dtype=dtype))
    missing = len(shape) - np.ndim(out)
    if missing > 0:  # (size-1 leading axes the mask does not span: x[..., 0] of a (1, 1) x)
        out = np.reshape(out, (1,) * missing + tuple(np.shape(out)))
    return out


@register_rrule(operator.getitem, lazy=True)
def getitem(x, index):
    """x[index] (basic, advanced, boolean, mixed): dx = scatter_add(dy, index, x.shape)."""
    shape = tuple(np.shape(x))
    basic = is_basic_index(index)
    if not basic:
        x = _materialize(x)
        index = tuple(np.asarray(i) if isinstance(i, list) else i for i in _as_tuple(index))
    y = x[index]
    dtype = getattr(x, "dtype", np.dtype(np.float64))

    only_new_axes = basic and all(
        i is None or i is Ellipsis or (isinstance(i, slice) and i == slice(None))
        for i in _as_tuple(index)
    )

    def pullback(dy):
        dy = lazy_ct(dy)
        if only_new_axes:  # x[:, None]: the cotangent is dy without the new axes
            return np.reshape(dy, shape), NoTangent()
        if basic and type(dy) is np.ndarray:  # a view's cotangent: zeros, dy written in
            g = np.zeros(shape, dy.dtype)
            g[index] = dy
            return project(g, x), NoTangent()
        if basic and not isinstance(dy, np.ndarray | np.generic | float | int | complex):
            g = _lazy_embed(dy, _as_tuple(index), shape, dtype)
            if g is not None:
                return g, NoTangent()
        slices = _as_tuple(index)
        if basic and all(type(i) is slice for i in slices):  # x[:, h:2h], an LSTM's gate
            g = replay.step(_embed_slices, (dy, slices, shape), {}, _materialize, direct=True)[0]
            return project(g, x), NoTangent()
        # a step of a jit recording (dy written into zeros again at each replay), else a call
        g = replay.step(scatter_add, (dy, index, shape), {}, _materialize)
        return project(g, x), NoTangent()

    return y, pullback


def _embed_slices(dy: Any, index: tuple, shape: tuple, outs: list | None = None) -> list:
    """``[zeros of shape with dy at the slices index]``: the pullback of ``x[slices]`` as a
    direct step of a jit recording, replayed into the program's buffer (``outs``) when it has
    one (a checked ``scatter_add`` step cost ~5 us a replay on an LSTM's 8x24 gates). A traced
    ``dy`` (an outer trace differentiating this pullback) takes the primitive.

    >>> _embed_slices(np.ones((2, 1)), (slice(None), slice(1, 2)), (2, 3))[0].tolist()
    [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if type(dy) is not np.ndarray:
        return [scatter_add(dy, index, shape)]
    out = None if outs is None else outs[0]
    if out is None:
        out = np.zeros(shape, dy.dtype)
    else:
        out.fill(0)
    out[index] = dy
    return [out]


@lazy_frule(operator.getitem)
def _getitem_jvp(tangents, x, index):
    """x[index]: ẏ = ẋ[index] (lazy for basic indexes; advanced ones materialise both)."""
    t = tangents[0]
    if not is_basic_index(index):
        x, t = _materialize_pair(x, t)
        index = tuple(np.asarray(i) if isinstance(i, list) else i for i in _as_tuple(index))
    y = as_lazy(x)[index]
    if is_zero(t):
        return y, ZeroTangent()
    t = lazy_tangent(t)
    if np.ndim(t) == 0 and not hasattr(t, "__getitem__"):
        t = np.asarray(t)
    return y, t[index]


def _materialize_pair(x: Any, t: Any) -> tuple:
    """A primal and its tangent materialised together (one kernel when they share a domain)."""
    t = unthunk(t)
    todo = [v for v in (x, t) if isinstance(v, LazyArray)]
    if todo:
        materialize_many(todo)
    x = _materialize(x)
    t = t if is_zero(t) else _materialize(t)
    return x, t


# --------------------------------------------------------------------------------------------------
# Gathers with NumPy names
# --------------------------------------------------------------------------------------------------


@register_rrule(np.take)
def _take(a, indices, *args, **kwargs):
    """np.take: da = scatter_add(dy, (:,)*axis + (indices,), a.shape) (axis=None: flattened a);
    mode='wrap'/'clip' indices are normalised first."""
    p = params(args, kwargs, axis=None, out=None, mode="raise")
    axis, mode = p["axis"], p["mode"]
    shape = np.shape(a)
    idx = np.asarray(indices)

    def pullback(dy):
        if axis is None:
            target = (int(np.prod(shape, dtype=np.int64)),)
            ax = 0
        else:
            target = shape
            ax = axis + len(shape) if axis < 0 else axis
        n = target[ax]
        i = idx
        if mode == "wrap":
            i = np.mod(i, n)
        elif mode == "clip":
            i = np.clip(i, 0, n - 1)
        g = scatter_add(dy, (slice(None),) * ax + (i,), target)
        return (project(np.reshape(g, shape), a), NoTangent(), *no_tangents(len(args)))

    return np.take(a, indices, *args, **kwargs), pullback


def _along_axis_index(indices: np.ndarray, axis: int, shape: tuple, out: tuple) -> tuple:
    """The full fancy index into an array of ``shape`` equivalent to ``take_along_axis(.,
    indices, axis)``, whose result has shape ``out`` (the array and ``indices`` broadcast
    against each other off ``axis``: a size-1 dimension of the array is read at 0)."""
    ndim = len(out)
    index = []
    for d in range(ndim):
        if d == axis:
            index.append(np.broadcast_to(indices, out))
        else:
            shp = [1] * ndim
            shp[d] = out[d]
            positions = np.arange(out[d]) if shape[d] != 1 else np.zeros(out[d], np.intp)
            index.append(np.reshape(positions, shp))
    return tuple(index)


@register_rrule(np.take_along_axis)
def _take_along_axis(arr, indices, *args, **kwargs):
    """np.take_along_axis: da = scatter_add(dy, fancy index of (indices, axis), a.shape)."""
    axis = params(args, kwargs, axis=-1)["axis"]
    shape = np.shape(arr)
    idx = np.asarray(indices)
    y = np.take_along_axis(arr, indices, *args, **kwargs)

    def pullback(dy):
        if axis is None:
            g = scatter_add(dy, (idx,), (int(np.prod(shape, dtype=np.int64)),))
        else:
            ax = axis + len(shape) if axis < 0 else axis
            full = _along_axis_index(idx, ax, shape, np.shape(y))
            g = scatter_add(np.broadcast_to(dy, np.shape(y)), full, shape)
        return (project(np.reshape(g, shape), arr), NoTangent(), *no_tangents(len(args)))

    return y, pullback


def _diag_index(n: int, m: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the k-th diagonal of an (n, m) matrix."""
    if k >= 0:
        length = max(0, min(n, m - k))
        rows = np.arange(length)
        return rows, rows + k
    length = max(0, min(n + k, m))
    cols = np.arange(length)
    return cols - k, cols


@register_rrule(np.diagonal)
def _diagonal(a, *args, **kwargs):
    """np.diagonal: da = moveaxis(scatter_add(dy, (..., rows, cols)), (-2, -1), (axis1, axis2))."""
    p = params(args, kwargs, offset=0, axis1=0, axis2=1)
    shape = np.shape(a)
    nd = len(shape)
    ax1, ax2 = p["axis1"] % nd, p["axis2"] % nd
    offset = p["offset"]

    def pullback(dy):
        moved = tuple(s for i, s in enumerate(shape) if i not in (ax1, ax2))
        moved = moved + (shape[ax1], shape[ax2])
        rows, cols = _diag_index(shape[ax1], shape[ax2], offset)
        g = scatter_add(dy, (Ellipsis, rows, cols), moved)
        g = np.moveaxis(g, (-2, -1), (ax1, ax2))
        return (project(g, a), *no_tangents(len(args)))

    return np.diagonal(a, *args, **kwargs), pullback


@register_rrule(np.diag)
def _diag(v, *args, **kwargs):
    """np.diag: 1-d → 2-d: dv = diagonal(dy, k); 2-d → 1-d: dv = scatter_add(dy, diag index)."""
    k = params(args, kwargs, k=0)["k"]
    shape = np.shape(v)

    def pullback(dy):
        if len(shape) == 1:
            g = np.diagonal(dy, k)
        else:
            rows, cols = _diag_index(shape[0], shape[1], k)
            g = scatter_add(dy, (rows, cols), shape)
        return (project(g, v), *no_tangents(len(args)))

    return np.diag(v, *args, **kwargs), pullback


# Linear in the array: ẏ = f(ẋ, ...), beside the reverse rules above.
for _f in (np.take, np.take_along_axis, np.diagonal, np.diag):
    linear(_f)

"""NumPy functions traced through their definition: one flat table, ``COMPOSITES``.

A composite is a plain Python function written with NumPy calls that already have rules. When a
traced value reaches one of the functions below, the tracer calls the composite instead, so AD
sees (and fuses) the pieces: reverse mode, forward mode and every higher order come for free, and
there is no pullback to maintain. Values that carry no derivative (indices, masks, the unwrapping
steps of ``np.unwrap``) are computed on the primal.

- keywords to the rules of ``moveaxis``, ``swapaxes``, ``tile``, ``repeat``, ``roll``, ``split``,
  ``array_split``, ``expand_dims``, ``broadcast_to``: passed positionally to the rule.
- ``pad``, every mode: a gather of the array (and of traced ``constant_values``) by NumPy's own
  padding of index codes; ``linear_ramp``, ``mean``/``maximum``/``minimum``/``median`` and odd
  reflection axis by axis, as NumPy pads.
- ``flipud``, ``fliplr``, ``rot90``, ``rollaxis``: ``flip``, ``transpose``, ``moveaxis``.
- ``atleast_1d/2d/3d``, ``column_stack``, ``append``, ``hsplit``/``vsplit``/
  ``dsplit``: ``reshape``, ``concatenate``, ``split``.
- ``insert``, ``delete``, ``partition``: a gather by positions computed on the primal.
- ``meshgrid``, ``linspace``, ``logspace``, ``geomspace``: ``broadcast_to``;
  ``start + (stop - start) * t``.
- ``select``, ``piecewise``: nested ``where``.
- ``gradient``, ``trapezoid``: differences and sums (uniform or coordinate spacing).
- ``interp``: ``fp[i] + t (fp[i+1] - fp[i])`` with ``i`` found on the primal (also ``period``).
- ``correlate``: ``np.convolve`` (a bilinear rule, ``rules/linalg.py``) with ``v`` reversed.
- ``polyval``, ``kron``, ``cross``, ``outer``: Horner; broadcast products.
- ``polyfit``: NumPy's column-scaled Vandermonde least-squares problem through ``lstsq``
  (``w=`` too; not ``full=``/``cov=``).
- ``round``/``around``: ``rint(x 10^d) / 10^d`` (zero derivative, as NumPy computes it).
- ``nan_to_num``, ``real_if_close``, ``unwrap``: ``where``; ``real``; ``p + (unwrap(p) - p)``
  with the added multiples of the period held constant.
- ``radians``/``degrees``: ``scalar_rule`` entries (constant derivatives).

Example::

    >>> import fusegrad as fg
    >>> fg.grad(lambda x: np.sum(np.pad(x, 2, mode="reflect")))(np.arange(4.0)).tolist()
    [1.0, 3.0, 3.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import lazy
from . import registry
from .common import (
    as_array,
    cast,
    dispatch,
    dtype_of,
    is_complex_value,
    primal,
    probe,
    scalar_rule,
    value,
)

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def positional(f: Any, names: tuple[str, ...], defaults: dict[str, Any]) -> Callable:
    """A composite that passes ``f``'s parameters ``names`` positionally to ``f``'s rule: rules
    (and the lazy movement functions) take their axis/shape/repeats arguments by position."""

    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("subok", None)  # broadcast_to's: traced values are no ndarray subclass
        vals = dict(defaults)
        vals.update(zip(names, args, strict=False))
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"np.{f.__name__}() got unexpected keyword(s) {sorted(unknown)}")
        vals.update(kwargs)
        missing = [n for n in names if n not in vals]
        if missing:
            raise TypeError(f"np.{f.__name__}() missing argument(s) {missing}")
        return dispatch(f, tuple(vals[n] for n in names))

    call.__name__ = f"{f.__name__}_positional"
    return call


def _norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(axis, ndim)
    return axis % max(ndim, 1)


def _gather_codes(x: Any, codes: np.ndarray) -> Any:
    """``x.ravel()[codes]`` (``codes`` an integer array of any shape)."""
    return np.reshape(np.take(np.ravel(x), np.ravel(codes)), codes.shape)


def _codes(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


# --------------------------------------------------------------------------------------------------
# Movement and joining
# --------------------------------------------------------------------------------------------------


def _rot90(m: Any, k: int = 1, axes: tuple = (0, 1)) -> Any:
    ndim = np.ndim(m)
    a0, a1 = (_norm_axis(int(a), ndim) for a in axes)
    if a0 == a1:
        raise ValueError("np.rot90: axes must be different")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return np.flip(np.flip(m, a0), a1)
    perm = list(range(ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return np.transpose(np.flip(m, a1), perm)
    return np.flip(np.transpose(m, perm), a1)


def _rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    ndim = np.ndim(a)
    axis = _norm_axis(axis, ndim)
    start = start + ndim if start < 0 else start
    if not 0 <= start <= ndim:
        raise np.exceptions.AxisError(f"start={start} out of range for {ndim} dimensions")
    if axis < start:
        start -= 1
    return np.moveaxis(a, axis, start) if axis != start else a


def _atleast(n: int) -> Callable:
    def atleast(*arys: Any) -> Any:
        outs = []
        for a in arys:
            a = as_array(a)
            shape = np.shape(a)
            if len(shape) < n:
                if n == 3 and len(shape) == 2:
                    shape = shape + (1,)
                elif n == 3 and len(shape) == 1:
                    shape = (1,) + shape + (1,)
                else:
                    shape = (1,) * (n - len(shape)) + shape
                a = np.reshape(a, shape)
            outs.append(a)
        return outs[0] if len(outs) == 1 else tuple(outs)

    atleast.__name__ = f"atleast_{n}d"
    return atleast


def _column_stack(tup: Any) -> Any:
    cols = []
    for a in tup:
        a = as_array(a)
        cols.append(np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a)
    return np.concatenate(cols, axis=1)


def _append(arr: Any, values: Any, axis: int | None = None) -> Any:
    arr, values = as_array(arr), as_array(values)
    if axis is None:
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum(*args: Any, **kwargs: Any) -> Any:
    """np.einsum; the interleaved form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` is written as
    its subscripts string (``"ab,bc->ac"``), which the rule takes."""
    if not args or isinstance(args[0], str):
        return dispatch(np.einsum, args, kwargs)

    def letters(sublist: Any) -> str:
        try:
            return "".join("..." if k is Ellipsis else _LETTERS[int(k)] for k in sublist)
        except (IndexError, TypeError, ValueError):
            raise ValueError(
                f"np.einsum: a subscript list holds integers in [0, 52) and Ellipsis, got "
                f"{sublist!r}"
            ) from None

    operands, subs = list(args[0::2]), [letters(v) for v in args[1::2]]
    out = ""
    if len(args) % 2:  # an output sublist after the last (operand, sublist) pair
        out = "->" + letters(operands.pop())
    return dispatch(np.einsum, (",".join(subs) + out, *operands), kwargs)


_NO_VALUE = object()


def _diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _NO_VALUE, append: Any = _NO_VALUE):
    """np.diff with ``prepend``/``append`` joined to ``a`` first, as NumPy does, so that a
    traced one gets its gradient (the rule takes them as constants)."""
    a = as_array(a)
    if (prepend is _NO_VALUE and append is _NO_VALUE) or n == 0:  # (n = 0: NumPy returns a)
        return dispatch(np.diff, (a, n, axis))
    if np.ndim(a) == 0:
        raise ValueError("np.diff: diff requires input that is at least one dimensional")
    ax = int(axis) % np.ndim(a)
    parts = []
    for v in (prepend, a, append):
        if v is _NO_VALUE:
            continue
        v = as_array(v)
        if np.ndim(v) == 0:  # a scalar: one slice along the axis, a's shape elsewhere
            shape = list(np.shape(a))
            shape[ax] = 1
            v = np.broadcast_to(v, tuple(shape))
        parts.append(v)
    return dispatch(np.diff, (np.concatenate(parts, axis=ax), n, ax))


def _split_along(axis: int, min_ndim: int, name: str) -> Callable:
    def split(ary: Any, indices_or_sections: Any) -> Any:
        if np.ndim(ary) < min_ndim:
            raise ValueError(f"np.{name} only works on arrays of {min_ndim} or more dimensions")
        ax = 0 if (axis == 1 and np.ndim(ary) == 1) else axis
        return dispatch(np.split, (ary, indices_or_sections, ax))

    split.__name__ = name
    return split


def _insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    arr, values = as_array(arr), as_array(values)
    obj = value(obj)
    shape, vshape = np.shape(arr), np.shape(values)
    # Codes >= 0 name elements of arr, codes < 0 elements of values: np.insert places them.
    acodes = _codes(shape).astype(np.float64)
    vcodes = -1.0 - _codes(vshape).astype(np.float64)
    where = np.insert(acodes, obj, vcodes, axis=axis).astype(np.int64)
    from_arr = where >= 0
    a_part = _gather_codes(arr, np.where(from_arr, where, 0))
    if np.size(values) == 0:
        return a_part
    v_part = _gather_codes(values, np.where(from_arr, 0, -1 - where))
    return np.where(from_arr, a_part, v_part)


def _delete(arr: Any, obj: Any, axis: int | None = None) -> Any:
    arr = as_array(arr)
    keep = np.delete(_codes(np.shape(arr)), value(obj), axis=axis)
    return _gather_codes(arr, keep)


def _partition(a: Any, kth: Any, axis: int | None = -1, kind: Any = "introselect", order=None):
    if order is not None:
        raise TypeError("np.partition(order=...) sorts structured arrays, which have no gradient")
    if axis is None:
        a, axis = np.ravel(a), -1
    # the order of the primal (lazily: a jit recording records the argpartition as a step)
    idx = np.argpartition(primal(a), value(kth), axis=axis, kind=kind)
    return np.take_along_axis(a, idx, axis=axis)


def _meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    if indexing not in ("xy", "ij"):
        raise ValueError("np.meshgrid: indexing must be 'xy' or 'ij'")
    xs = [np.ravel(as_array(x)) for x in xi]
    n = len(xs)
    outs = []
    for i, x in enumerate(xs):
        shape = [1] * n
        pos = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and n > 1 else i
        shape[pos] = -1
        outs.append(np.reshape(x, shape))
    if not sparse:
        full = np.broadcast_shapes(*(np.shape(v) for v in outs))
        outs = [np.broadcast_to(o, full) for o in outs]
    return tuple(outs)


def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, device=None):
    num = int(num)
    if num < 0:
        raise ValueError(f"np.linspace: number of samples, {num}, must be non-negative")
    dt = np.linspace(probe(start), probe(stop), 2).dtype  # NumPy's (Python scalars weak)
    start, stop = as_array(start), as_array(stop)
    div = (num - 1) if endpoint else num
    t = np.arange(num, dtype=np.finfo(dt).dtype)
    bshape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    t = np.reshape(t, (-1,) + (1,) * len(bshape))
    delta = stop - start
    step = delta / div if div > 0 else delta * np.nan
    y = start + t * step if div > 0 else start + t * delta
    if endpoint and num > 1:
        last = np.reshape(stop + np.zeros(bshape, dt), (1,) + tuple(bshape))
        y = np.concatenate([y[:-1], last], axis=0)
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    y = cast(y, dt if dtype is None else dtype)
    return (y, step) if retstep else y


def _logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    y = np.power(base, _linspace(start, stop, num, endpoint, axis=0))
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    return y if dtype is None else y.astype(dtype)


def _geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    # NumPy computes in the ends' dtype promoted with float64 (or with dtype=): float32 ends too
    dt = np.result_type(dtype_of(start), dtype_of(stop), float(num), np.zeros((), dtype))
    start, stop = cast(as_array(start), dt), cast(as_array(stop), dt)
    # NumPy rotates start onto the positive reals: divided by sign(start), z/|z| for a complex
    # start (multiplying by it, right for ±1 only, turned complex results by twice its angle)
    sign = np.sign(value(start))
    y = sign * np.exp(_linspace(np.log(start / sign), np.log(stop / sign), num, endpoint))
    if num > 0:
        first = np.reshape(start + 0.0 * y[0], (1,) + np.shape(y)[1:])
        parts = [first, y[1:]]
        if endpoint and num > 1:
            parts = [first, y[1:-1], np.reshape(stop + 0.0 * y[0], (1,) + np.shape(y)[1:])]
        y = np.concatenate(parts, axis=0)
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    return y if dtype is None else y.astype(dtype)


# --------------------------------------------------------------------------------------------------
# np.pad
# --------------------------------------------------------------------------------------------------


def _pairs(v: Any, ndim: int, name: str) -> list[tuple[Any, Any]]:
    """``v`` (a scalar, a pair, or one pair per axis; possibly traced) as one (before, after)
    pair per axis, as NumPy broadcasts pad arguments."""
    arr = as_array(v)
    shape = np.shape(arr)
    if len(shape) > 2 or (len(shape) == 2 and shape[1] not in (1, 2)):
        raise ValueError(f"np.pad: {name} must be a scalar, a pair or one pair per axis")
    idx = np.broadcast_to(_codes(shape), (ndim, 2)) if shape else np.zeros((ndim, 2), np.int64)
    flat = np.ravel(arr) if shape else arr
    return [(flat[int(b)] if shape else flat, flat[int(a)] if shape else flat) for b, a in idx]


_PAD_GATHER = ("edge", "wrap", "reflect", "symmetric", "empty")
_PAD_STAT: dict[str, Any] = {
    "maximum": np.max,
    "minimum": np.min,
    "mean": np.mean,
    "median": np.median,
}


def _pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    array = as_array(array)
    shape, ndim, dt = np.shape(array), np.ndim(array), dtype_of(array)
    widths = np.broadcast_to(np.asarray(value(pad_width), dtype=np.int64), (ndim, 2))
    if callable(mode):
        raise TypeError(
            "np.pad with a callable mode fills the padding in place, which fusegrad cannot "
            "differentiate: use a named mode, or build the padding with np.concatenate"
        )
    allowed = {
        "constant": {"constant_values"},
        "linear_ramp": {"end_values"},
        "reflect": {"reflect_type"},
        "symmetric": {"reflect_type"},
        "maximum": {"stat_length"},
        "minimum": {"stat_length"},
        "mean": {"stat_length"},
        "median": {"stat_length"},
    }.get(mode, set())
    allowed_modes = ("constant", "linear_ramp")
    if mode not in _PAD_GATHER and mode not in _PAD_STAT and mode not in allowed_modes:
        np.pad(np.zeros(shape), value(pad_width), mode=mode, **value(kwargs))  # NumPy's error
    if set(kwargs) - allowed:
        bad = sorted(set(kwargs) - allowed)
        raise ValueError(f"np.pad: unsupported keyword(s) {bad} for mode {mode!r}")
    odd = kwargs.get("reflect_type", "even") == "odd"
    if mode == "constant" and not registry._traced(kwargs.get("constant_values", 0)):
        return dispatch(np.pad, (array, value(pad_width)), {"mode": "constant", **value(kwargs)})
    if mode in _PAD_GATHER and not odd:
        codes = np.pad(_codes(shape), widths, mode=mode, **kwargs)
        if mode == "empty":  # undefined padding: zeros, no derivative
            codes = np.pad(_codes(shape), widths, mode="constant", constant_values=-1)
            return np.where(codes >= 0, _gather_codes(array, np.maximum(codes, 0)), 0.0)
        return _gather_codes(array, codes)
    if mode == "constant":
        cv = _pairs(kwargs["constant_values"], ndim, "constant_values")
        # NumPy writes the constants into an array of the input's dtype
        vals = cast(np.stack([np.stack([b, a]) for b, a in cv]) + np.zeros((ndim, 2)), dt)
        # NumPy fills axis by axis; codes -1 - k mark the k-th constant, the corners as NumPy does.
        ccodes = -1 - _codes((ndim, 2))
        codes = _codes(shape)
        for ax in range(ndim):
            w: list[Any] = [(0, 0)] * ndim
            w[ax] = tuple(int(v) for v in widths[ax])
            codes = np.pad(
                codes, w, mode="constant", constant_values=(ccodes[ax, 0], ccodes[ax, 1])
            )
        inside = codes >= 0
        return np.where(
            inside,
            _gather_codes(array, np.where(inside, codes, 0)),
            _gather_codes(vals, np.where(inside, 0, -1 - codes)),
        )
    # linear_ramp, statistics and odd reflection: axis by axis, as NumPy pads.
    out = array
    for ax in range(ndim):
        b, a = (int(v) for v in widths[ax])
        if b == 0 and a == 0:
            continue
        out = _pad_axis(out, ax, b, a, mode, kwargs, ndim)
    return out


def _pad_axis(x: Any, ax: int, b: int, a: int, mode: Any, kwargs: dict, ndim: int) -> Any:
    n = np.shape(x)[ax]
    x_last = np.moveaxis(x, ax, -1)
    if mode in _PAD_STAT:
        stat = _PAD_STAT[mode]
        lengths = kwargs.get("stat_length")
        sl = [(n, n)] * ndim if lengths is None else _pairs(value(lengths), ndim, "stat_length")
        lb, la = (max(1, min(int(v), n)) for v in sl[ax])
        pieces = []
        if b:
            pieces.append(_bcast_last(stat(x_last[..., :lb], axis=-1, keepdims=True), b))
        pieces.append(x_last)
        if a:
            pieces.append(_bcast_last(stat(x_last[..., n - la :], axis=-1, keepdims=True), a))
        return np.moveaxis(np.concatenate(pieces, axis=-1), -1, ax)
    if mode == "linear_ramp":
        ev = _pairs(kwargs.get("end_values", 0), ndim, "end_values")[ax]
        # The ramp is linear in (edge, end value): its weights from NumPy's own ramp of (0, 1).
        w = np.pad(np.zeros(n), (b, a), mode="linear_ramp", end_values=1.0)
        # (NumPy's ramps are in the array's dtype: the float64 weights and end values are not)
        dt = dtype_of(x)
        pieces = []
        if b:
            wb = w[:b]
            pieces.append(cast(x_last[..., :1] * (1 - wb) + ev[0] * wb, dt))
        pieces.append(x_last)
        if a:
            wa = w[b + n :]
            pieces.append(cast(x_last[..., -1:] * (1 - wa) + ev[1] * wa, dt))
        return np.moveaxis(np.concatenate(pieces, axis=-1), -1, ax)
    # Odd reflection: each padded entry is a fixed linear combination of the line, read off
    # NumPy's own padding of the identity.
    m = np.pad(np.eye(n), ((b, a), (0, 0)), mode=mode, **kwargs)
    # (its entries are small integers, exact in the array's dtype, which NumPy's result keeps)
    rows = np.concatenate([m[:b], m[b + n :]], axis=0).astype(dtype_of(x))
    pad_vals = np.tensordot(x_last, rows, axes=([-1], [1]))
    return np.moveaxis(
        np.concatenate([pad_vals[..., :b], x_last, pad_vals[..., b:]], axis=-1), -1, ax
    )


def _bcast_last(v: Any, k: int) -> Any:
    return np.broadcast_to(v, np.shape(v)[:-1] + (k,))


# --------------------------------------------------------------------------------------------------
# Selection, calculus, interpolation, polynomials, products
# --------------------------------------------------------------------------------------------------


def _select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    if len(condlist) != len(choicelist):
        raise ValueError("np.select: list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("np.select with an empty condition list is not possible")
    out = default
    for cond, choice in zip(reversed(list(condlist)), reversed(list(choicelist)), strict=True):
        out = np.where(value(cond), choice, out)
    return out


def _piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    xv = value(x)
    conds = value(condlist)
    if np.ndim(xv) == 0 or not isinstance(conds, list | tuple):
        conds = [conds] if np.ndim(np.asarray(conds)) == np.ndim(xv) else list(conds)
    conds = [np.asarray(c, dtype=bool) for c in conds]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"np.piecewise: with {n} condition(s), give {n} or {n + 1} functions")
    if len(funclist) == n + 1:
        conds.append(~np.any(conds, axis=0))
    # NumPy fills zeros_like(x): the result has x's dtype, whatever the pieces' dtypes
    out: Any = np.zeros(np.shape(xv), dtype=np.asarray(xv).dtype)
    for cond, f in zip(conds, funclist, strict=True):
        val = f(x, *args, **kw) if callable(f) else f
        out = np.where(cond, val, out)
    return cast(out, np.asarray(xv).dtype)


def _spacing(varargs: tuple, axes: list[int], shape: tuple) -> list[Any]:
    if len(varargs) == 0:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(value(varargs[0])) == 0:
        return [varargs[0]] * len(axes)
    if len(varargs) != len(axes):
        raise TypeError("np.gradient: give one spacing (or coordinate array) per axis")
    out = []
    for d, ax in zip(varargs, axes, strict=True):
        if np.ndim(value(d)) == 0:
            out.append(d)
        elif np.shape(d) != (shape[ax],):
            raise ValueError("np.gradient: the coordinates must match the length of their axis")
        else:
            out.append(np.diff(as_array(d)))
    return out


def _gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    f = as_array(f)
    shape, ndim = np.shape(f), np.ndim(f)
    if axis is None:
        axes = list(range(ndim))
    elif np.ndim(axis) > 0:  # (a tuple: int() of it was an internal TypeError)
        axes = [_norm_axis(int(a), ndim) for a in axis]
    else:
        axes = [_norm_axis(int(axis), ndim)]
    if edge_order not in (1, 2):
        raise ValueError("np.gradient: edge_order must be 1 or 2")
    # NumPy writes every derivative into an array of f's dtype (float64 for integers): float64
    # coordinates or spacings do not make a float32 f's derivative float64
    otype = dtype_of(f) if np.issubdtype(dtype_of(f), np.inexact) else np.dtype(np.float64)
    outs = []
    for ax, dx in zip(axes, _spacing(varargs, axes, shape), strict=True):
        n = shape[ax]
        if n < edge_order + 1:
            raise ValueError("np.gradient: each axis must have at least edge_order + 1 elements")
        g = np.moveaxis(f, ax, -1)
        uniform = np.ndim(value(dx)) == 0
        d1 = dx if uniform else dx[:-1]
        d2 = dx if uniform else dx[1:]
        inner = (
            -(d2 / (d1 * (d1 + d2))) * g[..., :-2]
            + ((d2 - d1) / (d1 * d2)) * g[..., 1:-1]
            + (d1 / (d2 * (d1 + d2))) * g[..., 2:]
        )
        if uniform:
            inner = (g[..., 2:] - g[..., :-2]) / (2.0 * dx)
        if edge_order == 1:
            e0 = dx if uniform else dx[0]
            e1 = dx if uniform else dx[-1]
            first = (g[..., 1:2] - g[..., 0:1]) / e0
            last = (g[..., -1:] - g[..., -2:-1]) / e1
        else:
            a1, a2 = (dx, dx) if uniform else (dx[0], dx[1])
            first = (
                -(2.0 * a1 + a2) / (a1 * (a1 + a2)) * g[..., 0:1]
                + (a1 + a2) / (a1 * a2) * g[..., 1:2]
                - a1 / (a2 * (a1 + a2)) * g[..., 2:3]
            )
            b1, b2 = (dx, dx) if uniform else (dx[-2], dx[-1])
            last = (
                b2 / (b1 * (b1 + b2)) * g[..., -3:-2]
                - (b2 + b1) / (b1 * b2) * g[..., -2:-1]
                + (2.0 * b2 + b1) / (b2 * (b1 + b2)) * g[..., -1:]
            )
        pieces = [first, inner, last] if n > 2 else [first, last]
        outs.append(cast(np.moveaxis(np.concatenate(pieces, axis=-1), -1, ax), otype))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    y = as_array(y)
    ax = _norm_axis(axis, np.ndim(y))
    g = np.moveaxis(y, ax, -1)
    if x is None:
        d = dx
    else:
        x = as_array(x)
        d = np.diff(x) if np.ndim(x) == 1 else np.moveaxis(np.diff(x, axis=axis), ax, -1)
    return np.sum(d * (g[..., 1:] + g[..., :-1]), axis=-1) / 2.0


def _interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period=None) -> Any:
    x, xp, fp = as_array(x), as_array(xp), as_array(fp)
    if period is not None:
        period = abs(float(value(period)))
        order = np.argsort(np.mod(value(xp), period))
        xp = np.mod(xp, period)[order]
        fp = fp[order]
        xp = np.concatenate([xp[-1:] - period, xp, xp[0:1] + period])
        fp = np.concatenate([fp[-1:], fp, fp[0:1]])
        x = np.mod(x, period)
        left = right = None
    xpv, xv = primal(xp), primal(x)  # (lazily: a jit recording records the search as a step)
    # a plain xp or fp indexed by the computed i: as lazy arrays, whose gathers a jit recording
    # records (NumPy would convert the index itself, a read of the values)
    xp, fp = (lazy.asarray(v) if type(v) is np.ndarray else v for v in (xp, fp))
    if xpv.ndim != 1 or np.ndim(fp) != 1 or xpv.shape != np.shape(fp):
        raise ValueError("np.interp: xp and fp must be 1-d sequences of the same length")
    if xpv.size == 1:
        val = fp[0] + 0.0 * x
    else:
        i = np.clip(np.searchsorted(xpv, xv, side="right") - 1, 0, xpv.size - 2)
        x0, x1, f0, f1 = xp[i], xp[i + 1], fp[i], fp[i + 1]
        t = (x - x0) / (x1 - x0)
        val = f0 + t * (f1 - f0)
        # As NumPy, the last knot itself (and repeated knots) take fp's value there; its slope
        # is the last segment's, as JAX's (the first knot's is the first segment's, above)
        dx = xp[-1] - xp[-2]
        flat = primal(dx) == 0  # (a repeated last knot: no segment ends there)
        slope = (fp[-1] - fp[-2]) / np.where(flat, 1.0, dx)
        at_last = fp[-1] + (x - xp[-1]) * np.where(flat, 0.0, slope)
        val = np.where(xv == xpv[-1], at_last, val)
    lo = fp[0] if left is None else left
    hi = fp[-1] if right is None else right
    val = np.where(xv < xpv[0], lo + 0.0 * x, val)
    val = np.where(xv > xpv[-1], hi + 0.0 * x, val)
    return val


def _correlate(a: Any, v: Any, mode: Any = "valid") -> Any:
    # a convolution with v reversed and conjugated (np.convolve has a bilinear rule)
    a, v = as_array(a), as_array(v)
    if np.ndim(a) != 1 or np.ndim(v) != 1:
        raise ValueError("np.correlate: object too deep for desired array (1-d only)")
    n, m = np.shape(a)[0], np.shape(v)[0]
    if n == 0 or m == 0:
        raise ValueError("np.correlate: inputs cannot be empty")
    vc = np.conj(v[::-1]) if is_complex_value(v) else v[::-1]
    mode = {0: "valid", 1: "same", 2: "full"}.get(mode, mode)  # NumPy takes 0, 1, 2 too
    if mode == "same" and m > n:
        # NumPy swaps the operands and reverses the result: its window starts on the other side.
        start = n - 1 - (n - 1) // 2
        return np.convolve(a, vc, "full")[start : start + m]
    return np.convolve(a, vc, mode)


def _polyval(p: Any, x: Any) -> Any:
    x = as_array(x)
    p = as_array(p)
    y: Any = np.zeros(np.shape(x), dtype_of(x))  # NumPy's zeros_like(x): x's dtype, not float64
    for i in range(np.shape(p)[0]):
        y = y * x + p[i]
    return y


def _polyfit(
    x: Any,
    y: Any,
    deg: Any,
    rcond: Any = None,
    full: bool = False,
    w: Any = None,
    cov: Any = False,
) -> Any:
    if full or cov:
        raise TypeError(
            "np.polyfit(..., full=True or cov=True) on traced values: fusegrad differentiates "
            "the coefficients only; drop full= and cov="
        )
    deg = int(deg)
    if deg < 0:
        raise ValueError("np.polyfit: expected deg >= 0")
    x, y = as_array(x) + 0.0, as_array(y)
    if np.ndim(x) != 1 or np.ndim(y) not in (1, 2) or np.shape(y)[0] != np.shape(x)[0]:
        raise TypeError("np.polyfit: x must be 1-d and y 1-d or 2-d, with as many rows as x")
    if rcond is None:
        rcond = np.shape(x)[0] * np.finfo(np.result_type(x.dtype, float)).eps
    vander = x[:, None] ** np.arange(deg, -1, -1)  # NumPy's least-squares problem, as it scales it
    if w is not None:
        w = as_array(w)
        vander = vander * w[:, None]
        y = y * (w[:, None] if np.ndim(y) == 2 else w)
    scale = np.sqrt(np.sum(vander * vander, axis=0))
    coef = np.linalg.lstsq(vander / scale, y, rcond=rcond)[0]
    return coef / (scale[:, None] if np.ndim(y) == 2 else scale)


def _kron(a: Any, b: Any) -> Any:
    a, b = as_array(a), as_array(b)
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + tuple(np.shape(a))
    sb = (1,) * (nd - np.ndim(b)) + tuple(np.shape(b))
    a2 = np.reshape(a, tuple(v for s in sa for v in (s, 1)))
    b2 = np.reshape(b, tuple(v for s in sb for v in (1, s)))
    return np.reshape(a2 * b2, tuple(x * y for x, y in zip(sa, sb, strict=True)))


def _cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None) -> Any:
    a, b = as_array(a), as_array(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = np.moveaxis(a, axisa, -1)
    b = np.moveaxis(b, axisb, -1)
    da, db = np.shape(a)[-1], np.shape(b)[-1]
    if da not in (2, 3) or db not in (2, 3):
        raise ValueError("incompatible dimensions for cross product (dimension must be 2 or 3)")
    if da == 2 and db == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if da == 3 else 0.0 * a0
    b2 = b[..., 2] if db == 3 else 0.0 * b0
    c = np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return np.moveaxis(c, -1, axisc)


def _outer(a: Any, b: Any, out: Any = None) -> Any:
    if out is not None:
        raise TypeError("np.outer(..., out=...) writes in place: drop out= and use the result")
    return np.reshape(as_array(a), (-1, 1)) * np.reshape(as_array(b), (1, -1))


# --------------------------------------------------------------------------------------------------
# Elementwise helpers without ufuncs
# --------------------------------------------------------------------------------------------------


def _round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    if out is not None:
        raise TypeError("np.round(..., out=...) writes in place: drop out= and use the result")
    a = as_array(a)
    if is_complex_value(a):  # (its dtype: value(a) would compute a lazy a)
        return _round(np.real(a), decimals) + 1j * _round(np.imag(a), decimals)
    if decimals == 0:
        return np.rint(a)
    if decimals > 0:
        f = 10.0**decimals
        return np.rint(a * f) / f
    f = 10.0 ** (-decimals)
    return np.rint(a / f) * f


def _nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf=None, neginf=None) -> Any:
    x = as_array(x)
    if is_complex_value(x):
        re = _nan_to_num(np.real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = _nan_to_num(np.imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return re + 1j * im
    if not np.issubdtype(x.dtype, np.inexact):
        return x
    info = np.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    xv = primal(x)  # masks of the primal, lazily: no value read (jit replays it)
    inf = np.isinf(xv)
    out = np.where(np.isnan(xv), nan, x)
    out = np.where(inf & (xv > 0), hi, out)
    return np.where(inf & (xv < 0), lo, out)


def _real_if_close(a: Any, tol: float = 100) -> Any:
    av = np.asarray(value(a))
    if not np.iscomplexobj(av):
        return a
    t = tol * np.finfo(av.dtype).eps if tol > 1 else tol
    return np.real(a) if np.all(np.abs(av.imag) < t) else a


def _astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """``np.astype`` (NumPy 2's function form): the method's rule (a traced value is never
    written, so ``copy`` changes nothing)."""
    return x.astype(dtype)


def _einsum_path(subscripts: Any, *operands: Any, **kwargs: Any) -> Any:
    """A contraction order, which depends on the operands' shapes only: NumPy's, computed on
    zeros of their shapes and dtypes (it reads no value, so it has no derivative to carry)."""
    zeros = [np.zeros(np.shape(o), dtype_of(o)) for o in operands]
    return np.einsum_path(subscripts, *zeros, **kwargs)


def _unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * np.pi) -> Any:
    pv = np.asarray(value(p))
    # The unwrapping adds multiples of the period: piecewise constant, no derivative. NumPy's own
    # unwrap of the value, in NumPy's dtype (p's and the period's: float32 stays float32).
    return p + (np.unwrap(pv, discont=discont, axis=axis, period=period) - pv)


# Ufuncs with a constant derivative that elementwise.py's table does not list.
scalar_rule(np.radians, lambda x, y: float(np.pi / 180))
scalar_rule(np.degrees, lambda x, y: float(180 / np.pi))


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> Any:
    raise TypeError(
        "np.copyto writes a traced value into an array in place (np.full / np.full_like with a "
        "traced fill value do this), which fusegrad cannot differentiate. Build the array "
        "instead: np.broadcast_to(v, shape) or np.zeros(shape) + v"
    )


def _kw_positional() -> dict[Any, Callable]:
    return {
        np.moveaxis: positional(np.moveaxis, ("a", "source", "destination"), {}),
        np.swapaxes: positional(np.swapaxes, ("a", "axis1", "axis2"), {}),
        np.tile: positional(np.tile, ("A", "reps"), {}),
        np.repeat: positional(np.repeat, ("a", "repeats", "axis"), {"axis": None}),
        np.roll: positional(np.roll, ("a", "shift", "axis"), {"axis": None}),
        np.split: positional(np.split, ("ary", "indices_or_sections", "axis"), {"axis": 0}),
        np.array_split: positional(
            np.array_split, ("ary", "indices_or_sections", "axis"), {"axis": 0}
        ),
        np.expand_dims: positional(np.expand_dims, ("a", "axis"), {}),
        np.broadcast_to: positional(np.broadcast_to, ("array", "shape"), {}),
    }


# fmt: off
COMPOSITES: dict[Any, Callable] = {
    **_kw_positional(),
    np.pad:          _pad,
    np.flipud:       lambda m: np.flip(m, 0),
    np.fliplr:       lambda m: np.flip(m, 1) if np.ndim(m) >= 2 else _need_2d("fliplr"),
    np.rot90:        _rot90,
    np.rollaxis:     _rollaxis,
    np.atleast_1d:   _atleast(1),
    np.atleast_2d:   _atleast(2),
    np.atleast_3d:   _atleast(3),
    np.column_stack: _column_stack,
    np.append:       _append,
    np.diff:         _diff,
    np.einsum:       _einsum,
    np.hsplit:       _split_along(1, 1, "hsplit"),
    np.vsplit:       _split_along(0, 2, "vsplit"),
    np.dsplit:       _split_along(2, 3, "dsplit"),
    np.insert:       _insert,
    np.delete:       _delete,
    np.partition:    _partition,
    np.meshgrid:     _meshgrid,
    np.linspace:     _linspace,
    np.logspace:     _logspace,
    np.geomspace:    _geomspace,
    np.select:       _select,
    np.piecewise:    _piecewise,
    np.gradient:     _gradient,
    np.trapezoid:    _trapezoid,
    np.interp:       _interp,
    np.correlate:    _correlate,
    np.polyval:      _polyval,
    np.polyfit:      _polyfit,
    np.kron:         _kron,
    np.cross:        _cross,
    np.outer:        _outer,
    np.round:        _round,
    np.around:       _round,
    np.nan_to_num:   _nan_to_num,
    np.real_if_close: _real_if_close,
    np.unwrap:       _unwrap,
    np.astype:       _astype,
    np.einsum_path:  _einsum_path,
    np.copyto:       _copyto,
}
# fmt: on


def _need_2d(name: str) -> Any:
    raise ValueError(f"np.{name}: the input must be at least 2-d")


__all__ = ["COMPOSITES", "as_array", "dispatch", "positional", "value"]

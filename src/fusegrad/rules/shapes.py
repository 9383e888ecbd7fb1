"""Rules for shape and movement functions: reshape, transpose, concatenate, tile, pad, ...

Most of them are linear in the array and declared with ``linear(f, transpose)``: the forward
rule is ``ẏ = f(ẋ, ...)`` and the reverse rule maps the cotangent back through the *inverse*
movement (the transpose):

| NumPy function | pullback |
|---|---|
| ``np.reshape(a, shape)`` / ``np.ravel(a)`` | ``da = reshape(dy, a.shape)`` |
| ``np.transpose(a, axes)`` | ``da = transpose(dy, argsort(axes))`` |
| ``np.moveaxis(a, s, d)`` | ``da = moveaxis(dy, d, s)`` |
| ``np.swapaxes(a, i, j)`` | ``da = swapaxes(dy, i, j)`` |
| ``np.squeeze`` / ``np.expand_dims`` | ``da = reshape(dy, a.shape)`` |
| ``np.broadcast_to(a, shape)`` | ``da = unbroadcast_to(dy, a.shape)`` (a sum over broadcast axes) |
| ``np.flip(a, axis)`` | ``da = flip(dy, axis)`` |
| ``np.concatenate`` / ``hstack`` / ``vstack`` | split ``dy`` at the argument boundaries |
| ``np.stack(arrays, axis)`` | ``da_i = dy[(:,)*axis + (i,)]`` |
| ``np.split`` / ``np.array_split`` | ``da = concatenate(dys)`` (zero pieces become zeros) |
| ``np.tile(a, reps)`` | reshape ``dy`` to interleaved (rep, size) axes and sum the rep axes |
| ``np.repeat(a, r, axis)`` | scalar ``r``: reshape and sum; array ``r``: ``scatter_add`` |
| ``np.roll(a, shift, axis)`` | ``da = roll(dy, -shift, axis)`` |
| ``np.pad(a, w)`` (constant mode) | ``da = dy[w0:-w1, ...]`` (the un-pad) |
| ``np.triu`` / ``np.tril`` | ``da = triu(dy, k)`` / ``tril(dy, k)`` |

The movement rules (``reshape``, ``ravel``, ``transpose``, ``moveaxis``, ``swapaxes``, ``squeeze``,
``expand_dims``, ``broadcast_to``, ``flip``) are declared ``lazy=True``: they receive lazy
arrays, lazy tangents and lazy cotangents and keep them lazy — they call only NumPy movement
functions and read only ``.shape`` of their inputs. The others receive NumPy arrays (the engine
materialises first). ``concatenate``/``stack``/``split`` and ``pad`` have rules written by hand,
their forward rules below their reverse rules (``pad``'s forward rule also takes the modes
linear in the array: edge, reflect, symmetric, wrap).

Pullbacks use only differentiable ``np.*`` functions (no in-place updates), so higher-order AD can
trace through them. The helpers come from ``rules/common.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tangents import NoTangent, ZeroTangent, unthunk
from .common import (
    eager_frule,
    is_zero,
    linear,
    no_tangents,
    params,
    project,
    scatter_add,
    unbroadcast_to,
    zeros_for,
)
from .registry import register_rrule


def _norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


# --------------------------------------------------------------------------------------------------
# Lazy movement rules
# --------------------------------------------------------------------------------------------------


def _reshape_t(dy, a, *args, **kwargs):
    """reshape(ȳ, x.shape) (same ``order``)."""
    order = params(args, kwargs, shape=None, order="C", copy=None, newshape=None)["order"]
    return np.reshape(dy, np.shape(a), order=order)


def _ravel_t(dy, a, *args, **kwargs):
    """reshape(ȳ, x.shape) (same ``order``)."""
    return np.reshape(dy, np.shape(a), order=params(args, kwargs, order="C")["order"])


def _transpose_t(dy, a, *args, **kwargs):
    """transpose(ȳ, argsort(axes))."""
    axes = params(args, kwargs, axes=None)["axes"]
    ndim = len(np.shape(a))
    inverse = None
    if axes is not None:
        normal = [_norm_axis(int(x), ndim) for x in axes]  # a permutation: its inverse's sort
        inverse = tuple(sorted(range(len(normal)), key=normal.__getitem__))
    return np.transpose(dy, inverse)


def _moveaxis_t(dy, a, *args, **kwargs):
    """moveaxis(ȳ, destination, source)."""
    p = params(args, kwargs, source=None, destination=None)
    return np.moveaxis(dy, p["destination"], p["source"])


def _swapaxes_t(dy, a, *args, **kwargs):
    """swapaxes(ȳ, axis1, axis2)."""
    p = params(args, kwargs, axis1=None, axis2=None)
    return np.swapaxes(dy, p["axis1"], p["axis2"])


def _reshape_back(dy, a, *args, **kwargs):
    """reshape(ȳ, x.shape)."""
    return np.reshape(dy, np.shape(a))


def _broadcast_to_t(dy, array, *args, **kwargs):
    """unbroadcast_to(ȳ, x.shape): the sum over the broadcast axes."""
    return unbroadcast_to(dy, np.shape(array))


def _flip_t(dy, m, *args, **kwargs):
    """flip(ȳ, axis)."""
    return np.flip(dy, params(args, kwargs, axis=None)["axis"])


# fmt: off
linear(np.reshape,      _reshape_t,      lazy=True)
linear(np.ravel,        _ravel_t,        lazy=True)
linear(np.transpose,    _transpose_t,    lazy=True)
linear(np.moveaxis,     _moveaxis_t,     lazy=True)
linear(np.swapaxes,     _swapaxes_t,     lazy=True)
linear(np.squeeze,      _reshape_back,   lazy=True)
linear(np.expand_dims,  _reshape_back,   lazy=True)
linear(np.broadcast_to, _broadcast_to_t, lazy=True)
linear(np.flip,         _flip_t,         lazy=True)
# fmt: on


# --------------------------------------------------------------------------------------------------
# Joining and splitting (eager: they receive NumPy arrays)
# --------------------------------------------------------------------------------------------------


def _seq_ct(seq, cts):
    """The cotangent of a sequence argument: a list (one entry per array) when it was a list or
    tuple; an array when the sequence was itself an array (``np.vstack(x)`` iterates over ``x``)."""
    if isinstance(seq, list | tuple):
        return cts
    return project(np.stack([zeros_for(row) if is_zero(c) else c for c, row in zip(cts, seq)]), seq)


def _split_back(dy, arrays, axis):
    """Cotangents of ``concatenate(arrays, axis)``: ``dy`` split at the boundaries, reshaped and
    cast to each argument."""
    if axis is None:
        sizes = [int(np.size(x)) for x in arrays]
        dy = np.reshape(dy, (-1,))
        axis = 0
    else:
        axis = _norm_axis(axis, dy.ndim)
        sizes = [int(np.shape(x)[axis]) for x in arrays]
    # slices, not np.split (~3x the cost on an RNN step's small arrays): the same views
    index, start, cts = [slice(None)] * np.ndim(dy), 0, []
    for n, x in zip(sizes, arrays, strict=True):
        index[axis] = slice(start, start + n)
        cts.append(project(dy[tuple(index)], x))
        start += n
    return cts


@register_rrule(np.concatenate)
def _concatenate(arrays, *args, **kwargs):
    """np.concatenate: da_i = the slice of dy at a_i's position along ``axis`` (axis=None: of the
    flattened dy). The cotangent of the sequence argument is a list, one entry per array."""
    axis = params(args, kwargs, axis=0, out=None, dtype=None, casting="same_kind")["axis"]
    seq, arrays = arrays, list(arrays)

    def pullback(dy):
        return (_seq_ct(seq, _split_back(dy, arrays, axis)), *no_tangents(len(args)))

    return np.concatenate(arrays, *args, **kwargs), pullback


@register_rrule(np.hstack)
def _hstack(tup, *args, **kwargs):
    """np.hstack: concatenate along axis 1 (axis 0 for 1-d inputs); dy split back likewise."""
    arrays = list(tup)
    promoted = [np.atleast_1d(x) for x in arrays]
    axis = 0 if promoted and promoted[0].ndim == 1 else 1

    def pullback(dy):
        pieces = _split_back(dy, promoted, axis)
        cts = [project(p, x) for p, x in zip(pieces, arrays, strict=False)]
        return (_seq_ct(tup, cts), *no_tangents(len(args)))

    return np.hstack(arrays, *args, **kwargs), pullback


@register_rrule(np.vstack)
def _vstack(tup, *args, **kwargs):
    """np.vstack: concatenate the ``atleast_2d`` arrays along axis 0; dy split back likewise."""
    arrays = list(tup)
    promoted = [np.atleast_2d(x) for x in arrays]

    def pullback(dy):
        pieces = _split_back(dy, promoted, 0)
        cts = [project(p, x) for p, x in zip(pieces, arrays, strict=False)]
        return (_seq_ct(tup, cts), *no_tangents(len(args)))

    return np.vstack(arrays, *args, **kwargs), pullback


@register_rrule(np.stack)
def _stack(arrays, *args, **kwargs):
    """np.stack: da_i = dy[(:,)*axis + (i,)]."""
    axis = params(args, kwargs, axis=0, out=None, dtype=None, casting="same_kind")["axis"]
    seq, arrays = arrays, list(arrays)
    y = np.stack(arrays, *args, **kwargs)
    ax = _norm_axis(axis, y.ndim)

    def pullback(dy):
        pre = (slice(None),) * ax
        cts = [project(dy[pre + (i,)], x) for i, x in enumerate(arrays)]
        return (_seq_ct(seq, cts), *no_tangents(len(args)))

    return y, pullback


def _split_rule(fn):
    def rule(ary, *args, **kwargs):
        p = params(args, kwargs, indices_or_sections=None, axis=0)
        axis = p["axis"]
        ys = fn(ary, p["indices_or_sections"], axis)

        def pullback(dys):
            dys = [unthunk(d) for d in dys]
            if all(is_zero(d) for d in dys):
                return (ZeroTangent(), *no_tangents(len(args)))
            parts = [zeros_for(y) if is_zero(d) else d for d, y in zip(dys, ys, strict=False)]
            da = project(np.concatenate(parts, axis=axis), ary)
            return (da, *no_tangents(len(args)))

        return ys, pullback

    rule.__doc__ = (
        f"np.{fn.__name__}: da = concatenate(dys, axis); ZeroTangent pieces become zeros."
    )
    return rule


register_rrule(np.split)(_split_rule(np.split))
register_rrule(np.array_split)(_split_rule(np.array_split))


def _sequence_jvp(fn):
    def rule(tangents, arrays, *args, **kwargs):
        arrays = list(arrays)
        y = fn(arrays, *args, **kwargs)
        ts = tangents[0]
        if is_zero(ts):
            return y, ZeroTangent()
        parts = [
            zeros_for(a) if is_zero(t) else unthunk(t) for t, a in zip(ts, arrays, strict=True)
        ]
        return y, fn(parts, *args, **kwargs)

    rule.__doc__ = f"np.{fn.__name__}: ẏ = {fn.__name__}([ẋ₁, ẋ₂, ...]) (zeros for constants)."
    return rule


def _split_jvp(fn):
    def rule(tangents, ary, indices_or_sections, *args, **kwargs):
        ys = fn(ary, indices_or_sections, *args, **kwargs)
        t = tangents[0]
        if is_zero(t):
            return ys, ZeroTangent()
        return ys, list(fn(unthunk(t), indices_or_sections, *args, **kwargs))

    rule.__doc__ = f"np.{fn.__name__}: ẏᵢ = {fn.__name__}(ẋ)ᵢ."
    return rule


for _join in (np.concatenate, np.hstack, np.vstack, np.stack):
    eager_frule(_join)(_sequence_jvp(_join))
for _split in (np.split, np.array_split):
    eager_frule(_split)(_split_jvp(_split))


# --------------------------------------------------------------------------------------------------
# Replication and rearrangement
# --------------------------------------------------------------------------------------------------


def _tile_t(dy, A, *args, **kwargs):
    """ȳ reshaped to interleaved (rep_i, n_i) axes, summed over the rep axes."""
    reps = params(args, kwargs, reps=None)["reps"]
    shape = np.shape(A)
    reps_t = (int(reps),) if np.ndim(reps) == 0 else tuple(int(r) for r in reps)
    d = max(len(shape), len(reps_t))
    s = (1,) * (d - len(shape)) + tuple(shape)
    r = (1,) * (d - len(reps_t)) + reps_t
    inter = tuple(v for pair in zip(r, s, strict=False) for v in pair)
    g = np.sum(np.reshape(dy, inter), axis=tuple(range(0, 2 * d, 2)))
    return project(np.reshape(g, shape), A)


def _repeat_t(dy, a, *args, **kwargs):
    """scalar repeats r: sum(reshape(ȳ, (..., n, r, ...)), r-axis); array repeats:
    scatter_add(ȳ, index=repeat(arange(n), repeats)) along ``axis``."""
    p = params(args, kwargs, repeats=None, axis=None)
    repeats, axis = p["repeats"], p["axis"]
    shape = np.shape(a)
    if axis is None:
        flat_shape = (int(np.prod(shape, dtype=np.int64)),)
        ax = 0
    else:
        flat_shape = shape
        ax = _norm_axis(axis, len(shape))
    n = flat_shape[ax]
    if np.ndim(repeats) == 0 or np.size(repeats) == 1:
        r = int(np.reshape(repeats, ()))
        g = np.reshape(dy, flat_shape[:ax] + (n, r) + flat_shape[ax + 1 :])
        g = np.sum(g, axis=ax + 1)
    else:
        idx = np.repeat(np.arange(n), repeats)
        g = scatter_add(dy, (slice(None),) * ax + (idx,), flat_shape)
    return project(np.reshape(g, shape), a)


def _roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """``np.roll(a, shift, axis)``; for a NumPy array rolled by an int along one axis, two
    slices concatenated (np.roll's own Python, ~5 µs a call, cost more than its copy on a
    24x24 array).

    >>> _roll(np.arange(6).reshape(2, 3), -1, 1).tolist()
    [[1, 2, 0], [4, 5, 3]]
    """
    if (
        type(a) is np.ndarray
        and type(shift) is int
        and type(axis) is int
        and -a.ndim <= axis < a.ndim
    ):
        ax = axis % a.ndim
        n = a.shape[ax]
        k = shift % n if n else 0
        if k:
            head = (slice(None),) * ax
            return np.concatenate(
                (a[head + (slice(n - k, None),)], a[head + (slice(None, n - k),)]), axis=ax
            )
        return a.copy()
    return np.roll(a, shift, axis)


def _roll_t(dy, a, *args, **kwargs):
    """roll(ȳ, -shift, axis)."""
    p = params(args, kwargs, shift=None, axis=None)
    shift = p["shift"]
    neg = -shift if np.ndim(shift) == 0 else tuple(-int(s) for s in shift)
    return _roll(dy, neg, p["axis"])


def _tri_t(fn):
    def transpose(dy, m, *args, **kwargs):
        k = params(args, kwargs, k=0)["k"]
        return project(unbroadcast_to(fn(dy, k), np.shape(m)), m)

    transpose.__doc__ = f"{fn.__name__}(ȳ, k)."
    return transpose


# fmt: off
linear(np.tile,   _tile_t)
linear(np.repeat, _repeat_t)
linear(np.roll,   _roll_t, impl=_roll)
linear(np.triu,   _tri_t(np.triu))
linear(np.tril,   _tri_t(np.tril))
# fmt: on


@register_rrule(np.pad)
def _pad(array, pad_width, *args, **kwargs):
    """np.pad, mode='constant' only: da = dy[before:before + n, ...] (the un-pad). Other modes
    have no rule (returns None)."""
    mode = params(args, kwargs, mode="constant")["mode"]
    if mode != "constant":
        return None
    shape = np.shape(array)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(shape), 2))
    index = tuple(slice(int(b), int(b) + n) for (b, _), n in zip(widths, shape, strict=False))

    def pullback(dy):
        return (project(dy[index], array), NoTangent(), *no_tangents(len(args)))

    return np.pad(array, pad_width, *args, **kwargs), pullback


@eager_frule(np.pad)
def _pad_jvp(tangents, array, pad_width, *args, **kwargs):
    """np.pad: modes that are linear in the array pad ẋ the same way; 'constant' pads ẋ with 0."""
    mode = params(args, kwargs, mode="constant")["mode"]
    y = np.pad(array, pad_width, *args, **kwargs)
    t = tangents[0]
    if is_zero(t):
        return y, ZeroTangent()
    if mode == "constant":
        return y, np.pad(t, pad_width, mode="constant")
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        return y, np.pad(t, pad_width, *args, **kwargs)
    return None

"""Reduction rules: ``sum``, ``mean``, ``prod``, ``max``, ``min``, ``var``, ``std``, reverse and
forward (the forward rules, lazy too, at the end: ``sum``/``mean`` by ``linear``, ``ẏ`` of
``max``/``min`` ``sum(ẋ · mask / count)``, of ``prod`` ``sum(ẋ · ∏_{j≠i} x_j)``, of ``var``
``2 sum((x - mean) ẋ) / (n - ddof)``).

Every pullback is lazy: the cotangent of a reduction is ``ȳ`` broadcast back over the reduced
axes (a stride-0 view inside a ``BroadcastThunk``), so it fuses into the next consumer and the
gradient of ``sum(f(x))`` never allocates more than the gradient itself.

- ``sum``: ``x̄ = broadcast(ȳ)``; ``mean``: ``broadcast(ȳ) / n``.
- ``max``/``min``: ``ȳ`` shared evenly between the elements that attain the extremum.
- ``prod``: ``ȳ · y / x`` when ``x`` has no zero; otherwise the product of all other elements,
  computed exactly with exclusive cumulative products.
- ``var``: ``ȳ · 2 (x - mean) / (n - ddof)``; ``std``: ``ȳ · (x - mean) / ((n - ddof) · y)``
  (``conj(x - mean)`` for complex ``x``: JAX's convention, the transpose without a conjugate).

Example::

    >>> from fusegrad.rules import rrule
    >>> y, pb = rrule(np.sum, np.ones((2, 3)), axis=1)
    >>> np.asarray(pb(np.ones(2))[0]).shape
    (2, 3)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..lazy import LazyArray, engines, small
from ..lazy.plan import value
from ..lazy.reductions import normalize_axes
from ..tangents import NoTangent, ZeroTangent
from .common import (
    is_complex,
    is_zero,
    lazy_frule,
    lazy_tangent,
    linear,
    params,
    real_for,
    shape_of,
)
from .lazy_values import as_cotangent as _wrap
from .lazy_values import as_lazy, expand_back, operand
from .registry import register_rrule

# Read as module globals: numpy's module __getattr__ keeps CPython 3.11 from specialising
# `np.name` lookups (about 300 instructions each), and these run in every small sum.
_NDARRAY = np.ndarray
_empty = np.empty
_add_reduce: Callable[..., Any] = np.add.reduce


def _lazy(x: Any) -> Any:
    """The argument as a reduction computes on it: its value when it is small and concrete (the
    small-array path: NumPy now, an eager pullback), else lazy."""
    v = small.value_if_small(x)
    return v if v is not None else as_lazy(x, scalars=True)


def _operand(dy: Any) -> Any:
    return operand(dy, scalars=True)


def _pad_positional(rule: Callable) -> Callable:
    """Options passed positionally (``np.sum(x, -1)``) get ``NoTangent()`` cotangents."""

    def padded(a: Any, *args: Any, **kwargs: Any) -> Any:
        for k in ("where", "out", "initial"):
            if kwargs.get(k) is not None:
                raise TypeError(
                    f"{k}= in a reduction of a traced value is not supported by fusegrad: "
                    "write np.sum(np.where(mask, x, 0)) for where=, drop out=, and add "
                    "initial= to the result"
                )
            kwargs.pop(k, None)
        y, pullback = rule(a, *args, **kwargs)
        if not args:
            return y, pullback
        return y, lambda dy: pullback(dy) + (NoTangent(),) * len(args)

    padded.__doc__ = rule.__doc__
    return padded


def _count(shape: tuple, axes: tuple) -> int:
    return math.prod([shape[a] for a in axes])


def _held(x: Any) -> bool:
    """Whether ``x`` (a reduction's argument) is in memory: an array, or a lazy value computed
    already or standing for an array."""
    return value(x) is not None


def _ndim(x: Any) -> int:
    return np.ndim(x) if not isinstance(x, LazyArray) else x.ndim


@register_rrule(np.sum, lazy=True)
@_pad_positional
def _sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``x̄ = broadcast(ȳ)``."""
    shape = a.shape if type(a) is _NDARRAY else tuple(np.shape(a))
    axes = normalize_axes(axis, len(shape))
    v = _lazy(a)
    if type(v) is _NDARRAY:  # what np.sum runs on an ndarray, without its Python wrappers
        y = _add_reduce(v, axis, dtype, None, keepdims)
    else:
        y = np.sum(v, axis=axis, dtype=dtype, keepdims=keepdims)

    held = _held(v)

    def pullback(dy: Any) -> tuple:
        return (_wrap(expand_back(dy, shape, axes, keepdims, held)),)

    return y, pullback


@register_rrule(np.mean, lazy=True)
@_pad_positional
def _mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``x̄ = broadcast(ȳ) / n``."""
    shape = tuple(np.shape(a))
    axes = normalize_axes(axis, len(shape))
    n = _count(shape, axes)
    v = _lazy(a)
    y = np.mean(v, axis=axis, dtype=dtype, keepdims=keepdims)
    held = _held(v)

    def pullback(dy: Any) -> tuple:
        return (_wrap(expand_back(dy, shape, axes, keepdims, held) / n),)

    return y, pullback


# Relative distance from a max or min within which an element recomputed by the backward pass
# counts as one of its ties, under the auto engine (see _at_extremum)
EXTREMUM_TIES_EPS = 4


def _at_extremum(la: Any, yk: Any, held: bool, axes: tuple) -> Any:
    """Where ``la`` reaches its max or min ``yk`` over ``axes``. An expression not in memory is
    computed again by the backward pass; under ``auto`` the kernel doing so may run on another
    engine than the one that found ``yk`` (a kernel with ``cosh`` goes to NumPy, one with
    ``tanh`` alone to numba), whose ``tanh`` may differ by an ulp: then no element equals
    ``yk``, its count is 0, and the gradient was 0/0 (NaN, on most of a 700×600 pairwise min).
    There, elements within ``EXTREMUM_TIES_EPS`` ulps of the largest magnitude along ``axes``
    count as reaching it (a difference of rounding, not of value; one more pass over ``la``)."""
    dtype = np.dtype(getattr(la, "dtype", np.float64))
    if held or dtype.kind != "f" or engines.current() != "auto":
        return np.equal(la, yk)
    finite = np.where(np.isfinite(la), np.abs(la), 0.0)  # (nanmax's -inf fill: no scale)
    scale = np.max(finite, axis=axes, keepdims=True)
    near = np.abs(la - yk) <= (EXTREMUM_TIES_EPS * np.finfo(dtype).eps) * scale
    return np.equal(la, yk) | near


def _extremum(fn: Callable) -> Callable:
    def rule(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """Ties share ``ȳ`` evenly."""
        shape = tuple(np.shape(a))
        axes = normalize_axes(axis, len(shape))
        la = _lazy(a)
        y = fn(la, axis=axis, keepdims=keepdims)
        held = _held(la)

        def pullback(dy: Any) -> tuple:
            yk = y if keepdims or not axes else np.expand_dims(y, axes)
            mask = _at_extremum(la, yk, held, axes)
            count = np.sum(mask, axis=axes, keepdims=True)
            return (_wrap(expand_back(dy, shape, axes, keepdims, held) * mask / count),)

        return y, pullback

    return rule


register_rrule(np.max, lazy=True)(_pad_positional(_extremum(np.max)))
register_rrule(np.min, lazy=True)(_pad_positional(_extremum(np.min)))
register_rrule(np.amax, lazy=True)(_pad_positional(_extremum(np.max)))
register_rrule(np.amin, lazy=True)(_pad_positional(_extremum(np.min)))


@register_rrule(np.prod, lazy=True)
@_pad_positional
def _prod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``x̄ = ȳ · ∏_{j≠i} x_j``, exact even where ``x`` has zeros."""
    shape = tuple(np.shape(a))
    axes = normalize_axes(axis, len(shape))
    la = _lazy(a)
    y = np.prod(la, axis=axis, dtype=dtype, keepdims=keepdims)
    held = _held(la)

    def pullback(dy: Any) -> tuple:
        d = expand_back(dy, shape, axes, keepdims, held)
        return (_wrap(d * _prod_of_others(la, axes)),)

    return y, pullback


def _prod_of_others(x: Any, axes: tuple) -> Any:
    """``∏_{j≠i} x_j`` over ``axes`` for every ``i``, without looking at the values (lazy, and
    replayable by ``jit``): with ``p`` the product of the nonzero ``x_j`` and ``z`` their count
    of zeros, ``p / x_i`` where there is no zero, ``p`` at a lone zero, 0 elsewhere.

    >>> _prod_of_others(np.array([2.0, 0.0, 3.0]), (0,)).tolist()
    [0.0, 6.0, 0.0]
    """
    if not isinstance(x, LazyArray | np.ndarray | np.generic | float | int | complex):
        return _exclusive_products(x, axes)  # differentiated again: see there
    x = cast(Any, x)  # (any of those: the checker narrowed it to the union)
    zero = np.equal(x, 0)
    zeros = np.sum(zero, axis=axes, keepdims=True)
    p = np.prod(np.where(zero, 1, x), axis=axes, keepdims=True)
    return np.where(zeros == 0, p / np.where(zero, 1, x), np.where(zero & (zeros == 1), p, 0))


def _exclusive_products(x: Any, axes: tuple) -> Any:
    """``∏_{j≠i} x_j`` as (product of those before i) × (product of those after i), by
    exclusive cumulative products: no division, so its own derivative is exact where ``x`` has
    zeros (the branches of ``_prod_of_others`` are constants there: a Hessian of ``np.prod`` at
    a zero lost its row). For a value traced by an outer differentiation.

    >>> _exclusive_products(np.array([2.0, 0.0, 3.0]), (0,)).tolist()
    [0.0, 6.0, 0.0]
    """
    k = len(axes)
    moved = np.moveaxis(x, axes, tuple(range(-k, 0)))
    lead = tuple(np.shape(moved)[: np.ndim(moved) - k])
    flat = np.reshape(moved, (*lead, -1))
    one = np.ones((*lead, 1), dtype=np.result_type(flat))
    before = np.cumprod(np.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.flip(np.concatenate([flat[..., 1:], one], axis=-1), -1), -1), -1)
    return np.moveaxis(np.reshape(before * after, np.shape(moved)), tuple(range(-k, 0)), axes)


def moment(fn: Callable, la: Any, **kwargs: Any) -> Any:
    """``np.var``/``np.std`` of ``la``; of a complex lazy value as ``var(re) + var(im)`` (the
    mean of ``|x - mean|²``, NumPy's definition: the lazy ``var`` squares complex deviations)."""
    dtype = getattr(la, "dtype", None)
    if not isinstance(la, LazyArray) or np.dtype(dtype).kind != "c":
        return fn(la, **kwargs)
    kwargs.pop("dtype", None)
    lz: Any = la  # np.real/np.imag of a lazy value are its ops real and imag
    v = np.var(np.real(lz), **kwargs) + np.var(np.imag(lz), **kwargs)
    return v if fn is np.var else np.sqrt(v)


def _moments(a: Any, axis: Any, ddof: int) -> tuple:
    """The centred values, conjugated for a complex ``a``: ``var`` is real, ``ẏ = Re(Σ 2
    conj(x - mean) ẋ) / (n - ddof)``, so its cotangent is ``ȳ · 2 conj(x - mean) / (n - ddof)``."""
    shape = tuple(np.shape(a))
    axes = normalize_axes(axis, len(shape))
    la = _lazy(a)
    centered = la - np.mean(la, axis=axes, keepdims=True)
    dtype = getattr(la, "dtype", None)
    if np.dtype(dtype if dtype is not None else np.result_type(la)).kind == "c":
        centered = np.conjugate(centered)
    # NumPy's divisor, max(n - ddof, 0), as a NumPy float: 0 gives inf/nan as NumPy's (a Python
    # 0 raised ZeroDivisionError)
    return shape, axes, la, centered, np.float64(max(_count(shape, axes) - ddof, 0))


@register_rrule(np.var, lazy=True)
@_pad_positional
def _var(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """``x̄ = ȳ · 2 (x - mean) / (n - ddof)``."""
    shape, axes, la, centered, n = _moments(a, axis, ddof)
    y = moment(np.var, la, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    held = _held(la)

    def pullback(dy: Any) -> tuple:
        return (_wrap(expand_back(dy, shape, axes, keepdims, held) * centered * (2.0 / n)),)

    return y, pullback


@register_rrule(np.std, lazy=True)
@_pad_positional
def _std(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """``x̄ = ȳ · (x - mean) / ((n - ddof) · y)``."""
    shape, axes, la, centered, n = _moments(a, axis, ddof)
    y = moment(np.std, la, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    held = _held(la)

    def pullback(dy: Any) -> tuple:
        if _count(shape, axes) == 1:  # one value a slice: std is 0 whatever it is (0/0 was nan)
            return (_wrap(expand_back(dy, shape, axes, keepdims, held) * 0.0 * centered),)
        yk = y if keepdims or not axes else np.expand_dims(y, axes)
        return (_wrap(expand_back(dy, shape, axes, keepdims, held) * centered / (n * yk)),)

    return y, pullback


# --------------------------------------------------------------------------------------------------
# Forward rules (lazy: the tangent of a reduction is reduced in the primal's kernel)
# --------------------------------------------------------------------------------------------------

linear(np.sum, lazy=True)
linear(np.mean, lazy=True)


def _reduce_params(args: tuple, kwargs: dict, fn: Any) -> dict:
    if fn in (np.var, np.std):
        return params(args, kwargs, axis=None, dtype=None, out=None, ddof=0, keepdims=False)
    if fn in (np.max, np.min, np.amax, np.amin):
        return params(args, kwargs, axis=None, out=None, keepdims=False)
    return params(args, kwargs, axis=None, dtype=None, out=None, keepdims=False)


def _keep(v: Any, axes: tuple, keepdims: bool) -> Any:
    return v if keepdims or not axes else np.expand_dims(v, axes)


def _extremum_jvp(fn: Callable) -> Callable:
    def rule(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        p = _reduce_params(args, kwargs, fn)
        la = as_lazy(a)
        axes = normalize_axes(p["axis"], len(shape_of(a)))
        y = fn(la, *args, **kwargs)
        t = tangents[0]
        if is_zero(t):
            return y, ZeroTangent()
        mask = np.equal(la, _keep(y, axes, p["keepdims"]))
        count = np.sum(mask, axis=axes, keepdims=True)
        dot = np.sum(lazy_tangent(t) * mask / count, axis=axes, keepdims=p["keepdims"])
        return y, dot

    rule.__doc__ = f"np.{fn.__name__}: ẏ = sum(ẋ · mask / count) (ties share evenly)."
    return rule


for _extreme in (np.max, np.min, np.amax, np.amin):
    lazy_frule(_extreme)(_extremum_jvp(_extreme))


@lazy_frule(np.prod)
def _prod_jvp(tangents, a, *args, **kwargs):
    """np.prod: ẏ = sum(ẋ · ∏_{j≠i} x_j) (``_prod_of_others``: exact where x has zeros)."""
    p = _reduce_params(args, kwargs, np.prod)
    la = as_lazy(a)
    axes = normalize_axes(p["axis"], len(shape_of(a)))
    y = np.prod(la, *args, **kwargs)
    t = tangents[0]
    if is_zero(t):
        return y, ZeroTangent()
    others = _prod_of_others(la, axes)
    return y, np.sum(lazy_tangent(t) * others, axis=axes, keepdims=p["keepdims"])


def _moment_kwargs(p: dict) -> dict:
    return {k: p[k] for k in ("axis", "dtype", "ddof", "keepdims") if p[k] is not None}


def _moment_jvp(fn: Callable) -> Callable:
    def rule(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        p = _reduce_params(args, kwargs, fn)
        la = as_lazy(a)
        shape = shape_of(a)
        axes = normalize_axes(p["axis"], len(shape))
        n = np.float64(max(int(np.prod([shape[i] for i in axes])) - p["ddof"], 0))  # NumPy's
        y = moment(fn, la, **_moment_kwargs(p))
        t = tangents[0]
        if is_zero(t):
            return y, ZeroTangent()
        centered = la - np.mean(la, axis=axes, keepdims=True)
        if is_complex(la):  # real output: ẏ = Re(2 Σ conj(x - mean) ẋ) / (n - ddof)
            centered = np.conjugate(centered)
        dvar = np.sum(centered * lazy_tangent(t), axis=axes, keepdims=p["keepdims"]) * (2.0 / n)
        dvar = real_for(dvar, y)
        if fn is np.std and _count(shape, axes) == 1:  # constant 0 (its 0/0 was nan)
            return y, dvar * 0.0
        return y, (dvar if fn is np.var else dvar / (2 * y))

    rule.__doc__ = f"np.{fn.__name__}: ẏ = 2 sum((x - mean) ẋ) / (n - ddof) (/ 2y for std)."
    return rule


for _moment in (np.var, np.std):
    lazy_frule(_moment)(_moment_jvp(_moment))

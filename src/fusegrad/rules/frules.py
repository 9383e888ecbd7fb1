"""Forward rules (``frule``) for every family that has a reverse rule, in one table file.

A forward rule is ``rule(tangents, *args, **kwargs) -> (y, ẏ)`` with one tangent per positional
argument (``ZeroTangent()``/``NoTangent()`` where there is none; a list for a sequence argument).
Rules marked ``lazy`` receive lazy arrays and keep their tangents lazy, so that the tangent of
elementwise work is a lazy expression over the primal's own nodes and one fused kernel computes
both; the others receive NumPy arrays (the AD engine materialises primals and tangents together).

| family | ẏ |
|---|---|
| elementwise (``scalar_rule``'s ``PARTIALS``) | ``Σᵢ ∂y/∂xᵢ · ẋᵢ``, lazy, broadcast to y's shape |
| ``where``, ``astype`` | ``where(c, ẋ, ẏ)``, ``ẋ.astype(dtype)`` |
| linear (``sum``, ``mean``, movement, ``concatenate``, gathers, ``cumsum``, ...) | ``f(ẋ, ...)`` |
| ``max``/``min`` | ``sum(ẋ · mask / count)`` (ties share evenly, as the reverse rule) |
| ``prod`` | ``sum(ẋ · ∏_{j≠i} x_j)`` |
| ``var``/``std`` | ``2 sum((x - mean) ẋ) / (n - ddof)``; ``/ (2 y)`` for std |
| bilinear (``matmul``, ``dot``, ``tensordot``, ``einsum``, ...) | ``f(ȧ, b) + f(a, ḃ)`` |
| ``solve``, ``inv``, ``det``, ``slogdet`` | ``A⁻¹(ḃ - Ȧx)``, ``-Y Ȧ Y``, ``det · tr(A⁻¹Ȧ)`` |
| ``cholesky`` | ``L Φ(L⁻¹ sym(Ȧ) L⁻ᴴ)``, Φ = lower triangle, diagonal halved |
| ``eigh`` | ``ẇ = Re diag(Vᴴ sym(Ȧ) V)``, ``V̇ = V (F ∘ Vᴴ sym(Ȧ) V)``, ``F_ij = 1/(w_j-w_i)`` |
| ``cumprod``, ``sort``, ``logsumexp``, ``norm`` | see each rule |

Symmetric-input functions use ``sym(Ȧ) = (Ȧ + Ȧᴴ)/2`` (``Ȧᴴ = Ȧᵀ`` for real values), matching
their reverse rules (which return symmetric cotangents). Real functions of complex inputs give
``ẏ = Re(...)``: JAX's convention, whose reverse rules are these rules' transposes for the pairing
``Re(Σ u·v)``. Rules are written with ``np.*`` calls, so they can be traced by an outer
(reverse or forward) trace: ``grad`` of ``jvp`` and ``jvp`` of ``jvp`` work.

Example::

    >>> y, dy = frule((np.ones(2),), np.sin, np.zeros(2))
    >>> np.asarray(dy)
    array([1., 1.])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lazy import LazyArray, materialize_many
from ..lazy.reductions import normalize_axes
from ..tangents import ZeroTangent, unthunk
from . import reductions as _reductions
from . import scans as _scans
from .common import add_forward as _plus
from .common import call as _call
from .common import is_basic_index, materialize, params, scatter_add, zeros_for
from .common import is_complex as _complex
from .common import lazy_tangent as _tan
from .common import real_for as _real_for
from .common import shape_of as _shape
from .common import tangent_is_zero as _zero
from .lazy_values import as_lazy as _lazy
from .reductions import _prod_of_others
from .registry import FRULES, RRULES, frule, register_frule, rrule

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _register(f: Any, rule: Callable, lazy: bool) -> Callable:
    rule.lazy = lazy
    register_frule(f)(rule)
    return rule


def lazy_frule(f: Any) -> Callable[[Callable], Callable]:
    """Register a forward rule that takes (and keeps) lazy arrays."""
    return lambda rule: _register(f, rule, True)


def eager_frule(f: Any) -> Callable[[Callable], Callable]:
    """Register a forward rule that receives NumPy arrays (lazy inputs are materialised)."""
    return lambda rule: _register(f, rule, False)


# --------------------------------------------------------------------------------------------------
# Linear functions: ẏ = f(ẋ, ...) for the first (differentiable) argument
# --------------------------------------------------------------------------------------------------


def _linear(fn: Callable, lazy: bool, **zero_kwargs: Any) -> Callable:
    """``ẏ = fn(ẋ, *args, **kwargs)``; ``zero_kwargs`` are constants replaced by zeros in ẏ
    (``np.diff``'s ``prepend``, for example)."""

    def rule(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        y = fn(_lazy(a) if lazy else a, *args, **kwargs)
        t = tangents[0]
        if _zero(t):
            return y, ZeroTangent()
        kw = dict(kwargs)
        for k, make in zero_kwargs.items():
            if k in kw:
                kw[k] = make(kw[k])
        return y, fn(_tan(t) if lazy else unthunk(t), *args, **kw)

    rule.__doc__ = f"np.{getattr(fn, '__name__', fn)}: ẏ = {getattr(fn, '__name__', fn)}(ẋ, ...)."
    return rule


def _zeros_of(v: Any) -> Any:
    return np.zeros(np.shape(v))


for _f in (
    np.sum,
    np.mean,
    np.reshape,
    np.ravel,
    np.transpose,
    np.moveaxis,
    np.swapaxes,
    np.squeeze,
    np.expand_dims,
    np.broadcast_to,
    np.flip,
):
    _register(_f, _linear(_f, lazy=True), True)

for _f in (
    np.tile,
    np.repeat,
    np.roll,
    np.triu,
    np.tril,
    np.take,
    np.take_along_axis,
    np.diagonal,
    np.diag,
    np.cumsum,
    np.trace,
    scatter_add,
):
    _register(_f, _linear(_f, lazy=False), False)

_register(
    np.diff,
    _linear(np.diff, lazy=False, prepend=_zeros_of, append=_zeros_of),
    False,
)


@eager_frule(np.pad)
def _pad(tangents, array, pad_width, *args, **kwargs):
    """np.pad: modes that are linear in the array pad ẋ the same way; 'constant' pads ẋ with 0."""
    mode = params(args, kwargs, mode="constant")["mode"]
    y = np.pad(array, pad_width, *args, **kwargs)
    t = tangents[0]
    if _zero(t):
        return y, ZeroTangent()
    if mode == "constant":
        return y, np.pad(t, pad_width, mode="constant")
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        return y, np.pad(t, pad_width, *args, **kwargs)
    return None


@lazy_frule(operator.getitem)
def _getitem(tangents, x, index):
    """x[index]: ẏ = ẋ[index] (lazy for basic indexes; advanced ones materialise both)."""
    t = tangents[0]
    if not is_basic_index(index):
        x, t = _materialize_pair(x, t)
        index = tuple(np.asarray(i) if isinstance(i, list) else i for i in _as_tuple(index))
    y = _lazy(x)[index]
    if _zero(t):
        return y, ZeroTangent()
    t = _tan(t)
    if np.ndim(t) == 0 and not hasattr(t, "__getitem__"):
        t = np.asarray(t)
    return y, t[index]


def _as_tuple(index: Any) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def _materialize_pair(x: Any, t: Any) -> tuple:
    t = unthunk(t)
    todo = [v for v in (x, t) if isinstance(v, LazyArray)]
    if todo:
        materialize_many(todo)
    x = materialize(x)
    t = t if _zero(t) else materialize(t)
    return x, t


# --------------------------------------------------------------------------------------------------
# Sequences: concatenate, stack, split
# --------------------------------------------------------------------------------------------------


def _sequence(fn: Callable) -> Callable:
    def rule(tangents: tuple, arrays: Any, *args: Any, **kwargs: Any) -> tuple:
        arrays = list(arrays)
        y = fn(arrays, *args, **kwargs)
        ts = tangents[0]
        if _zero(ts):
            return y, ZeroTangent()
        parts = [zeros_for(a) if _zero(t) else unthunk(t) for t, a in zip(ts, arrays, strict=True)]
        return y, fn(parts, *args, **kwargs)

    rule.__doc__ = f"np.{fn.__name__}: ẏ = {fn.__name__}([ẋ₁, ẋ₂, ...]) (zeros for constants)."
    return rule


for _f in (np.concatenate, np.hstack, np.vstack, np.stack):
    _register(_f, _sequence(_f), False)


def _split(fn: Callable) -> Callable:
    def rule(tangents: tuple, ary: Any, indices_or_sections: Any, *args: Any, **kwargs: Any):
        ys = fn(ary, indices_or_sections, *args, **kwargs)
        t = tangents[0]
        if _zero(t):
            return ys, ZeroTangent()
        return ys, list(fn(unthunk(t), indices_or_sections, *args, **kwargs))

    rule.__doc__ = f"np.{fn.__name__}: ẏᵢ = {fn.__name__}(ẋ)ᵢ."
    return rule


for _f in (np.split, np.array_split):
    _register(_f, _split(_f), False)


# --------------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------------


def _reduce_params(args: tuple, kwargs: dict, fn: Any) -> dict:
    if fn in (np.var, np.std):
        return params(args, kwargs, axis=None, dtype=None, out=None, ddof=0, keepdims=False)
    if fn in (np.max, np.min, np.amax, np.amin):
        return params(args, kwargs, axis=None, out=None, keepdims=False)
    return params(args, kwargs, axis=None, dtype=None, out=None, keepdims=False)


def _keep(v: Any, axes: tuple, keepdims: bool) -> Any:
    return v if keepdims or not axes else np.expand_dims(v, axes)


def _extremum(fn: Callable) -> Callable:
    def rule(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        p = _reduce_params(args, kwargs, fn)
        la = _lazy(a)
        axes = normalize_axes(p["axis"], len(_shape(a)))
        y = fn(la, *args, **kwargs)
        t = tangents[0]
        if _zero(t):
            return y, ZeroTangent()
        mask = np.equal(la, _keep(y, axes, p["keepdims"]))
        count = np.sum(mask, axis=axes, keepdims=True)
        dot = np.sum(_tan(t) * mask / count, axis=axes, keepdims=p["keepdims"])
        return y, dot

    rule.__doc__ = f"np.{fn.__name__}: ẏ = sum(ẋ · mask / count) (ties share evenly)."
    return rule


for _f in (np.max, np.min, np.amax, np.amin):
    _register(_f, _extremum(_f), True)


@lazy_frule(np.prod)
def _prod(tangents, a, *args, **kwargs):
    """np.prod: ẏ = sum(ẋ · ∏_{j≠i} x_j) (y/x without zeros; exclusive products with zeros)."""
    p = _reduce_params(args, kwargs, np.prod)
    la = _lazy(a)
    axes = normalize_axes(p["axis"], len(_shape(a)))
    y = np.prod(la, *args, **kwargs)
    t = tangents[0]
    if _zero(t):
        return y, ZeroTangent()
    x = materialize(la)
    if not np.any(np.equal(x, 0)):
        others = _keep(y, axes, p["keepdims"]) / la
    else:
        others = _prod_of_others(x, axes)
    return y, np.sum(_tan(t) * others, axis=axes, keepdims=p["keepdims"])


def _moment_kwargs(p: dict) -> dict:
    return {k: p[k] for k in ("axis", "dtype", "ddof", "keepdims") if p[k] is not None}


def _moment(fn: Callable) -> Callable:
    def rule(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        p = _reduce_params(args, kwargs, fn)
        la = _lazy(a)
        shape = _shape(a)
        axes = normalize_axes(p["axis"], len(shape))
        n = int(np.prod([shape[i] for i in axes])) - p["ddof"]
        y = _reductions.moment(fn, la, **_moment_kwargs(p))
        t = tangents[0]
        if _zero(t):
            return y, ZeroTangent()
        centered = la - np.mean(la, axis=axes, keepdims=True)
        if _complex(la):  # real output: ẏ = Re(2 Σ conj(x - mean) ẋ) / (n - ddof)
            centered = np.conjugate(centered)
        dvar = np.sum(centered * _tan(t), axis=axes, keepdims=p["keepdims"]) * (2.0 / n)
        dvar = _real_for(dvar, y)
        return y, (dvar if fn is np.var else dvar / (2 * y))

    rule.__doc__ = f"np.{fn.__name__}: ẏ = 2 sum((x - mean) ẋ) / (n - ddof) (/ 2y for std)."
    return rule


for _f in (np.var, np.std):
    _register(_f, _moment(_f), True)


# --------------------------------------------------------------------------------------------------
# Linear algebra
# --------------------------------------------------------------------------------------------------


def _bilinear(fn: Callable) -> Callable:
    def rule(tangents: tuple, a: Any, b: Any, *args: Any, **kwargs: Any) -> tuple:
        y = fn(a, b, *args, **kwargs)
        ta, tb = tangents[0], tangents[1]
        dot: Any = ZeroTangent()
        if not _zero(ta):
            dot = fn(unthunk(ta), b, *args, **kwargs)
        if not _zero(tb):
            dot = _plus(dot, fn(a, unthunk(tb), *args, **kwargs))
        return y, dot

    rule.__doc__ = f"np.{fn.__name__}: ẏ = {fn.__name__}(ȧ, b) + {fn.__name__}(a, ḃ)."
    return rule


for _f in (np.matmul, np.dot, np.inner, np.vdot, np.outer, np.tensordot):
    _register(_f, _bilinear(_f), False)


@eager_frule(np.einsum)
def _einsum(tangents, subscripts, *operands, **kwargs):
    """np.einsum (string subscripts): ẏ = Σᵢ einsum(s, ..., ȯpᵢ, ...)."""
    if not isinstance(subscripts, str):
        return None
    ops = list(operands)
    y = np.einsum(subscripts, *ops, **kwargs)
    dot: Any = ZeroTangent()
    for i, t in enumerate(tangents[1:]):
        if _zero(t):
            continue
        swapped = ops[:i] + [unthunk(t)] + ops[i + 1 :]
        dot = _plus(dot, np.einsum(subscripts, *swapped, **kwargs))
    return y, dot


# --------------------------------------------------------------------------------------------------
# Scans, sort, logsumexp, norm
# --------------------------------------------------------------------------------------------------


@eager_frule(np.cumprod)
def _cumprod(tangents, a, *args, **kwargs):
    """np.cumprod: ẏ = y · cumsum(ẋ / x) without zeros; with zeros the exact product form
    ẏ_j = Σ_{k≤j} ẋ_k ∏_{i≤j, i≠k} x_i (O(n²) per lane)."""
    axis = params(args, kwargs, axis=None, dtype=None, out=None)["axis"]
    y = np.cumprod(a, *args, **kwargs)
    t = tangents[0]
    if _zero(t):
        return y, ZeroTangent()
    t = unthunk(t)
    x = np.reshape(a, (-1,)) if axis is None else a
    t = np.reshape(t, (-1,)) if axis is None else t
    ax = 0 if axis is None else axis % max(np.ndim(x), 1)
    if not np.any(np.equal(x, 0)):
        return y, y * np.cumsum(t / x, axis=ax)
    xm, tm = np.moveaxis(x, ax, -1), np.moveaxis(t, ax, -1)
    n = np.shape(xm)[-1]
    eye = np.eye(n, dtype=bool)
    m = np.where(eye, np.ones((), dtype=np.result_type(xm)), np.expand_dims(xm, -2))
    c = np.cumprod(m, axis=-1)  # c[..., k, j] = ∏_{i≤j, i≠k} x_i
    upper = np.triu(np.ones((n, n), dtype=np.result_type(xm)))
    g = np.sum(upper * c * np.expand_dims(tm, -1), axis=-2)
    return y, np.moveaxis(g, -1, ax)


@eager_frule(np.sort)
def _sort(tangents, a, *args, **kwargs):
    """np.sort: ẏ = take_along_axis(ẋ, perm) (perm = the stable argsort)."""
    axis = params(args, kwargs, axis=-1, kind=None, order=None, stable=None)["axis"]
    flat = np.reshape(a, (-1,)) if axis is None else a
    ax = -1 if axis is None else axis
    perm = np.argsort(flat, axis=ax, kind="stable")
    y = np.take_along_axis(flat, perm, axis=ax)
    t = tangents[0]
    if _zero(t):
        return y, ZeroTangent()
    t = unthunk(t)
    tf = np.reshape(t, (-1,)) if axis is None else t
    return y, np.take_along_axis(tf, perm, axis=ax)


if _scans._sp is not None:
    _sp = _scans._sp

    @eager_frule(_sp.logsumexp)
    def _logsumexp(tangents, a, *args, **kwargs):
        """scipy.special.logsumexp: ẏ = sum(exp(a - y) (b ȧ + ḃ)) (b=None: 1)."""
        p = params(args, kwargs, axis=None, b=None, keepdims=False, return_sign=False)
        if p["return_sign"]:
            return None
        axis, b, keepdims = p["axis"], p["b"], p["keepdims"]
        y = _call(_sp.logsumexp, a, *args, **kwargs)
        ta = tangents[0]
        tb = tangents[2] if len(args) >= 2 else ZeroTangent()
        if _zero(ta) and _zero(tb):
            return y, ZeroTangent()
        ndim = np.ndim(a) if b is None else len(np.broadcast_shapes(np.shape(a), np.shape(b)))
        w = np.exp(a - _scans._keep(y, axis, ndim, keepdims))
        inner: Any = ZeroTangent()
        if not _zero(ta):
            inner = unthunk(ta) if b is None else b * unthunk(ta)
        if not _zero(tb):
            inner = _plus(inner, unthunk(tb))
        return y, np.sum(w * inner, axis=axis, keepdims=keepdims)


@eager_frule(np.linalg.norm)
def _norm(tangents, x, *args, **kwargs):
    """np.linalg.norm: ẏ = sum(G ∘ ẋ) over the normed axes, G the reverse rule's gradient
    weights (``x / y`` for 2-norms and 'fro'); the tangent of a float ``ord`` is not propagated."""
    p = params(args, kwargs, ord=None, axis=None, keepdims=False)
    ord_, axis, keepdims = p["ord"], p["axis"], p["keepdims"]
    t = tangents[0]
    if _zero(t):
        return np.linalg.norm(x, *args, **kwargs), ZeroTangent()
    t = unthunk(t)
    ndim = np.ndim(x)
    red = tuple(range(ndim)) if axis is None else axis
    res = rrule(np.linalg.norm, x, *args, **kwargs)
    if res is None:
        return None
    y, pullback = res
    matrix = (axis is None and ndim == 2) or (axis is not None and np.ndim(axis) > 0)
    if ord_ in (None, "fro") or (ord_ == 2 and not matrix):
        safe = np.where(np.equal(y, 0), 1.0, y)  # at y = 0, x = 0 and so is the sum
        xc = np.conjugate(x) if _complex(x) else x
        return y, _real_for(np.sum(xc * t, axis=red, keepdims=keepdims), y) / safe
    g = pullback(np.ones(np.shape(y)))[0]  # the cotangent weights w: ẏ = Re(Σ w ẋ)
    return y, _real_for(np.sum(unthunk(g) * t, axis=red, keepdims=keepdims), y)


def missing_frules() -> list[Any]:
    """fusegrad's own reverse rules (those of ``fusegrad.rules``) that have no forward rule."""
    return [
        f
        for f, (rule, _) in RRULES.items()
        if getattr(rule, "__module__", "").startswith("fusegrad.rules") and f not in FRULES
    ]


__all__ = ["eager_frule", "frule", "lazy_frule", "missing_frules"]

"""Statistics traced through their definitions: nan-reductions, quantiles, average, cov, corrcoef.

One flat table, ``STATISTICS`` (merged into the tracer's composites by ``rules.composites``). Each
entry is written with NumPy calls that have rules, so reverse, forward and higher-order
derivatives come for free. Masks, counts and order-statistic positions are computed on the
primal (they carry no derivative).

- ``nansum``/``nanprod``/``nancumsum``/``nancumprod``: ``where(isnan(a), 0 or 1, a)`` then the
  plain reduction; ``nanmean``/``nanvar``/``nanstd``: sums over the non-nan count;
  ``nanmax``/``nanmin``: ``max``/``min`` with nans replaced by ``∓inf`` (all-nan slices: nan).
- ``quantile``/``percentile``/``median`` and their nan versions, every ``method`` of NumPy: the
  values are sorted (``np.sort`` has a rule) and the result is ``s[lo] + g·(s[hi] − s[lo])``. The
  position ``lo + g`` is NumPy's own quantile of ``arange(n)`` with the same method, so every
  method's rounding and interpolation rule is NumPy's exactly (for the nan versions, ``n`` is
  each slice's count of non-nan values). A traced ``q`` moves ``g`` by the method's slope of
  the position (``_POSITION_SLOPE``; 0 for the methods that step).
- ``ptp`` = ``max − min``; ``average`` = ``Σ w·a / Σ w``; ``cov`` and ``corrcoef`` as NumPy
  defines them (``fweights``, ``aweights``, ``ddof``, ``bias``, ``rowvar``, ``y``).

Example::

    >>> import fusegrad as fg
    >>> fg.grad(lambda x: np.nanmean(x))(np.array([1.0, np.nan, 3.0])).tolist()
    [0.5, 0.0, 0.5]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .common import as_array, cast, dtype_of, primal, probe, value
from .masked_reductions import masked_extremum, masked_mean, masked_prod, masked_sum, masked_var
from .registry import _traced


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    out = tuple(sorted(int(a) % max(ndim, 1) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError("repeated axis")
    return out


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"np.{name}(..., out=...) writes in place: drop out= and use the result")


def _mask(a: Any) -> Any:
    """Where ``a`` is NaN: of its primal, lazily (no value read: ``jit`` replays it)."""
    return np.isnan(primal(a))


def _nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nansum", out)
    return masked_sum(as_array(a), axis, dtype, keepdims, initial, where, skip_nan=True)


def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanprod", out)
    return masked_prod(as_array(a), axis, dtype, keepdims, initial, where, skip_nan=True)


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _no_out("nanmean", out)
    return masked_mean(as_array(a), axis, dtype, keepdims, where, skip_nan=True)


def _nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
            correction=None, std=False):  # fmt: skip
    _no_out("nanstd" if std else "nanvar", out)
    if correction is not None:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    return masked_var(as_array(a), axis, dtype, ddof, keepdims, where, mean, True, std)


def _nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
            correction=None):  # fmt: skip
    return _nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                   correction=correction, std=True)  # fmt: skip


def _nanextremum(kind: str, name: str) -> Callable:
    def rule(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        _no_out(name, out)
        return masked_extremum(kind, as_array(a), axis, keepdims, initial, where, skip_nan=True)

    rule.__name__ = name
    return rule


def _nancum(fn: Callable, fill: float, name: str) -> Callable:
    def rule(a, axis=None, dtype=None, out=None):
        _no_out(name, out)
        a = as_array(a)
        return fn(np.where(_mask(a), fill, a), axis=axis)

    rule.__name__ = name
    return rule


def _ptp(a, axis=None, out=None, keepdims=False):
    _no_out("ptp", out)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


# --------------------------------------------------------------------------------------------------
# Quantiles
# --------------------------------------------------------------------------------------------------


def _positions(n: int, q: np.ndarray, method: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, g)`` with the quantile ``s[lo] + g (s[hi] - s[lo])`` of ``n`` sorted values:
    NumPy's quantile of ``arange(n)`` (the interpolated position) under ``method``."""
    if n == 0:
        z = np.zeros(q.shape, np.int64)
        return z, z, np.zeros(q.shape)
    pos = np.quantile(np.arange(n, dtype=np.float64), q, method=method)
    lo = np.clip(np.floor(pos), 0, n - 1).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    return lo, hi, pos - lo


# d(position)/dq of NumPy's continuous quantile methods (Hyndman and Fan's: position
# n q + alpha + q (1 - alpha - beta) - 1, so a slope n + 1 - alpha - beta), for n values; the
# other methods step (lower, higher, nearest, midpoint, the inverted-cdf ones): slope 0
_POSITION_SLOPE = {
    "linear": -1.0,
    "weibull": 1.0,
    "hazen": 0.0,
    "interpolated_inverted_cdf": 0.0,
    "median_unbiased": 1.0 / 3.0,
    "normal_unbiased": 1.0 / 4.0,
}


def _quantile_core(
    a: Any, q: Any, axis: Any, method: str, keepdims: bool, nan: bool, dtype: Any
) -> Any:
    a = as_array(a)
    qv = np.asarray(value(q), dtype=np.float64)
    if np.any((qv < 0) | (qv > 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    ndim = np.ndim(a)
    axes = _axes(axis, ndim)
    keep = [i for i in range(ndim) if i not in axes]
    shape = np.shape(a)
    moved = np.transpose(a, keep + list(axes))
    kshape = tuple(shape[i] for i in keep)
    flat = np.reshape(moved, kshape + (-1,))
    s = np.sort(flat, axis=-1)  # nans last
    n_all = np.shape(flat)[-1]
    qflat = np.ravel(qv)
    if nan:
        counts = np.sum(~np.isnan(np.asarray(value(flat))), axis=-1)
    else:
        counts = np.full(kshape, n_all, dtype=np.int64)
    lo = np.zeros(kshape + qflat.shape, np.int64)
    hi = np.zeros_like(lo)
    g = np.zeros(lo.shape)
    for c in np.unique(counts):
        sel = counts == c
        lo_c, hi_c, g_c = _positions(int(c), qflat, method)
        lo[sel], hi[sel], g[sel] = lo_c, hi_c, g_c
    s_lo = np.take_along_axis(s, lo, axis=-1)
    s_hi = np.take_along_axis(s, hi, axis=-1)
    weight: Any = g
    if _traced(q) and method in _POSITION_SLOPE:
        # g moves with q where the position is inside the values (not clipped at an end): add
        # (q - value(q)) * slope, zero in value, so that the derivative in q flows
        n = np.asarray(counts, np.float64)[..., None]
        inside = ((lo + g) > 0) & ((lo + g) < n - 1)
        slope = np.where(inside, n + _POSITION_SLOPE[method], 0.0)
        weight = g + (np.ravel(as_array(q)) - qflat) * slope
    res = s_lo + weight * (s_hi - s_lo)
    if nan and np.any(counts == 0):
        res = np.where((counts == 0)[..., None], np.nan, res)
    if not nan:  # a nan in a slice makes its quantiles nan, as NumPy (sorted last, it was skipped)
        res = np.where(np.any(np.isnan(primal(flat)), axis=-1)[..., None], np.nan, res)
    # NumPy puts q's axes first.
    res = np.moveaxis(res, -1, 0) if np.ndim(res) > 0 else res
    res = np.reshape(res, qv.shape + kshape)
    if keepdims:
        full = list(shape)
        for i in axes:
            full[i] = 1
        res = np.reshape(res, qv.shape + tuple(full))
    return cast(res, dtype)


def _numpy_dtype(f: Any, a: Any, q: Any, method: str) -> np.dtype:
    """The dtype of NumPy's quantile function ``f`` of ``a`` at ``q``, by its own rules: a's
    dtype for the methods that pick values; for the interpolating ones promoted with q's, where a
    Python float q is weak (float32 data, q=0.3: float32) and an array's is not (float64)."""
    return np.asarray(f(np.zeros(1, dtype_of(a)), probe(q), method=method)).dtype


def _quantile_fn(name: str, scale: float, nan: bool) -> Callable:
    def rule(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
             *, weights=None, interpolation=None):  # fmt: skip
        _no_out(name, out)
        if weights is not None:
            raise TypeError(
                f"np.{name}(weights=...) has no derivative rule in fusegrad; call it without "
                "weights, or on fusegrad.numpy.stop_gradient(a) if a is a constant"
            )
        if interpolation is not None:
            method = interpolation
        dtype = _numpy_dtype(getattr(np, name), a, q, method)
        return _quantile_core(a, as_array(q) / scale, axis, method, keepdims, nan, dtype)

    rule.__name__ = name
    return rule


def _median_fn(name: str, nan: bool) -> Callable:
    def rule(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        _no_out(name, out)
        dtype = np.asarray(getattr(np, name)(np.zeros(1, dtype_of(a)))).dtype
        return _quantile_core(a, 0.5, axis, "linear", keepdims, nan, dtype)

    rule.__name__ = name
    return rule


# --------------------------------------------------------------------------------------------------
# average, cov, corrcoef
# --------------------------------------------------------------------------------------------------


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = as_array(a)
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        n = np.size(a) / np.size(avg)
        scl = np.zeros(np.shape(avg), dtype_of(avg)) + n  # NumPy's: avg's dtype
    else:
        w = as_array(weights)
        # NumPy's result dtype: a's and the weights' (at least float64 for integer or bool a)
        extra = (np.float64,) if dtype_of(a).kind in "biu" else ()
        dt = np.result_type(dtype_of(a), dtype_of(w), *extra)
        a, w = cast(a, dt), cast(w, dt)
        if np.shape(w) != np.shape(a):
            if axis is None:
                raise TypeError(
                    "np.average: axis must be specified when shapes of a and weights differ"
                )
            if np.ndim(w) != 1 or np.ndim(axis) != 0:
                raise TypeError(
                    "np.average: 1D weights expected when shapes of a and weights differ"
                )
            ax = int(axis) % np.ndim(a)
            if np.shape(w)[0] != np.shape(a)[ax]:
                raise ValueError("np.average: length of weights not compatible with specified axis")
            w = np.reshape(w, (1,) * ax + (-1,) + (1,) * (np.ndim(a) - ax - 1))
        scl = np.sum(w * np.ones(np.shape(a), dt), axis=axis, keepdims=keepdims)
        if np.any(np.asarray(value(scl)) == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg


def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
         dtype=None):  # fmt: skip
    m = as_array(m)
    if np.ndim(m) > 2:
        raise ValueError("m has more than 2 dimensions")
    if dtype is None:  # NumPy computes in at least float64 (float32 data: a float64 result)
        dtype = np.result_type(dtype_of(m), np.float64, *(() if y is None else (dtype_of(y),)))
    m = cast(m, dtype)
    x = np.reshape(m, (1, -1)) if np.ndim(m) < 2 else m
    if not rowvar and np.shape(x)[0] != 1:
        x = np.transpose(x)
    if y is not None:
        y = cast(as_array(y), dtype)
        y2 = np.reshape(y, (1, -1)) if np.ndim(y) < 2 else y
        if not rowvar and np.shape(y2)[0] != 1:
            y2 = np.transpose(y2)
        x = np.concatenate([x, y2], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = np.asarray(value(fweights), dtype=np.float64)
    if aweights is not None:
        aw = as_array(aweights)
        w = aw if w is None else w * aw
    if w is None:
        avg = np.mean(x, axis=1, keepdims=True)
        fact = np.shape(x)[1] - ddof
    else:
        w_sum = np.sum(w)
        avg = np.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * np.sum(w * as_array(aweights)) / w_sum
    xc = x - avg
    xw = xc if w is None else xc * w
    c = np.matmul(xw, np.conj(np.transpose(xc))) / fact
    return np.reshape(c, ()) if np.shape(c) == (1, 1) and np.ndim(m) < 2 and y is None else c


def _corrcoef(x, y=None, rowvar=True, bias=None, ddof=None, *, dtype=None):
    c = _cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    d = np.real(np.diagonal(c))
    sd = np.sqrt(d)
    c = c / np.reshape(sd, (-1, 1))
    return c / np.reshape(sd, (1, -1))


# fmt: off
STATISTICS: dict[Any, Callable] = {
    np.nansum:        _nansum,
    np.nanprod:       _nanprod,
    np.nanmean:       _nanmean,
    np.nanvar:        _nanvar,
    np.nanstd:        _nanstd,
    np.nanmax:        _nanextremum("max", "nanmax"),
    np.nanmin:        _nanextremum("min", "nanmin"),
    np.nancumsum:     _nancum(np.cumsum, 0.0, "nancumsum"),
    np.nancumprod:    _nancum(np.cumprod, 1.0, "nancumprod"),
    np.median:        _median_fn("median", nan=False),
    np.nanmedian:     _median_fn("nanmedian", nan=True),
    np.quantile:      _quantile_fn("quantile", 1.0, nan=False),
    np.nanquantile:   _quantile_fn("nanquantile", 1.0, nan=True),
    np.percentile:    _quantile_fn("percentile", 100.0, nan=False),
    np.nanpercentile: _quantile_fn("nanpercentile", 100.0, nan=True),
    np.ptp:           _ptp,
    np.average:       _average,
    np.cov:           _cov,
    np.corrcoef:      _corrcoef,
}
# fmt: on

__all__ = ["STATISTICS"]

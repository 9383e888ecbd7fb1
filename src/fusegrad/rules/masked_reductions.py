"""Reductions over some of the elements: ``where=``, ``initial=``, ``mean=`` and ``correction=``.

``np.sum(a, where=m, initial=c)`` is ``sum(where(m, a, 0)) + c``; ``prod`` fills with 1 and
multiplies by ``initial``; ``max``/``min`` fill with ``∓inf`` and take ``maximum``/``minimum``
with ``initial``; ``mean`` divides by the count of selected elements; ``var``/``std`` sum the
squared deviations from the mean of the selected elements (or the ``mean=`` given) over that
count less ``ddof`` (``correction=`` is NumPy 2's name for it). The nan-reductions are the same
with the nans left out too (``skip_nan``), which is how ``rules.statistics`` writes them.

Everything is written with NumPy calls that have rules, so both directions and every order come
from them; the masks are computed on the primal and carry no derivative. ``OPTIONS`` is the
table the tracer consults: for a call with such an option it returns the value, else ``None``
and the reduction's own rule runs.

Example::

    >>> import fusegrad as fg
    >>> m = np.array([True, False, True])
    >>> fg.grad(lambda x: np.sum(x * x, where=m, initial=1.0))(np.ones(3)).tolist()
    [2.0, 0.0, 2.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lazy.reductions import normalize_axes
from .common import is_complex_value, params, primal


def excluded(a: Any, where: Any = None, skip_nan: bool = False) -> Any:
    """Where ``a``'s elements are left out (``~where``, nans when ``skip_nan``), or None.

    >>> excluded(np.array([1.0, np.nan]), np.array([False, True]), skip_nan=True).tolist()
    [True, True]
    """
    out = np.isnan(primal(a)) if skip_nan else None
    if where is not None and where is not True:
        left = np.logical_not(np.broadcast_to(primal(where), np.shape(a)))
        out = left if out is None else np.logical_or(out, left)
    return out


def _kept(a: Any, ex: Any, fill: Any) -> Any:
    return a if ex is None else np.where(ex, fill, a)


def _as_result(initial: Any, result: Any) -> Any:
    """``initial`` in the reduction's dtype, as NumPy casts it (a traced one as it is)."""
    if isinstance(initial, np.ndarray | np.generic | float | int):
        return np.asarray(initial, dtype=np.result_type(primal(result)))
    return initial


def count(a: Any, ex: Any, axis: Any, keepdims: bool) -> Any:
    """How many elements of ``a`` are kept along ``axis``.

    >>> int(count(np.ones(3), np.array([True, False, False]), None, False))
    2
    """
    if ex is None:
        shape = np.shape(a)
        return math.prod(shape[i] for i in normalize_axes(axis, len(shape)))
    return np.sum(np.logical_not(ex), axis=axis, keepdims=keepdims)


def masked_sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False,
               initial: Any = None, where: Any = None, skip_nan: bool = False) -> Any:  # fmt: skip
    """``np.sum`` (``np.nansum`` when ``skip_nan``) with ``initial`` and ``where``.

    >>> float(masked_sum(np.arange(4.0), where=np.arange(4) % 2 == 0, initial=10.0))
    12.0
    """
    s = np.sum(_kept(a, excluded(a, where, skip_nan), 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return s if initial is None else s + _as_result(initial, s)


def masked_prod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False,
                initial: Any = None, where: Any = None, skip_nan: bool = False) -> Any:  # fmt: skip
    """``np.prod`` (``np.nanprod`` when ``skip_nan``) with ``initial`` and ``where``.

    >>> float(masked_prod(np.array([2.0, 3.0, 4.0]), where=np.array([1, 0, 1]) > 0))
    8.0
    """
    p = np.prod(_kept(a, excluded(a, where, skip_nan), 1), axis=axis, dtype=dtype,
                keepdims=keepdims)  # fmt: skip
    return p if initial is None else p * _as_result(initial, p)


def masked_extremum(kind: str, a: Any, axis: Any = None, keepdims: bool = False,
                    initial: Any = None, where: Any = None,
                    skip_nan: bool = False) -> Any:  # fmt: skip
    """``np.max``/``np.min`` (``nanmax``/``nanmin`` when ``skip_nan``) with ``initial`` and
    ``where``; an all-left-out slice is ``initial``, else nan (the nan versions) or NumPy's error.

    >>> float(masked_extremum("max", np.array([5.0, 1.0]), where=np.array([False, True]),
    ...                       initial=0.0))
    1.0
    """
    name = "maximum" if kind == "max" else "minimum"
    ex = excluded(a, where, skip_nan)
    if where is not None and where is not True and initial is None:
        reduction = ("fmax" if kind == "max" else "fmin") if skip_nan else name
        raise ValueError(
            f"reduction operation '{reduction}' does not have an identity, so to use a where "
            "mask one has to specify 'initial'"
        )
    dtype = np.result_type(primal(a))
    if dtype.kind in "fc":
        fill: Any = -np.inf if kind == "max" else np.inf
    else:
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        fill = (info.min if kind == "max" else info.max) if info else kind == "min"
    reduce = np.max if kind == "max" else np.min
    y = reduce(_kept(a, ex, fill), axis=axis, keepdims=keepdims)
    if initial is not None:
        return getattr(np, name)(y, _as_result(initial, y))
    if ex is not None:  # (skip_nan) an all-nan slice
        y = np.where(np.all(ex, axis=axis, keepdims=keepdims), np.nan, y)
    return y


def masked_mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False,
                where: Any = None, skip_nan: bool = False) -> Any:  # fmt: skip
    """``np.mean`` (``np.nanmean`` when ``skip_nan``) over the kept elements (nan for none).

    >>> float(masked_mean(np.array([1.0, 5.0, 3.0]), where=np.array([True, False, True])))
    2.0
    """
    ex = excluded(a, where, skip_nan)
    if ex is None:
        return np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)
    total = masked_sum(a, axis, dtype, keepdims, None, where, skip_nan)
    n = count(a, ex, axis, keepdims)
    out = total / np.where(n == 0, np.nan, n)  # (no division warning for an empty slice)
    return out.astype(dtype if dtype is not None else _mean_dtype(a))


def masked_var(a: Any, axis: Any = None, dtype: Any = None, ddof: Any = 0, keepdims: bool = False,
               where: Any = None, mean: Any = None, skip_nan: bool = False,
               std: bool = False) -> Any:  # fmt: skip
    """``np.var`` (``std``; the nan versions when ``skip_nan``) over the kept elements, from the
    ``mean`` given (keepdims-shaped, as NumPy's ``mean=``) or their own.

    >>> float(masked_var(np.array([1.0, 9.0, 3.0]), where=np.array([True, False, True])))
    1.0
    """
    ex = excluded(a, where, skip_nan)
    m = masked_mean(a, axis, dtype, True, where, skip_nan) if mean is None else mean
    d = _kept(a - m, ex, 0)
    squares = np.real(d * np.conj(d)) if is_complex_value(a) else d * d
    n = count(a, ex, axis, keepdims) - ddof
    # NumPy's divisor: nan where nothing is left for the nan versions, else at least 0 (inf, or
    # nan for an empty slice; a negative count gave a negative variance)
    n = np.where(n <= 0, np.nan, n) if skip_nan else np.maximum(n, 0)
    v = np.sum(squares, axis=axis, dtype=dtype, keepdims=keepdims) / n
    v = v.astype(dtype if dtype is not None else _mean_dtype(np.real(a)))
    return np.sqrt(v) if std else v


def _mean_dtype(a: Any) -> np.dtype:
    """NumPy's result dtype of a mean of ``a``: its own for inexact values, else float64 (the
    count is an int64 array here, which promoted float32 to float64)."""
    kind = np.result_type(primal(a))
    return kind if kind.kind in "fc" else np.dtype(np.float64)


# --------------------------------------------------------------------------------------------------
# The table: NumPy's reductions called with an option (else None: their own rules run)
# --------------------------------------------------------------------------------------------------

_SUM = ("axis", "dtype", "out", "keepdims", "initial", "where")
_EXTREMUM = ("axis", "out", "keepdims", "initial", "where")
_MEAN = ("axis", "dtype", "out", "keepdims", "where")
_VAR = ("axis", "dtype", "out", "ddof", "keepdims", "where", "mean", "correction")
_OPTIONS = ("initial", "where", "mean", "correction")


def _options(names: tuple, compute: Callable) -> Callable:
    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        p = params(args, kwargs, **dict.fromkeys(names))
        if all(p.get(k) is None for k in _OPTIONS):
            return None
        if p.get("where") is True:  # NumPy's default, spelled out (the rule refuses where=)
            p["where"] = None
        if p["out"] is not None:
            raise TypeError("out= writes in place, which a traced value cannot: use the result")
        p["keepdims"] = bool(p["keepdims"])
        if "correction" in names and p["correction"] is not None:
            if p["ddof"]:  # (NumPy takes an explicit ddof=0 beside correction)
                raise ValueError("ddof and correction can't be provided simultaneously.")
            p["ddof"] = p["correction"]
        return compute(a, p)

    return call


def _sum(a: Any, p: dict) -> Any:
    return masked_sum(a, p["axis"], p["dtype"], p["keepdims"], p["initial"], p["where"])


def _prod(a: Any, p: dict) -> Any:
    return masked_prod(a, p["axis"], p["dtype"], p["keepdims"], p["initial"], p["where"])


def _extremum(kind: str) -> Callable:
    return lambda a, p: masked_extremum(kind, a, p["axis"], p["keepdims"], p["initial"], p["where"])


def _mean(a: Any, p: dict) -> Any:
    return masked_mean(a, p["axis"], p["dtype"], p["keepdims"], p["where"])


def _var(std: bool) -> Callable:
    return lambda a, p: masked_var(
        a, p["axis"], p["dtype"], p["ddof"] or 0, p["keepdims"], p["where"], p["mean"], False, std
    )


# fmt: off
OPTIONS: dict[Any, Callable] = {
    np.sum:  _options(_SUM, _sum),
    np.prod: _options(_SUM, _prod),
    np.max:  _options(_EXTREMUM, _extremum("max")),
    np.min:  _options(_EXTREMUM, _extremum("min")),
    np.mean: _options(_MEAN, _mean),
    np.var:  _options(_VAR, _var(std=False)),
    np.std:  _options(_VAR, _var(std=True)),
}
# fmt: on

"""The tables the tracer consults before looking for a rule: what each NumPy function is to AD.

- ``STRUCTURAL``: functions that only look at a value's shape or type, run on the primal.
- ``NONDIFF``: functions whose result has no derivative (indices, booleans), run on the primals.
- ``COMPOSITES``: functions traced through their definition in terms of functions with rules
  (``rules.composites``, ``rules.statistics``, ``rules.fft``, ``rules.decompositions`` and the
  few below).
- ``UFUNC_REDUCE`` / ``UFUNC_ACCUMULATE``: ufunc methods that are other functions in disguise.

``fusegrad.ad.tracer`` reads these (its protocols serve reverse and forward tracers alike);
adding a function to a table is all it takes for both directions.

Example::

    >>> np.argmax in NONDIFF, np.shape in STRUCTURAL, np.pad in COMPOSITES
    (True, True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .common import primal
from .composites import COMPOSITES as _COMPOSITES
from .decompositions import DECOMPOSITIONS
from .fft import FFT_COMPOSITES
from .scans import cummax, cummin
from .statistics import STATISTICS
from .surface import SURFACE

# fmt: off
STRUCTURAL: dict[Any, Callable] = {
    np.shape:        lambda a: np.shape(primal(a)),
    np.ndim:         lambda a: np.ndim(primal(a)),
    np.size:         lambda a, axis=None: np.size(primal(a), axis),
    np.result_type:  lambda *a: np.result_type(*(primal(x) for x in a)),
    np.iscomplexobj: lambda a: np.iscomplexobj(primal(a)),
    np.isrealobj:    lambda a: np.isrealobj(primal(a)),
    np.zeros_like:   lambda a, dtype=None, **k: np.zeros(np.shape(primal(a)), dtype or a.dtype),
    np.ones_like:    lambda a, dtype=None, **k: np.ones(np.shape(primal(a)), dtype or a.dtype),
    np.empty_like:   lambda a, dtype=None, **k: np.empty(np.shape(primal(a)), dtype or a.dtype),
    np.full_like:    lambda a, v, dtype=None, **k: np.full(
        np.shape(primal(a)), v, dtype or a.dtype
    ),
    np.broadcast_shapes: np.broadcast_shapes,
    np.triu_indices_from: lambda arr, k=0: np.triu_indices_from(_shaped(arr), k),
    np.tril_indices_from: lambda arr, k=0: np.tril_indices_from(_shaped(arr), k),
    np.diag_indices_from: lambda arr: np.diag_indices_from(_shaped(arr)),
}
# fmt: on


def _shaped(a: Any) -> np.ndarray:
    """An array of ``a``'s shape that holds nothing (for functions that read only the shape)."""
    return np.broadcast_to(False, np.shape(primal(a)))


NONDIFF: set[Any] = {
    np.argmax,
    np.argmin,
    np.argsort,
    np.argwhere,
    np.nonzero,
    np.flatnonzero,
    np.count_nonzero,
    np.searchsorted,
    np.isclose,
    np.allclose,
    np.array_equal,
    np.any,
    np.all,
    # integer, boolean or index outputs (issue 15's surface sweep, tests/test_numpy_surface.py)
    np.nanargmax,
    np.nanargmin,
    np.argpartition,
    np.lexsort,
    np.digitize,
    np.isin,
    np.array_equiv,
    np.iscomplex,
    np.isreal,
    np.isneginf,
    np.isposinf,
    np.linalg.matrix_rank,
}

UFUNC_REDUCE: dict[Any, Any] = {
    np.add: np.sum,
    np.multiply: np.prod,
    np.maximum: np.max,
    np.minimum: np.min,
}


def _log_add_exp_reduce(exp: Callable, log: Callable) -> Callable:
    """``np.logaddexp.reduce`` (``np.logaddexp2.reduce``): ``m + log(sum(exp(a - m)))`` with
    ``m`` the largest finite value along ``axis`` (its own derivative cancels: the result's is
    the softmax of ``a``)."""

    def reduce(a: Any, axis: Any = 0, dtype: Any = None, keepdims: bool = False, **kw: Any) -> Any:
        if kw.get("initial", np._NoValue) is not np._NoValue or kw.get("where", True) is not True:
            raise TypeError(
                "initial= and where= of np.logaddexp.reduce on a traced value are not "
                "supported: write scipy.special.logsumexp or np.where on the input"
            )
        m = np.max(a, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        out = log(np.sum(exp(a - m), axis=axis, keepdims=True)) + m
        out = out if keepdims else np.squeeze(out, axis=axis)
        return out if dtype is None else out.astype(dtype)

    return reduce


def _reduceat(reduction: Callable) -> Callable:
    """``ufunc.reduceat(a, indices, axis)``: per index ``i`` the reduction of ``a[i:j]`` along
    ``axis`` (``j`` the next index; the end for the last), or ``a[i]`` itself where ``j <= i``,
    as NumPy defines it: one reduction a segment, stacked along ``axis``."""

    def reduceat(a: Any, indices: Any, axis: int = 0, dtype: Any = None, **kw: Any) -> Any:
        if kw.get("out") is not None:
            raise TypeError("reduceat(..., out=...) of a traced value: drop out=")
        idx = [int(i) for i in np.ravel(primal(indices))]
        n = np.shape(primal(a))[axis]
        if any(not 0 <= i < n for i in idx):
            raise IndexError(f"index out of bounds for reduceat over an axis of length {n}")
        moved = np.moveaxis(a, axis, 0)
        parts = []
        for k, i in enumerate(idx):
            j = idx[k + 1] if k + 1 < len(idx) else n
            parts.append(reduction(moved[i:j], axis=0) if j > i else moved[i])
        out = np.moveaxis(np.stack(parts), 0, axis)
        return out if dtype is None else out.astype(dtype)

    return reduceat


# ufunc.reduceat of the reductions above
UFUNC_REDUCEAT = {u: _reduceat(r) for u, r in UFUNC_REDUCE.items()}

# ufunc reductions written with other functions (composites: traced, fused, any order)
UFUNC_REDUCE_COMPOSITES = {
    np.logaddexp: _log_add_exp_reduce(np.exp, np.log),
    np.logaddexp2: _log_add_exp_reduce(np.exp2, np.log2),
}
UFUNC_ACCUMULATE = {np.add: np.cumsum, np.multiply: np.cumprod, np.maximum: cummax,
                    np.minimum: cummin}  # fmt: skip


def _clip(a: Any, a_min: Any = None, a_max: Any = None, **kwargs: Any) -> Any:
    # As jnp.clip: maximum then minimum, so a value at a bound splits its derivative evenly.
    if a_min is not None:
        a = np.maximum(a, a_min)
    if a_max is not None:
        a = np.minimum(a, a_max)
    return a


COMPOSITES: dict[Any, Callable] = {
    **_COMPOSITES,
    **STATISTICS,
    **FFT_COMPOSITES,
    **DECOMPOSITIONS,
    **SURFACE,
    np.clip: _clip,
    np.copy: lambda a, order="K", subok=False: a,
    np.amax: lambda a, *args, **kwargs: np.max(a, *args, **kwargs),  # (aliases, every option)
    np.amin: lambda a, *args, **kwargs: np.min(a, *args, **kwargs),
}

__all__ = ["COMPOSITES", "NONDIFF", "STRUCTURAL", "UFUNC_ACCUMULATE", "UFUNC_REDUCE"]
__all__ += ["UFUNC_REDUCEAT", "UFUNC_REDUCE_COMPOSITES"]

"""The rest of NumPy's differentiable surface: composites (``SURFACE``, merged into the tracer's
``COMPOSITES``) and the few rules that need writing by hand.

- polynomials: ``polyder``, ``polyint`` (traced integration constants too), ``polyadd``,
  ``polysub``, ``polymul``, ``polydiv`` (long division, quotient and remainder), ``poly`` (of
  roots), ``vander``: slices, products, ``convolve``.
- ``i0``: NumPy's own Chebyshev expansions on ``|x|`` (so ``I₀' = I₁`` is differentiated from
  the same code, to every order).
- ``linalg.cond`` (2-norm ratios of singular values, other ``p`` as ``‖A‖ ‖A⁻¹‖``),
  ``linalg.tensorinv``, ``linalg.tensorsolve``: ``reshape`` around ``inv``/``solve``.
- ``unique`` and ``unique_values``/``unique_counts``/``unique_inverse``/``unique_all``: the
  values gathered from the input at NumPy's first indices; indices, inverse and counts integer.
- ``histogram``, ``histogram2d``, ``histogramdd``, ``bincount``: the bins are found on the
  primal; the counts are a scatter-add of ``weights`` (differentiable), the bin edges of
  ``histogram`` move with the data's range (or a traced ``range=``) when ``bins`` is a count, as
  NumPy computes them; traced edges given as ``bins`` are returned as they are. (NumPy dispatches
  on ``a``, ``bins`` and ``weights``: a traced ``range=`` alone never reaches fusegrad.)
- ``apply_along_axis``, ``apply_over_axes``: the user's function applied slice by slice (traced).
- ``ediff1d``, ``trim_zeros``, ``extract``, ``compress``, ``choose``, ``diagflat``, ``dstack``,
  ``row_stack``, ``block``, ``resize``, ``unstack``, ``broadcast_arrays``, ``sort_complex``,
  ``cumulative_sum``/``cumulative_prod``, ``matrix_transpose``, ``fft.fftfreq``/``rfftfreq``
  (traced spacing ``d``), the ``linalg`` array-API names (``matmul``, ``tensordot``, ``outer``,
  ``cross``, ``diagonal``, ``trace``, ``vecdot``, ``matrix_norm``, ``vector_norm``,
  ``svdvals``), and the set operations ``union1d``/``intersect1d``/``setdiff1d``/``setxor1d``
  (values gathered from the inputs).
- by hand: ``modf`` (``frac̄ → x̄``; the integral part is piecewise constant), ``frexp``
  (``m̄ 2⁻ᵉ``; the exponent is an integer), ``divmod`` (the remainder's rule), ``ldexp``
  (``2ᵉ``), ``nextafter`` (``1`` in ``x``: one ulp away), the gufuncs ``vecdot``/``matvec``/
  ``vecmat`` (bilinear, the first argument conjugated as NumPy does), and ``spacing``, ``fix``
  without a derivative (piecewise constant, as in JAX).

Example::

    >>> import fusegrad as fg
    >>> # d/dp of p'(2) for p = [a, b, c]: p' = [2a, b], p'(2) = 4a + b
    >>> fg.grad(lambda p: np.polyval(np.polyder(p), 2.0))(np.array([1.0, 2.0, 3.0])).tolist()
    [4.0, 1.0, 0.0]
"""

from __future__ import annotations

import builtins
import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import NoTangent, ZeroTangent, unthunk
from .common import (
    as_array,
    bilinear,
    cast,
    conj,
    dtype_of,
    eager_frule,
    is_complex_value,
    is_zero,
    nondiff,
    primal,
    probe,
    project,
    unbroadcast_to,
    value,
)
from .registry import _traced, register_rrule

SURFACE: dict[Any, Callable] = {}


def _composite(*fs: Any) -> Callable[[Callable], Callable]:
    def put(c: Callable) -> Callable:
        for f in fs:
            SURFACE[f] = c
        return c

    return put


def _p1(p: Any, name: str) -> Any:
    p = as_array(p)
    if np.ndim(p) != 1:
        p = np.atleast_1d(p)
        if np.ndim(p) != 1:
            raise ValueError(f"np.{name}: the coefficients must be a 1-d array")
    return p


# --------------------------------------------------------------------------------------------------
# Polynomials
# --------------------------------------------------------------------------------------------------


@_composite(np.polyder)
def _polyder(p: Any, m: int = 1) -> Any:
    m = int(m)
    if m < 0:
        raise ValueError("np.polyder: the order of derivative m must be non-negative")
    p = _p1(p, "polyder")
    for _ in range(m):
        n = np.shape(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


@_composite(np.polyint)
def _polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    m = int(m)
    if m < 0:
        raise ValueError("np.polyint: the order of integral m must be non-negative")
    k = np.zeros(m) if k is None else np.atleast_1d(as_array(k))
    if np.shape(k)[0] == 1 and m > 1:
        k = k[0] * np.ones(m)
    if np.shape(k)[0] < m:
        raise ValueError("np.polyint: k must be a scalar or a sequence of at least m constants")
    p = _p1(p, "polyint")
    for i in range(m):
        p = np.concatenate([p / np.arange(np.shape(p)[0], 0, -1), np.reshape(k[i], (1,))])
    return p


def _align(a: Any, b: Any) -> tuple[Any, Any]:
    na, nb = np.shape(a)[0], np.shape(b)[0]
    if na < nb:
        a = np.concatenate([np.zeros(nb - na), a])
    elif nb < na:
        b = np.concatenate([np.zeros(na - nb), b])
    return a, b


@_composite(np.polyadd)
def _polyadd(a1: Any, a2: Any) -> Any:
    a, b = _align(_p1(a1, "polyadd"), _p1(a2, "polyadd"))
    return a + b


@_composite(np.polysub)
def _polysub(a1: Any, a2: Any) -> Any:
    a, b = _align(_p1(a1, "polysub"), _p1(a2, "polysub"))
    return a - b


@_composite(np.polymul)
def _polymul(a1: Any, a2: Any) -> Any:
    return np.convolve(_p1(a1, "polymul"), _p1(a2, "polymul"))


@_composite(np.polydiv)
def _polydiv(u: Any, v: Any) -> Any:
    u, v = _p1(u, "polydiv") + 0.0, _p1(v, "polydiv") + 0.0
    m, n = np.shape(u)[0] - 1, np.shape(v)[0] - 1
    if m < n:
        return np.zeros(1) * v[0], u
    scale = 1.0 / v[0]
    q = []
    r = u
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        r = np.concatenate([r[:k], r[k : k + n + 1] - d * v, r[k + n + 1 :]])
    rem = r[m - n + 1 :]
    # NumPy strips leading (near-)zeros of the remainder, decided on the primal values
    pr = np.asarray(primal(rem))
    start = 0
    while start < pr.shape[0] - 1 and np.allclose(pr[start], 0, rtol=1e-14):
        start += 1
    return np.stack(q), rem[start:]


@_composite(np.poly)
def _poly(seq_of_zeros: Any) -> Any:
    z = as_array(seq_of_zeros)
    if np.ndim(z) == 2 and np.shape(z)[0] == np.shape(z)[1] and np.shape(z)[0] != 0:
        z = np.linalg.eigvals(z)
    elif np.ndim(z) != 1:
        raise ValueError("np.poly: the input must be 1-d (roots) or a non-empty square matrix")
    a: Any = np.ones(1)
    for k in range(np.shape(z)[0]):
        a = np.convolve(a, np.stack([np.ones(()) + 0 * z[k], -z[k]]))
    return a


@_composite(np.vander)
def _vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    x = as_array(x)
    if np.ndim(x) != 1:
        raise ValueError("np.vander: x must be a one-dimensional array or sequence")
    n = np.shape(x)[0] if N is None else int(N)
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    return x[:, None] ** powers[None, :]


# --------------------------------------------------------------------------------------------------
# i0 (NumPy's Chebyshev expansions, Clenshaw's recurrence)
# --------------------------------------------------------------------------------------------------


def _numpy_i0_coefficients() -> tuple[Any, Any]:
    # NumPy's own Chebyshev coefficients of I0 (private: its module moved in NumPy 2.0)
    try:
        fb: Any = importlib.import_module("numpy.lib._function_base_impl")
    except ImportError:  # NumPy 1.x
        fb = importlib.import_module("numpy.lib.function_base")
    return fb._i0A, fb._i0B


_i0A, _i0B = _numpy_i0_coefficients()


def _chbevl(x: Any, vals: Any) -> Any:
    b0: Any = vals[0]
    b1: Any = 0.0
    b2: Any = 0.0
    for v in vals[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + v
    return 0.5 * (b0 - b2)


@_composite(np.i0)
def _i0(x: Any) -> Any:
    if is_complex_value(x):
        raise TypeError("np.i0: complex values are not supported (as in NumPy)")
    x = np.abs(x)
    small = np.asarray(primal(x)) <= 8.0
    xs = np.minimum(x, 8.0)
    xl = np.maximum(x, 8.0)
    lo = np.exp(xs) * _chbevl(xs / 2.0 - 2, _i0A)
    hi = np.exp(xl) * _chbevl(32.0 / xl - 2.0, _i0B) / np.sqrt(xl)
    return np.where(small, lo, hi)


# --------------------------------------------------------------------------------------------------
# linalg
# --------------------------------------------------------------------------------------------------


@_composite(np.linalg.cond)
def _cond(x: Any, p: Any = None) -> Any:
    if np.ndim(x) < 2:
        raise np.linalg.LinAlgError("np.linalg.cond: the input must be at least 2-d")
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    return np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1))


@_composite(np.linalg.tensorinv)
def _tensorinv(a: Any, ind: int = 2) -> Any:
    shape = np.shape(a)
    if ind <= 0:
        raise ValueError("np.linalg.tensorinv: ind must be a positive integer")
    n = int(np.prod(shape[ind:]))
    ia = np.linalg.inv(np.reshape(a, (n, -1)))
    return np.reshape(ia, shape[ind:] + shape[:ind])


@_composite(np.linalg.tensorsolve)
def _tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    an = np.ndim(a)
    if axes is not None:
        order = [k for k in range(an) if k not in [ax % an for ax in axes]]
        a = np.transpose(a, order + [ax % an for ax in axes])
    shape = np.shape(a)[-(an - np.ndim(b)) :]
    n = int(np.prod(shape))
    if int(np.prod(np.shape(a))) != n * n:
        raise np.linalg.LinAlgError(
            "np.linalg.tensorsolve: the input must be 'square': prod(a.shape[b.ndim:])**2 == a.size"
        )
    return np.reshape(np.linalg.solve(np.reshape(a, (n, n)), np.ravel(b)), shape)


@_composite(np.linalg.matrix_norm)
def _matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    return np.linalg.norm(x, ord, axis=(-2, -1), keepdims=keepdims)


@_composite(np.linalg.vector_norm)
def _vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    ndim, shape = np.ndim(x), np.shape(x)
    if axis is None:
        axis = tuple(range(ndim))
    axes = tuple(int(a) % ndim for a in axis) if isinstance(axis, tuple | list) else (axis,)
    if len(axes) == 1:
        return np.linalg.norm(x, ord, axis=axes[0], keepdims=keepdims)
    # a vector norm over several axes: of them merged into one (np.linalg.norm would take two
    # axes for a matrix norm)
    rest = [i for i in range(ndim) if i not in axes]
    merged = np.reshape(
        np.transpose(x, rest + list(axes)),
        tuple(shape[i] for i in rest) + (math.prod(shape[i] for i in axes),),
    )
    y = np.linalg.norm(merged, ord, axis=-1)
    if keepdims:
        y = np.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return y


_composite(np.linalg.svdvals)(lambda x, /: np.linalg.svd(x, compute_uv=False))
_composite(np.linalg.matmul)(lambda a, b, /: np.matmul(a, b))
_composite(np.linalg.outer)(lambda a, b, /: np.outer(a, b))
_composite(np.linalg.tensordot)(lambda a, b, /, *, axes=2: np.tensordot(a, b, axes))
_composite(np.linalg.cross)(lambda a, b, /, *, axis=-1: np.cross(a, b, axis=axis))
_composite(np.linalg.diagonal)(lambda x, /, *, offset=0: np.diagonal(x, offset, axis1=-2, axis2=-1))
_composite(np.linalg.trace)(
    lambda x, /, *, offset=0, dtype=None: np.trace(x, offset, axis1=-2, axis2=-1)
)
_composite(np.linalg.vecdot)(lambda a, b, /, *, axis=-1: np.sum(np.conj(a) * b, axis=axis))
_composite(np.linalg.matrix_transpose, np.matrix_transpose)(lambda x, /: np.swapaxes(x, -1, -2))


# --------------------------------------------------------------------------------------------------
# unique and the set operations
# --------------------------------------------------------------------------------------------------


def _unique_parts(ar: Any, axis: Any) -> tuple[Any, Any, Any, Any]:
    p = np.asarray(primal(ar))
    _, index, inverse, counts = np.unique(
        p, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    values = np.take(np.ravel(ar), index) if axis is None else np.take(ar, index, axis=axis)
    return values, index, inverse, counts


@_composite(np.unique)
def _unique(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: Any = None,
    *,
    equal_nan: bool = True,
    sorted: bool = True,
) -> Any:
    values, index, inverse, counts = _unique_parts(ar, axis)
    extra = [
        v
        for v, want in ((index, return_index), (inverse, return_inverse), (counts, return_counts))
        if want
    ]
    return (values, *extra) if extra else values


_composite(np.unique_values)(lambda x: _unique_parts(x, None)[0])


@_composite(np.unique_counts)
def _unique_counts(x: Any) -> Any:
    v, _, _, c = _unique_parts(x, None)
    return type(np.unique_counts(np.zeros(1)))(v, c)


@_composite(np.unique_inverse)
def _unique_inverse(x: Any) -> Any:
    v, _, inv, _ = _unique_parts(x, None)
    return type(np.unique_inverse(np.zeros(1)))(v, np.reshape(inv, np.shape(x)))


@_composite(np.unique_all)
def _unique_all(x: Any) -> Any:
    v, idx, inv, c = _unique_parts(x, None)
    return type(np.unique_all(np.zeros(1)))(v, idx, np.reshape(inv, np.shape(x)), c)


def _both(ar1: Any, ar2: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    both = np.concatenate([np.ravel(as_array(ar1)), np.ravel(as_array(ar2))])
    n1 = int(np.size(primal(ar1)))
    p = np.asarray(primal(both))
    return both, p, np.arange(p.shape[0]) < n1


def _gather_first(both: Any, p: np.ndarray, keep: np.ndarray) -> Any:
    """The sorted unique values of ``p[keep]``, gathered from ``both`` at their first index."""
    idx = np.flatnonzero(keep)
    _, first = np.unique(p[idx], return_index=True)
    return np.take(both, idx[first])


@_composite(np.union1d)
def _union1d(ar1: Any, ar2: Any) -> Any:
    both, p, _ = _both(ar1, ar2)
    return _gather_first(both, p, np.ones(p.shape, bool))


@_composite(np.intersect1d)
def _intersect1d(
    ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False
) -> Any:
    a1, a2 = np.ravel(as_array(ar1)), np.ravel(as_array(ar2))
    _, i1, i2 = np.intersect1d(
        np.asarray(primal(a1)), np.asarray(primal(a2)), assume_unique, return_indices=True
    )
    values = np.take(a1, i1)
    return (values, i1, i2) if return_indices else values


@_composite(np.setdiff1d)
def _setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Any:
    both, p, in1 = _both(ar1, ar2)
    keep = in1 & ~np.isin(p, p[~in1])
    if assume_unique:
        return np.take(both, np.flatnonzero(keep))
    return _gather_first(both, p, keep)


@_composite(np.setxor1d)
def _setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Any:
    both, p, in1 = _both(ar1, ar2)
    u1, u2 = np.unique(p[in1]), np.unique(p[~in1])
    keep = np.isin(p, np.setxor1d(u1, u2))
    return _gather_first(both, p, keep)


# --------------------------------------------------------------------------------------------------
# Histograms: bins on the primal, counts a scatter-add of the weights
# --------------------------------------------------------------------------------------------------


def _bin_of(sample: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """NumPy's bin of each sample (right edge of the last bin inclusive); -1 outside."""
    b = np.searchsorted(edges, sample, side="right") - 1
    b = np.where(sample == edges[-1], edges.shape[0] - 2, b)
    return np.where((sample < edges[0]) | (sample > edges[-1]), -1, b)


@_composite(np.bincount)
def _bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    x = np.asarray(primal(x))
    if weights is None:
        return np.bincount(x, minlength=minlength)
    size = max(int(minlength), int(x.max()) + 1 if x.size else 0)
    onehot = (x[:, None] == np.arange(size)[None, :]).astype(float)
    return np.matmul(np.ravel(as_array(weights)), onehot)


def _weighted_bins(w: Any, codes: np.ndarray, size: int) -> Any:
    if w is None:
        return np.bincount(codes[codes >= 0], minlength=size).astype(float)
    onehot = (codes[:, None] == np.arange(size)[None, :]).astype(float)
    return np.matmul(np.ravel(as_array(w)), onehot)


def _data_edges(column: Any, count: int) -> Any:
    """NumPy's ``count + 1`` equal bins' edges over a traced column's range (``min - 0.5`` and
    ``max + 0.5`` when all its values are equal), moving with it."""
    lo, hi = np.min(column), np.max(column)
    if float(value(lo)) == float(value(hi)):
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, count + 1)


@_composite(np.histogram)
def _histogram(
    a: Any, bins: Any = 10, range: Any = None, density: Any = None, weights: Any = None
) -> Any:
    pa = np.asarray(primal(a))
    pw = None if weights is None else np.asarray(primal(weights))
    pr: Any = None if range is None else tuple(float(value(r)) for r in range)
    _, edges_p = np.histogram(pa, value(bins), pr, weights=pw)
    edges: Any = edges_p
    if isinstance(bins, int | np.integer):
        # the edges move with the ends of the range: traced ends, or the data's min and max
        if range is not None and _traced(range):
            ends = (as_array(range[0]), as_array(range[1]))
            if float(value(ends[0])) != float(value(ends[1])):
                # NumPy's edges: dtype of the ends (Python floats weakly) and the data, inexact
                bin_type = np.result_type(probe(range[0]), probe(range[1]), pa)
                if np.issubdtype(bin_type, np.integer):
                    bin_type = np.result_type(bin_type, float)
                edges = np.linspace(range[0], range[1], int(bins) + 1, dtype=bin_type)
        elif range is None and _traced(a) and pa.size:
            edges = _data_edges(np.ravel(a), int(bins))
    elif _traced(bins):
        edges = as_array(bins)  # given edges: the density divides by their widths
    hist = _weighted_bins(weights, _bin_of(np.ravel(pa), edges_p), edges_p.shape[0] - 1)
    if weights is None and not density:
        hist = np.asarray(hist).astype(np.int64)
    elif weights is not None:  # NumPy's weighted counts have the weights' dtype
        hist = cast(hist, dtype_of(weights))
    if density:  # NumPy divides by the bin widths as float64
        hist = hist / cast(np.diff(edges), np.float64) / np.sum(hist)
    return hist, edges


@_composite(np.histogramdd)
def _histogramdd(
    sample: Any, bins: Any = 10, range: Any = None, density: Any = None, weights: Any = None
) -> Any:
    sample = as_array(sample)
    ps = np.asarray(primal(sample))
    if ps.ndim == 1:
        ps, sample = ps[:, None], sample[:, None]
    pw = None if weights is None else np.asarray(primal(weights))
    _, edges_p = np.histogramdd(ps, bins, range, weights=pw)
    shape = tuple(e.shape[0] - 1 for e in edges_p)
    per = [_bin_of(ps[:, i], e) for i, e in enumerate(edges_p)]
    # a dimension's edges move with its data when they are a count of bins over its range
    edges = list(edges_p)
    if _traced(sample) and ps.shape[0]:
        for i in builtins.range(ps.shape[1]):
            count = bins[i] if isinstance(bins, list | tuple) else bins
            if isinstance(count, int | np.integer) and (range is None or range[i] is None):
                edges[i] = _data_edges(sample[:, i], int(count))
    outside = np.any(np.stack(per) < 0, axis=0)
    codes = np.where(outside, -1, np.ravel_multi_index(tuple(np.maximum(b, 0) for b in per), shape))
    hist = np.reshape(_weighted_bins(weights, codes, int(np.prod(shape))), shape)
    if density:
        vol = np.ones(())
        for i, e in enumerate(edges):
            vol = np.expand_dims(vol, -1) * np.reshape(np.diff(e), (1,) * i + (-1,))
        hist = hist / vol / np.sum(hist)
    return hist, edges


@_composite(np.histogram2d)
def _histogram2d(
    x: Any, y: Any, bins: Any = 10, range: Any = None, density: Any = None, weights: Any = None
) -> Any:
    sample = np.stack([as_array(x), as_array(y)], axis=1)  # traced: its edges move with it
    hist, edges = _histogramdd(sample, bins, range, density, weights)
    return hist, edges[0], edges[1]


@_composite(np.histogram_bin_edges)
def _histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:
    return _histogram(a, bins, range, None, weights)[1]


# --------------------------------------------------------------------------------------------------
# Applying functions, joining, selecting
# --------------------------------------------------------------------------------------------------


@_composite(np.apply_along_axis)
def _apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    arr = as_array(arr)
    nd = np.ndim(arr)
    axis = int(axis) % max(nd, 1)
    moved = np.moveaxis(arr, axis, -1)
    outer = np.shape(moved)[:-1]
    outs = [as_array(func1d(moved[i], *args, **kwargs)) for i in np.ndindex(*outer)]
    res = np.reshape(np.stack(outs), outer + np.shape(outs[0]))
    inner = np.ndim(outs[0])
    for k in range(inner):  # the function's axes go where `axis` was, as in NumPy
        res = np.moveaxis(res, len(outer) + k, axis + k)
    return res


@_composite(np.apply_over_axes)
def _apply_over_axes(func: Callable, a: Any, axes: Any) -> Any:
    val = as_array(a)
    n = np.ndim(val)
    for ax in np.atleast_1d(axes):
        ax = int(ax) % n
        res = func(val, ax)
        if np.ndim(res) == np.ndim(val):
            val = res
        else:
            res = np.expand_dims(res, ax)
            if np.ndim(res) != np.ndim(val):
                raise ValueError(
                    "np.apply_over_axes: function is not returning an array of the correct shape"
                )
            val = res
    return val


@_composite(np.ediff1d)
def _ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    ary = as_array(ary)
    d = np.diff(np.ravel(ary))
    dt = dtype_of(ary)  # NumPy's result has ary's dtype: to_begin/to_end are cast to it

    def end(v: Any, name: str) -> Any:
        if not np.can_cast(dtype_of(v), dt, casting="same_kind"):
            raise TypeError(
                f"dtype of `{name}` must be compatible with input `ary` under the `same_kind` rule."
            )
        return cast(np.ravel(as_array(v)), dt)

    parts = [d]
    if to_begin is not None:
        parts.insert(0, end(to_begin, "to_begin"))
    if to_end is not None:
        parts.append(end(to_end, "to_end"))
    return np.concatenate(parts) if len(parts) > 1 else d


@_composite(np.trim_zeros)
def _trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    p = np.asarray(primal(filt))
    nz = np.flatnonzero(p)
    trim = trim.lower()
    start = (nz[0] if nz.size else p.shape[0]) if "f" in trim else 0
    stop = (nz[-1] + 1 if nz.size else 0) if "b" in trim else p.shape[0]
    return filt[int(start) : max(int(stop), int(start))]


@_composite(np.extract)
def _extract(condition: Any, arr: Any) -> Any:
    idx = np.flatnonzero(np.asarray(primal(condition)))
    return np.take(np.ravel(as_array(arr)), idx)


@_composite(np.compress)
def _compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    idx = np.flatnonzero(np.asarray(primal(condition)))
    a = as_array(a)
    return np.take(np.ravel(a), idx) if axis is None else np.take(a, idx, axis=axis)


@_composite(np.choose)
def _choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    idx = np.asarray(primal(a))
    if mode == "wrap":
        idx = idx % len(choices)
    elif mode == "clip":
        idx = np.clip(idx, 0, len(choices) - 1)
    elif np.any((idx < 0) | (idx >= len(choices))):
        raise ValueError("np.choose: invalid entry in choice array")
    res: Any = choices[0]
    for k in range(1, len(choices)):
        res = np.where(idx == k, choices[k], res)
    return res + 0 * choices[0] if len(choices) == 1 else res


@_composite(np.diagflat)
def _diagflat(v: Any, k: int = 0) -> Any:
    return np.diag(np.ravel(as_array(v)), k)


@_composite(np.dstack)
def _dstack(tup: Any) -> Any:
    return np.concatenate([np.atleast_3d(as_array(t)) for t in tup], axis=2)


if hasattr(np, "row_stack"):  # deprecated in NumPy 2.0
    _composite(np.row_stack)(lambda tup, **kw: np.vstack(list(tup), **kw))


@_composite(np.block)
def _block(arrays: Any) -> Any:
    def depth(x: Any) -> int:
        return 1 + depth(x[0]) if isinstance(x, list) else 0

    d = depth(arrays)

    def build(x: Any, level: int) -> Any:
        if not isinstance(x, list):
            a = as_array(x)
            return np.reshape(a, (1,) * (d - np.ndim(a)) + np.shape(a)) if np.ndim(a) < d else a
        parts = [build(e, level + 1) for e in x]
        nd = max(np.ndim(p) for p in parts)
        return np.concatenate(parts, axis=nd - (d - level))

    return build(arrays, 0)


@_composite(np.resize)
def _resize(a: Any, new_shape: Any) -> Any:
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    flat = np.ravel(as_array(a))
    n, total = np.shape(flat)[0], int(np.prod(shape))
    if n == 0 or total == 0:
        return np.zeros(shape)
    return np.reshape(np.take(flat, np.arange(total) % n), shape)


@_composite(np.unstack)
def _unstack(x: Any, /, *, axis: int = 0) -> Any:
    m = np.moveaxis(x, axis, 0)
    return tuple(m[i] for i in range(np.shape(m)[0]))


@_composite(np.broadcast_arrays)
def _broadcast_arrays(*args: Any, subok: bool = False) -> Any:
    arrs = [as_array(a) for a in args]
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrs))
    return tuple(np.broadcast_to(a, shape) for a in arrs)


@_composite(np.sort_complex)
def _sort_complex(a: Any) -> Any:
    p = np.asarray(primal(a))
    order = np.lexsort((np.imag(p), np.real(p)))
    return np.take(a, order) + 0j


def _cumulative(f: Any, ident: float) -> Callable:
    def cumulative(
        x: Any, /, *, axis: Any = None, dtype: Any = None, include_initial: bool = False
    ):
        x = as_array(x)
        if axis is None:
            if np.ndim(x) > 1:
                raise ValueError(f"np.{f.__name__}: axis= is required for arrays of more than 1-d")
            axis = 0
        y = f(x if dtype is None else cast(x, dtype), axis=axis)
        if include_initial:
            shape = list(np.shape(y))
            shape[axis] = 1
            y = np.concatenate([np.full(shape, ident, dtype_of(y)), y], axis=axis)
        return y

    return cumulative


_composite(np.cumulative_sum)(_cumulative(np.cumsum, 0.0))
_composite(np.cumulative_prod)(_cumulative(np.cumprod, 1.0))
_composite(np.fft.fftfreq)(lambda n, d=1.0, device=None: np.fft.fftfreq(n) / d)
_composite(np.fft.rfftfreq)(lambda n, d=1.0, device=None: np.fft.rfftfreq(n) / d)


# --------------------------------------------------------------------------------------------------
# Ufuncs written by hand
# --------------------------------------------------------------------------------------------------


def _first(ct: Any) -> Any:
    if is_zero(ct):
        return ZeroTangent()
    return unthunk(ct[0]) if isinstance(ct, tuple | list) else unthunk(ct)


@register_rrule(np.modf)
def _modf(x, **kwargs):
    """np.modf -> (frac, whole): x̄ = frac̄ (the integral part is piecewise constant)."""
    y = np.modf(x, **kwargs)

    def pullback(ct):
        g = _first(ct)
        return (ZeroTangent() if is_zero(g) else unbroadcast_to(g, np.shape(x)),)

    return y, pullback


@eager_frule(np.modf)
def _modf_jvp(tangents, x, **kwargs):
    """np.modf: (frac, whole)˙ = (ẋ, 0)."""
    y = np.modf(x, **kwargs)
    t = tangents[0]
    return y, ZeroTangent() if is_zero(t) else (unthunk(t) + 0 * y[0], ZeroTangent())


@register_rrule(np.frexp)
def _frexp(x, **kwargs):
    """np.frexp -> (mantissa, exponent): x̄ = m̄ 2⁻ᵉ (the exponent is an integer)."""
    m, e = np.frexp(x, **kwargs)
    scale = np.ldexp(1.0, -e)

    def pullback(ct):
        g = _first(ct)
        return (ZeroTangent() if is_zero(g) else g * scale,)

    return (m, e), pullback


@eager_frule(np.frexp)
def _frexp_jvp(tangents, x, **kwargs):
    """np.frexp: (m, e)˙ = (ẋ 2⁻ᵉ, 0)."""
    m, e = np.frexp(x, **kwargs)
    t = tangents[0]
    if is_zero(t):
        return (m, e), ZeroTangent()
    return (m, e), (unthunk(t) * np.ldexp(1.0, -e), NoTangent())


@register_rrule(np.ldexp)
def _ldexp(x, e, **kwargs):
    """np.ldexp(x, e) = x 2ᵉ: x̄ = ȳ 2ᵉ (e integer)."""
    y = np.ldexp(x, e, **kwargs)

    def pullback(g):
        g = unthunk(g)
        return unbroadcast_to(g * np.ldexp(1.0, e), np.shape(x)), NoTangent()

    return y, pullback


@eager_frule(np.ldexp)
def _ldexp_jvp(tangents, x, e, **kwargs):
    """np.ldexp: ẏ = ẋ 2ᵉ."""
    y = np.ldexp(x, e, **kwargs)
    t = tangents[0]
    return y, ZeroTangent() if is_zero(t) else unthunk(t) * np.ldexp(1.0, e) + 0 * y


@register_rrule(np.divmod)
def _divmod(a, b, **kwargs):
    """np.divmod -> (a // b, a % b): ā = r̄, b̄ = -r̄ ⌊a/b⌋ (the quotient is piecewise constant)."""
    q, r = np.divmod(a, b, **kwargs)

    def pullback(ct):
        g = _first(ct[1] if isinstance(ct, tuple | list) else ZeroTangent())
        if is_zero(g):
            return ZeroTangent(), ZeroTangent()
        return unbroadcast_to(g, np.shape(a)), unbroadcast_to(-g * q, np.shape(b))

    return (q, r), pullback


@eager_frule(np.divmod)
def _divmod_jvp(tangents, a, b, **kwargs):
    """np.divmod: (q, r)˙ = (0, ȧ - ḃ ⌊a/b⌋)."""
    q, r = np.divmod(a, b, **kwargs)
    ta, tb = (unthunk(t) for t in tangents)
    dot = 0 * r
    if not is_zero(ta):
        dot = dot + ta
    if not is_zero(tb):
        dot = dot - tb * q
    return (q, r), (ZeroTangent(), dot)


# The convention of rules/linalg.py: x̄ = ȳ ∂y/∂x for a holomorphic factor, conj(ȳ ∂y/∂x̄) for
# a conjugated one (vecdot and vecmat conjugate their first argument).
def _vecdot_ta(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    return project(unbroadcast_to(conj(np.expand_dims(g, -1) * b), np.shape(a)), a)


def _vecdot_tb(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    return project(unbroadcast_to(np.expand_dims(g, -1) * conj(a), np.shape(b)), b)


def _matvec_ta(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    ct = np.expand_dims(g, -1) * np.expand_dims(b, -2)
    return project(unbroadcast_to(ct, np.shape(a)), a)


def _matvec_tb(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    return project(unbroadcast_to(np.sum(a * np.expand_dims(g, -1), axis=-2), np.shape(b)), b)


def _vecmat_ta(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    ct = conj(np.sum(np.expand_dims(g, -2) * b, axis=-1))
    return project(unbroadcast_to(ct, np.shape(a)), a)


def _vecmat_tb(g: Any, a: Any, b: Any, **kw: Any) -> Any:
    ct = np.expand_dims(conj(a), -1) * np.expand_dims(g, -2)
    return project(unbroadcast_to(ct, np.shape(b)), b)


for _f, _ta, _tb in (
    (getattr(np, "vecdot", None), _vecdot_ta, _vecdot_tb),
    (getattr(np, "matvec", None), _matvec_ta, _matvec_tb),
    (getattr(np, "vecmat", None), _vecmat_ta, _vecmat_tb),
):
    if _f is not None:  # NumPy >= 2.0 (vecdot) / 2.2 (matvec, vecmat)
        bilinear(_f, _ta, _tb)


def _eager_nondiff(f: Any) -> None:
    # nondiff() of a ufunc builds a lazy Map, which needs an op of the lazy IR; these have none.
    def rule(*args: Any, **kwargs: Any) -> tuple:
        return f(*args, **kwargs), lambda dy: tuple(ZeroTangent() for _ in args)

    def forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        return f(*args, **kwargs), ZeroTangent()

    rule.__doc__ = forward.__doc__ = f"np.{f.__name__}: no derivative (piecewise constant)."
    register_rrule(f)(rule)
    eager_frule(f)(forward)


_eager_nondiff(np.spacing)


@register_rrule(np.nextafter)
def _nextafter(x, y, **kwargs):
    """np.nextafter(x, y): x moved by one ulp, x̄ = ȳ (the direction y has no derivative)."""
    out = np.nextafter(x, y, **kwargs)
    return out, lambda g: (unbroadcast_to(unthunk(g), np.shape(x)), ZeroTangent())


@eager_frule(np.nextafter)
def _nextafter_jvp(tangents, x, y, **kwargs):
    """np.nextafter: ẏ = ẋ."""
    out = np.nextafter(x, y, **kwargs)
    t = tangents[0]
    return out, ZeroTangent() if is_zero(t) else unthunk(t) + 0 * out


nondiff(np.fix)


__all__ = ["SURFACE"]

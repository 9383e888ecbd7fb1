"""``scipy.spatial.distance``'s ``cdist``, ``pdist`` and ``squareform`` for traced values.

The distances are written with NumPy operations on the differences of every pair of rows
(``XA[:, None] - XB[None]`` for ``cdist``; the rows ``i < j`` of ``X``, in SciPy's order, for
``pdist``), so they trace, fuse, and have reverse and forward derivatives of any order:
'euclidean', 'sqeuclidean', 'cityblock', 'chebyshev', 'minkowski' (``p``, and ``w`` as for
the first four), 'cosine', 'correlation', 'seuclidean' (``V``; by default the variance of the
rows, traced with them, as SciPy computes it) and 'mahalanobis' (``VI``; by default the inverse
of the rows' covariance), and a callable metric (called on each pair of rows). As in SciPy the
result is float64 whatever the input's type. A root of a sum of powers has an infinite slope
where the sum is 0 (two equal rows): there its derivative is taken as 0, the safe choice of a
JAX ``where`` (never ``nan``); ``|u - v|`` has ``np.abs``'s slope at 0 (1, as in JAX).
``squareform`` gathers between the condensed vector and the square matrix (its ``checks`` read
the values, as SciPy).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.spatial as fsd
    >>> fg.grad(lambda x: fsd.cdist(x, np.zeros((1, 2)))[0, 0])(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.spatial.distance as _sd

from ..rules.common import value
from . import _dispatch

_cdist = _dispatch.original(_sd.cdist)
_pdist = _dispatch.original(_sd.pdist)
_squareform = _dispatch.original(_sd.squareform)

_ALIASES = {
    "euclidean": ("euclidean", "euclid", "eu", "e"),
    "sqeuclidean": ("sqeuclidean", "sqe", "sqeuclid"),
    "cityblock": ("cityblock", "cblock", "cb", "c"),
    "chebyshev": ("chebyshev", "chebychev", "chebyshev", "cheby", "cheb", "ch"),
    "minkowski": ("minkowski", "mi", "m", "pnorm"),
    "cosine": ("cosine", "cos"),
    "correlation": ("correlation", "co"),
    "seuclidean": ("seuclidean", "se", "s"),
    "mahalanobis": ("mahalanobis", "mahal", "mah"),
}
_METRIC = {alias: name for name, aliases in _ALIASES.items() for alias in aliases}


def _float(a: Any) -> Any:
    a = a if _dispatch.traced((a,), {}) else np.asarray(a)
    return a if a.dtype == np.float64 else a.astype(np.float64)


def _safe_root(s: Any, p: float) -> Any:
    """``s ** (1/p)`` for ``s >= 0``, with derivative 0 (not inf) where ``s`` is 0."""
    pos = np.greater(s, 0)
    root = np.sqrt(np.where(pos, s, 1.0)) if p == 2 else np.where(pos, s, 1.0) ** (1.0 / p)
    return np.where(pos, root, 0.0)


def _safe_abs_power(d: Any, p: float) -> Any:
    """``|d| ** p`` with derivative 0 where ``d`` is 0 (infinite there for ``p < 1``)."""
    if p == 1:
        return np.abs(d)
    if p == 2:
        return d * d
    nz = np.not_equal(d, 0)
    return np.where(nz, np.abs(np.where(nz, d, 1.0)) ** p, 0.0)


def _weighted_sum(t: Any, w: Any) -> Any:
    return np.sum(t if w is None else w * t, axis=-1)


def _cosine(u: Any, v: Any, centred: bool) -> Any:
    if centred:
        u = u - np.mean(u, axis=-1, keepdims=True)
        v = v - np.mean(v, axis=-1, keepdims=True)
    uv = np.sum(u * v, axis=-1)
    uu, vv = np.sum(u * u, axis=-1), np.sum(v * v, axis=-1)
    return np.clip(1.0 - uv / np.sqrt(uu * vv), 0.0, 2.0)


def _distances(u: Any, v: Any, metric: str, rows: Any, kwargs: dict) -> Any:
    """The metric between ``u`` and ``v`` (rows along the last axis, broadcast); ``rows`` is
    the observations SciPy's default ``V``/``VI`` come from."""
    allowed = {"euclidean": ("w",), "sqeuclidean": ("w",), "cityblock": ("w",),
               "chebyshev": (), "minkowski": ("p", "w"), "cosine": (), "correlation": (),
               "seuclidean": ("V",), "mahalanobis": ("VI",)}[metric]  # fmt: skip
    extra = set(kwargs) - set(allowed)
    if extra:
        raise TypeError(
            f"scipy.spatial.distance with metric {metric!r} on traced values: fusegrad does not "
            f"take {', '.join(sorted(extra))} for it (it takes {', '.join(allowed) or 'none'})"
        )
    w = kwargs.get("w")
    w = None if w is None else _float(w)
    d = u - v
    if metric == "minkowski":
        p = kwargs.get("p", 2.0)
        if _dispatch.traced((p,), {}):
            raise TypeError("scipy.spatial.distance minkowski: a traced p is not supported")
        if p <= 0:
            raise ValueError("p must be greater than 0")
        if np.isinf(p):
            metric = "chebyshev"
        else:
            return _safe_root(_weighted_sum(_safe_abs_power(d, p), w), p)
    if metric == "euclidean":
        return _safe_root(_weighted_sum(d * d, w), 2)
    if metric == "sqeuclidean":
        return _weighted_sum(d * d, w)
    if metric == "cityblock":
        return _weighted_sum(np.abs(d), w)
    if metric == "chebyshev":
        if w is not None:
            d = np.where(np.greater(w, 0), d, 0.0)
        return np.max(np.abs(d), axis=-1)
    if metric in ("cosine", "correlation"):
        return _cosine(u, v, metric == "correlation")
    if metric == "seuclidean":
        var = kwargs.get("V")
        var = np.var(rows, axis=0, ddof=1) if var is None else _float(var)
        return _safe_root(np.sum(d * d / var, axis=-1), 2)
    vi = kwargs.get("VI")  # mahalanobis
    if vi is None:
        m, n = np.shape(rows)
        if m <= n:
            raise ValueError(
                f"The number of observations ({m}) is too small; the covariance matrix is "
                f"singular. For observations with {n} dimensions, at least {n + 1} "
                f"observations are required."
            )
        vi = np.linalg.inv(np.atleast_2d(np.cov(rows.T))).T
    else:
        vi = _float(vi)
    return _safe_root(np.einsum("...i,ij,...j->...", d, vi, d), 2)


def _metric_name(metric: Any) -> str:
    name = _METRIC.get(metric.lower()) if isinstance(metric, str) else None
    if name is None:
        raise TypeError(
            f"scipy.spatial.distance metric {metric!r} on traced values: fusegrad supports "
            f"{', '.join(_ALIASES)} and callables (write another metric as a callable with "
            "NumPy operations)"
        )
    return name


def _no_out(out: Any) -> None:
    if out is not None:
        raise TypeError(
            "scipy.spatial.distance on traced values: an `out` array cannot be written into "
            "(its derivative would be lost); use the returned array"
        )


def cdist(XA: Any, XB: Any, metric: Any = "euclidean", *, out: Any = None, **kwargs: Any) -> Any:
    """``scipy.spatial.distance.cdist``: the distance between each row of ``XA`` and each of
    ``XB`` (float64, shape ``(len(XA), len(XB))``).

    >>> cdist(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([[5., 1.]])
    """
    if not _dispatch.traced((XA, XB, *kwargs.values()), {}):
        return _cdist(XA, XB, metric, out=out, **kwargs)
    _no_out(out)
    a, b = _float(XA), _float(XB)
    if np.ndim(a) != 2:
        raise ValueError("XA must be a 2-dimensional array.")
    if np.ndim(b) != 2:
        raise ValueError("XB must be a 2-dimensional array.")
    if np.shape(a)[1] != np.shape(b)[1]:
        raise ValueError("XA and XB must have the same number of columns (i.e. feature dimension.)")
    if callable(metric):
        return np.stack([np.stack([metric(a[i], b[j], **kwargs) for j in range(len(b))])
                          for i in range(len(a))]).astype(np.float64)  # fmt: skip
    name = _metric_name(metric)
    rows = np.concatenate([a, b]) if name in ("seuclidean", "mahalanobis") else a
    return _distances(a[:, None, :], b[None, :, :], name, rows, kwargs)


def pdist(X: Any, metric: Any = "euclidean", *, out: Any = None, **kwargs: Any) -> Any:
    """``scipy.spatial.distance.pdist``: the condensed distances between the rows of ``X``
    (pairs ``i < j`` in row-major order, float64).

    >>> pdist(np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    array([5.        , 1.        , 4.24264069])
    """
    if not _dispatch.traced((X, *kwargs.values()), {}):
        return _pdist(X, metric, out=out, **kwargs)
    _no_out(out)
    x = _float(X)
    if np.ndim(x) != 2:
        raise ValueError("A 2-dimensional array must be passed.")
    i, j = np.triu_indices(np.shape(x)[0], 1)
    if callable(metric):
        if len(i) == 0:
            return np.zeros(0)
        return np.stack([metric(x[a], x[b], **kwargs) for a, b in zip(i, j)]).astype(np.float64)
    return _distances(x[i], x[j], _metric_name(metric), x, kwargs)


def squareform(X: Any, force: str = "no", checks: bool = True) -> Any:
    """``scipy.spatial.distance.squareform``: a condensed vector to its symmetric matrix (zero
    diagonal), or such a matrix to its vector (the upper triangle, row by row).

    >>> squareform(np.array([1.0, 2.0, 3.0]))
    array([[0., 1., 2.],
           [1., 0., 3.],
           [2., 3., 0.]])
    """
    if not _dispatch.traced((X,), {}):
        return _squareform(X, force=force, checks=checks)
    force = force.lower()
    ndim = np.ndim(X)
    if force == "tomatrix":
        if ndim != 1:
            raise ValueError("Forcing 'tomatrix' but input X is not a distance vector.")
    elif force == "tovector":
        if ndim != 2:
            raise ValueError("Forcing 'tovector' but input X is not a distance matrix.")
    if ndim == 1:
        k = np.shape(X)[0]
        m = int(np.ceil(np.sqrt(k * 2)))
        if k == 0:
            m = 1
        if m * (m - 1) != k * 2:
            raise ValueError(
                "Incompatible vector size. It must be a binomial coefficient n choose 2 for "
                "some integer n >= 2."
            )
        index = np.zeros((m, m), dtype=np.intp)
        i, j = np.triu_indices(m, 1)
        index[i, j] = index[j, i] = np.arange(1, k + 1)
        return np.concatenate([np.zeros(1, dtype=X.dtype), X])[index]
    if ndim == 2:
        m, n = np.shape(X)
        if m != n:
            raise ValueError("The matrix argument must be square.")
        if checks:
            _sd.is_valid_dm(np.asarray(value(X)), throw=True, name="X")
        return X[np.triu_indices(m, 1)]
    raise ValueError(
        f"The first argument must be one or two dimensional array. A {ndim}-dimensional "
        "array is not permitted"
    )


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.spatial.distance`` (called by ``fusegrad.scipy``)."""
    for name in ("cdist", "pdist", "squareform"):
        _dispatch.patch_attr(module, name, globals()[name])


def __getattr__(name: str) -> Any:
    """Every other ``scipy.spatial.distance`` name (SciPy's own function)."""
    return getattr(_sd, name)


_dispatch.loaded(__name__)

"""Rules for scans, sorts and norm-like reductions: cumsum, cumprod, sort, diff,
scipy.special.logsumexp, linalg.norm. Each forward rule sits below its reverse rule (``cumsum``
and ``diff`` are ``linear``).

| function | pullback |
|---|---|
| ``np.cumsum(a, axis)`` | ``da = flip(cumsum(flip(dy)))`` (a reverse cumulative sum) |
| ``np.cumprod(a, axis)`` | no zeros: ``da = revcumsum(dy * y) / a``; with zeros: exact O(n²) form |
| ``np.maximum.accumulate``, ``minimum`` | ``ā[j] = Σ ȳ[i] / ties(i)`` where a[j] attains y[i] |
| ``np.sort(a, axis)`` | ``da = take_along_axis(dy, argsort(perm))`` (the inverse permutation) |
| ``np.diff(a, n, axis)`` | ``n`` times ``da = concat([0], dy) - concat(dy, [0])`` |
| ``scipy.special.logsumexp(a, axis, b)`` | ``da = dy * b * exp(a - y)``, ``db = dy * exp(a - y)`` |
| ``np.linalg.norm(x, ord, axis)`` | see below |

``np.linalg.norm``: vector 2: ``dy * x / y``; 1: ``dy * sign(x)``; ±inf: ``dy * sign(x)`` split
evenly over the ties of max/min ``|x|``; other p: ``dy * sign(x) |x|^(p-1) / y^(p-1)``; matrix
``'fro'``: ``dy * x / y``; ``'nuc'``: ``dy * U Vᵀ``; matrix 2: ``dy * u₁ v₁ᵀ``.

Subgradient choices at kinks: ``norm`` at ``x = 0`` gives 0 (``ord=2``/``'fro'``), ``sign(0) = 0``
for ``ord=1``. ``sort`` ties: a stable argsort fixes the permutation, so each tied input gets the
cotangent of one output position (the derivative of a sort is a permutation almost everywhere).
Complex ``x``: a norm is real, so its cotangent is ``dy`` times the conjugate of the weights above
(``dy * conj(x) / y``; JAX's convention, the transpose of ``ẏ = Re(Σ conj(w) ẋ)``).
``cumprod`` is exact with zeros in the input: when any input is 0 the pullback uses the
O(n²)-per-lane product form ``da_k = Σ_{j≥k} dy_j Π_{i≤j, i≠k} a_i`` instead of dividing by ``a``.

All rules receive NumPy arrays (``lazy=False``) and use differentiable ``np.*`` calls only;
``logsumexp`` of an unevaluated argument has a lazy case (``_logsumexp_lazy``): kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lazy import LazyArray, replay
from ..lazy.plan import grows, materialize_many, value
from ..lazy.reductions import normalize_axes
from ..tangents import ZeroTangent, unthunk
from .common import (
    add_tangents,
    call,
    eager_frule,
    is_complex,
    is_zero,
    linear,
    no_tangents,
    params,
    project,
    real_for,
    shape_only,
    unbroadcast_to,
)
from .lazy_values import as_cotangent, expand_back
from .registry import is_differentiable, primitive, register_lazy_case, register_rrule


def _revcumsum(g: Any, axis: int) -> Any:
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


# --------------------------------------------------------------------------------------------------
# Scans
# --------------------------------------------------------------------------------------------------


def _cumsum_t(dy, a, *args, **kwargs):
    """flip(cumsum(flip(ȳ, axis), axis), axis); axis=None: of the flattened a."""
    axis = params(args, kwargs, axis=None, dtype=None, out=None)["axis"]
    g = _revcumsum(dy, 0 if axis is None else axis)
    return project(np.reshape(g, np.shape(a)), a)


linear(np.cumsum, _cumsum_t)


@register_rrule(np.cumprod)
def _cumprod(a, *args, **kwargs):
    """np.cumprod: da = revcumsum(dy * y) / a without zeros; with zeros, the exact product form
    da_k = Σ_{j≥k} dy_j Π_{i≤j, i≠k} a_i (O(n²) per lane)."""
    axis = params(args, kwargs, axis=None, dtype=None, out=None)["axis"]
    shape = np.shape(a)
    y = np.cumprod(a, *args, **kwargs)

    def pullback(dy):
        x = np.reshape(a, (-1,)) if axis is None else a
        yy = y
        ax = 0 if axis is None else axis % max(np.ndim(x), 1)
        if not np.any(np.equal(x, 0)):
            g = _revcumsum(dy * yy, ax) / x
        else:
            xm = np.moveaxis(x, ax, -1)
            dym = np.moveaxis(dy, ax, -1)
            n = np.shape(xm)[-1]
            eye = np.eye(n, dtype=bool)
            # m[..., k, i] = a_i with a_k replaced by 1; c[..., k, j] = Π_{i≤j, i≠k} a_i.
            m = np.where(eye, np.ones((), dtype=np.result_type(xm)), np.expand_dims(xm, -2))
            c = np.cumprod(m, axis=-1)
            upper = np.triu(np.ones((n, n), dtype=np.result_type(xm)))
            g = np.sum(upper * c * np.expand_dims(dym, -2), axis=-1)
            g = np.moveaxis(g, -1, ax)
        return (project(np.reshape(g, shape), a), *no_tangents(len(args)))

    return y, pullback


@eager_frule(np.cumprod)
def _cumprod_jvp(tangents, a, *args, **kwargs):
    """np.cumprod: ẏ = y · cumsum(ẋ / x) without zeros; with zeros the exact product form
    ẏ_j = Σ_{k≤j} ẋ_k ∏_{i≤j, i≠k} x_i (O(n²) per lane)."""
    axis = params(args, kwargs, axis=None, dtype=None, out=None)["axis"]
    y = np.cumprod(a, *args, **kwargs)
    t = tangents[0]
    if is_zero(t):
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


@register_rrule(np.diff)
def _diff(a, *args, **kwargs):
    """np.diff (prepend/append are constants): n times da = concat([0], dy) - concat(dy, [0])."""
    p = params(args, kwargs, n=1, axis=-1)
    n, axis = int(p["n"]), p["axis"]
    y = np.diff(a, *args, **kwargs)
    like = shape_only(a)  # project reads a's shape and dtype only
    # Cotangents of prepended/appended constants are dropped: slice them off at the end.
    lo = hi = 0
    if "prepend" in kwargs:
        pre = kwargs["prepend"]
        lo = 1 if np.ndim(pre) == 0 else np.shape(pre)[axis]
    if "append" in kwargs:
        app = kwargs["append"]
        hi = 1 if np.ndim(app) == 0 else np.shape(app)[axis]

    def pullback(dy):
        g = dy
        ax = axis % np.ndim(dy)
        for _ in range(n):
            zshape = list(np.shape(g))
            zshape[ax] = 1
            z = np.zeros(zshape, dtype=np.result_type(g))
            g = np.concatenate([z, g], axis=ax) - np.concatenate([g, z], axis=ax)
        if lo or hi:
            idx = [slice(None)] * np.ndim(g)
            idx[ax] = slice(lo, np.shape(g)[ax] - hi)
            g = g[tuple(idx)]
        return (project(g, like), *no_tangents(len(args)))

    return y, pullback


linear(np.diff, constants=("prepend", "append"))  # the forward rule; added constants: zeros


# --------------------------------------------------------------------------------------------------
# running maximum and minimum (np.maximum.accumulate, np.minimum.accumulate)
# --------------------------------------------------------------------------------------------------


@primitive
def cummax(a: Any, axis: int = 0) -> Any:
    """``np.maximum.accumulate(a, axis)`` as a function (what the tracer records it as).

    >>> cummax(np.array([1.0, 3.0, 2.0, 4.0]))
    array([1., 3., 3., 4.])
    """
    return np.maximum.accumulate(a, axis=axis)


@primitive
def cummin(a: Any, axis: int = 0) -> Any:
    """``np.minimum.accumulate(a, axis)`` as a function.

    >>> cummin(np.array([3.0, 1.0, 2.0]))
    array([3., 1., 1.])
    """
    return np.minimum.accumulate(a, axis=axis)


def _within_runs(v: Any, start: np.ndarray) -> Any:
    """The inclusive running sums of ``v`` along the last axis, restarted at each run's first
    index (``start[i]``: the first index of ``i``'s run)."""
    total = np.cumsum(v, axis=-1)
    return total - np.take_along_axis(total - v, start, axis=-1)


def _runs(a: np.ndarray, y: np.ndarray) -> tuple:
    """For a running extremum ``y`` of ``a`` along the last axis: where ``a`` attains it
    (``hit``), each index's run of equal ``y`` (its first and last index), and how many hits the
    run has up to each index (``count``). ``y[i] = max(a[:i+1])`` is attained exactly at the hits
    of ``i``'s run up to ``i``."""
    n = a.shape[-1]
    index = np.broadcast_to(np.arange(n), a.shape)
    new = np.concatenate([np.ones(a.shape[:-1] + (1,), bool), y[..., 1:] != y[..., :-1]], -1)
    last = np.concatenate([new[..., 1:], np.ones(a.shape[:-1] + (1,), bool)], -1)
    start = np.maximum.accumulate(np.where(new, index, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, index, n), -1), axis=-1), -1)
    hit = a == y
    count = _within_runs(hit.astype(np.int64), start)
    return hit, start, end, count


def _running_extremum_rule(f: Any) -> Any:
    """The reverse rule of ``cummax``/``cummin``: ``y[i]`` is the extremum of ``a[:i+1]``, whose
    derivative is split evenly over its ties (as ``np.max``'s), so ``ā[j] = hit[j] Σ ȳ[i] /
    count[i]`` over the ``i ≥ j`` of ``j``'s run."""

    def rule(a: Any, *args: Any, **kwargs: Any) -> tuple:
        axis = params(args, kwargs, axis=0)["axis"]
        y = f(a, axis)
        ax = int(axis) % max(np.ndim(a), 1)
        hit, start, end, count = _runs(np.moveaxis(a, ax, -1), np.moveaxis(y, ax, -1))
        share = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0)

        def pullback(dy: Any) -> tuple:
            r = np.moveaxis(unthunk(dy), ax, -1) * share
            upto = _within_runs(r, start)  # Σ r over the run up to each index
            whole = np.take_along_axis(upto, end, axis=-1)  # ... up to the run's last index
            g = np.where(hit, whole - upto + r, 0.0)
            return (project(np.moveaxis(g, -1, ax), a), *no_tangents(len(args)))

        return y, pullback

    return rule


def _running_extremum_jvp(f: Any) -> Any:
    """``ẏ[i] = Σ ȧ[j] / count[i]`` over the hits ``j`` of ``i``'s run up to ``i``."""

    def forward(tangents: tuple, a: Any, *args: Any, **kwargs: Any) -> tuple:
        axis = params(args, kwargs, axis=0)["axis"]
        y = f(a, axis)
        t = tangents[0]
        if is_zero(t):
            return y, ZeroTangent()
        ax = int(axis) % max(np.ndim(a), 1)
        hit, start, _, count = _runs(np.moveaxis(a, ax, -1), np.moveaxis(y, ax, -1))
        ta = np.where(hit, np.moveaxis(unthunk(t), ax, -1), 0.0)
        dot = np.where(count > 0, _within_runs(ta, start) / np.maximum(count, 1), 0.0)
        return y, np.moveaxis(dot, -1, ax)

    return forward


for _f in (cummax, cummin):
    register_rrule(_f)(_running_extremum_rule(_f))
    eager_frule(_f)(_running_extremum_jvp(_f))


# --------------------------------------------------------------------------------------------------
# sort
# --------------------------------------------------------------------------------------------------


@register_rrule(np.sort)
def _sort(a, *args, **kwargs):
    """np.sort: y = take_along_axis(a, perm), perm = stable argsort; da = take_along_axis(dy,
    argsort(perm)) (the inverse permutation, a gather)."""
    p = params(args, kwargs, axis=-1, kind=None, order=None, stable=None)
    axis = p["axis"]
    shape = np.shape(a)
    flat = np.reshape(a, (-1,)) if axis is None else a
    ax = -1 if axis is None else axis
    perm = np.argsort(flat, axis=ax, kind="stable")
    inv = np.argsort(perm, axis=ax)
    y = np.take_along_axis(flat, perm, axis=ax)

    def pullback(dy):
        g = np.take_along_axis(dy, inv, axis=ax)
        return (project(np.reshape(g, shape), a), *no_tangents(len(args)))

    return y, pullback


@eager_frule(np.sort)
def _sort_jvp(tangents, a, *args, **kwargs):
    """np.sort: ẏ = take_along_axis(ẋ, perm) (perm = the stable argsort)."""
    axis = params(args, kwargs, axis=-1, kind=None, order=None, stable=None)["axis"]
    flat = np.reshape(a, (-1,)) if axis is None else a
    ax = -1 if axis is None else axis
    perm = np.argsort(flat, axis=ax, kind="stable")
    y = np.take_along_axis(flat, perm, axis=ax)
    t = tangents[0]
    if is_zero(t):
        return y, ZeroTangent()
    t = unthunk(t)
    tf = np.reshape(t, (-1,)) if axis is None else t
    return y, np.take_along_axis(tf, perm, axis=ax)


# --------------------------------------------------------------------------------------------------
# logsumexp and norm
# --------------------------------------------------------------------------------------------------


def _keep(g: Any, axis: Any, ndim: int, keepdims: bool) -> Any:
    """``g`` (a reduction's value or cotangent) with the reduced axes restored as size 1."""
    if keepdims:
        return g
    if axis is None:
        return np.reshape(g, (1,) * ndim)
    # a reshape, not np.expand_dims (which normalises its axes at ~4x the cost)
    axes = {int(x) % ndim for x in (axis if isinstance(axis, tuple | list) else (axis,))}
    rest = iter(np.shape(g))
    return np.reshape(g, tuple(1 if i in axes else next(rest) for i in range(ndim)))


try:  # SciPy is optional.
    import scipy.special as _sp
except ImportError:  # pragma: no cover - depends on the environment
    _sp = None

if _sp is not None:

    @register_rrule(_sp.logsumexp)
    def _logsumexp(a, *args, **kwargs):
        """scipy.special.logsumexp: da = dy * b * exp(a - y), db = dy * exp(a - y) (b=None: 1);
        return_sign=True has no rule."""
        p = params(args, kwargs, axis=None, b=None, keepdims=False, return_sign=False)
        if p["return_sign"]:
            return None
        axis, b, keepdims = p["axis"], p["b"], p["keepdims"]
        y = _logsumexp_value(a, args, kwargs, axis, b, keepdims)
        b_positional = len(args) >= 2

        def pullback(dy):
            ndim = np.ndim(a)
            if b is not None:
                ndim = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
            yk = _keep(y, axis, ndim, keepdims)
            dyk = _keep(dy, axis, ndim, keepdims)
            w = _lse_weights(a, b, yk, axis)
            if b is None:
                return (project(dyk * w, a), *no_tangents(len(args)))
            da = project(unbroadcast_to(dyk * b * w, np.shape(a)), a)
            rest = list(no_tangents(len(args)))
            if b_positional:
                rest[1] = project(unbroadcast_to(dyk * w, np.shape(b)), b)
            return (da, *rest)

        return y, pullback

    @register_lazy_case(_sp.logsumexp, recordable=True)
    def _logsumexp_lazy(a, *args, **kwargs):
        """``logsumexp`` of an unevaluated float ``a`` without weights, in kernels
        (``_logsumexp_fused``): a broadcast blow-up over ``LSE_STORE_BYTES``
        (``-(x[:, None] - y[None, :])**2``) stays lazy, each pass recomputing it; anything else
        is stored first, with the max and the sums (read many times; a short axis's reductions
        would otherwise be unrolled into every reader). None for an array argument (the
        small-array path: SciPy's values bit for bit, by the rule)."""
        p = params(args, kwargs, axis=None, b=None, keepdims=False, return_sign=False)
        if p["return_sign"] or p["b"] is not None or not isinstance(a, LazyArray):
            return None
        if a.dtype not in _LSE_DTYPES or a.size == 0:
            return None
        blow_up = a.nbytes > LSE_STORE_BYTES and value(a) is None and grows(a)
        return _logsumexp_fused(a, p["axis"], p["keepdims"], len(args), store=not blow_up)

    def _logsumexp_fused(a, axis, keepdims, n_options, store=False):
        """``logsumexp`` of a lazy ``a`` as SciPy computes it (the largest terms, ``m`` of them,
        taken out of the sum: ``top + log1p(s / m) + log(m)``), in lazy operations: a max and
        one pass of two sums, then the rest fused into what reads the result. The pullback
        ``ȳ exp(a - top) / (m + s)`` is lazy too (``m + s`` is the sum of ``exp(a - top)``, so
        the weights sum to 1 at any magnitude). Unless ``store``, neither direction stores
        anything of ``a``'s size (a logsumexp over ``x[:, None] - y[None, :]``); with it, ``a``,
        the max, the sums and the cotangent are computed when made (sanctioned: a jit recording
        records their kernels), so that readers read them and a chain of logsumexps (an HMM's
        steps) does not nest into one growing kernel."""
        shape = a.shape
        axes = normalize_axes(axis, len(shape))
        if store:
            _stored(a)
        top = np.max(a, axis=axes, keepdims=True)
        if store:
            _stored(top)
        is_top = np.equal(a, top)
        one = np.ones((), a.dtype)
        m = np.sum(np.where(is_top, one, 0 * one), axis=axes, keepdims=True)
        s = np.sum(np.exp(np.where(is_top, -np.inf * one, a) - top), axis=axes, keepdims=True)
        if store:
            _stored(m, s)
        # (m = 0 when a pass recomputing a blow-up ran on another engine than the max's and
        # rounded its maxima an ulp lower: then s is the whole sum, log(s) the answer)
        out = (
            np.where(
                m > 0, np.log1p(s / np.maximum(m, one)) + np.log(np.maximum(m, one)), np.log(s)
            )
            + top
        )
        y = (
            out
            if keepdims
            else np.reshape(out, tuple(n for i, n in enumerate(shape) if i not in axes))
        )

        def pullback(dy):
            d = expand_back(dy, shape, axes, keepdims, held=False)
            da = d * (np.exp(a - top) / (m + s))
            if store:  # (a chain of them, an HMM's steps, would nest into one growing kernel)
                _stored(da)
            return (as_cotangent(da), *no_tangents(n_options))

        return y, pullback

    def _stored(*nodes):
        """Lazy values computed now, by kernels a jit recording records."""
        with replay.sanctioned(always=True):
            materialize_many([n for n in nodes if value(n) is None])

    def _lse_weights(a, b, yk, axis):
        """``exp(a - y)``, the derivative of ``y = logsumexp(a, b)`` in ``log(b a)``, normalised
        so that ``Σ b w = 1`` exactly: ``y`` is rounded at the scale of ``max(a)``, and
        ``exp(a - y)`` alone was off by that rounding (3e-5 for float32 logits near 1e3;
        ``[1e17, 1e17]`` gave ``[1, 1]``). A slice of only ``-inf`` has no derivative: NaN, as
        JAX's, without the warning of ``-inf - -inf`` (SciPy's call raises none)."""
        with np.errstate(invalid="ignore"):
            w = np.exp(a - yk)
            total = np.sum(w if b is None else b * w, axis=axis, keepdims=True)
            return w / total

    def _logsumexp_value(a, args, kwargs, axis, b, keepdims):
        """``scipy.special.logsumexp(a, *args, **kwargs)``: of a float64 or float32 ndarray
        without weights, by ``_logsumexp_numpy`` when it gives the installed SciPy's results
        bit for bit (``_same_as_scipy``); else SciPy's own call (~10x the cost on small arrays:
        its array-API dispatch)."""
        if b is None and type(a) is np.ndarray and a.dtype in _LSE_DTYPES and a.size:
            if not _LSE_SAME:
                _LSE_SAME.append(_same_as_scipy())
            if _LSE_SAME[0]:
                return _logsumexp_numpy(a, axis, keepdims)
        return _sp.logsumexp(a, *args, **kwargs)

    _LSE_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))
    # A lazy logsumexp argument up to this size is stored; a larger broadcast blow-up is not
    # (``_logsumexp_lazy``)
    LSE_STORE_BYTES = 1 << 20
    _LSE_SAME: list = []  # [_same_as_scipy()] once checked (a race only checks twice)

    def _logsumexp_numpy(a: np.ndarray, axis: Any, keepdims: bool) -> Any:
        """SciPy 1.15+'s logsumexp of a real array without weights, in plain NumPy: the largest
        terms (``m`` of them) taken out of the sum, ``log1p(s / m) + log(m) + max``, and the
        direct ``log(sum(exp(a)))`` where that is not finite (infinite and NaN inputs).

        >>> round(float(_logsumexp_numpy(np.log(np.array([1.0, 3.0])), None, False)), 12)  # log 4
        1.38629436112
        """
        if a.ndim == 0:
            a = a.reshape(1)
        ax = tuple(range(a.ndim)) if axis is None else axis
        # array methods and in-place steps: ~2x faster than the ``np.`` wrappers on the small
        # arrays of an HMM's or a classifier's step, and the same operations in the same order
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            top = a.max(axis=ax, keepdims=True)
            is_top = a == top
            m = is_top.sum(axis=ax, keepdims=True, dtype=a.dtype)
            shifted = np.where(is_top, -np.inf, a)
            shifted -= top
            s = np.exp(shifted, out=shifted).sum(axis=ax, keepdims=True)
            s /= m  # s = 0 only where m >= 1 (m = 0: top is NaN, and so is s)
            out = np.log1p(s, out=s)
            out += np.log(m, out=m)
            out += top
            finite = np.isfinite(out)
            if not finite.all():  # infinite or NaN inputs: SciPy's direct log(sum(exp(a)))
                direct = np.log(np.exp(a).sum(axis=ax, keepdims=True))
                out = np.where(finite, out, direct)
        if not keepdims:
            out = np.squeeze(out, axis=ax)
        return out[()] if out.ndim == 0 else out

    def _same_as_scipy() -> bool:
        """Whether ``_logsumexp_numpy`` reproduces this SciPy's logsumexp on probes (ties,
        infinities, NaN, both dtypes, every axis form)."""
        rng = np.random.default_rng(0)
        probe = rng.normal(0, 30, (5, 7))
        probe[0, :3] = probe[0, 3]  # ties of the maximum
        probe[1, 2], probe[2, 4], probe[3] = np.inf, np.nan, -np.inf
        cases = [(probe, k) for k in (None, 0, 1, -1, (0, 1))] + [
            (probe[4], 0),
            (probe[0, 0], None),
        ]
        with np.errstate(all="ignore"):
            for x, axis in cases:
                for dtype in _LSE_DTYPES:
                    xd = np.asarray(x, dtype)
                    for keep in (False, True):
                        want = _sp.logsumexp(xd, axis=axis, keepdims=keep)
                        got = _logsumexp_numpy(xd, axis, keep)
                        if type(got) is not type(want) or not np.array_equal(got, want, True):
                            return False
        return True

    @eager_frule(_sp.logsumexp)
    def _logsumexp_jvp(tangents, a, *args, **kwargs):
        """scipy.special.logsumexp: ẏ = sum(exp(a - y) (b ȧ + ḃ)) (b=None: 1)."""
        p = params(args, kwargs, axis=None, b=None, keepdims=False, return_sign=False)
        if p["return_sign"]:
            return None
        axis, b, keepdims = p["axis"], p["b"], p["keepdims"]
        y = call(_sp.logsumexp, a, *args, **kwargs)
        ta = tangents[0]
        tb = tangents[2] if len(args) >= 2 else ZeroTangent()
        if is_zero(ta) and is_zero(tb):
            return y, ZeroTangent()
        ndim = np.ndim(a) if b is None else len(np.broadcast_shapes(np.shape(a), np.shape(b)))
        w = _lse_weights(a, b, _keep(y, axis, ndim, keepdims), axis)
        inner: Any = ZeroTangent()
        if not is_zero(ta):
            inner = unthunk(ta) if b is None else b * unthunk(ta)
        if not is_zero(tb):
            inner = add_tangents(inner, unthunk(tb))
        return y, np.sum(w * inner, axis=axis, keepdims=keepdims)


def _unit(x: Any) -> Any:
    """``sign(x)``; for complex ``x`` written as ``x / |x|`` (0 at 0), whose derivative is not
    zero (``np.sign``'s rule is piecewise constant), so that second derivatives are right."""
    if not np.iscomplexobj(x):
        return np.sign(x)
    ax = np.abs(x)
    return x / np.where(ax == 0, np.ones((), dtype=np.result_type(ax)), ax)


def _dnorm_dord_weights(x, y, p, axis, keepdims, matrix):
    """∂ norm / ∂ ord, of the norm's shape, for a vector p-norm with a float ``ord``:
    y (Σ|x|^p ln|x| / (p Σ|x|^p) - ln(Σ|x|^p) / p²); None (zero) for ±inf, 0 and matrices."""
    if matrix or not np.isfinite(p) or p == 0:
        return None
    ax = np.abs(x)
    s = np.sum(ax**p, axis=axis, keepdims=keepdims)
    lg = np.log(np.where(ax == 0, 1.0, ax))
    t = np.sum(ax**p * lg, axis=axis, keepdims=keepdims)
    return y * (t / (p * s) - np.log(s) / p**2)


def _dnorm_dord(x, y, dy, p, axis, keepdims, matrix):
    """The cotangent of a float ``ord`` (a positional argument): Σ ȳ ∂y/∂ord."""
    w = _dnorm_dord_weights(x, y, p, axis, keepdims, matrix)
    return ZeroTangent() if w is None else np.sum(dy * w)


@register_rrule(np.linalg.norm)
def _norm(x, *args, **kwargs):
    """np.linalg.norm: vector ord None/2/1/±inf/p and matrix 'fro'/'nuc'/2 (see the module
    table); other orders have no rule."""
    p = params(args, kwargs, ord=None, axis=None, keepdims=False)
    ord_, axis, keepdims = p["ord"], p["axis"], p["keepdims"]
    ndim = np.ndim(x)
    if axis is None:
        matrix = ndim == 2 and ord_ is not None
        if ord_ is not None and ndim not in (1, 2):
            return None
    else:
        matrix = np.ndim(axis) > 0 and len(axis) == 2
    if matrix and ord_ not in (None, "fro", "nuc", 2):
        return None
    if not matrix and ord_ in ("fro", "nuc"):
        return None
    y = np.linalg.norm(x, *args, **kwargs)
    red_axis = axis if axis is not None else (tuple(range(ndim)) if ndim else None)
    # A norm is real: for a complex x the cotangent is ȳ times the conjugate of the real
    # formula's weights (ẏ = Re(Σ conj(w) ẋ) with w = x / y for the 2-norm, JAX's convention).
    xc = np.conjugate(x) if np.iscomplexobj(x) else x

    def pullback(dy):
        yk = _keep(y, red_axis, ndim, keepdims)
        dyk = _keep(dy, red_axis, ndim, keepdims)
        if ord_ in (None, "fro") or (ord_ == 2 and not matrix):
            safe = np.where(yk == 0, np.ones((), dtype=np.result_type(yk)), yk)
            g = dyk * np.where(yk == 0, np.zeros((), dtype=np.result_type(yk)), xc / safe)
        elif matrix:  # 'nuc' or 2, via the SVD over the two axes moved last
            ax = (0, 1) if axis is None else tuple(int(i) % ndim for i in axis)
            xm = np.moveaxis(x, ax, (-2, -1))
            u, _, vt = np.linalg.svd(xm, full_matrices=False)
            if ord_ == "nuc":
                gm = np.matmul(u, vt)
            else:
                gm = np.expand_dims(u[..., :, 0], -1) * np.expand_dims(vt[..., 0, :], -2)
            gm = np.conjugate(gm) if xc is not x else gm
            dym = np.moveaxis(dyk, ax, (-2, -1))
            g = np.moveaxis(dym * gm, (-2, -1), ax)
        elif ord_ == 1:
            g = dyk * _unit(xc)
        elif ord_ in (np.inf, -np.inf):
            ax = None if axis is None else axis
            ax_abs = np.abs(x)
            hit = np.equal(ax_abs, yk)
            count = np.sum(hit, axis=ax, keepdims=True)
            g = dyk * _unit(xc) * hit / count
        elif ord_ == 0:
            return (ZeroTangent(), *no_tangents(len(args)))
        else:  # (ord itself may be traced, under a derivative in it of higher order)
            pord = ord_ if is_differentiable(ord_) else float(ord_)
            ax_abs = np.abs(x)
            g = dyk * _unit(xc) * ax_abs ** (pord - 1) / yk ** (pord - 1)
        rest = list(no_tangents(len(args)))
        if args and is_differentiable(ord_) and not isinstance(ord_, str | int):
            rest[0] = _dnorm_dord(x, y, dy, ord_, axis, keepdims, matrix)
        return (project(g, x), *rest)

    return y, pullback


@eager_frule(np.linalg.norm)
def _norm_jvp(tangents, x, *args, **kwargs):
    """np.linalg.norm: ẏ = sum(G ∘ ẋ) over the normed axes, G the reverse rule's gradient
    weights (``x / y`` for 2-norms and 'fro'), plus ∂y/∂ord · ȯrd for a positional float
    ``ord`` with a tangent."""
    p = params(args, kwargs, ord=None, axis=None, keepdims=False)
    ord_, axis, keepdims = p["ord"], p["axis"], p["keepdims"]
    t_ord = tangents[1] if len(tangents) > 1 and args else None
    if t_ord is not None and not is_zero(t_ord) and not isinstance(ord_, str | int | None):
        y, dot_x = _norm_jvp((tangents[0], *(ZeroTangent() for _ in args)), x, *args, **kwargs)
        ndim = np.ndim(x)
        matrix = (axis is None and ndim == 2 and ord_ is not None) or (
            axis is not None and np.ndim(axis) > 0
        )
        w = _dnorm_dord_weights(x, y, ord_, axis, keepdims, matrix)
        if w is None:
            return y, dot_x
        dot_ord = w * unthunk(t_ord)
        return y, dot_ord if is_zero(dot_x) else dot_x + dot_ord
    t = tangents[0]
    if is_zero(t):
        return np.linalg.norm(x, *args, **kwargs), ZeroTangent()
    t = unthunk(t)
    ndim = np.ndim(x)
    red = tuple(range(ndim)) if axis is None else axis
    res = _norm(x, *args, **kwargs)
    if res is None:
        return None
    y, pullback = res
    matrix = (axis is None and ndim == 2) or (axis is not None and np.ndim(axis) > 0)
    if ord_ in (None, "fro") or (ord_ == 2 and not matrix):
        safe = np.where(np.equal(y, 0), 1.0, y)  # at y = 0, x = 0 and so is the sum
        xc = np.conjugate(x) if is_complex(x) else x
        return y, real_for(np.sum(xc * t, axis=red, keepdims=keepdims), y) / safe
    g = pullback(np.ones(np.shape(y)))[0]  # the cotangent weights w: ẏ = Re(Σ w ẋ)
    if is_zero(g):  # ord=0 counts nonzeros: piecewise constant
        return y, ZeroTangent()
    return y, real_for(np.sum(unthunk(g) * t, axis=red, keepdims=keepdims), y)

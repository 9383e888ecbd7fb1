"""``scipy.special`` for traced values: logsumexp, softmax, log_softmax, polygamma, zeta, comb,
factorial.

SciPy's ufuncs (``gammaln``, ``digamma``, ``erf``, ``jv``, ...) need nothing here: NumPy's
``__array_ufunc__`` brings them to their rules (``fusegrad.rules.special``), and this module
gives them under their SciPy names too (any other name is looked up in ``scipy.special``). The
functions below are Python functions in SciPy (they call ``np.asarray``); these versions use
operations that have rules, so they trace, fuse and have reverse and forward derivatives of any
order. After ``import fusegrad`` the plain ``scipy.special.logsumexp`` etc. call them on traced
values (and SciPy's own code on anything else).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.special as fsp
    >>> fg.grad(lambda x: fsp.logsumexp(x))(np.zeros(2))
    array([0.5, 0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special as _sp
from scipy.special import _ufuncs

from ..lazy import LazyArray
from ..numpy import stop_gradient
from ..rules import registry
from ..rules.special import NoDerivativeError
from . import _dispatch

_orig_logsumexp = _dispatch.original(_sp.logsumexp)
_orig_polygamma = _dispatch.original(_sp.polygamma)
_orig_zeta = _dispatch.original(_sp.zeta)
_orig_comb = _dispatch.original(_sp.comb)
_orig_factorial = _dispatch.original(_sp.factorial)


@_dispatch.lazy_mirror
def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:  # fmt: skip
    """``scipy.special.logsumexp``: ``log(sum(b * exp(a)))`` along ``axis``, stably.

    >>> round(float(logsumexp(np.log([1.0, 3.0]))), 10)  # log 4
    1.3862943611
    """
    if not _dispatch.traced((a, b), {}):
        if isinstance(a, LazyArray) and b is None and not return_sign:
            # an unevaluated value (plain lazy code, ``fg.jit(f)``): in kernels, as under grad;
            # SciPy's code would convert it, and ``jit`` would not replay the function
            case = registry.LAZY_CASES[_sp.logsumexp](a, axis, keepdims=keepdims)
            if case is not None:
                return case[0]
        return _orig_logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
    if not return_sign:
        args = (a, axis) if b is None else (a, axis, b)
        return registry.dispatch(_orig_logsumexp, args, {"keepdims": keepdims})
    m = stop_gradient(np.max(a, axis=axis, keepdims=True))
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(a - m) if b is None else b * np.exp(a - m)
    s = np.sum(e, axis=axis, keepdims=True)
    out = np.log(np.abs(s)) + m
    sign = np.sign(stop_gradient(s))
    if not keepdims:
        out = np.squeeze(out, axis=axis)
        sign = np.squeeze(sign, axis=axis)
    return out, sign


@_dispatch.lazy_mirror
def softmax(x: Any, axis: Any = None) -> Any:
    """``scipy.special.softmax``: ``exp(x) / sum(exp(x))`` along ``axis`` (all axes for None).

    >>> softmax(np.zeros(2))
    array([0.5, 0.5])
    """
    if not (_dispatch.traced((x,), {}) or isinstance(x, LazyArray)):
        return _dispatch.original(_sp.softmax)(x, axis=axis)
    m = stop_gradient(np.max(x, axis=axis, keepdims=True))
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    return e / np.sum(e, axis=axis, keepdims=True)


@_dispatch.lazy_mirror
def log_softmax(x: Any, axis: Any = None) -> Any:
    """``scipy.special.log_softmax``: ``(x - m) - log(sum(exp(x - m)))`` with ``m`` the largest
    finite ``x`` along ``axis``, as SciPy computes it (``x - logsumexp(x)`` carries
    ``logsumexp``'s rounding at the scale of ``max(x)`` into every entry).

    >>> np.exp(log_softmax(np.zeros(2)))
    array([0.5, 0.5])
    """
    if not (_dispatch.traced((x,), {}) or isinstance(x, LazyArray)):
        return _dispatch.original(_sp.log_softmax)(x, axis=axis)
    m = stop_gradient(np.max(x, axis=axis, keepdims=True))
    shifted = x - np.where(np.isfinite(m), m, 0.0)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def polygamma(n: Any, x: Any) -> Any:
    """``scipy.special.polygamma``: ``ψ⁽ⁿ⁾(x) = (-1)ⁿ⁺¹ n! ζ(n+1, x)`` (``ψ(x)`` for n = 0);
    differentiable in ``x``, the order ``n`` is an integer.

    >>> round(float(polygamma(1, 1.0)), 12)  # π²/6
    1.644934066848
    """
    if not _dispatch.traced((n, x), {}):
        return _orig_polygamma(n, x)
    if _dispatch.traced((n,), {}):  # (its gradient was silently 0)
        raise NoDerivativeError(
            "fusegrad has no derivative of scipy.special.polygamma in its order n (an integer): "
            "pass n as a constant (fusegrad.numpy.stop_gradient(n))"
        )
    n = np.asarray(n)
    fac = (-1.0) ** (n + 1) * _sp.gamma(n + 1.0)
    # each branch gets a safe x where it is not used: ζ(n + 1, x) at n = 0 would be ζ(1, x) = inf,
    # and even ζ(2, x) has a slope -2ζ(3, x) that overflows for x < 1e-103; either made the
    # unused branch's 0 cotangent NaN (0 · inf)
    zero = np.equal(n, 0)
    s = np.where(zero, 2.0, n + 1.0)
    return np.where(
        zero, _sp.digamma(np.where(zero, x, 1.0)), fac * _ufuncs._zeta(s, np.where(zero, 1.0, x))
    )


def zeta(x: Any, q: Any = None, out: Any = None) -> Any:
    """``scipy.special.zeta``: the Hurwitz zeta function ``ζ(x, q)``, differentiable in ``q``
    (the Riemann zeta ``ζ(x)`` when ``q`` is None has no derivative rule).

    >>> round(float(zeta(2.0, 1.0)), 12)  # π²/6
    1.644934066848
    """
    if out is not None or not _dispatch.traced((x, q), {}):
        return _orig_zeta(x, q, out)
    if q is None:  # (NumPy's protocols would name SciPy's private _riemann_zeta)
        raise NoDerivativeError(
            "fusegrad has no derivative of the Riemann zeta function scipy.special.zeta(x) in x: "
            "pass x as a constant (fusegrad.numpy.stop_gradient(x)), or register a rule with "
            "fusegrad.register_rrule"
        )
    return _ufuncs._zeta(x, q)


def _exact_refused(name: str) -> NoDerivativeError:
    return NoDerivativeError(
        f"scipy.special.{name}(..., exact=True) computes with Python integers, so it has no "
        f"derivative: call it with exact=False on traced values (the float value, differentiable "
        f"through gamma/binom), or pass the argument as a constant "
        f"(fusegrad.numpy.stop_gradient)"
    )


def comb(N: Any, k: Any, *, exact: bool = False, repetition: bool = False) -> Any:
    """``scipy.special.comb`` with ``exact=False``: ``binom(N, k)`` where ``0 <= k <= N`` (0
    elsewhere), ``binom(N + k - 1, k)`` with ``repetition`` (1 where ``k == 0 <= N``);
    differentiable in ``N`` and ``k`` through ``binom``'s rule.

    >>> float(comb(5.0, 2.0))
    10.0
    """
    if not _dispatch.traced((N, k), {}):
        return _orig_comb(N, k, exact=exact, repetition=repetition)
    if exact:
        raise _exact_refused("comb")
    if repetition:
        one = np.logical_and(np.equal(k, 0), np.greater_equal(N, 0))
        return np.where(one, 1.0, _sp.binom(N + k - 1, k))
    ok = np.logical_and(
        np.less_equal(k, N), np.logical_and(np.greater_equal(N, 0), np.greater_equal(k, 0))
    )
    return np.where(ok, _sp.binom(N, k), 0.0)


def factorial(n: Any, exact: bool = False, extend: str = "zero") -> Any:
    """``scipy.special.factorial`` with ``exact=False``: ``gamma(n + 1)``, 0 for ``n < 0`` (with
    ``extend='zero'``, SciPy's default), nan at ``n = -1`` with ``extend='complex'``; float64
    as SciPy's; differentiable (``Γ(n+1) ψ(n+1)``).

    >>> float(factorial(3.0))
    6.0
    """
    if not _dispatch.traced((n,), {}):
        return _orig_factorial(n, exact=exact, extend=extend)
    if exact:
        raise _exact_refused("factorial")
    if extend not in ("zero", "complex"):
        raise ValueError(
            f"argument `extend` must be either 'zero' or 'complex', received: {extend}"
        )
    if np.iscomplexobj(n) and extend != "complex":
        raise ValueError("In order to use non-integer arguments, you must opt into this by "
                         "passing `extend='complex'`.")  # fmt: skip
    if extend == "complex":
        return np.where(np.equal(n, -1), np.nan, _sp.gamma(np.where(np.equal(n, -1), 0.0, n) + 1))
    keep = np.greater_equal(n, 0)
    out = np.where(keep, _sp.gamma(np.where(keep, n, 0.0) + 1), 0.0)
    return np.where(np.isnan(n), np.nan, out).astype(np.float64)  # (SciPy's zeros: float64)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.special`` (called by ``fusegrad.scipy``)."""
    for name in ("logsumexp", "softmax", "log_softmax", "polygamma", "zeta", "comb", "factorial"):
        _dispatch.patch_attr(module, name, globals()[name])


def __getattr__(name: str) -> Any:
    """Every other ``scipy.special`` name (the ufuncs come through NumPy's protocols)."""
    return getattr(_sp, name)


_dispatch.loaded(__name__)

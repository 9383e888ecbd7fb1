"""``scipy.stats`` distributions for traced values, written with NumPy and scipy.special ops.

Each distribution has SciPy's name and methods (``logpdf``/``pdf``/``logcdf``/``cdf``/``sf``/
``logsf`` for continuous ones, and ``ppf``/``isf`` (SciPy's inverses, differentiated implicitly
where there is no closed form: ``d ppf / dq = 1 / pdf(ppf(q))``);
``logpmf``/``pmf``/``logcdf``/``cdf``/``sf``/``logsf`` for the discrete ``poisson``, ``binom``,
``bernoulli``, ``geom`` and ``nbinom``), takes its shape parameters, ``loc`` and ``scale``
positionally or by keyword exactly as SciPy does (SciPy's own argument parser is used), and can
be frozen
(``norm(m, s).logpdf(x)``). Being NumPy code, every method traces and fuses, and has reverse and
forward derivatives of any order in ``x`` and the parameters (the shape of ``t``/``beta``/
``binom``'s ``cdf`` and ``ppf`` go through ``betainc`` and its inverses, whose derivative is in
``x`` only; ``gamma``'s, ``chi2``'s, ``invgamma``'s and ``poisson``'s through ``gammainc`` and
its inverses, of first order in the shape).

Outside the support the log-density is ``-inf`` (the density 0), as SciPy. Where SciPy gives
``nan`` (invalid parameters: ``scale <= 0``, a shape outside its range, as SciPy's
``_argcheck``; or ``x`` itself ``nan``) the value is ``nan`` too (so is the gradient, unless the
invalid value sits in an unselected branch, where it is 0 as in JAX). The unselected branch of
each ``where`` sees a safe value, so a gradient there is 0, never ``nan``. After
``import fusegrad`` the plain SciPy methods (``scipy.stats.norm.logpdf``) call these on traced
values.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.stats as fst
    >>> float(fst.norm.logpdf(0.0))  # -log √(2π)
    -0.9189385332046727
    >>> float(fg.grad(lambda s: fst.norm.logpdf(1.0, 0.0, s))(1.0))  # (x² - s²) / s³
    0.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as sp
import scipy.stats as _st
from scipy.stats import _multivariate as _mv

from ..numpy import stop_gradient
from . import _dispatch

# scipy.stats.beta.ppf's own ufunc (Boost's), where this SciPy has it: the same numbers as SciPy
_beta_ppf = getattr(sp._ufuncs, "_beta_ppf", None) or (lambda q, a, b: sp.betaincinv(a, b, q))

LOG_SQRT_2PI = float(0.5 * np.log(2 * np.pi))
LOG2 = float(np.log(2.0))
LOGPI = float(np.log(np.pi))
SQRT2 = float(np.sqrt(2.0))


def _with_quantiles() -> list[str]:
    """The names of the distributions whose ``ppf``/``isf`` are written here."""
    return sorted(
        {d.name for d in globals().values() if isinstance(d, rv_continuous) and d._ppf is not None}
    )


def _safe(cond: Any, x: Any, fill: float) -> Any:
    """``x`` where ``cond``, else ``fill``: what an unselected ``where`` branch computes on."""
    return np.where(cond, x, fill)


def _nan_unless(valid: Any, out: Any) -> Any:
    """``out`` where ``valid``, else ``nan`` (a plain True costs nothing)."""
    if isinstance(valid, (bool, np.bool_)) and valid:
        return out
    return out * np.where(valid, 1.0, np.nan)


def _log(x: Any) -> Any:
    with np.errstate(divide="ignore"):
        return np.log(x)


class _Frozen:
    """A distribution with its parameters fixed: ``norm(m, s).logpdf(x)``."""

    def __init__(self, dist: Any, args: tuple, kwds: dict) -> None:
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, method: str) -> Any:
        fn = getattr(self.dist, method)
        # logpdf(x) and entropy() alike: the frozen parameters after the call's own arguments
        return lambda *a, **k: fn(*a, *self.args, **{**self.kwds, **k})


# --------------------------------------------------------------------------------------------------
# Continuous: x is standardised, z = (x - loc) / scale; logpdf = _logpdf(z) - log(scale)
# --------------------------------------------------------------------------------------------------


class rv_continuous:  # noqa: N801  (SciPy's name)
    """A continuous distribution: subclasses give ``_logpdf``, ``_cdf``, ``_sf`` (of z, shapes)
    and the support; ``_logcdf``/``_logsf`` default to the logs of those."""

    name = ""
    shapes: tuple[str, ...] = ()
    lo, hi = -np.inf, np.inf

    def _parse(self, args: tuple, kwds: dict) -> tuple:
        """``(shapes, loc, scale)`` from SciPy's positional/keyword forms."""
        return getattr(_st, self.name)._parse_args(*args, **kwds)

    def _z(self, x: Any, args: tuple, kwds: dict) -> tuple:
        shapes, loc, scale = self._parse(args, kwds)
        z = (_as_value(x) - loc) / scale  # (a list, as SciPy takes it)
        return z, shapes, scale, self._inside(z, *shapes)

    def _argcheck(self, *shapes: Any) -> Any:
        """Where the shape parameters are valid (SciPy's default: every one positive)."""
        ok: Any = True
        for s in shapes:
            ok = np.logical_and(ok, np.greater(s, 0))
        return ok

    def _valid(self, z: Any, shapes: tuple, scale: Any) -> Any:
        """Where SciPy computes a value rather than ``nan``."""
        ok = np.logical_and(self._argcheck(*shapes), np.greater(scale, 0))
        if isinstance(z, (float, int)) and z == z:
            return ok
        return np.logical_and(ok, np.logical_not(np.isnan(z)))

    # the support excludes its ends (SciPy's _open_support_mask: lognorm's 0, and +inf, where
    # rayleigh's log(z) - z²/2 would be inf - inf)
    open_lo = False

    def _inside(self, z: Any, *shapes: Any) -> Any:
        if self.open_lo:
            return np.logical_and(np.greater(z, self.lo), np.less(z, self.hi))
        return np.logical_and(np.greater_equal(z, self.lo), np.less_equal(z, self.hi))

    def _mid(self, *shapes: Any) -> float:
        """A point inside the support, the safe value of an unselected branch."""
        lo, hi = float(self.lo), float(self.hi)
        if np.isfinite(lo) and np.isfinite(hi):
            return 0.5 * (lo + hi)
        return lo + 1.0 if np.isfinite(lo) else (hi - 1.0 if np.isfinite(hi) else 0.0)

    def __call__(self, *args: Any, **kwds: Any) -> _Frozen:
        return _Frozen(self, args, kwds)

    def logpdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the density at ``x``."""
        z, shapes, scale, ok = self._z(x, args, kwds)
        zs = _safe(ok, z, self._mid(*shapes))
        out = np.where(ok, self._logpdf(zs, *shapes), -np.inf) - _log(scale)
        return _nan_unless(self._valid(z, shapes, scale), out)

    def pdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """The density at ``x``."""
        return np.exp(self.logpdf(x, *args, **kwds))

    def _edge(self, z: Any, ok: Any, inside: Any, below: float, above: float) -> Any:
        under = np.less_equal(z, self.lo) if self.open_lo else np.less(z, self.lo)
        return np.where(ok, inside, np.where(under, below, above))

    def cdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """The cumulative distribution function at ``x``."""
        z, shapes, scale, ok = self._z(x, args, kwds)
        out = self._edge(z, ok, self._cdf(_safe(ok, z, self._mid(*shapes)), *shapes), 0.0, 1.0)
        return _nan_unless(self._valid(z, shapes, scale), out)

    def sf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """The survival function ``1 - cdf`` at ``x``."""
        z, shapes, scale, ok = self._z(x, args, kwds)
        out = self._edge(z, ok, self._sf(_safe(ok, z, self._mid(*shapes)), *shapes), 1.0, 0.0)
        return _nan_unless(self._valid(z, shapes, scale), out)

    def logcdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the cdf at ``x``."""
        z, shapes, scale, ok = self._z(x, args, kwds)
        inner = self._logcdf(_safe(ok, z, self._mid(*shapes)), *shapes)
        return _nan_unless(self._valid(z, shapes, scale), self._edge(z, ok, inner, -np.inf, 0.0))

    def ppf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """The quantile function (inverse of ``cdf``) at ``q``: the support's ends at 0 and 1,
        ``nan`` outside [0, 1]."""
        return self._quantile(q, args, kwds, self._ppf)

    def isf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """The inverse survival function at ``q``: ``ppf(1 - q)``."""
        inverse = None if self._ppf is None else self._isf
        return self._quantile(q, args, kwds, inverse, ends=(self.hi, self.lo))

    def _quantile(self, q: Any, args: tuple, kwds: dict, inverse: Any, ends: tuple = ()) -> Any:
        if inverse is None:
            raise TypeError(
                f"scipy.stats.{self.name}: fusegrad.scipy.stats has no differentiable quantile "
                "function for it (ppf/isf are written for: " + ", ".join(_with_quantiles()) + ")"
            )
        shapes, loc, scale = self._parse(args, kwds)
        q = _as_value(q)
        at0, at1 = ends or (self.lo, self.hi)
        inside = np.logical_and(np.greater(q, 0), np.less(q, 1))
        edge = np.where(np.equal(q, 0), at0, np.where(np.equal(q, 1), at1, np.nan))
        x = np.where(inside, inverse(_safe(inside, q, 0.5), *shapes), edge)
        return _nan_unless(self._valid(q, shapes, scale), loc + scale * x)

    _ppf: Any = None  # the standard quantile function of (q, *shapes), where it is written

    # the standard distribution's entropy, mean and variance, of the shapes, where closed forms
    _entropy: Any = None
    _mean: Any = None
    _var: Any = None

    def entropy(self, *args: Any, **kwds: Any) -> Any:
        """The differential entropy (of the standard one, plus ``log(scale)``)."""
        shapes, _, scale = self._parse(args, kwds)
        h = self._closed("entropy", self._entropy)(*shapes)
        return _nan_unless(self._valid(0.0, shapes, scale), h + _log(scale))

    def mean(self, *args: Any, **kwds: Any) -> Any:
        """The mean: ``loc + scale · mean`` of the standard one."""
        shapes, loc, scale = self._parse(args, kwds)
        m = self._closed("mean", self._mean)(*shapes)
        return _nan_unless(self._valid(0.0, shapes, scale), loc + scale * m)

    def var(self, *args: Any, **kwds: Any) -> Any:
        """The variance: ``scale² · var`` of the standard one."""
        shapes, _, scale = self._parse(args, kwds)
        v = self._closed("var", self._var)(*shapes)
        return _nan_unless(self._valid(0.0, shapes, scale), scale * scale * v)

    def std(self, *args: Any, **kwds: Any) -> Any:
        """The standard deviation."""
        return np.sqrt(self.var(*args, **kwds))

    def median(self, *args: Any, **kwds: Any) -> Any:
        """The median, ``ppf(0.5)``."""
        return self.ppf(0.5, *args, **kwds)

    def _closed(self, what: str, fn: Any) -> Any:
        if fn is None:
            raise TypeError(
                f"scipy.stats.{self.name}.{what}: fusegrad.scipy.stats has no differentiable "
                f"{what} for it (its closed form is not written here): write it with NumPy and "
                "scipy.special operations"
            )
        return fn

    def _isf(self, q: Any, *shapes: Any) -> Any:
        return self._ppf(1 - q, *shapes)

    def logsf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the survival function at ``x``."""
        z, shapes, scale, ok = self._z(x, args, kwds)
        inner = self._logsf(_safe(ok, z, self._mid(*shapes)), *shapes)
        return _nan_unless(self._valid(z, shapes, scale), self._edge(z, ok, inner, 0.0, -np.inf))

    # Each distribution defines these on the standardised variable z (SciPy's own split).
    def _logpdf(self, z: Any, *shapes: Any) -> Any:
        raise NotImplementedError(f"{self.name} has no _logpdf")

    def _cdf(self, z: Any, *shapes: Any) -> Any:
        raise NotImplementedError(f"{self.name} has no _cdf")

    def _sf(self, z: Any, *shapes: Any) -> Any:
        raise NotImplementedError(f"{self.name} has no _sf")

    def _logcdf(self, z: Any, *shapes: Any) -> Any:
        return _log(self._cdf(z, *shapes))

    def _logsf(self, z: Any, *shapes: Any) -> Any:
        return _log(self._sf(z, *shapes))


class norm_gen(rv_continuous):  # noqa: N801
    """The normal distribution.

    >>> float(norm.cdf(0.0, 0.0, 2.0))
    0.5
    """

    name = "norm"

    def _logpdf(self, z):
        return -0.5 * z * z - LOG_SQRT_2PI

    def _cdf(self, z):
        return sp.ndtr(z)

    def _sf(self, z):
        return sp.ndtr(-z)

    def _logcdf(self, z):
        return sp.log_ndtr(z)

    def _logsf(self, z):
        return sp.log_ndtr(-z)

    def _ppf(self, q):
        return sp.ndtri(q)

    def _isf(self, q):
        return -sp.ndtri(q)


class t_gen(rv_continuous):  # noqa: N801
    """Student's t with ``df`` degrees of freedom.

    >>> float(t.cdf(0.0, 3.0))
    0.5
    """

    name = "t"

    def _logpdf(self, z, df):
        return (
            sp.gammaln((df + 1) / 2)
            - sp.gammaln(df / 2)
            - 0.5 * (np.log(df) + LOGPI)
            - (df + 1) / 2 * np.log1p(z * z / df)
        )

    def _cdf(self, z, df):
        tail = 0.5 * sp.betainc(df / 2, 0.5, df / (df + z * z))
        return np.where(np.less(z, 0), tail, 1 - tail)

    def _sf(self, z, df):
        return self._cdf(-z, df)

    def _ppf(self, q, df):
        return sp.stdtrit(df, q)

    def _isf(self, q, df):
        return -sp.stdtrit(df, q)


class gamma_gen(rv_continuous):  # noqa: N801
    """The gamma distribution with shape ``a``.

    >>> float(gamma.logpdf(1.0, 1.0))  # exp(-1)
    -1.0
    """

    name = "gamma"
    lo = 0.0

    def _logpdf(self, z, a):
        return sp.xlogy(a - 1, z) - z - sp.gammaln(a)

    def _cdf(self, z, a):
        return sp.gammainc(a, z)

    def _sf(self, z, a):
        return sp.gammaincc(a, z)

    def _ppf(self, q, a):
        return sp.gammaincinv(a, q)

    def _isf(self, q, a):
        return sp.gammainccinv(a, q)


class beta_gen(rv_continuous):  # noqa: N801
    """The beta distribution with shapes ``a``, ``b`` on [0, 1].

    >>> float(beta.pdf(0.5, 1.0, 1.0))
    1.0
    """

    name = "beta"
    lo, hi = 0.0, 1.0

    def _logpdf(self, z, a, b):
        return sp.xlogy(a - 1, z) + sp.xlog1py(b - 1, -z) - sp.betaln(a, b)

    def _cdf(self, z, a, b):
        return sp.betainc(a, b, z)

    def _sf(self, z, a, b):
        return sp.betainc(b, a, 1 - z)

    def _ppf(self, q, a, b):
        return _beta_ppf(q, a, b)

    def _isf(self, q, a, b):
        return sp.betainccinv(a, b, q)


class expon_gen(rv_continuous):  # noqa: N801
    """The exponential distribution.

    >>> float(expon.logpdf(2.0))
    -2.0
    """

    name = "expon"
    lo = 0.0

    def _logpdf(self, z):
        return -z

    def _cdf(self, z):
        return -np.expm1(-z)

    def _sf(self, z):
        return np.exp(-z)

    def _logsf(self, z):
        return -z

    def _ppf(self, q):
        return -np.log1p(-q)

    def _isf(self, q):
        return -np.log(q)


class laplace_gen(rv_continuous):  # noqa: N801
    """The Laplace (double exponential) distribution.

    >>> float(laplace.cdf(0.0))
    0.5
    """

    name = "laplace"

    def _logpdf(self, z):
        return -np.abs(z) - LOG2

    def _cdf(self, z):
        neg = np.less(z, 0)
        e = np.exp(-np.abs(z))
        return np.where(neg, 0.5 * e, 1 - 0.5 * e)

    def _sf(self, z):
        return self._cdf(-z)

    def _logcdf(self, z):
        neg = np.less(z, 0)
        return np.where(neg, -np.abs(z) - LOG2, np.log1p(-0.5 * np.exp(-np.abs(z))))

    def _logsf(self, z):
        return self._logcdf(-z)

    def _ppf(self, q):
        return np.where(np.less(q, 0.5), np.log(2 * q), -np.log(2 - 2 * q))

    def _isf(self, q):
        return -self._ppf(q)


class cauchy_gen(rv_continuous):  # noqa: N801
    """The Cauchy distribution.

    >>> float(cauchy.cdf(1.0))
    0.75
    """

    name = "cauchy"

    def _logpdf(self, z):
        return -LOGPI - np.log1p(z * z)

    def _cdf(self, z):
        return 0.5 + np.arctan(z) / np.pi

    def _sf(self, z):
        return 0.5 - np.arctan(z) / np.pi

    def _ppf(self, q):
        # tan(π(q - ½)) loses q near 0 and 1 (1 - q rounds): -1/tan(πq) below ½, 1/tan(π(1-q))
        low = np.less(q, 0.5)
        return np.where(low, -1 / np.tan(np.pi * np.where(low, q, 0.25)),
                        1 / np.tan(np.pi * np.where(low, 0.75, 1 - q)))  # fmt: skip

    def _isf(self, q):
        return -self._ppf(q)


class logistic_gen(rv_continuous):  # noqa: N801
    """The logistic distribution.

    >>> float(logistic.cdf(0.0))
    0.5
    """

    name = "logistic"

    def _logpdf(self, z):
        return sp.log_expit(z) + sp.log_expit(-z)

    def _cdf(self, z):
        return sp.expit(z)

    def _sf(self, z):
        return sp.expit(-z)

    def _logcdf(self, z):
        return sp.log_expit(z)

    def _logsf(self, z):
        return sp.log_expit(-z)

    def _ppf(self, q):
        return sp.logit(q)

    def _isf(self, q):
        return -sp.logit(q)


class uniform_gen(rv_continuous):  # noqa: N801
    """The uniform distribution on [loc, loc + scale].

    >>> float(uniform.cdf(0.25))
    0.25
    """

    name = "uniform"
    lo, hi = 0.0, 1.0

    def _logpdf(self, z):
        return 0.0 * z

    def _cdf(self, z):
        return z

    def _sf(self, z):
        return 1 - z

    def _ppf(self, q):
        return q


class lognorm_gen(rv_continuous):  # noqa: N801
    """The log-normal distribution with shape ``s`` (``exp`` of a normal of deviation ``s``).

    >>> float(lognorm.cdf(1.0, 0.5))
    0.5
    """

    name = "lognorm"
    lo, open_lo = 0.0, True

    def _logpdf(self, z, s):
        logz = np.log(z)
        return -logz - np.log(s) - LOG_SQRT_2PI - 0.5 * np.square(logz / s)

    def _cdf(self, z, s):
        return sp.ndtr(np.log(z) / s)

    def _sf(self, z, s):
        return sp.ndtr(-np.log(z) / s)

    def _logcdf(self, z, s):
        return sp.log_ndtr(np.log(z) / s)

    def _logsf(self, z, s):
        return sp.log_ndtr(-np.log(z) / s)

    def _ppf(self, q, s):
        return np.exp(s * sp.ndtri(q))

    def _isf(self, q, s):
        return np.exp(-s * sp.ndtri(q))


class chi2_gen(rv_continuous):  # noqa: N801
    """The chi-squared distribution with ``df`` degrees of freedom.

    >>> float(chi2.cdf(2.0, 2.0))  # 1 - e^-1
    0.6321205588285577
    """

    name = "chi2"
    lo = 0.0

    def _logpdf(self, z, df):
        return sp.xlogy(df / 2 - 1, z) - z / 2 - sp.gammaln(df / 2) - df / 2 * LOG2

    def _cdf(self, z, df):
        return sp.gammainc(df / 2, z / 2)

    def _sf(self, z, df):
        return sp.gammaincc(df / 2, z / 2)

    def _ppf(self, q, df):
        return 2 * sp.gammaincinv(df / 2, q)

    def _isf(self, q, df):
        return sp.chdtri(df, q)


class halfnorm_gen(rv_continuous):  # noqa: N801
    """The half-normal distribution (``|x|`` of a standard normal).

    >>> float(halfnorm.sf(0.0))
    1.0
    """

    name = "halfnorm"
    lo = 0.0

    def _logpdf(self, z):
        return LOG2 - LOG_SQRT_2PI - 0.5 * z * z

    def _cdf(self, z):
        return sp.erf(z / SQRT2)

    def _sf(self, z):
        return sp.erfc(z / SQRT2)

    def _ppf(self, q):
        return sp.ndtri((1 + q) / 2)

    def _isf(self, q):
        return -sp.ndtri(q / 2)


class weibull_min_gen(rv_continuous):  # noqa: N801
    """The Weibull distribution with shape ``c``.

    >>> float(weibull_min.logsf(2.0, 1.0))
    -2.0
    """

    name = "weibull_min"
    lo = 0.0

    def _logpdf(self, z, c):
        return np.log(c) + sp.xlogy(c - 1, z) - np.power(z, c)

    def _cdf(self, z, c):
        return -np.expm1(-np.power(z, c))

    def _sf(self, z, c):
        return np.exp(-np.power(z, c))

    def _logsf(self, z, c):
        return -np.power(z, c)

    def _logcdf(self, z, c):
        return np.log1p(-np.exp(-np.power(z, c)))

    def _ppf(self, q, c):
        return np.power(-np.log1p(-q), 1 / c)

    def _isf(self, q, c):
        return np.power(-np.log(q), 1 / c)


class pareto_gen(rv_continuous):  # noqa: N801
    """The Pareto distribution with shape ``b`` on [1, inf).

    >>> float(pareto.sf(2.0, 1.0))
    0.5
    """

    name = "pareto"
    lo = 1.0

    def _logpdf(self, z, b):
        return np.log(b) - (b + 1) * np.log(z)

    def _cdf(self, z, b):
        return -np.expm1(-b * np.log(z))

    def _sf(self, z, b):
        return np.exp(-b * np.log(z))

    def _logsf(self, z, b):
        return -b * np.log(z)

    def _ppf(self, q, b):
        return np.exp(-np.log1p(-q) / b)

    def _isf(self, q, b):
        return np.exp(-np.log(q) / b)


class invgamma_gen(rv_continuous):  # noqa: N801
    """The inverse gamma distribution with shape ``a``.

    >>> float(invgamma.logpdf(1.0, 1.0))  # exp(-1)
    -1.0
    """

    name = "invgamma"
    lo, open_lo = 0.0, True

    def _logpdf(self, z, a):
        return -(a + 1) * np.log(z) - sp.gammaln(a) - 1 / z

    def _cdf(self, z, a):
        return sp.gammaincc(a, 1 / z)

    def _sf(self, z, a):
        return sp.gammainc(a, 1 / z)

    def _ppf(self, q, a):
        return 1.0 / sp.gammainccinv(a, q)

    def _isf(self, q, a):
        return 1.0 / sp.gammaincinv(a, q)


class gumbel_r_gen(rv_continuous):  # noqa: N801
    """The right-skewed Gumbel distribution.

    >>> float(gumbel_r.logcdf(0.0))
    -1.0
    """

    name = "gumbel_r"

    def _logpdf(self, z):
        return -z - np.exp(-z)

    def _cdf(self, z):
        return np.exp(-np.exp(-z))

    def _sf(self, z):
        return -np.expm1(-np.exp(-z))

    def _logcdf(self, z):
        return -np.exp(-z)

    def _logsf(self, z):
        # 1 - cdf loses the tail where cdf is small (z < 0), -expm1 where it is near 1
        small = np.less(z, 0)
        return np.where(small, np.log1p(-self._cdf(np.where(small, z, -1.0))),
                        np.log(self._sf(np.where(small, 1.0, z))))  # fmt: skip

    def _ppf(self, q):
        return -np.log(-np.log(q))

    def _isf(self, q):
        return -np.log(-np.log1p(-q))


class rayleigh_gen(rv_continuous):  # noqa: N801
    """The Rayleigh distribution.

    >>> float(rayleigh.logsf(2.0))
    -2.0
    """

    name = "rayleigh"
    lo, open_lo = 0.0, True

    def _logpdf(self, z):
        return np.log(z) - 0.5 * z * z

    def _cdf(self, z):
        return -np.expm1(-0.5 * z * z)

    def _sf(self, z):
        return np.exp(-0.5 * z * z)

    def _logsf(self, z):
        return -0.5 * z * z

    def _ppf(self, q):
        return np.sqrt(-2 * np.log1p(-q))

    def _isf(self, q):
        return np.sqrt(-2 * np.log(q))


class vonmises_gen(rv_continuous):  # noqa: N801
    """The von Mises distribution (SciPy's: not restricted to one period, ``kappa >= 0``); its
    ``logpdf``/``pdf`` (differentiable in ``x``, ``kappa``, ``loc``, ``scale``).

    >>> round(float(vonmises.logpdf(0.0, 0.0)), 12)  # uniform on a circle: -log 2π
    -1.837877066409
    """

    name = "vonmises"

    def _argcheck(self, kappa):
        return np.greater_equal(kappa, 0)

    def _logpdf(self, z, kappa):
        return kappa * sp.cosm1(z) - 2 * LOG_SQRT_2PI - np.log(sp.i0e(kappa))

    def _cdf(self, z, kappa):
        raise TypeError(
            "scipy.stats.vonmises: fusegrad.scipy.stats has logpdf and pdf of vonmises on "
            "traced values, not its cdf (SciPy's series has no derivative rule)"
        )

    _sf = _logcdf = _logsf = _cdf


# --------------------------------------------------------------------------------------------------
# Discrete: k - loc on the integers; the parameters are differentiable, k is not
# --------------------------------------------------------------------------------------------------


# A discrete entropy without a closed form sums the pmf's terms above ENTROPY_TAIL, at most
# ENTROPY_TERMS of them.
ENTROPY_TAIL = 1e-30
ENTROPY_TERMS = 10**7


class rv_discrete(rv_continuous):  # noqa: N801
    """A discrete distribution: subclasses give ``_logpmf``, ``_cdf``, ``_sf`` of integer k."""

    lo, hi = 0.0, np.inf

    def _z(self, x: Any, args: tuple, kwds: dict) -> tuple:
        shapes, loc, _ = self._parse(args, kwds)
        k = np.floor(stop_gradient(_as_value(x)) - stop_gradient(loc))
        return k, shapes, 1.0, self._inside(k, *shapes)

    def _mid(self, *shapes: Any) -> float:
        return 0.0

    def _logpmf(self, k: Any, *shapes: Any) -> Any:
        raise NotImplementedError(f"{self.name} has no _logpmf")

    def logpmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the probability mass at ``k`` (-inf off the integers of the support)."""
        shapes, loc, _ = self._parse(args, kwds)
        kk = stop_gradient(_as_value(k)) - stop_gradient(loc)
        ok = np.logical_and(self._inside(kk, *shapes), np.equal(kk, np.floor(kk)))
        out = np.where(ok, self._logpmf(_safe(ok, kk, 0.0), *shapes), -np.inf)
        return _nan_unless(self._valid(kk, shapes, 1.0), out)

    def pmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """The probability mass at ``k``."""
        return np.exp(self.logpmf(k, *args, **kwds))

    logpdf = pdf = None  # type: ignore[assignment]

    def ppf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """SciPy's quantile function: integer-valued, so its derivative is 0 wherever it exists
        (in ``q`` and in the parameters), as ``np.floor``'s."""
        return self._constant("ppf", q, args, kwds)

    def isf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """SciPy's inverse survival function: integer-valued, derivative 0 (see ``ppf``)."""
        return self._constant("isf", q, args, kwds)

    def _constant(self, method: str, q: Any, args: tuple, kwds: dict) -> Any:
        fn = getattr(getattr(_st, self.name), method)
        values = (stop_gradient(_as_value(v)) for v in (q, *args))
        return fn(*values, **{k: stop_gradient(_as_value(v)) for k, v in kwds.items()})

    def _entropy(self, *shapes: Any) -> Any:
        """``-Σ pmf log pmf`` over the support, summed where the pmf exceeds ``ENTROPY_TAIL``
        (as SciPy's generic discrete entropy sums until its terms are negligible); the range
        is chosen from the parameters' values, the sum is differentiable in them."""
        plain = [np.asarray(stop_gradient(_as_value(v)), dtype=float) for v in shapes]
        dist = getattr(_st, self.name)
        with np.errstate(all="ignore"):
            ok = np.asarray(self._argcheck(*plain), dtype=bool)
            if not ok.any():
                return np.full(ok.shape, np.nan)[()]
            plain = [np.broadcast_to(v, ok.shape)[ok] for v in plain]
            lo = dist.ppf(ENTROPY_TAIL, *plain)
            # SciPy's isf is nan below ~1e-16 (1 - q rounds to 1): from its 1e-15 point, step out
            # by that point's distance from the median until the pmf is below the tail
            hi = dist.isf(1e-15, *plain)
            step = np.maximum(hi - dist.ppf(0.5, *plain), 1.0)
            for _ in range(64):
                out = dist.logpmf(hi, *plain) > np.log(ENTROPY_TAIL)
                if not out.any():
                    break
                hi = np.where(out, hi + step, hi)
        first, last = int(max(np.min(lo), 0)), int(np.max(hi))
        if last - first > ENTROPY_TERMS:
            raise ValueError(
                f"scipy.stats.{self.name}.entropy: its sum over the support would take "
                f"{last - first + 1} terms here (at most {ENTROPY_TERMS} are summed); use a "
                "closed form or an approximation for such parameters"
            )
        k = np.arange(first, last + 1, dtype=float).reshape((-1,) + (1,) * ok.ndim)
        safe = [_safe(ok, v, 1.0 if i == 0 else 0.5) for i, v in enumerate(shapes)]
        lp = self._logpmf(k, *safe)
        terms = np.where(np.isfinite(lp), -np.exp(lp) * lp, 0.0)
        return np.where(ok, np.sum(terms, axis=0), np.nan)[()]

    def mean(self, *args: Any, **kwds: Any) -> Any:
        """The mean (``loc`` shifts it)."""
        shapes, loc, _ = self._parse(args, kwds)
        m = self._closed("mean", self._mean)(*shapes)
        return _nan_unless(self._valid(0.0, shapes, 1.0), loc + m)

    def var(self, *args: Any, **kwds: Any) -> Any:
        """The variance."""
        shapes, _, _ = self._parse(args, kwds)
        return _nan_unless(self._valid(0.0, shapes, 1.0), self._closed("var", self._var)(*shapes))


class poisson_gen(rv_discrete):  # noqa: N801
    """The Poisson distribution with mean ``mu``.

    >>> float(poisson.pmf(0, 2.0))  # exp(-2)
    0.1353352832366127
    """

    name = "poisson"

    def _argcheck(self, mu):
        return np.greater_equal(mu, 0)

    def _logpmf(self, k, mu):
        return sp.xlogy(k, mu) - sp.gammaln(k + 1) - mu

    def _cdf(self, k, mu):
        return sp.gammaincc(k + 1, mu)

    def _sf(self, k, mu):
        return sp.gammainc(k + 1, mu)


class binom_gen(rv_discrete):  # noqa: N801
    """The binomial distribution of ``n`` trials with success probability ``p``.

    >>> float(binom.pmf(1, 2, 0.5))
    0.5
    """

    name = "binom"

    def _argcheck(self, n, p):
        n = stop_gradient(n)
        whole = np.logical_and(np.greater_equal(n, 0), np.equal(n, np.floor(n)))
        return np.logical_and(whole, np.logical_and(np.greater_equal(p, 0), np.less_equal(p, 1)))

    def _inside(self, k, n, p):
        return np.logical_and(np.greater_equal(k, 0), np.less_equal(k, stop_gradient(n)))

    def _logpmf(self, k, n, p):
        comb = sp.gammaln(n + 1) - sp.gammaln(k + 1) - sp.gammaln(n - k + 1)
        return comb + sp.xlogy(k, p) + sp.xlog1py(n - k, -p)

    def _cdf(self, k, n, p):
        return np.where(np.greater_equal(k, n), 1.0, sp.betainc(n - k, k + 1, 1 - p))

    def _sf(self, k, n, p):
        return np.where(np.greater_equal(k, n), 0.0, sp.betainc(k + 1, n - k, p))


class bernoulli_gen(rv_discrete):  # noqa: N801
    """The Bernoulli distribution with success probability ``p``.

    >>> float(bernoulli.pmf(1, 0.25))
    0.25
    """

    name = "bernoulli"
    hi = 1.0

    def _argcheck(self, p):
        return np.logical_and(np.greater_equal(p, 0), np.less_equal(p, 1))

    def _logpmf(self, k, p):
        return sp.xlogy(k, p) + sp.xlog1py(1 - k, -p)

    def _cdf(self, k, p):
        return np.where(np.greater_equal(k, 1), 1.0, 1 - p)

    def _sf(self, k, p):
        return np.where(np.greater_equal(k, 1), 0.0, p)


class geom_gen(rv_discrete):  # noqa: N801
    """The geometric distribution: the trial of the first success, probability ``p`` each.

    >>> float(geom.pmf(2, 0.5))
    0.25
    """

    name = "geom"
    lo = 1.0

    def _argcheck(self, p):
        return np.logical_and(np.greater(p, 0), np.less_equal(p, 1))

    def _logpmf(self, k, p):
        return sp.xlog1py(k - 1, -p) + np.log(p)

    def _cdf(self, k, p):
        return -np.expm1(sp.xlog1py(k, -p))

    def _sf(self, k, p):
        return np.exp(sp.xlog1py(k, -p))

    def _logsf(self, k, p):
        return sp.xlog1py(k, -p)


class nbinom_gen(rv_discrete):  # noqa: N801
    """The negative binomial distribution: failures before the ``n``-th success.

    >>> float(nbinom.pmf(0, 2, 0.5))
    0.25
    """

    name = "nbinom"

    def _argcheck(self, n, p):
        return np.logical_and(np.greater(n, 0), np.logical_and(np.greater(p, 0),
                                                               np.less_equal(p, 1)))  # fmt: skip

    def _logpmf(self, k, n, p):
        comb = sp.gammaln(n + k) - sp.gammaln(k + 1) - sp.gammaln(n)
        return comb + sp.xlogy(n, p) + sp.xlog1py(k, -p)

    def _cdf(self, k, n, p):
        return sp.betainc(n, k + 1, p)

    def _sf(self, k, n, p):
        return sp.betainc(k + 1, n, 1 - p)


# --------------------------------------------------------------------------------------------------
# Multivariate
# --------------------------------------------------------------------------------------------------


class dirichlet_gen:  # noqa: N801
    """The Dirichlet distribution; ``x``'s first axis holds the components, as SciPy's.

    >>> float(dirichlet.pdf([0.5, 0.5], [1.0, 1.0]))
    1.0
    """

    name = "dirichlet"

    def __call__(self, alpha: Any) -> _Frozen:
        return _Frozen(self, (alpha,), {})

    def logpdf(self, x: Any, alpha: Any) -> Any:
        """Log of the density at ``x`` (components along the first axis; the last one may be
        left out, as in SciPy). SciPy's argument checks raise on plain values; where a traced
        value fails one, the result is ``nan`` (reading it would stop ``jit`` replaying)."""
        x, a = _as_value(x), _as_value(alpha)
        k = np.shape(a)[0] if np.ndim(a) == 1 else -1
        if not _dispatch.traced((a,), {}) or k < 0:
            _mv._dirichlet_check_parameters(a)
        if np.shape(x)[0] == k - 1:
            x = np.concatenate([x, np.expand_dims(1 - np.sum(x, axis=0), 0)])
        elif np.shape(x)[0] != k:
            _mv._dirichlet_check_input(np.ones(k), np.zeros(np.shape(x)))  # SciPy's shape error
        if not _dispatch.traced((x,), {}):
            _mv._dirichlet_check_input(np.full(k, 2.0), x)  # its checks of x alone
        if np.ndim(x) > 1:
            a = np.reshape(a, (-1,) + (1,) * (np.ndim(x) - 1))
        norm_const = np.sum(sp.gammaln(alpha)) - sp.gammaln(np.sum(alpha))
        out = np.sum(sp.xlogy(a - 1, x), axis=0) - norm_const
        return _nan_unless(_dirichlet_valid(x, a), out)

    def pdf(self, x: Any, alpha: Any) -> Any:
        """The density at ``x``."""
        return np.exp(self.logpdf(x, alpha))


def _dirichlet_valid(x: Any, a: Any) -> Any:
    """Where SciPy's dirichlet checks pass: ``a > 0``, ``x`` on the simplex, ``x > 0`` where
    ``a < 1``."""
    x, a = stop_gradient(x), stop_gradient(a)
    ok = np.logical_and(np.all(np.greater(a, 0)), np.all(np.greater_equal(x, 0), axis=0))
    ok = np.logical_and(ok, np.all(np.less_equal(x, 1), axis=0))
    ok = np.logical_and(ok, np.less_equal(np.abs(np.sum(x, axis=0) - 1.0), 10e-10))
    zero_at_pole = np.logical_and(np.equal(x, 0), np.less(a, 1))
    return np.logical_and(ok, np.logical_not(np.any(zero_at_pole, axis=0)))


class multinomial_gen:  # noqa: N801
    """The multinomial distribution's ``logpmf``/``pmf``, differentiable in ``p`` (``x``, ``n``
    are counts). As SciPy's, a row of ``p`` that does not sum to 1 (beyond ten float epsilons)
    has its last entry replaced by ``1 - sum(p[:-1])`` (which then carries its derivative); a
    negative ``n`` or a ``p`` outside [0, 1] gives ``nan``, an ``x`` off the support ``-inf``.

    >>> round(float(multinomial.pmf([1, 1], 2, [0.5, 0.5])), 12)
    0.5
    """

    name = "multinomial"

    def __call__(self, n: Any, p: Any, seed: Any = None) -> _Frozen:
        return _Frozen(self, (n, p), {})

    def logpmf(self, x: Any, n: Any, p: Any) -> Any:
        """Log of the probability of the counts ``x`` (components along the last axis)."""
        p = _as_value(p)
        eps = float(np.finfo(np.result_type(p.dtype, np.float32)).eps) * 10  # (SciPy's)
        p = p if p.dtype == np.float64 else p.astype(np.float64)
        head = p[..., :-1]
        adjusted = 1.0 - np.sum(head, axis=-1)
        off = np.greater(np.abs(1 - np.sum(stop_gradient(p), axis=-1)), eps)
        p = np.concatenate([head, np.where(off, adjusted, p[..., -1])[..., None]], axis=-1)
        kept = stop_gradient(p)
        bad_np = np.logical_or(np.any(np.less(kept, 0), axis=-1), np.any(np.greater(kept, 1),
                                                                       axis=-1))  # fmt: skip
        n_int = np.asarray(n, dtype=int)
        bad_np = np.logical_or(bad_np, np.less(n_int, 0))
        xx = np.asarray(x, dtype=int)
        if xx.ndim == 0:
            raise ValueError("x must be an array.")
        if xx.size != 0 and not xx.shape[-1] == np.shape(p)[-1]:
            raise ValueError(f"Size of each quantile should be size of p: received "
                             f"{xx.shape[-1]}, but expected {np.shape(p)[-1]}.")  # fmt: skip
        bad_x = np.any(xx != np.asarray(x), axis=-1) | np.any(xx < 0, axis=-1)
        bad_x = bad_x | (np.sum(xx, axis=-1) != n_int)
        # (x = 0 where p = 0: xlogy's 0, and its slope in p taken as 0)
        terms = np.where(xx == 0, 0.0, sp.xlogy(xx, np.where(xx == 0, 1.0, p)))
        out = sp.gammaln(n_int + 1.0) + np.sum(terms - sp.gammaln(xx + 1.0), axis=-1)
        out = np.where(bad_x, -np.inf, out)
        return np.where(bad_np, np.nan, out)

    def pmf(self, x: Any, n: Any, p: Any) -> Any:
        """The probability of the counts ``x``."""
        return np.exp(self.logpmf(x, n, p))


def _eigenvalue_floor(w: Any) -> Any:
    """SciPy's threshold below which an eigenvalue of a covariance counts as zero."""
    return 1e6 * np.finfo(np.float64).eps * np.max(np.abs(w))


def _singular(cov: Any) -> bool:
    """Whether ``cov`` is singular as SciPy's ``_PSD`` decides it (reading its values: under
    ``jit`` such a call runs uncompiled); SciPy's error if it is not positive semidefinite."""
    w = np.linalg.eigvalsh(np.asarray(stop_gradient(cov)))
    floor = _eigenvalue_floor(w)
    if np.min(w) < -floor:
        raise ValueError("The input matrix must be symmetric positive semidefinite.")
    return bool(np.any(w <= floor))


def _singular_logpdf(rows: Any, cov: Any, dim: int) -> Any:
    """The degenerate normal's log-density as SciPy's ``allow_singular=True``: the
    pseudo-determinant and pseudo-inverse over the eigenvalues above the floor, -inf off the
    support (a component along the null space)."""
    w, v = np.linalg.eigh(cov)
    floor = stop_gradient(_eigenvalue_floor(w))
    kept = np.greater(stop_gradient(w), floor)
    safe = np.where(kept, w, 1.0)
    rank = np.sum(kept)
    log_pdet = np.sum(np.where(kept, np.log(safe), 0.0))
    whitened = rows @ (v * np.where(kept, 1 / np.sqrt(safe), 0.0))
    maha = np.sum(whitened * whitened, axis=-1)
    off = np.sqrt(np.sum(np.square(rows @ (v * np.logical_not(kept))), axis=-1))
    inside = np.less(stop_gradient(off), 1e3 * floor)
    logpdf = -0.5 * (rank * 2 * LOG_SQRT_2PI + log_pdet + maha)
    return np.where(inside, logpdf, -np.inf)


def _as_value(x: Any) -> Any:
    return x if _dispatch.traced((x,), {}) else np.asarray(x, dtype=float)


class multivariate_normal_gen:  # noqa: N801
    """The multivariate normal distribution (``cov`` a matrix, a vector of variances or a
    number); ``x``'s last axis holds the coordinates, as SciPy's.

    >>> float(multivariate_normal.logpdf([0.0, 0.0], cov=np.eye(2)))  # -log 2π
    -1.8378770664093453
    """

    name = "multivariate_normal"

    def __call__(self, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> _Frozen:
        return _Frozen(self, (mean, cov), {})

    def logpdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """Log of the density at ``x`` (a point, or points along the leading axes)."""
        x, mean, cov = _as_value(x), None if mean is None else _as_value(mean), _as_value(cov)
        if mean is not None and np.ndim(mean) > 0:
            dim = np.shape(mean)[-1]
        elif np.ndim(cov) > 0:
            dim = np.shape(cov)[0]
        else:
            dim = 1
        if np.ndim(cov) < 2:
            cov = np.eye(dim) * cov
        if np.ndim(x) == 0:
            x = np.reshape(x, (1,))
        if np.ndim(x) == 1:
            x = np.reshape(x, (-1, 1) if dim == 1 else (1, dim))
        diff = x if mean is None else x - mean
        lead = np.shape(diff)[:-1]
        rows = np.reshape(diff, (-1, dim))
        if allow_singular and _singular(cov):
            flat = _singular_logpdf(rows, cov, dim)
        else:
            low = np.linalg.cholesky(cov)
            z = np.linalg.solve(low, rows.T)
            maha = np.sum(z * z, axis=0)
            logdet = 2 * np.sum(np.log(np.diagonal(low)))
            flat = -0.5 * (dim * 2 * LOG_SQRT_2PI + logdet + maha)
        out = np.reshape(flat, lead)
        return np.squeeze(out) if np.size(out) != 1 else np.reshape(out, ())

    def pdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """The density at ``x``."""
        return np.exp(self.logpdf(x, mean, cov, allow_singular))

    def entropy(self, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """The differential entropy, ``(d (1 + log 2π) + log det cov) / 2``."""
        cov = _as_value(cov)
        dim = np.shape(mean)[-1] if mean is not None and np.ndim(mean) > 0 else (
            np.shape(cov)[0] if np.ndim(cov) > 0 else 1)  # fmt: skip
        if np.ndim(cov) < 2:
            cov = np.eye(dim) * cov
        logdet = 2 * np.sum(np.log(np.diagonal(np.linalg.cholesky(cov))))
        return 0.5 * (dim * (1 + 2 * LOG_SQRT_2PI) + logdet)


# --------------------------------------------------------------------------------------------------
# Summaries whose SciPy code writes in place (xpx.at), so it cannot run on traced values
# --------------------------------------------------------------------------------------------------


def _nan_policy(a: Any, nan_policy: str) -> bool:
    """Whether to omit nans; 'raise' reads the values (so ``jit`` runs such a call uncompiled)."""
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError("nan_policy must be one of {'propagate', 'omit', 'raise'}")
    if nan_policy == "raise" and np.any(np.isnan(a)):
        raise ValueError("The input contains nan values")
    return nan_policy == "omit"


def _as_float(a: Any) -> Any:
    a = _as_value(a)
    return a if np.result_type(a).kind in "fc" else np.astype(a, np.float64)


def zmap(scores: Any, compare: Any, axis: Any = 0, ddof: int = 0,
         nan_policy: str = "propagate") -> Any:  # fmt: skip
    """``scipy.stats.zmap``: ``(scores - mean(compare)) / std(compare)`` along ``axis``.

    >>> zmap(np.array([1.0, 3.0]), np.array([0.0, 2.0]))
    array([0., 2.])
    """
    return _standardised(scores, compare, axis, ddof, nan_policy, like_zscore=False)


def zscore(a: Any, axis: Any = 0, ddof: int = 0, nan_policy: str = "propagate") -> Any:
    """``scipy.stats.zscore``: ``(a - mean) / std`` along ``axis`` (nan where the slice is
    constant, as SciPy).

    >>> zscore(np.array([1.0, 3.0]))
    array([-1.,  1.])
    """
    return _standardised(a, a, axis, ddof, nan_policy, like_zscore=True)


def _standardised(scores: Any, compare: Any, axis: Any, ddof: int, nan_policy: str,
                  like_zscore: bool) -> Any:  # fmt: skip
    scores, compare = _as_float(scores), _as_float(compare)
    omit = _nan_policy(compare, nan_policy)
    mean, var = (np.nanmean, np.nanvar) if omit else (np.mean, np.var)
    with np.errstate(invalid="ignore", divide="ignore"):
        mn = mean(compare, axis=axis, keepdims=True)
        std = np.sqrt(var(compare, axis=axis, ddof=ddof, keepdims=True))
        z = (scores - mn) / std
    if like_zscore:  # a constant slice: nan, not ±inf or 0/0's rounding
        eps = np.finfo(np.result_type(z)).eps
        z = np.where(np.less_equal(std, np.abs(eps * mn)), np.nan, z)
    return z


def variation(a: Any, axis: Any = 0, nan_policy: str = "propagate", ddof: int = 0, *,
              keepdims: bool = False) -> Any:  # fmt: skip
    """``scipy.stats.variation``: ``std(a, ddof) / mean(a)`` along ``axis``.

    >>> float(variation(np.array([1.0, 3.0])))
    0.5
    """
    a = _as_float(a)
    omit = _nan_policy(a, nan_policy)
    kept = (1,) * np.ndim(a) if axis is None else None  # keepdims of axis=None: all ones
    if axis is None:
        a, axis = np.ravel(a), 0
    mean, std = (np.nanmean, np.nanstd) if omit else (np.mean, np.std)
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis) if omit else np.shape(a)[axis]
    with np.errstate(invalid="ignore", divide="ignore"):
        m, sd = mean(a, axis=axis), std(a, axis=axis)
        factor = np.sqrt(np.divide(n, np.subtract(n, ddof, dtype=float)))
        out = sd * np.astype(factor, np.result_type(stop_gradient(sd))) / m  # (float32 stays)
        # n == ddof: SciPy's ±inf (the mean's sign) for a spread-out slice, nan for a constant one
        out = np.where(np.equal(n, ddof), np.where(np.greater(sd, 0), np.copysign(np.inf, m),
                                                   np.nan), out)  # fmt: skip
    if keepdims:
        return np.reshape(out, kept) if kept is not None else np.expand_dims(out, axis)
    return out


_NORMAL_IQR = 1.3489795003921634  # 2 √2 erfinv(1/2): the iqr of the standard normal


def iqr(x: Any, axis: Any = None, rng: tuple = (25, 75), scale: Any = 1.0,
        nan_policy: str = "propagate", interpolation: str = "linear",
        keepdims: bool = False) -> Any:  # fmt: skip
    """``scipy.stats.iqr``: the distance between the ``rng`` percentiles, over ``scale``
    (``'normal'`` for the normal distribution's).

    >>> float(iqr(np.array([1.0, 2.0, 3.0, 4.0, 5.0])))
    2.0
    """
    x = _as_float(x)
    omit = _nan_policy(x, nan_policy)
    if isinstance(scale, str):
        if scale.lower() != "normal":
            raise ValueError(f"{scale} not a valid scale for `iqr`")
        scale = _NORMAL_IQR
    percentile: Any = np.nanpercentile if omit else np.percentile
    lo, hi = percentile(x, list(rng), axis=axis, method=interpolation, keepdims=keepdims)
    return (hi - lo) / scale


EULER = float(np.euler_gamma)


def _where_shape(cond: Any, value: Any, other: float) -> Any:
    """``value`` where ``cond`` on a shape parameter, else ``other`` (inf or nan, as SciPy)."""
    return np.where(cond, value, other)


def _t_var(df: Any) -> Any:
    safe = np.where(np.greater(df, 2), df, 3.0)
    return np.where(np.greater(df, 2), safe / (safe - 2),
                    np.where(np.greater(df, 1), np.inf, np.nan))  # fmt: skip


def _moment_ratio(b: Any, k: float, value: Callable) -> Any:
    """``value(b)`` where ``b > k``, else inf (a moment of a heavy tail)."""
    safe = np.where(np.greater(b, k), b, k + 1.0)
    return np.where(np.greater(b, k), value(safe), np.inf)


# fmt: off
# (entropy, mean, var) of each standard distribution, as functions of its shapes
CLOSED_FORMS: dict[str, tuple[Callable, Callable, Callable]] = {
    "norm":     (lambda: 0.5 * (np.log(2 * np.pi) + 1), lambda: 0.0, lambda: 1.0),
    "expon":    (lambda: 1.0, lambda: 1.0, lambda: 1.0),
    "uniform":  (lambda: 0.0, lambda: 0.5, lambda: 1 / 12),
    "laplace":  (lambda: LOG2 + 1, lambda: 0.0, lambda: 2.0),
    "logistic": (lambda: 2.0, lambda: 0.0, lambda: np.pi**2 / 3),
    "cauchy":   (lambda: np.log(4 * np.pi), lambda: np.nan, lambda: np.nan),
    "halfnorm": (lambda: 0.5 * np.log(np.pi / 2) + 0.5, lambda: np.sqrt(2 / np.pi),
                 lambda: 1 - 2 / np.pi),
    "gumbel_r": (lambda: EULER + 1, lambda: EULER, lambda: np.pi**2 / 6),
    "rayleigh": (lambda: EULER / 2 + 1 - 0.5 * LOG2, lambda: np.sqrt(np.pi / 2),
                 lambda: (4 - np.pi) / 2),
    "lognorm":  (lambda s: 0.5 * (1 + np.log(2 * np.pi) + 2 * np.log(s)),
                 lambda s: np.exp(s * s / 2), lambda s: np.expm1(s * s) * np.exp(s * s)),
    "gamma":    (lambda a: a + sp.gammaln(a) + (1 - a) * sp.digamma(a), lambda a: a, lambda a: a),
    "beta":     (lambda a, b: sp.betaln(a, b) - (a - 1) * sp.digamma(a) - (b - 1) * sp.digamma(b)
                 + (a + b - 2) * sp.digamma(a + b),
                 lambda a, b: a / (a + b), lambda a, b: a * b / ((a + b) ** 2 * (a + b + 1))),
    "t":        (lambda df: (df + 1) / 2 * (sp.digamma((df + 1) / 2) - sp.digamma(df / 2))
                 + 0.5 * np.log(df) + sp.betaln(df / 2, 0.5),
                 lambda df: _where_shape(np.greater(df, 1), 0.0 * df, np.inf), _t_var),
    "chi2":     (lambda df: df / 2 + LOG2 + sp.gammaln(df / 2) + (1 - df / 2) * sp.digamma(df / 2),
                 lambda df: df, lambda df: 2 * df),
    "weibull_min": (lambda c: -np.log(c) + EULER * (1 - 1 / c) + 1,
                    lambda c: sp.gamma(1 + 1 / c),
                    lambda c: sp.gamma(1 + 2 / c) - sp.gamma(1 + 1 / c) ** 2),
    "pareto":   (lambda b: 1 + 1 / b - np.log(b),
                 lambda b: _moment_ratio(b, 1, lambda v: v / (v - 1)),
                 lambda b: _moment_ratio(b, 2, lambda v: v / ((v - 1) ** 2 * (v - 2)))),
    "invgamma": (lambda a: a - (a + 1) * sp.digamma(a) + sp.gammaln(a),
                 lambda a: _moment_ratio(a, 1, lambda v: 1 / (v - 1)),
                 lambda a: _moment_ratio(a, 2, lambda v: 1 / ((v - 1) ** 2 * (v - 2)))),
}
def _binom_entropy(n: Any, p: Any) -> Any:
    """``-Σₖ pmf log pmf`` over ``k = 0..n``, as SciPy sums it (``n`` a plain whole number)."""
    count = int(np.asarray(stop_gradient(n)))
    k = np.reshape(np.arange(count + 1.0), (-1,) + (1,) * np.ndim(p))
    return np.sum(sp.entr(np.exp(binom._logpmf(k, n, p))), axis=0)


# the entropy of each discrete distribution with a closed form (or a finite sum)
DISCRETE_ENTROPY: dict[str, Callable] = {
    "bernoulli": lambda p: sp.entr(p) + sp.entr(1 - p),
    "geom": lambda p: -np.log(p) - np.log1p(-p) * (1 - p) / p,
    "binom": _binom_entropy,
}
# (mean, var) of each discrete distribution (loc shifts the mean)
DISCRETE_MOMENTS: dict[str, tuple[Callable, Callable]] = {
    "poisson":   (lambda mu: mu, lambda mu: mu),
    "binom":     (lambda n, p: n * p, lambda n, p: n * p * (1 - p)),
    "bernoulli": (lambda p: p, lambda p: p * (1 - p)),
    "geom":      (lambda p: 1 / p, lambda p: (1 - p) / (p * p)),
    "nbinom":    (lambda n, p: n * (1 - p) / p, lambda n, p: n * (1 - p) / (p * p)),
}
# fmt: on

norm = norm_gen()
uniform = uniform_gen()
lognorm = lognorm_gen()
chi2 = chi2_gen()
halfnorm = halfnorm_gen()
weibull_min = weibull_min_gen()
pareto = pareto_gen()
invgamma = invgamma_gen()
gumbel_r = gumbel_r_gen()
rayleigh = rayleigh_gen()
vonmises = vonmises_gen()
bernoulli = bernoulli_gen()
geom = geom_gen()
nbinom = nbinom_gen()

t = t_gen()
gamma = gamma_gen()
beta = beta_gen()
expon = expon_gen()
laplace = laplace_gen()
cauchy = cauchy_gen()
logistic = logistic_gen()
poisson = poisson_gen()
binom = binom_gen()
dirichlet = dirichlet_gen()
multivariate_normal = multivariate_normal_gen()
multinomial = multinomial_gen()

# the closed forms, on the distributions (their _entropy/_mean/_var)
for _name, (_entropy_of, _mean_of, _var_of) in CLOSED_FORMS.items():
    _dist = globals()[_name]
    _dist._entropy, _dist._mean, _dist._var = _entropy_of, _mean_of, _var_of
for _name, (_mean_of, _var_of) in DISCRETE_MOMENTS.items():
    globals()[_name]._mean, globals()[_name]._var = _mean_of, _var_of
for _name, _entropy_of in DISCRETE_ENTROPY.items():
    globals()[_name]._entropy = _entropy_of

_CONTINUOUS = ("logpdf", "pdf", "logcdf", "cdf", "sf", "logsf", "ppf", "isf", "entropy", "mean",
               "var", "std", "median")  # fmt: skip
_DISCRETE = ("logpmf", "pmf", "logcdf", "cdf", "sf", "logsf", "ppf", "isf", "mean", "var", "std",
             "entropy", "median")  # fmt: skip
_MIRRORED = {d.name: d for d in (norm, t, gamma, beta, expon, laplace, cauchy, logistic, uniform,
                                 lognorm, chi2, halfnorm, weibull_min, pareto, invgamma, gumbel_r,
                                 rayleigh, vonmises, poisson, binom, bernoulli, geom,
                                 nbinom)}  # fmt: skip


def _method(method: str) -> Any:
    def traced_call(self: Any, *args: Any, **kwds: Any) -> Any:
        mirror = _MIRRORED.get(str(getattr(self, "name", "")))
        fn = getattr(mirror, method, None) if mirror is not None else None
        if fn is None:
            raise TypeError(
                f"scipy.stats.{getattr(self, 'name', type(self).__name__)}.{method} was called "
                "on a traced value, and fusegrad.scipy.stats has no differentiable version of it "
                f"(it has {', '.join(sorted(_MIRRORED))}, dirichlet, multinomial, "
                "multivariate_normal). "
                "Write the density with NumPy and scipy.special operations, or register a rule "
                "with fusegrad.register_rrule"
            )
        return fn(*args, **kwds)

    return traced_call


def _multi(dist: Any, method: str) -> Any:
    return lambda self, *args, **kwds: getattr(dist, method)(*args, **kwds)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.stats``'s distribution classes (by fusegrad.scipy)."""
    from scipy.stats import _distn_infrastructure as infra
    from scipy.stats import _multivariate as mv

    done = set()
    for cls, methods in ((infra.rv_continuous, _CONTINUOUS), (infra.rv_discrete, _DISCRETE)):
        for method in methods:
            # on the class that defines it (entropy, mean, ... are rv_generic's: patched once,
            # and ``_method`` finds the mirror by the distribution's name)
            owner = next(c for c in cls.__mro__ if method in c.__dict__)
            if (owner, method) not in done:
                done.add((owner, method))
                _dispatch.patch_attr(owner, method, _method(method))
    for name in ("zscore", "zmap", "variation", "iqr"):
        _dispatch.patch_attr(module, name, globals()[name])
    multi = ((mv.multivariate_normal_gen, multivariate_normal), (mv.dirichlet_gen, dirichlet),
             (mv.multinomial_gen, multinomial))  # fmt: skip
    for cls, dist in multi:
        _dispatch.patch_attr(cls, "__call__", _multi(dist, "__call__"))
        for method in ("logpdf", "pdf", "logpmf", "pmf", "entropy"):
            if hasattr(dist, method):
                _dispatch.patch_attr(cls, method, _multi(dist, method))


_dispatch.loaded(__name__)

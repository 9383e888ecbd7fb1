"""Rules for scipy.special: the gamma family, error functions, entropies and Bessel functions.

Each ufunc is declared once with ``scalar_rule`` (its partials as data): both of its rules come
from the same partials, and the products of cotangents and partials are lazy and fused. These
ufuncs are not ops of the lazy IR (the function itself runs on NumPy arrays); SciPy ufuncs the IR
fuses (``expit``, ``erf``, ``xlogy``, ...) are declared with their op in ``rules/elementwise.py``.

| ufunc | partial(s) |
|---|---|
| ``gammaln``, ``loggamma`` (complex), ``gamma``, ``rgamma`` | ``ψ(x)``, ``y ψ(x)``, ``-y ψ(x)`` † |
| ``gammasgn`` | 0 |
| ``digamma``/``psi`` | ``ψ'(x) = ζ(2, x)`` (Hurwitz zeta) |
| ``_zeta(s, q)`` (``zeta``'s ufunc) | ``∂q = -s ζ(s+1, q)``; ``∂s``: not implemented (error) |
| ``beta``, ``betaln`` | ``y (ψ(a) - ψ(a+b))``, ``ψ(a) - ψ(a+b)`` (and in b) † |
| ``gammainc``, ``gammaincc`` | ``±exp(-x) x^(a-1) / Γ(a)`` in x; ``±gammainc_da(a, x)`` in a |
| ``betainc(a, b, x)`` | ``x^(a-1) (1-x)^(b-1) / B(a, b)`` in x; in a, b: not implemented |
| ``gammaincinv``, ``gammainccinv`` | ``±1 / p(a, y)``; in a ``-gammainc_da(a, y) / p(a, y)`` |
| ``betaincinv``, ``betainccinv``, ``_beta_ppf`` | ``±1 / p_B(a, b, y)``; a, b: not implemented |
| ``chdtr``, ``chdtrc``, ``chdtri`` (χ² cdf, sf, isf) | by ``gammainc(v/2, x/2)``: in x (or p), v |
| ``gdtr``, ``gdtrc`` (gamma cdf, sf; rate a) | by ``gammainc(b, a x)``: in a, b and x |
| ``pdtr``, ``pdtrc``, ``pdtri`` (Poisson; m) | by ``gammaincc(⌊k⌋+1, m)``: in m |
| ``stdtr``, ``stdtrit`` (Student t cdf, ppf) | t density (1 / it) in t (p) †; df: not implemented |
| ``ndtri_exp`` (inverse of ``log_ndtr``) | ``exp(q + y²/2 + log√(2π))`` |
| ``erfinv``, ``erfcinv``, ``erfcx`` | ``±√π/2 exp(y²)``, ``2 x y - 2/√π`` (x > 25: its series) |
| ``ndtr``, ``ndtri``, ``log_ndtr`` | ``φ(x)``, ``1/φ(y)``, ``exp(-x²/2 - log√(2π) - y)`` † |
| ``entr`` | ``-(log x + 1)`` |
| ``rel_entr``, ``kl_div`` | ``log(a/b) + 1, -a/b``; ``log(a/b), 1 - a/b`` † |
| ``j0``, ``j1``, ``jv`` | ``-J₁``, ``(J₀ - J₂)/2``, ``(J_{v-1} - J_{v+1})/2`` |
| ``y0``, ``y1``, ``yn``, ``yv`` | ``-Y₁``, ``(Y₀ - Y₂)/2``, ``(Y_{n-1} - Y_{n+1})/2`` † |
| ``i0``, ``i1``, ``iv`` | ``I₁``, ``(I₀ + I₂)/2``, ``(I_{v-1} + I_{v+1})/2`` |
| ``i0e``, ``i1e``, ``ive`` | the same of the scaled functions ``- sign(x) y`` † |
| ``kv`` | ``-(K_{v-1} + K_{v+1})/2`` |
| ``k0``, ``k1``, ``kn`` | ``-K₁``, ``-K₀ - K₁/x``, ``-K_{|n|-1} - (|n|/x) K_n`` |
| ``k0e``, ``k1e``, ``kve`` | ``y - (K_{v-1} + K_{v+1}) eˣ/2`` (holomorphic) † |
| ``jve``, ``yve`` | ``(f_{v-1} - f_{v+1})/2`` of the scaled functions (d/d(Re z) if complex) |
| ``expm1``, ``log1p``, ``exp2``, ``exp10`` | ``eˣ``, ``1/(1+x)``, ``y log 2``, ``y log 10`` |
| ``cbrt``, ``cosm1`` | ``1/(3y²)``, ``-sin x`` |
| ``exprel`` | ``(eˣ - y)/x``, ``y (1 - 1/x) + 1/x`` for x > 0, its series for |x| < ½ |
| ``sindg``, ``cosdg``, ``tandg``, ``cotdg`` | ``π/180`` × ``cosdg``, ``-sindg``, ``cosdg⁻²``, … |
| (``cotdg``: ``-sindg⁻²``), ``radian(d, m, s)`` | ``π/180``, ``π/180/60``, ``π/180/3600`` |
| ``exp1``, ``expi``, ``expn(n, x)`` | ``-e⁻ˣ/x``, ``eˣ/x`` (as ``e^(x/2) e^(x/2)/x``), ``-Eₙ₋₁`` |
| ``erfi``, ``dawsn``, ``wofz`` | ``2/√π e^(x²)``, ``1 - 2xD(x)`` †, ``-2zw + 2i/√π`` † |
| ``spence`` (``∫₁ᶻ log t/(1-t) dt``) | ``log z / (1 - z)`` (-1 at z = 1; its series near 1) |
| ``ellipk``, ``ellipe`` (in m) | ``(E - (1-m)K) / (2m(1-m))``, ``(E - K)/(2m)``; |m| < ¼: series |
| ``poch(z, m)`` | ``y (ψ(z+m) - ψ(z))``, ``y ψ(z+m)`` † |
| ``binom(n, k)`` | ``y (ψ(n+1) - ψ(n-k+1))``, ``y (ψ(n-k+1) - ψ(k+1))`` † |
| ``boxcox``, ``boxcox1p`` (x, λ) | ``x^(λ-1)``; ``L² exprel'(λL)``, L = log x (for 1p: x → 1 + x) |
| ``huber(δ, r)`` | ``0``, ``r`` inside (``|r| ≤ δ``); ``|r| - δ``, ``δ sign r`` outside |
| ``pseudo_huber(δ, r)`` | ``r⁴/(u(u+δ)²)``, ``rδ/u`` (``u = √(δ²+r²)``) † |
| ``owens_t(h, a)`` | ``-φ(h) erf(ah/√2)/2``, ``exp(-h²(1+a²)/2) / (2π(1+a²))`` |
| ``lambertw(z, k)`` (``_lambertw``) | ``1 / (e^W (1 + W))`` |
| ``np.sinc`` (also ``scipy.special.sinc``) | ``(cos(πx) - y) / x``, its series near 0 |

† written otherwise where that form cancels or overflows: ``rgamma`` at 0, -1, ... (``(-1)ⁿ n!``
by reflection); ``ψ(a) - ψ(a+b)`` for |b| ≪ a (``_digamma_step``), and ``beta`` where a + b is
a pole; the t density's normaliser for large df, df = inf included (``_t_density``);
``log_ndtr`` for x ≤ 0 as ``√(2/π) / erfcx(-x/√2)``; ``log(a/b)`` as ``log a - log b`` where a/b
overflows; ``yv`` and ``ive`` by the one-sided recurrence where a neighbouring order is not
finite; the scaled ``ive`` and ``kve`` families from x = 1e3 (and 50 v²) by their asymptotic
series; ``dawsn`` from |x| = 12 and ``wofz`` from |z| = 12 by theirs (the forms cancel 2|z|²-fold);
``ψ(z+m) - ψ(z)`` of ``poch`` as ``_digamma_step``, and at the poles of ``Γ(z)`` (``_poch_dz``);
``binom`` where ``Γ(k+1)`` or ``Γ(n-k+1)`` has a pole (0 there: ``_binom_partials``).

The order ``v``/``n`` of a Bessel function (and ``n`` of ``expn``) and ``a``, ``b`` of
``betainc`` get no derivative
(as in JAX): their cotangent is an error raised only if that argument is traced, naming the
function, so a constant order (float or int) costs nothing. ``a`` of ``gammainc``/``gammaincc``
has one, :func:`gammainc_da` (forward-mode differentiation of the series and of the continued
fraction that evaluate ``P(a, x)``), computed only when ``a`` is traced; its own derivative in
``x`` is known, in ``a`` it is not (a second derivative in ``a`` raises). So have the functions
built on them: the inverses (``gammaincinv``, ...) by the implicit function theorem, their
partials written in their own output ``y`` (``∂y/∂q = 1 / (∂F/∂x)(y)``), so that derivatives of
every order come from differentiating the partials again.

Example::

    >>> import fusegrad as fg, scipy.special as sp
    >>> float(fg.grad(lambda x: sp.gammaln(x))(3.0))  # ψ(3) = 1.5 - γ
    0.9227843350984671
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import AbstractZero, NoTangent, Thunk, ZeroTangent, unthunk
from .common import (
    add_tangents,
    call,
    is_complex,
    lazy_tangent,
    materialize,
    scalar_rule,
    shape_of,
    unbroadcast_to,
)
from .registry import (
    FRULES,
    RRULES,
    is_differentiable,
    primitive,
    register_frule,
    register_rrule,
)

try:  # SciPy is optional: without it only np.sinc's rule (below) is registered.
    import scipy.special as sp
    from scipy.special import _ufuncs
except ImportError:  # pragma: no cover - depends on the environment
    sp = None

SQRT_PI = float(np.sqrt(np.pi))
SQRT_2 = float(np.sqrt(2.0))
SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))
INV_SQRT_2PI = float(1 / np.sqrt(2 * np.pi))
LOG_SQRT_2PI = float(0.5 * np.log(2 * np.pi))


class NoDerivativeError(NotImplementedError):
    """A derivative fusegrad does not implement (the order of a Bessel function, ``a`` of
    ``gammainc``): raised only when that argument is traced."""


def _raiser(what: str) -> Callable[[], Any]:
    def fail() -> Any:
        raise NoDerivativeError(
            f"fusegrad has no derivative of {what}. Pass that argument as a constant "
            "(fusegrad.numpy.stop_gradient(v)), or register your own rule with "
            "fusegrad.register_rrule"
        )

    return fail


def _no_derivative_in(ufunc: np.ufunc, index: int, what: str) -> None:
    """``ufunc``'s argument ``index`` has no derivative: its partial is kept as 0 in the table,
    and the reverse/forward rules raise ``NoDerivativeError`` when that argument is traced (its
    cotangent is a Thunk that raises when consumed; a constant's cotangent is never consumed)."""
    rrule, lazy = RRULES[ufunc]
    frule = FRULES[ufunc]
    message = f"scipy.special.{ufunc.__name__} with respect to {what}"

    def rule(*args: Any, **kwargs: Any) -> tuple:
        y, pullback = rrule(*args, **kwargs)

        def checked(dy: Any) -> tuple:
            grads = list(pullback(dy))
            if is_differentiable(args[index]):
                grads[index] = Thunk(_raiser(message))
            return tuple(grads)

        return y, checked

    def forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        if not isinstance(tangents[index], AbstractZero | type(None)):
            _raiser(message)()
        return frule(tangents, *args, **kwargs)

    rule.__name__ = f"rrule_{ufunc.__name__}"
    forward.__name__ = f"frule_{ufunc.__name__}"
    forward.lazy = True  # type: ignore[attr-defined]
    register_rrule(ufunc, lazy=lazy)(rule)
    register_frule(ufunc)(forward)


def _ive_shift(x: Any, y: Any) -> Any:
    # ive(v, z) = iv(v, z) exp(-|Re z|): not holomorphic for complex z; this is d/d(Re z).
    return -np.sign(np.real(x)) * y


IVE_FAR = 1e3  # from |x| = max(1e3, 50 v²) ive's slope is its asymptotic series'
_IVE_TERMS = 12  # each term at most 1/100 of the last there: 12 reach 1e-24


def _ive_slope(v: Any, x: Any, y: Any, near: Callable[[Any], Any]) -> Any:
    """``d/dx ive(v, x)``: ``near(x)``, the recurrence ``(I_{v-1} + I_{v+1})/2 e^-|x|`` minus
    ``sign(x) y``, for ``|x| < max(1e3, 50 v²)``; beyond, where that difference cancels x-fold
    (21% off at 1e15, and ``ive(2, x)`` is NaN from 1e10), the derivative of the asymptotic series
    ``ive(v, x) ~ (2πx)^-½ Σₖ (-aₖ)ᵏ / xᵏ``, ``aₖ = Πⱼ₌₁ᵏ (4v² - (2j-1)²) / (k! 8ᵏ)``:
    ``-(2π)^-½ Σₖ (-1)ᵏ aₖ (k + ½) x^(-k-3/2)``, times the parity ``-(-1)ᵛ`` for x < 0 (nan
    for a v not an integer there, as ive itself).

    >>> float(_ive_slope(1.0, np.float64(1e15), None, np.negative))  # ≈ -i1e(x) / 2x
    -6.307831305050394e-24
    """
    if is_complex(x):
        return near(x)
    v2 = 4.0 * np.square(v)
    threshold = np.maximum(IVE_FAR, 12.5 * v2)
    far = np.greater_equal(np.abs(x), threshold)
    ax = np.where(far, np.abs(x), threshold)  # safe values off each branch
    w = 1.0 / ax
    coef: Any = 1.0
    total: Any = 0.5
    for k in range(1, _IVE_TERMS):
        coef = -coef * (v2 - (2 * k - 1) ** 2) / (8.0 * k) * w
        total = total + coef * (k + 0.5)
    asym = -total * w / np.sqrt(2 * np.pi * ax)
    even = np.equal(np.remainder(v, 2.0), 0.0)
    parity = np.where(np.equal(v, np.floor(v)), np.where(even, -1.0, 1.0), np.nan)
    asym = asym * np.where(np.less(x, 0), parity, 1.0)  # (no nan in the branch not taken)
    return np.where(far, asym, near(np.where(far, 1.0, x)))


def _recurrence_fallback(sym: Any, alt: Any) -> Any:
    """``sym`` (the symmetric recurrence ``(f_{v-1} ± f_{v+1})/2``) where it is finite, else
    ``alt`` (the one-sided one): SciPy's ``yv(-1.5, 1e-300)`` is inf and ``ive(-1.5, 1e-300)``
    nan, from ``cos(vπ)`` not being 0, though ``yv(-0.5, ·)``'s slope there is 4e149."""
    return np.where(np.isfinite(sym), sym, alt)


def _yv_slope(v: Any, x: Any, y: Any) -> Any:
    """``Y_v' = (Y_{v-1} - Y_{v+1})/2``, or ``Y_{v-1} - (v/x) Y_v`` (v ≥ 0), ``(v/x) Y_v - Y_{v+1}``
    (v < 0) where the first is not finite."""
    sym = 0.5 * (sp.yv(v - 1, x) - sp.yv(v + 1, x))
    step = np.where(np.less(v, 0), 1.0, -1.0)
    alt = np.where(np.less(v, 0), -1.0, 1.0) * (sp.yv(v + step, x) - v / x * y)
    return _recurrence_fallback(sym, alt)


def _ive_near(v: Any, y: Any) -> Callable[[Any], Any]:
    def near(x: Any) -> Any:
        sym = 0.5 * (sp.ive(v - 1, x) + sp.ive(v + 1, x))
        step = np.where(np.less(v, 0), 1.0, -1.0)
        alt = sp.ive(v + step, x) + np.where(np.less(v, 0), 1.0, -1.0) * v / x * y
        return _recurrence_fallback(sym, alt) + _ive_shift(x, y)

    return near


ERFCX_TAIL = 25.0  # beyond it 2 x erfcx(x) - 2/√π cancels to 2x² ulps: the series instead


def _erfcx_slope(x: Any, y: Any) -> Any:
    """erfcx'(x) = 2 x erfcx(x) - 2/√π; for x > 25 its asymptotic series
    (2/√π) Σₙ₌₁ (-1)ⁿ (2n-1)!! / (2x²)ⁿ, to 1e-13 (the difference loses everything by 1e8).

    >>> float(_erfcx_slope(np.float64(1e8), np.float64(0.0)))  # ≈ -1 / (√π x²)
    -5.641895835477562e-17
    """
    if is_complex(x):
        return 2 * x * y - 2 / SQRT_PI
    far = np.greater(x, ERFCX_TAIL)
    t = 0.5 / np.square(np.where(far, x, ERFCX_TAIL))  # the safe value off the branch
    series: Any = 0.0
    term: Any = 1.0
    for n in range(1, 9):
        term = -term * (2 * n - 1) * t
        series = series + term
    return np.where(far, 2 / SQRT_PI * series, 2 * x * y - 2 / SQRT_PI)


def _trigamma_complex(z: Any) -> Any:
    """ψ'(z) for complex z: ψ'(z) = Σ_{k<10} 1/(z+k)² + ψ'(z+10), the last by its asymptotic
    series (error below 1e-13 for Re z > 0); NumPy ops, so differentiable again."""
    acc = 0.0
    for k in range(10):
        acc = acc + 1.0 / ((z + k) * (z + k))
    w = z + 10.0
    w2 = 1.0 / (w * w)
    series = 1 / 6 - w2 * (1 / 30 - w2 * (1 / 42 - w2 * (1 / 30 - w2 * 5 / 66)))
    tail = 1.0 / w + w2 / 2 + (w2 / w) * series
    return acc + tail


# --------------------------------------------------------------------------------------------------
# ∂/∂a of the regularized incomplete gamma functions
# --------------------------------------------------------------------------------------------------

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 5000


def _series_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """∂P/∂a for 0 < x < a + 1 from P = x^a e^(-x) / Γ(a+1) · Σₙ xⁿ / ((a+1)...(a+n)), the
    series differentiated term by term (every term positive: no cancellation). Near x = a it
    needs about 9 √a terms; an element still summing after 20 √a + 5000 is nan, never a
    truncated sum (5000 terms gave 32% too little at a = 1e8)."""
    total, dtotal = np.ones_like(a), np.zeros_like(a)
    live = np.arange(a.size)  # elements still summing; converged ones drop out
    term, dterm, al, xl = np.ones_like(a), np.zeros_like(a), a, x
    for n in range(1, _MAX_TERMS + int(20 * np.sqrt(np.max(a, initial=0.0)))):
        term = term * xl / (al + n)
        dterm = (dterm * xl - term) / (al + n)
        total[live] += term
        dtotal[live] += dterm
        more = (term > _EPS * total[live]) | (np.abs(dterm) > _EPS * np.abs(dtotal[live]))
        if not np.all(more):
            live, term, dterm, al, xl = live[more], term[more], dterm[more], al[more], xl[more]
            if live.size == 0:
                break
    total[live] = np.nan
    logx = np.log(x)
    pref = np.exp(a * logx - x - sp.gammaln(a + 1))
    return pref * total * (logx - sp.digamma(a + 1)) + pref * dtotal


def _fraction_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """-∂Q/∂a for x ≥ a + 1 from Q = x^a e^(-x) / Γ(a) · h, h the continued fraction
    1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/...)) by the modified Lentz method, carrying ∂/∂a of each
    quantity beside it (forward mode through the recurrence)."""
    b = x + 1 - a  # ∂b/∂a = -1 throughout
    h, dh = 1 / b, 1 / (b * b)
    live = np.arange(a.size)  # elements still iterating; converged ones drop out
    al, bl, c, dc, d, dd = a, b, np.full_like(a, 1 / _TINY), np.zeros_like(a), h.copy(), dh.copy()
    hl, dhl = h.copy(), dh.copy()
    for i in range(1, _MAX_TERMS):
        an, dan = -i * (i - al), float(i)
        bl = bl + 2
        dn, ddn = an * d + bl, dan * d + an * dd - 1.0
        small = np.abs(dn) < _TINY
        dn, ddn = np.where(small, _TINY, dn), np.where(small, 0.0, ddn)
        cn, dcn = bl + an / c, -1.0 + (dan - an * dc / c) / c
        small = np.abs(cn) < _TINY
        c, dc = np.where(small, _TINY, cn), np.where(small, 0.0, dcn)
        d, dd = 1 / dn, -ddn / (dn * dn)
        delta, ddelta = d * c, dd * c + d * dc
        hl, dhl = hl * delta, dhl * delta + hl * ddelta
        more = (np.abs(delta - 1) > 2 * _EPS) | (np.abs(ddelta) > 2 * _EPS)
        if not np.all(more):
            h[live], dh[live] = hl, dhl
            keep = (live, al, bl, c, dc, d, dd, hl, dhl)
            live, al, bl, c, dc, d, dd, hl, dhl = (v[more] for v in keep)
            if live.size == 0:
                break
    else:
        h[live], dh[live] = np.nan, np.nan  # not converged: never a truncated fraction
    logx = np.log(x)
    pref = np.exp(a * logx - x - sp.gammaln(a))
    return -(pref * h * (logx - sp.digamma(a)) + pref * dh)


GAMMAINC_DA_LARGE_A = 1e6  # from here the uniform asymptotic form (error below 4e-12 there)


def _log1pmx_neg(u: np.ndarray) -> np.ndarray:
    """``u - log1p(u)``, by its series for |u| < 0.01 (where the difference cancels)."""
    small = np.abs(u) < 0.01
    us = np.where(small, u, 0.0)
    series = np.zeros_like(u)
    for k in range(12, 1, -1):
        series = series * us + (-1.0) ** k / k
    return np.where(small, series * us * us, u - np.log1p(np.where(small, 0.0, u)))


def _large_a_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``∂P/∂a`` for large a from Temme's uniform expansion of ``P(a, x)`` (DLMF 8.12): with
    ``λ = x/a``, differentiating ``½ erfc(-η √(a/2)) - R_a(η)`` its leading terms leave
    ``-exp(-a(λ - 1 - log λ)) / √(2πa) · log λ / (λ - 1) · (1 + 1/(12a))`` (the last factor
    measured: the relative error is then about 1e-13 near x = a, 4e-12 thirty √a away, at
    a = 1e6, and falls as 1/a²)."""
    u = (x - a) / a
    lam = np.where(u == 0, 1.0, np.log1p(u) / np.where(u == 0, 1.0, u))
    return -np.exp(-a * _log1pmx_neg(u)) / np.sqrt(2 * np.pi * a) * lam * (1 + 1 / (12 * a))


@primitive
def gammainc_da(a: Any, x: Any) -> Any:
    """``∂/∂a`` of ``scipy.special.gammainc(a, x)`` (``-`` that of ``gammaincc``), for
    ``a > 0``, ``x ≥ 0`` (nan elsewhere, as SciPy's ``gammainc``);
    at ``a = 0``, where SciPy's value is 1, the limit ``-E₁(x)``, and 0 at ``a = inf`` (x finite).

    The series of ``P(a, x)`` (``x < a + 1``) or Lentz's continued fraction of ``Q(a, x)``
    (``x ≥ a + 1``), differentiated in ``a`` alongside their evaluation: relative accuracy about
    1e-12 up to ``a`` about 1e4, 1e-10 at 1e5 (the series needs about ``9 √a`` terms: 50 ms per
    element at ``a`` = 1e5 with ``x`` near ``a``). From ``a`` = 1e6 the leading terms of Temme's
    uniform expansion instead (``_large_a_da``): 1e-12 or better, in constant time.

    >>> h = 1e-6
    >>> fd = (sp.gammainc(2.0 + h, 1.5) - sp.gammainc(2.0 - h, 1.5)) / (2 * h)
    >>> bool(np.isclose(gammainc_da(2.0, 1.5), fd))
    True
    """
    a = np.asarray(materialize(a), dtype=float)
    x = np.asarray(materialize(x), dtype=float)
    a, x = np.broadcast_arrays(a, x)
    out = np.full(a.shape, np.nan)
    inside = (a > 0) & (x >= 0) & ~((a == np.inf) & (x == np.inf))  # SciPy's nan
    out[inside & ((x == 0) | (x == np.inf))] = 0.0
    out[(a == np.inf) & (x >= 0) & (x < np.inf)] = 0.0
    at_zero = (a == 0) & (x > 0)
    out[at_zero] = -sp.exp1(x[at_zero])
    with np.errstate(all="ignore"):
        large = inside & (a >= GAMMAINC_DA_LARGE_A) & (a < np.inf) & (x > 0) & (x < np.inf)
        if np.any(large):
            out[large] = _large_a_da(a[large], x[large])
        inside &= a < GAMMAINC_DA_LARGE_A
        series = inside & (x > 0) & (x < a + 1)
        if np.any(series):
            out[series] = _series_da(a[series], x[series])
        fraction = inside & (x >= a + 1) & (x < np.inf)
        if np.any(fraction):
            out[fraction] = _fraction_da(a[fraction], x[fraction])
    return out[()] if out.ndim == 0 else out


def _dgammainc_da_dx(a: Any, x: Any) -> Any:
    """``∂²P/∂a∂x = x^(a-1) e^(-x) / Γ(a) · (log x - ψ(a))`` (0 at x = 0)."""
    positive = x > 0
    safe = np.where(positive, x, 1.0)
    density = np.exp(sp.xlogy(a - 1, safe) - safe - sp.gammaln(a))
    return np.where(positive, density * (np.log(safe) - sp.digamma(a)), 0.0)


@register_rrule(gammainc_da)
def _gammainc_da_rule(a: Any, x: Any) -> tuple:
    """gammainc_da: x̄ = ȳ ∂²P/∂a∂x; ā raises (no second derivative in a)."""
    y = gammainc_da(a, x)

    def pullback(g: Any) -> tuple:
        da: Any = NoTangent()
        if is_differentiable(a):
            da = Thunk(_raiser("scipy.special.gammainc of second order in a"))
        dx: Any = NoTangent()
        if is_differentiable(x):
            dx = unbroadcast_to(materialize(g) * _dgammainc_da_dx(a, x), shape_of(x))
        return da, dx

    return y, pullback


@register_frule(gammainc_da)
def _gammainc_da_frule(tangents: tuple, a: Any, x: Any) -> tuple:
    """gammainc_da: ẏ = ∂²P/∂a∂x ẋ; a tangent of a raises."""
    ta, tx = tangents
    if not isinstance(ta, AbstractZero | type(None)):
        _raiser("scipy.special.gammainc of second order in a")()
    y = gammainc_da(a, x)
    if isinstance(tx, AbstractZero | type(None)):
        return y, ZeroTangent()
    return y, unthunk(tx) * _dgammainc_da_dx(a, x)


_gammainc_da_frule.lazy = False  # type: ignore[attr-defined]


def _derivative_in_a(ufunc: np.ufunc, sign: float) -> None:
    """Add ``∂/∂a = sign · gammainc_da(a, x)`` to ``ufunc``'s rules (its partial in ``a`` is 0 in
    the scalar_rule table): the reverse rule's cotangent of ``a`` is a Thunk, computed only when
    it is consumed (when ``a`` is traced), the forward rule adds the term when ``a``'s tangent
    is not zero."""
    rrule, lazy = RRULES[ufunc]
    frule = FRULES[ufunc]

    def rule(*args: Any, **kwargs: Any) -> tuple:
        y, pullback = rrule(*args, **kwargs)
        a, x = args

        def with_a(dy: Any) -> tuple:
            grads = list(pullback(dy))
            if is_differentiable(a):

                def da() -> Any:
                    g = materialize(dy) * (sign * gammainc_da(a, x))
                    return unbroadcast_to(g, shape_of(a))

                grads[0] = Thunk(da)
            return tuple(grads)

        return y, with_a

    def forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        ta = tangents[0]
        if isinstance(ta, AbstractZero | type(None)):
            return frule(tangents, *args, **kwargs)
        y, dot = frule((ZeroTangent(), *tangents[1:]), *args, **kwargs)
        a, x = (materialize(v) for v in args)
        term = lazy_tangent(ta) * (sign * gammainc_da(a, x))
        return y, add_tangents(dot, term)

    rule.__name__ = f"rrule_{ufunc.__name__}"
    forward.__name__ = f"frule_{ufunc.__name__}"
    forward.lazy = True  # type: ignore[attr-defined]
    register_rrule(ufunc, lazy=lazy)(rule)
    register_frule(ufunc)(forward)


def _gamma_density(a: Any, x: Any) -> Any:
    """``∂P(a, x)/∂x = x^(a-1) e^(-x) / Γ(a)``, the gamma distribution's density (0 at
    x = inf, where the exponent is inf - inf for a > 1)."""
    infinite = np.equal(x, np.inf)
    safe = np.where(infinite, 1.0, x)
    return np.where(infinite, 0.0, np.exp(sp.xlogy(a - 1, safe) - safe - sp.gammaln(a)))


def _log_ndtr_slope(x: Any, y: Any) -> Any:
    """``log_ndtr'(x) = φ(x) / Φ(x)``: ``exp(-x²/2 - log√(2π) - y)`` for x > 0, and for x ≤ 0
    ``√(2/π) / erfcx(-x/√2)`` (the exponent's two terms near x²/2 cancel: 78% off at -1e8).

    >>> float(_log_ndtr_slope(np.float64(-1e10), np.float64(0.0)))  # ≈ -x
    10000000000.0
    """
    if is_complex(x):
        return np.exp(-0.5 * x * x - LOG_SQRT_2PI - y)
    left = np.less_equal(x, 0)
    tail = SQRT_2_OVER_PI / sp.erfcx(-np.where(left, x, 0.0) / SQRT_2)
    right, y_right = np.where(left, 0.0, x), np.where(left, 0.0, y)  # safe off the branch
    return np.where(left, tail, np.exp(-0.5 * right * right - LOG_SQRT_2PI - y_right))


_PSI_SHIFT = 10  # ψ(a) - ψ(a + b) is shifted to a + 10 ≥ 10, where ψ's series is exact
# ψ(x) ~ log x - 1/(2x) - Σₖ B₂ₖ / (2k x²ᵏ): B₂ₖ / 2k for k = 1..7 (next term 4e-17 at x = 10)
_PSI_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def _digamma_step(a: Any, b: Any) -> Any:
    """``ψ(a) - ψ(a + b)`` (the partial of ``betaln``), for a, a + b > 0 without the cancellation
    of the two digammas when |b| ≪ a (5e-3 off at (1e5, 1e-8)): ``Σₖ₌₀⁹ -b / (a+b+k) / (a+k)``
    plus the same at ``x = a + 10`` by ψ's asymptotic series, each of its terms a difference
    written without cancelling: ``-log1p(b/x) - b / (2x(x+b)) + Σ cₖ x⁻²ᵏ expm1(-2k log1p(b/x))``.
    Elsewhere (a ≤ 0, b ≤ -a/2, complex) the plain difference.

    >>> float(_digamma_step(np.float64(1e5), np.float64(1e-8)))  # ≈ -b ψ'(a) ≈ -b/a
    -1.0000050000166167e-13
    """
    if is_complex(a) or is_complex(b):
        return sp.digamma(a) - sp.digamma(a + b)
    # (b ≤ -a/2: a + b ≪ a does not cancel, and log1p(b/x) would lose 1 + b/x's digits)
    ok = np.logical_and(np.greater(a, 0), np.greater(b, -0.5 * a))
    a_ok, b_ok = np.where(ok, a, 1.0), np.where(ok, b, 1.0)  # safe values off each branch
    total: Any = 0.0
    for k in range(_PSI_SHIFT):
        total = total - b_ok / (a_ok + b_ok + k) / (a_ok + k)  # (no product: it underflows)
    x = a_ok + _PSI_SHIFT
    lg = np.log1p(b_ok / x)
    total = total - lg - b_ok / (2 * x * (x + b_ok))
    inv2 = 1 / (x * x)
    power: Any = 1.0
    for k, c in enumerate(_PSI_SERIES, start=1):
        power = power * inv2
        total = total + c * power * np.expm1(-2 * k * lg)
    a_no, b_no = np.where(ok, 1.0, a), np.where(ok, 1.0, b)
    return np.where(ok, total, sp.digamma(a_no) - sp.digamma(a_no + b_no))


def _beta_slope(a: Any, b: Any, y: Any) -> Any:
    """``∂B(a, b)/∂a = B(a, b) (ψ(a) - ψ(a+b))``; where a + b is 0, -1, -2, ... (B = 0 and
    ψ(a+b) infinite) ``Γ(a) Γ(b) (ψ(a)/Γ(a+b) + (1/Γ)'(a+b))``, the same without the pole.

    >>> float(_beta_slope(np.float64(0.5), np.float64(-1.5), np.float64(0.0)))
    -4.1887902047863905
    """
    if is_complex(a) or is_complex(b):
        return y * _digamma_step(a, b)
    c = a + b
    pole = np.logical_and(np.less_equal(c, 0), np.equal(c, np.floor(c)))
    a_p, b_p = np.where(pole, a, 0.5), np.where(pole, b, -1.5)  # safe values off each branch
    c_p = a_p + b_p
    r = sp.rgamma(c_p)  # 0 at the pole, but not its derivative
    at_pole = sp.gamma(a_p) * sp.gamma(b_p) * (sp.digamma(a_p) * r + _rgamma_slope(c_p, r))
    a_n, b_n = np.where(pole, 1.0, a), np.where(pole, 1.0, b)
    return np.where(pole, at_pole, y * _digamma_step(a_n, b_n))


def _poch_dz(z: Any, m: Any, y: Any) -> Any:
    """``∂ poch(z, m) / ∂z = y (ψ(z+m) - ψ(z))``. Where ``Γ(z)`` has a pole (z = 0, -1, ...) that
    is 0 · inf (NaN): ``poch = Γ(z+m) / Γ(z)`` is 0 there, with slope ``Γ(z+m) (1/Γ)'(z)``; where
    ``z + m`` is a pole too (an integer m with z + m ≤ 0, where poch is a finite product) the
    digammas' poles cancel, by reflection ``ψ(1-z-m) - ψ(1-z)``.

    >>> z, m = np.float64(-2.0), np.float64(3.0)  # poch = z(z+1)(z+2)
    >>> round(float(_poch_dz(z, m, sp.poch(z, m))), 12)
    2.0
    """
    if is_complex(z) or is_complex(m):
        return -y * _digamma_step(z, m)
    c = z + m
    z_pole = np.logical_and(np.less_equal(z, 0), np.equal(z, np.floor(z)))
    both = np.logical_and(z_pole, np.logical_and(np.less_equal(c, 0), np.equal(c, np.floor(c))))
    z_only = np.logical_and(z_pole, np.logical_not(both))
    # each branch on safe values where it is not taken (a NaN there poisons where's derivative)
    zb, mb = np.where(both, z, 0.0), np.where(both, m, 0.0)
    with np.errstate(invalid="ignore"):  # (y is infinite at the poles of poch itself)
        at_both = y * (sp.digamma(1 - zb - mb) - sp.digamma(1 - zb))
    zz, cz = np.where(z_only, z, 1.0), np.where(z_only, c, 1.0)
    at_z = sp.gamma(cz) * _rgamma_slope(zz, sp.rgamma(zz))
    zn, mn = np.where(z_pole, 1.0, z), np.where(z_pole, 1.0, m)
    return np.where(both, at_both, np.where(z_only, at_z, -y * _digamma_step(zn, mn)))


def _binom_partials(n: Any, k: Any, y: Any) -> tuple[Any, Any]:
    """``(∂/∂n, ∂/∂k)`` of ``binom(n, k) = Γ(n+1) / (Γ(k+1) Γ(n-k+1))``: ``y (ψ(n+1) - ψ(n-k+1))``
    and ``y (ψ(n-k+1) - ψ(k+1))`` (the first by ``_digamma_step``). Where ``Γ(k+1)`` or
    ``Γ(n-k+1)`` has a pole (k a negative integer, or an integer k > n for an integer n ≥ 0)
    binom is 0 and those are 0 · inf: there ``1/Γ`` at the pole is 0 with slope
    ``(1/Γ)'`` (``_rgamma_slope``), and the finite ratio of the other two Gammas is a ``poch``.
    (Where n is a negative integer SciPy's binom is nan, and so are these.)

    >>> n, k = np.float64(2.0), np.float64(3.0)  # binom(n, 3) = n(n-1)(n-2)/6: slope 1/3 at 2
    >>> [round(float(d), 12) for d in _binom_partials(n, k, sp.binom(n, k))]
    [0.333333333333, -0.333333333333]
    """
    b, c = k + 1, n - k + 1
    b_pole = np.logical_and(np.less_equal(b, 0), np.equal(b, np.floor(b)))
    c_pole = np.logical_and(np.less_equal(c, 0), np.equal(c, np.floor(c)))
    pole = np.logical_or(b_pole, c_pole)
    # each branch on safe values where it is not taken (a NaN there poisons where's derivative);
    # the pole branches are identities near the pole too (1/Γ there is 0, not its derivative),
    # so that their own derivatives, the second ones of binom, are right as well
    nb, kb = np.where(b_pole, n, 2.0), np.where(b_pole, k, -1.0)  # Γ(k+1) at a pole
    rb, rc = sp.rgamma(kb + 1), sp.rgamma(nb - kb + 1)
    q = sp.poch(nb - kb + 1, kb)  # Γ(n+1) / Γ(n-k+1)
    at_b_n = -rb * q * _digamma_step(nb - kb + 1, kb)
    at_b_k = q * (_rgamma_slope(kb + 1, rb) + rb * sp.digamma(nb - kb + 1))
    nc, kc = np.where(c_pole, n, 1.0), np.where(c_pole, k, 2.0)  # Γ(n-k+1) at a pole
    rc = sp.rgamma(nc - kc + 1)
    slope_c = _rgamma_slope(nc - kc + 1, rc)
    pc = sp.poch(kc + 1, nc - kc)  # Γ(n+1) / Γ(k+1)
    at_c_n = pc * (sp.digamma(nc + 1) * rc + slope_c)
    at_c_k = -pc * (sp.digamma(kc + 1) * rc + slope_c)
    n_ok, k_ok = np.where(pole, 2.0, n), np.where(pole, 1.0, k)
    y_ok = np.where(pole, 2.0, y)
    dn = -y_ok * _digamma_step(n_ok - k_ok + 1, k_ok)
    dk = y_ok * (sp.digamma(n_ok - k_ok + 1) - sp.digamma(k_ok + 1))
    dn = np.where(b_pole, at_b_n, np.where(c_pole, at_c_n, dn))
    dk = np.where(b_pole, at_b_k, np.where(c_pole, at_c_k, dk))
    return dn, dk


def _log_ratio(a: Any, b: Any) -> Any:
    """``log(a / b)``, as ``log a - log b`` where ``a / b`` overflows or underflows."""
    r = a / b
    normal = np.logical_and(np.greater(np.abs(r), _TINY), np.less(np.abs(r), 1 / _TINY))
    return np.where(normal, np.log(r), np.log(a) - np.log(b))


def _rgamma_slope(x: Any, y: Any) -> Any:
    """``(1/Γ)'(x) = -ψ(x) / Γ(x)``; at its zeros 0, -1, -2, ... (0 · inf there) by the
    reflection ``1/Γ(x) = Γ(1-x) sin(πx)/π``: ``Γ(1-x) (cos πx - ψ(1-x) sin(πx)/π)``,
    ``(-1)ⁿ n!`` (a formula, not that constant, so that its own derivative is right too).

    >>> _rgamma_slope(np.array([0.0, -3.0, 2.0]), sp.rgamma(np.array([0.0, -3.0, 2.0])))
    array([ 1.        , -6.        , -0.42278434])
    """
    if is_complex(x):
        return -y * sp.digamma(x)
    pole = np.logical_and(np.less_equal(x, 0), np.equal(x, np.floor(x)))
    r = np.where(pole, x, 0.5)  # safe values off each branch
    s = 1 - r
    reflected = sp.gamma(s) * (np.cos(np.pi * r) - sp.digamma(s) * np.sin(np.pi * r) / np.pi)
    return np.where(pole, reflected, -y * sp.digamma(np.where(pole, 0.5, x)))


def _beta_density(a: Any, b: Any, x: Any) -> Any:
    """``∂I_x(a, b)/∂x = x^(a-1) (1-x)^(b-1) / B(a, b)``, the beta distribution's density."""
    return np.exp(sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x) - sp.betaln(a, b))


# log Γ(z + ½) - log Γ(z) - ½ log z = Σₖ cₖ / z^(2k+1): the difference of the Stirling series
_T_NORM_SERIES = (-1 / 8, 1 / 192, -1 / 640, 17 / 14336, -31 / 18432, 691 / 180224)
_T_NORM_FAR = 20.0  # z = df/2 from which the series (error below 2e-17 there) is used


def _t_density(df: Any, t: Any) -> Any:
    """Student's t density with ``df`` degrees of freedom at ``t`` (``stdtr``'s derivative).

    Its log-normaliser ``log Γ((df+1)/2) - log Γ(df/2) - ½ log(π df)`` cancels for large df (2e-4
    off at 1e12, nothing left at 1e16): from ``df/2 = 20`` it is ``series(df/2) - ½ log 2π``, the
    series (``_T_NORM_SERIES``) tending to 0, so df = inf gives the normal density, the limit.

    >>> float(_t_density(np.float64(1e16), np.float64(0.5)))  # φ(0.5)
    0.3520653267642995
    """
    z = 0.5 * df
    far = np.greater_equal(z, _T_NORM_FAR)
    w = 1.0 / np.where(far, z, _T_NORM_FAR)  # the safe value off the branch
    w2 = w * w
    series: Any = 0.0
    for c in reversed(_T_NORM_SERIES):
        series = series * w2 + c
    near_z = np.where(far, 1.0, z)
    direct = sp.gammaln(near_z + 0.5) - sp.gammaln(near_z) - 0.5 * np.log(np.pi * 2 * near_z)
    log_norm = np.where(far, series * w - LOG_SQRT_2PI, direct)
    # (df + 1)/2 log1p(t²/df) is 0 · inf at df = inf: its limit t²/2 there
    finite = np.isfinite(df)
    safe_df = np.where(finite, df, 1.0)
    kernel = np.where(finite, (safe_df + 1) / 2 * np.log1p(t * t / safe_df), 0.5 * t * t)
    return np.exp(log_norm - kernel)


def _inverse_in_a(a: Any, q: Any, y: Any) -> Any:
    """``∂y/∂a`` of ``y = gammaincinv(a, q)`` (and of ``gammainccinv``): ``P(a, y)`` is held at
    ``q``, so ``∂y/∂a = -(∂P/∂a) / (∂P/∂x)`` at ``(a, y)``."""
    return -gammainc_da(a, y) / _gamma_density(a, y)


# --------------------------------------------------------------------------------------------------
# Elementary functions, exponential integrals, Dawson, Faddeeva, elliptic integrals, Box-Cox
# --------------------------------------------------------------------------------------------------

EXPREL_NEAR = 0.5  # below it exprel' is its series (the closed form cancels 1/x-fold)
# exprel'(x) = Σₙ₌₁ n xⁿ⁻¹ / (n+1)!: the coefficients n / (n+1)! for n = 1..18 (the next term is
# below 1e-23 at |x| = 0.5)
_EXPREL_SERIES = tuple(n / float(np.prod(np.arange(1.0, n + 2))) for n in range(1, 19))


def _exprel_slope(x: Any, y: Any) -> Any:
    """``exprel'(x) = (eˣ - exprel x) / x``, for x > 0 written ``y (1 - 1/x) + 1/x`` (inf, not
    inf - inf, where eˣ overflows); for |x| < 1/2, where that cancels (1e-9 off at 1e-7), its
    series ``1/2 + x/3 + x²/8 + ...`` (a polynomial, so its own derivatives are right at 0 too).

    >>> float(_exprel_slope(np.float64(0.0), np.float64(1.0)))
    0.5
    """
    near = np.less(np.abs(x), EXPREL_NEAR)
    xs = np.where(near, x, 0.0)
    series: Any = 0.0
    for c in reversed(_EXPREL_SERIES):
        series = series * xs + c
    xf = np.where(near, 1.0, x)  # safe values off each branch
    yf = np.where(near, 1.0, y)
    far = np.where(np.greater(xf, 0), yf * (1 - 1 / xf) + 1 / xf, (np.exp(xf) - yf) / xf)
    return np.where(near, series, far)


def _boxcox_in_lambda(lam: Any, log_x: Any) -> Any:
    """``∂/∂λ (e^(λ L) - 1)/λ`` with ``L = log x`` (``log1p x`` for ``boxcox1p``): the function
    is ``L exprel(λL)``, so this is ``L² exprel'(λL)``, ``L²/2`` at λ = 0 and no cancellation
    for small λ."""
    t = lam * log_x
    return log_x * log_x * _exprel_slope(t, sp.exprel(t))


def _exp_over(x: Any, sign: float) -> Any:
    """``e^(sign x) / x`` (the slope of ``expi``; ``-`` that of ``exp1`` with sign -1), as
    ``e^(sign x/2) (e^(sign x/2) / x)``: ``expi``'s does not overflow before its value does
    (x ≤ 716), ``exp1``'s keeps its digits where ``e^-x`` alone is subnormal (x > 708), and
    ``exp(sign x - log x)`` would lose ``|x| ε`` to the exponent's rounding."""
    half = np.exp(0.5 * sign * x)
    return half * (half / x)


def _expn_slope(n: Any, x: Any, y: Any) -> Any:
    """``E_n'(x) = -E_{n-1}(x)``; for n = 0 (SciPy has no ``E_{-1}``) ``-e^-x (x + 1) / x²``."""
    zero = np.equal(n, 0)
    xs = np.where(zero, x, 1.0)
    return np.where(
        zero, -np.exp(-xs) * (xs + 1) / (xs * xs), -sp.expn(np.where(zero, 1, n - 1), x)
    )


DAWSN_TAIL = 12.0  # beyond it 1 - 2 x D(x) cancels 2x²-fold: the asymptotic series instead
_TAIL_TERMS = 20  # of the series in 1/(2x²) beyond 12 (the 20th is below 1e-24 there)


def _dawsn_slope(x: Any, y: Any) -> Any:
    """``D'(x) = 1 - 2 x D(x)``; for |x| > 12 its asymptotic series
    ``-Σₙ₌₁ (2n-1)!! / (2x²)ⁿ`` (the difference keeps nothing at 1e8).

    >>> float(_dawsn_slope(np.float64(1e8), np.float64(0.0)))  # ≈ -1 / (2 x²)
    -5.0000000000000005e-17
    """
    if is_complex(x):
        return 1 - 2 * x * y
    far = np.greater(np.abs(x), DAWSN_TAIL)
    t = 0.5 / np.square(np.where(far, x, DAWSN_TAIL))  # the safe value off the branch
    series: Any = 0.0
    term: Any = 1.0
    for n in range(1, _TAIL_TERMS + 1):
        term = term * (2 * n - 1) * t
        series = series - term
    xn, yn = np.where(far, 0.0, x), np.where(far, 0.0, y)
    return np.where(far, series, 1 - 2 * xn * yn)


WOFZ_FAR = 12.0  # |z| beyond which w'(z) is its asymptotic series (-2zw + 2i/√π cancels)


def _wofz_slope(z: Any, y: Any) -> Any:
    """``w'(z) = -2 z w(z) + 2i/√π``, which cancels ``2|z|²``-fold for large |z| where w is small:
    there (|z| > 12) ``-i/√π Σₙ₌₀ (2n+1)!! / (2ⁿ z^(2n+2))`` for Im z ≥ 0, and by
    ``w(z) = 2 e^(-z²) - w(-z)`` ``-4 z e^(-z²)`` plus that series at ``-z`` below the axis.

    >>> complex(_wofz_slope(np.complex128(1e8), np.complex128(0)))  # ≈ -i / (√π z²)
    -5.641895835477564e-17j
    """
    z = np.asarray(z) + 0j if not is_complex(z) else z
    far = np.greater(np.abs(z), WOFZ_FAR)
    upper = np.greater_equal(np.imag(z), 0)
    zf = np.where(far, z, WOFZ_FAR)  # safe values off each branch
    u = np.where(upper, zf, -zf)  # in the upper half plane
    inv2 = 1 / (u * u)
    series: Any = 0.0
    term: Any = 1.0
    for n in range(_TAIL_TERMS):
        series = series + term
        term = term * (2 * n + 3) * 0.5 * inv2
    tail = -1j / SQRT_PI * series * inv2
    lower = np.where(upper, 0.0, -4 * zf * np.exp(-(np.where(upper, 0.0, zf) ** 2)))
    zn, yn = np.where(far, 0.0, z), np.where(far, 0.0, y)
    return np.where(far, tail + lower, -2 * zn * yn + 2j / SQRT_PI)


def _spence_slope(z: Any, y: Any) -> Any:
    """``spence'(z) = log z / (1 - z)`` (SciPy's ``spence(z) = ∫₁ᶻ log t / (1 - t) dt``), written
    ``-log1p(u)/u`` with ``u = z - 1`` (exact near 1), and for |u| < 1e-3 its series
    ``-1 + u/2 - u²/3 + ...`` (-1 at z = 1, and its own derivatives right there); for
    |u| ≥ 1/2 ``log z / (1 - z)`` itself (``z - 1`` is no longer exact: -1 for z = 1e-300)."""
    u = z - 1
    near = np.less(np.abs(u), 1e-3)
    us = np.where(near, u, 0.0)
    series: Any = 0.0
    for k in range(8, 0, -1):
        series = series * us + (-1.0) ** k / k
    mid = np.less(np.abs(u), 0.5)
    um = np.where(near | ~mid, 0.5, u)  # safe values off each branch
    zf = np.where(mid, 2.0, z)
    return np.where(near, series, np.where(mid, -np.log1p(um) / um, np.log(zf) / (1 - zf)))


ELLIP_NEAR = 0.25  # below |m| = 1/4 the slopes of K and E are their series (the forms cancel)
# K(m) = π/2 Σ cₙ² mⁿ, E(m) = π/2 Σ cₙ² mⁿ / (1 - 2n), cₙ = (1/2)ₙ / n!: 30 terms reach 1e-18
_ELLIP_C2 = tuple(float(sp.poch(0.5, n) / sp.factorial(n)) ** 2 for n in range(31)) if sp else ()


def _ellip_series(m: Any, of_e: bool) -> Any:
    total: Any = 0.0
    for n in range(30, 0, -1):
        c = n * _ELLIP_C2[n] / (1 - 2 * n if of_e else 1)
        total = total * m + c
    return np.pi / 2 * total


def _ellipk_slope(m: Any, y: Any) -> Any:
    """``K'(m) = (E(m) - (1 - m) K(m)) / (2 m (1 - m))`` (DLMF 19.4.1), inf at m = 1; for
    |m| < 1/4, where that cancels 1/m-fold, its series ``π/2 Σ n cₙ² mⁿ⁻¹`` (π/8 at 0)."""
    near = np.less(np.abs(m), ELLIP_NEAR)
    one = np.equal(m, 1)
    mf = np.where(near | one, 0.5, m)  # safe values off each branch
    form = (sp.ellipe(mf) - (1 - mf) * sp.ellipk(mf)) / (2 * mf * (1 - mf))
    return np.where(near, _ellip_series(np.where(near, m, 0.0), False), np.where(one, np.inf, form))


def _ellipe_slope(m: Any, y: Any) -> Any:
    """``E'(m) = (E(m) - K(m)) / (2m)`` (DLMF 19.4.2), -inf at m = 1; for |m| < 1/4 its series
    ``π/2 Σ n cₙ² mⁿ⁻¹ / (1 - 2n)`` (-π/8 at 0)."""
    near = np.less(np.abs(m), ELLIP_NEAR)
    one = np.equal(m, 1)
    mf = np.where(near | one, 0.5, m)  # safe values off each branch
    form = (sp.ellipe(mf) - sp.ellipk(mf)) / (2 * mf)
    return np.where(near, _ellip_series(np.where(near, m, 0.0), True), np.where(one, -np.inf, form))


def _huber_partials() -> tuple[Callable, Callable]:
    """``huber(δ, r)``: ``r²/2`` for |r| ≤ δ, else ``δ (|r| - δ/2)`` (inf for δ < 0, where the
    partials are nan)."""

    def in_delta(d: Any, r: Any, y: Any) -> Any:
        inner = np.less_equal(np.abs(r), d)
        return np.where(np.less(d, 0), np.nan, np.where(inner, 0.0, np.abs(r) - d))

    def in_r(d: Any, r: Any, y: Any) -> Any:
        inner = np.less_equal(np.abs(r), d)
        return np.where(np.less(d, 0), np.nan, np.where(inner, r, d * np.sign(r)))

    return in_delta, in_r


def _pseudo_huber_partials() -> tuple[Callable, Callable]:
    """``pseudo_huber(δ, r) = δ² (√(1 + (r/δ)²) - 1)``; with ``u = √(δ² + r²)``:
    ``∂r = r δ / u`` and ``∂δ = r⁴ / (u (u + δ)²)`` (that of ``2y/δ - r²/(δ s)``, without its
    cancellation for δ ≫ r), |r| at δ = 0 and both 0 at δ = r = 0; nan for δ < 0 (inf there)."""

    def parts(d: Any, r: Any) -> tuple[Any, Any, Any]:
        u = np.hypot(d, r)
        zero = np.equal(u, 0)
        return zero, np.where(zero, 1.0, u), np.where(np.less(d, 0), np.nan, 0.0)

    def in_delta(d: Any, r: Any, y: Any) -> Any:
        zero, u, bad = parts(d, r)
        r2 = r * r
        return np.where(zero, 0.0, r2 * r2 / (u * np.square(u + d))) + bad

    def in_r(d: Any, r: Any, y: Any) -> Any:
        # r / √(1 + (r/δ)²) for |r| ≤ |δ|, δ sign(r) / √(1 + (δ/r)²) beyond: their own
        # derivatives do not cancel (r δ / u's in r, δ³/u³, came out as δ/u - r²δ/u³: 1e-6 off
        # at r = 1e6 δ; in δ, r³/u³ as r/u - rδ²/u³: 3e-5 off at δ = 5e5 r)
        zero, _, bad = parts(d, r)
        inner = np.less_equal(np.abs(r), np.abs(d))
        rf = np.where(inner, 1.0, r)  # safe values off each branch
        df = np.where(inner, d, 1.0)
        outer = d * np.sign(rf) / np.sqrt(1 + np.square(d / rf))
        near = r / np.sqrt(1 + np.square(r / df))
        return np.where(zero, 0.0, np.where(inner, near, outer)) + bad

    return in_delta, in_r


def _owens_t_in_h(h: Any, a: Any, y: Any) -> Any:
    """``∂T(h, a)/∂h = -φ(h) erf(a h / √2) / 2``."""
    return -0.5 * INV_SQRT_2PI * np.exp(-0.5 * h * h) * sp.erf(a * h / SQRT_2)


def _owens_t_in_a(h: Any, a: Any, y: Any) -> Any:
    """``∂T(h, a)/∂a = exp(-h² (1 + a²)/2) / (2π (1 + a²))``, the integrand at a."""
    s = 1 + a * a
    return np.exp(-0.5 * h * h * s) / (2 * np.pi * s)


def _kve_slope(v: Any, x: Any, y: Any) -> Any:
    """``d/dx kve(v, x)``, ``kve = K_v(x) eˣ`` (holomorphic): ``kve - (kve(v-1) + kve(v+1))/2``,
    which cancels x-fold; from |x| = max(1e3, 50 v²) the derivative of the asymptotic series
    ``kve(v, x) ~ (π/2x)^½ Σₖ aₖ / xᵏ`` (``aₖ`` as in ``_ive_slope``, all of one sign):
    ``-(π/2)^½ Σₖ aₖ (k + ½) x^(-k-3/2)``.

    >>> float(_kve_slope(0.0, np.float64(1e15), sp.k0e(1e15)))  # ≈ -k0e(x) / 2x
    -1.9816636488030047e-23
    """
    if is_complex(x):
        return y - 0.5 * (sp.kve(v - 1, x) + sp.kve(v + 1, x))
    v2 = 4.0 * np.square(v)
    threshold = np.maximum(IVE_FAR, 12.5 * v2)
    far = np.greater_equal(x, threshold)
    ax = np.where(far, x, threshold)  # the safe value off the branch
    w = 1.0 / ax
    coef: Any = 1.0
    total: Any = 0.5
    for k in range(1, _IVE_TERMS):
        coef = coef * (v2 - (2 * k - 1) ** 2) / (8.0 * k) * w
        total = total + coef * (k + 0.5)
    asym = -total * w * np.sqrt(np.pi / (2 * ax))
    xn, yn = np.where(far, 1.0, x), np.where(far, 1.0, y)
    return np.where(far, asym, yn - 0.5 * (sp.kve(v - 1, xn) + sp.kve(v + 1, xn)))


def _yve_slope(v: Any, x: Any, y: Any) -> Any:
    """``d/d(Re z) yve(v, z)`` (``Y_v(z) e^-|Im z|``): ``(yve(v-1) - yve(v+1))/2``, or the
    one-sided recurrence where that is not finite (as ``_yv_slope``)."""
    sym = 0.5 * (sp.yve(v - 1, x) - sp.yve(v + 1, x))
    step = np.where(np.less(v, 0), 1.0, -1.0)
    alt = np.where(np.less(v, 0), -1.0, 1.0) * (sp.yve(v + step, x) - v / x * y)
    return _recurrence_fallback(sym, alt)


def _declare() -> None:
    """The scalar_rule table of scipy.special's ufuncs (run once, when SciPy is installed)."""
    _zeta = _ufuncs._zeta

    def _trigamma(x: Any) -> Any:
        if np.iscomplexobj(x):  # ζ(2, q) has real q only: recurrence + asymptotic series
            return _trigamma_complex(x)
        return _zeta(2.0, x)

    # fmt: off
    scalar_rule(sp.gammaln,   lambda x, y: sp.digamma(x))
    scalar_rule(sp.loggamma,  lambda x, y: sp.digamma(x))  # holomorphic off the branch cut
    scalar_rule(sp.digamma,   lambda x, y: _trigamma(x))
    scalar_rule(_zeta,        None, lambda s, q, y: -s * _zeta(s + 1, q))
    scalar_rule(sp.gamma,     lambda x, y: y * sp.digamma(x))
    scalar_rule(sp.rgamma,    _rgamma_slope)
    scalar_rule(sp.gammasgn,  None)
    scalar_rule(sp.beta,      lambda a, b, y: _beta_slope(a, b, y),
                              lambda a, b, y: _beta_slope(b, a, y))
    scalar_rule(sp.betaln,    lambda a, b, y: _digamma_step(a, b),
                              lambda a, b, y: _digamma_step(b, a))
    scalar_rule(sp.gammainc,  None, lambda a, x, y: _gamma_density(a, x))
    scalar_rule(sp.gammaincc, None, lambda a, x, y: -_gamma_density(a, x))
    # the inverses, by the implicit function theorem: partials in their output y
    scalar_rule(sp.gammaincinv,  _inverse_in_a, lambda a, q, y: 1 / _gamma_density(a, y))
    scalar_rule(sp.gammainccinv, _inverse_in_a, lambda a, q, y: -1 / _gamma_density(a, y))
    scalar_rule(sp.chdtr,     lambda v, x, y: 0.5 * gammainc_da(v / 2, x / 2),
                              lambda v, x, y: 0.5 * _gamma_density(v / 2, x / 2))
    scalar_rule(sp.chdtrc,    lambda v, x, y: -0.5 * gammainc_da(v / 2, x / 2),
                              lambda v, x, y: -0.5 * _gamma_density(v / 2, x / 2))
    scalar_rule(sp.chdtri,    lambda v, p, y: _inverse_in_a(v / 2, p, y / 2),
                              lambda v, p, y: -2 / _gamma_density(v / 2, y / 2))
    scalar_rule(sp.gdtr,      lambda a, b, x, y: x * _gamma_density(b, a * x),
                              lambda a, b, x, y: gammainc_da(b, a * x),
                              lambda a, b, x, y: a * _gamma_density(b, a * x))
    scalar_rule(sp.gdtrc,     lambda a, b, x, y: -x * _gamma_density(b, a * x),
                              lambda a, b, x, y: -gammainc_da(b, a * x),
                              lambda a, b, x, y: -a * _gamma_density(b, a * x))
    scalar_rule(sp.pdtr,      None, lambda k, m, y: -_gamma_density(np.floor(k) + 1, m))
    scalar_rule(sp.pdtrc,     None, lambda k, m, y: _gamma_density(np.floor(k) + 1, m))
    scalar_rule(sp.pdtri,     None, lambda k, q, y: -1 / _gamma_density(np.floor(k) + 1, y))
    scalar_rule(sp.erfinv,    lambda x, y: SQRT_PI / 2 * np.exp(y * y))
    scalar_rule(sp.erfcinv,   lambda x, y: -SQRT_PI / 2 * np.exp(y * y))
    scalar_rule(sp.erfcx,     _erfcx_slope)
    scalar_rule(sp.ndtr,      lambda x, y: INV_SQRT_2PI * np.exp(-0.5 * x * x))
    scalar_rule(sp.ndtri,     lambda x, y: np.exp(0.5 * y * y) / INV_SQRT_2PI)
    scalar_rule(sp.log_ndtr,  _log_ndtr_slope)
    scalar_rule(sp.entr,      lambda x, y: -(np.log(x) + 1))
    scalar_rule(sp.rel_entr,  lambda a, b, y: _log_ratio(a, b) + 1, lambda a, b, y: -a / b)
    scalar_rule(sp.kl_div,    lambda a, b, y: _log_ratio(a, b),     lambda a, b, y: 1 - a / b)
    scalar_rule(sp.j0,        lambda x, y: -sp.j1(x))
    scalar_rule(sp.j1,        lambda x, y: 0.5 * (sp.j0(x) - sp.jv(2.0, x)))
    scalar_rule(sp.jv,        None, lambda v, x, y: 0.5 * (sp.jv(v - 1, x) - sp.jv(v + 1, x)))
    scalar_rule(sp.y0,        lambda x, y: -sp.y1(x))
    scalar_rule(sp.y1,        lambda x, y: 0.5 * (sp.y0(x) - sp.yv(2.0, x)))
    scalar_rule(sp.yn,        None, lambda n, x, y: 0.5 * (sp.yn(n - 1, x) - sp.yn(n + 1, x)))
    scalar_rule(sp.yv,        None, _yv_slope)
    scalar_rule(sp.i0,        lambda x, y: sp.i1(x))
    scalar_rule(sp.i0e,       lambda x, y: _ive_slope(0.0, x, y,
                                                      lambda x: sp.i1e(x) + _ive_shift(x, y)))
    scalar_rule(sp.i1,        lambda x, y: 0.5 * (sp.i0(x) + sp.iv(2.0, x)))
    scalar_rule(sp.i1e,       lambda x, y: _ive_slope(1.0, x, y, lambda x: 0.5 * (
                                  sp.i0e(x) + sp.ive(2.0, x)) + _ive_shift(x, y)))
    scalar_rule(sp.iv,        None, lambda v, x, y: 0.5 * (sp.iv(v - 1, x) + sp.iv(v + 1, x)))
    scalar_rule(sp.ive,       None, lambda v, x, y: _ive_slope(v, x, y, _ive_near(v, y)))
    scalar_rule(sp.kv,        None, lambda v, x, y: -0.5 * (sp.kv(v - 1, x) + sp.kv(v + 1, x)))
    scalar_rule(sp.betainc,   None, None, lambda a, b, x, y: _beta_density(a, b, x))
    scalar_rule(sp.betaincinv,  None, None, lambda a, b, q, y: 1 / _beta_density(a, b, y))
    scalar_rule(sp.betainccinv, None, None, lambda a, b, q, y: -1 / _beta_density(a, b, y))
    scalar_rule(sp.stdtr,     None, lambda df, t, y: _t_density(df, t))
    scalar_rule(sp.stdtrit,   None, lambda df, p, y: 1 / _t_density(df, y))
    scalar_rule(sp.ndtri_exp, lambda q, y: np.exp(q + 0.5 * y * y + LOG_SQRT_2PI))
    # elementary functions (SciPy's own ufuncs, not NumPy's)
    deg = np.pi / 180
    scalar_rule(sp.expm1,     lambda x, y: np.exp(x))
    scalar_rule(sp.log1p,     lambda x, y: 1 / (1 + x))
    scalar_rule(sp.exp2,      lambda x, y: np.log(2.0) * y)
    scalar_rule(sp.exp10,     lambda x, y: np.log(10.0) * y)
    scalar_rule(sp.cbrt,      lambda x, y: 1 / (3 * y * y))
    scalar_rule(sp.cosm1,     lambda x, y: -np.sin(x))
    scalar_rule(sp.exprel,    _exprel_slope)
    scalar_rule(sp.sindg,     lambda x, y: deg * sp.cosdg(x))
    scalar_rule(sp.cosdg,     lambda x, y: -deg * sp.sindg(x))
    # (not 1 + y²: SciPy's cotdg(1e-3) is 1e-12 off, its sindg and cosdg are not)
    scalar_rule(sp.tandg,     lambda x, y: deg / np.square(sp.cosdg(x)))
    scalar_rule(sp.cotdg,     lambda x, y: -deg / np.square(sp.sindg(x)))
    scalar_rule(sp.radian,    lambda d, m, s, y: deg, lambda d, m, s, y: deg / 60,
                              lambda d, m, s, y: deg / 3600)
    # exponential integrals, Dawson's and Faddeeva's functions, erfi, Spence's function
    scalar_rule(sp.exp1,      lambda x, y: -_exp_over(x, -1.0))
    scalar_rule(sp.expi,      lambda x, y: _exp_over(x, 1.0))
    scalar_rule(sp.expn,      None, _expn_slope)
    scalar_rule(sp.erfi,      lambda x, y: 2 / SQRT_PI * np.exp(x * x))
    scalar_rule(sp.dawsn,     _dawsn_slope)
    scalar_rule(sp.wofz,      _wofz_slope)
    scalar_rule(sp.spence,    _spence_slope)
    # elliptic integrals, Pochhammer, Box-Cox, Huber losses, Owen's T
    scalar_rule(sp.ellipk,    _ellipk_slope)
    scalar_rule(sp.ellipe,    _ellipe_slope)
    scalar_rule(sp.binom,     lambda n, k, y: _binom_partials(n, k, y)[0],
                              lambda n, k, y: _binom_partials(n, k, y)[1])
    scalar_rule(sp.poch,      _poch_dz,
                              lambda z, m, y: y * sp.digamma(z + m))
    scalar_rule(sp.boxcox,    lambda x, lam, y: np.exp((lam - 1) * np.log(x)),
                              lambda x, lam, y: _boxcox_in_lambda(lam, np.log(x)))
    scalar_rule(sp.boxcox1p,  lambda x, lam, y: np.exp((lam - 1) * np.log1p(x)),
                              lambda x, lam, y: _boxcox_in_lambda(lam, np.log1p(x)))
    scalar_rule(sp.huber,     *_huber_partials())
    scalar_rule(sp.pseudo_huber, *_pseudo_huber_partials())
    scalar_rule(sp.owens_t,   _owens_t_in_h, _owens_t_in_a)
    # Bessel K of integer order, and the scaled functions (kve: K_v eˣ; jve, yve: e^-|Im z|)
    scalar_rule(sp.k0,        lambda x, y: -sp.k1(x))
    # K_n' = -K_{|n|-1} - |n|/x K_n (all of one sign): kv(2, 700) is 0 in SciPy (k1(700) is
    # 4.7e-306; SciPy's kn(n ≥ 1, ·) itself is 0 from about 700, and so is its slope)
    scalar_rule(sp.k1,        lambda x, y: -sp.k0(x) - y / x)
    scalar_rule(sp.kn,        None, lambda n, x, y: -sp.kn(np.abs(n) - 1, x) - np.abs(n) / x * y)
    scalar_rule(sp.k0e,       lambda x, y: _kve_slope(0.0, x, y))
    scalar_rule(sp.k1e,       lambda x, y: _kve_slope(1.0, x, y))
    scalar_rule(sp.kve,       None, _kve_slope)
    scalar_rule(sp.jve,       None, lambda v, x, y: 0.5 * (sp.jve(v - 1, x) - sp.jve(v + 1, x)))
    scalar_rule(sp.yve,       None, _yve_slope)
    # lambertw(z, k, tol) is SciPy's _lambertw(z, k, tol): W' = 1 / (e^W (1 + W)) (1 at z = 0,
    # where W / (z (1 + W)) is 0/0); the branch k is an integer (lambertw casts it: it cannot be
    # traced), and W does not depend on the tolerance tol (its partial: 0)
    scalar_rule(_ufuncs._lambertw, lambda z, k, tol, y: 1 / (np.exp(y) * (1 + y)), None, None)
    # fmt: on

    _no_derivative_in(_zeta, 0, "its order s (scipy.special.zeta(s, q))")
    _derivative_in_a(sp.gammainc, 1.0)
    _derivative_in_a(sp.gammaincc, -1.0)
    for u in (sp.jv, sp.yv, sp.iv, sp.ive, sp.kv, sp.kve, sp.jve, sp.yve):
        _no_derivative_in(u, 0, "the order v (the derivative in x is implemented)")
    _no_derivative_in(sp.yn, 0, "the order n")
    _no_derivative_in(sp.kn, 0, "the order n (the derivative in x is implemented)")
    _no_derivative_in(sp.expn, 0, "the order n (the derivative in x is implemented)")
    for u in (sp.betainc, sp.betaincinv, sp.betainccinv):
        _no_derivative_in(u, 0, "a (the derivative in x is implemented)")
        _no_derivative_in(u, 1, "b (the derivative in x is implemented)")
    for u in (sp.stdtr, sp.stdtrit):
        _no_derivative_in(u, 0, "the degrees of freedom df (the derivative in t is implemented)")
    for u in (sp.pdtr, sp.pdtrc, sp.pdtri):
        _no_derivative_in(u, 0, "k, a count (the derivative in m is implemented)")
    beta_ppf = getattr(_ufuncs, "_beta_ppf", None)  # scipy.stats.beta.ppf's own (Boost's)
    if beta_ppf is not None:
        scalar_rule(beta_ppf, lambda q, a, b, y: 1 / _beta_density(a, b, y), None, None)
        _no_derivative_in(beta_ppf, 1, "a (the derivative in q is implemented)")
        _no_derivative_in(beta_ppf, 2, "b (the derivative in q is implemented)")


if sp is not None:
    _declare()


# --------------------------------------------------------------------------------------------------
# np.sinc (a Python function in NumPy, so not a ufunc: an eager rule)
# --------------------------------------------------------------------------------------------------


def _sinc_switch(x: Any) -> float:
    """Where ``_dsinc`` leaves its series for the formula: 1e-3 in double precision (as it was),
    0.15 in single, 0.5 in half."""
    dt = getattr(x, "dtype", None)
    eps = np.finfo(np.result_type(dt if dt is not None else np.result_type(x), np.float16)).eps
    return 1e-3 if eps < 1e-10 else 0.15 if eps < 1e-6 else 0.5


def _dsinc(x: Any, y: Any) -> Any:
    """sinc'(x): ``(cos(πx) - sinc(x)) / x``, and near 0 (where that cancels: 30% off at
    1e-8) its series ``-π²x/3 + π⁴x³/30 - π⁶x⁵/840``, which also gives the derivatives of
    second order and up at 0 (a constant 0 there gave sinc''(0) = 0, not -π²/3). The switch is
    per precision, where the cancellation (relative error ~eps / (3.3 x²)) meets the series'
    truncation (~(πx)⁶ / 15120): float32 loses 1.5% at 1e-3 by the formula, 1e-6 at 0.15."""
    near = np.less(np.abs(x), _sinc_switch(x))
    safe = np.where(near, 1.0, x)
    z = np.square(np.pi * x)
    series = (np.pi * np.pi / 3.0) * x * (-1.0 + z * (1.0 / 10.0 - z / 280.0))
    return np.where(near, series, (np.cos(np.pi * x) - y) / safe)


if np.sinc not in RRULES:

    @register_rrule(np.sinc)
    def _sinc(x):
        """np.sinc: dx = dy (cos(πx) - sinc(x)) / x (its series near 0: ``_dsinc``)."""
        y = np.sinc(x)

        def pullback(dy):
            return (dy * _dsinc(x, y),)

        return y, pullback


if np.sinc not in FRULES:

    @register_frule(np.sinc)
    def _sinc_frule(tangents, x):
        """np.sinc: ẏ = ẋ (cos(πx) - sinc(x)) / x."""
        (t,) = tangents
        y = call(np.sinc, x)
        if isinstance(t, AbstractZero):
            return y, ZeroTangent() if is_differentiable(y) else NoTangent()
        return y, unthunk(t) * _dsinc(x, y)

    _sinc_frule.lazy = False  # type: ignore[attr-defined]

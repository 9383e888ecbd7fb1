"""Elementwise rules: one line per ufunc, its partial derivatives as data.

``scalar_rule(ufunc, *partials)`` declares an elementwise op once: each partial is a function of
the inputs and the output, ``∂y/∂xᵢ(x..., y)``, written with NumPy operations. That gives the
reverse rule (``ȳ * ∂y/∂xᵢ``, summed over broadcast axes), lazy from end to end: the primal is a
lazy map, each cotangent a ``BroadcastThunk`` that fuses into whatever consumes it. ``None`` as a
partial means the derivative is zero everywhere it exists (``floor``, ``sign``).

Kinks and ties follow JAX: ``maximum``/``minimum`` split the derivative evenly at ties (so
``clip`` at a bound gives ½), ``abs`` has derivative 1 at 0 (and at -0.0), as ``jax.grad(jnp.abs)``;
``x**0`` has derivative 0 everywhere (also at 0), ``logaddexp(a, b)`` derivative 1 in an argument
equal to the output (so at ``a = +inf``).

Complex numbers follow JAX's convention: a partial ``p`` means ``ẏ = p·ẋ`` for a holomorphic
function and ``ẏ = Re(p·ẋ)`` when ``y`` is real (``abs``: ``p = conj(z)/|z|``), and the reverse
rule is always ``x̄ = ȳ·p`` (the transpose of ``ẋ ↦ ẏ`` for the pairing ``Re(u·v)``, no
conjugate). ``conj``, ``real``, ``imag`` and ``angle`` have rules of their own below.

Example::

    >>> scalar_rule(np.sinh, lambda x, y: np.cosh(x))   # how sinh is declared below
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import NoTangent, ZeroTangent
from .common import (
    PARTIALS,
    fit,
    is_complex,
    lazy_frule,
    lazy_tangent,
    nondiff,
    real_for,
    scalar_rule,
    unbroadcast_to,
)
from .common import in_space_of as _in_space_of
from .common import is_complex_value as _is_complex
from .common import is_zero as _zero
from .lazy_values import as_cotangent as _as_cotangent
from .lazy_values import as_lazy as _lazy
from .lazy_values import operand as _operand
from .registry import is_differentiable, primitive, register_rrule


def _balanced_eq(x: Any, y: Any, z: Any) -> Any:
    """1 where ``x == y`` and ``y != z``, ½ where all three are equal, else 0 (JAX's choice)."""
    return np.where(np.equal(x, y), np.where(np.equal(y, z), 0.5, 1.0), 0.0)


def _abs_partial(x: Any, y: Any) -> Any:
    """``d|x|/dx``: ``sign(x)`` except 1 at ±0 (JAX's ``select(x >= 0, 1, -1)``), dtype kept;
    for complex ``z``, ``conj(z)/|z|`` (``ẏ = Re(conj(z)ż)/|z|``), 0 at ``z = 0`` as in JAX."""
    if _is_complex(x):
        return np.conjugate(x) / np.where(np.equal(y, 0), 1.0, y)
    return np.sign(x) + np.equal(x, 0)


def _is_number(b: Any) -> bool:
    return isinstance(b, int | float | complex | np.generic) or (
        isinstance(b, np.ndarray) and b.ndim == 0
    )


def _pow_base_partial(a: Any, b: Any) -> Any:
    """``d(a**b)/da = b a**(b-1)``, 0 where ``b == 0`` (``x**0`` is constant, also at 0)."""
    if _is_number(b):
        return 0.0 if b == 0 else b * np.power(a, b - 1)
    return b * np.power(a, np.where(np.equal(b, 0), 1, b) - 1)


def _float_pow_base_partial(a: Any, b: Any) -> Any:
    if _is_number(b):
        return 0.0 if b == 0 else b * np.float_power(a, b - 1)
    return b * np.float_power(a, np.where(np.equal(b, 0), 1, b) - 1)


def _arccosh_partial(x: Any) -> Any:
    """``1/sqrt(x² - 1)``; for complex ``x`` on arccosh's principal branch, ``1/(sqrt(x - 1)
    sqrt(x + 1))`` (the two differ in sign where ``Re x < 0``)."""
    if _is_complex(x):
        return 1 / (np.sqrt(x - 1) * np.sqrt(x + 1))
    return 1 / np.sqrt(x * x - 1)


def _logaddexp_partial(a: Any, y: Any, exp: Any) -> Any:
    """``exp(a - y)`` (``a - y <= 0``), and 1 where ``a = y = ±inf``: ``a - y`` is nan there and
    ``fmin(nan, 0) = 0``; one op where ``where(a == y, 1, ...)`` takes two."""
    return exp(np.fmin(a - y, 0.0))


LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))

# fmt: off
scalar_rule(np.add,         lambda a, b, y: 1,                  lambda a, b, y: 1)
scalar_rule(np.subtract,    lambda a, b, y: 1,                  lambda a, b, y: -1)
scalar_rule(np.multiply,    lambda a, b, y: b,                  lambda a, b, y: a)
scalar_rule(np.divide,      lambda a, b, y: 1 / b,              lambda a, b, y: -y / b)
scalar_rule(np.power,       lambda a, b, y: _pow_base_partial(a, b),
                            lambda a, b, y: np.where(np.equal(a, 0), 0.0, y * np.log(np.where(np.equal(a, 0), 1.0, a))))  # noqa: E501
scalar_rule(np.float_power, lambda a, b, y: _float_pow_base_partial(a, b),
                            lambda a, b, y: np.where(np.equal(a, 0), 0.0, y * np.log(np.where(np.equal(a, 0), 1.0, a))))  # noqa: E501
scalar_rule(np.negative,    lambda x, y: -1)
scalar_rule(np.positive,    lambda x, y: 1)
scalar_rule(np.absolute,    lambda x, y: _abs_partial(x, y))
scalar_rule(np.fabs,        lambda x, y: _abs_partial(x, y))
scalar_rule(np.square,      lambda x, y: 2 * x)
scalar_rule(np.sqrt,        lambda x, y: 0.5 / y)
scalar_rule(np.cbrt,        lambda x, y: 1 / (3 * y * y))
scalar_rule(np.reciprocal,  lambda x, y: -y * y)
scalar_rule(np.exp,         lambda x, y: y)
scalar_rule(np.exp2,        lambda x, y: LN2 * y)
scalar_rule(np.expm1,       lambda x, y: y + 1)
scalar_rule(np.log,         lambda x, y: 1 / x)
scalar_rule(np.log2,        lambda x, y: 1 / (LN2 * x))
scalar_rule(np.log10,       lambda x, y: 1 / (LN10 * x))
scalar_rule(np.log1p,       lambda x, y: 1 / (1 + x))
scalar_rule(np.logaddexp,   lambda a, b, y: _logaddexp_partial(a, y, np.exp),
                            lambda a, b, y: _logaddexp_partial(b, y, np.exp))
scalar_rule(np.logaddexp2,  lambda a, b, y: _logaddexp_partial(a, y, np.exp2),
                            lambda a, b, y: _logaddexp_partial(b, y, np.exp2))
scalar_rule(np.sin,         lambda x, y: np.cos(x))
scalar_rule(np.cos,         lambda x, y: -np.sin(x))
scalar_rule(np.tan,         lambda x, y: 1 + y * y)
scalar_rule(np.arcsin,      lambda x, y: 1 / np.sqrt(1 - x * x))
scalar_rule(np.arccos,      lambda x, y: -1 / np.sqrt(1 - x * x))
scalar_rule(np.arctan,      lambda x, y: 1 / (1 + x * x))
scalar_rule(np.sinh,        lambda x, y: np.cosh(x))
scalar_rule(np.cosh,        lambda x, y: np.sinh(x))
scalar_rule(np.tanh,        lambda x, y: 1 - y * y)
scalar_rule(np.arcsinh,     lambda x, y: 1 / np.sqrt(x * x + 1))
scalar_rule(np.arccosh,     lambda x, y: _arccosh_partial(x))
scalar_rule(np.arctanh,     lambda x, y: 1 / (1 - x * x))
scalar_rule(np.arctan2,     lambda a, b, y: b / (a * a + b * b),
                            lambda a, b, y: -a / (a * a + b * b))
scalar_rule(np.hypot,       lambda a, b, y: a / y,              lambda a, b, y: b / y)
scalar_rule(np.deg2rad,     lambda x, y: float(np.pi / 180))
scalar_rule(np.rad2deg,     lambda x, y: float(180 / np.pi))
scalar_rule(np.maximum,     lambda a, b, y: _balanced_eq(a, y, b), lambda a, b, y: _balanced_eq(b, y, a))  # noqa: E501
scalar_rule(np.minimum,     lambda a, b, y: _balanced_eq(a, y, b), lambda a, b, y: _balanced_eq(b, y, a))  # noqa: E501
scalar_rule(np.fmax,        lambda a, b, y: _balanced_eq(a, y, b), lambda a, b, y: _balanced_eq(b, y, a))  # noqa: E501
scalar_rule(np.fmin,        lambda a, b, y: _balanced_eq(a, y, b), lambda a, b, y: _balanced_eq(b, y, a))  # noqa: E501
scalar_rule(np.copysign,    lambda a, b, y: np.sign(a) * np.sign(y), None)
scalar_rule(np.floor_divide, None,                              None)
scalar_rule(np.remainder,   lambda a, b, y: 1,                  lambda a, b, y: -np.floor_divide(a, b))  # noqa: E501
scalar_rule(np.fmod,        lambda a, b, y: 1,                  lambda a, b, y: -np.trunc(a / b))
# Piecewise constant: the derivative is zero wherever it exists.
for _u in (np.floor, np.ceil, np.rint, np.trunc, np.sign, np.signbit, np.isnan, np.isinf,
           np.isfinite, np.logical_not, np.greater, np.greater_equal, np.less, np.less_equal,
           np.equal, np.not_equal, np.logical_and, np.logical_or, np.logical_xor, np.heaviside):
    nondiff(_u)
# fmt: on

try:  # SciPy's ufuncs, when SciPy is installed.
    import scipy.special as sp

    # fmt: off
    scalar_rule(sp.expit,     lambda x, y: y * (1 - y))
    scalar_rule(sp.logit,     lambda x, y: 1 / (x * (1 - x)))
    scalar_rule(sp.log_expit, lambda x, y: 1 - np.exp(y))
    scalar_rule(sp.erf,       lambda x, y: float(2 / np.sqrt(np.pi)) * np.exp(-x * x))
    scalar_rule(sp.erfc,      lambda x, y: float(-2 / np.sqrt(np.pi)) * np.exp(-x * x))
    scalar_rule(sp.xlogy,     lambda a, b, y: np.where(np.equal(a, 0), 0.0, np.log(np.where(np.equal(a, 0), 1.0, b))),  # noqa: E501
                              lambda a, b, y: a / b)
    scalar_rule(sp.xlog1py,   lambda a, b, y: np.where(np.equal(a, 0), 0.0, np.log1p(np.where(np.equal(a, 0), 0.0, b))),  # noqa: E501
                              lambda a, b, y: a / (1 + b))
    # fmt: on
except ImportError:  # pragma: no cover - depends on the environment
    pass


# --------------------------------------------------------------------------------------------------
# The non-holomorphic parts of a complex number: conj, real, imag, angle
# --------------------------------------------------------------------------------------------------


@register_rrule(np.conjugate, lazy=True)
def _conjugate(x: Any, **kwargs: Any) -> tuple[Any, Callable]:
    """``ẏ = conj(ẋ)``, so ``x̄ = conj(ȳ)`` (not holomorphic: no partial)."""
    y = np.conjugate(_lazy(x), **kwargs)

    def pullback(dy: Any) -> tuple:
        d = _operand(dy)
        return (_as_cotangent(np.conjugate(d) if _is_complex(d) else d),)

    return y, pullback


def _to_dtype_of(g: Any, x: Any) -> Any:
    """``g`` (real) as a cotangent of ``x``: complex when ``x`` is, still lazy."""
    dtype = getattr(x, "dtype", None)
    dtype = np.dtype(dtype if dtype is not None else np.result_type(x))
    if _is_complex(g) or dtype.kind != "c":
        return g
    return g.astype(dtype) if hasattr(g, "astype") else dtype.type(g)


@register_rrule(np.real, lazy=True)
def _real(x: Any) -> tuple[Any, Callable]:
    """``ẏ = Re(ẋ)``: ``x̄ = ȳ`` (as a complex cotangent for a complex ``x``)."""
    y = np.real(_lazy(x))

    def pullback(dy: Any) -> tuple:
        return (_as_cotangent(_to_dtype_of(_operand(dy), x)),)

    return y, pullback


@register_rrule(np.imag, lazy=True)
def _imag(x: Any) -> tuple[Any, Callable]:
    """``ẏ = Im(ẋ) = Re(-i·ẋ)``: ``x̄ = -i·ȳ``; zero for a real ``x`` (its imaginary part is 0)."""
    y = np.imag(_lazy(x))
    complex_x = _is_complex(x)

    def pullback(dy: Any) -> tuple:
        if not complex_x:
            return (ZeroTangent(),)
        return (_as_cotangent(_to_dtype_of(_operand(dy) * -1j, x)),)

    return y, pullback


RAD2DEG = float(180 / np.pi)


def angle_of(lx: Any, deg: bool) -> Any:
    """``np.angle`` of a lazy value, lazily: ``arctan2(imag, real)`` (0 or π for real values)."""
    y = np.arctan2(np.imag(lx), np.real(lx)) if _is_complex(lx) else np.arctan2(0.0, lx)
    return y * RAD2DEG if deg else y


@register_rrule(np.angle, lazy=True)
def _angle(z: Any, *args: Any, **kwargs: Any) -> tuple[Any, Callable]:
    """``ẏ = Im(ż / z) = Re(p·ż)`` with ``p = -i/z``: ``z̄ = ȳ·p`` (nan at 0, as JAX); zero for a
    real ``z``. ``deg=True`` scales both by 180/π."""
    deg = bool(args[0] if args else kwargs.get("deg", False))
    lz = _lazy(z)
    y = angle_of(lz, deg)
    extra = (NoTangent(),) * len(args)

    def pullback(dy: Any) -> tuple:
        if not _is_complex(z):
            return (ZeroTangent(), *extra)
        g = _operand(dy) * (-1j * (RAD2DEG if deg else 1.0)) / lz
        return (_as_cotangent(unbroadcast_to(g, np.shape(z))), *extra)

    return y, pullback


@register_rrule(np.where, lazy=True)
def _where(condition: Any, x: Any, y: Any) -> tuple[Any, Callable]:
    """``where(c, x, y)``: the cotangent goes to ``x`` where ``c`` holds, to ``y`` elsewhere."""
    c, lx, ly = _lazy(condition), _lazy(x), _lazy(y)
    out = np.where(c, lx, ly)

    def pullback(dy: Any) -> tuple:
        d = _operand(dy)
        gx = gy = None
        if is_differentiable(x):
            gx = unbroadcast_to(_in_space_of(np.where(c, d, 0.0), x), np.shape(x))
        if is_differentiable(y):
            gy = unbroadcast_to(_in_space_of(np.where(c, 0.0, d), y), np.shape(y))
        return (
            NoTangent(),
            NoTangent() if gx is None else _as_cotangent(gx),
            NoTangent() if gy is None else _as_cotangent(gy),
        )

    return out, pullback


@primitive
def astype(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)`` as a function, so that the tracer can record it.

    >>> astype(np.ones(2, np.float32), np.float64).dtype
    dtype('float64')
    """
    return x.astype(np.dtype(dtype))


@register_rrule(astype, lazy=True)
def _astype(x: Any, dtype: Any) -> tuple[Any, Callable]:
    """The cotangent is cast back to ``x``'s dtype."""
    lx = _lazy(x)
    y = lx.astype(np.dtype(dtype)) if hasattr(lx, "astype") else np.asarray(x, dtype)

    def pullback(dy: Any) -> tuple:
        d = _operand(dy)
        src = np.result_type(x)
        return (_as_cotangent(d.astype(src) if hasattr(d, "astype") else d), NoTangent())

    return y, pullback


# --------------------------------------------------------------------------------------------------
# Forward rules of the non-scalar_rule functions above
# --------------------------------------------------------------------------------------------------


@lazy_frule(np.conjugate)
def _conjugate_jvp(tangents, x, **kwargs):
    """conj is not holomorphic: ẏ = conj(ẋ)."""
    (t,) = tangents
    return np.conjugate(_lazy(x), **kwargs), np.conjugate(lazy_tangent(t))


@lazy_frule(np.real)
def _real_jvp(tangents, x):
    """ẏ = Re(ẋ)."""
    (t,) = tangents
    y = np.real(_lazy(x))
    return y, (ZeroTangent() if _zero(t) else real_for(lazy_tangent(t), y))


@lazy_frule(np.imag)
def _imag_jvp(tangents, x):
    """ẏ = Im(ẋ) (zero for a real x)."""
    (t,) = tangents
    y = np.imag(_lazy(x))
    if _zero(t) or not is_complex(x):
        return y, ZeroTangent()
    return y, np.imag(lazy_tangent(t))


@lazy_frule(np.angle)
def _angle_jvp(tangents, z, *args, **kwargs):
    """ẏ = Im(ż / z) (× 180/π with deg=True); zero for a real z."""
    deg = bool(args[0] if args else kwargs.get("deg", False))
    lz = _lazy(z)
    y = angle_of(lz, deg)
    t = tangents[0]
    if _zero(t) or not is_complex(z):
        return y, ZeroTangent()
    dot = np.imag(lazy_tangent(t) / lz)
    return y, fit(dot * RAD2DEG if deg else dot, y)


@lazy_frule(np.where)
def _where_jvp(tangents, condition, x, y):
    """ẏ = where(c, ẋ, ẏ) (zeros for constant branches)."""
    c, lx, ly = _lazy(condition), _lazy(x), _lazy(y)
    out = np.where(c, lx, ly)
    _, tx, ty = tangents
    if _zero(tx) and _zero(ty):
        return out, ZeroTangent()
    tx = 0.0 if _zero(tx) else lazy_tangent(tx)
    ty = 0.0 if _zero(ty) else lazy_tangent(ty)
    return out, fit(np.where(c, tx, ty), out)


@lazy_frule(astype)
def _astype_jvp(tangents, x, dtype):
    """ẏ = ẋ.astype(dtype) (no tangent for an integer or bool dtype)."""
    lx = _lazy(x)
    y = lx.astype(np.dtype(dtype)) if hasattr(lx, "astype") else np.asarray(x, dtype)
    t = tangents[0]
    if _zero(t) or not np.issubdtype(np.dtype(dtype), np.inexact):
        return y, ZeroTangent()
    t = lazy_tangent(t)
    return y, (t.astype(np.dtype(dtype)) if hasattr(t, "astype") else np.asarray(t, dtype))


# The ufuncs declared in this module (rules/special.py and users declare more into PARTIALS).
NUMPY_PARTIALS = frozenset(PARTIALS)

__all__ = ["NUMPY_PARTIALS", "PARTIALS", "angle_of", "astype", "scalar_rule"]

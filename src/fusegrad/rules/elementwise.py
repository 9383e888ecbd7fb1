"""The fusable elementwise functions: each ufunc declared once, its op and its derivatives.

``elementwise_op(ufunc, *partials, numba=..., expensive=..., float_only=..., loop=...)``
(``rules/common.py``) is everything about an elementwise function, in one entry:

- its op in the lazy IR's table (``lazy/ops.py``): the ufunc is fused into kernels, called into
  blocks by numpy_blocked and written as the ``numba`` template by the numba engine; the flags
  are its cost class and the loops numba takes;
- its derivatives, from one partial per argument, ``∂y/∂xᵢ(x..., y)`` written with NumPy calls:
  the reverse rule (``ȳ * ∂y/∂xᵢ``, summed over broadcast axes) and the forward rule
  (``Σᵢ ∂y/∂xᵢ · ẋᵢ``), lazy from end to end: the primal is a lazy map, each cotangent a
  ``BroadcastThunk`` that fuses into whatever consumes it. ``None`` as a partial means the
  derivative is zero everywhere it exists (``floor``, ``sign``, comparisons).

So ``grep "np.tanh," src/fusegrad/rules`` shows all of tanh. ``scalar_rule(ufunc, *partials)``
alone declares the derivatives of a ufunc the lazy IR does not fuse (it runs on NumPy arrays:
``rules/special.py``'s gamma and Bessel functions).

Kinks and ties follow JAX: ``maximum``/``minimum`` split the derivative evenly at ties (so
``clip`` at a bound gives ½), ``abs`` has derivative 1 at 0 (and at -0.0), as ``jax.grad(jnp.abs)``;
``x**0`` has derivative 0 everywhere (also at 0), ``logaddexp(a, b)`` derivative 1 in an argument
equal to the output (so at ``a = +inf``).

Complex numbers follow JAX's convention: a partial ``p`` means ``ẏ = p·ẋ`` for a holomorphic
function and ``ẏ = Re(p·ẋ)`` when ``y`` is real (``abs``: ``p = conj(z)/|z|``), and the reverse
rule is always ``x̄ = ȳ·p`` (the transpose of ``ẋ ↦ ẏ`` for the pairing ``Re(u·v)``, no
conjugate). ``conj``, ``real``, ``imag`` and ``angle`` have rules of their own below.

Example::

    >>> elementwise_op(np.sinh, lambda x, y: np.cosh(x),  # how sinh is declared below
    ...                numba="math.sinh({0})", expensive=True, float_only=True)
    <ufunc 'sinh'>
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lazy import ops as op_table
from ..tangents import NoTangent, ZeroTangent
from .common import (
    PARTIALS,
    elementwise_op,
    fit,
    is_complex,
    lazy_frule,
    lazy_tangent,
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
from .registry import FRULES, RRULES, is_differentiable, primitive, register_rrule


def _balanced_eq(x: Any, y: Any, z: Any) -> Any:
    """1 where ``x == y`` and ``y != z``, ½ where all three are equal, else 0 (JAX's choice)."""
    return np.where(np.equal(x, y), np.where(np.equal(y, z), 0.5, 1.0), 0.0)


def _abs_partial(x: Any, y: Any) -> Any:
    """``d|x|/dx``: ``sign(x)`` except 1 at ±0 (JAX's ``select(x >= 0, 1, -1)``), dtype kept;
    for complex ``z``, ``conj(z)/|z|`` (``ẏ = Re(conj(z)ż)/|z|``), 0 at ``z = 0`` as in JAX."""
    if _is_complex(x):
        return np.conjugate(x) / np.where(np.equal(y, 0), 1.0, y)
    return np.sign(x) + np.equal(x, 0)


def _over_norm(a: Any, y: Any) -> Any:
    """``a / y`` for ``y = hypot(a, b)``, 0 at the origin (as ``norm``'s and JAX's), where
    ``0/0`` was a NaN that poisoned every gradient summed with it."""
    zero = np.equal(y, 0)
    return np.where(zero, 0.0, a / np.where(zero, 1.0, y))


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


def _pow_exponent_partial(a: Any, y: Any) -> Any:
    """``d(a**b)/db = a**b log(a)``, 0 where ``a == 0``."""
    return np.where(np.equal(a, 0), 0.0, y * np.log(np.where(np.equal(a, 0), 1.0, a)))


# maximum, minimum, fmax, fmin: each argument's partial, split evenly at ties
_TIES_SPLIT = (lambda a, b, y: _balanced_eq(a, y, b), lambda a, b, y: _balanced_eq(b, y, a))

LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))
TWO_OVER_SQRT_PI = float(2 / np.sqrt(np.pi))


# Numba templates several entries share (the template language is lazy/ops.py's).


def _angle_scale(half_turns_per_unit: bool) -> Callable[[np.dtype], str]:
    """deg2rad / rad2deg: npymath's ``x * (NPY_PI / 180)``, the constant computed in the loop
    dtype."""

    def template(lt: np.dtype) -> str:
        pi, half_turn = lt.type(math.pi), lt.type(180.0)
        c = pi / half_turn if half_turns_per_unit else half_turn / pi
        return f"({{0}} * {{T}}({float(c)!r}))"

    return template


def _extremum(cmp: str, nan: str) -> dict[str, str]:
    """maximum/minimum/fmax/fmin with a strict compare (equal values such as +0/-0 give the
    second argument, as NumPy's SIMD loops do); on floats the ``nan`` argument wins when it is
    NaN."""
    return {
        "f": f"({{0}} if ({{0}} {cmp} {{1}} or {nan} != {nan}) else {{1}})",
        "iub": f"({{0}} if {{0}} {cmp} {{1}} else {{1}})",
    }


def _rounding(fn: str) -> dict[str, str]:
    return {"f": f"np.{fn}({{0}})", "iub": "{0}"}


_SIGN = {
    "f": "({T}(1) if {0} > 0 else ({T}(-1) if {0} < 0 else ({T}(0) if {0} == 0 else {0})))",
    "iu": "({T}(1) if {0} > 0 else ({T}(-1) if {0} < 0 else {T}(0)))",
}
# numba_math.power: small integer exponents and +-0.5 without a libm call (branches on the
# exponent, loop-invariant when it is a constant, which LLVM takes out of the loop).
_FPOW = "vm.power{f32}({0}, {1})"
_HEAVISIDE = "({0} if {0} != {0} else ({1} if {0} == 0 else ({T}(0) if {0} < 0 else {T}(1))))"

# Each fusable ufunc, once: its partials, then its op table entry. ``expensive``: a
# transcendental call (the policy stores it rather than recompute it); ``float_only``: numba
# declines integer and bool loops; ``loop="args"``/``"bool"``: the dtype comparisons and logical
# ops compute in.
# fmt: off
# arithmetic
elementwise_op(np.add,          lambda a, b, y: 1, lambda a, b, y: 1, numba="({0} + {1})")
elementwise_op(np.subtract,     lambda a, b, y: 1, lambda a, b, y: -1,
               numba={"fiu": "({0} - {1})"})  # NumPy has no bool subtract
elementwise_op(np.multiply,     lambda a, b, y: b, lambda a, b, y: a, numba="({0} * {1})")
elementwise_op(np.divide,       lambda a, b, y: 1 / b, lambda a, b, y: -y / b,
               numba="({0} / {1})", float_only=True)
elementwise_op(np.floor_divide, None, None,
               numba={"f": "_ffloordiv({0}, {1})", "iub": "_ifloordiv({0}, {1})"})
elementwise_op(np.remainder,    lambda a, b, y: 1, lambda a, b, y: -np.floor_divide(a, b),
               numba={"f": "_fremainder({0}, {1})", "iub": "_iremainder({0}, {1})"})
elementwise_op(np.fmod,         lambda a, b, y: 1, lambda a, b, y: -np.trunc(a / b),
               numba={"f": "np.fmod({0}, {1})", "iub": "_ifmod({0}, {1})"})
elementwise_op(np.negative,     lambda x, y: -1, numba={"fiu": "(-{0})"})
elementwise_op(np.positive,     lambda x, y: 1, numba="{0}")
elementwise_op(np.absolute,     _abs_partial, numba={"fi": "abs({0})", "ub": "{0}"})
elementwise_op(np.fabs,         _abs_partial, numba={"fi": "abs({0})", "ub": "{0}"})
elementwise_op(np.sign,         None, numba=_SIGN)
elementwise_op(np.square,       lambda x, y: 2 * x, numba="({0} * {0})")
elementwise_op(np.reciprocal,   lambda x, y: -y * y, numba="({T}(1) / {0})", float_only=True)
elementwise_op(np.maximum,      *_TIES_SPLIT, numba=_extremum(">", "{0}"))
elementwise_op(np.minimum,      *_TIES_SPLIT, numba=_extremum("<", "{0}"))
elementwise_op(np.fmax,         *_TIES_SPLIT, numba=_extremum(">", "{1}"))
elementwise_op(np.fmin,         *_TIES_SPLIT, numba=_extremum("<", "{1}"))
elementwise_op(np.copysign,     lambda a, b, y: np.sign(a) * np.sign(y), None,
               numba="math.copysign({0}, {1})", float_only=True)
# piecewise constant: no derivative (None), the output is a constant both ways
elementwise_op(np.floor,        None, numba=_rounding("floor"))
elementwise_op(np.ceil,         None, numba=_rounding("ceil"))
elementwise_op(np.rint,         None, numba=_rounding("rint"))
elementwise_op(np.trunc,        None, numba=_rounding("trunc"))
# comparisons and predicates: computed in the arguments' dtype, a bool result
elementwise_op(np.greater,       None, None, numba="({0} > {1})", loop="args")
elementwise_op(np.greater_equal, None, None, numba="({0} >= {1})", loop="args")
elementwise_op(np.less,          None, None, numba="({0} < {1})", loop="args")
elementwise_op(np.less_equal,    None, None, numba="({0} <= {1})", loop="args")
elementwise_op(np.equal,         None, None, numba="({0} == {1})", loop="args")
elementwise_op(np.not_equal,     None, None, numba="({0} != {1})", loop="args")
elementwise_op(np.logical_and,   None, None, numba="({0} & {1})", loop="bool")
elementwise_op(np.logical_or,    None, None, numba="({0} | {1})", loop="bool")
elementwise_op(np.logical_xor,   None, None, numba="({0} != {1})", loop="bool")
elementwise_op(np.logical_not,   None, numba="(not {0})", loop="bool")
elementwise_op(np.isnan,         None, numba={"f": "({0} != {0})", "iub": "False"}, loop="args")
elementwise_op(np.isinf,         None, numba={"f": "math.isinf({0})", "iub": "False"}, loop="args")
elementwise_op(np.isfinite,      None, numba={"f": "math.isfinite({0})", "iub": "True"},
               loop="args")
elementwise_op(np.signbit,       None,
               numba={"f": "(math.copysign(1.0, {0}) < 0)", "iub": "({0} < 0)"}, loop="args")
elementwise_op(np.deg2rad,      lambda x, y: float(np.pi / 180),
               numba=_angle_scale(True), float_only=True)
elementwise_op(np.rad2deg,      lambda x, y: float(180 / np.pi),
               numba=_angle_scale(False), float_only=True)
elementwise_op(np.heaviside,    None, lambda x, h0, y: np.equal(x, 0).astype(y.dtype),
               numba=_HEAVISIDE, float_only=True)  # h0 is the value at x = 0
# transcendental
elementwise_op(np.power,       lambda a, b, y: _pow_base_partial(a, b),
                               lambda a, b, y: _pow_exponent_partial(a, y),
               numba={"f": _FPOW, "iub": "_ipow({0}, {1})"}, expensive=True)
elementwise_op(np.float_power, lambda a, b, y: _float_pow_base_partial(a, b),
                               lambda a, b, y: _pow_exponent_partial(a, y),
               numba=_FPOW, expensive=True, float_only=True)
elementwise_op(np.sqrt,        lambda x, y: 0.5 / y,
               numba="np.sqrt({0})", expensive=True, float_only=True)
elementwise_op(np.cbrt,        lambda x, y: 1 / (3 * y * y),
               numba="np.cbrt({0})", expensive=True, float_only=True)
elementwise_op(np.exp,         lambda x, y: y,
               numba="vm.exp{f32}({0})", expensive=True, float_only=True)
elementwise_op(np.exp2,        lambda x, y: LN2 * y,
               numba="np.exp2({0})", expensive=True, float_only=True)
elementwise_op(np.expm1,       lambda x, y: np.exp(x),  # y + 1 loses e^x for x << 0
               numba="vm.expm1{f32}({0})", expensive=True, float_only=True)
elementwise_op(np.log,         lambda x, y: 1 / x,
               numba="vm.log{f32}({0})", expensive=True, float_only=True)
elementwise_op(np.log2,        lambda x, y: 1 / (LN2 * x),
               numba="math.log2({0})", expensive=True, float_only=True)
elementwise_op(np.log10,       lambda x, y: 1 / (LN10 * x),
               numba="math.log10({0})", expensive=True, float_only=True)
elementwise_op(np.log1p,       lambda x, y: 1 / (1 + x),
               numba="vm.log1p{f32}({0})", expensive=True, float_only=True)
elementwise_op(np.logaddexp,   lambda a, b, y: _logaddexp_partial(a, y, np.exp),
                               lambda a, b, y: _logaddexp_partial(b, y, np.exp),
               numba="vm.logaddexp({0}, {1})", expensive=True, float_only=True)
elementwise_op(np.logaddexp2,  lambda a, b, y: _logaddexp_partial(a, y, np.exp2),
                               lambda a, b, y: _logaddexp_partial(b, y, np.exp2),
               numba="_logaddexp2({0}, {1})", expensive=True, float_only=True)
elementwise_op(np.sin,         lambda x, y: np.cos(x),
               numba="math.sin({0})", expensive=True, float_only=True)
elementwise_op(np.cos,         lambda x, y: -np.sin(x),
               numba="math.cos({0})", expensive=True, float_only=True)
elementwise_op(np.tan,         lambda x, y: 1 + y * y,
               numba="math.tan({0})", expensive=True, float_only=True)
elementwise_op(np.arcsin,      lambda x, y: 1 / np.sqrt(1 - x * x),
               numba="math.asin({0})", expensive=True, float_only=True)
elementwise_op(np.arccos,      lambda x, y: -1 / np.sqrt(1 - x * x),
               numba="math.acos({0})", expensive=True, float_only=True)
elementwise_op(np.arctan,      lambda x, y: 1 / (1 + x * x),
               numba="math.atan({0})", expensive=True, float_only=True)
elementwise_op(np.sinh,        lambda x, y: np.cosh(x),
               numba="math.sinh({0})", expensive=True, float_only=True)
elementwise_op(np.cosh,        lambda x, y: np.sinh(x),
               numba="math.cosh({0})", expensive=True, float_only=True)
elementwise_op(np.tanh,        lambda x, y: 1 - y * y,
               numba="vm.tanh{f32}({0})", expensive=True, float_only=True)
elementwise_op(np.arcsinh,     lambda x, y: 1 / np.sqrt(x * x + 1),
               numba="math.asinh({0})", expensive=True, float_only=True)
elementwise_op(np.arccosh,     lambda x, y: _arccosh_partial(x),
               numba="math.acosh({0})", expensive=True, float_only=True)
elementwise_op(np.arctanh,     lambda x, y: 1 / (1 - x * x),
               numba="math.atanh({0})", expensive=True, float_only=True)
elementwise_op(np.arctan2,     lambda a, b, y: b / (a * a + b * b),
                               lambda a, b, y: -a / (a * a + b * b),
               numba="math.atan2({0}, {1})", expensive=True, float_only=True)
elementwise_op(np.hypot,       lambda a, b, y: _over_norm(a, y), lambda a, b, y: _over_norm(b, y),
               numba="math.hypot({0}, {1})", expensive=True, float_only=True)
# fmt: on


def _xlog_da(log: Any, a: Any, b: Any, edge: float) -> Any:
    """∂/∂a of ``a log(b - edge)`` (``xlogy``: ``log``, 0; ``xlog1py``: ``log1p``, -1): the log
    itself, ``a = 0`` included (``xlogy(0, 0.5)`` has slope ``log 0.5`` in ``a``); 0 only where
    ``a = 0`` and ``b <= edge``, whose value 0 has no finite slope.

    >>> _xlog_da(np.log, np.array([0.0, 0.0, 2.0]), np.array([0.5, 0.0, 0.5]), 0.0).round(4)
    array([-0.6931,  0.    , -0.6931])
    """
    flat = np.logical_and(np.equal(a, 0), np.less_equal(b, edge))
    return np.where(flat, 0.0, log(np.where(flat, edge + 1.0, b)))


def _xlog_db(a: Any, b: Any, edge: float) -> Any:
    """∂/∂b of ``a log(b - edge)``: ``a / (b - edge)``, and 0 wherever ``a = 0`` (``xlogy(0, b)``
    is 0 for every ``b``, ``b = 0`` included, where ``a / b`` would be NaN).

    >>> _xlog_db(np.array([0.0, 2.0]), np.array([0.0, 4.0]), 0.0)
    array([0. , 0.5])
    """
    zero = np.equal(a, 0)
    return np.where(zero, 0.0, a / (np.where(zero, edge + 1.0, b) - edge))


try:  # SciPy's ufuncs, when SciPy is installed.
    import scipy.special as sp

    # fmt: off
    # y (1 - y), as JAX's: 0 from x = 37 (1 - y rounds to 0 where the slope is below 1e-16);
    # y expit(-x) keeps e^-x but costs an exp a point (1M-point gradient: 2.25 -> 3.9 ms)
    elementwise_op(sp.expit,     lambda x, y: y * (1 - y),
                   numba="({T}(1) / ({T}(1) + vm.exp{f32}(-{0})))", expensive=True, float_only=True)  # noqa: E501
    elementwise_op(sp.logit,     lambda x, y: 1 / (x * (1 - x)),
                   numba="_logit({0})", expensive=True, float_only=True)
    elementwise_op(sp.erf,       lambda x, y: TWO_OVER_SQRT_PI * np.exp(-x * x),
                   numba="math.erf({0})", expensive=True, float_only=True)
    elementwise_op(sp.erfc,      lambda x, y: -TWO_OVER_SQRT_PI * np.exp(-x * x),
                   # SciPy's erfc is 0 from x² > 709.78 (libm's goes on into subnormals)
                   numba="({T}(0) if {0} > 26.641747557046326 else math.erfc({0}))",
                   expensive=True, float_only=True)
    elementwise_op(sp.xlogy,     lambda a, b, y: _xlog_da(np.log, a, b, 0.0),
                                 lambda a, b, y: _xlog_db(a, b, 0.0),
                   numba="({T}(0) if ({0} == 0 and {1} == {1}) else {0} * vm.log{f32}({1}))",
                   expensive=True, float_only=True)
    elementwise_op(sp.xlog1py,   lambda a, b, y: _xlog_da(np.log1p, a, b, -1.0),
                                 lambda a, b, y: _xlog_db(a, b, -1.0),
                   numba="({T}(0) if ({0} == 0 and {1} == {1}) else {0} * vm.log1p{f32}({1}))",
                   expensive=True, float_only=True)
    elementwise_op(sp.log_expit, lambda x, y: -np.expm1(y),  # 1 - e^y loses e^-x
                   numba="_log_expit({0})", expensive=True, float_only=True)
    # fmt: on
except ImportError:  # pragma: no cover - depends on the environment
    pass


# --------------------------------------------------------------------------------------------------
# The non-holomorphic parts of a complex number: conj, real, imag, angle
# --------------------------------------------------------------------------------------------------


# conj is not holomorphic, so it has no partial: its op table entry is registered here, its rules
# are written out (the forward rule is _conjugate_jvp below)
op_table.register(np.conjugate, numba="{0}")  # complex values never reach numba kernels


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


def _complex_sign() -> None:
    """``np.sign`` of a complex ``z`` is ``z / |z|`` (NumPy 2), not piecewise constant: with
    ``s = sign(z)``, ``ṡ = i s Im(ż / z) = (ż - s² conj(ż)) / (2|z|)``, so (JAX's convention for a
    map ``A ż + B conj(ż)``: ``z̄ = ȳ A + conj(ȳ B)``) ``z̄ = (ȳ - conj(ȳ) conj(s)²) / (2|z|)``;
    both 0 at ``z = 0``, as ``abs``'s. Real arguments keep the table's rules (derivative 0)."""
    real_rule, lazy = RRULES[np.sign]
    real_forward = FRULES[np.sign]

    def half_inverse_abs(lz: Any) -> Any:
        r = np.abs(lz)
        return np.where(np.equal(r, 0), 0.0, 0.5 / np.where(np.equal(r, 0), 1.0, r))

    def rule(x: Any, *args: Any, **kwargs: Any) -> tuple:
        if not _is_complex(x):
            return real_rule(x, *args, **kwargs)
        lz = _lazy(x)
        y = np.sign(lz)

        def pullback(dy: Any) -> tuple:
            d = _operand(dy)
            g = (d - np.conjugate(d) * np.conjugate(y * y)) * half_inverse_abs(lz)
            return (_as_cotangent(unbroadcast_to(g, np.shape(x))),)

        return y, pullback

    def forward(tangents: tuple, x: Any, *args: Any, **kwargs: Any) -> tuple:
        if not _is_complex(x):
            return real_forward(tangents, x, *args, **kwargs)
        lz = _lazy(x)
        y = np.sign(lz)
        (t,) = tangents
        if _zero(t):
            return y, ZeroTangent()
        lt = lazy_tangent(t)
        return y, fit((lt - y * y * np.conjugate(lt)) * half_inverse_abs(lz), y)

    rule.__name__, forward.__name__ = "rrule_sign", "frule_sign"
    register_rrule(np.sign, lazy=lazy)(rule)
    lazy_frule(np.sign)(forward)


_complex_sign()


@primitive
def astype(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)`` as a function, so that the tracer can record it.

    >>> astype(np.ones(2, np.float32), np.float64).dtype
    dtype('float64')
    """
    return x.astype(np.dtype(dtype))


@register_rrule(astype, lazy=True)
def _astype(x: Any, dtype: Any) -> tuple[Any, Callable]:
    """The cotangent is cast back to ``x``'s dtype; of a real ``x`` made complex it is the real
    part (the transpose of embedding R in C: ``Re``, not a cast that warns)."""
    lx = _lazy(x)
    y = lx.astype(np.dtype(dtype)) if hasattr(lx, "astype") else np.asarray(x, dtype)

    def pullback(dy: Any) -> tuple:
        d = _operand(dy)
        src = np.result_type(x)
        if src.kind != "c" and is_complex(d):
            d = np.real(d)
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
    if np.dtype(dtype).kind != "c" and is_complex(t):
        t = np.real(t)  # the user's cast discards the imaginary part (and warns once, there)
    return y, (t.astype(np.dtype(dtype)) if hasattr(t, "astype") else np.asarray(t, dtype))


# The ufuncs declared in this module (rules/special.py and users declare more into PARTIALS).
NUMPY_PARTIALS = frozenset(PARTIALS)

__all__ = ["NUMPY_PARTIALS", "PARTIALS", "angle_of", "astype", "elementwise_op", "scalar_rule"]

"""Elementwise rules: one line per ufunc, its partial derivatives as data.

``scalar_rule(ufunc, *partials)`` declares an elementwise op once: each partial is a function of
the inputs and the output, ``∂y/∂xᵢ(x..., y)``, written with NumPy operations. That gives the
reverse rule (``ȳ * ∂y/∂xᵢ``, summed over broadcast axes), lazy from end to end: the primal is a
lazy map, each cotangent a ``BroadcastThunk`` that fuses into whatever consumes it. ``None`` as a
partial means the derivative is zero everywhere it exists (``floor``, ``sign``).

Kinks and ties follow JAX: ``maximum``/``minimum`` split the derivative evenly at ties (so
``clip`` at a bound gives ½), ``abs`` has derivative 1 at 0 (and at -0.0), as ``jax.grad(jnp.abs)``.

Example::

    >>> scalar_rule(np.sinh, lambda x, y: np.cosh(x))   # how sinh is declared below
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import NoTangent, ZeroTangent
from .lazy_values import as_cotangent as _as_cotangent
from .lazy_values import as_lazy as _lazy
from .lazy_values import operand as _operand
from .registry import is_differentiable, primitive, register_rrule
from .shapes import unbroadcast_to

PARTIALS: dict[np.ufunc, tuple] = {}


def scalar_rule(ufunc: np.ufunc, *partials: Callable | None) -> None:
    """Register the lazy reverse rule of an elementwise ``ufunc`` from its partials.

    >>> scalar_rule(np.exp, lambda x, y: y)
    """
    if len(partials) != ufunc.nin:
        raise ValueError(f"{ufunc.__name__} takes {ufunc.nin} inputs: give one partial each")
    PARTIALS[ufunc] = partials

    def rule(*args: Any, **kwargs: Any) -> tuple[Any, Callable]:
        largs = tuple(_lazy(a) for a in args)
        y = ufunc(*largs, **kwargs)

        def pullback(dy: Any) -> tuple:
            d = _operand(dy)
            grads = []
            for a, partial in zip(args, partials):
                if not is_differentiable(a):
                    grads.append(NoTangent())
                elif partial is None:
                    grads.append(ZeroTangent())
                else:
                    p = partial(*largs, y)
                    g = d if _is_one(p) else d * p
                    grads.append(_as_cotangent(unbroadcast_to(g, np.shape(a))))
            return tuple(grads)

        return y, pullback

    rule.__name__ = f"rrule_{ufunc.__name__}"
    register_rrule(ufunc, lazy=True)(rule)


def _is_one(p: Any) -> bool:
    return type(p) in (int, float) and p == 1  # not a jit number argument: its value may change


def _balanced_eq(x: Any, y: Any, z: Any) -> Any:
    """1 where ``x == y`` and ``y != z``, ½ where all three are equal, else 0 (JAX's choice)."""
    return np.where(np.equal(x, y), np.where(np.equal(y, z), 0.5, 1.0), 0.0)


def _abs_partial(x: Any) -> Any:
    """``d|x|/dx``: ``sign(x)`` except 1 at ±0 (JAX's ``select(x >= 0, 1, -1)``), dtype kept."""
    if np.issubdtype(np.result_type(x.dtype if hasattr(x, "dtype") else x), np.complexfloating):
        return np.sign(x)
    return np.sign(x) + np.equal(x, 0)


LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))

# fmt: off
scalar_rule(np.add,         lambda a, b, y: 1,                  lambda a, b, y: 1)
scalar_rule(np.subtract,    lambda a, b, y: 1,                  lambda a, b, y: -1)
scalar_rule(np.multiply,    lambda a, b, y: b,                  lambda a, b, y: a)
scalar_rule(np.divide,      lambda a, b, y: 1 / b,              lambda a, b, y: -y / b)
scalar_rule(np.power,       lambda a, b, y: b * np.power(a, b - 1),
                            lambda a, b, y: np.where(np.equal(a, 0), 0.0, y * np.log(np.where(np.equal(a, 0), 1.0, a))))  # noqa: E501
scalar_rule(np.float_power, lambda a, b, y: b * np.float_power(a, b - 1),
                            lambda a, b, y: np.where(np.equal(a, 0), 0.0, y * np.log(np.where(np.equal(a, 0), 1.0, a))))  # noqa: E501
scalar_rule(np.negative,    lambda x, y: -1)
scalar_rule(np.positive,    lambda x, y: 1)
scalar_rule(np.absolute,    lambda x, y: _abs_partial(x))
scalar_rule(np.fabs,        lambda x, y: _abs_partial(x))
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
scalar_rule(np.logaddexp,   lambda a, b, y: np.exp(a - y),      lambda a, b, y: np.exp(b - y))
scalar_rule(np.logaddexp2,  lambda a, b, y: np.exp2(a - y),     lambda a, b, y: np.exp2(b - y))
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
scalar_rule(np.arccosh,     lambda x, y: 1 / np.sqrt(x * x - 1))
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
scalar_rule(np.conjugate,   lambda x, y: 1)
# Piecewise constant: the derivative is zero wherever it exists.
for _u in (np.floor, np.ceil, np.rint, np.trunc, np.sign, np.signbit, np.isnan, np.isinf,
           np.isfinite, np.logical_not):
    scalar_rule(_u, None)
for _u in (np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
           np.logical_and, np.logical_or, np.logical_xor, np.heaviside):
    scalar_rule(_u, None, None)
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


@register_rrule(np.where, lazy=True)
def _where(condition: Any, x: Any, y: Any) -> tuple[Any, Callable]:
    """``where(c, x, y)``: the cotangent goes to ``x`` where ``c`` holds, to ``y`` elsewhere."""
    c, lx, ly = _lazy(condition), _lazy(x), _lazy(y)
    out = np.where(c, lx, ly)

    def pullback(dy: Any) -> tuple:
        d = _operand(dy)
        gx = unbroadcast_to(np.where(c, d, 0.0), np.shape(x)) if is_differentiable(x) else None
        gy = unbroadcast_to(np.where(c, 0.0, d), np.shape(y)) if is_differentiable(y) else None
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


__all__ = ["PARTIALS", "astype", "scalar_rule"]

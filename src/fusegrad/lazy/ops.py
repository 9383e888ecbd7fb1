"""The op table: every elementwise operation the lazy IR can fuse, as data.

Each op is named after its NumPy (or SciPy) ufunc, so ``grep tanh`` finds it. ``expensive`` marks
ops that call a transcendental function: the materialisation policy stores such a value rather
than recompute it many times (DESIGN.md, "When to materialise").

Example::

    >>> OPS["tanh"].ufunc is np.tanh, OPS["tanh"].expensive
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Op:
    """An elementwise operation: its name, its ufunc (or a function called like one, with
    ``out=``), its arity, whether it is expensive."""

    name: str
    ufunc: np.ufunc
    nin: int
    expensive: bool


def _part(fn):
    """``np.real``/``np.imag`` called like a unary ufunc: ``f(z, out=None)``."""

    def part(z, out=None):
        if out is None:
            return np.array(fn(z))  # a copy: np.real of an array is a view of it
        np.copyto(out, fn(z))
        return out

    part.__name__ = fn.__name__
    return part


_CHEAP = """
add subtract multiply divide floor_divide remainder fmod negative positive absolute fabs sign
square reciprocal maximum minimum fmax fmin copysign floor ceil rint trunc
greater greater_equal less less_equal equal not_equal logical_and logical_or logical_xor
logical_not isnan isinf isfinite signbit deg2rad rad2deg heaviside conjugate
""".split()

_EXPENSIVE = """
power float_power sqrt cbrt exp exp2 expm1 log log2 log10 log1p logaddexp logaddexp2
sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh arctan2 hypot
""".split()

# SciPy ufuncs, fused when SciPy is installed.
_SCIPY_EXPENSIVE = "expit logit erf erfc xlogy xlog1py log_expit".split()

OPS: dict[str, Op] = {}
for _name in _CHEAP + _EXPENSIVE:
    _u = getattr(np, _name)
    OPS[_name] = Op(_name, _u, _u.nin, _name in _EXPENSIVE)

try:  # SciPy is optional.
    import scipy.special as _sp

    for _name in _SCIPY_EXPENSIVE:
        if hasattr(_sp, _name):
            _u = getattr(_sp, _name)
            OPS[_name] = Op(_name, _u, _u.nin, True)
except ImportError:  # pragma: no cover - depends on the environment
    pass

# The parts of a complex value: not ufuncs in NumPy (``np.real(z)`` is a view), fused as ops.
OPS["real"] = Op("real", _part(np.real), 1, False)
OPS["imag"] = Op("imag", _part(np.imag), 1, False)

# Aliases NumPy exposes under two names point at one entry.
BY_UFUNC: dict[np.ufunc, Op] = {
    op.ufunc: op for op in OPS.values() if isinstance(op.ufunc, np.ufunc)
}

REDUCING_UFUNCS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}


def op_for(ufunc: object) -> Op | None:
    """The table entry for a ufunc, or None when it is not fusable.

    >>> op_for(np.exp).name
    'exp'
    """
    return BY_UFUNC.get(ufunc)  # type: ignore[arg-type]

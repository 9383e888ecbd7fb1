"""The op table: every elementwise operation the lazy IR can fuse, one entry per op holding
everything about it.

An entry (:class:`Op`) gives the op's NumPy (or SciPy) function, its arity, its cost class, the
dtype its scalar loop runs in, whether it is defined on floats only, and its expression for each
engine of this package: ``numpy_blocked`` calls ``ufunc`` itself (into a block buffer with
``out=``), and ``numba`` is the scalar source the numba engine's code generator
(``engines/numba_codegen.py``) writes into its loops. An engine supports an op exactly when it
has an expression for it: ``numba=None`` (or no ``numba`` at all) means the numba engine
declines kernels with that op, so ``auto`` runs them on numpy_blocked and naming ``numba``
raises ``UnsupportedKernel``. Each op is named after its NumPy (or SciPy) ufunc, so
``grep tanh`` finds it.

``numba`` is a template of the scalar expression (``str.format``): ``{0}``, ``{1}`` are the
arguments' sources, already converted to the loop dtype, ``{T}`` that dtype's scalar
constructor (``np.float64``), ``{f32}`` is ``_f32`` in float32 loops (``numba_math``'s float32
variants) and empty otherwise. Where the expression depends on the kind of the loop dtype it is
a mapping from kinds to templates (``{"f": ..., "iub": ...}``; a kind it leaves out is declined,
as ``negative`` declines bool), and where it needs a value
computed in the loop dtype, a function of the dtype returning the template. A template may call
``math.*``, ``np.*``, ``vm.*`` (``numba_math``: branch-free versions LLVM vectorises) and the
scalar helpers of ``numba_codegen.HELPERS`` by name; the generator adds what it calls.

Adding an elementwise op to both engines is one entry of ``_TABLE`` below, e.g.
``_op("cbrt", "np.cbrt({0})", expensive=True, float_only=True)``; its derivatives are rules in
``rules/elementwise.py``. Engines outside this package keep their own table keyed by op name
(their ``ops``, see ``engines/registry.py``).

``expensive`` marks ops that call a transcendental function: the materialisation policy stores
such a value rather than recompute it many times (DESIGN.md, "When to materialise").

Example::

    >>> OPS["tanh"].ufunc is np.tanh, OPS["tanh"].expensive, OPS["tanh"].numba
    (True, True, 'vm.tanh{f32}({0})')
    >>> OPS["less"].loop, OPS["sqrt"].float_only
    ('args', True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# A numba expression: a template, templates by dtype kind, or a function of the loop dtype
# returning a template (see the module docstring).
NumbaExpr = str | Mapping[str, str] | Callable[[np.dtype], str]


@dataclass(frozen=True)
class Op:
    """An elementwise operation.

    ``ufunc``: the NumPy function (a ufunc, or a function called like one, with ``out=``),
    which is numpy_blocked's expression for it. ``nin``: its arity. ``expensive``: it calls a
    transcendental function (the policy's cost class). ``float_only``: the numba engine declines
    it in integer and bool loops. ``loop``: the dtype its scalar loop computes in: ``"result"``
    (the op's result dtype), ``"args"`` (the arguments' common dtype; the result is bool:
    comparisons, ``isnan``) or ``"bool"`` (logical ops). ``numba``: the numba engine's
    expression, or None when that engine does not translate the op.
    """

    name: str
    ufunc: Any
    nin: int
    expensive: bool
    float_only: bool = False
    loop: str = "result"
    numba: NumbaExpr | None = None


def _part(fn):
    """``np.real``/``np.imag`` called like a unary ufunc: ``f(z, out=None)``."""

    def part(z, out=None):
        if out is None:
            return np.array(fn(z))  # a copy: np.real of an array is a view of it
        np.copyto(out, fn(z))
        return out

    part.__name__ = fn.__name__
    return part


def _angle(half_turns_per_unit: bool) -> Callable[[np.dtype], str]:
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
# NumPy's fast path for a scalar exponent of 2; the branch is loop-invariant when the exponent
# is a constant, so LLVM unswitches it out of the loop.
_FPOW = "({0} * {0} if {1} == 2 else {0} ** {1})"

# (name, numba expression, options): the order is the table's order.
_TABLE: list[tuple[str, NumbaExpr | None, dict[str, Any]]] = []


def _op(name: str, numba: NumbaExpr | None, **options: Any) -> None:
    _TABLE.append((name, numba, options))


# arithmetic
_op("add", "({0} + {1})")
_op("subtract", {"fiu": "({0} - {1})"})  # NumPy has no bool subtract
_op("multiply", "({0} * {1})")
_op("divide", "({0} / {1})", float_only=True)
_op("floor_divide", {"f": "_ffloordiv({0}, {1})", "iub": "_ifloordiv({0}, {1})"})
_op("remainder", {"f": "_fremainder({0}, {1})", "iub": "_iremainder({0}, {1})"})
_op("fmod", {"f": "np.fmod({0}, {1})", "iub": "_ifmod({0}, {1})"})
_op("negative", {"fiu": "(-{0})"})
_op("positive", "{0}")
_op("absolute", {"fi": "abs({0})", "ub": "{0}"})
_op("fabs", {"fi": "abs({0})", "ub": "{0}"})
_op("sign", _SIGN)
_op("square", "({0} * {0})")
_op("reciprocal", "({T}(1) / {0})", float_only=True)
_op("maximum", _extremum(">", "{0}"))
_op("minimum", _extremum("<", "{0}"))
_op("fmax", _extremum(">", "{1}"))
_op("fmin", _extremum("<", "{1}"))
_op("copysign", "math.copysign({0}, {1})", float_only=True)
_op("floor", _rounding("floor"))
_op("ceil", _rounding("ceil"))
_op("rint", _rounding("rint"))
_op("trunc", _rounding("trunc"))
# comparisons and predicates: computed in the arguments' dtype, a bool result
_op("greater", "({0} > {1})", loop="args")
_op("greater_equal", "({0} >= {1})", loop="args")
_op("less", "({0} < {1})", loop="args")
_op("less_equal", "({0} <= {1})", loop="args")
_op("equal", "({0} == {1})", loop="args")
_op("not_equal", "({0} != {1})", loop="args")
_op("logical_and", "({0} & {1})", loop="bool")
_op("logical_or", "({0} | {1})", loop="bool")
_op("logical_xor", "({0} != {1})", loop="bool")
_op("logical_not", "(not {0})", loop="bool")
_op("isnan", {"f": "({0} != {0})", "iub": "False"}, loop="args")
_op("isinf", {"f": "math.isinf({0})", "iub": "False"}, loop="args")
_op("isfinite", {"f": "math.isfinite({0})", "iub": "True"}, loop="args")
_op("signbit", {"f": "(math.copysign(1.0, {0}) < 0)", "iub": "({0} < 0)"}, loop="args")
_op("deg2rad", _angle(True), float_only=True)
_op("rad2deg", _angle(False), float_only=True)
_op(
    "heaviside",
    "({0} if {0} != {0} else ({1} if {0} == 0 else ({T}(0) if {0} < 0 else {T}(1))))",
    float_only=True,
)
_op("conjugate", "{0}")  # complex values never reach numba kernels
# transcendental
_op("power", {"f": _FPOW, "iub": "_ipow({0}, {1})"}, expensive=True)
_op("float_power", _FPOW, expensive=True, float_only=True)
_op("sqrt", "np.sqrt({0})", expensive=True, float_only=True)
_op("cbrt", "np.cbrt({0})", expensive=True, float_only=True)
_op("exp", "vm.exp{f32}({0})", expensive=True, float_only=True)
_op("exp2", "np.exp2({0})", expensive=True, float_only=True)
_op("expm1", "vm.expm1{f32}({0})", expensive=True, float_only=True)
_op("log", "vm.log{f32}({0})", expensive=True, float_only=True)
_op("log2", "math.log2({0})", expensive=True, float_only=True)
_op("log10", "math.log10({0})", expensive=True, float_only=True)
_op("log1p", "vm.log1p{f32}({0})", expensive=True, float_only=True)
_op("logaddexp", "_logaddexp({0}, {1})", expensive=True, float_only=True)
_op("logaddexp2", "_logaddexp2({0}, {1})", expensive=True, float_only=True)
_op("sin", "math.sin({0})", expensive=True, float_only=True)
_op("cos", "math.cos({0})", expensive=True, float_only=True)
_op("tan", "math.tan({0})", expensive=True, float_only=True)
_op("arcsin", "math.asin({0})", expensive=True, float_only=True)
_op("arccos", "math.acos({0})", expensive=True, float_only=True)
_op("arctan", "math.atan({0})", expensive=True, float_only=True)
_op("sinh", "math.sinh({0})", expensive=True, float_only=True)
_op("cosh", "math.cosh({0})", expensive=True, float_only=True)
_op("tanh", "vm.tanh{f32}({0})", expensive=True, float_only=True)
_op("arcsinh", "math.asinh({0})", expensive=True, float_only=True)
_op("arccosh", "math.acosh({0})", expensive=True, float_only=True)
_op("arctanh", "math.atanh({0})", expensive=True, float_only=True)
_op("arctan2", "math.atan2({0}, {1})", expensive=True, float_only=True)
_op("hypot", "math.hypot({0}, {1})", expensive=True, float_only=True)
# SciPy ufuncs (scipy.special), fused when SciPy is installed
_op("expit", "({T}(1) / ({T}(1) + vm.exp{f32}(-{0})))", expensive=True, float_only=True, scipy=True)
_op("logit", "_logit({0})", expensive=True, float_only=True, scipy=True)
_op("erf", "math.erf({0})", expensive=True, float_only=True, scipy=True)
_op("erfc", "math.erfc({0})", expensive=True, float_only=True, scipy=True)
_op(
    "xlogy",
    "({T}(0) if ({0} == 0 and {1} == {1}) else {0} * vm.log{f32}({1}))",
    expensive=True,
    float_only=True,
    scipy=True,
)
_op(
    "xlog1py",
    "({T}(0) if ({0} == 0 and {1} == {1}) else {0} * vm.log1p{f32}({1}))",
    expensive=True,
    float_only=True,
    scipy=True,
)
_op("log_expit", "_log_expit({0})", expensive=True, float_only=True, scipy=True)
# The parts of a complex value: not ufuncs in NumPy (``np.real(z)`` is a view), fused as ops.
_op("real", "{0}", function=_part(np.real), nin=1)
_op("imag", "{T}(0)", function=_part(np.imag), nin=1)


def _build() -> dict[str, Op]:
    try:  # SciPy is optional.
        import scipy.special as sp
    except ImportError:  # pragma: no cover - depends on the environment
        sp = None
    table: dict[str, Op] = {}
    for name, numba, opts in _TABLE:
        fn = opts.pop("function", None)
        nin = opts.pop("nin", None)
        if fn is None:
            module = sp if opts.pop("scipy", False) else np
            fn = getattr(module, name, None) if module is not None else None
            if fn is None:  # pragma: no cover - an old SciPy
                continue
            nin = fn.nin
        table[name] = Op(name, fn, nin, numba=numba, **{"expensive": False, **opts})
    return table


OPS: dict[str, Op] = _build()

# Aliases NumPy exposes under two names point at one entry.
BY_UFUNC: dict[np.ufunc, Op] = {
    op.ufunc: op for op in OPS.values() if isinstance(op.ufunc, np.ufunc)
}

REDUCING_UFUNCS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}


def op_for(ufunc: np.ufunc) -> Op | None:
    """The table entry for a ufunc, or None when it is not fusable.

    >>> op_for(np.exp).name
    'exp'
    """
    return BY_UFUNC.get(ufunc)

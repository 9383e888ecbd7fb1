"""The op table: every elementwise operation the lazy IR can fuse, one entry per op holding
everything about it.

An entry (:class:`Op`) gives the op's NumPy (or SciPy) function, its arity, its cost class, the
dtype its scalar loop runs in, whether it is defined on floats only, and its expression for each
engine of this package: ``numpy_blocked`` calls ``ufunc`` itself (into a block buffer with
``out=``), and ``numba`` is the scalar source the numba engine's code generator
(``engines/numba_codegen.py``) writes into its loops. An engine supports an op exactly when it
has an expression for it: ``numba=None`` (or no ``numba`` at all) means the numba engine
declines kernels with that op, so ``auto`` runs them on numpy_blocked and naming ``numba``
raises ``UnsupportedKernel``. Each op is named after its NumPy (or SciPy) ufunc.

Entries are added with :func:`register`, as engines register themselves. A NumPy function is
declared once, with its derivatives beside its entry, by the rules layer: ``elementwise_op`` in
``rules/common.py`` registers the entry and both rules, and ``rules/elementwise.py`` declares
every fusable ufunc that way (``grep "np.tanh," src/fusegrad/rules`` finds all of tanh). This
module registers only the ops the IR makes itself, ``real`` and ``imag`` (below). Importing
``fusegrad.lazy`` imports the package, and so the rules layer, first: the table is complete
before any expression is built.

``numba`` is a template of the scalar expression (``str.format``): ``{0}``, ``{1}`` are the
arguments' sources, already converted to the loop dtype, ``{T}`` that dtype's scalar
constructor (``np.float64``), ``{f32}`` is ``_f32`` in float32 loops (``numba_math``'s float32
variants) and empty otherwise. Where the expression depends on the kind of the loop dtype it is
a mapping from kinds to templates (``{"f": ..., "iub": ...}``; a kind it leaves out is declined,
as ``negative`` declines bool), and where it needs a value
computed in the loop dtype, a function of the dtype returning the template. A template may call
``math.*``, ``np.*``, ``vm.*`` (``numba_math``: branch-free versions LLVM vectorises) and the
scalar helpers of ``numba_codegen.HELPERS`` by name; the generator adds what it calls. Engines
outside this package keep their own table keyed by op name (their ``ops``, see
``engines/registry.py``).

``expensive`` marks ops that call a transcendental function: the materialisation policy stores
such a value rather than recompute it many times (``plan.py``'s policy).

Example::

    >>> OPS["tanh"].ufunc is np.tanh, OPS["tanh"].expensive, OPS["tanh"].numba
    (True, True, 'vm.tanh{f32}({0})')
    >>> OPS["less"].loop, OPS["sqrt"].float_only
    ('args', True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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


LOOPS = ("result", "args", "bool")

OPS: dict[str, Op] = {}
# Aliases NumPy exposes under two names (np.abs is np.absolute) are one ufunc, so one entry.
BY_UFUNC: dict[np.ufunc, Op] = {}


def register(
    function: Any,
    *,
    numba: NumbaExpr | None = None,
    expensive: bool = False,
    float_only: bool = False,
    loop: str = "result",
    name: str | None = None,
    nin: int | None = None,
) -> Op:
    """Add ``function`` (a ufunc, or a function called like one, with ``out=``) to the table,
    under its ``__name__`` unless ``name`` is given, and return its entry. Registering a function
    again replaces its entry; a name another function holds is refused.

    ``rules/common.py``'s ``elementwise_op`` calls this with the op's derivatives beside it, which
    is how a NumPy function is declared; the fields are :class:`Op`'s.

    >>> register(np.cbrt, numba="np.cbrt({0})", expensive=True, float_only=True).nin
    1
    >>> register(np.cbrt, name="sqrt")
    Traceback (most recent call last):
    ValueError: the op name 'sqrt' is held by another function, <ufunc 'sqrt'>; declare <ufunc 'cbrt'> under a name of its own (name=...)
    """  # noqa: E501
    name = function.__name__ if name is None else name
    nin = getattr(function, "nin", None) if nin is None else nin
    if not isinstance(nin, int) or nin < 1:
        raise TypeError(f"op {name!r}: {function!r} is not a ufunc; give its arity as nin=")
    if loop not in LOOPS:
        raise ValueError(f"op {name!r}: loop={loop!r}, expected one of {LOOPS}")
    held = OPS.get(name)
    if held is not None and held.ufunc is not function:
        raise ValueError(
            f"the op name {name!r} is held by another function, {held.ufunc!r}; declare "
            f"{function!r} under a name of its own (name=...)"
        )
    same = BY_UFUNC.get(function) if isinstance(function, np.ufunc) else None
    if same is not None and same.name != name:
        raise ValueError(f"{function!r} is the op {same.name!r} already; one ufunc is one op")
    op = Op(name, function, nin, expensive, float_only, loop, numba)
    OPS[name] = op
    if isinstance(function, np.ufunc):
        BY_UFUNC[function] = op
    return op


def _part(fn: Callable) -> Callable:
    """``np.real``/``np.imag`` called like a unary ufunc: ``f(z, out=None)``."""

    def part(z, out=None):
        if out is None:
            return np.array(fn(z))  # a copy: np.real of an array is a view of it
        np.copyto(out, fn(z))
        return out

    part.__name__ = fn.__name__
    return part


# The parts of a complex value: not ufuncs in NumPy (``np.real(z)`` is a view), so the IR makes
# these ops itself (``protocols.py`` for ``np.real``/``.real``, ``reductions.py`` for ``var`` of
# complex values); their derivatives are rules written by hand in ``rules/elementwise.py``.
register(_part(np.real), name="real", nin=1, numba="{0}")
register(_part(np.imag), name="imag", nin=1, numba="{T}(0)")


# The loop dtypes a numba expression may be filled in for (what ``fingerprint`` evaluates).
_LOOP_DTYPES = tuple(map(np.dtype, ("f8", "f4", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "?")))


def _template_text(numba: NumbaExpr | None) -> str:
    if numba is None or isinstance(numba, str):
        return repr(numba)
    if isinstance(numba, Mapping):
        return repr(sorted(numba.items()))
    filled = []
    for dt in _LOOP_DTYPES:
        try:
            filled.append((dt.str, numba(dt)))
        except Exception as e:  # a dtype the op is never compiled for
            filled.append((dt.str, type(e).__name__))
    return repr(filled)


def fingerprint(names: Iterable[str] | None = None) -> str:
    """A text of the entries ``names`` (all of them by default) that changes when any of their
    fields does: each numba template as filled in for every loop dtype, flags, function. Entries
    are declared outside this module (``rules/elementwise.py``, a user's code), so a cache of
    compiled kernels keys on this rather than on this file's source.

    >>> fingerprint(["add"])
    "add ufunc:add 2 False False result '({0} + {1})'"
    """
    lines = []
    for name in sorted(OPS if names is None else names):
        op = OPS[name]
        function = f"{type(op.ufunc).__name__}:{op.ufunc.__name__}"  # no address: stable
        fields = (name, function, op.nin, op.expensive, op.float_only, op.loop)
        lines.append(" ".join(map(str, fields)) + " " + _template_text(op.numba))
    return "\n".join(lines)


REDUCING_UFUNCS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}


def op_for(ufunc: np.ufunc) -> Op | None:
    """The table entry for a ufunc, or None when it is not fusable.

    >>> op_for(np.exp).name
    'exp'
    """
    return BY_UFUNC.get(ufunc)

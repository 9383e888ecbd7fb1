"""The kernel description: everything an engine receives, and nothing else.

A kernel is one pass over an iteration *domain* (a shape). Operands are read through index maps:
each input array has one axis per domain axis, of size 1 (the axis broadcasts: always index 0) or
of the domain's size (index with that axis's loop variable). The *program* is a scalar expression
DAG in SSA form; *outputs* name program values and how each is reduced.

Operand ids: ``0 .. len(inputs)-1`` are the inputs, the next ``len(constants)`` ids are the
constants, then one id per instruction of ``program`` in order.

Example, the row sum of ``tanh(x[:, None] - y[None, :])`` over an ``(n, m)`` domain::

    Kernel(domain=(n, m),
           inputs=(x.reshape(n, 1), y.reshape(1, m)),
           constants=(),
           program=(Instr("subtract", (0, 1), f8), Instr("tanh", (2,), f8)),
           outputs=(Output(value=3, reduce="sum", axes=(1,), dtype=f8),))

An engine's ``run(kernel)`` returns one array per output, each of the *keepdims* shape: the domain
with every reduced axis set to 1.

A *mirrored* sum (``Output(value, "sum", (1,), dtype, mirror=other)``, domain axes 0 and 1 of equal
size) adds the column sums of a second value onto the row sums: ``out[i] = sum_j v[i, j] +
sum_j other[j, i]``. It is the gradient of a variable used on both sides of a pairwise expression
(``x[:, None] - x[None, :]``), computed in one pass with no column partials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

REDUCTIONS = ("sum", "prod", "max", "min")


@dataclass(frozen=True)
class Instr:
    """One scalar operation: ``op`` is a name in ``fusegrad.lazy.ops.OPS``, ``"where"``
    (condition, if-true, if-false) or ``"cast"`` (one argument, converted to ``dtype``)."""

    op: str
    args: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Output:
    """A program value written out: elementwise (``reduce is None``) or reduced over ``axes``.

    ``mirror``: for a sum over axis 1 only, a second program value whose sum over axis 0 is added
    onto the same output, its kept axis 1 read as axis 0 (see the module docstring).
    """

    value: int
    reduce: str | None
    axes: tuple[int, ...]
    dtype: np.dtype
    mirror: int | None = None


@dataclass(frozen=True, eq=False)
class Kernel:
    """One fused pass. See the module docstring for the operand numbering."""

    domain: tuple[int, ...]
    inputs: tuple[np.ndarray, ...]
    constants: tuple[object, ...]
    program: tuple[Instr, ...]
    outputs: tuple[Output, ...]
    _sig: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._sig is not None:  # made from a checked kernel's signature (jit's replays)
            return
        for o in self.outputs:
            if o.mirror is not None and not (
                o.reduce == "sum"
                and o.axes == (1,)
                and len(self.domain) >= 2
                and self.domain[0] == self.domain[1]
            ):
                raise ValueError(
                    f"a mirrored output must be a sum over axis 1 of a domain whose axes 0 and 1 "
                    f"have one size; got {o.reduce} over {o.axes} of {self.domain}"
                )

    @property
    def size(self) -> int:
        """Number of points in the domain."""
        return math.prod(self.domain)

    def output_shape(self, out: Output) -> tuple[int, ...]:
        """The keepdims shape of ``out``: the domain with reduced axes set to 1."""
        return tuple(1 if a in out.axes else n for a, n in enumerate(self.domain))

    def signature(self) -> tuple:
        """A hashable key of everything but the data: what a compiled kernel depends on.

        Two kernels with equal signatures can share generated code; the domain's sizes are not
        part of it, only which input axes broadcast.
        """
        sig = self._sig
        if sig is None:
            inputs = tuple(
                (a.dtype.str, tuple(s == 1 and d != 1 for s, d in zip(a.shape, self.domain)))
                for a in self.inputs
            )
            consts = tuple(_const_kind(c) for c in self.constants)
            prog = tuple((i.op, i.args, i.dtype.str) for i in self.program)
            outs = tuple((o.value, o.reduce, o.axes, o.dtype.str, o.mirror) for o in self.outputs)
            sig = (len(self.domain), inputs, consts, prog, outs)
            object.__setattr__(self, "_sig", sig)
        return sig


def _const_kind(c: object) -> str:
    """Python scalars are weak-typed (NEP 50); NumPy scalars carry their dtype."""
    if isinstance(c, np.generic):
        return c.dtype.str
    return type(c).__name__

"""``explain(fun, *args)``: what one gradient evaluation computed, stored, recomputed and allocated.

It runs ``fusegrad.grad(fun, argnums)(*args)`` once, inside ``fusegrad.lazy.recording()`` and
``fusegrad.memory.track_allocations()``, with the small-array path off (the plan is the one a
large input gets), and returns the record as an ``Explanation``. Nothing is
printed: ``print(e)`` (or ``e`` alone at an interactive prompt) shows the report, and its fields
are data::

    >>> import numpy as np, fusegrad as fg
    >>> e = explain(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), np.zeros(20))
    >>> [k["domain"] for k in e.kernels]      # one fused pass over 20×20
    [(20, 20)]
    >>> e.grad.shape
    (20,)
    >>> print(e)                              # doctest: +ELLIPSIS
    1 kernel(s):
      [0] ... domain 20×20: mirrored sum (rows over axis 1 + columns over axis 0) -> 20 float64; ...
    ...
    gradient: array 20 float64
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import grad as _grad
from .lazy import engines, recording, small, use_engine
from .memory import track_allocations


@dataclass(repr=False)
class Explanation:
    """The record of one gradient evaluation; ``str()`` and ``repr()`` give the report.

    ``kernels``, ``stored`` and ``recomputed`` are the planner's events (dicts, see
    ``fusegrad.lazy.recording``); bytes are allocations seen by ``track_allocations`` (NumPy
    buffers, plus the Python objects made during the call in ``peak_bytes``).

    >>> e = Explanation(peak_bytes=2048, grad=np.zeros(3))
    >>> e                                     # an interactive prompt shows the report
    0 kernel(s):
    stored (0):
    recomputed (0):
    allocated: peak 2.0 KiB, alive at the end 0 B
    gradient: array 3 float64
    """

    kernels: list[dict] = field(default_factory=list)
    stored: list[dict] = field(default_factory=list)
    recomputed: list[dict] = field(default_factory=list)
    peak_bytes: int = 0
    total_bytes: int = 0
    grad: Any = None

    def __str__(self) -> str:
        lines = [f"{len(self.kernels)} kernel(s):"]
        for i, k in enumerate(self.kernels):
            outs = ", ".join(_output(o) for o in k["outputs"])
            lines.append(
                f"  [{i}] {k['engine']:<5} domain {_shape(k['domain'])}: {outs}; "
                f"{len(k['inputs'])} input(s), {_bytes(k['bytes'])} out"
            )
            lines.append(f"      ops: {' '.join(k['ops']) or '(copy)'}")
        lines.append(f"stored ({len(self.stored)}):")
        lines += [f"  {s['node']} {_shape(s['shape'])}: {s['reason']}" for s in self.stored]
        lines.append(f"recomputed ({len(self.recomputed)}):")
        lines += [
            f"  {r['node']} in {r['kernels']} kernels: {r['reason']}" for r in self.recomputed
        ]
        lines.append(
            f"allocated: peak {_bytes(self.peak_bytes)}, alive at the end "
            f"{_bytes(self.total_bytes)}"
        )
        lines.append(f"gradient: {_describe(self.grad)}")
        return "\n".join(lines)

    # The report is what a reader wants from `e` at a prompt; the fields are there as attributes.
    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython: the same text
        p.text(str(self))


def explain(
    fun: Callable,
    *args: Any,
    argnums: int | Sequence[int] = 0,
    engine: str | None = None,
    quiet: bool | None = None,
) -> Explanation:
    """Evaluate ``grad(fun, argnums)(*args)`` once; return its fusion report, an ``Explanation``.

    Nothing is printed; ``print(explain(...))``, or the bare call at an interactive prompt, shows
    the kernels, what was stored or recomputed and why, and the bytes allocated. ``engine``
    (``"numpy"``, ``"numba"``, ``"auto"``) runs every kernel on that engine; by default the engine
    in force is used. ``quiet`` is accepted for older code and does nothing (explain no longer
    prints).

    >>> e = explain(lambda x: np.sum((1 - x) / 2), np.ones(4))
    >>> len(e.kernels), e.grad
    (1, array([-0.5, -0.5, -0.5, -0.5]))
    """
    if quiet is not None:
        warnings.warn(
            "explain(..., quiet=...) is no longer needed: explain returns its report without "
            "printing it; use print(explain(...)) to show it",
            DeprecationWarning,
            stacklevel=2,
        )
    g = _grad(fun, argnums)
    ctx = use_engine(engine) if engine is not None else contextlib.nullcontext()
    with ctx:
        if engines.current() != "numpy":
            # The engines' one-time imports (numba's ~15 MiB of Python objects) are not this
            # call's allocations: auto asks every engine whether it is available.
            for name in engines.names()[1:]:
                engines.get(name).available()
        # small.fusing(): the plan as at scale, whatever the size of the example (ops below
        # FUSEGRAD_EAGER_BELOW elements would otherwise run eagerly and show no kernels)
        with recording() as rec, track_allocations() as mem, small.fusing():
            value = g(*args)
    return Explanation(
        kernels=[e for e in rec if e["event"] == "kernel"],
        stored=[e for e in rec if e["event"] == "store"],
        recomputed=[e for e in rec if e["event"] == "recompute"],
        peak_bytes=mem.peak_bytes,
        total_bytes=mem.total_bytes,
        grad=value,
    )


def _shape(shape: Any) -> str:
    return "×".join(map(str, shape)) if shape else "scalar"


def _output(out: tuple) -> str:
    kind, axes, shape, dtype = out
    if kind == "map":
        return f"map -> {_shape(shape)} {dtype}"
    if kind == "mirrored sum":
        return f"mirrored sum (rows over axis 1 + columns over axis 0) -> {_shape(shape)} {dtype}"
    return f"{kind} over axes {tuple(axes)} -> {_shape(shape)} {dtype}"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _describe(g: Any) -> str:
    if isinstance(g, tuple | list):
        return "(" + ", ".join(_describe(v) for v in g) + ")"
    if isinstance(g, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in g.items()) + "}"
    if isinstance(g, np.ndarray):
        return f"array {_shape(g.shape)} {g.dtype}"
    return f"{type(g).__name__} {g!r}" if np.isscalar(g) else type(g).__name__


__all__ = ["Explanation", "explain"]

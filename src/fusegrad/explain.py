"""``explain(fun, *args)``: what one gradient evaluation computed, stored, recomputed and allocated.

It runs ``fusegrad.grad(fun, argnums)(*args)`` once, inside ``fusegrad.lazy.recording()`` and
``fusegrad.memory.track_allocations()``, prints a report and returns it as an ``Explanation``::

    >>> import numpy as np, fusegrad as fg
    >>> e = explain(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), np.zeros(20), quiet=True)
    >>> [k["domain"] for k in e.kernels]      # one fused pass over 20×20
    [(20, 20)]
    >>> e.grad.shape
    (20,)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import grad as _grad
from .lazy import recording, use_engine
from .memory import track_allocations


@dataclass
class Explanation:
    """The record of one gradient evaluation; ``str()`` gives the printed report.

    ``kernels``, ``stored`` and ``recomputed`` are the planner's events (dicts, see
    ``fusegrad.lazy.recording``); bytes are NumPy allocations seen by ``track_allocations``.
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


def explain(
    fun: Callable,
    *args: Any,
    argnums: int | Sequence[int] = 0,
    engine: str | None = None,
    quiet: bool = False,
) -> Explanation:
    """Evaluate ``grad(fun, argnums)(*args)`` once, print the fusion report, return it as data.

    ``engine`` (``"numpy"``, ``"numba"``, ``"auto"``) runs every kernel on that engine; by default
    the engine in force is used. ``quiet=True`` skips the printing.

    >>> e = explain(lambda x: np.sum((1 - x) / 2), np.ones(4), quiet=True)
    >>> len(e.kernels), e.grad
    (1, array([-0.5, -0.5, -0.5, -0.5]))
    """
    g = _grad(fun, argnums)
    ctx = use_engine(engine) if engine is not None else contextlib.nullcontext()
    with ctx, recording() as rec, track_allocations() as mem:
        value = g(*args)
    ex = Explanation(
        kernels=[e for e in rec if e["event"] == "kernel"],
        stored=[e for e in rec if e["event"] == "store"],
        recomputed=[e for e in rec if e["event"] == "recompute"],
        peak_bytes=mem.peak_bytes,
        total_bytes=mem.total_bytes,
        grad=value,
    )
    if not quiet:
        print(ex)
    return ex


def _shape(shape: Any) -> str:
    return "×".join(map(str, shape)) if shape else "scalar"


def _output(out: tuple) -> str:
    kind, axes, shape, dtype = out
    if kind == "map":
        return f"map -> {_shape(shape)} {dtype}"
    if kind == "mirrored sum":
        return f"mirrored sum (rows over axis 1 + columns over axis 0) -> {_shape(shape)} {dtype}"
    return f"{kind} over axes {tuple(axes)} -> {_shape(shape)} {dtype}"


def _bytes(n: int) -> str:
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

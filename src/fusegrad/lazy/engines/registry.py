"""The engine interface and the registry of engines by name.

An engine is any object (a module will do) with these attributes:

``name: str``
    what ``use_engine(name)`` and ``FUSEGRAD_ENGINE`` call it.
``ops: Container[str]``
    the ops it has an entry for (names of ``fusegrad.lazy.ops.OPS``, ``"cast"``, ``"where"``).
    A kernel with any other op is never given to it.
``available() -> bool``
    whether it can run at all here (its library imports, a device is present).
``supports(kernel) -> bool``
    whether it runs this kernel (every op is in ``ops``; it may also decline dtypes, data,
    reductions); the reference engine (``numpy``) runs what an engine declines.
``cost(kernel) -> float``
    the ``auto`` hint: the time it expects to take, relative to the reference engine's
    (which is 1.0); ``auto`` runs each kernel on the cheapest engine that supports it.
``run(kernel) -> list[numpy.ndarray]``
    one NumPy array per output of ``kernel``, in keepdims shape (``fusegrad.lazy.kernel``).
``claims(kernel) -> bool`` (optional)
    whether only this engine can run ``kernel`` (it reads inputs that live nowhere else, as the
    dask engine's Dask-array leaves do): ``choose`` then gives it this engine whichever engine is
    named, since another would read stand-ins.
``hot_cost(kernel)``, ``replay_cost(kernel)`` (optional)
    ``cost`` for a kernel that runs many times (a step of ``jit``'s replays), and for one of a
    program ``jit`` has replayed ``HOT_CALLS`` times (``engines.choose_hot``).
``replayer(kernel)`` (optional)
    for ``jit``: a function ``run(inputs, constants)`` of new inputs and constants of the
    kernel's shapes and dtypes giving what ``run`` would, planned once (or None: ``run`` is
    called). When the function has ``writes_into = True`` it also takes ``outs``, arrays (or
    None) to write the outputs into, and returns them.

``register(engine)`` adds one; ``fusegrad.lazy.engines`` registers every module of its package
whose name ends in ``_engine`` (and ``numpy_blocked``) the first time an engine is looked up,
and an engine of another package once that package is imported, or once its name is asked for
through the ``fusegrad.engines`` entry-point group.

Example::

    >>> class Toy:                 # a toy engine: runs kernels of additions with NumPy
    ...     name = "toy"
    ...     ops = frozenset({"add"})
    ...     def available(self): return True
    ...     def supports(self, kernel): return True
    ...     def cost(self, kernel): return 5.0   # dearer than the reference: auto never picks it
    ...     def run(self, kernel):
    ...         from fusegrad.lazy.engines import numpy_blocked
    ...         return numpy_blocked.run(kernel)
    >>> toy = register(Toy())
    >>> get("toy") is toy, names()[-1]
    (True, 'toy')
    >>> unregister("toy")
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from ..kernel import Kernel

REFERENCE = "numpy"  # runs every kernel; what a forced engine declines runs here

# --- auto's thresholds: the one place they are set ------------------------------------------
# Measured with benchmarks/bench_crossover.py (and bench_kernels.py's sweep) on the shared
# 2-core machine; float64, points = the kernel's domain size. The engines read them from here.
#
# WHOLE_MAX: numpy_blocked runs a kernel of at most this many points as one block, one ufunc
#   call per instruction over the whole domain into planned buffers (the last straight into the
#   output), as eager NumPy does; above it, in cache-sized blocks into reused buffers. At 2^15
#   points (256 KiB float64 temporaries) a fresh temporary costs ~64 page faults, several us
#   each on a VM, so from there blocks win (arith 3-op map at 32768 points: whole ~900 us with
#   fresh temporaries, blocked ~340 us, numba ~30 us).
WHOLE_MAX = 1 << 16
# NUMBA_COLD_MIN: arithmetic kernels (and numba_math's vectorised exp/log/tanh) of at least
#   this many points go to numba even before they are compiled in this process: 0.08-0.2x
#   numpy_blocked's time from 3*10^4 points up, so a compile (~0.4 s once per machine, then
#   5-70 ms from the disk cache) pays back within a few thousand calls.
NUMBA_COLD_MIN = 100_000
# HOT_CALLS, HOT_MIN: a kernel signature that has run HOT_CALLS times in this process (a loop:
#   training steps, a solver) and has at least HOT_MIN points goes to numba from then on, even
#   below NUMBA_COLD_MIN: numba saves ~0.3 ms a call at 3*10^4 points (arith 3-op: numpy_blocked
#   ~340 us, numba ~30 us), so its load from the disk cache pays back within ~100 calls. Below
#   HOT_MIN the whole-domain NumPy path is within ~1.5x of numba and there is nothing to gain.
HOT_CALLS = 8
HOT_MIN = 10_000
# NUMBA_MIN: below this many points a compiled numba kernel is not preferred (its call, ~10 us of
#   argument handling, costs more than the few ufunc calls of the whole-domain path).
NUMBA_MIN = 1_024
# REPLAY_NUMBA_MIN: in a program jit has replayed HOT_CALLS times, kernels of at least this many
#   points go to numba (numba_engine.replay_cost): its replayer calls the compiled loop with
#   ~2.5 us of dispatch, numpy_blocked's whole-domain path ~1-3 us per instruction and buffer
#   (5-op arithmetic and a sum at 32 points: 5 us against 19; 3-op arithmetic at 128 points:
#   2.7 us against 4.2; add-add-tanh at 1024 points: 8 us against 23, NumPy's float64 tanh
#   taking ~20 ns a point here, numba_math's ~5.5). A kernel compiles once per machine (the
#   disk cache), which a program replayed in a loop pays back.
REPLAY_NUMBA_MIN = 32
# REPLAY_NUMBA_MIN_OPS: below REPLAY_NUMBA_MIN points, a replayed kernel of this many instructions
#   goes to numba too: numpy_blocked's cost is per instruction whatever the size (~1 us each),
#   numba's ~2.5 us dispatch is not (an HMM's 6-point steps: a jit replay 3.7-4.4 -> 3.2 ms).
REPLAY_NUMBA_MIN_OPS = 3


@runtime_checkable
class Engine(Protocol):
    """What the registry needs of an engine (see the module docstring)."""

    name: str
    ops: Container[str]

    def available(self) -> bool: ...

    def supports(self, kernel: Kernel) -> bool: ...

    def cost(self, kernel: Kernel) -> float: ...

    def run(self, kernel: Kernel) -> list[np.ndarray]: ...


_ENGINES: dict[str, Engine] = {}
# signature -> {engine name: the first op of the kernel it has no entry for, or None}
_MISSING: dict[tuple, dict[str, str | None]] = {}
_CLAIMS: list[tuple[str, Callable[[Kernel], bool]]] = []  # (name, claims) of those with one


def register(engine: Engine, replace: bool = False) -> Engine:
    """Add ``engine`` under ``engine.name``; returns it (so a module can end with
    ``register(sys.modules[__name__])``). A name taken by another engine raises unless
    ``replace``.

    >>> register(get("numpy")) is get("numpy")   # the same engine again: nothing changes
    True
    """
    need = ("name", "ops", "available", "supports", "cost", "run")
    missing = [a for a in need if not hasattr(engine, a)]
    if missing:
        raise TypeError(
            f"an engine needs {', '.join(missing)} (see fusegrad.lazy.engines.registry)"
        )
    name = engine.name
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"engine name {name!r}: a non-empty string other than 'auto'")
    old = _ENGINES.get(name)
    if old is not None and old is not engine and not replace:
        raise ValueError(f"an engine named {name!r} is registered already; pass replace=True")
    _ENGINES[name] = engine
    _MISSING.clear()
    _CLAIMS[:] = [(n, e.claims) for n, e in _ENGINES.items() if hasattr(e, "claims")]
    return engine


def unregister(name: str) -> None:
    """Remove the engine called ``name`` (the reference engine stays)."""
    if name == REFERENCE:
        raise ValueError(f"the reference engine {REFERENCE!r} cannot be removed")
    _ENGINES.pop(name, None)
    _MISSING.clear()
    _CLAIMS[:] = [(n, e.claims) for n, e in _ENGINES.items() if hasattr(e, "claims")]


def claims() -> list[tuple[str, Callable[[Kernel], bool]]]:
    """``(name, claims)`` of the registered engines that have a ``claims`` (kept at
    registration, since ``choose`` asks them of every kernel)."""
    return _CLAIMS


def registered() -> dict[str, Engine]:
    """The registered engines by name, in registration order (the reference engine first)."""
    return _ENGINES


def missing_ops(kernel: Kernel) -> dict[str, str | None]:
    """For each registered engine, the first op of ``kernel`` it has no entry for, or None
    (cached per kernel signature).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> missing_ops(Kernel((), (), (), (), ()))["numpy"] is None
    True
    """
    sig = kernel.signature()
    m = _MISSING.get(sig)
    if m is None:
        m = {}
        for name, e in _ENGINES.items():
            ops = e.ops
            m[name] = next((i.op for i in kernel.program if i.op not in ops), None)
        _MISSING[sig] = m
    return m


_discovered = False


def _discover() -> None:
    """Register the engines of this package: ``numpy_blocked`` (the reference) first, then every
    module named ``*_engine`` in name order. Importing one costs little: an engine imports its
    library (numba, ...) only when ``available()`` is first asked."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    importlib.import_module(f"{__package__}.numpy_blocked")
    here = os.path.dirname(__file__)
    for info in sorted(pkgutil.iter_modules([here]), key=lambda m: m.name):
        if info.name.endswith("_engine"):
            importlib.import_module(f"{__package__}.{info.name}")


def _from_entry_points(name: str) -> None:
    """Import the engine ``name`` of another package, declared in its metadata as
    ``[project.entry-points."fusegrad.engines"] name = "module"`` (importing registers it)."""
    try:
        from importlib.metadata import entry_points

        found = entry_points(group="fusegrad.engines", name=name)
    except Exception:  # pragma: no cover - broken metadata must not break the lookup's message
        return
    for ep in found:
        obj = ep.load()
        if name not in _ENGINES and hasattr(obj, "run"):
            register(obj)


def names() -> tuple[str, ...]:
    """``"auto"`` and the registered engines' names, in registration order.

    >>> names()[:2], "numba" in names()
    (('auto', 'numpy'), True)
    """
    _discover()
    return ("auto", *_ENGINES)


def get(name: str) -> Engine:
    """The engine registered as ``name``; an unknown name raises ``ValueError`` listing them.

    >>> get("numpy").name
    'numpy'
    """
    e = _ENGINES.get(name)
    if e is None:
        _discover()
        _from_entry_points(name)
        e = _ENGINES.get(name)
        if e is None:
            raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(names())}")
    return e

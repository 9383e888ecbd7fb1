"""Engine selection: which registered engine runs each kernel.

The engines (``numpy``: the blocked reference, ``numba``: compiled loop nests, and any other
registered one; see ``registry`` for the interface) are chosen per kernel:

- ``auto`` (the default) runs a kernel on the engine of lowest ``cost(kernel)`` among those
  that are available and support it (ties go to the one registered first, the reference);
- a named engine runs every kernel it supports; one it declines (a dtype it never handles, say
  complex on numba) runs on the reference engine, and a kernel with an op the named engine has
  no entry for raises ``UnsupportedKernel`` naming the op.

``use_engine(name)`` sets the choice inside a block, for the calling thread only (as JAX's
configuration contexts are); elsewhere ``FUSEGRAD_ENGINE`` (read at each kernel) does, else
``auto``. An unknown name is an error at its first use, listing the engines.

Example::

    >>> with use_engine("numpy"):
    ...     current()
    'numpy'
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..kernel import Kernel
from .registry import (
    REFERENCE,
    Engine,
    _discover,
    claims,
    get,
    missing_ops,
    names,
    register,
    registered,
)

__all__ = [
    "Engine",
    "UnsupportedKernel",
    "choose",
    "choose_hot",
    "current",
    "get",
    "names",
    "register",
    "run",
    "runner",
    "use_engine",
]


class UnsupportedKernel(NotImplementedError):
    """A kernel the engine in force cannot run (an op it has no entry for)."""


_local = threading.local()


def _stack() -> list[str]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def current() -> str:
    """The engine in force in this thread: the innermost ``use_engine``, else
    ``FUSEGRAD_ENGINE``, else ``"auto"``.

    >>> current() in names()
    True
    """
    s = _stack()
    if s:
        return s[-1]
    stored = _ENVIRON.get(_ENV_KEY)  # os.environ's own dict: ~0.1 us, not os.environ.get's ~2
    if not stored:
        return "auto"
    last = _last_env
    if stored is last[0]:
        return last[1]
    raw = os.environ["FUSEGRAD_ENGINE"]
    name = raw.strip().lower()
    try:
        if name != "auto":
            get(name)
    except ValueError:
        raise ValueError(
            f"FUSEGRAD_ENGINE={raw!r} is not an engine: it accepts {', '.join(names())} "
            "(unset, it means auto)"
        ) from None
    _last_env[:] = [stored, name]
    return name


# os.environ keeps its values in a dict (CPython), read directly where it has one
_ENV_DATA = getattr(os.environ, "_data", None)
if isinstance(_ENV_DATA, dict) and hasattr(os.environ, "encodekey"):
    _ENVIRON: Any = _ENV_DATA
    _ENV_KEY: Any = os.environ.encodekey("FUSEGRAD_ENGINE")
else:
    _ENVIRON, _ENV_KEY = os.environ, "FUSEGRAD_ENGINE"
_last_env: list = [None, "auto"]  # [the stored value last read, its engine]


@contextlib.contextmanager
def use_engine(name: str) -> Iterator[None]:
    """Run every kernel this thread starts inside the block on engine ``name`` (``"auto"``,
    ``"numpy"``, ``"numba"`` or another registered one). Other threads keep their own choice.

    >>> with use_engine("auto"):
    ...     current()
    'auto'
    """
    if name != "auto":
        e = get(name)  # an unknown name raises here, listing the engines
        hint = getattr(e, "install_hint", None)
        if hint and not e.available():  # an engine that would only fall back, said so
            raise ImportError(f"use_engine({name!r}) needs what is not installed: {hint}")
    s = _stack()
    s.append(name)
    try:
        yield
    finally:
        s.pop()


_available: dict[int, bool] = {}  # id(engine) -> available(), asked once per process by auto


def _cheapest(kernel: Kernel, hot: bool = False, replayed: bool = False) -> Engine:
    # Cost first, then supports only of an engine that would win: numba's supports() is the
    # dearer call, and most small kernels never need it.
    best: Engine | None = None
    best_cost = math.inf
    missing = missing_ops(kernel)
    for name, e in registered().items():
        if missing.get(name, "?") is not None:
            continue
        ok = _available.get(id(e))
        if ok is None:
            ok = _available[id(e)] = bool(e.available())
        if not ok:
            continue
        hot_cost = getattr(e, "replay_cost", None) if replayed else None
        if hot_cost is None and (hot or replayed):
            hot_cost = getattr(e, "hot_cost", None)
        c = e.cost(kernel) if hot_cost is None else hot_cost(kernel)
        if (best is None or c < best_cost) and e.supports(kernel):
            best, best_cost = e, c
    if best is None:
        op = missing.get(REFERENCE)
        raise UnsupportedKernel(f"no engine runs this kernel (op {op!r}): {', '.join(names())}")
    return best


def choose(kernel: Kernel) -> str:
    """The name of the engine that will run ``kernel``.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> with use_engine("numpy"):
    ...     choose(Kernel((3,), (), (), (), ()))
    'numpy'
    """
    for claimer, claimed in claims():
        if claimed(kernel):
            return claimer
    name = current()
    if name == "auto":
        return _cheapest(kernel).name
    if name == REFERENCE:  # runs every kernel
        return name
    e = get(name)
    missing = missing_ops(kernel)
    op = missing.get(name)
    if op is not None:
        alt = [n for n, m in missing.items() if m is None]
        raise UnsupportedKernel(
            f"engine {name!r} has no entry for op {op!r}, which this kernel uses; "
            + (f"use_engine('auto') runs it on {alt[0]!r}" if alt else "no engine has one")
            + " (or add the op to the engine's op table)"
        )
    if not e.available() or not e.supports(kernel):
        return REFERENCE
    return name


def choose_hot(kernel: Kernel, recorded: str, replayed: bool = False) -> str:
    """The engine for a kernel that will run many times (a step of ``jit``'s replays) and ran on
    ``recorded`` when it was recorded: under ``auto``, the cheapest engine for a hot kernel (an
    engine's ``hot_cost``, if it has one, instead of its ``cost``); a named engine stays.
    ``replayed``: its program has been replayed ``registry.HOT_CALLS`` times already (an
    engine's ``replay_cost``, if it has one: what its replays would cost once compiled).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> with use_engine("numpy"):
    ...     choose_hot(Kernel((3,), (), (), (), ()), "numpy")
    'numpy'
    """
    if current() != "auto":
        return recorded
    return _cheapest(kernel, hot=True, replayed=replayed).name


def runner(name: str) -> Callable[[Kernel], list[np.ndarray]]:
    """The ``run(kernel) -> outputs`` function of engine ``name``.

    >>> runner("numpy").__module__
    'fusegrad.lazy.engines.numpy_blocked'
    """
    return get(name).run


def run(kernel: Kernel) -> tuple[list[np.ndarray], str]:
    """Run ``kernel`` on the chosen engine; returns the outputs and the engine's name."""
    name = choose(kernel)
    return get(name).run(kernel), name


_discover()  # the engines of this package register themselves

"""How much compiling a replayed program may do: never more than the time it has run.

After ``replay.HOT_REPLAYS`` replays a program's kernels move to the engine that runs a hot
kernel best (``engines.choose_hot(..., replayed=True)``: numba for most). On a machine whose
numba disk cache lacks them that is a compile of 0.2-20 s a kernel (numba's cost grows with a
kernel's arguments, ``numba_engine.COMPILE_S``), which an unrolled RNN's replays (2.4 ms each)
took 34 s to do at their 9th call, to save 0.8 ms a call.

So the compiles are rented, not bought at once: a program spends on compiling at most the time
its recording and replays have taken so far (``affordable``), cheapest kernels first, and looks
again each time its replay count doubles. A kernel already compiled, or in numba's disk cache,
costs (almost) nothing and always moves. Over any run the compile time is at most the run time
before it, plus one estimate's error; a long training loop gets every kernel compiled, a short
one never waits.

``FUSEGRAD_JIT_COMPILE=eager`` (read at import) compiles every kernel at the
``HOT_REPLAYS``-th replay instead, whatever it costs (benchmarks measuring the compiled replays).

Example::

    >>> costs = {"a": 0.0, "b": 0.4, "c": 3.0}
    >>> sorted(affordable(costs, budget=1.0)), sorted(affordable(costs, budget=None))
    (['a', 'b'], ['a', 'b', 'c'])
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable, Mapping
from typing import TypeVar

MODES = ("budget", "eager")
K = TypeVar("K", bound=Hashable)


def _mode() -> str:
    mode = os.environ.get("FUSEGRAD_JIT_COMPILE", "budget").strip().lower() or "budget"
    if mode not in MODES:
        warnings.warn(
            f"fusegrad: FUSEGRAD_JIT_COMPILE={mode!r} is not one of {MODES}; using 'budget'",
            stacklevel=2,
        )
        return "budget"
    return mode


MODE = _mode()


def affordable(costs: Mapping[K, float], budget: float | None) -> set[K]:
    """The kernels (keys of ``costs``, estimated compile seconds) to compile now within
    ``budget`` seconds (``None``: all of them), cheapest first.

    >>> sorted(affordable({"x": 0.5, "y": 0.5, "z": 0.1}, budget=0.7))
    ['x', 'z']
    """
    if budget is None:
        return set(costs)
    chosen: set[K] = set()
    spend = 0.0
    for key, cost in sorted(costs.items(), key=lambda kv: kv[1]):
        if cost and spend + cost > budget:
            break
        spend += cost
        chosen.add(key)
    return chosen

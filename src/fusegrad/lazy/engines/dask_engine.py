"""The ``dask`` engine: a kernel's domain cut into tiles, each tile run by a local engine on a
Dask worker, partial reductions combined by a tree of tasks.

A kernel of a pairwise gradient at N = 10^5 is 10^10 points: one machine's cores take minutes.
This engine cuts domain axes 0 and 1 into blocks (tiles of about ``FUSEGRAD_DASK_TILE`` points,
default 2^25), runs each tile as an ordinary kernel (numba where it compiles, else
numpy_blocked) inside a Dask task, and combines what the tiles give:

- a reduction over a cut axis: the tiles' partials are combined by a tree of tasks of fan-in
  ``FAN_IN`` (``sum``/``prod``/``max``/``min`` as the output asks), so no task holds more than
  a few partials;
- an axis that is not reduced: each tile's block is placed in the result;
- a mirrored sum (``out[i] = sum_j v[i, j] + sum_j w[j, i]``): tile ``(I, J)`` gives the row
  sums of ``v`` for block ``I`` and the column sums of ``w`` for block ``J`` in one pass, and
  both go to the tree of their block.

Each tile stays one pass: a multi-output kernel is a multi-output kernel per tile. Memory per
task is O(inputs + tile outputs). The task graph goes to the active ``dask.distributed`` client
when there is one (``dask.compute`` picks it up), else to Dask's local threaded scheduler. Tasks
are pure functions of their inputs, so when a worker dies Dask recomputes the lost tiles and the
result is the same. Inputs that are Dask arrays (``dask_leaves``) are read by each tile from
their chunks, where they live; the client never gathers them.

Tiles run on numba (``FUSEGRAD_DASK_TILE_ENGINE``, see ``tile_engine``). A kernel compiles once
per machine: the numba disk cache is shared by the workers of one machine, so a worker loads
what any process there compiled (workers that meet a new kernel at the same moment each compile
it). A worker's first tile costs it loading numba and LLVM (1-2 s, ~115 MB of RSS: 69 MB of it
libllvmlite.so's pages, shared by the processes of a machine, and ~45 MB of numba's type and
lowering registries and LLVM's heap), then per kernel a load from the disk cache (a fraction of
a second) or a compile (a few seconds, and ~30 MB of RSS the worker keeps).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> x = np.linspace(0, 1, 300)
    >>> with fg.use_engine("dask"):  # doctest: +SKIP
    ...     g = fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])))(x)
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
import os
import sys
import uuid
from typing import Any

import numpy as np

from .. import dask_leaves
from ..kernel import Kernel, Output
from . import numpy_blocked
from .registry import register

_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}

# The engine interface (``registry``): every op a local engine has; chosen by name only.
name = "dask"
ops = numpy_blocked.ops
install_hint = "Dask, with `pip install 'fusegrad[dask]'`"


def cost(kernel: Kernel) -> float:
    """Infinite, so that ``auto`` never picks this engine (``use_engine("dask")`` does), except
    for a kernel that reads a Dask input (``dask_leaves``): 0, as no other engine can run it."""
    return 0.0 if dask_leaves.reads_dask(kernel.inputs) else math.inf


def claims(kernel: Kernel) -> bool:
    """Whether ``kernel`` reads a Dask input (``dask_leaves``): no other engine can run it, so
    ``choose`` gives it to this engine even inside ``use_engine("numba")``."""
    return dask_leaves.reads_dask(kernel.inputs)


def available() -> bool:
    """Whether Dask is installed (``pip install 'fusegrad[dask]'``); found without importing it,
    since ``auto`` asks every engine once."""
    return importlib.util.find_spec("dask") is not None


def tile_points() -> int:
    """Points per tile: ``FUSEGRAD_DASK_TILE`` (an integer), else 2^25."""
    env = os.environ.get("FUSEGRAD_DASK_TILE")
    if env is None:
        return 1 << 25
    try:
        n = int(float(env))
    except ValueError:
        n = 0
    if n <= 0 or n != float(env):
        raise ValueError(
            f"FUSEGRAD_DASK_TILE={env!r} is not a positive integer (points per tile, e.g. 33554432)"
        )
    return n


def supports(kernel: Kernel) -> bool:
    """Every kernel a local engine runs: tiles are ordinary kernels."""
    return available()


def blocks(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into ``parts`` near-equal blocks.

    >>> blocks(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    parts = max(1, min(parts, n))
    edges = [n * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:])] if n else [(0, 0)]


# The smallest tile worth a task (a few ms of work) when tiles are cut finer for balance
MIN_TILE = 1 << 20
# Tiles per worker thread at least, so that the last round of tasks does not leave workers idle
TILES_PER_THREAD = 8


def worker_threads() -> int:
    """The threads tiles run on: the active ``dask.distributed`` client's workers', else this
    machine's cores (Dask's threaded scheduler)."""
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            client = distributed.default_client()
        except ValueError:
            pass
        else:
            # nthreads() is a light call (scheduler_info() costs ~5 ms: it sends every worker's)
            return max(1, sum(int(n) for n in client.nthreads().values()))
    return os.cpu_count() or 1


def balanced_points(kernel: Kernel) -> int:
    """Points per tile for ``kernel``: ``tile_points()``, or fewer when that gives a kernel
    larger than one tile too few tiles to keep every worker thread busy to the end (at least
    ``TILES_PER_THREAD`` per thread, none under ``MIN_TILE`` points)."""
    points = tile_points()
    total = math.prod(kernel.domain)
    if total <= points:
        return points
    return min(points, max(MIN_TILE, -(-total // (TILES_PER_THREAD * worker_threads()))))


def grid(kernel: Kernel, points: int | None = None) -> list[list[tuple[int, int]]]:
    """The blocks of each domain axis: axes 0 and 1 are cut (by one grid when a mirrored output
    needs them alike), the others kept whole. Tiles are blocks of whole rows while a row fits a
    tile and no output keeps axis 1, else about as wide as tall. ``points`` per tile default to
    ``balanced_points(kernel)``.

    >>> k = Kernel((1000, 1000), (), (), (), ())
    >>> [len(b) for b in grid(k, points=250_000)]  # a row fits a tile: blocks of rows
    [4, 1]
    >>> [len(b) for b in grid(k, points=200)]
    [71, 71]
    """
    points = balanced_points(kernel) if points is None else points
    domain = kernel.domain
    axes = [[(0, n)] for n in domain]
    if not domain or math.prod(domain) <= points:
        return axes
    mirrored = any(o.mirror is not None for o in kernel.outputs)
    if len(domain) == 1:
        axes[0] = blocks(domain[0], -(-domain[0] // points))
        return axes
    rest = math.prod(domain[2:])
    tiles = -(-math.prod(domain) // points)
    if mirrored:
        per_axis = math.isqrt(tiles - 1) + 1
        axes[0] = blocks(domain[0], per_axis)
        axes[1] = blocks(domain[1], per_axis)
    elif domain[1] * rest > points or (
        # an output that keeps axis 1 (column sums) gives a partial as wide as the tile: blocks
        # of whole rows would make it N wide (8 MB at N = 10^6), and the workers hold dozens
        any(1 not in o.axes for o in kernel.outputs) and domain[1] ** 2 * rest > points
    ):  # tiles about as wide as tall
        p0 = min(domain[0], max(1, math.ceil(math.sqrt(tiles * domain[0] / domain[1]))))
        axes[0] = blocks(domain[0], p0)
        axes[1] = blocks(domain[1], -(-tiles // p0))
    else:
        axes[0] = blocks(domain[0], tiles)
    return axes


def _slice(a: np.ndarray, domain: tuple[int, ...], bounds: tuple) -> np.ndarray:
    """The part of input ``a`` a tile reads (an axis of size 1 that broadcasts stays whole): a
    view, also of a 0-d input (``a[()]`` would be a NumPy scalar, a copy)."""
    index = (slice(0, 1) if s == 1 != n else slice(*b) for s, n, b in zip(a.shape, domain, bounds))
    return a[tuple(index) + (Ellipsis,)]


def _tile_outputs(outputs: tuple[Output, ...]) -> tuple[Output, ...]:
    """A tile's outputs: a mirrored sum becomes its row part and its column part."""
    out: list[Output] = []
    for o in outputs:
        if o.mirror is None:
            out.append(o)
        else:
            out.append(Output(o.value, "sum", (1,), o.dtype))
            out.append(Output(o.mirror, "sum", (0,), o.dtype))
    return tuple(out)


def run_tile(meta: tuple, bounds: tuple, recipes: tuple, *args: np.ndarray) -> list[np.ndarray]:
    """Run one tile of a kernel with a local engine (a Dask task: a pure function). Per input,
    ``recipes`` holds None (the input comes whole, as one argument), ``()`` (the tile's part
    comes as it is: an empty one), or how to assemble the
    tile's part of a Dask input from the chunks that follow (``dask_leaves.assemble``)."""
    full, constants, program, outputs = meta
    domain = tuple(b - a for a, b in bounds)
    views = []
    i = 0
    for recipe in recipes:
        if recipe is None:
            views.append(_slice(args[i], full, bounds))
            i += 1
        elif not recipe:  # the tile's part already (empty)
            views.append(args[i])
            i += 1
        else:
            n = math.prod(recipe[0])
            views.append(dask_leaves.assemble(recipe, *args[i : i + n]))
            i += n
    return local_run(Kernel(domain, tuple(views), constants, program, outputs))


def tile_engine() -> str:
    """The engine tiles run on: ``FUSEGRAD_DASK_TILE_ENGINE`` (``auto``, the default: numba when
    it supports and suits the kernel, else numpy; ``numba``: numba whenever it supports the
    kernel; ``numpy``: numpy_blocked only, so that workers never load numba and LLVM, ~125 MB)."""
    name = os.environ.get("FUSEGRAD_DASK_TILE_ENGINE", "auto").strip().lower() or "auto"
    if name not in ("auto", "numba", "numpy"):
        raise ValueError(
            f"FUSEGRAD_DASK_TILE_ENGINE={name!r} is not one of auto, numba, numpy (the engine "
            "each tile of the dask engine runs on)"
        )
    return name


def local_run(kernel: Kernel) -> list[np.ndarray]:
    """A kernel on this process's engines, as ``tile_engine()`` says."""
    choice = tile_engine()
    if choice != "numpy":
        from . import numba_engine

        if (
            numba_engine.available()
            and numba_engine.supports(kernel)
            and (
                choice == "numba"
                or numba_engine.prefers(kernel)
                or numba_engine.is_compiled(kernel)
            )
        ):
            return numba_engine.run(kernel)
    return numpy_blocked.run(kernel)


# Partials one task combines at most: a tree of this fan-in has few levels (each level is a round
# trip through the scheduler: pairs made W3 at N = 6000 a 6-level graph of 97 tasks, ~3x the
# overhead of this one's 2 levels of 22) while a task holds a few partials of a block only
FAN_IN = 8
# A tile's outputs go whole to the tasks that combine them when they hold at most this many
# elements together; larger ones (an output not reduced over a cut axis is tile-sized) are split
# per output first, so that a combining task never holds a block it does not need
WHOLE_RESULT_MAX = 1 << 17
# Elements of tiles' lists the workers may hold to the end of a call beyond what the client
# takes from them (8 MB): the cost of taking a slot of one part from its tile's list on the client
RETAINED_MAX = 1 << 20


def _take(part: Any, pick: tuple[int, bool] | None) -> Any:
    """``part`` itself (``pick`` None), else output ``j`` of a tile's list, its axes 0 and 1
    swapped when ``swap`` (a mirrored sum's column part, ``pick = (j, swap)``)."""
    if pick is None:
        return part
    j, swap = pick
    return np.swapaxes(part[j], 0, 1) if swap else part[j]


def _combine(op: Any, picks: tuple, *parts: Any) -> Any:
    """``op`` over the parts, each taken as ``_take`` says (a Dask task: never in place, since
    Dask may hand one task's result to several)."""
    return functools.reduce(op, [_take(p, pick) for p, pick in zip(parts, picks)])


class _Graph:
    """A Dask task graph built as one layer of plain tasks (``{key: (function, *args)}``, an
    argument that is a key standing for that task's result), under keys unique to one call.
    Building it costs ~10 us a task; ``dask.delayed`` calls cost ~0.3-0.5 ms each (and a layer
    each), 10 s of the client's time for the 3 * 10^4 tiles of a kernel at N = 10^6."""

    def __init__(self) -> None:
        self.name = f"fusegrad-{uuid.uuid4().hex}"
        self.tasks: dict[Any, Any] = {}
        self.count = 0

    def add(self, fn: Any, *args: Any) -> tuple:
        """A task ``fn(*args)``; its key. ``fn`` carries the literal arguments (a partial): only
        keys are passed as ``args``, so that Dask reads nothing else as a task or a key."""
        self.count += 1
        key = (self.name, self.count)
        self.tasks[key] = (fn, *args)
        return key

    def data(self, value: Any) -> tuple:
        """A key holding ``value`` (sent once to each worker that needs it)."""
        self.count += 1
        key = (self.name, self.count)
        self.tasks[key] = value
        return key

    def tree(self, op: Any, parts: list[tuple[tuple, Any]], split: bool) -> tuple:
        """``(key, pick)`` parts (at least two) combined by ``op`` in a tree of fan-in
        ``FAN_IN``; with ``split``, each tile's output is taken out by a task of its own first.
        The tree's key."""
        if split:
            parts = [(self.add(functools.partial(_take, pick=pick), k), None) for k, pick in parts]
        while True:
            groups = [parts[i : i + FAN_IN] for i in range(0, len(parts), FAN_IN)]
            parts = [
                (
                    self.add(
                        functools.partial(_combine, op, tuple(p for _, p in g)),
                        *(k for k, _ in g),
                    ),
                    None,
                )
                for g in groups
            ]
            if len(parts) == 1:
                return parts[0][0]

    def compute(self, dask: Any, keys: list[list[tuple]], sources: list) -> list[list[Any]]:
        """The values of ``keys`` (lists of keys), on the active ``dask.distributed`` client,
        else Dask's threaded scheduler; ``sources`` are the Dask arrays whose chunks tasks
        read."""
        from dask.delayed import Delayed
        from dask.highlevelgraph import HighLevelGraph

        graph = HighLevelGraph.from_collections(self.name, self.tasks, dependencies=sources)
        return list(
            dask.compute(*[[Delayed(k, graph, layer=self.name) for k in ks] for ks in keys])
        )


def run(kernel: Kernel) -> list[np.ndarray]:
    """Run ``kernel`` as a Dask graph of tiles; one array per output, keepdims shapes, as every
    engine. A kernel of a single tile runs locally, without Dask, unless it reads a Dask
    input: a tile's task reads the chunks of a Dask input it needs (``dask_leaves.chunk_plan``),
    wherever they are, and every other input whole (sent once per worker)."""
    axes = grid(kernel)
    remote = tuple(dask_leaves.source(a) is not None for a in kernel.inputs)
    if all(len(b) == 1 for b in axes) and not any(remote):
        return local_run(kernel)
    import dask

    g = _Graph()
    tile_outs = _tile_outputs(kernel.outputs)
    meta = (kernel.domain, kernel.constants, kernel.program, tile_outs)
    whole = [None if r else g.data(a) for a, r in zip(kernel.inputs, remote)]
    sources: dict[int, Any] = {}  # id(Dask input) -> (the array, its chunks' keys)
    for a, r in zip(kernel.inputs, remote):
        src = dask_leaves.source(a) if r else None
        if src is not None and id(src) not in sources:
            keys = src.__dask_keys__()  # nested lists of keys, one level per axis
            sources[id(src)] = (src, keys[0] if src.ndim == 0 else keys)  # 0-d: a list of one
    tiles = {}
    for index in itertools.product(*(range(len(b)) for b in axes)):
        bounds = tuple(axes[d][i] for d, i in enumerate(index))
        recipes: list[tuple | None] = []
        args: list[Any] = []
        for a, r, w in zip(kernel.inputs, remote, whole):
            view = _slice(a, kernel.domain, bounds) if r else None
            if view is None or view.size == 0:
                recipes.append(None if view is None else ())
                args.append(w if view is None else g.data(np.empty(view.shape, view.dtype)))
                continue
            recipe, blocks = dask_leaves.chunk_plan(view)
            src_keys = sources[id(dask_leaves.source(a))][1]
            recipes.append(recipe)
            args.extend(functools.reduce(lambda keys, i: keys[i], b, src_keys) for b in blocks)
        # the kernel's description and the tile's literals bound in the function: Dask walks
        # a task's arguments looking for keys
        tiles[index] = g.add(functools.partial(run_tile, meta, bounds, tuple(recipes)), *args)
    # per output: the (tile, pick) parts of each slot of the result
    outs_slots: list[dict[tuple, list]] = []
    j = 0
    for o in kernel.outputs:
        slots: dict[tuple, list] = {}
        for index, t in tiles.items():
            key = tuple(
                0 if d in o.axes or (o.mirror is not None and d == 1) else i
                for d, i in enumerate(index)
            )
            slots.setdefault(key, []).append((t, (j, False)))
            if o.mirror is not None:
                slots.setdefault((index[1],) + key[1:], []).append((t, (j + 1, True)))
        outs_slots.append(slots)
        j += 2 if o.mirror is not None else 1
    # A slot of several parts is combined by a tree of tasks. A slot of one part is taken from
    # its tile's list here, unless the rest of the lists fetched so would keep more than
    # RETAINED_MAX elements on the workers to the end (their outputs combined elsewhere): then
    # a task takes it out, and the list is freed once combined
    sizes = [math.prod(tile_shape(o, axes)) for o in tile_outs]
    taken: dict[tuple, int] = {}  # key of a tile whose list is fetched whole -> elements used
    for slots in outs_slots:
        for v in slots.values():
            if len(v) == 1:
                t, (jj, _) = v[0]
                taken[t] = taken.get(t, 0) + sizes[jj]
    retained = sum(sum(sizes) - used for used in taken.values())
    split = sum(sizes) > WHOLE_RESULT_MAX
    plans: list[dict[tuple, tuple[tuple, Any]]] = []
    for o, slots in zip(kernel.outputs, outs_slots):
        op = _COMBINE[o.reduce] if o.reduce else None
        plan = {}
        for k, v in slots.items():
            if len(v) > 1:
                plan[k] = (g.tree(op, v, split), None)
            elif retained > RETAINED_MAX:
                t, pick = v[0]
                plan[k] = (g.add(functools.partial(_take, pick=pick), t), None)
            else:
                plan[k] = v[0]
        plans.append(plan)
    keys = [list(p) for p in plans]
    computed = g.compute(
        dask,
        [[p[k][0] for k in ks] for p, ks in zip(plans, keys)],
        [s for s, _ in sources.values()],
    )
    results = []
    for o, plan, ks, values in zip(kernel.outputs, plans, keys, computed):
        out = np.empty(kernel.output_shape(o), o.dtype)
        for k, v in zip(ks, values):
            where = tuple(
                slice(0, 1) if n == 1 else slice(*axes[d][k[d]]) for d, n in enumerate(out.shape)
            )
            out[where] = _take(v, plan[k][1])
        results.append(out)
    return results


def tile_shape(o: Output, axes: list[list[tuple[int, int]]]) -> tuple[int, ...]:
    """The shape of output ``o`` of the largest tile of a grid (keepdims)."""
    return tuple(
        1 if d in o.axes else max(b - a for a, b in blocks) for d, blocks in enumerate(axes)
    )


__all__ = [
    "available",
    "balanced_points",
    "blocks",
    "cost",
    "grid",
    "local_run",
    "name",
    "ops",
    "run",
    "run_tile",
    "supports",
    "tile_engine",
    "worker_threads",
]

register(sys.modules[__name__])

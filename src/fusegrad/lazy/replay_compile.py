"""A recorded program's steps compiled into the closures a ``jit`` replay runs, and the buffers
of its own a replay writes into.

Two lists of closures: ``free`` for a replay without the program's buffers (another thread, or
a step calling the program again, holds them: every result is a new array), and ``pooled`` for
one with them (``pool``: an array per reused slot, some of them slices of one buffer where
``replay_batch`` computes several products as one). ``Compiled.pool()`` allocates the buffers.

Example::

    >>> c = Compiled([], 0, [], set(), lambda step, replayed: None, lambda r, n: None)
    >>> c.free, c.pooled, c.pool()
    ([], [], [])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import replay_batch, replay_blas, replay_ops, replay_rows
from .replay_accumulate import count


class Compiled:
    """The closures of one program (``free``, ``pooled``) and the layout of its buffers.

    ``runner(step, replayed)``: the function running a kernel step (``replay._kernel_runner``),
    ``call_op(step, layouts, reused)``: the closure of a step that runs its function again;
    ``evaluate``: a number recipe's value (``replay.evaluate``)."""

    def __init__(
        self,
        steps: Sequence[tuple],
        n_inputs: int,
        layouts: Sequence[tuple | None],
        reused: set[int],
        runner: Callable[[tuple, bool], Any],
        evaluate: Callable,
        recipes: Sequence[tuple] = (),
        call_op: Callable | None = None,
        replayed: bool = False,
    ) -> None:
        self.layouts = layouts
        self.reused = reused
        self.replayed = replayed  # compiled for a program replayed HOT_REPLAYS times
        products = replay_batch.product_steps(steps, recipes)
        self.rows = replay_rows.plan(steps, n_inputs, layouts, recipes, products)
        region = set(self.rows.row) if self.rows is not None else set()
        runners = [
            runner(s, replayed)
            if s[0] not in ("call", "iadd", "alias") and s[1] is not None and i not in region
            else None
            for i, s in enumerate(steps)
        ]  # fmt: skip

        def writes(i: int) -> bool:
            s = steps[i]
            if s[0] == "call":
                return bool(s[4][2])  # direct steps (and products) write into given buffers
            return getattr(runners[i], "writes_into", False)

        if self.rows is not None:
            # the row steps run block by block (one op); nothing of theirs is pooled or batched
            made = set(self.rows.made)
            self.reused = reused = {j for j in reused if j not in made}
            self.batches = replay_batch.Batches()
        else:
            self.batches = replay_batch.plan(steps, n_inputs, layouts, reused, products, writes)
        n_slots = len(layouts)
        self.n_slots = n_slots
        self.free: list[replay_ops.Op] = []
        self.pooled: list[replay_ops.Op] = []
        b = self.batches
        for i, s in enumerate(steps):
            kind = s[0]
            if i in region:
                continue
            if kind == "call" and i in products:
                op = _product_op(s, layouts, evaluate, set(), set())
                drop, ready = b.drop.get(i, set()), b.ready.get(i, set())
                pooled = _product_op(s, layouts, evaluate, drop, ready)
            elif kind == "call" and not s[4][2]:
                op = pooled = call_op(s, layouts, reused)  # type: ignore[misc]
            else:
                op = pooled = _op(s, layouts, reused, runners[i], evaluate)
            self.free.append(op)
            if i in b.skip:
                continue
            gemm = b.gemms.get(i)
            if gemm is not None:
                pooled = _with_gemm(gemm, s, pooled, layouts, n_slots, evaluate)
            self.pooled.append(pooled)

        if self.rows is not None:
            rows_op = replay_rows.RowsOp(
                self.rows, steps, layouts, runner,
                lambda s, lays, run: _op(s, lays, set(), run, evaluate), replayed,
            )  # fmt: skip
            self.free = [self._in_rows(self.free, rows_op, steps, n_inputs, layouts)]
            self.pooled = [self._in_rows(self.pooled, rows_op, steps, n_inputs, layouts)]

    def _in_rows(self, ops, rows_op, steps, n_inputs, layouts) -> replay_ops.Op:
        """One op running the program as its row plan says: the pre steps' ``ops``, the row
        steps block by block (``rows_op``), the post steps' ``ops``, each writing its slots in
        place."""
        found = self.rows
        assert found is not None
        by_step = dict(zip(sorted(found.pre + found.post), ops))  # ``ops``: in program order
        placed = {
            i: replay_rows.placed(op, steps[i][3], count(steps[i])) for i, op in by_step.items()
        }
        order = [*(placed[i] for i in found.pre), rows_op, *(placed[i] for i in found.post)]
        pad = [None] * (len(layouts) - n_inputs)

        def run(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
            slots.extend(pad)
            for op in order:
                op(slots, numbers, pool)

        return run

    def pool(self) -> list:
        """The program's buffers: one array per reused slot (stacked slots: slices of their
        stack's buffer), then the stacks' buffers."""
        pool: list[Any] = [None] * (self.n_slots + len(self.batches.stacks))
        for sid, (shape, dtype, slots) in enumerate(self.batches.stacks):
            buf = np.empty((len(slots), *shape), dtype)
            pool[self.n_slots + sid] = buf
            for j, s in enumerate(slots):
                pool[s] = buf[j]
        for i in self.reused:
            lay = self.layouts[i]
            if pool[i] is None and lay is not None:
                pool[i] = np.empty(lay[0], lay[2])
        return pool


def _op(step: tuple, layouts, reused: set[int], run: Any, evaluate: Callable) -> replay_ops.Op:
    """The closure of a kernel, fold, ``iadd``, ``alias`` or direct step."""
    kind, template, sources, first, dynamic = step
    if kind == "iadd":
        into, slot = sources
        return replay_ops.iadd_op(into, slot, layouts[into][0] == layouts[slot][0])
    if kind == "alias":
        into, n, k, shape = sources
        return replay_ops.alias_op(into, n, k, shape, layouts[into][0] == shape)
    if kind == "call":  # direct
        args = sources[0]
        mine = [first + j for j in range(len(dynamic[1]))]
        return replay_ops.direct_op(
            template,
            replay_ops.operands(args[2], layouts, evaluate),
            mine if any(i in reused for i in mine) else None,
        )
    if template is None:
        return replay_ops.fold_op(sources)
    encoded = [s if s[0] == "const" else ("view", *s) for s in sources]
    indexes = getattr(run, "indexes", None)
    if indexes is not None:  # the engine's indexing of its inputs, done by the getters
        pad, pooled = getattr(run, "pads", None), getattr(run, "pads_pooled", None)
        get = replay_ops.indexed_operands(encoded, indexes, layouts, evaluate, pad, pooled, reused)
        run = run.bare
    else:
        get = replay_ops.operands(encoded, layouts, evaluate)
    mine = [first + j for j in range(len(template.outputs))]
    writes = getattr(run, "writes_into", False) and any(i in reused for i in mine)
    return replay_ops.kernel_op(
        run, get, template.constants, dynamic, evaluate, mine if writes else None
    )


def _product_op(
    step: tuple, layouts, evaluate: Callable, drop: set[int], ready: set[int]
) -> replay_ops.Op:
    """A step of matrix products run as ``np.matmul`` calls (``replay_blas``: large ones split
    across the worker pool): each array result its product
    (into the program's buffer when there is one), or none (``drop``: only a batched sum
    read it), or the program's buffer already holding it (``ready``); its other results
    (pullbacks, which no step run again reads) None."""
    _kind, _fn, _sources, first, extra = step
    by_item = {p[0]: p for p in extra[3]}
    specs: list[tuple | None] = []
    for k, w in enumerate(extra[1]):
        if w is None or k in drop:
            specs.append(None)
        elif k in ready:
            specs.append(("ready", first + k))
        else:
            _, a, b, ta, tb = by_item[k]
            specs.append(
                (
                    "mm",
                    replay_ops.getter(a, layouts, evaluate),
                    replay_ops.getter(b, layouts, evaluate),
                    ta,
                    tb,
                    first + k,
                    _product_runner(a, b, ta, tb, layouts),
                )
            )
    if all(spec is None for spec in specs):  # every product made elsewhere (a batched sum)
        nones = [None] * len(specs)
        return lambda slots, numbers, pool: slots.extend(nones)

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        out: list = []
        for spec in specs:
            if spec is None:
                out.append(None)
            elif spec[0] == "ready":
                out.append(pool[spec[1]])  # type: ignore[index]
            else:
                _, ga, gb, ta, tb, slot, matmul = spec
                a = ga(slots, numbers)
                b = gb(slots, numbers)
                buf = None if pool is None else pool[slot]
                a = a.T if ta else a
                b = b.T if tb else b
                out.append(matmul(a, b) if buf is None else matmul(a, b, out=buf))
        slots.extend(out)

    return op


def _product_runner(a: tuple, b: tuple, ta: bool, tb: bool, layouts) -> Callable:
    """``np.matmul`` itself for a product whose operands' shapes (fixed by the signature) make
    it smaller than ``replay_blas`` splits; else ``replay_blas.matmul``."""
    shapes = []
    for e, t in ((a, ta), (b, tb)):
        lay = layouts[e[1]] if e[0] == "slot" else None
        shape = e[3] if e[0] == "view" else lay[0] if lay else getattr(e[1], "shape", None)
        if not isinstance(shape, tuple) or len(shape) != 2:
            return replay_blas.matmul
        shapes.append(shape[::-1] if t else shape)
    (m, k), (_, n) = shapes
    return np.matmul if m * k * n < replay_blas.SPLIT_MIN_MADDS else replay_blas.matmul


def _region(src: tuple, layouts, n_slots: int, evaluate: Callable) -> Callable:
    """A function of the slots and the pool giving a batched product's stacked operand: a run
    of consecutive blocks of one slot, or entries ``j0:j1`` of a stack's buffer, as a 2-d
    array."""
    if src[0] == "base":
        _, slot, offset, shape, dtype = src
        rows, cols = shape
        get = replay_ops.getter(
            ("view", slot, offset, shape, (cols * dtype.itemsize, dtype.itemsize), dtype),
            layouts,
            evaluate,
        )
        return lambda slots, numbers, pool: get(slots, numbers)
    _, sid, j0, j1 = src
    at = n_slots + sid

    def stacked(slots: list, numbers: Sequence[Any], pool: list) -> np.ndarray:
        buf = pool[at]
        return buf[j0:j1].reshape(-1, buf.shape[-1])

    return stacked


def _with_gemm(gemm: tuple, step: tuple, op: replay_ops.Op, layouts, n_slots, evaluate):
    """``op`` of ``step`` preceded (a batched forward) or replaced (a batched sum) by one large
    product (``replay_batch``)."""
    matmul = replay_blas.matmul
    if gemm[0] == "forward":
        _, base, b, region = gemm
        get_a = _region(base, layouts, n_slots, evaluate)
        get_b = replay_ops.getter(b, layouts, evaluate)
        get_out = _region(region, layouts, n_slots, evaluate)

        def forward(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
            out = get_out(slots, numbers, pool)
            matmul(get_a(slots, numbers, pool), get_b(slots, numbers), out=out)
            op(slots, numbers, pool)

        return forward
    _, sa, sc = gemm
    into, n, k, shape = step[2]
    total = step[3] + k
    get_a = _region(sa, layouts, n_slots, evaluate)
    get_c = _region(sc, layouts, n_slots, evaluate)

    def summed(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        buf = None if pool is None else pool[total]
        a, c = get_a(slots, numbers, pool), get_c(slots, numbers, pool)
        value = matmul(a.T, c) if buf is None else matmul(a.T, c, out=buf)
        out: list = [None] * n
        out[k] = value if value.shape == shape else value.reshape(shape)
        slots.extend(out)

    return summed

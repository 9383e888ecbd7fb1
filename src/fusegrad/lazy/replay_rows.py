"""A ``jit`` replay run block of rows by block of rows, every block's intermediates in cache,
the blocks shared out among the worker threads.

A training step of an MLP on a batch of 4096 rows (``X @ W1``, ``tanh``, the loss, the
backward kernels, ``Xᵀ @ dZ``) makes three 4096×256 intermediates (8 MiB each): run step after
step, each is written to memory by one step and read back by the next, and each product is
split across the cores on its own. But every step works row by row: row ``i`` of ``X @ W1``
needs only row ``i`` of ``X``, the elementwise kernels map rows to rows, and what leaves the
batch is a sum over rows (``Xᵀ @ dZ``, the bias gradients), whose partial sums over blocks of
rows add up to it. So the whole program runs on a block of rows at a time, its intermediates
(a few MiB) staying in cache. Each worker thread takes the next block not yet taken (a thread
that gets less of its core, beside another process, takes fewer), and the blocks' partial sums
are added up in block order (``OrderedSums``: the result does not depend on which thread ran
which block, or when). Every kernel and product in a block runs on one thread (``serial``,
OpenBLAS single-threaded): the threads meet once, at the end.

``plan`` decides whether a program qualifies and how. Each step is a ``pre`` step (it reads no
row-wise value: run once, before the blocks, wherever it was recorded), a row step (run block by
block), or a ``post`` step (it reads sums, row-wise values whole, or what post steps made: run
once, after). A row step is

* a kernel whose domain's axis 0 is the batch (``rows``), each operand read row-wise (a view
  of a row-wise value: an input, or a row step's result, along its rows) or broadcast along the
  rows (a value that is not row-wise), each output elementwise or reduced over other axes
  (row-wise) or summed over axis 0 (a sum);
* a product ``a @ B`` of a row-wise ``a`` and a ``B`` that is not (row-wise), or ``aᵀ @ c`` of
  row-wise ``a`` and ``c`` (a sum).

A row-wise value read by a post step or a result is written into an array of its full shape.
Anything else (a step that runs its function again on row-wise values, a sum read by a row
step, a reduction other than a sum over the rows, a mirrored kernel) and the program runs step
by step as before.
Sums are rounded in another order than the step-by-step replay's (blocks, then threads).

Example: ``y = x * 2`` then ``sum(y, axis=0)`` (two kernel steps) over 4096 rows of 1024:
``y`` is row-wise (8 KiB a row), the sum a sum over the rows, and the two run in blocks of 128
rows (``x``'s rows, 8 KiB each, would fit 64 to a block of ``INPUT_BLOCK_BYTES``; a block takes
at least a ``MAX_BLOCKS``-th of the batch)::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8, dom, st = np.dtype("f8"), (4096, 1024), (8192, 8)
    >>> def step(prog, out, src, first):
    ...     sig = Kernel(dom, (np.broadcast_to(1.0, dom),), (2.0,), prog, out).signature()
    ...     return ("numpy", Kernel(dom, (), (2.0,), prog, out, sig), (src,), first, ())
    >>> double = step((Instr("multiply", (0, 1), f8),), (Output(2, None, (), f8),),
    ...               (0, 0, dom, st, f8), 1)
    >>> total = step((), (Output(0, "sum", (0,), f8),), (1, 0, dom, st, f8), 2)
    >>> layouts = [(dom, st, f8), (dom, st, f8), ((1, 1024), st, f8)]
    >>> found = plan([double, total], 1, layouts, [("view", 2, 0, (1024,), (8,), f8)], set())
    >>> found.row, found.kinds, found.batch, found.rows_per_block
    ([0, 1], ['rows', 'rows', 'sum'], 4096, 128)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import replay_blas, replay_ops
from .engines import numpy_blocked
from .kernel import Kernel
from .replay_accumulate import count

# Row-wise intermediates of at least this many bytes in all (at full size), with the inputs'
# rows when the row steps' products do at least MIN_ROW_MADDS multiply-adds a row, make a
# program worth blocking: below, they fit the cores' caches anyway (the MLP at batch 256:
# 0.5 MiB of intermediates). A program whose products are matrix-vector products is
# memory-bound either way: logistic regression on 20,000×50 (W4) took 637-716 -> 939-950 µs in
# 10 blocks when its inputs counted (`python -m fusegrad.bench --only W4 --libs fusegrad-jit`,
# the two trees alternated twice).
MIN_BYTES = 8 << 20
# A block holds about BLOCK_BYTES of row-wise intermediates and at most INPUT_BLOCK_BYTES of
# rows of the inputs (kept in the core's L2 for the products that read them twice), but at
# least MIN_ROWS rows (a product of fewer runs far below BLAS's peak) and at least a
# MAX_BLOCKS-th of the batch: each step costs ~15 us of Python and dispatch per block.
# MLP at batch 4096 (100 -> 256: 6 KiB of row-wise values and 0.8 KiB of X a row), 2 threads,
# `python benchmarks/bench_row_blocks.py --blocks 0.25,0.5,1,2,4,8,32`: 21.1, 19.0, 15.6,
# 13.9, 13.9, 14.0, 15.3 ms (32: one block per thread); step by step 15.6 ms. Inputs' rows
# (`python benchmarks/bench_row_rules.py`: blocks sized by intermediates only, as before,
# against these settings, alternated in one process; medians of 8 rounds): a softmax
# classifier on 20,000×100 inputs (10 classes: narrow products, which OpenBLAS runs at ~12
# GFLOP/s a core when they do not fit in cache) 9.29 -> 4.39 ms, jax.jit 8.09 (input blocks of
# 384, 512, 768, 1024 KiB: 4.13, 4.10, 3.87, 5.23 ms); the MLP 1000 -> 64 at batch 4096 19.9 ->
# 17.6 ms (jax.jit 16.5); the MLP 100 -> 256 at batch 4096 and 16384 runs the same blocks as
# before (768 KiB holds 973 rows of its X). Logistic regression on 100,000×50 gained in blocks
# (3.37 -> 2.72 ms, 32 of them; in 78 blocks of 1,285 rows it took 1.4x its old time) but stays
# step by step, its products matrix-vector (MIN_ROW_MADDS).
BLOCK_BYTES = 1 << 22
INPUT_BLOCK_BYTES = 768 << 10
MIN_ROWS = 64
MAX_BLOCKS = 32
MIN_ROW_MADDS = 1024

# a slot's kind: row-wise, a sum over the rows, made by a post step, anything else
ROWS, SUM, POST, GLOBAL = "rows", "sum", "post", "global"


@dataclasses.dataclass
class RowPlan:
    """How a program runs in blocks of rows (see the module): the indices of its ``pre``,
    ``row`` and ``post`` steps (each list in program order), over ``batch`` rows in blocks of
    about ``rows_per_block``; ``kinds`` tells each slot's kind, ``sums`` lists the sums and
    ``kept`` the row-wise values read by a post step or a result (written at full size)."""

    pre: list[int]
    row: list[int]
    post: list[int]
    batch: int
    kinds: list[str]
    sums: set[int]
    kept: set[int]
    rows_per_block: int
    row_inputs: list[int]  # inputs read row-wise (sliced per block)
    made: list[int]  # the row steps' slots


def _row_view(e: tuple, batch: int, layouts: Sequence[tuple | None]) -> bool:
    """Whether the view ``(slot, offset, shape, strides, dtype)`` reads its slot along the
    slot's rows: axis 0 of the batch's length stepping as the slot's axis 0, from its first
    row."""
    slot, offset, shape, strides, _dtype = e
    lay = layouts[slot]
    return (
        lay is not None
        and len(shape) >= 1
        and shape[0] == batch
        and lay[0][:1] == (batch,)
        and strides[0] == lay[1][0]
        and 0 <= offset < max(lay[1][0], 1)
    )


def _broadcast(shape: tuple) -> bool:
    return len(shape) == 0 or shape[0] == 1


def _product_kinds(
    step: tuple, kinds: list[str], batch: int, layouts: Sequence[tuple | None]
) -> list[str] | None:
    """The kinds of a product step's results (None: not a row step or not row-wise at all,
    ``[]``: reads nothing row-wise)."""
    out: list[str] = []
    row_any = False
    for _k, a, b, ta, tb in step[4][3]:
        va, vb = _as_view(a), _as_view(b)
        if va is None or vb is None:
            return None
        ra, rb = kinds[va[0]] == ROWS, kinds[vb[0]] == ROWS
        if not ra and not rb:
            out.append(GLOBAL)
            continue
        row_any = True
        if kinds[va[0]] in (SUM, POST) or kinds[vb[0]] in (SUM, POST):
            return None
        if ra and not rb and not ta and _row_view(va, batch, layouts):
            out.append(ROWS)  # a @ B: row-wise
        elif ra and rb and ta and not tb:
            if not (_row_view(va, batch, layouts) and _row_view(vb, batch, layouts)):
                return None
            out.append(SUM)  # aᵀ @ c: a sum over the rows
        else:
            return None
    if not row_any:
        return []
    if GLOBAL in out:
        return None  # a product of whole values beside row-wise ones: not made per block
    kinds_out = [GLOBAL] * len(step[4][1])
    for (k, *_), kind in zip(step[4][3], out):
        kinds_out[k] = kind
    return kinds_out


def _row_madds(step: tuple) -> int:
    """Multiply-adds per row of a row step's products: ``k * n`` for ``a @ B`` (``B`` k×n),
    ``m * n`` for ``aᵀ @ c`` (``a``'s rows of m, ``c``'s of n)."""
    total = 0
    for _k, a, b, ta, _tb in step[4][3]:  # a row step's operands are views (_product_kinds)
        sa, sb = a[3], b[3]  # ("view", slot, offset, shape, strides, dtype)
        total += math.prod(sb) if not ta else math.prod(sa[1:]) * math.prod(sb[1:])
    return total


def _as_view(e: tuple) -> tuple | None:
    if e[0] == "view":
        return e[1:]
    return None


def _kernel_kinds(
    step: tuple, kinds: list[str], batch: int, layouts: Sequence[tuple | None]
) -> list[str] | None:
    """The kinds of a kernel step's results, as ``_product_kinds``."""
    _engine, template, sources, _first, _dynamic = step
    reads = [src for src in sources if src[0] != "const"]
    if not any(kinds[src[0]] == ROWS for src in reads):
        return []  # a pre or post step
    dom = template.domain
    if len(dom) == 0 or dom[0] != batch:
        return None
    for src in sources:
        if src[0] == "const":
            c = src[1]
            if isinstance(c, np.ndarray) and c.ndim and (c.ndim != len(dom) or c.shape[0] != 1):
                return None  # an array constant read along the rows
            continue
        kind = kinds[src[0]]
        if kind in (SUM, POST):
            return None  # a sum over all rows, or what is made of one, read row by row
        if kind == ROWS:
            if not _row_view(src, batch, layouts):
                return None
        elif not _broadcast(src[2]) and src[3][0] != 0:
            return None  # a value that is not row-wise, read along the rows
    out = []
    for o in template.outputs:
        if o.mirror is not None:
            return None
        if 0 not in o.axes:
            out.append(ROWS)
        elif o.reduce == "sum":
            out.append(SUM)
        else:
            return None
    return out


def plan(
    steps: Sequence[tuple],
    n_inputs: int,
    layouts: Sequence[tuple | None],
    recipes: Sequence[tuple],
    products: set[int],
    min_bytes: int | None = None,
) -> RowPlan | None:
    """How the program of ``steps`` runs in blocks of rows, or None when it does not qualify or
    would not gain (row-wise intermediates under ``min_bytes``). ``products``: the steps
    recorded with their products (``replay_batch.product_steps``)."""
    if any(s[0] in ("iadd", "alias") for s in steps):
        return None
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    batch = batch_of(steps)
    if batch is None:
        return None
    kinds = [GLOBAL] * len(layouts)
    row_inputs = []
    for i in range(n_inputs):
        lay = layouts[i]
        if lay is not None and lay[0][:1] == (batch,) and lay[1][0] > 0:
            kinds[i] = ROWS
            row_inputs.append(i)
    if not row_inputs:
        return None
    pre: list[int] = []
    row: list[int] = []
    post: list[int] = []
    for i, st in enumerate(steps):
        kind, template, _sources, first, _extra = st
        if kind == "call":
            step_kinds = _product_kinds(st, kinds, batch, layouts) if i in products else []
        elif template is None:
            step_kinds = []  # a fold: constant results
        else:
            step_kinds = _kernel_kinds(st, kinds, batch, layouts)
        if step_kinds is None:
            return None
        if step_kinds:
            row.append(i)
        else:
            late = any(kinds[j] != GLOBAL for j in _reads(st))
            (post if late else pre).append(i)
            step_kinds = [POST if late else GLOBAL] * count(st)
        for j, kd in enumerate(step_kinds):
            kinds[first + j] = kd
    if not row:
        return None
    made = [j for i in row for j in range(steps[i][3], steps[i][3] + count(steps[i]))]
    row_bytes = sum(_row_bytes(layouts[j]) for j in made if kinds[j] == ROWS)
    input_bytes = sum(_row_bytes(layouts[j]) for j in row_inputs)
    # the inputs count when the products do matrix work on them (not a matrix-vector product,
    # memory-bound either way, where blocks would only add their Python)
    madds = sum(_row_madds(steps[i]) for i in row if steps[i][0] == "call")
    counted = row_bytes + (input_bytes if madds >= MIN_ROW_MADDS else 0)
    if counted * batch < min_bytes or row_bytes == 0:
        return None
    read_late: set[int] = set()
    for i in post:
        read_late |= _reads(steps[i])
    for r in recipes:
        replay_ops.slots_read(r, read_late)
    kept = {j for j in read_late if kinds[j] == ROWS and j >= n_inputs}
    per_block = max(
        MIN_ROWS,
        -(-batch // MAX_BLOCKS),
        min(BLOCK_BYTES // max(1, row_bytes), INPUT_BLOCK_BYTES // max(1, input_bytes)),
    )
    if batch < 2 * per_block:
        return None
    sums = {j for j in made if kinds[j] == SUM}
    return RowPlan(pre, row, post, batch, kinds, sums, kept, per_block, row_inputs, made)


def batch_of(steps: Sequence[tuple]) -> int | None:
    """The batch of a row plan: axis 0 of the largest kernel's domain (None when no kernel
    has an axis, or the largest one's axis 0 has one row)."""
    best = None
    for kind, template, *_ in steps:
        if kind in ("call", "iadd", "alias") or template is None or not template.domain:
            continue
        if best is None or template.size > best.size:
            best = template
    return None if best is None or best.domain[0] < 2 else best.domain[0]


def _reads(step: tuple) -> set[int]:
    kind, template, sources, _first, extra = step
    found: set[int] = set()
    if kind == "call":
        replay_ops.slots_read(sources[0], found)
        replay_ops.slots_read(sources[1], found)
        for _k, a, b, _ta, _tb in extra[3] if len(extra) > 3 else ():
            replay_ops.slots_read(a, found)
            replay_ops.slots_read(b, found)
    elif template is not None:
        found.update(src[0] for src in sources if src[0] != "const")
    return found


def _row_bytes(lay: tuple | None) -> int:
    if lay is None:
        return 0
    return math.prod(lay[0][1:]) * lay[2].itemsize


# --- running ------------------------------------------------------------------------------


def _block_layout(lay: tuple, rows: int) -> tuple:
    shape, strides, dtype = lay
    return ((rows, *shape[1:]), strides, dtype)


def _block_view(e: tuple, rows: int, kinds: list[str]) -> tuple:
    """A view operand of the full program as it reads a block of ``rows`` rows."""
    slot, offset, shape, strides, dtype = e
    if kinds[slot] == ROWS:
        return (slot, offset, (rows, *shape[1:]), strides, dtype)
    return e


def _block_encoded(e: tuple, rows: int, kinds: list[str]) -> tuple:
    if e[0] == "view":
        return ("view", *_block_view(e[1:], rows, kinds))
    return e


def placed(op: replay_ops.Op, first: int, n: int) -> replay_ops.Op:
    """``op`` (which appends its ``n`` results to the slots it is given) run on a list of every
    slot, the results written at ``first:first + n``: a plan runs steps out of their recorded
    order (the slots after ``first`` may hold results already)."""
    end = first + n

    def run(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        head = slots[:first]
        op(head, numbers, pool)
        slots[first:end] = head[first:]

    return run


class RowsOp:
    """The closure (``op(slots, numbers, pool)``, on a list of every slot) running a plan's
    row steps block by block: it writes their sums, their kept row-wise values at full size,
    and None for the others. ``runner(step, replayed)`` and ``kernel_op(step, layouts, run)``:
    how the program compiles a kernel step (see ``replay_compile``)."""

    def __init__(
        self,
        found: RowPlan,
        steps: Sequence[tuple],
        layouts: Sequence[tuple | None],
        runner: Callable[[tuple, bool], Any],
        kernel_op: Callable[[tuple, Sequence[tuple | None], Any], replay_ops.Op],
        replayed: bool,
    ) -> None:
        self.plan = found
        self.steps = [steps[i] for i in found.row]
        self.layouts = layouts
        self.runner, self.kernel_op, self.replayed = runner, kernel_op, replayed
        self.compiled: dict[int, list[replay_ops.Op]] = {}
        self.lock = threading.Lock()

    def _ops(self, rows: int) -> list[replay_ops.Op]:
        """The row steps' ops for a block of ``rows`` rows (compiled once per length)."""
        ops = self.compiled.get(rows)
        if ops is not None:
            return ops
        with self.lock, numpy_blocked.serial():
            ops = self.compiled.get(rows)
            if ops is not None:
                return ops
            kinds = self.plan.kinds
            # a block of a row-wise value steps as the whole does (an input's rows, or a fresh
            # C-contiguous result: a kernel's or a product's)
            layouts = [
                _block_layout(lay, rows) if lay is not None and kinds[j] == ROWS else lay
                for j, lay in enumerate(self.layouts)
            ]
            ops = []
            for s in self.steps:
                if s[0] == "call":
                    op = _product_op(s, rows, kinds, layouts)
                else:
                    engine, template, sources, first, dynamic = s
                    block = Kernel(
                        (rows, *template.domain[1:]), (), template.constants,
                        template.program, template.outputs, template.signature(),
                    )  # fmt: skip
                    srcs = tuple(
                        src if src[0] == "const" else _block_view(src, rows, kinds)
                        for src in sources
                    )
                    step = (engine, block, srcs, first, dynamic)
                    op = self.kernel_op(step, layouts, self.runner(step, self.replayed))
                ops.append(placed(op, s[3], count(s)))
            self.compiled[rows] = ops
            return ops

    def __call__(self, slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        p = self.plan
        # an even number of blocks, so two threads share them evenly (a count set by the
        # thread count would change the sums' rounding with it)
        n_blocks = max(1, 2 * round(p.batch / (2 * p.rows_per_block)))
        nt = max(1, min(numpy_blocked.threads(), n_blocks))
        kept = {j: _full(self.layouts[j]) for j in p.kept}
        sums = OrderedSums(n_blocks)
        # the ops of every block length made here, where this thread's engine is in force
        # (``use_engine`` is per thread: a worker making them would choose under auto)
        short, extra = divmod(p.batch, n_blocks)
        for rows in (short, short + 1) if extra else (short,):
            self._ops(rows)

        def run() -> None:
            with numpy_blocked.serial():
                try:
                    while (b := sums.claim()) is not None:
                        s0, s1 = p.batch * b // n_blocks, p.batch * (b + 1) // n_blocks
                        sums.add(b, self._run_block(slots, s0, s1, numbers, kept))
                except BaseException:
                    sums.stop()  # the other threads take no more blocks
                    raise

        # a block's products are small: OpenBLAS's own threads would only wait on each other
        with replay_blas.single_threaded() or contextlib.nullcontext():
            workers = numpy_blocked.pool()
            done = [workers.submit(run) for _ in range(1, nt)]
            try:
                run()
            finally:
                for f in done:
                    f.result()
        for j in self.plan.made:
            slots[j] = sums.total[j] if j in sums.total else kept.get(j)

    def _run_block(
        self, slots: list, s0: int, s1: int, numbers: Sequence[Any], kept: dict
    ) -> dict[int, np.ndarray]:
        """Rows ``s0:s1``: their sums (fresh arrays); their kept row-wise values written into
        ``kept``'s full arrays."""
        bs = list(slots)
        for j in self.plan.row_inputs:
            bs[j] = slots[j][s0:s1]
        for op in self._ops(s1 - s0):
            op(bs, numbers, None)
        for j, full in kept.items():
            full[s0:s1] = bs[j]
        return {j: bs[j] for j in self.plan.sums}


class OrderedSums:
    """Blocks ``0..n`` handed out one at a time (``claim``), and their sums added up in block
    order as they come in (``add``), whichever thread ran a block and whenever it finished:
    ``total`` is ``((s0 + s1) + s2) + ...`` for every ``j`` in the blocks' dicts. A block that
    finishes early waits for those before it (at most about one per other thread).

    >>> sums = OrderedSums(2)
    >>> a, b = sums.claim(), sums.claim()
    >>> sums.add(b, {0: np.array([2.0])}); sums.add(a, {0: np.array([1.0])})
    >>> sums.claim(), sums.total
    (None, {0: array([3.])})
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.claimed = 0
        self.added = 0
        self.waiting: dict[int, dict[int, np.ndarray]] = {}
        self.total: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()

    def claim(self) -> int | None:
        """The next block nobody has taken, or None when all are taken."""
        with self.lock:
            b = self.claimed
            if b >= self.n:
                return None
            self.claimed = b + 1
            return b

    def stop(self) -> None:
        """Hand out no more blocks (a block failed)."""
        with self.lock:
            self.claimed = self.n

    def add(self, b: int, sums: dict[int, np.ndarray]) -> None:
        """Block ``b``'s sums (fresh arrays: the first block's become the totals)."""
        with self.lock:
            self.waiting[b] = sums
            while self.added in self.waiting:
                for j, v in self.waiting.pop(self.added).items():
                    t = self.total.get(j)
                    if t is None:
                        self.total[j] = v
                    else:
                        np.add(t, v, out=t)
                self.added += 1


def _full(lay: tuple | None) -> np.ndarray:
    assert lay is not None  # a kept value is an array (``plan`` keeps only arrays)
    return np.empty(lay[0], lay[2])


def _product_op(
    step: tuple, rows: int, kinds: list[str], layouts: Sequence[tuple | None]
) -> replay_ops.Op:
    """A product step on a block: each array result ``np.matmul`` of its operands' block
    views (a fresh array), its other results (pullbacks) None."""
    by_item = {q[0]: q for q in step[4][3]}
    specs: list[tuple | None] = []
    for k, w in enumerate(step[4][1]):
        if w is None:
            specs.append(None)
            continue
        _, a, b, ta, tb = by_item[k]
        specs.append(
            (
                replay_ops.getter(_block_encoded(a, rows, kinds), layouts, None),
                replay_ops.getter(_block_encoded(b, rows, kinds), layouts, None),
                ta,
                tb,
            )
        )
    mm = np.matmul

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        out: list = []
        for spec in specs:
            if spec is None:
                out.append(None)
                continue
            ga, gb, ta, tb = spec
            a, b = ga(slots, numbers), gb(slots, numbers)
            out.append(mm(a.T if ta else a, b.T if tb else b))
        slots.extend(out)

    return op

"""The reference engine: NumPy ufuncs over cache-sized blocks of the domain.

The domain is cut into blocks of about ``TARGET`` elements along its outer axes. In each block
every instruction runs as one ufunc call into a reused buffer (``out=``), so a kernel allocates
its outputs plus a few block-sized buffers, never a domain-sized temporary. Each value is
computed at its *natural* block shape (a value that depends only on ``x[:, None]`` is computed
once per row, not per element). Reductions reduce each block and combine the partials into the
output. NumPy releases the GIL in ufunc loops, so large kernels run their blocks on a small
thread pool, each thread with its own buffers and partial sums, combined in a fixed order.

It is exact NumPy semantics for every ufunc and dtype, the oracle for the other engine.

Example::

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((2, 3), (np.ones((2, 1)), np.arange(3.0).reshape(1, 3)), (),
    ...            (Instr("add", (0, 1), f8),), (Output(2, "sum", (1,), f8),))
    >>> run(k)[0].ravel()
    array([6., 6.])
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from .. import buffer_cache, workers
from ..kernel import Instr, Kernel, Output
from ..ops import OPS
from .registry import WHOLE_MAX, register

TARGET = 1 << 16  # elements per block: 512 KiB per float64 buffer, inside L2 on these machines
# Measured (benchmarks/bench_lazy.py --sweep, 2 cores, shared machine, median of 5 interleaved):
# TARGET 2^14/2^15/2^16/2^17/2^18: row sum N=8000 486/451/470/458/464 ms; 6-op chain on 10^7
# float64 348/353/341/338/353 ms. Flat within noise, so 2^16 stays (smaller buffers than 2^17+).
SMALL = WHOLE_MAX  # at most this many points: one block (registry.py has the measurements)
THREADED = 1 << 20  # at least this many points: blocks run on the thread pool

_REDUCER = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}

# The engine interface (``registry``): this is the reference engine, which runs every kernel.
name = "numpy"


class _Ops:
    """Every op of ``OPS`` (its entry here is the ufunc itself), as it is when asked."""

    def __contains__(self, op: object) -> bool:
        return op in OPS or op in ("cast", "where")

    def __iter__(self):
        return iter([*OPS, "cast", "where"])


ops = _Ops()


def available() -> bool:
    """Always True: NumPy is all it needs."""
    return True


def supports(kernel: Kernel) -> bool:
    """Always True: every op, dtype and reduction NumPy has (``ops`` holds every op).

    >>> supports(Kernel((), (), (), (), ()))
    True
    """
    return True


def cost(kernel: Kernel) -> float:
    """1.0: other engines' costs are relative to this one's time."""
    return 1.0


_threads_env: tuple[str, int] | None = None
_serial = threading.local()


@contextlib.contextmanager
def serial() -> Iterator[None]:
    """Inside the block, ``threads()`` is 1 on this thread: what runs there (a block of a
    row-blocked replay, itself one of several running on the pool) uses no worker threads.

    >>> with serial():
    ...     threads()
    1
    """
    before = getattr(_serial, "on", False)
    _serial.on = True
    try:
        yield
    finally:
        _serial.on = before


def threads() -> int:
    """Worker threads for large kernels: ``FUSEGRAD_THREADS`` (a positive whole number), else
    the usable cores; 1 inside ``serial()``. A value that is not one raises ``ValueError``
    naming it.

    >>> threads() >= 1
    True
    """
    if getattr(_serial, "on", False):
        return 1
    return _configured_threads()


def _configured_threads() -> int:
    global _threads_env
    env = os.environ.get("FUSEGRAD_THREADS")
    if env and env.strip():
        if _threads_env is not None and _threads_env[0] == env:
            return _threads_env[1]
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(
                f"FUSEGRAD_THREADS={env!r} is not a number of threads: it accepts a positive "
                f"whole number such as 2 (unset, it means the usable cores: {_cores()})"
            )
        _threads_env = (env, n)
        return n
    return _cores()


_affinity: list[int] = []  # the usable cores, read once (a system call: ~0.7 us)


def _cores() -> int:
    if not _affinity:
        try:
            _affinity.append(len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not Linux
            _affinity.append(os.cpu_count() or 1)
    return _affinity[0]


def pool() -> workers.Pool:
    """The worker pool both engines share, of ``threads()`` threads (a caller may use fewer;
    ``lazy/workers.py``).

    >>> pool().submit(sum, [1, 2]).result()
    3
    """
    return workers.shared(_configured_threads())


def identity(kind: str, dtype: np.dtype) -> Any:
    """The starting value of a reduction, such that combining with it changes nothing."""
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dtype.kind == "f" or dtype.kind == "c":
        return -np.inf if kind == "max" else np.inf
    if dtype.kind == "b":
        return kind == "min"
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


def _apply(instr: Instr, args: list, out: np.ndarray | None) -> np.ndarray:
    if instr.op == "cast":
        if out is None:
            return np.asarray(args[0]).astype(instr.dtype)
        np.copyto(out, args[0], casting="unsafe")
        return out
    if instr.op == "where":
        if out is None:
            return np.asarray(np.where(*args), dtype=instr.dtype)
        np.copyto(out, args[2], casting="unsafe")
        np.copyto(out, args[1], casting="unsafe", where=np.asarray(args[0], bool))
        return out
    ufunc = OPS[instr.op].ufunc
    if out is None:
        return np.asarray(ufunc(*args))
    return ufunc(*args, out=out)


def _reduce_value(out: Output, val: Any, block_shape: tuple) -> np.ndarray:
    val = np.asarray(val)
    if val.shape != block_shape:
        val = np.broadcast_to(val, block_shape)
    assert out.reduce is not None  # only reductions come here
    return _REDUCER[out.reduce].reduce(val, axis=out.axes, keepdims=True, dtype=out.dtype)


def run(kernel: Kernel) -> list[np.ndarray]:
    """Evaluate ``kernel``; one array per output, in keepdims shape.

    >>> from fusegrad.lazy.kernel import Kernel, Output
    >>> run(Kernel((3,), (np.arange(3.0),), (), (), (Output(0, "max", (0,), np.dtype("f8")),)))
    [array([2.])]
    """
    if any(o.mirror is not None for o in kernel.outputs):
        return _run_mirrored(kernel)
    outs = [buffer_cache.empty(kernel.output_shape(o), o.dtype) for o in kernel.outputs]
    size = kernel.size
    if size == 0:
        for o, arr in zip(kernel.outputs, outs):
            if o.reduce is not None and arr.size:
                arr.fill(identity(o.reduce, o.dtype))
        return outs
    if size <= SMALL:
        _run_whole(kernel, outs)
    else:
        _run_blocked(kernel, outs)
    return outs


def _run_mirrored(kernel: Kernel) -> list[np.ndarray]:
    """A kernel with mirrored sums, as the plain kernel computing their row and column sums
    apart, each pair then added (the reference semantics; the numba engine needs no partials)."""
    outputs: list[Output] = []
    for o in kernel.outputs:
        outputs.append(replace(o, mirror=None))
        if o.mirror is not None:
            outputs.append(Output(o.mirror, "sum", (0,), o.dtype))
    parts = iter(run(replace(kernel, outputs=tuple(outputs), _sig=None)))
    results = []
    for o in kernel.outputs:
        r = next(parts)
        if o.mirror is not None:
            r += next(parts).reshape(r.shape)  # column j of the mirror adds onto row j
        results.append(r)
    return results


def _run_whole(kernel: Kernel, outs: list[np.ndarray]) -> None:
    """One block: each instruction is one ufunc call over its natural shape in the whole domain,
    as eager NumPy code is, but into planned buffers (a dead value's buffer is reused) and, for an
    elementwise output computed at the output's shape and dtype, straight into the output array.
    Fresh temporaries of a few hundred KiB cost a page fault per 4 KiB when touched
    (``benchmarks/bench_crossover.py``); reused ones do not. The plan is cached per signature and
    domain: a kernel run again (a loop, a training step) costs its ufunc calls and little else."""
    plan, vals = _whole_plan(kernel), [*kernel.inputs, *kernel.constants]
    if _selects(kernel):
        with np.errstate(all="ignore"):
            _exec_whole(kernel, plan, vals, outs)
    else:
        _exec_whole(kernel, plan, vals, outs)


def _selects(kernel: Kernel) -> bool:
    """Whether ``kernel`` has a ``where``. Its branches are computed at every point, as NumPy
    computes them, so it runs with NumPy's floating-point warnings off: the branch a point does
    not take (a guard's ``log`` of an empty sum in ``logsumexp``) must not warn the user, whose
    own code never computed it (numba's kernels never warn).

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> _selects(Kernel((1,), (), (), (Instr("where", (0, 1, 2), np.dtype("f8")),), ()))
    True
    """
    return any(i.op == "where" for i in kernel.program)


def _exec_whole(kernel: Kernel, plan: tuple, vals: list, outs: list[np.ndarray]) -> None:
    steps, direct = plan[3], plan[2]
    buffers: dict[int, np.ndarray] = {}
    for ufunc, args, home, shape, instr in steps:
        if home < 0:
            buf = outs[-1 - home]
        else:
            b = buffers.get(home)
            buf = buffers[home] = np.empty(shape, instr.dtype) if b is None else b
        if ufunc is None:  # cast, where
            vals.append(_apply(instr, [vals[i] for i in args], buf))
        elif len(args) == 2:
            vals.append(ufunc(vals[args[0]], vals[args[1]], out=buf))
        else:
            vals.append(ufunc(*[vals[i] for i in args], out=buf))
    domain = kernel.domain
    for o, arr, d in zip(kernel.outputs, outs, direct):
        if d:
            continue
        val = vals[o.value]
        if o.reduce is None:
            np.copyto(arr, val, casting="unsafe")
        elif type(val) is np.ndarray and val.shape == domain and val.dtype == o.dtype:
            _REDUCER[o.reduce].reduce(val, axis=o.axes, keepdims=True, out=arr)
        else:
            arr[...] = _reduce_value(o, val, domain)


def replayer(kernel: Kernel) -> Callable[[tuple, tuple], list[np.ndarray]] | None:
    """For ``jit``'s replays: a function of new inputs and constants (same shapes and dtypes as
    ``kernel``'s) giving what ``run`` would, with everything that depends only on the kernel's
    signature and domain worked out once; None when ``run`` must be called (blocked kernels,
    mirrored sums, empty domains: their time is not in the planning).

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((2,), (np.ones(2),), (3.0,), (Instr("multiply", (0, 1), f8),),
    ...            (Output(2, None, (), f8),))
    >>> replayer(k)((np.arange(2.0),), (2.0,))
    [array([0., 2.])]
    """
    if kernel.size > SMALL or kernel.size == 0 or any(o.mirror is not None for o in kernel.outputs):
        return None
    plan = _whole_plan(kernel)
    specs = [(kernel.output_shape(o), o.dtype) for o in kernel.outputs]
    empty = np.empty
    quiet = _selects(kernel)

    def run_whole(inputs: tuple, constants: tuple) -> list[np.ndarray]:
        outs = [empty(shape, dtype) for shape, dtype in specs]
        if quiet:
            with np.errstate(all="ignore"):
                _exec_whole(kernel, plan, [*inputs, *constants], outs)
        else:
            _exec_whole(kernel, plan, [*inputs, *constants], outs)
        return outs

    return run_whole


# (signature, domain) -> (instruction shapes, buffer per instruction (-1 - k: output k's
# array), whether each output was written in place, per instruction (ufunc or None for cast
# and where, arguments, buffer, shape, instruction)); bounded, cleared when full
_WHOLE_PLANS: dict[tuple, tuple[list[tuple], list[int], list[bool], list[tuple]]] = {}


def _whole_plan(kernel: Kernel) -> tuple[list[tuple], list[int], list[bool], list[tuple]]:
    key = (kernel.signature(), kernel.domain)
    plan = _WHOLE_PLANS.get(key)
    if plan is not None:
        return plan
    first = len(kernel.inputs) + len(kernel.constants)
    shapes = _natural_shapes(kernel, kernel.domain)
    homes = list(_buffer_plan(kernel, shapes))
    direct = [False] * len(kernel.outputs)
    taken: set[int] = set()
    for k, o in enumerate(kernel.outputs):
        v = o.value
        if (
            o.reduce is None
            and v >= first
            and v not in taken
            and shapes[v] == kernel.output_shape(o)
            and kernel.program[v - first].dtype == o.dtype
        ):
            # its value lives to the end, so its planned buffer is no other value's
            homes[v - first] = -1 - k
            taken.add(v)
            direct[k] = True
    steps = [
        (
            None if i.op in ("cast", "where") else OPS[i.op].ufunc,
            i.args,
            home,
            shape,
            i,
        )
        for i, home, shape in zip(kernel.program, homes, shapes[first:])
    ]
    plan = (shapes[first:], homes, direct, steps)
    if len(_WHOLE_PLANS) >= 1024:
        _WHOLE_PLANS.clear()
    _WHOLE_PLANS[key] = plan
    return plan


class _Blocking:
    """How a domain is cut: axes before ``split`` one index at a time, ``split`` in chunks."""

    def __init__(self, domain: tuple[int, ...], target: int) -> None:
        inner = 1
        split = len(domain) - 1
        while split > 0 and inner * domain[split] <= target:
            inner *= domain[split]
            split -= 1
        self.domain = domain
        self.split = split
        self.chunk = max(1, min(domain[split], target // max(inner, 1)))
        outer = domain[:split]
        self.n_outer = int(np.prod(outer, dtype=np.int64))
        self.n_chunks = -(-domain[split] // self.chunk)
        self.count = self.n_outer * self.n_chunks
        self.block_shape = (1,) * split + (self.chunk,) + domain[split + 1 :]

    def slices(self, b: int) -> tuple[slice, ...]:
        outer, c = divmod(b, self.n_chunks)
        idx = np.unravel_index(outer, self.domain[: self.split]) if self.split else ()
        start = c * self.chunk
        stop = min(start + self.chunk, self.domain[self.split])
        return (
            tuple(slice(int(i), int(i) + 1) for i in idx)
            + (slice(start, stop),)
            + (slice(None),) * (len(self.domain) - self.split - 1)
        )

    def crosses(self, axes: tuple[int, ...]) -> bool:
        """Whether a reduction over ``axes`` gathers values from several blocks."""
        for a in axes:
            if a < self.split and self.domain[a] > 1:
                return True
            if a == self.split and self.n_chunks > 1:
                return True
        return False


def _natural_shapes(kernel: Kernel, block_shape: tuple) -> list[tuple]:
    shapes: list[tuple] = [
        tuple(b if n != 1 else 1 for n, b in zip(a.shape, block_shape)) for a in kernel.inputs
    ]
    shapes += [()] * len(kernel.constants)
    for instr in kernel.program:
        shapes.append(np.broadcast_shapes(*(shapes[i] for i in instr.args)))
    return shapes


def _buffer_plan(kernel: Kernel, shapes: list[tuple]) -> list[int]:
    """For each instruction, the id of the buffer it writes: its own, or a dead value's.

    A value's buffer is free once the value has been read for the last time. An elementwise
    ufunc may write into the buffer of an argument it reads (same shape), but ``where`` copies
    in two steps and so never reuses its own arguments' buffers.
    """
    first = len(kernel.inputs) + len(kernel.constants)
    last_use: dict[int, float] = {}
    for j, instr in enumerate(kernel.program):
        for i in instr.args:
            last_use[i] = first + j
    for o in kernel.outputs:
        last_use[o.value] = float("inf")
    home: dict[int, int] = {}
    kind: dict[int, tuple] = {}  # buffer id -> (shape, dtype)
    free: list[int] = []
    plan: list[int] = []
    for j, instr in enumerate(kernel.program):
        vid = first + j
        dying = [home[i] for i in set(instr.args) if i >= first and last_use[i] == vid]
        if instr.op != "where":
            free.extend(dying)
        want = (shapes[vid], instr.dtype)
        pick = next((h for h in free if kind[h] == want), None)
        if pick is None:
            pick = vid
            kind[vid] = want
        else:
            free.remove(pick)
        home[vid] = pick
        plan.append(pick)
        if instr.op == "where":
            free.extend(dying)
    return plan


def _push_pairwise(stack: list[tuple[int, np.ndarray]], part: np.ndarray) -> None:
    """Add a block partial to a binary-counter stack: equal levels merge, so n partials are
    combined in a balanced tree of depth log2(n)."""
    level = 0
    while stack and stack[-1][0] == level:
        _, prev = stack.pop()
        part = np.add(prev, part, out=prev)
        level += 1
    stack.append((level, part))


def _run_blocked(kernel: Kernel, outs: list[np.ndarray]) -> None:
    domain = kernel.domain
    target = TARGET if kernel.size > 4 * TARGET else max(SMALL // 4, kernel.size // 4)
    blocking = _Blocking(domain, target)
    shapes = _natural_shapes(kernel, blocking.block_shape)
    reuse = _buffer_plan(kernel, shapes)
    accumulate = [o.reduce is not None and blocking.crosses(o.axes) for o in kernel.outputs]
    # A sum whose every block adds into the whole output (a full sum, column sums) combines its
    # block partials pairwise, as NumPy's pairwise sum does, instead of one after another.
    cascade = [
        acc and o.reduce == "sum" and all(a in o.axes for a in range(blocking.split + 1))
        for o, acc in zip(kernel.outputs, accumulate)
    ]
    n_threads = threads() if kernel.size >= THREADED and blocking.count >= 4 else 1
    n_threads = min(n_threads, blocking.count)
    quiet = _selects(kernel)

    def worker(t: int) -> list[np.ndarray | None]:
        if quiet:  # (NumPy's error state is the thread's own)
            with np.errstate(all="ignore"):
                return blocks(t)
        return blocks(t)

    def blocks(t: int) -> list[np.ndarray | None]:
        first = len(kernel.inputs) + len(kernel.constants)
        buffers: dict[int, np.ndarray] = {}
        partials: list[np.ndarray | None] = []
        stacks: list[list[tuple[int, np.ndarray]]] = [[] for _ in kernel.outputs]
        for o, arr, acc in zip(kernel.outputs, outs, accumulate):
            if acc:
                assert o.reduce is not None  # accumulate is set for reductions only
                p = np.empty_like(arr) if n_threads > 1 else arr
                p.fill(identity(o.reduce, o.dtype))
                partials.append(p)
            else:
                partials.append(None)
        for b in range(t, blocking.count, n_threads):
            sl = blocking.slices(b)
            vals: list[Any] = [
                a[tuple(s if n != 1 else slice(None) for s, n in zip(sl, a.shape))]
                for a in kernel.inputs
            ]
            vals += kernel.constants
            for j, instr in enumerate(kernel.program):
                vid = first + j
                home = reuse[j]
                buf = buffers.get(home)
                if buf is None:
                    buf = buffers[home] = np.empty(shapes[vid], instr.dtype)
                nat = shapes[vid]
                view = buf
                split = blocking.split
                if nat and nat[split] > 1:
                    m = sl[split].stop - sl[split].start
                    if m != nat[split]:
                        view = buf[(slice(None),) * split + (slice(0, m),)]
                vals.append(_apply(instr, [vals[i] for i in instr.args], view))
            block_shape = tuple(
                s.stop - s.start if s != slice(None) else n for s, n in zip(sl, domain)
            )
            for k, (o, arr, pk) in enumerate(zip(kernel.outputs, outs, partials)):
                val = vals[o.value]
                if o.reduce is None:
                    np.copyto(arr[sl], val, casting="unsafe")
                    continue
                region = tuple(slice(None) if a in o.axes else s for a, s in enumerate(sl))
                part = _reduce_value(o, val, block_shape)
                if pk is None:
                    arr[region] = part
                elif cascade[k]:
                    _push_pairwise(stacks[k], part)
                else:
                    _REDUCER[o.reduce](pk[region], part, out=pk[region])
        for k, pk in enumerate(partials):
            if pk is None:  # (no stack either)
                continue
            for _, part in reversed(stacks[k]):
                np.add(pk, part, out=pk)
        return partials

    if n_threads == 1:
        worker(0)
        return
    results = list(pool().map(worker, range(n_threads)))
    for k, (o, arr) in enumerate(zip(kernel.outputs, outs)):
        if accumulate[k]:
            arr[...] = results[0][k]
            for r in results[1:]:
                part = r[k]
                assert part is not None  # each thread keeps a partial of an accumulated output
                _REDUCER[str(o.reduce)](arr, part, out=arr)


register(sys.modules[__name__])

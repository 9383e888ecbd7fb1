"""Row-blocked ``jit`` replays (``fusegrad.lazy.replay_rows``) against step-by-step replays and
``jax.jit``, on the MLP training step at large batches.

Run::

    python benchmarks/bench_row_blocks.py                        # batch 4096, default blocks
    python benchmarks/bench_row_blocks.py --batch 16384 --blocks 1,2,4,8
    python benchmarks/bench_row_blocks.py --batch 2048 --parallel-from 262144,524288
    python benchmarks/bench_row_blocks.py --closure              # X and y read from a closure

Every variant (step by step; one per block size in MiB; step by step with replayed kernels
parallel from each ``--parallel-from`` number of points, as
``numba_engine.REPLAY_PARALLEL_MIN_POINTS`` sets it; with ``--closure``, the gradient of
``lambda W1, b1, W2, b2: mlp(W1, b1, W2, b2, X, y)``, its data read from a closure, with and
without ``replay_constants`` making ``X`` and ``y`` inputs; jax.jit when installed) is recorded
first, then all are timed round-robin in one process, call by call, so a shared machine slows
them alike: the table gives each one's median and best wall time over ``--calls`` calls, and
its ratio to jax.jit. Wall time on every thread (row blocks run one run of blocks per worker
thread); ``python -m fusegrad.bench`` is the benchmark of record.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_ENABLE_X64", "1")

import numpy as np  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.bench import workloads as W  # noqa: E402
from fusegrad.lazy import replay_constants, replay_rows  # noqa: E402
from fusegrad.lazy.engines import numba_engine  # noqa: E402


def _jitted(args: tuple) -> object:
    grad = fg.grad(lambda *a: W.mlp(np, *a), argnums=(0, 1, 2, 3))
    f = fg.jit(grad)
    for _ in range(12):  # recorded, then hot (kernels compiled for replays)
        f(*args)
    return f


def _closure_jitted(args: tuple, promote: bool) -> object:
    """The MLP's gradient reading ``X`` and ``y`` from a closure (called with all six arrays,
    as the others are), recorded with or without ``replay_constants``."""
    X, y = args[4:]
    grad = fg.grad(lambda *p: W.mlp(np, *p, X, y), argnums=(0, 1, 2, 3))
    f = fg.jit(grad)
    real = replay_constants.for_rows
    if not promote:
        replay_constants.for_rows = lambda *a: None
    try:
        for _ in range(12):
            f(*args[:4])
    finally:
        replay_constants.for_rows = real
    return lambda *a: f(*a[:4])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--blocks", default="", help="block sizes in MiB (default: the module's)")
    ap.add_argument("--calls", type=int, default=25)
    ap.add_argument("--parallel-from", default="", help="points: step-by-step variants")
    ap.add_argument("--closure", action="store_true", help="add the data-in-a-closure variants")
    opts = ap.parse_args()
    args = W.mlp_inputs(opts.batch)
    variants: dict[str, object] = {}
    saved = replay_rows.MIN_BYTES, replay_rows.BLOCK_BYTES
    parallel_from = numba_engine.REPLAY_PARALLEL_MIN_POINTS
    replay_rows.MIN_BYTES = 1 << 62  # no program qualifies: step by step
    variants["step by step"] = _jitted(args)
    for points in (int(float(p)) for p in opts.parallel_from.split(",") if p):
        numba_engine.REPLAY_PARALLEL_MIN_POINTS = points
        variants[f"step by step, parallel from {points}"] = _jitted(args)
    numba_engine.REPLAY_PARALLEL_MIN_POINTS = parallel_from
    replay_rows.MIN_BYTES = saved[0]
    sizes = [float(b) for b in opts.blocks.split(",") if b] or [saved[1] / 2**20]
    for mib in sizes:
        replay_rows.BLOCK_BYTES = int(mib * 2**20)
        variants[f"rows, {mib:g} MiB blocks"] = _jitted(args)
    replay_rows.BLOCK_BYTES = saved[1]
    if opts.closure:
        variants["closure, as recorded"] = _closure_jitted(args, False)
        variants["closure, made inputs"] = _closure_jitted(args, True)
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        g = jax.jit(jax.grad(lambda *a: W.mlp(jnp, *a), argnums=(0, 1, 2, 3)))
        jargs = [jnp.asarray(a) for a in args]
        variants["jax.jit"] = lambda *a: [x.block_until_ready() for x in g(*jargs)]
        variants["jax.jit"]()
    except ImportError:
        pass
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants.items())
    for _ in range(opts.calls):
        # each first in turn: the variant after jax.jit shares the cores with its spinning
        # worker threads (2.7 ms against 2.3 for the same replay at batch 2048)
        order = order[1:] + order[:1]
        for name, f in order:
            t = time.perf_counter()
            f(*args)  # type: ignore[operator]
            times[name].append(time.perf_counter() - t)
    ref = statistics.median(times["jax.jit"]) if "jax.jit" in times else None
    n_in, hidden = W.mlp_dims(opts.batch)
    print(f"MLP batch {opts.batch} ({n_in}->{hidden}->1), {opts.calls} calls each, wall ms")
    for name, ts in times.items():
        med = statistics.median(ts)
        ratio = f"  {med / ref:.2f}x jax.jit" if ref else ""
        print(f"{name:>24}: median {1e3 * med:7.2f}  best {1e3 * min(ts):7.2f}{ratio}")


if __name__ == "__main__":
    main()

"""The worker pool (``fusegrad.lazy.workers``) against ``concurrent.futures.ThreadPoolExecutor``:
two 20 µs shares of work split between the caller and a pool thread, then ``jit`` replays that
split work over the threads, with the two pools alternated in one process.

Run::

    python benchmarks/bench_workers.py                 # W1 at 10^6 points, the MLP at 1024, 4096
    python benchmarks/bench_workers.py --batches 1024 --rounds 11

Each case is recorded and warmed up under each pool, then timed in ``--rounds`` rounds, the
pools' order alternating, ``--calls`` calls per pool per round: the table gives the median and
the smallest of the rounds' medians, in µs. Last, ``jit`` of W1 at 10^6 points with its kernel
split against the same on one thread, each call after ``--gaps`` ms of Python (the pool's
threads asleep after more than ``workers.IDLE_POLL_US``). Wall time on a shared machine:
compare the columns of a row, not rows across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import fusegrad as fg
from fusegrad.bench import workloads as W
from fusegrad.lazy import workers
from fusegrad.lazy.engines import numba_engine, numpy_blocked
from fusegrad.lazy.engines.numba_atomics import poll


def split_pair(pool, work_us: float = 20.0, calls: int = 2000) -> float:
    """Median µs of two ``work_us`` shares of compiled, GIL-free work, one handed to ``pool``
    and one run by the caller, then the handed one's result: ``work_us`` plus the hand-off's
    cost (at most ``2 * work_us`` where the caller runs a share no thread has started)."""
    counters = np.zeros(1, np.int64)
    checks = max(1, int(work_us * workers._poller()[1] / workers.IDLE_POLL_US))

    def work() -> None:  # polls a counter that never changes: ``work_us`` without the GIL
        poll(counters, 0, 0, checks, -1)

    for _ in range(100):
        pool.submit(work).result()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        task = pool.submit(work)
        work()
        task.result()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1024,4096", help="MLP batch sizes")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--gaps", default="0,1,5", help="ms of Python before each call")
    opts = ap.parse_args()
    n = numpy_blocked.threads()
    pools = {"concurrent.futures": ThreadPoolExecutor(n), "fusegrad workers": workers.shared(n)}
    print(f"{n} threads; two 20 µs shares, one handed to the pool, median µs (20 at best):")
    for name, pool in pools.items():
        print(f"  {name:20s} {split_pair(pool):7.1f}")

    cases = {}
    x = np.random.default_rng(0).random(10**6)
    cases["W1 10^6 jit"] = (fg.jit(fg.grad(lambda v: np.sum((1 - v) / 2))), (x,))
    for b in (int(s) for s in opts.batches.split(",") if s):
        args = W.mlp_inputs(b)
        grad = fg.grad(lambda *p: W.mlp(np, *p), argnums=(0, 1, 2, 3))
        cases[f"MLP {b} jit"] = (fg.jit(grad), args)
    shared = numpy_blocked.pool
    times: dict[tuple[str, str], list[float]] = {(c, p): [] for c in cases for p in pools}
    try:
        for f, args in cases.values():
            for pool in pools.values():
                numpy_blocked.pool = lambda pool=pool: pool  # type: ignore[assignment]
                for _ in range(15):
                    f(*args)
        for r in range(opts.rounds):
            for case, (f, args) in cases.items():
                for name in list(pools) if r % 2 else list(pools)[::-1]:
                    pool = pools[name]
                    numpy_blocked.pool = lambda pool=pool: pool  # type: ignore[assignment]
                    calls = []
                    for _ in range(opts.calls):
                        t0 = time.perf_counter()
                        f(*args)
                        calls.append(time.perf_counter() - t0)
                    times[(case, name)].append(statistics.median(calls) * 1e6)
    finally:
        numpy_blocked.pool = shared  # type: ignore[assignment]
    names = list(pools)
    print(f"\n{'case':14s}" + "".join(f" | {p}: median (best round)" for p in names))
    for case in cases:
        row = [times[(case, p)] for p in names]
        cells = "".join(f" | {statistics.median(t):10.1f} ({min(t):9.1f})" for t in row)
        ratio = statistics.median(row[1]) / statistics.median(row[0])
        print(f"{case:14s}{cells} | ratio {ratio:.2f}")
    after_a_pause(x, [float(g) for g in opts.gaps.split(",") if g])


def after_a_pause(x: np.ndarray, gaps_ms: list[float], calls: int = 300) -> None:
    """W1's replay with its kernel split and on one thread, each call after ``gap`` ms of
    Python: median µs."""
    w1 = lambda v: np.sum((1 - v) / 2)  # noqa: E731
    saved = numba_engine.REPLAY_PARALLEL_MIN_POINTS
    replays = {}
    for name, points in (("one thread", 1 << 62), ("split", saved)):
        numba_engine.REPLAY_PARALLEL_MIN_POINTS = points
        replays[name] = fg.jit(fg.grad(w1))
        for _ in range(12):
            replays[name](x)
    numba_engine.REPLAY_PARALLEL_MIN_POINTS = saved
    print("\nW1 10^6 jit after a pause, median µs:")
    for gap in gaps_ms:
        times: dict[str, list[float]] = {name: [] for name in replays}
        for k in range(calls):
            for name in list(replays) if k % 2 else list(replays)[::-1]:
                end = time.perf_counter() + gap * 1e-3
                while time.perf_counter() < end:  # Python, holding the GIL, as a program would
                    pass
                t0 = time.perf_counter()
                replays[name](x)
                times[name].append(time.perf_counter() - t0)
        cells = ", ".join(f"{n} {statistics.median(t) * 1e6:7.1f}" for n, t in times.items())
        print(f"  {gap:4.1f} ms: {cells}")


if __name__ == "__main__":
    main()

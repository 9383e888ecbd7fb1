"""The worker pool (``fusegrad.lazy.workers``) against ``concurrent.futures.ThreadPoolExecutor``:
the round trip of one hand-off, then ``jit`` replays that split work over the threads, with the
two pools alternated in one process.

Run::

    python benchmarks/bench_workers.py                 # W1 at 10^6 points, the MLP at 1024, 4096
    python benchmarks/bench_workers.py --batches 1024 --rounds 11

Each case is recorded and warmed up under each pool, then timed in ``--rounds`` rounds, the
pools' order alternating, ``--calls`` calls per pool per round: the table gives the median and
the smallest of the rounds' medians, in µs. Wall time on a shared machine: compare the two
columns of a row, not rows across runs.
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
from fusegrad.lazy.engines import numpy_blocked


def round_trip(pool, calls: int = 2000) -> float:
    """Median µs of ``pool.submit(noop).result()``."""
    for _ in range(100):
        pool.submit(int).result()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        pool.submit(int).result()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1024,4096", help="MLP batch sizes")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=15)
    opts = ap.parse_args()
    n = numpy_blocked.threads()
    pools = {"concurrent.futures": ThreadPoolExecutor(n), "fusegrad workers": workers.shared(n)}
    print(f"{n} threads; hand-off round trip, median µs:")
    for name, pool in pools.items():
        print(f"  {name:20s} {round_trip(pool):7.1f}")

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


if __name__ == "__main__":
    main()

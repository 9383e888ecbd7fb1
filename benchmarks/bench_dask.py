"""The dask engine on a 2-worker LocalCluster against the numba engine in one process.

For each workload (W3: the Gaussian-kernel gradient w.r.t. x, y, s; LJ: Lennard-Jones forces;
W2T: the gradient of sum(tanh(v_i - v_j))) it runs the gradient once in this process on the
default engine (numba, on FUSEGRAD_THREADS threads) and once with ``fg.use_engine("dask")`` on a
LocalCluster of 2 worker processes with one thread each, on the same cores, and prints the median
time of ``--repeat`` calls, the ratio, the largest relative difference, and each worker's peak
RSS (its high-water mark after the run) beside its RSS before the first gradient.

    python benchmarks/bench_dask.py                      # W3 1e5, LJ 5e4, W2T 1e5 (minutes)
    python benchmarks/bench_dask.py --sizes 2000,8000,32000 --workloads W3 --repeat 3

To run on a real cluster, start a dask.distributed scheduler and workers there
(``dask scheduler``; ``dask worker tcp://HOST:8786 --nthreads 1`` on each core with
FUSEGRAD_THREADS=1) and pass ``--scheduler tcp://HOST:8786``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fusegrad as fg


def w3(x, y, s):
    return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


def lj(P):
    d = P[:, None, :] - P[None, :, :]
    r2 = np.sum(d**2, -1)
    s2_r2 = 1.0 / np.where(r2 > 0, r2, 1.0)
    e = 4 * (s2_r2**6 - s2_r2**3)
    return np.sum(np.where(r2 > 0, e, 0.0)) / 2


def w2t(v):
    return np.sum(np.tanh(v[:, None] - v[None, :]))


def case(name: str, n: int):
    rng = np.random.default_rng(0)
    if name == "W3":
        return fg.grad(w3, argnums=(0, 1, 2)), (rng.random(n), rng.random(n), 1.3)
    if name == "LJ":
        side = round(n ** (1 / 3)) + 1
        grid = np.stack(np.meshgrid(*[np.arange(side)] * 3), -1).reshape(-1, 3)[:n]
        return fg.grad(lj), (1.2 * grid + 0.05 * rng.standard_normal((n, 3)),)
    return fg.grad(w2t), (rng.standard_normal(n),)


def worker_rss():
    import resource

    import psutil

    return psutil.Process().memory_info().rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def timed(fun, args, repeat):
    out = fun(*args)  # warm: compiles (or loads) kernels
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fun(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def rel(a, b):
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workloads", default="W3,LJ,W2T")
    p.add_argument("--sizes", default=None, help="comma-separated N (default: W3/W2T 1e5, LJ 5e4)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--scheduler", default=None, help="address of an existing scheduler")
    args = p.parse_args()
    import distributed

    if args.scheduler:
        client = distributed.Client(args.scheduler)
    else:
        env = {"FUSEGRAD_THREADS": "1"}
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, env=env
        )
        client = distributed.Client(cluster)
    print(f"workers: {len(client.scheduler_info()['workers'])}; local threads: default")
    print("| case | numba, 1 process | dask, 2 workers | ratio | rel. diff | worker RSS -> peak |")
    print("|---|---:|---:|---:|---:|---|")
    defaults = {"W3": 100_000, "LJ": 50_000, "W2T": 100_000}
    for name in args.workloads.split(","):
        sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else [defaults[name]]
        for n in sizes:
            fun, fargs = case(name, n)
            t_local, want = timed(fun, fargs, args.repeat)
            before = client.run(worker_rss)
            with fg.use_engine("dask"):
                t_dask, got = timed(fun, fargs, args.repeat)
            after = client.run(worker_rss)
            pairs = zip(got, want) if isinstance(got, tuple) else [(got, want)]
            diff = max(rel(a, b) for a, b in pairs)
            mem = ", ".join(
                f"{before[w][0] / 2**20:.0f} -> {after[w][1] / 2**10:.0f} MiB"
                for w in sorted(after)
            )
            print(
                f"| {name} N={n:,} | {t_local:.3g} s | {t_dask:.3g} s | {t_dask / t_local:.2f}x "
                f"| {diff:.1e} | {mem} |",
                flush=True,
            )
    client.close()


if __name__ == "__main__":
    os.environ.setdefault("FUSEGRAD_EAGER_BELOW", "0")
    main()

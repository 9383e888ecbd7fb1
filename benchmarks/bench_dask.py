"""The dask engine on a 2-worker LocalCluster against the numba engine in one process.

For each workload (W3: the Gaussian-kernel gradient w.r.t. x, y, s; LJ: Lennard-Jones forces;
W2T: the gradient of sum(tanh(v_i - v_j))) it runs the gradient in this process on the numba
engine (on FUSEGRAD_THREADS threads, default all cores) and with ``fg.use_engine("dask")`` on a
LocalCluster of 2 worker processes with one thread each, on the same cores. Both are warmed
first at a small size that has the same kernels (compiled, or loaded from the disk cache), then
timed once at the full size (``--repeat`` for a median). It prints the times, their ratio, the
largest difference relative to the gradient's scale (W2T's gradient cancels to rounding noise:
its scale is the size of the sums that cancel), and per worker: its RSS after the warm-up (the
runtime: Python, distributed, numba and LLVM), its peak RSS during the timed call (``VmHWM``,
reset just before the call) and that peak less the shared libraries' pages (``RssFile``): the
worker's private memory. Last, the warm-up's time on the dask engine (the workers' first use:
loading numba and the kernels) and what each worker compiled or loaded from the disk cache.

    python benchmarks/bench_dask.py                      # W3 1e5, LJ 5e4, W2T 1e5 (minutes)
    python benchmarks/bench_dask.py --inputs dask        # inputs as Dask arrays on the workers
    python benchmarks/bench_dask.py --overhead           # W3 at small N: where dask stops costing
    python benchmarks/bench_dask.py --sizes 2000,8000 --workloads W3 --repeat 3

To run on a real cluster, start a dask.distributed scheduler and workers there
(``dask scheduler``; ``dask worker tcp://HOST:8786 --nthreads 1`` on each core with
FUSEGRAD_THREADS=1) and pass ``--scheduler tcp://HOST:8786``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import numpy as np

import fusegrad as fg
import fusegrad.lazy as fl


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


# the size of the warm-up call: a few tiles of the default size, so the same kernels
WARM = {"W3": 8000, "LJ": 6000, "W2T": 8000}


def rel_diff(name: str, args: tuple, got, want) -> float:
    """The largest difference of each gradient relative to its largest entry (for W2T, whose
    gradient cancels exactly, relative to the largest of the row sums that cancel)."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    out = 0.0
    for a, b in zip(got, want):
        diff = float(np.max(np.abs(np.asarray(a) - b)))
        if name == "W2T":
            v = args[0]
            rows = np.sum(1 / np.cosh(fl.asarray(v)[:, None] - v[None, :]) ** 2, 1)
            ref = float(np.max(fl.materialize(rows)))
        else:
            ref = float(np.max(np.abs(b)))
        out = max(out, diff / ref)
    return out


def stats() -> dict:
    """On a worker: the numba engine's counters (kernels compiled, loaded from the disk cache)."""
    from fusegrad.lazy.engines import numba_engine

    return dict(numba_engine.STATS)


def clear_peak() -> int:
    """On a worker: reset the peak RSS (VmHWM) and return the RSS now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def peak() -> tuple[int, int]:
    """On a worker: the peak RSS since ``clear_peak``, and that peak less the pages of mapped
    files (shared libraries: LLVM's alone is ~50 MB, shared by the workers of a machine), i.e.
    about the worker's private memory at its peak."""
    hwm = _status("VmHWM")
    return hwm, hwm - _status("RssFile")


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) << 10
    return 0


def timed(fun, args, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fun(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def as_dask(client, args, chunks):
    """The array arguments as Dask arrays persisted on the workers (chunks of ``chunks`` rows)."""
    import dask.array as da
    import distributed

    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            d = da.from_array(a, chunks=(chunks,) + a.shape[1:]).persist()
            distributed.wait(d)
            out.append(d)
        else:
            out.append(a)
    return tuple(out)


def run_case(client, name, n, repeat, inputs):
    fun, fargs = case(name, n)
    wfun, wargs = case(name, WARM[name])
    with fg.use_engine("numba"):
        wfun(*wargs)
        t_local, want = timed(fun, fargs, repeat)
    dargs = as_dask(client, fargs, -(-n // 8)) if inputs == "dask" else fargs
    s0 = client.run(stats)
    with fg.use_engine("dask"):
        t = time.perf_counter()
        wfun(*(as_dask(client, wargs, 1000) if inputs == "dask" else wargs))
        t_warm = time.perf_counter() - t
        floor = client.run(clear_peak)
        t_dask, got = timed(fun, dargs, repeat)
    high = client.run(peak)
    s1 = client.run(stats)
    got = tuple(np.asarray(g) for g in got) if isinstance(got, tuple) else np.asarray(got)
    rel = rel_diff(name, fargs, got, want)
    mem = ", ".join(
        f"{floor[w] / 2**20:.0f} / {high[w][0] / 2**20:.0f} ({high[w][1] / 2**20:.0f})"
        for w in sorted(high)
    )
    first = "; ".join(
        f"{s1[w]['compiled'] - s0[w]['compiled']} compiled, "
        f"{s1[w]['cache_hits'] - s0[w]['cache_hits']} from disk"
        for w in sorted(s1)
    )
    print(
        f"| {name} N={n:,} | {t_local:.3g} s | {t_dask:.3g} s | {t_dask / t_local:.2f}x "
        f"| {rel:.1e} | {mem} MiB | {t_warm:.2f} s ({first}) |",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workloads", default="W3,LJ,W2T")
    p.add_argument("--sizes", default=None, help="comma-separated N (default: W3/W2T 1e5, LJ 5e4)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--inputs", choices=("numpy", "dask"), default="numpy")
    p.add_argument("--overhead", action="store_true", help="W3 at N = 2000 ... 32000")
    p.add_argument("--scheduler", default=None, help="address of an existing scheduler")
    p.add_argument("--tile-engine", default="auto", help="FUSEGRAD_DASK_TILE_ENGINE of workers")
    args = p.parse_args()
    import distributed

    if args.scheduler:
        client = distributed.Client(args.scheduler)
    else:
        env = {
            "FUSEGRAD_THREADS": "1",
            "FUSEGRAD_EAGER_BELOW": "0",
            "FUSEGRAD_DASK_TILE_ENGINE": args.tile_engine,
        }
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, env=env
        )
        client = distributed.Client(cluster)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    workers = len(client.scheduler_info()["workers"])
    print(
        f"{now}; {workers} workers; inputs: {args.inputs}; tile engine: {args.tile_engine}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| case | numba, 1 process | dask, 2 workers | ratio | rel. diff "
        "| per worker: RSS after warm-up / peak in the call (private) "
        "| warm-up at small N (kernels) |"
    )
    print("|---|---:|---:|---:|---:|---|---|")
    defaults = {"W3": 100_000, "LJ": 50_000, "W2T": 100_000}
    names = ["W3"] if args.overhead else args.workloads.split(",")
    for name in names:
        if args.overhead:
            sizes = [2000, 4000, 8000, 16000, 32000]
        elif args.sizes:
            sizes = [int(float(s)) for s in args.sizes.split(",")]
        else:
            sizes = [defaults[name]]
        for n in sizes:
            run_case(client, name, n, args.repeat, args.inputs)
    client.close()


if __name__ == "__main__":
    os.environ.setdefault("FUSEGRAD_EAGER_BELOW", "0")
    main()

"""The dask engine on a 2-worker LocalCluster against the numba engine in one process.

For each workload (W3: the Gaussian-kernel gradient w.r.t. x, y, s; LJ: Lennard-Jones forces;
W2T: the gradient of sum(tanh(v_i - v_j))) it runs the gradient in this process on the numba
engine (on FUSEGRAD_THREADS threads, default all cores) and with ``fg.use_engine("dask")`` on a
LocalCluster of 2 worker processes with one thread each, on the same cores. Both are warmed
first at a small size that has the same kernels (compiled, or loaded from the disk cache), then
timed ``--repeat`` times, alternating (numba, dask, numba, dask: a load change on the shared
machine hits both sides alike). It prints median wall times and CPU times (for dask: the
workers' and this process's, and that of the tiles alone: distributed's event loops, heartbeats
and profiler cost CPU in proportion to wall time, ~4% of a core per process at load 13), their
ratios, the largest difference relative to the gradient's
scale (W2T's gradient cancels to rounding noise: its scale is the size of the sums that cancel),
and per worker its memory after the warm-up (the runtime: Python, distributed, numba and LLVM)
and its peak during the timed calls, as RSS (every resident page, shared libraries included;
the kernel's exact high-water mark), PSS (shared pages divided among the processes that map
them: the worker's share of the machine) and private memory (pages no other process maps);
PSS and private are sampled every 0.1 s. Last, the warm-up's time on the dask engine (the
workers' first use: loading numba and the kernels) and what each worker compiled or loaded from
the disk cache.

    python benchmarks/bench_dask.py                      # W3 1e5, LJ 5e4, W2T 1e5 (minutes)
    python benchmarks/bench_dask.py --inputs dask        # inputs as Dask arrays on the workers
    python benchmarks/bench_dask.py --overhead           # W3 at small N: where dask stops costing
    python benchmarks/bench_dask.py --stages             # where a worker's memory goes
    python benchmarks/bench_dask.py --sizes 2000,8000 --workloads W3 --repeat 3

``--overhead`` times W3 at N = 2000 ... 32000 on numba in this process with 2 threads and with 1
(what one worker's core does alone) and on the dask engine, alternating, and prints the ratios:
dask is worth its overhead from the N where it beats one core, and costs under 1.3x the same
cores in one process from the N where that ratio drops below 1.3. ``--stages`` starts fresh
workers and prints each one's memory after each step of its first use (distributed alone,
``import fusegrad``, numba, the kernels loaded by the warm-up) and the files its resident
memory is in.

To run on a real cluster, start a dask.distributed scheduler and workers there
(``dask scheduler``; ``dask worker tcp://HOST:8786 --nthreads 1`` on each core with
FUSEGRAD_THREADS=1) and pass ``--scheduler tcp://HOST:8786``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import _rss
import numpy as np

import fusegrad as fg
import fusegrad.lazy as fl

MIB = 2**20


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


# On the workers (functions of this script are sent by value; so is _rss, registered below)


def stats() -> dict:
    """The numba engine's counters (kernels compiled, loaded from the disk cache)."""
    from fusegrad.lazy.engines import numba_engine

    return dict(numba_engine.STATS)


def memory() -> dict:
    """This process's RSS, PSS, private and anonymous bytes, and its pid."""
    return {**_rss.smaps(), "pid": os.getpid()}


def start_sampler(dask_worker) -> dict:
    """Start polling this worker's memory (``_rss.PeakSampler``); returns the memory now."""
    dask_worker._fusegrad_sampler = _rss.PeakSampler(0.1).start()
    return _rss.smaps()


def stop_sampler(dask_worker) -> dict:
    """The worker's peak memory since ``start_sampler``."""
    return dask_worker._fusegrad_sampler.stop()


def cpu_seconds() -> tuple[float, float]:
    """CPU time of this process (every thread: tiles, and distributed's event loop, heartbeats
    and profiler, which cost in proportion to wall time), and of the tiles run here so far
    (their task threads' CPU time, counted by ``count_tile_cpu``)."""
    from fusegrad.lazy.engines import dask_engine

    return time.process_time(), getattr(dask_engine, "tile_cpu_seconds", 0.0)


def count_tile_cpu() -> None:
    """Wrap this worker's ``dask_engine.run_tile`` (tasks find it by name) to add up the CPU
    time of the threads that run tiles."""
    from fusegrad.lazy.engines import dask_engine

    if hasattr(dask_engine, "tile_cpu_seconds"):
        return
    dask_engine.tile_cpu_seconds = 0.0
    run_tile = dask_engine.run_tile

    def counted(*args):
        start = time.thread_time()
        try:
            return run_tile(*args)
        finally:
            dask_engine.tile_cpu_seconds += time.thread_time() - start

    dask_engine.run_tile = counted


def import_fusegrad() -> dict:
    import fusegrad  # noqa: F401

    return _rss.smaps()


def load_numba() -> dict:
    from fusegrad.lazy.engines import numba_engine

    numba_engine.available()
    return _rss.smaps()


def mappings() -> list:
    return _rss.by_mapping(top=10)


# On this process


def timed(fun, args):
    t, c = time.perf_counter(), time.process_time()
    out = fun(*args)
    return time.perf_counter() - t, time.process_time() - c, out


def timed_on_cluster(client, fun, args):
    """Wall time, CPU time (the workers' and this process's, which hosts a LocalCluster's
    scheduler), CPU time in tiles, and result of ``fun(*args)``."""
    client.run(count_tile_cpu)
    before = client.run(cpu_seconds)
    wall, cpu, out = timed(fun, args)
    after = client.run(cpu_seconds)
    cpu += sum(after[w][0] - before[w][0] for w in after)
    tiles = sum(after[w][1] - before[w][1] for w in after)
    return wall, cpu, tiles, out


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


def mib(fields: dict) -> str:
    return "/".join(f"{fields[k] / MIB:.0f}" for k in ("Rss", "Pss", "Private"))


def run_case(client, name, n, repeat, inputs):
    fun, fargs = case(name, n)
    wfun, wargs = case(name, WARM[name])
    with fg.use_engine("numba"):
        wfun(*wargs)
    dargs = as_dask(client, fargs, -(-n // 8)) if inputs == "dask" else fargs
    s0 = client.run(stats)
    with fg.use_engine("dask"):
        t = time.perf_counter()
        wfun(*(as_dask(client, wargs, 1000) if inputs == "dask" else wargs))
        t_warm = time.perf_counter() - t
    floor = client.run(start_sampler)
    local, remote = [], []
    for _ in range(repeat):
        with fg.use_engine("numba"):
            *tc, want = timed(fun, fargs)
            local.append(tc)
        with fg.use_engine("dask"):
            *tc, got = timed_on_cluster(client, fun, dargs)
            remote.append(tc)
    high = client.run(stop_sampler)
    s1 = client.run(stats)
    got = tuple(np.asarray(g) for g in got) if isinstance(got, tuple) else np.asarray(got)
    rel = rel_diff(name, fargs, got, want)
    t_local, c_local = (statistics.median(col) for col in zip(*local))
    t_dask, c_dask, c_tiles = (statistics.median(col) for col in zip(*remote))
    mem = "; ".join(
        f"{mib(floor[w])} → {mib(high[w])} (+{(high[w]['Rss'] - floor[w]['Rss']) / MIB:.0f})"
        for w in sorted(high)
    )
    first = "; ".join(
        f"{s1[w]['compiled'] - s0[w]['compiled']} compiled, "
        f"{s1[w]['cache_hits'] - s0[w]['cache_hits']} from disk"
        for w in sorted(s1)
    )
    print(
        f"| {name} N={n:,} | {t_local:.3g} s ({c_local:.3g}) "
        f"| {t_dask:.3g} s ({c_dask:.3g}; {c_tiles:.3g}) "
        f"| {t_dask / t_local:.2f}x ({c_dask / c_local:.2f}x; {c_tiles / c_local:.2f}x) "
        f"| {rel:.1e} | {mem} MiB "
        f"| {t_warm:.2f} s ({first}) | {os.getloadavg()[0]:.1f} |",
        flush=True,
    )


def run_overhead(client, sizes, repeat):
    """W3 at small N: numba on 2 threads and on 1, the dask engine; medians of alternated runs."""
    print(
        "| N | numba, 2 threads | numba, 1 thread | dask, 2 workers | dask ÷ 2 threads "
        "| dask ÷ 1 thread | tiles | load |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    wfun, wargs = case("W3", WARM["W3"])
    with fg.use_engine("numba"):
        wfun(*wargs)
    with fg.use_engine("dask"):
        wfun(*wargs)
    for n in sizes:
        fun, args = case("W3", n)
        runs: dict[str, list[float]] = {"2": [], "1": [], "dask": []}
        for _ in range(repeat):
            for key in runs:
                engine = "dask" if key == "dask" else "numba"
                old = os.environ.get("FUSEGRAD_THREADS")
                if key != "dask":
                    os.environ["FUSEGRAD_THREADS"] = key
                try:
                    with fg.use_engine(engine):
                        runs[key].append(timed(fun, args)[0])
                finally:
                    if old is None:
                        os.environ.pop("FUSEGRAD_THREADS", None)
                    else:
                        os.environ["FUSEGRAD_THREADS"] = old
        two, one, dk = (statistics.median(runs[k]) for k in ("2", "1", "dask"))
        count = tile_count(n)
        print(
            f"| {n:,} | {two * 1e3:.0f} ms | {one * 1e3:.0f} ms | {dk * 1e3:.0f} ms "
            f"| {dk / two:.2f}x | {dk / one:.2f}x | {count} | {os.getloadavg()[0]:.1f} |",
            flush=True,
        )


def tile_count(n: int) -> int:
    """Tiles of W3's N×N kernels on the dask engine (1: it runs in this process)."""
    from fusegrad.lazy.engines import dask_engine
    from fusegrad.lazy.kernel import Kernel

    k = Kernel((n, n), (), (), (), ())
    return int(np.prod([len(b) for b in dask_engine.grid(k)]))


def run_stages(client):
    """Each fresh worker's memory after each step of its first use, and where it lies."""
    rows = [("distributed worker, idle", client.run(memory))]
    rows.append(("+ import fusegrad", client.run(import_fusegrad)))
    if os.environ.get("FUSEGRAD_DASK_TILE_ENGINE") != "numpy":
        rows.append(("+ numba and numba_math", client.run(load_numba)))
    wfun, wargs = case("W3", WARM["W3"])
    with fg.use_engine("dask"):
        wfun(*wargs)
    rows.append(("+ W3 warm-up (kernels from disk)", client.run(memory)))
    try:
        nannies = client.run(memory, nanny=True)
    except Exception:  # workers without a nanny
        nannies = {}
    print("| step | " + " | ".join(f"worker {i}: RSS/PSS/private/anon MiB" for i in range(2)))
    print("|---|---|---|")
    for label, m in rows:
        cells = " | ".join(f"{mib(m[w])}/{m[w]['Anonymous'] / MIB:.0f}" for w in sorted(m))
        print(f"| {label} | {cells} |")
    if nannies and os.getpid() not in {m["pid"] for m in nannies.values()}:
        cells = " | ".join(
            f"{mib(nannies[w])}/{nannies[w]['Anonymous'] / MIB:.0f}" for w in sorted(nannies)
        )
        print(f"| (its nanny, a process of its own) | {cells} |")
    for w, rows_ in sorted(client.run(mappings).items())[:1]:
        print(f"\nresident memory of worker {w} by file (RSS / PSS MiB):")
        for name, rss, pss in rows_:
            print(f"  {name:48s} {rss / MIB:6.1f} / {pss / MIB:6.1f}")
    mods = client.run(lambda: sorted({m.split(".")[0] for m in sys.modules}))
    first = next(iter(mods.values()))
    heavy = [
        m for m in ("scipy", "numba", "llvmlite", "dask", "pandas", "matplotlib") if m in first
    ]
    print(f"\ntop-level packages on a worker after the warm-up include: {', '.join(heavy)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workloads", default="W3,LJ,W2T")
    p.add_argument("--sizes", default=None, help="comma-separated N (default: W3/W2T 1e5, LJ 5e4)")
    p.add_argument("--repeat", type=int, default=None, help="alternated runs (default 1; 5 small)")
    p.add_argument("--inputs", choices=("numpy", "dask"), default="numpy")
    p.add_argument("--overhead", action="store_true", help="W3 at N = 2000 ... 32000")
    p.add_argument("--stages", action="store_true", help="a worker's memory step by step")
    p.add_argument("--cli-workers", action="store_true", help="workers by `dask worker`")
    p.add_argument("--scheduler", default=None, help="address of an existing scheduler")
    p.add_argument("--tile-engine", default="auto", help="FUSEGRAD_DASK_TILE_ENGINE of workers")
    args = p.parse_args()
    import cloudpickle
    import distributed

    os.environ["FUSEGRAD_DASK_TILE_ENGINE"] = args.tile_engine  # tiles on the threaded scheduler

    cloudpickle.register_pickle_by_value(_rss)  # the workers need not find benchmarks/
    env = {
        "FUSEGRAD_THREADS": "1",
        "FUSEGRAD_EAGER_BELOW": "0",
        "FUSEGRAD_DASK_TILE_ENGINE": args.tile_engine,
    }
    workers_cli = None
    if args.scheduler:
        client = distributed.Client(args.scheduler)
    elif args.stages or args.cli_workers:
        # a LocalCluster's worker processes import this script first (multiprocessing's spawn
        # runs the parent's main module), i.e. fusegrad: `dask worker` processes, as on a real
        # cluster, start with distributed alone
        cluster = distributed.LocalCluster(
            n_workers=0, processes=False, protocol="tcp", dashboard_address=None
        )
        workers_cli = subprocess.Popen(
            ["dask", "worker", cluster.scheduler_address, "--nworkers", "2", "--nthreads", "1"]
            + ["--no-dashboard"],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = distributed.Client(cluster)
        client.wait_for_workers(2, timeout=120)
    else:
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None, env=env
        )
        client = distributed.Client(cluster)
    try:
        run(args, client)
    finally:
        client.close()
        if workers_cli is not None:
            workers_cli.terminate()
            workers_cli.wait(60)


def run(args, client) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    workers = len(client.scheduler_info()["workers"])
    print(
        f"{now}; {workers} workers; inputs: {args.inputs}; tile engine: {args.tile_engine}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    if args.stages:
        run_stages(client)
        print()
    if args.overhead:
        sizes = [
            int(float(s))
            for s in (args.sizes or "2000,4000,6000,8000,12000,16000,32000").split(",")
        ]
        run_overhead(client, sizes, args.repeat or 5)
        return
    print(
        "| case | numba, 1 process: wall (CPU) | dask, 2 workers: wall (CPU; in tiles) "
        "| ratio (CPU; in tiles) "
        "| rel. diff | per worker: RSS/PSS/private after warm-up → peak in the calls (+RSS) "
        "| warm-up at small N (kernels) | load |"
    )
    print("|---|---:|---:|---:|---:|---|---|---:|")
    defaults = {"W3": 100_000, "LJ": 50_000, "W2T": 100_000}
    for name in args.workloads.split(","):
        sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else [defaults[name]]
        for n in sizes:
            run_case(client, name, n, args.repeat or 1, args.inputs)


if __name__ == "__main__":
    os.environ.setdefault("FUSEGRAD_EAGER_BELOW", "0")
    main()

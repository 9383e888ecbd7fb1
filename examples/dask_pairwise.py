"""The Gaussian-kernel gradient of N = 20,000 points on a Dask cluster, with the same NumPy code.

``loss`` is plain broadcast NumPy: all N×N pair differences, a Gaussian kernel, the sum. Under
``fg.use_engine("dask")`` fusegrad cuts each fused kernel's N×N domain into tiles, runs every tile
as a compiled kernel in a Dask task, and combines the tiles' partial sums in a tree of tasks: the
gradients w.r.t. x, y and the bandwidth s come back as NumPy arrays, each worker holding O(N +
tile) memory, never an N×N array.

By default the script starts a LocalCluster of 2 worker processes (one thread each, with
``FUSEGRAD_THREADS=1`` so that a worker's kernels do not also spread over the cores), runs the
gradient there and in this process on the default engine, and checks that they agree. To run on
a real cluster, start a scheduler and workers (``dask scheduler`` on one machine, then
``FUSEGRAD_THREADS=1 dask worker tcp://HOST:8786 --nthreads 1 --nworkers N`` on each) with
fusegrad installed on every machine, and pass ``--scheduler tcp://HOST:8786``; any
``dask.distributed.Client`` active in the process is used the same way.

With ``--dask-inputs`` the points are Dask arrays, persisted on the workers before the call:
each tile's task then reads the chunks it needs where they are (the client never gathers them),
and the gradients w.r.t. x and y come back as Dask arrays with the same chunks.

Run::

    python examples/dask_pairwise.py               # N = 20,000 (4 × 10^8 pairs), local cluster
    python examples/dask_pairwise.py --dask-inputs # the points as Dask arrays on the workers
    python examples/dask_pairwise.py --n 100000 --scheduler tcp://HOST:8786
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusegrad as fg


def loss(x, y, s):
    """The sum of a Gaussian kernel over all pairs (x_i, y_j)."""
    return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


def main(
    n: int = 20_000, scheduler: str | None = None, verbose: bool = True, dask_inputs: bool = False
) -> dict:
    """Gradients of ``loss`` on the cluster and locally; returns both, the times and ``ok``."""
    import dask.array as da
    import distributed

    rng = np.random.default_rng(0)
    x, y, s = rng.standard_normal(n), rng.standard_normal(n) + 0.5, 0.8
    grad = fg.grad(loss, argnums=(0, 1, 2))

    if scheduler:
        client = distributed.Client(scheduler)
        cluster = None
    else:
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=None,
            env={"FUSEGRAD_THREADS": "1"},
        )
        client = distributed.Client(cluster)
    try:
        t = time.perf_counter()
        local = grad(x, y, s)
        t_local = time.perf_counter() - t
        args = (x, y, s)
        if dask_inputs:
            args = (da.from_array(x, chunks=n // 4).persist(), da.from_array(y, chunks=n // 4), s)
        t = time.perf_counter()
        with fg.use_engine("dask"):
            remote = grad(*args)
        t_dask = time.perf_counter() - t
        if dask_inputs:
            remote = tuple(np.asarray(g) for g in remote)  # Dask arrays: gather to compare
        workers = len(client.scheduler_info()["workers"])
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    err = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(remote, local))
    ok = err < 1e-12
    if verbose:
        print(f"N = {n:,} ({n * n:.1e} pairs), {workers} Dask workers")
        print(f"  this process, default engine: {t_local:.2f} s")
        print(f"  dask engine (first call compiles on each worker): {t_dask:.2f} s")
        print(f"  largest relative difference: {err:.1e}  {'ok' if ok else 'MISMATCH'}")
    return {"local": local, "dask": remote, "rel_err": err, "ok": ok}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=20_000, help="points per side (default 20,000)")
    p.add_argument("--scheduler", default=None, help="address of a running dask scheduler")
    p.add_argument("--dask-inputs", action="store_true", help="x and y as Dask arrays")
    a = p.parse_args()
    raise SystemExit(0 if main(a.n, a.scheduler, dask_inputs=a.dask_inputs)["ok"] else 1)

"""CPU time of one gradient call on ordinary programs (issue 16), side by side with peers and
with another source tree of fusegrad.

Run::

    python benchmarks/bench_ordinary.py                       # W1 n=1000, the MLPs, the RNN
    python benchmarks/bench_ordinary.py --cases MLP:256 --rounds 5
    python benchmarks/bench_ordinary.py --old /path/to/old/src   # before/after, alternated

Each (tree, case) runs in a fresh process; trees alternate case by case, so a loaded machine
slows both alike. A call's time is CPU time (``time.process_time``: time waiting for a core on
a shared machine is not counted), the best of 9 batches after 12 warm-up calls (so kernels in a
loop are hot, ``registry.HOT_CALLS``); the table gives the median over rounds. BLAS and XLA run
one thread (CPU time sums threads). ``python -m fusegrad.bench`` is the benchmark of record
(wall time, every thread); this one is for comparing trees on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time, timeit, warnings
os.environ["JAX_ENABLE_X64"] = "1"
import numpy as np
from fusegrad.bench import workloads as W

def best(f):
    for _ in range(12):
        f()
    t = timeit.Timer(f, timer=time.process_time)
    n, _ = t.autorange()
    return min(t.repeat(9, max(1, n // 5))) / max(1, n // 5)

lib, case = sys.argv[1], sys.argv[2]
name, n = case.split(":")
wl = W.WORKLOADS[name]
args = wl.make_inputs(int(n))
if lib in ("fusegrad", "fusegrad-jit"):
    import fusegrad as fg
    g = fg.grad(lambda *a: wl.fun(np, *a), wl.argnums)
    if lib == "fusegrad-jit":
        warnings.simplefilter("ignore")
        g = fg.jit(g)
    t = best(lambda: g(*args))
elif lib == "autograd":
    import autograd, autograd.numpy as anp
    g = autograd.grad(lambda *a: wl.fun(anp, *a), wl.argnums)
    t = best(lambda: g(*args))
else:
    import jax, jax.numpy as jnp
    jargs = [jnp.asarray(a) for a in args]
    g = jax.jit(jax.grad(lambda *a: wl.fun(jnp, *a), wl.argnums))
    t = best(lambda: jax.block_until_ready(g(*jargs)))
print(json.dumps(t))
"""

CASES = "W1:1000,MLP:32,MLP:256,MLP:4096,RNN:100"
PEERS = ("autograd", "jax-jit")


def run(lib: str, case: str, src: str | None) -> float | None:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in [src, env.get("PYTHONPATH", "")] if p)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, lib, case], env=env, capture_output=True, text=True
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        print(
            f"  {lib} {case} ({src or 'installed'}) failed: {proc.stderr[-300:]}", file=sys.stderr
        )
        return None
    return float(json.loads(lines[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES, help=f"NAME:SIZE[,...] (default {CASES})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", help="another fusegrad source folder (its src/) to compare")
    ap.add_argument("--no-peers", action="store_true", help="fusegrad only")
    opts = ap.parse_args()
    trees = {"new": None} if not opts.old else {"old": opts.old, "new": None}
    libs = ["fusegrad", "fusegrad-jit"]
    times: dict[tuple, list[float]] = {}
    cases = opts.cases.split(",")
    for r in range(opts.rounds):
        for case in cases:
            for tree, src in trees.items():
                for lib in libs:
                    t = run(lib, case, src)
                    if t is not None:
                        times.setdefault((tree, lib, case), []).append(t)
            if not opts.no_peers and r == 0:
                for peer in PEERS:
                    t = run(peer, case, None)
                    if t is not None:
                        times.setdefault(("peer", peer, case), []).append(t)
        print(f"round {r + 1} done", file=sys.stderr, flush=True)

    def med(key):
        v = times.get(key)
        return statistics.median(v) if v else None

    def us(t):
        return "–" if t is None else f"{t * 1e6:,.0f} µs" if t < 1e-2 else f"{t * 1e3:.1f} ms"

    head = "| case | tree | grad | jit | grad ÷ autograd | jit ÷ jax.jit |"
    print(head + "\n|---|---|---:|---:|---:|---:|")
    for case in cases:
        ag, jj = med(("peer", "autograd", case)), med(("peer", "jax-jit", case))
        for tree in trees:
            g, j = med((tree, "fusegrad", case)), med((tree, "fusegrad-jit", case))
            rg = f"{g / ag:.2f}×" if g and ag else "–"
            rj = f"{j / jj:.2f}×" if j and jj else "–"
            print(f"| {case} | {tree} | {us(g)} | {us(j)} | {rg} | {rj} |")
        print(f"| {case} | peers | autograd {us(ag)} | jax.jit {us(jj)} | | |")


if __name__ == "__main__":
    main()

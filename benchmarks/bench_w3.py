"""W3 side by side: fusegrad.grad against jax.jit(jax.grad), stock and huge-page malloc.

W3 is ``sum(exp(-(x[:, None] - y[None, :])**2 / (2*s**2)))``, its gradient w.r.t. x, y and s
(issue 16's target: at N=4000 and 8000, fusegrad at most 0.6x jax.jit in jax.jit's faster
allocator). Every case runs in a fresh child process (two warm-up calls, then ``--reps`` timed
calls and one call whose extra peak RSS is measured); the cases of a round run one after the
other (A B A B ...) and rounds repeat, so load on a shared machine hits every case alike. Each
case's time is the median of all its calls over the rounds; each library keeps its faster
allocator, and the ratio divides fusegrad's by jax.jit's (also in CPU time, all threads, which
other processes on a loaded machine disturb less than the wall clock)::

    python benchmarks/bench_w3.py                      # N=4000,8000, 3 rounds of 3 calls
    python benchmarks/bench_w3.py --sizes 4000 --rounds 4 --libs fusegrad

The tuned allocator is the main job's (``fusegrad.bench.runner.THP_ENV``: glibc's huge-page
malloc, freed memory kept mapped), as ``python -m fusegrad.bench --malloc``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from fusegrad.bench.runner import THP_ENV

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LIBS = ("fusegrad", "jax-jit")


def _inputs(n: int):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal(n), rng.standard_normal(n), np.float64(1.3)


def _make(lib: str):
    """The gradient function of W3 (w.r.t. x, y, s) for ``lib``."""
    import numpy as np

    if lib == "fusegrad":
        import fusegrad as fg

        def f(x, y, s):
            return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))

        g = fg.grad(f, argnums=(0, 1, 2))
        return g
    if lib == "jax-jit":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def fj(x, y, s):
            return jnp.sum(jnp.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))

        gj = jax.jit(jax.grad(fj, argnums=(0, 1, 2)))

        def call(x, y, s):
            return jax.block_until_ready(gj(x, y, s))

        return call
    raise SystemExit(f"unknown library {lib!r}: pick one of {', '.join(LIBS)}")


def child(lib: str, n: int, reps: int) -> None:
    from _rss import _status

    g = _make(lib)
    x, y, s = _inputs(n)
    g(x, y, s)
    g(x, y, s)
    times, cpu = [], []
    for _ in range(reps):
        c = time.process_time()
        t = time.perf_counter()
        g(x, y, s)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak-RSS mark: the next call's own peak
    r = g(x, y, s)
    extra = _status("VmHWM") - before
    del r
    print(json.dumps({"times": times, "cpu": cpu, "extra": extra}))


def run_case(lib: str, n: int, reps: int, thp: bool) -> dict:
    env = dict(os.environ)
    if thp:
        env.update(THP_ENV)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", lib, str(n), str(reps)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"{lib} n={n} thp={thp} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ms(t: float) -> str:
    return f"{t * 1e3:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--child", nargs=3, metavar=("LIB", "N", "REPS"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="4000,8000", help="N values (default 4000,8000)")
    ap.add_argument("--libs", default=",".join(LIBS), help="fusegrad,jax-jit (default both)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--reps", type=int, default=3, help="timed calls per child (default 3)")
    ap.add_argument("--malloc", choices=("both", "stock", "thp"), default="both")
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(a.child[1]), int(a.child[2]))
        return
    sizes = [int(v) for v in a.sizes.split(",")]
    libs = a.libs.split(",")
    modes = {"both": (False, True), "stock": (False,), "thp": (True,)}[a.malloc]
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    times: dict = {}
    cpu: dict = {}
    extra: dict = {}
    for r in range(a.rounds):
        for n in sizes:
            for lib in libs:
                for thp in modes:
                    res = run_case(lib, n, a.reps, thp)
                    times.setdefault((lib, n, thp), []).extend(res["times"])
                    cpu.setdefault((lib, n, thp), []).extend(res["cpu"])
                    extra.setdefault((lib, n, thp), []).append(res["extra"])
        print(f"round {r + 1}/{a.rounds} done, load {os.getloadavg()[0]:.2f}", flush=True)
    print()
    print("| N | lib | malloc | median | min | CPU time (median) | calls | extra peak RSS |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    best: dict = {}
    best_cpu: dict = {}
    for n in sizes:
        for lib in libs:
            for thp in modes:
                ts = times[(lib, n, thp)]
                med = statistics.median(ts)
                mem = statistics.median(extra[(lib, n, thp)]) / 2**20
                tag = "huge pages" if thp else "stock"
                cmed = statistics.median(cpu[(lib, n, thp)])
                print(
                    f"| {n} | {lib} | {tag} | {_ms(med)} | {_ms(min(ts))} | {_ms(cmed)} "
                    f"| {len(ts)} | {mem:.2f} MiB |"
                )
                if (lib, n) not in best or med < best[(lib, n)][0]:
                    best[(lib, n)] = (med, tag)
                if (lib, n) not in best_cpu or cmed < best_cpu[(lib, n)]:
                    best_cpu[(lib, n)] = cmed
    if "fusegrad" in libs and "jax-jit" in libs:
        print()
        for n in sizes:
            f, fm = best[("fusegrad", n)]
            j, jm = best[("jax-jit", n)]
            print(f"N={n}: fusegrad {_ms(f)} ({fm}) / jax-jit {_ms(j)} ({jm}) = {f / j:.3f}x")
            fc, jc = best_cpu[("fusegrad", n)], best_cpu[("jax-jit", n)]
            # CPU time (all threads) is less sensitive to other processes on a shared machine
            print(f"N={n}: CPU time {_ms(fc)} / {_ms(jc)} = {fc / jc:.3f}x")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Issue 8's targets: hvp of the Gaussian kernel sum vs one gradient, side by side in one run.

    python benchmarks/bench_hvp.py [--n 8000] [--reps 7] [--libs ...] [--no-mem]

Workload (float64): ``f(x) = sum(exp(-(x[:, None] - x[None, :])**2))``, N = 8000; ``grad`` is
``grad(f)(x)``, ``hvp`` is ``hvp(f, (x,), (v,))`` (forward-over-reverse: the jvp of ``grad(f)``).

Libraries: fusegrad on each engine (numpy, numba, auto) and, when installed, ``jax.jit`` of
``jax.grad`` and of ``jax.jvp(jax.grad(f))`` (x64 on; compile excluded) for reference.

Time: one process, every (library, op) pair interleaved round by round, the median of ``--reps``
rounds; ``hvp/grad`` is the ratio of the two medians of one library in this run.
Memory: each (library, op) in a fresh subprocess: after two warm-up calls the peak RSS high-water
mark is reset (``/proc/self/clear_refs``) and ``extra`` is the peak RSS of one call above the RSS
before it (``MALLOC_MMAP_THRESHOLD_`` pinned so that freed large blocks return to the OS).

Targets (issue 8): hvp extra peak RSS < 64 MB; hvp time <= 4x one gradient.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from _rss import extra_peak_in_child, report_extra_peak

LIBS = ["fusegrad-numpy", "fusegrad-numba", "fusegrad-auto", "jax-jit"]
OPS = ["grad", "hvp"]
MB = 1 << 20


def function(xp):
    return lambda x: xp.sum(xp.exp(-((x[:, None] - x[None, :]) ** 2)))


def inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    return rng.standard_normal(n), rng.standard_normal(n)


def build(lib: str, op: str, n: int):
    """A zero-argument callable computing ``op`` with ``lib``."""
    x, v = inputs(n)
    if lib.startswith("fusegrad"):
        import fusegrad as fg

        engine = lib.split("-")[1]
        f = function(np)
        g = fg.grad(f)

        def call():
            with fg.use_engine(engine):
                return g(x) if op == "grad" else fg.hvp(f, (x,), (v,))

        return call
    if lib == "jax-jit":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        f = function(jnp)
        if op == "grad":
            fn = jax.jit(jax.grad(f))
        else:
            fn = jax.jit(lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1])
        jx, jv = jnp.asarray(x), jnp.asarray(v)
        if op == "grad":
            return lambda: jax.block_until_ready(fn(jx))
        return lambda: jax.block_until_ready(fn(jx, jv))
    raise ValueError(lib)


def child(lib: str, op: str, n: int) -> None:
    call = build(lib, op, n)
    report_extra_peak(call)


def memory(lib: str, op: str, n: int) -> float | None:
    return extra_peak_in_child(__file__, ["--n", str(n), "--child", lib, op], f"{lib} {op}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--no-mem", action="store_true")
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], a.n)
        return
    if a.reps < 5:
        ap.error("--reps must be at least 5 (the median of >= 5 rounds)")
    libs = a.libs.split(",")
    calls = {}
    for lib in libs:
        for op in OPS:
            try:
                calls[lib, op] = build(lib, op, a.n)
                calls[lib, op]()  # warm-up: compilation excluded
                calls[lib, op]()
            except ImportError as e:
                print(f"skip {lib}: {e}", file=sys.stderr)
                break
    # Check the hvp against jax (or against a blocked hand-written reference) before timing.
    x, v = inputs(a.n)
    ref = _reference_hvp(x, v)
    for (lib, op), call in calls.items():
        if op == "hvp":
            err = float(np.max(np.abs(np.asarray(call()) - ref)) / np.max(np.abs(ref)))
            if err > 1e-8:
                print(
                    f"WARNING: {lib} hvp differs from the reference by {err:.2e}", file=sys.stderr
                )
    times: dict = {k: [] for k in calls}
    for _ in range(a.reps):  # interleaved rounds
        for k, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"hvp of sum(exp(-(x[:, None] - x[None, :])**2)), N = {a.n}, float64")
    print(f"{'library':<16}{'op':<6}{'median ms':>11}{'hvp/grad':>10}{'extra RSS MB':>14}  target")
    for lib in libs:
        for op in OPS:
            if (lib, op) not in med:
                continue
            t = med[lib, op]
            ratio = t / med[lib, "grad"] if op == "hvp" else float("nan")
            extra = None if a.no_mem else memory(lib, op, a.n)
            xs = "-" if extra is None else f"{extra / MB:.1f}"
            verdict = ""
            if lib.startswith("fusegrad") and op == "hvp":
                ok = ratio <= 4.0 and (extra is None or extra < 64 * MB)
                verdict = f"{'PASS' if ok else 'MISS'} (<=4x grad, <64 MB)"
            rs = "" if np.isnan(ratio) else f"{ratio:.2f}"
            print(f"{lib:<16}{op:<6}{t * 1e3:>11.1f}{rs:>10}{xs:>14}  {verdict}")
    print(
        f"(reps={a.reps}, median; {os.cpu_count()} cores; an N x N float64 array is "
        f"{a.n * a.n * 8 / MB:.0f} MB)"
    )


def _reference_hvp(x: np.ndarray, v: np.ndarray, block: int = 500) -> np.ndarray:
    """(Hv)_k = Σ_j (8 d² - 4) exp(-d²) (v_k - v_j), d = x_k - x_j, in row blocks."""
    out = np.empty_like(x)
    for i in range(0, x.size, block):
        d = x[i : i + block, None] - x[None, :]
        out[i : i + block] = np.sum(
            (8 * d**2 - 4) * np.exp(-(d**2)) * (v[i : i + block, None] - v[None, :]), axis=1
        )
    return out


if __name__ == "__main__":
    main()

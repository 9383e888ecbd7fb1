"""Issue-3 targets for the lazy IR, side by side with NumPy eager, in one run.

Run: ``python benchmarks/bench_lazy.py [--repeat 5] [--engines numpy,numba] [--sweep]``

1. Row sum ``sum(tanh(d) * exp(-d**2), axis=1)``, ``d = x[:, None] - y``, N=8000: time ratio to
   NumPy eager (target <= 0.3) and extra peak memory (target < 16 MB).
2. A 6-op elementwise chain on 10^7 float64: time ratio (target <= 0.7), output allocations
   (target: one).
3. Sum of 10^7 float64 with a large dynamic range: error against ``math.fsum``, lazy vs NumPy
   (target: within 10x NumPy's own).

Timings are interleaved (lazy, eager, lazy, eager, ...) and the median is reported, since the
machine is shared. Lazy nodes are hash-consed and cache their value, so every timed iteration
rebuilds the expression from ``fl.asarray`` and drops every node reference afterwards.
Memory is measured in separate, untimed runs (``tracemalloc`` slows Python down).

``--sweep`` times ``numpy_blocked.TARGET`` from 2^14 to 2^18 on the row sum and the chain.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

import fusegrad.lazy as fl
from fusegrad.lazy.engines import numpy_blocked
from fusegrad.memory import track_allocations

MB = 1 << 20


def row_sum_lazy(xa: np.ndarray, ya: np.ndarray) -> np.ndarray:
    x, y = fl.asarray(xa), fl.asarray(ya)
    d = x[:, None] - y[None, :]
    return fl.materialize(np.sum(np.tanh(d) * np.exp(-(d**2)), axis=1))


def row_sum_eager(xa: np.ndarray, ya: np.ndarray) -> np.ndarray:
    d = xa[:, None] - ya[None, :]
    return np.sum(np.tanh(d) * np.exp(-(d**2)), axis=1)


def chain_lazy(a: np.ndarray) -> np.ndarray:
    x = fl.asarray(a)
    return fl.materialize(np.exp(np.sin(x) * 2.0 + x) / (1.0 + x * x))


def chain_eager(a: np.ndarray) -> np.ndarray:
    return np.exp(np.sin(a) * 2.0 + a) / (1.0 + a * a)


def timed(fn: Callable, *args) -> float:
    gc.collect()
    t = time.perf_counter()
    out = fn(*args)
    dt = time.perf_counter() - t
    del out
    return dt


def interleaved(cases: dict[str, Callable], args: tuple, repeat: int) -> dict[str, float]:
    """Median seconds of each case, run round-robin ``repeat`` times after one warm-up each."""
    for fn in cases.values():
        fn(*args)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeat):
        for k, fn in cases.items():
            times[k].append(timed(fn, *args))
    return {k: statistics.median(v) for k, v in times.items()}


def with_engine(engine: str, fn: Callable) -> Callable:
    def run(*args):
        with fl.use_engine(engine):
            return fn(*args)

    return run


def memory(fn: Callable, *args) -> tuple[int, int, int]:
    """(peak bytes, allocations alive at the end, their bytes) of one call."""
    gc.collect()
    with track_allocations() as rep:
        out = fn(*args)
    del out
    return rep.peak_bytes, rep.count, rep.total_bytes


def bench_row_sum(engines: list[str], repeat: int, n: int = 8000) -> None:
    g = np.random.default_rng(0)
    xa, ya = g.random(n), g.random(n)
    cases = {f"lazy[{e}]": with_engine(e, row_sum_lazy) for e in engines}
    cases["numpy eager"] = row_sum_eager
    t = interleaved(cases, (xa, ya), repeat)
    print(f"\n1. row sum, N={n} (median of {repeat}, interleaved)")
    for k, v in t.items():
        ratio = v / t["numpy eager"]
        print(f"   {k:14s} {v * 1e3:9.1f} ms   ratio {ratio:5.2f}   (target <= 0.30)")
    for k, fn in cases.items():
        peak, count, total = memory(fn, xa, ya)
        print(f"   {k:14s} extra peak {peak / MB:8.2f} MB   alive {count} ({total} B)")
    err = np.max(np.abs(cases[f"lazy[{engines[0]}]"](xa, ya) - row_sum_eager(xa, ya)))
    print(f"   max |lazy - eager| = {err:.3g}")


def bench_chain(engines: list[str], repeat: int, n: int = 10**7) -> None:
    a = np.random.default_rng(1).random(n)
    cases = {f"lazy[{e}]": with_engine(e, chain_lazy) for e in engines}
    cases["numpy eager"] = chain_eager
    t = interleaved(cases, (a,), repeat)
    print(f"\n2. 6-op elementwise chain, n={n:.0e} float64 (median of {repeat}, interleaved)")
    for k, v in t.items():
        ratio = v / t["numpy eager"]
        print(f"   {k:14s} {v * 1e3:9.1f} ms   ratio {ratio:5.2f}   (target <= 0.70)")
    for k, fn in cases.items():
        peak, count, total = memory(fn, a)
        print(
            f"   {k:14s} peak {peak / MB:8.2f} MB (output {n * 8 / MB:.2f} MB)   "
            f"alive {count} allocation(s), {total / MB:.2f} MB"
        )


def bench_sum_accuracy(engines: list[str], n: int = 10**7) -> None:
    g = np.random.default_rng(2)
    a = g.lognormal(sigma=3.0, size=n) * g.choice([-1.0, 1.0], size=n)
    exact = math.fsum(a.tolist())
    err_np = abs(float(np.sum(a)) - exact)
    print(f"\n3. sum of {n:.0e} float64 (lognormal sigma=3, random signs); fsum = {exact:.17g}")
    print(f"   numpy eager    error {err_np:.3e}")
    for e in engines:
        with fl.use_engine(e):
            got = float(fl.materialize(np.sum(fl.asarray(a))))
        err = abs(got - exact)
        ratio = err / err_np if err_np else float("inf") if err else 0.0
        print(
            f"   lazy[{e}]{'':<{8 - len(e)}} error {err:.3e}   {ratio:.2f}x NumPy's (target <= 10)"
        )


def sweep_target(repeat: int) -> None:
    """Time numpy_blocked at TARGET = 2^14 .. 2^18 (interleaved) on the row sum and the chain."""
    g = np.random.default_rng(3)
    xa, ya = g.random(8000), g.random(8000)
    a = g.random(10**7)
    old = numpy_blocked.TARGET
    print(f"\nTARGET sweep, numpy engine (median of {repeat}, interleaved)")
    try:
        for name, fn, args in [("row sum", row_sum_lazy, (xa, ya)), ("chain", chain_lazy, (a,))]:
            cases = {}
            for p in range(14, 19):

                def run(*args, p=p, fn=fn):
                    numpy_blocked.TARGET = 1 << p
                    with fl.use_engine("numpy"):
                        return fn(*args)

                cases[f"2^{p}"] = run
            t = interleaved(cases, args, repeat)
            print(f"   {name:8s} " + "  ".join(f"{k}: {v * 1e3:7.1f} ms" for k, v in t.items()))
    finally:
        numpy_blocked.TARGET = old


def _per_call(fn: Callable, *args, calls: int = 200) -> Callable:
    """``fn`` run ``calls`` times: one timed sample is many microsecond-scale calls."""

    def run(*a):
        for _ in range(calls):
            fn(*args)

    return run


def bench_small(repeat: int) -> None:
    """Issue 4's small-array target (<= 3x NumPy eager below 10^4 elements) and the per-call cost
    of grad, jit(grad) and autograd on a small gradient (``f`` below) (medians, interleaved)."""
    calls = 200
    print(f"4. small arrays: microseconds per call (median of {repeat} rounds of {calls} calls)")
    exprs = {
        "tanh(x)*2": lambda m, x, y: np.tanh(x) * 2.0,
        "5 ops+sum": lambda m, x, y: np.sum(np.exp(-((x - y) ** 2)) * 0.5 + x),
        "row sums": lambda m, x, y: np.sum(x.reshape(10, -1) * 2 - y.reshape(10, -1), axis=1),
        "where/std": lambda m, x, y: np.where(x > 0.5, (x - np.mean(x)) / np.std(y), 0.0),
    }
    for n in (1000, 5000, 9990):
        x, y = np.random.rand(n), np.random.rand(n)
        for name, e in exprs.items():

            def lazy(e=e, x=x, y=y):
                return fl.materialize(e(fl, fl.asarray(x), fl.asarray(y)))

            def eager(e=e, x=x, y=y):
                return e(np, x, y)

            t = interleaved({"lazy": _per_call(lazy), "eager": _per_call(eager)}, (), repeat)
            lz, eg = t["lazy"] / calls * 1e6, t["eager"] / calls * 1e6
            print(f"   n={n:5d} {name:10s} lazy {lz:6.1f} us  eager {eg:6.1f} us  {lz / eg:4.1f}x")
    import fusegrad as fg

    def f(m, x):
        return m.sum(m.tanh(x * 2.0 + 1.0) ** 2)

    x = np.random.rand(1000)
    cases = {
        "grad": _per_call(fg.grad(lambda x: f(np, x)), x),
        "jit(grad)": _per_call(fg.jit(fg.grad(lambda x: f(np, x))), x),
    }
    try:
        import autograd
        import autograd.numpy as anp

        cases["autograd"] = _per_call(autograd.grad(lambda x: f(anp, x)), x)
    except ImportError:
        pass
    t = interleaved(cases, (), repeat)
    print("   gradient of sum(tanh(2x+1)**2), n=1000 (5 ops): " + "  ".join(
        f"{k} {v / calls * 1e6:.1f} us" for k, v in t.items()))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--engines", default="numpy,numba")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--only", default="1,2,3,4")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "numba" in engines:
        try:
            from fusegrad.lazy.engines import numba_engine

            if not numba_engine.available():
                engines.remove("numba")
        except ImportError:
            engines.remove("numba")
    print(
        f"engines {engines}; numpy_blocked TARGET={numpy_blocked.TARGET}, "
        f"threads={numpy_blocked.threads()}"
    )
    only = args.only.split(",")
    if "1" in only:
        bench_row_sum(engines, args.repeat)
    if "2" in only:
        bench_chain(engines, args.repeat)
    if "3" in only:
        bench_sum_accuracy(engines)
    if "4" in only:
        bench_small(args.repeat)
    if args.sweep:
        sweep_target(args.repeat)


if __name__ == "__main__":
    main()

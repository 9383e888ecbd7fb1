"""numba_math's vectorisable exp/log/tanh against NumPy's SIMD ufuncs and numba's libm calls.

Run::

    python benchmarks/bench_vmath.py              # 7 interleaved rounds
    python benchmarks/bench_vmath.py --rounds 3   # quicker

Two sections, each timing the median of interleaved rounds in this one process (the machine
may be shared: compare the ratios, measured side by side, more than the absolute times):

1. elementwise ``out = f(x)`` for f in exp, expm1, log, log1p, tanh at n = 10^3, 10^5, 10^7
   float64 and 10^5, 10^7 float32: ``np.f(x, out=out)`` (NumPy's SIMD loops: its own or SVML
   with AVX-512), a numba loop calling ``math.f`` (what the generated kernels did) and one
   calling ``numba_math.f`` (``f_f32`` for float32). For float32 also ``via64``: a loop
   computing ``float32(numba_math.f(float64(x)))``, what ``f_f32`` did before it ran in
   float32 lanes. ns per element.
2. the fused row sum ``out[i] = sum_j tanh(x[i] - y[j])`` over 8000 x 8000, ``@njit(parallel=
   True)`` with ``prange`` over rows and the generated kernels' reassociating add, with
   ``math.tanh`` and with ``numba_math.tanh`` (all numba threads, then 1 thread), against NumPy
   blocked over 64 rows: ``np.tanh(x[lo:hi, None] - y[None, :]).sum(1)``; then the same in
   float32 (float32 accumulator) with ``numba_math.tanh_f32`` against NumPy's float32 tanh.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numba
import numpy as np
from numba import njit, prange

from fusegrad.lazy.engines import numba_math as vm

NAMES = ["exp", "expm1", "log", "log1p", "tanh"]


def _elementwise(f):
    """A jitted loop ``out[i] = f(x[i])``; each ``f`` gets its own compiled loop."""

    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = f(x[i])

    return loop


def _loops(name):
    lib, mine, mine32 = getattr(math, name), getattr(vm, name), getattr(vm, name + "_f32")

    @njit(error_model="numpy")
    def via64(x, out):
        for i in range(x.size):
            out[i] = np.float32(mine(np.float64(x[i])))

    return _elementwise(lib), _elementwise(mine), _elementwise(mine32), via64


@njit(error_model="numpy", fastmath={"reassoc", "nsz"})
def _radd(a, b):
    return a + b


def _row_sums(f, zero):
    """A parallel loop of row sums of ``f(x[i] - y[j])``, accumulated from ``zero``."""

    @njit(parallel=True, error_model="numpy")
    def rows(x, y, out):
        for i in prange(x.size):
            acc = zero
            for j in range(y.size):
                acc = _radd(acc, f(x[i] - y[j]))
            out[i] = acc

    return rows


rows_math = _row_sums(math.tanh, 0.0)
rows_vm = _row_sums(vm.tanh, 0.0)
rows_vm32 = _row_sums(vm.tanh_f32, np.float32(0.0))


def rows_numpy(x, y, out, block=64):
    for lo in range(0, x.size, block):
        out[lo : lo + block] = np.tanh(x[lo : lo + block, None] - y[None, :]).sum(1)


def _time(fn, reps):
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def bench(cases, rounds):
    """cases: {label: (fn, reps, elements)} -> {label: median ns per element}."""
    for fn, _, _ in cases.values():
        fn()  # compile, fault pages in
    times = {label: [] for label in cases}
    for _ in range(rounds):
        for label, (fn, reps, _) in cases.items():
            times[label].append(_time(fn, reps))
    return {k: statistics.median(v) / cases[k][2] * 1e9 for k, v in times.items()}


def elementwise(rounds):
    rng = np.random.default_rng(0)
    inputs = {
        "exp": lambda n: rng.uniform(-50.0, 50.0, n),
        "expm1": lambda n: rng.uniform(-5.0, 5.0, n),
        "log": lambda n: np.exp(rng.uniform(-20.0, 20.0, n)),
        "log1p": lambda n: np.exp(rng.uniform(-20.0, 5.0, n)),
        "tanh": lambda n: rng.uniform(-5.0, 5.0, n),
    }
    sizes = [(10**3, np.float64), (10**5, np.float64), (10**7, np.float64)]
    sizes += [(10**5, np.float32), (10**7, np.float32)]
    print(f"elementwise, ns/element, median of {rounds} interleaved rounds")
    cols = ("numpy", "math", "vm", "vm/np", "math/vm", "via64", "via64/vm")
    print(f"{'f':6} {'dtype':7} {'n':>8} " + " ".join(f"{c:>8}" for c in cols))
    for name in NAMES:
        with_math, with_vm, with_vm32, via64 = _loops(name)
        cases = {}
        for n, dt in sizes:
            x = inputs[name](n).astype(dt)
            reps = max(1, 10**6 // n)
            ufunc = getattr(np, name)
            mine = with_vm if dt == np.float64 else with_vm32
            outs = [np.empty_like(x) for _ in range(4)]
            key = (n, np.dtype(dt).name)
            cases[key + ("numpy",)] = (lambda u=ufunc, x=x, o=outs[0]: u(x, out=o), reps, n)
            cases[key + ("math",)] = (lambda f=with_math, x=x, o=outs[1]: f(x, o), reps, n)
            cases[key + ("vm",)] = (lambda f=mine, x=x, o=outs[2]: f(x, o), reps, n)
            if dt == np.float32:
                cases[key + ("via64",)] = (lambda f=via64, x=x, o=outs[3]: f(x, o), reps, n)
        res = bench(cases, rounds)
        for n, dt in sizes:
            key = (n, np.dtype(dt).name)
            a, b, c = (res[key + (v,)] for v in ("numpy", "math", "vm"))
            row = f"{a:8.2f} {b:8.2f} {c:8.2f} {c / a:8.2f} {b / c:8.1f}"
            if key + ("via64",) in res:
                d = res[key + ("via64",)]
                row += f" {d:8.2f} {d / c:8.1f}"
            print(f"{name:6} {key[1]:7} {n:>8.0e} {row}")


def reduction(rounds, n=8000):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-3.0, 3.0, n), rng.uniform(-3.0, 3.0, n)
    x4, y4 = x.astype(np.float32), y.astype(np.float32)
    outs = {k: np.empty(n) for k in ("math", "vm", "numpy")}
    outs |= {k: np.empty(n, np.float32) for k in ("vm32", "numpy32")}
    threads = numba.get_num_threads()
    cases = {}
    for nt in sorted({threads, 1}, reverse=True):

        def run(f, o, nt=nt):
            numba.set_num_threads(nt)
            f(x, y, o)

        cases[f"math.tanh, {nt} thr"] = (lambda r=run: r(rows_math, outs["math"]), 1, n * n)
        cases[f"vm.tanh, {nt} thr"] = (lambda r=run: r(rows_vm, outs["vm"]), 1, n * n)
    cases["numpy blocked, 1 thr"] = (lambda: rows_numpy(x, y, outs["numpy"]), 1, n * n)
    for nt in sorted({threads, 1}, reverse=True):

        def run32(nt=nt):
            numba.set_num_threads(nt)
            rows_vm32(x4, y4, outs["vm32"])

        cases[f"f32 vm.tanh_f32, {nt} thr"] = (run32, 1, n * n)
    cases["f32 numpy blocked, 1 thr"] = (lambda: rows_numpy(x4, y4, outs["numpy32"]), 1, n * n)
    res = bench(cases, rounds)
    numba.set_num_threads(threads)
    assert np.allclose(outs["vm"], outs["numpy"], rtol=1e-12, atol=1e-9)
    assert np.allclose(outs["math"], outs["numpy"], rtol=1e-12, atol=1e-9)
    print(f"\nrow sums of tanh(x[i] - y[j]), {n} x {n}, ns/point, median of {rounds} rounds")
    assert np.allclose(outs["vm32"], outs["numpy32"], rtol=1e-3, atol=0.05)
    for label, t in res.items():
        base = res[
            "f32 numpy blocked, 1 thr" if label.startswith("f32") else "numpy blocked, 1 thr"
        ]
        print(f"{label:26} {t:7.3f} ns  ({base / t:5.1f}x numpy blocked)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"numpy {np.__version__}, numba {numba.__version__}, {numba.get_num_threads()} threads")
    elementwise(args.rounds)
    reduction(args.rounds)


if __name__ == "__main__":
    main()

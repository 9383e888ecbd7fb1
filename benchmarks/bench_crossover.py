"""Where `auto`'s thresholds come from: one kernel at growing sizes on every way of running it.

Run (about 30 s; ratios are what count on a shared machine)::

    python benchmarks/bench_crossover.py            # the sweep
    python benchmarks/bench_crossover.py --quick    # fewer sizes and repeats

For each kernel (three-op arithmetic map, ``tanh(a + b)`` map, a column sum of a product) and
domain size it prints the best-of-repeats time of

- ``numpy``: plain NumPy on the whole arrays, one ufunc call per op (what eager code does);
- ``whole``: numpy_blocked's one-block path (one ufunc call per instruction over the whole
  domain, into planned buffers, the last one into the output);
- ``blocked``: numpy_blocked's blocked path (cache-sized blocks into reused buffers);
- ``numba``: the numba engine, compiled (its compile is not timed);

and minor page faults per call (a fresh large temporary costs one per 4 KiB page; on a
virtual machine that is several microseconds each, which is what separates ``numpy`` from
``blocked`` above ~3*10^4 points). The thresholds these measurements set live in one place,
``fusegrad/lazy/engines/registry.py`` (``WHOLE_MAX``, ``NUMBA_MIN``, ``HOT_MIN``,
``HOT_CALLS``); the last section prints them next to the measured crossovers.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

from fusegrad.lazy.engines import numba_engine, numpy_blocked, registry
from fusegrad.lazy.kernel import Instr, Kernel, Output

F8 = np.dtype("f8")


def kernels(n_rows: int, n_cols: int) -> dict:
    """The three kernels over an ``n_rows x n_cols`` domain, with their plain NumPy versions."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n_rows, n_cols))
    b = rng.standard_normal((1, n_cols))
    arith = Kernel(
        (n_rows, n_cols),
        (a, b),
        (),
        (
            Instr("multiply", (0, 1), F8),
            Instr("subtract", (2, 0), F8),
            Instr("multiply", (3, 1), F8),
        ),
        (Output(4, None, (), F8),),
    )
    tanh = Kernel(
        (n_rows, n_cols),
        (a, b),
        (),
        (Instr("add", (0, 1), F8), Instr("tanh", (2,), F8)),
        (Output(3, None, (), F8),),
    )
    colsum = Kernel(
        (n_rows, n_cols),
        (a, b),
        (),
        (Instr("multiply", (0, 1), F8),),
        (Output(2, "sum", (0,), F8),),
    )
    return {
        "arith3": (arith, lambda: (a * b - a) * b),
        "tanh(a+b)": (tanh, lambda: np.tanh(a + b)),
        "colsum(a*b)": (colsum, lambda: np.sum(a * b, axis=0, keepdims=True)),
    }


def best(fn, repeats: int) -> tuple[float, float]:
    """Best seconds per call over ``repeats`` rounds, and minor page faults per call."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(0.01 / one))
    times = []
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / (repeats * inner)
    return min(times), faults


def ways(kernel: Kernel, plain) -> dict:
    outs = [np.empty(kernel.output_shape(o), o.dtype) for o in kernel.outputs]
    w = {
        "numpy": plain,
        "whole": lambda: numpy_blocked._run_whole(kernel, outs),
        "blocked": lambda: numpy_blocked._run_blocked(kernel, outs),
    }
    if numba_engine.available():
        numba_engine.run(kernel)  # compile (or load) it first
        w["numba"] = lambda: numba_engine.run(kernel)
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    opts = ap.parse_args()
    rows = [8, 32, 128, 256, 512, 1024] if opts.quick else [8, 16, 32, 64, 128, 256, 512, 1024]
    repeats = 3 if opts.quick else 5
    cols = 128
    print(f"numpy {np.__version__}, {os.cpu_count()} cores, float64, {cols} columns")
    cross: dict[str, dict[str, int | None]] = {}
    for name in kernels(1, cols):
        print(f"\n## {name}  (us per call, page faults per call)")
        print(
            f"{'points':>9}" + "".join(f"{w:>20}" for w in ("numpy", "whole", "blocked", "numba"))
        )
        cross[name] = {"whole>blocked": None, "numba<best numpy": None}
        for r in rows:
            kernel, plain = kernels(r, cols)[name]
            res = {w: best(fn, repeats) for w, fn in ways(kernel, plain).items()}
            print(
                f"{r * cols:>9}"
                + "".join(f"{res[w][0] * 1e6:12.1f} ({res[w][1]:5.0f})" for w in res)
            )
            if res["whole"][0] > res["blocked"][0] and cross[name]["whole>blocked"] is None:
                cross[name]["whole>blocked"] = r * cols
            ours = min(res["whole"][0], res["blocked"][0])
            if (
                "numba" in res
                and res["numba"][0] < ours
                and cross[name]["numba<best numpy"] is None
            ):
                cross[name]["numba<best numpy"] = r * cols
        sys.stdout.flush()
    print("\n## crossovers (first size where it holds) and the thresholds in registry.py")
    for name, c in cross.items():
        print(f"  {name:12s} " + ", ".join(f"{k}: {v}" for k, v in c.items()))
    print(
        f"  registry: WHOLE_MAX={registry.WHOLE_MAX}, NUMBA_MIN={registry.NUMBA_MIN}, "
        f"HOT_MIN={registry.HOT_MIN}, HOT_CALLS={registry.HOT_CALLS}, "
        f"NUMBA_COLD_MIN={registry.NUMBA_COLD_MIN}"
    )


if __name__ == "__main__":
    main()

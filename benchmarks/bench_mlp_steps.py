"""Where the time of one plain ``grad`` of the MLP goes, step by step, and the page faults of a
call: the products (matmul's rule and its two transposes), the fused kernels (``engines.run``),
and the Python between them.

Run::

    python benchmarks/bench_mlp_steps.py                  # batch 4096 (100->256->1), 8 calls
    python benchmarks/bench_mlp_steps.py --batch 256 --calls 20
    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/bench_mlp_steps.py   # OpenBLAS's worker asleep

Each step's time is its median over ``--calls`` timed calls (after warm-up), in the order the
steps ran; "between" is the wall time no step accounts for (tracing, rules, planning). The page
faults are minor faults per call (``getrusage``): with glibc's stock malloc each one is a page
the kernel zeroes. The steps are timed by wrapping fusegrad's own functions, so this is a
diagnostic, not a benchmark of record (``python -m fusegrad.bench`` is).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

import fusegrad as fg
from fusegrad.bench import workloads as W
from fusegrad.lazy import engines
from fusegrad.lazy import plan as lazy_plan
from fusegrad.rules import linalg, registry

STEPS: list[tuple[str, float, float]] = []


def _timed(label, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS.append((label(args), t0, time.perf_counter()))

    return wrapper


def _shape(args) -> str:
    return " @ ".join("x".join(map(str, np.shape(a))) for a in args[:2])


def instrument() -> None:
    """Wrap matmul's rule, its transposes and the engines' ``run`` to record each step."""
    rule, lazy = registry.RRULES[np.matmul]
    registry.RRULES[np.matmul] = (_timed(lambda a: "matmul " + _shape(a), rule), lazy)
    linalg._matmul_ta = _timed(lambda a: "dA = dY @ Bt " + _shape(a[1:]), linalg._matmul_ta)
    linalg._matmul_tb = _timed(lambda a: "dB = At @ dY " + _shape(a[1:]), linalg._matmul_tb)
    lazy_plan.engines.run = _timed(
        lambda a: f"kernel {'x'.join(map(str, a[0].domain))}", engines.run
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--batch", type=int, default=4096, help="32, 256 or 4096 (the bench's sizes)")
    p.add_argument("--calls", type=int, default=8)
    args = p.parse_args()
    inputs = W.mlp_inputs(args.batch)
    grad = fg.grad(lambda *a: W.mlp(np, *a), argnums=(0, 1, 2, 3))
    instrument()
    for _ in range(5):
        grad(*inputs)
    per_step: dict[tuple[int, str], list[float]] = {}
    between, totals = [], []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(args.calls):
        STEPS.clear()
        t0 = time.perf_counter()
        grad(*inputs)
        t1 = time.perf_counter()
        totals.append(t1 - t0)
        steps = sorted(STEPS, key=lambda s: s[1])
        between.append((t1 - t0) - sum(b - a for _, a, b in steps))
        for i, (name, a, b) in enumerate(steps):
            per_step.setdefault((i, name), []).append(b - a)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / args.calls
    print(f"MLP batch {args.batch}: plain grad, {args.calls} calls, medians in ms")
    for (_, name), ts in per_step.items():
        print(f"  {name:40s} {statistics.median(ts) * 1e3:7.2f}")
    print(f"  {'between the steps (Python)':40s} {statistics.median(between) * 1e3:7.2f}")
    print(f"  {'total':40s} {statistics.median(totals) * 1e3:7.2f}")
    print(f"  minor page faults per call: {faults:.1f}")


if __name__ == "__main__":
    main()

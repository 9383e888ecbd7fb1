"""Deep unrolled loops through ``fg.grad`` (issue 14, item 7): time per step should not grow.

Run: ``python benchmarks/bench_deep_loops.py [--steps 1000,10000,100000] [--size 16]
[--engine auto] [--only ema,rnn] [--lazy]`` (``--lazy``: the fused path at every size; by
default a vector this small takes the small-array path inside ``grad``, as it does for users)

Two loops, each differentiated with ``fg.grad`` at each number of steps:

- ``ema``: an exponential moving average of a vector, ``s = 0.9 * s + 0.1 * x``;
- ``rnn``: an unrolled elementwise RNN cell, ``h = np.tanh(w * h + x[t])``, gradient w.r.t. ``w``.

For each it prints the wall and CPU time (this process's, ``time.process_time``: less noisy on a
shared machine), the CPU time per step and the ratio of each row's CPU time per step to the
first row's (1.0 means linear in the number of steps), and checks the gradient against a
hand-written NumPy loop. The graph of a 10^5-step loop is ~5 * 10^5 nodes deep: every walk over
it is iterative, and the planner cuts chains into kernels of ``plan.CHAIN`` ops.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import fusegrad as fg
from fusegrad.lazy import small


def ema_loss(steps: int):
    def f(x):
        s = 0.0 * x
        for _ in range(steps):
            s = 0.9 * s + 0.1 * x
        return np.sum(s)

    def want(x):
        return np.full_like(x, 1 - 0.9**steps)

    return f, want


def rnn_loss(steps: int, size: int):
    xs = np.sin(np.arange(steps) * 0.1)

    def f(w):
        h = 0.0 * w
        for t in range(steps):
            h = np.tanh(w * h + xs[t])
        return np.sum(h)

    def want(w):  # forward sensitivity dh/dw, by hand
        h, dh = np.zeros(size), np.zeros(size)
        for t in range(steps):
            h_new = np.tanh(w * h + xs[t])
            dh = (1 - h_new**2) * (h + w * dh)
            h = h_new
        return dh

    return f, want


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default="1000,10000,100000")
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--engine", default="auto")
    p.add_argument("--only", default="ema,rnn")
    p.add_argument(
        "--lazy",
        action="store_true",
        help="the lazy (fused) path at every size; by default ops on fewer than "
        "FUSEGRAD_EAGER_BELOW elements run eagerly inside grad, as for any user",
    )
    args = p.parse_args()
    if args.lazy:
        small.EAGER_BELOW = 0
    steps_list = [int(s) for s in args.steps.split(",")]
    x = np.linspace(0.1, 0.9, args.size)
    with fg.use_engine(args.engine):
        fg.grad(lambda v: np.sum(np.tanh(v) * 0.5))(x)  # imports and engine set-up
        for name in args.only.split(","):
            print(f"{name}: fg.grad of a {name} loop over {args.size} elements")
            head = f"  {'steps':>8} {'time s':>9} {'cpu s':>9} {'us/step':>9} {'ratio':>6}"
            print(head + "  max rel err")
            first = None
            for steps in steps_list:
                f, want = ema_loss(steps) if name == "ema" else rnn_loss(steps, args.size)
                gc.collect()
                t0, c0 = time.perf_counter(), time.process_time()
                g = fg.grad(f)(x)
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                ref = want(x)
                err = float(np.max(np.abs(g - ref)) / max(np.max(np.abs(ref)), 1e-300))
                per = cpu / steps
                first = per if first is None else first
                print(
                    f"  {steps:>8} {dt:>9.2f} {cpu:>9.2f} {per * 1e6:>9.1f} {per / first:>6.2f}  "
                    f"{err:.1e}",
                    flush=True,
                )
                del f, g


if __name__ == "__main__":
    main()

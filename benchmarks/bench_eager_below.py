"""Where the small-array path should stop: plain ``grad`` of a few ordinary programs at sizes
around ``small.EAGER_BELOW``, with the path's settings as they are and as ``--old`` gives them,
beside HIPS autograd, interleaved call by call in one process.

Run::

    python benchmarks/bench_eager_below.py
    python benchmarks/bench_eager_below.py --programs mlp,w1 --sizes 65536,262144 --calls 40
    python benchmarks/bench_eager_below.py --old 65536,8,1    # EAGER_BELOW, GROWTH, SLOW_SHARE

Programs (``--sizes`` counts the elements of the largest intermediate): ``mlp``, the MLP
training step ``mean((tanh(X @ W1 + b1) @ W2 + b2 - y)**2)`` with 100 inputs and 128 hidden
units (batch = size / 128); ``w1``, ``sum((1 - x) / 2)``; ``chain``, ``sum(tanh(sin(x) * x +
1)**2)`` (``sin``: a ufunc NumPy keeps scalar); ``softplus``, ``sum(logaddexp(0, x / 2) * x)``.
Each line gives the medians in ms and the ratios. For figures comparable with the bench's, run
it with the peers' malloc (``GLIBC_TUNABLES`` as ``fusegrad.bench.runner.THP_ENV`` sets it).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fusegrad as fg
from fusegrad.bench import workloads as W
from fusegrad.lazy import small

PROGRAMS = {
    "w1": lambda xp, x: xp.sum((1 - x) / 2),
    "chain": lambda xp, x: xp.sum(xp.tanh(xp.sin(x) * x + 1.0) ** 2),
    "softplus": lambda xp, x: xp.sum(xp.logaddexp(0.0, x * 0.5) * x),
}


def _case(name: str, size: int) -> tuple:
    """``(args, argnums, f(xp, *args))`` for a program at ``size``."""
    if name == "mlp":
        return W.mlp_inputs(max(1, size // 128), (100, 128)), (0, 1, 2, 3), W.mlp
    return (np.random.default_rng(1).standard_normal(size),), 0, PROGRAMS[name]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--programs", default="mlp,w1,chain,softplus")
    p.add_argument("--sizes", default="65536,131072,196608,262144,524288")
    p.add_argument("--old", default="65536,8,1", help="EAGER_BELOW,GROWTH,SLOW_SHARE to compare")
    p.add_argument("--calls", type=int, default=30)
    args = p.parse_args()
    settings = {
        "now": (small.EAGER_BELOW, small.GROWTH, small.SLOW_SHARE),
        "old": tuple(int(float(v)) for v in args.old.split(",")),
    }
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        autograd = None
    now, old = settings["now"], settings["old"]
    print(f"(EAGER_BELOW, GROWTH, SLOW_SHARE) now {now}, old {old}")
    for name in args.programs.split(","):
        for size in (int(float(s)) for s in args.sizes.split(",")):
            inputs, argnums, f = _case(name, size)
            runs = {"now": fg.grad(lambda *a, f=f: f(np, *a), argnums=argnums)}
            runs["old"] = runs["now"]
            if autograd is not None:
                runs["autograd"] = autograd.grad(lambda *a, f=f: f(anp, *a), argnum=argnums)
            times: dict[str, list[float]] = {k: [] for k in runs}
            order = list(runs.items())
            for call in range(args.calls + 5):
                order = order[1:] + order[:1]  # each first in turn: the one after a peer pays
                for key, g in order:  # for the memory it left (freed pages, a trimmed heap)
                    if key in settings:
                        small.EAGER_BELOW, small.GROWTH, small.SLOW_SHARE = settings[key]
                    t0 = time.perf_counter()
                    g(*inputs)
                    if call >= 5:
                        times[key].append(time.perf_counter() - t0)
            small.EAGER_BELOW, small.GROWTH, small.SLOW_SHARE = settings["now"]
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            line = f"{name:9s} {size:8d}  now {med['now']:7.3f}  old {med['old']:7.3f}"
            line += f"  now/old {med['now'] / med['old']:.2f}"
            if "autograd" in med:
                line += f"  autograd {med['autograd']:7.3f}  now/autograd"
                line += f" {med['now'] / med['autograd']:.2f}  old/autograd"
                line += f" {med['old'] / med['autograd']:.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()

"""How ``jit``'s row blocks (``fusegrad.lazy.replay_rows``) are sized, on programs of different
shapes: blocks sized by intermediates only (the rule before inputs' rows counted: a program
whose intermediates would make fewer than two blocks runs step by step) against the module's
current settings, alternated in one process, with jax.jit beside them when installed.

Run::

    python benchmarks/bench_row_rules.py
    python benchmarks/bench_row_rules.py --rounds 20

Programs: a softmax classifier (20,000×100 inputs, 10 classes), the MLP (100 -> 256 at batch
4096 and 16384; 1000 -> 64 at batch 4096) and logistic regression on 100,000×50, each a
gradient of the loss in its parameters with the data passed as arguments. The table gives each
setting's median of ``--rounds`` rounds' medians of 5 calls, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_ENABLE_X64", "1")

import numpy as np  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.bench import workloads as W  # noqa: E402
from fusegrad.lazy import replay_rows  # noqa: E402


def softmax_xent(np_, w, b, x, y):
    z = x @ w + b
    z = z - np_.max(z, axis=1, keepdims=True)
    return np_.mean(np_.log(np_.sum(np_.exp(z), axis=1)) - np_.sum(z * y, axis=1))


def logreg(np_, w, x, y):
    return np_.mean(np_.logaddexp(0.0, -y * (x @ w)))


def programs() -> dict[str, tuple]:
    rng = np.random.default_rng(0)
    onehot = np.eye(10)[rng.integers(0, 10, 20000)]
    return {
        "softmax 20000x100": (
            softmax_xent,
            [rng.normal(size=(100, 10)) * 0.1, np.zeros(10), rng.normal(size=(20000, 100)), onehot],
            (0, 1),
        ),
        "MLP 4096": (W.mlp, list(W.mlp_inputs(4096)), (0, 1, 2, 3)),
        "MLP 16384": (W.mlp, list(W.mlp_inputs(16384)), (0, 1, 2, 3)),
        "MLP 4096 1000->64": (W.mlp, list(W.mlp_inputs(4096, (1000, 64))), (0, 1, 2, 3)),
        "logreg 100000x50": (
            logreg,
            [
                rng.normal(size=50) * 0.1,
                rng.normal(size=(100000, 50)),
                np.sign(rng.normal(size=100000)),
            ],
            (0,),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    opts = ap.parse_args()
    names = ("MIN_BYTES", "BLOCK_BYTES", "INPUT_BLOCK_BYTES", "MAX_BLOCKS")
    current = {k: getattr(replay_rows, k) for k in names}
    settings = {
        "intermediates only": {**current, "INPUT_BLOCK_BYTES": 1 << 62, "MAX_BLOCKS": 1 << 40},
        "current": current,
    }
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    for name, (f, args, argnums) in programs().items():
        variants = {}
        for label, values in settings.items():
            for k, v in values.items():
                setattr(replay_rows, k, v)
            variants[label] = fg.jit(fg.grad(lambda *a, f=f: f(np, *a), argnums=argnums))
            for _ in range(12):
                variants[label](*args)
        for k, v in current.items():
            setattr(replay_rows, k, v)
        if jax is not None:
            g = jax.jit(jax.grad(lambda *a, f=f: f(jnp, *a), argnums=argnums))
            jargs = [jnp.asarray(a) for a in args]
            variants["jax.jit"] = lambda *_, g=g, jargs=jargs: jax.block_until_ready(g(*jargs))
            variants["jax.jit"]()
        times: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(opts.rounds):
            for k in list(variants) if r % 2 else list(variants)[::-1]:
                calls = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    variants[k](*args)
                    calls.append(time.perf_counter() - t0)
                times[k].append(statistics.median(calls) * 1e3)
        cells = "  ".join(f"{k}: {statistics.median(v):7.2f}" for k, v in times.items())
        print(f"{name:20s} {cells}")


if __name__ == "__main__":
    main()

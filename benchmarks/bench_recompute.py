"""Bounded recomputation (issue 16, item 2): a gradient does at most c times the forward's work.

Run: ``python benchmarks/bench_recompute.py [--steps 50,100,200,400,800] [--size 1000]
[--engine numpy] [--only ema,rnn] [--small]``

Work is counted, not timed: ``fusegrad.lazy.plan.counting()`` adds up, over every kernel run,
its domain's size times the instructions of its program (``point_ops``). The forward's work is
that of evaluating the loss on lazy values (one fused pass); the gradient's is everything
``fg.grad`` runs, forward values recomputed in the backward pass included. Their ratio should
be flat in the number of steps ``T``.

- ``ema``: an exponential moving average over the rows of a ``(T, size)`` array,
  ``y = a * y + (1 - a) * x[t]``, loss ``sum(y)``, gradient w.r.t. ``x``;
- ``rnn``: a gated elementwise RNN over the rows of ``x`` (``z = expit(wz * h + uz * x[t])``,
  ``c = tanh(wh * h + uh * x[t] + b)``, ``h = z * h + (1 - z) * c``), loss ``sum(h)``, gradient
  w.r.t. the five parameter vectors and w.r.t. ``x``.

By default the small-array path is off (every op lazy and fused, as in the tests); ``--small``
keeps the user's default (ops on fewer than ``FUSEGRAD_EAGER_BELOW`` elements run eagerly, and
that eager work is not counted: only the times compare then). Each row also checks the gradient
against a hand-written NumPy one.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from scipy.special import expit

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import plan, small

A = 0.9


def ema(x):
    y = 0.0 * x[0]
    for t in range(x.shape[0]):
        y = A * y + (1 - A) * x[t]
    return np.sum(y)


def ema_grad(x):
    t = np.arange(x.shape[0])
    return np.broadcast_to(((1 - A) * A ** (x.shape[0] - 1 - t))[:, None], x.shape)


def rnn(p, x):
    wz, uz, wh, uh, b = p
    h = 0.0 * x[0]
    for t in range(x.shape[0]):
        z = expit(wz * h + uz * x[t])
        c = np.tanh(wh * h + uh * x[t] + b)
        h = z * h + (1 - z) * c
    return np.sum(h)


def rnn_grads(p, x):
    """The gradients w.r.t. ``p`` and ``x``, by a hand-written backward pass."""
    wz, uz, wh, uh, b = p
    hs, zs, cs = [0.0 * x[0]], [], []
    for t in range(x.shape[0]):
        h = hs[-1]
        zs.append(expit(wz * h + uz * x[t]))
        cs.append(np.tanh(wh * h + uh * x[t] + b))
        hs.append(zs[-1] * h + (1 - zs[-1]) * cs[-1])
    gp = [np.zeros_like(v) for v in p]
    gx = np.zeros_like(x)
    hb = np.ones_like(x[0])
    for t in reversed(range(x.shape[0])):
        h, z, c = hs[t], zs[t], cs[t]
        az = hb * (h - c) * z * (1 - z)  # through z's pre-activation
        ac = hb * (1 - z) * (1 - c**2)  # through c's pre-activation
        gp[0] += az * h
        gp[1] += az * x[t]
        gp[2] += ac * h
        gp[3] += ac * x[t]
        gp[4] += ac
        gx[t] = az * uz + ac * uh
        hb = hb * z + az * wz + ac * wh
    return gp, gx


def forward_work(f, *args) -> int:
    with plan.counting() as work, small.fusing():
        lazy = [fl.asarray(a) if isinstance(a, np.ndarray) else [fl.asarray(v) for v in a]
                for a in args]  # fmt: skip
        plan.materialize(f(*lazy))
    return work.point_ops


def measure(g, *args):
    gc.collect()
    with plan.counting() as work:
        c0 = time.process_time()
        out = g(*args)
        cpu = time.process_time() - c0
    return out, work, cpu


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-300))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default="50,100,200,400,800")
    p.add_argument("--size", type=int, default=1000)
    p.add_argument("--engine", default="numpy")
    p.add_argument("--only", default="ema,rnn")
    p.add_argument("--small", action="store_true", help="keep the small-array path on")
    args = p.parse_args()
    if not args.small:
        small.EAGER_BELOW = 0
    rng = np.random.default_rng(0)
    n = args.size
    params = [rng.uniform(0.1, 0.5, n) for _ in range(5)]
    head = f"  {'T':>5} {'fwd work':>10} {'grad work':>11} {'ratio':>6} {'kernels':>7} "
    head += f"{'cpu s':>7}  max rel err"
    with fg.use_engine(args.engine):
        fg.grad(lambda v: np.sum(np.tanh(v) * 0.5))(np.ones(n))  # imports, engine set-up
        for name in args.only.split(","):
            print(f"{name}: point_ops of fg.grad against the forward's, rows of a (T, {n}) array")
            print(head)
            for steps in [int(s) for s in args.steps.split(",")]:
                x = rng.standard_normal((steps, n))
                rows = []
                if name == "ema":
                    fwd = forward_work(ema, x)
                    g, work, dt = measure(fg.grad(ema), x)
                    rows.append(("d/dx", work, dt, rel_err(g, ema_grad(x))))
                else:
                    fwd = forward_work(rnn, params, x)
                    gp_want, gx_want = rnn_grads(params, x)
                    g, work, dt = measure(fg.grad(rnn), params, x)
                    err = max(rel_err(a, b) for a, b in zip(g, gp_want))
                    rows.append(("d/dp", work, dt, err))
                    g, work, dt = measure(fg.grad(rnn, argnums=1), params, x)
                    rows.append(("d/dx", work, dt, rel_err(g, gx_want)))
                for what, work, dt, err in rows:
                    print(
                        f"  {steps:>5} {fwd:>10.3g} {work.point_ops:>11.3g} "
                        f"{work.point_ops / fwd:>6.2f} {work.kernels:>7} {dt:>7.3f}  "
                        f"{err:.1e}  {what}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()

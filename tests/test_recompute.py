"""Bounded recomputation (issue 16, item 2): the gradient of a long loop does a constant times the
forward's work, counted in kernel points (``plan.counting``), not timed.

The planner (``lazy/plan.py``) gets there three ways, each checked here: a sum of one-hot
selections (the cotangent of ``x`` from the pullbacks of ``x[0]``, ``x[1]``, ...) is computed
slice by slice into one buffer; a large graph is cut into layers of ``CHAIN`` ops whose values
read higher up are stored, so each value is computed once; and a kernel on top of a long chain
stores every few values down it (``plan.SPINES``), for loops that materialise one step at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import plan, small
from fusegrad.memory import track_allocations

# Gradient work <= C x forward work: the bound the planner keeps (measured: EMA 0.67, gated RNN
# 2.9 w.r.t. its parameters and 3.1 w.r.t. x, flat in the number of steps;
# benchmarks/bench_recompute.py).
C = 4.0


def forward_work(f, *args):
    with plan.counting() as work, small.fusing():
        plan.materialize(f(*[fl.asarray(a) for a in args]))
    return work.point_ops


def grad_work(f, *args, argnums=0):
    with plan.counting() as work:
        g = fg.grad(f, argnums=argnums)(*args)
    return g, work


def ema_rows(x, a=0.9):
    y = 0.0 * x[0]
    for t in range(x.shape[0]):
        y = a * y + (1 - a) * x[t]
    return np.sum(y)


def ema_cols(x, a=0.9):
    y = 0.0 * x[:, 0]
    for t in range(x.shape[1]):
        y = a * y + (1 - a) * x[:, t]
    return np.sum(y)


def ema_want(steps, a=0.9):
    return (1 - a) * a ** (steps - 1 - np.arange(steps))


def test_ema_over_400_rows_is_bounded():
    x = np.random.default_rng(0).standard_normal((400, 20))
    fwd = forward_work(ema_rows, x)
    g, work = grad_work(ema_rows, x)
    np.testing.assert_allclose(g, np.broadcast_to(ema_want(400)[:, None], x.shape), rtol=1e-12)
    assert work.point_ops <= C * fwd, (work, fwd)  # was 400x: every row's term at every point
    assert work.kernels <= 400 // plan.MAX_OUTPUTS + 2


def test_ema_over_columns_materialised_step_by_step_is_bounded():
    # x[:, t]'s pullback moves each cotangent (a reshape to (n, 1)), which computes it once the
    # chain under it is long: deepest first, as the backward pass reaches them.
    x = np.random.default_rng(1).standard_normal((50, 300))
    fwd = forward_work(ema_cols, x)
    g, work = grad_work(ema_cols, x)
    np.testing.assert_allclose(g, np.broadcast_to(ema_want(300)[None, :], x.shape), rtol=1e-12)
    assert work.point_ops <= C * fwd, (work, fwd)


@pytest.mark.parametrize(
    "engine", ["numpy", pytest.param("numba", marks=pytest.mark.slow)], indirect=True
)
def test_ema_over_rows_on_both_engines(engine):  # numba: a few kernels to compile, ~1 s each
    x = np.random.default_rng(6).standard_normal((40, 10))
    fwd = forward_work(ema_rows, x)
    g, work = grad_work(ema_rows, x)
    np.testing.assert_allclose(g, np.broadcast_to(ema_want(40)[:, None], x.shape), rtol=1e-12)
    assert work.point_ops <= C * fwd, (work, fwd)


def test_ema_ratio_is_flat_in_the_steps():
    ratios = []
    for steps in (50, 200):
        x = np.ones((steps, 20))
        fwd = forward_work(ema_rows, x)
        _, work = grad_work(ema_rows, x)
        ratios.append(work.point_ops / fwd)
    assert ratios[1] <= 1.05 * ratios[0], ratios


def gated_rnn(p, x):
    wz, uz, wh, uh = p[0], p[1], p[2], p[3]
    h = 0.0 * x[0]
    for t in range(x.shape[0]):
        z = expit(wz * h + uz * x[t])
        c = np.tanh(wh * h + uh * x[t])
        h = z * h + (1 - z) * c
    return np.sum(h)


def rnn_by_hand(p, x):
    """The loss and its gradients w.r.t. ``p`` and ``x`` by a hand-written backward pass."""
    wz, uz, wh, uh = p
    hs, zs, cs = [0.0 * x[0]], [], []
    for t in range(x.shape[0]):
        zs.append(expit(wz * hs[-1] + uz * x[t]))
        cs.append(np.tanh(wh * hs[-1] + uh * x[t]))
        hs.append(zs[-1] * hs[-1] + (1 - zs[-1]) * cs[-1])
    gp, gx, hb = np.zeros_like(p), np.zeros_like(x), np.ones_like(x[0])
    for t in reversed(range(x.shape[0])):
        h, z, c = hs[t], zs[t], cs[t]
        az, ac = hb * (h - c) * z * (1 - z), hb * (1 - z) * (1 - c**2)
        gp += np.stack([az * h, az * x[t], ac * h, ac * x[t]])
        gx[t] = az * uz + ac * uh
        hb = hb * z + az * wz + ac * wh
    return np.sum(hs[-1]), gp, gx


# numba: ~20 kernels of an unrolled loop to compile, 2-8 s each
@pytest.mark.parametrize(
    "steps", [60, pytest.param(120, marks=pytest.mark.slow)], ids=lambda s: f"T{s}"
)
@pytest.mark.parametrize("argnums", [0, 1], ids=["params", "x"])
def test_gated_rnn_is_bounded(argnums, steps):
    rng = np.random.default_rng(2)
    p = rng.uniform(0.1, 0.5, (4, 8))
    x = rng.standard_normal((steps, 8))  # a graph of thousands of nodes: cut into layers
    fwd = forward_work(gated_rnn, p, x)
    g, work = grad_work(gated_rnn, p, x, argnums=argnums)
    _, gp, gx = rnn_by_hand(p, x)
    np.testing.assert_allclose(g, gp if argnums == 0 else gx, rtol=1e-10, atol=1e-14)
    assert work.point_ops <= C * fwd, (work, fwd)  # was 37x (params) and 116x (x) at T=50


def test_gated_rnn_against_finite_differences():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.5, (4, 3))
    x = rng.standard_normal((40, 3))
    g = fg.grad(gated_rnn)(p, x)
    eps, fd = 1e-6, np.zeros_like(p)
    for i in np.ndindex(p.shape):
        d = np.zeros_like(p)
        d[i] = eps
        fd[i] = (rnn_by_hand(p + d, x)[0] - rnn_by_hand(p - d, x)[0]) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["lstm", "gru", "wide lstm"])
def test_gated_cells_are_bounded(name, monkeypatch):
    # an LSTM's and a GRU's cell chains (gates sliced from a product, c = f * c + i * g) over
    # 8x24, 12x20 and 96x48 values: their gradients' kernels recompute at most a few ops of each
    # chain (plan.SPINES), where they did 5.2x, 11x and 5.8x their forwards' work, recomputing
    # whole chains in every backward kernel (a jit replay of each paid it at every call)
    import scipy.special

    from fusegrad.bench import programs

    prog = programs.PROGRAMS[name.split()[-1]]
    rng = np.random.default_rng(programs.SEED)
    if name == "wide lstm":  # 96 x 48 values per gate: past plan.SPINES' first row
        params, data = programs.lstm_inputs(rng, n_in=4, n_h=48, n_out=3, steps=12, batch=96)
    else:
        params, data = prog.make(rng)

    def loss(p):
        return prog.loss(np, scipy.special, p, data)

    with plan.counting() as fwd, small.fusing():
        plan.materialize(loss({k: fl.asarray(v) for k, v in params.items()}))
    g, work = grad_work(loss, params)
    assert work.point_ops <= C * fwd.point_ops, (work, fwd.point_ops)
    monkeypatch.setattr(small, "EAGER_BELOW", small.DEFAULT_EAGER_BELOW)
    want = fg.grad(loss)(params)  # small arrays eager: every value computed once, the same
    for k in want:
        np.testing.assert_allclose(g[k], want[k], rtol=1e-10, atol=1e-12)


def test_a_lazy_forward_computes_each_value_about_once():
    # 2,000 maps: cut into layers (a kernel per layer and per MAX_OUTPUTS values it stores)
    x = fl.asarray(np.linspace(0.0, 1.0, 50))
    h, nodes = 0.0 * x, 1
    for _ in range(500):
        h = np.tanh(0.5 * h + x) * 0.9 + x
        nodes += 4
    with plan.counting() as work, fl.recording() as rec:
        value = np.asarray(h)
    want = np.zeros(50)
    xv = np.linspace(0.0, 1.0, 50)
    for _ in range(500):
        want = np.tanh(0.5 * want + xv) * 0.9 + xv
    np.testing.assert_allclose(value, want, rtol=1e-12)
    assert nodes * 50 <= work.point_ops <= 1.3 * nodes * 50
    kernels = [e for e in rec if e["event"] == "kernel"]
    assert max(len(k["ops"]) for k in kernels) <= plan.CHAIN


def test_selection_sum_with_dense_terms_nested_and_in_float32():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((30, 8)).astype(np.float32)

    def f(x):  # x[t] one-hot terms, a dense term, and x[t, j] two-axis ones
        y = 0.0 * x[0]
        for t in range(x.shape[0]):
            y = 0.5 * y + x[t] * x[t] + x[t, t % 8]
        return np.sum(y) + np.sum(np.sin(x))

    with plan.counting() as work:
        g = fg.grad(f)(x)
    want = np.cos(x.astype(np.float64))
    w = 0.5 ** (29 - np.arange(30))
    want += 2 * x * w[:, None]
    for t in range(30):
        want[t, t % 8] += 8 * w[t]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, want, rtol=2e-5, atol=1e-6)
    assert work.point_ops < 30 * 8 * 30  # not every term at every point


def test_selection_sum_inside_an_expression():
    rows = [fl.asarray(np.full(5, float(t))) for t in range(6)]
    masks = [np.arange(6)[:, None] == t for t in range(6)]
    s = rows[0] * 0.0
    s = np.where(masks[0], rows[0] * 2.0, 0.0)
    for t in range(1, 6):
        s = s + np.where(masks[t], rows[t] * 2.0, 0.0)
    with plan.counting() as work, fl.recording() as rec:
        value = np.asarray(np.exp(s * 0.1) + 1.0)
    np.testing.assert_allclose(value, np.exp(np.arange(6.0)[:, None] * 0.2 + np.zeros(5)) + 1.0)
    assert any("one-hot selections" in e.get("reason", "") for e in rec)
    assert work.point_ops < 6 * 5 * 6 * 2


def test_masks_that_are_not_one_hot_are_summed_as_before():
    x = fl.asarray(np.arange(12.0).reshape(4, 3))
    s = 0.0
    for k in range(5):
        s = s + np.where(np.arange(4)[:, None] >= k % 3, x * k, 0.0)  # several True rows
    want = sum(np.where(np.arange(4)[:, None] >= k % 3, np.arange(12.0).reshape(4, 3) * k, 0.0)
               for k in range(5))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(s), want)


def test_pairwise_gradient_still_allocates_no_n_by_n_array():
    n = 1500
    rng = np.random.default_rng(5)
    x, y, s = rng.standard_normal(n), rng.standard_normal(n), 0.7

    def w3(x, y, s):
        d = x[:, None] - y[None, :]
        return np.sum(np.exp(-(d**2) / (2 * s**2)))

    with fg.use_engine("numpy"), track_allocations() as mem:  # numpy: nothing to compile
        gx, gy, gs = fg.grad(w3, argnums=(0, 1, 2))(x, y, s)
    d = x[:, None] - y[None, :]
    k = np.exp(-(d**2) / (2 * s**2))
    np.testing.assert_allclose(gx, np.sum(-k * d / s**2, axis=1), rtol=1e-9)
    np.testing.assert_allclose(gs, np.sum(k * d**2 / s**3), rtol=1e-9)
    assert mem.peak_bytes < n * n * 8 / 4, mem  # N x N float64: 18 MB; block scratch: ~2 MB

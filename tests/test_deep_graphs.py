"""Graphs of unrolled loops, 10,000 steps deep (issue 14, item 7): no walk recurses, and the
planner cuts long chains into kernels of at most ``plan.CHAIN`` ops."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import plan
from fusegrad.tangents import BroadcastThunk, Thunk, unthunk

STEPS = 10_000
assert STEPS > 5 * sys.getrecursionlimit()  # deep enough that any recursive walk would fail
# Through the AD layers a step costs ~1-3 ms of Python (rules, tape, planner): 10^4 steps run
# under -m slow, and 2.5 * 10^3 (still past the recursion limit) by default.
AD_STEPS = [2_500, pytest.param(STEPS, marks=pytest.mark.slow)]


def ema(x, steps=STEPS):
    s = 0.0 * x
    for _ in range(steps):
        s = 0.9 * s + 0.1 * x
    return s


def horner(x, steps=STEPS):
    p = 0.0 * x
    for _ in range(steps):
        p = p * x + 1.0
    return p


@pytest.mark.parametrize("steps", AD_STEPS)
def test_grad_of_an_ema(steps):
    x = np.linspace(0.0, 1.0, 8)
    g = fg.grad(lambda v: np.sum(ema(v, steps)))(x)
    np.testing.assert_allclose(g, 1 - 0.9**steps)


@pytest.mark.parametrize("steps", AD_STEPS)
def test_value_and_grad_of_horners_rule(steps):
    x = np.linspace(0.05, 0.5, 8)
    v, g = fg.value_and_grad(lambda v: np.sum(horner(v, steps)))(x)
    np.testing.assert_allclose(v, np.sum(1 / (1 - x)), rtol=1e-12)  # x**STEPS underflows
    np.testing.assert_allclose(g, 1 / (1 - x) ** 2, rtol=1e-10)


@pytest.mark.parametrize("steps", AD_STEPS)
def test_vjp_of_an_unrolled_rnn_cell(steps):
    w = np.linspace(0.1, 0.9, 6)
    xs = np.sin(np.arange(steps) * 0.1)

    def run(w):
        h = 0.0 * w
        for t in range(steps):
            h = np.tanh(w * h + xs[t])
        return h

    h_want, dh = np.zeros(6), np.zeros(6)  # forward sensitivity dh/dw, by hand
    for t in range(steps):
        h_new = np.tanh(w * h_want + xs[t])
        dh = (1 - h_new**2) * (h_want + w * dh)
        h_want = h_new
    h, f_vjp = fg.vjp(run, w)
    (g,) = f_vjp(np.ones(6))
    np.testing.assert_allclose(h, h_want, rtol=1e-12)
    np.testing.assert_allclose(g, dh, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("steps", AD_STEPS)
def test_jvp_of_an_ema(steps):
    x = np.linspace(0.0, 1.0, 8)
    y, t = fg.jvp(lambda v: ema(v, steps), (x,), (np.ones(8),))
    np.testing.assert_allclose(y, x * (1 - 0.9**steps))
    np.testing.assert_allclose(t, 1 - 0.9**steps)


def test_lazy_chain_is_cut_into_short_kernels(engine):
    z = fl.asarray(np.zeros(16))
    for _ in range(STEPS):
        z = z + 1.0
    with fl.recording() as rec:
        value = np.asarray(z)
    np.testing.assert_array_equal(value, STEPS)
    kernels = [e for e in rec if e["event"] == "kernel"]
    assert max(len(k["ops"]) for k in kernels) <= plan.CHAIN
    assert len(kernels) >= STEPS // plan.CHAIN
    assert any("cuts a chain" in e.get("reason", "") for e in rec)


def test_lazy_chain_of_reductions_and_movement():
    z = fl.asarray(np.ones((4, 3)))
    for _ in range(300):  # each step moves (transposes) the whole state
        z = (z + np.sum(z, axis=1, keepdims=True) * 1e-3).T.T
    want = np.ones((4, 3))
    for _ in range(300):  # each step moves (transposes) the whole state
        want = want + np.sum(want, axis=1, keepdims=True) * 1e-3
    np.testing.assert_allclose(np.asarray(z), want, rtol=1e-12)


def test_small_graphs_are_not_cut():
    x = fl.asarray(np.linspace(0, 1, 10))
    y = x
    for _ in range(plan.CHAIN + 10):  # a long chain, but a graph below CUT_FROM nodes
        y = y * 1.0001
    with fl.recording() as rec:
        np.asarray(y)
    assert [e["event"] for e in rec].count("kernel") == 1


def test_nested_thunks_and_a_long_broadcast_thunk_chain():
    t = Thunk(lambda: 1.0)
    for _ in range(STEPS):
        t = Thunk(lambda t=t: t)  # each layer returns the next thunk
    assert unthunk(t) == 1.0
    b = BroadcastThunk(fl.asarray(np.zeros(5)))
    for _ in range(STEPS):
        b = b + 1.0
    np.testing.assert_array_equal(unthunk(b), STEPS)


@pytest.mark.parametrize("steps", [600])
def test_the_reported_ema_of_600_steps_in_grad(steps):
    g = fg.grad(lambda v: np.sum(ema(v, steps)))(np.ones(3))
    np.testing.assert_allclose(g, 1 - 0.9**steps)

"""The planner's walks stay linear in the size of the graph (issue 17): what the later kernels of
one domain read is counted once (``lazy/readers.py``), not walked again for every kernel. Work is
counted (Python calls, answers), never timed."""

from __future__ import annotations

import cProfile
import pstats

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import plan, readers
from fusegrad.lazy.nodes import Map, make_map, make_reduce
from fusegrad.testing import check_grads

UNARY = ("exp", "tanh", "negative")
BINARY = ("add", "multiply", "subtract")


def random_graph(rng, n_leaves=3, n_maps=40):
    nodes = [fl.asarray(rng.standard_normal(4)) for _ in range(n_leaves)]
    for _ in range(n_maps):
        if rng.random() < 0.3:
            a = nodes[rng.integers(len(nodes))]
            nodes.append(make_map(str(rng.choice(UNARY)), (a,)))
        else:
            i, j = rng.integers(len(nodes), size=2)  # i == j is an edge counted twice (x * x)
            nodes.append(make_map(str(rng.choice(BINARY)), (nodes[i], nodes[j])))
    maps = [n for n in nodes if type(n) is Map]
    return list({id(n): n for n in maps}.values())  # (hash-consing may return a node twice)


def read_later_by_walking(mine, later_outputs):
    """The definition: the maps of ``mine`` that a walk down the later outputs reaches, not
    going below a map of ``mine`` (what ``plan._shared`` once walked for every kernel)."""
    found, stack = set(), [b for o in later_outputs for b in plan._bodies(o)]
    while stack:
        n = stack.pop()
        if type(n) is not Map or n.cached is not None or id(n) in found:
            continue
        found.add(id(n))
        if id(n) not in mine:
            stack.extend(n.args)
    return found & set(mine)


@pytest.mark.parametrize("seed", range(40))
def test_later_readers_agree_with_walking_every_later_graph(seed):
    rng = np.random.default_rng(seed)
    maps = random_graph(rng)
    outputs = [maps[i] for i in rng.permutation(len(maps))[:12]]
    outputs += [make_reduce("sum", maps[-1], (0,), ()), make_reduce("max", maps[-2], (0,), ())]
    chunk = 3
    later = readers.LaterReaders(outputs, plan._bodies)
    checked = 0
    for i in range(0, len(outputs), chunk):
        later.done(outputs[i : i + chunk])
        part = [o for o in outputs[i : i + chunk] if o.cached is None]
        mine = plan._maps_under([b for o in part for b in plan._bodies(o)])
        got = {id(n) for n in later.read_later(mine)}
        rest = [o for o in outputs[i + chunk :] if o.cached is None]
        assert got == read_later_by_walking(mine, rest)
        checked += len(got)
        # "Run" the kernel: its outputs and some of its maps (stored) now hold values; some of
        # them may be outputs of later kernels, as a value two kernels share is.
        stored = [n for n in mine.values() if rng.random() < 0.3]
        for n in part + stored:
            n.cached = np.zeros(n.shape, n.dtype)
        later.computed(part + stored)
    if seed == 0:
        assert checked > 0  # the seeds do share values between kernels


def materialize_every_step_calls(steps):
    """Python calls (cProfile's count, deterministic) of materialising every step of a lazy RNN
    at once: one domain, ``steps`` outputs, ``steps / MAX_OUTPUTS`` kernels sharing values."""
    w = fl.asarray(np.linspace(0.1, 0.9, 6))
    xs = np.sin(np.arange(steps) * 0.1)
    h, hs = 0.0 * w, []
    for t in range(steps):
        h = np.tanh(w * h + xs[t])
        hs.append(h)
    profile = cProfile.Profile()
    with fg.use_engine("numpy"), plan.counting() as work:
        profile.enable()
        values = plan.materialize(*hs)
        profile.disable()
    want, hv = [], np.zeros(6)
    for t in range(steps):
        hv = np.tanh(np.linspace(0.1, 0.9, 6) * hv + xs[t])
        want.append(hv)
    np.testing.assert_allclose(np.array(values), np.array(want), rtol=1e-12)
    assert work.kernels >= steps // plan.MAX_OUTPUTS
    return pstats.Stats(profile).total_calls


def test_planning_every_step_of_a_loop_is_linear_in_the_steps():
    # Before the reader counts: 1.18M calls at 1000 steps, 2.88M at 2000, 8.03M at 4000 (each
    # kernel walked every later kernel's graph); now 0.96M, 1.88M, 3.75M.
    small, large = materialize_every_step_calls(1500), materialize_every_step_calls(3000)
    assert large <= 2.2 * small, (small, large)


# Two plans that never ended (found by test_ad_programs' random programs, small-array path off):
# selection sums found again inside their own terms at every level, and an expensive value whose
# stored form was a leaf (moving it down computed it) planned as pending again and again.
def _self_outer_steps(x):
    for _ in range(3):
        x = x + x[:, 0][:, None] * x[0][None, :]
    return np.sum(x)


def _pow_steps(x, full):
    x = x * (x[:, 0][:, None] * x[0][None, :])
    x = (x * x + 1.0) ** (0.5 * np.tanh(full))
    x = (x * x + 1.0) ** (0.5 * np.tanh(x[:, 0][:, None] * x[0][None, :]))
    return np.sum(x)


@pytest.mark.parametrize("shape", [(4, 3), (4, 300), (300, 4)])
def test_nested_selection_sums_plan_to_an_end(shape):
    x = 0.1 * np.random.default_rng(0).standard_normal(shape)
    _, pullback = fg.vjp(_self_outer_steps, x)
    got = pullback(1.3)[0]  # (a cotangent of 1 took another path)
    with fg.use_engine("numpy"):
        check_grads(_self_outer_steps, modes=("rev",))(x)
    np.testing.assert_allclose(got, 1.3 * fg.grad(_self_outer_steps)(x), rtol=1e-12)


def test_an_expensive_value_computed_while_planning_is_not_planned_again():
    rng = np.random.default_rng(3)
    x, full = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    check_grads(_pow_steps, modes=("rev",))(x, full)


def _chain(x, ops):
    for k in range(ops):
        x = np.tanh(x) if k % 2 else x * 1.01 + 0.1
    return x


@pytest.mark.parametrize(
    "make_arg, inlined",
    [
        (lambda x: np.exp(x) * x, True),  # a short graph: sliced lazily
        (lambda x: _chain(x, 40), False),  # 80 maps: slicing it would compute it
        # a sum over 300 elements under it: it cannot be sliced without computing that sum
        (lambda x: x * np.sum(np.exp(np.ones((4, 300)) * x[:, :1]), axis=1, keepdims=True), False),
    ],
    ids=["short", "deep", "long-sum-under"],
)
def test_inlining_a_short_reduction_computes_nothing(make_arg, inlined):
    # The planner inlines a short reduction while collecting a kernel's nodes: computing part of
    # the graph then (with nodes forgetting their arguments) left collected maps without operands.
    x = fl.asarray(np.random.default_rng(0).standard_normal((4, 3)))
    total = np.sum(make_arg(x), axis=0)
    with plan.counting() as work:
        sub = plan.inline(total)
    assert work.kernels == 0 and total.arg.cached is None
    assert (sub is not None) == inlined
    if inlined:
        assert type(sub) is Map and sub.shape == total.shape
        np.testing.assert_allclose(plan.materialize(sub), np.sum(make_arg(x.array), axis=0))


def test_inlining_is_decided_once_for_a_node():
    # The walk that schedules a kernel's prerequisites and the one that builds the kernel must
    # agree, though values computed between them change what slicing the argument gives.
    x = fl.asarray(np.random.default_rng(1).standard_normal((4, 3)))
    inner = _chain(x, 6)
    total = np.sum(inner * np.exp(inner), axis=0)
    sub = plan.inline(total)
    plan.materialize(inner)
    assert sub is not None and plan.inline(total) is sub
    np.testing.assert_allclose(
        plan.materialize(total), np.sum(plan.materialize(inner) * np.exp(inner.cached), axis=0)
    )

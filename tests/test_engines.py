"""Engines behind one interface: the registry, ``auto``'s choice by cost, ops an engine has no
entry for, a new engine registered from outside, the per-thread engine choice, and walks over
very long kernels (no recursion)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import engines, ops
from fusegrad.lazy.engines import numba_codegen, numba_engine, numpy_blocked, registry
from fusegrad.lazy.kernel import Instr, Kernel, Output

F8, C16 = np.dtype("f8"), np.dtype("c16")
needs_numba = pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")


def unary_kernel(op: str, n: int, dtype=F8) -> Kernel:
    x = np.linspace(0.1, 0.9, n).astype(dtype)
    return Kernel((n,), (x,), (), (Instr(op, (0,), dtype),), (Output(1, None, (), dtype),))


def test_every_engine_has_the_interface():
    for name, e in registry.registered().items():
        assert isinstance(e, engines.Engine), name
        assert e.name == name
    assert engines.names()[:2] == ("auto", "numpy")
    assert "numba" in engines.names()


def test_the_reference_engine_has_every_op_of_the_table():
    assert all(op in numpy_blocked.ops for op in ops.OPS)
    assert "cast" in numpy_blocked.ops and "where" in numpy_blocked.ops


def test_numba_supports_an_op_exactly_when_it_has_an_entry():
    assert set(numba_engine.ops) == set(numba_codegen.OP_EXPR) | {"cast", "where"}
    k = unary_kernel("tanh", 10)
    assert numba_engine.supports(k)
    assert registry.missing_ops(k)["numba"] is None


@pytest.fixture
def spacing(monkeypatch):
    """``np.spacing`` added to the op table (as a contributor would add an op) with no numba
    entry: the reference engine has it at once, numba does not."""
    op = ops.Op("spacing", np.spacing, 1, False)
    monkeypatch.setitem(ops.OPS, "spacing", op)
    monkeypatch.setitem(ops.BY_UFUNC, np.spacing, op)
    return op


def test_auto_runs_an_op_numba_lacks_on_an_engine_that_has_it(spacing):
    x = np.linspace(1.0, 2.0, 200_000)  # numba's size: auto would pick it for arithmetic
    lazy = np.spacing(fl.asarray(x)) * 2.0
    assert isinstance(lazy, fl.LazyArray)
    with fg.use_engine("auto"), fl.recording() as rec:
        got = fl.materialize(lazy)
    np.testing.assert_array_equal(got, np.spacing(x) * 2.0)
    assert [r["engine"] for r in rec if r.get("event") == "kernel"] == ["numpy"]
    k = unary_kernel("spacing", 200_000)
    assert registry.missing_ops(k)["numba"] == "spacing"
    assert not numba_engine.supports(k)
    with fg.use_engine("auto"):
        assert engines.choose(k) == "numpy"


@needs_numba
def test_numba_forced_on_an_op_it_lacks_is_a_clear_error(spacing):
    x = np.linspace(1.0, 2.0, 1000)
    with fg.use_engine("numba"):
        with pytest.raises(engines.UnsupportedKernel) as err:
            fl.materialize(np.spacing(fl.asarray(x)) + 1.0)
    msg = str(err.value)
    assert "'numba'" in msg and "'spacing'" in msg and "use_engine('auto')" in msg
    assert "'numpy'" in msg
    assert isinstance(err.value, NotImplementedError)


@needs_numba
def test_a_kernel_numba_declines_runs_on_the_reference_engine():
    # complex values never reach numba kernels: numba forced still runs this one, on NumPy
    k = unary_kernel("exp", 50, C16)
    with fg.use_engine("numba"):
        assert engines.choose(k) == "numpy"
        (out,), name = engines.run(k)
    assert name == "numpy"
    np.testing.assert_allclose(out, np.exp(k.inputs[0]))


def _old_rule(k: Kernel) -> str:
    """The ``auto`` rule before engines had a cost hint: numba when it supports and prefers."""
    nb = numba_engine
    return "numba" if nb.available() and nb.supports(k) and nb.prefers(k) else "numpy"


@needs_numba
@pytest.mark.parametrize(
    "op, n, dtype",
    [
        ("add", 10, F8),  # small, arithmetic, not compiled: numpy
        ("square", 200_000, F8),  # large arithmetic: numba
        ("tanh", 200_000, F8),  # numba_math's vectorised tanh: numba
        ("sin", 200_000, F8),  # a scalar libm call per point: numpy at every size
        ("sin", 10, F8),
        ("exp", 200_000, C16),  # complex: numba declines
        ("tanh", 200_000, np.dtype("f4")),
    ],
)
def test_auto_chooses_as_before_the_cost_hint(op, n, dtype):
    if op == "add":
        x = np.arange(float(n))
        k = Kernel((n,), (x, x), (), (Instr("add", (0, 1), F8),), (Output(2, None, (), F8),))
    else:
        k = unary_kernel(op, n, dtype)
    with fg.use_engine("auto"):
        assert engines.choose(k) == _old_rule(k)
    assert (numba_engine.cost(k) < numpy_blocked.cost(k)) == numba_engine.prefers(k)


@needs_numba
def test_auto_keeps_compiled_small_kernels_on_numba():
    k = Kernel(
        (7,),
        (np.arange(7.0),),
        (3.0,),
        (Instr("multiply", (0, 1), F8),),
        (Output(2, None, (), F8),),
    )
    with fg.use_engine("numba"):
        engines.run(k)
    assert numba_engine.is_compiled(k)
    with fg.use_engine("auto"):
        assert engines.choose(k) == "numba"


class CountingEngine:
    """A new engine as a contributor would write one: NumPy's results, counted, at a cost that
    undercuts every other engine on kernels of ``add`` only."""

    name = "counting"
    ops = frozenset({"add", "multiply"})

    def __init__(self):
        self.runs = 0

    def available(self):
        return True

    def supports(self, kernel):
        return all(o.mirror is None for o in kernel.outputs)

    def cost(self, kernel):
        return 0.01 if all(i.op == "add" for i in kernel.program) else 10.0

    def run(self, kernel):
        self.runs += 1
        return numpy_blocked.run(kernel)


@pytest.fixture
def counting():
    e = engines.register(CountingEngine())
    try:
        yield e
    finally:
        registry.unregister("counting")


def test_a_registered_engine_runs_by_name_and_joins_auto_by_cost(counting, monkeypatch):
    x = np.linspace(0.0, 1.0, 500)
    assert "counting" in engines.names()
    with fg.use_engine("counting"):
        g = fg.grad(lambda v: np.sum(v * v + 2.0 * v))(x)
    np.testing.assert_allclose(g, 2 * x + 2.0, rtol=1e-14)
    assert counting.runs >= 1
    before = counting.runs
    with fg.use_engine("auto"), fl.recording() as rec:
        fl.materialize(fl.asarray(x) + 1.0)  # add only: the new engine is cheapest
        fl.materialize(np.sin(fl.asarray(x)))  # an op it lacks: not given to it
    kernels = [r["engine"] for r in rec if r.get("event") == "kernel"]
    assert kernels[0] == "counting" and kernels[1] != "counting"
    assert counting.runs == before + 1
    monkeypatch.setenv("FUSEGRAD_ENGINE", "counting")
    assert engines.current() == "counting"
    with pytest.raises(engines.UnsupportedKernel, match="'counting' has no entry for op 'sin'"):
        fl.materialize(np.sin(fl.asarray(x)))


def test_registering_checks_the_interface(counting):
    class NoRun:
        name, ops = "norun", frozenset()

        def available(self):
            return True

        supports = cost = available

    with pytest.raises(TypeError, match="an engine needs run"):
        engines.register(NoRun())
    with pytest.raises(ValueError, match="registered already"):
        engines.register(CountingEngine())
    engines.register(counting)  # the same object again is fine
    auto = CountingEngine()
    auto.name = "auto"
    with pytest.raises(ValueError, match="other than 'auto'"):
        engines.register(auto)
    with pytest.raises(ValueError, match="cannot be removed"):
        registry.unregister("numpy")


def test_an_unknown_engine_name_lists_the_engines():
    with pytest.raises(ValueError, match="unknown engine 'gpu'; choose one of auto, numpy"):
        with fg.use_engine("gpu"):
            pass


def test_use_engine_is_per_thread(monkeypatch):
    monkeypatch.delenv("FUSEGRAD_ENGINE", raising=False)
    barrier = threading.Barrier(2, timeout=30)
    seen: dict[str, object] = {}
    x = np.linspace(0.0, 1.0, 50)

    def inside():
        with fg.use_engine("numpy"):
            barrier.wait()  # 1: the other thread looks while this block is open
            seen["inside"] = engines.current()
            barrier.wait()  # 2
        seen["inside after"] = engines.current()

    def outside():
        barrier.wait()  # 1
        seen["outside"] = engines.current()
        with fg.use_engine("auto"), fl.recording() as rec:
            fl.materialize(np.sin(fl.asarray(x)))  # auto's choice at every size: numpy
        seen["outside kernel"] = rec[-1]["engine"]
        barrier.wait()  # 2

    with fg.use_engine("numba" if numba_engine.available() else "numpy"):
        main = engines.current()
        threads = [threading.Thread(target=inside), threading.Thread(target=outside)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert engines.current() == main  # neither thread changed this one's choice
    assert seen["inside"] == "numpy" and seen["inside after"] == "auto"
    assert seen["outside"] == "auto"  # not the other thread's "numpy", nor this one's
    assert seen["outside kernel"] == "numpy"


def chain_kernel(steps: int, n: int = 64) -> Kernel:
    """``x`` through ``steps`` alternating ops (a 10,000-step loop unrolled into one kernel)."""
    x = np.linspace(0.0, 1.0, n)
    prog = []
    for j in range(steps):
        prev = 0 if j == 0 else 1 + j  # operand ids: x, the constant 0.5, then instructions
        prog.append(Instr("multiply" if j % 2 else "add", (prev, 1), F8))
    v = 1 + steps
    return Kernel(
        (n,), (x,), (0.5,), tuple(prog), (Output(v, None, (), F8), Output(v, "sum", (0,), F8))
    )


def chain_reference(steps: int, n: int = 64) -> np.ndarray:
    v = np.linspace(0.0, 1.0, n)
    for j in range(steps):
        v = v * 0.5 if j % 2 else v + 0.5
    return v


def test_engines_walk_a_10000_op_kernel_without_recursion():
    steps = 10_000
    k = chain_kernel(steps)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(400, limit // 4))  # far below the chain's length
    try:
        out, total = numpy_blocked.run(k)
        assert registry.missing_ops(k)["numba"] is None
        plan = numba_codegen.analyse(1, ((F8, (False,)),), ("float",), k.program, k.outputs)
        assert plan.error is None
        src = numba_codegen.generate_source(plan)
    finally:
        sys.setrecursionlimit(limit)
    want = chain_reference(steps)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_allclose(total, [want.sum()], rtol=1e-12)
    assert src.count("\n") > steps  # one statement per op, flat
    compile(src, "<chain kernel>", "exec")  # Python's compiler takes it as it is


@needs_numba
def test_numba_runs_a_long_chain_kernel():
    steps = 300  # what the planner leaves in one kernel is far shorter than 10,000 steps
    k = chain_kernel(steps)
    with fg.use_engine("numba"):
        (out, total), name = engines.run(k)
    assert name == "numba"
    want = chain_reference(steps)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_allclose(total, [want.sum()], rtol=1e-12)

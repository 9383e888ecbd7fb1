"""Engines behind one interface: the registry, ``auto``'s choice by cost, ops an engine has no
entry for, a new engine registered from outside, the per-thread engine choice, and walks over
very long kernels (no recursion)."""

from __future__ import annotations

import sys
import threading
import warnings

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
def test_auto_keeps_compiled_kernels_on_numba_from_numba_min_points():
    def scaled(n):
        x = np.arange(float(n))
        return Kernel(
            (n,), (x,), (3.0,), (Instr("multiply", (0, 1), F8),), (Output(2, None, (), F8),)
        )

    with fg.use_engine("numba"):
        engines.run(scaled(7))
    big, tiny = scaled(registry.NUMBA_MIN), scaled(7)
    assert numba_engine.is_compiled(big)  # one compiled function serves every size
    with fg.use_engine("auto"):
        assert engines.choose(big) == "numba"
        # below NUMBA_MIN, numba's call costs more than the whole-domain ufunc calls
        assert engines.choose(tiny) == "numpy"


def _fresh_kernel(n: int, salt: str) -> Kernel:
    """A kernel of a signature no other test compiles (its op sequence is spelled by ``salt``)."""
    x = np.linspace(0.0, 1.0, n)
    prog, last = [], 0
    for op in salt.split(","):
        prog.append(Instr(op, (last, 0), F8))
        last = len(prog)
    return Kernel((n,), (x,), (), tuple(prog), (Output(last, None, (), F8),))


@needs_numba
def test_a_kernel_run_in_a_loop_goes_to_numba_once_hot():
    k = _fresh_kernel(registry.HOT_MIN, "maximum,subtract,minimum,add,maximum")
    assert not numba_engine.is_compiled(k)
    with fg.use_engine("auto"):
        chosen = [engines.choose(k) for _ in range(registry.HOT_CALLS + 1)]
    assert chosen == ["numpy"] * (registry.HOT_CALLS - 1) + ["numba"] * 2
    assert numba_engine.prefers(k)


@needs_numba
def test_a_small_kernel_in_a_loop_stays_on_numpy():
    k = _fresh_kernel(registry.HOT_MIN - 1, "minimum,subtract,maximum,add,minimum")
    with fg.use_engine("auto"):
        chosen = {engines.choose(k) for _ in range(3 * registry.HOT_CALLS)}
    assert chosen == {"numpy"}


@needs_numba
def test_a_replayed_kernel_goes_to_numba_by_points_or_instructions():
    """In a replayed program numpy_blocked's cost is per instruction at any size: a tiny kernel
    of several instructions (an HMM's 6-point steps) is numba's, a one-instruction one not."""
    assert registry.REPLAY_NUMBA_MIN > 6 and registry.REPLAY_NUMBA_MIN_OPS <= 3
    several = _fresh_kernel(6, "add,multiply,subtract")
    one = _fresh_kernel(6, "add")
    wide = _fresh_kernel(registry.REPLAY_NUMBA_MIN, "add")
    with fg.use_engine("auto"):
        assert engines.choose_hot(several, "numpy", replayed=True) == "numba"
        assert engines.choose_hot(one, "numpy", replayed=True) == "numpy"
        assert engines.choose_hot(wide, "numpy", replayed=True) == "numba"


def _whole_and_blocked(k: Kernel) -> tuple[list, list]:
    a = [np.empty(k.output_shape(o), o.dtype) for o in k.outputs]
    b = [np.empty(k.output_shape(o), o.dtype) for o in k.outputs]
    numpy_blocked._run_whole(k, a)
    numpy_blocked._run_blocked(k, b)
    return a, b


def test_the_whole_domain_path_matches_blocks_and_numpy():
    rng = np.random.default_rng(1)
    x, row = rng.standard_normal((40, 30)), rng.standard_normal((1, 30))
    col = rng.standard_normal((40, 1))
    B = np.dtype("?")
    k = Kernel(
        (40, 30),
        (x, row, col),
        (0.5,),
        (
            Instr("multiply", (1, 3), F8),  # 4: a row only (natural shape 1x30)
            Instr("add", (0, 4), F8),  # 5
            Instr("greater", (5, 2), B),  # 6
            Instr("where", (6, 5, 2), F8),  # 7
            Instr("tanh", (7,), F8),  # 8
            Instr("cast", (8,), np.dtype("f4")),  # 9
        ),
        (
            Output(8, None, (), F8),  # written in place
            Output(8, None, (), F8),  # the same value again: a copy
            Output(4, None, (), F8),  # a row broadcast to the domain
            Output(0, None, (), F8),  # an input
            Output(9, None, (), np.dtype("f4")),
            Output(5, "sum", (0,), F8),
            Output(7, "max", (0, 1), F8),
        ),
    )
    v4 = row * 0.5
    v5 = x + v4
    v7 = np.where(v5 > col, v5, col)
    want = [np.tanh(v7), np.tanh(v7), np.broadcast_to(v4, x.shape), x]
    want += [np.tanh(v7).astype("f4"), v5.sum(0, keepdims=True), v7.max(keepdims=True)]
    for _ in range(2):  # the second run reuses the cached plan
        whole, blocked = _whole_and_blocked(k)
        for w, b, e in zip(whole, blocked, want):
            np.testing.assert_allclose(w, e, rtol=1e-6)
            np.testing.assert_allclose(b, e, rtol=1e-6)
    assert not np.shares_memory(whole[0], whole[1])


@pytest.mark.parametrize("n", [6, 40_000])  # the whole-domain path, and blocks on threads
def test_the_branch_a_select_does_not_take_does_not_warn(n):
    # where(s > 0, log(s), -inf), as logsumexp's guard: NumPy computes log(0) for the points that
    # take -inf; fusegrad's numpy engine did, with "divide by zero encountered in log", which the
    # user's code (scipy.special.logsumexp) never raises
    s = np.linspace(0.0, 3.0, n).reshape(-1, 2) * (np.arange(n // 2)[:, None] % 3 > 0)
    k = Kernel(
        s.shape, (s,), (0.0, -np.inf),
        (Instr("greater", (0, 1), np.dtype("?")), Instr("log", (0,), F8),
         Instr("where", (3, 4, 2), F8)),
        (Output(5, None, (), F8), Output(5, "sum", (0, 1), F8)),
    )  # fmt: skip
    with np.errstate(divide="ignore"):
        want = np.where(s > 0, np.log(s), -np.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy_blocked.run(k)
        replay = numpy_blocked.replayer(k)
        again = got if replay is None else replay((s,), k.constants)
    for g in (got, again):
        np.testing.assert_array_equal(g[0], want)
        assert g[1].item() == -np.inf
    with pytest.warns(RuntimeWarning, match="divide by zero"):  # no select: as NumPy, it warns
        numpy_blocked.run(Kernel(s.shape, (s,), (), (Instr("log", (0,), F8),),
                                 (Output(1, None, (), F8),)))  # fmt: skip


def test_the_whole_domain_path_keeps_one_temporary_for_a_chain():
    import tracemalloc

    n = numpy_blocked.SMALL
    x = np.linspace(0.0, 1.0, n)
    prog = tuple(Instr(op, (i + 2, 0), F8) for i, op in enumerate(["add", "multiply"] * 3))
    k = Kernel(
        (n,), (x,), (1.5,), (Instr("multiply", (0, 1), F8), *prog), (Output(8, None, (), F8),)
    )
    out = [np.empty(n)]
    numpy_blocked._run_whole(k, out)  # the plan is cached before the measurement
    tracemalloc.start()
    numpy_blocked._run_whole(k, out)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # seven instructions, one live temporary at a time (eager NumPy would hold two) and the
    # last written into the output
    assert peak < 1.5 * x.nbytes, peak
    want = x * 1.5
    for _ in range(3):
        want = (want + x) * x
    np.testing.assert_allclose(out[0], want)


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


def test_the_engine_named_in_the_environment_is_read_at_each_call(monkeypatch):
    # current() reads os.environ's own store and caches the name it parsed: a change (set,
    # the same value set again, unset, a bad name) must be seen at the next call
    for value, want in [("numpy", "numpy"), (" Numba ", "numba"), ("numpy", "numpy"),
                        ("auto", "auto"), ("auto", "auto")]:  # fmt: skip
        monkeypatch.setenv("FUSEGRAD_ENGINE", value)
        assert engines.current() == want
        assert engines.current() == want
    monkeypatch.setenv("FUSEGRAD_ENGINE", "gpu")
    with pytest.raises(ValueError, match="FUSEGRAD_ENGINE='gpu' is not an engine"):
        engines.current()
    monkeypatch.delenv("FUSEGRAD_ENGINE")
    assert engines.current() == "auto"
    monkeypatch.setenv("FUSEGRAD_ENGINE", "numpy")
    with fg.use_engine("numba"):
        assert engines.current() == "numba"  # use_engine comes first
    assert engines.current() == "numpy"

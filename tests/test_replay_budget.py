"""A hot program compiles only what its run has paid for (``fusegrad.lazy.replay_budget``): its
kernels move to numba at ``HOT_REPLAYS`` replays when their compile costs no more than the time
the program has taken, else at a later doubling of its replays; the results never change."""

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.lazy import replay, replay_budget
from fusegrad.lazy.engines import numba_engine


def test_affordable_takes_the_cheapest_within_the_budget():
    costs = {"free": 0.0, "cheap": 0.2, "mid": 0.5, "dear": 4.0}
    assert replay_budget.affordable(costs, 0.0) == {"free"}
    assert replay_budget.affordable(costs, 0.75) == {"free", "cheap", "mid"}
    assert replay_budget.affordable(costs, -3.0) == {"free"}  # overspent: only what is free
    assert replay_budget.affordable(costs, None) == set(costs)


def test_an_unknown_mode_warns_and_budgets(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_JIT_COMPILE", "always")
    with pytest.warns(UserWarning, match="FUSEGRAD_JIT_COMPILE='always' is not one of"):
        assert replay_budget._mode() == "budget"
    monkeypatch.setenv("FUSEGRAD_JIT_COMPILE", " Eager ")
    assert replay_budget._mode() == "eager"


@pytest.fixture
def hot_loop(monkeypatch):
    """A jitted gradient whose kernels numba would compile once the program is hot, the numba
    replayers built (``built``), and the program (``programs[-1]``)."""
    if not numba_engine.available():
        pytest.skip("numba unavailable")
    built: list = []
    real = numba_engine.replayer
    monkeypatch.setattr(numba_engine, "replayer", lambda k: built.append(k) or real(k))
    programs: list = []
    real_program = replay.Recorder.program
    monkeypatch.setattr(
        replay.Recorder,
        "program",
        lambda self, r: (lambda p: programs.append(p) or p)(real_program(self, r)),
    )

    def f(x):
        return np.sum(np.tanh(x * 1.5) ** 2)

    def want(x):
        t = np.tanh(x * 1.5)
        return 2 * t * (1 - t * t) * 1.5

    return fg.jit(fg.grad(f)), want, built, programs


def _replays(jg, want, n, start=0):
    x0 = np.linspace(-1, 1, 600)
    for k in range(start, start + n):
        x = x0 + 0.01 * k
        np.testing.assert_allclose(jg(x), want(x), rtol=1e-13)


def test_a_compile_dearer_than_the_run_waits_until_the_run_pays_for_it(monkeypatch, hot_loop):
    jg, want, built, programs = hot_loop
    monkeypatch.setattr(replay_budget, "MODE", "budget")
    monkeypatch.setattr(numba_engine, "compile_seconds", lambda kernel: 30.0)
    with fg.use_engine("auto"), warnings.catch_warnings():
        warnings.simplefilter("error")
        _replays(jg, want, replay.HOT_REPLAYS + 3)
        program = programs[-1]
        assert built == []  # 30 s of compiling for a run of milliseconds: not yet
        assert program.next_hot == 2 * replay.HOT_REPLAYS
        program.spent += 60.0  # as if the loop had run for a minute
        _replays(jg, want, program.next_hot - program.replays, start=20)
    assert built and all(k.size == 600 for k in built)
    assert program.next_hot == float("inf")  # everything moved: no more looking


@pytest.mark.parametrize(
    "mode, seconds", [("budget", 0.0), ("eager", 1e6)], ids=["compiled already", "eager"]
)
def test_a_free_kernel_or_eager_mode_moves_at_the_hot_replay(monkeypatch, hot_loop, mode, seconds):
    jg, want, built, programs = hot_loop
    monkeypatch.setattr(replay_budget, "MODE", mode)
    monkeypatch.setattr(numba_engine, "compile_seconds", lambda kernel: seconds)
    with fg.use_engine("auto"):
        _replays(jg, want, replay.HOT_REPLAYS + 1)
    assert built and programs[-1].next_hot == float("inf")


def test_a_program_counts_its_recording_and_replays_and_compiles(monkeypatch, hot_loop):
    jg, want, built, programs = hot_loop
    monkeypatch.setattr(replay_budget, "MODE", "budget")
    with fg.use_engine("auto"):
        _replays(jg, want, 1)
        program = programs[-1]
        recorded = program.spent
        assert recorded > 0  # the recording, less the program's first compile
        _replays(jg, want, 3, start=1)
        assert program.spent > recorded
        assert program.compiling >= 0


def test_compile_seconds_is_zero_once_compiled_or_on_disk():
    if not numba_engine.available() or numba_engine.cache_dir() is None:
        pytest.skip("numba or its disk cache unavailable")
    from fusegrad.lazy.kernel import Instr, Kernel, Output

    f8 = np.dtype("f8")
    k = Kernel(
        (5, 3), (np.ones((5, 3)), np.ones(3)), (0.5,),
        (Instr("arcsinh", (0,), f8), Instr("multiply", (3, 1), f8),
         Instr("subtract", (4, 2), f8)),
        (Output(5, "sum", (0,), f8),),
    )  # fmt: skip
    sig = k.signature()
    cold = numba_engine.compile_seconds(k)
    assert cold > 0 or sig in numba_engine._ENTRIES  # unless this process compiled it earlier
    numba_engine.run(k)
    assert numba_engine.compile_seconds(k) == 0.0
    entry = numba_engine._ENTRIES.pop(sig)  # as a new process sees it: on disk only
    try:
        assert numba_engine.compile_seconds(k) == 0.0  # a load: not charged
    finally:
        numba_engine._ENTRIES[sig] = entry


def test_the_hot_compile_is_the_last_compile(monkeypatch):
    # numba compiles a kernel per operand layout: compiled for C-ordered zeros, a replay that
    # passed a strided view (z[:, ::2] of a product) compiled it again inside the replay, where
    # the budget neither expected nor counted it
    if not numba_engine.available():
        pytest.skip("numba unavailable")
    monkeypatch.setattr(replay_budget, "MODE", "eager")
    rng = np.random.default_rng(2)
    x, W = rng.normal(size=(12, 5)), rng.normal(size=(5, 16))

    def f(W):
        z = x @ W
        return np.sum(np.tanh(z[:, ::2]) * (1 / (1 + np.exp(-z[:, 1::2]))))

    known = set(numba_engine._ENTRIES)
    with fg.use_engine("auto"):
        jg = fg.jit(fg.grad(f))
        for k in range(replay.HOT_REPLAYS + 3):
            np.testing.assert_allclose(jg(W + k), fg.grad(f)(W + k), rtol=1e-11, atol=1e-14)
    new = [e for sig, e in numba_engine._ENTRIES.items() if sig not in known]
    assert new  # the hot kernels: each compiled once, for the layouts the replays pass
    assert all(len(d.overloads) == 1 for e in new for d in (e.short, e.long) if d and d.overloads)

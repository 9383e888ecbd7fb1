"""Differential fuzz test of ``fusegrad.jit``: random programs (elementwise ops, broadcasts,
reductions, basic and integer indexing, matmul, einsum, solve, sort, cumsum, element reads used as
numbers and in ``if``, Python-number arguments) give through ``jit(grad)`` and
``jit(value_and_grad)`` what ``grad`` and ``value_and_grad`` give, on several inputs called in
sequence on one jitted function, so that replays (with eager steps between kernels), second
recordings and uncompiled fallbacks are all exercised. Both engines."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.lazy.engines import numba_engine

N = 5
PERMUTATION = np.array([2, 0, 0, 4, 1])  # repeats: the scatter of its gradient accumulates
M = np.random.default_rng(7).normal(size=(N, N)) / N  # a closure constant of the programs
SPD = M @ M.T + np.eye(N)
C = np.random.default_rng(8).uniform(0.5, 1.5, N)  # a closure constant read along the rows

UNARY = {
    "sin": np.sin,
    "tanh": np.tanh,
    "square": np.square,
    "gauss": lambda v: np.exp(-v * v),
    "log1p_sq": lambda v: np.log1p(v * v),
    "reverse": lambda v: v[::-1] if np.ndim(v) else v,
    "permute": lambda v: v[PERMUTATION] if np.ndim(v) == 1 else v,
    "tail": lambda v: v[..., 1:] * 2 if np.ndim(v) == 1 else v,  # shape N - 1: see _fit
    "sum0": lambda v: np.sum(v, axis=0) if np.ndim(v) == 2 else v,
    "mean1": lambda v: np.mean(v, axis=1) if np.ndim(v) == 2 else v,
    "total": np.sum,
    # a pairwise sum of one value (its gradient a mirrored sum: rows and columns in one pass)
    "pairwise": lambda v: (
        np.sum(np.tanh(v[:, None] - v[None, :]), axis=1) if np.ndim(v) == 1 else v
    ),
    "closure_rows": lambda v: v * C[:, None] if np.ndim(v) == 2 else v * C if np.ndim(v) else v,
    # eager steps of a replay (rules that need arrays, and their pullbacks)
    "matmul": lambda v: v @ M if np.ndim(v) else v,
    "einsum": lambda v: np.einsum("...i,ij->...j", v, M) if np.ndim(v) else v,
    "solve": lambda v: np.linalg.solve(SPD, v) if np.ndim(v) else v,
    "sort": lambda v: np.sort(v, axis=-1) if np.ndim(v) else v,
    "cumsum": lambda v: np.cumsum(v, axis=0) if np.ndim(v) else v,
}
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": lambda a, b: a / (1 + b * b),
    "outer": lambda a, b: a[:, None] - b[None, :] if np.ndim(a) == np.ndim(b) == 1 else a + b,
    "matmul": lambda a, b: a @ b if np.ndim(a) and np.ndim(b) and np.ndim(b) <= 2 else a * b,
    "dot_sin": lambda a, b: np.dot(np.sin(a), b) if np.ndim(a) == 1 else a - b,
}


def _fit(v):
    """A value of length N - 1 (a slice) padded back to N with its first element."""
    if np.ndim(v) == 1 and np.shape(v)[0] == N - 1:
        return np.concatenate([v, v[:1]])
    return v


step = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 99)),
    st.tuples(
        st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 99), st.integers(0, 99)
    ),
    st.tuples(st.just("element"), st.integers(0, 99), st.integers(0, N - 1)),  # v[i] as a number
    st.tuples(st.just("branch"), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("number"), st.integers(0, 99)),  # s * v + s**2
    st.tuples(st.just("read"), st.integers(0, 99), st.integers(0, N - 1)),  # float(y[i]) * v
)
programs = st.lists(step, min_size=1, max_size=7)


def run(program, x, y, s):
    """The program on x (differentiated), y (not differentiated: it may be read into Python) and
    the Python float s; a scalar."""
    values = [x, np.cos(x) * 0.5]
    for instr in program:
        kind = instr[0]
        pick = lambda k: values[k % len(values)]  # noqa: E731
        if kind == "unary":
            out = UNARY[instr[1]](pick(instr[2]))
        elif kind == "binary":
            out = BINARY[instr[1]](pick(instr[2]), pick(instr[3]))
        elif kind == "element":
            v = pick(instr[1])
            out = v[(instr[2],) * np.ndim(v)] * x if np.ndim(v) else v * x
        elif kind == "branch":
            v = pick(instr[1])
            e = v[(0,) * np.ndim(v)]
            out = pick(instr[2]) if e > 0 else pick(instr[3]) * 3
        elif kind == "number":
            out = s * pick(instr[1]) + s**2
        else:
            out = float(y[instr[2]]) * pick(instr[1])
        values.append(_fit(out))
    return np.sum(values[-1]) + 0.125 * np.sum(values[-1] * values[-1])


def _close(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, tuple):
            _close(a, b)
            continue
        assert type(a) is type(b), (type(a), type(b))
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def _check(program, seed):
    rng = np.random.default_rng(seed)
    f = lambda x, y, s: run(program, x, y, s)  # noqa: E731
    g, vg = fg.grad(f, argnums=(0, 2)), fg.value_and_grad(f, argnums=(0, 2))
    jg, jvg = fg.jit(g), fg.jit(vg)
    for k in range(4):
        x = rng.uniform(-1.5, 1.5, N)
        y = rng.uniform(-2.0, 2.0, N)
        s = float(rng.uniform(0.25, 2.0)) if k != 3 else 0.75  # k = 3: a value seen again
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # uncompiled signatures warn once
            _close(jg(x, y, s), g(x, y, s))
            _close(jvg(x, y, s), vg(x, y, s))


@pytest.mark.property
@settings(max_examples=30)
@given(program=programs, seed=st.integers(0, 2**16))
def test_jit_grad_agrees_with_grad_numpy_engine(program, seed):
    with fg.use_engine("numpy"):
        _check(program, seed)


@pytest.mark.property
@settings(max_examples=10)
@given(program=programs, seed=st.integers(0, 2**16))
def test_hot_replays_agree_with_grad_numpy_engine(program, seed):
    # past replay.HOT_REPLAYS calls a program runs recompiled, in buffers of its own (products,
    # accumulated sums, merged kernels): every call still gives what grad gives, and what a
    # call returned is never written by the next
    from fusegrad.lazy import replay

    rng = np.random.default_rng(seed)
    f = lambda x, y, s: run(program, x, y, s)  # noqa: E731
    g = fg.grad(f, argnums=(0, 2))
    jg = fg.jit(g)
    kept = []
    with fg.use_engine("numpy"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(replay.HOT_REPLAYS + 2):
            x = rng.uniform(-1.5, 1.5, N)
            y = rng.uniform(-2.0, 2.0, N)
            got = jg(x, y, 0.75)
            _close(got, g(x, y, 0.75))
            kept.append((got, [np.copy(a) for a in got]))
    for got, copies in kept:
        for a, c in zip(got, copies):
            np.testing.assert_array_equal(a, c)


@pytest.fixture
def any_size_in_blocks(monkeypatch):
    """Every program a row plan fits runs in blocks of rows (of 1 or 2), whatever its size;
    the blocked replays are counted, with the closure arrays they read as inputs."""
    from test_replay_rows import blocks_at_any_size

    return blocks_at_any_size(
        monkeypatch, 1, lambda op, slots: any(slots[j] is C for j in op.plan.row_inputs)
    )


@pytest.mark.property
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=programs, seed=st.integers(0, 2**16))
def test_jit_grad_in_blocks_of_rows_agrees_with_grad(any_size_in_blocks, program, seed):
    with fg.use_engine("numpy"):
        _check(program, seed)


def test_the_programs_cover_blocks_reading_closure_arrays(any_size_in_blocks):
    program = [("unary", "closure_rows", 0), ("binary", "mul", 2, 1), ("unary", "tanh", 3)]
    with fg.use_engine("numpy"):
        _check(program, 3)
    assert any(any_size_in_blocks), "no blocked replay read the closure array C"


@pytest.mark.property
@pytest.mark.slow  # each program compiles its kernels; the numpy engine's twin runs by default
@pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")
@settings(max_examples=8)
@given(program=programs, seed=st.integers(0, 2**16))
def test_jit_grad_agrees_with_grad_numba_engine(program, seed):
    with fg.use_engine("numba"):
        _check(program, seed)


def test_the_programs_cover_replays_and_fallbacks():
    # one program of each kind by hand: replayed ones (a slice with bounds among them: its
    # pullback's scatter is a step) and one that falls back (the branch)
    replayed = [("unary", "gauss", 0), ("binary", "outer", 1, 2), ("unary", "sum0", 3)]
    replayed += [("unary", "tail", 4)]
    steps = [("binary", "outer", 0, 1), ("unary", "matmul", 2), ("unary", "solve", 3)]
    steps += [("binary", "matmul", 4, 1), ("unary", "permute", 5), ("unary", "sort", 6)]
    branching = [("element", 0, 2), ("branch", 1, 0, 1), ("number", 2)]
    for program, replayable in ((replayed, True), (steps, True), (branching, False)):
        f = lambda x, y, s, p=program: run(p, x, y, s)  # noqa: E731
        jg = fg.jit(fg.grad(f, argnums=(0, 2)))
        for seed in range(3):
            x = np.random.default_rng(seed).uniform(-1, 1, N)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _close(jg(x, x, 0.5 + seed), fg.grad(f, argnums=(0, 2))(x, x, 0.5 + seed))
        assert all(e.replayable == replayable for e in jg.cache_info())

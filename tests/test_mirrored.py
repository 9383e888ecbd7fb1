"""Mirrored sums: ``out[i] = sum_j v[i, j] + sum_j w[j, i]`` in one pass (``kernel.Output.mirror``).

The planner turns ``rows + cols`` (a variable's cotangents from both sides of a pairwise
expression) into one mirrored output; the numba engine runs it as tiles on a round-robin schedule
that adds straight into the output (``numba_pairs``), the numpy engine as two sums added. Both
are checked against NumPy on random programs, shapes and dtypes, serially and on the threads.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import plan
from fusegrad.lazy.engines import numba_engine, numba_pairs, numpy_blocked
from fusegrad.lazy.kernel import Instr, Kernel, Output
from fusegrad.memory import track_allocations

needs_numba = pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")


# --- the schedule ------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", range(1, 9))
def test_schedule_runs_every_tile_once_and_threads_never_share_a_block(threads):
    phases = numba_pairs.schedule(threads)
    tiles = [tile for phase in phases for mine in phase for tile in mine]
    m = 2 * threads
    assert sorted(tiles) == [(a, b) for a in range(m) for b in range(m)]
    for phase in phases:
        assert len(phase) == threads
        # a tile (a, b) writes output blocks a (its rows) and b (its columns)
        owned = [{blk for tile in mine for blk in tile} for mine in phase]
        assert sum(map(len, owned)) == len(set().union(*owned))


# --- kernels -----------------------------------------------------------------------------------


def _pair_kernel(x, y, rest, dtype, op):
    """A mirrored sum over (n, n, *rest) of f(x_i - y_j) (rows) and -f(x_j - y_i)... as data."""
    dt = np.dtype(dtype)
    n = x.shape[0]
    extra = (slice(None),) * len(rest)
    xi = x[(slice(None), None) + extra]
    yj = y[(None, slice(None)) + extra]
    prog = (
        Instr("subtract", (0, 1), dt),  # 2: d
        Instr(op, (2,), dt),  # 3: f(d)
        Instr("multiply", (3, 2), dt),  # 4: f(d) * d
        Instr("negative", (3,), dt),  # 5: -f(d)
    )
    return Kernel((n, n) + rest, (xi, yj), (), prog, (Output(4, "sum", (1,), dt, mirror=5),))


def _expected(x, y, op):
    xi, yj = x[:, None].astype(np.float64), y[None, :].astype(np.float64)
    d = xi - yj
    f = getattr(np, op)(d)
    return (f * d).sum(axis=1) + (-f).sum(axis=0)


@pytest.mark.slow  # a compile per new signature; test_planned_rows_plus_cols runs by default
@needs_numba
@settings(max_examples=25)
@given(
    n=st.integers(1, 40),
    rest=st.sampled_from([(), (1,), (3,), (2, 2)]),
    dtype=st.sampled_from(["f8", "f4"]),
    op=st.sampled_from(["tanh", "exp", "square"]),
    threads=st.sampled_from([None, 2, 3]),
)
def test_mirrored_kernel_matches_numpy_on_both_engines(n, rest, dtype, op, threads):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n,) + rest).astype(dtype)
    y = rng.standard_normal((n,) + rest).astype(dtype)
    k = _pair_kernel(x, y, rest, dtype, op)
    want = _expected(x, y, op)
    tol = 1e-12 if dtype == "f8" else 2e-5
    scale = max(1.0, np.abs(want).max())
    old = numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK, numba_engine._nthreads
    try:
        if threads:  # tiles of a few rows on the worker threads, schedule and all
            numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK = 0, 1
            numba_engine._nthreads = lambda: threads
        (got,) = numba_engine.run(k)
    finally:
        numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK, numba_engine._nthreads = old
    (ref,) = numpy_blocked.run(k)
    assert got.shape == ref.shape == (n, 1) + rest
    assert got.dtype == ref.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(ref.reshape(want.shape), want, rtol=tol, atol=tol * scale)


@needs_numba
def test_mirrored_kernel_on_the_threads_at_size_allocates_the_output_and_a_strip(monkeypatch):
    monkeypatch.setattr(numba_engine, "_nthreads", lambda: 2)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(3000), rng.standard_normal(3000)
    k = _pair_kernel(x, y, (), "f8", "tanh")
    numba_engine.run(k)
    with track_allocations() as mem:
        for _ in range(6):
            (got,) = numba_engine.run(k)
    np.testing.assert_allclose(got.ravel(), _expected(x, y, "tanh"), rtol=1e-11, atol=1e-11)
    # Alive at the end: the last call's output, and the scratch (a strip and a band of row
    # compensations) of any pool thread that ran tiles for the first time here (which thread
    # takes a phase's tiles is up to the pool): kept between calls, never one per call.
    strips = [a for a in mem.largest if "numba_pairs.py" in a.where]
    assert [a.bytes for a in mem.largest if a not in strips] == [8 * 3000], mem
    one_thread = 8 * (numba_pairs.STRIP + numba_pairs.BAND)
    assert len(strips) % 2 == 0 and len(strips) <= 2 * numpy_blocked.pool().workers, mem
    assert sum(a.bytes for a in strips) == len(strips) // 2 * one_thread, mem
    assert mem.peak_bytes < 2 * 8 * 3000 + 7_000 + len(strips) // 2 * one_thread, mem


def test_scratch_strips_are_kept_per_thread_and_zeroed_again_after_a_failure():
    f8 = np.dtype("f8")
    (s,) = numba_pairs.take_strips([((256,), f8)])
    s[:] = 1.0  # as a kernel that raised would leave it
    (again,) = numba_pairs.take_strips([((256,), f8)])
    assert again is s and not again.any()
    numba_pairs.give_back([again])
    other = []
    t = threading.Thread(target=lambda: other.extend(numba_pairs.take_strips([((256,), f8)])))
    t.start()
    t.join()
    assert other[0] is not s  # each thread has its own


@needs_numba
def test_mirrored_sum_is_as_accurate_as_numpy(monkeypatch):
    """Mean error relative to sum|x| against math.fsum, rows plus columns of lognormal values:
    within NumPy's own (a pairwise row sum plus a sequential column sum)."""
    monkeypatch.setattr(numba_engine, "_nthreads", lambda: 2)
    n = 2000
    rng = np.random.default_rng(2)
    v, w = rng.lognormal(size=(n, n)), rng.lognormal(size=(n, n))
    dt = np.dtype("f8")
    k = Kernel((n, n), (v, w), (), (), (Output(0, "sum", (1,), dt, mirror=1),))
    (got,) = numba_engine.run(k)
    want = np.array([math.fsum(np.concatenate([v[i], w[:, i]])) for i in range(n)])
    mags = v.sum(axis=1) + w.sum(axis=0)
    ours = np.mean(np.abs(got.ravel() - want) / mags)
    numpys = np.mean(np.abs(v.sum(axis=1) + w.sum(axis=0) - want) / mags)
    assert ours <= max(numpys, 2.0**-53), (ours, numpys)


def test_a_mirror_needs_a_sum_over_axis_1_of_a_square_domain():
    f8 = np.dtype("f8")
    x = np.ones((3, 1))
    with pytest.raises(ValueError, match="mirrored output must be a sum over axis 1"):
        Kernel((3, 4), (x,), (), (), (Output(0, "sum", (1,), f8, mirror=0),))
    with pytest.raises(ValueError, match="mirrored output must be a sum over axis 1"):
        Kernel((3, 3), (x,), (), (), (Output(0, "sum", (0,), f8, mirror=0),))


# --- the planner -------------------------------------------------------------------------------


def _kernels(*nodes):
    with plan.recording() as rec:
        out = plan.materialize(*nodes)
    return out, [e for e in rec if e["event"] == "kernel"]


@pytest.mark.parametrize("order", ["rows + cols", "cols + rows"])
def test_rows_plus_cols_is_one_mirrored_kernel(engine, order):
    x = np.linspace(-1.0, 1.0, 50)
    v = fl.asarray(x)
    t = np.tanh(v[:, None] - v[None, :])
    rows, cols = np.sum(t * t, axis=1), np.sum(-t, axis=0)
    out, kernels = _kernels(rows + cols if order == "rows + cols" else cols + rows)
    te = np.tanh(x[:, None] - x[None, :])
    np.testing.assert_allclose(out, (te * te).sum(1) - te.sum(0), rtol=1e-12, atol=1e-12)
    (k,) = kernels
    assert k["domain"] == (50, 50) and [o[0] for o in k["outputs"]] == ["mirrored sum"]


def test_mirrored_sum_inside_a_larger_expression(engine):
    """(rows + cols) * 2 + x: the mirrored sum runs first, its consumer reads it as an array."""
    x = np.linspace(-1.0, 1.0, 40)
    v = fl.asarray(x)
    d = v[:, None] - v[None, :]
    out, kernels = _kernels((np.sum(d * d, axis=1) + np.sum(d, axis=0)) * 2 + v)
    de = x[:, None] - x[None, :]
    np.testing.assert_allclose(out, ((de * de).sum(1) + de.sum(0)) * 2 + x, rtol=1e-12)
    assert [o[0] for k in kernels for o in k["outputs"]] == ["mirrored sum", "map"]


@pytest.mark.parametrize(
    "make",
    [
        # a column sum of another domain shape (not square)
        lambda v, u: (
            np.sum(v[:, None] * u[None, :10], axis=1)[:10] * 0
            + np.sum(v[:10, None] * u[None, :], axis=0)[:10]
        ),
        # both sums over axis 1
        lambda v, u: np.sum(v[:, None] * u[None, :], axis=1) + np.sum(v[:, None] - u, axis=1),
        # products, not sums
        lambda v, u: np.prod(v[:, None] * u[None, :], axis=1) + np.sum(v[:, None] * u, axis=0),
        # a row sum broadcast against a column sum
        lambda v, u: (
            np.sum(v[:, None] * u[None, :], axis=1, keepdims=True)
            + np.sum(v[:, None] * u[None, :], axis=0)
        ),
    ],
)
def test_only_a_row_sum_plus_a_column_sum_of_one_square_domain_is_mirrored(make):
    x, y = np.linspace(0.1, 1.0, 20), np.linspace(1.0, 2.0, 20)
    node = make(fl.asarray(x), fl.asarray(y))
    want = make(x, y)
    out, kernels = _kernels(node)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    assert all(o[0] != "mirrored sum" for k in kernels for o in k["outputs"])


def test_a_sum_already_computed_is_read_not_recomputed():
    x = np.linspace(-1.0, 1.0, 30)
    v = fl.asarray(x)
    d = v[:, None] - v[None, :]
    rows = np.sum(d * d, axis=1)
    plan.materialize(rows)
    out, kernels = _kernels(rows + np.sum(d, axis=0))
    de = x[:, None] - x[None, :]
    np.testing.assert_allclose(out, (de * de).sum(1) + de.sum(0), rtol=1e-12)
    assert [o[1] for k in kernels for o in k["outputs"]] == [(0,), ()]


# --- gradients ---------------------------------------------------------------------------------


def _lj_grad(P):
    """By hand: E = 1/2 sum_{i != j} phi(r2_ij), so dE/dP_i = sum_j 2 phi'(r2_ij) d_ij."""
    d = P[:, None, :] - P[None, :, :]
    r2 = np.sum(d * d, axis=-1) + np.eye(len(P))
    two_dphi = -12 / r2**7 + 6 / r2**4
    np.fill_diagonal(two_dphi, 0)
    return np.sum(two_dphi[:, :, None] * d, axis=1)


def test_gradient_of_a_pairwise_energy_in_3d(engine):
    """Positions (N, 3): the domain is (N, N, 3) and the gradient a mirrored sum over it."""
    P = np.random.default_rng(3).uniform(0, 10, size=(60, 3))

    def energy(P):
        d = P[:, None, :] - P[None, :, :]
        r2 = np.sum(d * d, axis=-1) + np.eye(len(P))
        inv6 = 1.0 / r2**3
        return 0.5 * np.sum((inv6 * inv6 - inv6) * (1 - np.eye(len(P))))

    with fl.recording() as rec:
        g = fg.grad(energy)(P)
    np.testing.assert_allclose(g, _lj_grad(P), rtol=1e-9, atol=1e-12)
    kinds = [o[0] for e in rec if e["event"] == "kernel" for o in e["outputs"]]
    assert "mirrored sum" in kinds


def test_gradient_with_a_pairwise_and_an_elementwise_term(engine):
    x = np.random.default_rng(4).standard_normal(300)

    def f(v):
        return np.sum(np.exp(-((v[:, None] - v[None, :]) ** 2))) + np.sum(v**2)

    g = fg.grad(f)(x)
    d = x[:, None] - x[None, :]
    e = np.exp(-(d**2))
    np.testing.assert_allclose(g, (-2 * e * d).sum(1) + (2 * e * d).sum(0) + 2 * x, rtol=1e-9)


def test_gradient_under_jit_replays_the_mirrored_kernel(engine):
    f = fg.jit(fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :]) * v[None, :])))
    rng = np.random.default_rng(5)
    for _ in range(3):  # traced, then replayed on new data
        x = rng.standard_normal(200)
        t = np.tanh(x[:, None] - x[None, :])
        s = 1 - t * t
        want = (s * x[None, :]).sum(1) + (-s * x[None, :]).sum(0) + t.sum(0)
        np.testing.assert_allclose(f(x), want, rtol=1e-10, atol=1e-10)


@settings(max_examples=20)
@given(
    n=st.integers(9, 60),
    rest=st.sampled_from([(), (3,)]),
    dtype=st.sampled_from(["f8", "f4"]),
    op=st.sampled_from(["tanh", "exp", "sin", "square", "abs"]),
    swap=st.booleans(),
    engine_name=st.sampled_from(["numpy", "numba"] if numba_engine.available() else ["numpy"]),
)
def test_planned_rows_plus_cols_match_numpy(n, rest, dtype, op, swap, engine_name):
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, (n,) + rest).astype(dtype)
    y = rng.uniform(-1, 1, (n,) + rest).astype(dtype)
    ufunc = getattr(np, op)

    def build(a, b):
        d = a[:, None] - b[None, :]
        rows, cols = np.sum(ufunc(d) * d, axis=1), np.sum(ufunc(d), axis=0)
        return cols + rows if swap else rows + cols

    want = build(x.astype(np.float64), y.astype(np.float64))
    with fl.use_engine(engine_name):
        got, kernels = _kernels(build(fl.asarray(x), fl.asarray(y)))
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    tol = 1e-11 if dtype == "f8" else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * n)
    assert [o[0] for k in kernels for o in k["outputs"]] == ["mirrored sum"]


# --- a mirrored sum sharing its pass ------------------------------------------------------------


@pytest.mark.slow  # a compile per new combination of outputs
@needs_numba
@settings(max_examples=12)  # each new combination of outputs is a compile (~0.3 s)
@given(
    n=st.integers(1, 30),
    rest=st.sampled_from([(), (2,)]),
    dtype=st.sampled_from(["f8", "f4"]),
    extra=st.lists(st.sampled_from([(1,), (0,), (0, 1)]), min_size=1, max_size=3),
    threads=st.sampled_from([None, 2, 3]),
)
def test_mirrored_kernel_with_row_column_and_total_sums(n, rest, dtype, extra, threads):
    rng = np.random.default_rng(n + len(extra))
    x = rng.standard_normal((n,) + rest).astype(dtype)
    y = rng.standard_normal((n,) + rest).astype(dtype)
    base = _pair_kernel(x, y, rest, dtype, "tanh")
    dt = np.dtype(dtype)
    outs = base.outputs + tuple(Output(3 + k % 3, "sum", axes, dt) for k, axes in enumerate(extra))
    k = Kernel(base.domain, base.inputs, (), base.program, outs)
    old = numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK, numba_engine._nthreads
    try:
        if threads:
            numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK = 0, 1
            numba_engine._nthreads = lambda: threads
        got = numba_engine.run(k)
    finally:
        numba_engine.PARALLEL_MIN_NS, numba_pairs.MIN_BLOCK, numba_engine._nthreads = old
    ref = numpy_blocked.run(k)
    tol = 1e-11 if dtype == "f8" else 1e-4
    for o, g, r in zip(outs, got, ref):
        assert g.shape == r.shape == k.output_shape(o)
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * scale * max(n, 1))


def test_gradient_for_a_variable_on_both_sides_and_a_bandwidth_is_one_pass(engine):
    """x used as both sides and s: the mirrored x gradient and s's total share one pass."""
    v, s = np.random.default_rng(6).standard_normal(120), 0.7

    def f(v, s):
        return np.sum(np.exp(-((v[:, None] - v[None, :]) ** 2) / (2 * s**2)))

    with fl.recording() as rec:
        gv, gs = fg.grad(f, argnums=(0, 1))(v, s)
    d = v[:, None] - v[None, :]
    e = np.exp(-(d**2) / (2 * s**2))
    np.testing.assert_allclose(gv, (-e * d / s**2).sum(1) + (e * d / s**2).sum(0), rtol=1e-10)
    np.testing.assert_allclose(gs, (e * d**2 / s**3).sum(), rtol=1e-10)
    (big,) = [k for k in rec if k["event"] == "kernel" and k["domain"] == (120, 120)]
    assert sorted(o[0] for o in big["outputs"]) == ["mirrored sum", "sum"]
    assert big["ops"].count("exp") == 1


def test_two_pairwise_terms_of_one_variable_are_one_pass(engine):
    v = np.random.default_rng(7).standard_normal(100)

    def f(v):
        return np.sum(np.tanh(v[:, None] - v[None, :])) + np.sum(np.exp(-(v[:, None] * v[None, :])))

    with fl.recording() as rec:
        g = fg.grad(f)(v)
    t, e = np.tanh(v[:, None] - v[None, :]), np.exp(-(v[:, None] * v[None, :]))
    s = 1 - t * t
    want = s.sum(1) - s.sum(0) - (e * v[None, :]).sum(1) - (e * v[:, None]).sum(0)
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-10)
    assert len([k for k in rec if k["event"] == "kernel" and k["domain"] == (100, 100)]) == 1


def test_a_mirrored_sum_next_to_an_output_the_tiles_do_not_take(engine):
    x = np.linspace(-1.0, 1.0, 40)
    v = fl.asarray(x)
    d = v[:, None] - v[None, :]
    pair = np.sum(d * d, axis=1) + np.sum(-d, axis=0)
    (got, top), kernels = _kernels(pair, np.max(np.tanh(d), axis=1))
    de = x[:, None] - x[None, :]
    np.testing.assert_allclose(got, (de * de).sum(1) - de.sum(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(top, np.tanh(de).max(1))
    assert sorted(o[0] for k in kernels for o in k["outputs"]) == ["max", "mirrored sum"]


def test_an_empty_square_domain(engine):
    f8 = np.dtype("f8")
    x = np.zeros((0, 1))
    k = Kernel((0, 0), (x, x.T), (), (), (Output(0, "sum", (1,), f8, mirror=1),))
    run = numba_engine.run if engine == "numba" else numpy_blocked.run
    (got,) = run(k)
    assert got.shape == (0, 1)
    v = fl.asarray(np.zeros(0))
    d = v[:, None] - v[None, :]
    out, _ = _kernels(np.sum(d, axis=1) + np.sum(d * 2, axis=0))
    assert out.shape == (0,)


@needs_numba
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("special", [np.inf, np.nan])
def test_infinite_and_nan_values_come_through(threads, special, monkeypatch):
    """exp(800 - x_j) overflows: row 7 is +inf, every column holds +inf (so every other entry is
    -inf) and the total is +inf; a compensation of inf - inf must not turn them into nan."""
    monkeypatch.setattr(numba_engine, "_nthreads", lambda: threads)
    monkeypatch.setattr(numba_engine, "PARALLEL_MIN_NS", 0)
    monkeypatch.setattr(numba_pairs, "MIN_BLOCK", 1)
    f8 = np.dtype("f8")
    x = np.linspace(-1.0, 1.0, 300)
    x[7] = 800.0 if special == np.inf else np.nan
    prog = (Instr("subtract", (0, 1), f8), Instr("exp", (2,), f8), Instr("negative", (3,), f8))
    outs = (Output(3, "sum", (1,), f8, mirror=4), Output(3, "sum", (0, 1), f8))
    k = Kernel((300, 300), (x[:, None], x[None, :]), (), prog, outs)
    with np.errstate(all="ignore"):
        got, ref = numba_engine.run(k), numpy_blocked.run(k)
    np.testing.assert_array_equal(got[0], ref[0])  # +-inf or nan entry by entry, alike
    np.testing.assert_array_equal(got[1], ref[1])
    if special == np.inf:
        assert got[0][7, 0] == np.inf and (got[0][np.arange(300) != 7] == -np.inf).all()
        assert got[1].item() == np.inf
    else:
        assert np.isnan(got[0]).all() and np.isnan(got[1]).all()

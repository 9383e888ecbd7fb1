"""Accuracy of the numba engine's float sums, against ``math.fsum``.

Float sums over the innermost axis run as vectorised running sums over chunks of at most
``numba_codegen.CHUNK`` points whose sums are folded with TwoSum; per-block partials are folded
the same way. Three kinds of checks:

- random data at sizes around the chunk size and the short-row fold threshold, against a
  worst-case bound of the pairwise kind (catches lost or doubled chunks and remainders);
- adversarial data (one 1.0 among values below half an ulp of 1.0 once chunk-summed), where a
  plain running sum, or chunks added without compensation, are off by hundreds of ulps while a
  pairwise or compensated sum is exact to a few;
- the mean error over long rows of lognormal values, within 1.5x NumPy's ``np.sum``.

All kernels share four signatures (1D and 2D, float64 and float32), so compile time stays low.
"""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest

from fusegrad.lazy.engines import numba_codegen as cg
from fusegrad.lazy.engines import numba_engine as ne
from fusegrad.lazy.kernel import Kernel, Output
from fusegrad.memory import track_allocations

pytestmark = pytest.mark.skipif(not ne.available(), reason="numba not importable")

F8, F4 = np.dtype("f8"), np.dtype("f4")
C = cg.CHUNK


def sums_2d(x: np.ndarray) -> Kernel:
    """Row, column and full sums of a 2D array, as one kernel."""
    dt = x.dtype
    outs = (Output(0, "sum", (1,), dt), Output(0, "sum", (0,), dt), Output(0, "sum", (0, 1), dt))
    return Kernel(x.shape, (x,), (), (), outs)


def sum_1d(x: np.ndarray) -> Kernel:
    return Kernel(x.shape, (x,), (), (), (Output(0, "sum", (0,), x.dtype),))


def exact(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``math.fsum`` of each row (float64, exact then rounded once) and the sum of |x|."""
    r = rows.astype(np.float64)
    return np.array([math.fsum(v) for v in r]), np.abs(r).sum(axis=1)


def bound(m: int, dt: np.dtype) -> float:
    """A worst-case relative error bound for a sum of ``m`` terms, of NumPy's pairwise kind
    (NumPy: about ``(16 + log2(m / 128)) eps``). Here a chunk adds up to CHUNK/16 terms per lane
    (16 lanes or more), a short-row sum up to FOLD + 31 terms one after another, then a few
    levels of lane reduction and TwoSum folds."""
    eps = float(np.finfo(dt).eps)
    return (max(C // 16, cg.FOLD + 32) + 16 + 2 * math.log2(m + 2)) * eps


def check(got: np.ndarray, rows: np.ndarray, dt: np.dtype) -> None:
    want, scale = exact(rows)
    got = np.asarray(got, np.float64).ravel()
    assert got.shape == want.shape
    tiny = float(np.finfo(dt).tiny)
    err = np.abs(got - want)
    # the result is rounded to dt once more
    tol = bound(rows.shape[1], dt) * scale + float(np.finfo(dt).eps) * np.abs(want) + tiny
    bad = ~(err <= tol)
    assert not bad.any(), f"err {err[bad][:3]} > tol {tol[bad][:3]} (m={rows.shape[1]})"


@pytest.mark.parametrize("dt", [F8, F4])
@pytest.mark.parametrize(
    "shape",
    [(1, 0), (0, 5), (1, 1), (3, 2), (5, 31), (130, 33), (7, 64), (300, 65)]
    + [(3, C - 1), (2, C), (3, C + 1), (2, 2 * C + 7), (2, 5 * C), (131, 1000)],
)
def test_row_col_full_sums_random(shape, dt):
    rng = np.random.default_rng(sum(shape))
    x = rng.lognormal(size=shape).astype(dt) * rng.choice([-1, 1], size=shape).astype(dt)
    rows, cols, full = ne.run(sums_2d(x))
    assert rows.shape == (shape[0], 1) and cols.shape == (1, shape[1]) and full.shape == (1, 1)
    assert rows.dtype == cols.dtype == full.dtype == dt
    check(rows, x, dt)
    check(cols, x.T, dt)
    check(full, x.reshape(1, -1), dt)


@pytest.mark.parametrize("dt", [F8, F4])
@pytest.mark.parametrize("n", [0, 1, 2, 127, C - 1, C, C + 1, 3 * C + 5, 200_003])
def test_full_sum_1d_random(n, dt):
    x = np.random.default_rng(n).lognormal(size=n).astype(dt)
    (got,) = ne.run(sum_1d(x))
    assert got.shape == (1,) and got.dtype == dt
    check(got, x.reshape(1, -1), dt)


def adversarial(shape: tuple[int, ...], dt: np.dtype, at=None) -> np.ndarray:
    """Values d = eps/2^12 with a 1.0 at ``at``: a chunk of d's sums to far below half an ulp of
    1.0, so a sum that meets 1.0 early and does not compensate loses all of them."""
    d = dt.type(np.finfo(dt).eps / 4096)
    x = np.full(shape, d, dtype=dt)
    x[at if at is not None else (0,) * len(shape)] = 1
    return x


def adversarial_ok(got, rows: np.ndarray, dt: np.dtype) -> None:
    want, scale = exact(rows)
    err = np.abs(np.asarray(got, np.float64).ravel() - want)
    # pairwise/compensated: within a couple of ulps; a plain running sum: hundreds
    assert (err <= 4 * float(np.finfo(dt).eps) * scale).all(), err / (np.finfo(dt).eps * scale)


def rows_and_columns_ok(x: np.ndarray, y: np.ndarray, dt: np.dtype) -> None:
    """Row and full sums of ``x`` (long rows), column and full sums of ``y`` (many rows: the
    per-block partials are folded with TwoSum), all compensated."""
    rows, _, full = ne.run(sums_2d(x))
    adversarial_ok(rows, x, dt)
    adversarial_ok(full, x.reshape(1, -1), dt)
    _, cols, full = ne.run(sums_2d(y))
    adversarial_ok(cols, y.T, dt)
    adversarial_ok(full, y.reshape(1, -1), dt)


@pytest.mark.parametrize("dt", [F8, F4])
def test_adversarial_long_rows_and_columns(dt):
    x = adversarial((4, 64 * C + 3), dt, at=(slice(None), 5))
    rows_and_columns_ok(x, adversarial((1 << 17, 3), dt), dt)


@pytest.mark.parametrize("dt", [F8, F4])
@pytest.mark.parametrize("width", [3, 40, 100])
def test_adversarial_full_sum_of_short_rows(width, dt):
    # rows shorter than CHUNK: a full sum keeps a running sum across rows and folds it every
    # FOLD or more points
    x = adversarial(((1 << 21) // width, width), dt)
    _, _, full = ne.run(sums_2d(x))
    adversarial_ok(full, x.reshape(1, -1), dt)


@pytest.mark.parametrize("dt", [F8, F4])
def test_adversarial_1d_any_blocking(dt, monkeypatch):
    x = adversarial((1 << 21,), dt, at=(1000,))
    adversarial_ok(ne.run(sum_1d(x))[0], x.reshape(1, -1), dt)
    # the engine's blocks of ~128 points make 1D sums pairwise-like by themselves; with two
    # blocks the chunked long path must carry the accuracy
    monkeypatch.setattr(ne, "_choose_nblk", lambda n0, *a: min(max(n0, 1), 2))
    adversarial_ok(ne.run(sum_1d(x))[0], x.reshape(1, -1), dt)


def test_parallel_variant(monkeypatch):
    monkeypatch.setattr(ne, "PARALLEL_MIN_NS", 0)  # slots on the worker threads
    x = adversarial((3, 40 * C + 1), F8, at=(slice(None), 7))
    rows_and_columns_ok(x, adversarial((1 << 14, 50), F8), F8)


def test_column_sums_keep_partials_per_thread_not_per_block(monkeypatch):
    """Column sums cross the parallel axis: each slot (thread) keeps a total, a compensation
    and a block scratch row, however many blocks of ~128 rows there are."""
    monkeypatch.setattr(ne, "PARALLEL_MIN_NS", 0)
    y = np.random.default_rng(3).lognormal(size=(1 << 13, 1000))
    k = sums_2d(y)
    ne.run(k)
    with track_allocations() as t:
        rows, cols, full = ne.run(k)
    outs = 8 * (y.shape[0] + y.shape[1] + 1)
    slots = 3 * ne._nthreads() * 8 * y.shape[1]
    # per block, the 64 blocks' partials would be 8x the slots'; the slack covers the futures
    # of the worker pool and the block partials of the full sum
    assert t.peak_bytes <= outs + slots + 16384, (t.peak_bytes, outs, slots)
    np.testing.assert_allclose(cols.ravel(), exact(y.T)[0], rtol=1e-14)
    np.testing.assert_allclose(full.ravel(), exact(y.reshape(1, -1))[0], rtol=1e-14)


@pytest.mark.parametrize("dt", [F8, F4])
def test_long_rows_mean_error_within_numpy(dt):
    x = np.random.default_rng(7).lognormal(size=(16, 1 << 17)).astype(dt)
    want, scale = exact(x)
    ours = np.abs(ne.run(sums_2d(x))[0].ravel().astype(np.float64) - want) / scale
    theirs = np.abs(np.sum(x, axis=1).astype(np.float64) - want) / scale
    # measured: ~0.3x (float64) and ~0.8x (float32); a plain running sum was 3.1x
    assert ours.mean() <= 1.5 * theirs.mean() + 0.05 * float(np.finfo(dt).eps)


@pytest.mark.parametrize("shape", [(5, 2 * C + 3), (2 * C + 3,)])
def test_special_values(shape):
    x = np.ones(shape)
    flat = x.reshape(-1)
    kern = sums_2d if len(shape) == 2 else sum_1d
    for vals, want in [((np.inf,), np.inf), ((-np.inf,), -np.inf), ((np.inf, -np.inf), np.nan)]:
        flat[:] = 1
        for k, v in enumerate(vals):
            flat[-1 - (C + 7) * k] = v  # another chunk for the second value
        full = ne.run(kern(x))[-1]
        np.testing.assert_array_equal(full.ravel(), [want])
    flat[:] = 1
    flat[3] = np.nan
    assert np.isnan(ne.run(kern(x))[-1]).all()


def _compile_uncached(kernel: Kernel, tmp_path):
    """Import the generated module with numba's cache off, so that LLVM IR can be inspected."""
    plan = ne._plan_for(kernel.signature(), kernel)
    src = cg.generate_source(plan).replace("cache=True", "cache=False")
    path = tmp_path / "k_inspect.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_fusegrad_k_inspect", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # compiles its kernel again, outside the cache, to read the LLVM IR
def test_inner_loops_vectorise_without_gathers(tmp_path):
    """The point of the chunk layout: the summing loops stay contiguous SIMD loads."""
    rng = np.random.default_rng(0)
    mod = None
    for n, entry in ((3 * C + 1, "kernel_long"), (C, "kernel")):
        x = rng.lognormal(size=(3, n))
        k = sums_2d(x)
        mod = mod or _compile_uncached(k, tmp_path)
        e = ne._Entry(k.signature(), ne._plan_for(k.signature(), k), mod)
        args = [*k.domain, x, np.empty((3, 1)), np.empty((1, n)), np.empty((1, 1))]
        args += [np.zeros((1, 3, 1, n)), np.zeros((1, 1, 1))]  # slot partials, block partials
        assert e.partial == (False, True, True) and e.plan.slotted == (False, True, False)
        assert cg.long_rows(e.plan, 1, k.domain) == (entry == "kernel_long")
        getattr(mod, entry)(1, 1, 0, 1, True, ne._NO_CLAIMS, *args)
        want = [x.sum(axis=1, keepdims=True), x.sum(axis=0, keepdims=True), x.sum(keepdims=True)]
        for got, w in zip(args[3:6], want):
            np.testing.assert_allclose(got, w, rtol=1e-12)
    for f in (mod.kernel, mod.kernel_long):
        ir = f.inspect_llvm(f.signatures[0])
        assert re.search(r"fadd reassoc nsz <\d+ x double>", ir), "summing loop not vectorised"
        assert "gather" not in ir
        # (LLVM vectorises the row loop's zero store for empty rows as a scatter: harmless)
        assert not re.search(r"scatter\.\S+\(<\d+ x double> (?!zeroinitializer)", ir)

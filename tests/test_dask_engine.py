"""The dask engine: tiles of a kernel on Dask workers, partials combined by a tree of tasks."""

import math
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

dask = pytest.importorskip("dask")

import fusegrad as fg  # noqa: E402
from fusegrad.lazy.engines import dask_engine, numpy_blocked  # noqa: E402
from fusegrad.lazy.kernel import Instr, Kernel, Output  # noqa: E402

F8 = np.dtype("f8")


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", "4096")


@given(st.integers(0, 40), st.integers(1, 9))
def test_blocks_cover_the_axis_in_order(n, parts):
    bs = dask_engine.blocks(n, parts)
    assert bs[0][0] == 0 and bs[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bs, bs[1:]))
    assert len(bs) == max(1, min(parts, n))
    assert max(b - a for a, b in bs) - min(b - a for a, b in bs) <= 1


def test_naming_dask_without_dask_installed(monkeypatch):
    monkeypatch.setattr(dask_engine, "available", lambda: False)
    with pytest.raises(ImportError, match=r"use_engine\('dask'\) needs .*fusegrad\[dask\]"):
        with fg.use_engine("dask"):
            pass


def test_tile_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", "1e3")
    assert dask_engine.tile_points() == 1000
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", "many")
    with pytest.raises(ValueError, match="FUSEGRAD_DASK_TILE='many' is not a positive integer"):
        dask_engine.tile_points()


def _pairwise_kernel(n, m, outputs, rest=()):
    rng = np.random.default_rng(n * 7 + m)
    x = rng.standard_normal((n, 1) + (1,) * len(rest))
    y = rng.standard_normal((1, m) + rest)
    prog = (Instr("subtract", (0, 1), F8), Instr("tanh", (2,), F8), Instr("multiply", (3, 3), F8))
    return Kernel((n, m) + rest, (x, y), (), prog, outputs)


OUTPUT_SETS = {
    "rows": (Output(3, "sum", (1,), F8),),
    "cols": (Output(3, "sum", (0,), F8),),
    "total": (Output(4, "sum", (0, 1), F8),),
    "all three": (
        Output(3, "sum", (1,), F8),
        Output(4, "sum", (0,), F8),
        Output(3, "sum", (0, 1), F8),
    ),
    "max and min": (Output(3, "max", (0,), F8), Output(3, "min", (1,), F8)),
    "elementwise": (Output(4, None, (), F8),),
}


@pytest.mark.parametrize("name", list(OUTPUT_SETS))
@pytest.mark.parametrize(("n", "m"), [(97, 130), (250, 3), (1, 500)])
def test_tiled_kernels_equal_numpy_blocked(small_tiles, name, n, m):
    k = _pairwise_kernel(n, m, OUTPUT_SETS[name])
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fan_in", [2, 3, 8])
@pytest.mark.parametrize("split", [False, True])
def test_trees_of_any_fan_in_with_tile_results_whole_or_split(
    small_tiles, monkeypatch, fan_in, split
):
    monkeypatch.setattr(dask_engine, "FAN_IN", fan_in)
    monkeypatch.setattr(dask_engine, "WHOLE_RESULT_MAX", 0 if split else 1 << 30)
    for name in ("all three", "max and min"):
        k = _pairwise_kernel(97, 130, OUTPUT_SETS[name])
        for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _count_tasks(monkeypatch) -> list[int]:
    """The number of tasks of each graph the dask engine computes (``dask.compute`` wrapped)."""
    graphs: list[int] = []
    compute = dask.compute

    def counting(*collections, **kwargs):
        keys = {key for c in collections for d in c for key in dict(d.__dask_graph__())}
        graphs.append(len(keys))
        return compute(*collections, **kwargs)

    monkeypatch.setattr(dask, "compute", counting)
    return graphs


def test_a_graph_of_tiles_and_shallow_trees(monkeypatch):
    # W3's shape: one kernel of row sums, column sums and the total, in 16 tiles about square
    # (2 x 8). The tiles' outputs go whole to the combining tasks (no task per output), and
    # each sum is a tree of fan-in 8: rows 8 -> 1 per block of rows, columns 2 -> 1 per block
    # of columns, the total 16 -> 2 -> 1.
    monkeypatch.setattr(dask_engine, "tile_points", lambda: 200 * 1200 // 16)
    monkeypatch.setattr(dask_engine, "worker_threads", lambda: 1)
    k = _pairwise_kernel(200, 1200, OUTPUT_SETS["all three"])
    assert [len(b) for b in dask_engine.grid(k)] == [2, 8]
    graphs = _count_tasks(monkeypatch)
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    inputs, tiles, trees = 2, 16, 2 * 1 + 8 * 1 + (2 + 1)
    assert graphs == [inputs + tiles + trees]


@pytest.mark.parametrize("retained_max", [1 << 20, 0])
def test_a_slot_of_one_part_taken_on_the_client_or_by_a_task(monkeypatch, retained_max):
    # Row sums and the total over blocks of whole rows (no output keeps axis 1): a block's row
    # sums are one tile's, taken from its list on the client, unless that would keep more than
    # RETAINED_MAX elements the client does not take (here each tile's part of the total) on
    # the workers to the end: then a task per tile takes them out.
    monkeypatch.setattr(dask_engine, "RETAINED_MAX", retained_max)
    monkeypatch.setattr(dask_engine, "tile_points", lambda: 200 * 1200 // 16)
    monkeypatch.setattr(dask_engine, "worker_threads", lambda: 1)
    outputs = (Output(3, "sum", (1,), F8), Output(3, "sum", (0, 1), F8))
    k = _pairwise_kernel(200, 1200, outputs)
    assert [len(b) for b in dask_engine.grid(k)] == [16, 1]
    graphs = _count_tasks(monkeypatch)
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    inputs, tiles, trees = 2, 16, 2 + 1
    takes = 16 if 16 * 1 > retained_max else 0
    assert graphs == [inputs + tiles + trees + takes]


def test_three_dimensional_domain(small_tiles):
    rows = (Output(3, "sum", (1, 2), F8),)
    k = _pairwise_kernel(80, 90, rows, (3,))
    assert [len(b) for b in dask_engine.grid(k)] == [6, 1, 1]  # a row of 270 points fits a tile
    k = _pairwise_kernel(80, 90, rows + (Output(3, "sum", (0,), F8),), (3,))
    # column sums: a partial as wide as a tile, so tiles about square (side ~ sqrt(4096 / 3))
    assert [len(b) for b in dask_engine.grid(k)] == [3, 2, 1]
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    k = _pairwise_kernel(80, 2000, k.outputs, (3,))
    assert [len(b) for b in dask_engine.grid(k)] == [3, 40, 1]
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_mirrored_sums_per_tile(small_tiles):
    v = np.random.default_rng(1).standard_normal(211)
    prog = (Instr("subtract", (0, 1), F8), Instr("tanh", (2,), F8), Instr("negative", (3,), F8))
    k = Kernel(
        (211, 211), (v[:, None], v[None, :]), (), prog, (Output(3, "sum", (1,), F8, mirror=4),)
    )
    got, want = dask_engine.run(k)[0], numpy_blocked.run(k)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tiles_cut_finer_to_keep_every_worker_thread_busy(monkeypatch):
    monkeypatch.setattr(dask_engine, "worker_threads", lambda: 2)
    k = Kernel((12000, 12000), (), (), (), ())  # 4.3 tiles of 2^25 points: too few for 2 threads
    assert dask_engine.balanced_points(k) == -(-(12000**2) // 16)
    assert math.prod(len(b) for b in dask_engine.grid(k)) >= 16
    big = Kernel((100_000, 100_000), (), (), (), ())  # 298 tiles: plenty
    assert dask_engine.balanced_points(big) == 1 << 25
    small_k = Kernel((3000, 3000), (), (), (), ())  # one tile: runs locally, not cut
    assert dask_engine.balanced_points(small_k) == 1 << 25
    monkeypatch.setattr(dask_engine, "worker_threads", lambda: 1000)
    assert dask_engine.balanced_points(k) == dask_engine.MIN_TILE


def test_the_tile_engine_from_the_environment(monkeypatch, small_tiles):
    monkeypatch.setenv("FUSEGRAD_DASK_TILE_ENGINE", "numpy")
    calls = []
    monkeypatch.setattr(
        dask_engine.numpy_blocked,
        "run",
        lambda k, r=numpy_blocked.run: (calls.append(k.domain), r(k))[1],
    )
    k = _pairwise_kernel(97, 130, OUTPUT_SETS["all three"])
    for got, want in zip(dask_engine.run(k), numpy_blocked.run(k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert len(calls) > 4  # every tile, then the reference
    monkeypatch.setenv("FUSEGRAD_DASK_TILE_ENGINE", "gpu")
    with pytest.raises(ValueError, match="FUSEGRAD_DASK_TILE_ENGINE='gpu' is not one of"):
        dask_engine.tile_engine()


def test_the_engine_named_by_fusegrad_engine(monkeypatch, small_tiles):
    calls = []
    monkeypatch.setattr(
        dask_engine, "run", lambda k, r=dask_engine.run: (calls.append(k.domain), r(k))[1]
    )
    monkeypatch.setenv("FUSEGRAD_ENGINE", "dask")
    x = np.linspace(-1, 1, 300)
    got = fg.grad(w2t)(x)
    assert (300, 300) in calls
    monkeypatch.delenv("FUSEGRAD_ENGINE")
    np.testing.assert_allclose(got, fg.grad(w2t)(x), rtol=1e-12, atol=1e-12)


def test_a_one_tile_kernel_runs_locally(monkeypatch):
    monkeypatch.setattr(dask_engine, "tile_points", lambda: 1 << 30)
    k = _pairwise_kernel(10, 10, OUTPUT_SETS["rows"])
    monkeypatch.setattr(dask, "compute", None)  # would fail if called
    np.testing.assert_allclose(dask_engine.run(k)[0], numpy_blocked.run(k)[0])


def w3(x, y, s):
    return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


def w2t(v):
    return np.sum(np.tanh(v[:, None] - v[None, :]) * v[None, :])


def test_gradients_on_the_dask_engine(small_tiles):
    rng = np.random.default_rng(2)
    x, y = rng.random(300), rng.random(250)
    with fg.use_engine("numpy"):
        want = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.7)
        want2 = fg.grad(w2t)(x)
    with fg.use_engine("dask"):
        got = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.7)
        got2 = fg.grad(w2t)(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(got2, want2, rtol=1e-12, atol=1e-12)


# Dask arrays as leaves (lazy/dask_leaves.py)

da = pytest.importorskip("dask.array")
from fusegrad.lazy import dask_leaves, small  # noqa: E402
from fusegrad.lazy.engines import numba_engine  # noqa: E402


def lj(P):
    d = P[:, None, :] - P[None, :, :]
    r2 = np.sum(d**2, -1)
    s2_r2 = 1.0 / np.where(r2 > 0, r2, 1.0)
    return np.sum(np.where(r2 > 0, 4 * (s2_r2**6 - s2_r2**3), 0.0)) / 2


@pytest.fixture
def numpy_tiles(monkeypatch):
    """Tiles on numpy_blocked: what these tests check is where tiles read, not numba (no
    compiling)."""
    monkeypatch.setenv("FUSEGRAD_DASK_TILE_ENGINE", "numpy")


@pytest.fixture
def never_gathered(monkeypatch):
    """Dask inputs are never computed on the client, and no local engine sees a placeholder."""

    def refuse(*args, **kwargs):
        raise AssertionError("a Dask input was gathered on the client")

    monkeypatch.setattr(da.Array, "__array__", refuse)
    monkeypatch.setattr(da.Array, "compute", refuse)
    for engine in (numpy_blocked, numba_engine):
        run = engine.run

        def checked(kernel, run=run):
            assert not dask_leaves.reads_dask(kernel.inputs), "a local engine read a placeholder"
            return run(kernel)

        monkeypatch.setattr(engine, "run", checked)


def _np(a):
    """A result's values (``dask.compute``: ``np.asarray`` is refused by ``never_gathered``)."""
    return dask.compute(a)[0] if isinstance(a, da.Array) else np.asarray(a)


def test_dask_inputs_as_leaves(small_tiles, never_gathered):
    rng = np.random.default_rng(5)
    x, y = rng.random(300), rng.random(250)
    with fg.use_engine("numpy"):
        want = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.7)
    xd, yd = da.from_array(x, chunks=70), da.from_array(y, chunks=100)
    with fg.use_engine("dask"):
        got = fg.grad(w3, argnums=(0, 1, 2))(xd, yd, 0.7)
    assert isinstance(got[0], da.Array) and got[0].chunks == xd.chunks
    assert isinstance(got[1], da.Array) and got[1].chunks == yd.chunks
    assert isinstance(got[2], float)
    for a, b in zip(got, want):
        np.testing.assert_allclose(_np(a), b, rtol=1e-12)


def test_a_local_engine_named_inside_the_function_never_reads_a_placeholder(
    small_tiles, never_gathered
):
    # A placeholder reads as zeros: a local engine given its kernel would return a wrong
    # gradient silently. The dask engine claims every kernel that reads one (engines.choose).
    rng = np.random.default_rng(6)
    x, y = rng.random(120), rng.random(90)

    def w3_on_numpy(x, y, s):
        with fg.use_engine("numpy"):  # np.sort needs the row sums now, on this engine
            rows = np.sort(np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)), axis=1))
            return np.sum(rows * np.arange(len(rows)))

    with fg.use_engine("numpy"):
        want = fg.grad(w3_on_numpy, argnums=(0, 1))(x, y, 0.7)

    xd, yd = da.from_array(x, chunks=40), da.from_array(y, chunks=30)
    with fg.use_engine("dask"):
        got = fg.grad(w3_on_numpy, argnums=(0, 1))(xd, yd, 0.7)
    for a, b in zip(got, want):
        np.testing.assert_allclose(_np(a), b, rtol=1e-12)


def test_a_dask_input_beside_numpy_inputs_and_mirrored_sums(
    small_tiles, never_gathered, numpy_tiles
):
    v = np.random.default_rng(6).standard_normal(200)
    with fg.use_engine("numpy"):
        want = fg.grad(w2t)(v)
        want_vg = fg.value_and_grad(w3, argnums=(0, 1))(v, v[::-1].copy(), 0.4)
    with fg.use_engine("dask"):
        got = fg.grad(w2t)(da.from_array(v, chunks=64))
        val, (gx, gy) = fg.value_and_grad(w3, argnums=(0, 1))(
            da.from_array(v, chunks=50), v[::-1].copy(), 0.4
        )
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(val, want_vg[0], rtol=1e-12)
    assert isinstance(gx, da.Array) and isinstance(gy, np.ndarray)
    np.testing.assert_allclose(_np(gx), want_vg[1][0], rtol=1e-12)
    np.testing.assert_allclose(gy, want_vg[1][1], rtol=1e-12)


def test_lennard_jones_forces_from_a_chunked_dask_array(small_tiles, never_gathered, numpy_tiles):
    rng = np.random.default_rng(7)
    P = np.stack(np.meshgrid(*[np.arange(5.0)] * 3), -1).reshape(-1, 3)[:100] * 1.2
    P = P + 0.05 * rng.standard_normal(P.shape)
    with fg.use_engine("numpy"):
        want = fg.grad(lj)(P)
    with fg.use_engine("dask"):
        got = fg.grad(lj)(da.from_array(P, chunks=(30, 3)))
    assert got.chunks == ((30, 30, 30, 10), (3,))
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)


def test_dask_inputs_under_other_engines_are_computed_on_the_client():
    rng = np.random.default_rng(8)
    x, W = rng.random((40, 3)), rng.random((3, 5))

    def f(x, W):
        return np.sum(np.tanh(x @ W))

    want = fg.grad(f, argnums=(0, 1))(x, W)
    got = fg.grad(f, argnums=(0, 1))(da.from_array(x, chunks=10), W)  # auto
    assert isinstance(got[0], da.Array) and isinstance(got[1], np.ndarray)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_what_needs_a_dask_inputs_values_on_the_client_is_refused():
    xd = da.from_array(np.ones((40, 3)), chunks=10)
    W = np.ones((3, 2))
    with fg.use_engine("dask"), pytest.raises(dask_leaves.DaskInputError, match=r"np\.matmul"):
        fg.grad(lambda x: np.sum(x @ W))(xd)
    with fg.use_engine("dask"), pytest.raises(dask_leaves.DaskInputError, match=r"np\.(arg)?sort"):
        fg.grad(lambda x: np.sum(np.sort(x, axis=0) ** 2))(xd)


def test_a_small_dask_input_with_the_small_array_path_on(monkeypatch, never_gathered):
    monkeypatch.setattr(small, "EAGER_BELOW", 10_000)
    x = np.linspace(-1, 1, 50)
    want = fg.grad(w2t)(x)
    with fg.use_engine("dask"):
        got = fg.grad(w2t)(da.from_array(x, chunks=20))
        out, pull = fg.vjp(lambda v: np.tanh(v) * 2, da.from_array(x, chunks=20))
        (g,) = pull(np.ones(50))
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(g), 2 / np.cosh(x) ** 2, rtol=1e-12)
    np.testing.assert_allclose(out, 2 * np.tanh(x), rtol=1e-12)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["slice", "transpose", "newaxis", "broadcast", "int"]),
        st.lists(st.integers(0, 6), min_size=4, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


def _apply(a, ops):
    """A chain of the views movement makes (slices with steps, transposes, new axes,
    broadcasts, integer indices), each chosen by its numbers modulo the shape at that point."""
    for kind, k in ops:
        if kind == "slice":
            idx = []
            for d, n in enumerate(a.shape):
                start = k[d % 4] % max(n, 1)
                step = [1, 2, -1, 3][k[(d + 1) % 4] % 4]
                idx.append(slice(start, None, step))
            a = a[tuple(idx)]
        elif kind == "transpose":
            perm = sorted(range(a.ndim), key=lambda d: (k[d % 4] * 7 + d) % 5)
            a = np.transpose(a, perm)
        elif kind == "newaxis":
            a = np.expand_dims(a, k[0] % (a.ndim + 1))
        elif kind == "broadcast":
            a = np.broadcast_to(a[None], (1 + k[0] % 3,) + a.shape)
        elif a.ndim > 1 and a.shape[0] > 0:
            a = a[k[0] % a.shape[0]]
    return a


@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), OPS)
def test_dask_view_reads_the_same_elements(shape, ops):
    full = np.arange(float(np.prod(shape))).reshape(shape)
    node = dask_leaves.as_leaf(da.from_array(full, chunks=2))
    view = _apply(node.array, ops)
    want = _apply(full, ops)
    assert dask_leaves.source(view) is not None
    got = dask_leaves.dask_view(view)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), OPS, st.integers(1, 4))
def test_tiles_assemble_views_from_the_chunks_they_need(shape, ops, chunk):
    full = np.arange(float(np.prod(shape))).reshape(shape)
    src = da.from_array(full, chunks=chunk)
    view = _apply(dask_leaves.as_leaf(src).array, ops)
    want = _apply(full, ops)
    if want.size == 0:
        return
    recipe, blocks = dask_leaves.chunk_plan(view)
    assert len(blocks) == len(set(blocks))
    chunks = src.to_delayed()
    got = dask_leaves.assemble(recipe, *dask.compute(*[chunks[b] for b in blocks]))
    np.testing.assert_array_equal(got, want)
    # the chunks holding an element of the view (full's values are flat indices), and the
    # block grid they span: nothing more
    needed = {tuple(i // chunk for i in np.unravel_index(int(v), shape)) for v in want.flat}
    assert needed <= set(blocks)
    for d in range(len(shape)):
        span = {b[d] for b in needed}
        assert {b[d] for b in blocks} == set(range(min(span), max(span) + 1))


def test_jvp_of_a_dask_input_is_refused_by_name():
    xd = da.from_array(np.linspace(0, 1, 10), chunks=5)
    with fg.use_engine("dask"), pytest.raises(TypeError, match="jvp got a dask.array primal"):
        fg.jvp(lambda x: np.sum(np.sin(x)), (xd,), (np.ones(10),))


@pytest.mark.parametrize("engine", ["dask", "numpy"])
def test_forward_mode_refuses_dask_primals_and_tangents_by_name(engine):
    # both failed inside NumPy's dispatch ("operand type(s) all returned NotImplemented")
    x = np.linspace(0, 1, 10)
    xd = da.from_array(x, chunks=5)
    f = lambda v: np.sum(np.sin(v[:, None] - x[None, :]))  # noqa: E731
    with fg.use_engine(engine):
        with pytest.raises(TypeError, match=r"hvp got a dask.array primal.*x\.compute\(\)"):
            fg.hvp(f, (xd,), (np.ones(10),))
        with pytest.raises(TypeError, match=r"jvp got a dask.array tangent.*x\.compute\(\)"):
            fg.jvp(f, (x,), (da.ones(10, chunks=5),))


def test_a_dask_cotangent_is_a_leaf_too(never_gathered, numpy_tiles):
    # under the dask engine a pullback given a Dask cotangent failed in NumPy's dispatch
    x, y, ct = np.linspace(-1, 1, 12), np.linspace(0, 1, 9), np.linspace(0, 1, 12)
    f = lambda v: np.sum(np.tanh(v[:, None] - y[None, :]), axis=1)  # noqa: E731
    want = fg.vjp(f, x)[1](ct)[0]
    with fg.use_engine("dask"):
        _, pull = fg.vjp(f, da.from_array(x, chunks=5))
        (g,) = pull(da.from_array(ct, chunks=4))
    assert isinstance(g, da.Array) and g.chunks == ((5, 5, 2),)
    np.testing.assert_allclose(_np(g), want, rtol=1e-12)


def test_checkpoint_of_a_dask_input(never_gathered, numpy_tiles):
    # the checkpointed function ran on the placeholder and was refused, naming np.subtract
    x, y = np.linspace(-1, 1, 12), np.linspace(0, 1, 9)
    f = lambda v: np.sum(np.exp(-((v[:, None] - y[None, :]) ** 2)))  # noqa: E731
    want_v, want_g = fg.value_and_grad(f)(x)
    with fg.use_engine("dask"):
        v, g = fg.value_and_grad(fg.checkpoint(f))(da.from_array(x, chunks=5))
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(_np(g), want_g, rtol=1e-12)


def test_unknown_chunk_sizes_are_named():
    xd = da.from_array(np.linspace(-1, 1, 30), chunks=7)
    xd = xd[xd > 0]
    with fg.use_engine("dask"), pytest.raises(ValueError, match=r"compute_chunk_sizes\(\)"):
        fg.grad(lambda x: np.sum(np.tanh(x[:, None] - x[None, :])))(xd)


def test_a_reshape_merging_axes_is_named():
    node = dask_leaves.as_leaf(da.ones((4, 3), chunks=2))
    with pytest.raises(NotImplementedError, match="reshape the Dask array itself"):
        dask_leaves.dask_view(node.array.reshape(12)[1:11:2])


_X = np.arange(1.0, 11.0)
_FANCY = {
    "list": lambda x: np.sum(x[[0, 3, 3]] ** 2),
    "traced mask": lambda x: np.sum(x[x > 5] ** 2),
    "numpy mask": lambda x: np.sum(x[_X > 5] ** 2),
    "ix_": lambda x: np.sum(x.reshape(2, 5)[np.ix_([0, 1], [1, 3])]),
    "of a broadcast view": lambda x: np.sum(np.broadcast_to(x, (3, 10))[[0, 2]]),
}


@pytest.mark.parametrize("name", list(_FANCY))
def test_fancy_and_boolean_indexing_of_a_dask_input_is_refused(name):
    # It used to copy the placeholder: a value of 0 and a zero gradient, silently
    xd = da.from_array(_X, chunks=4)
    with fg.use_engine("dask"), pytest.raises(dask_leaves.DaskInputError, match="Dask input"):
        fg.value_and_grad(_FANCY[name])(xd)


_READS = {
    "copy": lambda p: p.copy(),
    "astype": lambda p: p.astype(np.float32),
    "ravel of a transpose": lambda p: p.T.ravel(),
    "flatten": lambda p: p.flatten(),
    "copying reshape": lambda p: p.T.reshape(12),
    "np.reshape copying": lambda p: np.reshape(p.T, 12),
    "order F": lambda p: p.reshape(12, order="F"),
    "fancy": lambda p: p[[0, 1]],
    "boolean": lambda p: p[np.ones((3, 4), bool)],
    "element": lambda p: p[0, 1],
    "item": lambda p: p.item(0),
    "tolist": lambda p: p.tolist(),
    "float": lambda p: float(p[0, 0, ...]),
    "iterate": lambda p: list(p[0]),
    "sum": lambda p: p.sum(),
    "argmax": lambda p: p.argmax(),
    "nonzero": lambda p: p.nonzero(),
    "tobytes": lambda p: p.tobytes(),
    "pickle": lambda p: __import__("pickle").dumps(p),
    "broadcast, then fancy": lambda p: np.broadcast_to(p, (2, 3, 4))[[0]],
}


@pytest.mark.parametrize("name", list(_READS))
def test_a_placeholder_is_never_read_as_data(name):
    p = dask_leaves.as_leaf(da.ones((3, 4), chunks=2)).array
    with pytest.raises(dask_leaves.DaskInputError):
        _READS[name](p)
    # views stay placeholders (np.broadcast_to's too), and say what they are
    assert type(np.broadcast_to(p, (2, 3, 4))) is dask_leaves.Placeholder
    assert repr(p.T[1:]) == "Placeholder(shape=(3, 3), dtype=float64)"


_W = np.arange(12.0)
_RESHAPES = {
    "X.T.ravel()": lambda X: np.sum(X.T.ravel() * _W),
    "X.T.flatten()": lambda X: np.sum(X.T.flatten() * _W),
    "X.T.reshape(2, 6)": lambda X: np.sum(X.T.reshape(2, 6) ** 2),
    "order F": lambda X: np.sum(X.reshape(12, order="F") * _W),
    "np.ravel order F": lambda X: np.sum(np.ravel(X, order="F") * _W),
    "merging view": lambda X: np.sum(X.reshape(12) * _W),
    "of a strided slice": lambda X: np.sum(X[::2, 1:].reshape(-1) ** 3),
    "of an intermediate": lambda X: np.sum(np.exp(X / 10).reshape(12) * _W),
    "pairwise": lambda X: np.sum((X[:, None, :] - X[None, :, :]).reshape(9, 4) ** 2),
}


@pytest.mark.parametrize("name", list(_RESHAPES))
def test_reshapes_of_a_dask_input_are_made_by_dask(name, never_gathered, numpy_tiles):
    # A reshape that copies used to copy the placeholder (zeros, silently); one that merges
    # axes as a view was refused when the kernel ran: the leaf is now Dask's reshape
    f = _RESHAPES[name]
    X = np.arange(1.0, 13.0).reshape(3, 4)
    want_v, want_g = fg.value_and_grad(f)(X)
    with fg.use_engine("dask"):
        v, g = fg.value_and_grad(f)(da.from_array(X, chunks=(2, 3)))
    assert isinstance(g, da.Array) and g.chunks == ((2, 1), (3, 1))
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(_np(g), want_g, rtol=1e-12)


_ELEMENTS = {
    "x[5]": (lambda x: x[5], _X),
    "x[5] * 2": (lambda x: x[5] * 2.0, _X),
    "np.exp(x[5])": (lambda x: np.exp(x[5]), _X),
    "np.sum(x[5:6])": (lambda x: np.sum(x[5:6]), _X),
    "np.sum(x[5:6] ** 2) + np.sum(x)": (lambda x: np.sum(x[5:6] ** 2) + np.sum(x), _X),
    "X[:1, :1]": (lambda x: np.sum(x.reshape(2, 5)[:1, :1] ** 2), _X),
    "an input of size 1": (lambda x: np.sum(x**2), _X[:1]),
    "a 0-d input": (lambda s: np.sum(np.exp(-(_X**2) / (2 * s**2))), np.array(0.7)),
    "a 0-d input returned": (lambda s: s, np.array(0.7)),
}


@pytest.mark.parametrize("name", list(_ELEMENTS))
def test_single_elements_and_zero_d_dask_inputs(name, never_gathered, numpy_tiles):
    # A kernel reading one element crashed (chunk_plan got a NumPy scalar), the value of x[5]
    # was the placeholder's 0.0, and a 0-d Dask input crashed in the tiles' assembly
    f, x = _ELEMENTS[name]
    want_v, want_g = fg.value_and_grad(f)(x)
    with fg.use_engine("dask"):
        v, g = fg.value_and_grad(f)(da.from_array(x, chunks=4))
        out, pull = fg.vjp(f, da.from_array(x, chunks=4))
        (g2,) = pull(1.0)
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(out, want_v, rtol=1e-12)
    assert isinstance(g, da.Array) and g.shape == np.shape(x)
    np.testing.assert_allclose(_np(g), want_g, rtol=1e-12)
    np.testing.assert_allclose(_np(g2), want_g, rtol=1e-12)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    env = {"FUSEGRAD_THREADS": "1", "FUSEGRAD_EAGER_BELOW": "0"}
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=env,
        ) as c,
        distributed.Client(c) as client,
    ):
        yield c, client


@pytest.mark.slow
def test_gradients_on_a_local_cluster(cluster, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", str(1 << 18))
    rng = np.random.default_rng(3)
    x, y = rng.random(1500), rng.random(1200)
    want = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.3)
    with fg.use_engine("dask"):
        got = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.3)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    _, client = cluster
    assert sum(client.run(lambda: 1).values()) == 2  # both workers took part in the run


@pytest.mark.slow
def test_dask_inputs_on_a_local_cluster(cluster, monkeypatch):
    _, client = cluster
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", str(1 << 18))
    rng = np.random.default_rng(9)
    x, y = rng.random(1500), rng.random(1200)
    want = fg.grad(w3, argnums=(0, 1, 2))(x, y, 0.3)
    # chunks made on the workers (never on the client), persisted there
    xd = da.map_blocks(lambda b: b + 0.0, da.from_array(x, chunks=400)).persist()
    yd = da.from_array(y, chunks=500).persist()

    def refuse(*args, **kwargs):
        raise AssertionError("a Dask input was gathered on the client")

    with monkeypatch.context() as m:
        m.setattr(da.Array, "__array__", refuse)
        m.setattr(da.Array, "compute", refuse)
        with fg.use_engine("dask"):
            got = fg.grad(w3, argnums=(0, 1, 2))(xd, yd, 0.3)
    assert isinstance(got[0], da.Array) and got[0].chunks == xd.chunks
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12)


def _kernel_stats():
    from fusegrad.lazy.engines import numba_engine

    return dict(numba_engine.STATS)


@pytest.mark.slow
def test_workers_load_kernels_from_the_disk_cache(cluster, monkeypatch):
    _, client = cluster
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", str(1 << 18))
    monkeypatch.setenv("FUSEGRAD_DASK_TILE_ENGINE", "numba")
    rng = np.random.default_rng(10)
    x, y = rng.random(1100), rng.random(1300)

    def f(x, y):  # a kernel no other test compiles
        return np.sum(np.exp(-np.abs(x[:, None] - y[None, :]) * 0.37) * x[:, None])

    # the same tiles on the threaded scheduler: compiled here, into the shared disk cache
    with dask.config.set(scheduler="threads"), fg.use_engine("dask"):
        want = fg.grad(f, argnums=(0, 1))(x, y)
    before = client.run(_kernel_stats)
    with fg.use_engine("dask"):
        got = fg.grad(f, argnums=(0, 1))(x, y)
        again = fg.grad(f, argnums=(0, 1))(x, y)
    after = client.run(_kernel_stats)
    for a, b, c in zip(got, again, want):
        np.testing.assert_allclose(a, c, rtol=1e-12)
        np.testing.assert_array_equal(a, b)
    for w in after:
        assert after[w]["compiled"] == before[w]["compiled"]  # nothing compiled on a worker
    loads = sum(after[w]["cache_hits"] - before[w]["cache_hits"] for w in after)
    assert loads >= 1  # the tiles' kernel came from the disk cache, once per worker that ran one
    assert loads <= len(after)


@pytest.mark.slow
def test_a_worker_killed_mid_gradient(cluster, monkeypatch):
    c, client = cluster
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", str(1 << 20))
    rng = np.random.default_rng(4)
    x = rng.random(8000)
    want = fg.grad(w2t)(x)
    with fg.use_engine("dask"):
        undisturbed = fg.grad(w2t)(x)
    result = {}

    def gradient():
        with fg.use_engine("dask"):
            result["g"] = fg.grad(w2t)(x)

    t = threading.Thread(target=gradient)
    t.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and t.is_alive() and time.monotonic() < deadline:
        busy = {w: p for w, p in client.processing().items() if p}
        if busy:
            addr = next(iter(busy))
            pid = client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, 9)
            killed = addr
        time.sleep(0.01)
    t.join(120)
    assert killed is not None, "the gradient finished before a worker could be killed"
    # the lost tiles recomputed, the same tree of sums: the same bits as without the kill
    np.testing.assert_array_equal(result["g"], undisturbed)
    np.testing.assert_allclose(result["g"], want, rtol=1e-12, atol=1e-12)

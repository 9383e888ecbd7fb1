"""The dask engine: tiles of a kernel on Dask workers, partials combined by a tree of tasks."""

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


def test_three_dimensional_domain(small_tiles):
    k = _pairwise_kernel(80, 90, (Output(3, "sum", (1, 2), F8), Output(3, "sum", (0,), F8)), (3,))
    assert [len(b) for b in dask_engine.grid(k)] == [6, 1, 1]  # a row of 270 points fits a tile
    k = _pairwise_kernel(80, 9000, k.outputs, (3,))
    assert [len(b) for b in dask_engine.grid(k)] == [3, 176, 1]
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
def test_a_worker_killed_mid_gradient(cluster, monkeypatch):
    c, client = cluster
    monkeypatch.setenv("FUSEGRAD_DASK_TILE", str(1 << 20))
    rng = np.random.default_rng(4)
    x = rng.random(8000)
    want = fg.grad(w2t)(x)
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
    np.testing.assert_allclose(result["g"], want, rtol=1e-12, atol=1e-12)

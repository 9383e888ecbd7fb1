"""Smoke and unit tests of the benchmark CLI (fast; peers are optional)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fusegrad.bench import libs, report, runner
from fusegrad.bench._child import rel_error, run_case
from fusegrad.bench.workloads import WORKLOADS

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _cli(*args, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [SRC, env.get("PYTHONPATH", "")] if p)
    return subprocess.run(
        [sys.executable, "-m", "fusegrad.bench", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def test_cli_smoke(tmp_path):
    out = tmp_path / "out"
    proc = _cli(
        "--only", "W1", "--libs", "numpy", "--sizes", "1000", "--out", str(out), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "W1 n=1000 numpy" in proc.stderr  # the progress line
    md = (out / "report.md").read_text()
    assert "| numpy |" in md and "ok 0.0e+00" in md
    assert "Command: `python -m fusegrad.bench --only W1" in md
    data = json.loads((out / "results.json").read_text())
    (row,) = data["results"]
    assert row["status"] == "ok" and row["check"] == "ok"
    assert row["samples"] >= 5 and row["median_s"] > 0


def test_cli_rejects_unknown_lib(tmp_path):
    proc = _cli("--libs", "numpy,tensorflow", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown library 'tensorflow'" in proc.stderr
    assert "known: fusegrad" in proc.stderr
    assert not (tmp_path / "report.md").exists()


def test_parse_libs_always_includes_numpy():
    assert libs.parse_libs("jax-jit") == ["numpy", "jax-jit"]
    with pytest.raises(ValueError, match="unknown library 'jaxx'"):
        libs.parse_libs("jaxx")


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_hand_gradients_match_finite_differences(name):
    wl = WORKLOADS[name]
    args = list(wl.make_inputs(6 if wl.pairwise else 12))
    grads = wl.hand_grad(*args)
    h = 1e-6
    for g, i in zip(grads, wl.argnum_tuple, strict=True):
        x = np.asarray(args[i], dtype=np.float64)

        def f_at(val, i=i):
            a = list(args)
            a[i] = val
            return wl.fun(np, *a)

        fd = np.empty(x.size)
        for k in range(x.size):
            e = np.zeros(x.size)
            e[k] = h
            e = e.reshape(x.shape)
            fd[k] = (f_at(x + e) - f_at(x - e)) / (2 * h)
        scale = max(np.max(np.abs(fd)), wl.check_scale(x.size), 1.0)
        assert np.max(np.abs(np.ravel(g) - fd)) / scale < 1e-6, name


def test_child_reports_errors_without_crashing():
    r = run_case({"lib": "numpy", "workload": "NOPE", "n": 10})
    assert r["status"] == "error" and "KeyError" in r["message"]


def test_rel_error_flags_wrong_and_nan():
    ref = (np.array([1.0, 2.0]),)
    assert rel_error((np.array([1.0, 2.0]),), ref) == 0.0
    assert rel_error((np.array([1.0, np.nan]),), ref) == float("inf")
    with pytest.raises(ValueError, match="shape"):
        rel_error((np.ones(3),), ref)


def test_memory_skip_logic():
    w2t = WORKLOADS["W2T"]
    avail = 24 << 30
    # eager peers materialise several N² arrays; the hand NumPy gradient is blocked
    assert runner.estimate_bytes("autograd", w2t, 8000) > 5 * 8 * 8000**2 - 1
    assert runner.estimate_bytes("numpy", w2t, 8000) < 1 << 20
    assert runner.memory_skip_reason(runner.estimate_bytes("autograd", w2t, 8000), avail) is None
    msg = runner.memory_skip_reason(runner.estimate_bytes("autograd", w2t, 100_000), avail)
    assert msg.startswith("skipped: needs ~") and "available" in msg
    assert runner.memory_skip_reason(10**12, None) is None  # unknown memory: never skip


def test_run_all_skips_missing_failed_and_too_slow(monkeypatch):
    monkeypatch.setitem(
        libs.LIBS, "torch", libs.Lib("torch", "no_such_module_xyz", "pip install torch", peer=True)
    )
    fake = iter(
        [
            {"status": "error", "message": "boom"},
            {"status": "ok", "median_s": 1.0, "n": 10},
        ]
    )
    monkeypatch.setattr(
        runner, "run_subprocess", lambda case, **kw: {**next(fake), "lib": case.lib, "n": case.n}
    )
    cases = [
        runner.Case("torch", "W2", 10),
        runner.Case("fusegrad", "W2", 10),
        runner.Case("numpy", "W2", 10),
        runner.Case("fusegrad", "W2", 1000),
        runner.Case("numpy", "W2", 1000),
    ]
    lines = []
    rs = runner.run_all(
        cases,
        WORKLOADS,
        threads=None,
        timeout_s=1,
        budget_s=0.1,
        min_samples=5,
        case_limit_s=60,
        progress=lines.append,
    )
    assert rs[0]["message"] == "skipped: not installed (pip install torch)"
    assert rs[3]["message"] == "skipped: error at n=10"
    assert rs[4]["message"].startswith("skipped: would take ~")
    assert len(lines) == 5 and lines[0].startswith("[  1/5]")


def test_table_formatting():
    assert report.fmt_time(1.5e-6) == "1.5 µs"
    assert report.fmt_time(0.2041) == "204 ms"
    assert report.fmt_time(2.62) == "2.62 s"
    assert report.fmt_bytes(100) == "<1 MiB"
    assert report.fmt_bytes(732 * (1 << 20)) == "732 MiB"
    assert report.fmt_ratio(41168.3) == "41,168×"
    rows = [
        {"lib": "numpy", "workload": "W2T", "n": 8000, "status": "ok", "median_s": 0.2,
         "peak_rss_bytes": 4096, "warm_rss_bytes": 0, "tracemalloc_peak_bytes": 64000,
         "first_s": 0.3, "rel_err": 6.5e-15},
        {"lib": "autograd", "workload": "W2T", "n": 8000, "status": "ok", "median_s": 1.0,
         "peak_rss_bytes": 2 << 30, "first_s": 1.2, "rel_err": 6.5e-15},
        {"lib": "jax-jit", "workload": "W2T", "n": 8000, "status": "ok", "median_s": 0.4,
         "peak_rss_bytes": 732 << 20, "warm_rss_bytes": 4096, "first_s": 0.5, "cold_s": 0.1,
         "rel_err": 1.5e-15},
        {"lib": "fusegrad", "workload": "W2T", "n": 8000, "status": "wrong", "median_s": 0.1,
         "first_s": 0.2, "rel_err": 0.5},
        {"lib": "torch", "workload": "W2T", "n": 8000, "status": "skipped",
         "message": "skipped: not installed (pip install torch)"},
    ]  # fmt: skip
    cells = {r[0]: r for r in report.table_rows(rows, thp=False)}
    assert cells["jax-jit"][1:4] == ["400 ms", "2.00×", "1.00×"]
    assert cells["autograd"][3] == "2.50×"  # against the best peer, jax-jit
    assert cells["jax-jit"][8] == "500 ms (cold 100 ms)"
    assert cells["jax-jit"][6:8] == ["<1 MiB", "–"]  # warm call ΔRSS; nothing traced
    assert cells["numpy"][5:8] == ["1.00×ᵗ", "<1 MiB", "62.5 KiB"]  # ÷floor from tracemalloc
    assert cells["fusegrad"][1] == "–" and cells["fusegrad"][-1] == "wrong 5.0e-01"
    assert cells["torch"][-1] == "skipped: not installed (pip install torch)"
    md = report.workload_sections(rows, thp=False)
    assert "best peer: jax-jit" in md and "| lib | time | ×numpy |" in md


def test_combine_thp_keeps_the_faster():
    base = {"lib": "jax", "workload": "W3", "n": 500, "status": "ok"}
    rs = [{**base, "thp": False, "median_s": 0.3}, {**base, "thp": True, "median_s": 0.1}]
    (row,) = report.combine_thp(rs)
    assert row["malloc"] == "THP" and row["median_s"] == 0.1 and row["stock_s"] == 0.3


def test_child_env_threads_and_thp():
    env = runner.child_env("jax-jit", 1, thp=True)
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["NUMBA_NUM_THREADS"] == "1"
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    assert runner.child_env("fusegrad-numba", None, thp=False)["FUSEGRAD_ENGINE"] == "numba"


@pytest.mark.skipif(importlib.util.find_spec("autograd") is None, reason="autograd not installed")
def test_autograd_case_runs():
    r = run_case({"lib": "autograd", "workload": "W3", "n": 50, "budget_s": 0.01})
    assert r["status"] == "ok", r


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_jax_jit_case_runs():
    r = runner.run_subprocess(
        runner.Case("jax-jit", "LJ", 27), threads=1, timeout_s=120, budget_s=0.01, min_samples=5
    )
    assert r["status"] == "ok", r


def test_wrong_gradient_is_reported_as_wrong(monkeypatch):
    import fusegrad

    def fake_grad(fun, argnums=0):
        def g(*args):
            zeros = tuple(np.zeros_like(args[i]) for i in np.atleast_1d(argnums))
            return zeros if isinstance(argnums, tuple) else zeros[0]

        return g

    monkeypatch.setattr(fusegrad, "grad", fake_grad, raising=False)
    r = run_case({"lib": "fusegrad", "workload": "W1", "n": 100, "budget_s": 0.01})
    assert r["status"] == "wrong" and r["rel_err"] == 1.0
    r = run_case({"lib": "fusegrad", "workload": "W3", "n": 20, "budget_s": 0.01})
    assert r["status"] == "wrong"
    cells = report.table_rows([{**r, "thp": False}], thp=False)
    assert cells[0][1] == "–" and cells[0][-1].startswith("wrong ")


def test_case_records_the_warm_call_and_the_traced_peak():
    r = run_case({"lib": "numpy", "workload": "W1", "n": 100_000, "budget_s": 0.01})
    assert r["status"] == "ok", r
    # the hand gradient of sum((1 - x) / 2) is one array of n float64 (and a scalar or two)
    assert 8 * 100_000 <= r["tracemalloc_peak_bytes"] < 8 * 100_000 + 4096, r
    assert 0 <= r["warm_rss_bytes"] <= r["peak_rss_bytes"]

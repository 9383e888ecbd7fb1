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
    # the terminal gets the summary and where the files are, not every table
    assert "Summary" in proc.stdout and f"{out}/report.md" in proc.stdout
    assert "### W1" not in proc.stdout and "| numpy |" not in proc.stdout
    md = (out / "report.md").read_text()
    assert "| numpy |" in md and "ok 0.0e+00" in md
    assert md.index("## Summary") < md.index("## Targets") < md.index("## Results")
    assert "Command: `python -m fusegrad.bench --only W1" in md
    data = json.loads((out / "results.json").read_text())
    rows = data["results"]  # raw records: W1 at n = 1000 runs in --rounds rounds (3)
    assert [r["round"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert row["status"] == "ok" and row["check"] == "ok"
        assert row["samples"] >= 5 and row["median_s"] > 0
    assert "best of 3 rounds" in md


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
    rng = np.random.default_rng(0)
    for g, i in zip(grads, wl.argnum_tuple, strict=True):
        x = np.asarray(args[i], dtype=np.float64)
        assert np.shape(g) == x.shape, name

        def f_at(val, i=i):
            a = list(args)
            a[i] = val
            return wl.fun(np, *a)

        # every entry of small arguments, 16 random ones of the RNN's and MLP's matrices
        ks = np.arange(x.size) if x.size <= 40 else rng.choice(x.size, 16, replace=False)
        fd = np.empty(len(ks))
        for j, k in enumerate(ks):
            e = np.zeros(x.size)
            e[k] = h
            e = e.reshape(x.shape)
            fd[j] = (f_at(x + e) - f_at(x - e)) / (2 * h)
        scale = max(np.max(np.abs(fd)), wl.check_scale(x.size), 1.0)
        assert np.max(np.abs(np.ravel(g)[ks] - fd)) / scale < 1e-6, name


@pytest.mark.parametrize("name", ["MLP", "RNN"])
def test_ordinary_programs_have_the_shapes_of_issue_16(name):
    wl = WORKLOADS[name]
    if name == "MLP":
        for batch, (n_in, hidden) in {32: (10, 16), 256: (100, 128), 4096: (100, 256)}.items():
            W1, b1, W2, b2, X, y = wl.make_inputs(batch)
            assert X.shape == (batch, n_in) and W1.shape == (n_in, hidden)
            assert W2.shape == (hidden, 1) and b2.shape == (1,) and y.shape == (batch, 1)
        assert wl.quick_sizes == (32, 256, 4096)
        assert wl.size_label(256) == "batch 256, 100→128→1"
    else:
        Wx, Wh, b, wo, xs, y = wl.make_inputs(100)
        assert xs.shape == (100, 16, 32) and Wx.shape == (32, 64) and Wh.shape == (64, 64)
        assert wl.quick_sizes == (100,)


@pytest.mark.parametrize("lib", ["fusegrad", "fusegrad-jit"])
@pytest.mark.parametrize("name, n", [("MLP", 32), ("RNN", 5)])
def test_fusegrad_runs_the_ordinary_programs(lib, name, n):
    r = run_case({"lib": lib, "workload": name, "n": n, "budget_s": 0.01, "min_samples": 3})
    assert r["status"] == "ok" and r["rel_err"] < 1e-12, r


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


def test_rounds_repeat_the_small_cases_interleaved_and_keep_each_librarys_fastest(monkeypatch):
    medians = {  # (lib, n) -> median of rounds 1, 2, 3
        ("fusegrad", 1000): [3.0, 1.0, 2.0],
        ("numpy", 1000): [1.0, 2.0, 0.5],
        ("fusegrad", 1_000_000): [5.0],
        ("numpy", 1_000_000): [4.0],
    }
    ran = []

    def fake(case, **kw):
        k = sum(1 for c in ran if c == (case.lib, case.n))
        ran.append((case.lib, case.n))
        return {"status": "ok", "median_s": medians[case.lib, case.n][k], "lib": case.lib,
                "workload": case.workload, "n": case.n, "thp": case.thp}  # fmt: skip

    monkeypatch.setattr(runner, "run_subprocess", fake)
    cases = runner.plan_cases(["W1"], ["fusegrad", "numpy"], lambda w: [1000, 1_000_000], "stock")
    rs = runner.run_all(
        cases, WORKLOADS, threads=None, timeout_s=1, budget_s=0.1, min_samples=5,
        case_limit_s=60, progress=lambda s: None, rounds=3,
    )  # fmt: skip
    # n = 1000 is at most W1's rounds_upto: three rounds, the libraries alternating
    assert ran == [("fusegrad", 1000), ("numpy", 1000), ("fusegrad", 1_000_000),
                   ("numpy", 1_000_000)] + [("fusegrad", 1000), ("numpy", 1000)] * 2  # fmt: skip
    best = {(r["lib"], r["n"]): r for r in runner.best_of_rounds(rs)}
    assert best["fusegrad", 1000]["median_s"] == 1.0 and best["numpy", 1000]["median_s"] == 0.5
    assert best["fusegrad", 1000]["rounds_s"] == [3.0, 1.0, 2.0]
    assert "rounds_s" not in best["fusegrad", 1_000_000]


def test_a_wrong_round_is_the_record_whatever_the_others_timed():
    base = {"lib": "fusegrad", "workload": "MLP", "n": 32, "thp": False}
    rs = [
        {**base, "status": "ok", "median_s": 1.0, "round": 1},
        {**base, "status": "wrong", "median_s": 0.5, "rel_err": 0.3, "round": 2},
        {**base, "status": "error", "message": "boom", "round": 3},
    ]
    assert [r["status"] for r in runner.best_of_rounds(rs)] == ["wrong"]
    assert runner.best_of_rounds([rs[2], rs[0]])[0]["median_s"] == 1.0  # a failed run is not kept


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
    assert "torch" not in cells  # not installed: named once in the report, not per size
    md = report.workload_sections(rows, thp=False)
    assert "best peer: jax-jit" in md and "| lib | time | ×numpy |" in md


def test_table_marks_the_huge_page_run_and_drops_missing_libraries():
    base = {"workload": "W3", "n": 2000, "status": "ok", "peak_rss_bytes": 5 << 20,
            "first_s": 0.1, "rel_err": 0.0}  # fmt: skip
    rs = [
        {**base, "lib": "numpy", "thp": False, "median_s": 0.05},
        {**base, "lib": "jax-jit", "thp": False, "median_s": 0.24},
        {**base, "lib": "jax-jit", "thp": True, "median_s": 0.113},
        {"lib": "torch", "workload": "W3", "n": 2000, "thp": False, "status": "skipped",
         "message": "skipped: not installed (pip install torch)"},
    ]  # fmt: skip
    combined = report.combine_thp(rs)
    md = report.workload_sections(combined)
    assert "| lib | time | stock · THP |" in md
    assert "| jax-jit | 113 msʰ | 240 ms · 113 ms |" in md
    assert "| numpy | 50 ms | – |" in md
    assert "torch" not in md  # not a row per size: named once, in the run's description
    assert report.skipped_libs(combined) == {"torch": "pip install torch"}
    text = report.machine_section(report.machine_info(None), "cmd", "auto", {"torch": "pip x"})
    assert text.count("Skipped (not installed): torch — `pip x`") == 1


def _rec(lib, w, n, t, mem=2 << 20):
    return {"lib": lib, "workload": w, "n": n, "thp": False, "status": "ok", "median_s": t,
            "peak_rss_bytes": mem, "first_s": t, "rel_err": 0.0}  # fmt: skip


def test_summary_is_against_the_fastest_and_the_leanest_peer():
    rs = [
        _rec("fusegrad", "W3", 2000, 0.030, 1 << 20),
        _rec("fusegrad-jit", "W3", 2000, 0.020, 1 << 20),
        _rec("autograd", "W3", 2000, 0.100, 40 << 20),
        _rec("jax-jit", "W3", 2000, 0.060, 90 << 20),
        _rec("fusegrad", "W3", 500, 1.0),  # a smaller size: not in the summary
        _rec("fusegrad", "MLP", 32, 0.002),
        _rec("autograd", "MLP", 32, 0.001),
    ]
    rows = report.summary_rows(rs)
    assert [r[:2] for r in rows] == [["W3", "n = 2,000"], ["MLP", "batch 32, 10→16→1"]]
    w3, mlp = rows
    assert w3[2:7] == ["30 ms", "20 ms", "jax-jit 60 ms", "0.500×", "0.333×"]
    assert w3[7] == "1 MiB · 40 MiB (autograd)"
    assert mlp[5] == "2.00×" and mlp[3] == "–"  # slower, and honest about it
    assert report.summary_section(rs).startswith("## Summary\n")


def test_targets_are_judged_only_at_the_size_they_name():
    quick = [_rec("fusegrad", "W2T", 2000, 0.2), _rec("autograd", "W2T", 2000, 0.1)]
    rows = report.target_rows(quick)
    assert not any("missed" in r[-1] for r in rows)
    w2t = [r for r in rows if r[1].startswith("W2T")]
    assert w2t and all(r[-1] == "not measured at this size" for r in w2t)
    assert all("issue" not in r[0] for r in rows)  # named by what they measure
    full = [_rec("fusegrad", "W2T", 8000, 0.2), _rec("autograd", "W2T", 8000, 0.1),
            _rec("fusegrad", "MLP", 32, 0.001), _rec("autograd", "MLP", 32, 0.002)]  # fmt: skip
    rows = report.target_rows(full)
    by = {(r[0], r[1], r[2]): r for r in rows}
    assert by[("time against autograd", "W2T, n = 8,000", "fusegrad")][-1] == "**missed**"
    mlp = by[("plain grad against autograd, ordinary program", "MLP, batch 32, 10→16→1",
              "fusegrad")]  # fmt: skip
    assert mlp[3:] == ["0.500×", "≤ 1.0× autograd", "met"]
    # the 2 MiB peak on W2T misses its memory floor too
    assert report.target_counts(rows).startswith("targets: 1 met, 2 missed")


def test_huge_page_runs_where_they_matter():
    w3, w1 = WORKLOADS["W3"], WORKLOADS["W1"]
    assert runner.wants_thp("jax", w3, 2000, "auto") and runner.wants_thp("torch", w3, 2000, "auto")
    assert runner.wants_thp("fusegrad", w3, 2000, "auto")  # every library: keep its faster run
    assert runner.wants_thp("autograd", w3, 2000, "auto")
    assert not runner.wants_thp("jax-jit", w1, 1000, "auto")  # 8 KB: no page-fault cost
    assert runner.wants_thp("fusegrad", w1, 1000, "both")
    assert not runner.wants_thp("jax", w3, 8000, "stock")
    with pytest.raises(ValueError, match="unknown --malloc 'fast'"):
        runner.wants_thp("jax", w3, 10, "fast")
    labels = [c.label for c in runner.plan_cases(["W3"], ["fusegrad", "jax-jit"], lambda w: [2000])]
    assert labels == [
        "W3 n=2000 fusegrad",
        "W3 n=2000 fusegrad [THP]",
        "W3 n=2000 jax-jit",
        "W3 n=2000 jax-jit [THP]",
    ]


def test_help_lists_workloads_libraries_and_the_output_folder(tmp_path):
    proc = _cli("--help", cwd=tmp_path)
    assert proc.returncode == 0
    for name, wl in WORKLOADS.items():
        assert f"{name:<5} {wl.formula}" in proc.stdout
    for lib in libs.LIBS:
        assert f"  {lib} " in proc.stdout
    assert "default: bench-out" in proc.stdout and "--malloc" in proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
def test_plots_and_the_report_links_them(tmp_path):
    from fusegrad.bench import plots

    rs = [_rec(lib, w, n, t * n, mem)
          for w, sizes in (("W3", (500, 2000)), ("MLP", (32, 256)))
          for n in sizes
          for lib, t, mem in (("fusegrad", 1e-5, 0), ("autograd", 3e-5, 30 << 20),
                              ("jax-jit", 2e-5, 10 << 20))]  # fmt: skip
    msg = plots.plot_all(rs, str(tmp_path), quick=True)
    assert sorted(os.listdir(tmp_path)) == ["memory.png", "summary.png", "time.png"], msg
    cases, per_peer = plots.ratios(rs, "memory")
    assert cases == ["W3 n = 2,000", "MLP batch 32, 10→16→1", "MLP batch 256, 100→128→1"]
    # fusegrad's 0 B is noise: counted as 1 MiB, and marked as a bound
    assert per_peer["autograd"] == [(1 / 30, True)] * 3
    md = report.render_report(rs, report.machine_info(None), "cmd", "auto", 1.0, str(tmp_path))
    assert "[memory.png](memory.png)" in md
    assert "![fusegrad relative to each peer](summary.png)" in md


def test_combine_thp_keeps_the_faster():
    base = {"lib": "jax", "workload": "W3", "n": 500, "status": "ok"}
    rs = [{**base, "thp": False, "median_s": 0.3}, {**base, "thp": True, "median_s": 0.1}]
    (row,) = report.combine_thp(rs)
    assert row["malloc"] == "THP" and row["median_s"] == 0.1 and row["stock_s"] == 0.3


def test_combine_thp_keeps_the_memory_figures_of_the_leaner_run():
    base = {"lib": "jax-jit", "workload": "W3", "n": 8000, "status": "ok"}
    stock = {**base, "thp": False, "median_s": 0.7, "peak_rss_bytes": 250, "warm_rss_bytes": 40}
    tuned = {**base, "thp": True, "median_s": 0.3, "peak_rss_bytes": 1700, "warm_rss_bytes": 30}
    broken = {**base, "thp": True, "status": "error", "median_s": 0.1, "peak_rss_bytes": 1}
    (row,) = report.combine_thp([stock, tuned])  # all memory figures from the leaner run
    assert (row["median_s"], row["peak_rss_bytes"], row["warm_rss_bytes"]) == (0.3, 250, 40)
    (row,) = report.combine_thp([stock, broken])  # a failed run's figures count for nothing
    assert (row["median_s"], row["peak_rss_bytes"]) == (0.7, 250)


def test_child_env_threads_and_thp():
    env = runner.child_env("jax-jit", 1, thp=True)
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["NUMBA_NUM_THREADS"] == "1"
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert env["GLIBC_TUNABLES"].split(":") == [
        "glibc.malloc.hugetlb=1",
        "glibc.malloc.trim_threshold=1073741824",
        "glibc.malloc.mmap_threshold=33554432",
    ]
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


def test_a_huge_page_run_is_skipped_when_its_stock_run_predicts_too_long(monkeypatch):
    monkeypatch.setattr(
        runner,
        "run_subprocess",
        lambda case, **kw: {"status": "ok", "median_s": 1.0, "lib": case.lib, "n": case.n},
    )
    cases = [runner.Case("jax-jit", "W2", 10), runner.Case("jax-jit", "W2", 1000, thp=True)]
    rs = runner.run_all(cases, WORKLOADS, threads=None, timeout_s=1, budget_s=0.1,
                        min_samples=5, case_limit_s=60, progress=lambda s: None)  # fmt: skip
    assert rs[0]["status"] == "ok"
    assert rs[1]["message"].startswith("skipped: would take ~")

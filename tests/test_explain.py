"""``fusegrad.explain``: the fusion report of one gradient evaluation, as data and as text."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from fusegrad.explain import Explanation, explain


def test_explain_returns_the_record_and_its_report(capsys):
    v = np.linspace(-1.0, 1.0, 400)
    e = explain(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), v, engine="numpy")
    assert isinstance(e, Explanation)
    assert capsys.readouterr().out == ""  # printed only when asked
    printed = str(e)
    assert repr(e) == printed  # what an interactive prompt shows
    # The backward pass: one pass over 400×400 giving the row sums plus the column sums.
    (big,) = e.kernels
    assert big["domain"] == (400, 400)
    assert [o[0] for o in big["outputs"]] == ["mirrored sum"]
    assert "tanh" in big["ops"]
    assert e.grad.shape == (400,)
    assert e.peak_bytes < 400 * 400 * 8 and e.total_bytes >= 400 * 8
    for word in ("kernel", "400×400", "mirrored sum (rows", "tanh", "stored", "recomputed", "peak"):
        assert word in printed
    assert "gradient: array 400 float64" in printed


def test_explain_several_argnums_and_scalar_gradient():
    x, y = np.linspace(0, 1, 30), np.linspace(1, 2, 40)

    def f(x, y, s):
        return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))

    e = explain(f, x, y, 0.7, argnums=(0, 1, 2), engine="numpy")
    gx, gy, gs = e.grad
    assert gx.shape == (30,) and gy.shape == (40,) and isinstance(gs, float)
    assert "(array 30 float64, array 40 float64, float" in str(e)
    (k,) = [k for k in e.kernels if k["domain"] == (30, 40)]
    assert len(k["outputs"]) == 3  # x, y and s gradients in one pass


def test_explain_reports_stores_with_reasons():
    x = np.linspace(0, 1, 20)
    # exp(x) is expensive, small, and broadcast over the 20×20 domain: stored, not recomputed.
    e = explain(lambda x: np.sum(np.exp(x)[:, None] * x[None, :]), x)
    assert e.stored and all("expensive" in s["reason"] for s in e.stored)
    assert "expensive" in str(e)


def test_print_of_explain_shows_the_report_once(capsys):
    e = explain(lambda x: np.sum(x * x), np.ones(3))
    print(e)
    out = capsys.readouterr().out
    assert out == str(e) + "\n"
    assert out.count("kernel(s):") == 1 and "gradient: array 3 float64" in out


def test_repr_is_the_report_in_ipython_too():
    e = explain(lambda x: np.sum(x * x), np.ones(3))

    class Printer:  # the part of IPython's pretty printer that _repr_pretty_ uses
        def __init__(self):
            self.parts = []

        def text(self, s):
            self.parts.append(s)

    p = Printer()
    e._repr_pretty_(p, cycle=False)
    assert "".join(p.parts) == str(e)


def test_explain_quiet_is_deprecated_and_prints_nothing(capsys):
    with pytest.warns(DeprecationWarning, match=r"print\(explain"):
        e = explain(lambda x: np.sum(x * x), np.ones(3), quiet=True)
    assert capsys.readouterr().out == ""
    np.testing.assert_allclose(e.grad, 2 * np.ones(3))


def test_explain_peak_leaves_out_the_engines_one_time_imports(tmp_path):
    # In a fresh process the first explain of a tiny function on the default engine used to
    # report numba's import (~15 MiB of Python objects) as the call's peak. An empty kernel
    # cache keeps this kernel on numpy (auto loads a cached numba build, a cost of its own).
    script = (
        "import numpy as np, fusegrad as fg\n"
        "e = fg.explain(lambda x: np.sum((1 - x) / 2), np.ones(4))\n"
        "print(e.peak_bytes)\n"
    )
    env = dict(os.environ, FUSEGRAD_ENGINE="auto", FUSEGRAD_CACHE_DIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) < 1024 * 1024


def test_explain_unknown_engine_is_an_error():
    with pytest.raises(ValueError, match="engine"):
        explain(lambda x: np.sum(x), np.ones(3), engine="cuda")

"""``fusegrad.explain``: the fusion report of one gradient evaluation, printed and as data."""

from __future__ import annotations

import numpy as np
import pytest

from fusegrad.explain import Explanation, explain


def test_explain_returns_the_record_and_prints_it(capsys):
    v = np.linspace(-1.0, 1.0, 400)
    e = explain(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), v, engine="numpy")
    assert isinstance(e, Explanation)
    printed = capsys.readouterr().out
    assert printed.strip() == str(e).strip()
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

    e = explain(f, x, y, 0.7, argnums=(0, 1, 2), engine="numpy", quiet=True)
    gx, gy, gs = e.grad
    assert gx.shape == (30,) and gy.shape == (40,) and isinstance(gs, float)
    assert "(array 30 float64, array 40 float64, float" in str(e)
    (k,) = [k for k in e.kernels if k["domain"] == (30, 40)]
    assert len(k["outputs"]) == 3  # x, y and s gradients in one pass


def test_explain_reports_stores_with_reasons():
    x = np.linspace(0, 1, 20)
    # exp(x) is expensive, small, and broadcast over the 20×20 domain: stored, not recomputed.
    e = explain(lambda x: np.sum(np.exp(x)[:, None] * x[None, :]), x, quiet=True)
    assert e.stored and all("expensive" in s["reason"] for s in e.stored)
    assert "expensive" in str(e)


def test_explain_quiet_prints_nothing(capsys):
    explain(lambda x: np.sum(x * x), np.ones(3), quiet=True)
    assert capsys.readouterr().out == ""


def test_explain_unknown_engine_is_an_error():
    with pytest.raises(ValueError, match="engine"):
        explain(lambda x: np.sum(x), np.ones(3), engine="cuda")

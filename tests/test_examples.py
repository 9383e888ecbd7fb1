"""Smoke tests: each script in ``examples/`` runs at a small size and its checks hold."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    """Import ``examples/<name>.py`` by path (``examples/`` is not a package)."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fusegrad_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_lennard_jones():
    lj = load("lennard_jones")
    out = lj.main(n=300, verbose=False)
    F = out["forces"]
    assert F.shape == (300, 3) and np.all(np.isfinite(F))
    # Newton's third law: the forces sum to zero
    assert np.max(np.abs(F.sum(axis=0))) < 1e-10 * np.max(np.abs(F)) * 300
    # the hand-written blocked NumPy forces
    assert out["hand_rel_err"] < 1e-10
    np.testing.assert_allclose(F, lj.hand_forces(lj.lattice(300)), rtol=1e-9, atol=1e-9)
    assert out["ok"]


def test_lennard_jones_energy_two_particles():
    lj = load("lennard_jones")
    r = 2 ** (1 / 6)  # the minimum of the pair potential: E = -eps, zero force
    P = np.array([[0.0, 0.0, 0.0], [r, 0.0, 0.0]])
    assert float(lj.energy(P)) == pytest.approx(-1.0)
    np.testing.assert_allclose(lj.hand_forces(P), 0.0, atol=1e-12)


def test_lennard_jones_small_check_n():
    out = load("lennard_jones").main(n=200, check_n=50, verbose=False)
    assert out["ok"] and out["hand_rel_err"] < 1e-10


def test_mmd_two_sample():
    pytest.importorskip("scipy")
    out = load("mmd_two_sample").main(n=150, maxiter=100, verbose=False)
    assert out["fd_error"] < 1e-5 * max(1.0, out["grad_norm"])
    assert out["loss_after"] < out["loss_before"] / 20
    # the fitted mean approaches the data's (150 samples: loose)
    assert np.max(np.abs(out["b"] - out["mean"])) < 0.5
    assert out["ok"]


def test_logistic_regression():
    pytest.importorskip("scipy")
    out = load("logistic_regression").main(n=2000, d=5, verbose=False)
    assert out["err_newton"] < 1e-5
    assert out["err_hand"] < 1e-5
    if out["theta_sklearn"] is not None:
        assert out["err_sklearn"] < 1e-4
    assert out["ok"]


@pytest.mark.slow
def test_dask_pairwise():
    pytest.importorskip("distributed")
    out = load("dask_pairwise").main(n=1500, verbose=False)
    assert out["ok"] and out["rel_err"] < 1e-12

"""scipy.signal.convolve/correlate on traced values (fusegrad.scipy.signal)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss

import fusegrad as fg
import fusegrad.scipy.signal as fss
from fusegrad.testing import check_frule, check_grads, check_rrule

RNG = np.random.default_rng(0)
SHAPES = [((6,), (3,)), ((3,), (6,)), ((4, 5), (2, 3)), ((2, 3), (4, 5))]


@pytest.mark.parametrize("f", [ss.convolve, ss.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_plain_scipy_signal_calls_differentiate(shapes, mode, f):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    seen = {}

    def loss(x, y):
        out = f(x, y, mode=mode)
        seen["value"] = fg.numpy.stop_gradient(out)
        return np.sum(np.sin(out))

    check_grads(loss, ("rev", "fwd"), order=2)(a, b)
    fg.grad(loss)(a, b)
    np.testing.assert_allclose(seen["value"], f(a, b, mode=mode), atol=1e-12)


def test_rules_and_hand_derived():
    a, b = RNG.standard_normal(5), RNG.standard_normal(3)
    for mode in ("full", "same", "valid"):
        check_rrule(ss.convolve, a, b, mode=mode)
        check_frule(ss.convolve, a, b, mode=mode)
    # d/da Σ convolve(a, b) = Σ b for every element of a
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(ss.convolve(x, b)))(a), np.full(5, b.sum()))
    g = fg.grad(lambda x: np.sum(fss.correlate(x, b, mode="valid") * [1.0, 0.0, 0.0]))(a)
    np.testing.assert_allclose(g, np.r_[b, 0.0, 0.0])  # the first output reads a[0:3] · b


def test_plain_inputs_get_scipys_own_results():
    a, b = RNG.standard_normal(50), RNG.standard_normal(7)
    for mode in ("full", "same", "valid"):
        np.testing.assert_array_equal(fss.convolve(a, b, mode), ss.convolve(a, b, mode))
        np.testing.assert_array_equal(ss.correlate(a, b, mode), fss.correlate(a, b, mode))


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jss = pytest.importorskip("jax.scipy.signal")
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((2, 3))
    for mode in ("full", "same", "valid"):
        ours = fg.grad(lambda x, m=mode: np.sum(ss.correlate(x, b, mode=m) ** 2))(a)
        theirs = jax.grad(lambda x, m=mode: (jss.correlate(x, b, mode=m) ** 2).sum())(a)
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-9, err_msg=mode)

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


# (shape of in1, shape of in2, axes): all axes, either input larger, axes given, broadcast axes.
FFT_SHAPES = [
    ((6,), (3,), None),
    ((3,), (6,), None),
    ((4, 5), (2, 3), None),
    ((4, 5), (4, 3), (1,)),
    ((4, 5), (1, 3), -1),
    ((1, 5), (3, 3), None),  # SciPy broadcasts along an axis of length 1 (even in 'valid')
    ((3, 4, 5), (1, 2, 3), (1, 2)),
    ((2, 5), (2, 7), [1]),
]


@pytest.mark.parametrize("f", [ss.fftconvolve, ss.oaconvolve], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", FFT_SHAPES, ids=str)
def test_fft_convolutions_match_scipy_and_differentiate(shapes, mode, f):
    sa, sb, axes = shapes
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)

    def conv(x, y):
        return f(x, y, mode=mode, axes=axes)

    got = fg.vjp(conv, a, b)[0]
    np.testing.assert_allclose(got, conv(a, b), rtol=1e-12, atol=1e-12)
    assert np.shape(got) == np.shape(conv(a, b))
    check_grads(lambda x, y: np.sin(conv(x, y)), ("rev", "fwd"), order=2)(a, b)


def test_fft_convolutions_of_complex_inputs():
    a = RNG.standard_normal((3, 5)) + 1j * RNG.standard_normal((3, 5))
    b = RNG.standard_normal((2, 2))
    for f in (ss.fftconvolve, ss.oaconvolve):
        for mode in ("full", "same", "valid"):
            got = fg.vjp(lambda x, f=f, m=mode: f(x, b, mode=m), a)[0]
            np.testing.assert_allclose(got, f(a, b, mode=mode), rtol=1e-12, atol=1e-12)
        check_grads(lambda x, y, f=f: f(x, y, mode="same"), ("rev", "fwd"), order=2)(a, b)


def test_fft_convolution_gradients_are_convolves():
    """fftconvolve is convolve computed otherwise: the same gradient as the direct method, and
    d/da Σ fftconvolve(a, b) = Σ b for every element of a."""
    a, b = RNG.standard_normal(40), RNG.standard_normal(7)
    for mode in ("full", "same", "valid"):

        def loss(x, y, f, m=mode):
            return np.sum(np.tanh(f(x, y, m)))

        direct = fg.grad(loss, argnums=(0, 1))(a, b, lambda x, y, m: ss.convolve(x, y, m, "direct"))
        for f in (ss.fftconvolve, ss.oaconvolve):
            ours = fg.grad(loss, argnums=(0, 1))(a, b, f)
            for u, v in zip(ours, direct):
                np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12, err_msg=mode)
    g = fg.grad(lambda x: np.sum(ss.fftconvolve(x, b)))(a)
    np.testing.assert_allclose(g, np.full(40, b.sum()), rtol=1e-12)


def test_oaconvolve_of_a_long_signal_matches_its_overlap_add():
    a, b = RNG.standard_normal(300), RNG.standard_normal(9)  # SciPy uses several blocks
    got = fg.vjp(lambda x: ss.oaconvolve(x, b, mode="same"), a)[0]
    np.testing.assert_allclose(got, ss.oaconvolve(a, b, mode="same"), rtol=1e-10, atol=1e-12)


def test_fft_convolution_errors_are_scipys():
    a = RNG.standard_normal((4, 5))

    def grad_of(f, b, **kw):
        return fg.grad(lambda x: np.sum(f(x, b, **kw)))(a)

    for f in (ss.fftconvolve, ss.oaconvolve):
        with pytest.raises(ValueError, match="incompatible shapes"):
            grad_of(f, np.ones((3, 5)), axes=1)
        with pytest.raises(ValueError, match="at least as large"):
            grad_of(f, np.ones((5, 3)), mode="valid")
        with pytest.raises(ValueError, match="same dimensionality"):
            grad_of(f, np.ones(3))
        with pytest.raises(ValueError, match="cannot be empty"):
            grad_of(f, np.ones((2, 2)), axes=[])


def test_jit_replays_fft_convolution_gradients():
    b = RNG.standard_normal((2, 3))
    g = fg.grad(lambda x: np.sum(np.sin(ss.fftconvolve(x, b, mode="same"))))
    jg = fg.jit(g)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((4, 5))
        np.testing.assert_allclose(jg(x), g(x), rtol=1e-12, atol=1e-12)
    (info,) = jg.cache_info()
    assert info.replayable, info.reason


def test_plain_fft_convolutions_get_scipys_own_results():
    a, b = RNG.standard_normal(50), RNG.standard_normal(7)
    for mode in ("full", "same", "valid"):
        np.testing.assert_array_equal(fss.fftconvolve(a, b, mode), ss.fftconvolve(a, b, mode))
        np.testing.assert_array_equal(fss.oaconvolve(a, b, mode), ss.oaconvolve(a, b, mode))

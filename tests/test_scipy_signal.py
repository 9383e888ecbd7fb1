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


LFILTER_B, LFILTER_A = np.array([0.3, 0.2, -0.1]), np.array([1.2, -0.5, 0.2])  # a[0] != 1


@pytest.mark.parametrize("axis", [-1, 0])
def test_lfilter_in_every_argument(axis):
    x = np.random.default_rng(7).normal(size=(3, 12))

    def f(b, a, x):
        return np.sum(np.sin(ss.lfilter(b, a, x, axis=axis)))

    value = fg.value_and_grad(f)(LFILTER_B, LFILTER_A, x)[0]
    np.testing.assert_allclose(value, f(LFILTER_B, LFILTER_A, x), rtol=1e-13)
    check_grads(f, ("rev", "fwd"), order=2)(LFILTER_B, LFILTER_A, x)


def test_lfilter_hand_derived_one_pole():
    # lfilter([1], [1, -p], impulse) = pⁿ, so d/dp Σ wₙ pⁿ = Σ n wₙ pⁿ⁻¹
    p, n = 0.7, np.arange(10)
    w = np.cos(n)
    impulse = np.eye(10)[0]
    g = fg.grad(lambda p: np.sum(w * ss.lfilter(np.ones(1), np.stack([1.0, -p]), impulse)))(p)
    np.testing.assert_allclose(g, np.sum(n * w * p ** (n - 1.0)), rtol=1e-13)
    # and in x: the impulse response, reversed (y = h * x)
    gx = fg.grad(lambda x: ss.lfilter(np.ones(1), np.array([1.0, -p]), x)[-1])(np.zeros(10))
    np.testing.assert_allclose(gx, p ** n[::-1], rtol=1e-13)


def test_sosfilt_and_lfilter_under_jit_and_errors():
    sos = ss.butter(4, 0.2, output="sos")
    x = np.random.default_rng(8).normal(size=(2, 30))
    f = lambda x: np.sum(ss.sosfilt(sos, x) ** 2)  # noqa: E731
    np.testing.assert_allclose(fg.value_and_grad(f)(x)[0], f(x), rtol=1e-12)
    check_grads(f, ("rev", "fwd"), order=1)(x)
    g = fg.grad(lambda b, a, x: np.sum(ss.lfilter(b, a, x) ** 2), argnums=(0, 1, 2))
    jitted = fg.jit(g)
    for k in range(10):
        xk = x + k
        for got, want in zip(jitted(LFILTER_B, LFILTER_A, xk), g(LFILTER_B, LFILTER_A, xk)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    assert jitted.cache_info()[0].replayable


@pytest.mark.parametrize("axis", [-1, 0])
def test_lfilter_with_initial_state_and_its_final_state(axis):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(3, 12)) if axis == -1 else rng.normal(size=(12, 3))
    zi = rng.normal(size=(3, 2)) if axis == -1 else rng.normal(size=(2, 3))

    def f(b, a, x, zi):
        y, zf = ss.lfilter(b, a, x, axis=axis, zi=zi)
        return np.sum(np.sin(y)) + np.sum(zf * zf)

    np.testing.assert_allclose(fg.value_and_grad(f)(LFILTER_B, LFILTER_A, x, zi)[0],
                               f(LFILTER_B, LFILTER_A, x, zi), rtol=1e-13)  # fmt: skip
    check_grads(f, ("rev", "fwd"), order=2 if axis == -1 else 1)(LFILTER_B, LFILTER_A, x, zi)


@pytest.mark.parametrize("padtype", ["odd", "even", "constant", None])
def test_filtfilt_and_lfilter_zi(padtype):
    b, a = ss.butter(3, 0.3)
    x = np.random.default_rng(10).normal(size=(2, 40))

    def f(b, a, x):
        return np.sum(ss.filtfilt(b, a, x, padtype=padtype) ** 2)

    np.testing.assert_allclose(fg.value_and_grad(f)(b, a, x)[0], f(b, a, x), rtol=1e-12)
    check_grads(f, ("rev", "fwd"), order=1)(b, a, x)
    zi = fg.value_and_grad(lambda a: np.sum(ss.lfilter_zi(b, a)))(a)[0]
    np.testing.assert_allclose(zi, np.sum(ss.lfilter_zi(b, a)), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="method='pad'"):
        fg.grad(lambda x: np.sum(ss.filtfilt(b, a, x, method="gust")))(x[0])


def test_sosfilt_checks_scipys_a0_on_a_plain_sos():
    sos = ss.butter(2, 0.3, output="sos")
    sos[0, 3] = 2.0
    with pytest.raises(ValueError, match=r"sos\[:, 3\] should be all ones"):
        fg.grad(lambda x: np.sum(ss.sosfilt(sos, x)))(np.ones(8))


def test_sosfilt_with_initial_states():
    sos = ss.butter(4, 0.2, output="sos")
    x = np.random.default_rng(11).normal(size=(2, 30))
    zi = np.random.default_rng(12).normal(size=(sos.shape[0], 2, 2))

    def f(x, zi):
        y, zf = ss.sosfilt(sos, x, zi=zi)
        return np.sum(np.sin(y)) + np.sum(zf * zf)

    np.testing.assert_allclose(fg.value_and_grad(f)(x, zi)[0], f(x, zi), rtol=1e-12)
    check_grads(f, ("rev", "fwd"), order=1)(x, zi)


# --------------------------------------------------------------------------------------------------
# convolve2d, correlate2d
# --------------------------------------------------------------------------------------------------

SHAPES_2D = [((4, 5), (2, 3)), ((2, 3), (4, 5)), ((5, 5), (3, 3)), ((3, 2), (3, 4)),
             ((1, 4), (3, 3)), ((6, 4), (4, 2)), ((2, 2), (5, 6))]  # fmt: skip
BOUNDARIES = [("fill", 0.0), ("fill", 1.5), ("wrap", 0), ("symm", 0), ("circular", 0)]


@pytest.mark.parametrize("f", [ss.convolve2d, ss.correlate2d], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", SHAPES_2D, ids=str)
def test_2d_convolutions_match_scipy(shapes, mode, f):
    for boundary, fillvalue in BOUNDARIES:
        for complex_input in (False, True):
            a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
            if complex_input:
                a = a + 1j * RNG.standard_normal(shapes[0])
            kw = {"mode": mode, "boundary": boundary, "fillvalue": fillvalue}
            try:
                ref = f(a, b, **kw)
            except ValueError:  # 'valid' with neither input larger: SciPy's error, ours too
                with pytest.raises(ValueError, match="at least as large"):
                    fg.grad(lambda x, y, kw=kw: np.sum(np.abs(f(x, y, **kw)) ** 2))(a, b)
                continue
            seen = {}

            def loss(x, y, kw=kw, seen=seen):
                out = f(x, y, **kw)
                seen["value"] = fg.numpy.stop_gradient(out)
                return np.sum(np.abs(out) ** 2)

            fg.grad(loss)(a, b)
            assert seen["value"].shape == ref.shape and seen["value"].dtype == ref.dtype
            np.testing.assert_allclose(seen["value"], ref, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_2d_convolutions_differentiate(mode):
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((2, 3))
    for boundary in ("fill", "wrap", "symm"):
        for f in (ss.convolve2d, ss.correlate2d):
            check_grads(lambda x, y, f=f, bd=boundary: np.sum(np.sin(f(x, y, mode=mode,
                        boundary=bd, fillvalue=0.7))), ("rev", "fwd"), order=2)(a, b)  # fmt: skip
    check_grads(lambda x, v: np.sum(np.sin(ss.convolve2d(x, b, fillvalue=v))), ("rev", "fwd"))(
        a, 0.3
    )
    x32 = a.astype(np.float32)
    out = {}
    fg.grad(lambda x: np.sum(out.setdefault("v", ss.correlate2d(x, b.astype(np.float32)))))(x32)
    assert out["v"].dtype == np.float32


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_2d_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jss = pytest.importorskip("jax.scipy.signal")
    a, b = RNG.standard_normal((5, 6)), RNG.standard_normal((2, 3))
    for mode in ("full", "same", "valid"):
        for ours_f, jax_f in ((ss.convolve2d, jss.convolve2d), (ss.correlate2d, jss.correlate2d)):
            ours = fg.grad(lambda x, m=mode, f=ours_f: np.sum(f(x, b, mode=m) ** 3))(a)
            theirs = jax.grad(lambda x, m=mode, f=jax_f: (f(x, b, mode=m) ** 3).sum())(a)
            np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-9, err_msg=mode)

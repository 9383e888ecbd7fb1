"""scipy.fft on traced values (fusegrad.scipy.fft): SciPy's values, derivatives against finite
differences, hand-derived gradients, jit replay."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
import scipy.fft as sf

import fusegrad as fg
import fusegrad.scipy.fft as fsf
from fusegrad.testing import check_grads

NORMS = [None, "backward", "ortho", "forward"]
RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6))
Z = X + 1j * RNG.standard_normal((4, 6))

# (name, input, kwargs): every transform, with n/s cropping and padding, axes and axis.
FOURIER = [
    ("fft", Z, {}),
    ("fft", X, {"n": 9}),
    ("fft", Z, {"n": 3, "axis": 0}),
    ("ifft", Z, {"n": 8}),
    ("ifft", X, {"axis": -2}),
    ("rfft", X, {}),
    ("rfft", X, {"n": 5, "axis": 0}),
    ("irfft", Z, {}),
    ("irfft", Z, {"n": 7}),
    ("irfft", X, {"n": 4, "axis": 0}),
    ("hfft", Z, {"n": 5}),
    ("hfft", Z, {"axis": 0}),
    ("ihfft", X, {}),
    ("ihfft", X, {"n": 3}),
    ("fft2", Z, {"s": (3, 8)}),
    ("ifft2", Z, {"axes": (1, 0)}),
    ("fftn", Z, {}),
    ("fftn", X, {"s": (5,), "axes": (0,)}),
    ("ifftn", Z, {"s": (2, -1)}),
    ("rfft2", X, {}),
    ("rfftn", X, {"s": (3, 7)}),
    ("rfftn", X, {"axes": 0}),
    ("irfft2", Z, {}),
    ("irfftn", Z, {"s": (5, 4), "axes": (1, 0)}),
    ("hfft2", Z, {"s": (3, 5)}),
    ("hfftn", Z, {"axes": (0,)}),
    ("ihfft2", X, {}),
    ("ihfftn", X, {"s": (5, 4)}),
]
FOURIER_IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(FOURIER)]


def _traced_value(f, x):
    """``f(x)`` computed on a traced ``x`` (the mirror's value, not SciPy's)."""
    return np.asarray(fg.vjp(f, x)[0])


def _assert_scipys(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,x,kw", FOURIER, ids=FOURIER_IDS)
def test_fourier_transforms_match_scipy_and_differentiate(name, x, kw, norm):
    f = getattr(sf, name)

    def transform(v):
        return f(v, norm=norm, **kw)

    _assert_scipys(_traced_value(transform, x), transform(x))
    check_grads(lambda v: np.sin(transform(v)), ("rev", "fwd"), order=2)(x)


R2R = ["dct", "idct", "dst", "idst"]


@pytest.mark.parametrize("name", R2R + [n + "n" for n in R2R])
def test_real_transforms_match_scipy_for_every_type_norm_and_length(name):
    f = getattr(sf, name)
    lengths = [{}, {"s": (3, 8)}] if name.endswith("n") else [{}, {"n": 3}, {"n": 9, "axis": 0}]
    for t, norm, orth, x, kw in itertools.product(
        (1, 2, 3, 4), NORMS, (None, True, False), (X, Z), lengths
    ):
        kw = {"type": t, "norm": norm, "orthogonalize": orth, **kw}
        got = _traced_value(lambda v, kw=kw: f(v, **kw), x)
        np.testing.assert_allclose(got, f(x, **kw), rtol=1e-12, atol=1e-12, err_msg=str(kw))


@pytest.mark.parametrize("type", [1, 2, 3, 4])
@pytest.mark.parametrize("name", R2R)
def test_real_transforms_differentiate(name, type):
    f = getattr(sf, name)
    for norm, x, kw in [(None, X, {}), ("ortho", Z, {"n": 7}), ("forward", X, {"axis": 0})]:
        check_grads(lambda v, n=norm, k=kw: np.cos(f(v, type, norm=n, **k)), ("rev", "fwd"), 2)(x)
    check_grads(lambda v: sf.dctn(v, type, s=(3, 7), norm="ortho") ** 2, ("rev", "fwd"), order=2)(X)


def test_parseval_gradients():
    """Σ|fft(x)|² = N Σx² for real x (norm=None), so its gradient is 2 N x; ortho: 2x;
    forward: 2x / N. An orthogonal DCT preserves Σx² too."""
    x = X[0]
    n = x.size
    for norm, factor in ((None, 2 * n), ("backward", 2 * n), ("ortho", 2), ("forward", 2 / n)):
        g = fg.grad(lambda v, norm=norm: np.sum(np.abs(sf.fft(v, norm=norm)) ** 2))(x)
        np.testing.assert_allclose(g, factor * x, rtol=1e-12, err_msg=str(norm))
    for f, t in itertools.product((sf.dct, sf.dst, sf.idct, sf.idst), (1, 2, 3, 4)):
        g = fg.grad(lambda v, f=f, t=t: np.sum(f(v, t, norm="ortho") ** 2))(x)
        np.testing.assert_allclose(g, 2 * x, rtol=1e-12, err_msg=f"{f.__name__} {t}")


def test_dct2_pullback_is_a_dct3():
    """DCT-II has matrix 2 cos(πk(2n+1)/2N); its transpose is DCT-III with the first input
    doubled (DCT-III weighs x₀ by 1/2), and for DST-II it is DST-III with the last doubled."""
    ct = RNG.standard_normal(6)
    got = fg.vjp(sf.dct, X[1])[1](ct)[0]
    np.testing.assert_allclose(got, sf.dct(ct * [2, 1, 1, 1, 1, 1], type=3), rtol=1e-12)
    got = fg.vjp(sf.dst, X[1])[1](ct)[0]
    np.testing.assert_allclose(got, sf.dst(ct * [1, 1, 1, 1, 1, 2], type=3), rtol=1e-12)
    # forward mode of a linear map is the map itself
    t = RNG.standard_normal(6)
    np.testing.assert_allclose(fg.jvp(sf.idct, (X[1],), (t,))[1], sf.idct(t), rtol=1e-12)


def test_fft_vjp_is_the_fft_of_the_cotangent():
    """The DFT matrix is symmetric, so the vjp of fft (JAX's convention) is fft again."""
    ct = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
    for norm in NORMS:
        got = fg.vjp(lambda v, norm=norm: sf.fft(v, norm=norm), Z[0])[1](ct)[0]
        np.testing.assert_allclose(got, sf.fft(ct, norm=norm), rtol=1e-12, err_msg=str(norm))


def test_single_precision_is_kept():
    x32, z64 = X.astype(np.float32), Z.astype(np.complex64)
    transforms = [sf.fft, sf.irfft, sf.fftn, sf.hfft2]
    transforms += [lambda v, f=f, t=t: f(v, t) for f in (sf.dct, sf.dst) for t in (1, 2, 3, 4)]
    for i, f in enumerate(transforms):
        for x in (x32, z64):
            got = _traced_value(f, x)
            assert got.dtype == f(x).dtype, (i, x.dtype)
            np.testing.assert_allclose(got, f(x), rtol=1e-4, atol=1e-4)
    for f in (sf.rfft, sf.rfftn, sf.ihfft):
        assert _traced_value(f, x32).dtype == np.complex64


def test_shifts():
    for f in (sf.fftshift, sf.ifftshift):
        for axes in (None, 0, (1,)):
            _assert_scipys(_traced_value(lambda v, f=f, a=axes: f(v, axes=a), X), f(X, axes=axes))
        check_grads(lambda v, f=f: f(v) * np.arange(6.0), ("rev", "fwd"), order=2)(X)


def test_jit_replays_the_gradient():
    def loss(x):
        spectrum = sf.rfft(np.tanh(x), n=10, norm="ortho")
        return np.sum(np.abs(spectrum) ** 2) + np.sum(sf.dct(x, type=3) * sf.idst(x))

    g = fg.grad(loss)
    jg = fg.jit(g)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(7)
        np.testing.assert_allclose(jg(x), g(x), rtol=1e-12, atol=1e-12)
    (info,) = jg.cache_info()
    assert info.replayable, info.reason


def test_errors_are_scipys():
    def call(f, *args, **kw):
        return fg.grad(lambda v: np.sum(np.abs(f(v, *args, **kw))))(X)

    with pytest.raises(TypeError, match="real sequence"):
        fg.grad(lambda v: np.sum(np.abs(sf.rfft(v * 1j))))(X)
    with pytest.raises(ValueError, match="Invalid norm"):
        call(sf.fft, norm="unitary")
    with pytest.raises(NotImplementedError, match="plan"):
        call(sf.fft, plan=object())
    with pytest.raises(ValueError, match="invalid number of data points"):
        call(sf.fft, n=0)
    with pytest.raises(ValueError, match="unique"):
        call(sf.fftn, axes=(0, 0))
    with pytest.raises(ValueError, match="invalid DCT type"):
        call(sf.dct, type=5)
    with pytest.raises(ValueError, match="at least 2 points"):
        call(sf.dct, type=1, n=1)


def test_plain_inputs_get_scipys_own_results():
    for name in ("fft", "rfft", "irfft", "fftn", "dct", "idst", "dctn"):
        x = Z if name in ("fft", "irfft", "fftn") else X
        np.testing.assert_array_equal(getattr(fsf, name)(x), getattr(sf, name)(x))


def test_a_name_imported_before_fusegrad_differentiates():
    code = (
        "from scipy.fft import fft\n"
        "import numpy as np, fusegrad as fg\n"
        "g = fg.grad(lambda x: np.sum(np.abs(fft(x)) ** 2))(np.array([1.0, 2.0]))\n"
        "assert np.allclose(g, [4.0, 8.0]), g\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)

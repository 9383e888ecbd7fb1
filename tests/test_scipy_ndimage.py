"""scipy.ndimage's linear filters on traced values (fusegrad.scipy.ndimage)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.ndimage as nd
from traced_values import traced_value

import fusegrad as fg
import fusegrad.scipy.ndimage as fnd
from fusegrad.rules.special import NoDerivativeError
from fusegrad.testing import check_grads

RNG = np.random.default_rng(7)
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-mirror", "grid-wrap",
         "grid-constant"]  # fmt: skip


def _traced_value(f, x, *args, **kwargs):
    """f's value on traced x (under grad) and SciPy's on plain x."""
    return traced_value(f, x, *args, argnums=0, **kwargs)[:2]


def _same(ours, scipy_value):
    assert ours.dtype == scipy_value.dtype and ours.shape == scipy_value.shape
    tol = 1e-5 if ours.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(ours, scipy_value, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 5, 9])  # shorter than the kernels too (repeated extension)
def test_1d_filters_match_scipy_in_every_mode(mode, n):
    x = RNG.standard_normal(n)
    for w in ([1.0, 2.0, 1.0], [1.0, -3.0], RNG.standard_normal(7), [2.0], RNG.standard_normal(12)):
        for origin in sorted({0, -(len(w) // 2), (len(w) - 1) // 2}):
            for f in (nd.correlate1d, nd.convolve1d):
                _same(*_traced_value(f, x, w, mode=mode, cval=0.7, origin=origin))
    for sigma in (0.5, 1.0, 3.0):
        _same(*_traced_value(nd.gaussian_filter1d, x, sigma, mode=mode, cval=0.3))
        _same(*_traced_value(nd.gaussian_filter1d, x, sigma, order=1, mode=mode))
    for size in (1, 2, 3, 4, 11):
        _same(*_traced_value(nd.uniform_filter1d, x, size, mode=mode, cval=0.2))


@pytest.mark.parametrize("mode", MODES)
def test_nd_filters_match_scipy(mode):
    x, w = RNG.standard_normal((5, 6)), RNG.standard_normal((3, 2))
    _same(*_traced_value(nd.correlate, x, w, mode=mode, cval=0.5))
    _same(*_traced_value(nd.convolve, x, w, mode=mode, cval=0.5, origin=(1, -1)))
    _same(*_traced_value(nd.gaussian_filter, x, (1.0, 0.5), mode=mode))
    _same(*_traced_value(nd.gaussian_filter, x.astype(np.float32), 1.5, mode=mode))  # float32
    _same(*_traced_value(nd.uniform_filter, x, (3, 2), mode=mode))
    _same(*_traced_value(nd.uniform_filter1d, x.astype(np.float32), 3, axis=0, mode=mode))
    _same(*_traced_value(nd.correlate1d, x, [1.0, 2.0, 0.5], axis=0, mode=mode))


def test_axes_origins_and_per_axis_modes_are_scipys():
    x = RNG.standard_normal((3, 4, 5))
    w2, w3 = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3, 2))
    _same(*_traced_value(nd.correlate, x, w2, axes=(2, 0)))
    _same(*_traced_value(nd.correlate, x, w2, axes=(2, 0), origin=(1, -1)))
    _same(*_traced_value(nd.convolve, x, w3, axes=(2, 0, 1), origin=(0, 1, -1)))
    _same(*_traced_value(nd.gaussian_filter, x, 1.0, axes=(1,), radius=2))
    modes = ["wrap", "nearest", "constant"]
    _same(*_traced_value(nd.gaussian_filter, x, 1.0, mode=modes, order=(0, 1, 2)))


@pytest.mark.parametrize("mode", MODES)
def test_pullbacks_are_the_adjoint_filters(mode):
    x, w, img = RNG.standard_normal(6), RNG.standard_normal(4), RNG.standard_normal((5, 4))
    k = RNG.standard_normal((3, 2))
    check_grads(lambda v: np.sum(np.sin(nd.gaussian_filter1d(v, 1.3, mode=mode))),
                ("rev", "fwd"), order=2)(x)  # fmt: skip
    check_grads(lambda v, u: np.sum(np.sin(nd.convolve1d(v, u, mode=mode, origin=-1))),
                ("rev", "fwd"), order=2)(x, w)  # fmt: skip
    check_grads(lambda v: np.sum(np.sin(nd.uniform_filter(v, 3, mode=mode))), ("rev", "fwd"))(img)
    check_grads(lambda v, u: np.sum(np.sin(nd.correlate(v, u, mode=mode, cval=0.4))),
                ("rev", "fwd"))(img, k)  # fmt: skip


def test_adjoint_identity_and_cval():
    # <F x, y> = <x, Fᵀ y>: the pullback of a linear filter is its transpose, exactly
    x, y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    for mode in MODES:
        _, vjp = fg.vjp(lambda v, m=mode: nd.gaussian_filter(v, 0.8, mode=m), x)
        lhs = np.sum(nd.gaussian_filter(x, 0.8, mode=mode) * y)
        np.testing.assert_allclose(lhs, np.sum(x * vjp(y)[0]), rtol=1e-12)
    # a traced cval enters the 'constant' extension
    g = fg.grad(lambda c: np.sum(nd.correlate1d(np.zeros(3), [1.0, 1.0, 1.0], mode="constant",
                                                cval=c)))(1.0)  # fmt: skip
    assert g == pytest.approx(2.0)


def test_plain_calls_and_errors():
    x = RNG.standard_normal(8)
    np.testing.assert_array_equal(fnd.gaussian_filter(x, 1.0), nd.gaussian_filter(x, 1.0))
    with pytest.raises(NoDerivativeError, match="sigma"):
        fg.grad(lambda s: np.sum(nd.gaussian_filter1d(x, s)))(1.0)
    with pytest.raises(TypeError, match="output"):
        fg.grad(lambda v: np.sum(nd.convolve1d(v, [1.0, 2.0], output=np.empty(8))))(x)
    with pytest.raises(RuntimeError, match="boundary mode"):
        fg.grad(lambda v: np.sum(nd.convolve1d(v, [1.0, 2.0], mode="bogus")))(x)
    with pytest.raises(ValueError, match="origin"):
        fg.grad(lambda v: np.sum(nd.correlate1d(v, [1.0, 2.0, 1.0], origin=2)))(x)
    with warnings.catch_warnings():  # (as scipy.signal.convolve's, it may run uncompiled)
        warnings.simplefilter("ignore", UserWarning)
        out = fg.jit(lambda v: nd.gaussian_filter1d(v, 1.0, mode="wrap"))(x)
    np.testing.assert_allclose(out, nd.gaussian_filter1d(x, 1.0, mode="wrap"), rtol=1e-12)

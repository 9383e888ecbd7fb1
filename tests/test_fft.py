"""np.fft rules (fusegrad.rules.fft) against finite differences, hand-derived values and JAX."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.rules.registry import FRULES, RRULES
from fusegrad.testing import check_frule, check_grads, check_rrule

NORMS = [None, "backward", "ortho", "forward"]
RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6))
Z = X + 1j * RNG.standard_normal((4, 6))
C = RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))

# (function, input, kwargs): every transform with and without n/s/axes.
CASES = [
    (np.fft.fft, Z, {}),
    (np.fft.fft, Z, {"n": 4, "axis": 0}),
    (np.fft.fft, X, {"n": 9}),
    (np.fft.ifft, Z, {}),
    (np.fft.ifft, Z, {"n": 3}),
    (np.fft.fft2, Z, {}),
    (np.fft.fft2, Z, {"s": (3, 8)}),
    (np.fft.ifft2, Z, {"axes": (1, 0)}),
    (np.fft.fftn, Z, {}),
    (np.fft.fftn, Z, {"s": (5,), "axes": (0,)}),
    (np.fft.ifftn, Z, {"s": (2, 7), "axes": (0, 1)}),
    (np.fft.rfft, X, {}),
    (np.fft.rfft, X, {"n": 7}),
    (np.fft.rfft, X, {"n": 4, "axis": 0}),
    (np.fft.rfft2, X, {}),
    (np.fft.rfftn, X, {"s": (5, 5), "axes": (0, 1)}),
    (np.fft.irfft, C, {}),
    (np.fft.irfft, C, {"n": 7}),
    (np.fft.irfft, C, {"n": 4, "axis": 0}),
    (np.fft.irfft2, C, {}),
    (np.fft.irfftn, C, {"s": (3, 5), "axes": (0, 1)}),
    (np.fft.irfftn, C, {"s": (6,), "axes": (1,)}),
]
IDS = [f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CASES)]


def jax_fd_vjp(f, z, ct, h=1e-6):
    """JAX's cotangent of z for <ct, f(z)> (bilinear pairing Re(ct · f)): dL/dx − i dL/dy."""
    z = np.asarray(z, dtype=complex)
    g = np.zeros(z.shape, complex)

    def loss(v):
        return float(np.real(np.sum(ct * f(v))))

    for idx in np.ndindex(z.shape):
        for unit, sign in ((1.0, 1.0), (1j, -1j)):
            e = np.zeros(z.shape, complex)
            e[idx] = unit * h
            g[idx] += sign * (loss(z + e) - loss(z - e)) / (2 * h)
    return g


def _random_ct(y, rng):
    ct = rng.standard_normal(np.shape(y))
    return ct + 1j * rng.standard_normal(np.shape(y)) if np.iscomplexobj(y) else ct


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("f,a,kw", CASES, ids=IDS)
def test_rules_on_real_parts(f, a, kw, norm):
    """check_rrule/check_frule on a real input (where the complex conventions agree)."""
    x = np.ascontiguousarray(np.real(a))
    check_rrule(f, x, norm=norm, **kw)
    check_frule(f, x, norm=norm, **kw)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("f,a,kw", [c for c in CASES if np.iscomplexobj(c[1])])
def test_complex_inputs_jax_convention(f, a, kw, norm):
    """Complex inputs: the cotangent is JAX's (ct · f'(z), no conjugate), against finite
    differences of the real and imaginary parts; the forward rule against finite differences."""
    rng = np.random.default_rng(1)
    y, vjp = fg.vjp(lambda v: f(v, norm=norm, **kw), a)
    np.testing.assert_allclose(y, f(a, norm=norm, **kw), atol=1e-12)
    ct = _random_ct(y, rng)
    got = vjp(ct)[0]
    want = jax_fd_vjp(lambda v: f(v, norm=norm, **kw), a, ct)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    check_frule(f, a, norm=norm, **kw)


def test_fft_vjp_is_fft_of_the_cotangent():
    """Hand-derived: the DFT matrix is symmetric, so JAX's vjp of fft is fft (no conjugate)."""
    ct = _random_ct(Z, np.random.default_rng(2))
    got = fg.vjp(np.fft.fft, Z)[1](ct)[0]
    np.testing.assert_allclose(got, np.fft.fft(ct), atol=1e-12)
    got = fg.vjp(lambda z: np.fft.ifft(z, norm="ortho"), Z)[1](ct)[0]
    np.testing.assert_allclose(got, np.fft.ifft(ct, norm="ortho"), atol=1e-12)


def test_parseval_gradient():
    """sum |rfft(x)|² = (N Σx² + |X₀|² + |X_{N/2}|²)/2, so its gradient is N x + X₀ + (−1)ⁿ X₂."""
    x = np.array([1.0, 2.0, 0.5, 0.0])
    g = fg.grad(lambda v: np.sum(np.abs(np.fft.rfft(v)) ** 2))(x)
    np.testing.assert_allclose(g, [7.0, 12.0, 5.0, 4.0])
    # ortho norm: the full fft is unitary, so the gradient of sum |fft(x)|² is 2x.
    g = fg.grad(lambda v: np.sum(np.abs(np.fft.fft(v, norm="ortho")) ** 2))(x)
    np.testing.assert_allclose(g, 2 * x)


@pytest.mark.parametrize(
    "fun",
    [
        lambda x: np.abs(np.fft.rfft(np.sin(x), norm="ortho")) ** 2,
        lambda x: np.fft.irfft(np.fft.rfft(x) * np.exp(-np.arange(4.0)), n=6) ** 3,
        lambda x: np.real(np.fft.ifft2(np.fft.fft2(x) ** 2, s=(3, 5))),
        lambda x: np.fft.fftshift(np.abs(np.fft.fftn(x, axes=(0,))) ** 2, axes=0),
        lambda x: np.fft.ifftshift(x**2),
    ],
)
def test_second_order(fun):
    check_grads(fun, modes=("rev", "fwd"), order=2)(X)


def test_shifts_match_numpy_and_have_gradients():
    for f in (np.fft.fftshift, np.fft.ifftshift):
        for axes in (None, 0, (1,), (0, 1)):
            y = fg.vjp(lambda v, f=f, axes=axes: f(v, axes=axes), X[:, :5])[0]
            np.testing.assert_array_equal(y, f(X[:, :5], axes=axes))
        check_grads(lambda v, f=f: f(v) * np.arange(5.0), modes=("rev", "fwd"))(X[:, :5])


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    "f,a,kw",
    [(np.fft.hfft, C[0], {}), (np.fft.hfft, C[0], {"n": 5}), (np.fft.ihfft, X[0], {}),
     (np.fft.ihfft, X[0], {"n": 4})],
)  # fmt: skip
def test_hermitian_transforms_are_composites(f, a, kw, norm):
    y, vjp = fg.vjp(lambda v: f(v, norm=norm, **kw), a)
    np.testing.assert_allclose(y, f(a, norm=norm, **kw), rtol=1e-12, atol=1e-12)
    ct = _random_ct(y, np.random.default_rng(1))
    (got,) = vjp(ct)
    if np.iscomplexobj(a):
        want = jax_fd_vjp(lambda v: f(v, norm=norm, **kw), a, ct)
    else:  # ihfft takes real input: the derivative along the real axis only

        def loss(v):
            return float(np.real(np.sum(ct * f(v, norm=norm, **kw))))

        h = 1e-6
        want = np.array([(loss(a + h * e) - loss(a - h * e)) / (2 * h) for e in np.eye(a.size)])
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_every_transform_has_both_rules():
    for f in {c[0] for c in CASES}:
        assert f in RRULES and f in FRULES


@pytest.mark.slow  # JAX compiles each function on first use: tens of seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for f, a, kw in CASES:
            for norm in ("backward", "ortho", "forward"):
                jf = getattr(jnp.fft, f.__name__)
                y, vjp = fg.vjp(lambda v, f=f, kw=kw, norm=norm: f(v, norm=norm, **kw), a)
                ct = _random_ct(y, rng)
                jy, jvjp = jax.vjp(lambda v, jf=jf, kw=kw, norm=norm: jf(v, norm=norm, **kw), a)
                np.testing.assert_allclose(
                    vjp(ct)[0], jvjp(jnp.asarray(ct, jy.dtype))[0], atol=1e-9
                )
                t = _random_ct(a, rng)
                ydot = fg.jvp(lambda v, f=f, kw=kw, norm=norm: f(v, norm=norm, **kw), (a,), (t,))[1]
                jdot = jax.jvp(
                    lambda v, jf=jf, kw=kw, norm=norm: jf(v, norm=norm, **kw), (a,), (t,)
                )[1]
                np.testing.assert_allclose(ydot, jdot, atol=1e-9)

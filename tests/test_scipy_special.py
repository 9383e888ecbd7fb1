"""scipy.special on traced values: ufunc rules (fusegrad.rules.special), the plain SciPy Python
functions (logsumexp, softmax, log_softmax, polygamma, zeta) and fusegrad.scipy.special."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.ndimage
import scipy.special as sp
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.scipy.special as fsp
from fusegrad.ad.core import NoRuleError
from fusegrad.rules.special import NoDerivativeError, gammainc_da
from fusegrad.scipy import _dispatch
from fusegrad.testing import check_frule, check_grads, check_rrule

RNG = np.random.default_rng(0)
POS = np.array([0.6, 1.3, 2.7])  # inside every domain below
UNIT = np.array([0.15, 0.5, 0.8])  # (0, 1)
REAL = np.array([-1.2, 0.3, 1.7])

UNARY = [
    (sp.gammaln, POS), (sp.loggamma, POS), (sp.digamma, POS), (sp.psi, POS), (sp.gamma, POS),
    (sp.rgamma, POS),
    (sp.erfinv, UNIT - 0.3), (sp.erfcinv, UNIT + 0.4), (sp.erfcx, REAL), (sp.ndtr, REAL),
    (sp.ndtri, UNIT), (sp.log_ndtr, REAL), (sp.entr, POS), (sp.j0, POS), (sp.j1, POS),
    (sp.y0, POS), (sp.y1, POS), (sp.i0, REAL), (sp.i0e, REAL), (sp.i1, REAL), (sp.i1e, REAL),
    (np.sinc, REAL),
]  # fmt: skip
BINARY = [(sp.beta, POS, POS[::-1]), (sp.betaln, POS, POS[::-1]), (sp.rel_entr, POS, UNIT),
          (sp.kl_div, POS, UNIT)]  # fmt: skip
# f(order, x): derivative in x only; the order is a constant (float, or int for yn).
ORDERED = [(sp.gammainc, 1.7, POS), (sp.gammaincc, 1.7, POS), (sp.jv, 1.5, POS), (sp.yv, 0.5, POS),
           (sp.yn, 2, POS), (sp.iv, 1.5, REAL), (sp.ive, 1.5, REAL), (sp.kv, 0.7, POS),
           (sp.jv, 2.0, POS)]  # fmt: skip


def _id(case):
    return case[0].__name__


@pytest.mark.parametrize("case", UNARY, ids=[_id(c) for c in UNARY])
def test_unary_rules(case):
    f, x = case
    check_rrule(f, x)
    check_frule(f, x)
    check_grads(lambda v: np.sum(f(v)), modes=("rev", "fwd"), order=2)(x)


@pytest.mark.parametrize("case", BINARY, ids=[_id(c) for c in BINARY])
def test_binary_rules(case):
    f, a, b = case
    check_rrule(f, a, b)
    check_frule(f, a, b)
    check_grads(lambda u, v: np.sum(f(u, v)), modes=("rev", "fwd"), order=2)(a, b)
    check_rrule(f, a[:, None], b[None, :])  # broadcasting: each cotangent summed back


@pytest.mark.parametrize("case", ORDERED, ids=[f"{_id(c)}-{c[1]}" for c in ORDERED])
def test_rules_in_x_with_a_constant_order(case):
    f, order, x = case
    check_grads(lambda v: np.sum(f(order, v)), modes=("rev", "fwd"), order=2)(x)
    check_frule(f, order, x, tangents=(fg.NoTangent(), np.ones_like(x)))


COMPLEX = np.array([0.7 + 0.3j, 1.5 - 0.4j, 3.0 + 2.0j])


@pytest.mark.parametrize("f", [sp.gamma, sp.digamma, sp.rgamma, sp.erfcx, sp.ndtr, sp.log_ndtr],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_holomorphic_ufuncs_on_complex_inputs(f):
    check_rrule(f, COMPLEX)  # JAX's convention: ct * f'(z), no conjugate
    check_frule(f, COMPLEX)


@pytest.mark.parametrize("f", [sp.jv, sp.iv, sp.kv, sp.yv], ids=lambda f: f.__name__)
def test_bessel_of_complex_argument(f):
    check_frule(f, 1.5, COMPLEX, tangents=(fg.NoTangent(), np.ones_like(COMPLEX)))
    check_rrule(f, 1, COMPLEX)  # an int order: no cotangent asked of it


def test_complex_trigamma_matches_polygamma_on_the_real_axis():
    from fusegrad.rules.special import _trigamma_complex

    x = np.linspace(0.05, 30, 200)
    np.testing.assert_allclose(_trigamma_complex(x + 0j).real, sp.polygamma(1, x), rtol=1e-13)


def test_betainc_and_zeta_in_their_last_argument():
    check_grads(lambda v: np.sum(sp.betainc(2.0, 3.5, v)), modes=("rev", "fwd"), order=2)(UNIT)
    check_grads(lambda q: np.sum(sp.zeta(3.0, q)), modes=("rev", "fwd"), order=2)(POS)


def test_hand_derived_values():
    x = np.array([1.0, 2.0, 3.0])
    euler = 0.5772156649015329
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.gammaln(v)))(x),
                               [-euler, 1 - euler, 1.5 - euler])  # fmt: skip
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.digamma(v)))(np.ones(1)), [np.pi**2 / 6])
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.ndtr(v)))(np.zeros(1)),
                               [1 / np.sqrt(2 * np.pi)])  # fmt: skip
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.j0(v)))(x), -sp.j1(x))
    assert fg.grad(lambda v: np.sum(sp.gammasgn(v)))(x).tolist() == [0.0, 0.0, 0.0]
    assert fg.grad(lambda v: np.sinc(v))(0.0) == 0.0
    # near and at 0, by its series: (cos(pi x) - sinc x) / x cancels (30% off at 1e-8), and a
    # constant 0 at 0 gave sinc''(0) = 0 (it is -pi^2/3)
    assert fg.grad(np.sinc)(1e-8) == pytest.approx(-(np.pi**2) * 1e-8 / 3, rel=1e-12)
    assert fg.grad(fg.grad(np.sinc))(0.0) == pytest.approx(-(np.pi**2) / 3, rel=1e-14)
    for x0 in (0.9e-3, 1.1e-3, 0.3):  # the two branches meet without a step
        h = 1e-6  # (sinc is near 1: a smaller step is all rounding)
        fd = (np.sinc(x0 + h) - np.sinc(x0 - h)) / (2 * h)
        assert fg.grad(np.sinc)(x0) == pytest.approx(fd, rel=1e-6)


def test_sinc_slope_keeps_single_precision_digits():
    # the series branch switches per precision: float32 by the formula lost 1.5% at x = 1e-3
    x = np.array([1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 0.05, 0.14, 0.16, 0.5, -0.02], np.float32)
    want = fg.grad(lambda v: np.sum(np.sinc(v)))(x.astype(np.float64))
    got = fg.grad(lambda v: np.sum(np.sinc(v)))(x)
    _, tangent = fg.jvp(np.sinc, (x,), (np.ones_like(x),))
    assert got.dtype == tangent.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6)
    np.testing.assert_allclose(tangent, want, rtol=2e-6)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_slopes_that_cancel_far_out_keep_their_digits(engine):
    """erfcx'(x) = 2x erfcx(x) - 2/√π and log_expit'(x) = 1 - e^y cancel for large x: 0 at
    x = 1e8 and 40, and 1e-11 relative at 1e3. Hand-derived tails: -1/(√π x²) (1 - 3/(2x²))
    and expit(-x)."""
    x = np.array([30.0, 1e3, 1e8])
    tail = -1 / (np.sqrt(np.pi) * x**2) * (1 - 1.5 / x**2 + 3.75 / x**4)
    tail[0] = -6.258354105074841e-04  # at 30 the three terms are not enough: mpmath, 40 digits
    with fg.use_engine(engine):
        g = fg.grad(lambda v: np.sum(sp.erfcx(v)))(np.repeat(x, 1000))[::1000]
        np.testing.assert_allclose(g, tail, rtol=2e-13)
        np.testing.assert_allclose(fg.grad(sp.erfcx)(1e8), tail[2], rtol=1e-15)
        v = np.array([10.0, 40.0, 100.0, -40.0])
        g = fg.grad(lambda v: np.sum(sp.log_expit(v)))(np.repeat(v, 1000))[::1000]
        np.testing.assert_allclose(g, sp.expit(-v), rtol=1e-14)
    check_grads(sp.erfcx, ("rev", "fwd"), order=2)(np.array([24.0, 26.0, 40.0]))


@pytest.mark.parametrize("f", [sp.jv, sp.iv, sp.kv])
def test_a_traced_order_raises_naming_the_function(f):
    with pytest.raises(NoDerivativeError, match=rf"scipy\.special\.{f.__name__} with respect to"):
        fg.grad(lambda v: np.sum(f(v, POS)))(np.array([1.0, 2.0, 1.5]))
    with pytest.raises(NoDerivativeError, match="scipy.special"):
        fg.jvp(lambda v: f(v, POS), (np.array([1.0, 2.0, 1.5]),), (np.ones(3),))


def test_errors_name_scipy_functions_by_module():
    with pytest.raises(NoRuleError, match=r"scipy\.special\.struve") as info:
        fg.grad(lambda v: np.sum(sp.struve(1.0, v)))(POS)
    assert "np.struve" not in str(info.value)


# ------------------------------------------------------------------ SciPy's Python functions


def test_plain_logsumexp_inside_grad():
    x = RNG.standard_normal((3, 4))
    g = fg.grad(lambda v: sp.logsumexp(v))(x)
    np.testing.assert_allclose(g, np.exp(x - sp.logsumexp(x)))  # the softmax
    g1 = fg.grad(lambda v: np.sum(sp.logsumexp(v, axis=1) * np.arange(3.0)))(x)
    np.testing.assert_allclose(g1, np.arange(3.0)[:, None] * sp.softmax(x, axis=1))
    check_grads(lambda v: np.sum(sp.logsumexp(v, axis=0, keepdims=True)), ("rev", "fwd"), 2)(x)


def test_logsumexp_with_b_and_return_sign():
    x, b = np.array([0.1, -0.4, 0.7, 0.2]), np.array([1.0, -0.3, 0.5, 3.0])
    check_grads(lambda v, w: sp.logsumexp(v, b=w, return_sign=True)[0], ("rev",), 2)(x, b)
    out, _ = fg.value_and_grad(lambda v: sp.logsumexp(v, b=b, return_sign=True)[0])(x)
    np.testing.assert_allclose(out, sp.logsumexp(x, b=b, return_sign=True)[0])
    bneg = -b  # a negative sum: its sign comes back as SciPy's
    assert sp.logsumexp(x, b=bneg, return_sign=True)[1] == -1
    value = fg.value_and_grad(lambda v: sp.logsumexp(v, b=bneg, return_sign=True)[0])(x)[0]
    np.testing.assert_allclose(value, sp.logsumexp(x, b=bneg, return_sign=True)[0])
    check_grads(lambda v: np.sum(sp.logsumexp(v, 0, b[:, None])), ("rev", "fwd"), 2)(x[:, None])


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_plain_softmax_and_log_softmax(axis):
    x = RNG.standard_normal((3, 4))
    w = RNG.standard_normal((3, 4))
    s = sp.softmax(x, axis=axis)
    g = fg.grad(lambda v: np.sum(w * sp.softmax(v, axis=axis)))(x)
    inner = np.sum(w * s, axis=axis, keepdims=axis is not None)
    np.testing.assert_allclose(g, s * (w - inner), atol=1e-12)  # the softmax Jacobian
    check_grads(lambda v: np.sum(w * sp.log_softmax(v, axis=axis)), ("rev", "fwd"), 2)(x)
    np.testing.assert_allclose(fsp.log_softmax(x, axis=axis), sp.log_softmax(x, axis=axis))


def test_polygamma_and_zeta():
    check_grads(lambda v: np.sum(sp.polygamma(2, v)), ("rev", "fwd"), 2)(POS)
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.polygamma(0, v)))(POS),
                               sp.polygamma(1, POS))  # fmt: skip
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(sp.polygamma(1, v)))(POS),
                               sp.polygamma(2, POS))  # fmt: skip
    np.testing.assert_allclose(fg.grad(lambda q: sp.zeta(2.0, q))(1.0), -2 * sp.zeta(3.0, 1.0))


@given(st.integers(1, 5), st.integers(1, 4), st.sampled_from([np.float64, np.float32]))
def test_plain_inputs_get_scipys_own_results(n, m, dtype):
    x = np.asarray(RNG.standard_normal((n, m)), dtype)
    for name in ("logsumexp", "softmax", "log_softmax"):
        ours, theirs = getattr(sp, name), _dispatch.scipy_code(getattr(sp, name))
        assert ours is not theirs  # redirected at import of fusegrad
        for kw in ({}, {"axis": 1}):
            a, b = ours(x, **kw), theirs(x, **kw)
            assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b)
    assert sp.logsumexp.__name__ == "logsumexp" and sp.logsumexp.__doc__


def test_the_mirrors_are_usable_directly():
    x = RNG.standard_normal(5)
    np.testing.assert_allclose(fg.grad(fsp.logsumexp)(x), sp.softmax(x))
    assert fsp.gammaln is sp.gammaln  # the ufuncs under their SciPy names


def test_a_function_bound_before_fusegrad_works_unchanged():
    """In a fresh interpreter: SciPy names imported before fusegrad are redirected in place
    (scipy.signal and scipy.integrate, redirected by the same code, take seconds to import)."""
    code = textwrap.dedent(
        """
        import inspect
        import numpy as np
        from scipy.special import logsumexp, polygamma
        from scipy.linalg import expm
        import fusegrad as fg
        import scipy.special

        assert scipy.special.logsumexp is logsumexp  # the same object, redirected in place
        assert list(inspect.signature(logsumexp).parameters)[:2] == ["a", "axis"]
        assert np.allclose(fg.grad(lambda x: logsumexp(x))(np.zeros(4)), 0.25)
        assert np.allclose(fg.grad(lambda x: np.sum(polygamma(1, x)))(np.ones(2)),
                           scipy.special.polygamma(2, np.ones(2)))
        assert np.isclose(fg.grad(lambda a: np.trace(expm(a)))(np.eye(2))[0, 0], np.e)
        assert logsumexp(np.zeros(2)) == np.log(2)  # plain inputs: SciPy's own code
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "FUSEGRAD_EAGER_BELOW"}  # as users run
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_scipys_own_code_on_a_traced_value_names_the_replacement():
    polygamma = _dispatch.scipy_code(sp.polygamma)  # SciPy's code, bypassing the redirection
    with pytest.raises(TypeError, match=r"inside scipy\.special\.polygamma.*fusegrad\.scipy\."
                       r"special\.polygamma"):  # fmt: skip
        fg.grad(lambda v: np.sum(polygamma(1, v)))(np.ones(3))


def test_a_scipy_function_without_rule_is_named():
    with pytest.raises(TypeError, match=r"inside scipy\.ndimage\.median_filter.*no rule"):
        fg.grad(lambda v: np.sum(scipy.ndimage.median_filter(v, 3)))(np.ones(5))
    import scipy.interpolate as si  # a class: named by its class, not by __init__

    x = np.linspace(0, 1, 6)
    with pytest.raises(TypeError, match=r"inside scipy\.interpolate\.Akima1DInterpolator, "):
        fg.grad(lambda y: np.sum(si.Akima1DInterpolator(x, y)(0.5)))(np.sin(x))
    import scipy.linalg as sl  # behind SciPy's batching decorator (scipy._lib's ``wrapper``)

    with pytest.raises(TypeError, match=r"inside scipy\.linalg\.schur, "):
        fg.grad(lambda a: np.sum(sl.schur(a)[0]))(np.eye(3))


@pytest.mark.slow  # JAX compiles each function on first use: about 40 s
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jsp = pytest.importorskip("jax.scipy.special")
    pairs = [("gammaln", POS), ("digamma", POS), ("erfinv", UNIT - 0.3), ("ndtri", UNIT),
             ("log_ndtr", REAL), ("ndtr", REAL), ("entr", POS), ("i0e", REAL), ("i1", REAL),
             ("erfcx", REAL)]  # fmt: skip
    for name, x in pairs:
        f, jf = getattr(sp, name), getattr(jsp, name)
        ours = fg.grad(lambda v, f=f: np.sum(f(v)))(x)
        theirs = jax.grad(lambda v, jf=jf: jf(v).sum())(x)
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-9, err_msg=name)
    x = RNG.standard_normal((2, 3))
    ours = fg.grad(lambda v: np.sum(sp.logsumexp(v, axis=1) ** 2))(x)
    theirs = jax.grad(lambda v: (jsp.logsumexp(v, axis=1) ** 2).sum())(x)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-10)
    ours = fg.grad(lambda v: np.sum(sp.gammainc(1.7, v)))(POS)
    theirs = jax.grad(lambda v: jsp.gammainc(1.7, v).sum())(POS)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-9)
    ours = fg.grad(lambda u: np.sum(sp.gammaincc(u, POS)))(POS[::-1] + 0.2)
    theirs = jax.grad(lambda u: jsp.gammaincc(u, POS).sum())(POS[::-1] + 0.2)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-6)


# ------------------------------------------------------------------ gammainc/gammaincc in a


def _richardson(f, a, h):
    """∂f/∂a by central differences at h, h/2, h/4, extrapolated twice (error O(h⁶))."""
    d = [(f(a + s) - f(a - s)) / (2 * s) for s in (h, h / 2, h / 4)]
    r1, r2 = (4 * d[1] - d[0]) / 3, (4 * d[2] - d[1]) / 3
    return (16 * r2 - r1) / 15


# (a, x) across both schemes: the series (x < a + 1) and the continued fraction (x ≥ a + 1),
# tiny and large a, P near 0 and near 1.
GAMMAINC_POINTS = [(0.01, 0.5), (0.001, 2.0), (0.5, 0.1), (2.0, 1.5), (2.0, 3.0), (2.0, 10.0),
                   (0.3, 30.0), (5.0, 1e-5), (30.0, 25.0), (30.0, 40.0), (100.0, 3.0),
                   (1000.0, 1000.0), (1000.0, 1010.0), (4.0, 700.0)]  # fmt: skip


@pytest.mark.parametrize("a,x", GAMMAINC_POINTS)
def test_gammainc_derivative_in_a_against_richardson(a, x):
    # Differentiate whichever of P, Q is not close to 1, so the differences keep their digits.
    f = sp.gammainc if sp.gammainc(a, x) < 0.5 else (lambda u: -sp.gammaincc(u, x))
    want = _richardson(lambda u: f(u, x) if f is sp.gammainc else f(u), a, min(1e-2, a / 10))
    np.testing.assert_allclose(gammainc_da(a, x), want, rtol=1e-8)


@pytest.mark.slow  # the series takes 20 000 terms at a = 1e7
def test_gammainc_derivative_in_a_for_large_a():
    """5000 terms cut the series short: 1.2% too little at a = 1e7, 32% at 1e8."""
    a = 1e7
    x = a - 2 * np.sqrt(a)
    want = _richardson(lambda u: sp.gammainc(u, x), a, 0.2 * np.sqrt(a))
    np.testing.assert_allclose(gammainc_da(a, x), want, rtol=1e-7)


def test_gammainc_da_is_nan_rather_than_a_sum_cut_short(monkeypatch):
    import fusegrad.rules.special as special

    a = 1e4
    monkeypatch.setattr(special, "_MAX_TERMS", 50 - int(20 * np.sqrt(a)))
    assert np.isnan(gammainc_da(a, a - 1.0))  # needs ~900 terms
    assert np.isfinite(gammainc_da(a, a / 10))  # converges within 50


def test_gammainc_da_vectorised_edges_and_domain():
    a = np.array([[0.5], [3.0]])
    x = np.array([0.0, 0.2, 3.9, 50.0, np.inf])
    got = gammainc_da(a, x)
    assert got.shape == (2, 5)
    want = [[gammainc_da(float(u), float(v)) for v in x] for u in a[:, 0]]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got[:, 0].tolist() == [0.0, 0.0] and got[:, -1].tolist() == [0.0, 0.0]
    assert np.isnan(gammainc_da(-1.0, 1.0)) and np.isnan(gammainc_da(1.0, -1.0))


@pytest.mark.parametrize("f,sign", [(sp.gammainc, 1.0), (sp.gammaincc, -1.0)])
def test_gammainc_rules_in_a_and_x(f, sign):
    a, x = np.array([0.7, 2.0, 5.0]), np.array([1.2, 1.5, 9.0])
    check_rrule(f, a, x)
    check_frule(f, a, x)
    check_rrule(f, a[:, None], x[None, :])  # broadcasting: ā summed back
    ga, gx = fg.grad(lambda u, v: np.sum(f(u, v)), argnums=(0, 1))(a, x)
    np.testing.assert_allclose(ga, sign * gammainc_da(a, x), rtol=1e-13)
    _, dot = fg.jvp(lambda u: f(u, x), (a,), (np.ones(3),))
    np.testing.assert_allclose(dot, sign * gammainc_da(a, x), rtol=1e-13)
    # a constant a costs nothing: its derivative is never computed
    check_grads(lambda v: np.sum(f(1.7, v)), modes=("rev", "fwd"), order=2)(x)


def test_gammainc_second_order_mixed_and_in_a():
    a, x = 2.0, 1.5
    mixed = fg.grad(lambda v: fg.grad(lambda u: sp.gammainc(u, v))(a))(x)
    h = 1e-5
    fd = (gammainc_da(a, x + h) - gammainc_da(a, x - h)) / (2 * h)
    np.testing.assert_allclose(mixed, fd, rtol=1e-7)
    hv = fg.hvp(lambda v: sp.gammainc(a, v), (x,), (1.0,))  # in x only: a is a constant
    np.testing.assert_allclose(hv, -np.exp(-x) * (1 - (a - 1) / x) * x ** (a - 1), rtol=1e-12)
    with pytest.raises(NoDerivativeError, match="second order in a"):
        fg.grad(lambda u: fg.grad(lambda w: sp.gammainc(w, x))(u))(a)


def test_gamma_cdf_is_differentiable_in_its_shape():
    import scipy.stats as st

    def cdf(k):
        return st.gamma.cdf(2.5, k, scale=1.3)

    want = _richardson(cdf, 1.8, 1e-2)
    np.testing.assert_allclose(fg.grad(cdf)(1.8), want, rtol=1e-8)
    np.testing.assert_allclose(fg.grad(lambda m: st.poisson.cdf(3, m))(2.2),
                               _richardson(lambda m: st.poisson.cdf(3, m), 2.2, 1e-2),
                               rtol=1e-8)  # fmt: skip


@pytest.mark.parametrize(
    "f", [sp.gamma, sp.loggamma, sp.digamma, sp.erf, lambda v: sp.jv(1.5, v), sp.logsumexp]
)
def test_complex_inputs_match_finite_differences(f):
    """grad of a real loss of complex z: ∂L/∂x - i ∂L/∂y (JAX's convention)."""
    z = np.array([1.2 + 0.3j, 0.7 - 0.4j])

    def loss(v):
        return np.sum(np.abs(f(v)) ** 2)

    h, fd = 1e-6, np.zeros(2, complex)
    for i in range(2):
        e = np.zeros(2, complex)
        e[i] = h
        fd[i] = (loss(z + e) - loss(z - e)) / (2 * h) - 1j * (
            loss(z + 1j * e) - loss(z - 1j * e)
        ) / (2 * h)
    np.testing.assert_allclose(fg.grad(loss)(z), fd, rtol=1e-6, atol=1e-8)


# ------------------------------------------------ inverses and distribution functions (implicit)

# (ufunc, its arguments, which arguments are differentiable to second order, to first order only)
DISTRIBUTION_FUNCTIONS = [
    (sp.gammaincinv, (2.3, UNIT), (1,), (0,)),
    (sp.gammainccinv, (np.array([0.4, 2.3, 9.0]), UNIT), (1,), (0,)),
    (sp.chdtr, (3.5, POS), (1,), (0,)),
    (sp.chdtrc, (3.5, POS), (1,), (0,)),
    (sp.chdtri, (3.5, UNIT), (1,), (0,)),
    (sp.gdtr, (1.3, 2.2, POS), (0, 2), (1,)),
    (sp.gdtrc, (1.3, 2.2, POS), (0, 2), (1,)),
    (sp.pdtr, (3.0, POS), (1,), ()),
    (sp.pdtrc, (3.7, POS), (1,), ()),
    (sp.pdtri, (3.0, UNIT), (1,), ()),
    (sp.betaincinv, (2.0, 3.5, UNIT), (2,), ()),
    (sp.betainccinv, (2.0, 3.5, UNIT), (2,), ()),
    (sp.stdtr, (4.5, REAL), (1,), ()),
    (sp.stdtrit, (4.5, UNIT), (1,), ()),
    (sp.ndtri_exp, (np.array([-3.0, -1.2, -0.5]),), (0,), ()),
]


@pytest.mark.parametrize("case", DISTRIBUTION_FUNCTIONS, ids=_id)
def test_distribution_functions_and_inverses(case):
    f, args, second, first = case
    for i in second + first:

        def in_arg(v, i=i):
            return np.sum(f(*args[:i], v, *args[i + 1 :]))

        # against central differences (check_grads), to second order where the partial's own
        # partials are known (gammainc_da has none in a)
        check_grads(in_arg, modes=("rev", "fwd"), order=2 if i in second else 1)(args[i])
        # and against Richardson-extrapolated differences of SciPy's own function, per element
        x = np.asarray(args[i], dtype=float)
        got = fg.grad(in_arg)(x) if x.ndim else fg.grad(in_arg)(float(x))
        for k in np.ndindex(x.shape):

            def moved(u, k=k, x=x, in_arg=in_arg):
                w = x.copy()
                w[k] = u
                return in_arg(w if x.ndim else float(w))

            want = _richardson(moved, x[k], 1e-3 * max(1.0, abs(x[k])))
            np.testing.assert_allclose(np.asarray(got)[k], want, rtol=1e-7, atol=1e-12)


def test_inverse_derivatives_hand_derived():
    # y = F⁻¹(q): dy/dq = 1 / F'(y), with F' the distribution's density
    q = UNIT
    y = sp.gammaincinv(2.3, q)
    density = y**1.3 * np.exp(-y) / sp.gamma(2.3)
    np.testing.assert_allclose(fg.elementwise_grad(lambda u: sp.gammaincinv(2.3, u))(q),
                               1 / density, rtol=1e-12)  # fmt: skip
    t = sp.stdtrit(4.5, q)
    norm = sp.gamma(2.75) / (np.sqrt(4.5 * np.pi) * sp.gamma(2.25))
    t_density = norm * (1 + t * t / 4.5) ** -2.75
    np.testing.assert_allclose(fg.elementwise_grad(lambda u: sp.stdtrit(4.5, u))(q),
                               1 / t_density, rtol=1e-12)  # fmt: skip
    # log Φ(x) = q: dx/dq = Φ(x) / φ(x)
    logq = np.array([-300.0, -30.0, *np.log(q)])  # and far in the tail
    x = sp.ndtri_exp(logq)
    phi = np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    got = fg.elementwise_grad(sp.ndtri_exp)(logq)
    np.testing.assert_allclose(got, sp.ndtr(x) / phi, rtol=1e-12)


@pytest.mark.parametrize(
    "f,args,index",
    [(sp.betaincinv, (2.0, 3.0, 0.4), 0), (sp.betainccinv, (2.0, 3.0, 0.4), 1),
     (sp.stdtrit, (4.0, 0.3), 0), (sp.stdtr, (4.0, 0.3), 0), (sp.pdtri, (3.0, 0.4), 0)],
)  # fmt: skip
def test_distribution_function_arguments_without_a_derivative_raise(f, args, index):
    def at(v):
        return f(*args[:index], v, *args[index + 1 :])

    with pytest.raises(NoDerivativeError, match=f"scipy.special.{f.__name__}"):
        fg.grad(at)(args[index])
    with pytest.raises(NoDerivativeError, match=f"scipy.special.{f.__name__}"):
        fg.jvp(at, (args[index],), (1.0,))


# --------------------------------------------------------------------------------------------------
# Tails and special points (sweep X): references from mpmath at 50 digits or derived by hand
# --------------------------------------------------------------------------------------------------

mp = pytest.importorskip("mpmath")


def _t_pdf(df, t):
    with mp.workdps(50):
        if df == np.inf:
            return float(mp.npdf(t))
        df, t = mp.mpf(df), mp.mpf(t)
        lognorm = mp.loggamma((df + 1) / 2) - mp.loggamma(df / 2) - mp.log(mp.pi * df) / 2
        return float(mp.exp(lognorm - (df + 1) / 2 * mp.log1p(t * t / df)))


@pytest.mark.parametrize("df", [3.0, 39.9, 40.1, 1e3, 1e12, 1e16, np.inf])
def test_t_density_keeps_its_digits_for_large_df(df):
    """log Γ((df+1)/2) - log Γ(df/2) cancelled: 2e-4 off at df = 1e12, 5e-9 for 0.352 at 1e16,
    NaN at inf (SciPy's stdtr is the normal cdf there)."""
    assert fg.grad(lambda t: sp.stdtr(df, t))(0.5) == pytest.approx(
        _t_pdf(df, 0.5), rel=1e-13, abs=0
    )
    p = fg.grad(lambda q: sp.stdtrit(df, q))(0.5)
    assert p == pytest.approx(1 / _t_pdf(df, 0.0), rel=1e-13, abs=0)
    # t's own slope of the density: -(df+1)/df · t/(1 + t²/df) · pdf (-t φ(t) at df = inf)
    slope = -0.5 * _t_pdf(df, 0.5) * (1.0 if df == np.inf else (df + 1) / (df + 0.25))
    assert fg.grad(fg.grad(lambda t: sp.stdtr(df, t)))(0.5) == pytest.approx(
        slope, rel=1e-12, abs=0
    )


def test_log_ndtr_slope_in_the_far_left_tail():
    """φ(x)/Φ(x) as exp(-x²/2 - log√2π - log Φ(x)) cancelled: 78% off at -1e8, inf at -1e10."""
    x = np.array([-1e10, -1e8, -1e5, -40.0, -1.0, 0.0, 0.5, 5.0])
    with mp.workdps(50):
        want = [float(mp.npdf(v) / mp.ncdf(v)) for v in x]
    np.testing.assert_allclose(fg.elementwise_grad(sp.log_ndtr)(x), want, rtol=1e-14)
    with mp.workdps(50):
        second = float(mp.diff(lambda v: mp.log(mp.ncdf(v)), -1e3, 2))
    assert fg.grad(fg.grad(sp.log_ndtr))(-1e3) == pytest.approx(second, rel=1e-12, abs=0)


def _ive_slope_mp(v, x):
    with mp.workdps(40 + int(np.log10(abs(x)))):  # the difference cancels x-fold
        x = mp.mpf(x)
        dv = (mp.besseli(v - 1, x) + mp.besseli(v + 1, x)) / 2 - mp.sign(x) * mp.besseli(v, x)
        return float(mp.re(mp.exp(-abs(x)) * dv))


@pytest.mark.parametrize("v", [0.0, 1.0, 2.5, 3.0])
def test_scaled_bessel_i_slopes_far_out(v):
    """(I_{v-1} + I_{v+1})/2 e^-x - ive(v, x) cancels x-fold (21% off at 1e15), and SciPy's
    ive(2, x) is NaN from 1e10 (i1e's gradient was NaN): the asymptotic series' derivative."""
    f = {0.0: sp.i0e, 1.0: sp.i1e}.get(v, lambda x: sp.ive(v, x))
    x = np.array([0.7, 999.0, 1e3, 3e4, 1e10, 1e15, 1e100] + ([-1e12, -5.0] if v % 1 == 0 else []))
    want = [_ive_slope_mp(v, u) for u in x]
    np.testing.assert_allclose(fg.elementwise_grad(f)(x), want, rtol=1e-12)
    assert fg.grad(f)(np.inf) == 0.0
    with mp.workdps(60):
        second = float(mp.diff(lambda u: mp.besseli(v, u) * mp.exp(-u), 2e3, 2))
    assert fg.grad(fg.grad(f))(2e3) == pytest.approx(second, rel=1e-10, abs=0)


def test_bessel_slopes_where_a_neighbouring_order_overflows():
    """SciPy's yv(-1.5, 1e-300) is inf and ive(-1.5, 1e-300) NaN (cos(-1.5π) is not 0), so the
    symmetric recurrence failed; yv(-0.5, x) = J_½(x) = √(2/(πx)) sin x has slope ≈ 1/√(2πx)."""
    assert fg.grad(lambda t: sp.yv(-0.5, t))(1e-300) == pytest.approx(
        np.sqrt(2 / np.pi) / (2 * np.sqrt(1e-300)), rel=1e-13, abs=0
    )
    # ive(-0.5, x) = √(2/(πx)) cosh(x) e^-x: slope ≈ -x^(-3/2) / √(2π) - √(2/(πx)) near 0
    x = 1e-100
    want = -(x**-1.5) / np.sqrt(2 * np.pi) - np.sqrt(2 / (np.pi * x))
    assert fg.grad(lambda t: sp.ive(-0.5, t))(x) == pytest.approx(want, rel=1e-14, abs=0)


@pytest.mark.parametrize("a,b", [(1e5, 1e-8), (1e10, 0.5), (1e10, 3.0), (2.0, 1e-12),
                                 (1e-300, 1e-12), (3.0, -0.7), (0.5, 1e4)])  # fmt: skip
def test_betaln_slope_without_cancelling_digammas(a, b):
    """ψ(a) - ψ(a+b) cancelled when |b| ≪ a (5e-3 off at (1e5, 1e-8))."""
    with mp.workdps(400):  # (a + b exact at (1e-300, 1e-12): ψ(b) - ψ(a+b) is -1e-276)
        a_, b_ = mp.mpf(a), mp.mpf(b)
        da = float(mp.digamma(a_) - mp.digamma(a_ + b_))
        db = float(mp.digamma(b_) - mp.digamma(a_ + b_))
    ga, gb = fg.grad(sp.betaln, argnums=(0, 1))(a, b)
    assert (ga, gb) == (pytest.approx(da, rel=1e-13, abs=0), pytest.approx(db, rel=1e-13, abs=0))
    if a < 1e-100:
        return
    with mp.workdps(60):
        h = [float(mp.psi(1, a_) - mp.psi(1, a_ + b_)), float(-mp.psi(1, a_ + b_))]
    got = fg.hessian(lambda v: sp.betaln(v[0], v[1]))(np.array([a, b]))
    np.testing.assert_allclose(got[0], h, rtol=1e-9)  # ψ' of a + b rounded: 1e-10 at (2, 1e-12)


def test_beta_where_a_plus_b_is_a_pole():
    """B(0.5, -1.5) = 0 (1/Γ(-1) = 0) and ψ(a+b) is infinite: the slope was 0 · inf = NaN."""
    B = lambda a, b: mp.gamma(a) * mp.gamma(b) * mp.rgamma(a + b)  # noqa: E731
    with mp.workdps(40):
        a, b = mp.mpf(0.5), mp.mpf(-1.5)
        want = [[float(mp.diff(B, (a, b), (2 - i - j, i + j))) for j in range(2)] for i in range(2)]
        slope = float(mp.diff(B, (a, b), (1, 0)))
    assert fg.grad(sp.beta)(0.5, -1.5) == pytest.approx(slope, rel=1e-13, abs=0)
    assert fg.grad(sp.beta, argnums=1)(-1.5, 0.5) == pytest.approx(slope, rel=1e-13, abs=0)
    got = fg.hessian(lambda v: sp.beta(v[0], v[1]))(np.array([0.5, -1.5]))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_rgamma_slope_at_its_zeros():
    """1/Γ is entire; -ψ(x)/Γ(x) was 0 · inf = NaN at 0, -1, -2, ...: (-1)ⁿ n!, and the second
    derivative -2 (-1)ⁿ n! ψ(n+1)."""
    x = np.array([0.0, -1.0, -2.0, -3.0, -2.5, 1.5])
    with mp.workdps(40):
        first = [float(mp.diff(mp.rgamma, v)) for v in x]
        second = [float(mp.diff(mp.rgamma, v, 2)) for v in x]
    np.testing.assert_allclose(fg.elementwise_grad(sp.rgamma)(x), first, rtol=1e-14)
    np.testing.assert_allclose(fg.elementwise_grad(fg.elementwise_grad(sp.rgamma))(x), second,
                               rtol=1e-13)  # fmt: skip


def test_gammainc_slope_in_x_at_infinity():
    """x^(a-1) e^-x / Γ(a) at x = inf was exp(inf - inf) = NaN for a > 1."""
    assert fg.grad(lambda x: sp.gammainc(2.5, x))(np.inf) == 0.0
    assert fg.grad(lambda x: sp.gammaincc(2.5, x))(np.inf) == 0.0
    g = fg.grad(lambda x: np.sum(sp.gammainc(2.5, x)))(np.array([1.0, np.inf]))
    np.testing.assert_allclose(g, [np.exp(-1) / sp.gamma(2.5), 0.0], rtol=1e-15)


def test_gammainc_da_at_the_ends_of_a():
    """a = inf raised OverflowError; a = x = 1e10 took 15 s for one element. a = 0 (SciPy's
    P(0, x) = 1): the limit -E₁(x), as ∂Q/∂a = E₁(x) + O(a)."""
    import time

    assert gammainc_da(np.inf, 2.0) == 0.0 and np.isnan(gammainc_da(np.inf, np.inf))
    assert fg.grad(lambda a: sp.gammainc(a, 2.0))(np.inf) == 0.0
    assert gammainc_da(0.0, 1.0) == pytest.approx(-sp.exp1(1.0), rel=1e-15, abs=0)
    start = time.perf_counter()
    a = np.array([1e10, 1e12, 1e300])
    got = gammainc_da(a, a)
    assert time.perf_counter() - start < 1.0
    # P(a, a + t√a) ≈ Φ(t): ∂P/∂a ≈ -1/√(2πa) (1 + O(1/a)) at t = 0
    np.testing.assert_allclose(got, -1 / np.sqrt(2 * np.pi * a), rtol=1e-10)


@pytest.mark.parametrize("t", [-30.0, -3.0, 0.0, 1.0, 3.0])
def test_gammainc_da_asymptotic_form_for_large_a(t):
    """From a = 1e6 Temme's uniform expansion (the series: 1e-9 there, and 9√a terms)."""
    a = 1e6
    x = a + t * np.sqrt(a)
    with mp.workdps(30):
        want = float(mp.diff(lambda s: mp.gammainc(s, 0, x, regularized=True), a))
    assert gammainc_da(a, x) == pytest.approx(want, rel=1e-11, abs=0)


def test_rel_entr_and_kl_div_slopes_where_a_over_b_overflows():
    """log(a/b) was ±inf where a/b over- or underflows, though rel_entr's value is finite."""
    for a, b in ((1e300, 1e-10), (1e-300, 1e300), (2.0, 3.0)):
        want = np.log(a) - np.log(b)
        assert fg.grad(sp.rel_entr)(a, b) == pytest.approx(want + 1, rel=1e-15, abs=0)
        assert fg.grad(sp.kl_div)(a, b) == pytest.approx(want, rel=1e-15, abs=0)


def test_polygamma_of_order_0_near_zero():
    """The unused ζ(2, x) branch had slope -2ζ(3, x) = -inf for x < 1e-103: 0 · inf = NaN."""
    assert fg.grad(lambda t: fsp.polygamma(0, t))(1e-150) == pytest.approx(1e300, rel=1e-15, abs=0)
    assert fg.grad(lambda t: fsp.polygamma(0, t))(1e-300) == np.inf
    g = fg.elementwise_grad(lambda t: fsp.polygamma(np.array([0, 1]), t))(np.array([1e-150, 2.0]))
    np.testing.assert_allclose(g, [1e300, sp.polygamma(2, 2.0)], rtol=1e-14)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_expit_slope_in_the_tails(engine):
    """y (1 - y), as JAX's: exact on the left, within 1e-16 absolute on the right (0 from x = 37,
    where 1 - y rounds to 0; the exact y expit(-x) cost an exp a point: chosen against)."""
    x = np.repeat(np.array([-800.0, -40.0, 0.0, 20.0, 36.0, 40.0, 700.0]), 1000)
    with mp.workdps(40):
        want = [float(mp.exp(-abs(v)) / (1 + mp.exp(-abs(v))) ** 2) for v in x[::1000]]
    with fg.use_engine(engine):
        g = fg.grad(lambda v: np.sum(sp.expit(v)))(x)[::1000]
    np.testing.assert_allclose(g[:3], want[:3], rtol=1e-14)
    np.testing.assert_allclose(g, want, rtol=1e-7, atol=1e-16)


def test_fused_erfc_is_zero_where_scipys_is():
    """numba's erfc is libm's, which goes on into subnormals up to x = 27.2; SciPy's is 0 from
    x² > 709.78 (x = 26.6417...)."""
    x = np.repeat(np.array([26.6, 26.6417475570463, 26.65, 27.0, -27.0]), 1000)
    with fg.use_engine("numba"):
        got = fg.jvp(sp.erfc, (x,), (np.ones_like(x),))[0][::1000]
    np.testing.assert_array_equal(got[2:], [0.0, 0.0, 2.0])
    np.testing.assert_allclose(got[:2], sp.erfc(x[[0, 1000]]), rtol=1e-12)


# --------------------------------------------------------------------------------------------------
# The elementary, exponential-integral, elliptic, Box-Cox, Huber, Owen's T, scaled Bessel and
# Lambert W rules: central differences at safe points, mpmath (or closed forms) at hard ones
# --------------------------------------------------------------------------------------------------

# (name, f of its differentiable arguments, those arguments): points away from every branch switch
COVERAGE = [
    ("expm1", sp.expm1, (REAL,)), ("log1p", sp.log1p, (UNIT - 0.6,)), ("exp2", sp.exp2, (REAL,)),
    ("exp10", sp.exp10, (REAL,)), ("cbrt", sp.cbrt, (REAL,)), ("cosm1", sp.cosm1, (REAL,)),
    ("exprel", sp.exprel, (np.array([-1.2, -0.3, 0.2, 0.45, 0.7, 3.0]),)),
    ("sindg", sp.sindg, (np.array([-30.0, 10.0, 95.0]),)),
    ("cosdg", sp.cosdg, (np.array([-30.0, 10.0, 95.0]),)),
    ("tandg", sp.tandg, (np.array([-30.0, 10.0, 95.0]),)),
    ("cotdg", sp.cotdg, (np.array([-30.0, 10.0, 95.0]),)),
    ("radian", sp.radian, (REAL, POS, UNIT)),
    ("k0", sp.k0, (POS,)), ("k1", sp.k1, (POS,)), ("k0e", sp.k0e, (POS,)), ("k1e", sp.k1e, (POS,)),
    ("kn", lambda x: sp.kn(3, x), (POS,)), ("kve", lambda x: sp.kve(1.5, x), (POS,)),
    ("jve", lambda x: sp.jve(1.5, x), (POS,)), ("yve", lambda x: sp.yve(2.5, x), (POS,)),
    ("exp1", sp.exp1, (POS,)), ("expi", sp.expi, (REAL,)),
    ("expn0", lambda x: sp.expn(0, x), (POS,)), ("expn3", lambda x: sp.expn(3, x), (POS,)),
    ("erfi", sp.erfi, (REAL,)), ("dawsn", sp.dawsn, (np.array([-13.0, -1.2, 0.3, 1.7, 11.5]),)),
    ("spence", sp.spence, (np.array([0.3, 0.9995, 1.0, 1.3, 2.5]),)),
    ("ellipk", sp.ellipk, (np.array([-3.0, -0.1, 0.2, 0.3, 0.9]),)),
    ("ellipe", sp.ellipe, (np.array([-3.0, -0.1, 0.2, 0.3, 0.9]),)),
    ("poch", sp.poch, (POS, np.array([0.4, -0.3, 2.2]))),
    ("boxcox", sp.boxcox, (POS, np.array([0.0, -0.7, 1.5]))),
    ("boxcox1p", sp.boxcox1p, (UNIT - 0.3, np.array([0.0, -0.7, 1.5]))),
    ("huber", sp.huber, (np.array([1.0, 0.5, 2.0]), np.array([0.3, -1.5, 3.0]))),
    ("pseudo_huber", sp.pseudo_huber, (np.array([1.0, 0.5, 2.0]), np.array([0.3, -1.5, 3.0]))),
    ("owens_t", sp.owens_t, (REAL, np.array([0.4, -2.0, 1.1]))),
]  # fmt: skip


@pytest.mark.parametrize("case", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_more_special_functions_against_differences(case):
    _, f, args = case
    check_grads(lambda *v: np.sum(f(*v)), ("rev", "fwd"), order=2)(*args)


_LAMBERTW = sp._ufuncs._lambertw  # lambertw(z, k, tol) is _lambertw(z, int k, tol)
_Z = np.array([0.7 + 0.3j, 1.5 - 0.4j, -0.8 + 2.0j])
# wofz: 13 + i, -14 + i/2 and 13 - i/2 take its series (|z| > 12), above and below the axis
_Z_FAR = np.array([*_Z, 13.0 + 1.0j, -14.0 + 0.5j, 13.0 - 0.5j])
COMPLEX_COVERAGE = [
    (sp.expm1, (), _Z_FAR), (sp.log1p, (), _Z_FAR), (sp.exp1, (), _Z_FAR), (sp.expi, (), _Z_FAR),
    (sp.erfi, (), _Z), (sp.dawsn, (), _Z_FAR), (sp.wofz, (), _Z_FAR), (sp.spence, (), _Z_FAR),
    (sp.kve, (1,), _Z_FAR), (_LAMBERTW, (0, 1e-8), _Z_FAR), (_LAMBERTW, (-1, 1e-8), _Z_FAR),
]  # fmt: skip


@pytest.mark.parametrize(
    "f,rest,z", COMPLEX_COVERAGE, ids=[f"{f.__name__}{r}" for f, r, _ in COMPLEX_COVERAGE]
)
def test_more_holomorphic_functions(f, rest, z):
    if f is _LAMBERTW:  # (check_rrule would difference tol too: W is nan for tol - h < 0)
        args = (z, np.asarray(rest[0], dtype=np.dtype("long")), rest[1])
    else:
        args = (*rest, z)
        check_rrule(f, *args)  # ct * f'(z), against complex differences
    tangents = tuple(np.ones_like(z) if a is z else fg.NoTangent() for a in args)
    check_frule(f, *args, tangents=tangents)


def test_lambertw_of_real_arguments():
    check_grads(lambda x: np.sum(sp.lambertw(x).real), ("rev", "fwd"), order=2)(POS)
    check_grads(lambda x: np.sum(sp.lambertw(x, -1).real), ("rev", "fwd"), order=2)(-UNIT / 3)


def _mp_slope(f, x, n=1):
    with mp.workdps(60):
        x = mp.mpf(x)
        return float(mp.diff(f, x, n, h=abs(x) * mp.mpf(10) ** -20))


def _dawson(x):
    return mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x)


# (f, x, the reference, rtol): each point one where the plain closed form fails (noted)
HARD_POINTS = [
    (sp.exprel, 1e-7, lambda: 0.5 + 1e-7 / 3 + 1e-14 / 8, 1e-15),  # (eˣ - y)/x: 1e-9 off
    (sp.exprel, -1e10, lambda: 1e-20, 1e-15),  # y (1 - 1/x) + 1/x: 6e-7 off
    (sp.exprel, 700.0, lambda: _mp_slope(lambda x: mp.expm1(x) / x, 700), 1e-14),
    (sp.cotdg, 1e-3, lambda: _mp_slope(lambda x: mp.cot(x * mp.pi / 180), 1e-3), 1e-14),  # 1 + y²
    (sp.tandg, 89.9, lambda: _mp_slope(lambda x: mp.tan(x * mp.pi / 180), 89.9), 1e-14),
    (sp.exp1, 700.0, lambda: float(-mp.exp(-700) / 700), 1e-15),  # exp(-x - log x): 4e-14
    (sp.exp1, 1e-300, lambda: -1e300, 1e-15),
    (sp.expi, 715.0, lambda: float(mp.exp(715) / 715), 1e-15),  # eˣ/x overflows
    (lambda x: sp.expn(0, x), 1e-8, lambda: float(-mp.exp(-1e-8) * (1 + 1e-8) / 1e-16), 1e-15),
    (sp.dawsn, 24.9, lambda: _mp_slope(_dawson, 24.9), 1e-14),  # 1 - 2xD: 8e-13 off
    (sp.dawsn, 1e8, lambda: -5e-17 * (1 + 1.5e-16), 1e-15),  # 1 - 2xD: 0
    (sp.spence, 1e-300, lambda: float(mp.log(mp.mpf(1e-300))), 1e-15),  # -log1p(z-1)/(z-1): -inf
    (sp.spence, 1.0, lambda: -1.0, 0),
    (sp.spence, 1 + 2**-30, lambda: _mp_slope(lambda z: mp.polylog(2, 1 - z), 1 + 2**-30), 1e-15),
    (sp.ellipk, 1e-10, lambda: _mp_slope(mp.ellipk, 1e-10), 1e-15),  # the form cancels 1/m-fold
    (sp.ellipk, 0.0, lambda: float(mp.pi / 8), 1e-15),
    (sp.ellipe, 0.0, lambda: float(-mp.pi / 8), 1e-15),
    (sp.ellipe, -1e10, lambda: _mp_slope(mp.ellipe, -1e10), 1e-14),
    (sp.k1, 700.0, lambda: _mp_slope(lambda x: mp.besselk(1, x), 700), 1e-14),  # kv(2, 700) = 0
    (lambda x: sp.kn(2, x), 600.0, lambda: _mp_slope(lambda x: mp.besselk(2, x), 600), 1e-14),
    (sp.k0e, 1e15, lambda: _mp_slope(lambda x: mp.besselk(0, x) * mp.exp(x), 1e15), 1e-14),
    (sp.k1e, 1e6, lambda: _mp_slope(lambda x: mp.besselk(1, x) * mp.exp(x), 1e6), 1e-14),
    (lambda x: sp.kve(10.0, x), 1e7,
     lambda: _mp_slope(lambda x: mp.besselk(10, x) * mp.exp(x), 1e7), 1e-14),
    (lambda x: sp.kve(2.5, x), 1001.0,
     lambda: _mp_slope(lambda x: mp.besselk(2.5, x) * mp.exp(x), 1001), 1e-14),
    (lambda x: sp.jve(2.0, x), -30.0, lambda: _mp_slope(lambda x: mp.besselj(2, x), -30), 1e-14),
    (lambda x: sp.yve(-1.5, x), 1e-3,
     lambda: _mp_slope(lambda x: mp.bessely(-1.5, x), 1e-3), 1e-14),
    (lambda m: sp.poch(1e5, m), 1e-8, lambda: _mp_slope(lambda m: mp.rf(1e5, m), 1e-8), 1e-14),
    (lambda z: sp.poch(z, 1e-8), 1e5, lambda: _mp_slope(lambda z: mp.rf(z, 1e-8), 1e5), 1e-12),
    # at the poles of Γ(z), where y (ψ(z+m) - ψ(z)) is NaN: z(z+1)(z+2)' = 3z² + 6z + 2; Γ(z+m)
    # (1/Γ)'(z) = Γ(-1.5) 2!; 1/(z - 1)' = -1 (z + m a pole too)
    (lambda z: sp.poch(z, 3.0), -2.0, lambda: 2.0, 1e-15),
    (lambda z: sp.poch(z, 3.0), -1.0, lambda: -1.0, 1e-15),
    (lambda z: sp.poch(z, 0.5), -2.0, lambda: float(2 * mp.gamma(-1.5)), 1e-15),
    (lambda z: sp.poch(z, -1.0), 0.0, lambda: -1.0, 1e-15),
    (lambda z: sp.poch(z, 1.0), -3.0, lambda: 1.0, 1e-15),
    (lambda lam: sp.boxcox(2.5, lam), 0.0, lambda: float(mp.log(2.5) ** 2 / 2), 1e-15),
    (lambda lam: sp.boxcox1p(1e-10, lam), 1e-12,
     lambda: _mp_slope(lambda lam: mp.expm1(lam * mp.log1p(1e-10)) / lam, 1e-12), 1e-14),
    (lambda d: sp.pseudo_huber(d, 1.0), 1e8, lambda: 2.5e-25, 1e-15),  # 2y/δ - ...: all lost
    (lambda d: sp.pseudo_huber(d, 2.0), 0.0, lambda: 2.0, 0),  # |r| at δ = 0
    (lambda h: sp.owens_t(h, 5.0), 1e-8,
     lambda: float(-mp.npdf(1e-8) * mp.erf(5e-8 / mp.sqrt(2)) / 2), 1e-15),
    (lambda a: sp.owens_t(10.0, a), 0.5, lambda: float(mp.exp(-62.5) / (2.5 * mp.pi)), 1e-15),
]  # fmt: skip


@pytest.mark.parametrize("f,x,want,rtol", HARD_POINTS)
def test_more_special_functions_at_hard_points(f, x, want, rtol):
    assert fg.grad(f)(x) == pytest.approx(want(), rel=rtol, abs=0)
    assert fg.jvp(f, (x,), (1.0,))[1] == pytest.approx(want(), rel=rtol, abs=0)


def test_complex_slopes_far_out():
    """w'(z) = -2zw + 2i/√π and kve's recurrence cancel for large |z|: the series (for w on both
    sides of the real axis, its lower half by w(z) = 2e^(-z²) - w(-z))."""

    def wofz_mp(z):
        return mp.exp(-z * z) * mp.erfc(-1j * z)

    for z in [1e8 + 0j, 24 + 1j, 30 - 2j, -30 + 5j, 1e4 - 1e3j, 5 - 20j, 40j]:
        with mp.workdps(40):
            want = complex(mp.diff(wofz_mp, mp.mpc(z)))
        got = fg.jvp(sp.wofz, (np.complex128(z),), (np.complex128(1),))[1]
        assert abs(got - want) <= 1e-15 * abs(want), z
    with mp.workdps(40):
        want = complex(mp.diff(mp.lambertw, mp.mpc(2, 3)))
    got = fg.jvp(sp.lambertw, (np.complex128(2 + 3j),), (np.complex128(1),))[1]
    assert abs(got - want) <= 1e-15 * abs(want)
    assert fg.grad(lambda z: sp.lambertw(z).real)(0.0) == 1.0  # W/(z(1+W)) is 0/0 there


SECOND_DERIVATIVES = [
    (sp.exprel, 0.0, 1 / 3),  # a constant 1/2 at 0 would give 0
    (sp.spence, 1.0, 0.5),
    (sp.ellipk, 0.0, 9 * np.pi / 64),
    (sp.ellipe, 0.0, -3 * np.pi / 64),
    (lambda lam: sp.boxcox(2.5, lam), 0.0, np.log(2.5) ** 3 / 3),
    (lambda z: sp.lambertw(z).real, 0.0, -2.0),
    (sp.dawsn, 30.0, None),
    (lambda x: sp.kve(2.5, x), 2e3, None),
    (lambda r: sp.pseudo_huber(1.5, r), 1e6, 1.5**3 / (1.5**2 + 1e12) ** 1.5),  # δ/u - r²δ/u³
    (lambda d: sp.pseudo_huber(d, 1.0), 1e3, None),
]

_SECOND_REFS = {
    2: lambda x: _mp_slope(_dawson, x, 2),
    3: lambda x: _mp_slope(lambda t: mp.besselk(2.5, t) * mp.exp(t), x, 2),
    5: lambda x: _mp_slope(lambda d: d * d * (mp.sqrt(1 + 1 / (d * d)) - 1), x, 2),
}


@pytest.mark.parametrize("i", range(len(SECOND_DERIVATIVES)))
def test_more_special_functions_second_derivatives(i):
    f, x, want = SECOND_DERIVATIVES[i]
    if want is None:
        want = {6: _SECOND_REFS[2], 7: _SECOND_REFS[3], 9: _SECOND_REFS[5]}[i](x)
    assert fg.grad(fg.grad(f))(x) == pytest.approx(want, rel=1e-13, abs=0)
    assert float(fg.hessian(f)(x)) == pytest.approx(want, rel=1e-13, abs=0)


def test_pseudo_huber_hessian_far_from_its_knee():
    f = lambda d, r: mp.mpf(d) ** 2 * (mp.sqrt(1 + (mp.mpf(r) / d) ** 2) - 1)  # noqa: E731
    for d0, r0 in [(1.5, 1e6), (1e6, 2.0), (1e-3, 2.0), (1.0, 1.0)]:
        got = fg.hessian(lambda v: sp.pseudo_huber(v[0], v[1]))(np.array([d0, r0]))
        with mp.workdps(50):
            want = [[float(mp.diff(f, (d0, r0), (2 - j - k, j + k))) for k in (0, 1)]
                    for j in (0, 1)]  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


@pytest.mark.parametrize(
    "f,args,index",
    [(sp.kn, (2, 1.5), 0), (sp.kve, (1.5, 2.0), 0), (sp.jve, (1.5, 2.0), 0),
     (sp.yve, (1.5, 2.0), 0), (sp.expn, (2, 1.5), 0)],
)  # fmt: skip
def test_orders_of_the_new_functions_raise(f, args, index):
    def at(v):
        return f(*args[:index], v, *args[index + 1 :])

    with pytest.raises(NoDerivativeError, match=f"scipy.special.{f.__name__} with respect to"):
        fg.grad(at)(float(args[index]))
    with pytest.raises(NoDerivativeError, match=f"scipy.special.{f.__name__}"):
        fg.jvp(at, (float(args[index]),), (1.0,))
    assert fg.grad(lambda x: f(args[0], x))(args[1]) != 0  # the other argument is differentiable


# --------------------------------------------------------------------------------------------------
# binom (a ufunc with a scalar_rule), comb and factorial (Python functions in SciPy)
# --------------------------------------------------------------------------------------------------

BINOM_POINTS = [(5.0, 2.3), (5.0, 2.0), (7.3, 1.1), (-2.5, 3.0), (300.0, 2.0), (0.5, 2.5),
                (2.0, 3.0), (0.0, 2.0), (3.0, -1.0), (3.0, -2.0)]  # fmt: skip


@pytest.mark.parametrize(("n", "k"), BINOM_POINTS)
def test_binom_in_n_and_k_against_finite_differences(n, k):
    h = 1e-6
    dn = fg.grad(lambda t: sp.binom(t, k))(n)
    dk = fg.grad(lambda t: sp.binom(n, t))(k)
    fd_n = (sp.binom(n + h, k) - sp.binom(n - h, k)) / (2 * h)
    fd_k = (sp.binom(n, k + h) - sp.binom(n, k - h)) / (2 * h)
    # at the poles of Γ(k+1), Γ(n-k+1) (binom 0 there, finite slopes) too: never nan
    np.testing.assert_allclose(dn, fd_n, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dk, fd_k, rtol=1e-6, atol=1e-8)


def test_binom_second_order_forward_and_float32():
    n, k = np.array([5.0, 7.3, 2.0, 3.0, 0.0]), np.array([2.3, 1.1, 3.0, -2.0, 2.0])  # poles too
    check_grads(lambda a, b: np.sum(sp.binom(a, b)), ("rev", "fwd"), order=2)(n, k)
    assert fg.grad(fg.grad(lambda t: sp.binom(t, 2.0)))(2.0) == pytest.approx(1.0)  # (n² - n)/2
    g = fg.grad(lambda t: np.sum(sp.binom(t, np.float32(2.0))))(n.astype(np.float32))
    assert g.dtype == np.float32


def test_comb_and_factorial():
    k = np.array([-1.0, 0.0, 2.0, 2.5, 5.0, 6.0])
    seen = {}

    def loss(t, **kw):
        out = sp.comb(5.0, t, **kw)
        seen["value"] = fg.numpy.stop_gradient(out)
        return np.sum(out)

    for kw in ({}, {"repetition": True}):
        fg.grad(lambda t, kw=kw: loss(t, **kw))(k)
        np.testing.assert_allclose(seen["value"], sp.comb(5.0, k, **kw), rtol=1e-14)
    check_grads(lambda t: np.sum(sp.comb(6.5, t)), ("rev", "fwd"), order=2)(k[2:4])
    check_grads(lambda t: np.sum(sp.comb(t, 2.5, repetition=True)), ("rev", "fwd"))(k[3:])
    n = np.array([-1.5, 0.0, 0.5, 3.0, 4.2, np.nan])
    out = {}

    def fact(t):
        y = sp.factorial(t)
        out["value"] = fg.numpy.stop_gradient(y)
        return np.nansum(y)

    fg.grad(fact)(n.astype(np.float32))
    assert out["value"].dtype == np.float64  # as SciPy's
    np.testing.assert_allclose(out["value"], sp.factorial(n.astype(np.float32)), rtol=1e-6)
    # (not at 0, where factorial steps from 0 to 1)
    check_grads(lambda t: np.sum(sp.factorial(t)), ("rev", "fwd"), order=2)(n[2:5])
    assert fg.grad(lambda t: sp.factorial(t))(-1.5) == 0.0
    for f in (lambda t: sp.factorial(t, exact=True), lambda t: sp.comb(t, 2, exact=True)):
        with pytest.raises(NoDerivativeError, match="exact=True"):
            fg.grad(f)(3.0)


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_factorial_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.special as jsp

    n = np.array([0.5, 3.0, 4.2])
    ours = fg.grad(lambda t: np.sum(sp.factorial(t)))(n)
    np.testing.assert_allclose(ours, jax.grad(lambda t: jsp.factorial(t).sum())(n), rtol=1e-12)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: sp.logsumexp(2.0 * x, axis=1),
        lambda x: sp.logsumexp(x - 1.0, axis=0, keepdims=True),
        lambda x: sp.logsumexp(2.0 * x),
        lambda x: sp.softmax(2.0 * x, axis=1),
        lambda x: sp.log_softmax(x + 1.0, axis=-1),
    ],
    ids=["logsumexp rows", "logsumexp columns", "logsumexp all", "softmax", "log_softmax"],
)
def test_jit_replays_plain_code_calling_logsumexp_and_softmax(fn):
    # without grad, SciPy's own code ran on the unevaluated argument and converted it: jit
    # warned that the function would run uncompiled, every call
    x = np.random.default_rng(5).normal(size=(40, 6))
    jf = fg.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(4):
            np.testing.assert_allclose(jf(x + k), fn(x + k), rtol=1e-13, atol=1e-15)
    assert jf.cache_info().entries[0].replayable

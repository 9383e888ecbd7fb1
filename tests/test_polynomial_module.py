"""numpy.polynomial on traced values (fusegrad/polynomial.py): the six series modules' functions
and their classes, against NumPy's values, finite differences (reverse and forward, second
order), hand-derived derivatives and jit."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.polynomial import BASES, SERIES_FUNCTIONS
from fusegrad.scipy import _dispatch
from fusegrad.testing import check_grads

P = np.polynomial
RNG = np.random.default_rng(7)
C = RNG.standard_normal(4)
D = RNG.standard_normal(3)
X, Y, Z = (RNG.uniform(-1, 1, 5) for _ in range(3))
C2 = RNG.standard_normal((3, 2))
C3 = RNG.standard_normal((2, 3, 2))


def traced_value(f, *args):
    """What ``f`` returns when its arguments are traced (the mirrors run)."""
    return fg.vjp(f, *args)[0]


def smooth_loss(f):
    def loss(*args):
        r = f(*args)
        return np.sum(np.tanh(0.05 * np.real(r)) + np.tanh(0.05 * np.imag(r)))

    return loss


def cases(basis):
    f = basis.public
    return {
        "der": (lambda c: f("der")(c), (C,)),
        "der-m-scl": (lambda c: f("der")(c, 2, 0.5), (C,)),
        "der-axis": (lambda c: f("der")(c, 1, 2.0, axis=1), (C3,)),
        "der-past-degree": (lambda c: f("der")(c, 5), (C,)),
        "int": (lambda c: f("int")(c), (C,)),
        "int-k-lbnd-scl": (lambda c: f("int")(c, 2, [1.0, 2.0], 0.3, 1.5), (C,)),
        "int-axis": (lambda c: f("int")(c, 2, 1.0, -0.5, 2.0, axis=1), (C3,)),
        "int-traced-k": (lambda k: f("int")(C, 2, k, 0.3), (D[:2],)),
        "int-traced-lbnd": (lambda lbnd: f("int")(C, 2, [1.0, 2.0], lbnd), (np.float64(0.3),)),
        "int-traced-scl": (lambda s: f("der")(f("int")(C, 2, [], 0, s), 1, s), (np.float64(0.7),)),
        "add": (lambda a, b: f("add")(a, b), (C, D)),
        "sub": (lambda a, b: f("sub")(a, b), (D, C)),
        "mul": (lambda a, b: f("mul")(a, b), (C, D)),
        "mulx": (lambda a: f("mulx")(a), (C,)),
        "pow": (lambda a: f("pow")(a, 3), (D,)),
        "div": (lambda a, b: np.concatenate(f("div")(a, b)), (np.append(C, 0.5), D)),
        "val-tensor": (lambda x, c: f("val")(x, c), (X, C2)),
        "val2d": (lambda x, y, c: f("val2d")(x, y, c), (X, Y, C2)),
        "val3d": (lambda x, y, z, c: f("val3d")(x, y, z, c), (X, Y, Z, C3)),
        "grid2d": (lambda x, y, c: f("grid2d")(x, y, c), (X, Y[:3], C2)),
        "grid3d": (lambda x, y, z, c: f("grid3d")(x, y, z, c), (X, Y[:3], Z[:2], C3)),
        "vander": (lambda x: f("vander")(x, 5), (X,)),
        "vander2d": (lambda x, y: f("vander2d")(x, y, [2, 3]), (X, Y)),
        "vander3d": (lambda x, y, z: f("vander3d")(x, y, z, [2, 1, 3]), (X, Y, Z)),
        "companion": (lambda c: f("companion")(c), (C,)),
        "roots": (lambda c: f("roots")(c), (C,)),
        "line": (lambda off, scl: f("line")(off, scl), (np.float64(0.3), np.float64(2.0))),
        "fromroots": (lambda r: f("fromroots")(r), (X,)),
    }


ALL = [(m, case) for m in BASES for case in cases(BASES[m])]


@pytest.mark.parametrize(("module", "case"), ALL)
def test_traced_values_are_numpys(module, case):
    f, args = cases(BASES[module])[case]
    want = f(*args)
    got = traced_value(f, *args)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("module", "case"), ALL)
def test_derivatives_match_finite_differences(module, case):
    f, args = cases(BASES[module])[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # roots: complex inside
        check_grads(smooth_loss(f), ("rev", "fwd"), order=2)(*args)


# --------------------------------------------------------------------------------------------------
# Hand-derived
# --------------------------------------------------------------------------------------------------


def test_the_derivative_maps_are_fixed_matrices():
    # (c₀ + c₁x + c₂x² + c₃x³)' = c₁ + 2c₂x + 3c₃x²
    jac = fg.jacobian(P.polynomial.polyder)(C)
    np.testing.assert_array_equal(jac, [[0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 3]])
    # T₁' = T₀, T₂' = 4T₁, T₃' = 3T₀ + 6T₂
    jac = fg.jacobian(P.chebyshev.chebder)(C)
    np.testing.assert_allclose(jac, [[0, 1, 0, 3], [0, 0, 4, 0], [0, 0, 0, 6]], atol=1e-15)
    # H₁' = 2H₀, H₂' = 4H₁ (physicists' Hermite: Hₙ' = 2n Hₙ₋₁), times scl = 0.5
    jac = fg.jacobian(lambda c: P.hermite.hermder(c, scl=0.5))(C[:3])
    np.testing.assert_allclose(jac, [[0, 1, 0], [0, 0, 2]], atol=1e-15)


def test_the_integral_map_with_a_lower_bound():
    # ∫₁ˣ (c₀ + c₁t + c₂t²) dt = -(c₀ + c₁/2 + c₂/3) + c₀x + c₁x²/2 + c₂x³/3
    jac = fg.jacobian(lambda c: P.polynomial.polyint(c, lbnd=1.0))(C[:3])
    want = [[-1, -1 / 2, -1 / 3], [1, 0, 0], [0, 1 / 2, 0], [0, 0, 1 / 3]]
    np.testing.assert_allclose(jac, want, rtol=1e-15)
    # d/d lbnd of ∫_lbnd^x p = -p(lbnd), in the constant coefficient only
    g = fg.jacobian(lambda b: P.polynomial.polyint(C[:3], lbnd=b))(0.5)
    np.testing.assert_allclose(g, [-P.polynomial.polyval(0.5, C[:3]), 0, 0, 0], rtol=1e-14)


def test_products_vanders_and_roots_by_hand():
    # Σ (c * c)ₖ = (Σ c)²: the gradient is 2 Σ c everywhere
    g = fg.grad(lambda c: np.sum(P.polynomial.polymul(c, c)))(C)
    np.testing.assert_allclose(g, 2 * np.sum(C) * np.ones(4), rtol=1e-14)
    # d/dx Σₖ xᵏ (k ≤ 3) = 1 + 2x + 3x²
    g = fg.grad(lambda x: np.sum(P.polynomial.polyvander(x, 3)))(X)
    np.testing.assert_allclose(g, 1 + 2 * X + 3 * X**2, rtol=1e-14)
    # Laguerre: L₁ = 1 - x, L₂ = 1 - 2x + x²/2; d/dx (L₁ + L₂) = -3 + x
    g = fg.grad(lambda x: np.sum(P.laguerre.lagvander(x, 2)))(X)
    np.testing.assert_allclose(g, -3 + X, rtol=1e-14)
    # roots of x² + bx + c: r = (-b ± √(b² - 4c)) / 2, so ∂r₊/∂c = -1/√(b² - 4c)
    b, c = -5.0, 6.0
    g = fg.grad(lambda v: np.max(P.polynomial.polyroots(np.stack([v[1], v[0], 1.0]))))
    disc = np.sqrt(b * b - 4 * c)
    np.testing.assert_allclose(g(np.array([b, c])), [(-1 + b / disc) / 2, -1 / disc], rtol=1e-12)


def test_every_module_differentiates_its_own_roots():
    # a series with roots 0.3, -0.4, 0.6: moving root j moves exactly root j
    roots = np.array([-0.4, 0.3, 0.6])
    for basis in BASES.values():
        jac = fg.jacobian(lambda r, b=basis: b.public("roots")(b.public("fromroots")(r)))(roots)
        np.testing.assert_allclose(jac, np.eye(3), atol=1e-9, err_msg=basis.prefix)
        # degree 1 (its own formula in each basis: -c0/c1 was used for all of them)
        line = np.array([0.4, 1.0])
        for name in ("roots", "companion"):
            want = basis.public(name)(line)
            got, slope = fg.jvp(basis.public(name), (line,), (np.array([1.0, 0.0]),))
            np.testing.assert_allclose(got, want, err_msg=basis.prefix)
            fd = (
                basis.public(name)(line + [1e-6, 0]) - basis.public(name)(line - [1e-6, 0])
            ) / 2e-6
            np.testing.assert_allclose(slope, fd, rtol=1e-6, err_msg=basis.prefix)


# --------------------------------------------------------------------------------------------------
# Trimming: NumPy drops trailing zero coefficients; a traced series keeps its length
# --------------------------------------------------------------------------------------------------


def test_a_traced_zero_coefficient_keeps_its_derivative():
    d = np.array([1.0, 2.0])
    g = fg.grad(lambda c: np.sum(P.polynomial.polyadd(c, d)))(np.zeros(3))
    np.testing.assert_array_equal(g, np.ones(3))  # reading the zeros would give [1, 0, 0]
    out = traced_value(lambda c: P.polynomial.polysub(c, c), C)
    np.testing.assert_array_equal(out, np.zeros(4))  # NumPy: [0.]
    assert P.polynomial.polysub(C, C).shape == (1,)
    g = fg.grad(lambda c: np.sum(P.chebyshev.chebint(c, k=2.0)))(np.zeros(1))
    np.testing.assert_allclose(g, [1 - P.chebyshev.chebval(0.0, [0.0, 1.0])])


def test_plain_arguments_run_numpys_own_code_and_are_trimmed():
    for basis in BASES.values():
        for name in SERIES_FUNCTIONS:
            ours = basis.public(name)
            if type(ours).__name__ == "function":
                assert _dispatch.scipy_code(ours) is not ours, basis.prefix + name
    assert P.polynomial.polyadd([1.0, 0.0], [0.0, 0.0]).shape == (1,)
    np.testing.assert_array_equal(
        P.legendre.legmul(C, D), _dispatch.scipy_code(P.legendre.legmul)(C, D)
    )
    # a plain series beside a traced one is trimmed as NumPy trims it
    out = traced_value(lambda c: P.polynomial.polyadd(c, [1.0, 0.0, 0.0, 0.0, 0.0]), D)
    assert out.shape == (3,)


def test_the_mirrors_take_numpys_parameter_names():
    for basis in BASES.values():
        for name in SERIES_FUNCTIONS:
            theirs = inspect.signature(_dispatch.scipy_code(basis.public(name))).parameters
            mine = list(inspect.signature(SERIES_FUNCTIONS[name]).parameters)[1:]
            assert mine == list(theirs), basis.prefix + name


def test_numpys_argument_errors():
    with pytest.raises(ValueError, match="order of derivation must be non-negative"):
        fg.grad(lambda c: np.sum(P.chebyshev.chebder(c, -1)))(C)
    with pytest.raises(ValueError, match="Too many integration constants"):
        fg.grad(lambda c: np.sum(P.legendre.legint(c, 1, [1.0, 2.0])))(C)
    with pytest.raises(ValueError, match="Power is too large"):
        fg.grad(lambda c: np.sum(P.hermite.hermpow(c, 17)))(C)
    with pytest.raises(np.exceptions.AxisError):
        fg.grad(lambda c: np.sum(P.polynomial.polyder(c, axis=1)))(C)
    with pytest.raises(ValueError, match="x, y are incompatible"):
        fg.grad(lambda x: np.sum(P.polynomial.polyval2d(x, Y[:2], C2)))(X)


# --------------------------------------------------------------------------------------------------
# The classes
# --------------------------------------------------------------------------------------------------

CLASSES = [P.Polynomial, P.Chebyshev, P.Legendre, P.Laguerre, P.Hermite, P.HermiteE]
DOMAIN = [-1.0, 2.0]
GRID = np.linspace(-1, 2, 6)


def class_cases(kind):
    return {
        "call": (lambda c: kind(c)(GRID), C),
        "call-domain": (lambda c: kind(c, domain=DOMAIN)(GRID), C),
        "call-traced-x": (lambda c: kind(c, domain=DOMAIN)(c), C),
        "deriv": (lambda c: kind(c, domain=DOMAIN).deriv(2)(GRID), C),
        "integ": (lambda c: kind(c, domain=DOMAIN).integ(2, k=[1.0, 0.5], lbnd=0.3).coef, C),
        "add": (lambda c: (kind(c, domain=DOMAIN) + kind(D, domain=DOMAIN)).coef, C),
        "radd": (lambda c: (1.5 + kind(c)).coef, C),
        "sub": (lambda c: (kind(D) - kind(c)).coef, C),
        "mul": (lambda c: (kind(c, domain=DOMAIN) * kind(D, domain=DOMAIN)).coef, C),
        "pow": (lambda c: (kind(c) ** 2).coef, C),
        "floordiv": (lambda c: (kind(c) // kind(D)).coef, C),
        "roots": (lambda c: kind(c, domain=DOMAIN).roots(), C),
        "linspace": (lambda c: kind(c, domain=DOMAIN).linspace(7)[1], C),
        "fromroots": (lambda r: kind.fromroots(r, domain=DOMAIN).coef, X[:3]),
        "fit": (lambda y: kind.fit(GRID, y, 3)(GRID), np.sin(GRID)),
        "traced-window": (lambda w: kind(D, domain=DOMAIN, window=w)(GRID), np.array([-1, 0.5])),
        "truncate": (lambda c: kind(c).truncate(2).coef, C),
    }


CLASS_CASES = [(k, case) for k in CLASSES for case in class_cases(k)]


@pytest.mark.parametrize(("kind", "case"), CLASS_CASES, ids=lambda v: getattr(v, "__name__", v))
def test_classes_with_traced_coefficients(kind, case):
    f, arg = class_cases(kind)[case]
    want = f(arg)
    got = traced_value(f, arg)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_grads(smooth_loss(f), ("rev", "fwd"), order=2)(arg)


def test_a_class_holds_the_traced_coefficients():
    seen = {}

    def f(c):
        p = P.Chebyshev(c, domain=DOMAIN)
        seen["coef"] = p.coef
        return p.deriv()(0.5)

    # T₀' = 0, T₁' = 1, T₂'(t) = 4t, with t = (2x - 1) / 3 mapped from [-1, 2] and dt/dx = 2/3
    g = fg.grad(f)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [0, 2 / 3, 4 * 0 * 2 / 3], atol=1e-15)
    assert seen["coef"] is not None and not isinstance(seen["coef"], np.ndarray)


def test_converting_a_traced_series_is_refused_clearly():
    with pytest.raises(TypeError, match="poly2cheb"):
        fg.grad(lambda c: np.sum(P.Polynomial(c).convert(kind=P.Chebyshev).coef))(C)
    g = fg.grad(lambda c: P.chebyshev.poly2cheb(c)[0])(C)  # what works instead
    np.testing.assert_allclose(g, [1, 0, 0.5, 0])  # x² = (T₀ + T₂)/2, x³ = (3T₁ + T₃)/4


# --------------------------------------------------------------------------------------------------
# jit
# --------------------------------------------------------------------------------------------------

JITTED = {
    "der": lambda c: np.sum(P.chebyshev.chebder(c, 2) ** 2),
    "int": lambda c: np.sum(P.legendre.legint(c, 2, k=[1.0], lbnd=0.2) ** 2),
    "mul": lambda c: np.sum(P.hermite.hermmul(c, c[::-1])),
    "add": lambda c: np.sum(P.polynomial.polyadd(c, [1.0, 2.0]) ** 2),
    "vander": lambda c: np.sum(P.laguerre.lagvander(c, 3) ** 2),
    "val2d": lambda c: np.sum(P.hermite_e.hermeval2d(GRID[:4], c, np.outer(c, c))),
    "class": lambda c: np.sum(P.Chebyshev(c, domain=DOMAIN).deriv()(GRID) ** 2),
    "fromroots": lambda c: np.sum(P.legendre.legfromroots(c)),
}


@pytest.mark.parametrize("name", list(JITTED))
def test_jit_of_grad_replays_plain_grads(name):
    f = JITTED[name]
    g = fg.jit(fg.grad(f))
    rng = np.random.default_rng(3)
    for _ in range(4):
        c = rng.standard_normal(4)
        np.testing.assert_allclose(g(c), fg.grad(f)(c), rtol=1e-10)
    info = g.cache_info()
    assert (info.hits, info.misses) == (3, 1)  # no value was read: the recording replays


def test_polyvalfromroots_at_traced_points():
    # NumPy's code reads x as an array only if it is an ndarray: a traced x gave one number
    P = np.polynomial.polynomial
    r, x = np.array([0.3, -0.5, 1.2]), np.array([0.1, 0.7, 2.0])
    np.testing.assert_allclose(fg.jvp(lambda v: P.polyvalfromroots(v, r), (x,), (x,))[0],
                               P.polyvalfromroots(x, r))  # fmt: skip
    check_grads(lambda v, rr: np.sum(P.polyvalfromroots(v, rr)), ("rev", "fwd"), order=2)(x, r)

"""scipy.interpolate on traced values: CubicSpline, CubicHermiteSpline, PPoly and interp1d built
on traced data (fusegrad.scipy.interpolate), and SciPy's own PPoly/BPoly/BSpline/interp1d
objects evaluated at traced points."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.interpolate as si

import fusegrad as fg
import fusegrad.scipy.interpolate as fsi
from fusegrad.testing import check_frule, check_grads, check_rrule

X = np.array([0.0, 0.3, 0.45, 0.8, 1.1, 1.5, 1.6, 2.0])  # uneven knots
Y = np.sin(2.0 * X) + X
Q = np.array([0.1, 0.37, 0.9, 1.33, 1.8])  # away from the knots
OUTSIDE = np.array([-0.4, 0.0, 1.2, 2.0, 2.7])
CLOSE = {"rtol": 1e-12, "atol": 1e-12}

BCS = {
    "not-a-knot": "not-a-knot",
    "natural": "natural",
    "clamped": "clamped",
    "periodic": "periodic",
    "first-second": ((1, 0.5), (2, -1.0)),
    "second-not-a-knot": ((2, 0.3), "not-a-knot"),
}


def periodic_ends(y):
    """``y`` with its last value replaced by its first (traced values welcome)."""
    return np.concatenate([y[:-1], y[:1]])


def data(bc):
    return periodic_ends(Y) if bc == "periodic" else Y


def traced_value(f, *args):
    """``f``'s value computed on traced arguments (its primal under ``jvp``)."""
    return fg.jvp(f, args, tuple(np.ones_like(a) for a in args))[0]


# --------------------------------------------------------------------------------------------------
# CubicSpline built on traced data
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bc", list(BCS))
@pytest.mark.parametrize("traced", ["y", "x"])
def test_cubic_spline_matches_scipy(bc, traced):
    y, bc_type = data(bc), BCS[bc]
    ref = si.CubicSpline(X, y, bc_type=bc_type)

    def build(v):
        x_, y_ = (X, v) if traced == "y" else (v, y)
        s = si.CubicSpline(x_, y_, bc_type=bc_type)
        assert isinstance(s, fsi.CubicSpline)
        return s

    arg = y if traced == "y" else X
    np.testing.assert_allclose(traced_value(lambda v: build(v).c, arg), ref.c, **CLOSE)
    np.testing.assert_allclose(traced_value(lambda v: build(v).x, arg), ref.x, **CLOSE)
    for nu in range(4):
        got = traced_value(lambda v, nu=nu: build(v)(Q, nu), arg)
        np.testing.assert_allclose(got, ref(Q, nu), **CLOSE)
    for extrapolate in (None, True, False, "periodic"):
        got = traced_value(lambda v, e=extrapolate: build(v)(OUTSIDE, extrapolate=e), arg)
        np.testing.assert_allclose(got, ref(OUTSIDE, extrapolate=extrapolate), **CLOSE)
    for nu in (1, 2):
        got = traced_value(lambda v, nu=nu: build(v).antiderivative(nu)(OUTSIDE), arg)
        np.testing.assert_allclose(got, ref.antiderivative(nu)(OUTSIDE), **CLOSE)
        got = traced_value(lambda v, nu=nu: build(v).derivative(nu)(Q), arg)
        np.testing.assert_allclose(got, ref.derivative(nu)(Q), **CLOSE)
    for a, b in ((0.2, 1.7), (1.7, 0.2), (-1.0, 2.5), (0.5, 6.3)):
        for extrapolate in (None, False, "periodic"):
            got = traced_value(lambda v, a=a, b=b, e=extrapolate: build(v).integrate(a, b, e), arg)
            np.testing.assert_allclose(got, ref.integrate(a, b, extrapolate), **CLOSE)


@pytest.mark.parametrize("bc", list(BCS))
def test_cubic_spline_derivatives_against_finite_differences(bc):
    bc_type = BCS[bc]
    ends = periodic_ends if bc == "periodic" else (lambda y: y)

    def at_points(x, y, q):
        return si.CubicSpline(x, ends(y), bc_type=bc_type)(q)

    check_grads(at_points, ("rev", "fwd"), order=2, rtol=1e-4)(X, Y, Q)
    check_grads(lambda y, q: at_points(X, y, q), ("rev", "fwd"), order=2)(Y, Q)

    def slope_and_integral(x, y, b):
        s = si.CubicSpline(x, ends(y), bc_type=bc_type)
        return s(Q, 1), s.integrate(0.2, b)

    check_grads(slope_and_integral, ("rev", "fwd"), order=2, rtol=1e-4)(X, Y, 1.7)


@pytest.mark.parametrize("bc", list(BCS))
def test_derivative_in_the_data_is_the_spline_through_unit_vectors(bc):
    # The spline is affine in y (and in the end derivative values): d s(q) / d y_j is the
    # spline through the unit vector e_j with the same conditions, made homogeneous.
    n = X.size
    if bc == "periodic":
        units = periodic_ends(np.eye(n))[:, :-1]  # y = (z, z[0]) for z of n - 1 values
        jac = fg.jacobian(lambda z: si.CubicSpline(X, periodic_ends(np.append(z, 0.0)),
                                                    bc_type="periodic")(Q))(Y[:-1])  # fmt: skip
        np.testing.assert_allclose(jac, si.CubicSpline(X, units, bc_type="periodic")(Q), **CLOSE)
        return
    bc_type = BCS[bc]
    homogeneous = tuple(b if isinstance(b, str) else (b[0], np.zeros(n)) for b in bc_type) if (
        isinstance(bc_type, tuple)) else bc_type  # fmt: skip
    jac = fg.jacobian(lambda y: si.CubicSpline(X, y, bc_type=bc_type)(Q))(Y)
    want = si.CubicSpline(X, np.eye(n), bc_type=homogeneous)(Q)
    np.testing.assert_allclose(jac, want, **CLOSE)


def test_natural_spline_through_a_line_is_that_line():
    def at(ab, q):
        return si.CubicSpline(X, ab[0] * X + ab[1], bc_type="natural")(q)

    ab, q = np.array([1.5, -0.25]), 0.77
    assert at(ab, q) == pytest.approx(1.5 * q - 0.25, abs=1e-14)
    np.testing.assert_allclose(fg.grad(at)(ab, q), [q, 1.0], **CLOSE)  # d/da, d/db
    assert fg.grad(at, argnums=1)(ab, q) == pytest.approx(1.5, abs=1e-13)
    assert fg.grad(fg.grad(at, argnums=1), argnums=1)(ab, q) == pytest.approx(0.0, abs=1e-12)


def test_clamped_end_values_are_differentiable():
    def at(v):
        return si.CubicSpline(X, Y, bc_type=((1, v[0]), (2, v[1])))(Q)

    check_grads(at, ("rev", "fwd"), order=2)(np.array([0.3, -0.2]))
    # d s(q)/d v0 is the spline through zeros with s'(x0) = 1 and s''(end) = 0
    want = si.CubicSpline(X, np.zeros(X.size), bc_type=((1, 1.0), (2, 0.0)))(Q)
    np.testing.assert_allclose(fg.jacobian(at)(np.array([0.3, -0.2]))[:, 0], want, **CLOSE)


@pytest.mark.parametrize("shape, axis", [((3, 8, 2), 1), ((2, 8), -1), ((8, 2, 2), 0)])
def test_cubic_spline_nd_values_along_an_axis(shape, axis):
    y = np.cos(np.arange(np.prod(shape)).reshape(shape))
    q = np.array([[0.1, 0.9], [1.7, 2.4]])
    ref = si.CubicSpline(X, y, axis=axis)
    got = traced_value(lambda y: si.CubicSpline(X, y, axis=axis)(q), y)
    np.testing.assert_allclose(got, ref(q), **CLOSE)
    got = traced_value(lambda y: si.CubicSpline(X, y, axis=axis).integrate(0.3, 1.9), y)
    np.testing.assert_allclose(got, ref.integrate(0.3, 1.9), **CLOSE)
    check_grads(lambda y, q: si.CubicSpline(X, y, axis=axis)(q), ("rev", "fwd"))(y, q)


def test_extrapolation():
    jac = fg.jacobian(lambda y: si.CubicSpline(X, y, extrapolate=False)(OUTSIDE))(Y)
    outside = (OUTSIDE < X[0]) | (OUTSIDE > X[-1])
    assert np.all(jac[outside] == 0) and np.all(np.any(jac[~outside] != 0, axis=1))
    values = traced_value(lambda y: si.CubicSpline(X, y, extrapolate=False)(OUTSIDE), Y)
    assert np.array_equal(np.isnan(values), outside)
    # periodic: a whole number of periods further along is the same point
    spline = si.CubicSpline(X, periodic_ends(Y), bc_type="periodic")
    g = fg.grad(lambda q: np.sum(spline(q + 2 * (X[-1] - X[0]))))(Q)
    np.testing.assert_allclose(g, spline(Q, 1), **CLOSE)


def test_cubic_hermite_spline_in_values_and_slopes():
    dydx = np.cos(X)
    ref = si.CubicHermiteSpline(X, Y, dydx)
    got = traced_value(lambda d: si.CubicHermiteSpline(X, Y, d)(OUTSIDE), dydx)
    np.testing.assert_allclose(got, ref(OUTSIDE), **CLOSE)
    check_grads(lambda x, y, d: si.CubicHermiteSpline(x, y, d)(Q), ("rev", "fwd"), order=2)(
        X, Y, dydx
    )
    # the value at a knot is y there, whatever the slopes
    g = fg.grad(lambda d: si.CubicHermiteSpline(X, Y, d)(X[3]))(dydx)
    assert np.all(g == 0)


def test_ppoly_with_traced_coefficients_and_descending_breakpoints():
    c = np.array([[1.0, -2.0, 0.5], [0.3, 0.1, -0.4], [2.0, 1.0, 0.0]])
    q, i = 1.2, 1  # the second piece, in either order of the breakpoints
    for x in (np.array([0.0, 1.0, 1.5, 3.0]), np.array([3.0, 1.5, 1.0, 0.0])):
        ref = si.PPoly(c, x)
        got = traced_value(lambda c, x=x: si.PPoly(c, x)(OUTSIDE), c)
        np.testing.assert_allclose(got, ref(OUTSIDE), **CLOSE)
        got = traced_value(lambda x: si.PPoly(c, x)(OUTSIDE, 1), x)
        np.testing.assert_allclose(got, ref(OUTSIDE, 1), **CLOSE)
        # d p(q) / d c[j, i] is (q - x[i])^(2 - j) on the piece i that q falls in
        g = fg.grad(lambda c, x=x: si.PPoly(c, x)(q))(c)
        want = np.zeros_like(c)
        want[:, i] = (q - x[i]) ** np.array([2, 1, 0])
        np.testing.assert_allclose(g, want, **CLOSE)


# --------------------------------------------------------------------------------------------------
# SciPy's own objects, built on plain data, at traced points
# --------------------------------------------------------------------------------------------------

PLAIN_OBJECTS = {
    "CubicSpline": lambda: si.CubicSpline(X, Y),
    "CubicSpline-2d-axis1": lambda: si.CubicSpline(X, np.stack([Y, Y**2]), axis=1),
    "PchipInterpolator": lambda: si.PchipInterpolator(X, Y),
    "Akima1DInterpolator": lambda: si.Akima1DInterpolator(X, Y),
    "BPoly": lambda: si.BPoly.from_derivatives(X[:4], [[y, 1.0] for y in Y[:4]]),
    "make_interp_spline-k3": lambda: si.make_interp_spline(X, Y, k=3),
    "make_interp_spline-k1": lambda: si.make_interp_spline(X, Y, k=1),
    "make_interp_spline-k5-2d": lambda: si.make_interp_spline(X, np.stack([Y, -Y], 1), k=5),
}


@pytest.mark.parametrize("name", list(PLAIN_OBJECTS))
def test_plain_interpolators_at_traced_points(name):
    obj = PLAIN_OBJECTS[name]()
    points = np.concatenate([Q, OUTSIDE, [np.nan]])
    for nu in range(3):
        for extrapolate in (None, False, "periodic"):
            got = traced_value(lambda q, nu=nu, e=extrapolate: obj(q, nu, e), points)
            np.testing.assert_allclose(got, obj(points, nu, extrapolate), **CLOSE)
    slope = fg.grad(lambda q: np.sum(obj(q)))(Q[:3])
    want = np.moveaxis(obj(Q[:3], 1), getattr(obj, "axis", 0), 0).reshape(3, -1).sum(axis=1)
    np.testing.assert_allclose(slope, want, **CLOSE)
    check_grads(lambda q: obj(q), ("rev", "fwd"), order=2)(Q[:3])


def test_plain_ppoly_integrate_with_traced_bounds():
    spline = si.CubicSpline(X, Y)
    ga, gb = fg.grad(lambda a, b: spline.integrate(a, b), argnums=(0, 1))(0.25, 1.7)
    assert ga == pytest.approx(-spline(0.25), abs=1e-13)
    assert gb == pytest.approx(spline(1.7), abs=1e-13)


# --------------------------------------------------------------------------------------------------
# interp1d
# --------------------------------------------------------------------------------------------------

KINDS = ["linear", "nearest", "nearest-up", "previous", "next", "zero", "slinear", "quadratic",
         "cubic", 5]  # fmt: skip
UNSORTED = np.random.default_rng(0).permutation(X.size)
FILLS = {
    "nan": {"bounds_error": False},
    "extrapolate": {"fill_value": "extrapolate"},
    "number": {"bounds_error": False, "fill_value": -3.0},
    "pair": {"bounds_error": False, "fill_value": (-1.0, np.array([2.0, 4.0]))},
}


@pytest.mark.parametrize("kind", KINDS, ids=str)
@pytest.mark.parametrize("fill", list(FILLS))
def test_interp1d_matches_scipy(kind, fill):
    x, y = X[UNSORTED], np.stack([Y, np.cos(X)])[:, UNSORTED]  # two rows, x out of order
    points = np.array([[-0.5, 0.3], [0.61, 1.5], [2.0, 3.0]])
    ref = si.interp1d(x, y, kind=kind, **FILLS[fill])(points)
    got = traced_value(lambda y: si.interp1d(x, y, kind=kind, **FILLS[fill])(points), y)
    np.testing.assert_allclose(got, ref, **CLOSE)
    got = traced_value(lambda q: si.interp1d(x, y, kind=kind, **FILLS[fill])(q), points)
    np.testing.assert_allclose(got, ref, **CLOSE)
    if kind in ("linear", "nearest", "previous", "next"):
        got = traced_value(lambda x: si.interp1d(x, y, kind=kind, **FILLS[fill])(points), x)
        np.testing.assert_allclose(got, ref, **CLOSE)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_interp1d_derivative_in_the_data_is_interpolation_of_unit_vectors(kind):
    jac = fg.jacobian(lambda y: si.interp1d(X, y, kind=kind)(Q))(Y)
    np.testing.assert_allclose(jac, si.interp1d(X, np.eye(X.size), kind=kind, axis=0)(Q), **CLOSE)


@pytest.mark.parametrize("kind", ["linear", "slinear", "quadratic", "cubic"])
def test_interp1d_derivatives_against_finite_differences(kind):
    def at(y, q):
        return si.interp1d(X, y, kind=kind, bounds_error=False, fill_value=0.5)(q)

    check_grads(at, ("rev", "fwd"), order=2)(Y, np.append(Q, 2.5))
    if kind == "linear":
        check_grads(lambda x: si.interp1d(x, Y)(Q), ("rev", "fwd"), order=2)(X)
    plain = si.interp1d(X, Y, kind=kind)
    slope = fg.grad(lambda q: np.sum(plain(q)))(Q)
    if kind in ("linear", "slinear"):
        i = np.searchsorted(X, Q) - 1
        np.testing.assert_allclose(slope, (Y[i + 1] - Y[i]) / (X[i + 1] - X[i]), **CLOSE)
    else:
        np.testing.assert_allclose(slope, np.ravel(plain._spline(Q, 1)), **CLOSE)


def test_interp1d_bounds_and_fill_values():
    points = np.array([-1.0, 0.5, 2.5, 3.0])
    with pytest.raises(ValueError, match=r"A value \(2.5\) in x_new is above"):
        fg.grad(lambda q: np.sum(si.interp1d(X, Y)(q)))(points[1:])
    with pytest.raises(ValueError, match=r"A value \(-1.0\) in x_new is below"):
        fg.grad(lambda y: np.sum(si.interp1d(X, y)(points)))(Y)
    with pytest.raises(ValueError, match="Cannot extrapolate and raise"):
        fg.grad(lambda y: np.sum(si.interp1d(X, y, bounds_error=True, fill_value="extrapolate")(
            points)))(Y)  # fmt: skip
    # the fill values are differentiable: each point outside contributes its side's value
    g = fg.grad(lambda f: np.sum(si.interp1d(X, Y, bounds_error=False, fill_value=(f, 2 * f))(
        points)))(0.5)  # fmt: skip
    assert g == pytest.approx(1.0 + 2 * 2)
    # 'previous' extrapolates above (the last value) but has nothing below
    f = si.interp1d(X, Y, kind="previous", fill_value="extrapolate")
    got = traced_value(lambda q: f(q), points)
    np.testing.assert_allclose(got, [np.nan, f(0.5), Y[-1], Y[-1]], **CLOSE)


def test_interp1d_spline_kinds_with_traced_x_say_what_works():
    with pytest.raises(NotImplementedError, match=r"traced x.*'linear'.*CubicSpline"):
        fg.grad(lambda x: np.sum(si.interp1d(x, Y, kind="cubic")(Q)))(X)


# --------------------------------------------------------------------------------------------------
# jit, constructors, errors
# --------------------------------------------------------------------------------------------------

JITTED = {
    "CubicSpline-in-y": (lambda y, q: si.CubicSpline(X, y)(q), (Y, Q)),
    "CubicSpline-in-x": (lambda x, q: si.CubicSpline(x, Y, bc_type="natural")(q, 1), (X, Q)),
    "CubicSpline-periodic-integral": (
        lambda y, b: si.CubicSpline(X, periodic_ends(y), bc_type="periodic").integrate(0.1, b),
        (Y, 3.3),
    ),
    "plain-PchipInterpolator": (lambda q: si.PchipInterpolator(X, Y)(q), (Q,)),
    "plain-BSpline": (lambda q: si.make_interp_spline(X, Y)(q), (Q,)),
    "interp1d-linear": (lambda y, q: si.interp1d(X, y, bounds_error=False)(q), (Y, Q)),
    "interp1d-cubic": (lambda y, q: si.interp1d(X, y, "cubic", bounds_error=False)(q), (Y, Q)),
}


@pytest.mark.parametrize("name", list(JITTED))
def test_jit_replays_the_gradient(name):
    f, args = JITTED[name]
    argnums = tuple(range(len(args)))

    def loss(*a):
        return np.sum(np.sin(f(*a)))

    jitted = fg.jit(fg.grad(loss, argnums=argnums))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a jit falling back to uncompiled calls warns
        for step in range(4):
            moved = tuple(a + 0.01 * step * np.cos(np.arange(np.size(a)) + 1.0) for a in args)
            moved = tuple(np.reshape(m, np.shape(a)) for m, a in zip(moved, args))
            for got, want in zip(jitted(*moved), fg.grad(loss, argnums=argnums)(*moved)):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    info = jitted.cache_info()
    assert info.hits == 3 and info.entries[0].replayable


def test_constructors_keep_scipy_objects_for_plain_data():
    spline = si.CubicSpline(X, Y)
    assert type(spline) is si.CubicSpline and type(fsi.CubicSpline(X, Y)) is si.CubicSpline
    assert type(pickle.loads(pickle.dumps(spline))) is si.CubicSpline
    assert type(si.PPoly(spline.c, spline.x)) is si.PPoly
    assert type(si.interp1d(X, Y)) is si.interp1d

    class Mine(si.CubicSpline):
        pass

    assert type(Mine(X, Y)) is Mine
    # the mirrors are usable directly, also through a name bound before fusegrad was imported
    g = fg.grad(lambda y: fsi.CubicSpline(X, y)(0.5))(Y)
    np.testing.assert_allclose(g, si.CubicSpline(X, np.eye(X.size))(0.5), **CLOSE)
    g = fg.grad(lambda y: fsi.interp1d(X, y)(0.5))(Y)
    np.testing.assert_allclose(g, si.interp1d(X, np.eye(X.size), axis=0)(0.5), **CLOSE)


@pytest.mark.parametrize(
    "bc_type, message",
    [
        ("sideways", "bc_type=sideways is not allowed"),
        (("periodic", "natural"), "'periodic' `bc_type` is defined for both"),
        (((3, 0.0), "natural"), "The specified derivative order must be 1 or 2"),
        (((1, np.zeros(2)), "natural"), r"`deriv_value` shape \(2,\) is not the expected one"),
        (("natural",), "`bc_type` must contain 2 elements"),
    ],
)
def test_cubic_spline_argument_errors_as_scipy(bc_type, message):
    with pytest.raises(ValueError, match=message):
        si.CubicSpline(X, Y, bc_type=bc_type)
    with pytest.raises(ValueError, match=message):
        fg.grad(lambda y: si.CubicSpline(X, y, bc_type=bc_type)(0.5))(Y)


def test_tridiagonal_solve_rules():
    rng = np.random.default_rng(1)
    below, above = rng.standard_normal(6), rng.standard_normal(6)
    diagonal, rhs = 4.0 + rng.random(6), rng.standard_normal((6, 2))
    matrix = np.diag(diagonal) + np.diag(below[1:], -1) + np.diag(above[:-1], 1)
    np.testing.assert_allclose(
        fsi._solve_tridiagonal(below, diagonal, above, rhs), np.linalg.solve(matrix, rhs), **CLOSE
    )
    check_rrule(fsi._solve_tridiagonal, below, diagonal, above, rhs)
    check_frule(fsi._solve_tridiagonal, below, diagonal, above, rhs)
    check_grads(fsi._tridiagonal_solve, ("rev", "fwd"), order=2)(below, diagonal, above, rhs)


def test_many_knots():
    # the slopes come from a banded solve: no n×n matrix (2000 knots: 32 MB for each one)
    x = np.linspace(0.0, 1.0, 2000)
    g = fg.grad(lambda y: np.sum(si.CubicSpline(x, y)(Q / 2)))(np.sin(7 * x))
    some = [0, 1, 57, 999, 1998, 1999]
    units = si.CubicSpline(x, np.eye(x.size)[:, some])(Q / 2)
    np.testing.assert_allclose(g[some], np.sum(units, axis=0), **CLOSE)


def test_interp1d_linear_at_a_repeated_knot_takes_scipys_value():
    # SciPy evaluates 1-D float data with np.interp, whose repeated knot takes its last value
    import scipy.interpolate as si

    x, y = np.array([0.0, 1.0, 1.0, 2.0, 3.0]), np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    q = np.array([0.5, 1.0, 1.5])
    want = si.interp1d(x, y)(q)
    np.testing.assert_array_equal(fg.jvp(lambda v: si.interp1d(x, v)(q), (y,), (y,))[0], want)
    np.testing.assert_array_equal(fg.jvp(lambda v: si.interp1d(x, y)(v), (q,), (q,))[0], want)


def test_bspline_with_a_repeated_end_knot_at_traced_points():
    # k + 2 copies of the last knot (SciPy's antiderivative of a k=0 spline): de Boor's weights
    # were 0/0 there, nan where SciPy's basis recursion counts the empty interval as 0
    from scipy.interpolate import BSpline, make_interp_spline

    b = BSpline(np.array([0.0, 0, 1, 2, 3, 3, 3]), np.array([1.0, 2, -1, 0.5, 0]), 1)
    q = np.array([-0.5, 1.5, 3.0, 3.5])
    np.testing.assert_allclose(fg.jvp(b, (q,), (np.ones(4),))[0], b(q), atol=1e-15)
    a = make_interp_spline([0.0, 1, 2, 3, 4], [1.0, 2, -1, 0.5, 0.3], k=0).antiderivative()
    q = np.array([1.5, 4.0, 4.5])
    np.testing.assert_allclose(fg.jvp(a, (q,), (np.ones(3),))[0], a(q), atol=1e-15)


def test_cubic_spline_of_traced_float32_data_is_solved_in_float64():
    # SciPy converts to float64 before solving; a traced float32 y was solved in float32
    import scipy.interpolate as si

    x = np.linspace(0.0, 1.0, 6)
    y = np.sin(3 * x).astype(np.float32)
    q = np.linspace(0.05, 0.95, 5)
    got = fg.jvp(lambda v: si.CubicSpline(x, v)(q), (y,), (np.ones_like(y),))[0]
    np.testing.assert_allclose(got, si.CubicSpline(x, y)(q), rtol=1e-14)


@pytest.mark.parametrize("k", [1, 3])
def test_bspline_integrate_with_traced_bounds(k):
    # SciPy's own integrate went into FITPACK with the traced bounds and failed
    import scipy.interpolate as si

    x = np.linspace(0.0, 3.0, 8)
    bs = si.make_interp_spline(x, np.sin(x), k=k)
    for a, b, extrapolate in ((0.3, 2.1, True), (2.1, 0.3, True), (-0.5, 3.5, False)):
        value, g = fg.value_and_grad(lambda ab, e=extrapolate: bs.integrate(ab[0], ab[1], e))(
            np.array([a, b])
        )
        np.testing.assert_allclose(value, bs.integrate(a, b, extrapolate=extrapolate), rtol=1e-12)
        inside = extrapolate or (x[0] <= a <= x[-1] and x[0] <= b <= x[-1])
        want = np.array([-bs(a), bs(b)]) if inside else np.zeros(2)  # the fundamental theorem
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-15)


def test_pchip_interpolator_on_traced_data():
    # it evaluated at traced points only; built on traced y or x it failed inside SciPy
    import scipy.interpolate as si

    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 9))
    y = np.cumsum(rng.normal(size=9))
    q = np.linspace(x[0] + 0.01, x[-1] - 0.01, 13)
    want = si.PchipInterpolator(x, y)(q)
    for f, arg in ((lambda v: si.PchipInterpolator(x, v)(q), y),
                   (lambda v: si.PchipInterpolator(v, y)(q), x)):  # fmt: skip
        np.testing.assert_allclose(fg.jvp(f, (arg,), (np.ones_like(arg),))[0], want, atol=1e-14)
    two = np.stack([y, y**2 / 5], 1)
    got = fg.jvp(lambda v: si.PchipInterpolator(x, v, axis=1)(q), (two.T,), (0 * two.T,))[0]
    np.testing.assert_allclose(got, si.PchipInterpolator(x, two.T, axis=1)(q), atol=1e-14)
    check_grads(lambda v: np.sum(si.PchipInterpolator(x, v)(q) ** 2), ("rev", "fwd"))(y)

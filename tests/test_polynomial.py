"""np.roots (implicit differentiation at each simple root) and np.polyfit (a least-squares
composite): hand-derived derivatives, finite differences, complex coefficients, second order."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.testing import check_frule, check_grads, check_rrule

CUBIC = np.array([2.0, -1.0, 0.5, 3.0])  # one real root, a complex pair: all simple


def test_roots_of_a_quadratic_hand_derived():
    # z² + b z + c: r = (-b ± √(b² - 4c)) / 2, so ∂r/∂c = ∓1/√(b² - 4c)
    b, c = -5.0, 6.0  # roots 3 and 2

    def big(v):
        return np.max(np.real(np.roots(np.stack([1.0, v[0], v[1]]))))

    disc = np.sqrt(b * b - 4 * c)
    want = [(-1 + b / disc) / 2, -1 / disc]  # ∂/∂b, ∂/∂c of the larger root
    np.testing.assert_allclose(fg.grad(big)(np.array([b, c])), want, rtol=1e-12)


def test_roots_rules_real_and_complex_coefficients():
    check_rrule(np.roots, CUBIC)
    check_frule(np.roots, CUBIC)
    complex_p = CUBIC + 1j * np.array([0.3, -0.2, 0.1, 0.4])
    check_rrule(np.roots, complex_p)
    check_frule(np.roots, complex_p)


def test_roots_second_order_and_trailing_zero():
    def f(p):
        r = np.roots(p)
        return np.sum(np.real(r) ** 2 + np.imag(r))

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # reverse-over-reverse
        check_grads(f, modes=("rev", "fwd"), order=2)(CUBIC)
    # a trailing zero coefficient is a (simple) root at 0: ∂0/∂p_N = -1/p'(0) = -1/p_{N-1}
    p = np.array([1.0, -3.0, 2.0, 0.0])
    g = fg.jacobian(lambda v: np.real(np.roots(v)))(p)
    zero = int(np.argmin(np.abs(np.roots(p))))
    np.testing.assert_allclose(g[zero], [0.0, 0.0, 0.0, -1 / 2.0], atol=1e-12)


@settings(max_examples=15)
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=5), st.integers(0, 2**31 - 1))
def test_roots_gradient_matches_finite_differences(coefs, seed):
    p = np.array([1.5, *coefs])
    r = np.roots(p)
    gaps = np.abs(r[:, None] - r[None, :]) + np.eye(len(r))
    if np.min(gaps) < 0.3 or np.max(np.abs(r)) > 20:  # near-multiple roots: ill-conditioned
        return
    w = np.random.default_rng(seed).standard_normal((2, len(r)))
    order = np.lexsort((r.imag, r.real))  # np.sort_complex's order, fixed at p

    def loss(v):
        r = np.roots(v)[order]
        return np.sum(w[0] * np.real(r) + w[1] * np.imag(r))

    def plain(v):
        r = np.sort_complex(np.roots(v))
        return float(np.sum(w[0] * r.real + w[1] * r.imag))

    h = 1e-6
    steps = [p + s * h * e for e in np.eye(len(p)) for s in (1, -1)]
    if any(not np.array_equal(np.sort_complex(np.roots(q)), np.roots(q)[order]) for q in steps):
        return  # the order of the roots changes within the step (equal real parts: x³ + x)
    fd = [(plain(p + h * e) - plain(p - h * e)) / (2 * h) for e in np.eye(len(p))]
    np.testing.assert_allclose(fg.grad(loss)(p), fd, rtol=1e-5, atol=1e-6)


X = np.linspace(-1.0, 1.0, 7)
Y = np.sin(2 * X) + 0.1 * X**3


def test_polyfit_is_the_least_squares_solution():
    # c = (VᵀV)⁻¹ Vᵀ y is linear in y: ∂(u·c)/∂y = V (VᵀV)⁻¹ u
    u = np.array([1.0, -2.0, 0.5])
    vander = np.vander(X, 3)
    want = vander @ np.linalg.solve(vander.T @ vander, u)
    np.testing.assert_allclose(fg.grad(lambda y: np.polyfit(X, y, 2) @ u)(Y), want, rtol=1e-10)
    _, dot = fg.jvp(lambda y: np.polyfit(X, y, 2) @ u, (Y,), (np.ones(7),))
    np.testing.assert_allclose(dot, np.sum(want), rtol=1e-10)


@pytest.mark.slow  # second order through the SVD behind lstsq: about 2.5 s
def test_polyfit_second_order_in_x_and_y():
    check_grads(lambda x, y: np.sum(np.polyfit(x, y, 2) ** 2), modes=("rev", "fwd"), order=2)(X, Y)


def test_polyfit_in_x_weights_and_columns():
    w = np.linspace(0.5, 2.0, 7)
    check_grads(lambda x, y: np.sum(np.polyfit(x, y, 2) ** 2), modes=("rev", "fwd"))(X, Y)
    check_grads(lambda y: np.sum(np.polyfit(X, y, 2) ** 2), modes=("rev", "fwd"), order=2)(Y)
    check_grads(lambda x, w: np.sum(np.polyfit(x, Y, 3, w=w) ** 2), modes=("rev", "fwd"))(X, w)
    ys = np.stack([Y, np.cos(X)], axis=1)  # several columns: one fit each
    got = fg.jacobian(lambda y: np.polyfit(X, y, 1))(ys)
    assert got.shape == (2, 2, 7, 2)
    np.testing.assert_allclose(got[:, 1, :, 0], 0.0, atol=1e-12)  # column 1 ignores column 0
    np.testing.assert_allclose(got[:, 0, :, 0], np.linalg.pinv(np.vander(X, 2)), atol=1e-12)


def test_polyfit_full_or_cov_on_traced_values_is_a_clear_error():
    with pytest.raises(TypeError, match="full=True or cov=True"):
        fg.grad(lambda y: np.sum(np.polyfit(X, y, 2, full=True)[0]))(Y)

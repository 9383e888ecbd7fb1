"""scipy.integrate.odeint on traced values: adjoint (reverse) and sensitivities (forward)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si

import fusegrad as fg
import fusegrad.scipy.integrate as fsi
from fusegrad.testing import check_grads

T = np.linspace(0.0, 1.0, 5)
TOL = {"rtol": 1e-10, "atol": 1e-10}


def rhs(y, t, a, b):
    return a * np.array([1.0, -1.0]) * y + b * y[::-1] + 0.1 * np.sin(t) * y * y


Y0, A, B = np.array([1.0, 0.5]), 0.3, np.array([0.2, -0.1])


def test_plain_odeint_differentiates_in_y0_and_args():
    def loss(y0, a, b):
        return np.sum(np.cos(si.odeint(rhs, y0, T, args=(a, b), **TOL)))

    check_grads(loss, ("rev", "fwd"), order=1, rtol=1e-5)(Y0, A, B)


def test_hand_derived_decay():
    def end(k, y0):
        return fsi.odeint(lambda y, t, k: -k * y, y0, [0.0, 2.0], args=(k,), **TOL)[-1, 0]

    gk, gy = fg.grad(end, argnums=(0, 1))(0.5, np.array([3.0]))
    np.testing.assert_allclose(gk, -2.0 * 3.0 * np.exp(-1.0), rtol=1e-7)  # d/dk y0 e^{-2k}
    np.testing.assert_allclose(gy, [np.exp(-1.0)], rtol=1e-7)
    _, tangent = fg.jvp(lambda k: end(k, np.array([3.0])), (0.5,), (1.0,))
    np.testing.assert_allclose(tangent, -6.0 * np.exp(-1.0), rtol=1e-7)


def test_every_output_time_gets_its_cotangent():
    w = np.arange(1.0, 6.0)[:, None] * np.array([1.0, -2.0])
    g = fg.grad(lambda y0: np.sum(w * si.odeint(rhs, y0, T, args=(A, B), **TOL)))(Y0)
    h = 1e-6
    fd = [
        (np.sum(w * si.odeint(rhs, Y0 + h * e, T, args=(A, B), **TOL))
         - np.sum(w * si.odeint(rhs, Y0 - h * e, T, args=(A, B), **TOL))) / (2 * h)
        for e in np.eye(2)
    ]  # fmt: skip
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_plain_inputs_and_errors():
    np.testing.assert_array_equal(si.odeint(rhs, Y0, T, args=(A, B)),
                                  fsi._odeint(rhs, Y0, T, args=(A, B)))  # fmt: skip
    with pytest.raises(NotImplementedError, match=r"second order of scipy\.integrate\.odeint"):
        fg.hessian(lambda y0: np.sum(si.odeint(rhs, y0, T, args=(A, B))))(Y0)
    with pytest.raises(TypeError, match="full_output"):
        fg.grad(lambda y0: np.sum(si.odeint(rhs, y0, T, args=(A, B), full_output=True)[0]))(Y0)


def test_solve_ivp_names_odeint():
    with pytest.raises(TypeError, match=r"inside scipy\.integrate\.solve_ivp.*integrate\.odeint"):
        fg.grad(lambda y: np.sum(si.solve_ivp(lambda t, y: -y, (0.0, 1.0), y).y))(np.ones(2))

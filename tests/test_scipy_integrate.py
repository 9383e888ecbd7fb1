"""scipy.integrate.odeint on traced values: adjoint (reverse) and sensitivities (forward)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si
from traced_values import traced_value

import fusegrad as fg
import fusegrad.scipy.integrate as fsi
from fusegrad.scipy import _dispatch
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


def test_odeint_in_its_times_is_refused_not_zero():
    # the gradient in t was silently [0, 0, 0] (exact: [0.974, -0.607, -0.368])
    from fusegrad.rules.special import NoDerivativeError

    def loss(t):
        return np.sum(si.odeint(lambda y, t: -y, np.array([1.0]), t, **TOL))

    with pytest.raises(NoDerivativeError, match=r"odeint in its times t: .*solve_ivp"):
        fg.grad(loss)(np.array([0.0, 0.5, 1.0]))


def test_solve_ivp_with_an_integer_among_its_args():
    # the integer's cotangent (None) went into the adjoint state as NaN: the backward solve
    # stepped forever
    def loss(a):
        def rhs(t, y, a, n):
            return -a * y**n

        y0, t_eval = np.array([1.0, 2.0]), np.array([0.5, 1.0])
        sol = si.solve_ivp(rhs, (0.0, 1.0), y0, t_eval=t_eval, args=(a, 2), rtol=1e-10, atol=1e-10)
        return np.sum(sol.y)

    fd = (loss(0.7 + 1e-6) - loss(0.7 - 1e-6)) / 2e-6
    assert fg.grad(loss)(0.7) == pytest.approx(fd, rel=1e-5)


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


# ------------------------------------------------------------------ solve_ivp


def ivp_rhs(t, y, a, b):
    return rhs(y, t, a, b)


# High-order steps keep the number of right-hand-side calls (each adjoint one is a vjp) small.
IVP = {"method": "DOP853", "rtol": 1e-9, "atol": 1e-9}


def _fd(loss, args, i, h=1e-5):
    a = np.asarray(args[i], dtype=float)
    out = np.zeros(a.shape)
    for idx in np.ndindex(a.shape):
        e = np.zeros(a.shape)
        e[idx] = h
        up, dn = list(args), list(args)
        up[i], dn[i] = a + e, a - e
        out[idx] = (loss(*up) - loss(*dn)) / (2 * h)
    return out


def test_solve_ivp_adjoint_in_every_argument_against_finite_differences():
    w = np.arange(1.0, 11.0).reshape(2, 5)
    t_eval = np.linspace(0.2, 1.0, 5)

    def loss(y0, a, b, t0, te):
        sol = si.solve_ivp(ivp_rhs, (t0, 1.2), y0, t_eval=te, args=(a, b), **IVP)
        return np.sum(np.cos(sol.y) * w) + np.sum(sol.t**2)

    args = [Y0, A, B, 0.1, t_eval]
    grads = fg.grad(loss, argnums=(0, 1, 2, 3, 4))(*args)
    for i, g in enumerate(grads):  # the adjoint is accurate to the solver's tolerances
        np.testing.assert_allclose(g, _fd(loss, args, i), rtol=1e-6, atol=1e-6, err_msg=str(i))
    vs = [np.sin(np.arange(np.size(a)) + 1.0).reshape(np.shape(a)) for a in args]
    _, dot = fg.jvp(loss, args, vs)
    np.testing.assert_allclose(dot, sum(np.sum(g * v) for g, v in zip(grads, vs)), rtol=1e-7)


def test_solve_ivp_hand_derived_decay_and_the_end_time():
    # y' = -k y: y(t1) = y0 e^{-k (t1 - t0)}
    def end(k, y0, t0, t1):
        sol = si.solve_ivp(lambda t, y, k: -k * y, (t0, t1), y0, args=(k,), **IVP)
        return sol.y[0, -1]

    k, y0, t0, t1 = 0.5, np.array([3.0]), 0.25, 2.0
    y1 = 3.0 * np.exp(-k * (t1 - t0))
    got = fg.grad(end, argnums=(0, 1, 2, 3))(k, y0, t0, t1)
    want = (-(t1 - t0) * y1, [y1 / 3.0], k * y1, -k * y1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-7)
    _, dot = fg.jvp(lambda t: end(k, y0, t0, t), (t1,), (1.0,))
    np.testing.assert_allclose(dot, -k * y1, rtol=1e-7)


# The implicit methods approximate the augmented system's Jacobian by differences: slow.
@pytest.mark.parametrize(
    "method", ["RK45", pytest.param("RK23", marks=pytest.mark.slow),
               pytest.param("Radau", marks=pytest.mark.slow),
               pytest.param("BDF", marks=pytest.mark.slow),
               pytest.param("LSODA", marks=pytest.mark.slow)]
)  # fmt: skip
def test_solve_ivp_methods(method):
    def loss(y0, b):
        sol = si.solve_ivp(ivp_rhs, (0.0, 0.5), y0, method=method, args=(A, b), rtol=1e-8,
                           atol=1e-8)  # fmt: skip
        assert isinstance(sol.t, np.ndarray)  # constant times: plain values
        return np.sum(sol.y[:, -1] ** 2)

    g = fg.grad(loss, argnums=(0, 1))(Y0, B)
    np.testing.assert_allclose(g[0], _fd(loss, [Y0, B], 0), rtol=1e-5)
    np.testing.assert_allclose(g[1], _fd(loss, [Y0, B], 1), rtol=1e-5)


def test_solve_ivp_result_plain_inputs_and_errors():
    sol = fsi.solve_ivp(ivp_rhs, (0.0, 1.0), Y0, t_eval=T, args=(A, B))
    want = si.solve_ivp(ivp_rhs, (0.0, 1.0), Y0, t_eval=T, args=(A, B))
    np.testing.assert_array_equal(sol.y, want.y)
    out = {}

    def loss(y0):
        out["sol"] = si.solve_ivp(ivp_rhs, (0.0, 1.0), y0, t_eval=T, args=(A, B))
        return np.sum(out["sol"].y)

    fg.grad(loss)(Y0)
    assert out["sol"].success and out["sol"].y.shape == (2, 5)
    np.testing.assert_array_equal(out["sol"].t, T)
    with pytest.raises(TypeError, match="dense_output=True or events"):
        fg.grad(lambda y: np.sum(si.solve_ivp(ivp_rhs, (0, 1), y, args=(A, B),
                                              dense_output=True).y))(Y0)  # fmt: skip
    with pytest.raises(NotImplementedError, match="second order"):
        fg.hessian(lambda y: np.sum(si.solve_ivp(ivp_rhs, (0, 1), y, args=(A, B)).y))(Y0)


def _central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_odeint_with_tfirst():
    # tfirst=True: func(t, y, ...). The adjoint and sensitivity systems called func(y, t, ...):
    # a silently wrong gradient (-7.02 for -3.36)
    def loss(k):
        sol = si.odeint(lambda t, y, k: -k * y + np.sin(t), np.array([1.0]),
                        np.array([0.0, 1.0, 2.0]), args=(k,), tfirst=True, rtol=1e-11,
                        atol=1e-11)  # fmt: skip
        return np.sum(sol**2)

    want = _central(loss, 0.7)
    np.testing.assert_allclose(fg.grad(loss)(0.7), want, rtol=1e-6)
    np.testing.assert_allclose(fg.jvp(loss, (0.7,), (1.0,))[1], want, rtol=1e-6)


def test_right_hand_sides_returning_lists():
    # SciPy's documentation writes `return [y[1], -y[0]]`: the adjoint's vjp of it read the list
    # as two outputs (an internal error)
    def by_ivp(k):
        sol = si.solve_ivp(lambda t, y, k: [-k * y[0], y[0] - y[1]], (0.0, 1.0), [1.0, 0.0],
                           args=(k,), rtol=1e-11, atol=1e-12)  # fmt: skip
        return sol.y[1, -1]

    def by_odeint(k):
        sol = si.odeint(lambda y, t, k: [-k * y[0], y[0] - y[1]], [1.0, 0.0], [0.0, 1.0],
                        args=(k,), rtol=1e-11, atol=1e-12)  # fmt: skip
        return sol[-1, 1]

    for loss in (by_ivp, by_odeint):
        want = _central(loss, 0.5)
        np.testing.assert_allclose(fg.grad(loss)(0.5), want, rtol=1e-6)
        np.testing.assert_allclose(fg.jvp(loss, (0.5,), (1.0,))[1], want, rtol=1e-6)


def test_an_error_inside_a_scipy_function_without_rule_names_it():
    # SciPy's own code meeting a tracer fails in its own words ("Tracer is not a supported
    # array type"): the error gets a note naming the function and what to do (here SciPy's own
    # cumulative_trapezoid, bypassing the redirection to fusegrad's)
    own = _dispatch.scipy_code(si.cumulative_trapezoid)
    with pytest.raises(TypeError) as info:
        fg.grad(lambda y: np.sum(own(y)))(np.ones(4))
    notes = "".join(getattr(info.value, "__notes__", ()))
    assert "inside scipy.integrate.cumulative_trapezoid" in notes
    assert "fusegrad.scipy.integrate.cumulative_trapezoid" in notes
    # forward mode too
    with pytest.raises(TypeError) as info:
        fg.jvp(lambda y: own(y), (np.ones(4),), (np.ones(4),))
    assert "cumulative_trapezoid" in "".join(getattr(info.value, "__notes__", ()))


# --------------------------------------------------------------------------------------------------
# cumulative_trapezoid, cumulative_simpson
# --------------------------------------------------------------------------------------------------

_Y = np.random.default_rng(5).standard_normal((3, 7))
_X = np.cumsum(np.random.default_rng(6).uniform(0.1, 1.0, 7))


def _cumulative_cases():
    fs = [si.cumulative_trapezoid]
    if hasattr(si, "cumulative_simpson"):
        fs.append(si.cumulative_simpson)
    cases = []
    for f in fs:
        for n in (2, 3, 4, 7):  # below 3 points Simpson is trapezoids; odd and even counts
            cases += [(f, (_Y[:, :n],), {}), (f, (_Y[:, :n],), {"initial": 0})]
            cases.append((lambda y, x, f=f: f(y, x=x), (_Y[:, :n], _X[:n]), {}))
        cases += [(f, (_Y.T,), {"axis": 0, "dx": 0.5}), (f, (_Y.astype(np.float32),), {}),
                  (lambda y, x, f=f: f(y, x=x, axis=0), (_Y.T, _X), {}),
                  (lambda y, x, f=f: f(y, x=x), (_Y, np.broadcast_to(_X, _Y.shape).copy()), {}),
                  (lambda y, d, f=f: f(y, dx=d), (_Y, 0.3), {})]  # fmt: skip
    if len(fs) > 1:
        cases.append((lambda y, i: fs[1](y, initial=i), (_Y, np.ones((3, 1))), {}))
    return cases


@pytest.mark.parametrize("case", range(len(_cumulative_cases())))
def test_cumulative_integrals_match_scipy_and_differentiate(case):
    f, args, kwargs = _cumulative_cases()[case]
    ours, ref, loss = traced_value(f, *args, **kwargs)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-13)
    if args[0].dtype == np.float64:
        check_grads(loss, ("rev", "fwd"), order=2)(*args)


def test_cumulative_trapezoid_errors_and_probe():
    x = np.linspace(0.3, 1.7, 6)
    g = fg.grad(lambda v: np.sum(si.cumulative_trapezoid(v**2)))(x)
    np.testing.assert_allclose(g, 2 * x * np.array([2.5, 4.5, 3.5, 2.5, 1.5, 0.5]), rtol=1e-12)
    with pytest.raises(ValueError, match="initial"):
        fg.grad(lambda v: np.sum(si.cumulative_trapezoid(v, initial=1.0)))(x)

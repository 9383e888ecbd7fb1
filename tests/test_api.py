"""The user API of issue 5: grad, value_and_grad, vjp, elementwise_grad, jacobian, on pytrees."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.testing import check_grads

pytestmark = pytest.mark.usefixtures("engine")  # every test on both engines


RNG = np.random.default_rng(0)
X = RNG.standard_normal((20, 3))
T = np.sign(RNG.standard_normal(20))
W0 = RNG.standard_normal(3)


def loss(params, X, t):
    w, b = params["w"], params["b"]
    return np.mean(np.logaddexp(0.0, -t * (X @ w + b)))


def _loss_grad_by_hand(w, b, X, t):
    z = -t * (X @ w + b)
    s = 1 / (1 + np.exp(-z))  # d logaddexp(0, z) / dz
    dz = s * -t / len(t)
    return X.T @ dz, float(np.sum(dz))


def test_issue_example_logistic_loss_params_dict():
    g = fg.grad(loss)({"w": W0, "b": 0.0}, X, T)  # {"w": array, "b": float}
    assert set(g) == {"w", "b"}
    assert isinstance(g["w"], np.ndarray) and g["w"].shape == (3,)
    assert type(g["b"]) is float
    gw, gb = _loss_grad_by_hand(W0, 0.0, X, T)
    np.testing.assert_allclose(g["w"], gw, rtol=1e-10)
    assert g["b"] == pytest.approx(gb, rel=1e-10)


def test_issue_example_value_and_grad_argnums_tuple():
    def f(x, y):
        return np.sum(np.sin(x) * y**2)

    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    val, (gx, gy) = fg.value_and_grad(f, argnums=(0, 1))(x, y)
    assert val == pytest.approx(f(x, y))
    np.testing.assert_allclose(gx, np.cos(x) * y**2)
    np.testing.assert_allclose(gy, 2 * np.sin(x) * y)


def test_issue_example_vjp():
    def f(x):
        return np.tanh(x) * 2.0

    x = RNG.standard_normal(5)
    out, f_vjp = fg.vjp(f, x)
    (gx,) = f_vjp(np.ones_like(out))
    np.testing.assert_allclose(out, f(x))
    np.testing.assert_allclose(gx, 2 * (1 - np.tanh(x) ** 2))
    ct = RNG.standard_normal(5)
    np.testing.assert_allclose(f_vjp(ct)[0], ct * 2 * (1 - np.tanh(x) ** 2))


def test_argnums_forms():
    def f(a, b, c):
        return np.sum(a * b**2 + c**3)

    a, b, c = np.ones(2), np.full(2, 2.0), np.full(2, 3.0)
    np.testing.assert_allclose(fg.grad(f)(a, b, c), b**2)
    np.testing.assert_allclose(fg.grad(f, 1)(a, b, c), 2 * a * b)  # positional
    np.testing.assert_allclose(fg.grad(f, argnums=-1)(a, b, c), 3 * c**2)
    ga, gc = fg.grad(f, argnums=(0, 2))(a, b, c)
    np.testing.assert_allclose(ga, b**2)
    np.testing.assert_allclose(gc, 3 * c**2)
    (gb,) = fg.grad(f, argnums=(1,))(a, b, c)
    np.testing.assert_allclose(gb, 2 * a * b)
    # keyword arguments pass through, undifferentiated
    np.testing.assert_allclose(fg.grad(lambda x, k=1.0: np.sum(k * x))(a, k=5.0), [5.0, 5.0])


@pytest.mark.parametrize("n", [40, 1 << 18])
def test_scalar_aux_values_are_numpy_scalars(path, n):
    # np.sum and np.mean of traced values in aux come back as NumPy gives them (np.float64), on
    # the small-array path, lazily and under jit (0-d arrays there before)
    from fusegrad.lazy import replay

    def f(x):
        v = np.sum(np.tanh(x))
        return v, {"loss": v, "mean": np.mean(x), "head": x[:2] * 2}

    x = np.linspace(0, 1, n)
    plain = fg.grad(f, has_aux=True)
    jitted = fg.jit(fg.value_and_grad(f, has_aux=True))
    for k in range(replay.HOT_REPLAYS + 2):
        xk = x + 0.01 * k
        for aux in (plain(xk)[1], jitted(xk)[0][1]):
            assert type(aux["loss"]) is np.float64 and type(aux["mean"]) is np.float64
            assert aux["loss"] == pytest.approx(np.sum(np.tanh(xk)), rel=1e-13)
            assert aux["mean"] == pytest.approx(np.mean(xk), rel=1e-13)
            assert type(aux["head"]) is np.ndarray and aux["head"].shape == (2,)


def test_has_aux():
    def f(x):
        y = np.sin(x)
        return np.sum(y), {"y": y, "n": 3}

    x = RNG.standard_normal(3)
    g, aux = fg.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, np.cos(x))
    np.testing.assert_allclose(aux["y"], np.sin(x))
    assert isinstance(aux["y"], np.ndarray) and aux["n"] == 3
    (val, aux2), g2 = fg.value_and_grad(f, has_aux=True)(x)
    assert val == pytest.approx(np.sum(np.sin(x)))
    np.testing.assert_allclose(g2, g)
    out, f_vjp, aux3 = fg.vjp(f, x, has_aux=True)
    np.testing.assert_allclose(f_vjp(1.0)[0], np.cos(x))


Point = namedtuple("Point", "x y")


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float


def test_pytrees():
    tree = {
        "tuple": (np.ones(2), 2.0),
        "list": [np.full(3, 0.5, np.float32), [1.5]],
        "nt": Point(np.arange(2.0), 3.0),
        "dc": Params(np.ones(2), -1.0),
        "none": None,
    }

    def f(p):
        a, s = p["tuple"]
        v, (u,) = p["list"]
        return (
            np.sum(a * s)
            + np.sum(v**2) * u
            + np.sum(p["nt"].x * p["nt"].y)
            + np.sum(p["dc"].w) * p["dc"].b
        )

    g = fg.grad(f)(tree)
    assert g["none"] is None
    np.testing.assert_allclose(g["tuple"][0], [2.0, 2.0])
    assert type(g["tuple"][1]) is float and g["tuple"][1] == pytest.approx(2.0)
    assert isinstance(g["list"], list) and g["list"][1][0] == pytest.approx(0.75)
    assert type(g["list"][1][0]) is float
    assert g["list"][0].dtype == np.float32
    np.testing.assert_allclose(g["list"][0], 2 * 0.5 * 1.5)
    assert isinstance(g["nt"], Point)
    np.testing.assert_allclose(g["nt"].x, [3.0, 3.0])
    assert g["nt"].y == pytest.approx(1.0)
    assert isinstance(g["dc"], Params)
    np.testing.assert_allclose(g["dc"].w, [-1.0, -1.0])
    assert g["dc"].b == pytest.approx(2.0)
    plain = {k: tree[k] for k in ("tuple", "list")}
    check_grads(lambda p: f({**tree, **p}))(plain)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_are_kept(dtype):
    x = RNG.standard_normal(4).astype(dtype)
    g = fg.grad(lambda x: np.sum(np.exp(x) * 2.0))(x)
    assert g.dtype == dtype
    g = fg.grad(lambda x, y: np.sum(x * y), argnums=1)(np.ones(4), x)
    assert g.dtype == dtype
    val, g = fg.value_and_grad(lambda x: np.sum(x * x))(x)
    assert g.dtype == dtype
    assert fg.elementwise_grad(np.sin)(x).dtype == dtype


def test_python_floats_get_python_floats():
    g = fg.grad(lambda a, b: a * b + np.sin(a), argnums=(0, 1))(2.0, 3.0)
    assert all(type(v) is float for v in g)
    assert g[0] == pytest.approx(3.0 + np.cos(2.0)) and g[1] == pytest.approx(2.0)
    assert type(fg.grad(lambda a: np.sum(a * np.ones(3)))(2.0)) is float
    # an input the output does not depend on gets a zero of its own type
    g = fg.grad(lambda a, b: a * 2.0, argnums=(0, 1))(1.0, np.ones(2, np.float32))
    assert g[0] == 2.0
    np.testing.assert_array_equal(g[1], np.zeros(2))
    assert g[1].dtype == np.float32


def test_value_and_grad_value_types():
    val, g = fg.value_and_grad(lambda x: np.sum(x**2))(np.ones(3))
    assert np.ndim(val) == 0 and val == 3.0
    val, g = fg.value_and_grad(lambda x: x * 2.0)(1.5)
    assert val == 3.0 and g == 2.0


def test_elementwise_grad():
    x = np.linspace(-2, 2, 7)
    np.testing.assert_allclose(fg.elementwise_grad(np.tanh)(x), 1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(
        fg.elementwise_grad(lambda x: x[:, None] * x[None, :])(x), 2 * np.sum(x) * np.ones(7)
    )
    ga, gb = fg.elementwise_grad(lambda a, b: a * b, argnums=(0, 1))(x, 2.0)
    np.testing.assert_allclose(ga, np.full(7, 2.0))
    assert gb == pytest.approx(np.sum(x))


def _fd_jacobian(f, x, h=1e-6):
    y = np.asarray(f(x))
    J = np.zeros(y.shape + x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        J[(...,) + idx] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h)
    return J


def test_jacobian():
    A = RNG.standard_normal((3, 4))

    def f(x):
        return np.tanh(A @ x) * np.sum(x**2)

    x = RNG.standard_normal(4)
    J = fg.jacobian(f)(x)
    assert J.shape == (3, 4)
    np.testing.assert_allclose(J, _fd_jacobian(f, x), rtol=1e-6, atol=1e-8)

    def g(m):
        return np.exp(m).T * 2.0

    m = RNG.standard_normal((2, 3))
    Jm = fg.jacobian(g)(m)
    assert Jm.shape == (3, 2, 2, 3)
    np.testing.assert_allclose(Jm, _fd_jacobian(g, m), rtol=1e-6, atol=1e-8)
    Ja, Jb = fg.jacobian(lambda a, b: a * b, argnums=(0, 1))(x, x + 1)
    np.testing.assert_allclose(Ja, np.diag(x + 1))
    np.testing.assert_allclose(Jb, np.diag(x))
    assert fg.jacobian(lambda x: np.sum(x**2))(x).shape == (4,)
    # pytree arguments: one Jacobian block per leaf, in the argument's structure
    Jp = fg.jacobian(lambda p: p["a"] * p["s"][0])({"a": x, "s": (2.0,)})
    np.testing.assert_allclose(Jp["a"], 2.0 * np.eye(4))
    np.testing.assert_allclose(Jp["s"][0], x)


def test_jacobian_matches_autograd():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    A = RNG.standard_normal((3, 4))
    x = RNG.standard_normal(4)

    def f(m, x):
        return m.sin(A @ x) / (1.0 + m.sum(x**2))

    np.testing.assert_allclose(
        fg.jacobian(lambda x: f(np, x))(x), autograd.jacobian(lambda x: f(anp, x))(x), rtol=1e-10
    )


@pytest.mark.parametrize(
    "fun, args",
    [
        (lambda x: np.sum(np.tanh(x[:, None] - x[None, :]) ** 2), (RNG.standard_normal(6),)),
        (lambda x, y: np.mean(np.exp(x) * np.log1p(y**2)), (RNG.standard_normal((3, 4)), 0.7)),
        (lambda w: loss({"w": w, "b": 0.3}, X, T), (W0,)),
        (lambda x: np.max(np.abs(x), axis=0) @ np.ones(3), (RNG.standard_normal((4, 3)),)),
        (lambda x: np.stack([x, x**2]) * 3.0, (RNG.standard_normal(3),)),
        (lambda p: p[0] * np.sum(p[1] ** 2), ((1.5, RNG.standard_normal(3)),)),
    ],
)
def test_check_grads_whole_functions(fun, args):
    check_grads(fun, modes=("rev",))(*args)


def test_check_grads_float32():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    check_grads(lambda x: np.sum(np.sin(x) * np.cos(x[:, :1])), modes=("rev",))(x)


def test_grad_reused_and_nested_calls():
    f = fg.grad(lambda x: np.sum(x**3))
    for _ in range(3):
        np.testing.assert_allclose(f(np.ones(2)), [3.0, 3.0])
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(f(x)))(np.ones(2)), [6.0, 6.0])


def test_jvp_and_jacobian_with_aux():
    # JAX's jvp(has_aux=True) and jacrev(has_aux=True): the auxiliary output without tangents
    x = RNG.standard_normal(3)
    v = np.ones(3)

    def f(x):
        return np.sin(x), {"c": np.cos(x), "n": 3}

    y, dot, aux = fg.jvp(f, (x,), (v,), has_aux=True)
    np.testing.assert_allclose(y, np.sin(x))
    np.testing.assert_allclose(dot, np.cos(x))
    assert isinstance(aux["c"], np.ndarray) and aux["n"] == 3
    np.testing.assert_allclose(aux["c"], np.cos(x))
    jac, aux = fg.jacobian(f, has_aux=True)(x)
    np.testing.assert_allclose(jac, np.diag(np.cos(x)))
    np.testing.assert_allclose(aux["c"], np.cos(x))
    # the aux is a value of the outer trace: an outer grad differentiates through it
    g = fg.grad(lambda s: np.sum(fg.jvp(lambda u: (u * s, u * s), (x,), (v,), has_aux=True)[2]))
    assert g(2.0) == pytest.approx(np.sum(x))
    with pytest.raises(TypeError, match="has_aux=True needs the function to return a pair"):
        fg.jvp(np.sin, (x,), (v,), has_aux=True)


def test_transformed_functions_keep_the_functions_name():
    """(jit's warnings name the function: a hessian's was called 'matrix')"""

    def energy(x):
        return np.sum(x**3)

    for t in (fg.grad, fg.jacobian, fg.hessian, lambda f: fg.hessian(f, argnums=(0,))):
        assert t(energy).__name__ == "energy"

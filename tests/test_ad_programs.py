"""Whole programs: random compositions of covered ops vs finite differences (and autograd), and
classic models vs hand-derived gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.testing import check_grads

# ------------------------------------------------------------------ random programs
# Each step maps an (N, M) array to an (N, M) array, smoothly on all of R (no kinks, no poles), so
# finite differences are valid anywhere. ``m`` is the NumPy module (numpy, or autograd.numpy).
N, M = 4, 3

UNARY = {
    "sin": lambda m, x: m.sin(x),
    "tanh": lambda m, x: m.tanh(x),
    "arctan": lambda m, x: m.arctan(x),
    "square": lambda m, x: 0.5 * x**2,
    "exp_tanh": lambda m, x: m.exp(m.tanh(x)),
    "log1p_sq": lambda m, x: m.log1p(x * x),
    "sqrt": lambda m, x: m.sqrt(x * x + 1.0),
    "sigmoid": lambda m, x: 1.0 / (1.0 + m.exp(-x)),
    "neg_cos": lambda m, x: -m.cos(x),
}
BINARY = {
    "add": lambda m, x, y: x + y,
    "sub": lambda m, x, y: y - x,
    "mul": lambda m, x, y: x * y,
    "div": lambda m, x, y: x / (1.0 + y * y),
    "logaddexp": lambda m, x, y: m.logaddexp(x, y),
    "hypot": lambda m, x, y: m.sqrt(x * x + y * y + 0.5),
    "pow": lambda m, x, y: (x * x + 1.0) ** (0.5 * m.tanh(y)),
}
# operands for binary steps: the current value broadcast against a row, a column or a scalar
OPERANDS = {
    "row": lambda m, x, p: p["row"][None, :],
    "col": lambda m, x, p: p["col"][:, None],
    "scalar": lambda m, x, p: p["s"],
    "self_outer": lambda m, x, p: x[:, 0][:, None] * x[0][None, :],
    "full": lambda m, x, p: p["full"],
}
STRUCTURAL = {
    "matmul": lambda m, x, p: m.tanh(x @ p["W"]),
    "reverse": lambda m, x, p: x[::-1],
    "fancy": lambda m, x, p: x[np.array([1, 0, 3, 2])] + x[np.array([0, 0, 1, 2])],
    "sum_keep": lambda m, x, p: x - m.sum(x, axis=1, keepdims=True) / 3.0,
    "mean_bcast": lambda m, x, p: x * m.mean(x, axis=0)[None, :],
    "sumsq": lambda m, x, p: x + m.tanh(0.1 * m.sum(x**2)),
    "slice_concat": lambda m, x, p: m.concatenate([x[:, 1:], x[:, :1] * 2.0], axis=1),
    "transpose": lambda m, x, p: (x.T @ p["V"]).T,
}

step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY))),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.sampled_from(sorted(OPERANDS))),
    st.tuples(st.just("s"), st.sampled_from(sorted(STRUCTURAL))),
)


def _doublings(steps) -> int:
    """Steps that square the degree in x: ``square`` and a ``self_outer`` operand."""
    return sum(s == ("u", "square") or (s[0] == "b" and s[2] == "self_outer") for s in steps)


# at most two doublings: three make x^8 (x up to ~3), and sin or cos of that curves too fast for
# finite differences to check to 1e-5 (random draws found rule 265.2 against 215.5, and 0.27733
# against 0.27733 + 6e-6)
program = st.lists(step, min_size=1, max_size=7).filter(lambda s: _doublings(s) <= 2)
finals = st.sampled_from(["sum", "mean", "weighted", "var", "norm"])


def run(m, steps, final, x, p):
    for s in steps:
        if s[0] == "u":
            x = UNARY[s[1]](m, x)
        elif s[0] == "b":
            x = BINARY[s[1]](m, x, OPERANDS[s[2]](m, x, p))
        else:
            x = STRUCTURAL[s[1]](m, x, p)
    if final == "sum":
        return m.sum(x)
    if final == "mean":
        return m.mean(x)
    if final == "var":
        return m.var(x)
    if final == "norm":
        return m.sqrt(m.sum(x * x) + 1.0)
    return m.sum(x * p["C"])


def _params(seed):
    rng = np.random.default_rng(seed)
    return {
        "row": rng.standard_normal(M),
        "col": rng.standard_normal(N),
        "s": float(rng.standard_normal()),
        "full": rng.standard_normal((N, M)),
        "W": rng.standard_normal((M, M)) / 2,
        "V": rng.standard_normal((N, N)) / 2,
        "C": rng.standard_normal((N, M)),
    }, rng.standard_normal((N, M))


@settings(max_examples=60, deadline=None)
@given(steps=program, final=finals, seed=st.integers(0, 2**16))
# short reductions inlined by the walk scheduling a kernel and then not by the one building it
@example(steps=[("s", "mean_bcast"), ("b", "div", "row"), ("s", "mean_bcast")], final="sum", seed=0)
def test_random_programs_vs_finite_differences(steps, final, seed):
    p, x = _params(seed)
    check_grads(lambda x, p: run(np, steps, final, x, p), modes=("rev",))(x, p)


@pytest.mark.slow  # 60 programs through autograd too; the finite-difference twin runs by default
@pytest.mark.filterwarnings("ignore:Output seems independent of input")
@settings(max_examples=60, deadline=None)
@given(steps=program, final=finals, seed=st.integers(0, 2**16))
def test_random_programs_vs_autograd(steps, final, seed):
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    p, x = _params(seed)
    got = fg.value_and_grad(lambda x, p: run(np, steps, final, x, p), argnums=(0, 1))(x, p)
    want_v = run(anp, steps, final, x, p)
    want = autograd.grad(lambda x, p: run(anp, steps, final, x, p), argnum=0)(x, p)
    want_p = autograd.grad(lambda x, p: run(anp, steps, final, x, p), argnum=1)(x, p)
    assert got[0] == pytest.approx(want_v, rel=1e-10)
    np.testing.assert_allclose(got[1][0], want, rtol=1e-8, atol=1e-10)
    for k in p:
        np.testing.assert_allclose(got[1][1][k], want_p[k], rtol=1e-8, atol=1e-10, err_msg=k)


@pytest.mark.parametrize(
    "steps, final",
    [
        ([("u", "tanh"), ("b", "mul", "self_outer"), ("s", "matmul"), ("s", "fancy")], "var"),
        ([("s", "slice_concat"), ("b", "logaddexp", "row"), ("s", "sum_keep")], "norm"),
        ([("b", "pow", "col"), ("s", "transpose"), ("u", "sigmoid"), ("s", "mean_bcast")], "sum"),
    ],
)
def test_fixed_programs_on_both_engines(engine, steps, final):
    p, x = _params(7)
    check_grads(lambda x, p: run(np, steps, final, x, p), modes=("rev",))(x, p)
    check_grads(lambda x: run(np, steps, final, x, p), modes=("rev",))(x.astype(np.float32))


# ------------------------------------------------------------------ classic models


def test_logistic_regression(engine):
    rng = np.random.default_rng(1)
    X, t = rng.standard_normal((50, 4)), (rng.random(50) > 0.5).astype(float)
    w, b = rng.standard_normal(4), 0.3

    def nll(w, b):
        z = X @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        return -np.mean(t * np.log(p) + (1 - t) * np.log1p(-p))

    gw, gb = fg.grad(nll, argnums=(0, 1))(w, b)
    p = 1 / (1 + np.exp(-(X @ w + b)))
    np.testing.assert_allclose(gw, X.T @ (p - t) / 50, rtol=1e-10)
    assert gb == pytest.approx(np.mean(p - t), rel=1e-10)
    assert type(gb) is float


def test_two_layer_mlp_tanh(engine):
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((16, 5)), rng.standard_normal((16, 2))
    params = {
        "W1": rng.standard_normal((5, 8)) / 2,
        "b1": rng.standard_normal(8),
        "W2": rng.standard_normal((8, 2)) / 2,
        "b2": rng.standard_normal(2),
    }

    def loss(p):
        h = np.tanh(X @ p["W1"] + p["b1"])
        out = h @ p["W2"] + p["b2"]
        return 0.5 * np.sum((out - Y) ** 2) / len(X)

    g = fg.grad(loss)(params)
    # by hand
    a1 = X @ params["W1"] + params["b1"]
    h = np.tanh(a1)
    d_out = (h @ params["W2"] + params["b2"] - Y) / len(X)
    d_h = d_out @ params["W2"].T
    d_a1 = d_h * (1 - h**2)
    want = {"W2": h.T @ d_out, "b2": d_out.sum(0), "W1": X.T @ d_a1, "b1": d_a1.sum(0)}
    for k in params:
        np.testing.assert_allclose(g[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    g32 = fg.grad(loss)(p32)
    for k in params:
        assert g32[k].dtype == np.float32
        np.testing.assert_allclose(g32[k], want[k], rtol=1e-3, atol=1e-4, err_msg=k)


def test_gaussian_log_likelihood_slogdet_solve(engine):
    rng = np.random.default_rng(3)
    d, n = 3, 10
    Xs = rng.standard_normal((n, d))
    A = rng.standard_normal((d, d))
    S = A @ A.T + d * np.eye(d)
    mu = rng.standard_normal(d)

    def loglik(mu, S):
        R = Xs - mu
        sign, logdet = np.linalg.slogdet(S)
        quad = np.sum(R * np.linalg.solve(S, R.T).T)
        return -0.5 * (n * logdet + quad + n * d * np.log(2 * np.pi))

    gmu, gS = fg.grad(loglik, argnums=(0, 1))(mu, S)
    Si = np.linalg.inv(S)
    R = Xs - mu
    np.testing.assert_allclose(gmu, Si @ R.sum(0), rtol=1e-9)
    # d/dS of -n/2 logdet - 1/2 sum_i r_i^T S^-1 r_i  (S treated as unconstrained)
    want_S = -0.5 * n * Si.T + 0.5 * Si.T @ (R.T @ R) @ Si.T
    np.testing.assert_allclose(gS, want_S, rtol=1e-9, atol=1e-12)
    check_grads(loglik)(mu, S)


# ------------------------------------------------------------------ mixed lazy / non-lazy


def test_mixed_lazy_and_eager_operations(engine):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((6, 3))
    w = rng.standard_normal(3)

    def f(w):
        z = np.tanh(X @ w)  # matmul (eager) feeding a lazy elementwise op
        s = np.sort(z * w[0])  # sort of a lazy value
        top = s[-3:]  # basic indexing
        picked = z[np.array([0, 2, 2, 5])]  # fancy indexing, repeated index
        return np.sum(top**2) + np.sum(picked * w[1]) + np.sum(z[z > 0])

    check_grads(f)(w)

    z = np.tanh(X @ w)
    s_order = np.argsort(z * w[0])
    got = fg.grad(f)(w)

    def f_np(w):
        z = np.tanh(X @ w)
        return (
            np.sum(np.sort(z * w[0])[-3:] ** 2) + np.sum(z[[0, 2, 2, 5]] * w[1]) + np.sum(z[z > 0])
        )

    h = 1e-6
    fd = np.array([(f_np(w + h * e) - f_np(w - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    assert s_order.shape == (6,)


def test_broadcast_blowup_gradient(engine):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(30), rng.standard_normal(20)

    def f(x, y):
        return np.sum(np.tanh(x[:, None] - y[None, :]))

    gx, gy = fg.grad(f, argnums=(0, 1))(x, y)
    sech2 = 1 - np.tanh(x[:, None] - y[None, :]) ** 2
    np.testing.assert_allclose(gx, sech2.sum(1), rtol=1e-10)
    np.testing.assert_allclose(gy, -sech2.sum(0), rtol=1e-10)


def test_second_order():
    x = np.array([0.3, -0.7, 1.1])
    hess_diag = fg.elementwise_grad(fg.elementwise_grad(np.sin))(x)
    np.testing.assert_allclose(hess_diag, -np.sin(x), rtol=1e-10)
    g2 = fg.grad(lambda x: np.sum(fg.grad(lambda y: np.sum(np.tanh(y) ** 2))(x)))(x)
    t = np.tanh(x)
    np.testing.assert_allclose(g2, 2 * (1 - t**2) * (1 - 3 * t**2), rtol=1e-9)

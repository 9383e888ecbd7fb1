"""Higher order (issue 8): Hessians against closed forms, hvp = hessian @ v, nesting of forward and
reverse in every order, perturbation confusion, memory of the fused hvp, checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.lazy import recording
from fusegrad.memory import track_allocations
from fusegrad.testing import check_grads

pytestmark = pytest.mark.usefixtures("engine")  # every test on both engines


RNG = np.random.default_rng(88)


def _jvp_t(fun, x, v):
    return fg.jvp(fun, (x,), (v,))[1]


def fwd_over_rev_hessian(fun, x):
    """Hessian column by column: jvp of grad along each basis vector."""
    n = x.size
    cols = [_jvp_t(fg.grad(fun), x, np.eye(n)[i].reshape(x.shape)) for i in range(n)]
    return np.stack([np.ravel(c) for c in cols], axis=1)


# --------------------------------------------------------------------------------------------------
# Classic Hessians against closed forms
# --------------------------------------------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i + 1, i + 1] += 200
        h[i, i + 1] = h[i + 1, i] = -400 * x[i]
    return h


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logsumexp_hessian(x):
    s = np.exp(x - np.max(x))
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


QA = RNG.standard_normal((5, 5))


def quadratic(x):
    return x @ QA @ x


CLASSICS = [
    pytest.param(rosenbrock, rosenbrock_hessian, RNG.uniform(-1.5, 1.5, 6), id="rosenbrock"),
    pytest.param(quadratic, lambda x: QA + QA.T, RNG.standard_normal(5), id="quadratic"),
    pytest.param(logsumexp, logsumexp_hessian, RNG.standard_normal(7), id="logsumexp"),
]


@pytest.mark.parametrize("fun, hess, x", CLASSICS)
def test_hessian_closed_form(fun, hess, x):
    want = hess(x)
    np.testing.assert_allclose(fg.hessian(fun)(x), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fwd_over_rev_hessian(fun, x), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fg.jacobian(fg.grad(fun))(x), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("fun, hess, x", CLASSICS)
def test_hvp_equals_hessian_times_v(fun, hess, x):
    v = RNG.standard_normal(x.shape)
    hv = fg.hvp(fun, (x,), (v,))
    np.testing.assert_allclose(hv, fg.hessian(fun)(x) @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hv, hess(x) @ v, rtol=1e-10, atol=1e-10)
    assert isinstance(hv, np.ndarray) and hv.shape == x.shape and hv.dtype == np.float64


def test_hvp_of_several_arguments():
    def f(x, y):
        return np.sum(np.sin(x) * y**2) + np.sum(x**3)

    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    vx, vy = RNG.standard_normal(4), RNG.standard_normal(4)
    hx, hy = fg.hvp(f, (x, y), (vx, vy))
    # Closed form: d²f/dx² = diag(-sin(x) y² + 6x), d²f/dxdy = diag(2 y cos(x)), d²f/dy² =
    # diag(2 sin(x)).
    np.testing.assert_allclose(hx, (-np.sin(x) * y**2 + 6 * x) * vx + 2 * y * np.cos(x) * vy)
    np.testing.assert_allclose(hy, 2 * y * np.cos(x) * vx + 2 * np.sin(x) * vy)


def test_hvp_keeps_float32():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    hv = fg.hvp(lambda x: np.sum(np.sin(x) ** 3), (x,), (np.ones(5, np.float32),))
    assert hv.dtype == np.float32
    want = fg.hessian(lambda x: np.sum(np.sin(x) ** 3))(x.astype(np.float64)) @ np.ones(5)
    np.testing.assert_allclose(hv, want, rtol=1e-5)


def test_scalar_higher_derivatives_every_mix():
    f = np.sin
    x = 0.7
    d1 = fg.deriv(f)
    assert fg.deriv(d1)(x) == pytest.approx(-np.sin(x))
    assert fg.grad(fg.grad(fg.grad(f)))(x) == pytest.approx(-np.cos(x))
    assert _jvp_t(fg.grad(f), x, 1.0) == pytest.approx(-np.sin(x))  # fwd over rev
    assert fg.grad(lambda x: _jvp_t(f, x, 1.0))(x) == pytest.approx(-np.sin(x))  # rev over fwd
    assert _jvp_t(lambda x: _jvp_t(f, x, 1.0), x, 1.0) == pytest.approx(-np.sin(x))  # fwd/fwd
    third = _jvp_t(lambda x: fg.grad(lambda y: _jvp_t(f, y, 1.0))(x), x, 1.0)
    assert third == pytest.approx(-np.cos(x))


def test_jacobian_of_grad_and_grad_of_jvp_arrays():
    def f(x):
        return np.sum(np.tanh(x[:, None] * x[None, :]))

    x, v = RNG.standard_normal(5), RNG.standard_normal(5)
    h = fg.jacobian(fg.grad(f))(x)
    np.testing.assert_allclose(h, h.T, atol=1e-12)
    np.testing.assert_allclose(fg.grad(lambda x: _jvp_t(f, x, v))(x), h @ v, atol=1e-10)
    np.testing.assert_allclose(_jvp_t(fg.grad(f), x, v), h @ v, atol=1e-10)


# --------------------------------------------------------------------------------------------------
# Perturbation confusion: d/dx [x · d/dy (x + y)] = 1 at any point, in every mix of modes
# --------------------------------------------------------------------------------------------------


def _inner_fwd(x):
    return lambda y0: _jvp_t(lambda y: x + y, y0, 1.0)


def _inner_rev(x):
    return fg.grad(lambda y: x + y)


@pytest.mark.parametrize("x, y", [(1.0, 1.0), (3.0, -2.0), (0.0, 5.5)])
@pytest.mark.parametrize("outer", ["fwd", "rev"])
@pytest.mark.parametrize("inner", ["fwd", "rev"])
def test_perturbation_confusion(outer, inner, x, y):
    make = _inner_fwd if inner == "fwd" else _inner_rev

    def g(x):
        return x * make(x)(y)

    d = _jvp_t(g, x, 1.0) if outer == "fwd" else fg.grad(g)(x)
    assert d == 1.0


def test_perturbation_confusion_nontrivial():
    # d/dx [x · d/dy (x · y)] = d/dx x² = 2x; confusion would add the outer tangent to the inner.
    for outer in (lambda g, x: _jvp_t(g, x, 1.0), lambda g, x: fg.grad(g)(x)):
        for inner in (lambda h, y: _jvp_t(h, y, 1.0), lambda h, y: fg.grad(h)(y)):

            def g(x, inner=inner):
                return x * inner(lambda y: x * y, 2.0)

            assert outer(g, 3.0) == pytest.approx(6.0)


# --------------------------------------------------------------------------------------------------
# Fusion and memory of hvp (forward-over-reverse)
# --------------------------------------------------------------------------------------------------


def gauss_sum(x):
    return np.sum(np.exp(-((x[:, None] - x[None, :]) ** 2)))


def gauss_hvp_reference(x, v):
    d = x[:, None] - x[None, :]
    e = np.exp(-(d**2))
    # H = Σ_ij φ''(d_ij)(e_i - e_j)(e_i - e_j)ᵀ with φ(d) = exp(-d²), φ'' = (4d² - 2) φ, even:
    # (Hv)_k = 2 Σ_j φ''(d_kj)(v_k - v_j).
    return np.sum((8 * d**2 - 4) * e * (v[:, None] - v[None, :]), axis=1)


def test_hvp_gaussian_kernel_sum_matches_reference():
    x, v = RNG.standard_normal(60), RNG.standard_normal(60)
    hv = fg.hvp(gauss_sum, (x,), (v,))
    np.testing.assert_allclose(hv, fg.hessian(gauss_sum)(x) @ v, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(hv, gauss_hvp_reference(x, v), rtol=1e-9, atol=1e-9)


def test_hvp_gaussian_kernel_sum_memory_no_n2_array():
    n = 2000
    x, v = RNG.standard_normal(n), RNG.standard_normal(n)
    # Compile outside the measurement, at full size: the parallel variant of a kernel is only
    # built for large domains, and numba's compiler would count in the peak.
    fg.hvp(gauss_sum, (x,), (v,))
    with track_allocations() as report:
        hv = fg.hvp(gauss_sum, (x,), (v,))
    # An N×N float64 array would be 32 MB; freed temporaries count in peak_bytes.
    assert report.peak_bytes < n * n * 8 / 4, report.peak_bytes
    assert not report.arrays_at_least(n * n)
    sub = slice(0, 50)
    np.testing.assert_allclose(
        hv[sub],
        np.sum(
            np.exp(-((x[sub, None] - x[None, :]) ** 2))
            * (8 * (x[sub, None] - x[None, :]) ** 2 - 4)
            * (v[sub, None] - v[None, :]),
            axis=1,
        ),
        rtol=1e-8,
        atol=1e-8,
    )


def test_hvp_gaussian_kernel_sum_is_fused():
    n = 300
    x, v = RNG.standard_normal(n), RNG.standard_normal(n)
    with recording() as rec:
        fg.hvp(gauss_sum, (x,), (v,))
    kernels = [e for e in rec if e["event"] == "kernel"]
    big = [k for k in kernels if int(np.prod(k["domain"])) >= n * n]
    assert len(big) == 1, kernels  # one pass over the N×N domain


# --------------------------------------------------------------------------------------------------
# checkpoint
# --------------------------------------------------------------------------------------------------


def test_checkpoint_same_gradient_and_recomputes_forward():
    calls = []

    def block(x):
        calls.append(1)
        return np.tanh(np.exp(np.sin(x)) * x)

    def plain(x):
        return np.sum(block(x) ** 2)

    ckpt_block = fg.checkpoint(block)

    def ckpt(x):
        return np.sum(ckpt_block(x) ** 2)

    x = RNG.standard_normal(7)
    calls.clear()
    g_plain = fg.grad(plain)(x)
    assert len(calls) == 1
    calls.clear()
    g_ckpt = fg.grad(ckpt)(x)
    assert len(calls) == 2  # the forward pass, then again inside the backward pass
    np.testing.assert_allclose(g_ckpt, g_plain, rtol=1e-13)


def test_checkpoint_second_order():
    f = fg.checkpoint(lambda x: np.sum(np.exp(np.sin(x))))

    def g(x):
        return np.sum(np.exp(np.sin(x)))

    x, v = RNG.standard_normal(5), RNG.standard_normal(5)
    np.testing.assert_allclose(fg.hvp(f, (x,), (v,)), fg.hessian(g)(x) @ v, rtol=1e-12)
    np.testing.assert_allclose(fg.hessian(f)(x), fg.hessian(g)(x), rtol=1e-12)


def test_jvp_through_checkpoint():
    g = lambda x: np.sum(np.exp(x) * x)  # noqa: E731
    f = fg.checkpoint(g)
    x, v = np.linspace(-1, 1, 3), np.array([1.0, -2.0, 0.5])
    out, tangent = fg.jvp(f, (x,), (v,))
    ref_out, ref_tangent = fg.jvp(g, (x,), (v,))
    np.testing.assert_allclose(out, ref_out, rtol=1e-14)
    np.testing.assert_allclose(tangent, ref_tangent, rtol=1e-14)
    np.testing.assert_allclose(tangent, np.dot(np.exp(x) * (1 + x), v), rtol=1e-12)


@pytest.mark.parametrize(
    "inner, pick",
    [
        (lambda x: {"a": np.sum(x**2)}, lambda o: o["a"]),
        (lambda x: [np.sum(x**2), x], lambda o: o[0] + np.sum(o[1])),
        (lambda x: {"a": x**2, "b": (np.sin(x), None)}, lambda o: np.sum(o["a"] * o["b"][0])),
    ],
    ids=["dict", "list", "nested"],
)
def test_checkpoint_of_a_pytree_output(inner, pick):
    # a dict output came back untraced: a zero gradient and a zero jvp
    x = np.array([1.0, 2.0, 3.0])
    want = fg.grad(lambda x: pick(inner(x)))(x)
    np.testing.assert_allclose(fg.grad(lambda x: pick(fg.checkpoint(inner)(x)))(x), want)
    _, t = fg.jvp(lambda x: pick(fg.checkpoint(inner)(x)), (x,), (np.ones(3),))
    np.testing.assert_allclose(t, want.sum())
    assert fg.checkpoint(inner)(x).__class__ is inner(x).__class__


def test_checkpoint_passes_keyword_arguments_as_constants():
    x = np.array([1.0, 2.0])
    f = fg.checkpoint(lambda x, k=1.0: np.sum(x**2 * k))
    np.testing.assert_allclose(fg.grad(lambda x: f(x, k=3.0))(x), 6 * x)
    with pytest.raises(TypeError, match=r"keyword argument 'k' is traced"):
        fg.grad(lambda x: f(x, k=x[0]))(x)


def test_second_order_through_a_0d_array_constant():
    # an inner gradient's first cotangent a broadcast of a 0-d array (a * c): the outer trace
    # boxed the BroadcastThunk itself, and grad(grad) refused it as an output (gamma.logpdf's
    # Hessian in its shape)
    c = np.array(0.7)

    def f(a):
        return a * c + a * a

    assert fg.grad(fg.grad(f))(3.0) == pytest.approx(2.0)
    assert fg.hessian(f)(3.0) == pytest.approx(2.0)
    g = fg.grad(lambda x: np.sum(fg.grad(lambda a: np.sum(a * c + a * a))(x) ** 2))
    np.testing.assert_allclose(g(np.array([3.0, 1.0])), [26.8, 10.8])
    st = pytest.importorskip("scipy.stats")
    sp = pytest.importorskip("scipy.special")
    h = fg.hessian(lambda a: st.gamma.logpdf(0.7, a))(1.5)
    assert h == pytest.approx(-sp.polygamma(1, 1.5), rel=1e-10)


def test_hessian_with_a_tuple_of_argnums_gives_its_blocks():
    # H[i][j] = d2 f / d arg_i d arg_j, as JAX (argnums=(0, 1) raised, (0,) gave a wrong shape)
    def f(x, y):
        return np.sum(x**3 * y)

    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (h00, h01), (h10, h11) = fg.hessian(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(h00, np.diag(6 * x * y))
    np.testing.assert_allclose(h01, np.diag(3 * x**2))
    np.testing.assert_allclose(h10, np.diag(3 * x**2))
    np.testing.assert_allclose(h11, np.zeros((2, 2)))
    ((only,),) = fg.hessian(f, argnums=(0,))(x, y)
    np.testing.assert_allclose(only, fg.hessian(f, argnums=0)(x, y))


def test_a_traced_cotangent_added_to_an_accumulated_plain_one():
    # two plain cotangents summed into an owned array, then a traced one (second order): it was
    # added in place, and np.add(..., out=) of a traced value raised
    c1, c2 = np.array([[1.0], [2.0]]), np.array([[3.0], [4.0]])

    def f(v):
        y = np.reshape(v, (3, 1))
        w = np.sin(v[:2])[:, None]
        return (
            np.sum(np.diff(y, axis=0) * w) + np.sum(np.diff(y, axis=0) * c2) + np.sum(y[:-1] * c1)
        )

    check_grads(f, ("rev", "fwd"), order=2)(np.array([0.3, 0.7, 0.1]))


def test_hvp_through_indexing_a_concatenation_against_a_broadcast():
    # forward over reverse: the reverse pass's cotangent of z[0] is a BroadcastThunk, the primal
    # of a forward tracer, and z[...] of it raised "'BroadcastThunk' object is not subscriptable"
    def f(x):
        z = np.concatenate([x, x * 2.0])
        return np.sum(z[0] * np.ones(4) + z[1] * np.ones(4) * x[0])

    x, v = np.array([1.0, 2.0]), np.array([1.0, 0.5])
    np.testing.assert_allclose(fg.hvp(f, (x,), (v,)), fg.hessian(f)(x) @ v, rtol=1e-13)


def test_jacobian_inside_grad_on_the_lazy_path():
    # (the tests run on the lazy path) the inner function's outputs are lazy there: jacobian
    # refused them as "not arrays"
    xa = np.array([0.5, 1.5, -1.0])
    f = lambda x: np.sum(fg.jacobian(lambda y: np.sin(x * y))(xa))  # noqa: E731
    want = np.sum(np.cos(1.3 * xa) - 1.3 * xa * np.sin(1.3 * xa))
    assert fg.grad(f)(1.3) == pytest.approx(want, rel=1e-12)


def test_checkpoint_of_a_layer_closing_over_traced_parameters():
    # a checkpointed layer reading the parameters being differentiated from its closure (the
    # usual way to write one): grad raised a "leaked tracer" error and jvp returned a tracer as
    # the tangent. The closure's arrays and traced values are inputs now, as JAX converts them.
    w, h0 = np.array([0.5, -1.5]), np.array([0.3, 0.8])

    def loss(w):
        h1 = np.sin(w) * h0
        return np.sum(fg.checkpoint(lambda h: np.tanh(w * h))(h1))

    def plain(w):
        return np.sum(np.tanh(w * np.sin(w) * h0))

    np.testing.assert_allclose(fg.grad(loss)(w), fg.grad(plain)(w), rtol=1e-14)
    np.testing.assert_allclose(fg.hessian(loss)(w), fg.hessian(plain)(w), rtol=1e-13)
    dot = fg.jvp(loss, (w,), (np.ones(2),))[1]
    assert isinstance(dot, np.ndarray | float | np.floating)
    np.testing.assert_allclose(dot, fg.jvp(plain, (w,), (np.ones(2),))[1], rtol=1e-14)
    check_grads(loss, ("rev", "fwd"), order=2)(w)


def test_checkpoint_pullback_reads_its_closure_arrays_as_they_were():
    def make():
        c = np.array([1.0, 2.0])
        return (lambda x: fg.checkpoint(lambda x: np.sum(np.sin(x * c)))(x)), c

    g, c = make()
    x = np.array([0.5, -1.5])
    _, pullback = fg.vjp(g, x)
    c *= 10  # written before the pullback runs: it still sees [1, 2]
    np.testing.assert_allclose(pullback(1.0)[0], np.cos(x * [1.0, 2.0]) * [1.0, 2.0])

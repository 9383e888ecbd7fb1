"""Complex numbers: one convention (JAX's and autograd's) for every rule.

The cotangent of a complex ``z = x + iy`` for a real loss ``L`` is ``∂L/∂x - i ∂L/∂y``; a vjp is
the transpose of the jvp for the pairing ``Re(Σ u·v)`` (no conjugate), so a holomorphic ``f``
gives ``ȳ·f'(z)``. Checked by finite differences of the real and imaginary parts (the
``check_rrule``/``check_frule``/``check_grads`` checkers and ``_fd_cotangent`` below) and by
hand-derived values; JAX, when it is installed, only confirms.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.lazy.engines import numba_engine
from fusegrad.rules.elementwise import astype
from fusegrad.tangents import ProjectTo, unthunk
from fusegrad.testing import check_frule, check_grads, check_rrule

RNG = np.random.default_rng(20261201)


def crandn(*shape, rng=RNG):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _fd_cotangent(loss, z, h=1e-6):
    """``∂L/∂x - i ∂L/∂y`` of the real ``loss`` at the complex array ``z``, central differences."""
    z = np.asarray(z, complex)
    out = np.zeros(z.shape, complex)
    for idx in np.ndindex(z.shape):
        e = np.zeros(z.shape, complex)
        e[idx] = 1.0
        dx = (loss(z + h * e) - loss(z - h * e)) / (2 * h)
        dy = (loss(z + 1j * h * e) - loss(z - 1j * h * e)) / (2 * h)
        out[idx] = dx - 1j * dy
    return out


# ---------------------------------------------------------------- the three numbers of issue 14


def test_vjp_of_a_holomorphic_function_is_ct_times_the_derivative():
    y, pullback = fg.vjp(np.exp, 1 + 2j)
    (g,) = pullback(1.0)
    assert g == pytest.approx(np.exp(1 + 2j), rel=1e-14)
    (g,) = pullback(0.5 - 1j)
    assert g == pytest.approx((0.5 - 1j) * np.exp(1 + 2j), rel=1e-14)


def test_grad_of_abs_squared_is_twice_the_conjugate():
    assert fg.grad(lambda z: np.abs(z) ** 2)(1 + 2j) == pytest.approx(2 - 4j, rel=1e-14)
    z = np.array([1 + 2j, -0.5 + 0.25j, 3.0 + 0j])
    g = fg.grad(lambda z: np.sum(np.abs(z) ** 2))(z)
    np.testing.assert_allclose(g, 2 * np.conj(z), rtol=1e-14)


def test_grad_of_a_composition_is_real_when_the_truth_is():
    # |exp(z)|² = exp(2x): the derivative is 2e^{2x} along x and 0 along y.
    g = fg.grad(lambda z: np.abs(np.exp(z)) ** 2)(1 + 2j)
    assert g == pytest.approx(2 * np.exp(2.0), rel=1e-13)
    assert abs(g.imag) < 1e-12


def test_holomorphic_grad_and_jacobian_are_the_complex_derivative():
    z = 1 + 2j
    assert fg.grad(np.sin, holomorphic=True)(z) == pytest.approx(np.cos(z), rel=1e-14)
    assert fg.grad(lambda z: np.exp(z) * z**2, holomorphic=True)(z) == pytest.approx(
        np.exp(z) * (z**2 + 2 * z), rel=1e-14
    )
    zs = np.array([1 + 2j, 0.5 - 1j])
    jac = fg.jacobian(lambda z: z**2 * z[::-1], holomorphic=True)(zs)
    want = np.array([[2 * zs[0] * zs[1], zs[0] ** 2], [zs[1] ** 2, 2 * zs[0] * zs[1]]])
    np.testing.assert_allclose(jac, want, rtol=1e-14)
    # A complex output without holomorphic=True is an error, as in JAX.
    with pytest.raises(TypeError, match="holomorphic=True"):
        fg.grad(np.sin)(z)
    # The derivative of a composition through a non-holomorphic step is still the transpose
    # with ct = 1: d/dz (e^z conj(z)) pulls 1 back to e^z conj(z) + conj(e^z).
    g = fg.grad(lambda z: np.exp(z) * np.conj(z), holomorphic=True)(z)
    assert g == pytest.approx(np.exp(z) * np.conj(z) + np.conj(np.exp(z)), rel=1e-14)


# ---------------------------------------------------------------- the non-holomorphic parts


def test_conj_real_imag_angle_by_hand():
    z = np.array([1 + 2j, -0.5 + 0.25j, 0.3 - 2.0j])
    ct = np.array([0.7, -1.1, 2.0])
    cases = {
        "conj": (np.conj, ct + 0.5j, np.conj(ct + 0.5j)),
        "real": (np.real, ct, ct + 0j),
        "imag": (np.imag, ct, -1j * ct),
        ".real": (lambda z: z.real, ct, ct + 0j),
        ".imag": (lambda z: z.imag, ct, -1j * ct),
        ".conj()": (lambda z: z.conj(), ct + 0.5j, np.conj(ct + 0.5j)),
        "angle": (np.angle, ct, -1j * ct / z),
        "angle deg": (lambda z: np.angle(z, deg=True), ct, -1j * ct / z * 180 / np.pi),
        "abs": (np.abs, ct, ct * np.conj(z) / np.abs(z)),
    }
    for name, (f, c, want) in cases.items():
        y, pullback = fg.vjp(f, z)
        np.testing.assert_allclose(np.asarray(y), f(z), rtol=1e-14, err_msg=name)
        (g,) = pullback(c)
        assert np.iscomplexobj(g), name
        np.testing.assert_allclose(g, want, rtol=1e-13, err_msg=name)


def test_forward_rules_of_the_non_holomorphic_parts_by_hand():
    z = np.array([1 + 2j, -0.5 + 0.25j])
    v = np.array([0.3 - 1j, 2.0 + 0.5j])
    cases = {
        "conj": (np.conj, np.conj(v)),
        "real": (np.real, v.real),
        "imag": (np.imag, v.imag),
        "angle": (np.angle, np.imag(v / z)),
        "abs": (np.abs, np.real(np.conj(z) * v) / np.abs(z)),
        "abs**2": (lambda z: np.abs(z) ** 2, 2 * np.real(np.conj(z) * v)),
    }
    for name, (f, want) in cases.items():
        _, t = fg.jvp(f, (z,), (v,))
        assert np.iscomplexobj(t) == np.iscomplexobj(want), name
        np.testing.assert_allclose(t, want, rtol=1e-13, err_msg=name)


def test_a_complex_tangent_of_a_real_primal_is_an_error():
    # It would be cast to real, silently dropping its imaginary part; JAX raises too.
    with pytest.raises(TypeError, match="tangent is complex but its primal is real"):
        fg.jvp(np.sin, (np.ones(2),), (np.ones(2) * 1j,))
    with pytest.raises(TypeError, match="x.astype\\(complex\\)"):
        fg.jvp(np.sin, (1.0,), (1j,))
    _, t = fg.jvp(np.sin, (1.0 + 0j,), (1.0,))  # a real tangent of a complex primal is fine
    assert t == pytest.approx(np.cos(1.0))


def test_real_inputs_of_the_complex_parts():
    x = np.array([2.0, -3.0, 0.5])
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(np.real(x)))(x), np.ones(3))
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(x.real * x))(x), 2 * x)
    g = fg.grad(lambda x: np.sum(np.imag(x) + np.angle(x) + x))(x)
    np.testing.assert_array_equal(g, np.ones(3))  # imag and angle are constant on real x
    _, t = fg.jvp(lambda x: np.imag(x) + np.angle(x), (x,), (np.ones(3),))
    np.testing.assert_array_equal(t, np.zeros(3))


def test_abs_at_zero_follows_jax():
    assert fg.grad(np.abs)(0j) == 0
    _, t = fg.jvp(np.abs, (0j,), (1 + 1j,))
    assert t == 0


def test_complex_cotangents_project_onto_real_primals():
    # A real x used in a complex computation gets Re(cotangent): d Re(c x)/dx = Re(c).
    c = 2.0 - 3.0j
    assert fg.grad(lambda x: np.real(c * x))(1.5) == pytest.approx(2.0)
    assert fg.grad(lambda x: np.imag(c * x))(1.5) == pytest.approx(-3.0)
    x = np.array([1.0, 2.0])
    g = fg.grad(lambda x: np.sum(np.abs(x * (1 + 1j)) ** 2))(x)
    np.testing.assert_allclose(g, 4 * x)
    assert not np.iscomplexobj(g)
    np.testing.assert_array_equal(ProjectTo(np.ones(2))(np.array([1 + 2j, 3 - 1j])), [1.0, 3.0])
    got = ProjectTo(np.ones(2, complex))(np.array([1.0, 3.0]))
    assert got.dtype == np.complex128


def test_the_readme_gradient_descent_line():
    target = np.array([1 + 1j, -2 + 0.5j])

    def loss(z):
        return np.sum(np.abs(z - target) ** 2)

    z = np.zeros(2, complex)
    for _ in range(100):
        z -= 0.1 * np.conj(fg.grad(loss)(z))
    np.testing.assert_allclose(z, target, atol=1e-8)


# ---------------------------------------------------------------- every rule family


HOLOMORPHIC_UNARY = [
    np.negative, np.positive, np.square, np.sqrt, np.reciprocal, np.exp, np.expm1, np.log,
    np.log2, np.log10, np.log1p, np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan,
    np.sinh, np.cosh, np.tanh, np.arcsinh, np.arccosh, np.arctanh, np.exp2,
]  # fmt: skip
HOLOMORPHIC_BINARY = [np.add, np.subtract, np.multiply, np.divide, np.power]
NON_HOLOMORPHIC = [np.absolute, np.conjugate, np.real, np.imag, np.angle]


def _z(shape, seed):
    rng = np.random.default_rng(seed)
    # |z| in [0.5, 1.2], away from 0 and from both axes (the branch cuts of log, sqrt, arc*).
    r = rng.uniform(0.5, 1.2, shape)
    theta = (rng.uniform(0.3, 1.2, shape) + rng.choice([0, 1.6], shape)) * rng.choice(
        [-1, 1], shape
    )
    return r * np.exp(1j * theta)


@pytest.mark.parametrize("f", HOLOMORPHIC_UNARY + NON_HOLOMORPHIC, ids=lambda f: f.__name__)
def test_elementwise_rules_on_complex_inputs(f, engine):
    z = _z((2, 3), 1)
    check_rrule(f, z)
    check_rrule(f, z.astype(np.complex64))
    check_frule(f, z)
    check_grads(lambda z: f(z) * (1 + 0.5j), modes=("rev", "fwd"), order=2)(z[0])


@pytest.mark.parametrize("f", HOLOMORPHIC_BINARY, ids=lambda f: f.__name__)
def test_binary_elementwise_rules_on_complex_and_mixed_inputs(f, engine):
    a, b = _z((2, 3), 2), _z((3,), 3)
    check_rrule(f, a, b)
    check_frule(f, a, b)
    check_rrule(f, a, np.abs(b))  # a real argument gets a real cotangent
    check_rrule(f, np.abs(a), b)


def test_where_astype_and_scalars(engine):
    z, w = _z((4,), 4), _z((4,), 5)
    c = np.array([True, False, True, False])
    check_rrule(np.where, c, z, w)
    check_frule(np.where, c, z, w)
    check_rrule(astype, z.real, "complex128")
    check_rrule(astype, z, "complex64")
    check_rrule(np.exp, 0.3 - 0.2j)
    check_rrule(np.abs, complex(0.3, -0.2))
    check_rrule(np.angle, z, True)


@pytest.mark.parametrize(
    "f",
    [
        np.sum,
        np.mean,
        np.prod,
        np.var,
        np.std,
        np.cumsum,
        np.cumprod,
        np.linalg.norm,
        lambda z: np.sum(z, axis=0),
        lambda z: np.var(z, axis=1, ddof=1),
        lambda z: np.std(z, axis=0, keepdims=True),
        lambda z: np.linalg.norm(z, axis=1),
        lambda z: np.linalg.norm(z, ord=1, axis=0),
        lambda z: np.linalg.norm(z, ord=np.inf, axis=1),
        lambda z: np.linalg.norm(z, ord=3, axis=1),
        lambda z: np.linalg.norm(z, "nuc"),
        lambda z: np.linalg.norm(z, 2),
        lambda z: np.diff(z, axis=1),
        lambda z: np.sort(z, axis=1),
    ],
    ids=lambda f: getattr(f, "__name__", "f"),
)
def test_reductions_and_scans_on_complex_inputs(f, engine):
    z = _z((3, 4), 6)
    check_grads(lambda z: f(z) * (0.5 - 1j), modes=("rev", "fwd"))(z)
    check_grads(lambda z: f(z) * (0.5 - 1j), modes=("rev",), order=2)(z)  # rules' own rules
    if getattr(f, "__name__", "") != "<lambda>":
        check_rrule(f, z)
        check_frule(f, z)


def test_var_of_a_complex_value_is_the_mean_squared_modulus(engine):
    z = _z((3, 4), 7)
    for f in (np.var, np.std):
        y = fg.value_and_grad(f)(z)[0]
        assert y == pytest.approx(f(z), rel=1e-13)

        def loss(z, f=f):
            return np.sum(f(z, axis=1))

        np.testing.assert_allclose(fg.grad(loss)(z), _fd_cotangent(loss, z), atol=1e-7)


def _hermitian(n, seed):
    a = crandn(n, n, rng=np.random.default_rng(seed))
    return a @ a.conj().T + n * np.eye(n)


PRODUCTS = {
    "matmul": (np.matmul, ((2, 3), (3, 2))),
    "matmul vec": (np.matmul, ((3,), (3, 2))),
    "dot": (np.dot, ((2, 3), (3,))),
    "inner": (np.inner, ((2, 3), (4, 3))),
    "vdot": (np.vdot, ((2, 3), (2, 3))),
    "outer": (np.outer, ((3,), (2,))),
    "tensordot": (lambda a, b: np.tensordot(a, b, 1), ((2, 3), (3, 2))),
    "einsum": (lambda a, b: np.einsum("ij,jk->ki", a, b), ((2, 3), (3, 4))),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_on_complex_inputs(name):
    f, shapes = PRODUCTS[name]
    a, b = crandn(*shapes[0]), crandn(*shapes[1])
    check_grads(f, modes=("rev", "fwd"))(a, b)
    check_grads(f, modes=("rev",))(a.real, b)  # real and complex operands mixed
    if name in ("matmul", "dot", "inner", "vdot", "outer"):
        check_rrule(f, a, b)
        check_frule(f, a, b)


def test_vdot_conjugates_its_first_argument_by_hand():
    a, b = crandn(3), crandn(3)
    ga, gb = fg.vjp(np.vdot, a, b)[1](1.0)
    np.testing.assert_allclose(ga, np.conj(b))  # d Σ conj(a) b: Re-part along a is conj-linear
    np.testing.assert_allclose(gb, np.conj(a))


SOLVERS = {
    "det": lambda a: np.linalg.det(a),
    "inv": lambda a: np.linalg.inv(a),
    "solve": lambda a: np.linalg.solve(a, np.array([1.0 - 1j, 2.0, 0.5j])),
    "slogdet": lambda a: np.linalg.slogdet(a)[1],
    "slogdet sign": lambda a: np.linalg.slogdet(a)[0],
    "trace": lambda a: np.trace(a),
}


@pytest.mark.parametrize("name", SOLVERS)
def test_solvers_on_complex_inputs(name):
    a = crandn(3, 3) + 3 * np.eye(3)
    check_grads(SOLVERS[name], modes=("rev", "fwd"))(a)


def test_det_is_holomorphic_by_hand():
    a = crandn(3, 3) + 3 * np.eye(3)
    (g,) = fg.vjp(np.linalg.det, a)[1](1.0)
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-12)


def _sym_input(f):
    # Hermitian-input functions see (A + Aᴴ)/2: the finite differences must too.
    return lambda a: f((a + np.conj(np.swapaxes(a, -1, -2))) / 2)


HERMITIAN = {
    "cholesky": lambda a: np.linalg.cholesky(a),
    "cholesky upper": lambda a: np.linalg.cholesky(a, upper=True),
    "eigh values": lambda a: np.linalg.eigh(a)[0],
    # |V|² does not depend on each eigenvector's phase, which LAPACK chooses.
    "eigh |vectors|²": lambda a: np.abs(np.linalg.eigh(a)[1]) ** 2,
}


@pytest.mark.parametrize("name", HERMITIAN)
def test_hermitian_input_functions_on_complex_inputs(name):
    a = _hermitian(3, 8)
    check_grads(_sym_input(HERMITIAN[name]), modes=("rev", "fwd"))(a)
    (g,) = fg.vjp(HERMITIAN[name], a)[1](np.ones(np.shape(HERMITIAN[name](a))))
    np.testing.assert_allclose(g, np.conj(g.T), atol=1e-12)  # a Hermitian cotangent


def test_hermitian_cotangent_by_hand():
    # d λ_k / dA along Hermitian directions: ȳ v_k v_kᴴ transposed (JAX's convention).
    a = _hermitian(3, 9)
    w, v = np.linalg.eigh(a)
    (g,) = fg.vjp(lambda a: np.linalg.eigh(a)[0], a)[1](np.array([1.0, 0.0, 0.0]))
    np.testing.assert_allclose(g, np.conj(np.outer(v[:, 0], np.conj(v[:, 0]))), atol=1e-12)


MOVEMENT = {
    "getitem": lambda z: z[1:, ::2],
    "fancy": lambda z: z[np.array([0, 0, 2])],
    "reshape": lambda z: np.reshape(z, (4, 3)),
    "transpose": lambda z: z.T,
    "broadcast": lambda z: np.broadcast_to(z[:, :1], (3, 4)) * z,
    "concatenate": lambda z: np.concatenate([z, 2 * z], axis=1),
    "stack": lambda z: np.stack([z, z * z]),
    "tile": lambda z: np.tile(z, (1, 2)),
    "roll": lambda z: np.roll(z, 1, axis=1),
    "flip": lambda z: np.flip(z, 0),
    "triu": lambda z: np.triu(z),
}


@pytest.mark.parametrize("name", MOVEMENT)
def test_indexing_and_shapes_on_complex_inputs(name, engine):
    check_grads(MOVEMENT[name], modes=("rev", "fwd"))(_z((3, 4), 10))


# ---------------------------------------------------------------- random compositions

UNARY = {
    "exp": np.exp,
    "sin": np.sin,
    "square": np.square,
    "scale": lambda z: (0.7 - 0.4j) * z,
    "shift": lambda z: z + (0.3 + 0.2j),
    "abs": np.abs,
    "abs2": lambda z: np.abs(z) ** 2,
    "conj": np.conj,
    "real": np.real,
    "imag": np.imag,
    ".imag": lambda z: z.imag,
    "angle": np.angle,
    "recip": lambda z: 1 / (z + 3.0),
    "tanh": lambda z: np.tanh(0.5 * z),
}
BINARY = {
    "add": np.add,
    "multiply": np.multiply,
    "sub": np.subtract,
}


@st.composite
def programs(draw):
    """A stack program over the input ``z``: unary ops on the top, binary ops on the top two,
    ``z`` pushed again; the result is the sum of the stack."""
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("u"), st.sampled_from(sorted(UNARY))),
                st.tuples(st.just("b"), st.sampled_from(sorted(BINARY))),
                st.tuples(st.just("z"), st.just("")),
            ),
            min_size=1,
            max_size=7,
        )
    )
    return steps


def run(steps, z, unary=UNARY):
    stack = [z]
    for kind, name in steps:
        if kind == "u":
            stack[-1] = unary[name](stack[-1])
        elif kind == "b" and len(stack) >= 2:
            b, a = stack.pop(), stack.pop()
            stack.append(BINARY[name](a, b))
        elif kind == "z":
            stack.append(z)
    out = stack[0]
    for v in stack[1:]:
        out = out + v
    return out


def _angle_of_an_exact_zero(steps, z):
    """Whether the program takes ``angle`` of an exact 0 (``angle(z - z)``): its derivative
    there is 0 * inf in any AD system, where finite differences see a constant."""
    zeros = []

    def angle(w):
        zeros.append(np.any(w == 0))
        return np.angle(w)

    run(steps, z, {**UNARY, "angle": angle})
    return any(zeros)


def _loss(steps):
    # A real loss that reads both parts of a complex result (and is fine for a real one).
    return lambda z: np.sum(np.real(run(steps, z) * (1.0 - 0.5j)) + np.imag(run(steps, z)) / 4)


def _smooth_fd(loss, z):
    """Finite differences at two steps; None where they disagree (a kink or a branch cut of
    angle close by: the derivative there is not what a rule can be checked against)."""
    g1, g2 = _fd_cotangent(loss, z, 1e-5), _fd_cotangent(loss, z, 1e-6)
    if not (np.all(np.isfinite(g1)) and np.allclose(g1, g2, rtol=1e-4, atol=1e-6)):
        return None
    return g2


@pytest.mark.property
@given(steps=programs(), seed=st.integers(0, 2**16))
def test_random_compositions_against_finite_differences(steps, seed):
    z = _z((2,), seed)
    loss = _loss(steps)
    assume(np.all(np.isfinite(loss(z))) and abs(loss(z)) < 1e6)
    assume(not _angle_of_an_exact_zero(steps, z))  # (z - z: 0 * inf = NaN in AD, as JAX)
    want = _smooth_fd(loss, z)
    assume(want is not None)
    got = fg.grad(loss)(z)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * max(1, np.max(np.abs(want))))
    # Forward mode: the directional derivative of the complex result along v.
    v = np.array([0.6 - 0.8j, -0.3 + 0.1j])
    _, t = fg.jvp(lambda z: run(steps, z), (z,), (v,))
    h = 1e-6
    fd = (np.asarray(run(steps, z + h * v)) - np.asarray(run(steps, z - h * v))) / (2 * h)
    np.testing.assert_allclose(np.asarray(unthunk(t)), fd, rtol=1e-4, atol=1e-5)


@pytest.mark.property
@pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")
@given(steps=programs(), seed=st.integers(0, 2**16))
def test_random_compositions_agree_on_both_engines(steps, seed):
    z = _z((3, 40), seed)  # large enough for kernels
    loss = _loss(steps)
    with fg.use_engine("numpy"):
        want = fg.grad(loss)(z)
    with fg.use_engine("numba"):
        got = fg.grad(loss)(z)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


# ---------------------------------------------------------------- against JAX, when installed


def test_against_jax_when_installed():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    z = _z((3,), 11)
    ct = np.array([0.4, -1.0, 2.0]) + 1j * np.array([1.0, 0.5, -0.3])
    pairs = [
        (np.abs, jnp.abs),
        (np.angle, jnp.angle),
        (np.conj, jnp.conj),
        (np.real, jnp.real),
        (np.imag, jnp.imag),
        (lambda z: np.abs(np.exp(z)) ** 2, lambda z: jnp.abs(jnp.exp(z)) ** 2),
        (lambda z: np.sin(np.conj(z)) * z, lambda z: jnp.sin(jnp.conj(z)) * z),
        (np.var, jnp.var),
        (np.linalg.norm, jnp.linalg.norm),
    ]
    for f, jf in pairs:
        y = f(z)
        c = ct[: np.size(y)].reshape(np.shape(y))
        c = c if np.iscomplexobj(y) else c.real
        (got,) = fg.vjp(f, z)[1](c)
        (want,) = jax.vjp(jf, jnp.asarray(z))[1](jnp.asarray(c))
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)


def test_lazy_variance_of_complex_values_is_real(engine):
    import fusegrad.lazy as fl
    from fusegrad.rules.registry import is_differentiable

    rng = np.random.default_rng(7)
    z = rng.standard_normal((6, 5)) + 1j * rng.standard_normal((6, 5))
    for axis in (None, 0, 1):
        for ddof in (0, 1):
            want = np.var(z, axis=axis, ddof=ddof)
            got = np.asarray(np.var(fl.asarray(z), axis=axis, ddof=ddof))
            assert got.dtype == want.dtype == np.float64
            np.testing.assert_allclose(got, want, rtol=1e-13)
            np.testing.assert_allclose(
                np.asarray(np.std(fl.asarray(z), axis=axis, ddof=ddof)),
                np.std(z, axis=axis, ddof=ddof),
                rtol=1e-13,
            )
    assert not is_differentiable(np.complex128)  # a type as an argument is static


def test_sign_of_complex_values_is_z_over_abs_z():
    # NumPy 2's sign(z) = z/|z|: differentiable away from 0 (it was treated as piecewise
    # constant, a zero gradient); against finite differences in both directions, to order 2
    z = np.array([1 + 2j, -0.5 + 0.3j, 3.0 - 0.1j])
    w = np.array([0.3 - 1j, 2 + 0.5j, -1 + 0j])
    check_grads(lambda v: np.real(np.sum(np.sign(v) * w)), ("rev", "fwd"), order=2)(z)
    # hand-derived: f = Re(Σ w s), s = z/|z|: z̄ = (w - conj(w) conj(s)²) / (2|z|)
    s = z / np.abs(z)
    want = (w - np.conj(w) * np.conj(s) ** 2) / (2 * np.abs(z))
    np.testing.assert_allclose(fg.grad(lambda v: np.real(np.sum(np.sign(v) * w)))(z), want)
    assert fg.grad(lambda v: np.real(np.sum(np.sign(v))))(np.zeros(2, complex)).tolist() == [0, 0]
    assert fg.grad(lambda x: np.sum(np.sign(x)))(np.array([1.0, -2.0])).tolist() == [0.0, 0.0]

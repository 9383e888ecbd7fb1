"""Decomposition rules (fusegrad.rules.decompositions) against finite differences, hand-derived
values and JAX: svd, eig, qr, pinv, and the eigvals/eigvalsh/lstsq/matrix_power/multi_dot/norm
composites."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.testing import check_frule, check_grads, check_rrule

RNG = np.random.default_rng(0)


def well_conditioned(m, n, complex_=False, rng=RNG):
    """A matrix with well-separated singular values (finite differences of singular vectors are
    then accurate)."""
    u, _ = np.linalg.qr(rng.standard_normal((m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    k = min(m, n)
    s = np.zeros((m, n))
    s[range(k), range(k)] = 3.0 + 1.5 * np.arange(k)[::-1]
    a = u @ s @ v.T
    if complex_:
        a = a + 0.3j * rng.standard_normal((m, n))
    return a


TALL, WIDE, SQUARE = well_conditioned(5, 3), well_conditioned(3, 5), well_conditioned(4, 4)
CTALL, CWIDE, CSQUARE = (well_conditioned(*s, complex_=True) for s in [(5, 3), (3, 5), (4, 4)])


def jax_fd_vjp(f, z, ct, h=1e-6):
    """JAX's cotangent of z for the pairing Re(ct · f(z)): dL/dx − i dL/dy (dL/dx if z is real)."""
    cplx = np.iscomplexobj(z)
    g = np.zeros(np.shape(z), complex if cplx else float)

    def loss(v):
        return float(np.real(np.sum(ct * f(v))))

    units = ((1.0, 1.0), (1j, -1j)) if cplx else ((1.0, 1.0),)
    for idx in np.ndindex(np.shape(z)):
        for unit, sign in units:
            e = np.zeros(np.shape(z), complex if cplx else float)
            e[idx] = unit * h
            g[idx] += sign * (loss(z + e) - loss(z - e)) / (2 * h)
    return g


def gauge_free(f):
    """Loss terms that do not depend on the sign/phase of singular- or eigen-vectors."""
    return f


SVD_FUNS = {
    "s": lambda a: np.linalg.svd(a, compute_uv=False),
    "u_abs": lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[0]) ** 2,
    "vh_abs": lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[2]) ** 2,
    "recon": lambda a: (lambda u, s, vh: (u * s**2) @ vh)(*np.linalg.svd(a, full_matrices=False)),
    "projector": lambda a: (lambda u, s, vh: u @ np.conj(u.T))(*np.linalg.svd(a, False)),
}


@pytest.mark.parametrize("name", list(SVD_FUNS))
@pytest.mark.parametrize("a", [TALL, WIDE, SQUARE], ids=["tall", "wide", "square"])
def test_svd_real_both_modes_second_order(name, a):
    check_grads(SVD_FUNS[name], modes=("rev", "fwd"), order=2)(a)


@pytest.mark.parametrize("name", list(SVD_FUNS))
@pytest.mark.parametrize("a", [CTALL, CWIDE, CSQUARE], ids=["tall", "wide", "square"])
def test_svd_complex_jax_convention(name, a):
    f = SVD_FUNS[name]
    y, vjp = fg.vjp(f, a)
    ct = np.random.default_rng(1).standard_normal(np.shape(y))
    if np.iscomplexobj(y):
        ct = ct + 1j * np.random.default_rng(2).standard_normal(np.shape(y))
    np.testing.assert_allclose(vjp(ct)[0], jax_fd_vjp(f, a, ct), rtol=1e-5, atol=1e-6)
    check_grads(f, modes=("fwd",))(a)


def test_svd_rules_directly():
    check_rrule(np.linalg.svd, SQUARE, output_tangent=None, compute_uv=False)
    check_frule(np.linalg.svd, TALL, compute_uv=False)
    check_frule(np.linalg.svd, TALL, full_matrices=False)
    check_frule(np.linalg.svd, SQUARE)  # full_matrices=True of a square matrix


def test_svd_hand_derived():
    """d(Σ s)/dA = U Vᵀ (the nuclear norm); d s_max/dA = u₁ v₁ᵀ."""
    u, s, vh = np.linalg.svd(TALL, full_matrices=False)
    g = fg.grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False)))(TALL)
    np.testing.assert_allclose(g, u @ vh, atol=1e-12)
    g = fg.grad(lambda a: np.linalg.svd(a, compute_uv=False)[0])(TALL)
    np.testing.assert_allclose(g, np.outer(u[:, 0], vh[0]), atol=1e-12)


def test_svd_full_matrices_non_square():
    f = lambda a: np.linalg.svd(a)[1]  # noqa: E731 - only s is used: no extra vectors needed
    check_grads(f, modes=("rev",))(TALL)
    with pytest.raises(ValueError, match="full_matrices=False"):
        fg.grad(lambda a: np.sum(np.linalg.svd(a)[0]))(TALL)


def test_svd_hermitian():
    """hermitian=True reads one triangle (eigh): differentiate it on symmetric matrices."""
    sym = SQUARE + SQUARE.T + 10 * np.eye(4)
    f = lambda a: np.linalg.svd(a + a.T, hermitian=True, compute_uv=False)  # noqa: E731
    check_grads(f, ("rev", "fwd"))(sym)


def _nonsymmetric(n, complex_=False):
    rng = np.random.default_rng(5)
    a = np.diag(np.arange(1.0, n + 1) * 2) + 0.3 * rng.standard_normal((n, n))
    return a + 0.2j * rng.standard_normal((n, n)) if complex_ else a


@pytest.mark.parametrize("complex_", [False, True])
def test_eig(complex_):
    a = _nonsymmetric(4, complex_)
    vals = lambda m: np.linalg.eig(m)[0]  # noqa: E731
    vecs = lambda m: np.abs(np.linalg.eig(m)[1]) ** 2  # noqa: E731 - phase-free
    for f in (vals, vecs, lambda m: np.linalg.eigvals(m) ** 2):
        y, vjp = fg.vjp(f, a)
        ct = np.random.default_rng(3).standard_normal(np.shape(y))
        np.testing.assert_allclose(vjp(ct)[0], jax_fd_vjp(f, a, ct), rtol=1e-5, atol=1e-6)
        check_grads(f, modes=("fwd",))(a)
    if not complex_:
        check_grads(vals, modes=("rev", "fwd"), order=2)(a)


def test_eig_complex_eigenvalues_of_a_real_matrix():
    rot = np.array([[0.0, -2.0, 0.1], [2.0, 0.0, 0.3], [0.2, 0.1, 5.0]])
    f = lambda m: np.abs(np.linalg.eigvals(m)) ** 2  # noqa: E731
    check_grads(f, modes=("rev", "fwd"))(rot)


def test_eigvals_hand_derived():
    """dλ/dA = (left eigenvector)ᵀ (right eigenvector) / (wᵀv); for a triangular matrix the
    eigenvalues are the diagonal, so d(Σλ)/dA = I."""
    a = np.triu(_nonsymmetric(3))
    np.testing.assert_allclose(
        fg.grad(lambda m: np.sum(np.linalg.eigvals(m)))(a), np.eye(3), atol=1e-12
    )


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh_both_uplo(uplo):
    a = SQUARE + SQUARE.T
    f = lambda m: np.linalg.eigvalsh(m, UPLO=uplo)  # noqa: E731
    check_grads(lambda m: f(m + m.T), modes=("rev", "fwd"), order=2)(a)
    # A symmetric cotangent (the rule's convention for symmetric inputs): V diag(w̄) Vᵀ.
    w, v = np.linalg.eigh(a)
    ct = np.arange(4.0)
    np.testing.assert_allclose(fg.vjp(f, a)[1](ct)[0], (v * ct) @ v.T, atol=1e-10)


QR_CASES = [(TALL, "reduced"), (SQUARE, "reduced"), (SQUARE, "complete"), (TALL, "r")]


@pytest.mark.parametrize("a,mode", QR_CASES)
def test_qr_real(a, mode):
    check_grads(lambda m: np.linalg.qr(m, mode=mode)[0] if mode != "r" else np.linalg.qr(m, mode))(
        a
    )
    f = (
        (lambda m: np.linalg.qr(m, mode=mode)[1])
        if mode != "r"
        else (lambda m: np.linalg.qr(m, mode))
    )
    check_grads(f, modes=("rev", "fwd"), order=2)(a)
    check_rrule(np.linalg.qr, a, mode=mode)
    check_frule(np.linalg.qr, a, mode=mode)


@pytest.mark.parametrize("a", [CTALL, CSQUARE], ids=["tall", "square"])
def test_qr_complex(a):
    for i in (0, 1):
        f = lambda m, i=i: np.linalg.qr(m)[i]  # noqa: E731
        y, vjp = fg.vjp(f, a)
        rng = np.random.default_rng(4)
        ct = rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape)
        np.testing.assert_allclose(vjp(ct)[0], jax_fd_vjp(f, a, ct), rtol=1e-5, atol=1e-6)
        check_grads(f, modes=("fwd",))(a)


def test_qr_wide_raises_clearly():
    with pytest.raises(ValueError, match="m >= n"):
        fg.grad(lambda m: np.sum(np.linalg.qr(m)[1]))(WIDE)


@pytest.mark.parametrize("a", [TALL, WIDE, SQUARE], ids=["tall", "wide", "square"])
def test_pinv(a):
    check_rrule(np.linalg.pinv, a)
    check_frule(np.linalg.pinv, a)
    check_grads(np.linalg.pinv, modes=("rev", "fwd"), order=2)(a)


@pytest.mark.parametrize("a", [CTALL, CWIDE], ids=["tall", "wide"])
def test_pinv_complex(a):
    y, vjp = fg.vjp(np.linalg.pinv, a)
    rng = np.random.default_rng(6)
    ct = rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape)
    np.testing.assert_allclose(vjp(ct)[0], jax_fd_vjp(np.linalg.pinv, a, ct), rtol=1e-5, atol=1e-6)
    check_frule(np.linalg.pinv, a)


def test_pinv_of_invertible_is_inverse_gradient():
    """For invertible A, pinv = inv: the same gradient as inv's rule."""
    f1 = fg.grad(lambda m: np.sum(np.sin(np.linalg.pinv(m))))(SQUARE)
    f2 = fg.grad(lambda m: np.sum(np.sin(np.linalg.inv(m))))(SQUARE)
    np.testing.assert_allclose(f1, f2, atol=1e-10)


def test_lstsq():
    b = RNG.standard_normal((5, 2))
    for i in (0, 1, 3):
        check_grads(lambda m, v, i=i: np.linalg.lstsq(m, v)[i], modes=("rev", "fwd"), order=2)(
            TALL, b
        )
    x, res, rank, s = fg.vjp(lambda m: np.linalg.lstsq(m, b), TALL)[0]
    want = np.linalg.lstsq(TALL, b)
    for got, w in zip((x, res, rank, s), want, strict=True):
        np.testing.assert_allclose(got, w, atol=1e-10)
    # 1-d right-hand side: residuals have shape (1,), as NumPy's
    r = fg.vjp(lambda m: np.linalg.lstsq(m, b[:, 0])[1], TALL)[0]
    assert np.shape(r) == (1,)


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(n):
    check_grads(lambda m: np.linalg.matrix_power(m, n), modes=("rev", "fwd"), order=2)(SQUARE / 4)
    np.testing.assert_allclose(
        fg.vjp(lambda m: np.linalg.matrix_power(m, n), SQUARE)[0],
        np.linalg.matrix_power(SQUARE, n),
        rtol=1e-10,
    )


def test_multi_dot():
    a, b, c = RNG.standard_normal(3), RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    f = lambda x, y, z: np.linalg.multi_dot([x, y, z])  # noqa: E731
    check_grads(f, modes=("rev", "fwd"), order=2)(a, b, c)
    np.testing.assert_allclose(fg.vjp(f, a, b, c)[0], np.linalg.multi_dot([a, b, c]))


@pytest.mark.parametrize("ord_", ["nuc", 2, -2, 1, -1, np.inf, -np.inf, "fro"])
def test_matrix_norms_every_order(ord_):
    f = lambda m: np.linalg.norm(m, ord_)  # noqa: E731
    check_grads(f, modes=("rev", "fwd"), order=2)(TALL)
    np.testing.assert_allclose(fg.vjp(f, TALL)[0], np.linalg.norm(TALL, ord_))
    batch = np.stack([TALL, 2 * TALL])
    g = lambda m: np.linalg.norm(m, ord_, axis=(2, 1), keepdims=True)  # noqa: E731
    np.testing.assert_allclose(fg.vjp(g, batch)[0], np.linalg.norm(batch, ord_, (2, 1), True))
    check_grads(g, modes=("rev",))(batch)


def test_matrix_norm_hand_derived():
    """‖A‖₁ is the largest column sum of |A|: its gradient is sign(A) on that column."""
    a = np.array([[1.0, -4.0], [2.0, 3.0]])
    g = fg.grad(lambda m: np.linalg.norm(m, 1))(a)
    np.testing.assert_allclose(g, [[0.0, -1.0], [0.0, 1.0]])
    g = fg.grad(lambda m: np.linalg.norm(m, -2))(np.diag([3.0, 1.0]))
    np.testing.assert_allclose(g, [[0.0, 0.0], [0.0, 1.0]])


@pytest.mark.slow  # JAX compiles each function on first use: tens of seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    funs = [
        (
            lambda a: np.linalg.svd(a, compute_uv=False),
            lambda a: jnp.linalg.svd(a, compute_uv=False),
        ),
        (
            lambda a: (lambda u, s, vh: (u * s**2) @ vh)(*np.linalg.svd(a, full_matrices=False)),
            lambda a: (lambda u, s, vh: (u * s**2) @ vh)(*jnp.linalg.svd(a, full_matrices=False)),
        ),
        (lambda a: np.linalg.qr(a)[0], lambda a: jnp.linalg.qr(a)[0]),
        (lambda a: np.linalg.qr(a)[1], lambda a: jnp.linalg.qr(a)[1]),
        (np.linalg.pinv, jnp.linalg.pinv),
        (lambda a: np.linalg.norm(a, -2), lambda a: jnp.linalg.norm(a, -2)),
    ]
    rng = np.random.default_rng(7)
    for a in (TALL, CTALL):
        for f, jf in funs:
            y, vjp = fg.vjp(f, a)
            ct = rng.standard_normal(np.shape(y))
            if np.iscomplexobj(y):
                ct = ct + 1j * rng.standard_normal(np.shape(y))
            jy, jvjp = jax.vjp(jf, jnp.asarray(a))
            np.testing.assert_allclose(vjp(ct)[0], jvjp(jnp.asarray(ct, jy.dtype))[0], atol=1e-9)
    a = _nonsymmetric(4, True)
    y, vjp = fg.vjp(np.linalg.eigvals, a)
    jy, jvjp = jax.vjp(jnp.linalg.eigvals, jnp.asarray(a))
    ct = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    order = [int(np.argmin(np.abs(np.asarray(jy) - w))) for w in y]  # same eigenvalue order
    jct = np.zeros(4, complex)
    jct[order] = ct
    np.testing.assert_allclose(vjp(ct)[0], jvjp(jnp.asarray(jct))[0], atol=1e-9)


def test_pinv_hermitian_has_the_symmetrised_derivatives():
    # hermitian=True reads one triangle through eigh: its derivatives are symmetrised as eigh's
    # (JAX's convention); they were the general matrix's, not symmetric
    s = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    w = np.arange(9.0).reshape(3, 3)
    g = fg.grad(lambda a: np.sum(np.linalg.pinv(a, hermitian=True) * w))(s)
    general = fg.grad(lambda a: np.sum(np.linalg.pinv(a) * w))(s)
    np.testing.assert_allclose(g, (general + general.T) / 2, rtol=1e-12)
    t = np.arange(9.0).reshape(3, 3)
    dot = fg.jvp(lambda a: np.linalg.pinv(a, hermitian=True), (s,), (t,))[1]
    np.testing.assert_allclose(dot, fg.jvp(np.linalg.pinv, (s,), ((t + t.T) / 2,))[1], rtol=1e-12)


def test_pinv_and_lstsq_gradients_of_a_tall_matrix_form_no_m_by_m_matrix():
    """(I - AP) X is X - A (P X): lstsq of a 300 x 15 system spent 70% of its replay forming
    the 300 x 300 I - AP."""
    from fusegrad.memory import track_allocations

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((400, 5)), rng.standard_normal(400)

    def loss(a):
        return np.sum(np.linalg.lstsq(a, b, rcond=None)[0] ** 2) + np.sum(np.linalg.pinv(a) ** 3)

    with track_allocations() as report:
        g = fg.grad(loss)(a)
    assert report.peak_bytes < 400 * 400 * 8 / 4
    h = 1e-6
    e = rng.standard_normal(a.shape)
    fd = (loss(a + h * e) - loss(a - h * e)) / (2 * h)
    np.testing.assert_allclose(np.sum(g * e), fd, rtol=1e-6)
    # forward mode: the same products regrouped
    _, dot = fg.jvp(loss, (a,), (e,))
    np.testing.assert_allclose(dot, fd, rtol=1e-6)


def test_a_hessian_through_pinv_told_hermitian_is_symmetric_and_flat_off_hermitian():
    """pinv(a, hermitian=True) reads a's Hermitian part, and so does its pullback: it used the
    raw a in (I - AP), so the pullback's derivative had a part along a's anti-Hermitian
    directions and the Hessian was not symmetric (sweep Z2)."""
    rng = np.random.default_rng(1)
    w = np.arange(9.0).reshape(3, 3)
    s = rng.standard_normal((3, 3))
    s = s + s.T
    hess = fg.hessian(lambda a: np.sum(np.sin(np.linalg.pinv(a, hermitian=True)) * w))(s)
    h = hess.reshape(9, 9)
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-9)
    anti = rng.standard_normal((3, 3))
    anti = anti - anti.T
    np.testing.assert_allclose(h @ anti.ravel(), 0.0, atol=1e-8)
    # along Hermitian directions: central differences of the gradient
    e = rng.standard_normal((3, 3))
    e = e + e.T
    grad = fg.grad(lambda a: np.sum(np.sin(np.linalg.pinv(a, hermitian=True)) * w))
    fd = (grad(s + 1e-6 * e) - grad(s - 1e-6 * e)) / 2e-6
    np.testing.assert_allclose((h @ e.ravel()).reshape(3, 3), fd, rtol=1e-5, atol=1e-6)

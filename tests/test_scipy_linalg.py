"""scipy.linalg on traced values: rules of fusegrad.rules.scipy_linalg and fusegrad.scipy.linalg."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import fusegrad as fg
import fusegrad.scipy.linalg as fsl
from fusegrad.scipy import _dispatch
from fusegrad.testing import check_frule, check_grads, check_rrule

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
B = RNG.standard_normal((3, 2))
V = RNG.standard_normal(3)

TRIANGULAR = [
    {"lower": True},
    {"lower": False},
    {"lower": True, "trans": 1},
    {"lower": False, "trans": "T", "unit_diagonal": True},
    {"lower": True, "trans": "C"},
    {"lower": True, "unit_diagonal": True},
]


@pytest.mark.parametrize("rhs", [B, V], ids=["matrix", "vector"])
@pytest.mark.parametrize("kw", TRIANGULAR, ids=str)
def test_solve_triangular(kw, rhs):
    check_rrule(sl.solve_triangular, A, rhs, **kw)
    check_frule(sl.solve_triangular, A, rhs, **kw)
    check_grads(lambda a, r: np.sum(sl.solve_triangular(a, r, **kw) ** 2), ("rev", "fwd"), 2)(
        A, rhs
    )


def test_solve_triangular_reads_one_triangle():
    g = fg.grad(lambda a: np.sum(sl.solve_triangular(a, V, lower=True)))(A)
    assert np.all(np.triu(g, 1) == 0)  # the upper triangle is never read
    g = fg.grad(lambda a: np.sum(sl.solve_triangular(a, V, unit_diagonal=True)))(A)
    assert np.all(np.diagonal(g) == 0) and np.all(np.tril(g) == 0)


def test_lu_factor_rules():
    check_rrule(sl.lu_factor, A)
    check_frule(sl.lu_factor, A)
    p = RNG.permutation(3)  # pivoting: rows out of order
    check_rrule(sl.lu_factor, A[p])


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 3), (2, 5, 3), (2, 3, 5), (4, 1), (1, 4)])
def test_lu_factor_of_rectangular_and_stacked_matrices(shape):
    # SciPy factors (M, N) and stacks of them: L is M×K, U is K×N (K = min(M, N)); a
    # rectangular or stacked input crashed the rules
    a = RNG.standard_normal(shape)
    w = RNG.standard_normal(shape)
    check_grads(lambda x: np.sum(w * sl.lu_factor(x)[0]), ("rev", "fwd"), order=2)(a)
    lu, piv = sl.lu_factor(a)
    got_lu, got_piv = fg.jvp(lambda x: sl.lu_factor(x)[0], (a,), (w,))[0], sl.lu_factor(a)[1]
    np.testing.assert_array_equal(got_lu, lu)
    np.testing.assert_array_equal(got_piv, piv)


def test_sqrtm_of_a_stack_and_with_disp_false():
    m = RNG.standard_normal((2, 3, 3))
    s = m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3)
    check_grads(lambda x: np.sum(sl.sqrtm(x) ** 2), ("rev", "fwd"), order=2)(s)
    per_matrix = [fg.grad(lambda x: np.sum(sl.sqrtm(x)))(s[i]) for i in range(2)]
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(sl.sqrtm(x)))(s), per_matrix)
    # disp=False (deprecated in SciPy 1.17) returns (sqrtm, errest): [0] was sqrtm's first row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        value, g = fg.value_and_grad(lambda x: np.sum(sl.sqrtm(x, disp=False)[0]))(s[0])
        errest = fg.grad(lambda x: sl.sqrtm(x, disp=False)[1])(s[0])
    assert np.all(np.abs(errest) < 1e-10)  # ‖Y Y - A‖²_F / ‖A‖_F: 0 and flat at the root
    np.testing.assert_allclose(value, np.sum(sl.sqrtm(s[0])), rtol=1e-12)
    np.testing.assert_allclose(g, per_matrix[0], rtol=1e-10)


CASES = {
    "lu_solve": (lambda a, r: sl.lu_solve(sl.lu_factor(a), r), (A, B)),
    "lu_solve-trans": (lambda a, r: sl.lu_solve(sl.lu_factor(a), r, trans=1), (A, V)),
    "cho_solve": (lambda a, r: sl.cho_solve(sl.cho_factor(a @ a.T), r), (A, B)),
    "cho_solve-lower": (lambda a, r: sl.cho_solve(sl.cho_factor(a @ a.T, lower=True), r), (A, V)),
    "cholesky": (lambda a: sl.cholesky(a @ a.T), (A,)),
    "cholesky-lower": (lambda a: sl.cholesky(a @ a.T, lower=True), (A,)),
    "inv": (sl.inv, (A,)),
    "det": (sl.det, (A,)),
    "solve": (sl.solve, (A, B)),
    "solve-transposed": (lambda a, r: sl.solve(a, r, transposed=True), (A, V)),
    "solve-pos": (lambda a, r: sl.solve(a @ a.T, r, assume_a="pos"), (A, V)),
    "expm": (lambda a: sl.expm(0.3 * a), (A,)),
    "sqrtm": (lambda a: sl.sqrtm(a @ a.T), (A,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_plain_scipy_linalg_calls_differentiate(name):
    f, args = CASES[name]
    check_grads(lambda *xs: np.sum(np.sin(f(*xs))), ("rev", "fwd"), order=2)(*args)


def test_hand_derived():
    np.testing.assert_allclose(fg.grad(sl.det)(A), sl.det(A) * sl.inv(A).T)
    g = fg.grad(lambda a: np.trace(sl.expm(a)))(A)  # d tr(e^A) = e^{Aᵀ}
    np.testing.assert_allclose(g, sl.expm(A).T, rtol=1e-10)
    s = A @ A.T
    g = fg.grad(lambda a: np.trace(sl.sqrtm(a)))(s)  # d tr(√A) = ½ (√A)⁻ᵀ
    np.testing.assert_allclose(g, 0.5 * np.linalg.inv(sl.sqrtm(s)).T, rtol=1e-8)
    c, low = sl.cho_factor(s)
    gb = fg.grad(lambda r: np.sum(sl.cho_solve((c, low), r)))(V)
    np.testing.assert_allclose(gb, np.linalg.solve(s, np.ones(3)))


def test_values_match_scipy_on_traced_inputs():
    seen = {}

    def f(a):
        seen["lu"] = fg.numpy.stop_gradient(fsl.lu_solve(fsl.lu_factor(a), B))
        seen["chol"] = fg.numpy.stop_gradient(fsl.cholesky(a @ a.T))
        return np.sum(seen["lu"])

    fg.grad(f)(A)
    np.testing.assert_allclose(seen["lu"], sl.lu_solve(sl.lu_factor(A), B))
    np.testing.assert_allclose(seen["chol"], sl.cholesky(A @ A.T))


ASSUME = [None, "gen", "sym", "her", "pos", "positive definite", "diagonal", "tridiagonal",
          "banded", "upper triangular", "lower triangular"]  # fmt: skip


@pytest.mark.parametrize("lower", [False, True])
def test_a_non_symmetric_matrix_reads_the_triangle_scipy_reads(lower):
    """SciPy's cholesky and structured solves ignore some entries; a traced call ignores the
    same ones, so its value is SciPy's even where the ignored entries disagree."""
    spd = A @ A.T + np.eye(3)
    skew = spd + np.triu(RNG.standard_normal((3, 3)), 1)  # the triangles disagree
    w = RNG.standard_normal((3, 3))
    value = fg.value_and_grad(lambda a: np.sum(w * sl.cholesky(a, lower=lower)))(skew)[0]
    np.testing.assert_allclose(value, np.sum(w * sl.cholesky(skew, lower=lower)), rtol=1e-12)
    for assume_a in ASSUME:

        def f(a, assume_a=assume_a):
            return sl.solve(a, V, assume_a=assume_a, lower=lower) @ V

        value, g = fg.value_and_grad(f)(skew)
        np.testing.assert_allclose(value, f(skew), rtol=1e-12, err_msg=str(assume_a))
        check_grads(f, ("rev",), order=1)(skew)


def test_solve_with_assume_a_pos_refuses_a_matrix_that_is_not_positive_definite():
    with pytest.raises(np.linalg.LinAlgError):
        fg.grad(lambda a: np.sum(sl.solve(a, V, assume_a="pos")))(-np.eye(3))
    with pytest.raises(ValueError, match="assume_a"):
        fg.grad(lambda a: np.sum(sl.solve(a, V, assume_a="orthogonal")))(A)


def test_plain_inputs_get_scipys_own_results():
    for name in ("inv", "det", "expm", "cholesky"):
        ours, theirs = getattr(sl, name), _dispatch.scipy_code(getattr(sl, name))
        assert ours is not theirs
        m = A @ A.T if name == "cholesky" else A
        np.testing.assert_array_equal(ours(m), theirs(m))
    lu, piv = sl.lu_factor(A)
    assert piv.dtype == _dispatch.scipy_code(sl.lu_factor)(A)[1].dtype


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jsl = pytest.importorskip("jax.scipy.linalg")
    pairs = [
        (lambda a: np.sum(sl.expm(0.3 * a) ** 2), lambda a: (jsl.expm(0.3 * a) ** 2).sum()),
        (lambda a: np.sum(sl.solve_triangular(a, B, lower=True)),
         lambda a: jsl.solve_triangular(a, B, lower=True).sum()),
        (lambda a: np.sum(sl.lu_solve(sl.lu_factor(a), V) ** 2),
         lambda a: (jsl.lu_solve(jsl.lu_factor(a), V) ** 2).sum()),
        (lambda a: np.sum(sl.cholesky(a @ a.T)), lambda a: jsl.cholesky(a @ a.T).sum()),
    ]  # fmt: skip
    for ours, theirs in pairs:
        np.testing.assert_allclose(fg.grad(ours)(A), np.asarray(jax.grad(theirs)(A)), rtol=1e-8)


C3 = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
W = RNG.standard_normal(4)

# name -> (function, arguments): each matrix builder with SciPy's defaults, batches and dtypes.
STRUCTURED = {
    "toeplitz": (sl.toeplitz, (V, W)),
    "toeplitz-symmetric": (sl.toeplitz, (V,)),
    "toeplitz-hermitian": (sl.toeplitz, (C3,)),
    "toeplitz-complex-row": (sl.toeplitz, (V, C3)),
    "toeplitz-batch": (sl.toeplitz, (RNG.standard_normal((2, 3)), W)),
    "circulant": (sl.circulant, (W,)),
    "circulant-complex": (sl.circulant, (C3,)),
    "circulant-batch": (sl.circulant, (RNG.standard_normal((2, 1, 3)),)),
    "hankel": (sl.hankel, (V, W)),
    "hankel-zeros": (sl.hankel, (C3,)),
    "block_diag": (sl.block_diag, (A, V, np.array([[2.0]]))),
    "block_diag-batch": (sl.block_diag, (RNG.standard_normal((2, 2, 2)), B, C3)),
    "block_diag-empty": (sl.block_diag, (A, np.zeros((2, 0)), W)),
}


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_structured_matrices_match_scipy_and_differentiate(name):
    f, args = STRUCTURED[name]
    for i in range(len(args)):
        got = fg.vjp(lambda x, i=i: f(*args[:i], x, *args[i + 1 :]), args[i])[0]
        want = f(*args)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    check_grads(lambda *xs: np.sin(f(*xs)), ("rev", "fwd"), order=2)(*args)


def test_structured_matrices_hand_derived():
    # Each entry of the first column c[i] is on a diagonal of min(3 - i, 4) entries; r[0] is
    # never read (the corner is c[0]), r[j] is on a diagonal of min(4 - j, 3) entries.
    gc, gr = fg.grad(lambda c, r: np.sum(sl.toeplitz(c, r)), argnums=(0, 1))(V, W)
    np.testing.assert_array_equal(gc, [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(gr, [0.0, 3.0, 2.0, 1.0])
    # Every entry of c appears once in each row of a circulant matrix.
    np.testing.assert_array_equal(fg.grad(lambda c: np.sum(sl.circulant(c)))(W), np.full(4, 4.0))
    # The last row of a Hankel matrix starts with c[-1]: r[0] is never read.
    gr = fg.grad(lambda r: np.sum(sl.hankel(V, r)))(W)
    np.testing.assert_array_equal(gr, [0.0, 3.0, 2.0, 1.0])
    # d/dA trace(block_diag(A, B) M) is the A block of Mᵀ
    m = RNG.standard_normal((5, 5))
    g = fg.grad(lambda a: np.trace(sl.block_diag(a, np.eye(2)) @ m))(A)
    np.testing.assert_allclose(g, m.T[:3, :3])


def test_hankel_of_a_matrix_ravels_and_warns_as_scipy():
    c = RNG.standard_normal((2, 2))
    with pytest.warns(FutureWarning, match="ravel"):
        got = fg.vjp(lambda x: sl.hankel(x, W), c)[0]
    with pytest.warns(FutureWarning, match="ravel"):
        np.testing.assert_array_equal(got, sl.hankel(c, W))


def test_jit_replays_structured_matrix_gradients():
    def loss(c, r):
        return np.sum(np.sin(sl.toeplitz(c, r) @ sl.circulant(r)))

    g = fg.grad(loss, argnums=(0, 1))
    jg = fg.jit(g)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        c, r = rng.standard_normal(4), rng.standard_normal(4)
        for u, v in zip(jg(c, r), g(c, r)):
            np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)
    (info,) = jg.cache_info()
    assert info.replayable, info.reason


STACK = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
RHS = RNG.standard_normal((2, 3, 2))


@pytest.mark.parametrize(
    "a,b", [(STACK, RHS), (STACK, V), (STACK, B), (A, RHS)], ids=["both", "vector", "matrix", "one"]
)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve_and_solve_triangular_with_stacks(a, b, trans):
    # stacked factors beside one right-hand side and the reverse (SciPy broadcasts the batch):
    # lu_solve's pivots were applied to the batch axis, and a vector b's tangent was read as
    # a matrix
    want = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
    f = lambda m, r: sl.lu_solve(sl.lu_factor(m), r, trans=trans)  # noqa: E731
    np.testing.assert_allclose(fg.value_and_grad(lambda m: np.sum(f(m, b)))(a)[0], want.sum())
    check_grads(lambda m, r: np.sum(f(m, r) ** 2), ("rev", "fwd"), order=2)(a, b)
    kw = {"lower": True, "trans": trans, "unit_diagonal": trans == 2}
    check_grads(lambda m, r: np.sum(sl.solve_triangular(m, r, **kw) ** 2), ("rev", "fwd"), 2)(a, b)


@pytest.mark.parametrize("assume_a", ["her", "pos"])
def test_hermitian_solves_read_the_real_part_of_the_diagonal(assume_a):
    # LAPACK's Hermitian solvers ignore Im(diag): so does the value, and the derivative there is 0
    m = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    h = m @ m.conj().T + np.eye(3)
    rhs = RNG.standard_normal((3, 2)) + 1j * RNG.standard_normal((3, 2))

    def f(a):
        return np.real(np.sum(sl.solve(a, rhs, assume_a=assume_a) * (1 + 1j)))

    tilted = h + 0.3j * np.eye(3)  # the same matrix to SciPy
    np.testing.assert_allclose(fg.value_and_grad(f)(tilted)[0], f(h), rtol=1e-12)
    assert np.all(np.imag(np.diagonal(fg.grad(f)(h))) == 0)


# --- decompositions and the functions built on them --------------------------------------------

M4 = RNG.standard_normal((4, 4))
SPD4 = M4 @ M4.T + 4 * np.eye(4)
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))
CM = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
CSPD = CM @ CM.conj().T + 3 * np.eye(3)
CTALL = RNG.standard_normal((4, 2)) + 1j * RNG.standard_normal((4, 2))


def _sym(x):
    return x + np.swapaxes(x, -1, -2)


def _her(x):
    return x + np.conj(np.swapaxes(x, -1, -2))


def _leaves(out):
    """The array outputs of a SciPy function (its tuple flattened; ints, None dropped)."""
    if isinstance(out, tuple | list):
        return [y for x in out for y in _leaves(x)]
    return [] if out is None or isinstance(out, int | np.integer) else [np.asarray(out)]


def _proj(v):  # v vᴴ: independent of each column's sign or phase
    return v @ np.conj(np.swapaxes(v, -1, -2))


# name -> (function of the traced arguments, arguments); symmetric problems take a + aᵀ. Each
# output is compared with SciPy's on the same values, and a loss of the outputs is checked
# against finite differences, forward and reverse, to second order.
DECOMPOSITIONS = {
    "eigh": (lambda a: sl.eigh(_sym(a)), (M4,)),
    "eigh-upper": (lambda a: sl.eigh(_sym(a), lower=False), (M4,)),
    "eigh-b": (lambda a, b: sl.eigh(_sym(a), b @ b.T + 4 * np.eye(4)), (M4, M4.T)),
    "eigh-b-type2": (
        lambda a, b: sl.eigh(_sym(a) / 5, b @ b.T / 5 + np.eye(4), type=2),
        (M4, M4.T),
    ),
    "eigh-b-type3": (lambda a: sl.eigh(_sym(a) / 5, SPD4 / 5, type=3, lower=False), (M4,)),
    "eigh-index": (lambda a: sl.eigh(_sym(a), subset_by_index=[1, 2], driver="evr"), (M4,)),
    "eigh-value": (lambda a: sl.eigh(_sym(a), subset_by_value=(-1.0, np.inf)), (M4,)),
    "eigh-only": (lambda a: sl.eigh(_sym(a), eigvals_only=True, subset_by_index=[2, 3]), (M4,)),
    "eigvalsh": (lambda a: sl.eigvalsh(_sym(a), SPD4), (M4,)),
    "eigvalsh-stack": (lambda a: sl.eigvalsh(_sym(a)), (STACK,)),
    "svd": (lambda a: sl.svd(a, full_matrices=False), (TALL,)),
    "svd-gesvd": (lambda a: sl.svd(a, lapack_driver="gesvd"), (M4,)),
    "svdvals": (sl.svdvals, (WIDE,)),
    "svdvals-stack": (sl.svdvals, (STACK,)),
    "qr": (sl.qr, (M4,)),
    "qr-economic": (lambda a: sl.qr(a, mode="economic"), (TALL,)),
    "qr-wide": (sl.qr, (WIDE,)),
    "qr-r": (lambda a: sl.qr(a, mode="r"), (TALL,)),
    "qr-pivoting": (lambda a: sl.qr(a, pivoting=True, mode="economic"), (TALL,)),
    "qr-stack": (sl.qr, (STACK,)),
    "lu": (sl.lu, (M4,)),
    "lu-tall": (lambda a: sl.lu(a, permute_l=True), (TALL,)),
    "lu-indices": (lambda a: sl.lu(a, p_indices=True), (WIDE,)),
    "lu-stack": (sl.lu, (STACK,)),
    "pinv": (sl.pinv, (TALL,)),
    "pinv-rank": (lambda a: sl.pinv(a @ a.T, atol=1e-8, return_rank=True), (TALL,)),
    "pinv-stack": (lambda a: sl.pinv(a, atol=0.1), (STACK,)),
    "lstsq": (sl.lstsq, (TALL, RNG.standard_normal(5))),
    "lstsq-matrix": (lambda a, b: sl.lstsq(a, b, lapack_driver="gelsy"), (TALL, TALL)),
    "lstsq-wide": (sl.lstsq, (WIDE, V)),
    "norm": (sl.norm, (TALL,)),
    "norm-2": (lambda a: sl.norm(a, 2), (TALL,)),
    "norm-nuc": (lambda a: sl.norm(a, "nuc", axis=(1, 2), keepdims=True), (STACK,)),
    "norm-axis": (lambda a: sl.norm(a, 3, axis=0), (TALL,)),
    "eig": (lambda a: sl.eig(_sym(a))[0], (M4,)),
    "eig-real-vectors": (lambda a: sl.eig(a + 4 * np.diag(np.arange(4.0)), left=True), (M4,)),
    "eigvals": (sl.eigvals, (M4,)),
    "eigvals-stack": (lambda a: sl.eigvals(a, homogeneous_eigvals=True), (STACK,)),
    "polar": (sl.polar, (M4,)),
    "polar-left": (lambda a: sl.polar(a, "left"), (TALL,)),
    "polar-stack": (sl.polar, (STACK,)),
    "null_space": (sl.null_space, (WIDE,)),
    "orth": (lambda a: sl.orth(a @ WIDE), (TALL,)),
    "solve_sylvester": (sl.solve_sylvester, (A, M4[:2, :2] + 3 * np.eye(2), B)),
    "solve_sylvester-stack": (sl.solve_sylvester, (STACK, A, RHS[..., :1].repeat(3, -1))),
    "logm": (lambda a: sl.logm(a @ a.T / 4 + np.eye(4)), (M4,)),
    "logm-stack": (lambda a: sl.logm(a @ np.swapaxes(a, -1, -2)), (STACK,)),
    "logm-negative": (lambda a: sl.logm(a - 4 * np.eye(3)), (A,)),
    "fractional_matrix_power": (
        lambda a: sl.fractional_matrix_power(a @ a.T + np.eye(4), 0.3),
        (M4,),
    ),  # fmt: skip
    "expm_frechet": (lambda a, e: sl.expm_frechet(a / 3, e), (M4, M4.T)),
    "expm_frechet-only": (lambda a: sl.expm_frechet(a / 3, SPD4, compute_expm=False), (M4,)),
    "expm_frechet-stack": (lambda a: sl.expm_frechet(a / 4, STACK[::-1]), (STACK,)),
    # complex inputs (JAX's convention: the loss is real, its gradient ∂/∂x - i ∂/∂y)
    "eigh-complex": (lambda a: sl.eigh(_her(a)), (CM,)),
    "eigh-complex-b": (lambda a, b: sl.eigh(_her(a), b @ b.conj().T + 3 * np.eye(3)), (CM, CM.T)),
    "svd-complex": (lambda a: sl.svd(a, full_matrices=False), (CTALL,)),
    "qr-complex": (lambda a: sl.qr(a, mode="economic"), (CTALL,)),
    "lu-complex": (sl.lu, (CM,)),
    "pinv-complex": (sl.pinv, (CTALL,)),
    "lstsq-complex": (sl.lstsq, (CTALL, CTALL[:, 0] + 1j)),
    "eig-complex-pairs": (sl.eig, (M4,)),
    "eig-complex": (lambda a: sl.eig(a, left=True, right=False), (CM,)),
    "polar-complex": (lambda a: sl.polar(a, "left"), (CM,)),
    "orth-complex": (sl.orth, (CTALL,)),
    "logm-complex": (lambda a: sl.logm(CSPD + 0.5 * a), (CM,)),
    "solve_sylvester-complex": (sl.solve_sylvester, (CM + 3 * np.eye(3), CSPD, C3[:, None] * V)),
}

# Outputs whose derivative depends on a choice of basis: the loss reads only their span. SciPy's
# eigenvector and singular vector signs jump between nearby matrices (its 'evr' driver flips
# them within 5e-4 of M4), so finite differences see only products of a vector with itself.
SPAN_ONLY = {"null_space": _proj, "orth": _proj}


def _gauge_free(name):
    if name.split("-")[0] in SPAN_ONLY:
        return SPAN_ONLY[name.split("-")[0]]
    if name.startswith(("eig", "svd")):
        return lambda y: np.real(y * np.conj(y))
    return lambda y: y


def _loss(f, name):
    weights = {}

    def loss(*xs):
        total = 0.0
        for i, y in enumerate(_leaves(f(*xs))):
            y = _gauge_free(name)(y)
            w = weights.setdefault(i, np.cos(np.arange(np.size(y)).reshape(np.shape(y))))
            total = total + np.sum(np.real(w * np.sin(y)))
        return total

    return loss


@pytest.mark.parametrize("name", list(DECOMPOSITIONS))
def test_decompositions_match_scipy_and_differentiate(name):
    f, args = DECOMPOSITIONS[name]
    want = f(*args)
    got = fg.vjp(f, *args)[0] if len(args) == 1 else fg.vjp(lambda x: f(x, *args[1:]), args[0])[0]
    assert type(got) is type(want)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
    if isinstance(want, tuple | list):  # the integer outputs (ranks, permutations) are SciPy's
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray) and w.dtype.kind in "iu" or isinstance(w, int):
                np.testing.assert_array_equal(g, w)
    # logm of a real matrix with negative eigenvalues: its second derivative is a logm of a 4n
    # block whose repeated eigenvalues sit on the branch cut, which SciPy's logm loses
    order = 1 if name == "logm-negative" else 2
    check_grads(_loss(f, name), ("rev", "fwd"), order=order)(*args)


@pytest.mark.parametrize("f", [lambda a: sl.qr(a), lambda a: sl.svd(a)], ids=["qr", "svd"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)], ids=["tall", "wide"])
def test_full_bases_of_non_square_matrices(f, shape):
    """The columns beyond min(M, N) (of Q, U; rows of Vh) are SciPy's at this point, and turn
    with the complement: products that read only their span match finite differences."""
    a = RNG.standard_normal(shape)
    k = min(shape)
    got = fg.vjp(f, a)[0]
    for g, w in zip(got, f(a)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)

    def loss(x):
        out = f(x)
        q = out[0]
        total = np.sum(np.sin(_proj(q[:, k:]))) + np.sum(np.sin(_proj(q[:, :k])))
        if len(out) == 3:  # svd: Vh's extra rows
            total = total + np.sum(np.cos(_proj(out[2][k:].T)))
        return total + np.sum(np.cos(out[1]))

    check_grads(loss, ("rev", "fwd"), order=2)(a)


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_the_triangle_scipy_reads(lower):
    skew = _sym(M4) + np.triu(RNG.standard_normal((4, 4)), 1)  # the triangles disagree
    b = SPD4 + np.tril(RNG.standard_normal((4, 4)), -1)
    for rest in [(), (b,)]:
        got = fg.vjp(lambda x, rest=rest: sl.eigh(x, *rest, lower=lower), skew)[0]
        for g, w in zip(got, sl.eigh(skew, *rest, lower=lower)):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    got = fg.vjp(lambda x: sl.eigvalsh(skew, x, lower=lower), b)[0]
    np.testing.assert_allclose(got, sl.eigvalsh(skew, b, lower=lower), rtol=1e-10)


def test_unsupported_options_are_clear_errors():
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.qr\(mode='raw'\)"):
        fg.grad(lambda a: np.sum(sl.qr(a, mode="raw")[1]))(A)
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.eig\(a, b\)"):
        fg.grad(lambda a: np.sum(np.abs(sl.eig(a, np.eye(3))[0])))(A)
    with pytest.raises(ValueError, match="scipy.linalg.svd: lapack_driver"):
        fg.grad(lambda a: np.sum(sl.svd(a, lapack_driver="gesvj")[1]))(A)
    # SciPy's own errors on the values: a b that is not positive definite, a bad subset
    with pytest.raises(np.linalg.LinAlgError):
        fg.grad(lambda a: np.sum(sl.eigh(a, -np.eye(3))[0]))(_sym(A))
    with pytest.raises(ValueError):
        fg.grad(lambda a: np.sum(sl.eigh(a, subset_by_index=[2, 7])[0]))(_sym(A))


def test_solve_sylvester_rules_and_hand_derived():
    b = M4[:2, :2] + 3 * np.eye(2)
    check_rrule(sl.solve_sylvester, A, b, B)
    check_frule(sl.solve_sylvester, A, b, B)
    # X is linear in Q: d sum(X) / dQ solves Aᵀ G + G Bᵀ = 1
    g = fg.grad(lambda q: np.sum(sl.solve_sylvester(A, b, q)))(B)
    np.testing.assert_allclose(A.T @ g + g @ b.T, np.ones((3, 2)), atol=1e-12)


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_decompositions_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp, jsl = jax.numpy, pytest.importorskip("jax.scipy.linalg")
    w4 = np.cos(np.arange(16.0)).reshape(4, 4)
    c_inv = np.linalg.inv(np.linalg.cholesky(SPD4))  # JAX's eigh has no b
    # (JAX's solve_sylvester has no derivative: its Schur form has none)
    pairs = [
        (lambda a: np.sum(w4 * sl.eigh(_sym(a))[1] ** 2) + np.sum(sl.eigh(_sym(a))[0] ** 3),
         lambda a: (w4 * jsl.eigh(_sym(a))[1] ** 2).sum() + (jsl.eigh(_sym(a))[0] ** 3).sum()),
        (lambda a: np.sum(sl.eigh(_sym(a), SPD4, eigvals_only=True) ** 2),
         lambda a: (jnp.linalg.eigvalsh(c_inv @ _sym(a) @ c_inv.T) ** 2).sum()),
        (lambda a: np.sum(w4 * sl.svd(a)[0] ** 2) + np.sum(np.sin(sl.svdvals(a))),
         lambda a: (w4 * jsl.svd(a)[0] ** 2).sum() + jnp.sin(jsl.svd(a, compute_uv=False)).sum()),
        (lambda a: np.sum(w4 * sl.qr(a)[0]) + np.sum(w4 * sl.qr(a)[1]),
         lambda a: (w4 * jsl.qr(a)[0]).sum() + (w4 * jsl.qr(a)[1]).sum()),
        (lambda a: np.sum(w4 * sl.lu(a)[1]) + np.sum(w4 * sl.lu(a)[2]),
         lambda a: (w4 * jsl.lu(a)[1]).sum() + (w4 * jsl.lu(a)[2]).sum()),
        (lambda a: np.sum(w4 * sl.pinv(a)), lambda a: (w4 * jnp.linalg.pinv(a)).sum()),
        (lambda a: sl.norm(a, 2) + sl.norm(a, "nuc"),
         lambda a: jnp.linalg.norm(a, 2) + jnp.linalg.norm(a, "nuc")),
        (lambda a: np.sum(np.abs(sl.eigvals(a)) ** 2),
         lambda a: (jnp.abs(jnp.linalg.eigvals(a)) ** 2).sum()),
        (lambda a: np.sum(w4 * sl.polar(a)[0]) + np.sum(w4 * sl.polar(a, "left")[1]),
         lambda a: (w4 * jsl.polar(a, method="svd")[0]).sum()
         + (w4 * jsl.polar(a, "left", method="svd")[1]).sum()),
        (lambda a: np.sum(sl.lstsq(a, w4[:, 0])[0] ** 2),
         lambda a: (jnp.linalg.lstsq(a, w4[:, 0])[0] ** 2).sum()),
    ]  # fmt: skip
    for i, (ours, theirs) in enumerate(pairs):
        np.testing.assert_allclose(
            fg.grad(ours)(M4), np.asarray(jax.grad(theirs)(M4)), rtol=1e-7, atol=1e-10,
            err_msg=str(i),
        )  # fmt: skip


def test_det_of_single_precision_is_scipys_double():
    # SciPy factors float32 in float32 and returns a float64 (complex64: complex128)
    for dtype in (np.float32, np.complex64):
        a = (A * (1 + 0.5j) if dtype is np.complex64 else A).astype(dtype)
        got = fg.jvp(sl.det, (a,), (np.ones_like(a),))[0]
        want = sl.det(a)
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)

"""Reverse rules of fusegrad.rules.linalg against finite differences and hand-derived formulas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad
import fusegrad as fg
import fusegrad.rules.linalg  # noqa: F401  (registers the rules)
from fusegrad.rules.registry import rrule
from fusegrad.tangents import NoTangent, Thunk, ZeroTangent, unthunk
from fusegrad.testing import check_grads, check_rrule

DTYPES = [np.float64, np.float32]


def rand(rng, shape, dtype=np.float64):
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


def spd(rng, n, batch=(), dtype=np.float64):
    """A well-conditioned symmetric positive-definite (batch of) matrix."""
    m = rng.standard_normal(batch + (n, n))
    return np.asarray(m @ np.swapaxes(m, -1, -2) + n * np.eye(n), dtype=dtype)


def fd_grad(f, x, dy, eps=1e-6):
    """Central finite-difference gradient of <dy, f(x)> with respect to x (float64)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (np.sum(dy * f(x + e)) - np.sum(dy * f(x - e))) / (2 * eps)
    return g


# ------------------------------------------------------------------------------------ matmul


MATMUL_SHAPES = [
    ((3, 4), (4, 2)),  # matrix @ matrix
    ((4,), (4, 2)),  # vector @ matrix
    ((3, 4), (4,)),  # matrix @ vector
    ((4,), (4,)),  # vector @ vector
    ((2, 3, 4), (4, 5)),  # batched @ matrix
    ((2, 1, 3, 4), (5, 4, 2)),  # broadcasting batch dims
    ((4,), (2, 4, 3)),  # vector @ batched
    ((2, 3, 4), (4,)),  # batched @ vector
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype):
    rng = np.random.default_rng(0)
    check_rrule(np.matmul, rand(rng, sa, dtype), rand(rng, sb, dtype))


def test_matmul_hand_derived():
    rng = np.random.default_rng(1)
    a, b, dy = rand(rng, (3, 4)), rand(rng, (4, 2)), rand(rng, (3, 2))
    _, pb = rrule(np.matmul, a, b)
    da, db = pb(dy)
    np.testing.assert_allclose(da, dy @ b.T)
    np.testing.assert_allclose(db, a.T @ dy)


def test_matmul_mixed_dtypes_project():
    rng = np.random.default_rng(2)
    a, b = rand(rng, (3, 4), np.float32), rand(rng, (4, 2))
    y, pb = rrule(np.matmul, a, b)
    da, db = (unthunk(g) for g in pb(np.ones_like(y)))  # thunks: computed only when needed
    assert da.dtype == np.float32 and db.dtype == np.float64


@settings(max_examples=15, deadline=None)
@given(
    batch_a=st.lists(st.sampled_from([1, 2]), max_size=2),
    batch_b=st.lists(st.sampled_from([1, 2]), max_size=2),
    m=st.integers(1, 3),
    k=st.integers(1, 3),
    n=st.integers(1, 3),
)
def test_matmul_broadcast_hypothesis(batch_a, batch_b, m, k, n):
    rng = np.random.default_rng(3)
    check_rrule(np.matmul, rand(rng, (*batch_a, m, k)), rand(rng, (*batch_b, k, n)))


# ------------------------------------------------------------- dot, vdot, inner, outer, tensordot


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 3), (4, 3, 5)), ((), (2, 3))]
)
def test_dot(sa, sb, dtype):
    rng = np.random.default_rng(4)
    check_rrule(np.dot, rand(rng, sa, dtype), rand(rng, sb, dtype))


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3)), ((2,), ())])
def test_inner(sa, sb):
    rng = np.random.default_rng(5)
    check_rrule(np.inner, rand(rng, sa), rand(rng, sb))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", [((6,), (6,)), ((2, 3), (3, 2)), ((2, 3), (6,))])
def test_vdot(sa, sb, dtype):
    rng = np.random.default_rng(6)
    check_rrule(np.vdot, rand(rng, sa, dtype), rand(rng, sb, dtype))


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 2), (3,)), ((), (2,))])
def test_outer(sa, sb):
    rng = np.random.default_rng(7)
    check_rrule(np.outer, rand(rng, sa), rand(rng, sb))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sa,sb,axes",
    [
        ((2, 3, 4), (3, 4, 5), 2),
        ((2, 3), (3, 4), 1),
        ((2, 3), (4, 5), 0),
        ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])),
        ((3, 2, 4), (4, 5, 3), ([2, 0], [0, 2])),
        ((2, 3), (3, 2), ([-1], [0])),
    ],
)
def test_tensordot(sa, sb, axes, dtype):
    rng = np.random.default_rng(8)
    check_rrule(np.tensordot, rand(rng, sa, dtype), rand(rng, sb, dtype), axes)


# -------------------------------------------------------------------------------------- einsum


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("ij,jk", [(3, 4), (4, 2)]),  # implicit output
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),  # summed-out index broadcast back
    ("ii->i", [(3, 3)]),  # diagonal
    ("ii", [(3, 3)]),  # trace
    ("iij->j", [(3, 3, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->ij", [(1, 4), (3, 4)]),  # size-1 broadcast of a labelled axis
    ("i,j->ij", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,k->ji", [(2, 3, 4), (4,)]),
    ("ii,i->", [(3, 3), (3,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),  # ellipsis, with broadcasting
    ("...i,...i", [(2, 3), (3,)]),  # ellipsis, implicit output
    ("i...->...", [(3, 2, 2)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("subs,shapes", EINSUM_CASES)
def test_einsum(subs, shapes, dtype):
    rng = np.random.default_rng(9)
    ops = [rand(rng, s, dtype) for s in shapes]
    check_rrule(np.einsum, subs, *ops)


@pytest.mark.parametrize(
    "subs,shapes",
    [
        ("bihwk,oik->bohw", [(8, 4, 10, 10, 9), (6, 4, 9)]),  # a convnet layer: 173k labels
        ("ij,jk,kl->il", [(40, 30), (30, 35), (35, 20)]),
        ("ii,ij->j", [(200, 200), (200, 200)]),  # a diagonal
    ],
)
def test_einsum_derivatives_past_the_path_threshold(subs, shapes, monkeypatch):
    """Past ``EINSUM_PATH_FROM`` multiply-adds the pullbacks' and tangents' einsums search a
    contraction path (BLAS): the same derivatives as NumPy's own loop (threshold infinite)."""
    from fusegrad.rules import linalg

    rng = np.random.default_rng(3)
    ops = [rng.normal(size=s) for s in shapes]
    ct = rng.normal(size=np.einsum(subs, *ops).shape)
    tangents = [rng.normal(size=s) for s in shapes]

    def derivatives():
        _, pb = rrule(np.einsum, subs, *ops)
        grads = pb(ct)[1:]
        _, dot = fg.jvp(lambda *xs: np.einsum(subs, *xs), ops, tangents)
        return [unthunk(g) for g in grads], dot

    fast = derivatives()
    monkeypatch.setattr(linalg, "EINSUM_PATH_FROM", float("inf"))
    slow = derivatives()
    for a, b in zip(fast[0], slow[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-12, atol=1e-12)
    check_rrule(np.einsum, subs, *ops)


@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
        lambda a, b: np.einsum(a, [0, 1], b, [1, 2]),  # implicit output
        lambda a, b: np.einsum(a, [0, 1], a, [0, 1], []),
        lambda a, b: np.einsum(a[None], [Ellipsis, 1], [Ellipsis]),
    ],
    ids=["explicit", "implicit", "scalar", "ellipsis"],
)
def test_einsum_interleaved_form(f):
    # einsum(a, [0, 1], b, [1, 2], [0, 2]) is "ab,bc->ac" (the rule declined it: TypeError)
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    want = f(a, b)
    np.testing.assert_allclose(fusegrad.jit(f)(a, b), want, rtol=1e-14)
    w = np.arange(1.0, np.size(want) + 1).reshape(np.shape(want))
    check_grads(lambda a, b: np.sum(f(a, b) * w))(a, b)


def test_einsum_interleaved_form_names_a_bad_sublist():
    with pytest.raises(ValueError, match=r"integers in \[0, 52\) and Ellipsis, got \[0, 99\]"):
        fusegrad.grad(lambda a: np.sum(np.einsum(a, [0, 99])))(np.ones((2, 2)))


def test_einsum_subscripts_get_no_tangent():
    rng = np.random.default_rng(10)
    a = rand(rng, (2, 2))
    _, pb = rrule(np.einsum, "ij->i", a)
    g = pb(np.ones(2))
    assert isinstance(g[0], NoTangent)
    np.testing.assert_allclose(g[1], np.ones((2, 2)))


def test_einsum_interleaved_has_no_rule():
    assert rrule(np.einsum, np.ones(3), [0], [0]) is None


# ------------------------------------------------------------------------------------- trace


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((3, 3), {}),
        ((3, 4), {"offset": 1}),
        ((4, 3), {"offset": -2}),
        ((2, 3, 3), {"axis1": 1, "axis2": 2}),
        ((3, 2, 3), {"axis1": 0, "axis2": 2, "offset": 1}),
    ],
)
def test_trace(shape, kw):
    rng = np.random.default_rng(11)
    check_rrule(np.trace, rand(rng, shape), **kw)


# ------------------------------------------------------------------------------ solve and inv


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sa,sb",
    [
        ((3, 3), (3,)),
        ((3, 3), (3, 2)),
        ((2, 3, 3), (2, 3, 1)),
        ((2, 3, 3), (3, 2)),
        ((2, 3, 3), (3,)),
        ((3, 3), (2, 3, 2)),
    ],
)
def test_solve(sa, sb, dtype):
    rng = np.random.default_rng(12)
    a = np.asarray(rand(rng, sa) + 3 * np.eye(sa[-1]), dtype=dtype)
    check_rrule(np.linalg.solve, a, rand(rng, sb, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (1, 1)])
def test_inv(shape, dtype):
    rng = np.random.default_rng(13)
    a = np.asarray(rand(rng, shape) + 3 * np.eye(shape[-1]), dtype=dtype)
    check_rrule(np.linalg.inv, a)


# ------------------------------------------------------------------------------ det, slogdet


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_det(shape, dtype):
    rng = np.random.default_rng(14)
    a = np.asarray(rand(rng, shape) + 2 * np.eye(shape[-1]), dtype=dtype)
    check_rrule(np.linalg.det, a)


def test_det_hand_derived():
    """d det(A)/dA = det(A) inv(A)ᵀ."""
    rng = np.random.default_rng(15)
    a = rand(rng, (4, 4)) + 2 * np.eye(4)
    _, pb = rrule(np.linalg.det, a)
    (g,) = pb(1.0)
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)


def _cofactor_by_minors(a):
    n = a.shape[-1]
    cof = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            cof[i, j] = (-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
    return cof


@pytest.mark.parametrize(
    "a",
    [
        np.zeros((2, 2)),
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),  # rank 2
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]]),  # rank 1
        np.outer([1.0, 2j, 0.5], [1.0, -1.0, 3.0 + 1j]),  # complex, rank 1
    ],
    ids=["zeros", "rank 2", "rank 1", "complex rank 1"],
)
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(a):
    # at a singular A the derivative of det is still its cofactor matrix (finite): the rule's
    # det(A) inv(A)ᵀ raised LinAlgError on the zero matrix (JAX gives the cofactors)
    want = _cofactor_by_minors(a)
    _, pb = rrule(np.linalg.det, a)
    np.testing.assert_allclose(pb(1.0)[0], want, atol=1e-13)
    np.testing.assert_allclose(pb(np.ones((), a.dtype))[0], want, atol=1e-13)
    _, t = fusegrad.jvp(np.linalg.det, (a,), (np.ones_like(a),))
    np.testing.assert_allclose(t, want.sum(), atol=1e-13)
    batch = np.stack([a, a + np.eye(a.shape[0])])  # one singular, one not: both right
    (g,) = rrule(np.linalg.det, batch)[1](np.ones(2))
    np.testing.assert_allclose(g[0], want, atol=1e-13)
    np.testing.assert_allclose(g[1], _cofactor_by_minors(batch[1]), atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)])
def test_slogdet(shape, dtype):
    rng = np.random.default_rng(16)
    a = np.asarray(rand(rng, shape) + 2 * np.eye(shape[-1]), dtype=dtype)
    dlog = rand(rng, shape[:-2], dtype) if len(shape) > 2 else 0.7
    # The sign is piecewise constant: its cotangent is ignored, give it a zero one.
    check_rrule(np.linalg.slogdet, a, output_tangent=(ZeroTangent(), dlog))


def test_slogdet_hand_derived_and_zero_entries():
    rng = np.random.default_rng(17)
    a = rand(rng, (3, 3)) - 4 * np.eye(3)  # negative determinant
    (sign, logdet), pb = rrule(np.linalg.slogdet, a)
    assert sign == -1
    (g,) = pb((ZeroTangent(), 1.0))
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-10)
    (g,) = pb((1.0, ZeroTangent()))  # only the sign: zero, nothing allocated
    assert isinstance(g, ZeroTangent)
    (g,) = pb((ZeroTangent(), Thunk(lambda: 2.0)))  # thunk entries are unthunked
    np.testing.assert_allclose(g, 2 * np.linalg.inv(a).T, rtol=1e-10)


# -------------------------------------------------------------------------- cholesky and eigh


def sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky(batch, upper):
    rng = np.random.default_rng(18)
    a = spd(rng, 3, batch)
    y, pb = rrule(np.linalg.cholesky, a, upper=upper)
    dy = rand(rng, y.shape)
    (g,) = pb(dy)
    want = fd_grad(lambda x: np.linalg.cholesky(sym(x), upper=upper), a, dy)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g, np.swapaxes(g, -1, -2))


def test_cholesky_float32():
    rng = np.random.default_rng(19)
    a = spd(rng, 3, dtype=np.float32)
    y, pb = rrule(np.linalg.cholesky, a)
    dy = rand(rng, y.shape)
    (g,) = pb(dy)
    assert g.dtype == np.float32
    want = fd_grad(lambda x: np.linalg.cholesky(sym(x)), a, dy)
    np.testing.assert_allclose(g, want, rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_rules_solve_the_same_with_scipys_triangular_solve(dtype, upper, monkeypatch):
    # with SciPy imported the two solves take its triangular solver, else np.linalg.solve
    sl = pytest.importorskip("scipy.linalg")
    from fusegrad.rules import linalg as rules

    rng = np.random.default_rng(21)
    m = rng.standard_normal((6, 6)) + (
        1j * rng.standard_normal((6, 6)) if dtype == np.complex128 else 0
    )
    a = np.asarray(m @ m.conj().T + 6 * np.eye(6), dtype=dtype)
    dy = np.asarray(
        rng.standard_normal((6, 6)) + (1j if dtype == np.complex128 else 0), dtype=dtype
    )
    ta = np.asarray(rng.standard_normal((6, 6)), dtype=dtype)
    ta = ta + ta.conj().T
    calls = []
    monkeypatch.setattr(
        rules,
        "_SOLVE_TRIANGULAR",
        [lambda *a, **k: calls.append(1) or sl.solve_triangular(*a, **k)],
    )
    got = rrule(np.linalg.cholesky, a, upper=upper)[1](dy)[0]
    got_t = fusegrad.jvp(lambda x: np.linalg.cholesky(x, upper=upper), (a,), (ta,))[1]
    assert len(calls) == 4  # two in the pullback, two in the jvp
    monkeypatch.setattr(rules, "_SOLVE_TRIANGULAR", [])
    monkeypatch.delitem(__import__("sys").modules, "scipy")  # as in a program without SciPy
    want = rrule(np.linalg.cholesky, a, upper=upper)[1](dy)[0]
    want_t = fusegrad.jvp(lambda x: np.linalg.cholesky(x, upper=upper), (a,), (ta,))[1]
    assert not rules._SOLVE_TRIANGULAR and got.dtype == want.dtype == a.dtype
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got_t, want_t, rtol=tol, atol=tol)


@pytest.mark.parametrize("which", ["values", "vectors", "both"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_eigh(batch, which):
    rng = np.random.default_rng(20)
    a = sym(rand(rng, batch + (4, 4)))
    w, v = np.linalg.eigh(a)
    dw = rand(rng, w.shape) if which != "vectors" else ZeroTangent()
    c = rand(rng, v.shape) if which != "values" else None
    # <c, v * v> is invariant to the sign of each eigenvector; its cotangent is 2 c v.
    dv = 2 * c * v if c is not None else ZeroTangent()
    _, pb = rrule(np.linalg.eigh, a)
    (g,) = pb((dw, dv))

    def loss(x):
        ww, vv = np.linalg.eigh(sym(x))
        out = 0.0
        if c is not None:
            out = out + np.sum(c * vv * vv)
        if not isinstance(dw, ZeroTangent):
            out = out + np.sum(dw * ww)
        return out

    want = fd_grad(loss, a, 1.0)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def test_eigh_values_hand_derived():
    """d w_k / dA = v_k v_kᵀ."""
    rng = np.random.default_rng(21)
    a = sym(rand(rng, (3, 3)))
    (w, v), pb = rrule(np.linalg.eigh, a)
    (g,) = pb((np.array([0.0, 1.0, 0.0]), ZeroTangent()))
    np.testing.assert_allclose(g, np.outer(v[:, 1], v[:, 1]), atol=1e-12)
    assert isinstance(unthunk(pb((ZeroTangent(), ZeroTangent()))[0]), ZeroTangent)


def test_solve_jvp_with_a_stack_of_matrices_and_one_vector():
    # b of shape (n,) beside A of shape (k, n, n): the tangent's right-hand side is (k, n), which
    # np.linalg.solve read as a matrix (a crash in jvp, hessian and hvp)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal(4)
    check_grads(lambda m, v: np.linalg.solve(m, v), ("rev", "fwd"), order=2)(a, b)
    h = 1e-6
    ta, tb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)
    want = (np.linalg.solve(a + h * ta, b + h * tb) - np.linalg.solve(a - h * ta, b - h * tb)) / (
        2 * h
    )
    np.testing.assert_allclose(fg.jvp(np.linalg.solve, (a, b), (ta, tb))[1], want, atol=1e-7)


def test_norm_of_order_zero_has_a_zero_tangent():
    x = np.array([1.0, 0.0, -2.0])
    y, t = fg.jvp(lambda v: np.linalg.norm(v, 0), (x,), (np.ones(3),))
    assert y == 2.0 and float(t) == 0.0


_R = np.random.default_rng(11)
GUFUNC_AXES = [
    (np.matmul, ((3, 4, 2), (4, 5, 2)), {"axes": [(0, 1), (0, 1), (0, 1)]}),
    (np.matmul, ((2, 3, 4), (2, 4, 5)), {"axes": [(-2, -1), (-2, -1), (0, 2)]}),
    (np.matmul, ((3, 4, 2), (4,)), {"axes": [(0, 1), 0, 0]}),
    (np.vecdot, ((4, 3), (4, 3)), {"axis": 0}),
    (np.vecdot, ((4, 3), (4, 3)), {"axis": 0, "keepdims": True}),
    (np.vecdot, ((4, 3), (4, 3)), {"keepdims": True}),
    (np.vecdot, ((2, 4, 3), (4, 1)), {"axis": -2}),
    (np.matvec, ((3, 4, 2), (4, 2)), {"axes": [(0, 1), 0, 0]}),
    (np.vecmat, ((4, 2), (4, 3, 2)), {"axes": [0, (0, 1), 0]}),
]


@pytest.mark.parametrize("f,shapes,kw", GUFUNC_AXES, ids=lambda c: str(c))
def test_gufuncs_with_axes_keywords(f, shapes, kw):
    # the pullbacks took the core axes last whatever axes=/axis= said: silently wrong gradients
    # on square shapes (vecdot(x, y, axis=0) gave y's transpose), a crash on others
    a, b = (_R.standard_normal(s) for s in shapes)
    want = f(a, b, **kw)
    w = _R.standard_normal(want.shape)
    value, (ga, gb) = fg.value_and_grad(lambda u, v: np.sum(w * f(u, v, **kw)), (0, 1))(a, b)
    np.testing.assert_allclose(value, np.sum(w * want))
    check_grads(lambda u, v: np.sum(w * f(u, v, **kw)), ("rev", "fwd"), order=2)(a, b)
    if f is np.vecdot and kw.get("axis") == 0 and not kw.get("keepdims"):  # hand-derived
        np.testing.assert_allclose(ga, b * w)


def test_norm_with_a_traced_order():
    # d/dp of a p-norm: jvp dropped p's tangent (0 where grad gave the derivative), and the
    # pullback's float(ord) failed under a second derivative in p
    x = np.array([[0.5, -1.2, 2.0, 0.3], [1.0, 0.2, -0.7, 0.9]])
    check_grads(lambda v, p: np.linalg.norm(v, p), ("rev", "fwd"), order=2)(x[0], 3.0)
    for kw in ({"axis": 1}, {"axis": 0, "keepdims": True}):
        check_grads(lambda v, p, kw=kw: np.sum(np.linalg.norm(v, p, **kw)), ("rev", "fwd"), 2)(
            x, 3.0
        )
    # hand-derived: d‖x‖_p/dp = ‖x‖_p (Σ|x|^p ln|x| / (p Σ|x|^p) - ln Σ|x|^p / p²)
    a, p = np.abs(x[0]), 3.0
    s = np.sum(a**p)
    want = s ** (1 / p) * (np.sum(a**p * np.log(a)) / (p * s) - np.log(s) / p**2)
    _, dot = fg.jvp(lambda q: np.linalg.norm(x[0] + 0 * q, q), (p,), (1.0,))
    np.testing.assert_allclose(dot, want, rtol=1e-12)
    # a plain x beside a traced ord: NumPy's own norm runs (it dispatches on x) and writes in
    # place: the error names the case and the fix
    with pytest.raises(TypeError, match=r"np\.linalg\.norm\(x, ord\).*x \+ 0 \* ord"):
        fg.grad(lambda q: np.linalg.norm(x[0], q))(p)


def test_slogdet_of_a_singular_matrix_has_an_infinite_derivative():
    # slogdet returns (0, -inf) there; its derivative A⁻ᵀ = cofactors / det is infinite (JAX's
    # answer), where the rules raised LinAlgError from inv
    s = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [0.0, 3.0]]])  # singular, regular
    g = fg.grad(lambda a: np.sum(np.linalg.slogdet(a)[1]))(s)
    np.testing.assert_array_equal(g[0], [[np.inf, -np.inf], [-np.inf, np.inf]])
    np.testing.assert_allclose(g[1], np.linalg.inv(s[1]).T)
    _, dot = fg.jvp(lambda a: np.linalg.slogdet(a)[1], (s,), (np.ones_like(s),))
    # det(S + t·1) = t for the singular one: log|t| has an infinite slope
    assert dot[0] == np.inf and dot[1] == pytest.approx(np.sum(np.linalg.inv(s[1])))  # tr(A⁻¹ 1)


@pytest.mark.parametrize("subscripts", ["ii", "ii->i", "ij->", "ij->ji"])
def test_einsum_of_an_empty_matrix(subscripts):
    # a 0-size axis was taken as 1 (max(1, 0)) when sizing the pullback's broadcast
    g = fg.grad(lambda x: np.sum(np.einsum(subscripts, x)))(np.zeros((0, 0)))
    assert g.shape == (0, 0)


def test_matrix_power_zero_keeps_the_dtype():
    a = np.array([[2.0, 1.0], [0.5, 3.0]], np.float32)
    y, t = fg.jvp(lambda m: np.linalg.matrix_power(m, 0), (a,), (np.ones_like(a),))
    assert y.dtype == np.float32 and np.array_equal(y, np.eye(2))


@pytest.mark.parametrize(
    "spec,shapes",
    [("ij,j->i", ((4, 3), (1,))), ("ij,jk->ik", ((4, 1), (3, 5))), ("ij,jk->ik", ((4, 3), (1, 5))),
     ("ij,ij->", ((1, 3), (4, 1)))],
)  # fmt: skip
def test_einsum_with_a_size_one_label_broadcast(spec, shapes):
    # einsum broadcasts a label of size 1 against the same label's size elsewhere: the other
    # operand's cotangent came out with the 1 (an internal reshape error)
    rng = np.random.default_rng(8)
    ops = [rng.standard_normal(s) for s in shapes]
    check_grads(lambda a, b: np.sum(np.einsum(spec, a, b) ** 2), ("rev", "fwd"), order=2)(*ops)


def test_an_einsum_contraction_path_is_searched_once_per_subscripts_and_shapes(monkeypatch):
    """A jit replay runs the pullbacks again: their einsum's path search (~30 us each) is done
    once for given subscripts and shapes."""
    from fusegrad.rules import linalg

    searched = []
    real = np.einsum_path
    monkeypatch.setattr(np, "einsum_path", lambda *a, **k: searched.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(linalg, "_PATHS", {})
    rng = np.random.default_rng(0)
    x, s = rng.standard_normal((200, 6, 5)), rng.standard_normal((6, 5, 5))

    def f(x, s):
        return np.sum(np.einsum("nki,kij,nkj->nk", x, s, x, optimize=True) ** 2)

    g1 = fg.grad(f, argnums=(0, 1))(x, s)
    first = len(searched)
    g2 = fg.grad(f, argnums=(0, 1))(x, s)
    assert first and len(searched) == first
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)
    m = np.einsum("nki,kij,nkj->nk", x, s, x)
    want_s = np.einsum("nk,nki,nkj->kij", 2 * m, x, x)
    np.testing.assert_allclose(g1[1], want_s, rtol=1e-12)

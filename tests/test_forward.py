"""Forward mode (issue 8): jvp by frules on every op family, second order in both modes, fusion,
zero tangents, errors."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import scipy.special as sp

import fusegrad as fg
from fusegrad.ad import conversions
from fusegrad.ad.forward import JVPTracer, NoForwardRuleError
from fusegrad.lazy import recording
from fusegrad.rules import registry
from fusegrad.rules.registry import FRULES, RRULES, register_rrule
from fusegrad.testing import check_frule, check_grads

pytestmark = pytest.mark.usefixtures("engine")  # every test on both engines


RNG = np.random.default_rng(8)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
V = RNG.standard_normal(4)
P = RNG.uniform(0.5, 2.0, (3, 4))  # positive
SQ = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
SPD = SQ @ SQ.T + np.eye(3)
U = RNG.uniform(-0.9, 0.9, (3, 4))  # inside (-1, 1)


# --------------------------------------------------------------------------------------------------
# check_grads(modes=("fwd", "rev"), order=2) on every op family
# --------------------------------------------------------------------------------------------------

ELEMENTWISE = {
    "sin*cos": (lambda x: np.sin(x) * np.cos(x), (A,)),
    "exp/tanh": (lambda x: np.exp(x) / (2 + np.tanh(x)), (A,)),
    "log/sqrt": (lambda x: np.log(x) + np.sqrt(x) + np.cbrt(x), (P,)),
    "power": (lambda x, y: np.power(x, y), (P, A)),
    "square/reciprocal": (lambda x: np.square(x) + np.reciprocal(x), (P,)),
    "arc": (lambda x: np.arcsin(x) + np.arccos(x) * 2 + np.arctan(x) + np.arctanh(x), (U,)),
    "hyperbolic": (lambda x: np.sinh(x) + np.cosh(x) + np.arcsinh(x), (A,)),
    "logaddexp": (lambda x, y: np.logaddexp(x, y) + np.logaddexp2(x, y), (A, A[::-1])),
    "arctan2/hypot": (lambda x, y: np.arctan2(x, y) + np.hypot(x, y), (A, P)),
    "broadcast": (lambda x, y: np.tanh(x[:, None] - y[None, :]), (V, A[0])),
    "expm1/log1p": (lambda x: np.expm1(x) * np.log1p(x), (P,)),
    "exp2/log2/log10": (lambda x: np.exp2(x) + np.log2(x) * np.log10(x), (P,)),
    "where": (lambda x: np.where(x > 0, np.sin(x), x**3), (A,)),
    "scipy": (lambda x: sp.expit(x) + sp.erf(x) + sp.log_expit(x), (A,)),
    "scalar-arg": (lambda x: 3.0 * x - x / 2.0 + 1.0, (A,)),
    "astype": (lambda x: np.sin(x.astype(np.float64)), (A,)),
}

REDUCTIONS = {
    "sum-axis": (lambda x: np.sum(np.sin(x) ** 2, axis=1), (A,)),
    "sum-keepdims": (lambda x: x * np.sum(x, axis=0, keepdims=True), (A,)),
    "mean": (lambda x: np.mean(np.exp(x), axis=0), (A,)),
    "prod": (lambda x: np.prod(x, axis=1), (P,)),
    "max/min": (lambda x: np.max(x, axis=0) - np.min(x**2, axis=1).sum(), (A,)),
    "var/std": (lambda x: np.var(x, axis=1) + np.std(x, axis=0, ddof=1).sum(), (A,)),
    "scalar": (lambda x: np.sum(np.exp(-((x[:, None] - x[None, :]) ** 2))), (V,)),
    "logsumexp-np": (lambda x: np.log(np.sum(np.exp(x - np.max(x)), axis=1)) + np.max(x), (A,)),
    "norm": (lambda x: np.linalg.norm(x, axis=1) + np.linalg.norm(x), (A,)),
    "norm-ord": (
        lambda x: np.linalg.norm(x.ravel(), ord=3) + np.linalg.norm(x, ord=np.inf, axis=1),
        (A,),
    ),
    "cumsum/cumprod": (lambda x: np.cumsum(x, axis=1) * np.cumprod(x, axis=0), (P,)),
}

LINALG = {
    "matmul": (lambda a, b: np.tanh(a @ b), (A, B)),
    "matvec": (lambda a, v: np.sin(a @ v), (A, V)),
    "dot/inner/outer": (
        lambda a, v: np.dot(a, v).sum() * np.inner(v, v) + np.outer(v, v).sum(),
        (A, V),
    ),
    "tensordot/vdot": (lambda a, b: np.tensordot(a, b, axes=1).sum() + np.vdot(a, a), (A, B)),
    "einsum": (lambda a, b: np.einsum("ij,jk->ik", a, b) ** 2, (A, B)),
    "trace": (lambda m: np.trace(m @ m), (SQ,)),
    "solve": (lambda m, b: np.linalg.solve(m, b), (SQ, B[:3])),
    "solve-vec": (lambda m, v: np.linalg.solve(m, v), (SQ, V[:3])),
    "inv": (lambda m: np.linalg.inv(m), (SQ,)),
    "det": (lambda m: np.linalg.det(m), (SQ,)),
    "slogdet": (lambda m: np.linalg.slogdet(m)[1], (SQ,)),
    "cholesky": (lambda m: np.linalg.cholesky(m @ m.T + np.eye(3)), (SQ,)),
    "eigh-values": (lambda m: np.linalg.eigh(m + m.T)[0], (SQ,)),
    "eigh-vectors": (lambda m: np.abs(np.linalg.eigh(m + m.T)[1][:, 0]).sum(), (SQ,)),
}

SHAPES = {
    "reshape/transpose": (lambda x: np.sin(np.reshape(x, (4, 3)).T), (A,)),
    "ravel/flip": (lambda x: np.flip(np.ravel(x)) * np.arange(12.0), (A,)),
    "swapaxes/moveaxis": (lambda x: np.moveaxis(np.swapaxes(x[None], 0, 2), 0, 1) ** 2, (A,)),
    "squeeze/expand_dims": (lambda x: np.squeeze(np.expand_dims(x, 0)) ** 3, (A,)),
    "broadcast_to": (lambda v: np.broadcast_to(v, (3, 4)) * A, (V,)),
    "concatenate/stack": (
        lambda x, y: np.concatenate([x, x**2], axis=1).sum() + np.stack([x, y]) ** 2,
        (A, A[::-1]),
    ),
    "split": (lambda x: np.split(x, 2, axis=1)[1] * np.array_split(x, 3)[0].sum(), (A,)),
    "tile/repeat": (lambda x: np.tile(x, (2, 1)) ** 2 + np.repeat(x, 2, axis=0), (A,)),
    "roll/pad": (lambda x: np.roll(x, 1, axis=1) * np.pad(x, 1)[1:-1, 1:-1], (A,)),
    "triu/tril": (lambda m: np.triu(m) ** 2 + np.tril(m, -1), (SQ,)),
    "diff/sort": (lambda x: np.diff(x**2, axis=1).sum() + np.sort(x, axis=0), (A,)),
}

INDEXING = {
    "basic": (lambda x: x[1:, ::2] ** 2 + x[0, 1], (A,)),
    "none/ellipsis": (lambda x: np.sin(x[None, ..., 1]), (A,)),
    "advanced": (lambda x: x[[0, 2, 2]] ** 2, (A,)),
    "mask": (lambda x: np.sum(x[x > 0] ** 3), (A,)),
    "take": (lambda x: np.take(x, [3, 0, 0], axis=1) ** 2, (A,)),
    "take_along_axis": (
        lambda x: np.take_along_axis(x, np.argsort(x, axis=1), axis=1) ** 2,
        (A,),
    ),
    "diagonal/diag": (lambda m: np.diagonal(m) ** 2 + np.diag(np.diag(m)).sum(), (SQ,)),
    "iterate": (lambda v: sum(e**2 for e in v), (V,)),
}


def _cases(table):
    return [pytest.param(f, args, id=name) for name, (f, args) in table.items()]


@pytest.mark.parametrize(
    "fun, args",
    _cases(ELEMENTWISE) + _cases(REDUCTIONS) + _cases(LINALG) + _cases(SHAPES) + _cases(INDEXING),
)
def test_check_grads_fwd_rev_order2(fun, args):
    check_grads(fun, modes=("fwd", "rev"), order=2)(*args)


def test_hstack_vstack():
    # Reverse-over-reverse fails in the hstack/vstack rrules themselves (they call np.atleast_1d /
    # np.atleast_2d, which has no rule, on traced arguments): order 2 forward, order 1 reverse.
    def f(x):
        return np.hstack([x, x]) * np.vstack([x, x]).sum()

    check_grads(f, modes=("fwd",), order=2)(A)
    check_grads(f, modes=("fwd", "rev"), order=1)(A)


def test_nuclear_and_matrix_2_norms():
    # First order only: their rules use the SVD, which has no rule of its own.
    for o in ("nuc", 2):
        check_grads(lambda x, o=o: np.linalg.norm(x, ord=o), modes=("fwd", "rev"), order=1)(A)


def test_every_rrule_has_an_frule():
    assert registry.missing_frules() == []
    own = [f for f, (r, _) in RRULES.items() if r.__module__.startswith("fusegrad.rules")]
    assert len(own) > 100 and all(f in FRULES for f in own)


@pytest.mark.parametrize(
    "f, args",
    [
        (np.sin, (A,)),
        (np.multiply, (A, A[0])),
        (np.sum, (A,)),
        (np.linalg.solve, (SQ, B[:3])),
        (np.concatenate, ([A, A],)),
        (operator.getitem, (A, (slice(1, None), 0))),
        (sp.logsumexp, (A,)),
        (np.cumprod, (np.array([1.5, 0.0, 2.0, -1.0]),)),
    ],
)
def test_check_frule(f, args):
    check_frule(f, *args)


@pytest.mark.parametrize("f", [np.linalg.cholesky, np.linalg.eigh])
def test_check_frule_symmetric(f):
    # Symmetric-input rules are checked along symmetric tangents (NumPy reads one triangle).
    t = RNG.standard_normal((3, 3))
    check_frule(f, SPD, tangents=(t + t.T,))


# --------------------------------------------------------------------------------------------------
# jvp semantics
# --------------------------------------------------------------------------------------------------


def test_jvp_matches_hand_derived():
    x, v = A, RNG.standard_normal(A.shape)
    out, t = fg.jvp(lambda x: np.sum(np.sin(x) * x, axis=1), (x,), (v,))
    np.testing.assert_allclose(out, np.sum(np.sin(x) * x, axis=1))
    np.testing.assert_allclose(t, np.sum((np.cos(x) * x + np.sin(x)) * v, axis=1))


def test_jvp_pytrees_scalars_and_dtypes():
    params = {"w": np.ones(3), "b": 0.5}
    out, t = fg.jvp(
        lambda p: np.sum(p["w"] * 2.0) + p["b"] ** 2, (params,), ({"w": np.arange(3.0), "b": 1.0},)
    )
    assert out == 6.25 and t == pytest.approx(2 * 3 + 1.0)
    x32 = np.ones(3, np.float32)
    out, t = fg.jvp(np.exp, (x32,), (np.ones(3, np.float32),))
    assert out.dtype == np.float32 and t.dtype == np.float32
    out, t = fg.jvp(lambda x: x**2, (3.0,), (1.0,))
    assert (out, t) == (9.0, 6.0)
    out, t = fg.jvp(lambda x, y: (x * y, y), (2.0, 5.0), (1.0, 0.0))
    assert out == (10.0, 5.0) and t == (5.0, 0.0)


def test_jvp_constant_output_and_zero_tangents():
    out, t = fg.jvp(lambda x: np.ones(3), (A,), (np.ones_like(A),))
    np.testing.assert_array_equal(t, np.zeros(3))
    out, t = fg.jvp(lambda x: np.sin(x), (A,), (fg.ZeroTangent(),))
    np.testing.assert_array_equal(t, np.zeros_like(A))


def test_zero_tangents_short_circuit_without_a_rule():
    calls = []

    @fg.rules.registry.primitive
    def no_frule(x):
        calls.append(1)
        return x * 2

    @register_rrule(no_frule)
    def _(x):
        return no_frule(x), lambda dy: (2 * dy,)

    # No forward rule, but its argument carries no tangent: it just runs.
    out, t = fg.jvp(lambda x: x * no_frule(A), (A,), (np.ones_like(A),))
    np.testing.assert_allclose(t, 2 * A)
    with pytest.raises(
        NoForwardRuleError, match=r"(?s)no forward rule for .*no_frule.*register_frule"
    ):
        fg.jvp(no_frule, (A,), (np.ones_like(A),))


@fg.primitive
def reverse_only(m):
    return 2 * m


@fg.register_rrule(reverse_only)
def _reverse_only(m):
    return reverse_only(m), lambda dy: (2 * dy,)


def test_missing_frule_error_names_the_function():
    with pytest.raises(TypeError, match=r"(?s)reverse_only.*register_frule"):
        fg.jvp(reverse_only, (SQ,), (np.ones_like(SQ),))


def test_jvp_errors():
    with pytest.raises(ValueError, match="2 primals and 1 tangents"):
        fg.jvp(np.add, (A, A), (A,))
    with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(3, 4\)"):
        fg.jvp(np.sin, (A,), (np.ones(2),))
    # np.asarray stays traced inside jvp (fusegrad.ad.conversions); NumPy's own refuses
    _, t = fg.jvp(lambda x: np.asarray(x) * 2, (A,), (A,))
    np.testing.assert_allclose(t, 2 * A)
    numpy_asarray = conversions.ORIGINALS["asarray"]
    with pytest.raises(TypeError, match="converted to a NumPy array"):
        fg.jvp(lambda x: numpy_asarray(x), (A,), (A,))


def test_tracer_type_and_repr():
    seen = []
    fg.jvp(lambda x: seen.append(x) or x, (1.0,), (2.0,))
    assert isinstance(seen[0], JVPTracer) and "tangent=2.0" in repr(seen[0])
    assert seen[0].shape == () and seen[0].dtype == np.float64


# --------------------------------------------------------------------------------------------------
# Fusion: the tangent is lazy and shares the primal's kernel
# --------------------------------------------------------------------------------------------------


def _kernels(rec):
    return [e for e in rec if e["event"] == "kernel"]


def test_jvp_of_gaussian_kernel_sum_is_one_kernel():
    n = 300
    x = RNG.standard_normal(n)
    v = RNG.standard_normal(n)

    def f(x):
        return np.sum(np.exp(-((x[:, None] - x[None, :]) ** 2)))

    with recording() as rec:
        out, t = fg.jvp(f, (x,), (v,))
    kernels = _kernels(rec)
    assert len(kernels) == 1, kernels
    assert tuple(kernels[0]["domain"]) == (n, n)
    d = x[:, None] - x[None, :]
    e = np.exp(-(d**2))
    np.testing.assert_allclose(out, e.sum(), rtol=1e-12)
    np.testing.assert_allclose(t, np.sum(e * -2 * d * (v[:, None] - v[None, :])), atol=1e-8)


def test_jvp_row_reduction_value_and_tangent_share_a_kernel():
    x = RNG.standard_normal((200, 50))
    v = RNG.standard_normal((200, 50))
    with recording() as rec:
        out, t = fg.jvp(lambda x: np.sum(np.tanh(x) ** 2, axis=1), (x,), (v,))
    assert len(_kernels(rec)) == 1
    np.testing.assert_allclose(t, np.sum(2 * np.tanh(x) * (1 - np.tanh(x) ** 2) * v, axis=1))


def test_an_integer_primal_takes_a_zero_tangent_only():
    # a nonzero tangent of an int primal was dropped: jvp(f, (3,), (1.0,)) gave a 0 derivative
    f = lambda x: x * 2.5 + x**2  # noqa: E731
    with pytest.raises(TypeError, match="nonzero tangent for a primal of dtype int"):
        fg.jvp(f, (3,), (1.0,))
    with pytest.raises(TypeError, match="dtype int64"):
        fg.jvp(f, (np.arange(3),), (np.ones(3),))
    assert fg.jvp(f, (np.arange(3),), (np.zeros(3),))[1].tolist() == [0.0, 0.0, 0.0]
    assert fg.jvp(f, (3.0,), (1.0,))[1] == 8.5


@pytest.mark.parametrize("f", [np.sign, np.floor, np.round, lambda a: np.ones(3)])
def test_grad_of_a_jvp_whose_tangent_is_zero(f):
    # the jvp's zero tangent came back as ZeroTangent under an outer grad, and the user's
    # arithmetic on it raised
    x, v = np.array([0.3, -1.2, 2.5]), np.ones(3)
    g = fg.grad(lambda a: np.sum(fg.jvp(f, (a,), (v,))[1] * np.array([1.0, 2.0, 3.0])))(x)
    assert g.tolist() == [0.0, 0.0, 0.0]


def test_jvp_results_are_the_callers_to_keep():
    # a * 1.0 handed the caller's tangent back as the output tangent: writing into it changed v
    x, v = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    for f in (lambda a: a * 1.0, lambda a: a.reshape(2, 1) + 0.0, lambda a: a[::-1] * 1.0):
        y, t = fg.jvp(f, (x,), (v,))
        assert not np.may_share_memory(t, v) and not np.may_share_memory(y, x)
        t[...] = -1.0
        y[...] = -1.0
        assert v.tolist() == [3.0, 4.0] and x.tolist() == [1.0, 2.0]

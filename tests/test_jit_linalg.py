"""``jit`` of gradients through the linear algebra that reads values for constants (SciPy's
vector signs, ranks, pivots, residuals' presence): the reads are steps of the recorded program
(``rules.common.on_values``), so the program replays, with no warning, and a replay recomputes
those constants from the new inputs (new arrays and arrays changed in place alike)."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import fusegrad as fg
from fusegrad.rules.common import on_values

B = np.random.default_rng(1).normal(size=6)
W6 = np.linspace(-1.0, 2.0, 6)
W3 = np.array([0.5, -1.0, 2.0])


def _sym(a):
    return a.T @ a + np.diag([0.0, 1.0, 3.0])


def _spd(a):
    return a[:3].T @ a[:3] + 3 * np.eye(3)


def _square(a):
    return a[:3] + 0.5 * a[3:].T


def _fixed(v):
    """Columns ``v[:, j] conj(v[0, j])``: free of the sign (phase) a decomposition picks, so
    finite differences of SciPy's own vectors (whose signs may flip between nearby matrices)
    check the derivative; jit and eager are compared on the vectors themselves too."""
    return np.real(v * np.conj(v[:1]))


# f(A) for a 6x3 A: every function under test, with what its constants are read for
CASES = {
    "np.lstsq": lambda a: np.sum(np.linalg.lstsq(a, B, rcond=None)[0] ** 2),
    "np.lstsq residuals": lambda a: np.sum(np.linalg.lstsq(a, B, rcond=None)[1]),
    "sl.lstsq": lambda a: np.sum(sl.lstsq(a, B)[0] * W3),
    "sl.lstsq residues": lambda a: np.sum(sl.lstsq(a, B)[1]),
    "sl.eigh values": lambda a: np.sum(sl.eigh(_sym(a))[0] * W3),
    "sl.eigh vectors": lambda a: np.sum(_fixed(sl.eigh(_sym(a))[1]) @ W3),
    "sl.eigh generalized": lambda a: np.sum(_fixed(sl.eigh(_sym(a), _spd(a))[1]) @ W3),
    "sl.eigh subset": lambda a: np.sum(_fixed(sl.eigh(_sym(a), subset_by_index=(1, 2))[1])),
    "sl.eigvalsh": lambda a: np.sum(sl.eigvalsh(_sym(a)) ** 2),
    "sl.eig vectors": lambda a: np.sum(_fixed(sl.eig(_sym(a) + np.tril(a[:3], -1))[1]) @ W3),
    "sl.eig left": lambda a: np.sum(_fixed(sl.eig(_sym(a), left=True, right=False)[1]) @ W3),
    "sl.eigvals": lambda a: np.sum(np.real(sl.eigvals(_sym(a))) * W3),
    "sl.svd vectors": lambda a: np.sum(_fixed(sl.svd(a, full_matrices=False)[0]) @ W3),
    "sl.svd full": lambda a: np.sum(W6 @ sl.svd(a)[0][:, :3] * sl.svd(a)[2][:, 0]),
    "sl.svd values": lambda a: np.sum(sl.svd(a, compute_uv=False)),
    "sl.polar": lambda a: np.sum(sl.polar(_square(a))[0] @ W3),
    "sl.null_space": lambda a: np.sum(sl.null_space(a[:2]) ** 3),
    "sl.orth": lambda a: np.sum(W6 @ sl.orth(a)),
    "sl.qr economic": lambda a: np.sum(sl.qr(a, mode="economic")[1] @ W3),
    "sl.qr full": lambda a: np.sum(W6 @ sl.qr(a)[0][:, :3]) + np.sum(sl.qr(a)[1] ** 2),
    "sl.qr r": lambda a: np.sum(sl.qr(a, mode="r")[0] @ W3),
    "sl.qr pivoting": lambda a: np.sum(sl.qr(a, mode="economic", pivoting=True)[1] @ W3),
    "sl.lu_factor": lambda a: np.sum(sl.lu_solve(sl.lu_factor(_square(a)), a.T @ B) * W3),
    "sl.lu_solve trans": lambda a: np.sum(sl.lu_solve(sl.lu_factor(_square(a)), W3, trans=1)),
    "sl.lu": lambda a: np.sum(sl.lu(_square(a))[1] @ W3) + np.sum(sl.lu(_square(a))[2] ** 2),
    "sl.lu permute_l": lambda a: np.sum(sl.lu(_square(a), permute_l=True)[0] @ W3),
    "sl.pinv": lambda a: np.sum(sl.pinv(a) @ W6),
    "sl.pinv rank": lambda a: np.sum(sl.pinv(a, return_rank=True)[0] ** 2),
}


def _inputs():
    """Four calls' inputs: new arrays, one changed in place between calls (the jitted function
    keeps nothing of the recording's values: pivots and signs differ between them)."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(6, 3))
    yield a
    a = rng.normal(size=(6, 3))
    yield a
    a[...] = rng.normal(size=(6, 3))  # in place
    yield a
    yield rng.normal(size=(6, 3))


def _finite_difference(f, a, d, h=1e-6):
    return (f(a + h * d) - f(a - h * d)) / (2 * h)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_of_grad_replays(name):
    f = CASES[name]
    g = fg.grad(f)
    jg = fg.jit(g)
    d = np.random.default_rng(3).normal(size=(6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a in _inputs():
            got = jg(a)
            want = g(a)
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
            fd = _finite_difference(f, a.copy(), d)
            np.testing.assert_allclose(np.sum(got * d), fd, rtol=1e-5, atol=1e-7)
    (info,) = jg.cache_info().entries
    assert info.replayable, info.reason
    assert info.calls == 4


def test_pivots_change_between_the_calls():
    """The inputs above do exercise recomputed constants: LU pivots and QR column orders differ."""
    a0, a1, *_ = _inputs()
    assert not np.array_equal(sl.lu_factor(_square(a0))[1], sl.lu_factor(_square(a1))[1])
    assert not np.array_equal(sl.qr(a0, pivoting=True)[2], sl.qr(a1, pivoting=True)[2])


def test_a_changed_rank_is_replayed():
    """SciPy's rank decides which singular values pinv keeps: a replay reads it again from the
    new input (a step), so a rank-deficient input replays what eager gives."""
    f = lambda a: np.sum(sl.pinv(a) @ W6)  # noqa: E731
    jg = fg.jit(fg.grad(f))
    a = np.random.default_rng(2).normal(size=(6, 3))
    low = a.copy()
    low[:, 2] = low[:, 0] + low[:, 1]  # rank 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (a, low, a, low):
            np.testing.assert_allclose(jg(x), fg.grad(f)(x), rtol=1e-10, atol=1e-12)
    (info,) = jg.cache_info().entries
    assert info.replayable, info.reason


def test_a_changed_subset_size_is_found():
    """eigh's subset by value keeps SciPy's count: a replay whose count differs is found (its
    shapes do not match the recording's) and the function is called from then on."""
    f = lambda a: np.sum(sl.eigh(_sym(a), subset_by_value=(2.0, np.inf))[0])  # noqa: E731
    jg = fg.jit(fg.grad(f))
    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(6, 3)) for _ in range(6)]
    counts = {len(sl.eigvalsh(_sym(x), subset_by_value=(2.0, np.inf))) for x in xs}
    assert len(counts) > 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in xs:
            np.testing.assert_allclose(jg(x), fg.grad(f)(x), rtol=1e-10, atol=1e-12)


def test_lstsq_rank_under_jit_is_an_array():
    """The rank SciPy gives as a Python int is a 0-d array while jit records (a replay hands
    arrays on); the jitted function returns it as the rank of each call's input. (SciPy gives
    residues only at full rank: the replay at rank 2 finds their shape changed and calls the
    function from then on, with a warning.)"""

    def f(a):
        x, _, rank, _ = sl.lstsq(a, B)
        return np.sum(x**2), rank

    jf = fg.jit(fg.value_and_grad(f, has_aux=True))
    a = np.random.default_rng(2).normal(size=(6, 3))
    low = a.copy()
    low[:, 2] = low[:, 0] + low[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, rank in ((a, 3), (a * 2, 3), (low, 2), (a, 3)):
            (_, got), _ = jf(x)
            assert int(got) == rank
    assert sl.lstsq(a, B)[2] == 3  # outside jit, SciPy's int
    assert type(sl.lstsq(a, B)[2]) is int


def test_on_values_is_a_step():
    f = lambda a: np.sum(a * on_values(np.sign, a * 1.0))  # noqa: E731
    jg = fg.jit(fg.grad(f))
    np.testing.assert_array_equal(jg(np.array([-2.0, 3.0])), [-1.0, 1.0])
    np.testing.assert_array_equal(jg(np.array([2.0, -3.0])), [1.0, -1.0])
    (info,) = jg.cache_info().entries
    assert info.replayable, info.reason

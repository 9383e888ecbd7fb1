"""Issue 6's memory targets 1-9: the fused reverse pass allocates what the answer costs.

Every case runs on both engines (numba skipped when it cannot be imported), in float64, with
``track_allocations()`` and the planner's record (``fusegrad.lazy.recording()``).

How the bounds prove the targets: ``peak_bytes`` is the highest NumPy + Python memory above the
level at entry, temporaries included. An "N-array" here is ``8 N`` bytes; the numpy engine's
block buffers and Python's own objects add a fraction of that, so "exactly one N-array" is
``peak < 1.75 N-arrays`` (a second one alive at once would make it at least 2), and "no
N²-array" is ``peak < N²-array / 4``. A temporary freed before the gradient is allocated would
hide under the gradient's own bytes, so each case also checks, from the record, that no kernel
wrote more than the gradient. ``grad`` leaves the output value unevaluated, so only backward
kernels appear (they recompute what they need).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy.engines.registry import WHOLE_MAX
from fusegrad.memory import track_allocations

N1 = 20_000  # 1-D cases: a 160 kB N-array
N2 = 2_000  # N² cases: a 32 MB N²-array, a 16 kB N-array


def measure(fun, *args, argnums=0):
    """Run ``grad`` once to warm up (compilation), then once under record and tracking."""
    g = fg.grad(fun, argnums)
    g(*args)
    with fl.recording() as rec, track_allocations() as mem:
        out = g(*args)
    kernels = [e for e in rec if e["event"] == "kernel"]
    return out, kernels, mem


def rng():
    return np.random.default_rng(6)


def n_bytes(n):
    return 8 * n


# 1. grad(sum((1 - x) / 2)): exactly one N-array, the gradient.
def test_case1_one_n_array(engine):
    x = rng().standard_normal(N1)
    g, kernels, mem = measure(lambda x: np.sum((1 - x) / 2), x)
    np.testing.assert_array_equal(g, np.full(N1, -0.5))
    assert mem.peak_bytes < 1.75 * n_bytes(N1), mem
    assert mem.arrays_at_least(n_bytes(N1) // 4) == 1
    assert [k["bytes"] for k in kernels] == [n_bytes(N1)]
    assert all(k["engine"] == engine for k in kernels)


# 2. grad(sum((v[:, None] - v[None, :]) / 2)): no N²-array, at most three N-arrays; and O(N)
#    work: the reduction over axes along which the cotangent does not vary is a multiplication.
def test_case2_no_n2_array_and_linear_work(engine):
    v = rng().standard_normal(N2)
    g, kernels, mem = measure(lambda v: np.sum((v[:, None] - v[None, :]) / 2), v)
    np.testing.assert_allclose(g, np.zeros(N2), atol=1e-9)
    assert mem.peak_bytes < 3.5 * n_bytes(N2), mem
    assert all(np.prod(k["domain"]) <= N2 for k in kernels), kernels


# 3. grad(sum(tanh(v[:, None] - v[None, :]))): no N²-array.
def test_case3_no_n2_array(engine):
    v = rng().standard_normal(N2)
    g, kernels, mem = measure(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), v)
    t = 1 - np.tanh(v[:, None] - v[None, :]) ** 2
    np.testing.assert_allclose(g, t.sum(axis=1) - t.sum(axis=0), rtol=1e-9, atol=1e-9)
    assert mem.peak_bytes < n_bytes(N2 * N2) / 4, mem
    # the row and column sums and their sum are one mirrored sum, in one kernel: no other
    (big,) = kernels
    assert big["domain"] == (N2, N2)
    assert [(o[0], o[2]) for o in big["outputs"]] == [("mirrored sum", (N2,))]
    assert big["bytes"] == n_bytes(N2)


# 3, at the memory floor (issue 6's benchmark target: within 10% of inputs plus gradient, 125 KiB
# at N = 8000). The numba engine adds into the gradient directly; the numpy engine, the reference,
# keeps the row and column sums apart. ``peak_bytes`` counts Python objects too: ``fusegrad.jit``
# replays the kernel with few of them, and is within the target; a plain ``grad`` holds its
# trace's objects (~30 kB, whatever N), so for it the bound is on what a larger N adds.
@pytest.mark.slow  # six gradient calls over 16000×16000 and 8000×8000
def test_case3_at_the_memory_floor(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")

    def f(v):
        return np.sum(np.tanh(v[:, None] - v[None, :]))

    plain, jitted = fg.grad(f), fg.jit(fg.grad(f))
    peaks = {}
    for n in (8000, 16000):
        v = rng().standard_normal(n)
        floor = 2 * n_bytes(n)  # input + gradient
        with fl.use_engine("numba"):
            for g in (plain, jitted):
                g(v), g(v)  # compiled, traced, recorded
                with track_allocations() as mem:
                    out = g(v)
                assert np.abs(out).max() < 1e-9 * n  # the exact gradient is 0: sech² is even
                assert mem.count == 1 and mem.total_bytes == n_bytes(n), mem  # the gradient only
                peaks[n, g is jitted] = mem.peak_bytes
        assert n_bytes(n) + peaks[n, True] <= 1.10 * floor, peaks
    grown = peaks[16000, False] - peaks[8000, False]
    assert grown <= n_bytes(16000 - 8000) + 0.1 * 2 * n_bytes(16000 - 8000), peaks
    assert peaks[8000, False] < n_bytes(8000) + 48_000, peaks  # the gradient and the trace


def _case4(x, y, s):
    return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


# 4. no N²-array; the x and y gradients (and here s's too) come from one pass over N×N.
def test_case4_one_pass_for_all_gradients(engine):
    r = rng()
    x, y, s = r.standard_normal(N2), r.standard_normal(N2), 0.8
    (gx, gy, gs), kernels, mem = measure(_case4, x, y, s, argnums=(0, 1, 2))
    d = x[:, None] - y[None, :]
    e = np.exp(-(d**2) / (2 * s**2))
    np.testing.assert_allclose(gx, (-e * d / s**2).sum(axis=1), rtol=1e-9)
    np.testing.assert_allclose(gy, (e * d / s**2).sum(axis=0), rtol=1e-9)
    np.testing.assert_allclose(gs, (e * d**2 / s**3).sum(), rtol=1e-9)
    assert isinstance(gs, float)
    assert mem.peak_bytes < n_bytes(N2 * N2) / 4, mem
    (big,) = [k for k in kernels if k["domain"] == (N2, N2)]
    assert big["engine"] == engine
    assert sorted(o[1] for o in big["outputs"]) == [(0,), (0, 1), (1,)]
    assert big["ops"].count("exp") == 1


# 5. grad(sum(2x) + sum(3x)): one N-array.
def test_case5_one_n_array(engine):
    x = rng().standard_normal(N1)
    g, kernels, mem = measure(lambda x: np.sum(2 * x) + np.sum(3 * x), x)
    np.testing.assert_array_equal(g, np.full(N1, 5.0))
    assert mem.peak_bytes < 1.75 * n_bytes(N1), mem
    assert [k["bytes"] for k in kernels] == [n_bytes(N1)]


# 6. grad(sum(x * y), argnums=0): the cotangent for y is never evaluated.
def test_case6_unused_cotangent_never_evaluated(engine):
    r = rng()
    x, y = r.standard_normal(N1), r.standard_normal(N1)
    g, kernels, mem = measure(lambda x, y: np.sum(x * y), x, y)
    np.testing.assert_array_equal(g, y)
    assert g is not y
    assert mem.peak_bytes < 1.75 * n_bytes(N1), mem
    assert [k["bytes"] for k in kernels] == [n_bytes(N1)]  # only x's gradient was computed


def _exp_evaluations(kernels):
    return sum(k["ops"].count("exp") * int(np.prod(k["domain"])) for k in kernels)


# 7. grad(sum(exp(x)**2)): exp at most once per element forward and once more in reverse. At
#    N1 points numpy_blocked runs the kernel as one block (registry.WHOLE_MAX: up to 2^16 points,
#    where fresh per-block buffers cost more than the memory saved) and may hold two temporaries
#    of the domain; above WHOLE_MAX the blocked loop holds only block buffers.
@pytest.mark.parametrize("n", [N1, 2 * WHOLE_MAX])
@pytest.mark.parametrize("with_value", [False, True])
def test_case7_exp_evaluated_at_most_twice(engine, with_value, n):
    x = rng().standard_normal(n) / 4
    f = lambda x: np.sum(np.exp(x) ** 2)  # noqa: E731
    vg = fg.value_and_grad(f) if with_value else fg.grad(f)
    vg(x)
    with fl.recording() as rec, track_allocations() as mem:
        out = vg(x)
    g = out[1] if with_value else out
    np.testing.assert_allclose(g, 2 * np.exp(2 * x), rtol=1e-12)
    kernels = [e for e in rec if e["event"] == "kernel"]
    assert _exp_evaluations(kernels) <= (2 if with_value else 1) * n
    whole_block = 2 * n_bytes(n) if engine == "numpy" and n <= WHOLE_MAX else 0
    assert mem.peak_bytes < 1.75 * n_bytes(n) + whole_block, mem


# 8. grad(sum(log1p(exp(A @ b)))): the large allocations are A @ b and the gradients; the chain
#    after the matmul allocates one cotangent of its size, handed to the matmul rule.
@pytest.mark.parametrize("shape", [(N1, 5), (N2, N2)], ids=["tall", "square"])
def test_case8_chain_after_matmul(engine, shape):
    m, k = shape
    r = rng()
    A, b = r.standard_normal(shape) / np.sqrt(k), r.standard_normal(k)
    (gA, gb), kernels, mem = measure(
        lambda A, b: np.sum(np.log1p(np.exp(A @ b))), A, b, argnums=(0, 1)
    )
    sig = 1 / (1 + np.exp(-(A @ b)))
    np.testing.assert_allclose(gA, np.outer(sig, b), rtol=1e-10)
    np.testing.assert_allclose(gb, A.T @ sig, rtol=1e-10)
    # gradients (m·k + k) + A @ b (m) + one cotangent (m), plus block buffers and Python
    # objects (tens of kB, which matter next to the 16 kB N-arrays of the square case)
    floor = n_bytes(m * k + k + 2 * m)
    assert mem.peak_bytes < floor + n_bytes(m) * 0.75 + 32_768, (mem, floor)
    assert [kk["domain"] for kk in kernels] == [(m,)]
    assert kernels[0]["bytes"] == n_bytes(m)


# 9. lazy and non-lazy ops mixed: X @ w, fancy and basic indexing, np.sort.
def _case9(w, X):
    z = np.tanh(X @ w)  # lazy after a matmul
    s = np.sort(z)  # needs an array
    idx = np.array([0, 3, 3, 7])
    pick = np.exp(w[idx])  # fancy indexing, then lazy again
    return np.sum(s[::2] * np.sum(pick)) + np.sum(z[idx] ** 2) + np.sum(X[1:3] @ (w * w))


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_case9_mixed_lazy_and_eager_ops(engine):
    r = rng()
    w, X = r.standard_normal(9), r.standard_normal((40, 9)) / 3
    gw, gX = fg.grad(_case9, argnums=(0, 1))(w, X)
    np.testing.assert_allclose(gw, _fd(lambda w: _case9(w, X), w), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gX, _fd(lambda X: _case9(w, X), X), rtol=1e-6, atol=1e-7)

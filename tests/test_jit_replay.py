"""How ``jit`` replays ordinary programs: matmul as bare BLAS steps (checked against its rule
when recorded), degenerate products fused into kernels, kernels of one domain merged into one
pass, and engines re-chosen once a program is hot. Every case is checked against ``grad`` and
hand-derived gradients on new values at each call, and results stay fresh arrays."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad import direct_matmul
from fusegrad.bench import workloads
from fusegrad.lazy import asarray, materialize, replay, small
from fusegrad.lazy.engines import numba_engine

# (shape of a, shape of b): real products, then degenerate ones (a contraction of length 1,
# one row or one column, a vector operand)
SHAPES = [
    ((5, 3), (3, 4)),
    ((5, 3), (3,)),
    ((3,), (3, 4)),
    ((5, 1), (1, 4)),
    ((5, 3), (3, 1)),
    ((1, 3), (3, 4)),
    ((1, 1), (1, 1)),
]


def _loss(a, b):
    return np.sum(np.sin(a @ b) * 0.5 + (a @ b) ** 2)


def _by_hand(a, b):
    """d/da and d/db of ``_loss`` (1-d operands promoted as matmul promotes them)."""
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    y = a2 @ b2
    dy = 0.5 * np.cos(y) + 2 * y
    return (dy @ b2.T).reshape(a.shape), (a2.T @ dy).reshape(b.shape)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("argnums", [(0, 1), 0, 1])
def test_matmul_replays_as_its_rule_on_every_shape(shapes, argnums):
    rng = np.random.default_rng(len(str(shapes)))
    g = fg.grad(_loss, argnums=argnums)
    jg = fg.jit(g)
    for _ in range(3):
        a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
        got, want = jg(a, b), g(a, b)
        hand = _by_hand(a, b)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        hand = hand if argnums == (0, 1) else (hand[argnums],)
        for x, w, h in zip(got, want, hand):
            assert type(x) is np.ndarray and x.shape == h.shape and x.base is None
            np.testing.assert_allclose(x, w, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(x, h, rtol=1e-12, atol=1e-13)
    (info,) = jg.cache_info()
    assert info.replayable, info.reason
    assert jg.cache_info().hits == 2


@pytest.mark.parametrize("dtypes", [("f4", "f4"), ("f4", "f8"), ("f8", "f4")])
def test_matmul_of_float32_and_mixed_dtypes_replays_with_grads_dtypes(dtypes):
    rng = np.random.default_rng(3)
    g = fg.grad(_loss, argnums=(0, 1))
    jg = fg.jit(g)
    for _ in range(3):
        a = rng.normal(size=(6, 4)).astype(dtypes[0])
        b = rng.normal(size=(4, 3)).astype(dtypes[1])
        for x, w in zip(jg(a, b), g(a, b)):
            assert x.dtype == w.dtype and x.shape == w.shape
            np.testing.assert_allclose(x, w, rtol=1e-5 if "f4" in dtypes else 1e-12)
    assert jg.cache_info()[0].replayable


def test_a_direct_step_that_disagrees_with_its_reference_replays_the_reference():
    # a fast function that is wrong on these operands must not be trusted: the step is the rule
    def wrong(a, b):
        return [np.matmul(a, b) + 1.0]

    def rule(a, b):
        return [np.matmul(a, b)]

    x, m = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    rec = replay.Recorder([x])
    with rec, replay.sanctioned(), small.fusing():
        (y,) = replay.step(wrong, (x, m), {}, lambda v: v, True, rule)
        program = rec.program([materialize(y * 2.0)])
    for new in (np.ones((2, 3)), np.linspace(0, 1, 6).reshape(2, 3)):
        np.testing.assert_array_equal(program.run([new])[0], 2 * (new @ m))


def test_the_mlp_and_a_one_column_readout_replay_by_hand():
    # the MLP of the benchmarks (W2 has one column: its products are fused into kernels) and an
    # RNN read out by a vector (h @ wo, whose gradient is reshaped from a matrix)
    rng = np.random.default_rng(8)

    def mlp(W1, b1, W2, b2, X, y):
        return np.mean((np.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)

    def rnn(Wx, Wh, b, wo, xs, y):
        h = np.tanh(xs[0] @ Wx + b)
        for t in range(1, xs.shape[0]):
            h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        return np.mean((h @ wo - y) ** 2)

    jm = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
    jr = fg.jit(fg.grad(rnn, argnums=(0, 1, 2, 3)))
    for _ in range(3):
        W1, b1, W2, b2 = (rng.normal(size=s) for s in ((7, 9), (9,), (9, 1), (1,)))
        X, y = rng.normal(size=(11, 7)), rng.normal(size=(11, 1))
        a = np.tanh(X @ W1 + b1)
        dout = (a @ W2 + b2 - y) * (2.0 / y.size)
        dz = (dout @ W2.T) * (1 - a * a)
        want = (X.T @ dz, dz.sum(0), a.T @ dout, dout.sum(0))
        for got, w in zip(jm(W1, b1, W2, b2, X, y), want):
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
        Wx, Wh, b, wo = (0.5 * rng.normal(size=s) for s in ((3, 5), (5, 5), (5,), (5,)))
        xs, yr = rng.normal(size=(6, 4, 3)), rng.normal(size=4)
        want = fg.grad(rnn, argnums=(0, 1, 2, 3))(Wx, Wh, b, wo, xs, yr)
        for got, w in zip(jr(Wx, Wh, b, wo, xs, yr), want):
            assert got.base is None
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
    for f in (jm, jr):
        (info,) = f.cache_info()
        assert info.replayable, info.reason


def test_a_later_kernel_of_the_same_domain_runs_in_the_earlier_one():
    # y = x * x is one materialisation, its column sums another that reads y back: the replay
    # computes both in one pass, and both results stay right and fresh
    x = np.arange(12.0).reshape(3, 4)
    rec = replay.Recorder([x])
    with rec, replay.sanctioned(), small.fusing():
        y = asarray(x) * asarray(x)
        ys = materialize(y)
        total = materialize(np.sum(asarray(ys) + 1.0, axis=0))
        program = rec.program([ys, total])
    assert len(program.steps) == 2 and program.kernels == 1
    new = np.linspace(-1, 1, 12).reshape(3, 4)
    got_y, got_t = program.run([new])
    np.testing.assert_array_equal(got_y, new * new)
    np.testing.assert_allclose(got_t, np.sum(new * new + 1.0, axis=0), rtol=1e-15)
    again = program.run([new])
    assert again[0] is not got_y and not np.shares_memory(again[0], got_y)


def test_a_kernel_reading_a_step_made_after_an_earlier_kernel_is_not_merged_into_it():
    # z = x * 2 (kernel), w = z @ m (a step), u = w + z (a kernel of z's domain reading w): u
    # cannot run inside z's kernel, since w does not exist yet there
    m = np.arange(16.0).reshape(4, 4) / 10
    f = fg.jit(lambda x: (lambda z: z @ m + z)(x * 2.0))
    for k in range(3):
        x = np.arange(12.0).reshape(3, 4) + k
        np.testing.assert_allclose(f(x), (x * 2.0) @ m + x * 2.0, rtol=1e-14)
    assert f.cache_info()[0].replayable


def test_a_gaussian_process_with_mirrored_pairwise_sums_replays_its_gradient():
    # the pairwise distances' gradient is a mirrored sum (row sums plus column sums in one
    # pass); when other kernels of the program merge, the mirrored kernel is rebuilt and once
    # lost its mirror: the replayed gradient of the length scales was wrong (by 0.9 here)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (12, 2))
    Y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=12)

    def nll(log_scales, log_amp, log_noise):
        scaled = X / np.exp(log_scales)
        sq = np.sum((scaled[:, None, :] - scaled[None, :, :]) ** 2, axis=-1)
        cov = np.exp(2 * log_amp - 0.5 * sq) + (np.exp(log_noise) + 1e-6) * np.eye(12)
        alpha = np.linalg.solve(cov, Y)
        return 0.5 * np.dot(Y, alpha) + np.sum(np.log(np.diagonal(np.linalg.cholesky(cov))))

    g = fg.grad(nll, argnums=(0, 1, 2))
    jg = fg.jit(g)
    for k in range(4):
        args = (rng.normal(size=2) * 0.3, np.array(0.1 * k), np.array(-1.5 + 0.2 * k))
        for got, want in zip(jg(*args), g(*args)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert jg.cache_info()[0].replayable


def test_slices_with_bounds_replay_their_pullbacks_as_steps(path):
    # an LSTM's gate slices z[:, :h], a shifted difference x[1:] - x[:-1], every other row
    # x[::2]: each slice's cotangent is written into zeros of the sliced shape, a step of the
    # program (before, a Python read that left the program unreplayable)
    rng = np.random.default_rng(3)
    W = rng.normal(size=(4, 6))

    def f(x, h):
        z = x @ W
        gates = np.tanh(z[:, :3]) * (1 / (1 + np.exp(-z[:, 3:])))
        diffs = x[1:] - x[:-1]
        return np.sum(gates * h) + np.sum(diffs**2) + np.sum(x[::2] ** 3)

    g = fg.grad(f, argnums=(0, 1))
    jg = fg.jit(g)
    for _ in range(replay.HOT_REPLAYS + 2):
        x, h = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
        z = x @ W
        t, s = np.tanh(z[:, :3]), 1 / (1 + np.exp(-z[:, 3:]))
        dz = np.concatenate([(1 - t * t) * s * h, t * s * (1 - s) * h], axis=1)
        dx = dz @ W.T
        dx[1:] += 2 * (x[1:] - x[:-1])
        dx[:-1] -= 2 * (x[1:] - x[:-1])
        dx[::2] += 3 * x[::2] ** 2
        got = jg(x, h)
        np.testing.assert_allclose(got[0], dx, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1], t * s, rtol=1e-12, atol=1e-12)
    assert jg.cache_info()[0].replayable, jg.cache_info()[0].reason


def test_a_reshape_that_copies_is_a_step_of_the_replay(path):
    # attention's heads merged back, reshape(transpose(a), (n, w)), cannot be a view: the copy
    # is a step (before, it left the program unreplayable), and so is its pullback's
    rng = np.random.default_rng(4)
    W, c = rng.normal(size=(6, 6)), rng.normal(size=(4, 6))

    def f(x):
        heads = np.tanh(np.transpose(np.reshape(x @ W, (4, 2, 3)), (1, 0, 2)))  # (2, 4, 3)
        merged = np.reshape(np.transpose(heads, (1, 0, 2)), (4, 6))
        return np.sum(merged * c) + np.sum(np.reshape(np.transpose(x), (24,)) ** 2)

    g = fg.grad(f)
    jg = fg.jit(g)
    for _ in range(replay.HOT_REPLAYS + 2):
        x = rng.normal(size=(4, 6))
        t = np.tanh(x @ W)
        want = ((1 - t * t) * c) @ W.T + 2 * x
        np.testing.assert_allclose(jg(x), want, rtol=1e-12, atol=1e-12)
    assert jg.cache_info()[0].replayable, jg.cache_info()[0].reason


def test_pruning_a_kernel_keeps_its_mirrored_sum():
    # a kernel's outputs cut (``replay_fuse._pruned``) drops the inputs only the others read:
    # a mirrored output's mirror is renumbered with its value
    from fusegrad.lazy import replay_fuse
    from fusegrad.lazy.engines import numpy_blocked
    from fusegrad.lazy.kernel import Instr, Kernel, Output

    f8 = np.dtype("f8")
    program = (Instr("multiply", (1, 1), f8), Instr("add", (2, 2), f8))
    outputs = (Output(0, "sum", (0,), f8), Output(3, "sum", (1,), f8, mirror=4))
    whole = replay_fuse._template((3, 3), [(f8, (False, False))] * 3, (), program, outputs)
    src = [(i, 0, (3, 3), (24, 8), f8) for i in range(3)]
    _, pruned, kept, _, _ = replay_fuse._pruned("numpy", whole, tuple(src), outputs[1:], 5, ())
    assert [s[0] for s in kept] == [1, 2]
    a, b, c = (np.arange(9.0).reshape(3, 3) * k for k in (1.0, 0.5, -0.25))
    want = numpy_blocked.run(Kernel((3, 3), (a, b, c), (), program, outputs[1:]))
    got = numpy_blocked.run(Kernel((3, 3), (b, c), (), pruned.program, pruned.outputs))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
    np.testing.assert_allclose(got[0].ravel(), (b * b).sum(1) + (2 * c).sum(0), rtol=1e-15)


def test_results_handed_out_are_never_reused_across_calls():
    rng = np.random.default_rng(4)

    def loss(W, X):
        return np.sum(np.tanh(X @ W) ** 2)

    jg = fg.jit(fg.grad(loss))
    W, X = rng.normal(size=(3, 2)), rng.normal(size=(5, 3))
    first = jg(W, X)
    keep = first.copy()
    first[...] = np.nan  # the caller owns what it got
    W2 = W.copy()
    second = jg(W2, X)
    np.testing.assert_allclose(second, keep, rtol=1e-14)
    W2 += 1.0  # an input changed in place: read anew at the next call
    np.testing.assert_allclose(jg(W2, X), fg.grad(loss)(W2, X), rtol=1e-12)


@pytest.mark.parametrize("n", [20, 1 << 17])
def test_equal_results_are_separate_arrays(n):
    # d/dx and d/dy of sum(tanh(x + y)) are one expression, hash-consed into one node: each
    # gradient must still be an array of its own (g *= lr on one changed the other), and so
    # must two equal results of a function, as NumPy gives them
    def f(x, y):
        return np.sum(np.tanh(x + y))

    def two(x):
        return np.tanh(x), np.tanh(x)

    x, y = np.linspace(0, 1, n), np.linspace(1, 0, n) ** 2
    want = 1 - np.tanh(x + y) ** 2
    plain, jitted = fg.grad(f, argnums=(0, 1)), fg.jit(fg.grad(f, argnums=(0, 1)))
    both, pair = fg.jit(fg.value_and_grad(f, argnums=(0, 1))), fg.jit(two)
    for _ in range(replay.HOT_REPLAYS + 3):
        for gx, gy in (plain(x, y), jitted(x, y), both(x, y)[1]):
            assert not np.shares_memory(gx, gy)
            gx *= 0.0
            np.testing.assert_allclose(gy, want, rtol=1e-13)
        a, b = pair(x)
        assert not np.shares_memory(a, b)
        a += 1.0
        np.testing.assert_allclose(b, np.tanh(x), rtol=1e-14)


def test_hot_programs_move_kernels_to_numba_and_stay_right(monkeypatch):
    if not numba_engine.available():
        pytest.skip("numba unavailable")
    built = []
    real = numba_engine.replayer
    monkeypatch.setattr(numba_engine, "replayer", lambda k: built.append(k) or real(k))
    x0 = np.linspace(-1, 1, 600)
    with fg.use_engine("auto"), warnings.catch_warnings():
        warnings.simplefilter("error")
        jg = fg.jit(fg.grad(lambda x: np.sum(np.tanh(x * 1.5) ** 2)))
        for k in range(replay.HOT_REPLAYS + 3):
            x = x0 + 0.01 * k
            t = np.tanh(x * 1.5)
            np.testing.assert_allclose(jg(x), 2 * t * (1 - t * t) * 1.5, rtol=1e-13)
            if k + 1 < replay.HOT_REPLAYS:
                assert built == []  # a small kernel: numpy_blocked's, until the program is hot
    assert built and all(k.size == 600 for k in built)


def test_a_hot_replay_copies_a_transposed_operand_and_stays_right(monkeypatch):
    # the gradient of sum(sigmoid(x.T + y) * tanh(y)): replayed on numba, its kernels copy x.T
    # to C order at each call (numba_engine.rows_padded_or_c), the x of that call
    if not numba_engine.available():
        pytest.skip("numba unavailable")
    copied = []
    relay = numba_engine.rows_padded_or_c

    def spy(a):
        out = relay(a)
        copied.append(out is not a)
        return out

    monkeypatch.setattr(numba_engine, "rows_padded_or_c", spy)
    rng = np.random.default_rng(1)
    n = 1 << 8

    def loss(x, y):
        return np.sum((1 / (1 + np.exp(-(x.T + y)))) * np.tanh(y))

    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    jg = fg.jit(fg.grad(loss, argnums=(0, 1)))
    with fg.use_engine("auto"):
        for _ in range(replay.HOT_REPLAYS + 3):
            x[...] = rng.standard_normal((n, n))  # the caller's array, changed in place
            s = 1 / (1 + np.exp(-(x.T + y)))
            dz = s * (1 - s) * np.tanh(y)
            got = jg(x, y)
            dy = dz + s * (1 - np.tanh(y) ** 2)
            np.testing.assert_allclose(got[0], dz.T, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(got[1], dy, rtol=1e-12, atol=1e-14)
    assert any(copied)


def test_degenerate_products_are_recognised():
    assert direct_matmul.degenerate(np.ones((4, 1)), np.ones((1, 3)))
    assert direct_matmul.degenerate(np.ones((4, 3)), np.ones(3))
    assert direct_matmul.degenerate(np.ones(4), np.ones((4, 3)))
    assert not direct_matmul.degenerate(np.ones((4, 3)), np.ones((3, 2)))
    assert not direct_matmul.applies(np.matmul, (np.ones(3), np.ones(3)), {})  # a scalar
    assert not direct_matmul.applies(np.matmul, (np.ones((2, 2, 2)), np.ones((2, 2))), {})
    assert not direct_matmul.applies(np.matmul, (np.ones((2, 0)), np.ones((0, 2))), {})


def _programs_of(monkeypatch):
    """The replayed programs of the jit calls that follow, as they are replayed."""
    from fusegrad import jit_cache

    seen = []
    real = jit_cache._replay
    monkeypatch.setattr(
        jit_cache, "_replay", lambda entry, *a: seen.append(entry.program) or real(entry, *a)
    )
    return seen


def test_a_weight_used_at_every_step_accumulates_its_gradient(monkeypatch):
    # the gradient of W sums one product per step: added up as each is made (no 12-input
    # kernel), and the total handed out stays the caller's at the next call
    programs = _programs_of(monkeypatch)
    rng = np.random.default_rng(9)

    def loss(W, xs):
        h = 0.0
        for t in range(xs.shape[0]):
            h = h + np.tanh(xs[t] @ W)
        return np.sum(h**2)

    g = fg.grad(loss)
    jg = fg.jit(g)
    xs = rng.normal(size=(12, 5, 3))
    firsts = []
    for _ in range(4):
        W = rng.normal(size=(3, 4))
        got = jg(W, xs)
        firsts.append((got, got.copy()))
        np.testing.assert_allclose(got, g(W, xs), rtol=1e-12, atol=1e-14)
    for got, kept in firsts:
        np.testing.assert_array_equal(got, kept)  # never written by a later call
    kinds = [s[0] for s in programs[-1].plan[0]]
    assert kinds.count("iadd") == 11 and kinds.count("alias") == 1


def test_column_sums_of_a_loops_cotangents_run_inside_the_kernels_making_them(monkeypatch):
    # sum(dz_t, axis=0) for each step t: one kernel reading every dz_t back when recorded; in
    # the replay each runs in the kernel that makes its dz_t
    programs = _programs_of(monkeypatch)
    rng = np.random.default_rng(10)

    def loss(b, xs, W):
        h = np.zeros((xs.shape[1], W.shape[1]))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h @ W[:4] + b)
        return np.sum(h**2)

    g = fg.grad(loss)
    jg = fg.jit(g)
    xs, W = rng.normal(size=(8, 16, 6)), 0.3 * rng.normal(size=(6, 4))
    for _ in range(3):
        b = rng.normal(size=4)
        np.testing.assert_allclose(jg(b, xs, W), g(b, xs, W), rtol=1e-12, atol=1e-14)
    program = programs[-1]
    assert program.kernels < len(program.steps)
    kernels = [s for s in program.plan[0] if s[0] not in ("call", "iadd", "alias")]
    assert all(len(s[1].outputs) < 8 for s in kernels)  # no kernel summing every dz_t


def _rnn_loss(Wx, Wh, b, xs):
    h = np.tanh(xs[0] @ Wx + b)
    for t in range(1, xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def test_a_loops_products_run_as_one_and_its_weight_gradients_as_one(monkeypatch):
    # xs[t] @ Wx for every t is one product; the gradients of Wx and Wh (a sum of one product
    # per step each) one product each; replays with the program's buffers and without them
    # (another replay holds them) agree with grad
    if not numba_engine.available():
        pytest.skip("the batched sums stack kernel outputs, which numba writes in place")
    programs = _programs_of(monkeypatch)
    rng = np.random.default_rng(11)
    g = fg.grad(_rnn_loss, argnums=(0, 1, 2))
    jg = fg.jit(g)
    xs = rng.normal(size=(12, 16, 5))
    with fg.use_engine("auto"):
        for _ in range(replay.HOT_REPLAYS + 3):
            Wx, Wh = 0.4 * rng.normal(size=(5, 16)), 0.3 * rng.normal(size=(16, 16))
            b = rng.normal(size=16)  # (kernels of 16 x 16 points: numba's, once hot)
            for got, want in zip(jg(Wx, Wh, b, xs), g(Wx, Wh, b, xs)):
                np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)
        program = programs[-1]
        batches = program.compiled.batches
        kinds = sorted(v[0] for v in batches.gemms.values())
        assert kinds == ["forward", "sum", "sum"], kinds
        with program.lock:  # the buffers in use: each product on its own, new arrays
            free = program.run([np.ascontiguousarray(a) for a in (Wx, Wh, b, xs)])
    for got, want in zip(free, g(Wx, Wh, b, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("shapes", [((64, 9), (9, 5)), ((5, 64), (64, 48)), ((40, 30), (30, 7))])
def test_split_products_equal_numpy_and_restore_blas_threads(monkeypatch, shapes):
    # every product split (threshold 1): row blocks, column blocks, transposed operands
    from fusegrad.lazy import replay_blas

    monkeypatch.setattr(replay_blas, "SPLIT_MIN_MADDS", 1)
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    single = replay_blas.single_threaded()
    before = None if single is None else single.get()
    np.testing.assert_allclose(replay_blas.matmul(a, b), a @ b, rtol=1e-13, atol=1e-13)
    out = np.empty((b.shape[1], a.shape[0]))
    got = replay_blas.matmul(b.T, np.ascontiguousarray(a.T).T.T, out=out)
    assert got is out
    np.testing.assert_allclose(out, b.T @ a.T, rtol=1e-13, atol=1e-13)
    if single is not None:
        assert single.get() == before and single.inside == 0


def test_mlp_replay_with_split_products(monkeypatch):
    # the MLP's products split across two workers in every replay agree with grad, and the
    # gradients handed out are never written by a later call
    from fusegrad.lazy import replay_blas

    monkeypatch.setattr(replay_blas, "SPLIT_MIN_MADDS", 1)
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")

    def loss(W1, b1, W2, b2, X, y):
        return np.mean((np.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)

    rng = np.random.default_rng(4)
    g = fg.grad(loss, argnums=(0, 1, 2, 3))
    jg = fg.jit(g)
    kept = []
    for _ in range(replay.HOT_REPLAYS + 3):
        args = (
            rng.standard_normal((7, 12)), rng.standard_normal(12), rng.standard_normal((12, 3)),
            rng.standard_normal(3), rng.standard_normal((40, 7)), rng.standard_normal((40, 3)),
        )  # fmt: skip
        got = jg(*args)
        for x, w in zip(got, g(*args)):
            np.testing.assert_allclose(x, w, rtol=1e-12, atol=1e-14)
        kept.append((got, [x.copy() for x in got]))
    for got, copy in kept:
        for x, c in zip(got, copy):
            np.testing.assert_array_equal(x, c)


def test_hot_kernels_write_into_the_programs_buffers_and_stay_right(monkeypatch):
    """A hot replay's numba kernels are bound once to the program's buffers (their sums'
    start values refilled at each call): many calls on new values give each call's gradient."""
    if not numba_engine.available():
        pytest.skip("numba unavailable")
    binds = []
    real = numba_engine.replayer

    def spy(kernel):
        run = real(kernel)
        if run is not None and hasattr(run, "bare"):
            bind = run.bare.bind
            run.bare.bind = lambda outs: binds.append(len(outs)) or bind(outs)
        return run

    monkeypatch.setattr(numba_engine, "replayer", spy)

    def loss(W1, b1, W2, b2, X, y):
        return workloads.mlp(np, W1, b1, W2, b2, X, y)

    rng = np.random.default_rng(0)
    g = fg.jit(fg.grad(loss, argnums=(0, 1, 2, 3)))
    with fg.use_engine("auto"):
        for _ in range(replay.HOT_REPLAYS + 6):
            args = (rng.standard_normal((5, 7)), rng.standard_normal(7),
                    rng.standard_normal((7, 1)), rng.standard_normal(1),
                    rng.standard_normal((32, 5)), rng.standard_normal((32, 1)))  # fmt: skip
            for got, want in zip(g(*args), workloads.mlp_hand(*args), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert binds  # the hot program's kernels were bound to its buffers
    assert g.cache_info().hits >= replay.HOT_REPLAYS


def test_hot_bound_kernels_take_each_calls_numbers():
    """A number argument is a kernel constant computed at each replay; the bound kernels of a
    hot program must read the new value every call."""
    if not numba_engine.available():
        pytest.skip("numba unavailable")

    def loss(W1, b1, W2, b2, X, y, s):
        return workloads.mlp(np, W1 * s, b1, W2, b2, X, y)

    rng = np.random.default_rng(1)
    g = fg.jit(fg.grad(loss, argnums=(0, 1, 2, 3)))
    with fg.use_engine("auto"):
        for k in range(replay.HOT_REPLAYS + 6):
            args = (rng.standard_normal((5, 7)), rng.standard_normal(7),
                    rng.standard_normal((7, 1)), rng.standard_normal(1),
                    rng.standard_normal((32, 5)), rng.standard_normal((32, 1)))  # fmt: skip
            s = 0.5 + 0.1 * k
            dW1, db1, dW2, db2 = workloads.mlp_hand(args[0] * s, *args[1:])
            want = (dW1 * s, db1, dW2, db2)
            for got, w in zip(g(*args, s), want, strict=True):
                np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
    info = g.cache_info()
    assert info[0].numbers == "inputs" and info.hits >= replay.HOT_REPLAYS


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    data=st.data(),
)
def test_view_makers_give_every_strided_slice_of_a_slot(shape, data):
    # a replay takes each operand as a view of its slot by the cheapest NumPy call (a slice per
    # axis for an LSTM's gates, z[:, h:2h]); whichever call it found, the view is the one the
    # recording read, of the slot's memory
    from fusegrad.lazy import replay_ops

    base = np.arange(float(np.prod(shape))).reshape(shape)
    index = tuple(
        slice(
            data.draw(st.integers(0, n - 1)),
            data.draw(st.integers(1, n)) if n > 1 else 1,
            data.draw(st.integers(1, 3)),
        )
        for n in shape
    )
    want = base[index]
    if want.size == 0:
        return
    if data.draw(st.booleans()):
        want = want[None]  # a size-1 axis added, as a broadcast operand has
    offset = want.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    make = replay_ops.view_maker(
        (base.shape, base.strides, base.dtype), offset, want.shape, want.strides, want.dtype
    )
    fresh = base + 0.5  # another array of the slot's layout: the next call's
    got = make(fresh)
    np.testing.assert_array_equal(got, want + 0.5)
    assert np.shares_memory(got, fresh)


def test_a_replay_relays_rows_of_a_wider_array_and_transposes():
    # numba vectorises loads from C-contiguous arrays only: a replayed kernel reading column
    # blocks of a product (an LSTM's gates) or a transpose gets them through the engine's
    # ``pads`` (rows padded to their stride; a transpose copied, for kernels heavy enough)
    from fusegrad.lazy import replay_ops

    f8 = np.dtype("f8")
    layouts = [((4, 6), (48, 8), f8)]
    encoded = [
        ("view", 0, 8, (4, 2), (48, 8), f8),  # x[:, 1:3]: rows of a wider array
        ("view", 0, 0, (4, 6), (48, 8), f8),  # x itself
        ("view", 0, 0, (6, 4), (8, 48), f8),  # x.T: a transpose
        ("view", 0, 8, (5,), (8,), f8),  # a run of one row
        ("view", 0, 0, (3, 4), (8, 48), f8),  # x.T[:3]: neither
    ]
    relaid = []
    get = replay_ops.indexed_operands(
        encoded, [], layouts, None, pad=lambda a: relaid.append(a) or a.copy()
    )
    x = np.arange(24.0).reshape(4, 6)
    values = get([x], ())
    assert len(relaid) == 2
    assert np.array_equal(relaid[0], x[:, 1:3]) and np.array_equal(relaid[1], x.T)
    assert values[1] is x and np.shares_memory(values[4], x)
    for v, want in zip(values, (x[:, 1:3], x, x.T, x[0, 1:], x.T[:3]), strict=True):
        np.testing.assert_array_equal(v, want)


def test_a_small_kernel_s_views_of_the_program_s_buffers_are_made_once_per_pool():
    # below PAD_ROWS_FROM, padding at each call (as_strided, ~3 us) cost more than it saved;
    # the pool's buffers are the same arrays at every replay, so their views (padded when
    # rows of a wider array) are made once, and again only when the slot holds another array
    from fusegrad.lazy import replay_ops
    from fusegrad.lazy.engines.numba_engine import rows_padded

    f8 = np.dtype("f8")
    layouts = [((4, 6), (48, 8), f8), ((3,), (8,), f8)]
    encoded = [
        ("view", 0, 8, (4, 2), (48, 8), f8),  # x[:, 1:3]: rows of a wider array, padded
        ("view", 0, 0, (2, 12), (96, 8), f8),  # x reshaped
        ("view", 1, 8, (2,), (8,), f8),  # y[1:], a slot not reused: made at each call
    ]
    get = replay_ops.indexed_operands(encoded, [], layouts, None, None, rows_padded, {0})
    pooled = get.in_pool()
    x, y = np.arange(24.0).reshape(4, 6), np.arange(3.0)
    first = pooled([x, y], ())
    assert first[0].flags.c_contiguous and first[0].shape == (4, 6)
    np.testing.assert_array_equal(first[0][:, :2], x[:, 1:3])
    np.testing.assert_array_equal(first[1], x.reshape(2, 12))
    x[:] += 100.0  # the buffer written again by the next replay: the views see it
    y2 = y + 1.0
    again = pooled([x, y2], ())
    assert again[0] is first[0] and again[1] is first[1]
    np.testing.assert_array_equal(again[0][:, :2], x[:, 1:3])
    np.testing.assert_array_equal(again[2], y2[1:])
    other = x.copy()  # the slot holding another array (a replay that found the pool in use)
    moved = pooled([other, y], ())
    assert moved[0] is not first[0] and np.shares_memory(moved[0], other)
    np.testing.assert_array_equal(moved[0][:, :2], other[:, 1:3])
    # x[0, 3] reshaped is an element's copy, not a view: no view maker offers it (a copy could
    # pass its address check by the allocator's chance), and a getter keeps no copy (sweep Z2:
    # a wrong value at every replay after the first, in one run of two with a cold cache)
    row = np.arange(6.0).reshape(1, 6)
    for make in replay_ops._candidates(row, 24, (1,), (8,)):
        assert np.shares_memory(make(row), row)
    copying = replay_ops._made_once(0, lambda b: b[0, 3].reshape(1))
    assert copying([row], ())[0] == 3.0
    row[0, 3] = -7.0
    assert copying([row], ())[0] == -7.0
    # a plain getter (no pool) pads nothing; one without reused views has no pooled form
    plain = get([x, y], ())
    assert not plain[0].flags.c_contiguous
    assert not hasattr(replay_ops.indexed_operands(encoded, [], layouts, None, None,
                                                   rows_padded, set()), "in_pool")  # fmt: skip


@pytest.mark.slow  # numba's start-up and a compile
def test_a_loop_writing_many_arrays_is_vectorised():
    """LLVM leaves a loop scalar past 128 run-time overlap checks (about one per pair of an
    output and another array); the numba engine raises that for the loops it compiles: an
    LSTM cell's backward kernel writes 16 arrays from 12."""
    from fusegrad.lazy.engines import numba_engine

    if not numba_engine.available():
        pytest.skip("numba unavailable")
    import numba

    n_in, n_out = 12, 16
    ins = ", ".join(f"a{k}" for k in range(n_in))
    outs = ", ".join(f"o{k}" for k in range(n_out))
    body = "\n".join(
        f"        o{k}[i] = a{k % n_in}[i] * a{(k + 1) % n_in}[i] + {k}.0" for k in range(n_out)
    )
    src = f"def many({ins}, {outs}):\n    for i in range(a0.shape[0]):\n{body}\n"
    scope: dict = {}
    exec(src, scope)  # noqa: S102
    many = numba.njit(scope["many"])
    arrays = [np.arange(64.0) + k for k in range(n_in)] + [np.empty(64) for _ in range(n_out)]
    many(*arrays)
    np.testing.assert_array_equal(arrays[n_in + 3], arrays[3] * arrays[4] + 3.0)
    asm = next(iter(many.inspect_asm().values()))
    assert re.search(r"v(mul|add|fmadd\w*)pd\s[^\n]*%[yz]mm", asm)


def test_the_pullback_of_a_slice_replays_into_the_program_s_buffer(monkeypatch):
    """x[:, h:2h]'s cotangent (an LSTM's gates sliced from one product) is zeros with dy
    written in: a direct step of the recording, not a checked scatter_add call."""
    from fusegrad.rules import indexing

    scattered = []
    real = indexing.scatter_add
    monkeypatch.setattr(indexing, "scatter_add", lambda *a: scattered.append(a) or real(*a))

    def loss(w, x):
        z = x @ w
        return np.sum(np.tanh(z[:, :3]) * z[:, 3:6] + np.exp(z[:, 6:]) ** 2)

    rng = np.random.default_rng(2)
    w, x = rng.standard_normal((4, 9)) * 0.3, rng.standard_normal((5, 4))
    step = fg.jit(fg.grad(loss))
    for k in range(12):
        got = step(w, x)
        np.testing.assert_allclose(got, fg.grad(loss)(w, x), rtol=1e-13)
        w[:, k % 9] += 0.01  # the arguments written between calls
        x = x + 0.1
    assert step.cache_info().hits >= 10 and not scattered
    # a traced cotangent (the pullback differentiated again) takes the primitive
    hess = fg.hessian(lambda v: np.sum(np.sin(v[1:3]) ** 2))(np.arange(4.0))
    want = np.zeros((4, 4))
    want[[1, 2], [1, 2]] = 2 * np.cos(2 * np.arange(1.0, 3.0))
    np.testing.assert_allclose(hess, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_concatenate_replays_as_bare_numpy_calls(monkeypatch, dtype, axis):
    """np.concatenate's rule step cost ~10 us each way on an LSTM's [x_t, h] (direct_concat):
    a replay runs np.concatenate and copies the differentiated arrays' slices of dy."""
    from fusegrad.rules import shapes

    split = []
    real = shapes._split_back
    monkeypatch.setattr(shapes, "_split_back", lambda *a: split.append(a) or real(*a))

    def loss(w, h, x):
        z = np.concatenate([x, np.tanh(h)], axis=axis) if axis else np.concatenate((h, x), 0)
        return np.sum(np.sin(z @ w) * z[:, :1])

    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(dtype)
    h = rng.standard_normal((4, 3 if axis == 0 else 2)).astype(dtype)
    w = rng.standard_normal((3 if axis == 0 else 5, 2)).astype(dtype)
    step = fg.jit(fg.grad(loss, argnums=(0, 1)))
    for _ in range(4):
        got = step(w, h, x)
        split.clear()
        want = fg.grad(loss, argnums=(0, 1))(w, h, x)
        assert split  # (the eager gradient runs the rule)
        for g, e in zip(got, want):
            assert g.dtype == dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5 if dtype == np.float32 else 1e-13)
        h = h * 0.9 + 0.05
        x[0, 0] += 0.5
    split.clear()
    step(w, h, x)
    assert step.cache_info().hits >= 3 and not split


def test_a_replay_racing_the_hot_swap_keeps_the_pool_of_the_compile_it_runs():
    """Thread A read the program's compile, thread B swapped in the hot one (and dropped the
    pool), A then made a pool of the old compile, which every later replay ran the new one's
    ops on: an IndexError at every call from then on (sweep W, forced with sys.settrace)."""
    from fusegrad.lazy import replay

    def rnn(Wx, Wh, b, X):
        h = np.zeros((X.shape[1], Wh.shape[0]))
        tot = 0.0
        for t in range(X.shape[0]):
            h = np.tanh(X[t] @ Wx + h @ Wh + b)
            tot = tot + np.sum(h * h)
        return tot

    rng = np.random.default_rng(0)

    def args():
        return (rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((5, 5)) * 0.5,
                rng.standard_normal(5) * 0.1, rng.standard_normal((6, 3, 4)))  # fmt: skip

    made = []
    real_init = replay.Program.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        made.append(self)

    replay.Program.__init__ = init
    try:
        step = fg.jit(fg.grad(rnn, argnums=(0, 1, 2)))
        step(*args())
    finally:
        replay.Program.__init__ = real_init
    prog = made[-1]
    while prog.replays < replay.HOT_REPLAYS - 3:
        step(*args())
    lock = prog.lock

    class SwappedWhileWaiting:
        """The lock, with another thread's hot swap landing just before it is taken."""

        done = False

        def acquire(self, blocking: bool = True) -> bool:
            if not SwappedWhileWaiting.done:
                SwappedWhileWaiting.done = True
                prog.compiled, prog.pool = prog._compile(True), None
            return lock.acquire(blocking)

        def release(self) -> None:
            lock.release()

    prog.lock = SwappedWhileWaiting()
    try:
        for _ in range(4):
            a = args()
            for g, e in zip(step(*a), fg.grad(rnn, argnums=(0, 1, 2))(*a)):
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
    finally:
        prog.lock = lock
    assert SwappedWhileWaiting.done and prog.compiled.replayed

"""Row-blocked replays (``lazy/replay_rows``): a program whose steps all work row by row runs
block by block of rows, one run of blocks per worker thread. Checked against ``grad`` and
hand-derived gradients on new values at each call, on both engines and one or two threads; the
programs that must not be blocked (a sum over the rows read by a later row step) are not, and
stay right; the blocked MLP never holds a batch-sized intermediate."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.bench import workloads
from fusegrad.lazy import replay, replay_rows
from fusegrad.memory import track_allocations


def blocks_at_any_size(monkeypatch, min_rows, note=lambda op, slots: op.plan):
    """Programs of any size qualify for row blocks of ``min_rows`` rows; each blocked run is
    noted (``note(rows_op, slots)``: its plan by default) in the list returned."""
    monkeypatch.setattr(replay_rows, "MIN_BYTES", 0)
    monkeypatch.setattr(replay_rows, "MIN_ROWS", min_rows)
    monkeypatch.setattr(replay_rows, "BLOCK_BYTES", 1)
    monkeypatch.setattr(replay_rows, "MAX_BLOCKS", 1 << 30)
    runs = []
    real = replay_rows.RowsOp.__call__

    def counted(self, slots, numbers, pool):
        runs.append(note(self, slots))
        return real(self, slots, numbers, pool)

    monkeypatch.setattr(replay_rows.RowsOp, "__call__", counted)
    return runs


@pytest.fixture
def blocked(monkeypatch):
    """Programs of any size qualify, in blocks of 8 rows; the blocked runs are counted."""
    return blocks_at_any_size(monkeypatch, 8)


def mlp(W1, b1, W2, b2, X, y):
    return workloads.mlp(np, W1, b1, W2, b2, X, y)


mlp_by_hand = workloads.mlp_hand


def mlp_args(rng, batch, n_in=5, hidden=7, out=1):
    return (
        rng.normal(size=(n_in, hidden)), rng.normal(size=hidden), rng.normal(size=(hidden, out)),
        rng.normal(size=out), rng.normal(size=(batch, n_in)), rng.normal(size=(batch, out)),
    )  # fmt: skip


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("out", [1, 3])
def test_the_mlp_runs_in_blocks_of_rows_and_equals_its_gradient_by_hand(
    blocked, monkeypatch, engine, threads, out
):
    monkeypatch.setenv("FUSEGRAD_THREADS", threads)
    rng = np.random.default_rng(1)
    with fg.use_engine(engine):
        jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
        kept = []
        for _ in range(replay.HOT_REPLAYS + 2):
            args = mlp_args(rng, 53, out=out)
            got = jg(*args)
            for g, w in zip(got, mlp_by_hand(*args)):
                np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
            kept.append((got, [g.copy() for g in got]))
    assert blocked, "the MLP was not run in blocks of rows"
    assert blocked[-1].batch == 53
    for got, copy in kept:  # results handed out are never written by a later call
        for g, c in zip(got, copy):
            np.testing.assert_array_equal(g, c)


def test_value_and_grad_sums_the_loss_after_the_blocks(blocked):
    rng = np.random.default_rng(2)
    f = fg.jit(fg.value_and_grad(mlp, argnums=(0, 2)))
    for _ in range(4):
        args = mlp_args(rng, 40, out=2)
        value, (g1, g2) = f(*args)
        want = mlp_by_hand(*args)
        np.testing.assert_allclose(value, mlp(*args), rtol=1e-12)
        np.testing.assert_allclose(g1, want[0], rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(g2, want[2], rtol=1e-11, atol=1e-13)
    assert blocked


def test_a_row_wise_result_is_written_at_its_full_shape(blocked):
    rng = np.random.default_rng(3)

    def layer(W, X):
        return np.tanh(X @ W) * 2.0

    f = fg.jit(layer)
    for _ in range(4):
        W, X = rng.normal(size=(4, 6)), rng.normal(size=(37, 4))
        got = f(W, X)
        np.testing.assert_allclose(got, layer(W, X), rtol=1e-13)
    assert blocked and blocked[-1].kept


def test_a_number_argument_is_read_at_every_call(blocked):
    rng = np.random.default_rng(4)

    def loss(W, X, s):
        return np.sum(np.tanh(s * (X @ W)))

    g = fg.jit(fg.grad(loss))
    for s in (0.5, 2.0, -1.5, 3.0):
        W, X = rng.normal(size=(3, 5)), rng.normal(size=(30, 3))
        t = np.tanh(s * (X @ W))
        np.testing.assert_allclose(g(W, X, s), X.T @ (s * (1 - t * t)), rtol=1e-11, atol=1e-13)
    assert blocked


def test_a_sum_over_the_rows_read_by_a_row_step_keeps_the_program_step_by_step(blocked):
    # a normalisation over the batch: every row's value needs the mean of all rows
    rng = np.random.default_rng(5)

    def loss(W, X):
        H = X @ W
        return np.sum(np.tanh(H - np.mean(H, axis=0)))

    g = fg.jit(fg.grad(loss))
    for _ in range(3):
        W, X = rng.normal(size=(3, 4)), rng.normal(size=(32, 3))
        np.testing.assert_allclose(g(W, X), fg.grad(loss)(W, X), rtol=1e-11, atol=1e-13)
    assert not blocked


@pytest.mark.parametrize("rows", [True, False])
def test_the_blocked_mlp_never_holds_a_batch_sized_intermediate(monkeypatch, rows):
    # at the real threshold: batch 4096, hidden 256 (8 MiB per intermediate). Step by step, a
    # replay keeps its intermediates' buffers from call to call (``Program.pool``); in blocks
    # of 1 MiB, nothing batch-sized is allocated, kept or not (once hot: the program is compiled
    # again after HOT_REPLAYS replays, inside the tracked calls)
    monkeypatch.setattr(replay_rows, "BLOCK_BYTES", 1 << 20)
    # tracing slows the calls down, two threads much more (each allocation takes the GIL)
    monkeypatch.setattr(replay, "HOT_REPLAYS", 2)
    monkeypatch.setenv("FUSEGRAD_THREADS", "1")
    if not rows:
        monkeypatch.setattr(replay_rows, "MIN_BYTES", 1 << 62)
    rng = np.random.default_rng(6)
    args = mlp_args(rng, 4096, n_in=20, hidden=256)
    batch_sized = 4096 * 256 * 8
    with fg.use_engine("numpy"):
        jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
        with track_allocations() as life:  # recorded, replayed, hot, replayed
            got = [jg(*args) for _ in range(replay.HOT_REPLAYS + 3)]
        with track_allocations() as call:
            last = jg(*args)
    for g, w in zip(last, mlp_by_hand(*args)):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
    kept = life.total_bytes - sum(g.nbytes for gs in got for g in gs)
    if rows:
        assert call.peak_bytes < batch_sized, call.peak_bytes
        assert kept < 1 << 20, kept
    else:
        assert kept >= 3 * batch_sized, kept


@settings(max_examples=20, deadline=None)
@given(
    batch=st.integers(16, 90),
    widths=st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(1, 3)),
    threads=st.sampled_from(["1", "2", "3"]),
)
def test_blocked_mlps_of_any_shape_equal_grad(batch, widths, threads):
    _blocked_mlp_equals_grad("numpy", batch, widths, threads)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("case", [(17, (1, 1, 1), "2"), (61, (4, 9, 2), "3")], ids=str)
def test_blocked_mlps_with_one_wide_columns_equal_grad(engine, case):
    # the kernels' broadcast patterns where a width is 1 (numba compiles each pattern once)
    _blocked_mlp_equals_grad(engine, *case)


def _blocked_mlp_equals_grad(engine, batch, widths, threads):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replay_rows, "MIN_BYTES", 0)
        mp.setattr(replay_rows, "MIN_ROWS", 8)
        mp.setattr(replay_rows, "BLOCK_BYTES", 1)
        mp.setattr(replay_rows, "MAX_BLOCKS", 1 << 30)
        mp.setenv("FUSEGRAD_THREADS", threads)
        rng = np.random.default_rng(batch)
        n_in, hidden, out = widths
        with fg.use_engine(engine):
            jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3, 4)))
            for _ in range(2):
                args = mlp_args(rng, batch, n_in, hidden, out)
                want = fg.grad(mlp, argnums=(0, 1, 2, 3, 4))(*args)
                for g, w in zip(jg(*args), want):
                    np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_threads_calling_one_blocked_program_each_get_their_own_gradient(blocked, monkeypatch):
    # one replay holds the program's buffers; the others run it without them, at the same time,
    # every one of them on the shared worker pool
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
    cases = [mlp_args(np.random.default_rng(k), 48, out=2) for k in range(8)]
    jg(*cases[0])
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda args: jg(*args), cases * 3))
    for args, got in zip(cases * 3, results):
        for g, w in zip(got, mlp_by_hand(*args)):
            np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
    assert len(blocked) >= len(results)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_a_blocked_replay_gives_the_same_bits_on_any_number_of_threads(
    blocked, monkeypatch, engine
):
    # blocks are cut from the batch, not from each thread's share, and their sums added in
    # block order: who ran which block, and when, changes nothing (the first call records)
    args = mlp_args(np.random.default_rng(5), 75, n_in=4, hidden=6, out=2)
    results = []
    with fg.use_engine(engine):
        for threads in ("1", "2", "3", "2"):
            monkeypatch.setenv("FUSEGRAD_THREADS", threads)
            jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
            results.append([jg(*args) for _ in range(replay.HOT_REPLAYS + 3)][1:])
    assert blocked and blocked[-1].batch == 75
    for run in results[1:]:
        for got, want in zip(run, results[0]):  # call by call: a hot replay picks engines anew
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


def test_ordered_sums_add_in_block_order_whatever_order_blocks_finish():
    # 1e16 + 1 + 1 - 1e16 is 0 added left to right, 2 another way: only block order gives 0
    values = [1e16, 1.0, 1.0, -1e16]
    for order in ([3, 1, 0, 2], [0, 1, 2, 3], [2, 3, 1, 0]):
        sums = replay_rows.OrderedSums(4)
        assert [sums.claim() for _ in range(5)] == [0, 1, 2, 3, None]
        for b in order:
            sums.add(b, {7: np.array([values[b]])})
        assert sums.total[7][0] == ((1e16 + 1.0) + 1.0) - 1e16 and not sums.waiting


def test_a_failing_block_stops_the_others_and_raises(blocked, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    jg = fg.jit(fg.grad(mlp, argnums=(0, 1, 2, 3)))
    args = mlp_args(np.random.default_rng(6), 64)
    jg(*args)
    ran = []
    real = replay_rows.RowsOp._run_block

    def failing(self, slots, s0, s1, numbers, kept):
        ran.append(s0)
        if s0 == 0:
            raise FloatingPointError("block 0")
        return real(self, slots, s0, s1, numbers, kept)

    monkeypatch.setattr(replay_rows.RowsOp, "_run_block", failing)
    with pytest.raises(FloatingPointError, match="block 0"):
        jg(*args)
    assert len(ran) < 8  # 64 rows in blocks of 8: not every block ran
    monkeypatch.setattr(replay_rows.RowsOp, "_run_block", real)
    for g, w in zip(jg(*args), mlp_by_hand(*args)):  # the program still runs afterwards
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)


def test_a_classifier_on_wide_inputs_runs_in_blocks_of_its_inputs_rows(monkeypatch):
    """A softmax classifier (20,000×100 inputs, 10 classes) makes small intermediates but reads
    16 MB of inputs twice: its inputs' rows count towards blocking (by its intermediates alone
    it would run step by step), and a block holds about INPUT_BLOCK_BYTES of them."""
    runs = []
    real = replay_rows.RowsOp.__call__
    monkeypatch.setattr(
        replay_rows.RowsOp, "__call__", lambda s, *a: runs.append(s.plan) or real(s, *a)
    )
    rng = np.random.default_rng(5)
    W, b = rng.normal(size=(100, 10)) * 0.1, np.zeros(10)
    X, Y = rng.normal(size=(20000, 100)), np.eye(10)[rng.integers(0, 10, 20000)]

    def xent(W, b, X, Y):
        z = X @ W + b
        z = z - np.max(z, axis=1, keepdims=True)
        return np.mean(np.log(np.sum(np.exp(z), axis=1)) - np.sum(z * Y, axis=1))

    want = fg.grad(xent, argnums=(0, 1))(W, b, X, Y)
    jg = fg.jit(fg.grad(xent, argnums=(0, 1)))
    for _ in range(3):
        got = jg(W, b, X, Y)
    assert runs and runs[-1].batch == 20000
    row_of_inputs = (100 + 10) * 8  # X's and Y's
    assert runs[-1].rows_per_block == max(
        replay_rows.MIN_ROWS,
        -(-20000 // replay_rows.MAX_BLOCKS),
        replay_rows.INPUT_BLOCK_BYTES // row_of_inputs,
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)


def test_matrix_vector_programs_stay_step_by_step(monkeypatch):
    """Logistic regression on 20,000×50 inputs (8 MB, read by matrix-vector products): blocks
    would only add their Python, so the inputs do not count and it runs step by step."""
    runs = []
    real = replay_rows.RowsOp.__call__
    monkeypatch.setattr(
        replay_rows.RowsOp, "__call__", lambda s, *a: runs.append(s.plan) or real(s, *a)
    )
    rng = np.random.default_rng(6)
    w, X, t = (
        rng.normal(size=50) * 0.1,
        rng.normal(size=(20000, 50)),
        np.sign(rng.normal(size=20000)),
    )

    def loss(w, X, t):
        return np.mean(np.logaddexp(0.0, -t * (X @ w)))

    jg = fg.jit(fg.grad(loss))
    for _ in range(3):
        got = jg(w, X, t)
    assert not runs
    np.testing.assert_allclose(got, fg.grad(loss)(w, X, t), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_mlp_reading_its_data_from_a_closure_runs_in_blocks_and_sees_writes_to_it(
    blocked, monkeypatch, engine, threads
):
    """autograd's style, ``grad(lambda params: loss(params, X, y))``: ``X`` and ``y`` are
    constants of the recording, made inputs of the replay so the blocks slice them; their
    contents are read at every call (written in place between calls here)."""
    monkeypatch.setenv("FUSEGRAD_THREADS", threads)
    rng = np.random.default_rng(7)
    W1, b1, W2, b2, X, y = mlp_args(rng, 45, out=2)
    with fg.use_engine(engine):
        jg = fg.jit(fg.grad(lambda *p: mlp(*p, X, y), argnums=(0, 1, 2, 3)))
        for _ in range(replay.HOT_REPLAYS + 2):
            W1, b1, W2, b2, X[...], y[...] = mlp_args(rng, 45, out=2)
            for g, w in zip(jg(W1, b1, W2, b2), mlp_by_hand(W1, b1, W2, b2, X, y)):
                np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
    assert blocked and blocked[-1].batch == 45
    assert len(blocked[-1].row_inputs) == 2  # X and y, neither an argument


def test_closure_arrays_beside_arguments_and_views_of_larger_arrays(blocked):
    """``y`` from a closure beside ``X`` as an argument is sliced like an argument; a closure's
    ``X.T`` is read as a view of ``X``; an array that is rows of a larger one is not cut into
    the blocks (its owner's rows are not the batch) and the program stays right, step by
    step."""
    rng = np.random.default_rng(8)
    W1, b1, W2, b2, X, y = mlp_args(rng, 40)
    with_y = fg.jit(fg.grad(lambda W1, X: mlp(W1, b1, W2, b2, X, y)))
    XT = X.T

    def transposed(W1):
        return np.sum(np.tanh(XT.T @ W1) * y)

    by_transposed = fg.jit(fg.grad(transposed))
    for f in (with_y, by_transposed):
        for _ in range(3):
            W1 = rng.normal(size=W1.shape)
            t = np.tanh(X @ W1)
            if f is with_y:
                got, want = f(W1, X), mlp_by_hand(W1, b1, W2, b2, X, y)[0]
            else:
                got, want = f(W1), X.T @ ((1 - t * t) * y)
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)
        assert blocked, f
        blocked.clear()
    data = rng.normal(size=(81, 5))
    rows = data[:40]  # a view of 81 rows: its owner is not the batch
    of_rows = fg.jit(fg.grad(lambda W1: mlp(W1, b1, W2, b2, rows, y)))
    for _ in range(3):
        W1 = rng.normal(size=W1.shape)
        want = mlp_by_hand(W1, b1, W2, b2, rows, y)[0]
        np.testing.assert_allclose(of_rows(W1), want, rtol=1e-11, atol=1e-13)
    assert not blocked

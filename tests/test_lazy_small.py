"""The small-array path: below ``small.EAGER_BELOW`` elements lazy ops run eagerly, with NumPy's
exact results, no kernel and no planning; traces (grad, jvp, jit) keep fusing at every size."""

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import small
from fusegrad.memory import track_allocations


def _kernels(rec):
    return [e for e in rec if e["event"] == "kernel"]


@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3, max_side=6),
    dtype=st.sampled_from([np.float32, np.float64, np.int64]),
    seed=st.integers(0, 2**16),
)
def test_small_expressions_are_numpy_exactly_and_run_no_kernel(shapes, dtype, seed):
    small.EAGER_BELOW = 10_000  # hypothesis runs outside fixtures' scope per example
    try:
        rng = np.random.default_rng(seed)
        x = (rng.normal(size=shapes.input_shapes[0]) * 3).astype(dtype)
        y = (rng.normal(size=shapes.input_shapes[1]) * 3).astype(dtype)

        def expr(m, a, b):
            return m.sum(m.abs(a * b - 2) + m.maximum(a, b) / 3, axis=-1)

        with fl.recording() as rec:
            got = fl.materialize(expr(np, fl.asarray(x), fl.asarray(y)))
        want = expr(np, x, y)
        assert _kernels(rec) == []
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
    finally:
        small.EAGER_BELOW = 0


def test_a_large_broadcast_of_small_inputs_stays_lazy(small_path):
    x, y = np.ones(200), np.ones(100)
    with fl.recording() as rec:
        d = fl.asarray(x)[:, None] - fl.asarray(y)[None, :]  # 20,000 elements: fused
        total = fl.materialize(np.sum(np.exp(d), axis=1))
    assert len(_kernels(rec)) == 1
    np.testing.assert_allclose(total, np.full(200, 100.0))


def test_lazy_values_still_feed_small_ops(small_path):
    x = fl.asarray(np.arange(20000.0))
    assert isinstance(x[:5000] * 2, fl.Leaf)  # a small view of a large array: eager
    s = np.sum(np.cos(x * 0))  # a lazy (large) operand: the lazy path
    assert isinstance(s, fl.LazyArray) and not isinstance(s, fl.Leaf)
    assert float(s) == 20000.0
    y = np.tanh(fl.asarray(np.zeros(3))) + s  # s is now computed: eager again
    assert isinstance(y, fl.Leaf)


def test_gradients_keep_fusing_at_small_sizes(small_path):
    x = np.linspace(0, 1, 2000)
    with track_allocations() as report:
        g = fg.grad(lambda x: np.sum((1 - x) / 2))(x)
    assert report.count == 1  # the gradient itself, as with the path off
    np.testing.assert_array_equal(g, np.full(2000, -0.5))
    with fl.recording() as rec:
        fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :])))(np.zeros(50))
    assert _kernels(rec)


def test_jit_records_lazily_and_replays_with_the_path_on(small_path):
    g = fg.jit(fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :]))))
    for v in (np.linspace(-1, 1, 30), np.linspace(0, 2, 30)):
        want = np.sum(1 - np.tanh(v[:, None] - v[None, :]) ** 2, axis=1)
        want -= np.sum(1 - np.tanh(v[:, None] - v[None, :]) ** 2, axis=0)
        np.testing.assert_allclose(g(v), want, atol=1e-12)
    assert g.cache_info()[0]["replayable"]


def test_the_path_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(small, "EAGER_BELOW", 0)
    y = np.tanh(fl.asarray(np.zeros(3)))
    assert isinstance(y, fl.Map)

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
    # hypothesis runs outside fixtures' scope per example
    small.EAGER_BELOW = small.DEFAULT_EAGER_BELOW
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
    x = fl.asarray(np.arange(200_000.0))
    assert isinstance(x[:5000] * 2, fl.Leaf)  # a small view of a large array: eager
    s = np.sum(np.cos(x * 0))  # a lazy (large) operand: the lazy path
    assert isinstance(s, fl.LazyArray) and not isinstance(s, fl.Leaf)
    assert float(s) == 200_000.0
    y = np.tanh(fl.asarray(np.zeros(3))) + s  # s is now computed: eager again
    assert isinstance(y, fl.Leaf)


def test_gradients_run_small_ops_eagerly_and_fuse_large_ones(small_path):
    x = np.linspace(0, 1, 2000)
    with track_allocations() as report:
        g = fg.grad(lambda x: np.sum((1 - x) / 2))(x)
    assert report.count == 1  # the gradient itself, as with the path off
    np.testing.assert_array_equal(g, np.full(2000, -0.5))

    def pairwise(v):
        return np.sum(np.tanh(v[:, None] - v[None, :]))

    def want(v):
        d = 1 - np.tanh(v[:, None] - v[None, :]) ** 2
        return np.sum(d, axis=1) - np.sum(d, axis=0)

    v = np.linspace(-1, 1, 50)  # 2,500 pairs: below the threshold, eager, no kernel
    with fl.recording() as rec:
        g = fg.grad(pairwise)(v)
    assert not _kernels(rec)
    np.testing.assert_allclose(g, want(v), atol=1e-12)
    v = np.linspace(-1, 1, 300)  # 90,000 pairs: the fused kernels and their memory bounds
    fg.grad(pairwise)(v)  # compiles the kernels (the compiler's memory is not ours)
    with fl.recording() as rec, track_allocations() as report:
        g = fg.grad(pairwise)(v)
    assert _kernels(rec)
    assert report.peak_bytes < 300 * 300 * 8
    np.testing.assert_allclose(g, want(v), atol=1e-10)


def test_jit_records_lazily_and_replays_with_the_path_on(small_path):
    g = fg.jit(fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :]))))
    for v in (np.linspace(-1, 1, 30), np.linspace(0, 2, 30)):
        want = np.sum(1 - np.tanh(v[:, None] - v[None, :]) ** 2, axis=1)
        want -= np.sum(1 - np.tanh(v[:, None] - v[None, :]) ** 2, axis=0)
        np.testing.assert_allclose(g(v), want, atol=1e-12)
    assert g.cache_info()[0].replayable


def test_the_path_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(small, "EAGER_BELOW", 0)
    y = np.tanh(fl.asarray(np.zeros(3)))
    assert isinstance(y, fl.Map)


_OPERATORS = [
    lambda a, b: a + b,
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / b,
    lambda a, b: a // b,
    lambda a, b: a % b,
    lambda a, b: a < b,
    lambda a, b: a >= b,
    lambda a, b: a == b,
    lambda a, b: a != b,
    lambda a, b: a**b,
    lambda a, b: -a + abs(b),
]
_SCALARS = st.sampled_from([2, 2.0, 0.5, -1, 1, 3, True, np.float32(1.5), np.int8(3), 2j])


@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=5),
    dtype=st.sampled_from([np.float32, np.float64, np.int64, np.int8, np.bool_]),
    op=st.sampled_from(range(len(_OPERATORS))),
    scalar=_SCALARS,
    seed=st.integers(0, 2**16),
)
def test_operators_on_small_leaves_are_numpy_exactly(shapes, dtype, op, scalar, seed):
    small.EAGER_BELOW = small.DEFAULT_EAGER_BELOW
    try:
        rng = np.random.default_rng(seed)
        x = np.asarray(rng.normal(size=shapes.input_shapes[0]) * 3).astype(dtype)
        y = np.asarray(rng.normal(size=shapes.input_shapes[1]) * 3).astype(dtype)
        f = _OPERATORS[op]
        for args in ((x, y), (x, scalar), (scalar, x), (x, y.astype(np.float64))):
            lazy_args = [fl.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
            with np.errstate(all="ignore"):
                try:
                    want = f(*args)
                except Exception as e:  # noqa: BLE001  (the same error is expected)
                    want = e
                try:
                    got = f(*lazy_args)
                except Exception as e:  # noqa: BLE001
                    assert type(e) is type(want) and str(e) == str(want)
                    continue
            assert not isinstance(want, Exception), want
            assert isinstance(got, fl.Leaf)
            want = np.asarray(want)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got.array, want)
    finally:
        small.EAGER_BELOW = 0


def test_methods_and_functions_are_numpy_exactly(small_path):
    rng = np.random.default_rng(0)
    for a in (
        rng.normal(size=(4, 6)),
        np.arange(24, dtype=np.int8).reshape(4, 6),
        rng.random(6) > 0.5,
    ):
        x = fl.asarray(a)
        cases = [
            lambda m, v: m.sum(v),
            lambda m, v: v.sum(axis=1),
            lambda m, v: v.sum(axis=(0, -1), keepdims=True),
            lambda m, v: m.prod(v, axis=-1),
            lambda m, v: v.max(axis=0),
            lambda m, v: m.min(v, 0, keepdims=True),
            lambda m, v: v.reshape(-1),
            lambda m, v: v.reshape(2, -1),
            lambda m, v: m.reshape(v, (1, -1, 2)),
            lambda m, v: v.T.reshape(-1),  # not a view: a copy, as in NumPy
            lambda m, v: v.ravel(),
            lambda m, v: v.transpose(),
            lambda m, v: v[1:, None],
            lambda m, v: v[..., ::-2],
            lambda m, v: v.sum(dtype=np.float32),
            lambda m, v: m.mean(v),
            lambda m, v: v.mean(axis=0, keepdims=True),
            lambda m, v: m.var(v, ddof=1),
            lambda m, v: v.std(axis=-1, dtype=np.float32),
            lambda m, v: m.where(v > 3, v, 0.5),
            lambda m, v: m.where(v > 3, 2, v[-1]),
            lambda m, v: v.astype(np.float32),
            lambda m, v: v.astype(np.int16),
            lambda m, v: m.clip(v, 1, 4),
            lambda m, v: v.clip(None, v[-1] - 1),
            lambda m, v: m.clip(v, v[0], None),
        ]
        for f in cases:
            if a.ndim == 1 and f in cases[1:3]:
                continue
            want = f(np, a)
            got = f(np, x)
            assert isinstance(got, fl.Leaf)
            assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
            np.testing.assert_array_equal(got.array, want)


def test_errors_are_numpy_errors(small_path):
    x, y = np.ones(6), np.ones(4)
    for f in (
        lambda v, w: v + w,
        lambda v, w: v.reshape(4, -1),
        lambda v, w: v.reshape(-1, -1),
        lambda v, w: np.sum(v, axis=1),
        lambda v, w: np.max(v[:0]),
    ):
        try:
            f(x, y)
        except Exception as e:  # noqa: BLE001
            want = e
        try:
            f(fl.asarray(x), fl.asarray(y))
        except Exception as e:  # noqa: BLE001
            assert type(e) is type(want) and str(e) == str(want)
        else:
            raise AssertionError("no error")


def test_ufuncs_with_two_outputs_give_two_values(small_path):
    x = np.linspace(-3, 3, 7)
    for got, want in zip(np.divmod(fl.asarray(x), 2), np.divmod(x, 2), strict=True):
        np.testing.assert_array_equal(got, want)
    assert len(np.modf(fl.asarray(x))) == 2


def test_the_path_is_off_inside_fusing(small_path):
    x, y = fl.asarray(np.ones((4, 6))), fl.asarray(np.ones(6))
    a = np.ones(3)
    builders = [
        lambda: x * 2,
        lambda: 2 - x,
        lambda: x + y,
        lambda: x**2,
        lambda: -x,
        lambda: abs(x),
        lambda: np.tanh(x),
        lambda: x.sum(axis=1),
        lambda: np.sum(x),
        lambda: np.mean(x, axis=0),
        lambda: x.std(),
        lambda: np.where(x > 0, x, y),
        lambda: x.astype(np.float32),
        lambda: x.reshape(6, 4),
        lambda: x.T,
        lambda: x[1:],
        lambda: fl.asarray(a),
    ]
    for build in builders:
        assert build() is not build()  # the path: new leaves computed at once
        with small.fusing():
            assert build() is build()  # lazy: hash-consed nodes
            assert isinstance(build(), fl.Map | fl.Reduce) or build in builders[-4:]
    with small.fusing():
        np.testing.assert_array_equal(fl.materialize(x * 2), np.full((4, 6), 2.0))


def test_a_ufunc_numpy_computes_slowly_is_fused_from_a_quarter_of_the_threshold(
    small_path, monkeypatch
):
    from fusegrad.lazy.engines import numpy_speed

    x = np.linspace(-2.0, 2.0, 100_000)  # between fused_from(SLOW_SHARE) and EAGER_BELOW
    assert small.fused_from(small.SLOW_SHARE) <= x.size < small.EAGER_BELOW
    for slow in (False, True):  # as NumPy computes sin: in SIMD lanes, or scalar (NumPy 2)
        monkeypatch.setitem(numpy_speed._ratios, ("sin", "<f8"), 9.0 if slow else 1.0)
        monkeypatch.setattr(numpy_speed, "_slow", {})
        y = np.sin(fl.asarray(x)) * 2.0
        assert isinstance(y, fl.Leaf) != slow  # eager, or a lazy expression
        np.testing.assert_allclose(np.asarray(y), 2 * np.sin(x), rtol=1e-15)
        with fl.recording() as rec:
            g = fg.grad(lambda x: np.sum(np.sin(x) * x))(x)
        assert bool(_kernels(rec)) == slow
        np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-13, atol=1e-15)
    y = np.sin(fl.asarray(x[:1000]))  # below the quarter: eager whatever NumPy's speed
    assert isinstance(y, fl.Leaf)


def test_a_cheap_program_below_the_threshold_runs_eagerly_in_grad(small_path):
    # the MLP with 1024 x 100 activations (102,400 elements): no kernel, no planning
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((1024, 30)), rng.standard_normal((30, 100)) / 6
    b, w = rng.standard_normal(100), rng.standard_normal((100, 1))

    def f(W, b, w):
        return np.mean((np.tanh(X @ W + b) @ w) ** 2)

    with fl.recording() as rec:
        gW, gb, gw = fg.grad(f, argnums=(0, 1, 2))(W, b, w)
    assert not _kernels(rec)
    h = np.tanh(X @ W + b)
    dy = 2 * (h @ w) / X.shape[0]
    dz = (dy @ w.T) * (1 - h**2)
    np.testing.assert_allclose(gW, X.T @ dz, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gb, dz.sum(0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, h.T @ dy, rtol=1e-12, atol=1e-14)


@given(
    st.lists(st.integers(1, 6), min_size=0, max_size=3),
    st.lists(st.integers(1, 6), min_size=0, max_size=3),
    st.integers(0, 2),
    st.sampled_from([2**6, 2**9, 2**12]),
)
def test_the_size_checks_of_two_arrays_follow_numpy_broadcasting(a, b, cut, eager_below):
    # a bias-like operand (a shape that ends the other's) skips np.broadcast: the answer must
    # be the one the broadcast gives, a blow-up and a mismatch included
    b = a[len(a) - min(cut, len(a)) :] if cut < 2 else b  # often a suffix of a, sometimes not
    x, y = np.ones(a), np.ones(b)
    old = small.EAGER_BELOW
    small.EAGER_BELOW = eager_below
    try:
        got = small.values_if_small((x, y))
    finally:
        small.EAGER_BELOW = old
    try:
        size = np.broadcast(x, y).size
    except ValueError:
        assert got is None
        return
    largest = max(x.size, y.size)
    fits = largest < eager_below and size < eager_below
    blow_up = size >= eager_below // small.GROWTH and size > largest
    assert (got is not None) == (fits and not blow_up)

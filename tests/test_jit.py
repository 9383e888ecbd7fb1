"""``fusegrad.jit``: a replay gives what a fresh call gives, on new values, on both engines; what
cannot be replayed is called every time, with the reason; and a replay allocates only results."""

import doctest
import math
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.jit_cache as jit_module
from fusegrad.lazy import replay
from fusegrad.memory import track_allocations

GRADS = {
    "w1": (lambda x: np.sum((1 - x) / 2), 0),
    "w2": (lambda v: np.sum((v[:, None] - v[None, :]) / 2), 0),
    "w2t": (lambda v: np.sum(np.tanh(v[:, None] - v[None, :])), 0),
    "gauss": (
        lambda x, y, s: np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2))),
        (0, 1, 2),
    ),
    "rows": (lambda x, y: np.sum(np.log1p(np.sum((x[:, None] * y[None, :]) ** 2, axis=1))), (0, 1)),
}


def _args(name, rng, n):
    x = rng.normal(size=n)
    if name == "gauss":
        return (x, rng.normal(size=n + 1), np.array(0.8 + rng.random()))
    if name == "rows":
        return (x, rng.normal(size=n + 2))
    return (x,)


def _same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert type(u) is type(v)
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(GRADS))
def test_replay_matches_fresh_calls_on_new_values(name, engine):
    fun, argnums = GRADS[name]
    g = fg.grad(fun, argnums=argnums)
    jg = fg.jit(g)
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        args = _args(name, rng, 40)
        _same(jg(*args), g(*args))
    (info,) = jg.cache_info()
    assert info.replayable, info.reason
    assert info.calls == 3


def test_replay_runs_no_tracing_and_allocates_only_the_gradient():
    traced = []

    def f(x):
        traced.append(1)
        return np.sum((1 - x) / 2)

    g = fg.jit(fg.grad(f))
    x = np.linspace(0, 1, 4000)
    g(x)
    g(x * 2)
    assert len(traced) == 1  # the function ran once, when recorded
    with track_allocations() as report:
        out = g(x + 1)
    assert report.count == 1 and report.arrays_at_least(x.nbytes) == 1
    np.testing.assert_array_equal(out, np.full(4000, -0.5))


def test_results_are_fresh_arrays_each_call():
    g = fg.jit(fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :]))))
    x = np.linspace(-1, 1, 30)
    first = g(x)
    expected = first.copy()
    first[:] = 123.0
    np.testing.assert_allclose(g(x), expected)
    assert g(x) is not g(x)


def test_new_shape_or_dtype_traces_again():
    g = fg.jit(fg.grad(lambda x: np.sum(np.sin(x) * x)))
    for x in (np.ones(3), np.ones(4), np.ones(4, np.float32), np.ones((2, 2))):
        out = g(x)
        assert out.shape == x.shape and out.dtype == x.dtype
        np.testing.assert_allclose(out, np.cos(x) * x + np.sin(x), rtol=1e-6)
    assert g.cache_info().currsize == 4


@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3, max_side=4),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_hypothesis_broadcasting_replays_like_grad(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes

    def f(x, y):
        return np.sum(np.tanh(x * y - 0.5) + (x - y) ** 2 / 3)

    g = fg.grad(f, argnums=(0, 1))
    jg = fg.jit(g)
    for _ in range(2):
        x = rng.normal(size=sx).astype(dtype)
        y = rng.normal(size=sy).astype(dtype)
        got, want = jg(x, y), g(x, y)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_value_and_grad_value_is_a_numpy_scalar():
    vg = fg.jit(fg.value_and_grad(lambda x: np.sum(np.tanh(x))))
    x = np.linspace(0, 1, 7)
    for shift in (0.0, 1.0):
        v, g = vg(x + shift)
        assert isinstance(v, np.float64)
        assert v == pytest.approx(np.sum(np.tanh(x + shift)))
        np.testing.assert_allclose(g, 1 - np.tanh(x + shift) ** 2)
    assert vg.cache_info()[0].replayable


def test_argument_not_differentiated_is_still_an_input():
    g = fg.jit(fg.grad(lambda x, y: np.sum(x * y), argnums=0))
    x = np.ones(5)
    for k in range(3):
        np.testing.assert_array_equal(g(x, np.full(5, float(k))), np.full(5, float(k)))


def test_numpy_scalar_input_keeps_its_type_and_is_not_compiled_in():
    g = fg.jit(fg.grad(lambda x, s: np.sum(np.exp(-x / s)), argnums=1))
    x = np.linspace(0, 1, 5)
    for s in (np.float64(0.5), np.float64(2.0)):
        out = g(x, s)
        assert isinstance(out, np.float64)
        assert out == pytest.approx(np.sum(np.exp(-x / s) * x / s**2))
    assert len(g.cache_info()) == 1


def test_numpy_scalar_feeding_a_kernel_of_its_own_replays(engine):
    # 2 * s**2 is a 0-d kernel of the scalar alone; its replay input must stay 0-d
    def f(x, y, s):
        return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))

    g = fg.jit(fg.grad(f, argnums=(0, 1, 2)))
    rng = np.random.default_rng(0)
    for s in (np.float64(1.3), np.float64(0.9), np.float64(2.5)):
        x, y = rng.random(40), rng.random(30)
        got, want = g(x, y, s), fg.grad(f, argnums=(0, 1, 2))(x, y, s)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    assert g.cache_info()[0].replayable


def test_python_floats_are_inputs_and_do_not_trace_again(engine):
    traced = []

    def f(x, c):
        traced.append(c)
        return np.sum(c * x * x)

    g = fg.jit(fg.grad(f))
    x = np.ones(3, np.float32)
    for c in (2.0, 3.0, 0.5, 1e3, 7.25):
        out = g(x, c)
        assert out.dtype == np.float32  # the number stays weak-typed (NEP 50)
        np.testing.assert_array_equal(out, np.full(3, 2 * c, np.float32))
    # recorded once, once more with a second value to check the program is the same, and twice
    # with the number's double poisoned (±inf) to C code, to look for reads Python cannot see
    assert len(traced) == 4
    info = g.cache_info()
    assert (info.hits, info.misses, info.currsize) == (3, 2, 1)
    assert info[0].numbers == "inputs" and info[0].replayable


@pytest.mark.parametrize(
    "choose",
    [
        lambda s: math.exp(2 * s) > 2,  # C code reads a number computed from the argument
        lambda s: math.copysign(1, s - 0.5) > 0,
        lambda s: f"{s / 2:.0f}" == "1",
        lambda s: math.isclose(s, 1.0),  # a point: +-inf take the side of 0.5 and 0.6 too
        lambda s: 0.9 < math.exp(s) < 1.1,
    ],
    ids=["exp(2s)", "copysign(s - 0.5)", "format(s / 2)", "isclose(s, 1)", "band"],
)
def test_c_reads_of_derived_numbers_and_points_are_seen(choose):
    def loss(x, s):
        return np.sum((1.0 if choose(s) else 2.0) * x)

    g = fg.jit(fg.grad(loss))
    for s in (0.5, 0.6, 0.7, 1.0, 0.01, 2.0, 4.0):
        np.testing.assert_array_equal(g(np.arange(3.0), s), fg.grad(loss)(np.arange(3.0), s))


@pytest.mark.parametrize("read", ["math.sqrt", "np.float64", "format"])
def test_a_number_read_by_c_code_is_compiled_in_even_when_two_values_agree(read):
    # C code reads a float's own double without Python's number protocol: the first two values
    # take the same side of the branch, so comparing their recordings alone trusted the program
    # and replayed the 0.1 side for 1.0 and beyond (a silently wrong gradient)
    import math

    def side(s):
        if read == "math.sqrt":
            return math.sqrt(s) > 0.9
        if read == "np.float64":
            return bool(np.float64(s) > 0.9)
        return f"{s:.3f}" > "0.900"

    def loss(x, s):
        return np.sum((2.0 if side(s) else 3.0) * x)

    g = fg.jit(fg.grad(loss))
    for s in (0.1, 0.2, 0.3, 1.0, 2.0, 4.0):
        np.testing.assert_array_equal(g(np.arange(3.0), s), fg.grad(loss)(np.arange(3.0), s))
    assert g.cache_info()[0].numbers == "compiled in"


def test_a_number_scaling_a_reduction_stays_an_input():
    # s * mean(...): s is the mean's cotangent, which became a 0-d array by np.asarray (a read
    # of s), so every new s recorded again: 0 hits
    def loss(w, x, s):
        return s * np.mean(np.tanh(x @ w) ** 2)

    g = fg.jit(fg.grad(loss))
    x, w = np.random.default_rng(0).normal(size=(50, 4)), np.ones(4)
    for s in (0.5, 0.7, 0.9, 1.1, 3.5, 0.25, 1e-3, 7.0):
        np.testing.assert_allclose(g(w, x, s), fg.grad(loss)(w, x, s), rtol=1e-12)
    assert g.cache_info()[0].numbers == "inputs" and g.cache_info().hits >= 4
    # s times a full reduction: its cotangent, a 0-d kernel of s, broadcast back to x's shape
    # (a kernel of the number alone kept shape () and the projection onto x raised)
    h = fg.jit(fg.grad(lambda x, s: np.sum(x) * s, argnums=(0, 1)))
    for s in (1.3, 0.2, 2.5, -1.0, 4.0, 0.7, 3.3, 1.1, 9.0):
        got, want = (
            h(np.arange(3.0), s),
            fg.grad(lambda x, s: np.sum(x) * s, (0, 1))(np.arange(3.0), s),
        )
        np.testing.assert_allclose(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1])


def test_numbers_under_a_profiler():
    # cProfile holds the profile hook and cannot be chained: the watch raised TypeError inside
    # it; the numbers are compiled in instead (a Python profiler is chained)
    import cProfile
    import sys

    def loss(x, s):
        return np.sum(np.tanh(x * s))

    g = fg.jit(fg.grad(loss))
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        for s in (0.5, 0.7, 0.9):
            np.testing.assert_allclose(g(np.ones(3), s), fg.grad(loss)(np.ones(3), s))
    finally:
        profiler.disable()
    assert g.cache_info()[0].numbers == "compiled in"
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(event))
    try:
        h = fg.jit(fg.grad(loss))
        for s in (0.5, 0.7, 0.9, 1.1):
            np.testing.assert_allclose(h(np.ones(3), s), fg.grad(loss)(np.ones(3), s))
    finally:
        sys.setprofile(None)
    assert calls and h.cache_info()[0].numbers == "inputs"


def test_a_recordings_number_type_called_gives_a_plain_number():
    import statistics  # converts with type(s)(value); the recording's type had no value then

    def f(x, s):
        return np.sum(x * statistics.mean([s, 1.0]) * type(s)(2.0))

    g = fg.jit(fg.grad(f))
    for s in (0.1, 0.5, 3.0):
        np.testing.assert_allclose(g(np.ones(3), s), fg.grad(f)(np.ones(3), s))


def test_python_float_gradient_comes_back_as_a_float():
    g = fg.jit(fg.grad(lambda x, c: np.sum(c * x), argnums=1))
    x = np.arange(4.0)
    assert g(x, 2.0) == 6.0 and isinstance(g(x, 2.0), float)
    assert g(x + 1, 2.0) == 10.0


def test_pytrees_and_keyword_arguments():
    def loss(params, x, scale=1.0):
        return np.sum(np.tanh(params["w"] * x + params["b"]) ** 2) * scale

    g = fg.grad(loss)
    jg = fg.jit(g)
    rng = np.random.default_rng(1)
    for _ in range(2):
        params = {"w": rng.normal(size=6), "b": rng.normal(size=6)}
        x = rng.normal(size=6)
        got, want = jg(params, x, scale=2.0), g(params, x, scale=2.0)
        assert set(got) == {"w", "b"}
        for k in got:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12)
    assert jg.cache_info()[0].replayable


def test_non_contiguous_inputs():
    g = fg.jit(fg.grad(lambda a, b: np.sum(np.sin(a) * b[:, None])))
    a = np.arange(12.0).reshape(3, 4) / 10
    b = np.arange(8.0)[::2]
    g(np.ascontiguousarray(a.T), np.ascontiguousarray(b))
    np.testing.assert_allclose(g(a.T, b), np.cos(a.T) * b[:, None])
    assert g.cache_info()[0].replayable


def test_value_dependent_control_flow_is_called_every_time():
    def f(x):
        if np.sum(x) > 0:  # a Python branch on a value: cannot be replayed
            return np.sum(x**2)
        return np.sum(-x)

    g = fg.jit(fg.grad(f))
    with pytest.warns(UserWarning, match="run uncompiled"):
        np.testing.assert_allclose(g(np.ones(3)), 2 * np.ones(3))
    np.testing.assert_allclose(g(-np.ones(3)), -np.ones(3))
    (info,) = g.cache_info()
    assert not info.replayable and "evaluated while the function ran" in info.reason


def test_a_plain_array_indexed_by_a_computed_index_says_how_to_replay_it():
    # data[idx] and np.take(data, idx) of a NumPy `data`: NumPy converts the lazy index without
    # asking fusegrad, so the gather cannot be recorded; the reason names the fix (pass `data`
    # as an argument), and with it the program replays
    data = np.arange(10.0) ** 2

    def closure(v):
        idx = np.mod(np.floor(v * 3).astype(int), 10)
        return np.sum(data[idx] * v)

    def argument(v, d):
        idx = np.mod(np.floor(v * 3).astype(int), 10)
        return np.sum(d[idx] * v)

    by_closure, by_argument = fg.jit(fg.grad(closure)), fg.jit(fg.grad(argument))
    with pytest.warns(UserWarning, match="run uncompiled"):
        by_closure(np.linspace(0, 2, 5))
    for k in range(3):
        v = np.linspace(0, 2, 5) + 0.1 * k
        want = data[np.mod(np.floor(v * 3).astype(int), 10)]
        np.testing.assert_allclose(by_closure(v), want, rtol=1e-15)
        np.testing.assert_allclose(by_argument(v, data), want, rtol=1e-15)
    (info,) = by_closure.cache_info()
    assert not info.replayable and "index into a plain NumPy array" in info.reason
    assert "pass that array to the jitted function as an argument" in info.reason
    assert by_argument.cache_info()[0].replayable


def test_a_closure_array_is_read_at_each_call_and_values_made_from_it_at_the_recording():
    # C itself is a constant whose contents each replay reads; C - C.mean(), computed by NumPy
    # before it meets x, is a value of the recording (as jax.jit's closure values are), until
    # the cache is cleared or C is passed as an argument (README, "jit")
    C = np.array([1.0, 2.0, 3.0])
    direct = fg.jit(fg.grad(lambda x: np.sum(x * C)))
    derived = fg.jit(fg.grad(lambda x: np.sum(x * (C - C.mean()))))
    passed = fg.jit(fg.grad(lambda x, c: np.sum(x * (c - c.mean()))))
    x = np.zeros(3)
    for _ in range(2):
        direct(x), derived(x), passed(x, C)
    C[:] = [10.0, 0.0, -10.0]
    np.testing.assert_array_equal(direct(x), C)
    np.testing.assert_array_equal(derived(x), [-1.0, 0.0, 1.0])  # recorded with the old C
    np.testing.assert_array_equal(passed(x, C), C)
    derived.cache_clear()
    np.testing.assert_array_equal(derived(x), C)


def test_rules_that_need_arrays_are_steps_of_the_replay():
    def f(w, X):
        return np.sum(np.log1p(np.exp(X @ w)))

    g = fg.grad(f)
    jg = fg.jit(g)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(8, 3))
    for _ in range(3):
        w = rng.normal(size=3)
        np.testing.assert_allclose(jg(w, X), g(w, X))
        # dL/dw = X^T (sigmoid(X w)), by hand
        np.testing.assert_allclose(jg(w, X), X.T @ (1 / (1 + np.exp(-(X @ w)))))
    (info,) = jg.cache_info()
    assert info.replayable, info.reason
    assert jg.cache_info().hits == 5


def _mlp(W1, b1, W2, b2, X, y):
    return np.mean((np.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)


def _w4(w, b, X, t):
    return np.mean(np.logaddexp(0, -t * (X @ w + b)))


def _rnn(Wx, Wh, b, xs):
    h = np.zeros(Wh.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def _programs(rng):
    n = rng.normal
    return {
        "mlp": (_mlp, (0, 1, 2, 3), lambda: (n(size=(6, 8)), n(size=8), n(size=(8, 1)),
                                             n(size=1), n(size=(12, 6)), n(size=(12, 1)))),
        "w4": (_w4, (0, 1), lambda: (n(size=5), abs(float(n())), n(size=(20, 5)),
                                     np.sign(n(size=20)))),
        "rnn": (_rnn, (0, 1, 2), lambda: (0.3 * n(size=(3, 6)), 0.3 * n(size=(6, 6)),
                                          n(size=6), n(size=(30, 3)))),
    }  # fmt: skip


@pytest.mark.parametrize("name", ["mlp", "w4", "rnn"])
def test_matmul_programs_are_replayed_as_grad_computes_them(name, engine):
    rng = np.random.default_rng(4)
    f, argnums, make = _programs(rng)[name]
    g = fg.grad(f, argnums=argnums)
    jg = fg.jit(g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: replayed
        for _ in range(3):
            args = make()
            for got, want in zip(jg(*args), g(*args)):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    (info,) = jg.cache_info()
    assert info.replayable, info.reason
    assert jg.cache_info().hits >= 1


def test_the_mlp_gradient_by_hand_through_jit():
    rng = np.random.default_rng(5)
    W1, b1, W2, b2 = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(4, 1)), 0.5
    jg = fg.jit(fg.grad(_mlp, argnums=(0, 2)))
    for _ in range(2):
        X, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 1))
        h = np.tanh(X @ W1 + b1)
        r = 2 * (h @ W2 + b2 - y) / y.size
        dW1 = X.T @ ((r @ W2.T) * (1 - h**2))
        got1, got2 = jg(W1, b1, W2, b2, X, y)
        np.testing.assert_allclose(got1, dW1, rtol=1e-12)
        np.testing.assert_allclose(got2, h.T @ r, rtol=1e-12)
    assert jg.cache_info()[0].replayable


def test_eager_numpy_calls_on_lazy_values_are_steps():
    # no grad: np.linalg.inv and matmul on lazy values, then fused elementwise work
    jf = fg.jit(lambda A, x: np.exp(np.linalg.inv(A + 3 * np.eye(3)) @ x) * 2)
    rng = np.random.default_rng(6)
    for _ in range(3):
        A, x = rng.normal(size=(3, 3)), rng.normal(size=3)
        want = np.exp(np.linalg.inv(A + 3 * np.eye(3)) @ x) * 2
        np.testing.assert_allclose(jf(A, x), want, rtol=1e-13)
    assert jf.cache_info()[0].replayable and jf.cache_info().hits == 2


LINALG = {
    "grad det": fg.grad(lambda A: np.linalg.det(A)),
    "value_and_grad slogdet": fg.value_and_grad(lambda A: np.linalg.slogdet(A)[1]),
    "grad solve": fg.grad(lambda A: np.sum(np.linalg.solve(A, np.sin(A[0])) ** 2)),
    "grad cholesky": fg.grad(lambda A: np.sum(np.linalg.cholesky(A @ A.T) ** 2)),
    "grad inv": fg.grad(lambda A: np.sum(np.linalg.inv(A) * np.tanh(A))),
    "grad eigh": fg.grad(lambda A: np.sum(np.linalg.eigh(A + A.T)[0] ** 2)),
    "grad svd": fg.grad(lambda A: np.sum(np.linalg.svd(A)[1])),
    "grad einsum": fg.grad(lambda A: np.sum(np.exp(np.einsum("ij,jk->ik", A, A) / 9))),
    "grad sort cumsum": fg.grad(lambda A: np.sum(np.cumsum(np.sort(A, axis=1), axis=0) ** 2)),
    "grad gather": fg.grad(lambda A: np.sum(A[np.array([2, 0, 0]), 1:] ** 3)),
    "vjp": lambda A: fg.vjp(lambda B: np.tanh(B @ B), A)[1](np.ones((3, 3))),
    "grad of grad": fg.grad(lambda A: np.sum(fg.grad(lambda B: np.sum(np.tanh(B @ B)))(A))),
    "no grad": lambda A: np.linalg.eigh(A + A.T),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linear_algebra_programs_replay_with_grads_types(name):
    f = LINALG[name]
    jf = fg.jit(f)
    rng = np.random.default_rng(8)
    for _ in range(3):
        A = rng.normal(size=(3, 3)) + 3 * np.eye(3)
        got, want = jf(A), f(A)
        pairs = list(zip(got, want)) if isinstance(want, tuple) else [(got, want)]
        for a, b in pairs:
            assert type(a) is type(b) and np.shape(a) == np.shape(b)
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    (info,) = jf.cache_info()
    assert info.replayable, info.reason
    assert jf.cache_info().hits == 2


def test_a_closure_array_read_by_a_step_is_read_at_each_call():
    W = np.ones((3, 2))
    jf = fg.jit(fg.grad(lambda x: np.sum(np.sin(x @ W))))
    x = np.arange(3.0)
    np.testing.assert_allclose(jf(x), W @ np.cos(x @ W))
    W[:] = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])  # contents change, the name does not
    np.testing.assert_allclose(jf(x), W @ np.cos(x @ W))
    assert jf.cache_info()[0].replayable and jf.cache_info().hits == 1


def test_a_gradient_that_is_a_broadcast_seed_is_replayed():
    # d/dA sum(A) = ones: a broadcast of the cotangent seed, no kernel computes it
    jg = fg.jit(fg.grad(lambda A, x: np.sum(x**2) + 3 * np.sum(A), argnums=(0, 1)))
    for k in range(3):
        dA, dx = jg(np.full((2, 3), float(k)), np.arange(2.0) + k)
        np.testing.assert_array_equal(dA, np.full((2, 3), 3.0))
        np.testing.assert_array_equal(dx, 2 * (np.arange(2.0) + k))
        dA[:] = -1.0  # the caller owns what it gets: the next replay is not changed
    assert jg.cache_info()[0].replayable and jg.cache_info().hits == 2


def test_steps_whose_shapes_depend_on_values_fall_back():
    f = lambda x: np.sum(x[x > 0] ** 2)  # noqa: E731
    jg = fg.jit(fg.grad(f))
    a = np.array([1.0, -2.0, 3.0, 0.5])
    np.testing.assert_array_equal(jg(a), [2.0, 0.0, 6.0, 1.0])
    np.testing.assert_array_equal(jg(2 * a), [4.0, 0.0, 12.0, 2.0])  # same mask: replayed
    b = np.array([1.0, -2.0, -3.0, 0.5])
    with pytest.warns(UserWarning, match="depend on the values"):
        np.testing.assert_array_equal(jg(b), [2.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(jg(-b), [0.0, 4.0, 6.0, 0.0])
    (info,) = jg.cache_info()
    assert not info.replayable and "getitem" in info.reason


def test_a_python_branch_on_a_matmul_result_is_not_replayed():
    def f(w, X):
        z = X @ w
        return np.sum(z**2) if z[0] > 0 else np.sum(-z)

    jg = fg.jit(fg.grad(f))
    X = np.eye(2)
    with pytest.warns(UserWarning, match="run uncompiled"):
        np.testing.assert_array_equal(jg(np.array([1.0, 2.0]), X), [2.0, 4.0])
    np.testing.assert_array_equal(jg(np.array([-1.0, 2.0]), X), [-1.0, -1.0])
    assert not jg.cache_info()[0].replayable


def test_nested_grad_inside_jit_is_correct():
    inner = fg.grad(lambda x: np.sum(np.sin(x) * x))
    jg = fg.jit(fg.grad(lambda x: np.sum(inner(x))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in (np.linspace(0, 1, 4), np.linspace(1, 2, 4)):
            np.testing.assert_allclose(jg(x), 2 * np.cos(x) - x * np.sin(x), rtol=1e-12)


def test_plain_functions_replay_lazily():
    f = fg.jit(lambda x, y: np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2)), axis=1))
    rng = np.random.default_rng(3)
    for _ in range(2):
        x, y = rng.normal(size=5), rng.normal(size=7)
        np.testing.assert_allclose(f(x, y), np.sum(np.exp(-((x[:, None] - y) ** 2)), axis=1))
    total = fg.jit(lambda x: np.sum(np.tanh(x)))
    assert isinstance(total(np.ones(3)), np.float64)
    assert total(np.zeros(3)) == 0.0
    assert total.cache_info()[0].replayable


def test_jit_under_grad_is_transparent():
    f = fg.jit(lambda x: np.sum(np.sin(x)))
    np.testing.assert_allclose(fg.grad(f)(np.zeros(3)), np.ones(3))


def test_closure_arrays_are_constants_read_at_each_call():
    c = np.ones(3)
    g = fg.jit(fg.grad(lambda x: np.sum(c * x)))
    np.testing.assert_array_equal(g(np.zeros(3)), np.ones(3))
    c[:] = 2.0  # contents are read at each call, as NumPy would
    np.testing.assert_array_equal(g(np.zeros(3)), np.full(3, 2.0))


def test_unused_argument_gradient_is_zeros():
    g = fg.jit(fg.grad(lambda x, y: np.sum(x * 2), argnums=(0, 1)))
    for _ in range(2):
        gx, gy = g(np.ones(2), np.ones(3))
        np.testing.assert_array_equal(gx, [2.0, 2.0])
        np.testing.assert_array_equal(gy, np.zeros(3))
    assert g.cache_info()[0].replayable


def test_docstring_examples():
    for module in (jit_module, replay):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_a_gradient_of_numbers_only_is_folded_and_still_fresh():
    # W2's gradient, sum over the pairs of (v_i - v_j) / 2, is zero whatever v: its kernel reads
    # nothing but the cotangent seed, so the replay keeps the recorded result.
    g = fg.jit(fg.grad(lambda v: np.sum((v[:, None] - v[None, :]) / 2)))
    first = g(np.arange(5.0))
    first[:] = 7.0
    np.testing.assert_array_equal(g(np.ones(5)), np.zeros(5))
    g2 = fg.jit(fg.grad(lambda x: np.sum((1 - x) / 2)))
    g2(np.ones(3))
    np.testing.assert_array_equal(g2(np.zeros(3)), np.full(3, -0.5))


def test_first_call_runs_on_the_arguments_without_copying_them():
    x = np.random.default_rng(0).standard_normal(200_000)
    # another jit of the same function first: loading its kernel (numba's start-up, the disk
    # cache) allocates once per process, whichever test comes first under xdist
    fg.jit(fg.grad(lambda x: np.sum((1 - x) / 2)))(x.copy())
    g = fg.jit(fg.grad(lambda x: np.sum((1 - x) / 2)))
    with track_allocations() as mem:
        out = g(x)  # traced and recorded: the gradient is the only large array
    np.testing.assert_array_equal(out, np.full(x.size, -0.5))
    assert mem.peak_bytes < 1.25 * x.nbytes, mem
    # this gradient reads no input (it is -0.5 everywhere): a result this large is computed again
    # at each replay, not kept by the recording and copied (an 8-byte seed is kept)
    assert mem.arrays_at_least(x.nbytes // 2) == 1, mem
    out[:] = 0.0
    with track_allocations() as mem:
        again = g(x)
    np.testing.assert_array_equal(again, np.full(x.size, -0.5))
    assert mem.peak_bytes < 1.1 * x.nbytes and mem.arrays_at_least(x.nbytes // 2) == 1, mem
    assert g.cache_info()[0].replayable


def test_a_closure_alias_of_an_argument_is_still_a_constant():
    # c is read from the closure and passed as x: by memory the two cannot be told apart, so the
    # recording is redone on a copy of x, and c stays a constant of the replay
    c = np.arange(4.0)
    g = fg.jit(fg.grad(lambda x: np.sum(c * x**2)))
    np.testing.assert_allclose(g(c), 2 * c * c)
    y = np.full(4, 3.0)
    np.testing.assert_allclose(g(y), 2 * c * y)
    assert g.cache_info()[0].replayable


def test_the_same_array_twice_then_two_arrays():
    g = fg.jit(fg.grad(lambda x, y: np.sum(np.tanh(x[:, None] - y[None, :])), argnums=(0, 1)))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(30), rng.standard_normal(30)
    for a, b in ((x, x), (x, y), (y, x)):
        t = 1 - np.tanh(a[:, None] - b[None, :]) ** 2
        ga, gb = g(a, b)
        np.testing.assert_allclose(ga, t.sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(gb, -t.sum(axis=0), rtol=1e-12)


def test_lazy_values_computed_before_the_first_call_are_not_reused():
    import fusegrad.lazy as fl

    x = np.linspace(-1.0, 1.0, 50)
    fl.materialize(np.tanh(fl.asarray(x)) * 2)  # cached on the nodes of x's own leaf
    g = fg.jit(lambda x: np.tanh(x) * 2)
    np.testing.assert_allclose(g(x), np.tanh(x) * 2)
    y = x + 1
    np.testing.assert_allclose(g(y), np.tanh(y) * 2)  # replayed, not the recorded result
    assert g.cache_info()[0].replayable


# --- issue 14 item 4: a value read into Python is an input of the recording, or the signature is
# not replayable (never a replay of the first call's value or branch) ---


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def test_an_element_read_stays_an_input_of_the_recording(engine):
    f = lambda x: np.sum(x * x[0])  # noqa: E731
    g, jg, jf = fg.grad(f), fg.jit(fg.grad(f)), fg.jit(f)
    a = np.arange(1.0, 4.0)
    for x in (a, 10 * a, -a):
        want = np.full(3, x[0])  # d/dx_i of x_0 * sum(x) is x_0 + (i == 0) * sum(x)
        want[0] += np.sum(x)
        np.testing.assert_allclose(jg(x), want, rtol=1e-14)
        np.testing.assert_allclose(g(x), want, rtol=1e-14)
        assert jf(x) == pytest.approx(x[0] * np.sum(x))
    for j in (jg, jf):
        (info,) = j.cache_info()
        assert info.replayable, info.reason  # a 0-d view of the input: still replayable
        assert info.calls == 3


def test_iterating_over_elements_replays_with_new_values():
    def f(x):
        total = 0.0
        for v in x:
            total = total + v * v
        return total

    jg = fg.jit(fg.grad(f))
    for x in (np.arange(3.0), np.array([2.0, -1.0, 5.0])):
        np.testing.assert_allclose(jg(x), 2 * x)
    assert jg.cache_info()[0].replayable


def test_a_branch_on_an_element_is_never_replayed(engine):
    def f(x):
        if x[0] > 0:
            return np.sum(x * 2)
        return np.sum(x * 3)

    jg = fg.jit(fg.grad(f))
    a = np.arange(1.0, 4.0)
    with pytest.warns(UserWarning, match="run uncompiled"):
        np.testing.assert_array_equal(jg(a), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(jg(-a), [3.0, 3.0, 3.0])
    (info,) = jg.cache_info()
    assert not info.replayable and "evaluated while the function ran" in info.reason


@pytest.mark.parametrize(
    "read",
    [
        lambda y: float(y[0]),
        lambda y: y[1].item(),
        lambda y: int(y[0]) + 0.5,
        lambda y: 2.0 if bool(y[0] > 1) else -1.0,
        lambda y: 1.0 if np.any(y > 1) else 0.0,
    ],
    ids=["float", "item", "int", "bool", "any"],
)
def test_python_reads_of_an_argument_make_the_signature_not_replayable(read):
    # y is not differentiated: reading it is allowed, and must be done again at every call
    f = lambda x, y: np.sum(x * read(y))  # noqa: E731
    jg = fg.jit(fg.grad(f))
    x = np.linspace(0.0, 1.0, 4)
    for y in (np.array([3.0, 4.0]), np.array([0.0, -2.0]), np.array([7.0, 1.5])):
        np.testing.assert_allclose(_quiet(jg, x, y), np.full(4, read(y)))
    (info,) = jg.cache_info()
    assert not info.replayable and info.reason


def test_a_read_used_as_an_index_is_not_replayed():
    jf = fg.jit(lambda x, n: x * x[int(n[0])])
    x = np.arange(1.0, 5.0)
    for k in (0, 2, 3):
        np.testing.assert_array_equal(_quiet(jf, x, np.array([k])), x * x[k])
    assert not jf.cache_info()[0].replayable


def test_a_float_of_a_differentiated_value_raises_and_the_reason_is_kept():
    jg = fg.jit(fg.grad(lambda x: np.sum(x) * float(x[0])))
    with pytest.raises(TypeError, match="float"):
        jg(np.ones(3))
    (info,) = jg.cache_info()
    assert not info.replayable and "TypeError" in info.reason and "float" in info.reason


# --- issue 14 item 9: Python numbers are inputs; a bounded cache with named fields ---


def test_two_hundred_floats_make_one_signature_and_little_memory():
    import tracemalloc

    g = fg.jit(fg.grad(lambda x, s: np.sum(np.exp(-((x / s) ** 2)))))
    x = np.linspace(-1.0, 1.0, 20_000)
    g(x, 0.5)
    g(x, 0.75)
    g(x, 0.9)  # the first replay: may load the kernel on numba (a replayed kernel is hot)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for k in range(200):
        s = 1.0 + k / 100
        out = g(x, s)
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    np.testing.assert_allclose(out, -2 * x / s**2 * np.exp(-((x / s) ** 2)), rtol=1e-12)
    info = g.cache_info()
    assert info.currsize == 1 and info.hits == 201 and info.misses == 2, info
    assert grown < 2 * x.nbytes, grown  # the last gradient, not one program per value


def test_a_nan_number_does_not_trace_again():
    traced = []

    def f(x, s):
        traced.append(1)
        return np.sum(x * s)

    g = fg.jit(fg.grad(f))
    for _ in range(4):
        assert np.isnan(g(np.ones(3), float("nan"))).all()
    assert len(traced) == 1 and g.cache_info().currsize == 1


def test_numbers_read_by_the_function_are_compiled_in_one_signature_per_value(engine):
    def f(x, s):
        if s > 1:  # a branch on the number: each value is its own signature
            return np.sum(x * s)
        return np.sum(x / s)

    g = fg.jit(fg.grad(f), cache_size=3)
    x = np.ones(4)
    for s in (2.0, 0.5, 3.0, 0.25, 2.0, 5.0):
        want = np.full(4, s if s > 1 else 1 / s)
        np.testing.assert_allclose(g(x, s), want)
    info = g.cache_info()
    assert info.currsize == 3 and info.maxsize == 3  # bounded: least recently used dropped
    assert all(e.numbers == "compiled in" and e.replayable for e in info)
    assert "comparison" in info[0].reason


def test_a_number_read_by_c_code_is_caught_by_the_second_recording():
    import math

    g = fg.jit(fg.grad(lambda x, s: np.sum(x * math.sqrt(s))))
    x = np.ones(3)
    for s in (4.0, 9.0, 16.0, 4.0, 25.0):
        np.testing.assert_allclose(g(x, s), np.full(3, math.sqrt(s)))
    assert all(e.numbers == "compiled in" for e in g.cache_info())


def test_the_sign_zero_inf_and_nan_of_a_number_are_part_of_the_signature():
    import math

    # math.isinf reads the value where Python cannot see it: the class of the value keys it
    g = fg.jit(lambda x, s: x * (0.0 if math.isinf(s) else s))
    x = np.arange(3.0)
    for s in (2.0, 3.0, float("inf"), 4.0, -float("inf"), -1.0, 0.0, -0.0):
        np.testing.assert_array_equal(g(x, s), x * (0.0 if math.isinf(s) else s))


def test_number_arithmetic_keeps_numbers_dynamic():
    def f(x, s, z):
        scale = 1 / (2 * s**2) - abs(-s) + (z * z.conjugate()).real
        return np.sum(np.exp(-x * scale)), scale

    jf = fg.jit(f)
    x = np.linspace(0.0, 1.0, 6)
    for s, z in ((1.0, 1 + 1j), (2.0, 0.5 + 2j), (0.5, 3 + 0.5j), (3.0, 2 + 1j)):
        total, scale = jf(x, s, z)
        want = 1 / (2 * s**2) - s + abs(z) ** 2
        assert type(scale) is float and scale == pytest.approx(want)
        assert total == pytest.approx(np.sum(np.exp(-x * want)))
    info = jf.cache_info()
    assert (info.currsize, info.misses, info.hits) == (1, 2, 2)  # recorded, checked, replayed
    assert info[0].numbers == "inputs"


def test_ints_are_compiled_in():
    g = fg.jit(lambda x, n: np.sum(x[:n]))
    x = np.arange(5.0)
    assert [g(x, n) for n in (1, 3, 5, 3)] == [0.0, 3.0, 10.0, 3.0]
    assert g.cache_info().currsize == 3


def test_cache_size_bounds_the_signatures_and_is_validated():
    g = fg.jit(lambda x: x * 2, cache_size=2)
    for n in (1, 2, 3, 2, 4):
        np.testing.assert_array_equal(g(np.ones(n)), np.full(n, 2.0))
    info = g.cache_info()
    assert info.maxsize == 2 and info.currsize == 2
    assert [e.signature[-1][0] for e in info] == [(2,), (4,)]  # the most recently used
    unbounded = fg.jit(lambda x: x + 1, cache_size=None)
    for n in range(1, 80):
        unbounded(np.ones(n))
    assert unbounded.cache_info().currsize == 79 and unbounded.cache_info().maxsize is None
    assert fg.jit(cache_size=5)(lambda x: x - 1)(np.ones(2)).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="cache_size"):
        fg.jit(lambda x: x, cache_size=0)
    with pytest.raises(TypeError, match="cache_size"):
        fg.jit(lambda x: x, cache_size=2.5)
    g.cache_clear()
    info = g.cache_info()
    assert (info.hits, info.misses, info.maxsize, info.currsize) == (0, 0, 2, 0)


def test_cache_info_counts_hits_and_misses():
    g = fg.jit(fg.grad(lambda x: np.sum(x**3)))
    for x in (np.ones(3), np.ones(3) * 2, np.ones(4), np.ones(3)):
        g(x)
    info = g.cache_info()
    assert (info.hits, info.misses, info.maxsize, info.currsize) == (2, 2, 64, 2)
    assert [e.calls for e in info] == [1, 3] and len(info) == 2  # least recently used first
    assert all(isinstance(e, jit_module.SignatureInfo) for e in info)


def test_a_first_call_that_raises_records_again_and_keeps_the_reason():
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("not ready yet")
        return np.sum(x * x)

    g = fg.jit(fg.grad(f))
    with pytest.raises(RuntimeError):
        g(np.ones(2))
    (info,) = g.cache_info()
    assert not info.replayable and info.reason == "the call raised RuntimeError: not ready yet"
    np.testing.assert_array_equal(g(np.ones(2)), [2.0, 2.0])  # recorded this time
    np.testing.assert_array_equal(g(np.full(2, 3.0)), [6.0, 6.0])
    (info,) = g.cache_info()
    assert info.replayable and info.reason == "" and len(calls) == 2


def test_a_recording_after_one_that_raised_keys_the_numbers_it_reads():
    # the first call raises before reading s; the second reads it (a comparison), so its
    # program serves s = 1.25 only: every other value records its own (it replayed 1.25's)
    def f(x, s):
        if s < 0.8:
            raise ValueError("s too small")
        if s > 1.0:
            return np.sum(np.sin(x)) * s
        return np.sum(np.cos(x)) * s

    g, x = fg.jit(fg.grad(f)), np.array([0.1, 0.2, 0.3])
    with pytest.raises(ValueError):
        g(x, 0.5)
    for s in (1.25, 1.5, 0.9, 1.25, 2.0):
        want = np.cos(x) * s if s > 1.0 else -np.sin(x) * s
        np.testing.assert_allclose(g(x, s), want, rtol=1e-15)
    info = g.cache_info()
    assert all(e.numbers == "compiled in" for e in info.entries)
    assert len(info.entries) == 4 and info.hits == 1


@pytest.mark.filterwarnings("ignore:fusegrad.jit")  # a function may run uncompiled: its choice
def test_a_number_argument_in_where_and_in_a_sequence_of_numbers():
    # np.where(cond, s, 0.0) with an array condition raised TypeError (the lazy where declined
    # jit's number type); np.stack([s, s**2, 1.0]) recursed without end (the number's NumPy
    # dispatch handed the list on unchanged). scipy.stats.poisson.logpmf(0, mu) does the first.
    cond = np.array([True, False, True])
    fs = [
        lambda s: np.sum(np.where(cond, s, 0.0) * np.arange(3.0)),
        lambda s: np.sum(np.stack([s, s**2, 1.0]) ** 2),
        lambda s: np.sum(np.array([s, 2.0]) ** 2),
    ]
    for f in fs:
        jitted, plain = fg.jit(fg.grad(f)), fg.grad(f)
        for s in (1.7, 2.5, -0.5, 1.7):
            np.testing.assert_allclose(jitted(s), plain(s), rtol=1e-15)
        np.testing.assert_allclose(fg.jit(f)(0.3), f(0.3), rtol=1e-15)
    st = pytest.importorskip("scipy.stats")
    logpmf = fg.jit(fg.grad(lambda mu: st.poisson.logpmf(0, mu)))
    assert logpmf(1.7) == -1.0 and logpmf(2.5) == -1.0


_XP, _FP = np.array([0.0, 0.5, 1.0]), np.array([0.0, 2.0, 1.0])


def _softmax(a, axis):
    return pytest.importorskip("scipy.special").softmax(a, axis=axis)


REPLAYED = {
    "prod": lambda a: np.sum(np.prod(a, axis=0) * np.arange(5.0)),
    "average": lambda a: np.average(a, axis=1)[1] + np.average(a),
    "nansum": lambda a: np.nansum(a * a),
    "nanmax": lambda a: np.sum(np.nanmax(a, axis=1)),
    "nanmean": lambda a: np.sum(np.nanmean(a, axis=0) ** 2),
    "nan_to_num": lambda a: np.sum(np.nan_to_num(a * a, nan=3.0)),
    "softmax": lambda a: np.sum(_softmax(a, axis=1) * np.arange(5.0)),
    "interp": lambda a: np.sum(np.interp(a, _XP, _FP) * a),
    "partition": lambda a: np.sum(np.partition(a, 2, axis=1)[:, :2] ** 2),
}


@pytest.mark.parametrize("name", list(REPLAYED))
def test_functions_that_read_no_value_replay(name):
    # these rules looked at values they did not need (np.prod's zeros, the NaN masks, the
    # softmax's max, np.average's sizes, interp's and partition's indices): jit ran them
    # uncompiled; each call now replays, NaNs and zeros moving between calls
    f = REPLAYED[name]
    jitted, plain = fg.jit(fg.grad(f)), fg.grad(f)
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "will run uncompiled"
        for k in range(replay.HOT_REPLAYS + 3):
            a = rng.uniform(-0.2, 1.2, (4, 5))
            if name.startswith("nan"):
                a[k % 4, (2 * k) % 5] = np.nan
            if name == "prod" and k % 2:
                a[k % 4, 1] = 0.0
            np.testing.assert_allclose(jitted(a), plain(a), rtol=1e-13, atol=1e-15)
    (info,) = jitted.cache_info().entries
    assert info.replayable


def test_integer_bit_operations_in_a_recording():
    # a recording is lazy at every size: k & 1 was a logical and there (a wrong gradient), and
    # k << 1 raised
    x, k = np.array([1.0, 2.0, 3.0]), np.array([1, 2, 3])
    for f in (lambda x, k: np.sum(x * (k & 1)), lambda x, k: np.sum(x * (k << 1))):
        jitted = fg.jit(fg.grad(f))
        for _ in range(3):
            np.testing.assert_array_equal(jitted(x, k), fg.grad(f)(x, k))


def test_each_number_is_checked_by_a_change_of_its_own():
    import math

    # b is read by C code; a change of a alone must not vouch for b
    g = fg.jit(lambda x, a, b: x * a + math.sqrt(b))
    x = np.ones(2)
    for a, b in ((1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (3.0, 9.0), (5.0, 16.0)):
        np.testing.assert_array_equal(g(x, a, b), x * a + math.sqrt(b))


def _map_kernel(op: str, n: int):
    from fusegrad.lazy.kernel import Instr, Kernel, Output

    f8 = np.dtype("f8")
    x = np.linspace(0.1, 0.9, n)
    return Kernel((n,), (x,), (), (Instr(op, (0,), f8),), (Output(1, None, (), f8),))


def test_a_replay_runs_hot_sized_kernels_where_auto_runs_hot_ones():
    from fusegrad.lazy import engines
    from fusegrad.lazy.engines import numba_engine, numpy_speed, registry

    hot = _map_kernel("square", registry.HOT_MIN)
    want = "numba" if numba_engine.available() else "numpy"
    with fg.use_engine("auto"):
        assert engines.choose_hot(hot, "numpy") == want
        # a scalar libm call per point NumPy makes in SIMD lanes stays on NumPy's ufuncs (arctan,
        # unless this NumPy makes it scalar too); small kernels too
        simd = not numpy_speed.scalar_in_numpy("arctan", np.dtype("f8"))
        arctan = engines.choose_hot(_map_kernel("arctan", registry.HOT_MIN), "numpy")
        assert arctan == ("numpy" if simd else want)
        assert engines.choose_hot(_map_kernel("square", 100), "numpy") == "numpy"
    with fg.use_engine("numpy"):  # a named engine is kept
        assert engines.choose_hot(hot, "numpy") == "numpy"


def test_replayed_small_kernels_take_numpy_blocked_s_planned_path():
    from fusegrad.lazy.engines import numpy_blocked

    calls = []
    real = numpy_blocked.run

    def counting(kernel):
        calls.append(kernel)
        return real(kernel)

    x = np.linspace(0.0, 1.0, 300)
    with fg.use_engine("numpy"):
        f = fg.jit(fg.grad(lambda v, s: np.sum(np.tanh(v * s) ** 2)))
        f(x, 0.5)
        f(x, 0.75)  # a number changed: recorded once more, to check that it is an input
        numpy_blocked.run = counting
        try:
            got = f(x + 1.0, 0.25)
        finally:
            numpy_blocked.run = real
    t = np.tanh((x + 1.0) * 0.25)
    np.testing.assert_allclose(got, 2 * t * (1 - t**2) * 0.25, rtol=1e-12)
    assert f.cache_info().hits == 1
    assert calls == []  # the replay calls the replayer made when the program was recorded


def test_a_recorded_kernel_runs_from_its_template_alone():
    # a recording keeps kernels without their inputs; what the runner plans must come from the
    # signature, not from a plan cached when the kernel first ran
    from fusegrad.lazy.engines import numpy_blocked
    from fusegrad.lazy.kernel import Instr, Kernel, Output

    f8 = np.dtype("f8")
    x, row = np.arange(12.0).reshape(3, 4), np.arange(4.0).reshape(1, 4)
    prog = (Instr("multiply", (0, 1), f8), Instr("add", (2, 1), f8))
    outs = (Output(3, None, (), f8), Output(2, "sum", (0,), f8))
    sig = Kernel((3, 4), (x, row), (), prog, outs).signature()
    template = Kernel((3, 4), (), (), prog, outs, sig)
    numpy_blocked._WHOLE_PLANS.clear()
    with fg.use_engine("auto"):
        run = replay._kernel_runner("numpy", template)
    got = run((x + 1.0, row), ())
    np.testing.assert_allclose(got[0], (x + 1.0) * row + row)
    np.testing.assert_allclose(got[1], ((x + 1.0) * row).sum(0, keepdims=True))


@pytest.mark.slow  # numba's start-up and a compile (several seconds on a loaded machine)
def test_a_replay_runs_a_kernel_recorded_on_numpy_on_numba_once_hot_sized(monkeypatch):
    from fusegrad.lazy.engines import numba_engine, registry

    if not numba_engine.available():
        pytest.skip("numba unavailable")
    ran = []
    real = numba_engine.replayer
    monkeypatch.setattr(numba_engine, "replayer", lambda k: ran.append(k) or real(k))
    n = int(np.sqrt(registry.HOT_MIN)) + 1
    x = np.arange(float(n * n)).reshape(n, n)
    with fg.use_engine("auto"):
        f = fg.jit(fg.grad(lambda w: np.sum(np.sum(w * x, axis=0) ** 2)))
        f(np.ones((n, n)))  # recorded: a new small kernel runs on numpy_blocked
        w = np.full((n, n), 0.5)
        got = f(w)
    col = np.sum(w * x, axis=0)
    np.testing.assert_allclose(got, 2 * col * x, rtol=1e-12)
    assert f.cache_info().hits == 1
    assert ran and all(k.size == n * n for k in ran)


@pytest.mark.slow  # numba's start-up and a compile
def test_a_replayed_kernel_with_comparisons_and_a_boolean_input_goes_to_numba(monkeypatch):
    """logsumexp's guards (``x == -inf``, ``m > 0``) and a boolean mask made an HMM's 6-point
    steps stay on numpy_blocked (~1 us an instruction): booleans are no integer data."""
    from fusegrad.lazy.engines import numba_engine
    from fusegrad.lazy.kernel import Instr, Kernel, Output

    if not numba_engine.available():
        pytest.skip("numba unavailable")
    ran = []
    real = numba_engine.replayer
    monkeypatch.setattr(numba_engine, "replayer", lambda k: ran.append(k) or real(k))
    f8, b1 = np.dtype("f8"), np.dtype("?")
    x, mask = np.array([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0]), np.array([1, 0, 1, 1, 0, 1], bool)
    prog = (
        Instr("greater", (0, 2), b1),  # 3: x > 0.0
        Instr("logical_and", (3, 1), b1),  # 4
        Instr("multiply", (0, 0), f8),  # 5
        Instr("where", (4, 5, 0), f8),  # 6
    )
    outs = (Output(6, None, (), f8), Output(6, "sum", (0,), f8))
    sig = Kernel((6,), (x, mask), (0.0,), prog, outs).signature()
    template = Kernel((6,), (), (0.0,), prog, outs, sig)
    with fg.use_engine("auto"):
        run = replay._kernel_runner("numpy", template, replayed=True)
    got = run((x + 1.0, mask), (0.0,))
    want = np.where((x + 1.0 > 0) & mask, (x + 1.0) ** 2, x + 1.0)
    np.testing.assert_allclose(got[0], want, rtol=1e-15)
    np.testing.assert_allclose(got[1], [want.sum()], rtol=1e-15)
    assert ran


def test_structured_dtypes_of_one_size_are_two_signatures():
    # dtype.str names both '|V16': the signature holds the dtypes themselves
    a = np.zeros(3, dtype=[("x", "f8"), ("y", "f8")])
    b = np.zeros(3, dtype=[("y", "f8"), ("x", "f8")])
    a["x"], b["x"], b["y"] = 1.0, 2.0, 7.0
    f = fg.jit(lambda s: np.sin(s["x"]) * 2.0)
    for s in (a, b, a, b):
        np.testing.assert_allclose(f(s), 2.0 * np.sin(s["x"]), rtol=1e-15)
    assert len(f.cache_info()) == 2


# --------------------------------------------------------------------------- state held unseen


def test_a_random_generator_argument_runs_uncompiled_with_new_draws():
    """Keyed by identity, its draws were the recording's at every replay: a stale mask."""

    def loss(w, x, rng):
        keep = rng.random(x.shape) > 0.5
        return np.sum(np.where(keep, np.tanh(x * w), 0.0))

    x, w = np.linspace(-1, 1, 8), np.full(8, 0.5)
    step = fg.jit(fg.grad(loss))
    r_jit, r_eager = np.random.default_rng(0), np.random.default_rng(0)
    with pytest.warns(UserWarning, match="random.Generator argument.*pass the arrays in"):
        for _ in range(3):
            np.testing.assert_array_equal(step(w, x, r_jit), fg.grad(loss)(w, x, r_eager))


def test_an_object_argument_runs_uncompiled_and_sees_its_attributes_change():
    class Model:
        def __init__(self, w):
            self.w = w

    def loss(x, model):
        return np.sum(np.tanh(x * model.w))

    x, model = np.linspace(-1, 1, 3), Model(np.ones(3))
    g = fg.jit(fg.grad(loss))
    with pytest.warns(UserWarning, match="Model object argument.*dataclass"):
        for k in range(3):
            model.w = np.full(3, 0.5 + k)
            np.testing.assert_allclose(g(x, model), fg.grad(loss)(x, model))
    assert fg.jit(lambda x, f: np.sum(f(x)))(x, np.tanh) == np.sum(np.tanh(x))  # compiled in


def test_a_number_argument_read_down_a_long_loop_verifies_without_recursion():
    """Its recipe nests one level per step: comparing two recordings recursed 2 frames a level
    (RecursionError from 200 steps)."""

    def f(x, a):
        e = 0.0
        for t in range(400):
            e = a * e + np.sum(np.sin(x + t))
        return e

    x = np.linspace(0, 1, 4)
    g = fg.jit(fg.grad(f))
    g(x, 0.5)
    np.testing.assert_allclose(g(x, 0.6), fg.grad(f)(x, 0.6), rtol=1e-12)


def test_deepcopy_and_pickle_of_a_traced_value():
    """deepcopy copied the tracer's tape node: the copy fell out of the trace (zero gradient);
    under a jit recording it copied a lazy leaf's array (a stale constant)."""
    import copy
    import pickle

    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(copy.deepcopy(x) * x))(x), 2 * x)
    p = {"w": x, "b": np.array([3.0, 4.0])}
    g = fg.grad(lambda p: np.sum(copy.deepcopy(p)["w"] ** 2 * p["b"]))(p)
    np.testing.assert_array_equal(g["w"], [6.0, 16.0])
    np.testing.assert_array_equal(g["b"], [1.0, 4.0])
    jf = fg.jit(lambda x: np.sum(copy.deepcopy(x) * x))
    jf(x)
    assert jf(np.array([3.0, -1.0])) == 10.0
    with pytest.raises(TypeError, match="cannot be pickled"):
        fg.grad(lambda x: np.sum(pickle.loads(pickle.dumps(x))))(x)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sum(x) + len(f"{x[0]:.2f}"),
        lambda x: np.sum(x) * round(x[0], 1),
        lambda x: np.sum(x) * round(x[2]),
        lambda x: np.sum(x) * math.trunc(x[2]),
    ],
    ids=["format spec", "round(x, 1)", "round(x)", "math.trunc"],
)
def test_python_protocols_on_a_lazy_element_replay_or_fall_back(f):
    """They raised TypeErrors naming fusegrad's Leaf; now they read the value (the function
    runs uncompiled, with a warning) or stay lazy (round(x, n), an array as NumPy's)."""
    x = np.array([0.3, -1.2, 2.6, 0.7])
    jf = fg.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            x = x * (1 + k)
            np.testing.assert_allclose(jf(x), f(x))


def test_recording_a_long_loop_costs_linear_time():
    """Locating arrays among the recorded slots and merging kernels tried every earlier slot and
    kernel group: recording a 1000-step RNN took 27 s where a plain grad took 0.3. Counted in
    calls (load-independent): 4x the steps cost 2.8x the calls (5.7x before)."""
    import cProfile
    import pstats

    def calls(steps):
        rng = np.random.default_rng(0)
        wx, wh = rng.normal(size=(4, 8)) * 0.4, rng.normal(size=(8, 8)) * 0.3
        xs = rng.normal(size=(steps, 3, 4))

        def rnn(wx, wh, xs):
            h = np.zeros((3, 8))
            for t in range(xs.shape[0]):
                h = np.tanh(xs[t] @ wx + h @ wh)
            return np.sum(h**2)

        g = fg.jit(fg.grad(rnn, argnums=(0, 1)))
        prof = cProfile.Profile()
        prof.runcall(g, wx, wh, xs)
        return pstats.Stats(prof).total_calls

    assert calls(400) < 4 * calls(100)


def test_jacobian_and_hessian_replay():
    """jacobian stacked its rows with NumPy outside the recorded kernels: the jitted jacobian and
    hessian ran uncompiled (with a warning) at every call."""

    def f(x):
        return np.tanh(x) * np.sum(x**2)

    def g(x):
        return np.sum(np.tanh(x) ** 3) * np.sum(x**2)

    jf, hg = fg.jit(fg.jacobian(f)), fg.jit(fg.hessian(g))
    x = np.linspace(0.1, 1, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            np.testing.assert_allclose(jf(x), fg.jacobian(f)(x), rtol=1e-13)
            np.testing.assert_allclose(hg(x), fg.hessian(g)(x), rtol=1e-13)
            x *= 1.2
    assert jf.cache_info().entries[0].replayable and hg.cache_info().entries[0].replayable


def test_a_gather_pullback_inside_an_outer_derivative_is_not_a_step_holding_a_tracer():
    """A jitted hessian (or grad of grad) of a gather by a computed index recorded the gather's
    pullback as a step whose operand was the outer trace's tracer: every replay raised."""

    def f(x):
        return np.sum(x**2 * x[np.argmax(x)])

    x = np.array([0.7, -1.3, 2.1])
    h, gg = fg.jit(fg.hessian(f)), fg.jit(fg.grad(lambda x: np.sum(fg.grad(f)(x))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the index is read: they may run uncompiled)
        for _ in range(3):
            np.testing.assert_allclose(h(x), fg.hessian(f)(x), rtol=1e-13)
            np.testing.assert_allclose(gg(x), fg.grad(lambda x: np.sum(fg.grad(f)(x)))(x))
            x = x * 1.1


def test_a_training_step_calling_grad_inside_jit_replays():
    # the JAX idiom, @jit def step(w): return w - lr * grad(loss)(w): the transformation's
    # results stay unevaluated inside the recording, so the update is recorded with them (it
    # ran uncompiled, every call, with a reason naming a Python read the code never made)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(64, 5)), rng.normal(size=64)

    def loss(p):
        return np.mean((np.tanh(X @ p["w"] + p["b"]) - y) ** 2) + 0.01 * np.sum(p["w"] ** 2)

    def step(p):
        value, g = fg.value_and_grad(loss)(p)
        return {k: p[k] - 0.1 * g[k] for k in p}, value

    def plain_step(w):
        return w - 0.1 * fg.grad(lambda w: loss({"w": w, "b": np.zeros(())}))(w)

    jstep, jplain = fg.jit(step), fg.jit(plain_step)
    p, q = {"w": np.zeros(5), "b": np.zeros(())}, {"w": np.zeros(5), "b": np.zeros(())}
    w = v = np.zeros(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(replay.HOT_REPLAYS + 4):  # through the hot recompile
            (p, value), (q, want) = jstep(p), step(q)
            w, v = jplain(w), plain_step(v)
            for k in p:
                np.testing.assert_allclose(p[k], q[k], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(value, want, rtol=1e-12)
            np.testing.assert_allclose(w, v, rtol=1e-12, atol=1e-15)
    assert jstep.cache_info().entries[0].replayable and jplain.cache_info().entries[0].replayable
    assert isinstance(p["w"], np.ndarray) and isinstance(w, np.ndarray)


def _tanh_loss(seed: int, n: int) -> tuple:
    """A generator and ``w -> sum(tanh(X @ w) ** 2)`` for a random 20×n ``X``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(20, n))
    return rng, lambda w: np.sum(np.tanh(X @ w) ** 2)


def test_a_step_reading_its_gradient_in_python_is_not_replayed():
    rng, loss = _tanh_loss(1, 3)

    def step(w):
        g = fg.grad(loss)(w)
        return w - (0.1 if float(g[0]) > 0 else 0.2) * g  # a branch on a value

    jstep, w = fg.jit(step), rng.normal(size=3)
    with pytest.warns(UserWarning, match="will run uncompiled"):
        got = jstep(w)
    np.testing.assert_allclose(got, step(w), rtol=1e-13)
    assert not jstep.cache_info().entries[0].replayable


@pytest.mark.parametrize(
    "name", ["vjp", "vjp value", "jacobian", "hessian", "elementwise_grad", "grad", "jvp"]
)
def test_a_transformation_inside_a_jitted_function_is_replayed_right_or_not_at_all(name):
    # vjp, jacobian, hessian and elementwise_grad called inside a jitted function gave arrays
    # its own NumPy code then read eagerly: the recording kept their first values as constants,
    # and every replay returned the first call's update (11 of 12 calls wrong, no warning)
    rng = np.random.default_rng(3)
    X, v = rng.normal(size=(20, 3)), np.ones(3)

    def loss(w):
        return np.sum(np.tanh(X @ w) ** 2)

    step = {
        "vjp": lambda w: w - 0.1 * fg.vjp(loss, w)[1](1.0)[0],
        "vjp value": lambda w: w * fg.vjp(loss, w)[0],
        "jacobian": lambda w: w - 0.1 * np.sum(fg.jacobian(lambda w: np.tanh(X @ w))(w), axis=0),
        "hessian": lambda w: w - 0.1 * fg.hessian(loss)(w) @ v,
        "elementwise_grad": lambda w: w - 0.1 * fg.elementwise_grad(np.tanh)(w),
        "grad": lambda w: w - 0.1 * fg.grad(loss)(w),
        "jvp": lambda w: w - 0.1 * fg.jvp(loss, (w,), (v,))[1],
    }[name]
    jstep, w = fg.jit(step), rng.normal(size=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (jvp's runs uncompiled, and says so)
        for k in range(replay.HOT_REPLAYS + 4):
            np.testing.assert_allclose(jstep(w + 0.1 * k), step(w + 0.1 * k), rtol=1e-12)


@pytest.mark.parametrize("name", ["jacobian", "hessian", "elementwise_grad", "vjp pullback"])
def test_a_transformation_inside_a_jitted_function_reads_its_closure_at_each_call(name):
    # vjp's snapshot of the arrays fun closes over (its copies) became constants of the
    # recording: after X *= 1.1 between calls, the jitted step replayed X's first contents
    rng = np.random.default_rng(5)
    X, C, y = rng.normal(size=(6, 3)), rng.normal(size=3), rng.normal(size=6)
    step = {
        "jacobian": lambda w: fg.jacobian(lambda u: X @ u)(w),
        "hessian": lambda w: fg.hessian(lambda u: np.sum(u * C * u))(w),
        "elementwise_grad": lambda w: fg.elementwise_grad(lambda u: C * u)(w),
        "vjp pullback": lambda w: fg.vjp(lambda u: X @ u, w)[1](y)[0],
    }[name]
    jstep = fg.jit(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(replay.HOT_REPLAYS + 3):
            w = np.arange(3) * 0.1 + 0.05 * k
            np.testing.assert_allclose(jstep(w), step(w), rtol=1e-12)
            X *= 1.1
            C += 0.5
            y -= 0.1


def test_a_jitted_function_writing_into_an_array_runs_as_numpy_code():
    # lazy values are immutable: g[0] = 0 raised TypeError inside a jitted step, and w -= g on
    # an argument rebound w in the recording (the caller's array never changed, silently)
    rng, loss = _tanh_loss(2, 4)

    def masked(w):
        g = fg.grad(loss)(w)
        g[0] = 0.0
        return w - 0.1 * g

    def in_place(w):
        w -= 0.1 * fg.grad(loss)(w)

    w = rng.normal(size=4)
    with pytest.warns(UserWarning, match="writes into an array in place"):
        got = fg.jit(masked)(w)
    np.testing.assert_allclose(got, masked(w), rtol=1e-13)
    a, b = w.copy(), w.copy()
    jit_in_place = fg.jit(in_place)
    with pytest.warns(UserWarning, match="in-place sub"):
        jit_in_place(a)
    for _ in range(3):
        jit_in_place(a)  # (uncompiled from the first call on, as NumPy code)
    for _ in range(4):
        in_place(b)
    np.testing.assert_allclose(a, b, rtol=1e-13)

"""Results equal eager NumPy at the time of the call, whatever was written into arrays before it
(issue 14, items 2 and 3): in-place optimizer loops, live lazy values over mutated arrays,
``vjp`` pullbacks called after a mutation, and lazy values that refuse to be written into."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import small

N = 300


def loss(w):
    return np.sum(np.exp(0.5 * w) * w)


def loss_grad(w):  # by hand: d/dw exp(w/2) w = exp(w/2) (1 + w/2)
    return np.exp(0.5 * w) * (1 + 0.5 * w)


def _updates():
    """In-place updates an optimizer loop makes, as functions (w, step) -> None."""
    return {
        "isub": lambda w, d: w.__isub__(d),
        "slice": lambda w, d: w.__setitem__(slice(None), w - d),
        "out": lambda w, d: np.subtract(w, d, out=w),
    }


def test_vjp_loop_with_in_place_steps(engine):
    # issue 14 item 2, as reported: the first step's values came back from the second on
    x = np.array([1.0, 2.0])
    for i in range(3):
        y, f_vjp = fg.vjp(np.exp, x)
        (g,) = f_vjp(np.ones(2))
        np.testing.assert_allclose(y, np.exp(x), err_msg=f"step {i}")
        np.testing.assert_allclose(g, np.exp(x), err_msg=f"step {i}")
        x -= 0.1 * g


def test_live_lazy_value_then_mutation_then_grad(engine, small_path):
    x = np.linspace(0.0, 1.0, 2 * small.EAGER_BELOW)  # above the small-array threshold
    z = np.exp(fl.asarray(x)) * 2
    np.asarray(z)  # computed and kept
    x *= 2
    g = fg.grad(lambda v: np.sum(np.exp(v) * 2))(x)
    np.testing.assert_allclose(g, 2 * np.exp(x))


def test_live_lazy_value_then_mutation_small_path_off(engine):
    x = np.linspace(0.0, 1.0, 50)
    z = np.exp(fl.asarray(x)) * 2
    np.asarray(z)
    x *= 2
    val, g = fg.value_and_grad(lambda v: np.sum(np.exp(v) * 2))(x)
    np.testing.assert_allclose(val, np.sum(2 * np.exp(x)))
    np.testing.assert_allclose(g, 2 * np.exp(x))


@pytest.mark.parametrize("update", sorted(_updates()))
@pytest.mark.parametrize("api", ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "jit"])
def test_optimizer_loop_in_place(engine, api, update):
    step = _updates()[update]
    w = np.linspace(-1.0, 1.0, N)
    jitted = fg.jit(fg.grad(loss))
    for i in range(4):
        want = loss_grad(w)
        if api == "grad":
            g = fg.grad(loss)(w)
        elif api == "value_and_grad":
            v, g = fg.value_and_grad(loss)(w)
            np.testing.assert_allclose(v, np.sum(np.exp(0.5 * w) * w), err_msg=f"step {i}")
        elif api == "vjp":
            v, f_vjp = fg.vjp(loss, w)
            (g,) = f_vjp(1.0)
        elif api == "jvp":
            v, t = fg.jvp(lambda a: np.exp(0.5 * a) * a, (w,), (np.ones(N),))
            np.testing.assert_allclose(v, np.exp(0.5 * w) * w, err_msg=f"step {i}")
            g = t
        elif api == "jacobian":
            g = np.diag(fg.jacobian(lambda a: np.exp(0.5 * a) * a)(w[:20]))
            want = want[:20]
        else:
            g = jitted(w)
        np.testing.assert_allclose(g, want, rtol=1e-12, err_msg=f"{api} step {i}")
        step(w, 0.1 * loss_grad(w))


def test_vjp_pullback_reads_call_time_inputs_closures_and_output(engine):
    x = np.linspace(0.0, 1.0, N)
    w = np.linspace(1.0, 2.0, N)
    y, f_vjp = fg.vjp(lambda a: np.exp(a) * w, x)
    want_y, want_g = np.exp(x) * w, np.exp(x) * w
    x += 1.0  # the primal,
    w[:] = 7.0  # a closure array
    y[:] = -1.0  # and the returned output, written into before the pullback runs
    (g,) = f_vjp(np.ones(N))
    np.testing.assert_allclose(g, want_g)
    np.testing.assert_allclose(fg.vjp(lambda a: np.exp(a) * w, x)[0], np.exp(x) * 7.0)
    np.testing.assert_allclose(want_y, np.exp(x - 1.0) * np.linspace(1.0, 2.0, N))


def test_vjp_pullback_of_a_matmul_reads_copies(engine):
    # a rule that needs arrays (matmul) keeps the arrays themselves in its pullback
    a = np.arange(12.0).reshape(3, 4) / 10
    b = np.linspace(0, 1, 8).reshape(4, 2)
    y, f_vjp = fg.vjp(lambda p: np.sum(np.tanh(p @ b)), a)
    ct = 1.0
    want = (1 - np.tanh(a @ b) ** 2) @ b.T
    a[:] = 0.0
    b[:] = 3.0
    (g,) = f_vjp(ct)
    np.testing.assert_allclose(g, want)


def test_jit_with_arguments_updated_in_place(engine):
    f = fg.jit(fg.value_and_grad(loss))
    w = np.linspace(-1.0, 1.0, N)
    for i in range(5):
        v, g = f(w)
        np.testing.assert_allclose(g, loss_grad(w), rtol=1e-12, err_msg=f"step {i}")
        np.testing.assert_allclose(v, np.sum(np.exp(0.5 * w) * w), err_msg=f"step {i}")
        w[:] = w - 0.1 * g


def test_closure_array_updated_in_place_between_grads(engine):
    c = np.linspace(0.0, 1.0, N)
    f = fg.grad(lambda w: np.sum(np.sin(w * c)))
    w = np.ones(N)
    for _ in range(3):
        np.testing.assert_allclose(f(w), np.cos(w * c) * c)
        c *= 1.5


def test_fl_asarray_gives_fresh_values_after_mutation(engine):
    a = np.ones(N)
    z = fl.asarray(a) * 3
    np.testing.assert_allclose(np.asarray(z), 3.0)
    a[:] = 2.0
    np.testing.assert_allclose(np.asarray(fl.asarray(a) * 3), 6.0)
    x = fl.asarray(a)
    assert x[:, None] is x[:, None]  # movement keeps sharing within one asarray


# Item 3: lazy values are immutable.


def test_out_naming_a_lazy_value_raises_and_writes_nothing(engine):
    arr = np.ones(N)
    z = fl.asarray(arr) + 1
    with pytest.raises(TypeError, match="lazy values are immutable.*np.add.*out="):
        np.add(z, 1, out=z)
    with pytest.raises(TypeError, match="immutable"):
        np.add(fl.asarray(arr), 1, out=fl.asarray(arr))
    with pytest.raises(TypeError, match=r"np\.sum\(\.\.\., out="):
        np.sum(z, axis=0, out=z)
    np.testing.assert_array_equal(arr, 1.0)
    np.testing.assert_array_equal(np.asarray(fl.asarray(arr) + 1), 2.0)
    val, g = fg.value_and_grad(lambda x: np.sum(x + 1))(arr)
    assert val == 2.0 * N
    np.testing.assert_array_equal(g, 1.0)


def test_ufunc_at_and_in_place_functions_on_lazy_values_raise(engine):
    arr = np.zeros(N)
    z = fl.asarray(arr) * 2
    with pytest.raises(TypeError, match=r"np\.add\.at.*scatter_add"):
        np.add.at(z, [0, 0], 1.0)
    with pytest.raises(TypeError, match="immutable"):
        np.add.at(fl.asarray(arr), [1], 1.0)
    for fn in (lambda: np.copyto(z, 1.0), lambda: np.put(z, [0], 1.0)):
        with pytest.raises(TypeError, match="immutable"):
            fn()
    np.testing.assert_array_equal(arr, 0.0)
    np.testing.assert_array_equal(np.asarray(z), 0.0)


def test_scatter_add_is_the_suggested_alternative(engine):
    from fusegrad.rules.indexing import scatter_add

    z = fl.asarray(np.zeros(5)) + 1
    got = np.asarray(z + scatter_add(np.ones(3), np.array([0, 0, 4]), (5,)))
    np.testing.assert_array_equal(got, [3.0, 1.0, 1.0, 1.0, 2.0])


def test_out_ndarray_receives_the_result_and_aliases_no_cache(engine):
    arr = np.linspace(0, 1, N)
    z = np.exp(fl.asarray(arr))
    out = np.empty(N)
    r = np.multiply(z, 2.0, out=out)
    assert r is out
    np.testing.assert_allclose(out, 2 * np.exp(arr))
    out[:] = 0.0
    np.testing.assert_allclose(np.asarray(z), np.exp(arr))
    acc = np.zeros(N)
    acc += z  # ndarray.__iadd__ with a lazy operand: NumPy semantics
    np.testing.assert_allclose(acc, np.exp(arr))


def test_asarray_of_a_lazy_value_is_read_only(engine):
    z = np.exp(fl.asarray(np.zeros(N)))
    v = np.asarray(z)
    assert not v.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        v += 1
    c = np.array(z)
    c += 1
    np.testing.assert_array_equal(np.asarray(z), 1.0)
    assert np.asarray(fl.asarray(c)) is c  # a leaf gives the caller's own array back


@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["isub", "slice", "out", "imul", "lazy", "scale_closure"]),
            st.sampled_from(["grad", "value_and_grad", "vjp", "jvp", "jit"]),
            st.floats(0.1, 0.9),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_property_mutation_between_calls(ops):
    """Any sequence of in-place writes (into the argument, a closure array, or under a live lazy
    value) between API calls: every call equals eager NumPy at that moment."""
    w = np.linspace(-1.0, 1.0, 40)
    c = np.linspace(0.5, 1.5, 40)
    live = []

    def f(v):
        return np.sum(np.sin(v * c) * v)

    def want_grad(v):
        return np.cos(v * c) * c * v + np.sin(v * c)

    jitted = fg.jit(fg.grad(lambda v, cc: np.sum(np.sin(v * cc) * v)))  # c as an argument
    for kind, api, t in ops:
        if kind == "isub":
            w -= t
        elif kind == "slice":
            w[:] = w * t
        elif kind == "out":
            np.add(w, t, out=w)
        elif kind == "imul":
            w *= 1 + t
        elif kind == "lazy":
            live.append(np.sin(fl.asarray(w) * c) * w)
            np.asarray(live[-1])
            w += t
        else:
            c *= 1 + t
        if api == "grad":
            g = fg.grad(f)(w)
        elif api == "value_and_grad":
            v, g = fg.value_and_grad(f)(w)
            np.testing.assert_allclose(v, np.sum(np.sin(w * c) * w), rtol=1e-12)
        elif api == "vjp":
            v, f_vjp = fg.vjp(f, w)
            want = want_grad(w)
            w += 1.0  # written into between vjp and its pullback
            (g,) = f_vjp(1.0)
            np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
            continue
        elif api == "jvp":
            _, g = fg.jvp(lambda v, c=c: np.sin(v * c) * v, (w,), (np.ones_like(w),))
        else:
            g = jitted(w, c)
        np.testing.assert_allclose(g, want_grad(w), rtol=1e-12, atol=1e-14)

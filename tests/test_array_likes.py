"""Python lists and tuples of traced values and numbers as NumPy operands (``x + [x[1], 3.0]``,
``np.where(c, [x[1], 0.0], x)``, ``np.concatenate([[x[1], 3.0], x])``): NumPy converts them to
arrays, and so do all of fusegrad's modes. The forward mode made their tangents object arrays
mixing arrays and zeros (wrong jvps, silently); hessians crashed."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.testing import check_grads

X = np.array([0.7, -1.3, 2.1])
V = np.array([0.5, 0.25, 0.125])

CASES = {
    "x + list": lambda x: np.sum(x + [x[1], 3.0, x[0]]),
    "exp(x + list)": lambda x: np.sum(np.exp(x + [x[1], 3.0, x[0]])),
    "x * tuple": lambda x: np.sum(x * (x[1], 2.0, x[0])),
    "list * x": lambda x: np.sum([x[0], 1.0, 2.0] * x),
    "maximum": lambda x: np.sum(np.maximum(x, [x[1], 0.0, x[0]])),
    "clip": lambda x: np.sum(np.clip(x, [x[1], 0.0, 0.0], 5.0)),
    "power": lambda x: np.sum((np.abs(x) + 1) ** [x[0], 1, 2]),
    "nested": lambda x: np.sum((x - [[x[0]], [1.0]]) ** 2),
    "arctan2": lambda x: np.sum(np.arctan2(x, [x[0], 1.0, 2.0])),
    "where": lambda x: np.sum(np.where(x > 0, [x[1], 0.0, x[0]], x) ** 2),
    "where ints": lambda x: np.sum(np.where(x > 0, [x[1], 1, x[0]], x) ** 2),
    "concatenate": lambda x: np.sum(np.concatenate([[x[1], 3.0], x]) ** 3),
    "stack": lambda x: np.sum(np.stack([[x[1], 3.0, x[2]], x]) ** 3),
    "hstack": lambda x: np.sum(np.hstack([[x[1]], x]) ** 3),
}


@pytest.mark.parametrize("f", CASES.values(), ids=CASES.keys())
def test_list_operands_in_every_mode(f):
    g = fg.grad(f)(X)
    _, t = fg.jvp(f, (X,), (V,))
    np.testing.assert_allclose(t, g @ V, rtol=1e-13)
    check_grads(f, modes=("rev", "fwd"), order=2)(X)
    h = fg.hessian(f)(X)
    np.testing.assert_allclose(h @ V, fg.jvp(fg.grad(f), (X,), (V,))[1], rtol=1e-12, atol=1e-13)


def test_sequence_arguments_stay_sequences():
    """A list of arrays of other shapes is a sequence where the function takes one."""
    m = np.arange(1.0, 5.0).reshape(2, 2)

    def f(x):
        a = np.outer(x[:2], x[:2]) + m
        return np.sum(np.linalg.multi_dot([a, m, a[:, :1]])) + np.sum(
            np.select([x > 0, x <= 0], [x**2, [x[0], 1.0, 2.0]])
        )

    check_grads(f, modes=("rev", "fwd"))(X)


def test_a_numpy_function_that_converts_its_inputs_is_named():
    with pytest.raises(TypeError, match="inside NumPy's vectorize.*array operations"):
        fg.grad(lambda x: np.sum(np.vectorize(lambda t: t**2)(x)))(X)
    with pytest.raises(TypeError, match=r"acc = acc \+ x"):

        def f(x):
            acc = np.zeros(3)
            acc += x
            return np.sum(acc)

        fg.grad(f)(X)


def test_r_and_c_with_traced_items():
    """NumPy's index tricks convert each item with ``array``, which a traced value refuses."""
    check_grads(lambda x: np.sum(np.r_[x, 0.0, x**2, [x[0], 2.0]] ** 2), modes=("rev", "fwd"))(X)
    check_grads(lambda x: np.sum(np.c_[x, x**2, np.ones(3)] @ np.arange(1.0, 4.0)))(X)
    np.testing.assert_array_equal(fg.jvp(lambda x: np.r_[x[0], x], (X,), (X,))[0], np.r_[X[0], X])
    assert np.r_[1, 2].tolist() == [1, 2]  # outside traces, and without traced items: NumPy's
    with pytest.raises(TypeError, match="np.concatenate"):
        fg.grad(lambda x: np.sum(np.r_["0,2", x, x]))(X)


@pytest.mark.parametrize("ufunc", [np.logaddexp, np.logaddexp2])
@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, True), (None, False)])
def test_logaddexp_reduce(ufunc, axis, keepdims):
    m = np.array([[0.3, 1.2, -0.5], [2.0, 2.0, 1.0]])

    def f(m):
        return np.sum(ufunc.reduce(m, axis=axis, keepdims=keepdims) ** 2)

    assert fg.value_and_grad(f)(m)[0] == pytest.approx(f(m), rel=1e-14)
    check_grads(f, modes=("rev", "fwd"), order=2)(m)
    g = fg.grad(lambda v: np.logaddexp.reduce(v))(np.array([-np.inf, 0.0, 0.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5])


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum])
def test_ufunc_reduceat(ufunc):
    """Segments (an index not below the next one: the element itself), along any axis."""
    a = np.arange(1.0, 9.0) + np.linspace(0.0, 0.1, 8)
    m = a[:6].reshape(2, 3)

    def f(a):
        return np.sum(ufunc.reduceat(a, [0, 4, 1, 5, 5]) ** 2)

    def g(m):
        return np.sum(ufunc.reduceat(m, [0, 2], axis=1) ** 2)

    assert fg.value_and_grad(f)(a)[0] == pytest.approx(f(a), rel=1e-14)
    assert fg.value_and_grad(g)(m)[0] == pytest.approx(g(m), rel=1e-14)
    check_grads(f, modes=("rev", "fwd"))(a)
    check_grads(g, modes=("rev", "fwd"))(m)
    with pytest.raises(IndexError, match="out of bounds"):
        fg.grad(lambda a: np.sum(ufunc.reduceat(a, [0, 9])))(a)

"""ndarray methods on traced and lazy arrays do what NumPy's do: the same values, their
gradients, the same under ``jit``; the ones that write into the array raise, naming what to
write instead (a traced ``y.sort()`` returned a sorted copy and left ``y`` as it was: a silent
wrong answer)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.testing import check_grads

A = np.random.default_rng(0).normal(size=(3, 4))
T = np.random.default_rng(1).normal(size=(2, 3, 4))
WEIGHTS = np.arange(1.0, 13.0)

# the method form of each call, as a user writes it; every result summed against weights so
# that each element's gradient differs
METHODS = {
    "trace": (lambda a: a.trace(), A),  # (the tracer's own trace object shadowed it)
    "trace offset": (lambda a: a.trace(offset=1) * 2.0, A),
    "transpose ints": (lambda a: np.sum(a.transpose(2, 0, 1)[0] * WEIGHTS[:3]), T),
    "transpose tuple": (lambda a: np.sum(a.transpose((1, 2, 0))[0] * WEIGHTS[:2]), T),
    "transpose none": (lambda a: np.sum(a.transpose()[0] * WEIGHTS[:2]), T),
    "flatten F": (lambda a: np.sum(a.flatten("F") * WEIGHTS), A),
    "flatten order=": (lambda a: np.sum(a.flatten(order="C") * WEIGHTS), A),
    "round": (lambda a: np.sum(a.round(1) * a), A),
    "compress": (lambda a: np.sum(a.compress([True, False, True], axis=0) * WEIGHTS[:4]), A),
    "take": (lambda a: np.sum(a.take([0, 2], axis=1) ** 2), A),
    "diagonal": (lambda a: np.sum(a.diagonal() * WEIGHTS[:3]), A),
    "repeat": (lambda a: np.sum(a.repeat(2, axis=0) ** 3), A),
    "view": (lambda a: np.sum(a.view() ** 2), A),
    "flat": (lambda a: np.sum(a.flat[[1, 5]] ** 2), A),
    "cumsum": (lambda a: np.sum(a.cumsum(axis=1) * WEIGHTS[:4]), A),
    "dot": (lambda a: np.sum(a.dot(a.T) * WEIGHTS[:3]), A),
    "argmax": (lambda a: np.sum(a[0] * a[1].argmax()), A),
    "nbytes itemsize": (lambda a: np.sum(a) * (a.nbytes + a.itemsize), A),
    "searchsorted": (lambda a: np.sum(a[0] * np.sort(a[1]).searchsorted(0.1)), A),
    "argpartition": (lambda a: np.sum(a[0] * a[1].argpartition(1)), A),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_methods_give_numpy_values_and_gradients(name):
    f, x = METHODS[name]
    check_grads(f)(x)
    np.testing.assert_allclose(fl.materialize(f(fl.asarray(x))), f(x), rtol=1e-14)
    plain, jitted, value = fg.grad(f), fg.jit(fg.grad(f)), fg.jit(f)
    for k in range(3):
        xk = x + 0.1 * k
        np.testing.assert_allclose(jitted(xk), plain(xk), rtol=1e-14)
        np.testing.assert_allclose(value(xk), f(xk), rtol=1e-14)


@pytest.mark.parametrize("name", ["sort", "partition", "fill", "put", "resize", "itemset"])
def test_methods_that_write_in_place_raise_and_say_what_to_write(name):
    args = {"sort": (), "partition": (1,), "fill": (0.0,), "put": ([0], [1.0])}
    args |= {"resize": ((2, 6),), "itemset": (0, 1.0)}

    def f(x):
        y = x * 1.0
        getattr(y, name)(*args[name])
        return np.sum(y * WEIGHTS.reshape(3, 4))

    with pytest.raises(TypeError, match=rf"x\.{name}\(\) changes x in place.* instead"):
        fg.grad(f)(A)
    with pytest.raises(TypeError, match=rf"x\.{name}\(\) changes x in place.* instead"):
        f(fl.asarray(A))


def test_a_sorted_copy_the_way_numpy_code_writes_it():
    # what the error message says to write instead, against NumPy's in-place sort
    def numpy_way(x):
        y = x.copy()
        y.sort()
        return np.sum(y * WEIGHTS[:4])

    def traced_way(x):
        y = np.sort(x)
        return np.sum(y * WEIGHTS[:4])

    x = A[0]
    assert traced_way(x) == numpy_way(x)
    np.testing.assert_array_equal(fg.grad(traced_way)(x), WEIGHTS[np.argsort(np.argsort(x))])


@pytest.mark.parametrize("exponent", [np.float64(2.0), np.float64(0.5), np.float64(1.0), 2.0, 2])
@pytest.mark.parametrize("path", ["eager", "lazy"])
def test_power_by_a_numpy_float64_promotes_float32_as_numpy(exponent, path, monkeypatch):
    """``x ** 2.0`` of float32 stays float32 (a Python number is weak), ``x ** np.float64(2.0)``
    is float64 (NumPy 2): the fast path for 2, 0.5 and 1 took the NumPy scalar for a Python one
    (np.float64 subclasses float)."""
    from fusegrad.lazy import small

    if path == "lazy":
        monkeypatch.setattr(small, "EAGER_BELOW", 0)
    else:
        monkeypatch.setattr(small, "EAGER_BELOW", 1 << 17)
    x = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    want = (x**exponent).dtype
    assert fg.jvp(lambda x: x**exponent, (x,), (x,))[0].dtype == want
    assert fg.jit(lambda x: x**exponent)(x).dtype == want
    g = fg.grad(lambda x: np.sum((x**exponent).astype(np.float64)))(x)
    np.testing.assert_allclose(g, float(exponent) * x.astype(np.float64) ** (float(exponent) - 1))


def test_a_differentiated_python_float_stays_weak_through_python_operators():
    """``x / (2 * s**2)`` of float32 ``x`` and a differentiated Python float ``s`` is float32, as
    NumPy's (Python's ``s**2`` is a float) and JAX's: the operators gave a NumPy float64."""
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    for f in (
        lambda x, s: np.sum(x / (2 * s**2)),
        lambda x, s: np.sum(x * (s - 1.0) ** 3),
        lambda x, s: np.sum(x * -s / (1 + s)),
    ):
        v, (gx, gs) = fg.value_and_grad(f, argnums=(0, 1))(x, 0.7)
        assert np.asarray(v).dtype == f(x, 0.7).dtype == np.float32
        assert gx.dtype == np.float32
        want = (f(x, 0.7 + 1e-3) - f(x, 0.7 - 1e-3)) / 2e-3
        assert gs == pytest.approx(float(want), rel=1e-3, abs=1e-3)
    # np.* functions of a Python float are NumPy float64 as in NumPy: not weak
    assert fg.jvp(lambda s: x * np.exp(s), (0.7,), (1.0,))[0].dtype == (x * np.exp(0.7)).dtype

"""np.asarray / np.array of traced values inside traces (fusegrad.ad.conversions)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ad import conversions


def fd_grad(f, x, eps=1e-6):
    x = np.asarray(x, float)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_a_list_of_numbers_converted_with_asarray():
    f = lambda x: np.sum(np.asarray(x) ** 3)  # noqa: E731
    g = fg.grad(f)([1.0, 2.0, -0.5])
    assert isinstance(g, list)  # a list is a pytree, as in JAX and autograd
    np.testing.assert_allclose(g, 3 * np.array([1.0, 2.0, -0.5]) ** 2)


@pytest.mark.parametrize("name", ["asarray", "array", "asanyarray", "ascontiguousarray"])
def test_each_conversion_keeps_the_trace(name):
    def f(x):
        return np.sum(np.sin(getattr(np, name)(x)) * x)  # looked up at call time, as np.asarray

    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(fg.grad(f)(x), fd_grad(f, x), rtol=1e-6)


def test_array_of_a_list_holding_traced_values():
    def f(x):
        return np.sum(np.array([[x[0], 2.0], [x[1] * x[0], x[1]]]) ** 2)

    x = np.array([1.5, -0.5])
    np.testing.assert_allclose(fg.grad(f)(x), fd_grad(f, x), rtol=1e-6)


def test_dtype_and_ndmin():
    g = fg.grad(lambda x: np.sum(np.asarray(x, dtype=np.float32) * 2))(np.ones(2))
    np.testing.assert_allclose(g, [2.0, 2.0])
    g = fg.grad(lambda x: np.sum(np.array(x, ndmin=3).shape[0] * x))(np.ones(2))
    np.testing.assert_allclose(g, [1.0, 1.0])


def test_nested_and_other_apis():
    f = lambda x: np.asarray(x) ** 3  # noqa: E731
    assert fg.grad(fg.grad(lambda x: np.sum(f(x))))(2.0) == pytest.approx(12.0)
    np.testing.assert_allclose(fg.elementwise_grad(f)(np.array([1.0, 2.0])), [3.0, 12.0])
    np.testing.assert_allclose(fg.jacobian(f)(np.array([1.0, 2.0])), np.diag([3.0, 12.0]))


def test_numpy_is_untouched_outside_traces():
    assert np.asarray is conversions.ORIGINALS["asarray"]
    assert np.array is conversions.ORIGINALS["array"]
    seen = []
    fg.grad(lambda x: seen.append(np.asarray is conversions.ORIGINALS["asarray"]) or x * x)(1.0)
    assert seen == [False]
    assert np.asarray is conversions.ORIGINALS["asarray"]


def test_numpy_is_restored_after_an_error():
    with pytest.raises(ZeroDivisionError):
        fg.grad(lambda x: 1 / 0)(1.0)
    assert np.asarray is conversions.ORIGINALS["asarray"]


def test_a_plain_list_still_converts_inside_a_trace():
    def f(x):
        c = np.asarray([1, 2, 3])
        assert c.dtype.kind == "i"
        return np.sum(x * c)

    np.testing.assert_allclose(fg.grad(f)(np.ones(3)), [1.0, 2.0, 3.0])


def test_opting_out_restores_the_error():
    code = (
        "import numpy as np, fusegrad as fg\n"
        "try:\n"
        "    fg.grad(lambda x: np.sum(np.asarray(x)))([1.0])\n"
        "except TypeError as e:\n"
        "    print('refused' if 'converted to a NumPy array' in str(e) else e)\n"
    )
    env = dict(os.environ, FUSEGRAD_PATCH_NUMPY="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "refused", out.stderr


def test_full_with_a_traced_fill_value():
    def f(x):
        return np.sum(np.full((2, 3), x[0]) * 2) + np.sum(np.full_like(np.ones(3), x[1]) * x)

    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(fg.grad(f)(x), fd_grad(f, x), rtol=1e-6)
    g = fg.grad(lambda s: np.sum(np.full(4, s, dtype=np.float32)))(2.0)
    assert g == pytest.approx(4.0)
    assert np.full is conversions.ORIGINALS["full"]


def test_vjp_jvp_and_hvp_convert_too():
    f = lambda x: np.asarray(x) ** 2  # noqa: E731
    x = np.array([1.0, -2.0])
    out, f_vjp = fg.vjp(f, x)
    np.testing.assert_allclose(f_vjp(np.ones(2))[0], 2 * x)
    np.testing.assert_allclose(fg.jvp(f, (x,), (np.ones(2),))[1], 2 * x)
    np.testing.assert_allclose(fg.hvp(lambda v: np.sum(f(v) * v), (x,), (np.ones(2),)), 6 * x)

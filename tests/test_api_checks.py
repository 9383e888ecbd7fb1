"""What the API accepts and refuses, as JAX does: argnums, outputs, array types, complex
outputs and ``holomorphic=True``."""

import dataclasses

import numpy as np
import pytest

import fusegrad as fg

X = np.array([0.5, -1.0, 2.0])


def f2(x, y):
    return np.sum(x * y * y)


def test_argnums_accepts_numpy_integers():
    g = fg.grad(f2, argnums=np.int64(1))(X, X)
    np.testing.assert_allclose(g, 2 * X * X)
    gx, gy = fg.grad(f2, argnums=(np.int32(0), 1))(X, X)
    np.testing.assert_allclose(gx, X * X)
    np.testing.assert_allclose(gy, 2 * X * X)


@pytest.mark.parametrize("argnums", [(0, 0), (1, -1)])
def test_argnums_naming_an_argument_twice_is_an_error(argnums):
    with pytest.raises(ValueError, match="more than once"):
        fg.grad(f2, argnums=argnums)(X, X)
    with pytest.raises(ValueError, match="more than once"):
        fg.jacobian(lambda x, y: x * y, argnums=argnums)(X, X)


def test_argnums_of_the_wrong_type():
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        fg.grad(f2, argnums="x")(X, X)
    with pytest.raises(ValueError, match="out of range"):
        fg.grad(f2, argnums=2)(X, X)


@dataclasses.dataclass
class Pair:
    a: float
    b: float


@pytest.mark.parametrize(
    ("fun", "message"),
    [
        (lambda x: None, r"returned None \(a missing `return`\?\)"),
        (lambda x: "loss", r"returned a str \('loss'\)"),
        (lambda x: (v for v in x), "returned a generator"),
        (lambda x: {"loss": np.sum(x)}, "returned a dict.*has_aux=True"),
        (lambda x: [np.sum(x)], "returned a list"),
        (lambda x: Pair(np.sum(x), 0.0), "returned a Pair"),
        (lambda x: x[:1] * 2, r"shape \(1,\): index it"),
        (lambda x: np.sum(x) > 0, "dtype bool"),
    ],
)
def test_grad_names_what_the_function_returned(fun, message):
    with pytest.raises(TypeError, match=message):
        fg.grad(fun)(X)
    with pytest.raises(TypeError, match=message):
        fg.value_and_grad(fun)(X)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_masked_arrays_and_matrices_are_refused():
    m = np.ma.masked_array([1.0, 2.0, 3.0, 4.0], mask=[0, 0, 0, 1])
    for api in (fg.grad, fg.value_and_grad, fg.jacobian):
        with pytest.raises(TypeError, match="numpy.ma.MaskedArray.*filled"):
            api(lambda x: np.sum(x * 2))(m)
    with pytest.raises(TypeError, match="numpy.ma.MaskedArray"):
        fg.vjp(lambda x: x * 2, m)
    with pytest.raises(TypeError, match="numpy.ma.MaskedArray"):
        fg.jvp(lambda x: np.sum(x * 2), (m,), (np.ones(4),))
    with pytest.raises(TypeError, match="numpy.ma.MaskedArray"):
        fg.hvp(lambda x: np.sum(x * x), (m,), (np.ones(4),))
    with pytest.raises(TypeError, match="numpy.matrix.*@"):
        fg.grad(lambda x: np.sum(x * 2))(np.matrix([[1.0, 2.0]]))
    with pytest.raises(TypeError, match="numpy.matrix"):
        fg.grad(lambda p: np.sum(p["w"]))({"w": np.matrix([[1.0, 2.0]])})


def test_complex_output_needs_holomorphic():
    z = 1.0 + 2.0j
    with pytest.raises(TypeError, match="needs a real output.*holomorphic=True"):
        fg.grad(lambda z: z * z)(z)
    assert fg.grad(lambda z: z * z, holomorphic=True)(z) == pytest.approx(2 * z)
    assert fg.grad(lambda z: np.exp(z), holomorphic=True)(z) == pytest.approx(np.exp(z))
    v, g = fg.value_and_grad(lambda z: np.sin(z), holomorphic=True)(z)
    assert v == pytest.approx(np.sin(z)) and g == pytest.approx(np.cos(z))


def test_holomorphic_needs_complex_inputs_and_output():
    with pytest.raises(TypeError, match="holomorphic=True needs complex inputs.*float64"):
        fg.grad(lambda z: z * z, holomorphic=True)(1.0)
    with pytest.raises(TypeError, match="holomorphic=True needs a complex output"):
        fg.grad(lambda z: np.real(z * z), holomorphic=True)(1.0 + 1.0j)


def test_jacobian_of_complex_outputs():
    z = np.array([1.0 + 1.0j, 2.0 - 0.5j])
    with pytest.raises(TypeError, match="needs a real output"):
        fg.jacobian(lambda z: z * z)(z)
    jac = fg.jacobian(lambda z: z * z, holomorphic=True)(z)
    np.testing.assert_allclose(jac, np.diag(2 * z))


def test_jacobian_of_a_non_array_output():
    with pytest.raises(TypeError, match="jacobian needs the function to return arrays"):
        fg.jacobian(lambda x: "text")(X)
    a, b = fg.jacobian(lambda x: (x, 2 * x))(X)  # a tuple of arrays: one Jacobian each
    np.testing.assert_array_equal(b, 2 * a)


@fg.primitive
def _reverse_only_cube(x):
    return x**3


@fg.register_rrule(_reverse_only_cube)
def _(x):
    return x**3, lambda dy: (3 * x**2 * dy,)


def test_hvp_and_hessian_of_a_primitive_with_only_a_reverse_rule():
    x = np.array([1.0, -2.0, 0.5])

    def f(v):
        return np.sum(_reverse_only_cube(v) * v)  # sum(v^4): Hessian diag(12 v^2)

    np.testing.assert_allclose(fg.hvp(f, (x,), (np.ones(3),)), 12 * x**2)
    np.testing.assert_allclose(fg.hessian(f)(x), np.diag(12 * x**2))


def test_check_grads_called_with_the_arguments_says_how_to_call_it():
    """``check_grads(f, (x, y))`` (the arguments where ``modes`` goes) raised "unhashable type:
    'numpy.ndarray'" from inside it."""
    from fusegrad.testing import check_grads

    with pytest.raises(TypeError, match=r"check_grads\(f\)\(x, y\)"):
        check_grads(lambda x: np.sum(x**2), (np.ones(2),))
    with pytest.raises(TypeError, match="modes is a tuple"):
        check_grads(lambda x: np.sum(x**2), "rev")

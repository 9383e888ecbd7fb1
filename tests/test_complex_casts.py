"""Casting complex values to a real dtype: where the derivative means it, and where a user does.

The cotangent of a real value that became complex (``x.astype(complex)``, ``x + 0j``, the
cotangent of ``np.real(r)`` differentiated again) is the real part of the complex cotangent: the
transpose of embedding R in C. That projection is intended and must not warn. A user's own cast
of a complex value to a real dtype discards the imaginary part, and NumPy warns
(``ComplexWarning``): so must a lazy cast.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.rules.elementwise import astype
from fusegrad.testing import check_grads, check_rrule

ComplexWarning = np.exceptions.ComplexWarning

P = np.array([1.0, -0.3, 0.5, 0.2])  # a cubic with one real root and a complex pair
A = np.array([[1.0, 2.0, 0.3], [-1.5, 0.5, 0.2], [0.1, 0.4, 2.0]])  # complex eigenvalues too


@pytest.fixture(params=["lazy", "small"])
def path(request):
    """Every op lazy (the tests' default), or the small-array path at its default threshold."""
    if request.param == "small":
        request.getfixturevalue("small_path")
    return request.param


def test_the_cotangent_of_a_real_value_made_complex_is_its_real_part(engine, path):
    x = np.linspace(0.1, 0.9, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ComplexWarning)
        check_rrule(astype, x, "complex128")
        g = fg.grad(lambda v: np.sum(np.abs(astype(v, "complex128") * (1 + 2j)) ** 2))(x)
        np.testing.assert_allclose(g, 10 * x, rtol=1e-12)  # |x (1 + 2i)|^2 = 5 x^2
        g = fg.grad(lambda v: np.sum(np.real((v + 0j) * (1 + 2j)) ** 2))(x)
        np.testing.assert_allclose(g, 2 * x, rtol=1e-12)


@pytest.mark.parametrize(
    "f, x",
    [
        (lambda p: np.sum(np.real(np.roots(p)) ** 2), P),
        (lambda m: np.sum(np.real(np.linalg.eigvals(m)) ** 2), A),
    ],
    ids=["roots", "eigvals"],
)
def test_reverse_over_reverse_through_complex_intermediates(f, x, path):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("error", ComplexWarning)
        check_grads(f, modes=("rev",), order=2)(x)


def test_a_users_complex_to_real_cast_warns_as_numpy_does(engine, path):
    z = np.linspace(0.0, 1.0, 64) * (1 - 2j)
    with pytest.warns(ComplexWarning):
        want = z.astype(np.float64)
    with pytest.warns(ComplexWarning):
        got = np.asarray(fl.asarray(z).astype(np.float64) * 1.0)
    np.testing.assert_array_equal(got, want)


def test_the_tangent_of_a_complex_value_cast_to_real_is_its_real_part(engine):
    z = np.linspace(0.0, 1.0, 5) * (1 - 2j)
    dz = np.full(5, 0.5 + 3j)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, dy = fg.jvp(lambda v: astype(v, "float64"), (z,), (dz,))
        y, dy = np.asarray(y), np.asarray(dy)
    # the user's own cast warns, as NumPy does; the tangent's Re() does not
    assert [w.category for w in caught] == [ComplexWarning]
    np.testing.assert_array_equal(np.asarray(y), z.real)
    assert np.asarray(dy).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(dy), np.full(5, 0.5))

"""Reductions with where=, initial=, mean= and correction=, and the nan-reductions with them:
values against NumPy, derivatives against finite differences in both directions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.testing import check_grads

A = np.array([[1.5, -0.7, 2.0, 0.3], [0.4, 1.1, -1.3, 0.9]])
M = np.array([[True, False, True, True], [False, True, True, False]])
ROW = np.array([True, True, False, True])  # broadcast against A
NAN = A.copy()
NAN[0, 1] = NAN[1, 3] = np.nan

CASES = {
    "sum where": lambda a: np.sum(a * a, where=M),
    "sum axis where initial": lambda a: np.sum(a, axis=1, where=ROW, initial=2.0),
    "sum initial keepdims": lambda a: np.sum(a, axis=0, initial=-1.0, keepdims=True),
    "prod where": lambda a: np.prod(a, axis=1, where=M),
    "prod initial": lambda a: np.prod(a, axis=0, initial=2.0),
    "max where initial": lambda a: np.max(a, axis=1, where=M, initial=-5.0),
    "max initial wins": lambda a: np.max(a, initial=100.0),
    "amin where initial": lambda a: np.amin(a, axis=0, where=ROW, initial=5.0),
    "mean where": lambda a: np.mean(a, axis=1, where=M),
    "mean where keepdims": lambda a: np.mean(a, axis=0, where=M, keepdims=True),
    "var where ddof": lambda a: np.var(a, axis=1, where=M, ddof=1),
    "var correction": lambda a: np.var(a, axis=1, correction=1),
    "var mean": lambda a: np.var(a, axis=1, mean=np.mean(a, axis=1, keepdims=True) + 0.5),
    "std where": lambda a: np.std(a, where=M),
    "method sum where": lambda a: a.sum(axis=1, where=M),
    "nansum where": lambda a: np.nansum(a * a + NAN, where=M),
    "nanprod where initial": lambda a: np.nanprod(a + NAN, axis=1, where=M, initial=0.5),
    "nanmean where": lambda a: np.nanmean(a + NAN, axis=1, where=M),
    "nanvar where correction": lambda a: np.nanvar(a + NAN, axis=1, where=ROW, correction=1),
    "nanstd where": lambda a: np.nanstd(a + NAN, where=M),
    "nanmax where initial": lambda a: np.nanmax(a + NAN, axis=1, where=M, initial=-3.0),
    "nanmin initial": lambda a: np.nanmin(a + NAN, axis=0, initial=0.0),
}


def _value(f, a):
    seen = {}

    def loss(v):
        out = f(v)
        seen["value"] = fg.numpy.stop_gradient(out)
        return np.sum(out)

    fg.grad(loss)(a)
    return seen["value"]


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_numpy_and_derivatives_finite_differences(name):
    f = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = f(A)  # NumPy's own, on plain values
        got = _value(f, A)
        np.testing.assert_allclose(got, want, rtol=1e-13)
        assert np.shape(got) == np.shape(want)
        primal, _ = fg.jvp(f, (A,), (np.ones_like(A),))
        np.testing.assert_allclose(primal, want, rtol=1e-13)
    w = np.arange(1.0, np.size(want) + 1).reshape(np.shape(want))
    check_grads(lambda a: np.sum(f(a) * w), ("rev", "fwd"), order=2)(A)


def test_hand_derived():
    g = fg.grad(lambda a: np.sum(a * a, where=M, initial=1.0))(A)
    np.testing.assert_allclose(g, np.where(M, 2 * A, 0.0))
    g = fg.grad(lambda a: np.mean(a, where=M))(A)
    np.testing.assert_allclose(g, M / M.sum())
    # the mean given to var has its own derivative: d/dm Σ(a - m)² / n = -2 Σ(a - m) / n
    g = fg.grad(lambda m: np.var(A, mean=m))(0.25)
    np.testing.assert_allclose(g, -2 * np.mean(A - 0.25))


def test_numpys_errors():
    with pytest.raises(ValueError, match="to use a where mask one has to specify 'initial'"):
        fg.grad(lambda a: np.max(a, where=M))(A)
    with pytest.raises(ValueError, match="'fmin' does not have an identity"):  # as NumPy's
        fg.grad(lambda a: np.nanmin(a, where=M))(A)
    with pytest.raises(ValueError, match="ddof and correction"):
        fg.grad(lambda a: np.var(a, ddof=1, correction=1))(A)
    with pytest.raises(TypeError, match="out="):
        fg.grad(lambda a: np.sum(a, out=np.empty(()), where=M))(A)


def test_replayed_by_jit():
    def f(a):
        return np.sum(a * a, axis=1, where=M, initial=1.0) + np.var(a, where=M)

    g = fg.jit(fg.grad(lambda a: np.sum(f(a))))
    for k in range(10):
        np.testing.assert_allclose(g(A + k), fg.grad(lambda a: np.sum(f(a)))(A + k), rtol=1e-12)
    assert g.cache_info()[0].replayable


def test_var_with_ddof_at_least_the_kept_count_is_numpys_inf_or_nan():
    # NumPy divides by max(n - ddof, 0); a negative divisor gave a negative variance
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for ddof in (1, 2, 3):
            want = np.var(A, axis=1, where=M, ddof=ddof)
            got = _value(lambda a, d=ddof: np.var(a, 1, where=M, ddof=d), A)
            np.testing.assert_array_equal(got, want)
        none = np.array([[False] * 4, [True] * 4])
        want = np.var(A, axis=1, where=none, ddof=1)
        np.testing.assert_array_equal(_value(lambda a: np.var(a, 1, where=none, ddof=1), A), want)


def test_ufunc_reduce_with_options_and_where_true():
    # np.add.reduce(x, initial=10) added 10 to the tangent, multiply.reduce ignored where=
    for f in (lambda a: np.add.reduce(a, axis=1, initial=10.0),
              lambda a: np.multiply.reduce(a, axis=1, where=M),
              lambda a: np.minimum.reduce(a, axis=1, initial=0.5),
              lambda a: np.maximum.reduce(a, axis=1, initial=0.0, where=M)):  # fmt: skip
        np.testing.assert_allclose(fg.jvp(f, (A,), (np.ones_like(A),))[0], f(A), rtol=1e-13)
        check_grads(lambda a, f=f: np.sum(f(a) * np.array([1.0, 2.0])), ("rev", "fwd"))(A)
    np.testing.assert_array_equal(fg.grad(lambda a: np.sum(a, where=True))(A), np.ones_like(A))
    g = fg.grad(lambda a: np.var(a, ddof=0, correction=1))(A)  # NumPy takes ddof=0 beside it
    np.testing.assert_allclose(g, 2 * (A - A.mean()) / (A.size - 1))


def test_float32_stays_float32():
    # the int64 count promoted float32 means and variances, and a float64 initial the sums
    a = A.astype(np.float32)
    for f in (lambda v: np.mean(v, axis=1, where=M), lambda v: np.var(v, axis=1, where=M),
              lambda v: np.nanstd(v, where=M), lambda v: np.sum(v, initial=np.float64(2.0)),
              lambda v: np.max(v, initial=np.float64(2.0)), lambda v: np.median(v),
              lambda v: np.percentile(v, 30, axis=1)):  # fmt: skip
        got = fg.jvp(f, (a,), (np.ones_like(a),))[0]
        assert np.asarray(got).dtype == np.asarray(f(a)).dtype == np.float32
        np.testing.assert_allclose(got, f(a), rtol=1e-6)

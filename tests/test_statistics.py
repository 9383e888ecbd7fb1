"""Statistics composites (fusegrad.rules.statistics): values equal NumPy's, derivatives (reverse,
forward, second order) equal finite differences; nan handling and hand-derived gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.testing import check_grads

RNG = np.random.default_rng(0)
M = RNG.standard_normal((4, 5))
MN = M.copy()
MN[1, 2] = MN[3, 0] = MN[3, 4] = np.nan
W5 = np.abs(RNG.standard_normal(5)) + 0.5

METHODS = [
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
]

CASES = {
    "nansum": (lambda a: np.nansum(a, axis=1), MN),
    "nansum_all": (lambda a: np.nansum(a), MN),
    "nanprod": (lambda a: np.nanprod(a, axis=0, keepdims=True), MN),
    "nanmean": (lambda a: np.nanmean(a, axis=1), MN),
    "nanvar": (lambda a: np.nanvar(a, axis=1, ddof=1), MN),
    "nanstd": (lambda a: np.nanstd(a, axis=0), MN),
    "nanmax": (lambda a: np.nanmax(a, axis=1), MN),
    "nanmin": (lambda a: np.nanmin(a), MN),
    "nancumsum": (lambda a: np.nancumsum(a, axis=1), MN),
    "nancumprod": (lambda a: np.nancumprod(a), MN),
    "nanmedian": (lambda a: np.nanmedian(a, axis=1), MN),
    "nanquantile": (lambda a: np.nanquantile(a, [0.2, 0.9], axis=1), MN),
    "nanpercentile": (lambda a: np.nanpercentile(a, 30, axis=0, keepdims=True), MN),
    "median": (lambda a: np.median(a, axis=0), M),
    "median_all": (lambda a: np.median(a), M),
    "median_axes": (lambda a: np.median(a[None], axis=(0, 2), keepdims=True), M),
    "quantile": (lambda a: np.quantile(a, [[0.1], [0.75]], axis=1), M),
    "percentile": (lambda a: np.percentile(a, [10, 50, 95]), M),
    "ptp": (lambda a: np.ptp(a, axis=1), M),
    "average": (lambda a: np.average(a, axis=1, weights=W5), M),
    "average_plain": (lambda a: np.average(a, axis=0), M),
    "average_full_weights": (lambda a: np.average(a, weights=np.abs(a) + 1.0), M),
    "cov": (lambda a: np.cov(a), M),
    "cov_cols_bias": (lambda a: np.cov(a, rowvar=False, bias=True), M),
    "cov_y": (lambda a: np.cov(a[0], a[1]), M),
    "cov_weights": (lambda a: np.cov(a, fweights=[1, 2, 1, 3, 1], aweights=W5), M),
    "cov_ddof": (lambda a: np.cov(a, ddof=0, aweights=W5), M),
    "cov_1d": (lambda a: np.cov(a[0]), M),
    "corrcoef": (lambda a: np.corrcoef(a), M),
    "corrcoef_y": (lambda a: np.corrcoef(a[0], a[2]), M),
}


def _value(f, *args):
    return fg.vjp(f, *args)[0]


@pytest.mark.parametrize("name", list(CASES))
def test_values_equal_numpy(name):
    f, a = CASES[name]
    got = _value(f, a)
    want = f(a)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
    assert np.shape(got) == np.shape(want)


@pytest.mark.parametrize("name", list(CASES))
def test_derivatives(name):
    f, a = CASES[name]
    check_grads(f, modes=("rev", "fwd"), order=2)(a)


@pytest.mark.parametrize("method", METHODS)
def test_quantile_derivative_in_q_every_method(method):
    # the interpolated position moves with q (slope n + 1 - alpha - beta for NumPy's continuous
    # methods, 0 for the stepping ones and where the position is clipped): it was 0 for all
    x = np.random.default_rng(7).standard_normal((4, 7))  # (its own: RNG is order-dependent)
    xn = x.copy()
    xn[1, 2], xn[3, :3] = np.nan, np.nan
    w = np.arange(1.0, 5.0)
    for f, q in [
        (lambda q: np.sum(np.quantile(x, q, axis=1, method=method) * w), np.array(0.37)),
        (lambda q: np.sum(np.quantile(x, q, method=method)), np.array([0.21, 0.6, 0.99])),
        (lambda q: np.sum(np.nanquantile(xn, q, axis=1, method=method) * w), np.array(0.37)),
        (lambda q: np.sum(np.percentile(x, q, axis=0, method=method)), np.array(42.0)),
    ]:
        # central differences with a small step: the quantile is piecewise linear in q, and
        # check_grads' step may cross a breakpoint
        h, eye = 1e-7 * max(1.0, float(np.max(q))), np.eye(q.size).reshape((q.size, *q.shape))
        fd = np.array([(f(q + h * e) - f(q - h * e)) / (2 * h) for e in eye]).reshape(q.shape)
        np.testing.assert_allclose(fg.grad(f)(q), fd, rtol=1e-6, atol=1e-8)
        _, t = fg.jvp(f, (q,), (np.ones_like(q),))
        np.testing.assert_allclose(t, fd.sum(), rtol=1e-6, atol=1e-8)
    if method == "linear":  # by hand: d/dq of s[lo] + (q (n - 1) - lo) (s[hi] - s[lo])
        s = np.sort(x[0])
        assert fg.grad(lambda q: np.quantile(x[0], q))(0.3) == pytest.approx(6 * (s[2] - s[1]))


@pytest.mark.parametrize("method", METHODS)
def test_quantile_every_method(method):
    x = np.random.default_rng(9).standard_normal(9)  # (its own: RNG is order-dependent)
    q = np.array([0.0, 0.13, 0.5, 0.77, 1.0])
    f = lambda v: np.quantile(v, q, method=method)  # noqa: E731
    np.testing.assert_allclose(_value(f, x), f(x), rtol=1e-13)
    check_grads(f, modes=("rev", "fwd"), order=2)(x)
    g = lambda v: np.nanpercentile(v, 100 * q, axis=1, method=method)  # noqa: E731
    np.testing.assert_allclose(_value(g, MN), g(MN), rtol=1e-13)
    check_grads(g, modes=("rev",))(MN)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    q=st.floats(0.0, 1.0),
    method=st.sampled_from(METHODS),
    nans=st.integers(0, 3),
)
def test_quantile_hypothesis(n, q, method, nans):
    rng = np.random.default_rng(n)
    x = rng.permutation(np.arange(n + nans, dtype=float) * 0.7 - 2)
    x[:nans] = np.nan
    x = rng.permutation(x)
    f = lambda v: np.nanquantile(v, q, method=method)  # noqa: E731
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(_value(f, x), f(x), rtol=1e-12, atol=1e-12)
    # The gradient picks (interpolates) order statistics: it sums to one over the non-nan values.
    g = fg.grad(f)(x)
    assert np.all(g[np.isnan(x)] == 0)
    np.testing.assert_allclose(np.sum(g), 1.0)


def test_median_hand_derived():
    x = np.array([3.0, 1.0, 2.0, 10.0])  # median = (2 + 3) / 2
    np.testing.assert_allclose(fg.grad(np.median)(x), [0.5, 0.0, 0.5, 0.0])
    x = np.array([3.0, np.nan, 1.0])
    np.testing.assert_allclose(fg.grad(np.nanmedian)(x), [0.5, 0.0, 0.5])


def test_nan_reductions_hand_derived():
    x = np.array([1.0, np.nan, 3.0, 5.0])
    np.testing.assert_allclose(fg.grad(np.nansum)(x), [1, 0, 1, 1])
    np.testing.assert_allclose(fg.grad(np.nanmean)(x), [1 / 3, 0, 1 / 3, 1 / 3])
    np.testing.assert_allclose(fg.grad(np.nanprod)(x), [15, 0, 5, 3])
    np.testing.assert_allclose(fg.grad(np.nanmax)(x), [0, 0, 0, 1])
    # nanvar = mean((x - m)^2) over the valid entries: gradient 2 (x - m) / n
    np.testing.assert_allclose(fg.grad(np.nanvar)(x), [2 * (1 - 3) / 3, 0, 0, 2 * (5 - 3) / 3])


def test_all_nan_slices_give_nan_as_numpy():
    x = np.array([[np.nan, np.nan], [1.0, 2.0]])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanmax(x, axis=1)
    np.testing.assert_array_equal(_value(lambda v: np.nanmax(v, axis=1), x), want)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanmedian(x, axis=1)
    np.testing.assert_array_equal(_value(lambda v: np.nanmedian(v, axis=1), x), want)


def test_complex_statistics():
    z = M + 1j * np.random.default_rng(17).standard_normal(M.shape)
    for f in (lambda a: np.nanvar(a, axis=1), lambda a: np.abs(np.cov(a)) ** 2):
        np.testing.assert_allclose(_value(f, z), f(z), rtol=1e-12)
        check_grads(f, modes=("fwd",))(z)


def test_average_returned_and_errors():
    avg, wsum = _value(lambda a: np.average(a, axis=1, weights=W5, returned=True), M)
    want = np.average(M, axis=1, weights=W5, returned=True)
    np.testing.assert_allclose(avg, want[0])
    np.testing.assert_allclose(wsum, want[1])
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        fg.grad(lambda a: np.sum(np.average(a, axis=1, weights=np.zeros(5))))(M)
    with pytest.raises(TypeError, match="axis must be specified"):
        fg.grad(lambda a: np.sum(np.average(a, weights=W5)))(M)


def test_weights_in_quantile_raise_clearly():
    with pytest.raises(TypeError, match="weights"):
        fg.grad(lambda a: np.quantile(a, 0.5, method="inverted_cdf", weights=np.ones(4)))(M[0, :4])


def test_weights_are_differentiable():
    """average's and cov's aweights are differentiable arguments too."""
    check_grads(lambda a, w: np.average(a, axis=1, weights=w), modes=("rev", "fwd"))(M, W5)
    check_grads(lambda a, w: np.cov(a, aweights=w), modes=("rev", "fwd"))(M, W5)


def test_a_nan_makes_the_quantiles_of_its_slice_nan_as_numpy():
    # sorted last, the nan was interpolated around: median gave 4.5 where NumPy gives nan
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    for f in (np.median, lambda v: np.quantile(v, 0.25, axis=1),
              lambda v: np.percentile(v, [10, 90], axis=1)):  # fmt: skip
        value = fg.value_and_grad(lambda v, f=f: np.sum(f(v) * 1.0))(x)[0]
        np.testing.assert_array_equal(value, np.sum(f(x)))
        got = fg.jvp(f, (x,), (np.ones_like(x),))[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(f(x)))

"""scipy.stats distributions on traced values (fusegrad.scipy.stats and the plain SciPy calls)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats as st

import fusegrad as fg
import fusegrad.scipy.stats as fst
from fusegrad.rules.special import NoDerivativeError
from fusegrad.testing import check_grads

X = np.array([0.3, 0.6, 0.8])
# name: (shape parameters, (loc, scale))
CONTINUOUS = {
    "norm": ((), (0.2, 1.5)),
    "t": ((3.5,), (0.1, 1.2)),
    "gamma": ((2.5,), (0.0, 1.3)),
    "beta": ((2.0, 3.0), (0.0, 1.0)),
    "expon": ((), (0.1, 2.0)),
    "laplace": ((), (0.2, 0.7)),
    "cauchy": ((), (0.1, 0.9)),
    "logistic": ((), (0.3, 1.1)),
    "uniform": ((), (0.1, 0.9)),
    "lognorm": ((0.7,), (0.0, 1.3)),
    "chi2": ((3.0,), (0.0, 1.2)),
    "halfnorm": ((), (0.1, 1.5)),
    "weibull_min": ((1.7,), (0.0, 0.8)),
    "pareto": ((2.5,), (-1.0, 1.2)),  # support x ≥ loc + scale = 0.2
    "invgamma": ((2.5,), (0.0, 1.1)),
    "gumbel_r": ((), (0.2, 0.9)),
    "rayleigh": ((), (0.1, 1.4)),
}
METHODS = ["logpdf", "pdf", "logcdf", "cdf", "sf", "logsf"]
# cdfs through betainc (no derivative in a, b) and gammainc (first order in a only, tested in
# test_scipy_special.py): no second-order derivative in the shape parameters
NO_SHAPE_DERIVATIVE = {"t", "gamma", "beta", "chi2", "invgamma"}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_values_match_scipy(name, method):
    shapes, (loc, scale) = CONTINUOUS[name]
    xs = np.linspace(-3, 4, 15)  # inside and outside every support
    want = getattr(getattr(st, name), method)(xs, *shapes, loc, scale)
    got = getattr(getattr(fst, name), method)(xs, *shapes, loc, scale)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_plain_scipy_call_differentiates(name, method):
    shapes, (loc, scale) = CONTINUOUS[name]
    f = getattr(getattr(st, name), method)  # SciPy's own method, as written
    check_grads(lambda x, m: np.sum(f(x, *shapes, m, scale)), ("rev", "fwd"), order=2)(X, loc)
    if name not in NO_SHAPE_DERIVATIVE or method in ("logpdf", "pdf"):
        check_grads(lambda sh, s: np.sum(f(X, *sh, loc=loc, scale=s)), ("rev",), order=2)(
            shapes, scale
        )


QUANTILES = ["norm", "expon", "uniform", "logistic", "cauchy", "laplace", "lognorm", "halfnorm",
             "weibull_min", "pareto", "gumbel_r", "rayleigh",
             "t", "gamma", "beta", "chi2", "invgamma"]  # SciPy's inverses, implicitly  # fmt: skip


@pytest.mark.parametrize("method", ["ppf", "isf"])
@pytest.mark.parametrize("name", QUANTILES)
def test_quantile_functions(name, method):
    shapes, (loc, scale) = CONTINUOUS[name]
    f = getattr(getattr(st, name), method)
    qs = np.array([-0.1, 0.0, 0.05, 0.3, 0.5, 0.9, 1.0, 1.2, np.nan])
    want = f(qs, *shapes, loc, scale)
    got = getattr(getattr(fst, name), method)(qs, *shapes, loc, scale)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    q = np.array([0.05, 0.3, 0.7])
    check_grads(lambda q, m, s: np.sum(f(q, *shapes, m, s)), ("rev", "fwd"), order=2)(q, loc, scale)
    # the inverse of the cdf: d ppf / dq = 1 / pdf(ppf(q)) (hand-derived)
    dist = getattr(st, name)
    x = dist.ppf(q, *shapes, loc, scale)
    want = (1 if method == "ppf" else -1) / dist.pdf(
        x if method == "ppf" else dist.isf(q, *shapes, loc, scale), *shapes, loc, scale
    )
    np.testing.assert_allclose(
        fg.elementwise_grad(lambda q: f(q, *shapes, loc, scale))(q), want, rtol=1e-9
    )


MOMENT_SHAPES = {  # typical shapes, and shapes where a moment is infinite or undefined
    "t": [(3.5,), (1.5,), (0.8,)], "pareto": [(2.5,), (1.5,), (0.8,)],
    "invgamma": [(2.5,), (1.5,), (0.8,)], "lognorm": [(0.7,)], "gamma": [(2.5,)],
    "beta": [(2.0, 3.0)], "chi2": [(3.0,)], "weibull_min": [(1.7,), (0.6,)],
}  # fmt: skip


@pytest.mark.parametrize("method", ["entropy", "mean", "var", "std", "median"])
@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_entropy_and_moments(name, method):
    dist = getattr(st, name)
    if method == "median" and name not in QUANTILES:
        return
    for shapes in MOMENT_SHAPES.get(name, [CONTINUOUS[name][0]]):
        want = getattr(dist, method)(*shapes, loc=0.3, scale=1.7)
        got = fg.value_and_grad(lambda s, sh=shapes: getattr(dist, method)(*sh, loc=0.3, scale=s))(
            1.7
        )[0]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str(shapes))
        if np.isfinite(want):
            frozen = getattr(dist(*shapes, loc=0.3, scale=1.7), method)()
            np.testing.assert_allclose(frozen, want, rtol=1e-12)
            f = lambda sh, s: getattr(dist, method)(*sh, loc=0.3, scale=s)  # noqa: E731
            sh = tuple(float(v) for v in shapes)
            if method == "median" and name in ("t", "beta"):  # betainc's inverses: not in shapes
                check_grads(lambda s, f=f, sh=sh: f(sh, s), ("rev", "fwd"), order=1)(1.7)
            else:
                check_grads(f, ("rev", "fwd"), order=1)(sh, 1.7)


def test_entropy_hand_derived():
    # d/dσ of the normal's entropy ½ log(2πe σ²) is 1/σ; of the Gaussian's ½ log det(2πe Σ),
    # in Σ: ½ Σ⁻¹
    assert fg.grad(lambda s: st.norm(0.0, s).entropy())(2.0) == pytest.approx(0.5)
    c = np.array([[2.0, 0.3], [0.3, 1.0]])
    value, g = fg.value_and_grad(lambda c: st.multivariate_normal(np.zeros(2), c).entropy())(c)
    np.testing.assert_allclose(value, st.multivariate_normal(np.zeros(2), c).entropy())
    np.testing.assert_allclose(g, 0.5 * np.linalg.inv(c), rtol=1e-12)
    # the Poisson's entropy ~ ½ log(2πe μ) - 1/(12 μ) for large μ: derivative 1/(2μ) + 1/(12μ²)
    mu = 1e4
    assert fg.grad(lambda m: st.poisson.entropy(m))(mu) == pytest.approx(
        1 / (2 * mu) + 1 / (12 * mu**2), rel=1e-6
    )


@pytest.mark.parametrize(
    "name,shapes",
    [("poisson", (1e-8,)), ("poisson", (0.3,)), ("poisson", (40.0,)), ("poisson", (1e4,)),
     ("nbinom", (3.0, 0.4)), ("nbinom", (0.7, 0.9)), ("nbinom", (20.0, 0.05)),
     ("nbinom", (0.3, 0.01))],
)  # fmt: skip
def test_discrete_entropy_by_its_sum(name, shapes):
    # -Σ pmf log pmf over a range wide enough for every term above 1e-30; SciPy's own generic
    # sum stops short on some of these ("expect(): sum did not converge": 2.83 for nbinom(0.3,
    # 0.01), whose entropy is 3.92), so the reference is the brute-force sum
    dist = getattr(st, name)
    k = np.arange(0.0, 200_000.0)
    with np.errstate(all="ignore"):
        lp = dist.logpmf(k, *shapes)  # (entr(pmf) loses digits where pmf ~ 1: log(1 - 1e-8))
        want = -np.sum(np.where(np.isfinite(lp), np.exp(lp) * lp, 0.0))
    f = (lambda m: dist.entropy(m)) if len(shapes) == 1 else (lambda n, p: dist.entropy(n, p))
    np.testing.assert_allclose(fg.value_and_grad(f)(*shapes)[0], want, rtol=1e-12)
    # each parameter's first and second derivative against differences with a step at its
    # own scale (one step for all, as check_grads takes, crosses μ = 0 or p's curvature)
    argnums = tuple(range(len(shapes)))
    grad = fg.grad(f, argnums=argnums)
    hess = fg.hessian(f, argnums=argnums)(*shapes)
    mirror = getattr(fst, name).entropy  # (SciPy's own on plain values: not its sum)
    for i, v in enumerate(shapes):

        def moved(u, i=i):
            return [u if j == i else w for j, w in enumerate(shapes)]

        def richardson(g, v=v):  # central differences at h, h/2, h/4, extrapolated: O(h⁶)
            d = [(g(v + s) - g(v - s)) / (2 * s) for s in (0.01 * v, 0.005 * v, 0.0025 * v)]
            r1, r2 = (4 * d[1] - d[0]) / 3, (4 * d[2] - d[1]) / 3
            return (16 * r2 - r1) / 15

        d1 = richardson(lambda u, moved=moved: mirror(*moved(u)))
        d2 = richardson(lambda u, moved=moved: np.array(grad(*moved(u))))
        np.testing.assert_allclose(grad(*shapes)[i], d1, rtol=1e-7)
        np.testing.assert_allclose([hess[i][j] for j in argnums], d2, rtol=1e-5, atol=1e-8)
    _, tangent = fg.jvp(f, shapes, tuple(1.0 for _ in shapes))
    np.testing.assert_allclose(tangent, np.sum(grad(*shapes)), rtol=1e-9)
    # invalid parameters: nan, as SciPy's; a vector of them: each its own
    both = [np.array([v, -1.0]) for v in shapes]
    got = getattr(fst, name).entropy(*both)
    assert np.isnan(got[1]) and got[0] == pytest.approx(want, rel=1e-12)


def test_a_quantile_not_written_is_named():
    class unwritten_gen(fst.gamma_gen):  # noqa: N801
        _ppf = None

    with pytest.raises(TypeError, match=r"scipy\.stats\.gamma: .*no differentiable quantile"):
        fg.grad(lambda q: unwritten_gen().ppf(q, 2.0))(0.3)


@pytest.mark.parametrize("method", ["ppf", "isf"])
def test_quantiles_in_the_shape_parameters(method):
    # y(a) with F(y(a); a) = q held: dy/da = -(∂F/∂a) / pdf(y), against Richardson differences
    q = np.array([0.05, 0.4, 0.93])
    for name, shape in (("gamma", 2.5), ("chi2", 3.0), ("invgamma", 2.5)):
        f = getattr(getattr(st, name), method)
        got = fg.elementwise_grad(lambda a, f=f: f(q, a, 0.1, 1.3))(np.full(3, shape))
        d = [(f(q, shape + h, 0.1, 1.3) - f(q, shape - h, 0.1, 1.3)) / (2 * h)
             for h in (1e-2, 5e-3, 2.5e-3)]  # fmt: skip
        r1, r2 = (4 * d[1] - d[0]) / 3, (4 * d[2] - d[1]) / 3
        np.testing.assert_allclose(got, (16 * r2 - r1) / 15, rtol=1e-7, err_msg=name)
    # t's and beta's go through betainc's inverses: no derivative in their shapes (as JAX's)
    with pytest.raises(NoDerivativeError, match="degrees of freedom df"):
        fg.grad(lambda df: getattr(st.t, method)(0.3, df))(3.0)
    with pytest.raises(NoDerivativeError, match=r"scipy\.special\..* with respect to a "):
        fg.grad(lambda a: getattr(st.beta, method)(0.3, a, 2.0))(3.0)


@pytest.mark.parametrize("name,shapes", [("poisson", (2.4,)), ("binom", (10, 0.35)),
                                         ("geom", (0.3,)), ("nbinom", (4, 0.6)),
                                         ("bernoulli", (0.3,))])  # fmt: skip
def test_discrete_quantiles_are_scipys_and_have_zero_derivative(name, shapes):
    dist = getattr(st, name)
    qs = np.array([-0.1, 0.0, 0.05, 0.3, 0.5, 0.9, 1.0, np.nan])
    for method in ("ppf", "isf"):
        want = getattr(dist, method)(qs, *shapes, loc=1)
        np.testing.assert_array_equal(getattr(getattr(fst, name), method)(qs, *shapes, loc=1), want)
        # integer-valued: derivative 0 in q and in every parameter (as np.floor's)
        f = getattr(dist, method)
        assert fg.grad(lambda q, f=f: np.sum(f(q, *shapes)))(qs[2:6]).tolist() == [0.0] * 4
        p = float(shapes[-1])
        assert fg.grad(lambda s, f=f: f(0.3, *shapes[:-1], s))(p) == 0.0
    frozen = dist(*shapes)
    assert fg.value_and_grad(lambda q: frozen.ppf(q))(0.3) == (dist.ppf(0.3, *shapes), 0.0)
    assert fg.grad(lambda s: dist.median(*shapes[:-1], s))(float(shapes[-1])) == 0.0


def test_norm_hand_derived():
    m, s, x = 0.5, 2.0, np.array([1.0, -1.0])
    gx, gm, gs = fg.grad(lambda x, m, s: np.sum(st.norm.logpdf(x, m, s)), argnums=(0, 1, 2))(
        x, m, s
    )
    np.testing.assert_allclose(gx, -(x - m) / s**2)
    np.testing.assert_allclose(gm, np.sum((x - m) / s**2))
    np.testing.assert_allclose(gs, np.sum((x - m) ** 2 / s**3 - 1 / s))
    np.testing.assert_allclose(fg.grad(lambda x: st.norm.cdf(x))(0.3), st.norm.pdf(0.3))


def test_keyword_positional_and_frozen_forms_agree():
    g1 = fg.grad(lambda m: st.norm.logpdf(1.0, m, 2.0))(0.3)
    g2 = fg.grad(lambda m: st.norm.logpdf(1.0, loc=m, scale=2.0))(0.3)
    g3 = fg.grad(lambda m: st.norm(m, 2.0).logpdf(1.0))(0.3)
    g4 = fg.grad(lambda m: st.norm(loc=m, scale=2.0).logpdf(1.0))(0.3)
    g5 = fg.grad(lambda m: fst.norm(m, scale=2.0).logpdf(1.0))(0.3)
    assert g1 == pytest.approx((1.0 - 0.3) / 4.0)
    assert g1 == g2 == g3 == g4 == g5
    gdf = fg.grad(lambda df: st.t(df).logpdf(0.5))(3.0)
    h = 1e-6
    assert gdf == pytest.approx((st.t.logpdf(0.5, 3 + h) - st.t.logpdf(0.5, 3 - h)) / (2 * h))


def test_outside_the_support_is_minus_inf_with_a_zero_gradient():
    x = np.array([-1.0, 0.5])
    val = fst.gamma.logpdf(x, 2.0)
    assert val[0] == -np.inf and np.isfinite(val[1])
    g = fg.grad(lambda a: np.sum(np.exp(st.gamma.logpdf(x, a))))(2.0)
    assert np.isfinite(g)
    gx = fg.grad(lambda v: np.sum(st.beta.pdf(v, 2.0, 2.0)))(np.array([-0.5, 0.5, 1.5]))
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0])  # d/dx 6x(1-x) at 1/2 is 0 too


K = np.array([0.0, 1.0, 3.0, 5.0, 7.0])
DISCRETE = {"poisson": (2.5,), "binom": (6, 0.3), "bernoulli": (0.3,), "geom": (0.35,),
            "nbinom": (2.5, 0.4)}  # fmt: skip


@pytest.mark.parametrize("method", ["logpmf", "pmf", "logcdf", "cdf", "sf", "logsf"])
@pytest.mark.parametrize("name", list(DISCRETE))
def test_discrete(name, method):
    args = DISCRETE[name]
    f = getattr(getattr(st, name), method)
    ks = np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 6.0, 9.0])
    np.testing.assert_allclose(getattr(getattr(fst, name), method)(ks, *args), f(ks, *args))
    # inside the support (the log of a zero mass has no derivative), below its top for sf
    lo, hi = getattr(st, name).support(*args)
    top = K < hi if method in ("sf", "logsf") else K <= hi
    k = K[(K <= 5) & (K >= lo) & top]
    check_grads(lambda p: np.sum(f(k, *args[:-1], p)), ("rev", "fwd"), order=2)(float(args[-1]))


def test_poisson_hand_derived():
    g = fg.grad(lambda mu: np.sum(st.poisson.logpmf(K, mu)))(2.0)
    assert g == pytest.approx(np.sum(K / 2.0 - 1))


def test_multivariate_normal():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2))
    c = np.array([[2.0, 0.3], [0.3, 1.0]])
    mu = np.array([0.1, -0.2])
    np.testing.assert_allclose(fst.multivariate_normal.logpdf(x, mu, c),
                               st.multivariate_normal.logpdf(x, mu, c))  # fmt: skip
    np.testing.assert_allclose(fst.multivariate_normal.pdf(x[0], mu, c),
                               st.multivariate_normal.pdf(x[0], mu, c))  # fmt: skip
    np.testing.assert_allclose(fst.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0),
                               st.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0))  # fmt: skip

    def f(m, a):
        return np.sum(st.multivariate_normal.logpdf(x, m, a @ a.T + np.eye(2)))

    check_grads(f, ("rev", "fwd"), order=2)(mu, c)
    g = fg.grad(lambda m: st.multivariate_normal(m, c).logpdf(x[0]))(mu)
    np.testing.assert_allclose(g, np.linalg.solve(c, x[0] - mu))
    gx = fg.grad(lambda v: st.multivariate_normal.logpdf(v, mu, np.diag([2.0, 1.0])))(x[0])
    np.testing.assert_allclose(gx, -(x[0] - mu) / [2.0, 1.0])


def test_dirichlet():
    x = np.array([[0.2, 0.3], [0.5, 0.3], [0.3, 0.4]])  # components along the first axis
    alpha = np.array([1.5, 2.0, 3.0])
    np.testing.assert_allclose(fst.dirichlet.logpdf(x, alpha), st.dirichlet.logpdf(x, alpha))
    np.testing.assert_allclose(fst.dirichlet.pdf(x[:, 0], alpha), st.dirichlet.pdf(x[:, 0], alpha))
    check_grads(lambda a: np.sum(st.dirichlet.logpdf(x, a)), ("rev", "fwd"), order=2)(alpha)
    check_grads(lambda a: st.dirichlet(a).logpdf(x[:, 1]), ("rev",), order=1)(alpha)


INVALID = {  # SciPy gives nan for each of these; a traced call must too (it gave numbers)
    "norm.cdf scale<0": lambda p: st.norm.cdf(1.0, 0.0, p),
    "norm.logpdf x=nan": lambda p: st.norm.logpdf(p * np.nan),
    "norm.sf x=nan": lambda p: st.norm.sf(p * np.nan),
    "t.logpdf df<0": lambda p: st.t.logpdf(1.0, p),
    "gamma.logpdf a<0": lambda p: st.gamma.logpdf(1.0, p),
    "gamma.logpdf scale<0": lambda p: st.gamma.logpdf(1.0, 2.0, scale=p),
    "beta.logpdf a<0": lambda p: st.beta.logpdf(0.3, p, 2.0),
    "expon.cdf scale<0": lambda p: st.expon.cdf(1.0, scale=p),
    "laplace.cdf scale<0": lambda p: st.laplace.cdf(1.0, scale=p),
    "cauchy.sf scale<0": lambda p: st.cauchy.sf(1.0, scale=p),
    "logistic.logcdf scale<0": lambda p: st.logistic.logcdf(1.0, scale=p),
    "poisson.logpmf mu<0": lambda p: st.poisson.logpmf(1, p),
    "binom.logpmf p>1": lambda p: st.binom.logpmf(1, 3, p + 3.5),
    "binom.logpmf n<0": lambda p: st.binom.logpmf(1, -3, p + 2.5),
    "binom.pmf n not whole": lambda p: st.binom.pmf(1, 2.5, p + 2.5),
}


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_parameters_give_nan_as_scipy(name):
    f = INVALID[name]
    assert np.isnan(f(-2.0))  # SciPy's own answer
    value = fg.value_and_grad(f)(-2.0)[0]
    assert np.isnan(value)
    grads = fg.grad(lambda p: np.sum(f(p) * np.ones(3)))(np.array([-2.0]))
    assert grads.shape == (1,)


def test_invalid_parameters_leave_valid_elements_alone():
    s = np.array([1.0, -1.0, 2.0])
    value = fst.norm.logpdf(1.0, 0.0, s)  # the mirror's code on plain values
    np.testing.assert_array_equal(np.isnan(value), [False, True, False])
    np.testing.assert_allclose(value[[0, 2]], st.norm.logpdf(1.0, 0.0, s[[0, 2]]))
    g = fg.grad(lambda s: np.sum(st.norm.logpdf(1.0, 0.0, s) * np.array([1.0, 0.0, 1.0])))(s)
    np.testing.assert_allclose(g[[0, 2]], (1 - s[[0, 2]] ** 2) / s[[0, 2]] ** 3)


def test_dirichlet_checks_and_the_left_out_last_component():
    alpha = np.array([1.5, 2.0, 3.0])
    for x in (np.array([0.2, 0.3]), np.array([[0.2, 0.1], [0.3, 0.5]])):  # K-1 components
        value = fg.value_and_grad(lambda a, x=x: np.sum(st.dirichlet.logpdf(x, a)))(alpha)[0]
        np.testing.assert_allclose(value, np.sum(st.dirichlet.logpdf(x, alpha)))
        check_grads(lambda x, a: np.sum(st.dirichlet.logpdf(x, a)), ("rev", "fwd"), 1)(x, alpha)
    for bad_x in (np.array([0.3, 0.3, 0.3]), np.array([-0.1, 0.5, 0.6]), np.ones(4) / 4):
        with pytest.raises(ValueError):  # SciPy's own checks, on a plain x
            fg.grad(lambda a, x=bad_x: st.dirichlet.logpdf(x, a))(alpha)
    with pytest.raises(ValueError, match="greater than 0"):
        fg.grad(lambda x: st.dirichlet.logpdf(x, -alpha))(np.array([0.2, 0.3, 0.5]))
    # traced values that fail a check: nan (raising would read the traced value)
    off_simplex = fg.value_and_grad(lambda x: st.dirichlet.logpdf(x, alpha))(np.full(3, 0.3))
    assert np.isnan(off_simplex[0])
    bad_alpha = fg.value_and_grad(lambda a: st.dirichlet.logpdf(np.full(3, 1 / 3), a))(-alpha)
    assert np.isnan(bad_alpha[0])


SUMMARIES = {  # SciPy's own code, run on traced values (it reads .device, then uses np.*)
    "skew": st.skew,
    "kurtosis": st.kurtosis,
    "moment": lambda x: st.moment(x, 3),
    "gmean": lambda x: st.gmean(np.exp(x)),
    "hmean": lambda x: st.hmean(np.exp(x)),
    "sem": st.sem,
    "entropy": lambda x: st.entropy(np.exp(x)),
    "trim_mean": lambda x: st.trim_mean(x, 0.1),
    "describe.variance": lambda x: st.describe(x).variance,
}


@pytest.mark.parametrize("name", list(SUMMARIES))
def test_scipy_stats_summaries_differentiate_through_scipys_code(name):
    x = np.random.default_rng(3).normal(size=12)
    check_grads(SUMMARIES[name], ("rev",), order=1)(x)


WRITE_IN_PLACE = {  # SciPy's code writes into its result (xpx.at): mirrors run instead
    "zscore": lambda x: st.zscore(x),
    "zscore axis=1 ddof=1": lambda x: st.zscore(x, axis=1, ddof=1),
    "zscore axis=None": lambda x: st.zscore(x, axis=None),
    "zmap": lambda x: st.zmap(x[:2], x),
    "variation": lambda x: st.variation(x + 3),
    "variation axis=None keepdims": lambda x: st.variation(x + 3, axis=None, ddof=1, keepdims=True),
    "iqr": st.iqr,
    "iqr normal": lambda x: st.iqr(x, axis=0, scale="normal"),
    "iqr rng midpoint": lambda x: st.iqr(x, 1, (10, 80), interpolation="midpoint", keepdims=True),
}


@pytest.mark.parametrize("name", list(WRITE_IN_PLACE))
def test_summaries_scipy_writes_in_place(name):
    f = WRITE_IN_PLACE[name]
    x = np.random.default_rng(5).normal(size=(6, 5))
    weights = np.arange(1.0, np.size(f(x)) + 1).reshape(np.shape(f(x)))
    seen = {}

    def loss(v):
        seen["value"] = fg.numpy.stop_gradient(f(v))
        return np.sum(f(v) * weights)

    fg.grad(loss)(x)
    np.testing.assert_allclose(seen["value"], f(x), rtol=1e-12)  # SciPy's own, on plain x
    assert np.shape(seen["value"]) == np.shape(f(x))
    check_grads(loss, ("rev", "fwd"), order=2)(x)


def test_summaries_nan_policies_and_edges():
    x = np.random.default_rng(6).normal(size=(6, 5))
    x[2, 1] = np.nan
    for f in (
        lambda v: st.zscore(v, nan_policy="omit"),
        lambda v: st.variation(v + 3, nan_policy="omit"),
        lambda v: st.iqr(v, axis=0, nan_policy="omit"),
        lambda v: st.zscore(v),  # propagate
        lambda v: st.variation(v + 3, ddof=6),  # ddof == n: ±inf, or nan for a constant slice
    ):
        got = fg.value_and_grad(lambda v, f=f: np.nansum(f(v)))(x)[0]
        np.testing.assert_allclose(got, np.nansum(f(x)), rtol=1e-12)
    with pytest.raises(ValueError, match="contains nan"):
        fg.grad(lambda v: np.sum(st.zscore(v, nan_policy="raise")))(x)
    constant = fg.value_and_grad(lambda v: np.sum(st.zscore(v)))(np.ones(4))[0]
    assert np.isnan(constant)  # SciPy: nan for a constant slice


def test_a_traced_value_has_no_buffer_and_says_so():
    for attr in ("flags", "strides", "ctypes", "data"):
        with pytest.raises(AttributeError, match=rf"no \.{attr}: it is not an ndarray"):
            fg.grad(lambda x, a=attr: np.sum(getattr(x, a)))(np.ones(3))
    assert fg.grad(lambda x: np.sum(x) if x.device == "cpu" else 0.0)(np.ones(2)).tolist() == [1, 1]


def test_a_distribution_without_a_mirror_is_named():
    with pytest.raises(TypeError, match=r"scipy\.stats\.lomax\.logpdf .*fusegrad\.scipy\.stats"):
        fg.grad(lambda s: st.lomax.logpdf(1.0, s))(0.5)


def test_plain_inputs_get_scipys_own_results():
    xs = np.linspace(-2, 2, 7)
    assert type(st.norm.logpdf(0.5)) is np.float64
    np.testing.assert_array_equal(st.norm.logpdf(xs, 0.1, 2.0), st.norm.logpdf(xs, 0.1, 2.0))
    orig = type(st.norm).__mro__[1].__dict__["logpdf"].__fusegrad_original__
    np.testing.assert_array_equal(st.norm.logpdf(xs, 0.1, 2.0), orig(st.norm, xs, 0.1, 2.0))


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jst = pytest.importorskip("jax.scipy.stats")
    for name in ("norm", "cauchy", "logistic", "laplace", "expon"):
        _, (loc, scale) = CONTINUOUS[name]
        for method in ("logpdf", "cdf"):
            f, jf = getattr(getattr(st, name), method), getattr(getattr(jst, name), method)
            ours = fg.grad(lambda m, f=f, s=scale: np.sum(f(X, m, s)))(loc)
            theirs = jax.grad(lambda m, jf=jf, s=scale: jf(X, m, s).sum())(loc)
            np.testing.assert_allclose(ours, float(theirs), rtol=1e-9, err_msg=f"{name}.{method}")
    ours = fg.grad(lambda a: np.sum(st.gamma.logpdf(X, a)))(2.5)
    theirs = jax.grad(lambda a: jst.gamma.logpdf(X, a).sum())(2.5)
    np.testing.assert_allclose(ours, float(theirs), rtol=1e-9)


@pytest.mark.parametrize("name", list(DISCRETE))
def test_discrete_moments(name):
    args = DISCRETE[name]
    dist = getattr(st, name)
    for method in ("mean", "var", "std"):
        want = getattr(dist, method)(*args, loc=1)
        got = fg.value_and_grad(lambda p, m=method: getattr(dist, m)(*args[:-1], p, loc=1))(
            float(args[-1])
        )[0]
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_multivariate_normal_allow_singular():
    # a rank-2 covariance in 3-D: SciPy's pseudo-determinant and pseudo-inverse, -inf off the
    # support (allow_singular was ignored and the Cholesky factorisation failed)
    a = np.array([[1.0, 0.5, 0.2], [0.3, -0.4, 1.0]])
    cov = a.T @ a
    x = np.array([0.5, -0.2, 0.3]) @ np.linalg.pinv(a) @ a  # in the support
    points = np.stack([x, x + np.array([1.0, 0.0, 0.0]), 2 * x])
    got = fst.multivariate_normal.logpdf(points, np.zeros(3), cov, allow_singular=True)
    want = st.multivariate_normal.logpdf(points, np.zeros(3), cov, allow_singular=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # hand-derived: d/dm of the log-density is pinv(cov) (x - m), within the support
    g = fg.grad(lambda m: st.multivariate_normal.logpdf(x, m, cov, allow_singular=True))(
        np.zeros(3)
    )
    np.testing.assert_allclose(g, np.linalg.pinv(cov) @ x, rtol=1e-9)
    # a non-singular covariance takes the Cholesky path either way
    c = np.array([[2.0, 0.3], [0.3, 1.0]])
    for singular in (False, True):
        g = fg.grad(lambda c, s=singular: st.multivariate_normal.logpdf(np.ones(2), None, c, s))(c)
        np.testing.assert_allclose(g, 0.5 * (np.linalg.solve(c, np.ones((2, 1))) @ np.linalg.solve(
            c, np.ones((2, 1))).T - np.linalg.inv(c)), rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="positive semidefinite"):
        fg.grad(lambda c: st.multivariate_normal.logpdf(np.ones(2), None, c, True))(-c)


def test_far_tails_and_edges():
    # isf as ppf(1 - q) rounded 1 - q to 1 (gumbel_r.isf(1e-300) was inf), tan(π(q - ½)) lost
    # cauchy's tails, inf - inf made rayleigh's and weibull's logpdf at +inf nan
    q = np.array([1e-300, 1e-12, 1e-6, 0.3])
    for name in ("gumbel_r", "logistic", "laplace", "cauchy"):
        dist = getattr(st, name)
        for method in ("isf", "ppf"):
            got = fg.jvp(lambda v, m=method, d=dist: getattr(d, m)(v), (q,), (np.ones(4),))[0]
            np.testing.assert_allclose(got, getattr(dist, method)(q), rtol=1e-12, err_msg=name)
    for name, shapes in (
        ("rayleigh", ()),
        ("lognorm", (0.7,)),
        ("weibull_min", (1.7,)),
        ("gamma", (2.5,)),
    ):  # SciPy: -inf on an open support, else its formula
        dist = getattr(st, name)
        x = np.array([1.0, np.inf])
        got = fg.jvp(lambda s, d=dist, sh=shapes, x=x: d.logpdf(x, *sh, scale=s), (1.3,), (1.0,))[0]
        np.testing.assert_allclose(got, dist.logpdf(x, *shapes, scale=1.3), rtol=1e-14)
    # SciPy's inverses keep the far tails: d isf / dq = -1 / pdf(isf(q)) there too
    q = np.array([1e-300, 1e-30, 0.3, 1 - 1e-12])
    for name, shapes in (("chi2", (3.0,)), ("gamma", (2.5,)), ("t", (3.5,)), ("beta", (2.0, 3.0))):
        dist = getattr(st, name)
        x = dist.isf(q, *shapes)
        got = fg.elementwise_grad(lambda u, d=dist, sh=shapes: d.isf(u, *sh))(q)
        np.testing.assert_allclose(got, -1 / dist.pdf(x, *shapes), rtol=1e-9, err_msg=name)


def test_a_list_argument_beside_a_traced_parameter():
    # SciPy takes lists; x - loc of a list raised TypeError when only a shape was traced
    for f in (lambda a: np.sum(st.gamma.logpdf([0.5, 1.0], a)),
              lambda mu: np.sum(st.poisson.logpmf([0, 1, 2], mu)),
              lambda s: np.sum(st.lognorm.ppf((0.2, 0.7), s))):  # fmt: skip
        assert fg.value_and_grad(f)(1.7)[0] == pytest.approx(f(1.7), rel=1e-12)


def test_var_with_ddof_at_the_count_is_inf_as_numpy():
    x = np.array([1.0, 2.0])
    with np.errstate(all="ignore"):
        value, g = fg.value_and_grad(lambda v: np.var(v, ddof=2))(x)  # ZeroDivisionError before
        assert np.isinf(value) and np.all(np.isinf(g))
        assert np.isinf(fg.jvp(lambda v: np.std(v, ddof=3), (x,), (np.ones(2),))[0])
        assert np.isnan(fg.value_and_grad(lambda v: st.zscore(v, ddof=1)[0])(np.ones(1))[0])


def test_discrete_entropies():
    for name, args in (("bernoulli", (0.3,)), ("geom", (0.35,)), ("binom", (6, 0.3))):
        dist = getattr(st, name)
        f = lambda p, d=dist, a=args: d.entropy(*a[:-1], p)  # noqa: E731
        np.testing.assert_allclose(fg.value_and_grad(f)(args[-1])[0], dist.entropy(*args))
        check_grads(f, ("rev", "fwd"), order=1)(args[-1])
    # hand-derived: d/dp of the Bernoulli entropy is log((1 - p) / p)
    assert fg.grad(lambda p: st.bernoulli(p).entropy())(0.3) == pytest.approx(np.log(0.7 / 0.3))


# --------------------------------------------------------------------------------------------------
# vonmises, multinomial
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [(2.0,), (0.5, 1.0), (3.0, -0.5, 2.0), (0.0,)], ids=str)
@pytest.mark.parametrize("method", ["logpdf", "pdf"])
def test_vonmises(method, params):
    x = np.linspace(-4.0, 7.0, 9)  # more than one period: SciPy's vonmises is not cut
    f = getattr(st.vonmises, method)
    seen = {}

    def loss(v, *p):
        out = f(v, *p)
        seen["value"] = fg.numpy.stop_gradient(out)
        return np.sum(out)

    fg.grad(loss)(x, *params)
    np.testing.assert_allclose(seen["value"], f(x, *params), rtol=1e-13)
    if params[0] > 0:  # (kappa = 0 is the edge of its range)
        check_grads(loss, ("rev", "fwd"), order=2)(x, *params)
    assert np.isnan(fst.vonmises.logpdf(0.5, -1.0))  # kappa < 0, as SciPy
    g = fg.grad(lambda k: np.sum(st.vonmises(k, loc=0.3).logpdf(x)))(1.5)
    assert np.isfinite(g)


def test_multinomial_logpmf_in_p():
    p = np.array([0.2, 0.3, 0.5])
    for x in ([1, 2, 3], [[1, 2, 3], [0, 0, 6], [2, 2, 2]], [1, 2, 2], [0, 3, 3]):
        for pp in (p, np.array([0.2, 0.3, 0.4]), np.array([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5],
                                                          [0.1, 0.1, 0.8]])):  # fmt: skip
            seen = {}

            def loss(q, x=x, seen=seen):
                out = st.multinomial.logpmf(x, 6, q)
                seen["value"] = fg.numpy.stop_gradient(out)
                return np.sum(out)

            with warnings.catch_warnings():  # SciPy's FutureWarning for a p off the simplex
                warnings.simplefilter("ignore", FutureWarning)
                fg.grad(loss)(pp)
                ref = st.multinomial.logpmf(x, 6, pp)
            np.testing.assert_allclose(seen["value"], ref, rtol=1e-13)
    # the probe's use: p normalised inside the function (finite differences stay on the simplex)
    w = np.linspace(0.3, 1.7, 3)
    for f in (lambda v: st.multinomial.logpmf([1, 2, 3], 6, v / np.sum(v)),
              lambda v: st.multinomial(6, v / np.sum(v)).pmf([1, 2, 3])):  # fmt: skip
        check_grads(f, ("rev", "fwd"), order=2)(w)
    # the derivative at a p on the simplex is in every entry, as JAX's
    g = fg.grad(lambda q: st.multinomial.logpmf([1, 2, 3], 6, q))(p)
    np.testing.assert_allclose(g, np.array([1, 2, 3]) / p)


@pytest.mark.slow  # JAX compiles each function on first use: seconds
def test_vonmises_multinomial_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jst = pytest.importorskip("jax.scipy.stats")
    x = np.linspace(-2.0, 2.0, 5)
    ours = fg.grad(lambda k: np.sum(st.vonmises.logpdf(x, k)))(1.7)
    theirs = jax.grad(lambda k: jst.vonmises.logpdf(x, k).sum())(1.7)
    np.testing.assert_allclose(ours, float(theirs), rtol=1e-10)
    p = np.array([0.2, 0.3, 0.5])
    ours = fg.grad(lambda q: st.multinomial.logpmf(np.array([1, 2, 3]), 6, q))(p)
    theirs = jax.grad(lambda q: jst.multinomial.logpmf(np.array([1, 2, 3]), 6, q))(p)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)

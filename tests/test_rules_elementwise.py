"""Every elementwise rule of ``rules/elementwise.py`` (and ``where``/``clip``) against finite
differences.

Each op gets inputs from a domain where it is smooth (away from kinks, poles and jumps); kinks and
ties are tested separately against JAX's choices.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.rules.elementwise import NUMPY_PARTIALS
from fusegrad.tangents import AbstractZero, NoTangent, unthunk
from fusegrad.testing import check_grads, check_rrule

sp = pytest.importorskip("scipy.special")


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _away_from_zero(rng, shape):
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _between_integers(lo, hi):
    # x = k + u with u in (lo, hi): far from the jumps of floor/ceil/trunc/rint
    return lambda rng, shape: rng.integers(-3, 4, shape) + rng.uniform(lo, hi, shape)


_POS = _uniform(0.5, 2.0)

# One domain per input. Ops missing here take standard normal inputs.
DOMAINS = {
    "divide": (_normal, _away_from_zero),
    "power": (_POS, _normal),
    "float_power": (_POS, _normal),
    "absolute": (_away_from_zero,),
    "fabs": (_away_from_zero,),
    "sqrt": (_POS,),
    "cbrt": (_away_from_zero,),
    "reciprocal": (_away_from_zero,),
    "log": (_POS,),
    "log2": (_POS,),
    "log10": (_POS,),
    "log1p": (_uniform(-0.5, 2.0),),
    "tan": (_uniform(-1.2, 1.2),),
    "arcsin": (_uniform(-0.8, 0.8),),
    "arccos": (_uniform(-0.8, 0.8),),
    "arctanh": (_uniform(-0.8, 0.8),),
    "arccosh": (_uniform(1.5, 3.0),),
    "arctan2": (_away_from_zero, _away_from_zero),
    "hypot": (_away_from_zero, _away_from_zero),
    "copysign": (_away_from_zero, _away_from_zero),
    "floor_divide": (_uniform(2.3, 2.7), _uniform(1.05, 1.1)),
    "remainder": (_uniform(2.3, 2.7), _uniform(1.05, 1.1)),
    "fmod": (_uniform(2.3, 2.7), _uniform(1.05, 1.1)),
    "floor": (_between_integers(0.2, 0.8),),
    "ceil": (_between_integers(0.2, 0.8),),
    "trunc": (_between_integers(0.2, 0.8),),
    "rint": (_between_integers(0.1, 0.4),),
    "sign": (_away_from_zero,),
    "signbit": (_away_from_zero,),
    "heaviside": (_away_from_zero, _normal),
    "logit": (_uniform(0.1, 0.9),),
    "xlogy": (_normal, _POS),
    "xlog1py": (_normal, _uniform(-0.5, 2.0)),
}

UNARY_SHAPES = [(), (5,), (2, 3, 4)]
# Broadcasting patterns; a shape of None is a Python float.
BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((3, 1), (1, 4)),
    ((), (2, 3)),
    ((2, 3), None),
    (None, (2, 3)),
]

# The ufuncs of rules/elementwise.py (SciPy's special functions have a test file of their own).
UFUNCS = sorted(NUMPY_PARTIALS, key=lambda u: u.__name__)


def _input(u, i, shape, dtype, rng):
    gen = DOMAINS.get(u.__name__, (_normal,) * u.nin)[i]
    if shape is None:
        return float(gen(rng, ()))
    return np.asarray(gen(rng, shape), dtype)


def _cases():
    for u in UFUNCS:
        shapes = [(s,) for s in UNARY_SHAPES] if u.nin == 1 else BINARY_SHAPES
        for shp in shapes:
            for dtype in (np.float64, np.float32):
                yield pytest.param(u, shp, dtype, id=f"{u.__name__}-{shp}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("ufunc, shapes, dtype", list(_cases()))
def test_check_rrule_every_elementwise_op(ufunc, shapes, dtype):
    # A stable seed: hash() of a str changes from process to process (PYTHONHASHSEED).
    rng = np.random.default_rng(zlib.crc32(repr((ufunc.__name__, shapes)).encode()))
    args = [_input(ufunc, i, s, dtype, rng) for i, s in enumerate(shapes)]
    check_rrule(ufunc, *args)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "cshape, xshape, yshape", [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), ()), ((4,), (3, 4), (1,))]
)
def test_where(cshape, xshape, yshape, dtype):
    rng = np.random.default_rng(1)
    c = rng.standard_normal(cshape) > 0
    x = rng.standard_normal(xshape).astype(dtype)
    y = rng.standard_normal(yshape).astype(dtype)
    check_rrule(np.where, c, x, y)
    check_grads(lambda x, y: np.where(c, np.sin(x), y * y))(x, y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_where_scalar_branch_and_integer_branch(dtype):
    x = np.linspace(-1, 1, 7).astype(dtype)
    g = fg.grad(lambda x: np.sum(np.where(x > 0, x * x, 0.0)))(x)
    np.testing.assert_allclose(g, np.where(x > 0, 2 * x, 0.0), rtol=1e-6)
    assert g.dtype == dtype
    check_rrule(np.where, x > 0, x, np.arange(7))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lo, hi", [(-0.5, 0.5), (None, 0.3), (-0.3, None)])
def test_clip_through_the_tracer(lo, hi, dtype):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (4, 5)).astype(dtype)
    x = np.where(np.abs(x - (lo or 0)) < 0.02, x + 0.05, x).astype(dtype)
    x = np.where(np.abs(x - (hi or 0)) < 0.02, x + 0.05, x).astype(dtype)
    check_grads(lambda x: np.clip(x, lo, hi) ** 2)(x)
    check_grads(lambda x: x.clip(lo, hi) * 3.0)(x)
    g = fg.grad(lambda x: np.sum(np.clip(x, lo, hi)))(x)
    inside = np.ones_like(x, dtype=bool)
    if lo is not None:
        inside &= x > lo
    if hi is not None:
        inside &= x < hi
    np.testing.assert_array_equal(g, inside.astype(dtype))
    assert g.dtype == dtype


def test_clip_with_array_bounds():
    rng = np.random.default_rng(3)
    x, lo, hi = rng.standard_normal((3, 4)), rng.uniform(-2, -1, (4,)), rng.uniform(1, 2, (3, 1))
    check_grads(lambda x, lo, hi: np.clip(x * 2, lo, hi))(x, lo, hi)


# ------------------------------------------------------------------ kinks and ties, vs JAX


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


KINKS = np.array([-1.0, 0.0, 0.0, 1.0, 2.0, -0.0])
OTHER = np.array([-1.0, 0.0, 1.0, 1.0, 3.0, 0.0])


@pytest.mark.parametrize(
    "name, fun",
    [
        ("maximum", lambda m, x, y: m.sum(m.maximum(x, y) * m.arange(1.0, 7.0))),
        ("minimum", lambda m, x, y: m.sum(m.minimum(x, y) * m.arange(1.0, 7.0))),
        ("maximum_scalar", lambda m, x, y: m.sum(m.maximum(x, 0.0) + m.maximum(1.0, y))),
        ("abs", lambda m, x, y: m.sum(m.abs(x) * y)),
        ("clip", lambda m, x, y: m.sum(m.clip(x, 0.0, 1.0) + m.clip(y, -1.0, 1.0))),
        ("relu", lambda m, x, y: m.sum(m.maximum(x, 0.0) * m.maximum(y, 0.0))),
    ],
)
def test_kinks_and_ties_match_jax(jax, name, fun):
    jnp = jax.numpy
    got = fg.grad(lambda x, y: fun(np, x, y), argnums=(0, 1))(KINKS, OTHER)
    want = jax.grad(lambda x, y: fun(jnp, x, y), argnums=(0, 1))(KINKS, OTHER)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), err_msg=name)


def test_documented_kink_choices():
    # maximum/minimum share a tie evenly; abs' derivative at ±0 is 1 (as JAX); clip at a bound: 1/2
    x = np.array([1.0, 2.0])
    y = np.array([1.0, 3.0])
    gx, gy = fg.grad(lambda x, y: np.sum(np.maximum(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0])
    x = np.array([-2.0, 0.0, -0.0, 3.0], np.float32)
    g = fg.elementwise_grad(np.abs)(x)
    np.testing.assert_array_equal(g, [-1, 1, 1, 1])
    assert g.dtype == np.float32
    np.testing.assert_array_equal(
        fg.elementwise_grad(lambda x: np.clip(x, 0.0, 1.0))(np.array([0.0, 0.5, 1.0, 2.0])),
        [0.5, 1.0, 0.5, 0.0],
    )


def test_power_zero_has_zero_derivative_also_at_zero(engine):
    # x**0 is the constant 1: derivative 0 everywhere (JAX: 0; b·x^(b-1) would be 0·inf = nan).
    x = np.array([0.0, -0.0, 2.0, -3.0])
    for f in (
        lambda x: np.sum(x**0),
        lambda x: np.sum(x**0.0),
        lambda x: np.sum(np.power(x, np.zeros(4))),
        lambda x: np.sum(np.power(x, np.array([0.0, 0.0, 2.0, 1.0]))),
        lambda x: np.sum(np.float_power(x, 0.0)),
    ):
        g = fg.grad(f)(x)
        assert np.all(np.isfinite(g)), g
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(x**0))(x), np.zeros(4))
    np.testing.assert_array_equal(
        fg.grad(lambda x: np.sum(np.power(x, np.array([0.0, 0.0, 2.0, 1.0]))))(x),
        [0.0, 0.0, 4.0, 1.0],
    )
    assert fg.grad(lambda x: x**0)(0.0) == 0.0
    _, t = fg.jvp(lambda x: x**0, (np.zeros(3),), (np.ones(3),))
    np.testing.assert_array_equal(t, np.zeros(3))
    assert fg.grad(lambda x: x**1)(0.0) == 1.0  # b·x^(b-1) elsewhere, unchanged


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf on purpose
def test_logaddexp_at_plus_infinity(engine):
    # d/da logaddexp(a, b) = 1 at a = +inf (JAX: 1; exp(a - y) would be exp(inf - inf) = nan).
    inf = np.inf
    a = np.array([inf, inf, 1.0, -inf, 0.0])
    b = np.array([1.0, inf, inf, 2.0, 0.0])
    for f, half in ((np.logaddexp, 0.5), (np.logaddexp2, 0.5)):
        ga, gb = fg.grad(lambda a, b, f=f: np.sum(f(a, b)), argnums=(0, 1))(a, b)
        np.testing.assert_array_equal(ga, [1.0, 1.0, 0.0, 0.0, half])
        np.testing.assert_array_equal(gb, [0.0, 1.0, 1.0, 1.0, half])
    assert fg.grad(np.logaddexp)(inf, 0.0) == 1.0
    assert fg.grad(lambda x: np.logaddexp(0.0, x))(inf) == 1.0
    _, t = fg.jvp(lambda a: np.logaddexp(a, 1.0), (np.array([inf, 0.0]),), (np.ones(2),))
    np.testing.assert_allclose(t, [1.0, 1 / (1 + np.e)])


@pytest.mark.parametrize("f, log, edge", [("xlogy", np.log, 0.0), ("xlog1py", np.log1p, -1.0)])
def test_xlogy_slopes_where_a_is_zero(engine, path, f, log, edge):
    # a log(b) at a = 0: its slope in a is log(b) (a cross-entropy's zero target probability,
    # a gamma density's shape 1), not 0; in b it is 0 for every b, b = 0 included (not 0/0).
    # Only where a = 0 and b <= edge (no finite slope) is the slope in a taken as 0.
    fun = getattr(sp, f)
    a = np.array([0.0, 0.0, 0.0, 1.5, -0.0])
    b = np.array([0.5, 0.0, -0.5, 0.5, 2.0]) + edge
    ga, gb = fg.grad(lambda a, b: np.sum(fun(a, b)), argnums=(0, 1))(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        want_a = np.where([1, 0, 0, 1, 1], log(b), 0.0)
    np.testing.assert_allclose(ga, want_a, rtol=1e-15)
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0, 1.5 / (0.5 - 0.0), 0.0], rtol=1e-15)
    h = 1e-6  # and the slope in a at a = 0 is the central difference's
    fd = (fun(h, b[0]) - fun(-h, b[0])) / (2 * h)
    np.testing.assert_allclose(ga[0], fd, rtol=1e-8)
    _, t = fg.jvp(lambda a: fun(a, b), (np.zeros(5),), (np.ones(5),))
    np.testing.assert_allclose(t, np.where([1, 0, 0, 1, 1], want_a, 0.0), rtol=1e-15)


def test_heaviside_slope_in_h0_is_one_where_x_is_zero(engine, path):
    # heaviside(x, h0) is h0 where x = 0: its derivative in h0 there is 1 (it was 0)
    x = np.array([-1.0, 0.0, 2.0, -0.0, np.inf])
    np.testing.assert_array_equal(
        fg.grad(lambda h: np.sum(np.heaviside(x, h)))(np.full(5, 0.5)), [0, 1, 0, 1, 0]
    )
    assert fg.grad(lambda h: np.sum(np.heaviside(x, h)))(0.5) == 2.0
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(np.heaviside(x, 0.5)))(x), np.zeros(5))


def test_gamma_and_beta_densities_at_shape_one():
    # d/da gamma.logpdf(x, a) = log x - digamma(a), smooth through a = 1 (xlogy(a - 1, x))
    st = pytest.importorskip("scipy.stats")
    x = 2.0
    for a in (0.999, 1.0, 1.001):
        got = fg.grad(lambda a: st.gamma.logpdf(x, a))(a)
        np.testing.assert_allclose(got, np.log(x) - sp.digamma(a), rtol=1e-12)
    got = fg.grad(lambda ab: st.beta.logpdf(0.3, ab[0], ab[1]))(np.ones(2))
    want = np.log([0.3, 0.7]) - sp.digamma(1.0) + sp.digamma(2.0)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf on purpose
def test_power_and_logaddexp_edges_match_jax(jax):
    jnp = jax.numpy
    x = np.array([0.0, 2.0])
    g = fg.grad(lambda x: np.sum(x**0))(x)
    np.testing.assert_array_equal(g, np.asarray(jax.grad(lambda x: jnp.sum(x**0))(x)))
    assert fg.grad(np.logaddexp)(np.inf, 1.0) == float(jax.grad(jnp.logaddexp)(np.inf, 1.0))


# ------------------------------------------------------------------ non-differentiable ops


@pytest.mark.parametrize("u", [np.floor, np.ceil, np.rint, np.trunc, np.sign])
def test_piecewise_constant_ops_have_zero_gradient(u):
    x = np.array([-1.7, -0.2, 0.4, 2.6])
    y, pb = fg.rrule(u, x)
    (g,) = pb(np.ones(4))
    g = unthunk(g)
    assert isinstance(g, AbstractZero) and not isinstance(g, NoTangent)
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(u(x) * x))(x), u(x))
    np.testing.assert_array_equal(fg.elementwise_grad(u)(x), np.zeros(4))


@pytest.mark.parametrize("u", [np.greater, np.less_equal, np.equal, np.not_equal, np.logical_and])
def test_comparisons_have_zero_gradient_and_noTangent_for_non_float(u):
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.0, -1.0, 0.0])
    _, pb = fg.rrule(u, x, y)
    gx, gy = (unthunk(g) for g in pb(np.ones(3)))
    assert isinstance(gx, AbstractZero) and not isinstance(gx, NoTangent)
    assert isinstance(gy, AbstractZero) and not isinstance(gy, NoTangent)
    _, pb = fg.rrule(np.add, x, np.arange(3))
    gx, gi = pb(np.ones(3))
    assert isinstance(gi, NoTangent)
    np.testing.assert_array_equal(unthunk(gx), np.ones(3))
    # a comparison inside a differentiated function contributes nothing, and nothing breaks
    g = fg.grad(lambda x: np.sum(u(x, y) * x))(x)
    np.testing.assert_array_equal(g, u(x, y).astype(float))


def test_every_ufunc_of_the_table_is_reachable_through_the_tracer():
    rng = np.random.default_rng(5)
    for u in UFUNCS:
        args = [_input(u, i, (3,), np.float64, rng) for i in range(u.nin)]
        out = u(*args)
        if not np.issubdtype(np.result_type(out), np.inexact):
            continue

        def f(*xs, u=u):
            return np.sum(u(*xs) * np.arange(1.0, 4.0))

        check_grads(f)(*args)


def test_scalar_rule_declares_both_directions(monkeypatch, engine):
    """One ``scalar_rule`` entry gives the reverse and the forward rule (and so grad, jvp and
    hvp), from the partials alone."""
    from fusegrad.rules import registry
    from fusegrad.rules.elementwise import PARTIALS

    u = np.logaddexp2
    monkeypatch.setitem(registry.RRULES, u, registry.RRULES[u])
    monkeypatch.setitem(registry.FRULES, u, registry.FRULES[u])
    monkeypatch.setitem(PARTIALS, u, PARTIALS[u])
    del registry.FRULES[u]
    calls = []

    def da(a, b, y):
        calls.append("a")
        return np.exp2(a - y)

    fg.scalar_rule(u, da, lambda a, b, y: np.exp2(b - y))
    assert u in registry.FRULES
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    want = 2.0**a / (2.0**a + 2.0**b)
    g = fg.grad(lambda a: np.sum(u(a, b)))(a)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    _, t = fg.jvp(lambda a: u(a, b), (a,), (np.ones(5),))
    np.testing.assert_allclose(np.asarray(t), want, rtol=1e-12)
    h = np.asarray(fg.hvp(lambda a: np.sum(u(a, b)), (a,), (np.ones(5),)))
    np.testing.assert_allclose(h, np.log(2.0) * want * (1 - want), rtol=1e-10)
    assert calls  # the new partial was the one used


def test_every_fused_ufunc_is_declared_with_its_derivatives():
    """Each ufunc of the lazy IR's op table has both rules, declared in one entry with its op
    (``elementwise_op``): the partials of all but ``conj``, whose rules are written by hand."""
    from fusegrad.lazy import ops
    from fusegrad.rules import registry
    from fusegrad.rules.elementwise import PARTIALS

    fused = set(ops.BY_UFUNC)
    assert {np.tanh, np.add, np.isnan, sp.expit, np.conjugate} <= fused
    assert not {u.__name__ for u in fused - set(registry.RRULES)}
    assert not {u.__name__ for u in fused - set(registry.FRULES)}
    assert {u.__name__ for u in fused - set(PARTIALS)} == {"conjugate"}
    assert fused - {np.conjugate} <= NUMPY_PARTIALS  # declared in rules/elementwise.py


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_a_pole_at_a_python_float_is_numpys_infinity_not_zero_division():
    # the partials ran on Python floats: 1 / 0.0 raised ZeroDivisionError where a float64
    # argument gave inf, as NumPy does
    for f, x, want in [
        (np.log, 0.0, np.inf),
        (lambda x: 1 / x, 0.0, -np.inf),
        (np.arctanh, 1.0, np.inf),
        (sp.logit, 0.0, np.inf),
        (sp.logit, 1.0, np.inf),
    ]:
        assert fg.grad(f)(x) == want
        assert fg.grad(f)(np.float64(x)) == want
        jitted = fg.jit(fg.grad(f))
        assert jitted(x) == want and jitted(x) == want


def test_expm1_slope_far_below_zero():
    # y + 1 lost e^x: 0 at -40 (it is 4.2e-18), 2e-8 off at -20
    x = np.array([-40.0, -20.0, -1e-3, 3.0])
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(np.expm1(v)))(x), np.exp(x), rtol=1e-15)


def test_hypot_at_the_origin_has_a_zero_derivative():
    # a / hypot(a, b) was 0/0 there: a NaN that poisoned every gradient summed with it
    import fusegrad as fg
    from fusegrad.testing import check_grads

    a = np.array([0.5, -1.0])
    g = fg.grad(lambda v: np.sum(np.hypot(0 * v, 0 * v)) + np.sum(v))(a)
    np.testing.assert_array_equal(g, [1.0, 1.0])
    assert fg.grad(lambda x: np.hypot(x, 0.0))(0.0) == 0.0
    check_grads(lambda u, v: np.sum(np.hypot(u, v)), ("rev", "fwd"), order=2)(a, a[::-1] + 0.3)

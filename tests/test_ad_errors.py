"""Every error of the AD engine names the operation and the fix; control flow on values works."""

from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ad import conversions
from fusegrad.ad.core import NoRuleError
from fusegrad.testing import check_grads

X = np.array([0.5, -1.0, 2.0])


def test_asarray_of_a_traced_value():
    # np.asarray stays traced inside traces (fusegrad.ad.conversions); NumPy's own function, as
    # code that imported it by name holds it, refuses a traced value and names the fix
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(np.asarray(x) * 2))(X), np.full(3, 2.0))
    numpy_asarray = conversions.ORIGINALS["asarray"]
    with pytest.raises(TypeError, match=r"converted to a NumPy array.*gradient would be lost"):
        fg.grad(lambda x: np.sum(numpy_asarray(x) * 2))(X)
    with pytest.raises(TypeError, match=r"fusegrad\.numpy\.stop_gradient"):
        fg.grad(lambda x: np.sum(numpy_asarray(x) * 2))(X)


@pytest.mark.parametrize("conv", [float, int, complex])
def test_python_number_of_a_traced_value(conv):
    with pytest.raises(
        TypeError, match=rf"{conv.__name__}\(\) of a traced value cuts its gradient"
    ):
        fg.grad(lambda x: np.sum(x) * conv(x[0]))(X)
    with pytest.raises(TypeError, match=r"fusegrad\.numpy\.stop_gradient\(x\)"):
        fg.grad(lambda x: conv(np.sum(x)))(X)


def test_stop_gradient_is_the_fix_for_conversions():
    g = fg.grad(lambda x: np.sum(x) * float(fnp.stop_gradient(x[0])))(X)
    np.testing.assert_allclose(g, np.full(3, 0.5))
    g = fg.grad(lambda x: np.sum(x * np.asarray(fnp.stop_gradient(x))))(X)
    np.testing.assert_allclose(g, X)
    # all levels: nested traces
    gg = fg.grad(lambda x: fg.grad(lambda y: y * fnp.stop_gradient(x) * y)(x))(3.0)
    assert gg == pytest.approx(6.0)  # d/dx (2 * x * c) with c held constant
    assert fnp.stop_gradient(X) is X and fnp.stop_gradient(2.0) == 2.0


@pytest.mark.parametrize(
    "fun, f, name",
    [
        (lambda x: np.sum(np.roots(x)), np.roots, "np.roots"),
        (
            lambda x: np.sum(np.linalg.slogdet(np.outer(x, x) + 1.0)[1]),
            np.linalg.slogdet,
            "np.linalg.slogdet",
        ),
    ],
)
def test_function_without_a_rule(fun, f, name, monkeypatch):
    # Every NumPy function this suite could name will get a rule one day: take the rule away.
    from fusegrad.rules import registry

    monkeypatch.delitem(registry.RRULES, f)
    monkeypatch.delitem(registry.FRULES, f, raising=False)
    with pytest.raises(NoRuleError) as info:
        fg.grad(fun)(X)
    msg = str(info.value)
    assert f"no reverse rule for {name}" in msg
    assert f"@fusegrad.register_rrule({name})" in msg
    assert "pullback" in msg
    assert isinstance(info.value, TypeError)


def test_registering_a_rule_fixes_it():
    numpy_asarray = conversions.ORIGINALS["asarray"]

    def double(x):
        return numpy_asarray(x) * 2.0

    with pytest.raises(TypeError):
        fg.grad(lambda x: np.sum(double(x)))(X)

    my_double = fg.primitive(double)  # calls on traced values use its rule

    @fg.register_rrule(my_double)
    def _(x):
        return double(x), lambda dy: (2.0 * dy,)

    np.testing.assert_allclose(fg.grad(lambda x: np.sum(my_double(x)))(X), np.full(3, 2.0))


def test_in_place_assignment():
    def f(x):
        x[0] = 1.0
        return np.sum(x)

    with pytest.raises(TypeError, match=r"in-place assignment into a traced array.*np\.where"):
        fg.grad(f)(X)


@pytest.mark.parametrize("part,fix", [("real", "v + 1j"), ("imag", "np.real(x) + 1j")])
def test_assigning_the_real_or_imaginary_part(part, fix):
    def f(z):
        w = z * 2
        setattr(w, part, 0.0)  # NumPy writes in place; a traced array cannot
        return np.sum(np.abs(w))

    with pytest.raises(TypeError, match=rf"x\.{part} of a traced array.*x = {re.escape(fix)}"):
        fg.grad(f)(np.array([1 + 1j, 2 - 1j]))


def test_ufunc_out_argument():
    with pytest.raises(TypeError, match=r"np\.sin\(\.\.\., out=\.\.\.\).*drop out="):
        fg.grad(lambda x: np.sum(np.sin(x, out=np.empty(3))))(X)


OUT_CASES = {
    "take": lambda a, buf: np.take(a, [2, 1, 0], out=buf),
    "take-positional": lambda a, buf: np.take(a, [2, 1, 0], None, buf),
    "cumsum": lambda a, buf: np.cumsum(a, out=buf),
    "dot": lambda a, buf: np.dot(np.eye(3), a, buf),
    "einsum": lambda a, buf: np.einsum("i,i->i", a, np.ones(3), out=buf),
    "concatenate": lambda a, buf: np.concatenate([a[:1], a[1:]], out=buf),
    "clip": lambda a, buf: np.clip(a, 0.0, 1.0, out=buf),
    "choose": lambda a, buf: np.choose([0, 1, 0], [a, 2 * a], out=buf),
    "compress": lambda a, buf: np.compress([True, True, True], a, out=buf),
}


@pytest.mark.parametrize("name", list(OUT_CASES))
def test_array_functions_writing_out_are_refused(name):
    # a traced value written into a plain buffer: the buffer held the value and the gradient
    # was silently zero, clip/choose/compress never wrote it, and forward mode wrote the
    # tangent over the returned value
    f = OUT_CASES[name]
    with pytest.raises(TypeError, match=r"\(\.\.\., out=\.\.\.\).*drop out="):
        fg.grad(lambda a: np.sum(f(a, np.empty(3))))(X)
    with pytest.raises(TypeError, match=r"out=.*drop out="):
        fg.jvp(lambda a: f(a, np.empty(3)), (X,), (np.ones(3),))
    np.argmax(X, out=np.empty((), np.intp))  # (no derivative: a plain call, as NumPy's)
    buf = np.empty((), np.intp)
    fg.grad(lambda a: np.sum(a) + 0 * np.argmax(a, out=buf))(X)
    assert buf == np.argmax(X)


def test_grad_of_a_non_scalar_output():
    with pytest.raises(TypeError, match=r"grad needs a scalar output.*shape \(3,\)") as info:
        fg.grad(lambda x: x * 2)(X)
    for name in ("fusegrad.vjp", "fusegrad.elementwise_grad", "fusegrad.jacobian"):
        assert name in str(info.value)
    with pytest.raises(TypeError, match="scalar output"):
        fg.value_and_grad(lambda x: (np.sum(x), np.sum(x)))(X)
    # a one-element array is not a scalar (as in JAX): the message says to index or sum it
    with pytest.raises(TypeError, match=r"shape \(1,\): index it \(out\[0\]\) or sum it"):
        fg.grad(lambda x: x[:1] * 3.0)(X)
    np.testing.assert_allclose(fg.grad(lambda x: x[:1][0] * 3.0)(X), [3.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "value, dtype",
    [(np.arange(3), "int64"), (np.ones(3, bool), "bool"), (3, "int"), (True, "bool")],
)
def test_gradient_of_an_integer_or_bool_input(value, dtype):
    with pytest.raises(TypeError, match=rf"argument 0 of .* has dtype {dtype}.*no derivative"):
        fg.grad(lambda x: np.sum(x * 2.0))(value)
    with pytest.raises(TypeError, match=r"leave it out of argnums"):
        fg.grad(lambda y, x: np.sum(x * y), argnums=(0, 1))(X, value)
    # not differentiated: fine
    fg.grad(lambda y, x: np.sum(x * y))(X, value)


def test_integer_leaf_inside_a_pytree():
    with pytest.raises(TypeError, match=r"holds a leaf 3 of dtype int.*Make it a float"):
        fg.grad(lambda p: p["w"] * 2.0)({"w": 1.0, "n": 3})


def test_an_unregistered_class_is_named_with_the_fix():
    class Params:
        w = np.ones(2)

    with pytest.raises(TypeError, match=r"is a Params.*register_pytree_node\(Params"):
        fg.grad(lambda p: np.sum(p.w))(Params())
    with pytest.raises(TypeError, match=r"holds a Params"):
        fg.grad(lambda p: np.sum(p["a"].w))({"a": Params()})


@pytest.mark.parametrize("who", ["jvp", "hvp"])
def test_bare_arrays_for_primals_and_tangents_are_refused(who):
    f = getattr(fg, who)
    with pytest.raises(TypeError, match=rf"{who} takes its primals as a tuple or list"):
        f(lambda x: np.sum(x**3), np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match=rf"{who} takes its tangents as a tuple or list"):
        f(lambda x: np.sum(x**3), (np.ones(3),), np.ones(3))


@pytest.mark.parametrize("argnums", [1, -2, (0, 1), (3,)])
def test_argnums_out_of_range(argnums):
    with pytest.raises(ValueError, match=r"argnums=.* is out of range .* 1 positional argument"):
        fg.grad(lambda x: np.sum(x), argnums=argnums)(X)
    with pytest.raises(ValueError, match="out of range"):
        fg.value_and_grad(lambda x: np.sum(x), argnums=argnums)(X)
    with pytest.raises(ValueError, match="out of range"):
        fg.elementwise_grad(lambda x: x, argnums=argnums)(X)
    with pytest.raises(ValueError, match="out of range"):
        fg.jacobian(lambda x: x, argnums=argnums)(X)


def test_np_array_of_traced_values_points_to_the_fix():
    g = fg.grad(lambda x: np.sum(np.array([x[0], x[1] * 2])))(X)  # traced inside traces
    np.testing.assert_allclose(g, [1.0, 2.0, 0.0])
    numpy_array = conversions.ORIGINALS["array"]
    with pytest.raises(TypeError) as info:
        fg.grad(lambda x: np.sum(numpy_array([x[0], x[1] * 2])))(X)
    msg = str(info.value)
    assert "fusegrad.numpy.array" in msg and "np.stack" in msg
    g = fg.grad(lambda x: np.sum(fnp.array([x[0], x[1] * 2])))(X)
    np.testing.assert_allclose(g, [1.0, 2.0, 0.0])
    g = fg.grad(lambda x: np.sum(np.stack([x[0], x[1] * 2])))(X)
    np.testing.assert_allclose(g, [1.0, 2.0, 0.0])


def test_fusegrad_numpy_array():
    def f(x):
        m = fnp.array([[x[0], 1.0], [x[1] * x[2], x[0] ** 2]])
        return np.sum(m @ np.array([1.0, 2.0]))

    np.testing.assert_allclose(fg.grad(f)(X), [1 + 4 * X[0], X[2], X[1]])
    check_grads(f)(X)
    x32 = X.astype(np.float32)
    g = fg.grad(lambda x: np.sum(fnp.array([x[0], x[1]], dtype=np.float64)))(x32)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(fnp.array([[1, 2]], dtype=float), np.array([[1.0, 2.0]]))


def test_control_flow_on_concrete_values_works():
    def f(x):
        if x.sum() > 0:
            return np.sum(x * x)
        return np.sum(-x)

    np.testing.assert_allclose(fg.grad(f)(X), 2 * X)
    np.testing.assert_allclose(fg.grad(f)(-X), -np.ones(3))

    def loop(x):
        y = x
        while np.max(np.abs(y)) > 0.1:
            y = y / 2
        return np.sum(y)

    np.testing.assert_allclose(fg.grad(loop)(X), np.full(3, 1 / 32))

    def branch(x):
        return np.sum(x * 3 if np.any(x > 0) and not np.all(np.isnan(x)) else x)

    np.testing.assert_allclose(fg.grad(branch)(X), np.full(3, 3.0))

    # functions of indices and booleans run on the values
    np.testing.assert_allclose(fg.grad(lambda x: x[np.argmax(x)] * 2)(X), [0.0, 0.0, 2.0])
    np.testing.assert_allclose(fg.grad(lambda x: x[x.argmin()] + x[x.argsort()[1]])(X), [1, 1, 0])
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(x[np.nonzero(x > 0)]))(X), [1, 0, 1])
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(x) * (1 + np.any(x > 1)))(X), [2, 2, 2])
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(np.copy(x) * x.copy()))(X), 2 * X)


def test_methods_of_a_comparison_result():
    def f(x):
        return np.sum(x * 3 if (x > 0).any() and (x > -5).all() else x)

    np.testing.assert_allclose(fg.grad(f)(X), np.full(3, 3.0))


def test_item_and_tolist_cut_the_gradient():
    with pytest.raises(TypeError, match=r"item\(\) of a traced value"):
        fg.grad(lambda x: x[0].item() * x[1])(X)
    with pytest.raises(TypeError, match=r"tolist\(\) of a traced value"):
        fg.grad(lambda x: np.sum(x.tolist()))(X)


def test_bad_cotangents_and_has_aux():
    _, f_vjp = fg.vjp(np.sin, X)
    with pytest.raises(ValueError, match=r"cotangent has shape \(4,\) but the output has shape"):
        f_vjp(np.ones(4))
    # a complex cotangent of a real output: its imaginary part was dropped without a word
    with pytest.raises(TypeError, match=r"cotangent is complex \(complex128\) but the output"):
        f_vjp(1j * np.ones(3))
    _, c_vjp = fg.vjp(lambda x: x * (1 + 1j), X)
    np.testing.assert_allclose(c_vjp(np.ones(3, complex))[0], np.ones(3))  # complex: fine
    with pytest.raises(TypeError, match=r"has_aux=True needs .* pair"):
        fg.grad(lambda x: np.sum(x), has_aux=True)(X)


def test_reduction_where_with_a_mask_computed_from_the_traced_value():
    # refused before (tests/test_masked_reductions.py has the rest)
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(x, where=x > 0))(X), (X > 0) * 1.0)


MASKED_OPERAND = r"an operand of np.multiply beside a traced value is a numpy.ma.MaskedArray"


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix, on purpose
def test_masked_matrix_and_object_operands_are_refused_not_silently_wrong():
    # a masked array, a matrix or an object array beside a traced value: the mask was ignored
    # (value 50 where NumPy gives 10, and a gradient matching neither), the object array gave
    # a zero gradient
    x = np.array([1.0, 2.0])
    masked = np.ma.array([10.0, 20.0], mask=[0, 1])
    with pytest.raises(TypeError, match=MASKED_OPERAND):
        fg.value_and_grad(lambda x, w: np.sum(x * w))(x, masked)
    with pytest.raises(TypeError, match=r"traced value is a numpy.matrix, whose \* means"):
        fg.grad(lambda x: np.sum(x * np.matrix([[1.0, 2.0]])))(x)
    with pytest.raises(TypeError, match=r"dtype object .* \.astype\(float\)"):
        fg.grad(lambda x: np.sum(x * np.array([1.0, 2.0], dtype=object)))(x)
    with pytest.raises(TypeError, match=MASKED_OPERAND):
        fg.jvp(lambda x: x * masked, (x,), (np.ones(2),))
    with pytest.raises(TypeError, match=r"a tangent is a numpy.ma.MaskedArray"):
        fg.jvp(lambda x: x * 2.0, (x,), (masked,))
    with pytest.raises(TypeError, match=r"the cotangent is a numpy.ma.MaskedArray"):
        fg.vjp(lambda x: x * 2.0, x)[1](masked)
    # plain arrays and the filled masked array are fine
    assert fg.grad(lambda x: np.sum(x * masked.filled(0.0)))(x).tolist() == [10.0, 0.0]


def test_a_leaked_tracer_is_an_error():
    # a tracer kept from inside grad went on computing, and a later grad returned it as a
    # "gradient" (JAX: UnexpectedTracerError)
    leak = []

    def f(x):
        leak.append(x)
        return np.sum(x)

    fg.grad(f)(np.ones(2))
    with pytest.raises(TypeError, match=r"np.multiply got a traced value of a differentiation"):
        np.sum(leak[0] * 2)
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        fg.grad(lambda y: np.sum(leak[0] * y))(np.ones(2))
    fg.value_and_grad(lambda x, y: (leak.append(y), np.sum(x * y))[1], argnums=(0, 1))(
        np.ones(2), np.ones(2)
    )
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        leak[-1] + 1.0


def test_a_leaked_forward_tracer_is_an_error():
    # one kept from inside jvp: a later jvp returned tracers as its outputs, a later grad
    # returned one as the gradient
    leak = []
    fg.jvp(lambda x: (leak.append(x), np.sin(x))[1], (np.ones(3),), (np.ones(3),))
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        leak[0] * 2
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        fg.jvp(lambda y: y * leak[0], (np.ones(3),), (np.ones(3),))
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        fg.grad(lambda y: np.sum(y * leak[0]))(np.ones(3))
    with pytest.raises(ZeroDivisionError):  # a call that raises leaks its tracers too
        fg.jvp(lambda x: (leak.append(x), 1 / 0)[1], (np.ones(3),), (np.ones(3),))
    with pytest.raises(TypeError, match=r"a leaked tracer"):
        np.exp(leak[-1])


def test_elementwise_grad_refuses_what_has_no_real_derivative():
    # a complex or a string output gave zeros, an int input None
    with pytest.raises(TypeError, match=r"real array output, but the function returned dtype c"):
        fg.elementwise_grad(lambda x: x * 1j)(np.ones(2))
    with pytest.raises(TypeError, match=r"returned str"):
        fg.elementwise_grad(lambda x: "oops")(np.ones(2))
    with pytest.raises(TypeError, match=r"argument 0 of elementwise_grad has dtype int64"):
        fg.elementwise_grad(np.sin)(np.arange(3))
    np.testing.assert_array_equal(fg.elementwise_grad(np.sin)(np.zeros(2)), [1.0, 1.0])


def test_polygamma_order_has_no_derivative():
    sp = pytest.importorskip("scipy.special")
    from fusegrad.rules.special import NoDerivativeError

    with pytest.raises(NoDerivativeError, match=r"polygamma in its order n"):
        fg.grad(lambda n: sp.polygamma(n, 2.0))(1.0)  # (it was silently 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # n = 0's unused branch was zeta(1, x) = inf: a warning
        assert fg.grad(lambda x: sp.polygamma(0, x))(2.0) == pytest.approx(sp.polygamma(1, 2.0))


@pytest.mark.parametrize("size", [3, 3000])  # eager small path and lazy path
def test_a_malformed_rule_says_what_a_rule_returns(size):
    def rule_with(ret):
        @fg.primitive
        def f(x):
            return np.sin(x)

        fg.register_rrule(f)(lambda x: ret(x))
        return f

    forgot_pullback = rule_with(lambda x: np.sin(x))
    none_cotangents = rule_with(lambda x: (np.sin(x), lambda dy: None))
    bare_cotangent = rule_with(lambda x: (np.sin(x), lambda dy: dy * np.cos(x)))
    x = np.ones(size)
    with pytest.raises(TypeError, match=r"returns a pair \(y, pullback\)"):
        fg.grad(lambda x: np.sum(forgot_pullback(x)))(x)
    with pytest.raises(TypeError, match=r"returns a pair \(y, pullback\)"):  # 2 values unpack
        fg.grad(lambda x: np.sum(forgot_pullback(x)))(np.ones(2))
    for f in (none_cotangents, bare_cotangent):
        with pytest.raises(TypeError, match="one cotangent per positional argument"):
            fg.grad(lambda x, f=f: np.sum(f(x)))(x)


def test_scalar_rule_of_a_python_function_and_hessian_of_a_complex_input_say_why():
    @fg.primitive
    def softplus(a):
        return np.log1p(np.exp(a))

    with pytest.raises(TypeError, match="scalar_rule takes a NumPy ufunc.*register_rrule"):
        fg.scalar_rule(softplus, lambda a, y: 1 / (1 + np.exp(-a)))
    with pytest.raises(TypeError, match="hessian got a complex argument 0"):
        fg.hessian(lambda z: np.sum(np.abs(z) ** 2))(np.ones(3) + 1j)


def test_round_and_divmod_of_traced_values():
    for f in (fg.grad, lambda f: lambda x: fg.jvp(f, (x,), (1.0,))[1]):
        assert f(lambda a: round(a) * a)(2.7) == 3.0
        assert f(lambda a: divmod(a, 1.0)[1] + divmod(5.0, a)[0])(2.7) == 1.0


def test_riemann_zeta_in_its_argument_is_named():
    import scipy.special as sp

    from fusegrad.rules.special import NoDerivativeError

    # its error named SciPy's private ufunc scipy.special._riemann_zeta
    with pytest.raises(NoDerivativeError, match=r"Riemann zeta function scipy\.special\.zeta"):
        fg.grad(lambda s: sp.zeta(s))(3.0)
    assert fg.grad(lambda q: sp.zeta(3.0, q))(2.0) == pytest.approx(-3 * sp.zeta(4.0, 2.0))


@pytest.mark.parametrize("write", ["setitem", "fill"])
def test_writing_a_traced_value_into_a_plain_array_gets_a_note(write):
    # NumPy's own words ("setting an array element with a sequence") get a note saying what
    # happened and what to build instead
    def f(a):
        y = np.zeros(3)
        if write == "setitem":
            y[0] = a[0]
        else:
            y.fill(a[0])
        return np.sum(y)

    with pytest.raises(ValueError) as info:
        fg.grad(f)(X)
    if sys.version_info >= (3, 11):
        assert "written into a plain NumPy array" in info.value.__notes__[0]


def test_ufunc_at_names_a_differentiable_form():
    idx = np.array([0, 0, 2])

    def f(a):
        y = np.zeros(3)
        np.add.at(y, idx, a)
        return np.sum(y)

    with pytest.raises(TypeError, match=r"np\.add\.at\(a, indices, b\) writes.*np\.bincount"):
        fg.grad(f)(X)
    # the suggested form: the same values, differentiable in b
    y = np.zeros(3)
    np.add.at(y, idx, X)
    value = fg.value_and_grad(lambda a: np.sum(np.bincount(idx, weights=a, minlength=3) ** 2))(X)
    np.testing.assert_allclose(value[0], np.sum(y**2))


def test_traced_keyword_arguments():
    # a pullback returns positional cotangents only: a traced keyword argument got none (a
    # silently zero gradient). Where the signature takes it by position it is moved there;
    # keyword-only, it is an error naming the argument.
    xs, xp, fp = np.linspace(0, 1, 5), np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, 0.0])
    by_keyword = fg.grad(lambda f: np.sum(np.interp(xs, xp, fp=f)))(fp)
    np.testing.assert_allclose(by_keyword, fg.grad(lambda f: np.sum(np.interp(xs, xp, f)))(fp))
    np.testing.assert_allclose(by_keyword, [1.5, 2.0, 1.5])
    _, dot = fg.jvp(lambda f: np.interp(xs, xp, fp=f), (fp,), (np.ones(3),))
    np.testing.assert_allclose(dot, np.ones(5))

    @fg.primitive
    def scaled(x, *, scale):
        return x * scale

    @fg.register_rrule(scaled)
    def _(x, *, scale):
        return x * scale, lambda dy: (dy * scale,)

    with pytest.raises(TypeError, match=r"keyword argument 'scale'.*pass it positionally"):
        fg.grad(lambda s: np.sum(scaled(X, scale=s)))(3.0)

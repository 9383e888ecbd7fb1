"""fusegrad.rules.registry: registering, looking up, opting out, and the pullback wrapper."""

import numpy as np
import pytest

from fusegrad.rules.registry import (
    frule,
    has_rrule,
    opt_out,
    primitive,
    register_frule,
    register_rrule,
    rrule,
)
from fusegrad.tangents import NoTangent, Thunk, ZeroTangent


@primitive  # (a plain function's rule would never be called by grad)
def square(x):
    return x * x


CALLS = []


@register_rrule(square)
def _square_rrule(x):
    def pullback(dy):
        CALLS.append(dy)
        return (2 * x * dy,)

    return x * x, pullback


@register_frule(square)
def _square_frule(tangents, x):
    return x * x, 2 * x * tangents[0]


def test_rrule_returns_value_and_pullback():
    y, pb = rrule(square, np.array([1.0, 2.0]))
    assert np.array_equal(y, [1.0, 4.0])
    (dx,) = pb(np.ones(2))
    assert np.array_equal(dx, [2.0, 4.0])
    assert has_rrule(square)


def test_frule_pushes_forward():
    y, dy = frule((np.ones(2),), square, np.array([1.0, 3.0]))
    assert np.array_equal(dy, [2.0, 6.0])


def test_unregistered_function_has_no_rule():
    def nothing(x):
        return x

    assert rrule(nothing, 1.0) is None and frule((1.0,), nothing, 1.0) is None
    assert not has_rrule(nothing)


def test_zero_cotangent_short_circuits():
    CALLS.clear()
    _, pb = rrule(square, np.ones(2))
    assert pb(ZeroTangent()) == (ZeroTangent(),)
    assert pb(NoTangent()) == (ZeroTangent(),)
    assert CALLS == []


def test_thunks_are_unthunked_for_eager_rules():
    CALLS.clear()
    _, pb = rrule(square, np.ones(2))
    (dx,) = pb(Thunk(lambda: np.ones(2)))
    assert isinstance(CALLS[0], np.ndarray) and np.array_equal(dx, [2.0, 2.0])


@primitive
def lazy_identity(x):
    return x


@register_rrule(lazy_identity, lazy=True)
def _lazy_identity_rrule(x):
    return x, lambda dy: (dy,)


def test_lazy_rules_receive_thunks_as_they_are():
    t = Thunk(lambda: np.ones(2))
    _, pb = rrule(lazy_identity, np.ones(2))
    assert pb(t)[0] is t


@primitive
def takes_int(x, n):
    return x * n


@register_rrule(takes_int)
def _takes_int_rrule(x, n):
    return x * n, lambda dy: (dy * n, dy * x)  # the second is wrong on purpose


def test_integer_arguments_get_notangent():
    _, pb = rrule(takes_int, np.ones(2), 3)
    dx, dn = pb(np.ones(2))
    assert np.array_equal(dx, [3.0, 3.0]) and dn is NoTangent()
    _, pb = rrule(takes_int, np.ones(2), np.array([True, False]))
    assert pb(np.ones(2))[1] is NoTangent()
    _, pb = rrule(takes_int, np.ones(2), 3)
    assert pb(ZeroTangent()) == (ZeroTangent(), NoTangent())


@primitive
def bad_count(x, y):
    return x + y


@register_rrule(bad_count)
def _bad_count_rrule(x, y):
    return x + y, lambda dy: (dy,)


def test_wrong_cotangent_count_is_an_error():
    _, pb = rrule(bad_count, 1.0, 2.0)
    with pytest.raises(TypeError, match="returned 1 cotangents for 2 positional arguments"):
        pb(1.0)


@primitive
def composite(x):
    return x + 1.0


@register_rrule(composite)
def _composite_rrule(x):
    return x + 1.0, lambda dy: (dy,)


def test_opt_out_and_reregister():
    assert has_rrule(composite)
    assert opt_out(composite) is composite
    assert not has_rrule(composite) and rrule(composite, 1.0) is None
    register_rrule(composite)(_composite_rrule)
    assert has_rrule(composite) and rrule(composite, 1.0) is not None


def test_numpy_functions_and_ufuncs_are_keys():
    def mine(x):
        return np.cos(x), lambda dy: (-np.sin(x) * dy,)

    from fusegrad.rules import registry

    saved = registry.RRULES.get(np.cos)  # fusegrad's own rule: put it back afterwards
    register_rrule(np.cos)(mine)
    try:
        y, pb = rrule(np.cos, 0.5)
        assert y == np.cos(0.5) and pb(1.0)[0] == -np.sin(0.5)
    finally:
        if saved is None:
            registry.RRULES.pop(np.cos, None)
        else:
            registry.RRULES[np.cos] = saved


def test_a_primitive_uses_its_rule_under_grad():
    import fusegrad as fg

    used = []

    @fg.primitive
    def my_solve(A, b):
        return np.linalg.solve(A, b)

    @fg.register_rrule(my_solve)
    def _(A, b):
        x = my_solve(A, b)

        def pullback(dx):
            used.append(True)
            db = my_solve(A.T, dx)
            return -np.outer(db, x), db

        return x, pullback

    A = np.array([[3.0, 0.5], [0.2, 2.0]])
    b = np.array([1.0, -1.0])
    gA, gb = fg.grad(lambda A, b: np.sum(my_solve(A, b) ** 2), argnums=(0, 1))(A, b)
    x = np.linalg.solve(A, b)
    want_b = np.linalg.solve(A.T, 2 * x)
    np.testing.assert_allclose(gb, want_b, rtol=1e-12)
    np.testing.assert_allclose(gA, -np.outer(want_b, x), rtol=1e-12)
    assert used  # the registered pullback ran, not a trace of the body


_ORDER_SCRIPT = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
import numpy as np
import fusegrad as fg
from fusegrad.rules import registry
from fusegrad.rules.common import scatter_add

def f(x):  # a ufunc, a reduction, a gather, and the primitives astype and scatter_add
    y = np.tanh(x) * x[np.array([0, 0, 2, 1])].sum()
    z = scatter_add(y[:2], np.array([1, 1]), (3,)).astype(np.float64)
    return np.sum(z ** 2) + np.sum(y)

x = np.array([0.3, -0.7, 1.1])
v = np.array([1.0, 0.5, -2.0])
out = [fg.grad(f)(x), fg.jvp(f, (x,), (v,))[1], fg.hvp(f, (x,), (v,))]
assert not hasattr(registry, "_trace_dispatch")
print(repr([np.asarray(o).tolist() for o in out]))
"""


def _f_by_hand(x):
    y = np.tanh(x) * x[[0, 0, 2, 1]].sum()
    z = np.zeros(3)
    np.add.at(z, [1, 1], y[:2])
    return np.sum(z**2) + np.sum(y)


@pytest.mark.slow  # two fresh interpreters importing fusegrad: ~4 s
def test_results_do_not_depend_on_import_order():
    # A fresh interpreter per order: grad, jvp and hvp of a function with primitives give the
    # same numbers whichever AD module is imported first (the dispatcher is no state an import
    # sets), and they match finite differences.
    import os
    import subprocess
    import sys

    def run(names):
        done = subprocess.run(
            [sys.executable, "-c", _ORDER_SCRIPT, *names],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "FUSEGRAD_ENGINE": "numpy"},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    forward_first = run(["fusegrad.ad.forward", "fusegrad.ad.core"])
    core_first = run(["fusegrad.ad.core", "fusegrad.ad.forward"])
    assert forward_first == core_first
    g, jv, hv = (np.array(v) for v in eval(forward_first))
    x = np.array([0.3, -0.7, 1.1])
    v = np.array([1.0, 0.5, -2.0])
    eps = 1e-6
    e3 = np.eye(3)
    fd_g = np.array([(_f_by_hand(x + eps * e) - _f_by_hand(x - eps * e)) / (2 * eps) for e in e3])
    np.testing.assert_allclose(g, fd_g, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jv, fd_g @ v, rtol=1e-6, atol=1e-8)
    h = 1e-4
    fd_h = np.array(
        [
            _f_by_hand(x + h * v + h * e)
            - _f_by_hand(x + h * v - h * e)
            - _f_by_hand(x - h * v + h * e)
            + _f_by_hand(x - h * v - h * e)
            for e in e3
        ]
    ) / (4 * h * h)
    np.testing.assert_allclose(hv, fd_h, rtol=1e-5, atol=1e-6)


def test_dispatch_goes_to_the_innermost_trace_whatever_its_mode():
    import fusegrad as fg
    from fusegrad.rules import registry

    seen = []

    def probe(x):
        trace = registry.innermost_trace((x,), {})
        seen.append(type(trace).__name__)
        return registry.dispatch(np.sin, (x,), {})

    x = np.array([0.5, 1.0])
    g = fg.grad(lambda x: np.sum(probe(x)))(x)
    _, t = fg.jvp(probe, (x,), (np.ones(2),))
    assert seen == ["Trace", "JVPTrace"]
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(t, np.cos(x), rtol=1e-14)
    assert registry.dispatch(np.sin, (x,), {}) is not None  # untraced: NumPy's own call


# --------------------------------------------------------------------------------------------------
# Declarators: linear, bilinear, nondiff (rules/common.py)
# --------------------------------------------------------------------------------------------------


def _fd(f, x, eps=1e-6):
    return np.array(
        [
            (f(x + eps * e) - f(x - eps * e)) / (2 * eps)
            for e in np.eye(x.size).reshape(-1, *x.shape)
        ]
    )


def test_linear_declares_both_directions_from_its_transpose():
    import fusegrad as fg
    from fusegrad.rules.common import linear

    @fg.primitive
    def cumdiff(x, k):  # y_i = x_i - x_{i-k} (zero-padded): linear in x
        pad = np.concatenate([np.zeros(k), x[:-k]])
        return x - pad

    def cumdiff_t(g, x, k):
        return g - np.concatenate([g[k:], np.zeros(k)])

    linear(cumdiff, cumdiff_t)
    x = np.array([0.4, -1.2, 2.0, 0.7, 1.5])
    w = np.array([1.0, -2.0, 0.5, 3.0, 1.0])

    def loss(x):
        return np.sum(w * np.sin(cumdiff(x, 2)))

    def plain(x):
        return np.sum(w * np.sin(x - np.concatenate([np.zeros(2), x[:-2]])))

    fd = _fd(plain, x)
    np.testing.assert_allclose(fg.grad(loss)(x), fd, rtol=1e-7, atol=1e-9)
    v = np.array([1.0, 0.0, -1.0, 2.0, 0.5])
    np.testing.assert_allclose(fg.jvp(loss, (x,), (v,))[1], fd @ v, rtol=1e-7)
    hv = (_fd(plain, x + 1e-4 * v, 1e-5) - _fd(plain, x - 1e-4 * v, 1e-5)) / 2e-4
    np.testing.assert_allclose(fg.hvp(loss, (x,), (v,)), hv, rtol=1e-4, atol=1e-6)
    y, pb = rrule(cumdiff, x, 2)
    assert pb(np.ones(5))[1] == NoTangent()  # the static argument has no cotangent


def test_linear_without_transpose_needs_a_reverse_rule():
    from fusegrad.rules.common import linear

    @primitive
    def undeclared(x):
        return 2 * x

    with pytest.raises(ValueError, match=r"linear\(undeclared\) without transpose="):
        linear(undeclared)


def test_bilinear_gives_the_product_rule_both_ways():
    import fusegrad as fg
    from fusegrad.rules.common import bilinear

    @fg.primitive
    def wdot(a, b):  # Σ_ij a_i M_ij b_j, bilinear in (a, b)
        return a @ M @ b

    M = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    bilinear(wdot, lambda g, a, b: g * (M @ b), lambda g, a, b: g * (a @ M))
    a, b = np.array([0.3, -0.8]), np.array([1.0, 2.0, -0.5])
    ga, gb = fg.grad(lambda a, b: wdot(a, b) ** 2, argnums=(0, 1))(a, b)
    y = a @ M @ b
    np.testing.assert_allclose(ga, 2 * y * (M @ b), rtol=1e-13)
    np.testing.assert_allclose(gb, 2 * y * (a @ M), rtol=1e-13)
    da, db = np.array([1.0, 0.5]), np.array([0.0, -1.0, 2.0])
    _, t = fg.jvp(wdot, (a, b), (da, db))
    np.testing.assert_allclose(t, da @ M @ b + a @ M @ db, rtol=1e-13)
    # a constant operand's cotangent is a Thunk that is never computed
    _, pb = rrule(wdot, a, b)
    assert all(isinstance(c, Thunk) for c in pb(1.0))


def test_nondiff_is_zero_in_both_directions():
    import fusegrad as fg
    from fusegrad.rules.common import nondiff

    @fg.primitive
    def bucket(x, width):
        return np.floor(x / width) * width

    nondiff(bucket)
    x = np.array([0.3, 1.7, -2.2])
    np.testing.assert_array_equal(fg.grad(lambda x: np.sum(bucket(x, 0.5) + x**2))(x), 2 * x)
    y, t = fg.jvp(lambda x: bucket(x, 0.5) + x, (x,), (np.ones(3),))
    np.testing.assert_array_equal(y, np.floor(x / 0.5) * 0.5 + x)
    np.testing.assert_array_equal(t, np.ones(3))
    _, pb = rrule(bucket, x, 0.5)
    assert pb(np.ones(3)) == (ZeroTangent(), ZeroTangent())


def test_a_rule_for_a_plain_function_warns_that_grad_will_not_use_it():
    # grad traces a plain Python function's body: its registered rule was silently unused
    def cube(x):
        return x**3

    with pytest.warns(UserWarning, match=r"register_rrule\(cube\): cube is a plain Python .* "):
        register_rrule(cube)(lambda x: (x**3, lambda dy: (3 * x**2 * dy,)))
    with pytest.warns(UserWarning, match=r"register_frule\(cube\)"):
        register_frule(cube)(lambda t, x: (x**3, 3 * x**2 * t[0]))
    with pytest.raises(TypeError, match=r"register_rrule needs the function the rule is for"):
        register_rrule(None)
    with pytest.raises(TypeError, match=r"register_frule needs the function the rule is for"):
        register_frule(3)


def test_opt_out_of_a_primitive_traces_its_body():
    # its rule was skipped and then NoRuleError asked for the rule it has
    import fusegrad as fg

    @fg.primitive
    def my_sin(x):
        return np.sin(x)

    @fg.register_rrule(my_sin)
    def _(x):
        return np.sin(x), lambda dy: (100 * dy,)  # (wrong on purpose: it must not be used)

    @fg.register_frule(my_sin)
    def _(t, x):
        return np.sin(x), 100 * t[0]

    fg.opt_out(my_sin)
    x = np.array([0.3, 1.2])
    np.testing.assert_allclose(fg.grad(lambda v: np.sum(my_sin(v)))(x), np.cos(x))
    np.testing.assert_allclose(fg.jvp(my_sin, (x,), (np.ones(2),))[1], np.cos(x))

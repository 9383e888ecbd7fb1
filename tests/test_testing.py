"""fusegrad.testing: the checkers pass correct rules and catch wrong ones."""

import types

import numpy as np
import pytest

import fusegrad
import fusegrad.rules.registry as registry
import fusegrad.testing
from fusegrad.rules.registry import register_frule, register_rrule
from fusegrad.tangents import InplaceThunk, ZeroTangent
from fusegrad.testing import check_frule, check_grads, check_rrule

X = np.array([0.5, -1.2, 2.0])


@registry.primitive
def my_cube(x):
    return x**3


@register_rrule(my_cube)
def _cube_rrule(x):
    return x**3, lambda dy: (3 * x**2 * dy,)  # JAX's convention: ȳ·f'(z), no conjugate


@register_frule(my_cube)
def _cube_frule(tangents, x):
    return x**3, 3 * x**2 * tangents[0]


@registry.primitive
def wrong_cube(x):
    return x**3


@register_rrule(wrong_cube)
def _wrong_rrule(x):
    return x**3, lambda dy: (2 * x**2 * dy,)


@register_frule(wrong_cube)
def _wrong_frule(tangents, x):
    return x**3, 2 * x**2 * tangents[0]


def test_correct_rule_passes_for_many_argument_kinds():
    check_rrule(my_cube, X)
    check_rrule(my_cube, X.astype(np.float32))
    check_rrule(my_cube, 1.5)
    check_rrule(my_cube, np.float32(0.7))
    check_rrule(my_cube, np.array([0.5 + 1j, -1.2 - 0.3j]))
    check_rrule(my_cube, np.linspace(-1, 1, 300))  # checked along a random direction
    check_rrule(my_cube, X, output_tangent=np.ones(3))
    check_frule(my_cube, X)
    check_frule(my_cube, X.astype(np.float32))


def test_wrong_rule_fails_naming_argument_values_and_worst_element():
    with pytest.raises(AssertionError) as info:
        check_rrule(wrong_cube, X)
    msg = str(info.value)
    assert "wrong_cube: argument 0 (x)" in msg
    assert "worst at index (2,)" in msg
    assert "rule" in msg and "finite differences" in msg
    with pytest.raises(AssertionError, match="random direction"):
        check_rrule(wrong_cube, np.linspace(0.5, 1, 300))
    with pytest.raises(AssertionError, match="output tangent.*worst at index"):
        check_frule(wrong_cube, X)


@registry.primitive
def scaled_sum(x, axis, label):
    return np.sum(x, axis=axis) * 2.0


@register_rrule(scaled_sum)
def _scaled_sum_rrule(x, axis, label):
    def pullback(dy):
        return (2.0 * np.broadcast_to(np.expand_dims(dy, axis), x.shape), 0, None)

    return scaled_sum(x, axis, label), pullback


def test_non_array_arguments_pass_through_and_get_notangent():
    check_rrule(scaled_sum, np.arange(6.0).reshape(2, 3), 1, "a label")


def test_integer_argument_given_zerotangent_fails(monkeypatch):
    def raw_rrule(f, *args, **kwargs):  # a registry that does not fix up NoTangent
        return scaled_sum(*args), lambda dy: (
            2.0 * np.broadcast_to(np.expand_dims(dy, 1), args[0].shape),
            ZeroTangent(),
            ZeroTangent(),
        )

    monkeypatch.setattr(registry, "rrule", raw_rrule)
    with pytest.raises(AssertionError, match=r"argument 1 \(axis\).*NoTangent\(\)"):
        check_rrule(scaled_sum, np.ones((2, 3)), 1, "x")


def test_wrong_number_of_cotangents_fails(monkeypatch):
    monkeypatch.setattr(registry, "rrule", lambda f, x: (x**3, lambda dy: (dy, dy)))
    with pytest.raises(AssertionError, match="2 cotangent.*1 argument"):
        check_rrule(my_cube, X)


@registry.primitive
def mutating(x):
    return x * 2.0


@register_rrule(mutating)
def _mutating_rrule(x):
    def pullback(dy):
        x[0] += 1.0  # the bug under test
        return (2.0 * dy,)

    return x * 2.0, pullback


def test_mutating_rule_fails():
    x = X.copy()
    with pytest.raises(AssertionError, match="mutated its arguments"):
        check_rrule(mutating, x)
    np.testing.assert_array_equal(x, X)  # the rule ran on a copy: the caller's array is as it was


@registry.primitive
def twice(x):
    return 2.0 * x


@register_rrule(twice)
def _twice_rrule(x):
    def pullback(dy):
        wrong = lambda d: np.add(d, 3.0 * dy, out=d)  # noqa: E731 - add_fn disagrees with value
        return (InplaceThunk(wrong, lambda: 2.0 * dy),)

    return 2.0 * x, pullback


def test_inplace_thunk_that_disagrees_with_its_value_fails():
    with pytest.raises(AssertionError, match="iadd"):
        check_rrule(twice, X)


def no_rule(x):
    return x


def test_missing_rule_fails():
    with pytest.raises(AssertionError, match="no reverse rule"):
        check_rrule(no_rule, X)
    with pytest.raises(AssertionError, match="no forward rule"):
        check_frule(no_rule, X)


# ---------------------------------------------------------------- check_grads with a stand-in API


def _numeric_jacobian_api(error: float = 1.0) -> types.ModuleType:
    """A stand-in for fusegrad.api whose vjp/jvp come from accurate numeric derivatives."""

    def jvp(fun, primals, tangents):
        h = 1e-3

        def at(t):
            return np.asarray(
                fun(
                    *[
                        p if isinstance(v, type(ZeroTangent())) or v is None else p + t * v
                        for p, v in zip(primals, tangents, strict=True)
                    ]
                ),
                float,
            )

        d = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
        return fun(*primals), error * d

    def vjp(fun, *primals):
        out = fun(*primals)

        def vjp_fn(ct):
            grads = []
            for i, p in enumerate(primals):
                p = np.asarray(p, float)
                g = np.zeros(p.shape)
                for idx in np.ndindex(p.shape):
                    e = np.zeros(p.shape)
                    e[idx] = 1.0
                    ts = [e if j == i else None for j in range(len(primals))]
                    g[idx] = np.sum(np.asarray(ct) * jvp(fun, primals, ts)[1])
                grads.append(error * g)
            return tuple(grads)

        return out, vjp_fn

    return types.SimpleNamespace(vjp=vjp, jvp=jvp)


@pytest.fixture
def fake_api(monkeypatch):
    def install(error=1.0):
        api = _numeric_jacobian_api(error)
        monkeypatch.setattr(fusegrad.testing, "api", api)  # what check_grads differentiates with

    return install


def f2(x, y):
    return np.sin(x) * y


def test_check_grads_passes_a_correct_engine(fake_api):
    fake_api()
    check_grads(f2, modes=("rev", "fwd"))(X, np.array([1.0, 2.0, 3.0]))


def test_check_grads_order_two(fake_api):
    fake_api()
    check_grads(lambda x: np.sum(x**3), modes=("rev",), order=2, rtol=1e-4)(X)


def test_check_grads_fails_a_wrong_engine(fake_api):
    fake_api(error=1.1)
    with pytest.raises(AssertionError, match=r"argument 0 \(x\).*<vjp\(ct\), v>"):
        check_grads(f2)(X, np.ones(3))
    with pytest.raises(AssertionError, match="jvp.*worst at index"):
        check_grads(f2, modes=("fwd",))(X, np.ones(3))


def test_check_grads_with_the_real_engine_when_it_exists():
    api = pytest.importorskip("fusegrad.api")
    if not hasattr(api, "vjp"):
        pytest.skip("fusegrad.api.vjp does not exist yet")
    check_grads(lambda x: np.sum((1 - x) / 2))(X)


def _jittery(scale, error=0.0):
    """A large output that differs by an ulp from call to call (as NumPy's sums do with the
    data's alignment), independent of its second argument; ``error`` makes its rule wrong."""
    calls = [0]

    @registry.primitive
    def f(x, p):
        calls[0] += 1
        y = scale * np.sum(x * x)
        return y + np.spacing(y) * (calls[0] % 2)

    @register_rrule(f)
    def _(x, p):
        def pullback(g):
            return (g * scale * 2 * x * (1 + error), np.zeros_like(p))

        return f.__wrapped__(x, p), pullback

    return f


def test_finite_differences_allow_for_their_own_rounding():
    """<ct, J v> of an argument the output does not depend on is 0; the finite differences see
    the ulp jitter of a 1e7-sized output amplified by 1/h, far above atol: not an error."""
    x = np.linspace(0.5, 1.5, 30)
    check_grads(_jittery(1e6), modes=("rev",))(x, np.ones(30))


def test_finite_differences_still_catch_a_small_relative_error_at_that_size():
    x = np.linspace(0.5, 1.5, 30)
    with pytest.raises(AssertionError, match="argument 0"):
        check_grads(_jittery(1e6, error=1e-4), modes=("rev",))(x, np.ones(30))


def test_check_grads_rejects_bad_options():
    with pytest.raises(ValueError, match="modes"):
        check_grads(f2, modes=("sideways",))
    with pytest.raises(ValueError, match="order"):
        check_grads(f2, order=0)


# ---------------------------------------------------------------- complex inputs: JAX's convention

Z = np.array([0.5 + 1j, -1.2 - 0.3j, 2.0 + 0.5j])


@registry.primitive
def conj_cube(x):
    return x**3


@register_rrule(conj_cube)
def _conj_cube_rrule(x):  # the other convention: ȳ·conj(f'(z))
    return x**3, lambda dy: (3 * np.conj(x) ** 2 * dy,)


@registry.primitive
def abs_squared(x):
    return np.abs(x) ** 2


@register_rrule(abs_squared)
def _abs_squared_rrule(x):  # JAX: 2·ȳ·conj(z)
    return abs_squared(x), lambda dy: (2 * dy * np.conj(x),)


@registry.primitive
def abs_squared_wrong(x):
    return np.abs(x) ** 2


@register_rrule(abs_squared_wrong)
def _abs_squared_wrong_rrule(x):  # 2·ȳ·z: the answer fusegrad gave before it chose JAX's
    return abs_squared_wrong(x), lambda dy: (2 * dy * x,)


def test_complex_inputs_are_checked_in_jax_convention():
    check_rrule(my_cube, Z)  # holomorphic: ȳ·f'(z)
    check_rrule(my_cube, Z[:2].astype(np.complex64))
    check_rrule(my_cube, 1.5 - 0.5j)
    check_rrule(abs_squared, Z)  # real output of a complex input: ∂L/∂x - i ∂L/∂y
    check_rrule(my_cube, np.linspace(-1, 1, 300) * (1 - 2j))  # along a random direction
    check_frule(my_cube, Z)
    with pytest.raises(AssertionError, match="conj_cube: argument 0"):
        check_rrule(conj_cube, Z)
    with pytest.raises(AssertionError, match="random direction"):
        check_rrule(conj_cube, np.linspace(-1, 1, 300) * (1 - 2j))
    with pytest.raises(AssertionError, match="abs_squared_wrong: argument 0"):
        check_rrule(abs_squared_wrong, Z)
    # A real input has the same derivative in both conventions.
    check_rrule(conj_cube, X)
    check_rrule(abs_squared_wrong, X)

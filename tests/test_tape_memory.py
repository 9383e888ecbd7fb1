"""What the tape keeps of the forward pass: only what a pullback reads. A tape node holds its
parents' nodes, not their tracers, and the small-array elementwise pullbacks keep only the
values their partials read, so ``tanh(a @ w + b)`` keeps ``tanh``'s output but neither sum."""

import functools
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.memory import track_allocations
from fusegrad.rules.common import PARTIALS, values_read

STEPS, N = 40, 2000  # 16 kB a value: the small-array path; 640 kB for 40 of them


def chain(x):
    h = x
    for _ in range(STEPS):
        h = np.tanh(h + 0.5)  # the sum is read by no partial: add's are 1
    return np.sum(h)


def chain_by_hand(x):
    hs, h = [], x
    for _ in range(STEPS):
        h = np.tanh(h + 0.5)
        hs.append(h)
    g = np.ones_like(x)
    for h in reversed(hs):
        g = g * (1 - h * h)
    return g


def test_a_chain_keeps_one_value_per_step_not_two(small_path):
    x = np.linspace(-1, 1, N)
    fg.grad(chain)(x)  # warm: first-call caches are not the tape
    with track_allocations() as report:
        g = fg.grad(chain)(x)
    np.testing.assert_allclose(g, chain_by_hand(x), rtol=1e-12)
    one_per_step = STEPS * N * 8
    # the tanh outputs the pullbacks read, plus a few cotangents in flight; keeping the sums too
    # would be twice the tanh outputs
    assert one_per_step <= report.peak_bytes < 1.3 * one_per_step


def test_the_rnn_gradient_is_unchanged_by_what_the_tape_drops(small_path):
    rng = np.random.default_rng(3)
    Wx, Wh = rng.standard_normal((3, 5)), 0.5 * rng.standard_normal((5, 5))
    b, xs = rng.standard_normal(5), rng.standard_normal((12, 4, 3))

    def loss(Wx, Wh, b):
        h = np.zeros((4, 5))
        for x in xs:
            h = np.tanh(x @ Wx + h @ Wh + b)
        return np.sum(h**2)

    grads = fg.grad(loss, argnums=(0, 1, 2))(Wx, Wh, b)
    for i, (p, g) in enumerate(zip((Wx, Wh, b), grads)):
        e = np.zeros_like(p).ravel()
        e[0] = 1e-6
        e = e.reshape(p.shape)
        args = [Wx, Wh, b]
        args[i] = p + e
        up = loss(*args)
        args[i] = p - e
        down = loss(*args)
        assert g.ravel()[0] == pytest.approx((up - down) / 2e-6, rel=1e-6)


def test_values_read_is_conservative_where_it_cannot_see():
    def needs_cell(x, y):
        return (lambda: x)()  # x is a cell variable: read by an inner function

    def star(*a):
        return 1

    assert values_read((needs_cell,)) == (True, True)
    assert values_read((star,)) == (True, True)
    assert values_read((lambda x, y: locals()["x"],)) == (True, True)

    def stores_then_reads(x, y):
        z = y * 2.0  # 3.13 fuses the store of z and the load of x into STORE_FAST_LOAD_FAST
        return z * x

    assert values_read((stores_then_reads,)) == (True, True)
    assert values_read((functools.partial(lambda s, x, y: s, 1.0),)) == (True, True)
    assert values_read((lambda a, b, y: a, None)) == (True, False, False)


@given(st.sampled_from(sorted(PARTIALS, key=lambda u: u.__name__)), st.integers(0, 2**32 - 1))
def test_every_partial_ignores_the_values_it_is_said_not_to_read(ufunc, seed):
    """The analysis, checked on the whole table: replacing every value a partial is said not
    to read by None changes none of its results."""
    partials = PARTIALS[ufunc]
    reads = values_read(partials)
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(0.2, 0.8, 4) for _ in partials]
    with np.errstate(all="ignore"):
        y = ufunc(*vals)
        if isinstance(y, tuple):
            return  # multi-output ufuncs (frexp, modf) have no partials table entry to check
        hidden = [v if r else None for v, r in zip([*vals, y], reads)]
        for partial in partials:
            if partial is None:
                continue
            want = partial(*vals, y)
            got = partial(*hidden)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


LINEAR = {
    "roll": lambda t: np.roll(t, 1, axis=0),
    "cumsum": lambda t: np.cumsum(t, axis=0),
    "tile": lambda t: np.tile(t, 2),
    "repeat": lambda t: np.repeat(t, 2, axis=0),
    "diff": lambda t: np.diff(t, axis=1),
    "triu": lambda t: np.triu(t),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_a_linear_op_frees_its_input_and_differentiates_as_before(small_path, name):
    """A linear map's pullback reads its input's shape and dtype only: the input is freed as
    soon as the program drops it, and the gradient still matches finite differences."""
    op = LINEAR[name]
    x0 = np.linspace(0.5, 1.5, 16 * 64).reshape(16, 64)
    alive = []

    def f(x):
        mid = x * 2.0  # multiply keeps x and 2.0, not its output
        traced = not isinstance(mid, np.ndarray)
        ref = weakref.ref(mid.value) if traced else None
        out = op(mid)
        del mid
        gc.collect()
        if traced:
            alive.append(ref() is not None)
        return np.sum(out * out)

    g = fg.grad(f)(x0)
    assert alive == [False]
    e = np.zeros_like(x0)
    e[3, 5] = 1e-6
    fd = (f(x0 + e) - f(x0 - e)) / 2e-6  # plain NumPy: x is not traced here
    assert g[3, 5] == pytest.approx(fd, rel=1e-6)

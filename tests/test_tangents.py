"""The tangent algebra: zeros, Tangent, thunks, add/iadd with ownership, ProjectTo."""

import copy
import pickle
from dataclasses import dataclass

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusegrad.tangents import (
    AbstractThunk,
    InplaceThunk,
    NoTangent,
    ProjectTo,
    Tangent,
    Thunk,
    ZeroTangent,
    add,
    disown,
    iadd,
    mark_owned,
    owned,
    ownership_scope,
    scale,
    tree_equal,
    unthunk,
)

# ---------------------------------------------------------------- strategies

FINITE = {"allow_nan": False, "allow_infinity": False, "min_value": -1e3, "max_value": 1e3}
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


@dataclass(frozen=True)
class Leaf:
    shape: tuple | None  # None: a Python float


@dataclass
class Point:
    x: float
    y: np.ndarray


class Plain:
    def __init__(self, a, b):
        self.a = a
        self.b = b


templates = st.recursive(
    st.builds(Leaf, SHAPES | st.none()),
    lambda kids: (
        st.tuples(kids, kids)
        | st.lists(kids, min_size=1, max_size=3)
        | st.dictionaries(st.sampled_from("abc"), kids, min_size=1, max_size=3)
    ),
    max_leaves=5,
)


def fill(draw, tpl, zeros=True):
    if isinstance(tpl, Leaf):
        if zeros and draw(st.integers(0, 7)) == 0:
            return ZeroTangent()
        if tpl.shape is None:
            return draw(st.floats(**FINITE))
        return draw(hnp.arrays(np.float64, tpl.shape, elements=st.floats(**FINITE)))
    if isinstance(tpl, tuple):
        return tuple(fill(draw, t, zeros) for t in tpl)
    if isinstance(tpl, list):
        return [fill(draw, t, zeros) for t in tpl]
    return {k: fill(draw, t, zeros) for k, t in tpl.items()}


@st.composite
def same_trees(draw, n):
    tpl = draw(templates)
    return [fill(draw, tpl) for _ in range(n)]


@st.composite
def point_tangents(draw, n):
    shape = draw(SHAPES)
    out = []
    for _ in range(n):
        fields = {}
        if draw(st.booleans()):
            fields["x"] = draw(st.floats(**FINITE))
        if draw(st.booleans()):
            fields["y"] = draw(hnp.arrays(np.float64, shape, elements=st.floats(**FINITE)))
        out.append(Tangent(Point, **fields))
    return out


def close(a, b):
    """Structural closeness (zeros equal to zero arrays)."""
    a, b = unthunk(a), unthunk(b)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, Tangent):
        keys = set(a.fields) | set(b.fields)
        return all(close(getattr(a, k), getattr(b, k)) for k in keys)
    if isinstance(a, ZeroTangent | NoTangent) or isinstance(b, ZeroTangent | NoTangent):
        other = b if isinstance(a, ZeroTangent | NoTangent) else a
        return isinstance(other, ZeroTangent | NoTangent) or not np.any(np.asarray(other))
    return np.allclose(a, b, rtol=1e-9, atol=1e-9)


trees_or_tangents = same_trees(3) | point_tangents(3)

# ---------------------------------------------------------------- algebra laws


@given(trees_or_tangents)
def test_zero_is_the_identity_of_add(ts):
    t = ts[0]
    for z in (ZeroTangent(), NoTangent()):
        assert tree_equal(add(z, t), t)
        assert tree_equal(add(t, z), t)


@given(trees_or_tangents)
def test_add_is_commutative(ts):
    a, b, _ = ts
    assert tree_equal(add(a, b), add(b, a))


@given(trees_or_tangents)
def test_add_is_associative_within_tolerance(ts):
    a, b, c = ts
    assert close(add(add(a, b), c), add(a, add(b, c)))


@given(trees_or_tangents)
def test_add_never_mutates(ts):
    a, b, _ = ts
    saved = copy.deepcopy((a, b))
    add(a, b)
    assert tree_equal((a, b), saved)


@given(same_trees(1), st.integers(0, 4))
def test_unthunk_is_idempotent(ts, depth):
    t = ts[0]
    x = t
    for _ in range(depth):
        x = Thunk(lambda x=x: x)
    once = unthunk(x)
    assert unthunk(once) is once
    assert tree_equal(once, t)


dtypes = st.sampled_from([np.float64, np.float32, np.int32, np.int64, np.complex128, np.bool_])


@given(dtypes, dtypes, SHAPES, st.booleans(), st.data())
def test_project_to_is_idempotent(pdtype, ddtype, shape, reshape, data):
    primal = np.zeros(shape, pdtype)
    dshape = tuple(n for n in shape if n != 1) + ((1,) if reshape else ())
    dx = data.draw(
        hnp.arrays(ddtype, dshape, elements=hnp.from_dtype(np.dtype(ddtype), **_el(ddtype)))
    )
    p = ProjectTo(primal)
    once = p(dx)
    assert tree_equal(p(once), once)
    if pdtype is np.bool_:
        assert once is NoTangent()
    else:
        assert once.shape == shape


def _el(dtype):
    kind = np.dtype(dtype).kind
    if kind == "f":
        return {"allow_nan": False, "min_value": -1e6, "max_value": 1e6}
    if kind == "c":
        return {"allow_nan": False, "allow_infinity": False, "max_magnitude": 1e6}
    return {}


@given(same_trees(1))
def test_project_to_containers_is_idempotent(ts):
    t = ts[0]
    p = ProjectTo(t)
    once = p(t)
    assert tree_equal(p(once), once)
    assert close(once, t)


# ---------------------------------------------------------------- iadd


def _dest_kinds(base):
    """(kind, dest, is-safe-to-write) for every kind of accumulator."""
    ro = base.copy()
    ro.flags.writeable = False
    parent = mark_owned(np.concatenate([base.ravel(), base.ravel()]))
    return [
        ("owned", mark_owned(base.copy()), True),
        ("user", base.copy(), False),
        ("read-only", mark_owned(ro), False),
        ("view of owned", parent[: base.size].reshape(base.shape), False),
        ("int", mark_owned(base.astype(np.int64)), False),
    ]


@given(
    hnp.arrays(np.float64, SHAPES, elements=st.floats(**FINITE)),
    st.sampled_from(["same", "scalar", "broadcast", "bigger", "complex", "float32", "thunk"]),
    st.data(),
)
def test_iadd_agrees_with_add_and_only_writes_what_it_owns(base, xkind, data):
    shape = base.shape
    elems = st.floats(**FINITE)
    x = {
        "same": lambda: data.draw(hnp.arrays(np.float64, shape, elements=elems)),
        "scalar": lambda: data.draw(elems),
        "broadcast": lambda: data.draw(hnp.arrays(np.float64, shape[1:], elements=elems)),
        "bigger": lambda: data.draw(hnp.arrays(np.float64, (2, *shape), elements=elems)),
        "complex": lambda: np.full(shape, 1 + 2j),
        "float32": lambda: np.ones(shape, np.float32),
        "thunk": lambda: Thunk(lambda: np.ones(shape)),
    }[xkind]()
    for kind, dest, writable in _dest_kinds(base):
        before = dest.copy()
        expected = add(dest.copy(), x)
        out = iadd(dest, x)
        assert close(out, expected), kind
        if not writable:
            assert np.array_equal(dest, before), f"iadd changed a {kind} array"
        elif xkind in ("bigger", "complex"):
            assert out is not dest and np.array_equal(dest, before)
        else:
            assert out is dest


def test_iadd_aliasing_is_safe():
    # One pullback hands the same array to two arguments: accumulating into one of them
    # must not change the other.
    g = np.ones(3)
    acc_a, acc_b = g, g
    acc_a = iadd(acc_a, np.full(3, 2.0))
    acc_b = iadd(acc_b, np.full(3, 5.0))
    assert np.array_equal(acc_a, [3.0, 3.0, 3.0])
    assert np.array_equal(acc_b, [6.0, 6.0, 6.0])
    assert np.array_equal(g, [1.0, 1.0, 1.0])
    # A sum fusegrad made is owned; once shared (disowned) it is no longer written to.
    s = add(np.ones(2), np.ones(2))
    assert owned(s)
    disown(s)
    t = iadd(s, 1.0)
    assert t is not s and np.array_equal(s, [2.0, 2.0])


def test_add_results_are_new_owned_arrays():
    a, b = np.ones(2), np.zeros(2)
    c = add(a, b)
    assert c is not a and c is not b and owned(c)
    assert not owned(a) and not owned(c[:1])
    assert iadd(c, 1.0) is c


def test_ownership_is_forgotten_when_freed_and_at_scope_end():
    a = mark_owned(np.zeros(4))
    key = id(a)
    del a
    b = np.zeros(4)  # may reuse the id
    assert not owned(b) or id(b) != key
    with ownership_scope():
        g = add(np.ones(2), np.ones(2))
        assert owned(g)
    assert not owned(g)


def test_iadd_calls_inplace_thunk_add_fn_only_on_owned_dest():
    calls = []

    def add_fn(d):
        calls.append(d)
        d += 1.0
        return d

    it = InplaceThunk(add_fn, lambda: np.ones(2))
    dest = mark_owned(np.zeros(2))
    assert iadd(dest, it) is dest and np.array_equal(dest, [1.0, 1.0])
    user = np.zeros(2)
    out = iadd(user, it)
    assert len(calls) == 1 and np.array_equal(user, [0.0, 0.0])
    assert np.array_equal(out, [1.0, 1.0])


def test_iadd_into_containers_and_zeros():
    d = (mark_owned(np.zeros(2)), {"a": 1.0})
    out = iadd(d, (np.ones(2), {"a": 2.0, "b": 3.0}))
    assert out[0] is d[0] and out[1] == {"a": 3.0, "b": 3.0}
    assert iadd(ZeroTangent(), 2.0) == 2.0
    assert iadd(d[0], NoTangent()) is d[0]


# ---------------------------------------------------------------- zeros


def test_zero_singletons_and_arithmetic():
    z, n = ZeroTangent(), NoTangent()
    assert z is ZeroTangent() and n is NoTangent() and z is not n
    assert not z and not n
    assert repr(z) == "ZeroTangent()" and repr(n) == "NoTangent()"
    assert 3 * z is z and z * 3 is z and -z is z and z / 2 is z
    assert z + 1.5 == 1.5 and 1.5 + z == 1.5 and 1.5 - z == 1.5
    assert np.array_equal(z - np.ones(2), -np.ones(2))
    assert np.array_equal(np.ones(2) + z, np.ones(2))
    assert z + n is z and n + z is z and n + n is n
    assert copy.deepcopy(z) is z and pickle.loads(pickle.dumps(n)) is n


# ---------------------------------------------------------------- Tangent


def test_tangent_fields_and_moving_a_primal():
    t = Tangent(Point, x=1.0)
    assert t.y is ZeroTangent() and t.x == 1.0
    p = Point(2.0, np.ones(2))
    moved = p + Tangent(Point, x=1.0, y=np.ones(2))
    assert moved is not p and moved.x == 3.0 and np.array_equal(moved.y, [2.0, 2.0])
    assert p.x == 2.0 and np.array_equal(p.y, [1.0, 1.0])
    assert add(p, t).x == 3.0
    q = Plain(1.0, 2.0)
    q2 = q + Tangent(Plain, b=1.0)
    assert q2 is not q and (q2.a, q2.b) == (1.0, 3.0) and q.b == 2.0


def test_tangent_algebra_and_errors():
    t = Tangent(Point, x=1.0) + Tangent(Point, x=2.0, y=np.ones(1))
    assert t.x == 3.0 and np.array_equal(t.y, [1.0])
    assert (2 * t).x == 6.0 and (-t).x == -3.0 and (t - t).x == 0.0
    with pytest.raises(TypeError, match="fields"):
        Tangent(Point, z=1.0)
    with pytest.raises(TypeError, match="different types"):
        add(Tangent(Point, x=1.0), Tangent(Plain, a=1.0))
    with pytest.raises(TypeError, match="cannot add"):
        add(np.ones(2), (1.0, 2.0))
    assert "Tangent(Point, x=1.0)" == repr(Tangent(Point, x=1.0))


def test_natural_tangents_nest():
    a = {"w": (np.ones(2), [1.0, ZeroTangent()])}
    b = {"w": (1.0, [2.0, 3.0]), "b": 4.0}
    assert tree_equal(add(a, b), {"w": (np.full(2, 2.0), [3.0, 3.0]), "b": 4.0})
    assert tree_equal(scale(a, 2), {"w": (np.full(2, 2.0), [2.0, ZeroTangent()])})
    with pytest.raises(ValueError, match="lengths"):
        add((1.0,), (1.0, 2.0))


# ---------------------------------------------------------------- thunks


def test_thunk_arithmetic_unthunks_and_runs_once():
    calls = []

    def make():
        calls.append(1)
        return np.ones(2)

    t = Thunk(make)
    assert not calls
    assert np.array_equal(t + 1.0, [2.0, 2.0])
    assert np.array_equal(1.0 - t, [0.0, 0.0])
    assert np.array_equal(-t, [-1.0, -1.0])
    assert np.array_equal(2 * t, [2.0, 2.0]) and np.array_equal(t * 2, [2.0, 2.0])
    assert np.array_equal(np.ones(2) + t, [2.0, 2.0])
    assert np.array_equal(np.asarray(t), [1.0, 1.0])
    assert len(calls) == 1
    assert unthunk(Thunk(lambda: Thunk(lambda: 3.0))) == 3.0
    assert tree_equal(add(Thunk(lambda: 1.0), Thunk(lambda: 2.0)), 3.0)


class FakeLazy(AbstractThunk):
    """Stands in for BroadcastThunk: keeps arithmetic lazy, has shape and dtype."""

    keeps_lazy = True

    def __init__(self, value, log):
        self.value, self.log = value, log
        self.shape, self.dtype = value.shape, value.dtype

    def unthunk(self):
        self.log.append("unthunk")
        return self.value

    def __add__(self, other):
        self.log.append("add")
        return FakeLazy(self.value + unthunk(other), self.log)

    __radd__ = __add__

    def __mul__(self, s):
        self.log.append("mul")
        return FakeLazy(self.value * s, self.log)

    def project_to(self, p):
        self.log.append("project_to")
        return self


def test_lazy_thunks_stay_lazy_in_add_scale_and_project():
    log = []
    x = FakeLazy(np.ones(3), log)
    out = add(x, np.ones(3))
    assert isinstance(out, FakeLazy) and "unthunk" not in log
    assert isinstance(add(np.ones(3), x), FakeLazy)
    assert isinstance(scale(x, 2.0), FakeLazy)
    assert ProjectTo(np.ones(3))(x) is x and "project_to" in log
    assert "unthunk" not in log


# ---------------------------------------------------------------- ProjectTo


def test_project_to_dtypes_and_scalars():
    assert ProjectTo(np.ones(2, np.float32))(np.ones(2)).dtype == np.float32
    z = ProjectTo(np.ones(2))(np.array([1 + 2j, 3 - 1j]))
    assert z.dtype == np.float64 and np.array_equal(z, [1.0, 3.0])
    assert ProjectTo(np.ones(2, np.int32))(np.ones(2)).dtype == np.float32
    assert ProjectTo(np.ones(2, np.int64))(np.ones(2, np.float32)).dtype == np.float64
    assert ProjectTo(np.ones(2, bool))(np.ones(2)) is NoTangent()
    assert ProjectTo(True)(1.0) is NoTangent() and ProjectTo("s")(1.0) is NoTangent()
    f = ProjectTo(2.0)(np.array(3.0 + 1j))
    assert type(f) is float and f == 3.0
    assert type(ProjectTo(2)(np.array([3.0]))) is float
    assert type(ProjectTo(1j)(2.0)) is complex
    a = ProjectTo(np.array(1.0))(4.0)
    assert isinstance(a, np.ndarray) and a.shape == ()
    s = ProjectTo(np.float32(1.0))(np.array(2.0))
    assert type(s) is np.float32
    assert ProjectTo(np.ones(2))(ZeroTangent()) is ZeroTangent()
    assert ProjectTo(np.ones(2))(Thunk(lambda: np.ones(2, np.float32))).dtype == np.float64


def test_project_to_trivial_reshapes_and_errors():
    assert ProjectTo(np.zeros((3, 1)))(np.ones(3)).shape == (3, 1)
    assert ProjectTo(np.zeros(3))(np.ones((1, 3, 1))).shape == (3,)
    assert ProjectTo(np.zeros((1, 1)))(2.0).shape == (1, 1)
    with pytest.raises(ValueError, match=r"shape \(3, 4\).*shape \(3,\).*unbroadcast"):
        ProjectTo(np.zeros(3))(np.ones((3, 4)))


def test_project_to_containers_and_structs():
    p = ProjectTo((np.zeros(2, np.float32), 1.0, [3, True]))
    out = p((np.ones(2), np.array(2.0), [np.array(1.0), 1.0]))
    assert out[0].dtype == np.float32 and type(out[1]) is float
    assert out[2][0] == 1.0 and out[2][1] is NoTangent()
    d = ProjectTo({"a": np.zeros((2, 1))})({"a": np.ones(2)})
    assert d["a"].shape == (2, 1)
    t = ProjectTo(Point(1.0, np.zeros(2, np.float32)))(Tangent(Point, y=np.ones((2, 1))))
    assert isinstance(t, Tangent) and t.y.dtype == np.float32 and t.y.shape == (2,)
    with pytest.raises(ValueError, match="length"):
        p((1.0,))


class LazyLike:
    """A lazy array stand-in: shape, dtype, astype; materialises only through __array__."""

    def __init__(self, value):
        self.value = value
        self.shape, self.dtype = value.shape, value.dtype
        self.materialised = False

    def astype(self, dtype):
        return LazyLike(self.value.astype(dtype))

    def __array__(self, dtype=None, copy=None):
        self.materialised = True
        return np.asarray(self.value, dtype)


def test_project_to_keeps_lazy_values_lazy_unless_reshaping():
    lz = LazyLike(np.ones(3))
    out = ProjectTo(np.zeros(3, np.float32))(lz)
    assert isinstance(out, LazyLike) and out.dtype == np.float32 and not lz.materialised
    out = ProjectTo(np.zeros((3, 1)))(lz)
    assert isinstance(out, np.ndarray) and out.shape == (3, 1) and lz.materialised

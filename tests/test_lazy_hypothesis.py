"""Random expression trees: the lazy result equals NumPy eager on the same expression.

Each example draws a domain shape, a few leaves broadcastable against it, and 1-3 expression
trees (depth up to 6) over them: elementwise ops, Python scalar constants, ``np.where``,
``np.clip``, ``astype``, reductions and movement ops. Every tree is a function of its leaves, run
once on ``fl.asarray`` leaves (then ``fl.materialize`` of all roots together, multi-output) and
once on the ndarrays (NumPy eager). Results must have the same shape and dtype, the same NaN
positions, and values equal within a bound computed alongside the tree (a running forward-error
estimate, see ``Expr``), so that ill-conditioned trees do not make the test flaky and
well-conditioned ones are held to a few ulps.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusegrad.lazy as fl
from fusegrad.lazy.engines import numba_engine, numpy_blocked

# ---------------------------------------------------------------------------------------------
# engines and block sizes


@contextlib.contextmanager
def block_sizes(small: int, target: int, threaded: int) -> Iterator[None]:
    """Temporarily set ``numpy_blocked.SMALL/TARGET/THREADED`` (tiny values exercise blocking
    and the thread pool on small shapes). Not a pytest fixture: hypothesis runs many examples
    per test call, and a function-scoped fixture would be shared between them."""
    old = numpy_blocked.SMALL, numpy_blocked.TARGET, numpy_blocked.THREADED
    numpy_blocked.SMALL, numpy_blocked.TARGET, numpy_blocked.THREADED = small, target, threaded
    try:
        yield
    finally:
        numpy_blocked.SMALL, numpy_blocked.TARGET, numpy_blocked.THREADED = old


BLOCKINGS = {
    "default": None,
    "tiny": (16, 64, 256),
}

# ---------------------------------------------------------------------------------------------
# expressions with an error bound

UNIT = {np.dtype(np.float64): 2.0**-53, np.dtype(np.float32): 2.0**-24}
MAX_MAG = 1e8  # ops whose eager result exceeds this in magnitude are skipped (no overflow)
MAX_INT = 2**40
MAX_SIZE = 200_000  # broadcast_to never builds a domain larger than this


def unit(dtype: np.dtype) -> float:
    """Unit roundoff of a result dtype (0 for exact integer/bool results)."""
    return UNIT.get(np.dtype(dtype), 0.0)


def finite_max(v: Any) -> float:
    """The largest finite magnitude in ``v`` (0 when there is none)."""
    a = np.asarray(v)
    if a.dtype == bool:
        return 1.0
    a = np.abs(a[np.isfinite(a)]).astype(np.float64) if a.dtype.kind == "f" else np.abs(a)
    return float(a.max()) if a.size else 0.0


@dataclass
class Expr:
    """A subexpression: ``fn(leaves)`` builds it (lazily or eagerly, the same code), ``val`` is
    its eager value and ``err`` a bound on the absolute error of any correct evaluation of it
    (first-order forward error analysis: each op adds a few ulps of its result and propagates
    its arguments' errors through a Lipschitz bound)."""

    fn: Callable[[list], Any]
    val: Any
    err: float
    desc: str = "?"

    def __repr__(self) -> str:
        return self.desc

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.val)

    @property
    def dtype(self) -> np.dtype:
        return np.asarray(self.val).dtype

    @property
    def kind(self) -> str:
        return self.dtype.kind


def near(v: Any, points: Callable[[np.ndarray], np.ndarray], err: float) -> bool:
    """Whether some finite element of ``v`` lies within ``8*err`` of a discontinuity
    (``points(v)`` is the distance to the nearest one): such an op could flip between
    evaluations whose rounding differs, so the generator does not apply it."""
    a = np.asarray(v, dtype=np.float64)
    a = a[np.isfinite(a)]
    if not a.size:
        return False
    return bool(np.any(points(a) <= 8 * err + 1e-300)) if err > 0 else False


_PARAMS = ("b", "axis", "keepdims", "ddof", "idx", "new", "perm", "to", "lo", "hi", "i", "j", "ax")


def _describe(args: list[Expr]) -> str:
    """A readable form of the node being made, from the generator method's local variables
    (for failure messages only)."""
    import inspect

    frame = inspect.currentframe().f_back.f_back  # Gen.<method> -> Gen.make -> here
    loc = frame.f_locals
    label = loc.get("name") or loc.get("kind") or frame.f_code.co_name
    params = [f"{k}={loc[k]!r}" for k in _PARAMS if k in loc and not isinstance(loc[k], Expr)]
    return f"{label}({', '.join([repr(a) for a in args] + params)})"


def _int_dist(a: np.ndarray) -> np.ndarray:
    return np.abs(a - np.round(a))


class Gen:
    """Draws expression trees with ``data.draw`` while evaluating them eagerly."""

    def __init__(self, data: Any, leaves: list[np.ndarray]) -> None:
        self.data = data
        self.leaves = leaves
        self.pool: list[Expr] = []

    def draw(self, strategy: Any) -> Any:
        return self.data.draw(strategy)

    def choice(self, items: list) -> Any:
        return self.draw(st.sampled_from(items))

    # -- helpers ------------------------------------------------------------------------

    def make(self, fn: Callable, args: list[Expr], err: Callable[[Any], float]) -> Expr | None:
        """Apply ``fn`` eagerly; None when the result is too large or errors in NumPy."""
        try:
            with np.errstate(all="ignore"):
                val = fn([a.val for a in args])
        except (ValueError, TypeError, IndexError):
            return None
        arr = np.asarray(val)
        if arr.size > MAX_SIZE or arr.ndim > 4:
            return None
        if arr.dtype.kind == "f" and finite_max(arr) > MAX_MAG:
            return None
        if arr.dtype.kind in "iu" and finite_max(arr) > MAX_INT:
            return None
        e = float(err(val))
        if not math.isfinite(e):
            return None
        fns = [a.fn for a in args]
        return Expr(lambda L, fns=fns: fn([f(L) for f in fns]), val, e, _describe(args))

    def const(self, kind: str) -> Any:
        """A Python scalar constant (weakly typed under NEP 50), sometimes a NumPy scalar."""
        if kind in "iu" or self.draw(st.booleans()):
            return self.choice([-2, -1, 0, 1, 2, 3])
        c = self.choice([0.5, -1.5, 2.0, 0.25, 3.0])
        if self.draw(st.integers(0, 9)) == 0:
            return np.float32(c)  # a strongly typed NumPy scalar
        return c

    # -- the generator ------------------------------------------------------------------

    def leaf(self) -> Expr:
        i = self.draw(st.integers(0, len(self.leaves) - 1))
        return Expr(lambda L, i=i: L[i], self.leaves[i], 0.0, f"L{i}")

    def expr(self, depth: int) -> Expr:
        if depth <= 0 or self.draw(st.integers(0, 5)) == 0:
            return self.leaf()
        if self.pool and self.draw(st.integers(0, 5)) == 0:
            return self.choice(self.pool)  # a shared subexpression
        child = self.expr(depth - 1)
        kind = self.choice(
            ["unary", "binary", "binary", "where", "clip", "astype", "reduce", "move"]
        )
        out = getattr(self, kind)(child, depth)
        out = out if out is not None else child
        self.pool.append(out)
        return out

    def compatible(self, a: Expr, depth: int) -> Expr | Any:
        """A second operand broadcastable with ``a``: a subtree, a full reduction, a constant."""
        if self.draw(st.integers(0, 3)) == 0:
            return self.const(a.kind)
        b = self.expr(depth - 1)
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            n = max(1, b.val.size)
            # the inputs' error plus the summation's own rounding (float32 sums round too)
            u, m = unit(b.val.dtype), finite_max(b.val)
            r = self.make(lambda v: np.sum(v[0]), [b], lambda v: n * b.err + 2 * n * u * n * m)
            if r is None or r.kind == "b":
                return self.const(a.kind)
            b = r
        if b.kind == "b":
            return self.const(a.kind)
        return b

    def unary(self, a: Expr, depth: int) -> Expr | None:
        if a.kind == "b":
            return None
        e, m = a.err, finite_max(a.val)
        if a.kind in "iu":
            name = self.choice(["negative", "absolute", "square", "floordiv", "mod", "neg_op"])
            fns = {
                "negative": lambda v: np.negative(v[0]),
                "neg_op": lambda v: -v[0],
                "absolute": lambda v: abs(v[0]),
                "square": lambda v: v[0] ** 2,
                "floordiv": lambda v: v[0] // 3,
                "mod": lambda v: np.remainder(v[0], 4),
            }
            return self.make(fns[name], [a], lambda v: 0.0)
        name = self.choice(
            [
                "negative",
                "absolute",
                "tanh",
                "sin",
                "cos",
                "arctan",
                "square",
                "cube",
                "exp",
                "sqrt",
                "log1p",
                "gauss",
                "floor",
                "sign",
                "expit",
            ]
        )
        if name in ("floor", "sign"):
            dist = _int_dist if name == "floor" else np.abs
            if near(a.val, dist, e):
                return None
            f = np.floor if name == "floor" else np.sign
            return self.make(lambda v: f(v[0]), [a], lambda v: 0.0)
        lip = {
            "negative": (lambda v: -v[0], 1.0),
            "absolute": (lambda v: np.abs(v[0]), 1.0),
            "tanh": (lambda v: np.tanh(v[0]), 1.0),
            "sin": (lambda v: np.sin(v[0]), 1.0),
            "cos": (lambda v: np.cos(v[0]), 1.0),
            "arctan": (lambda v: np.arctan(v[0]), 1.0),
            "square": (lambda v: v[0] ** 2, 2 * m + e),
            "cube": (lambda v: v[0] ** 3, 3 * (m + e) ** 2),
            "exp": (lambda v: np.exp(np.clip(v[0], -20, 12)), math.exp(min(m + e, 12))),
            "sqrt": (lambda v: np.sqrt(np.abs(v[0]) + 1.0), 0.5),
            "log1p": (lambda v: np.log1p(np.abs(v[0])), 1.0),
            "gauss": (lambda v: np.exp(-(v[0] ** 2)), 2 * (m + e)),
            "expit": (_expit, 0.25),
        }
        fn, L = lip[name]
        return self.make(fn, [a], lambda v: L * e + 8 * unit(np.asarray(v).dtype) * finite_max(v))

    def binary(self, a: Expr, depth: int) -> Expr | None:
        if a.kind == "b":
            return None
        b = self.compatible(a, depth)
        name = self.choice(
            ["add", "sub", "mul", "max", "min", "div", "hypot", "radd", "rsub", "rmul"]
        )
        if name == "hypot" and (a.kind in "iu" or not isinstance(b, Expr) or b.kind in "iu"):
            name = "add"
        fns = {
            "add": lambda x, y: x + y,
            "sub": lambda x, y: np.subtract(x, y),
            "mul": lambda x, y: x * y,
            "max": lambda x, y: np.maximum(x, y),
            "min": lambda x, y: np.minimum(x, y),
            "div": lambda x, y: x / (np.abs(y) + 1.0),
            "hypot": lambda x, y: np.hypot(x, y),
            "radd": lambda x, y: y + x,
            "rsub": lambda x, y: y - x,
            "rmul": lambda x, y: y * x,
        }
        f = fns[name]
        ea, ma = a.err, finite_max(a.val)
        if isinstance(b, Expr):
            eb, mb = b.err, finite_max(b.val)
        else:
            eb, mb = 0.0, abs(float(b))

        def err(v: Any) -> float:
            r = 8 * unit(np.asarray(v).dtype) * finite_max(v)
            if name in ("mul", "rmul"):
                return ea * mb + eb * ma + ea * eb + r
            if name == "div":
                return ea + eb * (ma + ea) + r
            return ea + eb + r

        if isinstance(b, Expr):
            return self.make(lambda v: f(v[0], v[1]), [a, b], err)
        return self.make(lambda v, c=b: f(v[0], c), [a], err)

    def condition(self, a: Expr, depth: int) -> Expr | None:
        """A boolean mask broadcastable with ``a``, built from comparisons not near a tie."""
        if a.kind == "b":
            return a
        b = self.compatible(a, depth)
        eb = b.err if isinstance(b, Expr) else 0.0
        name = self.choice(["gt", "le", "isnan", "and"])
        if name == "isnan":
            return self.make(lambda v: np.isnan(v[0]), [a], lambda v: 0.0)
        try:
            with np.errstate(all="ignore"):
                bv = b.val if isinstance(b, Expr) else b
                gap = np.abs(np.asarray(a.val, np.float64) - np.asarray(bv, np.float64))
        except ValueError:
            return None
        if near(gap, lambda g: g, a.err + eb):
            return None
        ops = {"gt": lambda x, y: x > y, "le": lambda x, y: np.less_equal(x, y)}
        if name == "and":
            ops["and"] = lambda x, y: np.logical_and(x > 0.5, y < 1)
        f = ops[name]
        if isinstance(b, Expr):
            if name == "and" and (
                near(a.val, lambda g: np.abs(g - 0.5), a.err)
                or near(b.val, lambda g: np.abs(g - 1), eb)
            ):
                return None
            return self.make(lambda v: f(v[0], v[1]), [a, b], lambda v: 0.0)
        if name == "and" and near(a.val, lambda g: np.abs(g - 0.5), a.err):
            return None
        return self.make(lambda v, c=b: f(v[0], c), [a], lambda v: 0.0)

    def where(self, a: Expr, depth: int) -> Expr | None:
        cond = self.condition(self.expr(depth - 1), depth - 1)
        if cond is None:
            return None
        if a.kind == "b":
            a = self.leaf()
        b = self.compatible(a, depth)
        eb = b.err if isinstance(b, Expr) else 0.0
        try:
            np.broadcast_shapes(cond.shape, a.shape, np.shape(b.val if isinstance(b, Expr) else b))
        except ValueError:
            return None

        def err(v: Any) -> float:
            return max(a.err, eb) + 8 * unit(np.asarray(v).dtype) * finite_max(v)

        if isinstance(b, Expr):
            return self.make(lambda v: np.where(v[0], v[1], v[2]), [cond, a, b], err)
        if self.draw(st.booleans()):
            return self.make(lambda v, c=b: np.where(v[0], c, v[1]), [cond, a], err)
        return self.make(lambda v, c=b: np.where(v[0], v[1], c), [cond, a], err)

    def clip(self, a: Expr, depth: int) -> Expr | None:
        if a.kind == "b":
            return None
        lo, hi = self.choice([(-1, 2), (0, None), (None, 1), (-0.5, 0.5)])
        if a.kind in "iu":
            lo = None if lo is None else int(math.floor(lo))
            hi = None if hi is None else int(math.ceil(hi))
        method = self.draw(st.booleans())

        def fn(v: list) -> Any:
            return v[0].clip(lo, hi) if method and hasattr(v[0], "clip") else np.clip(v[0], lo, hi)

        return self.make(fn, [a], lambda v: a.err + 8 * unit(np.asarray(v).dtype) * finite_max(v))

    def astype(self, a: Expr, depth: int) -> Expr | None:
        to = np.dtype(self.choice([np.float32, np.float64, np.int64, bool]))
        if to.kind in "ib" and a.kind == "f":
            if not np.all(np.isfinite(a.val)):
                return None
            dist = _int_dist if to.kind == "i" else np.abs
            if near(a.val, dist, a.err):
                return None
            return self.make(lambda v: v[0].astype(to), [a], lambda v: 0.0)
        if to.kind == "b" and a.kind in "iu":
            return self.make(lambda v: v[0].astype(to), [a], lambda v: 0.0)
        if to.kind == "b":
            return None
        return self.make(
            lambda v: v[0].astype(to), [a], lambda v: a.err + 2 * unit(to) * finite_max(v)
        )

    def reduce(self, a: Expr, depth: int) -> Expr | None:
        nd = len(a.shape)
        kind = self.choice(["sum", "mean", "prod", "max", "min", "var", "std"])
        style = self.choice(["none", "int", "tuple"]) if nd else "none"
        if style == "none":
            axis = None
            axes = tuple(range(nd))
        elif style == "int":
            axis = self.draw(st.integers(-nd, nd - 1))
            axes = (axis % nd,)
        else:
            axes = tuple(sorted(self.draw(st.sets(st.integers(0, nd - 1), max_size=nd))))
            axis = tuple(ax - nd if self.draw(st.booleans()) else ax for ax in axes)
        keepdims = self.draw(st.booleans())
        ddof = self.draw(st.integers(0, 1)) if kind in ("var", "std") else 0
        n = int(np.prod([a.shape[ax] for ax in axes]))
        if a.kind == "b" and kind in ("var", "std", "mean", "prod"):
            return None
        method = self.draw(st.booleans())

        def fn(v: list) -> Any:
            kw: dict = {"axis": axis, "keepdims": keepdims}
            if ddof:
                kw["ddof"] = ddof
            if method and hasattr(v[0], kind) and np.ndim(v[0]) > 0:
                return getattr(v[0], kind)(**kw)
            return getattr(np, kind)(v[0], **kw)

        m = finite_max(a.val)
        u = max(unit(a.dtype), unit(np.float64) if a.kind in "iub" else 0.0)
        e = a.err
        if kind in ("max", "min"):

            def err(v: Any) -> float:
                return e

        elif kind in ("sum", "mean"):
            s = n * m

            def err(v: Any) -> float:
                tot = n * e + 2 * n * u * s
                return (tot / max(n, 1) if kind == "mean" else tot) + 8 * unit(
                    np.asarray(v).dtype
                ) * finite_max(v)

        elif kind == "prod":
            if n > 16:
                return None
            mm = max(1.0, m + e)

            def err(v: Any) -> float:
                return n * mm ** max(n - 1, 0) * e + 4 * n * u * mm**n + 1e-300

        else:
            md = 2 * m + e
            dev = 2 * e + 4 * u * md

            def var_err() -> float:
                return (n * (2 * md * dev + u * md**2) + 2 * n * u * n * md**2) / max(n - ddof, 1)

            def err(v: Any) -> float:
                ev = var_err() + 8 * u * finite_max(v)
                return math.sqrt(ev) + 8 * u * finite_max(v) if kind == "std" else ev

        return self.make(fn, [a], err)

    def move(self, a: Expr, depth: int) -> Expr | None:
        shape = a.shape
        nd = len(shape)
        kind = self.choice(
            [
                "index",
                "transpose",
                "T",
                "swapaxes",
                "moveaxis",
                "expand_dims",
                "squeeze",
                "broadcast_to",
                "reshape",
            ]
        )
        if kind == "index":
            index: list = []
            for n in shape:
                c = self.draw(st.integers(0, 5))
                if c == 0 and n > 0:
                    index.append(self.draw(st.integers(-n, n - 1)))
                elif c in (1, 2):
                    start = self.draw(st.none() | st.integers(-n - 1, n + 1))
                    stop = self.draw(st.none() | st.integers(-n - 1, n + 1))
                    step = self.draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
                    index.append(slice(start, stop, step))
                else:
                    index.append(slice(None))
                if self.draw(st.integers(0, 4)) == 0:
                    index.append(None)
            if self.draw(st.integers(0, 3)) == 0:
                index.insert(self.draw(st.integers(0, len(index))), None)
            if index and self.draw(st.integers(0, 4)) == 0:
                index = [Ellipsis] + index[self.draw(st.integers(0, len(index))) :]
            idx = tuple(index)
            return self.make(lambda v: v[0][idx], [a], lambda v: a.err)
        if kind == "T":
            return self.make(lambda v: v[0].T, [a], lambda v: a.err)
        if kind == "transpose":
            perm = self.draw(st.permutations(range(nd))) if nd else None
            return self.make(lambda v: np.transpose(v[0], perm), [a], lambda v: a.err)
        if kind in ("swapaxes", "moveaxis"):
            if not nd:
                return None
            i, j = self.draw(st.integers(-nd, nd - 1)), self.draw(st.integers(-nd, nd - 1))
            f = getattr(np, kind)
            return self.make(lambda v: f(v[0], i, j), [a], lambda v: a.err)
        if kind == "expand_dims":
            ax = self.draw(st.integers(-nd - 1, nd))
            return self.make(lambda v: np.expand_dims(v[0], ax), [a], lambda v: a.err)
        if kind == "squeeze":
            ones = [i for i, n in enumerate(shape) if n == 1]
            ax = self.choice([None] + ones) if ones else None
            return self.make(lambda v: np.squeeze(v[0], ax), [a], lambda v: a.err)
        if kind == "broadcast_to":
            extra = tuple(self.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=4 - nd)))
            new = extra + tuple(self.choice([1, 2, 3]) if n == 1 else n for n in shape)
            return self.make(lambda v: np.broadcast_to(v[0], new), [a], lambda v: a.err)
        size = int(np.prod(shape))
        options: list = [(-1,), (size,), shape + (1,), (1,) + shape]
        divs = [d for d in range(2, 8) if size and size % d == 0]
        if divs:
            d = self.choice(divs)
            options += [(d, -1), (-1, d), (1, d, size // d)]
        new = self.choice(options)
        method = self.draw(st.booleans())

        def fn(v: list) -> Any:
            return v[0].reshape(new) if method else np.reshape(v[0], new)

        return self.make(fn, [a], lambda v: a.err)


def _expit(v: list) -> Any:
    import scipy.special

    return scipy.special.expit(v[0])


# ---------------------------------------------------------------------------------------------
# inputs


@st.composite
def problems(draw: Any) -> tuple[tuple, list[np.ndarray]]:
    """A domain shape and 1-4 leaves broadcastable against it (mixed dtypes, NaNs, views)."""
    big = draw(st.integers(0, 9)) == 0
    if big:
        domain = draw(st.sampled_from([(70, 300), (3, 50, 120), (20000,), (150, 1, 140)]))
    else:
        nd = draw(st.integers(0, 4))
        domain = tuple(
            draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 4, 5, 7]), min_size=nd, max_size=nd))
        )
    main = np.dtype(draw(st.sampled_from([np.float64, np.float32, np.int64])))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    leaves = []
    for _ in range(draw(st.integers(1, 4))):
        nd = draw(st.integers(0, len(domain)))
        shape = tuple(1 if draw(st.integers(0, 3)) == 0 else n for n in domain[len(domain) - nd :])
        dt = (
            main
            if draw(st.integers(0, 4))
            else np.dtype(draw(st.sampled_from([np.float64, np.float32, np.int64])))
        )
        if dt.kind == "i":
            arr = rng.integers(-5, 6, size=shape).astype(dt)
        else:
            arr = rng.uniform(-3, 3, size=shape).astype(dt)
            if arr.size and draw(st.integers(0, 4)) == 0:
                arr.flat[rng.integers(0, arr.size, size=2)] = np.nan
        if arr.ndim and draw(st.integers(0, 3)) == 0:
            wide = np.repeat(arr, 2, axis=-1)  # a strided, non-contiguous view
            arr = wide[..., ::2]
        leaves.append(arr)
    return domain, leaves


# ---------------------------------------------------------------------------------------------
# the check


def check(lazy: np.ndarray, eager: Any, err: float, what: str) -> None:
    """``lazy`` equals ``eager``: shape, dtype, NaN positions, then values within ``4*err``
    plus a few ulps of each value (integers and booleans exactly)."""
    eager = np.asarray(eager)
    lazy = np.asarray(lazy)
    assert lazy.shape == eager.shape, what
    assert lazy.dtype == eager.dtype, what
    if eager.dtype.kind in "biu":
        np.testing.assert_array_equal(lazy, eager, err_msg=what)
        return
    np.testing.assert_array_equal(np.isnan(lazy), np.isnan(eager), err_msg=what)
    fin = np.isfinite(eager)
    np.testing.assert_array_equal(lazy[~fin], eager[~fin], err_msg=what)
    u = unit(eager.dtype)
    tol = 4 * err + 8 * u * np.abs(eager[fin]) + (1e-300 if u < 1e-10 else 1e-37)
    diff = np.abs(lazy[fin].astype(np.float64) - eager[fin].astype(np.float64))
    bad = diff > tol
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} values differ; worst diff {diff.max():.3g}, err bound {err:.3g}"
    )


def run_example(data: Any, engine: str) -> None:
    domain, leaves = data.draw(problems(), label="problem")
    gen = Gen(data, leaves)
    globals()["_LEAVES"] = leaves  # for debugging a failure
    roots = [gen.expr(6) for _ in range(data.draw(st.integers(1, 3), label="n_roots"))]
    lazy_leaves = [fl.asarray(a) for a in leaves]
    with np.errstate(all="ignore"):
        eager = [r.fn(list(leaves)) for r in roots]
        nodes = [r.fn(lazy_leaves) for r in roots]
        for node, e in zip(nodes, eager):
            assert np.shape(node) == np.shape(e)
            if isinstance(node, fl.LazyArray):
                assert node.dtype == np.asarray(e).dtype, (node, np.asarray(e).dtype)
        with fl.use_engine(engine):
            out = fl.materialize(*nodes)
    out = (out,) if len(nodes) == 1 else out
    for i, (o, e, r) in enumerate(zip(out, eager, roots)):
        others = "; ".join(f"root {k}: {q.desc}" for k, q in enumerate(roots) if k != i)
        check(o, e, r.err, f"root {i} of {len(roots)}, domain {domain}: {r.desc}; {others}")


SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("blocking", list(BLOCKINGS))
@SETTINGS
@given(data=st.data())
def test_lazy_equals_eager(blocking: str, data: Any) -> None:
    sizes = BLOCKINGS[blocking]
    with block_sizes(*sizes) if sizes else contextlib.nullcontext():
        run_example(data, "numpy")


# Block sizes do not matter to the numba engine, and every example compiles new kernels
# (about 0.5 s each): fewer examples, one blocking.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.skipif(not numba_engine.available(), reason="numba engine not available")
@settings(SETTINGS, max_examples=12)
@given(data=st.data())
def test_lazy_equals_eager_numba(data: Any) -> None:
    run_example(data, "numba")

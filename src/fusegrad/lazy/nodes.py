"""Lazy expression nodes: ``Leaf``, ``Map`` and ``Reduce``, hash-consed, that speak NumPy.

A node is a pure function over its shape. Building one computes nothing; ``materialize`` (in
``plan.py``) evaluates several together in fused kernels. Movement ops (``x[:, None]``,
``transpose``, ``broadcast_to`` ...) are pushed down to the leaves (``movement.py``), whose arrays
become NumPy views, so a kernel only ever sees leaves, constants, maps and reductions.

Example::

    >>> x = asarray(np.arange(3.0))
    >>> y = np.tanh(x) * 2          # a Map, nothing computed
    >>> y.shape, y.dtype
    ((3,), dtype('float64'))
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .ops import OPS, Op

Scalar = int | float | complex | bool | np.generic

# Hash-consing: the same expression built twice is one node. Values are weak so that a graph
# dies with its last user; keys hold ids of live argument nodes (kept alive by the node).
_INTERN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

# Interning scopes. A leaf is shared only within the scope it was made in, so a node built and
# computed before a call (on memory the user has mutated since) is never reused by it: every
# API call (grad, vjp, jvp, jit's recording) opens one scope, nested traces share the outer one,
# and fl.asarray outside any call makes a scope of its own. Movement-derived leaves inherit their
# parent's scope; views of values fusegrad computed (memory it owns and never hands out to be
# written) are in OWNED.
OWNED = 0
_scope_ids = itertools.count(1)


class _ScopeState(threading.local):
    current: int | None = None


_SCOPE = _ScopeState()


class interning_scope:
    """Open an interning scope for the block (or join the one already open in this thread).

    ``token`` re-enters an earlier scope (a ``vjp`` pullback called after its ``vjp``) when no
    scope is open. Leaves made inside are shared only with leaves made in the same scope.
    (A class, not a generator: every API call opens one.)

    >>> a = np.ones(3)
    >>> leaf(a) is leaf(a)                    # outside any scope: one scope per call
    False
    >>> with interning_scope():
    ...     leaf(a) is leaf(a)
    True
    """

    __slots__ = ("token", "opened")

    def __init__(self, token: int | None = None) -> None:
        self.token = token
        self.opened = False

    def __enter__(self) -> int:
        current = _SCOPE.current
        if current is not None:
            return current
        current = _SCOPE.current = next(_scope_ids) if self.token is None else self.token
        self.opened = True
        return current

    def __exit__(self, *exc: object) -> None:
        if self.opened:
            _SCOPE.current = None


def current_scope() -> int | None:
    """The interning scope open in this thread, if any."""
    return _SCOPE.current


class LazyArray:
    """Base of every lazy node: shape, dtype, NumPy protocols. See ``protocols.py``."""

    __slots__ = ("shape", "dtype", "cached", "_varying", "__weakref__")
    __array_priority__ = 100.0

    shape: tuple[int, ...]
    dtype: np.dtype
    cached: np.ndarray | None
    _varying: tuple[bool, ...] | None

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the value takes once materialised."""
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __hash__(self) -> int:
        return id(self)

    # Immutable: a copy is the same value (copy.deepcopy of a lazy value inside jit's recording
    # copied its leaf's array, a constant the replays never read again)
    def __copy__(self) -> LazyArray:
        return self

    def __deepcopy__(self, memo: dict) -> LazyArray:
        return self


class Leaf(LazyArray):
    """A concrete array (any strides, possibly a broadcast view) entering the lazy world."""

    __slots__ = ("array", "scope")
    array: np.ndarray
    scope: int | None

    def __repr__(self) -> str:
        return f"Leaf({self.shape}, {self.dtype})"


class Map(LazyArray):
    """An elementwise op over broadcast arguments (nodes or scalar constants).

    ``op`` is a name in ``ops.OPS``, ``"where"`` or ``"cast"`` (then ``dtype`` is the target).
    """

    __slots__ = ("op", "args")
    op: str
    args: tuple[Any, ...]  # nodes and scalar constants

    def __repr__(self) -> str:
        return f"Map({self.op}, {self.shape}, {self.dtype})"


class Reduce(LazyArray):
    """``kind`` (sum, prod, max, min) of ``arg`` over ``axes``; ``shape`` is any reshape of the
    keepdims result that only adds or removes size-1 axes."""

    __slots__ = ("kind", "arg", "axes", "inlined")
    kind: str
    arg: LazyArray
    axes: tuple[int, ...]
    inlined: tuple[LazyArray | None] | None  # the planner's decision (plan.inline), once made

    def __repr__(self) -> str:
        return f"Reduce({self.kind}, axes={self.axes}, {self.arg.shape}->{self.shape})"


def _intern(key: tuple, make) -> Any:
    node = _INTERN.get(key)
    if node is None:
        node = make()
        node.cached = None
        node._varying = None
        _INTERN[key] = node
    return node


# The number types of jit recordings (replay.Number), registered by replay.py
DYNAMIC_NUMBERS: set[type] = set()


def _const_key(c: Any) -> tuple:
    """The key of a scalar constant: its type and value, with the sign of a float zero
    (``x * -0.0`` is not ``x * 0.0``: the signs of the zeros they give differ)."""
    if type(c) in DYNAMIC_NUMBERS:  # a jit recording's number argument: one constant each
        return ("c", type(c).__mro__[1].__name__, ("dynamic", id(c)), None)
    v = c.item() if isinstance(c, np.generic) else c
    sign = math.copysign(1.0, v) if isinstance(v, float) else None
    if isinstance(v, float | complex) and v != v:
        # NaN equals no NaN, and .item() makes a new one each time: the key of a NaN constant
        # must still find the constant (plan.build_kernel looks it up by a key made again)
        v = ("nan", repr(v))
    if isinstance(c, np.generic):
        return ("c", c.dtype.str, v, sign)
    return ("c", type(c).__name__, v, sign)


def arg_key(a: Any) -> tuple:
    """The hash-consing key of a node argument: identity for nodes, type and value for scalars."""
    if isinstance(a, LazyArray):
        return ("n", id(a))
    return _const_key(a)


def leaf(array: np.ndarray, scope: int | None = None) -> Leaf:
    """The leaf for ``array`` in ``scope`` (default: the open scope, else a new one); views of
    the same memory with the same layout share one leaf within a scope.

    >>> leaf(np.zeros(3)).shape
    (3,)
    """
    if scope is None:
        scope = _SCOPE.current
        if scope is None:
            scope = next(_scope_ids)
    ai = array.__array_interface__
    key = (
        "leaf",
        ai["data"][0],
        array.shape,
        array.strides,
        array.dtype.str,
        id(_base(array)),
        scope,
    )

    def make() -> Leaf:
        n = Leaf.__new__(Leaf)
        n.array, n.shape, n.dtype, n.scope = array, array.shape, array.dtype, scope
        return n

    return _intern(key, make)


def _base(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def asarray(x: Any) -> LazyArray:
    """Wrap an array or scalar as a lazy node (a lazy value is returned as is).

    Lazy values built on the array compute and keep their values when first materialised, so
    write into it only while none is alive. fusegrad's own calls (``grad``, ``vjp``, ``jit`` ...)
    never reuse a value computed before them, whatever was written into an array since.

    >>> asarray(np.ones(2)) is asarray(asarray(np.ones(2)))
    False
    """
    if isinstance(x, LazyArray):
        return x
    if type(x) is np.ndarray:
        s = _small_leaf(x)  # the small-array path: a new leaf, nothing to share at that size
        if s is not None:
            return s
    return leaf(np.asarray(x))


def _no_small_path(x: np.ndarray) -> Leaf | None:
    return None


# lazy/small.py (which imports this module) hands in its leaf maker when the package is imported:
# an array below its size limit becomes an eager leaf while the path is on.
_small_leaf: Callable[[np.ndarray], Leaf | None] = _no_small_path


def install_small_path(take: Callable[[np.ndarray], Leaf | None]) -> None:
    """Install the small-array path's leaf maker (``lazy/small.py`` does, at import)."""
    global _small_leaf
    _small_leaf = take


_DTYPE_CACHE: dict[tuple, np.dtype] = {}


def _probe(a: Any) -> Any:
    """A stand-in for dtype resolution: an empty array of a node's dtype, or the scalar itself."""
    if isinstance(a, LazyArray):
        return np.empty((0,), a.dtype)
    return a


def _dtype_key(a: Any) -> Any:
    if isinstance(a, LazyArray):
        return a.dtype
    if isinstance(a, int | np.integer) and not isinstance(a, bool):
        return ("int",)
    return _const_key(a)[:2]


def result_dtype(op: str, args: tuple) -> np.dtype:
    """NumPy's result dtype of ``op`` on ``args``, NEP 50 weak scalars included.

    >>> result_dtype("add", (asarray(np.ones(2, np.float32)), 2.0))
    dtype('float32')
    """
    key = (op,) + tuple(_dtype_key(a) for a in args)
    dt = _DTYPE_CACHE.get(key)
    if dt is None:
        probes = tuple(_probe(a) for a in args)
        if op == "where":
            dt = np.where(np.empty((0,), bool), probes[1], probes[2]).dtype
        else:
            with np.errstate(all="ignore"):
                dt = np.asarray(OPS[op].ufunc(*probes)).dtype
        if not any(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in args):
            _DTYPE_CACHE[key] = dt
    return dt


def _shape_text(shape: tuple[int, ...]) -> str:
    """A shape as NumPy prints it in error messages: ``(3,)``, ``(2,4)``, ``()``."""
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _power_of_two(c: Any) -> bool:
    """Whether ``c`` is a Python number (a weak constant) that is ± a power of two."""
    if type(c) not in (int, float) or c == 0 or not math.isfinite(c):
        return False
    mantissa, _ = math.frexp(abs(c))
    return mantissa == 0.5 and abs(c) < 2.0**1000


def make_map(op: str, args: tuple, dtype: np.dtype | None = None) -> LazyArray:
    """The ``Map`` node ``op(*args)`` with NumPy broadcasting; raises NumPy's broadcasting error.

    >>> make_map("add", (asarray(np.ones((2, 1))), asarray(np.ones(3)))).shape
    (2, 3)
    """
    if (
        op == "divide"
        and dtype is None
        and _power_of_two(args[1])
        and isinstance(args[0], LazyArray)
    ):
        # x / 2.0 is exactly x * 0.5 (a power of two only moves the exponent), and a multiply
        # vectorises where a division by a runtime constant does not.
        return make_map("multiply", (args[0], 1.0 / args[1]))
    shapes = [a.shape for a in args if isinstance(a, LazyArray)]
    try:
        shape = np.broadcast_shapes(*shapes) if shapes else ()
    except ValueError:
        # NumPy's own message for a ufunc (and np.where): every operand's shape, scalars as ().
        text = " ".join(
            _shape_text(np.shape(a) if not isinstance(a, LazyArray) else a.shape) for a in args
        )
        raise ValueError(f"operands could not be broadcast together with shapes {text} ") from None
    if dtype is None:
        dtype = result_dtype(op, args)
    key = _map_key(op, dtype, args)

    def make() -> Map:
        n = Map.__new__(Map)
        n.op, n.args, n.shape, n.dtype = op, tuple(args), shape, dtype
        return n

    return _intern(key, make)


def _map_key(op: str, dtype: np.dtype, args: tuple) -> tuple:
    """The hash-consing key of the map ``op(*args)`` of ``dtype``."""
    return ("map", op, dtype.str) + tuple(arg_key(a) for a in args)


_REDUCE_IDENTITY_DTYPE: dict[tuple, np.dtype] = {}


def reduce_dtype(kind: str, dtype: np.dtype) -> np.dtype:
    """The dtype NumPy gives ``np.sum``/``prod``/``max``/``min`` of an array of ``dtype``."""
    key = (kind, dtype.str)
    dt = _REDUCE_IDENTITY_DTYPE.get(key)
    if dt is None:
        fns: dict[str, Callable[..., Any]] = {
            "sum": np.sum,
            "prod": np.prod,
            "max": np.max,
            "min": np.min,
        }
        fn = fns[kind]
        dt = np.asarray(fn(np.zeros((1,), dtype))).dtype
        _REDUCE_IDENTITY_DTYPE[key] = dt
    return dt


def make_reduce(kind: str, arg: LazyArray, axes: tuple[int, ...], shape: tuple[int, ...]) -> Reduce:
    """The raw ``Reduce`` node; use ``reductions.reduce`` for the simplifying front end."""
    dtype = reduce_dtype(kind, arg.dtype)
    key = ("reduce", kind, id(arg), axes, shape)

    def make() -> Reduce:
        n = Reduce.__new__(Reduce)
        n.kind, n.arg, n.axes, n.shape, n.dtype = kind, arg, axes, shape, dtype
        n.inlined = None
        return n

    return _intern(key, make)


def forget_arguments(nodes: Any) -> None:
    """Computed maps among ``nodes`` forget their arguments, and leave the hash-consing table
    (its keys are their arguments' identities): what a value was computed from is freed once
    nothing else holds it. The 8 MiB ``X @ W1`` under an MLP's ``tanh(X @ W1 + b)`` is then
    freed after the forward kernel, where the node of ``tanh`` kept it through the backward pass.

    >>> x = asarray(np.ones(3)); y = make_map("exp", (x,))
    >>> y.cached = np.exp(np.ones(3)); forget_arguments([y]); y.args
    ()
    """
    for n in nodes:
        if type(n) is not Map or n.cached is None or not n.args:
            continue
        varying(n)  # (from its arguments, while it has them)
        key = _map_key(n.op, n.dtype, n.args)
        if _INTERN.get(key) is n:
            del _INTERN[key]
        n.args = ()


def varying(node: Any) -> tuple[bool, ...]:
    """For each axis of ``node``, whether its value can change along that axis.

    A broadcast view varies along no broadcast axis, so ``sum`` over such an axis is a product.

    >>> varying(asarray(np.broadcast_to(np.arange(3.0), (4, 3))))
    (False, True)
    """
    if not isinstance(node, LazyArray):
        return ()
    if node._varying is None:
        # Iterative post-order: a chain of 10^5 maps (an unrolled loop) must not recurse.
        stack = [node]
        while stack:
            n = stack[-1]
            if n._varying is not None:
                stack.pop()
                continue
            if isinstance(n, Map):
                todo = [a for a in n.args if isinstance(a, LazyArray) and a._varying is None]
                if todo:
                    stack.extend(todo)
                    continue
            stack.pop()
            n._varying = _own_varying(n)
    out = node._varying
    assert out is not None
    return out


def _own_varying(node: LazyArray) -> tuple[bool, ...]:
    """``varying`` of one node whose Map arguments already know theirs."""
    if isinstance(node, Leaf):
        a = node.array
        return tuple(n > 1 and s != 0 for n, s in zip(a.shape, a.strides))
    if isinstance(node, Map):
        nd = node.ndim
        flags = [False] * nd
        for arg in node.args:
            if not isinstance(arg, LazyArray):
                continue
            av = arg._varying or ()  # (set: the walk in ``varying`` went bottom-up)
            off = nd - len(av)
            for i, f in enumerate(av):
                flags[off + i] = flags[off + i] or f
        return tuple(flags[i] and node.shape[i] > 1 for i in range(nd))
    return tuple(n > 1 for n in node.shape)


def is_expensive(node: Any) -> bool:
    """Whether computing ``node`` (not counting stored values) calls a transcendental op."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if not isinstance(n, Map) or n.cached is not None:
            continue
        if n.op in OPS and OPS[n.op].expensive:
            return True
        for a in n.args:
            if id(a) not in seen:
                seen.add(id(a))
                stack.append(a)
    return False


def trampoline(gen: Any) -> Any:
    """Run a recursive walk written as a generator without Python recursion: the generator
    yields the generator of each sub-call and is sent its result. Graphs of unrolled loops are
    10^5 nodes deep, far past the interpreter's recursion limit.

    >>> def depth(n):
    ...     return 0 if n == 0 else 1 + (yield depth(n - 1))
    >>> trampoline(depth(10**5))
    100000
    """
    stack = [gen]
    value = None
    while stack:
        try:
            sub = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            continue
        stack.append(sub)
        value = None
    return value


def op_entry(name: str) -> Op | None:
    """The op table entry of a Map's op, or None for ``where``/``cast``."""
    return OPS.get(name)

"""Movement ops, pushed down to the leaves so that kernels only read leaf views.

Elementwise maps commute with movement (``tanh(x)[:, None] == tanh(x[:, None])``), so a movement
applied to a ``Map`` is applied to each argument (first broadcast to the map's shape, which costs
no memory: a stride-0 view). A ``Reduce`` moves for free when the movement only adds or removes
size-1 axes; any other movement of a reduction materialises it first (it is small).

Example::

    >>> from .nodes import asarray
    >>> x = asarray(np.arange(3.0))
    >>> expand_dims(np.tanh(x), 1).shape
    (3, 1)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import dask_leaves, replay, small
from .nodes import OWNED, LazyArray, Leaf, Map, Reduce, leaf, make_map, make_reduce, trampoline

View = Callable[[np.ndarray], np.ndarray]


def _planner_missing(node: Any) -> Any:
    raise RuntimeError(
        "fusegrad.lazy.movement has no planner installed: import fusegrad.lazy (the package) "
        "rather than loading its files on their own"
    )


# What movement cannot push down to the leaves is computed by the planner (plan.py), which sits
# above this module and imports it (for reshape). The package's __init__ hands the planner's
# functions in through install_planner; Python runs it before any submodule can be used.
_materialize: Callable[[LazyArray], np.ndarray] = _planner_missing
_inline: Callable[[Reduce], LazyArray | None] = _planner_missing


def install_planner(
    materialize: Callable[[LazyArray], np.ndarray], inline: Callable[[Reduce], LazyArray | None]
) -> None:
    """Compute with ``materialize`` what cannot be moved lazily, and move a short reduction as
    its elementwise form ``inline(reduce)`` (``lazy/__init__`` passes ``plan``'s)."""
    global _materialize, _inline
    _materialize, _inline = materialize, inline


class WouldCompute(Exception):
    """A movement inside ``lazy_only()`` needed a value computed."""


_LAZY_ONLY = threading.local()


@contextmanager
def lazy_only() -> Iterator[None]:
    """Movements inside the block compute nothing: one that would (its graph is too large to
    rebuild, or it reaches a reduction it cannot move) raises ``WouldCompute`` instead. The
    planner inlines a short reduction this way: computing part of a graph while it is collecting
    a kernel's nodes would change the nodes it has collected.

    >>> from .nodes import asarray
    >>> with lazy_only():
    ...     transpose(asarray(np.ones((2, 3)))).shape
    (3, 2)
    """
    before = getattr(_LAZY_ONLY, "on", False)
    _LAZY_ONLY.on = True
    try:
        yield
    finally:
        _LAZY_ONLY.on = before


def _computed(node: LazyArray) -> np.ndarray:
    """``node``'s value, for a movement that cannot be pushed down to the leaves."""
    if getattr(_LAZY_ONLY, "on", False):
        raise WouldCompute(f"moving {node!r} would compute it")
    with replay.sanctioned(always=True):
        return _materialize(node)


def _strip_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def move(node: LazyArray, view: View, reshape_only: bool = False) -> LazyArray:
    """Apply ``view`` (a NumPy view function on arrays of ``node.shape``) lazily to ``node``.

    ``reshape_only`` says the view only adds or removes size-1 axes, which a ``Reduce`` absorbs.

    >>> from .nodes import asarray
    >>> move(asarray(np.ones((2, 3))), np.transpose).shape
    (3, 2)
    """
    v = small.value_if_small(node)
    if v is not None:
        return small.wrap(view(v))  # a view of a small concrete value, at once
    dummy = np.broadcast_to(np.empty((), np.int8), node.shape)
    new_shape = view(dummy).shape
    if _larger_than(node, MOVE_AT_MOST):
        # Moving rebuilds every node under ``node``: in a loop that moves its growing state
        # (``h = f(h).T``) that is quadratic. A large graph is computed first and viewed.
        return leaf(view(_computed(node)), OWNED)
    return trampoline(_move(node, view, new_shape, reshape_only, {}, {}))


# The most nodes a movement rebuilds (pushing it down to the leaves); a larger graph is
# materialised first, so a loop that moves its state costs time linear in its steps.
MOVE_AT_MOST = 64


def _larger_than(node: LazyArray, limit: int) -> bool:
    """Whether moving ``node`` would rebuild more than ``limit`` maps (a movement stops at
    reductions: it reshapes or computes them).

    >>> from .nodes import asarray
    >>> x = asarray(np.ones(10**6))  # (arrays under small.EAGER_BELOW are computed at once)
    >>> _larger_than(np.exp(np.exp(x)), 1), _larger_than(np.exp(x), 1)
    (True, False)
    """
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if type(n) is not Map or n.cached is not None or id(n) in seen:
            continue
        seen.add(id(n))
        if len(seen) > limit:
            return True
        stack.extend(n.args)
    return False


def _move(
    node: LazyArray, view: View, new_shape: tuple, reshape_only: bool, memo: dict, wide: dict
) -> Any:
    """A generator (run by ``nodes.trampoline``: graphs of unrolled loops are deep) moving
    ``node``. ``wide`` holds one memo per shape that arguments are broadcast to first."""
    # The memo maps id(node) -> (node, result): holding the node keeps its id from being reused
    # by a temporary (the broadcast of an argument below dies as soon as it has been moved).
    done = memo.get(id(node))
    if done is not None and done[0] is node:
        return done[1]
    out: LazyArray
    if node.cached is not None:
        out = leaf(view(node.cached), OWNED)
    elif (
        isinstance(node, Leaf)
        and type(view) is _Reshape
        and not reshape_only
        and dask_leaves.source(node.array) is not None
    ):
        # a reshape that merges or splits axes of a Dask input's view is no strided view of
        # its chunks (and where NumPy would copy, it would copy the placeholder): Dask's
        out = dask_leaves.reshape(node.array, new_shape, node.scope)
    elif isinstance(node, Leaf):
        out = leaf(view(node.array), node.scope)
    elif isinstance(node, Map):
        args = []
        for a in node.args:
            if isinstance(a, LazyArray):
                if a.shape != node.shape:
                    shape = node.shape
                    a = yield _move(
                        a,
                        _broadcaster(shape),
                        shape,
                        False,
                        wide.setdefault(shape, {}),
                        wide,
                    )
                a = yield _move(a, view, new_shape, reshape_only, memo, wide)
            args.append(a)
        out = make_map(node.op, tuple(args), node.dtype)
    elif isinstance(node, Reduce) and reshape_only:
        assert _strip_ones(new_shape) == _strip_ones(node.shape)
        out = make_reduce(node.kind, node.arg, node.axes, tuple(new_shape))
    elif isinstance(node, Reduce):
        sub = _inline(node)  # a short reduction moves as its elementwise form, still lazy
        if sub is not None:
            out = yield _move(sub, view, new_shape, reshape_only, memo, wide)
        else:
            out = leaf(view(_computed(node)), OWNED)
    else:
        raise TypeError(f"cannot move {node!r}: a lazy node is a Leaf, a Map or a Reduce")
    memo[id(node)] = (node, out)
    return out


def _broadcaster(shape: tuple[int, ...]) -> View:
    return lambda v: np.broadcast_to(v, shape)


def broadcast_to(node: LazyArray, shape: tuple[int, ...]) -> LazyArray:
    """``np.broadcast_to``, lazily (NumPy's error for incompatible shapes)."""
    shape = tuple(shape)
    if node.shape == shape:
        return node
    np.broadcast_shapes(node.shape, shape)
    return move(
        node, lambda v: np.broadcast_to(v, shape), _strip_ones(shape) == _strip_ones(node.shape)
    )


def expand_dims(node: LazyArray, axis: int | tuple[int, ...]) -> LazyArray:
    """``np.expand_dims``, lazily."""
    return move(node, lambda v: np.expand_dims(v, axis), reshape_only=True)


def squeeze(node: LazyArray, axis: int | tuple[int, ...] | None = None) -> LazyArray:
    """``np.squeeze``, lazily."""
    return move(node, lambda v: np.squeeze(v, axis), reshape_only=True)


def transpose(node: LazyArray, axes: Any = None) -> LazyArray:
    """``np.transpose``, lazily."""
    return move(node, lambda v: v.transpose(axes))  # np.transpose of an ndarray, less wrapping


def swapaxes(node: LazyArray, a: int, b: int) -> LazyArray:
    """``np.swapaxes``, lazily."""
    return move(node, lambda v: np.swapaxes(v, a, b))


def moveaxis(node: LazyArray, source: Any, destination: Any) -> LazyArray:
    """``np.moveaxis``, lazily."""
    return move(node, lambda v: np.moveaxis(v, source, destination))


def _resolve_shape(shape: Any, size: int) -> tuple[int, ...]:
    """The target shape of a reshape of ``size`` elements with ``-1`` resolved; NumPy's error.

    Computed by hand: probing NumPy with a size-0 array would make ``-1`` ambiguous.

    >>> _resolve_shape((-1, 2), 6)
    (3, 2)
    """
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    shape = tuple(int(n) for n in shape)
    known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
    bad = shape.count(-1) > 1 or any(n < -1 for n in shape)
    if not bad and -1 in shape:
        bad = known == 0 or size % known != 0
        if not bad:
            shape = tuple(size // known if n == -1 else n for n in shape)
    elif not bad:
        bad = known != size
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if bad:
        text = ",".join("newaxis" if n == -1 else str(n) for n in shape)
        text += "," if len(shape) == 1 else ""
        raise ValueError(f"cannot reshape array of size {size} into shape ({text})")
    return shape


def reshape(node: LazyArray, shape: Any) -> LazyArray:
    """``np.reshape`` when every leaf allows it as a view; otherwise the value is materialised.

    >>> from .nodes import asarray
    >>> reshape(asarray(np.ones((2, 3))), (3, 2)).shape
    (3, 2)
    """
    v = small.value_if_small(node) if shape is not None else None
    if v is not None:
        return small.wrap(v.reshape(shape))  # as np.reshape of an ndarray, errors included
    new_shape = _resolve_shape(shape, node.size)
    if new_shape == node.shape:
        return node
    only_ones = _strip_ones(new_shape) == _strip_ones(node.shape)
    try:
        return move(node, _Reshape(new_shape), only_ones)
    except ValueError:
        scope = node.scope if isinstance(node, Leaf) else OWNED
        if replay.active() is not None:
            # a copy: in a jit recording, a step of the program (copied again at each replay)
            out = replay.step(np.reshape, (node, new_shape), {}, _concrete)
            return out if isinstance(out, LazyArray) else leaf(out, scope)
        return leaf(np.reshape(_materialize(node), new_shape), scope)


class _Reshape:
    """The view ``np.reshape(v, shape, copy=False)`` (a ValueError where it would copy); a
    leaf of a Dask input is reshaped by Dask instead (``_move``)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __call__(self, v: np.ndarray) -> np.ndarray:
        return np.reshape(v, self.shape, copy=False)


def _concrete(x: Any) -> Any:
    """A step's operand: a lazy value materialised."""
    return _materialize(x) if isinstance(x, LazyArray) else x


def is_basic_index(index: Any) -> bool:
    """Whether ``index`` is basic indexing (ints, slices, None, Ellipsis): a view in NumPy."""
    items = index if isinstance(index, tuple) else (index,)
    return all(
        i is None
        or i is Ellipsis
        or isinstance(i, slice | int | np.integer)
        and not isinstance(i, bool)
        for i in items
    )


def getitem(node: LazyArray, index: Any) -> LazyArray:
    """Basic indexing, lazily: ``x[:, None]``, ``x[1:, ::2]``, ``x[0]``."""
    items = index if isinstance(index, tuple) else (index,)
    only_ones = all(i is None or i is Ellipsis or i == slice(None) for i in items)
    if Ellipsis not in items:
        # x[0] of a 1-d array is a NumPy scalar, a copy; x[0, ...] is a 0-d view, which a jit
        # recording can still trace back to its input
        index = (*items, Ellipsis)
    return move(node, lambda v: v[index], only_ones)

"""The small-array path: below ``EAGER_BELOW`` elements, lazy ops on concrete values run eagerly.

Building, planning and launching a kernel costs tens of microseconds of Python; NumPy computes a
ufunc over a thousand elements in about one. So an op whose arguments are all concrete (leaves or
values already computed) and whose result has fewer than ``EAGER_BELOW`` elements is computed at
once with NumPy, and its result is a leaf: nothing to fuse is lost at that size, and a chain of
small ops costs what NumPy's does plus the protocol dispatch.

Inside fusegrad's own traces (``grad``, ``jvp``, ``jit``'s recording) the path is off, so that
gradients keep their fused kernels and memory bounds at every size (``fusing()``); for small
gradients called often, ``fusegrad.jit`` is the fast path.

Example::

    >>> import fusegrad.lazy as fl
    >>> y = np.tanh(fl.asarray(np.zeros(3))) * 2   # computed now: 3 elements
    >>> type(y).__name__, y.cached is None
    ('Leaf', True)
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from .nodes import LazyArray, Leaf

# Without this path, a 2-op expression on 10^3 float64 elements through the planner cost ~19x
# NumPy eager, a 5-op one ~22x (benchmarks/bench_lazy.py --only 4); from ~10^5 elements fused
# kernels beat eager NumPy (section 2 there), and an N-array below 10^4 is at most 80 KB.
# FUSEGRAD_EAGER_BELOW=0 turns the path off.
EAGER_BELOW = int(os.environ.get("FUSEGRAD_EAGER_BELOW", "10000"))

# How many fusing() blocks are open, in any thread: a trace elsewhere only makes this thread
# take the (always correct) lazy path for a while.
_fusing = [0]


@contextlib.contextmanager
def fusing() -> Iterator[None]:
    """Turn the small-array path off inside the block (fusegrad's traces and ``jit``'s
    recordings use this)."""
    _fusing[0] += 1
    try:
        yield
    finally:
        _fusing[0] -= 1


def on() -> bool:
    """Whether the small-array path applies now."""
    return EAGER_BELOW > 0 and not _fusing[0]


def values_if_small(args: tuple) -> list | None:
    """The concrete values of ``args`` (lazy values, arrays, numbers) when their broadcast result
    has fewer than ``EAGER_BELOW`` elements and all are concrete; else ``None``."""
    if not on():
        return None
    vals, shapes = [], set()
    for a in args:
        if isinstance(a, Leaf):
            v = a.array
        elif isinstance(a, LazyArray):
            v = a.cached
            if v is None:
                return None
        elif isinstance(a, np.ndarray | int | float | complex | np.generic):
            v = a  # bool is an int
        else:
            return None  # another library's array (a tracer) handles the call
        if type(v) is np.ndarray:
            if v.size >= EAGER_BELOW:
                return None
            shapes.add(v.shape)
        vals.append(v)
    if len(shapes) > 1:
        try:
            size = math.prod(np.broadcast_shapes(*shapes))
        except ValueError:
            return None  # the lazy path raises NumPy's broadcasting message
        if size >= EAGER_BELOW:
            return None
    return vals


def wrap(value: Any) -> Any:
    """An eager result as a leaf (not hash-consed: it is new), scalars as 0-d leaves."""
    arr = np.asarray(value)
    node = Leaf.__new__(Leaf)
    node.array, node.shape, node.dtype = arr, arr.shape, arr.dtype
    node.cached = None
    node._varying = None
    return node

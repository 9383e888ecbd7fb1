"""``jit``: trace a function once per input signature, then only re-run its kernels.

A ``grad`` call costs tracing, rules, lazy-graph building and planning every time: a few hundred
microseconds of Python, whatever the size of the arrays. ``jit(f)`` pays that once per signature
(the shapes and dtypes of the array arguments, the values of the others) and records the kernels
the call ran (``fusegrad.lazy.replay``); later calls run the recorded kernels on the new arrays.

Semantics, as ``jax.jit``:

- NumPy arrays and NumPy scalars among the arguments (anywhere in a pytree) are the inputs; a new
  shape or dtype traces again. Python numbers, strings and other hashable values are compiled in:
  a new value traces again (they stay weak-typed, as NumPy treats them).
- Arrays the function reads from elsewhere (globals, closures) are constants of the recording:
  their contents are read at each call, but rebinding the name to another array is not seen.
- A function that cannot be replayed (it branches on an array's value, or calls something that
  needs concrete arrays, like ``np.matmul``'s rule or ``np.sort``) is simply called every time;
  ``cache_info()`` says why.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> g = fg.jit(fg.grad(lambda v: np.sum(np.tanh(v[:, None] - v[None, :]))))
    >>> g(np.zeros(3))
    array([0., 0., 0.])
    >>> g.cache_info()[0]["replayable"]
    True
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .ad.pytree import structure
from .lazy import LazyArray, engines, materialize_many, replay, small
from .lazy.nodes import _const_key, leaf

_STATIC = (int, float, complex, bool, str, bytes, type(None))


class _Entry:
    __slots__ = ("program", "rebuild", "reason", "signature", "calls")

    def __init__(self, signature: tuple) -> None:
        self.signature = signature
        self.program: replay.Program | None = None
        self.rebuild: Callable | None = None
        self.reason = ""
        self.calls = 0


def _static_key(x: Any) -> Any:
    if isinstance(x, float | complex | int):
        return _const_key(x)  # 0.0 and -0.0 differ; 1 and 1.0 and True differ
    return (type(x), x)


def jit(fun: Callable) -> Callable:
    """``fun``, traced once per input signature and replayed as its recorded kernels after.

    Works on any function of arrays built from NumPy calls, and on fusegrad transformations of
    one (``jit(grad(f))``, ``jit(value_and_grad(f))``). See the module docstring for what is
    an input and what is compiled in. ``wrapped.cache_info()`` lists the signatures seen.

    >>> f = jit(lambda x, y: np.sum((x[:, None] - y[None, :]) ** 2, axis=1))
    >>> f(np.arange(2.0), np.arange(3.0))
    array([5., 2.])
    """
    cache: dict[tuple, _Entry] = {}

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and all(type(a) is np.ndarray for a in args):
            # The common call, keyed without flattening: positional arrays only.
            entry = cache.get(_fast_key(args))
            if entry is not None and entry.program is not None:
                return _replay(entry, args)
        leaves, rebuild_args, tree_key = structure((args, kwargs))
        parts: list[Any] = [tree_key, engines.current()]
        positions, arrays = [], []
        for i, x in enumerate(leaves):
            if type(x) is np.ndarray or isinstance(x, np.generic):
                parts.append((x.shape, x.dtype.str, type(x)))
                positions.append(i)
                arrays.append(x)
            elif isinstance(x, _STATIC):
                parts.append(_static_key(x))
            else:
                try:
                    hash(x)
                except TypeError:
                    return fun(*args, **kwargs)  # e.g. a tracer or a lazy array: nothing to cache
                if isinstance(x, LazyArray) or hasattr(x, "__array_ufunc__"):
                    return fun(*args, **kwargs)
                parts.append((type(x), x))
        key = tuple(parts)
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = _Entry(key)
            if not kwargs and all(type(a) is np.ndarray for a in args):
                cache[_fast_key(args)] = entry
            return _record(fun, entry, leaves, rebuild_args, positions, arrays)
        if entry.program is None:
            entry.calls += 1
            return fun(*args, **kwargs)
        return _replay(entry, arrays)

    def cache_info() -> list[dict]:
        """One record per signature seen: whether it replays, its kernels, why not."""
        return [
            {
                "signature": e.signature,
                "replayable": e.program is not None,
                "kernels": e.program.kernels if e.program is not None else None,
                "calls": e.calls + 1,
                "reason": e.reason,
            }
            for e in {id(e): e for e in cache.values()}.values()
        ]

    wrapped.cache_info = cache_info  # type: ignore[attr-defined]
    wrapped.cache_clear = cache.clear  # type: ignore[attr-defined]
    return wrapped


def _fast_key(args: tuple) -> tuple:
    """The key of a call with positional ndarrays only (it cannot equal a pytree key)."""
    return (engines.current(), *[(a.shape, a.dtype.str) for a in args])


def _replay(entry: _Entry, arrays: list | tuple) -> Any:
    entry.calls += 1
    inputs = [
        a if type(a) is np.ndarray and a.flags.c_contiguous else np.ascontiguousarray(a)
        for a in arrays
    ]
    return entry.rebuild(entry.program.run(inputs))


def _recording_inputs(arrays: list, copy: bool) -> list[np.ndarray]:
    """What a recording runs on: for each C-contiguous array that overlaps no other argument, a
    view with a base of its own (its leaf and every node above it are new: nothing hash-consed
    or cached earlier is reused, so every kernel runs and is recorded); else a copy.

    >>> x = np.arange(3.0)
    >>> v, c = _recording_inputs([x, x], copy=False)  # the same memory twice: the second copied
    >>> np.shares_memory(v, x), np.shares_memory(c, x)
    (True, False)
    """
    out: list[np.ndarray] = []
    for a in arrays:
        fresh = None
        if not copy and type(a) is np.ndarray and a.flags.c_contiguous and a.size:
            if not any(np.may_share_memory(a, b) for b in out):
                try:
                    fresh = np.frombuffer(memoryview(a).cast("B"), a.dtype).reshape(a.shape)
                except (TypeError, ValueError):  # a dtype the buffer protocol lacks (datetime)
                    fresh = None
        out.append(np.array(a, order="C", copy=True) if fresh is None else fresh)
    return out


def _record(
    fun: Callable,
    entry: _Entry,
    leaves: list,
    rebuild_args: Callable,
    positions: list,
    arrays: list,
    copy: bool = False,
) -> Any:
    inputs = _recording_inputs(arrays, copy)
    traced = list(leaves)
    rec = replay.Recorder(inputs, top_is_api=getattr(fun, "__fusegrad_api__", False))
    for i, c, a in zip(positions, inputs, arrays):
        traced[i] = node = leaf(c)
        rec.originals[id(node)] = a
    args, kwargs = rebuild_args(traced)
    with rec, small.fusing():
        result = fun(*args, **kwargs)
        out_leaves, rebuild_out, _ = structure(result)
        with replay.sanctioned(always=True):  # jit's own evaluation of the results
            values = materialize_many(out_leaves)
        values = [
            replay.note_derived(v[()], v, replay.item)
            if isinstance(n, LazyArray) and v.ndim == 0
            else v
            for n, v in zip(out_leaves, values)
        ]
    if rec.foreign and not copy:
        # an array in an argument's memory reached a kernel by another way (a closure, a global):
        # only copies of the arguments tell the two apart
        return _record(fun, entry, leaves, rebuild_args, positions, arrays, copy=True)
    program = rec.program(values)
    if program is None:
        entry.reason = rec.escape or "not replayable"
        warnings.warn(
            f"fusegrad.jit: {getattr(fun, '__name__', 'the function')} will run uncompiled for "
            f"this signature: {entry.reason}",
            stacklevel=3,
        )
    else:
        entry.program, entry.rebuild = program, rebuild_out
    return rebuild_out(values)

"""``np.asarray``/``np.array`` of traced values, so code written for plain NumPy runs unchanged.

``np.asarray`` and ``np.array`` are not NumPy protocols: a traced value reaching them (a list
argument the function converts, ``np.asarray(x)`` at the top of a library function) could only
become an ndarray and lose its derivative. So while a trace runs (``tracing()``: ``grad``,
``vjp``, ``jvp`` and the functions built on them enter it), the four conversion functions of
the ``numpy`` module are wrapped (and ``np.full``/``np.full_like``, for a traced fill value,
``np.histogram``/``histogram_bin_edges``, for a traced ``range``, and ``np.r_``/``np.c_``): on
anything without a traced value inside they are NumPy's own (one type check, and the original is
called as is); on a traced value they return it (cast with ``astype`` if a ``dtype`` is asked
for), a list or tuple holding traced values becomes ``np.stack`` of its parts
(``fusegrad.numpy.array``), as ``jnp.asarray`` does, and a traced fill value is broadcast.
Outside traces NumPy's functions are in place, untouched. Code that imported them by name
(``from numpy import asarray``) keeps NumPy's; ``FUSEGRAD_PATCH_NUMPY=0`` in the environment
turns the wrapping off.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> fg.grad(lambda x: np.sum(np.asarray(x) ** 2))([1.0, 2.0])  # a list is a pytree
    [2.0, 4.0]
    >>> fg.grad(lambda x: np.sum(np.array([x, x * x])))(3.0)
    7.0
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..rules.tables import COMPOSITES
from .core import Tracer

ORIGINALS: dict[str, Any] = {}  # (functions, and the np.r_/np.c_ objects)


def holds_tracer(x: Any) -> bool:
    """Whether ``x`` is a traced value or a list or tuple holding one (at any depth)."""
    if isinstance(x, Tracer):
        return True
    if type(x) in (list, tuple):
        return any(holds_tracer(v) for v in x)
    return False


def stacked(values: Any) -> Any:
    """Nested lists and tuples holding traced values as one traced array: ``np.stack`` level by
    level, so the gradient flows to each value (what ``fusegrad.numpy.array`` and a traced
    ``np.array`` build).

    >>> stacked([1.0, 2.0])
    array([1., 2.])
    """
    if isinstance(values, Tracer):
        return values
    if isinstance(values, list | tuple) and holds_tracer(values):
        return np.stack([stacked(v) for v in values])
    return np.asarray(values)


def _traced_array(values: Any, dtype: Any, ndmin: int = 0) -> Any:
    out: Any = stacked(values)
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = out.astype(dtype)
    if ndmin > out.ndim:
        out = np.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def _wrap(name: str) -> Callable:
    original = getattr(np, name)
    ORIGINALS[name] = original

    @functools.wraps(original)
    def convert(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        if type(a) is np.ndarray:
            return original(a, dtype, *args, **kwargs)
        if isinstance(a, Tracer):
            return _traced_array(a, dtype, kwargs.get("ndmin", 0))
        try:
            return original(a, dtype, *args, **kwargs)
        except TypeError:  # a traced value inside a list refuses to become an array
            if type(a) in (list, tuple) and holds_tracer(a):
                return _traced_array(a, dtype, kwargs.get("ndmin", 0))
            raise

    convert.__module__ = "numpy"
    convert.__fusegrad_wrapped__ = True  # type: ignore[attr-defined]
    return convert


def _wrap_full(name: str) -> Callable:
    """``np.full(shape, v)`` / ``np.full_like(a, v)`` with a traced fill value ``v``: NumPy would
    write it into an empty array (``np.copyto``); here it is ``np.broadcast_to`` of it."""
    original = getattr(np, name)
    ORIGINALS[name] = original

    @functools.wraps(original)
    def full(first: Any, fill_value: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(fill_value, Tracer):
            return original(first, fill_value, dtype, *args, **kwargs)
        shape = np.shape(first) if name == "full_like" else first
        if name == "full_like" and kwargs.get("shape") is not None:
            shape = kwargs["shape"]
        if dtype is None and name == "full_like":
            dtype = getattr(first, "dtype", None)
        fill: Any = fill_value  # a Tracer, which speaks NumPy's protocols
        out = np.broadcast_to(fill, (shape,) if isinstance(shape, int) else tuple(shape))
        return out if dtype is None or np.dtype(dtype) == out.dtype else out.astype(dtype)

    full.__module__ = "numpy"
    return full


def _wrap_range(name: str) -> Callable:
    """``np.histogram`` / ``histogram_bin_edges`` with a traced ``range=`` and plain data: NumPy
    dispatches on ``a``, ``bins`` and ``weights`` only, so its own code would run on the traced
    ends (and write into them); here fusegrad's rule runs, whose edges move with the ends."""
    original = getattr(np, name)
    ORIGINALS[name] = original

    @functools.wraps(original)
    def histogram(a: Any, bins: Any = 10, range: Any = None, *args: Any, **kwargs: Any) -> Any:
        if range is None or not holds_tracer(range):
            return original(a, bins, range, *args, **kwargs)
        return COMPOSITES[original](a, bins, range, *args, **kwargs)

    histogram.__module__ = "numpy"
    return histogram


class _Concatenator:
    """``np.r_`` / ``np.c_`` indexed with traced values (NumPy's own converts each item with
    ``array``, which a traced value refuses): the items as arrays (``stacked``), 0-d ones as 1-d
    (``r_``) or 1-d ones as columns (``c_``), concatenated along the first (``r_``) or last
    (``c_``) axis. Without a traced item, NumPy's own; a string directive or a slice beside a
    traced item is an error naming the equivalent ``np.concatenate``."""

    def __init__(self, original: Any, columns: bool) -> None:
        self._original = original
        self._columns = columns

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if not any(holds_tracer(i) for i in items):
            return self._original[key]
        name = "np.c_" if self._columns else "np.r_"
        if any(isinstance(i, str | slice) for i in items):
            raise TypeError(
                f"{name}[...] with a traced value and a string directive or a slice: write the "
                "np.concatenate (or np.arange) it stands for"
            )
        parts = [stacked(i) for i in items]
        if self._columns:
            parts = [np.reshape(p, (-1, 1)) if np.ndim(p) < 2 else p for p in parts]
            return np.concatenate(parts, axis=-1)
        return np.concatenate([np.reshape(p, (1,)) if np.ndim(p) == 0 else p for p in parts])

    def __len__(self) -> int:
        return len(self._original)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


_ENABLED = os.environ.get("FUSEGRAD_PATCH_NUMPY", "1").strip() != "0"
_CONVERSIONS = ("asarray", "array", "asanyarray", "ascontiguousarray")
_WRAPPERS: dict[str, Any] = {name: _wrap(name) for name in _CONVERSIONS}
_WRAPPERS.update({name: _wrap_full(name) for name in ("full", "full_like")})
_WRAPPERS.update({name: _wrap_range(name) for name in ("histogram", "histogram_bin_edges")})
for _name, _columns in (("r_", False), ("c_", True)):
    ORIGINALS[_name] = getattr(np, _name)
    _WRAPPERS[_name] = _Concatenator(ORIGINALS[_name], _columns)
_depth = [0]
_lock = threading.Lock()
# The module's namespace, written with one dict update per switch: every grad call switches
# twice, and six setattr calls each way were a tenth of a small gradient's overhead.
_NUMPY_NAMESPACE = vars(np)
_PLAIN = {name: ORIGINALS[name] for name in _WRAPPERS}


class tracing:
    """NumPy's conversion functions accept traced values inside the block (nests, threads).

    >>> with tracing():
    ...     np.asarray is ORIGINALS["asarray"]  # the wrapper, while a trace runs
    False
    >>> np.asarray is ORIGINALS["asarray"]
    True
    """

    __slots__ = ()

    def __enter__(self) -> None:
        if not _ENABLED:
            return
        with _lock:
            _depth[0] += 1
            if _depth[0] == 1:
                _NUMPY_NAMESPACE.update(_WRAPPERS)

    def __exit__(self, *exc: object) -> None:
        if not _ENABLED:
            return
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                _NUMPY_NAMESPACE.update(_PLAIN)


__all__ = ["ORIGINALS", "tracing"]

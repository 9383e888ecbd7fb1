"""``BroadcastThunk``: a lazy elementwise cotangent that fuses into whatever consumes it.

It wraps a lazy node (``fusegrad.lazy``). ``+`` (with another thunk, an array or a scalar),
unary ``-``, ``*`` and ``/``, ``conj``/``real``/``imag``, any ufunc and the lazy array functions
(``np.sum(bt, axis=...)`` above all) build a bigger lazy expression instead of computing;
``unthunk`` materialises it, once (the node caches its value).

Example::

    >>> import fusegrad.lazy as fl
    >>> bt = BroadcastThunk(fl.asarray(np.ones(3)) * 2)
    >>> total = np.sum(-bt + 1.0)      # still lazy
    >>> float(unthunk(total))
    -3.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lazy import LazyArray, asarray, materialize
from .ownership import mark_owned
from .thunks import AbstractThunk, unthunk
from .zeros import AbstractZero


def _operand(x: Any) -> Any:
    """What a lazy op can take: the node of a BroadcastThunk, arrays and scalars as they are."""
    if isinstance(x, BroadcastThunk):
        return x.node
    if isinstance(x, AbstractThunk):
        return unthunk(x)
    return x


def _wrap(x: Any) -> Any:
    return BroadcastThunk(x) if isinstance(x, LazyArray) else x


class BroadcastThunk(AbstractThunk):
    """A lazy cotangent: ``BroadcastThunk(node)``; see the module docstring."""

    __slots__ = ("node",)
    keeps_lazy = True
    # A LazyArray. Any, because lazy/protocols.py attaches its NumPy protocols and operators at
    # import, where NumPy's stubs cannot see them: np.add(node, x) is typed by what it returns.
    node: Any

    def __init__(self, node: Any) -> None:
        self.node = asarray(node)

    def __repr__(self) -> str:
        return f"BroadcastThunk({self.node!r})"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return self.node.ndim

    def unthunk(self) -> np.ndarray:
        """The materialised value (computed once; the node keeps it)."""
        return materialize(self.node)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        args = tuple(_operand(x) for x in inputs)
        return _wrap(getattr(ufunc, method)(*args, **kwargs))

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        return _wrap(func(*(_operand(a) for a in args), **kwargs))

    def _binary(self, other: Any, fn: Any) -> Any:
        if isinstance(other, AbstractZero):
            return NotImplemented
        return _wrap(fn(self.node, _operand(other)))

    def __add__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return self
        return self._binary(other, np.add)

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return self
        return _wrap(np.add(_operand(other), self.node))

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return self
        return self._binary(other, np.subtract)

    def __rsub__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return -self
        return _wrap(np.subtract(_operand(other), self.node))

    def __neg__(self) -> BroadcastThunk:
        return BroadcastThunk(np.negative(self.node))

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return other
        return self._binary(other, np.multiply)

    def __rmul__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return other
        return _wrap(np.multiply(_operand(other), self.node))

    def __truediv__(self, other: Any) -> Any:
        return self._binary(other, np.divide)

    def conj(self) -> BroadcastThunk:
        return self if self.dtype.kind != "c" else BroadcastThunk(np.conjugate(self.node))

    @property
    def real(self) -> BroadcastThunk:
        return self if self.dtype.kind != "c" else _wrap(np.real(self.node))

    @property
    def imag(self) -> Any:
        if self.dtype.kind != "c":  # zeros: a stride-0 view, so still lazy and O(1) in memory
            return BroadcastThunk(np.broadcast_to(np.zeros((), self.dtype), self.shape))
        return _wrap(np.imag(self.node))

    def __lt__(self, other: Any) -> Any:
        return self._binary(other, np.less)

    def __le__(self, other: Any) -> Any:
        return self._binary(other, np.less_equal)

    def __gt__(self, other: Any) -> Any:
        return self._binary(other, np.greater)

    def __ge__(self, other: Any) -> Any:
        return self._binary(other, np.greater_equal)

    def add_into(self, dest: np.ndarray) -> np.ndarray:
        """``dest + self`` in one fused pass (``iadd`` calls this for an array it owns); the
        result is a new owned array, so the thunk is never materialised on its own."""
        return mark_owned(materialize(asarray(dest) + self.node))

    def project_to(self, projector: Any) -> Any:
        """``ProjectTo`` keeps the thunk lazy: a dtype change or a size-1 reshape is one more op."""
        if projector.kind != "array":
            return projector(self.unthunk())
        node = self.node
        if projector.needs_reshape(node.shape):
            node = np.reshape(node, projector.shape)
        if node.dtype.kind == "c" and projector.dtype.kind != "c":
            node = np.real(node)
        if node.dtype != projector.dtype:
            node = node.astype(projector.dtype)
        return BroadcastThunk(node)

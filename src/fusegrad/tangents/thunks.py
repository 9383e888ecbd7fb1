"""Deferred cotangents: ``Thunk(fn)``, ``InplaceThunk(add_fn, thunk)`` and ``unthunk``.

A thunk postpones computing a cotangent until something needs its value, so a cotangent that is
never used is never computed::

    >>> import numpy as np
    >>> t = Thunk(lambda: np.ones(2))
    >>> unthunk(t + 1.0)
    array([2., 2.])

Subclasses that set ``keeps_lazy = True`` (``BroadcastThunk``) implement their own operators
lazily; the algebra (``add``, ``ProjectTo``) then uses their operators instead of unthunking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import arith


class AbstractThunk:
    """Base of every deferred cotangent: ``unthunk()`` computes (one layer of) its value.

    Arithmetic unthunks: ``thunk + x``, ``x - thunk``, ``-thunk`` and ``2 * thunk`` all compute
    the value first. Lazy subclasses (``keeps_lazy = True``) override these operators.
    """

    __slots__ = ()
    keeps_lazy = False
    # NumPy must defer to our reflected operators instead of building object arrays (a lazy
    # subclass, BroadcastThunk, takes part in NumPy's dispatch with a method instead).
    __array_ufunc__: Any = None

    def unthunk(self) -> Any:
        raise NotImplementedError

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(unthunk(self), dtype=dtype)

    def __add__(self, other: Any) -> Any:
        return arith.add(unthunk(self), other)

    def __radd__(self, other: Any) -> Any:
        return arith.add(other, unthunk(self))

    def __sub__(self, other: Any) -> Any:
        return arith.add(unthunk(self), arith.scale(other, -1))

    def __rsub__(self, other: Any) -> Any:
        return arith.add(other, arith.scale(unthunk(self), -1))

    def __neg__(self) -> Any:
        return arith.scale(unthunk(self), -1)

    def __mul__(self, other: Any) -> Any:
        return arith.scale(unthunk(self), other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return arith.scale(unthunk(self), 1 / other)


class Thunk(AbstractThunk):
    """A cotangent computed on demand by ``fn()``, at most once.

    >>> Thunk(lambda: 2.0).unthunk()
    2.0
    """

    __slots__ = ("fn", "_value", "_done")

    fn: Callable[[], Any] | None
    _value: Any

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self._done = False
        self._value = None

    def unthunk(self) -> Any:
        if not self._done:
            self._value = self.fn()  # type: ignore[misc]  # fn is set until _done
            self._done = True
            self.fn = None  # drop the closure (and what it holds) once computed
        return self._value

    def __repr__(self) -> str:
        return f"Thunk({self.fn!r})" if not self._done else f"Thunk(<computed {self._value!r}>)"


class InplaceThunk(AbstractThunk):
    """A cotangent that can add itself into an accumulator: ``add_fn(dest)`` adds in place.

    ``thunk`` (a ``Thunk`` or a zero-argument callable) gives the value when there is nothing to
    add into. ``iadd(owned_dest, InplaceThunk(...))`` calls ``add_fn``, so no temporary is made.

    >>> import numpy as np
    >>> it = InplaceThunk(lambda d: np.add(d, 1.0, out=d), lambda: np.ones(2))
    >>> unthunk(it)
    array([1., 1.])
    """

    __slots__ = ("add_fn", "thunk")

    def __init__(self, add_fn: Callable[[Any], Any], thunk: Any) -> None:
        self.add_fn = add_fn
        self.thunk = thunk if isinstance(thunk, AbstractThunk) else Thunk(thunk)

    def unthunk(self) -> Any:
        return self.thunk.unthunk()

    def __repr__(self) -> str:
        return f"InplaceThunk({self.add_fn!r}, {self.thunk!r})"


def unthunk(x: Any) -> Any:
    """``x`` with every thunk layer removed; anything else is returned as is.

    >>> unthunk(Thunk(lambda: Thunk(lambda: 3.0))), unthunk(4.0)
    (3.0, 4.0)
    """
    while isinstance(x, AbstractThunk):
        x = x.unthunk()
    return x


def is_lazy_thunk(x: Any) -> bool:
    """True for a thunk that keeps itself lazy under arithmetic (``BroadcastThunk``)."""
    return isinstance(x, AbstractThunk) and getattr(type(x), "keeps_lazy", False)

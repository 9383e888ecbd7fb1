"""The two zero tangents: ``ZeroTangent()`` (a derivative that happens to be zero) and
``NoTangent()`` (no derivative exists: integers, bools, indices, shapes, strings).

Both are singletons, both are the additive identity, and both stay zero under scaling::

    >>> ZeroTangent() is ZeroTangent(), ZeroTangent() + 1.5, 2 * NoTangent()
    (True, 1.5, NoTangent())
"""

from __future__ import annotations

from typing import Any

from . import arith


class AbstractZero:
    """Base of the zero tangents: falsy, additive identity, absorbing under scalar products."""

    __slots__ = ()
    # NumPy must defer to our reflected operators instead of building object arrays.
    __array_ufunc__ = None
    _instance: AbstractZero | None = None

    def __new__(cls) -> AbstractZero:
        inst = cls.__dict__.get("_instance")
        if inst is None:
            inst = super().__new__(cls)
            cls._instance = inst
        return inst

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __reduce__(self) -> tuple:
        return (type(self), ())

    def __add__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return _join_zeros(self, other)
        return other

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return _join_zeros(other, self)
        return other

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, AbstractZero):
            return _join_zeros(self, other)
        return arith.scale(other, -1)

    def __rsub__(self, other: Any) -> Any:
        return self.__radd__(other)

    def __neg__(self) -> AbstractZero:
        return self

    def __pos__(self) -> AbstractZero:
        return self

    def __mul__(self, other: Any) -> AbstractZero:
        return self

    __rmul__ = __mul__
    __truediv__ = __mul__

    def conj(self) -> AbstractZero:
        return self

    @property
    def real(self) -> AbstractZero:
        return self

    @property
    def imag(self) -> AbstractZero:
        return self


class ZeroTangent(AbstractZero):
    """The zero tangent: the derivative could have been non-zero, but is zero here.

    >>> import numpy as np
    >>> ZeroTangent() + np.ones(2)
    array([1., 1.])
    """

    __slots__ = ()


class NoTangent(AbstractZero):
    """No derivative exists (integer and bool arguments, indices, shapes, strings).

    >>> NoTangent() + NoTangent()
    NoTangent()
    """

    __slots__ = ()


def _join_zeros(a: AbstractZero, b: AbstractZero) -> AbstractZero:
    # ZeroTangent is the more general of the two, so it wins either way round (commutativity).
    return a if isinstance(a, ZeroTangent) or not isinstance(b, ZeroTangent) else b


def is_zero(x: Any) -> bool:
    """True for ``ZeroTangent()`` and ``NoTangent()``.

    >>> is_zero(ZeroTangent()), is_zero(0.0)
    (True, False)
    """
    return isinstance(x, AbstractZero)

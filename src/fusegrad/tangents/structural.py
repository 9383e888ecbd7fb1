"""``Tangent(primal_type, **fields)``: the tangent of a dataclass or a plain object.

Fields that are not given are zero. Tuples, lists, dicts, arrays and floats need no wrapper:
they are their own tangents, nested arbitrarily::

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Point:
    ...     x: float
    ...     y: float
    >>> t = Tangent(Point, x=1.0)
    >>> t.y, Point(1.0, 2.0) + t
    (ZeroTangent(), Point(x=2.0, y=2.0))
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import arith
from .zeros import ZeroTangent


class Tangent:
    """Structural tangent of an object of type ``primal_type``: one tangent per field.

    >>> Point = dataclasses.make_dataclass("Point", ["x", "y"])
    >>> Tangent(Point, x=1.0) + Tangent(Point, x=2.0, y=3.0)
    Tangent(Point, x=3.0, y=3.0)
    """

    __slots__ = ("_primal_type", "_fields")
    __array_ufunc__ = None

    def __init__(self, primal_type: type, **fields: Any) -> None:
        if dataclasses.is_dataclass(primal_type):
            known = {f.name for f in dataclasses.fields(primal_type)}
            unknown = set(fields) - known
            if unknown:
                raise TypeError(
                    f"Tangent({primal_type.__name__}, ...) got fields {sorted(unknown)} that "
                    f"{primal_type.__name__} does not have; its fields are {sorted(known)}"
                )
        object.__setattr__(self, "_primal_type", primal_type)
        object.__setattr__(self, "_fields", dict(fields))

    @property
    def primal_type(self) -> type:
        """The type of the primal this is a tangent of."""
        return self._primal_type

    @property
    def fields(self) -> dict[str, Any]:
        """The fields given explicitly (missing ones are zero), as a new dict."""
        return dict(self._fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fields.get(name, ZeroTangent())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Tangent is immutable; build a new one with the changed field")

    def __repr__(self) -> str:
        parts = "".join(f", {k}={v!r}" for k, v in self._fields.items())
        return f"Tangent({self._primal_type.__name__}{parts})"

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Tangent) or other._primal_type is not self._primal_type:
            return NotImplemented
        keys = set(self._fields) | set(other._fields)
        return all(arith.tree_equal(getattr(self, k), getattr(other, k)) for k in keys)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (_rebuild, (self._primal_type, self._fields))

    def __add__(self, other: Any) -> Any:
        return arith.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return arith.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return arith.add(self, arith.scale(other, -1))

    def __neg__(self) -> Tangent:
        return arith.scale(self, -1)

    def __mul__(self, s: Any) -> Tangent:
        return arith.scale(self, s)

    __rmul__ = __mul__

    def __truediv__(self, s: Any) -> Tangent:
        return arith.scale(self, 1 / s)


def _rebuild(primal_type: type, fields: dict) -> Tangent:
    return Tangent(primal_type, **fields)

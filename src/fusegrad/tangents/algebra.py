"""Adding and scaling tangents: ``add`` (never mutates), ``iadd`` (in place when it is safe),
``scale``.

Arrays, Python and NumPy scalars, tuples, lists, dicts and ``Tangent`` add structurally; zeros
are the identity; plain thunks are unthunked; lazy thunks (``keeps_lazy``) add lazily through
their own operators::

    >>> from fusegrad.tangents import ZeroTangent
    >>> add((1.0, {"a": np.ones(2)}), (ZeroTangent(), {"a": 1.0}))
    (1.0, {'a': array([2., 2.])})
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
from typing import Any, cast

import numpy as np

from . import arith
from .ownership import mark_owned, owned
from .structural import Tangent
from .thunks import AbstractThunk, InplaceThunk, Thunk, is_lazy_thunk, unthunk
from .zeros import AbstractZero


def _is_numeric(x: Any) -> bool:
    # Arrays, scalars, and lazy arrays (anything with shape and dtype that is not a container).
    if isinstance(x, np.ndarray | np.generic | numbers.Number):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, tuple | list | dict)


def _kind(x: Any) -> str:
    return type(x).__name__


def add(a: Any, b: Any) -> Any:
    """``a + b`` for tangents, without changing either; a new array result is marked owned.

    >>> from fusegrad.tangents import ZeroTangent
    >>> add(ZeroTangent(), np.ones(2))
    array([1., 1.])
    >>> add([1.0, 2.0], [3.0, 4.0])
    [4.0, 6.0]
    """
    if type(a) is np.ndarray and type(b) is np.ndarray:  # the common case
        return mark_owned(np.add(a, b))
    if isinstance(a, AbstractZero):
        return a + b if isinstance(b, AbstractZero) else b
    if isinstance(b, AbstractZero):
        return a
    if is_lazy_thunk(a) or is_lazy_thunk(b):
        return a + b
    if isinstance(a, AbstractThunk):
        a = unthunk(a)
    if isinstance(b, AbstractThunk):
        b = unthunk(b)
    if isinstance(a, AbstractZero) or isinstance(b, AbstractZero):
        return add(a, b)
    if isinstance(a, Tangent) or isinstance(b, Tangent):
        return _add_structural(a, b)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return _add_sequences(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = add(out[k], v) if k in out else v
        return out
    if _is_numeric(a) and _is_numeric(b):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            out = np.add(a, b)
            return mark_owned(out) if out is not a and out is not b else out
        return a + b
    raise TypeError(
        f"cannot add tangents of types {_kind(a)} and {_kind(b)}: a tangent of an array is an "
        "array, of a tuple/list/dict the same container, of an object a Tangent"
    )


def _add_sequences(a: Any, b: Any) -> Any:
    if len(a) != len(b):
        raise ValueError(f"cannot add tangents of lengths {len(a)} and {len(b)}")
    vals = [add(x, y) for x, y in zip(a, b, strict=True)]
    if isinstance(a, list):
        return vals
    if hasattr(type(a), "_fields"):  # namedtuple
        return type(a)(*vals)
    return tuple(vals)


def _add_structural(a: Any, b: Any) -> Any:
    if isinstance(a, Tangent) and isinstance(b, Tangent):
        if a.primal_type is not b.primal_type:
            raise TypeError(
                f"cannot add Tangent({a.primal_type.__name__}) and "
                f"Tangent({b.primal_type.__name__}): they are tangents of different types"
            )
        fields = dict(a._fields)
        for k, v in b._fields.items():
            fields[k] = add(fields[k], v) if k in fields else v
        return Tangent(a.primal_type, **fields)
    tangent, primal = (a, b) if isinstance(a, Tangent) else (b, a)
    if isinstance(primal, tangent.primal_type):
        return move_primal(primal, tangent)
    raise TypeError(
        f"cannot add Tangent({tangent.primal_type.__name__}) and {_kind(primal)}: add it to "
        f"another Tangent({tangent.primal_type.__name__}) or to a {tangent.primal_type.__name__}"
    )


def move_primal(primal: Any, tangent: Tangent) -> Any:
    """A new primal with each field moved by the tangent: ``primal + tangent``.

    Dataclasses are rebuilt with ``dataclasses.replace``; other objects are shallow-copied and
    their fields set. ``primal`` itself is never changed.

    >>> Point = dataclasses.make_dataclass("Point", ["x", "y"])
    >>> move_primal(Point(1.0, 2.0), Tangent(Point, y=1.0))
    Point(x=1.0, y=3.0)
    """
    moved = {k: add(getattr(primal, k), v) for k, v in tangent._fields.items()}
    if dataclasses.is_dataclass(primal) and not isinstance(primal, type):
        return dataclasses.replace(primal, **moved)
    new = copy.copy(primal)
    for k, v in moved.items():
        object.__setattr__(new, k, v)
    return new


def scale(x: Any, s: Any) -> Any:
    """``s * x`` for a tangent ``x`` and a scalar ``s``, recursing into containers.

    >>> scale((1.0, np.ones(2)), -1)
    (-1.0, array([-1., -1.]))
    """
    if isinstance(x, AbstractZero):
        return x
    if is_lazy_thunk(x):
        return x * s
    x = unthunk(x)
    if isinstance(x, Tangent):
        return Tangent(x.primal_type, **{k: scale(v, s) for k, v in x._fields.items()})
    if isinstance(x, list):
        return [scale(v, s) for v in x]
    if isinstance(x, tuple):
        vals = [scale(v, s) for v in x]
        return type(x)(*vals) if hasattr(type(x), "_fields") else tuple(vals)
    if isinstance(x, dict):
        return {k: scale(v, s) for k, v in x.items()}
    return x * s


def iadd(dest: Any, x: Any) -> Any:
    """``dest + x``, written into ``dest`` when that is safe, else a new value; returns it.

    In place only when ``dest`` is an array fusegrad allocated (``owned``), writeable, inexact,
    and ``dest + x`` has ``dest``'s shape and dtype. Never a user's array, a view fusegrad did not
    make, an integer or a read-only array. An ``InplaceThunk`` adds itself with its ``add_fn``;
    a lazy thunk with an ``add_into(dest)`` method is asked to fuse the addition into ``dest``.

    >>> acc = add(np.zeros(2), np.ones(2))  # owned
    >>> iadd(acc, 1.0) is acc
    True
    >>> user = np.zeros(2); iadd(user, 1.0) is user
    False
    """
    if type(x) is Thunk:  # deferred only in case nobody asks; an accumulation asks
        x = x.unthunk()
    if (
        type(dest) is np.ndarray
        and type(x) is np.ndarray
        and dest.shape == x.shape
        and dest.dtype == x.dtype
        and dest.dtype.kind in "fc"
        and dest.flags.writeable
        and owned(dest)
    ):  # the common case: two arrays of one shape and dtype
        np.add(dest, x, out=dest)
        return dest
    if isinstance(dest, AbstractZero):
        return add(dest, x)
    if isinstance(x, AbstractZero):
        return dest
    if isinstance(dest, tuple | list) and isinstance(x, tuple | list) and len(dest) == len(x):
        vals = [iadd(d, v) for d, v in zip(dest, x, strict=True)]
        if isinstance(dest, list):
            return vals
        return type(dest)(*vals) if hasattr(type(dest), "_fields") else tuple(vals)
    if isinstance(dest, dict) and isinstance(x, dict):
        out = dict(dest)
        for k, v in x.items():
            out[k] = iadd(out[k], v) if k in out else v
        return out
    if isinstance(dest, Tangent) and isinstance(x, Tangent) and dest.primal_type is x.primal_type:
        fields = dict(dest._fields)
        for k, v in x._fields.items():
            fields[k] = iadd(fields[k], v) if k in fields else v
        return Tangent(dest.primal_type, **fields)
    if not _writable_accumulator(dest):
        return add(dest, x)
    if isinstance(x, InplaceThunk):
        out = x.add_fn(dest)
        return dest if out is None else out
    if is_lazy_thunk(x) and hasattr(x, "add_into") and _fits(dest, x):
        out = x.add_into(dest)
        return dest if out is None else out
    x = unthunk(x)
    if isinstance(x, AbstractZero):
        return dest
    if _is_numeric(x) and _fits(dest, x):
        if not isinstance(x, np.ndarray | np.generic | numbers.Number):
            x = np.asarray(x)  # a lazy array need not support ufunc out=
        if isinstance(x, np.ndarray | np.generic | numbers.Number):
            np.add(dest, cast(Any, x), out=dest)
            return dest
        # still not an array: a value traced by an outer differentiation (second order), which
        # cannot be written into an array
    return add(dest, x)


def _writable_accumulator(dest: Any) -> bool:
    return (
        type(dest) is np.ndarray
        and owned(dest)
        and dest.flags.writeable
        and np.issubdtype(dest.dtype, np.inexact)
    )


def _fits(dest: np.ndarray, x: Any) -> bool:
    # In place only if neither the shape nor the dtype of the sum differs from dest's.
    try:
        shape = np.broadcast_shapes(dest.shape, np.shape(x))
        other: Any = x if isinstance(x, numbers.Number) else x.dtype
        dtype = np.result_type(dest, other)
    except (ValueError, TypeError, AttributeError):
        return False
    return shape == dest.shape and dtype == dest.dtype


def tree_equal(a: Any, b: Any) -> bool:
    """Exact structural equality of two tangents (arrays compared by value).

    >>> tree_equal((np.ones(2), 1.0), (np.ones(2), 1.0))
    True
    """
    a, b = unthunk(a), unthunk(b)
    if isinstance(a, AbstractZero) or isinstance(b, AbstractZero):
        return a is b
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(tree_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(tree_equal(a[k], b[k]) for k in a)
    if isinstance(a, Tangent) or isinstance(b, Tangent):
        return isinstance(a, Tangent) and isinstance(b, Tangent) and a == b
    if _is_numeric(a) and _is_numeric(b):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return a == b


# The tangent types' operators (``thunk + x``, ``tangent == other``) call these through arith.
arith.install(add, scale, tree_equal)

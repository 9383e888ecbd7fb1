"""Pytrees: nested tuples, lists, dicts, namedtuples and dataclasses of arrays and numbers.

``flatten(tree) -> (leaves, rebuild)``; ``rebuild(new_leaves)`` puts leaves back in the same
structure. ``None`` is an empty subtree.

Example::

    >>> import numpy as np
    >>> leaves, rebuild = flatten({"w": np.ones(2), "b": (0.0, None)})  # dict keys in order
    >>> len(leaves), rebuild([1, 2])
    (2, {'b': (1, None), 'w': 2})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of ``tree`` in a fixed order, and the function that rebuilds the structure."""
    leaves: list[Any] = []
    spec = _flatten(tree, leaves)

    def rebuild(new_leaves: list[Any]) -> Any:
        it = iter(new_leaves)
        return _rebuild(spec, it)

    return leaves, rebuild


def structure(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any], tuple]:
    """``flatten(tree)`` plus a hashable key of the structure (types, keys, field names).

    >>> import numpy as np
    >>> structure((np.ones(2), {"a": 1.0}))[2][0] is tuple
    True
    """
    leaves: list[Any] = []
    spec = _flatten(tree, leaves)

    def rebuild(new_leaves: list[Any]) -> Any:
        return _rebuild(spec, iter(new_leaves))

    return leaves, rebuild, _key(spec)


def _key(spec: Any) -> tuple:
    tag = spec[0]
    if tag in ("none", "leaf"):
        return spec
    if tag == "namedtuple":
        return (tag, spec[1], tuple(_key(s) for s in spec[2]))
    if tag == "dict":
        return (tag, spec[1], tuple(spec[2]), tuple(_key(s) for s in spec[3]))
    if tag == "dataclass":
        return (tag, type(spec[1]), tuple(spec[2]), tuple(_key(s) for s in spec[3]))
    return (tag, tuple(_key(s) for s in spec[1]))


def _flatten(x: Any, leaves: list) -> Any:
    if x is None:
        return ("none",)
    if _is_namedtuple(x):
        return ("namedtuple", type(x), [_flatten(v, leaves) for v in x])
    if isinstance(x, tuple | list):
        return (type(x), [_flatten(v, leaves) for v in x])
    if isinstance(x, dict):
        keys = sorted(x, key=repr)
        return ("dict", type(x), keys, [_flatten(x[k], leaves) for k in keys])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = [f.name for f in dataclasses.fields(x) if f.init]
        return ("dataclass", x, names, [_flatten(getattr(x, n), leaves) for n in names])
    leaves.append(x)
    return ("leaf",)


def _rebuild(spec: Any, it: Any) -> Any:
    tag = spec[0]
    if tag == "none":
        return None
    if tag == "leaf":
        return next(it)
    if tag == "namedtuple":
        return spec[1](*[_rebuild(s, it) for s in spec[2]])
    if tag == "dict":
        return spec[1]((k, _rebuild(s, it)) for k, s in zip(spec[2], spec[3]))
    if tag == "dataclass":
        values = {n: _rebuild(s, it) for n, s in zip(spec[2], spec[3])}
        return dataclasses.replace(spec[1], **values)
    return tag(_rebuild(s, it) for s in spec[1])

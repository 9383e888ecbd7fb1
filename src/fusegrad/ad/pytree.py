"""Pytrees: nested tuples, lists, dicts, namedtuples and dataclasses of arrays and numbers.

``flatten(tree) -> (leaves, rebuild)``; ``rebuild(new_leaves)`` puts leaves back in the same
structure. ``None`` is an empty subtree.

Example::

    >>> leaves, rebuild = flatten({"w": np.ones(2), "b": (0.0, None)})
    >>> len(leaves), rebuild([1, 2])
    (2, {'b': (2, None), 'w': 1})
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

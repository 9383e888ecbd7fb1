"""Pytrees: nested tuples, lists, dicts, namedtuples, dataclasses and registered classes of
arrays and numbers.

``flatten(tree) -> (leaves, rebuild)``; ``rebuild(new_leaves)`` puts leaves back in the same
structure. ``None`` is an empty subtree. ``register_pytree_node`` teaches it a class of your own;
``ravel_pytree`` (``fusegrad.flatten``) turns a whole tree into one vector, for optimisers such as
``scipy.optimize.minimize``.

Example::

    >>> import numpy as np
    >>> leaves, rebuild = flatten({"w": np.ones(2), "b": (0.0, None)})  # dict keys in order
    >>> len(leaves), rebuild([1, 2])
    (2, {'b': (1, None), 'w': 2})
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

# type -> (flatten_fn(x) -> (children, aux_data), unflatten_fn(aux_data, children) -> x)
_NODES: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable) -> type:
    """Make instances of ``cls`` pytree nodes, as JAX's ``register_pytree_node``.

    ``flatten_fn(x)`` returns ``(children, aux_data)`` (children: a sequence of subtrees; aux_data:
    hashable static data); ``unflatten_fn(aux_data, children)`` rebuilds an instance. Gradients
    of such an argument are instances of ``cls`` holding the children's gradients.

    >>> class Affine:
    ...     def __init__(self, w, b):
    ...         self.w, self.b = w, b
    >>> _ = register_pytree_node(Affine, lambda a: ((a.w, a.b), None), lambda _, c: Affine(*c))
    >>> leaves, rebuild = flatten(Affine(np.ones(2), 0.5))
    >>> len(leaves), rebuild([1, 2]).b
    (2, 2)
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node needs a class, got {cls!r}")
    if cls in (tuple, list, dict, type(None)):
        raise ValueError(f"{cls.__name__} is already a pytree node")
    _NODES[cls] = (flatten_fn, unflatten_fn)
    return cls


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


# Leaves that need no look at registered nodes, namedtuples or dataclasses (the common case).
PLAIN_LEAVES = frozenset({np.ndarray, float, int, complex, bool, np.float64, np.float32, np.int64})


def _first(new_leaves: list[Any]) -> Any:
    return next(iter(new_leaves))


def flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of ``tree`` in a fixed order, and the function that rebuilds the structure."""
    t = type(tree)
    if t in PLAIN_LEAVES or getattr(t, "__fusegrad_traced__", False):
        return [tree], _first
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
    if spec == ("leaf",):
        return leaves, operator.itemgetter(0), _key(spec)
    if spec[0] in (tuple, list) and all(s == ("leaf",) for s in spec[1]):
        return leaves, spec[0], _key(spec)  # a flat tuple or list: the type rebuilds it

    def rebuild(new_leaves: list[Any]) -> Any:
        return _rebuild(spec, iter(new_leaves))

    return leaves, rebuild, _key(spec)


def same_structure(a: Any, b: Any) -> bool:
    """Whether trees ``a`` and ``b`` nest alike: the same dict keys, fields and node types,
    leaf for leaf (a tuple and a list of one length alike, and any two kinds of dict).

    >>> same_structure({"w": 1.0, "b": 2.0}, {"b": 0.0, "w": 0.0}), same_structure((1.0,), [2.0])
    (True, True)
    >>> same_structure({"w": 1.0, "b": 2.0}, [1.0, 2.0])
    False
    """
    return _loose(_flatten(a, [])) == _loose(_flatten(b, []))


def _loose(spec: Any) -> Any:
    tag = spec[0]
    if tag in ("none", "leaf"):
        return tag
    if tag == "namedtuple":
        return (tag, spec[1], [_loose(s) for s in spec[2]])
    if tag == "dict":
        return (
            tag,
            sorted(spec[2], key=repr),
            [_loose(s) for _, s in sorted(zip(spec[2], spec[3]), key=lambda ks: repr(ks[0]))],
        )
    if tag == "dataclass":
        return (tag, type(spec[1]), spec[2], [_loose(s) for s in spec[3]])
    if tag == "custom":
        return (tag, spec[1], [_loose(s) for s in spec[3]])
    return ("sequence", [_loose(s) for s in spec[1]])


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
    if tag == "custom":
        return (tag, spec[1], spec[2], tuple(_key(s) for s in spec[3]))
    return (tag, tuple(_key(s) for s in spec[1]))


def _flatten(x: Any, leaves: list) -> Any:
    if x is None:
        return ("none",)
    node = _NODES.get(type(x))
    if node is not None:
        children, aux = node[0](x)
        return ("custom", type(x), aux, [_flatten(c, leaves) for c in children])
    if _is_namedtuple(x):
        return ("namedtuple", type(x), [_flatten(v, leaves) for v in x])
    if isinstance(x, tuple | list):
        return (type(x), [_flatten(v, leaves) for v in x])
    if isinstance(x, dict):
        # a plain dict's keys in sorted order (as JAX); an OrderedDict's as it orders them; a
        # defaultdict keeps its default factory
        keys = list(x) if isinstance(x, collections.OrderedDict) else sorted(x, key=repr)
        kind: Any = type(x)
        if isinstance(x, collections.defaultdict):
            kind = (type(x), x.default_factory)
        return ("dict", kind, keys, [_flatten(x[k], leaves) for k in keys])
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
        pairs = [(k, _rebuild(s, it)) for k, s in zip(spec[2], spec[3])]
        return spec[1][0](spec[1][1], pairs) if type(spec[1]) is tuple else spec[1](pairs)
    if tag == "dataclass":
        values = {n: _rebuild(s, it) for n, s in zip(spec[2], spec[3])}
        return dataclasses.replace(spec[1], **values)
    if tag == "custom":
        return _NODES[spec[1]][1](spec[2], [_rebuild(s, it) for s in spec[3]])
    return tag(_rebuild(s, it) for s in spec[1])


def ravel_pytree(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(vector, unflatten)``: every leaf of ``tree`` raveled into one 1-D array, and the function
    that turns such a vector back into the tree (each leaf with its shape and dtype), as JAX's
    ``ravel_pytree`` and autograd's ``flatten``. Works on traced values too.

    The vector's dtype is the leaves' common one; ``unflatten`` casts each piece back.

    >>> vec, unflatten = ravel_pytree({"w": np.ones((2, 2)), "b": 0.5})
    >>> vec
    array([0.5, 1. , 1. , 1. , 1. ])
    >>> unflatten(vec * 2)["w"]
    array([[2., 2.],
           [2., 2.]])
    """
    leaves, rebuild = flatten(tree)
    shapes = [np.shape(v) for v in leaves]
    kinds = [_leaf_kind(v) for v in leaves]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    if leaves:
        dtype = np.result_type(*(k[0] for k in kinds))
        vector = np.concatenate([np.reshape(v, (-1,)) for v in leaves])
        if getattr(vector, "dtype", dtype) != dtype:
            vector = vector.astype(dtype)
    else:
        vector = np.zeros(0)
    offsets = np.cumsum([0] + sizes).tolist()

    def unflatten(vec: Any) -> Any:
        if np.ndim(vec) != 1 or np.shape(vec)[0] != offsets[-1]:
            raise ValueError(
                f"unflatten needs a vector of {offsets[-1]} elements (as ravel_pytree made), got "
                f"shape {np.shape(vec)}"
            )
        parts = []
        for (dt, python), shape, a, b in zip(kinds, shapes, offsets[:-1], offsets[1:]):
            part = np.reshape(vec[a:b], shape)
            if getattr(part, "dtype", dt) != dt:
                part = (np.real(part) if dt.kind != "c" else part).astype(dt)
            parts.append(python(part) if python is not None and not _traced(part) else part)
        return rebuild(parts)

    return vector, unflatten


def _leaf_kind(v: Any) -> tuple[np.dtype, Any]:
    """A leaf's dtype, and the Python type to give it back as (a Python float stays a float)."""
    primal = v
    while hasattr(primal, "__fusegrad_traced__") and hasattr(primal, "value"):
        primal = primal.value
    dt = np.dtype(getattr(primal, "dtype", None) or np.result_type(primal))
    python = type(v) if isinstance(v, int | float | complex) and not isinstance(v, bool) else None
    return dt, python


def _traced(x: Any) -> bool:
    return getattr(type(x), "__fusegrad_traced__", False)

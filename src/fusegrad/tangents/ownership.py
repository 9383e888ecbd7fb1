"""Which arrays fusegrad allocated itself, and so may update in place (``iadd``).

Ownership is tracked by ``id`` with a weak reference (ndarrays are weak-referenceable but not
hashable), so a freed array is forgotten and a recycled ``id`` is never mistaken for it::

    >>> a = mark_owned(np.zeros(3))
    >>> owned(a), owned(a[:2]), owned(np.zeros(3))
    (True, False, False)

The AD engine marks only arrays it allocates (results of ``add``), and must ``disown`` a
cotangent before handing it to a pullback (which may return it for two arguments) and the
gradients it returns to the user. ``ownership_scope()`` does the latter for a whole pass.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import numpy as np

from ..lazy import buffer_cache

_OWNED: dict[int, weakref.ref] = {}
_SCOPES: list[list[weakref.ref]] = []


def _forget(key: int, ref: weakref.ref) -> None:
    if _OWNED.get(key) is ref:
        del _OWNED[key]


def mark_owned(arr: Any) -> Any:
    """Record that fusegrad allocated ``arr`` (an ndarray), so ``iadd`` may write into it.

    Anything that is not an ndarray is returned unmarked. Returns ``arr``.

    >>> acc = mark_owned(np.zeros(2))
    """
    if type(arr) is np.ndarray:
        key = id(arr)
        ref = weakref.ref(arr, functools.partial(_forget, key))
        _OWNED[key] = ref
        if _SCOPES:
            _SCOPES[-1].append(ref)
    return arr


def owned(arr: Any) -> bool:
    """True when ``arr`` is an ndarray that fusegrad allocated (see ``mark_owned``).

    >>> owned(np.zeros(2))
    False
    """
    ref = _OWNED.get(id(arr))
    return ref is not None and ref() is arr


def disown(arr: Any) -> Any:
    """Forget that fusegrad owns ``arr`` (it is being shared or handed out). Returns ``arr``.

    >>> a = disown(mark_owned(np.zeros(2))); owned(a)
    False
    """
    ref = _OWNED.get(id(arr))
    if ref is not None and ref() is arr:
        del _OWNED[id(arr)]
    return arr


class ownership_scope:
    """Everything marked owned inside the block is disowned when it ends.

    Wrap one backward pass in it, so that the gradients given to the user are theirs.

    >>> with ownership_scope():
    ...     g = mark_owned(np.zeros(2))
    >>> owned(g)
    False
    """

    __slots__ = ()

    def __enter__(self) -> None:
        _SCOPES.append([])

    def __exit__(self, *exc: object) -> None:
        for ref in _SCOPES.pop():
            arr = ref()
            if arr is not None:
                disown(arr)


# A buffer the lazy layer's cache hands out again starts a new life: not fusegrad's to write into.
buffer_cache.on_reuse = disown

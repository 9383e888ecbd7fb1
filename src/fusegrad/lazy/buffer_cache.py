"""Large output buffers kept between calls, so a repeated gradient writes into memory that is
already mapped instead of faulting fresh pages in at every call.

glibc hands a freed block at the top of its heap back to the OS once more than its trim
threshold is free there; a gradient whose temporaries are freed when it returns (its ``X @ W1``,
the ``tanh`` kernel's output, the backward kernel's) then faults them in again at the next call:
the MLP at batch 4096 (three 8 MiB temporaries) took ~1,600-2,100 page faults a call, its
gradient 20-26 ms instead of 14 ms with none.

``empty(shape, dtype)`` hands out an array of at least ``MIN_BYTES``: one this module allocated
before, of that shape and dtype, when nothing but the cache refers to it any more (its
reference count: a result the caller keeps, a view of one (a view refers to its base), a tape
entry all count), else a new one it remembers. What the cache holds is bounded (``limit``:
``FUSEGRAD_BUFFER_CACHE_MB``, read at import, 128 MiB by default; 0 turns it off), the buffers
handed out least recently forgotten first. While ``tracemalloc`` traces, every buffer is a
fresh allocation, so ``fusegrad.memory.track_allocations`` and the benchmark's traced peaks
count what a call allocates, not what the cache kept from the one before.

Example::

    >>> a = empty((512, 512), np.float64)   # 2 MiB
    >>> del a
    >>> b = empty((512, 512), np.float64)   # the same buffer again, now nothing else holds it
    >>> c = empty((512, 512), np.float64)   # b is held: a new one
    >>> b is c
    False
"""

from __future__ import annotations

import math
import os
import sys
import threading
import tracemalloc
import warnings
from typing import Any

import numpy as np

# From 1 MiB: the temporaries of large programs, where faulting costs most (8 MiB: ~2,000 faults).
# Smaller values are mostly the small-array path's eager NumPy results, which never come here
# (the MLP at batch 256 faults ~160 pages a call either way; a 128 KiB threshold changed nothing).
MIN_BYTES = 1 << 20

_lock = threading.Lock()
_arrays: list[np.ndarray] = []  # least recently handed out first


def _nothing(arr: np.ndarray) -> Any:
    return arr


# Called on a buffer handed out again: ``tangents`` installs its ``disown``, so a buffer marked
# as fusegrad's own (writable in place) in an earlier life is not written into in its next one.
on_reuse: Any = _nothing


def _refs(arrays: list, i: int) -> int:
    return sys.getrefcount(arrays[i])


# The reference count of a buffer only the cache holds, measured through the same call the
# cache makes (the count sys.getrefcount sees depends on how the interpreter passes arguments).
_ALONE = _refs([np.empty(0)], 0)


DEFAULT_LIMIT_MB = 128


def _limit_from_env() -> int:
    """``FUSEGRAD_BUFFER_CACHE_MB`` in bytes: a number of MiB (0 turns the cache off); any other
    value warns, naming it, and the default applies (read at import, where an error would make
    ``import fusegrad`` fail)."""
    raw = os.environ.get("FUSEGRAD_BUFFER_CACHE_MB", "").strip()
    if not raw:
        return DEFAULT_LIMIT_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not (0 <= mb < float("inf")):
        warnings.warn(
            f"FUSEGRAD_BUFFER_CACHE_MB={raw!r} is not a number of MiB (e.g. 128, or 0 to turn "
            f"fusegrad's buffer cache off); using the default, {DEFAULT_LIMIT_MB}",
            RuntimeWarning,
            stacklevel=2,
        )
        return DEFAULT_LIMIT_MB << 20
    return int(mb * (1 << 20))


limit: int = _limit_from_env()


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array like ``np.empty(shape, dtype)``; a large one may be a buffer an
    earlier call used and nobody holds any more (see the module's docstring).

    >>> empty((2, 3), np.float32).shape
    (2, 3)
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    # (an object array would keep its stale elements alive while it waits in the cache)
    if nbytes < MIN_BYTES or 2 * nbytes > limit or dtype.hasobject or tracemalloc.is_tracing():
        return np.empty(shape, dtype)
    shape = tuple(shape)
    with _lock:
        # by index: a loop variable bound to a buffer would be one more reference to it
        for i in range(len(_arrays)):
            if (
                _arrays[i].shape == shape
                and _arrays[i].dtype == dtype
                and _refs(_arrays, i) == _ALONE
            ):
                found = _arrays.pop(i)
                _arrays.append(found)
                return on_reuse(found)
        _make_room(nbytes)
        a = np.empty(shape, dtype)
        _arrays.append(a)
        return a


def full(shape: tuple[int, ...], fill_value: Any, dtype: Any) -> np.ndarray:
    """``np.full(shape, fill_value, dtype)`` in a buffer from ``empty``.

    >>> full((2,), 1.5, np.float64).tolist()
    [1.5, 1.5]
    """
    a = empty(shape, dtype)
    a.fill(fill_value)
    return a


def _make_room(nbytes: int) -> None:
    """Forget the least recently handed out buffers until ``nbytes`` more fit under ``limit``:
    free ones first (their memory goes back to malloc), then held ones (they live on with their
    holders, outside the cache)."""
    total = sum(a.nbytes for a in _arrays) + nbytes
    for only_free in (True, False):
        i = 0
        while total > limit and i < len(_arrays):
            if only_free and _refs(_arrays, i) != _ALONE:
                i += 1
                continue
            total -= _arrays.pop(i).nbytes


def cached_bytes() -> int:
    """Bytes of the buffers the cache holds (those in use elsewhere included).

    >>> cached_bytes() >= 0
    True
    """
    with _lock:
        return sum(a.nbytes for a in _arrays)


def release() -> int:
    """Forget every cached buffer (the free ones go back to malloc); returns the bytes the cache
    held.

    >>> release() >= 0
    True
    """
    with _lock:
        held = sum(a.nbytes for a in _arrays)
        _arrays.clear()
        return held

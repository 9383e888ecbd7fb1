"""The large matrix products of a ``jit`` replay, split into blocks run on the worker pool, each
block one single-threaded BLAS call.

OpenBLAS threads one large product itself, its threads meeting at a barrier for every block of
the product. When another process holds a core, each barrier waits for the scheduler: on the
shared 2-core machine ``Xᵀ @ dZ`` of the MLP at batch 4096 (100×4096 by 4096×256) took 80-136 ms
instead of 4 ms on one thread. Split here, a product meets once, at its end: the output's rows
(or columns, when it has fewer rows) are cut into one block per worker thread, each written by
``np.matmul`` into its part of the output while OpenBLAS runs one thread per call
(``single_threaded``); a smaller product runs as NumPy runs it (``SPLIT_MIN_MADDS``). No
block is a partial sum: every element is computed by one call, over the whole contraction. On a
quiet machine the two are about as fast (the forward product 1.9-2.0 ms either way, ``Xᵀ @ dZ``
2.3 against 2.6 ms).

The thread count is OpenBLAS's process-wide setting (found in the OpenBLAS library NumPy
loaded); it is set to one only while split products run, and put back when the last one ends.
Without it (another BLAS, one worker thread) ``matmul`` is ``np.matmul``.

Example::

    >>> a, b = np.arange(6.0).reshape(3, 2), np.ones((2, 2))
    >>> matmul(a, b).tolist()
    [[1.0, 1.0], [5.0, 5.0], [9.0, 9.0]]
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .engines import numpy_blocked

# Products with at least this many multiply-adds are split (2^22: ~0.1 ms on one core; the
# pool's hand-off costs ~10-20 us): the MLP's at batch 4096 (105M) are; smaller ones run as
# NumPy runs them (OpenBLAS's own threads). Running those on one thread instead cost the MLP at
# batch 256 a third more per replay on a quiet machine (250 -> 350 us).
SPLIT_MIN_MADDS = 1 << 22

# setters and getters of the thread count, by the names OpenBLAS builds export
_SYMBOLS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


def _numpy_openblas() -> tuple[Callable, Callable] | None:
    """``(set_num_threads, get_num_threads)`` of the OpenBLAS library NumPy's ``matmul`` calls:
    the loaded OpenBLAS in NumPy's own folders (a wheel's ``numpy.libs``), else the only one
    loaded; None for another BLAS (or no ``/proc/self/maps`` to find it in)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()})
    except OSError:
        return None
    home = os.path.dirname(os.path.abspath(np.__file__))
    own = [p for p in paths if p.startswith((home + os.sep, home + ".libs" + os.sep))]
    for path in own or (paths if len(paths) == 1 else []):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _SYMBOLS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


class _SingleThreaded:
    """A context manager: OpenBLAS on one thread inside, its count put back when the last
    thread inside leaves (a count of those inside, under a lock)."""

    def __init__(self, api: tuple[Callable, Callable]) -> None:
        self.set, self.get = api
        self.lock = threading.Lock()
        self.inside = 0
        self.saved = 1

    def __enter__(self) -> None:
        with self.lock:
            if self.inside == 0:
                self.saved = self.get()
                if self.saved != 1:
                    self.set(1)
            self.inside += 1

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.inside -= 1
            if self.inside == 0 and self.saved != 1:
                self.set(self.saved)


_api: list = []  # [None] or [_SingleThreaded], found on first use


def single_threaded() -> _SingleThreaded | None:
    """The context manager keeping OpenBLAS on one thread, or None when NumPy's BLAS is not an
    OpenBLAS whose thread count can be set."""
    if not _api:
        found = _numpy_openblas()
        _api.append(None if found is None else _SingleThreaded(found))
    return _api[0]


def blocks(m: int, n: int, parts: int) -> list[tuple[slice, slice]]:
    """``parts`` blocks ``(rows, columns)`` of an ``m × n`` output, cut along its longer side.

    >>> blocks(4, 2, 2)
    [(slice(0, 2, None), slice(None, None, None)), (slice(2, 4, None), slice(None, None, None))]
    """
    whole = slice(None)
    if m >= n:
        return [(slice(m * t // parts, m * (t + 1) // parts), whole) for t in range(parts)]
    return [(whole, slice(n * t // parts, n * (t + 1) // parts)) for t in range(parts)]


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` (``out``: None or an array of the result's shape and
    dtype): of 2-d ``a``, ``b`` split across the worker pool when it is large."""
    madds = a.shape[0] * a.shape[1] * b.shape[1] if a.ndim == 2 and b.ndim == 2 else 0
    if madds < SPLIT_MIN_MADDS:  # (before anything else: a small product takes ~2 us)
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    single = single_threaded()
    m, n = a.shape[0], b.shape[1]
    parts = min(numpy_blocked.threads(), max(m, n))
    if single is None or parts < 2:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((m, n), np.result_type(a, b))
    cuts = blocks(m, n, parts)
    mm = np.matmul
    pool = numpy_blocked.pool()
    with single:
        done = [pool.submit(mm, a[r], b[:, c], out=out[r, c]) for r, c in cuts[1:]]
        try:
            r, c = cuts[0]
            mm(a[r], b[:, c], out=out[r, c])
        finally:
            for f in done:
                f.result()
    return out

"""Count the NumPy allocations made inside a block: ``track_allocations()``.

NumPy reports every array data buffer to ``tracemalloc`` under its own domain
(``np.lib.tracemalloc_domain``), so the numbers are deterministic and usable in tests::

    >>> with track_allocations() as report:
    ...     a = np.ones(1000)
    >>> report.count, report.total_bytes
    (1, 8000)

What is measured, and its limits:

- ``peak_bytes``: the highest traced memory above the level at entry, including buffers freed
  inside the block (a temporary counts). ``tracemalloc`` keeps one peak for all domains, so it
  also includes small Python objects created inside (usually a few KiB); bound it loosely.
- ``count``, ``total_bytes``, ``largest`` and ``arrays_at_least``: the NumPy buffers allocated
  inside the block and *still alive at its end* (``tracemalloc`` can only list live memory).
  A temporary freed inside is visible only in ``peak_bytes``, so to prove that no N×N array was
  ever allocated, bound ``peak_bytes``.
- ``largest``: each entry has ``bytes`` and ``where`` (``file:line`` of the first frame outside
  NumPy that allocated it); ``shape`` and ``dtype`` are None because ``tracemalloc`` only sees
  the size of a buffer.

While a tracker runs, fusegrad's cache of large output buffers (``release_buffers``) hands out
none it kept from an earlier call: what a block allocates is counted as it would be without it.

Trackers nest: an inner block does not disturb the outer one's peak. Tracing slows Python code
down a few times, so use it in tests and reports, not in benchmarks of speed.
"""

from __future__ import annotations

import os
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .lazy import buffer_cache

NUMPY_DOMAIN: int = np.lib.tracemalloc_domain
_NFRAMES = 8
_NUMPY_DIR = os.path.dirname(np.__file__)


@dataclass(frozen=True)
class Allocation:
    """One NumPy buffer: its size in bytes and where it was allocated (``file:line``)."""

    bytes: int
    where: str
    shape: tuple | None = None
    dtype: np.dtype | None = None


@dataclass
class AllocationReport:
    """What ``track_allocations()`` saw; filled in when the block ends.

    >>> with track_allocations() as r:
    ...     x = np.zeros(10)
    >>> r.arrays_at_least(80)
    1
    """

    count: int = 0
    peak_bytes: int = 0
    total_bytes: int = 0
    largest: list[Allocation] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    done: bool = False

    def arrays_at_least(self, nbytes: int) -> int:
        """How many allocations (alive at the end of the block) have at least ``nbytes`` bytes."""
        self._check_done()
        return sum(1 for s in self.sizes if s >= nbytes)

    def _check_done(self) -> None:
        if not self.done:
            raise RuntimeError("the report is filled in when the track_allocations() block ends")

    def __str__(self) -> str:
        lines = [
            f"{self.count} NumPy allocation(s) alive at exit, {self.total_bytes} bytes; "
            f"peak {self.peak_bytes} bytes"
        ]
        lines += [f"  {a.bytes:>12} bytes at {a.where}" for a in self.largest]
        return "\n".join(lines)


@dataclass
class _Frame:
    start_current: int
    peak_seen: int
    before: Counter


_STACK: list[_Frame] = []


def _numpy_traces(snapshot: tracemalloc.Snapshot) -> list[tracemalloc.Trace]:
    return list(snapshot.filter_traces([tracemalloc.DomainFilter(True, NUMPY_DOMAIN)]).traces)


def _key(trace: tracemalloc.Trace) -> tuple:
    return (trace.size, trace.traceback)


def _where(tb: tracemalloc.Traceback) -> str:
    for frame in reversed(tb):  # a Traceback lists the oldest frame first
        if not frame.filename.startswith(_NUMPY_DIR):
            return f"{frame.filename}:{frame.lineno}"
    return f"{tb[-1].filename}:{tb[-1].lineno}" if len(tb) else "?"


@contextmanager
def track_allocations(nlargest: int = 10) -> Iterator[AllocationReport]:
    """Track NumPy allocations inside the block; the report is filled in when it ends.

    >>> with track_allocations() as r:
    ...     t = np.ones(10**6); del t   # a freed temporary still shows in the peak
    >>> r.peak_bytes >= 8 * 10**6, r.count
    (True, 0)
    """
    started_here = not tracemalloc.is_tracing()
    if started_here:
        tracemalloc.start(_NFRAMES)
        before: Counter = Counter()
    else:
        before = Counter(_key(t) for t in _numpy_traces(tracemalloc.take_snapshot()))
    current, peak = tracemalloc.get_traced_memory()
    if _STACK:
        # Remember the outer block's peak so far before resetting the shared peak.
        _STACK[-1].peak_seen = max(_STACK[-1].peak_seen, peak)
    tracemalloc.reset_peak()
    frame = _Frame(start_current=current, peak_seen=current, before=before)
    _STACK.append(frame)
    report = AllocationReport()
    try:
        yield report
    finally:
        current, peak = tracemalloc.get_traced_memory()
        snapshot = tracemalloc.take_snapshot()
        _STACK.pop()
        if _STACK:
            _STACK[-1].peak_seen = max(_STACK[-1].peak_seen, frame.peak_seen, peak)
        elif started_here:
            tracemalloc.stop()
        leftover = Counter(frame.before)
        new: list[tracemalloc.Trace] = []
        for t in _numpy_traces(snapshot):
            k = _key(t)
            if leftover[k] > 0:
                leftover[k] -= 1
            else:
                new.append(t)
        new.sort(key=lambda t: t.size, reverse=True)
        report.count = len(new)
        report.sizes = [t.size for t in new]
        report.total_bytes = sum(report.sizes)
        report.peak_bytes = max(0, max(frame.peak_seen, peak) - frame.start_current)
        report.largest = [Allocation(t.size, _where(t.traceback)) for t in new[:nlargest]]
        report.done = True


def release_buffers() -> int:
    """Let go of the large output buffers fusegrad keeps for its next calls (its buffer cache,
    ``FUSEGRAD_BUFFER_CACHE_MB``, 128 MiB at most by default); returns the bytes it held. Those
    no one else holds go back to malloc.

    >>> release_buffers() >= 0
    True
    """
    return buffer_cache.release()

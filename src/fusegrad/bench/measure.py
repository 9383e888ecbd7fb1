"""Measuring one process: peak resident memory and the median time of a call.

Example:
    >>> s = time_call(lambda: sum(range(100)), min_samples=5, budget_s=0.05)
    >>> s["samples"] >= 5 and s["median_s"] > 0
    True
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable

_STATUS = "/proc/self/status"


def _status_kib(key: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakRSS:
    """Peak RSS above a baseline taken now.

    On Linux, writing ``5`` to ``/proc/self/clear_refs`` resets the high-water mark ``VmHWM`` to
    the current RSS, so the peak is exact. Elsewhere it falls back to the ``ru_maxrss`` delta,
    which under-reports when an earlier peak was higher than the baseline.

    Example:
        >>> p = PeakRSS()
        >>> p.delta_bytes() >= 0
        True
    """

    def __init__(self) -> None:
        self.exact = False
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.exact = _status_kib("VmHWM") is not None
        except OSError:
            pass
        if self.exact:
            self.base_kib = _status_kib("VmRSS") or 0
        else:
            self.base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def restart(self) -> None:
        """Reset the peak to the current RSS, keeping the baseline (so that memory freed since,
        such as a checked result, is not counted again); a no-op where peaks cannot be reset.

        Example:
            >>> p = PeakRSS(); p.restart(); p.delta_bytes() >= 0
            True
        """
        if self.exact:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")

    def delta_bytes(self) -> int:
        """Peak RSS since construction minus the baseline, in bytes (never negative).

        Example:
            >>> PeakRSS().delta_bytes() < 1 << 30
            True
        """
        peak = (
            _status_kib("VmHWM")
            if self.exact
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        )
        return max(0, (peak or 0) - self.base_kib) * 1024


def release_freed() -> None:
    """Hand memory already freed back to the OS (glibc's ``malloc_trim``; a no-op elsewhere).

    Freed heap blocks otherwise stay resident: a peak measured after a temporary (the
    benchmark's own correctness check) against a baseline taken before it would count them.

    Example:
        >>> release_freed()
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def time_call(
    fn: Callable,
    *,
    min_samples: int = 5,
    max_samples: int = 30,
    sample_s: float = 0.02,
    budget_s: float = 0.5,
    first_s: float | None = None,
) -> dict:
    """Median seconds per call of ``fn`` after it has been warmed up.

    Calls shorter than ``sample_s`` are batched so that each sample lasts about ``sample_s``
    (timer resolution and loop overhead stay negligible). The number of samples is what fits
    in ``budget_s`` but at least ``min_samples`` and at most ``max_samples``.

    Example:
        >>> time_call(lambda: None, min_samples=5, budget_s=0.01)["batch"] > 1
        True
    """
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    if first_s is not None:
        one = min(one, first_s)
    batch = 1 if one >= sample_s else max(1, math.ceil(sample_s / max(one, 1e-7)))
    per_sample = one * batch
    samples = max(min_samples, min(max_samples, int(budget_s / max(per_sample, 1e-9))))
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "samples": samples,
        "batch": batch,
    }

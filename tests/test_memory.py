"""fusegrad.memory.track_allocations: counts, bytes and peaks of NumPy allocations."""

import tracemalloc

import numpy as np
import pytest

from fusegrad.memory import track_allocations


def test_one_array_is_one_allocation():
    with track_allocations() as r:
        a = np.ones(1000)
    assert r.count == 1 and r.total_bytes == 8000
    assert r.largest[0].bytes == 8000 and "test_memory.py" in r.largest[0].where
    assert r.arrays_at_least(8000) == 1 and r.arrays_at_least(8001) == 0
    assert r.peak_bytes >= 8000
    del a


def test_freed_temporary_counts_in_the_peak_only():
    with track_allocations() as r:
        t = np.ones(10**6)
        del t
        small = np.zeros(10)
    assert r.peak_bytes >= 8 * 10**6
    assert r.count == 1 and r.total_bytes == 80
    del small


def test_arrays_from_before_are_not_counted():
    before = np.ones(5000)
    with track_allocations() as r:
        view = before[::2]
    assert r.count == 0 and r.total_bytes == 0 and r.peak_bytes < 8 * 5000
    del view


def test_nested_trackers_do_not_disturb_each_other():
    with track_allocations() as outer:
        a = np.ones(10**5)
        del a
        with track_allocations() as inner:
            b = np.ones(100)
        c = np.ones(200)
    assert inner.count == 1 and inner.total_bytes == 800
    assert inner.peak_bytes < 8 * 10**5
    assert outer.count == 2 and outer.total_bytes == 800 + 1600
    assert outer.peak_bytes >= 8 * 10**5
    del b, c


def test_tracing_started_by_someone_else_keeps_running():
    keep = np.ones(300)  # allocated while tracing: must not count as allocated inside
    tracemalloc.start()
    try:
        keep2 = np.ones(400)
        with track_allocations() as r:
            x = np.ones(50)
        assert tracemalloc.is_tracing()
        assert r.count == 1 and r.total_bytes == 400
    finally:
        tracemalloc.stop()
    del keep, keep2, x


def test_report_is_filled_in_at_the_end():
    with track_allocations() as r:
        with pytest.raises(RuntimeError, match="block ends"):
            r.arrays_at_least(1)
    assert r.done and "NumPy allocation" in str(r)
    assert not tracemalloc.is_tracing()

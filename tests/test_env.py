"""Environment variables: a bad value names the variable, the value and what it accepts.

``FUSEGRAD_ENGINE`` and ``FUSEGRAD_THREADS`` are read when a kernel runs, so a bad value is an
error at first use (as JAX treats a bad setting), never at ``import fusegrad``.
``FUSEGRAD_EAGER_BELOW`` is read at import: a bad value warns and the default applies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fusegrad.bench.runner import THP_ENV
from fusegrad.lazy import small
from fusegrad.lazy.engines import numpy_blocked

CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import numpy as np
        import fusegrad as fg
        from fusegrad.lazy import small
    out = {"imported": True, "eager_below": small.EAGER_BELOW,
           "grown_below": small.fused_from(small.GROWTH),
           "slow_below": small.fused_from(small.SLOW_SHARE),
           "warnings": [str(m.message) for m in w]}
    import fusegrad.lazy as fl
    out["eager_at_200k"] = type(np.tanh(fl.asarray(np.zeros(200_000)))).__name__ == "Leaf"
    try:
        x = np.linspace(0.0, 1.0, int(sys.argv[1]))
        g = fg.grad(lambda v: np.sum(np.tanh(v) * v))(x)
        out["ok"] = bool(np.allclose(g, np.tanh(x) + x * (1 - np.tanh(x) ** 2)))
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))
    """
)


def child(n: int = 100, **env: str) -> dict:
    full = dict(os.environ)
    for k in ("FUSEGRAD_ENGINE", "FUSEGRAD_THREADS", "FUSEGRAD_EAGER_BELOW", "GLIBC_TUNABLES"):
        full.pop(k, None)
    full.update(env)
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(n)], env=full, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_an_unknown_engine_is_an_error_at_first_use_naming_what_is_accepted():
    res = child(500_000, FUSEGRAD_ENGINE="gpu")  # a kernel runs (smaller ones run eagerly)
    assert res["imported"] and "ok" not in res
    err = res["error"]
    assert err.startswith("ValueError: FUSEGRAD_ENGINE='gpu' is not an engine")
    assert "auto, numpy" in err and "numba" in err


def test_engine_names_are_case_blind():
    assert child(FUSEGRAD_ENGINE=" NumPy ")["ok"]


@pytest.mark.parametrize("value", ["two", "0", "-3", "2.5", "1e1"])
def test_a_bad_thread_count_is_an_error_at_first_use(value):
    res = child(2_000_000, FUSEGRAD_THREADS=value)  # large enough to run on the thread pool
    assert res["imported"] and "ok" not in res
    assert res["error"].startswith(f"ValueError: FUSEGRAD_THREADS={value!r} is not a number")
    assert "positive whole number such as 2" in res["error"]


def test_thread_count_in_process(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_THREADS", "3")
    assert numpy_blocked.threads() == 3
    monkeypatch.setenv("FUSEGRAD_THREADS", "two")
    with pytest.raises(ValueError, match="FUSEGRAD_THREADS='two'"):
        numpy_blocked.threads()
    monkeypatch.delenv("FUSEGRAD_THREADS")
    assert numpy_blocked.threads() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value, want", [("1e4", 10_000), ("2500", 2500), ("0", 0), (" 7 ", 7)])
def test_eager_below_accepts_whole_numbers_in_either_notation(value, want):
    res = child(FUSEGRAD_EAGER_BELOW=value)
    assert res["eager_below"] == want and res["ok"] and not res["warnings"]


@pytest.mark.parametrize("value", ["lots", "-5", "2.5", "inf", "nan"])
def test_a_bad_eager_below_warns_and_keeps_the_default(value):
    res = child(FUSEGRAD_EAGER_BELOW=value)
    assert res["imported"] and res["ok"] and res["eager_below"] == small.STOCK_EAGER_BELOW
    (msg,) = res["warnings"]
    assert msg.startswith(f"FUSEGRAD_EAGER_BELOW={value!r} is not a number of elements")
    assert "such as 65536 or 1e5" in msg and f"using {small.STOCK_EAGER_BELOW}" in msg


# glibc's malloc as the benchmark runs every library at its fastest: freed memory kept mapped
KEPT = THP_ENV["GLIBC_TUNABLES"]


@pytest.mark.parametrize(
    "tunables, want",
    [
        (KEPT, True),
        ("glibc.malloc.mmap_threshold=0x200000:glibc.malloc.trim_threshold=0x2000000", True),
        (" glibc.malloc.trim_threshold = 33554432 : glibc.malloc.mmap_threshold=2097152", True),
        ("glibc.malloc.trim_threshold=1073741824", False),  # arrays over 128 KiB: mmap, munmap
        ("glibc.malloc.mmap_threshold=33554432", False),  # freed memory trimmed from 128 KiB
        ("glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold=1073741824", False),
        ("glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1048576", False),
        ("glibc.malloc.hugetlb=1", False),
        ("glibc.malloc.mmap_threshold=lots:glibc.malloc.trim_threshold=1073741824", False),
        ("", False),
    ],
)
def test_which_malloc_settings_keep_freed_memory(tunables, want):
    assert small.malloc_keeps_freed_memory(tunables) is want


def test_with_freed_memory_kept_mapped_the_small_path_goes_to_2_18():
    res = child(200_000, GLIBC_TUNABLES=KEPT)
    assert res["ok"] and not res["warnings"] and res["eager_at_200k"]
    assert res["eager_below"] == small.KEPT_MAPPED_EAGER_BELOW == 2**18
    # slow ufuncs and blow-ups stay fused from where they are with the stock malloc
    assert (res["grown_below"], res["slow_below"]) == (8192, 65536)


def test_with_the_stock_malloc_the_small_path_stops_at_2_17():
    res = child(200_000)
    assert res["ok"] and not res["eager_at_200k"]
    assert res["eager_below"] == small.STOCK_EAGER_BELOW == 2**17
    assert (res["grown_below"], res["slow_below"]) == (8192, 65536)


def test_a_set_eager_below_wins_over_the_malloc_setting():
    res = child(200_000, GLIBC_TUNABLES=KEPT, FUSEGRAD_EAGER_BELOW="1e5")
    assert res["ok"] and not res["eager_at_200k"]
    assert (res["eager_below"], res["grown_below"], res["slow_below"]) == (100_000, 6250, 50_000)


def test_a_good_thread_count_is_used():
    res = child(2_000_000, FUSEGRAD_THREADS="1")
    assert res["ok"]  # the child compared the gradient with NumPy's

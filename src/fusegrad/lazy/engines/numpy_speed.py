"""Whether NumPy computes a transcendental ufunc faster than a scalar libm loop, measured once
per process: ``auto`` asks it before it leaves a kernel with a libm call to numpy_blocked.

NumPy's ufuncs for ``exp``, ``log``, ``tanh``, ``arctan`` and most others run in SIMD lanes
(0.9-2.4 ns a float64 point on the 2-core AVX-512 machine), several times faster than the scalar
libm call numba's loop makes for them: a kernel with one is faster on numpy_blocked. But NumPy
keeps float64 ``sin`` and ``cos`` scalar, for their accuracy (8.2-8.4 ns a point there, 9x
``exp``), as it does ``float_power`` and ``hypot``: there numba's loop pays the same call and
still fuses the rest of the kernel and splits it across the cores, so it is the faster engine
(``sum(tanh(sin(x) * x + 1) ** 2)``'s gradient at 524,288 points: 20 ms on numpy_blocked,
7.9 ms on numba). Which ufuncs are scalar depends on NumPy's version, its build and the CPU, so
it is measured, not listed: a ufunc is scalar when it takes at least ``SCALAR_RATIO`` times
``np.exp``'s time on the same 4,096 points (best of several runs, ~0.1 ms per ufunc).

Example::

    >>> isinstance(scalar_in_numpy("sin", np.dtype("f8")), bool)
    True
    >>> scalar_in_numpy("no such ufunc", np.dtype("f8"))
    False
"""

from __future__ import annotations

import threading
import time

import numpy as np

# 9x exp for float64 sin and cos, 11x float_power, 6.6x hypot; the SIMD ones 0.9-2.6x (arccosh,
# 4.7x, is the closest below)
SCALAR_RATIO = 5.0
_POINTS = 4096
_RUNS = 7

_known: dict[tuple[str, str], bool] = {}
_lock = threading.Lock()


def _best_ns(f: np.ufunc, args: tuple, out: np.ndarray) -> float:
    best = float("inf")
    for _ in range(_RUNS):
        t0 = time.perf_counter_ns()
        f(*args, out=out)
        best = min(best, time.perf_counter_ns() - t0)
    return best


def _measure(name: str, dtype: np.dtype) -> bool:
    f = getattr(np, name, None)
    if not isinstance(f, np.ufunc) or f.nout != 1 or f.nin not in (1, 2):
        return False
    x = np.linspace(
        0.1, 0.9, _POINTS, dtype=dtype
    )  # inside every such ufunc's domain but arccosh's
    out = np.empty_like(x)
    try:
        with np.errstate(all="ignore"):
            f(*(x,) * f.nin, out=out)  # (a loop for this dtype, and warm)
            np.exp(x, out=out)
            base = _best_ns(np.exp, (x,), out)
            own = _best_ns(f, (x,) * f.nin, out)
    except TypeError:  # no loop for this dtype
        return False
    return own >= SCALAR_RATIO * max(base, 1.0)


def scalar_in_numpy(name: str, dtype: np.dtype) -> bool:
    """Whether NumPy computes ufunc ``name`` on real ``dtype`` values no faster than a scalar
    libm loop (float64 ``sin`` and ``cos``, as NumPy 2 builds them): measured on first use and
    remembered. False for anything else (not a NumPy ufunc, complex or integer values)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return False
    key = (name, dtype.str)
    known = _known.get(key)
    if known is None:
        with _lock:
            known = _known.get(key)
            if known is None:
                known = _known[key] = _measure(name, dtype)
    return known

"""How fast NumPy computes a transcendental ufunc on this machine, against its ``np.exp``,
measured once per process: ``auto`` asks it before it leaves a kernel with a libm call to
numpy_blocked, and the small-array path before it runs a large call eagerly.

NumPy's ufuncs for ``exp``, ``log``, ``tanh``, ``arctan`` and most others run in SIMD lanes
(0.9-2.4 ns a float64 point on the 2-core AVX-512 machine), several times faster than the scalar
libm call numba's loop makes for them: a kernel with one is faster on numpy_blocked. But NumPy
keeps float64 ``sin`` and ``cos`` scalar, for their accuracy (8.2-8.4 ns a point there, 9x
``exp``), as it does ``float_power`` and ``hypot``: there numba's loop pays the same call and
still fuses the rest of the kernel and splits it across the cores, so it is the faster engine
(``sum(tanh(sin(x) * x + 1) ** 2)``'s gradient at 524,288 points: 20 ms on numpy_blocked,
7.9 ms on numba). Which ufuncs are scalar depends on NumPy's version, its build and the CPU, so
it is measured, not listed: each ufunc's best time over several runs on the same 4,096 points
(two different arguments for a binary one: ``logaddexp(x, x)`` takes a shortcut), over
``np.exp``'s (~0.1 ms per ufunc, once).

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

# scalar: 9x exp for float64 sin and cos, 11x float_power, 6.6x hypot; the SIMD ones 0.9-2.6x
# (arccosh, 4.7x, is the closest below)
SCALAR_RATIO = 5.0
# slow, for the small-array path: sin, cos, logaddexp (24x), arccosh; not tanh (1.9x), arctan
# (1.6x), power (2.6x)
SLOW_RATIO = 3.0
_POINTS = 4096
_RUNS = 7

_ratios: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


def _best_ns(f: np.ufunc, args: tuple, out: np.ndarray) -> float:
    best = float("inf")
    for _ in range(_RUNS):
        t0 = time.perf_counter_ns()
        f(*args, out=out)
        best = min(best, time.perf_counter_ns() - t0)
    return best


def _measure(f: np.ufunc, dtype: np.dtype) -> float:
    x = np.linspace(0.1, 0.9, _POINTS, dtype=dtype)  # every such ufunc's domain but arccosh's
    args = (x,) if f.nin == 1 else (x, x[::-1] * 1.5)
    out = np.empty_like(x)
    try:
        with np.errstate(all="ignore"):
            f(*args, out=out)  # (a loop for this dtype, and warm)
            np.exp(x, out=out)
            base = _best_ns(np.exp, (x,), out)
            own = _best_ns(f, args, out)
    except TypeError:  # no loop for this dtype
        return 0.0
    return own / max(base, 1.0)


def relative_time(name: str, dtype: np.dtype) -> float:
    """NumPy's time for ufunc ``name`` on real ``dtype`` values over ``np.exp``'s on the same
    points: measured on first use and remembered; 0.0 when there is nothing to time (not a
    NumPy ufunc of one output, complex or integer values).

    >>> relative_time("no such ufunc", np.dtype("f8"))
    0.0
    """
    dtype = np.dtype(dtype)
    key = (name, dtype.str)
    known = _ratios.get(key)
    if known is None:
        f = getattr(np, name, None)
        if dtype.kind != "f" or not isinstance(f, np.ufunc) or f.nout != 1 or f.nin > 2:
            return 0.0
        with _lock:
            known = _ratios.get(key)
            if known is None:
                known = _ratios[key] = _measure(f, dtype)
    return known


def scalar_in_numpy(name: str, dtype: np.dtype) -> bool:
    """Whether NumPy computes ufunc ``name`` on real ``dtype`` values no faster than a scalar
    libm loop (float64 ``sin`` and ``cos``, as NumPy 2 builds them): ``SCALAR_RATIO`` times
    ``np.exp``'s time or more."""
    return relative_time(name, dtype) >= SCALAR_RATIO


def slow_in_numpy(uf: np.ufunc) -> bool:
    """Whether NumPy's float64 ``uf`` takes ``SLOW_RATIO`` times ``np.exp``'s time a point or
    more (``sin``, ``logaddexp``, ...): the small-array path leaves a large call of it to fused
    kernels (from ``small.fused_from(small.SLOW_SHARE)`` elements).

    A ufunc that is not NumPy's own (``scipy.special``'s) counts as slow: it is not measured.

    >>> slow_in_numpy(np.add)
    False
    """
    slow = _slow.get(uf)
    if slow is None:
        own = getattr(np, uf.__name__, None) is uf
        slow = _slow[uf] = not own or relative_time(uf.__name__, _F8) >= SLOW_RATIO
    return slow


_slow: dict[np.ufunc, bool] = {}  # (the small-array path asks at every large call)
_F8 = np.dtype("f8")

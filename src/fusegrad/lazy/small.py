"""The small-array path: below ``EAGER_BELOW`` elements, lazy ops on concrete values run eagerly.

Building, planning and launching a kernel costs tens of microseconds of Python; NumPy computes a
ufunc over a thousand elements in about one. So an op whose arguments are all concrete (leaves or
values already computed) and whose result has fewer than ``EAGER_BELOW`` elements is computed at
once with NumPy, and its result is a leaf: nothing to fuse is lost at that size, and a chain of
small ops costs what NumPy's does plus the protocol dispatch.

Inside ``grad``, ``vjp`` and ``jvp`` the path is on: a small op on concrete values is a tape
node whose value is an ndarray, and its pullback (or its tangent) runs eagerly on small concrete
values, while an op that touches a large or unevaluated value stays lazy and fused (with its
memory bounds). ``jit``'s recording turns it off (``fusing()``): a recording must see every op.

Example::

    >>> import fusegrad.lazy as fl
    >>> y = np.tanh(fl.asarray(np.zeros(3))) * 2   # computed now: 3 elements
    >>> type(y).__name__, y.cached is None
    ('Leaf', True)
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import platform
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import engines
from .engines import numpy_speed
from .engines.registry import HOT_CALLS
from .nodes import LazyArray, Leaf, install_small_path, interning_scope

# Without this path, a 2-op expression on 10^3 float64 elements through the planner cost ~19x
# NumPy eager, a 5-op one ~22x (benchmarks/bench_lazy.py --only 4); from ~10^5 elements fused
# kernels beat eager NumPy (section 2 there). Inside grad, where planning and tracing add ~1.6 ms
# a call (the MLP's), eager NumPy stays faster further: the MLP with 65,536-120,000-element
# activations took 0.55-0.87x the time eagerly (and was 0.8-1.4x autograd's fused), W1
# sum((1 - x) / 2) 0.52-0.72x (benchmarks/bench_eager_below.py, glibc's stock malloc). From
# 1 MiB arrays eager NumPy faults fresh pages in at every call (the MLP at 131,072: ~740 a
# call), where kernels write into the buffer cache's (lazy/buffer_cache.py). So with glibc's
# stock malloc the path runs ops up to 2^17 elements (1 MiB of float64, the cache's threshold);
# at 131,072-262,144 the MLP took 3.6-5.0 ms eagerly against 2.9-3.8 fused.
# Where this process's malloc keeps freed memory mapped (``malloc_keeps_freed_memory``: the
# setting the benchmark runs every library in, as its fastest), eager NumPy faults nothing and
# the path goes twice as far, to 2^18: at 131,072-262,000 elements the MLP took 0.80-0.87x
# autograd's time eagerly against 0.95-1.09x fused, W1 0.74-0.78x against 0.83-1.19x (`python
# benchmarks/bench_eager_below.py --sizes 131072,196608,262000 --old 262144,16,2` with the
# benchmark's GLIBC_TUNABLES); from 2^18 the two are even (MLP at 524,288: 0.94 eager, 0.89 fused).
# Exceptions, fused from fewer elements (``fused_from``), the same in both settings:
# - a ufunc NumPy computes slowly (engines/numpy_speed.py: sin, cos, logaddexp, at least 3x its
#   exp's time): from 2^17 // SLOW_SHARE = 65,536 elements fused kernels, on numba's threads,
#   are the faster (sum(logaddexp(0, x / 2) * x) at 131,072: 2.6 ms against 5.1);
# - a broadcast that grows past its inputs (x[:, None] - y[None, :]): memory is what fusing it
#   saves, so it stays lazy from 2^17 // GROWTH = 8192 elements.
# FUSEGRAD_EAGER_BELOW=n sets the threshold (a smaller one brings the exceptions down with it,
# to n // 2 and n // 16); FUSEGRAD_EAGER_BELOW=0 turns the path off.
STOCK_EAGER_BELOW = 131_072
KEPT_MAPPED_EAGER_BELOW = 262_144
# freed memory counts as kept mapped when glibc serves arrays of up to 2 MiB from its heap
# (mmap threshold) and keeps at least this much freed memory before handing it back (trim)
_KEPT_MMAP_MIN = 2 << 20
_KEPT_TRIM_MIN = 32 << 20


def malloc_keeps_freed_memory(tunables: str | None = None) -> bool:
    """Whether glibc's malloc in this process keeps the memory of freed arrays of up to 2 MiB
    mapped, as ``GLIBC_TUNABLES`` sets it at start-up (``tunables``: that string; None reads
    the environment): ``glibc.malloc.mmap_threshold`` of at least 2 MiB and
    ``glibc.malloc.trim_threshold`` of at least 32 MiB. False on other C libraries, and with
    glibc's defaults (which hand freed memory back, so eager arrays fault their pages in anew).

    >>> malloc_keeps_freed_memory("glibc.malloc.trim_threshold=1073741824:"
    ...                           "glibc.malloc.mmap_threshold=33554432")
    True
    >>> malloc_keeps_freed_memory("glibc.malloc.hugetlb=1")
    False
    """
    if tunables is None:
        try:
            os.confstr("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError):
            return False  # not glibc: its tunables mean nothing here
        tunables = os.environ.get("GLIBC_TUNABLES", "")
    found: dict[str, int] = {}
    for item in tunables.split(":"):
        name, _, value = item.partition("=")
        try:
            found[name.strip()] = int(value.strip(), 0)
        except ValueError:
            continue  # glibc ignores what it cannot read, and so do we
    return (
        found.get("glibc.malloc.mmap_threshold", 0) >= _KEPT_MMAP_MIN
        and found.get("glibc.malloc.trim_threshold", 0) >= _KEPT_TRIM_MIN
    )


DEFAULT_EAGER_BELOW = KEPT_MAPPED_EAGER_BELOW if malloc_keeps_freed_memory() else STOCK_EAGER_BELOW
GROWTH = 16
SLOW_SHARE = 2


def fused_from(share: int) -> int:
    """Where an exception to the path starts: ``min(EAGER_BELOW, 2^17) // share`` elements
    (``GROWTH`` for blow-ups, ``SLOW_SHARE`` for slow ufuncs). Their reasons, memory and the
    cores' speed, do not change with the malloc or a larger threshold.

    >>> fused_from(GROWTH) <= 8192
    True
    """
    below = EAGER_BELOW
    return (below if below < STOCK_EAGER_BELOW else STOCK_EAGER_BELOW) // share


def _eager_below(default: int = DEFAULT_EAGER_BELOW) -> int:
    """``FUSEGRAD_EAGER_BELOW``: a whole number of elements, written ``65536`` or ``1e5``; any
    other value warns, naming it, and the default applies (a speed setting, read at import:
    an error there would make ``import fusegrad`` fail)."""
    raw = os.environ.get("FUSEGRAD_EAGER_BELOW", "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        try:
            v = float(raw)
            n = int(v) if v == int(v) else -1
        except (ValueError, OverflowError):
            n = -1
    if n >= 0:
        return n
    warnings.warn(
        f"FUSEGRAD_EAGER_BELOW={raw!r} is not a number of elements: it accepts a whole number "
        f"such as 65536 or 1e5 (0 turns the small-array path off); using {default}",
        RuntimeWarning,
        stacklevel=2,
    )
    return default


EAGER_BELOW = _eager_below()

# How many fusing() blocks are open, in any thread: a trace elsewhere only makes this thread
# take the (always correct) lazy path for a while.
_fusing = [0]


@contextlib.contextmanager
def fusing() -> Iterator[None]:
    """Turn the small-array path off inside the block (fusegrad's traces and ``jit``'s
    recordings use this), in one interning scope (``nodes.interning_scope``: nothing
    hash-consed or computed before the block is reused in it)."""
    _fusing[0] += 1
    try:
        with interning_scope():
            yield
    finally:
        _fusing[0] -= 1


def on() -> bool:
    """Whether the small-array path applies now."""
    return EAGER_BELOW > 0 and not _fusing[0]


def fits(shape: tuple) -> bool:
    """Whether a value of ``shape`` takes the small-array path now.

    >>> fits((10, 10)), fits((10**3, 10**3))
    (True, False)
    """
    return EAGER_BELOW > 0 and not _fusing[0] and math.prod(shape) < EAGER_BELOW


def grown_fits(shape: tuple) -> bool:
    """Whether a value of ``shape`` grown by broadcasting from smaller ones takes the small-array
    path now: fewer than ``fused_from(GROWTH)`` elements (a blow-up is fused from there).

    >>> grown_fits((10, 10)), grown_fits((100, 100))
    (True, False)
    """
    return EAGER_BELOW > 0 and not _fusing[0] and math.prod(shape) < fused_from(GROWTH)


# `np.ndarray` read as a module global in the per-op tests below: numpy's module __getattr__
# keeps CPython 3.11 from specialising `np.name` lookups (about 300 instructions each).
_NDARRAY = np.ndarray

# Exact types of the scalars the path takes as they are (subclasses go the isinstance way).
_NUMBERS = frozenset({int, float, complex, bool, np.float64, np.float32, np.int64, np.bool_})


def _suffixes(vals: list, largest: tuple) -> bool:
    """Whether the shape of every array in ``vals`` ends ``largest`` (a bias added to a batch):
    then they broadcast to ``largest``, grown by nothing (``np.broadcast`` costs ~1 µs)."""
    k = len(largest)
    for v in vals:
        if type(v) is _NDARRAY or isinstance(v, np.ndarray):
            s = v.shape
            if s != largest[k - len(s) :]:
                return False
    return True


def values_if_small(args: tuple, uf: np.ufunc | None = None) -> list | None:
    """The concrete values of ``args`` (lazy values, arrays, numbers) when all are concrete and
    their broadcast result has fewer than ``EAGER_BELOW`` elements (fewer than
    ``fused_from(GROWTH)`` when it is larger than every argument, and than
    ``fused_from(SLOW_SHARE)`` when they are the arguments of a ufunc ``uf`` NumPy computes
    slowly); else ``None``.

    >>> values_if_small((np.zeros(3), 2.0))
    [array([0., 0., 0.]), 2.0]
    >>> values_if_small((np.zeros(3), "text")) is None   # not an array or a number
    True
    """
    if EAGER_BELOW <= 0 or _fusing[0]:
        return None
    vals = []
    shape = None  # the shape shared by every array so far; False once two differ
    size = 0  # the result's elements (the largest array's until the broadcast is taken)
    largest: tuple = ()  # the largest array's shape
    for a in args:
        t = type(a)
        if t is _NDARRAY:
            v = a
        elif t is Leaf:
            v = a.array
        elif t in _NUMBERS:
            vals.append(a)
            continue
        elif isinstance(a, LazyArray):
            v = a.cached
            if v is None:
                return None
        elif isinstance(a, np.ndarray):
            v = a
        elif isinstance(a, int | float | complex | np.generic):
            vals.append(a)  # bool is an int
            continue
        else:
            return None  # another library's array (a tracer) handles the call
        n = v.size
        if n >= EAGER_BELOW:
            return None
        if n > size:
            size, largest = n, v.shape
        if shape is None:
            shape = v.shape
        elif shape is not False and shape != v.shape:
            shape = False
        vals.append(v)
    if shape is False and not _suffixes(vals, largest):
        arrays = [v for v in vals if isinstance(v, np.ndarray)]
        try:
            size = np.broadcast(*arrays).size
        except ValueError:
            return None  # the lazy path raises NumPy's broadcasting message
        if size >= EAGER_BELOW or (
            size >= fused_from(GROWTH) and size > max(v.size for v in arrays)
        ):
            return None  # a blow-up: fused, it never exists in memory
    if uf is not None and size >= fused_from(SLOW_SHARE) and numpy_speed.slow_in_numpy(uf):
        return None
    return vals


# FAST_MATH_MIN: from this many points a float64 tanh, exp, expm1, log or log1p of the path
#   runs in numba_math's vectorised loop (engines/numba_eager.py) once the ufunc has run
#   HOT_CALLS times here (a loop: its compile, once per machine, pays back), on the numba and auto
#   engines, where NumPy's own float64 loops call scalar libm (``numpy_math_is_scalar``). There,
#   at 1024 points (an RNN step's 16x64) tanh took 5 us against NumPy's 14, exp 4.5 against 5.8,
#   log 3.0 against 5.0; at 16 points NumPy's 0.7 us beat the loop's 1.0. With AVX-512 NumPy's
#   are the faster (16x64 tanh 2.1 us against the loop's 2.8, exp 1.2 against 1.9). So is a
#   float64 logaddexp of an array and a number or an array of its shape wherever NumPy computes
#   it slowly (numpy_speed.slow_in_numpy): with AVX-512 too, 17-22 ns a point (W4's 20,000-point
#   logaddexp(0, z): 354 us), against ~4 in the loop (76 us).
FAST_MATH_MIN = 256
_F64 = np.dtype(np.float64)
_fast_calls: dict[Any, int] = {}  # ufunc -> calls seen on the path (reads race harmlessly)
_fast_loops: dict[Any, Any] = {}  # ufunc -> its compiled loop, once hot


def call_ufunc(uf: np.ufunc, vals: list) -> Any:
    """``uf(*vals)`` for the path: a hot float64 transcendental of at least ``FAST_MATH_MIN``
    points in numba_math's vectorised loop (within 1 ulp of NumPy's, and, as fused kernels,
    without NumPy's floating-point warnings), anything else by NumPy.

    >>> float(call_ufunc(np.add, [1.0, 2.0]))
    3.0
    """
    if len(vals) == 1 and uf in _LOOPED:
        a = vals[0]
        if type(a) is _NDARRAY and a.dtype is _F64 and a.size >= FAST_MATH_MIN:
            loop = _fast_loops.get(uf) or _hot_loop(uf)
            if loop is not None and a.flags.c_contiguous and _compiled_engine():
                return loop(a)
    elif uf is _LOGADDEXP and len(vals) == 2:
        a, b = vals if type(vals[0]) is _NDARRAY else vals[::-1]  # (symmetric)
        if _loopable_pair(a, b) and numpy_speed.slow_in_numpy(uf):
            loop = _fast_loops.get(uf) or _hot_loop(uf)
            if loop is not None and _compiled_engine():
                return loop(a, b)
    return uf(*vals)


_LOGADDEXP = np.logaddexp
_PLAIN_NUMBERS = (float, int, np.float64)


def _loopable_pair(a: Any, b: Any) -> bool:
    """Whether ``logaddexp(a, b)`` takes numba_eager's loop: ``a`` a C-contiguous float64 array
    of ``FAST_MATH_MIN`` points or more, ``b`` a real number or such an array of ``a``'s shape."""
    if type(a) is not _NDARRAY or a.dtype is not _F64 or a.size < FAST_MATH_MIN:
        return False
    if not a.flags.c_contiguous:
        return False
    if type(b) is _NDARRAY:
        return b.dtype is _F64 and b.shape == a.shape and b.flags.c_contiguous
    return type(b) in _PLAIN_NUMBERS


def _hot_loop(uf: np.ufunc) -> Any:
    n = _fast_calls[uf] = _fast_calls.get(uf, 0) + 1
    if n < HOT_CALLS or not _compiled_engine():
        return None
    if not engines.get("numba").available():
        _LOOPED.discard(uf)  # never again: NumPy it is
        return None
    from .engines.numba_eager import LOOPS

    loop = _fast_loops[uf] = LOOPS[uf]
    return loop


def _compiled_engine() -> bool:
    return engines.current() in ("auto", "numba")


def numpy_math_is_scalar() -> bool:
    """Whether NumPy's float64 ``tanh``, ``exp``, ``expm1``, ``log`` and ``log1p`` call scalar
    libm on this machine: x86-64 without AVX-512 (Skylake-X's set, which NumPy's own AVX-512
    ``exp``/``log`` and its SVML ``tanh``/``expm1``/``log1p`` need). Elsewhere NumPy's are
    vectorised, or not measured against numba_math's (other architectures): NumPy it is.

    >>> isinstance(numpy_math_is_scalar(), bool)
    True
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # pragma: no cover - NumPy moved it
        return False
    return not getattr(umath, "__cpu_features__", {"AVX512_SKX": True}).get("AVX512_SKX", False)


LOOPABLE = (np.tanh, np.exp, np.expm1, np.log, np.log1p)  # not scipy.special's namesakes
_LOOPED = set(LOOPABLE) if numpy_math_is_scalar() else set()


def value_if_small(a: Any) -> np.ndarray | None:
    """The concrete value of ``a`` (an ndarray, or a lazy value already computed) when it has
    fewer than ``EAGER_BELOW`` elements and the path is on; else ``None`` (the one-argument
    ``values_if_small`` of methods, movement and reductions).

    >>> import fusegrad.lazy as fl
    >>> value_if_small(fl.asarray(np.zeros(3)))
    array([0., 0., 0.])
    """
    if EAGER_BELOW <= 0 or _fusing[0]:
        return None
    t = type(a)
    if t is _NDARRAY:
        v = a
    else:
        v = a.array if t is Leaf else a.cached if isinstance(a, LazyArray) else None
    return v if v is not None and v.size < EAGER_BELOW else None


def wrap(value: Any) -> Leaf:
    """An eager result as a leaf (not hash-consed: it is new), scalars as 0-d leaves.

    >>> wrap(np.float64(2.0)).shape
    ()
    """
    arr = value if type(value) is np.ndarray else np.asarray(value)
    node = Leaf.__new__(Leaf)
    node.array, node.shape, node.dtype, node.scope = arr, arr.shape, arr.dtype, None
    node.cached = None
    node._varying = None
    return node


def _small_leaf(x: np.ndarray) -> Leaf | None:
    # reads EAGER_BELOW at each call: tests and users may set it after import
    return wrap(x) if x.size < EAGER_BELOW and on() else None


install_small_path(_small_leaf)

"""The ``numba`` engine: a generated, compiled loop nest per kernel signature, cached on disk.

The engine interface (``fusegrad.lazy.engines.registry``)::

    name = "numba"; ops           the ops with a numba expression in ops.OPS, "cast", "where"
    available() -> bool          numba importable (warns once when not)
    supports(kernel) -> bool     every dtype/op of the kernel has a scalar translation
    cost(kernel) -> float        the ``auto`` hint: below 1 exactly when ``prefers(kernel)``
    run(kernel) -> list[ndarray] one array per output, keepdims shape

and for tests and benchmarks: ``prefers(kernel)`` (the measured ``auto`` choice),
``is_compiled(kernel)``, ``inner_expensive(kernel)``, AUTO_MIN_SIZE, PARALLEL_MIN_NS, STATS.

Example::

    >>> import numpy as np
    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> x, y = np.arange(3.0), np.arange(4.0)
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((3, 4), (x[:, None], y[None, :]), (), (Instr("subtract", (0, 1), f8),),
    ...            (Output(2, "sum", (1,), f8),))
    >>> run(k)[0].ravel()
    array([-6., -2.,  2.])

The generated module is written to ``$FUSEGRAD_CACHE_DIR`` (default
``$XDG_CACHE_HOME/fusegrad/kernels`` or ``~/.cache/fusegrad/kernels``, mode 0700) as
``k_<sha256>.py``, whose first line holds its key and the sha256 of the rest; a file whose
header does not match, or that fails to import, is rebuilt with a warning. numba's own cache
(``cache=True``) lands in ``__pycache__`` beside it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from fusegrad.lazy import buffer_cache as _buffers
from fusegrad.lazy import ops as _ops
from fusegrad.lazy.engines import numba_codegen as _cg
from fusegrad.lazy.engines import numba_pairs as _pairs
from fusegrad.lazy.engines import numba_split as _split
from fusegrad.lazy.engines import numpy_blocked as _blocked
from fusegrad.lazy.engines import numpy_speed as _speed
from fusegrad.lazy.engines import registry as _registry
from fusegrad.lazy.engines.registry import register
from fusegrad.lazy.kernel import Kernel

# The engine interface (``registry``).
name = "numba"
# numba compiles a kernel for its operands' layouts (C order or not): a jit replay's probe has
# the recorded views' strides (``replay._probe``), so the hot compile is the last
COMPILES_PER_LAYOUT = True


class _Ops:
    """The ops with a numba expression in the op table (``numba_codegen.OP_EXPR``, a view of
    ``ops.OPS``), ``"cast"`` and ``"where"``: an op is supported exactly when it has one."""

    def __contains__(self, op: object) -> bool:
        return op in _cg.OP_EXPR or op in ("cast", "where")

    def __iter__(self):
        return iter([*_cg.OP_EXPR, "cast", "where"])


ops = _Ops()

# Counters for tests and benchmarks: "generated" = module source written, "loaded_from_disk" =
# a valid module file reused, "compiled" = numba compiled a new overload, "cache_hits" = numba
# loaded machine code from its disk cache.
STATS = {"generated": 0, "loaded_from_disk": 0, "compiled": 0, "cache_hits": 0, "rebuilt": 0}

# Slots run on the worker threads when the estimated serial time exceeds PARALLEL_MIN_NS,
# estimated as size * (ARITH_NS + EXPENSIVE_NS * slow per-point ops + VECTOR_NS * fast ones).
# Measured with benchmarks/bench_kernels.py: serial arithmetic row sum ~0.15 ns/point,
# exp/tanh through libm ~10 ns/point, through numba_math ~3 ns/point. Outside a replay, kernels
# that mostly stream memory did not gain from the second core even with ~5 µs hand-offs:
# `sum((1 - x) / 2)`'s gradient over 10^6 points (its one kernel writing 8 MB) took 390 -> 430
# µs with that kernel split, the MLP's at batch 4096 with every kernel from 2^17 points split
# 12.5 -> 13.2 ms (calls alternated in one process), so only kernels of ~2 ms of work go
# parallel there.
PARALLEL_MIN_NS = 2e6
ARITH_NS = 0.15
# A replayed kernel (``replayer``) writes into its program's buffers, and goes parallel from
# this many points too: the estimate above counts arithmetic, not the memory a kernel streams
# (MLP batch 4096's backward kernel, 1M points, 8 MB read and 8 MB written, is estimated at
# 0.16 ms and took 0.54 ms serial). From 2^17 since a hand-off to the pool costs ~5 µs
# (``lazy/workers.py``; ~45 with concurrent.futures): jit of the MLP step (100 -> 128) at batch
# 1024 (131,072 points a kernel) took 1.30 ms against 1.64 serial; at batch 256 (32,768 points)
# the hand-offs still cost more than they gain (0.59 against 0.33), at 512 about as much as
# they gain (0.66-0.67 against 0.74). Replays of each setting alternated in one process:
# `python benchmarks/bench_row_blocks.py --batch 1024 --parallel-from 65536,131072,262144`.
REPLAY_PARALLEL_MIN_POINTS = 1 << 17
EXPENSIVE_NS = 10.0
VECTOR_NS = 3.0

# `auto` threshold, see prefers() (the measurements are with it in registry.py).
AUTO_MIN_SIZE = _registry.NUMBA_COLD_MIN

_HEADER = "# fusegrad-kernel v1 key={key} body-sha256={digest}\n"
_lock = threading.RLock()
_ENTRIES: dict[tuple, _Entry] = {}
_available: bool | None = None
_warned: set[str] = set()


def _warn_once(tag: str, msg: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def available() -> bool:
    """True when numba can be imported; otherwise warns once and returns False.

    >>> isinstance(available(), bool)
    True
    """
    global _available
    if _available is None:
        try:
            import numba  # noqa: F401

            # With numba, not with the first kernel that calls it: defining numba_math's ~30
            # cached functions peaks at ~1.4 MB of Python objects (~1.5 MiB of RSS, ~7 ms),
            # a start-up cost that would otherwise land on that kernel's first call. (Its
            # import also sets LLVM's vectoriser option, MEMORY_CHECKS, before any compile.)
            from fusegrad.lazy.engines import numba_math  # noqa: F401

            _available = True
        except Exception as e:  # ImportError, or numba rejecting this NumPy
            _available = False
            _warn_once(
                "numba",
                f"fusegrad: numba cannot be imported ({e!r}); kernels run on the numpy_blocked "
                "engine instead.",
            )
    return _available


def _fusegrad_version() -> str:
    try:
        from importlib.metadata import version

        return version("fusegrad")
    except Exception:
        return "0.1.0"


def _codegen_hash() -> str:
    h = hashlib.sha256()
    # numba's own cache of a generated module does not notice changes in numba_math (inlined
    # into its kernels), so that file's source is part of the key too
    here = os.path.dirname(_cg.__file__)
    files = ["numba_codegen.py", "numba_engine.py", "numba_math.py", "numba_pairs.py"]
    for path in [os.path.join(here, name) for name in files]:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


_VERSION_SALT: str | None = None


def _salt() -> str:
    global _VERSION_SALT
    if _VERSION_SALT is None:
        import numba

        _VERSION_SALT = f"{_fusegrad_version()}|numba {numba.__version__}|np {np.__version__}|"
        _VERSION_SALT += _codegen_hash()
    return _VERSION_SALT


def _requested_dir() -> str:
    d = os.environ.get("FUSEGRAD_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "fusegrad", "kernels")
    return d


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or folder with status ``st`` must not be trusted, or None: another user owns
    it, or group or others may write to it (so a module planted there would run as us)."""
    uid = os.getuid()
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        who = " and ".join(
            w for w, bit in (("group", 0o020), ("others", 0o002)) if st.st_mode & bit
        )
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _usable_dir(d: str, private: bool = False) -> tuple[str | None, str]:
    """``(d, "")`` when ``d`` is (or was made) a folder this user alone can write, else
    ``(None, why)``; ``why`` starts with "unsafe" when the folder exists but is not private."""
    try:
        if private:  # in the shared temporary folder: make it ourselves, never follow a link
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                pass
            st = os.lstat(d)
        else:
            if not os.path.isdir(d):
                os.makedirs(d, mode=0o700, exist_ok=True)
                os.chmod(d, 0o700)
            st = os.stat(d)
        if not stat.S_ISDIR(st.st_mode):
            return None, "not a folder"
        why = _unsafe(st)
        if why is not None:
            return None, "unsafe: " + why
        pyc = os.path.join(d, "__pycache__")  # numba's machine code, unpickled when loaded
        if os.path.lexists(pyc):
            why = _unsafe(os.lstat(pyc))
            if why is not None:
                return None, f"unsafe: its __pycache__ is {why}"
        tempfile.TemporaryFile(dir=d).close()  # writable (root may write where mode says not)
    except OSError as e:
        return None, f"{type(e).__name__}: {e.strerror or e}"
    return d, ""


_DIRS: dict[str, str | None] = {}


def cache_dir() -> str | None:
    """The kernel cache folder, created with mode 0700 if missing; None when kernels compile in
    memory because no usable folder exists (a warning said why).

    A folder another user owns, or that group or others may write to, is refused with a warning
    (a module planted there would be imported): kernels then go to a private folder
    ``<tempdir>/fusegrad-kernels-<uid>`` (itself checked). A folder that cannot be created or
    written turns the disk cache off.

    >>> os.path.isdir(cache_dir())
    True
    """
    want = _requested_dir()
    if want in _DIRS:
        return _DIRS[want]
    with _lock:
        d, why = _usable_dir(want)
        if d is None and why.startswith("unsafe"):
            private = os.path.join(tempfile.gettempdir(), f"fusegrad-kernels-{os.getuid()}")
            d, why2 = _usable_dir(private, private=True)
            _warn_once(
                "dir:" + want,
                f"fusegrad: refusing kernel cache folder {want} ({why[8:]}): a module planted "
                f"there would be imported. Using {private if d else 'no disk cache'} instead"
                + (f" ({private}: {why2})" if d is None else "")
                + "; set FUSEGRAD_CACHE_DIR to a folder only you can write.",
            )
        elif d is None:
            _warn_once(
                "dir:" + want,
                f"fusegrad: cannot use kernel cache folder {want} ({why}); kernels compile in "
                "memory and are not cached on disk. Set FUSEGRAD_CACHE_DIR to a writable folder.",
            )
        _DIRS[want] = d
    return d


def supports(kernel) -> bool:
    """True when every dtype, op and constant of ``kernel`` has a translation here.

    Complex, float16, float128, uint64 and ops NumPy defines only on floats but applied to
    integers are declined; integer ``power`` needs a non-negative exponent.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> supports(Kernel((), (), (), (), ()))
    True
    """
    try:
        plan = _plan_for(signature(kernel), kernel)
    except Exception:
        return False
    if plan.error is not None:
        return False
    if plan.mirrored and not all(_pairs.tile_kind(o) for o in kernel.outputs):
        return False
    nin = len(kernel.inputs)
    for c in kernel.constants:
        if isinstance(c, int) and not isinstance(c, bool) and not -(2**63) <= c < 2**63:
            return False
    # data-dependent checks: integer powers need non-negative exponents (NumPy raises otherwise)
    for ins in kernel.program:
        if ins.op in ("power",) and ins.dtype.kind in "iu":
            e = ins.args[1]
            if e < nin:
                arr = kernel.inputs[e]
                if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
                    return False
            elif e < nin + len(kernel.constants):
                if kernel.constants[e - nin] < 0:
                    return False
            else:
                return False  # a computed integer exponent: cannot check cheaply
    for o in kernel.outputs:
        if o.reduce in ("max", "min") and o.axes and any(kernel.domain[a] == 0 for a in o.axes):
            return False  # NumPy raises: no identity
    return True


def inner_ops(kernel) -> tuple[int, int]:
    """Transcendental ops evaluated at every point (those that depend on the innermost domain
    axis; ones hoisted to outer loops run once per row and are not counted): ``(slow, fast)``.
    Slow ones are scalar libm calls, which NumPy's SIMD ufuncs compute much faster; fast ones
    are the ``numba_math`` ops, computed in SIMD lanes. A power is fast when its exponent is a
    constant ``numba_math.power`` computes without pow (``numba_codegen.FAST_EXPONENTS``).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> inner_ops(Kernel((), (), (), (), ()))
    (0, 0)
    """
    slow, fast, exponents, _ = _inner_ops_of_signature(kernel)
    slow_powers = sum(_slow_power(kernel, c) for c in exponents)
    return slow + slow_powers, fast + len(exponents) - slow_powers


def _slow_power(kernel, c: int | None) -> bool:
    """Whether a power whose exponent is constant ``c`` (None: it varies) calls pow."""
    return c is None or kernel.constants[c] not in _cg.FAST_EXPONENTS


def _inner_ops_of_signature(kernel) -> tuple[int, int, tuple, tuple]:
    """``inner_ops``' counts for the kernel's signature with the powers left apart, remembered
    per signature: ``(slow, fast, exponents, libm)``, ``exponents`` the powers' exponent
    constants (their indices, None when one varies), ``libm`` the ``(op, dtype)`` of the slow
    calls."""
    sig = kernel.signature()
    found = _INNER_OPS.get(sig)
    if found is None:
        found = _INNER_OPS[sig] = _count_inner_ops(kernel, sig)
    return found


def _count_inner_ops(kernel, sig: tuple) -> tuple[int, int, tuple, tuple]:
    d = len(kernel.domain)
    n_in = len(sig[1])
    inner = {d - 1} if d else set()
    deps = [{ax for ax, b in enumerate(flags) if not b} & inner for _, flags in sig[1]] + [
        set()
    ] * len(kernel.constants)
    slow = fast = 0
    exponents: list = []
    libm: set = set()
    for ins in kernel.program:
        dep = set().union(*(deps[a] for a in ins.args))
        deps.append(dep)
        op = _ops.OPS.get(ins.op)
        if op is None or not op.expensive or not (dep or d == 0):
            continue
        if ins.op in _cg.POWERS and ins.dtype.kind == "f":
            e = ins.args[1]
            constant = n_in <= e < n_in + len(kernel.constants)
            exponents.append(e - n_in if constant else None)
        elif _cg.vectorised(ins.op, ins.dtype):
            fast += 1
        else:
            slow += 1
            libm.add((ins.op, ins.dtype))
    return slow, fast, tuple(exponents), tuple(libm)


def inner_expensive(kernel) -> int:
    """Per-point scalar libm calls (``inner_ops(kernel)[0]``).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> inner_expensive(Kernel((), (), (), (), ()))
    0
    """
    return inner_ops(kernel)[0]


_INNER_OPS: dict[tuple, tuple[int, int, tuple, tuple]] = {}


def numpy_faster(kernel) -> bool:
    """Whether ``kernel`` makes a per-point libm call that NumPy computes faster, in SIMD lanes
    (``arctan``, a power of another exponent than ``inner_ops``' fast ones): numpy_blocked's
    loops then beat this engine's. A call NumPy makes scalar too (float64 ``sin`` and ``cos``,
    ``numpy_speed``) costs both engines the same, and numba still fuses the rest.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> numpy_faster(Kernel((), (), (), (), ()))
    False
    """
    _, _, exponents, libm = _inner_ops_of_signature(kernel)
    if any(_slow_power(kernel, c) for c in exponents):  # NumPy's power is SIMD
        return True
    return not all(_speed.scalar_in_numpy(op, dtype) for op, dtype in libm)


# `cost` hints for `auto`, relative to numpy_blocked's time (prefers() has the measurements).
COST_PREFERRED = 0.5  # arithmetic and numba_math ops, large or compiled: 0.08-1.0x
COST_SCALAR_LIBM = 2.0  # a scalar libm call per point: 2.4-6.9x
COST_UNCOMPILED = 50.0  # small and not compiled yet: compiling (~0.4 s) outweighs running


def cost(kernel) -> float:
    """The ``auto`` hint: this engine's expected time for ``kernel`` relative to numpy_blocked's
    (1.0), from the measured rule in ``prefers``: below 1 exactly when it prefers the kernel.
    Each call counts one run of the kernel's signature (``auto`` asks once per kernel), which is
    how a kernel in a loop becomes hot.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> cost(Kernel((), (), (), (), ())) > 1
    True
    """
    if numpy_faster(kernel):
        return COST_SCALAR_LIBM
    return COST_PREFERRED if _preferred(kernel, count=True) else COST_UNCOMPILED


def _preferred(kernel, count: bool = False) -> bool:
    size = kernel.size
    if size >= AUTO_MIN_SIZE:
        return True
    if size < _registry.NUMBA_MIN:
        return False
    if is_compiled(kernel):
        return True
    if size < _registry.HOT_MIN:
        return False
    sig = kernel.signature()
    n = _RUNS.get(sig, 0)
    if count:
        if len(_RUNS) >= 4096 and sig not in _RUNS:
            _RUNS.clear()  # bounded: a program with that many kernels becomes hot again
        n = _RUNS[sig] = n + 1
    return n >= _registry.HOT_CALLS


def hot_cost(kernel) -> float:
    """``cost`` for a kernel known to run many times (a step of ``jit``'s replays): as if its
    signature had run ``HOT_CALLS`` times already.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> hot_cost(Kernel((), (), (), (), ())) > 1
    True
    """
    if numpy_faster(kernel):
        return COST_SCALAR_LIBM
    size = kernel.size
    if size >= AUTO_MIN_SIZE or (size >= _registry.HOT_MIN and size >= _registry.NUMBA_MIN):
        return COST_PREFERRED
    return cost(kernel)


def replay_cost(kernel) -> float:
    """``hot_cost`` for a kernel of a program ``jit`` has replayed ``HOT_CALLS`` times: a
    replay calls the compiled loop through ``replayer`` (~2.5 us of dispatch, against ~1 us an
    instruction and a buffer on numpy_blocked's whole-domain path), so from
    ``registry.REPLAY_NUMBA_MIN`` points it is preferred (compiled once, if it is not yet).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> replay_cost(Kernel((), (), (), (), ())) > 1
    True
    """
    if numpy_faster(kernel):
        return COST_SCALAR_LIBM
    if kernel.size >= _registry.REPLAY_NUMBA_MIN:
        return COST_PREFERRED
    if len(kernel.program) >= _registry.REPLAY_NUMBA_MIN_OPS:
        return COST_PREFERRED
    return hot_cost(kernel)


# signature -> runs auto has asked about in this process (of kernels from HOT_MIN points)
_RUNS: dict[tuple, int] = {}


def prefers(kernel) -> bool:
    """The measured ``auto`` choice: True when this engine should run ``kernel``.

    Rule (``python benchmarks/bench_kernels.py`` and ``benchmarks/bench_crossover.py``, 2 shared
    cores; the thresholds and their measurements are in ``registry.py``):

    - a scalar libm call per point that NumPy computes in SIMD lanes (``numpy_faster``:
      ``arctan``, ``sinh``, ...) -> numpy_blocked at every size: NumPy's SIMD ufuncs beat
      numba's scalar libm 2-7x (tanh row sum through libm, 10^4..10^7 points: 2.4-6.9x slower);
    - otherwise (arithmetic, compares, selects, ``exp``/``log``/``tanh``... from
      ``numba_math``, ops hoisted out of the inner loop, and libm calls NumPy makes scalar too,
      float64 ``sin`` and ``cos``: ``numpy_speed``) -> numba once ``kernel.size >=
      NUMBA_COLD_MIN`` (arithmetic: numba 0.08-0.2x numpy_blocked's time from 3*10^4 points up;
      tanh row sum 0.5-1.0x, Gaussian row+col sums 0.3-0.8x; float32 tanh row sum 0.5-0.6x,
      elementwise 0.7-0.8x); from ``NUMBA_MIN`` points once compiled; from ``HOT_MIN`` points
      once its signature has run ``HOT_CALLS`` times in this process (a kernel in a loop).

    >>> from fusegrad.lazy.kernel import Kernel
    >>> prefers(Kernel((), (), (), (), ()))
    False
    """
    if not available() or not supports(kernel):
        return False
    if numpy_faster(kernel):
        return False
    return _preferred(kernel)


def is_compiled(kernel) -> bool:
    """True when this process already holds machine code for ``kernel``'s signature.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> is_compiled(Kernel((7,), (), (), (), ()))
    False
    """
    short = _split.split(kernel)
    if short is not None:
        return is_compiled(short.kernel)
    e = _ENTRIES.get(signature(kernel))
    return e is not None and e.ran


# A cold compile's seconds (numba's disk cache without the kernel's machine code): about
# COMPILE_S[0], plus COMPILE_S[1] an argument of the generated kernel and COMPILE_S[2] a loop of its
# source. Fitted on the 2-core machine over the 51 kernels the example programs' hot replays
# compile (``benchmarks/bench_programs.py``; rnn, lstm, gru, hmm, lotka-volterra...): within
# 0.2-1.25x of the time measured. numba's typing and lowering of each array argument dominate:
# an HMM's 649-argument kernel took 22 s, a 17-argument one 0.55 s. Machine code that
# numba's disk cache holds is loaded (5-70 ms) and not charged. The estimates are scaled by the
# median ratio of measured to estimated time over the compiles this process has done (a faster
# or slower machine).
COMPILE_S = (0.1, 0.035, 0.08)
_COLD_ESTIMATES: dict[tuple, float] = {}  # signature -> unscaled estimate
_ESTIMATED: dict[int, float] = {}  # id(dispatcher) -> its kernel's unscaled estimate
_MEASURED: list[float] = []  # measured / estimated, one per compile


def compile_seconds(kernel) -> float:
    """Estimated seconds before this engine first runs ``kernel``: 0 when this process holds its
    machine code or numba's disk cache does (a load), else a cold compile's (``COMPILE_S``, from
    the size of the generated source).

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((3,), (np.ones(3),), (), (Instr("exp", (0,), f8),), (Output(1, None, (), f8),))
    >>> run(k)[0].shape, compile_seconds(k)  # run once: compiled (or loaded) in this process
    ((3,), 0.0)
    """
    short = _split.split(kernel)
    if short is not None:
        return compile_seconds(short.kernel)
    sig = signature(kernel)
    e = _ENTRIES.get(sig)
    if e is not None and any(f is not None and f.overloads for f in (e.short, e.long)):
        return 0.0
    plan = _plan_for(sig, kernel)
    if plan.error is not None:
        return 0.0  # not this engine's (supports() says so): nothing to compile
    folder = cache_dir()
    if folder is not None:
        stem = f"k_{_key(sig)[:40]}"
        if os.path.exists(os.path.join(folder, stem + ".py")) and any(
            ".kernel" in os.path.basename(f)
            for f in _numba_files(os.path.join(folder, "__pycache__"), stem)
        ):
            return 0.0
    cold = _COLD_ESTIMATES.get(sig)
    if cold is None:
        source = (_pairs if plan.mirrored else _cg).generate_source(plan)
        params = source.split("def kernel(", 1)[-1].split(")", 1)[0].count(",") + 1
        base, per_argument, per_loop = COMPILE_S
        loops = source.count(" for ")
        cold = _COLD_ESTIMATES[sig] = base + per_argument * params + per_loop * loops
    return cold * _calibration()


def _calibration() -> float:
    if not _MEASURED:
        return 1.0
    return min(4.0, max(0.25, float(np.median(_MEASURED[-32:]))))


_PLANS: dict[tuple, object] = {}


def signature(kernel) -> tuple:
    """``kernel.signature()``, with the constants ``numba_codegen.baked`` compiles in as
    literals given as ``kind=value``: this engine's compiled code and caches are keyed by it.

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((2,), (np.ones(2),), (3.0,), (Instr("power", (0, 1), f8),),
    ...            (Output(2, None, (), f8),))
    >>> signature(k)[2]
    ('float=3.0',)
    """
    sig = kernel.signature()
    if not any(i.op in _cg.POWERS for i in kernel.program):
        return sig
    literal = _cg.baked(kernel.constants, kernel.program, len(kernel.inputs))
    if not literal:
        return sig
    ndim, inputs, consts, prog, outs = sig
    consts = tuple(f"{k}={literal[j]!r}" if j in literal else k for j, k in enumerate(consts))
    return (ndim, inputs, consts, prog, outs)


def baked_constants(kernel) -> set[int]:
    """The indices of ``kernel``'s constants its compiled code holds as literals (a replay that
    changes one must run the kernel elsewhere: ``replay._kernel_runner``)."""
    return set(_cg.baked(kernel.constants, kernel.program, len(kernel.inputs)))


def _plan_for(sig, kernel):
    p = _PLANS.get(sig)
    if p is None:
        ndim, inputs, consts, _prog, _outs = sig
        ins = tuple((np.dtype(a.dtype), flags) for a, (_, flags) in zip(kernel.inputs, inputs))
        p = _cg.analyse(ndim, ins, consts, kernel.program, kernel.outputs)
        _PLANS[sig] = p
    return p


class _Entry:
    """One signature's compiled module plus what run() needs per call."""

    def __init__(self, sig, plan, module):
        self.sig = sig
        self.plan = plan
        self.module = module
        self.short = module.kernel
        self.long = getattr(module, "kernel_long", None)
        self.ran = False
        estimate = _COLD_ESTIMATES.get(sig)
        if estimate is not None:  # ``_call`` compares it with the compile's time
            for disp in (self.short, self.long):
                if disp is not None:
                    _ESTIMATED[id(disp)] = estimate
        self.views = []
        for flags in plan.in_bcast:
            if all(flags):
                self.views.append(None)  # passed as a scalar
            else:
                self.views.append(tuple(0 if b else slice(None) for b in flags))
        outs = plan.outputs
        self.partial = plan.needs_partial
        self.prefill = [p and not q for p, q in zip(plan.prefilled, plan.needs_partial)]
        self.idents = [
            _cg.identity(o.reduce, o.dtype) if o.reduce and o.axes else None for o in outs
        ]


def _key(sig) -> str:
    """The disk cache key of a signature: its text, the versions and generator sources, and the
    op table's entries of the ops it uses (declared in ``rules/elementwise.py`` or by a user, so
    keyed by their fields rather than by a file)."""
    used = sorted({op for op, _, _ in sig[3]} & _ops.OPS.keys())
    text = f"{sig!r}|{_salt()}|{_ops.fingerprint(used)}"
    return hashlib.sha256(text.encode()).hexdigest()


def _write_atomic(path: str, text: str) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_checked(path: str, key: str) -> tuple[str | None, str | None]:
    """``(text, None)`` when ``path`` holds a module generated for ``key`` that only this user
    can have written, else ``(None, what is wrong with it)``. The owner and mode are those of
    the file read (``fstat``), and the text returned is what gets executed."""
    try:
        with open(path, "rb") as f:
            why = _unsafe(os.fstat(f.fileno()))
            if why is not None:
                return None, why
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"unreadable ({e})"
    head, sep, body = text.partition("\n")
    if not sep:
        return None, "truncated"
    want = _HEADER.format(key=key, digest=hashlib.sha256(body.encode()).hexdigest())
    if head + "\n" != want:
        return None, "header/key/checksum mismatch (foreign, truncated or edited file)"
    return text, None


def _exec(text: str, path: str | None, modname: str):
    """A module made by running ``text`` (which the caller checked); ``path`` is its file (where
    numba keeps its cache), or None for a module compiled in memory only."""
    if path is None:
        # numba can only cache functions that have a source file
        text = text.replace("@njit(cache=True", "@njit(cache=False")
        spec = importlib.util.spec_from_loader(modname, loader=None)
        filename = f"<fusegrad kernel {modname}>"
    else:
        spec = importlib.util.spec_from_file_location(modname, path)
        filename = path
    assert spec is not None  # both calls above make one for any name and path
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod  # before exec: numba's cache and pickling look it up there
    try:
        # the checked text itself, not a re-read of the file (or a .pyc beside it)
        exec(compile(text, filename, "exec"), mod.__dict__)
        mod.kernel  # noqa: B018 - must exist
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    if path is not None:
        _check_numba_files(mod, os.path.basename(path)[:-3])
    return mod


def _dispatchers(mod) -> list:
    return [v for v in vars(mod).values() if hasattr(v, "py_func") and hasattr(v, "overloads")]


def _off(disp) -> None:
    from numba.core.caching import NullCache

    disp._cache = NullCache()


def _numba_files(folder: str, stem: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [
        os.path.join(folder, n)
        for n in names
        if n.startswith(stem + ".") and n.endswith((".nbi", ".nbc"))
    ]


def _check_numba_files(mod, stem: str) -> None:
    """Before numba unpickles machine code for ``mod`` (a pickle runs code as it loads), check
    the folder and files it would read: a file another user could have written is deleted
    (numba compiles again); a folder that is not private turns numba's cache off for ``mod``."""
    for disp in _dispatchers(mod):
        folder = getattr(getattr(disp, "_cache", None), "cache_path", None)
        if folder is None:
            continue
        try:
            why = _unsafe(os.stat(folder))
        except OSError:
            continue  # nothing there to load
        if why is not None:
            _warn_once(
                "numba-dir:" + folder,
                f"fusegrad: numba's cache folder {folder} is {why}; kernels there are compiled "
                "again in each process instead of loaded from it.",
            )
            _off(disp)
            continue
        for f in _numba_files(folder, stem):
            try:
                why = _unsafe(os.lstat(f))
                if why is not None:
                    os.unlink(f)
                    _warn_once(
                        "numba-file:" + f,
                        f"fusegrad: deleted numba cache file {f} ({why}); compiling it again.",
                    )
            except OSError as e:
                _warn_once(
                    "numba-file:" + f,
                    f"fusegrad: numba cache file {f} is {why} and cannot be deleted ({e}); "
                    "its kernel compiles in memory.",
                )
                _off(disp)


def _load(sig, plan):
    key = _key(sig)
    folder = cache_dir()
    modname = f"_fusegrad_kernel_{key[:40]}"
    if folder is None:
        body = (_pairs if plan.mirrored else _cg).generate_source(plan)
        STATS["generated"] += 1
        return _exec(body, None, modname)
    path = os.path.join(folder, f"k_{key[:40]}.py")
    text, problem = _read_checked(path, key)
    if text is not None:
        try:
            mod = _exec(text, path, modname)
            STATS["loaded_from_disk"] += 1
            return mod
        except Exception as e:
            problem = f"import failed ({e!r})"
    if problem != "missing":
        STATS["rebuilt"] += 1
        _warn_once(
            "corrupt:" + key,
            f"fusegrad: kernel cache file {path} was not usable ({problem}); rebuilding it.",
        )
    body = (_pairs if plan.mirrored else _cg).generate_source(plan)
    text = _HEADER.format(key=key, digest=hashlib.sha256(body.encode()).hexdigest()) + body
    STATS["generated"] += 1
    try:
        _write_atomic(path, text)
    except OSError as e:  # full disk, folder removed or made read-only meanwhile
        _warn_once(
            "write:" + folder,
            f"fusegrad: cannot write to kernel cache folder {folder} ({e}); kernels compile in "
            "memory and are not cached on disk.",
        )
        return _exec(text, None, modname)
    return _exec(text, path, modname)


def _entry(kernel) -> _Entry:
    sig = signature(kernel)
    e = _ENTRIES.get(sig)
    if e is None:
        with _lock:
            e = _ENTRIES.get(sig)
            if e is None:
                plan = _plan_for(sig, kernel)
                if plan.error is not None:
                    raise NotImplementedError(f"numba engine: unsupported {plan.error}")
                e = _Entry(sig, plan, _load(sig, plan))
                _ENTRIES[sig] = e
    return e


def _nthreads() -> int:
    return _blocked.threads()


def _choose_nblk(n0: int, partial_elems: int, parallel: bool, needs_partial: bool) -> int:
    if n0 <= 1:
        return 1
    nt = _nthreads() if parallel else 1
    if not needs_partial:
        return min(n0, 4 * nt) if parallel else 1
    # blocks of ~128 rows keep per-block naive sums short; cap partial memory at ~8 MB
    nblk = max(4 * nt, -(-n0 // 128))
    cap = max(nt, (8 << 20) // max(1, 8 * partial_elems))
    return max(1, min(n0, nblk, cap))


def _ns_per_point(kernel) -> float:
    slow, fast = inner_ops(kernel)
    return ARITH_NS + EXPENSIVE_NS * slow + VECTOR_NS * fast


def _choose_nslot(nblk: int, parallel: bool, slotted: bool) -> int:
    """Slots run their blocks in turn: one per thread when outputs keep per-slot partials (their
    memory is per slot), else one per block."""
    if not parallel:
        return 1
    return min(_nthreads(), nblk) if slotted else nblk


def _cache_files_in(exc: BaseException) -> list[str] | None:
    """The numba cache files named in the frames where ``exc`` (or an exception it chains)
    was raised inside numba's cache loader, or None when it was not raised there."""
    found: list[str] | None = None
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        tb = cur.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename.endswith(os.path.join("numba", "core", "caching.py")):
                found = found if found is not None else []
                loc = tb.tb_frame.f_locals
                if code.co_name == "_load_data" and isinstance(loc.get("path"), str):
                    found.append(loc["path"])
                index = getattr(loc.get("self"), "_index_path", None)
                if code.co_name == "_load_index" and isinstance(index, str):
                    found.append(index)
            tb = tb.tb_next
        cur = cur.__cause__ or cur.__context__
    return found


def _first_call(disp, args):
    """The first call of ``disp``, which compiles it or loads its machine code. A numba cache
    file that does not unpickle (truncated, empty: EOFError, UnpicklingError, ...) would fail
    this call in every process from now on: it is deleted, with one warning, and the call made
    again, which compiles and saves it afresh."""
    try:
        return disp(*args)
    except Exception as e:
        files = _cache_files_in(e)
        if files is None:
            raise
        bad = sorted(set(files)) or ["?"]
        cache = getattr(disp, "_cache", None)
        folder = getattr(cache, "cache_path", None)
        stem = os.path.basename(getattr(disp.py_func.__code__, "co_filename", ""))[:-3]
        if folder and stem:
            files += _numba_files(folder, stem)  # the module's others: its index may list them
        for f in set(files):
            try:
                os.unlink(f)
            except OSError:
                pass
        STATS["rebuilt"] += 1
        _warn_once(
            "numba-corrupt:" + bad[0],
            f"fusegrad: numba cache file {', '.join(bad)} could not be loaded "
            f"({type(e).__name__}: {e}); deleted it (and its kernel's other numba cache files) "
            "and rebuilding them.",
        )
        try:
            return disp(*args)
        except Exception as e2:
            if _cache_files_in(e2) is None:
                raise
            _off(disp)  # still unreadable (not ours to delete?): compile in memory
            return disp(*args)


# Kernels over fewer points read their inputs as they are: making the padded view costs ~4 us an
# input (np.lib.stride_tricks.as_strided), more than vectorising saves on a small domain (the
# LSTM example's replay, 8x24 gates: 9.9 -> 12.2 ms with every kernel's gates padded).
PAD_ROWS_FROM = 1 << 15


def rows_padded(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous array with the same element at every index the kernel reads,
    when ``a`` is a block of rows of a wider array (``z[:, h:2h]``, an LSTM's gate): its rows
    padded to their stride. numba compiles a non-contiguous array's loads with runtime strides,
    which LLVM does not vectorise: a fused LSTM cell over 1024x128 gates sliced from one
    product took 8.6 ms, 2.1 with contiguous gates. The padding past the last row's end lies
    outside ``a``'s memory, and nothing reads it: the loops stop at the domain's size.

    >>> z = np.arange(12.0).reshape(3, 4)
    >>> p = rows_padded(z[:, 1:3]); p.shape, p.flags.c_contiguous, bool(p[2, 1] == z[2, 2])
    ((3, 4), True, True)
    """
    if a.ndim < 2 or a.flags.c_contiguous:
        return a
    strides, item = a.strides, a.itemsize
    if strides[-1] != item or 0 in a.shape:
        return a
    padded = [a.shape[0]]
    for outer, inner, n in zip(strides[:-1], strides[1:], a.shape[1:]):
        if inner <= 0 or outer % inner or outer // inner < n:
            return a  # (not rows of a wider array: a transpose, a broadcast, a reversal)
        padded.append(outer // inner)
    return np.lib.stride_tricks.as_strided(a, padded, strides)


def rows_padded_or_c(a: np.ndarray) -> np.ndarray:
    """``rows_padded(a)``, and a transposed array (F-contiguous, as ``x.T``) copied to C order:
    for a kernel whose vectorised math costs more per point than the copy (see
    ``operand_layout``). Its loads with runtime strides keep the whole loop scalar, in whichever
    order the loop runs: ``sigmoid(x.T + y) * tanh(y)``'s gradient over 1000x1000 took 44.4 ms
    with ``x.T`` as it is, 19.7 with it copied (NumPy's forward alone: 13.1 ms). NumPy's copy
    of a transpose costs ~1 ns a point (~3 over power-of-two rows, whose columns share cache
    sets).

    >>> x = np.arange(6.0).reshape(2, 3)
    >>> c = rows_padded_or_c(x.T); c.flags.c_contiguous, bool((c == x.T).all())
    (True, True)
    """
    if a.ndim >= 2 and a.flags.f_contiguous and not a.flags.c_contiguous:
        return np.ascontiguousarray(a)
    return rows_padded(a)


# Vectorised math ops (numba_math's exp, tanh...) at every point from which a kernel's transposed
# operands are copied to C order. Gradients w.r.t. x and y over 1024x1024 with every transpose
# copied, against none (alternated, one process): sum((x.T + y) * y) lost, 13.3 -> 15.3 ms;
# sum(exp(x.T - y) * y) gained 10.6 -> 9.6; sum(sigmoid(x.T + y) * tanh(y)) 24.3 -> 13.5.
COPY_TRANSPOSED_FROM_FAST_OPS = 2


# An operand of at most 1/COPY_REUSED_FROM of a kernel's points (each element read that many
# times: a row or column of a pairwise kernel) that is not C-contiguous is copied first: strided
# loads keep the loop scalar, and the copy costs a fraction of one pass. A coordinate of 2000
# points in 3-d (``x[:, 0]``, stride 24 bytes), in sum(exp(-sum((x[:, None] - x[None]) ** 2,
# -1))): 18 ms as it was, 3.3 ms copied.
COPY_REUSED_FROM = 16


def operand_layout(kernel) -> Callable[[np.ndarray], np.ndarray] | None:
    """What a kernel's operands go through before its loop: None under ``PAD_ROWS_FROM``
    points (as they are); else a small strided operand copied to C order (``COPY_REUSED_FROM``),
    and the others through ``rows_padded_or_c`` for a kernel with at least
    ``COPY_TRANSPOSED_FROM_FAST_OPS`` vectorised math ops a point, else ``rows_padded``.

    >>> from fusegrad.lazy.kernel import Kernel
    >>> operand_layout(Kernel((8,), (), (), (), ())) is None
    True
    >>> column = np.arange(6.0).reshape(3, 2)[:, 0]
    >>> operand_layout(Kernel((256, 256), (), (), (), ()))(column).flags.c_contiguous
    True
    """
    if kernel.size < PAD_ROWS_FROM:
        return None
    heavy = inner_ops(kernel)[1] >= COPY_TRANSPOSED_FROM_FAST_OPS
    pad = rows_padded_or_c if heavy else rows_padded
    small = kernel.size // COPY_REUSED_FROM

    def layout(a: np.ndarray) -> np.ndarray:
        if a.size <= small and not a.flags.c_contiguous:
            return np.ascontiguousarray(a)
        return pad(a)

    return layout


def _as_it_is(a: np.ndarray) -> np.ndarray:
    return a


def _call(disp, args):
    before = len(disp.overloads)
    if before:
        return disp(*args)
    hits = sum(disp.stats.cache_hits.values())
    start = time.perf_counter()
    r = _first_call(disp, args)
    if len(disp.overloads) > before:
        estimate = _ESTIMATED.pop(id(disp), None)
        if sum(disp.stats.cache_hits.values()) > hits:
            STATS["cache_hits"] += 1
        else:
            STATS["compiled"] += 1
            if estimate:
                _MEASURED.append((time.perf_counter() - start) / estimate)
    return r


def run(kernel) -> list[np.ndarray]:
    """Evaluate ``kernel``: one NumPy-allocated array per output, in keepdims shape.

    >>> import numpy as np
    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((2,), (np.array([1.0, 4.0]),), (), (Instr("sqrt", (0,), f8),),
    ...            (Output(1, None, (), f8),))
    >>> run(k)
    [array([1., 2.])]
    """
    short = _split.split(kernel)
    if short is not None:  # a last axis of a few points: over the others, vectorised
        return short.assemble(run(short.kernel))
    e = _entry(kernel)
    dom = kernel.domain
    outs = kernel.outputs
    size = kernel.size
    parallel = (
        len(dom) > 0
        and dom[0] > 1
        and size * _ns_per_point(kernel) >= PARALLEL_MIN_NS
        and _nthreads() > 1
    )
    if e.plan.mirrored:
        return _run_mirrored(e, kernel, parallel)
    out_arrays = []
    for j, o in enumerate(outs):
        shape = kernel.output_shape(o)
        if e.prefill[j]:
            out_arrays.append(_buffers.full(shape, e.idents[j], o.dtype))
        else:
            out_arrays.append(_buffers.empty(shape, o.dtype))
    partials = []
    if any(e.partial):
        slotted = e.plan.slotted
        # per-block partials only for outputs reduced to one value; the others keep one
        # partial per slot (total, compensation, block scratch for a float sum)
        elems = sum(
            int(np.prod(kernel.output_shape(o)))
            for j, o in enumerate(outs)
            if e.partial[j] and not slotted[j]
        )
        nblk = _choose_nblk(dom[0], elems, parallel, True)
        nslot = _choose_nslot(nblk, parallel, any(slotted))
        for j, o in enumerate(outs):
            if slotted[j]:
                rows = 3 if o.reduce == "sum" and o.dtype.kind == "f" else 1
                shape = (nslot, rows) + kernel.output_shape(o)
                partials.append(np.full(shape, e.idents[j], dtype=o.dtype))
            elif e.partial[j]:
                shape = (nblk,) + kernel.output_shape(o)
                partials.append(np.full(shape, e.idents[j], dtype=o.dtype))
    else:
        nblk = _choose_nblk(dom[0], 0, parallel, False) if dom else 1
        nslot = _choose_nslot(nblk, parallel, False)
    args = list(dom)
    pad = operand_layout(kernel) or _as_it_is
    for a, v in zip(kernel.inputs, e.views):
        args.append(a[(0,) * a.ndim] if v is None else pad(a[v]))
    args += kernel.constants
    args += out_arrays
    args += partials
    fn = e.long if _cg.long_rows(e.plan, nblk, dom) else e.short
    if nslot > 1:
        if not fn.overloads:
            _call(fn, [nblk, nslot, 0, 0, False, _NO_CLAIMS, *args])  # compiles (or loads) it
        _run_split(fn, nblk, nslot, args)
    else:
        _call(fn, [nblk, nslot, 0, nslot, True, _NO_CLAIMS, *args])
    e.ran = True
    return out_arrays


# A kernel given no claims counter runs its slots sl0 <= sl < sl1 (numba_codegen).
_NO_CLAIMS = np.zeros(0, np.int64)


def _run_split(fn, nblk: int, nslot: int, args: Sequence) -> None:
    """Run the kernel ``fn`` on this thread and the pool's, each claiming slots one by one
    from a shared counter until none is left (a thread that starts late finds them run), then
    combine the partials on this thread."""
    claims = np.zeros(1, np.int64)
    pool = _blocked.pool()
    head = (nblk, nslot, 0, nslot, False, claims)
    done = [pool.submit(fn, *head, *args) for _ in range(1, min(_nthreads(), nslot))]
    fn(*head, *args)
    for f in done:
        f.result()
    fn(nblk, nslot, 0, 0, True, _NO_CLAIMS, *args)  # combine the partials


def replayer(kernel):
    """For ``jit``'s replays: a function of new inputs and constants (the shapes and dtypes of
    ``kernel``'s) giving what ``run`` would, with everything ``run`` works out from the
    signature and domain (the compiled entry, blocks, slots, output and partial shapes, input
    views) done once: a call costs the allocations and numba's dispatch. Its ``outs``: arrays
    (C-contiguous, the outputs' keepdims shapes and dtypes; None for a fresh one) to write the
    outputs into, which it returns (``writes_into``). None for mirrored sums and empty domains
    (``run`` is called for those).

    >>> from fusegrad.lazy.kernel import Instr, Kernel, Output
    >>> f8 = np.dtype("f8")
    >>> k = Kernel((3,), (np.ones(3),), (2.0,), (Instr("multiply", (0, 1), f8),),
    ...            (Output(2, "sum", (0,), f8),))
    >>> replayer(k)((np.arange(3.0),), (2.0,))
    [array([6.])]
    """
    short = _split.split(kernel)
    if short is not None:
        return _split_replayer(kernel, short)
    e = _entry(kernel)
    dom = kernel.domain
    if e.plan.mirrored or kernel.size == 0:
        return None
    outs = kernel.outputs
    parallel = (
        len(dom) > 0
        and dom[0] > 1
        and _nthreads() > 1
        and (
            kernel.size * _ns_per_point(kernel) >= PARALLEL_MIN_NS
            or kernel.size >= REPLAY_PARALLEL_MIN_POINTS
        )
    )
    specs = []  # (shape, dtype, fill value or None) of each output, then of each partial
    for j, o in enumerate(outs):
        specs.append((kernel.output_shape(o), o.dtype, e.idents[j] if e.prefill[j] else None))
    if any(e.partial):
        slotted = e.plan.slotted
        elems = sum(
            int(np.prod(kernel.output_shape(o)))
            for j, o in enumerate(outs)
            if e.partial[j] and not slotted[j]
        )
        nblk = _choose_nblk(dom[0], elems, parallel, True)
        nslot = _choose_nslot(nblk, parallel, any(slotted))
        for j, o in enumerate(outs):
            if slotted[j]:
                rows = 3 if o.reduce == "sum" and o.dtype.kind == "f" else 1
                specs.append(((nslot, rows) + kernel.output_shape(o), o.dtype, e.idents[j]))
            elif e.partial[j]:
                specs.append(((nblk,) + kernel.output_shape(o), o.dtype, e.idents[j]))
    else:
        nblk = _choose_nblk(dom[0], 0, parallel, False) if dom else 1
        nslot = _choose_nslot(nblk, parallel, False)
    n_out = len(outs)
    views = [(0,) * len(dom) if v is None else v for v in e.views]
    pad = operand_layout(kernel)
    fn = e.long if _cg.long_rows(e.plan, nblk, dom) else e.short
    head = (nblk, nslot, 0, nslot, True, _NO_CLAIMS, *dom)
    if not fn.overloads:  # compiled (or loaded) now, not at the first replay
        # (the layouts a replay passes: its operands padded as run_serial or the pooled getter
        # pads them)
        lay = pad or rows_padded
        _call(fn, [*head, *(lay(a[v]) for a, v in zip(_probe_inputs(kernel), views)),
                   *kernel.constants, *_arrays(specs)])  # fmt: skip
    e.ran = True
    empty = np.empty
    # what a prefilled buffer starts as: a copy of its template (one C call, no np.full)
    templates = [None if f is None else np.full(s, f, d) for s, d, f in specs]
    fresh = [(s, d, t) for (s, d, _), t in zip(specs, templates)]

    def arrays(outs: list | None) -> list:
        if outs is None:
            return [empty(s, d) if t is None else t.copy() for s, d, t in fresh]
        bufs = []
        for j, (s, d, t) in enumerate(fresh):
            b = outs[j] if j < n_out else None
            if b is None:
                b = empty(s, d) if t is None else t.copy()
            else:
                if b.shape != s or b.dtype != d or not b.flags.c_contiguous:
                    # the loop writes without bounds checks: never into a buffer of another
                    # layout
                    raise ValueError(f"output {j}: a buffer {b.shape} {b.dtype}, not {s} {d}")
                if t is not None:
                    np.copyto(b, t)
            bufs.append(b)
        return bufs

    if nslot > 1:
        padded = pad or _as_it_is

        def run_parallel(
            inputs: tuple, constants: tuple, outs: list | None = None
        ) -> list[np.ndarray]:
            bufs = arrays(outs)
            args = (*dom, *(padded(a[v]) for a, v in zip(inputs, views)), *constants, *bufs)
            _run_split(fn, nblk, nslot, args)
            return bufs[:n_out]

        run_parallel.writes_into = True
        return run_parallel

    whole = tuple(slice(None) for _ in dom)
    # an input read whole is passed as it is; the others are indexed (a scalar: ``a[0, ..]``)
    indexed = [j for j, v in enumerate(views) if e.views[j] is None or v != whole]

    def run_bare(inputs: tuple, constants: tuple, outs: list | None = None) -> list[np.ndarray]:
        """``run_serial`` of inputs already indexed by ``indexes`` (``x[v]``)."""
        bufs = arrays(outs)  # checks each buffer given (one of another layout raises)
        fn(*head, *inputs, *constants, *bufs)
        return bufs[:n_out] if len(bufs) > n_out else bufs

    def run_serial(inputs: tuple, constants: tuple, outs: list | None = None) -> list[np.ndarray]:
        if indexed:
            given = list(inputs)
            for j in indexed:
                given[j] = given[j][views[j]]
            inputs = tuple(given)
        if pad is not None:
            inputs = tuple(pad(a) for a in inputs)
        return run_bare(inputs, constants, outs)

    def bind(outs: list) -> Callable[[tuple, tuple], list[np.ndarray]]:
        """``run_bare`` writing into ``outs`` (one buffer or None per output; the buffers
        checked here once), its scratch buffers made once too: for a program's own buffers,
        which only one replay at a time uses (``replay.Program``'s lock). An output given None
        gets a new array at each call (a result handed out)."""
        if len(outs) != n_out:
            raise ValueError(f"bind needs one entry per output ({n_out}), got {len(outs)}")
        bufs = arrays(outs)
        new = [(j, *fresh[j]) for j, b in enumerate(outs) if b is None]
        # a prefilled buffer's start value, by ndarray.fill (np.copyto dispatches: ~1 us)
        refill = [(b.fill, f) for b, (_, _, f), o in zip(bufs, specs, [*outs, *bufs[n_out:]])
                  if f is not None and o is not None]  # fmt: skip

        def bound(inputs: tuple, constants: tuple) -> list[np.ndarray]:
            for j, s, d, t in new:
                bufs[j] = empty(s, d) if t is None else t.copy()
            for fill, f in refill:
                fill(f)
            fn(*head, *inputs, *constants, *bufs)
            return bufs[:n_out]

        return bound

    # a replay composes each input's index into the view it takes (replay_ops.indexed_operands)
    run_serial.indexes = tuple((j, views[j]) for j in indexed)
    run_serial.bare = run_bare
    run_serial.pads = pad  # (what bare's caller applies to rows of wider arrays, transposes)
    # below PAD_ROWS_FROM points, rows of a wider array in the program's buffers, padded once
    # per buffer (at each call, as_strided's ~3 us cost more than it saved): an LSTM's 8x24
    # gate kernel with 7 exp/tanh a point, 16 -> 5 us
    run_serial.pads_pooled = rows_padded if pad is None else None
    run_bare.bind = bind
    run_serial.writes_into = run_bare.writes_into = True
    return run_serial


def _split_replayer(kernel, first):
    """``replayer`` of a kernel ``numba_split`` splits (``first``: its split): the split
    kernel's, its inputs the slices of each call's and its outputs assembled."""
    inner = replayer(first.kernel)
    if inner is None:
        return None
    domain, program, outputs = kernel.domain, kernel.program, kernel.outputs
    sig = kernel.signature()

    def run_split(inputs: tuple, constants: tuple, outs: list | None = None) -> list[np.ndarray]:
        s = _split.split(Kernel(domain, tuple(inputs), tuple(constants), program, outputs, sig))
        assert s is not None  # (the same signature and domain as when it was made)
        got = s.assemble(inner(s.kernel.inputs, constants))
        if outs is None:
            return got
        for j, (b, g) in enumerate(zip(outs, got)):
            if b is None:
                outs[j] = g
            else:
                np.copyto(b, g)
        return list(outs)

    return run_split


def _arrays(specs: list) -> list[np.ndarray]:
    return [np.empty(s, d) if f is None else np.full(s, f, d) for s, d, f in specs]


def _probe_inputs(kernel) -> list[np.ndarray]:
    """Zero inputs of ``kernel``'s shapes, to compile with: C-ordered in place of a broadcast
    (read-only) stand-in, and the kernel's own (a jit probe of a view's strides: the layout
    a replay passes, ``replay._probe``) otherwise."""
    return [a if a.flags.writeable else np.zeros(a.shape, a.dtype) for a in kernel.inputs]


_WHOLE = np.zeros((1, 2), np.int64)  # one block: the whole domain as one tile (never written)


def _run_mirrored(e: _Entry, kernel, parallel: bool) -> list[np.ndarray]:
    """A kernel with mirrored sums (``numba_pairs``): the tiles of a round-robin schedule, phase
    by phase on the worker threads, each adding into the outputs directly; totals (sums over
    axes 0 and 1) keep a running sum per thread of the schedule, added up at the end."""
    dom = kernel.domain
    nt = min(_nthreads(), max(1, dom[0] // (2 * _pairs.MIN_BLOCK))) if parallel else 1
    outs = [np.zeros(kernel.output_shape(o), o.dtype) for o in kernel.outputs]
    specs = _pairs.scratch_specs(dom, kernel.outputs)
    totals = [j for j, o in enumerate(kernel.outputs) if _pairs.tile_kind(o) == "total"]
    parts = [np.zeros((nt, 2) + dom[2:], kernel.outputs[j].dtype) for j in totals]
    args = list(dom)
    pad = operand_layout(kernel) or _as_it_is
    for a, v in zip(kernel.inputs, e.views):
        args.append(a[(0,) * a.ndim] if v is None else pad(a[v]))
    args += kernel.constants
    args += outs
    fn = e.short

    def tiles(nb, which, slot, first=False):  # on the thread that runs them, with its strips
        strips = _pairs.take_strips(specs)
        call = [nb, which, *args, *strips, *(p[slot] for p in parts)]
        if first:
            _call(fn, call)
        else:
            fn(*call)
        _pairs.give_back(strips)

    if nt == 1:
        tiles(1, _WHOLE, 0, first=True)
    else:
        if not fn.overloads:
            tiles(1, _WHOLE[:0], 0, first=True)  # compiles (or loads) it only
        pool = _blocked.pool()
        for phase in _pairs.tile_arrays(nt):
            done = [pool.submit(tiles, 2 * nt, phase[t], t) for t in range(1, nt)]
            tiles(2 * nt, phase[0], 0)
            for f in done:
                f.result()
    for j, p in zip(totals, parts):
        # each thread's total and compensation (which is nan when the total is infinite)
        outs[j][...] = np.where(np.isfinite(p[:, 0]), p[:, 0] + p[:, 1], p[:, 0]).sum(axis=0)
    e.ran = True
    return outs


register(sys.modules[__name__])

"""``jit``: trace a function once per input signature, then only re-run its kernels.

A ``grad`` call costs tracing, rules, lazy-graph building and planning every time: a few hundred
microseconds of Python, whatever the size of the arrays. ``jit(f)`` pays that once per signature
(the shapes and dtypes of the array arguments, the values of the others) and records the kernels
the call ran (``fusegrad.lazy.replay``); later calls run the recorded kernels on the new arrays.

Semantics, as ``jax.jit`` where it is defined:

- NumPy arrays and NumPy scalars among the arguments (anywhere in a pytree) are the inputs; a new
  shape or dtype traces again.
- Python floats and complex numbers are inputs too, weak-typed as JAX's Python scalars (a float
  with a float32 array stays float32): a new value does not trace again. A function that reads
  one into Python (``if s > 0``, ``float(s)``, ``range``-like uses, NumPy on it alone) gets its
  numbers compiled in instead: one signature per value. Before a program with numbers is
  trusted for a new value, the call is recorded once more, and twice with the numbers' own
  doubles (what C code reads, ``math.sqrt(s)``) set to ±inf, and the recordings compared.
  The sign, zero, infinity and NaN of a number are part of the signature.
- Python ints, bools, strings and other hashable values are compiled in (an int is a size, a
  count, an axis or an index far more often than data; JAX asks for ``static_argnums`` there),
  and functions, classes and modules; any other object hashed by identity (a random generator,
  a model object) could change unseen, so the call runs uncompiled (``_held_by_identity``).
- Arrays the function reads from elsewhere (globals, closures) are constants of the recording:
  their contents are read at each call, but rebinding the name to another array is not seen.
  What the function computes from them with NumPy alone, before they meet an argument
  (``C - C.mean()``), is computed once, at the recording (as ``jax.jit`` computes every closure
  value): pass an array that changes between calls as an argument.
- NumPy calls that need concrete arrays (``np.matmul``, ``np.linalg.solve``, ``np.sort``, a
  gather ``x[idx]``, any rule that is not lazy, and their pullbacks) are *steps* of the recorded
  program, run again on the new operands at each replay (``replay.step``).
- A function that cannot be replayed (a Python ``if`` on an array's value, ``float()`` of an
  element; shapes that depend on values, found when a replayed step's shapes differ) is simply
  called every time, with one warning; ``cache_info()`` says why. (JAX raises a
  ``ConcretizationTypeError`` there.) A first call that raises is recorded again next time, and
  ``cache_info()`` keeps its error as the reason meanwhile.
- The cache keeps the ``cache_size`` most recently used signatures (64 by default; ``None``: no
  bound), as ``functools.lru_cache``.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> g = fg.jit(fg.grad(lambda v, s: np.sum(np.tanh(v[:, None] - v[None, :]) * s)))
    >>> g(np.zeros(3), 2.0)
    array([0., 0., 0.])
    >>> g(np.ones(3), 3.0).shape  # a new number: recorded once more, to check
    (3,)
    >>> g(np.ones(3), 4.0).shape  # replayed
    (3,)
    >>> info = g.cache_info()
    >>> info.hits, info.misses, info.currsize, info[0].replayable, info[0].numbers
    (1, 2, 1, True, 'inputs')
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import operator
import time
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from . import direct_concat, direct_matmul
from .ad.core import _max_level
from .ad.pytree import structure
from .lazy import LazyArray, engines, materialize, materialize_many, replay, small
from .lazy.nodes import leaf
from .lazy.protocols import LazyWriteError
from .rules.indexing import is_basic_index
from .rules.registry import LAZY_CASES, RECORDABLE_CASES, rrule
from .tangents import AbstractZero, ZeroTangent, unthunk

_STATIC = (int, float, complex, bool, str, bytes, type(None))
_NUMBERS = (float, complex)  # exact types: inputs of the recording (not int, bool)
_NDARRAY_ONLY = {np.ndarray}
DEFAULT_CACHE_SIZE = 64


class SignatureInfo(NamedTuple):
    """One signature of a jitted function, as ``cache_info()`` lists it."""

    signature: tuple
    replayable: bool
    kernels: int | None  # how many kernels a replay runs
    calls: int
    numbers: str  # "": none; "inputs": replayed with new values; "compiled in": one per value
    reason: str  # why not replayable, or why numbers are compiled in


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """Totals of a jitted function's cache, like ``functools.lru_cache``'s, and its signatures,
    least recently used first (``info[i]``, ``len(info)`` and iteration are over ``entries``)."""

    hits: int  # calls replayed
    misses: int  # calls that traced (recorded) the function, or called it uncompiled
    maxsize: int | None
    currsize: int
    entries: tuple[SignatureInfo, ...]

    def __getitem__(self, i: Any) -> Any:
        return self.entries[i]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[SignatureInfo]:
        return iter(self.entries)


class _Entry:
    __slots__ = (
        "key", "program", "rebuild", "reason", "calls", "failed", "numbers", "values",
        "verified", "fast",
    )  # fmt: skip

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.program: replay.Program | None = None
        self.rebuild: Callable | None = None
        self.reason = ""
        self.calls = 0
        self.failed = False  # the recording raised: record again at the next call
        self.numbers = ""
        self.values: tuple = ()  # the number arguments the program was recorded with
        # the numbers (positions) whose change a second recording showed to give the same program
        self.verified: frozenset[int] = frozenset()
        self.fast: tuple | None = None  # the key of _fast_key, when it is one


# Arguments compiled in by identity that cannot change unseen (a function, a class, a module)
_FIXED_BY_IDENTITY = (
    types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
    functools.partial, type, np.ufunc,
)  # fmt: skip
_RANDOM_STATES = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def _held_by_identity(x: Any) -> str | None:
    """Why an argument that would be compiled in by its identity (an object with ``object``'s
    hash) must not be: its state can change between calls without the key changing (a random
    generator's draws, a model object's attributes), so a replay would be stale. None when it
    is a function, class or module.

    >>> _held_by_identity(len) is None, _held_by_identity(np.random.default_rng(0))[:20]
    (True, 'a numpy.random.Gener')
    """
    if type(x).__hash__ is not object.__hash__ or isinstance(x, _FIXED_BY_IDENTITY):
        return None
    if isinstance(x, _RANDOM_STATES):
        return (
            f"a numpy.random.{type(x).__name__} argument: a replay would repeat the recording's "
            "draws; draw the random numbers outside (mask = rng.random(shape) > p) and pass "
            "the arrays in"
        )
    return (
        f"a {type(x).__name__} object argument, which a replay would hold by identity (a "
        "change to its attributes between calls would not be seen): pass its arrays in a "
        "dict, tuple, namedtuple or dataclass (pytrees, whose arrays are inputs)"
    )


def _static_key(x: Any) -> Any:
    """A compiled-in value's key: 0.0 and -0.0 differ, NaN equals NaN, 1 and 1.0 and True
    differ."""
    if isinstance(x, float):
        return (float, x.hex())
    if isinstance(x, complex):
        return (complex, x.real.hex(), x.imag.hex())
    return (type(x), x)


def _value_class(x: float | complex) -> Any:
    """What of a number argument's value is part of the signature (C code such as
    ``math.isnan`` may read it unseen): NaN, the sign of an infinity, of a zero, of the rest."""
    if isinstance(x, complex):
        return (_value_class(x.real), _value_class(x.imag))
    if math.isnan(x):
        return "nan"
    sign = "-" if math.copysign(1.0, x) < 0 else "+"
    return sign + ("inf" if math.isinf(x) else "0" if x == 0 else "")


def jit(fun: Callable | None = None, *, cache_size: int | None = DEFAULT_CACHE_SIZE) -> Any:
    """``fun``, traced once per input signature and replayed as its recorded kernels after.

    Works on any function of arrays built from NumPy calls, and on fusegrad transformations of
    one (``jit(grad(f))``, ``jit(value_and_grad(f))``). See the module docstring for what is
    an input and what is compiled in. ``cache_size`` bounds the signatures kept (least recently
    used first out; ``None``: no bound). ``wrapped.cache_info()`` gives the totals and the
    signatures, ``wrapped.cache_clear()`` empties the cache. ``@jit(cache_size=8)`` decorates.

    >>> f = jit(lambda x, y: np.sum((x[:, None] - y[None, :]) ** 2, axis=1))
    >>> f(np.arange(2.0), np.arange(3.0))
    array([5., 2.])
    """
    if fun is None:
        return functools.partial(jit, cache_size=cache_size)
    if not callable(fun):
        raise TypeError(f"fusegrad.jit needs a function, got {type(fun).__name__}")
    if cache_size is not None and (
        isinstance(cache_size, bool) or not isinstance(cache_size, int | np.integer)
    ):
        raise TypeError(
            f"fusegrad.jit: cache_size must be a positive int or None, got {cache_size!r}"
        )
    if cache_size is not None and cache_size < 1:
        raise ValueError(
            f"fusegrad.jit: cache_size must be at least 1 (or None for no bound), got {cache_size}"
        )
    maxsize = None if cache_size is None else int(cache_size)
    cache: OrderedDict[tuple, _Entry] = OrderedDict()
    fast: dict[tuple, _Entry] = {}
    # signatures whose numbers are compiled in, with the reason (bounded as the cache)
    compiled_in: OrderedDict[tuple, str] = OrderedDict()
    stats = [0, 0]  # hits, misses

    def insert(entry: _Entry) -> None:
        cache[entry.key] = entry
        cache.move_to_end(entry.key)
        if entry.fast is not None:
            fast[entry.fast] = entry
        while maxsize is not None and len(cache) > maxsize:
            _, old = cache.popitem(last=False)
            if old.fast is not None and fast.get(old.fast) is old:
                del fast[old.fast]
        while maxsize is not None and len(compiled_in) > maxsize:
            compiled_in.popitem(last=False)

    def record(
        entry: _Entry, leaves, rebuild_args, positions, arrays, places, numbers, poison=None
    ) -> Any:
        entry.calls += 1
        stats[1] += 1
        entry.failed, entry.program, entry.rebuild, entry.reason = False, None, None, ""
        entry.numbers, entry.values = "", ()
        try:
            return _record(
                fun, entry, leaves, rebuild_args, positions, arrays, places, numbers, False, poison
            )
        except BaseException as e:
            entry.failed = True
            entry.reason = f"the call raised {type(e).__name__}: {e}"
            raise

    def record_keyed(entry: _Entry, key: tuple, base: tuple, values: tuple, how: tuple) -> Any:
        """``record``, then the entry keyed by its numbers' values when the recording read
        them (or when its signature's numbers are compiled in already)."""
        out = record(entry, *how)
        if key is not base:  # a signature of compiled-in numbers: keyed by their values
            entry.numbers = "compiled in"
            entry.reason = entry.reason or compiled_in.get(base, "")
        if entry.numbers == "compiled in" and key is base and cache.get(key) is entry:
            # the values were read: this program is for these values only
            compiled_in[key] = entry.reason
            del cache[key]
            entry.key = (*key, ("values", values))
            insert(entry)
        return out

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and {*map(type, args)} <= _NDARRAY_ONLY:
            # The common call, keyed without flattening: positional arrays only.
            entry = fast.get(_fast_key(args))
            if entry is not None and entry.program is not None:
                entry.calls += 1
                stats[0] += 1
                cache.move_to_end(entry.key)
                return _replay(entry, args, (), fun, args, kwargs)
        leaves, rebuild_args, tree_key = structure((args, kwargs))
        parts: list[Any] = [tree_key, engines.current()]
        positions, arrays, places, numbers = [], [], [], []
        for i, x in enumerate(leaves):
            t = type(x)
            if t is np.ndarray or isinstance(x, np.generic):
                parts.append((x.shape, x.dtype, t))
                positions.append(i)
                arrays.append(x)
            elif t in _NUMBERS:
                parts.append(("number", t, _value_class(x)))
                places.append(i)
                numbers.append(x)
            elif isinstance(x, replay.Number):
                return fun(*args, **kwargs)  # inside another jit's recording: it records this
            elif isinstance(x, _STATIC):
                parts.append(_static_key(x))
            else:
                try:
                    hash(x)
                except TypeError:
                    return fun(*args, **kwargs)  # e.g. a tracer or a lazy array: nothing to cache
                if isinstance(x, LazyArray) or hasattr(x, "__array_ufunc__"):
                    return fun(*args, **kwargs)
                why = _held_by_identity(x)
                if why is not None:
                    name = getattr(fun, "__name__", "the function")
                    warnings.warn(f"fusegrad.jit: {name} runs uncompiled: {why}", stacklevel=2)
                    return fun(*args, **kwargs)
                parts.append((type(x), x))
        key = base = tuple(parts)
        values = tuple(_static_key(v) for v in numbers)
        if numbers and key in compiled_in:
            compiled_in.move_to_end(key)
            key = (*key, ("values", values))
        entry = cache.get(key)
        how = (leaves, rebuild_args, positions, arrays, places, numbers)
        if entry is None:
            entry = _Entry(key)
            if not kwargs and all(type(a) is np.ndarray for a in args):
                entry.fast = _fast_key(args)
            insert(entry)
            return record_keyed(entry, key, base, values, how)
        cache.move_to_end(key)
        if entry.program is None:
            if entry.failed:  # its first recording raised: this one may read numbers
                return record_keyed(entry, key, base, values, how)
            entry.calls += 1
            stats[1] += 1
            return fun(*args, **kwargs)
        if entry.numbers == "inputs" and values != entry.values:
            changed = frozenset(k for k, (a, b) in enumerate(zip(values, entry.values)) if a != b)
            if not changed <= entry.verified:
                return verify(entry, values, changed, how)
        entry.calls += 1
        stats[0] += 1
        return _replay(entry, arrays, numbers, fun, args, kwargs)

    def verify(entry: _Entry, values: tuple, changed: frozenset, how: tuple) -> Any:
        """Record again with the new numbers: the same program means it serves every value of
        the ``changed`` ones (each number is checked by a change of its own)."""
        other = _Entry(entry.key)
        out = record(other, *how)  # if it raises, nothing changes
        if other.numbers == "inputs" and other.program is not None:
            if _same_program(entry, other) and all(_same_poisoned(entry, how, p) for p in POISONS):
                entry.verified |= changed
                entry.calls += 1
                return out
            why = (
                "numbers compiled in: recordings with two values of a number differ (its value "
                "was read where Python cannot see it, a math function for instance)"
            )
        else:
            why = other.reason or "numbers compiled in"
        key = entry.key
        compiled_in[key] = why
        cache.pop(key, None)
        for e, vals in ((entry, entry.values), (other, values)):
            e.key = (*key, ("values", vals))
            e.numbers = "compiled in"
            if e.program is not None:
                e.reason = why
            insert(e)
        return out

    def _same_program(entry: _Entry, other: _Entry) -> bool:
        return (
            other.numbers == "inputs"
            and other.program is not None
            and entry.program is not None
            and entry.program.same_as(other.program)
        )

    def _same_poisoned(entry: _Entry, how: tuple, poison: float) -> bool:
        """Whether a recording whose numbers are ``poison`` to C code (the float's own double,
        read by ``math.sqrt(s)`` or ``np.float64(s)`` without Python seeing it) and their
        values to Python is the same program: two values on one side of a branch taken on
        ``math.sqrt(s) > 0.9`` give the same program, ±inf take the other side."""
        shadow = _Entry(entry.key)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                leaves, rebuild_args, positions, arrays, places, numbers = how
                record(shadow, leaves, rebuild_args, positions, arrays, places, numbers, poison)
        except Exception:  # (math.sqrt(-inf)): C code read it
            return False
        finally:
            stats[1] -= 1  # not a call of the user's
        return _same_program(entry, shadow)

    def cache_info() -> CacheInfo:
        """Hits, misses, the bound and size, and one ``SignatureInfo`` per signature kept."""
        entries = tuple(
            SignatureInfo(
                e.key,
                e.program is not None,
                e.program.kernels if e.program is not None else None,
                e.calls,
                e.numbers,
                e.reason,
            )
            for e in cache.values()
        )
        return CacheInfo(stats[0], stats[1], maxsize, len(cache), entries)

    def cache_clear() -> None:
        """Forget every signature and reset the totals."""
        cache.clear()
        fast.clear()
        compiled_in.clear()
        stats[:] = [0, 0]

    wrapped.cache_info = cache_info  # type: ignore[attr-defined]
    wrapped.cache_clear = cache_clear  # type: ignore[attr-defined]
    return wrapped


def _fast_key(args: tuple) -> tuple:
    """The key of a call with positional ndarrays only (it cannot equal a pytree key). Dtypes
    as they are, not ``dtype.str`` (which builds a string, ~0.45 us an argument, and names
    every structured dtype of one size alike)."""
    return (engines.current(), *[(a.shape, a.dtype) for a in args])


def _replay(
    entry: _Entry, arrays: list | tuple, numbers: list | tuple, fun: Callable, args, kwargs
) -> Any:
    # np.asarray, not np.ascontiguousarray: that makes a 0-d array (a NumPy scalar) 1-d
    inputs = [
        a if type(a) is np.ndarray and a.flags.c_contiguous else np.asarray(a, order="C")
        for a in arrays
    ]
    program, rebuild = entry.program, entry.rebuild
    assert program is not None and rebuild is not None  # only entries with a program replay
    try:
        return rebuild(program.run(inputs, numbers))
    except replay.StepMismatch as e:
        # shapes that depend on values: this signature cannot be replayed after all
        entry.program, entry.rebuild, entry.reason = None, None, str(e)
        warnings.warn(
            f"fusegrad.jit: {getattr(fun, '__name__', 'the function')} will run uncompiled for "
            f"this signature: {entry.reason}",
            stacklevel=3,
        )
        return fun(*args, **kwargs)


def _recording_inputs(arrays: list, copy: bool) -> list[np.ndarray]:
    """What a recording runs on: for each C-contiguous array that overlaps no other argument, a
    view with a base of its own (its leaf and every node above it are new: nothing hash-consed
    or cached earlier is reused, so every kernel runs and is recorded); else a copy.

    >>> x = np.arange(3.0)
    >>> v, c = _recording_inputs([x, x], copy=False)  # the same memory twice: the second copied
    >>> np.shares_memory(v, x), np.shares_memory(c, x)
    (True, False)
    """
    out: list[np.ndarray] = []
    for a in arrays:
        fresh = None
        if not copy and type(a) is np.ndarray and a.flags.c_contiguous and a.size:
            if not any(np.may_share_memory(a, b) for b in out):
                try:
                    raw = memoryview(a).cast("B")  # type: ignore[arg-type]  # ndarray is a Buffer
                    fresh = np.frombuffer(raw, a.dtype).reshape(a.shape)
                except (TypeError, ValueError):  # a dtype the buffer protocol lacks (datetime)
                    fresh = None
        out.append(np.array(a, order="C", copy=True) if fresh is None else fresh)
    return out


def _prepare(x: Any) -> Any:
    """A step's operand or result made concrete: a thunk unthunked, a lazy value materialised."""
    x = unthunk(x)
    return materialize(x) if isinstance(x, LazyArray) else x


def _forward(f: Callable, *args: Any, **kwargs: Any) -> tuple:
    """The step of a rule that needs arrays: its value and its pullback."""
    out = rrule(f, *args, **kwargs)
    if out is None:
        raise TypeError(f"the rule of {getattr(f, '__name__', f)} declined {args!r}")
    return out


def _call(needed: tuple, pullback: Callable, ct: Any) -> Any:
    # the cotangents of untraced arguments (the data X of X @ w) are thunks the backward pass
    # never evaluates: a step would evaluate all its results
    grads = pullback(ct)
    return tuple(_own(unthunk(g)) if k else ZeroTangent() for g, k in zip(grads, needed))


def _own(g: Any) -> Any:
    """A cotangent that views another array (a 1-d operand's, reshaped from its matrix) as a
    copy: the caller gets it as the gradient, which must not be a view (``api``)."""
    return g.copy() if type(g) is np.ndarray and g.base is not None else g


def _pullback(needed: tuple, pullback: Callable, ct: Any) -> Any:
    if isinstance(ct, AbstractZero):
        return pullback(ct)
    return replay.step(functools.partial(_call, needed), (pullback, ct), {}, _prepare)


def _rule_step(f: Callable, traced: tuple, args: tuple, kwargs: dict, lazy: bool) -> tuple | None:
    """``(y, pullback)`` of a rule that needs arrays, recorded as steps of the program (the AD
    core calls this while ``jit`` records); None: the core calls the rule itself. A lazy rule is
    a step only when it would evaluate its argument (a gather ``x[index]`` of an index array).
    Under nested differentiation (lower-level tracers among the arguments) the rule's own NumPy
    calls are not all seen, so it is left to the core (an escape, as before). ``traced``: the
    arguments before unboxing (tracers where they are differentiated)."""
    if lazy and not (f is operator.getitem and not is_basic_index(args[1])):
        return None
    if _max_level(args) or _max_level(kwargs.values()):
        return None
    if f in RECORDABLE_CASES:  # a case whose evaluations are recorded kernels
        out = LAZY_CASES[f](*args, **kwargs)
        if out is not None:
            return out
    if f is np.concatenate:
        axis = direct_concat.axis_of(args, kwargs)
        if axis is not None and isinstance(traced[0], list | tuple):
            parts = tuple(_max_level((a,)) > 0 for a in traced[0])
            return direct_concat.rule_step(args, kwargs, axis, parts, _prepare)
    needed = tuple(_max_level((a,)) > 0 for a in traced)
    if direct_matmul.applies(f, args, kwargs):
        if direct_matmul.degenerate(*args):
            return direct_matmul.lazy_rule(args[0], args[1], needed)
        return _matmul_step(args, needed)
    y, pullback = replay.step(functools.partial(_forward, f), args, kwargs, _prepare)
    return y, functools.partial(_pullback, needed, pullback)


def _matmul_step(args: tuple, needed: tuple) -> tuple:
    """``a @ b`` as bare ``np.matmul`` steps (``direct_matmul``), each checked at the recording
    against matmul's rule on the same operands (which is replayed instead if they differ)."""
    y, pb = replay.step(
        direct_matmul.forward,
        args,
        {},
        _prepare,
        direct=True,
        reference=_matmul_rule,
        products=direct_matmul.forward_products,
    )
    if not direct_matmul.is_vjp(pb):  # the rule is the step: its pullback the generic one
        return y, functools.partial(_pullback, needed, pb)
    return y, functools.partial(_matmul_pullback, needed, pb)


def _matmul_rule(a: np.ndarray, b: np.ndarray) -> list:
    return list(_forward(np.matmul, a, b))


def _matmul_pullback(needed: tuple, pb: Any, ct: Any) -> tuple:
    if isinstance(ct, AbstractZero):
        return (ct, ct)
    backward = functools.partial(direct_matmul.backward, needed)
    grads = iter(
        replay.step(
            backward,
            (pb, ct),
            {},
            _prepare,
            direct=True,
            reference=functools.partial(_matmul_rule_backward, needed),
            products=functools.partial(direct_matmul.backward_products, needed),
        )
    )
    return tuple(next(grads) if k else ZeroTangent() for k in needed)


def _matmul_rule_backward(needed: tuple, pb: Any, ct: Any) -> list:
    a, b = direct_matmul.operands(pb)
    grads = _call(needed, _forward(np.matmul, a, b)[1], ct)
    return [g for g, k in zip(grads, needed) if k]


# What C code reading a number argument's own double sees in the recordings that look for such
# reads: a branch on a threshold takes the other side for one of them
POISONS = (math.inf, -math.inf)


def _record(
    fun: Callable,
    entry: _Entry,
    leaves: list,
    rebuild_args: Callable,
    positions: list,
    arrays: list,
    places: list,
    numbers: list,
    copy: bool = False,
    poison: Any = None,
) -> Any:
    start = time.perf_counter()
    inputs = _recording_inputs(arrays, copy)
    traced = list(leaves)
    rec = replay.Recorder(inputs, top_is_api=getattr(fun, "__fusegrad_api__", False))
    rec.rule_step = _rule_step
    for i, c, a in zip(positions, inputs, arrays):
        traced[i] = node = leaf(c)
        rec.originals[id(node)] = a
    for k, (i, v) in enumerate(zip(places, numbers)):
        traced[i] = replay.number(v, rec, k, None if poison is None else type(v)(poison))
    args, kwargs = rebuild_args(traced)
    watch = replay.watching_c_reads(rec) if numbers else contextlib.nullcontext()
    try:
        with rec, small.fusing(), watch:
            result = fun(*args, **kwargs)
    except LazyWriteError as e:
        # NumPy code writing into an array (x[i] = v, w -= g on an argument): what it does is
        # NumPy's, run as it is, every call
        entry.reason = f"the function writes into an array in place ({e})"
        warnings.warn(
            f"fusegrad.jit: {getattr(fun, '__name__', 'the function')} will run uncompiled for "
            f"this signature: {entry.reason}",
            stacklevel=4,
        )
        plain_args, plain_kwargs = rebuild_args(list(leaves))
        return fun(*plain_args, **plain_kwargs)
    with rec, small.fusing():
        out_leaves, rebuild_out, _ = structure(result)
        with replay.sanctioned(always=True):  # jit's own evaluation of the results
            values = materialize_many(out_leaves)
        values = [
            replay.note_derived(v[()], v, replay.item)
            if isinstance(n, LazyArray) and v.ndim == 0
            else v
            for n, v in zip(out_leaves, values)
        ]
        # equal expressions are one node, one array: each result gets its own, as from NumPy
        for k, (n, v) in enumerate(zip(out_leaves, values)):
            if isinstance(n, LazyArray) and any(v is w for w in values[:k]):
                values[k] = replay.note_derived(v.copy(), v, np.ndarray.copy)
    if rec.foreign and not copy:
        # an array in an argument's memory reached a kernel by another way (a closure, a global):
        # only copies of the arguments tell the two apart
        return _record(
            fun, entry, leaves, rebuild_args, positions, arrays, places, numbers, True, poison
        )
    program = rec.program(values)
    if numbers and program is not None:  # (not replayable: the numbers are simply passed on)
        entry.values = tuple(_static_key(v) for v in numbers)
        if rec.number_read is None:
            entry.numbers = "inputs"
        else:
            entry.numbers = "compiled in"
            entry.reason = f"numbers compiled in: the function reads one, {rec.number_read}"
    if program is None:
        entry.reason = rec.escape or "not replayable"
        warnings.warn(
            f"fusegrad.jit: {getattr(fun, '__name__', 'the function')} will run uncompiled for "
            f"this signature: {entry.reason}",
            stacklevel=4,
        )
    else:
        entry.program, entry.rebuild = program, rebuild_out
        # the recording is time the program has taken: its hot compile may spend as much
        program.spent += max(0.0, time.perf_counter() - start - program.compiling)
    # a number the function returned (a replay.Number) goes back as a plain one
    return rebuild_out([v._value if isinstance(v, replay.Number) else v for v in values])

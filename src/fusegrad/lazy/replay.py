"""Record the kernels of one call, then replay them on new arrays of the same shapes and dtypes.

``fusegrad.jit`` runs a function once per input signature under a ``Recorder``. The recorder sees
every kernel the planner runs and notes where each operand comes from: a view of an input, a view
of an earlier kernel's or step's output, or a constant. NumPy calls that need concrete arrays (a
rule that is not lazy, such as ``matmul``'s or ``sort``'s, its pullback, an eager NumPy function
on lazy values) are *steps* (``step``): a function of recorded buffers whose results are recorded
buffers too. A later call re-runs only the kernels and steps on the new arrays (a ``Program``):
no tracing, graph building or planning.

A recording is replayable only if nothing computed from the inputs left the recording before the
function returned: a Python ``if`` on an array, ``float()`` of one. Each of those materialises a
value that depends on the inputs outside a *sanctioned* materialisation (the final one of
``grad``, ``value_and_grad`` or ``jit`` itself, or a step's operands); the recorder keeps the
first such reason, and ``jit`` then calls the function every time instead.

Example::

    >>> from fusegrad.lazy import asarray, materialize, small
    >>> x = np.arange(3.0)
    >>> rec = Recorder([x])
    >>> with rec, sanctioned(), small.fusing():  # as jit records: no small-array shortcut
    ...     y = materialize(asarray(x) * 2)
    >>> program = rec.program([y])
    >>> program.run([np.ones(3)])
    [array([2., 2., 2.])]
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import (
    replay_accumulate,
    replay_budget,
    replay_compile,
    replay_constants,
    replay_fuse,
    replay_ops,
)
from .kernel import Kernel
from .nodes import DYNAMIC_NUMBERS, LazyArray, Leaf, Map, Reduce, _base
from .nodes import leaf as _leaf

_local = threading.local()
# Recordings open in any thread: while none is, active() skips the thread-local lookup (~0.3 us,
# which every small-array materialisation would pay). Counted under a lock: a lost update would
# hide an open recording from its own materialisations.
_open = [0]
_open_lock = threading.Lock()


def active() -> Recorder | None:
    """The recorder of this thread's innermost recording, if any."""
    if not _open[0]:
        return None
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


# outside recordings (every plain grad call) the blocks below are this: no generator to run
_NULL = contextlib.nullcontext()


def _raised(rec: Recorder | None, counter: str) -> contextlib.AbstractContextManager:
    return _NULL if rec is None else _raising(rec, counter)


@contextlib.contextmanager
def _raising(rec: Recorder, counter: str) -> Iterator[None]:
    setattr(rec, counter, getattr(rec, counter) + 1)
    try:
        yield
    finally:
        setattr(rec, counter, getattr(rec, counter) - 1)


def sanctioned(always: bool = False) -> contextlib.AbstractContextManager:
    """Materialisations inside the block produce a recorded call's results (see the module).

    Without ``always`` only the outermost transformation sanctions; ``always`` is for
    evaluations whose results only feed lazy nodes (the planner evaluating a nested reduction to
    move a view of it) or go straight to the caller (``jit``'s own), at any depth."""
    rec = active()
    return _raised(rec if rec is None or always or rec.may_sanction() else None, "sanctions")


def api_call() -> contextlib.AbstractContextManager:
    """Marks one call of a fusegrad transformation: only the outermost may sanction."""
    return _raised(active(), "api_depth")


# Why a recording cannot use a transformation's results when the transformation is called inside
# the jitted function (arrays the function's own NumPy code then reads eagerly, which no kernel
# records), the ``reading`` of their evaluation
NESTED_RESULTS = (
    "the results of a fusegrad transformation called inside the jitted function were evaluated "
    "there (those of jvp and hvp, a gradient for a Python number, a result that is an input "
    "unchanged), and the function's NumPy code reads them as arrays, which no kernel records; "
    "return them from the jitted function instead, or jit the transformation itself"
)


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Names the Python read of a value (``bool()`` of a traced array) that materialisations in
    the block serve, for the reason a recording that cannot be replayed gives."""
    rec = active()
    if rec is None:
        yield
        return
    outer, rec.reading = rec.reading, what
    try:
        yield
    finally:
        rec.reading = outer


def item(a: np.ndarray) -> Any:
    """``a[()]``: a 0-d result as a NumPy scalar (a conversion ``note_derived`` can replay)."""
    return a[()]


def _map(fn: Callable, x: Any) -> Any:
    """``fn`` applied to the leaves of ``x`` (lists, tuples but not named ones, dicts)."""
    if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
        return type(x)(_map(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    return fn(x)


def step(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    prepare: Callable,
    direct: bool = False,
    reference: Callable | None = None,
    products: Callable | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` on its arguments made concrete by ``prepare`` (lazy values
    materialised, thunks unthunked); in a recording, one *step* of the program: a NumPy call
    (``matmul``, ``solve``, a gather, a rule that needs arrays, its pullback) between kernels.
    Its operands are located like kernel operands (views of inputs or of earlier results,
    numbers, constants); a replay calls ``fn`` again on the new ones. Its array results (made
    concrete by ``prepare``) are recorded results, handed back as new leaves, so that what
    reads them stays in the recording; functions among them (a rule's pullback) are kept too.
    The kernels and reads inside ``fn`` are its own: a replay runs ``fn`` again, so even a
    Python ``if`` on an array there is replayed faithfully.

    ``direct``: ``fn`` returns a list of its results as they are (C-contiguous arrays, other
    objects), whose shapes, strides and dtypes depend only on its operands': a replay extends
    its results with that list, unchecked (``matmul`` as ``jit`` replays it). ``reference``:
    a function of the same arguments giving the same list (the rule ``fn`` stands for); at the
    recording both run, and when their results differ (layouts, or values bit for bit) the
    step is ``reference``, replayed as a checked step. ``products``: a function of the same
    arguments listing the results that are matrix products, ``(index, a, b, transpose_a,
    transpose_b)`` (checked bit for bit when recorded): a replay may compute those itself,
    together (``replay_batch``).

    >>> from . import small
    >>> x = np.arange(4.0).reshape(2, 2)
    >>> rec = Recorder([x])
    >>> with rec, sanctioned(), small.fusing():
    ...     y = step(np.matmul, (x, x), {}, lambda v: v)  # a leaf of the recorded x @ x
    ...     out = rec.program([np.asarray(y + 1)]).run([np.eye(2)])
    >>> out[0]
    array([[2., 1.],
           [1., 2.]])
    """
    rec = active()
    if rec is None or rec.in_step or rec.escape is not None or _holds_traced((args, kwargs)):
        # (a traced operand, the cotangent of a backward pass an outer grad traces: the call is
        # the outer trace's to record, through the primitives it calls; as a step's constant it
        # was the recording's tracer at every replay)
        return fn(*_map(prepare, args), **_map(prepare, kwargs))
    return rec.step(fn, args, kwargs, prepare, direct, reference, products)


def _holds_traced(x: Any) -> bool:
    """Whether ``x`` is, or a list, tuple or dict holds, a value of a trace (the AD layer's
    tracers, known here by their class flag: this layer imports nothing above it)."""
    if getattr(type(x), "__fusegrad_traced__", False):
        return True
    if isinstance(x, list | tuple):
        return any(_holds_traced(v) for v in x)
    if isinstance(x, dict):
        return any(_holds_traced(v) for v in x.values())
    return False


def _is_ufunc_call(fn: Any) -> bool:
    """Whether ``fn`` is a NumPy ufunc or its ``__call__``."""
    if isinstance(fn, np.ufunc):
        return True
    return getattr(fn, "__name__", None) == "__call__" and isinstance(
        getattr(fn, "__self__", None), np.ufunc
    )


def _is_matmul(fn: Any, args: tuple) -> bool:
    """Whether a ufunc step is ``np.matmul`` of two matrices."""
    inner = getattr(fn, "args", ())
    f = inner[0] if getattr(fn, "func", None) is _listed and inner else fn
    f = getattr(f, "__self__", f)
    return f is np.matmul and len(args) == 2 and all(np.ndim(a) == 2 for a in args)


def _matmul_product(a: np.ndarray, b: np.ndarray) -> list:
    return [(0, a, b, False, False)]


def _listed(fn: Callable, *args: Any, outs: list | None = None) -> list:
    """``[fn(*args)]``: a ufunc call as a direct step (into ``outs[0]`` when given)."""
    if outs is None or outs[0] is None:
        return [fn(*args)]
    return [fn(*args, out=outs[0])]


def _same_items(a: Any, b: Any) -> bool:
    """Whether two direct steps' result lists agree: arrays of one layout and equal bit for bit
    (NaNs equal), other objects (pullbacks) in the same places."""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)):
        return False
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray) != isinstance(y, np.ndarray):
            return False
        if isinstance(x, np.ndarray) and not (
            (x.shape, x.strides, x.dtype) == (y.shape, y.strides, y.dtype)
            and np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")
        ):
            return False
    return True


def _seal(x: Any, prepare: Callable, items: list, wrap: Callable | None, odd: list) -> Any:
    """The results of a step with arrays (made concrete) appended to ``items`` and replaced by
    ``wrap(array)``; functions appended as they are. ``odd`` gets Python ints and bools (a value
    read out of the arrays, which a replay could not hand on)."""
    if isinstance(x, list | tuple):
        vals = [_seal(v, prepare, items, wrap, odd) for v in x]
        return type(x)(*vals) if hasattr(type(x), "_fields") else type(x)(vals)
    x = prepare(x)
    if isinstance(x, np.generic | float | complex) and not isinstance(x, bool | Number):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:  # (a recorded view of it is a view of its buffer)
            x = np.ascontiguousarray(x)
        items.append(x)
        return x if wrap is None else wrap(x)
    if isinstance(x, types.FunctionType | types.MethodType | functools.partial):
        items.append(x)
    elif isinstance(x, int | bool | np.bool_):
        odd.append(x)
    return x


class StepMismatch(RuntimeError):
    """A replayed step gave results of other shapes than when it was recorded (``x[x > 0]``,
    ``np.nonzero``: shapes that depend on values); ``jit`` then calls the function instead."""

    def __init__(self, name: str, want: tuple, got: list) -> None:
        shapes = [x.shape if isinstance(x, np.ndarray) else "a function" for x in got]
        recorded = [w[0] if w else "a function" for w in want]
        super().__init__(
            f"the shapes of {name}'s results depend on the values (recorded {recorded}, now "
            f"{shapes})"
        )


def _name(fn: Any) -> str:
    inner = getattr(fn, "func", None)  # a partial: the rule's function is its first argument
    if inner is not None and fn.args:
        fn = fn.args[0]
    return getattr(fn, "__name__", None) or type(fn).__name__


def _collect(x: Any, prepare: Callable, items: list) -> None:
    """``_seal`` at a replay: only the items, with the common results (arrays and plain tuples
    of them) taken without ``prepare``."""
    t = type(x)
    if t is np.ndarray:
        items.append(x if x.flags.c_contiguous else np.ascontiguousarray(x))
    elif t is tuple or t is list:
        for v in x:
            _collect(v, prepare, items)
    elif t is types.FunctionType or t is functools.partial:
        items.append(x)  # a rule's pullback: nothing to make concrete
    else:
        _seal(x, prepare, items, None, [])


def note_literal(array: np.ndarray) -> None:
    """``array`` was made by fusegrad from a Python or NumPy number (a cotangent seed): a kernel
    reading nothing else computes the same at every call, so a replay keeps its result."""
    rec = active()
    if rec is not None:
        rec.literals[id(array)] = array


def note_derived(result: Any, source: Any, fn: Callable[[Any], Any]) -> Any:
    """Record that ``result`` is ``fn(source)`` (a copy, a projection, a scalar conversion), so a
    replay can compute it the same way; returns ``result``. ``source=None``: ``fn(None)``."""
    rec = active()
    if rec is not None:
        rec.derived[id(result)] = (result, source, fn)
    return result


def original(value: Any) -> Any:
    """The user's value behind an input leaf of the recording (for dtype and kind), else
    ``value``."""
    rec = active()
    if rec is not None and isinstance(value, Leaf):
        return rec.originals.get(id(value), value)
    return value


class Number:
    """A Python number argument of a jit recording (``float`` or ``complex`` subclasses), an input
    of the recorded program: a kernel constant made from one is replaced by the new call's value
    at each replay. Arithmetic with Python numbers gives another ``Number`` (``2 * s**2`` stays an
    input, computed again from ``s``); anything that reads the value into Python (``if s > 0``,
    ``float(s)``, ``hash``, ``np.asarray(s)``, NumPy on it without a traced array) makes the
    recording's numbers compiled in (``Recorder.number_read``). A C function reading the value
    without Python's number protocol (``math.exp(s)``) is not seen: ``jit`` records a second time
    with other values, and twice with the double C code reads poisoned (``raw``: ±inf), and
    compares before it trusts a program with numbers.

    >>> rec = Recorder([])
    >>> s = number(2.0, rec, 0)
    >>> t = 1 - s * 3
    >>> type(t).__name__, t, rec.number_read is None
    ('DynamicFloat', -5.0, True)
    >>> _ = (t > 0)
    >>> rec.number_read
    'a comparison (>)'
    """

    _value: Any
    _recipe: tuple
    _rec: Recorder
    _raw: Any  # the poison C code reads instead of the value (jit's checks), else None

    def _read(self, what: str) -> None:
        if self._rec.number_read is None:
            self._rec.number_read = what


_PLAIN_NUMBERS = (int, float, complex, bool)


def _plain(x: Any) -> Any:
    return x._value if isinstance(x, Number) else x


def _plain_in(x: Any) -> Any:
    """``_plain`` into lists and tuples (``np.stack([s, 1.0])``'s sequence of numbers)."""
    if type(x) is list or type(x) is tuple:
        return type(x)(_plain_in(v) for v in x)
    return _plain(x)


def _operand(x: Any) -> tuple:
    return x._recipe if isinstance(x, Number) else ("value", x)


def _derive(result: Any, fn: Callable, operands: tuple, rec: Recorder) -> Any:
    cls = _NUMBER_TYPES.get(type(result))
    if cls is None:  # a bool, a float32: the value leaves the numbers that can be replayed
        for o in operands:
            if isinstance(o, Number):
                o._read(f"a {type(result).__name__} computed from it")
        return result
    recipe = ("op", fn, tuple(_operand(o) for o in operands))
    return _make(cls, result, recipe, rec, _poisoned(fn, operands, type(result)))


def _poisoned(fn: Callable, operands: tuple, kind: type) -> Any:
    """What C code sees of ``fn(*operands)`` when an operand is poisoned (``Number._raw``):
    ``fn`` of the poisons, so ``math.exp(2 * s)`` reads a poison too; else None."""
    if not any(isinstance(o, Number) and o._raw is not None for o in operands):
        return None
    raws = [o._raw if isinstance(o, Number) and o._raw is not None else _plain(o) for o in operands]
    try:
        with np.errstate(all="ignore"):
            return kind(fn(*raws))
    except (ArithmeticError, ValueError, TypeError):  # inf - inf, 0 * inf as ints...: a NaN
        return kind(math.nan)


def _binary(fn: Callable, reflected: bool) -> Callable:
    def method(self: Number, other: Any) -> Any:
        if not (type(other) in _PLAIN_NUMBERS or isinstance(other, Number | np.number)):
            return NotImplemented  # arrays: their own dispatch decides
        a, b = (other, self) if reflected else (self, other)
        return _derive(fn(_plain(a), _plain(b)), fn, (a, b), self._rec)

    return method


def _unary(fn: Callable) -> Callable:
    return lambda self: _derive(fn(self._value), fn, (self,), self._rec)


def _reading(name: str, what: str) -> Callable:
    def method(self: Number, *args: Any, **kwargs: Any) -> Any:
        self._read(what)
        base = type(self._value)
        return getattr(base, name)(self._value, *[_plain(a) for a in args], **kwargs)

    return method


def _array_ufunc(self: Number, uf: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    for x in inputs:
        if not isinstance(x, (np.ndarray, np.generic, Number, *_PLAIN_NUMBERS)) and hasattr(
            type(x), "__array_ufunc__"
        ):
            return NotImplemented  # a traced or lazy array: it builds the expression
    plain = [_plain(x) for x in inputs]
    arrays = [x for x in plain if isinstance(x, np.ndarray)]
    if not arrays and method == "__call__" and uf.nout == 1 and "out" not in kwargs:
        # numbers only (np.square(s) of a differentiated number): a number of the recipe
        fn = functools.partial(uf, **kwargs) if kwargs else uf
        return _derive(uf(*plain, **kwargs), fn, inputs, self._rec)
    if not arrays or any(a.size for a in arrays):  # (empty arrays: a dtype probe reads nothing)
        self._read(f"np.{uf.__name__} of it outside a traced expression")
    return getattr(uf, method)(*plain, **kwargs)


# NumPy functions that look only at a number's type: no read of its value
_TYPE_ONLY = frozenset(
    [np.shape, np.ndim, np.size, np.result_type, np.iscomplexobj, np.isrealobj, np.zeros_like]
    + [np.ones_like, np.empty_like]
)


def _array_function(self: Number, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    if not all(issubclass(t, Number | np.ndarray) for t in types):
        return NotImplemented
    if func not in _TYPE_ONLY:
        self._read(f"np.{getattr(func, '__name__', 'function')} of it")
    return func(*[_plain_in(a) for a in args], **{k: _plain_in(v) for k, v in kwargs.items()})


_ARITHMETIC = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
}
_READS = {
    "__bool__": "bool() (an if or while on it)",
    "__int__": "int()",
    "__float__": "float() or a conversion to a NumPy value",
    "__complex__": "complex() or a conversion to a NumPy value",
    "__round__": "round()",
    "__format__": "a format (an f-string)",
    "__str__": "str()",
    "__trunc__": "math.trunc()",
    "__floor__": "math.floor()",
    "__ceil__": "math.ceil()",
    "__hash__": "hash() (a dict or set lookup)",
    "__eq__": "a comparison (==)",
    "__ne__": "a comparison (!=)",
    "__lt__": "a comparison (<)",
    "__le__": "a comparison (<=)",
    "__gt__": "a comparison (>)",
    "__ge__": "a comparison (>=)",
    "__divmod__": "divmod()",
    "__rdivmod__": "divmod()",
    "is_integer": ".is_integer()",
    "hex": ".hex()",
    "as_integer_ratio": ".as_integer_ratio()",
    "item": ".item()",
    "tolist": ".tolist()",
    "tobytes": ".tobytes()",
    "astype": ".astype()",
    "view": ".view()",
    "__array__": "a conversion to a NumPy array",
    "__getitem__": "indexing",
}


def _number_class(base: type) -> type:
    namespace: dict[str, Any] = {"__module__": __name__, "__doc__": Number.__doc__}
    for name, fn in _ARITHMETIC.items():
        namespace[f"__{name}__"] = _binary(fn, reflected=False)
        namespace[f"__r{name}__"] = _binary(fn, reflected=True)
    namespace["__neg__"] = _unary(operator.neg)
    namespace["__pos__"] = _unary(operator.pos)
    namespace["__abs__"] = _unary(operator.abs)
    for name, what in _READS.items():
        if hasattr(base, name):
            namespace[name] = _reading(name, what)
    namespace["conjugate"] = _unary(base.conjugate)  # type: ignore[attr-defined]  # float or complex
    namespace["real"] = property(_unary(lambda v: v.real))
    namespace["imag"] = property(_unary(lambda v: v.imag))
    namespace["__array_ufunc__"] = _array_ufunc
    namespace["__array_function__"] = _array_function
    namespace["__repr__"] = lambda self: repr(self._value)
    namespace["__reduce__"] = lambda self: (base, (self._value,))
    # ``type(s)(v)`` (statistics.mean converts so): a plain number, not a recording's input
    namespace["__new__"] = lambda cls, *args, **kwargs: base(*args, **kwargs)
    return type(f"Dynamic{base.__name__.capitalize()}", (base, Number), namespace)


# Python's numbers, and NumPy's scalars that NumPy functions of them give (np.square(s))
_NUMBER_TYPES = {t: _number_class(t) for t in (float, complex, np.float64, np.complex128)}
DYNAMIC_NUMBERS.update(_NUMBER_TYPES.values())


def _make(cls: type, value: Any, recipe: tuple, rec: Recorder, raw: Any = None) -> Number:
    # ``raw`` is what C code reading the float's own double sees (``math.sqrt(s)``): ``value``,
    # or a poison jit records with to find such reads
    n: Any = cls.__mro__[1].__new__(cls, value if raw is None else raw)
    n._value, n._recipe, n._rec, n._raw = value, recipe, rec, raw
    return n


# C modules whose functions read a float's own double (``math.isclose(s, 1.0)``) where Python's
# number protocol cannot see it
_C_READERS = frozenset({"math", "cmath"})


@contextlib.contextmanager
def watching_c_reads(rec: Recorder) -> Any:
    """Inside the block, a call of a ``math`` / ``cmath`` function from a frame holding one of the
    recording's numbers counts as a read of its value (``rec.number_read``): the poisoned
    recordings cannot see a point test (``math.isclose(s, 1.0)``), this can. Conservative: the
    function may have read another value (then the numbers are compiled in needlessly)."""
    previous = sys.getprofile()
    if previous is not None and not callable(previous):
        # a C-level profiler (cProfile) holds the hook, and cannot be chained: numbers are
        # compiled in instead, which C reads cannot fool
        if rec.number_read is None:
            rec.number_read = "a profiler is active, so C reads of it cannot be watched"
        yield
        return

    def profile(frame: Any, event: Any, arg: Any) -> None:
        if (
            event == "c_call"
            and rec.number_read is None
            and getattr(arg, "__module__", None) in _C_READERS
            and any(isinstance(v, Number) for v in frame.f_locals.values())
        ):
            rec.number_read = f"math.{getattr(arg, '__name__', 'function')}() where it is held"
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


def number(value: float | complex, rec: Recorder, position: int, raw: Any = None) -> Number:
    """The ``Number`` standing for the ``position``-th number argument of a recording (its
    double as C code sees it ``raw``, when given)."""
    return _make(_NUMBER_TYPES[type(value)], value, ("arg", position), rec, raw)


def evaluate(recipe: tuple, numbers: Sequence[Any]) -> Any:
    """A ``Number``'s recipe computed from a call's number arguments.

    >>> evaluate(("op", operator.mul, (("arg", 0), ("value", 3.0))), [2.0])
    6.0
    """
    tag = recipe[0]
    if tag == "arg":
        return numbers[recipe[1]]
    if tag == "value":
        return recipe[1]
    return recipe[1](*[evaluate(r, numbers) for r in recipe[2]])


def _bounds(a: np.ndarray) -> tuple[int, int]:
    lo, hi = np.lib.array_utils.byte_bounds(a)
    return lo, hi


def _pointer(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


_PAGE_BITS = 12  # Recorder.pages: 4 KiB pages
FOLD_MAX_BYTES = 1 << 20  # a kernel of numbers only, with results up to this size, is folded
# replays after which a program's kernels are placed as a hot program's (engines.choose_hot)
HOT_REPLAYS = 8


class Recorder:
    """Watches one call: records kernels, and why the call cannot be replayed (``escape``)."""

    def __init__(self, inputs: list[np.ndarray], top_is_api: bool = False) -> None:
        self.slots: list[np.ndarray] = []
        self.spans: list[tuple[int, int]] = []
        # the result slots touching each 4 KiB page of memory (``locate``: a linear scan of
        # every slot made recording a 1000-step loop quadratic, 27 s)
        self.pages: dict[int, list[int]] = {}
        self.n_inputs = len(inputs)
        for a in inputs:
            self._track(a)
        # Views derived from an input keep its base; an array in an input's memory with another
        # base (a closure's alias of an argument) cannot be told apart from the input by memory.
        self.bases = [_base(a) for a in inputs]
        self.foreign = False
        self.steps: list[tuple] = []
        self.derived: dict[int, tuple] = {}
        self.originals: dict[int, Any] = {}
        self.literals: dict[int, np.ndarray] = {}
        self.escape: str | None = None
        self.top_is_api = top_is_api
        self.api_depth = 0
        self.sanctions = 0
        self.reading: str | None = None
        # the first Python read of a number argument (then numbers are compiled in), and the
        # number constants of the kernel about to run: (index in its constants, recipe)
        self.number_read: str | None = None
        self._numbers: tuple = ()
        # eager steps (``step``): the depth of the one running (its own kernels and reads are
        # part of it, re-run at each replay), and the objects among step results (pullbacks)
        self.in_step = 0
        self.objects: dict[int, int] = {}
        # how a rule that needs arrays becomes a step (``jit`` sets it: it knows the AD layers)
        self.rule_step: Callable | None = None

    def __enter__(self) -> Recorder:
        if not hasattr(_local, "stack"):
            _local.stack = []
        _local.stack.append(self)
        with _open_lock:
            _open[0] += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.stack.remove(self)
        with _open_lock:
            _open[0] -= 1

    def results_stay_lazy(self) -> bool:
        """Whether the transformation running now is the outermost one inside a recorded plain
        function (``jit(step)`` with ``step`` calling ``grad``): its results are then handed to
        the function unevaluated, so that what it computes from them (an update ``w - lr * g``)
        stays lazy and recorded; evaluated, they would be arrays its NumPy code reads eagerly,
        which no kernel records."""
        return not self.top_is_api and self.api_depth == 1

    def is_input(self, node: Any) -> bool:
        """Whether ``node`` is the lazy leaf of one of the recorded call's array arguments."""
        return id(node) in self.originals

    def refuse(self, reason: str) -> None:
        """The recorded call cannot be replayed, for ``reason`` (the first reason is kept)."""
        if self.escape is None:
            self.escape = reason

    def may_sanction(self) -> bool:
        """Only the outermost transformation (or ``jit`` itself, with no transformation in
        between) produces results: a nested ``grad``'s arrays would feed eager code."""
        return self.api_depth == (1 if self.top_is_api else 0)

    def _track(self, a: np.ndarray) -> None:
        slot = len(self.slots)
        self.slots.append(a)
        span = _bounds(a) if a.size else (0, 0)
        self.spans.append(span)
        if slot >= self.n_inputs and a.size:  # (inputs: few, scanned first)
            for page in range(span[0] >> _PAGE_BITS, ((span[1] - 1) >> _PAGE_BITS) + 1):
                self.pages.setdefault(page, []).append(slot)

    def locate(self, a: np.ndarray) -> tuple | None:
        """``(slot, offset, shape, strides, dtype)`` when ``a`` views a tracked array (the first
        such slot)."""
        if a.size == 0:
            return None
        lo, hi = _bounds(a)
        found = None
        for slot in range(self.n_inputs):
            blo, bhi = self.spans[slot]
            if blo <= lo and hi <= bhi:
                if _base(a) is not self.bases[slot]:
                    self.foreign = True
                found = slot
                break
        else:
            for slot in self.pages.get(lo >> _PAGE_BITS, ()):
                blo, bhi = self.spans[slot]
                if blo <= lo and hi <= bhi and (found is None or slot < found):
                    found = slot
        if found is None:
            return None
        offset = _pointer(a) - _pointer(self.slots[found])
        return (found, offset, a.shape, a.strides, a.dtype)

    def touches(self, nodes: Any) -> bool:
        """Whether evaluating ``nodes`` reads an input or a recorded result."""
        stack, seen = list(nodes), set()
        while stack:
            n = stack.pop()
            if not isinstance(n, LazyArray) or id(n) in seen:
                continue
            seen.add(id(n))
            concrete = n.array if isinstance(n, Leaf) else n.cached
            if concrete is not None:
                if self.locate(np.asarray(concrete)) is not None:
                    return True
            elif isinstance(n, Map):
                stack.extend(n.args)
            elif isinstance(n, Reduce):
                stack.append(n.arg)
        return False

    def on_materialize(self, nodes: Any) -> None:
        """Called by ``materialize_many``: an unsanctioned evaluation of input-derived values
        is an escape."""
        if self.escape is None and not self.sanctions and not self.in_step and self.touches(nodes):
            shown = next((repr(n) for n in nodes if isinstance(n, LazyArray)), "a value")
            why = self.reading or (
                "a Python read of an array: if/while, float(), int(), .item(), np.asarray; or a "
                "rule that needs an array under forward-mode or nested differentiation"
            )
            self.escape = (
                f"{shown}, computed from the inputs, was evaluated while the function ran ({why})"
            )

    def before_kernel(self, kernel: Kernel) -> Kernel:
        """Called before each kernel run: the kernel with number arguments' values (``Number``)
        among its constants replaced by plain values, which are noted for ``on_kernel``."""
        self._numbers = tuple(
            (j, c._recipe) for j, c in enumerate(kernel.constants) if isinstance(c, Number)
        )
        if not self._numbers:
            return kernel
        return Kernel(
            kernel.domain, kernel.inputs, tuple(_plain(c) for c in kernel.constants),
            kernel.program, kernel.outputs,
        )  # fmt: skip

    def on_kernel(self, kernel: Kernel, results: list[np.ndarray], engine: str) -> None:
        """Called after each kernel run: record it when it computes the call's results."""
        numbers, self._numbers = self._numbers, ()
        if not self.sanctions or self.escape is not None or self.in_step:
            return
        sources = []
        for a in kernel.inputs:
            where = self.locate(a)
            sources.append(("const", a) if where is None else where)
        if (
            not numbers
            and all(s[0] == "const" and self._literal(s[1]) for s in sources)
            and sum(r.nbytes for r in results) <= FOLD_MAX_BYTES
        ):
            # Reads only numbers: the same results at every call (W2's gradient is one), kept
            # and copied at each replay. Larger ones run again (W1's -0.5s at n=10^7): a kept
            # copy would hold their memory for the program's life, for no time saved.
            template = None
        else:
            template = Kernel(
                kernel.domain, (), kernel.constants, kernel.program, kernel.outputs,
                kernel.signature(),
            )  # fmt: skip
        first = len(self.slots)
        for r in results:
            self._track(r)
        if template is None:
            # a copy: the recording call hands its results to the caller, who may write to them
            self.steps.append(("fold", None, tuple(r.copy() for r in results), first, ()))
        else:
            self.steps.append((engine, template, tuple(sources), first, numbers))

    def step(
        self,
        fn: Callable,
        args: tuple,
        kwargs: dict,
        prepare: Callable,
        direct: bool = False,
        reference: Callable | None = None,
        products: Callable | None = None,
    ) -> Any:
        """See the module function ``step``."""
        self.sanctions += 1  # the operands' kernels are recorded: they feed the step
        try:
            args, kwargs = _map(prepare, args), _map(prepare, kwargs)
        finally:
            self.sanctions -= 1
        tracked = [False]
        encoded = (self._encode(args, tracked), self._encode(kwargs, tracked))
        if not tracked[0] or self.escape is not None:
            return fn(*args, **kwargs)  # constants only: a constant result, as before
        name = _name(fn)
        if kwargs.get("out") is not None:
            self.escape = f"{name}(..., out=...) wrote a value computed from the inputs"
            return fn(*args, **kwargs)
        self.in_step += 1
        try:
            raw = fn(*args, **kwargs)
            if reference is not None:
                ref = reference(*args, **kwargs)
                if not _same_items(raw, ref):
                    # the fast function disagrees with the rule it stands for on these
                    # operands: the rule is the step (its layouts checked at each replay)
                    fn, raw, direct = reference, ref, False
            items: list = []
            odd: list = []
            result = _seal(raw, prepare, items, _leaf, odd)
        finally:
            self.in_step -= 1
        if odd:
            self.escape = (
                f"{name} returned a Python {type(odd[0]).__name__} computed from the inputs"
            )
            return result
        if (
            not direct
            and not kwargs
            and _is_ufunc_call(fn)
            and type(raw) is np.ndarray
            and raw.flags.c_contiguous
        ):
            # a ufunc (np.matmul on lazy values): its result's layout follows its operands'
            fn, raw, direct = functools.partial(_listed, fn), [raw], True
        # a direct step's list is its items as they are (C-contiguous arrays, objects)
        direct = (
            direct
            and not kwargs
            and isinstance(raw, list)
            and len(items) == len(raw)
            and all(a is b for a, b in zip(items, raw))
        )
        found: tuple = ()
        if direct:
            if products is None and _is_matmul(fn, args):
                products = _matmul_product
            if products is not None:
                found = self._products(products(*args), items)
        first = len(self.slots)
        for x in items:
            if isinstance(x, np.ndarray):
                self._track(x)
            else:
                self.objects[id(x)] = len(self.slots)
                self.slots.append(x)
                self.spans.append((1, 0))  # an empty span: no array is located in it
        layout = tuple(
            (x.shape, x.strides, x.dtype) if isinstance(x, np.ndarray) else None for x in items
        )
        self.steps.append(("call", fn, encoded, first, (prepare, layout, direct, found)))
        return result

    def _products(self, described: list, items: list) -> tuple:
        """``described`` (``(item, a, b, transpose_a, transpose_b)``: the item is
        ``a @ b``, each maybe transposed) encoded like operands, once each is checked to give
        the item bit for bit; ``()`` if any does not."""
        out = []
        for k, a, b, ta, tb in described:
            got = items[k]
            if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
                return ()
            want = np.matmul(a.T if ta else a, b.T if tb else b)
            if not (
                isinstance(got, np.ndarray)
                and a.ndim == b.ndim == 2
                and want.shape == got.shape
                and want.dtype == got.dtype
                and got.flags.c_contiguous
                and np.array_equal(want, got, equal_nan=True)
            ):
                return ()
            dummy = [False]
            out.append((k, self._encode(a, dummy), self._encode(b, dummy), ta, tb))
        return tuple(out)

    def _encode(self, x: Any, tracked: list) -> tuple:
        """Where a step's operand comes from (``_decode`` rebuilds it in a replay)."""
        if isinstance(x, np.ndarray):
            where = self.locate(x)
            if where is None:
                return ("const", x)
            tracked[0] = True
            return ("view", *where)
        if isinstance(x, Number):
            tracked[0] = True
            return ("number", x._recipe)
        if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
            return ("seq", type(x), tuple(self._encode(v, tracked) for v in x))
        if isinstance(x, dict):
            return ("dict", tuple(x), tuple(self._encode(v, tracked) for v in x.values()))
        slot = self.objects.get(id(x))
        if slot is not None and self.slots[slot] is x:
            tracked[0] = True
            return ("slot", slot)
        return ("const", x)

    def _literal(self, a: np.ndarray) -> bool:
        base = a
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        return id(base) in self.literals and self.literals[id(base)] is base

    def recipe(self, value: Any) -> tuple | None:
        """How to recompute a result ``value`` in a replay, or ``None`` when it cannot be."""
        entry = self.derived.get(id(value))
        if entry is not None and entry[0] is value:
            _, source, fn = entry
            if source is None:
                return ("derived", fn, None)
            inner = self.recipe(source)
            return None if inner is None else ("derived", fn, inner)
        if isinstance(value, np.ndarray):
            if value.size == 0:
                return ("empty", value.shape, value.dtype)
            where = self.locate(value)
            if where is None and self._literal(value):
                return (
                    "literal",
                    value,
                )  # made from numbers (a broadcast seed): the same each call
            return None if where is None else ("view", *where)
        if isinstance(value, Number):
            return ("number", value._recipe)
        if value is None or type(value) in (int, float, complex, str, bool):
            return ("const", value)  # not NumPy scalars: those come from arrays
        return None

    def program(self, result: Any) -> Program | None:
        """The replayable program producing ``result`` (a list of leaves), or ``None`` (then
        ``escape`` says why)."""
        if self.escape is not None:
            return None
        recipes = []
        for leaf in result:
            r = self.recipe(leaf)
            if r is None:
                self.escape = (
                    f"the function returned a {type(leaf).__name__} computed outside fusegrad's "
                    "kernels"
                )
                return None
            recipes.append(r)
        return Program(
            self.steps, self.n_inputs, recipes, [replay_ops.layout(x) for x in self.slots]
        )


def _view(buf: np.ndarray, offset: int, shape: tuple, strides: tuple, dtype: np.dtype) -> Any:
    if offset == 0 and buf.shape == shape and buf.strides == strides and buf.dtype == dtype:
        return buf
    return np.ndarray(shape, dtype, buffer=buf, offset=offset, strides=strides)


def _probe(template: Kernel, sources: Sequence[tuple] | None = None) -> Kernel:
    """``template`` (a recorded kernel without its inputs) with stand-in inputs of the recorded
    dtypes and broadcast axes (zero-strided zeros: no memory), for what needs their shapes; with
    ``sources`` (the step's), an input that is a view gets zeros of the view's strides, so that
    an engine compiling for the probe compiles for the layouts a replay passes (numba compiled
    for C order, then again, cold, inside the first replay: half an HMM's hot compile)."""
    sig = template.signature()
    inputs = tuple(
        np.broadcast_to(
            np.zeros((), dtype),
            tuple(1 if b or d == 1 else d for b, d in zip(flags, template.domain)),
        )
        for dtype, flags in sig[1]
    )
    if sources is not None:
        inputs = tuple(_strided_zeros(a, s) for a, s in zip(inputs, sources))
    return Kernel(
        template.domain, inputs, template.constants, template.program, template.outputs, sig
    )


def _strided_zeros(probe: np.ndarray, source: tuple) -> np.ndarray:
    """Zeros of ``source``'s shape and strides (a recorded view: ``(slot, offset, shape,
    strides, dtype)``), or ``probe`` when it is another kind, or its strides are negative."""
    if source[0] == "const" or len(source) != 5:
        return probe
    _, _, shape, strides, dtype = source
    if tuple(shape) != probe.shape or dtype != probe.dtype or min(strides, default=0) < 0:
        return probe
    if 0 in shape:
        return probe
    nbytes = dtype.itemsize + sum((n - 1) * st for n, st in zip(shape, strides))
    return np.ndarray(shape, dtype, buffer=np.zeros(nbytes, np.uint8), strides=strides)


def _kernel_runner(
    engine: str,
    template: Kernel,
    replayed: bool = False,
    allowed: set | None = None,
    dynamic: Sequence[int] = (),
    sources: Sequence[tuple] | None = None,
) -> Callable[[tuple, tuple], list[np.ndarray]]:
    """A function of a replay's inputs and constants running ``template``'s kernel on
    ``engine`` (under ``auto``, on the engine for a hot kernel, or for a kernel of a program
    replayed ``HOT_CALLS`` times when ``replayed``): the engine's own ``replayer(template)``
    when it has one (what depends only on the signature and domain is worked out once), else a
    new ``Kernel`` for its ``run`` each time. ``allowed``: when given, the signatures a
    ``replayed`` kernel may be compiled for (``replay_budget``); another stays where it ran.
    ``dynamic``: the constants a replay computes afresh (number arguments): an engine that
    compiles one in as a literal (numba's power exponents) cannot run the kernel. ``sources``:
    the step's, whose views' layouts the probe an engine compiles for takes (``_probe``)."""
    from . import engines

    probe = _probe(template)
    if _hot_placeable(template, probe):
        # a recorded program is replayed many times: under auto its kernels go where hot ones
        # do (float and boolean kernels only: an engine's supports() may read integer data,
        # which a probe does not have)
        hot = engines.choose_hot(probe, engine, replayed)
        if replayed and allowed is not None and probe.signature() not in allowed:
            seconds = getattr(engines.get(hot), "compile_seconds", None)
            if seconds is not None and seconds(probe) > 0:
                hot = engines.choose_hot(probe, engine, False)
        engine = hot
    e = engines.get(engine)
    baked = getattr(e, "baked_constants", None)
    if dynamic and baked is not None and baked(probe) & set(dynamic):
        engine = engines.REFERENCE  # reads its constants at each call
        e = engines.get(engine)
    if sources is not None and getattr(e, "COMPILES_PER_LAYOUT", False):
        probe = _probe(template, sources)
    make = getattr(e, "replayer", None)
    fast = make(probe) if make is not None else None
    if fast is not None:
        return fast
    run = e.run

    def run_kernel(inputs: tuple, constants: tuple) -> list[np.ndarray]:
        k = Kernel(
            template.domain,
            inputs,
            constants,
            template.program,
            template.outputs,
            template._sig,
        )
        return run(k)

    return run_kernel


def _hot_placeable(template: Kernel, probe: Kernel) -> bool:
    return all(i.dtype.kind in "fb" for i in template.program) and all(
        a.dtype.kind in "fb" for a in probe.inputs
    )


class Program:
    """The kernels and steps of a recorded call and how its results come from them;
    ``run(arrays)``. Each step is compiled once into a closure (``replay_compile``).

    Buffers a replay may reuse (``replay_ops.reusable``: results of kernels and direct steps
    that no result recipe and no step that runs its function again reads) are allocated once
    and written again at each replay: a fresh 8 MiB array costs ~2000 page faults (~12 ms on
    the shared VM) where a reused one costs none. A replay that finds them in use (another
    thread, or a step calling the program again) allocates its own, and runs each matrix
    product on its own (``replay_batch`` computes several as one in the program's buffers)."""

    __slots__ = (
        "steps", "n_inputs", "recipes", "plan", "compiled", "results", "replays", "reused",
        "pool", "lock", "constants", "spent", "compiling", "next_hot", "allowed",
    )  # fmt: skip

    def __init__(
        self,
        steps: list[tuple],
        n_inputs: int,
        recipes: list[tuple],
        layouts: Sequence[tuple | None],
    ) -> None:
        self.steps = steps  # as recorded (``same_as`` compares these)
        self.n_inputs = n_inputs
        self.recipes = recipes
        # what a replay runs: sums accumulated (``replay_accumulate``), kernels of one domain
        # merged (``replay_fuse``), slots renumbered
        parts = replay_fuse.split_independent(steps)
        summed = replay_accumulate.accumulate(parts, n_inputs, recipes, layouts)
        merged, recipes, layouts = replay_fuse.merge(summed, n_inputs, recipes, layouts)
        # arrays read from a closure or a global as inputs after the arguments, when a row plan
        # can then read them block by block (``replay_constants``)
        self.constants: list[np.ndarray] = []
        promoted = replay_constants.for_rows(merged, n_inputs, recipes, layouts)
        if promoted is not None:
            merged, recipes, layouts, self.constants = promoted
        self.plan = (merged, recipes, layouts)
        self.reused = replay_ops.reusable(merged, recipes, layouts)
        self.pool: list | None = None
        self.lock = threading.Lock()
        # seconds this program has run (its recording, which ``jit`` adds, and its replays) and
        # spent compiling: what ``replay_budget`` lets it compile at the replays ``next_hot``
        self.spent = 0.0
        start = time.perf_counter()
        self.allowed: set | None = None  # the kernels a hot compile moved (None: not yet)
        self.compiled = self._compile(False)
        self.compiling = time.perf_counter() - start
        self.next_hot: float = HOT_REPLAYS
        self.results = replay_ops.results(recipes, layouts, evaluate)
        self.replays = 0

    def _compile(self, replayed: bool, allowed: set | None = None) -> replay_compile.Compiled:
        merged, recipes, layouts = self.plan
        return replay_compile.Compiled(
            merged, self.n_inputs + len(self.constants), layouts, self.reused,
            lambda step, hot: _kernel_runner(
                step[0], step[1], hot, allowed, [j for j, _ in step[4]], step[2]
            ), evaluate, recipes,
            _call_op, replayed,
        )  # fmt: skip

    def compile_costs(self) -> dict[tuple, float]:
        """The signatures of the kernels a hot compile would move to an engine that compiles
        them, each with its estimated compile seconds (0: compiled already)."""
        from . import engines

        costs: dict[tuple, float] = {}
        for engine, template, *_ in self.plan[0]:
            if engine in ("call", "iadd", "alias") or template is None:
                continue
            probe = _probe(template)
            sig = probe.signature()
            if sig in costs or not _hot_placeable(template, probe):
                continue
            seconds = getattr(engines.get(engines.choose_hot(probe, engine, True)),
                              "compile_seconds", None)  # fmt: skip
            if seconds is not None:
                costs[sig] = seconds(probe)
        return costs

    def _hot_compile(self) -> bool:
        """At ``next_hot`` replays: the program recompiled with its kernels where those of a hot
        program run best, as far as ``replay_budget`` affords (the rest at twice the replays).
        Under the lock, not from inside a replay (a step calling the program): swapped in when no
        replay holds the buffers. Whether it recompiled."""
        if not self.lock.acquire(blocking=False):
            return False  # the next replay tries again
        recompiled = False
        try:
            start = time.perf_counter()
            costs = self.compile_costs()
            eager = replay_budget.MODE == "eager"
            budget = None if eager else self.spent - self.compiling
            allowed = replay_budget.affordable(costs, budget)
            if self.allowed is None or not allowed <= self.allowed:
                self.allowed = allowed if self.allowed is None else allowed | self.allowed
                limit = None if eager else self.allowed
                self.compiled, self.pool = self._compile(True, limit), None
                recompiled = True
            self.next_hot = math.inf if set(costs) <= self.allowed else 2 * self.replays
            self.compiling += time.perf_counter() - start
        finally:
            self.lock.release()
        return recompiled

    @property
    def kernels(self) -> int:
        """How many kernels and steps a replay runs."""
        return sum(1 for s in self.plan[0] if s[0] not in ("iadd", "alias"))

    def run(self, arrays: list[np.ndarray], numbers: Sequence[Any] = ()) -> list[Any]:
        """The results for new C-contiguous ``arrays`` (the inputs, in recorded order) and number
        arguments ``numbers`` (plain Python values, in recorded order)."""
        self.replays += 1
        # a loop: its kernels go where those of a hot program run best
        hot = self.replays >= self.next_hot and self._hot_compile()
        start = time.perf_counter()
        try:
            return self._run(arrays, numbers)
        finally:
            # the first replay of a recompile is charged as compiling: what numba still compiles
            # there (a layout the probe did not have: a read-only input of the caller's)
            took = time.perf_counter() - start
            if hot:
                self.compiling += took
            else:
                self.spent += took

    def _run(self, arrays: list[np.ndarray], numbers: Sequence[Any]) -> list[Any]:
        slots = [*arrays, *self.constants]
        if not self.lock.acquire(blocking=False):
            for op in self.compiled.free:
                op(slots, numbers, None)
            return self.results(slots, numbers)
        try:
            # read under the lock, which the swap above holds: a compile read before it could be
            # the one swapped out, and the pool made for it kept for the next one's ops
            compiled = self.compiled
            pool = self.pool
            if pool is None:
                pool = self.pool = compiled.pool()
            for op in compiled.pooled:
                op(slots, numbers, pool)
            return self.results(slots, numbers)
        finally:
            self.lock.release()

    def same_as(self, other: Program) -> bool:
        """Whether ``other``, recorded on other values of the same signature, runs the same
        kernels on the same operands (constants, folded results and recipes equal), so that one
        program serves both (``jit`` checks this before it trusts number arguments)."""
        return (
            len(self.steps) == len(other.steps)
            and all(_same(_comparable(a), _comparable(b)) for a, b in zip(self.steps, other.steps))
            and _same(self.recipes, other.recipes)
        )


def _call_op(step: tuple, layouts: Sequence[tuple | None], reused: set[int]) -> replay_ops.Op:
    """A step that runs its function again and checks its results' layouts (``StepMismatch``)."""
    _kind, fn, (args_e, kwargs_e), _first, extra = step
    prepare, want = extra[0], extra[1]
    args = replay_ops.getter(args_e, layouts, evaluate)
    kwargs = replay_ops.getter(kwargs_e, layouts, evaluate)
    # a primitive's own body: a replay's operands are arrays, never traced values (a
    # scatter_add of an LSTM's gate cotangent: ~3 us of dispatch a call)
    run = getattr(fn, "__fusegrad_body__", fn)

    def op(slots: list, numbers: Sequence[Any], pool: list | None) -> None:
        raw = run(*args(slots, numbers), **kwargs(slots, numbers))
        items: list = []
        _collect(raw, prepare, items)
        if len(items) != len(want) or any(
            w is not None and (x.shape, x.strides, x.dtype) != w for x, w in zip(items, want)
        ):
            raise StepMismatch(_name(fn), want, items)
        slots.extend(items)

    return op


def _comparable(step: tuple) -> tuple:
    """A step without its number constants' values (their recipes are compared instead), nor
    the engine a kernel ran on (under ``auto`` a kernel compiled since the first recording runs
    on another engine in the second: a replay chooses again, ``choose_hot``)."""
    engine, template, sources, first, dynamic = step
    if template is None or engine == "call":
        return step
    constants = list(template.constants)
    for j, _ in dynamic:
        constants[j] = None
    kernel = (template.domain, template.signature(), tuple(constants))
    return ("kernel", kernel, sources, first, dynamic)


def _same(a: Any, b: Any) -> bool:
    """Equality of two recordings' parts: arrays by value, NaNs equal, kernels by signature,
    conversion functions by what they are and what they hold. (A walk with a stack: a number
    argument's recipe down a 1000-step loop nests as deep as the loop.)"""
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if type(a) is not type(b):
            return False
        if isinstance(a, tuple | list):
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b))
        elif isinstance(a, functools.partial):
            if a.func is not b.func:
                return False
            stack += [(a.args, b.args), (a.keywords, b.keywords)]
        elif isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif not _same_leaf(a, b):
            return False
    return True


def _same_leaf(a: Any, b: Any) -> bool:
    """``_same`` of two objects of one type that hold no parts to compare."""
    if isinstance(a, np.ndarray):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )
    if isinstance(a, float | complex | np.inexact):
        return a == b or (a != a and b != b)
    if isinstance(a, _BY_EQUALITY):
        return bool(a == b)
    return repr(a) == repr(b)  # e.g. a ProjectTo: what it shows is what it holds


_BY_EQUALITY = (
    int, str, bytes, np.dtype, np.generic, type(None), type, np.ufunc,
    types.FunctionType, types.BuiltinFunctionType, types.MethodType,
)  # fmt: skip

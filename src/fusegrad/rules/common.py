"""Helpers every rule family shares; families import these from here, never from each other.

- cotangents: ``is_zero``, ``add_tangents``, ``lazy_ct``, ``unbroadcast_to``, ``project``,
  ``no_tangents``, ``zeros_for``;
- indexes: ``is_basic_index``, ``as_index_tuple``, ``materialize`` and the ``scatter_add``
  primitive (the adjoint of a gather, with its own rule);
- forward tangents: ``is_zero``, ``add_tangents``, ``lazy_tangent``, ``fit``,
  ``real_for``;
- call parameters: ``params``; matrices: ``mT``, ``mH``, ``conj``, ``sym``;
- the primal side of traced values: ``primal``, ``primal_tree``, ``value``, ``on_values``,
  ``as_array``, ``dispatch``.

Declarators: ``scalar_rule``, ``elementwise_op`` (an op of the lazy IR's table and its
derivatives, in one entry), ``linear``, ``bilinear``, ``nondiff``.

This module imports only ``registry``, ``lazy_values``, ``tangents``, the lazy array type, the
lazy op table (``elementwise_op`` adds to it) and ``replay`` (``on_values``' steps).

Example::

    >>> add_tangents(NoTangent(), np.ones(2)).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import dis
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..lazy import LazyArray, replay, small
from ..lazy import ops as op_table
from ..lazy.ops import NumbaExpr
from ..tangents import (
    AbstractThunk,
    AbstractZero,
    NoTangent,
    Thunk,
    ZeroTangent,
    is_lazy_thunk,
    unthunk,
)
from . import registry
from .lazy_values import as_cotangent, as_lazy, concrete_ct, operand
from .registry import (
    is_differentiable,
    primitive,
    register_frule,
    register_rrule,
    zero_cotangents,
)

# --------------------------------------------------------------------------------------------------
# Cotangents
# --------------------------------------------------------------------------------------------------


def is_zero(t: Any) -> bool:
    """True for the structural zeros ``ZeroTangent()`` and ``NoTangent()`` (nothing to compute),
    and for None, which both directions read as zero (see ``add_tangents``)."""
    return t is None or isinstance(t, AbstractZero)


def lazy_ct(dy: Any) -> Any:
    """A cotangent for a ``lazy=True`` rule: a lazy value or ``BroadcastThunk`` is kept as is, any
    other thunk is unthunked (a lazy rule's wrapper does not unthunk for it)."""
    if isinstance(dy, AbstractThunk) and not is_lazy_thunk(dy):
        return unthunk(dy)
    return dy


def unbroadcast_to(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``g`` over the axes that broadcasting added to an argument of shape ``shape``.

    Lazy-friendly (only ``np.sum`` and ``np.reshape``).

    >>> unbroadcast_to(np.ones((4, 2, 3)), (2, 1)).tolist()
    [[12.0], [12.0]]
    """
    shape = tuple(shape)
    gshape = getattr(g, "shape", None)
    gshape = tuple(np.shape(g) if gshape is None else gshape)  # Python scalars have no .shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead))
    if 1 in shape:
        axes += tuple(lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    if type(g) is _NDARRAY:  # (np.sum's own path, without its Python wrappers: ~1 µs a call)
        g = _ADD_REDUCE(g, axis=axes, keepdims=True) if axes else g
        return g if g.shape == shape else g.reshape(shape)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if tuple(g.shape) != shape:
        g = np.reshape(g, shape)
    return g


_ADD_REDUCE = np.add.reduce


def project(g: Any, x: Any) -> Any:
    """Cotangent ``g`` projected on ``x``'s space: ``x``'s shape (by reshape) and float dtype.

    A Python-scalar ``x`` gets a 0-d value; float32 stays float32; complex ``g`` for real ``x``
    keeps the real part. Zeros pass through.
    """
    if is_zero(g):
        return g
    shape = tuple(np.shape(x))
    if tuple(np.shape(g)) != shape:
        g = np.reshape(g, shape)
    dt = getattr(x, "dtype", None)
    gdt = getattr(g, "dtype", None)
    if dt is not None and gdt is not None and gdt != dt and np.issubdtype(dt, np.inexact):
        if np.issubdtype(gdt, np.complexfloating) and not np.issubdtype(dt, np.complexfloating):
            g = np.real(g)
            gdt = g.dtype
        if gdt != dt:  # the method, which a traced g (higher order) has too
            g = g.astype(dt) if hasattr(g, "astype") else np.astype(g, dt)
    return g


def params(args: tuple, kwargs: dict, **defaults: Any) -> dict[str, Any]:
    """The optional parameters of a call, by name: ``defaults`` (in NumPy's positional order)
    overridden by the positional ``args`` and then by ``kwargs``.

    Rules take ``(x, *args, **kwargs)`` so that they know how many positional arguments were
    passed (one cotangent each), and read the optional ones through this helper.

    >>> params((1,), {}, axis=None, dtype=None)
    {'axis': 1, 'dtype': None}
    """
    out = dict(defaults)
    out.update(zip(defaults, args, strict=False))
    out.update((k, v) for k, v in kwargs.items() if k in defaults)
    return out


def no_tangents(n: int) -> tuple:
    """``n`` copies of ``NoTangent()`` — the cotangents of axis/shape/index arguments."""
    return (NoTangent(),) * n


def zeros_for(x: Any) -> np.ndarray:
    """Materialised zeros in ``x``'s shape and (float) dtype, for a ``ZeroTangent`` that must be
    concatenated with real values."""
    dt = getattr(x, "dtype", None)
    if dt is None or not np.issubdtype(dt, np.inexact):
        dt = np.float64
    return np.zeros(np.shape(x), dtype=dt)


def add_tangents(a: Any, b: Any) -> Any:
    """Sum of two tangents or cotangents, either of which may be a structural zero.

    One function serves both directions. None is read as zero, in forward tangents and reverse
    cotangents alike: the backward pass already skips a None cotangent (``ad.core``) and the
    forward pass a None tangent, so a rule returning None for "no contribution" is accepted.
    Rules should still return ``ZeroTangent()``/``NoTangent()``, which say which of the two
    zeros is meant (``NoTangent`` where no derivative exists: integers, indexes).

    >>> add_tangents(None, np.ones(2)).tolist(), add_tangents(ZeroTangent(), None)
    ([1.0, 1.0], None)
    """
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return a + b


# --------------------------------------------------------------------------------------------------
# Index normalisation
# --------------------------------------------------------------------------------------------------


def as_index_tuple(index: Any) -> tuple:
    """``index`` as a tuple (a single index becomes a 1-tuple)."""
    return index if isinstance(index, tuple) else (index,)


def _is_basic_entry(i: Any) -> bool:
    return (
        i is None
        or i is Ellipsis
        or isinstance(i, slice)
        or (isinstance(i, int | np.integer) and not isinstance(i, bool | np.bool_))
    )


def is_basic_index(index: Any) -> bool:
    """True for an index made only of ints, slices, None and Ellipsis (a NumPy view)."""
    return all(_is_basic_entry(i) for i in as_index_tuple(index))


def _scatter_index(index: Any) -> tuple[tuple, bool]:
    """``index`` as a tuple usable by ``np.add.at`` / assignment, and whether it holds integer
    arrays (which may repeat). Lists become arrays; boolean arrays become ``nonzero()``."""
    out: list = []
    has_int_array = False
    for i in as_index_tuple(index):
        if _is_basic_entry(i):
            out.append(i)
            continue
        arr = np.asarray(i)
        if arr.dtype == np.bool_ and arr.ndim > 0:
            out.extend(np.nonzero(arr))
            has_int_array = True  # nonzero() is unique, but mixed with others it may broadcast
        else:
            out.append(arr)
            has_int_array = has_int_array or arr.ndim >= 0
    return tuple(out), has_int_array


def materialize(v: Any) -> Any:
    """A thunk unthunked and a fusegrad lazy array materialised; anything else (ndarrays,
    scalars, tracers of a higher-order pass) is returned as is."""
    v = unthunk(v)
    if isinstance(v, LazyArray):
        return np.asarray(v)
    return v


# --------------------------------------------------------------------------------------------------
# The scatter primitive
# --------------------------------------------------------------------------------------------------


@primitive
def scatter_add(dy: Any, index: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` (``dy``'s dtype) with ``dy`` added at ``index``; repeated integer
    indices accumulate. The adjoint of the gather ``x[index]``.

    >>> scatter_add(np.ones(3), np.array([0, 0, 2]), (4,)).tolist()
    [2.0, 0.0, 1.0, 0.0]
    """
    if type(dy) is np.ndarray and type(index) is tuple and all(type(i) is slice for i in index):
        out = np.zeros(shape, dtype=dy.dtype)  # a slice's cotangent (an LSTM's gates): a view
        out[index] = dy
        return out
    dy = materialize(dy)
    dt = getattr(dy, "dtype", np.dtype(np.float64))
    idx, has_int_array = _scatter_index(index)
    if has_int_array and len(idx) == 1 and len(shape) == 1:
        counted = _bincount(dy, idx[0], shape[0])
        if counted is not None:
            return counted
    out = np.zeros(shape, dtype=dt)
    if has_int_array:
        np.add.at(out, idx, dy)
    else:
        out[idx] = dy
    return out


_F64 = np.dtype(np.float64)


def _bincount(dy: Any, index: np.ndarray, n: int) -> np.ndarray | None:
    """``scatter_add`` of float64 ``dy`` into a vector of ``n`` at the non-negative signed integer
    ``index`` of ``dy``'s shape, as ``np.bincount`` (the same sums, in the same order, about 5×
    faster than ``np.add.at`` on 576 points); None for anything else."""
    if not (
        type(dy) is _NDARRAY
        and dy.dtype == _F64
        and index.dtype.kind == "i"
        and index.shape == dy.shape
        and index.size
    ):
        return None
    flat = index.ravel()
    if flat.min() < 0:
        return None
    out = np.bincount(flat, weights=dy.ravel(), minlength=n)
    return out if len(out) == n else None  # (longer: an index out of bounds; add.at raises)


# --------------------------------------------------------------------------------------------------
# Forward tangents
# --------------------------------------------------------------------------------------------------


def lazy_tangent(t: Any) -> Any:
    """A tangent unthunked and made lazy, so that a forward rule's work fuses."""
    return as_lazy(unthunk(t))


def is_const(p: Any, c: float) -> bool:
    """Whether the partial ``p`` is the Python number ``c`` (not a jit argument, whose value may
    change between calls)."""
    return isinstance(p, int | float) and not isinstance(p, bool) and p == c


def shape_of(x: Any) -> tuple:
    """``x.shape``, or ``np.shape(x)`` for Python scalars."""
    s = getattr(x, "shape", None)
    return tuple(np.shape(x) if s is None else s)


def fit(dot: Any, y: Any) -> Any:
    """A tangent broadcast to its output's shape (a lazy stride-0 view when lazy)."""
    if is_zero(dot):
        return dot
    shape = shape_of(y)
    return dot if shape_of(dot) == shape else np.broadcast_to(dot, shape)


def is_complex(x: Any) -> bool:
    """Whether ``x``'s dtype is complex."""
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.result_type(x)).kind == "c"


def real_for(dot: Any, y: Any) -> Any:
    """A tangent of the real output ``y``: ``Re(dot)`` (``ẏ = Re(p·ż)`` for a real function of a
    complex ``z``, JAX's convention)."""
    if is_zero(dot) or is_complex(y) or not is_complex(dot):
        return dot
    return np.real(dot)


# --------------------------------------------------------------------------------------------------
# Matrices
# --------------------------------------------------------------------------------------------------


def mT(a: Any) -> Any:
    """Transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


def conj(a: Any) -> Any:
    """``conj(a)`` for a complex ``a``; ``a`` itself otherwise (no copy, no traced op)."""
    return np.conjugate(a) if np.iscomplexobj(a) else a


def mH(a: Any) -> Any:
    """Conjugate transpose of the last two axes."""
    return conj(mT(a))


def sym(a: Any) -> Any:
    """``(A + Aᴴ)/2``: the Hermitian part (its own transpose, so it serves both directions)."""
    return (a + mH(a)) / 2


# --------------------------------------------------------------------------------------------------
# Traced values
# --------------------------------------------------------------------------------------------------


def primal(x: Any) -> Any:
    """The innermost primal of a traced value (``x`` itself for anything else)."""
    while getattr(type(x), "__fusegrad_traced__", False):
        x = x.value
    return x


def primal_tree(x: Any) -> Any:
    """``primal`` through lists and tuples (not named tuples)."""
    if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
        return type(x)(primal_tree(v) for v in x)
    return primal(x)


def value(x: Any) -> Any:
    """The primal value of ``x`` at every trace level (a constant: no derivative flows)."""
    x = primal(x)
    if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
        return type(x)(value(v) for v in x)
    return np.asarray(x) if hasattr(x, "__array__") and not isinstance(x, np.ndarray) else x


def on_values(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on the primal values of traced arguments, read as constants (no
    derivative flows through the results): SciPy's own function for its conventions (vector
    signs, ranks, pivots, subsets), or a choice computed from a decomposition's values.

    Reading a value with ``value`` while ``jit`` records is an escape: its result would be the
    recording's, so the program is not replayable. Here ``fn`` is instead a step of the recorded
    program (``replay.step``): its operands' kernels are recorded, and a replay calls ``fn`` again
    on the new values, so the constants follow the inputs, and a result whose shape depends on
    the values (a rank, a subset) is checked against the recording's. In a recording, a Python
    int among the results is a 0-d array (a replay could not hand a number on); outside one this
    is ``fn`` on ``value``s.

    >>> import fusegrad as fg
    >>> fg.grad(lambda a: np.sum(a * on_values(np.sign, a)))(np.array([-2.0, 3.0]))
    array([-1.,  1.])
    """
    args = primal_tree(args)
    kwargs = {k: primal_tree(v) for k, v in kwargs.items()} if kwargs else kwargs
    if replay.active() is None:
        return fn(*[value(a) for a in args], **{k: value(v) for k, v in kwargs.items()})
    return replay.step(functools.partial(_with_arrays, fn), args, kwargs, _concrete_value)


def _concrete_value(x: Any) -> Any:
    """An operand of ``on_values``'s step made concrete (a lazy value materialised)."""
    x = materialize(x)
    return np.asarray(x) if hasattr(x, "__array__") and not isinstance(x, np.ndarray) else x


def _with_arrays(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn``'s results with Python ints as 0-d arrays (a step's results must be arrays)."""
    return _ints_as_arrays(fn(*args, **kwargs))


def _ints_as_arrays(x: Any) -> Any:
    if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
        return type(x)(_ints_as_arrays(v) for v in x)
    if isinstance(x, int) and not isinstance(x, bool):
        return np.asarray(x)
    return x


def as_array(x: Any) -> Any:
    """``x`` as something with ``.shape``: a list or tuple holding traced values is stacked
    (``np.asarray`` would cut their gradients); plain values become arrays."""
    if isinstance(x, list | tuple) and registry._traced(x):
        return np.stack([as_array(v) for v in x])
    if registry._traced(x):
        return x
    return np.asarray(x)


def dtype_of(x: Any) -> np.dtype:
    """The dtype of ``x``'s value (traced or not; a Python float is float64)."""
    dt = getattr(x, "dtype", None)
    return np.dtype(dt) if dt is not None else np.asarray(value(x)).dtype


def probe(x: Any) -> Any:
    """A stand-in for ``x`` in NumPy's dtype rules: a Python scalar as it is (NumPy promotes it
    weakly), anything else a 0-d zero of its dtype (traced values included)."""
    if type(x) in (bool, int, float, complex):
        return x
    return np.zeros((), dtype_of(x))


def cast(x: Any, dtype: Any) -> Any:
    """``x`` as ``dtype``, as NumPy stores a result into an array of that dtype: ``x`` itself
    when it already has it (no cast recorded, the values untouched).

    >>> cast(np.ones(2), np.float32).dtype, cast(np.ones(2), np.float64).dtype
    (dtype('float32'), dtype('float64'))
    """
    dtype = np.dtype(dtype)
    if dtype_of(x) == dtype:
        return x
    return x.astype(dtype) if registry._traced(x) else np.asarray(x).astype(dtype)


def call(f: Any, *args: Any, **kwargs: Any) -> Any:
    """``f(*args, **kwargs)``, recorded by an outer trace when an argument is traced (for
    functions that NumPy's protocols do not dispatch, such as SciPy's).

    >>> float(call(np.add, 1.0, 2.0))
    3.0
    """
    return registry.dispatch(f, args, kwargs)


def dispatch(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Call ``f``'s own rule on traced ``args`` (bypassing the composite table, which would
    recurse): ``registry.dispatch``."""
    return registry.dispatch(f, args, kwargs or {})


# --------------------------------------------------------------------------------------------------
# Declarators: a function's reverse and forward rules from one declaration
# --------------------------------------------------------------------------------------------------


def is_complex_value(x: Any) -> bool:
    """Whether ``x`` is a complex value (a type, dtype or dtype name given as an argument, as
    ``astype(x, np.complex128)`` has, is not a value: False)."""
    if isinstance(x, type | np.dtype | str):
        return False
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.result_type(x)).kind == "c"


def in_space_of(g: Any, a: Any) -> Any:
    """The cotangent ``g`` in the space of the argument ``a``: ``Re(g)`` for a real ``a`` (a real
    value used in a complex computation, ``x * 1j``), lazily; ``g`` itself otherwise."""
    if type(g) is _NDARRAY and g.dtype.kind != "c":
        return g
    return np.real(g) if is_complex_value(g) and not is_complex_value(a) else g


PARTIALS: dict[np.ufunc, tuple] = {}


def scalar_rule(ufunc: np.ufunc, *partials: Callable | None) -> None:
    """Register the lazy reverse and forward rules of an elementwise ``ufunc`` from its
    partials ``∂y/∂xᵢ = partial(*args, y)`` (``None`` for an argument with no derivative):
    ``x̄ᵢ = ȳ · ∂y/∂xᵢ`` (summed to ``xᵢ``'s shape) and ``ẏ = Σᵢ ∂y/∂xᵢ · ẋᵢ``.

    >>> scalar_rule(np.exp, lambda x, y: y)  # how rules/elementwise.py declares exp
    """
    _check_partials(ufunc, partials)
    PARTIALS[ufunc] = partials
    reads = values_read(partials)
    unread = tuple(i for i, r in enumerate(reads[:-1]) if not r)
    y_read = reads[-1]

    def rule(*args: Any, **kwargs: Any) -> tuple[Any, Callable]:
        vals = small.values_if_small(args, ufunc)
        if vals is not None:  # small and concrete: NumPy now, and an eager pullback
            y = ufunc(*vals, **kwargs) if kwargs else small.call_ufunc(ufunc, vals)
            # keep only the values a partial reads (add's: none; tanh's: y; multiply's: x, y)
            kept, kvals = _kept(unread, args, vals) if unread else (args, vals)
            y_kept = y if y_read else None
            return y, lambda dy: _scalar_pullback(partials, kept, kvals, y_kept, concrete_ct(dy))
        largs = tuple(as_lazy(a) for a in args)
        y = ufunc(*largs, **kwargs)
        # as above: a lazy argument no partial reads is not kept (nor, through it, its graph:
        # the 8 MiB X @ W1 under tanh(X @ W1 + b) is freed once tanh's value is computed)
        kept, lvals = _kept(unread, args, largs) if unread else (args, largs)
        y_lazy = y if y_read else None
        return y, lambda dy: _scalar_pullback(partials, kept, lvals, y_lazy, operand(dy))

    def forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        largs = tuple(as_lazy(a) for a in args)
        y = ufunc(*largs, **kwargs)
        dot: Any = ZeroTangent()
        for a, t, partial in zip(args, tangents, partials):
            if is_zero(t) or partial is None or not is_differentiable(a):
                continue
            t = lazy_tangent(t)
            p = _partial_at(partial, largs, y)
            if is_const(p, 1):
                term = t
            elif is_const(p, -1):
                term = -t
            else:
                term = t * p
            dot = add_tangents(dot, term)
        if not is_differentiable(y):
            return y, ZeroTangent()
        return y, fit(real_for(dot, y), y)

    rule.__name__ = f"rrule_{ufunc.__name__}"
    forward.__name__ = f"frule_{ufunc.__name__}"
    register_rrule(ufunc, lazy=True)(rule)
    _register_frule(ufunc, forward, True)


def values_read(partials: tuple) -> tuple[bool, ...]:
    """Which of ``(*args, y)`` any of the ``partials`` reads, from their bytecode: a partial that
    is not a plain function, takes ``*args``, hands an argument to an inner function or calls
    ``locals``/``vars``/``eval``/``exec`` counts as reading everything. The small-array
    pullback keeps only these values alive, so the tape of ``tanh(a @ w + b)`` holds ``tanh``'s
    output but neither sum.

    >>> values_read((lambda a, b, y: 1, lambda a, b, y: 1))
    (False, False, False)
    >>> values_read((lambda x, y: 1 - y * y,))
    (False, True)
    """
    n = len(partials) + 1
    read = [False] * n
    for partial in partials:
        if partial is None:
            continue
        code = getattr(partial, "__code__", None)
        if (
            code is None
            or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
            or code.co_argcount != n
            or code.co_cellvars
            or _INTROSPECTING.intersection(code.co_names)  # reads locals without LOAD_FAST
        ):
            return (True,) * n
        names = code.co_varnames[:n]
        for ins in dis.get_instructions(code):
            # any instruction naming an argument counts as a read: LOAD_FAST and its 3.12-3.14
            # variants (_CHECK, _AND_CLEAR, _BORROW, LOAD_FAST_LOAD_FAST), and the fused
            # STORE_FAST_LOAD_FAST, whose argval is a pair of names (an argument read by an
            # inner function is a cell variable: refused above)
            if "FAST" in ins.opname:
                named = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
                for name in named:
                    if name in names:
                        read[names.index(name)] = True
    return tuple(read)


_INTROSPECTING = frozenset({"locals", "vars", "eval", "exec"})
_STAND_INS: dict[tuple, np.ndarray] = {}  # (shape, dtype) -> a zero-strided array of them
_ZERO_BYTES = bytes(64)  # their one element: no NumPy allocation, read-only (a bytes buffer)


def _stand_in(v: np.ndarray) -> np.ndarray:
    """An array of ``v``'s shape and dtype holding no memory (read-only, zero strides): what
    the small pullback needs of a value no partial reads (its shape, dtype and type)."""
    key = (v.shape, v.dtype)
    hit = _STAND_INS.get(key)
    if hit is None:
        if len(_STAND_INS) > 512:
            _STAND_INS.clear()
        hit = np.ndarray(v.shape, v.dtype, buffer=_ZERO_BYTES, strides=(0,) * v.ndim)
        _STAND_INS[key] = hit
    return hit


# An unread value smaller than this stays (a stand-in's lookup costs more than it frees).
KEEP_BELOW_BYTES = 1024


def shape_only(x: Any) -> Any:
    """What a pullback that reads only ``x``'s shape, dtype and type should keep: for a NumPy
    array of numbers of ``KEEP_BELOW_BYTES`` or more, a stand-in holding no memory; else ``x``.

    >>> s = shape_only(np.ones((64, 64)))
    >>> s.shape, s.dtype, s.strides
    ((64, 64), dtype('float64'), (0, 0))
    """
    return _stand_in(x) if _droppable(x) else x


def _droppable(v: Any) -> bool:
    """Whether a pullback that reads only ``v``'s shape and dtype keeps a stand-in for it: a
    NumPy array or a lazy value of numbers of at least ``KEEP_BELOW_BYTES``."""
    return (
        (type(v) is _NDARRAY or isinstance(v, LazyArray))
        and v.nbytes >= KEEP_BELOW_BYTES
        and v.dtype.kind in "biufc"
    )


def _kept(unread: tuple, args: tuple, vals: Sequence) -> tuple[tuple, Sequence]:
    """``args`` and ``vals`` with each array or lazy value at the ``unread`` positions (no
    partial reads it) replaced by a stand-in: the pullback keeps only what it will use."""
    kept_args: list | None = None
    kept_vals: list = []
    for i in unread:
        v = vals[i]
        if _droppable(v):
            if kept_args is None:
                kept_args, kept_vals = list(args), list(vals)
            kept_vals[i] = kept_args[i] = _stand_in(v)
    return (args, vals) if kept_args is None else (tuple(kept_args), kept_vals)


def _check_partials(ufunc: np.ufunc, partials: tuple) -> None:
    if not isinstance(ufunc, np.ufunc):
        name = getattr(ufunc, "__name__", type(ufunc).__name__)
        raise TypeError(
            f"scalar_rule takes a NumPy ufunc (np.sin, scipy.special.erf), but {name} is a "
            f"{type(ufunc).__name__}: for a Python function register its rules with "
            "fusegrad.register_rrule and register_frule (see the README's 'Writing rules'), or "
            "write it with NumPy operations, which have rules already"
        )
    if len(partials) != ufunc.nin:
        raise ValueError(f"{ufunc.__name__} takes {ufunc.nin} inputs: give one partial each")


def elementwise_op(
    ufunc: np.ufunc,
    *partials: Callable | None,
    numba: NumbaExpr | None = None,
    expensive: bool = False,
    float_only: bool = False,
    loop: str = "result",
    name: str | None = None,
) -> np.ufunc:
    """Declare an elementwise ufunc once: its entry in the lazy IR's op table and both of its
    derivatives.

    - the entry (``lazy/ops.py``'s ``register``): the ufunc is fused into kernels on every
      engine that has an expression for it: numpy_blocked calls the ufunc, the numba engine
      fills in ``numba`` (a template, see ``lazy/ops.py``; None: numba declines the op);
      ``expensive`` is the cost class (a transcendental call, which the policy stores rather
      than recompute), ``float_only`` makes numba decline integer and bool loops, ``loop`` is
      the dtype the scalar loop runs in (``"args"`` for comparisons, ``"bool"`` for logical ops);
      ``name`` the op's name when another ufunc holds the ufunc's own (``scipy.special.expm1``
      beside ``np.expm1``);
    - the derivatives (``scalar_rule``): one partial per argument, ``∂y/∂xᵢ = partial(*args,
      y)`` written with NumPy calls, ``None`` where there is none (piecewise-constant ops).

    >>> elementwise_op(np.tanh, lambda x, y: 1 - y * y,  # how rules/elementwise.py declares tanh
    ...                numba="vm.tanh{f32}({0})", expensive=True, float_only=True)
    <ufunc 'tanh'>
    """
    _check_partials(ufunc, partials)
    op_table.register(
        ufunc, numba=numba, expensive=expensive, float_only=float_only, loop=loop, name=name
    )
    scalar_rule(ufunc, *partials)
    return ufunc


def _scalar_pullback(partials: tuple, args: tuple, vals: Sequence, y: Any, dy: Any) -> tuple:
    """``x̄ᵢ = ȳ · ∂y/∂xᵢ``, summed to ``xᵢ``'s shape, with NumPy calls on whatever ``vals``, ``y``
    and ``ȳ`` are: arrays (the small path: eager), lazy values (fused) or tracers (higher order).
    """
    grads: list[Any] = []
    for a, v, partial in zip(args, vals, partials):
        if not (
            a.dtype.kind in "fc" if type(a) is _NDARRAY else is_differentiable(a)
        ):  # (is_differentiable's table answers the common scalar types at once)
            grads.append(_NO_TANGENT)
        elif partial is None:
            grads.append(_ZERO)
        else:
            p = _partial_at(partial, vals, y)
            if type(p) in _PYTHON_REALS and (p == 1 or p == -1):
                g = dy if p == 1 else -dy  # a negation: a third cheaper in NumPy than * -1
            else:
                g = dy * p
            if type(g) is _NDARRAY and type(v) is _NDARRAY and g.dtype.kind != "c":
                grads.append(g if g.shape == v.shape else unbroadcast_to(g, v.shape))
                continue  # the small-array path's common case: a real array
            g = in_space_of(g, a)
            grads.append(as_cotangent(unbroadcast_to(g, shape_of(v))))
    return tuple(grads)


def _partial_at(partial: Callable, vals: Sequence, y: Any) -> Any:
    """``partial(*vals, y)``; at a pole of Python floats (``1 / x`` at 0.0: ZeroDivisionError)
    in NumPy floats, which give inf as NumPy does (and as a float64 argument did)."""
    try:
        return partial(*vals, y)
    except ZeroDivisionError:
        # (a jit recording's number too: its value is read, so its signature compiles it in)
        as_numpy = [
            np.float64(v) if isinstance(v, float) and not isinstance(v, np.floating) else v
            for v in (*vals, y)
        ]
        return partial(*as_numpy)


_NO_TANGENT, _ZERO = NoTangent(), ZeroTangent()  # singletons, bound once
# `np.ndarray` read as a module global on the per-op paths: numpy's module __getattr__ keeps
# CPython 3.11 from specialising `np.name` lookups (about 300 instructions each).
_NDARRAY = np.ndarray
_PYTHON_REALS = (int, float)  # a partial of 1 (not a jit number argument: its value may change)


def _register_frule(f: Any, rule: Callable, lazy: bool) -> Callable:
    rule.lazy = lazy  # type: ignore[attr-defined]  # read by the forward tracer
    return register_frule(f)(rule)


def lazy_frule(f: Any) -> Callable[[Callable], Callable]:
    """Register a forward rule that takes (and keeps) lazy arrays, so that its tangent fuses
    with the primal's work.

    >>> def my_neg(x):
    ...     return -x
    >>> @lazy_frule(my_neg)
    ... def _(tangents, x):
    ...     return -x, -tangents[0]
    """
    return lambda rule: _register_frule(f, rule, True)


def eager_frule(f: Any) -> Callable[[Callable], Callable]:
    """Register a forward rule that receives NumPy arrays (the forward tracer materialises lazy
    primals and tangents together first). ``register_frule`` alone registers an eager rule."""
    return lambda rule: _register_frule(f, rule, False)


def _fname(f: Any) -> str:
    return str(getattr(f, "__name__", f))


def linear(
    f: Any,
    transpose: Callable | None = None,
    *,
    lazy: bool = False,
    constants: tuple[str, ...] = (),
    impl: Callable | None = None,
) -> Any:
    """Declare ``f(x, *args, **kwargs)`` linear in ``x``: both of its derivatives at once.

    - forward: ``ẏ = f(ẋ, *args, **kwargs)``, the keyword arguments named in ``constants``
      (added constants, such as ``np.diff``'s ``prepend``) replaced by zeros;
    - reverse: ``x̄ = transpose(ȳ, x, *args, **kwargs)`` (JAX's ``deflinear``), and no cotangent
      for the other positional arguments. ``transpose=None`` keeps the reverse rule registered
      beside the declaration (a linear function whose transpose needs more than its cotangent
      and the arguments' shapes, such as ``np.sum`` with its checks of ``where=``); the forward
      rule is derived from linearity either way.

    ``lazy`` rules take lazy arrays and cotangents and keep them lazy (movement, sums).
    ``impl``, if given, computes ``f`` in both rules: an equivalent that is faster on the
    values they get (``np.roll``'s own Python costs more than its copy on small arrays).

    >>> def double(x):
    ...     return 2.0 * x
    >>> linear(double, lambda g, x: 2.0 * g)  # doctest: +ELLIPSIS
    <function double at ...>
    >>> y, pb = registry.rrule(double, np.ones(2))
    >>> pb(np.ones(2))[0].tolist(), registry.frule((np.ones(2),), double, np.ones(2))[1].tolist()
    ([2.0, 2.0], [2.0, 2.0])
    """

    call = f if impl is None else impl

    def forward(tangents: tuple, x: Any, *args: Any, **kwargs: Any) -> tuple:
        y = call(as_lazy(x) if lazy else x, *args, **kwargs)
        t = tangents[0]
        if is_zero(t):
            return y, ZeroTangent()
        kw = {k: (np.zeros(np.shape(v)) if k in constants else v) for k, v in kwargs.items()}
        return y, call(lazy_tangent(t) if lazy else unthunk(t), *args, **kw)

    forward.__doc__ = f"{_fname(f)}: ẏ = {_fname(f)}(ẋ, ...) (linear)."
    _register_frule(f, forward, lazy)
    if transpose is None:
        if f not in registry.RRULES:
            raise ValueError(
                f"linear({_fname(f)}) without transpose= needs a reverse rule registered first "
                "(register_rrule); give transpose=lambda dy, x, *args, **kwargs: ... instead"
            )
        return f
    tr = transpose

    def rule(x: Any, *args: Any, **kwargs: Any) -> tuple:
        y = call(x, *args, **kwargs)
        # a linear map's transpose reads x's shape and dtype, never its values: the pullback
        # keeps a stand-in, not x (np.roll's input is freed once nothing else holds it)
        kept = shape_only(x)

        def pullback(dy: Any) -> tuple:
            return (tr(lazy_ct(dy) if lazy else dy, kept, *args, **kwargs), *no_tangents(len(args)))

        return y, pullback

    rule.__doc__ = f"{_fname(f)}: x̄ = {getattr(tr, '__doc__', None) or 'transpose(ȳ)'}"
    register_rrule(f, lazy=lazy)(rule)
    return f


def bilinear(
    f: Any,
    transpose_a: Callable | None = None,
    transpose_b: Callable | None = None,
) -> Any:
    """Declare ``f(a, b, *args, **kwargs)`` bilinear in ``a`` and ``b`` (JAX's ``defbilinear``).

    - forward: ``ẏ = f(ȧ, b) + f(a, ḃ)`` (a zero tangent's term skipped);
    - reverse: ``ā = transpose_a(ȳ, a, b, *args, **kwargs)``, ``b̄ = transpose_b(...)``, each a
      ``Thunk``, so the cotangent of a constant operand (the data ``X`` of ``X @ w``) is never
      computed. Without the transposes the reverse rule registered beside it is kept.

    Eager: the rules receive NumPy arrays.

    >>> def times(a, b):
    ...     return a * b
    >>> bilinear(times, lambda g, a, b: g * b, lambda g, a, b: g * a)  # doctest: +ELLIPSIS
    <function times at ...>
    >>> float(registry.frule((1.0, 1.0), times, 2.0, 3.0)[1])
    5.0
    """

    def forward(tangents: tuple, a: Any, b: Any, *args: Any, **kwargs: Any) -> tuple:
        y = f(a, b, *args, **kwargs)
        ta, tb = tangents[0], tangents[1]
        dot: Any = ZeroTangent()
        if not is_zero(ta):
            dot = f(unthunk(ta), b, *args, **kwargs)
        if not is_zero(tb):
            dot = add_tangents(dot, f(a, unthunk(tb), *args, **kwargs))
        return y, dot

    forward.__doc__ = f"{_fname(f)}: ẏ = {_fname(f)}(ȧ, b) + {_fname(f)}(a, ḃ) (bilinear)."
    _register_frule(f, forward, False)
    if transpose_a is None or transpose_b is None:
        if f not in registry.RRULES:
            raise ValueError(
                f"bilinear({_fname(f)}) without both transposes needs a reverse rule registered "
                "first (register_rrule); give transpose_a= and transpose_b= instead"
            )
        return f
    ta_, tb_ = transpose_a, transpose_b

    def rule(a: Any, b: Any, *args: Any, **kwargs: Any) -> tuple:
        def pullback(dy: Any) -> tuple:
            return (
                Thunk(lambda: ta_(dy, a, b, *args, **kwargs)),
                Thunk(lambda: tb_(dy, a, b, *args, **kwargs)),
                *no_tangents(len(args)),
            )

        return f(a, b, *args, **kwargs), pullback

    rule.__doc__ = f"{_fname(f)}: ā = transpose_a(ȳ, a, b), b̄ = transpose_b(ȳ, a, b)."
    register_rrule(f, lazy=False)(rule)
    return f


def nondiff(f: Any) -> Any:
    """Declare ``f`` without a derivative: its output is a constant for both directions
    (``ZeroTangent`` for float arguments, ``NoTangent`` for the others; zero forward tangents).

    A ufunc is declared as a lazy elementwise op (``scalar_rule`` with no partials), so it
    fuses; any other function runs on NumPy arrays.

    >>> nondiff(np.floor) is np.floor
    True
    >>> y, pb = registry.rrule(np.floor, np.array([1.5]))
    >>> pb(np.ones(1))
    (ZeroTangent(),)
    """
    if isinstance(f, np.ufunc):
        scalar_rule(f, *(None,) * f.nin)
        return f

    def rule(*args: Any, **kwargs: Any) -> tuple:
        return f(*args, **kwargs), lambda dy: zero_cotangents(args)

    def forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        return f(*args, **kwargs), ZeroTangent()

    rule.__doc__ = forward.__doc__ = f"{_fname(f)}: no derivative (a constant output)."
    register_rrule(f)(rule)
    _register_frule(f, forward, False)
    return f


def _gather(g: Any, dy: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """the gather ``g[index]``"""
    return g[index]


linear(scatter_add, _gather)  # the adjoint of the gather x[index] is the gather itself


__all__ = [
    "call",
    "cast",
    "dtype_of",
    "fit",
    "is_complex",
    "is_const",
    "lazy_tangent",
    "real_for",
    "shape_of",
    "as_index_tuple",
    "is_basic_index",
    "materialize",
    "scatter_add",
    "add_tangents",
    "as_array",
    "conj",
    "dispatch",
    "is_zero",
    "lazy_ct",
    "mH",
    "mT",
    "no_tangents",
    "on_values",
    "params",
    "primal",
    "primal_tree",
    "probe",
    "project",
    "sym",
    "unbroadcast_to",
    "value",
    "zeros_for",
]

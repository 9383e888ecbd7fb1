"""Helpers every rule family shares; families import these from here, never from each other.

- cotangents: ``is_zero``, ``add_tangents``, ``lazy_ct``, ``unbroadcast_to``, ``project``,
  ``no_tangents``, ``zeros_for``;
- indexes: ``is_basic_index``, ``as_index_tuple``, ``materialize`` and the ``scatter_add``
  primitive (the adjoint of a gather, with its own rule);
- forward tangents: ``tangent_is_zero``, ``add_forward``, ``lazy_tangent``, ``fit``,
  ``real_for``;
- call parameters: ``params``; matrices: ``mT``, ``mH``, ``conj``, ``sym``;
- the primal side of traced values: ``primal``, ``primal_tree``, ``value``, ``as_array``,
  ``dispatch``.

This module imports only ``registry``, ``lazy_values``, ``tangents`` and the lazy array type.

Example::

    >>> add_tangents(NoTangent(), np.ones(2)).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tangents import AbstractThunk, AbstractZero, NoTangent, is_lazy_thunk, unthunk
from . import registry
from .lazy_values import as_lazy
from .registry import primitive, register_rrule

# --------------------------------------------------------------------------------------------------
# Cotangents
# --------------------------------------------------------------------------------------------------


def is_zero(t: Any) -> bool:
    """True for the structural zeros ``ZeroTangent()`` and ``NoTangent()`` (nothing to compute)."""
    return isinstance(t, AbstractZero)


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
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1
    )
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if tuple(g.shape) != shape:
        g = np.reshape(g, shape)
    return g


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
    """Sum of two tangents or cotangents, either of which may be a structural zero."""
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return a + b


try:  # the lazy IR may be absent while it is being written; then nothing is lazy
    from ..lazy import LazyArray as _LAZY_TYPES
except ImportError:  # pragma: no cover - depends on the checkout
    _LAZY_TYPES = ()

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
    if isinstance(v, _LAZY_TYPES):
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
    dy = materialize(dy)
    dt = getattr(dy, "dtype", np.dtype(np.float64))
    out = np.zeros(shape, dtype=dt)
    idx, has_int_array = _scatter_index(index)
    if has_int_array:
        np.add.at(out, idx, dy)
    else:
        out[idx] = dy
    return out


@register_rrule(scatter_add)
def _scatter_add(dy, index, shape):
    """scatter_add: ddy = g[index] (the gather)."""

    def pullback(g):
        return g[index], NoTangent(), NoTangent()

    return scatter_add(dy, index, shape), pullback


# --------------------------------------------------------------------------------------------------
# Forward tangents
# --------------------------------------------------------------------------------------------------


def tangent_is_zero(t: Any) -> bool:
    """True for a tangent that is a structural zero (``ZeroTangent``, ``NoTangent``) or absent."""
    return t is None or isinstance(t, AbstractZero)


def add_forward(a: Any, b: Any) -> Any:
    """Sum of two tangents, either of which may be a structural zero or absent."""
    if tangent_is_zero(a):
        return b
    if tangent_is_zero(b):
        return a
    return a + b


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
    if tangent_is_zero(dot):
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
    if tangent_is_zero(dot) or is_complex(y) or not is_complex(dot):
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


def as_array(x: Any) -> Any:
    """``x`` as something with ``.shape``: a list or tuple holding traced values is stacked
    (``np.asarray`` would cut their gradients); plain values become arrays."""
    if isinstance(x, list | tuple) and registry._traced(x):
        return np.stack([as_array(v) for v in x])
    if registry._traced(x):
        return x
    return np.asarray(x)


def call(f: Any, *args: Any, **kwargs: Any) -> Any:
    """``f(*args, **kwargs)``, recorded by an outer trace when an argument is traced (for
    functions that NumPy's protocols do not dispatch, such as SciPy's).

    >>> call(np.add, 1.0, 2.0)
    3.0
    """
    if registry._traced(args) and registry._trace_dispatch[0] is not None:
        return registry._trace_dispatch[0](f, args, kwargs)
    return f(*args, **kwargs)


def dispatch(f: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Call ``f``'s own rule on traced ``args`` (bypassing the composite table, which would
    recurse)."""
    return registry._trace_dispatch[0](f, args, kwargs or {})


__all__ = [
    "add_forward",
    "call",
    "fit",
    "is_complex",
    "is_const",
    "lazy_tangent",
    "real_for",
    "shape_of",
    "tangent_is_zero",
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
    "params",
    "primal",
    "primal_tree",
    "project",
    "sym",
    "unbroadcast_to",
    "value",
    "zeros_for",
]

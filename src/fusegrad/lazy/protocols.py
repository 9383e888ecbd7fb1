"""How a ``LazyArray`` speaks NumPy: ufuncs, array functions, operators, methods.

Ufuncs in the op table become ``Map`` nodes, ``add/multiply/maximum/minimum.reduce`` become
reductions, the array functions in ``FUNCTIONS`` stay lazy, and anything else materialises its
lazy inputs and runs eagerly: correct, just not fused.

Example::

    >>> from .nodes import asarray
    >>> y = np.sum(np.exp(asarray(np.zeros(3))), axis=0)
    >>> float(y)
    3.0
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from . import dask_leaves, movement, reductions, replay, small
from .nodes import LazyArray, Map, Reduce, asarray, make_map
from .ops import REDUCING_UFUNCS, op_for
from .plan import materialize

_SCALARS = (int, float, complex, bool, np.generic)


def _lazy_arg(x: Any) -> Any:
    """A ufunc argument as the IR wants it: nodes and scalars as they are, arrays as leaves."""
    if isinstance(x, (LazyArray, *_SCALARS)):
        return x
    if isinstance(x, np.ndarray):
        return asarray(x)
    return None


def _concrete(x: Any) -> Any:
    if isinstance(x, LazyArray):
        return materialize(x)
    if isinstance(x, list | tuple):
        return type(x)(_concrete(i) for i in x)
    if isinstance(x, dict):
        return {k: _concrete(v) for k, v in x.items()}
    return x


def eager(func: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run ``func`` on materialised arguments: the fallback for anything not fusable."""
    if replay.active() is not None:  # a jit recording: the call is a step of its program
        return replay.step(func, args, kwargs, _concrete)
    return func(*_concrete(args), **_concrete(kwargs))


def _foreign(values: Any) -> bool:
    """Whether another library's array type (a tracer) takes part: then it handles the call."""
    return any(
        not isinstance(x, (LazyArray, np.ndarray, *_SCALARS)) and hasattr(x, "__array_ufunc__")
        for x in values
    )


class LazyWriteError(TypeError):
    """A write into a lazy value (``x[i] = v``, ``x.fill(0)``, ``out=x``, ``x -= v`` on an
    argument of a function ``jit`` records): lazy values are immutable. ``jit`` runs a function
    that writes into one uncompiled, as the NumPy code it is."""


def _immutable(what: str, fix: str) -> TypeError:
    return LazyWriteError(
        f"lazy values are immutable: {what} would write into one (fusegrad may share it with "
        f"other expressions, or it may be a view of an array you passed in). {fix}"
    )


def _check_out(name: str, kwargs: dict) -> None:
    """Raise when ``out=`` names a lazy value (NumPy would write the result into it)."""
    out = kwargs.get("out")
    for o in out if isinstance(out, tuple) else (out,):
        if isinstance(o, LazyArray):
            raise _immutable(
                f"{name}(..., out=...)",
                f"Drop out= and use the returned value (y = {name}(...)); an ndarray given as "
                "out= receives the result as in NumPy.",
            )


_AT_FIX = (
    "Build a new value instead: np.where(mask, new, x) for masked updates, or "
    "x + fusegrad.rules.indexing.scatter_add(values, index, x.shape) for np.add.at (repeated "
    "indices accumulate; it is differentiable), or materialise a copy first with np.array(x)."
)


def ufunc(self: LazyArray, uf: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``LazyArray.__array_ufunc__``: a fusable ufunc builds a ``Map`` (``reduce`` a reduction);
    anything else runs eagerly on materialised inputs. Lazy values are immutable: ``out=``
    naming one, or ``ufunc.at`` on one, raises ``TypeError``.

    >>> try:
    ...     np.add.at(asarray(np.zeros(3)), [0], 1.0)
    ... except TypeError as e:
    ...     print(str(e)[:61])
    lazy values are immutable: np.add.at(x, ...) would write into
    """
    if kwargs:
        _check_out(f"np.{uf.__name__}" + ("" if method == "__call__" else f".{method}"), kwargs)
    if method == "at" and isinstance(inputs[0], LazyArray):
        raise _immutable(f"np.{uf.__name__}.at(x, ...)", _AT_FIX)
    if method == "__call__" and not kwargs and uf.nout == 1:
        vals = small.values_if_small(inputs, uf)
        if vals is not None:
            return small.wrap(small.call_ufunc(uf, vals))
    if _foreign(inputs):
        return NotImplemented
    op = op_for(uf)
    if method == "__call__" and op is not None and not kwargs and len(inputs) == op.nin:
        args = tuple(_lazy_arg(x) for x in inputs)
        if all(a is not None for a in args):
            try:
                return make_map(op.name, args)
            except TypeError:
                pass  # no loop for these dtypes: let NumPy raise its own error below
    if method == "reduce" and uf in REDUCING_UFUNCS and len(inputs) == 1:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if not kwargs:
            return reductions.reduce(REDUCING_UFUNCS[uf], asarray(inputs[0]), axis, keepdims)
    return eager(getattr(uf, method), *inputs, **kwargs)


def _with_dtype(a: Any, dtype: Any) -> LazyArray:
    """``a`` as a lazy value, cast first when a reduction is asked for another ``dtype``."""
    x = asarray(a)
    return x if dtype is None else make_map("cast", (x,), np.dtype(dtype))


# The reductions below compute a small concrete value as NumPy does for an ndarray: np.sum is
# np.add.reduce after a Python wrapper, np.mean/var/std are NumPy's own (their float16 and
# integer handling included).


def _reduction(kind: str) -> Callable:
    def fn(
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        keepdims: bool = False,
        **kw: Any,
    ) -> Any:
        if out is not None or kw:
            return NotImplemented
        v = small.value_if_small(a)
        if v is not None:
            uf = reductions.REDUCE_UFUNC[kind]
            return small.wrap(uf.reduce(v, axis=axis, dtype=dtype, keepdims=keepdims))
        x = _with_dtype(a, dtype)
        r = reductions.reduce(kind, x, axis, keepdims)
        if dtype is not None and r.dtype != np.dtype(dtype):
            # NumPy accumulates in ``dtype`` (an int8 sum wraps): the same as summing wider and
            # casting, sums and products being exact modulo 2^bits.
            r = make_map("cast", (r,), np.dtype(dtype))
        return r

    return fn


def _extremum(kind: str) -> Callable:
    def fn(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Any:
        if out is not None or kw:
            return NotImplemented
        return reductions.reduce(kind, asarray(a), axis, keepdims)

    return fn


def _mean(
    a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, **kw: Any
) -> Any:
    if out is not None or kw:
        return NotImplemented
    v = small.value_if_small(a)
    if v is not None:
        return small.wrap(np.mean(v, axis=axis, dtype=dtype, keepdims=keepdims))
    x = _with_dtype(a, dtype)
    return reductions.mean(x, axis, keepdims)


def _var_std(which: Callable, numpy_fn: Callable) -> Callable:
    def fn(
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: int = 0,
        keepdims: bool = False,
        **kw: Any,
    ) -> Any:
        if out is not None or kw:
            return NotImplemented
        v = small.value_if_small(a)
        if v is not None:
            return small.wrap(numpy_fn(v, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))
        x = _with_dtype(a, dtype)
        return which(x, axis, ddof, keepdims)

    return fn


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        return NotImplemented
    vals = small.values_if_small((condition, x, y))
    if vals is not None:
        return small.wrap(np.where(*vals))
    args = tuple(_lazy_arg(v) for v in (condition, x, y))
    if any(a is None for a in args):
        return NotImplemented
    return make_map("where", args)


def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kw: Any) -> Any:
    if out is not None or kw:
        return NotImplemented
    vals = small.values_if_small((a, *(b for b in (a_min, a_max) if b is not None)))
    if vals is not None:
        lo = None if a_min is None else vals[1]
        hi = None if a_max is None else vals[-1]
        return small.wrap(np.clip(vals[0], lo, hi))
    x: Any = asarray(a)  # Any: NumPy's stubs do not see the __array_ufunc__ that _install attaches
    if a_min is not None:
        x = np.maximum(x, a_min)
    if a_max is not None:
        x = np.minimum(x, a_max)
    return x


def _reshape(
    a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None
) -> Any:
    shape = shape if shape is not None else newshape
    if order == "F":  # the C-order reshape of the reversed axes, reversed back: lazy too
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        flipped = movement.reshape(movement.transpose(asarray(a)), shape[::-1])
        return movement.transpose(flipped)
    if order != "C":
        return NotImplemented
    return movement.reshape(asarray(a), shape)


def _ravel(a: Any, order: str = "C") -> Any:
    if order == "F":
        return movement.reshape(movement.transpose(asarray(a)), (-1,))
    if order != "C":
        return NotImplemented
    return movement.reshape(asarray(a), (-1,))


def _like(fn: Callable) -> Callable:
    def like(
        a: Any,
        dtype: Any = None,
        order: str = "K",
        subok: bool = True,
        shape: Any = None,
        **kw: Any,
    ) -> Any:
        return fn(a.shape if shape is None else shape, dtype=dtype or a.dtype, **kw)

    return like


def _full_like(
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
) -> Any:
    return np.full(a.shape if shape is None else shape, fill_value, dtype=dtype or a.dtype)


def _real(a: Any) -> Any:
    a = asarray(a)
    return a if a.dtype.kind != "c" else make_map("real", (a,))


def _imag(a: Any) -> Any:
    a = asarray(a)
    if a.dtype.kind != "c":  # zeros, as a stride-0 view: lazy and O(1) in memory
        return asarray(np.broadcast_to(np.zeros((), a.dtype), a.shape))
    return make_map("imag", (a,))


FUNCTIONS: dict[Callable, Callable] = {
    np.real: _real,
    np.imag: _imag,
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.max: _extremum("max"),
    np.amax: _extremum("max"),
    np.min: _extremum("min"),
    np.amin: _extremum("min"),
    np.mean: _mean,
    np.var: _var_std(reductions.var, np.var),
    np.std: _var_std(reductions.std, np.std),
    np.where: _where,
    np.clip: _clip,
    np.transpose: lambda a, axes=None: movement.transpose(asarray(a), axes),
    np.swapaxes: lambda a, x, y: movement.swapaxes(asarray(a), x, y),
    np.moveaxis: lambda a, s, d: movement.moveaxis(asarray(a), s, d),
    np.expand_dims: lambda a, axis: movement.expand_dims(asarray(a), axis),
    np.squeeze: lambda a, axis=None: movement.squeeze(asarray(a), axis),
    np.broadcast_to: lambda a, shape, subok=False: movement.broadcast_to(asarray(a), shape),
    np.reshape: _reshape,
    np.ravel: _ravel,
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.iscomplexobj: lambda x: x.dtype.kind == "c",  # the type alone: nothing to compute
    np.isrealobj: lambda x: x.dtype.kind != "c",
    # the shape alone
    np.triu_indices_from: lambda a, k=0: np.triu_indices_from(np.broadcast_to(False, a.shape), k),
    np.tril_indices_from: lambda a, k=0: np.tril_indices_from(np.broadcast_to(False, a.shape), k),
    np.diag_indices_from: lambda a: np.diag_indices_from(np.broadcast_to(False, a.shape)),
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.zeros_like: _like(np.zeros),
    np.ones_like: _like(np.ones),
    np.empty_like: _like(np.empty),
    np.full_like: _full_like,
}


def array_function(self: LazyArray, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
    """``LazyArray.__array_function__``: the functions of ``FUNCTIONS`` stay lazy, others run
    eagerly; another library's array type (a tracer) present makes it defer."""
    for t in types:
        if not issubclass(t, _OWN_TYPES):
            return NotImplemented
    return _call(func, args, kwargs)


# (a jit recording's number arguments too: lazy functions take them as constants)
_OWN_TYPES = (LazyArray, np.ndarray, replay.Number)


# NumPy functions that write into their first argument.
_IN_PLACE = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}


def _call(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)`` with no foreign array among the arguments: by its lazy
    implementation in ``FUNCTIONS`` if it has one that accepts them, else eagerly."""
    if kwargs:
        _check_out(f"np.{func.__name__}", kwargs)
    if func in _IN_PLACE and args and isinstance(args[0], LazyArray):
        raise _immutable(f"np.{func.__name__}(x, ...)", _AT_FIX)
    impl = FUNCTIONS.get(func)
    if impl is not None:
        out = impl(*args, **kwargs)
        if out is not NotImplemented:
            return out
    return eager(func, *args, **kwargs)


def getitem(self: LazyArray, index: Any) -> Any:
    """``x[index]``: basic indexing stays lazy (a view of the leaves), advanced indexing runs
    on the materialised value."""
    if movement.is_basic_index(index):
        v = small.value_if_small(self)
        if v is not None:
            return small.wrap(v[index])
        return movement.getitem(self, index)
    return eager(operator.getitem, self, index)


def _read(convert: Callable, what: str) -> Callable:
    """A conversion method (``__float__``, ...) that names what it is in the reason a jit
    recording it ends gives."""

    def method(self: LazyArray) -> Any:
        with replay.reading(what):
            return convert(materialize(self))

    return method


def _scalar(v: np.ndarray) -> Any:
    """A 0-d value as the NumPy scalar indexing gives (what ``round``, ``math.trunc`` and
    format specs take); any other array as it is."""
    return v[()] if v.ndim == 0 else v


# NumPy dispatches a call to the types of some arguments only: ``a[index]`` and ``np.take(a,
# index)`` of a NumPy ``a`` convert a lazy ``index`` to an array, never asking fusegrad
_GATHER_FIX = "pass that array to the jitted function as an argument, so the gather is recorded"
_CONVERTED = (
    "a conversion to a NumPy array: np.asarray, or NumPy code on a plain NumPy array reading it "
    f"(indexing one with it, np.take(array, it): {_GATHER_FIX})"
)
_INDEXED = f"operator.index(): a size, or an index into a plain NumPy array ({_GATHER_FIX})"


def array(self: LazyArray, dtype: Any = None, copy: Any = None) -> np.ndarray:
    """``np.asarray(lazy)``: the materialised value (computed once, then kept), as a read-only
    view, as JAX gives it: the value is shared with every expression that reads it, so writing
    into it would change them. ``np.array(lazy)`` is a writable copy; a leaf gives its own array.

    >>> v = np.asarray(asarray(np.ones(500_000)) * 2)
    >>> v.flags.writeable, np.array(asarray(np.ones(3)) * 2).flags.writeable
    (False, True)
    """
    with replay.reading(_CONVERTED):
        out: np.ndarray = materialize(self)
    if dask_leaves.source(out) is not None:
        # np.asarray would make a plain view of it, read as data (zeros) by whatever follows:
        # fancy or boolean indexing, or any NumPy call on the converted value
        raise dask_leaves.refusal(
            "fancy or boolean indexing of a Dask input (x[[0, 3]], x[x > 0]), or np.asarray of "
            "one (what a NumPy computation on its values starts with)"
        )
    if dtype is not None and out.dtype != dtype:
        return out.astype(dtype)
    if copy:
        return np.array(out, copy=True)
    if out is not self.cached or not out.flags.writeable:
        return out
    view = out.view()
    view.flags.writeable = False
    return view


def astype(self: LazyArray, dtype: Any, copy: bool = True) -> LazyArray:
    """``x.astype(dtype)``, lazily (a cast op in the kernel)."""
    dtype = np.dtype(dtype)
    if dtype == self.dtype:
        return self
    v = small.value_if_small(self)
    if v is not None:
        return small.wrap(v.astype(dtype))
    return make_map("cast", (self,), dtype)


_FAST_POWERS = {2: np.square, 0.5: np.sqrt, -1: np.reciprocal, 1: np.positive}


def _power(self: Any, other: Any) -> Any:  # self: a LazyArray, typed Any as in _clip
    vals = small.values_if_small((self, other))
    if vals is not None:
        return small.wrap(vals[0] ** vals[1])  # ndarray.__pow__'s own choice of ufunc
    # As ndarray.__pow__: small constant exponents use the cheaper exact ufunc.
    # (Python numbers only: a NumPy float64 exponent promotes float32, as in NumPy 2)
    if type(other) in (int, float):
        fast = _FAST_POWERS.get(other)
        # (an int 2 squares every dtype, as in NumPy: a bool array's square is int8)
        if fast is not None and (self.dtype.kind == "f" or (other == 2 and type(other) is int)):
            return fast(self)
    return np.power(self, other)


ARITHMETIC = "add sub mul truediv floordiv mod matmul"
COMPARISONS = "lt le gt ge eq ne"
OPERATOR_UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "matmul": np.matmul,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}  # fmt: skip


def _apply(uf: np.ufunc, *args: Any) -> Any:
    """``uf(*args)`` for an operator: as ``uf``'s own dispatch would do it, but a small concrete
    call goes to NumPy at once (``x * 2`` on a leaf of 1000 elements costs ~0.3 us over NumPy's
    ~0.6 us, where the round trip through ``__array_ufunc__`` cost ~1.4 us)."""
    vals = small.values_if_small(args)
    if vals is not None:
        return small.wrap(uf(*vals))
    return uf(*args)


# &, |, ^: logical (fused) on booleans, bitwise on integers, as ndarray's operators are
_BITWISE = (
    ("and", np.logical_and, np.bitwise_and),
    ("or", np.logical_or, np.bitwise_or),
    ("xor", np.logical_xor, np.bitwise_xor),
)


def _bits(logical: np.ufunc, bitwise: np.ufunc, a: Any, b: Any) -> Any:
    both_bool = all(
        isinstance(v, bool | np.bool_) or getattr(getattr(v, "dtype", None), "kind", None) == "b"
        for v in (a, b)
    )
    return _apply(logical if both_bool else bitwise, a, b)


def forward_methods(cls: type, names: str) -> None:
    """Give ``cls`` the array methods ``names`` (space-separated) as calls of the NumPy
    functions of the same names, so ``x.sum(axis=0)`` dispatches like ``np.sum(x, axis=0)``."""
    for name in names.split():
        fn = getattr(np, name)
        setattr(cls, name, lambda self, *a, _fn=fn, **k: _fn(self, *a, **k))


def _lazy_operators(names: str, reflected: bool = True) -> None:
    """``forward_operators`` for ``LazyArray``, trying the small-array path first (``_apply``)."""
    for name in names.split():
        uf = OPERATOR_UFUNCS[name]
        setattr(LazyArray, f"__{name}__", lambda self, o, _u=uf: _apply(_u, self, o))
        if reflected:
            setattr(LazyArray, f"__r{name}__", lambda self, o, _u=uf: _apply(_u, o, self))


def _lazy_methods(names: str) -> None:
    """``forward_methods`` for ``LazyArray``: the method calls its ``FUNCTIONS`` entry without
    NumPy's dispatch, as only ``self`` can be an array among the arguments of these methods
    (``clip``'s bounds can be: it dispatches through ``np.clip``)."""
    for name in names.split():
        fn = getattr(np, name)
        setattr(LazyArray, name, lambda self, *a, _fn=fn, **k: _call(_fn, (self, *a), k))


def _install() -> None:
    """Attach the protocol methods and operators to ``LazyArray``."""
    cls: Any = LazyArray  # attributes set at run time, which a type checker cannot follow
    cls.__array_ufunc__ = ufunc
    cls.__array_function__ = array_function
    cls.__array__ = array
    cls.__getitem__ = getitem
    cls.astype = astype
    _lazy_operators(ARITHMETIC)  # matmul: not fusable, runs eagerly
    _lazy_operators(COMPARISONS, reflected=False)
    for name, logical, bitwise in _BITWISE:
        setattr(cls, f"__{name}__", lambda self, o, _l=logical, _b=bitwise: _bits(_l, _b, self, o))
        setattr(cls, f"__r{name}__", lambda self, o, _l=logical, _b=bitwise: _bits(_l, _b, o, self))
    for name, uf in (("lshift", np.left_shift), ("rshift", np.right_shift), ("divmod", np.divmod)):
        setattr(cls, f"__{name}__", lambda self, o, _u=uf: _apply(_u, self, o))
        setattr(cls, f"__r{name}__", lambda self, o, _u=uf: _apply(_u, o, self))
    cls.__pow__ = _power
    cls.__rpow__ = lambda self, other: _apply(np.power, other, self)
    cls.__hash__ = lambda self: id(self)
    cls.__neg__ = lambda self: _apply(np.negative, self)
    cls.__pos__ = lambda self: self
    cls.__abs__ = lambda self: _apply(np.absolute, self)
    cls.__invert__ = lambda self: (
        np.logical_not(self) if self.dtype == bool else eager(operator.invert, self)
    )
    cls.__float__ = _read(float, "float() of an array")
    cls.__int__ = _read(int, "int() of an array")
    cls.__bool__ = _read(bool, "bool() of an array: Python control flow (if, while) on it")
    cls.__complex__ = _read(complex, "complex() of an array")
    cls.__index__ = _read(operator.index, _INDEXED)
    cls.__trunc__ = _read(lambda v: math.trunc(_scalar(v)), "math.trunc() of an array")
    cls.__format__ = lambda self, spec: _read(
        lambda v: format(_scalar(v), spec), "format() of an array"
    )(self)
    # round(x) is a Python int (read); round(x, n) an array, as NumPy's, which stays lazy
    cls.__round__ = lambda self, ndigits=None: (
        _read(lambda v: round(_scalar(v)), "round() of an array")(self)
        if ndigits is None
        else np.round(self, ndigits)
    )
    cls.T = property(lambda self: movement.transpose(self))
    cls.mT = property(lambda self: movement.swapaxes(self, -1, -2))
    cls.real = property(_real)
    cls.imag = property(_imag)
    cls.conj = lambda self: np.conjugate(self)
    cls.conjugate = cls.conj
    _lazy_methods("sum prod max min mean var std swapaxes squeeze ravel trace")
    forward_methods(cls, "clip searchsorted argpartition diagonal take repeat")
    cls.compress = lambda self, condition, axis=None: np.compress(condition, self, axis)
    cls.transpose = _transpose
    cls.view = _view
    cls.flat = property(lambda self: np.ravel(self))  # (for reading: x.flat[i])
    cls.itemsize = property(lambda self: self.dtype.itemsize)
    cls.nbytes = property(lambda self: self.size * self.dtype.itemsize)
    for name in IN_PLACE_METHODS:
        setattr(cls, name, in_place_method(name, "and lazy arrays are immutable"))
    cls.reshape = lambda self, *shape, **k: _call(
        np.reshape, (self, shape[0] if len(shape) == 1 else shape), k
    )
    # Methods that run as their NumPy functions do (eagerly, as steps of a jit recording)
    forward_methods(cls, "any all argmax argmin argsort nonzero round cumsum cumprod dot copy")
    cls.flatten = lambda self, order="C": np.ravel(self, order)  # immutable: no copy needed
    # Methods whose result is a Python value: computed on the materialised value.
    for name in ("tolist", "item", "tobytes"):
        setattr(cls, name, lambda self, *a, _n=name, **k: getattr(materialize(self), _n)(*a, **k))
    cls.__iter__ = lambda self: (self[i] for i in range(len(self)))
    cls.__setitem__ = _no_setitem
    for name in (*ARITHMETIC.split(), "pow"):
        setattr(cls, f"__i{name}__", _in_place_operator(getattr(cls, f"__{name}__"), name))


def _in_place_operator(binary: Callable, name: str) -> Callable:
    """``x op= y``: a new value bound to ``x`` (lazy values are immutable), except on an
    argument of a function ``jit`` records, which NumPy would change in place for the caller to
    see (``w -= lr * g`` in a training step): that raises ``LazyWriteError``."""

    def method(self: LazyArray, other: Any) -> Any:
        rec = replay.active()
        if rec is not None and rec.is_input(self):
            raise LazyWriteError(
                f"an in-place {name} (x {name}= ...) would change the function's argument x, "
                "which jit's recording cannot do; return the new value instead (x = x - ...)"
            )
        return binary(self, other)

    return method


# ndarray methods that write into the array, and what to write instead (lazy and traced arrays)
IN_PLACE_METHODS = {
    "sort": "x = np.sort(x)",
    "partition": "x = np.partition(x, kth)",
    "fill": "x = np.full_like(x, value)",
    "put": "np.where / np.concatenate of the pieces",
    "resize": "x = np.resize(x, shape)",
    "itemset": "np.where(mask, v, x)",
}


def in_place_method(name: str, why: str) -> Callable:
    """The ndarray method ``name`` (of ``IN_PLACE_METHODS``) for an immutable array type: it
    raises, saying ``why`` it cannot and what to write instead."""

    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        raise LazyWriteError(
            f"x.{name}() changes x in place, {why}: write {IN_PLACE_METHODS[name]} instead"
        )

    return method


def transpose_axes(axes: tuple) -> Any:
    """``x.transpose(*axes)``'s axes for ``np.transpose``: ndarray.transpose takes them as one
    sequence, as separate ints, or none.

    >>> transpose_axes((1, 0)), transpose_axes(((1, 0),)), transpose_axes(())
    ((1, 0), (1, 0), None)
    """
    given: Any = axes
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], tuple | list)):
        given = axes[0]
    return tuple(given) if given else None


def _transpose(self: LazyArray, *axes: Any) -> Any:
    return _call(np.transpose, (self, transpose_axes(axes)), {})


def _view(self: LazyArray, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs:
        return materialize(self).view(*args, **kwargs)  # a reinterpretation: of the value
    return self  # immutable: a view is the same value


def _no_setitem(self: LazyArray, index: Any, value: Any) -> None:
    raise LazyWriteError(
        "lazy arrays are immutable: build a new value instead of assigning into one "
        "(np.where(mask, new, x) for masked updates), or materialise it first with np.asarray"
    )


_install()

__all__ = ["FUNCTIONS", "Map", "Reduce", "eager"]

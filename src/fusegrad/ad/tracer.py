"""How a ``Tracer`` speaks NumPy: every ufunc and array function becomes ``apply(f, ...)``.

User code keeps ``import numpy as np``. Escapes are errors that name the fix: converting a traced
value to a NumPy array or a Python number, ``np.array([...])`` of traced values, assigning into a
traced array.

Example::

    >>> from .core import Trace
    >>> x = Trace().input(np.ones(2))
    >>> type(np.tanh(x) * 2).__name__
    'Tracer'
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from ..lazy import replay
from ..lazy.protocols import (
    ARITHMETIC,
    COMPARISONS,
    IN_PLACE_METHODS,
    OPERATOR_UFUNCS,
    forward_methods,
    in_place_method,
    transpose_axes,
)
from ..rules.common import primal_tree
from ..rules.elementwise import astype
from ..rules.masked_reductions import OPTIONS as REDUCTION_OPTIONS
from ..rules.registry import is_static
from ..rules.tables import (
    COMPOSITES,
    NONDIFF,
    STRUCTURAL,
    UFUNC_ACCUMULATE,
    UFUNC_REDUCE,
    UFUNC_REDUCE_COMPOSITES,
    UFUNC_REDUCEAT,
)
from ..scipy._dispatch import scipy_hint  # names the SciPy function, if one is on the stack
from .conversions import holds_tracer, stacked
from .core import Tracer, apply
from .pytree import PLAIN_LEAVES


def _primal(x: Any) -> Any:
    while isinstance(x, Tracer):
        x = x.value
    return x


def _has_out(kwargs: dict) -> bool:
    out = kwargs.get("out")
    if isinstance(out, tuple):
        return any(o is not None for o in out)
    return out is not None


def _array_ufunc(self: Tracer, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    if not kwargs and method == "__call__" and _only_trace_of(self, inputs):
        return self._trace.apply(ufunc, inputs, kwargs)  # (the common call, without the search)
    if kwargs and _has_out(kwargs):
        raise TypeError(
            f"np.{ufunc.__name__}(..., out=...) writes into an array in place, which fusegrad "
            "cannot differentiate: drop out= and use the returned value; for an in-place "
            "operator on a plain NumPy array (acc += x with a traced x) write acc = acc + x. "
            "(Inside a NumPy "
            "function, this is one that dispatches on its array argument only, given a plain "
            "array beside a traced parameter, e.g. np.linalg.norm(x, ord) with a traced ord: "
            "pass the array traced too, x + 0 * ord.)"
        )
    kwargs.pop("out", None)
    inputs = _array_likes(inputs)
    if method == "__call__":
        if ufunc.signature is not None and kwargs.keys() & _CORE_AXES_KEYWORDS:
            return _core_axes_last(ufunc, inputs, kwargs)
        return apply(ufunc, inputs, kwargs)
    if method == "reduce" and ufunc in UFUNC_REDUCE:
        kwargs.setdefault("axis", 0)
        reduction = UFUNC_REDUCE[ufunc]
        options = REDUCTION_OPTIONS.get(reduction)  # where=, initial=: as np.sum's
        out = options(*inputs, **kwargs) if options is not None else None
        return out if out is not None else apply(reduction, inputs, kwargs)
    if method == "reduce" and ufunc in UFUNC_REDUCE_COMPOSITES:
        return UFUNC_REDUCE_COMPOSITES[ufunc](*inputs, **kwargs)
    if method == "reduceat" and ufunc in UFUNC_REDUCEAT:
        return UFUNC_REDUCEAT[ufunc](*inputs, **kwargs)
    if method == "accumulate" and ufunc in UFUNC_ACCUMULATE:
        kwargs.setdefault("axis", 0)
        return apply(UFUNC_ACCUMULATE[ufunc], inputs, kwargs)
    if method == "outer" and len(inputs) == 2:
        a, b = inputs
        nb = np.ndim(_primal(b))
        return apply(ufunc, (np.reshape(a, np.shape(_primal(a)) + (1,) * nb), b), kwargs)
    if method == "at":
        raise TypeError(
            f"np.{ufunc.__name__}.at(a, indices, b) writes into a in place, which fusegrad cannot "
            "differentiate. Build the result instead: for np.add.at of a 1-d a, "
            "a + np.bincount(indices, weights=b, minlength=a.size) (differentiable in b); in "
            "general a gather's transpose: a + onehot.T @ b with onehot = (indices[:, None] == "
            "np.arange(len(a)))"
        )
    raise TypeError(
        f"np.{ufunc.__name__}.{method} on a traced value is not differentiable by fusegrad; "
        f"write it with np.{ufunc.__name__}(...) calls or register a rule for a function doing it"
    )


_CORE_AXES_KEYWORDS = frozenset(("axes", "axis", "keepdims"))


def _core_axes_last(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Any:
    """A gufunc call with ``axes=``/``axis=``/``keepdims=`` (``np.matmul(a, b, axes=...)``,
    ``np.vecdot(a, b, axis=0)``) as the same call on operands whose core axes are moved last,
    then the result's core axes moved where ``axes`` puts them: the rules of matmul, vecdot, ...
    take their core axes last, as the call without the keywords has them."""
    axes, axis = kwargs.pop("axes", None), kwargs.pop("axis", None)
    keepdims = bool(kwargs.pop("keepdims", False))
    if axes is None and axis is None and not keepdims:  # (keepdims=False alone: NumPy's default)
        return apply(ufunc, inputs, kwargs)
    out = str(ufunc.signature).split("->")[1]  # matmul: "(n?,k),(k,m?)->(n?,m?)"
    n_out_core = len([d for d in out.strip("()").split(",") if d])
    if axes is None:
        # axis: every operand with one core dimension works on it; keepdims keeps the output's
        at = -1 if axis is None else axis
        axes = [(at,)] * ufunc.nin + [(at,) if keepdims else ()]
    moved = []
    for x, a in zip(inputs, axes):
        core = (a,) if isinstance(a, int) else tuple(a)
        moved.append(np.moveaxis(x, core, tuple(range(-len(core), 0))) if core else x)
    y = apply(ufunc, tuple(moved), kwargs)
    target = axes[ufunc.nin] if len(axes) > ufunc.nin else ()
    target = (target,) if isinstance(target, int) else tuple(target)
    if keepdims and n_out_core == 0:  # the reduced core axis kept as size 1
        return np.expand_dims(y, target[0] if target else -1)
    if target:
        return np.moveaxis(y, tuple(range(-len(target), 0)), target)
    return y


def _array_likes(inputs: tuple) -> tuple:
    """A ufunc's operands with each list or tuple holding traced values as one traced array
    (``stacked``), as NumPy converts a list operand: kept a list, its entries were a container
    argument, whose forward tangent mixed arrays and zeros (``x + [x[1], 3.0]``: a wrong jvp)."""
    if not any(type(x) in (list, tuple) for x in inputs):
        return inputs
    return tuple(stacked(x) if type(x) in (list, tuple) and holds_tracer(x) else x for x in inputs)


def _only_trace_of(self: Tracer, inputs: tuple) -> bool:
    """Whether every input is a number, a NumPy array or a value of ``self``'s trace."""
    for x in inputs:
        if type(x) not in PLAIN_LEAVES and (type(x) is not Tracer or x._trace is not self._trace):
            return False
    return True


# Where NumPy functions take ``out`` positionally (np.take(a, idx, axis, out)): the index.
_POSITIONAL_OUT = {
    np.take: 3, np.cumsum: 3, np.cumprod: 3, np.nancumsum: 3, np.nancumprod: 3, np.dot: 2,
    np.clip: 3, np.choose: 2, np.compress: 3, np.concatenate: 2, np.stack: 2, np.sum: 3,
    np.prod: 3, np.mean: 3, np.max: 2, np.min: 2, np.round: 2, np.around: 2, np.median: 2,
    np.outer: 2, np.trace: 5,
}  # fmt: skip


def _writes_out(func: Any, args: tuple, kwargs: dict) -> bool:
    if kwargs.get("out") is not None:
        return True
    at = _POSITIONAL_OUT.get(func)
    return at is not None and len(args) > at and args[at] is not None


# Functions joining a sequence of array-likes (its entries may be lists of traced values)
_JOINS = {
    np.concatenate,
    np.stack,
    np.hstack,
    np.vstack,
    np.dstack,
    np.column_stack,
    np.row_stack,
}
# Functions with a list argument that is a sequence of arrays, not one array-like
_SEQUENCES = {np.block, np.piecewise, np.lexsort, np.linalg.multi_dot, np.histogramdd}


def _array_function(self: Tracer, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    structural = STRUCTURAL.get(func)
    if structural is not None:
        return structural(*args, **kwargs)
    if func in NONDIFF:
        args = tuple(primal_tree(a) for a in args)
        return func(*args, **{k: primal_tree(v) for k, v in kwargs.items()})
    if (kwargs or len(args) > 2) and _writes_out(func, args, kwargs):
        # a traced value written into a plain array: the array would hold the value and lose
        # the derivative (and forward mode wrote the tangent over the value)
        raise TypeError(
            f"np.{func.__name__}(..., out=...) writes into an array in place, which fusegrad "
            "cannot differentiate: drop out= and use the returned value"
        )
    if func in _JOINS:
        if args and type(args[0]) in (list, tuple):
            # each array-like of the sequence holding traced values as one traced array: kept
            # a list, a rule read its shape (np.asarray of a tracer) and forward mode mixed
            # zeros in
            args = (type(args[0])(_array_likes(tuple(args[0]))), *args[1:])
    elif func is np.select or func is np.choose:  # (their choices: array-likes, as a join's)
        if len(args) > 1 and type(args[1]) in (list, tuple):
            args = (args[0], type(args[1])(_array_likes(tuple(args[1]))), *args[2:])
    elif func not in _SEQUENCES:  # (an array-like argument: a list of traced values stacked)
        args = _array_likes(args)
    composite = COMPOSITES.get(func)
    if composite is not None:
        return composite(*args, **kwargs)
    if not kwargs and len(args) == 1 and args[0] is self:  # np.sum(x): x's trace, no search
        return self._trace.apply(func, args, kwargs)
    options = REDUCTION_OPTIONS.get(func)
    if options is not None:  # np.sum(x, where=m, initial=c): a composite; else the rule
        out = options(*args, **kwargs)
        if out is not None:
            return out
    return apply(func, args, kwargs)


def _no_array(self: Tracer, dtype: Any = None, copy: Any = None) -> Any:
    frame = sys._getframe(1)
    raise TypeError(
        "a traced value was converted to a NumPy array (np.asarray, np.array or a function "
        "without a rule that calls it), so its gradient would be lost. Keep it in NumPy "
        "operations; to build an array from traced values use fusegrad.numpy.array([...]) or "
        "np.stack([...]); to use it as a constant, wrap it with fusegrad.numpy.stop_gradient(x)."
        + (scipy_hint(frame) or numpy_hint(frame))
    )


# NumPy functions written in Python that convert their inputs, and what to write instead
_NUMPY_INSTEAD = {
    "vectorize": "np.vectorize loops in Python over plain elements: write the function with "
    "array operations (np.where for its branches)",
    "fromiter": "build the array with fusegrad.numpy.array([...]) or np.stack([...])",
    "ndenumerate": "iterate with for i in range(len(x)) and x[i]",
}


def numpy_hint(frame: Any) -> str:
    """Text naming the NumPy function written in Python on the stack above ``frame`` that
    converted a traced value (``np.vectorize``, ``np.fromiter``...), or ``""``."""
    f = frame
    while f is not None:
        module = f.f_globals.get("__name__", "")
        if module == "numpy" or module.startswith("numpy."):
            qualname = getattr(f.f_code, "co_qualname", f.f_code.co_name)
            owner = qualname.split(".")[0]
            instead = _NUMPY_INSTEAD.get(owner)
            return f" It happened inside NumPy's {owner} ({module}.{qualname})" + (
                f": {instead}." if instead else ", which converts its inputs to plain arrays."
            )
        f = f.f_back
    return ""


def _no_layout(name: str) -> property:
    def missing(self: Tracer) -> Any:
        # An AttributeError, so hasattr() stays False as before; the message says why.
        raise AttributeError(
            f"a traced value has no .{name}: it is not an ndarray in memory but a value being "
            "differentiated, so code that reads its buffer cannot run on it. Use NumPy "
            "operations on it." + scipy_hint(sys._getframe(1))
        )

    return property(missing)


def _no_scalar(kind: str):
    def convert(self: Tracer) -> Any:
        raise TypeError(
            f"{kind}() of a traced value cuts its gradient: the derivative cannot flow through a "
            "Python number. Keep it as an array (np.* operations), or wrap it with "
            "fusegrad.numpy.stop_gradient(x) if it is meant as a constant"
        )

    return convert


def _bool(self: Tracer) -> bool:
    # Control flow on a value: allowed, it does not need a derivative (jit then calls the
    # function every time: its recording would replay this branch whatever the values).
    with replay.reading("bool() of a traced value: Python control flow (if, while) on an array"):
        return bool(np.asarray(_primal(self)))


def _getitem(self: Tracer, index: Any) -> Any:
    # an int, a slice or a tuple of them (and None, Ellipsis) holds no traced value: self's
    # trace is the innermost, without the dispatcher's search through the index
    if is_static(index):
        return self._trace.apply(operator.getitem, (self, index), {})
    return apply(operator.getitem, (self, index), {})


def _no_setitem(self: Tracer, index: Any, value: Any) -> None:
    raise TypeError(
        "in-place assignment into a traced array (x[i] = v) cannot be differentiated. Build a "
        "new array instead: np.where(mask, v, x) for masks, np.concatenate/np.stack of the "
        "pieces, or fusegrad.numpy.array([...]) of the elements"
    )


def _no_part_setter(part: str) -> Any:
    rebuilt = "v + 1j * np.imag(x)" if part == "real" else "np.real(x) + 1j * v"

    def refuse(self: Tracer, value: Any) -> None:
        raise TypeError(
            f"in-place assignment to x.{part} of a traced array cannot be differentiated. Build "
            f"a new array instead: x = {rebuilt}"
        )

    return refuse


def _view(self: Tracer, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs:
        raise TypeError(
            "x.view(dtype) reinterprets x's bytes, which has no derivative: use x.astype(dtype) "
            "to convert its values"
        )
    return self  # values are immutable here: a view is the same value


def _power(self: Any, other: Any) -> Any:
    # As ndarray.__pow__: small constant exponents use the cheaper exact ufunc.
    # (Python numbers only: a NumPy float64 exponent promotes float32, as in NumPy 2)
    if type(other) in (int, float):
        fast = {2: np.square, 0.5: np.sqrt, 1: np.positive}.get(other)
        if fast is not None:
            return _weak(fast(self), self, other)
    return _weak(np.power(self, other), self, other)


_WEAK = (int, float, complex)


def _weak(out: Any, a: Any, b: Any = 0) -> Any:
    """``out`` of a Python operator on ``a`` and ``b``: where both are Python numbers or values
    traced from one (a differentiated Python float), its value a Python number again, as
    Python's own ``s ** 2`` is (the ufunc gave a NumPy float64, which made ``x * s ** 2`` of
    float32 ``x`` float64; JAX keeps such values weakly typed too)."""
    if (
        isinstance(out, Tracer)
        and type(out.value) in (np.float64, np.complex128)
        and (type(a) in _WEAK or (isinstance(a, Tracer) and type(a.value) in _WEAK))
        and (type(b) in _WEAK or (isinstance(b, Tracer) and type(b.value) in _WEAK))
    ):
        out.value = out.value.item()
    return out


def _binary(uf: np.ufunc) -> Any:
    def op(self: Tracer, o: Any) -> Any:
        # a number, an array or a value of self's trace: self's trace is the innermost
        if type(o) in PLAIN_LEAVES or (type(o) is Tracer and o._trace is self._trace):
            out = self._trace.apply(uf, (self, o), {})
            # (arrays, the hot case, skip the weak-number test: one type check)
            return _weak(out, self, o) if type(self.value) in _WEAK else out
        if _opts_out(o) or isinstance(o, str):
            # (a string: Python's answer, as a NumPy number's: ``ord == "fro"`` is False)
            return NotImplemented
        return apply(uf, _array_likes((self, o)), {})

    return op


def _reflected(uf: np.ufunc) -> Any:
    def op(self: Tracer, o: Any) -> Any:
        if type(o) in PLAIN_LEAVES or (type(o) is Tracer and o._trace is self._trace):
            out = self._trace.apply(uf, (o, self), {})
            return _weak(out, o, self) if type(self.value) in _WEAK else out
        if _opts_out(o):
            return NotImplemented
        return apply(uf, _array_likes((o, self)), {})

    return op


def _opts_out(o: Any) -> bool:
    """Whether ``o``'s class sets ``__array_ufunc__ = None``: NumPy's sign that its own operators
    are to run (``x + Polynomial(c)`` is ``Polynomial.__radd__``), which ndarray's honour too."""
    return getattr(type(o), "__array_ufunc__", False) is None


def _operators(cls: Any, names: str, reflected: bool = True) -> None:
    """The operators ``names`` as calls of their ufuncs' rules, straight to the trace (the
    dispatcher's answer when the other operand is a plain number or array; the dispatcher
    otherwise): ``np.add(x, o)`` would reach ``Tracer.__array_ufunc__`` and then the same call."""
    for name in names.split():
        uf = OPERATOR_UFUNCS[name]
        setattr(cls, f"__{name}__", _binary(uf))
        if reflected:
            setattr(cls, f"__r{name}__", _reflected(uf))


def _no_pickle(self: Tracer, protocol: Any) -> Any:
    raise TypeError(
        "a traced value cannot be pickled inside a differentiated or jitted function (its "
        "unpickled copy would be a constant, with no derivative): keep the value itself, or "
        "pickle the function's result"
    )


def _install() -> None:
    # Typed as Any: these attributes are set on the class at import (core.Tracer is defined
    # without them), which a static checker cannot follow.
    cls: Any = Tracer
    cls.__array_ufunc__ = _array_ufunc
    cls.__array_function__ = _array_function
    cls.__array__ = _no_array
    cls.__float__ = _no_scalar("float")
    cls.__int__ = _no_scalar("int")
    cls.__complex__ = _no_scalar("complex")
    cls.__index__ = _no_scalar("operator.index")
    cls.__bool__ = _bool
    cls.item = _no_scalar("item")
    cls.tolist = _no_scalar("tolist")
    cls.copy = lambda self, order="K": self  # tracers are immutable: a copy is the same value
    # (copy.deepcopy copied the tracer's tape node too: the copy fell out of the trace, a zero
    # gradient; a defensive deep copy of a parameter dict zeroed every gradient)
    cls.__copy__ = lambda self: self
    cls.__deepcopy__ = lambda self, memo: self
    cls.__reduce_ex__ = _no_pickle
    cls.__setitem__ = _no_setitem
    cls.__hash__ = lambda self: id(self)
    _operators(cls, ARITHMETIC)
    _operators(cls, COMPARISONS, reflected=False)
    cls.__pow__ = _power
    cls.__rpow__ = lambda self, o: _weak(np.power(o, self), o, self)
    cls.__neg__ = lambda self: _weak(np.negative(self), self)
    cls.__pos__ = lambda self: self
    cls.__abs__ = lambda self: np.absolute(self)
    cls.__round__ = lambda self, ndigits=None: np.round(self, ndigits or 0)  # an array, as NumPy's
    cls.__divmod__ = lambda self, o: (np.floor_divide(self, o), np.remainder(self, o))
    cls.__rdivmod__ = lambda self, o: (np.floor_divide(o, self), np.remainder(o, self))
    cls.__getitem__ = _getitem
    cls.__len__ = lambda self: len(_primal(self))
    cls.__iter__ = lambda self: (self[i] for i in range(len(self)))
    cls.__repr__ = lambda self: f"Tracer({_primal(self)!r}, level={self._trace.level})"
    cls.shape = property(lambda self: np.shape(_primal(self)))
    cls.dtype = property(lambda self: _dtype(_primal(self)))
    cls.ndim = property(lambda self: np.ndim(_primal(self)))
    cls.size = property(lambda self: int(np.size(_primal(self))))
    cls.T = property(lambda self: np.transpose(self))
    cls.mT = property(lambda self: np.swapaxes(self, -1, -2))
    cls.real = property(lambda self: np.real(self), _no_part_setter("real"))
    cls.imag = property(lambda self: np.imag(self), _no_part_setter("imag"))
    cls.conj = lambda self: np.conjugate(self)
    cls.conjugate = cls.conj
    cls.dot = lambda self, other: np.dot(self, other)
    cls.astype = lambda self, dtype, **k: _astype(self, dtype)
    forward_methods(
        cls,
        "sum prod max min mean var std clip swapaxes squeeze ravel cumsum cumprod repeat"
        " diagonal take argmax argmin argsort nonzero any all round trace searchsorted"
        " argpartition",
    )
    cls.transpose = lambda self, *axes: np.transpose(self, transpose_axes(axes))
    cls.compress = lambda self, condition, axis=None: np.compress(condition, self, axis)
    cls.flatten = lambda self, order="C": np.ravel(self, order)  # values are immutable here
    cls.flat = property(lambda self: np.ravel(self))  # (for reading: x.flat[i])
    cls.view = _view
    cls.itemsize = property(lambda self: self.dtype.itemsize)
    cls.device = property(lambda self: "cpu")  # the array API's attribute (SciPy reads it)
    for name in ("flags", "strides", "ctypes", "data"):
        setattr(cls, name, _no_layout(name))
    cls.nbytes = property(lambda self: self.size * self.itemsize)
    for name in IN_PLACE_METHODS:
        why = "which a traced array cannot (its old value is part of the gradient)"
        setattr(cls, name, in_place_method(name, why))
    cls.reshape = lambda self, *shape, **k: np.reshape(
        self, shape[0] if len(shape) == 1 else shape, **k
    )


def _dtype(v: Any) -> np.dtype:
    dt = getattr(v, "dtype", None)
    if dt is not None:
        return np.dtype(dt)
    if isinstance(v, float):
        return np.dtype(np.float64)
    if isinstance(v, complex):
        return np.dtype(np.complex128)
    return np.result_type(v)


def _astype(self: Tracer, dtype: Any) -> Any:
    return apply(astype, (self, np.dtype(dtype)), {})


_install()

"""Forward mode: ``JVPTracer(primal, tangent, trace)`` and the ``frule`` dispatch.

A ``JVPTracer`` carries a primal and its tangent through one forward trace. Every NumPy call on
it comes (its own ``__array_ufunc__``/``__array_function__``) to ``apply(f, args, kwargs)``, the
one dispatcher of both modes (``rules.registry.dispatch``):

- the arguments of the highest trace level present are processed first, forward and reverse
  traces alike (levels come from the same counter, ``core._levels``): the call goes to that
  trace's ``apply``: ``core.record`` for a reverse trace; for a forward trace (``JVPTrace.apply``)
  the primals and tangents of that level are unboxed and ``frule(tangents, f, *primals)`` runs;
- zero tangents short-circuit: a call whose tangents are all zero runs ``f`` on the primals;
- a function without a forward rule raises ``NoForwardRuleError`` naming it and
  ``register_frule``.

Forward rules sit beside the reverse rules in ``rules/``; those of elementwise work are lazy:
the tangent is a lazy expression over the same nodes as the primal, so the value and the tangent
of a reduction are computed by one fused kernel.

``JVPTracer`` subclasses the reverse ``Tracer``: it inherits NumPy's protocols, the operators,
properties and error messages of ``tracer.py``, which hand every call to the one dispatcher, and
the dispatcher sends it here when its innermost trace is a forward one.

Example::

    >>> out, tangent = jvp(np.sin, (np.zeros(2),), (np.ones(2),))
    >>> tangent
    array([1., 1.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..lazy import LazyArray, materialize_many, replay
from ..lazy.nodes import interning_scope
from ..rules.common import zeros_for
from ..rules.lazy_values import operand
from ..rules.registry import FRULES, OPTED_OUT, is_differentiable
from ..tangents import AbstractZero, NoTangent, ZeroTangent, unthunk
from ..tangents.thunks import AbstractThunk
from . import core
from . import tracer as _tracer
from .core import (
    NoRuleError,
    Tracer,
    _concrete,
    _leaked,
    _levels,
    _name,
    _unbox,
    check_array_type,
    check_operand,
)
from .error_notes import annotated_errors
from .pytree import flatten, same_structure


class NoForwardRuleError(NoRuleError):
    """A NumPy function was called on a forward-traced value and has no forward rule."""


class JVPTrace:
    """One forward differentiation: a level above every trace alive when it starts. ``done``
    once its function has returned: a tracer of it met later has leaked."""

    __slots__ = ("level", "done")

    def __init__(self) -> None:
        self.level = next(_levels)
        self.done = False

    def input(self, primal: Any, tangent: Any) -> JVPTracer:
        """Box an input of this trace with its tangent."""
        return JVPTracer(primal, tangent, self)

    def apply(self, f: Any, args: tuple, kwargs: dict) -> Any:
        """Push the tangents of this trace (the innermost of the call) through ``f``."""
        return _forward(f, args, kwargs, self)


class JVPTracer(Tracer):
    """A primal (``.value``) and its tangent (``.tangent``) in one forward trace."""

    __slots__ = ("tangent",)

    def __init__(self, primal: Any, tangent: Any, trace: JVPTrace) -> None:
        Tracer.__init__(self, primal, trace, None, None)
        self.tangent = tangent

    @property
    def primal(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"JVPTracer({self.value!r}, tangent={self.tangent!r}, level={self._trace.level})"


# --------------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------------


def _top(xs: Any, best: tuple) -> tuple:
    for x in xs:
        if isinstance(x, Tracer):
            if x._trace.level > best[0]:
                best = (x._trace.level, x._trace)
        elif isinstance(x, list | tuple):
            best = _top(x, best)
    return best


# The one dispatcher (``rules.registry.dispatch``): the innermost trace's ``apply``, forward or
# reverse.
apply = core.apply


_MISRECORDED = (
    "a forward-traced value was recorded as a reverse-mode primitive (a checkpoint or a custom "
    "rule called through fusegrad.ad.core.apply directly), which loses its tangent; call it "
    "through fusegrad.rules.registry.primitive so that forward mode sees it"
)


def _tangent_of(x: Any, level: int) -> Any:
    if isinstance(x, Tracer):
        if x._trace.level == level:
            if not isinstance(x, JVPTracer):
                raise TypeError(_MISRECORDED)
            return x.tangent
        return ZeroTangent() if is_differentiable(x) else NoTangent()
    if isinstance(x, list | tuple):  # (a namedtuple's tangent: the same namedtuple)
        ts = [_tangent_of(v, level) for v in x]
        if all(isinstance(t, AbstractZero) for t in ts):
            return ZeroTangent()
        if type(x) in (list, tuple):
            # an array-like of traced values and numbers (np.where(c, [x[1], 0.0], x)): the
            # numbers' tangents as zeros, so that the tangents form an array too (a
            # ZeroTangent in it made an object array, a wrong jvp)
            ts = [zeros_for(v) if _is_number(v) and isinstance(t, AbstractZero) else t
                  for v, t in zip(x, ts)]  # fmt: skip
        return type(x)(*ts) if hasattr(type(x), "_fields") else ts
    if isinstance(x, dict):
        td = {k: _tangent_of(v, level) for k, v in x.items()}
        if all(isinstance(t, AbstractZero) for t in td.values()):
            return ZeroTangent()
        return td
    return ZeroTangent() if is_differentiable(x) else NoTangent()


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | complex | np.number) and not isinstance(v, bool)


def _all_zero(ts: Any) -> bool:
    return all(isinstance(t, AbstractZero) for t in ts)


def _find_rule(f: Any) -> Callable | None:
    if f in OPTED_OUT:
        return None
    return FRULES.get(f)


def _forward(f: Any, args: tuple, kwargs: dict, trace: JVPTrace) -> Any:
    if trace.done:  # the innermost trace of the call has returned: its tracer leaked
        raise _leaked(f)
    level = trace.level
    if kwargs and any(_top((v,), (0, None))[0] == level for v in kwargs.values()):
        moved = core.keywords_positional(
            f, args, kwargs, lambda u: _top((u,), (0, None))[0] == level, "forward-traced"
        )
        return _forward(f, *moved, trace)
    body = getattr(f, "__fusegrad_body__", None)
    if body is not None and f in OPTED_OUT:  # an opted-out primitive: trace its body
        return body(*args, **kwargs)
    primals = tuple(_unbox(a, level) for a in args)
    tangents = tuple(_tangent_of(a, level) for a in args)
    if _all_zero(tangents):
        return f(*primals, **kwargs)
    thunks = False
    for p in primals:
        if type(p) is not np.ndarray and isinstance(p, np.ndarray):
            check_operand(p, f)  # a masked array or a matrix: refused, as in reverse mode
        thunks = thunks or isinstance(p, AbstractThunk)
    if thunks:
        # a reverse pass's cotangent under hvp (forward over reverse): a thunk, as a lazy value
        primals = tuple(operand(p) if isinstance(p, AbstractThunk) else p for p in primals)
    rule = _find_rule(f)
    if rule is None:
        raise NoForwardRuleError(
            f"fusegrad has no forward rule for {_name(f)}, called on a forward-traced value "
            f"(jvp, hvp). Register one:\n\n    @fusegrad.register_frule({_name(f)})\n"
            "    def _(tangents, *args):\n        y = ...\n"
            "        dy = ...  # J(args) · tangents\n        return y, dy\n\n"
            "or write the function with operations that have rules."
        )
    if not getattr(rule, "lazy", False):
        primals, tangents = _concrete_together(primals, tangents)
    res = rule(tangents, *primals, **kwargs)
    if res is None:
        raise NoForwardRuleError(
            f"the forward rule of {_name(f)} does not handle these arguments (see its docstring)"
        )
    y, ydot = res
    return _box(y, ydot, trace)


def _lazy_values(x: Any, out: list) -> None:
    if isinstance(x, LazyArray):
        out.append(x)
    elif isinstance(x, list | tuple):
        for v in x:
            _lazy_values(v, out)


def _concrete_together(primals: tuple, tangents: tuple) -> tuple:
    """Materialise lazy primals and tangents for a rule that needs arrays, in one planning step
    (a value and its tangent over the same domain share one kernel)."""
    tangents = tuple(unthunk(t) if not isinstance(t, list) else t for t in tangents)
    todo: list = []
    _lazy_values(primals, todo)
    _lazy_values(tangents, todo)
    if todo:
        materialize_many(todo)  # caches every value on its node
    return tuple(_concrete(p) for p in primals), tuple(_concrete(t) for t in tangents)


def _box(y: Any, ydot: Any, trace: JVPTrace) -> Any:
    if isinstance(y, tuple | list):
        dots = ydot if isinstance(ydot, tuple | list) else [ZeroTangent()] * len(y)
        boxed = [_box(v, d, trace) for v, d in zip(y, dots, strict=True)]
        return type(y)(*boxed) if hasattr(type(y), "_fields") else type(y)(boxed)
    if isinstance(y, dict):  # a dict output: its tangent a dict of the same keys (or a zero)
        zero = ZeroTangent()
        return type(y)(
            (k, _box(v, ydot.get(k, zero) if isinstance(ydot, dict) else zero, trace))
            for k, v in y.items()
        )
    if ydot is None or isinstance(ydot, AbstractZero):
        return y
    if isinstance(y, Tracer) or is_differentiable(y):
        return JVPTracer(y, ydot, trace)
    return y


# NumPy's protocols, operators and methods are Tracer's (tracer.py): they call the one dispatcher,
# which sends a call whose innermost trace is a JVPTrace here.


# --------------------------------------------------------------------------------------------------
# jvp
# --------------------------------------------------------------------------------------------------


def _as_tangent(t: Any, primal: Any) -> Any:
    """A user's tangent leaf, checked against its primal's shape; None for a zero tangent."""
    t = unthunk(t)
    if isinstance(t, AbstractZero) or t is None:
        return None
    pshape, tshape = np.shape(_tracer._primal(primal)), np.shape(_tracer._primal(t))
    if pshape != tshape:
        raise ValueError(
            f"a tangent has shape {tshape} but its primal has shape {pshape}: they must match"
        )
    if np.iscomplexobj(_tracer._primal(t)) and not np.iscomplexobj(_tracer._primal(primal)):
        raise TypeError(
            "a tangent is complex but its primal is real: give a real tangent, or a complex "
            "primal (x.astype(complex)) to differentiate along complex directions (as in JAX)"
        )
    if isinstance(t, np.ndarray | int | float | np.number) and not isinstance(t, bool):
        dt = _float_dtype(primal)
        if pshape or isinstance(primal, np.ndarray):
            return np.asarray(t, dtype=dt)
        if isinstance(primal, np.generic):
            return dt.type(t)
        return complex(t) if dt.kind == "c" else float(t)  # (a Python complex primal)
    return t


def _float_dtype(v: Any) -> np.dtype:
    v = _tracer._primal(v)
    dt = np.result_type(v) if not hasattr(v, "dtype") else np.dtype(v.dtype)
    return dt if np.issubdtype(dt, np.inexact) else np.dtype(np.float64)


def _check_no_tangent(primal: Any, tangent: Any) -> None:
    """A primal without a derivative (an int, a bool) takes a zero tangent only: a nonzero one
    was silently dropped (JAX asks for a float0 tangent there)."""
    if tangent is None or isinstance(tangent, AbstractZero) or not np.any(tangent):
        return
    dtype = getattr(primal, "dtype", type(primal).__name__)
    raise TypeError(
        f"jvp got a nonzero tangent for a primal of dtype {dtype}, which has no derivative: "
        "make the primal a float (x.astype(float), 3.0 for 3), or give it a zero tangent"
    )


def _finish_tangent(t: Any, y: Any) -> Any:
    """A materialised output tangent in its primal's shape and dtype (traced values untouched)."""
    if isinstance(t, AbstractZero):  # (under an outer trace too: a zero is a constant array)
        t = np.zeros(np.shape(y), _float_dtype(y))
    if isinstance(t, Tracer) or isinstance(y, Tracer):
        return t
    dt = _float_dtype(y)
    if isinstance(y, np.ndarray | LazyArray):
        t = np.asarray(t)
        if t.shape != y.shape:
            t = np.broadcast_to(t, y.shape).copy()
        return t if t.dtype == dt else t.astype(dt)
    if isinstance(y, np.generic):
        return dt.type(np.asarray(t).reshape(()))
    if isinstance(y, float | int | complex):
        v = np.asarray(t).reshape(())
        return complex(v) if dt.kind == "c" else float(v)
    return t


def jvp(
    fun: Callable,
    primals: Sequence[Any],
    tangents: Sequence[Any],
    *,
    primal_out: bool = True,
    has_aux: bool = False,
) -> tuple:
    """``(fun(*primals), J · tangents)`` by one forward pass; pytrees of arrays and floats.

    With ``primal_out=False`` the output value is not evaluated (None is returned in its place):
    only the tangent's kernels run. With ``has_aux=True`` ``fun`` returns ``(output, aux)`` and
    the result is ``(output, tangent, aux)``, ``aux`` without this pass's tangents (JAX's).
    """
    # one interning scope, as grad's; small ops on concrete values run eagerly, as in grad (an
    # hvp's jvp of a gradient over 50 weights took 2.7 ms fused, 0.9 eagerly: autograd 0.6)
    with interning_scope():
        return _jvp(fun, primals, tangents, primal_out, has_aux)


def argument_tuples(who: str, primals: Any, tangents: Any) -> tuple[tuple, tuple]:
    """``(primals, tangents)`` as tuples, or a TypeError when either is not a tuple or list (an
    array would be iterated: its rows taken as the arguments)."""
    for name, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, tuple | list):
            raise TypeError(
                f"{who} takes its {name} as a tuple or list, one per argument of the function, "
                f"but got {type(v).__name__}: write fusegrad.{who}(f, (x,), (t,))"
            )
    return tuple(primals), tuple(tangents)


def _jvp(
    fun: Callable,
    primals: Sequence[Any],
    tangents: Sequence[Any],
    primal_out: bool,
    has_aux: bool = False,
) -> tuple:
    primals, tangents = argument_tuples("jvp", primals, tangents)
    if len(primals) != len(tangents):
        raise ValueError(
            f"jvp got {len(primals)} primals and {len(tangents)} tangents: give one tangent per "
            "primal, with the primal's structure"
        )
    trace = JVPTrace()
    boxed_args = []
    for p, t in zip(primals, tangents):
        p_leaves, rebuild = flatten(p)
        t_leaves, _ = flatten(t)
        if len(p_leaves) != len(t_leaves):
            raise ValueError(
                f"a tangent has {len(t_leaves)} leaves but its primal has {len(p_leaves)}: give "
                "tangents with the primals' structure"
            )
        if len(p_leaves) > 1 and not same_structure(p, t):
            # leaves paired in another order (a list for a dict) would be silently wrong
            raise ValueError(
                f"a tangent's structure ({type(t).__name__}) is not its primal's "
                f"({type(p).__name__}): give tangents as the primals are, the same dict keys "
                "and nesting"
            )
        boxed = []
        for pl, tl in zip(p_leaves, t_leaves):
            if type(tl) is not np.ndarray and isinstance(tl, np.ndarray):
                check_array_type(tl, "a tangent")  # a masked one: its mask would be ignored
            if isinstance(pl, Tracer) or is_differentiable(pl):
                tl = _as_tangent(tl, pl)
                boxed.append(pl if tl is None else JVPTracer(pl, tl, trace))
            else:
                _check_no_tangent(pl, tl)
                boxed.append(pl)
        boxed_args.append(rebuild(boxed))
    try:
        with annotated_errors():
            out = fun(*boxed_args)
    finally:
        trace.done = True  # (its tracers are not to be used again)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("has_aux=True needs the function to return a pair (output, aux)")
        out, aux = out[0], _without_tangents(out[1], trace)
    leaves, rebuild = flatten(out)
    prims, tangs = [], []
    for leaf in leaves:
        if isinstance(leaf, JVPTracer) and leaf._trace is trace:
            prims.append(leaf.value)
            tangs.append(unthunk(leaf.tangent))
        elif isinstance(leaf, Tracer) and leaf._trace is trace:
            raise TypeError(_MISRECORDED)
        else:
            prims.append(leaf)
            tangs.append(ZeroTangent())
    n = len(prims)
    todo = (prims if primal_out else []) + [t for t in tangs if not isinstance(t, AbstractZero)]
    with replay.reading(replay.NESTED_RESULTS):  # (jvp inside a jitted function)
        values = iter(materialize_many(todo))
    prim_vals = [next(values) for _ in range(n)] if primal_out else prims
    tang_vals = [t if isinstance(t, AbstractZero) else next(values) for t in tangs]
    ref = prim_vals
    tang_out = [_finish_tangent(t, y) for t, y in zip(tang_vals, ref)]
    given = flatten(primals)[0] + flatten(tangents)[0]
    if primal_out:
        prim_vals = [_owned(v, given) for v in prim_vals]
    tang_out = [_owned(v, given) for v in tang_out]
    result = (rebuild(prim_vals) if primal_out else None), rebuild(tang_out)
    return (*result, aux) if has_aux else result


def _without_tangents(tree: Any, trace: JVPTrace) -> Any:
    """``tree`` with ``trace``'s tracers replaced by their values (evaluated): an auxiliary
    output of ``jvp``, which carries no tangent of this pass."""
    leaves, rebuild = flatten(tree)
    values = [v.value if isinstance(v, JVPTracer) and v._trace is trace else v for v in leaves]
    lazy = [v for v in values if isinstance(v, LazyArray)]
    if lazy:
        materialize_many(lazy)
    return rebuild([_concrete(v) if isinstance(v, LazyArray) else v for v in values])


def _owned(v: Any, given: list) -> Any:
    """``v`` as a result the caller may write into: a copy when it is (a view of) an array the
    caller passed in (``a * 1.0`` hands its tangent through), or read-only."""
    if type(v) is not np.ndarray:
        return v
    if not v.flags.writeable or any(
        isinstance(g, np.ndarray) and np.may_share_memory(v, g) for g in given
    ):
        return v.copy()
    return v


def cast_like(tree: Any, like: Any) -> Any:
    """``tree``'s array leaves cast to the float dtype of the matching leaves of ``like`` (an
    ``hvp`` of a float32 input is float32, whatever the precision of the backward pass)."""
    leaves, rebuild = flatten(tree)
    refs, _ = flatten(like)
    if len(leaves) != len(refs):
        return tree
    out = []
    for v, r in zip(leaves, refs):
        dt = getattr(_tracer._primal(r), "dtype", None)
        if isinstance(v, np.ndarray) and dt is not None and np.issubdtype(dt, np.inexact):
            v = v if v.dtype == dt else v.astype(dt)
        out.append(v)
    return rebuild(out)


__all__ = ["JVPTrace", "JVPTracer", "NoForwardRuleError", "apply", "cast_like", "jvp"]

"""The rule registry: one flat table of reverse rules and one of forward rules, keyed by function.

A reverse rule is ``rule(*args, **kwargs) -> (y, pullback)`` where ``pullback(ȳ)`` returns one
cotangent per positional argument. A forward rule is ``rule(tangents, *args, **kwargs) -> (y, ẏ)``.

Rules are registered with decorators::

    @register_rrule(np.sin)
    def _sin(x):
        def pullback(dy):
            return (dy * np.cos(x),)
        return np.sin(x), pullback

``rrule(f, ...)`` wraps the pullback so that every rule author gets, for free:
- a ``ZeroTangent``/``NoTangent`` ȳ short-circuits (nothing is computed or allocated);
- a ``Thunk``/``InplaceThunk``/``BroadcastThunk`` ȳ is unthunked first, unless the rule was
  registered with ``lazy=True``: such a rule takes lazy arrays as arguments and lazy cotangents,
  and keeps them lazy (elementwise, reduction and movement rules do);
- integer, bool and non-numeric arguments get ``NoTangent()``, whatever the rule returned.
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import AbstractThunk, AbstractZero, NoTangent, ZeroTangent, unthunk

RRULES: dict[Any, tuple[Callable, bool]] = {}
# Cases of a rule that is not ``lazy`` which take a lazy argument as it is (``register_lazy_case``)
LAZY_CASES: dict[Any, Callable] = {}
# Functions whose lazy case evaluates only through sanctioned materialisations: a jit recording
# runs it (its kernels are recorded) before it records the rule as a step
RECORDABLE_CASES: set[Any] = set()
FRULES: dict[Any, Callable] = {}
OPTED_OUT: set[Any] = set()


def _check_target(f: Any, who: str) -> None:
    """``f`` must be a function; one of your own must be a ``primitive`` for its rule to be used
    (grad traces a plain Python function's body and never looks its rule up)."""
    if not callable(f):
        raise TypeError(f"{who} needs the function the rule is for, got {f!r}")
    module = (getattr(f, "__module__", None) or "").split(".")[0]
    if (
        isinstance(f, types.FunctionType)
        and not hasattr(f, "__fusegrad_body__")
        and module not in ("numpy", "scipy", "fusegrad")
    ):
        warnings.warn(
            f"{who}({f.__name__}): {f.__name__} is a plain Python function, so grad and jvp "
            "trace its body and never call this rule; decorate it with @fusegrad.primitive "
            "(above the registration: the rule is registered for the primitive)",
            stacklevel=3,
        )


def register_rrule(f: Any, *, lazy: bool = False) -> Callable[[Callable], Callable]:
    """Register ``rule`` as the reverse rule of ``f`` (a NumPy function, ufunc, or your own
    function made a ``primitive``: grad traces a plain function's body instead).

    >>> @primitive
    ... def my_square(x):
    ...     return x * x
    >>> @register_rrule(my_square)
    ... def _(x):
    ...     return x * x, lambda dy: (2 * x * dy,)
    """
    _check_target(f, "register_rrule")

    def decorate(rule: Callable) -> Callable:
        RRULES[f] = (rule, lazy)
        OPTED_OUT.discard(f)
        return rule

    return decorate


def register_lazy_case(f: Any, *, recordable: bool = False) -> Callable[[Callable], Callable]:
    """Register ``case`` as a case of ``f``'s reverse rule (one not registered ``lazy``) that
    takes lazy arguments as they are: the AD core calls ``case(*args, **kwargs)`` first, on
    arguments not yet evaluated, and evaluates them for the rule itself only when it returns
    None. A case returns ``(y, pullback)`` as the rule does, its pullback taking the concrete
    cotangents the rule's does (``matmul`` of an unevaluated matrix by a column computes the
    product in the pass that evaluates the matrix: ``rules/linalg._matmul_lazy_column``).
    ``recordable``: the case builds lazy values and evaluates them only inside
    ``lazy.replay.sanctioned`` (kernels a ``jit`` recording records), so a recording runs it
    too (else the recording records the rule as a step).

    >>> def my_dot(a, b):
    ...     return a @ b
    >>> @register_lazy_case(my_dot)
    ... def _(a, b):
    ...     return None  # no case applies here: the rule runs on evaluated arguments
    """

    def decorate(case: Callable) -> Callable:
        LAZY_CASES[f] = case
        if recordable:
            RECORDABLE_CASES.add(f)
        return case

    return decorate


def register_frule(f: Any) -> Callable[[Callable], Callable]:
    """Register ``rule(tangents, *args, **kwargs) -> (y, ẏ)`` as the forward rule of ``f``."""
    _check_target(f, "register_frule")

    def decorate(rule: Callable) -> Callable:
        FRULES[f] = rule
        return rule

    return decorate


def _innermost(xs: Any, best: Any) -> Any:
    for x in xs:
        if getattr(type(x), "__fusegrad_traced__", False):
            t = x._trace
            if best is None or t.level > best.level:
                best = t
        elif isinstance(x, list | tuple):
            best = _innermost(x, best)
        elif isinstance(x, dict):  # (a dict argument of a primitive: its values)
            best = _innermost(x.values(), best)
    return best


def innermost_trace(args: tuple, kwargs: dict | None = None) -> Any:
    """The trace of highest level among the traced values in ``args`` and ``kwargs`` (through
    lists and tuples), or None: the trace a call on them belongs to.

    >>> innermost_trace((np.ones(2), [1.0])) is None
    True
    """
    best = _innermost(args, None)
    return _innermost(kwargs.values(), best) if kwargs else best


def dispatch(f: Any, args: tuple, kwargs: dict) -> Any:
    """Call ``f(*args, **kwargs)``: through the innermost trace when an argument is traced, its
    ``apply`` (reverse: record ``f``'s rule on the tape; forward: push tangents through its
    forward rule), else ``f`` itself.

    The one dispatch path of every traced call (NumPy's protocols on tracers, ``primitive``,
    ``rules.common.call``), whatever the mode: each trace object carries its ``apply``, so
    nothing here is set by the AD engine and nothing depends on which module was imported first.

    >>> float(dispatch(np.add, (1.0, 2.0), {}))
    3.0
    """
    trace = _innermost(args, None)
    if kwargs:
        trace = _innermost(kwargs.values(), trace)
    if trace is None:
        return f(*args, **kwargs)
    return trace.apply(f, args, kwargs)


def _traced(x: Any) -> bool:
    if getattr(type(x), "__fusegrad_traced__", False):
        return True
    return isinstance(x, list | tuple) and any(_traced(v) for v in x)


def primitive(fn: Callable) -> Callable:
    """Make ``fn`` (your own function with a registered rule) dispatch on traced values.

    NumPy functions dispatch through NumPy's protocols; a plain Python function needs this so
    that calling it on a traced value records it on the tape (with its rule) instead of running
    its body, which may not be differentiable (in-place updates, ``np.add.at``).

    >>> @primitive
    ... def scatter_add(dy, index, shape): ...
    >>> @register_rrule(scatter_add)
    ... def _(dy, index, shape): ...
    """

    @functools.wraps(fn)
    def dispatching(*args: Any, **kwargs: Any) -> Any:
        trace = innermost_trace(args, kwargs)
        if trace is None:
            return fn(*args, **kwargs)
        return trace.apply(dispatching, args, kwargs)

    dispatching.__fusegrad_body__ = fn  # type: ignore[attr-defined]  # (what a replay calls)
    return dispatching


def opt_out(f: Any) -> Any:
    """Let AD trace through ``f`` instead of using its rule (for example a composite function):
    a ``primitive``'s body, or a plain Python function's. (A NumPy function has no Python body
    to trace: opting it out leaves it without a rule.)

    >>> def my_softplus(x):
    ...     return np.logaddexp(0.0, x)
    >>> f = opt_out(my_softplus)  # grad now differentiates my_softplus's body
    """
    OPTED_OUT.add(f)
    return f


def rule_is_lazy(f: Any) -> bool:
    """Whether ``f``'s reverse rule takes lazy arguments and cotangents (``lazy=True``)."""
    return RRULES[f][1]


def has_rrule(f: Any) -> bool:
    """True when ``f`` has a reverse rule that has not been opted out of."""
    return f in RRULES and f not in OPTED_OUT


# `np.ndarray` read as a module global on the per-op paths: numpy's module __getattr__ keeps
# CPython 3.11 from specialising `np.name` lookups (about 300 instructions each).
_NDARRAY = np.ndarray

# Whether values of these exact types carry a derivative (the common scalars, looked up at once).
_SCALAR_TYPES = {float: True, complex: True, np.float64: True, np.float32: True}
_SCALAR_TYPES.update({int: False, bool: False, np.bool_: False, np.int64: False})
# The types of a tuple's elements that make it a static argument (a shape, axes, a basic index):
# never traced, never differentiable, taken as it is without a search of its elements.
STATIC_ENTRIES = frozenset({int, slice, type(None), type(Ellipsis)})


def is_static(x: Any) -> bool:
    """Whether ``x`` is a static argument: an int, slice, None or ``...``, or a tuple of them (a
    shape, axes, a basic index), taken as it is, without a search of its elements for tracers.

    >>> is_static((slice(None), 0, None)), is_static((0, 1.5))
    (True, False)
    """
    t = type(x)
    return t in STATIC_ENTRIES or (t is tuple and STATIC_ENTRIES.issuperset(map(type, x)))


def is_differentiable(x: Any) -> bool:
    """Whether ``x`` can carry a derivative: real or complex floating values (and containers)."""
    t = type(x)
    if t is _NDARRAY:  # the common case, first
        return x.dtype.kind in "fc"
    known = _SCALAR_TYPES.get(t)
    if known is not None:
        return known
    if isinstance(x, bool | np.bool_):
        return False
    if isinstance(x, list | tuple):
        if STATIC_ENTRIES.issuperset(map(type, x)):  # a shape, axes, an index: no call each
            return False
        return any(is_differentiable(v) for v in x)
    if isinstance(x, dict):
        return any(is_differentiable(v) for v in x.values())
    if isinstance(x, float | complex | np.floating | np.complexfloating):
        return True
    if isinstance(x, type):  # a type passed as an argument (astype(x, np.complex128)) is static
        return False
    dtype = getattr(x, "dtype", None)
    if dtype is not None:
        kind = getattr(dtype, "kind", None)  # a NumPy dtype (lazy values): no issubdtype (~3 us)
        return kind in ("f", "c") if type(kind) is str else np.issubdtype(dtype, np.inexact)
    return False


def zero_cotangents(args: tuple) -> tuple:
    """One zero cotangent per argument: ``NoTangent`` where none exists, else ``ZeroTangent``."""
    return tuple(ZeroTangent() if is_differentiable(a) else NoTangent() for a in args)


def rrule(f: Any, *args: Any, **kwargs: Any) -> tuple[Any, Callable] | None:
    """``(y, pullback)`` for ``f(*args, **kwargs)``, or None when ``f`` has no reverse rule.

    >>> y, pb = rrule(np.sin, np.array([0.0, 1.0]))
    >>> (dx,) = pb(np.ones(2))  # lazy: a BroadcastThunk
    >>> np.allclose(unthunk(dx), np.cos([0.0, 1.0]))
    True
    """
    entry = RRULES.get(f)
    if entry is None or f in OPTED_OUT:
        return None
    rule, lazy = entry
    out = rule(*args, **kwargs)
    if out is None:
        return None
    y, pullback = unpack_rule_result(f, out)
    differentiable = tuple(map(is_differentiable, args))
    return y, lambda dy: pull(f, pullback, differentiable, lazy, dy)


def unpack_rule_result(f: Any, out: Any) -> tuple[Any, Callable]:
    """``(y, pullback)`` from what ``f``'s rrule returned, or a TypeError saying what a rule
    must return (free when it is right: the checks run only if unpacking fails).

    >>> unpack_rule_result(np.sin, (1.0, print))[0]
    1.0
    """
    try:
        y, pullback = out
        if not callable(pullback):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(
            f"the rrule of {getattr(f, '__name__', f)!r} returned {type(out).__name__} "
            f"{_short(out)}; an rrule returns a pair (y, pullback): the value and a function "
            "from the output's cotangent to one cotangent per positional argument"
        ) from None
    return y, pullback


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def pull(f: Any, pullback: Callable, differentiable: tuple, lazy: bool, dy: Any) -> tuple:
    """``pullback(dy)`` of ``f``'s rule, given per positional argument whether it is
    differentiable (``is_differentiable``), with what every rule gets for free: a zero ``dy``
    short-circuits, a thunk is unthunked unless the rule is ``lazy``, the count of cotangents is
    checked, and a non-differentiable argument gets ``NoTangent()``. Flags, not the arguments:
    the tape keeps no argument value the pullback itself does not.

    >>> y, pb = RRULES[np.sin][0](np.zeros(2))
    >>> pull(np.sin, pb, (True,), True, ZeroTangent())
    (ZeroTangent(),)
    """
    if isinstance(dy, AbstractZero):
        return tuple([_ZERO if d else _NO_TANGENT for d in differentiable])
    if not lazy and isinstance(dy, AbstractThunk):
        dy = unthunk(dy)
    grads = pullback(dy)
    if type(grads) is not tuple:
        if grads is None or isinstance(grads, np.ndarray) or not hasattr(grads, "__iter__"):
            raise TypeError(
                f"the pullback of {getattr(f, '__name__', f)!r}'s rrule returned "
                f"{type(grads).__name__} {_short(grads)}; it returns a tuple with one cotangent "
                f"per positional argument ({len(differentiable)} here), e.g. (dy * cos(x),)"
            )
        grads = tuple(grads)
    if len(grads) != len(differentiable):
        raise TypeError(
            f"the rrule of {getattr(f, '__name__', f)!r} returned {len(grads)} cotangents for "
            f"{len(differentiable)} positional arguments; a pullback returns one per argument"
        )
    if all(differentiable):
        return grads
    return tuple([g if d else _NO_TANGENT for g, d in zip(grads, differentiable)])


_NO_TANGENT = NoTangent()  # singletons: bound once, not constructed per argument
_ZERO = ZeroTangent()


def missing_frules() -> list[Any]:
    """fusegrad's own reverse rules (those of ``fusegrad.rules``) that have no forward rule.

    >>> missing_frules()
    []
    """
    return [
        f
        for f, (rule, _) in RRULES.items()
        if getattr(rule, "__module__", "").startswith("fusegrad.rules") and f not in FRULES
    ]


def frule(tangents: tuple, f: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any] | None:
    """``(y, ẏ)`` for ``f(*args, **kwargs)`` pushed forward along ``tangents``, or None."""
    rule = FRULES.get(f)
    if rule is None or f in OPTED_OUT:
        return None
    return rule(tangents, *args, **kwargs)

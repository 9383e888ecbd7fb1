"""The tracer core: trace levels, boxing, the tape and the backward pass.

A ``Tracer`` boxes a value (an array, a number or a lazy node) during one trace. Every NumPy call
on a tracer goes through NumPy's protocols (``tracer.py``) to ``apply(f, args, kwargs)``, the one
dispatcher of both modes (``rules.registry.dispatch``), which calls the innermost trace's
``apply``; for a reverse ``Trace`` that is ``record``: the arguments of that trace are unboxed,
``f``'s reverse rule runs on them, and the result is boxed with a tape node holding the pullback.
Nested traces (``grad(grad(f))``) carry levels: the highest level is unboxed first, and the
rule's own NumPy calls on lower-level tracers are recorded on the lower tapes, which keeps
perturbations apart.

``backward`` walks the tape in reverse topological order, accumulates cotangents with
``add``/``iadd`` (lazy thunks stay lazy) and frees each cotangent once consumed.

Example::

    >>> trace = Trace()
    >>> x = trace.input(np.ones(3))
    >>> y = apply(np.sum, (apply(np.tanh, (x,), {}),), {})
    >>> grads = backward([(y, 1.0)], [x])
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..lazy import LazyArray, Leaf, materialize, materialize_many, replay
from ..lazy.nodes import Reduce
from ..rules import registry
from ..rules.registry import (
    LAZY_CASES,
    OPTED_OUT,
    RRULES,
    is_differentiable,
    is_static,
    pull,
    unpack_rule_result,
)
from ..tangents import AbstractZero, BroadcastThunk, NoTangent, ZeroTangent, add, iadd
from ..tangents.thunks import AbstractThunk
from .pytree import PLAIN_LEAVES

_levels = itertools.count(1)
# `np.ndarray` read as a module global on the per-op paths: numpy's module __getattr__ keeps
# CPython 3.11 from specialising `np.name` lookups (about 300 instructions each).
_NDARRAY = np.ndarray
_ZERO = ZeroTangent()  # a singleton: bound once, not constructed per node


class Trace:
    """One differentiation: a level above every trace alive when it starts. ``done`` once its
    function has returned: a tracer of it met later has leaked (kept in a global, a closure)."""

    __slots__ = ("level", "done")

    def __init__(self) -> None:
        self.level = next(_levels)
        self.done = False

    def input(self, value: Any) -> Tracer:
        """Box an input of this trace."""
        return Tracer(value, self, InputNode(), None)


_sequence = itertools.count()  # creation order of tape nodes: a topological order


class InputNode:
    """The tape node of an input: the backward pass collects its cotangent."""

    __slots__ = ("seq",)

    def __init__(self) -> None:
        self.seq = next(_sequence)


class TapeNode:
    """One primitive on the tape: ``f``'s pullback, per positional argument whether it is
    differentiable (for ``registry.pull``'s checks) and its parents (``_ref``s, or nested lists
    of them for a container argument), whether the rule is lazy; ``n_out`` is the number of
    outputs of a tuple result (None: one value). The node holds no argument value itself: what
    the backward pass needs of the forward is what the pullback keeps, so an intermediate no
    pullback reads (the output of ``a + b`` feeding ``tanh``) is freed as the forward goes on."""

    __slots__ = ("pullback", "parents", "n_out", "f", "differentiable", "lazy", "seq")

    def __init__(
        self,
        pullback: Any,
        parents: list,
        n_out: int | None,
        f: Any,
        differentiable: tuple,
        lazy: bool,
    ) -> None:
        self.pullback = pullback
        self.parents = parents
        self.n_out = n_out
        self.f = f
        self.differentiable = differentiable
        self.lazy = lazy
        self.seq = next(_sequence)

    @property
    def name(self) -> str:
        """The primitive's public name (``np.tanh``), made on demand: not on every call."""
        return _name(self.f)

    def pull(self, ct: Any) -> tuple:
        """The cotangents of the arguments, given the output's ``ct`` (``registry.pull``)."""
        return pull(self.f, self.pullback, self.differentiable, self.lazy, ct)


def _ref(t: Tracer) -> Any:
    """What a tape node keeps of a parent tracer, and the key of its cotangent in ``backward``:
    the parent's node, or ``(node, index)`` for one output of a tuple result. Not the tracer,
    which would keep the parent's value alive for as long as the tape."""
    return t.node if t.index is None else (t.node, t.index)


class Tracer:
    """A boxed value of one trace; NumPy protocols and operators live in ``tracer.py``."""

    __slots__ = ("value", "_trace", "node", "index", "__weakref__")
    __array_priority__ = 200.0
    __fusegrad_traced__ = True

    def __init__(self, value: Any, trace: Any, node: Any, index: int | None) -> None:
        # trace: a Trace, or a forward.JVPTrace (anything with a level and an apply)
        self.value = value
        self._trace = trace
        self.node = node
        self.index = index


def _max_level(xs: Any, best: int = 0) -> int:
    for x in xs:
        if isinstance(x, Tracer):
            best = max(best, x._trace.level)
        elif isinstance(x, list | tuple):
            best = _max_level(x, best)
    return best


def _in_containers(x: Any, leaf: Any) -> Any:
    """``leaf`` applied to the values in ``x`` through lists, tuples, namedtuples and dicts (the
    containers a rule's argument may be), the containers rebuilt."""
    if isinstance(x, list | tuple):
        values = [_in_containers(v, leaf) for v in x]
        return type(x)(*values) if hasattr(type(x), "_fields") else type(x)(values)
    if isinstance(x, dict):
        return type(x)((k, _in_containers(v, leaf)) for k, v in x.items())
    return leaf(x)


def _unbox(x: Any, level: int) -> Any:
    if isinstance(x, Tracer):
        return x.value if x._trace.level == level else x
    return _in_containers(
        x, lambda v: v.value if isinstance(v, Tracer) and v._trace.level == level else v
    )


def _parents(x: Any, level: int) -> Any:
    """The tape references of ``x``'s values of ``level``: one, or a list (a list, tuple or
    namedtuple argument) or a dict (a dict argument) of them; None when none is traced."""
    if isinstance(x, Tracer):
        return _ref(x) if x._trace.level == level else None
    if isinstance(x, list | tuple):
        ps = [_parents(v, level) for v in x]
        return ps if any(p is not None for p in ps) else None
    if isinstance(x, dict):
        pd = {k: _parents(v, level) for k, v in x.items()}
        return pd if any(p is not None for p in pd.values()) else None
    return None


def _concrete(x: Any) -> Any:
    """Materialise lazy values for a rule that needs arrays (policy rule 1)."""
    return _in_containers(x, lambda v: materialize(v) if isinstance(v, LazyArray) else v)


def _concrete_args(args: tuple) -> tuple:
    """``args`` with lazy values materialised (``_concrete``); the tuple itself when none is
    lazy or a container (the common case: arrays and numbers)."""
    for a in args:
        if type(a) not in PLAIN_LEAVES:
            return tuple([_concrete(a) for a in args])
    return args


_SEQUENCES = (list, tuple)
_CONTAINERS = (list, tuple, dict)  # the arguments whose values are searched for tracers


class NoRuleError(TypeError):
    """A NumPy function was called on a traced value and has no reverse rule."""


def _name(f: Any) -> str:
    mod = getattr(f, "__module__", None) or ""
    name = getattr(f, "__name__", repr(f))
    if isinstance(f, np.ufunc):
        special = sys.modules.get("scipy.special._ufuncs")
        return f"scipy.special.{name}" if getattr(special, name, None) is f else f"np.{name}"
    if mod.startswith("scipy."):  # scipy.special._logsumexp -> scipy.special (the public module)
        mod = ".".join(itertools.takewhile(lambda p: not p.startswith("_"), mod.split(".")))
    if mod.startswith("numpy"):
        mod = "np" + mod[5:].replace(".linalg._linalg", ".linalg").replace("._core", "")
        mod = mod.split(".")[0] if ".fromnumeric" in mod or "._" in mod else mod
    return f"{mod}.{name}" if mod else name


class _Copying(threading.local):
    memo: dict | None = None


_COPYING = _Copying()


@contextlib.contextmanager
def constants_copied(on: bool = True) -> Iterator[None]:
    """While ``on``, every NumPy array a traced call takes as a constant (an array from a
    closure) is replaced by a private copy, one per array: ``vjp``'s pullback outlives the call,
    and must not see what the user writes into such an array after it.

    >>> w = np.ones(2)
    >>> with constants_copied():
    ...     y = apply(np.multiply, (Trace().input(np.ones(2)), w), {})
    >>> w[:] = 5.0
    >>> float(np.sum(y.value))
    2.0
    """
    if not on or _COPYING.memo is not None:
        yield
        return
    _COPYING.memo = {}
    try:
        yield
    finally:
        _COPYING.memo = None


def _own(x: Any, memo: dict) -> Any:
    if type(x) is np.ndarray:
        hit = memo.get(id(x))
        if hit is None:
            hit = memo[id(x)] = (x, np.array(x))  # holding x keeps its id from being reused
        return hit[1]
    if isinstance(x, list | tuple) and not hasattr(type(x), "_fields"):
        return type(x)(_own(v, memo) for v in x)
    return x


apply = registry.dispatch
"""``apply(f, args, kwargs)``: call ``f`` on possibly traced arguments through the innermost
trace, reverse or forward (``rules.registry.dispatch``, the one dispatch path)."""


def keywords_positional(
    f: Any, args: tuple, kwargs: dict, traced: Any, what: str
) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with the keyword arguments that ``f``'s signature also takes by
    position moved there (``np.interp(x, xp, fp=v)`` as ``np.interp(x, xp, v)``), skipped
    parameters given their defaults. A rule's pullback returns positional cotangents only: a
    ``traced`` (a predicate) keyword argument would get none, so one that is keyword-only (or
    whose signature cannot be read) is an error naming it (``what``: "traced", "forward-traced").
    """
    moved = _moved_to_positions(f, args, kwargs)
    if moved is not None and not any(traced(v) for v in moved[1].values()):
        return moved
    name = next(k for k, v in kwargs.items() if traced(v))
    raise TypeError(
        f"{_name(f)} got a {what} value as keyword argument {name!r}; fusegrad differentiates "
        "positional arguments only: pass it positionally"
    )


def _moved_to_positions(f: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(args) > len(positional):
        return None
    rest = dict(kwargs)
    last = max((i for i, p in enumerate(positional) if p.name in rest), default=-1)
    new = list(args)
    for p in positional[len(args) : last + 1]:
        if p.name in rest:
            new.append(rest.pop(p.name))
        elif p.default is not p.empty:
            new.append(p.default)
        else:
            return None
    return tuple(new), rest


def record(trace: Trace, f: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``f``'s reverse rule on the arguments of ``trace`` (the innermost trace of the call)
    unboxed and record its pullback on the tape."""
    level = trace.level
    memo = _COPYING.memo
    if memo is not None:
        args = tuple(_own(a, memo) for a in args)
        kwargs = {k: _own(v, memo) for k, v in kwargs.items()}
    entry = RRULES.get(f)
    if entry is None or f in OPTED_OUT:
        body = getattr(f, "__fusegrad_body__", None)
        if body is not None and f in OPTED_OUT:  # an opted-out primitive: trace its body
            return body(*args, **kwargs)
        raise _no_rule(f)
    rule, lazy = entry
    values: list = []
    parents: list = []
    traced = False  # whether an argument is of this trace (else the result is a constant)
    if trace.done:  # (once per call: another trace's tracers are checked in the loop)
        raise _leaked(f)
    for a in args:
        if type(a) is Tracer:
            mine = a._trace.level == level
            if not mine and a._trace.done:
                raise _leaked(f)
            values.append(a.value if mine else a)
            # _ref(a), inlined on the per-op path
            parents.append((a.node if a.index is None else (a.node, a.index)) if mine else None)
            traced = traced or mine
        elif type(a) in PLAIN_LEAVES:  # neither traced nor a container nor lazy
            values.append(a)
            parents.append(None)
        elif is_static(a):  # a shape, axes, a basic index
            values.append(a)
            parents.append(None)
        elif isinstance(a, _CONTAINERS):
            values.append(_unbox(a, level))
            p = _parents(a, level)
            parents.append(p)
            traced = traced or p is not None
        else:
            if isinstance(a, np.ndarray):
                check_operand(a, f)
            values.append(a)
            parents.append(None)
    uargs = tuple(values)
    if kwargs and any(_parents(v, level) is not None for v in kwargs.values()):
        moved = keywords_positional(
            f, args, kwargs, lambda v: _parents(v, level) is not None, "traced"
        )
        return record(trace, f, *moved)
    ukwargs = {k: _unbox(v, level) for k, v in kwargs.items()} if kwargs else kwargs
    rec = replay.active()  # a jit recording: a rule that needs arrays may be a step of it
    step = rec.rule_step(f, args, uargs, ukwargs, lazy) if rec and rec.rule_step else None
    if step is not None:
        y, pullback = step
        lazy = True  # the step's pullback makes its cotangent concrete itself, as a step
    else:
        case = None if lazy else LAZY_CASES.get(f)
        out = None if case is None else case(*uargs, **ukwargs)
        if out is None:
            if not lazy:
                uargs = _concrete_args(uargs)
                if ukwargs:
                    ukwargs = {k: _concrete(v) for k, v in ukwargs.items()}
            out = rule(*uargs, **ukwargs)
        if out is None:
            raise _declined(f, uargs, ukwargs)
        y, pullback = unpack_rule_result(f, out)
    if not traced:  # no argument of this trace: a constant
        return y
    differentiable = tuple(map(is_differentiable, uargs))
    if type(y) is _NDARRAY and y.dtype.kind in "fc":  # _box's common case, without the call
        return Tracer(y, trace, TapeNode(pullback, parents, None, f, differentiable, lazy), None)
    if isinstance(y, AbstractThunk):
        # a lazy rule's value under an outer trace (a cotangent of an inner grad): a traced
        # value's primal is never a thunk (the outer grad saw a BroadcastThunk as its output)
        y = y.unthunk()
    if isinstance(y, tuple | list):
        node = TapeNode(pullback, parents, len(y), f, differentiable, lazy)
        boxed = [_box(v, trace, node, i) for i, v in enumerate(y)]
        return type(y)(*boxed) if hasattr(type(y), "_fields") else type(y)(boxed)
    if isinstance(y, dict):  # one output per key; the pullback gets a dict of cotangents
        keys = list(y)
        node = TapeNode(_by_key(pullback, keys), parents, len(keys), f, differentiable, lazy)
        return type(y)((k, _box(y[k], trace, node, i)) for i, k in enumerate(keys))
    return _box(y, trace, TapeNode(pullback, parents, None, f, differentiable, lazy), None)


def _by_key(pullback: Any, keys: list) -> Any:
    """The pullback of a rule with a dict output, taking the tape's tuple of cotangents."""
    return lambda ct: pullback(dict(zip(keys, ct)))


# A trace's apply records ``f(*args, **kwargs)`` on its tape (the dispatcher calls it).
Trace.apply = record  # type: ignore[attr-defined]


def check_array_type(v: Any, where: str) -> None:
    """Masked arrays and ``np.matrix`` would silently lose their mask or semantics in traced
    NumPy operations (as in JAX, they are refused)."""
    if type(v) is _NDARRAY:
        return  # neither (both are subclasses); np.ma is a module __getattr__ away (0.2 us)
    if isinstance(v, np.ma.MaskedArray):
        raise TypeError(
            f"{where} is a numpy.ma.MaskedArray: fusegrad differentiates plain arrays, and its "
            "mask would be ignored. Pass x.filled(fill_value) (or np.where(x.mask, 0, x.data)) "
            "and apply the mask inside the function"
        )
    if isinstance(v, np.matrix):
        raise TypeError(
            f"{where} is a numpy.matrix, whose * means matrix product: fusegrad differentiates "
            "plain arrays. Pass np.asarray(x) and use @ for matrix products"
        )


def check_operand(a: np.ndarray, f: Any) -> None:
    """A masked array or a matrix beside a traced value would lose its mask or its semantics
    in the rule's NumPy calls (the mask ignored: a value and a gradient that match neither
    NumPy's nor each other): refused, as an input of ``grad`` is."""
    check_array_type(a, f"an operand of {_name(f)} beside a traced value")


def _leaked(f: Any) -> TypeError:
    return TypeError(
        f"{_name(f)} got a traced value of a differentiation that has returned (a leaked "
        "tracer: one kept from inside grad, vjp, jvp or jacobian, in a global, a closure or a "
        "list, and used after). Return what you need from the function (has_aux=True for "
        "extra values) instead of keeping its traced values"
    )


def _no_rule(f: Any) -> NoRuleError:
    return NoRuleError(
        f"fusegrad has no reverse rule for {_name(f)}, called on a traced value. Register one:"
        f"\n\n    @fusegrad.register_rrule({_name(f)})\n    def _(*args):\n"
        "        y = ...\n        def pullback(dy): return (dx1, dx2, ...)\n"
        "        return y, pullback\n\nor write the function with operations that have rules."
    )


def _describe(x: Any) -> str:
    if isinstance(x, list | tuple):
        inner = ", ".join(_describe(v) for v in x)
        return (
            f"({inner},)"
            if isinstance(x, tuple) and len(x) == 1
            else f"{type(x).__name__}[{inner}]"
        )
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(x).__name__}(shape={tuple(shape)}, dtype={dtype})"
    return type(x).__name__


def _declined(f: Any, args: tuple, kwargs: dict) -> TypeError:
    """The error for a rule that returned None (declined) on these arguments."""
    described = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return TypeError(
        f"the reverse rule of {_name(f)} returned None (it declines) for arguments "
        f"({', '.join(described)}); a rule must return (y, pullback) for every call it is "
        "registered for: handle these arguments in the rule, or opt_out(f) to differentiate "
        "its body instead"
    )


def _nodes(parent: Any) -> Iterator[Any]:
    """The tape nodes of one entry of ``TapeNode.parents`` (a ``_ref``, or nested lists and
    dicts of them)."""
    if isinstance(parent, list | dict):
        for p in parent.values() if isinstance(parent, dict) else parent:
            yield from _nodes(p)
    elif type(parent) is tuple:
        yield parent[0]
    elif parent is not None:
        yield parent


def _distribute(cts: dict, fresh: set, parent: Any, g: Any) -> None:
    """Accumulate the cotangent ``g`` of one argument into its (possibly nested) parents."""
    if not isinstance(parent, list | dict):
        _accumulate(cts, fresh, parent, g)
        return
    if isinstance(g, AbstractZero) or g is None:
        return
    if isinstance(g, AbstractThunk):  # a container argument's cotangent, computed on demand
        g = g.unthunk()
    if isinstance(parent, dict):
        if not isinstance(g, dict):
            raise TypeError(
                f"a rule returned {type(g).__name__} as the cotangent of a dict argument: "
                "return a dict with the same keys (a missing key is a zero cotangent)"
            )
        for k, p in parent.items():
            if p is not None and k in g:
                _distribute(cts, fresh, p, g[k])
        return
    for p, gi in zip(parent, g):
        if p is not None:
            _distribute(cts, fresh, p, gi)


def _box(v: Any, trace: Trace, node: TapeNode, index: int | None) -> Any:
    if (type(v) is _NDARRAY and v.dtype.kind in "fc") or is_differentiable(v):
        return Tracer(v, trace, node, index)
    if isinstance(v, Tracer):
        return Tracer(v, trace, node, index)
    if getattr(getattr(v, "dtype", None), "kind", None) == "O":  # (an ndarray or a lazy one)
        # a traced value met an object array: the result holds Python numbers, which carry no
        # derivative (the gradient would silently be zero)
        raise TypeError(
            f"{node.name} of a traced value gave an array of dtype object (an operand has dtype "
            "object): convert that operand with .astype(float) first"
        )
    return v


def _accumulate(cts: dict, fresh: set, key: Any, g: Any) -> None:
    """Add ``g`` to the cotangent of the output ``key`` (a ``_ref``)."""
    if isinstance(g, AbstractZero) or g is None:
        return
    old = cts.get(key)
    if old is None:
        cts[key] = g
    elif key in fresh:
        cts[key] = iadd(old, g)
    else:
        new = add(old, g)
        cts[key] = new
        if isinstance(new, _NDARRAY):
            fresh.add(key)  # only this slot holds it: later contributions may add in place


def _reverse_order(roots: list) -> list:
    """The tape nodes the ``roots`` depend on, children before parents: a node is made after
    its parents, so its sequence number orders the tape topologically (reversed here)."""
    seen: dict[int, Any] = {}  # by sequence number: unique, and the order sorts on it
    stack = list(roots)
    while stack:
        node = stack.pop()
        seq = node.seq
        if seq in seen:
            continue
        seen[seq] = node
        if type(node) is TapeNode:
            for p in node.parents:
                if type(p) is TapeNode or type(p) is InputNode:
                    stack.append(p)
                elif p is not None:
                    stack.extend(_nodes(p))
    return [seen[seq] for seq in sorted(seen, reverse=True)]


def _evaluate_with_sums(node: Any, cts: dict) -> None:
    """Evaluate ``node``, a lazy cotangent a rule needs as an array, together with the pending
    cotangents that are sums over its domain: one pass computes the cotangent of ``tanh(X @ W
    + b)``'s argument and ``b``'s (its column sum), where evaluating it alone left the sum to
    read it back from memory in a kernel of its own. Only sums are taken: their results are
    small, and they are needed anyway; anything else stays lazy until it is used."""
    if type(node) is Leaf or node.cached is not None:
        return
    domain = node.shape
    sums = [
        g.node
        for g in cts.values()
        if type(g) is BroadcastThunk
        and type(g.node) is Reduce
        and g.node.cached is None
        and g.node.arg.shape == domain
    ]
    materialize_many([node, *sums])


def backward(outputs: list[tuple[Tracer, Any]], inputs: list[Tracer]) -> list[Any]:
    """Cotangents of ``inputs`` given ``(output tracer, output cotangent)`` pairs.

    Inputs that the outputs do not depend on get ``ZeroTangent()``.
    """
    cts: dict = {}  # output key (a _ref) -> its accumulated cotangent
    fresh: set = set()
    for t, ct in outputs:
        if isinstance(t, Tracer):
            _accumulate(cts, fresh, _ref(t), ct)
    input_nodes = {id(t.node) for t in inputs}
    results: dict = {}
    for node in _reverse_order([t.node for t, _ in outputs if isinstance(t, Tracer)]):
        if type(node) is InputNode:
            if id(node) in input_nodes:
                results[id(node)] = cts.pop(node, _ZERO)
            continue
        if node.n_out is None:
            ct = cts.pop(node, None)
            if ct is None:
                continue
            fresh.discard(node)
        else:
            keys = [(node, i) for i in range(node.n_out)]
            parts = [cts.pop(k, None) for k in keys]
            fresh.difference_update(keys)
            if all(p is None for p in parts):
                continue
            ct = tuple(_ZERO if p is None else p for p in parts)
        if not node.lazy and type(ct) is BroadcastThunk:
            _evaluate_with_sums(ct.node, cts)
        grads = pull(node.f, node.pullback, node.differentiable, node.lazy, ct)
        for parent, g in zip(node.parents, grads):
            if parent is None:
                continue
            if type(parent) is list or type(parent) is dict:
                _distribute(cts, fresh, parent, g)
            else:
                _accumulate(cts, fresh, parent, g)
    return [results.get(id(t.node), _ZERO) for t in inputs]


__all__ = ["NoTangent", "Trace", "Tracer", "apply", "backward", "record"]

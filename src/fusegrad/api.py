"""The user API: ``grad``, ``value_and_grad``, ``vjp``, ``elementwise_grad``, ``jacobian``.

Inputs and gradients may be pytrees (tuples, lists, dicts, namedtuples, dataclasses of arrays
and floats); a gradient has its input's structure and dtype.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> fg.grad(lambda x: np.sum(np.tanh(x)))(np.zeros(3))
    array([1., 1., 1.])
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .ad import conversions
from .ad.core import Trace, Tracer, backward, check_array_type, constants_copied
from .ad.error_notes import annotated_errors
from .ad.forward import argument_tuples, cast_like
from .ad.forward import jvp as forward_jvp
from .ad.pytree import flatten, same_structure
from .lazy import LazyArray, Leaf, dask_leaves, materialize_many, replay
from .lazy.dask_leaves import Placeholder
from .lazy.nodes import asarray as lazy_asarray
from .lazy.nodes import current_scope, interning_scope
from .rules.common import materialize
from .rules.registry import is_differentiable, primitive, register_frule, register_rrule
from .tangents import (
    AbstractThunk,
    AbstractZero,
    BroadcastThunk,
    ProjectTo,
    ZeroTangent,
    ownership_scope,
    unthunk,
)

# `np.ndarray` on hot paths read as a module global: numpy has a module __getattr__, which keeps
# CPython 3.11 from specialising any `np.name` lookup (about 300 instructions each, where a
# global costs a few).
_NDARRAY = np.ndarray


def _with_args(fun: Callable, args: tuple, kwargs: dict, nums: tuple[int, ...]) -> Callable:
    """``fun`` as a function of the arguments at positions ``nums`` only, the others fixed."""

    def partial_fun(*selected: Any) -> Any:
        full = list(args)
        for n, v in zip(nums, selected):
            full[n] = v
        return fun(*full, **kwargs)

    return partial_fun


def _normalize_argnums(argnums: Any, nargs: int) -> tuple[int, ...]:
    """``argnums`` as a tuple of non-negative positions, checked against ``nargs``.

    Any integer type is accepted (``np.int64(1)``, as JAX does); a position named twice is an
    error, since each argument has one gradient.

    >>> _normalize_argnums(np.int64(-1), 3)
    (2,)
    """
    nums: tuple[int, ...]
    try:
        nums = (operator.index(argnums),)
    except TypeError:
        try:
            nums = tuple(operator.index(n) for n in argnums)
        except TypeError:
            raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}") from None
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(
                f"argnums={argnums!r} is out of range for a function called with {nargs} "
                f"positional argument(s); use indices from 0 to {nargs - 1}"
            )
    nums = tuple(n % nargs for n in nums)
    if len(set(nums)) != len(nums):
        dup = next(n for n in nums if nums.count(n) > 1)
        raise ValueError(
            f"argnums={argnums!r} names argument {dup} more than once; each argument has one "
            f"gradient: list it once (argnums={tuple(dict.fromkeys(nums))!r})"
        )
    return nums


def _check_differentiable(arg: Any, where: str, holomorphic: bool = False) -> None:
    leaves = flatten(arg)[0]
    for leaf in leaves:
        v = leaf.value if isinstance(leaf, Tracer) else leaf
        check_array_type(v, where)
        if not is_differentiable(v) and not isinstance(v, Tracer):
            raise TypeError(_not_differentiable(v, arg, where))
        if holomorphic and not np.iscomplexobj(_concrete_primal(v)):
            raise TypeError(
                f"holomorphic=True needs complex inputs, but {where} has dtype "
                f"{_dtype_name(v)}: convert it (x.astype(complex)), or drop holomorphic=True"
            )


def _not_differentiable(v: Any, arg: Any, where: str) -> str:
    """Why a leaf ``v`` of the argument ``arg`` has no gradient, and what to do instead."""
    dtype = getattr(v, "dtype", None)
    if dtype is None and not isinstance(v, int | float | complex | bool | str | bytes):
        cls = type(v).__name__
        return (
            f"{where} {'holds' if v is not arg else 'is'} a {cls}, which fusegrad cannot look "
            "inside: a differentiated argument is an array, a number or a container of them "
            "(tuple, list, dict, namedtuple). Register the class as a container with "
            f"fusegrad.register_pytree_node({cls}, flatten, unflatten), or pass its arrays"
        )
    dtype = dtype if dtype is not None else type(v).__name__
    if v is not arg:
        return (
            f"{where} holds a leaf {v!r} of dtype {dtype}, which has no derivative: every leaf "
            "of a differentiated argument must be float or complex. Make it a float "
            "(x.astype(float), or 2.0 for 2), or pass it as another argument left out of argnums"
        )
    return (
        f"{where} has dtype {dtype}, which has no derivative: gradients are only defined for "
        "float or complex inputs. Convert it (x.astype(float)), or leave it out of argnums"
    )


def _dtype_name(v: Any) -> str:
    return str(np.result_type(_concrete_primal(v)))


_REAL_SCALARS = frozenset({np.float64, np.float32, float})


def _check_scalar_output(out: Any, holomorphic: bool, who: str) -> None:
    """``grad``'s output must be one real scalar (complex with ``holomorphic=True``), as in JAX."""
    if type(out) in _REAL_SCALARS and not holomorphic:
        return  # the common case: a NumPy float scalar (what np.sum of an array returns)
    hint = (
        "use fusegrad.vjp for a vector-Jacobian product, fusegrad.elementwise_grad for the sum of "
        "the outputs' gradients, or fusegrad.jacobian for all of them"
    )
    if out is None:
        raise TypeError(
            f"{who} needs a scalar output, but the function returned None (a missing `return`?)"
        )
    if isinstance(out, tuple | list | dict) or (
        dataclasses.is_dataclass(out) and not isinstance(out, type)
    ):
        raise TypeError(
            f"{who} needs a scalar output, but the function returned a "
            f"{type(out).__name__}: return one number; with has_aux=True return a pair "
            f"(output, aux); for several outputs, {hint}"
        )
    primal = _concrete_primal(out)
    if not isinstance(primal, np.ndarray | np.generic | LazyArray | int | float | complex):
        raise TypeError(
            f"{who} needs a scalar output, but the function returned a "
            f"{type(out).__name__} ({out!r:.60}): return a number or a 0-d array"
        )
    if np.shape(primal) != ():
        raise TypeError(
            f"{who} needs a scalar output, but the function returned shape {np.shape(primal)}: "
            f"index it (out[0]) or sum it (np.sum(out)); {hint}"
        )
    dt = np.dtype(getattr(primal, "dtype", None) or np.result_type(primal))
    if holomorphic and dt.kind != "c":
        raise TypeError(
            f"{who} with holomorphic=True needs a complex output, but the function returned "
            f"dtype {dt}"
        )
    if not holomorphic and dt.kind == "c":
        raise TypeError(
            f"{who} needs a real output, but the function returned dtype {dt}. For the complex "
            "derivative of a holomorphic function pass holomorphic=True; for a real loss of "
            "complex values return np.real(...) or np.abs(...)**2; for anything else use "
            "fusegrad.vjp"
        )
    if dt.kind not in "fc":
        raise TypeError(
            f"{who} needs a float output, but the function returned dtype {dt}, which has no "
            "derivative: compute the output in floating point"
        )


def _first(leaves: list) -> Any:
    return leaves[0]


_ONE_BOXED = [True]


def _box_tree(tree: Any, trace: Trace) -> tuple[Any, list, Callable, list[bool]]:
    """``tree`` with its differentiable leaves boxed as inputs of ``trace``; the new tracers;
    and how to rebuild a tree of gradients (``rebuild``, which leaves were boxed)."""
    if type(tree) is _NDARRAY and tree.dtype.kind in "fc":  # the common case: one array
        t = trace.input(tree)
        return t, [t], _first, _ONE_BOXED
    leaves, rebuild = flatten(tree)
    boxed = []
    tracers = []
    mask = []
    for leaf in leaves:
        check_array_type(leaf, "an input")
        if isinstance(leaf, Tracer) or is_differentiable(leaf):
            t = trace.input(leaf)
            boxed.append(t)
            tracers.append(t)
            mask.append(True)
        else:
            boxed.append(leaf)
            mask.append(False)
    return rebuild(boxed), tracers, rebuild, mask


def _unbox_output(
    out: Any, trace: Trace, evaluate: bool = True, scalars: bool = False
) -> tuple[Any, list]:
    """The output's value (lazy parts materialised together, when ``evaluate``) and its tracers
    of ``trace``; with ``scalars`` (an aux value, never seeded), each lazy 0-d value a NumPy
    scalar, as NumPy's ``np.sum`` gives it (and as the small-array path did)."""
    if type(out) is Tracer and out._trace is trace and replay.active() is None:
        value = out.value  # the common case: the traced output itself
        if evaluate and isinstance(value, LazyArray):
            with replay.sanctioned():
                value = materialize_many([value])[0]
        return value, [(out, value)]
    leaves, rebuild = flatten(out)
    tracers: list[Tracer | None] = []
    values = []
    for leaf in leaves:
        if isinstance(leaf, Tracer) and leaf._trace is trace:
            tracers.append(leaf)
            values.append(leaf.value)
        else:
            tracers.append(None)
            values.append(leaf)
    if evaluate and _stays_lazy():
        values = [_lazy(v) for v in values]
    elif evaluate and (
        replay.active() is not None or any(isinstance(v, LazyArray) for v in values)
    ):
        with replay.sanctioned(), replay.reading(replay.NESTED_RESULTS):
            done = materialize_many(values)
        values = [
            replay.note_derived(v[()], v, replay.item)
            if scalars and isinstance(lazy, LazyArray) and type(v) is np.ndarray and v.ndim == 0
            else v
            for lazy, v in zip(values, done)
        ]
    return rebuild(values), list(zip(tracers, values))


def _finish(grads: list, inputs: list, seeds: tuple = ()) -> list:
    """Project cotangents on their inputs and materialise them together, in one planning step."""
    if replay.active() is None:
        arrays = _arrays_in_place(grads, inputs, seeds)
        if arrays is not None:
            return arrays
    projected: list[Any] = []
    projectors: list[ProjectTo | None] = []
    lazy = replay.active() is not None
    for g, x in zip(grads, inputs):
        primal = _concrete_primal(x.value)
        if isinstance(g, AbstractThunk) and not isinstance(g, BroadcastThunk):
            g = unthunk(g)
        if _in_space(g, primal):  # the small-array path's cotangents
            projectors.append(None)
            projected.append(g)
            continue
        lazy = True
        if isinstance(g, AbstractZero):
            zeros = functools.partial(_zeros, np.shape(primal), _float_dtype(primal))
            g = replay.note_derived(zeros(None), None, zeros)
        project = ProjectTo(primal)
        projectors.append(project)
        if isinstance(g, BroadcastThunk) and project.kind in ("pyscalar", "npscalar"):
            projected.append(g)  # projected once materialised, together with the others
        else:
            projected.append(project(g))
    nodes = [g.node if isinstance(g, BroadcastThunk) else g for g in projected]
    fresh = [
        isinstance(n, LazyArray) and not isinstance(n, Leaf) and n.cached is None for n in nodes
    ]
    if lazy and _stays_lazy():
        kept = [
            _projected_lazy(n, p) if isinstance(g, BroadcastThunk) and p is not None else n
            for n, g, p in zip(nodes, projected, projectors)
        ]
        if all(isinstance(k, LazyArray | _NDARRAY) for k in kept):
            return [_lazy(k) for k in kept]
    if lazy:
        with replay.sanctioned(), replay.reading(replay.NESTED_RESULTS):
            values = materialize_many(nodes)
    else:
        values = nodes
    out: list[Any] = []
    for v, g, projector, new in zip(values, projected, projectors, fresh):
        if isinstance(g, BroadcastThunk) and projector is not None:
            # never hand out a view or a value the tape shares
            post = functools.partial(_copy_project, projector, new)
            r = post(v)
            r = replay.note_derived(r, v, post) if r is not v else r
            if type(r) is _NDARRAY and any(
                type(w) is _NDARRAY and np.may_share_memory(r, w) for w in out
            ):  # two arguments' equal cotangents are one node, one array: each gets its own
                r = replay.note_derived(r.copy(), r, _NDARRAY.copy)
            out.append(r)
        else:
            out.append(_handed_out(unthunk(v), out, seeds))
    return out


def _to_recording(out: Any) -> Any:
    """``out``, the results of a transformation called inside a recorded plain function
    (``Recorder.results_stay_lazy``): arrays among them (evaluated, not lazy) make the recording
    unreplayable, since the function's NumPy code reads them eagerly and no kernel records
    that (a ``jacobian`` inside a jitted step replayed its first call's values)."""
    if _stays_lazy() and any(
        type(v) is _NDARRAY or isinstance(v, np.generic) for v in flatten(out)[0]
    ):
        replay.active().refuse(replay.NESTED_RESULTS)  # type: ignore[union-attr]
    return out


def _projected_lazy(node: Any, project: ProjectTo) -> Any:
    """A broadcast cotangent's node projected on its input, unevaluated: the node itself when it
    has the input's shape and dtype (a 0-d array's or a scalar's sum, kept 0-d), else the
    projection on an array input; None otherwise (evaluated then)."""
    if project.kind not in ("array", "pyscalar", "npscalar"):
        return None
    if isinstance(node, LazyArray) and node.shape == project.shape and node.dtype == project.dtype:
        return node
    return project(node) if project.kind == "array" else None


def _stays_lazy() -> bool:
    rec = replay.active()
    return rec is not None and rec.results_stay_lazy()


def _lazy(v: Any) -> Any:
    """A result handed to a recorded function unevaluated (``Recorder.results_stay_lazy``): an
    array as a lazy leaf too, so that the function's NumPy code on it is lazy and recorded."""
    return lazy_asarray(v) if type(v) is _NDARRAY else v


def _arrays_in_place(grads: list, inputs: list, seeds: tuple) -> list | None:
    """The gradients, handed out, when each is an ndarray already in its input's space (shape
    and dtype: the small-array path's cotangents, nothing to project or evaluate); else None."""
    out: list[Any] = []
    for g, x in zip(grads, inputs):
        if not _in_space(g, x.value):
            return None
        out.append(_handed_out(g, out, seeds))
    return out


def _in_space(g: Any, primal: Any) -> bool:
    """Whether ``g`` is an ndarray already in the space of the ndarray ``primal`` (its shape and
    dtype): nothing to project or evaluate."""
    return (
        type(g) is _NDARRAY
        and type(primal) is _NDARRAY
        and g.shape == primal.shape
        and g.dtype == primal.dtype
    )


def _handed_out(v: Any, given: list, seeds: tuple) -> Any:
    """``v`` as a gradient the caller may keep and write into: a copy when it is a view, is
    read-only (a broadcast cotangent), is another gradient of this call, or is a cotangent the
    caller passed in (``x + 0`` hands its cotangent through)."""
    if type(v) is not _NDARRAY:
        return v
    if v.base is not None or not v.flags.writeable or _among(v, given) or _among(v, seeds):
        return replay.note_derived(v.copy(), v, _NDARRAY.copy)  # C order, as np.array
    return v


def _among(v: Any, values: Sequence) -> bool:
    """Whether ``v`` is one of ``values`` (identity, not equality)."""
    for w in values:
        if v is w:
            return True
    return False


def _shape(x: Any) -> tuple:
    if type(x) is float:
        return ()
    s = getattr(x, "shape", None)
    return tuple(np.shape(x) if s is None else s)


_PLAIN = (np.ndarray, float)


def _plain(primals: tuple) -> bool:
    """Whether every primal is an ndarray or a float (no pytree, no Dask array to look for)."""
    for p in primals:
        if type(p) not in _PLAIN:
            return False
    return True


def _zeros(shape: tuple, dtype: Any, _: Any) -> np.ndarray:
    return np.zeros(shape, dtype)


def _copy_project(project: ProjectTo, fresh: bool, v: Any) -> Any:
    return project(v if fresh else np.array(v))


def _concrete_primal(v: Any) -> Any:
    while isinstance(v, Tracer):
        v = v.value
    return replay.original(v)


def _float_dtype(v: Any) -> Any:
    v = _concrete_primal(v)
    dt = getattr(v, "dtype", np.dtype(float))
    return dt if np.issubdtype(dt, np.inexact) else np.float64


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(out, vjp_fn)``: ``vjp_fn(ct)`` gives one cotangent per primal (same structure).

    ``vjp_fn`` gives the answer at the time of the ``vjp`` call even if the primals (or arrays
    ``fun`` reads from a closure) are written into before it is called: it works on copies.

    >>> out, f_vjp = vjp(np.sin, np.zeros(2))
    >>> f_vjp(np.ones(2))
    (array([1., 1.]),)
    """
    with replay.api_call(), conversions.tracing():
        res = _vjp(fun, primals, has_aux, evaluate=True, snapshot=True)
        _to_recording(res[0] if not has_aux else (res[0], res[2]))
    pull = res[1]

    def vjp_fn(ct: Any) -> tuple:
        with replay.api_call():
            return _to_recording(pull(ct))

    return (res[0], vjp_fn, *res[2:])


def _vjp(
    fun: Callable, primals: tuple, has_aux: bool, evaluate: bool, snapshot: bool = False
) -> tuple:
    # The small-array path stays on inside grad/vjp: an op on small concrete values runs
    # eagerly (its value is a leaf of the tape, its pullback eager on small cotangents), so a
    # small gradient costs NumPy's work plus the tape; anything touching a large or lazy value
    # stays lazy and fused, with its memory bounds. jit's recording turns it off (fusing()).
    # The call's interning scope: nothing computed before it is reused. Dask array inputs:
    # lazy/dask_leaves.py.
    if not _plain(primals) and dask_leaves.present(primals, flatten):
        return dask_leaves.vjp(_vjp, flatten, fun, primals, has_aux, evaluate, snapshot)
    if snapshot and replay.active() is not None:
        # a recording reads the arrays fun closes over at each replay (a copy would be a
        # constant: a step's jacobian of X @ u replayed X's first contents after X *= 1.1)
        snapshot = False
    with interning_scope():
        return _traced_vjp(fun, primals, has_aux, evaluate, snapshot)


def _tree_name(tree: Any) -> str:
    """A short description of a tree's top: its type, and a dict's keys."""
    if isinstance(tree, dict):
        return f"{type(tree).__name__} with keys {sorted(map(str, tree))}"
    if isinstance(tree, tuple | list):
        return f"{type(tree).__name__} of {len(tree)}"
    return type(tree).__name__


def _own(tree: Any) -> Any:
    """``tree`` with private copies of its NumPy arrays."""
    leaves, rebuild = flatten(tree)
    for v in leaves:
        check_array_type(v, "an input")  # np.array would drop a mask silently
    # (a view of a Dask input's placeholder is read from the Dask array later: dask_leaves.vjp)
    return rebuild(
        [
            np.array(v) if isinstance(v, np.ndarray) and type(v) is not Placeholder else v
            for v in leaves
        ]
    )


def _traced_vjp(
    fun: Callable, primals: tuple, has_aux: bool, evaluate: bool, snapshot: bool = False
) -> tuple:
    # evaluate=False leaves a lazy output unevaluated: grad does not return it, and the backward
    # kernels recompute whatever part of it they need, fused (so a gradient whose adjoint does
    # not depend on the forward value, like that of sum((v[:, None] - v[None, :]) / 2), costs
    # O(N) where the value itself costs O(N^2)).
    # snapshot=True (the public vjp, whose pullback outlives the call): the pullback must give
    # the call-time answer even if the user writes into the primals, a closure array or the
    # returned output before calling it, so it reads copies of all three.
    if snapshot:
        primals = tuple(_own(p) for p in primals)
    trace = Trace()
    scope = current_scope()  # the pullback adds its nodes to the forward's (shared leaves)
    boxes = [_box_tree(p, trace) for p in primals]
    boxed = [b[0] for b in boxes]
    inputs_per_arg = [b[1] for b in boxes]
    with annotated_errors():
        if snapshot:
            with constants_copied():
                result = fun(*boxed)
        else:
            result = fun(*boxed)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError("has_aux=True needs the function to return a pair (output, aux)")
        result, aux = result
        aux, _ = _unbox_output(aux, trace, scalars=True)
    out, pairs = _unbox_output(result, trace, evaluate)
    trace.done = True  # (its tracers are not to be used again: see core._leaked)
    if snapshot:
        out = _own(out)

    def vjp_fn(ct: Any) -> tuple:
        with interning_scope(scope):
            return _pull(ct)

    def _pull(ct: Any) -> tuple:
        ct_leaves, _ = flatten(ct)
        if len(ct_leaves) == len(pairs) > 1 and not same_structure(ct, out):
            # leaves paired in another order (a list for a dict output) would be silently wrong
            raise ValueError(
                f"the cotangent's structure ({_tree_name(ct)}) is not the output's "
                f"({_tree_name(out)}): give the cotangent as the output is, the same dict keys "
                "and nesting"
            )
        if len(ct_leaves) != len(pairs):
            raise ValueError(
                f"the cotangent has {len(ct_leaves)} leaves but the output has {len(pairs)}: "
                "give one cotangent per output leaf, with the output's structure"
            )
        seeds = []
        for (t, v), c in zip(pairs, ct_leaves):
            check_array_type(c, "the cotangent")
            if t is None:
                continue
            if _shape(c) != _shape(v):
                raise ValueError(
                    f"the cotangent has shape {_shape(c)} but the output has shape "
                    f"{_shape(v)}: they must match"
                )
            if np.iscomplexobj(c) and not np.iscomplexobj(v):
                # its imaginary part would be dropped: a real output's cotangent is real
                raise TypeError(
                    f"the cotangent is complex ({np.result_type(c)}) but the output is real "
                    f"({np.result_type(v)}): give a real cotangent (np.real of it, if that is "
                    "what you meant)"
                )
            seeds.append((t, c))
        all_inputs = [t for ins in inputs_per_arg for t in ins]
        with ownership_scope():
            grads = _finish(backward(seeds, all_inputs), all_inputs, tuple([c for _, c in seeds]))
        it = iter(grads)
        return tuple(
            [rebuild([next(it) if m else None for m in mask]) for _, _, rebuild, mask in boxes]
        )

    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn


def value_and_grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable:
    """A function returning ``(fun(*args), gradient)``; see ``grad``.

    >>> value_and_grad(lambda x: np.sum(x * x))(np.ones(2))
    (np.float64(2.0), array([2., 2.]))
    """
    return _value_and_grad(fun, argnums, has_aux, with_value=True, holomorphic=holomorphic)


def _value_and_grad(
    fun: Callable, argnums: Any, has_aux: bool, with_value: bool, holomorphic: bool = False
) -> Callable:
    """``value_and_grad`` (``with_value``) or ``grad``: the one implementation of both; ``grad``'s
    function returns the gradient (with ``has_aux``, the pair ``(gradient, aux)``)."""
    who = "value_and_grad" if with_value else "grad"
    single = _is_int(argnums)
    one_array_ok = single and not has_aux and not holomorphic

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with replay.api_call(), conversions.tracing():
            return _to_recording(_call(args, kwargs))

    checked: dict[int, tuple[int, ...]] = {}  # number of arguments -> argnums normalised

    def _call(args: tuple, kwargs: dict) -> Any:
        nums = checked.get(len(args))
        if nums is None:
            nums = checked[len(args)] = _normalize_argnums(argnums, len(args))
        for n in nums:
            a = args[n]
            if type(a) is _NDARRAY and a.dtype.kind == "f" and not holomorphic:
                continue  # the common case, differentiable as it is
            _check_differentiable(
                a, f"argument {n} of {getattr(fun, '__name__', 'fun')}", holomorphic
            )

        if one_array_ok and type(args[nums[0]]) is _NDARRAY:
            out, g = _grad_of_array(fun, args, kwargs, nums[0], with_value, who)
        else:
            partial_fun = _with_args(fun, args, kwargs, nums)
            primals = tuple([args[n] for n in nums])
            res = _vjp(partial_fun, primals, has_aux, evaluate=with_value)
            out, f_vjp = res[0], res[1]
            _check_scalar_output(out, holomorphic, who)
            ct = np.ones((), _float_dtype(out))[()] if holomorphic else 1.0
            grads = f_vjp(ct)
            g = grads[0] if single else grads
            if has_aux:
                out = (out, res[2])
        if not with_value:
            return (g, out[1]) if has_aux else g
        if has_aux:
            value = out[0]
            if isinstance(value, _NDARRAY) and value.shape == ():
                out = (replay.note_derived(value[()], value, replay.item), out[1])
            return out, g
        if isinstance(out, _NDARRAY) and out.shape == ():
            out = replay.note_derived(out[()], out, replay.item)
        return out, g

    wrapped.__fusegrad_api__ = True  # type: ignore[attr-defined]
    return wrapped


def _grad_of_array(
    fun: Callable, args: tuple, kwargs: dict, n: int, with_value: bool, who: str
) -> tuple:
    """``(output, gradient)`` of ``fun`` in its argument ``n``, an ndarray, without aux or
    ``holomorphic``: the steps of ``_vjp`` and its pullback for the commonest call, without their
    pytrees, closures and second interning scope (a fixed cost every small gradient paid)."""
    with interning_scope():
        trace = Trace()
        x = trace.input(args[n])
        with annotated_errors():
            if len(args) == 1:
                result = fun(x, **kwargs)
            else:
                full = list(args)
                full[n] = x
                result = fun(*full, **kwargs)
        out, pairs = _unbox_output(result, trace, with_value)
        trace.done = True
        _check_scalar_output(out, False, who)
        # one scalar output: its tracer (None for a constant, whose gradient is zero)
        seeds = [(t, 1.0) for t, _ in pairs if t is not None]
        with ownership_scope():
            (g,) = _finish(backward(seeds, [x]), [x], (1.0,) if seeds else ())
    return out, g


def _is_int(argnums: Any) -> bool:
    try:
        operator.index(argnums)
    except TypeError:
        return False
    return True


def grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable:
    """The gradient of a scalar function, as a function of the same arguments.

    ``argnums`` picks the arguments to differentiate (an int, or a tuple for a tuple of
    gradients); with ``has_aux`` the function returns ``(output, aux)`` and so does ``grad``.
    The output must be a real scalar. Complex inputs follow JAX's convention (the gradient of a
    real loss ``L(z)`` is ``dL/dx - i dL/dy``: step along its conjugate); with
    ``holomorphic=True`` inputs and output are complex and the result is ``f'(z)``.

    >>> grad(lambda x, y: np.sum(x * y), argnums=(0, 1))(np.ones(2), np.full(2, 3.0))
    (array([3., 3.]), array([1., 1.]))
    >>> grad(lambda z: z * z, holomorphic=True)(1.0 + 2.0j)
    (2+4j)
    """
    return _value_and_grad(fun, argnums, has_aux, with_value=False, holomorphic=holomorphic)


def elementwise_grad(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The vector-Jacobian product with a cotangent of ones: for elementwise ``fun``, its derivative
    at every point.

    >>> elementwise_grad(np.sin)(np.zeros(3))
    array([1., 1., 1.])
    """

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with replay.api_call(), conversions.tracing():
            return _to_recording(_call(args, kwargs))

    checked: dict[int, tuple[int, ...]] = {}  # number of arguments -> argnums normalised

    def _call(args: tuple, kwargs: dict) -> Any:
        nums = checked.get(len(args))
        if nums is None:
            nums = checked[len(args)] = _normalize_argnums(argnums, len(args))

        for n in nums:
            _check_differentiable(args[n], f"argument {n} of elementwise_grad")
        partial_fun = _with_args(fun, args, kwargs, nums)
        primals = tuple(args[n] for n in nums)
        out, f_vjp = _vjp(partial_fun, primals, False, evaluate=True, snapshot=True)[:2]
        if _kind(out) not in ("f", "i", "u", "b"):
            # (a complex output's imaginary part, a string: their gradient came back as zeros)
            raise TypeError(
                f"elementwise_grad needs a real array output, but the function returned "
                f"{_dtype_or_type(out)}: for a complex output use vjp or "
                "jacobian(holomorphic=True)"
            )
        ones = np.broadcast_to(np.ones((), dtype=_float_dtype(out)), np.shape(out))
        grads = f_vjp(ones)
        return grads[0] if _is_int(argnums) else grads

    wrapped.__fusegrad_api__ = True  # type: ignore[attr-defined]
    return wrapped


def _kind(x: Any) -> str | None:
    """The dtype kind of an array, a traced or lazy value, or a number; None for anything else."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None:
        return np.dtype(dtype).kind
    return np.result_type(x).kind if isinstance(x, int | float | complex) else None


def _dtype_or_type(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    return f"dtype {np.dtype(dtype)}" if dtype is not None else type(x).__name__


def jacobian(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    holomorphic: bool = False,
    has_aux: bool = False,
) -> Callable:
    """The full Jacobian, of shape ``out.shape + x.shape``, one vjp per output element.

    As JAX's ``jacrev``: a complex output needs ``holomorphic=True`` (and complex inputs), which
    gives the complex derivatives ``df_i/dz_j``; with ``has_aux=True`` ``fun`` returns
    ``(output, aux)`` and the result is ``(jacobian, aux)``.

    >>> jacobian(lambda x: x * 2)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    """
    single = _is_int(argnums)

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with replay.api_call(), conversions.tracing():
            return _to_recording(_call(args, kwargs))

    checked: dict[int, tuple[int, ...]] = {}  # number of arguments -> argnums normalised

    def _call(args: tuple, kwargs: dict) -> Any:
        nums = checked.get(len(args))
        if nums is None:
            nums = checked[len(args)] = _normalize_argnums(argnums, len(args))
        name = getattr(fun, "__name__", "fun")
        for n in nums:
            _check_differentiable(args[n], f"argument {n} of {name}", holomorphic)

        partial_fun = _with_args(fun, args, kwargs, nums)
        pulled = _vjp(partial_fun, tuple(args[n] for n in nums), has_aux, True, snapshot=True)
        out, f_vjp = pulled[0], pulled[1]
        out_leaves, rebuild_out = flatten(out)
        if not out_leaves or not all(
            isinstance(
                _concrete_primal(v), np.ndarray | np.generic | int | float | complex | LazyArray
            )
            for v in out_leaves
        ):
            raise TypeError(
                f"jacobian needs the function to return arrays (or a tuple, list or dict of "
                f"them), but it returned a {type(out).__name__}"
            )
        dtypes = [np.dtype(_float_dtype(v)) for v in out_leaves]
        for out_dt in dtypes:
            if out_dt.kind == "c" and not holomorphic:
                raise TypeError(
                    f"jacobian needs a real output, but the function returned dtype {out_dt}. "
                    "For the complex derivatives of a holomorphic function pass "
                    "holomorphic=True; for anything else use fusegrad.vjp"
                )
            if holomorphic and out_dt.kind != "c":
                raise TypeError(
                    "jacobian with holomorphic=True needs a complex output, but the function "
                    f"returned dtype {out_dt}"
                )
        per_output = [
            _jacobian_of_leaf(f_vjp, out_leaves, rebuild_out, i, dtypes[i], args, nums, single)
            for i in range(len(out_leaves))
        ]
        return (rebuild_out(per_output), pulled[2]) if has_aux else rebuild_out(per_output)

    wrapped.__fusegrad_api__ = True  # type: ignore[attr-defined]
    return wrapped


def _jacobian_of_leaf(f_vjp, out_leaves, rebuild_out, i, out_dt, args, nums, single) -> Any:
    """The Jacobian of output leaf ``i``: one vjp per element, seeded with zeros elsewhere; per
    argument of ``nums`` (a pytree: per leaf), shape ``leaf_out.shape + leaf_in.shape``."""
    oshape = np.shape(out_leaves[i])
    size = int(np.prod(oshape, dtype=np.int64))
    zeros = [np.zeros(np.shape(v), np.dtype(_float_dtype(v))) for v in out_leaves]
    rows = []
    for k in range(size):
        e = np.zeros(size, dtype=out_dt)
        e[k] = 1.0
        seed = list(zeros)
        seed[i] = e.reshape(oshape) if oshape else e[0][()]
        rows.append(f_vjp(rebuild_out(seed) if len(out_leaves) > 1 else seed[i]))
    results = []
    for k, n in enumerate(nums):
        # per leaf of a pytree argument: stack the rows, shape out.shape + leaf.shape
        x_leaves, rebuild = flatten(args[n])
        row_leaves = [flatten(r[k])[0] for r in rows]
        jac = []
        for j, x in enumerate(x_leaves):
            xshape = np.shape(x)
            # a step of a jit recording (a NumPy call on the rows outside the kernels made the
            # jitted jacobian and hessian run uncompiled)
            stacked = (
                replay.step(_stack_rows, ([r[j] for r in row_leaves],), {}, materialize)
                if rows
                else np.zeros((0,) + xshape)
            )
            jac.append(np.reshape(stacked, oshape + xshape))
        results.append(rebuild(jac))
    return results[0] if single else tuple(results)


def _stack_rows(rows: list) -> np.ndarray:
    return np.stack([np.asarray(r) for r in rows])


def jvp(
    fun: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple:
    """``(fun(*primals), J · tangents)``: the Jacobian-vector product, by one forward pass. With
    ``has_aux=True`` ``fun`` returns ``(output, aux)``, and ``jvp`` ``(output, tangent, aux)``.

    Every primitive runs its ``frule`` (``fusegrad.ad.forward``); the tangents of elementwise work
    are lazy and fuse into the primal's kernels, so a reduction's value and tangent come out of one
    pass. Nests with ``grad``/``vjp`` in any order (trace levels keep perturbations apart).

    >>> jvp(np.sin, (np.zeros(2),), (np.ones(2),))
    (array([0., 0.]), array([1., 1.]))
    """
    for leaf in flatten(tuple(primals))[0]:
        check_array_type(leaf, "a primal")
    _no_dask("jvp", primals, tangents)
    with conversions.tracing():
        return forward_jvp(fun, primals, tangents, has_aux=has_aux)


def _no_dask(who: str, primals: Any, tangents: Any) -> None:
    """Refuse Dask arrays among a forward-mode call's primals or tangents, by name."""
    for what, tree in (("primal", primals), ("tangent", tangents)):
        if any(dask_leaves.is_dask_array(v) for v in flatten(tree)[0]):
            raise TypeError(
                f"{who} got a dask.array {what}: Dask arrays are inputs of the reverse mode only "
                "(grad, value_and_grad, vjp, whose pullback also takes a Dask cotangent); "
                f"forward mode does not take them. Pass x.compute() (np.asarray(x)) to {who}"
                + (", or use vjp" if who == "jvp" else "")
            )


def hvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """The Hessian-vector product ``H · v`` of a scalar function, without forming ``H``.

    Forward-over-reverse: the ``jvp`` of ``grad(fun)`` along ``v``. Only the tangent is evaluated;
    the gradient and its tangent stay lazy until then, so the whole product is fused kernels.

    >>> hvp(lambda x: np.sum(x ** 3), (np.ones(2),), (np.ones(2),))
    array([6., 6.])
    """
    primals, tangents = argument_tuples("hvp", primals, tangents)
    _no_dask("hvp", primals, tangents)
    nums = tuple(range(len(primals)))
    with conversions.tracing():
        _, out = forward_jvp(grad(fun, argnums=nums), primals, tangents, primal_out=False)
    out = cast_like(out, primals)
    return out[0] if len(primals) == 1 else out


def hessian(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of a scalar function: ``jacobian(grad(fun))``. With a sequence of
    ``argnums``, the blocks ``H[i][j] = ∂²fun / ∂argᵢ ∂argⱼ`` as a tuple of tuples (as JAX).

    >>> hessian(lambda x: np.sum(x ** 3))(np.ones(2))
    array([[6., 0.],
           [0., 6.]])
    >>> hessian(lambda x, y: np.sum(x * y ** 2), argnums=(0, 1))(np.ones(1), np.ones(1))[0][1]
    array([[2.]])
    """
    if isinstance(argnums, int | np.integer):
        square = jacobian(grad(fun, argnums), argnums)

        @functools.wraps(fun)  # (jit's warnings name the user's function)
        def matrix(*args: Any, **kwargs: Any) -> Any:
            _real_inputs_for_hessian(args, (int(argnums),))
            return square(*args, **kwargs)

        matrix.__fusegrad_api__ = True  # type: ignore[attr-defined]
        return matrix
    nums = tuple(argnums)
    gradient = grad(fun, nums)

    @functools.wraps(fun)
    def blocks(*args: Any, **kwargs: Any) -> tuple:
        _real_inputs_for_hessian(args, nums)
        # row i: the jacobian of the i-th gradient in every argument of argnums
        return tuple(
            jacobian(lambda *a, _i=i: gradient(*a, **kwargs)[_i], nums)(*args)
            for i in range(len(nums))
        )

    blocks.__fusegrad_api__ = True  # type: ignore[attr-defined]
    return blocks


def _real_inputs_for_hessian(args: tuple, nums: tuple) -> None:
    for n in nums:
        if n < len(args) and any(np.iscomplexobj(_concrete_primal(v)) for v in flatten(args[n])[0]):
            raise TypeError(
                f"hessian got a complex argument {n}: the gradient of a real function of it is "
                "complex, which has no Jacobian (it is not holomorphic). Take the Hessian in the "
                "real and imaginary parts: pass them as real arrays and build z = x + 1j * y"
            )


def deriv(fun: Callable) -> Callable:
    """The derivative of a scalar function of one scalar variable.

    >>> deriv(np.sin)(0.0)
    1.0
    """
    return grad(fun)


def checkpoint(fun: Callable) -> Callable:
    """``fun`` whose forward values are recomputed in the backward pass instead of stored.

    The tape keeps only ``fun``'s inputs; its pullback re-runs ``fun`` under ``vjp``. ``fun``
    may return any pytree; keyword arguments are passed through as constants. Arrays and traced
    values ``fun`` reads from its closure (a layer's parameters) are inputs too, as JAX's
    ``checkpoint`` converts closures: the re-run sees them as they were at the call, and they
    get their derivatives.

    >>> f = checkpoint(lambda x: np.sum(np.exp(x)))
    >>> grad(f)(np.zeros(2))
    array([1., 1.])
    >>> grad(lambda x: checkpoint(lambda x, k: {"y": np.sum(x * k)})(x, k=3.0)["y"])(np.zeros(2))
    array([3., 3.])
    """
    built = threading.local()  # how the last call's output is rebuilt from its leaves

    def run(args: tuple, kwargs: dict) -> tuple:
        # args: the closure's converted values first (one tuple), then fun's own arguments
        cells = kwargs.pop(_CLOSURE_CELLS, ())
        args = dask_leaves.lazy(args, flatten)  # a Dask input's placeholder: its leaf again
        f = _with_closure(fun, cells, args[0]) if cells else fun
        leaves, built.rebuild = flatten(f(*args[1:], **kwargs))
        return tuple(leaves)

    # the primitive the tape records returns the output's leaves (a tuple is boxed leaf by
    # leaf; a dict would not be, and its gradient would be lost)
    leaves_of = primitive(functools.wraps(fun)(lambda *args, **kwargs: run(args, dict(kwargs))))

    @register_rrule(leaves_of)
    def _rule(*args: Any, **kwargs: Any) -> tuple:
        y = run(args, dict(kwargs))

        def pullback(dy: Any) -> tuple:
            _, f_vjp = vjp(lambda *a: run(a, dict(kwargs)), *args)
            cts = tuple(
                np.zeros_like(v) if isinstance(d, AbstractZero) else unthunk(d)
                for d, v in zip(dy, y)
            )
            return f_vjp(cts)

        return y, pullback

    @register_frule(leaves_of)
    def _forward(tangents: tuple, *args: Any, **kwargs: Any) -> tuple:
        tangents = (_tuple_tangent(tangents[0], args[0]), *tangents[1:])
        return jvp(lambda *a: run(a, dict(kwargs)), args, tangents)

    @functools.wraps(fun)
    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        for k, v in kwargs.items():
            if any(isinstance(leaf, Tracer) for leaf in flatten(v)[0]):
                raise TypeError(
                    f"checkpoint: keyword argument {k!r} is traced; keyword arguments are "
                    "constants of a checkpointed function: pass it positionally"
                )
        cells, values = _closure_inputs(fun)
        out = leaves_of(values, *args, **kwargs, **{_CLOSURE_CELLS: cells})
        return built.rebuild(list(out))

    return checkpointed


_CLOSURE_CELLS = "__fusegrad_closure_cells__"  # (a keyword of checkpoint's primitive)


def _closure_inputs(fun: Callable) -> tuple[tuple, tuple]:
    """The closure cells of ``fun`` holding arrays or traced values (alone or in a list, tuple
    or dict), and their values: what ``checkpoint`` passes as inputs."""
    cells = getattr(fun, "__closure__", None) or ()
    indices, values = [], []
    for i, cell in enumerate(cells):
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell (a name assigned later)
            continue
        if isinstance(v, Tracer | np.ndarray | LazyArray) or (
            isinstance(v, list | tuple | dict)
            and any(isinstance(leaf, Tracer | np.ndarray) for leaf in _leaves_or_none(v))
        ):
            indices.append(i)
            values.append(v)
    return tuple(indices), tuple(values)


def _leaves_or_none(v: Any) -> list:
    try:
        return flatten(v)[0]
    except TypeError:
        return []


def _with_closure(fun: Callable, cells: tuple, values: tuple) -> Callable:
    """A copy of ``fun`` whose closure cells ``cells`` hold ``values`` (the others shared)."""
    closure = list(fun.__closure__ or ())
    for i, v in zip(cells, values):
        closure[i] = types.CellType(v)
    copy = types.FunctionType(
        fun.__code__, fun.__globals__, fun.__name__, fun.__defaults__, tuple(closure)
    )
    copy.__kwdefaults__ = fun.__kwdefaults__
    return copy


def _tuple_tangent(t: Any, values: tuple) -> Any:
    """The closure values' tangent as a tuple of the same length (forward mode gives a list,
    or a zero for none)."""
    if isinstance(t, AbstractZero) or t is None:
        return tuple(ZeroTangent() for _ in values)
    return tuple(t)

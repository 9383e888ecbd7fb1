"""Check rules and whole gradients against finite differences.

``check_rrule(f, *args)`` and ``check_frule(f, *args)`` test the registered rules of ``f``;
``check_grads(fun)(*args)`` tests the AD engine on a whole function. All raise ``AssertionError``
naming the argument, both values (rule and finite differences) and the worst element::

    >>> check_rrule(np.sin, np.array([0.1, 0.2]))
    >>> check_grads(lambda x: np.sum(np.tanh(x)))(np.array([0.3, -1.0]))

Complex numbers follow JAX's convention: a cotangent pairs with a value as ``Re(Σ ct·y)`` (no
conjugate), so for a complex argument ``z = x + iy`` and the real loss ``L = Re(Σ ȳ·f(z))`` the
reverse rule must return ``∂L/∂x - i ∂L/∂y`` (``ȳ·f'(z)`` for a holomorphic ``f``); both parts are
checked by finite differences along ``x`` and along ``y``::

    >>> check_rrule(np.abs, np.array([1 + 2j, -0.5j]))   # z̄ = ȳ·conj(z)/|z|

Finite differences use a 5-point central stencil, step ``eps**(1/5) * max(1, |x|)`` in float64:
float32 (and complex64) inputs are upcast for the finite differences, and compared with float32
tolerances. Small arguments (up to ``max_fd_elements`` elements) are checked element by element;
larger ones along a random direction. Random tangents are seeded (``seed=0``).
"""

from __future__ import annotations

import copy
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from . import api
from .rules import registry
from .tangents import (
    AbstractZero,
    NoTangent,
    Thunk,
    ZeroTangent,
    iadd,
    mark_owned,
    tangent_dtype,
    unthunk,
)

_EPS = float(np.finfo(np.float64).eps)
_EPS5 = _EPS**0.2
_ROUNDING = 16  # ulps two evaluations of a long computation at one point may differ by
_TOLERANCES = {"float64": (1e-5, 1e-8), "float32": (2e-3, 1e-4)}
MAX_FD_ELEMENTS = 128

# ---------------------------------------------------------------- leaves and small pytrees


def _is_diff_leaf(x: Any) -> bool:
    if isinstance(x, bool | np.bool_):
        return False
    if isinstance(x, float | complex | np.inexact):
        return True
    if isinstance(x, numbers.Number | str | bytes | type | np.dtype):
        return False  # a type (np.complex128) has a class attribute named dtype
    dtype = getattr(x, "dtype", None)
    return dtype is not None and hasattr(x, "shape") and np.issubdtype(dtype, np.inexact)


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, tuple | list):
        return [leaf for v in x for leaf in _leaves(v)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x, key=str) for leaf in _leaves(x[k])]
    return [x]


def _unflatten(like: Any, leaves: list[Any]) -> Any:
    it = iter(leaves)

    def build(x: Any) -> Any:
        if isinstance(x, tuple | list):
            vals = [build(v) for v in x]
            if isinstance(x, list):
                return vals
            return type(x)(*vals) if hasattr(type(x), "_fields") else tuple(vals)
        if isinstance(x, dict):
            return {k: build(x[k]) for k in sorted(x, key=str)}
        return next(it)

    return build(like)


def _cot_leaves(ct: Any, like: Any) -> list[Any]:
    """The cotangent ``ct`` of ``like``, one entry per leaf of ``like`` (zeros spread out)."""
    if not isinstance(like, tuple | list | dict):
        return [ct]  # kept as is, so that an InplaceThunk reaches the iadd check
    ct = unthunk(ct)
    if isinstance(ct, AbstractZero):
        return [ct] * len(_leaves(like))
    if True:
        if isinstance(like, dict) and isinstance(ct, dict):
            return [
                v
                for k in sorted(like, key=str)
                for v in _cot_leaves(ct.get(k, ZeroTangent()), like[k])
            ]
        if isinstance(like, tuple | list) and isinstance(ct, tuple | list) and len(ct) == len(like):
            return [v for c, x in zip(ct, like, strict=True) for v in _cot_leaves(c, x)]
        raise AssertionError(
            f"the cotangent of a {type(like).__name__} must be a {type(like).__name__} of the same "
            f"structure, got {type(ct).__name__}: {ct!r}"
        )


def _as_array(x: Any, like: Any = None) -> np.ndarray:
    x = unthunk(x)
    if isinstance(x, AbstractZero):
        shape = np.shape(like) if like is not None else ()
        dtype = tangent_dtype(getattr(like, "dtype", np.float64)) or np.float64
        return np.zeros(shape, dtype)
    return np.asarray(x)


def _upcast(x: Any) -> Any:
    if isinstance(x, tuple | list | dict):
        return _unflatten(x, [_upcast(v) for v in _leaves(x)])
    if (
        isinstance(x, np.ndarray | np.generic)
        and x.dtype.kind in "fc"
        and x.dtype.itemsize < (16 if x.dtype.kind == "c" else 8)
    ):
        return np.asarray(x, np.complex128 if x.dtype.kind == "c" else np.float64)
    if _is_diff_leaf(x) and not isinstance(x, np.ndarray | np.generic | float | complex):
        return np.asarray(x)  # a lazy array: finite differences run eagerly
    return x


def _random_like(x: Any, rng: np.random.Generator) -> Any:
    x = unthunk(x)
    if isinstance(x, AbstractZero):
        return x
    if isinstance(x, tuple | list | dict):
        return _unflatten(x, [_random_like(v, rng) for v in _leaves(x)])
    if not _is_diff_leaf(x):
        return NoTangent()
    if isinstance(x, float):
        return float(rng.standard_normal())
    if isinstance(x, complex):
        return complex(rng.standard_normal(), rng.standard_normal())
    dtype = np.dtype(x.dtype)
    val = rng.standard_normal(np.shape(x))
    if dtype.kind == "c":
        val = val + 1j * rng.standard_normal(np.shape(x))
    val = np.asarray(val, dtype)
    return dtype.type(val) if isinstance(x, np.generic) else val


def _pair(ct: Any, y: Any) -> float:
    """<ct, y> = Re(sum(ct * y)) over every leaf (JAX's pairing: no conjugate); zeros contribute
    nothing."""
    total = 0.0
    for c, v in zip(_cot_leaves(ct, y), _leaves(y), strict=True):
        c = unthunk(c)
        if isinstance(c, AbstractZero) or not _is_diff_leaf(v):
            continue
        c = np.asarray(c, np.complex128 if np.iscomplexobj(c) else np.float64)
        total += float(np.sum(np.real(c * np.asarray(v))))
    return total


def _step_leaf(x: Any, t: float, direction: Any) -> Any:
    if isinstance(x, float | complex):
        return x + t * direction
    return np.asarray(x) + t * direction


def _fd(g: Callable[[float], Any], h: float) -> Any:
    # 5-point central stencil: error O(h**4), rounding O(eps / h); h ~ eps**(1/5) balances them.
    return (
        -np.asarray(g(2 * h)) + 8 * np.asarray(g(h)) - 8 * np.asarray(g(-h)) + np.asarray(g(-2 * h))
    ) / (12 * h)


def _tolerances(values: list[Any], rtol: float | None, atol: float | None) -> tuple[float, float]:
    low = any(
        np.dtype(getattr(v, "dtype", np.float64)) in (np.float32, np.complex64, np.float16)
        for v in values
    )
    r, a = _TOLERANCES["float32" if low else "float64"]
    return (r if rtol is None else rtol), (a if atol is None else atol)


def _fmt(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), precision=6, threshold=20, edgeitems=3)


def _assert_close(
    what: str,
    got: Any,
    want: Any,
    rtol: float,
    atol: float,
    labels: tuple[str, str] = ("rule", "finite differences"),
    floor: Any = 0.0,
) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(
            f"{what}: {labels[0]} has shape {got.shape}, {labels[1]} shape {want.shape}"
        )
    err = np.abs(got - want)
    tol = atol * max(1.0, float(np.max(np.abs(want), initial=0.0))) + rtol * np.abs(want)
    tol = tol + floor  # the finite differences' own rounding (``_fd_jvp``)
    both_nan = np.isnan(got) & np.isnan(want)
    bad = ~(err <= tol) & ~both_nan
    if not bad.any():
        return
    excess = np.where(bad, np.nan_to_num(err - tol, nan=np.inf), -np.inf)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), got.shape))
    raise AssertionError(
        f"{what}: {labels[0]} and {labels[1]} differ at {int(bad.sum())} of {got.size} "
        f"element(s) (rtol={rtol}, atol={atol}); worst at index {idx}: {labels[0]} "
        f"{got[idx].item()!r}, {labels[1]} {want[idx].item()!r}\n"
        f"  {labels[0] + ':':<20}{_fmt(got)}\n  {labels[1] + ':':<20}{_fmt(want)}"
    )


def _same(a: Any, b: Any) -> bool:
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=True):
        if isinstance(x, np.ndarray | np.generic) or isinstance(y, np.ndarray | np.generic):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                return False
        elif x is not y and not (x == y or (x != x and y != y)):
            return False
    return True


def _arg_names(f: Any, n: int) -> list[str]:
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        p = params[i] if i < len(params) and not params[i].startswith("*") else None
        names.append(f"argument {i} ({p})" if p else f"argument {i}")
    return names


def _fname(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


# ---------------------------------------------------------------- finite-difference gradients


def _fd_gradient(loss: Callable[[list[Any]], float], leaves: list[Any], k: int) -> np.ndarray:
    """d loss / d leaves[k], element by element; for a complex leaf ``x + iy``, JAX's cotangent
    ``d loss/dx - 1j * d loss/dy``."""
    x = leaves[k]
    arr = np.asarray(x)
    out = np.zeros(arr.shape, np.complex128 if arr.dtype.kind == "c" else np.float64)
    for idx in np.ndindex(arr.shape):
        h = _EPS5 * max(1.0, abs(complex(arr[idx])))
        units = (1.0, 1j) if arr.dtype.kind == "c" else (1.0,)
        for unit in units:
            e: Any = np.zeros(arr.shape, out.dtype)
            e[idx] = unit
            if isinstance(x, float | complex):
                e = e.item()

            def g(t: float, e: Any = e) -> float:
                moved = list(leaves)
                moved[k] = _step_leaf(x, t, e)
                return loss(moved)

            d = float(_fd(g, h))
            out[idx] += d if unit == 1.0 else -1j * d
    return out


def _fd_directional(loss: Callable[[list[Any]], Any], leaves: list[Any], k: int, v: Any) -> Any:
    x = leaves[k]
    scale = max(1.0, float(np.max(np.abs(np.asarray(x)), initial=0.0)))
    vmax = max(float(np.max(np.abs(np.asarray(v)), initial=0.0)), 1e-300)

    def g(t: float) -> Any:
        moved = list(leaves)
        moved[k] = _step_leaf(x, t, v)
        return loss(moved)

    return _fd(g, _EPS5 * scale / vmax)


# ---------------------------------------------------------------- check_rrule


def _check_primal(
    name: str, f: Any, y: Any, args: tuple, saved_args: tuple, kwargs: dict, rtol: Any, atol: Any
) -> tuple[float, float, Any]:
    """The rule's primal output equals ``f``'s own; returns the tolerances the checks use and
    ``f``'s output."""
    diff_values = [v for a in args for v in _leaves(a) if _is_diff_leaf(v)]
    rtol, atol = _tolerances(diff_values + _leaves(y), rtol, atol)
    y_ref = f(*copy.deepcopy(saved_args), **kwargs)
    for yl, rl in zip(_leaves(y), _leaves(y_ref), strict=True):
        if _is_diff_leaf(rl):
            _assert_close(
                f"{name}: the primal output",
                np.asarray(yl),
                np.asarray(rl),
                rtol,
                atol,
                ("rule", "calling f"),
            )
    return rtol, atol, y_ref


def check_rrule(
    f: Any,
    *args: Any,
    output_tangent: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    max_fd_elements: int = MAX_FD_ELEMENTS,
    **kwargs: Any,
) -> None:
    """Check the reverse rule of ``f`` at ``args`` against finite differences.

    Also checks: one cotangent per argument, ``NoTangent()`` for integer/bool/other
    non-differentiable arguments, cotangent shapes, a ``Thunk``-wrapped ȳ, ``iadd`` of each
    cotangent into an accumulator, and that neither the arguments nor ȳ are mutated.

    >>> check_rrule(np.sum, np.ones((2, 3)), axis=1)
    """
    rng = np.random.default_rng(seed)
    name = _fname(f)
    names = _arg_names(f, len(args))
    saved_args = copy.deepcopy(args)
    args = copy.deepcopy(args)  # the rule runs on copies: a mutating one leaves the caller's be
    res = registry.rrule(f, *args, **kwargs)
    if res is None:
        raise AssertionError(f"{name} has no reverse rule (register one with @register_rrule)")
    y, pullback = res
    rtol, atol, y_ref = _check_primal(name, f, y, args, saved_args, kwargs, rtol, atol)

    ybar = _random_like(y, rng) if output_tangent is None else output_tangent
    saved_ybar = copy.deepcopy(ybar)
    grads = pullback(ybar)
    if not isinstance(grads, tuple) or len(grads) != len(args):
        n = len(grads) if isinstance(grads, tuple | list) else type(grads).__name__
        raise AssertionError(
            f"{name}: the pullback returned {n} cotangent(s) for {len(args)} argument(s); it must "
            "return a tuple with one cotangent per positional argument"
        )
    thunked = pullback(Thunk(lambda: copy.deepcopy(saved_ybar)))
    if not _same(args, saved_args):
        raise AssertionError(f"{name}: the rule or its pullback mutated its arguments")
    if not _same(ybar, saved_ybar):
        raise AssertionError(f"{name}: the pullback mutated the output cotangent ȳ")

    args64 = [_upcast(a) for a in saved_args]
    ybar64 = _upcast(unthunk(saved_ybar))
    flat_sizes = [len(_leaves(a)) for a in args64]
    starts = np.cumsum([0, *flat_sizes])

    def loss(flat: list[Any]) -> float:
        call_args = [
            _unflatten(a, flat[s : s + n])
            for a, s, n in zip(args64, starts[:-1], flat_sizes, strict=True)
        ]
        return _pair(ybar64, f(*call_args, **kwargs))

    flat64 = [v for a in args64 for v in _leaves(a)]
    for i, (arg, g, g2) in enumerate(zip(saved_args, grads, thunked, strict=True)):
        who = f"{name}: {names[i]}"
        leaves = _leaves(arg)
        if not any(_is_diff_leaf(v) for v in leaves):
            if not isinstance(g, NoTangent):
                raise AssertionError(
                    f"{who} ({_describe(arg)}) has no derivative: its cotangent must be "
                    f"NoTangent(), got {g!r}"
                )
            continue
        g_leaves, g2_leaves = _cot_leaves(g, arg), _cot_leaves(g2, arg)
        for j, (x, gl, gl2) in enumerate(zip(leaves, g_leaves, g2_leaves, strict=True)):
            where = who if len(leaves) == 1 else f"{who}, element {j}"
            if not _is_diff_leaf(x):
                if not isinstance(unthunk(gl), NoTangent):
                    raise AssertionError(
                        f"{where} ({_describe(x)}) must get NoTangent(), got {gl!r}"
                    )
                continue
            if isinstance(unthunk(gl), NoTangent):
                raise AssertionError(
                    f"{where} is differentiable ({_describe(x)}) but got NoTangent(); return "
                    "ZeroTangent() if its derivative is zero"
                )
            got = _as_array(gl, x)
            if got.shape != np.shape(x):
                raise AssertionError(
                    f"{where}: the cotangent has shape {got.shape} but the argument has shape "
                    f"{np.shape(x)}; sum over broadcast axes before returning it"
                )
            if np.iscomplexobj(got) and not np.iscomplexobj(x):
                raise AssertionError(f"{where}: a real argument got a complex cotangent {got!r}")
            _assert_close(
                f"{where}, with a Thunk ȳ", _as_array(gl2, x), got, rtol, atol, ("thunk", "plain")
            )
            k = int(starts[i]) + j
            if np.size(x) <= max_fd_elements:
                want = _fd_gradient(loss, flat64, k)
                if not np.iscomplexobj(x):
                    want = want.real
                _assert_close(where, got, want, rtol, atol)
            else:
                v = np.asarray(_random_like(flat64[k], rng))
                lhs = float(np.sum(np.real(got * v)))  # the directional derivative along v
                rhs = float(_fd_directional(loss, flat64, k, v))
                _assert_close(f"{where} (along a random direction)", lhs, rhs, rtol, atol)
            _check_iadd(where, gl, got, x, rng, rtol, atol)


def _describe(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    return f"{type(x).__name__} of dtype {dtype}" if dtype is not None else type(x).__name__


def _check_iadd(where: str, g: Any, value: np.ndarray, x: Any, rng: Any, rtol: float, atol: float):
    dtype = tangent_dtype(getattr(x, "dtype", np.float64)) or np.float64
    if np.iscomplexobj(value):
        dtype = np.result_type(dtype, np.complex64)
    acc = np.asarray(rng.standard_normal(np.shape(x)), dtype)
    saved = value.copy()
    want = acc + value
    out = iadd(mark_owned(acc.copy()), g)
    _assert_close(
        f"{where}: iadd(accumulator, cotangent)",
        _as_array(out, x),
        want,
        rtol,
        atol,
        ("iadd", "accumulator + cotangent"),
    )
    user = acc.copy()
    iadd(user, g)
    if not np.array_equal(user, acc):
        raise AssertionError(f"{where}: iadd changed an accumulator that fusegrad does not own")
    if not np.array_equal(_as_array(g, x), saved, equal_nan=True):
        raise AssertionError(f"{where}: iadd(accumulator, cotangent) changed the cotangent")


# ---------------------------------------------------------------- check_frule


def check_frule(
    f: Any,
    *args: Any,
    tangents: tuple | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    **kwargs: Any,
) -> None:
    """Check the forward rule of ``f`` at ``args`` against finite differences.

    ``tangents`` (one per argument) default to random ones, ``NoTangent()`` where there is no
    derivative.

    >>> check_frule(np.sin, np.array([0.1, 0.2]))
    """
    rng = np.random.default_rng(seed)
    name = _fname(f)
    saved_args = copy.deepcopy(args)
    if tangents is None:
        tangents = tuple(_random_like(a, rng) for a in args)
    if len(tangents) != len(args):
        raise ValueError(f"give one tangent per argument: {len(tangents)} for {len(args)}")
    saved_tangents = copy.deepcopy(tangents)
    res = registry.frule(tangents, f, *args, **kwargs)
    if res is None:
        raise AssertionError(f"{name} has no forward rule (register one with @register_frule)")
    y, ydot = res
    if not _same(args, saved_args):
        raise AssertionError(f"{name}: the forward rule mutated its arguments")
    if not _same(tangents, saved_tangents):
        raise AssertionError(f"{name}: the forward rule mutated the tangents")
    rtol, atol, y_ref = _check_primal(name, f, y, args, saved_args, kwargs, rtol, atol)
    args64 = [_upcast(a) for a in saved_args]
    t64 = [_upcast(unthunk(t)) for t in saved_tangents]
    want, floors = _fd_jvp(lambda *a: f(*a, **kwargs), args64, t64)
    _compare_outputs(f"{name}: the output tangent", ydot, y_ref, want, rtol, atol, floors)


def _move(args: list[Any], tangents: list[Any], t: float) -> list[Any]:
    moved = []
    for a, v in zip(args, tangents, strict=True):
        la = _leaves(a)
        lv = _cot_leaves(v, a)
        new = [
            _step_leaf(x, t, np.asarray(unthunk(d)) if not isinstance(x, float | complex) else d)
            if _is_diff_leaf(x) and not isinstance(unthunk(d), AbstractZero)
            else x
            for x, d in zip(la, lv, strict=True)
        ]
        moved.append(_unflatten(a, new))
    return moved


def _fd_jvp(fun: Callable, args: list[Any], tangents: list[Any]) -> tuple[list, list]:
    """Finite-difference directional derivative of every output leaf of ``fun`` (None for a
    leaf without one), and per leaf its rounding floor (``_ROUNDING`` ulps of the largest value
    the stencil saw, amplified by its ``1/h``): two evaluations at the same point can differ by
    an ulp or more (NumPy's sums round differently with the data's alignment), which a large
    output turns into a finite difference far above ``atol``."""
    scale = max(
        [1.0]
        + [
            float(np.max(np.abs(np.asarray(x)), initial=0.0))
            for a in args
            for x in _leaves(a)
            if _is_diff_leaf(x)
        ]
    )
    vmax = max(
        [1e-300]
        + [
            float(np.max(np.abs(np.asarray(unthunk(d))), initial=0.0))
            for t, a in zip(tangents, args, strict=True)
            for d in _cot_leaves(t, a)
            if not isinstance(unthunk(d), AbstractZero)
        ]
    )
    h = _EPS5 * scale / vmax
    evals = {s: _leaves(fun(*_move(args, tangents, s * h))) for s in (-2, -1, 1, 2)}
    out: list[np.ndarray | None] = []
    floors: list = []
    for k in range(len(evals[1])):
        if not _is_diff_leaf(evals[1][k]):
            out.append(None)
            floors.append(None)
            continue
        dtype = np.complex128 if np.iscomplexobj(evals[1][k]) else np.float64
        at = {s: np.asarray(evals[s][k], dtype) for s in evals}
        out.append((-at[2] + 8 * at[1] - 8 * at[-1] + at[-2]) / (12 * h))
        big = np.maximum.reduce([np.abs(a) for a in at.values()])
        floors.append(_ROUNDING * _EPS * 18 * np.nan_to_num(big) / (12 * h))
    return out, floors


def _compare_outputs(
    what: str, ydot: Any, y: Any, want: list, rtol: float, atol: float, floors: list
) -> None:
    leaves = _leaves(y)
    dots = _cot_leaves(ydot, y)
    for k, (yl, d, w, floor) in enumerate(zip(leaves, dots, want, floors, strict=True)):
        where = what if len(leaves) == 1 else f"{what}, output {k}"
        if w is None:
            continue
        got = _as_array(d, yl)
        if not np.iscomplexobj(yl):
            if np.iscomplexobj(got):
                raise AssertionError(f"{where}: a real output got a complex tangent")
            w = np.real(w)
        _assert_close(where, got, w, rtol, atol, floor=floor)


# ---------------------------------------------------------------- check_grads


def check_grads(
    fun: Callable,
    modes: tuple[str, ...] = ("rev",),
    order: int = 1,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
) -> Callable[..., None]:
    """A checker of the derivatives the AD engine computes for ``fun``; call it on arguments.

    ``"rev"`` compares ``<ct, J v>`` (finite differences) with ``<vjp(ct), v>`` per argument;
    ``"fwd"`` compares ``jvp`` with finite differences. ``order=2`` also checks the derivative
    of the first-order map (``vjp`` contracted with a fixed random ``ct``, or ``jvp`` along a
    fixed ``v``).

    >>> check_grads(lambda x, y: np.sum(x * y), modes=("rev",))(np.ones(3), np.arange(3.0))
    """
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    if isinstance(modes, str) or not all(isinstance(m, str) for m in modes):
        raise TypeError(
            f"check_grads(fun, modes=...): modes is a tuple of 'rev' and 'fwd', got {modes!r}; "
            "check_grads returns a checker, called on the arguments: check_grads(f)(x, y)"
        )
    unknown = set(modes) - {"rev", "fwd"}
    if unknown:
        raise ValueError(f"unknown modes {sorted(unknown)}; use 'rev' and/or 'fwd'")

    def check(*args: Any) -> None:
        rng = np.random.default_rng(seed)
        name = _fname(fun)
        y = fun(*copy.deepcopy(args))
        diff_values = [v for a in args for v in _leaves(a) if _is_diff_leaf(v)]
        r, a = _tolerances(diff_values + _leaves(y), rtol, atol)
        args64 = [_upcast(x) for x in args]
        if "rev" in modes:
            ct = _random_like(y, rng)
            _check_rev(api, fun, args, args64, ct, rng, name, r, a)
            if order > 1:

                def vjp_fun(*xs: Any, ct: Any = ct) -> Any:
                    return tuple(api.vjp(fun, *xs)[1](ct))

                vjp_fun.__qualname__ = f"vjp of {name}"
                check_grads(vjp_fun, ("rev",), order - 1, rtol, atol, seed + 1)(*args)
        if "fwd" in modes:
            v = tuple(_random_like(x, rng) for x in args)
            out, tout = api.jvp(fun, tuple(args), v)
            want, floors = _fd_jvp(fun, args64, [_upcast(t) for t in v])
            _compare_outputs(f"{name}: jvp", tout, y, want, r, a, floors)
            if order > 1:

                def jvp_fun(*xs: Any, v: Any = v) -> Any:
                    return api.jvp(fun, tuple(xs), v)[1]

                jvp_fun.__qualname__ = f"jvp of {name}"
                check_grads(jvp_fun, ("fwd",), order - 1, rtol, atol, seed + 1)(*args)

    return check


def _check_rev(api, fun, args, args64, ct, rng, name, rtol, atol) -> None:
    out, vjp_fn = api.vjp(fun, *args)
    cts = tuple(vjp_fn(ct))
    if len(cts) != len(args):
        raise AssertionError(
            f"{name}: vjp returned {len(cts)} cotangent(s) for {len(args)} argument(s)"
        )
    ct64 = _upcast(unthunk(ct))
    names = _arg_names(fun, len(args))
    for i, (x, c) in enumerate(zip(args, cts, strict=True)):
        if not any(_is_diff_leaf(v) for v in _leaves(x)):
            continue
        v = _random_like(x, rng)
        lhs = _pair(c, v)
        tangents = [v if j == i else NoTangent() for j in range(len(args))]
        rhs, floor = _rev_rhs(fun, args64, tangents, ct64)
        _assert_close(
            f"{name}: {names[i]}, <vjp(ct), v> (rule) vs <ct, J v> (finite differences)",
            lhs,
            rhs,
            rtol,
            atol,
            floor=floor,
        )


def _rev_rhs(fun: Callable, args64: list, tangents: list, ct64: Any) -> tuple[float, float]:
    """<ct, J v> with J v from finite differences, and its rounding floor (``_fd_jvp``)."""
    want, floors = _fd_jvp(fun, args64, [_upcast(t) for t in tangents])
    out = fun(*args64)
    jv = _unflatten(out, [ZeroTangent() if w is None else w for w in want])
    floor = 0.0
    for c, f in zip(_cot_leaves(ct64, out), floors, strict=True):
        c = unthunk(c)
        if f is not None and not isinstance(c, AbstractZero):
            floor += float(np.sum(np.abs(np.asarray(c)) * f))
    return _pair(ct64, jv), floor


__all__ = ["check_frule", "check_grads", "check_rrule"]

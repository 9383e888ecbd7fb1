"""``scipy.integrate.odeint`` and ``solve_ivp`` for traced values: the adjoint method
(reverse), forward sensitivities (forward).

``odeint(func, y0, t, args)`` is differentiable in ``y0`` and in the ``args`` (the parameters
must be passed there, as SciPy allows, not read from a closure); a traced ``t`` raises
``NoDerivativeError`` (``solve_ivp`` differentiates its times). The reverse rule does not
differentiate through SciPy's solver: it solves the adjoint equations ``ȧ = -aᵀ ∂f/∂y``,
``ṗ̄ = -aᵀ ∂f/∂p`` backwards from each output time to the one before (with
``y`` integrated backwards beside them and reset to the stored solution at each output time),
calling ``odeint`` again with the same tolerances; ``aᵀ ∂f/∂y`` comes from ``fusegrad.vjp`` of
``func``. The forward rule integrates ``v̇ = ∂f/∂y v + ∂f/∂p ṗ`` beside ``y`` (``fusegrad.jvp``).
Both are accurate to the solver's tolerances (JAX's ``odeint`` makes the same choice). The
rules' own solves are not traced, so derivatives of second order are not available: ``hvp``/
``hessian`` of an ``odeint`` raise.

``solve_ivp(fun, t_span, y0, method, t_eval, args=...)`` works the same way, with SciPy's own
``solve_ivp`` (same ``method``, ``rtol``, ``atol``, ``max_step``) solving the adjoint system
backwards between the returned times; it is differentiable in ``y0``, the ``args``, the ends of
``t_span`` and ``t_eval`` (``∂y(tᵢ)/∂tᵢ = f(tᵢ, y(tᵢ))``, ``∂L/∂t₀ = -a(t₀)ᵀ f(t₀, y₀)``). The
result is SciPy's ``OdeResult``; its ``.y`` (and ``.t`` when ``t_eval`` is traced) carry the
derivative. Without ``t_eval`` the times are the solver's steps: the last one is ``t_span[1]``,
the others are held constant. ``dense_output=True`` and ``events`` are refused on traced values.

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.integrate as fsi
    >>> decay = lambda y, t, k: -k * y
    >>> g = fg.grad(lambda k: fsi.odeint(decay, np.ones(1), [0.0, 1.0], args=(k,))[-1, 0])(0.5)
    >>> round(float(g), 5)  # d/dk exp(-k) = -exp(-k)
    -0.60653
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.integrate as _si
from scipy.integrate._ivp.ivp import OdeResult

from .. import api
from .. import numpy as fnp
from ..rules import registry
from ..rules.common import value
from ..rules.registry import register_frule, register_rrule
from ..rules.special import NoDerivativeError
from ..tangents import AbstractZero, NoTangent, ZeroTangent, unthunk
from . import _dispatch

_odeint = _dispatch.original(_si.odeint)
_solve_ivp = _dispatch.original(_si.solve_ivp)


def _solve(func: Any, y0: Any, t: Any, *params: Any, **opts: Any) -> Any:
    """``odeint`` with the parameters as positional arguments (one cotangent each)."""
    return _odeint(func, y0, t, args=params, **opts)


def _as_vector(out: Any) -> Any:
    """A right-hand side's value as one array: SciPy takes a list (``return [y[1], -y[0]]``, as
    in its documentation), which fusegrad's ``vjp`` would read as a pytree of outputs."""
    if isinstance(out, list | tuple):
        return fnp.array(out)
    return out


def _at_time(func: Any, tt: Any, tfirst: bool) -> Any:
    """``func`` of ``(y, *params)`` at the time ``tt``: odeint's ``func(y, t, ...)``, or
    ``func(t, y, ...)`` with ``tfirst=True`` (solve_ivp's order)."""
    if tfirst:
        return lambda y_, *p_: _as_vector(func(tt, y_, *p_))
    return lambda y_, *p_: _as_vector(func(y_, tt, *p_))


def _adjoint_rhs(f: Any, s: np.ndarray, n: int, params: tuple) -> np.ndarray:
    """The augmented system's right-hand side at state ``s = (y, a, ...)``, for ``f(y, *params)``
    at one time: ``(f, -aᵀ ∂f/∂y, -aᵀ ∂f/∂params)``, flat (one ``vjp`` of the user's function)."""
    y, a = s[:n], s[n : 2 * n]
    fy, f_vjp = api.vjp(f, y, *params)
    cts = f_vjp(a)
    # (an integer parameter's cotangent is None: as NaN it made the adjoint solver step forever)
    dp = [np.zeros(np.shape(p)) if c is None or isinstance(c, AbstractZero) else c for p, c in
          zip(params, cts[1:])]  # fmt: skip
    dy = np.zeros(n) if isinstance(cts[0], AbstractZero) else cts[0]
    return np.concatenate([np.ravel(fy), -np.ravel(dy), -_flat(dp)])


def _flat(xs: list) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in xs]) if xs else np.zeros(0)


def _sizes(params: tuple) -> list[int]:
    return [int(np.size(p)) for p in params]


def _unflat(v: np.ndarray, params: tuple) -> list:
    out, i = [], 0
    for p in params:
        n = int(np.size(p))
        out.append(np.reshape(v[i : i + n], np.shape(p)))
        i += n
    return out


def _first_order_only(values: tuple) -> None:
    if _dispatch.traced(values, {}):
        raise NotImplementedError(
            "derivatives of second order of scipy.integrate.odeint (hvp, hessian, grad of grad) "
            "are not implemented: its adjoint and sensitivity solves are not traced"
        )


@register_rrule(_solve)
def _solve_rule(func, y0, t, *params, **opts):
    """Adjoint: integrate (y, a, p̄) backwards between output times, adding ȳ(tᵢ) to a."""
    _first_order_only((y0, *params))
    ys = _solve(func, y0, t, *params, **opts)
    ts = np.asarray(t, dtype=float)
    n = int(np.size(y0))
    tfirst = bool(opts.get("tfirst", False))
    opts = {k: v for k, v in opts.items() if k in ("rtol", "atol", "mxstep", "hmax", "hmin")}

    def aug(s, tt):
        return _adjoint_rhs(_at_time(func, tt, tfirst), s, n, params)

    def pullback(g):
        g = unthunk(g)
        _first_order_only((y0, *params, g))
        g = np.asarray(g, dtype=float)
        adj = g[-1].copy()
        adj_p = np.zeros(sum(_sizes(params)))
        for i in range(len(ts) - 1, 0, -1):
            state = np.concatenate([ys[i], adj, adj_p])
            s = _odeint(aug, state, [ts[i], ts[i - 1]], **opts)[-1]
            adj = s[n : 2 * n] + g[i - 1]
            adj_p = s[2 * n :]
        return (NoTangent(), np.reshape(adj, np.shape(y0)), ZeroTangent(), *_unflat(adj_p, params))

    return ys, pullback


@register_frule(_solve)
def _solve_frule(tangents, func, y0, t, *params, **opts):
    """Forward sensitivities: v̇ = ∂f/∂y v + ∂f/∂p ṗ beside ẏ = f, v(t₀) = ẏ₀."""
    _first_order_only((y0, *params, *tangents))
    n = int(np.size(y0))
    ty = tangents[1]
    tps = [
        np.zeros(np.shape(p)) if isinstance(tp, AbstractZero) else np.asarray(unthunk(tp))
        for p, tp in zip(params, tangents[3:])
    ]
    v0 = np.zeros(n) if isinstance(ty, AbstractZero) else np.ravel(unthunk(ty))

    tfirst = bool(opts.get("tfirst", False))

    def aug(s, tt):
        y, v = s[:n], s[n:]
        fy, dfy = api.jvp(_at_time(func, tt, tfirst), (y, *params), (v, *tps))
        dfy = np.zeros(n) if isinstance(dfy, AbstractZero) else dfy
        return np.concatenate([np.ravel(fy), np.ravel(dfy)])

    kw = {k: v for k, v in opts.items() if k in ("rtol", "atol", "mxstep", "hmax", "hmin")}
    sol = _odeint(aug, np.concatenate([np.ravel(y0), v0]), t, **kw)
    return sol[:, :n], sol[:, n:]


_solve_frule.lazy = False  # type: ignore[attr-defined]


def odeint(func: Any, y0: Any, t: Any, args: tuple = (), **kwargs: Any) -> Any:
    """``scipy.integrate.odeint``: differentiable in ``y0`` and ``args`` (see the module).

    >>> odeint(lambda y, t: -y, np.ones(1), [0.0, 1.0])[-1].round(6)
    array([0.367879])
    """
    args = tuple(args) if isinstance(args, tuple | list) else (args,)
    if not _dispatch.traced((y0, t, *args), kwargs):
        return _odeint(func, y0, t, args=args, **kwargs)
    if kwargs.get("full_output"):
        raise TypeError(
            "scipy.integrate.odeint(full_output=True) on traced values: fusegrad differentiates "
            "the solution only; drop full_output"
        )
    if _dispatch.traced((t,), {}):  # (its gradient was silently zero)
        raise NoDerivativeError(
            "fusegrad has no derivative of scipy.integrate.odeint in its times t: differentiate "
            "in y0 and args, pass t as a constant (fusegrad.numpy.stop_gradient(t)), or use "
            "scipy.integrate.solve_ivp with t_eval, which is differentiable in the times"
        )
    if _solve not in registry.RRULES:  # a test restored saved rule tables
        register_rrule(_solve)(_solve_rule)
        register_frule(_solve)(_solve_frule)
    return registry.dispatch(_solve, (func, y0, t, *args), kwargs)


# --------------------------------------------------------------------------------------------------
# solve_ivp
# --------------------------------------------------------------------------------------------------

# Options that describe the user's fun only (its Jacobian): the augmented systems have none.
_FUN_ONLY = ("jac", "jac_sparsity", "lband", "uband", "vectorized")


def _ivp(fun: Any, t0: Any, t1: Any, y0: Any, t_eval: Any, *params: Any, **opts: Any) -> Any:
    """The solution of ``solve_ivp`` stacked as one array: row 0 the times, rows 1.. ``y``."""
    sol = _solve_ivp(fun, (t0, t1), y0, t_eval=t_eval, args=params or None, **opts)
    if not sol.success:
        raise RuntimeError(f"scipy.integrate.solve_ivp failed: {sol.message}")
    return np.concatenate([sol.t[None, :], sol.y])


def _aug_options(opts: dict) -> dict:
    return {k: v for k, v in opts.items() if k not in _FUN_ONLY}


def _f(fun: Any, t: float, y: np.ndarray, params: tuple) -> np.ndarray:
    return np.ravel(np.asarray(fun(t, y, *params), dtype=float))


@register_rrule(_ivp)
def _ivp_rule(fun, t0, t1, y0, t_eval, *params, **opts):
    """Adjoint: integrate (y, a, p̄) backwards between the returned times, adding ȳ(tᵢ) to a."""
    _first_order_only((t0, t1, y0, t_eval, *params))
    out = _ivp(fun, t0, t1, y0, t_eval, *params, **opts)
    ts, ys = out[0], out[1:]
    n, m = ys.shape
    aopts = _aug_options(opts)
    y0v = np.ravel(np.asarray(y0, dtype=float))

    def aug(tt, s):
        return _adjoint_rhs(_at_time(fun, tt, True), s, n, params)

    def pullback(g):
        g = unthunk(g)
        _first_order_only((t0, t1, y0, t_eval, *params, g))
        g = np.asarray(g, dtype=float)
        gt, gy = g[0], g[1:]
        # the times the adjoint steps through: the returned ones, and t0 if it is not the first
        points, cts, states = list(ts), list(gy.T), list(ys.T)
        if ts[0] != t0:
            points, cts, states = [float(t0), *points], [np.zeros(n), *cts], [y0v, *states]
        adj, adj_p = cts[-1].copy(), np.zeros(sum(_sizes(params)))
        for i in range(len(points) - 1, 0, -1):
            state = np.concatenate([states[i], adj, adj_p])
            sol = _solve_ivp(aug, (points[i], points[i - 1]), state, **aopts)
            if not sol.success:
                raise RuntimeError(f"the adjoint solve of solve_ivp failed: {sol.message}")
            s = sol.y[:, -1]
            adj, adj_p = s[n : 2 * n] + cts[i - 1], s[2 * n :]
        # an output time moves its value along the flow: ∂y(tᵢ)/∂tᵢ = f(tᵢ, y(tᵢ))
        dts = gt + np.array([gy[:, j] @ _f(fun, ts[j], ys[:, j], params) for j in range(m)])
        dt0 = -adj @ _f(fun, float(t0), y0v, params)
        dt_eval: Any = NoTangent() if t_eval is None else np.reshape(dts, np.shape(t_eval))
        dt1: Any = dts[-1] if t_eval is None else ZeroTangent()
        return (
            NoTangent(),
            dt0,
            dt1,
            np.reshape(adj, np.shape(y0)),
            dt_eval,
            *_unflat(adj_p, params),
        )

    return out, pullback


def _tangent(t: Any, like: Any) -> np.ndarray:
    if t is None or isinstance(t, AbstractZero):
        return np.zeros(np.shape(like))
    return np.asarray(unthunk(t), dtype=float)


@register_frule(_ivp)
def _ivp_frule(tangents, fun, t0, t1, y0, t_eval, *params, **opts):
    """Forward sensitivities: v̇ = ∂f/∂y v + ∂f/∂p ṗ, v(t₀) = ẏ₀ - f(t₀, y₀) ṫ₀; the output
    ẏ(tᵢ) = v(tᵢ) + f(tᵢ, y(tᵢ)) ṫᵢ."""
    _first_order_only((t0, t1, y0, t_eval, *params, *tangents))
    out = _ivp(fun, t0, t1, y0, t_eval, *params, **opts)
    ts, ys = out[0], out[1:]
    n, m = ys.shape
    tps = [_tangent(tp, p) for p, tp in zip(params, tangents[5:])]
    y0v = np.ravel(np.asarray(y0, dtype=float))
    dt0, dt1 = float(_tangent(tangents[1], 0.0)), float(_tangent(tangents[2], 0.0))
    v0 = np.ravel(_tangent(tangents[3], y0)) - _f(fun, float(t0), y0v, params) * dt0

    def aug(tt, s):
        y, v = s[:n], s[n:]
        fy, dfy = api.jvp(_at_time(fun, tt, True), (y, *params), (v, *tps))
        dfy = np.zeros(n) if isinstance(dfy, AbstractZero) else dfy
        return np.concatenate([np.ravel(fy), np.ravel(dfy)])

    sol = _solve_ivp(aug, (t0, t1), np.concatenate([y0v, v0]), t_eval=ts, **_aug_options(opts))
    if not sol.success:
        raise RuntimeError(f"the sensitivity solve of solve_ivp failed: {sol.message}")
    vs = sol.y[n:]
    if t_eval is None:
        dts = np.zeros(m)
        dts[-1] = dt1
    else:
        dts = np.ravel(_tangent(tangents[4], t_eval))
    flows = np.stack([_f(fun, ts[j], ys[:, j], params) for j in range(m)], axis=1)
    return out, np.concatenate([dts[None, :], vs + flows * dts[None, :]])


_ivp_frule.lazy = False  # type: ignore[attr-defined]


def solve_ivp(
    fun: Any,
    t_span: Any,
    y0: Any,
    method: Any = "RK45",
    t_eval: Any = None,
    dense_output: bool = False,
    events: Any = None,
    vectorized: bool = False,
    args: Any = None,
    **options: Any,
) -> Any:
    """``scipy.integrate.solve_ivp``: differentiable in ``y0``, ``args``, ``t_span`` and
    ``t_eval`` by the adjoint method (see the module).

    >>> round(float(solve_ivp(lambda t, y: -y, (0.0, 1.0), [1.0], rtol=1e-10).y[0, -1]), 5)
    0.36788
    """
    params = () if args is None else tuple(args) if isinstance(args, tuple | list) else (args,)
    t0, t1 = t_span
    if not _dispatch.traced((t0, t1, y0, t_eval, *params), {}):
        return _solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval,
                          dense_output=dense_output, events=events, vectorized=vectorized,
                          args=args, **options)  # fmt: skip
    if dense_output or events is not None:
        raise TypeError(
            "scipy.integrate.solve_ivp(dense_output=True or events=...) on traced values: "
            "fusegrad differentiates the solution at the returned times only; pass the times "
            "you need as t_eval instead"
        )
    if np.iscomplexobj(value(y0)):
        raise TypeError("scipy.integrate.solve_ivp on traced values: y0 must be real")
    if _ivp not in registry.RRULES:  # a test restored saved rule tables
        register_rrule(_ivp)(_ivp_rule)
        register_frule(_ivp)(_ivp_frule)
    if t_eval is not None and not _dispatch.traced((t_eval,), {}):
        t_eval = np.asarray(t_eval, dtype=float)
    opts = {"method": method, "vectorized": vectorized, **options}
    out = registry.dispatch(_ivp, (fun, t0, t1, y0, t_eval, *params), opts)
    t = out[0] if _dispatch.traced((t0, t1, t_eval), {}) else value(out[0])
    return OdeResult(t=t, y=out[1:], sol=None, t_events=None, y_events=None, nfev=0, njev=0,
                     nlu=0, status=0, message="The solver successfully reached the end of the "
                     "integration interval.", success=True)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# cumulative_trapezoid, cumulative_simpson: SciPy's formulas written with NumPy operations
# --------------------------------------------------------------------------------------------------

_cumulative_trapezoid = _dispatch.original(_si.cumulative_trapezoid)
_cumulative_simpson = _dispatch.original(getattr(_si, "cumulative_simpson", None))


def _along(a: Any, axis: int, s: slice) -> Any:
    index = [slice(None)] * np.ndim(a)
    index[axis] = s
    return a[tuple(index)]


def cumulative_trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1,
                         initial: Any = None) -> Any:  # fmt: skip
    """``scipy.integrate.cumulative_trapezoid``: the running trapezoid sums of ``y`` along
    ``axis`` (spacings from ``x``, 1-D or of ``y``'s shape, else ``dx``), with ``initial`` (0)
    in front; differentiable in ``y``, ``x`` and ``dx``.

    >>> cumulative_trapezoid(np.array([1.0, 2.0, 3.0]), initial=0)
    array([0. , 1.5, 4. ])
    """
    if not _dispatch.traced((y, x, dx, initial), {}):
        return _cumulative_trapezoid(y, x=x, dx=dx, axis=axis, initial=initial)
    y = _as_array(y)
    if np.shape(y)[axis] == 0:
        raise ValueError("At least one point is required along `axis`.")
    if x is None:
        d = dx
    else:
        x = _as_array(x)
        if np.ndim(x) == 1:
            shape = [1] * np.ndim(y)
            shape[axis] = -1
            d = np.reshape(np.diff(x), tuple(shape))
        elif np.ndim(x) != np.ndim(y):
            raise ValueError("If given, shape of x must be 1-D or the same as y.")
        else:
            d = np.diff(x, axis=axis)
        if np.shape(d)[axis] != np.shape(y)[axis] - 1:
            raise ValueError("If given, length of x along axis must be the same as y.")
    res = np.cumsum(d * (_along(y, axis, slice(1, None)) + _along(y, axis, slice(None, -1)))
                    / 2.0, axis=axis)  # fmt: skip
    if initial is not None:
        if _dispatch.traced((initial,), {}) or initial != 0:
            raise ValueError("`initial` must be `None` or `0`.")
        if not np.isscalar(initial):
            raise ValueError("`initial` parameter should be a scalar.")
        shape = list(np.shape(res))
        shape[axis] = 1
        res = np.concatenate([np.zeros(tuple(shape), dtype=res.dtype), res], axis=axis)
    return res


def _as_array(a: Any) -> Any:
    return a if _dispatch.traced((a,), {}) else np.asarray(a)


def _floating(a: Any) -> Any:
    """SciPy's ``xp_promote(force_floating=True)``: integers to float64."""
    a = _as_array(a)
    return a if np.issubdtype(a.dtype, np.inexact) else a.astype(np.float64)


def _simpson_pieces(y: Any, dx: Any, unequal: bool) -> Any:
    """The integrals over the first interval of each three points (SciPy's eqns (8), (10))."""
    f1, f2, f3 = y[..., :-2], y[..., 1:-1], y[..., 2:]
    if not unequal:
        return dx[..., :-1] / 3 * (5 * f1 / 4 + 2 * f2 - f3 / 4)
    x21, x32 = dx[..., :-1], dx[..., 1:]
    x21_x31 = x21 / (x21 + x32)
    x21x21_x31x32 = x21_x31 * (x21 / x32)
    return x21 / 6 * ((3 - x21_x31) * f1 + (3 + x21x21_x31x32 + x21_x31) * f2
                      - x21x21_x31x32 * f3)  # fmt: skip


def _simpson_sums(y: Any, dx: Any, unequal: bool) -> Any:
    """SciPy's ``_cumulatively_sum_simpson_integrals`` without its in-place writes: the
    intervals alternate between the forward and the backward formula, the last is backward."""
    h1 = _simpson_pieces(y, dx, unequal)
    h2 = np.flip(_simpson_pieces(np.flip(y, axis=-1), np.flip(dx, axis=-1), unequal), axis=-1)
    n = np.shape(y)[-1] - 1  # intervals
    first, second = h1[..., ::2], h2[..., ::2]
    a, b = np.shape(first)[-1], np.shape(second)[-1]
    pieces = np.concatenate([first, second, h2[..., -1:]], axis=-1)
    index = [a + b if s == n - 1 else s // 2 if s % 2 == 0 else a + s // 2 for s in range(n)]
    return np.cumsum(pieces[..., np.array(index)], axis=-1)


def cumulative_simpson(y: Any, *, x: Any = None, dx: Any = 1.0, axis: int = -1,
                       initial: Any = None) -> Any:  # fmt: skip
    """``scipy.integrate.cumulative_simpson``: SciPy's cumulative composite Simpson's rule
    (trapezoids below 3 points), with ``x``, ``dx``, ``initial`` (added, and put in front) and
    ``axis``; differentiable in ``y``, ``x``, ``dx`` and ``initial``.

    >>> cumulative_simpson(np.array([0.0, 1.0, 4.0, 9.0]))  # ∫ t² dt at 1, 2, 3
    array([0.33333333, 2.66666667, 9.        ])
    """
    if not _dispatch.traced((y, x, dx, initial), {}):
        return _cumulative_simpson(y, x=x, dx=dx, axis=axis, initial=initial)
    y = _floating(y)
    shape = np.shape(y)
    try:
        y = np.swapaxes(y, axis, -1)
    except Exception as e:
        raise ValueError(f"`axis={axis}` is not valid for `y` with `y.ndim={np.ndim(y)}`.") from e
    ax = axis % len(shape)
    if np.shape(y)[-1] < 3:
        res = np.swapaxes(cumulative_trapezoid(np.swapaxes(y, -1, axis), x, dx=dx, axis=axis),
                          axis, -1)  # fmt: skip
    elif x is not None:
        x = _floating(x)
        if not (np.shape(x) == shape or (np.ndim(x) == 1 and np.shape(x)[0] == shape[axis])):
            raise ValueError("If given, shape of `x` must be the same as `y` or 1-D with the "
                             "same length as `y` along `axis`.")  # fmt: skip
        x = np.broadcast_to(x, np.shape(y)) if np.ndim(x) == 1 else np.swapaxes(x, axis, -1)
        d = np.diff(x, axis=-1)
        if np.any(value(d) <= 0):
            raise ValueError("Input x must be strictly increasing.")
        res = _simpson_sums(y, d, True)
    else:
        dx = _floating(dx)
        if not (np.ndim(dx) == 0 or np.shape(dx) == shape[:ax] + (1,) + shape[ax + 1 :]):
            raise ValueError("If provided, `dx` must either be a scalar or have the same shape "
                             "as `y` but with only 1 point along `axis`.")  # fmt: skip
        dx = np.broadcast_to(dx, shape[:ax] + (shape[ax] - 1,) + shape[ax + 1 :])
        res = _simpson_sums(y, np.swapaxes(dx, axis, -1), False)
    if initial is not None:
        initial = _floating(initial)
        one = shape[:ax] + (1,) + shape[ax + 1 :]
        if not (np.ndim(initial) == 0 or np.shape(initial) == one):
            raise ValueError("If provided, `initial` must either be a scalar or have the same "
                             "shape as `y` but with only 1 point along `axis`.")  # fmt: skip
        initial = np.swapaxes(np.broadcast_to(initial, one), axis, -1)
        res = np.concatenate([initial, res + initial], axis=-1)
    return np.swapaxes(res, -1, axis)


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.integrate`` (called by ``fusegrad.scipy``)."""
    _dispatch.patch_attr(module, "odeint", odeint)
    _dispatch.patch_attr(module, "solve_ivp", solve_ivp)
    _dispatch.patch_attr(module, "cumulative_trapezoid", cumulative_trapezoid)
    if hasattr(module, "cumulative_simpson"):
        _dispatch.patch_attr(module, "cumulative_simpson", cumulative_simpson)


_dispatch.loaded(__name__)

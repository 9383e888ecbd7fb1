"""``scipy.integrate.odeint`` for traced values: the adjoint method (reverse), forward
sensitivities (forward).

``odeint(func, y0, t, args)`` is differentiable in ``y0`` and in the ``args`` (the parameters
must be passed there, as SciPy allows, not read from a closure); ``t`` gets no derivative. The
reverse rule does not differentiate through SciPy's solver: it solves the adjoint equations
``ȧ = -aᵀ ∂f/∂y``, ``ṗ̄ = -aᵀ ∂f/∂p`` backwards from each output time to the one before (with
``y`` integrated backwards beside them and reset to the stored solution at each output time),
calling ``odeint`` again with the same tolerances; ``aᵀ ∂f/∂y`` comes from ``fusegrad.vjp`` of
``func``. The forward rule integrates ``v̇ = ∂f/∂y v + ∂f/∂p ṗ`` beside ``y`` (``fusegrad.jvp``).
Both are accurate to the solver's tolerances (JAX's ``odeint`` makes the same choice). The
rules' own solves are not traced, so derivatives of second order are not available: ``hvp``/
``hessian`` of an ``odeint`` raise.

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

from ..rules import registry
from ..rules.registry import register_frule, register_rrule
from ..tangents import AbstractZero, NoTangent, ZeroTangent, unthunk
from . import _dispatch

_odeint = _dispatch.original(_si.odeint)


def _solve(func: Any, y0: Any, t: Any, *params: Any, **opts: Any) -> Any:
    """``odeint`` with the parameters as positional arguments (one cotangent each)."""
    return _odeint(func, y0, t, args=params, **opts)


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
    from .. import api

    _first_order_only((y0, *params))
    ys = _solve(func, y0, t, *params, **opts)
    ts = np.asarray(t, dtype=float)
    n = int(np.size(y0))
    opts = {k: v for k, v in opts.items() if k in ("rtol", "atol", "mxstep", "hmax", "hmin")}

    def aug(s, tt):
        y, a = s[:n], s[n : 2 * n]
        fy, f_vjp = api.vjp(lambda y_, *p_: func(y_, tt, *p_), y, *params)
        cts = f_vjp(a)
        dp = [np.zeros(np.shape(p)) if isinstance(c, AbstractZero) else c for p, c in
              zip(params, cts[1:])]  # fmt: skip
        dy = np.zeros(n) if isinstance(cts[0], AbstractZero) else cts[0]
        return np.concatenate([np.ravel(fy), -np.ravel(dy), -_flat(dp)])

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
    from .. import api

    _first_order_only((y0, *params, *tangents))
    n = int(np.size(y0))
    ty = tangents[1]
    tps = [
        np.zeros(np.shape(p)) if isinstance(tp, AbstractZero) else np.asarray(unthunk(tp))
        for p, tp in zip(params, tangents[3:])
    ]
    v0 = np.zeros(n) if isinstance(ty, AbstractZero) else np.ravel(unthunk(ty))

    def aug(s, tt):
        y, v = s[:n], s[n:]
        fy, dfy = api.jvp(lambda y_, *p_: func(y_, tt, *p_), (y, *params), (v, *tps))
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
    if _solve not in registry.RRULES:  # a test restored saved rule tables
        register_rrule(_solve)(_solve_rule)
        register_frule(_solve)(_solve_frule)
    return registry._trace_dispatch[0](_solve, (func, y0, t, *args), kwargs)


def _patch(module: Any) -> None:
    """Install the wrapper in ``scipy.integrate`` (called by ``fusegrad.scipy``)."""
    _dispatch.patch_attr(module, "odeint", odeint)


_dispatch.loaded(__name__)

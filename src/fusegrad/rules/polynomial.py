"""Rules of ``np.roots``: implicit differentiation of the polynomial at each simple root.

A simple root ``r`` of ``p(z) = Σₖ pₖ z^(N-k)`` moves with the coefficients as
``∂r/∂pₖ = -r^(N-k) / p'(r)`` (differentiate ``p(r(p); p) = 0``), so the Jacobian is
``J = -r[:, None] ** (N - k) / p'(r)[:, None]`` (complex). Reverse: ``p̄ = Re(Jᵀ r̄)`` for real
coefficients, ``Jᵀ r̄`` for complex ones (the convention of the rest of fusegrad and JAX);
forward: ``ṙ = J ṗ``. Both are written with NumPy operations on the roots the rule returns, so
they are differentiated again for second order. A multiple root has no derivative (``p'(r) = 0``:
inf/nan, as in JAX). ``np.polyfit`` is a composite (rules/composites.py).

Example::

    >>> import fusegrad as fg
    >>> # roots of z² - s: ±√s, so d(largest root)/ds = 1 / (2√s) = 0.25 at s = 4
    >>> largest = lambda s: np.max(np.real(np.roots(np.stack([1.0, 0.0, -s]))))
    >>> round(float(fg.grad(largest)(4.0)), 12)
    0.25
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tangents import AbstractZero, ZeroTangent, unthunk
from .common import as_array, materialize
from .registry import register_frule, register_rrule


def _coefficients(p: Any) -> Any:
    p = as_array(materialize(p))
    if np.ndim(p) != 1:
        raise ValueError("np.roots: the coefficients must be a 1-d array (a rank-1 array)")
    return p


def _jacobian(p: Any, r: Any) -> Any:
    """``∂rⱼ/∂pₖ = -rⱼ^(N-k) / p'(rⱼ)``, shape ``(roots, N + 1)``."""
    n = np.shape(p)[0] - 1
    powers = np.arange(n, -1, -1)
    dp = np.polyval(p[:-1] * np.arange(n, 0, -1), r) if n > 0 else np.zeros(np.shape(r))
    return -(r[:, None] ** powers[None, :]) / dp[:, None]


@register_rrule(np.roots)
def _roots(p):
    """np.roots: p̄ = Re(Jᵀ r̄) (real p), Jᵀ r̄ (complex p)."""
    p = _coefficients(p)
    r = np.roots(p)

    def pullback(g):
        g = unthunk(g)
        ct = np.matmul(g, _jacobian(p, r))
        return (ct if np.iscomplexobj(materialize(p)) else np.real(ct),)

    return r, pullback


@register_frule(np.roots)
def _roots_frule(tangents, p):
    """np.roots: ṙ = J ṗ."""
    (t,) = tangents
    p = _coefficients(p)
    r = np.roots(p)
    if isinstance(t, AbstractZero):
        return r, ZeroTangent()
    return r, np.matmul(_jacobian(p, r), unthunk(t))


_roots_frule.lazy = False  # type: ignore[attr-defined]

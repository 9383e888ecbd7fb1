"""``scipy.interpolate`` for traced values: ``CubicSpline``, ``CubicHermiteSpline``, ``PPoly``
and ``interp1d`` built on traced data, and SciPy's own piecewise polynomials and B-splines
evaluated at traced points.

Built with a traced argument (values ``y``, knots ``x``, derivative values of ``bc_type``,
``fill_value``), ``CubicSpline``, ``CubicHermiteSpline``, ``PPoly`` and ``interp1d`` return the
fusegrad objects of this module, with SciPy's evaluation API (``__call__(x, nu, extrapolate)``,
``derivative``, ``antiderivative``, ``integrate``, the ``c`` and ``x`` attributes in SciPy's
layout). Without one they return SciPy's own objects. ``CubicSpline`` solves SciPy's
tridiagonal system for the slopes at the knots with SciPy's banded solver, in O(n) (a rule of
its own, whose pullback and forward rule are tridiagonal solves again). On traced values
SciPy's checks of values (finite, strictly increasing ``x``, equal ends for
``bc_type='periodic'``) are not made: reading a traced value would stop ``fg.jit`` replaying;
shapes are checked as in SciPy.

A SciPy ``PPoly`` (``CubicSpline``, ``PchipInterpolator``, ``Akima1DInterpolator``, ...),
``BPoly`` or ``BSpline`` (``make_interp_spline``) built on plain data evaluates at traced points
with NumPy operations: the piece of each point by ``np.searchsorted`` on the breakpoints, its
coefficients gathered, Horner's rule (de Boor's recursion for a B-spline). So does a plain
``interp1d``, and ``PPoly.integrate`` with traced bounds. Pieces join continuously where the
spline is smooth, so derivatives in the points are those of the piece each point falls in
(the right-hand one at a breakpoint, as SciPy evaluates there); a ``nearest``, ``previous`` or
``next`` interpolant is piecewise constant in the points (derivative 0).

The rest is NumPy code, so reverse and forward derivatives of any order work. Under ``fg.jit``
the searches, gathers and solves are recorded as steps, so a gradient replays (derivatives of
higher order run uncompiled, as for other rules that need arrays); the default ``bounds_error``
of ``interp1d`` reads the points to raise: pass ``bounds_error=False`` to keep it replayable.
Not covered on traced data: ``PchipInterpolator``/``Akima1DInterpolator``/``make_interp_spline``
built on traced values (they evaluate at traced points), ``interp1d`` spline kinds with traced
``x``, and methods beyond evaluation (``roots``, ``solve``, ``extend``).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.interpolate as fsi
    >>> x = np.arange(4.0)
    >>> s = lambda y: fsi.CubicSpline(x, y, bc_type="natural")(1.5)
    >>> fg.grad(s)(np.zeros(4))  # the spline through each unit vector, at 1.5
    array([-0.075,  0.575,  0.575, -0.075])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.interpolate as _si
import scipy.linalg as _sl
import scipy.special as _sp
from scipy.interpolate import _interpolate as _sip

from .. import lazy
from ..numpy import stop_gradient
from ..rules import registry
from ..rules.registry import primitive, register_frule, register_rrule
from ..tangents import AbstractZero, ZeroTangent, unthunk
from . import _dispatch


def _traced(*values: Any) -> bool:
    return _dispatch.traced(values, {})


def _scipy_when_plain(scipy_cls: type) -> Any:
    """A ``__new__`` building SciPy's own ``scipy_cls`` from the same arguments when none is
    traced (SciPy's object, unchanged), this module's class otherwise."""

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        if not _dispatch.traced(args, kwargs):
            return scipy_cls(*args, **kwargs)
        return object.__new__(cls)

    return new


def _as_float(a: Any) -> Any:
    """An argument as a float64 (or complex128) array, as SciPy computes (a traced float32 one
    was solved in float32)."""
    if _traced(a):
        kind = np.result_type(a)
        if kind in (np.dtype(np.float64), np.dtype(np.complex128)):
            return a
        return a.astype(np.complex128 if kind.kind == "c" else np.float64)
    a = np.asarray(a)
    return a if np.iscomplexobj(a) else a.astype(np.float64)


def _column(v: Any, ndim: int) -> Any:
    """``v`` (1-D) shaped to broadcast along the first axis of an ``ndim``-D array."""
    return np.reshape(v, np.shape(v) + (1,) * (ndim - 1))


def _take(a: Any, i: Any, axis: int = 0) -> Any:
    """``a``'s entries at the computed indices ``i`` along ``axis``.

    A plain ``a`` is wrapped as a lazy array, whose gather a jit recording records (NumPy would
    read the index itself to index a plain array)."""
    if type(a) is np.ndarray and type(i) is not np.ndarray:
        a = lazy.asarray(a)
    return a[(slice(None),) * axis + (i,)]


def _points(xq: Any) -> tuple[tuple[int, ...], Any]:
    """The shape of the query points and the points as a flat float array."""
    return np.shape(xq), np.reshape(_as_float(xq), (-1,))


def _to_axis(out: Any, x_ndim: int, axis: int) -> Any:
    """Move the query points' axes (first in ``out``) to the interpolation axis, as SciPy."""
    if axis == 0:
        return out
    order = list(range(np.ndim(out)))
    order = order[x_ndim : x_ndim + axis] + order[:x_ndim] + order[x_ndim + axis :]
    return np.transpose(out, order)


def _undefined(lo: Any, hi: Any, q: Any, extrapolate: Any) -> Any:
    """Where a spline is ``nan``: at ``nan`` points, and without ``extrapolate`` outside the
    interval with ends ``lo`` and ``hi`` (either order)."""
    lo, hi, q = stop_gradient(lo), stop_gradient(hi), stop_gradient(q)
    if extrapolate:
        return np.isnan(q)
    return np.isnan(q) | (q < np.minimum(lo, hi)) | (q > np.maximum(lo, hi))


def _nan_where(mask: Any, values: Any) -> Any:
    return np.where(_column(mask, np.ndim(values)), np.nan, values)


# --------------------------------------------------------------------------------------------------
# Piecewise polynomials: c has shape (k, m, ...), piece i is sum_j c[j, i] (x - x[i])^(k-1-j)
# --------------------------------------------------------------------------------------------------


def _piece_index(x: Any, q: Any) -> Any:
    """The piece each point falls in, as SciPy's ``find_interval``: ``x[i] <= q < x[i+1]``
    (``x[i] >= q > x[i+1]`` for descending breakpoints), the last piece closed, points beyond
    the ends in the end pieces."""
    xs, qs = stop_gradient(x), stop_gradient(q)
    if type(xs) is np.ndarray:
        if xs[-1] < xs[0]:
            xs, qs = -xs, -qs
    else:  # traced breakpoints: the direction without reading them (a jit recording)
        flip = np.where(xs[-1] < xs[0], -1.0, 1.0)
        xs, qs = xs * flip, qs * flip
    pieces = np.shape(x)[0] - 1
    return np.clip(np.searchsorted(xs, qs, side="right") - 1, 0, pieces - 1)


def _horner(c: Any, t: Any) -> Any:
    """``sum_j c[j] t^(k-1-j)`` for ``c`` of shape ``(k, N, ...)`` and ``t`` of shape ``(N,)``."""
    t = _column(t, np.ndim(c) - 1)
    out = c[0]
    for j in range(1, np.shape(c)[0]):
        out = out * t + c[j]
    return out


def _derivative_coeffs(c: Any, nu: int) -> Any:
    """The coefficients of the ``nu``-th derivative (SciPy's ``PPoly.derivative``)."""
    if nu == 0:
        return c
    k = np.shape(c)[0]
    if nu >= k:
        return 0.0 * c[:1]
    factor = _sp.poch(np.arange(k - nu, 0, -1), nu)
    return c[: k - nu] * _column(factor, np.ndim(c))


def _antiderivative_coeffs(c: Any, x: Any) -> Any:
    """The coefficients of the antiderivative that is 0 at ``x[0]`` and continuous: each piece's
    constant is the sum of the integrals over the pieces before it (SciPy's
    ``PPoly.antiderivative`` with ``nu=1``)."""
    k = np.shape(c)[0]
    scaled = c / _column(np.arange(k, 0, -1.0), np.ndim(c))
    integrals = _horner(np.concatenate([scaled, 0.0 * c[:1]]), np.diff(x))
    before = np.concatenate([0.0 * integrals[:1], np.cumsum(integrals, axis=0)[:-1]])
    return np.concatenate([scaled, before[None]])


def _evaluate_ppoly(c: Any, x: Any, xq: Any, extrapolate: Any, axis: int) -> Any:
    """The piecewise polynomial at ``xq``, shaped as SciPy's ``PPoly.__call__``."""
    shape, q = _points(xq)
    if extrapolate == "periodic":
        q = x[0] + np.mod(q - x[0], x[-1] - x[0])
        extrapolate = False
    i = _piece_index(x, q)
    values = _horner(_take(c, i, axis=1), q - _take(x, i))
    values = _nan_where(_undefined(x[0], x[-1], q, extrapolate), values)
    return _to_axis(np.reshape(values, shape + np.shape(c)[2:]), len(shape), axis)


class PPoly:
    """``scipy.interpolate.PPoly`` with traced coefficients ``c`` (shape ``(k, m, ...)``) or
    breakpoints ``x``; with neither traced, SciPy's own ``PPoly``.

    >>> import fusegrad as fg
    >>> c = np.array([[1.0, 2.0], [0.0, 1.0]])  # x on [0, 1), 2 (x - 1) + 1 on [1, 2]
    >>> fg.grad(lambda c: PPoly(c, np.array([0.0, 1.0, 2.0]))(1.5))(c)  # (x - 1, 1) on [1, 2]
    array([[0. , 0.5],
           [0. , 1. ]])
    """

    c: Any
    x: Any
    extrapolate: Any
    axis: int

    __new__ = _scipy_when_plain(_si.PPoly)

    def __init__(self, c: Any, x: Any, extrapolate: Any = None, axis: int = 0) -> None:
        c, x = _as_float(c), _as_float(x)
        if np.ndim(c) < 2:
            raise ValueError("Coefficients array must be at least 2-dimensional.")
        if not 0 <= axis < np.ndim(c) - 1:
            raise ValueError(f"axis={axis} must be between 0 and {np.ndim(c) - 1}")
        if axis != 0:  # SciPy's layout: the two interpolation axes first
            c = np.moveaxis(np.moveaxis(c, axis + 1, 0), axis + 1, 0)
        if np.ndim(x) != 1:
            raise ValueError("x must be 1-dimensional")
        if np.shape(x)[0] < 2:
            raise ValueError("at least 2 breakpoints are needed")
        if np.shape(c)[1] != np.shape(x)[0] - 1:
            raise ValueError("number of coefficients != len(x)-1")
        steps = None if _traced(x) else np.diff(x)
        if steps is not None and not (np.all(steps >= 0) or np.all(steps <= 0)):
            raise ValueError("`x` must be strictly increasing or decreasing.")
        self._set(c, x, extrapolate, axis)

    def _set(self, c: Any, x: Any, extrapolate: Any, axis: int) -> None:
        if extrapolate is None:
            extrapolate = True
        elif extrapolate != "periodic":
            extrapolate = bool(extrapolate)
        self.c, self.x, self.extrapolate, self.axis = c, x, extrapolate, axis

    @classmethod
    def construct_fast(cls, c: Any, x: Any, extrapolate: Any = None, axis: int = 0) -> PPoly:
        """A ``PPoly`` from coefficients already in SciPy's layout, unchecked (as SciPy's).

        >>> PPoly.construct_fast(np.ones((1, 1)), np.array([0.0, 1.0]))(0.5)
        array(1.)
        """
        self = object.__new__(PPoly)
        self._set(c, x, extrapolate, axis)
        return self

    def __call__(self, x: Any, nu: int = 0, extrapolate: Any = None) -> Any:
        """The polynomial (its ``nu``-th derivative) at ``x``, shaped as SciPy's.

        >>> PPoly.construct_fast(np.array([[1.0], [0.0]]), np.array([0.0, 2.0]))([1.0, 3.0], 1)
        array([1., 1.])
        """
        if nu < 0:
            raise ValueError("Order of derivative cannot be negative")
        if extrapolate is None:
            extrapolate = self.extrapolate
        return _evaluate_ppoly(_derivative_coeffs(self.c, nu), self.x, x, extrapolate, self.axis)

    def derivative(self, nu: int = 1) -> PPoly:
        """The ``nu``-th derivative (the antiderivative for negative ``nu``).

        >>> PPoly.construct_fast(np.array([[1.0], [0.0]]), np.array([0.0, 2.0])).derivative().c
        array([[1.]])
        """
        if nu < 0:
            return self.antiderivative(-nu)
        c = _derivative_coeffs(self.c, nu)
        return PPoly.construct_fast(c, self.x, self.extrapolate, self.axis)

    def antiderivative(self, nu: int = 1) -> PPoly:
        """The ``nu``-th antiderivative, 0 at ``x[0]`` with its first ``nu - 1`` derivatives, and
        continuous (periodic extrapolation becomes none, as in SciPy).

        >>> PPoly.construct_fast(np.ones((1, 2)), np.array([0.0, 1.0, 3.0])).antiderivative().c
        array([[1., 1.],
               [0., 1.]])
        """
        if nu <= 0:
            return self.derivative(-nu)
        c = self.c
        for _ in range(nu):
            c = _antiderivative_coeffs(c, self.x)
        extrapolate = False if self.extrapolate == "periodic" else self.extrapolate
        return PPoly.construct_fast(c, self.x, extrapolate, self.axis)

    def integrate(self, a: Any, b: Any, extrapolate: Any = None) -> Any:
        """The definite integral from ``a`` to ``b`` (``nan`` past the ends without
        extrapolation; whole periods and a remainder with ``'periodic'``).

        >>> float(PPoly.construct_fast(np.ones((1, 2)), np.array([0.0, 1.0, 3.0])).integrate(0, 2))
        2.0
        """
        if extrapolate is None:
            extrapolate = self.extrapolate
        c = _antiderivative_coeffs(self.c, self.x)

        def primitive(at: Any, extend: Any = True) -> Any:
            return _evaluate_ppoly(c, self.x, at, extend, 0)

        if extrapolate != "periodic":
            return primitive(b, extrapolate) - primitive(a, extrapolate)
        start, end = self.x[0], self.x[-1]
        period = end - start
        periods, rest = np.floor_divide(b - a, period), np.mod(b - a, period)
        a = start + np.mod(a - start, period)
        b = a + rest
        within = primitive(b) - primitive(a)
        wrapped = primitive(end) - primitive(a) + primitive(start + b - end) - primitive(start)
        once = primitive(end) - primitive(start)
        return periods * once + np.where(stop_gradient(b) <= stop_gradient(end), within, wrapped)


# --------------------------------------------------------------------------------------------------
# Tridiagonal solves in O(n): SciPy's banded solver, with rules of their own
# --------------------------------------------------------------------------------------------------


@primitive
def _solve_tridiagonal(below: Any, diagonal: Any, above: Any, rhs: Any) -> Any:
    """``s`` with ``A s = rhs`` (``rhs`` of shape ``(n, r)``) for the n×n matrix ``A`` whose row
    i is ``below[i], diagonal[i], above[i]`` around the diagonal (``below[0]`` and ``above[-1]``
    fall outside it and are ignored)."""
    bands = np.stack([np.concatenate([[0.0], above[:-1]]), diagonal,
                      np.concatenate([below[1:], [0.0]])])  # fmt: skip
    return _sl.solve_banded((1, 1), bands, rhs, check_finite=False)


def _tridiagonal_solve(below: Any, diagonal: Any, above: Any, rhs: Any) -> Any:
    """:func:`_solve_tridiagonal` on traced or plain values."""
    if _solve_tridiagonal not in registry.RRULES:  # a test restored saved rule tables
        register_rrule(_solve_tridiagonal)(_solve_tridiagonal_rule)
        register_frule(_solve_tridiagonal)(_solve_tridiagonal_frule)
    return _solve_tridiagonal(below, diagonal, above, rhs)


def _band_product(below: Any, diagonal: Any, above: Any, s: Any) -> Any:
    """``A s`` for the tridiagonal ``A`` of :func:`_solve_tridiagonal`."""
    zero = 0.0 * s[:1]
    return (
        _column(below, 2) * np.concatenate([zero, s[:-1]])
        + _column(diagonal, 2) * s
        + _column(above, 2) * np.concatenate([s[1:], zero])
    )


def _solve_tridiagonal_rule(below, diagonal, above, rhs):
    """``s = A⁻¹ rhs``: ``r̄hs = A⁻ᵀ s̄`` (``Aᵀ`` is tridiagonal: its rows read ``above`` one
    down and ``below`` one up), ``Ā = -r̄hs sᵀ`` on the three diagonals only."""
    s = _tridiagonal_solve(below, diagonal, above, rhs)

    def pullback(ds):
        zero = 0.0 * diagonal[:1]
        below_t = np.concatenate([zero, above[:-1]])
        above_t = np.concatenate([below[1:], zero])
        g = _tridiagonal_solve(below_t, diagonal, above_t, unthunk(ds))
        d_below = -np.concatenate([zero, np.sum(g[1:] * s[:-1], axis=1)])
        d_diagonal = -np.sum(g * s, axis=1)
        d_above = -np.concatenate([np.sum(g[:-1] * s[1:], axis=1), zero])
        return d_below, d_diagonal, d_above, g

    return s, pullback


def _solve_tridiagonal_frule(tangents, below, diagonal, above, rhs):
    """``ṡ = A⁻¹ (ṙhs - Ȧ s)``."""
    s = _tridiagonal_solve(below, diagonal, above, rhs)
    rates = [None if isinstance(t, AbstractZero) else unthunk(t) for t in tangents]
    if all(r is None for r in rates):
        return s, ZeroTangent()
    d_below, d_diagonal, d_above, d_rhs = (
        np.zeros_like(v) if r is None else r for r, v in zip(rates, (below, diagonal, above, rhs))
    )
    change = d_rhs - _band_product(d_below, d_diagonal, d_above, s)
    return s, _tridiagonal_solve(below, diagonal, above, change)


_solve_tridiagonal_frule.lazy = False  # type: ignore[attr-defined]
register_rrule(_solve_tridiagonal)(_solve_tridiagonal_rule)
register_frule(_solve_tridiagonal)(_solve_tridiagonal_frule)


# --------------------------------------------------------------------------------------------------
# Cubic splines: the slopes s at the knots, then the Hermite cubic of each piece
# --------------------------------------------------------------------------------------------------


def _check_plain_knots(x: Any) -> None:
    """SciPy's checks of a plain ``x`` (a traced one's values are not read)."""
    if not np.all(np.isfinite(x)):
        raise ValueError("`x` must contain only finite values.")
    if np.any(np.diff(x) <= 0):
        raise ValueError("`x` must be strictly increasing sequence.")


def _spline_data(x: Any, y: Any, axis: int) -> tuple[Any, Any, int, tuple[int, ...]]:
    """``(x, y, axis, trailing shape)``, ``y`` with the interpolation axis first and the others
    flattened (SciPy's ``prepare_input``)."""
    x, y = _as_float(x), _as_float(y)
    axis = axis % np.ndim(y)
    if np.ndim(x) != 1:
        raise ValueError("`x` must be 1-dimensional.")
    if np.shape(x)[0] < 2:
        raise ValueError("`x` must contain at least 2 elements.")
    if np.shape(x)[0] != np.shape(y)[axis]:
        raise ValueError(f"The length of `y` along `axis`={axis} doesn't match the length of `x`")
    if not _traced(x):
        _check_plain_knots(x)
    if not _traced(y) and not np.all(np.isfinite(y)):
        raise ValueError("`y` must contain only finite values.")
    y = np.moveaxis(y, axis, 0)
    trailing = np.shape(y)[1:]
    return x, np.reshape(y, (np.shape(y)[0], -1)), axis, trailing


def _hermite_coeffs(x: Any, y: Any, s: Any, trailing: tuple[int, ...]) -> Any:
    """The cubic of each piece with values ``y`` and slopes ``s`` at its ends (SciPy's
    ``CubicHermiteSpline``), shape ``(4, n - 1) + trailing``."""
    dx = _column(np.diff(x), 2)
    slope = np.diff(y, axis=0) / dx
    t = (s[:-1] + s[1:] - 2 * slope) / dx
    c = np.stack([t / dx, (slope - s[:-1]) / dx - t, s[:-1], y[:-1]])
    return np.reshape(c, (4, np.shape(y)[0] - 1) + trailing)


class CubicHermiteSpline(PPoly):
    """``scipy.interpolate.CubicHermiteSpline`` on traced values, knots or slopes ``dydx``: the
    cubic on each piece with the given values and first derivatives at its ends.

    >>> import fusegrad as fg
    >>> fg.grad(lambda d: CubicHermiteSpline([0.0, 1.0], [0.0, 1.0], d)(0.5))(np.zeros(2))
    array([ 0.125, -0.125])
    """

    __new__ = _scipy_when_plain(_si.CubicHermiteSpline)

    def __init__(self, x: Any, y: Any, dydx: Any, axis: int = 0, extrapolate: Any = None) -> None:
        if np.shape(y) != np.shape(dydx):
            raise ValueError("The shapes of `y` and `dydx` must be identical.")
        x, y2, axis, trailing = _spline_data(x, y, axis)
        s = np.reshape(np.moveaxis(_as_float(dydx), axis, 0), np.shape(y2))
        self._set(_hermite_coeffs(x, y2, s, trailing), x, extrapolate, axis)


def PchipInterpolator(x: Any, y: Any, axis: int = 0, extrapolate: Any = None) -> Any:  # noqa: N802
    """``scipy.interpolate.PchipInterpolator`` on traced values or knots: the monotone cubic
    Hermite spline whose slopes are SciPy's (weighted harmonic means of the neighbouring secants,
    0 at a local extremum, its one-sided formula at the ends).

    >>> import fusegrad as fg
    >>> float(fg.grad(lambda y: PchipInterpolator([0.0, 1.0, 2.0], y)(0.5))(np.arange(3.0))[0])
    0.375
    """
    if not _traced(x, y):
        return _si.PchipInterpolator(x, y, axis=axis, extrapolate=extrapolate)
    xs, y2, _, _ = _spline_data(x, y, axis)
    slopes = _pchip_slopes(xs, y2)
    shape = np.shape(np.moveaxis(_as_float(y), axis, 0))
    dydx = np.moveaxis(np.reshape(slopes, shape), 0, axis)
    return CubicHermiteSpline(x, y, dydx, axis=axis, extrapolate=extrapolate)


def _pchip_slopes(x: Any, y: Any) -> Any:
    """SciPy's ``PchipInterpolator._find_derivatives`` with NumPy operations (y: points first,
    then one flat axis)."""
    h = np.reshape(np.diff(x), (-1, 1))
    m = np.diff(y, axis=0) / h
    if np.shape(y)[0] == 2:
        return np.concatenate([m, m], axis=0)
    sign = np.sign(stop_gradient(m))
    flat = (sign[1:] != sign[:-1]) | (sign[1:] == 0) | (sign[:-1] == 0)
    w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
    safe_lo, safe_hi = np.where(flat, 1.0, m[:-1]), np.where(flat, 1.0, m[1:])
    inner = np.where(flat, 0.0, (w1 + w2) / (w1 / safe_lo + w2 / safe_hi))
    first = _pchip_end(h[0], h[1], m[0], m[1])
    last = _pchip_end(h[-1], h[-2], m[-1], m[-2])
    return np.concatenate([first[None], inner, last[None]], axis=0)


def _pchip_end(h0: Any, h1: Any, m0: Any, m1: Any) -> Any:
    """The one-sided three-point slope at an end, shape-preserving as SciPy's ``_edge_case``."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    s0, s1, sd = (np.sign(stop_gradient(v)) for v in (m0, m1, d))
    overshoot = (s0 != s1) & (np.abs(stop_gradient(d)) > 3.0 * np.abs(stop_gradient(m0)))
    return np.where(sd != s0, 0.0, np.where(overshoot, 3.0 * m0, d))


def _boundary_conditions(bc_type: Any, trailing: tuple[int, ...]) -> list[Any]:
    """The two end conditions: ``'not-a-knot'``, ``'periodic'`` or ``(order, value)`` with the
    value flattened (SciPy's ``CubicSpline._validate_bc``)."""
    if isinstance(bc_type, str):
        bc_type = (bc_type, bc_type)
    else:
        if len(bc_type) != 2:
            raise ValueError(
                "`bc_type` must contain 2 elements to specify start and end conditions."
            )
        if any(isinstance(bc, str) and bc == "periodic" for bc in bc_type):
            raise ValueError(
                "'periodic' `bc_type` is defined for both curve ends and cannot be used with "
                "other boundary conditions."
            )
    return [_boundary_condition(bc, trailing) for bc in bc_type]


def _boundary_condition(bc: Any, trailing: tuple[int, ...]) -> Any:
    if isinstance(bc, str):
        if bc == "clamped":
            return (1, np.zeros(int(np.prod(trailing))))
        if bc == "natural":
            return (2, np.zeros(int(np.prod(trailing))))
        if bc in ("not-a-knot", "periodic"):
            return bc
        raise ValueError(f"bc_type={bc} is not allowed.")
    try:
        order, value = bc
    except Exception as e:
        raise ValueError(
            "A specified derivative value must be given in the form (order, value)."
        ) from e
    if order not in (1, 2):
        raise ValueError("The specified derivative order must be 1 or 2.")
    value = _as_float(value)
    if np.shape(value) != trailing:
        raise ValueError(
            f"`deriv_value` shape {np.shape(value)} is not the expected one {trailing}."
        )
    return (order, np.reshape(value, (-1,)))


def _one(v: Any) -> Any:
    return np.reshape(v, (1,))


def _start_row(bc: Any, x: Any, dx: Any, y: Any, slope: Any) -> tuple[Any, Any, Any]:
    """``(diagonal, above, right-hand side)`` of the first equation."""
    if bc == "not-a-knot":  # the third derivative is continuous at x[1]
        d = x[2] - x[0]
        rhs = ((dx[0] + 2 * d) * dx[1] * slope[0] + dx[0] ** 2 * slope[1]) / d
        return dx[1], d, rhs
    order, value = bc
    if order == 1:
        return 1.0, 0.0, value
    return 2 * dx[0], dx[0], -0.5 * value * dx[0] ** 2 + 3 * (y[1] - y[0])


def _end_row(bc: Any, x: Any, dx: Any, y: Any, slope: Any) -> tuple[Any, Any, Any]:
    """``(below, diagonal, right-hand side)`` of the last equation."""
    if bc == "not-a-knot":
        d = x[-1] - x[-3]
        rhs = (dx[-1] ** 2 * slope[-2] + (2 * d + dx[-1]) * dx[-2] * slope[-1]) / d
        return d, dx[-2], rhs
    order, value = bc
    if order == 1:
        return 0.0, 1.0, value
    return dx[-1], 2 * dx[-1], 0.5 * value * dx[-1] ** 2 + 3 * (y[-1] - y[-2])


def _clamped_or_free_slopes(ends: list[Any], x: Any, dx: Any, y: Any, slope: Any) -> Any:
    """The slopes for end conditions other than periodic: SciPy's tridiagonal system (its
    interior rows make the second derivative continuous at the inner knots)."""
    start_diagonal, start_above, start_rhs = _start_row(ends[0], x, dx, y, slope)
    end_below, end_diagonal, end_rhs = _end_row(ends[1], x, dx, y, slope)
    dxc = _column(dx, 2)
    interior = 3 * (dxc[1:] * slope[:-1] + dxc[:-1] * slope[1:])
    below = np.concatenate([_one(0.0), dx[1:], _one(end_below)])
    diagonal = np.concatenate([_one(start_diagonal), 2 * (dx[:-1] + dx[1:]), _one(end_diagonal)])
    above = np.concatenate([_one(start_above), dx[:-1], _one(0.0)])
    rhs = np.concatenate([start_rhs[None], interior, end_rhs[None]])
    return _tridiagonal_solve(below, diagonal, above, rhs)


def _parabola_slopes(dx: Any, slope: Any) -> Any:
    """Three knots, not-a-knot at both ends: the parabola through them (as SciPy)."""
    dxc = _column(dx, 2)
    below = np.concatenate([_one(0.0), dx[1:2], _one(1.0)])
    diagonal = np.concatenate([_one(1.0), _one(2 * (dx[0] + dx[1])), _one(1.0)])
    above = np.concatenate([_one(1.0), dx[0:1], _one(0.0)])
    middle = 3 * (dxc[0] * slope[1] + dxc[1] * slope[0])
    rhs = np.stack([2 * slope[0], middle, 2 * slope[1]])
    return _tridiagonal_solve(below, diagonal, above, rhs)


def _periodic_slopes(dx: Any, slope: Any) -> Any:
    """Periodic ends: ``s[-1] = s[0]``, and the second derivative is continuous at every knot,
    the first joined to the last. The cyclic system of ``m = n - 1`` equations is solved as
    SciPy does: its first ``m - 1`` rows and columns are tridiagonal; two solves with them give
    ``s[:m-1]`` as a function of ``s[m-1]``, which the last row then fixes."""
    m = np.shape(dx)[0]
    dxc = _column(dx, 2)
    if m == 2:  # SciPy's closed form for three knots
        common = np.sum(slope / dxc, axis=0) / np.sum(1.0 / dxc, axis=0)
        return common[None] + np.zeros((3, 1))
    before = np.concatenate([dx[-1:], dx[:-1]])  # dx[i - 1], cyclically
    rhs = 3 * (dxc * np.concatenate([slope[-1:], slope[:-1]]) + _column(before, 2) * slope)
    inner = m - 1
    below, diagonal, above = dx[:inner], 2 * (before + dx)[:inner], before[:inner]
    free = _tridiagonal_solve(below, diagonal, above, rhs[:-1])
    # the column of s[m-1] in the first m - 1 rows: dx[0] in row 0, dx[m-3] in row m-2
    corner = np.concatenate([-dx[:1], np.zeros(inner - 2), -dx[m - 3 : m - 2]])
    per_last = _tridiagonal_solve(below, diagonal, above, corner[:, None])
    last = (rhs[-1] - dx[m - 2] * free[0] - dx[m - 1] * free[-1]) / (
        2 * (dx[m - 1] + dx[m - 2]) + dx[m - 2] * per_last[0] + dx[m - 1] * per_last[-1]
    )
    s = free + per_last * last[None]
    return np.concatenate([s, last[None], s[:1]])


def _knot_slopes(ends: list[Any], x: Any, y: Any) -> Any:
    """The first derivative of the spline at each knot, shape ``(n, r)``."""
    n = np.shape(x)[0]
    dx = np.diff(x)
    slope = np.diff(y, axis=0) / _column(dx, 2)
    if n == 2:  # one piece: a knot-free or periodic end has the chord's slope
        ends = [(1, slope[0]) if isinstance(bc, str) else bc for bc in ends]
    if n == 3 and ends[0] == "not-a-knot" and ends[1] == "not-a-knot":
        return _parabola_slopes(dx, slope)
    if ends[0] == "periodic":
        return _periodic_slopes(dx, slope)
    return _clamped_or_free_slopes(ends, x, dx, y, slope)


class CubicSpline(CubicHermiteSpline):
    """``scipy.interpolate.CubicSpline`` on traced values ``y``, knots ``x`` or end derivative
    values: twice continuously differentiable, ``bc_type`` ``'not-a-knot'``, ``'natural'``,
    ``'clamped'``, ``'periodic'`` or ``((order, value), (order, value))``. The slopes come from
    SciPy's (cyclic) tridiagonal system, solved in O(n).

    >>> import fusegrad as fg
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> fg.grad(lambda y: CubicSpline(x, y, bc_type="natural")(0.5))(np.zeros(3))
    array([ 0.40625,  0.6875 , -0.09375])
    """

    __new__ = _scipy_when_plain(_si.CubicSpline)

    def __init__(
        self,
        x: Any,
        y: Any,
        axis: int = 0,
        bc_type: Any = "not-a-knot",
        extrapolate: Any = None,
    ) -> None:
        x, y2, axis, trailing = _spline_data(x, y, axis)
        ends = _boundary_conditions(bc_type, trailing)
        if extrapolate is None:
            extrapolate = "periodic" if ends[0] == "periodic" else True
        s = _knot_slopes(ends, x, y2)
        self._set(_hermite_coeffs(x, y2, s, trailing), x, extrapolate, axis)


# --------------------------------------------------------------------------------------------------
# B-splines: knots t, coefficients c of shape (n, ...), degree k
# --------------------------------------------------------------------------------------------------


def _bspline_derivative(t: Any, c: Any, k: int, nu: int) -> tuple[Any, Any, int]:
    """Knots, coefficients and degree of the ``nu``-th derivative (SciPy's ``splder``; a term
    over a repeated knot, whose basis function is 0, counts 0)."""
    for _ in range(nu):
        n = np.shape(t)[0] - k - 1
        span = t[k + 1 : k + n] - t[1:n]
        scale = np.where(span > 0, k / np.where(span > 0, span, 1.0), 0.0)
        c = (c[1:n] - c[: n - 1]) * _column(scale, np.ndim(c))
        t, k = t[1:-1], k - 1
    return t, c, k


def _de_boor(t: Any, c: Any, k: int, interval: Any, q: Any) -> Any:
    """The spline at points ``q`` in the knot intervals ``t[l] <= q < t[l + 1]``: the ``k + 1``
    B-splines that act there by the Cox-de Boor recursion, as SciPy evaluates them (a term over
    a repeated knot is 0: de Boor's weights there were 0/0), times their coefficients."""
    h: list[Any] = [1.0]
    for j in range(1, k + 1):
        previous, h = h, [0.0] * (j + 1)
        for m in range(1, j + 1):
            right, left = _take(t, interval + m), _take(t, interval + m - j)
            same = np.equal(stop_gradient(right), stop_gradient(left))
            w = np.where(same, 0.0, previous[m - 1] / np.where(same, 1.0, right - left))
            h[m - 1] = h[m - 1] + w * (right - q)
            h[m] = w * (q - left)
    ndim = np.ndim(c)
    return sum(_take(c, interval - k + i) * _column(h[i], ndim) for i in range(k + 1))


def _evaluate_bspline(t: Any, c: Any, k: int, xq: Any, nu: int, extrapolate: Any, axis: int) -> Any:
    """The B-spline (its ``nu``-th derivative) at ``xq``, shaped as SciPy's ``BSpline``."""
    if nu == k + 1:  # 0, with SciPy's nan outside the base interval and at nan
        return 0.0 * _evaluate_bspline(t, c, k, xq, 0, extrapolate, axis)
    if nu > k + 1:  # 0 everywhere, as SciPy
        shape = np.shape(xq)
        return _to_axis(np.zeros(shape + np.shape(c)[1:]), len(shape), axis)
    t, c, k = _bspline_derivative(t, c, k, nu)
    n = np.shape(t)[0] - k - 1
    shape, q = _points(xq)
    if extrapolate == "periodic":
        q = t[k] + np.mod(q - t[k], t[n] - t[k])
        extrapolate = False
    interval = np.clip(np.searchsorted(t, stop_gradient(q), side="right") - 1, k, n - 1)
    values = _nan_where(_undefined(t[k], t[n], q, extrapolate), _de_boor(t, c, k, interval, q))
    return _to_axis(np.reshape(values, shape + np.shape(c)[1:]), len(shape), axis)


# --------------------------------------------------------------------------------------------------
# interp1d
# --------------------------------------------------------------------------------------------------

_SPLINE_ORDERS = {"zero": 0, "slinear": 1, "quadratic": 2, "cubic": 3}
_NEIGHBOUR_KINDS = ("linear", "nearest", "nearest-up", "previous", "next")


def _kind_and_order(kind: Any) -> tuple[str, int | None]:
    if isinstance(kind, str) and kind in _SPLINE_ORDERS:
        return "spline", _SPLINE_ORDERS[kind]
    if isinstance(kind, int):
        return "spline", kind
    if kind not in _NEIGHBOUR_KINDS:
        raise NotImplementedError(f"{kind} is unsupported: Use fitpack routines for other types.")
    return kind, None


def _extrapolates(fill_value: Any) -> bool:
    return isinstance(fill_value, str) and fill_value == "extrapolate"


def _fill(value: Any, trailing: tuple[int, ...], name: str) -> Any:
    """A fill value broadcast to the shape of one interpolated value (SciPy's
    ``_check_broadcast_up_to``)."""
    target = trailing or (1,)
    shape = np.shape(value)
    fits = len(shape) <= len(target) and all(f in (1, t) for f, t in zip(shape[::-1], target[::-1]))
    if not fits:
        raise ValueError(
            f"{name} argument must be able to broadcast up to shape {target} but had shape {shape}"
        )
    return np.reshape(np.broadcast_to(_as_float(value), target), trailing)


def _interpolating_spline(x: Any, y: Any, order: int) -> tuple[Any, Any, int]:
    """``(t, c, k)`` of ``make_interp_spline(x, y, k=order)``. The spline is linear in ``y``, so
    its coefficients are those of the splines through the unit vectors, applied to ``y``."""
    if _traced(x):
        raise NotImplementedError(
            "scipy.interpolate.interp1d with a spline kind ('zero', 'slinear', 'quadratic', "
            "'cubic' or an order) and traced x: fusegrad differentiates these in y and in the "
            "query points. For traced knots use kind 'linear', 'nearest', 'nearest-up', "
            "'previous' or 'next', or scipy.interpolate.CubicSpline"
        )
    n = np.shape(x)[0]
    units = _si.make_interp_spline(x, np.eye(n), k=order, check_finite=False)
    c = units.c @ np.reshape(y, (n, -1))
    return units.t, np.reshape(c, (np.shape(c)[0],) + np.shape(y)[1:]), order


class interp1d:  # noqa: N801  (SciPy's name)
    """``scipy.interpolate.interp1d`` with traced ``y``, ``x`` or ``fill_value``: every
    ``kind`` (the spline kinds with a plain ``x``), ``fill_value`` and ``bounds_error`` as SciPy
    (``bounds_error``, True by default unless ``fill_value='extrapolate'``, reads the points).

    >>> import fusegrad as fg
    >>> f = interp1d(np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 0.0]), bounds_error=False)
    >>> f(np.array([0.25, 1.5, 3.0]))
    array([0.5, 1. , nan])
    >>> fg.grad(lambda q: f(q))(0.25)  # the slope of the first piece
    2.0
    """

    x: Any
    y: Any
    axis: int
    bounds_error: Any
    _y: Any
    _kind: str
    _spline: tuple[Any, Any, int]
    _extrapolate: bool
    _fill_below: Any
    _fill_above: Any
    _fill_value_orig: Any

    __new__ = _scipy_when_plain(_si.interp1d)

    def __init__(
        self,
        x: Any,
        y: Any,
        kind: Any = "linear",
        axis: int = -1,
        copy: bool = True,
        bounds_error: Any = None,
        fill_value: Any = np.nan,
        assume_sorted: bool = False,
    ) -> None:
        x, y = _as_float(x), _as_float(y)
        if np.ndim(y) == 0:
            raise ValueError("the y array must have at least one dimension.")
        if np.ndim(x) != 1:
            raise ValueError("the x array must have exactly one dimension.")
        axis = axis % np.ndim(y)
        if np.shape(y)[axis] != np.shape(x)[0]:
            raise ValueError("x and y arrays must be equal in length along interpolation axis.")
        self._kind, order = _kind_and_order(kind)
        if not assume_sorted:
            order_of_x = np.argsort(stop_gradient(x), kind="mergesort")
            x, y = _take(x, order_of_x), _take(y, order_of_x, axis)
        self.x, self.y, self.axis, self.bounds_error = x, y, axis, bounds_error
        self._y = np.moveaxis(y, axis, 0)
        least = 1 if order is None else order + 1
        if np.shape(x)[0] < least:
            raise ValueError(f"x and y arrays must have at least {least} entries")
        if order is not None:
            self._spline = _interpolating_spline(x, self._y, order)
        if self._kind in ("previous", "next") and _extrapolates(fill_value):
            self._forbid_raising()
            # beyond the data there is no previous (next) point on one side
            last, first = self._y[-1], self._y[0]
            fill_value = (np.nan, last) if self._kind == "previous" else (first, np.nan)
        self.fill_value = fill_value

    def _forbid_raising(self) -> None:
        if self.bounds_error:
            raise ValueError("Cannot extrapolate and raise at the same time.")
        self.bounds_error = False

    @property
    def fill_value(self) -> Any:
        """The fill value, as given (SciPy's attribute; setting it applies a new one).

        >>> f = interp1d(np.array([0.0, 1.0]), np.array([0.0, 1.0]), fill_value=(-1.0, 2.0))
        >>> f.fill_value
        (-1.0, 2.0)
        """
        return self._fill_value_orig

    @fill_value.setter
    def fill_value(self, fill_value: Any) -> None:
        if _extrapolates(fill_value):
            self._forbid_raising()
            self._extrapolate = True
        else:
            trailing = np.shape(self._y)[1:]
            if isinstance(fill_value, tuple) and len(fill_value) == 2:
                below = _fill(fill_value[0], trailing, "fill_value (below)")
                above = _fill(fill_value[1], trailing, "fill_value (above)")
            else:
                below = above = _fill(fill_value, trailing, "fill_value")
            self._fill_below, self._fill_above = below, above
            self._extrapolate = False
            if self.bounds_error is None:
                self.bounds_error = True
        self._fill_value_orig = fill_value

    def __call__(self, x: Any) -> Any:
        """The interpolant at ``x``: the interpolation axis of ``y`` replaced by ``x``'s shape.

        >>> interp1d(np.array([0.0, 1.0]), np.array([[0.0, 1.0], [2.0, 4.0]]))(0.5)
        array([0.5, 3. ])
        """
        shape, q = _points(x)
        values = self._values(q)
        if not self._extrapolate:
            below, above = self._out_of_bounds(q)
            ndim = np.ndim(values)
            values = np.where(_column(above, ndim), self._fill_above, values)
            values = np.where(_column(below, ndim), self._fill_below, values)
        values = np.reshape(values, shape + np.shape(self._y)[1:])
        return values if shape == () else _to_axis(values, len(shape), self.axis)

    def _values(self, q: Any) -> Any:
        """The interpolant at the flat points ``q``, shape ``(len(q),) + y's other axes``."""
        if self._kind == "linear":
            return self._linear(q)
        if self._kind == "spline":
            t, c, k = self._spline
            return _evaluate_bspline(t, c, k, q, 0, True, 0)
        return _take(self._y, self._neighbour(q))

    def _linear(self, q: Any) -> Any:
        if (
            np.ndim(self._y) == 1
            and not self._extrapolate
            and all(
                np.result_type(v) in (np.dtype(np.float64), np.dtype(int))
                for v in (self.x, self._y)
            )
        ):
            # SciPy's own choice there: np.interp (a repeated knot takes its last value)
            return np.interp(q, self.x, self._y)
        n = np.shape(self.x)[0]
        above = np.clip(np.searchsorted(stop_gradient(self.x), stop_gradient(q)), 1, n - 1)
        below = above - 1
        x_lo, x_hi = _take(self.x, below), _take(self.x, above)
        y_lo, y_hi = _take(self._y, below), _take(self._y, above)
        ndim = np.ndim(self._y)
        return (y_hi - y_lo) / _column(x_hi - x_lo, ndim) * _column(q - x_lo, ndim) + y_lo

    def _neighbour(self, q: Any) -> Any:
        """The index of the data point a ``nearest``/``previous``/``next`` interpolant takes."""
        xs, qs = stop_gradient(self.x), stop_gradient(q)
        n = np.shape(xs)[0]
        if self._kind == "previous":  # the last x <= q (SciPy: x nudged down, side 'left')
            return np.clip(np.searchsorted(xs, qs, side="right"), 1, n) - 1
        if self._kind == "next":  # the first x >= q
            return np.clip(np.searchsorted(xs, qs, side="left"), 0, n - 1)
        halves = xs / 2.0
        midpoints = halves[1:] + halves[:-1]
        if self._kind == "nearest":  # a point halfway between two takes the lower one
            return np.clip(np.searchsorted(midpoints, qs, side="left"), 0, n - 1)
        return np.clip(np.searchsorted(midpoints, qs, side="right"), 0, n - 1)

    def _out_of_bounds(self, q: Any) -> tuple[Any, Any]:
        """Where the points lie below and above the data; with ``bounds_error``, SciPy's error
        (which reads the points)."""
        xs, qs = stop_gradient(self.x), stop_gradient(q)
        below, above = qs < xs[0], qs > xs[-1]
        if self.bounds_error and np.any(below):
            raise ValueError(
                f"A value ({qs[np.argmax(below)]}) in x_new is below the interpolation "
                f"range's minimum value ({xs[0]})."
            )
        if self.bounds_error and np.any(above):
            raise ValueError(
                f"A value ({qs[np.argmax(above)]}) in x_new is above the interpolation "
                f"range's maximum value ({xs[-1]})."
            )
        return below, above


# --------------------------------------------------------------------------------------------------
# SciPy's own objects, built on plain data, at traced points
# --------------------------------------------------------------------------------------------------


def _mirror_ppoly(pp: Any) -> PPoly:
    return PPoly.construct_fast(pp.c, pp.x, pp.extrapolate, pp.axis)


def _ppoly_at_traced_points(self: Any, x: Any, nu: int = 0, extrapolate: Any = None) -> Any:
    """SciPy's ``PPoly.__call__`` (and ``BPoly``'s, through its power basis) at traced points."""
    pp = self if isinstance(self, _si.PPoly) else _si.PPoly.from_bernstein_basis(self)
    return _mirror_ppoly(pp)(x, nu, extrapolate)


def _ppoly_integrate(self: Any, a: Any, b: Any, extrapolate: Any = None) -> Any:
    """SciPy's ``PPoly.integrate`` with traced bounds."""
    return _mirror_ppoly(self).integrate(a, b, extrapolate)


def _bspline_at_traced_points(self: Any, x: Any, nu: int = 0, extrapolate: Any = None) -> Any:
    """SciPy's ``BSpline.__call__`` at traced points."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    return _evaluate_bspline(self.t, self.c, self.k, x, nu, extrapolate, self.axis)


def _bspline_integrate(self: Any, a: Any, b: Any, extrapolate: Any = None) -> Any:
    """SciPy's ``BSpline.integrate`` with traced bounds: its antiderivative (a plain BSpline)
    at ``b`` less at ``a``, the bounds clipped to the base interval without extrapolation."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    if extrapolate == "periodic":
        raise NotImplementedError(
            "scipy.interpolate.BSpline.integrate with traced bounds and periodic extrapolation: "
            "integrate over the period with plain bounds, or use extrapolate=True/False"
        )
    k, t = self.k, self.t
    n = np.shape(t)[0] - k - 1
    if not extrapolate:
        a, b = np.clip(a, t[k], t[n]), np.clip(b, t[k], t[n])
    anti = self.antiderivative()
    at = [_evaluate_bspline(anti.t, anti.c, anti.k, v, 0, True, 0) for v in (a, b)]
    return at[1] - at[0]


def _mirror_interp1d(f: Any) -> interp1d:
    """This module's ``interp1d`` with a SciPy ``interp1d``'s data and settings."""
    new = object.__new__(interp1d)
    new.x, new.y, new.axis, new._kind = f.x, f.y, f.axis, f._kind
    new._y = np.moveaxis(f.y, f.axis, 0)
    trailing = np.shape(new._y)[1:]
    if f._kind == "spline":
        spline = f._spline
        new._spline = (spline.t, np.reshape(spline.c, (-1,) + trailing), spline.k)
    new.bounds_error, new._extrapolate = f.bounds_error, f._extrapolate
    new._fill_value_orig = f._fill_value_orig
    if not f._extrapolate:  # SciPy keeps them flat: one value, or one per interpolated value
        below, above = f._fill_value_below, f._fill_value_above
        new._fill_below = np.reshape(below, trailing if np.size(below) > 1 else ())
        new._fill_above = np.reshape(above, trailing if np.size(above) > 1 else ())
    return new


def _interp1d_at_traced_points(self: Any, x: Any) -> Any:
    """SciPy's ``interp1d.__call__`` at traced points."""
    return _mirror_interp1d(self)(x)


def _redirect_constructor(cls: type, mirror: Any) -> None:
    """Make ``cls(...)`` build ``mirror(...)`` when an argument is traced; SciPy's own object
    otherwise. The class stays SciPy's (``isinstance``, subclasses, pickling are unchanged)."""
    current = getattr(cls.__dict__.get("__new__"), "__func__", None)
    if getattr(current, "__fusegrad_mirror__", None) is not None:
        return

    def new(klass: type, *args: Any, **kwargs: Any) -> Any:
        if klass is cls and _dispatch.traced(args, kwargs):
            return mirror(*args, **kwargs)
        return object.__new__(klass)  # SciPy's interpolators have no __new__ of their own

    new.__name__, new.__qualname__ = "__new__", f"{cls.__qualname__}.__new__"
    new.__fusegrad_mirror__ = mirror  # type: ignore[attr-defined]
    cls.__new__ = staticmethod(new)  # type: ignore[assignment]


def _patch_inherited(cls: type, name: str, mirror: Any) -> None:
    """Like ``_dispatch.patch_attr`` for a method ``cls`` inherits: the wrapper goes on ``cls``
    alone, not on the base class that defines it."""
    if name in cls.__dict__:
        _dispatch.patch_attr(cls, name, mirror)
    else:
        setattr(cls, name, _dispatch.wrap(getattr(cls, name), mirror))


def _patch(module: Any) -> None:
    """Install the redirections in ``scipy.interpolate`` (called by ``fusegrad.scipy``)."""
    _redirect_constructor(module.PPoly, PPoly)
    _redirect_constructor(module.CubicHermiteSpline, CubicHermiteSpline)
    _redirect_constructor(module.CubicSpline, CubicSpline)
    _redirect_constructor(module.PchipInterpolator, PchipInterpolator)
    _redirect_constructor(module.interp1d, interp1d)
    _dispatch.patch_attr(_sip._PPolyBase, "__call__", _ppoly_at_traced_points)
    _dispatch.patch_attr(_sip.PPoly, "integrate", _ppoly_integrate)
    _dispatch.patch_attr(module.BSpline, "__call__", _bspline_at_traced_points)
    _dispatch.patch_attr(module.BSpline, "integrate", _bspline_integrate)
    _patch_inherited(module.interp1d, "__call__", _interp1d_at_traced_points)


_dispatch.loaded(__name__)

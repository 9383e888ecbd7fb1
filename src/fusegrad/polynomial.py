"""``numpy.polynomial`` on traced values: the six series modules and their classes.

``numpy.polynomial``'s functions are Python code that converts its arguments to arrays and writes
into them in place, which a traced value cannot go through. At ``import fusegrad`` its functions
are redirected in place (``fusegrad.scipy._dispatch.retarget``, as SciPy's are): with plain
arguments NumPy's own code runs; with a traced one, a mirror written here. In each of
``polynomial``, ``chebyshev``, ``legendre``, ``laguerre``, ``hermite`` and ``hermite_e`` (``poly``,
``cheb``, ``leg``, ``lag``, ``herm``, ``herme``): ``*der``, ``*int``, ``*add``, ``*sub``,
``*mul``, ``*mulx``, ``*pow``, ``*div``, ``*val``, ``*val2d``, ``*val3d``, ``*grid2d``, ``*grid3d``,
``*vander``, ``*vander2d``, ``*vander3d``, ``*companion``, ``*roots``, ``*line`` and
``*fromroots``; in ``polyutils``: ``as_series``, ``trimseq``, ``mapdomain`` and ``getdomain``,
which is what lets the classes (``Polynomial``, ``Chebyshev``, ...) hold traced coefficients,
domains and windows unchanged.

One code serves the six bases, because NumPy's own functions say what each basis is: ``*der``,
``*int`` and ``*mulx`` are linear in the coefficients, so their matrices are NumPy's function
applied to the unit series; ``*mul`` is bilinear, its tensor NumPy's product of unit series
(the power series uses ``np.convolve``, as NumPy does); ``*vander`` runs the three-term
recurrence ``x Pᵢ = aᵢ Pᵢ₊₁ + bᵢ Pᵢ + cᵢ Pᵢ₋₁`` read from NumPy's ``*mulx``; ``*companion`` is
affine in ``c[:-1] / c[-1]``, and ``*roots`` are its eigenvalues (``np.linalg.eigvals``, sorted,
as NumPy). The matrices are computed once per size and kept. Results agree with NumPy's to
rounding.

The values of traced coefficients are never read: NumPy drops trailing zero coefficients (in
``as_series``, ``*add``, ``*mul``, ...), which would make the result's length, and so the
derivative, depend on the values: dropping an exact zero would also drop its derivative (the
gradient of ``sum(polyadd(c, d))`` at ``c = 0`` would lose all but one of its ones). So a
traced series keeps its length: a result may end with zeros NumPy drops (the same polynomial),
and ``fg.jit`` replays these functions compiled. Plain coefficients are trimmed as NumPy
trims them. A traced series whose last coefficient is exactly zero has no roots to
differentiate (its companion matrix divides by that zero).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> P = np.polynomial
    >>> fg.grad(lambda c: np.sum(P.polynomial.polyder(c)))(np.array([1.0, 2.0, 3.0]))
    array([0., 1., 2.])
    >>> fg.grad(lambda c: P.Chebyshev(c).deriv()(0.5))(np.array([1.0, 2.0, 3.0]))
    array([0., 1., 2.])
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev, hermite, hermite_e, laguerre, legendre, polyutils
from numpy.polynomial import polynomial as power_series
from numpy.polynomial._polybase import ABCPolyBase

from .rules.common import as_array
from .scipy import _dispatch

_INTEGER_KINDS = "?bBhHiIlLqQpP"  # NumPy's test for coefficients it converts to float64


@dataclasses.dataclass(frozen=True)
class Basis:
    """One of ``numpy.polynomial``'s series modules and its functions' prefix."""

    module: types.ModuleType
    prefix: str

    def numpy(self, name: str) -> Callable:
        """NumPy's own code for ``<prefix><name>``, never a mirror."""
        return _dispatch.scipy_code(self.module.__dict__[self.prefix + name])

    def public(self, name: str) -> Callable:
        """``<prefix><name>`` as a user calls it (redirected on traced values)."""
        return self.module.__dict__[self.prefix + name]

    @property
    def is_power_series(self) -> bool:
        return self.prefix == "poly"

    @property
    def default_maxpower(self) -> Any:
        return self.numpy("pow").__defaults__[0]  # type: ignore[index]


BASES = {
    basis.module.__name__.rsplit(".", 1)[1]: basis
    for basis in (
        Basis(power_series, "poly"),
        Basis(chebyshev, "cheb"),
        Basis(legendre, "leg"),
        Basis(laguerre, "lag"),
        Basis(hermite, "herm"),
        Basis(hermite_e, "herme"),
    )
}


def _traced(*values: Any) -> bool:
    return _dispatch.traced(values, {})


# --------------------------------------------------------------------------------------------------
# Arguments, as NumPy reads them
# --------------------------------------------------------------------------------------------------


def _as_int(x: Any, desc: str) -> int:
    try:
        return operator.index(x)
    except TypeError as e:
        raise TypeError(f"{desc} must be an integer, received {x}") from e


def _axis(axis: Any, ndim: int) -> int:
    return int(np.lib.array_utils.normalize_axis_index(_as_int(axis, "the axis"), ndim))


def _float(c: Any) -> Any:
    return c + 0.0 if c.dtype.char in _INTEGER_KINDS else c


def _coefficients(c: Any) -> Any:
    """``np.array(c, ndmin=1)`` for traced values too, integers as float64 (as ``*der``)."""
    c = as_array(c)
    return _float(c if np.ndim(c) else np.reshape(c, (1,)))


def _real_dtype(dtype: Any) -> Any:
    """The real dtype a basis matrix for coefficients of ``dtype`` is computed in."""
    return np.empty(0, dtype).real.dtype


def _unit(n: int, j: int, dtype: Any) -> np.ndarray:
    e = np.zeros(n, dtype)
    e[j] = 1
    return e


def _padded(c: Any, n: int) -> Any:
    """``c`` with zeros appended to length ``n``."""
    missing = n - np.shape(c)[0]
    return c if missing == 0 else np.concatenate([c, np.zeros(missing, c.dtype)])


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)  # shared by every call through the caches
    return a


def _apply(matrix: np.ndarray, c: Any) -> Any:
    """``matrix`` applied along the first axis of ``c`` (a series or a stack of them)."""
    n = np.shape(c)[0]
    rest = np.shape(c)[1:]
    if not rest:
        return np.matmul(matrix, c)
    flat = np.matmul(matrix, np.reshape(c, (n, math.prod(rest))))
    return np.reshape(flat, (matrix.shape[0], *rest))


# --------------------------------------------------------------------------------------------------
# Each basis, from NumPy's own functions on unit series (computed once per size)
# --------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _der_matrix(basis: Basis, n: int, dtype: Any) -> np.ndarray:
    """``(n - 1, n)``: one derivative of a series of ``n`` coefficients."""
    return _frozen(basis.numpy("der")(np.eye(n, dtype=dtype), 1, 1, 0))


@functools.lru_cache(maxsize=256)
def _int_matrix(basis: Basis, n: int, dtype: Any) -> np.ndarray:
    """``(n + 1, n)``: one antiderivative, zero at 0 (NumPy's ``k=0, lbnd=0``)."""
    return _frozen(basis.numpy("int")(np.eye(n, dtype=dtype), 1, [], 0, 1, 0))


@functools.lru_cache(maxsize=256)
def _mulx_matrix(basis: Basis, n: int, dtype: Any) -> np.ndarray:
    """``(n + 1, n)``: multiplication by ``x``."""
    mulx = basis.numpy("mulx")
    columns = [_padded(mulx(_unit(n, j, dtype)), n + 1) for j in range(n)]
    return _frozen(np.stack(columns, axis=1))


@functools.lru_cache(maxsize=64)
def _mul_tensor(basis: Basis, n1: int, n2: int, dtype: Any) -> np.ndarray:
    """``(n1, n2, n1 + n2 - 1)``: the product of the ``i``-th and ``j``-th basis functions."""
    mul = basis.numpy("mul")
    k = n1 + n2 - 1
    t = np.array(
        [[_padded(mul(_unit(n1, i, dtype), _unit(n2, j, dtype)), k) for j in range(n2)]
         for i in range(n1)]
    )  # fmt: skip
    return _frozen(t)


@functools.lru_cache(maxsize=64)
def _recurrence(basis: Basis, n: int) -> tuple[tuple[float, float, float], ...]:
    """``(aᵢ, bᵢ, cᵢ)`` of ``x Pᵢ = aᵢ Pᵢ₊₁ + bᵢ Pᵢ + cᵢ Pᵢ₋₁`` for ``i < n``."""
    mulx = basis.numpy("mulx")
    terms = []
    for i in range(n):
        xp = mulx(_unit(i + 1, i, np.float64))
        terms.append((float(xp[i + 1]), float(xp[i]), float(xp[i - 1]) if i else 0.0))
    return tuple(terms)


@functools.lru_cache(maxsize=64)
def _companion_parts(basis: Basis, n: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The companion matrix of ``n + 1`` coefficients is ``base`` but for its last column,
    ``base[:, -1] + weights * c[:-1] / c[-1]``."""
    companion = basis.numpy("companion")
    base = companion(_unit(n + 1, n, dtype))
    weights = companion(np.ones(n + 1, dtype))[:, -1] - base[:, -1]
    return _frozen(base), _frozen(weights)


# --------------------------------------------------------------------------------------------------
# polyutils
# --------------------------------------------------------------------------------------------------


def _as_series(alist: Any, trim: bool = True) -> list[Any]:
    """``polyutils.as_series``: 1-d series of a common dtype; only plain ones are trimmed."""
    arrays = [as_array(a) if _traced(a) else np.array(a, ndmin=1, copy=None) for a in alist]
    arrays = [a if np.ndim(a) else np.reshape(a, (1,)) for a in arrays]
    for a in arrays:
        if np.size(a) == 0:
            raise ValueError("Coefficient array is empty")
        if np.ndim(a) != 1:
            raise ValueError("Coefficient array is not 1-d")
    if trim:
        arrays = [a if _traced(a) else polyutils.trimseq(a) for a in arrays]
    try:
        dtype = np.common_type(*[np.empty(0, a.dtype) for a in arrays])
    except TypeError as e:
        raise ValueError("Coefficient arrays have no common type") from e
    return [_cast(a, dtype) for a in arrays]


def _cast(a: Any, dtype: Any) -> Any:
    if not _traced(a):
        return np.array(a, copy=True, dtype=dtype)
    return a if a.dtype == dtype else a.astype(dtype)


def _trimseq(seq: Any) -> Any:
    """``polyutils.trimseq``: a traced series is never trimmed (its zeros' derivatives count)."""
    return seq


def _mapdomain(x: Any, old: Any, new: Any) -> Any:
    """``polyutils.mapdomain``: ``x`` mapped linearly from ``old`` onto ``new``."""
    off, scl = polyutils.mapparms(old, new)
    return off + scl * as_array(x)


def _getdomain(x: Any) -> Any:
    """``polyutils.getdomain``: the smallest interval (rectangle) holding ``x``."""
    [x] = _as_series([x], trim=False)
    if np.iscomplexobj(x):
        low = np.min(np.real(x)) + 1j * np.min(np.imag(x))
        high = np.max(np.real(x)) + 1j * np.max(np.imag(x))
        return np.stack([low, high])
    return np.stack([np.min(x), np.max(x)])


# --------------------------------------------------------------------------------------------------
# Calculus
# --------------------------------------------------------------------------------------------------


def _is_one(scl: Any) -> bool:
    return not _traced(scl) and np.ndim(scl) == 0 and scl == 1


def _der(basis: Basis, c: Any, m: Any = 1, scl: Any = 1, axis: Any = 0) -> Any:
    """``*der``: ``m`` derivatives along ``axis``, each multiplied by ``scl``."""
    c = _coefficients(c)
    cnt = _as_int(m, "the order of derivation")
    if cnt < 0:
        raise ValueError("The order of derivation must be non-negative")
    iaxis = _axis(axis, np.ndim(c))
    if cnt == 0:
        return c
    c = np.moveaxis(c, iaxis, 0)
    if cnt >= np.shape(c)[0]:
        c = c[:1] * 0
    else:
        dtype = _real_dtype(c.dtype)
        for _ in range(cnt):
            c = _apply(_der_matrix(basis, np.shape(c)[0], dtype), c if _is_one(scl) else c * scl)
    return np.moveaxis(c, 0, iaxis)


def _int(basis: Basis, c: Any, m: Any = 1, k: Any = (), lbnd: Any = 0, scl: Any = 1,
         axis: Any = 0) -> Any:  # fmt: skip
    """``*int``: ``m`` integrals along ``axis``, the ``i``-th times ``scl`` and equal to
    ``k[i]`` at ``lbnd``."""
    c = _coefficients(c)
    if not np.iterable(k):
        k = [k]
    cnt = _as_int(m, "the order of integration")
    if cnt < 0:
        raise ValueError("The order of integration must be non-negative")
    if len(k) > cnt:
        raise ValueError("Too many integration constants")
    if np.ndim(lbnd) != 0:
        raise ValueError("lbnd must be a scalar.")
    if np.ndim(scl) != 0:
        raise ValueError("scl must be a scalar.")
    iaxis = _axis(axis, np.ndim(c))
    if cnt == 0:
        return c
    c = np.moveaxis(c, iaxis, 0)
    for constant in [*k, *[0] * (cnt - len(k))]:
        c = _integrate_once(basis, c if _is_one(scl) else c * scl, constant, lbnd)
    return np.moveaxis(c, 0, iaxis)


def _integrate_once(basis: Basis, c: Any, k: Any, lbnd: Any) -> Any:
    if np.shape(c)[0] == 1 and not _traced(c) and np.all(c[0] == 0):
        return c + k  # NumPy keeps a zero constant one coefficient long
    tmp = _apply(_int_matrix(basis, np.shape(c)[0], _real_dtype(c.dtype)), c)
    # every basis starts with P₀ = 1: adding to tmp[0] shifts the integral by a constant
    shift = k - basis.public("val")(lbnd, tmp)
    return np.concatenate([tmp[:1] + shift, tmp[1:]])


# --------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------


def _add(basis: Basis, c1: Any, c2: Any) -> Any:
    """``*add``: the sum of two series."""
    c1, c2 = _as_series([c1, c2])
    n = max(np.shape(c1)[0], np.shape(c2)[0])
    return _padded(c1, n) + _padded(c2, n)


def _sub(basis: Basis, c1: Any, c2: Any) -> Any:
    """``*sub``: the difference of two series."""
    c1, c2 = _as_series([c1, c2])
    n = max(np.shape(c1)[0], np.shape(c2)[0])
    return _padded(c1, n) - _padded(c2, n)


def _mulx(basis: Basis, c: Any) -> Any:
    """``*mulx``: the series times ``x``."""
    [c] = _as_series([c])
    return _apply(_mulx_matrix(basis, np.shape(c)[0], _real_dtype(c.dtype)), c)


def _mul(basis: Basis, c1: Any, c2: Any) -> Any:
    """``*mul``: the product of two series."""
    c1, c2 = _as_series([c1, c2])
    if basis.is_power_series:
        return np.convolve(c1, c2)
    n1, n2 = np.shape(c1)[0], np.shape(c2)[0]
    t = _mul_tensor(basis, n1, n2, _real_dtype(np.result_type(c1.dtype, c2.dtype)))
    by_c1 = np.reshape(np.matmul(c1, np.reshape(t, (n1, -1))), (n2, n1 + n2 - 1))
    return np.matmul(c2, by_c1)


_NUMPY_DEFAULT: Any = object()  # the module's own default (polypow: None, the others: 16)


def _pow(basis: Basis, c: Any, pow: Any, maxpower: Any = _NUMPY_DEFAULT) -> Any:  # noqa: A002
    """``*pow``: the series to an integer power (NumPy's ``maxpower`` limit by default)."""
    [c] = _as_series([c])
    if maxpower is _NUMPY_DEFAULT:
        maxpower = basis.default_maxpower
    power = int(pow)
    if power != pow or power < 0:
        raise ValueError("Power must be a non-negative integer.")
    if maxpower is not None and power > maxpower:
        raise ValueError("Power is too large")
    if power == 0:
        return np.array([1], dtype=c.dtype)
    product = c
    for _ in range(power - 1):
        product = _mul(basis, product, c)
    return product


def _div(basis: Basis, c1: Any, c2: Any) -> tuple[Any, Any]:
    """``*div``: quotient and remainder, by long division in the basis (``polyutils._div``)."""
    c1, c2 = _as_series([c1, c2])
    if not _traced(c2) and c2[-1] == 0:
        raise ZeroDivisionError("the divisor's last coefficient is zero")
    n1, n2 = np.shape(c1)[0], np.shape(c2)[0]
    if n1 < n2:
        return c1[:1] * 0, c1
    if n2 == 1:
        return c1 / c2[-1], c1[:1] * 0
    remainder, quotient = c1, []
    for i in range(n1 - n2, -1, -1):
        shifted = _mul(basis, _unit(i + 1, i, np.float64), c2)  # Pᵢ times the divisor
        q = remainder[-1] / shifted[-1]
        remainder = remainder[:-1] - q * shifted[:-1]
        quotient.append(q)
    return np.stack(quotient[::-1]), remainder


def _line(basis: Basis, off: Any, scl: Any) -> Any:
    """``*line``: the series of ``off + scl x``."""
    if not _traced(scl) and scl == 0:
        return np.reshape(as_array(off), (1,))
    constant = _padded(basis.numpy("line")(1.0, 0.0), 2)
    identity = basis.numpy("line")(0.0, 1.0)
    return off * constant + scl * identity


def _fromroots(basis: Basis, roots: Any) -> Any:
    """``*fromroots``: the monic-in-``x`` series with these roots (NumPy's product tree)."""
    if len(roots) == 0:
        return np.ones(1)
    [roots] = _as_series([roots], trim=False)
    factors = [_line(basis, -r, 1) for r in np.sort(roots)]
    while len(factors) > 1:
        half, odd = divmod(len(factors), 2)
        paired = [_mul(basis, factors[i], factors[i + half]) for i in range(half)]
        if odd:
            paired[0] = _mul(basis, paired[0], factors[-1])
        factors = paired
    return factors[0]


# --------------------------------------------------------------------------------------------------
# Evaluation and Vandermonde matrices
# --------------------------------------------------------------------------------------------------


def _val(basis: Basis, x: Any, c: Any, tensor: bool = True) -> Any:
    """``*val``: the series at ``x``; a traced ``x`` counts as an array for ``tensor``."""
    if isinstance(x, tuple | list):
        x = as_array(x)
    if isinstance(x, ABCPolyBase):
        raise TypeError(
            "a series of traced coefficients cannot be evaluated at another series (convert(), "
            "cast()): change the basis with the module's functions (poly2cheb, cheb2poly, ...)"
        )
    c = as_array(c)
    if tensor and _traced(x):  # NumPy's isinstance(x, np.ndarray) is False for a traced x
        c = np.reshape(c, (*np.shape(c), *(1,) * np.ndim(x))) if np.ndim(c) else c
        tensor = False
    return basis.numpy("val")(x, c, tensor)


def _same_shapes(points: tuple) -> tuple:
    points = tuple(as_array(p) if _traced(p) else np.asanyarray(p) for p in points)
    if len({np.shape(p) for p in points}) > 1:
        names = {2: "x, y", 3: "x, y, z"}.get(len(points))
        raise ValueError(f"{names} are incompatible" if names else "ordinates are incompatible")
    return points


def _valnd(basis: Basis, c: Any, *points: Any) -> Any:
    first, *others = _same_shapes(points)
    val = basis.public("val")
    c = val(first, c)
    for x in others:
        c = val(x, c, tensor=False)
    return c


def _gridnd(basis: Basis, c: Any, *points: Any) -> Any:
    val = basis.public("val")
    for x in points:
        c = val(x, c)
    return c


def _val2d(basis: Basis, x: Any, y: Any, c: Any) -> Any:
    """``*val2d``: the 2-d series at the points ``(x, y)``."""
    return _valnd(basis, c, x, y)


def _val3d(basis: Basis, x: Any, y: Any, z: Any, c: Any) -> Any:
    """``*val3d``: the 3-d series at the points ``(x, y, z)``."""
    return _valnd(basis, c, x, y, z)


def _grid2d(basis: Basis, x: Any, y: Any, c: Any) -> Any:
    """``*grid2d``: the 2-d series on the grid ``x × y``."""
    return _gridnd(basis, c, x, y)


def _grid3d(basis: Basis, x: Any, y: Any, z: Any, c: Any) -> Any:
    """``*grid3d``: the 3-d series on the grid ``x × y × z``."""
    return _gridnd(basis, c, x, y, z)


def _vander(basis: Basis, x: Any, deg: Any) -> Any:
    """``*vander``: ``V[..., i] = Pᵢ(x)``, by the basis's three-term recurrence."""
    ideg = _as_int(deg, "deg")
    if ideg < 0:
        raise ValueError("deg must be non-negative")
    x = _coefficients(x)
    columns = [x * 0 + 1]
    for i, (a, b, c) in enumerate(_recurrence(basis, ideg)):
        nxt = columns[i] * (x if b == 0 else x - b)
        if c != 0:
            nxt = nxt - c * columns[i - 1]
        columns.append(nxt if a == 1 else nxt / a)
    return np.stack(columns, axis=-1)


def _vander_nd(basis: Basis, points: tuple, degrees: Any) -> Any:
    if len(points) != len(degrees):
        raise ValueError(f"Expected {len(points)} dimensions of degrees, got {len(degrees)}")
    points = _same_shapes(points)
    n = len(points)
    product: Any = None
    for i, (x, deg) in enumerate(zip(points, degrees)):
        axes = tuple(slice(None) if j == i else None for j in range(n))
        v = _vander(basis, x, deg)[(Ellipsis,) + axes]
        product = v if product is None else product * v
    shape = np.shape(product)
    return np.reshape(product, (*shape[:-n], math.prod(shape[-n:])))


def _vander2d(basis: Basis, x: Any, y: Any, deg: Any) -> Any:
    """``*vander2d``: columns ``Pᵢ(x) Pⱼ(y)``, ``j`` fastest."""
    return _vander_nd(basis, (x, y), deg)


def _vander3d(basis: Basis, x: Any, y: Any, z: Any, deg: Any) -> Any:
    """``*vander3d``: columns ``Pᵢ(x) Pⱼ(y) Pₖ(z)``, ``k`` fastest."""
    return _vander_nd(basis, (x, y, z), deg)


# --------------------------------------------------------------------------------------------------
# Roots
# --------------------------------------------------------------------------------------------------


def _companion(basis: Basis, c: Any) -> Any:
    """``*companion``: the (scaled) companion matrix, whose eigenvalues are the roots."""
    [c] = _as_series([c])
    n = np.shape(c)[0] - 1
    if n < 1:
        raise ValueError("Series must have maximum degree of at least 1.")
    if n == 1:
        return np.reshape(_linear_root(basis, c), (1, 1))
    base, weights = _companion_parts(basis, n, _real_dtype(c.dtype))
    last = base[:, -1] + weights * (c[:-1] / c[-1])
    return np.concatenate([base[:, :-1], last[:, None]], axis=1)


def _linear_root(basis: Basis, c: Any) -> Any:
    """The root of a degree-1 series, ``α + β c₀/c₁``: affine in ``c₀/c₁`` in every basis, with
    ``α`` and ``β`` read off NumPy's companion of ``[0, 1]`` and ``[1, 1]`` (``-c₀/c₁`` for the
    power series, ``1 + c₀/c₁`` for Laguerre's, ``-c₀/(2 c₁)`` for Hermite's)."""
    companion = basis.numpy("companion")
    alpha = float(companion(np.array([0.0, 1.0]))[0, 0])
    beta = float(companion(np.array([1.0, 1.0]))[0, 0]) - alpha
    return alpha + beta * (c[0] / c[1])


def _roots(basis: Basis, c: Any) -> Any:
    """``*roots``: the roots, sorted (the eigenvalues of the companion matrix)."""
    [c] = _as_series([c])
    if np.shape(c)[0] < 2:
        return np.array([], dtype=c.dtype)
    if np.shape(c)[0] == 2:
        return np.reshape(_linear_root(basis, c), (1,))
    m = _companion(basis, c)
    if not basis.is_power_series:
        m = m[::-1, ::-1]  # as NumPy, for the same rounding
    return np.sort(np.linalg.eigvals(m))


# --------------------------------------------------------------------------------------------------
# Installing the mirrors
# --------------------------------------------------------------------------------------------------

SERIES_FUNCTIONS: dict[str, Callable] = {
    "der": _der, "int": _int, "add": _add, "sub": _sub, "mul": _mul, "mulx": _mulx,
    "pow": _pow, "div": _div, "val": _val, "val2d": _val2d, "val3d": _val3d, "grid2d": _grid2d,
    "grid3d": _grid3d, "vander": _vander, "vander2d": _vander2d, "vander3d": _vander3d,
    "companion": _companion, "roots": _roots, "line": _line, "fromroots": _fromroots,
}  # fmt: skip

POLYUTILS_FUNCTIONS: dict[str, Callable] = {
    "as_series": _as_series,
    "trimseq": _trimseq,
    "mapdomain": _mapdomain,
    "getdomain": _getdomain,
}


def polyvalfromroots(x: Any, r: Any, tensor: bool = True) -> Any:
    """``numpy.polynomial.polynomial.polyvalfromroots``: ``∏ (x - rᵢ)`` over ``r``'s first axis.
    NumPy's code treats ``x`` as an array only when it is an ndarray: a traced ``x`` was taken as
    a scalar, and the product ran along the points.

    >>> float(polyvalfromroots(2.0, np.array([1.0, 3.0])))
    -1.0
    """
    r = r if _dispatch.traced((r,), {}) else np.array(r, ndmin=1)
    if not _dispatch.traced((r,), {}) and r.dtype.kind in "biu":
        r = r.astype(np.float64)
    x = np.asarray(x) if isinstance(x, tuple | list) else x
    if np.ndim(x) > 0 or _dispatch.traced((x,), {}):
        if tensor:
            r = np.reshape(r, np.shape(r) + (1,) * np.ndim(x))
        elif np.ndim(x) >= np.ndim(r):
            raise ValueError("x.ndim must be < r.ndim when tensor == False")
    return np.prod(x - r, axis=0)


def install() -> None:
    """Redirect ``numpy.polynomial``'s functions on traced values (done at ``import fusegrad``;
    idempotent).

    >>> install()
    >>> import numpy as np, fusegrad as fg
    >>> fg.grad(lambda c: np.polynomial.legendre.legval(0.5, c))(np.array([1.0, 1.0]))
    array([1. , 0.5])
    """
    for name, mirror in POLYUTILS_FUNCTIONS.items():
        _dispatch.patch_attr(polyutils, name, mirror)
    _dispatch.patch_attr(np.polynomial.polynomial, "polyvalfromroots", polyvalfromroots)
    for basis in BASES.values():
        for name, generic in SERIES_FUNCTIONS.items():
            _dispatch.patch_attr(basis.module, basis.prefix + name, _for_basis(generic, basis))


def _for_basis(generic: Callable, basis: Basis) -> Callable:
    return functools.partial(generic, basis)


__all__ = ["BASES", "Basis", "install"]

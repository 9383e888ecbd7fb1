"""``scipy.linalg`` for traced values: solve_triangular, cholesky, cho_factor, cho_solve, inv,
det, solve, expm, sqrtm, lu_factor, lu_solve, toeplitz, circulant, hankel, block_diag.

``solve_triangular``, ``lu_factor``, ``expm`` and ``sqrtm`` have rules of their own
(``fusegrad.rules.scipy_linalg``); the others are written here with ``np.linalg`` operations and
those, so every one has reverse and forward derivatives of any order. Without a traced argument
each calls SciPy's own function. On traced values ``cholesky`` and ``solve`` read the same
entries as SciPy (the triangle ``lower`` names, the band ``assume_a`` names), and
``cho_factor`` returns a clean triangle (SciPy leaves the other triangle of its workspace).
``toeplitz``, ``circulant``, ``hankel`` and ``block_diag`` only place entries: SciPy's own
function, run on the entries' positions, says where each goes, and the traced values are
gathered from there (so the derivative is a scatter, and SciPy's conventions hold as they are).

Example::

    >>> import numpy as np, fusegrad as fg
    >>> import fusegrad.scipy.linalg as fsl
    >>> fg.grad(lambda a: fsl.det(a))(np.eye(2))  # det'(A) = det(A) A⁻ᵀ
    array([[1., 0.],
           [0., 1.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as _sl

from ..rules import registry
from ..rules import scipy_linalg as _rules
from . import _dispatch


def _orig(name: str) -> Any:
    return _dispatch.original(getattr(_sl, name))


def _apply(name: str, args: tuple, kwargs: dict) -> Any:
    """SciPy's function through its rule (recorded on the tape when an argument is traced)."""
    f = _orig(name)
    if not _dispatch.traced(args, kwargs):
        return f(*args, **kwargs)
    _rules.ensure_registered()
    return registry.dispatch(f, args, kwargs)


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.solve_triangular``: ``x`` with ``op(A) x = b`` for triangular ``A``.

    >>> solve_triangular(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 3.0]), lower=True)
    array([1., 2.])
    """
    kw = {"trans": trans, "lower": lower, "unit_diagonal": unit_diagonal}
    return _apply("solve_triangular", (a, b), kw)


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.cholesky``: upper ``U`` with ``Uᴴ U = A`` (lower ``L``, ``L Lᴴ = A``).

    >>> cholesky(np.array([[4.0, 2.0], [2.0, 2.0]]))
    array([[2., 1.],
           [0., 1.]])
    """
    if not _dispatch.traced((a,), {}):
        return _orig("cholesky")(a, lower=lower, check_finite=check_finite)
    if lower:
        return np.linalg.cholesky(a)
    # SciPy reads only the upper triangle; that is the lower triangle of aᴴ.
    return _ct(np.linalg.cholesky(_ct(a)))


def _ct(a: Any) -> Any:
    return np.conj(np.swapaxes(a, -1, -2))


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:  # fmt: skip
    """``scipy.linalg.cho_factor``: ``(c, lower)`` for ``cho_solve``.

    >>> c, low = cho_factor(np.array([[4.0, 2.0], [2.0, 2.0]]), lower=True)
    >>> cho_solve((c, low), np.array([6.0, 4.0]))
    array([1., 1.])
    """
    if not _dispatch.traced((a,), {}):
        return _orig("cho_factor")(a, lower=lower, check_finite=check_finite)
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple, b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.cho_solve``: ``x`` with ``A x = b`` from ``cho_factor(A)``."""
    c, lower = c_and_lower
    if not _dispatch.traced((c, b), {}):
        return _orig("cho_solve")((c, lower), b, check_finite=check_finite)
    if lower:  # A = L Lᴴ
        y = solve_triangular(c, b, lower=True)
        return solve_triangular(c, y, trans=2, lower=True)
    y = solve_triangular(c, b, trans=2, lower=False)  # A = Uᴴ U
    return solve_triangular(c, y, lower=False)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.inv``.

    >>> inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
    array([[0.5 , 0.  ],
           [0.  , 0.25]])
    """
    if not _dispatch.traced((a,), {}):
        return _orig("inv")(a, check_finite=check_finite)
    return np.linalg.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.det``.

    >>> float(det(np.array([[2.0, 1.0], [1.0, 2.0]])))
    3.0
    """
    if not _dispatch.traced((a,), {}):
        return _orig("det")(a, check_finite=check_finite)
    return np.linalg.det(a)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, check_finite: bool = True, assume_a: Any = None,
          transposed: bool = False) -> Any:  # fmt: skip
    """``scipy.linalg.solve``: ``x`` with ``A x = b`` (``Aᵀ x = b`` when ``transposed``).

    >>> solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 4.0]))
    array([1., 1.])
    """
    if not _dispatch.traced((a, b), {}):
        kw = {"lower": lower, "check_finite": check_finite, "transposed": transposed}
        if assume_a is not None:
            kw["assume_a"] = assume_a
        return _orig("solve")(a, b, **kw)
    kind = _ASSUME.get(assume_a or "gen")
    if kind is None:
        raise ValueError(f"scipy.linalg.solve: {assume_a!r} is not a valid assume_a value")
    a = _as_assumed(a, kind, lower)
    if transposed:
        a = np.swapaxes(a, -1, -2)
    if kind == "pos":  # Cholesky, so a matrix that is not positive definite raises as in SciPy
        return cho_solve((cholesky(a, lower=True), True), b)
    return np.linalg.solve(a, b)


_ASSUME = {"gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym", "her": "her",
           "hermitian": "her", "pos": "pos", "positive definite": "pos", "diagonal": "diagonal",
           "tridiagonal": "tridiagonal", "banded": "gen", "upper triangular": "upper",
           "lower triangular": "lower"}  # fmt: skip


def _as_assumed(a: Any, kind: str, lower: bool) -> Any:
    """The matrix SciPy's solver for ``assume_a`` sees: only the entries that solver reads."""
    if kind in ("sym", "her", "pos"):
        strict = np.tril(a, -1) if lower else np.triu(a, 1)
        other = np.swapaxes(strict, -1, -2)
        diagonal = a * np.eye(np.shape(a)[-1])
        if kind == "sym":
            return strict + diagonal + other
        # a Hermitian solver reads the real part of the diagonal only
        real_diagonal = np.real(diagonal) if np.iscomplexobj(a) else diagonal
        return strict + real_diagonal + np.conj(other)
    if kind == "diagonal":
        return a * np.eye(np.shape(a)[-1])
    if kind == "tridiagonal":
        n = np.shape(a)[-1]
        return a * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1)
    if kind == "upper":
        return np.triu(a)
    if kind == "lower":
        return np.tril(a)
    return a


def expm(a: Any) -> Any:
    """``scipy.linalg.expm``: the matrix exponential.

    >>> expm(np.zeros((2, 2)))
    array([[1., 0.],
           [0., 1.]])
    """
    return _apply("expm", (a,), {})


def sqrtm(a: Any, disp: Any = None, blocksize: Any = None) -> Any:
    """``scipy.linalg.sqrtm``: the principal square root ``Y``, ``Y @ Y = A``; with
    ``disp=False`` (deprecated in SciPy) ``(Y, errest)``, SciPy's ``‖Y Y - A‖²_F / ‖A‖_F``.

    >>> sqrtm(np.array([[4.0, 0.0], [0.0, 9.0]]))
    array([[2., 0.],
           [0., 3.]])
    """
    y = _apply("sqrtm", (a,), {})
    if disp is not False:
        return y
    if np.ndim(a) != 2:  # SciPy's norm(..., 'fro') raises on a stack: its errest is then inf
        return y, np.inf
    return y, np.linalg.norm(np.matmul(y, y) - a, "fro") ** 2 / np.linalg.norm(a, "fro")


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """``scipy.linalg.lu_factor``: ``(lu, piv)``, ``L - I + U`` packed, LAPACK's pivots.

    >>> lu, piv = lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> lu_solve((lu, piv), np.array([3.0, 7.0]))
    array([1., 1.])
    """
    return _apply("lu_factor", (a,), {})


def lu_solve(lu_and_piv: tuple, b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.lu_solve``: ``x`` with ``op(A) x = b`` from ``lu_factor(A)``."""
    lu, piv = lu_and_piv
    if not _dispatch.traced((lu, b), {}):
        return _orig("lu_solve")((lu, piv), b, trans=trans, check_finite=check_finite)
    p = _rules._perm(piv)
    code = _rules._trans_code(trans)
    vec = np.ndim(b) == 1  # one right-hand side (of every matrix of a stack): a column
    rhs = np.expand_dims(b, -1) if vec and np.ndim(lu) > 2 else b
    if code == 0:  # A[p] = L U: x = U⁻¹ L⁻¹ b[p]
        y = solve_triangular(lu, _rules._rows(rhs, p), lower=True, unit_diagonal=True)
        x = solve_triangular(lu, y, lower=False)
    else:  # op(A) = Uᵀ Lᵀ P (or the conjugates): x[p] = op(L)⁻¹ op(U)⁻¹ b
        y = solve_triangular(lu, rhs, trans=code, lower=False)
        z = solve_triangular(lu, y, trans=code, lower=True, unit_diagonal=True)
        x = _rules._rows(z, np.argsort(p, axis=-1))
    return x[..., 0] if rhs is not b else x


def toeplitz(c: Any, r: Any = None) -> Any:
    """``scipy.linalg.toeplitz``: first column ``c``, first row ``r`` (``conj(c)`` by default;
    ``r[0]`` is ignored).

    >>> toeplitz(np.array([1.0, 2.0, 3.0]), np.array([0.0, 4.0]))
    array([[1., 4.],
           [2., 1.],
           [3., 2.]])
    """
    if not _dispatch.traced((c, r), {}):
        return _orig("toeplitz")(c, r)
    return _rearranged("toeplitz", c, np.conj(c) if r is None else r)


def circulant(c: Any) -> Any:
    """``scipy.linalg.circulant``: the matrix whose columns are ``c`` rotated down by 0, 1, ...

    >>> circulant(np.array([1.0, 2.0, 3.0]))
    array([[1., 3., 2.],
           [2., 1., 3.],
           [3., 2., 1.]])
    """
    if not _dispatch.traced((c,), {}):
        return _orig("circulant")(c)
    return _rearranged("circulant", c)


def hankel(c: Any, r: Any = None) -> Any:
    """``scipy.linalg.hankel``: first column ``c``, last row ``r`` (zeros by default; ``r[0]``
    is ignored).

    >>> hankel(np.array([1.0, 2.0]), np.array([0.0, 3.0, 4.0]))
    array([[1., 2., 3.],
           [2., 3., 4.]])
    """
    if not _dispatch.traced((c, r), {}):
        return _orig("hankel")(c, r)
    return _rearranged("hankel", c, np.zeros(np.shape(c), c.dtype) if r is None else r)


def block_diag(*arrs: Any) -> Any:
    """``scipy.linalg.block_diag``: the arrays on the diagonal, zeros elsewhere.

    >>> block_diag(np.array([[1.0]]), np.array([2.0, 3.0]))
    array([[1., 0., 0.],
           [0., 2., 3.]])
    """
    if not _dispatch.traced(arrs, {}):
        return _orig("block_diag")(*arrs)
    return _rearranged("block_diag", *arrs, zero_fill=True)


def _rearranged(name: str, *arrays: Any, zero_fill: bool = False) -> Any:
    """SciPy's ``name``, a function that only places entries, applied to traced ``arrays``:
    SciPy's own function, called on the entries' positions, says where each entry goes (and
    so how SciPy batches, ravels and ignores entries); the entries are gathered from there, so
    the derivative is a scatter. With ``zero_fill``, SciPy's zeros read an extra 0 at position 0.
    """
    first = 1 if zero_fill else 0
    sizes = [int(np.size(a)) for a in arrays]
    starts = np.cumsum([first, *sizes])
    positions = [s + np.arange(n).reshape(np.shape(a)) for a, s, n in zip(arrays, starts, sizes)]
    where = _orig(name)(*positions)
    values = np.concatenate([np.ravel(a) for a in arrays])
    if zero_fill:
        values = np.concatenate([np.zeros(1, values.dtype), values])
    return values[where]


_NAMES = ("solve_triangular", "cholesky", "cho_factor", "cho_solve", "inv", "det", "solve",
          "expm", "sqrtm", "lu_factor", "lu_solve",
          "toeplitz", "circulant", "hankel", "block_diag")  # fmt: skip


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.linalg`` (called by ``fusegrad.scipy``)."""
    for name in _NAMES:
        _dispatch.patch_attr(module, name, globals()[name])


_dispatch.loaded(__name__)

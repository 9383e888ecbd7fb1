"""``scipy.linalg`` for traced values: solve_triangular, cholesky, cho_factor, cho_solve, inv,
det, solve, expm, sqrtm, lu_factor, lu_solve, lu, eigh, eigvalsh, svd, svdvals, qr, pinv, lstsq,
norm, eig, eigvals, polar, null_space, orth, solve_sylvester, logm, fractional_matrix_power,
expm_frechet, toeplitz, circulant, hankel, block_diag.

``solve_triangular``, ``lu_factor``, ``expm``, ``sqrtm``, ``solve_sylvester``, ``logm`` and
``fractional_matrix_power`` have rules of their own (``fusegrad.rules.scipy_linalg``); the
others are written here with ``np.linalg`` operations and those, so every one has reverse and
forward derivatives of any order. The decompositions also run SciPy on the plain values, and take
from it what is a choice or a count: vector signs (matched by unit constants), ranks, pivots,
subsets. Without a traced argument each calls SciPy's own function. On traced values
``cholesky`` and ``solve`` read the same entries as SciPy (the triangle ``lower`` names, the band
``assume_a`` names), and ``cho_factor`` returns a clean triangle (SciPy leaves the other
triangle of its workspace).
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
from ..rules.common import dtype_of, on_values
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
    y = np.linalg.det(a)
    # SciPy factors single precision in single precision and returns the double of the result
    wide = {np.dtype(np.float32): np.float64, np.dtype(np.complex64): np.complex128}
    to = wide.get(np.result_type(y))
    return y if to is None else y.astype(to)


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
    p = on_values(_rules._perm, piv)
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


def _reference(name: str, *args: Any, **kwargs: Any) -> Any:
    """SciPy's own ``name`` on the values of ``args``, as constants: its errors, and the choices
    it makes (vector signs, ranks, pivots, subsets) that the traced computation copies. Under
    ``jit`` a step of the recorded program (``on_values``), run again at each replay."""
    return on_values(_orig(name), *args, **kwargs)


def _phases(got: Any, want: Any, axis: int = -2) -> Any:
    """The unit factors ``c`` (one per column, or per row with ``axis=-1``) with ``got * conj(c)``
    closest to ``want``: a sign for real values, a phase for complex ones (1 where they are
    orthogonal). Decompositions fix their vectors only up to these; SciPy's choice is matched by
    multiplying by them as constants, so no derivative flows through the choice."""
    return on_values(_phases_of, got, want, axis)


def _phases_of(got: np.ndarray, want: np.ndarray, axis: int) -> np.ndarray:
    return _unit(np.sum(np.conj(want) * got, axis=axis))


def _unit(z: np.ndarray) -> np.ndarray:
    """``z / |z|`` (1 where ``z`` is 0)."""
    size = np.abs(z)
    return np.where(size == 0, 1, z / np.where(size == 0, 1, size))


def _columns_like(v: Any, want: np.ndarray) -> Any:
    return v * np.expand_dims(np.conj(_phases(v, want)), -2)


def _batched(out: tuple, a: Any) -> Any:
    """A tuple of outputs as SciPy's batching returns it for a stack of matrices: a list (the
    array alone for one output)."""
    if np.ndim(a) <= 2:
        return out
    return out[0] if len(out) == 1 else list(out)


def _complement(q1: Any, n0: np.ndarray) -> Any:
    """Orthonormal columns spanning the complement of ``q1``'s (traced, orthonormal), equal to the
    constant ``n0`` (orthonormal, orthogonal to ``q1`` at this point) at this point: the
    orthonormalised ``(I - Q1 Q1ᴴ) N0``. Its derivative turns the basis with the complement and no
    further (the basis is not unique: only its span is a function of the input)."""
    if np.shape(q1)[-1] == 0 or np.shape(n0)[-1] == 0:
        return n0
    projected = n0 - np.matmul(q1, np.matmul(_ct(q1), n0))
    q, r = np.linalg.qr(projected)
    # R is diagonal with ±1 at this point: undo its signs so the value is n0
    return q * np.expand_dims(on_values(_diagonal_signs, r), -2)


def _diagonal_signs(r: np.ndarray) -> np.ndarray:
    d = np.sign(np.real(np.diagonal(r, axis1=-2, axis2=-1)))
    return np.where(d == 0, 1, d)


def eigh(a: Any, b: Any = None, *, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, type: int = 1,  # noqa: A002
         check_finite: bool = True, subset_by_index: Any = None, subset_by_value: Any = None,
         driver: Any = None) -> Any:  # fmt: skip
    """``scipy.linalg.eigh``: eigenvalues (ascending) and eigenvectors of a Hermitian ``a``,
    reading the triangle ``lower`` names; with ``b``, of the generalized problem (``type`` 1:
    ``A v = w B v``, 2: ``A B v = w v``, 3: ``B A v = w v``), eigenvectors ``B``-normalised as
    SciPy's (through the Cholesky factor of ``b``). The eigenvectors' signs are SciPy's.

    >>> import fusegrad as fg
    >>> fg.grad(lambda a: eigh(a, eigvals_only=True)[-1])(np.diag([1.0, 2.0]))
    array([[0., 0.],
           [0., 1.]])
    """
    kw = {"lower": lower, "eigvals_only": eigvals_only, "type": type,
          "check_finite": check_finite, "subset_by_index": subset_by_index,
          "subset_by_value": subset_by_value, "driver": driver}  # fmt: skip
    if not _dispatch.traced((a, b), {}):
        return _orig("eigh")(a, b, **kw)
    # SciPy on the values: its errors (a b that is not positive definite, bad subsets), its
    # eigenvector signs and its subset by value
    ref = _reference("eigh", a, b, **kw)
    if b is None:
        w, v = np.linalg.eigh(a, "L" if lower else "U")
    else:
        low = cholesky(b, lower=True) if lower else _ct(cholesky(b, lower=False))
        h = _as_assumed(a, "her", lower)
        if type == 1:  # L⁻¹ A L⁻ᴴ y = w y, v = L⁻ᴴ y
            c = solve_triangular(low, _ct(solve_triangular(low, h, lower=True)), lower=True)
        else:  # Lᴴ A L y = w y; type 2: v = L⁻ᴴ y, type 3: v = L y
            c = np.matmul(np.matmul(_ct(low), h), low)
        w, y = np.linalg.eigh(c)
        v = np.matmul(low, y) if type == 3 else solve_triangular(low, y, lower=True, trans=2)
    want = ref if eigvals_only else ref[0]
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        w, v = w[..., lo : hi + 1], v[..., lo : hi + 1]
    elif subset_by_value is not None:
        k = np.shape(want)[-1]
        if k == 0:
            w, v = w[..., :0], v[..., :0]
        else:  # the eigenvalues in (lo, hi] are consecutive: SciPy's first one says where
            idx = on_values(_subset_by_value, w, want)
            w = np.take_along_axis(w, idx, axis=-1)
            v = np.take_along_axis(v, np.expand_dims(idx, -2), axis=-1)
    if eigvals_only:
        return w
    return w, _columns_like(v, ref[1])


def _subset_by_value(w: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The positions in ``w`` (ascending, all of them) of SciPy's eigenvalues ``want`` in a
    value range: consecutive, from the one nearest SciPy's first."""
    start = np.argmin(np.abs(w - want[..., :1]), axis=-1)
    return np.expand_dims(start, -1) + np.arange(np.shape(want)[-1])


def eigvalsh(a: Any, b: Any = None, *, lower: bool = True, overwrite_a: bool = False,
             overwrite_b: bool = False, type: int = 1, check_finite: bool = True,  # noqa: A002
             subset_by_index: Any = None, subset_by_value: Any = None,
             driver: Any = None) -> Any:  # fmt: skip
    """``scipy.linalg.eigvalsh``: ``eigh(..., eigvals_only=True)``.

    >>> eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    array([1., 3.])
    """
    kw = {"lower": lower, "type": type, "check_finite": check_finite,
          "subset_by_index": subset_by_index, "subset_by_value": subset_by_value,
          "driver": driver}  # fmt: skip
    if not _dispatch.traced((a, b), {}):
        return _orig("eigvalsh")(a, b, **kw)
    return eigh(a, b, eigvals_only=True, **kw)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:  # fmt: skip
    """``scipy.linalg.svd``: ``(U, s, Vh)`` with ``A = U diag(s) Vh`` (``s`` alone without
    ``compute_uv``), the singular vectors' signs as SciPy's. With ``full_matrices`` and a
    non-square ``a``, the extra columns of ``U`` (rows of ``Vh``) are SciPy's basis of the
    complement at this point, turned with it and no further (only their span has a derivative).

    >>> svd(np.array([[0.0, 2.0], [1.0, 0.0]]), compute_uv=False)
    array([2., 1.])
    """
    kw = {"full_matrices": full_matrices, "compute_uv": compute_uv,
          "check_finite": check_finite, "lapack_driver": lapack_driver}  # fmt: skip
    if not _dispatch.traced((a,), {}):
        return _orig("svd")(a, **kw)
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"scipy.linalg.svd: lapack_driver must be 'gesdd' or 'gesvd', not "
                         f"{lapack_driver!r}")  # fmt: skip
    if not compute_uv:
        return np.linalg.svd(a, compute_uv=False)
    ref_u, _, ref_vh = _reference("svd", a, **kw)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    k = np.shape(s)[-1]
    c = _phases(u, ref_u[..., :k])
    u = u * np.expand_dims(np.conj(c), -2)
    vh = vh * np.expand_dims(c, -1)
    if full_matrices:
        u = np.concatenate([u, _complement(u, ref_u[..., k:])], axis=-1)
        extra = _complement(_ct(vh), _ct(ref_vh[..., k:, :]))
        vh = np.concatenate([vh, _ct(extra)], axis=-2)
    return u, s, vh


def svdvals(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``scipy.linalg.svdvals``: the singular values, largest first.

    >>> svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
    array([2., 1.])
    """
    if not _dispatch.traced((a,), {}):
        return _orig("svdvals")(a, check_finite=check_finite)
    return np.linalg.svd(a, compute_uv=False)


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.qr``: ``(Q, R)`` (``mode`` 'full' or 'economic'), ``(R,)`` ('r'), and the
    column order ``P`` last with ``pivoting`` (SciPy's, a constant: the QR of ``a[:, P]`` is
    differentiated). ``R``'s diagonal signs are SciPy's. A wide ``a`` factors its first square
    block (which must be invertible); a tall one's extra columns of ``Q`` in 'full' mode are
    SciPy's basis of the complement, turned with it and no further. 'raw' is refused.

    >>> r, = qr(np.array([[3.0], [4.0]]), mode="r")
    >>> r
    array([[-5.],
           [ 0.]])
    """
    if not _dispatch.traced((a,), {}):
        return _orig("qr")(a, lwork=lwork, mode=mode, pivoting=pivoting,
                           check_finite=check_finite)  # fmt: skip
    if mode == "raw":
        raise NotImplementedError(
            "scipy.linalg.qr(mode='raw') on traced values: the Householder reflectors have no "
            "derivative in fusegrad; use mode='full', 'economic' or 'r'"
        )
    ref = _reference("qr", a, mode=mode, pivoting=pivoting)
    if pivoting:
        a = a[..., ref[-1]]
    m, n = np.shape(a)[-2:]
    k = min(m, n)
    if m >= n:
        q, r = np.linalg.qr(a)
    else:  # A = Q [R1, R2]: the QR of the first square block, then R2 = Qᴴ A2
        q, r1 = np.linalg.qr(a[..., :m])
        r = np.concatenate([r1, np.matmul(_ct(q), a[..., m:])], axis=-1)
    ref_r = ref[0] if mode == "r" else ref[1]
    d = on_values(_diagonal_phases, r, ref_r[..., :k, :k])
    q, r = q * np.expand_dims(np.conj(d), -2), r * np.expand_dims(d, -1)
    if mode != "economic" and m > n:  # R has M rows
        zeros = np.zeros(np.shape(r)[:-2] + (m - n, n), dtype_of(r))
        r = np.concatenate([r, zeros], axis=-2)
    if mode == "full" and m > n:
        q = np.concatenate([q, _complement(q, ref[0][..., n:])], axis=-1)
    out = (r,) if mode == "r" else (q, r)
    return _batched((*out, ref[-1]) if pivoting else out, a)


def _diagonal_phases(r: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The unit factors of ``r``'s diagonal that turn it into ``want``'s."""
    got = np.diagonal(r, axis1=-2, axis2=-1)
    return _unit(np.conj(got) * np.diagonal(want, axis1=-2, axis2=-1))


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> tuple:  # fmt: skip
    """``scipy.linalg.lu``: ``(P, L, U)`` with ``A = P L U`` (``p`` with ``A = L[p] U`` with
    ``p_indices``; ``(P L, U)`` with ``permute_l``), from ``lu_factor``.

    >>> p, l, u = lu(np.array([[1.0, 2.0], [3.0, 4.0]]), p_indices=True)
    >>> p, u
    (array([1, 0], dtype=int32), array([[3.        , 4.        ],
           [0.        , 0.66666667]]))
    """
    kw = {"permute_l": permute_l, "check_finite": check_finite, "p_indices": p_indices}
    if not _dispatch.traced((a,), {}):
        return _orig("lu")(a, **kw)
    ref = _reference("lu", a, **kw)  # its permutation (a constant) and its errors
    packed, piv = lu_factor(a)
    m, n = np.shape(packed)[-2:]
    k = min(m, n)
    dtype = dtype_of(packed)
    low = np.tril(packed[..., :, :k], -1) + np.eye(m, k, dtype=dtype)
    up = np.triu(packed[..., :k, :])
    if permute_l:  # A[p] = L U, so A = L[argsort(p)] U
        return _rules._rows(low, np.argsort(on_values(_rules._perm, piv, m), axis=-1)), up
    return ref[0], low, up


def _pinv_of_rank(a: Any, rank: Any) -> Any:
    """``np.linalg.pinv(a)`` keeping the ``rank`` largest singular values (one rank per matrix):
    the cut-off falls halfway between the last kept value and the first dropped one."""
    if min(np.shape(a)[-2:]) == 0:
        return np.linalg.pinv(a)
    return np.linalg.pinv(a, rcond=on_values(_rcond_of_rank, a, rank))


def _rcond_of_rank(a: np.ndarray, rank: Any) -> np.ndarray:
    """``np.linalg.pinv``'s ``rcond`` keeping the ``rank`` largest singular values of ``a``."""
    s = np.linalg.svd(a, compute_uv=False)
    k = np.shape(s)[-1]
    r = np.asarray(rank)[..., None]
    kept = np.take_along_axis(s, np.clip(r - 1, 0, k - 1), axis=-1)[..., 0]
    dropped = np.take_along_axis(s, np.clip(r, 0, k - 1), axis=-1)[..., 0]
    biggest = s[..., 0]
    cut = np.where(r[..., 0] >= k, 0.0, np.where(r[..., 0] == 0, 2 * biggest, (kept + dropped) / 2))
    return np.where(biggest > 0, cut / np.where(biggest > 0, biggest, 1), 0.0)


def pinv(a: Any, *, atol: Any = None, rtol: Any = None, return_rank: bool = False,
         check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.pinv``: the pseudo-inverse, singular values up to ``atol + rtol * max(s)``
    dropped (SciPy's rank, held as a constant).

    >>> pinv(np.array([[2.0, 0.0], [0.0, 0.0]]))
    array([[0.5, 0. ],
           [0. , 0. ]])
    """
    kw = {"atol": atol, "rtol": rtol, "check_finite": check_finite}
    if not _dispatch.traced((a,), {}):
        return _orig("pinv")(a, return_rank=return_rank, **kw)
    _, rank = _reference("pinv", a, return_rank=True, **kw)
    result = _pinv_of_rank(a, rank)
    return _batched((result, rank), a) if return_rank else result


def lstsq(a: Any, b: Any, cond: Any = None, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, lapack_driver: Any = None) -> tuple:  # fmt: skip
    """``scipy.linalg.lstsq``: ``(x, residues, rank, s)`` as SciPy's (``x`` through the
    pseudo-inverse of SciPy's rank; the residues when SciPy gives them; ``s`` None for 'gelsy').

    >>> x, res, rank, s = lstsq(np.array([[1.0], [1.0]]), np.array([1.0, 3.0]))
    >>> x, rank
    (array([2.]), 1)
    """
    kw = {"cond": cond, "check_finite": check_finite, "lapack_driver": lapack_driver}
    if not _dispatch.traced((a, b), {}):
        return _orig("lstsq")(a, b, **kw)
    _, ref_res, rank, ref_s = _reference("lstsq", a, b, **kw)
    x = np.matmul(_pinv_of_rank(a, rank), b)
    res: Any = ref_res
    if np.size(ref_res):
        r = b - np.matmul(a, x)
        res = np.reshape(np.sum(np.real(r * np.conj(r)), axis=0), np.shape(ref_res))
    s = None if ref_s is None else np.linalg.svd(a, compute_uv=False)
    return x, res, rank, s


def norm(a: Any, ord: Any = None, axis: Any = None, keepdims: bool = False,  # noqa: A002
         check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.norm``: ``np.linalg.norm``'s vector and matrix norms.

    >>> float(norm(np.array([3.0, 4.0])))
    5.0
    """
    if not _dispatch.traced((a,), {}):
        return _orig("norm")(a, ord, axis, keepdims, check_finite)
    return np.linalg.norm(a, ord, axis, keepdims)


def eig(a: Any, b: Any = None, left: bool = False, right: bool = True, overwrite_a: bool = False,
        overwrite_b: bool = False, check_finite: bool = True,
        homogeneous_eigvals: bool = False) -> Any:  # fmt: skip
    """``scipy.linalg.eig``: complex eigenvalues ``w``, then the unit left eigenvectors ``vl``
    (``vlᴴ A = w vlᴴ``) if ``left``, the unit right ones ``vr`` if ``right``, as SciPy orders,
    scales and rotates them; ``(w, 1)`` stacked with ``homogeneous_eigvals``. The generalized
    problem (``b``) is refused.

    >>> eig(np.diag([1.0, 2.0]), right=False)
    array([1.+0.j, 2.+0.j])
    """
    kw = {"left": left, "right": right, "check_finite": check_finite,
          "homogeneous_eigvals": homogeneous_eigvals}  # fmt: skip
    if not _dispatch.traced((a, b), {}):
        return _orig("eig")(a, b, **kw)
    if b is not None:
        raise NotImplementedError(
            "scipy.linalg.eig(a, b) on traced values: the generalized eigenproblem has no "
            "derivative in fusegrad (b=None only)"
        )
    if left or right:
        ref = _reference("eig", a, **kw)
        w, v = np.linalg.eig(a)
    else:
        w = np.linalg.eigvals(a)
    w = w if dtype_of(w).kind == "c" else w + 0j
    if homogeneous_eigvals:
        w = np.stack([w, np.ones(np.shape(w))], axis=-2)
    if not (left or right):
        return w
    out = [w]
    if left:  # the rows of V⁻¹, conjugated and scaled to unit length
        u = _ct(np.linalg.inv(v))
        u = u / np.sqrt(np.sum(np.real(u * np.conj(u)), axis=-2, keepdims=True))
        out.append(_columns_like(u, ref[1]))
    if right:
        out.append(_columns_like(v, ref[-1]))
    return tuple(out)


def eigvals(a: Any, b: Any = None, overwrite_a: bool = False, check_finite: bool = True,
            homogeneous_eigvals: bool = False) -> Any:  # fmt: skip
    """``scipy.linalg.eigvals``: ``eig(a, right=False)``.

    >>> eigvals(np.array([[0.0, -1.0], [1.0, 0.0]]))
    array([0.+1.j, 0.-1.j])
    """
    kw = {"check_finite": check_finite, "homogeneous_eigvals": homogeneous_eigvals}
    if not _dispatch.traced((a, b), {}):
        return _orig("eigvals")(a, b, **kw)
    return eig(a, b, left=False, right=False, **kw)


def polar(a: Any, side: str = "right") -> tuple:
    """``scipy.linalg.polar``: ``(U, P)`` with ``A = U P`` (``side='right'``) or ``A = P U``
    ('left'), ``U`` with orthonormal columns, ``P`` Hermitian positive semi-definite; through the
    SVD (so its derivative needs distinct singular values).

    >>> u, p = polar(np.array([[2.0, 0.0], [0.0, -3.0]]))
    >>> u, p
    (array([[ 1.,  0.],
           [ 0., -1.]]), array([[2., 0.],
           [0., 3.]]))
    """
    if not _dispatch.traced((a,), {}):
        return _orig("polar")(a, side)
    if side not in ("right", "left"):
        raise ValueError("`side` must be either 'right' or 'left'")
    w, s, vh = np.linalg.svd(a, full_matrices=False)
    u = np.matmul(w, vh)
    if side == "right":
        return _batched((u, np.matmul(_ct(vh) * np.expand_dims(s, -2), vh)), a)
    return _batched((u, np.matmul(w * np.expand_dims(s, -2), _ct(w))), a)


def null_space(A: Any, rcond: Any = None, *, overwrite_a: bool = False,  # noqa: N803
               check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:  # fmt: skip
    """``scipy.linalg.null_space``: orthonormal columns spanning ``A``'s null space (SciPy's rank
    and basis at this point, turned with the null space and no further: only the span has a
    derivative).

    >>> null_space(np.array([[1.0, 0.0]]))
    array([[0.],
           [1.]])
    """
    kw = {"check_finite": check_finite, "lapack_driver": lapack_driver}
    if not _dispatch.traced((A,), {}):
        return _orig("null_space")(A, rcond, **kw)
    ref = _reference("null_space", A, rcond, **kw)
    num = np.shape(A)[-1] - np.shape(ref)[-1]  # the rank
    vh = np.linalg.svd(A, full_matrices=False)[2]
    return _complement(_ct(vh[..., :num, :]), ref)


def orth(A: Any, rcond: Any = None) -> Any:  # noqa: N803
    """``scipy.linalg.orth``: orthonormal columns spanning ``A``'s range (SciPy's rank and signs).

    >>> orth(np.array([[0.0, 2.0], [0.0, 0.0]]))
    array([[1.],
           [0.]])
    """
    if not _dispatch.traced((A,), {}):
        return _orig("orth")(A, rcond)
    ref = _reference("orth", A, rcond)
    u = np.linalg.svd(A, full_matrices=False)[0][..., : np.shape(ref)[-1]]
    return _columns_like(u, ref)


def solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    """``scipy.linalg.solve_sylvester``: ``X`` with ``A X + X B = Q``.

    >>> solve_sylvester(np.eye(2), np.eye(2), np.eye(2))
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    return _apply("solve_sylvester", (a, b, q), {})


def logm(A: Any, disp: Any = True) -> Any:  # noqa: N803
    """``scipy.linalg.logm``: the principal matrix logarithm (``(F, errest)`` with ``disp=False``,
    deprecated in SciPy); its derivative is a block of the logarithm of ``[[A, E], [0, A]]``.

    >>> logm(np.diag([1.0, np.e]))
    array([[0., 0.],
           [0., 1.]])
    """
    if not _dispatch.traced((A,), {}):
        return _orig("logm")(A) if disp is not False else _orig("logm")(A, disp=False)
    y = _apply("logm", (A,), {})
    if disp is not False:
        return y
    return y, np.linalg.norm(expm(y) - A, 1) / np.linalg.norm(A, 1)


def fractional_matrix_power(A: Any, t: Any) -> Any:  # noqa: N803
    """``scipy.linalg.fractional_matrix_power``: ``A`` to the power ``t`` (a constant ``t``).

    >>> fractional_matrix_power(np.diag([4.0, 9.0]), 0.5)
    array([[2., 0.],
           [0., 3.]])
    """
    if _dispatch.traced((t,), {}):
        raise NotImplementedError(
            "scipy.linalg.fractional_matrix_power: the power t has no derivative in fusegrad "
            "(only A is differentiated); pass a constant t or write expm(t * logm(A))"
        )
    return _apply("fractional_matrix_power", (A, t), {})


def expm_frechet(A: Any, E: Any, method: Any = None, compute_expm: bool = True,  # noqa: N803
                 check_finite: bool = True) -> Any:  # fmt: skip
    """``scipy.linalg.expm_frechet``: ``(expm(A), L(A, E))``, the Fréchet derivative of ``expm``
    at ``A`` along ``E`` (``L`` alone without ``compute_expm``), as blocks of one ``expm``.

    >>> expm_frechet(np.zeros((1, 1)), np.ones((1, 1)))
    (array([[1.]]), array([[1.]]))
    """
    if not _dispatch.traced((A, E), {}):
        return _orig("expm_frechet")(A, E, method=method, compute_expm=compute_expm,
                                     check_finite=check_finite)  # fmt: skip
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"Unknown implementation {method}")
    n = np.shape(A)[-1]
    zeros = np.zeros(np.shape(A), np.result_type(dtype_of(A), dtype_of(E)))
    big = np.concatenate(
        [np.concatenate([A, E], axis=-1), np.concatenate([zeros, A], axis=-1)], axis=-2
    )
    full = expm(big)
    if not compute_expm:
        return full[..., :n, n:]
    return _batched((full[..., :n, :n], full[..., :n, n:]), np.broadcast_to(zeros, np.shape(A)))


_NAMES = ("solve_triangular", "cholesky", "cho_factor", "cho_solve", "inv", "det", "solve",
          "expm", "sqrtm", "lu_factor", "lu_solve", "eigh", "eigvalsh", "svd", "svdvals", "qr",
          "lu", "pinv", "lstsq", "norm", "eig", "eigvals", "polar", "null_space", "orth",
          "solve_sylvester", "logm", "fractional_matrix_power", "expm_frechet",
          "toeplitz", "circulant", "hankel", "block_diag")  # fmt: skip


def _patch(module: Any) -> None:
    """Install the wrappers in ``scipy.linalg`` (called by ``fusegrad.scipy``)."""
    for name in _NAMES:
        _dispatch.patch_attr(module, name, globals()[name])


_dispatch.loaded(__name__)

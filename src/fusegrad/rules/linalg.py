"""Rules for linear algebra: matmul, dot, einsum, tensordot, solve, inv, det, eigh, ...

The products are ``bilinear`` (``ẏ = f(ȧ, b) + f(a, ḃ)``), ``trace`` is ``linear``; the forward
rules of ``einsum`` and of the solvers and decompositions follow their reverse rules.

Complex inputs follow JAX's convention: each pullback is the transpose of the forward rule for
the pairing ``Re(Σ u·v)`` (no conjugate), so holomorphic functions (matmul, solve, inv, det, ...)
use plain transposes; ``vdot`` conjugates its first argument, and the Hermitian-input functions
(``cholesky``, ``eigh``) use ``Aᴴ``, ``sym(G) = (G + Gᴴ)/2``. Batched (stacked) matrices broadcast
like NumPy's, and every cotangent is summed back to its argument's shape with ``unbroadcast_to``.
``Aᵀ`` below means ``swapaxes(A, -1, -2)`` (the last two axes).

| NumPy function | pullback |
|---|---|
| ``np.matmul(A, B)`` / ``@`` | ``dA = dY @ Bᵀ``, ``dB = Aᵀ @ dY`` (1-d operands promoted) |
| ``np.dot``, ``np.inner``, ``np.tensordot`` | ``tensordot`` of ``dY`` with the other operand |
| ``np.vdot(a, b)`` | ``da = dy * b``, ``db = dy * a`` (flattened, reshaped back) |
| ``np.outer(a, b)`` | ``da = dY @ b``, ``db = a @ dY`` |
| ``np.einsum(s, *ops)`` | ``dop_i = einsum(<others>, <out> -> s_i)``; ``ii`` via ``eye`` |
| ``np.trace(A, k)`` | ``dA = dy[..., None, None] * eye(n, m, k)`` |
| ``np.linalg.solve(A, B)`` | ``dB = solve(Aᵀ, dX)``, ``dA = -dB @ Xᵀ`` |
| ``np.linalg.inv(A)`` | ``dA = -Yᵀ @ dY @ Yᵀ`` |
| ``np.linalg.det(A)`` | ``dA = dy * det(A) * inv(A)ᵀ`` |
| ``np.linalg.slogdet(A)`` | ``dA = dlogdet * inv(A)ᵀ`` (a real sign is piecewise constant) |
| ``np.linalg.cholesky(A)`` | ``dA = sym(L⁻ᵀ Φ(Lᵀ dL) L̄⁻¹)``, Φ = lower triangle, diagonal halved |
| ``np.linalg.eigh(A)`` | ``dA = sym(V̄ (diag(dw) + F ∘ (Vᵀ dV)) Vᵀ)``, ``F_ij = 1/(w_j - w_i)`` |

(``L̄``, ``V̄``: complex conjugates.) Symmetric-input functions (``cholesky``, ``eigh``) return the
symmetric (Hermitian) cotangent ``(G + Gᴴ)/2``
(as JAX and HIPS autograd do): it is the gradient along symmetric perturbations, not the gradient
of NumPy's read of one triangle. ``eigh`` assumes distinct eigenvalues (ties give inf/nan).

Tuple outputs (``slogdet``, ``eigh``) get tuple cotangents whose entries may be ``ZeroTangent()``;
a zero entry costs nothing. Pullbacks are written with ``np.*`` calls only, so higher-order AD can
trace them.
"""

from __future__ import annotations

import math
import string
import sys
from typing import Any

import numpy as np

from ..lazy import buffer_cache, materialize_many, small
from ..lazy.plan import value
from ..tangents import NoTangent, Thunk, ZeroTangent, unthunk
from .common import (
    add_tangents,
    bilinear,
    dtype_of,
    eager_frule,
    is_zero,
    linear,
    no_tangents,
    params,
    project,
    unbroadcast_to,
)
from .common import conj as _conj
from .common import is_zero as _zero
from .common import mH as _mH
from .common import mT as _mT
from .common import sym as _sym
from .lazy_values import as_cotangent, as_lazy
from .registry import register_frule, register_lazy_case, register_rrule


def _entry(ct: Any, i: int, name: str) -> Any:
    """Entry ``i`` (field ``name``) of a tuple-output cotangent; ``ZeroTangent()`` if absent."""
    if is_zero(ct):
        return ZeroTangent()
    if isinstance(ct, tuple | list):
        return unthunk(ct[i])
    return unthunk(getattr(ct, name, ZeroTangent()))


# --------------------------------------------------------------------------------------------------
# Products
# --------------------------------------------------------------------------------------------------


def _matmul_operands(dy: Any, a: Any, b: Any) -> tuple:
    """``dy``, ``a`` and ``b`` with 1-d operands promoted to matrices (as matmul does)."""
    ashape, bshape = np.shape(a), np.shape(b)
    a2 = np.reshape(a, (1,) + ashape) if len(ashape) == 1 else a
    b2 = np.reshape(b, bshape + (1,)) if len(bshape) == 1 else b
    if len(ashape) == 1:
        dy = np.expand_dims(dy, -2 if len(bshape) > 1 else -1)
    if len(bshape) == 1:
        dy = np.expand_dims(dy, -1)
    return dy, a2, b2


def _matrices(dy: Any, a: Any, b: Any) -> bool:
    """Whether ``dy``, ``a`` and ``b`` are NumPy matrices of one dtype (the common case, whose
    transposed products need no promotion, unbroadcasting or projection)."""
    return (
        type(dy) is np.ndarray
        and type(a) is np.ndarray
        and type(b) is np.ndarray
        and a.ndim == 2 == b.ndim
        and dy.dtype == a.dtype == b.dtype
    )


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two NumPy matrices of one dtype, into a buffer from ``buffer_cache`` (a large
    one: the next gradient reuses its memory instead of faulting fresh pages in)."""
    m, n = a.shape[0], b.shape[1]
    if m * n * a.itemsize < buffer_cache.MIN_BYTES:  # (first: most products are small)
        return np.matmul(a, b)
    return np.matmul(a, b, out=buffer_cache.empty((m, n), a.dtype))


def _matmul_ta(dy, a, b):
    """dA = dY @ Bᵀ (batch dims unbroadcast)."""
    if _matrices(dy, a, b):
        return _product(dy, b.T)
    dy2, a2, b2 = _matmul_operands(dy, a, b)
    return project(unbroadcast_to(np.matmul(dy2, _mT(b2)), np.shape(a2)), a)


def _matmul_tb(dy, a, b):
    """dB = Aᵀ @ dY (batch dims unbroadcast)."""
    if _matrices(dy, a, b):
        return _product(a.T, dy)
    dy2, a2, b2 = _matmul_operands(dy, a, b)
    return project(unbroadcast_to(np.matmul(_mT(a2), dy2), np.shape(b2)), b)


def _normalize_tensordot_axes(axes: Any, nda: int, ndb: int) -> tuple[list[int], list[int]]:
    if np.ndim(axes) == 0:
        n = int(axes)
        return list(range(nda - n, nda)), list(range(n))
    ax_a, ax_b = axes
    ax_a = [int(ax_a)] if np.ndim(ax_a) == 0 else [int(i) for i in ax_a]
    ax_b = [int(ax_b)] if np.ndim(ax_b) == 0 else [int(i) for i in ax_b]
    return [i % nda for i in ax_a], [i % ndb for i in ax_b]


def _free(nd: int, contracted: list[int]) -> list[int]:
    return [i for i in range(nd) if i not in contracted]


def _contraction_ta(dy: Any, a: Any, b: Any, ax_a: list[int], ax_b: list[int]) -> Any:
    """The cotangent of ``a`` in ``tensordot(a, b, (ax_a, ax_b))``: dy's free-b axes contracted
    with b's free axes, giving (free_a..., b's contracted axes in increasing order), mapped back
    to a's axis order."""
    nda = np.ndim(a)
    free_a, free_b = _free(nda, ax_a), _free(np.ndim(b), ax_b)
    ga = np.tensordot(dy, b, axes=(list(range(len(free_a), np.ndim(dy))), free_b))
    order_a = free_a + [ax_a[ax_b.index(j)] for j in sorted(ax_b)]
    return project(np.transpose(ga, np.argsort(order_a)) if nda else ga, a)


def _contraction_tb(dy: Any, a: Any, b: Any, ax_a: list[int], ax_b: list[int]) -> Any:
    """The cotangent of ``b`` in ``tensordot(a, b, (ax_a, ax_b))``, likewise."""
    ndb = np.ndim(b)
    free_a, free_b = _free(np.ndim(a), ax_a), _free(ndb, ax_b)
    gb = np.tensordot(a, dy, axes=(free_a, list(range(len(free_a)))))
    order_b = [ax_b[ax_a.index(i)] for i in sorted(ax_a)] + free_b
    return project(np.transpose(gb, np.argsort(order_b)) if ndb else gb, b)


def _tensordot_axes(a: Any, b: Any, args: tuple, kwargs: dict) -> tuple[list[int], list[int]]:
    axes = params(args, kwargs, axes=2)["axes"]
    return _normalize_tensordot_axes(axes, np.ndim(a), np.ndim(b))


def _tensordot_ta(dy, a, b, *args, **kwargs):
    """dA = tensordot(dY, B, free axes of B), transposed to A's order."""
    return _contraction_ta(dy, a, b, *_tensordot_axes(a, b, args, kwargs))


def _tensordot_tb(dy, a, b, *args, **kwargs):
    """dB = tensordot(A, dY, free axes of A), transposed to B's order."""
    return _contraction_tb(dy, a, b, *_tensordot_axes(a, b, args, kwargs))


def _product_axes(a: Any, b: Any, fn: Any) -> tuple[list[int], list[int]] | None:
    """The contraction ``np.dot`` / ``np.inner`` make, or None when an operand is 0-d (a
    product): dot contracts a's last axis with b's second-to-last (or only) axis, inner the last
    axes of both."""
    nda, ndb = np.ndim(a), np.ndim(b)
    if nda == 0 or ndb == 0:
        return None
    return [nda - 1], [max(ndb - 2, 0) if fn is np.dot else ndb - 1]


def _product_t(fn: Any, side: int):
    def transpose(dy, a, b, *args, **kwargs):
        axes = _product_axes(a, b, fn)
        if axes is None:  # a 0-d operand: a * b
            x, other = (a, b) if side == 0 else (b, a)
            return project(unbroadcast_to(dy * other, np.shape(x)), x)
        return (_contraction_ta if side == 0 else _contraction_tb)(dy, a, b, *axes)

    transpose.__doc__ = f"the {'first' if side == 0 else 'second'} operand's contraction with dy"
    return transpose


def _vdot_ta(dy, a, b):
    """da = conj(dy * ravel(b)), reshaped back (``conj`` only for complex values)."""
    return project(np.reshape(_conj(dy * np.ravel(b)), np.shape(a)), a)


def _vdot_tb(dy, a, b):
    """db = dy * conj(ravel(a)), reshaped back."""
    return project(np.reshape(dy * _conj(np.ravel(a)), np.shape(b)), b)


def _outer_ta(dy, a, b, *args, **kwargs):
    """da = dY @ ravel(b), reshaped back."""
    return project(np.reshape(np.matmul(dy, np.ravel(b)), np.shape(a)), a)


def _outer_tb(dy, a, b, *args, **kwargs):
    """db = ravel(a) @ dY, reshaped back."""
    return project(np.reshape(np.matmul(np.ravel(a), dy), np.shape(b)), b)


def _fused_outer_ta(dy: Any, a: Any, b: Any) -> Any:
    """``dY @ Bᵀ`` as a lazy broadcast product when it is an outer product (a contraction of
    length 1: ``dY`` of one column, as the cotangent of ``h @ w`` with a one-column ``w``) too
    large for the small-array path; else None. BLAS writes such a product out at memory speed
    for the next kernel to read back (1.7 ms for 4096×256); fused, each element is one multiply
    inside the kernel that consumes it (the ``tanh``'s cotangent of an MLP's hidden layer)."""
    if b.shape[1] != 1 or small.fits(a.shape):
        return None
    return as_cotangent(as_lazy(dy) * as_lazy(b).reshape(1, b.shape[0]))


def _fused_outer_tb(dy: Any, a: Any, b: Any) -> Any:
    """``Aᵀ @ dY`` as a lazy broadcast product when it is an outer product (``A`` of one row),
    or as a lazy column sum ``sum(A * dY, axis=0)`` when ``dY`` is one column and ``A`` too
    large for the small-array path (the cotangent of ``w`` in ``h @ w``); else None (see
    ``_fused_outer_ta``). As a BLAS GEMV the sum reads ``A`` back from memory (0.4-0.9 ms for
    4096×256 inside an MLP's gradient, 0.1 ms with ``A`` in cache); lazy, the backward pass
    computes it in the kernel that reads ``A`` anyway (``ad.core._evaluate_with_sums``)."""
    if a.shape[0] == 1 and not small.fits(b.shape):
        return as_cotangent(as_lazy(a).reshape(a.shape[1], 1) * as_lazy(dy))
    if dy.shape[1] == 1 and a.dtype.kind in "fc" and not small.fits(a.shape):
        column = np.sum(as_lazy(a) * as_lazy(dy), axis=0, keepdims=True)
        return as_cotangent(column.reshape(a.shape[1], 1))
    return None


def _transpose_cotangent(transpose: Any, fused: Any, dy: Any, a: Any, b: Any) -> Any:
    """One operand's cotangent of ``a @ b``: fused into its consumer when it is a large outer
    product of NumPy matrices (``fused``), else a ``Thunk`` of ``transpose`` (the cotangent of a
    constant operand, the data ``X`` of ``X @ w``, is then never computed)."""
    if _matrices(dy, a, b):
        lazy = fused(dy, a, b)
        if lazy is not None:
            return lazy
    return Thunk(lambda: transpose(dy, a, b))


def _matmul_pullback(a: Any, b: Any, extra: int) -> Any:
    """The pullback of ``np.matmul(a, b, <extra more arguments>)`` (see ``_matmul``)."""

    def pullback(dy):
        return (
            _transpose_cotangent(_matmul_ta, _fused_outer_ta, dy, a, b),
            _transpose_cotangent(_matmul_tb, _fused_outer_tb, dy, a, b),
            *no_tangents(extra),
        )

    return pullback


@register_rrule(np.matmul)
def _matmul(a, b, *args, **kwargs):
    """np.matmul: ā = ȳ @ Bᵀ, b̄ = Aᵀ @ ȳ (``_matmul_ta``/``_matmul_tb``; large outer products
    lazy, see ``_fused_outer_ta``)."""
    pullback = _matmul_pullback(a, b, len(args))
    if not args and not kwargs and _matrices(a, a, b):
        return _product(a, b), pullback
    return np.matmul(a, b, *args, **kwargs), pullback


_BLAS_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # (float16: NumPy accumulates wider)


@register_lazy_case(np.matmul)
def _matmul_lazy_column(a, b, *args, **kwargs):
    """``a @ b`` of a lazy float32 or float64 matrix ``a`` (an expression not yet evaluated,
    ``tanh(X @ W + c)``) and a NumPy column or vector ``b`` of its dtype: the row sums
    ``sum(a * bᵀ, axis=1)``, computed in the pass that evaluates ``a`` (which the pullback
    reads, so it is kept); None for any other operands (``_matmul`` then runs on evaluated
    ones). As a BLAS GEMV the product reads ``a`` back from memory once it is written (0.4 ms
    for 4096×256 inside an MLP's gradient).

    >>> from fusegrad.lazy import asarray, small
    >>> with small.fusing():  # (lazy at any size, as inside traces of large values)
    ...     y, _ = _matmul_lazy_column(np.exp(asarray(np.zeros((2, 3)))), np.arange(3.0))
    >>> y.tolist()
    [3.0, 3.0]
    """
    if args or kwargs or value(a) is not None:
        return None  # (an array, a leaf, a computed value: BLAS reads it once, as a kernel would)
    if type(b) is not np.ndarray or a.ndim != 2 or b.shape[0] != a.shape[1]:
        return None
    if a.dtype != b.dtype or a.dtype not in _BLAS_FLOATS or b.shape[1:] not in ((), (1,)):
        return None
    rows = np.sum(a * as_lazy(b).reshape(1, b.shape[0]), axis=1, keepdims=b.ndim == 2)
    computed, y = materialize_many([a, rows])
    return y, _matmul_pullback(computed, b, 0)


def _convolve_mode(args: tuple, kwargs: dict) -> str:
    mode = args[0] if args else kwargs.get("mode", "full")
    return {0: "valid", 1: "same", 2: "full"}.get(mode, mode)  # NumPy takes 0, 1, 2 too


def _full_cotangent(dy: Any, n: int, m: int, mode: str) -> Any:
    """``dy`` of ``np.convolve(a, v, mode)`` (``len(a) = n``, ``len(v) = m``) as the cotangent
    of the full convolution: zeros outside the window ``mode`` keeps."""
    if mode == "full":
        return dy
    lo = min(n, m)
    start = (lo - 1) // 2 if mode == "same" else lo - 1
    after = n + m - 1 - start - np.shape(dy)[0]
    zeros = np.zeros(start, dtype_of(dy)), np.zeros(after, dtype_of(dy))
    return np.concatenate([zeros[0], dy, zeros[1]])


def _convolve_ta(dy, a, v, *args, **kwargs):
    """da = convolve(dy_full, v[::-1], 'valid'): each a[i] meets v[j] at output i + j."""
    a1, v1 = np.reshape(a, (-1,)), np.reshape(v, (-1,))  # (a number is a 1-vector to NumPy)
    g = _full_cotangent(dy, np.shape(a1)[0], np.shape(v1)[0], _convolve_mode(args, kwargs))
    return project(np.reshape(np.convolve(g, v1[::-1], "valid"), np.shape(a)), a)


def _convolve_tb(dy, a, v, *args, **kwargs):
    """dv = convolve(dy_full, a[::-1], 'valid')."""
    a1, v1 = np.reshape(a, (-1,)), np.reshape(v, (-1,))
    g = _full_cotangent(dy, np.shape(a1)[0], np.shape(v1)[0], _convolve_mode(args, kwargs))
    return project(np.reshape(np.convolve(g, a1[::-1], "valid"), np.shape(v)), v)


# fmt: off
bilinear(np.convolve,  _convolve_ta, _convolve_tb)
bilinear(np.matmul)
bilinear(np.vdot,      _vdot_ta,   _vdot_tb)
bilinear(np.outer,     _outer_ta,  _outer_tb)
bilinear(np.tensordot, _tensordot_ta, _tensordot_tb)
bilinear(np.dot,       _product_t(np.dot, 0),   _product_t(np.dot, 1))
bilinear(np.inner,     _product_t(np.inner, 0), _product_t(np.inner, 1))
# fmt: on


# --------------------------------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------------------------------


def _parse_einsum(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Explicit subscripts (one string per operand, and the output) with every ``...`` replaced
    by letters not used elsewhere (right-aligned, as NumPy broadcasts them)."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
        explicit = True
    else:
        lhs, out, explicit = s, "", False
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} subscripts for {len(shapes)} operands")
    used = set(s) - set(".,->")
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for sub, shp in zip(ins, shapes, strict=True):
        if "..." in sub:
            n_ell = max(n_ell, len(shp) - (len(sub) - 3))
    ell = "".join(free[:n_ell])
    new_ins = []
    for sub, shp in zip(ins, shapes, strict=True):
        if "..." in sub:
            k = len(shp) - (len(sub) - 3)
            sub = sub.replace("...", ell[n_ell - k :] if k else "")
        new_ins.append(sub)
    if explicit:
        out = out.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for sub in ins:
            for c in sub.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    return new_ins, out


def _einsum_operand_cotangent(
    i: int, ins: list[str], out: str, ops: list[Any], dy: Any, sizes: dict[str, int], kwargs: dict
) -> Any:
    """Cotangent of operand ``i`` of ``einsum(ins -> out)``."""
    sub = ins[i]
    shape = np.shape(ops[i])
    dtype = np.result_type(dy)
    unique = "".join(dict.fromkeys(sub))
    other_subs = [s for j, s in enumerate(ins) if j != i]
    other_ops = [o for j, o in enumerate(ops) if j != i]
    available = set(out).union(*[set(s) for s in other_subs]) if other_subs else set(out)
    # Letters summed out in operand i alone: broadcast back with a ones vector.
    extra_subs, extra_ops = [], []
    for c in unique:
        if c not in available:
            extra_subs.append(c)
            extra_ops.append(np.ones(sizes[c], dtype=dtype))
    # Repeated letters (diagonals/traces): compute over the unique letters, then embed with eye.
    target = unique
    lhs = ",".join(other_subs + [out] + extra_subs)
    kwargs = kwargs or _contraction_path(lhs + target, sizes)
    g = _einsum_on_path(f"{lhs}->{target}", *other_ops, dy, *extra_ops, **kwargs)
    if len(unique) != len(sub):
        used = set("".join(ins) + out)
        fresh = iter(c for c in string.ascii_letters if c not in used)
        seen: set[str] = set()
        full, eye_subs, eye_ops = "", [], []
        for c in sub:
            if c in seen:
                f = next(fresh)
                full += f
                eye_subs.append(c + f)
                eye_ops.append(np.eye(sizes[c], dtype=dtype))
            else:
                seen.add(c)
                full += c
        g = np.einsum(",".join([unique] + eye_subs) + "->" + full, g, *eye_ops)
    # Size-1 axes of operand i that broadcast against a longer axis: sum them back.
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    # ... and the reverse: a label of size 1 in another operand, broadcast against this one's
    if tuple(g.shape) != tuple(shape) and len(g.shape) == len(shape):
        g = g * np.ones(shape, dtype)
    return project(g, ops[i])


# From this many multiply-adds in einsum's naive loop over every label, a pullback's or tangent's
# einsum finds a contraction path (BLAS): the search costs ~10 us, the naive loop ~1 ns a
# multiply-add. A convnet layer's ``bohw,oik->bihwk`` (173k): 333 -> 26 us.
EINSUM_PATH_FROM = 1 << 15


def _label_sizes(ins: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each einsum label's size (a size-1 axis broadcasting takes the other's, 0 too)."""
    sizes: dict[str, int] = {}
    for sub, shp in zip(ins, shapes, strict=True):
        for c, n in zip(sub, shp, strict=True):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    return sizes


def _contraction_path(letters: str, sizes: dict[str, int]) -> dict:
    """``{"optimize": True}`` for an einsum over ``letters`` (of ``sizes``) large enough that a
    contraction path pays for its search, else no keywords (NumPy's own loop)."""
    cost = math.prod(sizes.get(c, 1) for c in set(letters) if c.isalpha())
    return {"optimize": True} if cost >= EINSUM_PATH_FROM else {}


# (subscripts, shapes, optimize) -> the contraction path np.einsum_path found for them
_PATHS: dict[tuple, list] = {}


def _einsum_on_path(subscripts: str, *operands: Any, optimize: Any = False, **kwargs: Any) -> Any:
    """``np.einsum`` with ``optimize=True`` (or a strategy's name) replaced by the path NumPy's
    search finds for these subscripts and shapes, searched once: a replay runs the pullbacks
    again, and the search cost ~30 us an einsum (a Gaussian mixture's 15 a gradient).

    >>> _einsum_on_path("ij,jk->ik", np.ones((2, 3)), np.ones((3, 2)), optimize=True).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if optimize is True or isinstance(optimize, str):
        key = (subscripts, tuple(np.shape(o) for o in operands), optimize)
        path = _PATHS.get(key)
        if path is None:
            # the search reads shapes only: stand-ins of no memory (an operand may be traced)
            stand_ins = [np.broadcast_to(np.zeros(()), np.shape(o)) for o in operands]
            how = "greedy" if optimize is True else optimize
            path = np.einsum_path(subscripts, *stand_ins, optimize=how)[0]
            if len(_PATHS) >= 4096:
                _PATHS.clear()
            _PATHS[key] = path
        optimize = path
    return np.einsum(subscripts, *operands, optimize=optimize, **kwargs)


@register_rrule(np.einsum)
def _einsum(subscripts, *operands, **kwargs):
    """np.einsum (string subscripts, explicit or implicit output, ellipsis): dop_i =
    einsum(<other operands' subscripts>, <out> -> s_i). Letters summed out in op_i alone get a
    ones operand; repeated letters (``ii``) are embedded on the diagonal with ``eye``. The
    interleaved (operand, sublist) form reaches it as its string (``composites._einsum``)."""
    if not isinstance(subscripts, str):
        return None
    ops = list(operands)
    shapes = [tuple(np.shape(o)) for o in ops]
    ins, out = _parse_einsum(subscripts, shapes)
    sizes = _label_sizes(ins, shapes)
    y = _einsum_on_path(subscripts, *ops, **kwargs)
    pass_kwargs = {k: v for k, v in kwargs.items() if k == "optimize"}

    def pullback(dy):
        grads = [
            _einsum_operand_cotangent(i, ins, out, ops, dy, sizes, pass_kwargs)
            for i in range(len(ops))
        ]
        return (NoTangent(), *grads)

    return y, pullback


@eager_frule(np.einsum)
def _einsum_jvp(tangents, subscripts, *operands, **kwargs):
    """np.einsum (string subscripts): ẏ = Σᵢ einsum(s, ..., ȯpᵢ, ...)."""
    if not isinstance(subscripts, str):
        return None
    ops = list(operands)
    y = _einsum_on_path(subscripts, *ops, **kwargs)
    dot: Any = ZeroTangent()
    path = {k: v for k, v in kwargs.items() if k == "optimize"}
    if not path:
        shapes = [tuple(np.shape(o)) for o in ops]
        ins, out = _parse_einsum(subscripts, shapes)
        path = _contraction_path("".join(ins) + out, _label_sizes(ins, shapes))
    rest = {k: v for k, v in kwargs.items() if k != "optimize"}
    for i, t in enumerate(tangents[1:]):
        if _zero(t):
            continue
        swapped = ops[:i] + [unthunk(t)] + ops[i + 1 :]
        dot = add_tangents(dot, _einsum_on_path(subscripts, *swapped, **rest, **path))
    return y, dot


# --------------------------------------------------------------------------------------------------
# trace
# --------------------------------------------------------------------------------------------------


@register_rrule(np.trace)
def _trace(a, *args, **kwargs):
    """np.trace: dA = moveaxis(dy[..., None, None] * eye(n, m, k), (-2, -1), (axis1, axis2))."""
    p = params(args, kwargs, offset=0, axis1=0, axis2=1, dtype=None, out=None)
    shape = np.shape(a)
    nd = len(shape)
    ax1, ax2 = p["axis1"] % nd, p["axis2"] % nd

    def pullback(dy):
        dt = np.result_type(dy, getattr(a, "dtype", np.float64))
        eye = np.eye(shape[ax1], shape[ax2], k=p["offset"], dtype=dt)
        g = np.reshape(dy, np.shape(dy) + (1, 1)) * eye
        g = np.moveaxis(g, (-2, -1), (ax1, ax2))
        return (project(g, a), *no_tangents(len(args)))

    return np.trace(a, *args, **kwargs), pullback


linear(np.trace)


# --------------------------------------------------------------------------------------------------
# Solvers and decompositions
# --------------------------------------------------------------------------------------------------


@register_rrule(np.linalg.solve)
def _solve(a, b):
    """np.linalg.solve: dB = solve(Aᵀ, dX), dA = -dB @ Xᵀ (vector b promoted to a column)."""
    x = np.linalg.solve(a, b)
    bshape = np.shape(b)
    vec = len(bshape) == 1

    def pullback(dy):
        x2 = np.expand_dims(x, -1) if vec else x
        dy2 = np.expand_dims(dy, -1) if vec else dy
        gb = np.linalg.solve(_mT(a), dy2)
        ga = -np.matmul(gb, _mT(x2))
        db = unbroadcast_to(gb, bshape + (1,) if vec else bshape)
        return project(unbroadcast_to(ga, np.shape(a)), a), project(db, b)

    return x, pullback


@register_rrule(np.linalg.inv)
def _inv(a):
    """np.linalg.inv: dA = -Yᵀ @ dY @ Yᵀ."""
    y = np.linalg.inv(a)

    def pullback(dy):
        yt = _mT(y)
        return (project(-np.matmul(np.matmul(yt, dy), yt), a),)

    return y, pullback


def _cofactors(a: Any, y: Any) -> Any:
    """The cofactor matrix of ``a`` (``det``'s derivative), whose determinant is ``y``:
    ``det(A) inv(A)ᵀ``, or where a matrix is singular (``y = 0``, or ``inv`` fails) from its SVD
    ``A = U S Vᴴ``: ``det(U) det(Vᴴ) conj(U) diag(∏_{j≠i} s_j) conj(Vᴴ)``, finite for every A
    (``inv`` raised on the zero matrix, and is meaningless at a singular one).

    >>> _cofactors(np.array([[1.0, 2.0], [2.0, 4.0]]), 0.0)  # rank 1: [[d, -c], [-b, a]]
    array([[ 4., -2.],
           [-2.,  1.]])
    """
    if np.all(y != 0):
        try:
            return np.expand_dims(y, (-1, -2)) * _mT(np.linalg.inv(a))
        except np.linalg.LinAlgError:
            pass
    u, sv, vh = np.linalg.svd(a)
    ones = np.ones(sv.shape[:-1] + (1,), sv.dtype)
    before = np.cumprod(np.concatenate([ones, sv[..., :-1]], axis=-1), axis=-1)
    after = np.cumprod(np.concatenate([ones, sv[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    sign = np.linalg.det(u) * np.linalg.det(vh)
    cof = np.matmul(np.conj(u) * (before * after)[..., None, :], np.conj(vh))
    return np.expand_dims(sign, (-1, -2)) * cof


@register_rrule(np.linalg.det)
def _det(a):
    """np.linalg.det: dA = dy[..., None, None] * cofactors(A) (det(A) inv(A)ᵀ where A is
    nonsingular)."""
    y = np.linalg.det(a)

    def pullback(dy):
        return (project(np.expand_dims(dy, (-1, -2)) * _cofactors(a, y), a),)

    return y, pullback


@register_rrule(np.linalg.slogdet)
def _slogdet(a):
    """np.linalg.slogdet -> (sign, logabsdet): dA = τ̄[..., None, None] * inv(A)ᵀ with
    τ̄ = dlogdet (+ i Im(dsign · sign) for complex A, whose sign e^{iθ} moves: ṡ = i s Im(τ),
    τ = tr(A⁻¹Ȧ)); a real sign is piecewise constant and its cotangent is ignored."""
    y = np.linalg.slogdet(a)
    complex_a = np.iscomplexobj(a)

    def pullback(ct):
        dlog = _entry(ct, 1, "logabsdet")
        dsign = _entry(ct, 0, "sign") if complex_a else ZeroTangent()
        tau: Any = dlog
        if not is_zero(dsign):
            tau = add_tangents(tau, 1j * np.imag(dsign * y[0]))
        if is_zero(tau):
            return (ZeroTangent(),)
        s = np.expand_dims(tau, (-1, -2))
        return (project(s * _inverse_transpose(a), a),)

    return y, pullback


_SOLVE_TRIANGULAR: list = []  # [scipy.linalg.solve_triangular], once SciPy is found imported


def _solve_triangular(L: Any) -> Any:
    """SciPy's ``solve_triangular`` for a single matrix ``L`` when the program has imported SciPy
    (``scipy.linalg`` then costs ~40 ms more once; fusegrad never imports SciPy itself: ~300 ms),
    else None: ``np.linalg.solve`` it is. A triangular solve of 60 by 60 takes 36 µs against
    ``np.linalg.solve``'s 99 (which factors the triangle again): the two in ``cholesky``'s
    pullback were 261 µs of the Gaussian-process program's 1.4 ms."""
    if np.ndim(L) != 2:
        return None
    if not _SOLVE_TRIANGULAR:
        if "scipy" not in sys.modules:
            return None
        try:
            from scipy.linalg import solve_triangular
        except ImportError:  # pragma: no cover - a broken SciPy: NumPy's solve serves
            return None
        _SOLVE_TRIANGULAR.append(solve_triangular)
    return _SOLVE_TRIANGULAR[0]


@register_rrule(np.linalg.cholesky)
def _cholesky(a, **kwargs):
    """np.linalg.cholesky: dA = sym(L⁻ᵀ Φ(Lᵀ dL) L⁻¹), Φ = lower triangle with half diagonal;
    ``upper=True`` (U = Lᴴ) conjugate-transposes dY first."""
    y = np.linalg.cholesky(a, **kwargs)
    upper = bool(kwargs.get("upper", False))
    L = _mH(y) if upper else y

    def pullback(dy):
        dL = _mH(dy) if upper else dy
        n = np.shape(L)[-1]
        m = np.matmul(_mT(L), dL)
        phi = np.tril(m) - 0.5 * m * np.eye(n, dtype=np.result_type(m))
        # G = L⁻ᵀ Φ conj(L)⁻¹ (L⁻ᵀ Φ L⁻¹ for real L), as two solves with Lᵀ and Lᴴ.
        tri = _solve_triangular(L)
        if tri is None:
            x = np.linalg.solve(_mT(L), phi)
            g = _mT(np.linalg.solve(_mH(L), _mT(x)))
        else:  # (unchecked: a NaN propagates, as through np.linalg.solve)
            x = tri(L, phi, lower=True, trans="T", check_finite=False)
            g = _mT(tri(L, _mT(x), lower=True, trans="C", check_finite=False))
        return (project(_sym(g), a),)

    return y, pullback


@register_rrule(np.linalg.eigh)
def _eigh(a, *args, **kwargs):
    """np.linalg.eigh -> (w, V): dA = sym(V (diag(dw) + F ∘ (Vᵀ dV)) Vᵀ), F_ij = 1/(w_j - w_i)
    off the diagonal, 0 on it (distinct eigenvalues)."""
    y = np.linalg.eigh(a, *args, **kwargs)
    w, v = y

    def pullback(ct):
        dw = _entry(ct, 0, "eigenvalues")
        dv = _entry(ct, 1, "eigenvectors")
        if is_zero(dw) and is_zero(dv):
            return (ZeroTangent(), *no_tangents(len(args)))
        inner: Any = ZeroTangent()
        if not is_zero(dw):
            n = np.shape(w)[-1]
            inner = np.expand_dims(dw, -1) * np.eye(n, dtype=np.result_type(dw))
        if not is_zero(dv):
            diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)  # w_j - w_i
            n = np.shape(w)[-1]
            eye = np.eye(n, dtype=bool)
            f = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))
            inner = add_tangents(inner, f * np.matmul(_mT(v), dv))
        g = np.matmul(np.matmul(_conj(v), inner), _mT(v))
        return (project(_sym(g), a), *no_tangents(len(args)))

    return y, pullback


# --------------------------------------------------------------------------------------------------
# Forward rules (tangents) of the functions above
# --------------------------------------------------------------------------------------------------


@register_frule(np.linalg.solve)
def _solve_jvp(tangents, a, b):
    """np.linalg.solve: ẋ = solve(A, ḃ - Ȧ x)."""
    x = np.linalg.solve(a, b)
    ta, tb = tangents
    if _zero(ta) and _zero(tb):
        return x, ZeroTangent()
    vec = np.ndim(b) == 1
    rhs: Any = ZeroTangent() if _zero(tb) else unthunk(tb)
    if not _zero(ta):
        x2 = np.expand_dims(x, -1) if vec else x
        ax = np.matmul(unthunk(ta), x2)
        ax = ax[..., 0] if vec else ax
        rhs = -ax if _zero(rhs) else rhs - ax
    if vec:  # one right-hand side: a column, so a stacked rhs is not read as a matrix
        return x, np.linalg.solve(a, np.expand_dims(rhs, -1))[..., 0]
    return x, np.linalg.solve(a, rhs)


@register_frule(np.linalg.inv)
def _inv_jvp(tangents, a):
    """np.linalg.inv: Ẏ = -Y Ȧ Y."""
    y = np.linalg.inv(a)
    (t,) = tangents
    if _zero(t):
        return y, ZeroTangent()
    return y, -np.matmul(np.matmul(y, unthunk(t)), y)


def _inverse_transpose(a: Any) -> Any:
    """``A⁻ᵀ``, the derivative of ``log|det A|``; for a singular matrix (``inv`` raises) its
    limit ``cofactors(A) / det(A)``: infinite where a cofactor is not zero (nan where it is),
    as JAX's, rather than an error after ``slogdet`` itself returned ``(0, -inf)``."""
    try:
        return _mT(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        if np.ndim(a) > 2:  # each matrix on its own: the singular ones only are infinite
            return np.stack([_inverse_transpose(m) for m in a])
    with np.errstate(divide="ignore", invalid="ignore"):
        return _cofactors(a, 0.0) / 0.0


def _trace_inv_dot(a: Any, t: Any) -> Any:
    """tr(A⁻¹ Ȧ) over the last two axes; of a singular matrix ``tr(cofactors(A)ᵀ Ȧ) / 0``
    (summed before the division: ±inf, not inf - inf)."""
    try:
        return np.sum(_mT(np.linalg.inv(a)) * t, axis=(-2, -1))
    except np.linalg.LinAlgError:
        if np.ndim(a) > 2:
            tb = np.broadcast_to(t, np.shape(a))
            return np.stack([_trace_inv_dot(m, v) for m, v in zip(a, tb)])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sum(_cofactors(a, 0.0) * t, axis=(-2, -1)) / 0.0


@register_frule(np.linalg.det)
def _det_jvp(tangents, a):
    """np.linalg.det: ẏ = det(A) tr(A⁻¹ Ȧ) = sum(cofactors(A) * Ȧ)."""
    y = np.linalg.det(a)
    (t,) = tangents
    if _zero(t):
        return y, ZeroTangent()
    return y, np.sum(_cofactors(a, y) * unthunk(t), axis=(-2, -1))


@register_frule(np.linalg.slogdet)
def _slogdet_jvp(tangents, a):
    """np.linalg.slogdet: (sign, logabsdet)˙ = (0, tr(A⁻¹ Ȧ)); complex A: (i sign Im τ, Re τ),
    τ = tr(A⁻¹ Ȧ)."""
    y = np.linalg.slogdet(a)
    (t,) = tangents
    if _zero(t):
        return y, ZeroTangent()
    tau = _trace_inv_dot(a, unthunk(t))
    if not np.iscomplexobj(tau):
        return y, (ZeroTangent(), tau)
    return y, (1j * y[0] * np.imag(tau), np.real(tau))  # the complex sign e^{iθ} moves


@register_frule(np.linalg.cholesky)
def _cholesky_jvp(tangents, a, **kwargs):
    """np.linalg.cholesky: L̇ = L Φ(L⁻¹ sym(Ȧ) L⁻ᴴ); ``upper=True``: U̇ = L̇ᴴ."""
    y = np.linalg.cholesky(a, **kwargs)
    (t,) = tangents
    if _zero(t):
        return y, ZeroTangent()
    upper = bool(kwargs.get("upper", False))
    L = _mH(y) if upper else y
    n = np.shape(L)[-1]
    tri = _solve_triangular(L)
    if tri is None:
        x = np.linalg.solve(L, _sym(unthunk(t)))  # L⁻¹ Ȧ
        m = _mT(np.linalg.solve(_conj(L), _mT(x)))  # L⁻¹ Ȧ L⁻ᴴ (Ȧ Hermitian)
    else:
        x = tri(L, _sym(unthunk(t)), lower=True, check_finite=False)
        m = _mT(tri(_conj(L), _mT(x), lower=True, check_finite=False))
    phi = np.tril(m) - 0.5 * m * np.eye(n)
    dl = np.matmul(L, phi)
    return y, (_mH(dl) if upper else dl)


@register_frule(np.linalg.eigh)
def _eigh_jvp(tangents, a, *args, **kwargs):
    """np.linalg.eigh: ẇ = diag(Vᵀ sym(Ȧ) V), V̇ = V (F ∘ Vᵀ sym(Ȧ) V), F_ij = 1/(w_j - w_i)."""
    y = np.linalg.eigh(a, *args, **kwargs)
    w, v = y
    t = tangents[0]
    if _zero(t):
        return y, ZeroTangent()
    m = np.matmul(np.matmul(_mH(v), _sym(unthunk(t))), v)
    dw = (
        np.real(np.diagonal(m, axis1=-2, axis2=-1))
        if np.iscomplexobj(m)
        else np.diagonal(m, axis1=-2, axis2=-1)
    )
    n = np.shape(w)[-1]
    eye = np.eye(n, dtype=bool)
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)  # w_j - w_i
    f = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))
    dv = np.matmul(v, f * m)
    return y, (dw, dv)

"""Reverse and forward rules of matrix decompositions: svd, eig, qr, pinv; and composites.

Rules (forward = JAX's jvp; reverse = its transpose under JAX's pairing ``Re(u·v)``). Each reverse
rule is written for the Hermitian pairing ``Re tr(Xᴴ Y)`` and conjugated on the way in and out
(``vjp_jax(ȳ) = conj(vjp_herm(conj ȳ))``); for real inputs both are the same. ``P = Uᴴ dA V``,
``F_ij = 1/(s_j² − s_i²)`` (0 for equal values), ``S = diag(s)``:

- ``svd`` (reduced; full when square): ``Ā = U P̄ Vᴴ + (I − UUᴴ) Ū S⁻¹ Vᴴ + U S⁻¹ V̄ᴴ (I − VVᴴ)``
  with ``P̄ = (F∘(J − Jᴴ)) S + S (F∘(L − Lᴴ)) + diag(s̄ + i Im(J_ii)/s_i)``, ``J = UᴴŪ``,
  ``L = VᴴV̄``; ``svd(compute_uv=False)``: ``Ā = U diag(s̄) Vᴴ``.
- ``eig``: ``Ā = V⁻ᴴ (diag(w̄) + conj(F)∘(Vᴴ V̄')) Vᴴ`` with ``F_ij = 1/(w_j − w_i)`` and
  ``V̄' = V̄ − V diag(Re diag(VᴴV̄))`` (NumPy's eigenvectors have unit norm).
- ``qr`` (``m ≥ n``; modes 'reduced', 'r', and 'complete' when square):
  ``Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ``, ``M = R R̄ᴴ − Q̄ᴴ Q``.
- ``pinv``: ``Ā = −Pᴴ P̄ Pᴴ + (I − AP) P̄ᴴ P Pᴴ + Pᴴ P P̄ᴴ (I − PA)``.

Composites (traced through the rules above and NumPy's): ``eigvals`` = ``eig(a)[0]``,
``eigvalsh(a, UPLO)`` = ``eigh(a, UPLO)[0]``, ``lstsq`` = ``pinv(a) @ b`` (with residuals, rank and
singular values as NumPy returns them), ``matrix_power`` by repeated squaring, ``multi_dot`` as a
chain of ``matmul``, and ``norm``'s matrix orders ±1, ±inf and -2 (the others go to its rule).

Like JAX: derivatives of singular vectors and eigenvectors need distinct values; ``qr`` of a wide
matrix (``m < n``) and ``svd(full_matrices=True)`` of a non-square one raise for a cotangent on
the part that is not unique.

Example::

    >>> import fusegrad as fg
    >>> a = np.array([[3.0, 1.0], [1.0, 2.0]])
    >>> g = fg.grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False)))(a)
    >>> np.allclose(g, np.eye(2))  # the nuclear norm's gradient of an SPD matrix
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tangents import AbstractZero, ZeroTangent, unthunk
from .common import dispatch, dtype_of, no_tangents, on_values, params, project, sym, value
from .registry import register_frule, register_rrule


def _zero(t: Any) -> bool:
    return t is None or isinstance(t, AbstractZero)


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _H(x: Any) -> Any:
    return np.conj(_mT(x)) if np.iscomplexobj(value(x)) else _mT(x)


def _conj(x: Any) -> Any:
    if _zero(x) or not np.iscomplexobj(value(x)):
        return x
    return np.conj(x)


def _entry(ct: Any, i: int) -> Any:
    if isinstance(ct, AbstractZero):
        return ct
    v = unthunk(ct[i])
    return ZeroTangent() if v is None else v


def _eye_like(n: int) -> np.ndarray:
    return np.eye(n)


def _f_matrix(d: Any) -> Any:
    """``1/(d_j − d_i)`` off the diagonal and wherever ``d_j = d_i``, 0 (JAX's masking)."""
    diff = np.expand_dims(d, -2) - np.expand_dims(d, -1)
    zero = np.equal(diff, 0)
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, diff))


# --------------------------------------------------------------------------------------------------
# svd
# --------------------------------------------------------------------------------------------------


def _svd_parts(a: Any, full: bool, hermitian: bool) -> tuple:
    m, n = np.shape(a)[-2:]
    u, s, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    return u, s, vh, m, n


def _svd_vjp_herm(u, s, vh, m, n, gu, gs, gvh, dtype_complex: bool) -> Any:
    """The Hermitian-pairing adjoint of the reduced SVD (see the module table)."""
    v = _H(vh)
    k = np.shape(s)[-1]
    s_safe = np.where(np.equal(s, 0), 1.0, s)
    s_inv = np.where(np.equal(s, 0), 0.0, 1.0 / s_safe)
    gv: Any = ZeroTangent() if _zero(gvh) else _H(gvh)
    pbar: Any = 0.0
    if not _zero(gs):  # s is real: only the real part of its cotangent pairs with ṡ
        pbar = np.expand_dims(np.real(gs), -1) * np.eye(k)
    f = _f_matrix(s * s)
    s_row = np.expand_dims(s, -2)  # X * s_row = X S
    s_col = np.expand_dims(s, -1)  # s_col * X = S X
    extra: Any = 0.0
    if not _zero(gu):
        j = np.matmul(_H(u), gu)
        pbar = pbar + (f * (j - _H(j))) * s_row
        if dtype_complex:
            diag = np.imag(np.diagonal(j, axis1=-2, axis2=-1)) * s_inv
            pbar = pbar + 1j * np.expand_dims(diag, -1) * np.eye(k)
        if m > k:
            proj = gu - np.matmul(u, j)
            extra = extra + np.matmul(proj * np.expand_dims(s_inv, -2), vh)
    if not _zero(gv):
        lmat = np.matmul(vh, gv)
        pbar = pbar + s_col * (f * (lmat - _H(lmat)))
        if n > k:
            proj = gv - np.matmul(v, lmat)
            extra = extra + np.matmul(u * np.expand_dims(s_inv, -2), _H(proj))
    core = np.matmul(np.matmul(u, pbar), vh) if np.ndim(pbar) else 0.0
    return core + extra


@register_rrule(np.linalg.svd)
def _svd(a, *args, **kwargs):
    """np.linalg.svd: the adjoint of JAX's jvp (module table); full_matrices only for a square
    matrix or zero cotangents on the extra columns."""
    p = params(args, kwargs, full_matrices=True, compute_uv=True, hermitian=False)
    y = np.linalg.svd(a, *args, **kwargs)
    u, s, vh, m, n = _svd_parts(a, p["full_matrices"], p["hermitian"])
    k = min(m, n)
    cplx = np.iscomplexobj(a)

    def pullback(ct):
        if not p["compute_uv"]:
            gu, gs, gvh = ZeroTangent(), unthunk(ct), ZeroTangent()
        else:
            gu, gs, gvh = _entry(ct, 0), _entry(ct, 1), _entry(ct, 2)
            if p["full_matrices"] and m != n:
                gu, gvh = _drop_extra(gu, gvh, k, m, n)
        g = _svd_vjp_herm(u, s, vh, m, n, _conj(gu), gs, _conj(gvh), cplx)
        return (project(_conj(g), a), *no_tangents(len(args)))

    return y, pullback


def _drop_extra(gu: Any, gvh: Any, k: int, m: int, n: int) -> tuple:
    if not _zero(gu) and m > k:
        if np.any(np.asarray(gu)[..., k:] != 0):
            raise ValueError(_FULL_MSG)
        gu = gu[..., :k]
    if not _zero(gvh) and n > k:
        if np.any(np.asarray(gvh)[..., k:, :] != 0):
            raise ValueError(_FULL_MSG)
        gvh = gvh[..., :k, :]
    return gu, gvh


_FULL_MSG = (
    "np.linalg.svd(full_matrices=True) of a non-square matrix: the extra singular vectors are not "
    "unique, so they have no derivative (as in JAX). Use full_matrices=False"
)


@register_frule(np.linalg.svd)
def _svd_frule(tangents, a, *args, **kwargs):
    """np.linalg.svd: JAX's jvp (ṡ = Re diag(Uᴴ Ȧ V), U̇ and V̇ from F)."""
    p = params(args, kwargs, full_matrices=True, compute_uv=True, hermitian=False)
    y = np.linalg.svd(a, *args, **kwargs)
    t = unthunk(tangents[0])
    if _zero(t):
        return y, ZeroTangent()
    u, s, vh, m, n = _svd_parts(a, p["full_matrices"], p["hermitian"])
    if p["full_matrices"] and m != n and p["compute_uv"]:
        raise ValueError(_FULL_MSG)
    v = _H(vh)
    dp = np.matmul(np.matmul(_H(u), t), v)
    ds = np.real(np.diagonal(dp, axis1=-2, axis2=-1))
    if not p["compute_uv"]:
        return y, ds
    k = np.shape(s)[-1]
    f = _f_matrix(s * s)
    s_safe = np.where(np.equal(s, 0), 1.0, s)
    s_inv = np.where(np.equal(s, 0), 0.0, 1.0 / s_safe)
    dss = dp * np.expand_dims(s, -2)
    sds = np.expand_dims(s, -1) * dp
    du = f * (dss + _H(dss))
    if np.iscomplexobj(dp):
        du = du + 0.5 * (dp - _H(dp)) * (np.expand_dims(s_inv, -1) * np.eye(k))
    du = np.matmul(u, du)
    dv = np.matmul(v, f * (sds + _H(sds)))
    if m > n:
        dav = np.matmul(t, v)
        du = du + (dav - np.matmul(u, np.matmul(_H(u), dav))) * np.expand_dims(s_inv, -2)
    if n > m:
        dahu = np.matmul(_H(t), u)
        dv = dv + (dahu - np.matmul(v, np.matmul(vh, dahu))) * np.expand_dims(s_inv, -2)
    return y, type(y)(du, ds, _H(dv))


# --------------------------------------------------------------------------------------------------
# eig
# --------------------------------------------------------------------------------------------------


@register_rrule(np.linalg.eig)
def _eig(a):
    """np.linalg.eig: Ā = V⁻ᴴ (diag(w̄) + conj(F)∘(Vᴴ V̄')) Vᴴ (unit-norm eigenvectors)."""
    y = np.linalg.eig(a)
    w, v = y
    vinv = np.linalg.inv(v)
    f = _f_matrix(w)

    def pullback(ct):
        gw, gv = _conj(_entry(ct, 0)), _conj(_entry(ct, 1))
        inner: Any = 0.0
        if not _zero(gw):
            inner = np.expand_dims(gw, -1) * np.eye(np.shape(w)[-1])
        if not _zero(gv):
            vhgv = np.matmul(_H(v), gv)
            norm_fix = np.real(np.diagonal(vhgv, axis1=-2, axis2=-1))
            gv = gv - v * np.expand_dims(norm_fix, -2)
            inner = inner + np.conj(f) * np.matmul(_H(v), gv)
        g = np.matmul(np.matmul(_H(vinv), inner), _H(v))
        return (project(_conj(g), a),)

    return y, pullback


@register_frule(np.linalg.eig)
def _eig_frule(tangents, a):
    """np.linalg.eig: ẇ = diag(V⁻¹ȦV), V̇ = V (F∘(V⁻¹ȦV)) with the unit-norm projection."""
    y = np.linalg.eig(a)
    t = unthunk(tangents[0])
    if _zero(t):
        return y, ZeroTangent()
    w, v = y
    m = np.matmul(np.linalg.inv(v), np.matmul(t, v))
    dw = np.diagonal(m, axis1=-2, axis2=-1)
    dv = np.matmul(v, _f_matrix(w) * m)
    dv = dv - v * np.real(np.sum(np.conj(v) * dv, axis=-2, keepdims=True))
    return y, type(y)(dw, dv)


# --------------------------------------------------------------------------------------------------
# qr
# --------------------------------------------------------------------------------------------------

_QR_MSG = (
    "np.linalg.qr: the derivative exists for m >= n with mode 'reduced' or 'r' (and 'complete' "
    "of a square matrix), as in JAX; this call has shape {shape} and mode {mode!r}"
)


def _copyltu(m: Any) -> Any:
    low = np.tril(m, -1)
    return (
        low
        + _H(low)
        + np.real(np.diagonal(m, axis1=-2, axis2=-1))[..., None] * np.eye(np.shape(m)[-1])
    )


def _qr_ok(a: Any, mode: str) -> None:
    m, n = np.shape(a)[-2:]
    if m < n or (mode == "complete" and m != n) or mode not in ("reduced", "complete", "r"):
        raise ValueError(_QR_MSG.format(shape=np.shape(a), mode=mode))


@register_rrule(np.linalg.qr)
def _qr(a, *args, **kwargs):
    """np.linalg.qr (m >= n): Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ, M = R R̄ᴴ − Q̄ᴴ Q."""
    mode = params(args, kwargs, mode="reduced")["mode"]
    _qr_ok(a, mode)
    y = np.linalg.qr(a, *args, **kwargs)
    q, r = np.linalg.qr(a)

    def pullback(ct):
        if mode == "r":
            gq, gr = ZeroTangent(), _conj(unthunk(ct))
        else:
            gq, gr = _conj(_entry(ct, 0)), _conj(_entry(ct, 1))
        mmat: Any = 0.0
        if not _zero(gr):
            mmat = np.matmul(r, _H(gr))
        if not _zero(gq):
            mmat = mmat - np.matmul(_H(gq), q)
        b = np.matmul(q, _copyltu(mmat)) if np.ndim(mmat) else 0.0
        if not _zero(gq):
            b = b + gq
        # B R⁻ᴴ: solve X Rᴴ = B, i.e. R X ᴴ = Bᴴ
        g = _H(np.linalg.solve(r, _H(b)))
        return (project(_conj(g), a), *no_tangents(len(args)))

    return y, pullback


@register_frule(np.linalg.qr)
def _qr_frule(tangents, a, *args, **kwargs):
    """np.linalg.qr: JAX's jvp (C = Qᴴ Ȧ R⁻¹, Ω its skew lower part)."""
    mode = params(args, kwargs, mode="reduced")["mode"]
    _qr_ok(a, mode)
    y = np.linalg.qr(a, *args, **kwargs)
    t = unthunk(tangents[0])
    if _zero(t):
        return y, ZeroTangent()
    q, r = np.linalg.qr(a)
    dx_rinv = _H(np.linalg.solve(_H(r), _H(t)))  # Ȧ R⁻¹
    c = np.matmul(_H(q), dx_rinv)
    low = np.tril(c, -1)
    om = low - _H(low)
    if np.iscomplexobj(c):
        om = om + np.eye(np.shape(c)[-1]) * (c - np.real(c))
    dq = np.matmul(q, om - c) + dx_rinv
    dr = np.matmul(c - om, r)
    if mode == "r":
        return y, dr
    return y, type(y)(dq, dr)


# --------------------------------------------------------------------------------------------------
# pinv
# --------------------------------------------------------------------------------------------------


def _hermitian_pinv(args: tuple, kwargs: dict) -> bool:
    """Whether ``pinv`` was told its matrix is Hermitian: it then reads one triangle (through
    ``eigh``), and its derivatives are symmetrised as ``eigh``'s (JAX's convention)."""
    return bool(params(args, kwargs, rcond=None, hermitian=False, rtol=None)["hermitian"])


@register_rrule(np.linalg.pinv)
def _pinv(a, *args, **kwargs):
    """np.linalg.pinv: Ā = −Pᴴ P̄ Pᴴ + (I − AP) P̄ᴴ P Pᴴ + Pᴴ P P̄ᴴ (I − PA); with
    ``hermitian=True`` its Hermitian part."""
    pm = np.linalg.pinv(a, *args, **kwargs)
    hermitian = _hermitian_pinv(args, kwargs)
    # told Hermitian, pinv reads a's Hermitian part (JAX's convention, as eigh's): so does its
    # pullback, whose own derivative then has no part along a's anti-Hermitian directions (a
    # Hessian through pinv(a, hermitian=True) was not symmetric; sweep Z2)
    ah = sym(a) if hermitian else a

    def pullback(dp):
        gp = _conj(dp)
        ph, gh = _H(pm), _H(gp)
        g = -_product3(ph, gp, ph)
        # (I - AP) X as X - A (P X), X (I - PA) as X - (X P) A: never an m x m matrix for a tall
        # A (lstsq's 300 x 15: 70% of its replay was forming I - AP)
        u = _product3(gh, pm, ph)
        g = g + (u - _product3(ah, pm, u))
        v = _product3(ph, pm, gh)
        g = g + (v - _product3(v, pm, ah))
        g = _conj(g)
        return (project(sym(g) if hermitian else g, a), *no_tangents(len(args)))

    return pm, pullback


@register_frule(np.linalg.pinv)
def _pinv_frule(tangents, a, *args, **kwargs):
    """np.linalg.pinv: Ṗ = −P Ȧ P + P Pᴴ Ȧᴴ (I − AP) + (I − PA) Ȧᴴ Pᴴ P (with
    ``hermitian=True``, of Ȧ's Hermitian part)."""
    pm = np.linalg.pinv(a, *args, **kwargs)
    t = unthunk(tangents[0])
    if _zero(t):
        return pm, ZeroTangent()
    if _hermitian_pinv(args, kwargs):
        t, a = sym(t), sym(a)
    ph, th = _H(pm), _H(t)
    d = -_product3(pm, t, pm)
    w = _product3(pm, ph, th)
    d = d + (w - _product3(w, a, pm))
    z = _product3(th, ph, pm)
    return pm, d + (z - _product3(pm, a, z))


def _product3(x: Any, y: Any, z: Any) -> Any:
    """``x @ y @ z`` in the cheaper order (matrices, or stacks of them).

    >>> _product3(np.ones((5, 1)), np.ones((1, 5)), np.ones((5, 1))).ravel().tolist()
    [5.0, 5.0, 5.0, 5.0, 5.0]
    """
    (p, q), r, s = np.shape(x)[-2:], np.shape(y)[-1], np.shape(z)[-1]
    if p * q * r + p * r * s <= q * r * s + p * q * s:
        return np.matmul(np.matmul(x, y), z)
    return np.matmul(x, np.matmul(y, z))


# --------------------------------------------------------------------------------------------------
# Composites
# --------------------------------------------------------------------------------------------------


def _eigvals(a: Any) -> Any:
    return dispatch(np.linalg.eig, (a,))[0]


def _eigvalsh(a: Any, UPLO: Any = "L") -> Any:  # noqa: N803 - NumPy's name
    return np.linalg.eigh(a, UPLO)[0]


def _lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    m, n = np.shape(a)[-2:]
    rc = np.finfo(dtype_of(a)).eps * max(m, n) if rcond is None else rcond
    # NumPy's residuals (present only at full rank) and rank, read from the values (a step of
    # a jit recording, run again at each replay)
    _, resid, rank, _ = on_values(np.linalg.lstsq, a, b, rcond=rc)
    x = np.matmul(dispatch(np.linalg.pinv, (a,), {"rcond": rc}), b)
    if np.size(resid):
        r = b - np.matmul(a, x)
        resid = np.sum(np.real(r * np.conj(r)), axis=0)
        if np.ndim(b) == 1:
            resid = np.reshape(resid, (1,))
    s = dispatch(np.linalg.svd, (a,), {"compute_uv": False})
    return x, resid, rank, s


def _matrix_power(a: Any, n: int) -> Any:
    n = int(n)
    if n == 0:  # the identity, in a's dtype (as NumPy's)
        shape = np.shape(a)
        return np.broadcast_to(np.eye(shape[-1], dtype=np.result_type(a)), shape) + 0 * a
    if n < 0:
        a, n = np.linalg.inv(a), -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else np.matmul(result, base)
        n >>= 1
        if n:
            base = np.matmul(base, base)
    return result


def _multi_dot(arrays: Any, *, out: Any = None) -> Any:
    if out is not None:
        raise TypeError("np.linalg.multi_dot(..., out=...) writes in place: drop out=")
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("np.linalg.multi_dot: expecting at least two arrays")
    result = arrays[0]
    for x in arrays[1:]:
        result = np.matmul(result, x) if np.ndim(result) and np.ndim(x) else np.dot(result, x)
    return result


def _norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    ndim = np.ndim(x)
    matrix = (axis is None and ndim == 2 and ord is not None) or (
        axis is not None and np.ndim(axis) > 0 and len(axis) == 2
    )
    if not matrix or ord not in (1, -1, np.inf, -np.inf, -2):
        return dispatch(np.linalg.norm, (x, ord, axis, keepdims))
    r, c = (0, 1) if axis is None else (int(axis[0]) % ndim, int(axis[1]) % ndim)
    if ord == -2:
        moved = np.moveaxis(x, (r, c), (-2, -1))
        y = np.min(dispatch(np.linalg.svd, (moved,), {"compute_uv": False}), axis=-1)
    else:
        sum_ax, red_ax = (r, c) if ord in (1, -1) else (c, r)
        sums = np.sum(np.abs(x), axis=sum_ax, keepdims=True)
        ext = np.max if ord in (1, np.inf) else np.min
        y = np.squeeze(ext(sums, axis=red_ax, keepdims=True), axis=(r, c))
    if keepdims:
        y = np.expand_dims(y, (r, c))
    return y


# fmt: off
DECOMPOSITIONS: dict[Any, Callable] = {
    np.linalg.eigvals:      _eigvals,
    np.linalg.eigvalsh:     _eigvalsh,
    np.linalg.lstsq:        _lstsq,
    np.linalg.matrix_power: _matrix_power,
    np.linalg.multi_dot:    _multi_dot,
    np.linalg.norm:         _norm,
}
# fmt: on

__all__ = ["DECOMPOSITIONS"]

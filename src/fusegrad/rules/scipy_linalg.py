"""Reverse and forward rules for scipy.linalg's solve_triangular, lu_factor, expm, sqrtm,
solve_sylvester, logm and fractional_matrix_power.

The other scipy.linalg functions fusegrad differentiates (``inv``, ``det``, ``solve``,
``cholesky``, ``cho_factor``/``cho_solve``, ``lu_solve``) are written in ``fusegrad.scipy.linalg``
with ``np.linalg`` calls and these rules, so they need none of their own.

| function | pullback (``op(A)`` is ``A``, ``Aᵀ`` or ``Aᴴ`` as ``trans`` says) |
|---|---|
| ``solve_triangular(a, b)`` | ``b̄ = solve_triangular(op(A)ᵀ, x̄)``, ``ā = tri(-op⁻¹(b̄ xᵀ))`` |
| ``lu_factor(a)`` → ``(lu, piv)`` | ``ā = P L⁻ᵀ (tril₋₁(Lᵀ L̄) + triu(Ū Uᵀ)) U⁻ᵀ`` |
| ``expm(a)`` | ``ā = L(Aᵀ, ȳ)``, the Fréchet derivative: a block of ``expm([[Aᵀ, ȳ], [0, Aᵀ]])`` |
| ``sqrtm(a)`` | ``ā`` solves the Sylvester equation ``Yᵀ ā + ā Yᵀ = ȳ`` (as a Kronecker system) |
| ``logm(a)``, ``fractional_matrix_power(a, t)`` | ``ā`` = a block of ``f([[Aᵀ, ȳ], [0, Aᵀ]])`` |
| ``solve_sylvester(a, b, q)`` | ``q̄`` solves ``Aᵀ q̄ + q̄ Bᵀ = x̄``; ``ā = -q̄ Xᵀ``, ``b̄ = -Xᵀ q̄`` |

``tri`` keeps the triangle ``a`` is read from (without the diagonal when ``unit_diagonal``);
``L̄``, ``Ū`` are the strict lower and the upper triangles of the packed ``lu`` cotangent.
Complex values follow JAX (transposes, no conjugates). This module is imported (and its rules
registered) with ``fusegrad.scipy.linalg``, which ``import scipy.linalg`` brings in after
``import fusegrad``: fusegrad's own import does not pay for SciPy's linear algebra. Pullbacks
are written with NumPy and ``scipy.linalg`` calls looked up at call time, so an outer trace
differentiates them again.

Example::

    >>> import numpy as np, scipy.linalg as sl, fusegrad as fg
    >>> fg.grad(lambda a: np.trace(sl.expm(a)))(np.zeros((2, 2)))  # d tr(e^A) = e^(Aᵀ)
    array([[1., 0.],
           [0., 1.]])
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..tangents import AbstractZero, ZeroTangent, unthunk
from .common import params, project, unbroadcast_to
from .registry import FRULES, RRULES, register_frule, register_rrule

try:  # SciPy is optional.
    import scipy.linalg as sl
except ImportError:  # pragma: no cover - depends on the environment
    sl = None


def _mT(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


def _zero(t: Any) -> bool:
    return t is None or isinstance(t, AbstractZero)


def _trans_code(trans: Any) -> int:
    return {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}[trans]


def _op(a: Any, code: int) -> Any:
    return a if code == 0 else (_mT(a) if code == 1 else np.conj(_mT(a)))


def _tri(g: Any, lower: bool, unit: bool) -> Any:
    """The part of ``g`` in the triangle a triangular solve reads (diagonal dropped if unit)."""
    if lower:
        return np.tril(g, -1 if unit else 0)
    return np.triu(g, 1 if unit else 0)


def _st_params(args: tuple, kwargs: dict) -> tuple[int, bool, bool]:
    p = params(args, kwargs, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
               check_finite=True)  # fmt: skip
    return _trans_code(p["trans"]), bool(p["lower"]), bool(p["unit_diagonal"])


def _da_of_op(m: Any, code: int) -> Any:
    """The cotangent of ``a`` given the cotangent ``m`` of ``op(a)`` (JAX's convention)."""
    return m if code == 0 else (_mT(m) if code == 1 else np.conj(_mT(m)))


if sl is not None:

    def _columns(a: Any, rhs: Any, vec: bool, **kwargs: Any) -> Any:
        """``solve_triangular(a, rhs)`` for the tangent or cotangent of a vector ``b``: beside a
        stack of matrices it has a batch axis, and SciPy would read it as one matrix."""
        if vec and np.ndim(rhs) > 1:
            return sl.solve_triangular(a, rhs[..., None], **kwargs)[..., 0]
        return sl.solve_triangular(a, rhs, **kwargs)

    @register_rrule(sl.solve_triangular)
    def _solve_triangular(a, b, *args, **kwargs):
        """x = op(A)⁻¹ b: b̄ = op(A)⁻ᵀ x̄, ā = tri(∂op ← -b̄ xᵀ)."""
        code, lower, unit = _st_params(args, kwargs)
        x = sl.solve_triangular(a, b, *args, **kwargs)
        vec = np.ndim(b) == 1

        def pullback(dx):
            # op(A)⁻ᵀ as a solve with A: trans 0 -> 1, 1 -> 0; Aᴴ -> conj(A), trans 0
            if code == 2:
                gb = _columns(np.conj(a), dx, vec, lower=lower, unit_diagonal=unit)
            else:
                gb = _columns(a, dx, vec, trans=1 - code, lower=lower, unit_diagonal=unit)
            x2 = x[..., None] if vec else x
            gb2 = gb[..., None] if vec else gb
            m = -np.matmul(gb2, _mT(x2))  # the cotangent of op(A)
            ga = _tri(_da_of_op(m, code), lower, unit)
            rest = tuple(ZeroTangent() for _ in args)
            # a stack of matrices beside one b (or the reverse): summed over the batch
            ga, gb = unbroadcast_to(ga, np.shape(a)), unbroadcast_to(gb, np.shape(b))
            return (project(ga, a), project(gb, b), *rest)

        return x, pullback

    @register_frule(sl.solve_triangular)
    def _solve_triangular_frule(tangents, a, b, *args, **kwargs):
        """ẋ = op(A)⁻¹ (ḃ - op(tri(Ȧ)) x)."""
        code, lower, unit = _st_params(args, kwargs)
        x = sl.solve_triangular(a, b, *args, **kwargs)
        vec = np.ndim(b) == 1
        ta, tb = tangents[0], tangents[1]
        if _zero(ta) and _zero(tb):
            return x, ZeroTangent()
        rhs: Any = 0.0 if _zero(tb) else unthunk(tb)
        if not _zero(ta):
            opa = _op(_tri(unthunk(ta), lower, unit), code)
            ax = np.matmul(opa, x[..., None])[..., 0] if vec else np.matmul(opa, x)
            rhs = rhs - ax
        rhs = np.broadcast_to(rhs, np.shape(x)) if np.ndim(rhs) == 0 else rhs
        return x, _columns(a, rhs, vec, trans=code, lower=lower, unit_diagonal=unit)

    _solve_triangular_frule.lazy = False  # type: ignore[attr-defined]

    def _perm(piv: Any, rows: int | None = None) -> np.ndarray:
        """The row order ``p`` with ``A[p] = L U`` from LAPACK's sequential swaps ``piv`` (of
        ``rows`` rows: by default as many as swaps); for stacked pivots, one order per matrix."""
        piv = np.asarray(piv)
        rows = piv.shape[-1] if rows is None else rows
        swaps = piv.reshape(-1, piv.shape[-1])
        p = np.tile(np.arange(rows), (swaps.shape[0], 1))
        for order, row in zip(p, swaps):
            for i, j in enumerate(row):
                order[i], order[j] = order[j], order[i]
        return p.reshape(piv.shape[:-1] + (rows,))

    def _rows(x: Any, p: np.ndarray) -> Any:
        """The rows of ``x`` (a vector, a matrix or a stack) in the order ``p`` (one order per
        matrix for stacked pivots)."""
        if p.ndim == 1:
            return x[p] if np.ndim(x) == 1 else x[..., p, :]
        missing = p.ndim + 1 - np.ndim(x)  # a matrix beside a stack of orders: broadcast
        if missing > 0:
            x = np.expand_dims(x, tuple(range(missing)))
        return np.take_along_axis(x, np.expand_dims(p, -1), axis=-2)

    def _split(lu: Any) -> tuple[Any, Any]:
        """``(L, U)`` from the packed ``lu`` (M×N, K = min(M, N)): ``L`` M×K unit lower
        trapezoidal, ``U`` K×N upper trapezoidal."""
        m, n = np.shape(lu)[-2:]
        k = min(m, n)
        low = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=np.result_type(lu))
        return low, np.triu(lu[..., :k, :])

    # With K = min(M, N): L = [L1; L2] (L1 K×K), U = [U1, U2] (U1 K×K), A[p] = [[A11, A12],
    # [A21, A22]]. F = L1⁻¹ Ȧ11 U1⁻¹ gives L̇1 = L1 tril₋₁(F), U̇1 = triu(F) U1; the rest follow
    # from A21 = L2 U1 (tall) and A12 = L1 U2 (wide): L̇2 = (Ȧ21 - L2 U̇1) U1⁻¹, U̇2 =
    # L1⁻¹ (Ȧ12 - L̇1 U2). The pullback is the transpose of that map.

    @register_rrule(sl.lu_factor)
    def _lu_factor(a, *args, **kwargs):
        """A[p] = L U packed as lu = L - I + U: ā[p] = L⁻ᵀ (tril₋₁(Lᵀ L̄) + triu(Ū Uᵀ)) U⁻ᵀ (the
        square case; rectangular: the blocks in the comment above)."""
        lu, piv = sl.lu_factor(a, *args, **kwargs)
        m, n = np.shape(lu)[-2:]
        k = min(m, n)
        inv_p = np.argsort(_perm(piv, m), axis=-1)

        def pullback(ct):
            g = ct[0]
            if _zero(g):
                return (ZeroTangent(), *(ZeroTangent() for _ in args))
            g = unthunk(g)
            low, up = _split(lu)
            l1, u1 = low[..., :k, :], up[..., :, :k]
            g11 = g[..., :k, :k]
            lower = np.matmul(_mT(l1), g11)
            upper = np.matmul(g11, _mT(u1))
            if m > k:  # tall: L2's cotangent g21
                g21 = g[..., k:, :]
                upper = upper - np.matmul(_mT(low[..., k:, :]), g21)
            if n > k:  # wide: U2's cotangent g12
                g12 = g[..., :, k:]
                lower = lower - np.matmul(g12, _mT(up[..., :, k:]))
            inner = np.tril(lower, -1) + np.triu(upper)
            left = sl.solve_triangular(l1, inner, trans=1, lower=True, unit_diagonal=True)
            a11 = _mT(sl.solve_triangular(u1, _mT(left), trans=0, lower=False))
            if n > k:  # Ā12 = L1⁻ᵀ g12
                a12 = sl.solve_triangular(l1, g12, trans=1, lower=True, unit_diagonal=True)
                a11 = np.concatenate([a11, a12], axis=-1)
            if m > k:  # Ā21 = g21 U1⁻ᵀ
                a21 = _mT(sl.solve_triangular(u1, _mT(g21), trans=0, lower=False))
                a11 = np.concatenate([a11, a21], axis=-2)
            return (project(_rows(a11, inv_p), a), *(ZeroTangent() for _ in args))

        return (lu, piv), pullback

    @register_frule(sl.lu_factor)
    def _lu_factor_frule(tangents, a, *args, **kwargs):
        """F = L1⁻¹ Ȧ[p]₁₁ U1⁻¹: L̇1 = L1 tril₋₁(F), U̇1 = triu(F) U1, packed as l̇u = L̇ + U̇
        (rectangular: the blocks in the comment above)."""
        lu, piv = sl.lu_factor(a, *args, **kwargs)
        t = tangents[0]
        if _zero(t):
            return (lu, piv), (ZeroTangent(), ZeroTangent())
        m, n = np.shape(lu)[-2:]
        k = min(m, n)
        low, up = _split(lu)
        l1, u1 = low[..., :k, :], up[..., :, :k]
        ta = _rows(unthunk(t), _perm(piv, m))
        left = sl.solve_triangular(l1, ta[..., :k, :k], lower=True, unit_diagonal=True)
        f = _mT(sl.solve_triangular(u1, _mT(left), trans=1, lower=False))
        f_low, f_up = np.tril(f, -1), np.triu(f)
        dlu = np.matmul(l1, f_low) + np.matmul(f_up, u1)
        if n > k:  # U̇2 = L1⁻¹ Ȧ12 - tril₋₁(F) U2
            du2 = sl.solve_triangular(l1, ta[..., :, k:], lower=True, unit_diagonal=True)
            dlu = np.concatenate([dlu, du2 - np.matmul(f_low, up[..., :, k:])], axis=-1)
        if m > k:  # L̇2 = Ȧ21 U1⁻¹ - L2 triu(F)
            a21 = _mT(sl.solve_triangular(u1, _mT(ta[..., k:, :]), trans=1, lower=False))
            dlu = np.concatenate([dlu, a21 - np.matmul(low[..., k:, :], f_up)], axis=-2)
        return (lu, piv), (dlu, ZeroTangent())

    _lu_factor_frule.lazy = False  # type: ignore[attr-defined]

    def _frechet_block(a: Any, e: Any, f: Any = None) -> Any:
        """The Fréchet derivative of expm (or the primary matrix function ``f``) at ``a`` along
        ``e``: the upper-right block of ``expm([[a, e], [0, a]])`` (differentiable again, being
        an expm)."""
        n = np.shape(a)[-1]
        z = np.zeros_like(a) if not np.iscomplexobj(e) else np.zeros(np.shape(a), complex)
        big = np.concatenate(
            [np.concatenate([a, e], axis=-1), np.concatenate([z, a], axis=-1)], axis=-2
        )
        if f is None:
            return sl.expm(big)[..., :n, n:]
        with warnings.catch_warnings():
            # SciPy's accuracy estimate for logm is loose on these blocks (3e-13 against 2e-13)
            warnings.filterwarnings("ignore", "logm result may be inaccurate", RuntimeWarning)
            return f(big)[..., :n, n:]

    @register_rrule(sl.expm)
    def _expm(a):
        """expm: ā = L(Aᵀ, ȳ) (the Fréchet derivative at Aᵀ; no conjugate for complex A)."""
        y = sl.expm(a)

        def pullback(dy):
            return (project(_frechet_block(_mT(a), dy), a),)

        return y, pullback

    @register_frule(sl.expm)
    def _expm_frule(tangents, a):
        """expm: ẏ = L(A, Ȧ)."""
        (t,) = tangents
        y = sl.expm(a)
        if _zero(t):
            return y, ZeroTangent()
        return y, _frechet_block(a, unthunk(t))

    _expm_frule.lazy = False  # type: ignore[attr-defined]

    def _sylvester(m: Any, c: Any) -> Any:
        """X with ``m X + X m = c`` (``m`` square n×n, or a stack of them), via the n²×n²
        Kronecker system."""
        n = np.shape(m)[-1]
        batch = np.broadcast_shapes(np.shape(m)[:-2], np.shape(c)[:-2])
        eye = np.eye(n)
        k = np.einsum("...ik,jl->...ijkl", m, eye) + np.einsum("ik,...lj->...ijkl", eye, m)
        k = np.broadcast_to(k, batch + (n,) * 4) if np.shape(k)[:-4] != batch else k
        rhs = np.reshape(np.broadcast_to(c, batch + (n, n)), batch + (n * n, 1))
        sol = np.linalg.solve(np.reshape(k, batch + (n * n, n * n)), rhs)
        return np.reshape(sol, batch + (n, n))

    @register_rrule(sl.sqrtm)
    def _sqrtm(a, *args, **kwargs):
        """sqrtm: Y² = A, so Y Ẏ + Ẏ Y = Ȧ and ā solves Yᵀ ā + ā Yᵀ = ȳ."""
        y = sl.sqrtm(a, *args, **kwargs)

        def pullback(dy):
            return (project(_sylvester(_mT(y), dy), a), *(ZeroTangent() for _ in args))

        return y, pullback

    @register_frule(sl.sqrtm)
    def _sqrtm_frule(tangents, a, *args, **kwargs):
        """sqrtm: Ẏ solves Y Ẏ + Ẏ Y = Ȧ."""
        y = sl.sqrtm(a, *args, **kwargs)
        t = tangents[0]
        if _zero(t):
            return y, ZeroTangent()
        return y, _sylvester(y, unthunk(t))

    _sqrtm_frule.lazy = False  # type: ignore[attr-defined]

    @register_rrule(sl.solve_sylvester)
    def _solve_sylvester(a, b, q):
        """A X + X B = Q: Q̄ solves Aᵀ Q̄ + Q̄ Bᵀ = X̄, Ā = -Q̄ Xᵀ, B̄ = -Xᵀ Q̄."""
        x = sl.solve_sylvester(a, b, q)

        def pullback(dx):
            gq = sl.solve_sylvester(_mT(a), _mT(b), dx)
            ga = -np.matmul(gq, _mT(x))
            gb = -np.matmul(_mT(x), gq)
            return tuple(
                project(unbroadcast_to(g, np.shape(v)), v) for g, v in ((ga, a), (gb, b), (gq, q))
            )

        return x, pullback

    @register_frule(sl.solve_sylvester)
    def _solve_sylvester_frule(tangents, a, b, q):
        """Ẋ solves A Ẋ + Ẋ B = Q̇ - Ȧ X - X Ḃ."""
        x = sl.solve_sylvester(a, b, q)
        ta, tb, tq = tangents
        if _zero(ta) and _zero(tb) and _zero(tq):
            return x, ZeroTangent()
        rhs: Any = np.zeros(np.shape(x), np.result_type(x))
        if not _zero(tq):
            rhs = rhs + unthunk(tq)
        if not _zero(ta):
            rhs = rhs - np.matmul(unthunk(ta), x)
        if not _zero(tb):
            rhs = rhs - np.matmul(x, unthunk(tb))
        return x, sl.solve_sylvester(a, b, rhs)

    _solve_sylvester_frule.lazy = False  # type: ignore[attr-defined]

    def _function_block(f: Any, a: Any, e: Any, y: Any) -> Any:
        """The Fréchet derivative at ``a`` along ``e`` of the primary matrix function ``f``
        (``y = f(a)``): the upper-right block of ``f([[a, e], [0, a]])``."""
        if np.iscomplexobj(e) and not np.iscomplexobj(a):
            # Linear in e: a real block keeps a real matrix's eigenvalues on the negative axis,
            # where a complex one would put them either side of logm's branch cut
            re, im = _frechet_block(a, np.real(e), f), _frechet_block(a, np.imag(e), f)
            return re + 1j * im
        block = _frechet_block(a, e, f)
        return np.real(block) if np.iscomplexobj(block) and not np.iscomplexobj(y) else block

    def _primary(f: Any) -> tuple[Any, Any]:
        """Rules for ``f(a, *constants)``, a primary matrix function: ẏ = L_f(A, Ȧ), and
        ā = L_f(Aᵀ, ȳ) (f(Aᵀ) = f(A)ᵀ, so the map's transpose is the derivative at Aᵀ)."""

        def rule(a, *args):
            y = f(a, *args)

            def pullback(dy):
                g = _function_block(lambda m: f(m, *args), _mT(a), dy, y)
                return (project(g, a), *(ZeroTangent() for _ in args))

            return y, pullback

        def forward(tangents, a, *args):
            y = f(a, *args)
            t = tangents[0]
            if _zero(t):
                return y, ZeroTangent()
            return y, _function_block(lambda m: f(m, *args), a, unthunk(t), y)

        forward.lazy = False  # type: ignore[attr-defined]
        register_rrule(f)(rule)
        register_frule(f)(forward)
        return rule, forward

    _logm, _logm_frule = _primary(sl.logm)
    _fmp, _fmp_frule = _primary(sl.fractional_matrix_power)

    _RULES = {
        sl.solve_triangular: (_solve_triangular, _solve_triangular_frule),
        sl.lu_factor: (_lu_factor, _lu_factor_frule),
        sl.expm: (_expm, _expm_frule),
        sl.sqrtm: (_sqrtm, _sqrtm_frule),
        sl.solve_sylvester: (_solve_sylvester, _solve_sylvester_frule),
        sl.logm: (_logm, _logm_frule),
        sl.fractional_matrix_power: (_fmp, _fmp_frule),
    }


def ensure_registered() -> None:
    """Register these rules again if the tables lost them (a test restoring saved tables after
    this module was first imported), on SciPy's functions and on fusegrad's wrappers of them."""
    if sl is None:  # pragma: no cover - depends on the environment
        return
    for f, (rule, forward) in _RULES.items():
        if f not in RRULES:
            register_rrule(f)(rule)
        if f not in FRULES:
            register_frule(f)(forward)
        wrapper = getattr(sl, f.__name__, f)
        if wrapper is not f:
            RRULES.setdefault(wrapper, RRULES[f])
            FRULES.setdefault(wrapper, FRULES[f])

"""Branch-free exp, expm1, log, log1p and tanh that LLVM vectorises inside numba loops.

numba lowers ``math.exp`` and friends to scalar libm calls (PyPI's llvmlite ships no vector
math library), so a loop that calls them runs one element at a time. These functions use only
arithmetic, ``llvm.fma``, integer bit tricks and selects, so once inlined into a loop LLVM turns
them into AVX2/AVX-512 code. Every special case (NaN, +-inf, overflow, subnormal results and
inputs, signed zero) is computed by selects after the main path, never by a branch.

Method (float64; all errors measured in ``tests/test_numba_math.py``):

* ``exp``, ``expm1``: ``x = k ln2 + r`` with ``|r| <= ln2/2``; ``k`` by the round-to-nearest
  shift trick, ``r`` as a double-double from a 42-bit ``ln2_hi`` (so ``k ln2_hi`` and
  ``x - k ln2_hi`` are exact) plus ``ln2_lo``. ``e^r - 1 = r + r^2/2 + r^3 P(r)`` with ``P``
  of degree 9. ``exp`` scales by ``2^k`` with two exponent-field multiplies (one rounding, so
  subnormal results come out right, overflow gives inf). ``expm1 = 4 (2^(k-2) - 1/4 + 2^(k-2)
  (e^r - 1))``, the first sum error-free (Fast2Sum): no cancellation loss for any ``k``.
* ``log``, ``log1p``: ``x = 2^k m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` (exponent split by
  integer subtraction, subnormals pre-scaled by ``2^52``), ``f = m - 1``, ``s = f / (2 + f)``,
  ``log(1 + f) = f - f^2/2 + s (f^2/2 + z T(z))`` with ``z = s^2`` and ``T`` of degree 6 (the
  arrangement described in the comments of fdlibm's ``e_log.c``, Sun 1993). ``log1p`` adds
  the rounding error of ``1 + x`` (TwoSum) as ``c / (1 + x)``.
* ``tanh``: ``tanh |x| = E / (E + 2)`` with ``E = expm1(2|x|)`` kept as a double-double and a
  double-double quotient, so there is no error spike near ``tanh = 1/2``; ``|x| < 2^-28``
  returns ``x``, ``|x| > 22`` gives ``+-1``.

``P`` and ``T`` are near-minimax: least-squares Chebyshev fits on 4000 Chebyshev nodes of
``[-0.3535, 0.3535]`` (``P(r) = sum_{n>=3} r^(n-3)/n!``) and ``[0, 0.02944]`` (``T(z) =
sum_{n>=1} 2 z^(n-1)/(2n+1)``), targets summed in ``np.longdouble``; max fit errors 4.6e-17
and 4.4e-16, i.e. at most ~0.03 ulp of the result. ``ln2`` was split with ``decimal``.

float32: ``exp_f32`` etc. compute in float64 and round once, which is within 0.5 ulp + 2^-29
ulp of the exact float32 result (NumPy's own float32 exp/log are up to ~2.7 ulp off).

All functions are ``@njit(cache=True, error_model="numpy", forceinline=True)``: numba compiles
each once and marks it LLVM ``alwaysinline``, so it lands in the caller's loop even where
LLVM's inliner would decline (numba's ``inline="always"`` gives the same machine code but
re-types the body at every call site: ~2x the kernel compile time). No ``fastmath`` needed, or
wanted: it would break the error-free transformations. Kernels import the module and call
``vm.exp(v)``; their numba cache does not notice when this file changes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["exp", "expm1", "log", "log1p", "tanh", "exp_f32", "expm1_f32", "log_f32"]
__all__ += ["log1p_f32", "tanh_f32"]


@intrinsic
def _as_i64(typingctx, x):
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _as_f64(typingctx, n):
    if n != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _fma(typingctx, a, b, c):
    # llvm.fma is exact a*b+c: numba has no math.fma, and without fastmath LLVM never fuses.
    if not (a == b == c == types.float64):
        return None

    def codegen(context, builder, sig, args):
        return builder.fma(*args)

    return types.float64(types.float64, types.float64, types.float64), codegen


_JIT = {"cache": True, "error_model": "numpy", "forceinline": True}

_INF = float("inf")
_NAN = float("nan")
_LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")  # 42 bits: k * _LN2_HI is exact for |k| < 2^11
_LN2_LO = float.fromhex("0x1.ef35793c76730p-45")
_INVLN2 = 1.4426950408889634
_SHIFT = 6755399441055744.0  # 1.5 * 2^52: x + _SHIFT - _SHIFT rounds x to an integer
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
_TWO52 = 4503599627370496.0
_MIN_NORMAL = 2.2250738585072014e-308

# e^r - 1 - r - r^2/2 = r^3 (_P0 + _P1 r + ... + _P9 r^9) on |r| <= 0.3535
_P0 = 0.16666666666666666
_P1 = 0.04166666666666667
_P2 = 0.00833333333332961
_P3 = 0.0013888888888953347
_P4 = 0.00019841269864465607
_P5 = 2.4801587063887563e-05
_P6 = 2.7557266782336813e-06
_P7 = 2.755759140569956e-07
_P8 = 2.5101072502640135e-08
_P9 = 2.0792685113977365e-09

# 2 atanh(s) / s - 2 = z (_T0 + _T1 z + ... + _T6 z^6), z = s^2 <= 0.02944
_T0 = 0.6666666666666669
_T1 = 0.3999999999989898
_T2 = 0.28571428626182177
_T3 = 0.22222211107135248
_T4 = 0.18182890872044377
_T5 = 0.1533166924725248
_T6 = 0.14617047932881452


@njit(**_JIT)
def _pow2(k):
    """2.0**k for integer -1022 <= k <= 1023."""
    return _as_f64((k + 1023) << 52)


@njit(**_JIT)
def _reduce(x):
    """k, r, t with e^x ~ 2^k (1 + r + t), |r| <= ln2/2, |t| ~< r^2; needs |x| < 2^50."""
    kd = (x * _INVLN2 + _SHIFT) - _SHIFT
    hi = x - kd * _LN2_HI
    r = hi - kd * _LN2_LO
    rlo = (hi - r) - kd * _LN2_LO
    p = _fma(_fma(_fma(_fma(_P9, r, _P8), r, _P7), r, _P6), r, _P5)
    p = _fma(_fma(_fma(_fma(_fma(p, r, _P4), r, _P3), r, _P2), r, _P1), r, _P0)
    r2 = r * r
    q = 0.5 * r2 + _fma(r2 * r, p, 0.5 * _fma(r, r, -r2))  # r^2 exactly, as r2 + fma(..)
    # e^(r + rlo) - 1 ~ (r + q(r)) + rlo (1 + r)
    return np.int64(kd), r, _fma(rlo, r, rlo) + q


@njit(**_JIT)
def exp(x):
    """e**x for float64 (other floats are converted to float64).

    >>> exp(1.0)
    2.718281828459045
    """
    x = np.float64(x)
    xc = x if x < 710.0 else 710.0  # NaN goes to 710.0 too; replaced at the end
    xc = xc if xc > -746.0 else -746.0
    k, r, t = _reduce(xc)
    s = 1.0 + r
    v = s + (((1.0 - s) + r) + t)
    # two multiplies so the one rounding happens on the final, maybe subnormal, value
    k1 = k >> 1
    y = v * _pow2(k1) * _pow2(k - k1)
    return y if x == x else x + x


@njit(**_JIT)
def _expm1_dd(x):
    """(hi, lo) with hi + lo ~ e^x - 1 to ~2^-60 relative, for 2^-54 < |x|, -40 <= x <= 710;
    hi may be inf above log(DBL_MAX)."""
    k, r, t = _reduce(x)
    h = _pow2(k - 2)
    a = h - 0.25
    b = h * r
    s = a + b
    e = (a - s) + b  # exact: |a| >= |b| for k != 0, and a == 0 for k == 0
    w = e + (h * t + (-0.25 - (a - h)))  # the last term: a's rounding error, for k > 53
    hi = s + w
    return 4.0 * hi, 4.0 * ((s - hi) + w)


@njit(**_JIT)
def expm1(x):
    """e**x - 1, accurate for small x too.

    >>> expm1(1e-10)
    1.00000000005e-10
    """
    x = np.float64(x)
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -40.0 else -40.0  # e^-40 - 1 rounds to -1
    hi, lo = _expm1_dd(xc)
    y = hi + lo
    y = y if abs(x) > 5.551115123125783e-17 else x  # |x| <= 2^-54: x, keeps -0.0
    return y if x == x else x + x


@njit(**_JIT)
def tanh(x):
    """Hyperbolic tangent.

    >>> tanh(0.5)
    0.46211715726000974
    """
    x = np.float64(x)
    ax = abs(x)
    ac = ax if ax < 22.0 else 22.0  # tanh(22) rounds to 1
    eh, el = _expm1_dd(2.0 * ac)
    # E / (E + 2) in double-double: TwoSum for the denominator, exact residual by fma
    dh = eh + 2.0
    bv = dh - eh
    dl = ((eh - (dh - bv)) + (2.0 - bv)) + el
    q = eh / dh
    rem = _fma(-q, dh, eh) + (el - q * dl)
    y = np.float64(np.copysign(q + rem / dh, x))
    y = y if ax > 3.725290298461914e-09 else x  # |x| <= 2^-28: tanh x rounds to x
    return y if x == x else x + x


@njit(**_JIT)
def _log_parts(u):
    """k, f with u = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), for finite u >= 2^-1022."""
    ix = _as_i64(u)
    k = (ix - _SQRT_HALF_BITS) >> 52
    return k, _as_f64(ix - (k << 52)) - 1.0


@njit(**_JIT)
def _log_finish(kd, f, c):
    """k ln2 + log(1 + f) + c, for a small correction c."""
    s = f / (2.0 + f)
    z = s * s
    tz = _fma(_fma(_fma(_fma(_fma(_fma(_T6, z, _T5), z, _T4), z, _T3), z, _T2), z, _T1), z, _T0)
    hfsq = 0.5 * f * f
    return kd * _LN2_HI - ((hfsq - (s * _fma(z, tz, hfsq) + _fma(kd, _LN2_LO, c))) - f)


@njit(**_JIT)
def log(x):
    """Natural logarithm; log(0) = -inf, log(x < 0) = nan.

    >>> log(2.0)
    0.6931471805599453
    """
    x = np.float64(x)
    sub = x < _MIN_NORMAL
    k, f = _log_parts(x * _TWO52 if sub else x)
    kd = np.float64(k) - (52.0 if sub else 0.0)
    y = _log_finish(kd, f, 0.0)
    y = y if x > 0.0 else (-_INF if x == 0.0 else _NAN)
    return y if x < _INF else x + x


@njit(**_JIT)
def log1p(x):
    """log(1 + x), accurate for small x too.

    >>> log1p(1e-10)
    9.999999999500001e-11
    """
    x = np.float64(x)
    u = 1.0 + x
    bv = u - 1.0
    c = (1.0 - (u - bv)) + (x - bv)  # u + c == 1 + x exactly (TwoSum)
    uc = u if u > 0.0 else 1.0  # x <= -1 and NaN: keep the main path finite
    k, f = _log_parts(uc)
    y = _log_finish(np.float64(k), f, c / uc)
    y = y if abs(x) > 5.551115123125783e-17 else x  # |x| <= 2^-54: x, keeps -0.0
    y = y if x > -1.0 else (-_INF if x == -1.0 else _NAN)
    return y if x < _INF else x + x


@njit(**_JIT)
def exp_f32(x):
    """float32 e**x, rounded once from the float64 result.

    >>> np.float32(exp_f32(np.float32(1.0)))  # numba returns float32 to Python as a float
    np.float32(2.7182817)
    """
    return np.float32(exp(np.float64(x)))


@njit(**_JIT)
def expm1_f32(x):
    """float32 e**x - 1 via float64."""
    return np.float32(expm1(np.float64(x)))


@njit(**_JIT)
def log_f32(x):
    """float32 log via float64."""
    return np.float32(log(np.float64(x)))


@njit(**_JIT)
def log1p_f32(x):
    """float32 log1p via float64."""
    return np.float32(log1p(np.float64(x)))


@njit(**_JIT)
def tanh_f32(x):
    """float32 tanh via float64."""
    return np.float32(tanh(np.float64(x)))

"""Branch-free exp, expm1, log, log1p and tanh (and logaddexp, power, built on them) that LLVM
vectorises inside numba loops.

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

float32 (``exp_f32`` etc.) runs the same methods in float32 lanes (float32 arithmetic,
``llvm.fma.f32``, int32 bit tricks), so AVX-512 does 16 elements per instruction; measured over
all 2^32 inputs each is within 1 ulp of the correctly rounded result (NumPy's own float32 log
is up to 3.55 ulp off, its exp and expm1 up to ~2.5):

* ``exp_f32``, ``expm1_f32``: as above with a float32 ``ln2_hi`` (``x - k ln2_hi`` is exact
  by fma for ``|k| <= 150``) and ``P`` of degree 4 on ``|r| <= 0.3466``.
* ``log_f32``, ``log1p_f32``: no division: ``log(1 + f) = f - f^2/2 + f^3 L(f)`` with ``L``
  of degree 9 on ``[sqrt(1/2) - 1, sqrt(2) - 1]``, ``f^2`` made exact by fma, and ``k ln2``
  added by Fast2Sum with a 16-bit ``ln2_hi``. ``log1p_f32`` takes ``f = x`` when ``1 + x``
  is in that range; elsewhere it adds ``c / (1 + x)`` for the rounding error ``c`` of ``1 + x``,
  with ``1 / (1 + f)`` as ``1 - f + f^2 - f^3``.
* ``tanh_f32``: ``x + x^3 H(x^2)`` with ``H`` of degree 5 for ``|x| < 0.6``; above,
  ``1 - 2 / (e^(2|x|) + 1)`` with ``e^(2|x|)`` and the denominator as float32 pairs and one
  Newton step on the quotient; ``|x| > 9.5`` gives ``+-1``.

Their polynomials are fitted the same way (least squares on 4000 Chebyshev nodes, targets in
``np.longdouble``), rounding the coefficients to float32 one at a time from the lowest and
refitting the rest after each, so the later ones absorb the earlier roundings: fit errors
2^-31 (exp), 2^-30 (log, relative to ``log(1 + f)``) and 2^-30 (tanh, relative).

The loops that call them are bound by the latency of one element's chain of operations more
than by their count, so polynomials use Estrin's scheme (a chain of 3-4 fmas, not Horner's 6-10).
There is no float64 <-> int64 conversion: AVX2 has no vector instruction for it (LLVM made it one
scalar conversion per lane), so ``k`` is read from the bits of
``x / ln2 + 1.5 * 2^52`` and ``float(k)`` is ``bits(1.5 * 2^52) + k`` read as a float minus
``1.5 * 2^52``; tanh divides once (the reciprocal, corrected by its double-double residual).
Time per element on AVX2 (Zen 3) against Horner, the conversions and two divisions: exp -26%,
expm1 -33%, tanh -26%; log and log1p unchanged (their division dominates).

All functions are ``@njit(cache=True, error_model="numpy", forceinline=True)``: numba compiles
each once and marks it LLVM ``alwaysinline``, so it lands in the caller's loop even where
LLVM's inliner would decline (numba's ``inline="always"`` gives the same machine code but
re-types the body at every call site: ~2x the kernel compile time). No ``fastmath`` needed, or
wanted: it would break the error-free transformations. Kernels import the module and call
``vm.exp(v)``; their numba cache does not notice when this file changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import binding as llvm  # type: ignore[import-untyped]  # llvmlite ships no type information
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# LLVM's loop vectoriser leaves a loop scalar when proving at run time that its arrays do not
# overlap takes more than 128 checks (about one per pair of an output and another array): an
# LSTM cell's backward kernel, 16 values written a point from 12 inputs (8x24), took 10.6 us
# scalar, 5.2 vectorised. Raised for every loop numba compiles in this process (an LLVM option
# is global) when this module is imported, before any kernel compiles (numba_engine.available);
# the checks run once per row, and a row shorter than a vector skips them.
MEMORY_CHECKS = 512
llvm.set_option("fusegrad", f"-vectorize-memory-check-threshold={MEMORY_CHECKS}")

__all__ = ["exp", "expm1", "log", "log1p", "tanh", "exp_f32", "expm1_f32", "log_f32"]
__all__ += ["log1p_f32", "tanh_f32", "power", "power_f32", "logaddexp"]


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
    if not (a == b == c and a in (types.float64, types.float32)):
        return None

    def codegen(context, builder, sig, args):
        return builder.fma(*args)

    return a(a, a, a), codegen


@intrinsic
def _copysign_f32(typingctx, x, y):
    if not (x == y == types.float32):
        return None

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fnty = ir.FunctionType(f32, [f32, f32])
        fn = builder.module.declare_intrinsic("llvm.copysign", [f32], fnty)
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32), codegen


@intrinsic
def _as_i32(typingctx, x):
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _as_f32(typingctx, n):
    if n != types.int32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


def _int32_op(name, build):
    # numba widens int32 arithmetic to int64, which would halve the vector width of the float32
    # loops; these stay in 32-bit lanes (operands of other integer types are truncated).
    def op(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            a32, b32 = (context.cast(builder, v, t, types.int32) for v, t in zip(args, sig.args))
            return build(builder, a32, b32)

        return types.int32(a, b), codegen

    op.__name__ = op.__qualname__ = name
    return intrinsic(op)


_iadd = _int32_op("_iadd", lambda b, x, y: b.add(x, y))
_isub = _int32_op("_isub", lambda b, x, y: b.sub(x, y))
_ishl = _int32_op("_ishl", lambda b, x, y: b.shl(x, y))
_isra = _int32_op("_isra", lambda b, x, y: b.ashr(x, y))


_JIT: dict[str, Any] = {"cache": True, "error_model": "numpy", "forceinline": True}

_INF = float("inf")
_NAN = float("nan")
_LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")  # 42 bits: k * _LN2_HI is exact for |k| < 2^11
_LN2_LO = float.fromhex("0x1.ef35793c76730p-45")
_INVLN2 = 1.4426950408889634
_SHIFT = 6755399441055744.0  # 1.5 * 2^52: x + _SHIFT - _SHIFT rounds x to an integer
_SHIFT_BITS = 0x4338000000000000  # its bits: those of x + _SHIFT are _SHIFT_BITS + round(x)
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
    big = x * _INVLN2 + _SHIFT  # k sits in the low mantissa bits
    kd = big - _SHIFT
    hi = x - kd * _LN2_HI
    r = hi - kd * _LN2_LO
    rlo = (hi - r) - kd * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    # Estrin's scheme: a dependency chain of 4 fmas, not Horner's 10 (the loops that call exp
    # are latency-bound: a shorter chain keeps more iterations in flight)
    p01 = _fma(_P1, r, _P0)
    p23 = _fma(_P3, r, _P2)
    p45 = _fma(_P5, r, _P4)
    p67 = _fma(_P7, r, _P6)
    p89 = _fma(_P9, r, _P8)
    p = _fma(_fma(p67, r2, p45), r4, _fma(p23, r2, p01))
    p = _fma(p89, r4 * r4, p)
    q = 0.5 * r2 + _fma(r2 * r, p, 0.5 * _fma(r, r, -r2))  # r^2 exactly, as r2 + fma(..)
    # e^(r + rlo) - 1 ~ (r + q(r)) + rlo (1 + r)
    # k from big's bits, not np.int64(kd): AVX2 has no vector float64 -> int64 conversion, and
    # LLVM made it four scalar ones per vector of the loop
    return _as_i64(big) - _SHIFT_BITS, r, _fma(rlo, r, rlo) + q


@njit(**_JIT)
def exp(x):
    """e**x for float64 (other floats are converted to float64).

    >>> exp(1.0)
    2.718281828459045
    """
    x = np.float64(x)
    # min/max: one instruction each (two chained selects became five); NaN is replaced at the end
    xc = min(max(x, -746.0), 710.0)
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
    xc = min(max(x, -40.0), 710.0)  # e^-40 - 1 rounds to -1; NaN is replaced at the end
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
    # one division: q from the reciprocal is within ~2 ulp, and the double-double residual
    # corrects it as it corrected eh / dh (a second division cost 6% of tanh's time)
    rd = 1.0 / dh
    q = eh * rd
    rem = _fma(-q, dh, eh) + (el - q * dl)
    y = np.float64(np.copysign(q + rem * rd, x))
    y = y if ax > 3.725290298461914e-09 else x  # |x| <= 2^-28: tanh x rounds to x
    return y if x == x else x + x


@njit(**_JIT)
def _i2f(k):
    """float64(k) for |k| < 2^51: by bits, as AVX2 has no vector int64 -> float64 conversion."""
    return _as_f64(k + _SHIFT_BITS) - _SHIFT


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
    z2 = z * z
    t4 = _fma(_fma(_T6, z, _T5), z, _T4)  # Estrin's scheme, as in _reduce
    tz = _fma(_fma(t4, z2, _fma(_T3, z, _T2)), z2, _fma(_T1, z, _T0))
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
    kd = _i2f(k) - (52.0 if sub else 0.0)
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
    y = _log_finish(_i2f(k), f, c / uc)
    y = y if abs(x) > 5.551115123125783e-17 else x  # |x| <= 2^-54: x, keeps -0.0
    y = y if x > -1.0 else (-_INF if x == -1.0 else _NAN)
    return y if x < _INF else x + x


@njit(**_JIT)
def logaddexp(x, y):
    """log(e^x + e^y) as NumPy's npy_logaddexp computes it (``x + log1p(exp(-|x - y|))`` from
    the larger, ``x + ln 2`` where ``x == y``, so equal infinities stay infinite), both sides
    computed and selected so that a loop vectorises.

    >>> logaddexp(0.0, 0.0)
    0.6931471805599453
    """
    t = x - y
    r = (x if t > 0 else y) + log1p(exp(-abs(t)))
    r = x + 0.6931471805599453 if x == y else r
    return r if (t == t or x == y) else t


# ---- float32: the same methods in float32 lanes (int32 bit tricks, llvm.fma.f32) ----

_F4 = np.float32
_I4 = np.int32
_INF_F = _F4(_INF)
_NAN_F = _F4(_NAN)
_INVLN2_F = _F4(1.4426950408889634)
_SHIFT_F = _F4(12582912.0)  # 1.5 * 2^23
_SHIFT_F_BITS = _I4(0x4B400000)
_LN2_HI_F = _F4(0.6931471824645996)  # float32(ln2): x - k ln2_hi is exact by fma for |k| <= 150
_LN2_LO_F = _F4(-1.9046542121259336e-09)
_LN2_HI_L = _F4(0.693145751953125)  # 16 bits: k * _LN2_HI_L is exact for |k| < 256
_LN2_LO_L = _F4(1.428606765330187e-06)
_SQRT_HALF_BITS_F = _I4(0x3F3504F3)
_TWO23_F = _F4(8388608.0)
_MIN_NORMAL_F = _F4(1.1754943508222875e-38)
_HALF_F = _F4(0.5)
_ONE_F = _F4(1.0)
_TWO_F = _F4(2.0)
_QUARTER_F = _F4(0.25)
_K_MAX = _I4(126)

# e^r - 1 - r - r^2/2 = r^3 (_E0 + _E1 r + ... + _E4 r^4) on |r| <= 0.3466
_E0 = _F4(0.1666666716337204)
_E1 = _F4(0.041666556149721146)
_E2 = _F4(0.008333150297403336)
_E3 = _F4(0.0013926030369475484)
_E4 = _F4(0.00019998018979094923)

# log(1 + f) - f + f^2/2 = f^3 (_L0 + _L1 f + ... + _L9 f^9) on -0.2929 <= f <= 0.4142
_L0 = _F4(0.3333333432674408)
_L1 = _F4(-0.24999989569187164)
_L2 = _F4(0.19999857246875763)
_L3 = _F4(-0.16667984426021576)
_L4 = _F4(0.1429251879453659)
_L5 = _F4(-0.12455212324857712)
_L6 = _F4(0.10949910432100296)
_L7 = _F4(-0.10534430295228958)
_L8 = _F4(0.10965865105390549)
_L9 = _F4(-0.06940751522779465)

# tanh(x) - x = x^3 (_H0 + _H1 z + ... + _H5 z^5), z = x^2 <= 0.36
_H0 = _F4(-0.3333333432674408)
_H1 = _F4(0.1333337426185608)
_H2 = _F4(-0.053971149027347565)
_H3 = _F4(0.021849457174539566)
_H4 = _F4(-0.008580297231674194)
_H5 = _F4(0.0025430270470678806)


@njit(**_JIT)
def _pow2_f32(k):
    """float32 2.0**k for integer -126 <= k <= 127."""
    return _as_f32(_ishl(_iadd(k, 127), 23))


@njit(**_JIT)
def _reduce_f32(x):
    """k, r, t with e^x ~ 2^k (1 + r + t), |r| <= ln2/2, |t| ~< r^2; float32 |x| <= 104."""
    big = _fma(x, _INVLN2_F, _SHIFT_F)  # k sits in the low mantissa bits
    kd = big - _SHIFT_F
    hi = _fma(-kd, _LN2_HI_F, x)
    r = _fma(-kd, _LN2_LO_F, hi)
    rlo = _fma(-kd, _LN2_LO_F, hi - r)
    p = _fma(_fma(_fma(_fma(_E4, r, _E3), r, _E2), r, _E1), r, _E0)
    r2 = r * r
    q = _HALF_F * r2 + _fma(r2 * r, p, _HALF_F * _fma(r, r, -r2))
    return _isub(_as_i32(big), _SHIFT_F_BITS), r, _fma(rlo, r, rlo) + q


@njit(**_JIT)
def exp_f32(x):
    """float32 e**x, computed in float32.

    >>> np.float32(exp_f32(np.float32(1.0)))  # numba returns float32 to Python as a float
    np.float32(2.7182817)
    """
    x = _F4(x)
    xc = x if x < _F4(89.0) else _F4(89.0)  # NaN goes to 89 too; replaced at the end
    xc = xc if xc > _F4(-104.0) else _F4(-104.0)
    k, r, t = _reduce_f32(xc)
    s = _ONE_F + r
    v = s + (((_ONE_F - s) + r) + t)
    k1 = _isra(k, 1)
    y = v * _pow2_f32(k1) * _pow2_f32(_isub(k, k1))
    return y if x == x else x + x


@njit(**_JIT)
def expm1_f32(x):
    """float32 e**x - 1, computed in float32, accurate for small x too.

    >>> np.float32(expm1_f32(np.float32(1e-5)))
    np.float32(1.000005e-05)
    """
    x = _F4(x)
    xc = x if x < _F4(89.0) else _F4(89.0)
    xc = xc if xc > _F4(-18.0) else _F4(-18.0)  # e^-18 - 1 rounds to -1
    k, r, t = _reduce_f32(xc)
    h = _pow2_f32(_isub(k, 2))
    a = h - _QUARTER_F
    b = h * r
    s = a + b
    e = (a - s) + b  # exact (Fast2Sum): |a| >= |b| for k != 0, a == 0 for k == 0
    w = e + (h * t + (-_QUARTER_F - (a - h)))  # the last term: a's rounding error, for k > 25
    y = _F4(4.0) * (s + w)
    y = y if abs(x) > _F4(2.9802322387695312e-08) else x  # |x| <= 2^-25: x, keeps -0.0
    return y if x == x else x + x


@njit(**_JIT)
def tanh_f32(x):
    """float32 tanh, computed in float32.

    >>> np.float32(tanh_f32(np.float32(0.5)))
    np.float32(0.46211717)
    """
    x = _F4(x)
    ax = abs(x)
    z = ax * ax
    p = _fma(_fma(_fma(_fma(_fma(_H5, z, _H4), z, _H3), z, _H2), z, _H1), z, _H0)
    small = _fma(ax * z, p, ax)
    # |x| >= 0.6: 1 - 2 / (e^2|x| + 1), e^2|x| and the denominator kept as float32 pairs
    ac = ax if ax < _F4(9.5) else _F4(9.5)  # tanh(9.5) rounds to 1
    k, r, t = _reduce_f32(ac + ac)
    s = _ONE_F + r
    w = ((_ONE_F - s) + r) + t
    vh = s + w
    scale = _pow2_f32(k)
    eh = vh * scale
    el = ((s - vh) + w) * scale
    dh = eh + _ONE_F
    dl = ((eh - dh) + _ONE_F) + el
    q = _TWO_F / dh
    q = q + (_fma(-q, dh, _TWO_F) - q * dl) * (_HALF_F * q)  # 2 / (dh + dl), one Newton step
    y = small if ax < _F4(0.6) else _ONE_F - q
    y = _copysign_f32(y, x)
    return y if x == x else x + x


@njit(**_JIT)
def _log_core_f32(kd, f, d):
    """k ln2 + log(1 + f + d) for integral float32 kd, |kd| < 256, f in [sqrt(1/2) - 1,
    sqrt(2) - 1] and a small d."""
    p = _fma(_fma(_fma(_fma(_L9, f, _L8), f, _L7), f, _L6), f, _L5)
    p = _fma(_fma(_fma(_fma(_fma(p, f, _L4), f, _L3), f, _L2), f, _L1), f, _L0)
    f2 = f * f
    # log(1 + f) - f without f2's rounding error; d / (1 + f) to ~f^4
    c = _fma(f2 * f, p, -_HALF_F * _fma(f, f, -f2)) - _HALF_F * f2
    c = c + _fma(kd, _LN2_LO_L, d * _fma(_fma(f - _ONE_F, f, _ONE_F), -f, _ONE_F))
    t = kd * _LN2_HI_L
    s = t + f
    return s + (((t - s) + f) + c)  # Fast2Sum: |t| >= |f| unless t == 0


@njit(**_JIT)
def log_f32(x):
    """float32 natural logarithm, computed in float32; log(0) = -inf, log(x < 0) = nan.

    >>> np.float32(log_f32(np.float32(2.0)))
    np.float32(0.6931472)
    """
    x = _F4(x)
    sub = x < _MIN_NORMAL_F
    ix = _as_i32(x * _TWO23_F if sub else x)
    k = _isra(_isub(ix, _SQRT_HALF_BITS_F), 23)
    f = _as_f32(_isub(ix, _ishl(k, 23))) - _ONE_F
    kd = _F4(k) - (_F4(23.0) if sub else _F4(0.0))
    y = _log_core_f32(kd, f, _F4(0.0))
    y = y if x > _F4(0.0) else (-_INF_F if x == _F4(0.0) else _NAN_F)
    return y if x < _INF_F else x + x


@njit(**_JIT)
def log1p_f32(x):
    """float32 log(1 + x), computed in float32, accurate for small x too.

    >>> np.float32(log1p_f32(np.float32(1e-5)))
    np.float32(9.99995e-06)
    """
    x = _F4(x)
    u = _ONE_F + x
    bv = u - _ONE_F
    c = (_ONE_F - (u - bv)) + (x - bv)  # u + c == 1 + x exactly (TwoSum)
    uc = u if u > _F4(0.0) else _ONE_F  # x <= -1 and NaN: keep the main path finite
    ix = _as_i32(uc)
    k = _isra(_isub(ix, _SQRT_HALF_BITS_F), 23)
    f = _as_f32(_isub(ix, _ishl(k, 23))) - _ONE_F
    d = c * _pow2_f32(_isub(0, k if k < _K_MAX else _K_MAX))  # c / 2^k
    # 1 + x already in [sqrt(1/2), sqrt(2)): f = x exactly, no rounding to correct
    near = (x > _F4(-0.2928932309150696)) & (x < _F4(0.41421353816986084))
    y = _log_core_f32(_F4(0.0) if near else _F4(k), x if near else f, _F4(0.0) if near else d)
    y = y if x != _F4(0.0) else x  # keeps -0.0
    y = y if x > -_ONE_F else (-_INF_F if x == -_ONE_F else _NAN_F)
    return y if x < _INF_F else x + x


# --------------------------------------------------------------------------------------------------
# power: x ** p for the exponents programs write (and their derivatives), without a libm call
# --------------------------------------------------------------------------------------------------
# A float exponent is a libm pow call per element (~20 ns, and the loop stays scalar); x ** 3 in a
# pairwise energy made three quarters of its gradient's time. For p in {2, 3, 4} the power is a
# product of double-doubles (each product's rounding error recovered exactly by fma), rounded once
# at the end: within about half an ulp, like pow. For p in {-2, -3, -4} the base is 1 / x as a
# double-double (one division, its exact residual by fma), so a result that underflows into the
# subnormals comes out as pow's does. p = 1, 0, -1 and 0.5 are x, 1, 1 / x and sqrt(x) (exact or
# correctly rounded, as pow is; sqrt's -0.0 and its NaN at -inf are NumPy's), -0.5 is 1 / sqrt(x)
# (two roundings: within ~1 ulp). Every other p calls pow. The branches test p, the same for a
# whole loop: LLVM takes them out of it. Where the plain product is 0, infinite or NaN it is the
# result, with its sign (the double-double correction would be NaN there).


@njit(**_JIT)
def _dd_square(h, l):
    s = h * h
    return s, _fma(h, h, -s) + (h + h) * l


@njit(**_JIT)
def _dd_times(h, l, b, bl):
    m = h * b
    return m, _fma(h, b, -m) + (l * b + h * bl)


@njit(**_JIT)
def _small_power(x, ap, negative, one, zero):
    """``x ** ap`` (``x ** -ap`` when ``negative``) for ``ap`` in {2, 3, 4}, in ``x``'s type."""
    if negative:
        b = one / x
        bl = b * _fma(-b, x, one)  # b + bl = 1 / x to ~2^-106
        bl = bl if bl == bl else zero  # x = 0 or +-inf: b is inf or 0, exactly
    else:
        b = x
        bl = zero
    h, l = _dd_square(b, bl)
    if ap == 3:
        h, l = _dd_times(h, l, b, bl)
    elif ap == 4:
        h, l = _dd_square(h, l)
    d = h - h
    return h + l if (d == d and l != zero) else h  # (h + 0.0 would turn -0.0 into 0.0)


@njit(**_JIT)
def _power(x, p, one, zero, inf):
    """``x ** p`` in ``x``'s type; ``one``, ``zero`` and ``inf`` are of that type (a float
    literal would promote float32 lanes to float64)."""
    if p == 2.0:
        return x * x
    if p == 1.0:
        return x
    if p == 0.0:
        return one
    if p == -1.0:
        return one / x
    if p == 0.5:
        return np.sqrt(x)  # NumPy's: -0.0 stays -0.0 and -inf is NaN, where C's pow differs
    if p == -0.5:
        return one / abs(np.sqrt(x)) if x != -inf else zero
    ap = abs(p)
    if ap == 2.0 or ap == 3.0 or ap == 4.0:
        return _small_power(x, ap, p < zero, one, zero)
    return x**p


@njit(**_JIT)
def power(x, p):
    """``x ** p`` for float64, as pow computes it (see the section's comment).

    >>> power(1.1, 3.0), power(2.0, -2.0), power(-0.0, -3.0)
    (1.3310000000000004, 0.25, -inf)
    """
    return _power(np.float64(x), np.float64(p), 1.0, 0.0, _INF)


@njit(**_JIT)
def power_f32(x, p):
    """``x ** p`` for float32, computed in float32 as ``power`` is in float64.

    >>> np.float32(power_f32(np.float32(1.1), np.float32(3.0)))
    np.float32(1.3310001)
    """
    return _power(_F4(x), _F4(p), _ONE_F, _F4(0.0), _INF_F)

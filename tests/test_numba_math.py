"""numba_math: ulp errors against NumPy and a long-double reference, special values, and that
a loop calling each function from another module is inlined, vectorised and cached."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from numba import njit  # noqa: E402

from fusegrad.lazy.engines import numba_math as vm  # noqa: E402

NAMES = ["exp", "expm1", "log", "log1p", "tanh"]
# x86 long double has a 64-bit mantissa: enough to measure float64 errors to 1/2048 ulp
EXTENDED = np.finfo(np.longdouble).nmant >= 63


def _loop(f):
    @njit(error_model="numpy")
    def apply(x, out):
        for i in range(x.size):
            out[i] = f(x[i])

    return apply


KERNELS = {n: _loop(getattr(vm, n)) for n in NAMES}
KERNELS_F32 = {n: _loop(getattr(vm, n + "_f32")) for n in NAMES}


def run(name, x):
    out = np.empty_like(x)
    (KERNELS if x.dtype == np.float64 else KERNELS_F32)[name](x, out)
    return out


def numpy_fn(name, x):
    with np.errstate(all="ignore"):
        return getattr(np, name)(x)


def ulp_distance(a, b):
    """Number of floats between a and b (same dtype, finite)."""
    ity = np.int64 if a.dtype == np.float64 else np.int32
    a, b = a.view(ity).astype(np.int64), b.view(ity).astype(np.int64)
    mag = np.int64(np.iinfo(ity).max)
    a = np.where(a < 0, -(a & mag), a)
    b = np.where(b < 0, -(b & mag), b)
    return np.abs(a - b)


def check_against_numpy(name, x, got, max_ulp):
    want = numpy_fn(name, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    assert not np.isinf(got[~inf]).any()
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
    fin = np.isfinite(want)
    worst = ulp_distance(got[fin], want[fin]).max(initial=0)
    assert worst <= max_ulp, (name, worst, x[fin][ulp_distance(got[fin], want[fin]).argmax()])


def ulp_error_vs_longdouble(name, x, got):
    """max |got - f(x)| in ulps of the float64 result, f evaluated in long double."""
    with np.errstate(all="ignore"):
        ref = numpy_fn(name, x.astype(np.longdouble))
        ref64 = ref.astype(np.float64)
    fin = np.isfinite(ref64) & np.isfinite(got)
    err = np.abs(got[fin].astype(np.longdouble) - ref[fin]) / np.spacing(np.abs(ref64[fin]))
    return float(err.max(initial=0))


SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 2.2250738585072014e-308]
    + [1.0, -1.0, 2.0, 0.5, -1 + 2**-53, 2**-28, -(2**-28), 2**-54, 3e-17, 1e-300, 22.0, 19.1]
    + [709.782712893384, 709.7827128933841, 710.0, -708.5, -740.0, -745.1332191019411]
    + [-745.1332191019412, -746.0, 37.5, 40.0, -40.0, 0.5493061443340549, 1e308, -1e308]
)


def sweep(name):
    rng = np.random.default_rng(list(map(ord, name)))
    bits = rng.integers(-(2**63), 2**63 - 1, 2**19, dtype=np.int64).view(np.float64)
    lo, hi = {
        "exp": (-746.0, 710.0),
        "expm1": (-40.0, 710.0),
        "tanh": (-20.0, 20.0),
        "log": (0.25, 4.0),
        "log1p": (-1.0, 4.0),
    }[name]
    tiny = np.geomspace(5e-324, 4.0, 2**17)
    return np.concatenate(
        [SPECIAL, bits, np.linspace(lo, hi, 2**19), np.linspace(-1.5, 1.5, 2**18), tiny, -tiny]
    )


@pytest.mark.parametrize("name", NAMES)
def test_float64_sweep(name):
    x = sweep(name)
    got = run(name, x)
    check_against_numpy(name, x, got, max_ulp=2)  # measured: 1
    if EXTENDED:
        assert ulp_error_vs_longdouble(name, x, got) < 1.0  # measured: 0.69 (tanh) - 0.85 (log)


def test_special_values():
    nan, inf = np.nan, np.inf
    assert vm.exp(-740.0) == np.exp(-740.0) > 0  # subnormal, not flushed
    assert vm.exp(-745.2) == 0.0 and vm.exp(709.8) == inf and vm.exp(-inf) == 0.0
    assert vm.log(0.0) == vm.log(-0.0) == -inf and np.isnan(vm.log(-1.0))
    assert vm.log(5e-324) == np.log(5e-324) and vm.log(inf) == inf and np.isnan(vm.log(-inf))
    assert vm.log1p(-1.0) == -inf and np.isnan(vm.log1p(-2.0)) and vm.log1p(inf) == inf
    assert vm.expm1(-inf) == -1.0 and vm.expm1(inf) == inf and vm.expm1(800.0) == inf
    assert vm.tanh(30.0) == 1.0 and vm.tanh(-inf) == -1.0 and vm.tanh(1e-300) == 1e-300
    for f in (vm.expm1, vm.log1p, vm.tanh):
        assert np.signbit(f(-0.0)) and not np.signbit(f(0.0)) and f(-5e-324) == -5e-324
    for name in NAMES:
        assert np.isnan(getattr(vm, name)(nan))
        assert np.isnan(getattr(vm, name + "_f32")(np.float32(nan)))


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(NAMES), x=st.floats(allow_nan=True, allow_infinity=True))
def test_float64_hypothesis(name, x):
    xs = np.array([x])
    got = np.array([getattr(vm, name)(x)])
    check_against_numpy(name, xs, got, max_ulp=2)
    if EXTENDED:
        assert ulp_error_vs_longdouble(name, xs, got) < 1.0


# max ulp distance from NumPy's own float32 ufuncs, measured over all 2^32 inputs: NumPy's
# float32 log is up to 3.55 ulp off (log(0.7822246)), so even the correctly rounded result is 4
# ulp away there; its exp and expm1 are up to ~2.5 ulp off
NUMPY_F32_ULP = {"exp": 3, "expm1": 3, "log": 4, "log1p": 3, "tanh": 2}


def check_float32(name, x):
    got = run(name, x)
    check_against_numpy(name, x, got, max_ulp=NUMPY_F32_ULP[name])
    with np.errstate(all="ignore"):
        ref = numpy_fn(name, x.astype(np.float64)).astype(np.float32)  # correctly rounded, bar ties
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(got[~fin], ref[~fin])
    num = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(ref[num]))
    d = ulp_distance(got[fin], ref[fin])
    assert d.max(initial=0) <= 1, (name, x[fin][d.argmax()])  # measured over all 2^32: 1


F32_SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754944e-38, -1.1754942e-38]
    + [1.0, -1.0, 2.0, 0.5, 0.99999994, 1.0000001, 2**-24, -(2**-24), 2**-25, -(2**-25), 1e-20]
    + [88.72283, 88.72284, 89.0, -87.33654, -103.27893, -103.97208, -103.972084, -104.0, 1e4]
    + [-17.32868, -18.0, 9.0, 9.01, 9.5, -30.0, 0.6, -0.6, 0.59999996, -0.29289323, 0.4142135]
    + [0.41421357, -0.9999999, -1.0000001, 16777216.0, 3.4028235e38, -3.4028235e38, 0.7822246],
    dtype=np.float32,
)
# where a method switches or a result leaves the normal range: every float32 around them
F32_EDGES = [0.0, 2**-25, 2**-126, 0.6, 1.0, 0.70710677, 1.4142135, -0.29289323, 0.4142135]
F32_EDGES += [0.34657359, 88.72283, -87.33654, -103.27893, -103.97208, -17.32868, 9.01]


def float32_sweep():
    every = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array(F32_EDGES, dtype=np.float32).view(np.int32)[:, None] + np.arange(-2048, 2048)
    edges = edges.astype(np.int32).view(np.float32).ravel()
    dense = np.linspace(-100.0, 100.0, 2**18, dtype=np.float32)
    return np.concatenate([F32_SPECIAL, every, edges, -edges, dense])


@pytest.mark.parametrize("name", NAMES)
def test_float32_sweep(name):
    check_float32(name, float32_sweep())


def test_float32_special_values():
    f4, nan, inf = np.float32, np.nan, np.inf
    assert vm.exp_f32(f4(-100.0)) == np.exp(f4(-100.0)) > 0  # subnormal, not flushed
    assert vm.exp_f32(f4(-104.0)) == 0.0 and vm.exp_f32(f4(88.73)) == inf
    assert vm.exp_f32(f4(-inf)) == 0.0 and vm.exp_f32(f4(inf)) == inf
    assert vm.log_f32(f4(0.0)) == vm.log_f32(f4(-0.0)) == -inf and np.isnan(vm.log_f32(f4(-1)))
    assert vm.log_f32(f4(1e-45)) == np.log(f4(1e-45)) and vm.log_f32(f4(inf)) == inf
    assert np.isnan(vm.log_f32(f4(-inf))) and vm.log_f32(f4(1.0)) == 0.0
    assert vm.log1p_f32(f4(-1.0)) == -inf and np.isnan(vm.log1p_f32(f4(-2.0)))
    assert vm.log1p_f32(f4(inf)) == inf and np.isnan(vm.log1p_f32(f4(-inf)))
    assert vm.expm1_f32(f4(-inf)) == -1.0 and vm.expm1_f32(f4(inf)) == inf
    assert vm.expm1_f32(f4(89.0)) == inf and vm.expm1_f32(f4(-20.0)) == -1.0
    assert vm.tanh_f32(f4(10.0)) == 1.0 and vm.tanh_f32(f4(-inf)) == -1.0
    for f in (vm.expm1_f32, vm.log1p_f32, vm.tanh_f32):
        assert np.signbit(f(f4(-0.0))) and not np.signbit(f(f4(0.0)))
        assert f(f4(-1e-45)) == f4(-1e-45) and f(f4(1e-30)) == f4(1e-30)
    for name in NAMES:
        assert np.isnan(getattr(vm, name + "_f32")(f4(nan)))


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(NAMES), x=st.floats(width=32))
def test_float32_hypothesis(name, x):
    check_float32(name, np.array([x], dtype=np.float32))


def _has_fma():
    import llvmlite.binding as ll

    return bool(ll.get_host_cpu_features().get("fma"))


@pytest.mark.skipif(not _has_fma(), reason="without hardware FMA llvm.fma is a libm call")
@pytest.mark.parametrize("name", NAMES + [n + "_f32" for n in NAMES])
def test_loop_is_inlined_and_vectorised(name):
    kernel = _loop(getattr(vm, name))
    dtype = np.float32 if name.endswith("_f32") else np.float64
    x = np.linspace(0.5, 1.5, 64, dtype=dtype)
    kernel(x, np.empty_like(x))
    ir = "".join(kernel.inspect_llvm().values())
    called = set(re.findall(r"call [^@\n]*@\"?([\w.$]+)", ir))
    assert not [c for c in called if "10numba_math" in c], "not inlined"  # mangled module name
    assert not called & {"exp", "expm1", "log", "log1p", "tanh", "fma"}, "libm call"
    lanes = r"<\d+ x double>" if dtype == np.float64 else r"<(8|16) x float>"
    assert re.search(r"fmul " + lanes, ir), "not vectorised"
    if dtype == np.float32:  # computed in float32 lanes, not widened to double or int64
        assert not re.search(r"<\d+ x (double|i64)>", ir), "widened"
    else:  # AVX2 has no vector int64 <-> float64 conversion: LLVM would make it one per lane
        assert not re.search(r"(fptosi <\d+ x double>|sitofp <\d+ x i64>)", ir), "int64 cvt"


CALLER = """
import sys
import numpy as np
from numba import njit
from fusegrad.lazy.engines import numba_math as vm

@njit(cache=True, error_model="numpy")
def kernel(x, out):
    for i in range(x.size):
        out[i] = vm.tanh(x[i]) + vm.log(vm.exp(x[i])) + vm.tanh_f32(np.float32(x[i]))

x = np.linspace(-3.0, 3.0, 101)
out = np.empty_like(x)
kernel(x, out)
assert np.allclose(out, np.tanh(x) + x + np.tanh(x.astype(np.float32)), rtol=0, atol=3e-7)
print(sum(kernel.stats.cache_hits.values()))
"""


@pytest.mark.slow  # two fresh interpreters that import numba and compile
def test_caller_in_another_module_is_cached(tmp_path):
    (tmp_path / "vm_caller.py").write_text(textwrap.dedent(CALLER))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    hits = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", "import vm_caller"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        hits.append(int(proc.stdout.split()[-1]))
    assert hits == [0, 1]


# ------------------------------------------------------------------ power
EXPONENTS = [2.0, 3.0, 4.0, -2.0, -3.0, -4.0, 1.0, 0.0, -1.0, 0.5, -0.5, 1.7, -2.5]


@njit(error_model="numpy")
def _power_loop(x, p, out):
    for i in range(x.size):
        out[i] = vm.power(x[i], p)


@njit(error_model="numpy")
def _power_loop_f32(x, p, out):
    for i in range(x.size):
        out[i] = vm.power_f32(x[i], p)


def run_power(x, p):
    out = np.empty_like(x)
    (_power_loop if x.dtype == np.float64 else _power_loop_f32)(x, x.dtype.type(p), out)
    return out


def power_sweep(dtype):
    """Random bit patterns (every sign, exponent and special value), values near 1, and the
    ranges where a power over- or underflows (into the subnormals too)."""
    rng = np.random.default_rng(7)
    if dtype == np.float64:
        bits = rng.integers(-(2**63), 2**63 - 1, 2**17, dtype=np.int64).view(np.float64)
        edges = np.geomspace(1e-110, 1e-70, 2**14), np.geomspace(1e70, 1e160, 2**14)
    else:
        bits = rng.integers(-(2**31), 2**31 - 1, 2**17, dtype=np.int32).view(np.float32)
        edges = np.geomspace(1e-15, 1e-8, 2**14), np.geomspace(1e8, 1e20, 2**14)
    specials = SPECIAL if dtype == np.float64 else F32_SPECIAL
    near = np.linspace(-3.0, 3.0, 2**16)
    with np.errstate(invalid="ignore"):  # NaN payloads of the float32 bits, widened and back
        return np.concatenate([specials, bits, near, *edges, -edges[0], -edges[1]]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p", EXPONENTS)
def test_power_against_numpy(p, dtype):
    x = power_sweep(dtype)
    got = run_power(x, p)
    with np.errstate(all="ignore"):
        want = np.power(x, dtype(p))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    same = ~np.isfinite(want) | (want == 0)  # infinities and zeros: exactly, with their sign
    np.testing.assert_array_equal(got[same], want[same])
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
    fin = np.isfinite(want) & np.isfinite(got)
    d = ulp_distance(got[fin], want[fin])
    # both within ~0.5 ulp of the true power where NumPy's pow is (-0.5: two roundings); where
    # the result is subnormal an ulp is a larger part of it, and rounding steps meet
    assert d.max(initial=0) <= 2, (p, x[fin][d.argmax()], got[fin][d.argmax()])


@pytest.mark.skipif(not EXTENDED, reason="needs an 80-bit long double reference")
@pytest.mark.parametrize("p", [3.0, 4.0, -2.0, -3.0, -4.0])
def test_power_is_within_half_an_ulp_or_so_of_the_true_power(p):
    x = np.concatenate([np.linspace(-3.0, 3.0, 2**16), np.geomspace(1e-60, 1e60, 2**16)])
    got = run_power(x, p)
    with np.errstate(all="ignore"):
        ref = x.astype(np.longdouble) ** np.longdouble(p)
    fin = np.isfinite(got) & (got != 0)
    err = np.abs(got[fin].astype(np.longdouble) - ref[fin]) / np.spacing(np.abs(got[fin]))
    assert err.max() < 0.51, p  # correctly rounded but for ties within ~2^-100


def test_power_special_values_follow_numpy():
    inf, nan = np.inf, np.nan
    assert vm.power(-0.0, 3.0) == 0.0 and np.signbit(vm.power(-0.0, 3.0))
    assert vm.power(-0.0, -3.0) == -inf and vm.power(-0.0, -4.0) == inf
    assert vm.power(-inf, 3.0) == -inf and np.signbit(vm.power(-inf, -3.0))
    assert vm.power(1e103, -3.0) == np.power(1e103, -3.0) > 0  # subnormal, not flushed
    assert vm.power(1e103, 3.0) == inf and vm.power(1e-200, 3.0) == 0.0
    assert np.isnan(vm.power(nan, 3.0)) and vm.power(nan, 0.0) == 1.0
    assert np.signbit(vm.power(-0.0, 0.5)) and np.isnan(vm.power(-inf, 0.5))  # sqrt's, NumPy's
    assert vm.power(-0.0, -0.5) == inf and vm.power(-inf, -0.5) == 0.0
    assert vm.power(2.0, 1.7) == 2.0**1.7  # any other exponent: pow
    f4 = np.float32
    assert vm.power_f32(f4(1e13), f4(-3.0)) == np.power(f4(1e13), f4(-3.0)) > 0


@pytest.mark.skipif(not _has_fma(), reason="without hardware FMA llvm.fma is a libm call")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_loop_is_vectorised_without_pow_for_a_cube(dtype):
    f = vm.power if dtype == np.float64 else vm.power_f32

    @njit(error_model="numpy")
    def cube(x, out):
        for i in range(x.size):
            out[i] = f(x[i], dtype(3.0))

    x = np.linspace(0.5, 1.5, 64, dtype=dtype)
    cube(x, np.empty_like(x))
    ir = "".join(cube.inspect_llvm().values())
    called = set(re.findall(r"call [^@\n]*@\"?([\w.$]+)", ir))
    pows = [c for c in called if c in ("pow", "powf") or c.startswith("llvm.pow")]
    assert not pows and not [c for c in called if "10numba_math" in c], called
    lanes = r"<\d+ x double>" if dtype == np.float64 else r"<(8|16) x float>"
    assert re.search(r"fmul " + lanes, ir), "not vectorised"
    if dtype == np.float32:  # computed in float32 lanes, not widened to double
        assert not re.search(r"<\d+ x double>", ir), "widened"

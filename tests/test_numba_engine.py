"""The numba engine against a plain NumPy evaluation of the same kernel (and numpy_blocked).

Random programs come from hypothesis; each is evaluated eagerly with NumPy on broadcast views
(the oracle) and by the numba engine. Compile time dominates, so example counts are small and
the op/dtype space is drawn so that signatures repeat.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fusegrad as fg
from fusegrad.lazy import ops, replay  # noqa: E402
from fusegrad.lazy.engines import numba_engine as ne  # noqa: E402
from fusegrad.lazy.engines import (
    numba_split,  # noqa: E402
    numpy_speed,  # noqa: E402
)
from fusegrad.lazy.kernel import Instr, Kernel, Output  # noqa: E402

try:
    from fusegrad.lazy.engines import numpy_blocked
except Exception:  # pragma: no cover - the reference engine may be in flux
    numpy_blocked = None

pytestmark = pytest.mark.skipif(not ne.available(), reason="numba not importable")

F8, F4, I8, B1 = (np.dtype(c) for c in ("f8", "f4", "i8", "?"))
REDUCERS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def reference(k: Kernel) -> list[np.ndarray]:
    """Evaluate ``k`` eagerly: broadcast inputs to the domain, apply each ufunc, reduce."""
    vals: list = [np.broadcast_to(a, k.domain) for a in k.inputs]
    vals += list(k.constants)
    with np.errstate(all="ignore"):
        for ins in k.program:
            args = [vals[a] for a in ins.args]
            if ins.op == "cast":
                r = np.asarray(args[0]).astype(ins.dtype)
            elif ins.op == "where":
                r = np.where(args[0], args[1], args[2])
            else:
                r = ops.OPS[ins.op].ufunc(*args)
            vals.append(np.broadcast_to(np.asarray(r).astype(ins.dtype, copy=False), k.domain))
        outs = []
        for o in k.outputs:
            v = np.broadcast_to(vals[o.value], k.domain)
            if o.reduce is None or not o.axes:
                outs.append(np.asarray(v, dtype=o.dtype).copy())
            else:
                r = REDUCERS[o.reduce](v, axis=o.axes, keepdims=True)
                outs.append(np.asarray(r).astype(o.dtype))
    return outs


def _scale(k: Kernel, o: Output) -> np.ndarray | None:
    """Sum of |terms| for sums: the bound a sum's rounding error is relative to."""
    if o.reduce != "sum" or not o.axes:
        return None
    refk = Kernel(
        k.domain,
        k.inputs,
        k.constants,
        k.program + (Instr("absolute", (o.value,), o.dtype),),
        (Output(len(k.inputs) + len(k.constants) + len(k.program), "sum", o.axes, o.dtype),),
    )
    with np.errstate(all="ignore"):
        return reference(refk)[0]


def assert_close(k: Kernel, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for o, g, w in zip(k.outputs, got, want):
        assert g.shape == k.output_shape(o), (g.shape, o)
        assert g.dtype == o.dtype, (g.dtype, o)
        if o.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
            continue
        gnan, wnan = np.isnan(g), np.isnan(w)
        np.testing.assert_array_equal(gnan, wnan, err_msg="NaN positions differ")
        finite = np.isfinite(w)
        np.testing.assert_array_equal(g[~finite & ~wnan], w[~finite & ~wnan])
        # the least precise float anywhere in the program bounds the error
        fdts = [a.dtype for a in k.inputs] + [i.dtype for i in k.program] + [o.dtype]
        eps = max(np.finfo(d).eps for d in fdts if d.kind == "f")
        depth = max(1, len(k.program))
        rtol = 64 * depth * eps
        scale = _scale(k, o)
        mag = np.abs(w) if scale is None else np.maximum(np.abs(w), scale)
        with np.errstate(all="ignore"):
            err = np.abs(g.astype(F8) - w.astype(F8))
        bad = finite & ~(err <= rtol * mag + 1e3 * np.finfo(o.dtype).tiny)
        assert not bad.any(), f"{o}: got {g[bad][:5]} want {w[bad][:5]}"


def kernel(domain, inputs, consts, program, outputs) -> Kernel:
    return Kernel(tuple(domain), tuple(inputs), tuple(consts), tuple(program), tuple(outputs))


def check(k: Kernel) -> list[np.ndarray]:
    assert ne.supports(k)
    got = ne.run(k)
    assert_close(k, got, reference(k))
    replay = ne.replayer(k)  # jit's: the same loop, planned once; into given buffers too
    if replay is not None:
        for out in (
            replay(k.inputs, k.constants),
            replay(k.inputs, k.constants, [np.full(g.shape, 7, g.dtype) for g in got]),
        ):
            assert len(out) == len(got)
            for a, b in zip(out, got):
                np.testing.assert_array_equal(a, b)
    if numpy_blocked is not None:
        try:
            nb = numpy_blocked.run(k)
        except Exception:  # pragma: no cover - reference engine problems are not ours
            nb = None
        if nb is not None:
            assert_close(k, got, nb)
    return got


# ---------------------------------------------------------------- hand-written cases


def test_row_sum_tanh_and_multi_output():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(37), rng.standard_normal(53)
    prog = (
        Instr("subtract", (0, 1), F8),  # 2
        Instr("tanh", (2,), F8),  # 3
        Instr("square", (2,), F8),  # 4
        Instr("negative", (4,), F8),  # 5
        Instr("exp", (5,), F8),  # 6
    )
    outs = (
        Output(3, "sum", (1,), F8),
        Output(6, "sum", (1,), F8),
        Output(6, "sum", (0,), F8),
        Output(6, None, (), F8),
        Output(6, "sum", (0, 1), F8),
        Output(3, "max", (0,), F8),
    )
    k = kernel((37, 53), (x[:, None], y[None, :]), (), prog, outs)
    check(k)


def test_big_parallel_with_column_and_full_reductions(monkeypatch):
    monkeypatch.setattr(ne, "PARALLEL_MIN_NS", 0)  # slots on the worker threads
    rng = np.random.default_rng(1)
    n = 700
    x, y = rng.standard_normal(n), rng.standard_normal(n + 3)
    prog = (Instr("subtract", (0, 1), F8), Instr("multiply", (3, 2), F8))
    outs = (
        Output(4, "sum", (1,), F8),
        Output(4, "sum", (0,), F8),
        Output(4, "sum", (0, 1), F8),
        Output(4, "min", (0,), F8),
    )
    k = kernel((n, n + 3), (x[:, None], y[None, :]), (0.5,), prog, outs)
    check(k)


def test_float32_weak_constant_stays_float32():
    x = np.linspace(-1, 1, 11, dtype=F4)
    k = kernel((11,), (x,), (0.1,), (Instr("multiply", (0, 1), F4),), (Output(2, None, (), F4),))
    (got,) = check(k)
    np.testing.assert_array_equal(got, x * 0.1)


def test_zero_d_and_empty_domains():
    k0 = kernel(
        (), (np.array(2.0),), (3,), (Instr("power", (0, 1), F8),), (Output(2, None, (), F8),)
    )
    assert check(k0)[0] == 8.0
    x = np.ones((0, 3))
    ke = kernel((0, 3), (x,), (), (Instr("exp", (0,), F8),), (Output(1, "sum", (0,), F8),))
    np.testing.assert_array_equal(check(ke)[0], np.zeros((1, 3)))
    km = kernel((0, 3), (x,), (), (Instr("exp", (0,), F8),), (Output(1, "max", (0,), F8),))
    assert not ne.supports(km)  # NumPy raises: max of nothing


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # special values on purpose (NumPy warns too)
@pytest.mark.parametrize(
    "op", ["floor_divide", "remainder", "fmod", "maximum", "minimum", "fmax", "fmin"]
)
def test_binary_special_values(op):
    vals = np.array([-np.inf, -3.5, -2.0, -0.0, 0.0, 1.0, 2.5, 7.0, np.inf, np.nan])
    a, b = vals[:, None], vals[None, :]
    n = len(vals)
    k = kernel((n, n), (a, b), (), (Instr(op, (0, 1), F8),), (Output(2, None, (), F8),))
    got = check(k)[0]
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a, b)
    if op in ("floor_divide", "remainder", "fmod"):  # max/min of +0/-0 is unspecified
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.signbit(got[fin]), np.signbit(want[fin]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # special values on purpose (NumPy warns too)
@pytest.mark.parametrize("op", ["floor_divide", "remainder", "fmod"])
def test_integer_division_corners(op):
    v = np.array([np.iinfo(np.int64).min, -7, -1, 0, 1, 3, 7], dtype=I8)
    n = len(v)
    k = kernel(
        (n, n), (v[:, None], v[None, :]), (), (Instr(op, (0, 1), I8),), (Output(2, None, (), I8),)
    )
    check(k)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # special values on purpose (NumPy warns too)
def test_unary_table_and_scipy():
    x = np.array(
        [-3.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 0.7, 1.0, 2.0, 30.0, np.inf, -np.inf, np.nan]
    )
    n = len(x)
    unary = [name for name, op in ops.OPS.items() if op.nin == 1]
    prog = tuple(Instr(u, (0,), np.asarray(ops.OPS[u].ufunc(x[:1])).dtype) for u in unary)
    outs = tuple(Output(1 + j, None, (), prog[j].dtype) for j in range(len(prog)))
    k = kernel((n,), (x,), (), prog, outs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(k)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # special values on purpose (NumPy warns too)
def test_binary_table_float_and_int():
    rng = np.random.default_rng(3)
    binary = [name for name, op in ops.OPS.items() if op.nin == 2]
    for dt in (F8, F4, I8):
        if dt.kind == "f":
            a = rng.standard_normal(9).astype(dt) * 3
            a[:3] = [0, np.nan, np.inf]
            b = rng.standard_normal(7).astype(dt) * 3
            b[:2] = [0, -np.inf]
        else:
            a = rng.integers(-9, 9, 9).astype(dt)
            b = rng.integers(0, 5, 7).astype(dt)
        prog, outs = [], []
        for name in binary:
            with np.errstate(all="ignore"):
                rdt = np.asarray(ops.OPS[name].ufunc(a[:1], b[:1])).dtype
            ins = Instr(name, (0, 1), rdt)
            probe = kernel(
                (9, 7), (a[:, None], b[None, :]), (), (ins,), (Output(2, None, (), rdt),)
            )
            if not ne.supports(probe):
                assert dt.kind == "i", name
                continue
            prog.append(ins)
            outs.append(Output(2 + len(prog) - 1, None, (), rdt))
        k = kernel((9, 7), (a[:, None], b[None, :]), (), prog, outs)
        check(k)


def test_where_cast_comparison_mixed_dtypes():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 1)).astype(F4)
    y = rng.integers(-3, 3, (1, 6))
    prog = (
        Instr("greater", (0, 1), B1),  # 3
        Instr("add", (0, 1), F8),  # 4: f4 + i8 -> f8
        Instr("cast", (0,), F8),  # 5
        Instr("where", (3, 4, 5), F8),  # 6
        Instr("less", (0, 2), B1),  # 7: f4 < weak 0.5 in float32
    )
    outs = (
        Output(6, "sum", (0,), F8),
        Output(7, "sum", (1,), I8),
        Output(3, "max", (1,), B1),
    )
    check(kernel((5, 6), (x, y), (0.5,), prog, outs))


def test_unsupported_falls_back():
    z = np.ones(3, dtype=np.complex128)
    k = kernel((3,), (z,), (), (Instr("exp", (0,), z.dtype),), (Output(1, None, (), z.dtype),))
    assert not ne.supports(k)
    assert not ne.prefers(k)
    h = np.ones(3, dtype=np.float16)
    k = kernel((3,), (h,), (), (Instr("exp", (0,), h.dtype),), (Output(1, None, (), h.dtype),))
    assert not ne.supports(k)
    i = np.arange(3)
    k = kernel((3,), (i, i), (), (Instr("power", (0, 1), I8),), (Output(2, None, (), I8),))
    assert ne.supports(k)
    k = kernel((3,), (i, i - 2), (), (Instr("power", (0, 1), I8),), (Output(2, None, (), I8),))
    assert not ne.supports(k)


def test_compiled_once_per_process():
    x = np.arange(6.0).reshape(2, 3)
    k1 = kernel((2, 3), (x,), (2.0,), (Instr("add", (0, 1), F8),), (Output(2, "sum", (0,), F8),))
    ne.run(k1)
    before = dict(ne.STATS)
    k2 = kernel(
        (2, 3), (x + 1,), (5.0,), (Instr("add", (0, 1), F8),), (Output(2, "sum", (0,), F8),)
    )
    ne.run(k2)
    assert ne.STATS == before
    assert ne.is_compiled(k2)


def test_non_contiguous_views():
    base = np.arange(60.0).reshape(6, 10)
    a = base[::2, ::3]  # (3, 4) strided
    b = base.T[:4, :3].T  # (3, 4) transposed view
    k = kernel((3, 4), (a, b), (), (Instr("multiply", (0, 1), F8),), (Output(2, "sum", (0,), F8),))
    check(k)


def test_prefers_rule():
    n = 400
    x = np.ones((n, 1))
    y = np.ones((1, n))
    arith = kernel(
        (n, n), (x, y), (), (Instr("subtract", (0, 1), F8),), (Output(2, "sum", (1,), F8),)
    )

    def trans(op, dt=F8):
        return kernel(
            (n, n),
            (x.astype(dt), y.astype(dt)),
            (),
            (Instr("subtract", (0, 1), dt), Instr(op, (2,), dt)),
            (Output(3, "sum", (1,), dt),),
        )

    assert ne.prefers(arith)
    assert not ne.prefers(trans("arctan")) or not numpy_speed.scalar_in_numpy("arctan", F8)
    # float64 sin: numba's libm call, NumPy's too where it keeps sin scalar (numpy_speed)
    assert ne.prefers(trans("sin")) == numpy_speed.scalar_in_numpy("sin", F8)
    assert ne.prefers(trans("tanh")) and ne.prefers(trans("exp", np.dtype("f4")))  # numba_math
    assert ne.prefers(trans("tanh", np.dtype("f4")))  # numba_math's float32 lanes
    assert ne.inner_ops(trans("tanh")) == (0, 1) and ne.inner_ops(trans("sin")) == (1, 0)
    small = kernel(
        (3,), (np.ones(3),), (), (Instr("negative", (0,), F8),), (Output(1, None, (), F8),)
    )
    # small: numpy_blocked, unless an earlier test already compiled this very signature
    assert ne.prefers(small) == ne.is_compiled(small)
    hoisted = kernel(
        (n, n),
        (x, y),
        (),
        (Instr("exp", (0,), F8), Instr("subtract", (2, 1), F8)),
        (Output(3, "sum", (1,), F8),),
    )
    assert ne.inner_expensive(hoisted) == 0 and ne.inner_expensive(trans("sin")) == 1
    assert ne.prefers(hoisted)

    def power(exponent, a=x, b=y):  # (a - b) ** exponent, the exponent a constant of the kernel
        return kernel(
            (n, n),
            (a, b),
            (exponent,),
            (Instr("subtract", (0, 1), F8), Instr("power", (3, 2), F8)),
            (Output(4, "sum", (1,), F8),),
        )

    # numba_math.power: small integer exponents and +-0.5 without pow; any other exponent, pow
    assert ne.inner_ops(power(3.0)) == (0, 1) and ne.inner_ops(power(-0.5)) == (0, 1)
    assert ne.inner_ops(power(1.7)) == (1, 0)  # the same signature, another constant
    assert ne.prefers(power(-2.0)) and not ne.prefers(power(1.7))
    xs, ys = np.linspace(-2, 2, n)[:, None], np.linspace(-1, 3, n)[None, :]
    for exponent in (3.0, -2.0, 0.5, 1.7):
        k = power(exponent, xs, ys)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = np.sum((xs - ys) ** exponent, axis=1, keepdims=True)
        np.testing.assert_allclose(ne.run(k)[0], want, rtol=1e-12, err_msg=str(exponent))


# ---------------------------------------------------------------- random programs

UNARY_F = [n for n, o in ops.OPS.items() if o.nin == 1 and n not in ("arccosh",)]
BINARY = [n for n, o in ops.OPS.items() if o.nin == 2]
SIZES = st.sampled_from([0, 1, 2, 3, 5])


@st.composite
def programs(draw):
    ndim = draw(st.integers(0, 4))
    domain = tuple(draw(SIZES) for _ in range(ndim))
    assume(int(np.prod(domain)) <= 300)
    nin = draw(st.integers(1, 3))
    inputs = []
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    for _ in range(nin):
        dt = draw(st.sampled_from([F8, F8, F4, I8]))
        shape = tuple(n if draw(st.booleans()) else 1 for n in domain)
        if dt.kind == "f":
            a = (rng.standard_normal(shape) * 2).astype(dt)
        else:
            a = rng.integers(-5, 6, shape).astype(dt)
        inputs.append(a)
    consts = draw(st.lists(st.sampled_from([0.5, 2, -1.5, np.float32(1.25), 3]), max_size=2))
    # operand sample values of each operand's dtype (weak scalars stay Python scalars)
    samples: list = [a.reshape(-1)[:1] if a.size else np.ones(1, a.dtype) for a in inputs]
    samples += consts
    dtypes: list = [a.dtype for a in inputs] + [None] * len(consts)
    program = []
    for _ in range(draw(st.integers(1, 6))):
        n = len(samples)
        kind = draw(st.sampled_from(["u", "b", "b", "where", "cast"]))
        if kind == "cast":
            a = draw(st.integers(0, n - 1))
            src = dtypes[a]
            if src is None or src == F8:
                continue
            ins = Instr("cast", (a,), F8)
            sample = np.asarray(samples[a]).astype(F8)
        elif kind == "where":
            c, p, q = (draw(st.integers(0, n - 1)) for _ in range(3))
            dt = np.result_type(samples[p], samples[q])
            ins = Instr("where", (c, p, q), dt)
            sample = np.asarray(np.where(samples[c], samples[p], samples[q]))
        else:
            name = draw(st.sampled_from(UNARY_F if kind == "u" else BINARY))
            args = tuple(draw(st.integers(0, n - 1)) for _ in range(ops.OPS[name].nin))
            if all(dtypes[a] is None for a in args):
                continue  # a constant-only op is folded by the IR, never fused
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sample = np.asarray(ops.OPS[name].ufunc(*(samples[a] for a in args)))
            except (TypeError, ValueError):
                continue
            dt = sample.dtype
            if dt.kind not in "biuf" or dt == np.float16:
                continue
            if dt.kind in "iu" and name in ("power", "reciprocal"):
                continue  # NumPy raises for negative integer powers
            ins = Instr(name, args, dt)
        if ins.dtype.kind not in "bif" and ins.dtype != np.dtype("u1"):
            continue
        program.append(ins)
        samples.append(np.atleast_1d(sample))
        dtypes.append(ins.dtype)
    assume(program)
    nvals = len(samples)
    outputs = []
    for _ in range(draw(st.integers(1, 3))):
        v = draw(st.integers(len(inputs), nvals - 1))
        if dtypes[v] is None:
            continue
        red = draw(st.sampled_from([None, "sum", "sum", "max", "min", "prod"]))
        axes = (
            tuple(sorted(draw(st.sets(st.integers(0, max(0, ndim - 1)), max_size=ndim))))
            if ndim
            else ()
        )
        if red is None:
            axes = ()
        if red in ("max", "min") and any(domain[a] == 0 for a in axes):
            red = "sum"
        vd = dtypes[v]
        if red in ("sum", "prod"):
            od = REDUCERS[red](np.ones(1, vd)).dtype
        else:
            od = vd
        if red == "prod" and vd.kind in "iu":
            red = "sum"
        outputs.append(Output(v, red, axes, od))
    assume(outputs)
    return kernel(domain, inputs, consts, program, outputs)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_programs(k):
    if not ne.supports(k):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(k)


@pytest.mark.slow  # every example compiles kernels; test_random_programs covers the nests
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_programs_on_the_worker_pool(k):
    """The same programs with every kernel run as slots on the worker threads (then combined)."""
    if not ne.supports(k):
        return
    old = ne.PARALLEL_MIN_NS
    ne.PARALLEL_MIN_NS = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(k)
    finally:
        ne.PARALLEL_MIN_NS = old


# numba: ~2.5 s of compilation (the chunked nest with an inlined exp), so in the slow tier
@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=pytest.mark.slow)])
def test_gaussian_kernel_gradient_one_pass_accurate_and_lean(engine):
    """W3's gradient, ``sum(exp(-(x[:, None] - y[None, :])**2 / (2 s^2)))`` w.r.t. x, y and s,
    against its hand-derived sums to 1e-12 of the sum of |terms|, with rows longer than a chunk
    (the chunked nest on numba), and on numba no temporary of the pairwise domain's size."""
    import fusegrad as fg
    from fusegrad.memory import track_allocations

    rng = np.random.default_rng(7)
    x, y, s = rng.standard_normal(150), rng.standard_normal(1100), np.float64(0.9)

    def f(x, y, s):
        return np.sum(np.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))

    grad = fg.grad(f, argnums=(0, 1, 2))
    with fg.use_engine(engine):
        grad(x, y, s)  # compiles (numba) outside the tracked call
        with track_allocations() as mem:
            gx, gy, gs = grad(x, y, s)
    d = x[:, None] - y[None, :]
    e = np.exp(-(d**2) / (2 * s**2))
    want = [(-e * d / s**2, 1), (e * d / s**2, 0), (e * d**2 / s**3, None)]
    for got, (terms, axis) in zip((gx, gy, gs), want):
        scale = np.abs(terms).sum(axis=axis)
        np.testing.assert_array_less(np.abs(got - terms.sum(axis=axis)), 1e-12 * scale + 1e-300)
    if engine == "numba":  # per-thread partials (3 rows of y's size each), not blocks of 2^16
        assert mem.peak_bytes < d.nbytes / 8, mem.peak_bytes


def test_a_libm_call_numpy_makes_scalar_too_leaves_the_kernel_to_numba(monkeypatch):
    n = 400
    x, y = np.ones((n, 1)), np.ones((1, n))

    def trans(*names):
        prog = [Instr("subtract", (0, 1), F8)]
        for name in names:
            prog.append(Instr(name, (len(prog) + 1,), F8))
        return kernel((n, n), (x, y), (), tuple(prog), (Output(len(prog) + 1, "sum", (1,), F8),))

    for simd in (True, False):  # as NumPy builds sin: in SIMD lanes, or scalar (NumPy 2)
        monkeypatch.setitem(numpy_speed._ratios, ("sin", F8.str), 1.0 if simd else 9.0)
        monkeypatch.setitem(numpy_speed._ratios, ("arctan", F8.str), 1.6)
        assert ne.numpy_faster(trans("sin")) == simd
        assert ne.prefers(trans("sin")) != simd
        assert ne.prefers(trans("sin", "exp")) != simd  # numba_math's exp is vectorised anyway
        assert not ne.prefers(trans("sin", "arctan"))  # arctan: NumPy's SIMD wins
    assert ne.inner_ops(trans("sin", "sin")) == (2, 0)


def test_numpy_speed_calls_a_ufunc_scalar_from_its_time_against_exp(monkeypatch):
    times = {np.exp: 1000.0, np.sin: 8400.0, np.cos: 4000.0, np.logaddexp: 24000.0}
    seen = []

    def best_ns(f, args, out):
        seen.append((f, len(args), len(args) == 2 and args[0][0] == args[1][0]))
        return times[f]

    monkeypatch.setattr(numpy_speed, "_best_ns", best_ns)
    monkeypatch.setattr(numpy_speed, "_ratios", {})
    monkeypatch.setattr(numpy_speed, "_slow", {})
    assert numpy_speed.scalar_in_numpy("sin", F8)  # 8.4x exp
    assert not numpy_speed.scalar_in_numpy("cos", F8)  # 4x: below SCALAR_RATIO
    assert numpy_speed.slow_in_numpy(np.cos)  # but above SLOW_RATIO
    assert numpy_speed.slow_in_numpy(np.logaddexp)
    assert (np.logaddexp, 2, False) in seen  # two different arguments: no logaddexp(x, x)
    assert not numpy_speed.scalar_in_numpy("sin", np.dtype("c16"))  # complex: not measured
    assert not numpy_speed.scalar_in_numpy("no such ufunc", F8)
    assert not numpy_speed.scalar_in_numpy("modf", F8)  # two outputs
    assert numpy_speed._ratios == {
        ("sin", F8.str): 8.4,
        ("cos", F8.str): 4.0,
        ("logaddexp", F8.str): 24.0,
    }


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    extra=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    start=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    dtype=st.sampled_from(["f8", "f4", "i8"]),
    order=st.sampled_from(["slice", "transpose", "reverse", "broadcast"]),
)
def test_rows_padded_reads_the_same_elements_as_a_c_array(shape, extra, start, dtype, order):
    # A block of rows of a wider array (an LSTM's gate z[:, h:2h]) is passed to a kernel as a
    # C-contiguous array with its rows padded to their stride, which LLVM vectorises; anything
    # else (a transposed, reversed or broadcast array) is passed as it is.
    wide = tuple(n + e + s for n, e, s in zip(shape, extra, start))
    base = np.arange(np.prod(wide)).astype(dtype).reshape(wide)
    a = base[tuple(slice(s, s + n) for s, n in zip(start, shape))]
    if order == "transpose":
        a = a.T
    elif order == "reverse":
        a = a[..., ::-1]
    elif order == "broadcast":
        a = np.broadcast_to(a[..., :1], a.shape)
    p = ne.rows_padded(a)
    for idx in np.ndindex(a.shape):
        assert p[idx] == a[idx]
    rows_of_wider = a.ndim >= 2 and a.strides[-1] == a.itemsize and not a.flags.c_contiguous
    if rows_of_wider and all(s > 0 for s in a.strides):
        assert p.flags.c_contiguous and p.shape[0] == a.shape[0]
    elif not rows_of_wider:
        assert p is a


def test_a_kernel_over_column_blocks_matches_numpy_on_both_engines(monkeypatch):
    # the gates of an LSTM: four column blocks of one product, fused into one cell kernel, to
    # which numba's engine passes them padded to C-contiguous arrays
    import fusegrad.lazy as fl
    from fusegrad.lazy import engines, plan

    padded = []
    monkeypatch.setattr(
        ne, "rows_padded", lambda a: padded.append(a.flags.c_contiguous) or a.copy()
    )
    rng = np.random.default_rng(0)
    b, h = ne.PAD_ROWS_FROM // 40 + 1, 40
    z, c = rng.standard_normal((b, 4 * h)), rng.standard_normal((b, h))

    def cell(zz, cc):
        gate = [zz[:, k * h : (k + 1) * h] for k in range(4)]
        c2 = np.tanh(gate[0]) * cc + (1 / (1 + np.exp(-gate[1]))) * gate[2]
        return c2 * gate[3]

    want = cell(z, c)
    for name in ("numba", "numpy"):
        with engines.use_engine(name), plan.recording() as notes:
            got = plan.materialize(cell(fl.asarray(z), fl.asarray(c)))
        assert [n["engine"] for n in notes if n["event"] == "kernel"] == [name]
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    assert padded.count(False) == 4  # the gates (c is C-contiguous already)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    dtype=st.sampled_from(["f8", "f4", "i8"]),
    order=st.sampled_from(["c", "transpose", "rows", "reverse", "broadcast", "strided"]),
)
def test_rows_padded_or_c_copies_transposes_only(shape, dtype, order):
    # for a kernel heavy in vectorised math, a transposed operand (F-contiguous) is copied to C
    # order; rows of a wider array are padded as ``rows_padded`` pads them; anything else
    # (reversed, broadcast, strided) is passed as it is
    base = np.arange(np.prod(shape) * 2).astype(dtype)
    a = base[: np.prod(shape)].reshape(shape)
    if order == "transpose":
        a = a.T
    elif order == "rows":
        a = base.reshape(*shape[:-1], 2 * shape[-1])[..., : shape[-1]]
    elif order == "reverse":
        a = a[..., ::-1]
    elif order == "broadcast":
        a = np.broadcast_to(a[..., :1], a.shape)
    elif order == "strided":
        a = base[::2].reshape(shape)[::-1]
    p = ne.rows_padded_or_c(a)
    for idx in np.ndindex(a.shape):
        assert p[idx] == a[idx]
    if a.ndim >= 2 and a.flags.f_contiguous and not a.flags.c_contiguous:
        assert p.flags.c_contiguous and not np.shares_memory(p, a)
    elif ne.rows_padded(a) is a:
        assert p is a


def test_a_heavy_kernel_reads_a_transpose_in_c_order_on_both_engines(monkeypatch):
    # sigmoid(x.T + y) * tanh(y): numba's loop over x.T as it is stays scalar; the engine copies
    # x.T to C order first, for a kernel with COPY_TRANSPOSED_FROM_FAST_OPS vectorised math ops
    import fusegrad.lazy as fl
    from fusegrad.lazy import engines, plan

    copied = []
    relay = ne.rows_padded_or_c

    def spy(a):
        out = relay(a)
        copied.append(out is not a and not np.shares_memory(out, a))
        return out

    monkeypatch.setattr(ne, "rows_padded_or_c", spy)
    rng = np.random.default_rng(0)
    n = 1 << 8
    assert n * n >= ne.PAD_ROWS_FROM
    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def heavy(a, b):
        return (1 / (1 + np.exp(-(a.T + b)))) * np.tanh(b)

    def light(a, b):
        return (a.T + b) * b

    for f in (heavy, light):
        want = f(x, y)
        for name in ("numba", "numpy"):
            copied.clear()
            with engines.use_engine(name), plan.recording() as notes:
                got = plan.materialize(f(fl.asarray(x), fl.asarray(y)))
            assert [n["engine"] for n in notes if n["event"] == "kernel"] == [name]
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
            # numba copies x.T (only x.T) for the heavy kernel; the light one reads it as is
            assert copied == ([True, False] if (f, name) == (heavy, "numba") else [])


# ---------------------------------------------------------------- a short last axis, split


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_programs_with_a_short_last_axis_split(monkeypatch, k):
    """numba_split at every size: the kernel over the other axes, one instruction per index of
    the last one where it varies, outputs stacked or combined, agrees with NumPy."""
    assume(len(k.domain) >= 2 and 2 <= k.domain[-1] <= numba_split.SHORT_MAX)
    assume(ne.supports(k))
    monkeypatch.setattr(numba_split, "MIN_POINTS", 0)
    assume(numba_split.split(k) is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(k)


def test_a_pairwise_gradient_over_3d_points_splits_its_coordinates(monkeypatch):
    # the mirrored sum of sum(exp(-|x_i - x_j|^2)) over a 300x300x3 domain: per coordinate,
    # against the hand-derived gradient, on numba and replayed under jit
    splits = []
    real = numba_split.split
    monkeypatch.setattr(numba_split, "split", lambda k: (lambda s: splits.append(s) or s)(real(k)))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 3))

    def f(x):
        return np.sum(np.exp(-np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)))

    d = x[:, None, :] - x[None, :, :]
    e = np.exp(-np.sum(d**2, axis=-1))
    want = -4 * np.sum(e[:, :, None] * d, axis=1)
    with fg.use_engine("numba"):
        np.testing.assert_allclose(fg.grad(f)(x), want, rtol=1e-12, atol=1e-12)
        jg = fg.jit(fg.grad(f))
        for k in range(replay.HOT_REPLAYS + 2):
            y = x + 0.01 * k
            dy = y[:, None, :] - y[None, :, :]
            ey = np.exp(-np.sum(dy**2, axis=-1))
            np.testing.assert_allclose(jg(y), -4 * np.sum(ey[:, :, None] * dy, axis=1),
                                       rtol=1e-12, atol=1e-12)  # fmt: skip
    assert any(s is not None and s.kernel.domain == (300, 300) for s in splits)


def test_what_is_not_split():
    f8 = np.dtype("f8")
    x = np.ones((200, 100, 3))
    big = Kernel((200, 100, 3), (x,), (), (Instr("exp", (0,), f8),), (Output(1, None, (), f8),))
    assert numba_split.split(big) is None  # an output the domain's size: a stack would copy it
    count = Kernel(
        (200, 100, 3), (x,), (0.5,),
        (Instr("greater", (0, 1), np.dtype("?")),),
        (Output(2, "sum", (1, 2), np.dtype("i8")),),
    )  # fmt: skip
    assert numba_split.split(count) is None  # booleans counted: no per-point combine
    long = Kernel((200, 100, 5), (np.ones((200, 100, 5)),), (), (Instr("exp", (0,), f8),),
                  (Output(1, "sum", (1,), f8),))  # fmt: skip
    assert numba_split.split(long) is None  # a last axis of 5: long enough to vectorise

    def power(p):
        return Kernel((200, 100, 3), (x,), (p,), (Instr("power", (0, 1), f8),),
                      (Output(2, "sum", (1,), f8),))  # fmt: skip

    assert numba_split.split(power(2.5)) is None  # vectorised, a power computes all its cases
    assert numba_split.split(power(3.0)) is not None  # but x ** 3 is compiled in: one case
    summed = Kernel((200, 100, 3), (x,), (), (Instr("exp", (0,), f8),),
                    (Output(1, "sum", (1, 2), f8),))  # fmt: skip
    s = numba_split.split(summed)
    assert s is not None and s.kernel.domain == (200, 100)
    np.testing.assert_allclose(ne.run(summed)[0], np.exp(x).sum(axis=(1, 2), keepdims=True))


def test_a_power_of_a_fast_exponent_is_compiled_in_and_a_changed_one_is_not_missed():
    # numba compiles x ** 3 with the literal 3 (so the loop vectorises); a jit replay whose
    # exponent is a number argument that changes must not run that code with the old one
    x = np.linspace(0.5, 2.0, 40_000).reshape(200, 200)
    f8 = np.dtype("f8")
    k = Kernel(x.shape, (x,), (3.0,), (Instr("power", (0, 1), f8),), (Output(2, "sum", (1,), f8),))
    assert ne.signature(k)[2] == ("float=3.0",)
    np.testing.assert_allclose(ne.run(k)[0], np.sum(x**3.0, axis=1, keepdims=True), rtol=1e-14)
    other = Kernel(x.shape, (x,), (-2.0,), k.program, k.outputs)
    np.testing.assert_allclose(ne.run(other)[0], np.sum(x**-2.0, axis=1, keepdims=True),
                               rtol=1e-14)  # fmt: skip

    def f(x, p):
        return np.sum(x**p)

    with fg.use_engine("numba"):
        jf = fg.jit(f)
        for k in range(replay.HOT_REPLAYS + 4):
            p = (3.0, 3.0, 2.0, -1.0, 2.5, 4)[k % 6]
            np.testing.assert_allclose(jf(x, p), np.sum(x**p), rtol=1e-12)

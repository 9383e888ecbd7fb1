"""The op table (``fusegrad.lazy.ops``): each entry agrees with its NumPy function, an engine
supports an op exactly when it has an entry for it, and a new elementwise function with both
derivatives and both engines is one entry (``elementwise_op``: the worked example of
docs/architecture.md, ``scipy.special.exp10``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import engines, ops
from fusegrad.lazy.engines import numba_codegen, numba_engine, numpy_blocked, registry
from fusegrad.lazy.kernel import Instr, Kernel, Output
from fusegrad.rules import registry as registry_rules
from fusegrad.rules.common import PARTIALS, elementwise_op

F8, I8 = np.dtype("f8"), np.dtype("i8")
needs_numba = pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable")


def unary_kernel(op: str, x: np.ndarray, dtype: np.dtype) -> Kernel:
    n = len(x)
    return Kernel((n,), (x,), (), (Instr(op, (0,), dtype),), (Output(1, None, (), dtype),))


def test_every_entry_agrees_with_its_numpy_function():
    x = np.array([0.25, 0.5, 2.0])
    for name, op in ops.OPS.items():
        assert op.name == name
        if isinstance(op.ufunc, np.ufunc):
            assert op.nin == op.ufunc.nin, name
            assert op.ufunc.__name__ == name or ops.BY_UFUNC[op.ufunc] is op, name
        assert op.loop in ("result", "args", "bool"), name
        with np.errstate(all="ignore"):
            out = np.asarray(op.ufunc(*[x] * op.nin))
        if op.loop != "result":  # comparisons, predicates, logical ops: a bool result
            assert out.dtype == np.bool_, name
        if op.float_only and name != "reciprocal":  # np.reciprocal has integer loops
            with np.errstate(all="ignore"):
                on_ints = np.asarray(op.ufunc(*[np.arange(1, 4)] * op.nin))
            assert on_ints.dtype.kind == "f", name


def test_an_engine_supports_an_op_exactly_when_it_has_an_entry(monkeypatch):
    for name, op in ops.OPS.items():
        assert name in numpy_blocked.ops
        assert (name in numba_engine.ops) == (op.numba is not None), name
    assert set(numba_engine.ops) == {n for n, o in ops.OPS.items() if o.numba} | {"cast", "where"}
    # the engines' ops are views of the table: an entry added to it is seen at once
    monkeypatch.setitem(ops.OPS, "spacing", ops.Op("spacing", np.spacing, 1, False))
    assert "spacing" in numpy_blocked.ops and "spacing" not in numba_engine.ops
    k = unary_kernel("spacing", np.linspace(1.0, 2.0, 5), F8)
    assert registry.missing_ops(k)["numba"] == "spacing"
    np.testing.assert_array_equal(numpy_blocked.run(k)[0], np.spacing(k.inputs[0]))
    monkeypatch.setitem(ops.OPS, "spacing", ops.Op("spacing", np.spacing, 1, False, numba="{0}"))
    assert "spacing" in numba_engine.ops


def test_a_template_resolves_for_every_dtype_its_op_meets():
    plan = numba_codegen.analyse(0, (), (), (), ())
    for name, op in ops.OPS.items():
        kinds = "f" if op.float_only else "fiub"
        for dt in [np.dtype(c) for c in ("f8", "f4", "i8", "u1", "?") if np.dtype(c).kind in kinds]:
            if dt.kind == "b" and name in ("negative", "sign", "subtract"):  # NumPy has none
                continue
            src = numba_codegen.op_expr(name, ["x", "y"][: op.nin], dt, plan)
            compile(src, f"<{name} in {dt}>", "eval")  # a Python expression, filled in
            assert "{" not in src, (name, dt, src)
    for h in plan.helpers - {"vm"}:
        assert h in numba_codegen.HELPERS


def test_vectorised_ops_are_those_whose_float_expression_calls_numba_math():
    f8, f4 = np.dtype("f8"), np.dtype("f4")
    vec = {n for n in ops.OPS if numba_codegen.vectorised(n, f8)}
    want = {"exp", "expm1", "log", "log1p", "tanh"}
    want |= {n for n in ("expit", "xlogy", "xlog1py", "logaddexp", "log_expit") if n in ops.OPS}
    assert vec == want
    assert vec == {n for n in ops.OPS if numba_codegen.vectorised(n, f4)}
    assert not any(numba_codegen.vectorised(n, I8) for n in ops.OPS)
    plan = numba_codegen.analyse(0, (), (), (), ())
    assert numba_codegen.op_expr("logaddexp", ["x", "y"], f4, plan) == "vm.logaddexp(x, y)"
    assert plan.helpers == {"vm"}
    if "log_expit" in ops.OPS:  # (scipy.special's log_expit: a helper calling numba_math)
        plan = numba_codegen.analyse(0, (), (), (), ())
        assert numba_codegen.op_expr("log_expit", ["x"], f4, plan) == "_log_expit(x)"
        assert plan.helpers == {"_log_expit", "vm"}  # the helper's own numba_math calls


def test_numba_declines_a_loop_kind_its_template_leaves_out():
    b = np.dtype("?")
    for op, dt in [("negative", b), ("sign", b), ("subtract", b), ("sqrt", I8), ("exp", b)]:
        nin = ops.OPS[op].nin
        plan = numba_codegen.analyse(
            1, ((dt, (False,)),) * nin, (), (Instr(op, tuple(range(nin)), dt),), ()
        )
        assert plan.error == f"{op} on {dt}"
    plan = numba_codegen.analyse(1, ((I8, (False,)),), (), (Instr("negative", (0,), I8),), ())
    assert plan.error is None


@needs_numba
def test_a_float_only_op_in_an_integer_loop_runs_on_numpy():
    x = np.arange(-3, 4, dtype=I8)
    k = unary_kernel("reciprocal", x, I8)
    assert ops.OPS["reciprocal"].float_only and not numba_engine.supports(k)
    with fg.use_engine("numba"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert engines.choose(k) == "numpy"
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(engines.run(k)[0][0], np.reciprocal(x))
    k = unary_kernel("sqrt", x.clip(0), F8)  # sqrt of integers computes in float64
    assert numba_engine.supports(k)
    np.testing.assert_allclose(numba_engine.run(k)[0], np.sqrt(x.clip(0)), rtol=1e-15)


# A new elementwise function, declared as docs/architecture.md's worked example declares it: one
# entry holding its op (both engines' expressions, cost class, float-only) and its derivative.
# 10**x as exp(x ln 10): numba_math's exp, which LLVM vectorises, so auto gives large kernels to
# numba; within a few ulp of SciPy's exp10 for |x| of a few units.
LN10 = float(np.log(10.0))
EXP10_NUMBA = "vm.exp{f32}({0} * {T}(2.302585092994046))"


@pytest.fixture(scope="module")
def kernel_folder(tmp_path_factory):
    """Kernels of this module's declarations compile into a folder of their own (the session's
    cache outlives a changed template)."""
    return str(tmp_path_factory.mktemp("declared-kernels"))


@pytest.fixture
def declare(monkeypatch, kernel_folder):
    """``elementwise_op``, with what a test declares undone after it (the op table and the rule
    tables restored)."""
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", kernel_folder)
    tables = (ops.OPS, ops.BY_UFUNC, registry_rules.RRULES, registry_rules.FRULES, PARTIALS)
    saved = [dict(t) for t in tables]
    yield elementwise_op
    for table, copy in zip(tables, saved):
        table.clear()
        table.update(copy)


@pytest.fixture
def exp10(declare):
    sp = pytest.importorskip("scipy.special")
    assert sp.exp10 not in ops.BY_UFUNC  # not an op of the lazy IR: declared here as one
    for table in (registry_rules.RRULES, registry_rules.FRULES, PARTIALS):
        table.pop(sp.exp10, None)  # (its scalar_rule in rules/special.py; restored after)
    return declare(
        sp.exp10,
        lambda x, y: LN10 * y,  # ∂y/∂x, written with NumPy calls: grad, jvp, every order
        numba=EXP10_NUMBA,  # numba's scalar expression (numpy_blocked calls sp.exp10 itself)
        expensive=True,  # a transcendental call: the policy stores it rather than recompute it
        float_only=True,  # numba declines integer loops (numpy_blocked runs those)
    )


def kernel_engines(record) -> list[str]:
    return [r["engine"] for r in record if r.get("event") == "kernel"]


@pytest.mark.parametrize("name", ["numpy", "numba", "auto"])
def test_a_function_declared_in_one_entry_fuses_and_differentiates_on_every_engine(exp10, name):
    if name != "numpy" and not numba_engine.available():
        pytest.skip("numba unavailable")
    x = np.linspace(-2.0, 2.0, 200_000)  # numba's size: auto gives it kernels without libm calls
    w = np.cos(x)
    want = exp10(x)
    assert ops.OPS["exp10"] == ops.Op("exp10", exp10, 1, True, True, "result", EXP10_NUMBA)
    assert "exp10" in numba_engine.ops and "exp10" in numpy_blocked.ops
    expected = "numpy" if name == "numpy" else "numba"
    with fg.use_engine(name):
        lazy = exp10(fl.asarray(x)) * w
        assert isinstance(lazy, fl.LazyArray)  # a Map of the new op, not an eager call
        with fl.recording() as rec:
            got = fl.materialize(lazy)
        np.testing.assert_allclose(got, want * w, rtol=1e-14)
        assert kernel_engines(rec) == [expected]

        with fl.recording() as rec:
            g = fg.grad(lambda x: np.sum(exp10(x) * w))(x)
        assert set(kernel_engines(rec)) == {expected}
        np.testing.assert_allclose(g, LN10 * want * w, rtol=1e-13)
        h = 1e-6  # the function is a sum of one term per point: every central difference at once
        fd = (exp10(x + h) - exp10(x - h)) * w / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-7)

        with fl.recording() as rec:
            y, t = fg.jvp(exp10, (x,), (w,))
            t = np.asarray(t)
        assert set(kernel_engines(rec)) <= {expected}
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-14)
        np.testing.assert_allclose(t, LN10 * want * w, rtol=1e-13)


@needs_numba
def test_the_declared_function_runs_in_a_numba_kernel(exp10):
    x = np.linspace(-3.0, 3.0, 1001)
    k = unary_kernel("exp10", x, F8)
    assert numba_engine.supports(k) and numba_engine.prefers(
        unary_kernel("exp10", x.repeat(200), F8)
    )
    src = numba_codegen.generate_source(
        numba_codegen.analyse(1, ((F8, (False,)),), (), k.program, k.outputs)
    )
    assert "vm.exp(x0 * np.float64(2.302585092994046))" in src
    np.testing.assert_allclose(numba_engine.run(k)[0], exp10(x), rtol=1e-14)
    x32 = x.astype(np.float32)
    k32 = unary_kernel("exp10", x32, np.dtype("f4"))
    np.testing.assert_allclose(numba_engine.run(k32)[0], exp10(x32), rtol=1e-5)


def test_an_engine_without_an_expression_for_a_declared_function_is_named(declare):
    sp = pytest.importorskip("scipy.special")
    cosm1 = declare(sp.cosm1, lambda x, y: -np.sin(x))  # no numba expression: numpy_blocked only
    assert "cosm1" in numpy_blocked.ops and "cosm1" not in numba_engine.ops
    x = np.linspace(-1.0, 1.0, 200_000)
    with fg.use_engine("auto"), fl.recording() as rec:
        value, g = fg.value_and_grad(lambda x: np.sum(cosm1(x)))(x)
    # the forward's kernel holds cosm1 (the backward's, -sin(x), may run anywhere)
    ran = [r["engine"] for r in rec if r.get("event") == "kernel" and "cosm1" in r["ops"]]
    assert ran == ["numpy"]
    np.testing.assert_allclose(value, np.sum(sp.cosm1(x)), rtol=1e-12)
    np.testing.assert_allclose(g, -np.sin(x), rtol=1e-14)
    with fg.use_engine("numba"), pytest.raises(engines.UnsupportedKernel) as err:
        fl.materialize(cosm1(fl.asarray(x)) + 1.0)
    assert str(err.value) == (
        "engine 'numba' has no entry for op 'cosm1', which this kernel uses; "
        "use_engine('auto') runs it on 'numpy' (or add the op to the engine's op table)"
    )


def test_a_declaration_is_checked_before_anything_is_registered(declare):
    sp = pytest.importorskip("scipy.special")
    # (rules/special.py gives both a scalar_rule of their own: those must stay as they were)
    rules_before = {f: registry_rules.RRULES.get(f) for f in (sp.exp10, sp.expm1)}
    with pytest.raises(ValueError, match="takes 1 inputs: give one partial each"):
        declare(sp.exp10, None, None, numba="{0}")
    with pytest.raises(ValueError, match="the op name 'expm1' is held by another function"):
        declare(sp.expm1, lambda x, y: y + 1, numba="vm.expm1{f32}({0})")  # np.expm1's name
    with pytest.raises(ValueError, match="is the op 'exp' already"):
        declare(np.exp, lambda x, y: y, name="exp_again")
    assert {f: registry_rules.RRULES.get(f) for f in rules_before} == rules_before
    assert "exp10" not in ops.OPS and ops.BY_UFUNC[np.exp].name == "exp"
    declare(sp.expm1, lambda x, y: y + 1, name="sp_expm1", numba="vm.expm1{f32}({0})")
    assert ops.BY_UFUNC[sp.expm1] is ops.OPS["sp_expm1"] and ops.OPS["expm1"].ufunc is np.expm1
    x = np.linspace(-1.0, 1.0, 7)
    assert isinstance(sp.expm1(fl.asarray(x)), fl.LazyArray)
    np.testing.assert_allclose(fg.grad(lambda x: np.sum(sp.expm1(x)))(x), np.exp(x), rtol=1e-14)


def test_the_fingerprint_changes_with_every_field_of_an_entry(declare):
    before = ops.fingerprint()
    sig = unary_kernel("tanh", np.ones(3), F8).signature()
    key = numba_engine._key(sig)  # the disk cache's key of a kernel using tanh
    assert "tanh ufunc:tanh 1 True True result 'vm.tanh{f32}({0})'" in before
    # deg2rad's template is a function of the loop dtype: the text is what it fills in
    assert "({0} * {T}(0.017453292519943295))" in ops.fingerprint(["deg2rad"])
    for change in [
        {"numba": "vm.tanh{f32}({0}) "},
        {"numba": None},
        {"expensive": False},
        {"float_only": False},
    ]:
        fields = {"numba": "vm.tanh{f32}({0})", "expensive": True, "float_only": True, **change}
        declare(np.tanh, lambda x, y: 1 - y * y, **fields)
        assert ops.fingerprint() != before, change
        assert numba_engine._key(sig) != key, change  # no stale kernel loaded from disk
    declare(
        np.tanh, lambda x, y: 1 - y * y, numba="vm.tanh{f32}({0})", expensive=True, float_only=True
    )
    assert ops.fingerprint() == before and numba_engine._key(sig) == key

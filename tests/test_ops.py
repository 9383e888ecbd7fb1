"""The op table (``fusegrad.lazy.ops``): each entry agrees with its NumPy function, an engine
supports an op exactly when it has an entry for it, and adding an elementwise op to both engines
is one entry (the worked example of docs/architecture.md, ``scipy.special.ndtr``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.lazy as fl
from fusegrad.lazy import engines, ops
from fusegrad.lazy.engines import numba_codegen, numba_engine, numpy_blocked, registry
from fusegrad.lazy.kernel import Instr, Kernel, Output

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
    assert numba_codegen.op_expr("logaddexp", ["x", "y"], f4, plan) == "_logaddexp(x, y)"
    assert plan.helpers == {"_logaddexp", "vm"}  # the helper's own numba_math calls


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


@pytest.fixture
def ndtr(monkeypatch, tmp_path):
    """``scipy.special.ndtr`` added as docs/architecture.md's worked example adds it: one entry
    of the op table (its derivative is already a rule in rules/special.py). Kernels compile
    into a folder of their own: a test's entry is not part of the kernel cache key."""
    sp = pytest.importorskip("scipy.special")
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    op = ops.Op(
        "ndtr",
        sp.ndtr,
        1,
        expensive=True,
        float_only=True,
        numba="({T}(0.5) * math.erfc(-{0} * {T}(0.7071067811865476)))",
    )
    monkeypatch.setitem(ops.OPS, "ndtr", op)
    monkeypatch.setitem(ops.BY_UFUNC, sp.ndtr, op)
    return sp.ndtr


def test_an_op_added_as_one_entry_fuses_and_differentiates(ndtr, engine):
    if engine == "numba" and not numba_engine.available():
        pytest.skip("numba unavailable")
    x = np.linspace(-4.0, 4.0, 301)
    w = np.cos(x)
    lazy = ndtr(fl.asarray(x)) * 2.0
    assert isinstance(lazy, fl.LazyArray)  # a Map of the new op, not an eager call
    np.testing.assert_allclose(np.asarray(lazy), ndtr(x) * 2.0, rtol=1e-14, atol=1e-300)
    k = unary_kernel("ndtr", x, F8)
    assert engines.choose(k) == engine  # numba has an entry, so a named numba runs it

    def f(x):
        return np.sum(ndtr(x) * w)

    g = fg.grad(f)(x)
    np.testing.assert_allclose(g, w * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi), rtol=1e-13)
    h = 1e-6  # f is a sum of one term per point: central differences of every term at once
    fd = (ndtr(x + h) - ndtr(x - h)) * w / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-10)


@needs_numba
def test_the_new_op_runs_in_a_numba_kernel(ndtr):
    x = np.linspace(-6.0, 6.0, 1001)
    k = unary_kernel("ndtr", x, F8)
    assert numba_engine.supports(k)
    src = numba_codegen.generate_source(
        numba_codegen.analyse(1, ((F8, (False,)),), (), k.program, k.outputs)
    )
    assert "math.erfc(-x0 * np.float64(0.7071067811865476))" in src
    np.testing.assert_allclose(numba_engine.run(k)[0], ndtr(x), rtol=1e-14)

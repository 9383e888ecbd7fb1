"""The ``BroadcastThunk`` algebra: lazy under every listed operation, materialised once.

"Lazy" is checked two ways: the result is a ``BroadcastThunk`` (or a lazy node), and no kernel
ran while it was built (``fusegrad.lazy.recording()`` saw nothing).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad.lazy as fl
from fusegrad.lazy import LazyArray
from fusegrad.tangents import (
    BroadcastThunk,
    NoTangent,
    ProjectTo,
    Thunk,
    ZeroTangent,
    add,
    iadd,
    unthunk,
)

X = np.linspace(-1.0, 1.0, 6)
Y = np.linspace(0.5, 2.0, 4)


def bt_outer():
    """A 6×4 blow-up: ``x[:, None] * y[None, :]``."""
    x, y = fl.asarray(X), fl.asarray(Y)
    return BroadcastThunk(x[:, None] * y[None, :])


def dense_outer():
    return X[:, None] * Y[None, :]


def kernels(rec):
    return [e for e in rec if e["event"] == "kernel"]


def assert_lazy(v, want):
    assert isinstance(v, BroadcastThunk), type(v)
    assert isinstance(v.node, LazyArray)
    np.testing.assert_allclose(unthunk(v), want, rtol=1e-14, atol=1e-15)


OPS = {
    "bt + bt": (lambda b: b + bt_outer(), lambda d: d + d),
    "bt + array": (lambda b: b + Y, lambda d: d + Y),
    "array + bt": (lambda b: Y + b, lambda d: Y + d),
    "bt + scalar": (lambda b: b + 2.5, lambda d: d + 2.5),
    "scalar + bt": (lambda b: 2.5 + b, lambda d: 2.5 + d),
    "bt - bt": (lambda b: b - 2 * bt_outer(), lambda d: -d),
    "bt - array": (lambda b: b - Y, lambda d: d - Y),
    "scalar - bt": (lambda b: 1.0 - b, lambda d: 1.0 - d),
    "-bt": (lambda b: -b, lambda d: -d),
    "scalar * bt": (lambda b: 3.0 * b, lambda d: 3.0 * d),
    "bt * scalar": (lambda b: b * 3.0, lambda d: d * 3.0),
    "bt / scalar": (lambda b: b / 4.0, lambda d: d / 4.0),
    "bt * array": (lambda b: b * Y, lambda d: d * Y),
    "conj": (lambda b: b.conj(), lambda d: d),
    "real": (lambda b: b.real, lambda d: d),
    "imag": (lambda b: b.imag, lambda d: np.zeros_like(d)),
    "np.conj": (lambda b: np.conj(b), lambda d: d),
    "np.tanh": (lambda b: np.tanh(b), np.tanh),
    "np.exp": (lambda b: np.exp(b), np.exp),
    "np.maximum": (lambda b: np.maximum(b, 0.1), lambda d: np.maximum(d, 0.1)),
    "np.add(array, bt)": (lambda b: np.add(Y, b), lambda d: Y + d),
    "np.where": (lambda b: np.where(b > 0, b, 0.0), lambda d: np.where(d > 0, d, 0.0)),
    "sum axis 0": (lambda b: np.sum(b, axis=0), lambda d: d.sum(axis=0)),
    "sum axis 1": (lambda b: np.sum(b, axis=1), lambda d: d.sum(axis=1)),
    "sum keepdims": (
        lambda b: np.sum(b, axis=1, keepdims=True),
        lambda d: d.sum(axis=1, keepdims=True),
    ),
    "sum all": (lambda b: np.sum(b), lambda d: d.sum()),
    "vdot-style": (lambda b: np.sum(b * dense_outer()), lambda d: np.sum(d * d)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_stays_lazy(name):
    op, ref = OPS[name]
    with fl.recording() as rec:
        out = op(bt_outer())
    assert kernels(rec) == [], f"{name} ran a kernel while building"
    assert_lazy(out, ref(dense_outer()))


def test_complex_conj_real_imag_stay_lazy():
    z = fl.asarray(X + 1j * np.arange(6.0))
    b = BroadcastThunk(z[:, None] * fl.asarray(Y)[None, :])
    dense = (X + 1j * np.arange(6.0))[:, None] * Y[None, :]
    with fl.recording() as rec:
        c, r, i = b.conj(), b.real, b.imag
    assert kernels(rec) == []
    assert_lazy(c, np.conj(dense))
    assert_lazy(r, dense.real)
    assert_lazy(i, dense.imag)


def test_complex_conj_real_imag_values():
    z = fl.asarray(X + 1j * np.arange(6.0))
    b = BroadcastThunk(z[:, None] * fl.asarray(Y)[None, :])
    dense = (X + 1j * np.arange(6.0))[:, None] * Y[None, :]
    with fl.recording() as rec:
        c = b.conj()
    assert kernels(rec) == []
    assert_lazy(c, np.conj(dense))
    np.testing.assert_allclose(unthunk(b.real), dense.real)
    np.testing.assert_allclose(unthunk(b.imag), dense.imag)
    p = ProjectTo(np.zeros((6, 4)))(b)
    assert unthunk(p).dtype == np.float64
    np.testing.assert_allclose(unthunk(p), dense.real)


def test_zeros_are_identities():
    b = bt_outer()
    assert b + ZeroTangent() is b
    assert ZeroTangent() + b is b
    assert b - ZeroTangent() is b
    assert isinstance(b * ZeroTangent(), ZeroTangent)
    assert unthunk(add(b, NoTangent())) is not None


def test_sum_of_blow_up_is_one_pass_without_n2_allocation():
    x, y = fl.asarray(X), fl.asarray(Y)
    b = BroadcastThunk(np.tanh(x[:, None] - y[None, :]))
    rows, cols = np.sum(b, axis=1), np.sum(b, axis=0)
    with fl.recording() as rec:
        r, c = fl.materialize(rows.node, cols.node)
    (k,) = kernels(rec)
    assert k["domain"] == (6, 4) and k["bytes"] == (6 + 4) * 8
    d = np.tanh(X[:, None] - Y[None, :])
    np.testing.assert_allclose(r, d.sum(1))
    np.testing.assert_allclose(c, d.sum(0))


# ProjectTo


def test_project_keeps_float32_lazy():
    x32 = fl.asarray(X.astype(np.float32))
    b = BroadcastThunk(x32 * 2)
    with fl.recording() as rec:
        p = ProjectTo(np.zeros(6, np.float32))(b)
    assert kernels(rec) == []
    assert isinstance(p, BroadcastThunk) and p.dtype == np.float32
    np.testing.assert_array_equal(unthunk(p), X.astype(np.float32) * 2)


def test_project_casts_float64_to_float32_primal_lazily():
    with fl.recording() as rec:
        p = ProjectTo(np.zeros((6, 4), np.float32))(bt_outer())
    assert kernels(rec) == []
    assert isinstance(p, BroadcastThunk) and p.dtype == np.float32
    np.testing.assert_allclose(unthunk(p), dense_outer().astype(np.float32), rtol=1e-7)


def test_project_complex_onto_real_drops_imaginary_part_lazily():
    b = BroadcastThunk(fl.asarray(X) * (1 + 2j))
    with fl.recording() as rec:
        p = ProjectTo(np.zeros(6))(b)
    assert kernels(rec) == []
    assert isinstance(p, BroadcastThunk) and p.dtype == np.float64
    np.testing.assert_allclose(unthunk(p), X)


def test_project_reshapes_a_size_one_axis():
    b = BroadcastThunk(fl.asarray(X) * 2)
    with fl.recording() as rec:
        p = ProjectTo(np.zeros((6, 1)))(b)
    assert kernels(rec) == []
    assert isinstance(p, BroadcastThunk) and p.shape == (6, 1)
    np.testing.assert_array_equal(unthunk(p), (X * 2)[:, None])


def test_project_rejects_a_real_reshape():
    with pytest.raises(ValueError, match="shape"):
        ProjectTo(np.zeros(24))(bt_outer())


def test_project_onto_python_float_gives_a_float():
    b = BroadcastThunk(np.sum(fl.asarray(X) ** 2))
    p = ProjectTo(1.0)(b)
    assert isinstance(p, float) and p == pytest.approx(np.sum(X**2))


# iadd, thunks, unthunk


def test_iadd_into_owned_array_is_one_fused_pass():
    acc = add(np.ones((6, 4)), np.ones((6, 4)))  # owned by fusegrad
    with fl.recording() as rec:
        out = iadd(acc, bt_outer())
    np.testing.assert_allclose(out, 2 + dense_outer())
    (k,) = kernels(rec)  # acc is an input of the kernel that computes the thunk
    assert (6, 4) in k["inputs"] and k["ops"][-1] == "add"
    assert iadd(out, 1.0) is out  # the result is owned: later additions are in place


def test_iadd_never_writes_into_a_user_array():
    user = np.ones((6, 4))
    out = iadd(user, bt_outer())
    np.testing.assert_array_equal(user, np.ones((6, 4)))
    np.testing.assert_allclose(out, 1 + dense_outer())


def test_add_of_thunks_stays_lazy():
    with fl.recording() as rec:
        s = add(bt_outer(), bt_outer())
    assert kernels(rec) == []
    assert_lazy(s, 2 * dense_outer())


def test_double_thunk_unthunks_fully():
    b = bt_outer()
    t = Thunk(lambda: Thunk(lambda: b))
    v = unthunk(t)
    assert type(v) is np.ndarray
    np.testing.assert_allclose(v, dense_outer())
    assert type(unthunk(Thunk(lambda: b))) is np.ndarray


def test_unthunk_materialises_once():
    b = BroadcastThunk(np.exp(fl.asarray(X))[:, None] * fl.asarray(Y)[None, :])
    with fl.recording() as rec:
        first = unthunk(b)
        second = unthunk(b)
        third = np.asarray(b)
    assert first is second
    np.testing.assert_array_equal(third, first)
    assert len(kernels(rec)) == 1 + sum(1 for e in rec if e["event"] == "store")

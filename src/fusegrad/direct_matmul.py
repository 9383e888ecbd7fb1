"""``a @ b`` as ``jit`` records it: fused products where there is no real matrix product, else
bare ``np.matmul`` calls, not matmul's rule run again.

A product with a contraction of length 1 (an outer product, ``dY @ wᵀ`` of a one-column ``w``)
or with one row or column (a matrix-vector product: ``h @ w``, ``Xᵀ @ dY`` of a one-column
``dY``) reads each element of the matrix once for a multiply-add: BLAS is no faster than a fused
kernel there, and a BLAS call writes its result out for the next kernel to read back. Those
(``degenerate``) are recorded as lazy products and sums (``lazy_rule``), so the planner fuses
them with the elementwise work around them: ``mean((tanh(X @ W1 + b1) @ W2 + b2 - y)**2)``
with a one-column ``W2`` computes ``tanh`` and its row products with ``W2`` in one pass, and
``dZ`` with the sums ``W2``'s and ``b1``'s gradients need in another.

A replayed rule step costs its rule's Python (the registry, thunks, operand promotion,
projection: ~20 us a matmul and its pullback) around a BLAS call of ~1 us on small matrices.
For the common case, real matrices and vectors of one float dtype, the forward step here is
``np.matmul(a, b)`` and the pullback step ``dY @ Bᵀ`` and ``Aᵀ @ dY`` for the arguments that are
differentiated, with 1-d operands promoted as matmul's rule promotes them (``rules/linalg.py``),
so the BLAS calls are the same. ``jit`` records each against the rule on the same operands
(``replay.step(..., reference=...)``): results that differ bit for bit, or in layout, make the
rule the step instead.

Example::

    >>> a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    >>> y, pb = forward(a, b)
    >>> y
    array([ 5., 14.])
    >>> da, db = backward((True, True), pb, np.ones(2))
    >>> da.tolist(), db.tolist()
    ([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [3.0, 5.0, 7.0])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .lazy import LazyArray, Leaf, asarray, materialize_many, replay
from .tangents import AbstractZero, ZeroTangent, is_lazy_thunk, unthunk

_FLOATS = (np.dtype("float32"), np.dtype("float64"))


def applies(f: Callable, args: tuple, kwargs: dict) -> bool:
    """Whether ``f(*args, **kwargs)`` is a matmul this module replays: two real matrices or a
    matrix and a vector (not two vectors: NumPy's result is then a scalar) of one float dtype.

    >>> applies(np.matmul, (np.ones((2, 2)), np.ones(2)), {})
    True
    >>> applies(np.matmul, (np.ones((2, 2)), np.ones(2, np.float32)), {})
    False
    """
    if f is not np.matmul or kwargs or len(args) != 2:
        return False
    a, b = args
    dims = (getattr(a, "ndim", 0), getattr(b, "ndim", 0))
    return (
        dims in ((2, 2), (1, 2), (2, 1))
        and getattr(a, "size", 0) > 0
        and getattr(b, "size", 0) > 0
        and getattr(a, "dtype", None) in _FLOATS
        and getattr(a, "dtype", None) == getattr(b, "dtype", None)
    )


def _vjp(a: np.ndarray, b: np.ndarray, ct: np.ndarray) -> tuple:
    return tuple(backward((True, True), functools.partial(_vjp, a, b), ct))


def forward(a: np.ndarray, b: np.ndarray, outs: list | None = None) -> list:
    """``[a @ b, pullback]``: the value (written into ``outs[0]`` when given), and the pullback
    as a function of the cotangent (whose operands ``backward`` reads)."""
    y = np.matmul(a, b) if outs is None or outs[0] is None else np.matmul(a, b, out=outs[0])
    return [y, functools.partial(_vjp, a, b)]


def is_vjp(pb: Any) -> bool:
    """Whether ``pb`` is a pullback ``forward`` made."""
    return isinstance(pb, functools.partial) and pb.func is _vjp


def operands(pb: Any) -> tuple[np.ndarray, np.ndarray]:
    """The operands ``a``, ``b`` of the product whose pullback is ``pb``."""
    return pb.args[0], pb.args[1]


def backward(needed: tuple, pb: Any, ct: np.ndarray, outs: list | None = None) -> list:
    """The cotangents of the differentiated operands (``needed``) of ``a @ b``, in order, each
    a new array of its operand's shape (or the one ``outs`` gives for it): ``dA = dY @ Bᵀ``,
    ``dB = Aᵀ @ dY``."""
    a, b = pb.args
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    dy = ct.reshape(1, -1) if a.ndim == 1 else ct.reshape(-1, 1) if b.ndim == 1 else ct
    given = iter(outs or ())
    out = []
    if needed[0]:
        da = next(given, None)
        if da is None:
            da = np.empty(a.shape, np.result_type(dy, b))
        np.matmul(dy, b2.T, out=da if a.ndim == 2 else da.reshape(a2.shape))
        out.append(da)
    if needed[1]:
        db = next(given, None)
        if db is None:
            db = np.empty(b.shape, np.result_type(a, dy))
        np.matmul(a2.T, dy, out=db if b.ndim == 2 else db.reshape(b2.shape))
        out.append(db)
    return out


def forward_products(a: np.ndarray, b: np.ndarray) -> list:
    """``forward``'s value as a product (``replay.step(..., products=...)``)."""
    return [(0, a, b, False, False)]


def backward_products(needed: tuple, pb: Any, ct: np.ndarray) -> list:
    """``backward``'s cotangents as products of 2-d operands: ``dY @ Bᵀ``, ``Aᵀ @ dY``."""
    a, b = pb.args
    if a.ndim != 2 or b.ndim != 2:
        return []
    out, k = [], 0
    if needed[0]:
        out.append((k, ct, b, False, True))
        k += 1
    if needed[1]:
        out.append((k, a, ct, True, False))
    return out


def _matrix_shapes(a: Any, b: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """The shapes of ``a`` and ``b`` with 1-d operands promoted as matmul promotes them."""
    ashape, bshape = tuple(a.shape), tuple(b.shape)
    a2 = (1, ashape[0]) if len(ashape) == 1 else (ashape[0], ashape[1])
    b2 = (bshape[0], 1) if len(bshape) == 1 else (bshape[0], bshape[1])
    return a2, b2


def degenerate(a: Any, b: Any) -> bool:
    """Whether ``a @ b`` (operands ``applies`` accepts) has a contraction of length 1 or a
    single row or column: no product BLAS computes faster than a fused kernel.

    >>> degenerate(np.ones((5, 3)), np.ones((3, 1))), degenerate(np.ones((5, 3)), np.ones((3, 2)))
    (True, False)
    """
    (m, k), (_, n) = _matrix_shapes(a, b)
    return k == 1 or m == 1 or n == 1


def _lazy(x: Any) -> Any:
    """A lazy value for ``x`` (an array, a lazy value, a thunk of one)."""
    x = x.node if is_lazy_thunk(x) else unthunk(x)
    return x if isinstance(x, LazyArray) else asarray(x)


def _product(a2: Any, b2: Any) -> Any:
    """``a2 @ b2`` of lazy matrices ``(m, k) @ (k, n)`` with ``k``, ``m`` or ``n`` equal to 1,
    as a broadcast product (summed over the contraction) over the domain of the larger operand
    in its own layout."""
    k, n = a2.shape[1], b2.shape[1]
    if k == 1:
        return a2 * b2  # an outer product: each element is one product, as BLAS computes it
    if n == 1:
        return np.sum(a2 * b2.reshape(1, k), axis=1, keepdims=True)
    return np.sum(a2.reshape(k, 1) * b2, axis=0, keepdims=True)  # m == 1


def _product_ta(dy: Any, b2: Any) -> Any:
    """``dy @ b2ᵀ`` of lazy ``(m, n)`` and ``(k, n)``, degenerate as ``_product``."""
    n, k = dy.shape[1], b2.shape[0]
    if n == 1:
        return dy * b2.reshape(1, k)
    if k == 1:
        return np.sum(dy * b2, axis=1, keepdims=True)
    return np.sum(b2 * dy, axis=1, keepdims=True).reshape(1, k)  # m == 1


def _product_tb(a2: Any, dy: Any) -> Any:
    """``a2ᵀ @ dy`` of lazy ``(m, k)`` and ``(m, n)``, degenerate as ``_product``."""
    m, k, n = a2.shape[0], a2.shape[1], dy.shape[1]
    if m == 1:
        return a2.reshape(k, 1) * dy
    if n == 1:
        return np.sum(a2 * dy, axis=0, keepdims=True).reshape(k, 1)
    return np.sum(a2 * dy, axis=0, keepdims=True)  # k == 1


def lazy_rule(a: Any, b: Any, needed: tuple) -> tuple:
    """``(a @ b, pullback)`` for a ``degenerate`` product as lazy broadcast products and sums,
    the cotangents ``dY @ Bᵀ`` and ``Aᵀ @ dY`` (degenerate too) for the operands ``needed``
    says are differentiated (zeros for the others). An operand that is a lazy expression is
    evaluated with the product, in one pass (what the pullback reads is then stored, not
    computed again for each cotangent).

    >>> y, pb = lazy_rule(np.ones((2, 3)), np.arange(3.0), (True, True))
    >>> np.asarray(y).tolist(), [np.asarray(g).tolist() for g in pb(np.ones(2))]
    ([3.0, 3.0], [[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [2.0, 2.0, 2.0]])
    """
    a2s, b2s = _matrix_shapes(a, b)
    a, b = _lazy(a), _lazy(b)
    y = _product(a.reshape(a2s), b.reshape(b2s))
    yshape = tuple(a.shape[:-1]) + (tuple(b.shape[1:]) if b.ndim == 2 else ())
    if tuple(y.shape) != yshape:
        y = y.reshape(yshape)
    pending = [x for x in (a, b) if not isinstance(x, Leaf) and x.cached is None]
    if pending:
        with replay.sanctioned(always=True):  # as a step's operands: recorded kernels
            materialize_many([*pending, y])  # (each node keeps its value: ``cached``)
    a2, b2 = a.reshape(a2s), b.reshape(b2s)

    def pullback(ct: Any) -> tuple:
        if isinstance(ct, AbstractZero):
            return (ct, ct)
        dy = _lazy(ct)
        if not isinstance(dy, Leaf) and dy.cached is None:
            # evaluated here, as a step's operand: a chain of such products (an RNN's
            # cotangents through h @ Wh) would otherwise nest one sum inside the next
            with replay.sanctioned(always=True):
                materialize_many([dy])
        dy = dy.reshape((a2s[0], b2s[1]))
        da = _product_ta(dy, b2).reshape(a.shape) if needed[0] else ZeroTangent()
        db = _product_tb(a2, dy).reshape(b.shape) if needed[1] else ZeroTangent()
        return (da, db)

    return y, pullback

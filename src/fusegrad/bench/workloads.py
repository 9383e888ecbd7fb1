"""The benchmark workloads: functions, inputs, hand-written NumPy gradients, torch versions.

Each function is written once against a NumPy-like namespace ``np_`` so that the same source
serves NumPy (which fusegrad traces), ``autograd.numpy`` and ``jax.numpy``. PyTorch needs its own
spelling (``torch.logaddexp`` has no scalar form, ``dim`` instead of ``axis``), kept beside it.

Example:
    >>> import numpy as np
    >>> wl = WORKLOADS["W1"]
    >>> args = wl.make_inputs(4)
    >>> float(wl.fun(np, *args)) == float(np.sum((1 - args[0]) / 2))
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

SEED = 20261129
# Rows per block in the hand gradients: about 2 MiB of float64 scratch per temporary.
_BLOCK_ELEMS = 1 << 18


@dataclass(frozen=True)
class Workload:
    """One benchmark function with everything needed to run and check it.

    ``fun(np_, *args)`` is the scalar function; ``argnums`` the differentiated positions;
    ``hand_grad(*args)`` the reference gradient (a tuple, one entry per argnum);
    ``torch_fun(torch, *args)`` the PyTorch spelling; ``big_elems(n)`` the element count of the
    largest broadcast intermediate an eager library materialises; ``eager_arrays`` how many of
    those an eager AD library keeps alive at its peak (used only to skip cases that cannot fit);
    ``check_scale(n)`` a magnitude the gradient error is measured against when the true gradient
    cancels to zero.

    Example:
        >>> WORKLOADS["W3"].argnums
        (0, 1, 2)
    """

    name: str
    formula: str
    wrt: str
    fun: Callable
    torch_fun: Callable
    hand_grad: Callable
    make_inputs: Callable
    argnums: int | tuple
    quick_sizes: tuple
    full_sizes: tuple
    big_elems: Callable
    eager_arrays: float
    pairwise: bool
    in_elems: Callable = field(default=lambda n: n)
    grad_elems: Callable | None = None
    tiny_size: int = 8
    check_scale: Callable = field(default=lambda n: 0.0)
    size_text: Callable = field(default=lambda n: f"n = {n:,}")
    size_axis: str = "N"  # what the size is, on the plots' x axis
    # Sizes that stand for the workload in the report's summary (besides its largest).
    summary_sizes: tuple = ()
    # Sizes up to this run in ``--rounds`` rounds (each library's fastest kept): cases timed in
    # microseconds to milliseconds, where a noisy second on a shared machine moves a ratio 2x.
    rounds_upto: int = 0

    @property
    def argnum_tuple(self) -> tuple:
        """The differentiated positions as a tuple.

        Example:
            >>> WORKLOADS["W1"].argnum_tuple
            (0,)
        """
        return self.argnums if isinstance(self.argnums, tuple) else (self.argnums,)

    def size_label(self, n: int) -> str:
        """How size ``n`` is named in the report (the MLP's layer widths, the RNN's steps).

        Example:
            >>> WORKLOADS["W1"].size_label(1000), WORKLOADS["MLP"].size_label(32)
            ('n = 1,000', 'batch 32, 10→16→1')
        """
        return self.size_text(n)

    def input_bytes(self, n: int) -> int:
        """Bytes of the float64 inputs at size ``n``.

        Example:
            >>> WORKLOADS["W1"].input_bytes(1000)
            8000
        """
        return 8 * int(self.in_elems(n))

    def grad_bytes(self, n: int) -> int:
        """Bytes of the returned float64 gradients at size ``n``.

        Example:
            >>> WORKLOADS["W4"].grad_bytes(1000)
            408
        """
        return 8 * int((self.grad_elems or self.in_elems)(n))


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _rows_per_block(n_cols: int) -> int:
    return max(1, _BLOCK_ELEMS // max(1, n_cols))


# --- W1 -------------------------------------------------------------------------------------


def w1(np_, x):
    """``sum((1 - x) / 2)``.

    Example:
        >>> import numpy as np
        >>> float(w1(np, np.array([1.0, 3.0])))
        -1.0
    """
    return np_.sum((1 - x) / 2)


def w1_torch(torch, x):
    return torch.sum((1 - x) / 2)


def w1_hand(x):
    return (np.full_like(x, -0.5),)


def w1_inputs(n):
    return (_rng().standard_normal(n),)


# --- W2 -------------------------------------------------------------------------------------


def w2(np_, v):
    """``sum((v[:, None] - v[None, :]) / 2)`` — identically zero, its gradient too.

    Example:
        >>> import numpy as np
        >>> float(w2(np, np.array([1.0, 2.0, 5.0])))
        0.0
    """
    return np_.sum((v[:, None] - v[None, :]) / 2)


def w2_torch(torch, v):
    return torch.sum((v[:, None] - v[None, :]) / 2)


def w2_hand(v):
    # The adjoint of the broadcast subtraction is the constant 1/2: rows give +n/2, columns -n/2.
    n = v.shape[0]
    return (np.full_like(v, 0.5 * n) - np.full_like(v, 0.5 * n),)


def vec_inputs(n):
    return (_rng().standard_normal(n),)


# --- W2T ------------------------------------------------------------------------------------


def w2t(np_, v):
    """``sum(tanh(v[:, None] - v[None, :]))``.

    Example:
        >>> import numpy as np
        >>> abs(float(w2t(np, np.array([0.1, 0.7])))) < 1e-15
        True
    """
    return np_.sum(np_.tanh(v[:, None] - v[None, :]))


def w2t_torch(torch, v):
    return torch.sum(torch.tanh(v[:, None] - v[None, :]))


def w2t_hand(v):
    n = v.shape[0]
    rows = np.empty(n)
    cols = np.zeros(n)
    step = _rows_per_block(n)
    for i0 in range(0, n, step):
        t = np.subtract.outer(v[i0 : i0 + step], v)
        np.tanh(t, out=t)
        np.multiply(t, t, out=t)
        np.subtract(1.0, t, out=t)
        rows[i0 : i0 + step] = t.sum(axis=1)
        cols += t.sum(axis=0)
    return (rows - cols,)


# --- W3 -------------------------------------------------------------------------------------


def w3(np_, x, y, s):
    """Gaussian kernel sum ``sum(exp(-(x[:, None] - y[None, :])**2 / (2*s**2)))``.

    Example:
        >>> import numpy as np
        >>> float(w3(np, np.zeros(2), np.zeros(3), 1.0))
        6.0
    """
    return np_.sum(np_.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


def w3_torch(torch, x, y, s):
    return torch.sum(torch.exp(-((x[:, None] - y[None, :]) ** 2) / (2 * s**2)))


def w3_hand(x, y, s):
    n = x.shape[0]
    gx = np.empty(n)
    gy = np.zeros(y.shape[0])
    gs = 0.0
    c = -1.0 / (2 * s * s)
    step = _rows_per_block(y.shape[0])
    for i0 in range(0, n, step):
        d = np.subtract.outer(x[i0 : i0 + step], y)
        e = np.multiply(d, d)
        np.multiply(e, c, out=e)
        np.exp(e, out=e)
        ed = np.multiply(e, d, out=e)
        gx[i0 : i0 + step] = ed.sum(axis=1)
        gy += ed.sum(axis=0)
        gs += np.vdot(ed, d)
    return (-gx / s**2, gy / s**2, np.float64(gs / s**3))


def w3_inputs(n):
    rng = _rng()
    return (rng.standard_normal(n), rng.standard_normal(n), np.float64(1.3))


# --- W4 -------------------------------------------------------------------------------------

W4_FEATURES = 50


def w4(np_, w, b, X, t):
    """Logistic loss ``mean(logaddexp(0, -t * (X @ w + b)))``.

    Example:
        >>> import numpy as np
        >>> round(float(w4(np, np.zeros(2), 0.0, np.ones((3, 2)), np.ones(3))), 6)
        0.693147
    """
    return np_.mean(np_.logaddexp(0.0, -t * (X @ w + b)))


def w4_torch(torch, w, b, X, t):
    m = -t * (X @ w + b)
    return torch.mean(torch.logaddexp(torch.zeros((), dtype=m.dtype), m))


def w4_hand(w, b, X, t):
    m = X @ w
    m += b
    m *= -t
    # sigmoid(m) = (1 + tanh(m/2)) / 2, overflow-free
    m *= 0.5
    np.tanh(m, out=m)
    m += 1.0
    m *= -0.5 / X.shape[0]
    m *= t
    return (X.T @ m, np.float64(m.sum()))


def w4_inputs(n):
    rng = _rng()
    X = rng.standard_normal((n, W4_FEATURES))
    w_true = rng.standard_normal(W4_FEATURES) / math.sqrt(W4_FEATURES)
    t = np.where(X @ w_true + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return (0.1 * rng.standard_normal(W4_FEATURES), np.float64(0.2), X, t)


# --- LJ -------------------------------------------------------------------------------------


def lj(np_, P):
    """Lennard-Jones energy (sigma = epsilon = 1) of positions ``P`` (N×3), over all i≠j pairs.

    The diagonal is masked twice: ``r2`` is replaced by 1 there so that neither the value nor
    the derivative meets ``1/0`` (a single ``where`` on the energy would give ``0 * inf = nan``
    in the reverse pass).

    Example:
        >>> import numpy as np
        >>> float(lj(np, np.array([[0.0, 0, 0], [1.0, 0, 0]])))
        0.0
    """
    d = P[:, None, :] - P[None, :, :]
    r2 = np_.sum(d**2, axis=-1)
    off = r2 > 0
    inv6 = (1.0 / np_.where(off, r2, 1.0)) ** 3
    e = 4.0 * (inv6 * inv6 - inv6)
    return 0.5 * np_.sum(np_.where(off, e, 0.0))


def lj_torch(torch, P):
    d = P[:, None, :] - P[None, :, :]
    r2 = torch.sum(d**2, dim=-1)
    off = r2 > 0
    inv6 = (1.0 / torch.where(off, r2, 1.0)) ** 3
    e = 4.0 * (inv6 * inv6 - inv6)
    return 0.5 * torch.sum(torch.where(off, e, 0.0))


def lj_hand(P):
    # dE/dP_i = sum_j c_ij (P_i - P_j) = P_i * rowsum(c)_i - (c @ P)_i
    # with c = (24 r^-6 - 48 r^-12) / r^2: no N×N×3 temporary, one matmul per block
    n = P.shape[0]
    g = np.empty_like(P)
    step = _rows_per_block(3 * n)
    for i0 in range(0, n, step):
        blk = P[i0 : i0 + step]
        # r2 from differences, not |a|^2 + |b|^2 - 2ab, which loses digits for near pairs
        d = blk[:, None, :] - P[None, :, :]
        r2 = np.einsum("ijk,ijk->ij", d, d)
        r2[np.arange(blk.shape[0]), np.arange(i0, i0 + blk.shape[0])] = np.inf
        inv = 1.0 / r2
        inv6 = inv * inv * inv
        c = (24.0 * inv6 - 48.0 * inv6 * inv6) * inv
        g[i0 : i0 + step] = blk * c.sum(axis=1)[:, None] - c @ P
    return (g,)


def lj_inputs(n):
    # A jittered cubic lattice: no two particles closer than about 0.9 sigma, so the energy is tame.
    m = math.ceil(n ** (1 / 3))
    grid = np.stack(np.meshgrid(*[np.arange(m)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    rng = _rng()
    P = 1.12 * grid[:n].astype(np.float64) + rng.uniform(-0.05, 0.05, size=(n, 3))
    return (P,)


# --- MLP ------------------------------------------------------------------------------------

# (inputs, hidden) per batch size: the three networks of issue 16's table. Other batch sizes
# (the tiny warm-up, --sizes) take the nearest smaller network.
MLP_DIMS = {32: (10, 16), 256: (100, 128), 4096: (100, 256)}


def mlp_dims(batch: int) -> tuple[int, int]:
    """(inputs, hidden units) of the MLP trained at ``batch``.

    Example:
        >>> mlp_dims(256), mlp_dims(8)
        ((100, 128), (10, 16))
    """
    fits = [b for b in MLP_DIMS if b <= batch]
    return MLP_DIMS[max(fits)] if fits else MLP_DIMS[min(MLP_DIMS)]


def mlp(np_, W1, b1, W2, b2, X, y):
    """One training step's loss: ``mean((tanh(X @ W1 + b1) @ W2 + b2 - y)**2)``.

    Example:
        >>> import numpy as np
        >>> float(mlp(np, np.zeros((2, 3)), np.zeros(3), np.zeros((3, 1)), np.zeros(1),
        ...           np.ones((4, 2)), np.ones((4, 1))))
        1.0
    """
    return np_.mean((np_.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)


def mlp_torch(torch, W1, b1, W2, b2, X, y):
    return torch.mean((torch.tanh(X @ W1 + b1) @ W2 + b2 - y) ** 2)


def mlp_hand(W1, b1, W2, b2, X, y):
    a = np.tanh(X @ W1 + b1)
    dout = (a @ W2 + b2 - y) * (2.0 / y.size)
    da = dout @ W2.T
    dz = da * (1.0 - a * a)
    return (X.T @ dz, dz.sum(axis=0), a.T @ dout, dout.sum(axis=0))


def mlp_inputs(batch, dims=None):
    """``(W1, b1, W2, b2, X, y)`` for a batch, its sizes ``(inputs, hidden units)`` as
    ``mlp_dims`` gives them unless ``dims`` names them.

    Example:
        >>> [a.shape for a in mlp_inputs(4, (3, 5))]
        [(3, 5), (5,), (5, 1), (1,), (4, 3), (4, 1)]
    """
    n_in, hidden = dims or mlp_dims(batch)
    rng = _rng()
    X = rng.standard_normal((batch, n_in))
    W1 = rng.standard_normal((n_in, hidden)) / math.sqrt(n_in)
    b1 = 0.1 * rng.standard_normal(hidden)
    W2 = rng.standard_normal((hidden, 1)) / math.sqrt(hidden)
    b2 = 0.1 * rng.standard_normal(1)
    y = rng.standard_normal((batch, 1))
    return (W1, b1, W2, b2, X, y)


def _mlp_params(batch):
    n_in, hidden = mlp_dims(batch)
    return n_in * hidden + 2 * hidden + 1


# --- RNN ------------------------------------------------------------------------------------

RNN_BATCH, RNN_INPUT, RNN_HIDDEN = 16, 32, 64


def rnn(np_, Wx, Wh, b, wo, xs, y):
    """A tanh RNN unrolled over ``len(xs)`` steps, squared loss on a linear read-out of the
    last state: ``h = tanh(x_t @ Wx + h @ Wh + b)``, ``mean((h @ wo - y)**2)``.

    Example:
        >>> import numpy as np
        >>> float(rnn(np, np.zeros((2, 3)), np.zeros((3, 3)), np.zeros(3), np.zeros(3),
        ...           np.ones((5, 4, 2)), np.ones(4)))
        1.0
    """
    h = np_.tanh(xs[0] @ Wx + b)
    for t in range(1, xs.shape[0]):
        h = np_.tanh(xs[t] @ Wx + h @ Wh + b)
    return np_.mean((h @ wo - y) ** 2)


def rnn_torch(torch, Wx, Wh, b, wo, xs, y):
    h = torch.tanh(xs[0] @ Wx + b)
    for t in range(1, xs.shape[0]):
        h = torch.tanh(xs[t] @ Wx + h @ Wh + b)
    return torch.mean((h @ wo - y) ** 2)


def rnn_hand(Wx, Wh, b, wo, xs, y):
    # backpropagation through time over the stored states
    hs = [np.tanh(xs[0] @ Wx + b)]
    for t in range(1, xs.shape[0]):
        hs.append(np.tanh(xs[t] @ Wx + hs[-1] @ Wh + b))
    dout = (hs[-1] @ wo - y) * (2.0 / y.size)
    gwo = hs[-1].T @ dout
    dh = np.outer(dout, wo)
    gWx = np.zeros_like(Wx)
    gWh = np.zeros_like(Wh)
    gb = np.zeros_like(b)
    for t in range(xs.shape[0] - 1, -1, -1):
        dz = dh * (1.0 - hs[t] * hs[t])
        gWx += xs[t].T @ dz
        gb += dz.sum(axis=0)
        if t:
            gWh += hs[t - 1].T @ dz
            dh = dz @ Wh.T
    return (gWx, gWh, gb, gwo)


def rnn_inputs(steps):
    rng = _rng()
    xs = rng.standard_normal((steps, RNN_BATCH, RNN_INPUT))
    Wx = rng.standard_normal((RNN_INPUT, RNN_HIDDEN)) / math.sqrt(RNN_INPUT)
    Wh = 0.9 * rng.standard_normal((RNN_HIDDEN, RNN_HIDDEN)) / math.sqrt(RNN_HIDDEN)
    b = 0.1 * rng.standard_normal(RNN_HIDDEN)
    wo = rng.standard_normal(RNN_HIDDEN) / math.sqrt(RNN_HIDDEN)
    y = rng.standard_normal(RNN_BATCH)
    return (Wx, Wh, b, wo, xs, y)


_RNN_PARAMS = RNN_INPUT * RNN_HIDDEN + RNN_HIDDEN**2 + 2 * RNN_HIDDEN


WORKLOADS: dict[str, Workload] = {
    wl.name: wl
    for wl in [
        Workload(
            "W1", "sum((1 - x) / 2)", "x", w1, w1_torch, w1_hand, w1_inputs, 0,
            quick_sizes=(1000, 1_000_000), full_sizes=(1000, 10_000_000),
            big_elems=lambda n: n, eager_arrays=3, pairwise=False, summary_sizes=(1000,),
            rounds_upto=1000,
        ),
        Workload(
            "W2", "sum((v[:, None] - v[None, :]) / 2)", "v", w2, w2_torch, w2_hand, vec_inputs, 0,
            quick_sizes=(500, 2000), full_sizes=(2000, 8000),
            big_elems=lambda n: n * n, eager_arrays=3, pairwise=True,
            check_scale=lambda n: 0.5 * n,
        ),
        Workload(
            "W2T", "sum(tanh(v[:, None] - v[None, :]))", "v", w2t, w2t_torch, w2t_hand,
            vec_inputs, 0,
            quick_sizes=(500, 2000), full_sizes=(2000, 8000),
            big_elems=lambda n: n * n, eager_arrays=5, pairwise=True,
            check_scale=lambda n: float(n),
        ),
        Workload(
            "W3", "sum(exp(-(x[:, None] - y[None, :])**2 / (2*s**2)))", "x, y, s", w3, w3_torch,
            w3_hand, w3_inputs, (0, 1, 2),
            quick_sizes=(500, 2000), full_sizes=(2000, 4000, 8000),
            big_elems=lambda n: n * n, eager_arrays=7, pairwise=True,
            in_elems=lambda n: 2 * n + 1,
        ),
        Workload(
            "W4", "mean(logaddexp(0, -t * (X @ w + b)))", "w, b", w4, w4_torch, w4_hand,
            w4_inputs, (0, 1),
            quick_sizes=(20_000,), full_sizes=(200_000,),
            big_elems=lambda n: n * W4_FEATURES, eager_arrays=1.5, pairwise=False, tiny_size=16,
            in_elems=lambda n: n * (W4_FEATURES + 1) + W4_FEATURES + 1,
            grad_elems=lambda n: W4_FEATURES + 1,
        ),
        Workload(
            "LJ", "Lennard-Jones energy of P (N×3), forces = -grad", "P", lj, lj_torch, lj_hand,
            lj_inputs, 0,
            quick_sizes=(250, 1000), full_sizes=(1000, 4000),
            big_elems=lambda n: 3 * n * n, eager_arrays=6, pairwise=True,
            in_elems=lambda n: 3 * n,
        ),
        Workload(
            "MLP", "mean((tanh(X@W1+b1)@W2+b2 - y)**2)", "W1, b1, W2, b2", mlp, mlp_torch,
            mlp_hand, mlp_inputs, (0, 1, 2, 3),
            quick_sizes=tuple(MLP_DIMS), full_sizes=tuple(MLP_DIMS),
            big_elems=lambda n: n * mlp_dims(n)[1], eager_arrays=3, pairwise=False,
            in_elems=lambda n: n * (mlp_dims(n)[0] + 1) + _mlp_params(n),
            grad_elems=_mlp_params,
            size_text=lambda n: "batch {}, {}→{}→1".format(n, *mlp_dims(n)),
            size_axis="batch (with the network: 10→16→1, 100→128→1, 100→256→1)",
            summary_sizes=tuple(MLP_DIMS), rounds_upto=max(MLP_DIMS),
        ),
        Workload(
            "RNN", "h = tanh(x_t@Wx + h@Wh + b) over the steps; mean((h@wo - y)**2)",
            "Wx, Wh, b, wo", rnn, rnn_torch, rnn_hand, rnn_inputs, (0, 1, 2, 3),
            quick_sizes=(100,), full_sizes=(100,),
            big_elems=lambda n: n * RNN_BATCH * RNN_HIDDEN, eager_arrays=4, pairwise=False,
            in_elems=lambda n: n * RNN_BATCH * RNN_INPUT + _RNN_PARAMS + RNN_BATCH,
            grad_elems=lambda n: _RNN_PARAMS, tiny_size=3,
            size_text=lambda n: f"{n} steps, batch {RNN_BATCH}, {RNN_INPUT}→{RNN_HIDDEN}",
            size_axis="steps", rounds_upto=100,
        ),
    ]
}  # fmt: skip

"""Hand-written "near the limit" references for the issue-4 targets.

For each target expression over ``x[:, None]`` and ``y[None, :]`` (float64):

- ``tanh_rowsum``:  ``sum(tanh(x[:, None] - y[None, :]), axis=1)``
- ``half_rowsum``:  ``sum((x[:, None] - y[None, :]) / 2, axis=1)`` (arithmetic only)
- ``gauss_rowcol``: row *and* column sums of ``exp(-(x[:, None] - y[None, :])**2)``

there is a hand-written ``@njit(parallel=True)`` loop (``*_numba``), a hand-written NumPy
version over row blocks run on a small thread pool (``*_blocked``; NumPy releases the GIL in
ufunc loops) and, where cheap enough, NumPy eager (``*_eager``). Every function takes
``(x, y)`` and returns the result array(s).

Example::

    >>> import numpy as np
    >>> x, y = np.arange(3.0), np.arange(4.0)
    >>> bool(np.allclose(half_rowsum_numba(x, y), half_rowsum_eager(x, y)))
    True
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit, prange

BLOCK_ROWS = 128
THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
_pool = ThreadPoolExecutor(THREADS)


# ----------------------------------------------------------------------------- numba loops


@njit(parallel=True, fastmath={"reassoc", "nsz"}, cache=True)
def _tanh_rowsum_nb(x, y, out):
    for i in prange(x.shape[0]):
        acc = 0.0
        xi = x[i]
        for j in range(y.shape[0]):
            acc += math.tanh(xi - y[j])
        out[i] = acc


@njit(parallel=True, fastmath={"reassoc", "nsz"}, cache=True)
def _half_rowsum_nb(x, y, out):
    for i in prange(x.shape[0]):
        acc = 0.0
        xi = x[i]
        for j in range(y.shape[0]):
            acc += (xi - y[j]) / 2.0
        out[i] = acc


@njit(parallel=True, fastmath={"reassoc", "nsz"}, cache=True)
def _gauss_rowcol_nb(x, y, rows, partial):
    nblk = partial.shape[0]
    n = x.shape[0]
    for b in prange(nblk):
        for i in range(b * n // nblk, (b + 1) * n // nblk):
            acc = 0.0
            xi = x[i]
            for j in range(y.shape[0]):
                d = xi - y[j]
                v = math.exp(-(d * d))
                acc += v
                partial[b, j] += v
            rows[i] = acc


def tanh_rowsum_numba(x, y):
    out = np.empty(x.shape[0])
    _tanh_rowsum_nb(x, y, out)
    return out


def half_rowsum_numba(x, y):
    out = np.empty(x.shape[0])
    _half_rowsum_nb(x, y, out)
    return out


def gauss_rowcol_numba(x, y):
    rows = np.empty(x.shape[0])
    partial = np.zeros((max(1, min(x.shape[0], 4 * THREADS)), y.shape[0]))
    _gauss_rowcol_nb(x, y, rows, partial)
    return rows, partial.sum(axis=0)


# ----------------------------------------------------------------------------- NumPy blocked


def _blocks(n: int) -> list[tuple[int, int]]:
    return [(i, min(i + BLOCK_ROWS, n)) for i in range(0, n, BLOCK_ROWS)]


def _run_blocks(n: int, fn) -> list:
    """Run ``fn(lo, hi, buf)`` over row blocks on the pool, one scratch buffer per thread."""
    chunks = np.array_split(np.arange(len(_blocks(n))), THREADS)
    blocks = _blocks(n)

    def work(ids):
        res = []
        for k in ids:
            lo, hi = blocks[k]
            res.append(fn(lo, hi))
        return res

    return [r for part in _pool.map(work, chunks) for r in part]


def tanh_rowsum_blocked(x, y):
    out = np.empty(x.shape[0])

    def fn(lo, hi):
        d = np.subtract(x[lo:hi, None], y[None, :])
        np.tanh(d, out=d)
        np.sum(d, axis=1, out=out[lo:hi])

    _run_blocks(x.shape[0], fn)
    return out


def half_rowsum_blocked(x, y):
    out = np.empty(x.shape[0])

    def fn(lo, hi):
        d = np.subtract(x[lo:hi, None], y[None, :])
        np.divide(d, 2.0, out=d)
        np.sum(d, axis=1, out=out[lo:hi])

    _run_blocks(x.shape[0], fn)
    return out


def gauss_rowcol_blocked(x, y):
    rows = np.empty(x.shape[0])

    def fn(lo, hi):
        d = np.subtract(x[lo:hi, None], y[None, :])
        np.square(d, out=d)
        np.negative(d, out=d)
        np.exp(d, out=d)
        np.sum(d, axis=1, out=rows[lo:hi])
        return d.sum(axis=0)

    cols = np.sum(_run_blocks(x.shape[0], fn), axis=0)
    return rows, cols


# ----------------------------------------------------------------------------- NumPy eager


def tanh_rowsum_eager(x, y):
    return np.sum(np.tanh(x[:, None] - y[None, :]), axis=1)


def half_rowsum_eager(x, y):
    return np.sum((x[:, None] - y[None, :]) / 2, axis=1)


def gauss_rowcol_eager(x, y):
    e = np.exp(-((x[:, None] - y[None, :]) ** 2))
    return e.sum(axis=1), e.sum(axis=0)

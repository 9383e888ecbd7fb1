"""Memory of lazy evaluation (issue 3), measured with ``fusegrad.memory.track_allocations()``.

``peak_bytes`` counts every NumPy buffer allocated inside the block, freed or not, so bounding it
proves that no large temporary ever existed; ``count``/``largest`` list the buffers still alive.
"""

from __future__ import annotations

import numpy as np

import fusegrad.lazy as fl
from fusegrad.memory import track_allocations

MB = 1 << 20


def row_sum(xa: np.ndarray, ya: np.ndarray):
    """The issue's example: ``sum(tanh(d) * exp(-d**2), axis=1)`` with ``d = x[:, None] - y``."""
    x, y = fl.asarray(xa), fl.asarray(ya)
    d = x[:, None] - y[None, :]
    return np.sum(np.tanh(d) * np.exp(-(d**2)), axis=1)


def chain(a: np.ndarray):
    """A 6-op elementwise chain: sin, multiply, add, multiply, add, exp, divide (7 ufuncs)."""
    x = fl.asarray(a)
    return np.exp(np.sin(x) * 2.0 + x) / (1.0 + x * x)


def test_row_sum_allocates_no_square_array(engine):
    n = 4000
    g = np.random.default_rng(0)
    xa, ya = g.random(n), g.random(n)
    with fl.use_engine(engine):
        # Warm up (compilation, thread pool) on other leaves of the same kernel signature.
        fl.materialize(row_sum(g.random(n), g.random(n)))
        expr = row_sum(xa, ya)
        with track_allocations() as rep:
            out = fl.materialize(expr)
    limit = 0.05 * n * n * 8  # 6.4 MB
    assert rep.peak_bytes < 16 * MB, str(rep)
    # The peak includes freed temporaries: no buffer of more than 5% of N*N*8 ever existed.
    assert rep.peak_bytes < limit, str(rep)
    assert all(s < limit for s in rep.sizes), str(rep)
    assert rep.count == 1 and rep.total_bytes == n * 8, str(rep)
    d = xa[:200, None] - ya[None, :]
    np.testing.assert_allclose(out[:200], np.sum(np.tanh(d) * np.exp(-(d**2)), axis=1))


def test_chain_allocates_output_plus_block_buffers(engine):
    n = 10**6
    g = np.random.default_rng(1)
    a = g.random(n)
    with fl.use_engine(engine):
        fl.materialize(chain(g.random(n)))  # warm up
        expr = chain(a)
        with track_allocations() as rep:
            out = fl.materialize(expr)
    out_bytes = n * 8
    assert rep.count == 1 and rep.total_bytes == out_bytes, str(rep)
    # Output plus block-sized buffers: no second array of anything like 10^6 elements.
    assert rep.peak_bytes < out_bytes + out_bytes // 4, str(rep)
    np.testing.assert_allclose(out, np.exp(np.sin(a) * 2.0 + a) / (1.0 + a * a), rtol=1e-15)


def test_two_reductions_one_pass_memory(engine):
    """Row and column sums of ``(x[:, None] - y)**2`` together: outputs plus buffers only."""
    n = 3000
    g = np.random.default_rng(2)
    with fl.use_engine(engine):

        def both(xa, ya):
            x, y = fl.asarray(xa), fl.asarray(ya)
            d = x[:, None] - y[None, :]
            return np.sum(d**2, axis=1), np.sum(d**2, axis=0)

        fl.materialize(*both(g.random(n), g.random(n)))
        exprs = both(g.random(n), g.random(n))
        with track_allocations() as rep:
            fl.materialize(*exprs)
    assert rep.peak_bytes < 0.05 * n * n * 8, str(rep)
    assert rep.count == 2, str(rep)


def test_eager_numpy_would_fail_these_bounds():
    """The bounds are meaningful: NumPy eager on the row sum peaks at several N*N arrays."""
    n = 1000
    g = np.random.default_rng(3)
    xa, ya = g.random(n), g.random(n)
    with track_allocations() as rep:
        d = xa[:, None] - ya[None, :]
        np.sum(np.tanh(d) * np.exp(-(d**2)), axis=1)
        del d
    assert rep.peak_bytes > 2 * n * n * 8

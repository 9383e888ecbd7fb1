"""Lennard-Jones forces for 20,000 particles as ``-grad(energy)``, in O(N) memory.

The energy is written the way a physicist would write it in NumPy: every pair displacement
``P[:, None, :] - P[None, :, :]`` (an N×N×3 array), squared distances, the 12-6 potential, the
diagonal (a particle with itself) masked out, and half the sum. Run eagerly, that code needs
N×N×3×8 bytes for the displacements alone (9.6 GB at N = 20,000), and a tape-based AD tool keeps
several such arrays for the reverse pass.

``fusegrad.grad`` keeps the whole pairwise computation lazy: the forward expressions and their
adjoints are fused into kernels that stream over the N×N domain and reduce straight back to the
N×3 gradient, so the peak memory is a few MB (O(N)), which this script measures with
``fusegrad.memory.track_allocations()`` and prints next to the N×N×8 bytes that even a single
N×N float64 matrix would take.

Checks printed at the end:

- Newton's third law: the total force vanishes (to rounding, relative to the largest force);
- the forces agree with a hand-written, blocked NumPy force computation (analytic derivative,
  O(block × N) memory) at the same N, or at ``--check-n`` particles when given.

Run::

    python examples/lennard_jones.py              # N = 20,000
    python examples/lennard_jones.py --n 5000 --check-n 2000

The default N = 20,000 (4 × 10^8 pairs) takes about 25 s for energy and forces together
(``value_and_grad``; the gradient alone about 15 s) and about 20 s for the hand-written reference,
with the default engine on a 2-core machine: the whole script runs in about a minute (69 s
measured on a busy 2-core machine), under the 2-minute budget.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import fusegrad as fg
from fusegrad.memory import track_allocations


def energy(P, eps=1.0, sigma=1.0):
    """Total Lennard-Jones energy of positions ``P`` (N×3), over all pairs i < j."""
    d = P[:, None, :] - P[None, :, :]  # N×N×3 pair displacements (never allocated by fusegrad)
    r2 = np.sum(d**2, -1)
    # mask the diagonal before dividing: r2 = 0 there, and 0 * inf would poison the gradient
    s2_r2 = sigma**2 / np.where(r2 > 0, r2, 1.0)
    e = 4 * eps * (s2_r2**6 - s2_r2**3)
    return np.sum(np.where(r2 > 0, e, 0.0)) / 2


def hand_forces(P, eps=1.0, sigma=1.0, block_bytes=32 * 2**20):
    """Forces ``-dE/dP`` from the analytic derivative, row block by row block (NumPy only).

    With x = sigma²/r², dE/d(r²) = -4 eps (6 x⁶ - 3 x³) / r², so the gradient for particle i is
    sum_j c_ij (P_i - P_j) with c = 2 dE/d(r²) = (24 eps x³ - 48 eps x⁶) / r²
    = P_i · rowsum(c)_i - (c @ P)_i.
    """
    n = P.shape[0]
    step = max(1, block_bytes // (3 * 8 * n))
    g = np.empty_like(P)
    for i0 in range(0, n, step):
        blk = P[i0 : i0 + step]
        d = blk[:, None, :] - P[None, :, :]
        r2 = np.einsum("ijk,ijk->ij", d, d)
        r2[np.arange(len(blk)), np.arange(i0, i0 + len(blk))] = np.inf  # self-pairs: c = 0
        x = sigma**2 / r2
        x3 = x * x * x
        c = (24 * eps * x3 - 48 * eps * x3 * x3) / r2
        g[i0 : i0 + step] = blk * c.sum(axis=1)[:, None] - c @ P
    return -g


def lattice(n, seed=0):
    """``n`` particles on a jittered cubic lattice (spacing 1.12 sigma, near the LJ minimum)."""
    m = math.ceil(n ** (1 / 3))
    grid = np.stack(np.meshgrid(*[np.arange(m)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    rng = np.random.default_rng(seed)
    return 1.12 * grid[:n].astype(np.float64) + rng.uniform(-0.05, 0.05, size=(n, 3))


def _mb(nbytes):
    return f"{nbytes / 2**20:,.1f} MiB"


def main(n=20_000, check_n=None, seed=0, verbose=True):
    """Compute energy and forces for ``n`` particles; return the results and the checks.

    ``check_n`` (default: ``n``) is the number of particles for the comparison with the
    hand-written forces (the first ``check_n`` lattice sites).
    """
    say = print if verbose else (lambda *a, **k: None)
    P = lattice(n, seed)
    say(f"Lennard-Jones, N = {n:,} particles ({n * n:,} ordered pairs), float64")

    vg = fg.value_and_grad(energy)
    t0 = time.perf_counter()
    vg(lattice(min(n, 256), seed))  # compile the kernels (numba) on a small system first
    t_compile = time.perf_counter() - t0

    with track_allocations() as report:
        t0 = time.perf_counter()
        E, grad = vg(P)
        forces = -grad
        t_grad = time.perf_counter() - t0
    naive = n * n * 8
    say(f"  energy E             = {E:.10g}   (per particle {E / n:.6f})")
    say(f"  E and forces         : {t_grad:.2f} s   (+ {t_compile:.2f} s warm-up/compile)")
    say(f"  peak NumPy memory    : {_mb(report.peak_bytes)}   (tracked by track_allocations)")
    say(f"  one N×N float64 array: {_mb(naive)}   (N×N×3 displacements: {_mb(3 * naive)})")
    say(f"  -> {naive / max(report.peak_bytes, 1):,.0f}× less than a single N×N array")

    fmax = float(np.max(np.abs(forces)))
    net = np.sum(forces, axis=0)
    newton = float(np.max(np.abs(net)) / (fmax * n))
    say(
        f"  Newton's 3rd law     : sum F = {np.array2string(net, precision=3)}, "
        f"|sum F| / (N max|F|) = {newton:.2e}"
    )

    check_n = n if check_n is None else min(check_n, n)
    Pc = P[:check_n]
    Fc = forces if check_n == n else -fg.grad(energy)(Pc)
    with track_allocations() as hand_report:
        t0 = time.perf_counter()
        Fh = hand_forces(Pc)
        t_hand = time.perf_counter() - t0
    rel_err = float(np.max(np.abs(Fc - Fh)) / np.max(np.abs(Fh)))
    say(
        f"  hand-written blocked NumPy forces at N = {check_n:,}: {t_hand:.2f} s, "
        f"peak {_mb(hand_report.peak_bytes)}"
    )
    say(f"  max |F_fusegrad - F_hand| / max |F_hand| = {rel_err:.2e}")
    ok = newton < 1e-12 and rel_err < 1e-10
    say("  checks: " + ("OK" if ok else "FAILED"))
    return {
        "energy": float(E),
        "forces": forces,
        "net_force_rel": newton,
        "hand_rel_err": rel_err,
        "peak_bytes": report.peak_bytes,
        "naive_bytes": naive,
        "seconds": t_grad,
        "ok": ok,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="number of particles")
    ap.add_argument(
        "--check-n", type=int, default=None, help="particles for the hand-force check (default n)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    raise SystemExit(0 if main(n=args.n, check_n=args.check_n, seed=args.seed)["ok"] else 1)

"""Benchmark the numba engine against hand-written references and the numpy_blocked engine.

Run::

    python benchmarks/bench_kernels.py            # everything, N=8000, 7 interleaved rounds
    python benchmarks/bench_kernels.py --quick    # N=2000, 5 rounds, smaller sweep

Sections (each timing is the median of interleaved rounds in this one process; ratios are what
count on a shared machine):

1. issue-4 targets at N: the engine on hand-built ``Kernel``s vs ``reference_kernels``
   (hand numba, hand NumPy blocked, NumPy eager where asked) and the numpy_blocked engine;
2. the row+column Gaussian sums as one multi-output kernel vs two separate kernels;
3. tracemalloc peak of the engine on the tanh row sum;
4. the ``auto`` sweep: numba vs numpy_blocked on arithmetic-only and transcendental kernels
   at domain sizes 10^3 .. 10^7 (what ``numba_engine.prefers`` encodes);
5. first use of a new kernel (compile) and disk-cache hits, in fresh subprocesses;
6. accuracy (``--only accuracy``): float sums of 10^7 lognormal values against ``math.fsum``,
   the mean error relative to sum|x| over the outputs, for numba, ``np.sum`` and numpy_blocked;
7. mirrored sums (``--only mirrored``): W2T's gradient as one mirrored sum against row and
   column sums added after: time, tracemalloc peak, accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import reference_kernels as ref  # noqa: E402

from fusegrad.lazy.engines import numba_engine as ne  # noqa: E402
from fusegrad.lazy.kernel import Instr, Kernel, Output  # noqa: E402

try:
    from fusegrad.lazy.engines import numpy_blocked
except Exception:  # pragma: no cover
    numpy_blocked = None

F8 = np.dtype("f8")


# ----------------------------------------------------------------------------- kernels


def k_tanh_rowsum(x, y):
    """``sum(tanh(x[:, None] - y[None, :]), axis=1)`` as a Kernel."""
    return Kernel(
        (x.size, y.size),
        (x[:, None], y[None, :]),
        (),
        (Instr("subtract", (0, 1), F8), Instr("tanh", (2,), F8)),
        (Output(3, "sum", (1,), F8),),
    )


def k_half_rowsum(x, y):
    """``sum((x[:, None] - y[None, :]) / 2, axis=1)`` as the Kernel ``fusegrad.lazy`` builds:
    ``/ 2`` becomes ``* 0.5`` (exact; ``nodes.make_map``)."""
    return Kernel(
        (x.size, y.size),
        (x[:, None], y[None, :]),
        (0.5,),
        (Instr("subtract", (0, 1), F8), Instr("multiply", (3, 2), F8)),
        (Output(4, "sum", (1,), F8),),
    )


def k_gauss(x, y, axes_list):
    """Sums of ``exp(-(x[:, None] - y[None, :])**2)`` over each axes tuple in ``axes_list``."""
    prog = (
        Instr("subtract", (0, 1), F8),  # 3
        Instr("power", (3, 2), F8),  # 4: ** 2 (weak int constant)
        Instr("negative", (4,), F8),  # 5
        Instr("exp", (5,), F8),  # 6
    )
    outs = tuple(Output(6, "sum", axes, F8) for axes in axes_list)
    return Kernel((x.size, y.size), (x[:, None], y[None, :]), (2,), prog, outs)


def k_half_elementwise(x, y):
    """``(x[:, None] - y[None, :]) / 2`` written out (memory bound), as fusegrad builds it."""
    return Kernel(
        (x.size, y.size),
        (x[:, None], y[None, :]),
        (0.5,),
        (Instr("subtract", (0, 1), F8), Instr("multiply", (3, 2), F8)),
        (Output(4, None, (), F8),),
    )


def k_mixed_rowsum(x, y):
    """Mostly arithmetic with one exp: ``sum(exp(x)[:, None] * (x - y)**2, axis=1)`` where the
    exp is hoisted to the outer loop (one call per row)."""
    prog = (
        Instr("exp", (0,), F8),  # 2 (depends on axis 0 only)
        Instr("subtract", (0, 1), F8),  # 3
        Instr("multiply", (3, 3), F8),  # 4
        Instr("multiply", (2, 4), F8),  # 5
    )
    return Kernel(
        (x.size, y.size), (x[:, None], y[None, :]), (), prog, (Output(5, "sum", (1,), F8),)
    )


# ----------------------------------------------------------------------------- timing


def bench(cases: dict, rounds: int, warm: int = 1) -> dict:
    """Median seconds per case; each round runs every case once (interleaved)."""
    for f in cases.values():
        for _ in range(warm):
            f()
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, f in cases.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def fmt(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.1f} us"


def show(title: str, res: dict, base: str | None = None) -> None:
    print(f"\n## {title}")
    for k, v in res.items():
        extra = f"  ({v / res[base]:.2f}x {base})" if base and k != base else ""
        print(f"  {k:<28} {fmt(v):>10}{extra}")


def nb_run(kern):
    return lambda: ne.run(kern)


def np_run(kern):
    return lambda: numpy_blocked.run(kern)


# ----------------------------------------------------------------------------- sections


def targets(n: int, rounds: int, eager: bool) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    kt, kh = k_tanh_rowsum(x, y), k_half_rowsum(x, y)
    kg = k_gauss(x, y, [(1,), (0,)])
    # correctness first
    np.testing.assert_allclose(ne.run(kt)[0][:, 0], ref.tanh_rowsum_blocked(x, y), rtol=1e-9)
    np.testing.assert_allclose(ne.run(kh)[0][:, 0], ref.half_rowsum_blocked(x, y), atol=1e-7)
    r, c = ne.run(kg)
    rr, cc = ref.gauss_rowcol_blocked(x, y)
    np.testing.assert_allclose(r[:, 0], rr, rtol=1e-9)
    np.testing.assert_allclose(c[0], cc, rtol=1e-9)

    cases = {
        "engine numba": nb_run(kt),
        "hand numba (prange)": lambda: ref.tanh_rowsum_numba(x, y),
        "hand numpy blocked": lambda: ref.tanh_rowsum_blocked(x, y),
    }
    if numpy_blocked:
        cases["engine numpy_blocked"] = np_run(kt)
    if eager:
        cases["numpy eager"] = lambda: ref.tanh_rowsum_eager(x, y)
    show(f"sum(tanh(x[:,None]-y[None,:]), axis=1), N={n}", bench(cases, rounds), "engine numba")

    cases = {
        "engine numba": nb_run(kh),
        "hand numba (prange)": lambda: ref.half_rowsum_numba(x, y),
        "hand numpy blocked": lambda: ref.half_rowsum_blocked(x, y),
        "numpy eager": lambda: ref.half_rowsum_eager(x, y),
    }
    if numpy_blocked:
        cases["engine numpy_blocked"] = np_run(kh)
    show(f"sum((x[:,None]-y[None,:])/2, axis=1), N={n}", bench(cases, rounds), "engine numba")

    krow, kcol = k_gauss(x, y, [(1,)]), k_gauss(x, y, [(0,)])
    cases = {
        "engine numba, one pass": nb_run(kg),
        "engine numba, two kernels": lambda: (ne.run(krow), ne.run(kcol)),
        "hand numba (prange)": lambda: ref.gauss_rowcol_numba(x, y),
        "hand numpy blocked": lambda: ref.gauss_rowcol_blocked(x, y),
    }
    if numpy_blocked:
        cases["engine numpy_blocked"] = np_run(kg)
    if eager:
        cases["numpy eager"] = lambda: ref.gauss_rowcol_eager(x, y)
    show(
        f"row+col sums of exp(-(x[:,None]-y[None,:])**2), N={n}",
        bench(cases, rounds),
        "engine numba, one pass",
    )

    tracemalloc.start()
    ne.run(kt)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"\n  tracemalloc peak, engine numba tanh row sum N={n}: {peak / 2**20:.3f} MiB")


def sweep(sizes: list[int], rounds: int) -> None:
    if numpy_blocked is None:
        print("\n(numpy_blocked not importable: sweep skipped)")
        return
    print("\n## auto sweep: numba engine time / numpy_blocked engine time (<1: numba faster)")
    builders = {
        "arith rowsum": k_half_rowsum,
        "arith elementwise": k_half_elementwise,
        "gauss row+col (exp)": lambda x, y: k_gauss(x, y, [(1,), (0,)]),
        "tanh rowsum": k_tanh_rowsum,
        "1 exp/row + arith": k_mixed_rowsum,
    }
    print("  " + "points".rjust(10) + "".join(f"{b:>22}" for b in builders))
    rng = np.random.default_rng(1)
    for n in sizes:
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        row = []
        for build in builders.values():
            k = build(x, y)
            r = bench({"nb": nb_run(k), "np": np_run(k)}, rounds, warm=2)
            row.append(f"{r['nb'] / r['np']:.2f} ({fmt(r['nb'])})")
        print("  " + f"{n * n:>10}" + "".join(f"{c:>22}" for c in row))


CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    t0 = time.perf_counter()
    from fusegrad.lazy.engines import numba_engine as ne
    from fusegrad.lazy.kernel import Instr, Kernel, Output
    ne.available()
    t_import = time.perf_counter() - t0
    f8 = np.dtype("f8")
    x, y = np.linspace(-1, 1, 300), np.linspace(0, 2, 200)
    def k(op):
        return Kernel((300, 200), (x[:, None], y[None, :]), (0.5,),
                      (Instr(op, (0, 1), f8), Instr("multiply", (3, 2), f8)),
                      (Output(4, "sum", (1,), f8), Output(4, "sum", (0,), f8)))
    t = time.perf_counter(); ne.run(k("subtract")); first = time.perf_counter() - t
    t = time.perf_counter(); ne.run(k(sys.argv[1])); second = time.perf_counter() - t
    kk = k(sys.argv[1])
    t = time.perf_counter(); ne.run(kk); third = time.perf_counter() - t
    def k_tanh(n, m):  # numba_math's tanh inlined: a bigger loop body to compile
        x, y = np.linspace(-1, 1, n), np.linspace(0, 2, m)
        return Kernel((n, m), (x[:, None], y[None, :]), (0.5,),
                      (Instr("subtract", (0, 1), f8), Instr("multiply", (3, 2), f8),
                       Instr("tanh", (4,), f8)),
                      (Output(5, "sum", (1,), f8), Output(5, "sum", (0,), f8)))
    t = time.perf_counter(); ne.run(k_tanh(300, 200)); ser = time.perf_counter() - t
    t = time.perf_counter(); ne.run(k_tanh(3000, 3000)); par = time.perf_counter() - t
    print(json.dumps({"import": t_import, "first kernel (cold process)": first,
                      "new kernel, warm process": second, "same kernel again": third,
                      "new tanh kernel (serial)": ser, "its parallel variant": par,
                      "stats": ne.STATS}))
    """
)


def compile_times() -> None:
    print("\n## first use and disk-cache hits (fresh subprocesses, fresh cache dir)")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FUSEGRAD_CACHE_DIR=d)
        for label in ("cold cache (compiles)", "warm cache (loads from disk)"):
            r = subprocess.run(
                [sys.executable, "-c", CHILD, "add"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            res = json.loads(r.stdout.strip().splitlines()[-1])
            stats = res.pop("stats")
            print(f"  {label}: " + ", ".join(f"{k} {fmt(v)}" for k, v in res.items()))
            print(f"    STATS {stats}")


def accuracy(seed: int = 0) -> None:
    """Mean |sum - fsum| / sum|x| over the outputs; full sums over 6 draws, others over 1."""
    print("\n## accuracy: sums of 10^7 lognormal values, mean |err| / sum|x| vs math.fsum")
    print(f"  {'case':16}{'dtype':>7}{'numba':>11}{'np.sum':>11}{'blocked':>11}  numba/np.sum")
    rng = np.random.default_rng(seed)
    cases = [
        ("full 1D", (10**7,), (0,)),
        ("full 2D", (10**4, 10**3), (0, 1)),
        ("rows (10,1e6)", (10, 10**6), (1,)),
        ("rows (1e4,1e3)", (10**4, 10**3), (1,)),
        ("cols (1e4,1e3)", (10**4, 10**3), (0,)),
        ("cols (1e6,10)", (10**6, 10), (0,)),
    ]

    def rel_err(got, x, axes):
        rows = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
        rows = rows.reshape(-1, math.prod(x.shape[a] for a in axes)).astype(np.float64)
        want = np.array([math.fsum(r) for r in rows])
        return np.abs(np.asarray(got, np.float64).ravel() - want) / np.abs(rows).sum(axis=1)

    for dt in (np.dtype("f8"), np.dtype("f4")):
        for name, shape, axes in cases:
            errs: dict[str, list] = {"nb": [], "np": [], "bk": []}
            for _ in range(6 if len(axes) == len(shape) else 1):
                x = rng.lognormal(size=shape).astype(dt)
                k = Kernel(shape, (x,), (), (), (Output(0, "sum", axes, dt),))
                errs["nb"].append(rel_err(ne.run(k)[0], x, axes))
                errs["np"].append(rel_err(np.sum(x, axis=axes), x, axes))
                if numpy_blocked:
                    errs["bk"].append(rel_err(numpy_blocked.run(k)[0], x, axes))
            nb, npy, bk = (
                float(np.mean(np.concatenate(v))) if v else math.nan for v in errs.values()
            )
            ratio = f"{nb / npy:.2f}" if npy else ("0 / 0" if nb == 0 else "inf")
            print(f"  {name:16}{dt.name:>7}{nb:11.2e}{npy:11.2e}{bk:11.2e}  {ratio}")


def mirrored(n: int, rounds: int) -> None:
    """The gradient of sum(tanh(v[:, None] - v[None, :])): rows + cols as one mirrored sum
    (numba_pairs), against the row and column sums of one kernel added after (the plan before
    mirrored sums): time, tracemalloc peak, and the error of lognormal sums against math.fsum."""
    f8 = np.dtype("f8")
    v = np.random.default_rng(0).standard_normal(n)
    # operands: 0 = v[:, None], 1 = v[None, :], 2 = the constant 1.0, then the program
    prog = (
        Instr("subtract", (0, 1), f8),  # 3: d
        Instr("tanh", (3,), f8),  # 4: t
        Instr("multiply", (4, 4), f8),  # 5: t*t
        Instr("subtract", (2, 5), f8),  # 6: sech^2 d
        Instr("negative", (6,), f8),  # 7: its cotangent through v[None, :]
    )
    ins = (v[:, None], v[None, :])
    km = Kernel((n, n), ins, (1.0,), prog, (Output(6, "sum", (1,), f8, mirror=7),))
    k2 = Kernel((n, n), ins, (1.0,), prog, (Output(6, "sum", (1,), f8), Output(7, "sum", (0,), f8)))

    def two():
        r, c = ne.run(k2)
        return r[:, 0] + c[0]

    np.testing.assert_allclose(ne.run(km)[0][:, 0], two(), atol=1e-9)
    cases = {"mirrored sum": lambda: ne.run(km), "row + column sums, then add": two}
    show(f"gradient of sum(tanh(v[:,None]-v[None,:])), N={n}", bench(cases, rounds), "mirrored sum")
    for name, fn in cases.items():
        fn()
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  tracemalloc peak, {name}: {peak / 1024:.1f} KiB (gradient {8 * n / 1024:.1f})")

    m = min(n, 4000)
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(size=(m, m)), rng.lognormal(size=(m, m))
    k = Kernel((m, m), (a, b), (), (), (Output(0, "sum", (1,), f8, mirror=1),))
    kk = Kernel((m, m), (a, b), (), (), (Output(0, "sum", (1,), f8), Output(1, "sum", (0,), f8)))
    rows = range(0, m, max(1, m // 400))
    want = np.array([math.fsum(np.concatenate([a[i], b[:, i]])) for i in rows])
    mags = (a.sum(axis=1) + b.sum(axis=0))[list(rows)]
    r, c = ne.run(kk)
    got = {
        "mirrored sum": ne.run(k)[0][:, 0],
        "row + column sums, then add": r[:, 0] + c[0],
        "numpy a.sum(1) + b.sum(0)": a.sum(axis=1) + b.sum(axis=0),
    }
    print(f"\n  mean |err| / sum|x| of lognormal rows + columns, {m}x{m}, against math.fsum:")
    for name, g in got.items():
        print(f"    {name:30}{np.mean(np.abs(g[list(rows)] - want) / mags):.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--eager", action="store_true", help="also time NumPy eager on tanh/gauss")
    ap.add_argument(
        "--only", choices=["targets", "sweep", "compile", "accuracy", "mirrored"], default=None
    )
    a = ap.parse_args()
    n, rounds = (2000, 5) if a.quick else (a.n, a.rounds)
    sizes = [32, 100, 316, 1000] if a.quick else [32, 100, 178, 316, 1000, 3162]
    import numba

    print(f"numba {numba.__version__}, numpy {np.__version__}, threads {numba.get_num_threads()}")
    if a.only in (None, "compile"):
        compile_times()
    if a.only in (None, "targets"):
        targets(n, rounds, a.eager)
    if a.only in (None, "sweep"):
        sweep(sizes, rounds)
    if a.only in (None, "accuracy"):
        accuracy()
    if a.only in (None, "mirrored"):
        mirrored(n, rounds)


if __name__ == "__main__":
    main()

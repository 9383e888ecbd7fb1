"""Ordinary differentiable programs, fusegrad's plain ``grad`` against HIPS autograd's (issue 16).

Run::

    python benchmarks/bench_programs.py                        # every program, 7 batches each
    python benchmarks/bench_programs.py --only lstm,fluid --batches 11
    python benchmarks/bench_programs.py --jit                  # adds fg.jit(grad) and jax.jit
                                                               # (not on fluid: --jax-all)
    python benchmarks/bench_programs.py --list                 # the programs and their sizes

Each program (``fusegrad.bench.programs``) is written once against a NumPy-like namespace
``np_`` (with ``sp_`` for ``scipy.special``'s ``logsumexp``), so the same source runs on
``numpy`` under fusegrad, ``autograd.numpy`` under autograd and ``jax.numpy`` under JAX.
Parameters are a pytree (a dict of arrays); data are fixed by a seed. Before timing,
fusegrad's gradient is checked against autograd's (rtol 1e-9; jax's against autograd's at rtol
1e-7).

Timing: all libraries in one process, alternating per batch (the first library of a batch
alternates too), CPU time (``time.process_time``: waiting for a core on a shared machine is not
counted), the median of the batches' per-call times after warm-up (past ``HOT_REPLAYS``, when
``fg.jit`` compiles a program's hot kernels). BLAS and XLA are pinned to one thread before NumPy
is imported. "calls" is cProfile's ``total_calls`` for one gradient after
warm-up (Python-level function calls, load-independent).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
os.environ.setdefault("JAX_ENABLE_X64", "1")
# fg.jit's replays timed compiled, as jax.jit's are: every hot kernel compiles past HOT_REPLAYS
# (by default a program compiles only what its run has paid for: fusegrad.lazy.replay_budget)
os.environ.setdefault("FUSEGRAD_JIT_COMPILE", "eager")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import functools  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from fusegrad.bench.programs import PROGRAMS, SEED, Program  # noqa: E402
from fusegrad.lazy.replay import HOT_REPLAYS  # noqa: E402

# --------------------------------------------------------------------------------------------------
# Libraries
# --------------------------------------------------------------------------------------------------


def make_grads(lib: str, prog: Program, params: dict, data: dict) -> tuple[Callable, Any]:
    """``(g, args)``: the gradient function of ``prog`` under ``lib`` and its argument, so that
    ``g(args)`` is one gradient."""
    if lib in ("fusegrad", "fusegrad-jit"):
        import scipy.special

        import fusegrad as fg

        g = fg.grad(lambda p: prog.loss(np, scipy.special, p, data))
        if lib == "fusegrad-jit":
            g = fg.jit(g)
        return g, params
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp
        import autograd.scipy.special as asp

        return autograd.grad(lambda p: prog.loss(anp, asp, p, data)), params
    if lib == "jax-jit":
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as jsp

        jdata = {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in data.items()}
        jg = jax.jit(jax.grad(lambda p: prog.loss(jnp, jsp, p, jdata)))
        jparams = {k: jnp.asarray(v) for k, v in params.items()}
        return (lambda p: jax.block_until_ready(jg(p))), jparams
    raise ValueError(f"unknown library {lib!r}: use fusegrad, fusegrad-jit, autograd or jax-jit")


def check(prog: Program, got: dict, want: dict, rtol: float, who: str) -> None:
    """Raise if ``got`` differs from ``want`` (autograd's gradient) beyond ``rtol``."""
    for k, w in want.items():
        g = np.asarray(got[k])
        w = np.asarray(w)
        atol = rtol * max(1e-30, float(np.max(np.abs(w))))
        if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=atol):
            err = float(np.max(np.abs(g - w))) if g.shape == w.shape else float("nan")
            raise AssertionError(
                f"{prog.name}: {who}'s gradient of {k!r} differs from autograd's "
                f"(max abs err {err:.3g}, shape {g.shape} vs {w.shape})"
            )


def python_calls(g: Callable, args: Any) -> int:
    """cProfile's ``total_calls`` for one call of ``g(args)``."""
    prof = cProfile.Profile()
    prof.enable()
    g(args)
    prof.disable()
    return pstats.Stats(prof).total_calls  # type: ignore[attr-defined]


def per_call(g: Callable, args: Any, reps: int) -> float:
    """CPU seconds per call of ``g(args)`` over ``reps`` calls."""
    t0 = time.process_time()
    for _ in range(reps):
        g(args)
    return (time.process_time() - t0) / reps


def _attempt(out: dict, prog: Program, lib: str, step: Callable) -> Any:
    """``step()``, or None after reporting its exception on stderr and noting it in ``out[lib]``
    (one library's failure must not end the table)."""
    try:
        return step()
    except Exception as e:  # noqa: BLE001
        print(f"{prog.name}: {lib} failed: {type(e).__name__}: {e}", file=sys.stderr)
        out[lib] = {"error": type(e).__name__}
        return None


def measure(prog: Program, libs: list[str], batches: int, target: float) -> dict[str, dict]:
    """Per library: the median CPU time per gradient and the Python calls of one gradient. A
    library whose gradient differs from autograd's (before or after the timed calls: a jit
    replays from its second call), or which raises, is reported on stderr and gets
    ``{"error": name}`` instead."""
    params, data = prog.make(np.random.default_rng(SEED))
    grads = {lib: make_grads(lib, prog, params, data) for lib in libs}
    want = grads["autograd"][0](params)
    out: dict[str, dict] = {}

    def checked(lib: str) -> bool:
        g, args = grads[lib]
        rtol = 1e-9 if lib.startswith("fusegrad") else 1e-7
        _attempt(out, prog, lib, lambda: check(prog, g(args), want, rtol, lib))
        return lib not in out

    for lib in libs:
        if lib != "autograd" and checked(lib):
            checked(lib)  # twice: a jit records on its first call and replays from the second
    live = [lib for lib in libs if lib not in out]
    reps = {}
    for lib in live:
        g, args = grads[lib]
        # past the replays after which fg.jit recompiles a program as a hot one (on a cold numba
        # cache that compile took a whole first batch: hmm 26.9 ms against 5.3 after it)
        for _ in range(HOT_REPLAYS + 2):
            g(args)
        reps[lib] = max(1, int(target / max(per_call(g, args, 3), 1e-7)))
    times: dict[str, list[float]] = {lib: [] for lib in live}
    for b in range(batches):
        for lib in live if b % 2 == 0 else live[::-1]:
            g, args = grads[lib]
            if lib not in out:
                t = _attempt(out, prog, lib, functools.partial(per_call, g, args, reps[lib]))
                times[lib].append(t)
    for lib in live:
        if lib in out or (lib != "autograd" and not checked(lib)):
            continue
        g, args = grads[lib]
        calls = None if lib == "jax-jit" else python_calls(g, args)
        out[lib] = {"time": statistics.median(times[lib]), "calls": calls}
    return out


def _time(r: dict, lib: str) -> float | None:
    return r.get(lib, {}).get("time")


def _cell(r: dict, lib: str) -> str:
    """A library's time in µs (ms from 0.1 s), its error, or a dash when it did not run."""
    if lib not in r:
        return "–"
    if "error" in r[lib]:
        return f"failed ({r[lib]['error']})"
    t = r[lib]["time"]
    return f"{t * 1e6:,.0f}" if t < 0.1 else f"{t * 1e3:,.1f} ms"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "–"


def _calls(r: dict, lib: str) -> str:
    calls = r.get(lib, {}).get("calls")
    return "–" if calls is None else f"{calls:,}"


# jax.jit is not run on these (``--jax-all`` runs it): what happened when it was.
JAX_JIT_SKIPPED = {
    "fluid": "XLA's compile of its 25 unrolled steps ran over 5 min and 7 GB (2026-12-05)",
}


def main() -> None:
    """Parse the command line, run the programs, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated program names (default: all)")
    ap.add_argument("--batches", type=int, default=7, help="timed batches per library")
    ap.add_argument("--target", type=float, default=0.05, help="CPU seconds per batch")
    ap.add_argument("--jit", action="store_true", help="add fg.jit(fg.grad) and jax.jit(grad)")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--jax-all", action="store_true", help="run jax.jit on every program too")
    opts = ap.parse_args()
    if opts.list:
        for prog in PROGRAMS.values():
            print(f"{prog.name:10s} {prog.about}")
        return
    names = opts.only.split(",") if opts.only else list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s) {unknown}; --list shows {list(PROGRAMS)}")
    libs = ["fusegrad", "autograd"]
    if opts.jit:
        warnings.simplefilter("ignore")  # fg.jit warns when a program cannot be replayed
        libs.append("fusegrad-jit")
        try:
            import jax  # noqa: F401

            libs.append("jax-jit")
        except ImportError:
            print("jax is not installed: no jax.jit column")
    head = "| program | fusegrad µs | autograd µs | fg ÷ ag | fg calls | ag calls |"
    sep = "|---|---:|---:|---:|---:|---:|"
    if opts.jit:
        head += " fg.jit µs | jax.jit µs | fg.jit ÷ jax.jit |"
        sep += "---:|---:|---:|"
    print(head + "\n" + sep, flush=True)
    skipped = {} if opts.jax_all else {n: JAX_JIT_SKIPPED[n] for n in names if n in JAX_JIT_SKIPPED}
    for name in names:
        mine = [lib for lib in libs if not (lib == "jax-jit" and name in skipped)]
        r = measure(PROGRAMS[name], mine, opts.batches, opts.target)
        fg_t, ag_t = _time(r, "fusegrad"), _time(r, "autograd")
        row = (
            f"| {name} | {_cell(r, 'fusegrad')} | {_cell(r, 'autograd')} | {_ratio(fg_t, ag_t)} "
            f"| {_calls(r, 'fusegrad')} | {_calls(r, 'autograd')} |"
        )
        if opts.jit:
            fj, jj = _time(r, "fusegrad-jit"), _time(r, "jax-jit")
            row += f" {_cell(r, 'fusegrad-jit')} | {_cell(r, 'jax-jit')} | {_ratio(fj, jj)} |"
        print(row, flush=True)
    if opts.jit and "jax-jit" in libs:
        for name, why in skipped.items():
            print(f"\njax.jit not run on {name}: {why}; --jax-all runs it")


if __name__ == "__main__":
    main()

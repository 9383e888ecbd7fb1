"""``python -m fusegrad.bench``: fusegrad against hand NumPy, autograd, JAX and PyTorch.

Example:
    >>> parse_args(["--only", "W1", "--libs", "numpy"]).only
    'W1'
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from . import libs, plots, report, runner
from .workloads import WORKLOADS

QUICK = {"timeout_s": 120.0, "budget_s": 0.2, "min_samples": 5, "case_limit_s": 12.0}
FULL = {"timeout_s": 600.0, "budget_s": 2.0, "min_samples": 7, "case_limit_s": 300.0}


def _epilog() -> str:
    def sizes(ns):
        return ", ".join(f"{n:,}" for n in ns)

    rows = [
        f"  {name:<5} {wl.formula}\n        gradient w.r.t. {wl.wrt}; sizes: "
        f"{sizes(wl.quick_sizes)} (--full: {sizes(wl.full_sizes)})"
        for name, wl in WORKLOADS.items()
    ]
    lib_rows = [f"  {name:<15} {_LIB_HELP[name]}" for name in libs.LIBS]
    return (
        "workloads (float64; --only NAME[,NAME]):\n" + "\n".join(rows) + "\n"
        "  MLP: one training step, batch 32 10→16→1, 256 100→128→1, 4096 100→256→1;\n"
        "  RNN: 100 steps, batch 16, input 32, hidden 64; W1 n=1000 is the small-array case\n\n"
        "libraries (--libs LIB[,LIB]; numpy is always added, every ratio divides by it):\n"
        + "\n".join(lib_rows)
        + "\n  default: all (--full); in quick mode all but fusegrad-numpy, fusegrad-numba and\n"
        "  jax (eager), which --libs adds. A library that is not installed is skipped and\n"
        "  named once.\n\n"
        "output: report.md (summary first), results.json, summary.png, time.png, memory.png\n"
        "in --out (default: bench-out). See docs/bench.md."
    )


_LIB_HELP = {
    "fusegrad": "fusegrad.grad, engine auto",
    "fusegrad-jit": "fusegrad.jit(fusegrad.grad(f)), replayed after the first call",
    "fusegrad-numpy": "fusegrad.grad, engine numpy_blocked",
    "fusegrad-numba": "fusegrad.grad, engine numba",
    "numpy": "the hand-written NumPy gradient (the reference)",
    "autograd": "HIPS autograd",
    "jax": "jax.grad, eager",
    "jax-jit": "jax.jit(jax.grad(f))",
    "torch": "torch.autograd.grad, eager",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line.

    Example:
        >>> parse_args([]).out, parse_args([]).malloc, parse_args(["--thp"]).malloc
        ('bench-out', 'auto', 'both')
        >>> parse_args(["--rounds", "1"]).rounds
        1
    """
    p = argparse.ArgumentParser(
        prog="python -m fusegrad.bench",
        description="Gradient benchmarks: fusegrad against a hand-written NumPy gradient, "
        "HIPS autograd, JAX (eager and jit) and PyTorch. Each case runs in a fresh process; "
        "the quick default takes about 5 minutes on a quiet 2-core machine.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--full", action="store_true", help="the large sizes (takes many minutes)")
    p.add_argument("--only", metavar="NAME[,NAME]", help=f"workloads: {','.join(WORKLOADS)}")
    p.add_argument("--libs", metavar="LIB[,LIB]", help=f"libraries: {','.join(libs.LIBS)}")
    p.add_argument("--threads", type=int, metavar="N", help="threads per library (default: all)")
    p.add_argument(
        "--malloc",
        choices=runner.MALLOC_MODES,
        default="auto",
        help="auto (default): also run every library with glibc's malloc tuned for large "
        "temporaries (huge pages, freed memory kept mapped) where a "
        "temporary reaches 4 MiB and keep each one's faster run; both: every case both ways; "
        "stock: never",
    )
    p.add_argument(
        "--thp",
        dest="malloc",
        action="store_const",
        const="both",
        help="the same as --malloc both",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        metavar="N",
        help="run the cases timed in microseconds to milliseconds (the ordinary programs: W1 "
        "at n = 1000, the MLP, the RNN) in N rounds, one case of each library after another, "
        "and keep each library's fastest: on a shared machine one round's figures move by up "
        "to 2x (default: 3)",
    )
    p.add_argument(
        "--out", default="bench-out", metavar="DIR", help="output folder (default: bench-out)"
    )
    # For tests and quick looks: override every selected workload's sizes.
    p.add_argument("--sizes", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def parse_only(spec: str | None) -> list[str]:
    """Parse ``--only``; unknown names raise ``ValueError``.

    Example:
        >>> parse_only("w2t,W1")
        ['W2T', 'W1']
    """
    if not spec:
        return list(WORKLOADS)
    names = [s.strip().upper() for s in spec.split(",") if s.strip()]
    unknown = [s for s in names if s not in WORKLOADS]
    if unknown:
        bad = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown workload {bad} in --only; known: {', '.join(WORKLOADS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the report; the return value is the exit code.

    Example (shell):
        python -m fusegrad.bench --only W1,W2T --libs fusegrad,jax-jit --threads 1
    """
    args = parse_args(argv)
    try:
        lib_names = libs.parse_libs(args.libs, None if args.full else libs.QUICK_LIBS)
        workloads = parse_only(args.only)
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    mode = FULL if args.full else QUICK

    def sizes_for(w):
        if sizes:
            return sizes
        wl = WORKLOADS[w]
        return wl.full_sizes if args.full else wl.quick_sizes

    installed = [n for n in lib_names if libs.LIBS[n].installed()]
    missing = [n for n in lib_names if n not in installed]
    cases = runner.plan_cases(workloads, installed, sizes_for, args.malloc)
    print(
        f"fusegrad bench: {len(cases)} cases ({'full' if args.full else 'quick'} mode, "
        f"malloc {args.malloc}), each in a fresh process"
        + (
            "; skipped (not installed): " + ", ".join(f"{n} ({libs.LIBS[n].pip})" for n in missing)
            if missing
            else ""
        ),
        file=sys.stderr,
        flush=True,
    )

    t0 = time.perf_counter()
    results = runner.run_all(
        cases,
        WORKLOADS,
        threads=args.threads,
        timeout_s=mode["timeout_s"],
        budget_s=mode["budget_s"],
        min_samples=int(mode["min_samples"]),
        case_limit_s=mode["case_limit_s"],
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        rounds=args.rounds,
    )
    elapsed = time.perf_counter() - t0
    # One record per library that is not installed, so the report names it once.
    results += [
        {"lib": n, "workload": "", "n": 0, "thp": False, "status": "skipped",
         "message": f"skipped: not installed ({libs.LIBS[n].pip})"}
        for n in missing
    ]  # fmt: skip

    combined = report.combine_thp(runner.best_of_rounds(results))
    machine = report.machine_info(args.threads)
    command = shlex.join(
        ["python", "-m", "fusegrad.bench", *(argv if argv is not None else sys.argv[1:])]
    )
    options = {**vars(args), **mode}
    plotted = plots.plot_all(combined, args.out, quick=not args.full)
    report.write_outputs(
        args.out, results, combined, machine, command, options, args.malloc, elapsed
    )
    print()
    print(report.summary_section(combined, heading="Summary (fusegrad against the best peer)"))
    if missing:
        print("skipped (not installed): " + ", ".join(f"{n} ({libs.LIBS[n].pip})" for n in missing))
    print(report.target_counts(report.target_rows(combined)) + " (see report.md)")
    print(plotted)
    print(
        f"report: {args.out}/report.md (every table), {args.out}/results.json "
        f"(raw records); {elapsed:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

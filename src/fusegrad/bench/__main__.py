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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line.

    Example:
        >>> parse_args([]).out
        'bench-out'
    """
    p = argparse.ArgumentParser(
        prog="python -m fusegrad.bench",
        description="Gradient benchmarks: fusegrad against a hand-written NumPy gradient, "
        "HIPS autograd, JAX (eager and jit) and PyTorch. Each case runs in a fresh process.",
    )
    p.add_argument("--full", action="store_true", help="the large sizes (takes many minutes)")
    p.add_argument("--only", metavar="NAME[,NAME]", help=f"workloads: {','.join(WORKLOADS)}")
    p.add_argument("--libs", metavar="LIB[,LIB]", help=f"libraries: {','.join(libs.LIBS)}")
    p.add_argument("--threads", type=int, metavar="N", help="threads per library (default: all)")
    p.add_argument(
        "--thp",
        action="store_true",
        help="also run the peers with glibc's huge-page malloc and keep their best",
    )
    p.add_argument("--out", default="bench-out", metavar="DIR", help="output folder")
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

    cases = runner.plan_cases(workloads, lib_names, sizes_for, args.thp)
    missing = [n for n in lib_names if not libs.LIBS[n].installed()]
    print(
        f"fusegrad bench: {len(cases)} cases ({'full' if args.full else 'quick'} mode), "
        f"each in a fresh process" + (f"; not installed: {', '.join(missing)}" if missing else ""),
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
        min_samples=mode["min_samples"],
        case_limit_s=mode["case_limit_s"],
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    elapsed = time.perf_counter() - t0

    combined = report.combine_thp(results)
    machine = report.machine_info(args.threads)
    command = shlex.join(
        ["python", "-m", "fusegrad.bench", *(argv if argv is not None else sys.argv[1:])]
    )
    options = {**vars(args), **mode}
    report.write_outputs(args.out, results, combined, machine, command, options, args.thp, elapsed)
    print(report.targets_section(combined))
    print(report.workload_sections(combined, args.thp))
    print(plots.plot_all(combined, args.out), file=sys.stderr)
    print(
        f"report: {args.out}/report.md, {args.out}/results.json ({elapsed:.0f} s)", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

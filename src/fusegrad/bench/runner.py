"""Running the cases: one fresh subprocess each, with skips for memory, time and missing libraries.

Example:
    >>> from fusegrad.bench.workloads import WORKLOADS
    >>> memory_skip_reason(estimate_bytes("autograd", WORKLOADS["W2T"], 100_000), 24 << 30)
    'skipped: needs ~373 GiB, 24 GiB available'
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from ._child import MARKER
from .libs import LIBS
from .workloads import Workload

# glibc's malloc at its best for programs with large temporaries: huge pages, and freed memory
# kept mapped (blocks up to 32 MiB from the heap, which is never trimmed), so a repeated call does
# not fault its temporaries in again. Keeping memory mapped gave autograd's MLP at batch 4096
# 16-19 ms a gradient against 18-23 ms with huge pages alone (~2,500 page faults -> none).
THP_ENV = {
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1073741824"
    ":glibc.malloc.mmap_threshold=33554432",
    "THP_MEM_ALLOC_ENABLE": "1",
}
# Eager AD libraries keep several broadcast-sized temporaries alive for the backward pass; the
# count per workload is in Workload.eager_arrays. jit compilers fuse some of them away.
_BIG_ARRAY_FACTOR = {"autograd": 1.0, "jax": 1.0, "torch": 1.0, "jax-jit": 0.5}
# Memory the estimate must leave free for everything else on a shared machine.
MEMORY_HEADROOM = 0.8
# Peers' children get a bare `fusegrad` package: importing the real one (rules, scipy) would cost
# every peer case a quarter second and its memory for nothing.
_LAUNCH = """\
import sys, types
if sys.argv[2]:
    pkg = types.ModuleType("fusegrad")
    pkg.__path__ = [sys.argv[2]]
    sys.modules["fusegrad"] = pkg
from fusegrad.bench._child import main
main(sys.argv[1:2])
"""
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Case:
    """One (library, workload, size) measurement, optionally with the huge-page malloc.

    Example:
        >>> Case("jax", "W1", 1000, thp=True).label
        'W1 n=1000 jax [THP]'
    """

    lib: str
    workload: str
    n: int
    thp: bool = False

    @property
    def label(self) -> str:
        return f"{self.workload} n={self.n} {self.lib}" + (" [THP]" if self.thp else "")


def estimate_bytes(lib: str, wl: Workload, n: int) -> int:
    """Rough peak bytes of one case: inputs (and a library copy), gradients, big temporaries.

    fusegrad's target is no broadcast-sized temporary; one is budgeted so that a fusegrad that
    still materialises is not run into the ground. The hand NumPy gradient is blocked.

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> estimate_bytes("numpy", WORKLOADS["W1"], 1000)
        24000
    """
    inputs = wl.input_bytes(n)
    if lib.startswith("fusegrad"):
        factor = 1.0
    elif lib == "numpy":
        factor = 0.0
    else:
        factor = _BIG_ARRAY_FACTOR.get(lib, 1.0) * wl.eager_arrays
    return int(3 * inputs + factor * 8 * wl.big_elems(n))


def mem_available() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in bytes, or ``None`` where unknown.

    Example:
        >>> m = mem_available()
        >>> m is None or m > 0
        True
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _gib(b: float) -> str:
    return f"{b / (1 << 30):.3g} GiB"


def memory_skip_reason(estimate: int, available: int | None) -> str | None:
    """A skip message when ``estimate`` does not fit in ``available`` with headroom, else None.

    Example:
        >>> memory_skip_reason(10 << 30, 8 << 30)
        'skipped: needs ~10 GiB, 8 GiB available'
        >>> memory_skip_reason(1 << 20, 8 << 30) is None
        True
    """
    if available is None or estimate <= MEMORY_HEADROOM * available:
        return None
    return f"skipped: needs ~{_gib(estimate)}, {_gib(available)} available"


def predict_seconds(prev: dict, n: int, wl: Workload, min_samples: int) -> float:
    """Predicted wall time of a case at size ``n`` from the same library's result at a smaller size.

    Work grows as N² on pairwise workloads and as N otherwise; the case runs a first call plus at
    least ``min_samples`` timed calls.

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> predict_seconds({"n": 100, "median_s": 1.0}, 200, WORKLOADS["W2"], 5)
        24.0
    """
    power = 2 if wl.pairwise else 1
    return prev["median_s"] * (n / prev["n"]) ** power * (min_samples + 1)


def child_env(lib: str, threads: int | None, thp: bool) -> dict:
    """The environment of a case's subprocess: the library's switches, threads, malloc, path.

    Example:
        >>> env = child_env("jax", 1, thp=True)
        >>> env["OMP_NUM_THREADS"], env["JAX_ENABLE_X64"], env["THP_MEM_ALLOC_ENABLE"]
        ('1', '1', '1')
    """
    env = dict(os.environ)
    env.update(LIBS[lib].env)
    if threads:
        for var in (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "NUMBA_NUM_THREADS",
            "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS",
            "FUSEGRAD_THREADS",
        ):
            env[var] = str(threads)
        if threads == 1:
            env["XLA_FLAGS"] = (
                env.get("XLA_FLAGS", "")
                + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            ).strip()
    if thp:
        env.update(THP_ENV)
    # Run the package the parent imported, installed or not.
    src = os.path.dirname(_PKG_DIR)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [src, env.get("PYTHONPATH", "")] if p)
    return env


def run_subprocess(case: Case, *, threads, timeout_s, budget_s, min_samples) -> dict:
    """Run ``case`` in a fresh interpreter and return its result record.

    Example:
        >>> r = run_subprocess(Case("numpy", "W1", 100), threads=None, timeout_s=60,
        ...                    budget_s=0.05, min_samples=5)
        >>> r["status"]
        'ok'
    """
    spec = {
        "lib": case.lib,
        "workload": case.workload,
        "n": case.n,
        "threads": threads,
        "budget_s": budget_s,
        "min_samples": min_samples,
    }
    base = {"lib": case.lib, "workload": case.workload, "n": case.n, "thp": case.thp}
    bare = "" if case.lib.startswith("fusegrad") else _PKG_DIR
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCH, json.dumps(spec), bare],
            env=child_env(case.lib, threads, case.thp),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "message": f"timeout after {timeout_s:g} s"}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            return {**json.loads(line[len(MARKER) :]), **base, "wall_s": wall}
    tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    if proc.returncode < 0:
        tail = f"killed by signal {-proc.returncode} (out of memory?); {tail}"
    return {**base, "status": "error", "message": tail[:300], "wall_s": wall}


# The smallest broadcast temporary for which the huge-page malloc is tried (in --malloc auto):
# below NumPy's own huge-page threshold, page faults cannot be what a case's time is made of.
THP_MIN_BYTES = 4 << 20
MALLOC_MODES = ("auto", "both", "stock")


def wants_thp(lib: str, wl: Workload, n: int, malloc: str) -> bool:
    """Whether case (``lib``, ``wl``, ``n``) also runs with glibc's huge-page malloc.

    ``auto`` (the default) tries it for every library wherever the workload has a broadcast
    temporary of ``THP_MIN_BYTES`` or more, and the report keeps each library's faster run: NumPy
    asks for huge pages for its own large arrays, but glibc's malloc still returns freed blocks
    to the system and faults them in again at the next call (autograd's W1 gradient at n = 10^6
    took 7.3 ms with the stock malloc and 3.0 ms with the huge-page one); ``both`` tries it for
    every case; ``stock`` never.

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> [wants_thp(lib, WORKLOADS["W3"], 2000, "auto") for lib in ("jax-jit", "autograd")]
        [True, True]
        >>> wants_thp("jax-jit", WORKLOADS["W3"], 100, "auto")  # 80 KB temporaries
        False
        >>> wants_thp("numpy", WORKLOADS["W3"], 100, "both")
        True
    """
    if malloc not in MALLOC_MODES:
        raise ValueError(f"unknown --malloc {malloc!r}; use one of {', '.join(MALLOC_MODES)}")
    if malloc == "both":
        return True
    if malloc == "stock":
        return False
    return 8 * wl.big_elems(n) >= THP_MIN_BYTES


def plan_cases(workloads, libs, sizes_for, malloc: str = "auto", catalogue=None) -> list[Case]:
    """All cases in run order: by workload, then size, then library (interleaved, so that
    machine noise hits every library alike), each right after its stock run with the huge-page
    malloc where ``wants_thp`` says so.

    Example:
        >>> plan = plan_cases(["W1"], ["numpy", "jax"], lambda w: [10, 10**6])
        >>> [c.label for c in plan]  # doctest: +NORMALIZE_WHITESPACE
        ['W1 n=10 numpy', 'W1 n=10 jax', 'W1 n=1000000 numpy', 'W1 n=1000000 numpy [THP]',
         'W1 n=1000000 jax', 'W1 n=1000000 jax [THP]']
    """
    from .workloads import WORKLOADS

    catalogue = catalogue or WORKLOADS
    cases = []
    for w in workloads:
        for n in sizes_for(w):
            for lib in libs:
                cases.append(Case(lib, w, n))
                if wants_thp(lib, catalogue[w], n, malloc):
                    cases.append(Case(lib, w, n, thp=True))
    return cases


def run_all(
    cases: list[Case],
    workloads: dict,
    *,
    threads: int | None,
    timeout_s: float,
    budget_s: float,
    min_samples: int,
    case_limit_s: float,
    progress: Callable[[str], None],
    rounds: int = 1,
) -> list[dict]:
    """Run every case (or record why it was skipped) and report each on ``progress``; then
    ``rounds - 1`` more rounds of the cases that ran and are of a size up to their workload's
    ``rounds_upto``, in the same order (each record has its ``round``; ``best_of_rounds``
    keeps each library's fastest).

    Example:
        >>> from fusegrad.bench.workloads import WORKLOADS
        >>> rs = run_all([Case("numpy", "W1", 50)], WORKLOADS, threads=None, timeout_s=60,
        ...              budget_s=0.05, min_samples=5, case_limit_s=60, progress=lambda s: None)
        >>> rs[0]["check"]
        'ok'
    """
    results: list[dict] = []
    last_ok: dict = {}
    failed: dict = {}
    available = mem_available()
    run = functools.partial(
        run_subprocess,
        threads=threads,
        timeout_s=timeout_s,
        budget_s=budget_s,
        min_samples=min_samples,
    )
    for i, case in enumerate(cases, 1):
        wl = workloads[case.workload]
        lib = LIBS[case.lib]
        key = (case.lib, case.workload, case.thp)
        base = {"lib": case.lib, "workload": case.workload, "n": case.n, "thp": case.thp}
        skip = None
        if not lib.installed():
            skip = f"skipped: not installed ({lib.pip})"
        elif key in failed:
            skip = "skipped: {} at n={}".format(*failed[key])
        else:
            skip = memory_skip_reason(estimate_bytes(case.lib, wl, case.n), available)
            # a huge-page run predicts from its own smaller size, else from the stock run's
            prev = last_ok.get(key) or last_ok.get((case.lib, case.workload, False))
            # Only pairwise work really grows as predicted; small linear cases are dominated by
            # per-call overhead, and extrapolating it would skip cases that take a second.
            if skip is None and prev is not None and wl.pairwise:
                est = predict_seconds(prev, case.n, wl, min_samples)
                if est > case_limit_s:
                    skip = f"skipped: would take ~{est:.0f} s (limit {case_limit_s:g} s; --full)"
        if skip:
            r = {**base, "status": "skipped", "message": skip}
        else:
            r = run(case)
            if r["status"] in ("ok", "wrong"):
                last_ok[key] = r
            elif r["status"] in ("error", "timeout"):
                failed[key] = (r["status"], case.n)
        results.append({**r, "round": 1})
        progress(f"[{i:>3}/{len(cases)}] {case.label:<34} {status_text(r)}")
    again = [
        c
        for c, r in zip(cases, results)
        if r["status"] == "ok" and c.n <= workloads[c.workload].rounds_upto
    ]
    for k in range(2, rounds + 1):
        for i, case in enumerate(again, 1):
            r = run(case)
            results.append({**r, "round": k})
            label = f"{case.label} (round {k})"
            progress(f"[{i:>3}/{len(again)}] {label:<44} {status_text(r)}")
    return results


def best_of_rounds(results: list[dict]) -> list[dict]:
    """One record per case and malloc: the fastest correct round's, with every round's median
    in ``rounds_s`` where there were several. A round whose gradient was wrong is the record
    whatever the others timed; one that failed to run is kept only when none ran.

    Example:
        >>> rs = [{"lib": "jax", "workload": "W1", "n": 1, "thp": False, "status": "ok",
        ...        "median_s": s, "round": k} for k, s in ((1, 2.0), (2, 1.0))]
        >>> [(r["median_s"], r["rounds_s"]) for r in best_of_rounds(rs)]
        [(1.0, [2.0, 1.0])]
    """
    groups: dict = {}
    for r in results:
        groups.setdefault((r["lib"], r["workload"], r["n"], r.get("thp", False)), []).append(r)
    out = []
    for rows in groups.values():
        ok = [r for r in rows if r["status"] == "ok"]
        wrong = [r for r in rows if r["status"] == "wrong"]
        if len(rows) == 1 or not ok or wrong:
            out.append((wrong or rows)[0])
            continue
        out.append(
            {**min(ok, key=lambda r: r["median_s"]), "rounds_s": [r["median_s"] for r in ok]}
        )
    return out


def status_text(r: dict) -> str:
    """A one-line summary of a result for the progress display.

    Example:
        >>> status_text({"status": "ok", "median_s": 0.0123, "wall_s": 1.5, "rel_err": 0.0})
        '12.3 ms  ok 0.0e+00  (1.5 s)'
    """
    from .report import check_text as report_check
    from .report import fmt_time

    wall = f"  ({r['wall_s']:.1f} s)" if "wall_s" in r else ""
    if r["status"] in ("ok", "wrong"):
        return f"{fmt_time(r['median_s'])}  {r['status']} {r.get('rel_err', 0):.1e}{wall}"
    return f"{report_check(r)}{wall}"

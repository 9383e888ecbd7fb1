"""Turning results into tables, the issue-6 target check, ``report.md`` and ``results.json``.

Example:
    >>> fmt_time(0.0000153), fmt_bytes(3 << 30), fmt_ratio(1234.5)
    ('15.3 µs', '3 GiB', '1,234×')
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from importlib import metadata

from .libs import LIBS
from .workloads import WORKLOADS

NOISE_BYTES = 1 << 20  # RSS noise is about ±0.35 MiB; below 1 MiB a peak means nothing
VERSIONED = ["numpy", "scipy", "numba", "autograd", "jax", "jaxlib", "torch", "matplotlib"]


def fmt_time(s: float | None) -> str:
    """Seconds as three significant digits in s, ms or µs.

    Example:
        >>> fmt_time(1.234), fmt_time(0.0123), fmt_time(None)
        ('1.23 s', '12.3 ms', '–')
    """
    if s is None:
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale or unit == "µs":
            return f"{s / scale:.3g} {unit}"
    raise AssertionError


def fmt_bytes(b: float | None) -> str:
    """Bytes as MiB/GiB with four significant digits; under 1 MiB is RSS noise.

    Example:
        >>> fmt_bytes(512), fmt_bytes(5 << 20), fmt_bytes(None)
        ('<1 MiB', '5 MiB', '–')
    """
    if b is None:
        return "–"
    if b < NOISE_BYTES:
        return "<1 MiB"
    if b >= 1 << 30:
        return f"{b / (1 << 30):.4g} GiB"
    return f"{b / (1 << 20):.4g} MiB"


def fmt_ratio(r: float | None) -> str:
    """A ratio with three significant digits, thousands separated.

    Example:
        >>> fmt_ratio(0.5), fmt_ratio(12.34), fmt_ratio(41168.2)
        ('0.500×', '12.3×', '41,168×')
    """
    if r is None:
        return "–"
    if r >= 1000:
        return f"{r:,.0f}×"
    return f"{r:.3g}×" if r >= 10 else f"{r:.3f}×" if r < 1 else f"{r:.2f}×"


def combine_thp(results: list[dict]) -> list[dict]:
    """Merge stock and huge-page runs of a case into one row that keeps the faster.

    Example:
        >>> rs = [{"lib": "jax", "workload": "W1", "n": 1, "thp": False, "status": "ok",
        ...        "median_s": 2.0},
        ...       {"lib": "jax", "workload": "W1", "n": 1, "thp": True, "status": "ok",
        ...        "median_s": 1.0}]
        >>> [(r["malloc"], r["stock_s"]) for r in combine_thp(rs)]
        [('THP', 2.0)]
    """
    groups: dict = {}
    for r in results:
        groups.setdefault((r["lib"], r["workload"], r["n"]), []).append(r)
    out = []
    for rows in groups.values():
        if len(rows) == 1:
            out.append({**rows[0], "malloc": "THP" if rows[0].get("thp") else "stock"})
            continue
        ok = [r for r in rows if r["status"] == "ok"]
        best = min(ok, key=lambda r: r["median_s"]) if ok else rows[0]
        merged = {**best, "malloc": "THP" if best.get("thp") else "stock"}
        for r in rows:
            if r["status"] == "ok":
                merged["thp_s" if r.get("thp") else "stock_s"] = r["median_s"]
        out.append(merged)
    return out


def _ok(r: dict | None) -> bool:
    return r is not None and r["status"] == "ok"


def best_peer(rows: list[dict]) -> dict | None:
    """The fastest correct peer library (autograd, JAX, torch) among ``rows`` of one case.

    Example:
        >>> best_peer([{"lib": "jax", "status": "ok", "median_s": 2.0},
        ...            {"lib": "autograd", "status": "ok", "median_s": 1.0}])["lib"]
        'autograd'
    """
    peers = [r for r in rows if LIBS[r["lib"]].peer and _ok(r)]
    return min(peers, key=lambda r: r["median_s"]) if peers else None


def _traced(r: dict) -> bool:
    """Whether ÷floor comes from the ``tracemalloc`` peak: ΔRSS is in the noise and the
    library's arrays are NumPy's (the baseline's ᵗ)."""
    rss = r.get("peak_rss_bytes")
    return rss is not None and rss < NOISE_BYTES and r.get("tracemalloc_peak_bytes") is not None


def floor_ratio(r: dict) -> float | None:
    """(inputs + peak) / (inputs + gradients): 1.0 is the memory floor. The peak is ΔRSS, or
    the ``tracemalloc`` peak when ΔRSS is in the noise (as in the peers' baseline).

    Example:
        >>> floor_ratio({"workload": "W1", "n": 1000, "status": "ok", "peak_rss_bytes": 8000})
        1.0
        >>> floor_ratio({"workload": "W1", "n": 1000, "status": "ok", "peak_rss_bytes": 4096,
        ...              "tracemalloc_peak_bytes": 12000})
        1.25
    """
    if not _ok(r) or r.get("peak_rss_bytes") is None:
        return None
    wl = WORKLOADS[r["workload"]]
    inputs = wl.input_bytes(r["n"])
    peak = r["tracemalloc_peak_bytes"] if _traced(r) else r["peak_rss_bytes"]
    return (inputs + peak) / (inputs + wl.grad_bytes(r["n"]))


def fmt_floor(r: dict) -> str:
    """The ÷floor cell: ᵗ marks a ratio from the ``tracemalloc`` peak; a ΔRSS in the noise
    with nothing traced cannot resolve it.

    Example:
        >>> fmt_floor({"workload": "W2", "n": 8000, "status": "ok", "peak_rss_bytes": 4096})
        'noise'
        >>> fmt_floor({"workload": "W2", "n": 8000, "status": "ok", "peak_rss_bytes": 4096,
        ...            "tracemalloc_peak_bytes": 80000})
        '1.12×ᵗ'
    """
    if _traced(r):
        return fmt_ratio(floor_ratio(r)) + "ᵗ"
    if r.get("peak_rss_bytes") is not None and r["peak_rss_bytes"] < NOISE_BYTES:
        return "noise"
    return fmt_ratio(floor_ratio(r))


def _first_call(r: dict) -> str:
    if "first_s" not in r:
        return "–"
    cold = f" (cold {fmt_time(r['cold_s'])})" if r.get("cold_s", 0) > 0.05 else ""
    return fmt_time(r["first_s"]) + cold


def check_text(r: dict) -> str:
    """The check cell: ``ok``/``wrong`` with the relative error, else why there is no time.

    Example:
        >>> check_text({"status": "error", "message": "import: ImportError: no grad"})
        'error: import: ImportError: no grad'
        >>> check_text({"status": "skipped", "message": "skipped: not installed"})
        'skipped: not installed'
    """
    if r["status"] in ("ok", "wrong"):
        return f"{r['status']} {r.get('rel_err', 0.0):.1e}"
    msg = r.get("message", "")
    if msg.startswith(r["status"]):
        return msg
    return f"{r['status']}: {msg}" if msg else r["status"]


def table_rows(rows: list[dict], thp: bool) -> list[list[str]]:
    """Cells of one case's table (one size of one workload), in library order.

    Example:
        >>> rs = [{"lib": "numpy", "workload": "W1", "n": 10**6, "status": "ok",
        ...        "median_s": 1e-3, "peak_rss_bytes": 8 * 10**6, "first_s": 2e-3, "rel_err": 0.0}]
        >>> table_rows(rs, thp=False)[0]
        ['numpy', '1 ms', '1.00×', '–', '7.629 MiB', '1.00×', '–', '–', '2 ms', 'ok 0.0e+00']
    """
    ref = next((r for r in rows if r["lib"] == "numpy" and _ok(r)), None)
    peer = best_peer(rows)
    order = {name: i for i, name in enumerate(LIBS)}
    cells = []
    for r in sorted(rows, key=lambda r: order[r["lib"]]):
        if r["status"] == "ok":
            t = r["median_s"]
            line = [
                r["lib"],
                fmt_time(t),
                fmt_ratio(t / ref["median_s"]) if ref else "–",
                fmt_ratio(t / peer["median_s"]) if peer else "–",
                fmt_bytes(r.get("peak_rss_bytes")),
                fmt_floor(r),
                fmt_bytes(r.get("warm_rss_bytes")),
                _fmt_traced(r.get("tracemalloc_peak_bytes")),
                _first_call(r),
                check_text(r),
            ]
        else:
            line = [r["lib"]] + ["–"] * 7 + [_first_call(r), check_text(r)]
        if thp:
            line.insert(2, r.get("malloc", "stock"))
        cells.append(line)
    return cells


HEADERS = [
    "lib",
    "time",
    "×numpy",
    "×best peer",
    "peak ΔRSS",
    "÷floor",
    "ΔRSS warm call",
    "tracemalloc peak",
    "first call",
    "check",
]


def _fmt_traced(b: int | None) -> str:
    return "–" if b is None else fmt_bytes_exact(b)


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table; numeric columns right-aligned.

    Example:
        >>> print(markdown_table(["a", "time"], [["x", "1 ms"]]))
        | a | time |
        |---|---:|
        | x | 1 ms |
    """
    left = ("lib", "check", "malloc", "target", "measure", "verdict", "a")
    align = ["---" if h in left else "---:" for h in headers]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def workload_sections(combined: list[dict], thp: bool) -> str:
    """One heading per workload and one table per size, with the best peer named.

    Example:
        >>> rs = [{"lib": "numpy", "workload": "W1", "n": 10, "status": "ok",
        ...        "median_s": 1e-6, "rel_err": 0.0}]
        >>> "### W1" in workload_sections(rs, thp=False)
        True
    """
    headers = list(HEADERS)
    if thp:
        headers.insert(2, "malloc")
    parts = []
    for name, wl in WORKLOADS.items():
        mine = [r for r in combined if r["workload"] == name]
        if not mine:
            continue
        parts.append(f"### {name}: `{wl.formula}`, gradient w.r.t. {wl.wrt}\n")
        for n in sorted({r["n"] for r in mine}):
            rows = [r for r in mine if r["n"] == n]
            peer = best_peer(rows)
            floor = wl.input_bytes(n) + wl.grad_bytes(n)
            note = f"best peer: {peer['lib']}" if peer else "no peer measured"
            parts.append(
                f"**n = {n:,}** · memory floor (inputs + gradients) {fmt_bytes_exact(floor)}"
                f" · {note}\n\n" + markdown_table(headers, table_rows(rows, thp)) + "\n"
            )
    return "\n".join(parts)


def fmt_bytes_exact(b: float) -> str:
    """Bytes in B/KiB/MiB/GiB, four significant digits, no noise cut-off.

    Example:
        >>> fmt_bytes_exact(8000), fmt_bytes_exact(300)
        ('7.812 KiB', '300 B')
    """
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.4g} {unit}"
    return f"{b:.0f} B"


def _target_rows(combined: list[dict]) -> list[list[str]]:
    rows = []

    def at(lib, w, n):
        return next(
            (r for r in combined if r["lib"] == lib and r["workload"] == w and r["n"] == n), None
        )

    fg_libs = [name for name in LIBS if name.startswith("fusegrad")]
    goals = [("W1", 10**7), ("W2", 8000), ("W2T", 8000), ("W3", 8000)]
    for w, full_n in goals:
        sizes = sorted({r["n"] for r in combined if r["workload"] == w})
        if not sizes:
            continue
        n = sizes[-1]
        size = f"{w} n={n:,}" + ("" if n == full_n else f" (target stated at n={full_n:,})")
        for lib in fg_libs:
            me = at(lib, w, n)
            if me is None:
                continue
            if not _ok(me):
                rows.append([size, lib, "all", check_text(me), "–", "not measured"])
                continue
            checks = []
            if w == "W3":
                checks.append(("extra peak RSS", fmt_bytes(me["peak_rss_bytes"]), "< 50 MB",
                               me["peak_rss_bytes"] < 50e6))  # fmt: skip
            else:
                noise = me["peak_rss_bytes"] < NOISE_BYTES and not _traced(me)
                met = "noise" if noise else floor_ratio(me) <= 1.10
                checks.append(("memory ÷floor", fmt_floor(me), "≤ 1.10×", met))
            for peer, goal in ([("autograd", 0.5), ("jax-jit", 1.0)] if w != "W3"
                               else [("jax-jit", 0.8)]):  # fmt: skip
                p = at(peer, w, n)
                if _ok(p):
                    ratio = me["median_s"] / p["median_s"]
                    checks.append((f"time ÷ {peer}", fmt_ratio(ratio), f"≤ {goal}×", ratio <= goal))
                else:
                    checks.append((f"time ÷ {peer}", "peer not measured", f"≤ {goal}×", None))
            for what, got, goal, met in checks:
                verdict = {None: "–", "noise": "ΔRSS < 1 MiB noise", True: "met"}.get(
                    met, "**missed**"
                )
                rows.append([size, lib, what, got, goal, verdict])
    return rows


def targets_section(combined: list[dict]) -> str:
    """The issue-6 speed and memory targets, checked against this run's fusegrad rows.

    Example:
        >>> targets_section([])
        ''
    """
    rows = _target_rows(combined)
    if not rows:
        return ""
    return (
        "## Targets (issue 6)\n\n"
        "Ratios are against peers measured in this same run; compile time is excluded (it is\n"
        "the separate first-call column). Quick mode measures smaller sizes than the targets.\n"
        "For W2/W2T the floor (inputs + gradient) is at most 125 KiB, below what RSS resolves;\n"
        "when the peak ΔRSS (first call included) is under 1 MiB, ÷floor comes from the\n"
        "`tracemalloc` peak of one more call (ᵗ), NumPy buffers and Python objects alike, as in\n"
        "the peers' baseline. Allocation bounds are also asserted in tests.\n\n"
        + markdown_table(["target", "lib", "measure", "measured", "goal", "verdict"], rows)
        + "\n"
    )


def _git_rev() -> str:
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(threads: int | None) -> dict:
    """CPU, cores, memory, OS, Python and library versions, thread setting and date.

    Example:
        >>> machine_info(None)["python"] == platform.python_version()
        True
    """
    cpu = platform.processor() or platform.machine()
    mem = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
        with open("/proc/meminfo") as f:
            mem = int(next(ln.split()[1] for ln in f if ln.startswith("MemTotal"))) * 1024
    except (OSError, StopIteration):
        pass
    thp = ""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read().strip()
    except OSError:
        pass
    versions = {}
    for pkg in VERSIONED:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    from .. import __version__

    versions["fusegrad"] = __version__ + (f" ({rev})" if (rev := _git_rev()) else "")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "os": platform.platform(),
        "transparent_hugepage": thp,
        "python": platform.python_version(),
        "versions": versions,
        "threads": threads or "default",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def machine_section(m: dict, command: str, thp: bool) -> str:
    """The machine description and the command line, as markdown.

    Example:
        >>> "Command" in machine_section(machine_info(1), "python -m fusegrad.bench", False)
        True
    """
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    missing = ", ".join(k for k, v in m["versions"].items() if not v)
    mem = fmt_bytes_exact(m["memory_bytes"]) if m["memory_bytes"] else "unknown"
    malloc = (
        "stock glibc malloc, and again with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "
        "THP_MEM_ALLOC_ENABLE=1` for the non-fusegrad libraries, keeping each one's faster "
        "(column *malloc*)"
        if thp
        else "stock glibc malloc (`--thp` also tries huge pages for the peers)"
    )
    return (
        f"- Machine: {m['cpu']}, {m['cores']} cores, {mem} memory; {m['os']}; "
        f"transparent huge pages `{m['transparent_hugepage'] or 'unknown'}`\n"
        f"- Python {m['python']}; {vers}" + (f" (not installed: {missing})" if missing else "")
        + f"\n- Threads: {m['threads']}; malloc: {malloc}\n"
        f"- Date: {m['date']}\n"
        f"- Command: `{command}`\n"
    )  # fmt: skip


COLUMNS_NOTE = """\
Columns: *time* is the median of ≥5 samples after warm-up (fast calls batched so that a sample
lasts ≥20 ms); *×numpy* divides by the hand-written NumPy gradient and *×best peer* by the fastest
of autograd, jax, jax-jit and torch, all in this run; *peak ΔRSS* is the peak resident memory over
the full-size calls above the process's RSS after imports, inputs and a tiny warm-up (`<1 MiB` is
noise); *÷floor* is (inputs + ΔRSS) / (inputs + gradients), or with the *tracemalloc peak* in
place of ΔRSS when ΔRSS is noise (marked ᵗ); *ΔRSS warm call* is the peak over the timed calls
only; *tracemalloc peak* is one more call's NumPy buffers and Python objects (libraries whose
arrays are NumPy's: `–` for JAX and torch); *first call* is the first full-size
call (trace and compile for jit libraries), *cold* the tiny warm-up in the fresh process; *check*
is the maximum error against the NumPy gradient relative to its largest entry (tolerance 1e-8).
Each case ran in a fresh process. Differences under about 1.5× on a shared machine are ties.
"""


def render_report(combined, machine, command, thp, elapsed_s) -> str:
    """The whole ``report.md``.

    Example:
        >>> md = render_report([], machine_info(None), "cmd", False, 1.0)
        >>> md.startswith("# fusegrad benchmark")
        True
    """
    return (
        "# fusegrad benchmark\n\n"
        + machine_section(machine, command, thp)
        + f"- Wall time of the whole run: {elapsed_s:.0f} s\n\n"
        + COLUMNS_NOTE
        + "\n"
        + targets_section(combined)
        + "\n## Results\n\n"
        + workload_sections(combined, thp)
    )


def write_outputs(out_dir, results, combined, machine, command, options, thp, elapsed_s) -> str:
    """Write ``report.md`` and ``results.json`` into ``out_dir``; return the report text.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = write_outputs(d, [], [], machine_info(None), "cmd", {}, False, 0.0)
        >>> sorted(os.listdir(d))
        ['report.md', 'results.json']
    """
    os.makedirs(out_dir, exist_ok=True)
    text = render_report(combined, machine, command, thp, elapsed_s)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    payload = {
        "machine": machine,
        "command": command,
        "options": options,
        "elapsed_s": elapsed_s,
        "python": sys.executable,
        "results": results,
        "combined": combined,
    }
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(payload, f, indent=1, default=str)
    return text

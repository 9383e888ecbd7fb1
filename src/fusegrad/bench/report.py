"""Turning results into the summary, the target checks, tables, ``report.md`` and ``results.json``.

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
from typing import TypeGuard

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


# A library's memory is its leaner run's: the tuned malloc keeps freed memory mapped, which is
# the allocator's holding, not what the library needs (jax.jit's W3 at N = 8000: 253 MiB peak
# stock, 1.7 GiB tuned).
MEMORY_KEYS = ("peak_rss_bytes", "warm_rss_bytes", "first_rss_bytes", "tracemalloc_peak_bytes")


def combine_thp(results: list[dict]) -> list[dict]:
    """Merge stock and tuned-malloc runs of a case into one row: the faster run's time, and the
    memory figures of the run with the smaller peak.

    Example:
        >>> rs = [{"lib": "jax", "workload": "W1", "n": 1, "thp": False, "status": "ok",
        ...        "median_s": 2.0, "peak_rss_bytes": 10},
        ...       {"lib": "jax", "workload": "W1", "n": 1, "thp": True, "status": "ok",
        ...        "median_s": 1.0, "peak_rss_bytes": 90}]
        >>> [(r["malloc"], r["stock_s"], r["peak_rss_bytes"]) for r in combine_thp(rs)]
        [('THP', 2.0, 10)]
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
        for r in ok:
            merged["thp_s" if r.get("thp") else "stock_s"] = r["median_s"]
        measured = [r for r in ok if r.get("peak_rss_bytes") is not None]
        if measured:  # every memory figure from one run, so they stay consistent
            lean = min(measured, key=lambda r: r["peak_rss_bytes"])
            for key in MEMORY_KEYS:
                merged[key] = lean.get(key)
        out.append(merged)
    return out


def _ok(r: dict | None) -> TypeGuard[dict]:
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
        note = f" ({r['note']})" if r.get("note") else ""
        return f"{r['status']} {r.get('rel_err', 0.0):.1e}{note}"
    msg = r.get("message", "")
    if msg.startswith(r["status"]):
        return msg
    return f"{r['status']}: {msg}" if msg else r["status"]


THP_MARK = "ʰ"


def _not_installed(r: dict) -> bool:
    return r["status"] == "skipped" and r.get("message", "").startswith("skipped: not installed")


def skipped_libs(combined: list[dict]) -> dict[str, str]:
    """{library: why} for the libraries that never ran because they are not installed.

    Example:
        >>> skipped_libs([{"lib": "torch", "status": "skipped",
        ...                "message": "skipped: not installed (pip install torch)"}])
        {'torch': 'pip install torch'}
    """
    out = {}
    for r in combined:
        if _not_installed(r):
            out[r["lib"]] = r["message"].split("(", 1)[-1].rstrip(")")
    return out


def _both_mallocs(r: dict) -> bool:
    return "stock_s" in r and "thp_s" in r


def fmt_time_cell(r: dict) -> str:
    """The time cell: ``ʰ`` marks a time from the run with glibc's huge-page malloc.

    Example:
        >>> fmt_time_cell({"median_s": 0.113, "malloc": "THP"})
        '113 msʰ'
    """
    return fmt_time(r["median_s"]) + (THP_MARK if r.get("malloc") == "THP" else "")


def _mallocs_cell(r: dict) -> str:
    if not _both_mallocs(r):
        return "–"
    return f"{fmt_time(r['stock_s'])} · {fmt_time(r['thp_s'])}"


def table_rows(rows: list[dict], thp: bool) -> list[list[str]]:
    """Cells of one case's table (one size of one workload), in library order; with ``thp``
    a column of the stock and huge-page times. Libraries not installed have no row.

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
        if _not_installed(r):
            continue
        if r["status"] == "ok":
            t = r["median_s"]
            line = [
                r["lib"],
                fmt_time_cell(r),
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
            line.insert(2, _mallocs_cell(r))
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
    left = ("lib", "check", "target", "case", "verdict", "a", "workload", "size")
    align = ["---" if h in left else "---:" for h in headers]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def workload_sections(combined: list[dict], thp: bool | None = None) -> str:
    """One heading per workload and one table per size, with the best peer named. The
    *stock · THP* column appears in the tables where some library ran both ways (or always,
    with ``thp=True``).

    Example:
        >>> rs = [{"lib": "numpy", "workload": "W1", "n": 10, "status": "ok",
        ...        "median_s": 1e-6, "rel_err": 0.0}]
        >>> "### W1" in workload_sections(rs)
        True
    """
    parts = []
    for name, wl in WORKLOADS.items():
        mine = [r for r in combined if r["workload"] == name and not _not_installed(r)]
        if not mine:
            continue
        parts.append(f"### {name}: `{wl.formula}`, gradient w.r.t. {wl.wrt}\n")
        for n in sorted({r["n"] for r in mine}):
            rows = [r for r in mine if r["n"] == n]
            both = thp if thp is not None else any(_both_mallocs(r) for r in rows)
            headers = list(HEADERS)
            if both:
                headers.insert(2, "stock · THP")
            peer = best_peer(rows)
            floor = wl.input_bytes(n) + wl.grad_bytes(n)
            note = f"best peer: {peer['lib']}" if peer else "no peer measured"
            parts.append(
                f"**{wl.size_label(n)}** · memory floor (inputs + gradients) "
                f"{fmt_bytes_exact(floor)} · {note}\n\n"
                + markdown_table(headers, table_rows(rows, both))
                + "\n"
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


def _at(combined: list[dict], lib: str, w: str, n: int) -> dict | None:
    return next(
        (r for r in combined if r["lib"] == lib and r["workload"] == w and r["n"] == n), None
    )


def _case_name(w: str, n: int) -> str:
    return f"{w}, {WORKLOADS[w].size_label(n)}"


def leanest_peer(rows: list[dict]) -> dict | None:
    """The correct peer with the smallest peak ΔRSS among ``rows`` of one case.

    Example:
        >>> leanest_peer([{"lib": "jax", "status": "ok", "peak_rss_bytes": 9},
        ...               {"lib": "autograd", "status": "ok", "peak_rss_bytes": 5}])["lib"]
        'autograd'
    """
    peers = [r for r in rows if LIBS[r["lib"]].peer and _ok(r) and "peak_rss_bytes" in r]
    return min(peers, key=lambda r: r["peak_rss_bytes"]) if peers else None


def summary_cases(combined: list[dict]) -> list[tuple[str, int]]:
    """The (workload, size) pairs the summary shows: each workload's largest size run, and the
    sizes it names as its own (W1 n=1000, the small-array case; the three MLPs).

    Example:
        >>> rs = [{"workload": "W1", "n": n, "lib": "numpy"} for n in (10, 1000, 10**6)]
        >>> summary_cases(rs)
        [('W1', 1000), ('W1', 1000000)]
    """
    out = []
    for name, wl in WORKLOADS.items():
        sizes = sorted({r["n"] for r in combined if r["workload"] == name})
        if sizes:
            out += [(name, n) for n in sizes if n in wl.summary_sizes or n == sizes[-1]]
    return out


def _ratio_cell(r: dict | None, peer: dict | None) -> str:
    if not (_ok(r) and peer):
        return "–"
    return fmt_ratio(r["median_s"] / peer["median_s"])


def summary_rows(combined: list[dict]) -> list[list[str]]:
    """One line per summary case: fusegrad's plain ``grad`` and ``fusegrad.jit`` against the
    fastest peer, and fusegrad's peak memory against the leanest peer's.

    Example:
        >>> rs = [{"lib": "fusegrad", "workload": "W1", "n": 10, "status": "ok",
        ...        "median_s": 1e-3, "peak_rss_bytes": 0},
        ...       {"lib": "autograd", "workload": "W1", "n": 10, "status": "ok",
        ...        "median_s": 2e-3, "peak_rss_bytes": 2 << 20}]
        >>> summary_rows(rs)[0]
        ['W1', 'n = 10', '1 ms', '–', 'autograd 2 ms', '0.500×', '–', '<1 MiB · 2 MiB (autograd)']
    """
    out = []
    for w, n in summary_cases(combined):
        rows = [r for r in combined if r["workload"] == w and r["n"] == n]
        fg = _at(rows, "fusegrad", w, n)
        jit = _at(rows, "fusegrad-jit", w, n)
        peer = best_peer(rows)
        lean = leanest_peer(rows)

        def t(r):
            if r is None or _not_installed(r):
                return "–"
            return fmt_time_cell(r) if _ok(r) else f"{r['status']} (see its table)"

        mem = fmt_bytes(fg.get("peak_rss_bytes")) if _ok(fg) else "–"
        if lean:
            mem += f" · {fmt_bytes(lean['peak_rss_bytes'])} ({lean['lib']})"
        out.append([
            w, WORKLOADS[w].size_label(n), t(fg), t(jit),
            f"{peer['lib']} {fmt_time_cell(peer)}" if peer else "no peer measured",
            _ratio_cell(fg, peer), _ratio_cell(jit, peer), mem,
        ])  # fmt: skip
    return out


SUMMARY_HEADERS = [
    "workload",
    "size",
    "fusegrad grad",
    "fusegrad jit",
    "fastest peer",
    "grad ÷ peer",
    "jit ÷ peer",
    "peak memory: fusegrad · leanest peer",
]


def summary_section(combined: list[dict], heading: str = "## Summary") -> str:
    """The report's opening: one line per workload, fusegrad against the best peer.

    Example:
        >>> summary_section([])
        ''
    """
    rows = summary_rows(combined)
    if not rows:
        return ""
    peers = [name for name, lib in LIBS.items() if lib.peer]
    ran = [p for p in peers if any(r["lib"] == p and _ok(r) for r in combined)]
    return (
        f"{heading}\n\n"
        "Median time of one gradient call, and its peak memory above the process's baseline.\n"
        f"*fastest peer*: the fastest of {', '.join(ran) or 'no peer'} at that size; "
        "*÷ peer* below 1: fusegrad is faster.\n"
        "*leanest peer*: the peer with the smallest peak. "
        f"`{THP_MARK}`: from the run with glibc's malloc tuned for large temporaries (memory: "
        "each library's smaller peak of its two runs).\n"
        "Differences under about 1.5× are ties on a shared machine.\n\n"
        + markdown_table(SUMMARY_HEADERS, rows)
        + "\n"
    )


# --- targets ----------------------------------------------------------------------------------

# (what it measures, workload, size, fusegrad libraries, measure, goal). A target is judged only
# at the size it names; measures: ("floor", x) memory ÷floor ≤ x; ("extra", bytes) peak ΔRSS
# under bytes; (peer, x) time ÷ that peer's time ≤ x.
_FG_ALL = ("fusegrad", "fusegrad-jit", "fusegrad-numpy", "fusegrad-numba")
_TARGETS = [
    *[
        (what, w, n, _FG_ALL, measure)
        for w, n in (("W1", 10**7), ("W2", 8000), ("W2T", 8000))
        for what, measure in (
            ("peak memory near the floor (inputs + gradient)", ("floor", 1.10)),
            ("time against autograd", ("autograd", 0.5)),
            ("time against jax.jit", ("jax-jit", 1.0)),
        )
    ],
    ("extra peak memory, broadcast-heavy kernel sum", "W3", 8000, _FG_ALL, ("extra", 50e6)),
    ("time against jax.jit, broadcast-heavy kernel sum", "W3", 8000, _FG_ALL, ("jax-jit", 0.8)),
    *[
        (
            "time against jax.jit (its best malloc), Gaussian kernel",
            "W3",
            n,
            ("fusegrad",),
            ("jax-jit", 0.6),
        )
        for n in (4000, 8000)
    ],  # fmt: skip
    ("plain grad against autograd, small array", "W1", 1000, ("fusegrad",), ("autograd", 1.0)),
    *[
        ("plain grad against autograd, ordinary program", w, n, ("fusegrad",), ("autograd", x))
        for w, n, x in (("MLP", 32, 1.0), ("MLP", 256, 1.0), ("MLP", 4096, 0.8), ("RNN", 100, 0.8))
    ],
    *[
        ("jit against jax.jit, ordinary program", "MLP", n, ("fusegrad-jit",), ("jax-jit", x))
        for n, x in ((32, 1.2), (256, 1.2), (4096, 0.8))
    ],
]


def _judge(me: dict, measure: tuple, combined: list[dict]) -> tuple[str, str, str]:
    kind, goal = measure
    if kind == "floor":
        if me["peak_rss_bytes"] < NOISE_BYTES and not _traced(me):
            return fmt_floor(me), f"≤ {goal:.2f}×", "ΔRSS < 1 MiB noise"
        return fmt_floor(me), f"≤ {goal:.2f}×", _verdict(floor_ratio(me) <= goal)
    if kind == "extra":
        peak = me["peak_rss_bytes"]
        return fmt_bytes(peak), f"< {goal / 1e6:.0f} MB", _verdict(peak < goal)
    peer = _at(combined, kind, me["workload"], me["n"])
    if not _ok(peer):
        return "peer not measured", f"≤ {goal}× {kind}", "–"
    ratio = me["median_s"] / peer["median_s"]
    return fmt_ratio(ratio), f"≤ {goal}× {kind}", _verdict(ratio <= goal)


def _verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def target_rows(combined: list[dict]) -> list[list[str]]:
    """One row per target and fusegrad library measured at the target's size; a target whose
    size this run did not measure gets one row, *not measured at this size*.

    Example:
        >>> rows = target_rows([{"lib": "numpy", "workload": "W1", "n": 1000, "status": "ok"}])
        >>> rows[0][1:], len(rows) == len(_TARGETS)  # doctest: +NORMALIZE_WHITESPACE
        (['W1, n = 10,000,000', 'fusegrad, fusegrad-jit', '–', '≤ 1.10×',
          'not measured at this size'], True)
    """
    rows = []
    for what, w, n, fg_libs, measure in _TARGETS:
        case = _case_name(w, n)
        mine = [r for lib in fg_libs if (r := _at(combined, lib, w, n)) is not None]
        mine = [r for r in mine if not _not_installed(r)]
        if not mine:
            ran = any(r["workload"] == w and not _not_installed(r) for r in combined)
            kind, goal = measure
            goal_text = {"floor": f"≤ {goal:.2f}×", "extra": f"< {goal / 1e6:.0f} MB"}.get(
                kind, f"≤ {goal}× {kind}"
            )
            why = "not measured at this size" if ran else "not measured in this run"
            rows.append([what, case, ", ".join(fg_libs[:2]), "–", goal_text, why])
            continue
        for me in mine:
            if not _ok(me):
                rows.append([what, case, me["lib"], check_text(me), "–", "not measured"])
                continue
            got, goal_text, verdict = _judge(me, measure, combined)
            rows.append([what, case, me["lib"], got, goal_text, verdict])
    return rows


def target_counts(rows: list[list[str]]) -> str:
    """How many target rows were met, missed and not measured, for the terminal.

    Example:
        >>> target_counts([["", "", "", "", "", "met"], ["", "", "", "", "", "**missed**"]])
        'targets: 1 met, 1 missed'
    """
    met = sum(r[-1] == "met" for r in rows)
    missed = sum(r[-1] == "**missed**" for r in rows)
    other = len(rows) - met - missed
    return f"targets: {met} met, {missed} missed" + (
        f", {other} not measured at this size or not judged" if other else ""
    )


def targets_section(combined: list[dict]) -> str:
    """The performance targets, each judged at the size it names against this run's peers.

    Example:
        >>> "not measured in this run" in targets_section([])
        True
    """
    rows = target_rows(combined)
    return (
        "## Targets\n\n"
        "Each target names one case; it is judged only when this run measured that size (the\n"
        "large ones need `--full`). Ratios are against peers in this same run, each at its\n"
        "faster malloc; compile time is excluded (it is the separate first-call column). For\n"
        "W2/W2T the floor is at most 125 KiB, below what RSS resolves: when the peak ΔRSS is\n"
        "under 1 MiB, ÷floor comes from the `tracemalloc` peak of one more call (ᵗ).\n\n"
        + markdown_table(["target", "case", "lib", "measured", "goal", "verdict"], rows)
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
    versions: dict[str, str | None] = {}
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


MALLOC_TEXT = {
    "auto": "each library's faster of stock glibc malloc and glibc's malloc tuned for large "
    "temporaries (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1073741824"
    ":glibc.malloc.mmap_threshold=33554432 THP_MEM_ALLOC_ENABLE=1`: huge pages, freed memory kept "
    "mapped), the latter tried for every library wherever a temporary reaches 4 MiB "
    "(`--malloc both` tries every case); times from the tuned run are marked ʰ",
    "both": "each case with stock glibc malloc and again with glibc's malloc tuned for large "
    "temporaries (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1073741824"
    ":glibc.malloc.mmap_threshold=33554432 THP_MEM_ALLOC_ENABLE=1`), keeping the faster "
    "(marked ʰ when it is the tuned run)",
    "stock": "stock glibc malloc only (`--malloc stock`: the peers are not at their best)",
}


def machine_section(m: dict, command: str, malloc: str, skipped: dict | None = None) -> str:
    """The machine description, the malloc setting, skipped libraries and the command line.

    Example:
        >>> md = machine_section(machine_info(1), "python -m fusegrad.bench", "auto",
        ...                      {"torch": "pip install torch"})
        >>> "Command" in md and "Skipped (not installed): torch" in md
        True
    """
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    mem = fmt_bytes_exact(m["memory_bytes"]) if m["memory_bytes"] else "unknown"
    skip = ""
    if skipped:
        how = "; ".join(f"`{cmd}`" for cmd in dict.fromkeys(skipped.values()))
        skip = f"- Skipped (not installed): {', '.join(skipped)} — {how}\n"
    return (
        f"- Machine: {m['cpu']}, {m['cores']} cores, {mem} memory; {m['os']}; "
        f"transparent huge pages `{m['transparent_hugepage'] or 'unknown'}`\n"
        f"- Python {m['python']}; {vers}\n"
        f"- Threads: {m['threads']}; malloc: {MALLOC_TEXT[malloc]}\n"
        + skip
        + f"- Date: {m['date']}\n"
        f"- Command: `{command}`\n"
    )  # fmt: skip


COLUMNS_NOTE = """\
Columns: *time* is the median of ≥5 samples after warm-up (fast calls batched so that a sample lasts
≥20 ms), ʰ when it comes from the run with glibc's malloc tuned for large temporaries; *stock · THP*
(in tables where some library ran both ways) gives both runs' times; *×numpy* divides by the
hand-written NumPy gradient and *×best peer* by the fastest of autograd, jax, jax-jit and torch, all
in this run; *peak ΔRSS* is the peak resident memory over the full-size calls above the process's
RSS after imports, inputs and a tiny warm-up (`<1 MiB` is noise); *÷floor* is (inputs + ΔRSS) /
(inputs + gradients), or with the *tracemalloc peak* in place of ΔRSS when ΔRSS is noise (marked ᵗ);
*ΔRSS warm call* is the peak over the timed calls only; *tracemalloc peak* is one more call's NumPy
buffers and Python objects (libraries whose arrays are NumPy's: `–` for JAX and torch); *first call*
is the first full-size call (trace and compile for jit libraries), *cold* the tiny warm-up in the
fresh process; *check* is the maximum error against the NumPy gradient relative to its largest entry
(tolerance 1e-8). Each case ran in a fresh process. Differences under about 1.5× on a shared machine
are ties.
"""

PICTURES = {
    "summary.png": "fusegrad's time and peak memory relative to each peer, per workload",
    "time.png": "median time against size, per workload",
    "memory.png": "peak memory (ΔRSS) against size, per workload; the shaded band is RSS noise",
}


def pictures_section(out_dir: str | None) -> str:
    """Links to the pictures that exist in ``out_dir`` (all of them when ``out_dir`` is None).

    Example:
        >>> pictures_section(None).splitlines()[2][:30]
        '- [summary.png](summary.png): '
    """
    have = [f for f in PICTURES if out_dir is None or os.path.exists(os.path.join(out_dir, f))]
    if not have:
        return ""
    lines = [f"- [{f}]({f}): {PICTURES[f]}" for f in have]
    img = "\n![fusegrad relative to each peer](summary.png)\n" if "summary.png" in have else ""
    return "## Pictures\n\n" + "\n".join(lines) + "\n" + img


def rounds_line(combined: list[dict]) -> str:
    """The run's line on rounds (``--rounds``): which cases ran in several, and how their time
    was kept; empty when none did.

    Example:
        >>> rows = [{"lib": "jax", "workload": "MLP", "n": 32, "rounds_s": [2.0, 1.0, 3.0]}]
        >>> rounds_line(rows)[:40]
        '- Rounds: MLP at 32 ran in 3 rounds, eve'
    """
    cases: dict = {}
    k = 0
    for r in combined:
        if len(r.get("rounds_s") or ()) > 1:
            cases.setdefault(r["workload"], set()).add(r["n"])
            k = max(k, len(r["rounds_s"]))
    if not cases:
        return ""
    which = "; ".join(
        f"{w} at {', '.join(f'{n:,}' for n in sorted(ns))}" for w, ns in cases.items()
    )
    return (
        f"- Rounds: {which} ran in {k} rounds, every library's case once per round, one after "
        f"another; each time is the best of {k} rounds' medians (every round's is in "
        "results.json)\n"
    )


def render_report(combined, machine, command, malloc, elapsed_s, out_dir=None) -> str:
    """The whole ``report.md``: summary, pictures, targets, the run, then every table.

    Example:
        >>> md = render_report([], machine_info(None), "cmd", "auto", 1.0)
        >>> md.startswith("# fusegrad benchmark")
        True
    """
    return (
        "# fusegrad benchmark\n\n"
        + summary_section(combined)
        + "\n"
        + pictures_section(out_dir)
        + "\n"
        + targets_section(combined)
        + "\n## The run\n\n"
        + machine_section(machine, command, malloc, skipped_libs(combined))
        + f"- Wall time of the whole run: {elapsed_s:.0f} s\n"
        + rounds_line(combined)
        + "\n"
        + COLUMNS_NOTE
        + "\n## Results\n\n"
        + workload_sections(combined)
    )


def write_outputs(out_dir, results, combined, machine, command, options, malloc, elapsed_s) -> str:
    """Write ``report.md`` and ``results.json`` into ``out_dir``; return the report text.
    (Write the pictures first: the report links those that exist.)

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = write_outputs(d, [], [], machine_info(None), "cmd", {}, "auto", 0.0)
        >>> sorted(os.listdir(d))
        ['report.md', 'results.json']
    """
    os.makedirs(out_dir, exist_ok=True)
    text = render_report(combined, machine, command, malloc, elapsed_s, out_dir)
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

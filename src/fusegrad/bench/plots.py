"""The pictures: time and peak memory against size per workload, and a one-figure summary.

``time.png`` and ``memory.png`` have one panel per workload (log-log; fusegrad solid, peers
dashed, one legend outside the panels); on ``memory.png`` the band under 1 MiB is RSS noise and
points in it are hollow. ``summary.png`` is the figure for a talk: fusegrad's plain ``grad``
time and peak memory divided by each peer's, one bar per peer and workload.

Example:
    >>> plot_all([], "/nonexistent-dir-never-written")
    'plots skipped: no case ran'
"""

from __future__ import annotations

import os

from .libs import LIBS
from .report import NOISE_BYTES, _not_installed, summary_cases
from .workloads import WORKLOADS

_MIB = 1 << 20
_MIN_MIB = 0.1  # RSS peaks under the noise are drawn at this floor on the log axis
_NOISE_MIB = NOISE_BYTES / _MIB
_PEER_COLORS = {"autograd": "#4c72b0", "jax": "#dd8452", "jax-jit": "#c44e52", "torch": "#8172b3"}
_COLORS = {
    **_PEER_COLORS,
    "fusegrad": "#2ca02c",
    "fusegrad-jit": "#17becf",
    "fusegrad-numpy": "#bcbd22",
    "fusegrad-numba": "#8c564b",
    "numpy": "#7f7f7f",
}


def series(combined: list[dict]) -> dict:
    """{workload: {lib: [(n, median_s, peak_mib), ...]}} for the cases that ran correctly.

    Example:
        >>> series([{"workload": "W1", "lib": "numpy", "n": 10, "status": "ok",
        ...          "median_s": 1e-6, "peak_rss_bytes": 0}])
        {'W1': {'numpy': [(10, 1e-06, 0.0)]}}
    """
    out: dict = {}
    for r in combined:
        if r["workload"] not in WORKLOADS or r["status"] != "ok":
            continue
        mib = (r.get("peak_rss_bytes") or 0) / _MIB
        out.setdefault(r["workload"], {}).setdefault(r["lib"], []).append(
            (r["n"], r["median_s"], mib)
        )
    return {w: {lib: sorted(pts) for lib, pts in libs.items()} for w, libs in out.items()}


def ratios(combined: list[dict], what: str) -> tuple[list[str], dict]:
    """Summary cases and, per peer, fusegrad's ``what`` (``"time"`` or ``"memory"``) divided by
    the peer's: {peer: [(ratio, clamped), ...]}, ``None`` where either is missing. Memory below
    the 1 MiB noise is counted as 1 MiB, and such a ratio is marked ``clamped``.

    Example:
        >>> rs = [{"workload": "W1", "n": 10, "lib": lib, "status": "ok", "median_s": t,
        ...        "peak_rss_bytes": m} for lib, t, m in
        ...       [("fusegrad", 1.0, 0), ("autograd", 2.0, 4 << 20)]]
        >>> ratios(rs, "time")
        (['W1 n = 10'], {'autograd': [(0.5, False)]})
        >>> ratios(rs, "memory")[1]
        {'autograd': [(0.25, True)]}
    """
    cases = summary_cases(combined)
    peers = [p for p, lib in LIBS.items() if lib.peer]

    def at(lib, w, n):
        return next((r for r in combined if (r["lib"], r["workload"], r["n"]) == (lib, w, n)), None)

    out: dict = {}
    for p in peers:
        vals: list[tuple[float, bool] | None] = []
        for w, n in cases:
            me, peer = at("fusegrad", w, n), at(p, w, n)
            if not (me and peer and me["status"] == "ok" and peer["status"] == "ok"):
                vals.append(None)
            elif what == "time":
                vals.append((me["median_s"] / peer["median_s"], False))
            else:
                a, b = me.get("peak_rss_bytes"), peer.get("peak_rss_bytes")
                if a is None or b is None:
                    vals.append(None)
                    continue
                clamped = min(a, b) < NOISE_BYTES
                vals.append((max(a, NOISE_BYTES) / max(b, NOISE_BYTES), clamped))
        if any(v is not None for v in vals):
            out[p] = vals
    return [f"{w} {WORKLOADS[w].size_label(n)}" for w, n in cases], out


def _fmt(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 100 else f"{ratio:.2g}×"


def _style(lib: str) -> dict:
    if lib.startswith("fusegrad"):
        # fusegrad-jit often runs as plain grad: dotted over the solid line, both stay visible
        dash = (0, (2, 1.5)) if lib != "fusegrad" else "-"
        return {"linestyle": dash, "marker": "o", "linewidth": 2.0, "color": _COLORS.get(lib)}
    return {"linestyle": "--", "marker": "s", "linewidth": 1.2, "color": _COLORS.get(lib)}


def _panels(plt, names: list[str]):
    cols = min(3, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols + 1.8, 3.6 * rows + 0.9))
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax in flat[len(names) :]:
        ax.set_visible(False)
    return fig, flat


def _curve_figure(plt, data: dict, idx: int, title: str, quick: bool):
    names = [w for w in WORKLOADS if w in data]
    fig, axes = _panels(plt, names)
    handles: dict = {}
    for ax, w in zip(axes, names, strict=False):
        wl = WORKLOADS[w]
        if idx == 2:
            ax.axhspan(_MIN_MIB / 2, _NOISE_MIB, color="0.85", zorder=0)
            ax.text(0.02, 0.03, "RSS noise (< 1 MiB)", transform=ax.transAxes, fontsize=7,
                    color="0.35")  # fmt: skip
        for lib in LIBS:
            pts = data[w].get(lib)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [max(p[idx], _MIN_MIB) if idx == 2 else p[idx] for p in pts]
            (line,) = ax.plot(xs, ys, label=lib, ms=5, **_style(lib))
            handles.setdefault(lib, line)
            if idx == 2:  # hollow markers where the value is noise
                noisy = [(x, y) for x, y, p in zip(xs, ys, pts, strict=True) if p[2] < _NOISE_MIB]
                if noisy:
                    ax.plot(*zip(*noisy, strict=True), linestyle="none", marker=line.get_marker(),
                            ms=7, mfc="white", mec=line.get_color(), zorder=3)  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        if idx == 2:
            ax.set_ylim(bottom=_MIN_MIB / 2)
        ax.set_title(f"{w}: {wl.formula}", fontsize=8)
        ax.set_xlabel(wl.size_axis, fontsize=8)
        ax.set_ylabel("median time (s)" if idx == 1 else "peak ΔRSS (MiB)", fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        if len({p[0] for pts in data[w].values() for p in pts}) == 1:
            ax.text(0.98, 0.97, "one size", transform=ax.transAxes, ha="right", va="top",
                    fontsize=7, color="0.35")  # fmt: skip
    sub = "quick mode: most lines join just two points (--full for more sizes)" if quick else ""
    if idx == 2:
        sub = "; ".join(filter(None, [sub, "hollow points and the grey band: under 1 MiB, noise"]))
    fig.suptitle(title + (f"\n{sub}" if sub else ""), fontsize=11)
    order = [lib for lib in LIBS if lib in handles]  # fusegrad first, whatever ran first
    fig.legend([handles[lib] for lib in order], order, loc="center right", fontsize=8,
               frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1 - 1.6 / fig.get_figwidth(), 1))
    return fig


def _summary_figure(plt, combined: list[dict]):
    import numpy as np
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    n_cases = len(summary_cases(combined))
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.5 * max(4, n_cases) + 2.2))
    used = []
    for ax, what, label in ((axes[0], "time", "time"), (axes[1], "memory", "peak memory")):
        cases, per_peer = ratios(combined, what)
        y = np.arange(len(cases))
        height = 0.8 / max(1, len(per_peer))
        lo, hi = 0.5, 2.0
        for k, (peer, vals) in enumerate(per_peer.items()):
            used += [peer] if peer not in used else []
            pos = y - 0.4 + height * (k + 0.5)
            for yy, v in zip(pos, vals, strict=True):
                if v is None:
                    continue
                ratio, clamped = v
                lo, hi = min(lo, ratio), max(hi, ratio)
                # bars grow from 1 (a tie) to the ratio, on the log axis
                ax.barh(yy, abs(ratio - 1.0), left=min(ratio, 1.0), height=height * 0.9,
                        color=_COLORS.get(peer), hatch="//" if clamped else None,
                        edgecolor="white", alpha=0.55 if clamped else 1.0)  # fmt: skip
                ax.text(ratio * (1.06 if ratio >= 1 else 1 / 1.06), yy, _fmt(ratio),
                        va="center", ha="left" if ratio >= 1 else "right",
                        fontsize=6.5)  # fmt: skip
        for i in range(len(cases)):
            if all(vals[i] is None for vals in per_peer.values()):
                ax.text(1.08, i, "no fusegrad result (see report.md)", va="center",
                        fontsize=7, color="0.4")  # fmt: skip
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlim(lo / 2.5, hi * 2.5)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.set_yticks(y, cases, fontsize=8)
        ax.set_ylim(len(cases) - 0.5, -0.5)
        ax.set_xlabel(f"fusegrad's {label} ÷ the peer's (log scale)\n"
                      "left of 1: fusegrad better; right of 1: the peer better",
                      fontsize=8)  # fmt: skip
        ax.set_title(label.capitalize(), fontsize=10)
        ax.grid(True, axis="x", which="major", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    axes[1].tick_params(axis="y", labelleft=False)
    fig.suptitle(
        "fusegrad (plain grad) relative to each peer, per workload\n"
        "hatched memory bars: one side under 1 MiB (RSS noise), counted as 1 MiB",
        fontsize=11,
    )
    handles = [Patch(color=_COLORS.get(p), label=p) for p in used]
    fig.legend(handles=handles, loc="lower center", ncol=max(1, len(handles)), fontsize=9,
               frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_all(combined: list[dict], out_dir: str, quick: bool = False) -> str:
    """Write ``summary.png``, ``time.png`` and ``memory.png`` into ``out_dir``; say what was
    done.

    Example:
        >>> plot_all([{"workload": "W1", "lib": "numpy", "n": 1, "status": "error"}], ".")
        'plots skipped: no case ran'
    """
    combined = [r for r in combined if not _not_installed(r)]
    data = series(combined)
    if not data:
        return "plots skipped: no case ran"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plots skipped: matplotlib is not installed (pip install 'fusegrad[bench]')"

    os.makedirs(out_dir, exist_ok=True)
    figures = [
        ("time.png", _curve_figure(plt, data, 1, "Median time of one gradient call", quick)),
        ("memory.png", _curve_figure(plt, data, 2, "Peak memory above the baseline", quick)),
    ]
    if any(ratios(combined, "time")[1].values()):
        figures.insert(0, ("summary.png", _summary_figure(plt, combined)))
    written = []
    for fname, fig in figures:
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return "plots written: " + ", ".join(written)

"""Log-log plots of time and peak memory against N on the pairwise workloads.

Example:
    >>> plot_all([], "/nonexistent-dir-never-written")
    'plots skipped: no pairwise workload has two or more sizes'
"""

from __future__ import annotations

import os

from .libs import LIBS
from .workloads import WORKLOADS

_MIN_MIB = 0.1  # RSS peaks under the noise are drawn at this floor on the log axis


def _series(combined: list[dict]) -> dict:
    """{workload: {lib: [(n, median_s, peak_mib), ...]}} for ok cases of pairwise workloads."""
    out: dict = {}
    for r in combined:
        wl = WORKLOADS.get(r["workload"])
        if wl is None or not wl.pairwise or r["status"] != "ok":
            continue
        mib = max(_MIN_MIB, (r.get("peak_rss_bytes") or 0) / (1 << 20))
        out.setdefault(r["workload"], {}).setdefault(r["lib"], []).append(
            (r["n"], r["median_s"], mib)
        )
    return {
        w: {lib: sorted(pts) for lib, pts in libs.items()}
        for w, libs in out.items()
        if len({n for pts in libs.values() for n, _, _ in pts}) >= 2
    }


def plot_all(combined: list[dict], out_dir: str) -> str:
    """Write ``time.png`` and ``memory.png`` into ``out_dir``; return what was done.

    Example:
        >>> plot_all([{"workload": "W1", "lib": "numpy", "n": 1, "status": "ok"}], ".")
        'plots skipped: no pairwise workload has two or more sizes'
    """
    series = _series(combined)
    if not series:
        return "plots skipped: no pairwise workload has two or more sizes"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plots skipped: matplotlib is not installed (pip install 'fusegrad[bench]')"

    written = []
    for fname, idx, ylabel in (("time.png", 1, "median time (s)"),
                               ("memory.png", 2, "peak ΔRSS (MiB)")):  # fmt: skip
        names = list(series)
        cols = min(2, len(names))
        rows = (len(names) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.2 * rows), squeeze=False)
        for ax, w in zip(axes.flat, names, strict=False):
            for lib in LIBS:
                pts = series[w].get(lib)
                if not pts:
                    continue
                style = "-o" if lib.startswith("fusegrad") else "--s"
                ax.loglog([p[0] for p in pts], [p[idx] for p in pts], style, label=lib, ms=4)
            ax.set_title(f"{w}: {WORKLOADS[w].formula}", fontsize=9)
            ax.set_xlabel("N")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(names) :]:
            ax.set_visible(False)
        if idx == 2:
            note = f"values under the RSS noise drawn at {_MIN_MIB} MiB"
            fig.suptitle(f"peak memory above baseline ({note})", fontsize=10)
        fig.tight_layout()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return "plots written: " + ", ".join(written)

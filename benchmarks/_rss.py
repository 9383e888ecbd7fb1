"""Extra peak RSS of one warmed-up call, measured in a fresh child process (Linux).

The child resets the kernel's peak-RSS mark (``/proc/self/clear_refs``) after two warm-up calls,
makes one call, and prints the high-water mark above the RSS before it as JSON. glibc's mmap
threshold is pinned (``MALLOC_MMAP_THRESHOLD_``) so that freed large blocks go back to the OS
and cannot hide a later peak. Shared by ``bench_fused_reverse.py`` and ``bench_hvp.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable


def _status(field: str) -> int:
    text = open("/proc/self/status").read()
    return int(re.search(rf"{field}:\s+(\d+)", text).group(1)) * 1024


def report_extra_peak(call: Callable[[], object]) -> None:
    """In the child: warm ``call`` up, then print the extra peak RSS of one more call."""
    call()
    call()
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS high-water mark
    out = call()
    extra = _status("VmHWM") - before
    del out
    print(json.dumps({"extra": extra}))


def extra_peak_in_child(script: str, args: list[str], label: str) -> float | None:
    """In the parent: run ``script args`` (whose child mode calls ``report_extra_peak``) and
    return the bytes it reports, or None when it failed."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    p = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=900
    )
    if p.returncode != 0:
        print(f"  memory child {label} failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])["extra"]

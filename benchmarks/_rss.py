"""Extra peak RSS of one warmed-up call, measured in a fresh child process (Linux); a process's
RSS, PSS, private and anonymous memory, and their peaks during a call (``PeakSampler``).

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
import threading
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


# Memory of a process as Linux accounts it (/proc/<pid>/smaps_rollup), in bytes. RSS counts
# every resident page, shared library pages included; PSS divides each shared page among the
# processes mapping it (the worker's share of the machine's memory); private pages (clean and
# dirty) are those no other process maps; anonymous pages are heap, stacks and arrays.
MEMORY_FIELDS = ("Rss", "Pss", "Private", "Anonymous")


def smaps(pid: int | str = "self") -> dict[str, int]:
    """RSS, PSS, private and anonymous bytes of process ``pid`` (Linux, smaps_rollup)."""
    d: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[2] == "kB":
                d[p[0].rstrip(":")] = int(p[1]) * 1024
    d["Private"] = d.get("Private_Clean", 0) + d.get("Private_Dirty", 0)
    return {k: d.get(k, 0) for k in MEMORY_FIELDS}


def by_mapping(pid: int | str = "self", top: int = 8) -> list[tuple[str, int, int]]:
    """The ``top`` mappings of process ``pid`` by RSS, grouped by file (anonymous memory as
    ``[anon]``): (name, RSS bytes, PSS bytes)."""
    sizes: dict[str, list[int]] = {}
    name = "[anon]"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if not p[0].endswith(":"):  # a mapping's header: address perms offset dev inode [path]
                name = p[5] if len(p) > 5 and not p[5].startswith("[") else "[anon]"
                name = name if name == "[anon]" else os.path.basename(name)
            elif p[0] in ("Rss:", "Pss:"):
                slot = sizes.setdefault(name, [0, 0])
                slot[p[0] == "Pss:"] += int(p[1]) * 1024
    rows = sorted(((k, v[0], v[1]) for k, v in sizes.items()), key=lambda r: -r[1])
    return rows[:top]


class PeakSampler:
    """Polls ``smaps()`` of this process every ``interval`` s on a thread, keeping each field's
    largest value, and reads the kernel's RSS high-water mark (VmHWM, reset by ``start``): the
    peak PSS and private memory of a call, which the kernel does not track.

    >>> s = PeakSampler(0.01).start(); _ = bytearray(1 << 20); s.stop()["Rss"] > 0
    True
    """

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak: dict[str, int] = {}
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        for k, v in smaps().items():
            self.peak[k] = max(self.peak.get(k, 0), v)

    def start(self) -> PeakSampler:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM
        self.peak = {}
        self._sample()
        self._stop = threading.Event()
        stop = self._stop

        def loop() -> None:
            while not stop.wait(self.interval):
                self._sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        """The peaks since ``start``: Rss is the kernel's exact VmHWM, the others sampled."""
        assert self._stop is not None and self._thread is not None
        self._stop.set()
        self._thread.join()
        self._sample()
        self.peak["Rss"] = max(self.peak["Rss"], _status("VmHWM"))
        return dict(self.peak)

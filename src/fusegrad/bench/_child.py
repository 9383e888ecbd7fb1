"""One benchmark case in a fresh process: ``python -m fusegrad.bench._child '<json spec>'``.

The spec names ``lib``, ``workload``, ``n`` and the sampling ``budget_s``/``min_samples``. The
result is one line on stdout, ``BENCH_RESULT {json}``, whatever happens (errors included).

Example:
    >>> r = run_case({"lib": "numpy", "workload": "W1", "n": 100})
    >>> r["status"], r["check"]
    ('ok', 'ok')
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback

MARKER = "BENCH_RESULT "
TOLERANCE = 1e-8


def rel_error(got, ref, scale: float = 0.0) -> float:
    """Max absolute difference over all outputs, relative to the largest reference magnitude
    (or ``scale`` when the true gradient cancels to zero, as in W2/W2T).

    Example:
        >>> import numpy as np
        >>> rel_error((np.array([1.0, 2.0]),), (np.array([1.0, 4.0]),))
        0.5
    """
    import numpy as np

    if len(got) != len(ref):
        raise ValueError(f"{len(got)} gradients returned, expected {len(ref)}")
    worst = 0.0
    for g, r in zip(got, ref, strict=True):
        g = np.asarray(g, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        if g.size != r.size:
            raise ValueError(f"gradient of shape {g.shape}, expected {r.shape}")
        if not np.all(np.isfinite(g)):
            return float("inf")
        denom = max(float(np.max(np.abs(r), initial=0.0)), scale, 1e-300)
        diff = float(np.max(np.abs(g.reshape(r.shape) - r), initial=0.0))
        worst = max(worst, diff / denom)
    return worst


def _traced_peak(fn) -> int:
    """The ``tracemalloc`` peak of one more call above the level before it: NumPy buffers and
    Python objects, byte-exact where RSS cannot resolve a small peak.

    Example:
        >>> _traced_peak(lambda: bytearray(10**6)) >= 10**6
        True
    """
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - before
        del result
    finally:
        tracemalloc.stop()
    return max(0, peak)


def _pin_threads(threads: int | None) -> None:
    if threads and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        if threads < len(cpus):
            os.sched_setaffinity(0, cpus[:threads])


def run_case(spec: dict) -> dict:
    """Run one case and return its result record (never raises).

    Example:
        >>> run_case({"lib": "numpy", "workload": "nope", "n": 1})["status"]
        'error'
    """
    out = {"lib": spec["lib"], "workload": spec["workload"], "n": spec["n"]}
    phase = "import"
    try:
        from . import libs, measure
        from .workloads import WORKLOADS

        _pin_threads(spec.get("threads"))
        wl = WORKLOADS[spec["workload"]]
        prep = libs.build(spec["lib"], wl)
        if spec["lib"] == "torch" and spec.get("threads"):
            import torch

            torch.set_num_threads(spec["threads"])

        # A tiny warm-up first, as in the peers' baseline: the first trace, compile and lazy
        # imports land here and not in the full-size measurement.
        phase = "warm-up"
        tiny = prep.convert(wl.make_inputs(wl.tiny_size))
        t0 = time.perf_counter()
        prep.sync(prep.call(tiny))
        out["cold_s"] = time.perf_counter() - t0
        del tiny

        phase = "inputs"
        args = wl.make_inputs(spec["n"])
        cargs = prep.convert(args)
        gc.collect()
        peak = measure.PeakRSS()

        phase = "first call"

        def fn():
            return prep.sync(prep.call(cargs))

        t0 = time.perf_counter()
        result = fn()
        out["first_s"] = time.perf_counter() - t0
        grads = prep.to_numpy(result)
        del result
        # Check the first result now and drop it before timing: kept alive, it would put two
        # gradients in every library's peak; the check's own temporaries are not counted.
        first_peak = out["first_rss_bytes"] = peak.delta_bytes()
        phase = "check"
        ref = wl.hand_grad(*args)
        err = rel_error(grads, ref, wl.check_scale(spec["n"]))
        del grads, ref
        gc.collect()
        measure.release_freed()  # else the check's freed heap stays resident in the peak
        peak.restart()
        warm = measure.PeakRSS()  # the timed calls alone, above the RSS they start from

        phase = "timing"
        out.update(
            measure.time_call(
                fn,
                min_samples=spec.get("min_samples", 5),
                budget_s=spec.get("budget_s", 0.5),
                first_s=out["first_s"],
            )
        )
        out["warm_rss_bytes"] = warm.delta_bytes()
        out["peak_rss_bytes"] = max(first_peak, peak.delta_bytes())
        out["rss_exact"] = peak.exact
        if libs.LIBS[spec["lib"]].numpy_arrays:
            phase = "tracemalloc"
            out["tracemalloc_peak_bytes"] = _traced_peak(fn)

        if (note := prep.note()) is not None:
            out["note"] = note
        out["rel_err"] = err
        out["check"] = "ok" if err <= TOLERANCE else "wrong"
        out["status"] = "ok" if err <= TOLERANCE else "wrong"
    except BaseException as e:  # noqa: BLE001 - any failure is a result, not a crash
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out["status"] = "error"
        out["message"] = f"{phase}: {type(e).__name__}: {msg}"[:300]
        out["traceback"] = traceback.format_exc()[-2000:]
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child process: run the spec given as JSON in ``argv[0]``.

    Example:
        >>> main(['{"lib": "numpy", "workload": "W1", "n": 10}'])  # doctest: +ELLIPSIS
        BENCH_RESULT {...
    """
    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    result = run_case(spec)
    sys.stdout.flush()
    print(MARKER + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""Shared test set-up: Hypothesis profiles, the session's kernel cache, markers, and the
``engine`` fixture that runs a test once per engine.

Hypothesis profiles (``FUSEGRAD_HYPOTHESIS=ci|dev|nightly``; default ``ci`` when $CI is set, else
``dev``): ``ci`` is deterministic and bounded, ``dev`` is the same size with fresh random examples
each run, ``nightly`` runs many more examples (tests that set ``max_examples`` themselves run ten
times theirs; ``benchmarks/nightly_properties.sh``). Every ``@given`` test is marked ``property``.

The numba kernels of a session are compiled into a temporary ``FUSEGRAD_CACHE_DIR``, removed when
the session ends, unless the variable is set already (keep a folder of your own between runs).
"""

import os
import shutil
import tempfile

if not os.environ.get("FUSEGRAD_CACHE_DIR"):
    # Before fusegrad is imported: the subprocesses some tests start inherit it too.
    _SESSION_CACHE = tempfile.mkdtemp(prefix="fusegrad-test-cache-")
    os.environ["FUSEGRAD_CACHE_DIR"] = _SESSION_CACHE
else:
    _SESSION_CACHE = None
# A hot program's kernels all compile at its HOT_REPLAYS-th replay, whatever numba's disk cache
# holds, so that every test of a hot replay runs the compiled kernels on a fresh machine too
# (tests/test_replay_budget.py tests the default, which compiles only what the run has paid for).
os.environ["FUSEGRAD_JIT_COMPILE"] = "eager"

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.lazy import small  # noqa: E402
from fusegrad.lazy.engines import numba_engine  # noqa: E402

DEFAULT_EAGER_BELOW = small.DEFAULT_EAGER_BELOW
os.environ["FUSEGRAD_EAGER_BELOW"] = "0"  # for the subprocesses some tests start

NIGHTLY_FACTOR = 10
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=30,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly",
    deadline=None,
    max_examples=30 * NIGHTLY_FACTOR,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILE = os.environ.get("FUSEGRAD_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "dev")
if PROFILE not in ("ci", "dev", "nightly"):
    raise ValueError(f"FUSEGRAD_HYPOTHESIS={PROFILE!r}: choose ci, dev or nightly")
settings.load_profile(PROFILE)


# Test files of the engines themselves: every case runs on both engines by default. Elsewhere a
# test parametrized over the engine runs its cases on numpy by default; on numba, its first case
# runs under `-m slow` (CI runs both tiers) and every case under the nightly profile
# (benchmarks/nightly_properties.sh). The numba engine compiles one kernel per distinct
# expression, about a second each on one core, and the rule, API and program tests compile
# hundreds: that was most of the default run's time, and would be most of CI's.
ENGINE_TEST_FILES = {
    "test_numba_engine.py",
    "test_numba_math.py",
    "test_numba_accuracy.py",
    "test_mirrored.py",
    "test_engines.py",
    "test_kernel_cache.py",
    "test_fused_reverse.py",
    "test_lazy_memory.py",
    "test_ops.py",
}


def _engine_of(item) -> str | None:
    spec = getattr(item, "callspec", None)
    return spec.params.get("engine") if spec is not None else None


def _numba_outside_the_engine_tests(items) -> list:
    return [
        item
        for item in items
        if _engine_of(item) == "numba" and item.path.name not in ENGINE_TEST_FILES
    ]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark every hypothesis test ``property``; under ``nightly``, a test that sets its own
    ``max_examples`` runs ``NIGHTLY_FACTOR`` times as many. Mark numba cases ``slow`` as
    ``ENGINE_TEST_FILES`` says."""
    seen, beyond_the_first = set(), []
    for item in _numba_outside_the_engine_tests(items):
        item.add_marker(pytest.mark.slow)
        key = (item.path, item.originalname)
        if key in seen and PROFILE != "nightly":
            beyond_the_first.append(item)
        seen.add(key)
    if beyond_the_first:
        drop = {id(i) for i in beyond_the_first}
        config.hook.pytest_deselected(items=beyond_the_first)
        items[:] = [i for i in items if id(i) not in drop]
    scaled = set()
    for item in items:
        fn = getattr(item, "function", None)
        if not getattr(fn, "is_hypothesis_test", False):
            continue
        item.add_marker(pytest.mark.property)
        if PROFILE != "nightly" or id(fn) in scaled:
            continue
        scaled.add(id(fn))  # parametrized tests share one function: scale it once
        own = fn._hypothesis_internal_use_settings
        if own is not settings.get_profile("nightly"):
            fn._hypothesis_internal_use_settings = settings(
                own, max_examples=own.max_examples * NIGHTLY_FACTOR
            )


def pytest_unconfigure(config):
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


ENGINES = [
    "numpy",
    pytest.param(
        "numba",
        marks=pytest.mark.skipif(not numba_engine.available(), reason="numba unavailable"),
    ),
]


@pytest.fixture(params=ENGINES)
def engine(request):
    """The test runs once per engine, inside ``fusegrad.use_engine``; the value is its name."""
    with fg.use_engine(request.param):
        yield request.param


@pytest.fixture(autouse=True, scope="session")
def _worker_pool_made():
    """The worker pool exists before any test tracks allocations: making it loads its numba
    poll, and numba's typing with it (~20-30 MB of Python objects, once per process), which a
    test whose call happened to make the pool counted as its own peak."""
    from fusegrad.lazy.engines import numpy_blocked

    numpy_blocked.pool()


@pytest.fixture(autouse=True)
def _lazy_at_every_size(monkeypatch):
    """Most tests check fusion on small arrays: the small-array path (eager below
    ``small.EAGER_BELOW`` elements) is off unless a test asks for it with ``small_path``."""
    monkeypatch.setattr(small, "EAGER_BELOW", 0)


@pytest.fixture
def small_path(monkeypatch):
    """The small-array path at its default threshold."""
    monkeypatch.setattr(small, "EAGER_BELOW", DEFAULT_EAGER_BELOW)
    return DEFAULT_EAGER_BELOW


@pytest.fixture(params=["small-array path", "lazy at every size"])
def path(request, monkeypatch):
    """The test runs twice: small arrays eager (as users have it), and every array lazy."""
    on = request.param == "small-array path"
    monkeypatch.setattr(small, "EAGER_BELOW", DEFAULT_EAGER_BELOW if on else 0)
    return request.param

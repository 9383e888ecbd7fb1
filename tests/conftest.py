"""Shared test set-up: Hypothesis profiles ("ci", deterministic and bounded, when $CI is set,
else "dev") and the ``engine`` fixture that runs a test once per engine."""

import os

import pytest
from hypothesis import HealthCheck, settings

import fusegrad as fg
from fusegrad.lazy import small
from fusegrad.lazy.engines import numba_engine

DEFAULT_EAGER_BELOW = 10_000
os.environ["FUSEGRAD_EAGER_BELOW"] = "0"  # for the subprocesses some tests start

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=30,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

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

"""Shared test set-up: Hypothesis profiles ("ci", deterministic and bounded, when $CI is set,
else "dev") and the ``engine`` fixture that runs a test once per engine."""

import os

import pytest
from hypothesis import HealthCheck, settings

import fusegrad as fg
from fusegrad.lazy.engines import numba_engine

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

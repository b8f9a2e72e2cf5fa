"""Shared fixtures and the hypothesis profiles of the test suite."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI runs are derandomized so that a red run is reproducible from its log;
# local runs explore new examples every time.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

@pytest.fixture
def rng():
    return np.random.default_rng(20261122)

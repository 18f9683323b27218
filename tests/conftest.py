"""Shared test configuration.

Statistical tests use fixed seeds and thresholds chosen for a stated false-positive rate
(at most 1e-6 per test unless a test says otherwise); they are never re-seeded to pass.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import dpkit

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def registry() -> dpkit.Registry:
    """A fresh registry of the installed plugins (built-ins and any third-party)."""
    return dpkit.load_registry()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)

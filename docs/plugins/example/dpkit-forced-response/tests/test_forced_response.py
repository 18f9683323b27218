"""The example plugin's own tests: it is found through its entry point and keeps its ε."""

from __future__ import annotations

import itertools
import math

import numpy as np

import dpkit


def test_registered_through_its_entry_point() -> None:
    info = dpkit.load_registry().info("forced_response")
    assert info.provenance.distribution == "dpkit-forced-response"


def test_declared_distribution_keeps_epsilon() -> None:
    mech = dpkit.mechanism("forced_response", forced_yes=0.1, forced_no=0.2)
    outputs = mech.output_space()
    worst = max(
        float(np.max(mech.log_probability(outputs, x) - mech.log_probability(outputs, x2)))
        for x, x2 in itertools.permutations([0, 1], 2)
    )
    assert math.isclose(worst, mech.privacy.epsilon, rel_tol=1e-12)


def test_estimate_recovers_the_truth() -> None:
    mech = dpkit.mechanism("forced_response")
    truth = np.repeat([0, 1], [30_000, 10_000])
    estimate = dpkit.estimate(mech, mech.randomize(truth, rng=np.random.default_rng(1)))
    low, high = estimate.confidence_interval(level=1 - 1e-6)
    assert low[1] <= 10_000 <= high[1]  # fails with probability 1e-6 if the estimator is right

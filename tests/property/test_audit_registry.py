"""Every registered mechanism — built-in or third-party — keeps the ε (and δ) it claims.

Parametrised over the registry at collection time, so an installed plugin is audited without
any change here. Parameters are drawn by Hypothesis from each mechanism's declared ``typical``
ranges, neighbouring inputs from its declared domain (worst-case pairs always included).
A tier a mechanism does not support (no ``log_probability``, no finite output space, a calling
convention the auditor cannot see working) is skipped with the reason. The numeric local
mechanisms (inputs from an ``Interval`` or a ``Box``) are audited from the neighbours their
domains declare, like any other.

False positives. The exact tier is deterministic (tolerance 1e-9 on ε, 1e-6 relative on δ).
Each statistical audit samples both randomness modes (fast, and secure on a keyed SecureRandom,
passed as rng for half of each batch and standing in for rng=None for the other half)
and falsely alarms with probability ≤ 2·CHECK_ALPHA = 2e-7 (in each mode the ε certificate at
α/2 = 5e-8 plus the goodness-of-fit test at 5e-8). Hypothesis is derandomized
(fixed examples, fixed seeds): at most STAT_EXAMPLES audits per mechanism by default and
SLOW_EXAMPLES under ``slow``, so even with 100 registered mechanisms the suite's family-wise
false-positive rate is ≤ 100·(3 + 2)·2e-7 = 1e-4 ≤ 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.testing import CHECK_ALPHA, audit, exact_check, parameter_points
from dpkit.testing.inputs import Unsupported, plan_inputs
from dpkit.testing.strategies import mechanisms, neighbouring_pairs

REGISTRY = dpkit.load_registry()
NAMES = REGISTRY.names()
EXACT_EXAMPLES = 6
STAT_EXAMPLES = 3
SLOW_EXAMPLES = 2

PROPERTY_SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}


def _mechanism_class(name: str) -> type[dpkit.plugin.Mechanism]:
    return REGISTRY.info(name).cls


def _typical_instance(name: str) -> dpkit.plugin.Mechanism:
    cls = _mechanism_class(name)
    return cls(**parameter_points(cls)[len(parameter_points(cls)) // 2])


@pytest.mark.parametrize("name", NAMES)
def test_exact_tier_over_declared_distribution(name: str) -> None:
    probe = exact_check(_typical_instance(name))
    if not probe.checked:
        pytest.skip(f"exact tier does not apply to {name}: {probe.reason}")

    @settings(max_examples=EXACT_EXAMPLES, **PROPERTY_SETTINGS)
    @given(mechanism=mechanisms(_mechanism_class(name)), data=st.data())
    def check(mechanism: dpkit.plugin.Mechanism, data: st.DataObject) -> None:
        pairs = [data.draw(neighbouring_pairs(mechanism)) for _ in range(2)]
        result = exact_check(mechanism, pairs=pairs)
        assert not result.violation, f"{mechanism}: {result}"

    check()


def _statistical(name: str, examples: int, samples: int) -> None:
    try:
        plan_inputs(_typical_instance(name), rng=np.random.default_rng(0))
    except Unsupported as why:
        pytest.skip(f"statistical tier does not apply to {name}: {why}")

    @settings(max_examples=examples, **PROPERTY_SETTINGS)
    @given(
        mechanism=mechanisms(_mechanism_class(name)),
        seed=st.integers(0, 2**32 - 1),
        data=st.data(),
    )
    def check(mechanism: dpkit.plugin.Mechanism, seed: int, data: st.DataObject) -> None:
        pair = data.draw(neighbouring_pairs(mechanism))
        report = audit(
            mechanism,
            samples=samples,
            alpha=CHECK_ALPHA,
            seed=seed,
            pairs=[pair],
            random_pairs=1,
            exact=False,
        )
        assert report.verdict == "pass", report.format_text()

    check()


@pytest.mark.parametrize("name", NAMES)
def test_statistical_tier_finds_no_violation(name: str) -> None:
    _statistical(name, STAT_EXAMPLES, 20_000)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_statistical_tier_finds_no_violation_with_more_samples(name: str) -> None:
    _statistical(name, SLOW_EXAMPLES, 100_000)

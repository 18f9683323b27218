"""The auditor's verdicts on the catalog of mechanisms and queries with known privacy.

The catalog (``tests/support/audit_catalog.py``, 47 cases: correct mechanisms and known bugs
with vector outputs, interval and box inputs, (ε, δ) claims, and whole queries with wrong
sensitivities) is registered as a third-party plugin and every case is built by name through
that registry, as a plugin author's mechanisms would be.

False alarms: every audit runs at α = 1e-7 over both randomness modes, so a correct case is
flagged with probability ≤ 2e-7 (in each mode the ε certificate at α/2 and the goodness-of-fit
test at α/2); the 24 correct cases together ≤ 4.8e-6. The exact tier is deterministic. One fixed seed per case; the false-violation rate
over 20 seeds per correct case is measured by ``benchmarks/bench_audit.py``, not here.
Power: every bug's true ε is at least 1.5× its claim (or its δ(ε) is 2.3× δ, or its pmf does
not sum to 1), far above what the budgets below can miss (see each case's ``truth``).
"""

from __future__ import annotations

import functools
import math

import pytest
from support import audit_catalog as catalog

from dpkit.testing import AuditReport

ALPHA = 1e-7
SEED = 17
REGISTRY = catalog.catalog_registry()


@functools.cache
def _report(label: str) -> AuditReport:
    """The audit of one case at the module's seed and α, run once per process: the tests below
    that look closer at a case's report read the same audit as its verdict test (an audit is
    deterministic given its seed, so a second run would compute the identical report)."""
    case = next(c for c in catalog.CASES if c.label == label)
    return catalog.run_case(case, REGISTRY, seed=SEED, alpha=ALPHA)


def test_the_catalog_is_large_and_mixed() -> None:
    cases = catalog.CASES
    assert len(cases) >= 30
    assert len({c.label for c in cases}) == len(cases)
    for expected in ("pass", "violation"):
        assert sum(c.expected == expected for c in cases) >= 15
    assert sum(c.query and c.expected == "violation" for c in cases) >= 4
    assert not REGISTRY.failures


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.label)
def test_verdict(case: catalog.Case) -> None:
    report = _report(case.label)
    assert report.verdict == case.expected, report.format_text()
    if case.expected == "violation" and case.caught_by == "statistical":
        assert report.statistical.violation, report.format_text()  # the sampler alone proves it
    if case.expected == "violation" and case.caught_by == "exact":
        assert report.exact.violation, report.format_text()
    if case.expected == "pass" and report.statistical.checked:
        assert report.epsilon_lower_bound <= report.claimed_epsilon + 1e-9


def test_the_replace_one_histogram_needs_a_joint_event() -> None:
    """The leak moves two counts: the event that proves it is a score of the whole vector."""
    report = _report("replace_one_histogram_sensitivity_1")
    assert report.statistical.event.startswith("joint:"), report.format_text()
    assert report.epsilon_lower_bound > 1.3


def test_a_per_coordinate_auditor_misses_the_replace_one_histogram(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the joint scores (the auditor without them) the same bug passes: the test
    above would fail on an auditor that only has per-coordinate events."""
    from dpkit.testing import events

    original = events.candidate_scores

    def per_coordinate(*args: object, **kwargs: object) -> list[events.Candidate]:
        return [s for s in original(*args, **kwargs) if not s[1](0.0).startswith("joint:")]

    monkeypatch.setattr("dpkit.testing.blackbox.candidate_scores", per_coordinate)
    case = next(c for c in catalog.CASES if c.label == "replace_one_histogram_sensitivity_1")
    report = catalog.run_case(case, REGISTRY, seed=SEED, alpha=ALPHA)
    assert report.verdict == "pass"
    assert report.epsilon_lower_bound < 1.0


def test_the_duchi_leak_is_found_at_the_ends_of_the_interval() -> None:
    """The issue's case: (0, 1) alone carries too little of ε to expose a 1.5× leak; the
    declared pairs of Interval(−1, 1) include its two ends, where the loss is the full 1.5ε."""
    report = _report("duchi_leak_1.5x")
    assert sorted(report.statistical.pair or ()) == ["-1", "1"]
    assert report.exact.epsilon == pytest.approx(1.5, rel=1e-12)
    # At (0, 1) the loss is ln(2e^{1.5}/(e^{1.5} + 1)) = 0.49 < ε = 1: no auditor could flag
    # the leak there (computed from the closed form, not from the auditor).
    e = math.exp(1.5)
    assert math.log(2 * e / (e + 1)) < 0.5


def test_the_unnormalised_pmf_is_named_with_its_sum() -> None:
    report = _report("krr_pmf_sums_1.0000028")
    assert report.exact.total == pytest.approx(1.0000028, abs=1e-12)
    finding = report.findings()[0]
    assert "sums to 1.0000028, not 1" in finding and "1e-06" in finding
    assert "inf" not in finding
    assert report.to_dict()["exact"]["epsilon"] is None

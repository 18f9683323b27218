"""The statistical tier samples both randomness modes: a bug in one branch only is caught.

A mechanism's ``randomize`` takes different code for a numpy Generator (fast mode) and for a
SecureRandom (secure mode). Each test mechanism here is correct in one branch and wrong in the
other, or refuses a mode. False positives: audits that must pass run at α = 1e-7 (≤ 2e-7 per
audit, both modes together: each mode's certificate and fit test at α/2); the bugs are far
above their claims (true ε ≈ 2 against a claim of 1), so the verdicts are not close calls.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit.testing import DPViolation, audit, audit_query, check_mechanism, check_query

ALPHA = 1e-7
BUDGET = {"samples": 20_000, "alpha": ALPHA}
QUERY_BUDGET = {"samples": 3_000, "alpha": ALPHA}


@attrs.frozen
class SecureKeepBug(dpkit.plugin.Mechanism):
    """k-RR with k = 4 claiming ε = 1: keep the truth with p = e/(e + 3) = 0.4754 (Kairouz,
    Oh & Viswanath 2014). The fast branch does; the secure branch keeps it with 0.719, so its
    true ε = ln(0.719 / (0.281/3)) = 2.04."""

    name: ClassVar[str] = "secure_keep_bug"
    kind: ClassVar[Literal["local", "central"]] = "local"
    secure_keep: float = 0.719

    @property
    def keep(self) -> float:
        return math.e / (math.e + 3)

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(4)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        generator, _ = dpkit.plugin.resolve_rng(rng, owner=self.name)
        truth = np.asarray(values, dtype=np.int64)
        keep = self.secure_keep if isinstance(generator, dpkit.SecureRandom) else self.keep
        kept = generator.random(truth.shape) < keep
        other = generator.integers(0, 3, size=truth.shape)
        return np.where(kept, truth, other + (other >= truth))

    def log_probability(self, outputs: Any, inputs: Any, /) -> np.ndarray:
        same = np.asarray(outputs) == np.asarray(inputs)
        return np.where(same, math.log(self.keep), math.log((1 - self.keep) / 3))

    def output_space(self) -> np.ndarray:
        return np.arange(4)


def test_a_bug_in_the_secure_branch_only_fails_check_mechanism() -> None:
    with pytest.raises(DPViolation, match=r"statistical tier \(secure mode\)") as caught:
        check_mechanism(SecureKeepBug(), **BUDGET)
    (report,) = caught.value.reports
    assert report.verdicts == {"fast": "pass", "secure": "violation"}, report.format_text()
    assert report.mode("secure").violation and report.mode("secure").epsilon_lower_bound > 1.5
    assert report.statistical.mode == "secure"  # the headline is the mode that leaks
    assert not report.exact.violation  # the declared pmf is right: only sampling sees it
    # The auditor that sampled fast mode only (before both modes) passes the same mechanism.
    (fast_only,) = check_mechanism(SecureKeepBug(), modes=("fast",), **BUDGET)
    assert fast_only.verdict == "pass" and fast_only.verdicts == {"fast": "pass"}


def test_a_correct_secure_branch_passes_and_each_mode_has_half_of_alpha() -> None:
    report = audit(SecureKeepBug(secure_keep=math.e / (math.e + 3)), seed=3, **BUDGET)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}, report.format_text()
    for mode in ("fast", "secure"):
        result = report.mode(mode)
        assert result.confidence == pytest.approx(1 - ALPHA / 2)
        assert result.fit.checked and result.fit.alpha == pytest.approx(ALPHA / 2)
        assert 0.7 < result.epsilon_lower_bound <= 1.0 + 1e-9
        assert result.samples_per_input == 20_000
    assert report.confidence == pytest.approx(1 - ALPHA)
    assert report.epsilon_lower_bound == max(r.epsilon_lower_bound for r in report.modes)
    assert report.samples == report.mode("fast").samples + report.mode("secure").samples
    one = audit(SecureKeepBug(), seed=3, modes=("fast",), **BUDGET)
    assert one.mode("fast").confidence == pytest.approx(1 - ALPHA)  # one mode: all of α


def test_secure_mode_is_sampled_from_a_key_derived_from_the_seed() -> None:
    """The same seed reproduces an audit (secure mode included); another seed draws anew."""
    mechanism = dpkit.mechanism("krr", epsilon=1.0, k=4)
    first, again, other = (
        audit(mechanism, samples=5_000, seed=seed, exact=False, modes=("secure",))
        for seed in (7, 7, 8)
    )
    assert first.mode("secure").hits == again.mode("secure").hits
    assert first.mode("secure").hits != other.mode("secure").hits


@attrs.frozen
class DefaultKeepBug(SecureKeepBug):
    """Right in fast mode and with a SecureRandom passed; keeps the truth with 0.719 (true
    ε = 2.04) only for ``rng=None``, the default spelling of secure mode and the one a release
    takes unless told otherwise."""

    name: ClassVar[str] = "default_keep_bug"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        if rng is not None:
            return SecureKeepBug(secure_keep=self.keep).randomize(values, rng=rng)
        return super().randomize(values, rng=rng)


def test_a_bug_in_the_default_spelling_of_secure_mode_only_is_caught() -> None:
    """Secure mode samples ``rng=None`` too (the audit's keyed generator standing in for the
    process-wide one), reproducibly; the auditor that passed only the keyed SecureRandom passed
    this mechanism. A correct mechanism still passes (the two spellings share its law)."""
    first, again = (audit(DefaultKeepBug(), seed=5, exact=False, **BUDGET) for _ in range(2))
    assert first.verdicts == {"fast": "pass", "secure": "violation"}, first.format_text()
    assert first.mode("secure").epsilon_lower_bound > 1.2
    assert first.mode("secure").hits == again.mode("secure").hits
    fine = audit(SecureKeepBug(secure_keep=math.e / (math.e + 3)), seed=5, exact=False, **BUDGET)
    assert fine.verdicts == {"fast": "pass", "secure": "pass"}, fine.format_text()
    assert dpkit.randomness.modes.default_secure_random().keyed is False  # restored after


@attrs.frozen
class FastOnly(SecureKeepBug):
    """Correct in fast mode; refuses secure mode with a typed error, as a mechanism without a
    secure sampler should."""

    name: ClassVar[str] = "fast_only"

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        if not isinstance(rng, np.random.Generator):
            raise dpkit.InvalidParameter(
                "rng", rng, "a numpy Generator (no secure sampler)", owner=self.name
            )
        return super().randomize(values, rng=rng)


@attrs.frozen
class FloatNoise(dpkit.plugin.Mechanism):
    """Laplace noise from numpy's float sampler: SecureRandom has none, so secure mode raises
    dpkit's UnsupportedRandomness."""

    name: ClassVar[str] = "float_noise"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: Any) -> np.ndarray:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.laplace(0.0, 1.0, size=x.shape)


@pytest.mark.parametrize(
    ("mechanism", "error"),
    [(FastOnly(), "InvalidParameter"), (FloatNoise(), "UnsupportedRandomness")],
)
def test_a_refused_mode_is_reported_not_a_crash(mechanism: Any, error: str) -> None:
    (report,) = check_mechanism(mechanism, **BUDGET)
    assert report.verdict == "pass" and report.verdicts == {"fast": "pass", "secure": "refused"}
    secure = report.mode("secure")
    assert secure.refused and not secure.checked and error in secure.reason
    assert f"REFUSED: randomize raised {error}" in report.format_text()
    record = report.to_dict()
    assert record["verdicts"] == {"fast": "pass", "secure": "refused"}
    assert record["modes"]["secure"]["refused"] is True
    # Audited in secure mode alone, a mechanism without a declared distribution checks nothing.
    if not mechanism.has_exact_distribution:
        with pytest.raises(AssertionError, match=r"could not be audited.*refused"):
            check_mechanism(mechanism, modes=("secure",), **BUDGET)


@attrs.frozen
class SecureFussy(SecureKeepBug):
    """Secure mode raises a typed error on input 1 only: the exception depends on the input."""

    name: ClassVar[str] = "secure_fussy"
    secure_keep: float = math.e / (math.e + 3)

    def randomize(self, values: Any, /, *, rng: Any = None) -> np.ndarray:
        if isinstance(rng, dpkit.SecureRandom) and (np.asarray(values) == 1).any():
            raise dpkit.InvalidData("no ones in secure mode", field="values")
        return super().randomize(values, rng=rng)


def test_a_mode_that_raises_on_some_inputs_only_is_a_violation() -> None:
    report = audit(SecureFussy(), seed=1, **BUDGET)
    assert report.verdicts == {"fast": "pass", "secure": "violation"}, report.format_text()
    (finding,) = [f for f in report.findings() if "privacy boundary" in f]
    assert "randomize raised InvalidData on input 1" in finding and "(secure mode)" in finding
    assert report.mode("secure").checked  # the pairs without input 1 were still audited


@pytest.mark.parametrize("modes", [(), ("fast", "fast"), ("slow",), ("fast", 2), 3])
def test_modes_are_checked_before_anything_runs(modes: Any) -> None:
    for run in (audit, check_mechanism):
        with pytest.raises(dpkit.InvalidParameter, match="modes"):
            run(SecureKeepBug(), modes=modes)
    with pytest.raises(dpkit.InvalidParameter, match="modes"):
        audit_query(dpkit.get_registry().query("count", epsilon=1.0), modes=modes)


@attrs.frozen
class SecureHalfNoiseCount:
    """A count with Laplace noise of scale 1/ε in fast mode and 1/(2ε) — twice ε — in secure
    mode (there on dpkit's exact discrete Laplace, in steps of 1/1024)."""

    name: ClassVar[str] = "secure_half_noise_count"
    epsilon: float = dpkit.plugin.parameter(
        dpkit.plugin.Real(low=0, low_open=True), doc="ε", default=1.0
    )

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=self.epsilon)

    def run(self, data: Any, /, *, rng: Any = None) -> float:
        generator, _ = dpkit.plugin.resolve_rng(rng, owner=self.name)
        count = float(len(np.asarray(data)))
        if isinstance(generator, dpkit.SecureRandom):
            steps = dpkit.plugin.discrete_laplace(512 / self.epsilon, rng=generator)
            return count + float(steps) / 1024
        return count + float(generator.laplace(0.0, 1.0 / self.epsilon))


def test_a_query_is_audited_in_both_modes() -> None:
    with pytest.raises(DPViolation, match=r"secure mode") as caught:
        check_query(SecureHalfNoiseCount(), seed=2, **QUERY_BUDGET)
    (report,) = caught.value.reports
    assert report.verdicts == {"fast": "pass", "secure": "violation"}, report.format_text()
    assert report.mode("secure").epsilon_lower_bound > 1.0
    (fast_only,) = check_query(SecureHalfNoiseCount(), seed=2, modes=("fast",), **QUERY_BUDGET)
    assert fast_only.verdict == "pass"

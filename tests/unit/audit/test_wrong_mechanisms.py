"""Deliberately wrong mechanisms: the auditor must flag every one (and pass their correct twins).

Each wrong mechanism reproduces a bug from the auditing note (§3): Laplace with half the noise
scale, SUE with ε not halved, the exponential mechanism without its factor 2 on a non-monotone
utility, report-noisy-max releasing the noisy value, a sampler that disagrees with its declared
pmf, a k-RR whose probabilities do not sum to 1, and a Gaussian calibrated with the classic
formula at large ε.

False positives: the correct twins are audited at alpha = 2.5e-7 (each audit alarms falsely
with probability ≤ 2·alpha = 5e-7 ≤ 1e-6). The exact tier is deterministic. Power: every bug is
flagged with ≤ 2·10⁵ samples per input (the acceptance allows 10⁶); the true ε of each buggy
mechanism is stated next to it, and is far above the claim, so a miss would be a real defect.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

from dpkit import ApproximateDP, PureDP
from dpkit.plugin import CategoricalDomain, Mechanism, VectorDomain
from dpkit.privacy import gaussian_delta
from dpkit.testing import audit, check_mechanism, exact_check

ALPHA = 2.5e-7
SAMPLES = 200_000


def _laplace_log_pdf(y: Any, x: Any, scale: float) -> Any:
    return -np.abs(np.asarray(y, float) - np.asarray(x, float)) / scale - math.log(2 * scale)


@attrs.frozen
class LaplaceMech(Mechanism):
    """Laplace with scale ``factor``·Δ/ε; factor 1 is correct, 1/2 is the bug (true ε = 2ε)."""

    name: ClassVar[str] = "test_laplace"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = 1.0
    factor: float = 1.0

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(1.0, norm=1.0)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, float)
        return x + rng.laplace(0.0, self.factor / self.epsilon, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        return _laplace_log_pdf(outputs, inputs, self.factor / self.epsilon)


@attrs.frozen
class UnaryEncoding(Mechanism):
    """SUE over k categories, bits as a bool (n, k) array; ``halve=False`` is the bug.

    Correct SUE keeps each bit with p = e^{ε/2}/(1 + e^{ε/2}) (Wang et al. 2017, §4.2.1); the
    bug uses e^ε/(1 + e^ε), so two bits change by e^ε each: true ε = 2ε. No declared pmf: only
    the statistical tier (bit-pattern events) can see it.
    """

    name: ClassVar[str] = "test_sue"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = 1.0
    k: int = 8
    halve: bool = True

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values)
        onehot = np.arange(self.k) == x[:, None]
        e = self.epsilon / 2 if self.halve else self.epsilon
        keep = 1.0 / (1.0 + math.exp(-e))
        return np.where(rng.random(onehot.shape) < keep, onehot, ~onehot)


@attrs.frozen
class Exponential(Mechanism):
    """Exponential mechanism over a utility vector; ``factor=2`` is correct, 1 the bug.

    Pr[r] ∝ exp(ε u(r) / (factor·Δ)) (McSherry & Talwar 2007; Dwork & Roth 2014, Def. 3.4).
    Without the 2, the x-shape pair (one utility up, the other seven down) gives
    ln(e·(1 + 7e)/(e + 7)) ≈ 1.72 at ε = 1.
    """

    name: ClassVar[str] = "test_exponential"
    kind: ClassVar[Literal["local", "central"]] = "central"
    epsilon: float = 1.0
    factor: float = 2.0

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(1.0, norm=math.inf)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def _logits(self, utilities: Any) -> Any:
        return self.epsilon * np.asarray(utilities, float) / self.factor

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        logits = self._logits(values)
        if logits.ndim != 2:
            raise ValueError("a (n, m) batch of utility vectors")
        return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        logits = self._logits(inputs)
        peak = logits.max(axis=-1, keepdims=True)
        log_norm = np.log(np.exp(logits - peak).sum(axis=-1)) + peak[..., 0]
        index = np.asarray(outputs)
        return (
            np.take_along_axis(
                np.broadcast_to(logits, index.shape + logits.shape[-1:]), index[..., None], -1
            )[..., 0]
            - log_norm
        )


@attrs.frozen
class NoisyMaxValue(Mechanism):
    """Report-noisy-max with Lap(2Δ/ε) noise that releases the noisy *value*: the bug.

    On the all-shift pair the lower tail of the maximum of m Laplace draws has density ratio
    e^{mΔ/b}: true ε = mε/2 = 4ε for m = 8 (Ding et al. 2018; auditing note §3).
    """

    name: ClassVar[str] = "test_noisy_max_value"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = 1.0

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(1.0, norm=math.inf)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        u = np.asarray(values, float)
        if u.ndim != 2:
            raise ValueError("a (n, m) batch of score vectors")
        return np.max(u + rng.laplace(0.0, 2.0 / self.epsilon, size=u.shape), axis=-1)


@attrs.frozen
class KaryRR(Mechanism):
    """k-RR with separately settable sampler and declared probabilities.

    ``lie_scale`` multiplies the sampler's lie probability (1 is correct); ``bad_norm`` declares
    q = 1/(e^ε + k) instead of 1/(e^ε + k − 1), whose pmf sums to less than 1 (a seed's bug).
    """

    name: ClassVar[str] = "test_krr"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = 1.0
    k: int = 4
    lie_scale: float = 1.0
    bad_norm: bool = False

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def _probabilities(self) -> tuple[float, float]:
        e = math.exp(self.epsilon)
        q = 1.0 / (e + self.k) if self.bad_norm else 1.0 / (e + self.k - 1)
        return e / (e + self.k - 1), q

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, dtype=np.int64)
        _, q = self._probabilities()
        lie = rng.random(x.shape) < min(1.0, (self.k - 1) * q * self.lie_scale)
        other = rng.integers(0, self.k - 1, size=x.shape)
        other += other >= x
        return np.where(lie, other, x)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        p, q = self._probabilities()
        return np.where(np.asarray(outputs) == np.asarray(inputs), math.log(p), math.log(q))

    def output_space(self) -> Any:
        return np.arange(self.k)


@attrs.frozen
class Gaussian(Mechanism):
    """Gaussian claiming (ε, δ) with the classic σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1).

    At ε = 10, δ = 1e-5 the exact δ(ε) of that σ is 2.27e-5 > δ (Balle & Wang 2018, Thm 8): a
    violation only the exact tier can see. ``sigma`` overrides the calibration.
    """

    name: ClassVar[str] = "test_gaussian"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = 10.0
    delta: float = 1e-5
    sigma: float | None = None

    @property
    def scale(self) -> float:
        if self.sigma is not None:
            return self.sigma
        return math.sqrt(2 * math.log(1.25 / self.delta)) / self.epsilon

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(1.0, norm=2.0)

    @property
    def privacy(self) -> ApproximateDP:
        return ApproximateDP(epsilon=self.epsilon, delta=self.delta)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, float)
        return x + rng.normal(0.0, self.scale, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        z = (np.asarray(outputs, float) - np.asarray(inputs, float)) / self.scale
        return -0.5 * z * z - math.log(self.scale * math.sqrt(2 * math.pi))


WRONG = {
    "laplace_half_scale": LaplaceMech(epsilon=1.0, factor=0.5),
    "sue_eps_not_halved": UnaryEncoding(epsilon=1.0, halve=False),
    "exponential_no_factor_2": Exponential(epsilon=1.0, factor=1.0),
    "noisy_max_releases_value": NoisyMaxValue(epsilon=1.0),
    "krr_sampler_lies_too_little": KaryRR(epsilon=1.0, lie_scale=0.7),
    "krr_pmf_not_normalised": KaryRR(epsilon=1.0, bad_norm=True),
}

CORRECT = {
    "laplace": LaplaceMech(epsilon=1.0),
    "sue": UnaryEncoding(epsilon=1.0),
    "exponential": Exponential(epsilon=1.0),
    "krr": KaryRR(epsilon=1.0),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_mechanism_is_flagged(name: str) -> None:
    report = audit(WRONG[name], samples=SAMPLES, alpha=ALPHA, seed=11)
    assert report.verdict == "violation", report.format_text()


@pytest.mark.parametrize(
    "name",
    [
        "laplace_half_scale",
        "sue_eps_not_halved",
        "exponential_no_factor_2",
        "noisy_max_releases_value",
        "krr_sampler_lies_too_little",
    ],
)
def test_statistical_tier_alone_certifies_the_violation(name: str) -> None:
    """The sampler alone proves these bugs: ε_lb > ε from randomize, without any declared pmf."""
    report = audit(WRONG[name], samples=SAMPLES, alpha=ALPHA, seed=12, exact=False)
    assert report.statistical.violation, report.format_text()
    assert report.epsilon_lower_bound > 1.05


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_twin_passes(name: str) -> None:
    report = audit(CORRECT[name], samples=SAMPLES, alpha=ALPHA, seed=13)
    assert report.verdict == "pass", report.format_text()


def test_exact_tier_finds_the_true_epsilon_of_the_bugs() -> None:
    """Independent closed forms: 2ε for half-scale Laplace, ln(e(1+7e)/(e+7)) for the x-shape."""
    assert exact_check(WRONG["laplace_half_scale"]).epsilon == pytest.approx(2.0, rel=1e-9)
    e = math.e
    assert exact_check(WRONG["exponential_no_factor_2"]).epsilon == pytest.approx(
        math.log(e * (1 + 7 * e) / (e + 7)), rel=1e-9
    )
    assert exact_check(CORRECT["exponential"]).violation is False


def test_sampler_disagreeing_with_its_pmf_fails_goodness_of_fit() -> None:
    """A more-private-than-declared sampler breaks no ε, but contradicts its declared pmf."""
    report = audit(KaryRR(epsilon=1.0, lie_scale=1.2), samples=SAMPLES, alpha=ALPHA, seed=14)
    assert not report.exact.violation and not report.statistical.violation
    assert report.statistical.fit.mismatch, report.format_text()
    assert report.verdict == "violation"


def test_classic_gaussian_at_large_epsilon_is_caught_exactly() -> None:
    """δ(ε) from the declared density matches Balle & Wang's closed form and exceeds δ."""
    wrong = Gaussian()
    result = exact_check(wrong)
    expected = gaussian_delta(10.0, wrong.scale)
    assert expected > 1e-5
    assert result.delta == pytest.approx(expected, rel=1e-4)
    assert result.violation
    right = Gaussian(epsilon=2.0, delta=1e-5)  # classic σ is valid here: δ(2) = 1.3e-7
    assert exact_check(right).delta == pytest.approx(gaussian_delta(2.0, right.scale), rel=1e-4)
    assert not exact_check(right).violation


def test_check_mechanism_raises_with_every_finding() -> None:
    with pytest.raises(AssertionError, match="statistical tier"):
        check_mechanism(LaplaceMech(epsilon=1.0, factor=0.5), samples=50_000)
    assert check_mechanism(LaplaceMech(epsilon=1.0), samples=20_000)[0].verdict == "pass"

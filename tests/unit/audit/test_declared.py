"""Declared neighbours, explicit pairs and the "unchecked" verdict.

Audits that must pass run at α = 5e-7 (false alarm ≤ 1e-6 per test: the ε certificate and the
fit test at α each); the leaks tested for are far above their claims (stated per test). The
rest is deterministic.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit.testing import audit, blackbox, check_mechanism, exact_check
from dpkit.testing.inputs import check_pairs, plan_inputs, with_pairs

ALPHA = 5e-7


class Thermometer(dpkit.plugin.Domain):
    """A third party's domain: readings 0..40 in steps of 0.5; any two readings neighbour."""

    relation = "replace one reading by any other"

    def pairs(self) -> list[tuple[Any, Any]]:
        return [(0.0, 40.0), (40.0, 0.0)]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        values = rng.integers(0, 81, size=(n, 2)) / 2
        return [(float(a), float(b)) for a, b in values]

    def are_neighbours(self, x: Any, y: Any) -> bool:
        return all(isinstance(v, float) and 0 <= v <= 40 and (2 * v).is_integer() for v in (x, y))


@attrs.frozen
class NoisyReading(dpkit.plugin.Mechanism):
    """A reading plus Laplace noise of scale ``scale`` (40/ε is ε-LDP on Thermometer)."""

    name: ClassVar[str] = "noisy_reading"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    scale: float = 40.0

    @property
    def domain(self) -> Thermometer:
        return Thermometer()

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.laplace(0.0, self.scale, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        gap = np.abs(np.asarray(outputs, float) - np.asarray(inputs, float))
        return -gap / self.scale - math.log(2 * self.scale)


def test_a_third_party_domain_that_declares_neighbours_is_audited() -> None:
    report = audit(NoisyReading(), samples=50_000, alpha=ALPHA, seed=1)
    assert report.verdict == "pass", report.format_text()
    assert report.exact.checked and report.exact.epsilon == pytest.approx(1.0, rel=1e-9)
    assert "2 declared by Thermometer" in report.statistical.pair_sources
    assert report.relation == "replace one reading by any other"
    # Half the noise: true ε = 2 at the declared ends (0, 40).
    leaky = audit(NoisyReading(scale=20.0), samples=50_000, alpha=ALPHA, seed=2)
    assert leaky.exact.violation and leaky.statistical.violation, leaky.format_text()


@attrs.frozen
class Undeclared(NoisyReading):
    @property
    def domain(self) -> dpkit.plugin.Domain:
        return dpkit.plugin.Domain()


def test_a_domain_without_neighbours_is_unchecked_not_passed() -> None:
    report = audit(Undeclared(), samples=1_000, seed=0)
    assert report.verdict == "unchecked"
    assert "does not declare its neighbours" in report.reason
    assert "pairs()" in report.reason
    record = report.to_dict()
    assert record["verdict"] == "unchecked" and record["checked"] is False
    assert record["reason"] == report.reason
    assert "UNCHECKED" in report.format_text()
    with pytest.raises(AssertionError, match="could not be audited"):
        check_mechanism(Undeclared(), samples=1_000)


def test_explicit_pairs_are_checked_against_the_domain() -> None:
    mechanism = NoisyReading()
    plan = plan_inputs(mechanism, rng=np.random.default_rng(0))
    pairs, note = check_pairs(mechanism.domain, plan, [[0.0, 0.5], (10.0, 20.0)])
    assert pairs == [(0.0, 0.5), (10.0, 20.0)] and "are_neighbours" in note
    for bad in ([0.0, 41.0], [0.25, 1.0], [1.0], "01", [[0.0], [1.0]]):
        with pytest.raises(dpkit.InvalidParameter) as info:
            check_pairs(mechanism.domain, plan, [bad], field="--pair")
        assert info.value.parameter == "--pair"


def test_explicit_pairs_of_the_builtin_domains() -> None:
    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=2.0)
    plan, pairs, _ = with_pairs(laplace, [[0, 2], [1.5, -0.5]], rng=np.random.default_rng(0))
    assert pairs == [(0.0, 2.0), (1.5, -0.5)] and plan.mode == "scalar"
    with pytest.raises(dpkit.InvalidParameter):
        with_pairs(laplace, [[0, 2.5]], rng=np.random.default_rng(0))  # beyond Δ = 2
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    with pytest.raises(dpkit.InvalidParameter):
        with_pairs(krr, [[0, 4]], rng=np.random.default_rng(0))  # no category 4
    with pytest.raises(dpkit.InvalidParameter):
        with_pairs(krr, [[1, 1.5]], rng=np.random.default_rng(0))


def test_explicit_vector_pairs_set_the_number_of_candidates() -> None:
    """report-noisy-max audited on three candidates: the derived pairs follow the given ones."""
    rnm = dpkit.mechanism("report_noisy_max", epsilon=1.0)
    given = [[[0, 0, 0], [1, 0, 0]]]
    plan, pairs, _ = with_pairs(rnm, given, rng=np.random.default_rng(0))
    assert plan.dimension == 3 and np.shape(pairs[0][0]) == (3,)
    report = audit(rnm, pairs=given, samples=20_000, alpha=ALPHA, seed=3)
    assert report.verdict == "pass", report.format_text()
    with pytest.raises(dpkit.InvalidParameter):
        audit(rnm, pairs=[[[0, 0], [1, 0]], [[0, 0, 0], [1, 0, 0]]])  # two lengths


def test_an_explicit_pair_reaches_a_leak_the_declared_pairs_miss() -> None:
    """A mechanism that leaks only around 20: its declared ends never show it."""

    @attrs.frozen
    class LeakyNearTwenty(NoisyReading):
        def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
            x = np.asarray(values, dtype=np.float64)
            near = np.abs(x - 20.0) <= 1.0  # the true value, with no noise at all
            return np.where(near, x, x + rng.laplace(0.0, self.scale, size=x.shape))

    without = audit(LeakyNearTwenty(), samples=20_000, alpha=ALPHA, seed=4, random_pairs=0)
    assert without.verdict == "pass"
    found = audit(
        LeakyNearTwenty(), pairs=[(20.0, 21.5)], samples=20_000, alpha=ALPHA, seed=4, exact=False
    )
    assert found.statistical.violation, found.format_text()
    assert "1 explicit" in found.statistical.pair_sources


def test_interval_and_box_check_their_pairs() -> None:
    interval = dpkit.plugin.Interval(-1, 1)
    assert interval.are_neighbours(-1, 1) and not interval.are_neighbours(-1, 1.5)
    assert not interval.are_neighbours(True, 0) and not interval.are_neighbours([0.0], 0)
    box = dpkit.plugin.Box.cube(0, 1, 3)
    assert box.are_neighbours([0, 0, 0], [1, 1, 1])
    assert not box.are_neighbours([0, 0], [1, 1]) and not box.are_neighbours([0, 0, 2], [0] * 3)
    corners = [(tuple(a), tuple(b)) for a, b in box.pairs()]
    assert ((0.0, 1.0, 0.0), (1.0, 0.0, 1.0)) in corners  # the alternating corners
    vector = dpkit.plugin.VectorDomain(1.0, norm=math.inf, monotone=True)
    assert vector.are_neighbours([0, 0], [1, 1]) and not vector.are_neighbours([0, 0], [1, -1])
    assert not dpkit.plugin.VectorDomain(1.0, integer=True).are_neighbours(0, 0.5)
    assert not dpkit.plugin.CategoricalDomain(3).are_neighbours(2, 2)


def test_the_exact_tier_checks_explicit_pairs_too() -> None:
    result = exact_check(NoisyReading(scale=40.0), pairs=[(0.0, 40.0), (10.0, 30.0)])
    assert result.pairs_checked == 4  # the 2 declared + 2 explicit
    assert json.dumps(result.to_dict())


def test_row_keys_tell_apart_rows_that_differ_only_in_signs() -> None:
    """A linear hash of the bit patterns collapses sign flips (2⁶³·odd ≡ 2⁶³ mod 2⁶⁴): the
    χ² fit then saw duchi_multi's 16 vertices as 2 and accused a correct sampler."""
    from itertools import product

    from dpkit.testing.events import row_keys

    vertices = np.array(list(product([-8.98, 8.98], repeat=4)))
    assert len(np.unique(row_keys(vertices))) == 16
    assert row_keys(np.array([[0.0, 1.0]]))[0] == row_keys(np.array([[-0.0, 1.0]]))[0]
    integers = np.array(list(product([-3, 3], repeat=5)))
    assert len(np.unique(row_keys(integers))) == 32


def test_the_declared_score_reads_each_output_and_asks_once_per_distinct_one() -> None:
    """The declared log-likelihood ratio of a batch of integer outputs is, output by output,
    ln p(o|x) − ln p(o|x') rounded to 1e-9, and ``log_probability`` is asked about each
    distinct output once (a batch of draws of a selection mechanism repeats a few)."""
    mechanism = dpkit.mechanism("permute_and_flip", epsilon=1.0, sensitivity=1.0)
    plan = plan_inputs(mechanism, rng=np.random.default_rng(0))
    x = np.array([0.0, 3.0, 1.0, 2.0])
    y = np.array([1.0, 2.0, 1.0, 2.0])
    outputs = np.random.default_rng(1).integers(0, 4, size=500)
    asked: list[int] = []

    class Counting(type(mechanism)):  # type: ignore[misc]
        def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
            asked.append(len(outputs))
            return super().log_probability(outputs, inputs)

    counting = Counting(epsilon=1.0, sensitivity=1.0)
    score, _ = blackbox.mechanism_subject(counting, plan).declared((x, y))  # type: ignore[misc]
    found = score(outputs)
    expected = [
        round(
            float(mechanism.log_probability(np.array([o]), x[None])[0])
            - float(mechanism.log_probability(np.array([o]), y[None])[0]),
            9,
        )
        for o in outputs
    ]
    np.testing.assert_allclose(found, expected, rtol=0, atol=2e-9)
    assert asked == [4, 4]

"""The auditor on graph protocols: edge-neighbouring graphs, both tiers.

Each protocol's graph view (:class:`~dpkit_ldp._adjacency.RelationshipView`, the two-round
protocol's view) is audited on graphs that differ in one edge, and the seed's bug — both
endpoints perturb the edge independently while ε is charged once — is caught by both tiers.
Statistical audits run at α = 1e-7 per bound (false alarm ≤ 2e-7 per audit, fixed seeds).
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest
from dpkit_ldp._adjacency import RelationshipView
from dpkit_ldp.graph_degree import CountsView, LocalKStars
from dpkit_ldp.graph_triangles import TwoRoundTriangles

import dpkit
from dpkit.testing import CHECK_ALPHA, audit, exact_check


@attrs.frozen
class ChargedOnce(RelationshipView):
    """The seed's graph randomizer: every ordered pair (i, j) and (j, i) perturbed on its own
    (the "both" form) while the edge is charged ε, as if reported once."""

    name: ClassVar[str] = "charged_once"

    @property
    def privacy(self) -> dpkit.plugin.PrivacyEvent:
        return dpkit.plugin.RandomizedResponseDP(epsilon=self.mechanism.epsilon, k=2)


@pytest.mark.parametrize("name", ["graph_rr", "graph_arr"])
@pytest.mark.parametrize("pairs", ["once", "both"])
def test_graph_views_pass_both_tiers(name: str, pairs: str) -> None:
    params = {"mu": 0.4} if name == "graph_arr" else {}
    mechanism = dpkit.mechanism(name, epsilon=1.0, nodes=3, pairs=pairs, **params)
    view = mechanism.on_graphs()
    exact = exact_check(view)
    assert exact.checked and not exact.violation, exact
    expected = 1.0 if pairs == "once" else 2.0
    assert view.privacy.epsilon == pytest.approx(expected)
    assert exact.epsilon == pytest.approx(expected, abs=1e-9)  # tight: the claim is the loss
    report = audit(view, samples=50_000, alpha=CHECK_ALPHA, seed=1, exact=False)
    assert report.verdict == "pass", report.format_text()


def test_both_endpoints_charged_once_is_caught() -> None:
    mechanism = dpkit.mechanism("graph_rr", epsilon=1.0, nodes=3, pairs="both")
    bad = ChargedOnce(mechanism)
    exact = exact_check(bad)
    assert exact.violation and exact.epsilon == pytest.approx(2.0, abs=1e-9), exact
    report = audit(bad, samples=50_000, alpha=CHECK_ALPHA, seed=2, exact=False)
    assert report.verdict == "violation", report.format_text()
    assert report.statistical.epsilon_lower_bound > 1.0


def test_two_round_protocol_passes_on_edge_neighbouring_graphs() -> None:
    protocol = TwoRoundTriangles(epsilon1=0.5, epsilon2=0.5, nodes=4, max_degree=3)
    view = protocol.on_graphs()
    assert view.privacy.epsilon == pytest.approx(1.0)
    report = audit(view, samples=10_000, alpha=CHECK_ALPHA, seed=3, exact=False, random_pairs=0)
    assert report.verdict == "pass", report.format_text()


@attrs.frozen
class TooLittleNoise(TwoRoundTriangles):
    """Round 2 with a noise scale 20 times too small (a sensitivity of (D − 1)/20)."""

    @property
    def scale(self):  # type: ignore[no-untyped-def]
        return super().scale / 20


def test_two_round_with_too_little_noise_is_caught() -> None:
    protocol = TooLittleNoise(epsilon1=0.5, epsilon2=0.5, nodes=4, max_degree=3)
    report = audit(
        protocol.on_graphs(), samples=10_000, alpha=CHECK_ALPHA, seed=4, exact=False, random_pairs=0
    )
    assert report.verdict == "violation", report.format_text()


def test_per_node_mechanisms_pass_the_registry_audit_shape() -> None:
    """The registered per-node mechanisms are audited on neighbour lists like any mechanism;
    here at one parameter point each, both tiers where they apply."""
    for mechanism in (
        dpkit.mechanism("graph_rr", epsilon=2.0, nodes=5),
        dpkit.mechanism("graph_arr", epsilon=2.0, nodes=5, mu=0.1),
        dpkit.mechanism("graph_degree", epsilon=1.0, nodes=5),
        dpkit.mechanism("graph_kstar", epsilon=1.0, nodes=5, max_degree=3),
    ):
        report = audit(mechanism, samples=20_000, alpha=CHECK_ALPHA, seed=5)
        assert report.verdict == "pass", report.format_text()
        assert np.isfinite(report.statistical.epsilon_lower_bound)


@attrs.frozen
class CountsChargedOnce(CountsView):
    """Noisy degrees of every node charged ε per edge, though an edge moves two degrees."""

    name: ClassVar[str] = "counts_charged_once"

    @property
    def privacy(self) -> dpkit.plugin.PrivacyEvent:
        return dpkit.PureDP(epsilon=self.mechanism.epsilon)


def test_count_views_pass_at_two_epsilon_and_once_is_caught() -> None:
    degree = dpkit.mechanism("graph_degree", epsilon=1.0, nodes=4)
    view = degree.on_graphs()
    assert view.privacy.epsilon == pytest.approx(2.0)
    report = audit(view, samples=20_000, alpha=CHECK_ALPHA, seed=6, exact=False, random_pairs=0)
    assert report.verdict == "pass", report.format_text()
    kstar = dpkit.mechanism("graph_kstar", epsilon=1.0, nodes=4, max_degree=3)
    report = audit(
        kstar.on_graphs(), samples=20_000, alpha=CHECK_ALPHA, seed=7, exact=False, random_pairs=0
    )
    assert report.verdict == "pass", report.format_text()
    bad = CountsChargedOnce(degree)
    report = audit(bad, samples=20_000, alpha=CHECK_ALPHA, seed=8, exact=False, random_pairs=0)
    assert report.verdict == "violation", report.format_text()


@attrs.frozen
class KStarsTooLittleNoise(LocalKStars):
    """LocalKStars calibrated to one less than its sensitivity C(D − 1, k − 1)."""

    name: ClassVar[str] = "kstars_too_little_noise"

    @property
    def sensitivity(self) -> int:
        return super().sensitivity - 1


def test_count_mechanisms_pass_the_exact_tier_tightly() -> None:
    """The noisy counts declare an output window that the exact tier enumerates; their loss is
    exactly the claim (the scales Δ/ε here need no rounding), per user (ε) and per edge on
    graphs (2ε)."""
    for mechanism, claim in (
        (dpkit.mechanism("graph_degree", epsilon=0.8, nodes=6), 0.8),
        (dpkit.mechanism("graph_kstar", epsilon=1.0, nodes=8, max_degree=3), 1.0),
        (dpkit.mechanism("graph_degree", epsilon=1.0, nodes=3).on_graphs(), 2.0),
        (dpkit.mechanism("graph_kstar", epsilon=2.0, nodes=3, max_degree=2).on_graphs(), 4.0),
    ):
        exact = exact_check(mechanism)
        assert exact.checked and not exact.violation, exact
        assert exact.epsilon == pytest.approx(claim, abs=1e-9), exact


def test_leaky_count_mechanisms_are_caught_by_the_exact_tier() -> None:
    """Too little noise for the k-star count (its worst degree step, 2 → 3 at D = 3, is none
    of the generic neighbour-list pairs on 8 nodes), and degrees charged once per edge."""
    leaky = KStarsTooLittleNoise(epsilon=1.0, nodes=8, max_degree=3)
    exact = exact_check(leaky)
    assert exact.checked and exact.violation, exact
    assert exact.epsilon == pytest.approx(2.0, abs=1e-9)
    once = CountsChargedOnce(dpkit.mechanism("graph_degree", epsilon=1.0, nodes=3))
    exact = exact_check(once)
    assert exact.checked and exact.violation, exact
    assert exact.epsilon == pytest.approx(2.0, abs=1e-9)


def test_a_session_charges_the_edge_not_the_node() -> None:
    """The seed's form costs 2ε per edge in a session; the lower-triangle form ε; a matrix with
    bad entries is coerced in the private phase, never refused after the spend."""
    session = dpkit.Session(budget=(3.0, 0.0), ledger=":memory:")
    bad = np.array([[0, np.nan, 1], [1, 0, 7], [1, 0, 0]])
    once = dpkit.mechanism("graph_rr", epsilon=1.0, nodes=3).on_graphs()
    assert session.release(once, bad).cost.epsilon == 1
    both = dpkit.mechanism("graph_rr", epsilon=1.0, nodes=3, pairs="both").on_graphs()
    assert session.release(both, bad).cost.epsilon == 2
    with pytest.raises(dpkit.BudgetExceeded):
        session.release(both, bad)
    with pytest.raises(dpkit.InvalidData):  # structure: refused before the spend
        session.release(once, np.zeros((4, 4)))
    assert session.remaining.epsilon == 0

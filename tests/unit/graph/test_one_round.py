"""The one-round release of noisy adjacency and noisy degrees: 2-stars exactly unbiased over
the discrete Laplace law, triangles / 2-stars / clustering against simulation, privacy,
refusals.

The exact test sums the noise law over a window holding all but 1e-30 of its mass (no false
positives beyond floating-point tolerances); the simulation test states its rate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpkit_ldp import _graph_noise
from dpkit_ldp.graph_datasets import barabasi_albert, erdos_renyi, graph_counts, powerlaw_cluster
from dpkit_ldp.graph_one_round import OneRoundGraph, OneRoundReports
from dpkit_ldp.graphs import Graph

import dpkit
from dpkit.errors import InvalidData, InvalidParameter


def test_two_stars_from_noisy_degrees_are_exactly_unbiased() -> None:
    """Over the exact noise law (moments summed numerically, not from the closed forms):
    E[ŝ_i] = C(d_i, 2) and E[variance term] = Var ŝ_i, and the estimator sums these terms."""
    release = OneRoundGraph(epsilon1=1.0, epsilon2=0.6, nodes=5)
    scale = release.degree_mechanism.scale
    z = np.arange(-3000, 3001)
    pmf = np.exp(_graph_noise.log_pmf(z, scale))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-14)
    sigma2 = float(pmf @ z**2.0)
    var_z2 = float(pmf @ z**4.0) - sigma2**2

    def term(x: np.ndarray) -> np.ndarray:
        return (x * x - x - sigma2) / 2.0

    def variance_term(x: np.ndarray) -> np.ndarray:
        return (var_z2 + sigma2 * ((2.0 * x - 1.0) ** 2 - 4.0 * sigma2)) / 4.0

    for d in (0, 1, 2, 7, 30):
        x = (d + z).astype(np.float64)
        mean = float(pmf @ term(x))
        assert mean == pytest.approx(math.comb(d, 2), abs=1e-6)
        variance = float(pmf @ term(x) ** 2) - mean**2
        assert float(pmf @ variance_term(x)) == pytest.approx(variance, rel=1e-9)

    noisy = np.array([3, -1, 0, 12, 5])
    reports = OneRoundReports(release.adjacency_mechanism.randomize_graph(np.zeros((5, 5))), noisy)
    estimate = dpkit.graph.kstars(release, reports)
    x = noisy.astype(np.float64)
    assert estimate.value == pytest.approx(float(term(x).sum()), rel=1e-12)
    assert float(estimate.variance) == pytest.approx(float(variance_term(x).sum()), rel=1e-12)
    assert estimate.variance_kind == "unbiased" and estimate.unbiased


def _graphs() -> dict[str, Graph]:
    rng = np.random.default_rng(20261128)
    return {
        "erdos_renyi": erdos_renyi(40, 0.2, rng=rng),
        "barabasi_albert": barabasi_albert(40, 3, rng=rng),
        "powerlaw_cluster": powerlaw_cluster(40, 3, 0.6, rng=rng),
    }


GRAPHS = _graphs()

#: Each z-test below is at 5.3 sd: two-sided 1.2e-7 each.
Z = 5.3


@pytest.mark.parametrize("family", sorted(GRAPHS))
def test_one_release_gives_triangles_two_stars_and_clustering(family: str) -> None:
    """400 releases through the real samplers. Triangles and 2-stars: mean within 5.3 sd of
    the truth, MSE / mean reported variance within 5.3 sd of 1, 95 % coverage within 5.3 sd
    (+ 0.02 for the normal interval on 40 nodes): 6 z-tests, false-positive rate ≤ 7.2e-7.
    Clustering (a ratio: not unbiased, delta-method variance): only MSE / mean reported
    variance within 5.3 sd of 1, a check of the formula's scale (its first-order error is
    not sampling error, so no rate is claimed for it)."""
    graph = GRAPHS[family]
    truth = graph_counts(graph)
    release = OneRoundGraph(epsilon1=1.0, epsilon2=1.0, nodes=graph.nodes)
    r = 400
    found: dict[str, list[tuple[float, float, float, float]]] = {}
    for seed in np.random.SeedSequence(11).spawn(r):
        reports = release.randomize_graph(graph, rng=np.random.default_rng(seed))
        t = dpkit.graph.triangles(release, reports)
        s = dpkit.graph.kstars(release, reports)
        c = dpkit.graph.clustering(t, s)
        for name, e in (("triangles", t), ("stars", s), ("clustering", c)):
            low, high = e.confidence_interval(0.95)
            found.setdefault(name, []).append((e.value, float(e.variance), low, high))
    targets = {
        "triangles": truth.triangles,
        "stars": truth.kstars(2),
        "clustering": truth.clustering,
    }
    for name, target in targets.items():
        values, variances, low, high = np.array(found[name]).T
        errors = values - target
        kurtosis = float(np.mean(errors**4) / np.mean(errors**2) ** 2 - 3.0)
        spread = Z * math.sqrt((2 + max(kurtosis, 0.0)) / r)
        spread += Z * float(variances.std() / variances.mean()) / math.sqrt(r)
        ratio = float(np.mean(errors**2) / np.mean(variances))
        assert abs(ratio - 1) <= spread, (name, ratio, spread)
        if name == "clustering":
            continue
        assert abs(errors.mean()) <= Z * values.std() / math.sqrt(r), (name, errors.mean())
        inside = float(np.mean((low <= target) & (target <= high)))
        assert abs(inside - 0.95) <= Z * math.sqrt(0.95 * 0.05 / r) + 0.02, (name, inside)


def test_privacy_per_user_and_per_edge_and_the_session_charges_the_edge() -> None:
    release = OneRoundGraph(epsilon1=0.7, epsilon2=0.2, nodes=10)
    assert release.node_privacy.epsilon == pytest.approx(0.9)
    # One reported bit (ε₁) and two degrees (2ε₂) per edge.
    assert release.privacy.epsilon == pytest.approx(1.1)
    assert release.relationship_privacy == release.privacy
    session = dpkit.Session(budget=(2.0, 0.0), ledger=":memory:")
    released = session.release(release, np.zeros((10, 10)))
    assert released.cost.epsilon == pytest.approx(1.1)
    assert isinstance(released.values, OneRoundReports)


def test_refusals() -> None:
    release = OneRoundGraph(epsilon1=1.0, epsilon2=1.0, nodes=4)
    reports = release.randomize_graph(np.zeros((4, 4)), rng=np.random.default_rng(0))
    with pytest.raises(InvalidParameter) as k:
        dpkit.graph.kstars(release, reports, k=3)
    assert k.value.parameter == "k"
    with pytest.raises(InvalidData):
        dpkit.graph.kstars(release, np.zeros(4, dtype=np.int64))
    with pytest.raises(InvalidParameter) as edges:
        dpkit.graph.edge_count(release, reports)
    assert edges.value.parameter == "statistic"
    with pytest.raises(InvalidData):
        release.randomize_graph(np.zeros((5, 5)), rng=np.random.default_rng(0))

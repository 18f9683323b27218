"""The per-node graph mechanisms: exact privacy per neighbour list and per edge, exact
samplers, the two-round protocol's sensitivity, inputs.

Deterministic unless a test says otherwise; the statistical tests state their false-positive
rate and use fixed seeds.
"""

from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_ldp import _graph_noise
from dpkit_ldp.graph_arr import AsymmetricRandomizedResponse
from dpkit_ldp.graph_degree import LocalKStars, NoisyDegree
from dpkit_ldp.graph_reports import AdjacencyReports
from dpkit_ldp.graph_rr import GraphRandomizedResponse
from dpkit_ldp.graph_triangles import TwoRoundTriangles, projected_lower
from dpkit_ldp.graphs import Graph, Graphs, NeighbourLists, as_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.testing import exact_check

EPSILONS = (0.1, 1.0, 3.0)
CONTEXT = decimal.Context(prec=80)


def _all_graphs(n: int) -> list[np.ndarray]:
    rows, cols = np.tril_indices(n, -1)
    found = []
    for bits in itertools.product((0, 1), repeat=rows.size):
        x = np.zeros((n, n), dtype=np.int64)
        x[rows, cols] = bits
        found.append(x + x.T)
    return found


def _adjacency_mechanisms(nodes: int = 4) -> list[dpkit.plugin.Mechanism]:
    found: list[dpkit.plugin.Mechanism] = []
    for epsilon in EPSILONS:
        largest = AsymmetricRandomizedResponse.largest_mu(epsilon)
        found.append(GraphRandomizedResponse(epsilon=epsilon, nodes=nodes))
        found.append(AsymmetricRandomizedResponse(epsilon=epsilon, nodes=nodes, mu=0.05))
        found.append(AsymmetricRandomizedResponse(epsilon=epsilon, nodes=nodes, mu=largest))
    return found


@pytest.mark.parametrize("mechanism", _adjacency_mechanisms(), ids=repr)
def test_neighbour_list_log_ratio_is_exactly_epsilon(mechanism: dpkit.plugin.Mechanism) -> None:
    outputs = mechanism.output_space()
    worst = -math.inf
    for x in itertools.product((0, 1), repeat=4):
        for flip in range(4):
            y = list(x)
            y[flip] ^= 1
            lp = mechanism.log_probability(outputs, np.array([x] * len(outputs)))
            lq = mechanism.log_probability(outputs, np.array([y] * len(outputs)))
            assert math.isclose(float(np.exp(lp).sum()), 1.0, rel_tol=1e-12)
            worst = max(worst, float(np.max(lp - lq)))
    assert worst <= mechanism.privacy.epsilon + 1e-12
    # Attained at a reported 1 (ratio p₁/p₀ = e^ε for both channels).
    assert worst == pytest.approx(mechanism.privacy.epsilon, abs=1e-9)
    result = exact_check(mechanism)
    assert result.checked and not result.violation, result


# A tiny μ·ε puts p₁ and p₀ within 2⁻⁶⁴ of each other: ⌊p₁·2⁶⁴⌋ fell below ⌈p₀·2⁶⁴⌉ there.
TINY_GAP = [
    AsymmetricRandomizedResponse(epsilon=5.980675662697361e-12, nodes=4, mu=3.3375630981492707e-10),
    AsymmetricRandomizedResponse(epsilon=1.8510263983441386e-10, nodes=4, mu=4.909384718029592e-11),
]


@pytest.mark.parametrize("mechanism", _adjacency_mechanisms() + TINY_GAP, ids=repr)
def test_realised_thresholds_never_exceed_epsilon(mechanism: dpkit.plugin.Mechanism) -> None:
    """The integer thresholds of both samplers, taken exactly, keep the declared ε: every ratio
    of a bit's two laws, both ways (rounding p₁ down and p₀ up guards one way only)."""
    epsilon = decimal.Decimal(mechanism.epsilon)
    bound = CONTEXT.exp(epsilon)
    u64 = decimal.Decimal(2**64)
    t1, t0 = mechanism._thresholds()
    one, zero = decimal.Decimal(t1) / u64, decimal.Decimal(t0) / u64
    assert one / zero <= bound and zero / one <= bound
    assert (1 - zero) / (1 - one) <= bound and (1 - one) / (1 - zero) <= bound
    keep, rate = mechanism._union()
    s = decimal.Decimal(keep) / u64
    r = 1 - CONTEXT.exp(-CONTEXT.divide(rate.numerator, rate.denominator))
    assert CONTEXT.divide(s + r - s * r, r) <= bound
    assert CONTEXT.divide(1, 1 - s) <= bound
    p1, p0 = mechanism.channel  # the realised law is the declared one to 1e-15
    assert float(r) == pytest.approx(p0, rel=1e-15)
    assert float(s + r - s * r) == pytest.approx(p1, rel=1e-15)


def test_asymmetric_mu_above_its_bound_is_refused() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="mu"):
        AsymmetricRandomizedResponse(epsilon=1.0, nodes=4, mu=0.75)
    largest = AsymmetricRandomizedResponse.largest_mu(1.0)
    AsymmetricRandomizedResponse(epsilon=1.0, nodes=4, mu=largest)
    with pytest.raises(dpkit.InvalidParameter, match="mu"):
        AsymmetricRandomizedResponse(epsilon=1.0, nodes=4, mu=math.nextafter(largest, 1.0))


def test_relationship_privacy_says_once_or_twice() -> None:
    once = GraphRandomizedResponse(epsilon=0.7, nodes=5)
    both = GraphRandomizedResponse(epsilon=0.7, nodes=5, pairs="both")
    assert once.privacy.epsilon == both.privacy.epsilon == 0.7  # per user, edge LDP
    assert once.relationship_privacy.epsilon == 0.7
    assert both.relationship_privacy.epsilon == pytest.approx(1.4)
    assert isinstance(both.relationship_privacy, dpkit.plugin.CompositeDP)
    degree = NoisyDegree(epsilon=0.5, nodes=5)
    assert degree.relationship_privacy.epsilon == pytest.approx(1.0)
    protocol = TwoRoundTriangles(epsilon1=0.4, epsilon2=0.6, nodes=5, max_degree=3)
    assert protocol.privacy.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(1), Fraction(7, 2)])
def test_count_mechanisms_ratio_is_sensitivity_over_scale(scale: Fraction) -> None:
    z = np.arange(-200, 201)
    log = _graph_noise.log_pmf(z, scale)
    assert math.isclose(float(np.exp(log).sum()), 1.0, rel_tol=1e-12)
    assert float(np.max(np.abs(np.diff(log)))) == pytest.approx(1 / float(scale), rel=1e-12)
    variance = float(np.sum(np.exp(log) * z * z))
    assert _graph_noise.noise_variance(scale) == pytest.approx(variance, rel=1e-10)


@pytest.mark.parametrize("epsilon", [0.1, 2.0**-26, 17 * 2.0**-23, 1.0])
@pytest.mark.parametrize("sensitivity", [1, 3, Fraction(1 << 30) + 1])
def test_the_noise_scale_spends_at_most_what_the_ledger_charges(
    epsilon: float, sensitivity: int | Fraction
) -> None:
    """The realised Δ/t ≤ ε as the ledger charges it (its shortest decimal, which for these ε
    lies below the binary value; at 2⁻²⁶ and 17·2⁻²³, Δ/ε at the binary value is already a
    multiple of 2⁻¹⁶, so rounding t up spares nothing there)."""
    assert Fraction(sensitivity) / _graph_noise.laplace_scale(sensitivity, epsilon) <= Fraction(
        repr(epsilon)
    )


@pytest.mark.parametrize(
    "mechanism",
    [
        NoisyDegree(epsilon=0.8, nodes=5),
        LocalKStars(epsilon=0.8, nodes=5, max_degree=3, k=2),
        LocalKStars(epsilon=2.0, nodes=5, max_degree=4, k=3),
        LocalKStars(epsilon=0.3, nodes=5, max_degree=2, k=1),
    ],
    ids=repr,
)
def test_count_mechanisms_are_epsilon_edge_ldp(mechanism: dpkit.plugin.Mechanism) -> None:
    """Over every pair of neighbouring lists of 5 bits and a window holding all but 1e-30 of
    the mass, the declared log-ratio never exceeds ε."""
    outputs = np.arange(-400, 400)
    worst = 0.0
    for x in itertools.product((0, 1), repeat=5):
        for flip in range(5):
            y = list(x)
            y[flip] ^= 1
            lp = mechanism.log_probability(outputs, np.array([x] * outputs.size))
            lq = mechanism.log_probability(outputs, np.array([y] * outputs.size))
            worst = max(worst, float(np.max(lp - lq)))
    assert worst <= mechanism.privacy.epsilon + 1e-12
    assert worst >= mechanism.privacy.epsilon * (1 - 1e-3)  # t is ε rounded to 2⁻¹⁶ steps


def test_kstar_sensitivity_is_the_largest_increment() -> None:
    for k in (1, 2, 3):
        for bound in (1, 2, 5):
            m = LocalKStars(epsilon=1.0, nodes=8, max_degree=bound, k=k)
            counts = m.count(np.arange(9))
            assert int(np.max(np.diff(counts))) == m.sensitivity or (
                k > bound and m.sensitivity == 1
            )


def _sparse_rates(mechanism: dpkit.plugin.Mechanism, graph: Graph, reps: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    dense = graph.dense()
    n = graph.nodes
    reported = (
        np.tril(np.ones((n, n), bool), -1) if mechanism.pairs == "once" else ~np.eye(n, dtype=bool)
    )
    ones_on_edges = ones_on_zeros = 0
    for _ in range(reps):
        noisy = mechanism.randomize_graph(graph, rng=rng).dense()
        ones_on_edges += int(noisy[dense & reported].sum())
        ones_on_zeros += int(noisy[~dense & reported].sum())
    edges = int((dense & reported).sum()) * reps
    zeros = int((~dense & reported).sum()) * reps
    return ones_on_edges, edges, ones_on_zeros, zeros


@pytest.mark.parametrize("output", ["dense", "packed", "sparse"])
@pytest.mark.parametrize("pairs", ["once", "both"])
def test_every_encoding_samples_the_declared_channel(output: str, pairs: str) -> None:
    """Per-bit rates of 1 on edges and non-edges match p₁ and p₀: a z-test at 5.5 standard
    errors on each of the two (false-positive rate ≤ 2·3.8e-8 per case)."""
    graph = as_graph(np.array(_ring(40)))
    for mechanism in (
        GraphRandomizedResponse(epsilon=1.2, nodes=40, pairs=pairs, output=output),
        AsymmetricRandomizedResponse(epsilon=1.2, nodes=40, mu=0.2, pairs=pairs, output=output),
    ):
        one_hits, edges, zero_hits, zeros = _sparse_rates(mechanism, graph, 200, 11)
        p1, p0 = mechanism.channel
        for hits, total, p in ((one_hits, edges, p1), (zero_hits, zeros, p0)):
            assert abs(hits - total * p) <= 5.5 * math.sqrt(total * p * (1 - p)), mechanism


def _ring(n: int) -> list[list[int]]:
    a = np.zeros((n, n), dtype=int)
    for i in range(n):
        a[i, (i + 1) % n] = a[(i + 1) % n, i] = 1
        a[i, (i + 7) % n] = a[(i + 7) % n, i] = 1
    return a.tolist()


def test_secure_mode_is_the_default_and_encodings_agree() -> None:
    graph = as_graph(np.array(_ring(30)))
    for output in ("dense", "packed", "sparse"):
        m = GraphRandomizedResponse(epsilon=2.0, nodes=30, output=output)
        reports = m.randomize_graph(graph)  # rng=None: secure
        dense = reports.dense()
        assert not np.triu(dense).any()  # the "once" form reports the lower triangle only
        assert reports.ones() == int(dense.sum())
        np.testing.assert_array_equal(np.unpackbits(reports.packed(), axis=1, count=30), dense)
        rows, cols = reports.coordinates()
        assert bool(np.all(rows > cols))


def test_randomize_on_lists_keeps_shape_and_refuses_non_bits() -> None:
    m = GraphRandomizedResponse(epsilon=1.0, nodes=4)
    out = m.randomize(np.array([[0, 1, 1, 0], [1, 0, 0, 0]]), rng=np.random.default_rng(0))
    assert out.shape == (2, 4) and out.dtype == np.bool_
    with pytest.raises(dpkit.InvalidData):
        m.randomize(np.array([0, 2, 1]))
    coerced = m.coerce(np.array([0.0, np.nan, 1.0, 7.0]), rng=np.random.default_rng(0))
    assert set(coerced.tolist()) <= {0, 1} and coerced[0] == 0 and coerced[2] == 1


def test_graph_inputs_are_checked() -> None:
    with pytest.raises(dpkit.InvalidData, match="symmetric"):
        as_graph(np.array([[0, 1], [0, 0]]))
    with pytest.raises(dpkit.InvalidData, match="self-loop"):
        as_graph(np.array([[1, 0], [0, 0]]))
    with pytest.raises(dpkit.InvalidData, match="0 or 1"):
        as_graph(np.array([[0, 2], [2, 0]]))
    with pytest.raises(dpkit.InvalidData, match="outside"):
        as_graph(np.array([[0, 5]]), nodes=3)
    g = as_graph(np.array([[0, 1], [2, 1], [1, 0]]), nodes=3)  # a repeated edge is one edge
    assert g.edges == 2 and g.degrees().tolist() == [1, 2, 1]
    m = GraphRandomizedResponse(epsilon=1.0, nodes=4)
    with pytest.raises(dpkit.InvalidData, match="nodes=4"):
        m.randomize_graph(g)


def test_scipy_and_networkx_graphs_are_read() -> None:
    sparse = pytest.importorskip("scipy.sparse")
    a = np.array(_ring(12))
    assert as_graph(sparse.csr_matrix(a)).edges == a.sum() // 2
    nx = pytest.importorskip("networkx")
    karate = nx.karate_club_graph()
    assert as_graph(karate).edges == karate.number_of_edges() == 78
    karate.add_edge(0, 0)
    with pytest.raises(dpkit.InvalidData, match="self-loop"):
        as_graph(karate)


def test_neighbour_list_and_graph_relations() -> None:
    lists = NeighbourLists(4)
    for x, y in lists.pairs() + lists.neighbours(np.random.default_rng(0), 5):
        assert lists.are_neighbours(x, y)
    assert not lists.are_neighbours(np.zeros(4), np.ones(4))
    graphs = Graphs(4)
    for x, y in graphs.pairs() + graphs.neighbours(np.random.default_rng(0), 5):
        assert graphs.are_neighbours(x, y)
    complete = np.ones((4, 4), int) - np.eye(4, dtype=int)
    assert not graphs.are_neighbours(np.zeros((4, 4), int), complete)
    one_way = np.zeros((4, 4), int)
    one_way[0, 1] = 1  # only a_01, not a_10: not a graph
    assert not graphs.are_neighbours(np.zeros((4, 4), int), one_way)


@pytest.mark.parametrize("max_degree", [2, 3, 4])
def test_two_round_sensitivity_is_d_minus_one_and_one_user_moves(max_degree: int) -> None:
    """Over every graph on 5 nodes, every edge flip and several noisy graphs G′ (random, and
    the complete one): w_i moves by at most D − 1, and only for the larger endpoint of the
    flipped edge; with G′ complete it moves by (D − 1)(1 − p₀), so Δ cannot be much smaller."""
    n = 5
    protocol = TwoRoundTriangles(epsilon1=1.0, epsilon2=1.0, nodes=n, max_degree=max_degree)
    mechanism = protocol.first_mechanism
    rng = np.random.default_rng(3)
    graphs = _all_graphs(n)
    worst = 0.0
    complete = AdjacencyReports.from_dense(mechanism.name, np.ones((n, n), dtype=bool))
    for first in [
        mechanism.randomize_graph(as_graph(graphs[k]), rng=rng) for k in (5, 300, 1000)
    ] + [complete]:
        sums = {i: protocol.wedge_sums(as_graph(g), first) for i, g in enumerate(graphs)}
        index = {g.tobytes(): i for i, g in enumerate(graphs)}
        for i, g in enumerate(graphs):
            for a, b in zip(*np.tril_indices(n, -1), strict=True):
                h = g.copy()
                h[a, b] = h[b, a] = 1 - h[a, b]
                moved = np.abs(sums[i] - sums[index[h.tobytes()]])
                assert np.count_nonzero(moved > 1e-12) <= 1
                assert float(moved[np.arange(n) != a].max(initial=0.0)) <= 1e-12
                worst = max(worst, float(moved.max()))
    assert worst <= protocol.sensitivity + 1e-12
    assert worst >= protocol.sensitivity * (1 - mechanism.report_zero) - 1e-9


def test_projection_keeps_the_smallest_lower_neighbours() -> None:
    g = as_graph(np.array([[5, 0], [5, 3], [5, 1], [5, 4], [2, 1]]), nodes=6)
    offsets, neighbours = projected_lower(g, 2)
    assert neighbours[offsets[5] : offsets[6]].tolist() == [0, 1]
    assert neighbours[offsets[2] : offsets[3]].tolist() == [1]


def test_the_sparse_reports_union_is_numpys_union() -> None:
    """The noise set's positions (strictly increasing) merged with the kept edges (any order,
    repeats allowed) give exactly ``np.union1d``: empty sides, overlaps, ends."""
    from dpkit_ldp._adjacency import _sorted_union

    rng = np.random.default_rng(0)
    for _ in range(500):
        ordered = np.unique(rng.integers(0, 100, size=int(rng.integers(0, 60)))).astype(np.int64)
        others = rng.integers(0, 100, size=int(rng.integers(0, 30))).astype(np.int64)
        found = _sorted_union(ordered, others)
        assert found.dtype == np.int64 and np.array_equal(found, np.union1d(ordered, others))


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(log10_mu=st.floats(-12.0, -0.5), log10_epsilon=st.floats(-12.0, 1.0))
def test_dense_thresholds_keep_both_ratios(log10_mu: float, log10_epsilon: float) -> None:
    """The class above, searched over μ and ε (deterministic examples; exact arithmetic)."""
    epsilon = 10.0**log10_epsilon
    mu = min(10.0**log10_mu, AsymmetricRandomizedResponse.largest_mu(epsilon))
    mechanism = AsymmetricRandomizedResponse(epsilon=epsilon, nodes=4, mu=mu)
    bound = CONTEXT.exp(decimal.Decimal(epsilon))
    t1, t0 = (decimal.Decimal(t) / decimal.Decimal(2**64) for t in mechanism._thresholds())
    assert max(t1 / t0, t0 / t1, (1 - t0) / (1 - t1), (1 - t1) / (1 - t0)) <= bound

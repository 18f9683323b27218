"""The two-round triangle protocol (``graph_triangles``): noisy edges, then noisy wedge counts.

Imola, Murakami & Chaudhuri 2021 (USENIX Security), Section 4.4, Algorithm 3
("Local2Rounds_Δ"); with asymmetric randomized response in round 1, the two-round algorithm
of Imola, Murakami & Chaudhuri 2022 (USENIX Security), Section 4.

**Round 1.** Every user i reports the pairs j < i of their neighbour list through a binary
channel (p₁, p₀) at ε₁ — ``graph_rr`` (randomized response) or ``graph_arr`` (asymmetric, with
edge sampling μ) in the ``"once"`` form — and the server publishes the noisy graph G′.

**Round 2.** User i keeps their first D lower neighbours P_i (the D smallest indices j < i;
D = ``max_degree``, graph projection) and computes

    w_i = Σ_{j<k ∈ P_i} (g′_jk − p₀),

the wedges i–j, i–k it sees, each weighted by whether G′ closes it, centred. Given G′,
E[g′_jk] = p₀ + (p₁ − p₀)·a_jk, so E[w_i] = (p₁ − p₀)·T_i with T_i the triangles {i, j, k},
j, k ∈ P_i, and T̂ = Σ_i ŵ_i/(p₁ − p₀) is unbiased for the triangle count when no user has more
than D lower neighbours (each triangle is counted once, at its largest node).

**Sensitivity of w_i: D − 1.** Adding a lower neighbour j to user i's list either adds the
wedges {j, m}, m ∈ P_i (fewer than D of them, each term in [−p₀, 1 − p₀]), or — when user i
already has D lower neighbours and j is among the D smallest — swaps j in for the largest
member k of P_i, which changes w_i by Σ_m (g′_jm − g′_km) over the D − 1 others, each term in
[−1, 1]. A higher neighbour (j > i) is not a wedge end of i. So |Δw_i| ≤ D − 1 (the paper
bounds it by D).

**The noisy release.** w_i is a real number (p₀ is irrational); it is rounded *stochastically*
to the lattice gℤ, g = 2^(⌈log₂ Δ⌉ − 30) (to ⌊w/g⌋ or ⌈w/g⌉, up with probability frac(w/g), so
unbiased), and released as g·(k_i + Z_i), Z_i exact discrete Laplace of scale
t = (Δ/g + 1)/ε₂ (rounded up). Privacy, exactly: for neighbouring lists every lattice point
either rounding can give is within Δ/g + 1 steps of every point the other can give, so each
component of the two mixtures (over the rounding coin) is within e^{ε₂} of each component of
the other, and so are the mixtures, whatever the coin's weights — the floating-point coin
cannot leak. (The lattice pattern of dpkit's secure Laplace mechanism.)

**Privacy.** Each user: ε₁ + ε₂ edge LDP (sequential composition). Each edge {i, j}, i > j:
it is reported once in round 1 (by i) and enters only w_i in round 2 (as a lower neighbour of
i; for j it is a higher neighbour), so the protocol is (ε₁ + ε₂)-relationship DP (Imola et al.
2021, Theorem 6), charged as one composite event (:attr:`TwoRoundTriangles.privacy`).

**Variance.** Given the graph, the ŵ_i are dependent only through G′: with
W_jk = #{users i that hold j and k in P_i},

    Var T̂ = [ Σ_{j<k} W_jk²·p_{a_jk}(1 − p_{a_jk}) + Σ_i Var(noise_i) ] / (p₁ − p₀)²,

with p_a = p₁ or p₀ the channel's probability of a 1 for the pair's true bit and
Var(noise_i) = g²·(2α/(1 − α)² + ρ_i(1 − ρ_i)), α = e^{−1/t}, ρ_i the rounding's fraction
(bounded by g²/4 in the reported variance). The estimator's reported variance replaces the
W-term by an unbiased estimate from the round-1 reports (:mod:`dpkit_ldp.graph_estimators`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    EPSILON,
    Choice,
    CompositeDP,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    Real,
    TwoRoundLaw,
    array_library,
    parameter,
    resolve_rng,
    two_round_graph,
    two_round_reports,
)
from dpkit_ldp import _graph_noise
from dpkit_ldp._adjacency import AdjacencyMechanism, check_graphs, device_reports
from dpkit_ldp.graph_arr import AsymmetricRandomizedResponse
from dpkit_ldp.graph_reports import ENCODINGS, AdjacencyReports
from dpkit_ldp.graph_rr import GraphRandomizedResponse
from dpkit_ldp.graphs import Graph, Graphs, as_graph

__all__ = ["TwoRoundReports", "TwoRoundTriangles", "projected_lower"]

#: Lattice points per sensitivity: g = 2^(⌈log₂ Δ⌉ − LATTICE_BITS).
LATTICE_BITS = 30
#: Wedges handled per pass of the round-2 counter.
_WEDGE_CHUNK = 1 << 22


def _floats(values: Any) -> Any:
    library = array_library(values, owner="graph_triangles", field="reports")
    if library is not None and not library.on_host:
        return values  # an accelerator's releases stay there
    return np.asarray(values, dtype=np.float64)


@attrs.frozen(eq=False)
class TwoRoundReports:
    """What the server holds after both rounds: the round-1 noisy lower graph and every
    user's round-2 release (``second[i]`` is user i's ŵ_i, a multiple of ``step``). From an
    accelerator's adjacency both are held there (:meth:`TwoRoundTriangles.randomize_graph`)."""

    first: AdjacencyReports
    second: Any = attrs.field(converter=_floats)
    step: float = attrs.field(converter=float)


def projected_lower(graph: Graph, max_degree: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For every user i its first ``max_degree`` lower neighbours (smallest indices j < i):
    (offsets, neighbours) in CSR form."""
    rows, cols = graph.lower()  # sorted by row, then column
    starts = np.searchsorted(rows, np.arange(graph.nodes))
    position = np.arange(rows.size) - starts[rows]
    keep = position < max_degree
    rows, cols = rows[keep], cols[keep]
    offsets = np.zeros(graph.nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=graph.nodes), out=offsets[1:])
    return offsets, cols


def wedge_pairs(offsets: NDArray[np.int64], neighbours: NDArray[np.int64]) -> Any:
    """Yield (users, j, k) blocks: every pair j < k of each user's projected lower neighbours."""
    sizes = np.diff(offsets)
    for size in np.unique(sizes[sizes >= 2]):
        users = np.flatnonzero(sizes == size)
        a, b = np.triu_indices(int(size), 1)
        per_user = a.size
        step = max(1, _WEDGE_CHUNK // per_user)
        for start in range(0, users.size, step):
            chunk = users[start : start + step]
            table = neighbours[offsets[chunk][:, None] + np.arange(int(size))[None, :]]
            yield chunk, table[:, a], table[:, b]


def _lower_keys(i: NDArray[np.int64], j: NDArray[np.int64]) -> NDArray[np.int64]:
    """The row-major number of the lower-triangle pair {i, j}."""
    high, low = np.maximum(i, j), np.minimum(i, j)
    keys: NDArray[np.int64] = high * (high - 1) // 2 + low
    return keys


@attrs.frozen
class TwoRoundTriangles:
    """The two-round triangle protocol: a session query (``privacy``, ``run``) and the object
    the triangle estimator takes (``dpkit.graph.triangles(protocol, reports)``).

    See the module docstring for the algorithm, its privacy and its variance.
    """

    name: ClassVar[str] = "graph_triangles"
    kind: ClassVar[Literal["local", "central"]] = "local"

    epsilon1: float = parameter(EPSILON, doc="ε₁ of round 1 (noisy edges)", typical=(0.05, 3.0))
    epsilon2: float = parameter(
        EPSILON, doc="ε₂ of round 2 (noisy wedge counts)", typical=(0.05, 3.0)
    )
    nodes: int = parameter(Integer(low=2, high=1 << 40), doc="number n of nodes", typical=(3, 6))
    max_degree: int = parameter(
        Integer(low=2, high=1 << 30),
        doc="public bound D on a user's lower neighbours (more are dropped: projection)",
        typical=(2, 6),
    )
    round_one: str = parameter(
        Choice(("graph_rr", "graph_arr")),
        doc="round-1 channel: randomized response, or asymmetric RR with edge sampling",
        default="graph_rr",
    )
    mu: float | None = parameter(
        Real(low=0.0, high=1.0, low_open=True, high_open=True),
        doc="μ of graph_arr in round 1",
        default=None,
        optional=True,
    )
    output: str = parameter(
        Choice(ENCODINGS), doc="encoding of the round-1 reports", default="sparse"
    )

    def __attrs_post_init__(self) -> None:
        if (self.round_one == "graph_arr") != (self.mu is not None):
            raise InvalidParameter(
                "mu", self.mu, "given exactly when round_one='graph_arr'", owner=self.name
            )
        self.first_mechanism  # noqa: B018 - validates μ against ε₁
        if self.scale > Fraction(1 << 55):
            raise InvalidParameter(
                "epsilon2", self.epsilon2, "larger (the noise scale overflows)", owner=self.name
            )

    # -- the two rounds -------------------------------------------------------------------

    @property
    def first_mechanism(self) -> AdjacencyMechanism:
        """The round-1 randomizer, in the ``"once"`` form."""
        if self.round_one == "graph_arr":
            assert self.mu is not None
            return AsymmetricRandomizedResponse(
                epsilon=self.epsilon1, nodes=self.nodes, mu=self.mu, output=self.output
            )
        return GraphRandomizedResponse(epsilon=self.epsilon1, nodes=self.nodes, output=self.output)

    @property
    def sensitivity(self) -> int:
        """Δ = D − 1: how far one edge of a user's list moves w_i."""
        return self.max_degree - 1

    @property
    def step(self) -> float:
        """The lattice step g = 2^(⌈log₂ Δ⌉ − 30)."""
        return math.ldexp(1.0, math.ceil(math.log2(max(self.sensitivity, 1))) - LATTICE_BITS)

    @property
    def scale(self) -> Fraction:
        """t = (Δ/g + 1)/ε₂ lattice steps, rounded up to a multiple of 2⁻¹⁶."""
        steps = Fraction(self.sensitivity) / Fraction(self.step) + 1
        return _graph_noise.laplace_scale(steps, self.epsilon2)

    @property
    def noise_variance(self) -> float:
        """An upper bound on one user's round-2 noise variance: g²·(2α/(1 − α)² + 1/4)."""
        return self.step**2 * (_graph_noise.noise_variance(self.scale) + 0.25)

    @property
    def privacy(self) -> PrivacyEvent:
        """(ε₁ + ε₂) per edge and per user, as its two parts (module docstring)."""
        return CompositeDP(
            (RandomizedResponseDP(epsilon=self.epsilon1, k=2), PureDP(epsilon=self.epsilon2))
        )

    relationship_privacy = privacy

    def round_one_reports(self, graph: Graph, *, rng: Any = None) -> AdjacencyReports:
        """Round 1: every user's noisy lower neighbour list."""
        return self.first_mechanism.randomize_graph(graph, rng=rng)

    def round_two_reports(
        self, graph: Graph, first: AdjacencyReports, *, rng: Any = None
    ) -> NDArray[np.float64]:
        """Round 2: every user's ŵ_i, given the published round-1 reports."""
        generator, _ = resolve_rng(rng, owner=self.name)
        w = self.wedge_sums(graph, first)
        g = self.step
        scaled = w / g
        low = np.floor(scaled)
        up = generator.random(w.size) < (scaled - low)
        steps = low.astype(np.int64) + up
        noisy = steps + _graph_noise.noise(self.scale, w.size, generator)
        return noisy.astype(np.float64) * g

    def wedge_sums(self, graph: Graph, first: AdjacencyReports) -> NDArray[np.float64]:
        """w_i = Σ_{j<k ∈ P_i} (g′_jk − p₀) for every user (before noise)."""
        if first.nodes != graph.nodes or first.pairs != "once" or not first.complete:
            raise InvalidData(
                f"{self.name}: round 2 needs every user's round-1 reports in the 'once' form",
                field="reports",
            )
        noisy = _noisy_keys(first)
        offsets, neighbours = projected_lower(graph, self.max_degree)
        closed = np.zeros(graph.nodes, dtype=np.int64)
        for users, j, k in wedge_pairs(offsets, neighbours):
            keys = _lower_keys(j, k)
            position = np.searchsorted(noisy, keys)
            hit = noisy[np.minimum(position, noisy.size - 1)] == keys if noisy.size else keys < 0
            closed[users] += hit.sum(axis=1)
        sizes = np.diff(offsets)
        wedges = sizes * (sizes - 1) // 2
        centred: NDArray[np.float64] = closed - self.first_mechanism.report_zero * wedges
        return centred

    def randomize_graph(
        self, graph: Any, /, *, rng: Any = None, nodes: int | None = None
    ) -> TwoRoundReports:
        """Both rounds on ``graph`` (anything :func:`dpkit_ldp.graphs.as_graph` accepts).

        An accelerator's n×n adjacency matrix (``nodes``, if given, its side) runs both rounds
        there (:func:`dpkit.plugin.two_round_graph`, the law of :meth:`on_graphs`' device
        path): refused as ``as_graph`` refuses it (field ``graph``, no value quoted; its shape
        and dtype, then the rng, before any entry is read); the round-1 reports in the
        ``output`` encoding of the caller's arrays on its device (``randomize_graph`` of the
        round-1 mechanism there: ``"sparse"`` the coordinates of the dense reports' 1s), the
        n releases float64 there. Words: round 1's, then two a user for the rounding coin,
        then the noise's — in the ``"dense"`` and ``"packed"`` encodings the host's order, so
        the same words give the host's reports. The triangle estimator takes them as they are
        (the releases' sum comes back; the variance reads the round-1 reports on the host).
        """
        library = array_library(graph, owner=self.name, field="graph")
        if library is not None and not library.on_host:
            return self._device_rounds(library, graph, rng=rng, nodes=nodes)
        generator, _ = resolve_rng(rng, owner=self.name)
        g = as_graph(graph, nodes=nodes)
        if g.nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {g.nodes} nodes, the protocol nodes={self.nodes}",
                field="graph",
            )
        first = self.round_one_reports(g, rng=generator)
        second = self.round_two_reports(g, first, rng=generator)
        return TwoRoundReports(first, second, self.step)

    def device_law(self) -> TwoRoundLaw:
        """The protocol's public parameters as its device paths take them."""
        mechanism = self.first_mechanism
        one, zero = mechanism._thresholds()
        return TwoRoundLaw(
            nodes=self.nodes,
            max_degree=self.max_degree,
            one_threshold64=one,
            zero_threshold64=zero,
            report_zero=mechanism.report_zero,
            step=self.step,
            scale=self.scale,
        )

    def _device_rounds(
        self, library: Any, graph: Any, *, rng: Any, nodes: int | None
    ) -> TwoRoundReports:
        """:meth:`randomize_graph` on an accelerator's adjacency (its docstring)."""
        if nodes is not None and nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {nodes} nodes, the protocol nodes={self.nodes}",
                field="graph",
            )
        dense, second = two_round_graph(library, graph, self.device_law(), rng=rng, owner=self.name)
        first = device_reports(library, dense, self.first_mechanism.name, "once", self.output)
        return TwoRoundReports(first, second, self.step)

    def run(self, data: Any, /, *, rng: Any = None) -> TwoRoundReports:
        """Session query: both rounds on the graph ``data``."""
        return self.randomize_graph(data, rng=rng)

    def on_graphs(self) -> TwoRoundView:
        """The protocol as a mechanism on small dense graphs, for the auditor (:class:`TwoRoundView`
        runs both rounds on an accelerator's adjacency, or a batch of them)."""
        return TwoRoundView(self)


def _noisy_keys(first: AdjacencyReports) -> NDArray[np.int64]:
    rows, cols = first.coordinates()
    return np.sort(_lower_keys(rows, cols))


@attrs.frozen
class TwoRoundView(Mechanism):
    """The two-round protocol on whole graphs (n×n adjacency matrices, a batch along a first
    axis): its output is the round-1 bits (lower-triangle pairs, row-major) followed by the n
    round-2 releases; its relation, graphs that differ in one edge; its cost, the protocol's.

    An accelerator's adjacency runs both rounds there (:mod:`dpkit.tensors.graph_views`),
    with the host's law, as does the protocol's own ``randomize_graph`` on one such matrix;
    ``round_two_reports`` takes :class:`~dpkit_ldp.graphs.Graph` objects (sparse) and stays
    on the host."""

    name: ClassVar[str] = "graph_triangles_relationships"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    statistic: ClassVar[str] = "graph"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize"})

    protocol: TwoRoundTriangles

    @property
    def domain(self) -> Graphs:
        return Graphs(self.protocol.nodes)

    @property
    def privacy(self) -> PrivacyEvent:
        return self.protocol.privacy

    def check_input(self, values: Any, /) -> None:
        """Public phase: an n×n matrix (or a batch of them), from the shape alone."""
        check_graphs(values, self.protocol.nodes, owner=self.name)

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.float64]:
        """Both rounds on each graph; a batch is grouped by distinct graph (the auditor draws
        many outputs of one graph), each group's rounds vectorised over its copies. An
        accelerator's adjacency runs both rounds there (:func:`dpkit.plugin.two_round_reports`:
        the same words give the same output for a batch of copies of one graph)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            law = self.protocol.device_law()
            return two_round_reports(library, values, law, rng=rng, owner=self.name)  # type: ignore[no-any-return]
        self.check_input(values)
        generator, _ = resolve_rng(rng, owner=self.name)
        graphs = np.asarray(values)
        n = self.protocol.nodes
        flat = graphs.reshape(-1, n, n)
        pairs = n * (n - 1) // 2
        out = np.empty((flat.shape[0], pairs + n))
        distinct, inverse = np.unique(
            flat.reshape(flat.shape[0], n * n), axis=0, return_inverse=True
        )
        for index, adjacency in enumerate(distinct):
            members = np.flatnonzero(inverse.reshape(-1) == index)
            out[members] = self._copies(adjacency.reshape(n, n), members.size, generator)
        return out.reshape((*graphs.shape[:-2], out.shape[1]))

    def _copies(self, adjacency: NDArray[Any], count: int, generator: Any) -> NDArray[np.float64]:
        protocol = self.protocol
        n = protocol.nodes
        graph = Graph.from_dense(adjacency)
        rows, cols = np.tril_indices(n, -1)
        mechanism = protocol.first_mechanism
        bits = mechanism._report_bits(np.tile(adjacency[rows, cols] != 0, count), generator)
        bits = bits.reshape(count, rows.size).astype(np.float64)
        # incidence[i, key]: how many of user i's wedges the pair ``key`` closes.
        incidence = np.zeros((n, rows.size))
        offsets, neighbours = projected_lower(graph, protocol.max_degree)
        for users, j, k in wedge_pairs(offsets, neighbours):
            np.add.at(incidence, (np.repeat(users, j.shape[1]), _lower_keys(j, k).ravel()), 1.0)
        sizes = np.diff(offsets)
        w = bits @ incidence.T - mechanism.report_zero * (sizes * (sizes - 1) // 2)
        scaled = w / protocol.step
        low = np.floor(scaled)
        steps = low.astype(np.int64) + (generator.random(w.shape) < scaled - low)
        noise = _graph_noise.noise(protocol.scale, w.size, generator).reshape(w.shape)
        return np.concatenate([bits, (steps + noise) * protocol.step], axis=1)

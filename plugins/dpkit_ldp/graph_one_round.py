"""One round of noisy adjacency and noisy degrees (``graph_one_round``): triangles, 2-stars and
the clustering coefficient from a single release.

Imola, Murakami & Chaudhuri 2021 (USENIX Security), Section 4: in one round every user i sends
both their noisy neighbour list — randomized response on the pairs j < i at ε₁ (``graph_rr``,
the "once" form of their RR_Δ) — and their noisy degree d̃_i = d_i + Z_i at ε₂ (``graph_degree``,
discrete Laplace of scale 1/ε₂ in place of their Laplace), and the server estimates the
triangles from the first and the 2-stars from the second; the clustering coefficient is
3T̂/Ŝ₂ (their Section 5.4). The two parts use independent randomness, so given the graph the
two estimates are independent, which is what :func:`dpkit.graph.clustering`'s delta-method
variance needs.

**Privacy.** Each user: ε₁ + ε₂ edge LDP (sequential composition of two ε-edge-LDP
mechanisms). Each edge {i, j}, i > j: its bit is reported once (by i), and it moves both
endpoints' degrees, so the release is (ε₁ + 2ε₂)-relationship DP (Imola et al. 2021,
Proposition 1 for the degrees): :attr:`privacy` (what a session charges for the round on a
graph, as three events) is that per-edge cost, :attr:`node_privacy` the per-user one.

**Triangles**: the one-round estimator of ``graph_rr`` (:mod:`dpkit_ldp.graph_estimators`,
the product of the debiased bits over every triple, with its unbiased variance estimate).

**2-stars** S₂ = Σ_i C(d_i, 2) (derived here from the moments of the discrete Laplace law,
Canonne, Kamath & Steinke 2020, Definition 4). With Z symmetric, σ² = E Z² = 2α/(1 − α)² and
E Z⁴ = 2α(1 + 10α + α²)/(1 − α)⁴, α = e^{−ε₂}:

    ŝ_i = (d̃_i² − d̃_i − σ²)/2,   E[ŝ_i] = (d_i² + σ² − d_i − σ²)/2 = C(d_i, 2),

    Var ŝ_i = [Var(Z²) + (2d_i − 1)²σ²]/4   (Cov(Z², Z) = E Z³ = 0),

and since E[(2d̃_i − 1)²] = (2d_i − 1)² + 4σ², the sum over users of
[Var(Z²) + σ²((2d̃_i − 1)² − 4σ²)]/4 is an unbiased estimate of Var Ŝ₂, Ŝ₂ = Σ_i ŝ_i (the users'
noise is independent). No degree bound is needed: the degree's sensitivity is 1 whatever the
degree (LocalLap_k⋆, ``graph_kstar``, instead releases C(min(d, D), 2) at sensitivity D − 1).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from dpkit.plugin import (
    EPSILON,
    Choice,
    CompositeDP,
    GraphEstimate,
    GraphEstimator,
    InvalidData,
    InvalidParameter,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    array_library,
    parameter,
    resolve_rng,
)
from dpkit_ldp._adjacency import nodes_parameter
from dpkit_ldp.graph_degree import NoisyDegree
from dpkit_ldp.graph_estimators import AdjacencyEstimator
from dpkit_ldp.graph_reports import ENCODINGS, AdjacencyReports
from dpkit_ldp.graph_rr import GraphRandomizedResponse
from dpkit_ldp.graphs import as_graph

__all__ = ["OneRoundEstimator", "OneRoundGraph", "OneRoundReports", "two_star_moments"]


def _integers(values: Any) -> Any:
    library = array_library(values, owner="graph_one_round", field="reports")
    if library is not None and not library.on_host:
        return values  # an accelerator's releases stay there
    return np.asarray(values, dtype=np.int64)


@attrs.frozen(eq=False)
class OneRoundReports:
    """What the server holds after the round: the noisy lower graph and every user's noisy
    degree (``degrees[i]`` is user i's d̃_i). From an accelerator's adjacency both are held
    there (:meth:`OneRoundGraph.randomize_graph`)."""

    adjacency: AdjacencyReports
    degrees: Any = attrs.field(converter=_integers)


@attrs.frozen
class OneRoundGraph:
    """Noisy neighbour lists (ε₁) and noisy degrees (ε₂) in one round: a session query
    (``privacy``, per edge; ``run``) and the object the estimators take (``dpkit.graph.triangles``,
    ``dpkit.graph.kstars``, then ``dpkit.graph.clustering``). See the module docstring."""

    name: ClassVar[str] = "graph_one_round"
    kind: ClassVar[Literal["local", "central"]] = "local"

    epsilon1: float = parameter(
        EPSILON, doc="ε₁ of the noisy neighbour lists (randomized response)", typical=(0.05, 3.0)
    )
    epsilon2: float = parameter(EPSILON, doc="ε₂ of the noisy degrees", typical=(0.05, 3.0))
    nodes: int = nodes_parameter()
    output: str = parameter(
        Choice(ENCODINGS), doc="encoding of the adjacency reports", default="sparse"
    )

    def __attrs_post_init__(self) -> None:
        self.adjacency_mechanism  # noqa: B018 - validates ε₁ and nodes
        self.degree_mechanism  # noqa: B018 - validates ε₂

    @property
    def adjacency_mechanism(self) -> GraphRandomizedResponse:
        """The neighbour-list randomizer, in the ``"once"`` form."""
        return GraphRandomizedResponse(
            epsilon=self.epsilon1, nodes=self.nodes, pairs="once", output=self.output
        )

    @property
    def degree_mechanism(self) -> NoisyDegree:
        """The degree randomizer."""
        return NoisyDegree(epsilon=self.epsilon2, nodes=self.nodes)

    @property
    def node_privacy(self) -> PrivacyEvent:
        """ε₁ + ε₂ per user (edge LDP), as its two parts."""
        return CompositeDP(
            (RandomizedResponseDP(epsilon=self.epsilon1, k=2), PureDP(epsilon=self.epsilon2))
        )

    @property
    def privacy(self) -> PrivacyEvent:
        """ε₁ + 2ε₂ per edge — one reported bit, two degrees moved — which is what a session
        that releases the round on a graph is charged."""
        degree = PureDP(epsilon=self.epsilon2)
        return CompositeDP((RandomizedResponseDP(epsilon=self.epsilon1, k=2), degree, degree))

    relationship_privacy = privacy

    def randomize_graph(
        self, graph: Any, /, *, rng: Any = None, nodes: int | None = None
    ) -> OneRoundReports:
        """Every user's two reports on ``graph`` (anything :func:`dpkit_ldp.graphs.as_graph`
        accepts).

        An accelerator's n×n adjacency matrix is released there: the two mechanisms'
        ``randomize_graph`` on the device (each refuses the graph as ``as_graph`` does, before
        a word is drawn; each call takes its own key or seed from ``rng``), the reports of the
        caller's type on its device, which the estimators take as they are.
        """
        library = array_library(graph, owner=self.name, field="graph")
        if library is not None and not library.on_host:
            adjacency = self.adjacency_mechanism.randomize_graph(graph, rng=rng, nodes=nodes)
            degrees = self.degree_mechanism.randomize_graph(graph, rng=rng, nodes=nodes)
            return OneRoundReports(adjacency, degrees)
        generator, _ = resolve_rng(rng, owner=self.name)
        g = as_graph(graph, nodes=nodes)
        if g.nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {g.nodes} nodes, the release nodes={self.nodes}",
                field="graph",
            )
        adjacency = self.adjacency_mechanism.randomize_graph(g, rng=generator)
        degrees = self.degree_mechanism.randomize_graph(g, rng=generator)
        return OneRoundReports(adjacency, degrees)

    def run(self, data: Any, /, *, rng: Any = None) -> OneRoundReports:
        """Session query: the round on the graph ``data``."""
        return self.randomize_graph(data, rng=rng)


def two_star_moments(alpha: float) -> tuple[float, float]:
    """(σ², Var Z²) of the discrete Laplace law with parameter α (module docstring)."""
    sigma2 = 2.0 * alpha / (1.0 - alpha) ** 2
    fourth = 2.0 * alpha * (1.0 + 10.0 * alpha + alpha * alpha) / (1.0 - alpha) ** 4
    return sigma2, fourth - sigma2 * sigma2


class OneRoundEstimator(GraphEstimator):
    """Triangles (from the noisy neighbour lists) and 2-stars (from the noisy degrees) of one
    ``graph_one_round`` release."""

    graph_statistics: ClassVar[tuple[str, ...]] = ("triangles", "kstars")
    mechanism: Any  # a OneRoundGraph

    def accumulate(self, reports: Any, /) -> Any:
        raise InvalidData(
            f"{self.mechanism.name}: estimate from the whole release "
            "(dpkit.graph.triangles or dpkit.graph.kstars)",
            field="reports",
        )

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> GraphEstimate:
        self.check_method(method)
        return self.graph_estimate("triangles", statistics)

    def graph_estimate(self, statistic: str, reports: Any, /, **options: Any) -> GraphEstimate:
        release = self.mechanism
        k = options.pop("k", None)
        if options:
            raise InvalidParameter("options", options, "none", owner=release.name)
        if k is not None and k != 2:
            raise InvalidParameter("k", k, "2 (2-stars, from the degrees)", owner=release.name)
        if isinstance(reports, np.ndarray) and reports.dtype == object and reports.ndim == 0:
            reports = reports[()]
        if not isinstance(reports, OneRoundReports):
            raise InvalidData(
                f"{release.name}: reports must be OneRoundReports (from randomize_graph), got "
                f"{type(reports).__name__}",
                field="reports",
            )
        if statistic == "triangles":
            adjacency = AdjacencyEstimator(release.adjacency_mechanism)
            estimate = adjacency.graph_estimate("triangles", reports.adjacency)
            return attrs.evolve(estimate, mechanism=release.name)
        return self._two_stars(reports.degrees)

    def _two_stars(self, noisy: Any) -> GraphEstimate:
        release = self.mechanism
        library = array_library(noisy, owner=release.name, field="reports")
        if library is not None:  # an accelerator's n noisy degrees, copied to the host
            noisy = library.small_to_host(noisy)
        if noisy.shape != (release.nodes,):
            raise InvalidData(
                f"{release.name}: expected one noisy degree from each of the {release.nodes} "
                f"users, got shape {noisy.shape}",
                field="reports",
            )
        alpha = math.exp(-1.0 / float(release.degree_mechanism.scale))
        sigma2, fourth = two_star_moments(alpha)
        d = noisy.astype(np.float64)
        stars = float(np.sum(d * d - d - sigma2)) / 2.0
        variance = float(np.sum(fourth + sigma2 * ((2.0 * d - 1.0) ** 2 - 4.0 * sigma2))) / 4.0
        return GraphEstimate(
            "kstars",
            release.name,
            stars,
            max(variance, 0.0),
            release.nodes,
            variance_kind="unbiased",
            note="2-stars from the noisy degrees",
        )

"""Estimators of graph statistics from the graph mechanisms' reports (``dpkit.graph``).

**Noisy adjacency** (``graph_rr``, ``graph_arr``). Every reported bit of a pair e goes through
the channel (p₁, p₀); with r reports per pair (1 in the ``"once"`` form, 2 in ``"both"``) and
ā_e the mean of its reports,

    â_e = (ā_e − p₀)/(p₁ − p₀),   E[â_e] = a_e,   Var[â_e] = v_{a_e} = p_a(1 − p_a)/(r (p₁ − p₀)²),

independently over the pairs (Imola, Murakami & Chaudhuri 2021, Section 4.1; the same
debiasing as Warner's). Every statistic below is a *multilinear* polynomial in the a_e — each
term a product over distinct pairs — so the same polynomial in the â_e is unbiased, and its
variance is again such a polynomial, estimated unbiasedly the same way.

* Edges: Ê = Σ_e â_e; Var = P·v₀ + E·(v₁ − v₀) (P pairs). For randomized response
  v₁ = v₀ = e^ε/(r(e^ε − 1)²) and the variance is exact.
* Degrees: d̂_v = Σ_u â_vu; Var = (n − 1)·v₀ + d_v·(v₁ − v₀).
* Triangles, one round (Imola et al. 2021, Section 4.1, "RR_Δ" with its empirical estimation:
  T̂ = (e^{3ε}m₃ − e^{2ε}m₂ + e^ε m₁ − m₀)/(e^ε − 1)³ for randomized response, m_k the noisy
  graph's triples with k edges, which is exactly) T̂ = Σ_{triples τ} Π_{e∈τ} â_e = tr(Â³)/6.
  Two triples share at most one pair, so (derived here; the paper bounds it by O(n⁴/ε⁶))

      Var T̂ = Σ_t N_t (1 + v₁)^t v₀^{3−t} − N₃ + Σ_e v_{a_e}·c_e(c_e − 1),

  N_t the triples with t edges, c_e the common neighbours of e's ends. With
  S₁ = (n − 2)E, S₂ = Σ_v C(d_v, 2) (2-stars) and S₃ = T: N₃ = S₃, N₂ = S₂ − 3S₃,
  N₁ = S₁ − 2S₂ + 3S₃, N₀ = C(n, 3) − S₁ + S₂ − S₃; each S and Σ_e (1, a_e)·c_e(c_e − 1) is
  estimated unbiasedly by its multilinear form in the â (Σ_{u<w} (Ĉ_uw² − Q_uw), Ĉ = Â²,
  Q = (Â∘Â)²: the terms with a repeated pair removed). It needs the dense n×n noisy graph:
  O(n³) time, up to :data:`DENSE_TRIANGLES` nodes.

**Noisy counts** (``graph_degree``, ``graph_kstar``): every report is c_i + Z_i, Z_i exact
discrete Laplace of scale t, α = e^{−1/t}, Var Z = 2α/(1 − α)².

* Degrees: d̃_i itself, variance exactly Var Z. Edges: Σ d̃_i/2, variance n·Var Z/4.
* k-stars: Σ_i r̃_i, variance exactly n·Var Z (Imola et al. 2021, Theorem 3).
* Degree distribution (derived here): the law of Z has the z-transform
  (1 − α)²/((1 − αx)(1 − α/x)), whose inverse is the three-term
  (1 + α² − αx − α/x)/(1 − α)². So with H_k the number of noisy degrees equal to k,

      n̂_k = [(1 + α²)·H_k − α·(H_{k−1} + H_{k+1})]/(1 − α)²

  is *exactly* unbiased for the number of nodes of degree k (each user contributes
  w(d̃_i − k), w(0) = (1 + α²)/(1 − α)², w(±1) = −α/(1 − α)², with E[w(d_i + Z − k)] = 1{d_i = k}),
  and Σ_i (w_i² − w_i) is an unbiased estimate of its variance.

**Two rounds** (:mod:`dpkit_ldp.graph_triangles`): T̂ = Σ_i ŵ_i/(p₁ − p₀), and the W-term of its
variance, Σ_{j<k} W_jk² p_{a_jk}(1 − p_{a_jk}), is estimated unbiasedly from the round-1
reports: with L the debiased strict lower triangle of the noisy graph, Ŵ = LᵀL estimates
W_jk (users i > k holding j and k), Ŵ_jk² − ((L∘L)ᵀ(L∘L))_jk + Ŵ_jk estimates W_jk², and
â_jk times that estimates a_jk W_jk² (the pair (j, k) is not among (i, j), (i, k)). This
assumes no user has more than D lower neighbours (then P_i is the whole lower list), and is
computed up to :data:`DENSE_TRIANGLES` nodes: it takes the dense n×n debiased graph and O(n³)
time, and its own standard deviation grows like n²·v₀² (every pair j < k adds a noisy Ŵ_jk²,
true wedge or not), so beyond a few thousand nodes it is both too slow and far noisier than the
variance it estimates. Above that size the W-term is *bounded* instead, from public quantities
(:func:`wedge_term_bound`; ``variance_kind="bound"``): when every node has at most D
neighbours, W_jk ≤ min(D, n − 2) (the users counted are common neighbours of j and k), so

    Σ_{j<k} W_jk² p_{a_jk}(1 − p_{a_jk}) ≤ π·min(D, n − 2)·Σ_i C(min(D, i), 2),

π = max(p₀(1 − p₀), p₁(1 − p₁)) and Σ_{j<k} W_jk ≤ Σ_i C(min(D, i), 2) the wedges users can
hold (user i has at most min(D, i) lower neighbours). The round-2 noise term is known, and
usually the larger one.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    DegreeHistogram,
    EdgeCounts,
    GraphEstimate,
    GraphEstimator,
    InvalidData,
    InvalidParameter,
    ReportSums,
    array_library,
    as_array,
)
from dpkit_ldp.graph_reports import AdjacencyReports
from dpkit_ldp.graph_triangles import TwoRoundReports

__all__ = [
    "DENSE_TRIANGLES",
    "AdjacencyEstimator",
    "CountEstimator",
    "TwoRoundEstimator",
    "triangle_variance",
    "wedge_term_bound",
    "wedge_term_estimate",
]

#: Largest n for which the dense n×n computations of the triangle estimators run.
DENSE_TRIANGLES = 4096


def _unwrap(reports: Any) -> Any:
    """A report object that went through ``numpy.asarray`` (chunk iterators do that)."""
    if isinstance(reports, np.ndarray) and reports.dtype == object and reports.ndim == 0:
        return reports[()]
    return reports


def _check_reports(mechanism: Any, reports: Any) -> AdjacencyReports:
    reports = _unwrap(reports)
    if not isinstance(reports, AdjacencyReports):
        raise InvalidData(
            f"{mechanism.name}: reports must be AdjacencyReports (from randomize_graph or "
            f"AdjacencyReports.from_dense), got {type(reports).__name__}",
            field="reports",
        )
    if (reports.mechanism, reports.nodes, reports.pairs) != (
        mechanism.name,
        mechanism.nodes,
        mechanism.pairs,
    ):
        raise InvalidData(
            f"reports of {reports.mechanism!r} on {reports.nodes} nodes ({reports.pairs!r}) do "
            f"not fit {mechanism.name!r} on {mechanism.nodes} nodes ({mechanism.pairs!r})",
            field="reports",
        )
    return reports


def _channel_variances(mechanism: Any) -> tuple[float, float, float]:
    """(p₁ − p₀, v₀, v₁): the debiasing gap and Var[â_e] for a pair without and with an edge."""
    p1, p0 = mechanism.channel
    r = mechanism.reports_per_pair
    gap = p1 - p0
    return gap, p0 * (1 - p0) / (r * gap * gap), p1 * (1 - p1) / (r * gap * gap)


class AdjacencyEstimator(GraphEstimator):
    """Edges, degrees and one-round triangles from ``graph_rr``/``graph_arr`` reports."""

    graph_statistics: ClassVar[tuple[str, ...]] = ("edges", "degrees", "triangles")
    mechanism: Any

    def accumulate(self, reports: Any, /) -> EdgeCounts:
        checked = _check_reports(self.mechanism, reports)
        return EdgeCounts(self.mechanism.name, checked.ones(), checked.bits, checked.count)

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> GraphEstimate:
        self.check_method(method)
        return self._edges(statistics)

    def graph_estimate(self, statistic: str, reports: Any, /, **options: Any) -> GraphEstimate:
        if options:
            raise InvalidParameter("options", options, "none", owner=self.mechanism.name)
        if statistic == "edges":
            return self._edges(
                reports if isinstance(reports, EdgeCounts) else self.accumulate(reports)
            )
        checked = _check_reports(self.mechanism, reports)
        if statistic == "degrees":
            return self._degrees(checked)
        return self._triangles(checked)

    def _edges(self, statistics: Any) -> GraphEstimate:
        m = self.mechanism
        if not isinstance(statistics, EdgeCounts) or statistics.mechanism != m.name:
            raise InvalidData(f"expected EdgeCounts of {m.name!r}", field="statistics")
        pairs = m.nodes * (m.nodes - 1) // 2
        r = m.reports_per_pair
        if statistics.bits != r * pairs:
            raise InvalidData(
                f"{m.name}: the edge count needs every user's reports ({r * pairs} bits); "
                f"these hold {statistics.bits} (merge the chunks first)",
                field="reports",
            )
        gap, v0, v1 = _channel_variances(m)
        edges = (statistics.ones - statistics.bits * m.report_zero) / (r * gap)
        exact = math.isclose(v0, v1, rel_tol=1e-12)
        variance = pairs * v0 + (0.0 if exact else edges * (v1 - v0))
        return GraphEstimate(
            "edges",
            m.name,
            edges,
            max(variance, 0.0),
            m.nodes,
            variance_kind="exact" if exact else "unbiased",
        )

    def _degrees(self, reports: AdjacencyReports) -> GraphEstimate:
        m = self.mechanism
        gap, v0, v1 = _channel_variances(m)
        r = m.reports_per_pair
        sums = reports.pair_count_sums().astype(np.float64)
        estimates = (sums - r * (m.nodes - 1) * m.report_zero) / (r * gap)
        exact = math.isclose(v0, v1, rel_tol=1e-12)
        variance = (m.nodes - 1) * v0 + (0.0 if exact else estimates * (v1 - v0))
        return GraphEstimate(
            "degrees",
            m.name,
            estimates,
            np.maximum(np.broadcast_to(variance, estimates.shape), 0.0),
            m.nodes,
            variance_kind="exact" if exact else "unbiased",
            labels=tuple(range(m.nodes)),
        )

    def debiased(self, reports: AdjacencyReports) -> NDArray[np.float64]:
        """Â: the symmetric n×n matrix of the â_e, zero diagonal (dense; n ≤ 4096)."""
        m = self.mechanism
        if m.nodes > DENSE_TRIANGLES:
            raise InvalidData(
                f"{m.name}: one-round triangle counting takes the dense {m.nodes}×{m.nodes} "
                f"noisy graph and O(n³) time; n is limited to {DENSE_TRIANGLES} (use the "
                "two-round protocol, graph_triangles)",
                field="reports",
            )
        gap, _, _ = _channel_variances(m)
        r = m.reports_per_pair
        counts = reports.pair_counts().astype(np.float64)
        a: NDArray[np.float64] = (counts / r - m.report_zero) / gap
        np.fill_diagonal(a, 0.0)
        return a

    def _triangles(self, reports: AdjacencyReports) -> GraphEstimate:
        m = self.mechanism
        a = self.debiased(reports)
        _, v0, v1 = _channel_variances(m)
        a2 = a @ a
        triangles = float(np.einsum("ij,ij->", a2, a)) / 6.0
        variance = triangle_variance(a, v0, v1, a2=a2)
        return GraphEstimate(
            "triangles",
            m.name,
            triangles,
            max(variance, 0.0),
            m.nodes,
            variance_kind="unbiased",
            note="one round: the product of the debiased bits over every triple",
        )


def triangle_variance(
    a: NDArray[np.float64], v0: float, v1: float, *, a2: NDArray[np.float64] | None = None
) -> float:
    """The unbiased estimate of Var T̂ from the debiased noisy graph Â (module docstring),
    before it is floored at 0."""
    n = a.shape[0]
    if a2 is None:
        a2 = a @ a
    triangles = float(np.einsum("ij,ij->", a2, a)) / 6.0
    degree = a.sum(axis=1)
    squares = a * a
    s1 = (n - 2) * float(a.sum()) / 2.0
    s2 = float(np.sum(degree**2 - squares.sum(axis=1))) / 2.0
    s3 = triangles
    n3, n2, n1 = s3, s2 - 3 * s3, s1 - 2 * s2 + 3 * s3
    n0 = math.comb(n, 3) - s1 + s2 - s3
    base = sum(count * (1 + v1) ** t * v0 ** (3 - t) for t, count in enumerate((n0, n1, n2, n3)))
    q = squares @ squares
    shared = a2 * a2 - q  # Σ_{x≠y} â_ux â_wx â_uy â_wy for u ≠ w
    np.fill_diagonal(shared, 0.0)
    pairs_term = v0 * float(shared.sum()) / 2.0 + (v1 - v0) * float(np.sum(a * shared)) / 2.0
    return float(base - n3 + pairs_term)


class CountEstimator(GraphEstimator):
    """Degrees, the degree distribution and edges (``graph_degree``), or k-stars
    (``graph_kstar``), from noisy per-user counts."""

    #: An accelerator's releases (``randomize_graph`` or ``randomize`` there) are read by one
    #: copy of the n integers to the host.
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: Any

    @property
    def graph_statistics(self) -> tuple[str, ...]:  # type: ignore[override]
        if self.mechanism.name == "graph_kstar":
            return ("kstars",)
        return ("degree_distribution", "degrees", "edges")

    def _values(self, reports: Any) -> NDArray[np.int64]:
        refusal = InvalidData(
            f"{self.mechanism.name}: reports must be a 1-D integer array, one per user",
            field="reports",
        )
        library = array_library(reports, owner=self.mechanism.name, field="reports")
        if library is not None:  # another library's array: the n releases copied to numpy
            xp = library.xp
            if reports.ndim != 1 or not xp.isdtype(reports.dtype, "integral"):
                raise refusal
            return library.small_to_host(xp.astype(reports, xp.int64))
        array = as_array(reports, owner=self.mechanism.name, field="reports")
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise refusal
        return array.astype(np.int64)

    def accumulate(self, reports: Any, /) -> Any:
        values = self._values(reports)
        m = self.mechanism
        if m.name == "graph_kstar":
            return ReportSums(m.name, float(values.sum()), values.size)
        window = np.clip(values + 1, 0, m.nodes + 1)
        inside = (values >= -1) & (values <= m.nodes)
        counts = np.bincount(window[inside], minlength=m.nodes + 2)
        return DegreeHistogram(m.name, -1, counts, values.size)

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> GraphEstimate:
        self.check_method(method)
        if self.mechanism.name == "graph_kstar":
            return self._kstars(statistics)
        return self._distribution(statistics)

    def graph_estimate(self, statistic: str, reports: Any, /, **options: Any) -> GraphEstimate:
        m = self.mechanism
        k = options.pop("k", None)
        if options:
            raise InvalidParameter("options", options, "none", owner=m.name)
        if statistic == "kstars":
            if k is not None and k != m.k:
                raise InvalidParameter("k", k, f"the mechanism's k = {m.k}", owner=m.name)
            stats = reports if isinstance(reports, ReportSums) else self.accumulate(reports)
            return self._kstars(stats)
        if statistic == "degree_distribution":
            stats = reports if isinstance(reports, DegreeHistogram) else self.accumulate(reports)
            return self._distribution(stats)
        values = self._values(reports)
        self._check_count(values.size)
        if statistic == "degrees":
            return GraphEstimate(
                "degrees",
                m.name,
                values,
                np.full(values.shape, m.noise_variance),
                m.nodes,
                labels=tuple(range(m.nodes)),
            )
        return GraphEstimate(
            "edges", m.name, values.sum() / 2.0, m.nodes * m.noise_variance / 4.0, m.nodes
        )

    def _check_count(self, n: int) -> None:
        if n != self.mechanism.nodes:
            raise InvalidData(
                f"{self.mechanism.name}: expected one report from each of the "
                f"{self.mechanism.nodes} users, got {n}",
                field="reports",
            )

    def _kstars(self, statistics: Any) -> GraphEstimate:
        m = self.mechanism
        if not isinstance(statistics, ReportSums) or statistics.mechanism != m.name:
            raise InvalidData(f"expected ReportSums of {m.name!r}", field="statistics")
        self._check_count(statistics.n)
        return GraphEstimate(
            "kstars",
            m.name,
            statistics.total,
            m.nodes * m.noise_variance,
            m.nodes,
            note=f"{m.k}-stars; unbiased when no degree exceeds max_degree = {m.max_degree}",
        )

    def _distribution(self, statistics: Any) -> GraphEstimate:
        m = self.mechanism
        if not isinstance(statistics, DegreeHistogram) or statistics.mechanism != m.name:
            raise InvalidData(f"expected a DegreeHistogram of {m.name!r}", field="statistics")
        self._check_count(statistics.n)
        alpha = math.exp(-1.0 / float(m.scale))
        w0 = (1 + alpha * alpha) / (1 - alpha) ** 2
        w1 = -alpha / (1 - alpha) ** 2
        h = statistics.counts.astype(np.float64)  # h[v] counts noisy degree v − 1
        middle, sides = h[1:-1], h[:-2] + h[2:]
        estimates = w0 * middle + w1 * sides
        variance = w0 * w0 * middle + w1 * w1 * sides - estimates
        return GraphEstimate(
            "degree_distribution",
            m.name,
            estimates,
            np.maximum(variance, 0.0),
            m.nodes,
            variance_kind="unbiased",
            labels=tuple(range(m.nodes)),
        )


class TwoRoundEstimator(GraphEstimator):
    """Triangles from the two-round protocol's reports."""

    graph_statistics: ClassVar[tuple[str, ...]] = ("triangles",)
    #: An accelerator's releases, bare or in TwoRoundReports, are summed there.
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: Any  # a TwoRoundTriangles protocol

    def accumulate(self, reports: Any, /) -> ReportSums:
        reports = _unwrap(reports)
        values = reports.second if isinstance(reports, TwoRoundReports) else reports
        refusal = InvalidData(
            f"{self.mechanism.name}: round-2 reports must be a 1-D array, one per user",
            field="reports",
        )
        library = array_library(values, owner=self.mechanism.name, field="reports")
        # Releases held on an accelerator are summed there: multiples of the lattice step g,
        # so every partial sum is exact (in any order) while below 2⁵³·g — the host's sum.
        if library is not None and not library.on_host:
            xp = library.xp
            if values.ndim != 1 or not xp.isdtype(values.dtype, ("integral", "real floating")):
                raise refusal
            total = library.small_to_host(xp.sum(xp.astype(values, xp.float64)))
            return ReportSums(self.mechanism.name, float(total), int(values.shape[0]))
        array = as_array(values, owner=self.mechanism.name, field="reports")
        if array.ndim != 1 or array.dtype.kind not in "iuf":
            raise refusal
        floats = np.asarray(array, dtype=np.float64)
        return ReportSums(self.mechanism.name, float(np.sum(floats)), floats.size)

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> GraphEstimate:
        self.check_method(method)
        return self._triangles(statistics, None)

    def graph_estimate(self, statistic: str, reports: Any, /, **options: Any) -> GraphEstimate:
        if options:
            raise InvalidParameter("options", options, "none", owner=self.mechanism.name)
        first = reports.first if isinstance(reports, TwoRoundReports) else None
        stats = reports if isinstance(reports, ReportSums) else self.accumulate(reports)
        return self._triangles(stats, first)

    def _triangles(self, statistics: Any, first: AdjacencyReports | None) -> GraphEstimate:
        p = self.mechanism
        if not isinstance(statistics, ReportSums) or statistics.mechanism != p.name:
            raise InvalidData(f"expected ReportSums of {p.name!r}", field="statistics")
        if statistics.n != p.nodes:
            raise InvalidData(
                f"{p.name}: expected one round-2 report from each of the {p.nodes} users, "
                f"got {statistics.n}",
                field="reports",
            )
        mechanism = p.first_mechanism
        p1, p0 = mechanism.channel
        gap = p1 - p0
        estimate = statistics.total / gap
        noise = p.nodes * p.noise_variance
        note = f"unbiased when no user has more than max_degree = {p.max_degree} lower neighbours"
        kind = "unbiased"
        if p.nodes > DENSE_TRIANGLES:
            wedge = wedge_term_bound(mechanism, p.nodes, p.max_degree)
            kind = "bound"
            note += (
                f"; the variance is an upper bound for n > {DENSE_TRIANGLES}, valid when no node"
                f" has more than {p.max_degree} neighbours"
            )
        elif first is not None:
            wedge = wedge_term_estimate(mechanism, first)
        else:
            wedge = math.nan
            note += "; the variance needs the round-1 reports (pass TwoRoundReports)"
        variance = (max(wedge, 0.0) + noise) / (gap * gap)
        return GraphEstimate(
            "triangles",
            p.name,
            estimate,
            variance,
            p.nodes,
            variance_kind=kind,
            note=note,
        )


def wedge_term_bound(mechanism: Any, nodes: int, max_degree: int) -> float:
    """An upper bound on Σ_{j<k} W_jk² p_{a_jk}(1 − p_{a_jk}) for graphs whose every node has at
    most ``max_degree`` neighbours (module docstring)."""
    p1, p0 = mechanism.channel
    spread = max(p0 * (1 - p0), p1 * (1 - p1))
    d = max_degree
    # Σ_{i<n} C(min(d, i), 2): users 0 .. d − 1 hold C(i, 2) wedges at most, the rest C(d, 2).
    full = max(nodes - d, 0)
    wedges = math.comb(min(d, nodes), 3) + full * math.comb(d, 2)
    return float(spread * min(d, nodes - 2) * wedges)


def wedge_term_estimate(mechanism: Any, first: AdjacencyReports) -> float:
    """An unbiased estimate of Σ_{j<k} W_jk² p_{a_jk}(1 − p_{a_jk}) (module docstring)."""
    p1, p0 = mechanism.channel
    gap = p1 - p0
    counts = first.pair_counts().astype(np.float64)
    a = (counts - p0) / gap
    lower = np.tril(a, -1)
    w = lower.T @ lower
    squares = lower * lower
    q = squares.T @ squares
    w2 = w * w - q + w
    upper = np.triu_indices(mechanism.nodes, 1)  # j < k
    base, slope = p0 * (1 - p0), p1 * (1 - p1) - p0 * (1 - p0)
    return float(np.sum((base + slope * a[upper]) * w2[upper]))

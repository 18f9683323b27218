"""Statistics of a graph from its users' local reports: estimates with variance and intervals.

The graph mechanisms (``graph_rr``, ``graph_arr``, ``graph_degree``, ``graph_kstar`` and the
two-round triangle protocol of the ``dpkit_ldp`` plugin) each perturb what one node knows —
its neighbour list, its degree, its number of k-stars — under edge local DP. This module is
where their reports become answers about the true graph:

>>> import numpy as np, dpkit
>>> rr = dpkit.mechanism("graph_rr", epsilon=2.0, nodes=4)
>>> path = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
>>> reports = rr.randomize_graph(path, rng=np.random.default_rng(3))
>>> dpkit.graph.edge_count(rr, reports).statistic
'edges'

Each function asks the mechanism's registered estimator (a :class:`GraphEstimator`) for one
statistic; a mechanism whose reports cannot answer it is refused with a typed error that says
which statistics they can answer. Every answer is a :class:`GraphEstimate`: the estimate, its
variance (exact when it does not depend on the graph, else an unbiased estimate of it, and
said so), whether the estimate is unbiased and under which assumption, and a normal interval.

Where the statistic is a sum over users, the reports reduce to small mergeable sufficient
statistics — :class:`EdgeCounts`, :class:`DegreeHistogram`, :class:`ReportSums` — that add up
chunk by chunk (:func:`dpkit.accumulate`, Dask, Parquet). Triangles from one round of noisy
adjacency are a cubic function of the whole noisy graph: they need every user's reports at
once.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.estimator import Estimator, Statistics

if TYPE_CHECKING:
    from typing_extensions import Self

    from dpkit.registry import Registry

__all__ = [
    "STATISTICS",
    "DegreeHistogram",
    "EdgeCounts",
    "GraphEstimate",
    "GraphEstimator",
    "GraphRelease",
    "ReportSums",
    "TriangleAdvice",
    "advise_triangles",
    "clustering",
    "degree_distribution",
    "degrees",
    "edge_count",
    "kstars",
    "triangles",
]

#: The graph statistics, by the name estimators declare them under.
STATISTICS = ("edges", "degrees", "degree_distribution", "triangles", "kstars")

_VARIANCE_KINDS = ("exact", "unbiased", "delta", "bound")


def _float_array(values: Any) -> NDArray[np.float64]:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def _int_vector(values: Any) -> NDArray[np.int64]:
    array = np.array(values, dtype=np.int64)
    array.setflags(write=False)
    return array


def _kind(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if value not in _VARIANCE_KINDS:
        raise InvalidParameter(field.name, value, "one of " + ", ".join(_VARIANCE_KINDS))


@attrs.frozen(eq=False)
class GraphEstimate:
    """An estimate of a graph statistic, with its variance.

    Attributes:
        statistic: ``"edges"``, ``"degrees"`` (one estimate per node), ``"degree_distribution"``
            (the number of nodes of each degree 0 .. n − 1), ``"triangles"``, ``"kstars"`` or
            ``"clustering"``.
        estimates: the estimate — a 0-d array for a single number (:attr:`value`), else one
            entry per node or per degree.
        variance: the variance of the estimate, same shape. ``variance_kind`` says what it is:
            ``"exact"`` (a known constant: the noise alone decides it), ``"unbiased"`` (an
            unbiased estimate of a variance that depends on the unknown graph, computed from
            the same reports; it can come out negative and is then floored at 0),
            ``"delta"`` (the delta method's first-order approximation, for a ratio) or
            ``"bound"`` (an upper bound from public quantities, under the assumption ``note``
            states; the interval is then conservative).
        unbiased: whether E[estimate] is the true statistic; ``note`` states any assumption
            it rests on (e.g. no node above the degree bound).
        nodes: the number of nodes n of the graph.
        labels: what the entries of a vector estimate stand for (node or degree), or None.
    """

    statistic: str
    mechanism: str
    estimates: NDArray[np.float64] = attrs.field(converter=_float_array)
    variance: NDArray[np.float64] = attrs.field(converter=_float_array)
    nodes: int
    unbiased: bool = True
    variance_kind: str = attrs.field(default="exact", validator=_kind)
    note: str = ""
    labels: tuple[Any, ...] | None = None

    @property
    def value(self) -> float:
        """The estimate of a single-number statistic."""
        if self.estimates.ndim != 0:
            raise InvalidParameter(
                "value", self.statistic, "a single-number statistic (use estimates)"
            )
        return float(self.estimates)

    @property
    def standard_error(self) -> NDArray[np.float64]:
        """√variance (the variance floored at 0)."""
        return np.sqrt(np.maximum(self.variance, 0.0))

    def confidence_interval(
        self, level: float = 0.95
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The normal (Wald) interval estimate ± z·√variance, z = Φ⁻¹((1 + level)/2).

        Asymptotic: every estimator here is a sum of many independent terms (noisy bits,
        per-user noise) or a smooth function of such sums; on a small graph, or where one
        term dominates, its coverage can differ from ``level``.
        """
        if not isinstance(level, (int, float)) or not 0.0 < level < 1.0 or math.isnan(level):
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        half = z * self.standard_error
        return self.estimates - half, self.estimates + half

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The estimate in a result document (:class:`dpkit.document.Document`), as
        ``dpkit graph --json`` shows it: the estimate, its variance and what kind it is,
        whether it is unbiased and on what assumption, and the normal interval at
        ``confidence``, with the labels of a vector's entries as ``categories``: as every
        result gives it (``confidence_interval``: level, lower, upper
        and method, which ``dpkit run`` shows as ± error) and as ``interval_<percent>``
        (``interval_95``: [lower, upper])."""
        low, high = self.confidence_interval(confidence)
        return {
            "estimate": self.estimates.tolist(),
            "variance": self.variance.tolist(),
            "variance_kind": self.variance_kind,
            "unbiased": self.unbiased,
            "note": self.note,
            # a vector's entries by what they stand for (a node, a degree), one table row each
            "categories": list(self.labels) if self.labels is not None else None,
            "confidence_interval": {
                "level": confidence,
                "lower": low.tolist(),
                "upper": high.tolist(),
                "method": f"normal approximation; variance: {self.variance_kind}",
            },
            f"interval_{confidence * 100:g}": [low.tolist(), high.tolist()],
        }


@attrs.frozen(eq=False)
class EdgeCounts(Statistics):
    """How many of ``bits`` reported adjacency bits are 1, from ``n`` users: adds up.

    >>> a = EdgeCounts(mechanism="graph_rr", ones=3, bits=10, n=5)
    >>> (a + EdgeCounts(mechanism="graph_rr", ones=1, bits=6, n=1)).ones
    4
    """

    mechanism: str
    ones: int = attrs.field(converter=int)
    bits: int = attrs.field(converter=int)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        _same(self.mechanism, other.mechanism)
        return type(self)(
            self.mechanism, self.ones + other.ones, self.bits + other.bits, self.n + other.n
        )


@attrs.frozen(eq=False)
class DegreeHistogram(Statistics):
    """How many of ``n`` noisy degrees took each value ``low``, ``low + 1``, …: adds up.

    ``counts[v]`` is the number of reports equal to ``low + v``; reports outside the window are
    counted in ``n`` only (they do not enter any estimate the window serves).
    """

    mechanism: str
    low: int = attrs.field(converter=int)
    counts: NDArray[np.int64] = attrs.field(converter=_int_vector)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        _same(self.mechanism, other.mechanism)
        if other.low != self.low or other.counts.shape != self.counts.shape:
            raise InvalidData(
                "cannot merge degree histograms over different windows", field="statistics"
            )
        return type(self)(self.mechanism, self.low, self.counts + other.counts, self.n + other.n)


@attrs.frozen(eq=False)
class ReportSums(Statistics):
    """The number ``n`` of per-user noisy values and their ``total``: adds up (float sums:
    merged in a fixed order, they differ from one pass by rounding only)."""

    mechanism: str
    total: float = attrs.field(converter=float)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        _same(self.mechanism, other.mechanism)
        return type(self)(self.mechanism, self.total + other.total, self.n + other.n)


def _same(a: str, b: str) -> None:
    if a != b:
        raise InvalidData(
            f"cannot merge statistics of {b!r} into those of {a!r}", field="statistics"
        )


class GraphEstimator(Estimator):
    """An estimator whose reports answer graph statistics.

    ``graph_statistics`` lists the names (of :data:`STATISTICS`) it answers;
    :meth:`graph_estimate` answers one. :meth:`Estimator.estimate` answers the first of them,
    so :func:`dpkit.estimate` works on graph reports too.
    """

    graph_statistics: ClassVar[tuple[str, ...]] = ()

    def graph_estimate(self, statistic: str, reports: Any, /, **options: Any) -> GraphEstimate:
        raise NotImplementedError


def _estimator(mechanism: Any, registry: Registry | None) -> Any:
    from dpkit.registry import get_registry

    return (registry or get_registry()).estimator(mechanism)


def _estimate(
    statistic: str, mechanism: Any, reports: Any, registry: Registry | None, **options: Any
) -> GraphEstimate:
    estimator = _estimator(mechanism, registry)
    supported = tuple(getattr(estimator, "graph_statistics", ()))
    if statistic not in supported:
        allowed = ("one of " + ", ".join(supported)) if supported else "none: not a graph mechanism"
        raise InvalidParameter(
            "statistic",
            statistic,
            f"a statistic its reports answer ({allowed})",
            owner=str(getattr(mechanism, "name", mechanism)),
        )
    result: GraphEstimate = estimator.graph_estimate(statistic, reports, **options)
    return result


def edge_count(
    mechanism: Any, reports: Any, /, *, registry: Registry | None = None
) -> GraphEstimate:
    """The number of edges, from noisy adjacency (``graph_rr``, ``graph_arr``) or noisy
    degrees (``graph_degree``: half their sum)."""
    return _estimate("edges", mechanism, reports, registry)


def degrees(mechanism: Any, reports: Any, /, *, registry: Registry | None = None) -> GraphEstimate:
    """Every node's degree (the degree sequence), one estimate per node."""
    return _estimate("degrees", mechanism, reports, registry)


def degree_distribution(
    mechanism: Any, reports: Any, /, *, registry: Registry | None = None
) -> GraphEstimate:
    """The number of nodes of each degree 0 .. n − 1 (from ``graph_degree`` reports)."""
    return _estimate("degree_distribution", mechanism, reports, registry)


def triangles(
    mechanism: Any, reports: Any, /, *, registry: Registry | None = None
) -> GraphEstimate:
    """The number of triangles: one round (noisy adjacency) or two rounds (the two-round
    protocol's reports)."""
    return _estimate("triangles", mechanism, reports, registry)


def kstars(
    mechanism: Any, reports: Any, /, *, k: int | None = None, registry: Registry | None = None
) -> GraphEstimate:
    """The number of k-stars Σ_i C(d_i, k) (from ``graph_kstar`` reports, whose k it is, or
    k = 2 from noisy adjacency)."""
    options = {} if k is None else {"k": k}
    return _estimate("kstars", mechanism, reports, registry, **options)


def clustering(triangles: GraphEstimate, two_stars: GraphEstimate, /) -> GraphEstimate:
    """The global clustering coefficient C = 3·T / S₂ from independent estimates of the
    triangles T and the 2-stars S₂.

    Imola, Murakami & Chaudhuri 2021, Section 5.4 (their estimate of C from the two-round
    triangles and the 2-stars, each on its own share of the budget). A ratio of unbiased
    estimates is *not* unbiased; its variance is the delta method's
    C²·(Var T/T² + Var S₂/S₂²), which holds when the two come from independent releases
    (their noise independent) and both relative errors are small.
    """
    for value, what, name in (
        (triangles, "triangles", "triangles"),
        (two_stars, "kstars", "two_stars"),
    ):
        if not isinstance(value, GraphEstimate) or value.statistic != what or value.estimates.ndim:
            raise InvalidParameter(name, value, f"a single-number GraphEstimate of {what}")
    t, s = triangles.value, two_stars.value
    if s == 0.0:
        raise InvalidData("the 2-star estimate is 0: the ratio is undefined", field="two_stars")
    c = 3.0 * t / s
    # ∂C/∂T = 3/S₂ and ∂C/∂S₂ = −3T/S₂²; the two estimates are independent.
    variance = (3.0 / s) ** 2 * float(triangles.variance) + (3.0 * t / (s * s)) ** 2 * float(
        two_stars.variance
    )
    return GraphEstimate(
        "clustering",
        f"{triangles.mechanism}+{two_stars.mechanism}",
        c,
        variance,
        triangles.nodes,
        unbiased=False,
        variance_kind="delta",
        note="a ratio of independent unbiased estimates: consistent, not unbiased",
    )


@attrs.frozen
class TriangleAdvice:
    """One round or two for a triangle count, from public quantities alone.

    ``one_round_sd`` is a *lower* bound on the standard deviation of one-round randomized
    response at ε (every triple contributes at least v³ to its variance, v = e^ε/(e^ε − 1)²;
    the bound is exact for the empty graph). ``two_round_sd`` is an *upper* bound for the
    two-round protocol at the best split ε₁ + ε₂ = ε (``split`` = ε₁/ε), valid for every graph
    whose degrees are at most ``max_degree``: Σ_{j<k} W_jk² ≤ D·Σ W_jk ≤ D·n·C(D, 2) (a pair
    has at most D common higher neighbours, a user at most C(D, 2) wedges), each noisy bit's
    variance ≤ 1/4, and the round-2 noise 2(D − 1)²/ε₂² per user (continuous Laplace's; the
    protocol's lattice noise is within a relative 2⁻³⁰ of it). Two rounds are ``best`` when
    their upper bound is below the one-round lower bound — then they win on every such graph —
    and one round otherwise (which then need not win: the bounds overlap).
    """

    nodes: int
    epsilon: float
    max_degree: int
    best: str
    one_round_sd: float
    two_round_sd: float
    split: float
    target: float | None = None
    reaches_target: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _two_round_bound(nodes: int, max_degree: int, eps1: float, eps2: float) -> float:
    gap = math.tanh(eps1 / 2.0)  # p₁ − p₀ of randomized response at ε₁
    wedges = max_degree * nodes * math.comb(max_degree, 2) * 0.25
    noise = nodes * 2.0 * (max_degree - 1) ** 2 / eps2**2
    return math.sqrt((wedges + noise) / (gap * gap))


def advise_triangles(
    nodes: int, epsilon: float, max_degree: int, /, *, target: float | None = None
) -> TriangleAdvice:
    """Choose between one- and two-round triangle counting for a graph of ``nodes`` nodes,
    degrees at most ``max_degree`` and a budget ε per edge (:class:`TriangleAdvice`);
    ``target`` is a standard deviation to reach (in triangles)."""
    from dpkit.params import EPSILON, Integer, Real

    for name, value, domain in (
        ("nodes", nodes, Integer(low=3)),
        ("epsilon", epsilon, EPSILON),
        ("max_degree", max_degree, Integer(low=2)),
    ):
        try:
            domain.convert(value)
        except (ValueError, TypeError, OverflowError):
            raise InvalidParameter(
                name, value, domain.describe(), owner="advise_triangles"
            ) from None
    if target is not None:
        try:
            Real(low=0.0, low_open=True).convert(target)
        except (ValueError, TypeError):
            raise InvalidParameter(
                "target", target, "a number > 0", owner="advise_triangles"
            ) from None
    v = math.exp(epsilon) / math.expm1(epsilon) ** 2
    one = math.sqrt(math.comb(nodes, 3)) * v**1.5
    splits = [i / 100 for i in range(5, 96)]
    bounds = [_two_round_bound(nodes, max_degree, s * epsilon, (1 - s) * epsilon) for s in splits]
    best_index = min(range(len(splits)), key=bounds.__getitem__)
    two, split = bounds[best_index], splits[best_index]
    best = "two_round" if two < one else "one_round"
    reaches = None
    if target is not None:
        reaches = two <= target if best == "two_round" else None
    return TriangleAdvice(nodes, epsilon, max_degree, best, one, two, split, target, reaches)


@attrs.frozen
class GraphRelease:
    """A graph mechanism run by every node of a graph, as one session query charged per edge.

    ``privacy`` is the mechanism's ``relationship_privacy`` (what one edge of the graph costs:
    ε when each edge is reported once, 2ε when both endpoints report it or both degrees move);
    ``run(graph, /, *, rng)`` returns every node's reports (``mechanism.randomize_graph``),
    which :func:`edge_count`, :func:`triangles`, … then turn into estimates without further
    cost (post-processing). With ``edge_list=True`` the data are an (m, 2) array of edges of
    the mechanism's ``nodes``-node graph.
    """

    mechanism: Any
    edge_list: bool = False

    @property
    def name(self) -> str:
        return str(self.mechanism.name)

    @property
    def privacy(self) -> Any:
        return self.mechanism.relationship_privacy

    def run(self, data: Any, /, *, rng: Any = None) -> Any:
        if self.edge_list:
            return self.mechanism.randomize_graph(data, rng=rng, nodes=self.mechanism.nodes)
        return self.mechanism.randomize_graph(data, rng=rng)

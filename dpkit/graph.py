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

For graph learning, :func:`propagate` (KProp) and :func:`label_distribution` (with
:func:`denoised_labels`, Drop's labels) denoise what each node reported about itself — its
features, its label — by averaging over the graph, again as a :class:`GraphEstimate` with its
variance. That is post-processing, at no extra privacy cost: the server knows the graph (the
edges are public); only each node's features and label are private, each protected by that
node's own LDP report (node-level LDP).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit._propagation import MeanOperator, mean_operator
from dpkit.arrays import as_array, describe_dtype
from dpkit.errors import InvalidData, InvalidParameter
from dpkit.estimator import Estimator, FrequencyCounts, Statistics
from dpkit.tensors.categories import check_categories
from dpkit.tensors.device_random import index_dtype, require_64_bit
from dpkit.tensors.libraries import ArrayLibrary, array_library

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
    "denoised_labels",
    "edge_count",
    "kstars",
    "label_distribution",
    "propagate",
    "triangles",
]

#: The graph statistics, by the name estimators declare them under.
STATISTICS = ("edges", "degrees", "degree_distribution", "triangles", "kstars")

_VARIANCE_KINDS = ("exact", "unbiased", "delta", "bound")


def _float_array(values: Any) -> Any:
    """A read-only float64 numpy array; an array of another library (:func:`propagate` on a
    tensor) stays that library's, on its device, as float64."""
    library = _library_of(values)
    if library is not None:
        return library.xp.astype(values, library.xp.float64)
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def _library_of(values: Any) -> ArrayLibrary | None:
    if isinstance(values, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        return None
    return array_library(values, owner="GraphEstimate")


def _host_list(values: Any) -> Any:
    """An estimate's entries as Python numbers (a device array's copied to the host)."""
    library = _library_of(values)
    return (values if library is None else library.small_to_host(values)).tolist()


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
            (the number of nodes of each degree 0 .. n − 1), ``"triangles"``, ``"kstars"``,
            ``"clustering"``, ``"propagated"`` (:func:`propagate`: one row per node) or
            ``"label_distribution"`` (:func:`label_distribution`: one row per node, one column
            per category).
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
        labels: what the entries of a vector estimate stand for (node or degree; for a
            label distribution, its columns' categories), or None.
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
        """√variance (the variance floored at 0), of the variance's array type."""
        library = _library_of(self.variance)
        if library is not None:
            xp = library.xp
            return xp.sqrt(xp.where(self.variance > 0.0, self.variance, 0.0))  # type: ignore[no-any-return]
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
        low, high = _host_list(low), _host_list(high)
        return {
            "estimate": _host_list(self.estimates),
            "variance": _host_list(self.variance),
            "variance_kind": self.variance_kind,
            "unbiased": self.unbiased,
            "note": self.note,
            # a vector's entries by what they stand for (a node, a degree), one table row each
            "categories": list(self.labels) if self.labels is not None else None,
            "confidence_interval": {
                "level": confidence,
                "lower": low,
                "upper": high,
                "method": f"normal approximation; variance: {self.variance_kind}",
            },
            f"interval_{confidence * 100:g}": [low, high],
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


# Propagation over the public graph: KProp and label denoising.


def _check_propagation(owner: str, steps: Any, self_loops: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InvalidParameter("steps", steps, "a whole number >= 0", owner=owner)
    if not isinstance(self_loops, (bool, np.bool_)):
        raise InvalidParameter("self_loops", self_loops, "True or False", owner=owner)
    return int(steps)


def _host(value: Any, *, owner: str, field: str) -> Any:
    """A host tensor as a numpy view; a tensor on an accelerator is refused (decided from its
    type and device, never from a value)."""
    library = array_library(value, owner=owner, field=field)
    if library is None:
        return value
    if not library.on_host:
        raise InvalidData(
            f"{owner}: {field} is a {library.name} array on {library.device}, and {owner} "
            "takes host arrays here (propagate computes on a device when its values live "
            "there): move it to the host first (tensor.cpu())",
            field=field,
        )
    return library.host_view(value)


def _real_rows(value: Any, *, owner: str, field: str) -> NDArray[np.float64]:
    array = as_array(_host(value, owner=owner, field=field), owner=owner, field=field)
    if array.dtype.kind not in "biuf":
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got {describe_dtype(array)}", field=field
        )
    floats = array.astype(np.float64)
    if not np.all(np.isfinite(floats)):
        raise InvalidData(f"{owner}: {field} must be finite (no NaN or infinity)", field=field)
    return floats


def _check_rows(shape: tuple[int, ...]) -> None:
    if len(shape) not in (1, 2) or shape[0] == 0:
        raise InvalidData(
            f"propagate: values must have one row per node, shape (n,) or (n, d) with n >= 1; "
            f"got shape {shape}",
            field="values",
        )


def _check_variance_shape(shape: tuple[int, ...], values: tuple[int, ...]) -> None:
    n = values[0]
    if shape not in ((), (n,), values):
        raise InvalidData(
            f"propagate: variance must be a number, one per node (shape ({n},)) or one per "
            f"value (shape {values}); got shape {shape}",
            field="variance",
        )


def _negative_variance() -> InvalidData:
    return InvalidData("propagate: variance must be >= 0", field="variance")


def _device_reals(library: ArrayLibrary, array: Any, field: str) -> None:
    if not library.xp.isdtype(array.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"propagate: {field} must be real numbers, got a {library.name} array of {array.dtype}",
            field=field,
        )


def _propagate_on_device(
    library: ArrayLibrary, graph: Any, values: Any, steps: int, variance: Any, *, self_loops: bool
) -> tuple[Any, Any]:
    """:func:`propagate` where the values live: the checks decidable without values (the
    library's float64, the dtypes, the shapes, the variance's device, the public graph) first,
    then the values' (finite; the variance finite and ≥ 0), then the operator on the device
    (:meth:`~dpkit._propagation.MeanOperator.device_apply`)."""
    owner = "propagate"
    xp, device = library.xp, library.device
    require_64_bit(library, owner=owner, field="values", needs="propagation computes in float64")
    _device_reals(library, values, "values")
    shape = tuple(int(size) for size in values.shape)
    _check_rows(shape)
    given = array_library(variance, owner=owner, field="variance")
    if given is None:
        host = as_array(variance, owner=owner, field="variance")
        if host.dtype.kind not in "biuf":
            raise InvalidData(
                f"{owner}: variance must be real numbers, got {describe_dtype(host)}",
                field="variance",
            )
        sigma_shape = tuple(host.shape)
    elif given.name != library.name or given.device != library.device:
        raise InvalidData(
            f"{owner}: variance is a {given.name} array on {given.device} and the values a "
            f"{library.name} array on {library.device}; give the variance on the values' device, "
            "or as a number or numpy array",
            field="variance",
        )
    else:
        _device_reals(library, variance, "variance")
        sigma_shape = tuple(int(size) for size in variance.shape)
    _check_variance_shape(sigma_shape, shape)
    operator = mean_operator(graph, shape[0], self_loops=self_loops)
    x = xp.astype(values, xp.float64)
    if not bool(xp.all(xp.isfinite(x))):
        raise InvalidData(f"{owner}: values must be finite (no NaN or infinity)", field="values")
    if given is None:
        sigma2 = xp.asarray(host.astype(np.float64), device=device)
    else:
        sigma2 = xp.astype(variance, xp.float64)
    if not bool(xp.all(xp.isfinite(sigma2))):
        raise InvalidData(
            f"{owner}: variance must be finite (no NaN or infinity)", field="variance"
        )
    if bool(xp.any(sigma2 < 0)):
        raise _negative_variance()
    if sigma_shape != shape:  # one per node (or one for all): broadcast over features
        sigma2 = xp.broadcast_to(xp.reshape(sigma2, (-1,) + (1,) * (len(shape) - 1)), shape)
    return operator.device_apply(library, x, steps), operator.device_squared_apply(
        library, sigma2, steps
    )


def propagate(
    graph: Any,
    values: Any,
    /,
    steps: int,
    *,
    variance: Any,
    self_loops: bool = True,
    variance_kind: str = "exact",
) -> GraphEstimate:
    """KProp: every node's value replaced by the mean over its neighbourhood, ``steps`` times,
    with the exact variance of the result (a :class:`GraphEstimate` of ``"propagated"``).

    Sajadmanesh & Gatica-Perez 2021, "Locally Private Graph Neural Networks" (CCS),
    Section 4.2 (KProp, the denoising layer over the nodes' rectified features):

        x_v^(k) = (1/|N(v)|) Σ_{u ∈ N(v)} x_u^(k−1),      x^(0) = the noisy values,

    the mean aggregator over N(v): with ``self_loops=True`` (the default, as the authors'
    implementation propagates features) the closed neighbourhood {v} ∪ neighbours of v, with
    ``self_loops=False`` the open one, the neighbours alone; a node without neighbours then
    keeps its value. K = ``steps`` steps are one linear map W = P^K with rows summing to 1
    (P[v, u] = 1/|N(v)|).

    **Unbiased, with exact variance.** If each x̃_u is unbiased for the true x_u (the multi-bit
    rectifier's output is) and the noise is independent across nodes (each node randomizes on
    its own), then E[x̃^(K)] = W·x — the propagation of the *true* values, which is what the
    estimate is unbiased for — and, W being linear,

        Var(x_v^(K)) = Σ_u W[v, u]² · Var(x̃_u),

    computed exactly from the rows of W. ``variance`` is Var(x̃_u): a number, one per node
    (shape (n,)) or one per value (the values' shape); ``variance_kind`` says what it is, and
    the output's is the same: ``"exact"``, ``"unbiased"`` (an unbiased estimate stays one:
    the weights W² are fixed) or ``"bound"`` (an upper bound stays one: they are ≥ 0), e.g.
    the multi-bit mechanism's ``variance_at`` the midpoint of [α, β], its largest variance.

    Post-processing, at no extra privacy cost: the server knows the graph (the edges are
    public); only each node's features and label are private, each protected by that node's
    own LDP report (node-level LDP). Propagating over *private* edges would not be
    post-processing.

    Args:
        graph: the undirected graph on the nodes 0 .. n − 1 (n = the values' rows): a tuple
            ``(sources, targets)`` of two index arrays (each pair an edge, in either or both
            orientations), compressed sparse rows (an object with ``indptr`` and ``indices``,
            such as ``dpkit_ldp.graphs.Graph`` or a SciPy CSR matrix) or a dense symmetric
            0/1 or boolean adjacency matrix. It must hold no self loop.
        values: the noisy values, shape (n,) or (n, d): a numpy array, or an array of an
            array-API library (a torch tensor, CuPy, JAX), whose type the estimates and
            variances then take, float64. A host tensor is propagated by the numpy path on a
            view of its memory; an accelerator's is propagated on its device (the graph, being
            public, is laid out on the host and copied there; ``variance`` a number, a numpy
            array or an array on the same device), with the numpy path's products and its sums
            in another order: equal to the numpy path's up to 2K·γ_m·max|x| for the
            values and 2γ_{m−1} relative for the variances (:mod:`dpkit._propagation`), about
            m·K·10⁻¹⁶ for neighbourhoods of m nodes.
        steps: K ≥ 0 (0 returns the values).

    Cost: O(K·nnz) per feature column for the values; the exact variance takes time and
    memory of the order of the number of pairs (v, u) joined by a walk of K steps, built
    4,096 rows at a time.
    """
    owner = "propagate"
    steps = _check_propagation(owner, steps, self_loops)
    if variance_kind not in ("exact", "unbiased", "bound"):
        raise InvalidParameter(
            "variance_kind", variance_kind, "'exact', 'unbiased' or 'bound'", owner=owner
        )
    library = array_library(values, owner=owner, field="values")
    if library is not None and not library.on_host:
        estimates, variances = _propagate_on_device(
            library, graph, values, steps, variance, self_loops=bool(self_loops)
        )
    else:
        x = _real_rows(values, owner=owner, field="values")
        _check_rows(tuple(x.shape))
        sigma2 = _real_rows(variance, owner=owner, field="variance")
        _check_variance_shape(tuple(sigma2.shape), tuple(x.shape))
        if np.any(sigma2 < 0):
            raise _negative_variance()
        operator = mean_operator(graph, x.shape[0], self_loops=bool(self_loops))
        if sigma2.shape != x.shape:  # one per node (or one for all): broadcast over features
            sigma2 = np.broadcast_to(sigma2.reshape((-1,) + (1,) * (x.ndim - 1)), x.shape)
        estimates = operator.apply(x, steps)
        variances = operator.squared_apply(np.ascontiguousarray(sigma2), steps)
        if library is not None:  # a host array of another library: its type back
            estimates, variances = library.from_host(estimates), library.from_host(variances)
    return GraphEstimate(
        "propagated",
        "kprop",
        estimates,
        variances,
        int(estimates.shape[0]),
        variance_kind=variance_kind,
        note=(
            f"unbiased for the {steps}-step mean propagation of the true values, given "
            "unbiased values with independent noise across nodes"
        ),
    )


def label_distribution(
    mechanism: Any,
    graph: Any,
    reports: Any,
    /,
    steps: int,
    *,
    self_loops: bool = False,
    registry: Registry | None = None,
) -> GraphEstimate:
    """For every node, the frequencies of the true labels in its K-step neighbourhood, from
    k-ary randomized response (``krr``) labels: an unbiased estimate with its variance (a
    :class:`GraphEstimate` of ``"label_distribution"``, shape (n, k), columns in the order
    of the categories).

    Sajadmanesh & Gatica-Perez 2021, Section 4.3 (Drop, label denoising with propagation):
    the one-hot noisy labels h_u = e_{ỹ_u} are propagated by KProp (:func:`propagate`;
    W = P^K, rows summing to 1), and the k-RR estimator's inverse — Wang et al. 2017
    (USENIX Security), Section 4.1 / Theorem 2, ĉ = (C − n·q)/(p − q) — is applied with n = 1:

        f̂_{v,c} = ((W h)_{v,c} − q)/(p − q),     E[f̂_{v,c}] = Σ_u W[v, u]·1[x_u = c] =: f_{v,c},

    the W-weighted share of label c around v (for K = 1 without self loops, the default — the
    authors' implementation propagates labels over the open neighbourhood, so that a node's
    estimate does not rest on its own report —, the fraction of v's neighbours with label c). The inverse is the one of the mechanism's registered
    estimator (its estimate of a single report), not re-derived here; it is affine and the
    rows of W sum to 1, so debiasing each report and then propagating is the same.

    **Variance** (exact, Wang et al. 2017, Theorem 2 for one report, summed over independent
    reports with weights W²): with (a, b) the estimator's variance model for one report,
    a = q(1 − q)/(p − q)² and b = (1 − p − q)/(p − q),

        Var f̂_{v,c} = Σ_u W[v, u]² · (a + b·1[x_u = c]).

    It depends on the unknown labels; the reported ``variance`` is its unbiased estimate, each
    indicator replaced by its unbiased estimate (the single report debiased), floored at 0 —
    as the krr estimator reports its own (``variance_kind="unbiased"``).

    Post-processing, at no extra privacy cost: the server knows the graph (the edges are
    public); only each node's features and label are private, each protected by that node's
    own LDP report (node-level LDP). ``graph``, ``steps`` and ``self_loops`` are as in
    :func:`propagate` (with the open neighbourhood by default); ``reports`` holds one krr
    report per node (category indices, or labels when the mechanism has ``categories``): a
    numpy array, or an array-API library's (a torch tensor, CuPy, JAX), whose type the
    estimates and variances then take — an accelerator's indices are propagated on its
    device, equal to the numpy path's to rounding as in :func:`propagate`.
    :func:`denoised_labels` takes the most frequent label per node.
    """
    owner = "label_distribution"
    if getattr(mechanism, "name", None) != "krr":
        raise InvalidParameter(
            "mechanism",
            getattr(mechanism, "name", mechanism),
            "a krr mechanism (k-ary randomized response: one category per node)",
            owner=owner,
        )
    steps = _check_propagation(owner, steps, self_loops)
    k = int(mechanism.size)
    # The estimator's inverse of one report of category 0: (1 − q)/(p − q) for it, −q/(p − q)
    # for the others; and its variance model (a, b) for n = 1.
    one = _estimator(mechanism, registry).estimate(
        FrequencyCounts(mechanism.name, np.eye(1, k, dtype=np.int64)[0], 1)
    )
    on, off = float(one.estimates[0]), float(one.estimates[1])
    assert one.variance_model is not None  # a pure frequency oracle's estimate has one
    a, b = one.variance_model
    library = array_library(reports, owner=owner, field="reports")
    if library is not None and not library.on_host:
        operator, onehot = _device_onehot(library, mechanism, graph, reports, bool(self_loops))
        xp, n = library.xp, operator.nodes
        frequencies = off + (on - off) * operator.device_apply(library, onehot, steps)
        ones = xp.ones((n, 1), dtype=xp.float64, device=library.device)
        squares = operator.device_squared_apply(
            library, xp.concat([ones, off + (on - off) * onehot], axis=1), steps
        )
        variance = xp.clip(a * squares[:, :1] + b * squares[:, 1:], min=0.0)
    else:
        host = library.host_view(reports) if library is not None else reports
        array = as_array(host, owner=owner, field="reports")
        _check_labels_shape(tuple(array.shape))
        indices = mechanism.encode(array, field="reports").astype(np.int64)  # k = 2: booleans
        n = int(indices.shape[0])
        operator = mean_operator(graph, n, self_loops=bool(self_loops))
        onehot = np.zeros((n, k))
        onehot[np.arange(n), indices] = 1.0
        frequencies = off + (on - off) * operator.apply(onehot, steps)
        # Σ_u W[v, u]² in the first column, Σ_u W[v, u]²·(debiased indicator of c) after it.
        squares = operator.squared_apply(
            np.hstack([np.ones((n, 1)), off + (on - off) * onehot]), steps
        )
        variance = np.maximum(a * squares[:, :1] + b * squares[:, 1:], 0.0)
        if library is not None:  # a host array of another library: its type back
            frequencies, variance = library.from_host(frequencies), library.from_host(variance)
    categories = getattr(mechanism, "categories", None)
    return GraphEstimate(
        "label_distribution",
        mechanism.name,
        frequencies,
        variance,
        n,
        variance_kind="unbiased",
        note=(
            f"unbiased for each node's label frequencies over its {steps}-step mean "
            "propagation (krr reports, independent across nodes)"
        ),
        labels=tuple(categories) if categories is not None else tuple(range(k)),
    )


def _check_labels_shape(shape: tuple[int, ...]) -> None:
    if len(shape) != 1 or shape[0] == 0:
        raise InvalidData(
            "label_distribution: reports must be one label per node, shape (n,) with n >= 1; "
            f"got shape {shape}",
            field="reports",
        )


def _device_onehot(
    library: ArrayLibrary, mechanism: Any, graph: Any, reports: Any, self_loops: bool
) -> tuple[MeanOperator, Any]:
    """The propagation operator and the reports as one-hot float64 rows on their device, after
    the checks decidable without the reports (the library's float64, category indices rather
    than labels, the shape, the public graph) and then theirs (indices in 0 … k − 1, one pass
    on the device)."""
    owner, k = "label_distribution", int(mechanism.size)
    require_64_bit(library, owner=owner, field="reports", needs="the estimates are float64")
    if getattr(mechanism, "categories", None) is not None:
        raise InvalidData(
            f"{owner}: labels are not mapped on the device; give the krr reports as category "
            "indices (mechanism.encode on the host) or as a host array",
            field="reports",
        )
    shape = tuple(int(size) for size in reports.shape)
    _check_labels_shape(shape)
    operator = mean_operator(graph, shape[0], self_loops=self_loops)
    check_categories(library, reports, k, owner=owner, field="reports")
    xp = library.xp
    indices = xp.astype(reports, index_dtype(xp))
    labels = xp.arange(k, dtype=index_dtype(xp), device=library.device)
    return operator, xp.astype(indices[:, None] == labels[None, :], xp.float64)


def denoised_labels(distribution: GraphEstimate, /) -> Any:
    """Each node's most frequent label in its estimated neighbourhood distribution (the
    category index; ``mechanism.decode`` gives the label): the label Drop trains with
    (Sajadmanesh & Gatica-Perez 2021, Section 4.3). The inverse is increasing (slope
    1/(p − q) > 0), so it is also the most frequent *noisy* label after propagation; a tie
    goes to the lowest index. int64, in the estimates' array type and on their device."""
    if not isinstance(distribution, GraphEstimate) or distribution.statistic != (
        "label_distribution"
    ):
        raise InvalidParameter(
            "distribution",
            getattr(distribution, "statistic", distribution),
            "a GraphEstimate of label_distribution",
            owner="denoised_labels",
        )
    estimates = distribution.estimates
    library = array_library(estimates, owner="denoised_labels", field="distribution")
    if library is not None:
        xp = library.xp
        return xp.astype(xp.argmax(estimates, axis=1), xp.int64)
    labels: NDArray[np.int64] = np.argmax(estimates, axis=1).astype(np.int64)
    return labels

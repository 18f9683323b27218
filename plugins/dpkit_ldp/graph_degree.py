"""Noisy degrees (``graph_degree``) and noisy k-star counts (``graph_kstar``).

**The exact audit tier.** The noise is discrete Laplace on all the integers; the mechanisms
declare as ``output_space()`` the window [c_min − K, c_max + K] around the counts a list can
have, K the least integer with P[|Z| > K] ≤ 2⁻⁴⁰ (P[|Z| > K] = 2α^{K+1}/(1 + α) ≤ 2e^{−(K+1)/t},
so K = ⌈41·t·ln 2⌉ suffices). Beyond the counts the log-ratio of two lists' laws is the
constant ±|c − c′|/t, so its largest value over the window is its largest value over all
integers: the exact tier's ε* is the exact loss, and each declared pmf sums to 1 within 2⁻⁴⁰
over the window (the graph view's, a product over the n nodes, within n·2⁻⁴⁰). The per-node
domain (:class:`~dpkit_ldp.graphs.CountedNeighbourLists`) gives the auditor one pair per
degree step, which covers every neighbouring pair of lists.
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
    CompositeDP,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PrivacyEvent,
    PureDP,
    SecureRandom,
    array_library,
    as_array,
    device_operands,
    graph_counts,
    noisy_list_counts,
    parameter,
    resolve_rng,
)
from dpkit_ldp import _graph_noise
from dpkit_ldp._adjacency import NeighbourListInput, nodes_parameter
from dpkit_ldp.graphs import CountedNeighbourLists, Graphs, as_graph

__all__ = ["CountsView", "LocalKStars", "NoisyDegree"]

#: Largest noise scale Δ/ε the exact sampler takes (2⁵⁵).
_MAX_SCALE = Fraction(1 << 55)
#: Most outputs an output window is enumerated with (the exact tier's table is larger still).
_MAX_WINDOW = 1 << 22


class _CountOfList(NeighbourListInput, Mechanism):
    """A count of a user's neighbour list, released with discrete Laplace noise.

    Subclasses give the count of each list (:meth:`count`, from the degree) and its
    sensitivity Δ; the noise scale is t = Δ/ε rounded up (:mod:`dpkit_ldp._graph_noise`).
    """

    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "graph"
    device_methods: ClassVar[frozenset[str]] = frozenset(
        {"randomize", "log_probability", "randomize_graph"}
    )

    epsilon: float
    nodes: int

    @property
    def sensitivity(self) -> int:
        raise NotImplementedError

    def count(self, degrees: NDArray[np.int64], /) -> NDArray[np.int64]:
        raise NotImplementedError

    def count_table(self) -> tuple[int, ...] | None:
        """The count of each degree 0 … D where :meth:`count` clips at D (None: the degree
        itself): what a device looks the counts up in."""
        return None

    @property
    def scale(self) -> Fraction:
        """t = Δ/ε rounded up to a multiple of 2⁻¹⁶."""
        return _graph_noise.laplace_scale(self.sensitivity, self.epsilon)

    @property
    def noise_variance(self) -> float:
        """Var of the noise, 2α/(1 − α)² with α = e^{−1/t}: the exact variance of one report."""
        return _graph_noise.noise_variance(self.scale)

    def _check_scale(self) -> None:
        if self.scale > _MAX_SCALE:
            raise InvalidParameter(
                "epsilon",
                self.epsilon,
                f"at least Δ/2⁵⁵ = {self.sensitivity / 2.0**55:.3g} (the noise scale Δ/ε "
                f"must stay below 2⁵⁵ for the exact sampler; Δ = {self.sensitivity})",
                owner=getattr(self, "name", "graph"),
            )

    @property
    def domain(self) -> CountedNeighbourLists:
        return CountedNeighbourLists(self.nodes)

    def output_window(self) -> tuple[int, int]:
        """(low, high): the integers holding all but 2⁻⁴⁰ of every list's law (module
        docstring)."""
        tail = math.ceil(41 * float(self.scale) * math.log(2))
        counts = self.count(np.array([0, self.nodes], dtype=np.int64))  # monotone in d
        low, high = int(counts.min()) - tail, int(counts.max()) + tail
        if high - low + 1 > _MAX_WINDOW:
            raise NotImplementedError(
                f"{self.name}: the output window has {high - low + 1} integers (the noise "
                "scale is too large to enumerate)"
            )
        return low, high

    def output_space(self) -> NDArray[np.int64]:
        """The output window, for the exact audit tier (module docstring)."""
        low, high = self.output_window()
        return np.arange(low, high + 1, dtype=np.int64)

    @property
    def privacy(self) -> PrivacyEvent:
        """ε-edge LDP per user."""
        return PureDP(epsilon=self.epsilon)

    @property
    def relationship_privacy(self) -> PrivacyEvent:
        """An edge is in two users' lists, and moves both their counts: 2ε per edge (Imola et
        al. 2021, Proposition 1)."""
        one = PureDP(epsilon=self.epsilon)
        return CompositeDP((one, one))

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """The noisy count of each neighour list (the last axis of ``values``, 0/1), int64. An
        accelerator's array is counted and released there (:mod:`dpkit.tensors.list_counts`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return noisy_list_counts(
                library,
                values,
                table=self.count_table(),
                scale=self.scale,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        array = as_array(values, owner=self.name)
        if array.ndim < 1 or array.dtype.kind not in "biuf":
            raise InvalidData(f"{self.name}: neighbour lists must be a 0/1 array", field="values")
        if array.size and not bool(np.all((array == 0) | (array == 1))):
            raise InvalidData(f"{self.name}: neighbour lists must hold 0 or 1", field="values")
        degrees = np.count_nonzero(array, axis=-1).astype(np.int64)
        return self._release(degrees, generator)

    def _release(self, degrees: NDArray[np.int64], generator: Any) -> NDArray[np.int64]:
        flat = self.count(degrees.reshape(-1))
        return (flat + _graph_noise.noise(self.scale, flat.size, generator)).reshape(degrees.shape)

    def randomize_graph(
        self,
        graph: Any,
        /,
        *,
        rng: np.random.Generator | SecureRandom | None = None,
        nodes: int | None = None,
    ) -> NDArray[np.int64]:
        """Every user's noisy count, computed from their degree in ``graph``.

        An accelerator's n×n adjacency matrix (``nodes``, if given, its side) is released
        there (:func:`dpkit.plugin.graph_counts`): refused as ``as_graph`` refuses it (field
        ``graph``, no value quoted; its shape and dtype, the scale and the rng before any
        entry is read), each degree a row sum, then the noise of :meth:`randomize`'s device
        path on the same words (the rows are the neighbour lists); int64 (n,) of the caller's
        type on its device, which the estimators take as they are (one integer a user comes
        back to the host).
        """
        library = array_library(graph, owner=self.name, field="graph")
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            if nodes is not None and nodes != self.nodes:
                raise InvalidData(
                    f"{self.name}: the graph has {nodes} nodes, the mechanism nodes={self.nodes}",
                    field="graph",
                )
            return graph_counts(  # type: ignore[no-any-return]
                library,
                graph,
                nodes=self.nodes,
                table=self.count_table(),
                scale=self.scale,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        g = as_graph(graph, nodes=nodes)
        if g.nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {g.nodes} nodes, the mechanism nodes={self.nodes}",
                field="graph",
            )
        return self._release(g.degrees(), generator)

    def on_graphs(self) -> CountsView:
        """Every node's release on a whole graph, as one mechanism on graphs (for the auditor,
        on graphs that differ in one edge, and for a session charging per edge)."""
        return CountsView(self)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """ln P[output | list] = ln P[Z = output − count(list)]: ln((1 − α)/(1 + α)) − |z|/t
        with z = output − count as numpy takes it (in int64 for integer or boolean outputs,
        in float64 for others and ``uint64``), the count of each list (its last axis; a 0-d
        list is one bit) computed from its entries ``!= 0``.

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same operations on the same constant (a numpy or list operand beside it is
        copied there): the host's numbers to the bit; there the outputs must be real numbers
        (booleans, integers or floats), and the broadcast shape is checked before any value.
        """
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return _device_count_log_probability(
                operands, table=self.count_table(), scale=self.scale, owner=self.name
            )
        degrees = np.count_nonzero(np.asarray(inputs) != 0, axis=-1).astype(np.int64)
        counts = self.count(degrees.reshape(-1)).reshape(degrees.shape)
        return _graph_noise.log_pmf(np.asarray(outputs) - counts, self.scale)


def _device_count_log_probability(
    operands: Any, *, table: tuple[int, ...] | None, scale: Fraction, owner: str
) -> Any:
    """:meth:`_CountOfList.log_probability` on the operands' device: the outputs' dtype and
    the broadcast shape first, then the counts (exact integers, the public table's lookup as
    :func:`dpkit.plugin.noisy_list_counts` makes it) and the host's float64 operations."""
    library = operands.library
    xp, device = library.xp, library.device
    outputs, lists = operands.outputs, operands.inputs
    if not xp.isdtype(outputs.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"{owner}: outputs must be real numbers, got a {library.name} array of {outputs.dtype}",
            field="outputs",
        )
    _ = np.broadcast_shapes(tuple(outputs.shape), tuple(lists.shape)[:-1])  # numpy's error
    bits = lists if lists.dtype == xp.bool else lists != 0
    counts = xp.sum(xp.astype(bits, xp.int64), axis=-1)  # a 0-d list: one bit
    if table is not None:
        lookup = xp.asarray(list(table), dtype=xp.int64, device=device)
        clipped = xp.minimum(xp.reshape(counts, (-1,)), len(table) - 1)
        counts = xp.reshape(xp.take(lookup, clipped), tuple(counts.shape))
    if xp.isdtype(outputs.dtype, ("bool", "integral")) and outputs.dtype != xp.uint64:
        offsets = xp.astype(xp.astype(outputs, xp.int64) - counts, xp.float64)  # numpy's int64
    else:
        offsets = xp.astype(outputs, xp.float64) - xp.astype(counts, xp.float64)
    return _graph_noise.log_norm(scale) - xp.abs(offsets) / float(scale)


@attrs.frozen
class NoisyDegree(_CountOfList):
    """A user's degree plus exact discrete Laplace noise of scale 1/ε.

    Adding or removing one edge of a neighbour list moves the degree by 1, so d + Z with
    Z ~ DLap(1/ε) is ε-edge LDP (the geometric mechanism: Ghosh, Roughgarden & Sundararajan
    2012; the noisy degrees of Imola, Murakami & Chaudhuri 2021, Section 4.3, with discrete
    instead of continuous Laplace noise, exactly sampled in both randomness modes). Each
    report is an unbiased estimate of the degree with the exact variance 2α/(1 − α)²,
    α = e^{−ε}; their histogram gives the degree distribution by an exact deconvolution
    (:mod:`dpkit_ldp.graph_estimators`). Per edge the guarantee is 2ε (both endpoints' degrees
    move: :attr:`relationship_privacy`).
    """

    name: ClassVar[str] = "graph_degree"

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per user", typical=(0.05, 6.0))
    nodes: int = nodes_parameter()

    def __attrs_post_init__(self) -> None:
        self._check_scale()

    @property
    def sensitivity(self) -> int:
        return 1

    def count(self, degrees: NDArray[np.int64], /) -> NDArray[np.int64]:
        return degrees


@attrs.frozen
class LocalKStars(_CountOfList):
    """A user's number of k-stars C(min(d, D), k) plus discrete Laplace noise (LocalLap_k⋆).

    Imola, Murakami & Chaudhuri 2021, Section 4.2, Algorithm 1: user i releases
    C(d_i, k) + Lap(Δ/ε) after *graph projection* — a user of degree above the public bound
    D = ``max_degree`` drops neighbours down to D, which for this count is C(min(d_i, D), k).
    One more edge moves the count from C(d, k) to C(d + 1, k), by C(d, k − 1) ≤ C(D − 1, k − 1)
    for d < D and by 0 from d ≥ D on, so Δ = C(D − 1, k − 1) (the paper uses the looser
    C(D, k − 1)). The noise is exact discrete Laplace of scale Δ/ε (rounded up), the count an
    integer. The sum of the reports is unbiased for the k-stars Σ_i C(d_i, k) when no degree
    exceeds D (the projection only removes stars otherwise), with the exact variance
    n·Var Z. ε-edge LDP per user, 2ε per edge.
    """

    name: ClassVar[str] = "graph_kstar"

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per user", typical=(0.05, 6.0))
    nodes: int = nodes_parameter()
    max_degree: int = parameter(
        Integer(low=1, high=1 << 20),
        doc="public degree bound D: a larger degree counts as D (graph projection)",
        typical=(2, 6),
    )
    k: int = parameter(
        Integer(low=1, high=16), doc="star size k (2: wedges)", default=2, typical=(1, 3)
    )

    def __attrs_post_init__(self) -> None:
        if math.comb(self.max_degree, self.k) >= 1 << 62:
            raise InvalidParameter(
                "max_degree",
                self.max_degree,
                f"small enough that C(max_degree, k) < 2⁶² at k = {self.k}",
                owner=self.name,
            )
        self._check_scale()

    @property
    def sensitivity(self) -> int:
        """Δ = C(D − 1, k − 1)."""
        return max(1, math.comb(self.max_degree - 1, self.k - 1))

    def count_table(self) -> tuple[int, ...]:
        """C(d, k) for d = 0 … D."""
        return tuple(math.comb(d, self.k) for d in range(self.max_degree + 1))

    def count(self, degrees: NDArray[np.int64], /) -> NDArray[np.int64]:
        table = np.array(self.count_table(), np.int64)
        return table[np.minimum(degrees, self.max_degree)]


@attrs.frozen
class CountsView(Mechanism):
    """A count mechanism run by every node of a graph: input an n×n adjacency matrix (a batch
    along a first axis), output the n noisy counts, relation "graphs that differ in one edge",
    cost the mechanism's ``relationship_privacy`` (2ε: an edge moves two nodes' counts)."""

    name: ClassVar[str] = "count_relationships"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "graph"

    mechanism: _CountOfList

    @property
    def domain(self) -> Graphs:
        return Graphs(self.mechanism.nodes)

    @property
    def privacy(self) -> PrivacyEvent:
        return self.mechanism.relationship_privacy

    def check_input(self, values: Any, /) -> None:
        """Public phase: an n×n matrix (or a batch of them), from the shape alone."""
        n = self.mechanism.nodes
        shape = np.shape(as_array(values, owner=self.name, field="graph"))
        if len(shape) < 2 or shape[-2:] != (n, n):
            raise InvalidData(
                f"{self.name}: a graph is an {n}×{n} adjacency matrix, got shape {shape}",
                field="graph",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Private phase, total: the lower triangle read as bits (others random) and mirrored."""
        n = self.mechanism.nodes
        rows, cols = np.tril_indices(n, -1)
        array = np.asarray(values)
        bits = self.mechanism.coerce(array[..., rows, cols], rng=rng)
        out = np.zeros((*array.shape[:-2], n, n), dtype=np.int64)
        out[..., rows, cols] = bits
        out[..., cols, rows] = bits
        return out

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> NDArray[np.int64]:
        """Each node's noisy count of each graph: shape (…, n)."""
        released: NDArray[np.int64] = self.mechanism.randomize(values, rng=rng)
        return released

    def output_space(self) -> NDArray[np.int64]:
        """Every node's output window, combined (module docstring): (W^n, n) outputs."""
        low, high = self.mechanism.output_window()
        n = self.mechanism.nodes
        if (high - low + 1) ** n > _MAX_WINDOW:
            raise NotImplementedError(
                f"{self.name}: {high - low + 1}^{n} outputs are too many to enumerate"
            )
        axes = np.meshgrid(*[np.arange(low, high + 1, dtype=np.int64)] * n, indexing="ij")
        return np.stack([a.ravel() for a in axes], axis=1)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        per_node = self.mechanism.log_probability(outputs, inputs)
        return np.asarray(np.sum(per_node, axis=-1), dtype=np.float64)

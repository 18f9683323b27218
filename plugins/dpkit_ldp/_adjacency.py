"""The per-node randomizers of neighbour lists, shared by ``graph_rr`` and ``graph_arr``.

Both report each bit of a user's neighbour list through one binary channel,

    P[report 1 | a = 1] = p₁,      P[report 1 | a = 0] = p₀ < p₁,

independently bit by bit; it is ε-edge LDP iff p₁/p₀ ≤ e^ε and (1 − p₀)/(1 − p₁) ≤ e^ε (one
bit of the list differs between neighbours, and the others' reports do not depend on it).

**Sampling, exactly.** Dense reports draw one 64-bit word per bit and compare it with an integer
threshold: T₁ = ⌊p₁·2⁶⁴⌋ (rounded down) for a 1, T₀ = ⌈p₀·2⁶⁴⌉ (rounded up) for a 0, both from
p₁, p₀ evaluated in 60-digit decimal arithmetic from the exact binary value of μ and ε's
smaller reading (:func:`dpkit_ldp._lattice.epsilon_decimal`, never above the ledger's) (and
T₁ raised to T₀ where those roundings cross, which only a tiny μ·ε allows). Then
p₁′/p₀′ ≤ p₁/p₀, (1 − p₀′)/(1 − p₁′) ≤ (1 − p₀)/(1 − p₁) and p₁′ ≥ p₀′: the realised ε never
exceeds the declared one. In fast mode (a numpy ``Generator``) the words are the generator's and the
thresholds the same. ``randomize`` on an accelerator's array compares the device's 64-bit words
(ChaCha20 there in secure mode) with the same T₁ and T₀ (:mod:`dpkit.tensors.list_bits`): the
same words give the same bits; so does the whole-graph view's ``randomize``
(:class:`RelationshipView`, :mod:`dpkit.tensors.graph_views`), and so does ``randomize_graph``
on an accelerator's adjacency matrix in the dense and packed encodings (its docstring).

**Sparse reports** never touch the bits that stay 0. The channel is written as a union,
(each existing edge kept with probability s) ∪ (a noise set, each pair in it with probability r,
independently of the graph), with r = p₀ and s = (p₁ − p₀)/(1 − p₀): then
P[1 | 1] = s + r − s·r = p₁ and P[1 | 0] = r = p₀. The noise set is a Bernoulli(r′) process over
the reported pairs, drawn by its gaps, exact geometric variables of a dyadic rational rate
γ ≥ −ln(1 − r) (:func:`dpkit.randomness.geometric.geometric_digits`: P[gap = g] = (1 − e^{−γ})
e^{−γg}, so r′ = 1 − e^{−γ} ≥ r, within a relative 2⁻⁶⁰), and the kept edges by words against
⌊s·2⁶⁴⌋. Both roundings can only add privacy: the ratio P[1|1]/P[1|0] = 1 + s′(1 − r′)/r′
falls when r′ grows or s′ shrinks, and (1 − P[1|0])/(1 − P[1|1]) = 1/(1 − s′) ≤ 1/(1 − s) ≤ e^ε
(the last step is p₁ ≤ e^ε/(1 + e^ε), which both mechanisms require). The work and the
randomness drawn grow with the number of reported 1s, not with n².
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    Choice,
    CompositeDP,
    Integer,
    InvalidData,
    Mechanism,
    PrivacyEvent,
    RandomizedResponseDP,
    SecureRandom,
    array_library,
    as_array,
    coerced_graphs,
    device_operands,
    geometric_digits,
    noisy_list_bits,
    parameter,
    relationship_bits,
    reported_adjacency,
    resolve_rng,
)
from dpkit_ldp._arrays import category_codes
from dpkit_ldp._bits import random_words
from dpkit_ldp.graph_reports import ENCODINGS, FORMS, AdjacencyReports
from dpkit_ldp.graphs import Graph, Graphs, NeighbourLists, as_graph

__all__ = ["AdjacencyMechanism", "NeighbourListInput", "RelationshipView", "device_reports"]

_U64 = 1 << 64
_CONTEXT = decimal.Context(prec=60)
_MARGIN = decimal.Decimal("1e-30")  # ≫ the error of 60-digit arithmetic at the scale 2⁶⁴
#: Bits per pass of the dense sampler (the temporaries stay in cache).
_CHUNK = 1 << 20
#: Largest list length whose 2^length outputs the exact tier may enumerate.
_ENUMERABLE = 16


def decimal_of(value: float) -> decimal.Decimal:
    """The exact value of a double, as a Decimal."""
    return decimal.Decimal(value)


def threshold(value: decimal.Decimal, rounding: Literal["up", "down"]) -> int:
    """⌈value·2⁶⁴⌉ or ⌊value·2⁶⁴⌋ for a probability evaluated to 60 digits, rounded past its
    evaluation error, clamped to [0, 2⁶⁴]."""
    scaled = _CONTEXT.multiply(value, decimal.Decimal(_U64))
    if rounding == "up":
        t = int(_CONTEXT.add(scaled, _MARGIN).to_integral_value(decimal.ROUND_CEILING))
    else:
        t = int(_CONTEXT.subtract(scaled, _MARGIN).to_integral_value(decimal.ROUND_FLOOR))
    return min(max(t, 0), _U64)


def rate_at_least(value: decimal.Decimal) -> Fraction:
    """A dyadic rational γ ≥ −ln(1 − value), within a relative 2⁻⁶⁰ of it."""
    nats = -_CONTEXT.ln(_CONTEXT.subtract(decimal.Decimal(1), value))
    exponent = 60 - math.floor(math.log2(float(nats)))
    scaled = _CONTEXT.add(_CONTEXT.multiply(nats, decimal.Decimal(2) ** exponent), _MARGIN)
    numerator = int(scaled.to_integral_value(decimal.ROUND_CEILING))
    return Fraction(numerator, 1 << exponent) if exponent >= 0 else Fraction(numerator << -exponent)


def lower_pair(index: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pair number k of the strict lower triangle in row-major order → (i, j), i > j."""
    i = np.floor((1.0 + np.sqrt(1.0 + 8.0 * index.astype(np.float64))) / 2.0).astype(np.int64)
    i -= (i * (i - 1) // 2) > index  # float rounding, one step at most either way
    i += ((i + 1) * i // 2) <= index
    return i, index - i * (i - 1) // 2


def ordered_pair(index: NDArray[np.int64], nodes: int) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Pair number k of the ordered pairs (i, j ≠ i) in row-major order → (i, j)."""
    i, rest = np.divmod(index, nodes - 1)
    return i, rest + (rest >= i)


def nodes_parameter() -> Any:
    """The ``nodes`` parameter of a neighbour-list mechanism."""
    return parameter(
        Integer(low=2, high=1 << 40),
        doc="number n of nodes of the graph (a neighbour list has n bits)",
        typical=(3, 6),
    )


def pairs_parameter() -> Any:
    """The ``pairs`` parameter: which endpoints report an edge."""
    return parameter(
        Choice(FORMS),
        doc="'once': user i reports the pairs j < i only, every edge once (ε-relationship DP); "
        "'both': every user reports all n − 1 bits, every edge twice (2ε-relationship DP)",
        default="once",
    )


def output_parameter() -> Any:
    """The ``output`` parameter: the encoding of ``randomize_graph``'s reports."""
    return parameter(
        Choice(ENCODINGS),
        doc="encoding of randomize_graph's reports: 'dense', 'packed' (8 bits a byte) or "
        "'sparse' (the reported 1s only; its work grows with them, not with n²)",
        default="dense",
    )


class NeighbourListInput:
    """The privacy-boundary hooks of the mechanisms on neighbour lists."""

    __slots__ = ()

    name: ClassVar[str]

    def check_input(self, values: Any, /) -> None:
        """Public phase: neighbour lists are an array of at least one dimension."""
        try:
            array = np.asarray(values)
        except (ValueError, TypeError):
            raise InvalidData(
                f"{self.name}: neighbour lists must be an array; the nested sequences have "
                "different lengths",
                field="values",
            ) from None
        if array.ndim < 1:
            raise InvalidData(
                f"{self.name}: neighbour lists must be an array of bits, got a scalar",
                field="values",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Private phase, total: a bit that is not 0/1 (NaN, 2, text) becomes a uniformly
        random bit — a mixture of the two bits' report laws, so still ε-edge LDP."""
        codes = category_codes(values, 2)
        outside = np.flatnonzero(codes.reshape(-1) < 0)
        if outside.size:
            generator = resolve_rng(rng, owner=self.name)[0]
            codes.reshape(-1)[outside] = generator.integers(0, 2, size=outside.size)
        return codes


class AdjacencyMechanism(NeighbourListInput, Mechanism):
    """A binary channel (p₁, p₀) applied to every bit of a user's neighbour list.

    Subclasses are frozen attrs classes declaring ``epsilon``, then ``nodes``, ``pairs`` and
    ``output`` (:func:`nodes_parameter`, …), and give p₁ and p₀ as exact decimals
    (:meth:`_decimals`) and as floats (:attr:`report_one`, :attr:`report_zero`).
    """

    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "graph"
    device_methods: ClassVar[frozenset[str]] = frozenset(
        {"randomize", "log_probability", "randomize_graph"}
    )

    epsilon: float
    nodes: int
    pairs: str
    output: str

    # -- the channel ----------------------------------------------------------------------

    def _decimals(self) -> tuple[decimal.Decimal, decimal.Decimal]:
        """(p₁, p₀) to 60 digits."""
        raise NotImplementedError

    @property
    def report_one(self) -> float:
        """p₁ = P[report 1 | edge]."""
        raise NotImplementedError

    @property
    def report_zero(self) -> float:
        """p₀ = P[report 1 | no edge]."""
        raise NotImplementedError

    @property
    def channel(self) -> tuple[float, float]:
        """(p₁, p₀)."""
        return self.report_one, self.report_zero

    @property
    def reports_per_pair(self) -> int:
        """How many independent reports each unordered pair gets: 1 (``"once"``) or 2."""
        return 1 if self.pairs == "once" else 2

    def _thresholds(self) -> tuple[int, int]:
        """(T₁, T₀): p₁ rounded down and p₀ rounded up to the 2⁻⁶⁴ grid, and T₁ at least T₀.

        The roundings keep p₁′/p₀′ and (1 − p₀′)/(1 − p₁′) within e^ε only while p₁′ ≥ p₀′.
        Where p₁ − p₀ = μ(1 − e^{−ε}) < 2⁻⁶⁴ (``graph_arr`` at a tiny μ·ε) no grid point may lie
        in [p₀, p₁], ⌊p₁·2⁶⁴⌋ fell below ⌈p₀·2⁶⁴⌉, and the reversed ratio p₀′/p₁′ exceeded e^ε
        (μ = 3.3·10⁻¹⁰, ε = 6·10⁻¹²: a realised ε of 1.6·10⁻¹⁰). There T₁ = T₀: a bit's report
        then does not depend on it (every ratio 1), and the law is within 2⁻⁶⁴ of the declared.
        """
        one, zero = self._decimals()
        t1, t0 = threshold(one, "down"), threshold(zero, "up")
        return max(t1, t0), t0

    def _union(self) -> tuple[int, Fraction]:
        """(⌊s·2⁶⁴⌋, γ) of the sparse sampler (module docstring)."""
        one, zero = self._decimals()
        keep = _CONTEXT.divide(_CONTEXT.subtract(one, zero), _CONTEXT.subtract(1, zero))
        return threshold(keep, "down"), rate_at_least(zero)

    # -- privacy --------------------------------------------------------------------------

    @property
    def domain(self) -> NeighbourLists:
        return NeighbourLists(self.nodes)

    @property
    def privacy(self) -> PrivacyEvent:
        """ε-edge LDP per user (one bit of a neighbour list)."""
        return RandomizedResponseDP(epsilon=self.epsilon, k=2)

    @property
    def relationship_privacy(self) -> PrivacyEvent:
        """The cost of all users' reports for one edge of the graph (relationship DP, Imola et
        al. 2021, Proposition 1): ε in the ``"once"`` form (the edge is in one report), two
        independent ε-reports in the ``"both"`` form, which compose to 2ε."""
        one = RandomizedResponseDP(epsilon=self.epsilon, k=2)
        return one if self.pairs == "once" else CompositeDP((one, one))

    def on_graphs(self) -> RelationshipView:
        """The whole protocol as a mechanism on graphs (:class:`RelationshipView`): what a
        session charges per edge, and what the auditor checks on edge-neighbouring graphs."""
        return RelationshipView(self)

    # -- randomizing neighbour lists ------------------------------------------------------

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """Report every bit of ``values`` (0/1 of any shape: one neighbour list, or a batch of
        them along the first axis) through the channel; booleans of the same shape (whatever
        ``output`` says: it is ``randomize_graph``'s encoding).

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array is reported there, with the same thresholds T₁, T₀ on the same
        64-bit words (:mod:`dpkit.tensors.list_bits`), in its own type, on its device.
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            one, zero = self._thresholds()
            return noisy_list_bits(
                library,
                values,
                one_threshold64=one,
                zero_threshold64=zero,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        bits = _as_bits(values, self.name)
        return self._report_bits(bits.reshape(-1), generator).reshape(bits.shape)

    def _report_bits(self, bits: NDArray[np.bool_], generator: Any) -> NDArray[np.bool_]:
        t1, t0 = self._thresholds()
        out = np.empty(bits.shape, dtype=np.bool_)
        high, low = np.uint64(t1), np.uint64(t0)
        for start in range(0, bits.size, _CHUNK):
            chunk = bits[start : start + _CHUNK]
            words = random_words(generator, chunk.size)
            out[start : start + _CHUNK] = words < np.where(chunk, high, low)
        return out

    def log_terms(self) -> tuple[float, float, float, float]:
        """(log p₁, log(1 − p₁), log p₀, log(1 − p₀)): numpy's logarithms, taken once on the
        host (log 0 = −inf where a probability underflows or rounds to 1)."""
        p1, p0 = self.channel
        with np.errstate(divide="ignore"):
            logs = np.log(np.array([p1, 1.0 - p1, p0, 1.0 - p0]))
        return float(logs[0]), float(logs[1]), float(logs[2]), float(logs[3])

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[report | list]: the sum over the last axis (broadcasting; a 0-d pair is one
        bit) of log p₁, log(1 − p₁), log p₀ or log(1 − p₀) for each bit, a bit and a report
        read as ``!= 0``. The sum is taken as

            n₁₁·log p₁ + n₁₀·log(1 − p₁) + n₀₁·log p₀ + n₀₀·log(1 − p₀),

        n_ab the number of bits a reported as b (exact integers; a log 0 = −inf term is −inf
        where a bit meets it and 0 elsewhere), in this order on both paths.

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same operations on the same constants (a numpy or list operand beside it is
        copied there): the host's numbers to the bit.
        """
        logs = self.log_terms()
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return _device_bit_log_probability(operands, logs)
        reported = np.asarray(outputs) != 0
        edges = np.asarray(inputs) != 0
        shape = _pair_shape(reported.shape, edges.shape) or (1,)  # 0-d: one bit
        reported = np.broadcast_to(reported, shape)
        edges = np.broadcast_to(edges, shape)
        counts = [
            np.count_nonzero(edge & report, axis=-1)
            for edge in (edges, ~edges)
            for report in (reported, ~reported)
        ]
        total = np.zeros(shape[:-1], dtype=np.float64)
        for count, log in zip(counts, logs, strict=True):
            if log == -math.inf:  # log 0 counts only where a bit meets it
                total = total + np.where(count > 0, -math.inf, 0.0)
            else:
                total = total + np.asarray(count, np.float64) * log
        return np.asarray(total, dtype=np.float64)

    def output_space(self) -> NDArray[np.bool_]:
        """Every report of a list of ``nodes`` bits (for n ≤ 16)."""
        return _all_bit_vectors(self.nodes)

    # -- randomizing a whole graph --------------------------------------------------------

    def randomize_graph(
        self,
        graph: Any,
        /,
        *,
        rng: np.random.Generator | SecureRandom | None = None,
        nodes: int | None = None,
    ) -> AdjacencyReports:
        """Every user's report of a graph of ``self.nodes`` nodes, in the ``output`` encoding.

        ``graph``: anything :func:`dpkit_ldp.graphs.as_graph` accepts (a symmetric 0/1
        matrix, an edge list with ``nodes``, a SciPy sparse matrix, a NetworkX graph). In the
        ``"once"`` form user i reports the pairs j < i; in ``"both"`` every j ≠ i.

        An accelerator's n×n adjacency matrix (torch, CuPy, JAX; ``nodes``, if given, its
        side) is reported there (:func:`dpkit.plugin.reported_adjacency`): refused as
        ``as_graph`` refuses it (field ``graph``, no value quoted), then each reported bit's
        64-bit word against T₁ or T₀, in the dense encoding's row-major order — the host's
        dense reports on the same words, bit for bit. The reports hold arrays of the caller's
        type on its device: the (n, n) booleans, their ``packbits`` (uint8, computed there),
        or for ``"sparse"`` the int64 coordinates of the dense reports' 1s — the channel's
        law with the dense sampler's thresholds, where the host's sparse sampler draws the
        same law by its gaps (its rates rounded the safe way, within 2⁻⁶⁰), so not on the
        same words; the work is n² there. The estimators take them as they are
        (:class:`~dpkit_ldp.graph_reports.AdjacencyReports`: the edge count on the device,
        the other statistics after one copy of the reports to the host).
        """
        library = array_library(graph, owner=self.name, field="graph")
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return self._device_reports(library, graph, rng=rng, nodes=nodes)
        generator, _ = resolve_rng(rng, owner=self.name)
        g = as_graph(graph, nodes=nodes)
        if g.nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {g.nodes} nodes, the mechanism nodes={self.nodes}",
                field="graph",
            )
        if self.output == "sparse":
            rows, cols = self._sparse_reports(g, generator)
            return AdjacencyReports(self.name, g.nodes, self.pairs, "sparse", rows=rows, cols=cols)
        blocks = [
            block if self.output == "dense" else np.packbits(block, axis=1)
            for block in self._dense_blocks(g, generator)
        ]
        width = g.nodes if self.output == "dense" else -(-g.nodes // 8)
        matrix = np.concatenate(blocks) if blocks else np.zeros((0, width), dtype=np.uint8)
        return AdjacencyReports(self.name, g.nodes, self.pairs, self.output, matrix=matrix)

    def _device_reports(
        self, library: Any, graph: Any, *, rng: Any, nodes: int | None
    ) -> AdjacencyReports:
        """:meth:`randomize_graph` on an accelerator's adjacency (its docstring)."""
        if nodes is not None and nodes != self.nodes:
            raise InvalidData(
                f"{self.name}: the graph has {nodes} nodes, the mechanism nodes={self.nodes}",
                field="graph",
            )
        one, zero = self._thresholds()
        dense = reported_adjacency(
            library,
            graph,
            nodes=self.nodes,
            pairs="once" if self.pairs == "once" else "both",
            one_threshold64=one,
            zero_threshold64=zero,
            rng=rng,
            owner=self.name,
        )
        return device_reports(library, dense, self.name, self.pairs, self.output)

    def _dense_blocks(self, graph: Graph, generator: Any) -> Iterator[NDArray[np.bool_]]:
        """The reports, a block of rows at a time: each reported bit one word."""
        n = graph.nodes
        step = max(1, _CHUNK // n)
        degrees = graph.degrees()
        for start in range(0, n, step):
            stop = min(n, start + step)
            truth = np.zeros((stop - start, n), dtype=np.bool_)
            lo, hi = graph.indptr[start], graph.indptr[stop]
            truth[np.repeat(np.arange(stop - start), degrees[start:stop]), graph.indices[lo:hi]] = 1
            user = np.arange(start, stop)[:, None]
            column = np.arange(n)[None, :]
            reported = column < user if self.pairs == "once" else column != user
            block = np.zeros((stop - start, n), dtype=np.bool_)
            block[reported] = self._report_bits(truth[reported], generator)
            yield block

    def _sparse_reports(
        self, graph: Graph, generator: Any
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The reported 1s as the union of kept edges and a noise set (module docstring)."""
        n = graph.nodes
        keep_threshold, rate = self._union()
        if self.pairs == "once":
            rows, cols = graph.lower()
            edge_keys = rows * (rows - 1) // 2 + cols
            total = n * (n - 1) // 2
        else:
            rows = graph.rows()
            cols = graph.indices.astype(np.int64)
            edge_keys = rows * (n - 1) + cols - (cols > rows)
            total = n * (n - 1)
        kept = edge_keys[random_words(generator, edge_keys.size) < np.uint64(keep_threshold)]
        noise = _bernoulli_positions(rate, total, generator)
        keys = _sorted_union(noise, kept)
        if self.pairs == "once":
            return lower_pair(keys)
        i, j = ordered_pair(keys, n)
        return i, j.astype(np.int64)


def device_reports(
    library: Any, dense: Any, mechanism: str, pairs: str, output: str
) -> AdjacencyReports:
    """A graph's reports held on its device as the (n, n) booleans of the dense encoding,
    in the ``output`` encoding there: the matrix itself, its ``packbits``, or the int64
    coordinates of its 1s (row-major: sorted by reporter, then node)."""
    n = int(dense.shape[0])
    if output == "sparse":
        xp = library.xp
        rows, cols = xp.nonzero(dense)
        return AdjacencyReports(
            mechanism,
            n,
            pairs,
            "sparse",
            rows=xp.astype(rows, xp.int64),
            cols=xp.astype(cols, xp.int64),
        )
    matrix = dense if output == "dense" else _device_packbits(library, dense)
    return AdjacencyReports(mechanism, n, pairs, output, matrix=matrix)


def _device_packbits(library: Any, dense: Any) -> Any:
    """``numpy.packbits(dense, axis=1)`` of (rows, n) booleans on their device: uint8
    (rows, ⌈n/8⌉), the first column of each byte its most significant bit."""
    xp = library.xp
    rows, n = (int(d) for d in dense.shape)
    width = -(-n // 8)
    bits = xp.astype(dense, xp.int64)
    if 8 * width > n:
        pad = xp.zeros((rows, 8 * width - n), dtype=xp.int64, device=library.device)
        bits = xp.concat([bits, pad], axis=1)
    weights = xp.asarray([128, 64, 32, 16, 8, 4, 2, 1], dtype=xp.int64, device=library.device)
    packed = xp.sum(xp.reshape(bits, (rows, width, 8)) * weights, axis=-1)
    return xp.astype(packed, xp.uint8)


def _sorted_union(ordered: NDArray[np.int64], others: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.union1d(ordered, others)`` for ``ordered`` strictly increasing (the noise set's
    positions: cumulative sums of gaps ≥ 1): the few ``others`` missing from it are inserted
    at their places, O(|others|·log|ordered| + |ordered|), where ``union1d`` sorts everything
    again (most of a release's time on a large noise set)."""
    extra = np.unique(others)
    at = np.searchsorted(ordered, extra)
    found = at < ordered.size
    found[found] = ordered[at[found]] == extra[found]
    missing = ~found
    union: NDArray[np.int64] = np.insert(ordered, at[missing], extra[missing])
    return union


def _bernoulli_positions(rate: Fraction, total: int, generator: Any) -> NDArray[np.int64]:
    """The positions in 0 .. total−1 of a Bernoulli(1 − e^{−rate}) process, by exact
    geometric gaps (each gap the number of failures before the next success)."""
    success = -math.expm1(-float(rate))
    found: list[NDArray[np.int64]] = []
    last = -1
    remaining = total
    while remaining > 0:
        expected = remaining * success
        batch = int(expected + 6.0 * math.sqrt(expected + 1.0)) + 64
        gaps = geometric_digits(rate, lambda k: random_words(generator, k), batch)
        positions = last + np.cumsum(gaps + 1)
        inside = positions[positions < total]
        found.append(inside)
        if inside.size < positions.size:
            break
        last = int(positions[-1])
        remaining = total - 1 - last
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def check_graphs(values: Any, nodes: int, *, owner: str) -> None:
    """Refuse anything but ``nodes``×``nodes`` adjacency matrices (or a batch of them), from
    the shape alone (an ``InvalidData`` naming ``graph``)."""
    shape = np.shape(as_array(values, owner=owner, field="graph"))
    if len(shape) < 2 or shape[-2:] != (nodes, nodes):
        raise InvalidData(
            f"{owner}: a graph is an {nodes}×{nodes} adjacency matrix, got shape {shape}",
            field="graph",
        )


def _as_bits(values: Any, owner: str) -> NDArray[np.bool_]:
    array = as_array(values, owner=owner)
    if array.dtype.kind not in "biuf":
        raise InvalidData(f"{owner}: neighbour lists must hold 0/1", field="values")
    if array.size and not bool(np.all((array == 0) | (array == 1))):
        raise InvalidData(f"{owner}: neighbour lists must hold 0 or 1", field="values")
    ones: NDArray[np.bool_] = array != 0
    return ones


def _pair_shape(reports: tuple[int, ...], lists: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of reports and lists, from the shapes alone (numpy's
    ``IndexError`` for indexing arrays that do not broadcast)."""
    try:
        return tuple(np.broadcast_shapes(reports, lists))
    except ValueError:
        raise IndexError(
            f"shape mismatch: reports of shape {reports} and lists of shape {lists} do not "
            "broadcast together"
        ) from None


def _device_bit_log_probability(operands: Any, logs: tuple[float, float, float, float]) -> Any:
    """:meth:`AdjacencyMechanism.log_probability` on the operands' device: the same counts
    and the same float64 operations, in the same order (the broadcast shape checked first)."""
    library = operands.library
    xp, device = library.xp, library.device
    shape = _pair_shape(tuple(operands.outputs.shape), tuple(operands.inputs.shape)) or (1,)

    def ones(values: Any) -> Any:
        bits = values if values.dtype == xp.bool else values != 0
        return xp.broadcast_to(bits, shape)

    reported, edges = ones(operands.outputs), ones(operands.inputs)
    never = xp.asarray(-math.inf, dtype=xp.float64, device=device)
    zero = xp.asarray(0.0, dtype=xp.float64, device=device)
    total = xp.zeros(shape[:-1], dtype=xp.float64, device=device)
    pairs = [(edges, reported), (edges, ~reported), (~edges, reported), (~edges, ~reported)]
    for (edge, report), log in zip(pairs, logs, strict=True):
        count = xp.sum(xp.astype(edge & report, xp.int64), axis=-1)
        if log == -math.inf:
            total = total + xp.where(count > 0, never, zero)
        else:
            total = total + xp.astype(count, xp.float64) * log
    return total


def _all_bit_vectors(length: int) -> NDArray[np.bool_]:
    if length > _ENUMERABLE:
        raise NotImplementedError(f"2^{length} outputs are too many to enumerate")
    codes = np.arange(1 << length, dtype=np.int64)[:, None]
    return ((codes >> np.arange(length - 1, -1, -1)) & 1).astype(np.bool_)


@attrs.frozen
class RelationshipView(Mechanism):
    """A neighbour-list mechanism run by every user of a graph, as one mechanism on graphs.

    Its input is a whole graph (an n×n adjacency matrix; a batch of them along a first axis),
    its neighbouring relation "graphs that differ in one edge" (:class:`Graphs`), its output
    the reported bits of all users — the lower-triangle pairs (i, j), i > j, in the
    ``"once"`` form, every ordered pair (i, j ≠ i) in the ``"both"`` form, row-major — and its
    cost the mechanism's ``relationship_privacy``. The auditor checks it on edge-neighbouring
    graphs; a session charges it per edge. An accelerator's adjacency is randomized (and
    coerced) there, with the host's law (:mod:`dpkit.tensors.graph_views`).
    """

    name: ClassVar[str] = "relationships"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "graph"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize"})

    mechanism: AdjacencyMechanism

    @property
    def domain(self) -> Graphs:
        return Graphs(self.mechanism.nodes)

    @property
    def privacy(self) -> PrivacyEvent:
        return self.mechanism.relationship_privacy

    def check_input(self, values: Any, /) -> None:
        """Public phase: an n×n matrix (or a batch of them), from the shape alone."""
        check_graphs(values, self.mechanism.nodes, owner=self.name)

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Private phase, total: each pair's bit is read from the lower triangle (a_ij, i > j)
        — a value that is not 0/1 becomes a uniformly random bit — and mirrored, so the input
        is a graph of the domain whatever the matrix held (one edge still moves one pair). An
        accelerator's matrix is coerced there, by the same law (int64 on its device)."""
        n = self.mechanism.nodes
        library = array_library(values, owner=self.name, field="graph")
        if library is not None and not library.on_host:
            return coerced_graphs(library, values, nodes=n, rng=rng, owner=self.name)  # type: ignore[no-any-return]
        rows, cols = np.tril_indices(n, -1)
        array = np.asarray(values)
        bits = self.mechanism.coerce(array[..., rows, cols], rng=rng)
        out = np.zeros((*array.shape[:-2], n, n), dtype=np.int64)
        out[..., rows, cols] = bits
        out[..., cols, rows] = bits
        return out

    def _index(self) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        n = self.mechanism.nodes
        if self.mechanism.pairs == "once":
            return np.tril_indices(n, -1)
        rows, cols = np.nonzero(~np.eye(n, dtype=bool))
        return rows, cols

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> NDArray[np.bool_]:
        """The reports of every user of each graph: shape (…, number of reported bits). An
        accelerator's adjacency is reported there, each bit's 64-bit word against the same
        thresholds, in the same order (:func:`dpkit.plugin.relationship_bits`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            one, zero = self.mechanism._thresholds()
            return relationship_bits(  # type: ignore[no-any-return]
                library,
                values,
                nodes=self.mechanism.nodes,
                pairs="once" if self.mechanism.pairs == "once" else "both",
                one_threshold64=one,
                zero_threshold64=zero,
                rng=rng,
                owner=self.name,
            )
        self.check_input(values)
        generator, _ = resolve_rng(rng, owner=self.name)
        graphs = _as_bits(values, self.name)
        rows, cols = self._index()
        bits = graphs[..., rows, cols]
        return self.mechanism._report_bits(bits.reshape(-1), generator).reshape(bits.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        rows, cols = self._index()
        scores: NDArray[np.float64] = self.mechanism.log_probability(
            outputs, np.asarray(inputs)[..., rows, cols]
        )
        return scores

    def output_space(self) -> NDArray[np.bool_]:
        return _all_bit_vectors(self._index()[0].size)

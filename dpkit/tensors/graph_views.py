"""The edge-LDP graph protocols as mechanisms on whole graphs, on an accelerator's arrays: every
user's reported bits (``graph_rr``'s and ``graph_arr``'s views, and their ``randomize_graph``
on one graph), the noisy counts of one graph (``graph_degree``'s and ``graph_kstar``'s
``randomize_graph``) and the two-round triangle protocol (``graph_triangles``' view, and its
``randomize_graph`` on one graph: :func:`two_round_graph`).

The laws are the CPU paths' (:class:`dpkit_ldp._adjacency.RelationshipView` and
:class:`dpkit_ldp.graph_triangles.TwoRoundView`; Imola, Murakami & Chaudhuri 2021, USENIX
Security, Sections 4.1 and 4.4, and 2022, Section 4). The input is an n×n adjacency matrix, or
a batch of them along leading axes; the work is dense in n² per graph (the auditor's graphs and
moderate n; a large sparse graph goes through the host's ``randomize_graph``).

**Reported bits** (:func:`relationship_bits`). In the ``"once"`` form user i reports the pairs
j < i, so the graph's bits are the strict lower triangle, row-major; in ``"both"`` every ordered
pair (i, j ≠ i), row-major. Each bit goes through the binary channel of
:func:`~dpkit.tensors.list_bits.channel_bits`: its 64-bit word (words 2k and 2k + 1 of the
call's stream for bit k of the flattened (…, pairs) array) against the mechanism's T₁ = ⌊p₁·2⁶⁴⌋
or T₀ = ⌈p₀·2⁶⁴⌉. The host's view reports the same bits in the same order from its generator's
words, so the same words give the same reports, bit for bit, for any batch.

**One graph's reports** (:func:`reported_adjacency`, ``randomize_graph`` of ``graph_rr`` and
``graph_arr``): the same bits, placed in the (n, n) booleans of the dense encoding (row i user
i's reports; the pairs not reported False); the reported pairs in row-major order are the
view's order and the host's dense encoding's, so the same words give the host's reports.
**One graph's counts** (:func:`graph_counts`): each row summed (the degree; for k-stars looked
up in the public table C(min(d, D), k)), then the exact discrete Laplace noise of
:func:`~dpkit.tensors.list_counts.noisy_list_counts` on the same words. Both refuse what the
host's ``as_graph`` refuses for a dense matrix (field ``graph``): anything but one n×n matrix
of a boolean, integer or real dtype, from the shape and dtype alone; then, after the rng's
check, an entry not 0 or 1, a self-loop, an asymmetric matrix — quoting no value, before any
word is drawn.

**Coercion** (:func:`coerced_graphs`, the private phase's total map): each pair's bit is read
from the lower triangle (a_ij, i > j) — an entry that is not 0 or 1 (NaN, 2, 0.5, any entry of
a dtype that is not boolean, integral or real) becomes a uniformly random bit, the low bit of
its own 32-bit word (word k for pair k of the flattened (…, pairs) array, drawn for every pair
whatever the data) — and mirrored, zero diagonal, int64: the host's law (there by
``Generator.integers(0, 2)`` for the replaced entries only, so not word for word).

**Two rounds** (:func:`two_round_reports`), for each graph of the batch:

1. round 1: the lower-triangle bits through the channel, as above (``"once"``), giving the noisy
   graph G′;
2. each user's projection P_i, the first D = ``max_degree`` lower neighbours: the lower-triangle
   bits of row i whose running count along the row is at most D; M the 0/1 matrix of the P_i;
3. w_i = Σ_{j<k ∈ P_i} (g′_jk − p₀) = ½·(M·G′·Mᵀ)_ii − p₀·C(|P_i|, 2), with G′ symmetric and
   zero on the diagonal (so (M·G′·Mᵀ)_ii = Σ_{j,k} M_ij g′_jk M_ik counts each closed wedge
   {j, k} twice), computed as ½·Σ_j (M·G′)_ij·M_ij by the namespace's ``matmul``. **Exact in
   float64**: every entry of M and G′ is 0 or 1, so every product is 0 or 1 and every partial
   sum, in whatever order a library's kernel adds, is an integer of at most n·D < 2⁵³, which a
   double holds exactly; the halving is exact too. The closed-wedge count is thus the integer
   the host counts, and the centring p₀·C(|P_i|, 2) and the difference are the same two IEEE
   754 operations as the host's, so w is the host's ``wedge_sums`` to the bit;
4. stochastic rounding to the lattice gℤ: with s = w/g (exact: g is a power of two), up with
   probability frac(s) by the host's comparison u < s − ⌊s⌋, u = ⌊w64/2¹¹⌋·2⁻⁵³ from a 64-bit
   word (:func:`~dpkit.tensors.duchi.uniform_53`: the host ``random()``'s uniform on the 2⁻⁵³
   grid), giving the int64 k_i;
5. Z_i exact discrete Laplace of the protocol's scale t
   (:func:`dpkit.tensors.exact.discrete_laplace`, the sampler of ``geometric``'s device path and
   the host's law and word map), released as float64 (k_i + Z_i)·g.

The output is float64 (…, pairs + n): the round-1 bits as 0.0/1.0, then the n releases.
**Words**, three draws in this order, each starting a fresh block of the call's stream
(:class:`~dpkit.tensors.device_random.DeviceWords` hands out whole ChaCha20 blocks): 2·P·B for
round 1 (P pairs, B graphs: bit k of the flattened (B, P) bits takes the draw's words 2k and
2k + 1), then 2·n·B for the coins (user i of graph b: the draw's words 2(b·n + i) and the
next, the high and low halves), then the discrete Laplace's (:mod:`dpkit.tensors.exact`: its
digit tables' words, then the signs'). The host groups a batch by distinct graph and draws
round 1, the coins and the noise for each group in that order; so for a batch of copies of one
graph (what the auditor draws) with at most 2¹⁵ releases (one chunk of the host's sampler), the
host's view fed the same 64-bit words gives the same output, bit for bit; for a batch of
several graphs the words are assigned otherwise and the law is the same. In fast mode the words
are the framework's, the law the same (the coin on the same grid, the noise the exact
sampler's).

**Checks**, before any value is read and quoting no value: the shape (…, n, n), a boolean,
integer or real dtype, 64-bit integers in the library (JAX needs x64), the rng; then, as the
host refuses them, every entry 0 or 1 (and, for the two rounds, a zero diagonal and a symmetric
matrix, as the host's ``Graph.from_dense``), before any word is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal

import attrs
import numpy as np

from dpkit.errors import InvalidData
from dpkit.randomness.discrete import laplace_scale
from dpkit.tensors.device_random import DeviceWords, device_words, require_64_bit
from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.exact import WordPairs, discrete_laplace
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.list_bits import channel_bits
from dpkit.tensors.list_counts import through_table

__all__ = [
    "TwoRoundLaw",
    "coerced_graphs",
    "graph_counts",
    "relationship_bits",
    "reported_adjacency",
    "two_round_graph",
    "two_round_reports",
    "wedge_sums",
]


def _check_shape(values: Any, nodes: int, *, owner: str) -> tuple[int, ...]:
    """The batch shape of (…, n, n) adjacency matrices, from the shape alone."""
    shape = tuple(int(d) for d in values.shape)
    if len(shape) < 2 or shape[-2:] != (nodes, nodes):
        raise InvalidData(
            f"{owner}: a graph is an {nodes}×{nodes} adjacency matrix, got shape {shape}",
            field="graph",
        )
    return shape[:-2]


def _check_structure(
    library: ArrayLibrary, values: Any, nodes: int, *, owner: str, field: str, message: str
) -> tuple[int, ...]:
    """Shape, dtype and the library's 64-bit integers: public, no value read."""
    batch = _check_shape(values, nodes, owner=owner)
    if not library.xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(f"{owner}: {message} must hold 0/1", field=field)
    require_64_bit(library, owner=owner, field=field)
    return batch


def _ones(xp: Any, values: Any, *, owner: str, field: str, message: str) -> Any:
    """``values != 0``, refused unless every entry is 0 or 1 (quoting no value)."""
    if values.dtype == xp.bool:
        return values
    if bool(xp.any((values != 0) & (values != 1))):
        raise InvalidData(f"{owner}: {message} must hold 0 or 1", field=field)
    return values != 0


def _check_simple(library: ArrayLibrary, ones: Any, nodes: int, *, owner: str, field: str) -> None:
    """Refuse (B, n, n) booleans with a self-loop or not symmetric, as the host's
    ``Graph.from_dense`` (quoting no value)."""
    xp = library.xp
    diagonal = xp.asarray(np.eye(nodes, dtype=bool), device=library.device)
    if bool(xp.any(ones & diagonal)):
        raise InvalidData(
            f"{owner}: {field} has a self-loop (a simple graph has none)", field=field
        )
    if bool(xp.any(ones != xp.permute_dims(ones, (0, 2, 1)))):
        raise InvalidData(
            f"{owner}: {field} is not symmetric, so it is not an undirected graph", field=field
        )


def _one_graph(
    library: ArrayLibrary, values: Any, nodes: int, *, rng: Any, owner: str, field: str
) -> tuple[Any, DeviceWords]:
    """One n×n adjacency matrix as booleans (n, n) and the call's words, refused unless it is
    a simple graph: its shape (one matrix, no batch) and dtype first, then the rng (its words
    made, none drawn), then its entries 0/1, its diagonal and its symmetry, as the host's
    ``as_graph``."""
    xp = library.xp
    shape = tuple(int(d) for d in values.shape)
    if shape != (nodes, nodes):
        raise InvalidData(
            f"{owner}: a graph is an {nodes}×{nodes} adjacency matrix, got shape {shape}",
            field=field,
        )
    _check_structure(library, values, nodes, owner=owner, field=field, message=field)
    words = device_words(library, rng, owner=owner)
    ones = _ones(xp, values, owner=owner, field=field, message=field)
    _check_simple(library, xp.reshape(ones, (1, nodes, nodes)), nodes, owner=owner, field=field)
    return ones, words


def _index(library: ArrayLibrary, array: Any) -> Any:
    return library.xp.asarray(np.ascontiguousarray(array, dtype=np.int64), device=library.device)


def _lower(nodes: int) -> Any:
    """Row-major positions i·n + j of the strict lower triangle (i > j), in the pairs' order."""
    rows, cols = np.tril_indices(nodes, -1)
    return rows * nodes + cols


def _ordered(nodes: int) -> Any:
    """Row-major positions of the ordered pairs (i, j ≠ i)."""
    rows, cols = np.nonzero(~np.eye(nodes, dtype=bool))
    return rows * nodes + cols


def _pair_of(nodes: int) -> Any:
    """For each entry (i, j) of an n×n matrix, the number of the lower pair {i, j} (row-major in
    the strict lower triangle); 0 on the diagonal (masked by the callers)."""
    i, j = np.indices((nodes, nodes))
    high, low = np.maximum(i, j), np.minimum(i, j)
    return np.where(i == j, 0, high * (high - 1) // 2 + low).reshape(-1)


def _symmetric(library: ArrayLibrary, pairs: Any, nodes: int, dtype: Any) -> Any:
    """(B, pairs) lower-pair values → (B, n, n) symmetric matrices of ``dtype``, zero diagonal."""
    xp = library.xp
    spread = xp.take(xp.astype(pairs, dtype), _index(library, _pair_of(nodes)), axis=1)
    off = xp.asarray(np.logical_not(np.eye(nodes, dtype=bool)).reshape(-1), device=library.device)
    out = xp.where(off, spread, xp.zeros_like(spread))
    return xp.reshape(out, (-1, nodes, nodes))


def relationship_bits(
    library: ArrayLibrary,
    values: Any,
    *,
    nodes: int,
    pairs: Literal["once", "both"],
    one_threshold64: int,
    zero_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Every user's reported bits of each graph (…, n, n): booleans (…, number of reported
    bits), the lower-triangle pairs (``"once"``) or every ordered pair (``"both"``),
    row-major (module docstring)."""
    xp = library.xp
    batch = _check_structure(
        library, values, nodes, owner=owner, field=field, message="neighbour lists"
    )
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    ones = _ones(xp, values, owner=owner, field=field, message="neighbour lists")
    positions = _lower(nodes) if pairs == "once" else _ordered(nodes)
    flat = xp.reshape(ones, (-1, nodes * nodes))
    bits = xp.take(flat, _index(library, positions), axis=1)
    reported = channel_bits(words, xp.reshape(bits, (-1,)), one_threshold64, zero_threshold64)
    return xp.reshape(reported, (*batch, int(positions.size)))


def coerced_graphs(library: ArrayLibrary, values: Any, *, nodes: int, rng: Any, owner: str) -> Any:
    """The private phase's total map of (…, n, n) matrices into graphs: each pair's bit read
    from the lower triangle, an entry not 0/1 replaced by a uniformly random bit, mirrored;
    int64 (…, n, n) on the device (module docstring). The shape, the library's 64-bit
    integers and the rng are public and checked first; no value is ever refused."""
    xp = library.xp
    batch = _check_shape(values, nodes, owner=owner)
    require_64_bit(library, owner=owner, field="graph")
    words = device_words(library, rng, owner=owner)
    flat = xp.reshape(values, (-1, nodes * nodes))
    lower = xp.take(flat, _index(library, _lower(nodes)), axis=1)
    count = int(lower.shape[0]) * int(lower.shape[1])
    drawn = xp.reshape(xp.astype(words.take(count), xp.int64) % 2, tuple(lower.shape))
    if lower.dtype == xp.bool:
        bits = xp.astype(lower, xp.int64)
    elif xp.isdtype(lower.dtype, ("integral", "real floating")):
        one = lower == 1
        bits = xp.where((lower == 0) | one, xp.astype(one, xp.int64), drawn)  # NaN: neither
    else:  # complex and any other dtype: never a bit, as the host's codes
        bits = drawn
    return xp.reshape(_symmetric(library, bits, nodes, xp.int64), (*batch, nodes, nodes))


def wedge_sums(
    library: ArrayLibrary, ones: Any, noisy: Any, *, max_degree: int, report_zero: float
) -> Any:
    """w_i = Σ_{j<k ∈ P_i} (g′_jk − p₀) for every user of each graph: ``ones`` the graphs'
    adjacency booleans (B, n, n), ``noisy`` their round-1 reports (B, pairs), booleans of the
    lower pairs; float64 (B, n), the host's ``wedge_sums`` to the bit (module docstring)."""
    xp = library.xp
    nodes = int(ones.shape[-1])
    below = xp.asarray(np.tril(np.ones((nodes, nodes), dtype=bool), -1), device=library.device)
    lower = ones & below
    running = xp.cumulative_sum(xp.astype(lower, xp.int64), axis=-1)
    projected = xp.astype(lower & (running <= max_degree), xp.float64)  # M
    closed = xp.sum(projected @ _symmetric(library, noisy, nodes, xp.float64) * projected, axis=-1)
    sizes = xp.astype(xp.sum(projected, axis=-1), xp.int64)
    wedges = xp.astype(sizes * (sizes - 1) // 2, xp.float64)
    return closed / 2.0 - report_zero * wedges


@attrs.frozen
class TwoRoundLaw:
    """The two-round triangle protocol's public parameters, as its device paths take them:
    n ``nodes``, the projection's D = ``max_degree``, round 1's channel thresholds T₁, T₀
    (``one_threshold64``, ``zero_threshold64``) and the centring p₀ (``report_zero``), round
    2's lattice step g (``step``) and discrete Laplace scale t (``scale``)."""

    nodes: int
    max_degree: int
    one_threshold64: int
    zero_threshold64: int
    report_zero: float
    step: float
    scale: Fraction


def two_round_reports(
    library: ArrayLibrary,
    values: Any,
    law: TwoRoundLaw,
    *,
    rng: Any,
    owner: str,
    field: str = "graph",
) -> Any:
    """Both rounds of the triangle protocol on each graph (…, n, n): float64 (…, pairs + n),
    the round-1 bits then the n releases (k_i + Z_i)·g (module docstring)."""
    xp = library.xp
    nodes, step = law.nodes, law.step
    batch = _check_structure(library, values, nodes, owner=owner, field=field, message=field)
    exact = laplace_scale(law.scale, "discrete_laplace")  # public: refused before any draw
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    ones = xp.reshape(
        _ones(xp, values, owner=owner, field=field, message=field), (-1, nodes, nodes)
    )
    _check_simple(library, ones, nodes, owner=owner, field=field)
    graphs = int(ones.shape[0])
    pairs = nodes * (nodes - 1) // 2
    if graphs == 0:
        return xp.zeros((*batch, pairs + nodes), dtype=xp.float64, device=library.device)
    lower = xp.take(xp.reshape(ones, (graphs, -1)), _index(library, _lower(nodes)), axis=1)
    noisy = xp.reshape(
        channel_bits(words, xp.reshape(lower, (-1,)), law.one_threshold64, law.zero_threshold64),
        (graphs, pairs),
    )
    w = wedge_sums(library, ones, noisy, max_degree=law.max_degree, report_zero=law.report_zero)
    halves = xp.reshape(xp.astype(words.take(2 * graphs * nodes), xp.int64), (-1, 2))
    coin = xp.reshape(uniform_53(xp, halves[:, 0], halves[:, 1]), (graphs, nodes))
    scaled = w / step
    floor = xp.floor(scaled)
    steps = xp.astype(floor, xp.int64) + xp.astype(coin < scaled - floor, xp.int64)
    noise = discrete_laplace(WordPairs(words), 1 / exact, graphs * nodes)
    released = xp.astype(steps + xp.reshape(noise, (graphs, nodes)), xp.float64) * step
    out = xp.concat([xp.astype(noisy, xp.float64), released], axis=1)
    return xp.reshape(out, (*batch, pairs + nodes))


def reported_adjacency(
    library: ArrayLibrary,
    values: Any,
    *,
    nodes: int,
    pairs: Literal["once", "both"],
    one_threshold64: int,
    zero_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "graph",
) -> Any:
    """Every user's reports of one graph (an n×n simple graph's adjacency) as the (n, n)
    booleans of ``randomize_graph``'s dense encoding: row i user i's reports, the columns
    j < i (``"once"``) or j ≠ i (``"both"``) their bits through the channel, the others
    False. The bits and their words are :func:`relationship_bits`' (bit k of the reported
    pairs, row-major, takes words 2k and 2k + 1), which is the host's order of the dense
    encoding too (module docstring)."""
    xp = library.xp
    ones, words = _one_graph(library, values, nodes, rng=rng, owner=owner, field=field)
    positions = _lower(nodes) if pairs == "once" else _ordered(nodes)
    bits = xp.take(xp.reshape(ones, (-1,)), _index(library, positions), axis=0)
    noisy = channel_bits(words, bits, one_threshold64, zero_threshold64)
    return _reports_matrix(library, noisy, nodes, pairs)


def _reports_matrix(
    library: ArrayLibrary, noisy: Any, nodes: int, pairs: Literal["once", "both"]
) -> Any:
    """One graph's reported bits (pairs,), in the reported pairs' row-major order, as the
    (n, n) booleans of the dense encoding (the pairs not reported False)."""
    xp = library.xp
    if pairs == "once":
        slot = _pair_of(nodes)
        reported = np.tril(np.ones((nodes, nodes), dtype=bool), -1).reshape(-1)
    else:
        i, j = np.indices((nodes, nodes))
        slot = np.where(i == j, 0, i * (nodes - 1) + j - (j > i)).reshape(-1)
        reported = np.logical_not(np.eye(nodes, dtype=bool)).reshape(-1)
    if not slot.size or int(noisy.shape[0]) == 0:  # fewer than two nodes: nothing reported
        return xp.zeros((nodes, nodes), dtype=xp.bool, device=library.device)
    spread = xp.take(noisy, _index(library, slot), axis=0)
    mask = xp.asarray(reported, device=library.device)
    return xp.reshape(spread & mask, (nodes, nodes))


def two_round_graph(
    library: ArrayLibrary,
    values: Any,
    law: TwoRoundLaw,
    *,
    rng: Any,
    owner: str,
    field: str = "graph",
) -> tuple[Any, Any]:
    """Both rounds of the triangle protocol on one graph (an n×n adjacency matrix, no batch):
    :func:`two_round_reports`' output on the same words, split into the round-1 reports as
    the (n, n) booleans of the dense encoding (:func:`reported_adjacency`'s layout) and the
    n float64 releases."""
    nodes = law.nodes
    shape = tuple(int(d) for d in values.shape)
    if shape != (nodes, nodes):
        raise InvalidData(
            f"{owner}: a graph is an {nodes}×{nodes} adjacency matrix, got shape {shape}",
            field=field,
        )
    out = two_round_reports(library, values, law, rng=rng, owner=owner, field=field)
    pairs = nodes * (nodes - 1) // 2
    first = _reports_matrix(library, out[:pairs] != 0, nodes, "once")
    return first, out[pairs:]


def graph_counts(
    library: ArrayLibrary,
    values: Any,
    *,
    nodes: int,
    table: Sequence[int] | None,
    scale: Fraction,
    rng: Any,
    owner: str,
    field: str = "graph",
) -> Any:
    """Every node's noisy count of one graph (an n×n simple graph's adjacency): its degree (a
    row sum), or ``table[min(degree, len(table) − 1)]``, plus exact discrete Laplace noise of
    ``scale``; int64 (n,) on the device. The counts and the noise are
    :func:`~dpkit.tensors.list_counts.noisy_list_counts`' on the matrix's rows (the same
    words in the same order: the sampler of ``geometric``'s device path, the host's law);
    the graph is refused as the host's ``as_graph`` refuses it, and the scale and the rng are
    checked before any entry is read."""
    xp = library.xp
    exact = laplace_scale(scale, "discrete_laplace")  # public: refused before any value
    ones, words = _one_graph(library, values, nodes, rng=rng, owner=owner, field=field)
    counts = through_table(library, xp.sum(xp.astype(ones, xp.int64), axis=-1), table)
    return counts + discrete_laplace(WordPairs(words), 1 / exact, nodes)

"""Graphs as the graph mechanisms take them, and the two neighbouring relations of edge LDP.

**The model** (Qin et al. 2017, "Generating Synthetic Decentralized Social Graphs with Local
Differential Privacy", CCS; Imola, Murakami & Chaudhuri 2021, "Locally Differentially Private
Analysis of Graph Statistics", USENIX Security, Section 3.1). An undirected graph on the nodes
0 .. n−1; node i is a user who holds their own *neighbour list* a_i ∈ {0, 1}^n
(a_ij = 1 iff {i, j} is an edge, a_ii = 0) and randomizes it locally.

* **Edge LDP** (Imola et al. 2021, Definition 1): a randomizer R_i is ε-edge LDP if for any two
  neighbour lists that differ in one bit, and every output s, P[R_i(a_i) = s] ≤ e^ε
  P[R_i(a_i′) = s] — the relation of :class:`NeighbourLists`.
* **Relationship DP** (ibid., Definition 2): the reports (R_1, …, R_n) of all users are
  ε-relationship DP if for any two graphs that differ in one edge — both a_ij and a_ji change —
  the joint law moves by at most e^ε — the relation of :class:`Graphs`. An edge sits in two
  neighbour lists, so when both endpoints report it, ε-edge LDP per user gives 2ε-relationship
  DP (ibid., Proposition 1); when each unordered pair is reported by one endpoint only (the
  lower triangle: user i reports a_ij for j < i), it gives ε.

:class:`Graph` is the one canonical form: compressed sparse rows of the symmetric adjacency,
each edge in both rows, neighbours sorted, no self-loops. :func:`as_graph` builds it from a
dense 0/1 matrix, an edge list, a SciPy sparse matrix or a NetworkX graph.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import Domain, InvalidData, as_array, describe_dtype, plain

__all__ = ["CountedNeighbourLists", "Graph", "Graphs", "NeighbourLists", "as_graph"]

#: Largest n for which a dense n×n form is built on request (n² bytes).
DENSE_LIMIT = 1 << 15


def _index_dtype(nodes: int) -> Any:
    return np.int32 if nodes < (1 << 31) else np.int64


@attrs.frozen(eq=False)
class Graph:
    """An undirected simple graph on the nodes 0 .. ``nodes`` − 1 (CSR of its adjacency).

    ``indices[indptr[i]:indptr[i + 1]]`` are the neighbours of i, sorted; every edge appears in
    both of its rows. Build one with :func:`as_graph` or the ``from_*`` constructors, which
    check their input; the fields are trusted as given.
    """

    nodes: int
    indptr: NDArray[np.int64]
    indices: NDArray[Any]

    @property
    def edges(self) -> int:
        """The number of edges m."""
        return int(self.indices.shape[0]) // 2

    @property
    def pairs(self) -> int:
        """The number of unordered pairs of nodes, n(n − 1)/2."""
        return self.nodes * (self.nodes - 1) // 2

    def degrees(self) -> NDArray[np.int64]:
        """d_i for every node."""
        return np.diff(self.indptr).astype(np.int64)

    def neighbours(self, node: int) -> NDArray[Any]:
        return self.indices[self.indptr[node] : self.indptr[node + 1]]

    def rows(self) -> NDArray[np.int64]:
        """The row (node) of every entry of ``indices``."""
        return np.repeat(np.arange(self.nodes, dtype=np.int64), self.degrees())

    def lower(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Every edge once, as (i, j) with i > j (the pair user i reports in the lower form)."""
        rows = self.rows()
        cols = self.indices.astype(np.int64)
        keep = rows > cols
        return rows[keep], cols[keep]

    def lower_degrees(self) -> NDArray[np.int64]:
        """For every node i, its number of neighbours j < i."""
        rows, _ = self.lower()
        return np.bincount(rows, minlength=self.nodes).astype(np.int64)

    def dense(self, dtype: Any = np.bool_) -> NDArray[Any]:
        """The n×n adjacency matrix (for n up to 2¹⁵)."""
        if self.nodes > DENSE_LIMIT:
            raise InvalidData(
                f"a dense adjacency of {self.nodes} nodes would take {self.nodes**2} bytes; "
                "use the sparse form",
                field="graph",
            )
        matrix = np.zeros((self.nodes, self.nodes), dtype=dtype)
        matrix[self.rows(), self.indices] = 1
        return matrix

    @classmethod
    def from_lower(cls, nodes: int, rows: NDArray[Any], cols: NDArray[Any]) -> Graph:
        """From each edge once as (i, j), i ≠ j, no duplicates (not checked)."""
        r = np.concatenate([np.asarray(rows, np.int64), np.asarray(cols, np.int64)])
        c = np.concatenate([np.asarray(cols, np.int64), np.asarray(rows, np.int64)])
        order = np.lexsort((c, r))
        r, c = r[order], c[order]
        indptr = np.zeros(nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=nodes), out=indptr[1:])
        return cls(nodes, indptr, c.astype(_index_dtype(nodes)))

    @classmethod
    def from_dense(cls, adjacency: Any, /, *, field: str = "graph") -> Graph:
        """From a symmetric n×n matrix of 0/1 (bool, integer, or float exactly 0.0/1.0) with a
        zero diagonal."""
        matrix = as_array(adjacency, owner="graph", field=field)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise InvalidData(
                f"graph: {field} must be a square adjacency matrix, got shape {matrix.shape}",
                field=field,
            )
        if matrix.dtype.kind not in "biuf":
            raise InvalidData(
                f"graph: {field} must hold 0/1, got an array of {describe_dtype(matrix)}",
                field=field,
            )
        bad = (matrix != 0) & (matrix != 1)
        if bad.any():
            first = plain(matrix[np.nonzero(bad)][0])
            raise InvalidData(f"graph: {field} must hold 0 or 1, got {first!r}", field=field)
        ones = matrix != 0
        if ones.diagonal().any():
            raise InvalidData(
                f"graph: {field} has a self-loop at node "
                f"{int(np.flatnonzero(ones.diagonal())[0])} (a simple graph has none)",
                field=field,
            )
        if not np.array_equal(ones, ones.T):
            raise InvalidData(
                f"graph: {field} is not symmetric, so it is not an undirected graph",
                field=field,
            )
        rows, cols = np.nonzero(np.tril(ones, -1))
        return cls.from_lower(matrix.shape[0], rows, cols)

    @classmethod
    def from_edges(cls, edges: Any, /, *, nodes: int, field: str = "graph") -> Graph:
        """From an (m, 2) array of node pairs in 0 .. n−1; an edge given twice (in either
        orientation) is one edge."""
        if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
            raise InvalidData(
                f"graph: nodes must be a whole number >= 1, got {nodes!r}", field=field
            )
        array = as_array(edges, owner="graph", field=field)
        if array.size == 0:
            array = np.zeros((0, 2), dtype=np.int64)
        if array.ndim != 2 or array.shape[1] != 2 or array.dtype.kind not in "iu":
            raise InvalidData(
                f"graph: {field} must be an (m, 2) array of integer node indices, got "
                f"shape {array.shape} of {describe_dtype(array)}",
                field=field,
            )
        pairs = array.astype(np.int64)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= nodes):
            raise InvalidData(
                f"graph: {field} name a node outside 0..{int(nodes) - 1}", field=field
            )
        if np.any(pairs[:, 0] == pairs[:, 1]):
            raise InvalidData(
                f"graph: {field} hold a self-loop (a simple graph has none)", field=field
            )
        high = np.maximum(pairs[:, 0], pairs[:, 1])
        low = np.minimum(pairs[:, 0], pairs[:, 1])
        unique = np.unique(high * int(nodes) + low)
        return cls.from_lower(int(nodes), unique // int(nodes), unique % int(nodes))


def _from_scipy(matrix: Any, field: str) -> Graph:
    csr = matrix.tocsr()
    n, m = csr.shape
    if n != m:
        raise InvalidData(f"graph: {field} must be square, got shape {csr.shape}", field=field)
    coo = csr.tocoo()
    rows, cols, values = (np.asarray(coo.row), np.asarray(coo.col), np.asarray(coo.data))
    live = values != 0
    rows, cols = rows[live], cols[live]
    if np.any(rows == cols):
        raise InvalidData(f"graph: {field} has a self-loop (a simple graph has none)", field=field)
    if np.any(values[live] != 1):
        raise InvalidData(f"graph: {field} must hold 0 or 1", field=field)
    forward = np.unique(rows * n + cols)
    backward = np.unique(cols * n + rows)
    if not np.array_equal(forward, backward):
        raise InvalidData(
            f"graph: {field} is not symmetric, so it is not an undirected graph", field=field
        )
    lower = forward[(forward // n) > (forward % n)]
    return Graph.from_lower(int(n), lower // n, lower % n)


def _from_networkx(graph: Any, field: str) -> Graph:
    if graph.is_directed() or graph.is_multigraph():
        raise InvalidData(f"graph: {field} must be an undirected simple graph", field=field)
    position = {node: i for i, node in enumerate(graph.nodes())}
    pairs = np.array([(position[u], position[v]) for u, v in graph.edges()], dtype=np.int64)
    return Graph.from_edges(pairs.reshape(-1, 2), nodes=len(position), field=field)


def as_graph(value: Any, /, *, nodes: int | None = None, field: str = "graph") -> Graph:
    """``value`` as a :class:`Graph`.

    Accepted: a :class:`Graph`; a square 0/1 adjacency matrix (symmetric, zero diagonal); an
    (m, 2) integer edge list together with ``nodes``; a SciPy sparse matrix; a NetworkX
    ``Graph`` (its nodes numbered in iteration order). Anything else is an
    :class:`~dpkit.InvalidData` naming ``field``.
    """
    if isinstance(value, Graph):
        return value
    if hasattr(value, "tocsr") and hasattr(value, "shape"):
        return _from_scipy(value, field)
    if hasattr(value, "is_directed") and hasattr(value, "edges"):
        return _from_networkx(value, field)
    if nodes is not None:
        return Graph.from_edges(value, nodes=nodes, field=field)
    return Graph.from_dense(value, field=field)


def lower_index(nodes: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The pairs (i, j), i > j, in row-major order of the strict lower triangle."""
    return tuple(np.asarray(x, dtype=np.int64) for x in np.tril_indices(nodes, -1))  # type: ignore[return-value]


def _bits(value: Any, size: int) -> NDArray[np.int64] | None:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if array.shape != (size,) or array.dtype.kind not in "biuf":
        return None
    if not bool(np.all((array == 0) | (array == 1))):
        return None
    return array.astype(np.int64)


@attrs.frozen
class NeighbourLists(Domain):
    """One user's neighbour list: a 0/1 vector of ``size`` entries; two lists neighbour when
    they differ in exactly one entry (edge LDP, Imola et al. 2021, Definition 1).

    The worst-case pairs are the extremes of the relation: the empty list against one edge,
    the full list against it less one edge, and an alternating list against it with its last
    bit flipped (a mechanism whose output depends on the degree, or on a bit's neighbours,
    shows a leak there).
    """

    size: int
    relation = "add or remove one edge of one user's neighbour list (edge LDP)"

    def pairs(self) -> list[tuple[Any, Any]]:
        zero = np.zeros(self.size, dtype=np.int64)
        full = np.ones(self.size, dtype=np.int64)
        one = zero.copy()
        one[0] = 1
        most = full.copy()
        most[-1] = 0
        alternating = np.arange(self.size, dtype=np.int64) % 2
        flipped = alternating.copy()
        flipped[-1] ^= 1
        found = [(zero, one), (full, most), (alternating, flipped)]
        return [pair for a, b in found for pair in ((a, b.copy()), (b.copy(), a))]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        found = []
        for _ in range(max(n, 0)):
            x = rng.integers(0, 2, size=self.size).astype(np.int64)
            y = x.copy()
            y[rng.integers(self.size)] ^= 1
            found.append((x, y))
        return found

    def are_neighbours(self, x: Any, y: Any) -> bool:
        """Two 0/1 vectors of ``size`` entries that differ in exactly one."""
        a, b = _bits(x, self.size), _bits(y, self.size)
        return a is not None and b is not None and int(np.count_nonzero(a != b)) == 1


@attrs.frozen
class CountedNeighbourLists(NeighbourLists):
    """Neighbour lists, for a mechanism that reads a list only through its degree (a noisy
    degree or k-star count): every neighbouring pair is then a step from degree d to d + 1,
    and its two laws are those of any other pair at that step. The worst-case pairs are one
    list of each degree d = 0 .. min(size, 256) − 1 against it plus one edge (both orders), so
    a check over them covers every step up to degree 256 (beyond its bound D a k-star count no
    longer moves; a noisy degree moves alike at every step)."""

    def pairs(self) -> list[tuple[Any, Any]]:
        found: list[tuple[Any, Any]] = []
        for d in range(min(self.size, 256)):
            fewer = np.zeros(self.size, dtype=np.int64)
            fewer[:d] = 1
            more = fewer.copy()
            more[d] = 1
            found += [(fewer, more), (more.copy(), fewer.copy())]
        return found


def _adjacency(value: Any, nodes: int) -> NDArray[np.int64] | None:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if array.shape != (nodes, nodes) or array.dtype.kind not in "biuf":
        return None
    if not bool(np.all((array == 0) | (array == 1))):
        return None
    matrix: NDArray[np.int64] = array.astype(np.int64)
    if matrix.diagonal().any() or not np.array_equal(matrix, matrix.T):
        return None
    return matrix


def _with_edge(matrix: NDArray[np.int64], i: int, j: int, value: int) -> NDArray[np.int64]:
    out: NDArray[np.int64] = matrix.copy()
    out[i, j] = out[j, i] = value
    return out


@attrs.frozen
class Graphs(Domain):
    """Undirected simple graphs on ``nodes`` nodes, as symmetric 0/1 adjacency matrices with a
    zero diagonal; two graphs neighbour when they differ in exactly one edge (both a_ij and
    a_ji change: relationship DP, Imola et al. 2021, Definition 2).

    Worst-case pairs: the empty graph against one edge, the complete graph against it less
    one edge, and a star (every node joined to node 0) against the star plus the edge {1, 2}
    (the edge closes a triangle there, which moves a triangle or 2-star statistic most).
    """

    nodes: int
    relation = "add or remove one edge of the graph (relationship DP)"

    def pairs(self) -> list[tuple[Any, Any]]:
        n = self.nodes
        empty = np.zeros((n, n), dtype=np.int64)
        complete = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
        star = empty.copy()
        star[0, 1:] = star[1:, 0] = 1
        found = [
            (empty, _with_edge(empty, 0, 1, 1)),
            (complete, _with_edge(complete, 0, 1, 0)),
        ]
        if n >= 3:
            found.append((star, _with_edge(star, 1, 2, 1)))
        return [pair for a, b in found for pair in ((a, b), (b.copy(), a.copy()))]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        found = []
        rows, cols = np.tril_indices(self.nodes, -1)
        for _ in range(max(n, 0)):
            bits = rng.integers(0, 2, size=rows.size)
            x = np.zeros((self.nodes, self.nodes), dtype=np.int64)
            x[rows, cols] = bits
            x = x + x.T
            k = int(rng.integers(rows.size))
            found.append((x, _with_edge(x, int(rows[k]), int(cols[k]), 1 - int(bits[k]))))
        return found

    def are_neighbours(self, x: Any, y: Any) -> bool:
        """Two adjacency matrices of ``nodes`` nodes that differ in exactly one edge."""
        a, b = _adjacency(x, self.nodes), _adjacency(y, self.nodes)
        return a is not None and b is not None and int(np.count_nonzero(a != b)) == 2

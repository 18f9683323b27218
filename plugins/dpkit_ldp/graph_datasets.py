"""Synthetic graphs for experiments, and the true statistics the estimators target.

Generators, each with an explicit ``numpy.random.Generator``:

``erdos_renyi(n, p)``
    every pair an edge independently with probability p (Erdős & Rényi 1959; Gilbert 1959).
``barabasi_albert(n, m)``
    preferential attachment: each new node joins m distinct existing nodes chosen with
    probability proportional to their degree (Barabási & Albert 1999), started from a star on
    m + 1 nodes; a power-law degree distribution with few triangles.
``powerlaw_cluster(n, m, p)``
    Holme & Kim 2002 ("Growing scale-free networks with tunable clustering", Phys. Rev. E 65):
    preferential attachment where, after each attachment, a triad is closed with probability p
    (the new node also joins a random neighbour of the node it just joined): power-law degrees
    *and* clustering.

:func:`graph_counts` gives the true edges, degrees, degree histogram, triangles, k-stars and
global clustering coefficient of a :class:`~dpkit_ldp.graphs.Graph` (triangles through SciPy's
sparse product when SciPy is installed, else dense, for n ≤ 2¹⁵).
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit import Integer, InvalidParameter, Real
from dpkit_ldp.datasets import convert, require_generator
from dpkit_ldp.graphs import Graph, as_graph

__all__ = ["GraphCounts", "barabasi_albert", "erdos_renyi", "graph_counts", "powerlaw_cluster"]

_OWNER = "graph_datasets"


def erdos_renyi(n: int, p: float, *, rng: np.random.Generator) -> Graph:
    """G(n, p): every pair an edge independently with probability p.

    Small graphs are drawn pair by pair in blocks of rows; sparse large ones (p·n(n − 1)/2
    below n²/64) as a Binomial(n(n − 1)/2, p) number of distinct pairs, uniformly — the same
    law, in memory and time O(edges).
    """
    n = convert("n", n, Integer(low=2, high=1 << 31), _OWNER)
    p = convert("p", p, Real(low=0.0, high=1.0), _OWNER)
    require_generator(rng, _OWNER)
    pairs = n * (n - 1) // 2
    if n > 4096 and p * pairs < n * n / 64:
        count = int(rng.binomial(pairs, p))
        keys = np.zeros(0, dtype=np.int64)
        while keys.size < count:
            keys = np.union1d(keys, rng.integers(0, pairs, size=count - keys.size))
        rows = np.floor((1.0 + np.sqrt(1.0 + 8.0 * keys)) / 2.0).astype(np.int64)
        rows -= (rows * (rows - 1) // 2) > keys
        rows += ((rows + 1) * rows // 2) <= keys
        return Graph.from_lower(n, rows, keys - rows * (rows - 1) // 2)
    found_rows: list[NDArray[np.int64]] = []
    found_cols: list[NDArray[np.int64]] = []
    step = max(1, (1 << 22) // n)
    for start in range(1, n, step):
        stop = min(n, start + step)
        i, j = np.nonzero(rng.random((stop - start, n)) < p)
        keep = j < i + start
        found_rows.append((i[keep] + start).astype(np.int64))
        found_cols.append(j[keep].astype(np.int64))
    if not found_rows:
        return Graph.from_lower(n, np.zeros(0, np.int64), np.zeros(0, np.int64))
    return Graph.from_lower(n, np.concatenate(found_rows), np.concatenate(found_cols))


def _attach(n: int, m: int, p: float, generator: np.random.Generator) -> Graph:
    """Preferential attachment with triad formation probability p (p = 0: Barabási–Albert)."""
    ends = np.empty(2 * m * n, dtype=np.int64)  # every edge's two ends: degree-weighted draws
    neighbours: list[list[int]] = [[] for _ in range(n)]
    count = 0
    rows: list[int] = []
    cols: list[int] = []

    def add(u: int, v: int) -> None:
        nonlocal count
        rows.append(u)
        cols.append(v)
        neighbours[u].append(v)
        neighbours[v].append(u)
        ends[count : count + 2] = (u, v)
        count += 2

    for v in range(1, m + 1):  # a star on the first m + 1 nodes
        add(v, 0)
    for v in range(m + 1, n):
        chosen: set[int] = set()
        last = -1
        while len(chosen) < m:
            if last >= 0 and p > 0 and generator.random() < p:
                candidates = [u for u in neighbours[last] if u not in chosen]
                if candidates:
                    last = candidates[int(generator.integers(len(candidates)))]
                    chosen.add(last)
                    continue
            u = int(ends[int(generator.integers(count))])
            if u not in chosen:
                chosen.add(u)
                last = u
        for u in sorted(chosen):
            add(v, u)
    return Graph.from_lower(n, np.array(rows, np.int64), np.array(cols, np.int64))


def barabasi_albert(n: int, m: int, *, rng: np.random.Generator) -> Graph:
    """Preferential attachment, m edges per new node (Barabási & Albert 1999)."""
    n = convert("n", n, Integer(low=2, high=1 << 31), _OWNER)
    m = convert("m", m, Integer(low=1), _OWNER)
    if m >= n:
        raise InvalidParameter("m", m, f"below n = {n}", owner=_OWNER)
    require_generator(rng, _OWNER)
    return _attach(n, m, 0.0, rng)


def powerlaw_cluster(n: int, m: int, p: float, *, rng: np.random.Generator) -> Graph:
    """Preferential attachment with triad formation (Holme & Kim 2002)."""
    n = convert("n", n, Integer(low=2, high=1 << 31), _OWNER)
    m = convert("m", m, Integer(low=1), _OWNER)
    p = convert("p", p, Real(low=0.0, high=1.0), _OWNER)
    if m >= n:
        raise InvalidParameter("m", m, f"below n = {n}", owner=_OWNER)
    require_generator(rng, _OWNER)
    return _attach(n, m, p, rng)


@attrs.frozen(eq=False)
class GraphCounts:
    """The true statistics of a graph."""

    nodes: int
    edges: int
    degrees: NDArray[np.int64]
    triangles: int

    @property
    def degree_histogram(self) -> NDArray[np.int64]:
        """The number of nodes of each degree 0 .. n − 1."""
        return np.bincount(self.degrees, minlength=self.nodes).astype(np.int64)

    def kstars(self, k: int = 2) -> int:
        """Σ_i C(d_i, k)."""
        return sum(math.comb(int(d), k) for d in self.degrees if d >= k)

    def kstars_projected(self, k: int, max_degree: int) -> int:
        """Σ_i C(min(d_i, D), k): what LocalLap_k⋆ estimates when degrees exceed D."""
        return sum(math.comb(int(min(d, max_degree)), k) for d in self.degrees)

    @property
    def clustering(self) -> float:
        """The global clustering coefficient 3T / S₂ (S₂ the 2-stars)."""
        two = self.kstars(2)
        return 3.0 * self.triangles / two if two else math.nan


def _triangles(graph: Graph) -> int:
    rows, cols = graph.lower()
    try:
        from scipy import sparse  # type: ignore[import-untyped]
    except ImportError:
        dense = graph.dense(np.float64)
        return round(float(np.einsum("ij,ij->", dense @ dense, dense)) / 6.0)
    lower = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(graph.nodes, graph.nodes))
    # L_ij L_jk L_ik with i > j > k: each triangle once.
    return round(float((lower @ lower).multiply(lower).sum()))


def graph_counts(graph: Any, /, *, nodes: int | None = None) -> GraphCounts:
    """The true statistics of ``graph`` (anything :func:`~dpkit_ldp.graphs.as_graph` takes)."""
    g = as_graph(graph, nodes=nodes)
    return GraphCounts(g.nodes, g.edges, g.degrees(), _triangles(g))

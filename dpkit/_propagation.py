"""The K-step mean-aggregation operator over a public graph (KProp), in plain numpy.

Sajadmanesh & Gatica-Perez 2021, "Locally Private Graph Neural Networks" (CCS), Section 4.2:
KProp replaces a node's value by the mean of its neighbours' values, K times over,

    x_v^(k) = (1/|N(v)|) Σ_{u ∈ N(v)} x_u^(k−1),      x^(0) = x,

with N(v) the neighbours of v (the open neighbourhood) or N(v) ∪ {v} (the closed one, with
``self_loops``). Without self loops, a node with no neighbour keeps its value (its
neighbourhood is taken to be {v}: the mean over an empty set is undefined). One step is the row-stochastic matrix P
(P[v, u] = 1/|N(v)| for u ∈ N(v)); K steps are W = P^K.

The graph is held as the compressed rows of P (:class:`MeanOperator`); a step is a gather and a
segmented sum (``np.add.reduceat``), O(nnz) per feature column, so graphs of millions of nodes
need no SciPy. :meth:`MeanOperator.squared_apply` computes (W∘W)·σ² — the variance of W·x̃ for
independent noise of variance σ² — exactly, from the rows of W built block by block (the work
is the number of pairs (v, u) joined by a walk of K steps).

**On an array library's device** (:meth:`MeanOperator.device_apply`,
:meth:`MeanOperator.device_squared_apply`) the same sums are computed where the values live,
with the array API's operations only: the graph is public, so the layout is made on the host
(numpy, as above) and copied to the device — the rows grouped by length into classes of width
2^c (a row of length ℓ in the class 2^⌈log₂ ℓ⌉, padded with zero weights, so the padding at
most doubles the entries), and a step is, per class, one gather, one product by the weights and
one sum along the row, then one gather back to node order. The products are the numpy path's
(the same two doubles, rounded once); only the order in which a row's terms are added differs
(numpy adds them left to right, the library as it reduces). A sum of m rounded products is
within γ_m·Σ|terms| of the exact one in any order, γ_m = m·2⁻⁵³/(1 − m·2⁻⁵³) (Higham 2002,
"Accuracy and Stability of Numerical Algorithms", §§3.1 and 4.2), so the two paths' sums differ
by at most 2γ_m·max|x|. P is row-stochastic, so a difference is carried on by the later steps
but not amplified: after K steps the values differ by at most 2K·γ_m·max|x| (m the largest
neighbourhood), up to terms of order (K·m·2⁻⁵³)². The variances are one sum of non-negative
terms whose products the two paths round alike (their inputs are the same): they differ by at
most 2γ_{m−1} of themselves (m the longest row of P^K summed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.arrays import as_array, describe_dtype
from dpkit.errors import InvalidData
from dpkit.tensors.libraries import ArrayLibrary, array_library

#: Rows of W built at once by :meth:`MeanOperator.squared_apply`.
ROWS_PER_BLOCK = 4096
#: Elements gathered at once by :meth:`MeanOperator.apply` (columns are taken in slices).
_GATHER = 1 << 24


@attrs.frozen(eq=False)
class MeanOperator:
    """P in compressed rows: ``indices[indptr[v]:indptr[v + 1]]`` is v's neighbourhood
    (sorted, never empty), each entry of weight ``weights`` = 1/|N(v)|."""

    nodes: int
    indptr: NDArray[np.int64]
    indices: NDArray[np.int64]
    weights: NDArray[np.float64]

    def apply(self, values: NDArray[np.float64], steps: int) -> NDArray[np.float64]:
        """P^steps · values (values of shape (n, ...))."""
        flat = values.reshape(self.nodes, -1)
        out = np.empty_like(flat)
        width = max(1, _GATHER // max(1, self.indices.size))
        starts = self.indptr[:-1]
        for first in range(0, flat.shape[1], width):
            x = flat[:, first : first + width]
            for _ in range(steps):
                x = np.add.reduceat(x[self.indices] * self.weights[:, None], starts, axis=0)
            out[:, first : first + width] = x
        return out.reshape(values.shape)

    def squared_apply(self, values: NDArray[np.float64], steps: int) -> NDArray[np.float64]:
        """(W∘W) · values with W = P^steps: Σ_u W[v, u]² values[u] for every v."""
        flat = values.reshape(self.nodes, -1)
        if steps <= 1:  # W is I or P itself: no rows to build
            squared = attrs.evolve(self, weights=np.square(self.weights))
            return squared.apply(values, steps)
        out = np.empty_like(flat)
        for start, stop, rows, cols, weights in self._blocks_of_w(steps):
            # every row of W is non-empty (so is every row of P): one segment per row
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            out[start:stop] = np.add.reduceat(
                flat[cols] * np.square(weights)[:, None], starts, axis=0
            )
        return out.reshape(values.shape)

    def _blocks_of_w(
        self, steps: int
    ) -> Iterator[tuple[int, int, NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]]:
        """The rows start … stop − 1 of W = P^steps, ``ROWS_PER_BLOCK`` at a time, as
        (start, stop, rows − start, columns, weights), sorted by row then column."""
        n = self.nodes
        lengths = np.diff(self.indptr)
        for start in range(0, n, ROWS_PER_BLOCK):
            stop = min(n, start + ROWS_PER_BLOCK)
            rows = np.arange(stop - start, dtype=np.int64)  # the block's rows of W = I
            cols = np.arange(start, stop, dtype=np.int64)
            weights = np.ones(stop - start)
            for _ in range(steps):  # W ← W·P, row by row of the block
                counts = lengths[cols]
                owner = np.repeat(np.arange(cols.size), counts)
                offset = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
                position = np.repeat(self.indptr[cols], counts) + offset
                key = rows[owner] * n + self.indices[position]
                order = np.argsort(key)
                key = key[order]
                starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # one per entry of W
                weights = np.add.reduceat((weights[owner] * self.weights[position])[order], starts)
                rows, cols = key[starts] // n, key[starts] % n
            yield start, stop, rows, cols, weights

    def device_apply(self, library: ArrayLibrary, values: Any, steps: int) -> Any:
        """P^steps · values for float64 values of shape (n, ...) on ``library``'s device."""
        if steps == 0:
            return values
        layout = _RowLayout.of(self.indptr, self.indices, self.weights).to(library)
        xp = library.xp
        flat = xp.reshape(values, (self.nodes, -1))
        for _ in range(steps):
            flat = layout.sums(flat)
        return xp.reshape(flat, tuple(values.shape))

    def device_squared_apply(self, library: ArrayLibrary, values: Any, steps: int) -> Any:
        """(W∘W) · values, W = P^steps, for float64 values of shape (n, ...) on the device."""
        if steps <= 1:
            squared = attrs.evolve(self, weights=np.square(self.weights))
            return squared.device_apply(library, values, steps)
        xp = library.xp
        flat = xp.reshape(values, (self.nodes, -1))
        parts = []
        for start, stop, rows, cols, weights in self._blocks_of_w(steps):
            indptr = np.zeros(stop - start + 1, dtype=np.int64)
            np.cumsum(np.bincount(rows, minlength=stop - start), out=indptr[1:])
            layout = _RowLayout.of(indptr, cols, np.square(weights)).to(library)
            parts.append(layout.sums(flat))
        return xp.reshape(xp.concat(parts, axis=0), tuple(values.shape))


@attrs.frozen(eq=False)
class _RowLayout:
    """Σ_e weights[e]·x[indices[e]] over each row of compressed rows, laid out for an array
    library: rows grouped by length into classes of width 2^c (padded with index 0 and weight
    0), each class one (rows, width) gather; ``inverse`` puts the classes' rows back in order.
    The arrays are numpy until :meth:`to` copies them to a device."""

    classes: tuple[tuple[Any, Any], ...]
    inverse: Any
    xp: Any = None

    @classmethod
    def of(
        cls, indptr: NDArray[np.int64], indices: NDArray[np.int64], weights: NDArray[np.float64]
    ) -> _RowLayout:
        lengths = np.diff(indptr)
        widths = np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64)  # exact at 2^c
        order = np.argsort(widths, kind="stable")
        inverse = np.empty(lengths.size, dtype=np.int64)
        inverse[order] = np.arange(lengths.size, dtype=np.int64)
        classes = []
        for c in np.unique(widths):
            rows = order[widths[order] == c]
            slots = np.arange(1 << int(c), dtype=np.int64)[None, :]
            valid = slots < lengths[rows][:, None]
            position = indptr[rows][:, None] + np.where(valid, slots, 0)
            if indices.size:
                position = np.minimum(position, indices.size - 1)  # padding of an empty row
                index = np.where(valid, indices[position], 0)
                weight = np.where(valid, weights[position], 0.0)
            else:
                index, weight = np.zeros(valid.shape, np.int64), np.zeros(valid.shape)
            classes.append((index.reshape(-1), weight))
        return cls(tuple(classes), inverse)

    def to(self, library: ArrayLibrary) -> _RowLayout:
        xp, device = library.xp, library.device
        moved = tuple(
            (xp.asarray(index, device=device), xp.asarray(weight, device=device))
            for index, weight in self.classes
        )
        return _RowLayout(moved, xp.asarray(self.inverse, device=device), xp)

    def sums(self, x: Any) -> Any:
        """The row sums for x of shape (n, columns), taken ``_GATHER`` elements at a time."""
        xp = self.xp
        padded = sum(int(index.shape[0]) for index, _ in self.classes)
        columns = int(x.shape[1])
        width = max(1, _GATHER // max(1, padded))
        pieces = []
        for first in range(0, max(columns, 1), width):
            block = x[:, first : min(first + width, columns)]
            parts = []
            for index, weight in self.classes:
                rows, slots = (int(size) for size in weight.shape)
                gathered = xp.reshape(
                    xp.take(block, index, axis=0), (rows, slots, int(block.shape[1]))
                )
                parts.append(xp.sum(gathered * weight[:, :, None], axis=1))
            pieces.append(xp.take(xp.concat(parts, axis=0), self.inverse, axis=0))
        return pieces[0] if len(pieces) == 1 else xp.concat(pieces, axis=1)


def _public(value: Any, field: str) -> Any:
    """A part of the graph as numpy: an array library's array is read on the host (a view of a
    host array, a copy of an accelerator's: the graph is public)."""
    library = array_library(value, owner="graph", field=field)
    if library is None:
        return value
    return library.host_view(value) if library.on_host else library.small_to_host(value)


def _indices(value: Any, field: str) -> NDArray[np.int64]:
    array = as_array(_public(value, field), owner="graph", field=field)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise InvalidData(
            f"graph: {field} must be two 1-D arrays of integer node indices, got shape "
            f"{array.shape} of {describe_dtype(array)}",
            field=field,
        )
    return array.astype(np.int64)


def _edge_pairs(graph: Any, nodes: int, field: str) -> tuple[NDArray[np.int64], ...]:
    """Every edge as (row, column) pairs, from a (sources, targets) tuple, compressed rows or a
    dense 0/1 adjacency; not yet checked for range or self loops (edges of the first two forms
    are made symmetric by the caller)."""
    if isinstance(graph, tuple):
        if len(graph) != 2:
            raise InvalidData(
                f"graph: {field} as a tuple must be (sources, targets), two index arrays; "
                f"got {len(graph)} items",
                field=field,
            )
        sources, targets = _indices(graph[0], field), _indices(graph[1], field)
        if sources.shape != targets.shape:
            raise InvalidData(
                f"graph: {field} has {sources.size} sources but {targets.size} targets",
                field=field,
            )
        return sources, targets
    if hasattr(graph, "indptr") and hasattr(graph, "indices"):  # compressed sparse rows
        indptr = as_array(_public(graph.indptr, field), owner="graph", field=field)
        if indptr.shape != (nodes + 1,) or indptr.dtype.kind not in "iu":
            raise InvalidData(
                f"graph: {field} in compressed rows must have {nodes + 1} row pointers (one "
                f"per node of the values, and one), got shape {indptr.shape}",
                field=field,
            )
        targets = _indices(graph.indices, field)
        lengths = np.asarray(np.diff(indptr.astype(np.int64)), dtype=np.int64)
        if indptr[0] != 0 or np.any(lengths < 0) or int(indptr[-1]) != targets.size:
            raise InvalidData(
                f"graph: {field} has row pointers that do not index its neighbours",
                field=field,
            )
        return np.repeat(np.arange(nodes, dtype=np.int64), lengths), targets
    matrix = as_array(_public(graph, field), owner="graph", field=field)
    if matrix.shape != (nodes, nodes):
        raise InvalidData(
            f"graph: {field} must be a square adjacency matrix of {nodes} nodes (one per row "
            f"of the values), a (sources, targets) tuple or compressed rows; got shape "
            f"{matrix.shape}",
            field=field,
        )
    if matrix.dtype.kind not in "biuf" or np.any((matrix != 0) & (matrix != 1)):
        raise InvalidData(f"graph: {field} must hold 0 or 1 (or booleans)", field=field)
    ones = matrix != 0
    if not np.array_equal(ones, ones.T):
        raise InvalidData(
            f"graph: {field} is not symmetric, so it is not an undirected graph", field=field
        )
    rows, cols = np.nonzero(ones)
    return rows.astype(np.int64), cols.astype(np.int64)


def mean_operator(
    graph: Any, nodes: int, *, self_loops: bool, field: str = "graph"
) -> MeanOperator:
    """P for ``graph`` on ``nodes`` nodes (module docstring); every edge is undirected, an edge
    given twice (in either orientation) is one edge, and a self loop in the graph is refused
    (``self_loops`` decides whether a node is its own neighbour)."""
    rows, cols = _edge_pairs(graph, nodes, field)
    if rows.size and (min(rows.min(), cols.min()) < 0 or max(rows.max(), cols.max()) >= nodes):
        raise InvalidData(
            f"graph: {field} name a node outside 0..{nodes - 1} (one node per row of the values)",
            field=field,
        )
    loops = rows == cols
    if np.any(loops):
        raise InvalidData(
            f"graph: {field} has a self loop at node {int(rows[loops][0])}; give the graph "
            "without them and choose self_loops=True to count each node in its neighbourhood",
            field=field,
        )
    keys = np.sort(np.concatenate([rows * nodes + cols, cols * nodes + rows]))
    keys = keys[np.r_[True, keys[1:] != keys[:-1]][: keys.size]]  # an edge given twice: one
    degree = np.bincount(keys // nodes, minlength=nodes)
    own = np.arange(nodes, dtype=np.int64)
    if not self_loops:
        own = own[degree == 0]  # an isolated node keeps its value
    keys = np.sort(np.concatenate([keys, own * nodes + own]))
    rows, cols = keys // nodes, keys % nodes
    counts = np.bincount(rows, minlength=nodes)
    indptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return MeanOperator(nodes, indptr, cols, 1.0 / counts[rows])

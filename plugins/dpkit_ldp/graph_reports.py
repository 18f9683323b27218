"""The noisy adjacency a graph's users send: :class:`AdjacencyReports`.

User i's report is their randomized neighbour list. In the ``"once"`` form (the lower
triangle; Imola, Murakami & Chaudhuri 2021, Section 4.1) user i reports a_ij for j < i only, so
every unordered pair is reported exactly once; in the ``"both"`` form user i reports every
j ≠ i, so every pair is reported twice, independently, once by each endpoint.

The reports of users ``first .. first + users − 1`` (a chunk; the whole graph by default) are
held in one of three encodings, chosen by the mechanism's ``output``:

``"dense"``
    a boolean matrix, row r = user ``first + r``, column j = the reported bit for node j
    (in the ``"once"`` form the columns j ≥ i are 0 and not reports);
``"packed"``
    the same matrix with eight bits per byte (``numpy.packbits`` along the rows): n²/8 bytes
    for the whole graph;
``"sparse"``
    the coordinates (reporter i, node j) of the reported 1s only, sorted: the form for large
    graphs whose reports are mostly 0 (asymmetric randomized response with a small μ).

Every encoding converts to every other; :meth:`ones` and :attr:`bits` (the number of reported
1s and of reported bits) are what the edge count needs, and :meth:`pair_counts` (how many
reports of 1 each pair received: 0, 1 or 2) what the triangle and degree estimators need.

**On an accelerator.** ``randomize_graph`` on a device adjacency gives reports whose
``matrix`` (or ``rows`` and ``cols``) are arrays of the caller's type on its device, kept as
they are (:attr:`library` says which). :meth:`ones` counts them there (one integer comes
back); the other readings (:meth:`dense`, :meth:`packed`, :meth:`coordinates`,
:meth:`pair_counts`, :meth:`pair_count_sums`) are numpy's and read such reports through
:meth:`to_host`, one copy of the reports to the host (of the released reports: the estimators'
post-processing, which reads nothing private). So every estimator of these reports takes them
as they are.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    Choice,
    Integer,
    InvalidData,
    array_library,
    as_array,
    parameter,
)

__all__ = ["ENCODINGS", "FORMS", "AdjacencyReports"]

#: The report forms: each pair reported by one endpoint (the lower triangle) or by both.
FORMS = ("once", "both")
#: The encodings of the reports.
ENCODINGS = ("dense", "packed", "sparse")


def _frozen(values: Any) -> Any:
    if values is None:
        return None
    library = array_library(values, owner="reports", field="reports")
    if library is not None and not library.on_host:
        return values  # an accelerator's array stays there (module docstring)
    array = np.asarray(values)
    array.setflags(write=False)
    return array


@attrs.frozen(eq=False)
class AdjacencyReports:
    """The reports of the users ``first .. first + users − 1`` of an ``nodes``-node graph.

    ``matrix`` holds the dense or packed encoding, ``rows``/``cols`` the sparse one. Build
    them with a mechanism's ``randomize_graph``, or with :meth:`from_dense` from users' own
    reports.
    """

    mechanism: str
    nodes: int = parameter(Integer(low=2), doc="number of nodes n of the graph")
    pairs: str = parameter(Choice(FORMS), doc="'once' (lower triangle) or 'both'")
    encoding: str = parameter(Choice(ENCODINGS), doc="'dense', 'packed' or 'sparse'")
    matrix: Any = attrs.field(default=None, converter=_frozen)
    rows: Any = attrs.field(default=None, converter=_frozen)
    cols: Any = attrs.field(default=None, converter=_frozen)
    first: int = parameter(Integer(low=0), doc="first reporting user", default=0)
    users: int | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if self.users is None:
            object.__setattr__(self, "users", self.nodes - self.first)
        users = self.count
        if self.first + users > self.nodes or users < 0:
            raise InvalidData(
                f"reports of users {self.first}..{self.first + users - 1} do not fit a graph "
                f"of {self.nodes} nodes",
                field="reports",
            )
        if self.encoding == "sparse":
            if (
                self.rows is None
                or self.cols is None
                or tuple(self.rows.shape) != tuple(self.cols.shape)
            ):
                raise InvalidData(
                    "sparse reports need rows and cols of one length", field="reports"
                )
        else:
            width = self.nodes if self.encoding == "dense" else -(-self.nodes // 8)
            if self.matrix is None or tuple(self.matrix.shape) != (users, width):
                shape = None if self.matrix is None else tuple(self.matrix.shape)
                raise InvalidData(
                    f"{self.encoding} reports of {users} users of a {self.nodes}-node graph "
                    f"must be a ({users}, {width}) matrix, got {shape}",
                    field="reports",
                )

    @property
    def library(self) -> ArrayLibrary | None:
        """The array library of reports held on an accelerator (None for numpy's)."""
        held = self.rows if self.encoding == "sparse" else self.matrix
        if isinstance(held, np.ndarray):
            return None
        return array_library(held, owner=self.mechanism, field="reports")

    def to_host(self) -> AdjacencyReports:
        """These reports with numpy arrays: a copy of an accelerator's to the host (the reports
        themselves when they are numpy's already)."""
        library = self.library
        if library is None:
            return self
        if self.encoding == "sparse":
            return attrs.evolve(
                self, rows=library.small_to_host(self.rows), cols=library.small_to_host(self.cols)
            )
        return attrs.evolve(self, matrix=library.small_to_host(self.matrix))

    @property
    def count(self) -> int:
        """The number of reporting users in this chunk."""
        assert self.users is not None  # set in __attrs_post_init__
        return self.users

    @property
    def complete(self) -> bool:
        """Whether these are the reports of every user of the graph."""
        return self.first == 0 and self.count == self.nodes

    @property
    def bits(self) -> int:
        """The number of bits reported: Σ over the users i of i (``"once"``) or n − 1."""
        start, stop = self.first, self.first + self.count
        if self.pairs == "once":
            return (stop * (stop - 1) - start * (start - 1)) // 2
        return self.count * (self.nodes - 1)

    @classmethod
    def from_dense(
        cls, mechanism: str, reports: Any, /, *, pairs: str = "once", first: int = 0
    ) -> AdjacencyReports:
        """From users' own reports: row r of ``reports`` is user ``first + r``'s noisy
        neighbour list of n bits (in the ``"once"`` form only its columns j < i are read; the
        diagonal is never a report)."""
        matrix = as_array(reports, owner=mechanism, field="reports")
        if matrix.ndim != 2 or matrix.dtype.kind not in "biuf":
            raise InvalidData(
                f"reports must be a 0/1 matrix, one row per user, got shape {matrix.shape}",
                field="reports",
            )
        if not np.all((matrix == 0) | (matrix == 1)):
            raise InvalidData("reports must hold 0 or 1", field="reports")
        users, nodes = matrix.shape
        ones = matrix.astype(np.bool_)
        ones &= _reported_mask(first, users, nodes, pairs)
        return cls(mechanism, nodes, pairs, "dense", matrix=ones, first=first, users=users)

    def dense(self) -> NDArray[np.bool_]:
        """The (users, n) boolean matrix of the reports."""
        if self.library is not None:
            return self.to_host().dense()
        if self.encoding == "dense":
            assert self.matrix is not None
            return np.asarray(self.matrix, dtype=np.bool_)
        if self.encoding == "packed":
            assert self.matrix is not None
            return np.unpackbits(self.matrix, axis=1, count=self.nodes).astype(np.bool_)
        out = np.zeros((self.count, self.nodes), dtype=np.bool_)
        assert self.rows is not None and self.cols is not None
        out[self.rows - self.first, self.cols] = True
        return out

    def packed(self) -> NDArray[np.uint8]:
        """The dense matrix, eight reports per byte along each row."""
        if self.library is not None:
            return self.to_host().packed()
        if self.encoding == "packed":
            assert self.matrix is not None
            return np.asarray(self.matrix, dtype=np.uint8)
        return np.packbits(self.dense(), axis=1)

    def coordinates(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(reporter, node) of every reported 1, sorted by reporter then node."""
        if self.library is not None:
            return self.to_host().coordinates()
        if self.encoding == "sparse":
            assert self.rows is not None and self.cols is not None
            return np.asarray(self.rows, np.int64), np.asarray(self.cols, np.int64)
        rows, cols = np.nonzero(self.dense())
        return rows.astype(np.int64) + self.first, cols.astype(np.int64)

    def ones(self) -> int:
        """The number of reported 1s (counted on the device for an accelerator's reports)."""
        library = self.library
        if library is not None and self.encoding != "sparse":
            xp = library.xp
            matrix = xp.astype(self.matrix, xp.int64)
            if self.encoding == "packed":  # the set bits of each byte
                shifts = xp.asarray(list(range(8)), dtype=xp.int64, device=library.device)
                matrix = (matrix[..., None] >> shifts) & 1
            return int(xp.sum(matrix))
        if self.encoding == "sparse":
            assert self.rows is not None
            return int(self.rows.shape[0])
        if self.encoding == "packed":
            assert self.matrix is not None
            return int(np.unpackbits(self.matrix).sum(dtype=np.int64))
        assert self.matrix is not None
        return int(np.count_nonzero(self.matrix))

    def pair_counts(self) -> NDArray[np.int8]:
        """The symmetric n×n matrix of how many reports of 1 each pair received (complete
        reports only): 0 or 1 in the ``"once"`` form, 0, 1 or 2 in the ``"both"`` form."""
        if self.library is not None:
            return self.to_host().pair_counts()
        self.require_complete("pair counts")
        if self.encoding == "sparse":
            rows, cols = self.coordinates()
            out = np.zeros((self.nodes, self.nodes), dtype=np.int8)
            np.add.at(out, (rows, cols), 1)
        else:
            out = self.dense().astype(np.int8)
        # "once": each pair sits in one triangle; "both": the two reports add up.
        symmetric: NDArray[np.int8] = out + out.T
        return symmetric

    def pair_count_sums(self) -> NDArray[np.int64]:
        """For every node v, the number of reports of 1 on the pairs {v, u} (complete reports
        only): the row sums of :meth:`pair_counts`, computed without the dense matrix."""
        if self.library is not None:
            return self.to_host().pair_count_sums()
        self.require_complete("per-node sums")
        rows, cols = self.coordinates()
        return np.bincount(rows, minlength=self.nodes) + np.bincount(cols, minlength=self.nodes)

    def require_complete(self, what: str) -> None:
        if not self.complete:
            raise InvalidData(
                f"{what} need the reports of every user of the graph; these are users "
                f"{self.first}..{self.first + self.count - 1} of {self.nodes}",
                field="reports",
            )


def _reported_mask(first: int, users: int, nodes: int, pairs: str) -> NDArray[np.bool_]:
    """Which entries of the rows ``first .. first + users − 1`` are reports."""
    user = np.arange(first, first + users)[:, None]
    column = np.arange(nodes)[None, :]
    return column < user if pairs == "once" else column != user

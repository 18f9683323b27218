"""Histogram: noisy counts of the records in each declared category (per group over a table)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CENTRAL_EPSILON,
    DELTA,
    Boolean,
    Choice,
    ColumnKind,
    InvalidParameter,
    Labels,
    lookup_index,
    parameter,
    resolve_rng,
)
from dpkit_central._query import (
    NAN_POLICY,
    AdditiveQuery,
    QueryResult,
    additive,
    noise_check,
    records,
    release,
)
from dpkit_central.accuracy import Accuracy, mode_of
from dpkit_central.keys import LABELS, coerce, matchable
from dpkit_central.records import CELL, looked_up, missing
from dpkit_central.statistic import (
    Contribution,
    Released,
    additive_accuracy,
    noisy,
)

__all__ = ["OTHER", "Histogram"]

#: The label of a histogram's trailing cell for records outside the declared categories
#: (``other=True``); a declared category may not equal it.
OTHER = "<other>"


@attrs.frozen
class Histogram(AdditiveQuery):
    """Noisy counts of the records in each declared category (Δ₁ = Δ₂ = 1 under add/remove).

    The categories are declared up front, never read from the data (reading them would leak
    which values occur). A record is matched to a category by a dictionary lookup on its Python
    value (so 3, 3.0 and numpy's int64(3) match the category 3, and True matches 1; text never
    matches an integer), which works for records of mixed types that cannot be sorted.
    A record outside the categories is **dropped** (a per-record transformation; no message
    ever names it), or with ``other=True`` counted in a trailing cell labelled
    :data:`OTHER` (``"<other>"``, which a declared category may then not equal): one record
    still moves one count by 1, so Δ₁ = Δ₂ = 1 either way. Missing values (NaN, None) are
    dropped (``nan="drop"``). ``noise`` as for :class:`Count`; the noise is independent per
    category (Dwork & Roth 2014, Section 3.3, histogram queries).
    """

    name: ClassVar[str] = "histogram"
    numeric: ClassVar[bool] = False
    #: Adding or removing one record moves one cell by 1 (its own, or the trailing one).
    changed_cells: ClassVar[int | None] = 1
    categories: tuple[Any, ...] = parameter(Labels(min_length=1), doc="the declared categories")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(
        Choice(("geometric", "laplace", "gaussian")), doc="noise distribution", default="geometric"
    )
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None): 'drop'", default="drop")
    other: bool = parameter(
        Boolean(),
        doc=f"count records outside the categories in a trailing {OTHER!r} cell (else drop them)",
        default=False,
    )

    def __attrs_post_init__(self) -> None:
        noise_check(self)
        if self.other and OTHER in self.categories:
            raise InvalidParameter(
                "categories",
                self.categories,
                f"labels other than {OTHER!r} when other=True (it names the trailing cell)",
                owner=self.name,
            )

    @property
    def sensitivity(self) -> float:
        return 1.0

    @property
    def cells(self) -> tuple[Any, ...]:
        """The labels of the released counts: the categories, then :data:`OTHER` if ``other``."""
        return (*self.categories, OTHER) if self.other else self.categories

    def counts(self, data: Any, /) -> NDArray[np.int64]:
        """The exact counts per cell (not private: for tests and for building on); total."""
        found = records(data, self.name)
        k = len(self.categories)
        cells = k + 1 if self.other else k
        if found.shape[0] == 0:
            return np.zeros(cells, dtype=np.int64)
        position = {c: i for i, c in enumerate(self.categories)}
        mapped = _category_positions(found, position)  # −1 outside the categories
        if self.other:
            mapped[mapped < 0] = k
        else:
            mapped = mapped[mapped >= 0]
        return np.bincount(mapped, minlength=cells).astype(np.int64)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = resolve_rng(rng, owner=self.name)[0]
        counts = self.counts(data)
        result = release(self.name, self.mechanism, counts, rng, changed=self.changed_cells)
        return attrs.evolve(result, categories=self.cells)

    # -- the table face (TableStatistic) -------------------------------------------------------

    value_kinds: ClassVar[tuple[ColumnKind, ...]] = LABELS
    needs_column: ClassVar[bool] = True
    reads_labels: ClassVar[bool] = True
    content: ClassVar[str | None] = CELL
    cell: ClassVar[str | None] = CELL

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        return "labels", tuple(str(c) for c in self.categories)

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        """The declared categories are distinct cells of the value column: two that are one
        value of its type (``1`` and ``"1"`` on a text column) are refused (the second would
        be a cell no record can reach: a histogram that says one thing and counts another)."""
        seen: dict[Any, Any] = {}
        for category in self.categories:
            try:
                cell = coerce(category, kind, column, dtype)
            except InvalidParameter:
                continue  # a category of another type can never match: its count is 0
            if seen.setdefault(cell, category) is not category:
                raise InvalidParameter(
                    "categories",
                    [seen[cell], category],
                    f"distinct values of the column {column!r}: both are {cell!r} in its type; "
                    "declare each category once",
                    owner=self.name,
                )

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """A row whose value is missing is dropped (``nan="drop"``)."""
        assert column is not None
        return frame, [~missing(nw, column, dtype)]

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        """Each row's category index :data:`CELL` (the categories matched in the column's
        type, :func:`~dpkit_central.keys.coerce`); a value outside them is dropped, or counted
        in the trailing cell with ``other``."""
        return _cells(nw, frame, column, self, kind, dtype)

    def table_aggregations(self, nw: Any) -> list[Any]:
        return []

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        """Per group, its count in each cell: a (groups, cells) matrix."""
        matrix = np.zeros((groups, len(self.cells)), dtype=np.int64)
        cell_of = table.get_column(CELL).to_numpy().astype(np.int64)
        np.add.at(matrix, (group, cell_of), found["count"])
        return {"cells": matrix}, None

    def changed(self, contribution: Contribution) -> int:
        """The cells one unit can change: G groups, each with its R rows in ≤ min(R, cells)."""
        return contribution.groups * min(contribution.rows, len(self.cells))

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        """An id's R rows in one group change that group's cells by R in L1 and at most R in
        L2 (all in one cell): Δ₁ = G·R, Δ₂ = √G·R, as a count's."""
        gaussian = self.noise == "gaussian"
        sensitivity = contribution.l2 if gaussian else contribution.l1
        return (additive(self.noise, self.epsilon, self.delta, sensitivity),)

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        (mechanism,) = self.table_noise(contribution)
        changed = self.changed(contribution)
        values = noisy(mechanism, aggregates.values["cells"], rng, changed)
        noise = mechanism.noise_for(rng, changed)
        return Released(values, mechanism.name, noise, categories=self.cells)

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        (mechanism,) = self.table_noise(contribution)
        return additive_accuracy(
            self.name,
            self.privacy,
            mechanism,
            alpha,
            mode_of(rng),
            self.changed(contribution),
            len(self.cells),
        )


def _category_positions(records: NDArray[Any], position: dict[Any, int]) -> NDArray[np.int64]:
    """Each record's category index (−1 outside the categories), by :func:`_lookup`.

    One lookup per distinct value when numpy can sort the records; records of mixed types that
    cannot be compared are looked up one by one instead (same result, slower).
    """
    try:
        unique, inverse = np.unique(records, return_inverse=True)
    except Exception:  # mixed types numpy cannot order: the per-record path
        return np.fromiter(
            (lookup_index(position, v) for v in records), dtype=np.int64, count=records.shape[0]
        )
    mapped = np.fromiter(
        (lookup_index(position, u) for u in unique), dtype=np.int64, count=unique.shape[0]
    )
    return np.asarray(mapped[inverse.ravel()], dtype=np.int64)


def _cells(
    nw: Any, frame: Any, column: str | None, stat: Histogram, kind: str, dtype: Any = None
) -> Any:
    """``CELL``: each record's category index (k for "other"; outside the categories dropped
    unless ``other``); missing values dropped (a histogram's ``nan="drop"``)."""
    assert column is not None
    k = len(stat.categories)
    mapping: dict[Any, int] = {}
    for i, category in enumerate(stat.categories):
        try:
            cell = coerce(category, kind, column, dtype)
        except InvalidParameter:
            continue  # a category of another type can never match: its count is 0
        if matchable(cell, dtype):
            mapping.setdefault(cell, i)
    frame = looked_up(frame, CELL, column, dtype, mapping, k if stat.other else -1).drop(column)
    return frame.filter(nw.col(CELL) >= 0)

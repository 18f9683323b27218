"""Count: the number of records (per group, over a table), plus noise of sensitivity 1 per
record (G·R per privacy unit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import CENTRAL_EPSILON, DELTA, Choice, ColumnKind, parameter, resolve_rng
from dpkit_central._query import (
    COUNT_NAN_POLICY,
    AdditiveQuery,
    QueryResult,
    additive,
    noise_check,
    records,
    release,
)
from dpkit_central.accuracy import Accuracy, mode_of
from dpkit_central.records import missing
from dpkit_central.statistic import (
    Contribution,
    Released,
    additive_accuracy,
    noisy,
    per_group,
)

__all__ = ["Count"]


@attrs.frozen
class Count(AdditiveQuery):
    """The number of records, plus noise of sensitivity 1 (add/remove one record).

    ``noise="geometric"`` (default) releases an integer (Ghosh et al. 2009), ``"laplace"`` a
    real (Dwork et al. 2006), ``"gaussian"`` a real with (ε, δ) (Balle & Wang 2018).
    With ``nan="drop"`` (default) only the non-missing records (not NaN, not None) are counted;
    with ``nan="keep"`` every record is. Records of any type are counted.
    """

    name: ClassVar[str] = "count"
    numeric: ClassVar[bool] = False
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
    nan: str = parameter(
        COUNT_NAN_POLICY,
        doc="missing values (NaN, None): 'drop' (not counted) or 'keep' (counted)",
        default="drop",
    )

    def __attrs_post_init__(self) -> None:
        noise_check(self)

    @property
    def sensitivity(self) -> float:
        return 1.0

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = resolve_rng(rng, owner=self.name)[0]
        found = records(data, self.name, drop_missing=self.nan == "drop")
        return release(self.name, self.mechanism, found.shape[0], rng)

    # -- the table face (TableStatistic) -------------------------------------------------------

    value_kinds: ClassVar[tuple[ColumnKind, ...]] = ("number", "boolean", "text", "object", "other")
    needs_column: ClassVar[bool] = False
    reads_labels: ClassVar[bool] = True
    content: ClassVar[str | None] = None
    cell: ClassVar[str | None] = None

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        return "labels", ()

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        return None

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """A count reads no value: with ``nan="drop"`` a row whose value is missing is dropped."""
        if column is None or self.nan == "keep":
            return frame, []
        return frame, [~missing(nw, column, dtype)]

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        # The value is not read, but a frame keeps its column as a constant: DuckDB has no
        # relation without columns, which a count of the only column would otherwise leave.
        return frame if column is None else frame.with_columns(nw.lit(True).alias(column))

    def table_aggregations(self, nw: Any) -> list[Any]:
        return []

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        return {"count": per_group(groups, group, found["count"])}, None

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        """The noise of the per-group counts: Δ₁ = G·R, Δ₂ = √G·R."""
        gaussian = self.noise == "gaussian"
        sensitivity = contribution.l2 if gaussian else contribution.l1
        return (additive(self.noise, self.epsilon, self.delta, sensitivity),)

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        (mechanism,) = self.table_noise(contribution)
        counts = aggregates.values["count"]
        values = noisy(mechanism, counts, rng, contribution.groups)
        return Released(values, mechanism.name, mechanism.noise_for(rng, contribution.groups))

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        (mechanism,) = self.table_noise(contribution)
        return additive_accuracy(
            self.name, self.privacy, mechanism, alpha, mode_of(rng), contribution.groups, 1
        )

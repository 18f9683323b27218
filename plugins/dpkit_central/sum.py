"""Sum: Σ clamp(x, lower, upper), per group over a table, plus noise of the derived
sensitivity max(|L|, |U|) per record (G·R times it per privacy unit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import Choice, parameter
from dpkit.params import BOUND, CENTRAL_EPSILON, DELTA
from dpkit.tables import ColumnKind
from dpkit_central._query import (
    NAN_POLICY,
    AdditiveQuery,
    QueryResult,
    additive,
    bounds_check,
    clamped,
    finite_sum,
    noise_check,
    noise_for,
    numeric_records,
    release,
)
from dpkit_central.accuracy import Accuracy, mode_of
from dpkit_central.records import VALUE, numeric_value
from dpkit_central.statistic import (
    Contribution,
    Released,
    additive_accuracy,
    fixed_point_step,
    noisy,
    per_group,
)

__all__ = ["Sum"]


@attrs.frozen
class Sum(AdditiveQuery):
    """Σ clamp(x, lower, upper) plus noise; Δ = max(|lower|, |upper|) under add/remove.

    ``noise="laplace"`` (default) or ``"gaussian"`` (with ``delta``).
    """

    name: ClassVar[str] = "sum"
    lower: float = parameter(BOUND, doc="lower clamping bound")
    upper: float = parameter(BOUND, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None, text): 'drop'", default="drop")

    def __attrs_post_init__(self) -> None:
        bounds_check(self)
        noise_check(self)

    @property
    def sensitivity(self) -> float:
        """max(|L|, |U|): adding or removing one record moves the sum by its clamped value."""
        return max(abs(self.lower), abs(self.upper))

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        values = numeric_records(data, self.name)
        total = finite_sum(clamped(values, self.lower, self.upper))
        return release(self.name, self.mechanism, total, rng)

    # -- the table face (TableStatistic) -------------------------------------------------------

    value_kinds: ClassVar[tuple[ColumnKind, ...]] = ("number", "boolean", "object")
    needs_column: ClassVar[bool] = True
    reads_labels: ClassVar[bool] = False
    content: ClassVar[str | None] = VALUE
    cell: ClassVar[str | None] = None

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        return "numbers", ()

    @property
    def step(self) -> float:
        """g: rows are summed as integers k = ⌊x/g + 1/2⌋ (:func:`fixed_point_step` of
        max(|L|, |U|)), so every engine sums them exactly and in any order."""
        return fixed_point_step(max(abs(self.lower), abs(self.upper)))

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        return None

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """The value as float64 (NaN where missing: dropped)."""
        frame = numeric_value(nw, frame, column, kind)
        return frame, [~nw.col(VALUE).is_nan()]

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        """The clamped value's fixed point k = ⌊clamp(x)/g + 1/2⌋ (monotone and shift-invariant
        in x/g, so a row moves a sum by at most max(|L|, |U|) + g/2)."""
        value = nw.col(VALUE).clip(self.lower, self.upper)
        fixed = (value / self.step + 0.5).floor().cast(nw.Int64)
        return frame.drop(column).with_columns(fixed.alias(VALUE))

    def table_aggregations(self, nw: Any) -> list[Any]:
        return [nw.col(VALUE).sum().alias("sum")]

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        """Per group its rows and its sum (the exact integer sum, times g)."""
        total = per_group(groups, group, found["sum"]).astype(np.float64) * self.step
        return {"count": per_group(groups, group, found["count"]), "sum": total}, None

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        """Noise of Δ₁ = G·R·c, Δ₂ = √G·R·c, where a row adds at most c = max(|L|, |U|) + g/2
        (the fixed point rounds by at most g/2)."""
        per_row = max(abs(self.lower), abs(self.upper)) + 0.5 * self.step
        gaussian = self.noise == "gaussian"
        sensitivity = (contribution.l2 if gaussian else contribution.l1) * per_row
        return (additive(self.noise, self.epsilon, self.delta, sensitivity),)

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        (mechanism,) = self.table_noise(contribution)
        values = noisy(mechanism, aggregates.values["sum"], rng, contribution.groups)
        return Released(values, mechanism.name, noise_for(mechanism, rng, contribution.groups))

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        (mechanism,) = self.table_noise(contribution)
        return additive_accuracy(
            self.name, self.privacy, mechanism, alpha, mode_of(rng), contribution.groups, 1
        )

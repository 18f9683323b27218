"""The release of a table query: one value (or a row of histogram cells) per group, with the
noise scale and a confidence interval per cell, and back as a table of the input's kind."""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    InvalidParameter,
    PrivacyEvent,
    error_text,
    json_value,
    narwhals,
    number,
    text_table,
)
from dpkit_central._noise import NOISE_INTERVAL, AdditiveNoise, symmetric_interval
from dpkit_central.intervals import MeanInterval, RankInterval, interval_document

__all__ = ["TableResult"]

#: The rows a printed release shows before it says how many more there are.
SHOWN = 20

#: Eager libraries a result table is built with, by the input's library (lazy inputs map to
#: an eager library of the same family — a Dask or Spark input gives a pandas table, as their
#: ``compute()`` and ``toPandas()`` do; anything else gets PyArrow).
_EAGER = {
    "polars": "polars",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "modin": "pandas",
    "dask": "pandas",
    "pyspark": "pandas",
    "pyspark_connect": "pandas",
}


@attrs.frozen
class TableResult:
    """One private release of a table query: a value (or a row of cells) per group.

    Attributes:
        query: the statistic (``"count"``, ``"sum"``, ...).
        by: the group columns (empty for an ungrouped query).
        keys: the released groups, one tuple per group.
        values: the released values: shape (groups,) or (groups, cells) for a histogram.
        mechanism: the noise mechanism (``"geometric"``, ``"laplace (sum and count)"``, ...).
        privacy: the accounting event spent (statistic and partition selection together).
        noise: the noise added to each value (None for mean and quantile).
        categories: a histogram's cells.
        parts: the mean's noisy centred sums and counts (released anyway).
        unit: the privacy unit, as JSON.
        backend: the library of the input table (the result table is built with it).
        interval: how a mean's or a quantile's interval is computed from public quantities
            and the released values (:mod:`dpkit_central.intervals`); None for answer + noise.
    """

    query: str
    by: tuple[str, ...]
    keys: tuple[tuple[Any, ...], ...]
    values: NDArray[Any]
    mechanism: str
    privacy: PrivacyEvent
    noise: AdditiveNoise | None = None
    categories: tuple[Any, ...] | None = None
    parts: tuple[TableResult, ...] = ()
    unit: dict[str, Any] = attrs.field(factory=lambda: {"kind": "record"})
    backend: str | None = None
    interval: MeanInterval | RankInterval | None = None

    @property
    def value(self) -> Any:
        """The released value(s): a scalar (or one histogram row) for an ungrouped query."""
        if not self.by and len(self.keys) == 1:
            row = self.values[0]
            return row.item() if np.ndim(row) == 0 else row
        return self.values

    @property
    def noise_scale(self) -> float | None:
        return None if self.noise is None else self.noise.scale

    @property
    def variance(self) -> float | None:
        return None if self.noise is None else self.noise.variance

    def noise_half_width(self, level: float = 0.95) -> float | None:
        """h with P[|noise| ≤ h] ≥ ``level`` for each value (None for mean and quantile)."""
        if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
            raise InvalidParameter("level", level, "a real number in (0, 1)", owner=self.query)
        return None if self.noise is None else self.noise.half_width(level)

    def confidence_interval(self, level: float = 0.95) -> tuple[Any, Any] | None:
        """Per value, an interval covering the exact (bounded) statistic with probability
        ≥ ``level`` (the privacy noise only): value ± the noise's half-width, or for a mean
        the ratio interval of :class:`~dpkit_central.intervals.MeanInterval`; None for a
        quantile, whose guarantee is in ranks (:meth:`rank_half_width`)."""
        half = self.noise_half_width(level)
        if half is not None or not isinstance(self.interval, MeanInterval):
            return symmetric_interval(self.value, half)
        parts = dict((part.query, part.values) for part in self.parts)
        low, high = self.interval.bounds(parts["centred_sum"], parts["count"], level)
        if not self.by and len(self.keys) == 1:
            return low[0].item(), high[0].item()
        return low, high

    def rank_half_width(self, level: float = 0.95) -> float | None:
        """A quantile's rank guarantee at ``level``: each released value's rank is within
        this many ranks of the best achievable (None for the other statistics)."""
        self.noise_half_width(level)  # checks the level
        if isinstance(self.interval, RankInterval):
            return self.interval.half_width(level)
        return None

    def interval_method(self, level: float = 0.95) -> str:
        """How the interval at ``level`` is computed, in words."""
        if self.interval is not None:
            return self.interval.method(level)
        return NOISE_INTERVAL

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The release in a result document (:class:`dpkit.document.Document`): the noise
        mechanism, the noise, the privacy unit, the groups, the values, their noise variance
        and intervals at ``confidence``."""
        out: dict[str, Any] = {"mechanism": {"noise": self.mechanism}}
        if self.noise is not None:
            out["noise"] = self.noise.describe()
        out["privacy_unit"] = self.unit
        if self.by:
            out["group_by"] = list(self.by)
            out["keys"] = [list(key) for key in self.keys]
        out.update(
            n=None,
            categories=list(self.categories) if self.categories else None,
            estimate=json_value(self.value),
            variance=json_value(self.variance),
            confidence_interval=interval_document(self, confidence),
        )
        return out

    def rows(self, level: float = 0.95) -> list[dict[str, Any]]:
        """One dict per released value: the group columns, the category (histogram), the
        value, the noise scale, the interval at ``level`` and how it was computed."""
        bounds = self.confidence_interval(level)
        low, high = (None, None) if bounds is None else bounds
        low = np.broadcast_to(np.asarray(low, dtype=np.float64), np.shape(self.values))
        high = np.broadcast_to(np.asarray(high, dtype=np.float64), np.shape(self.values))
        method = self.interval_method(level)
        out = []
        cells = self.categories if self.categories is not None else (None,)
        for key, row, row_low, row_high in zip(self.keys, self.values, low, high, strict=True):
            for cell, value, lo, hi in zip(
                cells,
                np.atleast_1d(row),
                np.atleast_1d(row_low),
                np.atleast_1d(row_high),
                strict=True,
            ):
                record: dict[str, Any] = dict(zip(self.by, key, strict=True))
                if self.categories is not None:
                    record["category"] = cell
                record["value"] = value.item() if hasattr(value, "item") else value
                record["noise_scale"] = self.noise_scale
                record["ci_lower"] = None if bounds is None else float(lo)
                record["ci_upper"] = None if bounds is None else float(hi)
                record["ci_method"] = method
                out.append(record)
        return out

    def __str__(self) -> str:
        """The release for reading: per group (and cell) the value with its 95% interval (±
        where symmetric, [lower, upper] for a mean, ± ranks for a quantile), then how the
        intervals were computed; the first :data:`SHOWN` rows."""
        rows = self.rows(0.95)
        ranks = self.rank_half_width(0.95)
        labels = [*self.by, *(["category"] if self.categories is not None else [])]
        shown = [
            [
                *(str(row[label]) for label in labels),
                f"{number(row['value'])} "
                f"{error_text(row['value'], row['ci_lower'], row['ci_upper'], ranks)}".rstrip(),
            ]
            for row in rows[:SHOWN]
        ]
        bounded = ranks is not None or any(row["ci_lower"] is not None for row in rows)
        groups = f"{len(self.keys)} group{'s' if len(self.keys) != 1 else ''}"
        lines = [f"{self.query} ({self.mechanism}): {groups}"]
        lines.append(text_table(shown, [*labels, "value (95%)" if bounded else "value"]))
        if len(rows) > SHOWN:
            lines.append(f"… and {len(rows) - SHOWN} more (all of them: .table() or .rows())")
        if bounded:
            lines.append(f"interval: {self.interval_method(0.95)}")
        return "\n".join(lines)

    def table(self, level: float = 0.95) -> Any:
        """The release as a table of the input's kind (pandas in, pandas out; Polars; PyArrow):
        group columns, ``category`` (histogram), ``value``, ``noise_scale``, ``ci_lower``,
        ``ci_upper`` (NaN where the statistic has no interval in its units: a quantile) and
        ``ci_method`` (how the interval is computed; a quantile's states its rank bound)."""
        nw = narwhals()
        rows = self.rows(level)
        columns = [*self.by, *(["category"] if self.categories is not None else [])]
        columns += ["value", "noise_scale", "ci_lower", "ci_upper", "ci_method"]
        data: dict[str, list[Any]] = {c: [r[c] for r in rows] for c in columns}
        for c in ("noise_scale", "ci_lower", "ci_upper"):
            data[c] = [math.nan if v is None else float(v) for v in data[c]]
        backend = _EAGER.get(self.backend or "", "pyarrow")
        return nw.from_dict(data, backend=backend).to_native()

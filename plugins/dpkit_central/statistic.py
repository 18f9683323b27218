"""The table face of a statistic: what :class:`~dpkit_central.tables.TableQuery` asks of it.

A table query is one generic pipeline (:mod:`dpkit_central.tables`): public checks, the
per-record steps, the contribution bounding, a group-by of elementary aggregations, partition
selection and the noise. Everything in it that depends on *which* statistic runs is asked of
the statistic through :class:`TableStatistic`, and every sensitivity derives from the
:class:`Contribution` one privacy unit can make (G groups, R rows in each), never from the
data. A statistic is one module implementing this protocol (:mod:`~dpkit_central.count`,
:mod:`~dpkit_central.sum`, :mod:`~dpkit_central.mean`, :mod:`~dpkit_central.histogram`,
:mod:`~dpkit_central.quantile`); this module also holds the steps several of them share.

**Per-record steps** (narwhals expressions, run where the rows are): :meth:`TableStatistic.
table_value` converts the value column (adding the working column :data:`VALUE` — float64,
NaN where missing — or nothing) and says which rows its missing-value policy drops; the
pipeline applies every drop in one filter; :meth:`TableStatistic.table_cells` then makes the
working column what is aggregated (a fixed-point integer, a lattice cell, a category index
:data:`CELL`) and drops the raw column. **Aggregation**: per group (and per :attr:`cell`) the
row count, plus :meth:`TableStatistic.table_aggregations`; collected as small arrays by
:meth:`TableStatistic.table_collect`. **Release** on the driver: :meth:`TableStatistic.
table_release` adds the noise calibrated to the contribution, :meth:`TableStatistic.
table_accuracy` says before any data is read how far each value may be off.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import ColumnKind, PrivacyEvent
from dpkit_central._noise import AdditiveNoise
from dpkit_central.accuracy import Accuracy
from dpkit_central.geometric import Geometric
from dpkit_central.intervals import MeanInterval, RankInterval
from dpkit_central.records import CELL, VALUE

__all__ = [
    "CELL",
    "SUM_BITS",
    "VALUE",
    "Contribution",
    "Released",
    "TableStatistic",
    "additive_accuracy",
    "cell_runs",
    "fixed_point_step",
    "noisy",
    "per_group",
]

#: Sums are accumulated in integers of g = 2^(⌈log₂ c⌉ − SUM_BITS) (c the largest |row|).
SUM_BITS = 30


@attrs.frozen
class Contribution:
    """What one privacy unit can change, from the declared unit and keys only: at most
    ``groups`` groups (G) and ``rows`` rows in each (R); a record unit is G = R = 1.

    An id moves each of its ≤ G groups' row count by ≤ R, so a vector of per-group totals
    whose rows each add at most c moves by at most G·R·c in L1 and √(G·(R·c)²) = √G·R·c in L2.
    """

    groups: int
    rows: int

    @property
    def l1(self) -> float:
        """G·R: the L1 change of per-group row counts."""
        return float(self.groups * self.rows)

    @property
    def l2(self) -> float:
        """√G·R: the L2 change of per-group row counts."""
        return math.sqrt(self.groups) * self.rows


@attrs.frozen
class Released:
    """What a statistic's noisy release gives the result: the values (one per group, or a row
    of cells per group), the mechanism's name, its noise (None when not answer + noise), the
    released parts of a composite statistic (name, values, noise), the labels of a row of
    cells, and the rule for the interval of a statistic that is not answer + noise
    (:mod:`dpkit_central.intervals`)."""

    values: NDArray[Any]
    mechanism: str
    noise: AdditiveNoise | None = None
    parts: tuple[tuple[str, NDArray[Any], AdditiveNoise | None], ...] = ()
    categories: tuple[Any, ...] | None = None
    interval: MeanInterval | RankInterval | None = None


@runtime_checkable
class TableStatistic(Protocol):
    """A statistic a :class:`~dpkit_central.tables.TableQuery` runs per group (see the module
    docstring for where each method is called)."""

    name: ClassVar[str]
    #: The column kinds the value column may have (:data:`dpkit.tables.ColumnKind`).
    value_kinds: ClassVar[tuple[ColumnKind, ...]]
    #: Whether the statistic reads a value column (a count of rows reads none).
    needs_column: ClassVar[bool]
    #: Whether the value column holds labels (an ``object`` column read as text) rather than
    #: numbers.
    reads_labels: ClassVar[bool]
    #: The working column whose content keys the bounding's row priorities (None: the row's
    #: id and group only).
    content: ClassVar[str | None]
    #: The working column the engine groups by beside the keys (a category, a lattice cell).
    cell: ClassVar[str | None]

    @property
    def privacy(self) -> PrivacyEvent: ...

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        """How a file's value column is read (:mod:`dpkit.spec.columnar`): ``("numbers", ())``
        or ``("labels", texts kept even if they spell a missing token)``."""
        ...

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        """Public phase: refuse what the value column's type makes wrong (from the schema and
        the parameters only); most statistics have nothing to add."""
        ...

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """The value column converted for aggregation, and the expressions of the rows to
        keep (the missing-value policy); per record, total."""
        ...

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        """After the drops: the working column that is aggregated, the raw column dropped."""
        ...

    def table_aggregations(self, nw: Any) -> list[Any]:
        """Per-group aggregations beside the row count (``count``), as named expressions."""
        ...

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        """The collected group-by (``group``: each row's group index among ``groups``;
        ``found``: its integer columns) as per-group arrays, and a quantile's lattice runs
        (None for the others)."""
        ...

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        """The mechanisms that will draw the noise at the bounded sensitivity (built at the
        query's construction: a parameter they refuse is refused then, not after the spend)."""
        ...

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        """The noisy release of the per-group aggregates (on the driver)."""
        ...

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        """The cost, noise and (1 − α) half-width of each released value, before any data."""
        ...


def fixed_point_step(largest: float) -> float:
    """g = 2^(⌈log₂ c⌉ − :data:`SUM_BITS`), c the largest |value| one row adds to a sum: the
    fixed-point step sums are accumulated in (exact integer sums on every engine)."""
    return math.ldexp(1.0, math.frexp(largest)[1] - SUM_BITS)


def per_group(groups: int, group: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[Any]:
    """Σ of ``counts`` per group index (the rows of one group may come in several pieces)."""
    total = np.zeros(groups, dtype=np.int64)
    np.add.at(total, group, counts)
    return total


def cell_runs(
    groups: int, group: NDArray[np.int64], cells: NDArray[np.float64], counts: NDArray[np.int64]
) -> tuple[tuple[NDArray[np.float64], NDArray[np.int64]], ...]:
    """Per group, its distinct cells in increasing order and the rows in each."""
    order = np.lexsort((cells, group))
    bounds = np.searchsorted(group[order], np.arange(groups + 1))
    return tuple((cells[order[a:b]], counts[order[a:b]]) for a, b in itertools.pairwise(bounds))


def noisy(mechanism: Any, answers: NDArray[Any], rng: Any, changed: int) -> NDArray[Any]:
    """``answers`` (any shape) plus the mechanism's noise; secure lattice noise covers the
    rounding of ``changed`` coordinates (one unit changes at most that many). Integer answers
    of a geometric mechanism are exact: its ``coerce`` keeps them."""
    flat = np.asarray(answers).reshape(-1)
    if flat.size == 0:
        return np.zeros(np.shape(answers), dtype=np.float64).reshape(-1)
    if isinstance(mechanism, Geometric):
        out = mechanism.randomize(mechanism.coerce(flat), rng=rng)
    else:
        coerced = mechanism.coerce(flat) if hasattr(mechanism, "coerce") else flat
        out = mechanism.randomize(coerced, rng=rng, changed=changed)
    return np.asarray(out).reshape(np.shape(answers))


def additive_accuracy(
    name: str,
    privacy: PrivacyEvent,
    mechanism: Any,
    alpha: float,
    rng: Any,
    changed: int,
    cells: int,
) -> Accuracy:
    """The accuracy of answer + the noise of ``mechanism`` in the mode of ``rng``."""
    noise = mechanism.noise_for(rng, changed)
    return Accuracy(name, privacy, 1.0 - alpha, noise, noise.half_width(1.0 - alpha), cells=cells)

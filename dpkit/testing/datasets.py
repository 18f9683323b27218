"""Neighbouring *datasets* for auditing whole queries, under the query's relation.

A query (a statistic over a dataset: count, sum, histogram, ...) protects one *record* under
the add/remove-one relation: D′ = D ∪ {r} or D \\ {r} (unbounded DP; Dwork & Roth 2014,
Section 2.3). Auditing the whole release on such neighbours — rather than a noise mechanism at
a sensitivity the author declares — catches the commonest real bug, a wrong sensitivity
(a sum that forgets to clamp, a count with half the noise, a mean calibrated for replace-one),
without the author having to state the sensitivity at all.

A relation is a :class:`~dpkit.plugin.Domain` whose elements are datasets and which declares its
neighbours (``pairs()``, ``neighbours(rng, n)``, ``are_neighbours(d, d′)``), exactly as an
input domain does for a mechanism, plus ``describe(dataset)`` for reports. :class:`AddRemoveOne`
builds 1-D numpy columns, the input of the queries' ``run(data, /, *, rng)``. An id-level
relation (remove one person's rows, for queries whose privacy unit is an id with contribution
bounds) is another such class whose datasets are tables: pass it as ``relation=`` to
:func:`dpkit.testing.audit_query`.

The records come from public information only — the query's declared parameters — so that the
worst cases of the usual queries are reached whatever their bounds (:func:`records_for`):

* ``0``, a missing value (NaN), and ``±B`` with B = 2·max|v| + 1 over the finite real
  parameter values v of the query: beyond every declared bound, so a clamping query clamps them
  to its bounds (the records that move a clamped sum or mean the most) and a query that forgets
  to clamp moves by more than its declared sensitivity;
* the first and last element of each sequence parameter (declared categories) and, when those
  are labels, one label outside them.

The pairs to screen are then the empty dataset against each single record, ``[e]`` against
``[e, e]``, and the dataset of every record once against it plus ``e``, for e in ``−B``, ``+B``
and the first category (both ways round).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.domains import Domain
from dpkit.params import parameter_specs

__all__ = ["UNLISTED", "AddRemoveOne", "records_for"]

#: A label outside every declared category list (a record a histogram must drop or count apart).
UNLISTED = "<not a declared category>"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _column(records: Sequence[Any]) -> NDArray[Any]:
    """A 1-D column: float64 when every record is a number (NaN included), object otherwise."""
    if all(_is_number(r) for r in records):
        return np.asarray([float(r) for r in records], dtype=np.float64)
    column = np.empty(len(records), dtype=object)
    column[:] = list(records)
    return column


def _record_key(record: Any) -> str:
    return repr(float(record)) if _is_number(record) else repr(record)


@attrs.frozen
class AddRemoveOne(Domain):
    """Datasets of ``records`` (1-D columns) that neighbour when one has one record more.

    ``pairs()`` gives, both ways round, the empty dataset against each single record, one
    ``extremes`` record against two copies of it, and the ``base`` dataset (every record once)
    against it plus one more ``extremes`` record — the extreme values, where a sum or mean
    moves most, and the declared categories. The one-against-two pairs expose releases whose
    noise depends on the number of records (n is private under add/remove).
    ``neighbours(rng, n)`` draws datasets of 0 to 5 records and adds one more.
    """

    records: tuple[Any, ...] = attrs.field(converter=tuple)
    extremes: tuple[Any, ...] = attrs.field(converter=tuple, default=())
    relation: ClassVar[str] = "add or remove one record (unbounded DP)"  # type: ignore[misc]

    def column(self, records: Sequence[Any]) -> NDArray[Any]:
        """The dataset holding ``records``, typed as every dataset of this relation."""
        if all(_is_number(r) for r in self.records):
            return _column(records)
        column = np.empty(len(records), dtype=object)
        column[:] = list(records)
        return column

    def pairs(self) -> list[tuple[Any, Any]]:
        found: list[tuple[list[Any], list[Any]]] = [([], [r]) for r in self.records]
        found += [([r], [r, r]) for r in self.extremes]
        base = list(self.records)
        found += [(base, [*base, r]) for r in self.extremes]
        return [
            (self.column(a), self.column(b))
            for small, large in found
            for a, b in ((small, large), (large, small))
        ]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for _ in range(max(n, 0)):
            size = int(rng.integers(0, 6))
            small = [self.records[i] for i in rng.integers(0, len(self.records), size)]
            large = [*small, self.records[int(rng.integers(0, len(self.records)))]]
            pair = (self.column(small), self.column(large))
            out.append(pair if rng.random() < 0.5 else pair[::-1])
        return out

    def are_neighbours(self, x: Any, y: Any) -> bool:
        """Two 1-D datasets whose multisets of records differ by exactly one record."""
        a, b = np.asarray(x, dtype=object), np.asarray(y, dtype=object)
        if a.ndim != 1 or b.ndim != 1 or abs(len(a) - len(b)) != 1:
            return False
        small, large = (a, b) if len(a) < len(b) else (b, a)
        extra = Counter(_record_key(r) for r in large.tolist())
        extra.subtract(_record_key(r) for r in small.tolist())
        return sorted(extra.values()) == [0] * (len(extra) - 1) + [1]

    def describe(self, dataset: Any) -> str:
        values = np.asarray(dataset, dtype=object).tolist()
        shown = ", ".join(_show(v) for v in values)
        return f"[{shown}]"


def _show(value: Any) -> str:
    if _is_number(value):
        number = float(value)
        return "nan" if math.isnan(number) else f"{number:g}"
    return repr(value)


def records_for(query: Any) -> AddRemoveOne:
    """The add/remove-one relation over records built from ``query``'s declared parameters.

    See the module docstring; only public, declared parameter values are read.
    """
    numbers: list[float] = []
    categories: list[Any] = []
    for name in parameter_specs(type(query)):
        value: Any = getattr(query, name, None)
        if _is_number(value) and math.isfinite(float(value)):
            numbers.append(abs(float(value)))
        elif isinstance(value, (list, tuple)) and value:
            categories += [value[0], value[-1]] if len(value) > 1 else [value[0]]
    reach = 2.0 * max([1.0, *numbers]) + 1.0
    extremes: list[Any] = [-reach, reach]
    distinct: list[Any] = []
    for category in categories:
        if all(_record_key(category) != _record_key(c) for c in distinct):
            distinct.append(category)
    if any(not _is_number(c) for c in distinct):
        distinct.append(UNLISTED)
    records: list[Any] = [0.0, -reach, reach, math.nan, *distinct]
    return AddRemoveOne(records, extremes=[*extremes, *distinct[:1]])

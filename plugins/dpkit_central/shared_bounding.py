"""Several table queries over one table's rows, bounded once for all of them.

A statement that asks several aggregates of one table under one id unit — ``COUNT(*)``,
``SUM(x)`` and ``AVG(y)`` per city — bounds each person's rows *once*
(:func:`bound_together`): at most G groups per id and R rows per (id, group), the same rows
for every aggregate, which then reads them (:meth:`BoundedRows.aggregate`). That is the
statement-level bounding of SQL systems (Wilson et al. 2020, "Differentially Private SQL with
Bounded User Contribution", PoPETs, Section 3; SmartNoise SQL's per-person row sample): the
aggregates describe one set of rows — a mean agrees with the count and the sum beside it —,
and the bounding's work is done once instead of once per aggregate.

**Why each aggregate keeps its sensitivity.** The rows kept of an id are a function of that
id's rows only (:mod:`dpkit.tables.bounding`; the priorities are keyed by the row's id, group
and the values the aggregates read), so adding one id adds at most R rows in each of at most
G groups to the bounded rows and changes no other id's. Each aggregate then drops the rows
its own policy drops (a missing value, a key not among its public keys) — a per-row filter,
which can only remove rows — and aggregates the rest: its pre-noise aggregates move by at
most its bounded sensitivity (:mod:`dpkit_central.tables`), as if it had bounded on its own.
An aggregate that allows one row per (id, group) (``COUNT(DISTINCT id)``) reads the first
kept row of each pair (:data:`~dpkit.tables.bounding.FIRST`), and a query with private keys
counts a group's ids (what partition selection reads) by those first rows that its own drops
keep — at most one per id and group, so the selection's sensitivity holds; a SQL statement
selects its groups with a count of rows, which drops none.

**The rows' content.** A row's priority is keyed by the float64 value each numeric statistic
reads (its :func:`~dpkit_central.records.numeric_value`) and by whether each other query's
value is missing: rows equal in all of them add the same to every aggregate, so they are
interchangeable and are numbered among themselves (:func:`~dpkit.tables.bounding.values_content`),
and the rows kept never depend on row order or on the engine. The rows are bounded *before*
any aggregate drops its missing values (a person's row whose ``x`` is missing still counts
in ``COUNT(*)``): an aggregate may thus read fewer than R of a person's rows where some of
them miss its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from dpkit.plugin import (
    Bounding,
    BoundingKey,
    IdUnit,
    InvalidParameter,
    as_frame,
    bound_contributions,
    column_kinds,
    narwhals,
    per_record,
    resolve_rng,
)
from dpkit_central.aggregates import Aggregates
from dpkit_central.keys import PublicKeys
from dpkit_central.records import VALUE, missing, numeric_value

if TYPE_CHECKING:
    from dpkit_central.tables import TableQuery

__all__ = ["BoundedRows", "bound_together"]

_CONTENT = "__dpkit_content"


@attrs.frozen(eq=False)
class BoundedRows:
    """A table's rows bounded once (:func:`bound_together`) and the bounds they were
    bounded with; :meth:`aggregate` runs a query over them."""

    frame: Any
    unit: IdUnit
    by: tuple[str, ...]

    def aggregate(self, query: TableQuery) -> Aggregates:
        """Steps 1 and 3 of ``query`` over these rows (its pre-noise aggregates; not private);
        ``query`` must have the bounding's id column, groups and G, and its R or one row per
        (id, group); its keys may be any (public keys, such as groups selected from these
        rows, filter them)."""
        _check_compatible(query, self.unit, self.by)
        return query._bounded_aggregate(self.frame)


def bound_together(queries: Sequence[TableQuery], data: Any, /, *, rng: Any = None) -> BoundedRows:
    """The rows of ``data`` bounded once for ``queries`` (see the module docstring): each
    id keeps at most G groups and R rows per group, the largest R of the queries (each
    must have R or 1), the same rows for every query. With one key column and public keys
    common to all queries, rows of other keys are dropped first (as each query would)."""
    if not queries:
        raise InvalidParameter("queries", queries, "at least one table query", owner="table")
    head = queries[0]
    unit = head.unit
    if not isinstance(unit, IdUnit):
        raise InvalidParameter(
            "unit", unit.describe(), "an id unit (rows are bounded per id)", owner=head.name
        )
    rows = max(q.unit.max_rows for q in queries if isinstance(q.unit, IdUnit))
    bounds = IdUnit(unit.column, max_rows=rows, max_groups=unit.max_groups)
    for query in queries:
        _check_compatible(query, bounds, head.by)
    generator = resolve_rng(rng, owner=head.name)[0]
    frame = as_frame(data, owner=head.name)
    schema = dict(frame.collect_schema())
    kinds = column_kinds(frame)
    shared = _shared_keys(queries)
    keys = head._coerced_keys(kinds, schema) if shared else None
    readers = _readers(queries)
    columns = list(dict.fromkeys([*head.by, unit.column, *(column for column, _ in readers)]))

    nw = narwhals()
    # A float64 value is its own content (no copy); another is read as its statistic reads
    # it (numeric_value), or by whether it is missing.
    contents = [
        column if numeric and schema[column] == nw.Float64 else f"{_CONTENT}{index}"
        for index, (column, numeric) in enumerate(readers)
    ]
    added = [c for c in contents if c.startswith(_CONTENT)]

    def records(part: Any) -> Any:
        part, keep = head._key_steps(
            part, columns, kinds=kinds, schema=schema, keys=keys, values=False
        )
        for (column, numeric), content in zip(readers, contents, strict=True):
            if content == column:
                continue
            if numeric:
                part = numeric_value(nw, part, column, kinds[column]).rename({VALUE: content})
            else:
                flag = missing(nw, column, schema[column]).cast(nw.Float64)
                part = part.with_columns(flag.alias(content))
        return head._drop(part, keep, schema=schema, keys=keys)

    bounding = Bounding(
        id_column=unit.column,
        by=head.by,
        content=None,
        max_rows=rows,
        max_groups=unit.require_groups() if head.by else None,
        key=BoundingKey.draw(generator),
        values=tuple(contents),
    )
    bounded = bound_contributions(per_record(frame, records), bounding)
    if added:
        bounded = bounded.drop(*added)
    return BoundedRows(bounded, bounds, head.by)


def _readers(queries: Sequence[TableQuery]) -> list[tuple[str, bool]]:
    """The distinct (value column, read as a number) of the queries: what keys a row's
    content."""
    found: dict[tuple[str, bool], None] = {}
    for query in queries:
        if query.column is not None:
            numeric = query.statistic.file_cells()[0] == "numbers"
            found[(query.column, numeric)] = None
    return list(found)


def _shared_keys(queries: Sequence[TableQuery]) -> bool:
    """Whether every query has the same public keys (then rows of other keys go first)."""
    head = queries[0].keys
    return isinstance(head, PublicKeys) and all(q.keys == head for q in queries)


def _check_compatible(query: TableQuery, unit: IdUnit, by: tuple[str, ...]) -> None:
    own = query.unit
    if (
        not isinstance(own, IdUnit)
        or own.column != unit.column
        or own.max_groups != unit.max_groups
        or own.max_rows not in (1, unit.max_rows)
        or query.by != by
    ):
        raise InvalidParameter(
            "unit",
            own.describe(),
            f"the id column, groups {list(by)} and max_groups of the rows' bounding "
            f"({unit.describe()}), with its max_rows or 1",
            owner=query.name,
        )

"""A SQL statement as a query a :class:`~dpkit.Session` releases.

:func:`sql` turns a statement (:mod:`dpkit.sql_statements.plan`) into table queries of the existing plan
(:mod:`dpkit_central.tables`), one per aggregate, over one *row-level table*: the rows the
statement's WHERE keeps, with its GROUP BY expressions (``__g0``, ...), its aggregates'
arguments (``__v0``, ...) and the privacy unit's column, computed by DuckDB
(:mod:`dpkit.sql_statements.sources`), or by Spark for a Spark DataFrame
(:mod:`dpkit.sql_statements.spark`). So the privacy code, the accuracy preview and the ledger are those
of every other table query; the SQL adds no mechanism.

**Budget.** The statement's ε (and δ) is its total: with k aggregates it is shared equally,
ε/k each (ε/(k + 1) with private keys, the last share being partition selection's); δ goes
to partition selection and the Gaussian aggregates, equally. The release's event is the
composition of the parts (:class:`~dpkit.privacy.CompositeDP`; basic composition, Dwork & Roth
2014, Theorem 3.16, or each accountant's own rule), and each share is rounded down so that
the parts never add up to more than what the statement asked for.

**Keys.** Public keys (``keys=`` beside the query, or ``public_groups`` naming a public
table) are released whatever the data hold. Otherwise the groups are found in the data and
*one* partition selection (:mod:`dpkit_central.partition_selection`, on the number of ids per
group after bounding) decides which are released; every aggregate is then computed over the
selected groups, used as public keys — a function of a DP release, so post-processing — and
the statement's groups are released together, never one aggregate's groups without another's.

**Phases.** :func:`sql` checks the statement, its options and bounds (no table is looked at);
:meth:`SqlQuery.check_input` binds the row-level statement to each table's *schema* and runs
it on no rows (a joined public lookup table is read whole, its key checked unique:
:mod:`dpkit.sql_statements.joins`), then each table query's public checks; only :meth:`SqlQuery.run`, after the
spend, reads rows. HAVING, ORDER BY, LIMIT and the SELECT list's arithmetic run on the
released table (post-processing).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any, TypeVar

import attrs
import numpy as np

from dpkit.errors import InvalidData, InvalidParameter, MissingDependency, SqlError
from dpkit.privacy import CompositeDP, PrivacyEvent
from dpkit.sql_statements.joins import align, check_joins, join_sql, register_public
from dpkit.sql_statements.plan import RELEASED, SOURCE, Aggregate, Plan, plan_statement
from dpkit.sql_statements.sources import connect, describe, invalid_parquet_text, relation
from dpkit.sql_statements.spark import is_spark
from dpkit.tables._duckdb import connection
from dpkit.tables.frame import as_frame, implementation
from dpkit.units import IdUnit, RecordUnit

__all__ = ["SqlQuery", "SqlResult", "sql"]

OUTPUTS = ("pandas", "polars", "arrow", "duckdb")
#: The released table's column of each row's group (its position in the released keys),
#: carried through the post-processing so that each output row finds its intervals.
GROUP = "__dpkit_group"
_Released = TypeVar("_Released")
BOUNDINGS = ("numpy", "duckdb")
_STATISTIC = {
    "count": "count",
    "count_values": "count",
    "count_distinct": "count",
    "sum": "sum",
    "mean": "mean",
    "quantile": "quantile",
}


def _share(total: float, parts: int) -> float:
    """The largest float s with parts · s ≤ total exactly (a share that never overspends)."""
    exact = Fraction(total) / parts
    share = float(exact)
    while Fraction(share) * parts > Fraction(total):
        share = math.nextafter(share, -math.inf)
    return share


def _option(plan: Plan, name: str, default: Any = None) -> Any:
    found = plan.options.get(name)
    return default if found is None else found.value


def _option_error(plan: Plan, name: str, reason: str) -> SqlError:
    found = plan.options.get(name)
    return SqlError(
        f"{name}: {reason}",
        clause="OPTIONS",
        line=found.line if found else 0,
        column=found.column if found else 0,
    )


def _whole(plan: Plan, name: str, default: int | None) -> int | None:
    value = _option(plan, name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _option_error(plan, name, f"must be a whole number >= 1, got {value!r}")
    return value


def _real(plan: Plan, name: str, default: float | None) -> float | None:
    value = _option(plan, name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _option_error(plan, name, f"must be a finite number, got {value!r}")
    return float(value)


@attrs.frozen
class SqlResult:
    """A released SQL statement: the output table (after HAVING, ORDER BY and LIMIT) and
    each aggregate's :class:`~dpkit_central.TableResult` (its noise and intervals)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    parts: tuple[tuple[str, Any], ...]
    output: str = "pandas"
    #: Per row, its group's position in each part's keys (rows may be filtered and ordered).
    groups: tuple[int, ...] = ()
    #: Per column, the text of the aggregate it shows as released (None: a group column or an
    #: expression of several values, which has no interval of its own).
    shown: tuple[str | None, ...] = ()
    #: The columns that show a group's key (the others are released values or expressions).
    key_columns: tuple[str, ...] = ()

    def intervals(self, level: float = 0.95) -> tuple[tuple[dict[str, Any] | None, ...], ...]:
        """Per row and column, the uncertainty of a cell that shows one aggregate as released,
        as that aggregate's own interval (:meth:`dpkit_central.TableResult.confidence_interval`):
        ``{"lower", "upper"}`` covering its exact bounded value with probability ≥ ``level``
        (the privacy noise only), or for a quantile ``{"half_width", "unit": "ranks"}``; None
        for the other cells."""
        parts = dict(self.parts)
        by_column = [
            None if text is None else _cell_intervals(parts[text], level) for text in self.shown
        ]
        return tuple(
            tuple(None if found is None else found[group] for found in by_column)
            for group in self.groups
        )

    def __str__(self) -> str:
        """The released table for reading: each value that is an aggregate as released with
        its 95% interval (± where symmetric, [lower, upper] for a mean, ± ranks for a
        quantile), then how each column's interval was computed."""
        from dpkit._summary import text_table

        intervals = self.intervals() if self.rows else ()
        shown = [
            [_with_error(value, error) for value, error in zip(row, errors, strict=True)]
            for row, errors in zip(self.rows, intervals, strict=True)
        ]
        text = text_table(shown, list(self.columns))
        parts = dict(self.parts)
        methods: dict[str, list[str]] = {}
        for at, (column, aggregate) in enumerate(zip(self.columns, self.shown, strict=True)):
            if aggregate is not None and any(errors[at] for errors in intervals):
                methods.setdefault(parts[aggregate].interval_method(0.95), []).append(column)
        for method, columns in methods.items():
            text += f"\n{', '.join(columns)} (95%): {method}"
        return text

    def table(self, kind: str | None = None) -> Any:
        """The released table as ``kind`` (default: the query's ``output``): a pandas or
        Polars DataFrame, a PyArrow table or a DuckDB relation."""
        kind = kind or self.output
        if kind not in OUTPUTS:
            raise InvalidParameter("output", kind, f"one of {', '.join(OUTPUTS)}", owner="sql")
        import pyarrow as pa

        arrow = pa.table(
            {c: [row[i] for row in self.rows] for i, c in enumerate(self.columns)}
            if self.rows
            else {c: pa.array([], pa.null()) for c in self.columns}
        )
        if kind == "arrow":
            return arrow
        if kind == "pandas":
            return arrow.to_pandas()
        if kind == "polars":
            import polars as pl

            return pl.from_arrow(arrow)
        return connect().from_arrow(arrow)

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The result as JSON: the output table's rows, and each aggregate's own document."""
        return {
            "kind": "sql",
            "columns": list(self.columns),
            "rows": [[_plain(v) for v in row] for row in self.rows],
            "key_columns": list(self.key_columns),
            "intervals": {
                "level": confidence,
                "cells": [list(row) for row in self.intervals(confidence)],
            },
            "aggregates": {
                name: part.to_document(confidence=confidence) for name, part in self.parts
            },
        }


def _cell_intervals(part: Any, level: float) -> list[dict[str, Any] | None]:
    """One aggregate's uncertainty per released group (:meth:`SqlResult.intervals`)."""
    groups = len(part.keys)
    ranks = part.rank_half_width(level)
    if ranks is not None:
        return [{"half_width": float(ranks), "unit": "ranks"}] * groups
    bounds = part.confidence_interval(level)
    if bounds is None:
        return [None] * groups
    lower, upper = (np.broadcast_to(np.asarray(b, dtype=np.float64), (groups,)) for b in bounds)
    return [
        {"lower": float(lo), "upper": float(hi)} if np.isfinite([lo, hi]).all() else None
        for lo, hi in zip(lower, upper, strict=True)
    ]


def _with_error(value: Any, error: dict[str, Any] | None) -> str:
    """A cell for reading: the value, then its interval where it has one."""
    from dpkit._summary import error_text, number

    if error is None:
        return number(value) if isinstance(value, float) else str(value)
    shown = error_text(value, error.get("lower"), error.get("upper"), error.get("half_width"))
    return f"{number(value)} {shown}".rstrip()


def _plain(value: Any) -> Any:
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _registry(registry: Any) -> Any:
    if registry is not None:
        return registry
    from dpkit.registry import get_registry

    return get_registry()


@attrs.frozen(eq=False)
class SqlQuery:
    """A SQL statement as a query (:func:`sql`); see the module docstring."""

    plan: Plan
    queries: tuple[tuple[Aggregate, Any], ...]
    selector: Any
    unit: RecordUnit | IdUnit
    # Private (no public field): the ledger records a query's public fields, never its data.
    _given: Mapping[str, Any] | None = attrs.field(default=None, alias="tables")
    output: str = "pandas"
    bounding: str = "numpy"
    name: str = "sql"
    # The public tables a JOIN reads (public: their rows are read in the public phase).
    _public: Mapping[str, Any] = attrs.field(factory=dict, alias="public")

    # -- identity and cost ------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self.plan.text

    @property
    def privacy(self) -> PrivacyEvent:
        """The composition of the aggregates' events and partition selection's."""
        parts = [query.statistic.privacy for _, query in self.queries]
        if self.selector is not None:
            parts.insert(0, self.selector.selection.privacy)
        return parts[0] if len(parts) == 1 else CompositeDP(tuple(parts))

    def describe(self) -> dict[str, Any]:
        """The query as JSON (what the ledger records): the statement and each aggregate."""
        return {
            "sql": self.plan.text,
            "aggregates": {a.text: q.describe() for a, q in self.queries},
            "privacy_unit": self.unit.describe(),
        }

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> tuple[tuple[str, Any], ...]:
        """Per aggregate (its text), its share of the cost, its noise and the (1 − α)
        half-width of each released value, before any data is read
        (:meth:`dpkit_central.TableQuery.accuracy`); with private keys, the ids a group needs
        to be released with probability ≥ 1 − α. The statement selects its groups once, for
        every aggregate, so an aggregate's cost is its statistic's own; the selection's is
        :meth:`selection_cost`."""
        found = []
        for aggregate, query in self.queries:
            each = query.accuracy(alpha, rng=rng)
            found.append((aggregate.text, attrs.evolve(each, privacy=query.statistic.privacy)))
        return tuple(found)

    def selection_cost(self) -> PrivacyEvent | None:
        """The event of the statement's one partition selection (None with public keys)."""
        return None if self.selector is None else self.selector.selection.privacy

    # -- public phase ---------------------------------------------------------------------

    def _tables(self, data: Any) -> Mapping[str, Any]:
        tables = self._given if data is None else data
        if not isinstance(tables, Mapping):
            raise InvalidData(
                "sql: the data must be the tables by name ({'visits': table, ...}), got "
                f"{type(tables).__name__}",
                field="tables",
            )
        if self.plan.table not in tables:
            raise InvalidData(
                f"sql: the statement reads the table {self.plan.table!r}, which is not given "
                f"(tables: {sorted(map(str, tables))})",
                field="tables",
            )
        return tables

    def row_level(self, pairs: tuple[tuple[tuple[str, str], ...], ...] = ()) -> str:
        """The DuckDB statement of the row-level table (module docstring): every expression
        in TRY (an error is NULL: the filter drops the row, the statistic's missing-value
        policy drops a missing value), so that it is total over any rows."""
        plan = self.plan
        alias = _quote(plan.alias)
        items = []
        if isinstance(self.unit, IdUnit):
            items.append(f"{alias}.{_quote(self.unit.column)} AS {_quote(self.unit.column)}")
        items += [f"TRY({g.expression}) AS {_quote(g.name)}" for g in plan.groups]
        arguments = [aggregate.argument for aggregate, _ in self.queries]
        for column, argument in dict(zip(value_columns(arguments), arguments, strict=True)).items():
            if column is not None:
                items.append(f"TRY({argument}) AS {_quote(column)}")
        if not items:
            items.append("1 AS __dpkit_row")
        where = f" WHERE COALESCE(TRY(({plan.where})::BOOLEAN), FALSE)" if plan.where else ""
        joins = join_sql(plan.joins, plan.alias, pairs) if plan.joins else ""
        return f"SELECT {', '.join(items)} FROM {SOURCE} AS {alias}{joins}{where}"

    def _rows(
        self, tables: Mapping[str, Any], *, empty: bool, con: Any = None, checked: bool = False
    ) -> Any:
        """The row-level table: PyArrow with no rows when ``empty``, else a relation of
        ``con`` (a DuckDB relation given as input is copied into ``con`` first). A joined
        public table is read whole in both phases (it is public), its key checked in the
        public phase (:mod:`dpkit.sql_statements.joins`). ``checked``: a private Parquet
        file's text is read by a reader that makes invalid UTF-8 missing
        (:func:`_total_over_text`)."""
        if is_spark(tables[self.plan.table]):
            return self._spark_rows(tables[self.plan.table], empty=empty)
        con = con if con is not None else connect()
        source = _read(con, tables[self.plan.table], self.plan.table, empty=empty, checked=checked)
        columns = describe(source)
        lookups = {
            join.alias: _read(con, self._public[join.table], join.table, empty=False)
            for join in self.plan.joins
        }
        schemas = {alias: describe(found) for alias, found in lookups.items()}
        self._check_columns(columns, schemas)
        pairs: tuple[tuple[tuple[str, str], ...], ...] = ()
        if self.plan.joins:
            pairs = check_joins(
                self.plan.joins,
                self.plan.alias,
                columns,
                {alias: (schemas[alias], found) for alias, found in lookups.items()},
                unique=empty,
            )
            if source is tables[self.plan.table]:  # another connection's relation
                source = con.from_arrow(source.to_arrow_table())
            for index, (join, keys) in enumerate(zip(self.plan.joins, pairs, strict=True)):
                aligned = align(lookups[join.alias], schemas[join.alias], columns, keys, join)
                register_public(con, index, aligned, keys)
        statement = self.row_level(pairs)
        if empty:
            try:
                return source.query(SOURCE, statement).to_arrow_table()
            except Exception as error:
                raise SqlError(
                    f"the statement does not apply to the table's column types {columns} "
                    f"({str(error).splitlines()[0][:160]})",
                    clause="expression",
                ) from None
        # Lazy: the statistics' per-record steps and the bounding run in DuckDB too.
        rows = source.query(SOURCE, statement)
        if source is tables[self.plan.table]:  # another connection's relation
            rows = con.from_arrow(rows.to_arrow_table())
        return rows

    def _check_columns(self, columns: Mapping[str, str], schemas: Mapping[str, Any]) -> None:
        """Public phase: every column the statement reads is in the tables read (the private
        table's ``columns``, each joined public table's schema by alias), and an unqualified
        one in only one of them; a :class:`~dpkit.errors.SqlError` naming it otherwise."""
        missing = sorted(
            (at, name)
            for name, at in self.plan.columns.items()
            if name not in columns and not any(name in s for s in schemas.values())
        )
        missing += sorted(
            (at, f"{alias}.{name}")
            for alias, read in self.plan.public_columns.items()
            for name, at in read.items()
            if name not in schemas[alias]
        )
        shared = {
            key.name for join in self.plan.joins if join.using for key, _ in join.keys
        }  # a USING column is one column: unqualified, it is the private table's
        ambiguous = sorted(
            (at, name)
            for name, at in self.plan.unqualified.items()
            if name not in shared and sum(name in s for s in (columns, *schemas.values())) > 1
        )
        if ambiguous:
            (line, column), name = ambiguous[0]
            raise SqlError(
                f"the column {name!r} is in more than one of the tables read: qualify it "
                f"({self.plan.alias}.{name} or the public table's alias)",
                clause="column",
                line=line,
                column=column,
            )
        if missing:
            (line, column), name = min(missing)
            raise SqlError(
                f"the tables read have no column {name!r} ({self.plan.table!r} has "
                f"{', '.join(sorted(columns))})",
                clause="column",
                line=line,
                column=column,
            )

    def _spark_rows(self, frame: Any, *, empty: bool) -> Any:
        """The row-level table of a Spark DataFrame, run by Spark
        (:mod:`dpkit.sql_statements.spark`): PyArrow with no rows when ``empty`` (the statement
        bound to the schema and run on ``frame.limit(0)``, with ANSI mode off as in the private
        phase, and each date format tried on a fixed timestamp), else the lazy Spark DataFrame
        of the rows, which the caller runs inside :func:`~dpkit.sql_statements.spark.ansi_off`.
        A joined public table is checked as on DuckDB and joined as a Spark DataFrame of
        ``frame``'s session (:meth:`_spark_lookups`)."""
        from dpkit.sql_statements import spark

        columns = spark.schema(frame, name=self.plan.table)
        lookups, pairs = self._spark_lookups(frame, columns, empty=empty)
        statement = self.row_level(pairs)
        items, where, probes = spark.row_level(statement)
        joins: list[spark.SparkJoin] = [
            (lookup, join.alias, join.kind, [a for a, _ in keys] if on is None else on)
            for lookup, join, keys, on in zip(
                lookups, self.plan.joins, pairs, spark.join_conditions(statement), strict=True
            )
        ]
        if not empty:
            return spark.apply(frame, self.plan.alias, items, where, joins)
        with spark.ansi_off(frame.sparkSession):
            for index, join in enumerate(self.plan.joins):
                try:
                    _ = spark.joined(frame.limit(0), self.plan.alias, joins[: index + 1]).schema
                except Exception as error:
                    raise _spark_join_error(join, error) from None
        try:
            with spark.ansi_off(frame.sparkSession):
                if probes:
                    frame.sparkSession.range(1).selectExpr(*probes).collect()
                return spark.apply(frame.limit(0), self.plan.alias, items, where, joins).toArrow()
        except Exception as error:
            raise SqlError(
                f"the statement does not apply to the table's column types {columns} "
                f"({str(error).strip().splitlines()[0][:160]})",
                clause="expression",
            ) from None

    def _spark_lookups(
        self, frame: Any, columns: Mapping[str, str], *, empty: bool
    ) -> tuple[list[Any], tuple[tuple[tuple[str, str], ...], ...]]:
        """The public tables a statement on the Spark DataFrame ``frame`` joins, as Spark
        DataFrames of ``frame``'s session restricted to the rows whose key is unique in them
        (lazy; :mod:`dpkit.sql_statements.spark`), and each join's (private, public) key
        columns. The columns, their types and, when ``empty`` (the public phase), the key's
        uniqueness are checked as on DuckDB (:func:`~dpkit.sql_statements.joins.check_joins`),
        on each public table read whole — it is public — and on the DuckDB types of the
        private key columns' Arrow form (the schema only: no row is read). A public Spark
        DataFrame of another session is refused."""
        from dpkit.sql_statements import spark

        joins = self.plan.joins
        if not joins:
            self._check_columns(columns, {})
            return [], ()
        con = connect()
        relations: dict[str, Any] = {}
        frames: dict[str, Any] = {}
        for join in joins:
            given = self._public[join.table]
            if spark.is_spark(given):
                if not spark.same_session(given, frame):
                    raise SqlError(
                        f"the public table {join.table!r} is a Spark DataFrame of another "
                        "session than the private table's: give it in the same SparkSession, "
                        "or as a pandas, Polars or Arrow table or a file",
                        clause="JOIN",
                        line=join.line,
                        column=join.column,
                    )
                frames[join.alias] = given
                try:  # its rows for the uniqueness check; its schema afterwards
                    relations[join.alias] = con.from_arrow(
                        (given if empty else given.limit(0)).toArrow()
                    )
                except Exception:
                    raise InvalidData(
                        f"sql: the public Spark table {join.table!r} cannot be read by DuckDB",
                        field="tables",
                    ) from None
                continue
            relations[join.alias] = _read(con, given, join.table, empty=False)
            try:
                arrow = relations[join.alias].to_arrow_table()
            except Exception:
                raise InvalidData(
                    f"sql: the table {join.table!r} cannot be read by DuckDB", field="tables"
                ) from None
            try:
                frames[join.alias] = frame.sparkSession.createDataFrame(arrow)
            except Exception as error:
                raise InvalidData(
                    f"sql: the public table {join.table!r} cannot be made a Spark DataFrame "
                    f"({str(error).strip().splitlines()[0][:160]})",
                    field="tables",
                ) from None
        schemas = {alias: describe(found) for alias, found in relations.items()}
        self._check_columns(columns, schemas)
        keys = sorted(
            {key.name for join in joins for pair in join.keys for key in pair} & set(columns)
        )
        try:
            typed = frame.limit(0).selectExpr(*(spark.quote(k) for k in keys)) if keys else None
            private = describe(con.from_arrow(typed.toArrow())) if typed is not None else {}
        except Exception:
            raise InvalidData(
                f"sql: the join columns of the Spark table {self.plan.table!r} have types "
                "DuckDB cannot read",
                field="tables",
            ) from None
        pairs = check_joins(
            joins,
            self.plan.alias,
            private,
            {alias: (schemas[alias], found) for alias, found in relations.items()},
            unique=empty,
        )
        lookups = []
        for join, pair in zip(joins, pairs, strict=True):
            try:  # classic Spark analyses it now, Spark Connect when it runs (_spark_rows)
                lookups.append(spark.unique_rows(frames[join.alias], [b for _, b in pair]))
            except Exception as error:
                raise _spark_join_error(join, error) from None
        return lookups, pairs

    @contextlib.contextmanager
    def _engine(self, tables: Mapping[str, Any]) -> Iterator[Any]:
        """Where the private phase runs: for a Spark DataFrame, its session with ANSI mode off
        (no DuckDB connection); otherwise a new DuckDB connection, the bounding's too with
        ``bounding="duckdb"``."""
        table = tables[self.plan.table]
        if is_spark(table):
            from dpkit.sql_statements.spark import ansi_off

            with ansi_off(table.sparkSession):
                yield None
            return
        con = connect()
        with connection(con if self.bounding == "duckdb" else None):
            yield con

    def check_input(self, data: Any, /) -> None:
        """Public phase: the tables, their schemas, the row-level statement bound and run on
        no rows, and each table query's checks on that empty table — on a Spark DataFrame, on
        the lazy Spark DataFrame of the row-level rows the queries will read (its schema: no
        row is read), so that they check the very frame they run on."""
        tables = self._tables(data)
        empty = self._rows(tables, empty=True)
        table = tables[self.plan.table]
        if is_spark(table):
            from dpkit.sql_statements.spark import ansi_off

            with ansi_off(table.sparkSession):
                self._check_queries(self._rows(tables, empty=False))
        else:
            self._check_queries(empty)
        self._post(self._released_empty(empty))

    def _check_queries(self, rows: Any) -> None:
        """Each table query's checks on the row-level table, a refusal told in the
        statement's words: its column names are the statement's expressions
        (:func:`_in_statement_words`)."""
        for aggregate, query in self.queries:
            try:
                query.check_input(rows)
            except InvalidData as error:
                raise self._refusal(str(error), query.name, aggregate) from None
        if self.selector is not None:
            try:
                self.selector.check_input(rows)
            except InvalidData as error:
                raise self._refusal(str(error), self.selector.name, None) from None

    def _refusal(self, message: str, owner: str, aggregate: Aggregate | None) -> SqlError:
        """A table query's refusal of the row-level table as the statement's
        :class:`~dpkit.errors.SqlError`: at the aggregate (or the GROUP BY), its columns named
        by what the statement wrote, and a text column's way to numbers."""
        names = {g.name: f"GROUP BY {g.output}" for g in self.plan.groups}
        arguments = [a.argument for a, _ in self.queries]
        for column, (a, _) in zip(value_columns(arguments), self.queries, strict=True):
            if column is not None:
                names.setdefault(column, f"the argument of {a.text}")
        reason = re.sub(
            r"the \w+ column '(__[gv]\d+)'",
            lambda found: names.get(found[1], found[0]),
            message.removeprefix(f"{owner}: "),
        )
        if "holds text values" in reason:
            reason += " (a CSV file's columns are all text: TRY_CAST(x AS DOUBLE) reads numbers)"
        if aggregate is None:
            return SqlError(reason, clause="GROUP BY")
        return SqlError(reason, clause="SELECT", line=aggregate.line, column=aggregate.column)

    def releases(self, data: Any, /) -> int:
        return 1

    # -- private phase ----------------------------------------------------------------------

    def aggregates(self, data: Any = None, /, *, rng: Any = None) -> tuple[Any, ...]:
        """The pre-noise aggregates of each aggregate (not private: for tests), with the
        public keys or all the groups found."""
        from dpkit.randomness import resolve_rng

        generator = resolve_rng(rng, owner=self.name)[0]
        tables = self._tables(data)

        def aggregates(checked: bool) -> tuple[Any, ...]:
            with self._engine(tables) as con:
                rows = self._rows(tables, empty=False, con=con, checked=checked)
                aggregate = self._aggregator(rows, generator)
                return tuple(aggregate(query) for _, query in self.queries)

        return _total_over_text(aggregates)

    def run(self, data: Any = None, /, *, rng: Any = None) -> SqlResult:
        """Release the statement on ``data`` (the tables by name; default: those given to
        :func:`sql`). Total once :meth:`check_input` passed."""
        from dpkit.randomness import resolve_rng

        generator = resolve_rng(rng, owner=self.name)[0]
        tables = self._tables(data)

        def release(checked: bool) -> SqlResult:
            with self._engine(tables) as con:
                rows = self._rows(tables, empty=False, con=con, checked=checked)
                return self._run(rows, generator)

        return _total_over_text(release)

    def _aggregator(self, rows: Any, generator: Any) -> Callable[[Any], Any]:
        """How a table query of the statement aggregates ``rows``: under an id unit, over the
        rows bounded once for the whole statement (:mod:`dpkit_central.shared_bounding`),
        drawing the bounding's key now; under a record unit, each on its own."""
        if not isinstance(self.unit, IdUnit):
            return lambda query: query.aggregate(rows, rng=generator)
        every = [query for _, query in self.queries]
        if self.selector is not None:
            every.insert(0, self.selector)
        aggregate: Callable[[Any], Any] = (
            every[0].bound_with(every[1:], rows, rng=generator).aggregate
        )
        return aggregate

    def _run(self, rows: Any, generator: Any) -> SqlResult:
        queries = [query for _, query in self.queries]
        keys: tuple[tuple[Any, ...], ...] | None = None
        aggregate = self._aggregator(rows, generator)
        backend = implementation(as_frame(rows, owner=self.name))
        if self.selector is not None:
            found = aggregate(self.selector)
            keep = self.selector.selection.select(found.values["units"], rng=generator)
            keys = tuple(k for k, kept in zip(found.keys, keep, strict=True) if kept)
            # The selected groups, as public keys: one value each for one group column.
            selected = [k[0] if len(k) == 1 else k for k in keys]
            queries = [
                attrs.evolve(query, keys=selected) if selected else None for query in queries
            ]
        results = []
        for (statement_aggregate, _), query in zip(self.queries, queries, strict=True):
            if query is None:
                continue
            released = query.release(aggregate(query), rng=generator, backend=backend)
            results.append((statement_aggregate, released))
        return self._assemble(results, keys)

    def _assemble(self, results: list[tuple[Aggregate, Any]], keys: Any) -> SqlResult:
        import pyarrow as pa

        groups = self.plan.groups
        found_keys = results[0][1].keys if results else ()
        columns: dict[str, Any] = {g.name: [k[i] for k in found_keys] for i, g in enumerate(groups)}
        for aggregate, result in results:
            columns[aggregate.name] = [float(v) for v in np.asarray(result.values).reshape(-1)]
        for aggregate, _ in self.queries:
            columns.setdefault(aggregate.name, pa.array([], pa.float64()))
        columns[self._trace()] = list(range(len(found_keys)))
        table, positions = self._post(pa.table(columns))
        rows = tuple(
            tuple(row)
            for row in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)
        )
        parts = tuple((aggregate.text, result) for aggregate, result in results)
        released = {aggregate.name: aggregate.text for aggregate, _ in results}
        shows = self._shows()
        shown = tuple(released.get(shows.get(c, "")) for c in table.column_names)
        keys = {g.name for g in groups}
        key_columns = tuple(c for c in table.column_names if shows.get(c) in keys)
        return SqlResult(
            tuple(table.column_names), rows, parts, self.output, positions, shown, key_columns
        )

    def _shows(self) -> dict[str, str]:
        """The output columns that are one aggregate as released: name → its column."""
        from sqlglot import exp, parse_one

        post = parse_one(self.plan.post, read="duckdb")
        return {
            item.alias: item.this.name
            for item in post.expressions
            if isinstance(item, exp.Alias) and isinstance(item.this, exp.Column)
        }

    def _released_empty(self, rows: Any) -> Any:
        """The released table's schema with no rows (for checking the post-processing)."""
        import pyarrow as pa

        fields = [(g.name, rows.schema.field(g.name).type) for g in self.plan.groups]
        fields += [(a.name, pa.float64()) for a, _ in self.queries]
        fields += [(self._trace(), pa.int64())]
        return pa.schema(fields).empty_table()

    def _trace(self) -> str:
        """The name of the released table's :data:`GROUP` column: one no output column takes
        (DuckDB's names are case-insensitive)."""
        taken = {name.lower() for name in self.plan.outputs}
        name = GROUP
        while name in taken:
            name += "_"
        return name

    def _post(self, released: Any) -> tuple[Any, tuple[int, ...]]:
        """HAVING, ORDER BY, LIMIT and the SELECT list on the released table (DuckDB), and
        each output row's group: its :data:`GROUP` column, selected beside the SELECT list
        (last, so that an ORDER BY by position is unchanged) and taken out."""
        from sqlglot import exp, parse_one

        trace = self._trace()
        post = parse_one(self.plan.post, read="duckdb")
        assert isinstance(post, exp.Select)  # the plan builds a SELECT
        traced = post.select(exp.column(trace, quoted=True)).sql(dialect="duckdb")
        con = connect()
        try:
            table = con.from_arrow(released).query(RELEASED, traced).to_arrow_table()
        except Exception as error:
            raise SqlError(
                f"the SELECT list, HAVING or ORDER BY does not apply to the released columns "
                f"({str(error).splitlines()[0][:160]})",
                clause="post-processing",
            ) from None
        last = table.num_columns - 1
        return table.remove_column(last), tuple(table.column(last).to_pylist())


def _total_over_text(release: Callable[[bool], _Released]) -> _Released:
    """``release(False)``, or ``release(True)`` where DuckDB's Parquet reader refused a text
    value that is not valid UTF-8 — as it reads the rows, after the spend, so the refusal
    would depend on one value: the release is made again, on the same rng, with such values
    missing (:func:`~dpkit.sql_statements.sources.invalid_parquet_text`). The words the failed
    attempt drew are discarded, and the release's law is that of one attempt on the data with
    those values missing; only its duration tells that there was one."""
    try:
        return release(False)
    except Exception as error:
        if not invalid_parquet_text(error):
            raise
    return release(True)


def _read(con: Any, table: Any, name: str, *, empty: bool, checked: bool = False) -> Any:
    """``table`` as a DuckDB relation of ``con`` (:func:`~dpkit.sql_statements.sources.relation`);
    an ``InvalidData`` naming it where DuckDB cannot read it."""
    try:
        return relation(con, table, name=name, empty=empty, checked=checked)
    except InvalidData:
        raise
    except Exception:
        raise InvalidData(
            f"sql: the table {name!r} cannot be read by DuckDB", field="tables"
        ) from None


def _spark_join_error(join: Any, error: Exception) -> SqlError:
    """A join Spark refuses to analyse (a key type it cannot compare or partition by), as the
    public phase's refusal of the JOIN (:meth:`SqlQuery._spark_rows`)."""
    return SqlError(
        f"the join with {join.table!r} does not apply to the tables' column types on Spark "
        f"({str(error).strip().splitlines()[0][:160]})",
        clause="JOIN",
        line=join.line,
        column=join.column,
    )


def value_columns(arguments: list[str | None]) -> list[str | None]:
    """The row-level column each aggregate reads (``__v0``, ...; None for none): aggregates
    of one argument (``SUM(x)`` and ``AVG(x)``) read one column, computed once."""
    first: dict[str, str] = {}
    return [
        None if argument is None else first.setdefault(argument, f"__v{index}")
        for index, argument in enumerate(arguments)
    ]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unit(plan: Plan) -> RecordUnit | IdUnit:
    column = _option(plan, "privacy_unit_column")
    rows = _whole(plan, "max_rows_contributed", 1) or 1
    groups = _whole(plan, "max_groups_contributed", None)
    if column is None:
        for name in ("max_rows_contributed", "max_groups_contributed"):
            if name in plan.options:
                raise _option_error(
                    plan, name, "bounds a person's contribution: give privacy_unit_column too"
                )
        return RecordUnit()
    if column.startswith("__"):
        raise _option_error(plan, "privacy_unit_column", "a column name may not start with __")
    if plan.groups and groups is None:
        raise _option_error(
            plan,
            "max_groups_contributed",
            "a grouped statement needs max_groups_contributed (the groups one person may "
            "change; never assumed)",
        )
    return IdUnit(column, max_rows=rows, max_groups=groups)


def _public_keys(plan: Plan, keys: Any, public: Mapping[str, Any] | None) -> list[Any] | None:
    table_name = _option(plan, "public_groups")
    strategy = str(_option(plan, "group_selection_strategy", "") or "").upper()
    if strategy not in ("", "LAPLACE_THRESHOLD", "PUBLIC_GROUPS"):
        raise _option_error(
            plan, "group_selection_strategy", "must be LAPLACE_THRESHOLD or PUBLIC_GROUPS"
        )
    if not plan.groups:
        if keys is not None or table_name is not None:
            raise SqlError("keys are given but the statement has no GROUP BY", clause="GROUP BY")
        return None
    if keys is not None and table_name is not None:
        raise _option_error(plan, "public_groups", "give the keys or public_groups, not both")
    if table_name is not None:
        if not isinstance(table_name, str) or public is None or table_name not in public:
            raise _option_error(
                plan,
                "public_groups",
                f"names a public table; the public tables are {sorted(public or {})}",
            )
        return _keys_of_table(plan, public[table_name], table_name)
    if keys is None:
        if strategy == "PUBLIC_GROUPS":
            raise _option_error(
                plan, "group_selection_strategy", "PUBLIC_GROUPS needs keys or public_groups"
            )
        return None
    if isinstance(keys, Mapping):
        names = [g.output for g in plan.groups]
        if len(names) != 1 or set(keys) != set(names):
            raise InvalidParameter(
                "keys",
                sorted(map(str, keys)),
                f"a list of keys, or {{{names[0]!r}: [...]}}"
                if len(names) == 1
                else "a list of tuples (one value per group column)",
                owner="sql",
            )
        keys = keys[names[0]]
    if isinstance(keys, (str, bytes)) or not hasattr(keys, "__iter__"):
        raise InvalidParameter("keys", keys, "a list of group keys", owner="sql")
    return list(keys)


def _keys_of_table(plan: Plan, table: Any, name: str) -> list[Any]:
    """The distinct rows of a public table's group columns (public data: read now)."""
    con = connect()
    found = relation(con, table, name=name, empty=False)
    columns = describe(found)
    outputs = [g.output for g in plan.groups]
    missing = [c for c in outputs if c not in columns]
    if missing:
        raise _option_error(
            plan, "public_groups", f"the public table {name!r} has no column {missing[0]!r}"
        )
    select = ", ".join(_quote(c) for c in outputs)
    rows = found.query("__dpkit_public", f"SELECT DISTINCT {select} FROM __dpkit_public").fetchall()
    return [row[0] if len(outputs) == 1 else tuple(row) for row in rows]


def _statistic(
    aggregate: Aggregate, epsilon: float, delta: float | None, noise: str | None, registry: Any
) -> Any:
    params: dict[str, Any] = {"epsilon": epsilon}
    kind = aggregate.kind
    if kind == "quantile":
        assert aggregate.bounds is not None
        params.update(q=aggregate.q, lower=aggregate.bounds[0], upper=aggregate.bounds[1])
    else:
        if noise is not None:
            params["noise"] = noise
            if noise == "gaussian":
                params["delta"] = delta
        if kind in ("sum", "mean"):
            assert aggregate.bounds is not None
            params.update(lower=aggregate.bounds[0], upper=aggregate.bounds[1])
    try:
        return registry.query(_STATISTIC[kind], **params)
    except InvalidParameter as error:
        raise SqlError(
            f"{aggregate.text}: {error}",
            clause="SELECT",
            line=aggregate.line,
            column=aggregate.column,
        ) from None


def sql(
    query: str,
    /,
    *,
    tables: Mapping[str, Any] | None = None,
    public: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    keys: Any = None,
    dialect: str = "duckdb",
    output: str = "pandas",
    bounding: str = "numpy",
    registry: Any = None,
) -> SqlQuery:
    """A SQL statement as a query for :meth:`dpkit.Session.release` (module docstring).

    ``query`` is ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...) ...`` (the ZetaSQL syntax)
    or a plain ``SELECT ... GROUP BY ...`` with ``options`` beside it (``epsilon``,
    ``delta``, ``privacy_unit_column``, ``max_groups_contributed``, ``max_rows_contributed``,
    ``noise``, ``group_selection_strategy``, ``public_groups``). ``tables`` are the private
    tables by name (a Parquet or CSV path, a pandas, Polars or PyArrow table, a DuckDB
    relation, or a Spark DataFrame, which Spark runs: :mod:`dpkit.sql_statements.spark`), ``public`` public tables (keys, and lookups a JOIN reads), ``bounds`` clamping bounds by column,
    ``keys`` the public group keys. ``output`` is the result table's kind (pandas, polars,
    arrow, duckdb). ``bounding`` is where each person's contribution is bounded, after
    DuckDB has run the per-record steps: ``"numpy"`` collects those rows and bounds them in
    this process (the fastest while they fit in memory), ``"duckdb"`` bounds them inside
    DuckDB (:mod:`dpkit.tables._duckdb`: memory-bounded, spilling to disk); both keep the
    same rows, so give the same aggregates (a Spark DataFrame is bounded on Spark whatever
    ``bounding`` says). Nothing here reads a table's rows (only a public
    table's keys)."""
    for package in ("sqlglot", "duckdb", "pyarrow"):
        try:
            __import__(package)
        except ImportError:
            raise MissingDependency(package, "sql", needed_by="dpkit.sql") from None
    if output not in OUTPUTS:
        raise InvalidParameter("output", output, f"one of {', '.join(OUTPUTS)}", owner="sql")
    if bounding not in BOUNDINGS:
        raise InvalidParameter("bounding", bounding, f"one of {', '.join(BOUNDINGS)}", owner="sql")
    if tables is not None and not isinstance(tables, Mapping):
        raise InvalidParameter("tables", tables, "a mapping of table names to tables", owner="sql")
    if public is not None and not isinstance(public, Mapping):
        raise InvalidParameter("public", public, "a mapping of table names to tables", owner="sql")
    if options is not None and not isinstance(options, Mapping):
        raise InvalidParameter(
            "options", options, "a mapping of option names to values", owner="sql"
        )
    checked_bounds: dict[str, tuple[float, float]] = {}
    for name, pair in (bounds or {}).items():
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
        ):
            raise InvalidParameter(
                "bounds", {name: pair}, "(lower, upper) numbers per column", owner="sql"
            )
        checked_bounds[str(name)] = (float(pair[0]), float(pair[1]))
    names = set(map(str, tables)) if tables is not None else None
    plan = plan_statement(
        query,
        dialect=dialect,
        tables=names if names is not None else _any_table(query, dialect),
        public=set(map(str, public or {})),
        bounds=checked_bounds,
        options=options,
    )
    if not plan.options:
        raise SqlError(
            "no privacy options: write SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ...)"
            " or give options={'epsilon': ...} beside the query",
            clause="OPTIONS",
        )
    if "epsilon" not in plan.options:
        raise SqlError("the option epsilon is required", clause="OPTIONS")
    epsilon = _real(plan, "epsilon", None)
    delta = _real(plan, "delta", 0.0)
    assert epsilon is not None and delta is not None
    if epsilon <= 0 or not 0 <= delta < 1:
        raise _option_error(
            plan,
            "epsilon" if epsilon <= 0 else "delta",
            "out of range (epsilon > 0, 0 <= delta < 1)",
        )
    noise = _option(plan, "noise")
    if noise is not None and noise not in ("laplace", "gaussian", "geometric"):
        raise _option_error(plan, "noise", "must be laplace, gaussian or geometric")
    unit = _unit(plan)
    public_keys = _public_keys(plan, keys, public)
    private = bool(plan.groups) and public_keys is None
    aggregates = plan.aggregates
    shares = len(aggregates) + (1 if private else 0)
    share = _share(epsilon, shares)
    gaussian = [a for a in aggregates if noise == "gaussian" and a.kind != "quantile"]
    delta_parts = len(gaussian) + (1 if private else 0)
    if delta_parts and delta <= 0:
        raise _option_error(
            plan,
            "delta",
            "partition selection (no public keys) and Gaussian noise need delta > 0",
        )
    delta_share = _share(delta, delta_parts) if delta_parts else None
    registry = _registry(registry)
    by = [g.name for g in plan.groups]
    planned_keys: Any = (
        public_keys
        if public_keys is not None
        else ({"epsilon": share, "delta": delta_share} if private else None)
    )
    queries = []
    columns = value_columns([aggregate.argument for aggregate in aggregates])
    for aggregate, column in zip(aggregates, columns, strict=True):
        statistic = _statistic(aggregate, share, delta_share, noise, registry)
        aggregate_unit: Any = unit
        if aggregate.kind == "count_distinct":
            assert isinstance(unit, IdUnit)
            aggregate_unit = IdUnit(unit.column, max_rows=1, max_groups=unit.max_groups)
        try:
            table_query = statistic.on(column, by=by, keys=planned_keys, unit=aggregate_unit)
        except InvalidParameter as error:
            raise SqlError(
                str(error), clause="SELECT", line=aggregate.line, column=aggregate.column
            ) from None
        queries.append((aggregate, table_query))
    selector = None
    if private:
        counter = registry.query("count", epsilon=share)
        selector = counter.on(None, by=by, keys={"epsilon": share, "delta": delta_share}, unit=unit)
    return SqlQuery(
        plan,
        tuple(queries),
        selector,
        unit,
        tables,
        output,
        bounding,
        public={join.table: public[join.table] for join in plan.joins} if public else {},
    )


def _any_table(query: str, dialect: str) -> set[str]:
    """Without tables, the statement's own FROM name is accepted (checked at the release)."""
    from dpkit.sql_statements._text import extract
    from dpkit.sql_statements.plan import _parse, _table

    try:
        return {_table(_parse(extract(query, dialect).text, dialect))[0]}
    except Exception:
        return set()

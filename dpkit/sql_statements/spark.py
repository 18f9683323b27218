r"""The row-level statement on a Spark DataFrame, run by Spark.

A private table given as a ``pyspark.sql.DataFrame`` (classic or Spark Connect; recognised by
its type's module, so pyspark is imported only when one is given) is never copied into
DuckDB: the row-level statement of :meth:`~dpkit.sql_statements.query.SqlQuery.row_level` is
turned into Spark SQL expressions and applied to the DataFrame in its own SparkSession
(``alias`` → ``where`` → ``selectExpr``; no temporary view, which a Spark Connect plan would
resolve only when it runs), and the Spark DataFrame of the row-level rows goes to the
aggregates' table queries, which bound and aggregate it on Spark
(:mod:`dpkit.tables.engines`).

**Totality.** DuckDB's ``TRY(...)`` has no Spark equivalent, and Spark 4 evaluates in ANSI mode
by default (``spark.sql.ansi.enabled``), where a cast of ``'abc'`` to a number, a division by
zero or an integer overflow raises at run time — after the spend, on a value. So each
expression is rewritten from its parsed form (sqlglot), not textually transpiled:

* ``TRY(x)`` → ``x`` (the rules below make ``x`` total);
* ``CAST(x AS t)`` → ``TRY_CAST(x AS t)`` (NULL for a value that does not convert);
* ``a + b``, ``a - b``, ``a * b`` → ``TRY_ADD``, ``TRY_SUBTRACT``, ``TRY_MULTIPLY`` (NULL on
  overflow, as DuckDB's TRY gives);
* ``a / b`` → DuckDB's float64 division, with IEEE 754's ±∞ or NaN for a zero divisor
  (:func:`_ieee_division`; Spark's ``/`` gives NULL there);
* ``-x`` → ``TRY_MULTIPLY(x, -1)`` and ``ABS(x)`` → NULL for the most negative integer, as
  DuckDB's TRY gives (Spark wraps it to itself);
* ``s LIKE p`` and ``s ILIKE p`` → ``p`` with each backslash doubled (Spark's ``REPLACE``):
  Spark reads ``\`` in a pattern as an escape and raises, on the row, for one that ends the
  pattern or precedes another letter, where DuckDB (no ``ESCAPE`` clause: the plan refuses
  one) reads a backslash as itself; doubled, every escape is valid and means a backslash, so
  both engines match the same strings;

and the statement is analysed and run with ``spark.sql.ansi.enabled = false`` on its session
(:func:`ansi_off`, restored when the last overlapping statement on that session ends), where
what is left — ``DIV``, ``%`` — gives NULL for a zero divisor instead of raising. The setting
covers the public phase's run on no rows too, so that both phases analyse the statement under
the same typing rules. A date format (``strftime``) is checked on a fixed timestamp in the
public phase: Spark builds its formatter, and refuses a bad pattern, only when a row is
formatted; a format that is not a literal is refused (whether it is valid would depend on a
value).

**Joins.** A JOIN with a public lookup table (:mod:`dpkit.sql_statements.joins`: its key
unique, so the join is a per-record map of the private table) is checked as on DuckDB, on
the public table read whole, in the public phase. The public table then joins the private
frame as a Spark DataFrame of the private frame's session: a pandas, Polars or Arrow table
or a file is read by DuckDB as on the DuckDB path and made a Spark DataFrame from its Arrow
form (``createDataFrame``), so that Spark joins the very values DuckDB would; a Spark
DataFrame is used as it is, and must be of the private frame's session (:func:`same_session`).
Like DuckDB's, the join reads only the public rows whose key is unique in the public table
(:func:`unique_rows`), so it stays a per-record map even if the public table changed between
the phases. The join is the DataFrame's own (``frame.alias(a).join(lookup.alias(b), ...)``,
no temporary view, as above), with the ON condition of the row-level statement rewritten as
its expressions are (:func:`join_conditions`: an ANDed equality of columns, unchanged by the
rewriting) or the USING columns; the public phase runs it on ``frame.limit(0)`` too, so that
a key type Spark cannot compare is refused before the spend.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from dpkit.errors import InvalidData, SqlError

__all__ = [
    "ANSI",
    "ansi_off",
    "apply",
    "is_spark",
    "join_conditions",
    "joined",
    "quote",
    "row_level",
    "same_session",
    "schema",
    "unique_rows",
]

#: Spark's ANSI mode setting (``true`` by default in Spark 4).
ANSI = "spark.sql.ansi.enabled"

_TRY = {"Add": "TRY_ADD", "Sub": "TRY_SUBTRACT", "Mul": "TRY_MULTIPLY"}


def is_spark(data: Any) -> bool:
    """Whether ``data`` is a Spark DataFrame (classic or Connect), by its type alone."""
    kind = type(data)
    return kind.__module__.startswith("pyspark.sql.") and kind.__name__ == "DataFrame"


def schema(frame: Any, *, name: str) -> dict[str, str]:
    """A Spark DataFrame's columns and their Spark types (its schema: no row is read); a
    repeated column name is :class:`~dpkit.errors.InvalidData`, as for a pandas frame."""
    try:
        fields = list(frame.schema.fields)
    except Exception:
        raise InvalidData(
            f"sql: the Spark table {name!r} has no readable schema", field="tables"
        ) from None
    names = [str(f.name) for f in fields]
    if len(set(names)) != len(names):
        raise InvalidData(f"the table {name!r} repeats a column name", field="tables")
    return {str(f.name): f.dataType.simpleString() for f in fields}


@attrs.define
class _Holders:
    """The blocks of :func:`ansi_off` running on one session, and its setting before them."""

    session: Any
    count: int
    before: str


_HOLDING_LOCK = threading.Lock()
_HOLDING: dict[int, _Holders] = {}


@contextlib.contextmanager
def ansi_off(session: Any) -> Iterator[None]:
    """``spark.sql.ansi.enabled = false`` on ``session`` while the block runs, then the
    previous value again (module docstring). Blocks on one session that overlap (statements
    released from several threads) share the setting: the first sets it and the last one to
    end restores it, so none of them runs a row with ANSI mode back on — one statement ending
    would otherwise switch it on under another, whose bad values would then raise after its
    spend. The setting is the session's: a query another thread runs meanwhile on the same
    session sees it too, and one that sets it itself is outside this guard."""
    key = id(session)  # the session is held in _HOLDING while in use, so its id is its own
    with _HOLDING_LOCK:
        holders = _HOLDING.get(key)
        if holders is None:
            before = str(session.conf.get(ANSI))
            session.conf.set(ANSI, "false")
            holders = _HOLDING[key] = _Holders(session, 0, before)
        holders.count += 1
    try:
        yield
    finally:
        with _HOLDING_LOCK:
            holders.count -= 1
            if holders.count == 0:
                del _HOLDING[key]
                session.conf.set(ANSI, holders.before)


def _total(node: Any) -> Any:
    """One sqlglot node rewritten as a total Spark expression (module docstring)."""
    from sqlglot import exp

    if isinstance(node, exp.Try):
        return node.this.transform(_total)
    if type(node) is exp.Cast:
        return exp.TryCast(this=node.this.transform(_total), to=node.args["to"], safe=True)
    if isinstance(node, (exp.Like, exp.ILike)):
        doubled = exp.Anonymous(
            this="REPLACE",
            expressions=[
                node.expression.transform(_total),
                exp.Literal.string("\\"),
                exp.Literal.string("\\\\"),
            ],
        )
        return type(node)(this=node.this.transform(_total), expression=doubled)
    if isinstance(node, exp.Div):
        left, right = (_spark(side.transform(_total)) for side in (node.left, node.right))
        return _spark_tree(_ieee_division(left, right))
    if isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal):
        return _spark_tree(f"TRY_MULTIPLY({_spark(node.this.transform(_total))}, -1)")
    if isinstance(node, exp.Abs):
        # ABS wraps the most negative integer to itself; it is the only negative ABS.
        absolute = f"ABS({_spark(node.this.transform(_total))})"
        return _spark_tree(f"NULLIF(GREATEST({absolute}, -1), -1)")
    name = _TRY.get(type(node).__name__)
    if name is not None and isinstance(node, exp.Binary):
        return exp.Anonymous(
            this=name, expressions=[node.left.transform(_total), node.right.transform(_total)]
        )
    return node


def _ieee_division(a: str, b: str) -> str:
    """DuckDB's ``a / b`` in Spark: the quotient of the two as float64, and IEEE 754's answer
    for a zero divisor (±∞ by the signs of ``a`` and of the zero, NaN for 0/0) where Spark's
    ``/`` and ``TRY_DIVIDE`` give NULL: ``POWER(±0.0, -1)`` is ±∞ (Java's ``Math.pow``), so
    ``a · b⁻¹`` is ``a / b`` there, and only there (elsewhere it would round twice)."""
    x, y = f"TRY_CAST({a} AS DOUBLE)", f"TRY_CAST({b} AS DOUBLE)"
    return f"COALESCE(TRY_DIVIDE({x}, {y}), {x} * POWER({y}, -1))"


def _spark_tree(text: str) -> Any:
    """A Spark expression's text as a sqlglot tree (its parts are Spark SQL already)."""
    import sqlglot

    return sqlglot.parse_one(text, read="spark")


def _spark(node: Any) -> str:
    from sqlglot.errors import ErrorLevel, UnsupportedError

    try:
        return str(node.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE))
    except UnsupportedError as error:
        raise SqlError(
            f"{node.sql(dialect='duckdb')[:60]} has no Spark form ({str(error)[:120]})",
            clause="expression",
        ) from None


def row_level(statement: str) -> tuple[list[str], str | None, list[str]]:
    """The DuckDB row-level statement as Spark SQL: its SELECT items (each ``expr AS name``),
    its WHERE condition (None without one), and the probes of its date formats (a Spark
    expression per ``strftime``, on a fixed timestamp), all total (module docstring)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(statement, read="duckdb").transform(_total)
    items = [_spark(item) for item in tree.expressions]
    where = tree.args.get("where")
    condition = _spark(where.this) if where is not None else None
    probes = []
    for node in tree.find_all(exp.TimeToStr):
        pattern = node.args.get("format")
        if not isinstance(pattern, exp.Literal) or not pattern.is_string:
            raise SqlError(
                f"{node.sql(dialect='duckdb')[:60]}: on Spark a date format must be a literal",
                clause="expression",
            )
        fixed = exp.cast(exp.Literal.string("2000-01-01 00:00:00"), "timestamp")
        probes.append(_spark(exp.TimeToStr(this=fixed, format=pattern)))
    return items, condition, probes


def join_conditions(statement: str) -> list[str | None]:
    """The ON condition of each JOIN of the DuckDB row-level statement as Spark SQL, rewritten
    as its expressions are (module docstring); None for a join USING columns."""
    import sqlglot

    tree = sqlglot.parse_one(statement, read="duckdb").transform(_total)
    found: list[str | None] = []
    for join in tree.args.get("joins") or []:
        on = join.args.get("on")
        found.append(None if on is None else _spark(on))
    return found


def same_session(a: Any, b: Any) -> bool:
    """Whether two Spark DataFrames are of one SparkSession: the same session object, or on
    classic Spark two handles of one JVM session."""
    first, second = a.sparkSession, b.sparkSession
    if first is second:
        return True
    left, right = (getattr(s, "_jsparkSession", None) for s in (first, second))
    if left is None or right is None:
        return False
    try:
        return bool(left.equals(right))
    except Exception:
        return False


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def unique_rows(frame: Any, keys: list[str]) -> Any:
    """The rows of a public Spark DataFrame whose ``keys`` are unique in it (lazy; module
    docstring): a row whose key another row repeats joins nothing."""
    partition = ", ".join(quote(k) for k in keys)
    counted = frame.selectExpr("*", f"COUNT(1) OVER (PARTITION BY {partition}) AS __dpkit_n")
    return counted.where("__dpkit_n = 1").drop("__dpkit_n")


def _functions(frame: Any) -> Any:
    """The ``functions`` module of ``frame``'s Spark API (classic or Connect)."""
    if type(frame).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as connect

        return connect
    from pyspark.sql import functions as classic

    return classic


#: A join of the row-level statement: the public Spark DataFrame, its alias, INNER or LEFT,
#: and its ON condition (Spark SQL) or its USING columns.
SparkJoin = tuple[Any, str, str, str | list[str]]


def joined(frame: Any, alias: str, joins: Sequence[SparkJoin] = ()) -> Any:
    """``frame`` under ``alias``, joined with each public DataFrame under its own alias (lazy;
    module docstring)."""
    found = frame.alias(alias)
    for lookup, name, kind, on in joins:
        condition = _functions(frame).expr(on) if isinstance(on, str) else on
        found = found.join(lookup.alias(name), on=condition, how=kind.lower())
    return found


def apply(
    frame: Any,
    alias: str,
    items: list[str],
    where: str | None,
    joins: Sequence[SparkJoin] = (),
) -> Any:
    """The row-level rows of ``frame`` (lazy): ``alias`` and the ``joins`` (:func:`joined`),
    then ``where``, then the items. An item of Spark's ``void`` type (a column or an
    expression that is always NULL: Spark infers it for a pandas column of only missing
    values) becomes text, every value missing, which the table queries read as DuckDB's
    NULL-typed column: no key, no value."""
    found = joined(frame, alias, joins)
    if where is not None:
        found = found.where(where)
    rows = found.selectExpr(*items)
    void = [f.name for f in rows.schema.fields if type(f.dataType).__name__ == "NullType"]
    if void:
        rows = rows.withColumns({name: rows[name].cast("string") for name in void})
    return rows

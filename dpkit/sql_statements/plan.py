"""A SQL statement as a plan: which rows, which groups, which aggregates, what after.

:func:`plan_statement` reads a statement with sqlglot and decides, from its text, the options
and the tables' *names* only (no schema, no value), whether dpkit can release it, and how:

* **FROM** one private table (an alias allowed), possibly ``[INNER | LEFT] JOIN`` public
  lookup tables ``ON`` equalities of columns (ANDed) or ``USING (...)``
  (:mod:`dpkit.sql_statements.joins`: with a unique public key the join is a per-record map
  of the private table, 1-stable, McSherry 2009); no join of private tables, no other join
  condition, no subquery, no CTE, no set operation, no ``SELECT DISTINCT``, no ``*``;
* **WHERE** and every expression inside an aggregate or a GROUP BY item are *row-level*: each is
  a function of one row (arithmetic, comparisons, CASE, COALESCE, CAST, string and date
  functions from an allow-list). A per-record map and a per-record filter keep neighbouring
  tables neighbours — removing a person's rows removes the same person's mapped rows — so the
  sensitivities below, derived for the mapped table, hold for the original one;
* the **aggregates** (the DuckDB column ``__a{k}`` of the released table), each a statistic of
  :mod:`dpkit_central` run by the table-query plan (:mod:`dpkit_central.tables`) on the
  row-level table, with its sensitivity there (G groups per id, R rows per id and group,
  clamping bounds [L, U], c = max(|L|, |U|)):

  ====================================  =================================  ================
  SQL                                   statistic                          L1 sensitivity
  ====================================  =================================  ================
  ``COUNT(*)``                          count of rows                      G·R
  ``COUNT(x)``                          count of rows where x is not NULL  G·R
  ``COUNT(DISTINCT id)``                count with R = 1 (people)          G
  ``SUM(x, bounds => (L, U))``          sum of clamped x                   G·R·c
  ``AVG(x, bounds => (L, U))``          mean (centred sum and count)       G·R·(U−L)/2, G·R
  ``PERCENTILE_CONT(x, q)``, MEDIAN     exponential mechanism, ε/(G·R)    Δu = 1 per group
  ``VAR_POP``, ``VARIANCE``, ``STDDEV``  count, centred sum, centred sum    G·R, G·R·r,
  (``x, bounds => (L, U)``)             of squares (r = (U − L)/2)         G·R·r²
  ====================================  =================================  ================

  (sources in :mod:`dpkit_central.tables`); a person's distinct count is a count of the rows
  bounding keeps with R = 1: each id keeps one row in each of at most G groups; a variance
  (population or sample) and a standard deviation are post-processing of three aggregates,
  each released with its own share of ε (``_Builder.spread``);
* **GROUP BY** row-level expressions, by expression, by position or by a SELECT alias;
* **HAVING, ORDER BY, LIMIT/OFFSET** and the SELECT list's arithmetic over aggregates run on
  the *released* table (post-processing, which costs nothing: Dwork & Roth 2014,
  Proposition 2.1): they are rewritten over its columns and run by DuckDB after the noise.

Everything else is refused with a :class:`~dpkit.errors.SqlError` naming the clause and where
it starts. Names are resolved against the table's schema later, in the public phase
(:mod:`dpkit.sql_statements.query`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dpkit.errors import SqlError
from dpkit.sql_statements._text import BOUNDS, Extracted, Option, extract
from dpkit.sql_statements.joins import Join, KeyColumn

__all__ = ["Aggregate", "Group", "Plan", "plan_statement"]

DIALECTS = ("duckdb", "bigquery")
#: The source relation's name in the row-level statement, and the released table's in the
#: post-processing one.
SOURCE = "__dpkit_source"
RELEASED = "__dpkit_released"

#: sqlglot's node types a row-level expression may hold: functions of one row whose every
#: failure DuckDB's TRY turns into NULL (no function reads another row, a file or a setting).
_ROW_LEVEL = frozenset(
    {
        "Column", "Identifier", "Literal", "Boolean", "Null", "Paren", "Neg", "Not", "And",
        "Or", "Xor", "EQ", "NEQ", "GT", "GTE", "LT", "LTE", "Is", "In", "Between", "Like",
        "ILike", "Add", "Sub", "Mul", "Div", "IntDiv", "Mod", "Pow", "DPipe", "Case", "If",
        "Coalesce", "Nullif", "Cast", "TryCast", "DataType", "DataTypeParam", "Abs", "Round",
        "Floor", "Ceil", "Ln", "Log", "Exp", "Sqrt", "Cbrt", "Trunc", "Least", "Greatest",
        "Lower", "Upper", "Trim", "Substring", "Length", "Concat", "Extract", "Var",
        "DateTrunc", "TimestampTrunc", "Year", "Month", "Day", "Hour", "Quarter", "Week",
        "DayOfWeek", "Sign", "Tuple", "Interval", "NullSafeEQ", "NullSafeNEQ", "StrPosition",
        "Left", "Right", "StartsWith", "EndsWith", "Initcap", "IsNan", "Date", "TimeToStr",
        "BitwiseAnd", "BitwiseOr", "IfNull",
    }
)  # fmt: skip
#: Aggregates dpkit refuses, and why (by sqlglot node type).
_UNSUPPORTED = {
    "Min": "MIN and MAX have no bounded sensitivity; use PERCENTILE_CONT(x, 0) or (x, 1)",
    "Max": "MIN and MAX have no bounded sensitivity; use PERCENTILE_CONT(x, 0) or (x, 1)",
}
#: The variance aggregates (sqlglot node type → (sample variance?, standard deviation?)):
#: DuckDB's VARIANCE, VAR_SAMP and STDDEV are the sample's, VAR_POP and STDDEV_POP the
#: population's.
_SPREAD = {
    "Variance": (True, False),
    "VariancePop": (False, False),
    "Stddev": (True, True),
    "StddevSamp": (True, True),
    "StddevPop": (False, True),
}
_KNOWN_OPTIONS = (
    "epsilon",
    "delta",
    "max_groups_contributed",
    "max_rows_contributed",
    "privacy_unit_column",
    "noise",
    "group_selection_strategy",
    "public_groups",
)


@attrs.frozen
class Aggregate:
    """One released aggregate: its statistic, its row-level argument (DuckDB SQL over the
    source, None for COUNT(*) and COUNT(DISTINCT id)), its bounds and quantile level."""

    name: str
    kind: str  # count, count_values, count_distinct, sum, mean, quantile
    text: str
    argument: str | None
    bounds: tuple[float, float] | None
    q: float | None
    line: int
    column: int


@attrs.frozen
class Group:
    """One group column: its name in the released table, the name the user sees, and its
    row-level expression (DuckDB SQL over the source)."""

    name: str
    output: str
    expression: str


@attrs.frozen
class Plan:
    """A statement dpkit can release (see the module docstring)."""

    text: str
    table: str
    alias: str
    where: str | None
    groups: tuple[Group, ...]
    aggregates: tuple[Aggregate, ...]
    columns: Mapping[str, tuple[int, int]]
    post: str
    outputs: tuple[str, ...]
    options: Mapping[str, Option]
    joins: tuple[Join, ...] = ()
    #: The columns read from each joined public table, by its alias.
    public_columns: Mapping[str, Mapping[str, tuple[int, int]]] = attrs.field(factory=dict)
    #: The columns named without a table (a JOIN's tables decide which table holds them).
    unqualified: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)


def _position(node: Any) -> tuple[int, int]:
    """(line, column) where ``node`` starts: its first token sqlglot kept a position for
    (sqlglot records a token's last column; the first is that minus its length − 1)."""
    best: dict[str, Any] | None = None
    for sub in node.walk():
        meta = getattr(sub, "_meta", None) or {}
        if "start" in meta and (best is None or meta["start"] < best["start"]):
            best = meta
    if best is None:
        return 0, 0
    width = int(best["end"]) - int(best["start"])
    return int(best.get("line", 0)), max(1, int(best.get("col", 1)) - width)


def _at(node: Any) -> dict[str, int]:
    line, column = _position(node)
    return {"line": line, "column": column}


def _refuse(reason: str, clause: str, node: Any = None) -> SqlError:
    where = _at(node) if node is not None else {}
    return SqlError(reason, clause=clause, **where)


def _parse(text: str, dialect: str) -> Any:
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        statements = sqlglot.parse(text, dialect=dialect)
    except ParseError as error:
        found = error.errors[0] if error.errors else {}
        description = str(found.get("description") or "not valid SQL")[:200]
        raise SqlError(
            description,
            clause="syntax",
            line=int(found.get("line") or 0),
            column=int(found.get("col") or 0),
        ) from None
    except Exception as error:  # sqlglot's tokenizer or a dialect's hook: still the text
        raise SqlError(f"not valid SQL ({type(error).__name__})", clause="syntax") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise SqlError(
            f"one statement is released at a time, found {len(statements)}", clause="statement"
        )
    return statements[0]


def _check_row_level(node: Any, clause: str, aggregates: tuple[type, ...]) -> None:
    """Refuse what is not a function of one row (module docstring)."""
    from sqlglot import exp

    for sub in node.walk():
        if isinstance(sub, exp.Window):
            raise _refuse("a window function reads other rows", clause, sub)
        if isinstance(sub, (exp.Subquery, exp.Select, exp.Exists)):
            raise _refuse("a subquery is not a row-level expression", clause, sub)
        if isinstance(sub, aggregates) or type(sub).__name__ in _UNSUPPORTED:
            raise _refuse(f"an aggregate ({sub.sql()[:60]}) is not allowed here", clause, sub)
        if isinstance(sub, exp.AggFunc):
            raise _refuse(f"the aggregate {sub.sql()[:60]} is not allowed here", clause, sub)
        if isinstance(sub, exp.Column) and isinstance(sub.this, exp.Star):
            raise _refuse("* is not a row-level value", clause, sub)
        name = type(sub).__name__
        if name not in _ROW_LEVEL:
            label = sub.sql()[:60] if not isinstance(sub, exp.Anonymous) else sub.name
            raise _refuse(
                f"{label!s} ({name}) is not among the row-level functions dpkit allows "
                "(arithmetic, comparisons, CASE, COALESCE, CAST, string and date functions)",
                clause,
                sub,
            )


def _check_post(node: Any, clause: str) -> None:
    """Post-processing runs the allowed row-level functions only (on released values: no
    function that reads a file or a setting), outside aggregates."""
    from sqlglot import exp

    for sub in node.walk():
        if _is_aggregate(sub):
            continue
        name = type(sub).__name__
        if name not in _ROW_LEVEL and not isinstance(sub, exp.Ordered):
            label = sub.name if isinstance(sub, exp.Anonymous) else sub.sql()[:60]
            raise _refuse(f"{label} ({name}) is not among the functions dpkit allows", clause, sub)


def _aggregate_types() -> tuple[type, ...]:
    from sqlglot import exp

    return (
        exp.Count,
        exp.Sum,
        exp.Avg,
        exp.Median,
        exp.PercentileCont,
        exp.WithinGroup,
        *(getattr(exp, name) for name in _SPREAD),
    )


def _is_aggregate(node: Any) -> bool:
    from sqlglot import exp

    if isinstance(node, exp.WithinGroup):
        return True
    return isinstance(node, exp.AggFunc) or type(node).__name__ in _UNSUPPORTED


def _number(node: Any) -> float | None:
    from sqlglot import exp

    sign = 1.0
    if isinstance(node, exp.Neg):
        sign, node = -1.0, node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * float(node.this)
        except ValueError:
            return None
    return None


class _Builder:
    """The state of one plan being built."""

    def __init__(
        self,
        statement: Any,
        extracted: Extracted,
        bounds: Mapping[str, tuple[float, float]],
        unit: str | None,
    ):
        self.statement = statement
        self.extracted = extracted
        self.bounds = bounds
        self.unit = unit
        self.aggregates: dict[str, Aggregate] = {}
        self.groups: list[Group] = []
        self.group_keys: dict[str, str] = {}
        self.columns: dict[str, tuple[int, int]] = {}
        self.public_columns: dict[str, dict[str, tuple[int, int]]] = {}
        self.unqualified: dict[str, tuple[int, int]] = {}
        self.alias = ""

    def row_level(self, node: Any, clause: str) -> str:
        """DuckDB SQL of a row-level expression (checked), noting the columns it reads."""
        from sqlglot import exp

        _check_row_level(node, clause, _aggregate_types())
        for column in node.find_all(exp.Column):
            table = column.table
            if table in self.public_columns:
                self.public_columns[table].setdefault(column.name, _position(column))
                continue
            if table and table != self.alias:
                read = [self.alias, *self.public_columns]
                raise _refuse(
                    f"{column.sql()} names the table {table!r}; the tables read are {read}",
                    clause,
                    column,
                )
            self.columns.setdefault(column.name, _position(column))
            if not table:
                self.unqualified.setdefault(column.name, _position(column))
        return str(node.sql(dialect="duckdb"))

    def aggregate(self, node: Any, clause: str) -> str:
        """The released column of an aggregate call (one per distinct call)."""
        from sqlglot import exp

        kind_name = type(node).__name__
        if kind_name in _UNSUPPORTED:
            raise _refuse(f"{kind_name.upper()}: {_UNSUPPORTED[kind_name]}", clause, node)
        key = node.sql(dialect="duckdb")
        start = (node._meta or {}).get("start")
        if key in self.aggregates and start not in self.extracted.bounds:
            return self.aggregates[key].name
        line, column = _position(node)
        name = f"__a{len(self.aggregates)}"
        argument_node: Any = None
        q: float | None = None
        if isinstance(node, exp.Count):
            inner = node.this
            if isinstance(inner, exp.Star):
                kind = "count"
            elif isinstance(inner, exp.Distinct):
                values = inner.expressions
                if (
                    len(values) != 1
                    or not isinstance(values[0], exp.Column)
                    or self.unit is None
                    or values[0].name != self.unit
                ):
                    raise _refuse(
                        "COUNT(DISTINCT ...) counts people: its argument must be the privacy "
                        "unit column (privacy_unit_column)",
                        clause,
                        node,
                    )
                self.row_level(values[0], clause)
                kind = "count_distinct"
            else:
                kind, argument_node = "count_values", inner
        elif isinstance(node, exp.Sum):
            kind, argument_node = "sum", node.this
        elif isinstance(node, exp.Avg):
            kind, argument_node = "mean", node.this
        elif isinstance(node, exp.Median):
            kind, argument_node, q = "quantile", node.this, 0.5
        elif isinstance(node, exp.PercentileCont):
            kind, argument_node = "quantile", node.this
            q = _number(node.expression)
        elif isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
            kind = "quantile"
            q = _number(node.this.this)
            ordered = node.expression.expressions if node.expression is not None else []
            if len(ordered) != 1:
                raise _refuse("WITHIN GROUP (ORDER BY x) takes one value", clause, node)
            argument_node = ordered[0].this
            start = (node.this._meta or {}).get("start", start)
        else:
            label = node.sql()[:60]
            raise _refuse(
                f"{label}: dpkit releases COUNT, SUM, AVG, PERCENTILE_CONT, MEDIAN, "
                "VAR_POP, VAR_SAMP (VARIANCE), STDDEV_POP and STDDEV_SAMP (STDDEV)",
                clause,
                node,
            )
        if kind == "quantile" and (q is None or not 0.0 <= q <= 1.0):
            raise _refuse("the percentile must be a number in [0, 1]", clause, node)
        if isinstance(node, exp.AggFunc) and node.args.get("distinct") is not None:
            raise _refuse("DISTINCT is only allowed as COUNT(DISTINCT id)", clause, node)
        argument = None
        if argument_node is not None:
            if isinstance(argument_node, exp.Distinct):
                raise _refuse(
                    "DISTINCT is only allowed as COUNT(DISTINCT id)", clause, argument_node
                )
            argument = self.row_level(argument_node, clause)
        bounds = self.extracted.bounds.get(start) if start is not None else None
        if kind in ("sum", "mean", "quantile"):
            if bounds is None and isinstance(argument_node, exp.Column):
                bounds = self.bounds.get(argument_node.name)
            if bounds is None:
                raise SqlError(
                    f"{node.sql()[:60]} needs its clamping bounds: write "
                    f"{BOUNDS} => (lower, upper) in the call, or give bounds for the column "
                    "beside the query",
                    clause=clause,
                    line=line,
                    column=column,
                )
        elif bounds is not None:
            raise SqlError(
                f"{BOUNDS} applies to SUM, AVG and PERCENTILE_CONT, not to COUNT",
                clause=clause,
                line=line,
                column=column,
            )
        text = node.sql(dialect="duckdb")
        if bounds is not None:
            text = f"{text[:-1]}, {BOUNDS} => ({bounds[0]:g}, {bounds[1]:g}))"
        self.aggregates[key if start not in self.extracted.bounds else f"{key}@{start}"] = (
            Aggregate(name, kind, text, argument, bounds, q, line, column)
        )
        return name

    def spread(self, node: Any, clause: str) -> Any:
        """A variance or standard deviation over the released table, from three aggregates
        released with their own shares of ε: with x clamped to [L, U], m = (L + U)/2 and
        r = (U − L)/2, the count n of the rows whose x is a number, the centred sum
        S = Σ (x − m) (a SUM with bounds (−r, r): sensitivity G·R·r) and the centred sum of
        squares Q = Σ (x − m)² (a SUM with bounds (0, r²): G·R·r²). The population variance is
        Q/n − (S/n)² (variance is shift-invariant, so centring at m changes nothing but the
        sensitivities), with n at least 1 and the result clamped to [0, r²], the largest
        variance of values in [L, U]; the sample variance multiplies it by n/(n − 1) with n at
        least 2 (clamped to [0, r²·n/(n − 1)]); a standard deviation is its square root. This
        is the construction of ZetaSQL's ANON_VAR_POP (Wilson, Zhang, Lam, Desfontaines,
        Simmons-Marengo and Gipson 2020, "Differentially Private SQL with Bounded User
        Contribution", PoPETs 2020(2)); the three releases compose (Dwork & Roth 2014, Theorem
        3.16) and everything after them is post-processing (ibid., Proposition 2.1)."""
        import sqlglot
        from sqlglot import exp

        sample, root = _SPREAD[type(node).__name__]
        key = node.sql(dialect="duckdb")
        start = (node._meta or {}).get("start")
        line, column = _position(node)
        if node.args.get("distinct") is not None or isinstance(node.this, exp.Distinct):
            raise _refuse("DISTINCT is only allowed as COUNT(DISTINCT id)", clause, node)
        argument = self.row_level(node.this, clause)
        bounds = self.extracted.bounds.get(start) if start is not None else None
        if bounds is None and isinstance(node.this, exp.Column):
            bounds = self.bounds.get(node.this.name)
        if bounds is None:
            raise SqlError(
                f"{node.sql()[:60]} needs its clamping bounds: write {BOUNDS} => (lower, "
                "upper) in the call, or give bounds for the column beside the query",
                clause=clause,
                line=line,
                column=column,
            )
        lower, upper = bounds
        if not lower < upper:
            raise SqlError(
                f"{node.sql()[:60]}: the lower bound must be below the upper",
                clause=clause,
                line=line,
                column=column,
            )
        middle, half = (lower + upper) / 2, (upper - lower) / 2
        text = f"{key[:-1]}, {BOUNDS} => ({lower:g}, {upper:g}))"
        # x − m, missing where x is (NULL or NaN); its square with x clamped to [L, U], missing
        # where x is (DuckDB's least and greatest skip a NULL: it must not become r²).
        centred = f"({argument}) - {middle!r}"
        centred = f"CASE WHEN isnan({centred}) THEN NULL ELSE {centred} END"
        square = (
            f"CASE WHEN ({centred}) IS NULL THEN NULL "
            f"ELSE pow(least(greatest({centred}, {-half!r}), {half!r}), 2) END"
        )
        parts = (
            ("count_values", "count", square, None),
            ("sum", "centred sum", centred, (-half, half)),
            ("sum", "centred sum of squares", square, (0.0, half * half)),
        )
        names = []
        for kind, what, expression, part_bounds in parts:
            name = f"__a{len(self.aggregates)}"
            self.aggregates[f"{key}@{start}:{what}"] = Aggregate(
                name, kind, f"{text}: {what}", expression, part_bounds, None, line, column
            )
            names.append(f'"{name}"')
        n, total, squares = names
        least = 2.0 if sample else 1.0
        count = f"greatest({n}, {least!r})"
        variance = f"{squares} / {count} - pow({total} / {count}, 2)"
        widest = half * half
        if sample:
            variance = f"({variance}) * {count} / ({count} - 1)"
            widest_text = f"{widest!r} * {count} / ({count} - 1)"
        else:
            widest_text = repr(widest)
        released = f"greatest(0.0, least({widest_text}, {variance}))"
        if root:
            released = f"sqrt({released})"
        return sqlglot.parse_one(released, read="duckdb")

    def rewrite(self, node: Any, clause: str, outputs: Mapping[str, Any] = {}) -> Any:
        """``node`` over the released table: aggregates and group expressions replaced by
        their columns; in HAVING and ORDER BY, a SELECT alias by its output column."""
        from sqlglot import exp

        key = node.sql(dialect="duckdb")
        if key in self.group_keys:
            return exp.column(self.group_keys[key], quoted=True)
        if type(node).__name__ in _SPREAD:
            return self.spread(node, clause)
        if _is_aggregate(node):
            return exp.column(self.aggregate(node, clause), quoted=True)
        if isinstance(node, exp.Column):
            if not node.table and node.name in outputs:
                return outputs[node.name].copy()
            raise _refuse(
                f"the column {node.sql()} is neither grouped nor inside an aggregate",
                clause,
                node,
            )
        if isinstance(node, (exp.Window, exp.Subquery, exp.Select)):
            raise _refuse(f"{type(node).__name__.lower()} is not allowed", clause, node)
        copy = node.copy()
        for arg, value in list(copy.args.items()):
            if isinstance(value, exp.Expression):
                copy.set(arg, self.rewrite(value, clause, outputs))
            elif isinstance(value, list):
                copy.set(
                    arg,
                    [
                        self.rewrite(v, clause, outputs) if isinstance(v, exp.Expression) else v
                        for v in value
                    ],
                )
        return copy


def _refuse_structure(select: Any) -> None:
    """Refuse the constructs whose sensitivity dpkit cannot derive, by clause."""
    from sqlglot import exp

    for clause, key in (
        ("WITH", "with_"),
        ("LATERAL", "laterals"),
        ("QUALIFY", "qualify"),
        ("WINDOW", "windows"),
        ("PIVOT", "pivots"),
        ("SAMPLE", "sample"),
        ("INTO", "into"),
        ("CONNECT BY", "connect"),
        ("PREWHERE", "prewhere"),
        ("DISTRIBUTE BY", "distribute"),
        ("SORT BY", "sort"),
        ("CLUSTER BY", "cluster"),
        ("FOR UPDATE", "locks"),
        ("SETTINGS", "settings"),
        ("FORMAT", "format"),
        ("OPTIONS", "options"),
        ("FOR", "for_"),
        ("MATCH_RECOGNIZE", "match"),
        ("EXCLUDE", "exclude"),
        ("hint", "hint"),
        ("SELECT AS", "kind"),
        ("modifier", "operation_modifiers"),
    ):
        value = select.args.get(key)
        if value:
            node = value[0] if isinstance(value, list) else value
            reason = {
                "WITH": "a common table expression (WITH) is not released: write the rows in "
                "the FROM table and the row-level WHERE",
            }.get(clause, f"{clause} is not released by dpkit")
            raise _refuse(reason, clause, node)
    if select.args.get("distinct") is not None:
        raise _refuse(
            "SELECT DISTINCT would release exact group keys; use GROUP BY",
            "SELECT DISTINCT",
            select.args["distinct"],
        )
    for node in select.find_all(exp.Window):
        raise _refuse("a window function reads other rows", "window function", node)


def _table(select: Any) -> tuple[str, str]:
    from sqlglot import exp

    source = select.args.get("from_") or select.args.get("from")
    if source is None:
        raise SqlError("the statement reads no table (add FROM table)", clause="FROM")
    table = source.this
    if isinstance(table, exp.Subquery):
        raise _refuse(
            "a subquery in FROM is not released (its aggregates would have no bounded "
            "sensitivity): read the table itself",
            "FROM",
            table,
        )
    if not isinstance(table, exp.Table) or not table.name or table.args.get("joins"):
        raise _refuse("FROM must name one table", "FROM", table)
    if table.db or table.catalog:
        raise _refuse(
            f"the table {table.sql()} is qualified; give the tables by name",
            "FROM",
            table,
        )
    if isinstance(table.this, exp.Anonymous) or not isinstance(table.this, exp.Identifier):
        raise _refuse("FROM must name a table, not call a function", "FROM", table)
    return table.name, table.alias_or_name


def _key(node: Any, alias: str, join_alias: str) -> KeyColumn:
    from sqlglot import exp

    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise _refuse(
            "a join condition equates columns (private.k = public.k, ANDed); "
            f"{node.sql()[:60]} is not a column",
            "JOIN",
            node,
        )
    if node.table not in ("", alias, join_alias):
        raise _refuse(
            f"{node.sql()} names the table {node.table!r}; a join condition relates "
            f"{alias!r} and {join_alias!r}",
            "JOIN",
            node,
        )
    return KeyColumn(node.table, node.name, *_position(node))


def _joins(
    select: Any, alias: str, private: frozenset[str] | set[str], public: frozenset[str] | set[str]
) -> tuple[Join, ...]:
    """The public tables joined to the private one (module docstring)."""
    from sqlglot import exp

    found: list[Join] = []
    aliases = {alias}
    for join in select.args.get("joins") or []:
        table = join.this
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        method = str(join.args.get("method") or "").upper()
        on, using = join.args.get("on"), join.args.get("using")
        if not isinstance(table, exp.Table) or not table.name or table.db or table.catalog:
            raise _refuse("a join reads a public table, named", "JOIN", join)
        name, join_alias = table.name, table.alias_or_name
        if name in private:
            raise _refuse(
                f"a join of two private tables ({name!r}) has no bounded sensitivity: join "
                "public lookup tables only",
                "JOIN",
                join,
            )
        if name not in public:
            raise _refuse(
                f"the joined table {name!r} is not a public table; the public tables are "
                f"{sorted(public)} (a join of private tables is not released)",
                "JOIN",
                join,
            )
        if (
            method
            or side not in ("", "LEFT")
            or kind not in ("", "INNER", "OUTER")
            or (kind == "OUTER" and side != "LEFT")
        ):
            words = " ".join(w for w in (method, side, kind) if w) or "this"
            raise _refuse(
                f"a {words} join is not released: use [INNER] JOIN or LEFT JOIN",
                "JOIN",
                join,
            )
        if join_alias in aliases:
            raise _refuse(f"the table alias {join_alias!r} is repeated", "JOIN", join)
        aliases.add(join_alias)
        keys: list[tuple[KeyColumn, KeyColumn]] = []
        if using:
            for identifier in using:
                line, column = _position(identifier)
                keys.append(
                    (
                        KeyColumn(alias, identifier.name, line, column),
                        KeyColumn(join_alias, identifier.name, line, column),
                    )
                )
        elif on is not None:
            conditions, pending = [], [on]
            while pending:
                node = pending.pop()
                if isinstance(node, exp.Paren):
                    pending.append(node.this)
                elif isinstance(node, exp.And):
                    pending += [node.right, node.left]
                else:
                    conditions.append(node)
            for condition in conditions:
                if not isinstance(condition, exp.EQ):
                    raise _refuse(
                        f"the join condition {condition.sql()[:60]} is not an equality of "
                        "columns (private.k = public.k, ANDed)",
                        "JOIN",
                        condition,
                    )
                keys.append(
                    (
                        _key(condition.left, alias, join_alias),
                        _key(condition.right, alias, join_alias),
                    )
                )
        else:
            raise _refuse(
                "a join without ON or USING pairs every row with every row: join ON "
                "private.k = public.k",
                "JOIN",
                join,
            )
        found.append(
            Join(
                name,
                join_alias,
                "LEFT" if side == "LEFT" else "INNER",
                tuple(keys),
                bool(using),
                *_position(join),
            )
        )
    return tuple(found)


def _limit(node: Any, clause: str) -> int:
    from sqlglot import exp

    value = node.expression if node is not None else None
    if isinstance(node, exp.Limit | exp.Offset) and isinstance(value, exp.Literal):
        try:
            number = int(value.this)
        except ValueError:
            number = -1
        if number >= 0 and not value.is_string:
            return number
    raise _refuse(f"{clause} takes a whole number", clause, node)


def plan_statement(
    text: str,
    *,
    dialect: str = "duckdb",
    tables: frozenset[str] | set[str],
    public: frozenset[str] | set[str] = frozenset(),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Plan:
    """The plan of ``text`` (see the module docstring), or a :class:`~dpkit.errors.SqlError`
    naming the clause refused. ``tables`` are the private tables' names, ``public`` the
    public tables' (which a JOIN may read), ``bounds`` the
    clamping bounds of columns given beside the query, ``options`` the privacy options given
    beside it (merged with the statement's ``OPTIONS``; one given twice is refused)."""
    from sqlglot import exp

    if not isinstance(text, str) or not text.strip():
        raise SqlError("the statement is empty", clause="statement")
    if dialect not in DIALECTS:
        raise SqlError(
            f"dialect {dialect!r} is not offered; use one of {', '.join(DIALECTS)}",
            clause="dialect",
        )
    extracted = extract(text, dialect)
    merged = dict(extracted.options)
    for name, value in (options or {}).items():
        key = str(name).lower()
        if key in merged:
            found = merged[key]
            raise SqlError(
                f"the option {key!r} is given both in OPTIONS and beside the query",
                clause="OPTIONS",
                line=found.line,
                column=found.column,
            )
        merged[key] = Option(value, 0, 0)
    for name, option in merged.items():
        if name not in _KNOWN_OPTIONS:
            import difflib

            close = difflib.get_close_matches(name, _KNOWN_OPTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SqlError(
                f"unknown option {name!r}{hint} Options: {', '.join(_KNOWN_OPTIONS)}",
                clause="OPTIONS",
                line=option.line,
                column=option.column,
            )
    statement = _parse(extracted.text, dialect)
    if not isinstance(statement, exp.Select):
        kind = type(statement).__name__.upper()
        raise _refuse(
            f"only a SELECT is released (found {kind})",
            kind if isinstance(statement, (exp.Union, exp.Intersect, exp.Except)) else "statement",
            statement,
        )
    _refuse_structure(statement)
    table, alias = _table(statement)
    if table not in tables:
        source = statement.args.get("from_") or statement.args.get("from")
        hint = " (a public table is joined to the private one: FROM private JOIN public)"
        raise _refuse(
            f"unknown table {table!r}; the private tables are {sorted(tables)}"
            + (hint if table in public else ""),
            "FROM",
            source,
        )
    unit_option = merged.get("privacy_unit_column")
    unit = None if unit_option is None else unit_option.value
    if unit is not None and (not isinstance(unit, str) or not unit):
        raise SqlError(
            "privacy_unit_column must name a column",
            clause="OPTIONS",
            line=unit_option.line if unit_option else 0,
            column=unit_option.column if unit_option else 0,
        )
    builder = _Builder(statement, extracted, dict(bounds or {}), unit)
    builder.alias = alias
    joins = _joins(statement, alias, tables, public)
    for join in joins:
        builder.public_columns[join.alias] = {}
    where_node = statement.args.get("where")
    where = builder.row_level(where_node.this, "WHERE") if where_node is not None else None
    projections = list(statement.expressions)
    for projection in projections:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            raise _refuse(
                "SELECT * would release rows; select groups and aggregates", "SELECT", projection
            )
    aliases = {p.alias: p.unalias() for p in projections if isinstance(p, exp.Alias)}
    group_node = statement.args.get("group")
    if group_node is not None:
        for key in ("grouping_sets", "cube", "rollup"):
            if group_node.args.get(key):
                raise _refuse(
                    f"GROUP BY {key.upper().replace('_', ' ')} is not released",
                    "GROUP BY",
                    group_node,
                )
        for i, item in enumerate(group_node.expressions):
            expression, output = item, None
            if isinstance(item, exp.Literal) and not item.is_string:
                index = int(float(item.this)) if item.this.isdigit() else 0
                if not 1 <= index <= len(projections):
                    raise _refuse(
                        f"GROUP BY {item.this} is not a SELECT position", "GROUP BY", item
                    )
                expression = projections[index - 1].unalias()
                output = projections[index - 1].alias_or_name
            elif isinstance(item, exp.Column) and not item.table and item.name in aliases:
                expression, output = aliases[item.name], item.name
            if _is_aggregate(expression) or any(_is_aggregate(n) for n in expression.walk()):
                raise _refuse("GROUP BY an aggregate is not possible", "GROUP BY", item)
            sql = builder.row_level(expression, "GROUP BY")
            if isinstance(expression, exp.Column) and unit is not None and expression.name == unit:
                raise _refuse(
                    "grouping by the privacy unit column would release each person's rows",
                    "GROUP BY",
                    item,
                )
            name = f"__g{i}"
            if output is None:
                matching = [
                    p.alias_or_name for p in projections if p.unalias().sql(dialect="duckdb") == sql
                ]
                output = (
                    matching[0]
                    if matching
                    else (expression.name if isinstance(expression, exp.Column) else f"group_{i}")
                )
            if sql in builder.group_keys:
                raise _refuse("a group expression is repeated", "GROUP BY", item)
            builder.group_keys[sql] = name
            builder.groups.append(Group(name, output, sql))
    selected = []
    outputs: dict[str, Any] = {}
    for projection in projections:
        inner = projection.unalias()
        output = (
            projection.alias_or_name
            if isinstance(projection, exp.Alias) or isinstance(inner, exp.Column)
            else inner.sql()
        )
        rewritten = builder.rewrite(inner, "SELECT")
        if output in outputs:
            raise _refuse(f"the output column {output!r} is repeated", "SELECT", projection)
        outputs[output] = rewritten
        selected.append(exp.alias_(rewritten, output, quoted=True))
    if not builder.aggregates:
        raise SqlError(
            "the statement releases no aggregate: select COUNT, SUM, AVG or PERCENTILE_CONT",
            clause="SELECT",
        )
    for node in selected:
        _check_post(node.this, "SELECT")
    post = exp.select(*selected).from_(exp.to_identifier(RELEASED, quoted=True))
    having = statement.args.get("having")
    if having is not None:
        condition = builder.rewrite(having.this, "HAVING", outputs)
        _check_post(condition, "HAVING")
        post = post.where(condition)
    order = statement.args.get("order")
    if order is not None:
        items = []
        for ordered in order.expressions:
            copy = ordered.copy()
            this = ordered.this
            if isinstance(this, exp.Literal) and not this.is_string:
                copy.set("this", this.copy())
            else:
                rewritten = builder.rewrite(this, "ORDER BY", outputs)
                _check_post(rewritten, "ORDER BY")
                copy.set("this", rewritten)
            items.append(copy)
        post = post.order_by(*items)
    limit = statement.args.get("limit")
    if limit is not None:
        post = post.limit(_limit(limit, "LIMIT"))
    offset = statement.args.get("offset")
    if offset is not None:
        post = post.offset(_limit(offset, "OFFSET"))
    if unit is not None and unit_option is not None:
        builder.columns.setdefault(unit, (unit_option.line, unit_option.column))
    return Plan(
        text=text,
        table=table,
        alias=alias,
        where=where,
        groups=tuple(builder.groups),
        aggregates=tuple(builder.aggregates.values()),
        columns=dict(builder.columns),
        post=str(post.sql(dialect="duckdb")),
        outputs=tuple(outputs),
        options=merged,
        joins=joins,
        public_columns={a: dict(c) for a, c in builder.public_columns.items()},
        unqualified=dict(builder.unqualified),
    )

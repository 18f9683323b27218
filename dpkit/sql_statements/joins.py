"""Joins of the private table with public lookup tables.

``FROM private [INNER | LEFT] JOIN public ON private.k = public.k [AND ...]`` (or
``USING (k, ...)``) is released when the public table's join key is **unique**: each private
row then matches at most one public row, so the join is a per-record map of the private
table (LEFT: the row with the public columns, NULL where none matches) followed, for INNER, by
a per-record filter (drop the rows that match none). A per-record map and filter are
1-stable transformations (McSherry 2009, *Privacy Integrated Queries*, §3 and §4.1: a
transformation T is c-stable when ‖T(A) ⊖ T(B)‖ ≤ c·‖A ⊖ B‖; Where and Select are 1-stable,
and a Join is stable when a record matches a bounded number of records of the other side):
removing one person's rows removes exactly those rows' images and nothing else, so the
privacy unit, its bounding and every sensitivity of :mod:`dpkit.sql_statements.plan` are
unchanged. A public table is public, so reading its rows to check that uniqueness is no
disclosure; it is checked in the public phase, before any private row is read, with the
columns' existence and comparable types (an equality DuckDB would have to cast, text against
a number, could fail on a value).

**Keys of two types.** DuckDB compares a private key of one type with a public key of another
(of one family: numbers, or dates and timestamps) after an implicit cast, and that cast can
merge public keys — BIGINT 2⁵³ and 2⁵³ + 1 are one DOUBLE, so a private DOUBLE would match
both rows, and a row would count twice — or fail on a value (a DATE beyond TIMESTAMP_NS's
range, after the spend). So each public key column of another type than the private column
it is compared with is first cast to the private column's type (:func:`align`), and the
uniqueness is checked, and the join made, on those values, where DuckDB compares two values
of one type without any cast: each private row still matches at most one public row, and
nothing fails. The cast is TRY_CAST (a value the private type cannot hold is missing: it
equals no private value) and, but to DOUBLE, kept only where it is exact — where casting it
back gives the public value — so that 1.5 does not become the integer 2 (DuckDB compares a
DOUBLE with any number as DOUBLEs: there the nearest DOUBLE is DuckDB's own answer).

In the private phase each public table is joined restricted to its rows whose key is unique
in it, which is the whole table once the check passed: the join stays 1-stable even if a
file changed between the phases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dpkit.errors import SqlError

__all__ = ["Join", "KeyColumn", "align", "check_joins", "join_sql", "register_public", "view"]

_NUMBERS = frozenset(
    {
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
        "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE",
    }
)  # fmt: skip
_TIMES = frozenset({"DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"})


@attrs.frozen
class KeyColumn:
    """A column of an ON equality: the alias naming it ("" when unqualified), its name and
    where it is in the statement."""

    table: str
    name: str
    line: int
    column: int


@attrs.frozen
class Join:
    """One public table joined to the private one: its name, alias, INNER or LEFT, and the
    equalities of its condition (a USING column is qualified by both sides)."""

    table: str
    alias: str
    kind: str
    keys: tuple[tuple[KeyColumn, KeyColumn], ...]
    using: bool
    line: int
    column: int


def view(index: int) -> str:
    """The name the public table of the ``index``-th join is registered under."""
    return f"__dpkit_public{index}"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _family(kind: str) -> str:
    """The comparison family of a DuckDB type: values of one family compare without a cast
    that could fail."""
    base = kind.upper()
    if base in _NUMBERS or base.startswith("DECIMAL"):
        return "number"
    if base in _TIMES:
        return "time"
    return base


def _compare(a: str, b: str) -> bool:
    """Whether columns of DuckDB types ``a`` and ``b`` compare without a cast that could
    fail: of one family, or one of them of the NULL type (every value missing, so it matches
    nothing: a frame's column of only missing values, which Spark types ``void``)."""
    return _family(a) == _family(b) or "NULL" in (a.upper().strip('"'), b.upper().strip('"'))


def _side(
    key: KeyColumn,
    private_alias: str,
    join: Join,
    private: Mapping[str, str],
    public: Mapping[str, str],
) -> str:
    """Which side ("private" or "public") a key column reads, from its alias or the schemas."""
    if key.table == private_alias:
        found = "private" if key.name in private else None
    elif key.table == join.alias:
        found = "public" if key.name in public else None
    else:
        here = [
            side for side, names in (("private", private), ("public", public)) if key.name in names
        ]
        if len(here) > 1:
            raise SqlError(
                f"the join column {key.name!r} is in both {join.table!r} and the private table: "
                "qualify it",
                clause="JOIN",
                line=key.line,
                column=key.column,
            )
        found = here[0] if here else None
    if found is None:
        where = repr(join.table) if key.table == join.alias else "the joined tables"
        raise SqlError(
            f"the join column {key.name!r} is not in {where}",
            clause="JOIN",
            line=key.line,
            column=key.column,
        )
    return found


def _cast(column: str, public: str, private: str) -> str:
    """The public key ``column`` (DuckDB type ``public``) as the private type ``private``
    (module docstring: missing where the cast fails or, but to DOUBLE, is not exact)."""
    cast = f"TRY_CAST({column} AS {private})"
    if private.upper() == "DOUBLE":
        return cast
    return f"CASE WHEN TRY_CAST({cast} AS {public}) = {column} THEN {cast} END"


def align(
    found: Any,
    schema: Mapping[str, str],
    private: Mapping[str, str],
    pairs: tuple[tuple[str, str], ...],
    join: Join,
) -> Any:
    """The public relation ``found`` (columns ``schema``) with each key column of ``pairs``
    ((private column, public column)) whose type is not its private column's (``private``:
    the private schema) cast to it (module docstring); a public column
    compared with private columns of two types is refused with the JOIN (one cast each)."""
    targets: dict[str, str] = {}
    for mine, theirs in pairs:
        wanted = private[mine]
        if targets.setdefault(theirs, wanted) != wanted:
            raise SqlError(
                f"the public join column {theirs!r} is compared with private columns of two "
                f"types ({targets[theirs]}, {wanted}): compare it with one",
                clause="JOIN",
                line=join.line,
                column=join.column,
            )
    casts = {
        theirs: wanted
        for theirs, wanted in targets.items()
        if wanted != schema[theirs] and "NULL" not in (wanted.upper(), schema[theirs].upper())
    }
    if not casts:
        return found
    replaced = ", ".join(
        f"{_cast(_quote(name), schema[name], wanted)} AS {_quote(name)}"
        for name, wanted in casts.items()
    )
    return found.query("__dpkit_key", f"SELECT * REPLACE ({replaced}) FROM __dpkit_key")


def check_joins(
    joins: tuple[Join, ...],
    private_alias: str,
    private: Mapping[str, str],
    public: Mapping[str, tuple[Mapping[str, str], Any]],
    *,
    unique: bool = True,
) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Public phase: each join's equalities as (private column, public column) pairs, once
    each column is found in its table with a comparable type and the public key is unique
    (module docstring); a :class:`~dpkit.errors.SqlError` naming the JOIN otherwise.
    ``private`` is the private table's schema, ``public`` each public table's schema and its
    relation (by join alias), whose rows are read."""
    resolved = []
    for join in joins:
        schema, found = public[join.alias]
        pairs = []
        for left, right in join.keys:
            sides = (
                _side(left, private_alias, join, private, schema),
                _side(right, private_alias, join, private, schema),
            )
            if sorted(sides) != ["private", "public"]:
                raise SqlError(
                    f"a join condition equates a private column with a column of "
                    f"{join.table!r}; {left.name} = {right.name} does not",
                    clause="JOIN",
                    line=left.line,
                    column=left.column,
                )
            mine, theirs = (left, right) if sides[0] == "private" else (right, left)
            if not _compare(private[mine.name], schema[theirs.name]):
                raise SqlError(
                    f"the join columns {mine.name} ({private[mine.name]}) and "
                    f"{join.table}.{theirs.name} ({schema[theirs.name]}) have types that do not "
                    "compare",
                    clause="JOIN",
                    line=theirs.line,
                    column=theirs.column,
                )
            pairs.append((mine.name, theirs.name))
        resolved.append(tuple(pairs))
        if not unique:
            continue
        found = align(found, schema, private, tuple(pairs), join)
        columns = ", ".join(_quote(b) for _, b in pairs)
        present = " AND ".join(f"{_quote(b)} IS NOT NULL" for _, b in pairs)
        repeated = found.query(
            "__dpkit_lookup",
            f"SELECT COUNT(*) FROM (SELECT {columns} FROM __dpkit_lookup WHERE {present} "
            f"GROUP BY ALL HAVING COUNT(*) > 1)",
        ).fetchall()
        if not repeated or repeated[0][0]:
            raise SqlError(
                f"the public table {join.table!r} repeats a value of its join key "
                f"({', '.join(b for _, b in pairs)}): a private row would match several rows; "
                "join on a key that is unique in the public table",
                clause="JOIN",
                line=join.line,
                column=join.column,
            )
    return tuple(resolved)


def register_public(con: Any, index: int, found: Any, pairs: tuple[tuple[str, str], ...]) -> None:
    """Register a public table on ``con`` as the view of its rows whose key is unique in it
    (module docstring)."""
    raw = f"__dpkit_raw{index}"
    con.register(raw, found.to_arrow_table())
    columns = ", ".join(_quote(b) for _, b in pairs)
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {_quote(view(index))} AS "
        f"SELECT * EXCLUDE (__dpkit_n) FROM (SELECT *, COUNT(*) OVER (PARTITION BY {columns}) "
        f"AS __dpkit_n FROM {raw}) WHERE __dpkit_n = 1"
    )


def join_sql(
    joins: tuple[Join, ...], private_alias: str, pairs: tuple[tuple[tuple[str, str], ...], ...]
) -> str:
    """The JOIN clauses of the row-level statement, over the registered public views."""
    parts = []
    for index, (join, keys) in enumerate(zip(joins, pairs, strict=True)):
        if join.using:
            condition = f"USING ({', '.join(_quote(a) for a, _ in keys)})"
        else:
            condition = "ON " + " AND ".join(
                f"{_quote(private_alias)}.{_quote(a)} = {_quote(join.alias)}.{_quote(b)}"
                for a, b in keys
            )
        parts.append(f" {join.kind} JOIN {_quote(view(index))} AS {_quote(join.alias)} {condition}")
    return "".join(parts)

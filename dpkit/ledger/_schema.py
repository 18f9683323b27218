"""The ledger's two tables, described once for every backend, and the SQL they are used with.

A ledger is a key/value table of metadata (``dpkit_meta``: format tag, schema version, dataset,
budget, composition rule, privacy unit, and the cached spent totals) and a table of entries
(``dpkit_entries``: one row per release, every value stored as text; amounts as exact fractions
``"1/10"``).

Every column of an entry and every spent total is declared here and only here; the tables'
DDL, the insert of an entry, the totals check and the migration of older ledgers are derived
from these declarations, so a new entry field or a new spent total is one change that the
SQLite and the PostgreSQL backends both get. A backend only says how its dialect differs
(:class:`Dialect`: placeholders, the key column, qualified table names).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

__all__ = [
    "ADDED_META",
    "ENTRY_COLUMNS",
    "FORMAT",
    "MOVE_KEYS",
    "SCHEMA_VERSION",
    "TOTALS",
    "Column",
    "Dialect",
    "Total",
    "Tx",
    "entry_column_names",
    "table_statements",
]

FORMAT = "dpkit-ledger"
#: 2 added the ``label`` and ``result`` columns; 3 the ``mu2`` and ``rule`` columns, the
#: Gaussian-DP totals and the ``rule`` of a "best" ledger; 4 the move state (``state``,
#: ``move_id``, ``moved_to``, ``moved_from``), so that a dpkit that does not know a sealed ledger
#: refuses to open it rather than spend it; 5 the privacy unit (the ``unit`` meta key and entry
#: column), so that a dpkit that does not check it refuses the ledger rather than mix units in
#: it. Older ledgers are migrated when opened.
SCHEMA_VERSION = 5


@attrs.frozen
class Column:
    """One text column of the entries table (after the integer key ``seq``).

    ``since`` is the schema version that added it: opening an older ledger adds it
    (``ALTER TABLE ... ADD COLUMN``), so a column added after version 1 must be nullable.
    """

    name: str
    nullable: bool = False
    unique: bool = False
    check: str = ""
    since: int = 1

    def __attrs_post_init__(self) -> None:
        if self.since > 1 and not self.nullable:
            raise ValueError(f"column {self.name} is added by a migration: it must be nullable")

    def ddl(self) -> str:
        return (
            f"{self.name} TEXT"
            + ("" if self.nullable else " NOT NULL")
            + (" UNIQUE" if self.unique else "")
            + (f" CHECK ({self.check})" if self.check else "")
        )


ENTRY_COLUMNS: tuple[Column, ...] = (
    Column("release_id", unique=True),
    Column("time"),
    Column("session_id"),
    Column("dataset_id"),
    Column("mechanism"),
    Column("parameters"),
    Column("event"),
    Column("epsilon"),
    Column("delta"),
    Column("rho", nullable=True),
    Column("randomness"),
    Column("status", check="status IN ('spent', 'aborted')"),
    Column("label", nullable=True, since=2),
    Column("result", nullable=True, since=2),
    Column("mu2", nullable=True, since=3),
    Column("rule", nullable=True, since=3),
    Column("unit", nullable=True, since=5),
)


@attrs.frozen
class Total:
    """A spent total: the exact sum, over the spent entries, of the entry column (and
    :class:`~dpkit.ledger.Cost` attribute) ``name``, cached in the metadata as ``spent_<name>``.
    A missing (NULL) amount counts as 0."""

    name: str
    symbol: str
    since: int = 1

    @property
    def key(self) -> str:
        return f"spent_{self.name}"


TOTALS: tuple[Total, ...] = (
    Total("epsilon", "ε"),
    Total("delta", "δ"),
    Total("rho", "ρ"),
    Total("mu2", "μ²", since=3),
)

#: Metadata keys added after version 1, with the value a migration gives them: the Gaussian-DP
#: budget ('' when the ledger does not compose in μ²), a "best" ledger's currency ('' until
#: its first spend fixes it), the privacy unit ('' until fixed; a migration derives it from
#: the spent entries instead: :meth:`dpkit.ledger.Ledger.unit`), and the move state
#: (:mod:`dpkit.ledger._move`): a ledger is ``live`` until it is moved.
ADDED_META: dict[str, str] = {
    "budget_mu2": "",
    "rule": "",
    "unit": "",
    "state": "live",
    "move_id": "",
    "moved_to": "",
    "moved_from": "",
}
#: The metadata keys of the move state, which a move sets rather than copies.
MOVE_KEYS = ("state", "move_id", "moved_to", "moved_from")


def entry_column_names() -> tuple[str, ...]:
    """Every column of an entry, in the order :class:`~dpkit.ledger.Ledger` reads them."""
    return ("seq", *(c.name for c in ENTRY_COLUMNS))


@attrs.frozen
class Dialect:
    """How one backend's SQL differs: its placeholder, its auto-numbered key column, whether
    ``INSERT ... RETURNING`` gives the key, and the (qualified) names of the two tables."""

    placeholder: str
    key_column: str
    returning: bool
    meta: str = "dpkit_meta"
    entries: str = "dpkit_entries"

    def sql(self, template: str) -> str:
        """``template`` in this dialect: ``{meta}``/``{entries}`` become the table names and
        ``?`` the placeholder (the ledger's SQL contains no other ``?``, ``%`` or braces)."""
        return _render(self, template)


@functools.lru_cache(maxsize=256)
def _render(dialect: Dialect, template: str) -> str:
    text = template.format(meta=dialect.meta, entries=dialect.entries)
    return text.replace("?", dialect.placeholder)


def table_statements(dialect: Dialect) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` statements for the two tables, in this dialect."""
    columns = ",\n    ".join([f"seq {dialect.key_column}", *(c.ddl() for c in ENTRY_COLUMNS)])
    return [
        f"CREATE TABLE IF NOT EXISTS {dialect.meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {dialect.entries} (\n    {columns}\n)",
    ]


class Tx:
    """One connection of a backend (a DB-API connection: ``sqlite3`` or ``psycopg``), inside
    a transaction or reading, that runs the ledger's SQL templates in the backend's dialect."""

    __slots__ = ("connection", "dialect")

    def __init__(self, connection: Any, dialect: Dialect):
        self.connection = connection
        self.dialect = dialect

    def rows(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.connection.execute(self.dialect.sql(template), params).fetchall())

    def one(self, template: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self.connection.execute(self.dialect.sql(template), params).fetchone()
        return None if row is None else tuple(row)

    def run(self, template: str, params: Sequence[Any] = ()) -> None:
        self.connection.execute(self.dialect.sql(template), params)

    def run_many(self, template: str, rows: Iterable[Sequence[Any]]) -> None:
        self.connection.cursor().executemany(self.dialect.sql(template), list(rows))

    def insert(self, template: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` into the entries table and return the new row's ``seq``."""
        if self.dialect.returning:
            cursor = self.connection.execute(self.dialect.sql(template + " RETURNING seq"), params)
            return int(cursor.fetchone()[0])
        return int(self.connection.execute(self.dialect.sql(template), params).lastrowid or 0)

"""Reading a ledger's history: its entries, each checked as it is read, and counts of its
releases that the database makes without loading the entries.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dpkit.ledger._schema import TOTALS, Tx, entry_column_names
from dpkit.ledger._stored import load_json
from dpkit.ledger._totals import row_cost
from dpkit.ledger._unit import entry_unit
from dpkit.ledger._values import PENDING, LedgerEntry

__all__ = ["SELECT_ENTRIES", "entries", "entry", "release_counts", "status_counts"]

#: Every column of the entries, in :func:`~dpkit.ledger._schema.entry_column_names` order.
SELECT_ENTRIES = f"SELECT {', '.join(entry_column_names())} FROM {{entries}}"


def entries(tx: Tx, path: str) -> Iterator[LedgerEntry]:
    """Every entry, in commit order."""
    names = entry_column_names()
    for row in tx.rows(SELECT_ENTRIES + " ORDER BY seq"):
        yield entry(path, dict(zip(names, row, strict=True)))


def entry(path: str, r: dict[str, Any]) -> LedgerEntry:
    """One entry from its stored columns; :class:`~dpkit.ledger.LedgerCorrupt` if one of them
    does not read back."""

    def load(column: str) -> Any:
        return load_json(path, r["seq"], column, r[column])

    return LedgerEntry(
        int(r["seq"]),
        r["release_id"],
        r["time"],
        r["session_id"],
        r["dataset_id"],
        r["mechanism"],
        load("parameters"),
        load("event"),
        row_cost(path, {t.name: r[t.name] for t in TOTALS}, where=f"entry {r['seq']}"),
        r["randomness"],
        r["status"],
        r["label"],
        load("result"),
        r["rule"],
        entry_unit(path, r["seq"], r["unit"]),
    )


def release_counts(tx: Tx) -> tuple[int, int]:
    """``(spent releases, those without a stored result)``, counted by the database (a
    result is not stored while NULL, JSON ``null`` or :data:`PENDING`, as
    :attr:`LedgerEntry.result_stored` says)."""
    row = tx.one(
        "SELECT count(*), COALESCE(SUM(CASE WHEN result IS NULL OR result IN ('null', ?)"
        " THEN 1 ELSE 0 END), 0) FROM {entries} WHERE status = 'spent'",
        (PENDING,),
    )
    assert row is not None
    return int(row[0]), int(row[1])


def status_counts(tx: Tx) -> dict[str, int]:
    """The number of entries of each status (``spent``, ``aborted``), counted by the
    database (``dpkit budget show`` need not load every entry of a large ledger)."""
    return {
        str(status): int(n)
        for status, n in tx.rows("SELECT status, count(*) FROM {entries} GROUP BY status")
    }

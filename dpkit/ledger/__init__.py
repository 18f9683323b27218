"""The durable privacy ledger: a database that records every spend of a budget.

One ledger belongs to one dataset and holds its budget, its composition rule, its privacy
unit, and one entry per release (time, mechanism, parameters as JSON, accounting event, exact
cost, session and dataset ids, release id, randomness mode, privacy unit, an optional label,
and the released result once it is stored). It lives in one of two databases, with the same
contract:

* **SQLite** (the embedded default): a file (``"ledger.sqlite"``, ``"sqlite:///PATH"``) shared
  by any number of processes, threads and ledger handles on one host, or ``":memory:"``;
* **PostgreSQL**: ``"postgresql://USER@HOST/DATABASE?ledger=NAME"``, one budget shared by the
  processes of many hosts (``pip install 'dpkit[postgresql]'``; ``docs/scaling.md``).

The contract (one implementation, :class:`Ledger`, over both databases):

* every spend is one write transaction that holds the ledger's write lock (SQLite:
  ``BEGIN IMMEDIATE``; PostgreSQL: a row lock), recomputes the totals from the entries, checks
  them against the cached totals and the budget, and inserts the entry, so the budget is never
  exceeded however many writers share the ledger; :meth:`Ledger.spend_all` is all or nothing;
* a committed spend survives a crash of the process (and of the machine: SQLite
  ``synchronous=FULL``, PostgreSQL ``synchronous_commit=on``); a crash before the commit leaves
  nothing;
* the totals are exact rationals stored as text (``"1/10"``), kept next to the entries in the
  same transaction, so :meth:`Ledger.verify` can check that they agree;
* a spend is never given back once private data may have been read: :meth:`Ledger.abort` is
  only for a reservation released before any data were read, and the released result is kept
  with its entry (:meth:`Ledger.record_result`), so nothing released is lost.

A ledger moves to another location (SQLite → PostgreSQL, when a budget outgrows one host) with
:func:`move_ledger` (``dpkit budget move``): every entry and total is copied, the old ledger is
sealed (it refuses every spend with :class:`LedgerMoved`, naming the new one) and the new one
takes over, so at most one of them ever takes spends, even if the move is killed.

A budget bounds the loss of **one privacy unit** (:mod:`dpkit.units`): ``record``, or ``id``
with its column (not its bounds, which are per query). The ledger's unit is fixed when it is
created with one (``unit=``), or else by its first spend, in that spend's transaction; a spend
under another unit is refused with :class:`UnitMismatch` before anything is written. A ledger
made by an older dpkit gets the unit of its spent entries when it is migrated; if they mix
units it takes no more spends (:class:`LedgerUnitsMixed`).

A location that cannot hold a ledger is refused with :class:`LedgerError` or
:class:`NotALedger` before anything is written; damaged metadata or totals raise
:class:`LedgerCorrupt`; the ledger of another dataset raises :class:`LedgerMismatch`.
"""

from __future__ import annotations

from dpkit.budget import Budget, Cost, exact_text
from dpkit.ledger._core import Composition, Ledger  # noqa: F401  (Composition: a type)
from dpkit.ledger._errors import (
    LedgerCorrupt,
    LedgerError,
    LedgerMismatch,
    LedgerMissing,
    LedgerMoved,
    LedgerUnitsMixed,
    NotALedger,
    UnitMismatch,
)
from dpkit.ledger._location import require_persistent
from dpkit.ledger._move import MoveResult, move_ledger
from dpkit.ledger._schema import FORMAT, SCHEMA_VERSION
from dpkit.ledger._values import LedgerEntry, MoveState, SpendRequest

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "Budget",
    "Cost",
    "Ledger",
    "LedgerCorrupt",
    "LedgerEntry",
    "LedgerError",
    "LedgerMismatch",
    "LedgerMissing",
    "LedgerMoved",
    "LedgerUnitsMixed",
    "MoveResult",
    "MoveState",
    "NotALedger",
    "SpendRequest",
    "UnitMismatch",
    "exact_text",
    "move_ledger",
    "require_persistent",
]

"""What a ledger backend provides: connections, transactions, locking and typed errors.

:class:`~dpkit.ledger.Ledger` holds all of the ledger's logic (entries, totals, admission,
results, verification) and runs it over a :class:`Store`. A store knows how to reach its
database, how to make a transaction that no other writer can interleave with, how to create
the tables without racing another creator, and how to turn its driver's errors into
:class:`~dpkit.ledger.LedgerError`\\ s. Two are built in: SQLite (one host) and PostgreSQL
(many hosts).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from typing import Any, Protocol

from dpkit.ledger._schema import Tx

__all__ = ["Handle", "Store"]

_KEYS = itertools.count()


class Handle:
    """One thread's connection to a ledger, closed when its thread ends, but only in the
    process that opened it: a forked child never closes the copy it inherited (SQLite: its
    fork handler does; PostgreSQL: closing it would end the parent's session).

    While open, the connection is listed in ``registry``, a module-level dict of the backend,
    as ``(pid, connection, tag)``: for a fork handler, and so that the connection outlives
    its handle when both become garbage together (in a reference cycle the collector runs
    finalisers in any order, and psycopg warns about a connection finalised while open).
    """

    __slots__ = ("closed", "connection", "key", "pid", "registry")

    def __init__(self, connection: Any, registry: dict[int, tuple[int, Any, str]], tag: str = ""):
        self.connection = connection
        self.pid = os.getpid()
        self.closed = False
        self.key = next(_KEYS)
        self.registry = registry
        registry[self.key] = (self.pid, connection, tag)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if os.getpid() == self.pid:
            self.registry.pop(self.key, None)
            self.connection.close()  # SQLite defers the fd close while the process holds locks

    def __del__(self) -> None:
        with suppress(Exception):  # at interpreter exit the os module may be gone
            self.close()


class Store(Protocol):
    """A ledger backend (see the module docstring)."""

    #: The ledger as messages show it (a path, or a URL without its password).
    path: str

    def open(self, *, creating: bool) -> bool:
        """Check the location without writing; True if it holds a ledger's tables, False if
        a ledger can be created there (``creating``) or there is none. Raises
        :class:`~dpkit.ledger.NotALedger` for something else."""
        ...

    def guarded(self, doing: str, *, not_a_ledger: bool = False) -> AbstractContextManager[None]:
        """Turn the driver's errors into typed ledger errors (``not_a_ledger``: a missing
        table means the location is not a ledger, rather than a damaged one)."""
        ...

    def read(self) -> AbstractContextManager[Tx]:
        """A connection for reads (each statement sees the latest committed state)."""
        ...

    def snapshot(self) -> AbstractContextManager[Tx]:
        """A read-only transaction: every statement sees one consistent snapshot."""
        ...

    def write(self) -> AbstractContextManager[Tx]:
        """A transaction that holds the ledger's write lock from its first statement to its
        commit: writers are serialised, and each sees every earlier writer's commit. Rolled
        back if the block raises."""
        ...

    def create(self, meta: dict[str, str]) -> None:
        """Create the tables and insert ``meta``, atomically; a concurrent creator's values
        win if it committed first."""
        ...

    def claim(self) -> AbstractContextManager[Tx]:
        """A write transaction on a location that may hold no ledger yet (a move's
        destination): it creates the tables if they are missing and holds, to its commit, both
        the lock that creators take and the write lock that spenders take (once the ledger's
        ``format`` row exists). Rolled back if the block raises."""
        ...

    def batches(self, tx: Tx, template: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``template`` (a query inside ``tx``), ``size`` at a time, fetched as
        they are consumed (each fetch is a statement of ``tx``): a big table is never held
        in memory whole."""
        ...

    def insert_entries(self, tx: Tx, rows: list[tuple[Any, ...]]) -> None:
        """Insert entries given with every column of :func:`entry_column_names` (``seq``
        included), as fast as the database allows (a move copies millions)."""
        ...

    def allow_idle(self, tx: Tx, seconds: float) -> None:
        """Let ``tx`` sit idle between its statements for up to ``seconds`` (for this
        transaction only) before the server may end its session (PostgreSQL's
        ``idle_in_transaction_session_timeout``; SQLite has no such limit)."""
        ...

    def entries_copied(self, tx: Tx) -> None:
        """After entries were inserted with their own ``seq``: new entries number after them."""
        ...

    def columns(self, tx: Tx) -> set[str]:
        """The columns the entries table has (for migrations)."""
        ...

    def integrity_problem(self, tx: Tx) -> str | None:
        """The database's own integrity check, if it has a cheap one: None if it passes."""
        ...

    def close(self) -> None:
        """Close this thread's connection."""
        ...

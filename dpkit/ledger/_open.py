"""The store for a ledger location: SQLite for a path, PostgreSQL for a ``postgresql://`` URL.

Apart from the stores' common contract (:mod:`dpkit.ledger._store`), so that the contract does
not import the stores that implement it.
"""

from __future__ import annotations

import os

from dpkit.ledger._location import parse_location
from dpkit.ledger._store import Store

__all__ = ["open_store"]


def open_store(location: str | os.PathLike[str], *, timeout: float) -> Store:
    """The backend for ``location``; PostgreSQL's driver is imported only here, when needed."""
    kind, target = parse_location(location)
    if kind == "postgresql":
        from dpkit.ledger._postgresql import PostgresStore

        return PostgresStore(target, timeout=timeout)
    from dpkit.ledger._sqlite import SqliteStore

    return SqliteStore(target, timeout=timeout)

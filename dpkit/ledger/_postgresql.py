"""The PostgreSQL backend: one budget shared by the processes of many hosts.

``Ledger("postgresql://USER@HOST:PORT/DATABASE?ledger=NAME")`` keeps the ledger ``NAME`` (a
PostgreSQL schema holding the two ledger tables) in ``DATABASE``; one database can hold the
ledgers of many datasets, one schema each (``ledger`` defaults to ``dpkit``). Every other part of
the URL is libpq's (``sslmode``, ``connect_timeout``, several hosts, ...), and a password is best
kept out of it, in ``~/.pgpass`` or ``PGPASSWORD``. TLS is libpq's too
(``sslmode=verify-full&sslrootcert=CA.crt``); a certificate that does not verify is a
:class:`LedgerError` naming the ledger. The driver is ``psycopg`` 3
(``pip install 'dpkit[postgresql]'``), imported only when a PostgreSQL ledger is opened. The
ledger shows its location without the password (``Ledger.path``), and no message quotes it.

**Locking: a row lock, not SERIALIZABLE.** Every write transaction (a spend, an abort, a stored
result, a migration) runs at READ COMMITTED and starts with ``SELECT ... FOR UPDATE`` on the
ledger's ``format`` row of ``dpkit_meta``, which every ledger has; a transaction that cannot
lock it (the row is gone) is refused as damaged. So writers queue on that row, one at a time,
like SQLite's ``BEGIN IMMEDIATE``. At READ COMMITTED each later statement takes a new snapshot,
and every earlier writer committed before it released the lock, so the totals recomputed from
the entries, the budget check, the insert and the new totals all see the latest state: the
check and the commit are one critical section, and the ledger cannot be overspent by any number
of hosts, processes or threads (PostgreSQL documentation, "Explicit Locking" §13.3.2 on row-level
locks and "Read Committed Isolation Level" §13.2.1 on per-statement snapshots). SERIALIZABLE
(serializable snapshot isolation) would also be correct, but it detects the conflict only at
commit and aborts all but one of the concurrent spenders with a serialization failure, to be
retried: under contention most transactions would be retried, possibly many times, and the
retry loop itself would have to be written so that it never records a spend twice. The row lock
needs no retry and makes every writer wait its turn; readers (``spent``, ``entries``, ``verify``)
take no lock and never block a spend (MVCC). ``timeout`` is the longest wait for the lock
(``lock_timeout``); past it, a typed :class:`LedgerError` says so and nothing was written.

**Crash safety.** A spend is one transaction: a client killed or disconnected before its commit
leaves nothing (the server rolls back), and a commit is durable once acknowledged: every write
transaction sets ``synchronous_commit = on`` (a server or database default of ``off`` could lose
acknowledged spends in a server crash), and ``idle_in_transaction_session_timeout`` (60 s)
ends the session of a client that stops responding while it holds the lock (a move's copy
raises it for its own transaction by its lock wait: :mod:`dpkit.ledger._move`). These settings are local to
the transaction and no statement is prepared, so they hold through a connection pooler in
transaction mode too. If the connection is lost
while committing, whether the commit happened is unknown: the error says so, and nothing is
released (the release happens only after the spend returned). A connection found broken at
the start of the next transaction is replaced.

**Threads and fork.** Each thread uses its own connection (closed when the thread ends). A
forked child never uses or closes a connection it inherited (closing it would end the parent's
server session on the socket they share; psycopg's finaliser leaves it alone in a child too):
it opens its own on first use.

Creating a ledger is one transaction under a transaction-level advisory lock keyed on the
ledger's name, so processes creating the same ledger at once end up with one ledger (the first
creator's metadata), as with SQLite. Needs PostgreSQL 10 or later (identity columns).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from dpkit.errors import InvalidParameter, MissingDependency
from dpkit.ledger._errors import VERIFY_HINT, LedgerCorrupt, LedgerError, NotALedger
from dpkit.ledger._location import ALLOWED
from dpkit.ledger._schema import Dialect, Tx, entry_column_names, table_statements
from dpkit.ledger._store import Handle

__all__ = ["DEFAULT_NAME", "PostgresStore", "parse_url"]

#: The ledger (schema) used when the URL has no ``ledger=NAME``.
DEFAULT_NAME = "dpkit"
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_NAME_ALLOWED = (
    "a URL whose ledger=NAME is 1 to 63 lowercase letters, digits and underscores, starting "
    "with a letter or underscore, and not pg_*"
)
#: URL query parameters whose values are secret: never shown.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
#: Seconds: how long a session may sit idle inside a write transaction before the server ends
#: it (and its locks). Not public; the tests lower it (tests/unit/ledger/test_move.py).
_IDLE_IN_TRANSACTION = 60.0


def _ms(seconds: float) -> int:
    """A server timeout in whole milliseconds, at least 1 (0 would mean: wait for ever)."""
    return max(1, round(seconds * 1000))


def _query_key(item: str) -> str:
    return urllib.parse.unquote(item.partition("=")[0])


def parse_url(url: str) -> tuple[str, str, str, tuple[str, ...]]:
    """``(libpq URL without ledger=, ledger name, URL as shown, secrets)`` of a ledger URL.

    The shown URL has no password (neither ``user:password@`` nor ``password=``) and ends with
    the effective ``ledger=NAME``; the secrets are the password's raw and decoded forms, which
    messages never contain.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:  # where a password would be is unknown: show none of it
        shown = f"{url.partition('://')[0]}://..."
        raise InvalidParameter("ledger", shown, f"{ALLOWED} ({error})") from None
    items = [item for item in parts.query.split("&") if item]
    names = [
        urllib.parse.unquote(item.partition("=")[2])
        for item in items
        if _query_key(item) == "ledger"
    ]
    kept = [item for item in items if _query_key(item) != "ledger"]
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    secrets = {password, urllib.parse.unquote(password)} if colon else set()
    for item in kept:
        if _query_key(item) in _SECRET_PARAMETERS:
            value = item.partition("=")[2]
            secrets |= {value, urllib.parse.unquote(value)}
    name = names[-1] if names else DEFAULT_NAME
    shown_query = [item for item in kept if _query_key(item) not in _SECRET_PARAMETERS]
    shown = urllib.parse.urlunsplit(
        (
            parts.scheme,
            f"{user}{at}{hosts}" if at else hosts,
            parts.path,
            "&".join([*shown_query, f"ledger={name}"]),
            "",
        )
    )
    if len(names) > 1 or not _NAME.fullmatch(name) or name.startswith("pg_"):
        raise InvalidParameter("ledger", shown, _NAME_ALLOWED)
    conninfo = urllib.parse.urlunsplit(parts._replace(query="&".join(kept)))
    return conninfo, name, shown, tuple(sorted(s for s in secrets if s))


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise MissingDependency("psycopg", "postgresql", needed_by="a PostgreSQL ledger") from None
    return psycopg


#: This process's open connections (see :class:`~dpkit.ledger._store.Handle`); a forked child
#: keeps its inherited entries for ever, so it never finalises (or closes) them.
_OPEN: dict[int, tuple[int, Any, str]] = {}


def _lost(error: Any) -> bool:
    """Whether an error means the connection is gone (no SQLSTATE: the socket; class 08: a
    connection exception; 57P: the server shut the session down)."""
    state = getattr(error, "sqlstate", None)
    return state is None or str(state).startswith(("08", "57P"))


class PostgresStore:
    """A ledger in a schema of a PostgreSQL database (see the module docstring)."""

    def __init__(self, url: str, *, timeout: float):
        self._pg = _driver()
        conninfo, self.name, self.path, self._secrets = parse_url(url)
        try:
            given = self._pg.conninfo.conninfo_to_dict(conninfo)
        except self._pg.Error as error:
            raise InvalidParameter(
                "ledger", self.path, f"{ALLOWED} ({self._text(error)})"
            ) from None
        self._conninfo = conninfo
        self._defaults = {
            key: value
            for key, value in (("connect_timeout", "10"), ("application_name", "dpkit"))
            if key not in given
        }
        self.timeout = timeout
        self._local = threading.local()
        schema = f'"{self.name}"'
        self._dialect = Dialect(
            placeholder="%s",
            key_column="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            returning=True,
            meta=f"{schema}.dpkit_meta",
            entries=f"{schema}.dpkit_entries",
        )
        digest = hashlib.blake2b(f"dpkit-ledger:{self.name}".encode(), digest_size=8).digest()
        self._create_lock = int.from_bytes(digest, "big", signed=True)

    # -- connections -------------------------------------------------------------------------
    def _connection(self, *, fresh: bool = False) -> Any:
        handle: Handle | None = getattr(self._local, "handle", None)
        if (
            fresh
            or handle is None
            or handle.closed
            or handle.pid != os.getpid()
            or handle.connection.closed
            or handle.connection.broken
            # left inside a transaction (an interrupted rollback): start clean
            or handle.connection.info.transaction_status != self._pg.pq.TransactionStatus.IDLE
        ):
            if handle is not None:
                with suppress(Exception):  # a broken connection may fail to close
                    handle.close()
            handle = Handle(self._connect(), _OPEN)
            self._local.handle = handle
        return handle.connection

    def _connect(self) -> Any:
        try:
            # no prepared statements: they would not survive a pooler in transaction mode
            return self._pg.connect(
                self._conninfo, autocommit=True, prepare_threshold=None, **self._defaults
            )
        except self._pg.Error as error:
            raise self._connect_error(error) from None

    def close(self) -> None:
        handle: Handle | None = getattr(self._local, "handle", None)
        if handle is not None:
            handle.close()
            self._local.handle = None

    # -- transactions ------------------------------------------------------------------------
    def _begin(self, begin: str) -> Any:
        connection = self._connection()
        try:
            connection.execute(begin)
        except self._pg.OperationalError:
            if not connection.broken:
                raise
            # the server ended this idle connection (a restart, a timeout, the network):
            # only BEGIN was sent, so a new connection starts over
            connection = self._connection(fresh=True)
            connection.execute(begin)
        return connection

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        connection = self._begin(begin)
        try:
            yield Tx(connection, self._dialect)
        except BaseException:
            if not connection.broken:
                with suppress(Exception):
                    connection.execute("ROLLBACK")
            raise
        try:
            connection.execute("COMMIT")
        except self._pg.OperationalError as error:
            raise LedgerError(
                f"ledger {self.path} lost its connection while committing "
                f"({self._text(error)}): the change may or may not have been recorded; "
                "nothing was released. See `dpkit budget history --ledger "
                f"{self.path}`",
                path=self.path,
            ) from None

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self._transaction("BEGIN READ ONLY") as tx:
            yield tx

    @contextmanager
    def snapshot(self) -> Iterator[Tx]:
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as tx:
            yield tx

    def _begin_write(self, begin: str) -> str:
        """``begin`` followed by the write settings, for this transaction only (``SET LOCAL``,
        so that they hold even through a connection pooler that hands sessions around), in
        one round trip. The values are this object's own numbers, never user text."""
        return (
            f"{begin}; SET LOCAL lock_timeout = '{_ms(self.timeout)}ms';"
            " SET LOCAL synchronous_commit = on;"
            f" SET LOCAL idle_in_transaction_session_timeout = '{_ms(_IDLE_IN_TRANSACTION)}ms'"
        )

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self._transaction(self._begin_write("BEGIN ISOLATION LEVEL READ COMMITTED")) as tx:
            if tx.one("SELECT key FROM {meta} WHERE key = 'format' FOR UPDATE") is None:
                raise LedgerCorrupt(
                    f"ledger {self.path} has damaged metadata: its 'format' row, which every "
                    "write locks, is missing; " + VERIFY_HINT.format(path=self.path),
                    path=self.path,
                )
            yield tx

    # -- opening -----------------------------------------------------------------------------
    def open(self, *, creating: bool) -> bool:
        with self.read() as tx:
            row = tx.one(
                "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = 'dpkit_meta'),"
                " (SELECT count(*) FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = ?"
                " AND c.relkind IN ('r', 'p', 'v', 'm', 'f'))",
                (self.name, self.name),
            )
        assert row is not None
        if row[0]:
            return True
        if row[1]:
            raise NotALedger(
                f"{self.path} is not a dpkit ledger: schema {self.name!r} holds other tables "
                "and no dpkit metadata; it was not modified",
                path=self.path,
            )
        return False

    def create(self, meta: dict[str, str]) -> None:
        with self.claim() as tx:
            tx.run_many(
                "INSERT INTO {meta} (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                meta.items(),
            )

    @contextmanager
    def claim(self) -> Iterator[Tx]:
        with self._transaction(self._begin_write("BEGIN")) as tx:
            # concurrent creators of this ledger take turns; the later ones find it made
            tx.run("SELECT pg_advisory_xact_lock(?)", (self._create_lock,))
            exists = tx.one(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ?)", (self.name,)
            )
            if not (exists and exists[0]):
                # only when missing: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on
                # the database even when a DBA has made the schema already
                tx.run(f'CREATE SCHEMA "{self.name}"')
            for statement in table_statements(self._dialect):
                tx.run(statement)
            # spenders queue on the format row (see write); a new ledger has none yet
            tx.run("SELECT key FROM {meta} WHERE key = 'format' FOR UPDATE")
            yield tx

    def batches(self, tx: Tx, template: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """A server-side cursor (``DECLARE``/``FETCH``, closed with the transaction): the
        server keeps the result, this process holds one batch at a time."""
        cursor = tx.connection.cursor(name=f"dpkit_{uuid.uuid4().hex}")
        try:
            cursor.execute(self._dialect.sql(template))
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            with suppress(Exception):  # a lost connection has no cursor left to close
                cursor.close()

    def insert_entries(self, tx: Tx, rows: list[tuple[Any, ...]]) -> None:
        """``COPY ... FROM STDIN``: one statement and one stream per batch (several times
        faster than ``executemany`` even in pipeline mode). COPY writes the given value of an
        identity column, as ``INSERT ... OVERRIDING SYSTEM VALUE`` does (PostgreSQL
        documentation, ``COPY``, "Notes"); it needs only the ``INSERT`` privilege."""
        columns = ", ".join(entry_column_names())
        with tx.connection.cursor().copy(
            f"COPY {self._dialect.entries} ({columns}) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row(row)

    def allow_idle(self, tx: Tx, seconds: float) -> None:
        """``SET LOCAL idle_in_transaction_session_timeout`` (whole milliseconds; at least 1,
        since 0 would mean never)."""
        tx.run(f"SET LOCAL idle_in_transaction_session_timeout = '{_ms(seconds)}ms'")

    def entries_copied(self, tx: Tx) -> None:
        """Move the identity sequence past the copied keys (``setval``; PostgreSQL
        documentation, "Sequence Manipulation Functions" §9.17)."""
        tx.run(
            "SELECT setval(pg_get_serial_sequence(?, 'seq'), COALESCE(max(seq), 0) + 1, false)"
            " FROM {entries}",
            (f'"{self.name}".dpkit_entries',),
        )

    def columns(self, tx: Tx) -> set[str]:
        rows = tx.rows(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = ? AND table_name = 'dpkit_entries'",
            (self.name,),
        )
        return {str(row[0]) for row in rows}

    def integrity_problem(self, tx: Tx) -> str | None:
        # PostgreSQL checks its own pages (data checksums, when the cluster has them); amcheck
        # needs privileges a ledger's role does not have. The constraints (keys, NOT NULL,
        # CHECK) are enforced on every write.
        return None

    # -- errors ------------------------------------------------------------------------------
    def _text(self, error: BaseException) -> str:
        """The driver's message on one line, with any secret of the URL removed."""
        text = " ".join(str(error).split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _connect_error(self, error: Any) -> LedgerError | InvalidParameter:
        text = self._text(error)
        lowered = text.lower()
        if (
            "password" in lowered
            or "authentication" in lowered
            or re.search(r'role "[^"]*" does not exist', lowered)
        ):
            return LedgerError(
                f"cannot log in to the PostgreSQL server of ledger {self.path} ({text}): check "
                "the user and the password (e.g. in ~/.pgpass or PGPASSWORD)",
                path=self.path,
            )
        if "certificate" in lowered or "ssl" in lowered or "tls" in lowered:
            return LedgerError(
                f"cannot open a secure connection to the PostgreSQL server of ledger "
                f"{self.path} ({text}): check sslmode, and that sslrootcert names the "
                "certificate authority that signed the server's certificate; nothing was "
                "written",
                path=self.path,
            )
        if "invalid" in lowered and ("option" in lowered or "value" in lowered):
            return InvalidParameter("ledger", self.path, f"{ALLOWED} ({text})")
        if re.search(r'database "[^"]*" does not exist', lowered):
            return LedgerError(
                f"cannot open ledger {self.path} ({text}): the database must exist (a dpkit "
                "ledger creates only its own schema and tables)",
                path=self.path,
            )
        return LedgerError(
            f"cannot reach the PostgreSQL server of ledger {self.path} ({text}); nothing was "
            "written",
            path=self.path,
        )

    @contextmanager
    def guarded(self, doing: str, *, not_a_ledger: bool = False) -> Iterator[None]:
        """Turn psycopg's errors into typed ledger errors that name the ledger (no password)."""
        try:
            yield
        except self._pg.Error as error:
            raise self._error(doing, error, not_a_ledger=not_a_ledger) from None

    def _error(self, doing: str, error: Any, *, not_a_ledger: bool) -> LedgerError:
        errors, text = self._pg.errors, self._text(error)
        if isinstance(error, errors.LockNotAvailable):
            return LedgerError(
                f"ledger {self.path} stayed locked by another session for {self.timeout:g} s "
                f"while {doing} ({text}); nothing was written, try again",
                path=self.path,
            )
        if isinstance(error, errors.InsufficientPrivilege):
            return LedgerError(
                f"the PostgreSQL role may not use ledger {self.path} while {doing} ({text}): "
                f"it needs USAGE on schema {self.name!r} and SELECT, INSERT and UPDATE on its "
                "tables (see docs/scaling.md)",
                path=self.path,
            )
        if isinstance(error, errors.ReadOnlySqlTransaction):
            return LedgerError(
                f"ledger {self.path} is read-only while {doing} ({text}): a standby server, or "
                "default_transaction_read_only; spend on the primary",
                path=self.path,
            )
        if isinstance(error, (errors.UndefinedTable, errors.UndefinedColumn)):
            if not_a_ledger:
                return NotALedger(
                    f"{self.path} is not a dpkit ledger ({text}); it was not modified",
                    path=self.path,
                )
            return LedgerCorrupt(
                f"ledger {self.path} is damaged ({text}) while {doing}; "
                + VERIFY_HINT.format(path=self.path),
                path=self.path,
            )
        if isinstance(error, self._pg.OperationalError) and _lost(error):
            return LedgerError(
                f"ledger {self.path} lost its connection to the server while {doing} ({text}); "
                "nothing was written, try again",
                path=self.path,
            )
        return LedgerError(f"ledger {self.path}: {doing} failed ({text})", path=self.path)

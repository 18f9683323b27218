"""The SQLite backend: a ledger in one file, shared by the processes and threads of one host.

It uses only the standard library's ``sqlite3``:

* ``journal_mode=WAL`` and ``synchronous=FULL``: a committed spend survives a crash or power
  loss, and readers never block the writer;
* every write is one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock at its
  start, so writers are serialised and each sees every earlier commit;
* the file is only ever opened by SQLite: on POSIX, closing *any* descriptor of a file drops
  every lock the process holds on it, so reading its header with ``open()`` (or closing a
  connection inherited across ``fork``) would silently unlock the process's other connections.

SQLite over a network file system is not safe (its locks are not reliable there): a budget that
several hosts share belongs in PostgreSQL (:mod:`dpkit.ledger._postgresql`).

A path that cannot hold a ledger (missing directory, a directory, a FIFO or device, a file that
is not a dpkit ledger) is refused with :class:`LedgerError` or :class:`NotALedger` before
anything is written.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from typing import Any

from dpkit.ledger._errors import VERIFY_HINT, LedgerCorrupt, LedgerError, NotALedger
from dpkit.ledger._schema import Dialect, Tx, entry_column_names, table_statements
from dpkit.ledger._store import Handle

__all__ = ["SqliteStore"]

_DIALECT = Dialect(placeholder="?", key_column="INTEGER PRIMARY KEY AUTOINCREMENT", returning=False)
_INSERT_ENTRY = (
    f"INSERT INTO {{entries}} ({', '.join(entry_column_names())})"
    f" VALUES ({', '.join('?' for _ in entry_column_names())})"
)

# Fork safety. SQLite keeps per-process lock bookkeeping per file (inode), and a forked child
# inherits a copy that says the parent's locks are held, so a fresh connection in the child would
# take no real (kernel) locks on the file at all, and another process could then checkpoint and
# delete the WAL under it. So, in the child, every inherited connection is closed *before* the
# child opens its first connection: the child holds no kernel lock yet, nothing is dropped, and
# SQLite's bookkeeping unwinds to zero. An inherited connection that was inside a transaction
# (another thread of the parent, at the fork) is never closed: its rollback would write to the
# parent's shared WAL index; it is kept alive in _INHERITED and its file is refused in the child.
_OPEN: dict[int, tuple[int, Any, str]] = {}  # key -> (pid, connection, real path)
_INHERITED: list[sqlite3.Connection] = []
_UNSAFE_IN_CHILD: set[str] = set()
_released_pid = os.getpid()

# Backing off while another creator switches the file to WAL (see SqliteStore._use_wal).
_FIRST_RETRY_DELAY = 0.001
_LAST_RETRY_DELAY = 0.05


def _release_inherited() -> None:
    """In a forked child: close (or keep, if mid-transaction) the parent's connections."""
    global _released_pid
    pid = os.getpid()
    if _released_pid == pid:
        return
    _released_pid = pid
    _UNSAFE_IN_CHILD.clear()
    for key, (owner, connection, real) in list(_OPEN.items()):
        if owner == pid:
            continue
        del _OPEN[key]
        if connection.in_transaction:
            _INHERITED.append(connection)
            _UNSAFE_IN_CHILD.add(real)
        else:
            with suppress(sqlite3.Error):
                connection.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_release_inherited)


_NO_LOCK = nullcontext()


class SqliteStore:
    """A ledger in an SQLite file (or ``":memory:"``). Each thread (and each process, after
    ``fork``) uses its own connection."""

    def __init__(self, path: str, *, timeout: float):
        self.path = path
        self._real = os.path.realpath(path) if path != ":memory:" else ""
        self.timeout = timeout
        self._local = threading.local()
        self._memory: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._lock_pid = os.getpid()
        if path == ":memory:":
            # one private in-memory ledger: a single connection, its transactions serialised
            # by a lock (shared-cache connections would fail with SQLITE_LOCKED, not wait)
            self._memory = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False
            )

    # -- opening -----------------------------------------------------------------------------
    def open(self, *, creating: bool) -> bool:
        """Check the path without opening it outside SQLite; True if it holds a database."""
        if self._memory is not None:
            return False
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as error:  # e.g. a path component that is a file, or no permission
            raise LedgerError(
                f"cannot use ledger {self.path}: {error.strerror or error}", path=self.path
            ) from None
        if info is None:
            if not creating:
                return False  # Ledger says: give a budget to create one
            directory = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(directory):
                raise LedgerError(
                    f"cannot create ledger {self.path}: directory {directory} does not exist",
                    path=self.path,
                )
            if not os.access(directory, os.W_OK | os.X_OK):
                raise LedgerError(
                    f"cannot create ledger {self.path}: directory {directory} is not writable",
                    path=self.path,
                )
            return False
        if stat.S_ISDIR(info.st_mode):
            raise NotALedger(f"{self.path} is a directory, not a dpkit ledger", path=self.path)
        if not stat.S_ISREG(info.st_mode):
            # never opened: opening a FIFO could block, and a device is not a ledger
            raise NotALedger(
                f"{self.path} is not a regular file (a FIFO, socket or device), "
                "not a dpkit ledger; it was not opened",
                path=self.path,
            )
        if not os.access(self.path, os.R_OK | os.W_OK):
            raise LedgerError(
                f"ledger {self.path} is not readable and writable by this user "
                "(a ledger must be writable to record spends)",
                path=self.path,
            )
        if info.st_size == 0:
            return False  # an empty file (or another process is creating it): create in it
        # SQLite reads the header itself: "file is not a database" means not a ledger
        with self.guarded("opening", not_a_ledger=True):
            count = self._connection().execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        return int(count) > 0  # an empty database: another process is creating it, or create

    def create(self, meta: dict[str, str]) -> None:
        with self.claim() as tx:
            # a concurrent creator may have won the race: INSERT OR IGNORE keeps its values
            tx.run_many("INSERT OR IGNORE INTO {meta} (key, value) VALUES (?, ?)", meta.items())

    @contextmanager
    def claim(self) -> Iterator[Tx]:
        connection = self._connection()
        if self._memory is None:
            self._use_wal(connection)
        with self.write() as tx:  # BEGIN IMMEDIATE: creators and spenders alike wait
            for statement in table_statements(_DIALECT):
                tx.run(statement)
            yield tx

    def _use_wal(self, connection: sqlite3.Connection) -> None:
        """Switch the file to WAL (a persistent setting: once per ledger), outside a transaction.

        The switch reads the file under a shared lock and then needs the exclusive one; when
        another creator is switching at the same moment, each holds what the other waits for,
        and SQLite answers SQLITE_BUSY at once, without its busy handler (waiting would be a
        deadlock). The statement has then released its locks, so it is retried here, backing
        off, until it succeeds or the ledger's timeout has passed.
        """
        deadline = time.monotonic() + self.timeout
        delay = _FIRST_RETRY_DELAY
        while True:
            try:
                if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    connection.execute("PRAGMA journal_mode=WAL").fetchone()
                return
            except sqlite3.OperationalError as error:
                # the message, not sqlite_errorcode: Python 3.10 has no error codes
                busy = "database is locked" in str(error)
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(2 * delay, _LAST_RETRY_DELAY)

    def batches(self, tx: Tx, template: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        cursor = tx.connection.execute(_DIALECT.sql(template))
        while rows := cursor.fetchmany(size):
            yield rows

    def insert_entries(self, tx: Tx, rows: list[tuple[Any, ...]]) -> None:
        """``executemany`` of one prepared ``INSERT``, inside the caller's transaction."""
        tx.run_many(_INSERT_ENTRY, rows)

    def allow_idle(self, tx: Tx, seconds: float) -> None:
        """Nothing to do: SQLite never ends a transaction that waits."""

    def entries_copied(self, tx: Tx) -> None:
        """Nothing to do: an AUTOINCREMENT key given explicitly moves ``sqlite_sequence``."""

    # -- connections -------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._memory is not None:
            return self._memory
        handle: Handle | None = getattr(self._local, "handle", None)
        if handle is None or handle.closed or handle.pid != os.getpid():
            _release_inherited()  # before this process's first connection (see above)
            if self._real in _UNSAFE_IN_CHILD:
                raise LedgerError(
                    f"ledger {self.path} cannot be used in this process: it was forked while "
                    "another thread was inside a ledger transaction (use the 'spawn' or "
                    "'forkserver' multiprocessing start method)",
                    path=self.path,
                )
            connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            handle = Handle(connection, _OPEN, self._real)
            self._local.handle = handle
            connection.execute("PRAGMA synchronous=FULL")
        connection = handle.connection
        assert isinstance(connection, sqlite3.Connection)
        return connection

    def _guard(self) -> Any:
        """The lock that serialises the in-memory ledger's single connection (none for files)."""
        if self._memory is None:
            return _NO_LOCK
        if self._lock_pid != os.getpid():  # held by a thread that did not survive a fork
            self._lock, self._lock_pid = threading.RLock(), os.getpid()
        return self._lock

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self._guard():
            yield Tx(self._connection(), _DIALECT)

    def snapshot(self) -> Any:
        return self._transaction("BEGIN")  # one read transaction: a consistent snapshot in WAL

    def write(self) -> Any:
        return self._transaction("BEGIN IMMEDIATE")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        with self._guard():
            connection = self._connection()
            connection.execute(begin)
            try:
                yield Tx(connection, _DIALECT)
            except BaseException:
                if connection.in_transaction:  # SQLite may have rolled back already
                    connection.execute("ROLLBACK")
                raise
            else:
                connection.execute("COMMIT")

    def columns(self, tx: Tx) -> set[str]:
        return {str(row[1]) for row in tx.rows("PRAGMA table_info({entries})")}

    def integrity_problem(self, tx: Tx) -> str | None:
        row = tx.one("PRAGMA integrity_check")
        problem = str(row[0]) if row else "no answer"
        return None if problem == "ok" else f"failed SQLite's integrity check: {problem}"

    def close(self) -> None:
        handle: Handle | None = getattr(self._local, "handle", None)
        if handle is not None:
            handle.close()
            self._local.handle = None

    # -- errors ------------------------------------------------------------------------------
    @contextmanager
    def guarded(self, doing: str, *, not_a_ledger: bool = False) -> Iterator[None]:
        """Turn SQLite's errors into typed ledger errors that name the path."""
        try:
            yield
        except sqlite3.Error as error:
            if not_a_ledger and isinstance(error, sqlite3.DatabaseError):
                raise self._unreadable(error) from None
            raise self._error(doing, error) from None

    def _unreadable(self, error: sqlite3.Error) -> LedgerError:
        """Not a database (or not a ledger database), versus a damaged or locked ledger."""
        text = str(error)
        if "not a database" in text or "no such table" in text:
            return NotALedger(
                f"{self.path} is not a dpkit ledger ({text}); it was not modified",
                path=self.path,
            )
        return self._error("opening", error)

    def _error(self, doing: str, error: sqlite3.Error) -> LedgerError:
        text = str(error)
        if "database is locked" in text or "database is busy" in text:
            return LedgerError(
                f"ledger {self.path} stayed locked by another process for {self.timeout:g} s "
                f"while {doing} ({text}); nothing was written, try again",
                path=self.path,
            )
        if "readonly" in text or "read-only" in text:
            return LedgerError(
                f"ledger {self.path} is read-only ({text}) while {doing}: the file and its "
                "directory (for the -wal and -shm files) must be writable",
                path=self.path,
            )
        if "unable to open" in text:
            return LedgerError(
                f"cannot open ledger {self.path} ({text}): its directory must exist and be "
                "writable",
                path=self.path,
            )
        if "not a database" in text or "malformed" in text or "no such" in text:
            return LedgerCorrupt(
                f"ledger {self.path} is damaged ({text}) while {doing}; "
                + VERIFY_HINT.format(path=self.path),
                path=self.path,
            )
        return LedgerError(f"ledger {self.path}: {doing} failed ({text})", path=self.path)

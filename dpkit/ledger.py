"""The durable privacy ledger: an SQLite database that records every spend of a budget.

One ledger file belongs to one dataset and holds its budget, its composition rule, and one
entry per release (time, mechanism, parameters as JSON, accounting event, exact cost, session
and dataset ids, release id, randomness mode). It uses only the standard library's ``sqlite3``:

* ``journal_mode=WAL`` and ``synchronous=FULL``: a committed spend survives a crash or power
  loss, and readers never block the writer;
* every spend is one ``BEGIN IMMEDIATE`` transaction that reads the running totals, checks the
  budget and inserts the entry, so any number of processes and threads can share a ledger
  without ever overspending (SQLite serialises the write transactions);
* the totals are exact rationals stored as text (``"1/10"``), kept next to the entries in the
  same transaction, so :meth:`Ledger.verify` can check that they agree.

A file that is not a dpkit ledger, or the ledger of another dataset, is refused with
:class:`NotALedger` or :class:`LedgerMismatch` before anything is written to it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import attrs

from dpkit.errors import BudgetExceeded, DPKitError, InvalidParameter

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "Budget",
    "Cost",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerMismatch",
    "NotALedger",
]

FORMAT = "dpkit-ledger"
SCHEMA_VERSION = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"

Composition = Literal["basic", "zcdp"]


class LedgerError(DPKitError):
    """The ledger cannot be used (corrupt, from a newer dpkit, or inconsistent)."""

    code = "ledger_error"

    def __init__(self, message: str, *, path: str = ""):
        self.path = path
        super().__init__(message)


class NotALedger(LedgerError):
    """The file exists but is not a dpkit ledger; it was left untouched."""

    code = "not_a_ledger"


class LedgerMismatch(LedgerError):
    """The ledger belongs to another dataset, or was created with another budget or rule."""

    code = "ledger_mismatch"

    def __init__(self, field: str, found: Any, given: Any, *, path: str = ""):
        self.field = field
        self.found = found
        self.given = given
        super().__init__(
            f"ledger {path} has {field}={found!s} but {field}={given!s} was given; "
            "a ledger belongs to one dataset and one budget (use another ledger file)",
            path=path,
        )


def _fraction_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _decimal(value: Fraction, digits: int = 12) -> str:
    return f"{float(value):.{digits}g}"


@attrs.frozen
class Budget:
    """A privacy budget (ε, δ) in exact rationals; ``rho`` is the zCDP budget when composing by zCDP."""

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None = None

    def __str__(self) -> str:
        text = f"ε={_decimal(self.epsilon)}, δ={_decimal(self.delta)}"
        if self.rho is None:
            return text
        return f"ρ={_decimal(self.rho)} (zCDP budget for {text})"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "epsilon_exact": _fraction_text(self.epsilon),
            "delta_exact": _fraction_text(self.delta),
        }
        if self.rho is not None:
            out["rho"] = float(self.rho)
            out["rho_exact"] = _fraction_text(self.rho)
        return out


@attrs.frozen
class Cost:
    """The exact cost of one release: (ε, δ) and, under zCDP composition, ρ."""

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None = None

    def __str__(self) -> str:
        if self.rho is not None:
            return f"ρ={_decimal(self.rho)}"
        return f"ε={_decimal(self.epsilon)}, δ={_decimal(self.delta)}"


@attrs.frozen
class LedgerEntry:
    """One recorded release. ``status`` is ``"spent"``, or ``"aborted"`` if the mechanism raised
    (nothing was released, and the cost was given back)."""

    seq: int
    release_id: str
    time: str
    session_id: str
    dataset_id: str
    mechanism: str
    parameters: dict[str, Any]
    event: dict[str, Any]
    cost: Cost
    randomness: str
    status: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "release_id": self.release_id,
            "time": self.time,
            "session_id": self.session_id,
            "dataset_id": self.dataset_id,
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "event": self.event,
            "epsilon": float(self.cost.epsilon),
            "delta": float(self.cost.delta),
            "epsilon_exact": _fraction_text(self.cost.epsilon),
            "delta_exact": _fraction_text(self.cost.delta),
            **({"rho": float(self.cost.rho)} if self.cost.rho is not None else {}),
            "randomness": self.randomness,
            "status": self.status,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS dpkit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dpkit_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL UNIQUE,
    time TEXT NOT NULL,
    session_id TEXT NOT NULL,
    dataset_id TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    parameters TEXT NOT NULL,
    event TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    delta TEXT NOT NULL,
    rho TEXT,
    randomness TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('spent', 'aborted'))
);
"""


def _location(ledger: str | os.PathLike[str]) -> str:
    text = os.fspath(ledger)
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "sqlite":
            raise InvalidParameter(
                "ledger",
                text,
                "a file path or a sqlite:///PATH URL (other stores are not built in)",
            )
        text = rest[1:] if rest.startswith("/") and not rest.startswith("//") else rest
        text = text or ""
    if not text:
        raise InvalidParameter("ledger", ledger, "a file path or a sqlite:///PATH URL")
    return text


class Ledger:
    """A budget ledger in an SQLite file, shared safely by processes and threads.

    Open an existing ledger with ``Ledger(path)``; create one by also giving ``budget`` (and
    ``dataset``/``composition``). Given values that disagree with an existing ledger raise
    :class:`LedgerMismatch`; a file that is not a ledger raises :class:`NotALedger`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        dataset: str | None = None,
        budget: Budget | None = None,
        composition: Composition | None = None,
        timeout: float = 60.0,
    ):
        self.path = _location(path)
        self.timeout = timeout
        self._local = threading.local()
        self._memory: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        if self.path == ":memory:":
            # one private in-memory ledger: a single connection, its transactions serialised
            # by a lock (shared-cache connections would fail with SQLITE_LOCKED, not wait)
            self._memory = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False
            )
            exists = False
        else:
            self._check_file()
            exists = Path(self.path).exists() and Path(self.path).stat().st_size > 0
            if exists and self._is_empty_database():
                exists = False  # another process is creating it (or an empty database): create
        if not exists and budget is None:
            raise LedgerError(
                f"no ledger at {self.path}: give a budget to create one", path=self.path
            )
        if not exists:
            self._create(dataset or "default", budget, composition or "basic")  # type: ignore[arg-type]
        meta = self._read_meta()
        self.dataset: str = meta["dataset_id"]
        self.composition: Composition = meta["composition"]  # type: ignore[assignment]
        self.budget = Budget(
            Fraction(meta["budget_epsilon"]),
            Fraction(meta["budget_delta"]),
            Fraction(meta["budget_rho"]) if meta.get("budget_rho") else None,
        )
        if dataset is not None and dataset != self.dataset:
            raise LedgerMismatch("dataset", self.dataset, dataset, path=self.path)
        if composition is not None and composition != self.composition:
            raise LedgerMismatch("composition", self.composition, composition, path=self.path)
        if budget is not None and (budget.epsilon, budget.delta) != (
            self.budget.epsilon,
            self.budget.delta,
        ):
            raise LedgerMismatch("budget", self.budget, budget, path=self.path)

    # -- opening -----------------------------------------------------------------------------
    def _check_file(self) -> None:
        path = Path(self.path)
        if path.is_dir():
            raise NotALedger(f"{self.path} is a directory, not a dpkit ledger", path=self.path)
        if path.exists() and path.stat().st_size > 0:
            with open(path, "rb") as handle:
                header = handle.read(len(_SQLITE_MAGIC))
            if header != _SQLITE_MAGIC:
                raise NotALedger(
                    f"{self.path} is not a dpkit ledger (not an SQLite database); it was not modified",
                    path=self.path,
                )

    def _is_empty_database(self) -> bool:
        try:
            count = self._connection().execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError:
            return False  # _read_meta reports it as not a ledger
        return int(count) == 0

    def _connection(self) -> sqlite3.Connection:
        if self._memory is not None:
            return self._memory
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or getattr(self._local, "pid", None) != os.getpid():
            connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            connection.execute("PRAGMA synchronous=FULL")
            self._local.connection = connection
            self._local.pid = os.getpid()
        return connection

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock if self._memory is not None else _NO_LOCK:
            connection = self._connection()
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            else:
                connection.execute("COMMIT")

    def _create(self, dataset: str, budget: Budget, composition: Composition) -> None:
        if composition not in ("basic", "zcdp"):
            raise InvalidParameter("composition", composition, "'basic' or 'zcdp'")
        connection = self._connection()
        if (
            self._memory is None
            and connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        ):
            connection.execute("PRAGMA journal_mode=WAL")
        meta = {
            "format": FORMAT,
            "schema_version": str(SCHEMA_VERSION),
            "dataset_id": dataset,
            "composition": composition,
            "budget_epsilon": _fraction_text(budget.epsilon),
            "budget_delta": _fraction_text(budget.delta),
            "budget_rho": _fraction_text(budget.rho) if budget.rho is not None else "",
            "spent_epsilon": "0/1",
            "spent_delta": "0/1",
            "spent_rho": "0/1",
            "created": _now(),
        }
        with self._transaction() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            # a concurrent creator may have won the race: INSERT OR IGNORE keeps its values
            db.executemany(
                "INSERT OR IGNORE INTO dpkit_meta (key, value) VALUES (?, ?)", meta.items()
            )

    def _read_meta(self) -> dict[str, str]:
        try:
            rows = self._connection().execute("SELECT key, value FROM dpkit_meta").fetchall()
        except sqlite3.DatabaseError as error:
            raise NotALedger(
                f"{self.path} is not a dpkit ledger ({error}); it was not modified", path=self.path
            ) from None
        meta = dict(rows)
        if meta.get("format") != FORMAT:
            raise NotALedger(
                f"{self.path} is not a dpkit ledger (no dpkit metadata); it was not modified",
                path=self.path,
            )
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"{self.path} has ledger schema version {version}; this dpkit reads up to "
                f"{SCHEMA_VERSION} (upgrade dpkit)",
                path=self.path,
            )
        return meta

    # -- spending ----------------------------------------------------------------------------
    def _totals(self, db: sqlite3.Connection) -> Budget:
        rows = dict(
            db.execute(
                "SELECT key, value FROM dpkit_meta WHERE key IN "
                "('spent_epsilon', 'spent_delta', 'spent_rho')"
            ).fetchall()
        )
        return Budget(
            Fraction(rows["spent_epsilon"]),
            Fraction(rows["spent_delta"]),
            Fraction(rows["spent_rho"]) if self.composition == "zcdp" else None,
        )

    def _remaining(self, spent: Budget) -> Budget:
        b = self.budget
        rho = None if b.rho is None else b.rho - (spent.rho or 0)
        return Budget(b.epsilon - spent.epsilon, b.delta - spent.delta, rho)

    def _fits(self, spent: Budget, cost: Cost) -> bool:
        if self.composition == "zcdp":
            assert self.budget.rho is not None and cost.rho is not None
            return (spent.rho or 0) + cost.rho <= self.budget.rho
        return (
            spent.epsilon + cost.epsilon <= self.budget.epsilon
            and spent.delta + cost.delta <= self.budget.delta
        )

    def spend(
        self,
        cost: Cost,
        *,
        mechanism: str,
        parameters: dict[str, Any],
        event: dict[str, Any],
        session_id: str,
        randomness: str,
    ) -> LedgerEntry:
        """Check and record one spend atomically; :class:`BudgetExceeded` if it does not fit."""
        if self.composition == "zcdp" and cost.rho is None:
            raise InvalidParameter("cost", cost, "a cost with ρ (this ledger composes by zCDP)")
        release_id = uuid.uuid4().hex
        now = _now()
        params_json = json.dumps(parameters, sort_keys=True, default=str)
        event_json = json.dumps(event, sort_keys=True, default=str)
        with self._transaction() as db:
            spent = self._totals(db)
            if not self._fits(spent, cost):
                raise BudgetExceeded(cost, self._remaining(spent))
            cursor = db.execute(
                "INSERT INTO dpkit_entries (release_id, time, session_id, dataset_id, mechanism,"
                " parameters, event, epsilon, delta, rho, randomness, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'spent')",
                (
                    release_id,
                    now,
                    session_id,
                    self.dataset,
                    mechanism,
                    params_json,
                    event_json,
                    _fraction_text(cost.epsilon),
                    _fraction_text(cost.delta),
                    None if cost.rho is None else _fraction_text(cost.rho),
                    randomness,
                ),
            )
            self._write_totals(db, spent, cost, sign=1)
        return LedgerEntry(
            int(cursor.lastrowid or 0),
            release_id,
            now,
            session_id,
            self.dataset,
            mechanism,
            json.loads(params_json),
            json.loads(event_json),
            cost,
            randomness,
            "spent",
        )

    def _write_totals(
        self, db: sqlite3.Connection, spent: Budget, cost: Cost, *, sign: int
    ) -> None:
        new = {
            "spent_epsilon": spent.epsilon + sign * cost.epsilon,
            "spent_delta": spent.delta + sign * cost.delta,
            "spent_rho": (spent.rho or 0) + sign * (cost.rho or 0),
        }
        db.executemany(
            "UPDATE dpkit_meta SET value = ? WHERE key = ?",
            [(_fraction_text(Fraction(v)), k) for k, v in new.items()],
        )

    def abort(self, release_id: str) -> None:
        """Give back the cost of a release whose mechanism raised (nothing was released)."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT epsilon, delta, rho FROM dpkit_entries WHERE release_id = ? AND status = 'spent'",
                (release_id,),
            ).fetchone()
            if row is None:
                return
            cost = Cost(Fraction(row[0]), Fraction(row[1]), Fraction(row[2]) if row[2] else None)
            db.execute(
                "UPDATE dpkit_entries SET status = 'aborted' WHERE release_id = ?", (release_id,)
            )
            self._write_totals(db, self._totals(db), cost, sign=-1)

    # -- reading -----------------------------------------------------------------------------
    def spent(self) -> Budget:
        """What has been spent so far (entries with status ``spent``)."""
        with self._lock:
            return self._totals(self._connection())

    def remaining(self) -> Budget:
        """What is left of the budget."""
        return self._remaining(self.spent())

    def entries(self) -> list[LedgerEntry]:
        """Every entry, in commit order."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT seq, release_id, time, session_id, dataset_id, mechanism, parameters,"
                    " event, epsilon, delta, rho, randomness, status FROM dpkit_entries ORDER BY seq"
                )
                .fetchall()
            )
        return [
            LedgerEntry(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                json.loads(r[6]),
                json.loads(r[7]),
                Cost(Fraction(r[8]), Fraction(r[9]), Fraction(r[10]) if r[10] else None),
                r[11],
                r[12],
            )
            for r in rows
        ]

    def verify(self) -> Budget:
        """Check that the stored totals equal the sum of the spent entries and fit the budget.

        Returns the totals; raises :class:`LedgerError` if the ledger is inconsistent.
        """
        problem = self._connection().execute("PRAGMA integrity_check").fetchone()[0]
        if problem != "ok":
            raise LedgerError(
                f"{self.path} failed SQLite's integrity check: {problem}", path=self.path
            )
        with self._lock:  # one read transaction: a consistent snapshot under WAL
            connection = self._connection()
            connection.execute("BEGIN")
            try:
                totals = self.spent()
                spent = [e for e in self.entries() if e.status == "spent"]
            finally:
                connection.execute("COMMIT")
        summed = Budget(
            sum((e.cost.epsilon for e in spent), Fraction(0)),
            sum((e.cost.delta for e in spent), Fraction(0)),
            sum((e.cost.rho or Fraction(0) for e in spent), Fraction(0))
            if self.composition == "zcdp"
            else None,
        )
        if (summed.epsilon, summed.delta, summed.rho or 0) != (
            totals.epsilon,
            totals.delta,
            totals.rho or 0,
        ):
            raise LedgerError(
                f"{self.path} is inconsistent: totals {totals} but entries sum to {summed}",
                path=self.path,
            )
        over = (
            (totals.rho or 0) > (self.budget.rho or 0)
            if self.composition == "zcdp"
            else totals.epsilon > self.budget.epsilon or totals.delta > self.budget.delta
        )
        if over:
            raise LedgerError(f"{self.path} is overspent: {totals} > {self.budget}", path=self.path)
        return totals

    def close(self) -> None:
        """Close this thread's connection."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


_NO_LOCK = nullcontext()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")

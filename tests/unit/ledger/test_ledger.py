"""The ledger on its own: typed errors for bad paths and damaged ledgers, totals checked before
every spend, schema migration, labels and stored results, and the ``dpkit budget`` command.

The contract tests take ``ledger_store`` (tests/conftest.py) and run on both backends: an SQLite
file and a ledger on a real PostgreSQL server started for the test session. The tests of file
paths and of SQLite's own files stay SQLite-only."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.ledgers import at_once, open_at_once

from dpkit.cli import main
from dpkit.errors import BudgetExceeded, DPKitError, InvalidParameter
from dpkit.ledger import (
    SCHEMA_VERSION,
    Budget,
    Cost,
    Ledger,
    LedgerCorrupt,
    LedgerEntry,
    LedgerError,
    NotALedger,
    require_persistent,
)
from dpkit.ledger._sqlite import SqliteStore
from dpkit.units import UnitIdentity

#: tests/conftest.py's LedgerStore (a conftest cannot be imported under --import-mode=importlib)
LedgerStore = Any

TENTH = Cost(Fraction(1, 10), Fraction(0))
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _new(path: Path | str, epsilon: int = 1) -> Ledger:
    return Ledger(path, dataset="d", budget=Budget(Fraction(epsilon), Fraction(0)))


def _spend(ledger: Ledger, cost: Cost = TENTH, label: str | None = None) -> LedgerEntry:
    return ledger.spend(
        cost,
        mechanism="m",
        parameters={"p": 1},
        event={"kind": "pure"},
        session_id="s",
        randomness="fast",
        label=label,
    )


def _sql(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        connection.execute(statement)
    connection.close()


# -- persistent locations -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "location",
    [
        ":memory:",
        "",
        "sqlite:///:memory:",
        "sqlite://",
        "file::memory:",
        "file::memory:?cache=shared",
        "file:ledger?mode=memory",
        "sqlite:///file:x?mode=memory&cache=shared",
    ],
)
def test_require_persistent_refuses_memory(location: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        require_persistent(location)
    assert info.value.parameter == "ledger" and info.value.value == location
    assert "persistent" in str(info.value) and "full budget every run" in str(info.value)


@pytest.mark.parametrize("location", ["l.db", "sqlite:///l.db", "memory.db", "file:l.db?mode=rw"])
def test_require_persistent_accepts_files(location: str, tmp_path: Path) -> None:
    require_persistent(location)
    require_persistent(tmp_path / location)


@pytest.mark.parametrize(
    "location", ["postgresql://u@h/db?ledger=x", "postgres://h/db", "POSTGRESQL://h/memory"]
)
def test_require_persistent_accepts_databases(location: str) -> None:
    require_persistent(location)


# -- paths that cannot hold a ledger ------------------------------------------------------------
def _open_in_thread(path: Path) -> BaseException | None:
    """Open with a budget in a thread: a regression that opens a FIFO would block, not hang us."""
    caught: list[BaseException] = []

    def attempt() -> None:
        try:
            _new(path)
        except BaseException as error:
            caught.append(error)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive(), f"opening {path} blocked"
    return caught[0] if caught else None


def test_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "l.db"
    error = _open_in_thread(path)
    assert isinstance(error, LedgerError)
    assert str(path) in str(error) and "does not exist" in str(error)
    assert not path.parent.exists()


def test_path_through_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    error = _open_in_thread(tmp_path / "file" / "l.db")
    assert isinstance(error, LedgerError) and "file/l.db" in str(error)


def test_directory(tmp_path: Path) -> None:
    error = _open_in_thread(tmp_path)
    assert isinstance(error, NotALedger) and "is a directory" in str(error)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    error = _open_in_thread(fifo)
    assert isinstance(error, NotALedger) and "not a regular file" in str(error)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_device() -> None:
    error = _open_in_thread(Path("/dev/null"))
    assert isinstance(error, NotALedger) and "/dev/null" in str(error)


def test_text_file_and_foreign_database_are_untouched(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_bytes(b"not a database at all, but longer than an SQLite header" * 4)
    other = tmp_path / "other.db"
    _sql(other, "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)")
    for path in (text, other):
        before = path.read_bytes()
        error = _open_in_thread(path)
        assert isinstance(error, NotALedger) and str(path) in str(error)
        assert path.read_bytes() == before
        assert not Path(f"{path}-wal").exists()


def test_unwritable_directory_and_file(tmp_path: Path) -> None:
    if ROOT:  # root ignores file modes; nothing can be created in /proc
        error = _open_in_thread(Path("/proc/self/l.db"))
        assert isinstance(error, LedgerError) and "not writable" in str(error)
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        error = _open_in_thread(locked / "l.db")
        assert isinstance(error, LedgerError) and "not writable" in str(error)
    finally:
        locked.chmod(0o700)
    path = tmp_path / "l.db"
    _new(path).close()
    path.chmod(0o400)
    with pytest.raises(LedgerError, match="not readable and writable"):
        Ledger(path)


def test_missing_ledger_is_not_created(ledger_store: LedgerStore) -> None:
    with pytest.raises(LedgerError, match="give a budget to create one"):
        Ledger(ledger_store.location)
    if ledger_store.path is not None:
        assert not ledger_store.path.exists()
    else:
        assert ledger_store.query(
            f"SELECT count(*) FROM pg_namespace WHERE nspname = '{ledger_store.name}'"
        ) == [(0,)]


def test_a_locked_ledger_is_a_typed_error(ledger_store: LedgerStore) -> None:
    _new(ledger_store.location).close()
    with ledger_store.write_locked():  # another writer that does not let go
        ledger = Ledger(ledger_store.location, timeout=0.05)
        with pytest.raises(LedgerError, match="locked") as info:
            _spend(ledger)
        assert type(info.value) is LedgerError and "nothing was written" in str(info.value)
    assert ledger.entries() == []
    assert _spend(ledger).status == "spent"  # and works once the lock is gone


# -- damaged metadata ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "statement,key",
    [
        ("DELETE FROM dpkit_meta WHERE key = 'budget_epsilon'", "budget_epsilon"),
        ("DELETE FROM dpkit_meta WHERE key = 'dataset_id'", "dataset_id"),
        ("DELETE FROM dpkit_meta WHERE key = 'spent_delta'", "spent_delta"),
        ("DELETE FROM dpkit_meta WHERE key = 'schema_version'", "schema_version"),
        ("UPDATE dpkit_meta SET value = 'abc' WHERE key = 'budget_epsilon'", "budget_epsilon"),
        ("UPDATE dpkit_meta SET value = '1/0' WHERE key = 'spent_epsilon'", "spent_epsilon"),
        ("UPDATE dpkit_meta SET value = '-1/1' WHERE key = 'budget_epsilon'", "budget_epsilon"),
        ("UPDATE dpkit_meta SET value = '3/2' WHERE key = 'budget_delta'", "budget_delta"),
        ("UPDATE dpkit_meta SET value = 'rdp' WHERE key = 'composition'", "composition"),
        ("UPDATE dpkit_meta SET value = 'zcdp' WHERE key = 'composition'", "budget_rho"),
        ("UPDATE dpkit_meta SET value = 'two' WHERE key = 'schema_version'", "schema_version"),
    ],
)
def test_damaged_metadata(ledger_store: LedgerStore, statement: str, key: str) -> None:
    _new(ledger_store.location).close()
    ledger_store.sql(statement)
    with pytest.raises(LedgerCorrupt) as info:
        Ledger(ledger_store.location)
    message = str(info.value)
    assert _shown(ledger_store) in message and key in message
    assert "dpkit budget verify" in message


def _shown(store: LedgerStore) -> str:
    """The ledger as messages name it (a PostgreSQL URL without its password)."""
    if store.path is not None:
        return str(store.path)
    assert store.server is not None
    return store.location.replace(f":{store.server.password}@", "@")


def test_newer_schema_is_refused(ledger_store: LedgerStore) -> None:
    _new(ledger_store.location).close()
    ledger_store.sql("UPDATE dpkit_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError, match="schema version 99"):
        Ledger(ledger_store.location)


def test_missing_entries_table(ledger_store: LedgerStore) -> None:
    _new(ledger_store.location).close()
    ledger_store.sql("DROP TABLE dpkit_entries")
    with pytest.raises(LedgerCorrupt, match="dpkit_entries"):
        _spend(Ledger(ledger_store.location))


def test_format_row_removed_after_opening_is_refused(ledger_store: LedgerStore) -> None:
    # PostgreSQL writers lock this row: without it, no write may go ahead unserialised
    ledger = _new(ledger_store.location)
    ledger_store.sql("DELETE FROM dpkit_meta WHERE key = 'format'")
    if ledger_store.kind == "postgresql":
        with pytest.raises(LedgerCorrupt, match="'format' row"):
            _spend(ledger)
        assert ledger_store.query("SELECT count(*) FROM dpkit_entries") == [(0,)]
    with pytest.raises(NotALedger):
        Ledger(ledger_store.location)


# -- totals checked before spending -------------------------------------------------------------
def test_lowered_cached_totals_are_refused_before_spending(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location)
    for _ in range(10):
        _spend(ledger)
    with pytest.raises(BudgetExceeded):
        _spend(ledger)
    # someone rewrites the cached total to get the budget back: the entries still say 1
    ledger_store.sql("UPDATE dpkit_meta SET value = '0/1' WHERE key = 'spent_epsilon'")
    with pytest.raises(LedgerCorrupt) as info:
        _spend(ledger)
    assert "inconsistent" in str(info.value) and "nothing was spent" in str(info.value)
    assert "dpkit budget verify" in str(info.value)
    assert len(ledger.entries()) == 10
    with pytest.raises(LedgerCorrupt, match="disagree"):
        ledger.verify()


def test_edited_entry_cost_is_refused(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location)
    _spend(ledger)
    ledger_store.sql("UPDATE dpkit_entries SET epsilon = '1/100'")
    with pytest.raises(LedgerCorrupt):
        _spend(ledger)
    ledger_store.sql("UPDATE dpkit_entries SET epsilon = 'x'")
    with pytest.raises(LedgerCorrupt, match="damaged cost"):
        _spend(ledger)
    # still opens: only spending is refused
    assert len(Ledger(ledger_store.location).spent().as_dict()) > 0


def test_verify_reports_an_overspent_ledger(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location)
    _spend(ledger)
    # consistent totals, but more than the budget
    ledger_store.sql(
        "UPDATE dpkit_entries SET epsilon = '2/1'",
        "UPDATE dpkit_meta SET value = '2/1' WHERE key = 'spent_epsilon'",
    )
    with pytest.raises(LedgerCorrupt, match="exceed the budget"):
        ledger.verify()
    with pytest.raises(BudgetExceeded):
        _spend(ledger)


def test_damaged_entry_json(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location)
    _spend(ledger)
    ledger_store.sql("UPDATE dpkit_entries SET parameters = '{not json'")
    with pytest.raises(LedgerCorrupt, match="parameters JSON in entry 1"):
        ledger.entries()
    with pytest.raises(LedgerCorrupt):
        ledger.verify()


def test_totals_check_is_exact_over_thousands_of_entries(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location, epsilon=1000)
    costs = [Fraction(1, 10), Fraction(1, 3), Fraction(1, 7)]
    rows = [(f"r{i}", _fraction(costs[i % 3])) for i in range(3000)]
    total = sum((costs[i % 3] for i in range(3000)), Fraction(0))
    ledger_store.executemany(
        "INSERT INTO dpkit_entries (release_id, time, session_id, dataset_id, mechanism,"
        " parameters, event, epsilon, delta, rho, randomness, status)"
        " VALUES (?, 't', 's', 'd', 'm', '{}', '{}', ?, '0/1', NULL, 'fast', 'spent')",
        rows,
    )
    ledger_store.executemany(
        "UPDATE dpkit_meta SET value = ? WHERE key = 'spent_epsilon'", [(_fraction(total),)]
    )
    _spend(ledger)
    assert ledger.verify().epsilon == total + Fraction(1, 10)


def _fraction(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def test_negative_costs_are_refused(ledger_store: LedgerStore) -> None:
    ledger = _new(ledger_store.location)
    with pytest.raises(InvalidParameter, match="epsilon >= 0"):
        _spend(ledger, Cost(Fraction(-1, 10), Fraction(0)))
    assert ledger.entries() == []


# -- schema version 2: migration, labels, results ------------------------------------------------
_V1_SCHEMA = """
CREATE TABLE dpkit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE dpkit_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, release_id TEXT NOT NULL UNIQUE, time TEXT NOT NULL,
    session_id TEXT NOT NULL, dataset_id TEXT NOT NULL, mechanism TEXT NOT NULL,
    parameters TEXT NOT NULL, event TEXT NOT NULL, epsilon TEXT NOT NULL, delta TEXT NOT NULL,
    rho TEXT, randomness TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('spent', 'aborted'))
);
INSERT INTO dpkit_meta VALUES ('format', 'dpkit-ledger'), ('schema_version', '1'),
    ('dataset_id', 'old'), ('composition', 'basic'), ('budget_epsilon', '1/1'),
    ('budget_delta', '0/1'), ('budget_rho', ''), ('spent_epsilon', '1/10'),
    ('spent_delta', '0/1'), ('spent_rho', '0/1'), ('created', 't');
INSERT INTO dpkit_entries (release_id, time, session_id, dataset_id, mechanism, parameters,
    event, epsilon, delta, rho, randomness, status)
    VALUES ('old1', 't', 's', 'old', 'rr', '{}', '{}', '1/10', '0/1', NULL, 'fast', 'spent');
"""


def _v1(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(_V1_SCHEMA)
    connection.close()


def _columns(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    names = [row[1] for row in connection.execute("PRAGMA table_info(dpkit_entries)")]
    connection.close()
    return names


def test_version_1_ledgers_are_migrated_by_concurrent_openers(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _v1(path)
    assert "label" not in _columns(path)
    assert open_at_once(path, openers=8) == []
    columns = _columns(path)
    assert columns.count("label") == 1 and columns.count("result") == 1
    assert columns.count("rule") == 1 and columns.count("mu2") == 1
    ledger = Ledger(path)
    (old,) = ledger.entries()
    assert (old.release_id, old.label, old.result) == ("old1", None, None)
    ledger.record_result("old1", [1, 2])
    assert ledger.entries()[0].result == [1, 2]
    assert _spend(ledger, label="new").label == "new"
    assert ledger.verify().epsilon == Fraction(1, 5)
    connection = sqlite3.connect(path)
    version = connection.execute(
        "SELECT value FROM dpkit_meta WHERE key = 'schema_version'"
    ).fetchone()[0]
    connection.close()
    assert version == str(SCHEMA_VERSION) == "5"
    assert ledger.unit == UnitIdentity("record")  # its one entry protected a record


def _claim_at_once(path: str, claimers: int) -> list[BaseException]:
    """Open a new file from ``claimers`` threads, then claim it (switching it to WAL and
    creating the tables) from all of them released together; what they raised."""

    def claim(barrier: threading.Barrier) -> None:
        store = SqliteStore(path, timeout=30)
        store.open(creating=True)
        barrier.wait()
        try:
            with store.claim():
                pass
        finally:
            store.close()

    return at_once(claim, claimers)


def test_creators_switching_a_new_file_to_wal_at_once_all_succeed(tmp_path: Path) -> None:
    """Two connections switching one new file to WAL at the same moment can each hold a lock
    the other needs, and SQLite then answers one of them SQLITE_BUSY at once, without waiting
    out its timeout; the store retries. Measured without the retry: 23 of 3,600 switches
    failed (four runs of these 150 rounds: 9, 6, 1 and 7), so the 900 here all succeed by
    chance with probability about e^-5.7 without it."""
    for round_ in range(150):
        assert _claim_at_once(str(tmp_path / f"new-{round_}.db"), claimers=6) == []
    connection = sqlite3.connect(tmp_path / "new-0.db")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


def test_older_ledgers_are_migrated_in_either_backend(ledger_store: LedgerStore) -> None:
    # a version-2 ledger taken back to version 1 (no label, no result): the migration is the
    # same code over both backends (only how a backend lists its columns differs)
    ledger = _new(ledger_store.location)
    old = _spend(ledger)
    ledger.close()
    ledger_store.sql(
        "ALTER TABLE dpkit_entries DROP COLUMN label",
        "ALTER TABLE dpkit_entries DROP COLUMN result",
        "UPDATE dpkit_meta SET value = '1' WHERE key = 'schema_version'",
    )
    assert open_at_once(ledger_store.location, openers=8) == []
    assert ledger_store.query("SELECT value FROM dpkit_meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    migrated = Ledger(ledger_store.location)
    (entry,) = migrated.entries()
    assert (entry.release_id, entry.label, entry.result) == (old.release_id, None, None)
    migrated.record_result(old.release_id, [1, 2])
    assert _spend(migrated, label="new").label == "new"
    assert migrated.verify().epsilon == Fraction(1, 5)


def test_labels_and_results(ledger_store: LedgerStore) -> None:
    _labels_and_results(_new(ledger_store.location))


def test_labels_and_results_in_memory() -> None:
    _labels_and_results(_new(":memory:"))


def _labels_and_results(ledger: Ledger) -> None:
    first = _spend(ledger, label="mean age")
    second = _spend(ledger)
    assert (first.label, second.label) == ("mean age", None)
    ledger.record_result(first.release_id, {"value": 41.5, "missing": float("nan")})
    ledger.record_result(second.release_id, np.array([1, 2]))  # default=str
    ledger.record_result(second.release_id, [3, 4])  # a second call overwrites
    stored = {e.release_id: e for e in ledger.entries()}
    assert stored[first.release_id].label == "mean age"
    assert stored[first.release_id].result["value"] == 41.5
    assert np.isnan(stored[first.release_id].result["missing"])
    assert stored[second.release_id].result == [3, 4]
    record = stored[first.release_id].as_dict()
    assert record["label"] == "mean age" and record["result"]["value"] == 41.5
    with pytest.raises(LedgerError, match="no release 'nope'"):
        ledger.record_result("nope", 1)
    with pytest.raises(LedgerError, match="has a stored result"):
        ledger.abort(first.release_id)  # released: the spend stands
    third = _spend(ledger)
    ledger.abort(third.release_id)  # a reservation released before data were read
    with pytest.raises(LedgerError, match="status 'aborted'"):
        ledger.record_result(third.release_id, 1)
    assert ledger.verify().epsilon == Fraction(1, 5)


def test_entries_keep_positional_construction() -> None:
    entry = LedgerEntry(1, "r", "t", "s", "d", "m", {}, {}, TENTH, "fast", "spent")
    assert entry.label is None and entry.result is None
    assert entry.as_dict()["label"] is None


def test_label_must_be_text(ledger_store: LedgerStore) -> None:
    with pytest.raises(InvalidParameter, match="label"):
        _spend(_new(ledger_store.location), label=3)  # type: ignore[arg-type]


# -- the command line ---------------------------------------------------------------------------
def _ledger_with_releases(path: Path | str) -> Ledger:
    ledger = _new(path)
    stored = _spend(ledger, label="mean age")
    ledger.record_result(stored.release_id, {"value": 41.5})
    _spend(ledger, label="lost")  # a crash between the spend and the store
    return ledger


def test_budget_show_releases(
    ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ledger_store.location
    _ledger_with_releases(path)
    assert main(["budget", "show", "--ledger", str(path), "--releases"]) == 0
    out = capsys.readouterr().out
    assert "mean age" in out and '{"value": 41.5}' in out
    assert "lost" in out and "result not stored (spent)" in out
    assert main(["budget", "show", "--ledger", str(path), "--releases", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    by_label = {e["label"]: e for e in shown["entries"]}
    assert by_label["mean age"]["result"] == {"value": 41.5}
    assert by_label["mean age"]["result_stored"] is True
    assert by_label["lost"]["result_stored"] is False
    assert by_label["lost"]["result_note"] == "result not stored (spent)"
    assert main(["budget", "history", "--ledger", str(path), "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["label"] for h in history] == ["mean age", "lost"]
    assert main(["budget", "history", "--ledger", str(path)]) == 0
    assert "result not stored (spent)" in capsys.readouterr().out


def test_release_tables_summarise_results_and_json_has_them_whole(
    ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """A grouped result document is a line of values in the table, the document in --json."""
    path = ledger_store.location
    ledger = _new(path)
    groups = [f"city-{i}" for i in range(40)]
    result = {
        "query_id": "minutes",
        "statistic": "sum",
        "keys": [[g] for g in groups],
        "estimate": [1000.0 + i for i in range(40)],
        "confidence_interval": {
            "level": 0.95,
            "lower": [990.0 + i for i in range(40)],
            "upper": [1010.0 + i for i in range(40)],
            "method": "exact quantiles of the privacy noise (data taken as given)",
        },
    }
    ledger.record_result(_spend(ledger, label="minutes").release_id, result)
    single = {
        "estimate": 41.5,
        "confidence_interval": {"level": 0.95, "lower": 40.0, "upper": 43.0},
    }
    ledger.record_result(_spend(ledger, label="age").release_id, single)
    for action in (["show", "--releases"], ["history"]):
        assert main(["budget", *action, "--ledger", str(path)]) == 0
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if "minutes" in line)
        assert "city-0 1000, city-1 1001" in row and "…" in row and "city-39" not in row
        assert len(row) < 300  # not a thousand characters of JSON
        assert "41.5 ±1.5 (95%)" in out and "every stored result in full: --json" in out
    assert main(["budget", "show", "--releases", "--json", "--ledger", str(path)]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    assert entries[0]["result"] == result


def test_budget_show_on_a_missing_ledger_says_nothing_was_spent_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.sqlite"
    assert main(["budget", "show", "--ledger", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "no ledger at" in err and "nothing has been spent there yet" in err
    assert "give a budget" not in err and not missing.exists()


def test_budget_show_counts_releases_in_the_database(
    ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """``budget show`` counts spent and aborted entries with SQL (a ledger of 10⁶ entries
    is not loaded to be counted): the counts are those of the entries themselves."""
    ledger = _ledger_with_releases(ledger_store.location)
    ledger.abort(_spend(ledger, label="aborted").release_id)
    entries = ledger.entries()
    assert main(["budget", "show", "--ledger", str(ledger_store.location), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "entries" not in shown
    assert shown["releases"] == sum(e.status == "spent" for e in entries) == 2
    assert shown["aborted"] == sum(e.status == "aborted" for e in entries) == 1


def test_budget_verify(ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]) -> None:
    path = ledger_store.location
    _ledger_with_releases(path)
    assert main(["budget", "verify", "--ledger", str(path)]) == 0
    assert "is consistent" in capsys.readouterr().out
    url = f"sqlite:///{path}" if ledger_store.kind == "sqlite" else path
    assert main(["budget", "verify", "--ledger", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["consistent"] is True and report["results_not_stored"] == 1
    ledger_store.sql("UPDATE dpkit_meta SET value = '0/1' WHERE key = 'spent_epsilon'")
    assert main(["budget", "verify", "--ledger", str(path)]) == 2
    err = capsys.readouterr().err
    assert "inconsistent" in err and "disagree" in err and _shown(ledger_store) in err
    assert main(["budget", "verify", "--ledger", str(path), "--json"]) == 2
    error: dict[str, Any] = json.loads(capsys.readouterr().err)["error"]
    assert error["code"] == "ledger_corrupt"


@pytest.mark.parametrize("kind", ["memory", "directory", "missing", "text"])
def test_budget_commands_refuse_bad_ledgers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    text = tmp_path / "x.txt"
    text.write_text("hello")
    location = {
        "memory": ":memory:",
        "directory": str(tmp_path),
        "missing": str(tmp_path / "missing.db"),
        "text": str(text),
    }[kind]
    for action in ("show", "history", "verify"):
        assert main(["budget", action, "--ledger", location]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dpkit: error: ") and "Traceback" not in err
    assert text.read_text() == "hello"
    assert not (tmp_path / "missing.db").exists()


def test_every_ledger_error_is_a_dpkit_error() -> None:
    for kind in (LedgerError, NotALedger, LedgerCorrupt):
        assert issubclass(kind, DPKitError)


@pytest.mark.parametrize(
    ("composition", "currencies"),
    [("zcdp", {"rho": Fraction(50)}), ("gdp", {"mu2": Fraction(50)}), ("best", {"rho": 50})],
)
def test_a_new_ledger_refuses_a_rho_or_mu2_beyond_its_epsilon_delta(
    composition: str, currencies: dict[str, Any], tmp_path: Path
) -> None:
    """ρ = 50 for (1, 10⁻⁶) would admit a hundred σ = 1 Gaussians (ε ≈ 97 at 10⁻⁶) under a
    ledger that states (1, 10⁻⁶): refused, and nothing is created; one within ρ_B, μ_B² is
    kept as given."""
    path = tmp_path / "l.sqlite"
    full = {"rho": Fraction(1, 100), "mu2": Fraction(1, 100), **currencies}
    with pytest.raises(InvalidParameter, match="the most"):
        Ledger(
            path, budget=Budget(Fraction(1), Fraction(1, 10**6), **full), composition=composition
        )  # type: ignore[arg-type]
    assert not path.exists()  # refused before anything was opened
    small = Budget(Fraction(1), Fraction(1, 10**6), Fraction(1, 100), Fraction(1, 100))
    assert Ledger(path, budget=small, composition=composition).budget == small  # type: ignore[arg-type]

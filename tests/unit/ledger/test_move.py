"""Moving a ledger (``dpkit.ledger.move_ledger``, ``dpkit budget move``) between real databases:
SQLite files and ledgers on the PostgreSQL server the tests start (tests/conftest.py).

Every entry kind survives the move unchanged (number, amounts, label, stored, pending and
aborted results, rule), the totals are equal, the source refuses every write afterwards and the
destination carries on; a destination that is not empty, or holds another budget, is refused
before anything is written; each interrupted step of the protocol (made by stopping the move
between its commits) is finished by running the move again. SIGKILL of a real move process and a
spender racing it are in tests/integration/test_ledger_move_crash.py; red-team tests in
tests/security/budget/test_ledger_move.py.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import urllib.parse
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from support.postgres_server import PostgresServer

from dpkit.cli import main
from dpkit.errors import InvalidParameter
from dpkit.ledger import (
    Budget,
    Cost,
    Ledger,
    LedgerEntry,
    LedgerError,
    LedgerMismatch,
    LedgerMoved,
    SpendRequest,
    _move,
    move_ledger,
)

TENTH = Cost(Fraction(1, 10), Fraction(0))
GAUSS = Cost(Fraction(1, 2), Fraction(1, 10**6), Fraction(1, 8), Fraction(1, 4))
BUDGET = Budget(Fraction(3), Fraction(1, 10**5))

PAIRS = [
    ("sqlite", "postgresql"),
    ("postgresql", "sqlite"),
    ("sqlite", "sqlite"),
    ("postgresql", "postgresql"),
]


@pytest.fixture
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``place(kind)``: a new ledger location of that kind (a file, or a fresh PostgreSQL
    ledger on the tests' server)."""
    count = iter(range(100))

    def make(kind: str) -> str:
        if kind == "sqlite":
            return str(tmp_path / f"ledger-{next(count)}.sqlite")
        server: PostgresServer = request.getfixturevalue("postgres_server")
        return server.url()

    return make


def _spend(ledger: Ledger, cost: Cost = TENTH, **kwargs: Any) -> LedgerEntry:
    request = SpendRequest(
        cost,
        "m",
        {"p": 1},
        {"kind": "pure"},
        "s",
        "fast",
        kwargs.get("label"),
        final=kwargs.get("final", False),
    )
    return ledger.spend_all([request])[0]


def _filled(location: str) -> Ledger:
    """A ledger with an entry of every kind: plain, labelled, stored result, pending result
    (a session's spend), aborted, and one with δ, ρ and μ² amounts."""
    ledger = Ledger(location, dataset="survey", budget=BUDGET)
    _spend(ledger)
    _spend(ledger, label="counts")
    stored = _spend(ledger, label="histogram")
    ledger.record_result(stored.release_id, {"values": [1.5, float("nan"), None]})
    _spend(ledger, final=True, label="pending")
    aborted = _spend(ledger)
    ledger.abort(aborted.release_id)
    _spend(ledger, GAUSS, label="gauss")
    return ledger


def _cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kinds", PAIRS, ids=lambda k: "-to-".join(k))
def test_every_entry_and_total_moves(kinds: tuple[str, str], place: Any) -> None:
    source, destination = place(kinds[0]), place(kinds[1])
    before = _filled(source)
    entries, spent = before.entries(), before.verify()
    assert {e.status for e in entries} == {"spent", "aborted"}

    result = move_ledger(source, destination)

    assert (result.outcome, result.entries, result.spent) == ("moved", 6, spent)
    moved = Ledger(destination)
    assert moved.entries() == entries  # every field, the number (seq) included
    assert moved.verify() == spent == Budget(Fraction(9, 10), Fraction(1, 10**6))
    assert (moved.dataset, moved.composition, moved.budget) == ("survey", "basic", BUDGET)
    assert moved.move_state().state == "live"
    assert Ledger(source).move_state().moved_to == result.destination
    # the destination carries on after the copied entries; the source takes nothing any more
    assert _spend(moved).seq == entries[-1].seq + 1
    assert moved.remaining().epsilon == Fraction(3) - Fraction(1)
    with pytest.raises(LedgerMoved, match="was moved to") as refused:
        _spend(before)  # a handle opened before the move
    assert refused.value.moved_to == result.destination
    with pytest.raises(LedgerMoved):
        before.record_result(entries[0].release_id, 1)
    with pytest.raises(LedgerMoved):
        before.abort(entries[0].release_id)
    assert Ledger(source).entries() == entries  # the sealed ledger still reads, unchanged


@pytest.mark.parametrize("composition", ["zcdp", "gdp", "best"])
def test_other_compositions_move_with_their_currency(composition: str, place: Any) -> None:
    source, destination = place("sqlite"), place("postgresql")
    budget = Budget(Fraction(3), Fraction(1, 10**5), Fraction(1, 5), Fraction(1, 2))
    ledger = Ledger(source, dataset="d", budget=budget, composition=composition)  # type: ignore[arg-type]
    _spend(ledger, GAUSS)
    move_ledger(source, destination)
    moved = Ledger(destination)
    assert (moved.composition, moved.rule, moved.budget) == (composition, ledger.rule, budget)
    assert moved.entries() == ledger.entries()
    assert moved.spent() == ledger.spent()


def test_an_empty_destination_ledger_like_the_source_is_accepted(place: Any) -> None:
    # e.g. the PostgreSQL ledger was opened with the same budget before anyone moved to it
    source, destination = place("sqlite"), place("postgresql")
    _filled(source)
    Ledger(destination, dataset="survey", budget=BUDGET).close()
    assert move_ledger(source, destination).outcome == "moved"
    assert len(Ledger(destination).entries()) == 6


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_refusals_write_nothing(kind: str, place: Any) -> None:
    source = place("sqlite")
    _filled(source)
    busy = place(kind)
    _spend(Ledger(busy, dataset="survey", budget=BUDGET))
    other = place(kind)
    Ledger(other, dataset="survey", budget=Budget(Fraction(2), Fraction(1, 10**5))).close()
    elsewhere = place(kind)
    Ledger(elsewhere, dataset="another", budget=BUDGET).close()

    def unchanged() -> None:
        assert Ledger(source).move_state().state == "live"
        assert len(Ledger(busy).entries()) == 1
        for location in (other, elsewhere):
            assert Ledger(location).entries() == []
            assert Ledger(location).move_state().state == "live"

    with pytest.raises(LedgerError, match="not empty") as error:
        move_ledger(source, busy)
    assert type(error.value) is LedgerError
    unchanged()
    with pytest.raises(LedgerMismatch, match="budget ε") as mismatch:
        move_ledger(source, other)
    assert (mismatch.value.found, mismatch.value.given) == ("2", "3")
    unchanged()
    with pytest.raises(LedgerMismatch, match="dataset"):
        move_ledger(source, elsewhere)
    unchanged()
    with pytest.raises(InvalidParameter, match="other than the source"):
        move_ledger(source, source)
    link = Path(source).with_name("link.sqlite")
    link.symlink_to(source)
    with pytest.raises(InvalidParameter, match="other than the source"):
        move_ledger(source, f"sqlite:///{link}")
    copy = Path(source).with_name("copy.sqlite")
    with contextlib.closing(sqlite3.connect(source)) as db:  # all of it in the main file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy.write_bytes(Path(source).read_bytes())  # a copy of the file: the same ledger twice
    with pytest.raises(InvalidParameter, match="or a copy of it"):
        move_ledger(source, str(copy))
    with pytest.raises(InvalidParameter, match="persistent"):
        move_ledger(source, ":memory:")
    with pytest.raises(LedgerError, match="no ledger"):
        move_ledger(place("sqlite"), place(kind))  # nothing to move
    unchanged()


class Stop(Exception):
    """Raised in place of a step of the protocol: the process stops there."""


def _stop_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Make the move fail at ``step`` (``copy``: before the destination commits; ``seal``:
    after it, before the source's seal commits; ``activate``: after the seal)."""

    original = _move._copy

    def stop(*args: Any, **kwargs: Any) -> Any:
        if step == "seal":
            original(*args, **kwargs)  # the destination commits; the seal does not
        raise Stop(step)

    monkeypatch.setattr(_move, "_activate" if step == "activate" else "_copy", stop)


@pytest.mark.parametrize("step", ["copy", "seal", "activate"])
@pytest.mark.parametrize("kinds", PAIRS[:2], ids=lambda k: "-to-".join(k))
def test_an_interrupted_move_is_finished_by_running_it_again(
    step: str, kinds: tuple[str, str], place: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, destination = place(kinds[0]), place(kinds[1])
    entries = _filled(source).entries()
    with monkeypatch.context() as patch:
        _stop_at(patch, step)
        with pytest.raises(Stop):
            move_ledger(source, destination)
    src = Ledger(source)
    live = [src.move_state().state == "live"]
    if step != "copy":
        dst = Ledger(destination)
        assert dst.move_state().state == "awaiting"
        with pytest.raises(LedgerMoved, match="unfinished move") as refused:
            _spend(dst)
        assert refused.value.moved_from == _move._where(source, src.path)
        live.append(False)
    assert live.count(True) == (0 if step == "activate" else 1)  # never two
    if step == "seal":  # the source still takes spends: the next run copies them too
        _spend(src, label="after the interruption")
        entries = src.entries()
    result = move_ledger(source, destination)
    assert result.outcome == ("finished" if step == "activate" else "moved")
    assert Ledger(destination).entries() == entries
    assert move_ledger(source, destination).outcome == "already moved"


def test_the_command_moves_and_verify_reports_both_sides(
    place: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, destination = place("sqlite"), place("postgresql")
    spent = _filled(source).verify()
    code, out, err = _cli("budget", "move", source, destination, capsys=capsys)
    assert (code, err) == (0, "")
    shown = Ledger(destination).path
    assert f"moved {source} to {shown}: 6 entries" in out
    password = urllib.parse.urlsplit(destination).password
    assert password and password not in out
    _spend(Ledger(destination))  # the destination carries on
    code, out, err = _cli("budget", "verify", "--ledger", source, capsys=capsys)
    assert code == 2 and "no password supplied" in err  # the seal keeps no password: say how
    assert "PGPASSWORD or ~/.pgpass, or the destination's full URL with --destination" in err
    code, out, err = _cli(
        "budget", "verify", "--ledger", source, "--destination", destination, capsys=capsys
    )
    assert (code, err) == (0, "") and password not in out
    monkeypatch.setenv("PGPASSWORD", password)  # libpq's way, as the docs advise
    code, out, _ = _cli("budget", "verify", "--ledger", source, "--json", capsys=capsys)
    record = json.loads(out)
    assert (code, record["state"], record["moved_to"]) == (0, "sealed", shown)
    assert (record["ledger"], record["releases"], record["results_not_stored"]) == (source, 5, 4)
    assert record["spent"]["epsilon_exact"] == str(spent.epsilon)
    other = record["destination"]  # the destination, verified and compared from the source
    assert (other["ledger"], other["state"], other["releases"]) == (shown, "live", 6)
    assert other["spent"]["epsilon_exact"] == str(spent.epsilon + TENTH.epsilon)
    assert (other["holds_every_source_entry"], other["source_entries"]) == (True, 6)
    assert other["entries_since_move"] == 1
    code, out, _ = _cli("budget", "verify", "--ledger", source, capsys=capsys)
    assert code == 0
    assert out.splitlines() == [
        f"ledger {source} is consistent: spent ε=0.9, δ=1e-06 of {BUDGET} for the privacy "
        "unit record in 5 releases (4 without a stored result)",
        f"sealed: moved to {shown}; it takes no more spends",
        f"destination {shown} is consistent: spent ε=1, δ=1e-06 of {BUDGET} for the privacy "
        "unit record in 6 releases (5 without a stored result)",
        f"destination {shown} holds all 6 entries of source {source} as moved (equal "
        "amounts, so equal totals: ε=0.9, δ=1e-06); 1 made there since the move",
    ]
    code, out, _ = _cli("budget", "verify", "--ledger", destination, "--json", capsys=capsys)
    record = json.loads(out)
    assert (record["state"], record["moved_from"]) == ("live", str(Path(source).resolve()))
    assert record["destination"] is None
    code, out, _ = _cli("budget", "verify", "--ledger", destination, capsys=capsys)
    assert out.splitlines()[-1] == f"moved here from {Path(source).resolve()}"
    code, out, _ = _cli("budget", "move", source, destination, "--json", capsys=capsys)
    assert (code, json.loads(out)["outcome"]) == (0, "already moved")
    code, out, err = _cli("budget", "move", source, place("sqlite"), capsys=capsys)
    assert code == 2 and "already moved to" in err


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_a_copy_longer_than_the_idle_limit_keeps_the_sources_lock(
    kind: str, place: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL source's session may sit idle in the move's transaction for ``timeout`` +
    ``_move._IDLE`` only; here, through the non-public knobs, 0.5 + 0.5 = 1 s (and the idle
    limit of dpkit's other write transactions, the destination's included, is 1.5 s). The
    destination is made slow: 0.15 s per batch of 4 entries, 56 entries, a 2.1 s copy.
    Streamed, the copy fetches a batch from the source before each write, so neither session
    is idle for more than about 0.15 s, and the move succeeds. The control reads every batch
    first and then writes (the source idle for the whole copy, as before the fix): the server
    ends the source's session, the seal fails, and nothing is sealed — the limit really bites
    (margins: 1 s against 0.15 s, and 2.1 s against 1 s)."""
    from dpkit.ledger import _postgresql

    monkeypatch.setattr(_postgresql, "_IDLE_IN_TRANSACTION", 1.5)
    monkeypatch.setattr(_move, "_IDLE", 0.5)
    monkeypatch.setattr(_move, "_BATCH", 4)
    source = place("postgresql")
    ledger = Ledger(source, dataset="survey", budget=BUDGET)
    tiny = Cost(Fraction(1, 100), Fraction(0))
    ledger.spend_all([SpendRequest(tiny, "m", {"i": i}, {}, "s", "fast") for i in range(56)])
    store = type(_open(place(kind)))
    slow_insert = store.insert_entries

    def slow(self: Any, tx: Any, rows: Any) -> None:
        time.sleep(0.15)
        slow_insert(self, tx, rows)

    monkeypatch.setattr(store, "insert_entries", slow)
    read_first = _move._batches
    with monkeypatch.context() as patch:  # the control: every batch read before the writes
        patch.setattr(_move, "_batches", lambda *a: iter(list(read_first(*a))))
        with pytest.raises(LedgerError, match=r"lost its connection .* while moving the ledger"):
            move_ledger(source, place(kind), timeout=0.5)
    assert Ledger(source).move_state().state == "live"
    destination = place(kind)
    result = move_ledger(source, destination, timeout=0.5)
    assert (result.outcome, result.entries) == ("moved", 56)
    assert Ledger(destination).entries() == ledger.entries()


def _open(location: str) -> Any:
    from dpkit.ledger._open import open_store

    return open_store(location, timeout=1)


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_verify_of_a_moved_ledger_finds_a_damaged_destination(
    damage: str, place: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The destination is consistent on its own (its totals agree with its entries) but no
    longer holds the source's entries as moved: one relabelled, or one deleted with the
    totals lowered to match. ``verify`` of the source finds it (exit 2, naming the entry and
    the destination); each ledger's own verify passes."""
    source, destination = place("sqlite"), place("postgresql")
    entries = _filled(source).entries()
    move_ledger(source, destination)
    name = urllib.parse.parse_qs(urllib.parse.urlsplit(destination).query)["ledger"][0]
    seq = entries[1].seq
    import psycopg

    with psycopg.connect(destination.partition("?")[0], autocommit=True) as db:
        table = f'"{name}".dpkit_entries'
        if damage == "changed":
            db.execute(f"UPDATE {table} SET label = 'renamed' WHERE seq = %s", (seq,))
        else:
            db.execute(f"DELETE FROM {table} WHERE seq = %s", (seq,))
            left = Ledger(source).spent().epsilon - TENTH.epsilon
            db.execute(
                f"UPDATE \"{name}\".dpkit_meta SET value = %s WHERE key = 'spent_epsilon'",
                (f"{left.numerator}/{left.denominator}",),
            )
    Ledger(destination).verify()  # consistent on its own
    monkeypatch.setenv("PGPASSWORD", urllib.parse.urlsplit(destination).password or "")
    code, out, err = _cli("budget", "verify", "--ledger", source, capsys=capsys)
    shown = Ledger(destination).path
    assert code == 2 and out == ""
    assert f"ledger {shown} does not hold the entries [{seq}] of {source}" in err

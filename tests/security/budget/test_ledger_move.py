"""Attacks and accidents on a ledger move (``dpkit budget move``), on real databases.

The move must never leave two ledgers that take spends (a budget spent twice over), never
reset a budget, and never show a PostgreSQL password. Each attack below is checked with real
spends, not by reading a flag: moving a ledger twice (one after the other, and at once from
two threads) to get two live copies; moving a sealed ledger, or moving into one; spending a
sealed ledger through ``dpkit run`` and through a session opened before the move; "creating" a
fresh ledger at a destination that awaits its move; and the password of either URL in every
message, document and stored location.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.ledger import (
    Budget,
    Cost,
    Ledger,
    LedgerError,
    LedgerMoved,
    SpendRequest,
    move_ledger,
)

# Timed races (a mover stopped mid-copy and spenders waiting on its lock): they run in the
# serial run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = pytest.mark.serial

#: tests/conftest.py's PostgresServer (a conftest cannot be imported here)
PostgresServer = Any

STEP = Cost(Fraction(1, 100), Fraction(0))
AGES = [23, 35, 41, 52, 67, 29, 33]
TABLES = ("dpkit_meta", "dpkit_entries")


def _takes_spends(location: str) -> bool:
    """Whether a real spend succeeds there (a ledger not yet made takes none)."""
    try:
        ledger = Ledger(location)
    except LedgerError:
        return False
    try:
        ledger.spend(STEP, mechanism="m", parameters={}, event={}, session_id="s", randomness="-")
    except LedgerMoved:
        return False
    return True


def _source(path: Path, spends: int = 3) -> str:
    ledger = Ledger(path, dataset="redteam", budget=Budget(Fraction(1), Fraction(0)))
    for _ in range(spends):
        ledger.spend(STEP, mechanism="m", parameters={}, event={}, session_id="s", randomness="-")
    return str(path)


def test_moving_twice_gives_no_second_live_copy(
    rt: Any, tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: move the ledger to B, then move the (old) ledger again to C, or back onto
    itself, to get a second copy of the budget. Every second move is refused (exit 2, one
    line, nothing written) and only B takes spends; moving B on to D is the one way on."""
    a = _source(tmp_path / "a.sqlite")
    b, c, d = postgres_server.url(), postgres_server.url(), str(tmp_path / "d.sqlite")
    assert rt.fork_cli("budget", "move", a, b).returncode == 0
    for destination in (c, str(tmp_path / "c.sqlite")):
        again = rt.fork_cli("budget", "move", a, destination)
        assert again.returncode == 2 and "already moved to" in again.stderr, again.explain()
        assert len(again.stderr.strip().splitlines()) == 1
        rt.assert_no_traceback(again)
        assert not _takes_spends(destination)  # nothing was made there
    back = rt.fork_cli("budget", "move", b, a)  # onto the sealed original
    assert back.returncode == 2 and "was itself moved" in back.stderr, back.explain()
    assert [_takes_spends(a), _takes_spends(b)] == [False, True]
    assert rt.fork_cli("budget", "move", b, d).returncode == 0
    assert [_takes_spends(x) for x in (a, b, c, d)] == [False, False, False, True]
    assert Ledger(d).verify().epsilon == Fraction(5, 100)  # 3 + the two probes of A and B
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)  # verify A: B, moved on, holds A
    checked = rt.fork_cli("budget", "verify", "--ledger", a)
    assert checked.returncode == 0, checked.explain()
    assert (
        checked.stdout.splitlines()[-1]
        == f"sealed: moved to {Path(d).resolve()}; it takes no more spends"
    )


def test_two_moves_at_once_leave_one_live_copy(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """Attack: start two moves of one ledger at the same moment, to two places. The source's
    write lock serialises them: one moves it, the other finds it sealed; one copy is live."""
    a = _source(tmp_path / "a.sqlite")
    targets = [postgres_server.url(), str(tmp_path / "b.sqlite")]
    barrier = threading.Barrier(2)
    outcomes: list[Any] = [None, None]

    def move(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = move_ledger(a, targets[i]).outcome
        except LedgerError as error:
            outcomes[i] = error

    threads = [threading.Thread(target=move, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    moved = [o == "moved" for o in outcomes]
    assert moved.count(True) == 1, outcomes
    refused = outcomes[moved.index(False)]
    assert isinstance(refused, LedgerMoved) and "moved to" in str(refused)
    live = [_takes_spends(x) for x in [a, *targets]]
    assert live == [False, *moved]


def test_a_sealed_ledger_refuses_every_spend_and_says_where_it_went(
    rt: Any, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """After the move, ``dpkit run`` against the old ledger is a clean refusal (exit 2, JSON
    error, nothing spent, the new ledger named without its password), and so is a session
    opened before the move."""
    rt.write_csv(tmp_path / "data.csv", ["age"], [[a] for a in AGES])
    spec = rt.write_json(
        tmp_path / "spec.json", rt.query_spec("count", "age", epsilon=0.1, session_epsilon=1.0)
    )
    a = str(tmp_path / "a.sqlite")
    assert rt.fork_cli("run", "--json", str(spec), "--ledger", a).returncode == 0
    session = dpkit.Session(ledger=a)
    url = postgres_server.url()
    assert rt.fork_cli("budget", "move", a, url).returncode == 0
    refused = rt.fork_cli("run", "--json", str(spec), "--ledger", a)
    document = rt.assert_clean_refusal(refused)
    shown = Ledger(url).path
    assert shown in refused.stderr and "moved to" in refused.stderr, refused.explain()
    rt.assert_not_echoed([refused], [postgres_server.password])
    assert document["spent"] is False
    with pytest.raises(LedgerMoved):
        session.release(dpkit.mechanism("rr", epsilon=0.1), np.array([1, 0]))
    assert rt.spent_entry_count(a) == 1 and rt.ledger_spent(a) == Fraction(1, 10)
    assert Ledger(url).verify().epsilon == Fraction(1, 10)


def test_an_awaiting_destination_cannot_be_made_live_by_opening_it(
    tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A move interrupted after its copy leaves the destination awaiting. Opening it as a new
    ledger (with a budget, as ``Session(budget=..., ledger=...)`` does) neither resets it nor
    lets it spend; only running the move again does, and it copies what the source spent in
    between."""
    from dpkit.ledger import _move

    a = _source(tmp_path / "a.sqlite")
    url = postgres_server.url()

    def copy_then_crash(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        raise KeyboardInterrupt  # the process stops before the seal

    original = _move._copy
    with monkeypatch.context() as patch:
        patch.setattr(_move, "_copy", copy_then_crash)
        with pytest.raises(KeyboardInterrupt):
            move_ledger(a, url)
    opened = dpkit.Session(budget=(1.0, 0.0), ledger=url, dataset="redteam")
    with pytest.raises(LedgerMoved, match="unfinished move"):
        opened.release(dpkit.mechanism("rr", epsilon=0.1), np.array([1]))
    assert _takes_spends(a)  # the source is still the live one (and spends once more)
    assert move_ledger(a, url).outcome == "moved"
    assert Ledger(url).verify().epsilon == Fraction(4, 100)
    assert [_takes_spends(a), _takes_spends(url)] == [False, True]


def test_no_password_is_shown_or_stored(
    rt: Any, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """The PostgreSQL password of either side never appears in ``budget move``'s output (text
    and JSON), its errors (a wrong password, a refused destination), ``budget verify``, the
    refusal of the sealed ledger, or the locations the two ledgers store."""
    secret = postgres_server.password
    a = _source(tmp_path / "a.sqlite")
    url = postgres_server.url()
    wrong = url.replace(secret, "not-" + secret[::-1])
    results = [rt.fork_cli("budget", "move", a, wrong)]
    assert results[0].returncode == 2 and "log in" in results[0].stderr, results[0].explain()
    results.append(rt.fork_cli("budget", "move", a, url, "--json"))
    assert results[-1].returncode == 0, results[-1].explain()
    for ledger in (a, url):
        results.append(rt.fork_cli("budget", "verify", "--ledger", ledger, "--json"))
        results.append(rt.fork_cli("budget", "show", "--ledger", ledger))
    results.append(rt.fork_cli("budget", "move", a, postgres_server.url()))  # refused
    results.append(rt.fork_cli("budget", "move", url, a))  # refused: a is sealed
    for result in results:
        rt.assert_no_traceback(result)
        assert secret not in result.stdout + result.stderr, result.explain()
        assert urllib.parse.quote(secret) not in result.stdout + result.stderr
    assert Ledger(a).move_state().moved_to == Ledger(url).path
    assert secret not in Ledger(a).move_state().moved_to


def _contents(location: str) -> list[Any]:
    """Everything a ledger stores (both tables, every row), read without a Ledger."""
    if "://" not in location:
        with contextlib.closing(sqlite3.connect(location)) as db:
            return [db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES]
    import psycopg

    name = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["ledger"][0]
    with psycopg.connect(location.partition("?")[0]) as db:
        return [db.execute(f'SELECT * FROM "{name}".{t} ORDER BY 1').fetchall() for t in TABLES]


def test_verify_of_a_moved_ledger_never_writes_either_side(
    rt: Any,
    tmp_path: Path,
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``budget verify`` of a sealed ledger opens its destination: it must not write there
    (nor make an awaiting destination live), nor create a ledger at a ``--destination`` that
    names another place, nor vouch for one. A move stopped before its activation leaves the
    destination awaiting: verify reports it, and afterwards neither side changed and only
    running the move again makes it live."""
    from dpkit.ledger import _move

    a, b = _source(tmp_path / "a.sqlite"), postgres_server.url()
    with monkeypatch.context() as patch:
        patch.setattr(_move, "_activate", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            move_ledger(a, b)
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    before = [_contents(a), _contents(b)]
    checked = rt.fork_cli("budget", "verify", "--ledger", a)
    assert checked.returncode == 0, checked.explain()
    assert "awaiting: the destination of an unfinished move" in checked.stdout
    elsewhere, fresh = tmp_path / "elsewhere.sqlite", postgres_server.url()
    for other in (str(elsewhere), fresh):
        refused = rt.fork_cli("budget", "verify", "--ledger", a, "--destination", other)
        assert refused.returncode == 2 and "must be the ledger" in refused.stderr
        rt.assert_no_traceback(refused)
    assert [_contents(a), _contents(b)] == before
    assert not elsewhere.exists() and not _takes_spends(fresh)
    assert [_takes_spends(a), _takes_spends(b)] == [False, False]  # b still awaits its move
    assert move_ledger(a, b).outcome == "finished"
    assert _takes_spends(b)


HUNG_MOVER = r"""
import os, signal, sys
from dpkit.ledger import _move, _postgresql

_postgresql._IDLE_IN_TRANSACTION = 1.0  # the server's idle limit for dpkit's writes
_move._IDLE, _move._BATCH = 1.0, 2      # the source may idle 1 s + the 1 s lock wait
insert = _postgresql.PostgresStore.insert_entries
fd = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_APPEND)

def hang(self, tx, rows):
    insert(self, tx, rows)
    os.write(fd, b"hung\n")
    os.kill(os.getpid(), signal.SIGSTOP)  # mid-copy, holding the source's lock

_postgresql.PostgresStore.insert_entries = hang
_move.move_ledger(sys.argv[1], sys.argv[2], timeout=1.0)
"""


def test_a_hung_mover_loses_the_lock_and_no_second_ledger_goes_live(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """The move's source transaction may idle longer than a spend's (the wait for the
    destination's lock), so a mover that hangs (SIGSTOP) mid-copy holds the source's lock for
    at most that long: the server then ends its session, a spender waiting on the source goes
    on, and the destination never takes spends; the resumed mover fails (typed error, no
    seal) and running the move again moves everything, the new spend included."""
    source, destination = postgres_server.url(), postgres_server.url()
    ledger = Ledger(source, dataset="redteam", budget=Budget(Fraction(1), Fraction(0)))
    ledger.spend_all([SpendRequest(STEP, "m", {"i": i}, {}, "s", "-") for i in range(6)])
    log = tmp_path / "mover.log"
    mover = subprocess.Popen(
        [sys.executable, "-c", HUNG_MOVER, source, destination, str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while "hung" not in (log.read_text() if log.exists() else ""):
            assert mover.poll() is None and time.monotonic() < deadline, "the mover never hung"
            time.sleep(0.05)
        start = time.monotonic()
        Ledger(source, timeout=30).spend(
            STEP, mechanism="m", parameters={}, event={}, session_id="s", randomness="-"
        )  # waits for the hung mover's lock, which the server takes back
        assert time.monotonic() - start < 20
        assert not _takes_spends(destination)
    finally:
        mover.send_signal(signal.SIGCONT)
        _, errors = mover.communicate(timeout=60)
    assert mover.returncode != 0 and b"LedgerError" in errors and b"Traceback" in errors
    assert Ledger(source).move_state().state == "live"
    assert move_ledger(source, destination).outcome == "moved"
    assert Ledger(destination).verify().epsilon == 7 * STEP.epsilon
    assert [_takes_spends(source), _takes_spends(destination)] == [False, True]

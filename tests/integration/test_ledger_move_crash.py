"""A ledger move killed with SIGKILL, and spenders racing it, on real databases.

The move runs in its own Python process (as ``dpkit budget move`` would) while a spender process
releases against the source through a ``Session`` and writes each release id only after
``release()`` returned. The move is killed (SIGKILL) either at a random moment or at a chosen
point of the protocol (inside the destination's transaction, after the destination committed,
after the source's seal committed, after the end), made observable by the mover announcing each
point and pausing there. After every kill:

* at most one ledger takes spends — tried with a real spend on each side, not read from a flag;
* every release the spender saw returned is in the ledger that takes spends (or, when none
  does, in the sealed source and its awaiting copy);

and running the same move again finishes it: the destination then holds every entry of the
source, the source refuses spends, and every returned release is in the destination.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.postgres_server import PostgresServer

from dpkit.ledger import Budget, Cost, Ledger, LedgerError, LedgerMoved, move_ledger

# Timed races (moves killed at chosen moments, spenders racing them): they run in the
# serial run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = pytest.mark.serial

SPENDER = r"""
import os, sys
import numpy as np
import dpkit
from dpkit.ledger import LedgerMoved

path, out = sys.argv[1], sys.argv[2]
session = dpkit.Session(ledger=path)
rr = dpkit.mechanism("rr", epsilon=0.001)
rng = np.random.default_rng(int(sys.argv[3]))
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(fd, b"started\n")
while True:
    try:
        release = session.release(rr, np.array([0, 1, 1, 0]), rng=rng)
    except LedgerMoved:
        os.write(fd, b"refused\n")
        break
    os.write(fd, (release.release_id + "\n").encode())  # only after release() returned
"""

# The mover: dpkit's own move_ledger, with the points of the protocol announced (and, when
# asked, held for the parent to kill) by wrapping the module's steps in this process only.
MOVER = r"""
import os, sys, time
from dpkit.ledger import _move, _sqlite, _postgresql

source, destination, log, hold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

def point(name):
    os.write(fd, (name + "\n").encode())
    if name == hold:
        time.sleep(60)  # killed here

def wrap(owner, attribute, before, after=None):
    original = getattr(owner, attribute)
    def wrapped(*args, **kwargs):
        point(before)
        result = original(*args, **kwargs)
        if after:
            point(after)
        return result
    setattr(owner, attribute, wrapped)

for store in (_sqlite.SqliteStore, _postgresql.PostgresStore):
    wrap(store, "entries_copied", "copying")          # inside the destination's transaction
wrap(_move, "_copy", "copy", "copied")                # copied: committed, the seal is not
wrap(_move, "_activate", "sealed")                    # the seal committed
point("started")
_move.move_ledger(source, destination)
point("done")
"""

POINTS = ["copying", "copied", "sealed", "done"]
#: What running the move again may report, by the last point the killed move announced: the
#: seal commits after "copied" is announced, and the activation after "sealed".
_OUTCOMES = {
    -1: {"moved"},
    0: {"moved"},
    1: {"moved", "finished"},
    2: {"finished", "already moved"},
    3: {"already moved"},
}
TINY = Cost(Fraction(1, 1000), Fraction(0))


def _spawn(code: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(log.with_suffix(".err"), "wb") as errors:
        return subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=errors
        )


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text().split("\n")[:-1] if line]  # complete lines only


def _wait_for(path: Path, word: str, process: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while word not in _lines(path):
        assert process.poll() is None or word in _lines(path), path.with_suffix(".err").read_text()
        assert time.monotonic() < deadline, f"{path.name}: no {word!r}"
        time.sleep(0.01)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _takes_spends(location: str) -> bool:
    """Whether a real spend on ``location`` succeeds (a refusal names the move)."""
    try:
        ledger = Ledger(location)
    except LedgerError as error:
        assert "no ledger" in str(error)  # the destination not created yet
        return False
    try:
        ledger.spend(
            TINY, mechanism="probe", parameters={}, event={}, session_id="probe", randomness="-"
        )
    except LedgerMoved:
        return False
    finally:
        ledger.close()
    return True


def _ids(location: str) -> dict[str, str]:
    return {e.release_id: e.status for e in Ledger(location).entries()}


@pytest.fixture
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def make(kinds: tuple[str, str]) -> tuple[str, str]:
        out = []
        for role, kind in zip(("source", "destination"), kinds, strict=True):
            if kind == "sqlite":
                out.append(str(tmp_path / f"{role}-{time.monotonic_ns()}.sqlite"))
            else:
                server: PostgresServer = request.getfixturevalue("postgres_server")
                out.append(server.url())
        return out[0], out[1]

    return make


PAIRS = [("sqlite", "postgresql"), ("postgresql", "sqlite")]


def _scenario(source: str, destination: str, tmp_path: Path, hold: str, delay: float) -> None:
    """One move, with a spender racing it, killed at ``hold`` (or after ``delay`` seconds)."""
    tag = f"{hold}-{time.monotonic_ns()}"
    spent, moves = tmp_path / f"spent-{tag}.log", tmp_path / f"move-{tag}.log"
    Ledger(source, dataset="moving", budget=Budget(Fraction(10**6), Fraction(0))).close()
    spender = _spawn(SPENDER, spent, source, str(spent), "7")
    try:
        _wait_for(spent, "started", spender)
        while len(_lines(spent)) < 4:  # a few releases committed before the move
            assert spender.poll() is None, spent.with_suffix(".err").read_text()
            time.sleep(0.01)
        # a random kill: the mover holds at "done", so that it is killed even if it finished
        held = hold if hold in POINTS else "done"
        mover = _spawn(MOVER, moves, source, destination, str(moves), held)
        _wait_for(moves, "started", mover)
        if hold in POINTS:
            _wait_for(moves, hold, mover)
        else:
            time.sleep(delay)
        _kill(mover)
        assert mover.returncode == -signal.SIGKILL  # killed, not finished on its own
        reached = _lines(moves)

        live = [_takes_spends(source), _takes_spends(destination)]
        assert live.count(True) <= 1, (reached, live)  # never two ledgers taking spends
        if "sealed" in reached:
            assert not live[0]
        if "done" in reached:
            assert live == [False, True]
        returned = [r for r in _lines(spent) if r not in ("started", "refused")]
        # the spender may still be spending the source (before its seal): none of it is lost
        # by the kill, and the move run again takes all of it
        result = move_ledger(source, destination)
        assert (
            result.outcome
            in _OUTCOMES[max(map(POINTS.index, set(reached) & set(POINTS)), default=-1)]
        ), reached
        _wait_for(spent, "refused", spender)
        spender.wait(timeout=60)
        assert spender.returncode == 0, spent.with_suffix(".err").read_text()
    finally:
        _kill(spender)
    returned = [r for r in _lines(spent) if r not in ("started", "refused")]
    moved = _ids(destination)
    assert _ids(source).items() <= moved.items()  # every entry of the source, copied
    assert all(moved.get(r) == "spent" for r in returned)  # nothing released is lost
    assert Ledger(destination).verify().epsilon == Fraction(len(moved), 1000)
    assert (_takes_spends(source), _takes_spends(destination)) == (False, True)


#: Every point for SQLite → PostgreSQL (the move that matters); the two points that leave the
#: destination awaiting for PostgreSQL → SQLite (the other backend in each role).
HELD = [(PAIRS[0], hold) for hold in POINTS] + [(PAIRS[1], "copying"), (PAIRS[1], "sealed")]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kinds,hold", HELD, ids=[f"{'-to-'.join(kinds)}-{hold}" for kinds, hold in HELD]
)
def test_a_move_killed_at_each_point_of_the_protocol(
    kinds: tuple[str, str], hold: str, places: Any, tmp_path: Path
) -> None:
    _scenario(*places(kinds), tmp_path, hold, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("kinds", PAIRS, ids=lambda k: "-to-".join(k))
def test_a_move_killed_at_random_moments(
    kinds: tuple[str, str], places: Any, tmp_path: Path
) -> None:
    # after "started", the move waits for the source's lock (the spender holds it for each of
    # its commits) and connects to both databases: some 0.1-0.8 s here, under load; the kills
    # spread over that window (which points each kill fell between is not asserted: it varies)
    for delay in np.random.default_rng(20261124).uniform(0.0, 0.8, size=2):
        _scenario(*places(kinds), tmp_path, "random", float(delay))

"""Several ledger handles per process must never drop the SQLite locks of another handle.

On POSIX, closing any descriptor of a file releases every fcntl lock the process holds on it.
A ledger that opened and closed its database file outside SQLite (to read the header) dropped
the locks of the process's other connections; a process closing its last connection could then
checkpoint and delete the WAL under them, and concurrent spends overspent (ε = 6 released
against a budget of 4). These tests run real processes and threads against a real SQLite file
and count every successful spend: exactly the number the budget admits, and ``verify()`` agrees.

The thread, process and fork tests run on both backends (``ledger_store``): on PostgreSQL the
hazard is different (a forked child that closed its inherited connection would end the
parent's server session) but the contract is the same. A child forked while another thread is
inside a transaction is refused on SQLite and spends normally on PostgreSQL.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import BudgetExceeded
from dpkit.ledger import Budget, Cost, Ledger

# Timed races (forked and racing handles, each waiting on the others): they run in the
# serial run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = pytest.mark.serial

STEP = Fraction(1, 100)

# Each worker opens its handles, prints "ready" and waits for "go" on stdin (a barrier across
# processes), then spends until the budget is exhausted and prints how many spends succeeded.
SPENDER = r"""
import json, sys, threading
from fractions import Fraction
from dpkit.errors import BudgetExceeded
from dpkit.ledger import Cost, Ledger

path, role, threads, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cost = Cost(Fraction(1, 100), Fraction(0))
kept = [Ledger(path) for _ in range(extra)]  # handles held open for the whole run
for handle in kept:
    handle.spent()  # a live connection, holding its SQLite locks
ok = [0] * threads

def spend(ledger):
    ledger.spend(cost, mechanism="m", parameters={}, event={}, session_id=role, randomness="fast")

def work(index):
    while True:
        if role == "holder":
            # the failing sequence: hold A, open and close B on the same file, spend with A
            other = Ledger(path)
            other.close()
            ledger = kept[0]
        else:
            ledger = Ledger(path)  # a new handle per request
        try:
            spend(ledger)
        except BudgetExceeded:
            return
        finally:
            if ledger not in kept:
                ledger.close()
        ok[index] += 1

print("ready", flush=True)
sys.stdin.readline()
pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
for t in pool: t.start()
for t in pool: t.join()
print(json.dumps(sum(ok)), flush=True)
"""


#: tests/conftest.py's LedgerStore (a conftest cannot be imported under --import-mode=importlib)
LedgerStore = Any


def _create(path: Path | str, releases: int) -> None:
    Ledger(path, dataset="handles", budget=Budget(releases * STEP, Fraction(0))).close()


def _run(path: Path | str, workers: list[tuple[str, int, int]]) -> int:
    """Start every worker, release them together, and return the total number of spends."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SPENDER, str(path), role, str(threads), str(extra)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, threads, extra in workers
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "ready\n", proc.communicate(timeout=60)[1]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        total = 0
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            total += int(json.loads(out))
        return total
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _check(path: Path | str, released: int, releases: int) -> None:
    assert released == releases, f"{released} spends succeeded against a budget of {releases}"
    ledger = Ledger(path)
    totals = ledger.verify()
    assert totals.epsilon == releases * STEP
    assert sum(e.status == "spent" for e in ledger.entries()) == releases


@pytest.mark.parametrize("ledger_store", ["sqlite"], indirect=True)  # SQLite's own hazard
@pytest.mark.parametrize("workers", [1, 2])
def test_second_handle_in_a_holding_process_keeps_the_locks(
    ledger_store: LedgerStore, workers: int
) -> None:
    path = ledger_store.location
    releases = 300
    _create(path, releases)
    # one process holds Ledger A and keeps opening and closing Ledger B; the others open a new
    # handle per spend and close it: a process closing the last connection it can see (had A
    # lost its lock) checkpoints and deletes the WAL under A
    released = _run(path, [("holder", 1, 1)] + [("worker", 1, 0)] * workers)
    _check(path, released, releases)


def test_handles_threads_and_processes_spend_exactly_the_budget(ledger_store: LedgerStore) -> None:
    path = ledger_store.location
    releases = 240
    _create(path, releases)
    # three processes, each holding two extra handles, three threads each opening a new
    # handle per request
    released = _run(path, [("worker", 3, 2)] * 3)
    _check(path, released, releases)


def test_many_handles_in_one_process_and_threads(ledger_store: LedgerStore) -> None:
    path = ledger_store.location
    releases = 120
    _create(path, releases)
    kept = [Ledger(path) for _ in range(3)]
    for handle in kept:
        handle.spent()
    barrier = threading.Barrier(6)
    counts = [0] * 6
    cost = Cost(STEP, Fraction(0))

    def work(index: int) -> None:
        barrier.wait()
        while True:
            ledger = kept[index % 3] if index < 3 else Ledger(path)
            try:
                ledger.spend(
                    cost, mechanism="m", parameters={}, event={}, session_id="t", randomness="fast"
                )
            except BudgetExceeded:
                return
            finally:
                if index >= 3:
                    ledger.close()
            counts[index] += 1

    pool = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    _check(path, sum(counts), releases)


def _forked_spender(path: str, inherited: Ledger, ready: Any, go: Any, results: Any) -> None:
    # the parent's Ledger object comes across the fork with its connection; this process also
    # opens its own handle before the start, then spends through the inherited object (a fresh
    # connection for this pid), its own handle, and a new handle per request
    own = Ledger(path)
    own.spent()
    ready.wait()
    go.wait()
    cost = Cost(STEP, Fraction(0))
    ok = 0
    try:
        for turn in range(10**6):
            ledger = (inherited, own, None)[turn % 3] or Ledger(path)
            try:
                ledger.spend(
                    cost, mechanism="m", parameters={}, event={}, session_id="f", randomness="fast"
                )
            except BudgetExceeded:
                break
            finally:
                if ledger not in (inherited, own):
                    ledger.close()
            ok += 1
    except Exception as error:  # reported to the parent, which fails at once
        results.put(repr(error))
    else:
        results.put(ok)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.parametrize("parent_closes", [False, True])
def test_forked_children_with_an_inherited_ledger_spend_exactly(
    ledger_store: LedgerStore, parent_closes: bool
) -> None:
    path = ledger_store.location
    releases = 300
    _create(path, releases)
    parent = Ledger(path)
    parent.spent()  # the parent holds a live connection across the forks
    context = multiprocessing.get_context("fork")
    ready, go, results = context.Barrier(3), context.Event(), context.Queue()
    children = [
        context.Process(target=_forked_spender, args=(str(path), parent, ready, go, results))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    ready.wait()  # each child has opened its own connection
    if parent_closes:
        # the children must hold real locks of their own: SQLite's copied bookkeeping says the
        # parent's locks are held, and once the parent lets go, a process closing its last
        # connection would checkpoint and delete the WAL under them
        parent.close()
    worker = subprocess.Popen(
        [sys.executable, "-c", SPENDER, str(path), "worker", "1", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdin is not None
        assert worker.stdout.readline() == "ready\n", worker.communicate(timeout=60)[1]
        worker.stdin.write("go\n")
        worker.stdin.flush()
        go.set()
        ok = 0
        while not parent_closes:
            try:
                parent.spend(
                    Cost(STEP, Fraction(0)),
                    mechanism="m",
                    parameters={},
                    event={},
                    session_id="p",
                    randomness="fast",
                )
            except BudgetExceeded:
                break
            ok += 1
        counts = [results.get(timeout=120) for _ in children]
        assert all(isinstance(count, int) for count in counts), counts
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    _check(path, ok + sum(counts) + int(out), releases)
    assert parent.verify().epsilon == releases * STEP  # the parent's handle still works


def _child_spends(ledger: Ledger, results: Any) -> None:
    try:
        ledger.spend(
            Cost(STEP, Fraction(0)),
            mechanism="m",
            parameters={},
            event={},
            session_id="c",
            randomness="fast",
        )
    except Exception as error:
        results.put(f"{type(error).__name__}: {error}")
    else:
        results.put("spent")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_fork_inside_another_threads_transaction(ledger_store: LedgerStore) -> None:
    path = ledger_store.location
    _create(path, 10)
    ledger = Ledger(path)
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ledger._transaction() as tx:  # another thread is mid-transaction at the fork
            inside.set()
            release.wait(timeout=60)
            tx.run("UPDATE {meta} SET value = value WHERE key = 'created'")  # and goes on

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(timeout=60)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child_spends, args=(ledger, results))
    try:
        child.start()
        if ledger_store.kind == "postgresql":
            release.set()  # the child waits for the write lock that thread holds
        outcome = results.get(timeout=60)
    finally:
        release.set()
        holder.join()
        child.join(timeout=60)
    if ledger_store.kind == "sqlite":
        # SQLite's copied lock state for that file is not trustworthy in the child: refused
        assert outcome.startswith("LedgerError") and "forked while another thread" in outcome
        assert ledger.entries() == [] and ledger.verify().epsilon == 0
    else:
        # a PostgreSQL child has a session of its own: it spends, after the parent's commit
        assert outcome == "spent"
        assert len(ledger.entries()) == 1 and ledger.verify().epsilon == STEP

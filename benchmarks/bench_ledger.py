"""Ledger speed: a spend on SQLite and on PostgreSQL, each against its database's floor.

Run: ``nice .venv/bin/python benchmarks/bench_ledger.py [--spends 200] [--repeat 3] [--no-save]``
(``--postgres URL`` uses that server; otherwise one is started in a temporary directory from
the local PostgreSQL binaries, as the tests do, and removed at the end).

The floor is the least a correct ledger must do per spend: one durable write transaction that
serialises writers, inserts one entry and updates the totals, written with the raw driver
(SQLite: ``BEGIN IMMEDIATE``, WAL, ``synchronous=FULL``; PostgreSQL: ``SELECT ... FOR UPDATE``
at READ COMMITTED, ``synchronous_commit=on``). ``dpkit`` is ``Ledger.spend``, which also
recomputes the totals from the entries, checks them and the budget, and serialises the entry.
Each call makes ``--spends`` spends on a new ledger; every contender goes through
``_timing.measure`` (one warm-up call, ``--repeat`` rounds in rotated order, CPU and wall
clock); times are medians per spend, ratios medians of per-round ratios. The threaded rows are 4 threads, each with
its own handle, spending ``--spends`` in total. Ratios are dpkit / floor and PostgreSQL /
SQLite (lower is better). A durable commit is an fsync, so the absolute times are the disk's.
Writes section ``ledger`` of ``benchmarks/results.json`` (``--no-save`` prints only).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from _results import Run
from _timing import Timing, measure, ratio

from dpkit.ledger import Budget, Cost, Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from postgres_server import database

COST = Cost(Fraction(1, 100), Fraction(0))
FLOOR_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {t}_totals (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {t}_entries (id TEXT, epsilon TEXT, delta TEXT, event TEXT)",
)


def _ledger(location: str) -> Ledger:
    return Ledger(location, dataset="bench", budget=Budget(Fraction(10**9), Fraction(0)))


def _spend(ledger: Ledger) -> None:
    ledger.spend(COST, mechanism="rr", parameters={"epsilon": 0.01}, event={"type": "pure"},
                 session_id="bench", randomness="fast")  # fmt: skip


def dpkit_run(new_location: Callable[[], str], spends: int, threads: int = 1) -> Callable[[], Any]:
    def run() -> None:
        location = new_location()
        _ledger(location).close()
        left = [spends]
        lock = threading.Lock()

        def work() -> None:
            ledger = Ledger(location)
            while True:
                with lock:
                    if left[0] == 0:
                        break
                    left[0] -= 1
                _spend(ledger)
            ledger.close()

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()

    return run


def sqlite_floor(directory: str, spends: int) -> Callable[[], Any]:
    def run() -> None:
        db = sqlite3.connect(os.path.join(directory, f"floor-{uuid.uuid4().hex}.db"),
                             isolation_level=None)  # fmt: skip
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        for statement in FLOOR_SCHEMA:
            db.execute(statement.format(t="f"))
        db.execute("INSERT INTO f_totals VALUES ('spent_epsilon', '0/1')")
        for i in range(spends):
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO f_entries VALUES (?, '1/100', '0/1', '{}')", (str(i),))
            db.execute("UPDATE f_totals SET value = ? WHERE key = 'spent_epsilon'", (f"{i}/100",))
            db.execute("COMMIT")
        db.close()

    return run


def postgres_floor(base: str, spends: int) -> Callable[[], Any]:
    import psycopg

    def run() -> None:
        table = f"f{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as db:
            for statement in FLOOR_SCHEMA:
                db.execute(statement.format(t=table))
            db.execute(f"INSERT INTO {table}_totals VALUES ('spent_epsilon', '0/1')")
            for i in range(spends):
                db.execute("BEGIN")
                db.execute(
                    f"SELECT value FROM {table}_totals WHERE key = 'spent_epsilon' FOR UPDATE"
                )
                db.execute(f"INSERT INTO {table}_entries VALUES (%s, '1/100', '0/1', '{{}}')",
                           (str(i),))  # fmt: skip
                db.execute(f"UPDATE {table}_totals SET value = %s WHERE key = 'spent_epsilon'",
                           (f"{i}/100",))  # fmt: skip
                db.execute("COMMIT")

    return run


LEDGER_COLUMNS = [
    "contender",
    "cpu ms/spend",
    "wall ms/spend",
    "spends/s (wall)",
    "cpu ÷ floor",
    "wall ÷ floor",
]


def rows_of(timed: dict[str, Timing], spends: int) -> list[dict[str, Any]]:
    """One row per contender, per spend; ratios to the floor of the same database."""
    rows = []
    print(
        f"{'':30} {'CPU ms':>7} {'ms/spend':>9} {'spends/s':>9} {'cpu÷floor':>9} {'wall÷floor':>10}"
    )
    for label, timing in timed.items():
        floor = timed[f"{label.split()[0]} floor"]
        row: dict[str, Any] = {
            "contender": label,
            "cpu ms/spend": round(timing.cpu / spends * 1e3, 3),
            "wall ms/spend": round(timing.wall / spends * 1e3, 3),
            "spends/s (wall)": round(spends / timing.wall),
        }
        if "floor" not in label:
            row["cpu ÷ floor"] = round(ratio(timing, floor), 2)
            row["wall ÷ floor"] = round(ratio(timing, floor, "wall"), 2)
        print(f"{label:30} " + " ".join(f"{v:>9}" for v in list(row.values())[1:]))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--spends", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (_timing.measure)")
    parser.add_argument("--postgres", help="a postgresql:// URL of a database to use")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    command = ("python benchmarks/bench_ledger.py " + " ".join(sys.argv[1:])).strip()
    run = Run("ledger", command, harness={"rounds": args.repeat, "warmup": 1})
    with (
        database(args.postgres) as base,
        tempfile.TemporaryDirectory(prefix="dpkit-bench-ledger-") as directory,
    ):
        n = args.spends

        def sqlite_location() -> str:
            return os.path.join(directory, f"{uuid.uuid4().hex}.sqlite")

        def postgres_location() -> str:
            separator = "&" if "?" in base else "?"
            return f"{base}{separator}ledger=b_{uuid.uuid4().hex[:16]}"

        runs = {
            "SQLite floor": sqlite_floor(directory, n),
            "SQLite dpkit": dpkit_run(sqlite_location, n),
            "PostgreSQL floor": postgres_floor(base, n),
            "PostgreSQL dpkit": dpkit_run(postgres_location, n),
            "SQLite dpkit, 4 threads": dpkit_run(sqlite_location, n, threads=4),
            "PostgreSQL dpkit, 4 threads": dpkit_run(postgres_location, n, threads=4),
        }
        timed = measure(runs, rounds=args.repeat)
        print(f"{n} spends per run, medians of {args.repeat} rounds (client CPU and wall)")
        rows = rows_of(timed, n)
        between = {
            threads: round(
                ratio(timed[f"PostgreSQL dpkit{threads}"], timed[f"SQLite dpkit{threads}"], "wall"),
                2,
            )
            for threads in ("", ", 4 threads")
        }
        print(f"PostgreSQL ÷ SQLite (dpkit, wall): {between}")
    if not args.no_save:
        run.save(
            title=f"Ledger.spend on SQLite and PostgreSQL against a raw durable transaction, "
            f"{n} spends per run",
            columns=LEDGER_COLUMNS,
            rows=rows,
            notes=[
                "Per spend: medians over rounds of one run of --spends spends on a new ledger; "
                "ratios are medians of per-round ratios to the floor of the same database "
                "(cpu: this client process, all its threads; the PostgreSQL server's CPU is not "
                "counted).",
                "Every spend waits for an fsync: wall times are the disk's and swing several-fold "
                "on a shared machine; the client's CPU time is steadier.",
                f"PostgreSQL ÷ SQLite, dpkit, wall: {between['']} (one thread), "
                f"{between[', 4 threads']} (4 threads).",
                "PostgreSQL: "
                + (
                    "the server given by --postgres."
                    if args.postgres
                    else "a throwaway server started from the local binaries."
                ),
                "Measured on a shared 2-core machine.",
            ],
        )


if __name__ == "__main__":
    main()

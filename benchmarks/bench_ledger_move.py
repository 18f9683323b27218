"""Moving a big ledger: ``move_ledger`` of a PostgreSQL ledger of ``--entries`` entries into a
new PostgreSQL ledger and into a new SQLite file.

Run: ``nice .venv/bin/python benchmarks/bench_ledger_move.py [--entries 1000000] [--no-save]``
(``--postgres URL`` uses that server; otherwise one is started in a temporary directory from
the local PostgreSQL binaries, as the tests do, and removed at the end).

Each move gets a new source, filled by bulk SQL (one ``INSERT ... SELECT`` from
``generate_series`` copying a real spend, and the totals set to match), not by spends. A move is
timed as a whole (``move``: checks, the source verified, the copy under the source's lock, the
seal, the activation, both ledgers verified and compared entry by entry) and in its copy step
(``copy``: reading the source and writing the destination in one transaction, including its
commit), by the wall clock and this process's CPU clock; ``rows/s`` is entries per wall second
of the copy. The copy holds the source's write lock: spenders wait for that long. One run per
destination: a move is not repeatable on the same source, and at 10⁶ entries one run is minutes.
Writes section ``ledger_move`` of ``benchmarks/results.json`` (``--no-save`` prints only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

from _results import Run

from dpkit.ledger import Budget, Cost, Ledger, _move, move_ledger
from dpkit.ledger._schema import entry_column_names
from dpkit.ledger._values import fraction_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from postgres_server import database

COST = Cost(Fraction(1, 1000), Fraction(0))
COLUMNS = ["destination", "entries", "copy s (wall)", "copy s (cpu)", "rows/s", "move s (wall)"]


def filled_source(base: str, entries: int) -> str:
    """A new PostgreSQL ledger of ``entries`` entries: one real spend, copied by SQL."""
    import psycopg

    name = f"m_{uuid.uuid4().hex[:16]}"
    url = f"{base}{'&' if '?' in base else '?'}ledger={name}"
    ledger = Ledger(url, dataset="bench", budget=Budget(Fraction(10**9), Fraction(0)))
    ledger.spend(COST, mechanism="rr", parameters={"epsilon": 0.001}, event={"type": "pure"},
                 session_id="bench", randomness="fast", label="first")  # fmt: skip
    ledger.close()
    columns = [c for c in entry_column_names() if c != "seq"]
    copied = ", ".join(
        "release_id || '-' || i" if c == "release_id" else "'{\"value\": ' || i || '}'"
        if c == "result" else c
        for c in columns
    )  # fmt: skip
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(
            f'INSERT INTO "{name}".dpkit_entries ({", ".join(columns)}) SELECT {copied}'
            f' FROM "{name}".dpkit_entries, generate_series(2, {entries}) AS i'
        )
        db.execute(
            f"UPDATE \"{name}\".dpkit_meta SET value = %s WHERE key = 'spent_epsilon'",
            (fraction_text(COST.epsilon * entries),),
        )
        db.execute(f'ANALYZE "{name}".dpkit_entries')
    return url


@contextmanager
def timed_copy(into: dict[str, float]) -> Iterator[None]:
    """Time ``_move._copy`` (the step that holds the source's lock) inside the block."""
    original: Callable[..., Any] = _move._copy

    def copy(*args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into["cpu"], into["wall"] = time.process_time() - cpu, time.perf_counter() - wall

    _move._copy = copy  # type: ignore[assignment]
    try:
        yield
    finally:
        _move._copy = original  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=10**6)
    parser.add_argument("--postgres", help="a postgresql:// URL of a database to use")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    command = ("python benchmarks/bench_ledger_move.py " + " ".join(sys.argv[1:])).strip()
    run = Run("ledger_move", command, harness={"rounds": 1, "warmup": 0})
    rows = []
    with (
        database(args.postgres) as base,
        tempfile.TemporaryDirectory(prefix="dpkit-bench-move-") as directory,
    ):
        destinations = {
            "PostgreSQL": lambda: (
                f"{base}{'&' if '?' in base else '?'}ledger=d_{uuid.uuid4().hex[:16]}"
            ),
            "SQLite": lambda: os.path.join(directory, f"{uuid.uuid4().hex}.sqlite"),
        }
        print(f"{'PostgreSQL to':14} {'entries':>9} {'copy s':>8} {'cpu s':>7} {'rows/s':>9} "
              f"{'move s':>8}")  # fmt: skip
        for kind, make in destinations.items():
            source = filled_source(base, args.entries)
            copy: dict[str, float] = {}
            start = time.perf_counter()
            with timed_copy(copy):
                result = move_ledger(source, make())
            total = time.perf_counter() - start
            assert result.entries == args.entries and result.outcome == "moved"
            row = {
                "destination": kind,
                "entries": args.entries,
                "copy s (wall)": round(copy["wall"], 2),
                "copy s (cpu)": round(copy["cpu"], 2),
                "rows/s": round(args.entries / copy["wall"]),
                "move s (wall)": round(total, 1),
            }
            print(f"{kind:14} " + " ".join(f"{v:>8}" for v in list(row.values())[1:]))
            rows.append(row)
    if not args.no_save:
        run.save(
            title=f"Moving a PostgreSQL ledger of {args.entries:,} entries",
            columns=COLUMNS,
            rows=rows,
            notes=[
                "copy: the step that holds the source's write lock (read the source, write and "
                "commit the destination); move: the whole move_ledger call, with the checks "
                "before and the verification of both ledgers after.",
                "One run per destination, on a throwaway server on the same machine (client "
                "and server share its 2 cores); cpu is the client process's only.",
                "Measured on a shared 2-core machine.",
            ],
        )


if __name__ == "__main__":
    main()

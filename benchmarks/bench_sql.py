"""A grouped, id-level count + sum + mean over Parquet: ``dpkit.sql`` against plain DuckDB.

Run: ``nice .venv/bin/python benchmarks/bench_sql.py [--rows 10000000] [--users N]
[--cities 50] [--rounds 1] [--warmup 0] [--peer-rows 10000000] [--scratch DIR] [--no-save]
[--no-pushdown] [--section sql]`` (the issue's size: ``--rows 100000000 --no-pushdown
--section sql_large``)

The Parquet file has ``--rows`` rows of ``user`` (``--users`` distinct ids, default rows/20),
``city`` (``--cities`` names) and ``minutes`` (uniform in [0, 150]), written once into a
temporary directory. Three contenders compute the same statement's aggregates from it, all
through ``_timing.measure`` (the same warm-up and rounds, rotated order, CPU and wall clock):

* **dpkit**: ``dpkit.sql`` of ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1,
  privacy_unit_column = user, max_groups_contributed = 2, max_rows_contributed = 5) city,
  COUNT(*), SUM(minutes, bounds => (0, 120)), AVG(minutes, bounds => (0, 120)) FROM visits
  GROUP BY city`` with the cities as public keys, released with ``query.run`` (no ledger:
  the spend is a few milliseconds, ``bench_ledger.py``), each person's rows bounded in numpy
  after DuckDB's per-record steps (the default);
* **dpkit, bounded in DuckDB** (``bounding="duckdb"``): the same, the bounding pushed into
  DuckDB (the same rows kept);
* **DuckDB GROUP BY**: the same aggregates without privacy (no bounding, no clamping);
* **DuckDB truncation** (the privacy floor): the same per-person bounding written in DuckDB —
  at most 5 rows per (user, city) by ``ROW_NUMBER()`` over a hash of the row, at most 2
  cities per user by ``ROW_NUMBER()`` over a hash of (user, city) — then the clamped
  aggregates. It is what any DP SQL engine must at least do.

Then, with ``--peer-rows N`` (and SmartNoise SQL's environment: ``python
benchmarks/peers/make_venvs.py sql``), the statement on an N-row file through **dpkit's pandas
path** (the Parquet file read into pandas, then ``dpkit.sql`` on the DataFrame) and through
**SmartNoise SQL**'s pandas reader (``_peer_sql.py``, its own process and environment; the
same read, the same harness): SmartNoise bounds a person to 10 rows over all cities (its
``max_ids``), the most dpkit's 2 cities × 5 rows allow.

Ratios are dpkit / contender, medians of per-round ratios (CPU — every thread's, the process's
``process_time`` — and wall). Peak resident memory is each contender's alone: a fresh process
(this script with ``--peak-of``) runs it once on the same file and reports its high-water
mark (``VmHWM``). Writes section ``sql`` (``--section``) of ``benchmarks/results.json`` (``--no-save`` prints only).
The machine is shared: quote the ratios measured in one run, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import peers_python
from _results import Run
from _timing import Timing, measure, ratio

HERE = Path(__file__).resolve().parent

STATEMENT = """
SELECT WITH DIFFERENTIAL_PRIVACY
    OPTIONS (epsilon = 1, privacy_unit_column = user, max_groups_contributed = 2,
             max_rows_contributed = 5)
  city,
  COUNT(*) AS visits,
  SUM(minutes, contribution_bounds_per_group => (0, 120)) AS total,
  AVG(minutes, contribution_bounds_per_group => (0, 120)) AS mean
FROM visits
GROUP BY city
"""

PLAIN = """
SELECT city, COUNT(*), SUM(minutes), AVG(minutes) FROM read_parquet('{path}') GROUP BY city
"""

FLOOR = """
WITH rows AS (
  SELECT user, city, LEAST(GREATEST(minutes, 0), 120) AS minutes,
         ROW_NUMBER() OVER (PARTITION BY user, city ORDER BY hash(user, city, minutes)) AS r
  FROM read_parquet('{path}')
), pairs AS (
  SELECT user, city, ROW_NUMBER() OVER (PARTITION BY user ORDER BY hash(user, city)) AS g
  FROM (SELECT DISTINCT user, city FROM rows)
)
SELECT city, COUNT(*), SUM(minutes), AVG(minutes)
FROM rows JOIN pairs USING (user, city)
WHERE r <= 5 AND g <= 2
GROUP BY city
"""


def write_parquet(path: Path, rows: int, users: int, cities: int, seed: int = 1) -> None:
    """The table, in chunks of 10⁶ rows (bounded memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = np.array([f"city{i:03d}" for i in range(cities)])
    schema = pa.schema([("user", pa.int64()), ("city", pa.string()), ("minutes", pa.float64())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 1_000_000):
            n = min(1_000_000, rows - start)
            writer.write_table(
                pa.table(
                    {
                        "user": rng.integers(0, users, n),
                        "city": names[rng.integers(0, cities, n)],
                        "minutes": rng.uniform(0, 150, n),
                    },
                    schema=schema,
                )
            )


def smartnoise_rows(path: Path, keys: list[str], rounds: int, warmup: int) -> list[dict[str, Any]]:
    """dpkit's pandas path against SmartNoise SQL (``_peer_sql.py`` in its environment) on
    ``path``, each timed by ``_timing.measure``: the ratio row, or none when the environment
    is missing or the worker fails (said on stdout)."""
    import pandas as pd

    import dpkit

    python = peers_python("sql")
    if not python.exists():
        print(
            f"SmartNoise SQL: no environment at {python.parent.parent} "
            "(create it with: python benchmarks/peers/make_venvs.py sql)"
        )
        return []
    rng = np.random.default_rng(0)

    def pandas_path() -> object:
        frame = pd.read_parquet(path, columns=["user", "city", "minutes"])
        return dpkit.sql(STATEMENT, tables={"visits": frame}, keys=keys).run(rng=rng)

    mine = measure({"dpkit_pandas": pandas_path}, rounds=rounds, warmup=warmup)["dpkit_pandas"]
    command = [
        str(python),
        str(HERE / "_peer_sql.py"),
        str(path),
        f"--rounds={rounds}",
        f"--warmup={warmup}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=HERE)
    found = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
    if found is None or "error" in found:
        print(f"SmartNoise SQL failed: {found['error'] if found else done.stderr[-1500:]}")
        return []
    theirs = Timing(tuple(found["cpu"]), tuple(found["wall"]))
    return [
        {
            "dpkit": "dpkit_pandas_path",
            "contender": f"smartnoise_sql {found['version']}",
            "dpkit_cpu_s": round(mine.cpu, 2),
            "contender_cpu_s": round(theirs.cpu, 2),
            "ratio_cpu": round(ratio(mine, theirs, "cpu"), 2),
            "ratio_wall": round(ratio(mine, theirs, "wall"), 2),
        }
    ]


def contenders(path: Path, keys: list[str]) -> dict[str, Any]:
    """Each contender as a call on the Parquet file at ``path``."""
    import duckdb

    import dpkit

    query = dpkit.sql(STATEMENT, tables={"visits": str(path)}, keys=keys)
    pushed = dpkit.sql(STATEMENT, tables={"visits": str(path)}, keys=keys, bounding="duckdb")
    query.check_input(None)
    pushed.check_input(None)
    con = duckdb.connect()
    rng = np.random.default_rng(0)
    return {
        "dpkit": lambda: query.run(rng=rng),
        "dpkit_bounded_in_duckdb": lambda: pushed.run(rng=rng),
        "duckdb_group_by": lambda: con.sql(PLAIN.format(path=path)).fetchall(),
        "duckdb_truncation": lambda: con.sql(FLOOR.format(path=path)).fetchall(),
    }


def high_water_gib() -> float:
    """This process's peak resident memory in GiB: ``VmHWM``, which ``execve`` resets (Linux's
    ``ru_maxrss`` keeps the parent's peak across it), or ``ru_maxrss`` without ``/proc``."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # KiB -> GiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def peak_of(label: str, path: Path, keys: list[str]) -> float:
    """GiB: the peak resident memory of a fresh process that runs ``label`` once on ``path``."""
    command = [sys.executable, __file__, "--peak-of", label, "--parquet", str(path)]
    command += ["--cities", str(len(keys))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--cities", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--peer-rows", type=int, default=0, help="0: no SmartNoise comparison")
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument(
        "--no-pushdown",
        action="store_true",
        help="leave out dpkit bounded in DuckDB (slow at 10^8 rows)",
    )
    parser.add_argument("--section", default="sql", help="results.json section to write")
    parser.add_argument("--peak-of", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--parquet", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_of:  # a child of peak_of: one call, then the peak in GiB
        keys = [f"city{i:03d}" for i in range(args.cities)]
        contenders(args.parquet, keys)[args.peak_of]()
        print(high_water_gib())
        return

    users = args.users or max(1, args.rows // 20)
    run = Run(
        args.section,
        "python benchmarks/bench_sql.py " + " ".join(sys.argv[1:]),
        harness={"rounds": args.rounds, "warmup": args.warmup, "clock": "cpu and wall"},
    )
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        path = Path(scratch) / "visits.parquet"
        write_parquet(path, args.rows, users, args.cities)
        keys = [f"city{i:03d}" for i in range(args.cities)]
        calls = contenders(path, keys)
        if args.no_pushdown:
            del calls["dpkit_bounded_in_duckdb"]
        timed = measure(calls, rounds=args.rounds, warmup=args.warmup)
        peaks = {label: peak_of(label, path, keys) for label in calls}
        if args.peer_rows:
            path.unlink()
            write_parquet(path, args.peer_rows, max(1, args.peer_rows // 20), args.cities)
            peers = smartnoise_rows(path, keys, args.rounds, args.warmup)
    rows = []
    for mine in [label for label in ("dpkit", "dpkit_bounded_in_duckdb") if label in calls]:
        for label in ("duckdb_group_by", "duckdb_truncation"):
            rows.append(
                {
                    "dpkit": mine,
                    "contender": label,
                    "dpkit_cpu_s": round(timed[mine].cpu, 2),
                    "contender_cpu_s": round(timed[label].cpu, 2),
                    "ratio_cpu": round(ratio(timed[mine], timed[label], "cpu"), 2),
                    "ratio_wall": round(ratio(timed[mine], timed[label], "wall"), 2),
                }
            )
    if args.peer_rows:
        rows += peers
    for row in rows:
        print(
            f"{row['dpkit']:23s} / {row['contender']:18s}: CPU {row['ratio_cpu']:.2f}x, wall "
            f"{row['ratio_wall']:.2f}x  ({row['dpkit_cpu_s']} s CPU vs {row['contender_cpu_s']} s)"
        )
    memory = ", ".join(f"{label} {gib:.2f} GiB" for label, gib in peaks.items())
    print(f"rows {args.rows:,}, users {users:,}, cities {args.cities}; peak RSS alone: {memory}")
    if not args.no_save:
        run.save(
            title=f"SQL: grouped id-level count + sum + mean over {args.rows:,} Parquet rows",
            columns=[
                "dpkit",
                "contender",
                "dpkit_cpu_s",
                "contender_cpu_s",
                "ratio_cpu",
                "ratio_wall",
            ],
            rows=rows,
            notes=[
                f"peak resident memory, each alone in a fresh process: {memory}",
                "dpkit bounds each person's rows once for the statement's three aggregates "
                "(in numpy after DuckDB's per-record steps, or in DuckDB), as the truncation "
                "floor does in DuckDB",
            ],
        )


if __name__ == "__main__":
    main()

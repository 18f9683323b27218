"""Worker of bench_sql.py: SmartNoise SQL's answer to the benchmark's statement, on the same
Parquet file.

Run by ``bench_sql.py --peer-rows N`` with a Python that has SmartNoise SQL installed (not a
dpkit dependency; it pins its own OpenDP): ``python benchmarks/peers/make_venvs.py sql`` makes
one (``peers/requirements-sql.txt``), which bench_sql finds by itself.

The statement: per city, a noisy count, sum and mean of ``minutes`` clamped to [0, 120],
ε = 1, δ = 10⁻⁶, through SmartNoise's pandas reader (``snsql.from_df``: its own rewriting of
the statement, then the rewritten query run on the DataFrame). SmartNoise bounds a person by
``max_ids``, rows per person over all groups, not by groups and rows per group: 10 here, the
most dpkit's 2 cities × 5 rows lets a person keep, so the count's sensitivity is the same.
Timed by ``_timing.measure`` (the harness of every contender), reading the file included;
prints JSON: the version and CPU and wall seconds per round, or the error.
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version
from typing import Any

from _timing import measure

STATEMENT = (
    "SELECT city, COUNT(*) AS visits, SUM(minutes) AS total, AVG(minutes) AS mean "
    "FROM visits.visits GROUP BY city"
)
METADATA = {
    "": {
        "visits": {
            "visits": {
                "max_ids": 10,
                "row_privacy": False,
                "sample_max_ids": True,
                "censor_dims": False,
                "user": {"name": "user", "type": "int", "private_id": True},
                "city": {"name": "city", "type": "string"},
                "minutes": {"name": "minutes", "type": "float", "lower": 0.0, "upper": 120.0},
            }
        }
    }
}


def smartnoise(path: str) -> list[Any]:
    import pandas as pd
    import snsql

    frame = pd.read_parquet(path, columns=["user", "city", "minutes"])
    reader = snsql.from_df(frame, privacy=snsql.Privacy(epsilon=1.0, delta=1e-6), metadata=METADATA)
    rows: list[Any] = reader.execute(STATEMENT)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0)
    args = parser.parse_args()
    try:
        timed = measure(
            {"smartnoise": lambda: smartnoise(args.path)}, rounds=args.rounds, warmup=args.warmup
        )["smartnoise"]
        out: dict[str, Any] = {
            "version": version("smartnoise-sql"),
            "cpu": timed.cpu_rounds,
            "wall": timed.wall_rounds,
        }
    except Exception as error:  # report it: the benchmark prints it and goes on
        out = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

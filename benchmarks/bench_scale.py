"""Scale-out: a grouped id-level sum on Dask, and local-DP reports aggregated from Parquet.

Run: ``python benchmarks/bench_scale.py`` (``--rows``, ``--reports``, ``--rounds``, ``--data``,
``--no-save``). Needs the ``cluster`` extra. Starts a ``distributed`` LocalCluster of 2 worker
processes (one thread each) and times, with the shared harness (:func:`_timing.measure`:
warm-up, rotated rounds, medians of per-round ratios):

1. **Table**: ``Sum(...).on("minutes", by="city", keys=50 cities, unit=IdUnit(...))`` released
   by a session on a Dask DataFrame of ``--rows`` rows (generated and persisted on the workers,
   every person's rows spread over every partition), against the same *non-private* aggregate
   in plain Dask three ways: a group-by sum; the same shuffle by id first (the data movement
   that id-level bounding needs, without the bounding); and the shuffle by id plus the same
   contribution bounding as a user would write it in pandas without privacy (per partition: a
   random permutation, ``groupby([id, group]).head(max_rows)``, the first ``max_groups``
   groups of each id, then the group-by sum; :func:`_truncated`) — the honest floor, the
   same work without the privacy. And pandas on one core (the table collected once; not
   timed; ``--no-pandas`` skips it). Peak resident memory of each worker is sampled every
   0.1 s during each contender's calls.
2. **Local-DP reports**: ``--reports`` krr reports (k = 16, one byte each) written as Parquet
   files *outside the repository* (``--data``, default a temporary directory; each file
   written by a worker), aggregated by ``dpkit.accumulate`` on Dask (one task per file part),
   against plain Dask's ``value_counts`` of the column, and by ``dpkit.ParquetReports`` in a
   fresh process without Dask (its peak RSS is the bounded-memory figure).

The driver's CPU clock does not see the workers' work, so the Dask figures are *wall* times and
wall ratios (per round, medians). On a shared machine they are noisy: re-measure on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _results import Run
from _timing import measure, ratio

import dpkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from engine_servers import start_dask

CITIES = [f"c{i:02d}" for i in range(50)]
PARTS = 16  # table partitions (two workers: 8 each)
ROWS_PER_PERSON = 10  # on average; max_rows = 3, so bounding drops most rows
REPORT_FILES = 16


def _table_part(seed: int, rows: int, people: int) -> Any:
    """One partition of the table, made on a worker: people drawn uniformly from all of them,
    so every person's rows are spread over every partition."""
    import pandas as pd

    rng = np.random.default_rng([2026, seed])
    return pd.DataFrame(
        {
            "user": rng.integers(0, people, rows),
            "city": pd.array(np.array(CITIES)[rng.integers(0, len(CITIES), rows)], dtype="string"),
            "minutes": rng.gamma(2.0, 12.0, rows),
        }
    )


def _truncated(part: Any, max_rows: int, max_groups: int) -> Any:
    """The rows of a partition (all the rows of its ids) bounded as a user would in pandas,
    without privacy: rows in a random order, the first ``max_rows`` of each (id, city), the
    first ``max_groups`` cities of each id."""
    shuffled = part.iloc[np.random.default_rng().permutation(len(part))]
    rows = shuffled.groupby(["user", "city"], sort=False).head(max_rows)
    pairs = rows.loc[~rows.duplicated(["user", "city"]), ["user", "city"]]
    chosen = pairs[pairs.groupby("user", sort=False).cumcount() < max_groups]
    return rows.merge(chosen, on=["user", "city"])


def _report_file(path: str, seed: int, count: int) -> int:
    """One Parquet file of krr reports, written by a worker (in row groups of 2²⁰)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    rng = np.random.default_rng([19, seed])
    with pq.ParquetWriter(path, pa.schema([("report", pa.uint8())])) as writer:
        for start in range(0, count, 1 << 22):
            n = min(1 << 22, count - start)
            reports = krr.randomize(rng.integers(0, 16, n), rng=rng).astype(np.uint8)
            writer.write_table(pa.table({"report": reports}), row_group_size=1 << 20)
    return count


class PeakMemory:
    """The largest resident set of each worker process, sampled every 0.1 s while active."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            for worker, rss in self.client.run(_rss).items():
                self.peak[worker] = max(self.peak.get(worker, 0), rss)
            self._stop.wait(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()

    def mib(self) -> str:
        return "/".join(f"{v / 2**20:.0f}" for _, v in sorted(self.peak.items()))


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _peaks(client: Any, contenders: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Each contender's peak worker memory over one call (MiB per worker)."""
    found = {}
    for label, fn in contenders.items():
        with PeakMemory(client) as peak:
            fn()
        found[label] = peak.mib()
    return found


def table_benchmark(
    client: Any, rows: int, rounds: int, warmup: int, pandas: bool
) -> tuple[list[dict[str, Any]], str]:
    import dask.dataframe as dd
    import pandas as pd
    from dpkit_central import Sum

    per_part = rows // PARTS
    people = max(1, rows // ROWS_PER_PERSON)
    meta = _table_part(0, 0, 1)
    frame = dd.from_map(_table_part, range(PARTS), rows=per_part, people=people, meta=meta)
    frame = frame.persist()
    from distributed import wait

    wait(frame)
    unit = dpkit.IdUnit("user", max_rows=3, max_groups=2)
    query = Sum(lower=0, upper=100, epsilon=1.0).on("minutes", by="city", keys=CITIES, unit=unit)
    session = dpkit.Session(budget=(1e9, 0.0), ledger=":memory:")

    def plain_dask() -> Any:
        return frame.groupby("city")["minutes"].sum().compute()

    def dask_shuffled() -> Any:
        return frame.shuffle(on="user").groupby("city")["minutes"].sum().compute()

    def dask_truncated() -> Any:
        bounded = frame.shuffle(on="user").map_partitions(
            _truncated, unit.max_rows, unit.max_groups, meta=meta
        )
        return bounded.groupby("city")["minutes"].sum().compute()

    contenders: dict[str, Callable[[], object]] = {
        "dpkit on Dask (id-level sum, secure)": lambda: session.release(query, frame),
        "plain Dask group-by sum": plain_dask,
        "plain Dask, shuffle by id, then group-by sum": dask_shuffled,
        TRUNCATED: dask_truncated,
    }
    timed = measure(contenders, rounds=rounds, warmup=warmup)
    peaks = _peaks(client, contenders)
    floor, bounded = timed["plain Dask group-by sum"], timed[TRUNCATED]
    rows_out = [
        {
            "task": f"grouped sum, {rows:.0e} rows",
            "contender": label,
            "wall s": round(timing.wall, 3),
            "÷ plain Dask (wall)": round(ratio(timing, floor, "wall"), 2),
            "÷ shuffle + truncation (wall)": round(ratio(timing, bounded, "wall"), 2),
            "peak MiB per worker": peaks[label],
        }
        for label, timing in timed.items()
    ]
    if pandas:
        local: pd.DataFrame = frame.compute()
        local["city"] = local["city"].astype(object)  # pandas' usual text column on one core
        on_pandas = {
            "dpkit on pandas, one core": lambda: session.release(query, local),
            "plain pandas group-by sum, one core": lambda: local.groupby("city")["minutes"].sum(),
        }
        # Other rounds than the Dask ones: ratios of medians, not medians of ratios.
        for label, timing in measure(on_pandas, rounds=rounds, warmup=warmup).items():
            rows_out.append(
                {
                    "task": f"grouped sum, {rows:.0e} rows",
                    "contender": label,
                    "wall s": round(timing.wall, 3),
                    "÷ plain Dask (wall)": round(timing.wall / floor.wall, 2),
                    "÷ shuffle + truncation (wall)": round(timing.wall / bounded.wall, 2),
                    "peak MiB per worker": "",
                }
            )
    note = (
        f"{rows:.1e} rows in {PARTS} partitions, {people} people (≈{ROWS_PER_PERSON} rows each, "
        "every person in every partition), 50 cities; IdUnit(max_rows=3, max_groups=2)"
    )
    return rows_out, note


def _one_process(directory: Path) -> dict[str, float]:
    """ParquetReports without Dask, in a fresh process: wall seconds and peak RSS (the
    process's own high-water mark, VmHWM: ``ru_maxrss`` would keep the forking parent's)."""
    code = (
        "import json, sys, time\n"
        "import dpkit\n"
        "krr = dpkit.mechanism('krr', epsilon=1.0, k=16)\n"
        "start = time.perf_counter()\n"
        "s = dpkit.accumulate(krr, dpkit.ParquetReports(sys.argv[1], 'report'))\n"
        "wall = time.perf_counter() - start\n"
        "status = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
        "print(json.dumps({'n': int(s.n), 'wall': wall, 'peak_mib': int(status) / 1024}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(directory)], check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def reports_benchmark(
    client: Any, reports: int, rounds: int, data: Path
) -> tuple[list[dict[str, Any]], str]:
    import dask.dataframe as dd
    from dask import delayed

    directory = data / f"krr-{reports}"
    if not directory.exists():  # generated once, on the workers
        tmp = data / f"partial-{reports}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        per_file = -(-reports // REPORT_FILES)
        counts = [min(per_file, reports - i * per_file) for i in range(REPORT_FILES)]
        tasks = [
            delayed(_report_file)(str(tmp / f"part-{i:03d}.parquet"), i, c)
            for i, c in enumerate(counts)
            if c > 0
        ]
        started = time.perf_counter()
        assert sum(client.compute(tasks, sync=True)) == reports
        print(f"wrote {reports:.1e} reports in {time.perf_counter() - started:.0f} s")
        tmp.rename(directory)
    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    size = sum(p.stat().st_size for p in directory.glob("*.parquet"))

    def column() -> Any:
        return dd.read_parquet(directory, columns=["report"])["report"]

    contenders: dict[str, Callable[[], object]] = {
        "dpkit.accumulate on Dask": lambda: dpkit.accumulate(krr, column()),
        "plain Dask value_counts": lambda: column().value_counts().compute(),
    }
    timed = measure(contenders, rounds=rounds, warmup=0)
    peaks = _peaks(client, contenders)
    floor = timed["plain Dask value_counts"]
    found = dpkit.accumulate(krr, column())
    assert found.n == reports
    rows_out = [
        {
            "task": f"krr reports, {reports:.0e}",
            "contender": label,
            "wall s": round(t.wall, 2),
            "÷ plain Dask (wall)": round(ratio(t, floor, "wall"), 2),
            "peak MiB per worker": peaks[label],
        }
        for label, t in timed.items()
    ]
    alone = _one_process(directory)
    assert alone["n"] == reports
    rows_out.append(
        {
            "task": f"krr reports, {reports:.0e}",
            "contender": "dpkit.ParquetReports, one process, no Dask",
            "wall s": round(alone["wall"], 2),
            "÷ plain Dask (wall)": round(alone["wall"] / floor.wall, 2),
            "peak MiB per worker": f"{alone['peak_mib']:.0f} (the process)",
        }
    )
    note = (
        f"{reports:.1e} reports in {REPORT_FILES} Parquet files ({size / 2**20:.0f} MiB, uint8, "
        "row groups of 2²⁰), read with the column projection"
    )
    return rows_out, note


def _print(rows: list[dict[str, Any]], notes: list[str]) -> None:
    for row in rows:
        print(
            f"{row['task']:<26} {row['contender']:<58} {row['wall s']:>8} s "
            f"{row['÷ plain Dask (wall)']:>6}x {row.get('÷ shuffle + truncation (wall)', ''):>6}x"
            f"  {row['peak MiB per worker']}"
        )
    print(*notes, sep="\n")


TRUNCATED = "plain Dask, shuffle by id, the same truncation in pandas, group-by sum"
COLUMNS = ["task", "contender", "wall s", "÷ plain Dask (wall)", "peak MiB per worker"]
TABLE_COLUMNS = [*COLUMNS[:4], "÷ shuffle + truncation (wall)", COLUMNS[4]]
DASK_NOTE = (
    "Dask: a LocalCluster of 2 worker processes, 1 thread each; wall times (the driver's CPU "
    "clock does not see the workers), medians of per-round wall ratios to plain Dask; peak MiB "
    "per worker: resident memory sampled every 0.1 s"
)
TABLE_NOTE = (
    "; ÷ shuffle + truncation: to the same shuffle by id and contribution bounding written in "
    "pandas without privacy (random order, groupby([id, city]).head(R), first G cities per id), "
    "the floor the issue's 1.5× goal is measured against"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=float, default=1e7, help="table rows (issue: 1e8)")
    parser.add_argument("--reports", type=float, default=1e8, help="LDP reports (issue: 1e9)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls (table part)")
    parser.add_argument("--no-pandas", action="store_true", help="skip pandas on one core")
    parser.add_argument("--memory-limit", default="8GiB", help="per worker")
    parser.add_argument("--part", choices=["table", "reports", "all"], default="all")
    parser.add_argument("--data", type=Path, default=None, help="Parquet directory (kept)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    rows, reports = int(args.rows), int(args.reports)
    command = " ".join(["python benchmarks/bench_scale.py", *sys.argv[1:]])
    harness = {"rounds": args.rounds, "workers": 2, "threads": 1}
    cluster, client = start_dask(workers=2, memory_limit=args.memory_limit)
    data = args.data or Path(tempfile.mkdtemp(prefix="dpkit-scale-"))
    try:
        if args.part in ("table", "all"):
            found, note = table_benchmark(
                client, rows, args.rounds, args.warmup, not args.no_pandas
            )
            driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            notes = [note, DASK_NOTE + TABLE_NOTE, f"driver peak {driver:.0f} MiB"]
            _print(found, notes)
            if not args.no_save:
                Run("scale_table", command, harness=harness).save(
                    title="A grouped id-level sum on Dask",
                    columns=TABLE_COLUMNS,
                    rows=found,
                    notes=notes,
                )
        if args.part in ("reports", "all"):
            found, note = reports_benchmark(client, reports, args.rounds, data)
            notes = [note, DASK_NOTE]
            _print(found, notes)
            if not args.no_save:
                Run("scale_reports", command, harness=harness).save(
                    title="Local-DP reports from Parquet", columns=COLUMNS, rows=found, notes=notes
                )
    finally:
        client.close()
        cluster.close()
        if args.data is None:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()

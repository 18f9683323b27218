"""Worker of bench_queries.py: the peers' grouped, id-level queries on the same CSV file.

Run by ``bench_queries.py`` with a Python that has the peers installed (they are not dpkit
dependencies; OpenDP pins its own Polars): ``python benchmarks/peers/make_venvs.py queries``
makes one (``peers/requirements-queries.txt``), which bench_queries finds by itself; or give
``--peers-python PY``.

Both compute, per city (8 public keys), a noisy count and a noisy sum of ``minutes`` clamped to
[0, 120], each person bounded to 2 cities and 5 rows per city, ε = 1 in all. Each is timed by ``_timing.measure`` (the harness of every contender: ``--warmup``
untimed calls, ``--rounds`` timed ones, process CPU and wall clock, reading the file included);
the worker prints JSON: per peer its version and CPU and wall seconds per round, or its error.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from importlib.metadata import version
from typing import Any

from _timing import measure

CITIES = ["Lyon", "Paris", "Lille", "Nantes", "Rennes", "Nice", "Brest", "Metz"]


def opendp_polars(path: str) -> None:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    frame = pl.read_csv(
        path,
        columns=["user", "city", "minutes"],
        schema_overrides={"minutes": pl.Float64},
        null_values=["", "nan", "NaN"],
    ).lazy()
    context = dp.Context.compositor(
        data=frame,
        privacy_unit=dp.unit_of(
            contributions=[
                dp.polars.Bound(per_group=5),
                dp.polars.Bound(by=["city"], num_groups=2),
            ],
            identifier="user",
        ),
        privacy_loss=dp.loss_of(epsilon=1.0),
        split_evenly_over=1,
        margins=[dp.polars.Margin(by=["city"], max_length=10**8, max_groups=8)],
    )
    # OpenDP 0.16 truncates rows per group; its truncate_num_groups combined with public keys
    # (with_keys) fails here with a "duplicate field" error, so the 2-cities bound is declared
    # in the privacy unit and not enforced: a little less work than dpkit and PipelineDP do.
    query = (
        context.query()
        .truncate_per_group(5, by=["city"])
        .group_by("city")
        .agg(
            dp.len(signed=True),
            pl.col("minutes").fill_nan(0.0).fill_null(0.0).dp.sum((0.0, 120.0)),  # type: ignore[attr-defined]
        )
        .with_keys(pl.LazyFrame({"city": CITIES}))
    )
    query.release().collect()


def pipeline_dp(path: str) -> None:
    import pandas as pd
    import pipeline_dp as pdp

    frame = pd.read_csv(path, usecols=["user", "city", "minutes"]).fillna({"minutes": 0.0})
    rows = list(frame.itertuples(index=False, name=None))
    accountant = pdp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pdp.DPEngine(accountant, pdp.LocalBackend())
    params = pdp.AggregateParams(
        metrics=[pdp.Metrics.COUNT, pdp.Metrics.SUM],
        max_partitions_contributed=2,
        max_contributions_per_partition=5,
        min_value=0.0,
        max_value=120.0,
        noise_kind=pdp.NoiseKind.LAPLACE,
    )
    extractors = pdp.DataExtractors(
        privacy_id_extractor=lambda row: row[0],
        partition_extractor=lambda row: row[1],
        value_extractor=lambda row: row[2],
    )
    result = engine.aggregate(rows, params, extractors, public_partitions=CITIES)
    accountant.compute_budgets()
    list(result)


PEERS = {
    "OpenDP-Polars": (opendp_polars, "opendp"),
    "PipelineDP (local)": (pipeline_dp, "pipeline-dp"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for name, (fn, dist) in PEERS.items():
        try:
            timed = measure({name: partial(fn, args.path)}, rounds=args.rounds, warmup=args.warmup)
        except Exception as error:  # report, do not stop the other peer
            out[name] = {"error": f"{type(error).__name__}: {str(error)[:160]}"}
            continue
        rounds = timed[name]
        out[name] = {"version": version(dist), "cpu": rounds.cpu_rounds, "wall": rounds.wall_rounds}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

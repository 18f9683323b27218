"""Local-DP reports aggregated on a Dask LocalCluster (2 worker processes), partition by
partition: the statistics equal the in-memory ones exactly (counts and histograms whatever the
partitioning; a mean's float sums equal the same chunks accumulated in order), from Dask
arrays — including reports generated on the workers, which the driver never holds — and from
Parquet files read by Dask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit

pytestmark = pytest.mark.cluster

N = 60_000
CHUNKS = (9_000, 20_000, 1, 15_999, 15_000)  # uneven, one of a single report


def _reports(name: str, params: dict[str, Any], values: Any) -> tuple[Any, np.ndarray]:
    mechanism = dpkit.mechanism(name, **params)
    return mechanism, mechanism.randomize(values, rng=np.random.default_rng(11))


def _cases() -> dict[str, tuple[Any, np.ndarray]]:
    rng = np.random.default_rng(5)
    labels = np.array(["bus", "car", "walk"], dtype=object)[rng.integers(0, 3, N)]
    return {
        "krr (labels)": _reports(
            "krr", {"epsilon": 1.0, "categories": ["bus", "car", "walk"]}, labels
        ),
        "rr": _reports("rr", {"epsilon": 1.0}, rng.integers(0, 2, N)),
        "oue (packed bits, k = 64)": _reports(
            "oue", {"epsilon": 1.0, "k": 64}, rng.integers(0, 64, N)
        ),
        "olh": _reports("olh", {"epsilon": 2.0, "k": 32}, rng.integers(0, 32, N)),
        "sw (histogram)": _reports("sw", {"epsilon": 1.0}, rng.uniform(0, 1, N)),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_dask_array_statistics_equal_the_in_memory_ones_exactly(
    dask_client: Any, name: str
) -> None:
    import dask.array as da

    mechanism, reports = _cases()[name]
    chunks: tuple[Any, ...] = (CHUNKS, *((reports.shape[1] // 2 or 1,) if reports.ndim > 1 else ()))
    array = da.from_array(reports, chunks=chunks)
    assert array.numblocks[0] == len(CHUNKS)
    found = dpkit.accumulate(mechanism, array)
    expected = dpkit.accumulate(mechanism, reports)
    assert type(found) is type(expected) and found.n == expected.n == N
    assert np.array_equal(found.counts, expected.counts)
    assert np.array_equal(
        dpkit.estimate(mechanism, array).estimates, dpkit.estimate(mechanism, reports).estimates
    )


def test_mean_sums_equal_the_same_chunks_accumulated_in_order(dask_client: Any) -> None:
    import dask.array as da

    mechanism, reports = _reports(
        "pm", {"epsilon": 1.0}, np.random.default_rng(2).uniform(-1, 1, N)
    )
    found = dpkit.accumulate(mechanism, da.from_array(reports, chunks=(CHUNKS,)))
    in_order = dpkit.accumulate(mechanism, iter(np.split(reports, np.cumsum(CHUNKS)[:-1])))
    assert found.n == N
    assert np.array_equal(found.sums, in_order.sums) and np.array_equal(
        found.squares, in_order.squares
    )
    once = dpkit.accumulate(mechanism, reports)  # one pass: the same up to reassociation
    assert np.allclose(found.sums, once.sums, rtol=1e-12, atol=1e-9)


def _block(block_id: tuple[int, ...] = (0,)) -> np.ndarray:
    """Block i of a krr deployment (k = 16), made on whichever process runs it."""
    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    rng = np.random.default_rng([7, block_id[0]])
    return krr.randomize(rng.integers(0, 16, 50_000), rng=rng)


def test_reports_made_on_the_workers_are_counted_there(dask_client: Any) -> None:
    """The reports exist only on the workers (each block generated there); the driver gets one
    FrequencyCounts per block, and their sum equals the counts of the same blocks made here."""
    import dask.array as da

    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    blocks = 6
    array = da.map_blocks(
        lambda block_id=None: _block(block_id),
        dtype=np.int64,
        chunks=((50_000,) * blocks,),
        meta=np.zeros(0, dtype=np.int64),
    )
    found = dpkit.accumulate(krr, array)
    expected = dpkit.accumulate(krr, np.concatenate([_block((i,)) for i in range(blocks)]))
    assert found.n == 300_000 and np.array_equal(found.counts, expected.counts)


def test_parquet_files_read_by_dask(dask_client: Any, tmp_path: Path) -> None:
    import dask.dataframe as dd

    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    reports = krr.randomize(
        np.random.default_rng(4).integers(0, 16, N), rng=np.random.default_rng(4)
    )
    for i, part in enumerate(np.array_split(reports, 4)):
        pq.write_table(
            pa.table({"report": part}), tmp_path / f"day-{i}.parquet", row_group_size=5_000
        )
    column = dd.read_parquet(tmp_path, columns=["report"])["report"]
    found = dpkit.accumulate(krr, column)
    assert found.n == N and np.array_equal(found.counts, dpkit.accumulate(krr, reports).counts)
    frame = dd.read_parquet(tmp_path, columns=["report"])  # one column: a 2-D block per part
    assert np.array_equal(
        dpkit.accumulate(krr, frame["report"].to_dask_array()).counts, found.counts
    )

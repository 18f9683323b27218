"""Reports in parts without an engine: Parquet files batch by batch (bounded memory), chunk
iterators, and the public checks of a Parquet source (footers only, typed errors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit

N = 50_000


def _write(directory: Path, reports: np.ndarray, files: int = 3) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(np.array_split(reports, files)):
        pq.write_table(
            pa.table({"report": part, "other": np.zeros(part.shape[0])}),
            directory / f"{i:02d}.parquet",
        )


@pytest.mark.parametrize(
    ("name", "params", "values"),
    [
        (
            "krr",
            {"epsilon": 1.0, "categories": ["a", "b", "c"]},
            np.array(["a", "b", "c"], dtype=object),
        ),
        ("hr", {"epsilon": 1.0, "k": 16}, np.arange(16)),
        ("sw", {"epsilon": 2.0}, np.linspace(0, 1, 7)),
    ],
)
def test_parquet_batches_give_the_in_memory_statistics(
    tmp_path: Path, name: str, params: dict, values: np.ndarray
) -> None:
    mechanism = dpkit.mechanism(name, **params)
    rng = np.random.default_rng(3)
    reports = mechanism.randomize(values[rng.integers(0, values.size, N)], rng=rng)
    _write(tmp_path / "reports", reports)
    source = dpkit.ParquetReports(tmp_path / "reports", "report", batch_rows=4_321)
    assert len(list(source.chunks())) == 3 * 4  # ⌈16,667/4,321⌉ batches per file
    found, expected = dpkit.accumulate(mechanism, source), dpkit.accumulate(mechanism, reports)
    assert found.n == N and np.array_equal(found.counts, expected.counts)
    assert np.array_equal(
        dpkit.estimate(mechanism, source).estimates, dpkit.estimate(mechanism, reports).estimates
    )


def test_mean_sums_from_chunks_are_the_chunks_merged_in_order(tmp_path: Path) -> None:
    pm = dpkit.mechanism("pm", epsilon=1.0)
    reports = pm.randomize(np.random.default_rng(1).uniform(-1, 1, N), rng=np.random.default_rng(1))
    _write(tmp_path, reports, files=1)
    parts = [
        dpkit.accumulate(pm, c) for c in np.array_split(reports, [10_000, 20_000, 30_000, 40_000])
    ]
    merged = parts[0] + parts[1] + parts[2] + parts[3] + parts[4]
    found = dpkit.accumulate(
        pm, dpkit.ParquetReports(tmp_path / "00.parquet", "report", batch_rows=10_000)
    )
    assert np.array_equal(found.sums, merged.sums) and np.array_equal(found.squares, merged.squares)
    assert dpkit.estimate(pm, iter(np.array_split(reports, 5))).mean == pytest.approx(
        dpkit.estimate(pm, reports).mean, rel=1e-12
    )


def test_an_iterator_is_chunks_but_a_list_is_reports() -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    reports = rr.randomize(
        np.random.default_rng(2).integers(0, 2, 1000), rng=np.random.default_rng(2)
    )
    chunks = (reports[i : i + 100] for i in range(0, 1000, 100))
    assert np.array_equal(
        dpkit.accumulate(rr, chunks).counts, dpkit.accumulate(rr, list(reports)).counts
    )
    assert dpkit.accumulate(rr, iter([])).n == 0
    counts = dpkit.accumulate(rr, reports)
    assert dpkit.accumulate(rr, counts) is counts


def test_a_parquet_source_is_checked_from_its_footers(tmp_path: Path) -> None:
    _write(tmp_path / "ok", np.arange(10))
    with pytest.raises(dpkit.InvalidData, match="no Parquet file or directory"):
        dpkit.ParquetReports(tmp_path / "missing", "report").check()
    with pytest.raises(
        dpkit.InvalidData, match=r"the column 'answer' is not in .* \(2 column\(s\)\)"
    ):
        dpkit.ParquetReports(tmp_path / "ok", "answer").check()
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(dpkit.InvalidData, match="is not a Parquet file"):
        dpkit.ParquetReports(tmp_path / "bad.parquet", "report").check()
    with pytest.raises(dpkit.InvalidParameter, match="batch_rows"):
        dpkit.ParquetReports(tmp_path / "ok", "report", batch_rows=0)
    with pytest.raises(dpkit.InvalidParameter, match="column"):
        dpkit.ParquetReports(tmp_path / "ok", "")


def test_a_damaged_data_page_is_a_typed_error_when_read(tmp_path: Path) -> None:
    """check() reads the footer only, so a file whose data are damaged passes it; reading the
    reports then stops with InvalidData naming the file, not PyArrow's error."""
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"report": np.arange(100_000)}), path, compression="snappy")
    raw = bytearray(path.read_bytes())
    raw[200:40_000] = b"\xff" * (40_000 - 200)
    path.write_bytes(bytes(raw))
    source = dpkit.ParquetReports(path, "report")
    assert source.check() == [path]
    krr = dpkit.mechanism("krr", epsilon=1.0, k=100_000)
    with pytest.raises(dpkit.InvalidData, match="cannot read the reports of"):
        dpkit.accumulate(krr, source)

"""Local-DP reports partition by partition: Dask collections, Parquet files, chunk iterators.

An estimator reduces reports to mergeable sufficient statistics (:class:`~dpkit.plugin.Statistics`:
:class:`~dpkit.plugin.FrequencyCounts`, :class:`~dpkit.plugin.MeanSums`, :class:`~dpkit.plugin.ReportHistogram`),
which add up. :func:`accumulate` uses that to aggregate reports that never sit in one
process's memory:

* a **Dask** array, Series or DataFrame: each partition (each block of rows) is reduced to its
  statistics by a task on the cluster's workers, next to the data; only the statistics — a few
  counts per partition — travel to the driver, which adds them up in partition order;
* a :class:`ParquetReports` source: a Parquet file (or a directory of them) read one record
  batch at a time, without Dask, in memory bounded by the batch;
* any iterator of chunks (a generator of arrays): one chunk at a time.

Integer statistics (every frequency oracle's counts, a distribution protocol's histogram) are
exact, so the result is *identical* to accumulating all the reports at once, however they are
partitioned. A mean protocol's :class:`~dpkit.plugin.MeanSums` are float sums: partitioned, they equal
the same partitions accumulated one after the other in order (the merge order is fixed), and
differ from a single pass only by floating-point reassociation (a relative error of the order
of 10⁻¹⁶ times the number of partitions).

Reports are the output of a local randomizer, already private: aggregating them reads no
private value, spends no budget, and a malformed report is refused with the estimator's own
:class:`~dpkit.errors.InvalidData`, as :func:`dpkit.estimate` does for an array.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData, InvalidParameter, MissingDependency
from dpkit.estimator import Estimator, Statistics
from dpkit.mechanism import Mechanism
from dpkit.params import Integer, parameter

__all__ = ["ParquetReports", "accumulate", "is_partitioned"]

#: Rows per record batch read from a Parquet file (a few MB of reports).
DEFAULT_BATCH_ROWS = 1 << 22


def _path(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise InvalidParameter("path", value, "a Parquet file or a directory of them")


def _column(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidParameter("column", value, "a column name", owner="ParquetReports")


@attrs.frozen
class ParquetReports:
    """Reports in one column of a Parquet file, or of every ``*.parquet`` file of a directory
    (in name order), read in record batches of ``batch_rows`` rows.

    :meth:`check` reads only the files' footers (their schemas); :meth:`chunks` yields one
    numpy array per batch, so memory stays bounded by a batch however many reports there are.
    """

    path: str | os.PathLike[str] = attrs.field(validator=_path)
    column: str = attrs.field(validator=_column)
    batch_rows: int = parameter(
        Integer(low=1, high=1 << 30), doc="rows per batch", default=DEFAULT_BATCH_ROWS
    )

    def files(self) -> list[Path]:
        """The Parquet files: the path itself, or a directory's ``*.parquet`` files sorted."""
        root = Path(self.path)
        if root.is_dir():
            return sorted(p for p in root.rglob("*.parquet") if p.is_file())
        if root.is_file():
            return [root]
        raise InvalidData(f"no Parquet file or directory at {str(root)!r}", field="path")

    def check(self) -> list[Path]:
        """The files, each with ``column`` in its schema (footers only; no report is read)."""
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise MissingDependency(
                "pyarrow", "tables", needed_by="Parquet reports", plural=True
            ) from None
        files = self.files()
        for file in files:
            try:
                names = pq.read_schema(file).names
            except Exception:
                raise InvalidData(f"{str(file)!r} is not a Parquet file", field="path") from None
            if self.column not in names:
                raise InvalidData(
                    f"the column {self.column!r} is not in {str(file)!r} ({len(names)} column(s))",
                    field="column",
                )
        return files

    def chunks(self) -> Iterator[NDArray[Any]]:
        """One array of reports per record batch, file after file."""
        import pyarrow.parquet as pq

        for file in self.check():
            try:
                with pq.ParquetFile(file) as handle:
                    batches = handle.iter_batches(batch_size=self.batch_rows, columns=[self.column])
                    for batch in batches:
                        yield _numpy(batch.column(0))
            except (OSError, ValueError) as error:  # PyArrow's ArrowInvalid is a ValueError
                raise InvalidData(
                    f"cannot read the reports of {str(file)!r}: {type(error).__name__}",
                    field="path",
                ) from None


def _numpy(array: Any) -> NDArray[Any]:
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return np.asarray(array.to_numpy(zero_copy_only=False))


def is_partitioned(reports: Any) -> bool:
    """Whether ``reports`` are given in parts (a Dask collection, a :class:`ParquetReports`,
    an iterator of chunks) rather than as one array."""
    return (
        isinstance(reports, ParquetReports)
        or _is_dask(reports)
        or (isinstance(reports, Iterator) and not isinstance(reports, (str, bytes)))
    )


def _is_dask(value: Any) -> bool:
    return type(value).__module__.split(".", 1)[0] == "dask" and hasattr(value, "to_delayed")


def _partition_statistics(estimator: Estimator, part: Any) -> Statistics:
    """One partition's statistics (runs on a worker): a pandas object or an array."""
    array = part.to_numpy() if hasattr(part, "to_numpy") else np.asarray(part)
    return estimator.accumulate(array)


def _dask_parts(reports: Any) -> list[Any]:
    """One delayed object per block of rows of a Dask collection."""
    if hasattr(reports, "rechunk"):  # an array: only the first axis may be split
        if reports.ndim > 1:
            reports = reports.rechunk({axis: -1 for axis in range(1, reports.ndim)})
        return list(np.asarray(reports.to_delayed(), dtype=object).reshape(-1))
    return list(reports.to_delayed())  # a Series or a DataFrame: its partitions


def _merged(estimator: Estimator, parts: Iterable[Statistics]) -> Statistics:
    parts = list(parts)
    if not parts:
        return estimator.accumulate(np.zeros(0, dtype=np.int64))
    return functools.reduce(operator.add, parts)


def accumulate(mechanism: Mechanism, reports: Any, /, *, registry: Any = None) -> Statistics:
    """The mergeable statistics of ``reports`` for ``mechanism``'s estimator.

    ``reports`` is an array (or anything its estimator accepts), a Dask array, Series or
    DataFrame (reduced partition by partition on the cluster: see the module docstring), a
    :class:`ParquetReports` source (batch by batch), an iterator of chunks, or
    :class:`~dpkit.plugin.Statistics` already (returned as they are). Pass the result to
    :func:`dpkit.estimate`, or add it to other statistics of the same mechanism.
    """
    from dpkit.registry import get_registry

    estimator = (registry or get_registry()).estimator(mechanism)
    if isinstance(reports, Statistics):
        return reports
    if isinstance(reports, ParquetReports):
        return _merged(estimator, (estimator.accumulate(c) for c in reports.chunks()))
    if _is_dask(reports):
        from dask.base import compute
        from dask.delayed import delayed

        tasks = [delayed(_partition_statistics)(estimator, p) for p in _dask_parts(reports)]
        return _merged(estimator, compute(*tasks))  # type: ignore[no-untyped-call]
    if isinstance(reports, Iterator):
        return _merged(estimator, (estimator.accumulate(np.asarray(c)) for c in reports))
    return estimator.accumulate(reports)

"""SQL inputs as DuckDB relations: Parquet and CSV files, Arrow, pandas and Polars tables,
and DuckDB relations themselves.

DuckDB is the engine a SQL query's row-level part runs in (its WHERE, the expressions inside
its aggregates and GROUP BY). Each input becomes a relation twice:

* in the **public phase**, with no rows (:func:`relation` with ``empty=True``): an empty frame
  of the input's column types, a Parquet file's schema from its footer, a CSV file's header
  line, a DuckDB relation limited to no rows. The row-level statement is bound and run on it,
  so a type error (``lower(amount)`` on a number) is refused before anything is spent;
* in the **private phase**, with its rows, after the spend.

Both must have the same column types, decided without reading a value: a pandas ``object``
column (whose type DuckDB would infer from its values) is read as text, each value by the
table queries' rule (:func:`_text`; a missing one as NULL), a total per-value map; a CSV
file's columns are all text (``TRY_CAST`` in the statement reads numbers), as its header
alone can tell, read by a reader that never fails on a row (:data:`_TOTAL_CSV`).
"""

from __future__ import annotations

import csv
import os
from typing import Any

from dpkit.errors import InvalidData, MissingDependency
from dpkit.tables.text import object_text

__all__ = ["connect", "describe", "invalid_parquet_text", "relation"]


def duckdb_module() -> Any:
    """The ``duckdb`` module, or :class:`~dpkit.errors.MissingDependency` naming the extra."""
    try:
        import duckdb
    except ImportError:
        raise MissingDependency("duckdb", "sql", needed_by="SQL queries") from None
    return duckdb


def connect() -> Any:
    """A private in-memory DuckDB connection (one per release: nothing outlives it)."""
    return duckdb_module().connect(":memory:")


def _text(value: Any) -> str | None:
    """One ``object`` value as text (None for a missing one), by the rule the table queries
    read an object column's ids, keys and labels with (:func:`~dpkit.tables.text.object_text`),
    so that a pandas table is the same people and groups in SQL as in Python (``b"1"`` is the
    id ``"1"``, as ``1`` and ``"1"`` are). Total; a text that UTF-8 cannot encode (a lone
    surrogate, as ``surrogateescape`` decodes bytes to) is missing too: DuckDB would refuse
    the column when it reads the rows, after the spend."""
    text = object_text(value)
    try:
        text = None if text is None else text.encode("utf-8").decode("utf-8")
    except UnicodeError:
        return None
    return text


def _valid_text(table: Any) -> Any:
    """A PyArrow table whose text columns hold valid UTF-8 only: a value that is not (which
    Arrow's format forbids, but nothing checks when an array is built from buffers or read
    from some Parquet writers' files) is missing — DuckDB's string functions and the
    conversion of the released keys to Python would fail on it after the spend. A per-value
    map; a column that validates is kept as it is."""
    import pyarrow as pa

    columns, changed = [], False
    for column in table.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            chunks = []
            for chunk in column.chunks:
                try:
                    chunk.validate(full=True)
                except Exception:
                    chunk = pa.array([_utf8(v) for v in _raw(chunk)], column.type)
                    changed = True
                chunks.append(chunk)
            column = pa.chunked_array(chunks, column.type)
        columns.append(column)
    return pa.table(columns, names=table.column_names) if changed else table


def _raw(chunk: Any) -> list[bytes | None]:
    """A text array's values as bytes (no UTF-8 check)."""
    import pyarrow as pa

    binary = pa.large_binary() if pa.types.is_large_string(chunk.type) else pa.binary()
    return list(chunk.view(binary).to_pylist())


def _utf8(value: bytes | None) -> str | None:
    try:
        return None if value is None else value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _plain_pandas(frame: Any) -> Any:
    """A pandas frame with its ``object`` columns as text (module docstring), and its text
    columns stored as Python strings read the same way (one may hold a lone surrogate)."""
    import pandas as pd

    objects = [
        c
        for c, t in frame.dtypes.items()
        if str(t) == "object"
        or (isinstance(t, pd.StringDtype) and t.storage == "python")  # any str: a surrogate
    ]
    if not objects:
        return frame
    out = frame.copy(deep=False)
    for column in objects:
        out[column] = pd.array([_text(v) for v in frame[column].to_numpy()], dtype="string")
    return out


def _csv_header(path: str) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            row = next(csv.reader(handle), None)
    except OSError as error:
        raise InvalidData(
            f"the CSV file {path!r} cannot be read ({error.strerror})", field="tables"
        ) from None
    if not row or len(set(row)) != len(row) or any(not name for name in row):
        raise InvalidData(
            f"the CSV file {path!r} needs a header line of distinct, non-empty column names",
            field="tables",
        )
    return row


#: DuckDB's CSV reader with these is total over the rows (what ``ignore_errors`` alone is
#: not: it still raises when it reads a row, after the spend): its parallel scanner refuses a
#: quoted line break with ``null_padding`` (a multi-line text field), and its strict mode
#: stops at a line ending of another kind than the first (``\r`` among ``\n``) or a
#: malformed quote.
_TOTAL_CSV = {"parallel": False, "strict_mode": False}


def invalid_parquet_text(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) is DuckDB's refusal of a Parquet file's
    text that is not valid UTF-8 — which its reader checks as it reads the rows, after the
    spend: the release is then made again with :func:`_checked_parquet`."""
    seen: BaseException | None = error
    while seen is not None:
        if "Invalid string encoding found in Parquet file" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _checked_parquet(con: Any, path: str, native: Any) -> Any:
    """A Parquet file whose text columns (dictionary-encoded ones too) are read as bytes
    (PyArrow's dataset, streamed and scanned again as often as DuckDB asks) and decoded in
    DuckDB, a value that is not valid UTF-8 missing (``TRY(decode(...))``), with every column
    of the type DuckDB's own reader gives it (``native``), so that the statement runs on the
    schema it was checked on."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    dataset = ds.dataset(path, format="parquet")
    text = {}
    for field in dataset.schema:
        kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # dictionaries too
            text[field.name] = pa.large_binary() if pa.types.is_large_string(kind) else pa.binary()
    schema = pa.schema([f.with_type(text.get(f.name, f.type)) for f in dataset.schema])
    found = con.from_arrow(ds.dataset(path, format="parquet", schema=schema))
    columns = [
        f"TRY(decode({_quoted(name)}))::{kind} AS {_quoted(name)}"
        if name in text
        else f"TRY_CAST({_quoted(name)} AS {kind}) AS {_quoted(name)}"
        for name, kind in zip(native.columns, native.types, strict=True)
    ]
    return found.query("__dpkit_file", f"SELECT {', '.join(columns)} FROM __dpkit_file")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _file(con: Any, path: str, empty: bool, checked: bool = False) -> Any:
    lower = path.lower()
    if not os.path.isfile(path):
        raise InvalidData(f"the table file {path!r} does not exist", field="tables")
    if lower.endswith(".parquet"):
        try:
            found = con.read_parquet(path)
        except Exception:
            raise InvalidData(
                f"the table file {path!r} is not a readable Parquet file", field="tables"
            ) from None
        if empty:
            return found.limit(0)
        return _checked_parquet(con, path, found) if checked else found
    if lower.endswith(".csv"):
        header = _csv_header(path)
        options: dict[str, Any] = {
            "header": True,
            "columns": {name: "VARCHAR" for name in header},
            "delimiter": ",",
            "quotechar": '"',
            "escapechar": '"',
            "auto_detect": False,
            "null_padding": True,
            "ignore_errors": True,
            **_TOTAL_CSV,
        }
        try:
            found = con.read_csv(path, **options)
        except Exception as error:  # a DuckDB without strict_mode (before 1.2): the option
            if "strict_mode" not in str(error):
                raise
            del options["strict_mode"]
            found = con.read_csv(path, **options)
        return found.limit(0) if empty else found
    raise InvalidData(f"the table file {path!r} must end in .parquet or .csv", field="tables")


def relation(con: Any, data: Any, *, name: str, empty: bool, checked: bool = False) -> Any:
    """``data`` as a relation of ``con`` (or of its own connection, for a DuckDB relation);
    with no rows when ``empty`` (module docstring). Anything else is
    :class:`~dpkit.errors.InvalidData` naming the table. ``checked``: a Parquet file's text
    read by :func:`_checked_parquet` (after :func:`invalid_parquet_text`)."""
    module = type(data).__module__.split(".", 1)[0]
    kind = type(data).__name__
    if isinstance(data, (str, os.PathLike)):
        return _file(con, os.fspath(data), empty, checked)
    if module == "duckdb" and kind == "DuckDBPyRelation":
        return data.limit(0) if empty else data
    if module == "pandas" and kind == "DataFrame":
        if len(set(data.columns)) != len(data.columns):
            raise InvalidData(f"the table {name!r} repeats a column name", field="tables")
        return con.from_df(_plain_pandas(data.head(0) if empty else data))
    if module == "polars" and kind in ("DataFrame", "LazyFrame"):
        if kind == "LazyFrame":
            import polars as pl

            data = pl.DataFrame(schema=data.collect_schema()) if empty else data.collect()
        return con.from_arrow((data.head(0) if empty else data).to_arrow())
    if module == "pyarrow" and kind in ("Table", "RecordBatch"):
        import pyarrow as pa

        from dpkit.tables.frame import plain_arrow

        table = plain_arrow(data)
        if empty:
            return con.from_arrow(table.schema.empty_table())
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        return con.from_arrow(_valid_text(table))
    raise InvalidData(
        f"the table {name!r} must be a Parquet or CSV file path, a pandas, Polars or PyArrow "
        f"table, or a DuckDB relation; got {kind}",
        field="tables",
    )


def describe(found: Any) -> dict[str, str]:
    """A relation's columns and their DuckDB types (binding only: no row is read)."""
    return {str(c): str(t) for c, t in zip(found.columns, found.types, strict=True)}

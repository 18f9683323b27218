"""Tables in: pandas, Polars, PyArrow (and lazy frames) through one dataframe-agnostic layer.

dpkit writes its table logic once, against `narwhals <https://narwhals-dev.github.io/>`_: the
same expressions run on pandas, Polars and PyArrow tables, and lazily on Polars LazyFrames,
DuckDB, Dask and PySpark. narwhals and pyarrow are the optional extra ``dpkit[tables]``;
they are imported only when a table is given (a numpy column never needs them).

This module holds the *public-phase* view of a table: whether an input is a table, which
columns it has and of what kind (:func:`column_kinds`, from the schema: never a value), and the
checks that refuse a table by its structure (:func:`require_columns`). Column names and dtypes
are public; values are not.
"""

from __future__ import annotations

from typing import Any, Literal

from dpkit.errors import InvalidData, MissingDependency
from dpkit.tables._quiet import quiet

__all__ = [
    "ColumnKind",
    "as_frame",
    "column_kinds",
    "implementation",
    "is_table",
    "narwhals",
    "require_columns",
]

#: The kind of a column, from its dtype alone: what a query may do with it.
ColumnKind = Literal["number", "boolean", "text", "object", "other"]

#: Top-level modules whose objects are tables narwhals can wrap (judged without importing
#: narwhals, so that numpy inputs never need the extra).
_TABLE_MODULES = frozenset({"pandas", "polars", "pyarrow", "dask", "pyspark", "duckdb", "modin"})


def narwhals() -> Any:
    """The ``narwhals`` module, or :class:`~dpkit.errors.MissingDependency` naming the extra."""
    try:
        import narwhals.stable.v2 as nw
    except ImportError:
        raise MissingDependency(
            "narwhals", "tables", needed_by="table inputs", plural=True
        ) from None
    return nw


def is_table(data: Any) -> bool:
    """Whether ``data`` is a dataframe (pandas, Polars, PyArrow, ... ; eager or lazy), by its
    type alone. A pandas Series or a numpy array is a column, not a table."""
    module = type(data).__module__.split(".", 1)[0]
    if module not in _TABLE_MODULES:
        return False
    name = type(data).__name__
    return name in {"DataFrame", "LazyFrame", "Table", "DuckDBPyRelation"}


#: Engines whose tables may repeat a column name, and how to read the names (metadata only:
#: a Dask or Spark frame's names come from its schema, not from running it; a DuckDB
#: relation's from its bound statement, as ``SELECT 1 AS v, 2 AS v`` repeats one). Polars
#: refuses repeated names itself.
_NAMES = {
    "duckdb": lambda data: list(data.columns),
    "pandas": lambda data: list(data.columns),
    "modin": lambda data: list(data.columns),
    "dask": lambda data: list(data.columns),
    "pyspark": lambda data: list(data.columns),
    "pyarrow": lambda data: list(data.schema.names),
}


def _refuse_repeated_names(data: Any, module: str, *, owner: str) -> None:
    """A table whose columns repeat a name is ambiguous (which ``a`` is the value column?):
    refused in the public phase, naming the name (column names are public)."""
    names = _NAMES.get(module)
    if names is None:
        return
    try:
        listed = names(data)
    except Exception:  # not a table of this engine after all: from_native says so
        return
    seen: set[Any] = set()
    for name in listed:
        if name in seen:
            raise InvalidData(
                f"{owner}: the table has {listed.count(name)} columns named {name!r}; "
                "column names must be unique",
                field="data",
            )
        seen.add(name)


def as_frame(data: Any, *, owner: str) -> Any:
    """``data`` as a narwhals DataFrame or LazyFrame (public phase: no value is read); a table
    with a repeated column name is :class:`~dpkit.errors.InvalidData` naming it."""
    nw = narwhals()
    module = type(data).__module__.split(".", 1)[0]
    _refuse_repeated_names(data, module, owner=owner)
    if module == "pyarrow":
        data = plain_arrow(data)
    elif module == "pandas":
        data = plain_pandas(data)
    elif module == "dask":
        data = _plain_dask(data)
    try:
        with quiet():  # two version warnings of narwhals and PySpark (not about the data)
            return nw.from_native(data)
    except TypeError:
        raise InvalidData(
            f"{owner}: data must be a table (pandas, Polars, PyArrow, ...), got "
            f"{type(data).__name__}",
            field="data",
        ) from None


def plain_arrow(table: Any) -> Any:
    """A PyArrow table with its *encoded* column types decoded, from its schema alone:
    dictionary → its value type, run-end encoded → its value type, ``string_view`` →
    ``large_string``, ``binary_view`` → ``large_binary`` (text and bytes values decoded as
    large types, whose 64-bit offsets no total size can overflow).

    An encoding is how a column is stored, not what it holds, yet engines treat encoded columns
    by their storage: a group-by over chunks that carry *different* dictionaries fails
    ("Unifying differing dictionaries") — only once a record adds a value to a later chunk, so
    a failure after the spend that one person decides — and view types fail where their plain
    types work. Decoding is a total, per-value map (no value is looked at, none can make it
    fail), so the query sees the same values on every engine. A table with no encoded column is
    returned as it is."""
    import pyarrow as pa

    if not isinstance(table, pa.Table):
        return table
    if all(_plain_type(kind) is None for kind in table.schema.types):
        return table
    columns = []
    for column in table.columns:
        plain = _plain_type(column.type)
        if plain is not None:
            column = pa.chunked_array([_decoded(chunk, plain) for chunk in column.chunks], plain)
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def _plain_type(kind: Any) -> Any:
    """The decoded type of an encoded Arrow type (text and bytes as their large types), None
    for a type that is not encoded."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind) or pa.types.is_run_end_encoded(kind):
        inner = kind.value_type
        plain = _plain_type(inner) or inner
        if pa.types.is_string(plain):
            return pa.large_string()
        return pa.large_binary() if pa.types.is_binary(plain) else plain
    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    return None


def _decoded(chunk: Any, plain: Any) -> Any:
    """One chunk of an encoded column as an array of ``plain`` (:func:`_plain_type`): runs
    expanded, dictionary entries looked up, then a widening cast (string → large_string)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    while pa.types.is_run_end_encoded(chunk.type) or pa.types.is_dictionary(chunk.type):
        if pa.types.is_run_end_encoded(chunk.type):
            chunk = pc.run_end_decode(chunk)
        else:
            chunk = chunk.dictionary_decode()
    return chunk if chunk.type == plain else chunk.cast(plain)


def plain_pandas(frame: Any) -> Any:
    """A pandas DataFrame with the columns that pandas holds *encoded* decoded, from its
    dtypes alone, as :func:`plain_arrow` decodes a PyArrow table: an Arrow dtype
    (``pd.ArrowDtype``) of an encoded type (dictionary, run-end encoded, a view type) as its
    plain type, ``halffloat[pyarrow]`` as ``float[pyarrow]`` (an exact widening: pandas' NaN
    test of a float16 Arrow column is true for every value), and a categorical of numbers or
    booleans (NumPy categories, a dictionary in Arrow's terms) as an Arrow column of its
    categories' type — its values are numbers, which an engine would otherwise read as
    categories of text, so that number keys match no row; and a string column stored as Python
    strings as ``large_string``, each value by :func:`~dpkit.tables.text.object_text` (a text
    UTF-8 cannot encode, a lone surrogate, is missing: Dask's hashing and PyArrow refuse it).
    A total, per-value map (no value decides what happens to another); a frame with no such
    column is returned as it is."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        return frame
    plain = {i: _plain_pandas_type(dtype) for i, dtype in enumerate(frame.dtypes)}
    plain = {i: kind for i, kind in plain.items() if kind is not None}
    if not plain:
        return frame
    frame = frame.copy(deep=False)
    for i, kind in plain.items():
        frame[frame.columns[i]] = _decoded_series(frame.iloc[:, i], kind)
    return frame


def _plain_pandas_type(dtype: Any) -> Any:
    """The Arrow type a pandas column of ``dtype`` is decoded to (:func:`plain_pandas`), None
    for a dtype that is read as it is."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if isinstance(dtype, pd.ArrowDtype):
        kind = dtype.pyarrow_dtype
        if pa.types.is_float16(kind):
            return pa.float32()
        return _plain_type(kind)
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "python":
        return pa.large_string()  # Python strings, which may hold what UTF-8 cannot
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories is not None:
        categories = dtype.categories.dtype
        if isinstance(categories, pd.ArrowDtype):
            return _plain_pandas_type(categories) or categories.pyarrow_dtype
        if isinstance(categories, np.dtype) and categories.kind in "biuf":
            return pa.float32() if categories == np.float16 else pa.from_numpy_dtype(categories)
    return None


def _decoded_series(series: Any, plain: Any) -> Any:
    """``series`` (an encoded column: :func:`_plain_pandas_type`) as an Arrow column of
    ``plain``, chunk by chunk (:func:`_decoded`)."""
    import pandas as pd
    import pyarrow as pa

    if isinstance(series.dtype, pd.StringDtype) and series.dtype.storage == "python":
        from dpkit.tables.text import object_text

        texts = pa.array([object_text(v) for v in series.to_numpy(dtype=object)], plain)
        return pd.Series(pd.arrays.ArrowExtensionArray(texts), index=series.index, name=series.name)
    array = pa.array(series.array) if isinstance(series.dtype, pd.CategoricalDtype) else None
    array = array if array is not None else series.array.__arrow_array__()
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    decoded = pa.chunked_array([_decoded(chunk, plain) for chunk in chunks], plain)
    return pd.Series(pd.arrays.ArrowExtensionArray(decoded), index=series.index, name=series.name)


def _plain_dask(frame: Any) -> Any:
    """A Dask DataFrame's partitions decoded as :func:`plain_pandas` decodes a pandas frame
    (from the dtypes alone: a frame with no encoded column is returned as it is)."""
    meta = getattr(frame, "_meta", None)
    if meta is None or plain_pandas(meta) is meta:
        return frame
    return frame.map_partitions(plain_pandas, meta=plain_pandas(meta))


def implementation(frame: Any) -> str:
    """The name of the library behind a narwhals frame (``"pandas"``, ``"polars"``, ...)."""
    return str(frame.implementation.name).lower()


def _kind(dtype: Any, nw: Any) -> ColumnKind:
    if dtype == nw.Boolean:
        return "boolean"
    if dtype.is_numeric():
        return "number"
    if dtype in (nw.String, nw.Categorical) or isinstance(dtype, nw.Enum):
        return "text"
    if dtype == nw.Object:
        return "object"
    return "other"


def column_kinds(frame: Any) -> dict[str, ColumnKind]:
    """Each column's kind, from the schema (``collect_schema``: lazy frames are not run). A
    pandas-like frame's ``object`` columns (pandas, Dask, Modin, cuDF) are ``"object"``, read
    value by value, whatever they hold: narwhals infers their type from their *values* (an
    empty object column, or one of only text or missing values, as text), and a kind that
    depended on the values would make the public phase's decisions — which key types and
    statistics a column takes — depend on the data."""
    nw = narwhals()
    kinds = {str(name): _kind(dtype, nw) for name, dtype in frame.collect_schema().items()}
    if implementation(frame) in _PANDAS_LIKE:
        for name, dtype in frame.to_native().dtypes.items():
            if str(dtype) == "object":  # numpy's object dtype (not a pandas string dtype)
                kinds[str(name)] = "object"
    return kinds


#: The engines whose frames hold numpy ``object`` columns.
_PANDAS_LIKE = ("pandas", "dask", "modin", "cudf")


def require_columns(
    frame: Any, needs: dict[str, tuple[str, tuple[ColumnKind, ...]]], *, owner: str
) -> dict[str, ColumnKind]:
    """Refuse a table that lacks a needed column or whose column has a kind that cannot hold
    what it must (public phase: the schema only; no value is read, none is named).

    ``needs`` maps a column name to (its role, the kinds allowed): ``{"amount": ("value",
    ("number", "boolean", "object"))}``. Returns the kinds of the needed columns.
    """
    try:
        kinds = column_kinds(frame)
    except Exception as error:  # e.g. a Spark Connect plan that does not analyse
        # The engine's message is not shown: a schema inferred from a file's rows may quote
        # them. Asking the engine for the frame's schema shows the analyst why.
        raise InvalidData(
            f"{owner}: the table's schema cannot be read ({type(error).__name__}); ask its "
            "engine for the table's schema to see why",
            field="data",
        ) from None
    found: dict[str, ColumnKind] = {}
    for column, (role, allowed) in needs.items():
        if column not in kinds:
            raise InvalidData(
                f"{owner}: the {role} column {column!r} is not in the table "
                f"({len(kinds)} column(s))",
                field=role,
            )
        if kinds[column] not in allowed:
            raise InvalidData(
                f"{owner}: the {role} column {column!r} holds {kinds[column]} values; it must "
                f"hold {' or '.join(allowed)} values",
                field=role,
            )
        found[column] = kinds[column]
    return found

"""The DuckDB engine: contribution bounding pushed into DuckDB, the same rows kept.

A table query on a DuckDB relation runs its per-record steps as narwhals expressions, which
narwhals turns into DuckDB's (:mod:`dpkit.tables.engines`), and its group-by the same way;
this engine adds the step narwhals cannot express, the bounding
(:mod:`dpkit.tables.bounding`), as one DuckDB statement over the relation:

1. each row's chained words g = F(key, id, group keys) and, for a statistic that reads a
   content v (a fixed-point integer, a lattice cell), its 64-bit content and its number
   j among the rows of equal (id, group, v) — ``ROW_NUMBER() OVER (PARTITION BY id, group,
   v)`` —, then its priority p = F(g, v, j);
2. within each (id, group) pair, ``ROW_NUMBER()`` by p descending, ties by a fixed hash of v,
   then v: the R first rows are kept (any R rows of a count: they are interchangeable);
3. of each id's pairs, those with at most G pairs of priority q = F(g) ≥ their own
   (``COUNT(*) OVER (PARTITION BY id ORDER BY q DESC)``: ties counted in full) are kept;
4. the :data:`~dpkit.tables.bounding.FIRST` column: 1 on the first kept row of each pair.

The words and priorities are the very functions the numpy bounding computes
(:func:`~dpkit.tables.encoding.encode_column`, :func:`~dpkit.tables.bounding.row_priority`,
...), registered as vectorised Arrow functions of the connection: a word is a function of
one value, so a chunk of rows gives each row the word the whole column would. Ties are broken
as the numpy bounding breaks them, so the rows kept — and every aggregate of them — are the
same bit for bit (``tests/unit/sql/test_equivalence.py``). The privacy argument is the
bounding module's: the rows kept of an id depend on that id's rows only.

The engine needs the relation's connection (to register those functions): it is given by
:func:`connection` around the call (the SQL front end owns its connection); a relation with
no connection given is bounded in this process (:func:`bounded_in_parts`: as an eager table
while it fits in memory, else spilled to disk by id and bounded part by part).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from dpkit.tables._eager import Eager
from dpkit.tables.bounding import (
    FIRST,
    Bounding,
    _pair_words,
    bound_eager,
    content_bits,
    pair_priority,
    row_priority,
    values_content,
)
from dpkit.tables.encoding import encode_column, mix
from dpkit.tables.frame import narwhals

__all__ = ["DuckDB", "bounded_in_parts", "connection", "spilling_after"]

_CONNECTION: contextvars.ContextVar[Any] = contextvars.ContextVar("dpkit_duckdb", default=None)
_COUNTER = itertools.count()
_ODD = np.uint64(0x9FB21C651E98DF25)


@contextlib.contextmanager
def connection(con: Any) -> Iterator[None]:
    """Within the block, DuckDB relations of ``con`` are bounded in DuckDB."""
    token = _CONNECTION.set(con)
    try:
        yield
    finally:
        _CONNECTION.reset(token)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _words(array: Any) -> Any:
    """A UBIGINT vector as a numpy uint64 array."""
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.uint64)


def _functions(con: Any, bounding: Bounding) -> dict[str, str]:
    """Register this bounding's keyed row functions on ``con``; their names."""
    import pyarrow as pa

    key = bounding.key
    tag = next(_COUNTER)
    names = {k: f"__dpkit_{k}_{tag}" for k in ("content", "p", "tie")}

    def content(v: Any) -> Any:
        return pa.array(content_bits(v.to_numpy(zero_copy_only=False)), pa.uint64())

    def values(*columns: Any) -> Any:
        found = [c.to_numpy(zero_copy_only=False) for c in columns]
        return pa.array(values_content(found), pa.uint64())

    # DuckDB reads a function's arity from its signature: one parameter per value column.
    values.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(f"v{i}", inspect.Parameter.POSITIONAL_ONLY)
            for i in range(len(bounding.values))
        ]
    )

    def p(g: Any, v: Any, j: Any) -> Any:
        occurrence = np.asarray(j.to_numpy(zero_copy_only=False), dtype=np.int64)
        return pa.array(row_priority(_words(g), _words(v), occurrence, key), pa.uint64())

    def tie(v: Any) -> Any:
        return pa.array(mix(_words(v) ^ _ODD), pa.uint64())

    made: list[tuple[str, Callable[..., Any], list[str]]] = [
        (names["content"], values, ["DOUBLE"] * len(bounding.values))
        if bounding.values
        else (names["content"], content, ["BIGINT"]),
        (names["p"], p, ["UBIGINT", "UBIGINT", "BIGINT"]),
        (names["tie"], tie, ["UBIGINT"]),
    ]
    for name, function, parameters in made:
        # "special": a missing value reaches the function (as NaN), which gives it the word
        # the numpy bounding gives it, instead of DuckDB's NULL for any missing argument.
        con.create_function(
            name, function, parameters, "UBIGINT", type="arrow", null_handling="special"
        )
    return names


def _pairs(con: Any, view: str, bounding: Bounding) -> str:
    """The distinct (id, group) pairs of the rows, with their chained words g and priority
    q, registered as a table of ``con``; its name. A word is a function of one value
    (:func:`~dpkit.tables.encoding.encode_column`), so each pair gets the words the whole
    column would give its values."""
    import pyarrow as pa

    columns = (bounding.id_column, *bounding.by)
    listed = ", ".join(_quote(c) for c in columns)
    pairs = con.sql(f"SELECT DISTINCT {listed} FROM {view}").to_arrow_table()
    lanes = bounding.key.lanes
    words = [encode_column(pairs.column(c), lanes)[1] for c in columns]
    g = _pair_words(words, bounding.key) if pairs.num_rows else np.zeros(0, np.uint64)
    q = pair_priority(g, bounding.key)
    table = pairs.append_column("__g", pa.array(g, pa.uint64())).append_column(
        "__q", pa.array(q, pa.uint64())
    )
    name = f"__dpkit_pairs_{next(_COUNTER)}"
    con.register(name, table)
    return name


def _drop(con: Any, names: Mapping[str, str]) -> None:
    for name in names.values():
        with contextlib.suppress(Exception):
            con.remove_function(name)


def bounding_statement(
    bounding: Bounding, source: str, pairs: str, columns: list[str], names: Mapping[str, str]
) -> str:
    """The DuckDB statement of the bounding (module docstring) over the view ``source`` and
    its pairs' table ``pairs``."""
    pair_columns = [_quote(c) for c in (bounding.id_column, *bounding.by)]
    partition = ", ".join(pair_columns)
    keep = ", ".join(_quote(c) for c in columns)
    steps = [f"__w AS (SELECT * FROM {source} JOIN {pairs} USING ({partition}))"]
    if bounding.content is not None or bounding.values:
        if bounding.values:  # the content is a hash of the values: rows numbered by it
            values = ", ".join(_quote(c) for c in bounding.values)
            steps.append(f"__u AS (SELECT *, {names['content']}({values}) AS __v FROM __w)")
            steps.append(
                f"__c AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY {partition}, __v) - 1 "
                f"AS __j, COUNT(*) OVER (PARTITION BY {partition}) AS __n FROM __u)"
            )
        else:
            content = _quote(bounding.content)  # type: ignore[arg-type]
            steps.append(
                f"__c AS (SELECT *, {names['content']}({content}) AS __v, "
                f"ROW_NUMBER() OVER (PARTITION BY {partition}, {content}) - 1 AS __j, "
                f"COUNT(*) OVER (PARTITION BY {partition}) AS __n FROM __w)"
            )
        # Only a crowded pair's rows are ranked by priority (as the numpy bounding ranks
        # them); every pair's rows are in the order of their content's hash otherwise, so the
        # first row of a pair, the FIRST one, is the numpy bounding's too.
        rows = int(bounding.max_rows)
        steps.append(
            f"__r AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY {partition} ORDER BY "
            f"CASE WHEN __n > {rows} THEN {names['p']}(__g, __v, __j) ELSE 0::UBIGINT END "
            f"DESC, {names['tie']}(__v) ASC, __v ASC) - 1 AS __k FROM __c)"
        )
    else:
        steps.append(
            f"__r AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY {partition}) - 1 AS __k FROM __w)"
        )
    where = f"__k < {int(bounding.max_rows)}"
    if bounding.by and bounding.max_groups is not None:
        steps.append(
            f"__s AS (SELECT {partition}, COUNT(*) OVER (PARTITION BY "
            f"{_quote(bounding.id_column)} ORDER BY __q DESC) AS __above FROM {pairs})"
        )
        steps.append(f"__x AS (SELECT * FROM __r JOIN __s USING ({partition}))")
        where += f" AND __above <= {int(bounding.max_groups)}"
        last = "__x"
    else:
        last = "__r"
    return (
        f"WITH {', '.join(steps)} SELECT {keep}, CAST(__k = 0 AS BIGINT) AS {_quote(FIRST)} "
        f"FROM {last} WHERE {where}"
    )


#: Rows held in memory at once by the bounding in this process; beyond them, the rows are
#: spilled to disk in :data:`PARTS` parts by id and bounded one part at a time.
SPILL_ROWS = 4_000_000
PARTS = 32
_BATCH_ROWS = 1_000_000


_SPILL_ROWS: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "dpkit_spill_rows", default=None
)


@contextlib.contextmanager
def spilling_after(rows: int) -> Iterator[None]:
    """Within the block, :func:`bounded_in_parts` spills beyond ``rows`` rows (for tests: the
    spilled path on small tables)."""
    token = _SPILL_ROWS.set(rows)
    try:
        yield
    finally:
        _SPILL_ROWS.reset(token)


def bounded_in_parts(
    frame: Any,
    bounding: Bounding,
    *,
    spill_rows: int | None = None,
    batch_rows: int = _BATCH_ROWS,
) -> Any:
    """The rows ``bounding`` keeps of a DuckDB relation, bounded in this process in memory
    of about ``spill_rows`` rows (default :data:`SPILL_ROWS`, or :func:`spilling_after`'s)
    whatever the relation's size.

    The relation is streamed in batches; while they fit, they are bounded as one table (as
    the eager engine would). Beyond that, every row goes to one of :data:`PARTS` files on
    disk (Arrow IPC streams, in a temporary directory removed afterwards) chosen by a keyed
    hash of its id's word — a function of the id's value
    (:func:`~dpkit.tables.encoding.encode_column`), so all the rows of one id are in one part,
    in their order — and each part is bounded alone. Bounding is per id (its kept rows are a
    function of its own rows: :mod:`dpkit.tables.bounding`), so the parts together keep
    exactly the rows the whole table would. Only the kept rows are held together."""
    import pyarrow as pa

    nw = narwhals()
    limit = spill_rows if spill_rows is not None else _SPILL_ROWS.get() or SPILL_ROWS
    native = frame.to_native()
    # to_arrow_reader is DuckDB ≥ 1.4's name of fetch_arrow_reader (deprecated there).
    reader = getattr(native, "to_arrow_reader", native.fetch_arrow_reader)(batch_rows)
    held: list[Any] = []
    count = 0
    spill: _Spill | None = None
    try:
        for batch in reader:
            if spill is not None:
                spill.add(batch)
                continue
            held.append(batch)
            count += batch.num_rows
            if count > limit:
                spill = _Spill(reader.schema, bounding)
                for kept in held:
                    spill.add(kept)
                held = []
        if spill is None:
            table = pa.Table.from_batches(held, schema=reader.schema)
            return bound_eager(nw.from_native(table, eager_only=True), bounding)
        parts = [
            bound_eager(nw.from_native(part, eager_only=True), bounding).to_native()
            for part in spill.parts()
        ]
        return nw.from_native(pa.concat_tables(parts), eager_only=True)
    finally:
        if spill is not None:
            spill.close()


class _Spill:
    """Rows written to :data:`PARTS` Arrow IPC streams on disk by a keyed hash of their id."""

    def __init__(self, schema: Any, bounding: Bounding) -> None:
        import tempfile

        import pyarrow as pa

        self.bounding = bounding
        self.schema = schema
        self.directory = tempfile.TemporaryDirectory(prefix="dpkit-bounding-")
        self.paths = [f"{self.directory.name}/part{i}.arrows" for i in range(PARTS)]
        self.sinks = [pa.OSFile(path, "wb") for path in self.paths]
        self.writers = [pa.ipc.new_stream(sink, schema) for sink in self.sinks]

    def add(self, batch: Any) -> None:
        if batch.num_rows == 0:
            return
        key = self.bounding.key
        words = encode_column(batch.column(self.bounding.id_column), key.lanes)[1]
        part = (mix(words ^ key.word(0)) % np.uint64(PARTS)).astype(np.intp)
        order = np.argsort(part, kind="stable")  # a part's rows stay in their order
        ends = np.cumsum(np.bincount(part, minlength=PARTS))
        ordered = batch.take(order)
        start = 0
        for index, end in enumerate(ends.tolist()):
            if end > start:
                self.writers[index].write_batch(ordered.slice(start, end - start))
            start = end

    def parts(self) -> Iterator[Any]:
        """Each part as a PyArrow table, read back once."""
        import pyarrow as pa

        for writer, sink in zip(self.writers, self.sinks, strict=True):
            writer.close()
            sink.close()
        self.writers, self.sinks = [], []
        for path in self.paths:
            with pa.OSFile(path, "rb") as source:
                table = pa.ipc.open_stream(source).read_all()
            os.remove(path)
            yield table

    def close(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.close()
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                sink.close()
        self.directory.cleanup()


@attrs.frozen
class DuckDB:
    """The :class:`~dpkit.tables.engines.Engine` of a DuckDB relation: the eager engine's
    steps (narwhals runs them lazily in DuckDB), the bounding in DuckDB."""

    def collect(self, frame: Any) -> Any:
        return Eager().collect(frame)

    def by_id(self, frame: Any, bounding: Bounding) -> Any:
        """The rows ``bounding`` keeps, bounded in DuckDB (module docstring); collected and
        bounded eagerly when no connection was given."""
        con = _CONNECTION.get()
        if con is None:
            return bounded_in_parts(frame, bounding)
        nw = narwhals()
        relation = frame.to_native()
        columns = [str(c) for c in relation.columns]
        names = _functions(con, bounding)
        view = f"__dpkit_bounded_{next(_COUNTER)}"
        relation.create_view(view)
        pairs = _pairs(con, _quote(view), bounding)
        statement = bounding_statement(bounding, _quote(view), _quote(pairs), columns, names)
        return nw.from_native(con.sql(statement))

    def per_record(self, frame: Any, function: Callable[[Any], Any]) -> Any:
        return function(frame)

    def per_partition(
        self, frame: Any, function: Callable[[Any], Any], added: dict[str, str]
    ) -> Any:
        return Eager().per_partition(frame, function, added)

    def positions(
        self, frame: Any, name: str, column: str, mapping: Mapping[Any, int], default: int
    ) -> Any:
        return Eager().positions(frame, name, column, mapping, default)

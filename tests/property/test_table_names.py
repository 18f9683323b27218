"""A table that repeats a column name is refused in the public phase, naming the name.

Which of two columns named ``v`` is the value column is not decided by anything the analyst
wrote, and an engine's answer to it (narwhals' ``DuplicateError``, pandas' frame-valued
``df["v"]``, Arrow's first match) is not a dpkit error: a message or exception type that could
differ from engine to engine, or fail after the spend. For every registered statistic on
adversarial tables (:func:`support.table_cases.cases`), each on an engine that can hold a
repeated name — pandas (NumPy and Arrow dtypes), PyArrow and its Parquet file, a DuckDB
relation (``SELECT v, v AS v``: bounded on the collected rows and in DuckDB), Dask (Polars
refuses such a frame itself) — with a copy of any column inserted anywhere under any of the
table's names (one the query reads or not): ``check_input`` raises :class:`dpkit.InvalidData`
on the field ``data`` naming the repeated name, and a session's release raises it with nothing
spent and the data never read past the schema.

False-positive rate: 0. Whether the table repeats a name is decided by its schema alone
(deterministic); Hypothesis is derandomized (the same examples on every run).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS, STATISTICS, Case, cases, native

import dpkit
from dpkit.testing.tables import held as on_engine

#: Examples per statistic: the refusal is one check of the schema, so a table that reaches an
#: engine with a repeated name fails at once when it is gone (every example repeats a name).
EXAMPLES = 12
#: The engines that hold a repeated column name.
ENGINES = (
    "pandas",
    "pandas[arrow]",
    "pyarrow",
    "pyarrow[parquet]",
    "duckdb",
    "duckdb[bounded]",
    "dask",
)
BUDGET = (100.0, 0.5)  # above any drawn query's cost: a refusal here is not the budget's


def repeated(frame: Any, engine: str, name: str, source: int, at: int) -> Any:
    """``frame`` with a copy of its column ``source`` inserted at ``at`` under ``name``."""
    if engine.startswith("pyarrow"):
        return frame.add_column(at, name, frame.column(source))
    if engine.startswith("duckdb"):
        listed = [_quote(c) for c in frame.columns]
        listed.insert(at, f"{_quote(frame.columns[source])} AS {_quote(name)}")
        return frame.project(", ".join(listed))
    if engine == "dask":
        import dask.dataframe as dd

        return dd.from_pandas(repeated(frame.compute(), "pandas", name, source, at), npartitions=1)
    copy = frame.copy()
    copy.insert(at, name, frame.iloc[:, source].copy(), allow_duplicates=True)
    return copy


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@st.composite
def repeated_tables(draw: st.DrawFn, name: str) -> tuple[Case, str, str, int, int]:
    """A case, an engine, the name to repeat, the column to copy and where to insert it (the
    frame is built in the test: an engine may use the ``random`` module, which a strategy must
    not)."""
    case = draw(cases(name, ids=("int64", "string", "float64", "dictionary<string>")))
    names = list(case.table.names)
    engine = draw(st.sampled_from(ENGINES))
    twice = draw(st.sampled_from(names))
    return (
        case,
        engine,
        twice,
        draw(st.integers(0, len(names) - 1)),
        draw(st.integers(0, len(names))),
    )


def _refused(error: dpkit.InvalidData, twice: str, engine: str) -> None:
    assert error.field == "data" and repr(twice) in str(error), (
        f"{engine}: a table repeating the column name {twice!r} was refused, but not naming "
        f"it: {error!r}"
    )


@pytest.mark.parametrize("name", STATISTICS)
@settings(max_examples=EXAMPLES, **SETTINGS)
@given(data=st.data())
def test_a_repeated_column_name_is_refused_before_the_spend(name: str, data: Any) -> None:
    case, engine, twice, source, at = data.draw(repeated_tables(name))
    held = native(case.table, engine)
    if held is None:
        event("the engine cannot hold the table")
        return
    event(engine)
    frame = repeated(held, engine, twice, source, at)
    try:
        case.query.check_input(frame)
    except dpkit.InvalidData as error:
        _refused(error, twice, engine)
    else:
        pytest.fail(f"{engine}: the public phase accepted a table repeating {twice!r}")
    session = dpkit.Session(budget=BUDGET, ledger=":memory:")
    with pytest.raises(dpkit.InvalidData) as refused, on_engine(held):
        session.release(case.query, frame, rng=case.rng())
    _refused(refused.value, twice, engine)
    assert session.spent.epsilon == 0 and not session.history(), "the refusal spent"


def test_the_engines_hold_a_repeated_name() -> None:
    """The property's tables do repeat a name on each of its engines (else it checks nothing)."""
    frame = pd.DataFrame({"a": [1, 2], "b": [3.0, 4.0]})
    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    for engine, native_frame in (
        ("pandas", frame),
        ("pyarrow", arrow),
        ("duckdb", duckdb.connect().from_arrow(arrow)),
    ):
        held = repeated(native_frame, engine, "b", 0, 0)
        names = list(held.column_names if engine == "pyarrow" else held.columns)
        assert names == ["b", "a", "b"]

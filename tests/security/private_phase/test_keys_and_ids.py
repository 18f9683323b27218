"""Group keys and ids as the private phase reads them: what is released about a key set (its signs,
types, order, text) and how ids are read never depends on the data beyond the DP release, and no
column type fails after the spend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dpkit_central import Count, Histogram, PrivateKeys

import dpkit

#: Dask in this process: the synchronous scheduler, and the task shuffle (a cluster test's
#: client may be the default, and its p2p shuffle runs only on its workers).
LOCAL_DASK = {"scheduler": "synchronous", "dataframe.shuffle.method": "tasks"}


def _table(kind: str, column: list[Any]) -> Any:
    if kind == "pandas":
        return pd.DataFrame({"k": column})
    if kind == "polars":
        return pl.DataFrame({"k": column})
    return pa.table({"k": column})


def _private_keys(table: Any) -> list[tuple[Any, ...]]:
    """The keys a private-keys count releases (fast mode, a fixed seed: the selection's coins
    are the same for both neighbours; every key below has 300 rows, kept with probability 1)."""
    query = Count(epsilon=1.0).on(by="k", keys=PrivateKeys(epsilon=1.0, delta=1e-6))
    session = dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:")
    released = session.release(query, table, rng=np.random.default_rng(0)).values
    return list(released.keys)


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_the_sign_of_one_zero_key_is_not_released(kind: str) -> None:
    """Attack: a float key column; the group 0.0 is large (kept with probability 1). One
    person's row holds the key −0.0, which equals 0.0 and falls into the same group. The group
    was released under the spelling of its first row, so the released key said whether that
    person (placed first) is in the data: −0.0 with them, 0.0 without — with probability 1, not
    δ. Now a group's key is one spelling per group (0.0), whatever rows it holds."""
    others = [0.0] * 300 + [1.0] * 300
    without = _private_keys(_table(kind, others))
    with_person = _private_keys(_table(kind, [-0.0, *others]))
    assert [repr(k) for k in with_person] == [repr(k) for k in without]


@pytest.mark.parametrize("first", [True, 1.0, np.int64(1), np.float32(1.0)])
def test_the_type_of_one_object_key_is_not_released(first: Any) -> None:
    """Attack: a pandas object column where 1, 1.0 and True compare equal. When they were one
    group, it was released under its first row's value, so ``True`` or ``1.0`` in the output
    named that one row's type. Now an object column's keys are their text (as on Dask): the
    person's ``True`` or ``1.0`` is a group of its own, held by one id, which partition selection
    releases with probability ≤ δ = 1e-6 (the test's false-positive rate); ``np.int64(1)`` is
    the text ``"1"`` of the large group."""
    others = [1] * 300 + ["x"] * 300
    without = _private_keys(pd.DataFrame({"k": pd.Series(others, dtype=object)}))
    with_person = _private_keys(pd.DataFrame({"k": pd.Series([first, *others], dtype=object)}))
    assert [repr(k) for k in with_person] == [repr(k) for k in without]
    assert [type(k[0]) for k in with_person] == [type(k[0]) for k in without]


def test_the_order_of_released_keys_does_not_depend_on_dropped_keys() -> None:
    """Attack: an object column of text keys, two large groups ``a`` and ``b'``; one person's
    row holds the number 7 — a key held by one id, dropped by partition selection except with
    probability δ. Text and numbers do not compare, so the keys were sorted by another order
    (by their ``repr``, where ``"b'"`` comes before ``'a'``) as soon as the number was among
    the keys *found*: the order of the two released keys said whether the person is in the
    data. Now the keys are sorted by one fixed total order, so the relative order of two keys
    never depends on the others."""
    others = ["a"] * 300 + ["b'"] * 300
    without = _private_keys(pd.DataFrame({"k": pd.Series(others, dtype=object)}))
    person = pd.DataFrame({"k": pd.Series([*others, 7], dtype=object)})
    with_person = [k for k in _private_keys(person) if k != (7,)]
    assert with_person == without == [("a",), ("b'",)]


def test_released_keys_of_an_object_column_are_its_text_in_order() -> None:
    """An object column's keys are read as text (as pandas' string dtype and Dask read them),
    so numbers and text in one column come out as text, in one fixed order whichever others
    were found."""
    column = pd.Series([2.5] * 300 + ["b"] * 300 + [1] * 300 + ["a"] * 300, dtype=object)
    assert _private_keys(pd.DataFrame({"k": column})) == [("1",), ("2.5",), ("a",), ("b",)]


def _id_world(rt: Any, world: Path, extra: list[str]) -> Any:
    """Ten people, each written once as ``k`` and once as ``00k`` (one id: ``7`` and ``007``
    are documented as one id), five rows each spelling; ``max_rows`` = 5. A count at ε = 1000
    (geometric noise of scale 0.005: |noise| ≥ 1 with probability 2e^(−200), never)."""
    rows = [f"{k},1\n" for k in range(1, 11) for _ in range(5)]
    rows += [f"00{k},1\n" for k in range(1, 11) for _ in range(5)]
    world.mkdir()
    (world / "data.csv").write_text("user,v\n" + "".join(rows + extra), encoding="utf-8")
    rt.write_json(
        world / "spec.json",
        rt.query_spec(
            "count",
            "v",
            epsilon=1000.0,
            session_epsilon=1e6,
            privacy_unit={"kind": "id", "column": "user", "max_rows": 5},
        ),
    )
    result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
    assert result.returncode == 0, result.explain()
    return result.json()["results"][0]["estimate"]


@pytest.mark.parametrize("cell", ["x", "+7", "99999999999999999999", "0x7", " 7"])
def test_one_id_cell_does_not_change_how_other_ids_are_read(
    rt: Any, tmp_path: Path, cell: str
) -> None:
    """Attack: whether the id column was read as integers (``7`` = ``007``) or by its bytes
    depended on *every* cell: one person whose id is not a plain integer switched the whole
    column to bytes, splitting every other person in two and doubling their rows past the
    bound. Adding that one-row person moved the count from 50 to 101, where one id may move
    it by at most ``max_rows`` = 5. Now each cell is read on its own."""
    without = _id_world(rt, tmp_path / "without", [])
    with_person = _id_world(rt, tmp_path / "with", [f"{cell},1\n"])
    assert abs(with_person - without) <= 5, (without, with_person)
    json.dumps([without, with_person])


def test_a_decimal_key_column_never_fails_on_one_value() -> None:
    """Attack: public number keys on a PyArrow decimal column. Matching them cast the column
    to the keys' integer type, which fails if *any* value has a fraction: the release raised
    (``ReleaseFailed``, spend kept) exactly when one person's value was 1.5 — an exception
    oracle on the data. Now decimal keys are read as float64, record by record."""
    import decimal

    query = Count(epsilon=1.0).on(by="k", keys=[1, 2])
    outcomes = []
    for last in ("1.0", "1.5"):
        cells = [decimal.Decimal("1.0")] * 50 + [decimal.Decimal(last)]
        table = pa.table({"k": pa.array(cells, pa.decimal128(5, 1))})
        session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
        released = session.release(query, table, rng=np.random.default_rng(0)).values
        outcomes.append(released.keys)
    assert outcomes[0] == outcomes[1] == ((1,), (2,))


def _odd_typed(kind: str, values: list[Any]) -> Any:
    """A table with one column ``k`` of an odd type, filled from ``values``."""
    if kind == "polars_float32":
        return pl.DataFrame({"k": pl.Series(values, dtype=pl.Float32)})
    if kind == "polars_int128":
        return pl.DataFrame({"k": pl.Series([int(v) for v in values], dtype=pl.Int128)})
    if kind == "polars_enum":
        return pl.DataFrame(
            {"k": pl.Series(["a" if v else "b" for v in values], dtype=pl.Enum(["a", "b"]))}
        )
    if kind == "pandas_float16":
        return pd.DataFrame({"k": np.array(values, dtype=np.float16)})
    return pa.table({"k": pa.array(np.array(values, dtype=np.float16))})  # pyarrow_float16


_ODD_QUERIES = {
    "number_keys": Count(epsilon=1.0).on(by="k", keys=[1, 2]),
    "private_keys": Count(epsilon=1.0).on(by="k", keys=PrivateKeys(epsilon=1.0, delta=1e-6)),
    "histogram": Histogram(categories=("a", "1"), epsilon=1.0).on("k"),
    "id_unit": Count(epsilon=1.0).on(unit=dpkit.IdUnit("k", max_rows=2)),
}


@pytest.mark.parametrize(
    "kind", ["polars_float32", "polars_int128", "polars_enum", "pandas_float16", "pyarrow_float16"]
)
@pytest.mark.parametrize("query", sorted(_ODD_QUERIES))
def test_column_types_an_engine_cannot_process_never_fail_after_the_spend(
    kind: str, query: str
) -> None:
    """Attack: column types the schema check admits but an engine cannot process for this
    query — Float32 keys against integer keys (Polars is_in), a float16 group-by (pandas), an
    Int128 id (no numpy type), an Enum histogram with a category outside the Enum, float16
    comparisons (PyArrow). Each raised after the spend (``ReleaseFailed``). Now the query is
    run on no rows of the table in the public phase, so a type it cannot process is refused
    from the schema alone (a typed error, nothing spent), or the release succeeds — the same
    outcome for neighbouring tables."""
    target = _ODD_QUERIES[query]
    outcomes = []
    for values in ([1.0, 2.0, 1.0] * 20, [1.0, 2.0, 1.0] * 20 + [2.0]):
        session = dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:")
        try:
            session.release(target, _odd_typed(kind, values), rng=np.random.default_rng(0))
            outcomes.append("released")
        except dpkit.ReleaseFailed:
            outcomes.append("failed after the spend")
        except dpkit.DPKitError as error:
            assert session.spent.epsilon == 0
            outcomes.append(type(error).__name__ + str(error))
    assert "failed after the spend" not in outcomes and outcomes[0] == outcomes[1], outcomes


def test_a_large_unsigned_id_is_an_id(rt: Any, tmp_path: Path) -> None:
    """Attack: a Parquet id column of type uint64. Its ids were cast to int64, which fails
    if *any* id is at least 2⁶³: the release then failed after the spend (exit 1), and
    released normally otherwise — an exit-code oracle on one person's id. Now a uint64 column
    is coded by distinct value, whatever the values."""
    import pyarrow.parquet as pq

    outcomes = []
    for big in (2**62, 2**63):
        world = tmp_path / str(big)
        world.mkdir()
        table = pa.table({"user": pa.array([1, 2, big], pa.uint64()), "v": [1.0, 2.0, 3.0]})
        pq.write_table(table, world / "data.parquet")
        spec = rt.query_spec("count", "v", path="data.parquet")
        spec["input"]["source"] = "parquet"
        spec["privacy_unit"] = {"kind": "id", "column": "user", "max_rows": 1}
        rt.write_json(world / "spec.json", spec)
        result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        outcomes.append(result.observable())
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][0] == 0


#: Two ids that a lossy reading makes one: decimals one double apart, and times (nanoseconds)
#: or dates (milliseconds) whose text shows whole microseconds or days.
_TWINS = {
    "decimal128": (pa.decimal128(38, 0), 2**53, 2**53 + 1),
    "time64[ns]": (pa.time64("ns"), 1, 2),
    "date64": (pa.date64(), 86_400_000, 86_400_001),
}


@pytest.mark.parametrize("kind", ["pyarrow", "polars", "pandas[arrow]"])
@pytest.mark.parametrize("twins", sorted(_TWINS))
def test_two_ids_one_rounding_apart_are_two_persons(kind: str, twins: str) -> None:
    """Attack: an id column holding two ids that a lossy reading makes one — a
    ``decimal128(38, 0)`` column (account numbers of 16 digits and more) with 2⁵³ and
    2⁵³ + 1, one double; two ``time64[ns]`` ids whose text shows whole microseconds. The
    decimal ids were read as float64 and the others coded by their text, so the two persons
    were bounded as one: with one group per id kept, adding one person (two rows in ``a``)
    could move the other's kept rows out of ``b`` — an L1 change of 4 where the noise is
    calibrated to G·R = 2. Now an id keeps its exact value; every seed below (its bounding
    key) is checked."""
    query = Count(epsilon=1.0).on(
        None, by="g", keys=["a", "b"], unit=dpkit.IdUnit("id", max_rows=2, max_groups=1)
    )
    kept, first, second = _TWINS[twins]  # stored values (a time's Python value is coarser)

    def table(ids: list[Any], groups: list[str]) -> Any:
        arrow = pa.table({"id": pa.array(ids, kept), "g": groups})
        if kind == "polars":
            return pl.from_arrow(arrow)
        return arrow.to_pandas(types_mapper=pd.ArrowDtype) if kind == "pandas[arrow]" else arrow

    full = table([first, first, second, second], ["b", "b", "a", "a"])
    less = table([first, first], ["b", "b"])
    (noise,) = query.noise_mechanisms()
    for seed in range(8):
        moved = [
            query.aggregate(frame, rng=np.random.default_rng(seed)).values["count"]
            for frame in (full, less)
        ]
        assert np.abs(moved[0] - moved[1]).sum() <= noise.sensitivity, seed


@pytest.mark.parametrize("by", [("g",), ("g", "h")])
def test_a_wide_unsigned_key_never_fails_after_the_spend(by: tuple[str, ...]) -> None:
    """Attack: a DuckDB ``UHUGEINT`` group (or histogram) column and small number keys. DuckDB
    compared the column with the keys' ``BIGINT`` list by casting each value to ``BIGINT``, so
    one person's value beyond 2⁶³ − 1 made the release fail after the spend. Now such a
    column is compared by its text; the counts are those of the values."""
    duckdb = pytest.importorskip("duckdb")
    relation = duckdb.connect().sql(
        "SELECT CAST(CASE WHEN i = 0 THEN 2 * 10::UHUGEINT ** 21 ELSE i % 2 END AS UHUGEINT) "
        "AS g, CAST(i % 2 AS UHUGEINT) AS h FROM range(6) t(i)"
    )
    keys: list[Any] = [0, 1] if by == ("g",) else [(0, 0), (1, 1)]
    queries = [Count(epsilon=1.0).on(by=by, keys=keys)]
    if by == ("g",):
        queries.append(Histogram(categories=keys, epsilon=1.0).on("g"))
    for query in queries:
        dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:").release(
            query, relation, rng=np.random.default_rng(0)
        )
        found = query.aggregate(relation).values
        assert np.array_equal(found.get("count", found.get("cells")).ravel(), [2, 3])


def test_an_id_of_text_utf8_cannot_hold_is_missing_on_every_engine() -> None:
    """Attack: a pandas ``object`` id column where one person's id is a lone surrogate
    (``"\\ud800"``, what ``surrogateescape`` decodes a stray byte to). On Dask, the shuffle by
    id hashed the partition's texts as UTF-8 and failed after the spend — on a partition of
    texts only, so as the other ids decide; on pandas it was a person, in SQL a missing id.
    Now such a text is missing everywhere (the rule of bytes that are not UTF-8)."""
    dd = pytest.importorskip("dask.dataframe")
    import dask

    table = pd.DataFrame(
        {
            "id": pd.Series(["\ud800", 1, "\ud800", 2, "x", 1], dtype=object),
            "g": pd.Series(["a", "a", "b", 1, "a", "b"], dtype=object),
        }
    )
    query = Count(epsilon=1.0).on(
        by="g", keys=["a", "b", "1"], unit=dpkit.IdUnit("id", max_rows=2, max_groups=2)
    )
    with dask.config.set({**LOCAL_DASK, "dataframe.convert-string": False}):
        frame = dd.from_pandas(table, npartitions=2, sort=False)
        dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:").release(
            query, frame, rng=np.random.default_rng(0)
        )
        found = [query.aggregate(t, rng=np.random.default_rng(0)) for t in (frame, table)]
    assert found[0].identical(found[1])
    assert found[1].values["count"].tolist() == [2, 1, 1]  # the surrogate's rows: no person


@pytest.mark.parametrize("dtype", ["string[python]", "str[python]"])
def test_a_python_string_column_holding_a_lone_surrogate_never_fails(dtype: str) -> None:
    """Attack: a pandas string column stored as Python strings (``string[python]``, or
    pandas' ``str`` without PyArrow), one person's text a lone surrogate: a histogram over it
    (pandas, Dask) and a Dask shuffle by it as the id failed after the spend. Now the column is
    read as Arrow text, such a value missing (as in an object column)."""
    dd = pytest.importorskip("dask.dataframe")
    import dask

    kind = pd.StringDtype("python", na_value=np.nan) if dtype == "str[python]" else dtype
    table = pd.DataFrame(
        {
            "id": pd.Series(["\ud800", "a", "\ud800", "b"], dtype=kind),
            "g": pd.Series(["a", "\ud800", "b", "a"], dtype=kind),
        }
    )
    unit = dpkit.IdUnit("id", max_rows=2, max_groups=2)
    queries = [
        Count(epsilon=1.0).on(by="g", keys=["a", "b"], unit=unit),
        Histogram(categories=["a"], other=True, epsilon=1.0).on("g"),
    ]
    with dask.config.set({**LOCAL_DASK, "dataframe.convert-string": False}):
        frame = dd.from_pandas(table, npartitions=2, sort=False)
        for query in queries:
            for data in (table, frame):
                dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:").release(
                    query, data, rng=np.random.default_rng(0)
                )
        found = [queries[0].aggregate(t, rng=np.random.default_rng(0)) for t in (frame, table)]
    assert found[0].identical(found[1]) and found[1].values["count"].tolist() == [1, 0]

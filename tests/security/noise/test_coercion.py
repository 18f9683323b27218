"""Attacks on the maps a table query applies before the noise: declared keys compared after
conversion to the columns' types, object columns read as text, encoded Arrow columns decoded,
and the geometric mechanism's rounding.

Each map must keep the declared sensitivity (``docs/security.md``, "The coercion rule"): two
declared keys that are one group of the data would be released twice with the sensitivity of
one; a rounding that is not monotone and shift-invariant moves one answer by more than its
sensitivity; an engine that spells one id two ways counts one person twice; and an encoding
that an engine cannot process fails after the spend, decided by whether one person's row adds
a value to a later chunk. All of these are deterministic (false-positive rate 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dpkit_central import Count, Histogram, PrivateKeys, Sum

import dpkit

ENGINES = ("pandas", "polars", "pyarrow")


def _table(engine: str, columns: dict[str, list[Any]]) -> Any:
    frame = pd.DataFrame(columns)
    if engine == "polars":
        return pl.from_pandas(frame)
    if engine == "pyarrow":
        return pa.Table.from_pandas(frame, preserve_index=False)
    return frame


def _nothing_spent(query: Any, data: Any) -> dpkit.errors.DPKitError:
    """Release ``query`` in a session: it must be refused before the spend."""
    with dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:") as session:
        with pytest.raises(dpkit.errors.DPKitError) as refused:
            session.release(query, data, rng=np.random.default_rng(0))
        assert session.spent.epsilon == 0 and not session.history()
    return refused.value


# -- declared keys are compared after conversion to the column's type -------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_keys_that_are_one_text_group_are_refused_before_the_spend(engine: str) -> None:
    """Attack: ``keys=[1, "1"]`` on a text column. Both keys are the group "1": each copy was
    released with its own noise while the sensitivity counted one group (a ratio of 7.5 on an
    event bounded by e^ε = 2.72)."""
    data = _table(engine, {"user": [1, 2], "city": ["1", "1"]})
    unit = dpkit.IdUnit("user", max_rows=1, max_groups=1)
    query = Count(epsilon=1.0).on(by="city", keys=[1, "1"], unit=unit)
    refused = _nothing_spent(query, data)
    assert isinstance(refused, dpkit.InvalidParameter)
    assert "keys" in str(refused) and "'1'" in str(refused)
    with pytest.raises(dpkit.InvalidParameter):
        query.aggregate(data)  # the keys and the schema decide it, whoever asks


@pytest.mark.parametrize("engine", ENGINES)
def test_keys_of_several_columns_spelled_twice_are_refused(engine: str) -> None:
    """With c group columns the spellings multiply: (1, "a") and ("1", "a") are one group."""
    data = _table(engine, {"user": [1, 2], "city": ["1", "1"], "day": ["a", "b"]})
    unit = dpkit.IdUnit("user", max_rows=1, max_groups=2)
    query = Count(epsilon=1.0).on(by=["city", "day"], keys=[(1, "a"), ("1", "a")], unit=unit)
    assert isinstance(_nothing_spent(query, data), dpkit.InvalidParameter)


def test_number_keys_equal_as_floats_are_one_group() -> None:
    """2⁵³ and 2⁵³ + 1 are distinct Python integers but one float64 group of a float column."""
    data = pd.DataFrame({"k": [float(2**53)] * 3})
    query = Count(epsilon=1.0).on(by="k", keys=[2**53, 2**53 + 1])
    assert isinstance(_nothing_spent(query, data), dpkit.InvalidParameter)
    ints = pd.DataFrame({"k": [2**53 + 1] * 3})  # an integer column holds both: two groups
    found = query.aggregate(ints)
    assert found.values["count"].tolist() == [0, 3]


def test_a_key_of_an_integer_column_that_it_cannot_hold_is_an_absent_group() -> None:
    """A fraction, or an integer beyond the column's type, is never compared with its cells
    (no engine is asked to cast it): it is released as a group with no row."""
    for engine in ENGINES:
        data = _table(engine, {"k": pd.array([1, 2, 2], dtype="int8")})
        query = Count(epsilon=1.0).on(by="k", keys=[2, 1.5, 300, 2**70])
        query.check_input(data)
        assert query.aggregate(data).values["count"].tolist() == [2, 0, 0, 0], engine


def test_missing_keys_are_refused() -> None:
    data = pd.DataFrame({"k": [1.0, np.nan]})
    for missing in (float("nan"), None):
        query = Count(epsilon=1.0).on(by="k", keys=[1.0, missing])
        assert isinstance(_nothing_spent(query, data), dpkit.InvalidParameter)


def test_categories_that_are_one_value_of_the_column_are_refused() -> None:
    data = pd.DataFrame({"c": ["1", "2"]})
    query = Histogram(categories=[1, "1", 2], epsilon=1.0).on("c")
    assert isinstance(_nothing_spent(query, data), dpkit.InvalidParameter)


def test_keys_one_group_in_a_spec_over_a_csv_exit_before_the_spend(rt: Any, tmp_path: Path) -> None:
    """The CLI: a CSV's labels are text, so the spec's keys 1 and "1" are one group."""
    rt.write_csv(tmp_path / "data.csv", ["user", "city", "v"], [(1, "1", 0), (2, "1", 0)])
    spec = rt.query_spec(
        "count",
        "v",
        epsilon=1.0,
        session_epsilon=10.0,
        group_by={"columns": ["city"], "keys": [1, "1"]},
        privacy_unit={"kind": "id", "column": "user", "max_rows": 1, "max_groups": 1},
    )
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.run_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    assert "keys" in str(rt.assert_clean_refusal(result))
    assert not (tmp_path / "l.sqlite").exists() or rt.ledger_spent(tmp_path / "l.sqlite") == 0


# -- object columns are read as text, the same rows on every engine ---------------------------


def test_object_ids_are_their_text_on_pandas() -> None:
    """1, 1.0, True and −0.0 in an object id column are four ids ("1", "1.0", "True", "-0.0"),
    as Dask's default string conversion reads them: a person's R rows are the same on every
    engine (the cluster tests compare pandas with Dask)."""
    data = pd.DataFrame(
        {"user": pd.Series([1, 1.0, True, -0.0, 1, 1], dtype=object), "city": ["a"] * 6}
    )
    query = Count(epsilon=1.0).on(
        by="city", keys=["a"], unit=dpkit.IdUnit("user", max_rows=2, max_groups=1)
    )
    # "1" has three rows (kept: 2), the others one each: 2 + 1 + 1 + 1.
    assert query.aggregate(data, rng=np.random.default_rng(0)).values["count"].tolist() == [5]
    as_text = data.astype({"user": "string"})
    assert query.aggregate(as_text, rng=np.random.default_rng(0)).values["count"].tolist() == [5]


def test_object_keys_are_released_as_their_text() -> None:
    data = pd.DataFrame({"k": pd.Series([1] * 300 + [1.0] * 300 + ["1"] * 300, dtype=object)})
    query = Count(epsilon=1.0).on(by="k", keys=PrivateKeys(epsilon=1.0, delta=1e-6))
    assert query.aggregate(data).keys == (("1",), ("1.0",))


@pytest.mark.parametrize("cells", [[], [None], ["a", "b"], ["a", 2], [True]])
def test_an_object_columns_kind_does_not_depend_on_its_values(cells: list[Any]) -> None:
    """Attack: narwhals infers a pandas object column's type from its values (empty, missing
    or all text: a text column). Whether a key ``True`` or a sum over the column was refused
    then told whether one person's non-text cell was in the data; now both are read as an
    object column, whatever it holds."""
    data = pd.DataFrame({"k": pd.Series(cells, dtype=object), "v": pd.Series(cells, dtype=object)})
    Count(epsilon=1.0).on(by="k", keys=[True, "a"]).check_input(data)
    Sum(lower=0, upper=1, epsilon=1.0).on("v").check_input(data)


# -- encoded Arrow columns --------------------------------------------------------------------


def _chunked_dictionaries(users: list[str], cities: list[str]) -> pa.Table:
    """Two record batches, each with its own dictionaries (``pa.Table.from_batches``)."""
    batches = [
        pa.record_batch(
            {
                "user": pa.array(users[a:b]).dictionary_encode(),
                "city": pa.array(cities[a:b]).dictionary_encode(),
                "minutes": pa.array([10.0] * (b - a)),
            }
        )
        for a, b in ((0, 2), (2, len(users)))
    ]
    return pa.Table.from_batches(batches)


QUERIES = {
    "public": Sum(lower=0, upper=60, epsilon=1.0).on(
        "minutes", by="city", keys=["x", "y", "z"], unit=dpkit.IdUnit("user", 1, max_groups=1)
    ),
    "private": Count(epsilon=1.0).on(
        by="city",
        keys=PrivateKeys(epsilon=1.0, delta=1e-6),
        unit=dpkit.IdUnit("user", max_rows=1, max_groups=1),
    ),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_chunks_with_differing_dictionaries_release(name: str) -> None:
    """Attack: id and key columns dictionary-encoded per chunk. The release spent, then failed
    ("Unifying differing dictionaries") exactly when one person's row added a value to the
    second chunk: a one-bit channel, and a spend with no result. Both neighbours now release,
    with the aggregates of the same table unencoded."""
    query = QUERIES[name]
    without = _chunked_dictionaries(["a", "b", "a"], ["x", "y", "x"])
    with_person = _chunked_dictionaries(["a", "b", "a", "c"], ["x", "y", "x", "z"])
    for table in (without, with_person):
        with dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:") as session:
            session.release(query, table, rng=np.random.default_rng(1))
        plain = table.cast(
            pa.schema([("user", pa.string()), ("city", pa.string()), ("minutes", pa.float64())])
        )
        rng = np.random.default_rng(2)
        assert query.aggregate(table, rng=rng).identical(
            query.aggregate(plain, rng=np.random.default_rng(2))
        )


def test_a_parquet_file_read_with_dictionaries_releases(tmp_path: Path) -> None:
    path = tmp_path / "visits.parquet"
    table = pa.table({"user": ["a", "b", "c", "d"], "city": ["x", "y", "x", "z"]})
    pq.write_table(table, path, row_group_size=1)
    read = pq.read_table(path, read_dictionary=["user", "city"])
    assert pa.types.is_dictionary(read.schema.field("city").type) and read["city"].num_chunks > 1
    query = Count(epsilon=1.0).on(
        by="city", keys=["x", "y", "z"], unit=dpkit.IdUnit("user", max_rows=1, max_groups=1)
    )
    with dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:") as session:
        session.release(query, read, rng=np.random.default_rng(1))
    assert query.aggregate(read).values["count"].tolist() == [2, 1, 1]


@pytest.mark.parametrize(
    "encode",
    [
        lambda a: a.cast(pa.string_view()),
        lambda a: a.cast(pa.large_string()),
        lambda a: pc.run_end_encode(a),
        lambda a: a.dictionary_encode(),
    ],
    ids=["string_view", "large_string", "run_end_encoded", "dictionary"],
)
def test_encoded_text_columns_release_whether_or_not_empty(encode: Any) -> None:
    """Attack: a ``string_view`` column failed after the spend on every non-empty table while an
    empty one released, so the outcome said whether the table was empty."""
    query = Count(epsilon=1.0).on(
        by="city", keys=["x", "y"], unit=dpkit.IdUnit("user", max_rows=1, max_groups=1)
    )
    for users, cities in (([], []), (["a", "b", "c"], ["x", "y", "x"])):
        table = pa.table(
            {
                "user": encode(pa.array(users, pa.string())),
                "city": encode(pa.array(cities, pa.string())),
            }
        )
        with dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:") as session:
            session.release(query, table, rng=np.random.default_rng(1))
        expected = [2, 1] if users else [0, 0]
        assert query.aggregate(table, rng=np.random.default_rng(0)).values["count"].tolist() == (
            expected
        )


# -- the geometric mechanism's rounding --------------------------------------------------------


def test_geometric_refuses_float_answers_before_the_spend() -> None:
    """Attack: geometric rounded half to even, which is not 1-Lipschitz: 0.5 → 0 and 1.5 → 2
    are Δ = 1 apart before and 2 after (ratio 7.4 against e^ε = 2.72). No rounding of real
    vectors keeps an L1 sensitivity, so a float array is refused in the public phase."""
    geometric = dpkit.mechanism("geometric", epsilon=1.0, sensitivity=1.0)
    for answers in (np.array([0.5]), np.array([[1.0, 2.0]]), np.array([], dtype=np.float32)):
        refused = _nothing_spent(geometric, answers)
        assert isinstance(refused, dpkit.InvalidData) and "integers" in str(refused)


def test_geometric_rounds_python_values_down() -> None:
    """A list's values are data (their types too): integers are kept exactly, other numbers
    rounded down, which moves one answer by at most an integer Δ (⌊x + n⌋ = ⌊x⌋ + n, ⌊·⌋
    monotone), unlike rounding to the nearest."""
    geometric = dpkit.mechanism("geometric", epsilon=1.0, sensitivity=1.0)
    coerce = geometric.coerce
    assert coerce(np.array([0.5, 1.5], dtype=object)).tolist() == [0, 1]
    assert coerce(np.array([2**53 + 1, -2.5, True], dtype=object)).tolist() == [2**53 + 1, -3, 1]
    rng = np.random.default_rng(3)
    x = rng.uniform(-50, 50, 20_000)
    for delta in (1, 2, 3):
        shifted = x + rng.uniform(-delta, delta, x.size)
        moved = coerce(shifted.astype(object)) - coerce(x.astype(object))
        assert np.abs(moved).max() <= delta
    with dpkit.Session(budget=(10.0, 0.0), ledger=":memory:") as session:
        session.release(geometric, [0.5, 3, "x", None], rng=np.random.default_rng(0))


MECHANISMS = {
    "laplace": {"epsilon": 1.0, "sensitivity": 1.0},
    "gaussian": {"epsilon": 1.0, "delta": 1e-6, "sensitivity": 1.0},
    "exponential": {"epsilon": 1.0},
    "report_noisy_max": {"epsilon": 1.0},
}


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@pytest.mark.parametrize("dtype", ["int64", "uint64", "O"])
def test_answers_beyond_the_doubles_stay_neighbours(name: str, dtype: str) -> None:
    """2⁵³ + 1 and 2⁵³ + 2 (1 apart) rounded to the nearest double are 2⁵³ and 2⁵³ + 2, 2
    apart; clamped to ±2⁵³ (inside, every integer is a double) they stay within 1."""
    mechanism = dpkit.mechanism(name, **MECHANISMS[name])
    x, y = (np.array([2**53 + k, 0], dtype=dtype) for k in (1, 2))
    out_x, out_y = (np.asarray(mechanism.coerce(a, rng=None), dtype=np.float64) for a in (x, y))
    assert abs(out_y[0] - out_x[0]) <= 1.0, (out_x, out_y)

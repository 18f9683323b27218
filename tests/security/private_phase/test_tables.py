"""Red-team tests of the table paths: grouped and per-id specs, CSV and Parquet columns, and
DataFrame inputs through the Python API (on top of the privacy boundary).

An analyst who writes specs, or passes tables to a session, tries to learn about one person
from anything but the DP release: whether a group key exists (through errors, exit codes or
the released key set), what an id cell holds, whether some cell is malformed, or by declaring
no contribution bounds. Each attack compares everything observable between neighbouring
datasets (one person's rows added or removed, or one cell changed), released fields removed;
equal observations carry no information about the difference.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import narwhals.stable.v2  # noqa: F401  (imported once here: the forked CLI runs inherit it)
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute
import pyarrow.csv
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum

import dpkit

pytestmark = pytest.mark.integration

ROW = 40  # every CSV row is padded to this width: neighbouring files have equal sizes


def _csv(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    lines = ["user,city,minutes,pad"]
    for user, city, minutes in rows:
        body = f"{user},{city},{minutes},"
        lines.append(body + "x" * (ROW - len(body)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _base() -> list[tuple[Any, ...]]:
    cities = ["Lyon", "Paris", "Lille"]
    return [(f"u{i:03d}", cities[i % 3], (i * 7) % 90) for i in range(120)]


def _spec(query: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "dpkit": "1",
        "dataset": "tables",
        "session_budget": {"epsilon": 1000, "delta": 0.01},
        "statistic": "count",
        "input": {"source": "csv", "path": "data.csv", "column": "minutes"},
        "privacy_unit": {"kind": "id", "column": "user", "max_rows": 2, "max_groups": 1},
        "budget": {"epsilon": 0.5},
    }
    spec.update(query)
    return spec


PROBES = {
    "public_keys_naming_a_rare_city": {
        "group_by": {"columns": ["city"], "keys": ["Lyon", "Brest"]},
    },
    "private_keys": {
        "group_by": {
            "columns": ["city"],
            "keys": "private",
            "selection": {"epsilon": 0.5, "delta": 1e-6},
        },
    },
    "sum_by_city": {
        "statistic": "sum",
        "params": {"lower": 0, "upper": 60},
        "group_by": {"columns": ["city"], "keys": ["Brest", "Paris"]},
    },
    "histogram_of_cities": {
        "statistic": "histogram",
        "params": {"categories": ["Brest", "Lyon"], "other": True},
        "input": {"source": "csv", "path": "data.csv", "column": "city"},
    },
}


def _strip_keys(document: Any) -> Any:
    """The released key set is part of a private-keys release: removed before comparing."""
    if isinstance(document, dict):
        return {k: _strip_keys(v) for k, v in document.items() if k != "keys"}
    if isinstance(document, (list, tuple)):  # observable() is a tuple (code, stderr, document)
        return type(document)(_strip_keys(v) for v in document)
    return document


def _world(rt: Any, world: Path, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    _csv(world / "data.csv", rows)
    out = {}
    for name, query in PROBES.items():
        rt.write_json(world / f"{name}.json", _spec(copy.deepcopy(query)))
        result = rt.fork_cli("run", "--json", f"{name}.json", "--ledger", "l.sqlite", cwd=world)
        out[name] = result
    return out


@pytest.mark.parametrize(
    "person",
    [
        [("p999", "Brest", 30)] * 5,  # a city only this person visited
        [("p999", "Paris", 89)] * 30,  # a heavy user of a common city
        [("p999", "", 1), ("p999", "Lyon", "NA")],  # a missing key and a missing value
    ],
    ids=["rare_key", "many_rows", "missing_cells"],
)
def test_one_persons_rows_change_nothing_but_the_release(
    rt: Any, tmp_path: Path, person: list[tuple[Any, ...]]
) -> None:
    """Attack: probe with grouped and per-id specs whether a person is in the data (a key only
    they hold, many rows, missing cells). Recovered: nothing outside the release — exit
    codes, stderr and every non-released field are equal with and without the person."""
    rows = _base()
    without = _world(rt, tmp_path / "without", rows)
    with_person = _world(rt, tmp_path / "with", rows[:60] + person + rows[60:])
    for name in PROBES:
        a, b = without[name], with_person[name]
        assert a.returncode == b.returncode == 0, a.explain() + b.explain()
        assert _strip_keys(a.observable()) == _strip_keys(b.observable()), a.explain() + b.explain()
    rt.assert_not_echoed(list(with_person.values()), ["p999"])


@pytest.mark.parametrize(
    "cell",
    ["", "NA", "\x00", "ü" * 3, "carol_has_hiv", '"', "1,2"],
    ids=["empty", "NA", "nul", "non_ascii", "canary", "quote", "comma"],
)
def test_odd_id_and_key_cells_are_private(rt: Any, tmp_path: Path, cell: str) -> None:
    """Attack: an id or key cell that might break the reader (a quote swallows the rest of
    the file as one record; a comma adds a field, so the record is dropped): the run with it
    and the run with a plain cell look alike, and the cell is never echoed."""
    observed = []
    for name, value in (("odd", cell), ("plain", "u500")):
        world = tmp_path / name
        rows = _base()
        rows.insert(50, (value, value or "Lyon", 10))
        _csv(world / "data.csv", rows)
        rt.write_json(world / "spec.json", _spec(PROBES["private_keys"]))
        observed.append(
            rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        )
    odd, plain = observed
    assert odd.returncode == plain.returncode == 0, odd.explain()
    assert _strip_keys(odd.observable()) == _strip_keys(plain.observable())
    if cell not in ("", "NA", '"', "1,2"):
        rt.assert_not_echoed([odd], [cell])


@pytest.mark.parametrize(
    "unit",
    [
        {"kind": "id", "column": "user", "max_rows": 2},  # grouped without max_groups
        {"kind": "id", "column": "user", "max_rows": 0, "max_groups": 1},
        {"kind": "id", "column": "user", "max_groups": 1},  # rows not declared
        {"kind": "id", "column": "nobody", "max_rows": 1, "max_groups": 1},
        {"kind": "record", "column": "user"},
    ],
    ids=["no_max_groups", "zero_rows", "no_max_rows", "unknown_column", "record_with_column"],
)
def test_undeclared_or_bad_bounds_are_refused_whatever_the_data(
    rt: Any, tmp_path: Path, unit: dict[str, Any]
) -> None:
    """A bound that is not declared is not assumed: refused before any value is read, with
    the same refusal on neighbouring data, nothing spent."""
    refusals = []
    for name, rows in (("a", _base()), ("b", _base() + [("p999", "Brest", 1)] * 9)):
        world = tmp_path / name
        _csv(world / "data.csv", rows)
        rt.write_json(
            world / "spec.json",
            _spec({**PROBES["public_keys_naming_a_rare_city"], "privacy_unit": unit}),
        )
        result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        rt.assert_clean_refusal(result)
        assert rt.ledger_spent(world / "l.sqlite") == 0
        refusals.append(result.observable())
    assert refusals[0] == refusals[1]


def test_parquet_header_and_footer_are_not_echoed(rt: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    secret = "carol_has_hiv"
    pq.write_table(pa.table({secret: [1.0, 2.0], "user": ["a", "b"]}), tmp_path / "d.parquet")
    spec = _spec({"input": {"source": "parquet", "path": "d.parquet", "column": "minutes"}})
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    document = rt.assert_clean_refusal(result)
    assert [e["code"] for e in document["errors"]] == ["column_not_found"]
    rt.assert_not_echoed([result], [secret])


# -- the Python API: DataFrames with odd dtypes and values ------------------------------------


class _Raising:
    """A value whose every comparison and conversion raises with a secret."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("SECRET")

    def __hash__(self) -> int:
        raise RuntimeError("SECRET")

    def __float__(self) -> float:
        raise RuntimeError("SECRET")


def _odd(kind: str) -> Any:
    data = {
        "user": pd.Series([1, [2], _Raising(), "3", np.nan, 7, 7], dtype=object),
        "city": pd.Series(["a", {"k": 1}, _Raising(), 1, np.nan, "b", "a"], dtype=object),
        "minutes": pd.Series([1.0, 2, "x", None, _Raising(), np.inf, 1e308], dtype=object),
    }
    frame = pd.DataFrame(data)
    if kind == "pandas":
        return frame
    plain = pd.DataFrame(
        {
            "user": [1, 2, None, 3, 3, 7, 7],
            "city": ["a", None, "b", "a", "b", "b", "a"],
            "minutes": [1.0, float("nan"), None, float("inf"), -1e308, 2.0, 3.0],
        }
    )
    return pl.from_pandas(plain) if kind == "polars" else pa.Table.from_pandas(plain)


QUERIES = [
    Count(epsilon=1.0).on("minutes", by="city", keys=["a", "b"]),
    Sum(lower=0, upper=5, epsilon=1.0).on(
        "minutes", by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6)
    ),
    Mean(lower=0, upper=5, epsilon=1.0).on("minutes", by="city", keys=["a"]),
    Quantile(q=0.5, lower=0, upper=5, epsilon=1.0).on("minutes", by="city", keys=["a", "b"]),
    Histogram(categories=("a", "b"), epsilon=1.0, other=True).on("city"),
]


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("index", range(len(QUERIES)))
def test_dataframes_with_odd_values_never_fail_after_the_spend(
    kind: str, rng: str, index: int
) -> None:
    """Unhashable keys, values whose comparison raises, NaN, ±inf, huge numbers, missing ids:
    every record is handled on its own; the release never raises (a ReleaseFailed here would
    tell the analyst that some value is odd)."""
    query = QUERIES[index]
    unit = dpkit.IdUnit("user", max_rows=2, max_groups=2)
    generator = None if rng == "secure" else np.random.default_rng(0)
    for target in (
        query,
        type(query)(query.statistic, column=query.column, by=query.by, keys=query.keys, unit=unit),
    ):
        session = dpkit.Session(budget=(100.0, 1e-3), ledger=":memory:")  # one per unit
        release = session.release(target, _odd(kind), rng=generator)
        assert release.values.query == query.name


def test_dataframe_schema_refusals_depend_on_the_schema_only() -> None:
    """A refused table (a missing column, a text value column for a sum, keys of another type)
    is refused by its schema: the same refusal whatever the values, and nothing spent."""
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    messages = []
    for values in ([1, 2, 3], [1, 2, 7355608]):
        table = pl.DataFrame({"age": values, "amount": ["1", "2", "3"]})
        for target in (
            Sum(lower=0, upper=5, epsilon=1.0).on("amount"),
            Sum(lower=0, upper=5, epsilon=1.0).on("missing"),
            Count(epsilon=1.0).on(by="age", keys=["twenty"]),
        ):
            with pytest.raises(dpkit.DPKitError) as info:
                session.release(target, table)
            messages.append(str(info.value))
    assert messages[:3] == messages[3:]
    assert all("7355608" not in m for m in messages)
    assert session.spent.epsilon == 0
    json.dumps(messages)


def test_a_polars_object_column_is_released_whether_or_not_it_has_rows() -> None:
    """Attack: a Polars ``Object`` column as the id, the group or a histogram's value column.
    Its cells are read as text, which was built back as an ``Object`` column: Polars refuses
    that, so the release failed after the spend exactly when the table had a row — whether
    one person is in the data. Now the texts are a String column, and the release is that of
    the same cells in a pandas object column."""
    cells = {"user": [1, "1", b"1", 2], "city": ["a", 1, "a", b"a"], "minutes": ["a", 1, "b", "a"]}
    columns = {name: pd.Series(values, dtype=object) for name, values in cells.items()}
    rows = pd.DataFrame(columns)
    polars = pl.DataFrame(
        {name: pl.Series(name, list(s), dtype=pl.Object) for name, s in columns.items()}
    )
    unit = dpkit.IdUnit("user", max_rows=2, max_groups=1)
    query = Histogram(categories=("a", "1"), epsilon=1.0).on(
        "minutes", by="city", keys=["a", "1"], unit=unit
    )
    for table in (polars, polars.head(0)):
        session = dpkit.Session(budget=(100.0, 1e-3), ledger=":memory:")
        session.release(query, table, rng=np.random.default_rng(0))
    found = [query.aggregate(t, rng=np.random.default_rng(1)) for t in (polars, rows)]
    assert found[0].identical(found[1]) and found[0].values["cells"].sum() > 0


def test_a_polars_lazy_frame_is_refused_as_its_data_frame_is() -> None:
    """Attack: a histogram over a Polars ``Enum`` column naming a category outside the enum.
    Polars refuses to compare the column with it; on a DataFrame the public phase finds that
    on no rows of the table, but a LazyFrame was not tried, and the release failed after the
    spend. Now a LazyFrame is tried on an empty DataFrame of its schema (no row is read)."""
    table = pl.DataFrame({"v": pl.Series(["a", "b"], dtype=pl.Enum(["a", "b"]))})
    query = Histogram(categories=("a", "zz"), epsilon=1.0).on("v")
    for frame in (table, table.lazy()):
        session = dpkit.Session(budget=(100.0, 1e-3), ledger=":memory:")
        with pytest.raises(dpkit.InvalidData):
            session.release(query, frame, rng=np.random.default_rng(0))
        assert session.spent.epsilon == 0

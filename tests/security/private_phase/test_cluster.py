"""Red-team tests of the cluster paths: table queries on Dask and Spark DataFrames.

An analyst who hands a session an engine's DataFrame tries to learn about one person from
anything but the DP release:

* by a refusal that would need the data (the public phase must decide from the schema, the
  declared parameters and the budget alone — here the frames are *poisoned*: computing any
  partition raises, so a public phase that ran the engine would fail with that error instead
  of the typed refusal);
* by the order of spend and read (the engine may run only after the spend is committed: a
  poisoned frame with enough budget spends, then fails as ``ReleaseFailed`` with a message
  that names neither the data nor the engine's error);
* by whatever a person's rows change besides the release (one person's rows added, spread
  over several partitions, with a key only they hold);
* by odd values that might make an engine or the bounding raise after the spend.

Dask runs on the test session's LocalCluster (2 worker processes), Spark in local mode, and
Spark Connect as a client of the tests' Connect server (its own process): a Connect DataFrame
is a different class with a lazier contract (its plan is analysed on the server, on demand).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum

import dpkit

# On the Spark session: in the Spark run, one Spark session for the run (tests/conftest.py).
pytestmark = [pytest.mark.cluster, pytest.mark.spark]

UNIT = dpkit.IdUnit("user", max_rows=2, max_groups=1)
ENGINES = ["dask", "spark", "spark_connect"]


def _people(extra: list[tuple[Any, ...]] = ()) -> pd.DataFrame:  # type: ignore[assignment]
    cities = ["Lyon", "Paris", "Lille"]
    rows = [(f"u{i % 70:03d}", cities[i % 3], float((i * 7) % 90), i % 50) for i in range(300)]
    for at, row in enumerate(extra):  # the person's rows spread through the table
        rows.insert(37 * at % len(rows), row)
    return pd.DataFrame(rows, columns=["user", "city", "minutes", "age"])


def _dask(table: pd.DataFrame, client: Any) -> Any:
    import dask.dataframe as dd

    return dd.from_pandas(table, npartitions=3, sort=False)


def _spark(table: pd.DataFrame, session: Any) -> Any:
    return session.createDataFrame(table).repartition(3)


def _frame(request: pytest.FixtureRequest, engine: str, table: pd.DataFrame) -> Any:
    if engine == "dask":
        return _dask(table, request.getfixturevalue("dask_client"))
    return _spark(table, request.getfixturevalue(engine))  # spark, spark_connect


def _explode(part: Any) -> Any:
    raise RuntimeError("the engine ran")


def _explode_batches(batches: Any) -> Any:
    raise RuntimeError("the engine ran")
    yield  # a generator, as mapInPandas wants: raises on the partition's first batch


def _poisoned(request: pytest.FixtureRequest, engine: str) -> Any:
    """A frame with the table's schema whose every partition raises when computed (on Spark
    a pandas function of every partition, which no column pruning can skip)."""
    frame = _frame(request, engine, _people())
    if engine == "dask":
        return frame.map_partitions(_explode, meta=dict(frame.dtypes))
    return frame.mapInPandas(_explode_batches, frame.schema)


REFUSALS = {
    "missing_column": (Sum(lower=0, upper=5, epsilon=1.0).on("hours"), dpkit.InvalidData),
    "text_value_column": (Sum(lower=0, upper=5, epsilon=1.0).on("city"), dpkit.InvalidData),
    "keys_of_another_type": (
        Count(epsilon=1.0).on(by="age", keys=["twenty"], unit=UNIT),
        dpkit.InvalidParameter,
    ),
    "over_budget": (
        Mean(lower=0, upper=5, epsilon=5.0).on("minutes", by="city", keys=["Lyon"], unit=UNIT),
        dpkit.BudgetExceeded,
    ),
}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_public_phase_never_runs_the_engine(
    request: pytest.FixtureRequest, engine: str
) -> None:
    """Attack: refusals that would need the data. Every refusal comes from the schema, the
    declared parameters and the budget — the poisoned frame is never computed — and nothing
    is spent; accuracy before spending reads nothing either."""
    frame = _poisoned(request, engine)
    session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:")
    for name, (query, error) in REFUSALS.items():
        with pytest.raises(error):
            session.release(query, frame)
        assert session.spent.epsilon == 0, name
    assert (
        Sum(lower=0, upper=5, epsilon=1.0)
        .on("minutes", by="city", keys=["Lyon"], unit=UNIT)
        .accuracy(0.05)
        .half_width
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_the_engine_runs_only_after_the_spend(request: pytest.FixtureRequest, engine: str) -> None:
    """Attack: make the private phase fail to learn something from how. The spend is
    committed first (it stays), and the failure is a ReleaseFailed whose message says
    nothing of the engine's error."""
    frame = _poisoned(request, engine)
    session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:")
    query = Sum(lower=0, upper=5, epsilon=0.5).on("minutes", by="city", keys=["Lyon"], unit=UNIT)
    with pytest.raises(dpkit.ReleaseFailed) as info:
        session.release(query, frame)
    assert session.spent.epsilon == Fraction(1, 2)
    assert "engine ran" not in str(info.value) and "division" not in str(info.value)


PROBES = {
    "sum": Sum(lower=0, upper=90, epsilon=1.0).on(
        "minutes", by="city", keys=["Lyon", "Brest"], unit=UNIT
    ),
    "quantile": Quantile(q=0.5, lower=0, upper=90, epsilon=1.0).on(
        "minutes", by="city", keys=["Brest", "Paris"], unit=UNIT
    ),
    "private_keys": Count(epsilon=1.0).on(
        by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6), unit=UNIT
    ),
}


def _observable(release: Any) -> dict[str, Any]:
    """Everything a release shows except the released values (and, for private keys, the
    released key set, which is part of the DP release)."""
    result, entry = release.values, release.entry
    private = isinstance(entry.parameters["keys"], dict)  # PrivateKeys' (ε, δ), not a list
    assert private or isinstance(entry.parameters["keys"], list)  # public: the declared list
    return {
        "keys": None if private else result.keys,
        "mechanism": result.mechanism,
        "privacy": result.privacy,
        "noise_scale": result.noise_scale,
        "unit": result.unit,
        "backend": result.backend,
        "entry": (entry.mechanism, entry.parameters, entry.event, entry.cost, entry.randomness),
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_one_persons_rows_change_nothing_but_the_release(
    request: pytest.FixtureRequest, engine: str
) -> None:
    """Attack: is p999 — 30 rows in a city nobody else visits and in a common one, spread
    over every partition — in the data? Everything but the release is equal with and
    without them, on the engine, in secure mode."""
    person = [("p999", "Brest", 80.0, 41)] * 15 + [("p999", "Paris", 89.0, 41)] * 15
    worlds = {
        name: _frame(request, engine, _people(rows))
        for name, rows in (("without", []), ("with", person))
    }
    for name, query in PROBES.items():
        seen = []
        for frame in worlds.values():
            session = dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:")
            seen.append(_observable(session.release(query, frame)))
        assert seen[0] == seen[1], name


def _odd_dask(client: Any) -> Any:
    """Object columns with values no group-by or hash expects: unhashable lists and dicts, a
    signalling NaN whose comparison raises, a lone surrogate, bytes, huge and exact numbers,
    and ids equal in value but not in type (1, 1.0, True: three ids, read as their text)."""
    import dask.dataframe as dd

    ids = [
        1,
        1.0,
        True,
        [2],
        {"k": 1},
        Decimal("sNaN"),
        "\ud800",
        b"x",
        10**400,
        Fraction(1, 3),
        None,
        np.nan,
        "u7",
        "u7",
    ]
    cities = [
        "a",
        "a",
        "b",
        ["a"],
        Decimal("sNaN"),
        "\ud800",
        None,
        np.nan,
        1,
        1.0,
        "b",
        "a",
        "a",
        "b",
    ]
    minutes = [
        1.0,
        2,
        "x",
        None,
        Decimal("sNaN"),
        np.inf,
        -np.inf,
        1e308,
        10**400,
        Fraction(1, 3),
        b"1",
        [1],
        3.0,
        4.0,
    ]
    table = pd.DataFrame(
        {
            "user": pd.Series(ids, dtype=object),
            "city": pd.Series(cities, dtype=object),
            "minutes": pd.Series(minutes, dtype=object),
        }
    )
    import dask

    with dask.config.set({"dataframe.convert-string": False}):  # keep the Python objects
        return dd.from_pandas(table, npartitions=4, sort=False)


def _odd_spark(session: Any) -> Any:
    from pyspark.sql import types

    schema = types.StructType(
        [
            types.StructField("user", types.StringType()),
            types.StructField("city", types.StringType()),
            types.StructField("minutes", types.DoubleType()),
        ]
    )
    rows = [
        ("u1", "a", 1.0), (None, "a", 2.0), ("u2", None, 3.0), ("u3", "b", float("nan")),
        ("u3", "b", float("inf")), ("", "", -float("inf")), ("ü" * 50, "a", 1e308),
        ("u4", "a", None), ("u4", "a", -0.0), ("u5", "\x00", 5.0),
    ]  # fmt: skip
    return session.createDataFrame(rows, schema).repartition(4)


ODD_QUERIES = [
    Count(epsilon=1.0).on("minutes", by="city", keys=["a", "b"], unit=UNIT),
    Sum(lower=0, upper=5, epsilon=1.0).on(
        "minutes", by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6), unit=UNIT
    ),
    Quantile(q=0.5, lower=0, upper=5, epsilon=1.0).on("minutes", by="city", keys=["a"], unit=UNIT),
    Histogram(categories=("a", "b"), epsilon=1.0, other=True).on("city", unit=UNIT),
]


# Both random modes on each engine but Spark Connect, whose engine side is Spark's: the mode
# only changes the noise, drawn on the driver (one mode there keeps the suite's time down).
ODD_CASES = [
    (e, r) for e in ENGINES for r in ("secure", "fast") if (e, r) != ("spark_connect", "fast")
]


@pytest.mark.parametrize(("engine", "rng"), ODD_CASES)
def test_odd_values_never_fail_after_the_spend(
    request: pytest.FixtureRequest, engine: str, rng: str
) -> None:
    """Every record is handled on its own on the engine too: no value makes the bounding's
    shuffle, its hashing or an aggregation raise (a ReleaseFailed would say some value is
    odd). Also a table with no rows, and one whose partitions are partly empty."""
    if engine == "dask":
        odd = _odd_dask(request.getfixturevalue("dask_client"))
    else:
        odd = _odd_spark(request.getfixturevalue("spark"))
    if engine == "dask":
        frames = [odd, odd.loc[odd.index < 0], odd.loc[odd.index < 2]]
    else:
        frames = [odd, odd.limit(0), odd.filter("user = 'u1'")]
    generator = None if rng == "secure" else np.random.default_rng(0)
    session = dpkit.Session(budget=(100.0, 1e-3), ledger=":memory:")
    for frame in frames:
        for query in ODD_QUERIES:
            release = session.release(query, frame, rng=generator)
            assert release.values.query == query.name


def test_the_public_dry_run_uses_a_dask_frames_empty_meta(request: pytest.FixtureRequest) -> None:
    """The public phase tries a query on no rows of its table (column types an engine cannot
    process are refused before the spend); for a Dask frame that is the frame's empty pandas
    ``_meta`` — the same dtypes, and the poisoned partitions are never computed."""
    import narwhals as nw
    from dpkit_central.tables import _empty_like

    frame = _poisoned(request, "dask")
    empty = _empty_like(nw.from_native(frame))
    assert isinstance(empty, nw.DataFrame) and empty.shape[0] == 0
    assert dict(empty.to_native().dtypes) == dict(frame.dtypes)
    for engine in ("spark", "spark_connect"):  # Spark offers no local empty frame
        assert _empty_like(nw.from_native(_poisoned(request, engine))) is None


SPARK_ENGINES = ["spark", "spark_connect"]


def test_a_connect_plan_that_does_not_analyse_is_refused_before_the_spend(
    request: pytest.FixtureRequest,
) -> None:
    """Attack: a Connect DataFrame is only a plan — the server analyses it on demand, so a
    frame may name a column, a table or an expression that does not resolve. The public phase
    asks for the schema (an analysis, no job): a typed refusal, nothing spent, and none of the
    engine's message (a schema inferred from a file's rows could quote them)."""
    session_on_server = request.getfixturevalue("spark_connect")
    frame = _spark(_people(), session_on_server)
    unresolved = {
        "column": frame.select("nope", "minutes"),
        "expression": frame.filter("minutes >>> 3"),
        "table": session_on_server.table("dpkit_no_such_table"),
    }
    session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:")
    query = Sum(lower=0, upper=5, epsilon=1.0).on("minutes", by="city", keys=["Lyon"], unit=UNIT)
    for name, plan in unresolved.items():
        with pytest.raises(dpkit.InvalidData) as refused:
            session.release(query, plan)
        assert "AnalysisException" in str(refused.value), name
        assert not any(word in str(refused.value) for word in ("nope", "UNRESOLVED", ">>>"))
        assert session.spent.epsilon == 0, name


@pytest.mark.parametrize("engine", SPARK_ENGINES)
def test_column_types_spark_cannot_process_are_refused_before_the_spend(
    request: pytest.FixtureRequest, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: an id column of a type the engine cannot shuffle into a pandas function
    (an interval, a variant) passes the schema's kind check (ids may be of any type). The
    public phase has Spark analyse the query's whole plan (no job runs: the frame is poisoned),
    and refuses, typed, with nothing spent. Without that analysis the same releases spend and
    then fail — shown on the unpoisoned frame — so the refusal is a real catch."""
    from dpkit_central import tables

    unit = dpkit.IdUnit("uid", max_rows=2, max_groups=1)
    query = Count(epsilon=0.25).on(by="city", keys=["Lyon"], unit=unit)
    types = ("INTERVAL '1' YEAR", """parse_json('{"a": 1}')""")

    def with_id(frame: Any, sql: str) -> Any:
        return frame.selectExpr("*", f"{sql} AS uid")

    session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:")
    for sql in types:
        with pytest.raises(dpkit.InvalidData, match="cannot be processed"):
            session.release(query, with_id(_poisoned(request, engine), sql))
        assert session.spent.epsilon == 0, sql
    monkeypatch.setattr(tables, "_analysable", lambda frame, needs: False)
    for sql in types:
        with pytest.raises(dpkit.ReleaseFailed):
            session.release(query, with_id(_frame(request, engine, _people()), sql))
    assert session.spent.epsilon == Fraction(1, 2)

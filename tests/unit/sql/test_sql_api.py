"""``dpkit.sql``'s own face: the extra, the function and its package, the options, the
result's forms, the accuracy before any data and the ledger's record."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import dpkit

pd = pytest.importorskip("pandas")
pytest.importorskip("sqlglot")
pytest.importorskip("duckdb")

OPTIONS = {"epsilon": 1.0, "privacy_unit_column": "user", "max_groups_contributed": 1}


def _visits() -> Any:
    rng = np.random.default_rng(2)
    return pd.DataFrame(
        {
            "user": rng.integers(0, 50, 300),
            "city": rng.choice(["a", "b"], 300),
            "minutes": rng.uniform(0, 90, 300),
        }
    )


def test_import_dpkit_loads_neither_sqlglot_nor_duckdb() -> None:
    code = (
        "import sys, dpkit; dpkit.Session; print('sqlglot' in sys.modules, 'duckdb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sqlglot", None)
    with pytest.raises(dpkit.errors.MissingDependency, match=r"dpkit\[sql\]"):
        dpkit.sql("SELECT COUNT(*) FROM t", options={"epsilon": 1.0})


def test_the_function_and_its_package_have_different_names() -> None:
    import dpkit.sql_statements.plan

    assert callable(dpkit.sql) and dpkit.sql.__name__ == "sql"
    assert dpkit.sql_statements.plan.plan_statement is not None
    assert dpkit.sql is dpkit.sql_statements.sql


def test_the_budget_is_shared_and_never_exceeded() -> None:
    query = dpkit.sql(
        "SELECT city, COUNT(*), SUM(minutes), AVG(minutes) FROM t GROUP BY city",
        tables={"t": _visits()},
        options={**OPTIONS, "epsilon": 0.3, "delta": 1e-6},
        bounds={"minutes": (0, 60)},
    )
    from fractions import Fraction

    assert Fraction(query.privacy.epsilon) <= Fraction(0.3)
    assert len(query.privacy.parts) == 4  # selection, then the three aggregates
    assert query.privacy.delta == pytest.approx(1e-6)


def test_accuracy_comes_before_any_data() -> None:
    query = dpkit.sql(
        "SELECT city, COUNT(*) FROM t GROUP BY city", options=OPTIONS, keys=["a", "b"]
    )  # no table at all
    ((text, accuracy),) = query.accuracy(0.05)
    assert text == "COUNT(*)" and accuracy.half_width > 0


PLANNED = (
    "SELECT city, COUNT(*) AS n, SUM(minutes) AS total, AVG(minutes) AS mean, "
    "MEDIAN(minutes) AS middle FROM t GROUP BY city"
)


def test_the_accuracy_shares_are_the_statement_cost() -> None:
    """Each aggregate's accuracy carries its own share of the cost (the groups are selected
    once, for every aggregate): with the selection's share they compose to the statement's."""
    from fractions import Fraction

    query = dpkit.sql(
        PLANNED, options={**OPTIONS, "delta": 1e-6}, bounds={"minutes": (0, 60)}
    )  # no table at all
    parts = [accuracy.privacy for _, accuracy in query.accuracy(0.05)]
    selection = query.selection_cost()
    assert selection is not None and len(parts) == 4
    total = sum((Fraction(e.epsilon) for e in [*parts, selection]), Fraction(0))
    assert total == sum((Fraction(e.epsilon) for e in query.privacy.parts), Fraction(0))
    assert all(e.delta == 0 for e in parts) and selection.delta == pytest.approx(1e-6)
    keyed = dpkit.sql(PLANNED, options=OPTIONS, bounds={"minutes": (0, 60)}, keys=["a"])
    assert keyed.selection_cost() is None


@pytest.mark.parametrize("private", [True, False])
def test_the_plan_shows_each_aggregate_as_any_query(
    private: bool, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dpkit sql --plan``, and ``dpkit run --plan``'s table of the spec form: every aggregate with its
    statistic, share of the cost, noise and ± error (no column left without one), and the
    partition selection's share and the ids a group needs where the groups are found."""
    from dpkit.cli import main
    from dpkit.commands._results import format_plan
    from dpkit.spec.preview import preview_spec

    _visits().to_parquet(tmp_path / "t.parquet")
    options = {**OPTIONS, "delta": 1e-6} if private else OPTIONS
    keys = [] if private else ["--keys", "a,b"]
    argv = ["sql", PLANNED, "--table", f"t={tmp_path / 't.parquet'}", "--bounds", "minutes=0:60"]
    argv += [f"--option={k}={v}" for k, v in options.items()] + keys
    argv += ["--ledger", str(tmp_path / "l.sqlite"), "--budget", "5,1e-5", "--plan"]
    assert main(argv) == 0
    shown = capsys.readouterr().out
    spec = {
        "dpkit": "1",
        "statistic": "sql",
        "sql": {
            "statement": PLANNED,
            "tables": {"t": {"source": "parquet", "path": "t.parquet"}},
            "options": {k: v for k, v in options.items() if k not in ("epsilon", "delta")},
            "bounds": {"minutes": [0, 60]},
            **({} if private else {"keys": ["a", "b"]}),
        },
        "budget": {"epsilon": 1.0, **({"delta": 1e-6} if private else {})},
    }
    planned = format_plan(preview_spec(spec, base_dir=tmp_path))  # what dpkit run --plan prints
    for text in (shown, planned):
        assert "n/a" not in text
        lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
        for aggregate, statistic, noise in (
            ("COUNT(*)", "count", "geometric, scale"),
            ("SUM(minutes,", "sum", "laplace, scale"),
            ("AVG(minutes,", "mean", "(sum and count)"),
            ("MEDIAN(minutes,", "quantile", "exponential"),
        ):
            line = lines[aggregate]
            assert f" {statistic} " in line and "ε=0.2" in line and noise in line, line
            assert "±" in line and "(95%)" in line, line
        selection = [line for line in text.splitlines() if "partition selection" in line]
        if private:
            (line,) = selection
            assert "ε=0.2, δ=1e-06" in line and "a group needs" in line and "ids" in line
        else:
            assert not selection


def test_each_released_cell_carries_its_aggregates_interval_through_the_post_processing() -> None:
    """HAVING, ORDER BY and LIMIT filter and reorder the released rows: each cell that shows
    an aggregate still gets that aggregate's interval for the row's own group (found here by
    its key in the aggregate's own rows), a quantile its rank bound, a group column and an
    expression of several aggregates none; the text shows them with their methods."""
    query = dpkit.sql(
        "SELECT city, COUNT(*) AS n, SUM(minutes) / COUNT(*) AS ratio, AVG(minutes) AS mean, "
        "MEDIAN(minutes) AS middle FROM t GROUP BY city HAVING COUNT(*) > -1000 "
        "ORDER BY n ASC LIMIT 3",
        tables={"t": _visits()},
        options=OPTIONS,
        bounds={"minutes": (0, 90)},
        keys=["a", "b", "c", "d"],
    )
    with dpkit.Session(budget=(5.0, 0.0)) as session:
        release = session.release(query, None, rng=np.random.default_rng(4))
    result = release.values
    assert str(release) == f"{result}\n(release {release.release_id}: ε=1, δ=0)"
    parts = dict(result.parts)
    by_key = {
        name: {r[parts[text].by[0]]: r for r in parts[text].rows()}
        for name, text in zip(result.columns, result.shown, strict=True)
        if text is not None
    }
    intervals = result.intervals()
    assert [row[1] for row in result.rows] == sorted(row[1] for row in result.rows)
    assert len(result.rows) == 3 and result.key_columns == ("city",)
    for row, cells in zip(result.rows, intervals, strict=True):
        found = dict(zip(result.columns, cells, strict=True))
        assert found["city"] is None and found["ratio"] is None
        for name in ("n", "mean"):
            own = by_key[name][row[0]]
            assert found[name] == {"lower": own["ci_lower"], "upper": own["ci_upper"]}
        assert found["middle"] == {
            "half_width": parts[result.shown[4]].rank_half_width(0.95),
            "unit": "ranks",
        }
    document = result.to_document()
    assert document["intervals"]["cells"] == [list(cells) for cells in intervals]
    text = str(result)
    assert "±" in text.splitlines()[2] and "[" in text.splitlines()[2] and "ranks" in text
    assert "n (95%): exact quantiles of the privacy noise" in text


def test_outputs_named_as_dpkits_own_columns_are_released() -> None:
    """The column that carries each row's group through the post-processing takes a name no
    output has (DuckDB's names ignore case): one named like it is released, not a failure
    after the spend."""
    query = dpkit.sql(
        "SELECT city AS __DPKIT_GROUP_, COUNT(*) AS __dpkit_group FROM t GROUP BY city ORDER BY 2",
        tables={"t": _visits()},
        options=OPTIONS,
        keys=["a", "b"],
    )
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        result = session.release(query, None, rng=np.random.default_rng(0)).values
    assert result.columns == ("__DPKIT_GROUP_", "__dpkit_group")
    (count,) = (part for _, part in result.parts)
    order = [{"a": 0, "b": 1}[row[0]] for row in result.rows]
    assert result.groups == tuple(order) and sorted(order) == [0, 1]
    assert [k[0] for k in count.keys] == ["a", "b"]


def test_dpkit_sql_prints_each_value_with_its_error_and_the_history_reads_it(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpkit.cli import main

    _visits().to_parquet(tmp_path / "t.parquet")
    statement = "SELECT city, COUNT(*) AS n, AVG(minutes) AS m FROM t GROUP BY city"
    argv = ["sql", statement, "--table", f"t={tmp_path / 't.parquet'}", "--keys", "a,b"]
    argv += [f"--option={k}={v}" for k, v in OPTIONS.items()] + ["--bounds", "minutes=0:90"]
    ledger = str(tmp_path / "l.sqlite")
    assert main([*argv, "--ledger", ledger, "--budget", "5", "--seed", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split() == ["city", "n", "m"]
    for row in rows[2:4]:
        city, _, plus, mean, lower, upper = row.replace(",", "").split()
        assert city in ("a", "b") and plus.startswith("±") and lower.startswith("[")
        assert float(lower[1:]) <= float(mean) <= float(upper[:-1])
    assert rows[4].startswith("n (95%): exact quantiles") and rows[5].startswith("m (95%)")
    assert main(["budget", "history", "--ledger", ledger]) == 0
    assert "a / n " in capsys.readouterr().out  # the stored table read, not a JSON dump


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow", "duckdb"])
def test_the_result_comes_back_in_the_form_asked(kind: str) -> None:
    query = dpkit.sql(
        "SELECT city, COUNT(*) AS n FROM t GROUP BY city ORDER BY city",
        tables={"t": _visits()},
        options=OPTIONS,
        keys=["a", "b"],
        output=kind,
    )
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        table = session.release(query, None, rng=np.random.default_rng(0)).values.table()
    module = {"pandas": "pandas", "polars": "polars", "arrow": "pyarrow", "duckdb": "duckdb"}
    assert type(table).__module__.split(".")[0] == module[kind]


def test_the_ledger_records_the_statement_and_its_unit() -> None:
    query = dpkit.sql(
        "SELECT COUNT(*) AS n FROM t", tables={"t": _visits()}, options={"epsilon": 0.5}
    )
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        session.release(query, None, rng=np.random.default_rng(0))
        (entry,) = session.history()
        assert session.unit is not None and session.unit.kind == "record"
    assert entry.mechanism == "sql"


def test_options_given_twice_are_refused_where_written() -> None:
    with pytest.raises(dpkit.SqlError) as raised:
        dpkit.sql(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t",
            options={"epsilon": 2},
        )
    assert (raised.value.clause, raised.value.line, raised.value.column) == ("OPTIONS", 1, 43)


def test_a_text_argument_is_refused_at_its_aggregate_in_the_statements_words(
    tmp_path: Any,
) -> None:
    """A CSV file's columns are text: AVG of one is refused before the spend at the AVG,
    naming it (not the row-level table's own column names) and the way to numbers."""
    _visits().to_csv(tmp_path / "t.csv", index=False)
    statement = "SELECT city, COUNT(*) AS n,\n  AVG(minutes) AS m FROM t GROUP BY city"
    query = dpkit.sql(
        statement,
        tables={"t": str(tmp_path / "t.csv")},
        options=OPTIONS,
        bounds={"minutes": (0, 90)},
        keys=["a", "b"],
    )
    with dpkit.Session(budget=(5.0, 0.0)) as session:
        with pytest.raises(dpkit.SqlError) as raised:
            session.release(query, None)
        assert session.spent.epsilon == 0 and not session.history()
    error = raised.value
    assert (error.clause, error.line, error.column) == ("SELECT", 2, 3)
    assert error.reason.startswith("the argument of AVG(minutes") and "__" not in str(error)
    assert "holds text values" in error.reason and "TRY_CAST(x AS DOUBLE)" in error.reason


def test_selected_groups_are_the_same_for_every_aggregate() -> None:
    query = dpkit.sql(
        "SELECT city, COUNT(*) AS n, SUM(minutes) AS s FROM t GROUP BY city",
        tables={"t": _visits()},
        options={**OPTIONS, "delta": 1e-3, "epsilon": 5.0},
        bounds={"minutes": (0, 60)},
    )
    with dpkit.Session(budget=(5.0, 1e-3)) as session:
        result = session.release(query, None, rng=np.random.default_rng(0)).values
    keys = [part.keys for _, part in result.parts]
    assert keys[0] == keys[1]


def _spread(aggregate: str, epsilon: float, frame: Any) -> Any:
    query = dpkit.sql(
        f"SELECT city, {aggregate}(minutes, contribution_bounds_per_group => (10, 70)) AS v "
        "FROM t GROUP BY city ORDER BY city",
        tables={"t": frame},
        options={**OPTIONS, "epsilon": epsilon, "max_rows_contributed": 1},
        keys=["a", "b"],
    )
    return query, query.run(rng=np.random.default_rng(9)).table("pandas")


@pytest.mark.parametrize(
    ("aggregate", "ddof", "root"),
    [
        ("VAR_POP", 0, False),
        ("VARIANCE", 1, False),
        ("VAR_SAMP", 1, False),
        ("STDDEV_POP", 0, True),
        ("STDDEV", 1, True),
        ("STDDEV_SAMP", 1, True),
    ],
)
def test_a_spread_estimates_the_clamped_values_spread(
    aggregate: str, ddof: int, root: bool
) -> None:
    """With a vast ε the noise vanishes: each group's released spread is the exact one of its
    values clamped to the bounds (one row per person, so bounding keeps every row). The noise
    of the three parts has scales below 1e-3 of a unit (ε = 3e6): the tolerance 1e-6
    relative is exceeded with probability far below 1e-12."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "user": np.arange(400),
            "city": rng.choice(["a", "b"], 400),
            "minutes": np.where(rng.random(400) < 0.1, np.nan, rng.uniform(0, 90, 400)),
        }
    )
    query, released = _spread(aggregate, 3e6, frame)
    assert len(query.queries) == 3  # a count and two centred sums, each its own share
    clamped = frame.assign(minutes=frame.minutes.clip(10, 70))
    exact = clamped.groupby("city").minutes.var(ddof=ddof)
    expected = np.sqrt(exact) if root else exact
    assert released.v.tolist() == pytest.approx(expected.tolist(), rel=1e-6)


def test_a_spread_is_never_outside_what_the_bounds_allow() -> None:
    """Post-processing clamps a population variance to [0, r²] (r = (U − L)/2 = 30) and a
    population standard deviation to [0, r], whatever the noise (ε = 1e-3: the noise dwarfs
    the data)."""
    frame = _visits()
    for aggregate, widest in (("VAR_POP", 900.0), ("STDDEV_POP", 30.0)):
        _, released = _spread(aggregate, 1e-3, frame)
        assert all(0.0 <= v <= widest for v in released.v), released

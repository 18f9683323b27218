"""What a refused spec says: a "did you mean" where the answer is public, each problem at a
field the file has, a missing dependency once, in plain grammar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dpkit
from dpkit.errors import MissingDependency
from dpkit.spec import SpecInvalid, columnar, plan_spec


def _issues(spec: dict[str, Any], base: Path) -> list[dict[str, Any]]:
    with pytest.raises(SpecInvalid) as refused:
        plan_spec(spec, registry=dpkit.get_registry(), base_dir=base)
    errors: list[dict[str, Any]] = refused.value.as_dict()["errors"]
    return errors


def _session(*queries: dict[str, Any], column: str = "agee") -> dict[str, Any]:
    return {
        "dpkit": "1",
        "dataset": "people",
        "budget": {"epsilon": 1.0},
        "defaults": {"input": {"source": "csv", "path": "people.csv", "column": column}},
        "queries": list(queries),
    }


COUNT = {"id": "c", "statistic": "count", "budget": {"epsilon": 0.1}}
MEAN = {
    "id": "m",
    "statistic": "mean",
    "params": {"lower": 0, "upper": 99},
    "budget": {"epsilon": 0.1},
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "people.csv").write_text("age,agent_secret\n30,x\n", encoding="utf-8")
    return tmp_path


def test_a_field_from_defaults_is_pointed_at_in_defaults_once(base: Path) -> None:
    issues = _issues(_session(COUNT, MEAN), base)
    assert [i["pointer"] for i in issues] == ["/defaults/input/column"]
    assert issues[0]["code"] == "column_not_found"


def test_a_misspelt_column_is_matched_against_the_spec_s_own_columns_only(base: Path) -> None:
    own = {**MEAN, "id": "a", "input": {"source": "csv", "path": "people.csv", "column": "age"}}
    issues = _issues(_session(COUNT, own), base)
    assert "did you mean 'age'?" in issues[0]["message"]
    # 'agent_secret' is close to 'agee' too, but the spec never names it: the header stays unshown
    alone = _issues(_session(COUNT, column="agent_secre"), base)
    assert "did you mean" not in alone[0]["message"] and "agent_secret" not in json.dumps(alone)


def test_a_statistic_by_another_name_is_named(base: Path) -> None:
    median = {"id": "q", "statistic": "median", "budget": {"epsilon": 0.1}}
    issues = _issues(_session(median, column="age"), base)
    message = next(i["message"] for i in issues if i["code"] == "unknown_statistic")
    assert "that is statistic 'quantile' with params q = 0.5" in message
    assert "did you mean 'mean'" not in message


def test_a_missing_dependency_is_one_line_in_plain_grammar(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> Any:
        raise MissingDependency(
            "pyarrow", "tables", needed_by="CSV and Parquet inputs", plural=True
        )

    monkeypatch.setattr(columnar, "pyarrow", missing)
    own = {**MEAN, "input": {"source": "csv", "path": "people.csv", "column": "age"}}
    issues = _issues(_session(COUNT, own, {**COUNT, "id": "d"}), base)
    lines = [i for i in issues if i["code"] == "missing_dependency"]
    assert len(lines) == 1
    assert lines[0]["message"] == "CSV and Parquet inputs need pyarrow: pip install 'dpkit[tables]'"
    assert str(MissingDependency("scipy", "audit", needed_by="dpkit audit")).startswith(
        "dpkit audit needs scipy"
    )

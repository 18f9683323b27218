"""Every ``*_exact`` field of dpkit's JSON output has one form: ``str(Fraction)`` ("2", "1/10").

docs/spec.md, "Exact numbers". The ledger stores ``numerator/denominator`` ("2/1"); both forms
parse with ``Fraction``, but JSON output never shows a ``/1`` denominator.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dpkit.cli import main
from dpkit.ledger import Budget, exact_text

EXACT = re.compile(r"^-?[0-9]+(/[0-9]+)?$")

SESSIONS = {
    "basic": {"epsilon": 2, "delta": 1e-6, "composition": "basic"},
    "zcdp": {"epsilon": 2, "delta": 1e-6, "composition": "zcdp"},
}


def _exact_fields(document: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (JSON path, value) whose key ends in ``_exact``, at any depth."""
    found: list[tuple[str, Any]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(key, str) and key.endswith("_exact"):
                found.append((f"{path}/{key}", value))
            found += _exact_fields(value, f"{path}/{key}")
    elif isinstance(document, list):
        for i, item in enumerate(document):
            found += _exact_fields(item, f"{path}/{i}")
    return found


def _check(document: Any) -> int:
    fields = _exact_fields(document)
    for where, value in fields:
        assert isinstance(value, str) and EXACT.match(value), (where, value)
        assert not value.endswith("/1"), (where, value)
        assert value == str(Fraction(value)), (where, value)  # lowest terms
    return len(fields)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("composition", sorted(SESSIONS))
def test_every_exact_field_is_str_of_a_fraction(
    composition: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = {
        "statistic": "sum",
        "params": {"lower": 0, "upper": 10, "noise": "gaussian"},
        "input": {"source": "inline", "values": [1, 2, 3]},
        "budget": {"epsilon": 1, "delta": 1e-6},
        "rng": {"mode": "fast", "seed": 1},
    }
    spec = {"dpkit": "1", "dataset": "d", "budget": SESSIONS[composition], "queries": [query]}
    if composition == "basic":
        spec["queries"].append(
            {**query, "statistic": "count", "params": {}, "budget": {"epsilon": 0.5}}
        )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    ledger = str(tmp_path / "ledger.sqlite")

    out = tmp_path / "result.json"
    assert main(["run", "--json", str(path), "--ledger", ledger, "--out", str(out)]) == 0, (
        capsys.readouterr().err
    )
    result = json.loads(out.read_text())
    assert _check(result) >= 6
    assert result["session"]["budget"]["epsilon_exact"] == "2"  # a whole number: no "/1"
    if composition == "zcdp":
        assert "rho_exact" in result["session"]["spent"]
    schema = _run(["schema", "result"], capsys)
    jsonschema.Draft202012Validator(schema).validate(result)

    shown = _run(["budget", "show", "--ledger", ledger, "--json", "--releases"], capsys)
    assert _check(shown) >= 6
    assert shown["budget"]["epsilon_exact"] == "2"
    assert shown["budget"]["delta_exact"] == "1/1000000"
    history = _run(["budget", "history", "--ledger", ledger, "--json"], capsys)
    assert _check(history) >= 2
    if composition == "basic":
        # the two queries are a declared plan: charged their tight joint ε (below 1 + 1/2),
        # shared in proportion to their own ε (dpkit.budget)
        first, second = (Fraction(e["epsilon_exact"]) for e in history)
        assert first == 2 * second and first + second < Fraction(3, 2)
        assert [e["rule"] for e in history] == ["basic-plan", "basic-plan"]


def test_account_json_exact_fields(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(["account", "--json", "--method", "basic", "laplace(epsilon=0.5)*4"], capsys)
    assert _check(out) >= 1
    assert out["epsilon_exact"] == "2"


def test_exact_text_and_the_stored_form_read_back_alike() -> None:
    assert exact_text(Fraction(2)) == "2"
    assert exact_text(Fraction(1, 10)) == "1/10"
    assert exact_text(Fraction(0)) == "0"
    assert Fraction("2/1") == Fraction("2")  # the ledger's stored text still parses
    budget = Budget(Fraction(3), Fraction(1, 10**6), Fraction(1, 2)).as_dict()
    assert (budget["epsilon_exact"], budget["delta_exact"], budget["rho_exact"]) == (
        "3",
        "1/1000000",
        "1/2",
    )

"""Every example under schemas/examples/ behaves as documented, run as a user runs it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "schemas" / "examples"
SCRIPT = Path(sys.executable).with_name("dpkit")
VALID = sorted((EXAMPLES / "valid").glob("*.json"))
INVALID = sorted(
    p for p in (EXAMPLES / "invalid").glob("*.json") if not p.name.endswith(".expected.json")
)


def dpkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=False)


def spent_entries(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    with sqlite3.connect(ledger) as db:
        return int(
            db.execute("SELECT COUNT(*) FROM dpkit_entries WHERE status = 'spent'").fetchone()[0]
        )


def test_there_are_examples() -> None:
    assert len(VALID) >= 3 and len(INVALID) >= 8


@pytest.mark.parametrize("spec", VALID, ids=lambda p: p.stem)
def test_valid_example_runs(spec: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    result = dpkit("run", "--json", str(spec), "--ledger", str(ledger))
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    schema = json.loads(dpkit("schema", "result").stdout)
    jsonschema.Draft202012Validator(schema).validate(document)
    spec_json = json.loads(spec.read_text())
    queries = spec_json.get("queries", [spec_json])
    assert len(document["results"]) == len(queries) == spent_entries(ledger)
    for entry in document["results"]:
        assert entry["mechanism"]["plugin"] and entry["mechanism"]["version"]
        assert entry["randomness"]["mode"] in ("secure", "fast")


@pytest.mark.parametrize("spec", INVALID, ids=lambda p: p.stem)
def test_invalid_example_fails_as_documented(spec: Path, tmp_path: Path) -> None:
    expected = json.loads(spec.with_name(spec.stem + ".expected.json").read_text())
    ledger = tmp_path / "ledger.sqlite"
    result = dpkit("run", "--json", str(spec), "--ledger", str(ledger))
    assert result.returncode == expected["exit_code"], result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = json.loads(result.stdout)["errors"]
    for want in expected["errors"]:
        matches = [
            e
            for e in errors
            if ("pointer" not in want or e["pointer"] == want["pointer"])
            and e["pointer"].startswith(want.get("pointer_prefix", ""))
            and ("code" not in want or e["code"] == want["code"])
            and want.get("message_contains", "") in e["message"]
        ]
        assert matches, (want, errors)
    assert all("pointer" in e and "message" in e and "code" in e for e in errors)
    assert spent_entries(ledger) == 0


def test_seeded_runs_reproduce(tmp_path: Path) -> None:
    spec = EXAMPLES / "valid" / "people_session.json"
    first = dpkit("run", "--json", str(spec), "--ledger", str(tmp_path / "a.sqlite"), "--seed", "5")
    second = dpkit(
        "run", "--json", str(spec), "--ledger", str(tmp_path / "b.sqlite"), "--seed", "5"
    )
    estimates = [
        [r["estimate"] for r in json.loads(out.stdout)["results"]] for out in (first, second)
    ]
    assert estimates[0] == estimates[1]


def test_ledger_accumulates_then_refuses(tmp_path: Path) -> None:
    """The survey spec spends ln 3 of 2.0: the first run fits, the second is refused with exit 3."""
    spec = EXAMPLES / "valid" / "survey_rr.json"
    ledger = tmp_path / "ledger.sqlite"
    assert dpkit("run", "--json", str(spec), "--ledger", str(ledger)).returncode == 0
    refused = dpkit("run", "--json", str(spec), "--ledger", str(ledger))
    assert refused.returncode == 3
    error = json.loads(refused.stdout)["errors"][0]
    assert error["code"] == "budget_exceeded" and error["pointer"] == "/budget/epsilon"
    assert spent_entries(ledger) == 1


def test_data_override_and_output_file(tmp_path: Path) -> None:
    csv = tmp_path / "other.csv"
    csv.write_text("commute\nbus\ncar\nwalk\n")
    out = tmp_path / "result.json"
    result = dpkit(
        "run",
        "--json",
        str(EXAMPLES / "valid" / "commute_oue.json"),
        "--data",
        str(csv),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["results"][0]["n"] == 3


def test_not_a_ledger_is_refused_and_untouched(tmp_path: Path) -> None:
    ledger = tmp_path / "notes.txt"
    ledger.write_text("my notes")
    result = dpkit(
        "run",
        "--json",
        str(EXAMPLES / "valid" / "survey_rr.json"),
        "--ledger",
        str(ledger),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert ledger.read_text() == "my notes"


def test_missing_spec_file(tmp_path: Path) -> None:
    result = dpkit("run", "--json", str(tmp_path / "nope.json"))
    assert result.returncode == 2 and "spec_unreadable" in result.stdout

"""The central examples run end to end (each in well under a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "central").glob("*.py"))


def test_there_are_central_examples() -> None:
    assert {p.stem for p in EXAMPLES} >= {"pumpkin_auction", "two_diseases", "survey_statistics"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location(f"central_example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(seed=1)
    out = capsys.readouterr().out
    assert out.strip()
    assert "nan" not in out.lower()

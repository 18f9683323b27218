"""`dpkit mechanisms` as a user runs it: the installed console script and python -m dpkit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit import cli

SCRIPT = Path(sys.executable).with_name("dpkit")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_console_script_lists_builtins_as_json() -> None:
    result = run("mechanisms", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    for name in ("rr", "krr"):
        assert records[name]["plugin"] == "ldp"
        assert records[name]["distribution"] == "dpkit"
        assert records[name]["kind"] == "local"
        assert "epsilon" in records[name]["parameters"]


def test_table_output_is_readable() -> None:
    result = run("mechanisms")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].split()[:2] == ["NAME", "KIND"]
    assert any(line.startswith("krr") for line in result.stdout.splitlines())


def test_python_dash_m_works() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dpkit", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout.startswith("dpkit ")


def test_disabled_plugins_disappear() -> None:
    result = run("mechanisms", "--json", env={"DPKIT_DISABLE_PLUGINS": "ldp"})
    assert result.returncode == 0
    assert "rr" not in {r["name"] for r in json.loads(result.stdout)}


def test_broken_plugin_is_a_warning_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib import metadata

    from dpkit import registry as registry_module

    real = metadata.entry_points
    broken = metadata.EntryPoint(name="broken", value="dpkit_no_such_module_xyz", group="dpkit")
    monkeypatch.setattr(
        registry_module.metadata,
        "entry_points",
        lambda **kw: [*real(**kw), broken] if kw.get("group") == "dpkit" else real(**kw),
    )
    monkeypatch.setattr(registry_module, "_default", None)
    assert cli.main(["mechanisms"]) == 0
    captured = capsys.readouterr()
    assert "warning: plugin 'broken'" in captured.err and "Traceback" not in captured.err
    assert "krr" in captured.out
    registry_module._reset_default_registry()


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "mechanisms" in capsys.readouterr().out

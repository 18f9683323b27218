"""Commands check their optional dependencies before starting, and name the extra to install.

``dpkit audit`` needs scipy (``dpkit[audit]``), ``dpkit plot`` needs matplotlib (``dpkit[plot]``).
The real packages are installed in the test environment, so their absence is simulated by
making ``importlib.util.find_spec`` report them missing. ``import dpkit``, ``dpkit mechanisms``
and an SQLite session import none of them, nor psycopg (``dpkit[postgresql]``, only for a
PostgreSQL ledger: tests/unit/ledger/test_postgresql.py checks its missing-driver error).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dpkit.cli import main
from dpkit.commands import _requires
from dpkit.errors import DPKitError, MissingDependency


def _hide(monkeypatch: pytest.MonkeyPatch, *missing: str) -> list[str]:
    """Make find_spec report ``missing`` as not installed; return the list of names looked up."""
    real = importlib.util.find_spec
    asked: list[str] = []

    def find_spec(name: str, package: str | None = None) -> Any:
        asked.append(name)
        if name.split(".")[0] in missing:
            return None
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return asked


def _fails_with(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"dpkit: error: {expected}\n"  # one line
    assert captured.out == ""


def test_audit_without_scipy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = _hide(monkeypatch, "scipy")
    _fails_with(
        ["audit", "rr", "-p", "keep=0.75"],
        "dpkit audit needs scipy: pip install 'dpkit[audit]'",
        capsys,
    )
    assert "scipy" in asked
    # checked first: even a bad option or an unknown mechanism reports the missing extra
    _fails_with(
        ["audit", "no_such_mechanism", "--samples", "1"],
        "dpkit audit needs scipy: pip install 'dpkit[audit]'",
        capsys,
    )


def test_audit_plot_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hide(monkeypatch, "matplotlib")
    out = tmp_path / "a.png"
    _fails_with(
        ["audit", "rr", "-p", "keep=0.75", "--plot", str(out)],
        "dpkit audit --plot needs matplotlib: pip install 'dpkit[plot]'",
        capsys,
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["plot", "utility", "--k", "4", "--epsilons", "1"],
        ["plot", "histogram", "--mechanism", "krr", "--epsilon", "1"],
        ["plot", "audit", "--mechanism", "rr", "--epsilon", "1"],
    ],
    ids=lambda argv: argv[1],
)
def test_plot_without_matplotlib(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _hide(monkeypatch, "matplotlib")
    out = tmp_path / "f.png"
    _fails_with(
        [*argv, "--out", str(out)], "dpkit plot needs matplotlib: pip install 'dpkit[plot]'", capsys
    )
    assert not out.exists()


def test_plot_audit_without_scipy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hide(monkeypatch, "scipy")
    out = tmp_path / "f.png"
    _fails_with(
        ["plot", "audit", "--mechanism", "rr", "--epsilon", "1", "--out", str(out)],
        "dpkit plot audit needs scipy: pip install 'dpkit[audit]'",
        capsys,
    )
    _fails_with(
        ["plot", "docs", str(tmp_path / "figures")],
        "dpkit plot docs needs scipy: pip install 'dpkit[audit]'",
        capsys,
    )
    assert not out.exists() and not (tmp_path / "figures").exists()


def test_the_error_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "scipy")
    with pytest.raises(MissingDependency) as caught:
        _requires.require("dpkit audit", _requires.AUDIT)
    error = caught.value
    assert isinstance(error, DPKitError) and isinstance(error, ImportError)
    assert (error.package, error.extra, error.code) == ("scipy", "audit", "missing_dependency")
    assert _requires.installed("json")


def test_a_blocked_module_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec raises ValueError here
    assert not _requires.installed("matplotlib")


def test_import_and_mechanisms_do_not_load_the_extras() -> None:
    code = (
        "import sys, io, contextlib\n"
        "import dpkit\n"
        "extras = ('scipy', 'matplotlib', 'psycopg', 'array_api_compat', 'torch', 'duckdb')\n"
        "loaded = [m for m in extras if m in sys.modules]\n"
        "from dpkit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['mechanisms']) == 0 and main(['mechanisms', '--json']) == 0\n"
        "dpkit.Session(budget=(1.0, 0.0)).spent  # an SQLite ledger: no PostgreSQL driver\n"
        "loaded += [m for m in extras if m in sys.modules]\n"
        "print(','.join(loaded) or 'none')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "none"

"""From a clean build: `pip install .` gives a working dpkit, and a third-party plugin joins it.

These tests build wheels and create a virtualenv, so they are marked ``integration``; they need
the package index (or pip's cache) for numpy and friends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "plugins" / "example" / "dpkit-forced-response"

pytestmark = pytest.mark.integration


def pip(python: Path, *args: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        check=True,
    )


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with dpkit installed from a wheel built from this checkout."""
    root = tmp_path_factory.mktemp("fresh")
    wheels = root / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
            str(EXAMPLE),
        ],
        check=True,
    )
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    pip(python, str(next(wheels.glob("dpkit-*.whl"))))
    return python


def mechanisms(python: Path) -> dict[str, dict[str, object]]:
    out = subprocess.run(
        [str(python.with_name("dpkit")), "mechanisms", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {r["name"]: r for r in json.loads(out.stdout)}


def test_wheel_install_has_the_builtins(fresh_env: Path) -> None:
    found = mechanisms(fresh_env)
    assert found["rr"]["distribution"] == "dpkit" and found["krr"]["plugin"] == "ldp"
    # The wheel really ships the plugin packages (not a path into this checkout).
    where = subprocess.run(
        [str(fresh_env), "-c", "import dpkit_ldp; print(dpkit_ldp.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=fresh_env.parent,
    ).stdout
    assert "site-packages" in where


def test_third_party_plugin_appears_after_pip_install(fresh_env: Path) -> None:
    assert "forced_response" not in mechanisms(fresh_env)
    wheel = next((fresh_env.parents[2] / "wheels").glob("dpkit_forced_response-*.whl"))
    pip(fresh_env, "--no-deps", str(wheel))
    record = mechanisms(fresh_env)["forced_response"]
    assert record["distribution"] == "dpkit-forced-response"
    assert record["plugin"] == "forced_response"

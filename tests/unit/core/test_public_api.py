"""Built-in plugins use only dpkit's public API, exactly as a third party must."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import dpkit

ROOT = Path(__file__).resolve().parents[3]
PLUGIN_FILES = sorted((ROOT / "plugins").rglob("*.py")) + sorted(
    (ROOT / "docs").rglob("dpkit_*.py")
)


def dpkit_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, imported name) for every import of dpkit or its submodules in ``path``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "dpkit"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "dpkit"
        ):
            found += [(node.module, a.name) for a in node.names]
    return found


def test_there_are_plugin_files_to_check() -> None:
    assert len(PLUGIN_FILES) >= 4


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_public_names(path: Path) -> None:
    for module_name, name in dpkit_imports(path):
        assert not any(part.startswith("_") for part in module_name.split(".")), module_name
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{module_name} has no __all__, so it is not public API"
        if name is not None:
            assert name in exported, f"{path.name}: {name} is not public in {module_name}"


def test_every_public_name_exists() -> None:
    for name in dpkit.__all__:
        assert hasattr(dpkit, name), name

"""The hook reference (docs/plugins/hooks.md) documents exactly the hooks of dpkit.hookspecs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from dpkit import hookspecs

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "hooks.md"
HEADING = re.compile(r"^## `(?P<name>dpkit_\w+)`$", re.M)


def hookspec_functions() -> dict[str, inspect.Signature]:
    marker = f"{hookspecs.PROJECT_NAME}_spec"  # the attribute pluggy's HookspecMarker sets
    return {
        name: inspect.signature(function)
        for name, function in vars(hookspecs).items()
        if callable(function) and hasattr(function, marker)
    }


def documented_sections() -> dict[str, str]:
    text = REFERENCE.read_text(encoding="utf-8")
    matches = list(HEADING.finditer(text))
    ends = [m.start() for m in matches[1:]] + [len(text)]
    return {m["name"]: text[m.end() : end] for m, end in zip(matches, ends, strict=True)}


def test_every_hook_is_documented_and_every_documented_hook_exists() -> None:
    specs, documented = set(hookspec_functions()), set(documented_sections())
    assert specs, "no hookspecs found: the marker attribute changed?"
    assert specs - documented == set(), f"hooks missing from {REFERENCE.name}"
    assert documented - specs == set(), f"{REFERENCE.name} documents hooks that do not exist"


def test_documented_signatures_name_the_hook_arguments() -> None:
    sections = documented_sections()
    for name, signature in hookspec_functions().items():
        call = re.search(rf"^{name}\((?P<args>[^\n]*)\)", sections[name], re.M)
        assert call, f"{name}: the section shows no signature line"
        assert _parameter_names(call["args"]) == list(signature.parameters), name


def _parameter_names(arguments: str) -> list[str]:
    """``a: X[b, c], d: Y`` → ``["a", "d"]``: split at the commas outside brackets."""
    names, depth, current = [], 0, ""
    for char in arguments + ",":
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            names.append(current.split(":")[0].strip())
            current = ""
        else:
            current += char
    return names


def test_the_reference_fails_for_an_undocumented_hook(monkeypatch) -> None:
    def dpkit_register_widgets(register):  # a new hook that nobody documented
        """A hook added without documentation."""

    setattr(dpkit_register_widgets, f"{hookspecs.PROJECT_NAME}_spec", {})
    monkeypatch.setattr(hookspecs, "dpkit_register_widgets", dpkit_register_widgets, raising=False)
    assert "dpkit_register_widgets" in set(hookspec_functions()) - set(documented_sections())

"""Every Python block in the README runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 2


def test_readme_examples_run() -> None:
    namespace: dict[str, object] = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)


def test_readme_error_example_is_the_real_message() -> None:
    import dpkit

    text = README.read_text(encoding="utf-8")
    try:
        dpkit.mechanism("krr", epsilon=-0.5, k=3)
    except dpkit.InvalidParameter as error:
        assert f"dpkit.errors.InvalidParameter: {error}" in text
    else:
        raise AssertionError("the README's bad-input example did not raise")

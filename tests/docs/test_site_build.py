"""The documentation site builds with warnings as errors, with its generated parts in it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpkit

REPOSITORY = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1", MPLBACKEND="Agg"),
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.integration
def test_figures_are_drawn_by_the_build(site: Path) -> None:
    for name in ("histogram", "utility", "audit", "budget", "benchmarks"):
        figure = site / "figures" / f"{name}.png"
        assert figure.read_bytes()[:8] == PNG, name
    assert not (REPOSITORY / "docs" / "figures").exists(), "figures must not be written into docs/"


@pytest.mark.integration
def test_spec_reference_is_generated_from_the_schemas(site: Path) -> None:
    page = (site / "spec" / "index.html").read_text(encoding="utf-8")
    assert "dpkit:schema" not in page
    for anchor in (
        "query-input",
        "session-queries-item",
        "result-amount",
        "query-statistics-quantile",
    ):
        assert f'id="{anchor}"' in page, anchor


@pytest.mark.integration
def test_every_page_of_the_nav_is_built(site: Path) -> None:
    nav = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    for page in re.findall(r":\s*(\S+\.md)\s*$", nav, re.M):
        built = site / (page[: -len(".md")] + "/index.html" if page != "index.md" else "index.html")
        if page.endswith("/index.md"):
            built = site / page.replace("index.md", "index.html")
        assert built.exists(), page


def test_every_builtin_mechanism_has_a_page() -> None:
    nav = (REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8")
    builtins = [
        name
        for name, info in dpkit.get_registry().mechanisms.items()
        if info.provenance.distribution == "dpkit"
    ]
    assert len(builtins) >= 12
    for name in builtins:
        page = REPOSITORY / "docs" / "mechanisms" / f"{name}.md"
        assert page.exists(), f"no page for {name}"
        assert f"mechanisms/{name}.md" in nav, f"{name} is not in the navigation"
        text = page.read_text(encoding="utf-8")
        for section in ("## Definition", "## Privacy", "## Parameters", "## Example", "## Source"):
            assert section in text, f"{name}: missing {section}"

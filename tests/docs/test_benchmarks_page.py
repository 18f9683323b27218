"""The benchmark page is drawn from benchmarks/results.json, whose every section says where its
figures come from (the script's command, the date, the machine and its load)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

# The site's build hooks need the docs extra; without it these tests skip, the rest of the run goes on.
pytest.importorskip("latex2mathml", reason="needs the docs extra: pip install -e '.[docs]'")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs_build"))
import hooks

REPOSITORY = Path(__file__).resolve().parents[2]
RESULTS = REPOSITORY / "benchmarks" / "results.json"
SECTIONS = json.loads(RESULTS.read_text(encoding="utf-8"))["sections"]
MARKED = sorted(
    {
        name
        for page in (REPOSITORY / "docs").rglob("*.md")
        for name in hooks.BENCHMARK_MARKER.findall(page.read_text(encoding="utf-8"))
    }
)


def test_the_benchmark_page_shows_results_json_sections() -> None:
    page = (REPOSITORY / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(hooks.BENCHMARK_MARKER.findall(page)) >= 4
    assert set(MARKED) <= set(SECTIONS), "a page shows a section results.json does not have"


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_every_section_records_its_provenance(name: str) -> None:
    section = SECTIONS[name]
    assert re.fullmatch(r"python benchmarks/bench_\w+\.py.*", section["command"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", section["date"])
    assert len(section["load"]["before"]) == 3 and len(section["load"]["after"]) == 3
    assert section["machine"]["cpus"] >= 1 and section["rows"]
    for row in section["rows"]:
        assert set(row) <= set(section["columns"])
    for peer in section.get("peers", []):
        assert peer["mode"] in ("secure", "fast") and peer["speedup"] > 0


@pytest.mark.parametrize("name", MARKED)
def test_sections_render_as_tables_with_their_command(name: str) -> None:
    table = hooks.benchmark_table(name)
    lines = table.splitlines()
    assert lines[0].startswith("| ") and set(lines[1]) <= {"|", "-"}
    assert len([line for line in lines if line.startswith("| ")]) >= 2
    assert SECTIONS[name]["command"] in table and SECTIONS[name]["date"] in table


def test_an_unknown_section_is_a_build_error() -> None:
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="no section"):
        hooks.benchmark_table("no_such_section")


def test_the_figure_is_drawn_from_the_peer_comparisons(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.png"
    hooks.benchmark_figure(RESULTS, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    modes = {p["mode"] for s in SECTIONS.values() for p in s.get("peers", [])}
    assert modes <= {"secure", "fast"}


def test_the_graph_figure_is_drawn_from_the_graph_sections(tmp_path: Path) -> None:
    out = tmp_path / "graph_error.png"
    hooks.graph_figure(RESULTS, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    papers = SECTIONS["graph_papers"]
    assert {"setting", "ε", "paper", "dpkit"} <= set(papers["columns"])
    assert all(row["paper"] > 0 and row["dpkit"] > 0 for row in papers["rows"])

"""The Markdown spec reference is generated from the schemas and misses nothing."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import dpkit
from dpkit.spec import compose_schema, params_schema
from dpkit.spec.reference import schema_reference
from dpkit.spec.schema import envelope, option_domains


def property_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.get("properties", {}).items():
            if isinstance(value, dict) and set(value) - {"enum", "const"}:  # not an if/then test
                yield key
        for value in node.values():
            yield from property_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from property_names(value)


@pytest.mark.parametrize("kind", ["query", "session", "result"])
def test_every_field_of_the_schema_has_a_row(kind: str) -> None:
    registry = dpkit.get_registry()
    text = schema_reference(kind, registry)
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    schema = compose_schema(kind, registry)
    if kind == "session":  # the statistics' parameters are documented once, in the query reference
        schema = {k: v for k, v in schema.items() if k != "$defs"} | {
            "$defs": {k: v for k, v in schema["$defs"].items() if k != "statistic_rules"}
        }
    assert set(property_names(schema)) - rows == set()


def test_every_statistic_and_frequency_mechanism_has_its_parameters() -> None:
    registry = dpkit.get_registry()
    text = schema_reference("query", registry)
    for name, info in registry.queries.items():
        section = text.split(f"### {name} {{#query-statistics-{name}}}", 1)[1].split("###", 1)[0]
        for parameter in params_schema(info.cls)["properties"]:
            assert f"| `{parameter}` |" in section, (name, parameter)
    assert "### krr {#query-frequency-krr}" in text
    statistics = text.split("## Statistics", 1)[1]
    assert "| `epsilon` |" not in statistics  # filled from the budget, not a parameter row
    assert "Budget: `epsilon` number, ≥ 1e-12, ≤ 1e+12" in statistics  # ... within its domain
    krr = text.split("### krr {#query-frequency-krr}", 1)[1].split("###", 1)[0]
    assert "Give one of `k`, `categories`." in krr and "no `delta`" in krr


def test_tables_are_well_formed_and_links_resolve() -> None:
    text = schema_reference("session", dpkit.get_registry())
    for line in text.splitlines():
        if line.startswith("|"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 5, line
    anchors = set(re.findall(r"\{#([\w-]+)\}", text))
    assert set(re.findall(r"\]\(#([\w-]+)\)", text)) <= anchors


def test_cli_prints_the_same_reference() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dpkit", "schema", "query", "--markdown"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == schema_reference("query", dpkit.get_registry())


def test_the_shipped_envelope_holds_the_domains_the_plan_checks() -> None:
    """schemas/query.schema.json as shipped already says what the composed schema sets from
    the domains (confidence, seed, the id unit's bounds, the selection's ε and δ): the file
    and `dpkit schema query` cannot drift apart."""
    shipped = copy.deepcopy(envelope("query")["$defs"])
    composed = copy.deepcopy(shipped)
    option_domains(composed)
    assert composed == shipped

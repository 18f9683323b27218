"""Fuzzing the spec layer: generated valid specs never crash; mutated invalid specs are refused
with exit code 2, a JSON Pointer per error, no traceback, and an untouched ledger."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from pathlib import Path
from typing import Any
from unittest.mock import patch

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from support import schema_values as sv

import dpkit
from dpkit import cli
from dpkit.params import Boolean, Choice, Integer, Labels, Real, parameter_specs
from dpkit.spec import SpecInvalid, compose_schema
from dpkit.spec import plan as spec_plan
from dpkit.spec.schema import (
    INJECTED,
    frequency_mechanisms,
    heavy_hitter_mechanisms,
    mean_mechanisms,
    params_schema,
)

ROOT = Path(__file__).resolve().parents[2]
VALID = sorted((ROOT / "schemas" / "examples" / "valid").glob("*.json"))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-1e3, 1e3) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=5,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


@st.composite
def mutated_invalid_specs(draw: st.DrawFn) -> tuple[Path, dict[str, Any]]:
    source = draw(st.sampled_from(VALID))
    spec = json.loads(source.read_text())
    registry = dpkit.get_registry()
    kind = "session" if "queries" in spec else "query"
    validator = jsonschema.Draft202012Validator(compose_schema(kind, registry))
    for _ in range(3):
        mutant = copy.deepcopy(spec)
        path = draw(st.sampled_from(paths(mutant)))
        parent = mutant
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["delete", "replace", "add"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent["unexpected_" + draw(st.text("abc", min_size=1, max_size=3))] = draw(JSON_VALUES)
        else:
            parent[path[-1]] = draw(JSON_VALUES)
        if not validator.is_valid(mutant):
            return source, mutant
        spec = mutant
    return source, {"dpkit": "1"}  # still invalid: required properties missing


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=mutated_invalid_specs())
def test_mutated_invalid_specs_are_refused_cleanly(
    case: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, spec = case
    spec_file = source.parent / f".fuzz-{source.stem}.json"  # beside it, so relative paths resolve
    ledger = tmp_path / "ledger.sqlite"
    try:
        spec_file.write_text(json.dumps(spec))
        code = cli.main(["run", "--json", str(spec_file), "--ledger", str(ledger)])
    finally:
        spec_file.unlink(missing_ok=True)
    captured = capsys.readouterr()
    assert code == 2, captured
    assert "Traceback" not in captured.err
    errors = json.loads(captured.out)["errors"]
    assert errors and all(isinstance(e["pointer"], str) and e["message"] for e in errors)
    if ledger.exists():
        with sqlite3.connect(ledger) as db:
            assert db.execute("SELECT COUNT(*) FROM dpkit_entries").fetchone()[0] == 0


def value_for(domain: Any, typical: tuple[float, float] | None) -> st.SearchStrategy[Any]:
    """Values of a declared parameter domain (its typical range where one is declared)."""
    if isinstance(domain, Integer):
        low = int(typical[0]) if typical else (domain.low if domain.low is not None else -10)
        high = (
            int(typical[1]) if typical else (domain.high if domain.high is not None else low + 20)
        )
        return st.integers(low, min(high, low + 200))
    if isinstance(domain, Real):
        low, high = typical or (max(domain.low, -1e3), min(domain.high, 1e3))
        return st.floats(low, high, exclude_min=domain.low_open, exclude_max=domain.high_open)
    if isinstance(domain, Choice):
        return st.sampled_from(domain.options)
    if isinstance(domain, Boolean):
        return st.booleans()
    if isinstance(domain, Labels):
        return st.lists(
            st.text("abcxyz", min_size=1, max_size=3),
            min_size=domain.min_length,
            max_size=6,
            unique=True,
        )
    return st.nothing()


@st.composite
def generated_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Specs built from the declared parameter domains of every installed plugin."""
    registry = dpkit.get_registry()
    choices = (
        [("frequency", m) for m in frequency_mechanisms(registry)]
        + [("mean", m) for m in mean_mechanisms(registry)]
        + [("heavy_hitters", m) for m in heavy_hitter_mechanisms(registry)]
        + [(q, None) for q in registry.queries]
    )
    statistic, mechanism = draw(st.sampled_from(choices))
    cls = registry.mechanisms[mechanism].cls if mechanism else registry.queries[statistic].cls
    params: dict[str, Any] = {}
    specs = parameter_specs(cls)
    for name, spec in specs.items():
        if name in INJECTED or (spec.optional and not draw(st.booleans())):
            continue
        params[name] = draw(value_for(spec.domain, spec.typical))
    epsilon = specs["epsilon"].typical if "epsilon" in specs else (0.1, 5.0)
    spec: dict[str, Any] = {
        "dpkit": "1",
        "session_budget": {"epsilon": 100.0, "delta": 0.5},
        "statistic": statistic,
        "input": {
            "source": "inline",
            "values": draw(
                st.lists(
                    st.integers(0, 6) | st.floats(-5, 100) | st.sampled_from(["a", "b"]),
                    max_size=30,
                )
            ),
        },
        "budget": {"epsilon": draw(st.floats(*epsilon))},
    }
    if "delta" in specs and draw(st.booleans()):
        spec["budget"]["delta"] = draw(st.floats(1e-9, 1e-3))
    if mechanism:
        spec["mechanism"] = {"name": mechanism, "params": params}
    elif params:
        spec["params"] = params
    return spec


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(spec=generated_specs())
def test_generated_specs_run_or_fail_cleanly(spec: dict[str, Any], tmp_path: Path) -> None:
    """Specs from every plugin's declared domains: the run succeeds, or it is refused with
    pointers and nothing is spent; never any other exception."""
    from dpkit.spec import run_spec

    ledger = tmp_path / "ledger.sqlite"
    ledger.unlink(missing_ok=True)
    try:
        document = run_spec(spec, registry=dpkit.get_registry(), base_dir=ROOT, ledger=ledger)
    except SpecInvalid as error:
        event(f"refused: {sorted({i.code for i in error.issues})}")
        assert error.issues and all(isinstance(i.pointer, str) and i.message for i in error.issues)
        if ledger.exists():
            with sqlite3.connect(ledger) as db:
                assert db.execute("SELECT COUNT(*) FROM dpkit_entries").fetchone()[0] == 0
    else:
        event(f"released: {spec['statistic']}")
        assert len(document["results"]) == 1


# -- the schema and the constructors agree ---------------------------------------------------------
#
# Every document the composed schema accepts must plan (its constructors accept it), so that
# `dpkit schema query` tells the truth about what runs. The values are drawn *from the schema*
# (tests/support/schema_values.py: bounds, their neighbouring floats, integers written as
# floats, tiny and huge numbers, empty, repeated and mixed lists, long strings), so a schema
# that admits more than the constructors fails here. JSON Schema compares a value with
# constants only, so the few relations between two fields are kept by construction below:
# lower < upper (and upper − lower ≥ 2e-100, a sensitivity), krr's k = len(categories), and
# treehist's split of the budget's ε (support.schema_values.relations_hold).


_REGISTRY = dpkit.get_registry()
_QUERY_SCHEMA = compose_schema("query", _REGISTRY)
_VALIDATOR = jsonschema.Draft202012Validator(_QUERY_SCHEMA)
_DEFS = _QUERY_SCHEMA["$defs"]


def _plan(spec: dict[str, Any], base_dir: Path = ROOT) -> None:
    """The public phase without the dry run (which runs the mechanism once on a stand-in
    input: a question of resources, not of the parameters' domains)."""
    with patch.object(spec_plan, "_dry_run", lambda *args, **kwargs: None):
        spec_plan.plan_spec(spec, registry=_REGISTRY, base_dir=base_dir)


def _keep_relations(params: dict[str, Any]) -> None:
    if "lower" in params and "upper" in params:
        low, high = sorted((params["lower"], params["upper"]))
        # in the constructors' arithmetic: bounds are read as doubles, so integers past 2⁵³
        # may meet (a refusal of its own, tested below)
        width = float(high) - float(low)
        assume(math.isfinite(width) and width >= 2e-100)
        params["lower"], params["upper"] = low, high
    if "k" in params and "categories" in params and isinstance(params["categories"], list):
        params["k"] = len(params["categories"])


@st.composite
def schema_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A one-query spec whose parameters, budget and options are all drawn from the schema."""
    statistic, mechanism = draw(st.sampled_from(sv.targets(_REGISTRY)))
    cls = sv.target_class(_REGISTRY, statistic, mechanism)
    node = params_schema(cls)
    params: dict[str, Any] = {}
    both = {"lower", "upper"} <= set(node["properties"])  # a pair: given together (below)
    for name, field in node["properties"].items():
        given = name in node.get("required", []) or (both and name in ("lower", "upper"))
        if given or draw(st.booleans()):
            params[name] = draw(sv.admitted(field))
    _keep_relations(params)
    if statistic in sv.FILE_INPUTS and not mechanism:  # the columns the table has, not drawn
        params.update(sv.FILE_INPUTS[statistic][1])
    # ε and δ: aimed at the envelope's bounds and at the class's own domains (both sides of
    # each); the composed schema decides below which of them a document may hold
    declared = parameter_specs(cls)
    epsilon = [sv.admitted(_DEFS["epsilon"])]
    if "epsilon" in declared:
        epsilon.append(sv.near_misses(declared["epsilon"].domain.json_schema()))
    budget = {"epsilon": draw(st.one_of(epsilon))}
    deltas = [st.sampled_from([0, 0.0]), sv.admitted(_DEFS["delta"])]
    if "delta" in declared:
        deltas.append(sv.near_misses(declared["delta"].domain.json_schema()))
    if draw(st.booleans()):
        budget["delta"] = draw(st.one_of(deltas))
    assume(sv.relations_hold(mechanism, params, budget["epsilon"]))
    spec = sv.base_spec(_REGISTRY, statistic, mechanism)
    spec["budget"] = budget
    if mechanism:
        spec["mechanism"]["params"] = params
    else:
        spec.pop("params", None)
        if params or draw(st.booleans()):
            spec["params"] = params
    if draw(st.booleans()):
        spec["output"] = {
            "confidence": draw(sv.admitted(_DEFS["output"]["properties"]["confidence"]))
        }
    if draw(st.booleans()):
        seed = draw(sv.admitted(_DEFS["rng"]["properties"]["seed"]))
        spec["rng"] = draw(st.sampled_from([{"mode": "fast", "seed": seed}, {"mode": "secure"}]))
    return spec


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(spec=schema_documents())
def test_every_document_the_schema_accepts_is_accepted_by_the_constructors(
    spec: dict[str, Any],
) -> None:
    assume(_VALIDATOR.is_valid(spec))
    event(f"{spec['statistic']}:{spec.get('mechanism', {}).get('name', '')}")
    try:
        _plan(spec)
    except SpecInvalid as error:
        pytest.fail(f"the schema accepts what a constructor refuses: {error.as_dict()}\n{spec}")


def test_bounds_that_meet_as_doubles_are_refused_naming_the_upper_bound() -> None:
    spec = {
        "dpkit": "1",
        "statistic": "mean",
        "mechanism": {"name": "duchi", "params": {"lower": 2**53, "upper": 2**53 + 1}},
        "budget": {"epsilon": 1.0},
        "input": {"source": "inline", "values": [1.0]},
    }
    with pytest.raises(SpecInvalid) as refused:
        _plan(spec)
    (error,) = refused.value.as_dict()["errors"]
    assert error["pointer"] == "/mechanism/params/upper"
    assert "greater than lower=9007199254740992.0" in error["allowed"]
    assert refused.value.as_dict()["spent"] is False


#: A grouped, per-id table query (its selection cost and contribution bounds are options).
_VISITS = {
    "dpkit": "1",
    "session_budget": {"epsilon": 1e6, "delta": 0.5},
    "statistic": "count",
    "input": {"source": "csv", "path": "visits.csv", "column": "minutes"},
    "privacy_unit": {"kind": "id", "column": "user", "max_rows": 3, "max_groups": 2},
    "group_by": {
        "columns": ["city"],
        "keys": "private",
        "selection": {"epsilon": 1, "delta": 1e-6},
    },
    "budget": {"epsilon": 1.0},
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_table_options_the_schema_accepts_are_accepted(data: st.DataObject) -> None:
    """The privacy unit's bounds and the cost of private partition selection."""
    spec = copy.deepcopy(_VISITS)
    unit, selection = spec["privacy_unit"], spec["group_by"]["selection"]
    for name in ("max_rows", "max_groups"):
        unit[name] = data.draw(sv.admitted(_DEFS["privacy_unit"]["properties"][name], _DEFS))
    for name in ("epsilon", "delta"):
        node = _DEFS["group_by"]["properties"]["selection"]["properties"][name]
        selection[name] = data.draw(sv.admitted(node, _DEFS))
    assume(_VALIDATOR.is_valid(spec))
    # Relations of three fields: the selection's keep probabilities must reach 1 within 2²⁰
    # units, about 2·G·ln(G/δ)/ε of them (G = max_groups; kept with a factor 2 to spare), and
    # δ/G must be at least one unit of 2⁻⁶⁴.
    groups, epsilon, delta = unit["max_groups"], selection["epsilon"], selection["delta"]
    assume(2 * groups * math.log(groups / delta) / epsilon <= 2**19)
    assume(delta * 2.0**64 / groups >= 2)
    try:
        _plan(spec, base_dir=ROOT / "schemas" / "examples" / "valid" / "data")
    except SpecInvalid as error:
        pytest.fail(f"the schema accepts what a constructor refuses: {error.as_dict()}\n{spec}")

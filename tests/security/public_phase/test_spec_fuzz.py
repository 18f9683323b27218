"""Systematic invalid specs: every one is refused in the public phase, typed, with nothing spent.

The valid examples under ``schemas/examples/valid/`` (their CSV copied next to them, so that
paths stay inside the spec's directory) are mutated field by field — wrong types, missing
fields, unknown statistics and mechanisms, negative/NaN/infinite/huge ε, δ out of range, bad
bounds and categories, paths outside the spec's directory or to special files, unknown keys,
deep nesting, bad rng seeds, bad output.confidence, the nan policy 'error' — giving a few
hundred specs. Each runs in process through :func:`dpkit.spec.run_spec` and must raise
:class:`dpkit.spec.SpecInvalid` or another :class:`dpkit.DPKitError` (any other exception is a
bug that would be a traceback on the command line), leaving the ledger's spent total
unchanged (exact Fractions). A sample goes through the command line: exit 2 or 3, a JSON error
document with ``"spent": false``, one line on stderr, no traceback.

Why this recovers nothing: a refusal that happens before the spend depends only on the spec
(the public phase), so it is reproducible by the analyst without the data.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import sys
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any
from unittest.mock import patch

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from support import schema_values as sv

import dpkit
from dpkit.ledger import Ledger
from dpkit.params import parameter_specs
from dpkit.spec import SpecInvalid, compose_schema, run_spec
from dpkit.spec import plan as spec_plan
from dpkit.spec.schema import INJECTED, params_schema

ROOT = Path(__file__).resolve().parents[3]
VALID = ROOT / "schemas" / "examples" / "valid"
PEOPLE = ROOT / "schemas" / "examples" / "valid" / "data" / "people.csv"
VISITS = ROOT / "schemas" / "examples" / "valid" / "data" / "visits.csv"
LANGUAGES = ROOT / "schemas" / "examples" / "valid" / "data" / "languages.csv"
FRIENDSHIPS = ROOT / "schemas" / "examples" / "valid" / "data" / "friendships.csv"
NAN, INF = math.nan, math.inf

Missing = object()  # marker: delete the field


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _bases() -> dict[str, dict[str, Any]]:
    """The valid examples, with their data path made local, plus a few central queries."""
    specs = {p.stem: json.loads(p.read_text()) for p in sorted(VALID.glob("*.json"))}
    specs["commute_oue"]["input"]["path"] = "people.csv"
    specs["ages_local_mean"]["input"]["path"] = "people.csv"
    specs["languages_heavy_hitters"]["input"]["path"] = "languages.csv"
    specs["friendships_graph"]["defaults"]["input"]["path"] = "friendships.csv"
    specs["people_session"]["defaults"]["input"]["path"] = "people.csv"
    for query in specs["people_session"]["queries"]:
        if "input" in query:
            query["input"]["path"] = "people.csv"
    specs["visits_by_city"]["defaults"]["input"]["path"] = "visits.csv"
    for query in specs["visits_by_city"]["queries"]:
        if "input" in query:
            query["input"]["path"] = "visits.csv"
    central = {
        "dpkit": "1",
        "dataset": "people",
        "session_budget": {"epsilon": 1.0},
        "input": {"source": "csv", "path": "people.csv", "column": "age"},
        "budget": {"epsilon": 0.5},
    }
    specs["sum_csv"] = {
        **copy.deepcopy(central),
        "statistic": "sum",
        "params": {"lower": 0, "upper": 100},
    }
    specs["quantile_csv"] = {
        **copy.deepcopy(central),
        "statistic": "quantile",
        "params": {"q": 0.5, "lower": 18, "upper": 90},
    }
    specs["histogram_csv"] = {
        **copy.deepcopy(central),
        "statistic": "histogram",
        "params": {"categories": ["bus", "bike", "car", "train", "walk"]},
        "input": {"source": "csv", "path": "people.csv", "column": "commute"},
    }
    specs["count_csv"] = {**copy.deepcopy(central), "statistic": "count"}
    return specs


def _set(spec: Any, path: tuple[Any, ...], value: Any) -> Any | None:
    """A copy of ``spec`` with the field at ``path`` set (or deleted with Missing); None when
    the field's parent does not exist (the mutation does not apply)."""
    out = copy.deepcopy(spec)
    node = out
    for key in path[:-1]:
        if (isinstance(node, dict) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and key < len(node)
        ):
            node = node[key]
        else:
            return None
    last = path[-1]
    if not isinstance(node, (dict, list)):
        return None
    if value is Missing:
        if isinstance(node, dict) and last in node:
            del node[last]
            return out
        return None
    if isinstance(node, list) and not (isinstance(last, int) and last < len(node)):
        return None
    node[last] = value  # shared, never mutated (a deep copy of the 1000-deep values would recurse)
    return out


# (name, relative path, value, condition on the query): applied to every query (a session's
# queries included, through their path prefix) whose fields make the mutation meaningful.
Field = tuple[str, tuple[Any, ...], Any, Callable[[dict[str, Any]], bool]]
ANY: Callable[[dict[str, Any]], bool] = lambda q: True  # noqa: E731
CSV = lambda q: q.get("input", {}).get("source") == "csv"  # noqa: E731
INLINE = lambda q: q.get("input", {}).get("source") == "inline"  # noqa: E731
FREQ = lambda q: q.get("statistic") == "frequency"  # noqa: E731
BOUNDED = lambda q: "lower" in q.get("params", {})  # noqa: E731
NUMERIC = lambda q: q.get("statistic") in ("sum", "mean", "quantile")  # noqa: E731
QUANTILE = lambda q: q.get("statistic") == "quantile"  # noqa: E731
HIST = lambda q: q.get("statistic") == "histogram"  # noqa: E731
CENTRAL = lambda q: q.get("statistic") in ("sum", "mean", "quantile", "count", "histogram")  # noqa: E731
HAS_INPUT = lambda q: "input" in q  # noqa: E731

QUERY_MUTATIONS: list[Field] = [
    # statistic
    ("statistic_missing", ("statistic",), Missing, ANY),
    ("statistic_unknown", ("statistic",), "avg", ANY),
    ("statistic_empty", ("statistic",), "", ANY),
    ("statistic_int", ("statistic",), 5, ANY),
    ("statistic_null", ("statistic",), None, ANY),
    ("statistic_upper", ("statistic",), "SUM", ANY),
    ("statistic_list", ("statistic",), ["sum"], ANY),
    # budget
    ("budget_missing", ("budget",), Missing, ANY),
    ("budget_string", ("budget",), "1", ANY),
    ("budget_empty", ("budget",), {}, ANY),
    ("budget_list", ("budget",), [0.5], ANY),
    ("epsilon_negative", ("budget", "epsilon"), -1, ANY),
    ("epsilon_zero", ("budget", "epsilon"), 0, ANY),
    ("epsilon_nan", ("budget", "epsilon"), NAN, ANY),
    ("epsilon_inf", ("budget", "epsilon"), INF, ANY),
    ("epsilon_minus_inf", ("budget", "epsilon"), -INF, ANY),
    ("epsilon_string", ("budget", "epsilon"), "0.5", ANY),
    ("epsilon_null", ("budget", "epsilon"), None, ANY),
    ("epsilon_bool", ("budget", "epsilon"), True, ANY),
    ("epsilon_huge", ("budget", "epsilon"), 1e300, ANY),
    ("epsilon_missing", ("budget", "epsilon"), Missing, ANY),
    ("delta_negative", ("budget", "delta"), -1e-6, ANY),
    ("delta_one", ("budget", "delta"), 1, ANY),
    ("delta_big", ("budget", "delta"), 1.5, ANY),
    ("delta_nan", ("budget", "delta"), NAN, ANY),
    ("delta_string", ("budget", "delta"), "1e-6", ANY),
    ("budget_unknown_key", ("budget", "rho"), 0.1, ANY),
    # input
    ("input_string", ("input",), "people.csv", HAS_INPUT),
    ("input_null", ("input",), None, HAS_INPUT),
    ("input_empty", ("input",), {}, HAS_INPUT),
    ("source_unknown", ("input", "source"), "sql", HAS_INPUT),
    ("source_missing", ("input", "source"), Missing, HAS_INPUT),
    ("input_unknown_key", ("input", "query"), "SELECT *", HAS_INPUT),
    ("column_missing", ("input", "column"), Missing, CSV),
    ("column_int", ("input", "column"), 5, CSV),
    ("column_unknown", ("input", "column"), "height", CSV),
    ("path_absolute", ("input", "path"), "/etc/passwd", CSV),
    ("path_dotdot", ("input", "path"), "../people.csv", CSV),
    ("path_deep_dotdot", ("input", "path"), "../../../../../../etc/passwd", CSV),
    ("path_missing_file", ("input", "path"), "nope.csv", CSV),
    ("path_directory", ("input", "path"), ".", CSV),
    ("path_dev_zero", ("input", "path"), "/dev/zero", CSV),
    ("path_empty", ("input", "path"), "", CSV),
    ("path_int", ("input", "path"), 5, CSV),
    ("values_missing", ("input", "values"), Missing, INLINE),
    ("values_string", ("input", "values"), "0101", INLINE),
    ("values_object", ("input", "values"), {"a": 1}, INLINE),
    ("values_ragged", ("input", "values"), [[1, 0], [1]], INLINE),
    ("values_deep", ("input", "values"), [_deep(1000)], INLINE),
    ("categories_empty", ("input", "categories"), [], FREQ),
    ("categories_string", ("input", "categories"), "bus,car", FREQ),
    ("categories_nested", ("input", "categories"), [["bus"], ["car"]], FREQ),
    ("categories_objects", ("input", "categories"), [{}, {}], FREQ),
    # params of the central queries
    ("params_string", ("params",), "lower=0", CENTRAL),
    ("params_unknown_key", ("params", "sensitivity"), 1e-9, CENTRAL),
    ("nan_error", ("params", "nan"), "error", CENTRAL),
    ("nan_unknown", ("params", "nan"), "maybe", CENTRAL),
    ("noise_unknown", ("params", "noise"), "cauchy", NUMERIC),
    ("lower_missing", ("params", "lower"), Missing, BOUNDED),
    ("upper_missing", ("params", "upper"), Missing, BOUNDED),
    ("bounds_inverted", ("params", "lower"), 1e6, BOUNDED),
    ("bounds_equal", ("params", "upper"), 18, lambda q: q.get("params", {}).get("lower") == 18),
    ("lower_nan", ("params", "lower"), NAN, BOUNDED),
    ("upper_nan", ("params", "upper"), NAN, BOUNDED),
    ("upper_inf", ("params", "upper"), INF, BOUNDED),
    ("lower_minus_inf", ("params", "lower"), -INF, BOUNDED),
    ("lower_string", ("params", "lower"), "0", BOUNDED),
    ("lower_deep", ("params", "lower"), _deep(1000), BOUNDED),
    ("q_above_one", ("params", "q"), 1.5, QUANTILE),
    ("q_negative", ("params", "q"), -0.1, QUANTILE),
    ("q_nan", ("params", "q"), NAN, QUANTILE),
    ("hist_categories_missing", ("params", "categories"), Missing, HIST),
    ("hist_categories_empty", ("params", "categories"), [], HIST),
    ("hist_categories_string", ("params", "categories"), "bus", HIST),
    ("hist_categories_nested", ("params", "categories"), [["bus"]], HIST),
    ("hist_other_string", ("params", "other"), "yes", HIST),
    # mechanism of the frequency queries
    ("mechanism_missing", ("mechanism",), Missing, FREQ),
    ("mechanism_string", ("mechanism",), "rr", FREQ),
    ("mechanism_unknown", ("mechanism", "name"), "kr", FREQ),
    ("mechanism_central", ("mechanism", "name"), "laplace", FREQ),
    ("mechanism_name_null", ("mechanism", "name"), None, FREQ),
    ("mechanism_name_int", ("mechanism", "name"), 5, FREQ),
    ("mechanism_unknown_key", ("mechanism", "version"), "2", FREQ),
    ("mechanism_params_unknown", ("mechanism", "params"), {"k": 5, "keep": 0.9, "bogus": 1}, FREQ),
    (
        "mechanism_k_one",
        ("mechanism", "params"),
        {"k": 1},
        lambda q: FREQ(q) and "params" in q.get("mechanism", {}),
    ),
    (
        "mechanism_k_string",
        ("mechanism", "params"),
        {"k": "5"},
        lambda q: FREQ(q) and "params" in q.get("mechanism", {}),
    ),
    (
        "mechanism_k_float",
        ("mechanism", "params"),
        {"k": 2.5},
        lambda q: FREQ(q) and "params" in q.get("mechanism", {}),
    ),
    # rng
    ("rng_string", ("rng",), "secure", ANY),
    ("rng_mode_unknown", ("rng",), {"mode": "quantum"}, ANY),
    ("rng_seed_negative", ("rng",), {"mode": "fast", "seed": -1}, ANY),
    ("rng_seed_float", ("rng",), {"mode": "fast", "seed": 1.5}, ANY),
    ("rng_seed_string", ("rng",), {"mode": "fast", "seed": "7"}, ANY),
    ("rng_seed_bool", ("rng",), {"mode": "fast", "seed": True}, ANY),
    ("rng_seed_list", ("rng",), {"mode": "fast", "seed": [7]}, ANY),
    ("rng_unknown_key", ("rng",), {"mode": "fast", "seed": 7, "stream": 2}, ANY),
    # output
    ("output_string", ("output",), "json", ANY),
    ("confidence_nan", ("output",), {"confidence": NAN}, ANY),
    ("confidence_zero", ("output",), {"confidence": 0}, ANY),
    ("confidence_one", ("output",), {"confidence": 1}, ANY),
    ("confidence_big", ("output",), {"confidence": 1.5}, ANY),
    ("confidence_negative", ("output",), {"confidence": -0.5}, ANY),
    ("confidence_inf", ("output",), {"confidence": INF}, ANY),
    ("confidence_string", ("output",), {"confidence": "0.9"}, ANY),
    ("output_unknown_key", ("output",), {"confidence": 0.9, "format": "csv"}, ANY),
    # unknown keys, nested junk
    ("unknown_key", ("colour",), "red", ANY),
    ("unknown_key_deep", ("extra",), _deep(1000), ANY),
]

TOP_MUTATIONS: list[tuple[str, tuple[Any, ...], Any]] = [
    ("dpkit_missing", ("dpkit",), Missing),
    ("dpkit_version_2", ("dpkit",), "2"),
    ("dpkit_int", ("dpkit",), 1),
    ("session_budget_string", ("session_budget",), "1"),
    ("session_budget_negative", ("session_budget", "epsilon"), -1),
    ("session_budget_nan", ("session_budget", "epsilon"), NAN),
    ("session_budget_inf", ("session_budget", "epsilon"), INF),
    ("session_budget_delta_big", ("session_budget", "delta"), 1.5),
    ("session_composition", ("session_budget", "composition"), "bogus"),
    ("session_budget_unknown_key", ("session_budget", "rho"), 1),
    ("dataset_int", ("dataset",), 5),
    ("id_object", ("id",), {}),
    # sessions
    ("queries_object", ("queries",), {}),
    ("queries_string", ("queries",), "all"),
    ("queries_item_int", ("queries", 0), 5),
    ("queries_item_null", ("queries", 0), None),
    ("session_budget_missing_epsilon", ("budget", "epsilon"), Missing),
    ("composition_unknown", ("budget", "composition"), "bogus"),
    ("session_epsilon_nan", ("budget", "epsilon"), NAN),
    ("defaults_unknown_key", ("defaults", "statistic"), "sum"),
    ("defaults_input_string", ("defaults", "input"), "people.csv"),
    ("defaults_rng_bad_seed", ("defaults", "rng"), {"mode": "fast", "seed": -3}),
    ("defaults_output_nan", ("defaults", "output"), {"confidence": NAN}),
]


def _cases() -> Iterator[tuple[str, Any]]:
    for base_name, base in _bases().items():
        for name, path, value in TOP_MUTATIONS:
            mutated = _set(base, path, value)
            if mutated is not None:
                yield f"{base_name}:{name}", mutated
        if "queries" in base:
            targets = [(("queries", i), q) for i, q in enumerate(base["queries"])]
            targets = targets[:1] + targets[3:4] + targets[4:5]  # a count, a sum, a histogram
        else:
            targets = [((), base)]
        for prefix, query in targets:
            merged = {**base.get("defaults", {}), **query}
            for name, path, value, applies in QUERY_MUTATIONS:
                if not applies(merged):
                    continue
                full = prefix + path
                if (
                    value is Missing
                    and prefix
                    and path[0] in ("input", "rng", "output")
                    and path[0] not in query
                ):
                    continue  # the field comes from the defaults: deleting it here changes nothing
                if len(path) > 1 and prefix and path[0] not in query:
                    continue
                mutated = _set(base, full, value)
                if mutated is not None:
                    where = "/".join(map(str, prefix))
                    yield f"{base_name}{'[' + where + ']' if where else ''}:{name}", mutated
    for name, value in (
        ("list", []),
        ("string", "spec"),
        ("null", None),
        ("number", 5),
        ("deep_list", _deep(1000)),
        ("empty_object", {}),
    ):
        yield f"not_an_object:{name}", value


CASES = list(_cases())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spec directory: the example data files next to the specs."""
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copy(PEOPLE, root / "people.csv")
    shutil.copy(VISITS, root / "visits.csv")
    shutil.copy(LANGUAGES, root / "languages.csv")
    shutil.copy(FRIENDSHIPS, root / "friendships.csv")
    return root


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 200, len(CASES)
    assert len({name for name, _ in CASES}) == len(CASES)


def _seed(spec: Any, seed: int) -> int | None:
    """``seed`` (fast mode, quicker), or None for a spec that asks for secure randomness: a
    seed would contradict it, and the spec would be refused for that, not for its mutation."""
    if not isinstance(spec, dict):
        return seed
    defaults = spec.get("defaults")
    queries = spec.get("queries")
    found = [defaults.get("rng") if isinstance(defaults, dict) else None]
    found += [
        q.get("rng")
        for q in (queries if isinstance(queries, list) else [spec])
        if isinstance(q, dict)
    ]
    return None if any(isinstance(r, dict) and r.get("mode") == "secure" for r in found) else seed


def test_bases_are_valid(workspace: Path, tmp_path: Path) -> None:
    """Each unmutated base runs (so a refusal of a mutant is caused by the mutation)."""
    for name, spec in _bases().items():
        ledger = tmp_path / f"{name}.sqlite"
        result = run_spec(spec, base_dir=workspace, ledger=ledger, seed=_seed(spec, 1))
        assert result["results"], name


def _spent(path: Path) -> Fraction:
    if not path.exists() or path.stat().st_size == 0:
        return Fraction(0)
    handle = Ledger(str(path))
    try:
        return Fraction(handle.spent().epsilon)
    finally:
        handle.close()


@pytest.mark.parametrize(("name", "spec"), CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_refused_in_process(
    workspace: Path, tmp_path: Path, name: str, spec: Any
) -> None:
    """The mutant is refused with a typed dpkit error and nothing is spent."""
    ledger = tmp_path / "ledger.sqlite"
    try:
        run_spec(spec, base_dir=workspace, ledger=ledger, seed=_seed(spec, 3))
    except SpecInvalid as error:
        assert error.exit_code in (2, 3)
        assert error.as_dict()["spent"] is False
    except dpkit.DPKitError:
        pass
    except BaseException as error:
        pytest.fail(
            f"{name}: {type(error).__name__} escaped (a traceback on the CLI): {error!r}"[:2000]
        )
    else:
        pytest.fail(f"{name}: an invalid spec was run")
    assert _spent(ledger) == 0


def test_refusals_leave_a_spent_ledger_unchanged(workspace: Path, tmp_path: Path) -> None:
    """Against a ledger that has already spent 1/2 of 1 (dataset 'people'), every refused
    single-query mutant of the CSV sum leaves the total at exactly 1/2."""
    ledger = tmp_path / "ledger.sqlite"
    base = _bases()["sum_csv"]
    run_spec(base, base_dir=workspace, ledger=ledger, seed=1)
    assert _spent(ledger) == Fraction(1, 2)
    mutants = [spec for name, spec in CASES if name.startswith("sum_csv:")]
    assert len(mutants) > 40
    for spec in mutants:
        try:
            run_spec(spec, base_dir=workspace, ledger=ledger, seed=3)
        except dpkit.DPKitError:
            pass
        except BaseException as error:
            pytest.fail(f"{type(error).__name__} escaped: {error!r}"[:2000])
        else:
            pytest.fail("an invalid spec was run")
    assert _spent(ledger) == Fraction(1, 2)


# -- a sample through the command line --------------------------------------------------------------

CLI_SAMPLE = [
    name
    for name in (
        "survey_rr:epsilon_nan",
        "survey_rr:confidence_nan",
        "survey_rr:rng_seed_negative",
        "survey_rr:mechanism_unknown",
        "survey_rr:values_ragged",
        "survey_rr:values_deep",
        "survey_rr:unknown_key_deep",
        "commute_oue:path_absolute",
        "commute_oue:path_dotdot",
        "commute_oue:path_dev_zero",
        "commute_oue:categories_empty",
        "commute_oue:column_unknown",
        "sum_gaussian_secure:delta_big",
        "sum_gaussian_secure:upper_inf",
        "sum_gaussian_secure:lower_deep",
        "sum_csv:nan_error",
        "sum_csv:bounds_inverted",
        "quantile_csv:q_nan",
        "histogram_csv:hist_categories_empty",
        "people_session:composition_unknown",
        "people_session[queries/3]:epsilon_huge",
        "people_session:defaults_output_nan",
        "not_an_object:deep_list",
    )
]


def test_cli_sample_is_in_the_cases() -> None:
    names = {name for name, _ in CASES}
    assert set(CLI_SAMPLE) <= names, set(CLI_SAMPLE) - names


@pytest.mark.integration
@pytest.mark.parametrize("name", CLI_SAMPLE)
def test_invalid_spec_refused_by_cli(rt: Any, workspace: Path, tmp_path: Path, name: str) -> None:
    """Through ``dpkit run``: exit 2 or 3, a JSON error document with "spent": false, one
    line on stderr, no traceback, nothing spent. NaN and infinities are written as the
    literal tokens Python's json reads."""
    spec = dict(CASES)[name]
    path = (
        workspace
        / f"{name.replace(':', '__').replace('/', '_').replace('[', '_').replace(']', '_')}.json"
    )

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))  # the deep cases: json.dumps recurses per level
    try:
        path.write_text(json.dumps(spec, allow_nan=True))
    finally:
        sys.setrecursionlimit(limit)
    ledger = tmp_path / "ledger.sqlite"
    result = rt.fork_cli("run", "--json", str(path), "--ledger", str(ledger), timeout=20)
    rt.assert_clean_refusal(result, (2, 3))
    assert _spent(ledger) == 0


# -- what a constructor refuses, the schema refuses ----------------------------------------------
#
# The other side of tests/property/test_spec_fuzz.py: one field of a valid spec at a time —
# a mechanism's or query's parameter, the budget's ε and δ, the confidence, the seed — set to
# a value just outside its schema (the neighbours of each bound, past it), of another type, or
# inside it. Whenever the constructors refuse the spec, the composed schema must refuse it
# too, so `dpkit schema query` never admits what cannot run. Relations between two fields
# (lower < upper, krr's k = len(categories), treehist's split of the budget's ε:
# support.schema_values.relations_hold), which JSON Schema cannot state, are kept.


_REGISTRY = dpkit.get_registry()
_SCHEMA = compose_schema("query", _REGISTRY)
_VALIDATOR = jsonschema.Draft202012Validator(_SCHEMA)
_DEFS = _SCHEMA["$defs"]
_TARGETS = sv.targets(_REGISTRY)


def _constructed(spec: dict[str, Any]) -> bool:
    """Whether the public phase accepts ``spec`` — with the schema check off (the question is
    what the constructors say) and without the dry run (resources, not domains)."""
    with (
        patch.object(spec_plan, "_schema_issues", lambda *args: []),
        patch.object(spec_plan, "_dry_run", lambda *args, **kwargs: None),
    ):
        try:
            spec_plan.plan_spec(spec, registry=_REGISTRY, base_dir=ROOT)
        except dpkit.DPKitError:
            return False
    return True


@pytest.mark.parametrize(("statistic", "mechanism"), _TARGETS)
def test_the_bases_are_accepted_by_both(statistic: str, mechanism: str | None) -> None:
    spec = sv.base_spec(_REGISTRY, statistic, mechanism)
    assert _VALIDATOR.is_valid(spec) and _constructed(spec), spec


def _fields(statistic: str, mechanism: str | None) -> dict[tuple[str, ...], dict[str, Any]]:
    """Each field a spec may set, with the schema node its near misses are drawn around."""
    cls = sv.target_class(_REGISTRY, statistic, mechanism)
    declared = parameter_specs(cls)
    where = sv.where_params(mechanism)
    fields = {(*where, name): node for name, node in params_schema(cls)["properties"].items()}
    for name in (n for n in declared if n not in INJECTED):  # the schema may omit some
        fields.setdefault((*where, name), declared[name].domain.json_schema())
    if statistic in sv.FILE_INPUTS and not mechanism:  # a column's name: the table decides
        for name in sv.FILE_INPUTS[statistic][1]:
            fields.pop((*where, name))
    for name in INJECTED:
        envelope = _DEFS[name]
        fields[("budget", name)] = (
            declared[name].domain.json_schema() if name in declared else envelope
        )
    fields[("output", "confidence")] = _DEFS["output"]["properties"]["confidence"]
    fields[("rng", "seed")] = _DEFS["rng"]["properties"]["seed"]
    return fields


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_what_a_constructor_refuses_the_schema_refuses(data: st.DataObject) -> None:
    statistic, mechanism = data.draw(st.sampled_from(_TARGETS))
    spec = sv.base_spec(_REGISTRY, statistic, mechanism)
    fields = _fields(statistic, mechanism)
    path = data.draw(st.sampled_from(sorted(fields)))
    value = data.draw(sv.near_misses(fields[path]))
    if path == ("rng", "seed"):
        spec["rng"] = {"mode": "fast"}
    node = spec
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    params = node if path[-1] not in ("epsilon", "delta", "confidence", "seed") else {}
    if {"lower", "upper"} <= set(params):
        low, high = params["lower"], params["upper"]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
            low, high = sorted((low, high))
            assume(abs(high) < 1e300 and abs(low) < 1e300 and high - low >= 2e-100)
            params["lower"], params["upper"] = low, high
    if "k" in params and isinstance(params.get("categories"), list):
        params["k"] = len(params["categories"])
    mechanism_params = spec.get("mechanism", {}).get("params", {})
    assume(sv.relations_hold(mechanism, mechanism_params, spec["budget"].get("epsilon")))
    event("/".join(path[-2:]))
    if not _constructed(spec):
        assert not _VALIDATOR.is_valid(spec), (
            f"a constructor refuses what the schema accepts: {spec}"
        )

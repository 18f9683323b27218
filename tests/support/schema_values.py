"""Hypothesis strategies for the values a JSON Schema node admits — and for those next to them.

For the spec fuzz tests: the parameter schemas dpkit composes (``dpkit schema query``) use a
small part of JSON Schema (``type`` number/integer/boolean/array, bounds, ``enum``, ``const``,
``anyOf``, ``items``, ``minItems``, ``uniqueItems``), and :func:`admitted` draws from exactly
that, biased to where the schema and a constructor can disagree: the bounds themselves and
their neighbouring floats, integers written as floats (``2.0``), the smallest subnormal, the
largest float, huge integers, empty and repeated lists, long and odd strings.
:func:`near_misses` draws values just outside a node, and values of the wrong type.

Every drawn value is meant to be checked with the schema itself (``validator.is_valid``): the
strategies aim, the validator decides.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from hypothesis import strategies as st

MAX_FLOAT = sys.float_info.max
TINY = math.ulp(0.0)  # 5e-324
ODD_STRINGS = ["", "a", "NaN", "inf", "-0", "1e999", "x" * 10_000, "ε", "a\x00b", " ", "Ǆ"]


def _bounds(node: dict[str, Any]) -> tuple[float, float, bool, bool]:
    low = node.get("minimum", node.get("exclusiveMinimum", -math.inf))
    high = node.get("maximum", node.get("exclusiveMaximum", math.inf))
    return low, high, "exclusiveMinimum" in node, "exclusiveMaximum" in node


def _inside(x: float, node: dict[str, Any]) -> bool:
    low, high, low_open, high_open = _bounds(node)
    return not (x < low or (low_open and x == low) or x > high or (high_open and x == high))


def _number_picks(node: dict[str, Any], integer: bool) -> list[Any]:
    """Boundary values of a numeric node (inside it), as floats and as integers."""
    low, high, _, _ = _bounds(node)
    picks: list[Any] = []
    for end in (low, high):
        if math.isfinite(end):
            for x in (end, math.nextafter(end, math.inf), math.nextafter(end, -math.inf)):
                picks.append(x)
                if float(x).is_integer():
                    picks.append(int(x))
    picks += [0, 0.0, -0.0, 1, 1.0, 2, 2.0, 0.5, TINY, 1e-300, MAX_FLOAT, -MAX_FLOAT, 700, 700.0]
    picks += [4096, 4096.0, 1 << 24, 1 << 31, 1 << 32, 1 << 53, (1 << 53) + 1, 10**20, 1e12]
    out = []
    for x in picks:
        if integer and not float(x).is_integer():
            continue
        if _inside(x, node):
            out.append(x)
    return out


def _numbers(node: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
    low, high, low_open, high_open = _bounds(node)
    picks = _number_picks(node, integer)
    if integer:
        lo = math.ceil(low) if math.isfinite(low) else -(10**6)
        hi = math.floor(high) if math.isfinite(high) else 10**6
        drawn: st.SearchStrategy[Any] = st.integers(lo, max(lo, min(hi, lo + 10**6)))
        drawn = drawn | drawn.map(float)  # 4 and 4.0: the same JSON integer
    else:
        drawn = st.floats(
            low if math.isfinite(low) else None,
            high if math.isfinite(high) else None,
            exclude_min=low_open and math.isfinite(low),
            exclude_max=high_open and math.isfinite(high),
            allow_nan=False,
            allow_infinity=False,
        )
    return st.sampled_from(picks) | drawn if picks else drawn


def _labels(item_types: list[str]) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = []
    if "string" in item_types:
        options.append(st.sampled_from(ODD_STRINGS) | st.text(max_size=8))
    if "integer" in item_types:
        big = st.sampled_from([0, -1, 2**70, -(2**63), 2.0, 7.0, 1e20])
        options.append(st.integers(-5, 50) | big)
    return st.one_of(options)


def admitted(node: dict[str, Any], defs: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values aimed at ``node``'s admitted set (the subset of JSON Schema above; a local
    ``$ref`` is looked up in ``defs``)."""
    if "$ref" in node and defs is not None:
        return admitted(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "anyOf" in node and "type" not in node:
        return st.one_of([admitted(option) for option in node["anyOf"]])
    kind = node.get("type")
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        low = node.get("minLength", 0)
        return st.text(min_size=low, max_size=max(low, min(node.get("maxLength", 8), 8)))
    if kind in ("number", "integer"):
        return _numbers(node, kind == "integer")
    if kind == "array":
        items = node.get("items", {}).get("type", ["string", "integer"])
        item_types = items if isinstance(items, list) else [items]
        lists = [st.lists(_labels(item_types), min_size=node.get("minItems", 0), max_size=8)]
        for option in node.get("anyOf", []):  # all strings, or all integers
            one = option.get("items", {}).get("type")
            if one:
                lists.append(st.lists(_labels([one]), min_size=node.get("minItems", 0), max_size=8))
        return st.one_of(lists)
    raise NotImplementedError(f"no strategy for the schema node {node!r}")


WRONG_TYPES = [None, True, False, "1", "NaN", "", [], [1], {}, {"a": 1}, 10**400, -(10**400)]


def near_misses(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values just outside ``node`` (the neighbours of its bounds, past them), values of other
    types, and a few of its own (so that both answers of the schema are drawn)."""
    picks: list[Any] = list(WRONG_TYPES)
    if node.get("type") in ("number", "integer"):
        low, high, _, _ = _bounds(node)
        for end, away in ((low, -math.inf), (high, math.inf)):
            if math.isfinite(end):
                picks += [math.nextafter(end, away), end * 2 if end else away, end - 1, end + 1]
                picks += [end, end + 0.5, int(end) if float(end).is_integer() else end]
        picks += [1.5, 2.5, -1, 0, 0.0, -0.0, TINY, MAX_FLOAT, 1e308]
    if node.get("type") == "array":
        picks += [[], ["a"], ["a", "a"], [1, 1.0], [1, "1"], ["a", 2], [1.5, 2.5], [True, 2]]
        picks += [[1.0, 2.0], [None, "a"], [[1], [2]], [{}, "a"]]
    if "enum" in node:
        picks += [str(option).upper() for option in node["enum"]] + [" " + str(node["enum"][0])]
    return st.sampled_from(picks) | admitted(node)


# -- specs over every registered mechanism and statistic ----------------------------------------


def targets(registry: Any) -> list[tuple[str, str | None]]:
    """(statistic, local mechanism or None) for every spec-runnable mechanism and query."""
    from dpkit.spec.schema import frequency_mechanisms, heavy_hitter_mechanisms, mean_mechanisms

    return (
        [("frequency", name) for name in frequency_mechanisms(registry)]
        + [("mean", name) for name in mean_mechanisms(registry)]
        + [("heavy_hitters", name) for name in heavy_hitter_mechanisms(registry)]
        + [(name, None) for name in sorted(registry.queries)]
    )


def relations_hold(mechanism: str | None, params: dict[str, Any], epsilon: Any) -> bool:
    """Whether the relation the schema cannot state holds: treehist spends at least 1e-12 on
    each part of ε (ε·split and ε − ε·split, ε from the budget). True where a value is not a
    number (the schema refuses it anyway) and for every other mechanism."""
    if mechanism != "treehist":
        return True
    split = params.get("split", 0.5)
    numbers = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in (split, epsilon)]
    if not all(numbers) or abs(epsilon) > 1e300 or abs(split) > 1e300:
        return True  # beyond the schema's bounds (split ≤ 1): refused by the schema anyway
    tree = float(epsilon) * float(split)
    return tree >= 1e-12 and epsilon - tree >= 1e-12


def target_class(registry: Any, statistic: str, mechanism: str | None) -> type:
    info = registry.mechanisms[mechanism] if mechanism else registry.queries[statistic]
    return info.cls  # type: ignore[no-any-return]


def where_params(mechanism: str | None) -> tuple[str, ...]:
    return ("mechanism", "params") if mechanism else ("params",)


def typical_value(name: str, spec: Any) -> Any:
    """An ordinary value of a declared parameter (its typical range's low end, a bounded
    domain's midpoint, 0 and 10 for lower and upper)."""
    from dpkit.params import Boolean, Choice, Integer, Labels, Real

    domain = spec.domain
    if isinstance(domain, Integer):
        low = domain.low if domain.low is not None else 0
        return max(low, 4) if domain.high is None or domain.high >= 4 else low
    if isinstance(domain, Real):
        if name in ("lower", "low"):
            return 0.0
        if name in ("upper", "high"):
            return 10.0
        if spec.typical:
            return spec.typical[0]
        if math.isfinite(domain.low) and math.isfinite(domain.high):
            return (domain.low + domain.high) / 2
        return 1.0
    if isinstance(domain, Choice):
        return domain.options[0]
    if isinstance(domain, Boolean):
        return False
    if isinstance(domain, Labels):
        return ["a", "b", "c", "d"][: max(domain.min_length, 2)]
    schema = domain.json_schema()
    if schema.get("type") == "string":  # a name (a column's): any text of the allowed length
        return "x" * max(schema.get("minLength", 0), 1)
    raise NotImplementedError(domain)


#: Queries that read a table, never inline values: the input their base spec reads (a path from
#: the repository root, the fuzz tests' base directory) and the parameters naming its columns.
#: The graph query reads an edge list: the example's friendships (columns person and friend).
FILE_INPUTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "graph": (
        {
            "source": "csv",
            "path": "schemas/examples/valid/data/friendships.csv",
            "column": "person",
        },
        {"target_column": "friend"},
    ),
}


def base_spec(registry: Any, statistic: str, mechanism: str | None) -> dict[str, Any]:
    """A valid one-query spec over inline values (or the table of :data:`FILE_INPUTS`): every
    required parameter (and the first of each group of alternatives) at an ordinary value,
    ε = 1, no δ."""
    from dpkit.params import parameter_specs
    from dpkit.spec.schema import INJECTED

    cls = target_class(registry, statistic, mechanism)
    specs = parameter_specs(cls)
    params = {
        name: typical_value(name, spec)
        for name, spec in specs.items()
        if name not in INJECTED and not spec.optional
    }
    for group in getattr(cls, "parameter_alternatives", ()):  # one of each group (krr: k)
        if not set(group) & set(INJECTED):
            params[group[0]] = typical_value(group[0], specs[group[0]])
    spec: dict[str, Any] = {
        "dpkit": "1",
        "session_budget": {"epsilon": 1e6, "delta": 0.5},
        "statistic": statistic,
        "input": {"source": "inline", "values": [0, 1, 2, 3]},
        "budget": {"epsilon": 1.0},
    }
    if statistic in FILE_INPUTS and not mechanism:
        spec["input"], columns = FILE_INPUTS[statistic]
        spec["input"] = dict(spec["input"])
        params.update(columns)
    if mechanism:
        spec["mechanism"] = {"name": mechanism, "params": params}
    elif params:
        spec["params"] = params
    return spec

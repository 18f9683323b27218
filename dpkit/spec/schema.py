"""The spec schemas: static envelopes composed with the installed plugins' parameter schemas.

Each mechanism and query declares its parameters (:func:`dpkit.plugin.parameter`); their JSON Schemas
are attached with ``if``/``then`` on the mechanism or statistic name (never ``oneOf``, whose
errors say nothing about which field is wrong), so a third-party plugin's parameters are
validated as soon as it is installed.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from dpkit.params import (
    CENTRAL_EPSILON,
    DELTA,
    Integer,
    ParameterDomain,
    Real,
    parameter_specs,
)
from dpkit.registry import Registry
from dpkit.units import IdUnit

__all__ = [
    "CONFIDENCE",
    "FREQUENCY",
    "GRAPH",
    "HEAVY_HITTERS",
    "INJECTED",
    "MEAN",
    "SEED",
    "SQL",
    "compose_schema",
    "envelope",
    "frequency_mechanisms",
    "heavy_hitter_mechanisms",
    "is_local",
    "local_mechanisms",
    "mean_mechanisms",
    "params_schema",
]

#: The statistic computed by a local frequency oracle and its estimator.
FREQUENCY = "frequency"
#: A mean: by a local mechanism when the query names one (``mechanism``), else the central query.
MEAN = "mean"
#: The most frequent items of a column, found by a local heavy-hitter protocol (no candidate list).
HEAVY_HITTERS = "heavy_hitters"
#: A SQL statement over named tables (:mod:`dpkit.spec.sql`).
SQL = "sql"
#: A graph statistic of an edge list (the ``dpkit_ldp`` plugin's ``graph`` query).
GRAPH = "graph"
#: Parameters filled from the query's ``budget``, not written in ``params``.
INJECTED = ("epsilon", "delta")
KINDS = ("query", "session", "result")
#: ``output.confidence``: the interval's normal quantile must stay finite in float64.
CONFIDENCE = Real(low=0.0, high=1.0 - 1e-9, low_open=True)
#: ``rng.seed``: an integer in [0, 2^128) (numpy's SeedSequence entropy).
SEED = Integer(low=0, high=2**128 - 1)


def _schema_dir() -> Path:
    packaged = resources.files("dpkit") / "schemas"
    if packaged.is_dir():  # an installed wheel
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "schemas"  # a source checkout


@cache
def envelope(kind: str) -> dict[str, Any]:
    """The static schema of ``kind`` (query, session, result) as shipped."""
    path = _schema_dir() / f"{kind}.schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _in_place_of_epsilon(specs: dict[str, Any]) -> set[str]:
    """Parameters that stand in for ε: with an optional ε, the other optional parameters are its
    alternatives (randomized response by ``epsilon`` or by ``keep``). A spec always gives ε
    (from ``budget``), so they can never be given there."""
    epsilon = specs.get("epsilon")
    if epsilon is None or not epsilon.optional:
        return set()
    return {name for name, spec in specs.items() if spec.optional and name != "epsilon"}


def params_schema(cls: type[Any], *, exclude: tuple[str, ...] = INJECTED) -> dict[str, Any]:
    """The JSON Schema of a mechanism's or query's declared parameters (minus ``exclude``, and
    minus the parameters that stand in for ε, which a spec gives)."""
    fields = attrs.fields_dict(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    specs = parameter_specs(cls)
    alternatives = _in_place_of_epsilon(specs) if "epsilon" in exclude else set()
    for name, spec in specs.items():
        if name in exclude or name in alternatives:
            continue
        schema = dict(spec.domain.json_schema(), description=spec.doc)
        properties[name] = schema
        if not spec.optional and fields[name].default is attrs.NOTHING:
            required.append(name)
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        out["required"] = required
    groups = [
        [name for name in group if name in properties]
        for group in getattr(cls, "parameter_alternatives", ())
        if not set(group) & set(exclude)  # a group with ε is met by the spec's budget
    ]
    if groups:  # one parameter of each group of alternatives (krr: k or categories)
        out["allOf"] = [{"anyOf": [{"required": [name]} for name in group]} for group in groups]
    return out


def local_mechanisms(registry: Registry, statistic: str) -> list[str]:
    """Local mechanisms with an estimator whose class declares ``statistic`` and an ``epsilon``
    parameter (a spec's ``budget.epsilon`` is given to it: a mechanism parameterised otherwise,
    such as forced response, cannot run from a spec)."""
    return sorted(
        name
        for name, info in registry.mechanisms.items()
        if info.kind == "local"
        and name in registry.estimators
        and getattr(info.cls, "statistic", FREQUENCY) == statistic
        and "epsilon" in parameter_specs(info.cls)
    )


def budget_schema(cls: type[Any], params_at: tuple[str, ...] = ("params",)) -> dict[str, Any]:
    """A rule on ``budget`` for a mechanism's or query's class: ``epsilon`` in the domain of its
    ``epsilon`` parameter, and ``delta`` 0 (absent) or in the domain of its ``delta`` parameter
    — only 0 for a pure ε-DP one, and, for a ``delta`` declared ``given_when=(name, value)``,
    required exactly when the parameter ``name`` (under ``params_at``) is ``value``. From the
    declarations the constructors check, so the schema and the constructors cannot disagree on
    a budget."""
    specs = parameter_specs(cls)
    name = getattr(cls, "name", cls.__name__)
    properties: dict[str, Any] = {}
    if "epsilon" in specs:
        properties["epsilon"] = specs["epsilon"].domain.json_schema()
    # "errorMessage" (the keyword of the ajv-errors convention) is what a refusal says
    no_delta = {"const": 0, "errorMessage": f"{name} is pure ε-DP and takes no delta"}
    rule: dict[str, Any] = {"properties": {"budget": {"properties": properties}}}
    delta = specs.get("delta")
    if delta is None:
        properties["delta"] = no_delta
    elif delta.given_when is None:
        properties["delta"] = {"anyOf": [{"const": 0}, delta.domain.json_schema()]}
    else:
        other, value = delta.given_when
        condition: dict[str, Any] = {"properties": {other: {"const": value}}, "required": [other]}
        for key in reversed(params_at):
            condition = {"properties": {key: condition}, "required": [key]}
        rule["if"] = condition
        rule["then"] = {
            "properties": {
                "budget": {
                    "required": ["delta"],
                    "properties": {"delta": delta.domain.json_schema()},
                }
            }
        }
        rule["else"] = {
            "properties": {
                "budget": {
                    "properties": {
                        "delta": {
                            "const": 0,
                            "errorMessage": f"{name} takes a delta only with {other}={value!r}",
                        }
                    }
                }
            }
        }
    return rule


def frequency_mechanisms(registry: Registry) -> list[str]:
    """Local frequency oracles with an estimator: what statistic ``frequency`` can use."""
    return local_mechanisms(registry, FREQUENCY)


def mean_mechanisms(registry: Registry) -> list[str]:
    """Local mean protocols of one value with an estimator: what a local ``mean`` can use."""
    return local_mechanisms(registry, MEAN)


def heavy_hitter_mechanisms(registry: Registry) -> list[str]:
    """Local heavy-hitter protocols with an estimator: what ``heavy_hitters`` can use."""
    return local_mechanisms(registry, HEAVY_HITTERS)


def is_local(query: dict[str, Any]) -> bool:
    """Whether a (schema-valid) query runs a local mechanism: ``frequency``,
    ``heavy_hitters``, or ``mean`` with a ``mechanism``."""
    statistic = query.get("statistic")
    return statistic in (FREQUENCY, HEAVY_HITTERS) or (statistic == MEAN and "mechanism" in query)


def _mean_rule(means: list[str], central: bool) -> dict[str, Any]:
    """A local ``mean`` names one of ``means`` and no ``params``; without a mechanism it is the
    central query (which must then be registered)."""
    local = {
        "properties": {
            "mechanism": {"properties": {"name": {"enum": means}}},
            "params": {"not": {}, "description": "a local mean takes mechanism.params"},
        },
    }
    if central:
        return {"if": {"required": ["mechanism"]}, "then": local}
    return {"required": ["mechanism"], **local}


def _heavy_hitters_rule(protocols: list[str], otherwise: dict[str, Any]) -> dict[str, Any]:
    """``heavy_hitters`` names one of ``protocols`` and no ``params`` (its parameters are the
    protocol's); any other statistic is decided by ``otherwise``."""
    return {
        "if": {"properties": {"statistic": {"const": HEAVY_HITTERS}}, "required": ["statistic"]},
        "then": {
            "required": ["mechanism"],
            "properties": {
                "mechanism": {"properties": {"name": {"enum": protocols}}},
                "params": {"not": {}, "description": "heavy_hitters takes mechanism.params"},
            },
        },
        "else": otherwise,
    }


def _sql_rule() -> dict[str, Any]:
    """A ``sql`` query gives its statement and tables under ``sql``, and none of the fields a
    statement states itself (its input, groups, unit, parameters); no other query gives ``sql``."""
    own = ("input", "params", "mechanism", "group_by", "privacy_unit")
    return {
        "if": {"properties": {"statistic": {"const": SQL}}, "required": ["statistic"]},
        "then": {
            "required": ["sql"],
            "properties": {
                name: {"not": {}, "description": f"a sql query states its {name} in sql"}
                for name in own
            },
        },
        "else": {"properties": {"sql": {"not": {}, "description": "only for statistic 'sql'"}}},
    }


def statistic_rules(registry: Registry) -> dict[str, Any]:
    """``if``/``then`` rules selecting the parameter schema by mechanism or statistic name; a
    mechanism class with ``parameter_rules()`` (JSON Schema rules on its parameters object:
    the relations between parameters its constructor checks) has them applied as well."""
    frequency = frequency_mechanisms(registry)
    means = mean_mechanisms(registry)
    heavy = heavy_hitter_mechanisms(registry)
    mechanisms = sorted(frequency + means + heavy)
    statistics = sorted(
        {
            FREQUENCY,
            SQL,
            *registry.queries,
            *([MEAN] if means else []),
            *([HEAVY_HITTERS] if heavy else []),
        }
    )
    statistics.remove(FREQUENCY)
    statistics.insert(0, FREQUENCY)
    without_mechanism: dict[str, Any] = {"not": {"required": ["mechanism"]}}
    otherwise = without_mechanism
    if means:
        otherwise = {
            "if": {"properties": {"statistic": {"const": MEAN}}, "required": ["statistic"]},
            "then": _mean_rule(means, MEAN in registry.queries),
            "else": without_mechanism,
        }
    if heavy:
        otherwise = _heavy_hitters_rule(heavy, otherwise)
    rules: list[dict[str, Any]] = [
        {"properties": {"statistic": {"enum": statistics}}},
        _sql_rule(),
        {
            "if": {"properties": {"statistic": {"const": FREQUENCY}}, "required": ["statistic"]},
            "then": {
                "required": ["mechanism"],
                "properties": {"mechanism": {"properties": {"name": {"enum": frequency}}}},
            },
            "else": otherwise,
        },
    ]
    for name in mechanisms:
        cls = registry.mechanisms[name].cls
        checks = [budget_schema(cls, ("mechanism", "params"))]
        relations = getattr(cls, "parameter_rules", None)
        if relations is not None:  # its constructor's checks between parameters, as rules
            params_rules = {"allOf": relations()}
            checks.append({"properties": {"mechanism": {"properties": {"params": params_rules}}}})
        rules.append(
            {
                "if": {
                    "properties": {"mechanism": {"properties": {"name": {"const": name}}}},
                    "required": ["mechanism"],
                },
                "then": {
                    "properties": {"mechanism": {"properties": {"params": params_schema(cls)}}},
                    "allOf": checks,
                },
            }
        )
    central_mean = {"not": {"required": ["mechanism"]}}  # a mean without one is the query
    for name, info in sorted(registry.queries.items()):
        rules.append(
            {
                "if": {
                    "properties": {"statistic": {"const": name}},
                    "required": ["statistic"],
                    **({"allOf": [central_mean]} if name == MEAN else {}),
                },
                "then": {
                    "properties": {"params": params_schema(info.cls)},
                    # A query's own constraints on the whole query (its input, its unit, how
                    # its parameters go together), as JSON Schema: ``spec_rule``.
                    "allOf": [budget_schema(info.cls), *_own_rule(info.cls)],
                },
            }
        )
    return {"allOf": rules}


def _own_rule(cls: type[Any]) -> list[dict[str, Any]]:
    rule = getattr(cls, "spec_rule", None)
    return [copy.deepcopy(rule)] if isinstance(rule, dict) else []


def _bundle_refs(node: Any) -> Any:
    """Rewrite ``query.schema.json#/$defs/x`` references to local ``#/$defs/x``."""
    if isinstance(node, dict):
        return {
            k: (
                v.replace("query.schema.json#", "#")
                if k == "$ref" and isinstance(v, str)
                else _bundle_refs(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_bundle_refs(v) for v in node]
    return node


def _set_domain(node: dict[str, Any], domain: ParameterDomain) -> None:
    """Replace a schema node's type and bounds by a domain's, keeping its texts and default."""
    for key in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "$ref"):
        node.pop(key, None)
    node.update(domain.json_schema())


def option_domains(defs: dict[str, Any]) -> None:
    """Set the envelope's numeric options from the domains that check them, so that the schema
    and the checks cannot drift apart: ``output.confidence`` and ``rng.seed`` (the plan's
    :data:`CONFIDENCE`, :data:`SEED`), the id unit's bounds (:class:`dpkit.units.IdUnit`'s
    parameters) and the cost of private partition selection (ε in
    :data:`~dpkit.params.CENTRAL_EPSILON`, δ in :data:`~dpkit.params.DELTA`, the domains
    its parameters are declared with)."""
    _set_domain(defs["output"]["properties"]["confidence"], CONFIDENCE)
    _set_domain(defs["rng"]["properties"]["seed"], SEED)
    unit = parameter_specs(IdUnit)
    for name in ("max_rows", "max_groups"):
        _set_domain(defs["privacy_unit"]["properties"][name], unit[name].domain)
    selection = defs["group_by"]["properties"]["selection"]["properties"]
    _set_domain(selection["epsilon"], CENTRAL_EPSILON)
    _set_domain(selection["delta"], DELTA)


def compose_schema(kind: str, registry: Registry) -> dict[str, Any]:
    """The self-contained schema of ``kind`` for the plugins in ``registry``."""
    if kind == "result":
        return copy.deepcopy(envelope("result"))
    query = copy.deepcopy(envelope("query"))
    option_domains(query["$defs"])
    query["$defs"]["statistic_rules"] = statistic_rules(registry)
    if kind == "query":
        return query
    session: dict[str, Any] = _bundle_refs(copy.deepcopy(envelope("session")))
    session["$defs"] = query["$defs"]
    return session

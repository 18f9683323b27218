"""The spec schemas: static envelopes composed with the installed plugins' parameter schemas.

Each mechanism and query declares its parameters (:func:`dpkit.parameter`); their JSON Schemas
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

from dpkit.params import parameter_specs
from dpkit.registry import Registry

__all__ = [
    "FREQUENCY",
    "INJECTED",
    "compose_schema",
    "envelope",
    "frequency_mechanisms",
    "params_schema",
]

#: The statistic computed by a local mechanism and its estimator.
FREQUENCY = "frequency"
#: Parameters filled from the query's ``budget``, not written in ``params``.
INJECTED = ("epsilon", "delta")
KINDS = ("query", "session", "result")


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


def params_schema(cls: type[Any], *, exclude: tuple[str, ...] = INJECTED) -> dict[str, Any]:
    """The JSON Schema of a mechanism's or query's declared parameters (minus ``exclude``)."""
    fields = attrs.fields_dict(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameter_specs(cls).items():
        if name in exclude:
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
    return out


def frequency_mechanisms(registry: Registry) -> list[str]:
    """Local mechanisms with an estimator: what statistic ``frequency`` can use."""
    return sorted(
        name
        for name, info in registry.mechanisms.items()
        if info.kind == "local" and name in registry.estimators
    )


def statistic_rules(registry: Registry) -> dict[str, Any]:
    """``if``/``then`` rules selecting the parameter schema by mechanism or statistic name."""
    mechanisms = frequency_mechanisms(registry)
    statistics = [FREQUENCY, *sorted(registry.queries)]
    rules: list[dict[str, Any]] = [
        {"properties": {"statistic": {"enum": statistics}}},
        {
            "if": {"properties": {"statistic": {"const": FREQUENCY}}, "required": ["statistic"]},
            "then": {
                "required": ["mechanism"],
                "properties": {"mechanism": {"properties": {"name": {"enum": mechanisms}}}},
            },
            "else": {"not": {"required": ["mechanism"]}},
        },
    ]
    for name in mechanisms:
        rules.append(
            {
                "if": {
                    "properties": {"mechanism": {"properties": {"name": {"const": name}}}},
                    "required": ["mechanism"],
                },
                "then": {
                    "properties": {
                        "mechanism": {
                            "properties": {"params": params_schema(registry.mechanisms[name].cls)}
                        }
                    }
                },
            }
        )
    for name, info in sorted(registry.queries.items()):
        rules.append(
            {
                "if": {"properties": {"statistic": {"const": name}}, "required": ["statistic"]},
                "then": {"properties": {"params": params_schema(info.cls)}},
            }
        )
    return {"allOf": rules}


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


def compose_schema(kind: str, registry: Registry) -> dict[str, Any]:
    """The self-contained schema of ``kind`` for the plugins in ``registry``."""
    if kind == "result":
        return copy.deepcopy(envelope("result"))
    query = copy.deepcopy(envelope("query"))
    query["$defs"]["statistic_rules"] = statistic_rules(registry)
    if kind == "query":
        return query
    session: dict[str, Any] = _bundle_refs(copy.deepcopy(envelope("session")))
    session["$defs"] = query["$defs"]
    return session

"""``dpkit mechanisms [--json]``: what is installed, and which plugin provided it."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from dpkit.commands._output import table, warn_plugin_failures
from dpkit.registry import MechanismInfo, get_registry


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("mechanisms", help="list the registered mechanisms")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(handler=run)


def describe_parameters(info: MechanismInfo) -> dict[str, dict[str, Any]]:
    described = {}
    for name, spec in info.cls.parameters().items():
        entry: dict[str, Any] = {
            "allowed": spec.domain.describe(),
            "schema": spec.domain.json_schema(),
            "doc": spec.doc,
            "required": not spec.optional and _has_no_default(info, name),
        }
        described[name] = entry
    return described


def _has_no_default(info: MechanismInfo, name: str) -> bool:
    import attrs

    field = attrs.fields_dict(info.cls)[name]  # type: ignore[arg-type]
    return field.default is attrs.NOTHING


def as_record(info: MechanismInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "kind": info.kind,
        "plugin": info.provenance.plugin,
        "distribution": info.provenance.distribution,
        "version": info.provenance.version,
        "summary": (info.cls.__doc__ or "").strip().splitlines()[0] if info.cls.__doc__ else "",
        "parameters": describe_parameters(info),
    }


def run(args: argparse.Namespace) -> int:
    registry = get_registry()
    warn_plugin_failures(registry)
    records = [as_record(registry.mechanisms[name]) for name in registry.names()]
    if args.json:
        print(json.dumps(records, indent=2, default=_json_default))
        return 0
    rows = [
        [
            r["name"],
            r["kind"],
            f"{r['plugin']} ({r['distribution'] or '-'} {r['version'] or ''})".replace(" )", ")"),
            ", ".join(r["parameters"]),
        ]
        for r in records
    ]
    print(table(rows, ["NAME", "KIND", "PLUGIN (DISTRIBUTION VERSION)", "PARAMETERS"]))
    return 0


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    raise TypeError(f"not JSON serialisable: {value!r}")

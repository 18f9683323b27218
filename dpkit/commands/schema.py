"""``dpkit schema [query|session|result] [--markdown]``: the spec schemas for the installed plugins."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpkit.commands._output import warn_plugin_failures
from dpkit.registry import get_registry
from dpkit.spec import compose_schema
from dpkit.spec.reference import schema_reference


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of query/session specs or result documents"
    )
    parser.add_argument("kind", nargs="?", default="query", choices=["query", "session", "result"])
    parser.add_argument(
        "--markdown", action="store_true", help="print reference tables instead of the JSON Schema"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    registry = get_registry()
    warn_plugin_failures(registry)
    if args.markdown:
        print(schema_reference(args.kind, registry), end="")
    else:
        print(json.dumps(compose_schema(args.kind, registry), indent=2, ensure_ascii=False))
    return 0

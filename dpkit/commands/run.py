"""``dpkit run SPEC.json``: validate a query or session spec, spend its budget, print the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpkit.commands._output import warn_plugin_failures
from dpkit.errors import DPKitError
from dpkit.registry import get_registry
from dpkit.spec import DEFAULT_LEDGER, SpecInvalid, load_spec, run_spec


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a JSON query or session spec against a budget ledger",
        description="Validate SPEC completely, check its total cost against the ledger, then spend "
        "and release, all or nothing. Prints the result JSON. Exit codes: 0 success, 2 invalid "
        "spec or data, 3 budget refused.",
    )
    parser.add_argument("spec", type=Path, help="the spec file (JSON)")
    parser.add_argument("--data", type=Path, help="CSV file for inputs with source 'csv'")
    parser.add_argument(
        "--ledger", default=DEFAULT_LEDGER, help=f"SQLite ledger (default {DEFAULT_LEDGER})"
    )
    parser.add_argument("--seed", type=int, help="fast, seeded randomness (not attack-resistant)")
    parser.add_argument("--out", type=Path, help="write the result JSON here instead of stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    registry = get_registry()
    warn_plugin_failures(registry)
    if args.seed is not None and args.seed < 0:
        return _fail(SpecInvalid([]), f"--seed must be >= 0, got {args.seed}")
    try:
        spec = load_spec(args.spec)
        result = run_spec(
            spec,
            base_dir=args.spec.resolve().parent,
            ledger=args.ledger,
            data_file=args.data,
            seed=args.seed,
            registry=registry,
        )
    except SpecInvalid as error:
        print(json.dumps(error.as_dict(), indent=2, ensure_ascii=False))
        print(f"dpkit: error: {error}", file=sys.stderr)
        return error.exit_code
    except DPKitError as error:  # ledger problems and the like: same shape, no traceback
        payload = {
            "errors": [{"pointer": "", "code": error.code, "message": str(error)}],
            "spent": False,
        }
        print(json.dumps(payload, indent=2))
        print(f"dpkit: error: {error}", file=sys.stderr)
        return int(getattr(error, "exit_code", 2))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.out:
        try:
            args.out.write_text(text + "\n", encoding="utf-8")
        except OSError as error:  # the budget is spent: still show the result
            print(text)
            print(
                f"dpkit: error: cannot write {args.out}: {error}; result printed instead",
                file=sys.stderr,
            )
            return 1
    else:
        print(text)
    return 0


def _fail(_: SpecInvalid, message: str) -> int:
    print(f"dpkit: error: {message}", file=sys.stderr)
    return 2

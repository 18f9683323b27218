"""``dpkit sql "SELECT ..."``: release a SQL statement against a budget ledger.

The statement is the ZetaSQL differential-privacy syntax (``SELECT WITH DIFFERENTIAL_PRIVACY
OPTIONS (...)``) or a plain ``SELECT ... GROUP BY`` with ``--option NAME=VALUE`` beside it;
its tables are ``--table NAME=PATH`` (Parquet or CSV). ``--plan`` prints each aggregate's
cost and ± error and whether the ledger admits it, and spends nothing (only the tables'
schemas are read); ``--json`` prints the result (or the plan, or the error) as JSON.

Exit codes: 0 released (or planned); 2 refused as invalid (the statement, an option, a table
or its schema, the ledger) and 3 refused by the budget, both before any row is read or
anything spent; 1 spent, but the result could not be written (it is kept in the ledger);
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dpkit.errors import BudgetExceeded, DPKitError, InvalidParameter, SqlError

EXIT_BUDGET = 3
EXIT_INVALID = 2
EXIT_WRITE_FAILED = 1


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sql",
        help="release a SQL statement (ZetaSQL differential-privacy syntax) against a ledger",
        description="Check the statement, its options and its tables' schemas, check its cost "
        "against the ledger, then spend and release. Exit codes: 0 released; 2 invalid "
        "statement, option, table or ledger and 3 budget refused (nothing spent, no row read); "
        "1 spent but the result could not be written; 130 interrupted.",
    )
    parser.add_argument("statement", help="the SQL statement")
    parser.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a private table: a Parquet or CSV file (repeatable)",
    )
    parser.add_argument(
        "--public",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a public table, whose rows may be read: a lookup table a JOIN reads, or the keys "
        "the public_groups option names (repeatable)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a privacy option beside the statement (epsilon=1, privacy_unit_column=user, ...)",
    )
    parser.add_argument(
        "--bounds",
        action="append",
        default=[],
        metavar="COLUMN=LOWER:UPPER",
        help="clamping bounds of a column's values (instead of contribution_bounds_per_group)",
    )
    parser.add_argument(
        "--keys",
        metavar="K1,K2,...",
        help="public group keys (one group column), released whatever the data hold",
    )
    parser.add_argument("--dialect", default="duckdb", choices=("duckdb", "bigquery"))
    parser.add_argument(
        "--bounding",
        default="numpy",
        choices=("numpy", "duckdb"),
        help="bound each person's rows in this process (numpy, default) or inside DuckDB "
        "(memory-bounded); the same rows are kept either way",
    )
    parser.add_argument("--budget", metavar="EPSILON[,DELTA]", help="the ledger's budget")
    parser.add_argument(
        "--ledger", default="dpkit-ledger.sqlite", metavar="LEDGER", help="the ledger (a file)"
    )
    parser.add_argument("--dataset", help="the ledger's dataset name")
    parser.add_argument("--seed", type=int, help="fast, seeded randomness (not attack-resistant)")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    parser.add_argument(
        "--plan", action="store_true", help="print cost and ± error; spend nothing, read no row"
    )
    parser.set_defaults(handler=run)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise InvalidParameter(flag, value, "NAME=VALUE")
        if name in found:
            raise InvalidParameter(flag, value, "each name once")
        found[name] = rest
    return found


def _value(text: str) -> Any:
    """An option's value as typed on the command line: a number if it reads as one."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _bounds(values: list[str]) -> dict[str, tuple[float, float]]:
    found: dict[str, tuple[float, float]] = {}
    for column, text in _pairs(values, "--bounds").items():
        lower, sep, upper = text.partition(":")
        try:
            found[column] = (float(lower), float(upper))
        except ValueError:
            raise InvalidParameter("--bounds", text, "COLUMN=LOWER:UPPER numbers") from None
        if not sep:
            raise InvalidParameter("--bounds", text, "COLUMN=LOWER:UPPER numbers")
    return found


def _budget(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise InvalidParameter("--budget", text, "EPSILON or EPSILON,DELTA numbers") from None
    if len(numbers) not in (1, 2):
        raise InvalidParameter("--budget", text, "EPSILON or EPSILON,DELTA numbers")
    return numbers[0], numbers[1] if len(numbers) == 2 else 0.0


def _refuse(error: DPKitError, as_json: bool) -> int:
    code = EXIT_BUDGET if isinstance(error, BudgetExceeded) else EXIT_INVALID
    code = int(getattr(error, "exit_code", code))
    if as_json:
        payload = {
            "error": {
                "code": error.code,
                "type": type(error).__name__,
                "message": str(error),
                **(
                    {"clause": error.clause, "line": error.line, "column": error.column}
                    if isinstance(error, SqlError)
                    else {}
                ),
            },
            "spent": False,
        }
        print(json.dumps(payload, ensure_ascii=False))
    said = "nothing was spent" in str(error)
    print(f"dpkit: error: {error}{'' if said else '; nothing was spent'}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dpkit.commands._requires import require
    from dpkit.ledger import require_persistent

    try:
        require("dpkit sql", ("sqlglot", "sql"), ("duckdb", "sql"), ("pyarrow", "sql"))
        require_persistent(args.ledger)
        from dpkit.session import Session
        from dpkit.sql_statements import sql

        tables = _pairs(args.table, "--table")
        public = _pairs(args.public, "--public")
        options = {k: _value(v) for k, v in _pairs(args.option, "--option").items()}
        keys = None if args.keys is None else [_value(k) for k in args.keys.split(",")]
        query = sql(
            args.statement,
            tables=tables,
            public=public,
            options=options or None,
            bounds=_bounds(args.bounds),
            keys=keys,
            dialect=args.dialect,
            bounding=args.bounding,
        )
        if args.seed is not None and not 0 <= args.seed < 2**63:
            raise InvalidParameter("--seed", args.seed, "a whole number in [0, 2^63)")
        rng = None if args.seed is None else np.random.default_rng(args.seed)
        with Session(
            budget=_budget(args.budget), ledger=args.ledger, dataset=args.dataset, unit=query.unit
        ) as session:
            if args.plan:
                query.check_input(None)
                return _plan(query, session, args.json)
            release = session.release(query, None, rng=rng)
    except DPKitError as error:
        return _refuse(error, args.json)
    result = release.values
    document = {
        "release_id": release.release_id,
        "cost": {"epsilon": float(release.cost.epsilon), "delta": float(release.cost.delta)},
        **result.to_document(),
    }
    try:
        if args.json:
            print(json.dumps(document, indent=2, ensure_ascii=False))
        else:
            print(release)
    except (OSError, ValueError):
        return EXIT_WRITE_FAILED
    return 0


def _plan(query: Any, session: Any, as_json: bool) -> int:
    cost = session.cost(query.privacy)
    fits, charged, remaining = session.admits([cost])
    from dpkit.spec.preview import sql_accuracy

    document = sql_accuracy(query, query.accuracy(0.05))
    if as_json:
        print(
            json.dumps(
                {
                    "statement": query.text,
                    "cost": {"epsilon": float(charged.epsilon), "delta": float(charged.delta)},
                    "fits": bool(fits),
                    "remaining": {
                        "epsilon": float(remaining.epsilon),
                        "delta": float(remaining.delta),
                    },
                    **document,
                    "spent": False,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        from dpkit.commands._output import table
        from dpkit.commands._results import sql_rows

        shown = [[row[0].strip(), *row[1:]] for row in sql_rows(document, "(95%)")]
        print(table(shown, ["aggregate", "statistic", "cost", "noise", "± error"]))
        verdict = "fits" if fits else "does NOT fit"
        print(
            f"cost ε={float(charged.epsilon):g}, δ={float(charged.delta):g}: {verdict} "
            f"(remaining ε={float(remaining.epsilon):g}, δ={float(remaining.delta):g}); "
            "nothing was spent"
        )
    return 0 if fits else EXIT_BUDGET

"""``dpkit audit NAME [--param key=value ...] [--pair JSON ...] [--pairs FILE] [--query]
[--mode fast|secure|both] [--samples N] [--seed S] [--alpha A] [--json] [--plot FILE]``, and
``dpkit audit --sql STATEMENT --table [NAME=]PATH [--person PATH] [--privacy-unit COLUMN]
[--option NAME=VALUE ...] [--bounds COLUMN=L:U ...] [--keys K1,K2,...] [--bounding B] ...``.

Runs the exact and the statistical tier of :mod:`dpkit.testing` on one registered mechanism —
or, when NAME is a registered query (``count``, ``sum``, ...), audits the whole query on
neighbouring datasets (:func:`dpkit.testing.audit_query`) — shows progress on stderr and prints
a report. With ``--sql`` a SQL statement is audited on its table (D, a small Parquet or CSV
file) and D plus one heavy person (:func:`dpkit.testing.audit_sql`; ``--samples`` is then the
replicas of each table); its flags read as ``dpkit sql``'s, and they are all checked — with
the statement and the tables' schemas — before any release runs. The statistical tier samples both randomness modes by default (``--mode`` picks one;
:mod:`dpkit.testing.modes`), and a violation in either is a violation. ``--pair`` and ``--pairs`` add explicit neighbouring inputs (datasets, for a query),
checked against the declared relation before anything runs. Exit code 0: no violation found;
1: a violation was found; 2: bad usage (unknown name, bad parameter, bad pair) or nothing could
be checked (verdict ``unchecked``, with the reason). ``--plot FILE`` also draws the report with
:func:`dpkit.plot.audit_figure` (needs dpkit[plot]). Needs scipy (``pip install
'dpkit[audit]'``), checked before anything runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import stat
import sys
from typing import Any, Literal

from dpkit import _json as strict_json
from dpkit.commands._output import warn_plugin_failures
from dpkit.commands._progress import ProgressLine
from dpkit.commands._requires import AUDIT, PLOT, require
from dpkit.errors import InvalidParameter, SpecError, UnknownMechanism
from dpkit.registry import Registry, get_registry

EXIT_PASS = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2

#: Default outputs per input, in each randomness mode: a vectorised mechanism, and a query
#: (one Python call per release).
MECHANISM_SAMPLES = 200_000
QUERY_SAMPLES = 20_000
#: ``--mode`` choices and the modes each audits.
MODE_CHOICES: dict[str, tuple[Literal["fast", "secure"], ...]] = {
    "both": ("fast", "secure"),
    "fast": ("fast",),
    "secure": ("secure",),
}
#: The largest --pairs file read (a pairs file is small; a huge one is a mistake).
MAX_PAIRS_FILE = 10 * 2**20


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="check that a mechanism or query keeps the ε (and δ) it claims",
        description=(
            "Audit a registered mechanism: the exact tier checks its declared distribution, the "
            "statistical tier samples its real randomizer and certifies a lower bound on ε. "
            "A registered query is audited whole, on neighbouring datasets."
        ),
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        default=None,
        help="a registered mechanism (see `dpkit mechanisms`) or query (count, sum, ...); "
        "or none, with --sql",
    )
    parser.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='a mechanism parameter; VALUE is read as JSON when it parses (1.5, 8, ["a","b"])',
    )
    parser.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="JSON",
        help="an explicit neighbouring pair [x, y] as JSON, e.g. '[0, 3]', '[-1, 1]', "
        "'[[0, 0], [1, 1]]'; for a query, two datasets '[[1, 2], [1, 2, 3]]' (repeatable)",
    )
    parser.add_argument(
        "--pairs",
        metavar="FILE",
        default=None,
        help="a JSON file holding a list of such pairs",
    )
    parser.add_argument(
        "--query",
        action="store_true",
        help="audit the query NAME even if a mechanism has the same name",
    )
    parser.add_argument(
        "--mode",
        choices=sorted(MODE_CHOICES),
        default="both",
        help="randomness mode(s) to sample: fast (a seeded numpy Generator), secure (dpkit's "
        "samplers on a keyed ChaCha20 stream) or both (default; α is split between them)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        metavar="N",
        help=f"outputs per input in the test, in each mode (default {MECHANISM_SAMPLES} for a "
        f"mechanism, {QUERY_SAMPLES} for a query; with --sql the replicas of each table, "
        "default 2000)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    parser.add_argument(
        "--alpha",
        type=float,
        default=1e-3,
        metavar="A",
        help="false-violation probability of the ε certificate, over all modes (default 0.001)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    sql = parser.add_argument_group(
        "a SQL statement",
        "audit a statement on its table D and on D plus one person x with many rows "
        "(dpkit.testing.audit_sql); --samples is the replicas of each table",
    )
    sql.add_argument("--sql", metavar="STATEMENT", default=None, help="the SQL statement")
    sql.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="D, the statement's table: a small Parquet or CSV file",
    )
    sql.add_argument(
        "--person",
        metavar="PATH",
        default=None,
        help="x's rows (a Parquet or CSV file with the table's columns); default: every row of "
        "the table, twice",
    )
    sql.add_argument(
        "--privacy-unit",
        metavar="COLUMN",
        default=None,
        help="the column naming a person (default: the statement's privacy_unit_column)",
    )
    sql.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a privacy option beside the statement, as for `dpkit sql`",
    )
    sql.add_argument(
        "--bounds",
        action="append",
        default=[],
        metavar="COLUMN=LOWER:UPPER",
        help="clamping bounds of a column's values, as for `dpkit sql`",
    )
    sql.add_argument("--keys", metavar="K1,K2,...", help="public group keys, as for `dpkit sql`")
    sql.add_argument("--dialect", default="duckdb", choices=("duckdb", "bigquery"))
    sql.add_argument(
        "--bounding",
        default="numpy",
        choices=("numpy", "duckdb"),
        help="bound each person's rows in this process (numpy, default) or inside DuckDB",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also draw the report as a figure (.png, .svg or .pdf; needs dpkit[plot])",
    )
    parser.set_defaults(handler=run)


def parse_params(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in pairs:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InvalidParameter(
                "--param", item, "KEY=VALUE, e.g. epsilon=1.0", owner="dpkit audit"
            )
        try:
            value = strict_json.loads(text)
        except SpecError as error:
            if error.code == "duplicate_key":
                raise InvalidParameter(
                    "--param", item, f"JSON without a repeated key ({error})", owner="dpkit audit"
                ) from None
            value = text  # NaN, Infinity: not JSON numbers, so the text itself
        except (ValueError, RecursionError):
            value = text
        params[key.strip()] = value
    return params


def parse_pair(text: str, *, field: str = "--pair") -> Any:
    """One ``--pair`` value: JSON of a two-element list."""
    try:
        pair = strict_json.loads(text)
    except (ValueError, RecursionError, SpecError) as error:
        reason = f" ({error})" if isinstance(error, SpecError) else ""
        raise InvalidParameter(
            field, text, f"JSON of a pair [x, y], e.g. '[0, 3]'{reason}", owner="dpkit audit"
        ) from None
    if not isinstance(pair, list) or len(pair) != 2:
        raise InvalidParameter(field, text, "a JSON list of two inputs [x, y]", owner="dpkit audit")
    return pair


def read_pairs(path: str) -> list[Any]:
    """The pairs of a ``--pairs`` file: a JSON list of [x, y] lists (a small regular file)."""
    allowed = "a readable JSON file holding a list of pairs [[x, y], ...]"
    try:
        info = os.stat(path)
    except OSError as error:
        raise InvalidParameter(
            "--pairs", path, f"{allowed} ({error.strerror})", owner="dpkit audit"
        ) from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_PAIRS_FILE:
        raise InvalidParameter(
            "--pairs", path, f"{allowed}, at most {MAX_PAIRS_FILE} bytes", owner="dpkit audit"
        )
    try:
        with open(path, encoding="utf-8") as handle:
            pairs = strict_json.loads(handle.read())
    except SpecError as error:  # a repeated key or a NaN, at its JSON Pointer
        raise InvalidParameter(
            "--pairs", path, f"{allowed} ({error})", owner="dpkit audit"
        ) from None
    except (OSError, ValueError, RecursionError) as error:
        raise InvalidParameter(
            "--pairs", path, f"{allowed} ({type(error).__name__})", owner="dpkit audit"
        ) from None
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise InvalidParameter("--pairs", path, allowed, owner="dpkit audit")
    return pairs


def _check_options(args: argparse.Namespace) -> None:
    if args.samples is not None and args.samples < 100:
        raise InvalidParameter("--samples", args.samples, "an integer >= 100", owner="dpkit audit")
    if not (0 < args.alpha < 1):
        raise InvalidParameter("--alpha", args.alpha, "a number in (0, 1)", owner="dpkit audit")
    if args.seed < 0:
        raise InvalidParameter("--seed", args.seed, "an integer >= 0", owner="dpkit audit")


class _ProgressBar:
    """The audit's progress: on a terminal a bar and the current step on one line; elsewhere
    one summary line at the end (:mod:`dpkit.commands._progress`). Steps and fractions are the
    auditor's own (a tier, a pair screened), never anything computed from the samples."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.line = ProgressLine()

    def __call__(self, message: str, fraction: float) -> None:
        filled = round(24 * min(max(fraction, 0.0), 1.0))
        bar = "#" * filled + "." * (24 - filled)
        self.line.show(f"{self.label} [{bar}] {message}", force=fraction >= 1.0)

    def finish(self) -> None:
        self.line.finish(f"{self.label}: done in {self.line.elapsed:.1f} s")


def _is_query(registry: Registry, name: str, forced: bool) -> bool:
    if forced or (name not in registry.mechanisms and name in registry.queries):
        if name not in registry.queries:
            raise UnknownMechanism(name, registry.queries, kind="query")
        return True
    if name not in registry.mechanisms:
        raise UnknownMechanism(name, [*registry.mechanisms, *registry.queries], kind="name")
    return False


#: The flags of a SQL audit, and those of a registered name's (each refused with the other).
SQL_FLAGS = {
    "--person": "person",
    "--privacy-unit": "privacy_unit",
    "--option": "option",
    "--bounds": "bounds",
    "--keys": "keys",
}
NAME_FLAGS = {"--param": "param", "--pair": "pair", "--pairs": "pairs", "--query": "query"}


def _check_form(args: argparse.Namespace) -> None:
    """NAME or --sql (one of them), each with its own flags only."""
    if (args.name is None) == (args.sql is None):
        raise InvalidParameter(
            "NAME" if args.name is None else "--sql",
            args.name if args.name is not None else args.sql,
            "a registered name, or --sql STATEMENT with --table, not both",
            owner="dpkit audit",
        )
    if args.sql is None:
        for flag, field in {"--table": "table", **SQL_FLAGS}.items():
            if getattr(args, field) not in (None, []):
                raise InvalidParameter(
                    flag, getattr(args, field), "with --sql only", owner="dpkit audit"
                )
        return
    for flag, field in NAME_FLAGS.items():
        if getattr(args, field) not in (None, [], False):
            raise InvalidParameter(
                flag, getattr(args, field), "with a registered NAME only", owner="dpkit audit"
            )
    if len(args.table) != 1:
        raise InvalidParameter(
            "--table",
            args.table,
            "one table: [NAME=]PATH of a Parquet or CSV file",
            owner="dpkit audit",
        )


def _data_file(flag: str, text: str) -> str:
    """A Parquet or CSV file given on the command line, checked before anything runs."""
    if not (text.lower().endswith((".parquet", ".csv")) and os.path.isfile(text)):
        raise InvalidParameter(flag, text, "an existing .parquet or .csv file", owner="dpkit audit")
    return text


def _sql_audit(args: argparse.Namespace, progress: Any) -> Any:
    """The report of ``--sql``: its flags read as ``dpkit sql`` reads them, then the audit."""
    from dpkit.commands.sql import _bounds, _pairs, _value
    from dpkit.sql_statements import sql
    from dpkit.testing import audit_sql

    name, sep, path = args.table[0].partition("=")
    if not sep or not name.isidentifier():
        name, path = "", args.table[0]
    options = {k: _value(v) for k, v in _pairs(args.option, "--option").items()}
    keys = None if args.keys is None else [_value(k) for k in args.keys.split(",")]
    table = _data_file("--table", path)
    if name:  # the statement reads the table named (no row is read here)
        sql(
            args.sql,
            tables={name: table},
            options=options or None,
            bounds=_bounds(args.bounds),
            keys=keys,
            dialect=args.dialect,
        )
    return audit_sql(
        args.sql,
        table=table,
        person=None if args.person is None else _data_file("--person", args.person),
        privacy_unit=args.privacy_unit,
        options=options or None,
        bounds=_bounds(args.bounds),
        keys=keys,
        dialect=args.dialect,
        bounding=args.bounding,
        **({"replicas": args.samples} if args.samples is not None else {}),
        alpha=args.alpha,
        seed=args.seed,
        modes=MODE_CHOICES[args.mode],
        progress=progress,
    )


def run(args: argparse.Namespace) -> int:
    require("dpkit audit", AUDIT)  # before any work: the statistical tier needs scipy
    if args.plot is not None:
        require("dpkit audit --plot", PLOT)
    _check_form(args)
    _check_options(args)
    if args.sql is not None:
        require("dpkit audit --sql", ("sqlglot", "sql"), ("duckdb", "sql"), ("pyarrow", "sql"))
        if args.plot is not None:
            from dpkit.plot._mpl import check_output

            check_output(args.plot, name="--plot")
        progress = _ProgressBar("auditing the statement")
        report = _sql_audit(args, progress)
        progress.finish()
        return _show(report, args, "the statement")
    pairs = [parse_pair(text) for text in args.pair]
    if args.pairs is not None:
        pairs += read_pairs(args.pairs)
    registry = get_registry()
    warn_plugin_failures(registry)
    query = _is_query(registry, args.name, args.query)
    params = parse_params(args.param)
    target = (
        registry.query(args.name, **params) if query else registry.mechanism(args.name, **params)
    )
    if args.plot is not None:  # fail before the audit runs: FILE writable
        from dpkit.plot._mpl import check_output

        check_output(args.plot, name="--plot")

    from dpkit.testing import audit, audit_query
    from dpkit.testing.inputs import Unsupported, with_pairs

    progress = _ProgressBar(f"auditing {args.name}")
    options: dict[str, Any] = {
        "alpha": args.alpha,
        "seed": args.seed,
        "pairs": pairs,
        "progress": progress,
        "modes": MODE_CHOICES[args.mode],
    }
    if query:
        report = audit_query(target, samples=args.samples or QUERY_SAMPLES, **options)
    else:
        # Every explicit pair is checked before either tier runs (an unsupported mechanism is
        # reported by the audit itself, as unchecked).
        with contextlib.suppress(Unsupported):
            with_pairs(target, pairs, rng=_rng(args.seed), field="--pair")
        progress("exact tier", 0.0)
        report = audit(target, samples=args.samples or MECHANISM_SAMPLES, **options)
    progress.finish()
    return _show(report, args, args.name)


def _show(report: Any, args: argparse.Namespace, what: str) -> int:
    """Print (and draw) the report; its exit code."""
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=_json_default))
    else:
        print(report.format_text())
    if args.plot is not None:
        from dpkit.plot import audit_figure, save

        save(audit_figure(report), args.plot)
    if report.verdict == "unchecked":
        print(f"dpkit: error: {what} could not be audited: {report.reason}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_VIOLATION if report.verdict == "violation" else EXIT_PASS


def _rng(seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return str(value)

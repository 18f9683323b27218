"""``dpkit audit NAME [--param key=value ...] [--samples N] [--seed S] [--alpha A] [--json]
[--plot FILE]``.

Runs the exact and the statistical tier of :mod:`dpkit.testing` on one registered mechanism,
shows progress on stderr and prints a report. Exit code 0: no violation found; 1: a violation
was found; 2: bad usage (unknown mechanism, bad parameter) or nothing the auditor can check.
``--plot FILE`` also draws the report with :func:`dpkit.plot.audit_figure` (needs dpkit[plot]).
Needs scipy (``pip install 'dpkit[audit]'``), checked before anything runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from dpkit.commands._output import warn_plugin_failures
from dpkit.commands._requires import AUDIT, PLOT, require
from dpkit.errors import InvalidParameter
from dpkit.registry import get_registry

EXIT_PASS = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="check that a mechanism keeps the ε (and δ) it claims",
        description=(
            "Audit a registered mechanism: the exact tier checks its declared distribution, the "
            "statistical tier samples its real randomizer and certifies a lower bound on ε."
        ),
    )
    parser.add_argument(
        "name", metavar="NAME", help="a registered mechanism (see `dpkit mechanisms`)"
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
        "--samples",
        type=int,
        default=200_000,
        metavar="N",
        help="outputs per input in the test (default 200000)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    parser.add_argument(
        "--alpha",
        type=float,
        default=1e-3,
        metavar="A",
        help="false-violation probability of the ε certificate (default 0.001)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
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
            value = json.loads(text)
        except ValueError:
            value = text
        params[key.strip()] = value
    return params


def _check_options(args: argparse.Namespace) -> None:
    if args.samples < 100:
        raise InvalidParameter("--samples", args.samples, "an integer >= 100", owner="dpkit audit")
    if not (0 < args.alpha < 1):
        raise InvalidParameter("--alpha", args.alpha, "a number in (0, 1)", owner="dpkit audit")
    if args.seed < 0:
        raise InvalidParameter("--seed", args.seed, "an integer >= 0", owner="dpkit audit")


class _ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, message: str, fraction: float) -> None:
        if self.tty:
            filled = round(24 * fraction)
            bar = "#" * filled + "." * (24 - filled)
            print(f"\r{self.label} [{bar}] {message:<50}", end="", file=sys.stderr, flush=True)
            if fraction >= 1.0:
                print(file=sys.stderr)
        elif message != self.last:
            print(f"{self.label}: {message}", file=sys.stderr, flush=True)
        self.last = message


def run(args: argparse.Namespace) -> int:
    require("dpkit audit", AUDIT)  # before any work: the statistical tier needs scipy
    if args.plot is not None:
        require("dpkit audit --plot", PLOT)
    _check_options(args)
    registry = get_registry()
    warn_plugin_failures(registry)
    mechanism = registry.mechanism(args.name, **parse_params(args.param))
    if args.plot is not None:  # fail before the audit runs: FILE writable
        from dpkit.plot._mpl import check_output

        check_output(args.plot, name="--plot")

    from dpkit.testing import audit

    progress = _ProgressBar(f"auditing {args.name}")
    progress("exact tier", 0.0)
    report = audit(
        mechanism, samples=args.samples, alpha=args.alpha, seed=args.seed, progress=progress
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=_json_default))
    else:
        print(report.format_text())
    if args.plot is not None:
        from dpkit.plot import audit_figure, save

        save(audit_figure(report), args.plot)
    if not report.checked:
        print(f"dpkit: error: {args.name} could not be audited by either tier", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_VIOLATION if report.verdict == "violation" else EXIT_PASS


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return str(value)

"""The ``dpkit`` command.

Each subcommand lives in its own module under :mod:`dpkit.commands` and exposes
``add_parser(subparsers)``, which registers an ``argparse`` parser whose ``handler`` default
takes the parsed arguments and returns the exit code. Errors a user can cause are
:class:`dpkit.DPKitError`; they are printed as one line (or as JSON with ``--json``) with exit
code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
from collections.abc import Sequence

from dpkit import __version__
from dpkit.errors import DPKitError

__all__ = ["entry", "main"]

#: Subcommand modules, in the order ``dpkit --help`` lists them.
COMMANDS = (
    "dpkit.commands.mechanisms",
    "dpkit.commands.audit",
    "dpkit.commands.advise",
    "dpkit.commands.graph",
    "dpkit.commands.account",
    "dpkit.commands.budget",
    "dpkit.commands.run",
    "dpkit.commands.schema",
    "dpkit.commands.plot",
)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``dpkit`` parser; given ``argv`` that names a subcommand, only that subcommand's
    module is imported (a command starts without importing the others: ``dpkit run``'s spec
    machinery is not ``dpkit audit``'s start-up)."""
    parser = argparse.ArgumentParser(
        prog="dpkit", description="Differential privacy mechanisms, estimators and accounting."
    )
    parser.add_argument("--version", action="version", version=f"dpkit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = next((word for word in argv or () if not word.startswith("-")), None)
    chosen = [m for m in COMMANDS if m.rsplit(".", 1)[1] == named] or COMMANDS
    for module_name in chosen:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def report_error(error: DPKitError, *, as_json: bool) -> None:
    if as_json:
        payload = {
            "error": {"code": error.code, "type": type(error).__name__, "message": str(error)}
        }
        print(json.dumps(payload), file=sys.stderr)
    else:
        print(f"dpkit: error: {error}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("dpkit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except DPKitError as error:
        report_error(error, as_json=bool(getattr(args, "json", False)))
        return getattr(error, "exit_code", EXIT_USAGE)
    except BrokenPipeError:  # e.g. `dpkit mechanisms | head`
        return EXIT_OK
    except KeyboardInterrupt:
        # A spend is one database transaction: interrupted, it is either committed (and the
        # result, if released, stored with it) or rolled back; the ledger stays consistent.
        print("dpkit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def entry() -> int:
    """The ``dpkit`` executable: :func:`main`, then no more SIGINT. Once main has returned
    everything is done (released, printed, committed); an interrupt during the interpreter's
    teardown (which joins PyArrow's threads and can take a moment) would otherwise end the
    process by the bare signal instead of with main's exit code."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(entry())

"""The ``dpkit`` command.

Each subcommand lives in its own module under :mod:`dpkit.commands` and exposes
``add_parser(subparsers)``, which registers an ``argparse`` parser whose ``handler`` default
takes the parsed arguments and returns the exit code. Errors a user can cause are
:class:`dpkit.DPKitError`; they are printed as one line (or as JSON with ``--json``) with exit
code 2, never as a traceback.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see entry)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

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
    "dpkit.commands.sql",
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
    import argparse
    import importlib

    from dpkit import __version__

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
    import json

    if as_json:
        payload = {
            "error": {"code": error.code, "type": type(error).__name__, "message": str(error)}
        }
        print(json.dumps(payload), file=sys.stderr)
    else:
        print(f"dpkit: error: {error}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from dpkit.errors import DPKitError

    try:
        parser = build_parser(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return _interrupted()
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except DPKitError as error:
        if _interrupts:  # e.g. a MissingDependency: an interrupted import looks like a failed one
            return _interrupted()
        report_error(error, as_json=bool(getattr(args, "json", False)))
        return getattr(error, "exit_code", EXIT_USAGE)
    except BrokenPipeError:  # e.g. `dpkit mechanisms | head`
        return EXIT_OK
    except KeyboardInterrupt:
        # A spend is one database transaction: interrupted, it is either committed (and the
        # result, if released, stored with it) or rolled back; the ledger stays consistent.
        return _interrupted()
    return code


#: SIGINTs received by :func:`entry`'s handler, and whether the one line was printed.
_interrupts = 0
_told = False


def _on_interrupt(signum: int, frame: Any) -> None:
    """Python's own reaction to SIGINT (raise KeyboardInterrupt), counted: an interrupt inside
    a C extension's import can come out as another error (numpy turns it into an
    ImportError), and the count says it was the user's Ctrl-C all the same."""
    global _interrupts
    _interrupts += 1
    raise KeyboardInterrupt


def _quiet_unraisable(unraisable: Any) -> None:
    """Python's unraisable hook, less the interrupts: a Ctrl-C that lands in a callback whose
    exceptions Python ignores (an import lock's weakref callback, a finaliser) is printed with
    its traceback as "Exception ignored in ..."; the handler has counted it, so :func:`entry`
    still ends the command as interrupted."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _interrupted() -> int:
    """One line and exit code 130 (128 + SIGINT), with further interrupts ignored: a second
    Ctrl-C while this is printed would otherwise be a traceback."""
    global _told
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # An interrupt that left an exec or eval of source text (a dataclass's or namedtuple's
    # generated methods, while a module imports) sets CPython's "unhandled KeyboardInterrupt"
    # flag even though it was handled here, and the interpreter then ends itself by SIGINT
    # instead of with this exit code. Running source text successfully clears the flag, and
    # with SIGINT ignored nothing can set it again.
    exec("None")
    import contextlib

    if not _told:
        _told = True
        with contextlib.suppress(OSError, ValueError):  # stderr closed
            print("dpkit: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def entry() -> int:
    """The ``dpkit`` executable: :func:`main`, then no more SIGINT.

    A Ctrl-C at any moment ends the command with one line and exit code 130, never a traceback
    — during the imports of dpkit's modules and of the extras a command needs too. This module
    imports nothing heavy (``dpkit`` imports its names lazily), so the handler is in place
    before any heavy import; whatever error an interrupted import turns into, an interrupt that
    was received makes it an interruption. A spend is one database transaction: interrupted,
    it is either committed (and the result, if released, stored with it) or rolled back.
    Once main has returned everything is done (released, printed, committed); an interrupt
    during the interpreter's teardown (which joins PyArrow's threads and can take a moment)
    would otherwise end the process by the bare signal instead of with main's exit code."""
    try:
        import signal

        sys.unraisablehook = _quiet_unraisable
        signal.signal(signal.SIGINT, _on_interrupt)
        code = main()
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt) or _interrupts:
            return _interrupted()
        raise
    if _interrupts:  # swallowed on the way (an optional import that "failed"): still an interrupt
        return _interrupted()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(entry())

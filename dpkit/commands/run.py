"""``dpkit run SPEC.json``: validate a query or session spec, spend its budget, print the result.

The result is a readable table by default (per query and group: value ± error, noise, cost)
and the JSON result document with ``--json`` (or in ``--out FILE``). ``--plan`` prints what
each query will cost and how accurate it will be, and spends nothing. On a terminal (or with
``--progress``) stderr shows the progress of a run that lasts: the bytes of each input file read
against its public size, batch by batch, then the queries released — one line rewritten in
place on a terminal, one summary line when stderr is not one (:mod:`dpkit.commands._progress`).
Nothing in it is computed from the data's values.

Exit codes: 0 released (result on stdout or in ``--out``); 2 refused as invalid and 3 refused
by the budget, both before anything is read or spent; 1 spent, but the result could not be
written (it is kept in the ledger: ``dpkit budget show --releases``) or a third-party plugin
failed after the spend; 130 interrupted. Every check that can refuse a run — the spec, the
input files and their headers, the output options, the ledger and the budget — happens before
any private value is read, so the exit code of a refused run says nothing about the data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from dpkit.commands._output import warn_plugin_failures
from dpkit.commands._progress import ProgressLine, megabytes, stderr_is_terminal
from dpkit.commands._results import format_plan, format_result
from dpkit.errors import DPKitError, InvalidParameter
from dpkit.ledger import require_persistent
from dpkit.registry import get_registry
from dpkit.spec import DEFAULT_LEDGER, DataPolicy, SpecInvalid, load_spec, run_spec
from dpkit.spec.data import DEFAULT_MAX_INPUT_BYTES
from dpkit.spec.plan import MAX_SEED
from dpkit.spec.preview import preview_spec

EXIT_WRITE_FAILED = 1


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a JSON query or session spec against a budget ledger",
        description="Validate SPEC completely, check its total cost against the ledger, then spend "
        "and release, all or nothing. Prints the results as a table (--json: the result "
        "document; --plan: cost and accuracy, nothing spent). Exit codes: 0 released; 2 invalid "
        "spec, input file or ledger and 3 budget refused (nothing spent, no data read); 1 spent "
        "but the result could not be written (it is kept in the ledger: dpkit budget show "
        "--releases); 130 interrupted.",
    )
    parser.add_argument("spec", type=Path, help="the spec file (JSON)")
    parser.add_argument(
        "--data", type=Path, help="CSV file for inputs with source 'csv' (may be anywhere)"
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        help="directory that spec input paths must stay inside (default: the spec's directory)",
    )
    parser.add_argument(
        "--allow-any-path",
        action="store_true",
        help="let spec input paths be absolute or leave the data root",
    )
    parser.add_argument(
        "--max-input-bytes",
        type=int,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="N",
        help=f"refuse input files larger than N bytes (default {DEFAULT_MAX_INPUT_BYTES})",
    )
    parser.add_argument(
        "--ledger",
        default=DEFAULT_LEDGER,
        metavar="LEDGER",
        help=f"ledger file (default {DEFAULT_LEDGER}), sqlite:///PATH, or "
        "postgresql://USER@HOST/DATABASE?ledger=NAME (shared by many hosts; dpkit[postgresql])",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="fast, seeded randomness for every query (not attack-resistant); refused for a "
        "spec that asks for secure mode",
    )
    parser.add_argument("--out", type=Path, help="write the result JSON here instead of stdout")
    parser.add_argument(
        "--json", action="store_true", help="print the result (or errors) as JSON for machines"
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print each query's cost, noise and ± error at its confidence; spend nothing, "
        "read no data",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress on stderr: the files read and the queries released, on one line "
        "(default: when stderr is a terminal; elsewhere one summary line at the end)",
    )
    parser.set_defaults(handler=run)


def _refuse(error: DPKitError, as_json: bool) -> int:
    """A refusal before the spend. ``--json``: the error document on stdout, one line on
    stderr; otherwise every problem on stderr, one per line, and nothing on stdout."""
    if isinstance(error, SpecInvalid):
        payload = error.as_dict()
    else:
        payload = {
            "errors": [{"pointer": "", "code": error.code, "message": str(error)}],
            "spent": False,
        }
    if as_json:
        _try_print(json.dumps(payload, indent=2, ensure_ascii=False))
        print(f"dpkit: error: {error}", file=sys.stderr)
    else:
        problems = payload["errors"]
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        lines = [f"dpkit: error: {count}; nothing was spent"]
        lines += [f"  {p['pointer'] or '/'}: {p['message']} [{p['code']}]" for p in problems]
        print("\n".join(" ".join(line.split("\n")) for line in lines), file=sys.stderr)
    return int(getattr(error, "exit_code", 2))


class _Progress:
    """The progress of a run: ``reading people.csv: 45% of 1.2 GB``, then ``released 2 of 5
    queries``; at the end ``read people.csv (1.2 GB) in 31 s; released 5 queries in 45 s``.
    On a terminal the line is drawn only for runs that last more than :data:`DELAY` seconds.
    Its inputs are public: a file's name and size, the bytes read, the queries' number."""

    DELAY = 2.0

    def __init__(self, line: ProgressLine) -> None:
        self.line = line
        self.read: dict[str, tuple[int, float]] = {}  # file name -> (size, seconds to read)

    def _show(self, text: str) -> None:
        if self.line.elapsed >= self.DELAY:
            self.line.show(text)

    def __call__(self, name: str, done: int, total: int) -> None:
        """A file's bytes read (columnar.Progress)."""
        if done >= total:
            self.read.setdefault(name, (total, self.line.elapsed))
        share = done / total if total else 1.0
        self._show(f"reading {name}: {share:4.0%} of {megabytes(total)}")

    def released(self, done: int, total: int) -> None:
        self._show(f"released {done} of {total} {_queries(total)}")
        if done == total:
            reads = [
                f"read {name} ({megabytes(size)}) in {seconds:.1f} s"
                for name, (size, seconds) in self.read.items()
            ]
            released = f"released {total} {_queries(total)} in {self.line.elapsed:.1f} s"
            if self.line.terminal and self.line.elapsed < self.DELAY:
                return  # a short run on a terminal: no line at all
            self.line.finish("; ".join([*reads, released]))


def _queries(count: int) -> str:
    return "query" if count == 1 else "queries"


def _try_print(text: str) -> bool:
    """Write ``text`` and a newline to stdout; False if that failed (closed, broken pipe)."""
    stream = sys.stdout
    if stream is None:
        return False
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        return False
    return True


def _public_checks(args: argparse.Namespace) -> None:
    """Options that can refuse the run, checked before anything is read or spent."""
    if args.seed is not None and not 0 <= args.seed < MAX_SEED:
        raise InvalidParameter("--seed", args.seed, "a whole number in [0, 2^128)")
    if args.max_input_bytes < 0:
        raise InvalidParameter("--max-input-bytes", args.max_input_bytes, "a whole number >= 0")
    require_persistent(args.ledger)
    if args.out is not None:
        parent = args.out.resolve().parent
        if args.out.is_dir():
            raise InvalidParameter("--out", str(args.out), "a file path, not a directory")
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise InvalidParameter(
                "--out", str(args.out), "a file in an existing, writable directory"
            )
    elif sys.stdout is None or _stdout_closed():
        raise InvalidParameter(
            "stdout", "closed", "open to receive the result (or give --out FILE)"
        )
    if args.data_root is not None and not args.data_root.is_dir():
        raise InvalidParameter("--data-root", str(args.data_root), "an existing directory")


def _stdout_closed() -> bool:
    try:
        os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return True
    return False


def run(args: argparse.Namespace) -> int:
    registry = get_registry()
    warn_plugin_failures(registry)
    show_progress = args.progress if args.progress is not None else stderr_is_terminal()
    progress = _Progress(ProgressLine()) if show_progress and not args.plan else None
    policy = DataPolicy(
        root=args.data_root,
        allow_any_path=args.allow_any_path,
        max_bytes=args.max_input_bytes,
        progress=progress,
    )
    try:
        _public_checks(args)
        spec = load_spec(args.spec)
        if args.plan:
            plan = preview_spec(
                spec,
                base_dir=args.spec.resolve().parent,
                data_file=args.data,
                seed=args.seed,
                registry=registry,
                policy=policy,
            )
            text = (
                json.dumps(plan, indent=2, ensure_ascii=False) if args.json else format_plan(plan)
            )
            return 0 if _try_print(text) else EXIT_WRITE_FAILED
        result = run_spec(
            spec,
            base_dir=args.spec.resolve().parent,
            ledger=args.ledger,
            data_file=args.data,
            seed=args.seed,
            registry=registry,
            policy=policy,
            progress=None if progress is None else progress.released,
        )
    except DPKitError as error:
        return _refuse(error, args.json)
    finally:
        if progress is not None:
            progress.line.close()
    return _write(result, args.out, args.json)


def _write_whole(out: Path, text: str) -> None:
    """``text`` into the file ``out`` whole or not at all: written to a new file beside it,
    then renamed over it, so that a write that fails part way (a full disk) leaves no
    truncated result that reads as a document. A path that is not a regular file (a pipe, a
    terminal, ``/dev/stdout``) is written to as it is."""
    if out.exists() and not out.is_file():
        out.write_text(text, encoding="utf-8")
        return
    if out.exists():
        mode = out.stat().st_mode & 0o7777
    else:  # what creating the file would give it
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    handle, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(name, mode)
        os.replace(name, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def _write(result: dict[str, Any], out: Path | None, as_json: bool = True) -> int:
    """Deliver a released result; it is spent and stored in the ledger whatever happens here.
    ``--out`` always gets the JSON document; stdout gets it with ``--json``, else the table."""
    text = json.dumps(result, indent=2, ensure_ascii=False)
    where = "see: dpkit budget show --releases --ledger LEDGER"
    if out is not None:
        try:
            _write_whole(out, text + "\n")
            return 0
        except OSError as error:
            printed = _try_print(text)
            shown = "printed instead" if printed else f"kept in the ledger ({where})"
            print(
                f"dpkit: error: cannot write {out}: {error.strerror}; result {shown}",
                file=sys.stderr,
            )
            return EXIT_WRITE_FAILED
    if _try_print(text if as_json else format_result(result)):
        return 0
    with contextlib.suppress(OSError, ValueError):
        print(
            f"dpkit: error: cannot write the result to stdout; it is kept in the ledger ({where})",
            file=sys.stderr,
        )
    return EXIT_WRITE_FAILED

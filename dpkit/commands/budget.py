"""``dpkit budget show|history|verify --ledger LEDGER [--json]``: what a ledger has spent, on what,
under which privacy unit, with which result, and whether it is consistent; ``dpkit budget move
SOURCE DESTINATION``: move a ledger to another location (:func:`dpkit.ledger.move_ledger`)."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from typing import Any

from dpkit.commands._output import rounded, table
from dpkit.commands._progress import lasting
from dpkit.commands._results import summarize
from dpkit.errors import InvalidParameter
from dpkit.ledger import (
    Ledger,
    LedgerEntry,
    LedgerMissing,
    MoveState,
    move_ledger,
    require_persistent,
)
from dpkit.ledger._move import verify_destination
from dpkit.ledger._open import open_store
from dpkit.units import UnitIdentity

NOT_STORED = "result not stored (spent)"
ABORTED = "none (reservation released before data were read)"
FULL_RESULTS = "(results abridged; every stored result in full: --json)"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("budget", help="inspect a privacy-budget ledger")
    actions = parser.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    for name, handler, summary in (
        ("show", _show, "the budget, what is spent and what remains"),
        ("history", _history, "every release recorded in the ledger, with its label and result"),
        ("verify", _verify, "check the ledger (exit 0 if consistent, 2 with the reason if not)"),
    ):
        sub = actions.add_parser(name, help=summary)
        sub.add_argument(
            "--ledger",
            required=True,
            metavar="LEDGER",
            help="ledger file, sqlite:///PATH, or postgresql://USER@HOST/DATABASE?ledger=NAME",
        )
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name == "verify":
            sub.add_argument(
                "--destination",
                metavar="LEDGER",
                help="for a moved (sealed) ledger: its destination's full location, if the one "
                "the seal names (without a password) is not enough to connect; by default "
                "libpq's PGPASSWORD or ~/.pgpass give the password",
            )
        if name == "show":
            sub.add_argument(
                "--releases",
                action="store_true",
                help="also list each release with its label and stored result",
            )
        sub.set_defaults(handler=handler)
    move = actions.add_parser(
        "move",
        help="move a ledger to another location (e.g. SQLite to PostgreSQL), sealing the old one",
    )
    move.add_argument("source", metavar="SOURCE", help="the ledger to move (it is sealed)")
    move.add_argument(
        "destination",
        metavar="DESTINATION",
        help="where it goes: a new or empty ledger (file, sqlite:///PATH or postgresql://...)",
    )
    move.add_argument("--json", action="store_true", help="print JSON")
    move.set_defaults(handler=_move)


def _open(path: str) -> Ledger:
    require_persistent(path)  # an in-memory ledger would be a new, empty one
    try:
        return Ledger(path)  # never creates: opening a missing file is an error
    except LedgerMissing as error:
        raise LedgerMissing(
            f"no ledger at {error.path}: nothing has been spent there yet (a first run "
            f"creates it with its spec's budget: dpkit run SPEC --ledger {path})",
            path=error.path,
        ) from None


#: The longest result summary a table shows (the whole document is in ``--json``).
SUMMARY_WIDTH = 60


def _result_text(entry: LedgerEntry) -> str:
    """A release's result in a few words: its value(s) and interval, abridged to
    :data:`SUMMARY_WIDTH` characters (the full document: ``--json``)."""
    if entry.status != "spent":
        return ABORTED
    if not entry.result_stored:
        return NOT_STORED
    text = summarize(entry.result)
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 1] + "…"


def _release_record(entry: LedgerEntry) -> dict[str, Any]:
    record = entry.as_dict()
    record["result_stored"] = entry.status == "spent" and entry.result_stored
    if not record["result_stored"]:
        record["result_note"] = _result_text(entry)
    return record


def _release_table(entries: list[LedgerEntry], *, detail: bool) -> str:
    headers = ["SEQ", "LABEL", "MECHANISM", "COST", "RULE", "STATUS", "RESULT"]
    if detail:
        headers[1:1] = ["TIME"]
        headers[-1:-1] = ["RANDOMNESS"]
        headers.append("RELEASE")
    rows = []
    for e in entries:
        row = [
            str(e.seq),
            e.label or "-",
            e.mechanism,
            str(e.cost),
            e.rule or "-",
            e.status,
            _result_text(e),
        ]
        if detail:
            row[1:1] = [e.time]
            row[-1:-1] = [e.randomness]
            row.append(e.release_id)
        rows.append(row)
    return table(rows, headers)


def _show(args: argparse.Namespace) -> int:
    ledger = _open(args.ledger)
    spent, mixed = ledger._verify()  # consistent; units mixed by an older dpkit are shown
    remaining = ledger.remaining()
    counts = ledger._status_counts()
    unit = ledger.unit
    record: dict[str, Any] = {
        "ledger": ledger.path,
        "dataset": ledger.dataset,
        "composition": ledger.composition,
        "rule": ledger.rule,
        "unit": None if unit is None else unit.describe(),
        "mixed_units": [one.describe() for one in mixed],
        "budget": ledger.budget.as_dict(),
        "spent": _spent_record(spent, ledger.rule),
        "remaining": remaining.as_dict(),
        "releases": counts.get("spent", 0),
        "aborted": counts.get("aborted", 0),
    }
    entries = ledger.entries() if args.releases else []
    if args.releases:
        record["entries"] = [_release_record(e) for e in entries]
    if args.json:
        print(json.dumps(record, indent=2, allow_nan=True, default=str))
        return 0
    print(f"ledger       {ledger.path}")
    print(f"dataset      {ledger.dataset}")
    print(f"composition  {_composition_text(ledger)}")
    print(f"unit         {_unit_text(unit, mixed)}")
    print(f"budget       {ledger.budget}")
    print(f"spent        {_spent_text(spent, ledger.rule)}")
    print(f"remaining    {remaining}")
    print(f"releases     {record['releases']} ({record['aborted']} aborted)")
    moved = _moved_text(ledger.move_state())
    if moved:
        print(f"moved        {moved}")
    if args.releases and entries:
        print()
        print(_release_table(entries, detail=False))
        print(FULL_RESULTS)
    return 0


def _composition_text(ledger: Ledger) -> str:
    if ledger.composition != "best":
        return ledger.composition
    if ledger.union is not None:
        return f"best (a union of filters, the main one in {ledger.rule})"
    return (
        f"best (charging in {ledger.rule})" if ledger.rule else "best (rule set at the first spend)"
    )


def _unit_text(unit: UnitIdentity | None, mixed: tuple[UnitIdentity, ...]) -> str:
    """The privacy unit the budget is for, as ``show`` says it."""
    if mixed:
        return (
            f"mixed ({', '.join(str(one) for one in mixed)}): spent under several privacy "
            "units by an older dpkit; it takes no more spends"
        )
    return "not fixed yet (the first spend fixes it)" if unit is None else str(unit)


def _spent_record(spent: Any, rule: str | None) -> dict[str, Any]:
    """What was spent, in the ledger's currency: (ε, δ), or ρ / μ² with the (ε, δ) fields."""
    keep = {"zcdp": "rho", "gdp": "mu2"}.get(rule or "")
    return {
        k: v
        for k, v in spent.as_dict(up=True).items()
        if not k.startswith(("rho", "mu2")) or (keep and k.startswith(keep))
    }


def _spent_text(spent: Any, rule: str | None) -> str:
    """What was spent, in the ledger's currency, rounded up (never shown below the truth)."""
    if rule == "zcdp":
        return f"ρ={rounded(spent.rho or Fraction(0), 12)}"
    if rule == "gdp":
        return f"μ²={rounded(spent.mu2 or Fraction(0), 12)}"
    return f"ε={rounded(spent.epsilon, 12)}, δ={rounded(spent.delta, 12)}"


def _history(args: argparse.Namespace) -> int:
    ledger = _open(args.ledger)
    entries = ledger.entries()
    if args.json:
        print(json.dumps([_release_record(e) for e in entries], indent=2, default=str))
        return 0
    print(_release_table(entries, detail=True))
    print(FULL_RESULTS)
    return 0


def _verify(args: argparse.Namespace) -> int:
    """Exit 0 if consistent; a damaged or inconsistent ledger raises a LedgerError (exit 2),
    and so does one whose older entries mix privacy units (LedgerUnitsMixed). A sealed
    ledger's destination is verified too, and compared entry by entry."""
    ledger = _open(args.ledger)
    spent = ledger.verify()
    record, line = _consistent(ledger, spent)
    state = ledger.move_state()
    record.update(
        state=state.state, moved_to=state.moved_to or None, moved_from=state.moved_from or None
    )
    if args.destination is not None and state.state != "sealed":
        raise InvalidParameter(
            "--destination",
            open_store(args.destination, timeout=ledger.timeout).path,  # without a password
            f"given only for a ledger that was moved ({ledger.path} is {state.state})",
        )
    lines = [f"ledger {line}"]
    moved = _moved_text(state)
    if moved:
        lines.append(moved)
    record["destination"] = None
    if state.state == "sealed":
        check = verify_destination(ledger, args.destination)
        record["destination"], line = _consistent(check.ledger, check.spent)
        record["destination"].update(
            state=check.state.state,
            moved_to=check.state.moved_to or None,
            holds_every_source_entry=True,  # else verify_destination raised
            source_entries=check.moved,
            entries_since_move=check.since,
        )
        lines.append(f"destination {line}")
        lines.append(
            f"destination {check.ledger.path} holds all {check.moved} entries of source "
            f"{ledger.path} as moved (equal amounts, so equal totals: "
            f"{_spent_text(spent, ledger.rule)}); {check.since} made there since the move"
        )
        if check.state.state != "live":  # awaiting its activation, or moved on since
            lines.append(_moved_text(check.state))
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    print("\n".join(lines))
    return 0


def _consistent(ledger: Ledger, spent: Any) -> tuple[dict[str, Any], str]:
    """A verified ledger as ``verify`` reports it: its JSON record and its line."""
    releases, not_stored = ledger._release_counts()  # counted by the database
    unit = ledger.unit
    record: dict[str, Any] = {
        "ledger": ledger.path,
        "consistent": True,
        "unit": None if unit is None else unit.describe(),
        "spent": _spent_record(spent, ledger.rule),
        "releases": releases,
        "results_not_stored": not_stored,
    }
    line = (
        f"{ledger.path} is consistent: spent {_spent_text(spent, ledger.rule)} of "
        f"{ledger.budget} for the privacy unit {_unit_text(unit, ())} in "
        f"{record['releases']} releases ({record['results_not_stored']} without a stored "
        "result)"
    )
    return record, line


def _moved_text(state: MoveState) -> str:
    """A ledger's move, as ``show`` and ``verify`` say it ('' for a ledger never moved)."""
    if state.state == "sealed":
        return f"sealed: moved to {state.moved_to}; it takes no more spends"
    if state.state == "awaiting":
        return (
            f"awaiting: the destination of an unfinished move from {state.moved_from}; it "
            "takes no spend until `dpkit budget move` is run again"
        )
    return f"moved here from {state.moved_from}" if state.moved_from else ""


def _move(args: argparse.Namespace) -> int:
    """Move SOURCE to DESTINATION; both are verified and compared entry by entry afterwards."""
    with lasting("moving the ledger"):
        result = move_ledger(args.source, args.destination)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0
    verb = {"moved": "moved", "finished": "finished moving", "already moved": "already moved"}
    print(
        f"{verb[result.outcome]} {result.source} to {result.destination}: {result.entries} "
        f"entries, spent {result.spent.text(up=True)} (both verified, every entry compared); "
        f"{result.source} is sealed and takes no more spends"
    )
    return 0

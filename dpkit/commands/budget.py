"""``dpkit budget show|history --ledger PATH [--json]``: what a ledger has spent, and on what."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpkit.commands._output import table
from dpkit.ledger import Ledger


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("budget", help="inspect a privacy-budget ledger")
    actions = parser.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    for name, handler, summary in (
        ("show", _show, "the budget, what is spent and what remains"),
        ("history", _history, "every release recorded in the ledger"),
    ):
        sub = actions.add_parser(name, help=summary)
        sub.add_argument(
            "--ledger", required=True, metavar="PATH", help="ledger file (or sqlite:///PATH)"
        )
        sub.add_argument("--json", action="store_true", help="print JSON")
        sub.set_defaults(handler=handler)


def _open(path: str) -> Ledger:
    return Ledger(path)  # never creates: opening a missing file is an error


def _show(args: argparse.Namespace) -> int:
    ledger = _open(args.ledger)
    spent = ledger.verify()
    remaining = ledger.remaining()
    entries = ledger.entries()
    record = {
        "ledger": ledger.path,
        "dataset": ledger.dataset,
        "composition": ledger.composition,
        "budget": ledger.budget.as_dict(),
        "spent": spent.as_dict() if ledger.composition == "zcdp" else _without_rho(spent.as_dict()),
        "remaining": remaining.as_dict(),
        "releases": sum(e.status == "spent" for e in entries),
        "aborted": sum(e.status == "aborted" for e in entries),
    }
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    print(f"ledger       {ledger.path}")
    print(f"dataset      {ledger.dataset}")
    print(f"composition  {ledger.composition}")
    print(f"budget       {ledger.budget}")
    print(f"spent        {_without_rho_text(spent, ledger.composition)}")
    print(f"remaining    {remaining}")
    print(f"releases     {record['releases']} ({record['aborted']} aborted)")
    return 0


def _without_rho(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if not k.startswith("rho")}


def _without_rho_text(spent: Any, composition: str) -> str:
    return (
        f"ρ={float(spent.rho):.12g}"
        if composition == "zcdp"
        else f"ε={float(spent.epsilon):.12g}, δ={float(spent.delta):.12g}"
    )


def _history(args: argparse.Namespace) -> int:
    ledger = _open(args.ledger)
    entries = ledger.entries()
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2, default=str))
        return 0
    rows = [
        [
            str(e.seq),
            e.time,
            e.mechanism,
            str(e.cost),
            e.randomness,
            e.status,
            e.release_id,
        ]
        for e in entries
    ]
    print(table(rows, ["SEQ", "TIME", "MECHANISM", "COST", "RANDOMNESS", "STATUS", "RELEASE"]))
    return 0

"""``dpkit advise --k K --epsilon EPS [--n N] [--json]``: which frequency oracle to use."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from dpkit.advisor import advise
from dpkit.commands._output import table, warn_plugin_failures
from dpkit.registry import get_registry


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "advise",
        help="rank the local frequency oracles by estimator variance for k categories at ε",
        description=(
            "Rank every registered local mechanism that defines frequency_variance by Var* of "
            "its frequency estimate (Wang et al. 2017) and name the best."
        ),
    )
    parser.add_argument("--k", required=True, type=int, help="number of categories")
    parser.add_argument("--epsilon", required=True, type=float, help="privacy loss ε per user")
    parser.add_argument("--n", type=int, default=1, help="number of users (default 1)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    registry = get_registry()
    warn_plugin_failures(registry)
    advice = advise(args.k, args.epsilon, n=args.n, registry=registry)
    if args.json:
        print(json.dumps(advice.as_dict(), indent=2))
        return 0
    best = advice.variances[advice.best]
    rows = [
        [
            name,
            f"{variance:.6g}",
            f"{math.sqrt(variance):.4g}",
            f"{variance / best:.3f}",
        ]
        for name, variance in advice.variances.items()
    ]
    print(f"k={advice.k}  epsilon={advice.epsilon:g}  n={advice.n}: best protocol {advice.best}")
    print(table(rows, ["PROTOCOL", "VAR*[f]", "STD ERROR", "RATIO TO BEST"]))
    for name, reason in advice.skipped.items():
        print(f"skipped {name}: {reason}")
    return 0

"""Summarise a `dpkit run` result document read from standard input (used by the demo)."""

from __future__ import annotations

import json
import sys


def main() -> None:
    document = json.load(sys.stdin)
    for result in document["results"]:
        estimate = result["estimate"]
        if isinstance(estimate, list):
            estimate = ", ".join(f"{value:.1f}" for value in estimate)
        elif isinstance(estimate, float):
            estimate = f"{estimate:.2f}"
        epsilon = result["spent"]["epsilon"]
        print(f"  {result['query_id']:<15} {result['statistic']:<9} ε={epsilon:<5g} → {estimate}")
    session = document["session"]
    spent, budget = session["spent"]["epsilon_exact"], session["budget"]["epsilon_exact"]
    print(
        f"  spent ε = {spent} of {budget} (exactly); remaining {session['remaining']['epsilon_exact']}"
    )


if __name__ == "__main__":
    main()

"""``dpkit advise``: which local protocol to use.

``dpkit advise --k K --epsilon EPS [--n N] [--json]`` ranks the frequency oracles for k
categories; ``dpkit advise --mean --epsilon EPS [--lower A --upper B] [--dimension D] [--n N]
[--json]`` ranks the mean protocols for values in [A, B] (vectors of D of them);
``dpkit advise --triangles --nodes N --max-degree D --epsilon EPS [--target SD] [--json]``
chooses between one- and two-round triangle counting (:func:`dpkit.graph.advise_triangles`).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from dpkit.advisor import advise, advise_mean
from dpkit.commands._output import table, warn_plugin_failures
from dpkit.errors import InvalidParameter
from dpkit.registry import get_registry


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "advise",
        help="rank the local protocols by estimator variance (frequencies, or --mean)",
        description=(
            "Rank every registered local mechanism that defines frequency_variance by Var* of "
            "its frequency estimate (Wang et al. 2017) and name the best; with --mean, rank the "
            "mean protocols (mean_variance) by the worst-case variance of the mean (Wang et al. "
            "2019)."
        ),
    )
    parser.add_argument("--k", type=int, help="number of categories (frequencies)")
    parser.add_argument(
        "--mean", action="store_true", help="advise on a mean of numbers instead of frequencies"
    )
    parser.add_argument("--epsilon", required=True, type=float, help="privacy loss ε per user")
    parser.add_argument("--n", type=int, default=1, help="number of users (default 1)")
    parser.add_argument("--lower", type=float, default=-1.0, help="--mean: lower bound (-1)")
    parser.add_argument("--upper", type=float, default=1.0, help="--mean: upper bound (1)")
    parser.add_argument(
        "--dimension", type=int, default=1, help="--mean: values per user (default 1)"
    )
    parser.add_argument(
        "--triangles",
        action="store_true",
        help="advise on a graph's triangle count: one round or two (--nodes, --max-degree)",
    )
    parser.add_argument("--nodes", type=int, help="--triangles: number of nodes")
    parser.add_argument("--max-degree", type=int, help="--triangles: public degree bound")
    parser.add_argument("--target", type=float, help="--triangles: standard deviation to reach")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def _triangles(args: argparse.Namespace) -> int:
    from dpkit.graph import advise_triangles

    advice = advise_triangles(args.nodes, args.epsilon, args.max_degree, target=args.target)
    if args.json:
        print(json.dumps(advice.as_dict(), indent=2))
        return 0
    print(
        f"triangles: n={advice.nodes}  max degree={advice.max_degree}  "
        f"epsilon={advice.epsilon:g} per edge: best {advice.best.replace('_', ' ')}"
    )
    print(f"one round (randomized response): sd >= {advice.one_round_sd:.4g}")
    print(f"two rounds (epsilon1 = {advice.split:.2f} epsilon): sd <= {advice.two_round_sd:.4g}")
    if advice.target is not None:
        print(
            f"target sd {advice.target:g}: "
            + ("reached" if advice.reaches_target else "not guaranteed")
        )
    return 0


def _print_ranking(variances: dict[str, float], label: str) -> None:
    best = next(iter(variances.values()))
    rows = [
        [name, f"{variance:.6g}", f"{math.sqrt(variance):.4g}", f"{variance / best:.3f}"]
        for name, variance in variances.items()
    ]
    print(table(rows, ["PROTOCOL", label, "STD ERROR", "RATIO TO BEST"]))


def run(args: argparse.Namespace) -> int:
    if args.triangles:
        return _triangles(args)
    registry = get_registry()
    warn_plugin_failures(registry)
    if args.mean == (args.k is not None):
        raise InvalidParameter("k", args.k, "given for frequencies, or else --mean, not both")
    if args.mean:
        mean = advise_mean(
            args.epsilon,
            lower=args.lower,
            upper=args.upper,
            dimension=args.dimension,
            n=args.n,
            registry=registry,
        )
        if args.json:
            print(json.dumps(mean.as_dict(), indent=2))
            return 0
        print(
            f"mean of values in [{mean.lower:g}, {mean.upper:g}]  d={mean.dimension}  "
            f"epsilon={mean.epsilon:g}  n={mean.n}: best protocol {mean.best}"
        )
        _print_ranking(mean.variances, "WORST VAR")
        print(f"why: {mean.why}")
        return 0
    advice = advise(args.k, args.epsilon, n=args.n, registry=registry)
    if args.json:
        print(json.dumps(advice.as_dict(), indent=2))
        return 0
    print(f"k={advice.k}  epsilon={advice.epsilon:g}  n={advice.n}: best protocol {advice.best}")
    _print_ranking(advice.variances, "VAR*[f]")
    for name, reason in advice.skipped.items():
        print(f"skipped {name}: {reason}")
    return 0

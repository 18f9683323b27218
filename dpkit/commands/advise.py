"""``dpkit advise``: which local protocol to use.

``dpkit advise --k K --epsilon EPS [--n N] [--json]`` ranks the frequency oracles for k
categories; ``dpkit advise --mean --epsilon EPS [--lower A --upper B] [--dimension D] [--n N]
[--json]`` ranks the mean protocols for values in [A, B] (vectors of D of them);
``dpkit advise --triangles --nodes N --max-degree D --epsilon EPS [--target SD] [--json]``
chooses between one- and two-round triangle counting (:func:`dpkit.graph.advise_triangles`);
``dpkit advise --telemetry --epsilon EPS --n N [--bits L] [--candidates] [--json]`` ranks the
protocols for items of an unbounded domain: with candidates, the sketches by the standard error
of an item's count (``sketch_variance``), without, the heavy-hitter searches by the noise of a
round's count (``search_deviation``).
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
    parser.add_argument(
        "--n",
        type=int,
        help="number of users (not given: per-user figures, the variance at n users being VAR/n)",
    )
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
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="advise on items of an unbounded domain: sketches (--candidates) or heavy hitters",
    )
    parser.add_argument(
        "--candidates", action="store_true", help="--telemetry: the items to count are known"
    )
    parser.add_argument("--bits", type=int, default=32, help="--telemetry: item length (32)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def _telemetry(args: argparse.Namespace) -> int:
    """Rank the registered local mechanisms that answer the question: the standard error of a
    rare item's count (sketches, ``sketch_variance`` of the frequency, times n) or of a round's
    count in the search (heavy hitters, ``search_deviation``)."""
    registry = get_registry()
    warn_plugin_failures(registry)
    if args.n is None or args.n < 1:
        raise InvalidParameter("n", args.n, "an integer >= 1 (the number of devices)")
    attribute = "sketch_variance" if args.candidates else "search_deviation"
    errors: dict[str, float] = {}
    for name in registry.names():
        cls = registry.mechanisms[name].cls
        method = getattr(cls, attribute, None)
        if cls.kind != "local" or not callable(method):
            continue
        if args.candidates:
            errors[name] = args.n * math.sqrt(method(epsilon=args.epsilon, n=args.n))
        else:
            errors[name] = float(method(epsilon=args.epsilon, n=args.n, bits=args.bits))
    if not errors:
        raise InvalidParameter("telemetry", attribute, "defined by a registered mechanism")
    ranked = dict(sorted(errors.items(), key=lambda item: (item[1], item[0])))
    best = next(iter(ranked))
    task = (
        "counts of candidate items"
        if args.candidates
        else f"heavy hitters of {args.bits}-bit items"
    )
    if args.json:
        print(json.dumps({"task": task, "epsilon": args.epsilon, "n": args.n, "best": best,
                          "standard_errors": ranked}, indent=2))  # fmt: skip
        return 0
    print(f"{task}  epsilon={args.epsilon:g}  n={args.n}: best protocol {best}")
    rows = [[name, f"{sd:.6g}", f"{sd / ranked[best]:.3f}"] for name, sd in ranked.items()]
    print(table(rows, ["PROTOCOL", "STD ERROR (COUNT)", "RATIO TO BEST"]))
    return 0


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


#: What the header says when --n is not given: the figures are for one user.
PER_USER = "per user (no --n: at n users, VAR/n and STD ERROR/√n)"


def _print_ranking(variances: dict[str, float], label: str, per_user: bool) -> None:
    best = next(iter(variances.values()))
    rows = [
        [name, f"{variance:.6g}", f"{math.sqrt(variance):.4g}", f"{variance / best:.3f}"]
        for name, variance in variances.items()
    ]
    headers = [label, "STD ERROR"]
    if per_user:
        headers = [f"n·{label}", "STD ERROR·√n"]
    print(table(rows, ["PROTOCOL", *headers, "RATIO TO BEST"]))


def _users(n: int | None) -> str:
    return PER_USER if n is None else f"n={n}"


def _document(found: dict[str, Any], n: int | None) -> str:
    """The advice as JSON; ``n`` null (per-user figures) when --n was not given."""
    if n is None:
        found["n"] = None
    return json.dumps(found, indent=2)


def run(args: argparse.Namespace) -> int:
    if args.triangles:
        return _triangles(args)
    if args.telemetry:
        return _telemetry(args)
    registry = get_registry()
    warn_plugin_failures(registry)
    if args.mean == (args.k is not None):
        raise InvalidParameter("k", args.k, "given for frequencies, or else --mean, not both")
    n = 1 if args.n is None else args.n  # the variances scale as 1/n
    if args.mean:
        mean = advise_mean(
            args.epsilon,
            lower=args.lower,
            upper=args.upper,
            dimension=args.dimension,
            n=n,
            registry=registry,
        )
        if args.json:
            print(_document(mean.as_dict(), args.n))
            return 0
        print(
            f"mean of values in [{mean.lower:g}, {mean.upper:g}]  d={mean.dimension}  "
            f"epsilon={mean.epsilon:g}  {_users(args.n)}: best protocol {mean.best}"
        )
        _print_ranking(mean.variances, "WORST VAR", args.n is None)
        print(f"why: {mean.why}")
        return 0
    advice = advise(args.k, args.epsilon, n=n, registry=registry)
    if args.json:
        print(_document(advice.as_dict(), args.n))
        return 0
    print(
        f"k={advice.k}  epsilon={advice.epsilon:g}  {_users(args.n)}: best protocol {advice.best}"
    )
    _print_ranking(advice.variances, "VAR*[f]", args.n is None)
    for name, reason in advice.skipped.items():
        print(f"skipped {name}: {reason}")
    return 0

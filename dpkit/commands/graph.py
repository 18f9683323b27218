"""``dpkit graph EDGES --nodes N --mechanism NAME --epsilon EPS``: release a graph's statistics.

Every node of the graph in the edge list EDGES (a CSV file whose first two columns are the two
endpoints of an edge, integer node numbers 0 .. N − 1, after a header line) runs the graph
mechanism NAME (``graph_rr``, ``graph_arr``, ``graph_degree``, ``graph_kstar``); the release is
charged per edge (:class:`dpkit.graph.GraphRelease`) to a ledger, and the statistics its
reports answer are printed with their variance and 95 % interval.

The privacy boundary: the mechanism, its parameters, the statistics, the file's existence and
its header are checked, and the cost against the ledger's budget, before the spend; the edges
are read only after it, and every line that is not an edge of the graph (not two integers in
0 .. N − 1, a self-loop, unreadable) is dropped — a per-edge map, so the guarantee per edge is
kept, and nothing printed or returned depends on how many lines were dropped.

Exit codes: 0 released; 2 refused as invalid (mechanism, parameters, statistics, file) and 3
refused by the budget — nothing spent, no edge read.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.errors import BudgetExceeded, InvalidData, InvalidParameter
from dpkit.graph import GraphEstimate, GraphRelease
from dpkit.registry import get_registry
from dpkit.session import Deferred, Session

GRAPH_MECHANISMS = ("graph_rr", "graph_arr", "graph_degree", "graph_kstar")
#: The exit code of a budget refusal (as ``dpkit run``'s).
EXIT_BUDGET = 3


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="release a graph's statistics from an edge list under edge local DP",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("edges", metavar="EDGES", help="CSV edge list: a header, then i,j lines")
    parser.add_argument("--nodes", type=int, required=True, help="number of nodes n")
    parser.add_argument(
        "--mechanism", required=True, choices=GRAPH_MECHANISMS, help="the per-node mechanism"
    )
    parser.add_argument("--epsilon", type=float, required=True, help="ε per node (edge LDP)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another mechanism parameter, VALUE as JSON (e.g. pairs='\"both\"', mu=0.3)",
    )
    parser.add_argument(
        "--statistic",
        action="append",
        default=[],
        help="a statistic to estimate (default: every one its reports answer)",
    )
    parser.add_argument(
        "--ledger",
        default=":memory:",
        help="privacy ledger (file, sqlite:///PATH, postgresql://...); default: in memory",
    )
    parser.add_argument("--budget", type=float, help="ε budget of a new ledger (per edge)")
    parser.add_argument("--dataset", default=None, help="dataset name of the ledger")
    parser.add_argument(
        "--seed", type=int, help="fast mode with this seed (not attack-resistant; default secure)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def _parameters(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidParameter("param", item, "NAME=VALUE")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value  # a bare word: the string itself
    return params


def _check_file(path: Path) -> None:
    """Public phase: the file exists and its header names at least two columns."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            header = next(csv.reader([handle.readline()]), [])
    except OSError as error:
        raise InvalidData(f"cannot read {str(path)!r}: {error.strerror}", field="edges") from None
    if len(header) < 2:
        raise InvalidData(
            f"{str(path)!r}: the header must name two columns (the endpoints)", field="edges"
        )


def read_edges(path: Path, nodes: int) -> Any:
    """Private phase, total: the (m, 2) edges of the file's lines that are edges of an n-node
    graph (each once)."""
    pairs: list[tuple[int, int]] = []
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        handle.readline()  # the header
        for row in csv.reader(line.replace("\0", "") for line in handle):
            try:
                i, j = int(row[0]), int(row[1])
            except (ValueError, IndexError):
                continue
            if 0 <= i < nodes and 0 <= j < nodes and i != j:
                pairs.append((max(i, j), min(i, j)))
    return np.unique(np.array(pairs, dtype=np.int64).reshape(-1, 2), axis=0)


def _summary(estimate: GraphEstimate) -> dict[str, Any]:
    low, high = estimate.confidence_interval(0.95)
    return {
        "estimate": estimate.estimates.tolist(),
        "variance": estimate.variance.tolist(),
        "variance_kind": estimate.variance_kind,
        "unbiased": estimate.unbiased,
        "note": estimate.note,
        "interval_95": [low.tolist(), high.tolist()],
    }


def run(args: argparse.Namespace) -> int:
    import dpkit.graph as graph_api

    registry = get_registry()
    params = _parameters(args.param)
    mechanism = registry.mechanism(args.mechanism, epsilon=args.epsilon, nodes=args.nodes, **params)
    estimator = registry.estimator(mechanism)
    supported = tuple(getattr(estimator, "graph_statistics", ()))
    statistics = args.statistic or list(supported)
    for statistic in statistics:
        if statistic not in supported:
            raise InvalidParameter(
                "statistic", statistic, "one of " + ", ".join(supported), owner=args.mechanism
            )
    path = Path(args.edges)
    _check_file(path)
    release = GraphRelease(mechanism, edge_list=True)
    budget = (args.budget, 0.0) if args.budget is not None else None
    if budget is None and args.ledger == ":memory:":
        budget = (release.privacy.epsilon, 0.0)
    rng = None if args.seed is None else np.random.default_rng(args.seed)
    with Session(budget=budget, ledger=args.ledger, dataset=args.dataset) as session:
        try:
            released = session.release_all(
                [(release, Deferred(lambda: read_edges(path, args.nodes)), rng, "graph")]
            )[0]
        except BudgetExceeded as error:  # exit 3, as `dpkit run`: nothing spent or read
            print(f"dpkit: error: {error}", file=sys.stderr)
            return EXIT_BUDGET
    functions = {
        "edges": graph_api.edge_count,
        "degrees": graph_api.degrees,
        "degree_distribution": graph_api.degree_distribution,
        "triangles": graph_api.triangles,
        "kstars": graph_api.kstars,
    }
    estimates = {
        statistic: functions[statistic](mechanism, released.values, registry=registry)
        for statistic in statistics
    }
    payload = {
        "mechanism": args.mechanism,
        "nodes": args.nodes,
        "epsilon_per_node": mechanism.privacy.epsilon,
        "epsilon_per_edge": release.privacy.epsilon,
        "release_id": released.release_id,
        "randomness": "fast" if rng is not None else "secure",
        "estimates": {name: _summary(value) for name, value in estimates.items()},
    }
    if args.json:
        print(json.dumps(payload, indent=2))
        return 0
    print(
        f"{args.mechanism} on {args.nodes} nodes: ε = {payload['epsilon_per_node']:g} per node, "
        f"{payload['epsilon_per_edge']:g} per edge ({payload['randomness']} mode)"
    )
    for name, value in estimates.items():
        if value.estimates.ndim:
            print(f"{name}: {value.estimates.size} values (see --json)")
            continue
        low, high = value.confidence_interval(0.95)
        print(
            f"{name}: {value.value:.6g} ± {math.sqrt(max(float(value.variance), 0.0)):.4g} "
            f"(95% interval {float(low):.6g} .. {float(high):.6g}; variance {value.variance_kind})"
        )
    return 0

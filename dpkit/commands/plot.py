"""``dpkit plot utility|histogram|result|audit|budget|docs ... --out FILE``: dpkit's figures as
files (``result``: a released result from a ``dpkit run --json`` document).

Needs the optional extra (``pip install 'dpkit[plot]'``); without it every action stops with a
one-line error and exit code 2, as it does for a bad argument, a missing ledger or an output
path that cannot be written. ``audit`` exits 1 when an audit finds a violation (the figure is
still written), like ``dpkit audit``.
"""

from __future__ import annotations

import argparse
from typing import Any

from dpkit.commands._output import warn_plugin_failures
from dpkit.commands._requires import AUDIT, PLOT, require
from dpkit.errors import InvalidParameter
from dpkit.registry import get_registry

EXIT_OK = 0
EXIT_VIOLATION = 1


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure (privacy-utility curve, histogram, a released result, audit, "
        "budget) to a file",
        description=(
            "Draw one of dpkit's figures to an image file (.png, .svg or .pdf). "
            "Needs matplotlib: pip install 'dpkit[plot]'."
        ),
    )
    actions = parser.add_subparsers(dest="plot_command", metavar="FIGURE", required=True)

    utility = actions.add_parser(
        "utility",
        help="estimator variance vs ε of the local frequency oracles at domain size k",
        description=(
            "Plot Var*[f̂] of each local frequency oracle (as ranked by `dpkit advise`) "
            "against ε, on a log scale."
        ),
    )
    utility.add_argument("--k", type=int, required=True, help="number of categories")
    utility.add_argument(
        "--epsilons",
        required=True,
        metavar="E1,E2,...",
        help="comma-separated ε values, e.g. 0.5,1,2,4",
    )
    utility.add_argument("--n", type=int, default=10_000, help="number of users (default 10000)")
    utility.add_argument(
        "--mechanisms",
        default="krr,sue,oue,olh,hr",
        metavar="M1,M2,...",
        help="comma-separated protocols (default krr,sue,oue,olh,hr)",
    )
    _out(utility)
    utility.set_defaults(handler=_utility)

    histogram = actions.add_parser(
        "histogram",
        help="true vs estimated histogram of a simulated Zipf population",
        description=(
            "Simulate n users with a Zipf-distributed value, randomize each with a local "
            "mechanism, and plot the estimated histogram with confidence intervals against "
            "the truth."
        ),
    )
    histogram.add_argument(
        "--mechanism", default="krr", help="a local frequency oracle (default krr)"
    )
    histogram.add_argument("--epsilon", type=float, default=1.0, help="ε per user (default 1)")
    histogram.add_argument(
        "--k", type=int, default=None, help="number of categories (default 8, if it applies)"
    )
    histogram.add_argument("--n", type=int, default=10_000, help="number of users (default 10000)")
    histogram.add_argument(
        "--zipf", type=float, default=1.1, metavar="S", help="Zipf exponent (default 1.1)"
    )
    histogram.add_argument(
        "--level", type=float, default=0.95, help="confidence level (default 0.95)"
    )
    histogram.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    _out(histogram)
    histogram.set_defaults(handler=_histogram)

    result = actions.add_parser(
        "result",
        help="a released result with its intervals, from a `dpkit run --json` document",
        description=(
            "Draw the values of one released result (per group and category) with their "
            "intervals, from the result document `dpkit run SPEC --json` (or --out) writes."
        ),
    )
    result.add_argument("document", metavar="RESULT.json", help="a dpkit run result document")
    result.add_argument(
        "--query", metavar="ID", help="the query to draw (needed when it has several)"
    )
    _out(result)
    result.set_defaults(handler=_result)

    audit = actions.add_parser(
        "audit",
        help="certified ε lower bound vs claimed ε, per mechanism",
        description=(
            "Audit mechanisms (default: every registered one) with the statistical and exact "
            "tiers of `dpkit audit` at a small sample size, and plot the certified lower bound "
            "ε_lb against the claimed ε."
        ),
    )
    audit.add_argument(
        "--mechanism",
        action="append",
        default=None,
        metavar="NAME",
        help="a mechanism to audit (repeat for several; default: all registered)",
    )
    audit.add_argument("--epsilon", type=float, default=1.0, help="claimed ε (default 1)")
    audit.add_argument("--k", type=int, default=8, help="categories, where it applies (default 8)")
    audit.add_argument(
        "--samples", type=int, default=20_000, help="outputs per input (default 20000)"
    )
    audit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _out(audit)
    audit.set_defaults(handler=_audit)

    budget = actions.add_parser(
        "budget",
        help="cumulative ε (and δ) spent over time from a ledger",
        description="Plot the running total spent in a ledger, with the budget as a line.",
    )
    budget.add_argument(
        "--ledger",
        required=True,
        metavar="LEDGER",
        help="ledger file, sqlite:///PATH, or postgresql://USER@HOST/DATABASE?ledger=NAME",
    )
    budget.add_argument("--dataset", default=None, help="check the ledger is this dataset's")
    budget.add_argument(
        "--x",
        choices=("release", "time"),
        default="release",
        help="x-axis: release number or commit time (default release)",
    )
    _out(budget)
    budget.set_defaults(handler=_budget)

    docs = actions.add_parser(
        "docs",
        help="write the documentation's figures into a directory",
        description="Write histogram.png, utility.png, audit.png and budget.png into DIR.",
    )
    docs.add_argument("out_dir", metavar="DIR", help="output directory (created if missing)")
    docs.set_defaults(handler=_docs)


def _out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output image (.png, .svg or .pdf)"
    )


def _requirements(args: argparse.Namespace) -> None:
    """Fail fast, before any work: every figure needs matplotlib, and the audit figures (``audit``,
    ``docs``) run the statistical auditor, which needs scipy."""
    require("dpkit plot", PLOT)
    if args.plot_command in ("audit", "docs"):
        require(f"dpkit plot {args.plot_command}", AUDIT)


def _prepare(args: argparse.Namespace) -> None:
    """Fail fast, before any work: the extras are installed and --out can be written."""
    from dpkit.plot._mpl import check_output

    _requirements(args)
    check_output(args.out, name="--out")


def _floats(text: str, option: str, owner: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values:
        raise InvalidParameter(
            option, text, "a comma-separated list of numbers, e.g. 0.5,1,2,4", owner=owner
        )
    return values


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _written(path: Any) -> None:
    print(f"wrote {path}")


def _utility(args: argparse.Namespace) -> int:
    _prepare(args)
    from dpkit.plot import save, utility_figure

    owner = "dpkit plot utility"
    epsilons = _floats(args.epsilons, "--epsilons", owner)
    if any(not (e > 0) or e == float("inf") for e in epsilons):
        raise InvalidParameter(
            "--epsilons", args.epsilons, "finite numbers > 0, e.g. 0.5,1,2,4", owner=owner
        )
    mechanisms = _names(args.mechanisms)
    if not mechanisms:
        raise InvalidParameter("--mechanisms", args.mechanisms, "one or more names", owner=owner)
    registry = get_registry()
    warn_plugin_failures(registry)
    figure = utility_figure(args.k, epsilons, n=args.n, mechanisms=mechanisms, registry=registry)
    _written(save(figure, args.out))
    return EXIT_OK


def _histogram(args: argparse.Namespace) -> int:
    _prepare(args)
    import numpy as np

    from dpkit.plot import histogram_figure, save, simulate_histogram

    owner = "dpkit plot histogram"
    if args.seed < 0:
        raise InvalidParameter("--seed", args.seed, "an integer >= 0", owner=owner)
    if not (0 < args.level < 1):
        raise InvalidParameter("--level", args.level, "a number in (0, 1)", owner=owner)
    registry = get_registry()
    warn_plugin_failures(registry)
    declared = registry.info(args.mechanism).cls.parameters()
    params: dict[str, Any] = {"epsilon": args.epsilon}
    if "k" in declared:
        params["k"] = 8 if args.k is None else args.k
    elif args.k is not None:
        raise InvalidParameter(
            "--k", args.k, f"left out: {args.mechanism} has no parameter k", owner=owner
        )
    mechanism = registry.mechanism(args.mechanism, **params)
    simulated = simulate_histogram(
        mechanism, n=args.n, s=args.zipf, rng=np.random.default_rng(args.seed), registry=registry
    )
    size = simulated.true_counts.size
    title = (
        f"{args.mechanism} at ε = {args.epsilon:g}: {args.n:,} users, {size} categories, "
        f"Zipf population (s = {args.zipf:g})"
    )
    figure = histogram_figure(
        simulated.estimate, simulated.true_counts, level=args.level, title=title
    )
    _written(save(figure, args.out))
    return EXIT_OK


def _chosen_result(path: str, query: str | None) -> dict[str, Any]:
    """The result to draw from a result document: the one whose query_id is ``query``, or
    the only one."""
    import json
    from pathlib import Path

    owner = "dpkit plot result"
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InvalidParameter(
            "RESULT.json", path, f"a readable dpkit run result document ({error})", owner=owner
        ) from None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list) or not results:
        raise InvalidParameter(
            "RESULT.json", path, "a result document with results (dpkit run --json)", owner=owner
        )
    ids = [str(r.get("query_id")) for r in results if isinstance(r, dict)]
    if query is None:
        if len(results) == 1:
            return dict(results[0])
        raise InvalidParameter("--query", None, f"one of {', '.join(ids)}", owner=owner)
    for found in results:
        if isinstance(found, dict) and str(found.get("query_id")) == query:
            return found
    raise InvalidParameter("--query", query, f"one of {', '.join(ids)}", owner=owner)


def _result(args: argparse.Namespace) -> int:
    _prepare(args)
    from dpkit.plot import release_figure, save

    figure = release_figure(_chosen_result(args.document, args.query))
    _written(save(figure, args.out))
    return EXIT_OK


def _audit(args: argparse.Namespace) -> int:
    _prepare(args)
    from dpkit.plot import audit_figure, audit_reports, save

    owner = "dpkit plot audit"
    if args.samples < 100:
        raise InvalidParameter("--samples", args.samples, "an integer >= 100", owner=owner)
    if args.seed < 0:
        raise InvalidParameter("--seed", args.seed, "an integer >= 0", owner=owner)
    registry = get_registry()
    warn_plugin_failures(registry)
    reports = audit_reports(
        args.mechanism,
        epsilon=args.epsilon,
        k=args.k,
        samples=args.samples,
        seed=args.seed,
        registry=registry,
    )
    _written(save(audit_figure(reports), args.out))
    violations = [r.label for r in reports if r.verdict == "violation"]
    for label in violations:
        print(f"violation: {label} (see `dpkit audit` for the findings)")
    return EXIT_VIOLATION if violations else EXIT_OK


def _budget(args: argparse.Namespace) -> int:
    _prepare(args)
    from dpkit.plot import budget_figure, save

    figure = budget_figure(args.ledger, dataset=args.dataset, x=args.x)
    _written(save(figure, args.out))
    return EXIT_OK


def _docs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dpkit.plot import docs_figures

    _requirements(args)
    target = Path(args.out_dir)
    if target.exists() and not target.is_dir():
        raise InvalidParameter(
            "DIR", args.out_dir, "a directory (or a path to create one at)", owner="dpkit plot docs"
        )
    for path in docs_figures(target).values():
        _written(path)
    return EXIT_OK

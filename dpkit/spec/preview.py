"""Accuracy before spending: what a spec's queries will cost and how accurate they will be.

:func:`preview_spec` plans a spec exactly as :func:`~dpkit.spec.run_spec` does (schema,
parameters, files and headers: the public phase) and reports, for every query, its cost, the
noise it will add and the half-width of its interval at the query's confidence level
(``output.confidence``, default 0.95), from the query's ``accuracy`` method
(:mod:`dpkit_central.accuracy`). It opens no ledger, spends nothing and reads no data;
``dpkit run --plan SPEC`` prints it.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.accounting import event_cost
from dpkit.ledger import exact_text
from dpkit.pricing import composition_note, price_plan
from dpkit.registry import Registry, get_registry
from dpkit.spec.data import DataPolicy
from dpkit.spec.plan import Plan, PlannedQuery, plan_spec
from dpkit.spec.schema import FREQUENCY, SQL

__all__ = ["preview_spec"]


def _cost(event: Any) -> dict[str, Any]:
    epsilon, delta = event_cost(event)
    return {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "epsilon_exact": exact_text(epsilon),
        "delta_exact": exact_text(delta),
    }


def _accuracy(query: PlannedQuery) -> dict[str, Any] | None:
    """The query's accuracy at its confidence, in its randomness mode (None if unknown)."""
    accuracy = getattr(query.target, "accuracy", None)
    if query.statistic == FREQUENCY or accuracy is None:
        return None
    stand_in = None if query.rng_mode == "secure" else np.random.default_rng(0)
    found = accuracy(1.0 - query.confidence, rng=stand_in)
    if query.statistic == SQL:  # the plan shows each aggregate under the statement
        return sql_accuracy(query.target, found)
    document: dict[str, Any] = found.as_dict()
    document["describe"] = found.describe()
    return document


def sql_accuracy(target: Any, found: Any) -> dict[str, Any]:
    """A SQL statement's accuracy (its ``accuracy`` tuples ``found``) as the plan shows it:
    each aggregate with its share of the cost, its noise and error, and the partition
    selection's share where the groups are found in the data."""
    document: dict[str, Any] = {
        "aggregates": [
            {
                "aggregate": text,
                **each.as_dict(),
                "describe": each.describe(),
                "cost": _cost(each.privacy),
            }
            for text, each in found
        ]
    }
    selection = target.selection_cost()
    if selection is not None:
        needed = [part.get("ids_for_release") for part in document["aggregates"]]
        document["selection"] = {"cost": _cost(selection), "ids_for_release": needed[0]}
    return document


def preview_spec(
    spec: Any,
    *,
    base_dir: Path,
    data_file: Path | None = None,
    seed: int | None = None,
    registry: Registry | None = None,
    policy: DataPolicy | None = None,
) -> dict[str, Any]:
    """The plan of ``spec``: per query its cost, noise and error bound; nothing is spent.

    Raises :class:`~dpkit.spec.SpecInvalid` for an invalid spec, exactly as ``run_spec``
    would before spending.
    """
    plan = plan_spec(
        spec,
        registry=registry or get_registry(),
        base_dir=base_dir,
        data_file=data_file,
        seed=seed,
        policy=policy,
    )
    queries = []
    epsilon = delta = Fraction(0)
    for query in plan.queries:
        cost = _cost(query.target.privacy)
        epsilon += Fraction(cost["epsilon_exact"])
        delta += Fraction(cost["delta_exact"])
        queries.append(
            {
                "query_id": query.query_id,
                "statistic": query.statistic,
                "mechanism": getattr(query.target, "name", query.statistic),
                "cost": cost,
                "confidence": query.confidence,
                "randomness": query.rng_mode,
                "accuracy": _accuracy(query),
            }
        )
    return {
        "dpkit": "1",
        "spent": False,
        "spec_sha256": plan.spec_sha256,
        "composition": plan.composition,
        "budget": None
        if plan.budget is None
        else {"epsilon": plan.budget[0], "delta": plan.budget[1]},
        "total": _total(plan, epsilon, delta),
        "queries": queries,
    }


def _total(plan: Plan, epsilon: Fraction, delta: Fraction) -> dict[str, Any]:
    """What the run will charge for the whole spec (:func:`~dpkit.pricing.price_plan`, the
    session's pricing of a declared plan), how it was composed, and the plain sum."""
    priced = price_plan([(query.target.privacy, 1) for query in plan.queries])
    charged = priced.total
    rule = plan.composition if plan.composition in ("basic", "zcdp", "gdp") else None
    out: dict[str, Any] = {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "epsilon_exact": exact_text(epsilon),
        "delta_exact": exact_text(delta),
        "composed": composition_note(priced, rule),
    }
    if charged is not None:
        out["charged"] = charged.as_dict()
    return out

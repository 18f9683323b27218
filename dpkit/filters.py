"""Privacy filters: when a budget-tracked session may admit one more release.

A session is fully adaptive: the analyst picks each release — and its privacy parameters, and
when to stop — after seeing the earlier outputs. Composition theorems with parameters fixed in
advance do not cover that; *privacy filters* do (Rogers, Roth, Ullman & Vadhan 2016, "Privacy
Odometers and Filters: Pay-as-you-Go Composition"): a stopping rule that refuses a release
whose cost would exceed the budget, with a guarantee that holds for every adaptive analyst.
Each rule here is one currency with a proven filter:

``"basic"``
    Σε_i ≤ ε and Σδ_i ≤ δ, in exact rationals. Basic composition is a valid filter with
    adaptively chosen parameters (Rogers et al. 2016, Section 5; Whitehouse, Ramdas, Rogers &
    Wu 2023, "Fully-Adaptive Composition in Differential Privacy").
``"zcdp"``
    Σρ_i ≤ ρ_B, ρ_B the largest ρ whose (ε, δ) conversion (Canonne, Kamath & Steinke 2020,
    Corollary 13) meets the budget. At each Rényi order α this is the Rényi filter of Feldman &
    Zrnic 2021 ("Individual Privacy Accounting via a Rényi Filter", the composition theorem with
    adaptively chosen parameters) with budget αρ_B, so it holds for all α at once.
``"gdp"``
    Σμ_i² ≤ μ_B², μ_B the largest μ whose Gaussian-DP profile meets the budget. Gaussian DP
    composes under full adaptivity with the same parameters as without (Smith & Thakurta 2022,
    "Fully Adaptive Composition for Gaussian Differential Privacy"). A Gaussian costs its
    exact μ² = 1/σ², so k Gaussian releases are charged exactly their joint ε; a pure ε event
    costs the smallest μ that dominates it (:mod:`dpkit.accounting.gdp`); an (ε, δ) event
    has no μ and is refused.

A **declared plan** — a list given to ``Session.release_all``, or every query of a JSON spec —
has all its parameters fixed before any data are read: it is one non-adaptive mechanism, whose
privacy is the tight composition of its parts. Under ``"basic"`` it is charged as one
(ε_plan, δ_plan) event: δ_plan = Σδ_i, and ε_plan the best accountant's ε at δ_plan (the
privacy-loss distribution of the whole plan), never more than Σε_i; the filter then composes it
with the other releases like any (ε, δ) mechanism. Under ``"zcdp"`` and ``"gdp"`` a plan costs
the sum of its parts, which those currencies already compose exactly.

``"best"`` is a rule chosen once per ledger: at its first spend, the currency that charges that
spend (a release or a plan) the smallest share of the budget; every later spend uses the same
currency, and each ledger entry records it (``rule``). The choice depends only on the first
spend's declared parameters and the budget — public values fixed before any private output
exists — so for every analyst the session runs one of the valid filters above. Choosing per
release, or admitting when *either* of two filters would, is not valid in general: the two
currencies' guarantees do not combine pathwise, and a filter that switches after seeing
outputs can exceed the budget (the "natural" profile filters fail for the same reason: Tran,
Koskela, Räisä & Honkela 2026, "f-Differential Privacy Filters: Validity and Approximate
Solutions").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from dpkit.errors import InvalidParameter

if TYPE_CHECKING:
    from dpkit.ledger import Budget, Cost

__all__ = ["CURRENCIES", "RULES", "admits", "choose", "entry_rule", "project", "share", "total"]

#: The currencies a ledger can charge in.
CURRENCIES = ("basic", "zcdp", "gdp")
#: The composition rules a session accepts: a currency, or "best" (chosen at the first spend).
RULES = (*CURRENCIES, "best")

_FIELD = {"zcdp": ("rho", "ρ", "zCDP"), "gdp": ("mu2", "μ²", "Gaussian-DP")}


def project(cost: Cost, currency: str) -> Cost:
    """``cost`` as charged in ``currency``: (ε, δ) under basic, ρ under zCDP, μ² under GDP.

    :class:`~dpkit.errors.InvalidParameter` if the event has no cost in that currency (an
    (ε, δ) event under zCDP or GDP), before anything is written.
    """
    zero = Fraction(0)
    if currency == "basic":
        return attrs.evolve(cost, rho=None, mu2=None)
    field, symbol, name = _FIELD[currency]
    amount = getattr(cost, field)
    if amount is None:
        raise InvalidParameter(
            "cost",
            cost,
            f"a cost with {symbol}: under {name} composition only events with a {symbol} "
            "(Gaussian and pure-DP) are admitted",
        )
    return attrs.evolve(
        cost,
        epsilon=zero,
        delta=zero,
        rho=amount if field == "rho" else None,
        mu2=amount if field == "mu2" else None,
    )


def total(costs: Sequence[Cost]) -> Cost:
    """The field-by-field sum of ``costs`` (a field is None if it is None in any of them)."""
    first = costs[0]

    def add(field: str) -> Fraction | None:
        values = [getattr(c, field) for c in costs]
        return None if any(v is None for v in values) else sum(values, Fraction(0))

    return attrs.evolve(
        first,
        epsilon=sum((c.epsilon for c in costs), Fraction(0)),
        delta=sum((c.delta for c in costs), Fraction(0)),
        rho=add("rho"),
        mu2=add("mu2"),
    )


def share(cost: Cost, budget: Budget, currency: str) -> float:
    """The share of ``budget`` that ``cost`` takes in ``currency`` (inf if it has none)."""

    def ratio(amount: Fraction | None, whole: Fraction | None) -> float:
        if amount is None or whole is None:
            return math.inf
        if amount == 0:
            return 0.0
        return math.inf if whole == 0 else float(amount / whole)

    if currency == "basic":
        return max(ratio(cost.epsilon, budget.epsilon), ratio(cost.delta, budget.delta))
    field = _FIELD[currency][0]
    return ratio(getattr(cost, field), getattr(budget, field))


def admits(spent: Cost, cost: Cost, budget: Budget, currency: str) -> bool:
    """Whether ``cost`` (projected) still fits ``budget`` after ``spent`` in ``currency``."""
    if currency == "basic":
        return (
            spent.epsilon + cost.epsilon <= budget.epsilon
            and spent.delta + cost.delta <= budget.delta
        )
    field = _FIELD[currency][0]
    whole, amount = getattr(budget, field), getattr(cost, field)
    return (
        whole is not None and amount is not None and (getattr(spent, field) or 0) + amount <= whole
    )


def choose(cost: Cost, budget: Budget) -> str:
    """The currency in which ``cost`` (a first spend, all its currencies filled in) takes the
    smallest share of ``budget``; ties go to the first of :data:`CURRENCIES`."""
    shares = {currency: share(cost, budget, currency) for currency in CURRENCIES}
    return min(CURRENCIES, key=lambda currency: shares[currency])


def entry_rule(currency: str, plan: bool) -> str:
    """What an entry records: the currency, and ``"basic-plan"`` for a plan charged as one
    (ε, δ) event."""
    return "basic-plan" if plan and currency == "basic" else currency

"""The price of a declared plan, computed once and handed down.

A declared plan (``Session.release_all``, every query of a JSON spec) has its parameters fixed
before any data are read, so it is one non-adaptive mechanism (:mod:`dpkit.budget`). Its price
is a :class:`PricedPlan`: each item's exact cost in every currency, and under basic composition
the plan's tight joint ε (:func:`dpkit.accounting.account`, the privacy-loss distribution of the
whole plan) shared among the items in proportion to their ε. Composing the plan is the costly
step, so the spec runner prices it once, checks it against what remains, and hands the same
value to the session, whose ledger transaction then only adds the known costs and checks them
against the ledger's state at commit time.

When a plan does not fit, :func:`first_overflow` finds the first item whose prefix does not fit,
with the same answer as pricing every prefix in turn. A binary search over prefixes would not
give it: the basic-plan ε of a prefix is not monotone in its length, because each item also
raises the δ at which the joint ε is read (a Gaussian priced alone at δ = 1e-10 can cost more
than with a second release that brings δ to 1e-6), so a prefix that does not fit can be followed
by a longer one that does. The search instead decides from exact sums, without composing, every
prefix they decide: under zCDP all of them (that currency charges exact sums of ρ), under basic
composition each prefix whose plain sums Σε_i, Σδ_i fit (its composed ε is never above Σε_i).
Under Gaussian DP each prefix is priced item by item (a ledger's first spend may charge its pure
items their ε outright, :func:`dpkit.budget.charge`), which needs no composition either. Only the prefixes after the plain sums stop fitting are composed, and the
whole plan's price is reused.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import attrs

from dpkit import budget as filters
from dpkit._enclosure import rounded
from dpkit.accounting import account, event_cost, event_mu2, event_rho
from dpkit.accounting._common import ceil_decimal
from dpkit.budget import Budget, Cost
from dpkit.errors import DPKitError, InvalidParameter
from dpkit.privacy import PrivacyEvent

__all__ = [
    "Overflow",
    "PricedPlan",
    "composition_note",
    "first_overflow",
    "full_cost",
    "price_plan",
]


def full_cost(event: Any, releases: int) -> Cost:
    """The exact cost of ``releases`` independent releases of ``event`` in every currency it
    has — basic composition adds ε and δ (Dwork & Roth 2014, Theorem 3.16), zCDP adds ρ (Bun &
    Steinke 2016, Lemma 2.3), Gaussian DP adds μ² (Dong, Roth & Su 2022, Corollary 3.3)."""
    if not isinstance(event, PrivacyEvent):
        raise InvalidParameter("privacy", event, "a dpkit.privacy event", owner="Session")
    epsilon, delta = event_cost(event)
    rho = mu2 = None
    with contextlib.suppress(DPKitError):  # no ρ (an (ε, δ) event): not under zCDP
        rho = releases * event_rho(event)
    with contextlib.suppress(DPKitError):  # no μ: not under Gaussian DP
        mu2 = releases * event_mu2(event)
    return Cost(releases * epsilon, releases * delta, rho, mu2)


@attrs.frozen
class PricedPlan:
    """A declared plan and its price: ``items`` (``(event, releases)`` each), ``costs`` (each
    item's cost as the plan charges it) and ``total`` (their sum). Made by :func:`price_plan`."""

    items: tuple[tuple[PrivacyEvent, int], ...]
    costs: tuple[Cost, ...]
    total: Cost | None  # None for an empty plan


def _plan_costs(plain: list[Cost], items: Sequence[tuple[PrivacyEvent, int]]) -> list[Cost]:
    """The items' plain costs with the plan's ε shared among them in proportion to their ε:
    ε_plan = the tight joint ε at δ_plan = Σδ_i, rounded up to a decimal and never above Σε_i."""
    if len(plain) < 2:
        return plain
    epsilon = sum((c.epsilon for c in plain), Fraction(0))
    delta = sum((c.delta for c in plain), Fraction(0))
    if epsilon == 0 or delta >= 1:
        return plain
    at = float(delta)
    if Fraction(at) > delta:  # the float nearest Σδ may be above it: ask at most Σδ
        at = math.nextafter(at, 0.0)
    try:
        tight = account(list(items), delta=at).epsilon
    except DPKitError:
        return plain
    if not tight < float(epsilon):
        return plain
    scale = min(ceil_decimal(tight), epsilon) / epsilon
    return [attrs.evolve(c, epsilon=c.epsilon * scale) for c in plain]


def price_plan(items: Sequence[tuple[PrivacyEvent, int]]) -> PricedPlan:
    """Price a declared plan once: one composition of the whole plan (none for one item).

    The last prices made are kept (by plan; events are frozen values), so pricing a plan again
    composes nothing: :meth:`dpkit.session.Session.release_all` prices the plan it is handed a
    price of and refuses a price that differs, without paying the composition twice.
    """
    items = tuple((event, releases) for event, releases in items)
    try:
        hash(items)
    except TypeError:  # an event holding an unhashable value: priced afresh
        return _price(items)
    return _recent_price(items)


@functools.lru_cache(maxsize=64)
def _recent_price(items: tuple[tuple[PrivacyEvent, int], ...]) -> PricedPlan:
    return _price(items)


def _price(items: tuple[tuple[PrivacyEvent, int], ...]) -> PricedPlan:
    costs = tuple(_plan_costs([full_cost(e, r) for e, r in items], items))
    return PricedPlan(items, costs, filters.total(costs) if costs else None)


def composition_note(priced: PricedPlan, rule: str | None = "basic") -> str:
    """How ``priced``'s total was composed, in words and decimals (rounded up), e.g.
    ``the joint PLD price of 3 queries: ε = 0.0964795 (their sum would be 0.3)``.

    ``rule`` is the currency charged: under basic composition (and before a ``best`` ledger
    picks its currency, None) the total ε is the plan's tight joint ε when that is below the
    sum of the items' ε (:func:`_plan_costs`), else the sum; under zCDP and Gaussian DP the
    items' ρ or μ² add up exactly (:func:`full_cost`).
    """
    count = len(priced.items)
    what = f"{count} quer{'y' if count == 1 else 'ies'}"
    total = priced.total
    if total is None:
        return "no query: nothing to charge"
    if rule == "zcdp" and total.rho is not None:
        return f"the sum of the ρ of {what} (zCDP): ρ = {rounded(total.rho)}"
    if rule == "gdp" and total.mu2 is not None:
        return f"the sum of the μ² of {what} (Gaussian DP): μ² = {rounded(total.mu2)}"
    plain = sum((full_cost(e, r).epsilon for e, r in priced.items), Fraction(0))
    delta = f", δ = {rounded(total.delta, 3)}" if total.delta else ""
    if total.epsilon < plain:
        return (
            f"the joint PLD price of {what}: ε = {rounded(total.epsilon)}{delta} "
            f"(their sum would be {rounded(plain)})"
        )
    if count == 1:
        return f"the cost of {what}: ε = {rounded(total.epsilon)}{delta}"
    return f"the sum of the costs of {what}: ε = {rounded(total.epsilon)}{delta}"


@attrs.frozen
class Overflow:
    """The first item of a plan that does not fit: its index, what the plan up to and with it
    is charged (in the ledger's currency), and what remains."""

    index: int
    charged: Cost
    remaining: Budget


#: ``admits(costs)`` as :meth:`dpkit.Session.admits`: (fits, charged, remaining).
Admits = Callable[[Sequence[Cost]], tuple[bool, Cost, Budget]]


def first_overflow(priced: PricedPlan, admits: Admits, rule: str | None) -> Overflow | None:
    """The first item whose prefix does not fit (``admits`` of that prefix, priced as its own
    plan), or None if the whole plan fits; ``rule`` is the ledger's currency (None for a
    "best" ledger before its first spend). Equal to pricing every prefix in turn; the module
    docstring says which prefixes it decides without composing them."""
    whole = admits(priced.costs)
    if whole[0]:
        return None
    last = len(priced.items) - 1
    summed: Cost | None = None
    for index, (event, releases) in enumerate(priced.items):
        plain = full_cost(event, releases)
        summed = plain if summed is None else filters.total([summed, plain])
        verdict = whole if index == last else _by_sums(summed, admits, rule)
        if verdict is None:
            verdict = admits(price_plan(priced.items[: index + 1]).costs)
        if not verdict[0]:
            return Overflow(index, verdict[1], verdict[2])
    raise AssertionError("the whole plan does not fit, so one of its prefixes does not")


def _by_sums(summed: Cost, admits: Admits, rule: str | None) -> tuple[bool, Cost, Budget] | None:
    """A prefix's verdict from the exact sums of its items' plain costs, where they decide it:
    always under zCDP (which charges those sums), and under basic composition when the sums
    fit (its composed ε is never above Σε_i, its δ is Σδ_i); else None."""
    if rule is None or rule == "gdp":  # "best" picks its currency from the composed price;
        return None  # a Gaussian-DP ledger's first spend may charge each pure item outright
    verdict = admits([summed])
    return verdict if rule != "basic" or verdict[0] else None

"""Privacy budgets: the exact amounts a ledger spends, the currencies it charges them in, and
the privacy filters that decide when a session may admit one more release.

A :class:`Budget` and a :class:`Cost` are (ε, δ) in exact rationals (:class:`fractions.Fraction`,
so ten costs of ε = 0.1 fit a budget of 1.0 exactly), with the zCDP ρ and the Gaussian-DP μ²
where they have them. :func:`with_currencies` gives an (ε, δ) budget in the currencies a
composition rule charges in.

**Privacy filters.**
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
    costs the smallest μ that dominates it (:mod:`dpkit.accounting.gdp`; the Laplace
    mechanism its own, smaller one); an (ε, δ) event has no μ and is refused.

    The pure events of the ledger's *first* spend may instead be charged their ε outright
    (``epsilon`` of their entries), where that is cheaper (:func:`charge`); every later spend
    is charged μ². With E the first spend's pure ε, the rest must then fit
    μ_E² = the largest μ² whose profile meets (ε − E, δ). Proof: let P and Q be the whole
    session's output laws on neighbours x and x′, and Q′ the law where the first spend's pure
    releases run on x and every other release on x′. P and Q′ differ only in the releases
    charged μ², chosen fully adaptively with Σμ_i² ≤ μ_E² (the pure releases are the same
    kernel on both sides: μ = 0), so P(S) ≤ e^{ε−E}Q′(S) + δ (Smith & Thakurta 2022); Q′ and Q
    differ only in the pure releases, whose likelihood ratio is at most e^E on every outcome
    (E is fixed before any output exists), so Q′(S) ≤ e^E Q(S). Together P(S) ≤ e^ε Q(S) + δ,
    and the same with P and Q swapped. E cannot grow later: a budget split decided after
    seeing outputs would not be a valid filter (below).

A **declared plan** — a list given to ``Session.release_all``, or every query of a JSON spec —
has all its parameters fixed before any data are read: it is one non-adaptive mechanism, whose
privacy is the tight composition of its parts. Under ``"basic"`` it is charged as one
(ε_plan, δ_plan) event: δ_plan = Σδ_i, and ε_plan the best accountant's ε at δ_plan (the
privacy-loss distribution of the whole plan), never more than Σε_i; the filter then composes it
with the other releases like any (ε, δ) mechanism. Under ``"zcdp"`` and ``"gdp"`` a plan costs
the sum of its parts, which those currencies already compose exactly.

``"best"`` is decided once per ledger, at its first spend, from that spend's declared
parameters and the budget — public values fixed before any private output exists. Where the
budget has a δ and every event of a first (non-plan) spend has a μ, the ledger becomes a
*union* of filters (:mod:`dpkit.union_filter`): a main filter in the currency in which the
first spend takes the smallest share of the budget, at nine tenths of δ, and hybrids that
charge pure releases their ε outright and the rest μ², sharing the last tenth; a release is
admitted while any of them has admitted everything. Otherwise the ledger charges in that one
currency with all of δ, and each entry records it (``rule``). Admitting when either of two
filters would, *each at the full δ*, is not valid in general: their guarantees do not
combine pathwise, and a filter that switches after seeing outputs can exceed the budget (the
"natural" profile filters fail for the same reason: Tran, Koskela, Räisä & Honkela 2026,
"f-Differential Privacy Filters: Validity and Approximate Solutions"); with δ shares that add
up to δ it is (:mod:`dpkit.union_filter`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import attrs

from dpkit._enclosure import float_above, float_below, rounded
from dpkit.errors import InvalidParameter

__all__ = [
    "CURRENCIES",
    "RULES",
    "Budget",
    "Cost",
    "admits",
    "as_budget",
    "charge",
    "check_currencies",
    "choose",
    "entry_rule",
    "exact_text",
    "gdp_whole",
    "project",
    "share",
    "total",
    "with_currencies",
]


def exact_text(value: Fraction) -> str:
    """An exact amount as every ``*_exact`` JSON field writes it: ``str(Fraction)``, in lowest
    terms with no ``/1`` for whole numbers (``"2"``, ``"1/10"``, ``"0"``). See docs/spec.md,
    "Exact numbers"."""
    return str(Fraction(value))


def _decimal(value: Fraction, digits: int = 12, *, up: bool = True) -> str:
    """An exact amount to ``digits`` significant digits, rounded up (a cost: never shown below
    what was spent) or down (what remains: never shown above it)."""
    return rounded(value, digits, up=up)


@attrs.frozen
class Budget:
    """A privacy budget (ε, δ) in exact rationals; ``rho`` is the zCDP budget and ``mu2`` the
    Gaussian-DP budget μ² when the ledger composes in those currencies."""

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None = None
    mu2: Fraction | None = None

    def __str__(self) -> str:
        return self.text(up=False)

    def text(self, *, up: bool) -> str:
        """The amounts to 12 significant digits, rounded up (a total spent: never shown below
        it) or down (``str``: a budget, or what remains of one, never shown above it)."""
        text = f"ε={_decimal(self.epsilon, up=up)}, δ={_decimal(self.delta, up=up)}"
        other = [f"ρ={_decimal(self.rho, up=up)}"] if self.rho is not None else []
        other += [f"μ²={_decimal(self.mu2, up=up)}"] if self.mu2 is not None else []
        if not other:
            return text
        return f"{', '.join(other)} (for {text})"

    def as_dict(self, *, up: bool = False) -> dict[str, Any]:
        """The amounts as floats, rounded down (a budget, what remains) or up (``up=True``: a
        total spent) — never to the unsafe side — and as exact fractions (``*_exact``)."""
        rounded = _up if up else _down
        out: dict[str, Any] = {
            "epsilon": rounded(self.epsilon),
            "delta": rounded(self.delta),
            "epsilon_exact": exact_text(self.epsilon),
            "delta_exact": exact_text(self.delta),
        }
        out.update(_optional(self, rounded))
        return out


def _up(value: Fraction) -> float:
    return float_above(value, binary=False)


def _down(value: Fraction) -> float:
    return float_below(value, binary=False)


def _optional(amounts: Budget | Cost, rounded: Any = None) -> dict[str, Any]:
    """The ρ and μ² fields of a budget or cost that has them (a cost's rounded up)."""
    rounded = rounded or _up
    out: dict[str, Any] = {}
    for name in ("rho", "mu2"):
        value = getattr(amounts, name)
        if value is not None:
            out[name] = rounded(value)
            out[f"{name}_exact"] = exact_text(value)
    return out


@attrs.frozen
class Cost:
    """The exact cost of one release: (ε, δ), its zCDP ρ and its Gaussian-DP μ² where it has
    them. A ledger entry keeps the currency it was charged in (:func:`project`)."""

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None = None
    mu2: Fraction | None = None

    def __str__(self) -> str:
        if self.rho is not None and self.mu2 is None and not self.epsilon:
            return f"ρ={_decimal(self.rho)}"
        if self.mu2 is not None and self.rho is None and not self.epsilon:
            return f"μ²={_decimal(self.mu2)}"
        return f"ε={_decimal(self.epsilon)}, δ={_decimal(self.delta)}"

    def as_dict(self) -> dict[str, Any]:
        """The amounts as floats rounded up (never shown below what was spent) and as exact
        fractions (``*_exact``); ρ and μ² where the cost has them."""
        return {
            "epsilon": _up(self.epsilon),
            "delta": _up(self.delta),
            "epsilon_exact": exact_text(self.epsilon),
            "delta_exact": exact_text(self.delta),
            **_optional(self),
        }


def as_budget(budget: Any, *, owner: str = "Session") -> Budget:
    """``budget`` — a :class:`Budget`, or a pair ``(epsilon, delta)`` with ε ≥ 0 and
    0 ≤ δ < 1 — as a :class:`Budget` in exact rationals; :class:`~dpkit.errors.InvalidParameter`
    otherwise."""
    from dpkit.accounting import exact  # the accounting only where a budget is given

    if isinstance(budget, Budget):
        return budget
    try:
        epsilon, delta = budget
    except (TypeError, ValueError):
        raise InvalidParameter("budget", budget, "a pair (epsilon, delta)", owner=owner) from None
    eps, d = exact(epsilon), exact(delta)
    if eps < 0:
        raise InvalidParameter("budget", budget, "a pair with epsilon >= 0", owner=owner)
    if not 0 <= d < 1:
        raise InvalidParameter("budget", budget, "a pair with 0 <= delta < 1", owner=owner)
    return Budget(eps, d)


def with_currencies(
    full: Budget, composition: str | None, given: Any, *, owner: str = "Session"
) -> Budget:
    """The budget in the currencies the rule needs: ρ_B (the largest ρ whose conversion to
    (ε, δ), Canonne, Kamath & Steinke 2020, Corollary 13, meets it) for zCDP, μ_B² (the
    largest μ² whose Gaussian-DP profile meets it, :func:`dpkit.accounting.gdp.gdp_budget`)
    for GDP, both for "best" (where δ > 0; with δ = 0 only basic composition can meet it).
    ``given`` is the budget as the caller gave it, named in an error. A ρ or μ² the budget
    already has is kept if :func:`check_currencies` admits it."""
    from dpkit.accounting import exact, zcdp_rho_for
    from dpkit.accounting.gdp import gdp_budget

    rho = full.rho if composition in ("zcdp", "best") else None
    mu2 = full.mu2 if composition in ("gdp", "best") else None
    if composition in ("zcdp", "gdp") and full.delta == 0:
        raise InvalidParameter(
            "budget", given, f"a pair with delta > 0 for {composition} composition", owner=owner
        )
    check_currencies(Budget(full.epsilon, full.delta, rho, mu2), given, owner=owner)
    if full.delta > 0 and composition in ("zcdp", "best") and rho is None:
        rho = exact(zcdp_rho_for(float(full.epsilon), float(full.delta)))
    if full.delta > 0 and composition in ("gdp", "best") and mu2 is None:
        mu2 = gdp_budget(full.epsilon, full.delta)
    return Budget(full.epsilon, full.delta, rho, mu2)


def check_currencies(budget: Budget, given: Any, *, owner: str) -> None:
    """A budget's ρ and μ², where it has them, are at most ρ_B and μ_B² of its (ε, δ)
    (:func:`with_currencies`), and absent when δ = 0.

    A ledger stores them as the budget *for* (ε, δ) and admits releases up to them, so a
    larger one (ρ = 50 for (1, 10⁻⁶) admits a hundred σ = 1 Gaussians, ε ≈ 97 at δ = 10⁻⁶)
    would be a budget (ε, δ) that the ledger does not keep; it is refused, before any ledger
    is opened or created."""
    from dpkit.accounting import exact, zcdp_rho_for
    from dpkit.accounting.gdp import gdp_budget

    if budget.rho is None and budget.mu2 is None:
        return
    if budget.delta == 0:
        raise InvalidParameter(
            "budget", given, "a budget with no ρ or μ² when delta = 0", owner=owner
        )
    if budget.rho is not None:
        most = exact(zcdp_rho_for(float(budget.epsilon), float(budget.delta)))
        if budget.rho > most:
            raise InvalidParameter(
                "budget",
                given,
                f"a budget with ρ <= {_decimal(most, up=False)} (the most (ε, δ) allow)",
                owner=owner,
            )
    if budget.mu2 is not None:
        most = gdp_budget(budget.epsilon, budget.delta)
        if budget.mu2 > most:
            raise InvalidParameter(
                "budget",
                given,
                f"a budget with μ² <= {_decimal(most, up=False)} (the most (ε, δ) allow)",
                owner=owner,
            )


# -- privacy filters (module docstring) ---------------------------------------------------------

#: The currencies a ledger can charge in.
CURRENCIES = ("basic", "zcdp", "gdp")
#: The composition rules a session accepts: a currency, or "best" (chosen at the first spend).
RULES = (*CURRENCIES, "best")

_FIELD = {"zcdp": ("rho", "ρ", "zCDP"), "gdp": ("mu2", "μ²", "Gaussian-DP")}


def gdp_whole(budget: Budget, pure: Fraction) -> Fraction | None:
    """The μ² budget of a Gaussian-DP ledger whose first spend charged ``pure`` ε outright:
    μ_B² itself for none, else the largest μ² whose profile meets (ε − pure, δ) (module
    docstring); None if the budget has no μ² (δ = 0)."""
    if budget.mu2 is None or pure == 0:
        return budget.mu2
    if pure >= budget.epsilon:
        return Fraction(0) if pure == budget.epsilon else None
    return _shifted_mu2(budget.epsilon - pure, budget.delta)


@functools.lru_cache(maxsize=256)
def _shifted_mu2(epsilon: Fraction, delta: Fraction) -> Fraction:
    from dpkit.accounting.gdp import gdp_budget

    return gdp_budget(epsilon, delta)


def _gdp_epsilon(pure: Fraction, mu2: Fraction, delta: Fraction) -> float:
    """The ε at ``delta`` of ``pure`` ε outright and μ² in Gaussian DP (the first spend's
    price when it is charged alone)."""
    from dpkit.privacy import gaussian_mu_epsilon

    if delta <= 0:
        return math.inf
    return float(pure) + (gaussian_mu_epsilon(float(delta), mu2) if mu2 > 0 else 0.0)


def charge(costs: Sequence[Cost], currency: str, budget: Budget, *, first: bool) -> list[Cost]:
    """``costs`` (one spend) as charged in ``currency`` (:func:`project`). Under Gaussian DP
    a ledger's ``first`` spend may charge its pure events (δ = 0) their ε outright, the rest
    μ², when that is the smaller ε at the budget's δ (module docstring); later spends, and a
    plan's costs (shares of its joint ε, not bounds of each release's loss), are charged μ²
    only: the caller says ``first`` only of a first spend of plain costs.

    :class:`~dpkit.errors.InvalidParameter` if an event has no cost in the currency.
    """
    plain = [project(cost, currency) for cost in costs]
    if currency != "gdp" or not first or budget.mu2 is None:
        return plain
    zero = Fraction(0)
    split = [
        attrs.evolve(c, epsilon=cost.epsilon, mu2=zero) if cost.delta == 0 and cost.epsilon else c
        for cost, c in zip(costs, plain, strict=True)
    ]

    def price(charged: list[Cost]) -> float:
        pure = sum((c.epsilon for c in charged), zero)
        return _gdp_epsilon(pure, sum((c.mu2 or zero for c in charged), zero), budget.delta)

    return split if price(split) < price(plain) else plain


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
    if currency == "gdp":  # the first spend's pure ε, charged outright, shrinks the μ² budget
        whole = gdp_whole(budget, spent.epsilon + cost.epsilon)
    return (
        whole is not None and amount is not None and (getattr(spent, field) or 0) + amount <= whole
    )


def choose(costs: Sequence[Cost], budget: Budget) -> str:
    """The currency in which ``costs`` (a first spend, all its currencies filled in) take the
    smallest share of ``budget`` — the rule that would admit the most spends like this one;
    ties go to the first of :data:`CURRENCIES`."""
    whole = total(costs)
    shares = {currency: share(whole, budget, currency) for currency in CURRENCIES}
    return min(CURRENCIES, key=lambda currency: shares[currency])


def entry_rule(currency: str, plan: bool) -> str:
    """What an entry records: the currency, and ``"basic-plan"`` for a plan charged as one
    (ε, δ) event."""
    return "basic-plan" if plan and currency == "basic" else currency

"""The spent totals: exact sums kept in the ledger's metadata, checked against the entries, and
the admission of a spend by the ledger's privacy filter.

The totals (``epsilon``, ``delta``, ``rho``, ``mu2``: :data:`dpkit.ledger._schema.TOTALS`) are
exact rationals stored as text next to the entries and updated in the same transaction as
them; every spend first recomputes them from the spent entries and refuses to write if they
disagree (:func:`checked_totals`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dpkit import budget as filters  # the privacy filters: admits, choose, project, total
from dpkit.budget import Budget, Cost, exact_text
from dpkit.ledger._errors import VERIFY_HINT, LedgerCorrupt
from dpkit.ledger._schema import ENTRY_COLUMNS, TOTALS, Total, Tx
from dpkit.ledger._stored import meta_fraction, parse_fraction
from dpkit.ledger._values import fraction_text
from dpkit.union_filter import Streams, Union, main_budget

__all__ = [
    "AMOUNTS",
    "UNION_PLAN_RULE",
    "UNION_RULE",
    "Totals",
    "amount",
    "amounts_record",
    "as_budget",
    "as_cost",
    "cached_totals",
    "checked_totals",
    "remaining",
    "row_cost",
    "rule_of",
    "stream_sums",
    "summed_totals",
    "totals_text",
    "union_of",
    "union_remaining",
    "within_budget",
    "write_totals",
    "zero",
]

#: The spent totals by name (``"epsilon"``, ``"delta"``, ``"rho"``, ``"mu2"``): exact sums.
Totals = dict[str, Fraction]

#: What a union ledger's entry records as its rule (a declared plan's: ``"union-plan"``).
UNION_RULE = "union"
UNION_PLAN_RULE = "union-plan"

#: The names of the amounts, in the order of :data:`TOTALS`.
AMOUNTS = tuple(total.name for total in TOTALS)
#: The amounts every entry must have (the others, such as ``rho``, may be missing).
_REQUIRED = frozenset(c.name for c in ENTRY_COLUMNS if not c.nullable)


def zero() -> Totals:
    return {total.name: Fraction(0) for total in TOTALS}


def amount(cost: Cost, total: Total) -> Fraction:
    """The amount of ``cost`` in the currency of ``total`` (0 where it has none)."""
    value = getattr(cost, total.name)
    return Fraction(0) if value is None else Fraction(value)


def as_cost(totals: Totals) -> Cost:
    """Spent totals as a cost with every currency filled in."""
    return Cost(totals["epsilon"], totals["delta"], totals["rho"], totals["mu2"])


def amounts_record(cost: Cost) -> dict[str, str | None]:
    """The stored text of each amount of ``cost`` (NULL where it has none)."""
    return {
        total.name: None if value is None else fraction_text(value)
        for total in TOTALS
        for value in [getattr(cost, total.name)]
    }


def totals_text(totals: Totals) -> str:
    return ", ".join(f"{t.symbol}={exact_text(totals[t.name])}" for t in TOTALS)


def row_cost(path: str, amounts: dict[str, Any], *, where: str) -> Cost:
    """The cost of one stored entry; a missing optional amount (``rho``) stays None."""
    parsed: dict[str, Fraction | None] = {}
    damaged = False
    for name, text in amounts.items():
        if text in (None, "") and name not in _REQUIRED:
            parsed[name] = None
            continue
        value = parse_fraction(text)
        damaged = damaged or value is None or value < 0
        parsed[name] = value
    if damaged:
        shown = ", ".join(f"{name}={text!r}" for name, text in amounts.items())
        raise LedgerCorrupt(
            f"ledger {path} has a damaged cost in {where}: {shown}, expected exact "
            "fractions >= 0; " + VERIFY_HINT.format(path=path),
            path=path,
        )
    return Cost(**parsed)  # type: ignore[arg-type]  # the required amounts are set


def cached_totals(tx: Tx, path: str) -> Totals:
    """The totals as the metadata keeps them."""
    keys = ", ".join(f"'{total.key}'" for total in TOTALS)
    meta = {
        str(k): str(v) for k, v in tx.rows(f"SELECT key, value FROM {{meta}} WHERE key IN ({keys})")
    }
    return {total.name: meta_fraction(path, meta, total.key) for total in TOTALS}


def summed_totals(tx: Tx, path: str) -> Totals:
    """The exact sum of the spent entries (grouped: costs repeat, so this stays fast)."""
    names = ", ".join(AMOUNTS)
    summed = zero()
    for *amounts, count in tx.rows(
        f"SELECT {names}, count(*) FROM {{entries}} WHERE status = 'spent' GROUP BY {names}"
    ):
        cost = row_cost(path, dict(zip(AMOUNTS, amounts, strict=True)), where="a spent entry")
        for total in TOTALS:
            summed[total.name] += amount(cost, total) * int(count)
    return summed


def checked_totals(tx: Tx, path: str) -> Totals:
    """The cached totals, after checking that they equal the sum of the entries."""
    cached, summed = cached_totals(tx, path), summed_totals(tx, path)
    if cached != summed:
        raise LedgerCorrupt(
            f"ledger {path} is inconsistent: its cached totals "
            f"{totals_text(cached)} disagree with the sum of its spent entries "
            f"{totals_text(summed)}; nothing was spent. " + VERIFY_HINT.format(path=path),
            path=path,
        )
    return cached


def write_totals(tx: Tx, totals: Totals) -> None:
    tx.run_many(
        "UPDATE {meta} SET value = ? WHERE key = ?",
        [(fraction_text(totals[total.name]), total.key) for total in TOTALS],
    )


def rule_of(tx: Tx, composition: str) -> str | None:
    """The currency a ledger of ``composition`` charges in; a ``"best"`` ledger's is stored
    by its first spend (None before), a union ledger's is its main filter's."""
    if composition != "best":
        return composition
    text = _stored_rule(tx)
    union = Union.parse(text)
    return union.currency if union is not None else (text or None)


def union_of(tx: Tx, composition: str) -> Union | None:
    """The union of filters a ``"best"`` ledger's first spend started (None otherwise:
    :mod:`dpkit.union_filter`)."""
    return Union.parse(_stored_rule(tx)) if composition == "best" else None


def _stored_rule(tx: Tx) -> str:
    row = tx.one("SELECT value FROM {meta} WHERE key = 'rule'")
    return str(row[0]) if row is not None and row[0] else ""


def stream_sums(tx: Tx, path: str) -> Streams:
    """The sums a union ledger's filters charge, over its spent entries (grouped)."""
    names = ", ".join(AMOUNTS)
    streams = Streams()
    for *amounts, rule, count in tx.rows(
        f"SELECT {names}, rule, count(*) FROM {{entries}} WHERE status = 'spent' "
        f"GROUP BY {names}, rule"
    ):
        cost = row_cost(path, dict(zip(AMOUNTS, amounts, strict=True)), where="a spent entry")
        streams = streams.plus(cost, plan=rule != UNION_RULE, times=int(count))
    return streams


def as_budget(totals: Totals, rule: str | None) -> Budget:
    """The totals in the currencies of ``rule`` (ε and δ always)."""
    return Budget(
        totals["epsilon"],
        totals["delta"],
        totals["rho"] if rule == "zcdp" else None,
        totals["mu2"] if rule == "gdp" else None,
    )


def remaining(budget: Budget, spent: Budget, rule: str | None) -> Budget:
    """``budget`` less ``spent``, in the currencies of ``rule`` (all of them if None)."""
    b = budget
    rho = None if b.rho is None or rule not in ("zcdp", None) else b.rho - (spent.rho or 0)
    whole = filters.gdp_whole(b, spent.epsilon) if rule == "gdp" else b.mu2
    mu2 = None if whole is None or rule not in ("gdp", None) else whole - (spent.mu2 or 0)
    return Budget(b.epsilon - spent.epsilon, b.delta - spent.delta, rho, mu2)


def union_remaining(budget: Budget, spent: Budget, union: Union) -> Budget:
    """What is left of a union ledger's main filter (:func:`dpkit.union_filter.main_budget`),
    never below 0: a release beyond it may still fit a hybrid."""
    currency, zero = union.currency, Fraction(0)
    main = main_budget(budget)

    def left(whole: Fraction | None, used: Fraction | None) -> Fraction | None:
        return None if whole is None else max(whole - (used or zero), zero)

    return Budget(
        max(main.epsilon - spent.epsilon, zero),
        max(main.delta - spent.delta, zero),
        left(main.rho, spent.rho) if currency == "zcdp" else None,
        left(main.mu2, spent.mu2) if currency == "gdp" else None,
    )


def within_budget(budget: Budget, totals: Totals, rule: str | None) -> bool:
    """The admission rule (:func:`dpkit.budget.admits`): whether spent totals fit the
    budget in the ledger's currency (basic: Σε ≤ ε and Σδ ≤ δ; zcdp: Σρ ≤ ρ; gdp:
    Σμ² ≤ μ², less what the first spend's pure ε took). A "best" ledger with no spend yet
    has spent nothing."""
    if rule is None:
        return all(value == 0 for value in totals.values())
    nothing = Cost(Fraction(0), Fraction(0), Fraction(0), Fraction(0))
    return filters.admits(nothing, as_cost(totals), budget, rule)

"""Verification of a whole ledger: the database's integrity, every entry readable, the cached
totals equal to the exact sum of the spent entries and within the budget, and every spent entry
under the ledger's privacy unit.

The entries are read in batches (a ledger of millions is never held in memory) in one
snapshot; each distinct cost is parsed once and summed times its count (exact).
"""

from __future__ import annotations

from typing import Any

from dpkit import union_filter
from dpkit.budget import Budget
from dpkit.ledger._errors import LedgerCorrupt
from dpkit.ledger._history import SELECT_ENTRIES
from dpkit.ledger._schema import TOTALS, Tx, entry_column_names
from dpkit.ledger._store import Store
from dpkit.ledger._stored import READ_BATCH, load_json
from dpkit.ledger._totals import (
    AMOUNTS,
    amount,
    as_budget,
    cached_totals,
    row_cost,
    rule_of,
    stream_sums,
    totals_text,
    union_of,
    within_budget,
    zero,
)
from dpkit.ledger._unit import entry_unit, read_unit
from dpkit.units import UnitIdentity

__all__ = ["verify"]

_AMOUNTS_AT = tuple(entry_column_names().index(name) for name in AMOUNTS)
_STATUS_AT = entry_column_names().index("status")
_JSON_AT = tuple(
    (entry_column_names().index(c), c) for c in ("parameters", "event", "result", "unit")
)
_UNIT_AT = entry_column_names().index("unit")


def verify(
    store: Store, budget: Budget, composition: str
) -> tuple[Budget, tuple[UnitIdentity, ...]]:
    """The checks of consistency (:meth:`~dpkit.ledger.Ledger.verify`): the totals, and the
    units the ledger's older entries mix (which ``dpkit budget show`` shows rather than
    refuses); :class:`~dpkit.ledger.LedgerCorrupt` saying everything that is wrong."""
    path = store.path
    units: dict[UnitIdentity, Any] = {}
    with store.guarded("verifying"), store.snapshot() as tx:
        problem = store.integrity_problem(tx)
        if problem is not None:
            raise LedgerCorrupt(f"ledger {path} {problem}", path=path)
        cached = cached_totals(tx, path)
        costs = _readable_costs(store, tx, units)
        rule = rule_of(tx, composition)
        union = union_of(tx, composition)
        streams = stream_sums(tx, path) if union is not None else None
        unit, mixed = read_unit(tx, path)
    summed, count = zero(), 0
    for (status, amounts), (seq, times) in costs.items():
        cost = row_cost(path, dict(zip(AMOUNTS, amounts, strict=True)), where=f"entry {seq}")
        if status == "spent":
            count += times
            for total in TOTALS:
                summed[total.name] += amount(cost, total) * times
    problems = []
    if cached != summed:
        problems.append(
            f"its cached totals {totals_text(cached)} disagree with the sum of its "
            f"{count} spent entries {totals_text(summed)}"
        )
    fits = (
        within_budget(budget, summed, rule)
        if union is None or streams is None
        else union_filter.admits(streams, budget, union)
    )
    if not fits:
        problems.append(f"its spent entries {totals_text(summed)} exceed the budget {budget}")
    for found, seq in units.items():
        if found != unit:
            problems.append(
                f"its entry {seq} protects the privacy unit {found!s}, but its budget is "
                + ("for no privacy unit yet" if unit is None else f"for {unit!s}")
            )
    if problems:
        raise LedgerCorrupt(f"ledger {path} is inconsistent: " + "; ".join(problems), path=path)
    return as_budget(cached, rule), mixed


def _readable_costs(
    store: Store, tx: Tx, units: dict[UnitIdentity, Any]
) -> dict[tuple[Any, tuple[Any, ...]], list[Any]]:
    """Every entry's JSON checked; ``(status, amounts as stored) -> [first seq, count]``;
    ``units`` gets each privacy unit of a spent entry, with the first entry under it."""
    path = store.path
    costs: dict[tuple[Any, tuple[Any, ...]], list[Any]] = {}
    parsed: dict[Any, UnitIdentity | None] = {}
    for batch in store.batches(tx, SELECT_ENTRIES + " ORDER BY seq", READ_BATCH):
        for row in batch:
            for at, column in _JSON_AT:
                load_json(path, row[0], column, row[at])
            key = (row[_STATUS_AT], tuple(row[at] for at in _AMOUNTS_AT))
            found = costs.get(key)
            if found is None:
                costs[key] = [row[0], 1]
            else:
                found[1] += 1
            text = row[_UNIT_AT]
            if text not in parsed:  # a few distinct texts: each parsed once
                parsed[text] = entry_unit(path, row[0], text)
            unit = parsed[text]
            if unit is not None and row[_STATUS_AT] == "spent":
                units.setdefault(unit, row[0])
    return costs

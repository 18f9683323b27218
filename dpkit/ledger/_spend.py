"""The spend transaction, and the two writes that may follow a spend: its released result
stored, or (before any private data were read) its reservation given back.

Every write is one transaction that holds the ledger's write lock and first refuses a ledger
that is not live (:mod:`dpkit.ledger._move_state`). A spend then refuses another privacy unit
than the ledger's, recomputes the totals from the entries (refusing to write if they disagree
with the cached ones), charges each cost in the ledger's currency, checks the budget by the
ledger's privacy filter (:mod:`dpkit.budget`), inserts the entries and updates the totals: all
of a batch is committed, or none of it.
"""

from __future__ import annotations

import json
import uuid
from fractions import Fraction
from typing import Any

import attrs

from dpkit import budget as filters  # the privacy filters: admits, choose, project, total
from dpkit import union_filter
from dpkit.budget import Budget, Cost
from dpkit.errors import BudgetExceeded, InvalidParameter
from dpkit.ledger._errors import LedgerError
from dpkit.ledger._move_state import require_live
from dpkit.ledger._schema import TOTALS, Tx
from dpkit.ledger._store import Store
from dpkit.ledger._totals import (
    UNION_PLAN_RULE,
    UNION_RULE,
    amount,
    amounts_record,
    as_budget,
    as_cost,
    checked_totals,
    remaining,
    row_cost,
    rule_of,
    stream_sums,
    union_of,
    union_remaining,
    write_totals,
)
from dpkit.ledger._unit import admit_unit, batch_unit, unit_text
from dpkit.ledger._values import PENDING, LedgerEntry, SpendRequest, now
from dpkit.union_filter import Union
from dpkit.units import UnitIdentity

__all__ = ["abort", "record_result", "spend_all"]


def spend_all(
    store: Store,
    requests: list[SpendRequest],
    *,
    dataset: str,
    budget: Budget,
    composition: str,
    declared: UnitIdentity | None,
) -> list[LedgerEntry]:
    """Check and record ``requests`` in one transaction (:meth:`~dpkit.ledger.Ledger.spend_all`):
    each request checked and serialised, and the batch's one unit found, before it starts."""
    path = store.path
    rows = [_spend_row(request, dataset) for request in requests]
    if not rows:
        return []
    unit = batch_unit(requests, declared, path)
    entries: list[LedgerEntry] = []
    with store.guarded("spending"), store.write() as tx:
        require_live(tx, path)
        fixes_unit = admit_unit(tx, unit, path)
        spent = checked_totals(tx, path)
        rule = rule_of(tx, composition)
        costs = [entry.cost for entry, _ in rows]
        plan = any(request.plan for request in requests)
        union = union_of(tx, composition)
        if rule is None:  # a "best" ledger's first spend (every other ledger has a rule)
            union = union_filter.start(costs, budget, plan=plan)
            rule = filters.choose(costs, budget) if union is None else union.text()
        if union is not None:
            _admit_union(tx, path, rows, requests, budget, union, spent)
            if composition == "best":
                tx.run("UPDATE {meta} SET value = ? WHERE key = 'rule'", (union.text(),))
            _insert(tx, rows, requests, costs, entries, union=True, rule=union.currency)
            after = {t.name: spent[t.name] + amount(filters.total(costs), t) for t in TOTALS}
            if fixes_unit:
                tx.run("UPDATE {meta} SET value = ? WHERE key = 'unit'", (unit_text(unit),))
            write_totals(tx, after)
            return entries
        # Only a first spend's own costs may be charged outright: a plan's are shares of its
        # joint ε, which bound no release's loss on every outcome.
        first = all(value == 0 for value in spent.values())
        first = first and not any(request.plan for request in requests)
        charged = filters.charge(costs, rule, budget, first=first)
        batch = filters.total(charged)
        if not filters.admits(as_cost(spent), batch, budget, rule):
            raise BudgetExceeded(batch, remaining(budget, as_budget(spent, rule), rule))
        if composition == "best":
            tx.run("UPDATE {meta} SET value = ? WHERE key = 'rule'", (rule,))
        if fixes_unit:
            tx.run("UPDATE {meta} SET value = ? WHERE key = 'unit'", (unit_text(unit),))
        after = {t.name: spent[t.name] + amount(batch, t) for t in TOTALS}
        _insert(tx, rows, requests, charged, entries, union=False, rule=rule)
        write_totals(tx, after)
    return entries


def _admit_union(
    tx: Tx,
    path: str,
    rows: list[tuple[LedgerEntry, dict[str, Any]]],
    requests: list[SpendRequest],
    budget: Budget,
    union: Union,
    spent: dict[str, Fraction],
) -> None:
    """Refuse the batch unless some filter of ``union`` fits every spent entry and it
    (:mod:`dpkit.union_filter`); each entry is charged its full cost."""
    union_filter.check_chargeable([e.cost for e, _ in rows], union, plan=requests[0].plan)
    streams = stream_sums(tx, path)
    for (entry, _), request in zip(rows, requests, strict=True):
        streams = streams.plus(entry.cost, plan=request.plan)
    if not union_filter.admits(streams, budget, union):
        batch = filters.total([entry.cost for entry, _ in rows])
        raise BudgetExceeded(
            batch, union_remaining(budget, as_budget(spent, union.currency), union)
        )


def _insert(
    tx: Tx,
    rows: list[tuple[LedgerEntry, dict[str, Any]]],
    requests: list[SpendRequest],
    charged: list[Cost],
    entries: list[LedgerEntry],
    *,
    union: bool,
    rule: str,
) -> None:
    """Write the entries of a batch, each with its charged cost and the rule it records."""
    for (entry, record), cost, request in zip(rows, charged, requests, strict=True):
        if union:
            recorded = UNION_PLAN_RULE if request.plan else UNION_RULE
        else:
            recorded = filters.entry_rule(rule, request.plan)
        entry = attrs.evolve(entry, cost=cost, rule=recorded)
        record.update(amounts_record(cost), rule=entry.rule)
        columns = ", ".join(record)
        marks = ", ".join("?" for _ in record)
        seq = tx.insert(
            f"INSERT INTO {{entries}} ({columns}) VALUES ({marks})", list(record.values())
        )
        entries.append(attrs.evolve(entry, seq=seq))


def _spend_row(request: SpendRequest, dataset: str) -> tuple[LedgerEntry, dict[str, Any]]:
    """A spend request checked and serialised (before the transaction): the entry it makes
    and its columns' stored values."""
    cost, label = request.cost, request.label
    if not isinstance(cost, Cost):
        raise InvalidParameter("cost", cost, "a dpkit.ledger.Cost", owner="Ledger.spend")
    for total in TOTALS:
        value = getattr(cost, total.name)
        if value is not None and not value >= 0:  # a negative cost would be a refund
            raise InvalidParameter(
                "cost",
                cost,
                f"a cost with {total.name} >= 0 (got {value})",
                owner="Ledger.spend",
            )
    if label is not None and not isinstance(label, str):
        raise InvalidParameter("label", label, "a string or None", owner="Ledger.spend")
    if not isinstance(request.unit, UnitIdentity):
        raise InvalidParameter(
            "unit", request.unit, "a dpkit.units.UnitIdentity", owner="Ledger.spend"
        )
    params_json = json.dumps(request.parameters, sort_keys=True, default=str)
    event_json = json.dumps(request.event, sort_keys=True, default=str)
    entry = LedgerEntry(
        0,
        uuid.uuid4().hex,
        now(),
        request.session_id,
        dataset,
        request.mechanism,
        json.loads(params_json),
        json.loads(event_json),
        cost,
        request.randomness,
        "spent",
        label,
        unit=request.unit,
    )
    record: dict[str, Any] = {
        "release_id": entry.release_id,
        "time": entry.time,
        "session_id": entry.session_id,
        "dataset_id": entry.dataset_id,
        "mechanism": entry.mechanism,
        "parameters": params_json,
        "event": event_json,
        **amounts_record(cost),
        "randomness": entry.randomness,
        "status": "spent",
        "label": label,
        "unit": unit_text(request.unit),
    }
    if request.final:  # data are read next: a stored result makes abort refuse it
        entry = attrs.evolve(entry, result=json.loads(PENDING))
        record["result"] = PENDING
    return entry, record


def record_result(store: Store, release_id: str, text: str) -> None:
    """Store ``text``, a released result as JSON, with the spent entry ``release_id``
    (:meth:`~dpkit.ledger.Ledger.record_result`)."""
    path = store.path
    with store.guarded("storing a result"), store.write() as tx:
        require_live(tx, path)
        row = tx.one("SELECT status FROM {entries} WHERE release_id = ?", (release_id,))
        if row is None:
            raise LedgerError(
                f"ledger {path} has no release {release_id!r}: a result can only be "
                "stored for a release spent in this ledger",
                path=path,
            )
        if row[0] != "spent":
            raise LedgerError(
                f"release {release_id!r} in ledger {path} has status {row[0]!r}: a "
                "result can only be stored for a spent release",
                path=path,
            )
        tx.run("UPDATE {entries} SET result = ? WHERE release_id = ?", (text, release_id))


def abort(store: Store, release_id: str) -> None:
    """Mark the spent entry ``release_id`` aborted and take its cost off the totals, unless a
    result was stored with it (:meth:`~dpkit.ledger.Ledger.abort`)."""
    path = store.path
    names = ", ".join(total.name for total in TOTALS)
    with store.guarded("aborting a reservation"), store.write() as tx:
        require_live(tx, path)
        row = tx.one(
            f"SELECT {names}, result FROM {{entries}} WHERE release_id = ? AND status = 'spent'",
            (release_id,),
        )
        if row is None:
            return
        if row[-1] is not None:
            raise LedgerError(
                f"release {release_id!r} in ledger {path} has a stored result: it was "
                "released (or its data may have been read), and its spend cannot be given "
                "back",
                path=path,
            )
        cost = row_cost(
            path,
            dict(zip((t.name for t in TOTALS), row[:-1], strict=True)),
            where=f"release {release_id!r}",
        )
        spent = checked_totals(tx, path)
        tx.run("UPDATE {entries} SET status = 'aborted' WHERE release_id = ?", (release_id,))
        write_totals(tx, {t.name: spent[t.name] - amount(cost, t) for t in TOTALS})

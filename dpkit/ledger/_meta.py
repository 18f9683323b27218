"""A ledger's metadata: written when the ledger is created, read and checked when it is opened,
and migrated from an older schema version.

The metadata (``dpkit_meta``, :mod:`dpkit.ledger._schema`) holds the format tag, the schema
version, the dataset, the budget and its composition rule, the spent totals, the currency of a
``"best"`` ledger, the privacy unit and the move state. Every value is checked when the ledger
is opened: a location without the format tag is :class:`~dpkit.ledger.NotALedger`, a damaged
value :class:`~dpkit.ledger.LedgerCorrupt` naming its key, a newer schema a
:class:`~dpkit.ledger.LedgerError`; an older one is migrated in place.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import attrs

from dpkit.budget import CURRENCIES, RULES, Budget
from dpkit.errors import InvalidParameter
from dpkit.ledger._errors import LedgerError, NotALedger
from dpkit.ledger._move_state import move_state
from dpkit.ledger._schema import (
    ADDED_META,
    ENTRY_COLUMNS,
    FORMAT,
    MOVE_KEYS,
    SCHEMA_VERSION,
    TOTALS,
)
from dpkit.ledger._store import Store
from dpkit.ledger._stored import damaged, meta_fraction, meta_value
from dpkit.ledger._unit import UNIT_ALLOWED, UnitState, derived_unit, parse_unit, unit_text
from dpkit.ledger._values import fraction_text, now
from dpkit.union_filter import Union
from dpkit.units import UnitIdentity

__all__ = ["RULES_TEXT", "Composition", "Meta", "create", "migrate", "read_meta"]

Composition = Literal["basic", "zcdp", "gdp", "best"]

RULES_TEXT = "one of " + ", ".join(f"'{rule}'" for rule in RULES)


@attrs.frozen
class Meta:
    """What an opened ledger's metadata says it is."""

    dataset: str
    composition: Composition
    budget: Budget
    unit: UnitState


def create(
    store: Store,
    dataset: str,
    budget: Budget,
    composition: Composition,
    unit: UnitIdentity | None,
) -> None:
    """Write a new ledger's metadata (the store creates its tables without racing another
    creator); a composition the budget cannot pay in is refused first."""
    if composition not in RULES:
        raise InvalidParameter("composition", composition, RULES_TEXT)
    needed = {"zcdp": "rho", "gdp": "mu2"}.get(composition)
    if needed is not None and getattr(budget, needed) is None:
        raise InvalidParameter("budget", budget, f"a budget with {needed} for {composition}")
    meta = {
        "format": FORMAT,
        "schema_version": str(SCHEMA_VERSION),
        "dataset_id": dataset,
        "composition": composition,
        "budget_epsilon": fraction_text(budget.epsilon),
        "budget_delta": fraction_text(budget.delta),
        "budget_rho": fraction_text(budget.rho) if budget.rho is not None else "",
        "budget_mu2": fraction_text(budget.mu2) if budget.mu2 is not None else "",
        **{total.key: "0/1" for total in TOTALS},
        "rule": "",
        "unit": "" if unit is None else unit_text(unit),
        **{key: ADDED_META[key] for key in MOVE_KEYS},
        "created": now(),
    }
    store.create(meta)


def read_meta(store: Store) -> Meta:
    """The ledger's metadata, every value checked (an older ledger is migrated first)."""
    path = store.path
    with store.guarded("opening", not_a_ledger=True), store.read() as tx:
        rows = tx.rows("SELECT key, value FROM {meta}")
    meta: dict[str, str] = {str(k): str(v) for k, v in rows}
    if meta.get("format") != FORMAT:
        raise NotALedger(
            f"{path} is not a dpkit ledger (no dpkit metadata); it was not modified",
            path=path,
        )
    version = meta_value(path, meta, "schema_version", "a whole number such as '2'")
    if not version.isdigit() or int(version) < 1:
        raise damaged(path, "schema_version", version, "a whole number >= 1")
    if int(version) > SCHEMA_VERSION:
        raise LedgerError(
            f"{path} has ledger schema version {version}; this dpkit reads up to "
            f"{SCHEMA_VERSION} (upgrade dpkit)",
            path=path,
        )
    dataset = meta_value(path, meta, "dataset_id", "a dataset name")
    composition = meta_value(path, meta, "composition", RULES_TEXT)
    if composition not in RULES:
        raise damaged(path, "composition", composition, RULES_TEXT)
    epsilon = meta_fraction(path, meta, "budget_epsilon")
    delta = meta_fraction(path, meta, "budget_delta")
    if delta >= 1:
        raise damaged(path, "budget_delta", meta["budget_delta"], "a fraction in [0, 1)")
    for total in TOTALS:
        if total.since <= int(version):
            meta_fraction(path, meta, total.key)
    if int(version) < SCHEMA_VERSION:
        meta = migrate(store)
    unit = parse_unit(path, meta_value(path, meta, "unit", UNIT_ALLOWED))
    rho = _optional_fraction(path, meta, "budget_rho", composition == "zcdp")
    mu2 = _optional_fraction(path, meta, "budget_mu2", composition == "gdp")
    rule = meta.get("rule", "")
    if rule and (composition != "best" or (rule not in CURRENCIES and Union.parse(rule) is None)):
        raise damaged(
            path, "rule", rule, "a currency (basic, zcdp, gdp) or a union of a 'best' ledger"
        )
    move_state(path, meta)
    budget = Budget(epsilon, delta, rho, mu2)
    return Meta(dataset, composition, budget, unit)  # type: ignore[arg-type]  # checked above


def _optional_fraction(
    path: str, meta: dict[str, str], key: str, required: bool
) -> Fraction | None:
    """A budget of one currency: required by its rule, optional ('' = none) otherwise."""
    if not required and meta.get(key, "") == "":
        return None
    return meta_fraction(path, meta, key)


def migrate(store: Store) -> dict[str, str]:
    """Bring an older ledger to :data:`SCHEMA_VERSION`: add the entry columns and the spent
    totals it lacks (idempotent: concurrent openers serialise on the write lock, and the
    second finds them there), and return its metadata as migrated. Version 1 → 2 added
    ``label`` and ``result``; 2 → 3 the ``mu2`` and ``rule`` columns, the Gaussian-DP total
    and meta keys (old entries keep ``rule`` NULL); 4 → 5 the privacy unit, derived from
    the spent entries (:func:`~dpkit.ledger._unit.derived_unit`; old entries keep ``unit``
    NULL)."""
    path = store.path
    with store.write() as tx:
        columns = store.columns(tx)
        if not columns:
            raise damaged(path, "dpkit_entries", "missing", "the table of entries")
        for column in ENTRY_COLUMNS:
            if column.name not in columns:
                tx.run(f"ALTER TABLE {{entries}} ADD COLUMN {column.name} TEXT")
        present = {row[0] for row in tx.rows("SELECT key FROM {meta}")}
        for total in TOTALS:
            if total.key not in present:  # entries that predate it add nothing to it
                tx.run("INSERT INTO {meta} (key, value) VALUES (?, '0/1')", (total.key,))
        for key, value in ADDED_META.items():
            if key not in present:
                value = derived_unit(store, tx, path) if key == "unit" else value
                tx.run("INSERT INTO {meta} (key, value) VALUES (?, ?)", (key, value))
        tx.run("UPDATE {meta} SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        return {str(k): str(v) for k, v in tx.rows("SELECT key, value FROM {meta}")}

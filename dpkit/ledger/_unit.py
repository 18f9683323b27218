"""The privacy unit a ledger's budget is for: stored, fixed by the first spend, checked at
every spend, and derived from the entries of a ledger made before units were recorded.

The unit is the meta key ``unit``: '' while not fixed, a unit's description
(:meth:`~dpkit.units.UnitIdentity.describe`, as compact JSON), or, for an older ledger whose
spent entries protect several units, ``{"kind": "mixed", "units": [...]}`` (such a ledger takes
no more spends: :class:`~dpkit.ledger.LedgerUnitsMixed`). Each entry stores its own unit in
the same form (NULL in entries older than schema version 5).
"""

from __future__ import annotations

import json
from typing import Any

from dpkit.ledger._errors import VERIFY_HINT, LedgerCorrupt, LedgerUnitsMixed, UnitMismatch
from dpkit.ledger._schema import Tx
from dpkit.ledger._store import Store
from dpkit.ledger._stored import READ_BATCH, compact, damaged, load_json
from dpkit.ledger._values import SpendRequest
from dpkit.units import UnitIdentity

__all__ = [
    "UNIT_ALLOWED",
    "UnitState",
    "admit_unit",
    "batch_unit",
    "derived_unit",
    "entry_unit",
    "parse_unit",
    "read_unit",
    "unit_text",
]

#: A ledger's privacy unit (meta ``unit``): not fixed yet, fixed, or the units an older
#: ledger's entries mix (see Ledger.unit).
UnitState = tuple[UnitIdentity | None, tuple[UnitIdentity, ...]]
UNIT_ALLOWED = "'' or a privacy unit such as '{\"kind\":\"record\"}'"


def unit_text(unit: UnitIdentity) -> str:
    """A privacy unit as the ledger stores it (in its metadata and in each entry)."""
    return compact(unit.describe())


def parse_unit(path: str, text: str) -> UnitState:
    """A stored unit: '' (not fixed), a unit, or the units an older ledger mixes."""
    if text == "":
        return None, ()
    try:
        document = json.loads(text)
        if isinstance(document, dict) and document.get("kind") == "mixed":
            if set(document) != {"kind", "units"} or not isinstance(document["units"], list):
                raise ValueError(text)
            units = tuple(UnitIdentity.parse(unit) for unit in document["units"])
            if len(units) < 2 or len(set(units)) != len(units):
                raise ValueError(text)
            return None, units
        return UnitIdentity.parse(document), ()
    except (TypeError, ValueError):  # InvalidParameter is a ValueError
        raise damaged(path, "unit", text, UNIT_ALLOWED) from None


def read_unit(tx: Tx, path: str) -> UnitState:
    row = tx.one("SELECT value FROM {meta} WHERE key = 'unit'")
    if row is None:
        raise damaged(path, "unit", "missing", UNIT_ALLOWED)
    return parse_unit(path, str(row[0]))


def batch_unit(
    requests: list[SpendRequest], declared: UnitIdentity | None, path: str
) -> UnitIdentity:
    """The one privacy unit of a batch of spends (public: before the transaction), which
    must be the unit the handle was opened for (``declared``), if any."""
    first = requests[0].unit
    for index, request in enumerate(requests):
        if request.unit != first:
            raise UnitMismatch(
                first,
                request.unit,
                path=path,
                message=f"a batch of releases is charged on one budget, which is for one "
                f"privacy unit, but release 0{_named(requests[0])} protects {first!s} and "
                f"release {index}{_named(request)} protects {request.unit!s}; release them "
                "on separate ledgers; nothing was spent",
            )
    if declared is not None and first != declared:
        raise UnitMismatch(
            declared,
            first,
            path=path,
            message=f"ledger {path} was opened for the privacy unit {declared!s} "
            f"(unit=), but this release protects the privacy unit {first!s}; nothing was "
            "spent",
        )
    return first


def admit_unit(tx: Tx, unit: UnitIdentity, path: str) -> bool:
    """Refuse a spend under another unit than the ledger's (inside the spend's
    transaction, before anything is written); True if this spend fixes the unit."""
    found, mixed = read_unit(tx, path)
    if mixed:
        raise LedgerUnitsMixed(mixed, path=path)
    if found is None:
        return True
    if found != unit:
        raise UnitMismatch(found, unit, path=path)
    return False


def entry_unit(path: str, seq: Any, text: Any) -> UnitIdentity | None:
    """The unit column of an entry (None in entries older than schema version 5)."""
    document = load_json(path, seq, "unit", text)
    if document is None:
        return None
    try:
        return UnitIdentity.parse(document)
    except ValueError:
        raise LedgerCorrupt(
            f"ledger {path} has a damaged unit in entry {seq}: {text!r:.80}; "
            + VERIFY_HINT.format(path=path),
            path=path,
        ) from None


def derived_unit(store: Store, tx: Tx, path: str) -> str:
    """The stored privacy unit of a ledger spent by a dpkit that did not record one: the
    unit of its spent entries (a table query records its ``unit`` in its parameters; any
    other release protected one record), or '' if it has none; if they disagree, every
    unit found (the ledger then takes no more spends: :class:`LedgerUnitsMixed`). A damaged
    entry leaves the unit unknown: the migration is refused, nothing changed."""
    first: dict[UnitIdentity, int] = {}
    query = "SELECT seq, parameters FROM {entries} WHERE status = 'spent' ORDER BY seq"
    for batch in store.batches(tx, query, READ_BATCH):
        for seq, text in batch:
            first.setdefault(_recorded_unit(path, seq, text), int(seq))
    units = sorted(first, key=first.__getitem__)
    if not units:
        return ""
    if len(units) == 1:
        return unit_text(units[0])
    return compact({"kind": "mixed", "units": [unit.describe() for unit in units]})


def _recorded_unit(path: str, seq: Any, text: Any) -> UnitIdentity:
    """The privacy unit an entry's parameters record (one record if they name none)."""
    try:
        parameters = json.loads(text)
    except (TypeError, ValueError):
        parameters = None
    if not isinstance(parameters, dict):
        raise _undetermined(path, seq, "its parameters are not a JSON object")
    for key in ("unit", "privacy_unit"):
        value = parameters.get(key)
        if isinstance(value, dict) and value.get("kind") == "record":
            return UnitIdentity("record")
        if isinstance(value, dict) and value.get("kind") == "id":
            column = value.get("column")
            if not isinstance(column, str) or not column:
                raise _undetermined(path, seq, f"its id unit has no column: {value!r:.80}")
            return UnitIdentity("id", column)
    return UnitIdentity("record")


def _undetermined(path: str, seq: Any, why: str) -> LedgerCorrupt:
    return LedgerCorrupt(
        f"ledger {path} was made by an older dpkit and its privacy unit cannot be "
        f"determined from its entries: entry {seq} is damaged ({why}); it was not "
        "migrated (nothing was changed)",
        path=path,
    )


def _named(request: SpendRequest) -> str:
    return "" if request.label is None else f" ({request.label!r})"

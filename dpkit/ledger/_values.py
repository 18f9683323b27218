"""The values a ledger records and returns besides its amounts (:mod:`dpkit.budget`): entries,
spend requests and move states.
"""

from __future__ import annotations

import datetime as _dt
import json
from fractions import Fraction
from typing import Any

import attrs

from dpkit.budget import Cost
from dpkit.units import UnitIdentity

__all__ = [
    "PENDING",
    "STATES",
    "LedgerEntry",
    "MoveState",
    "SpendRequest",
    "fraction_text",
    "now",
]

#: The result of a session's entry until its release stores one (see SpendRequest.final).
PENDING = json.dumps({"stored": "pending"})


def fraction_text(value: Fraction) -> str:
    """The stored text of an exact amount, always ``numerator/denominator`` (``"2/1"``).

    Only the database holds this form; reading accepts it and the JSON form alike
    (``Fraction("2/1") == Fraction("2")``). JSON output uses :func:`dpkit.budget.exact_text`.
    """
    return f"{value.numerator}/{value.denominator}"


def now() -> str:
    """The time a ledger records (its creation, each entry): UTC, ISO 8601, microseconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


@attrs.frozen
class LedgerEntry:
    """One recorded release.

    ``status`` is ``"spent"`` (the cost is committed; the release may have happened), or
    ``"aborted"`` (a reservation released before any private data were read: nothing was
    released and the cost was given back). ``label`` names the release (e.g. the spec's query
    name); ``result`` is the released result as stored by :meth:`Ledger.record_result`,
    ``{"stored": "pending"}`` for a session's release not stored (yet: running, failed, or a
    crash between the spend and the store), or ``None`` for a reservation never stored. ``rule``
    is the filter that admitted it (``"basic"``, ``"basic-plan"``, ``"zcdp"``, ``"gdp"``;
    None in ledgers older than schema version 3). ``unit`` is the privacy unit it protected
    (None in ledgers older than schema version 5, whose unit the ledger derived from its
    entries' parameters: :attr:`Ledger.unit <dpkit.ledger.Ledger.unit>`).
    """

    seq: int
    release_id: str
    time: str
    session_id: str
    dataset_id: str
    mechanism: str
    parameters: dict[str, Any]
    event: dict[str, Any]
    cost: Cost
    randomness: str
    status: str
    label: str | None = None
    result: Any = None
    rule: str | None = None
    unit: UnitIdentity | None = None

    @property
    def result_stored(self) -> bool:
        """Whether the released result is stored (neither missing nor still pending)."""
        return self.result is not None and self.result != {"stored": "pending"}

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "release_id": self.release_id,
            "time": self.time,
            "session_id": self.session_id,
            "dataset_id": self.dataset_id,
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "event": self.event,
            **self.cost.as_dict(),
            "rule": self.rule,
            "unit": None if self.unit is None else self.unit.describe(),
            "randomness": self.randomness,
            "status": self.status,
            "label": self.label,
            "result": self.result,
        }


@attrs.frozen
class SpendRequest:
    """One spend to record: its exact cost and what the entry says about the release.

    ``unit`` is the privacy unit the release protects (one record unless said otherwise): a
    ledger admits only spends under its own unit (:class:`~dpkit.ledger.UnitMismatch`).
    """

    cost: Cost
    mechanism: str
    parameters: dict[str, Any]
    event: dict[str, Any]
    session_id: str
    randomness: str
    label: str | None = None
    plan: bool = False  # one of the releases of a declared plan (see dpkit.budget)
    #: The release starts reading private data once this spend commits (a session's spend):
    #: the entry is written with the result ``{"stored": "pending"}``, so it is never aborted.
    final: bool = False
    unit: UnitIdentity = attrs.field(factory=lambda: UnitIdentity("record"))


#: A ledger's move states: it takes spends only while ``live``.
STATES = ("live", "awaiting", "sealed")


@attrs.frozen
class MoveState:
    """Where a ledger stands in a move (:func:`~dpkit.ledger.move_ledger`).

    ``state`` is ``"live"`` (it takes spends; ``moved_from`` names the ledger it was moved
    from, if it was), ``"awaiting"`` (the destination of a move that has not finished: it takes
    no spend until its source is sealed and the move is run to its end) or ``"sealed"`` (moved
    to ``moved_to``: it takes no spend, for ever). ``move_id`` ties a sealed source to its
    destination. Locations are shown without passwords.
    """

    state: str = "live"
    move_id: str = ""
    moved_to: str = ""
    moved_from: str = ""

    @property
    def live(self) -> bool:
        return self.state == "live"

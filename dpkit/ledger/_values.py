"""The values a ledger records and returns: budgets, costs, entries and spend requests.

Amounts are exact rationals (:class:`fractions.Fraction`), so ten costs of ε = 0.1 fit a budget
of 1.0 exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs

from dpkit._enclosure import float_above, float_below, rounded
from dpkit.units import UnitIdentity

__all__ = [
    "STATES",
    "Budget",
    "Cost",
    "LedgerEntry",
    "MoveState",
    "SpendRequest",
    "exact_text",
    "fraction_text",
]


def fraction_text(value: Fraction) -> str:
    """The stored text of an exact amount, always ``numerator/denominator`` (``"2/1"``).

    Only the database holds this form; reading accepts it and the JSON form alike
    (``Fraction("2/1") == Fraction("2")``). JSON output uses :func:`exact_text`.
    """
    return f"{value.numerator}/{value.denominator}"


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
    them. A ledger entry keeps the currency it was charged in (:func:`dpkit.filters.project`)."""

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
            "epsilon": _up(self.cost.epsilon),
            "delta": _up(self.cost.delta),
            "epsilon_exact": exact_text(self.cost.epsilon),
            "delta_exact": exact_text(self.cost.delta),
            **_optional(self.cost),
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
    plan: bool = False  # one of the releases of a declared plan (see dpkit.filters)
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

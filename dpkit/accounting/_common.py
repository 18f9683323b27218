"""What the composition backends share: the (event, count) list, exact numbers and the result."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Any, TypeAlias

import attrs

from dpkit.errors import DPKitError, InvalidParameter
from dpkit.privacy import PrivacyEvent, common_neighbours

__all__ = [
    "Bound",
    "Events",
    "NotApplicable",
    "ceil_decimal",
    "check_delta",
    "exact",
    "floor_decimal",
    "inverse_square",
    "normalise",
]

#: A composition: each accounting event with the number of times it is run (adaptively).
Events: TypeAlias = Sequence[tuple[PrivacyEvent, int]]


class NotApplicable(DPKitError):
    """A composition backend cannot bound this list of events (e.g. RDP and a generic (ε, δ))."""

    code = "not_applicable"

    def __init__(self, method: str, event: Any, reason: str = ""):
        self.method = method
        self.event = event
        extra = f": {reason}" if reason else ""
        super().__init__(f"method {method!r} does not apply to {event!r}{extra}")


@attrs.frozen
class Bound:
    """An (ε, δ)-DP guarantee and the method that proved it.

    ``exact_epsilon``/``exact_delta`` hold the exact rationals where the method is exact
    arithmetic (basic composition); ``detail`` says e.g. which Rényi order was optimal.
    """

    epsilon: float
    delta: float
    method: str
    exact_epsilon: Fraction | None = None
    exact_delta: Fraction | None = None
    detail: dict[str, Any] = attrs.field(factory=dict, eq=False)
    candidates: dict[str, float | str] = attrs.field(factory=dict, eq=False)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"epsilon": self.epsilon, "delta": self.delta, "method": self.method}
        if self.exact_epsilon is not None:
            out["epsilon_exact"] = str(self.exact_epsilon)
        if self.exact_delta is not None:
            out["delta_exact"] = str(self.exact_delta)
        if self.detail:
            out["detail"] = self.detail
        if self.candidates:
            out["candidates"] = self.candidates
        return out


def exact(value: float | int | str | Fraction) -> Fraction:
    """A number as an exact rational, reading a float through its shortest repr (0.1 → 1/10).

    Budgets are exact this way: ten costs of ``0.1`` sum to exactly ``1``, where the binary
    floats would sum to 0.9999999999999999.
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise InvalidParameter("value", value, "a finite real number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidParameter("value", value, "a finite real number")
        return Fraction(repr(value))
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise InvalidParameter("value", value, "a finite real number") from None


def normalise(events: Iterable[Any]) -> list[tuple[PrivacyEvent, int]]:
    """Accept ``[event, (event, count), ...]`` and return ``[(event, count), ...]``, validated:
    all under one neighbour relation (:func:`~dpkit.privacy.common_neighbours`)."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise InvalidParameter("events", events, "a list of events or (event, count) pairs")
    out: list[tuple[PrivacyEvent, int]] = []
    for item in events:
        if isinstance(item, PrivacyEvent):
            event, count = item, 1
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            event, count = item
        else:
            raise InvalidParameter("event", item, "a dpkit.privacy event or an (event, count) pair")
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameter(
                "event", event, "a dpkit.privacy event (PureDP, GaussianDP, ...)"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidParameter("count", count, "an integer >= 0")
        if count:
            out.append((event, count))
    common_neighbours(out)  # costs under two neighbour relations bound neither
    return out


def inverse_square(x: float) -> float:
    """1/x² without OverflowError/ZeroDivisionError: +inf when it overflows (x tiny)."""
    inverse = 1.0 / x
    return inverse * inverse


def check_delta(delta: Any, *, owner: str) -> float:
    """δ must be a real number in (0, 1)."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise InvalidParameter("delta", delta, "a real number in (0, 1)", owner=owner)
    return float(delta)


def _decimal_round(value: Fraction, digits: int, rounding: str) -> Fraction:
    if value == 0:
        return Fraction(0)
    exponent = Decimal(value.numerator).adjusted() - Decimal(value.denominator).adjusted()
    scale = Fraction(10) ** (exponent - digits + 2)  # ≥ digits - 1 significant digits kept
    steps = value / scale
    whole = math.ceil(steps) if rounding == ROUND_CEILING else math.floor(steps)
    return whole * scale


def ceil_decimal(value: float | Fraction, *, ulps: int = 8, digits: int = 15) -> Fraction:
    """An exact rational ≥ ``value`` with at most ``digits`` significant decimal digits.

    A float is first moved up by ``ulps`` units in the last place (the error of the few
    operations that computed it), so the result bounds the real number the float stands for.
    Budgets and costs stay short and readable in the ledger (``"46211715726001/10^14"``).
    """
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            raise InvalidParameter("value", value, "a finite real number >= 0")
        value = Fraction(value + ulps * math.ulp(value))
    return _decimal_round(value, digits, ROUND_CEILING)


def floor_decimal(value: float | Fraction, *, ulps: int = 8, digits: int = 15) -> Fraction:
    """An exact rational ≤ ``value`` (moved down by ``ulps`` first, if a float), ≥ 0."""
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            raise InvalidParameter("value", value, "a finite real number >= 0")
        value = Fraction(max(value - ulps * math.ulp(value), 0.0))
    return max(_decimal_round(value, digits, ROUND_FLOOR), Fraction(0))

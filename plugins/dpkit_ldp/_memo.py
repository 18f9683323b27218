"""What the memoizing devices (rappor, dbitflip, one_bit_mean) share: the cost of their reports
so far, composed by the accountant, and their mechanism's parameters for their saved state.

A memoizing device keeps one memo entry per value it has reported (an item's PRR, a key's bits,
a rounded point's bit) and reports from it again and again. Each entry is one release of the
device's value (its later reports are the same release repeated), so the device has spent ε
once per entry (Ding, Kulkarni & Yekhanin 2017, Section 3; for RAPPOR, the entry's ε_T,
Erlingsson, Pihur & Korolova 2014, Section 3), and basic composition adds the entries up.
"""

from __future__ import annotations

from typing import Any

import dpkit
from dpkit.plugin import PureDP

__all__ = ["MemoizingDevice"]


class MemoizingDevice:
    """Mixin of a device state with ``mechanism`` and one ``memo`` entry per value reported."""

    __slots__ = ()

    mechanism: Any
    memo: dict[Any, Any]

    def privacy_events(self) -> list[tuple[PureDP, int]]:
        """ε once per memo entry used (module docstring)."""
        entries = len(self.memo)
        return [(PureDP(epsilon=self.mechanism.epsilon), entries)] if entries else []

    @property
    def epsilon(self) -> float:
        """What this device's reports so far cost, composed by the accountant (δ = 0)."""
        events = self.privacy_events()
        return dpkit.account(events, delta=0).epsilon if events else 0.0

    def saved_parameters(self) -> dict[str, Any]:
        """The mechanism's parameters, by name, as the saved state keeps them."""
        return {name: getattr(self.mechanism, name) for name in type(self.mechanism).parameters()}

"""What the memoizing devices (rappor, dbitflip, one_bit_mean) share: the cost of their reports
so far, composed by the accountant, and their mechanism's parameters for their saved state.

A memoizing device keeps one memo entry per value it has reported (an item's PRR, a key's bits,
a rounded point's bit) and reports from it again and again. Each entry is one release of the
device's value (its later reports are the same release repeated), so the device has spent ε
once per entry (Ding, Kulkarni & Yekhanin 2017, Section 3; for RAPPOR, the entry's ε_T,
Erlingsson, Pihur & Korolova 2014, Section 3), and basic composition adds the entries up.

The memo is the client's own host object (a dict, saved with :meth:`to_dict`), one device's
value at a time, so a memoizing device has no accelerator path: an accelerator's array given
to ``report`` is an :class:`~dpkit.errors.InvalidData` that says to pass the value as a Python
number, decided from its type before anything is read or drawn. Many devices' reports at once
on an accelerator are the mechanism's ``randomize`` (its ``reports`` copies are the memoized
form of one value).
"""

from __future__ import annotations

from typing import Any

import dpkit
from dpkit.plugin import InvalidData, PureDP, array_library

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

    def check_host_value(self, value: Any) -> None:
        """Refuse an accelerator's array (module docstring), from its type alone."""
        owner = f"{self.mechanism.name} client"
        library = array_library(value, owner=owner, field="value")
        if library is not None and not library.on_host:
            raise InvalidData(
                f"{owner}: value is a {library.name} array on {library.device}; a client's memo "
                "lives on the host: pass one value as a Python number (e.g. value.item()), or "
                f"use {self.mechanism.name}.randomize for many devices' reports on the accelerator",
                field="value",
            )

    def saved_parameters(self) -> dict[str, Any]:
        """The mechanism's parameters, by name, as the saved state keeps them."""
        return {name: getattr(self.mechanism, name) for name in type(self.mechanism).parameters()}

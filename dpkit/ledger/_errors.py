"""The typed errors of a ledger: one root (:class:`LedgerError`) and what went wrong."""

from __future__ import annotations

from typing import Any

from dpkit.errors import DPKitError

__all__ = [
    "VERIFY_HINT",
    "LedgerCorrupt",
    "LedgerError",
    "LedgerMismatch",
    "LedgerMissing",
    "LedgerMoved",
    "LedgerUnitsMixed",
    "NotALedger",
    "UnitMismatch",
]

#: Appended to messages about a damaged ledger (``{path}`` is the ledger as displayed).
VERIFY_HINT = "run `dpkit budget verify --ledger {path}`"


class LedgerError(DPKitError):
    """The ledger cannot be used (cannot be opened, from a newer dpkit, or inconsistent).

    ``path`` is the ledger as displayed: a file path, or a PostgreSQL URL without its password.
    """

    code = "ledger_error"

    def __init__(self, message: str, *, path: str = ""):
        self.path = path
        super().__init__(message)


class LedgerMissing(LedgerError):
    """No ledger at the location, and no budget was given to create one."""

    code = "ledger_missing"


class NotALedger(LedgerError):
    """The location is not a dpkit ledger (a directory, a device, another file, a database
    schema holding other tables); left untouched."""

    code = "not_a_ledger"


class LedgerCorrupt(LedgerError):
    """The ledger's metadata, entries or totals are damaged or disagree; nothing was spent."""

    code = "ledger_corrupt"


class LedgerMismatch(LedgerError):
    """The ledger belongs to another dataset, or was created with another budget or rule."""

    code = "ledger_mismatch"

    def __init__(self, field: str, found: Any, given: Any, *, path: str = ""):
        self.field = field
        self.found = found
        self.given = given
        super().__init__(
            f"ledger {path} has {field}={found!s} but {field}={given!s} was given; "
            "a ledger belongs to one dataset and one budget (use another ledger)",
            path=path,
        )


class UnitMismatch(LedgerMismatch):
    """A release protects another privacy unit than the one the ledger's budget is for (or a
    batch mixes units, or a unit given when opening disagrees with the ledger's). Nothing was
    read or spent.

    A budget bounds the privacy loss of one privacy unit: ε spent under a record unit is up to
    kε for a person with k records, so spends under two units never add up to a bound on
    either. ``found`` is the ledger's unit (or the batch's first), ``given`` the release's, as
    :class:`~dpkit.units.UnitIdentity` values.
    """

    code = "unit_mismatch"

    def __init__(self, found: Any, given: Any, *, path: str = "", message: str = ""):
        self.field = "privacy unit"
        self.found = found
        self.given = given
        LedgerError.__init__(
            self,
            message
            or (
                f"ledger {path} spends its budget for the privacy unit {found!s}, but this "
                f"release protects the privacy unit {given!s}: a budget bounds the loss of one "
                "privacy unit, so a release under another is refused (release it on a ledger "
                "of its own); nothing was spent"
            ),
            path=path,
        )


class LedgerUnitsMixed(LedgerError):
    """The ledger's spent entries protect several privacy units (it was spent by a dpkit
    older than the ledger's privacy unit), so its budget bounds the loss of none of them: it
    takes no more spends. Its entries and totals are kept; nothing was spent.

    ``units`` lists the :class:`~dpkit.units.UnitIdentity` values found, in the order of
    their first spend.
    """

    code = "ledger_units_mixed"

    def __init__(self, units: tuple[Any, ...], *, path: str = ""):
        self.units = units
        shown = ", ".join(str(unit) for unit in units)
        super().__init__(
            f"ledger {path} was spent under several privacy units ({shown}) by a dpkit that "
            "did not yet fix a ledger's privacy unit: its budget bounds the loss of none of "
            "them, so it takes no more spends. Its entries and totals are kept; start a new "
            "ledger for each privacy unit",
            path=path,
        )


class LedgerMoved(LedgerError):
    """The ledger takes no spend because of a move (:func:`~dpkit.ledger.move_ledger`).

    ``state`` is ``"sealed"`` for a ledger that was moved away (``moved_to`` says where: spend
    there), or ``"awaiting"`` for the destination of a move that has not finished (``moved_from``
    says from where: run the move again to finish it). Locations are shown without passwords.
    Nothing was written.
    """

    code = "ledger_moved"

    def __init__(
        self, message: str, *, path: str = "", state: str, moved_to: str = "", moved_from: str = ""
    ):
        self.state = state
        self.moved_to = moved_to
        self.moved_from = moved_from
        super().__init__(message, path=path)

"""The typed errors of a ledger: one root (:class:`LedgerError`) and what went wrong."""

from __future__ import annotations

from typing import Any

from dpkit.errors import DPKitError

__all__ = [
    "VERIFY_HINT",
    "LedgerCorrupt",
    "LedgerError",
    "LedgerMismatch",
    "LedgerMoved",
    "NotALedger",
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

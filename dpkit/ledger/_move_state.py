"""Whether a ledger takes writes: its move state (``live``, ``awaiting``, ``sealed``), stored in
its metadata and checked inside every write transaction.

A ledger moved away (:func:`~dpkit.ledger.move_ledger`) is ``sealed`` and the destination of an
unfinished move is ``awaiting``: both refuse every spend, result and abort with
:class:`~dpkit.ledger.LedgerMoved`, checked under the write lock, so that a handle opened
before a move sees the seal.
"""

from __future__ import annotations

from dpkit.ledger._errors import LedgerMoved
from dpkit.ledger._schema import ADDED_META, MOVE_KEYS, Tx
from dpkit.ledger._stored import damaged
from dpkit.ledger._values import STATES, MoveState

__all__ = ["move_state", "read_move_state", "refuse_unless_live", "require_live"]


def move_state(path: str, meta: dict[str, str]) -> MoveState:
    """The move state that metadata ``meta`` records (older ledgers: live)."""
    state = MoveState(*(meta.get(key, ADDED_META[key]) for key in MOVE_KEYS))
    if state.state not in STATES:
        raise damaged(path, "state", state.state, "one of " + ", ".join(STATES))
    return state


def read_move_state(tx: Tx, path: str) -> MoveState:
    keys = ", ".join(f"'{key}'" for key in MOVE_KEYS)
    rows = tx.rows(f"SELECT key, value FROM {{meta}} WHERE key IN ({keys})")
    return move_state(path, {str(k): str(v) for k, v in rows})


def require_live(tx: Tx, path: str) -> None:
    """Refuse any write to a ledger that is not live, inside the write transaction (so a
    handle opened before a move sees the seal): :class:`LedgerMoved`, nothing written."""
    refuse_unless_live(read_move_state(tx, path), path)


def refuse_unless_live(state: MoveState, path: str) -> None:
    if state.state == "sealed":
        raise LedgerMoved(
            f"ledger {path} was moved to {state.moved_to}: it takes no more spends "
            f"and stores no more results; use the ledger {state.moved_to}",
            path=path,
            state=state.state,
            moved_to=state.moved_to,
        )
    if state.state == "awaiting":
        raise LedgerMoved(
            f"ledger {path} is the destination of an unfinished move from "
            f"{state.moved_from}: it takes no spend until the move finishes; run "
            f"`dpkit budget move {state.moved_from} {path}` again",
            path=path,
            state=state.state,
            moved_from=state.moved_from,
        )

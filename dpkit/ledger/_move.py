"""Moving a ledger to another location (SQLite → PostgreSQL, or any other pair) without ever
having two ledgers that take spends, and without losing a committed spend.

A budget must never be reset: a team that moves its ledger and starts a fresh one has forgotten
everything it spent. :func:`move_ledger` copies a ledger's complete state — metadata (dataset,
budget, composition rule, privacy unit, totals, creation time) and every entry as stored, with
its number — and hands the budget over in three commits, each of which a crash (SIGKILL, power
loss) either completes or leaves out:

1. **Copy**, holding the *source's* write lock from before the first read to after step 2 (so a
   spender racing the move either commits before the copy, and is copied, or waits and is then
   refused): the destination is written in ONE transaction, marked ``awaiting`` (it takes no
   spend), and committed.
2. **Seal** the source, in the transaction that holds that lock: it becomes ``sealed`` with the
   destination's location and the move's id, and from then on refuses every spend (and every
   stored result and abort), naming where the ledger went (without a password).
3. **Activate** the destination: ``awaiting`` → ``live``, if its move id is the sealed source's.

So the source is live until step 2 commits and the destination only after step 3: at most one
of them takes spends at any moment, and the one that does holds every committed spend. A crash

* before 1 commits leaves the source live and the destination untouched (or still an older
  ``awaiting`` copy);
* between 1 and 2 leaves the source live and the destination ``awaiting``: a stale copy, which
  the next run of the same move replaces (the source may have spent since);
* between 2 and 3 leaves no ledger live: the next run sees the sealed source, finds the
  destination awaiting the same move, and activates it;
* after 3 leaves the move done; running it again reports that (``MoveResult.outcome``).

Every check that needs no write comes first, with a typed error and nothing written: a location
that is not persistent, the source and destination the same ledger, a source that is sealed (to
another destination) or awaiting a move of its own, a destination that holds entries, another
ledger's move, or another dataset, budget, composition rule or privacy unit
(:class:`LedgerMismatch`; an empty destination whose unit is not fixed yet takes the source's). The
copy re-checks them under both locks. Finally both ledgers are verified
(:meth:`~dpkit.ledger.Ledger.verify`) and every entry of the source is compared with its copy
(:func:`compare_entries`; ``dpkit budget verify`` of a sealed ledger does the same, through
:func:`verify_destination`).

**Large ledgers.** The copy streams the entries in ``seq`` order, :data:`_BATCH` at a time:
each batch is fetched from the source (a server-side cursor on PostgreSQL) and written into the
destination (PostgreSQL: ``COPY ... FROM STDIN``; SQLite: ``executemany`` of one ``INSERT``),
all in the destination's one transaction; memory holds one batch, whatever the ledger's size.

The source's write transaction lasts as long as the copy. PostgreSQL ends a session that sits
idle inside a transaction for longer than ``idle_in_transaction_session_timeout``, which dpkit
sets to 60 s for its writes (:data:`dpkit.ledger._postgresql._IDLE_IN_TRANSACTION`), so that a
hung client cannot hold a ledger's lock for ever. Before streaming, the source sat idle for the
whole copy, and a copy longer than 60 s (about 10⁶ entries) lost its session at the seal, on
every run. Now the source runs a statement (the next batch's fetch) between every two writes,
so it is idle only while one batch is written, while the destination's lock is awaited (at
most ``timeout``: the destination's ``lock_timeout``) and while the destination commits. So its
limit is raised, for the move's transaction only (``SET LOCAL``), to ``timeout`` + :data:`_IDLE`
(60 s), not removed: a copy of any length keeps the lock while it makes progress, and a mover
that hangs (stopped, or stuck on a dead destination) loses the source's lock within
``timeout`` + 60 s, when the server ends its session. Nothing is sealed then: the source takes
spends again and the destination stays ``awaiting``, so two ledgers are never live; the next
run copies again. An SQLite source has no such limit (a hung mover holds it until killed).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

import attrs

from dpkit.budget import Budget
from dpkit.errors import InvalidParameter
from dpkit.ledger._core import Ledger
from dpkit.ledger._errors import (
    VERIFY_HINT,
    LedgerCorrupt,
    LedgerError,
    LedgerMismatch,
    LedgerMoved,
)
from dpkit.ledger._location import parse_location, require_persistent
from dpkit.ledger._open import open_store
from dpkit.ledger._schema import MOVE_KEYS, SCHEMA_VERSION, Tx, entry_column_names
from dpkit.ledger._store import Store
from dpkit.ledger._values import PENDING, MoveState

__all__ = [
    "DestinationCheck",
    "MoveResult",
    "compare_entries",
    "move_ledger",
    "verify_destination",
]

_COLUMNS = entry_column_names()
_SELECT_ROWS = f"SELECT {', '.join(_COLUMNS)} FROM {{entries}} ORDER BY seq"
_RESULT = _COLUMNS.index("result")
#: Entries per batch of a move's copy: one fetch from the source, one write (SQLite:
#: ``executemany``; PostgreSQL: ``COPY``) into the destination, a few MB in memory.
_BATCH = 5000
#: Seconds a move's source transaction may sit idle beyond the wait for the destination's lock
#: (see move_ledger).
_IDLE = 60.0
#: What makes two ledgers the same budget: a destination must agree with the source on these.
_SETTINGS = {
    "dataset_id": "dataset",
    "composition": "composition",
    "budget_epsilon": "budget ε",
    "budget_delta": "budget δ",
    "budget_rho": "budget ρ",
    "budget_mu2": "budget μ²",
}


@attrs.frozen
class MoveResult:
    """What :func:`move_ledger` did.

    ``outcome`` is ``"moved"`` (this call made the whole move), ``"finished"`` (it completed a
    move that an earlier, interrupted call had sealed) or ``"already moved"`` (an earlier call
    had completed it). ``entries`` is the number of entries moved and ``spent`` their verified
    totals, equal on both sides; locations are shown without passwords.
    """

    source: str
    destination: str
    move_id: str
    outcome: str
    entries: int
    spent: Budget

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "move_id": self.move_id,
            "outcome": self.outcome,
            "entries": self.entries,
            "spent": self.spent.as_dict(up=True),
        }


def move_ledger(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    timeout: float = 60.0,
) -> MoveResult:
    """Move the ledger at ``source`` to ``destination`` (see the module docstring).

    Either location is a file path, ``sqlite:///PATH`` or a PostgreSQL URL; the destination may
    hold no ledger yet, or an empty one with the same dataset, budget and composition rule.
    Afterwards the source refuses every spend with :class:`~dpkit.ledger.LedgerMoved` (naming
    the destination) and the destination carries on from the same totals. Running the same move
    again after an interruption finishes it, or reports that it was done. ``timeout`` is the
    longest wait for either ledger's lock (and, with 60 s more, the longest a PostgreSQL
    source's transaction may sit idle during the copy: see the module docstring). Typed
    errors (:class:`~dpkit.ledger.LedgerError` and its subclasses,
    :class:`~dpkit.errors.InvalidParameter`) name the ledger without a password.
    """
    for location in (source, destination):
        require_persistent(location)
    src = Ledger(source, timeout=timeout)
    dst = open_store(destination, timeout=timeout)
    src_at, dst_at = _where(source, src.path), _where(destination, dst.path)
    if src_at == dst_at:
        raise InvalidParameter("destination", dst.path, "a ledger other than the source")
    state = src.move_state()
    if state.state == "sealed":
        return _resume(src, destination, state, dst_at)
    src._refuse_unless_live(state)  # a source awaiting its own move cannot be moved on
    with src._store.guarded("reading the ledger"), src._store.read() as tx:
        mine = _meta(tx)
    with dst.guarded("opening the destination"):
        exists = dst.open(creating=True)
    if exists:
        Ledger(destination, timeout=timeout).close()  # a ledger (migrated if older)
        with dst.guarded("opening the destination"), dst.read() as tx:
            _check_destination(src.path, mine, dst, tx, src_at)
    src._verify()  # a damaged ledger is not moved (every entry read, before taking the lock)
    move_id = uuid.uuid4().hex
    with src._store.guarded("moving the ledger"), src._store.write() as tx:
        # waits of the copy between the source's statements: the destination's lock (up to
        # `timeout`) and its commit; each batch copied is a statement (see _IDLE)
        src._store.allow_idle(tx, timeout + _IDLE)
        src._require_live(tx)  # again, under the lock: a concurrent move may have sealed it
        src._checked_totals(tx)  # and the totals still agree with the entries
        meta = _meta(tx)
        rows = _batches(src, tx)
        _copy(src, dst, meta, rows, move_id=move_id, moved_from=src_at)  # step 1, committed
        _set_state(tx, state="sealed", move_id=move_id, moved_to=dst_at)  # step 2, at commit
    _activate(dst, move_id)  # step 3
    return _verified(src, destination, move_id, "moved")


def _where(location: str | os.PathLike[str], shown: str) -> str:
    """A ledger's location as a move records it: an SQLite file's real path (the same from
    any working directory, through any link), or a PostgreSQL URL without its password."""
    kind, target = parse_location(location)
    return os.path.realpath(target) if kind == "sqlite" else shown


def _meta(tx: Tx) -> dict[str, str]:
    return {str(k): str(v) for k, v in tx.rows("SELECT key, value FROM {meta}")}


def _check_destination(
    src_path: str, mine: dict[str, str], dst: Store, tx: Tx, src_at: str
) -> None:
    """Refuse a destination that is not empty and like the source (``mine``: its metadata),
    unless it is an ``awaiting`` copy of this source left by an interrupted move (which the
    copy replaces)."""
    found = _meta(tx)
    if not found:
        return  # tables without metadata: a creator is between its statements, or an empty one
    if found == mine:  # e.g. one PostgreSQL ledger named by two URLs, or a copy of the file
        raise InvalidParameter(
            "destination",
            dst.path,
            "a ledger other than the source (this is the source, or a copy of it)",
        )
    state = MoveState(*(found.get(key, "") for key in MOVE_KEYS))
    if state.state == "awaiting" and state.moved_from == src_at:
        return
    if state.state != "live":
        why = (
            f"was itself moved to {state.moved_to}"
            if state.state == "sealed"
            else f"awaits another move (from {state.moved_from})"
        )
        raise LedgerError(
            f"cannot move {src_path} to {dst.path}: the destination {why}; nothing was written",
            path=dst.path,
        )
    count = tx.one("SELECT count(*) FROM {entries}")
    if count is None or int(count[0]):
        raise LedgerError(
            f"cannot move {src_path} to {dst.path}: the destination is not empty (it holds "
            f"{count[0] if count else '?'} entries of its own); move to an empty location; "
            "nothing was written",
            path=dst.path,
        )
    ours, theirs = _settings(src_path, mine), _settings(dst.path, found)
    for key, field in _SETTINGS.items():
        if ours[key] != theirs[key]:
            raise LedgerMismatch(field, theirs[key] or "none", ours[key] or "none", path=dst.path)
    # an empty destination whose unit is not fixed yet takes the source's (the copy carries it)
    unit = mine.get("unit", "")
    if found.get("unit", "") not in ("", unit):
        raise LedgerMismatch("privacy unit", found["unit"], unit or "none", path=dst.path)


def _settings(path: str, meta: dict[str, str]) -> dict[str, str]:
    """The values that make a budget, as comparable text (fractions in lowest terms)."""
    out = {}
    for key in _SETTINGS:
        text = meta.get(key, "")
        try:
            out[key] = str(Fraction(text)) if key.startswith("budget_") and text else text
        except (ValueError, ZeroDivisionError):
            raise LedgerCorrupt(
                f"ledger {path} has damaged metadata: {key}={text!r}", path=path
            ) from None
    return out


def _batches(ledger: Ledger, tx: Tx) -> Iterator[list[tuple[Any, ...]]]:
    """A ledger's entries in ``seq`` order, :data:`_BATCH` at a time; a failure to read them
    names that ledger (the caller may be inside the other ledger's error translation)."""
    rows = ledger._store.batches(tx, _SELECT_ROWS, _BATCH)
    while True:
        with ledger._store.guarded("reading the entries"):
            batch = next(rows, None)
        if batch is None:
            return
        yield batch


def _copy(
    src: Ledger,
    dst: Store,
    meta: dict[str, str],
    rows: Iterable[list[tuple[Any, ...]]],
    *,
    move_id: str,
    moved_from: str,
) -> None:
    """Step 1: the destination's whole state in one transaction, marked ``awaiting``."""
    with dst.guarded("copying into the destination"), dst.claim() as tx:
        found = _meta(tx)
        _check_destination(src.path, meta, dst, tx, moved_from)  # again, under its locks
        stale = tx.one("SELECT count(*) FROM {entries}")
        if stale is not None and int(stale[0]):  # an awaiting copy from an interrupted run
            tx.run("DELETE FROM {entries}")
        copied = dict(meta, schema_version=str(SCHEMA_VERSION), state="awaiting")
        copied.update(move_id=move_id, moved_to="", moved_from=moved_from)
        # keys already there are updated in place (spenders queue on the 'format' row, which
        # is never deleted), the others inserted: no DELETE privilege needed on the metadata
        extra = [key for key in found if key not in copied]
        if extra:
            tx.run_many("DELETE FROM {meta} WHERE key = ?", [(key,) for key in extra])
        _set_state(tx, **{k: v for k, v in copied.items() if k in found})
        tx.run_many(
            "INSERT INTO {meta} (key, value) VALUES (?, ?)",
            [(k, v) for k, v in copied.items() if k not in found],
        )
        for batch in rows:  # fetched from the source as they are written
            dst.insert_entries(tx, batch)
        dst.entries_copied(tx)


def _set_state(tx: Tx, **values: str) -> None:
    tx.run_many("UPDATE {meta} SET value = ? WHERE key = ?", [(v, k) for k, v in values.items()])


def _activate(dst: Store, move_id: str) -> bool:
    """Step 3: the destination takes spends, if it awaits this move. False if it already did
    (an earlier run activated it)."""
    with dst.guarded("activating the destination"), dst.write() as tx:
        found = _meta(tx)
        state = found.get("state")
        if found.get("move_id") != move_id or state not in ("awaiting", "live"):
            raise LedgerError(
                f"ledger {dst.path} is not the destination of move {move_id} (its state is "
                f"{state!r}, from move {found.get('move_id')!r}): it was changed after the "
                "copy; nothing was activated, and no ledger takes spends",
                path=dst.path,
            )
        if state == "live":
            return False
        _set_state(tx, state="live")
        return True


def _resume(
    src: Ledger, destination: str | os.PathLike[str], state: MoveState, dst_at: str
) -> MoveResult:
    """The source is sealed: finish (or report) its move, if it went to this destination."""
    if state.moved_to != dst_at:
        raise LedgerMoved(
            f"cannot move {src.path}: it was already moved to {state.moved_to} and is sealed "
            "(a ledger is moved once; move that one instead); nothing was written",
            path=src.path,
            state=state.state,
            moved_to=state.moved_to,
        )
    dst = open_store(destination, timeout=src.timeout)
    with dst.guarded("opening the destination"):
        exists = dst.open(creating=False)
    if not exists:
        raise LedgerError(
            f"ledger {src.path} was sealed for its move to {dst.path}, but {dst.path} holds no "
            "ledger (was it deleted?): no ledger takes spends; restore the destination from a "
            "backup and run the move again",
            path=dst.path,
        )
    Ledger(destination, timeout=src.timeout).close()  # a ledger, readable
    done = _activate(dst, state.move_id)
    return _verified(src, destination, state.move_id, "finished" if done else "already moved")


def _verified(
    src: Ledger, destination: str | os.PathLike[str], move_id: str, outcome: str
) -> MoveResult:
    """Both ledgers verified, and every entry of the (sealed) source equal to its copy, as
    stored (text for text, under the same number)."""
    dst = Ledger(destination, timeout=src.timeout)
    spent = src._verify()[0]  # a ledger whose older entries mix units moves as it is
    dst._verify()
    moved, _ = compare_entries(src, dst)
    return MoveResult(src.path, dst.path, move_id, outcome, moved, spent)


@attrs.frozen
class DestinationCheck:
    """What :func:`verify_destination` found: the destination (a :class:`Ledger`, opened),
    its verified totals ``spent``, its move state, the number of the source's entries it holds
    as moved (all of them) and the number of entries made there since the move."""

    ledger: Ledger
    spent: Budget
    state: MoveState
    moved: int
    since: int


def verify_destination(
    src: Ledger, destination: str | os.PathLike[str] | None = None
) -> DestinationCheck:
    """Verify the destination of the sealed ledger ``src`` and that it holds every entry of
    ``src`` as moved (:func:`compare_entries`); reads only. ``destination`` defaults to the
    location the seal names, which has no password (by design): pass the full location (or
    let libpq find the password in ``PGPASSWORD`` or ``~/.pgpass``) when the server needs
    one; a location naming another ledger is refused (:class:`InvalidParameter`) before it is
    opened. A destination that cannot be opened raises :class:`LedgerError` saying how to
    give its password; one that is not this move's raises :class:`LedgerCorrupt`."""
    state = src.move_state()
    if state.state != "sealed":
        raise InvalidParameter("ledger", src.path, "a ledger that was moved (sealed)")
    location = state.moved_to if destination is None else destination
    shown = open_store(location, timeout=src.timeout).path
    if _where(location, shown) != state.moved_to:
        raise InvalidParameter(
            "destination", shown, f"the ledger {src.path} was moved to: {state.moved_to}"
        )
    try:
        dst = Ledger(location, timeout=src.timeout)
    except LedgerCorrupt:
        raise
    except LedgerError as error:
        raise LedgerError(
            f"ledger {src.path} was moved to {state.moved_to}, which could not be opened to "
            f"check it ({error}); a sealed ledger keeps its destination without a password: "
            "give the password in PGPASSWORD or ~/.pgpass, or the destination's full URL "
            "with --destination",
            path=shown,
        ) from None
    found = dst.move_state()
    # a move's id is unique: this copy is of this move (a destination moved on since has the
    # id of its own move, and still names this source)
    chained = found.state == "sealed" and found.moved_from == _where(src.path, src.path)
    if found.move_id != state.move_id and not chained:
        raise LedgerCorrupt(
            f"ledger {dst.path} is not the destination of the move of {src.path} (move "
            f"{state.move_id!r}): it records move {found.move_id!r} from "
            f"{found.moved_from or 'nowhere'}; " + VERIFY_HINT.format(path=dst.path),
            path=dst.path,
        )
    spent = dst._verify()[0]
    moved, since = compare_entries(src, dst)
    return DestinationCheck(dst, spent, found, moved, since)


def compare_entries(src: Ledger, dst: Ledger) -> tuple[int, int]:
    """Check that ``dst`` holds every entry of the (sealed) ``src`` as it was moved: the same
    number, every column equal as stored (text for text), except a result that was pending at
    the move and stored since. Returns ``(moved, since)``: the source's entry count, and the
    destination's entries beyond them (spends made after the move). Both are read in ``seq``
    order, a batch at a time, side by side (never a whole ledger in memory); reads only.
    :class:`LedgerCorrupt` names up to 10 entries that are missing or differ."""
    differ: list[int] = []
    moved = since = 0
    with (
        src._store.guarded("reading the entries"),
        src._store.snapshot() as src_tx,
        dst._store.guarded("reading the entries"),
        dst._store.snapshot() as dst_tx,
    ):
        copies = _rows(dst, dst_tx)
        copy = next(copies, None)
        for row in _rows(src, src_tx):
            moved += 1
            while copy is not None and copy[0] < row[0]:
                since, copy = since + 1, next(copies, None)
            if copy is None or copy[0] != row[0] or not _same(row, copy):
                differ.append(int(row[0]))
            else:
                copy = next(copies, None)
        since += (copy is not None) + sum(1 for _ in copies)
    if differ:
        raise LedgerCorrupt(
            f"ledger {dst.path} does not hold the entries {differ[:10]} of {src.path} as "
            f"they were moved ({len(differ)} of {moved} missing or changed); "
            + VERIFY_HINT.format(path=dst.path),
            path=dst.path,
        )
    return moved, since


def _rows(ledger: Ledger, tx: Tx) -> Iterator[tuple[Any, ...]]:
    for batch in _batches(ledger, tx):
        yield from batch


def _same(moved: tuple[Any, ...], copy: tuple[Any, ...] | None) -> bool:
    """The copy is the entry as moved (a result still pending at the move may have been
    stored in the destination since)."""
    if copy is not None and moved[_RESULT] == PENDING:
        copy = (*copy[:_RESULT], PENDING, *copy[_RESULT + 1 :])
    return copy == moved

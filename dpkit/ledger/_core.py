"""The ledger handle: a ledger opened at a location, and its operations, once for every backend.

:class:`Ledger` opens a backend (:mod:`dpkit.ledger._store`: SQLite or PostgreSQL, which
provides the connections, the write lock and the translation of driver errors) and runs the
ledger's logic over it, one concept a module: the metadata and its migration
(:mod:`~dpkit.ledger._meta`), the move state (:mod:`~dpkit.ledger._move_state`), the privacy
unit (:mod:`~dpkit.ledger._unit`), the spent totals and admission (:mod:`~dpkit.ledger._totals`),
the spend transaction (:mod:`~dpkit.ledger._spend`), the history (:mod:`~dpkit.ledger._history`)
and verification (:mod:`~dpkit.ledger._verify`). Every spend is one write transaction that
recomputes the totals from the entries, checks them against the cached totals and the budget,
inserts the entries and updates the totals, so a ledger is never overspent however many
processes, threads and hosts share it.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from typing import Any

from dpkit.budget import Budget, Cost, check_currencies
from dpkit.errors import InvalidParameter
from dpkit.ledger import _history, _spend
from dpkit.ledger._errors import (
    LedgerMismatch,
    LedgerMissing,
    LedgerUnitsMixed,
    UnitMismatch,
)
from dpkit.ledger._meta import Composition, create, read_meta
from dpkit.ledger._move_state import read_move_state, refuse_unless_live, require_live
from dpkit.ledger._open import open_store
from dpkit.ledger._schema import Tx
from dpkit.ledger._store import Store
from dpkit.ledger._totals import (
    Totals,
    as_budget,
    cached_totals,
    checked_totals,
    remaining,
    rule_of,
    stream_sums,
    union_of,
    union_remaining,
)
from dpkit.ledger._unit import UnitState, read_unit
from dpkit.ledger._values import LedgerEntry, MoveState, SpendRequest
from dpkit.ledger._verify import verify
from dpkit.union_filter import Streams, Union
from dpkit.units import UnitIdentity, as_identity

__all__ = ["Composition", "Ledger"]


class Ledger:
    """A budget ledger, shared safely by processes, threads, handles and (PostgreSQL) hosts.

    ``path`` is an SQLite file (``"ledger.sqlite"``, ``"sqlite:///PATH"``), ``":memory:"`` (a
    private ledger that lasts as long as this object), or a PostgreSQL URL
    (``"postgresql://USER@HOST/DATABASE?ledger=NAME"``, with ``dpkit[postgresql]``; see
    ``docs/scaling.md``). Open an existing ledger with ``Ledger(path)``; create one by also
    giving ``budget`` (and ``dataset``/``composition``). Given values that disagree with an
    existing ledger raise :class:`LedgerMismatch`; a location that is not a ledger raises
    :class:`NotALedger`; damaged metadata raises :class:`LedgerCorrupt`; any other reason the
    ledger cannot be used (a missing directory, a server that is down, a failed login, a lock
    held past ``timeout`` seconds) raises :class:`LedgerError`. Each thread (and each process,
    after ``fork``) uses its own connection; any number of ``Ledger`` objects may be open on
    one ledger. ``path`` is kept as shown in messages: a URL without its password. A ledger
    moved elsewhere (:func:`~dpkit.ledger.move_ledger`) still opens and reads, but refuses every
    write with :class:`LedgerMoved`, checked inside each write transaction; so does the
    destination of a move that has not finished (:meth:`move_state`).

    ``composition`` is one of :data:`dpkit.budget.RULES` (the privacy filter that admits each
    spend); the budget must carry ``rho`` for ``"zcdp"`` and ``mu2`` for ``"gdp"`` (and both,
    where δ > 0, for ``"best"``, whose currency the first spend fixes).

    ``unit`` is the privacy unit the budget is for (:attr:`unit`): ``"record"``, a
    :class:`~dpkit.RecordUnit` or :class:`~dpkit.IdUnit` (only its id column counts, not its
    bounds) or a :class:`~dpkit.units.UnitIdentity`. Given when the ledger is created, it is
    fixed then; otherwise the first spend fixes it, in its transaction. Every spend under
    another unit is refused with :class:`UnitMismatch` before anything is written, and so is
    every spend of this handle under a unit other than the one given.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        dataset: str | None = None,
        budget: Budget | None = None,
        composition: Composition | None = None,
        unit: Any = None,
        timeout: float = 60.0,
    ):
        #: The unit this handle spends under, if given (checked before anything is opened).
        self._declared_unit = None if unit is None else as_identity(unit)
        if budget is not None:  # ρ and μ² within what (ε, δ) allow, before anything is opened
            check_currencies(budget, budget, owner="Ledger")
        self._store: Store = open_store(path, timeout=timeout)
        self.path = self._store.path
        self.timeout = timeout
        with self._store.guarded("opening"):
            exists = self._store.open(creating=budget is not None)
            if not exists:
                if budget is None:
                    raise LedgerMissing(
                        f"no ledger at {self.path}: give a budget to create one", path=self.path
                    )
                create(
                    self._store,
                    dataset or "default",
                    budget,
                    composition or "basic",
                    self._declared_unit,
                )
            meta = read_meta(self._store)
        self.dataset, self.composition, self.budget = meta.dataset, meta.composition, meta.budget
        found = meta.unit
        if dataset is not None and dataset != self.dataset:
            raise LedgerMismatch("dataset", self.dataset, dataset, path=self.path)
        if composition is not None and composition != self.composition:
            raise LedgerMismatch("composition", self.composition, composition, path=self.path)
        if budget is not None and (budget.epsilon, budget.delta) != (
            self.budget.epsilon,
            self.budget.delta,
        ):
            raise LedgerMismatch("budget", self.budget, budget, path=self.path)
        declared = self._declared_unit
        if declared is not None and found[0] is not None and found[0] != declared:
            raise UnitMismatch(
                found[0],
                declared,
                path=self.path,
                message=f"ledger {self.path} has privacy unit={found[0]!s} but unit="
                f"{declared!s} was given; a ledger's budget is for one privacy unit (use "
                "another ledger)",
            )

    def _transaction(self) -> AbstractContextManager[Tx]:
        """A write transaction holding the ledger's write lock (see :mod:`dpkit.ledger._store`)."""
        return self._store.write()

    # -- the move state ----------------------------------------------------------------------
    def move_state(self) -> MoveState:
        """Where this ledger stands in a move (:func:`~dpkit.ledger.move_ledger`): ``live``
        unless it was moved away (``sealed``) or is a move's unfinished destination."""
        with self._store.guarded("reading the move state"), self._store.read() as tx:
            return read_move_state(tx, self.path)

    def _require_live(self, tx: Tx) -> None:
        """Refuse any write to a ledger that is not live, inside the write transaction."""
        require_live(tx, self.path)

    def _refuse_unless_live(self, state: MoveState) -> None:
        refuse_unless_live(state, self.path)

    # -- the privacy unit --------------------------------------------------------------------
    def _unit_state(self) -> UnitState:
        with self._store.guarded("reading the privacy unit"), self._store.read() as tx:
            return read_unit(tx, self.path)

    @property
    def unit(self) -> UnitIdentity | None:
        """The privacy unit this ledger's budget is for (:class:`~dpkit.units.UnitIdentity`:
        ``record``, or ``id`` and its column), fixed when the ledger was created with one or by
        its first spend; None before. A ledger migrated from a dpkit older than the privacy
        unit has the unit of its spent entries; one whose entries protect several units has
        None here and lists them in :attr:`mixed_units`."""
        return self._unit_state()[0]

    @property
    def mixed_units(self) -> tuple[UnitIdentity, ...]:
        """The privacy units an older ledger's spent entries mix (in the order of their first
        spend), or ``()``. Such a ledger takes no more spends (:class:`LedgerUnitsMixed`):
        its budget bounds the loss of none of them."""
        return self._unit_state()[1]

    # -- totals ------------------------------------------------------------------------------
    def _checked_totals(self, tx: Tx) -> Totals:
        """The cached totals, after checking that they equal the sum of the entries."""
        return checked_totals(tx, self.path)

    @property
    def rule(self) -> str | None:
        """The currency this ledger charges in (:data:`dpkit.budget.CURRENCIES`); for a
        ``"best"`` ledger None until its first spend fixes it."""
        with self._store.guarded("reading the rule"), self._store.read() as tx:
            return rule_of(tx, self.composition)

    # -- spending ----------------------------------------------------------------------------
    def spend(
        self,
        cost: Cost,
        *,
        mechanism: str,
        parameters: dict[str, Any],
        event: dict[str, Any],
        session_id: str,
        randomness: str,
        label: str | None = None,
        unit: Any = None,
    ) -> LedgerEntry:
        """Check and record one spend atomically; :class:`BudgetExceeded` if it does not fit.

        In one write transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the ledger's row
        lock): refuse a spend under another privacy unit than the ledger's
        (:class:`UnitMismatch`; ``unit`` is the release's, one record by default), recompute
        the totals from the entries (exact sum), refuse with :class:`LedgerCorrupt` if they
        disagree with the cached totals, check the budget, insert the entry and update the
        totals. ``label`` names the release.
        """
        request = SpendRequest(
            cost,
            mechanism,
            parameters,
            event,
            session_id,
            randomness,
            label,
            unit=UnitIdentity("record") if unit is None else as_identity(unit),
        )
        return self.spend_all([request])[0]

    def spend_all(self, requests: list[SpendRequest]) -> list[LedgerEntry]:
        """Check and record several spends in ONE transaction: all are committed, or none.

        The budget is checked against their running sum, so a batch that does not fit as a
        whole raises :class:`BudgetExceeded` and writes nothing (an interruption cannot leave
        half of it). Each cost is charged in the ledger's currency
        (:func:`dpkit.budget.project`); a ``"best"`` ledger's first spend fixes the currency
        (:func:`dpkit.budget.choose`), in the same transaction. Every spend of the batch must
        be under one privacy unit, the ledger's (:class:`UnitMismatch`; the first spend of a
        ledger without one fixes it, in the same transaction); a ledger whose older entries mix
        units refuses every spend (:class:`LedgerUnitsMixed`).
        """
        return _spend.spend_all(
            self._store,
            requests,
            dataset=self.dataset,
            budget=self.budget,
            composition=self.composition,
            declared=self._declared_unit,
        )

    def record_result(self, release_id: str, result: Any) -> None:
        """Store the released result of a spent entry, as JSON (a second call overwrites).

        Stored as ``json.dumps(result, default=str, allow_nan=True)``; :class:`LedgerError` if
        the ledger has no such release, or if it was aborted (nothing was released).
        """
        try:
            text = json.dumps(result, default=str, allow_nan=True)
        except (TypeError, ValueError) as error:  # e.g. a circular structure
            raise InvalidParameter(
                "result", type(result).__name__, f"a JSON-serialisable value ({error})"
            ) from None
        _spend.record_result(self._store, release_id, text)

    def abort(self, release_id: str) -> None:
        """Give back a reservation made **before any private data were read**.

        Only for a spend whose release never started (e.g. another cost of an all-or-nothing
        batch did not fit): once data may have been read, the spend stands even if the
        mechanism raised, because an error or a refund can depend on the data. Marks the entry
        ``aborted``; a release whose result was stored cannot be aborted, nor a session's spend
        (:attr:`SpendRequest.final`: its data are read as soon as it commits). Unknown or
        already aborted ids are ignored.
        """
        _spend.abort(self._store, release_id)

    # -- reading -----------------------------------------------------------------------------
    def spent(self) -> Budget:
        """What has been spent so far (the cached totals; :meth:`verify` checks them)."""
        with self._store.guarded("reading the totals"), self._store.read() as tx:
            return as_budget(cached_totals(tx, self.path), rule_of(tx, self.composition))

    def remaining(self) -> Budget:
        """What is left of the budget (in the ledger's currency; every currency of a "best"
        ledger before its first spend; a union ledger's main filter's, never below 0)."""
        with self._store.guarded("reading the totals"), self._store.read() as tx:
            rule = rule_of(tx, self.composition)
            spent = as_budget(cached_totals(tx, self.path), rule)
            union = union_of(tx, self.composition)
            if union is not None:
                return union_remaining(self.budget, spent, union)
            return remaining(self.budget, spent, rule)

    @property
    def union(self) -> Union | None:
        """The union of filters a ``"best"`` ledger's first spend started
        (:mod:`dpkit.union_filter`), or None."""
        with self._store.guarded("reading the rule"), self._store.read() as tx:
            return union_of(tx, self.composition)

    def streams(self) -> Streams:
        """The sums a union ledger's filters charge, over its spent entries."""
        with self._store.guarded("reading the totals"), self._store.read() as tx:
            return stream_sums(tx, self.path)

    def entries(self) -> list[LedgerEntry]:
        """Every entry, in commit order."""
        with self._store.guarded("reading the entries"), self._store.read() as tx:
            return list(_history.entries(tx, self.path))

    def _release_counts(self) -> tuple[int, int]:
        """``(spent releases, those without a stored result)``, counted by the database."""
        with self._store.guarded("counting the releases"), self._store.read() as tx:
            return _history.release_counts(tx)

    def _status_counts(self) -> dict[str, int]:
        """The number of entries of each status (``spent``, ``aborted``), counted by the
        database."""
        with self._store.guarded("counting the releases"), self._store.read() as tx:
            return _history.status_counts(tx)

    def verify(self) -> Budget:
        """Check the ledger: the database's integrity check (SQLite's ``integrity_check``),
        every entry readable, the cached totals equal to the exact sum of the spent entries,
        the totals within the budget, and every spent entry under the ledger's privacy unit.

        Returns the totals; raises :class:`LedgerCorrupt` saying everything that is wrong,
        or, for a consistent ledger whose older entries mix privacy units (:attr:`mixed_units`),
        :class:`LedgerUnitsMixed`. The entries are read in batches (a ledger of millions is
        never held in memory) in one snapshot; each distinct cost is parsed once and summed
        times its count (exact).
        """
        spent, mixed = self._verify()
        if mixed:
            raise LedgerUnitsMixed(mixed, path=self.path)
        return spent

    def _verify(self) -> tuple[Budget, tuple[UnitIdentity, ...]]:
        """:meth:`verify`'s checks of consistency: the totals, and the units its older
        entries mix (which ``dpkit budget show`` shows rather than refuses)."""
        return verify(self._store, self.budget, self.composition)

    def close(self) -> None:
        """Close this thread's connection."""
        self._store.close()

"""The ledger's logic, once for every backend: entries, totals, admission, results, verification.

:class:`Ledger` runs the same SQL (:mod:`dpkit.ledger._schema`) over a backend
(:mod:`dpkit.ledger._store`: SQLite or PostgreSQL) that provides the connections, the write lock
and the translation of driver errors. Every spend is one write transaction that recomputes the
totals from the entries, checks them against the cached totals and the budget, inserts the
entries and updates the totals, so a ledger is never overspent however many processes, threads
and hosts share it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from fractions import Fraction
from typing import Any, Literal

import attrs

from dpkit import budget as filters  # the privacy filters: admits, choose, project, total
from dpkit.budget import CURRENCIES, RULES, Budget, Cost, exact_text
from dpkit.errors import BudgetExceeded, InvalidParameter
from dpkit.ledger._errors import (
    VERIFY_HINT,
    LedgerCorrupt,
    LedgerError,
    LedgerMismatch,
    LedgerMissing,
    LedgerMoved,
    LedgerUnitsMixed,
    NotALedger,
    UnitMismatch,
)
from dpkit.ledger._open import open_store
from dpkit.ledger._schema import (
    ADDED_META,
    ENTRY_COLUMNS,
    FORMAT,
    MOVE_KEYS,
    SCHEMA_VERSION,
    TOTALS,
    Total,
    Tx,
    entry_column_names,
)
from dpkit.ledger._store import Store
from dpkit.ledger._values import STATES, LedgerEntry, MoveState, SpendRequest, fraction_text
from dpkit.units import UnitIdentity, as_identity

__all__ = ["PENDING", "Composition", "Ledger"]

Composition = Literal["basic", "zcdp", "gdp", "best"]

_RULES_TEXT = "one of " + ", ".join(f"'{rule}'" for rule in RULES)

#: The spent totals by name (``"epsilon"``, ``"delta"``, ``"rho"``, ``"mu2"``): exact sums.
Totals = dict[str, Fraction]

#: The amounts every entry must have (the others, such as ``rho``, may be missing).
_REQUIRED = frozenset(c.name for c in ENTRY_COLUMNS if not c.nullable)
_SELECT_ENTRIES = f"SELECT {', '.join(entry_column_names())} FROM {{entries}}"
_AMOUNTS = tuple(total.name for total in TOTALS)
_AMOUNTS_AT = tuple(entry_column_names().index(name) for name in _AMOUNTS)
_STATUS_AT = entry_column_names().index("status")
_JSON_AT = tuple(
    (entry_column_names().index(c), c) for c in ("parameters", "event", "result", "unit")
)
_UNIT_AT = entry_column_names().index("unit")
_VERIFY_BATCH = 5000


#: The result of a session's entry until its release stores one (see SpendRequest.final).
PENDING = json.dumps({"stored": "pending"})


def _zero() -> Totals:
    return {total.name: Fraction(0) for total in TOTALS}


#: A ledger's privacy unit (meta ``unit``): not fixed yet, fixed, or the units an older
#: ledger's entries mix (see Ledger.unit).
UnitState = tuple[UnitIdentity | None, tuple[UnitIdentity, ...]]
_UNIT_ALLOWED = "'' or a privacy unit such as '{\"kind\":\"record\"}'"


def _amount(cost: Cost, total: Total) -> Fraction:
    value = getattr(cost, total.name)
    return Fraction(0) if value is None else Fraction(value)


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
                self._create(
                    dataset or "default", budget, composition or "basic", self._declared_unit
                )
            self.dataset, self.composition, self.budget, found = self._read_meta()
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

    # -- opening -----------------------------------------------------------------------------
    def _transaction(self) -> AbstractContextManager[Tx]:
        """A write transaction holding the ledger's write lock (see :mod:`dpkit.ledger._store`)."""
        return self._store.write()

    def _create(
        self, dataset: str, budget: Budget, composition: Composition, unit: UnitIdentity | None
    ) -> None:
        if composition not in RULES:
            raise InvalidParameter("composition", composition, _RULES_TEXT)
        needed = {"zcdp": "rho", "gdp": "mu2"}.get(composition)
        if needed is not None and getattr(budget, needed) is None:
            raise InvalidParameter("budget", budget, f"a budget with {needed} for {composition}")
        meta = {
            "format": FORMAT,
            "schema_version": str(SCHEMA_VERSION),
            "dataset_id": dataset,
            "composition": composition,
            "budget_epsilon": fraction_text(budget.epsilon),
            "budget_delta": fraction_text(budget.delta),
            "budget_rho": fraction_text(budget.rho) if budget.rho is not None else "",
            "budget_mu2": fraction_text(budget.mu2) if budget.mu2 is not None else "",
            **{total.key: "0/1" for total in TOTALS},
            "rule": "",
            "unit": "" if unit is None else _unit_text(unit),
            **{key: ADDED_META[key] for key in MOVE_KEYS},
            "created": _now(),
        }
        self._store.create(meta)

    def _read_meta(self) -> tuple[str, Composition, Budget, UnitState]:
        with self._store.guarded("opening", not_a_ledger=True), self._store.read() as tx:
            rows = tx.rows("SELECT key, value FROM {meta}")
        meta: dict[str, str] = {str(k): str(v) for k, v in rows}
        if meta.get("format") != FORMAT:
            raise NotALedger(
                f"{self.path} is not a dpkit ledger (no dpkit metadata); it was not modified",
                path=self.path,
            )
        version = self._meta_value(meta, "schema_version", "a whole number such as '2'")
        if not version.isdigit() or int(version) < 1:
            raise self._damaged("schema_version", version, "a whole number >= 1")
        if int(version) > SCHEMA_VERSION:
            raise LedgerError(
                f"{self.path} has ledger schema version {version}; this dpkit reads up to "
                f"{SCHEMA_VERSION} (upgrade dpkit)",
                path=self.path,
            )
        dataset = self._meta_value(meta, "dataset_id", "a dataset name")
        composition = self._meta_value(meta, "composition", _RULES_TEXT)
        if composition not in RULES:
            raise self._damaged("composition", composition, _RULES_TEXT)
        epsilon = self._meta_fraction(meta, "budget_epsilon")
        delta = self._meta_fraction(meta, "budget_delta")
        if delta >= 1:
            raise self._damaged("budget_delta", meta["budget_delta"], "a fraction in [0, 1)")
        for total in TOTALS:
            if total.since <= int(version):
                self._meta_fraction(meta, total.key)
        if int(version) < SCHEMA_VERSION:
            meta = self._migrate()
        unit = self._parse_unit(self._meta_value(meta, "unit", _UNIT_ALLOWED))
        rho = self._optional_fraction(meta, "budget_rho", composition == "zcdp")
        mu2 = self._optional_fraction(meta, "budget_mu2", composition == "gdp")
        rule = meta.get("rule", "")
        if rule and (composition != "best" or rule not in CURRENCIES):
            raise self._damaged("rule", rule, "a currency (basic, zcdp, gdp) of a 'best' ledger")
        self._move_state(meta)
        budget = Budget(epsilon, delta, rho, mu2)
        return dataset, composition, budget, unit  # type: ignore[return-value]

    def _optional_fraction(self, meta: dict[str, str], key: str, required: bool) -> Fraction | None:
        """A budget of one currency: required by its rule, optional ('' = none) otherwise."""
        if not required and meta.get(key, "") == "":
            return None
        return self._meta_fraction(meta, key)

    def _migrate(self) -> dict[str, str]:
        """Bring an older ledger to :data:`SCHEMA_VERSION`: add the entry columns and the spent
        totals it lacks (idempotent: concurrent openers serialise on the write lock, and the
        second finds them there), and return its metadata as migrated. Version 1 → 2 added
        ``label`` and ``result``; 2 → 3 the ``mu2`` and ``rule`` columns, the Gaussian-DP total
        and meta keys (old entries keep ``rule`` NULL); 4 → 5 the privacy unit, derived from
        the spent entries (:meth:`_derived_unit`; old entries keep ``unit`` NULL)."""
        with self._store.write() as tx:
            columns = self._store.columns(tx)
            if not columns:
                raise self._damaged("dpkit_entries", "missing", "the table of entries")
            for column in ENTRY_COLUMNS:
                if column.name not in columns:
                    tx.run(f"ALTER TABLE {{entries}} ADD COLUMN {column.name} TEXT")
            present = {row[0] for row in tx.rows("SELECT key FROM {meta}")}
            for total in TOTALS:
                if total.key not in present:  # entries that predate it add nothing to it
                    tx.run("INSERT INTO {meta} (key, value) VALUES (?, '0/1')", (total.key,))
            for key, value in ADDED_META.items():
                if key not in present:
                    value = self._derived_unit(tx) if key == "unit" else value
                    tx.run("INSERT INTO {meta} (key, value) VALUES (?, ?)", (key, value))
            tx.run(
                "UPDATE {meta} SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
            return {str(k): str(v) for k, v in tx.rows("SELECT key, value FROM {meta}")}

    def _derived_unit(self, tx: Tx) -> str:
        """The stored privacy unit of a ledger spent by a dpkit that did not record one: the
        unit of its spent entries (a table query records its ``unit`` in its parameters; any
        other release protected one record), or '' if it has none; if they disagree, every
        unit found (the ledger then takes no more spends: :class:`LedgerUnitsMixed`). A damaged
        entry leaves the unit unknown: the migration is refused, nothing changed."""
        first: dict[UnitIdentity, int] = {}
        query = "SELECT seq, parameters FROM {entries} WHERE status = 'spent' ORDER BY seq"
        for batch in self._store.batches(tx, query, _VERIFY_BATCH):
            for seq, text in batch:
                first.setdefault(self._recorded_unit(seq, text), int(seq))
        units = sorted(first, key=first.__getitem__)
        if not units:
            return ""
        if len(units) == 1:
            return _unit_text(units[0])
        return _compact({"kind": "mixed", "units": [unit.describe() for unit in units]})

    def _recorded_unit(self, seq: Any, text: Any) -> UnitIdentity:
        """The privacy unit an entry's parameters record (one record if they name none)."""
        try:
            parameters = json.loads(text)
        except (TypeError, ValueError):
            parameters = None
        if not isinstance(parameters, dict):
            raise self._undetermined(seq, "its parameters are not a JSON object")
        for key in ("unit", "privacy_unit"):
            value = parameters.get(key)
            if isinstance(value, dict) and value.get("kind") == "record":
                return UnitIdentity("record")
            if isinstance(value, dict) and value.get("kind") == "id":
                column = value.get("column")
                if not isinstance(column, str) or not column:
                    raise self._undetermined(seq, f"its id unit has no column: {value!r:.80}")
                return UnitIdentity("id", column)
        return UnitIdentity("record")

    def _undetermined(self, seq: Any, why: str) -> LedgerCorrupt:
        return LedgerCorrupt(
            f"ledger {self.path} was made by an older dpkit and its privacy unit cannot be "
            f"determined from its entries: entry {seq} is damaged ({why}); it was not "
            "migrated (nothing was changed)",
            path=self.path,
        )

    def _damaged(self, key: str, value: Any, allowed: str) -> LedgerCorrupt:
        return LedgerCorrupt(
            f"ledger {self.path} has damaged metadata: {key}={value!r}, expected {allowed}; "
            + VERIFY_HINT.format(path=self.path),
            path=self.path,
        )

    def _meta_value(self, meta: dict[str, str], key: str, allowed: str) -> str:
        if key not in meta:
            raise self._damaged(key, "missing", allowed)
        return meta[key]

    def _meta_fraction(self, meta: dict[str, str], key: str) -> Fraction:
        value = _parse_fraction(self._meta_value(meta, key, "a fraction such as '1/10'"))
        if value is None or value < 0:
            raise self._damaged(key, meta[key], "an exact fraction >= 0 such as '1/10'")
        return value

    # -- the move state ----------------------------------------------------------------------
    def _move_state(self, meta: dict[str, str]) -> MoveState:
        state = MoveState(*(meta.get(key, ADDED_META[key]) for key in MOVE_KEYS))
        if state.state not in STATES:
            raise self._damaged("state", state.state, "one of " + ", ".join(STATES))
        return state

    def _read_move_state(self, tx: Tx) -> MoveState:
        keys = ", ".join(f"'{key}'" for key in MOVE_KEYS)
        rows = tx.rows(f"SELECT key, value FROM {{meta}} WHERE key IN ({keys})")
        return self._move_state({str(k): str(v) for k, v in rows})

    def move_state(self) -> MoveState:
        """Where this ledger stands in a move (:func:`~dpkit.ledger.move_ledger`): ``live``
        unless it was moved away (``sealed``) or is a move's unfinished destination."""
        with self._store.guarded("reading the move state"), self._store.read() as tx:
            return self._read_move_state(tx)

    def _require_live(self, tx: Tx) -> None:
        """Refuse any write to a ledger that is not live, inside the write transaction (so a
        handle opened before a move sees the seal): :class:`LedgerMoved`, nothing written."""
        self._refuse_unless_live(self._read_move_state(tx))

    def _refuse_unless_live(self, state: MoveState) -> None:
        if state.state == "sealed":
            raise LedgerMoved(
                f"ledger {self.path} was moved to {state.moved_to}: it takes no more spends "
                f"and stores no more results; use the ledger {state.moved_to}",
                path=self.path,
                state=state.state,
                moved_to=state.moved_to,
            )
        if state.state == "awaiting":
            raise LedgerMoved(
                f"ledger {self.path} is the destination of an unfinished move from "
                f"{state.moved_from}: it takes no spend until the move finishes; run "
                f"`dpkit budget move {state.moved_from} {self.path}` again",
                path=self.path,
                state=state.state,
                moved_from=state.moved_from,
            )

    # -- the privacy unit --------------------------------------------------------------------
    def _parse_unit(self, text: str) -> UnitState:
        """A stored unit: '' (not fixed), a unit, or the units an older ledger mixes."""
        if text == "":
            return None, ()
        try:
            document = json.loads(text)
            if isinstance(document, dict) and document.get("kind") == "mixed":
                if set(document) != {"kind", "units"} or not isinstance(document["units"], list):
                    raise ValueError(text)
                units = tuple(UnitIdentity.parse(unit) for unit in document["units"])
                if len(units) < 2 or len(set(units)) != len(units):
                    raise ValueError(text)
                return None, units
            return UnitIdentity.parse(document), ()
        except (TypeError, ValueError):  # InvalidParameter is a ValueError
            raise self._damaged("unit", text, _UNIT_ALLOWED) from None

    def _read_unit(self, tx: Tx) -> UnitState:
        row = tx.one("SELECT value FROM {meta} WHERE key = 'unit'")
        if row is None:
            raise self._damaged("unit", "missing", _UNIT_ALLOWED)
        return self._parse_unit(str(row[0]))

    def _unit_state(self) -> UnitState:
        with self._store.guarded("reading the privacy unit"), self._store.read() as tx:
            return self._read_unit(tx)

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

    def _batch_unit(self, requests: list[SpendRequest]) -> UnitIdentity:
        """The one privacy unit of a batch of spends (public: before the transaction)."""
        first = requests[0].unit
        for index, request in enumerate(requests):
            if request.unit != first:
                raise UnitMismatch(
                    first,
                    request.unit,
                    path=self.path,
                    message=f"a batch of releases is charged on one budget, which is for one "
                    f"privacy unit, but release 0{_named(requests[0])} protects {first!s} and "
                    f"release {index}{_named(request)} protects {request.unit!s}; release them "
                    "on separate ledgers; nothing was spent",
                )
        declared = self._declared_unit
        if declared is not None and first != declared:
            raise UnitMismatch(
                declared,
                first,
                path=self.path,
                message=f"ledger {self.path} was opened for the privacy unit {declared!s} "
                f"(unit=), but this release protects the privacy unit {first!s}; nothing was "
                "spent",
            )
        return first

    def _admit_unit(self, tx: Tx, unit: UnitIdentity) -> bool:
        """Refuse a spend under another unit than the ledger's (inside the spend's
        transaction, before anything is written); True if this spend fixes the unit."""
        found, mixed = self._read_unit(tx)
        if mixed:
            raise LedgerUnitsMixed(mixed, path=self.path)
        if found is None:
            return True
        if found != unit:
            raise UnitMismatch(found, unit, path=self.path)
        return False

    def _entry_unit(self, seq: Any, text: Any) -> UnitIdentity | None:
        """The unit column of an entry (None in entries older than schema version 5)."""
        document = self._load(seq, "unit", text)
        if document is None:
            return None
        try:
            return UnitIdentity.parse(document)
        except ValueError:
            raise LedgerCorrupt(
                f"ledger {self.path} has a damaged unit in entry {seq}: {text!r:.80}; "
                + VERIFY_HINT.format(path=self.path),
                path=self.path,
            ) from None

    # -- totals and admission ----------------------------------------------------------------
    def _cached_totals(self, tx: Tx) -> Totals:
        keys = ", ".join(f"'{total.key}'" for total in TOTALS)
        meta = {
            str(k): str(v)
            for k, v in tx.rows(f"SELECT key, value FROM {{meta}} WHERE key IN ({keys})")
        }
        return {total.name: self._meta_fraction(meta, total.key) for total in TOTALS}

    def _summed_totals(self, tx: Tx) -> Totals:
        """The exact sum of the spent entries (grouped: costs repeat, so this stays fast)."""
        names = ", ".join(total.name for total in TOTALS)
        summed = _zero()
        for *amounts, count in tx.rows(
            f"SELECT {names}, count(*) FROM {{entries}} WHERE status = 'spent' GROUP BY {names}"
        ):
            cost = self._row_cost(
                dict(zip((t.name for t in TOTALS), amounts, strict=True)), where="a spent entry"
            )
            for total in TOTALS:
                summed[total.name] += _amount(cost, total) * int(count)
        return summed

    def _row_cost(self, amounts: dict[str, Any], *, where: str) -> Cost:
        """The cost of one stored entry; a missing optional amount (``rho``) stays None."""
        parsed: dict[str, Fraction | None] = {}
        damaged = False
        for name, text in amounts.items():
            if text in (None, "") and name not in _REQUIRED:
                parsed[name] = None
                continue
            value = _parse_fraction(text)
            damaged = damaged or value is None or value < 0
            parsed[name] = value
        if damaged:
            shown = ", ".join(f"{name}={text!r}" for name, text in amounts.items())
            raise LedgerCorrupt(
                f"ledger {self.path} has a damaged cost in {where}: {shown}, expected exact "
                "fractions >= 0; " + VERIFY_HINT.format(path=self.path),
                path=self.path,
            )
        return Cost(**parsed)  # type: ignore[arg-type]  # the required amounts are set

    def _checked_totals(self, tx: Tx) -> Totals:
        """The cached totals, after checking that they equal the sum of the entries."""
        cached, summed = self._cached_totals(tx), self._summed_totals(tx)
        if cached != summed:
            raise LedgerCorrupt(
                f"ledger {self.path} is inconsistent: its cached totals "
                f"{_totals_text(cached)} disagree with the sum of its spent entries "
                f"{_totals_text(summed)}; nothing was spent. " + VERIFY_HINT.format(path=self.path),
                path=self.path,
            )
        return cached

    @property
    def rule(self) -> str | None:
        """The currency this ledger charges in (:data:`dpkit.budget.CURRENCIES`); for a
        ``"best"`` ledger None until its first spend fixes it."""
        with self._store.guarded("reading the rule"), self._store.read() as tx:
            return self._rule(tx)

    def _rule(self, tx: Tx) -> str | None:
        if self.composition != "best":
            return self.composition
        row = tx.one("SELECT value FROM {meta} WHERE key = 'rule'")
        return str(row[0]) if row is not None and row[0] else None

    def _as_budget(self, totals: Totals, rule: str | None) -> Budget:
        """The totals in the currencies of ``rule`` (ε and δ always)."""
        return Budget(
            totals["epsilon"],
            totals["delta"],
            totals["rho"] if rule == "zcdp" else None,
            totals["mu2"] if rule == "gdp" else None,
        )

    def _remaining(self, spent: Budget, rule: str | None) -> Budget:
        """The budget less ``spent``, in the currencies of ``rule`` (all of them if None)."""
        b = self.budget
        rho = None if b.rho is None or rule not in ("zcdp", None) else b.rho - (spent.rho or 0)
        whole = filters.gdp_whole(b, spent.epsilon) if rule == "gdp" else b.mu2
        mu2 = None if whole is None or rule not in ("gdp", None) else whole - (spent.mu2 or 0)
        return Budget(b.epsilon - spent.epsilon, b.delta - spent.delta, rho, mu2)

    def _within_budget(self, totals: Totals, rule: str | None) -> bool:
        """The admission rule (:func:`dpkit.budget.admits`): whether spent totals fit the
        budget in the ledger's currency (basic: Σε ≤ ε and Σδ ≤ δ; zcdp: Σρ ≤ ρ; gdp:
        Σμ² ≤ μ², less what the first spend's pure ε took). A "best" ledger with no spend yet
        has spent nothing."""
        if rule is None:
            return all(value == 0 for value in totals.values())
        zero = Cost(Fraction(0), Fraction(0), Fraction(0), Fraction(0))
        return filters.admits(zero, _cost(totals), self.budget, rule)

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
        rows = [self._spend_row(request) for request in requests]
        if not rows:
            return []
        unit = self._batch_unit(requests)
        entries: list[LedgerEntry] = []
        with self._store.guarded("spending"), self._store.write() as tx:
            self._require_live(tx)
            fixes_unit = self._admit_unit(tx, unit)
            spent = self._checked_totals(tx)
            rule = self._rule(tx)
            costs = [entry.cost for entry, _ in rows]
            if rule is None:  # a "best" ledger's first spend (every other ledger has a rule)
                rule = filters.choose(costs, self.budget)
            # Only a first spend's own costs may be charged outright: a plan's are shares of
            # its joint ε, which bound no release's loss on every outcome.
            first = all(value == 0 for value in spent.values())
            first = first and not any(request.plan for request in requests)
            charged = filters.charge(costs, rule, self.budget, first=first)
            batch = filters.total(charged)
            if not filters.admits(_cost(spent), batch, self.budget, rule):
                raise BudgetExceeded(batch, self._remaining(self._as_budget(spent, rule), rule))
            if self.composition == "best":
                tx.run("UPDATE {meta} SET value = ? WHERE key = 'rule'", (rule,))
            if fixes_unit:
                tx.run("UPDATE {meta} SET value = ? WHERE key = 'unit'", (_unit_text(unit),))
            after = {t.name: spent[t.name] + _amount(batch, t) for t in TOTALS}
            for (entry, record), cost, request in zip(rows, charged, requests, strict=True):
                entry = attrs.evolve(entry, cost=cost, rule=filters.entry_rule(rule, request.plan))
                record.update(_amounts_record(cost), rule=entry.rule)
                columns = ", ".join(record)
                marks = ", ".join("?" for _ in record)
                seq = tx.insert(
                    f"INSERT INTO {{entries}} ({columns}) VALUES ({marks})", list(record.values())
                )
                entries.append(attrs.evolve(entry, seq=seq))
            self._write_totals(tx, after)
        return entries

    def _spend_row(self, request: SpendRequest) -> tuple[LedgerEntry, dict[str, Any]]:
        """A spend request checked and serialised (before the transaction): the entry it makes
        and its columns' stored values."""
        cost, label = request.cost, request.label
        if not isinstance(cost, Cost):
            raise InvalidParameter("cost", cost, "a dpkit.ledger.Cost", owner="Ledger.spend")
        for total in TOTALS:
            value = getattr(cost, total.name)
            if value is not None and not value >= 0:  # a negative cost would be a refund
                raise InvalidParameter(
                    "cost",
                    cost,
                    f"a cost with {total.name} >= 0 (got {value})",
                    owner="Ledger.spend",
                )
        if label is not None and not isinstance(label, str):
            raise InvalidParameter("label", label, "a string or None", owner="Ledger.spend")
        if not isinstance(request.unit, UnitIdentity):
            raise InvalidParameter(
                "unit", request.unit, "a dpkit.units.UnitIdentity", owner="Ledger.spend"
            )
        params_json = json.dumps(request.parameters, sort_keys=True, default=str)
        event_json = json.dumps(request.event, sort_keys=True, default=str)
        entry = LedgerEntry(
            0,
            uuid.uuid4().hex,
            _now(),
            request.session_id,
            self.dataset,
            request.mechanism,
            json.loads(params_json),
            json.loads(event_json),
            cost,
            request.randomness,
            "spent",
            label,
            unit=request.unit,
        )
        record: dict[str, Any] = {
            "release_id": entry.release_id,
            "time": entry.time,
            "session_id": entry.session_id,
            "dataset_id": entry.dataset_id,
            "mechanism": entry.mechanism,
            "parameters": params_json,
            "event": event_json,
            **_amounts_record(cost),
            "randomness": entry.randomness,
            "status": "spent",
            "label": label,
            "unit": _unit_text(request.unit),
        }
        if request.final:  # data are read next: a stored result makes abort refuse it
            entry = attrs.evolve(entry, result=json.loads(PENDING))
            record["result"] = PENDING
        return entry, record

    def _write_totals(self, tx: Tx, totals: Totals) -> None:
        tx.run_many(
            "UPDATE {meta} SET value = ? WHERE key = ?",
            [(fraction_text(totals[total.name]), total.key) for total in TOTALS],
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
        with self._store.guarded("storing a result"), self._store.write() as tx:
            self._require_live(tx)
            row = tx.one("SELECT status FROM {entries} WHERE release_id = ?", (release_id,))
            if row is None:
                raise LedgerError(
                    f"ledger {self.path} has no release {release_id!r}: a result can only be "
                    "stored for a release spent in this ledger",
                    path=self.path,
                )
            if row[0] != "spent":
                raise LedgerError(
                    f"release {release_id!r} in ledger {self.path} has status {row[0]!r}: a "
                    "result can only be stored for a spent release",
                    path=self.path,
                )
            tx.run("UPDATE {entries} SET result = ? WHERE release_id = ?", (text, release_id))

    def abort(self, release_id: str) -> None:
        """Give back a reservation made **before any private data were read**.

        Only for a spend whose release never started (e.g. another cost of an all-or-nothing
        batch did not fit): once data may have been read, the spend stands even if the
        mechanism raised, because an error or a refund can depend on the data. Marks the entry
        ``aborted``; a release whose result was stored cannot be aborted, nor a session's spend
        (:attr:`SpendRequest.final`: its data are read as soon as it commits). Unknown or
        already aborted ids are ignored.
        """
        names = ", ".join(total.name for total in TOTALS)
        with self._store.guarded("aborting a reservation"), self._store.write() as tx:
            self._require_live(tx)
            row = tx.one(
                f"SELECT {names}, result FROM {{entries}} WHERE release_id = ? AND status = 'spent'",
                (release_id,),
            )
            if row is None:
                return
            if row[-1] is not None:
                raise LedgerError(
                    f"release {release_id!r} in ledger {self.path} has a stored result: it was "
                    "released (or its data may have been read), and its spend cannot be given "
                    "back",
                    path=self.path,
                )
            cost = self._row_cost(
                dict(zip((t.name for t in TOTALS), row[:-1], strict=True)),
                where=f"release {release_id!r}",
            )
            spent = self._checked_totals(tx)
            tx.run("UPDATE {entries} SET status = 'aborted' WHERE release_id = ?", (release_id,))
            self._write_totals(tx, {t.name: spent[t.name] - _amount(cost, t) for t in TOTALS})

    # -- reading -----------------------------------------------------------------------------
    def spent(self) -> Budget:
        """What has been spent so far (the cached totals; :meth:`verify` checks them)."""
        with self._store.guarded("reading the totals"), self._store.read() as tx:
            return self._as_budget(self._cached_totals(tx), self._rule(tx))

    def remaining(self) -> Budget:
        """What is left of the budget (in the ledger's currency; every currency of a "best"
        ledger before its first spend)."""
        with self._store.guarded("reading the totals"), self._store.read() as tx:
            rule = self._rule(tx)
            return self._remaining(self._as_budget(self._cached_totals(tx), rule), rule)

    def entries(self) -> list[LedgerEntry]:
        """Every entry, in commit order."""
        with self._store.guarded("reading the entries"), self._store.read() as tx:
            return list(self._entries(tx))

    def _entries(self, tx: Tx) -> Iterator[LedgerEntry]:
        names = entry_column_names()
        for row in tx.rows(_SELECT_ENTRIES + " ORDER BY seq"):
            yield self._entry(dict(zip(names, row, strict=True)))

    def _release_counts(self) -> tuple[int, int]:
        """``(spent releases, those without a stored result)``, counted by the database (a
        result is not stored while NULL, JSON ``null`` or :data:`PENDING`, as
        :attr:`LedgerEntry.result_stored` says)."""
        with self._store.guarded("counting the releases"), self._store.read() as tx:
            row = tx.one(
                "SELECT count(*), COALESCE(SUM(CASE WHEN result IS NULL OR result IN ('null', ?)"
                " THEN 1 ELSE 0 END), 0) FROM {entries} WHERE status = 'spent'",
                (PENDING,),
            )
        assert row is not None
        return int(row[0]), int(row[1])

    def _status_counts(self) -> dict[str, int]:
        """The number of entries of each status (``spent``, ``aborted``), counted by the
        database (``dpkit budget show`` need not load every entry of a large ledger)."""
        with self._store.guarded("counting the releases"), self._store.read() as tx:
            return {
                str(status): int(n)
                for status, n in tx.rows("SELECT status, count(*) FROM {entries} GROUP BY status")
            }

    def _load(self, seq: Any, column: str, text: Any) -> Any:
        """A JSON column of entry ``seq``; :class:`LedgerCorrupt` if it does not parse."""
        if text is None:
            return None
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            raise LedgerCorrupt(
                f"ledger {self.path} has damaged {column} JSON in entry {seq}: "
                f"{text!r:.80}; " + VERIFY_HINT.format(path=self.path),
                path=self.path,
            ) from None

    def _entry(self, r: dict[str, Any]) -> LedgerEntry:
        def load(column: str) -> Any:
            return self._load(r["seq"], column, r[column])

        return LedgerEntry(
            int(r["seq"]),
            r["release_id"],
            r["time"],
            r["session_id"],
            r["dataset_id"],
            r["mechanism"],
            load("parameters"),
            load("event"),
            self._row_cost({t.name: r[t.name] for t in TOTALS}, where=f"entry {r['seq']}"),
            r["randomness"],
            r["status"],
            r["label"],
            load("result"),
            r["rule"],
            self._entry_unit(r["seq"], r["unit"]),
        )

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
        units: dict[UnitIdentity, Any] = {}
        with self._store.guarded("verifying"), self._store.snapshot() as tx:
            problem = self._store.integrity_problem(tx)
            if problem is not None:
                raise LedgerCorrupt(f"ledger {self.path} {problem}", path=self.path)
            cached = self._cached_totals(tx)
            costs = self._readable_costs(tx, units)
            rule = self._rule(tx)
            unit, mixed = self._read_unit(tx)
        summed, count = _zero(), 0
        for (status, amounts), (seq, times) in costs.items():
            cost = self._row_cost(dict(zip(_AMOUNTS, amounts, strict=True)), where=f"entry {seq}")
            if status == "spent":
                count += times
                for total in TOTALS:
                    summed[total.name] += _amount(cost, total) * times
        problems = []
        if cached != summed:
            problems.append(
                f"its cached totals {_totals_text(cached)} disagree with the sum of its "
                f"{count} spent entries {_totals_text(summed)}"
            )
        if not self._within_budget(summed, rule):
            problems.append(
                f"its spent entries {_totals_text(summed)} exceed the budget {self.budget}"
            )
        for found, seq in units.items():
            if found != unit:
                problems.append(
                    f"its entry {seq} protects the privacy unit {found!s}, but its budget is "
                    + ("for no privacy unit yet" if unit is None else f"for {unit!s}")
                )
        if problems:
            raise LedgerCorrupt(
                f"ledger {self.path} is inconsistent: " + "; ".join(problems), path=self.path
            )
        return self._as_budget(cached, rule), mixed

    def _readable_costs(
        self, tx: Tx, units: dict[UnitIdentity, Any]
    ) -> dict[tuple[Any, tuple[Any, ...]], list[Any]]:
        """Every entry's JSON checked; ``(status, amounts as stored) -> [first seq, count]``;
        ``units`` gets each privacy unit of a spent entry, with the first entry under it."""
        costs: dict[tuple[Any, tuple[Any, ...]], list[Any]] = {}
        parsed: dict[Any, UnitIdentity | None] = {}
        for batch in self._store.batches(tx, _SELECT_ENTRIES + " ORDER BY seq", _VERIFY_BATCH):
            for row in batch:
                for at, column in _JSON_AT:
                    self._load(row[0], column, row[at])
                key = (row[_STATUS_AT], tuple(row[at] for at in _AMOUNTS_AT))
                found = costs.get(key)
                if found is None:
                    costs[key] = [row[0], 1]
                else:
                    found[1] += 1
                text = row[_UNIT_AT]
                if text not in parsed:  # a few distinct texts: each parsed once
                    parsed[text] = self._entry_unit(row[0], text)
                unit = parsed[text]
                if unit is not None and row[_STATUS_AT] == "spent":
                    units.setdefault(unit, row[0])
        return costs

    def close(self) -> None:
        """Close this thread's connection."""
        self._store.close()


def _parse_fraction(text: Any) -> Fraction | None:
    """An exact fraction from its stored text (``"1/10"``), or None if it is not one."""
    if not isinstance(text, str):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _cost(totals: Totals) -> Cost:
    """Spent totals as a cost with every currency filled in."""
    return Cost(totals["epsilon"], totals["delta"], totals["rho"], totals["mu2"])


def _amounts_record(cost: Cost) -> dict[str, str | None]:
    """The stored text of each amount of ``cost`` (NULL where it has none)."""
    return {
        total.name: None if value is None else fraction_text(value)
        for total in TOTALS
        for value in [getattr(cost, total.name)]
    }


def _compact(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def _unit_text(unit: UnitIdentity) -> str:
    """A privacy unit as the ledger stores it (in its metadata and in each entry)."""
    return _compact(unit.describe())


def _named(request: SpendRequest) -> str:
    return "" if request.label is None else f" ({request.label!r})"


def _totals_text(totals: Totals) -> str:
    return ", ".join(f"{t.symbol}={exact_text(totals[t.name])}" for t in TOTALS)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")

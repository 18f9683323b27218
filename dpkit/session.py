"""Budget-tracked sessions: check, commit, then release.

>>> import numpy as np, dpkit
>>> session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:", dataset="survey")
>>> rr = dpkit.mechanism("rr", epsilon=0.1)
>>> for _ in range(10):
...     release = session.release(rr, np.array([0, 1, 1]), rng=np.random.default_rng(1))
>>> session.remaining.epsilon
Fraction(0, 1)

A release goes through two phases (``docs/security.md``, "The privacy boundary"):

1. **public phase** — nothing here reads a private value. The target and the randomness are
   checked, the input's *structure* (a ragged list, the number of dimensions, the dtype kind;
   :meth:`Mechanism.check_input <dpkit.mechanism.Mechanism.check_input>`) is checked, the
   number of releases one call makes is read from the input's shape
   (:meth:`~dpkit.mechanism.Mechanism.releases`: R selections cost R times), the privacy unit
   the target protects is read (:func:`dpkit.units.unit_of`) and must be the ledger's (a
   budget is for one privacy unit: :class:`~dpkit.ledger.UnitMismatch`), and the exact cost
   is checked against the ledger's remaining budget and committed durably in one write
   transaction of the ledger (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a row lock). Any
   failure here is a typed error and nothing is spent; :class:`~dpkit.errors.BudgetExceeded`
   comes before any randomness.
2. **private phase** — only after the commit is the input mapped into the declared domain,
   record by record (:meth:`~dpkit.mechanism.Mechanism.coerce`), and the mechanism or query
   run. Built-in targets are total here: they never raise because of what the data contain.
   If a (third-party) target raises anyway, the spend is **kept** and
   :class:`~dpkit.errors.ReleaseFailed` is raised with a message that does not depend on the
   data: a spend is never given back once private data were read, so a failing release cannot
   be repeated for free to learn about the data. The released result is stored with its
   ledger entry, so nothing released is lost.

:class:`Deferred` data (a loader called only in the private phase) let a planned batch — the
queries of a JSON spec — be charged all or nothing before any of its data are read.

Composition rules (``composition=``; the filters and their sources are in :mod:`dpkit.filters`).
A session is fully adaptive — each release's parameters, and whether to go on, may depend on
earlier outputs — so each rule is a *privacy filter* proven valid for that:

``"basic"`` (the default)
    Σ ε_i ≤ ε and Σ δ_i ≤ δ, in exact rationals (Rogers, Roth, Ullman & Vadhan 2016,
    Section 5; Whitehouse, Ramdas, Rogers & Wu 2023).
``"zcdp"``
    Σ ρ_i ≤ ρ_B, the Rényi filter of Feldman & Zrnic 2021 at every order. Pure ε costs
    ε·tanh(ε/2), Laplace ε + e^{−ε} − 1, an ε-bounded-range event ε²/8, a Gaussian 1/(2σ²)
    (:mod:`dpkit.accounting.zcdp`); an (ε, δ) event is refused.
``"gdp"``
    Σ μ_i² ≤ μ_B², the Gaussian-DP filter of Smith & Thakurta 2022: a Gaussian costs exactly
    1/σ², so k Gaussian releases are charged exactly their joint ε (ten releases of
    ``gaussian(ε=0.5, δ=1e-6)`` cost ε = 1.52 at δ = 1e-5, not 5; a (5, 1e-5) budget admits 81
    of them, where zCDP admits 71); a pure ε event costs the smallest dominating μ
    (:mod:`dpkit.accounting.gdp`); an (ε, δ) event is refused.
``"best"``
    The rule that charges the *first* spend the smallest share of the budget, fixed from then
    on and recorded in every entry. It is chosen from public values before any private output
    exists, so the session is one of the valid filters above; switching later, or admitting
    when either of two filters would, is not valid (:mod:`dpkit.filters`).

A *declared plan* — a list given to :meth:`Session.release_all` — has every parameter fixed
before any data are read, so it is one non-adaptive mechanism: under ``"basic"`` it is charged
as one (ε, δ) event, its δ the sum of its releases' δ and its ε the tight composition of all of
them (:func:`dpkit.accounting.account`, the privacy-loss distribution of the whole plan), never
more than Σε_i. A JSON spec is such a plan.

Randomness: ``rng=None`` (the default) is secure mode, dpkit's ChaCha20 source
(:class:`dpkit.SecureRandom`); a ``numpy.random.Generator`` is fast mode, seedable and not
attack-resistant. The ledger records the mode of every release: ``"secure"``, ``"fast"``, or
``"keyed"`` for a :class:`dpkit.SecureRandom` made by ``SecureRandom.from_key`` (secure mode's
samplers on a reproducible stream: for tests, never for real releases).
A mechanism without a secure sampler would refuse secure mode with a typed error; every
built-in mechanism has one (report-noisy-max with Laplace noise runs with exact discrete
Laplace noise on a lattice).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import uuid
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit import filters
from dpkit.accounting import account, event_cost, event_mu2, event_rho, exact, zcdp_rho_for
from dpkit.accounting._common import ceil_decimal
from dpkit.accounting.gdp import gdp_budget
from dpkit.errors import DPKitError, InvalidData, InvalidParameter, ReleaseFailed
from dpkit.ledger import Budget, Cost, Ledger, LedgerEntry, SpendRequest
from dpkit.mechanism import Mechanism
from dpkit.privacy import PrivacyEvent
from dpkit.randomness import resolve_rng
from dpkit.units import UnitIdentity, unit_of

__all__ = ["Deferred", "Query", "Release", "Session"]


@runtime_checkable
class Query(Protocol):
    """Anything a session can release: a ``privacy`` event and ``run(data, /, *, rng)``."""

    @property
    def privacy(self) -> PrivacyEvent: ...

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Any: ...


@attrs.frozen
class Release:
    """A released result and its committed ledger entry."""

    values: Any
    entry: LedgerEntry

    @property
    def release_id(self) -> str:
        return self.entry.release_id

    @property
    def cost(self) -> Cost:
        return self.entry.cost


def _event_record(event: PrivacyEvent) -> dict[str, Any]:
    record: dict[str, Any] = {"type": type(event).name}
    if attrs.has(type(event)):
        for field in attrs.fields(type(event)):  # type: ignore[arg-type]
            value = getattr(event, field.name)
            if isinstance(value, PrivacyEvent):
                value = _event_record(value)
            elif isinstance(value, tuple) and all(isinstance(v, PrivacyEvent) for v in value):
                value = [_event_record(v) for v in value]  # a composite's parts
            record[field.name] = value
    return record


def _parameters(target: Any) -> dict[str, Any]:
    """The target's public attrs fields, nested values (a table query's statistic and privacy
    unit) as JSON-ready dicts, so the ledger records them structurally."""
    if attrs.has(type(target)):
        return {
            f.name: _jsonable(getattr(target, f.name))
            for f in attrs.fields(type(target))
            if not f.name.startswith("_")
        }
    return {}


def _as_budget(budget: Any) -> Budget:
    if isinstance(budget, Budget):
        return budget
    try:
        epsilon, delta = budget
    except (TypeError, ValueError):
        raise InvalidParameter(
            "budget", budget, "a pair (epsilon, delta)", owner="Session"
        ) from None
    eps, d = exact(epsilon), exact(delta)
    if eps < 0:
        raise InvalidParameter("budget", budget, "a pair with epsilon >= 0", owner="Session")
    if not 0 <= d < 1:
        raise InvalidParameter("budget", budget, "a pair with 0 <= delta < 1", owner="Session")
    return Budget(eps, d)


def _with_currencies(full: Budget, composition: str | None, given: Any) -> Budget:
    """The budget in the currencies the rule needs: ρ_B (the largest ρ whose CKS20
    conversion meets it) for zCDP, μ_B² (the largest μ² whose Gaussian-DP profile meets it)
    for GDP, both for "best" (where δ > 0; with δ = 0 only basic composition can meet it)."""
    rho = full.rho if composition in ("zcdp", "best") else None
    mu2 = full.mu2 if composition in ("gdp", "best") else None
    if composition in ("zcdp", "gdp") and full.delta == 0:
        raise InvalidParameter(
            "budget", given, f"a pair with delta > 0 for {composition} composition", owner="Session"
        )
    if full.delta > 0 and composition in ("zcdp", "best") and rho is None:
        rho = exact(zcdp_rho_for(float(full.epsilon), float(full.delta)))
    if full.delta > 0 and composition in ("gdp", "best") and mu2 is None:
        mu2 = gdp_budget(full.epsilon, full.delta)
    return Budget(full.epsilon, full.delta, rho, mu2)


@attrs.frozen
class Deferred:
    """Input data read only in the private phase, after the spend.

    ``load()`` is called once, after every cost of the batch is committed; it must be total
    (never raise because of what the data contain). ``releases`` is the number of releases the
    target makes on it, known without reading it (1 for a column of records).
    """

    load: Callable[[], Any]
    releases: int = 1


#: Results larger than this (as JSON) are stored in the ledger as a digest, not in full.
MAX_STORED_RESULT = 1 << 20


@attrs.frozen
class _Prepared:
    """A release after its public phase: everything needed to charge and run it."""

    target: Any
    data: Any
    run: Any
    generator: Any
    mode: str
    releases: int
    label: str | None
    unit: UnitIdentity = attrs.field(factory=lambda: UnitIdentity("record"))


def _structure(data: Any, owner: str) -> Any:
    """The input as an array, refusing only what its *structure* makes unusable.

    A ragged nested list cannot be an array of records; that is decided by the container's
    shape, never by a value, so it is a public-phase error. Objects that are not sequences
    (a DataFrame, a query's own input type) are passed through unchanged.
    """
    if isinstance(data, np.ndarray) or not isinstance(data, (list, tuple)):
        return data
    # An object array: its dtype must not depend on the values (numpy would infer text for a
    # list holding one string, and a session must not refuse that for free); each record is
    # then converted on its own, in the private phase. Nested lists of equal lengths still
    # make rows (e.g. utilities of shape (R, m)); a ragged one becomes a 1-D array of records.
    try:
        return np.array(data, dtype=object)
    except ValueError:
        records = np.empty(len(data), dtype=object)
        records[:] = list(data)
        return records


def _jsonable(value: Any) -> Any:
    """A JSON-ready form of a released value (arrays as lists, attrs values as dicts)."""
    if isinstance(value, PrivacyEvent):
        return _event_record(value)
    if attrs.has(type(value)):
        return {
            f.name: _jsonable(getattr(value, f.name))
            for f in attrs.fields(type(value))
            if not f.name.startswith("_")
        }
    if isinstance(value, np.ndarray):
        if value.nbytes > MAX_STORED_RESULT:  # e.g. millions of local reports: never list them
            return _digest(value)
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Fraction):
        return str(value)
    return value


def _digest(array: NDArray[Any]) -> dict[str, Any]:
    """A large array as its shape, dtype and the SHA-256 of its bytes (C order)."""
    data = np.ascontiguousarray(array)
    # Hash the buffer itself: no copy of millions of reports.
    raw = data.data.cast("B") if data.dtype != object else repr(data.tolist()).encode()
    digest = hashlib.sha256(raw)
    return {
        "stored": "digest",
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "sha256": digest.hexdigest(),
    }


def stored_result(value: Any) -> Any:
    """What the ledger keeps of a released value: the value itself, or, for an array over
    :data:`MAX_STORED_RESULT` bytes (e.g. millions of local reports) or a document over that
    size as JSON, its shape or size and SHA-256."""
    document = _jsonable(value)
    text = json.dumps(document, default=str, allow_nan=True)
    if len(text) <= MAX_STORED_RESULT:
        return document
    return {
        "stored": "digest",
        "bytes": len(text),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


class Session:
    """Releases against a privacy budget recorded in a durable :class:`~dpkit.ledger.Ledger`.

    ``budget`` is ``(epsilon, delta)`` (exact: ten costs of 0.1 fit 1.0). ``ledger`` is a path,
    a ``sqlite:///PATH`` URL, ``":memory:"`` (a ledger that lives as long as the session), or
    a ``postgresql://USER@HOST/DATABASE?ledger=NAME`` URL (a budget that many hosts share).
    ``composition`` is ``"basic"`` (default), ``"zcdp"``, ``"gdp"`` or ``"best"`` (see the
    module docstring for why each is a valid filter of a fully adaptive session). ``unit`` is
    the privacy unit the budget is for (``"record"``, a :class:`~dpkit.RecordUnit` or an
    :class:`~dpkit.IdUnit`: its id column, not its bounds): fixed when the ledger is created,
    and otherwise by its first spend; a release under another unit is refused before anything
    is spent (:class:`~dpkit.ledger.UnitMismatch`). Opening an existing ledger checks that
    ``dataset``, ``budget``, ``composition`` and ``unit`` agree with it; without them, they
    are read from the ledger.
    """

    def __init__(
        self,
        budget: tuple[float, float] | Budget | None = None,
        ledger: str | os.PathLike[str] = ":memory:",
        *,
        dataset: str | None = None,
        composition: Literal["basic", "zcdp", "gdp", "best"] | None = None,
        unit: Any = None,
    ):
        if composition is not None and composition not in filters.RULES:
            raise InvalidParameter(
                "composition", composition, "one of " + ", ".join(filters.RULES), owner="Session"
            )
        full = None
        if budget is not None:
            full = _with_currencies(_as_budget(budget), composition, budget)
        self.ledger = Ledger(
            ledger, dataset=dataset, budget=full, composition=composition, unit=unit
        )
        self.session_id = uuid.uuid4().hex

    @property
    def budget(self) -> Budget:
        return self.ledger.budget

    @property
    def composition(self) -> str:
        return self.ledger.composition

    @property
    def dataset(self) -> str:
        return self.ledger.dataset

    @property
    def spent(self) -> Budget:
        return self.ledger.spent()

    @property
    def unit(self) -> UnitIdentity | None:
        """The privacy unit the ledger's budget is for; None until fixed (its first spend)."""
        return self.ledger.unit

    @property
    def rule(self) -> str | None:
        """The currency the ledger charges in; for ``"best"``, None until the first spend."""
        return self.ledger.rule

    @property
    def remaining(self) -> Budget:
        """What is left: (ε, δ) under basic composition; ρ or μ² (and the full ε, δ) under
        zCDP or Gaussian DP."""
        return self.ledger.remaining()

    def cost(self, event: PrivacyEvent, releases: int = 1) -> Cost:
        """The exact cost of ``releases`` independent releases of ``event`` in every currency
        it has — basic composition adds ε and δ (Dwork & Roth 2014, Theorem 3.16), zCDP adds ρ
        (Bun & Steinke 2016, Lemma 2.3), Gaussian DP adds μ² (Dong, Roth & Su 2022,
        Corollary 3.3) — charged in the ledger's currency once it is known."""
        full = self._full_cost(event, releases)
        rule = self.rule
        return full if rule is None else filters.project(full, rule)

    @staticmethod
    def _full_cost(event: Any, releases: int) -> Cost:
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameter("privacy", event, "a dpkit.privacy event", owner="Session")
        epsilon, delta = event_cost(event)
        rho = mu2 = None
        with contextlib.suppress(DPKitError):  # no ρ (an (ε, δ) event): not under zCDP
            rho = releases * event_rho(event)
        with contextlib.suppress(DPKitError):  # no μ: not under Gaussian DP
            mu2 = releases * event_mu2(event)
        return Cost(releases * epsilon, releases * delta, rho, mu2)

    def admits(self, costs: Sequence[Cost]) -> tuple[bool, Cost, Budget]:
        """Whether spends of ``costs`` (e.g. :meth:`plan_costs`) would fit now, what they
        would be charged in the ledger's currency (for "best" before the first spend: the one
        it would choose), and what is left — a public-phase preview; the ledger's own check at
        the spend is the one that counts. Raises InvalidParameter for an event the currency
        cannot charge."""
        rule = self.rule
        if rule is None:
            rule = filters.choose(filters.total(list(costs)), self.budget)
        charged = filters.total([filters.project(c, rule) for c in costs])
        budget, spent, zero = self.budget, self.spent, Fraction(0)
        spent_cost = Cost(spent.epsilon, spent.delta, spent.rho or zero, spent.mu2 or zero)
        remaining = Budget(
            budget.epsilon - spent.epsilon,
            budget.delta - spent.delta,
            budget.rho - (spent.rho or zero) if rule == "zcdp" and budget.rho else None,
            budget.mu2 - (spent.mu2 or zero) if rule == "gdp" and budget.mu2 else None,
        )
        return filters.admits(spent_cost, charged, budget, rule), charged, remaining

    def plan_costs(self, items: Sequence[tuple[PrivacyEvent, int]]) -> list[Cost]:
        """The costs of a declared plan (``(event, releases)`` per item), as
        :meth:`release_all` charges them: each item's own costs, and under basic composition
        the plan's ε shared among the items in proportion to their ε (module docstring)."""
        costs = [self._full_cost(event, releases) for event, releases in items]
        if len(costs) < 2:
            return costs
        epsilon = sum((c.epsilon for c in costs), Fraction(0))
        delta = sum((c.delta for c in costs), Fraction(0))
        if epsilon == 0 or delta >= 1:
            return costs
        at = float(delta)
        if Fraction(at) > delta:  # the float nearest Σδ may be above it: ask at most Σδ
            at = math.nextafter(at, 0.0)
        try:
            tight = account(list(items), delta=at).epsilon
        except DPKitError:
            return costs
        if not tight < float(epsilon):
            return costs
        scale = min(ceil_decimal(tight), epsilon) / epsilon
        return [attrs.evolve(c, epsilon=c.epsilon * scale) for c in costs]

    def release(
        self,
        target: Mechanism | Query,
        data: Any,
        /,
        *,
        rng: np.random.Generator | None = None,
        label: str | None = None,
    ) -> Release:
        """Check and commit the cost of ``target`` on ``data``, then run it (see the module
        docstring for the two phases).

        ``target`` is a :class:`~dpkit.mechanism.Mechanism` (released as
        ``target.randomize(target.coerce(data), rng=rng)``) or a query with ``privacy`` and
        ``run(data, /, *, rng)``. ``label`` names the release in the ledger. Raises, with
        nothing spent, :class:`~dpkit.errors.BudgetExceeded` (before any randomness is drawn)
        or a typed error for a structural problem of the input; raises
        :class:`~dpkit.errors.ReleaseFailed`, with the spend kept, if the target fails after.
        """
        prepared = self._prepare(target, data, rng, label)
        entry = self._commit(prepared)
        return self._execute(prepared, entry)

    def release_all(self, items: Sequence[tuple[Any, ...]], /) -> list[Release]:
        """Release several targets, charged all or nothing before any of them runs.

        Each item is ``(target, data, rng)`` or ``(target, data, rng, label)``; ``data`` may be
        :class:`Deferred`, read only after every cost is committed. The list is a declared
        plan: its parameters are fixed before any data are read, so under basic composition it
        is charged its tight joint ε (:meth:`plan_costs`; each entry's rule is
        ``"basic-plan"``). If the plan does not fit, nothing is written and
        :class:`~dpkit.errors.BudgetExceeded` is raised. Once the batch is committed, a target
        that fails raises :class:`~dpkit.errors.ReleaseFailed` with every spend of the batch
        kept. Every item must protect the same privacy unit, the ledger's: a plan that mixes
        units is refused whole (:class:`~dpkit.ledger.UnitMismatch`), nothing spent.
        """
        prepared = [
            self._prepare(item[0], item[1], item[2], item[3] if len(item) > 3 else None)
            for item in items
        ]
        costs = self.plan_costs([(one.target.privacy, one.releases) for one in prepared])
        plan = len(prepared) > 1
        requests = [
            attrs.evolve(self._request(one), cost=cost, plan=plan)
            for one, cost in zip(prepared, costs, strict=True)
        ]
        entries = self.ledger.spend_all(requests)
        return [self._execute(one, entry) for one, entry in zip(prepared, entries, strict=True)]

    def _prepare(self, target: Any, data: Any, rng: Any, label: str | None) -> _Prepared:
        """The public phase of one release: nothing here reads a private value."""
        run = self._runner(target)
        if not isinstance(target.privacy, PrivacyEvent):
            raise InvalidParameter(
                "privacy", target.privacy, "a dpkit.privacy event", owner="Session"
            )
        if label is not None and not isinstance(label, str):
            raise InvalidParameter("label", label, "a string or None", owner="Session.release")
        generator, mode = resolve_rng(rng, owner="Session.release")
        owner = str(getattr(target, "name", type(target).__name__))
        if isinstance(data, Deferred):
            releases = data.releases
            if isinstance(releases, bool) or not isinstance(releases, int):
                raise InvalidParameter(
                    "releases", releases, "a whole number >= 1", owner="Deferred"
                )
        else:
            data = _structure(data, owner)
            check = getattr(target, "check_input", None)
            if check is not None:
                check(data)
            count = getattr(target, "releases", None)
            releases = int(count(data)) if count is not None else 1
        if releases < 1:
            raise InvalidData(
                f"{owner}: the input holds no release (shape without records)", field="data"
            )
        unit = unit_of(target).identity
        return _Prepared(target, data, run, generator, str(mode), releases, label, unit)

    def _commit(self, prepared: _Prepared) -> LedgerEntry:
        """Check and durably commit the cost (BudgetExceeded if it does not fit)."""
        return self.ledger.spend_all([self._request(prepared)])[0]

    def _request(self, prepared: _Prepared) -> SpendRequest:
        """The ledger spend of one prepared release: its exact cost and what to record."""
        target = prepared.target
        event = _event_record(target.privacy)
        if prepared.releases != 1:
            event["releases"] = prepared.releases
        return SpendRequest(
            self._full_cost(target.privacy, prepared.releases),
            mechanism=str(getattr(target, "name", type(target).__name__)),
            parameters=_parameters(target),
            event=event,
            session_id=self.session_id,
            randomness=prepared.mode,
            label=prepared.label,
            final=True,  # the private phase follows the commit: never abortable
            unit=prepared.unit,
        )

    def _execute(self, prepared: _Prepared, entry: LedgerEntry) -> Release:
        """The private phase: load, coerce into the domain, run; the spend is never given back."""
        target = prepared.target
        name = str(getattr(target, "name", type(target).__name__))
        try:
            data = prepared.data
            if isinstance(data, Deferred):
                data = _structure(data.load(), name)
                # What was charged must be what runs: a loader that returns more releases than
                # it declared (a batch of selections) fails closed, with the spend kept.
                check = getattr(target, "check_input", None)
                if check is not None:
                    check(data)
                count = getattr(target, "releases", None)
                if (int(count(data)) if count is not None else 1) != prepared.releases:
                    raise ValueError("the loaded data hold another number of releases")
            if isinstance(target, Mechanism):
                data = target.coerce(np.asarray(data), rng=prepared.generator)
            values = prepared.run(data, rng=prepared.generator)
        except (KeyboardInterrupt, SystemExit):
            raise  # the spend stays committed; the ledger is consistent
        except BaseException:
            # The exception's type and message may depend on the data: withhold both.
            raise ReleaseFailed(name, entry.release_id) from None
        # A failed copy must not lose the release itself: the caller still gets it, and the
        # ledger keeps the spend either way.
        with contextlib.suppress(Exception):
            self.ledger.record_result(entry.release_id, stored_result(values))
        return Release(values, entry)

    @staticmethod
    def _runner(target: Any) -> Any:
        if isinstance(target, Mechanism):
            return target.randomize
        if callable(getattr(target, "run", None)) and hasattr(target, "privacy"):
            return target.run
        raise InvalidParameter(
            "target",
            target,
            "a Mechanism or an object with privacy and run(data, /, *, rng)",
            owner="Session.release",
        )

    def history(self) -> list[LedgerEntry]:
        """Every entry of the ledger (all sessions), in commit order."""
        return self.ledger.entries()

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

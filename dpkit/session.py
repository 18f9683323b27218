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

Composition rules (``composition=``; the filters and their sources are in :mod:`dpkit.budget`).
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
    (:mod:`dpkit.accounting.gdp`; Laplace its own, smaller one), or, in the ledger's first
    spend, its ε outright where that is cheaper, the rest of the budget then being (ε − that
    ε, δ) (:func:`dpkit.budget.charge`); an (ε, δ) event is refused.
``"best"``
    The rule that charges the *first* spend the smallest share of the budget (the one that
    would admit the most spends like it), fixed from then on and recorded in every entry. It
    is chosen from public values before any private output exists, so the session is one of
    the valid filters above; switching later, or admitting when either of two filters would,
    is not valid (:mod:`dpkit.budget`).

A *declared plan* — a list given to :meth:`Session.release_all` — has every parameter fixed
before any data are read, so it is one non-adaptive mechanism: under ``"basic"`` it is charged
as one (ε, δ) event, its δ the sum of its releases' δ and its ε the tight composition of all of
them (:func:`dpkit.accounting.account`, the privacy-loss distribution of the whole plan), never
more than Σε_i. A JSON spec is such a plan. It is priced once (:meth:`Session.price`,
:mod:`dpkit.pricing`), checked, and charged at that price (``release_all(..., priced=)``).

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
import os
import uuid
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import numpy as np

from dpkit import budget as filters  # the privacy filters: admits, choose, project, total
from dpkit import union_filter
from dpkit.budget import Budget, Cost
from dpkit.errors import InvalidData, InvalidParameter, ReleaseFailed
from dpkit.ledger import Ledger, LedgerEntry, SpendRequest
from dpkit.ledger._results import event_record, jsonable, stored_result
from dpkit.ledger._totals import union_remaining
from dpkit.mechanism import Mechanism
from dpkit.pricing import Overflow, PricedPlan, first_overflow, full_cost, price_plan
from dpkit.privacy import PrivacyEvent, neighbours
from dpkit.randomness import resolve_rng
from dpkit.tensors.libraries import array_library
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

    def __str__(self) -> str:
        """The values as they print (a released table with its intervals), then the release's
        id and cost."""
        cost = self.cost
        return (
            f"{self.values}\n(release {self.release_id}: ε={float(cost.epsilon):g}, "
            f"δ={float(cost.delta):g})"
        )


def _nothing_spent(spent: Budget) -> bool:
    """Whether a ledger has spent nothing yet, in any currency (its next spend is its first)."""
    return not (spent.epsilon or spent.delta or spent.rho or spent.mu2)


def _parameters(target: Any) -> dict[str, Any]:
    """The target's public attrs fields, nested values (a table query's statistic and privacy
    unit) as JSON-ready dicts, so the ledger records them structurally."""
    if attrs.has(type(target)):
        return {
            f.name: jsonable(getattr(target, f.name))
            for f in attrs.fields(type(target))
            if not f.name.startswith("_")
        }
    return {}


@attrs.frozen
class Deferred:
    """Input data read only in the private phase, after the spend.

    ``load()`` is called once, after every cost of the batch is committed; it must be total
    (never raise because of what the data contain). ``releases`` is the number of releases the
    target makes on it, known without reading it (1 for a column of records).
    """

    load: Callable[[], Any]
    releases: int = 1


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
    (a DataFrame, a query's own input type) are passed through unchanged. An accelerator's
    array (a CUDA tensor) is refused from its type and device alone, before the spend: the
    private phase reads host memory.
    """
    library = array_library(data, owner=owner, field="data")
    if library is not None:  # another library's array: where it lives is public
        if not library.on_host:
            raise InvalidData(
                f"{owner}: data is a {library.name} array on {library.device}; a session "
                "reads arrays in host memory (e.g. tensor.cpu()); mechanisms called directly "
                "take device arrays",
                field="data",
            )
        return library.host_view(data)  # a torch CPU tensor: a zero-copy numpy view
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
            full = filters.with_currencies(filters.as_budget(budget), composition, budget)
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
        full = full_cost(event, releases)
        rule = self.rule
        if rule is None or self.ledger.union is not None:  # a union charges full costs
            return full
        return filters.charge([full], rule, self.budget, first=_nothing_spent(self.spent))[0]

    def admits(self, costs: Sequence[Cost]) -> tuple[bool, Cost, Budget]:
        """Whether spends of ``costs`` (e.g. :meth:`plan_costs`) would fit now, what they
        would be charged in the ledger's currency (for "best" before the first spend: the one
        it would choose), and what is left — a public-phase preview; the ledger's own check at
        the spend is the one that counts. Raises InvalidParameter for an event the currency
        cannot charge."""
        rule = self.rule
        costs = list(costs)
        plan = len(costs) > 1  # release_all charges several items as a plan
        union = self.ledger.union
        if rule is None and self.ledger.composition == "best":
            union = union_filter.start(costs, self.budget, plan=plan)
        if union is not None:
            return self._union_admits(costs, plan, union)
        if rule is None:
            rule = filters.choose(costs, self.budget)
        budget, spent, zero = self.budget, self.spent, Fraction(0)
        first = _nothing_spent(spent) and not plan
        charged = filters.total(filters.charge(costs, rule, budget, first=first))
        spent_cost = Cost(spent.epsilon, spent.delta, spent.rho or zero, spent.mu2 or zero)
        whole = filters.gdp_whole(budget, spent.epsilon) if rule == "gdp" else None
        remaining = Budget(
            budget.epsilon - spent.epsilon,
            budget.delta - spent.delta,
            budget.rho - (spent.rho or zero) if rule == "zcdp" and budget.rho else None,
            whole - (spent.mu2 or zero) if whole is not None else None,
        )
        return filters.admits(spent_cost, charged, budget, rule), charged, remaining

    def _union_admits(
        self, costs: list[Cost], plan: bool, union: union_filter.Union
    ) -> tuple[bool, Cost, Budget]:
        """:meth:`admits` for a union ledger (:mod:`dpkit.union_filter`): full costs, and
        what is left of its main filter."""
        union_filter.check_chargeable(costs, union, plan=plan)
        streams = self.ledger.streams()
        for cost in costs:
            streams = streams.plus(cost, plan=plan)
        fits = union_filter.admits(streams, self.budget, union)
        spent = self.spent
        return fits, filters.total(costs), union_remaining(self.budget, spent, union)

    def plan_costs(self, items: Sequence[tuple[PrivacyEvent, int]]) -> list[Cost]:
        """The costs of a declared plan (``(event, releases)`` per item), as
        :meth:`release_all` charges them: each item's own costs, and under basic composition
        the plan's ε shared among the items in proportion to their ε (module docstring)."""
        return list(price_plan(items).costs)

    def price(self, items: Sequence[tuple[PrivacyEvent, int]]) -> PricedPlan:
        """A declared plan priced once (:func:`dpkit.pricing.price_plan`), to check with
        :meth:`admits` or :meth:`overflow` and then hand to :meth:`release_all`."""
        return price_plan(items)

    def overflow(self, priced: PricedPlan) -> Overflow | None:
        """The first item of ``priced`` whose prefix does not fit now (what that prefix would
        be charged, and what is left), or None if the whole plan fits — a public-phase preview
        (:func:`dpkit.pricing.first_overflow`)."""
        rule = None if self.ledger.union is not None else self.rule  # compose every prefix
        return first_overflow(priced, self.admits, rule)

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

    def release_all(
        self,
        items: Sequence[tuple[Any, ...]],
        /,
        *,
        priced: PricedPlan | None = None,
        document: Callable[[int, Release], Any] | None = None,
    ) -> list[Release]:
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

        ``priced`` is the plan's price if the caller already has it (:meth:`price`): it must
        be the price of these items' events, costs and total included (a price of other
        events, or with other costs, is refused with :class:`~dpkit.errors.InvalidParameter`
        before any data are read, nothing spent), and is charged without composing the plan
        again (the last prices made are kept: :func:`dpkit.pricing.price_plan`); the ledger
        still checks it against its state when it commits. ``document(index,
        release)`` is what the ledger keeps of each release (by default
        :func:`stored_result` of its values); it is stored once, with the release, and a
        failure to store it is raised (the default's is not: the caller has the values).
        """
        prepared = [
            self._prepare(item[0], item[1], item[2], item[3] if len(item) > 3 else None)
            for item in items
        ]
        events = tuple((one.target.privacy, one.releases) for one in prepared)
        price = price_plan(events)  # kept from the caller's own pricing: no composition again
        if priced is not None and priced != price:  # other events, or costs not the plan's
            raise InvalidParameter(
                "priced",
                priced,
                "the price of these items' events, as Session.price gives it",
                owner="Session.release_all",
            )
        plan = len(prepared) > 1
        requests = [
            attrs.evolve(self._request(one), cost=cost, plan=plan)
            for one, cost in zip(prepared, price.costs, strict=True)
        ]
        entries = self.ledger.spend_all(requests)
        return [
            self._execute(one, entry, None if document is None else partial(document, index))
            for index, (one, entry) in enumerate(zip(prepared, entries, strict=True))
        ]

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
        # who is protected, and how neighbours differ (a replace-one guarantee and an
        # add/remove one never share a budget: dpkit.privacy.neighbours)
        unit = attrs.evolve(unit_of(target).identity, neighbours=neighbours(target.privacy))
        return _Prepared(target, data, run, generator, str(mode), releases, label, unit)

    def _commit(self, prepared: _Prepared) -> LedgerEntry:
        """Check and durably commit the cost (BudgetExceeded if it does not fit)."""
        return self.ledger.spend_all([self._request(prepared)])[0]

    def _request(self, prepared: _Prepared) -> SpendRequest:
        """The ledger spend of one prepared release: its exact cost and what to record."""
        target = prepared.target
        event = event_record(target.privacy)
        if prepared.releases != 1:
            event["releases"] = prepared.releases
        return SpendRequest(
            full_cost(target.privacy, prepared.releases),
            mechanism=str(getattr(target, "name", type(target).__name__)),
            parameters=_parameters(target),
            event=event,
            session_id=self.session_id,
            randomness=prepared.mode,
            label=prepared.label,
            final=True,  # the private phase follows the commit: never abortable
            unit=prepared.unit,
        )

    def _execute(
        self,
        prepared: _Prepared,
        entry: LedgerEntry,
        document: Callable[[Release], Any] | None = None,
    ) -> Release:
        """The private phase: load, coerce into the domain, run; the spend is never given back.
        The ledger keeps ``document(release)``, or by default :func:`stored_result` of it."""
        target = prepared.target
        name = str(getattr(target, "name", type(target).__name__))
        failed = False
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
            failed = True  # its type, message and traceback may depend on the data
        if failed:
            # Raised outside the handler, so that the error does not carry the failure as its
            # context (``from None`` would only hide it from printed tracebacks): withheld.
            raise ReleaseFailed(name, entry.release_id)
        release = Release(values, entry)
        if document is None:
            self._keep(entry.release_id, lambda: stored_result(values))
            return release
        try:
            kept = document(release)
        except Exception:
            self._keep(entry.release_id, lambda: stored_result(values))  # its values, at least
            raise
        # The caller's document is its record of the release: a failure to store it is raised.
        self.ledger.record_result(entry.release_id, kept)
        return release

    def _keep(self, release_id: str, result: Callable[[], Any]) -> None:
        """Store a release's result with its entry, once. A failed copy must not lose the
        release itself: the caller still gets it, and the ledger keeps the spend either way."""
        with contextlib.suppress(Exception):
            self.ledger.record_result(release_id, result())

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

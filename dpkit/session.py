"""Budget-tracked sessions: check, commit, then release.

>>> import numpy as np, dpkit
>>> session = dpkit.Session(budget=(1.0, 0.0), ledger=":memory:", dataset="survey")
>>> rr = dpkit.mechanism("rr", epsilon=0.1)
>>> for _ in range(10):
...     release = session.release(rr, np.array([0, 1, 1]), rng=np.random.default_rng(1))
>>> session.remaining.epsilon
Fraction(0, 1)

A release goes through three steps, in this order:

1. **check** — the cost of the target (its ``privacy`` event) is computed exactly and checked
   against the ledger's remaining budget inside one ``BEGIN IMMEDIATE`` transaction; if it does
   not fit, :class:`~dpkit.errors.BudgetExceeded` is raised and no randomness has been drawn;
2. **commit** — in the same transaction the entry is written and committed durably
   (``synchronous=FULL``), so a crash after this point can only over-count, never under-count;
3. **release** — only then is the mechanism run. If it raises, nothing was released and the
   entry is marked ``aborted`` (its cost is given back).

Composition rules (fully adaptive: each release's parameters may depend on earlier outputs):

``"basic"``
    Σ ε_i ≤ ε and Σ δ_i ≤ δ, in exact rationals. Basic composition stays valid when the
    parameters and the number of releases are chosen adaptively and the session stops at the
    budget (Rogers, Roth, Ullman & Vadhan 2016, "Privacy Odometers and Filters", Section 5;
    Whitehouse, Ramdas, Rogers & Wu 2023, "Fully-Adaptive Composition in Differential Privacy").
``"zcdp"``
    Σ ρ_i ≤ ρ_B, where ρ_B is the largest ρ whose (ε, δ) conversion (Canonne, Kamath &
    Steinke 2020, Corollary 13) fits the budget. A filter that stops before Σ ρ_i exceeds ρ_B is
    ρ_B-zCDP for adaptively chosen ρ_i: at each order α this is the Rényi filter of Feldman &
    Zrnic 2021 ("Individual Privacy Accounting via a Rényi Filter", the composition theorem with
    adaptively chosen parameters) with budget αρ_B, which holds for all α at once. Only
    pure-DP and Gaussian events have a ρ (pure ε: ρ = ε²/2, Bun & Steinke 2016 Prop 3.3;
    Gaussian: ρ = 1/(2σ²), Prop 1.6); an (ε, δ) event is refused.

Randomness: ``rng=None`` (the default) is secure mode, dpkit's ChaCha20 source
(:class:`dpkit.SecureRandom`); a ``numpy.random.Generator`` is fast mode, seedable and not
attack-resistant. The ledger records the mode of every release (``"secure"`` or ``"fast"``).
A mechanism without a secure sampler would refuse secure mode with a typed error; every
built-in mechanism has one (report-noisy-max with Laplace noise runs with exact discrete
Laplace noise on a lattice).
"""

from __future__ import annotations

import os
import uuid
from fractions import Fraction
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import numpy as np

from dpkit.accounting import event_cost, event_rho, exact, zcdp_rho_for
from dpkit.errors import InvalidParameter
from dpkit.ledger import Budget, Cost, Ledger, LedgerEntry
from dpkit.mechanism import Mechanism
from dpkit.privacy import PrivacyEvent
from dpkit.randomness import resolve_rng

__all__ = ["Query", "Release", "Session"]


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
            record[field.name] = _event_record(value) if isinstance(value, PrivacyEvent) else value
    return record


def _parameters(target: Any) -> dict[str, Any]:
    if attrs.has(type(target)):
        return {
            f.name: getattr(target, f.name)
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


class Session:
    """Releases against a privacy budget recorded in a durable :class:`~dpkit.ledger.Ledger`.

    ``budget`` is ``(epsilon, delta)`` (exact: ten costs of 0.1 fit 1.0). ``ledger`` is a path,
    a ``sqlite:///PATH`` URL, or ``":memory:"`` (a ledger that lives as long as the session).
    Opening an existing ledger checks that ``dataset``, ``budget`` and ``composition`` agree
    with it; without them, they are read from the ledger.
    """

    def __init__(
        self,
        budget: tuple[float, float] | Budget | None = None,
        ledger: str | os.PathLike[str] = ":memory:",
        *,
        dataset: str | None = None,
        composition: Literal["basic", "zcdp"] | None = None,
    ):
        if composition is not None and composition not in ("basic", "zcdp"):
            raise InvalidParameter("composition", composition, "'basic' or 'zcdp'", owner="Session")
        full = None
        if budget is not None:
            full = _as_budget(budget)
            if composition == "zcdp":
                if full.delta == 0:
                    raise InvalidParameter(
                        "budget",
                        budget,
                        "a pair with delta > 0 for zCDP composition",
                        owner="Session",
                    )
                rho = zcdp_rho_for(float(full.epsilon), float(full.delta))
                full = Budget(full.epsilon, full.delta, exact(rho))
        self.ledger = Ledger(ledger, dataset=dataset, budget=full, composition=composition)
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
    def remaining(self) -> Budget:
        """What is left: (ε, δ) under basic composition; ρ (and the full ε, δ) under zCDP."""
        return self.ledger.remaining()

    def cost(self, event: PrivacyEvent) -> Cost:
        """The exact cost of ``event`` under this session's composition rule."""
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameter("privacy", event, "a dpkit.privacy event", owner="Session")
        if self.composition == "zcdp":
            return Cost(Fraction(0), Fraction(0), event_rho(event))
        epsilon, delta = event_cost(event)
        return Cost(epsilon, delta)

    def release(
        self, target: Mechanism | Query, data: Any, /, *, rng: np.random.Generator | None = None
    ) -> Release:
        """Check the budget, commit the spend, then run ``target`` on ``data``.

        ``target`` is a :class:`~dpkit.mechanism.Mechanism` (released as
        ``target.randomize(data, rng=rng)``) or a query with ``privacy`` and
        ``run(data, /, *, rng)``. Raises :class:`~dpkit.errors.BudgetExceeded` (before any
        randomness is drawn) if the cost does not fit what remains.
        """
        run = self._runner(target)
        generator, mode = self._generator(rng)
        entry = self._spend(target, mode)
        try:
            values = run(data, rng=generator)
        except BaseException:
            self.ledger.abort(entry.release_id)
            raise
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

    @staticmethod
    def _generator(rng: Any) -> tuple[Any, str]:
        """``None`` → the secure source ("secure"); a numpy Generator → "fast"."""
        generator, mode = resolve_rng(rng, owner="Session.release")
        return generator, str(mode)

    def _spend(self, target: Any, mode: str) -> LedgerEntry:
        """Check and durably commit the cost of ``target`` (BudgetExceeded if it does not fit)."""
        return self.ledger.spend(
            self.cost(target.privacy),
            mechanism=str(getattr(target, "name", type(target).__name__)),
            parameters=_parameters(target),
            event=_event_record(target.privacy),
            session_id=self.session_id,
            randomness=mode,
        )

    def release_all(
        self, items: list[tuple[Mechanism | Query, Any, np.random.Generator | None]], /
    ) -> list[Release]:
        """Release several targets all or nothing: every cost is committed before any runs.

        Each item is ``(target, data, rng)``. If any cost does not fit, the costs already
        reserved are given back (nothing has run, so nothing was released) and
        :class:`~dpkit.errors.BudgetExceeded` is raised.
        """
        prepared = []
        for target, data, rng in items:
            run = self._runner(target)
            generator, mode = self._generator(rng)
            prepared.append((target, data, run, generator, mode))
        entries: list[LedgerEntry] = []
        try:
            for target, _, _, _, mode in prepared:
                entries.append(self._spend(target, mode))
        except BaseException:
            for entry in entries:
                self.ledger.abort(entry.release_id)
            raise
        releases = []
        for index, ((_, data, run, generator, _), entry) in enumerate(
            zip(prepared, entries, strict=True)
        ):
            try:
                releases.append(Release(run(data, rng=generator), entry))
            except BaseException:
                for unrun in entries[index:]:
                    self.ledger.abort(unrun.release_id)
                raise
        return releases

    def history(self) -> list[LedgerEntry]:
        """Every entry of the ledger (all sessions), in commit order."""
        return self.ledger.entries()

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

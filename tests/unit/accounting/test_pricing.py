"""A declared plan is priced once, the first query that does not fit is the linear scan's, and
each released result is written to the ledger once."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import dpkit.budget
import dpkit.pricing
from dpkit.errors import InvalidParameter
from dpkit.ledger import Budget, Cost
from dpkit.privacy import GaussianDP, LaplaceDP, PrivacyEvent, RandomizedResponseDP
from dpkit.session import Deferred, Session
from dpkit.spec import run_spec

Items = list[tuple[PrivacyEvent, int]]


def linear_scan(session: Session, items: Items) -> tuple[int, Cost, Budget] | None:
    """The first prefix that does not fit, pricing every prefix as its own plan in turn."""
    if session.admits(session.plan_costs(items))[0]:
        return None
    for index in range(len(items)):
        fits, charged, remaining = session.admits(session.plan_costs(items[: index + 1]))
        if not fits:
            return index, charged, remaining
    raise AssertionError("unreachable: the whole plan does not fit")


def overflow(session: Session, items: Items) -> tuple[int, Cost, Budget] | None:
    found = session.overflow(session.price(items))
    return None if found is None else (found.index, found.charged, found.remaining)


EVENTS: list[PrivacyEvent] = [
    LaplaceDP(epsilon=0.1),
    LaplaceDP(epsilon=0.3),
    RandomizedResponseDP(epsilon=0.5, k=2),
    GaussianDP(noise_multiplier=2.0, delta=1e-6),
    GaussianDP(noise_multiplier=6.4, delta=1e-10),
    GaussianDP(noise_multiplier=500.0, delta=1e-6),
]


def plans(seed: int, count: int) -> list[Items]:
    """Plans of 2 to 6 items drawn from EVENTS (the seed picks inputs, not results)."""
    rng = np.random.default_rng(seed)
    return [
        [(EVENTS[i], int(rng.integers(1, 3))) for i in rng.integers(0, len(EVENTS), size=size)]
        for size in rng.integers(2, 7, size=count)
    ]


@pytest.mark.parametrize(
    ("composition", "budget", "gaussian_only"),
    [
        ("basic", (0.9, 1e-5), False),
        ("basic", (1.5, 1e-6), False),
        ("zcdp", (1.0, 1e-5), False),
        ("gdp", (1.0, 1e-5), True),  # a pure event's μ is from its ε: keep the plans Gaussian
        ("best", (1.2, 1e-5), False),
    ],
)
def test_first_overflow_is_the_linear_scans(
    composition: Any, budget: tuple[float, float], gaussian_only: bool
) -> None:
    with Session(budget=budget, composition=composition) as session:
        checked = 0
        for items in plans(seed=len(composition), count=12):
            if gaussian_only:
                items = [(e, r) for e, r in items if isinstance(e, GaussianDP)] or items[:0]
            if not items:
                continue
            assert overflow(session, items) == linear_scan(session, items), items
            checked += 1
        assert checked >= 6


def test_first_overflow_after_earlier_spends() -> None:
    """The same answer once part of the budget is spent (and "best" has fixed its currency)."""
    for composition in ("basic", "zcdp", "best"):
        with Session(budget=(2.0, 1e-5), composition=composition) as session:
            session.release_all([(_Query(GaussianDP(noise_multiplier=3.0, delta=1e-6)), 0, None)])
            for items in plans(seed=3, count=8):
                assert overflow(session, items) == linear_scan(session, items), items


def test_a_longer_prefix_may_fit_where_a_shorter_does_not() -> None:
    """Why the search is not a binary search: the Gaussian alone (read at δ = 1e-10) costs
    ε = 0.914 > 0.9, but with a second release that raises δ to 1e-6 the two cost ε ≈ 0.64.
    A binary search over the three prefixes would blame the third item; the first is the one."""
    first = GaussianDP(noise_multiplier=6.4, delta=1e-10)
    second = GaussianDP(noise_multiplier=500.0, delta=1e-6)
    items: Items = [(first, 1), (second, 1), (LaplaceDP(epsilon=0.5), 1)]
    with Session(budget=(0.9, 1e-5)) as session:
        assert not session.admits(session.plan_costs(items[:1]))[0]
        assert session.admits(session.plan_costs(items[:2]))[0]
        assert not session.admits(session.plan_costs(items))[0]
        found = session.overflow(session.price(items))
        assert found is not None and found.index == 0
        assert overflow(session, items) == linear_scan(session, items)


def counting_account(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the plan compositions (each a call of the accountant by the pricing)."""
    calls: list[int] = []
    account = dpkit.pricing.account

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return account(*args, **kwargs)

    monkeypatch.setattr(dpkit.pricing, "account", counted)
    return calls


def test_prefixes_the_sums_decide_are_not_composed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten releases of ε = 0.1 against 0.55: the plain sums fit for five prefixes, so only the
    whole plan and the sixth prefix are composed (the linear scan composed six prefixes)."""
    items: Items = [(LaplaceDP(epsilon=0.1), 1)] * 10
    with Session(budget=(0.55, 1e-6)) as session:
        priced = session.price(items)
        calls = counting_account(monkeypatch)
        found = session.overflow(priced)
    assert found is not None and found.index == 5
    assert len(calls) == 1  # the sixth prefix; the whole plan's price was reused


def gaussian_sums(count: int, epsilon: float = 0.1) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "dataset": "d",
        "budget": {"epsilon": 10.0, "delta": 1e-4, "composition": "basic"},
        "defaults": {"rng": {"mode": "fast", "seed": 1}},
        "queries": [
            {
                "id": f"q{i}",
                "statistic": "sum",
                "params": {"lower": 0, "upper": 1, "noise": "gaussian"},
                "input": {"source": "inline", "values": [0, 1, 1]},
                "budget": {"epsilon": epsilon, "delta": 1e-6},
            }
            for i in range(count)
        ],
    }


def test_a_spec_is_composed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check and the spend share one price: the plan of three Gaussians is composed once
    (twice before: once to check it, once more to charge it)."""
    calls = counting_account(monkeypatch)
    document = run_spec(gaussian_sums(3), base_dir=tmp_path, ledger=tmp_path / "l.sqlite")
    assert len(document["results"]) == 3
    assert len(calls) == 1


def test_each_result_is_written_once(tmp_path: Path) -> None:
    """A trigger on the ledger's entries table counts the writes of each entry's result: a spec
    run writes each result document once (it was written twice: the raw values, then the
    document over them), and what is stored is the document the run returns."""
    ledger = tmp_path / "l.sqlite"
    run_spec(gaussian_sums(1), base_dir=tmp_path, ledger=ledger)  # creates the ledger
    with sqlite3.connect(ledger) as db:
        db.execute("CREATE TABLE result_writes (release_id TEXT)")
        db.execute(
            "CREATE TRIGGER count_result_writes AFTER UPDATE OF result ON dpkit_entries "
            "BEGIN INSERT INTO result_writes VALUES (new.release_id); END"
        )
    document = run_spec(gaussian_sums(3), base_dir=tmp_path, ledger=ledger)
    with sqlite3.connect(ledger) as db:
        writes = [row[0] for row in db.execute("SELECT release_id FROM result_writes")]
    released = [result["release_id"] for result in document["results"]]
    assert sorted(writes) == sorted(released)
    with Session(ledger=ledger) as session:
        stored = {entry.release_id: entry.result for entry in session.history()}
    for result in document["results"]:
        assert stored[result["release_id"]]["query_id"] == result["query_id"]
        assert stored[result["release_id"]]["estimate"] == result["estimate"]


class _Query:
    """A query that releases its (public) input unchanged: enough to spend a plan."""

    def __init__(self, privacy: PrivacyEvent):
        self.privacy = privacy

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Any:
        return data


def test_a_price_of_other_events_is_refused(tmp_path: Path) -> None:
    """A plan is charged at its own price: a price of other events is refused, nothing spent."""
    cheap = session_items([LaplaceDP(epsilon=0.01)])
    with Session(budget=(1.0, 0.0), ledger=tmp_path / "l.sqlite") as session:
        priced = session.price([(LaplaceDP(epsilon=0.01), 1)])
        with pytest.raises(InvalidParameter, match="priced"):
            session.release_all(session_items([LaplaceDP(epsilon=0.5)]), priced=priced)
        assert session.history() == []
        released = session.release_all(cheap, priced=priced)
        assert released[0].cost.epsilon == priced.costs[0].epsilon


def test_a_price_with_other_costs_is_refused_before_any_data_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A price of the right events whose costs or total are not the plan's (here ε halved) is
    refused before any data are read, nothing spent; an equal price made by hand is charged,
    and checking the caller's own price composes nothing again."""
    events = [GaussianDP(noise_multiplier=2.0, delta=1e-6), LaplaceDP(epsilon=0.3)]
    reads: list[int] = []
    items = [(_Query(e), Deferred(lambda: reads.append(1) or 0), None) for e in events]
    composed = []
    account = dpkit.pricing.account
    monkeypatch.setattr(
        dpkit.pricing, "account", lambda *a, **k: composed.append(1) or account(*a, **k)
    )
    with Session(budget=(10.0, 1e-3), ledger=tmp_path / "l.sqlite") as session:
        priced = session.price([(e, 1) for e in events])
        halved = tuple(attrs.evolve(c, epsilon=c.epsilon / 2) for c in priced.costs)
        assert priced.total is not None
        forged = [
            attrs.evolve(priced, costs=halved, total=dpkit.budget.total(halved)),
            attrs.evolve(priced, costs=halved),  # the true total beside forged costs
            attrs.evolve(priced, total=attrs.evolve(priced.total, epsilon=Fraction(1, 100))),
        ]
        for price in forged:
            with pytest.raises(InvalidParameter, match="priced"):
                session.release_all(items, priced=price)
        assert session.history() == [] and reads == []
        before = len(composed)
        copy = dpkit.pricing.PricedPlan(priced.items, priced.costs, priced.total)
        released = session.release_all(items, priced=copy)
        assert len(composed) == before  # the plan's price was kept, not composed again
        charged = [(r.cost.epsilon, r.cost.delta) for r in released]
        assert charged == [(c.epsilon, c.delta) for c in priced.costs] and reads == [1, 1]


def session_items(events: Sequence[PrivacyEvent]) -> list[tuple[Any, ...]]:
    return [(_Query(event), Deferred(lambda: 0), None) for event in events]


def test_composition_note_says_how_the_total_was_composed() -> None:
    """In decimals, with the plain sum beside a joint price below it."""
    from dpkit.pricing import composition_note
    from dpkit.privacy import GaussianDP, LaplaceDP

    gaussians = dpkit.pricing.price_plan([(GaussianDP(noise_multiplier=5.0, delta=1e-6), 1)] * 3)
    note = composition_note(gaussians)
    assert note.startswith("the joint PLD price of 3 queries: ε = ")
    assert "δ = 3e-06" in note and "(their sum would be 2.50236)" in note
    assert "/" not in note  # no raw fractions
    pure = dpkit.pricing.price_plan([(LaplaceDP(epsilon=0.1), 1)] * 3)
    assert composition_note(pure) == "the sum of the costs of 3 queries: ε = 0.3"
    assert composition_note(dpkit.pricing.price_plan([(LaplaceDP(epsilon=0.1), 1)])) == (
        "the cost of 1 query: ε = 0.1"
    )
    assert composition_note(gaussians, "zcdp").startswith("the sum of the ρ of 3 queries (zCDP)")

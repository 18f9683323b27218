"""The union filter of a "best" ledger (dpkit.union_filter): each filter meets its share of
the budget by an independent conversion, the shares add up to δ, and the ledger keeps the
union across reopening, verification and declared plans."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.charged import Charged

import dpkit
from dpkit import union_filter
from dpkit.accounting import gaussian_noise_multiplier
from dpkit.budget import Budget, Cost
from dpkit.errors import BudgetExceeded
from dpkit.ledger import Ledger
from dpkit.privacy import ApproximateDP, GaussianDP, LaplaceDP, PrivacyEvent, gaussian_delta

DELTA = 1e-5


def _release(session: dpkit.Session, event: PrivacyEvent) -> None:
    session.release(Charged(event), np.zeros(1), rng=np.random.default_rng(0))


def _gaussian(epsilon: float) -> GaussianDP:
    return GaussianDP(gaussian_noise_multiplier(epsilon, delta=1e-6), 1e-6)


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(3), Fraction(12)])
@pytest.mark.parametrize("first", [Fraction(0), Fraction(1, 4)])
def test_every_filter_meets_its_share_of_delta(epsilon: Fraction, first: Fraction) -> None:
    """Each hybrid's pure ε outright plus its μ² in Gaussian DP is within (ε, δ_h), checked
    with the Gaussian curve directly (Balle & Wang 2018), and the main filter's and hybrids'
    δ add up to the budget's."""
    budget = Budget(epsilon, Fraction(DELTA))
    union = union_filter.Union("gdp", first)
    hybrid_delta = budget.delta * union_filter.SHARE / union_filter.HYBRIDS
    main = union_filter.main_budget(budget)
    assert main.delta + hybrid_delta * union_filter.HYBRIDS == budget.delta
    splits = union_filter.hybrids(budget, union)
    assert len(splits) == union_filter.HYBRIDS
    assert splits[0][0] == first and splits[-1] == (epsilon, 0)
    for split, mu2 in splits[:-1]:
        assert mu2 > 0
        assert gaussian_delta(float(epsilon - split), 1 / math.sqrt(mu2)) <= hybrid_delta
        # and it is the largest such μ² to within 0.1 %
        assert gaussian_delta(float(epsilon - split), 1 / math.sqrt(1.001 * mu2)) > hybrid_delta
    assert main.mu2 is not None
    assert gaussian_delta(float(epsilon), 1 / math.sqrt(main.mu2)) <= main.delta


def test_a_filter_admits_only_what_fits_all_its_sums() -> None:
    budget = Budget(Fraction(2), Fraction(DELTA))
    union = union_filter.Union("basic", Fraction(1, 2))
    pure = Cost(Fraction(1, 2), Fraction(0), Fraction(1, 8), Fraction(1, 3))
    approx = Cost(Fraction(1, 2), Fraction(1, 10**6))  # no μ: only the basic main filter
    streams = union_filter.Streams().plus(pure, plan=False)
    assert union_filter.admits(streams, budget, union)
    with_approx = streams.plus(approx, plan=False)
    assert union_filter.admits(with_approx, budget, union)  # basic: ε = 1, δ = 1e-6
    assert not union_filter.admits(
        with_approx.plus(pure, plan=False, times=3), budget, union
    )  # basic is over at ε = 2.5 (δ fits), and the hybrids have no μ for the approximate event
    # the same pure costs in a declared plan are charged μ² by the hybrids, never outright
    as_plan = union_filter.Streams().plus(pure, plan=True, times=4)
    outright = union_filter.Streams().plus(pure, plan=False, times=4)
    assert as_plan.pure_epsilon == 0 and as_plan.stream_mu2 == Fraction(4, 3)
    assert outright.pure_epsilon == 2 and outright.stream_mu2 == 0


@pytest.mark.parametrize(
    "text",
    ["union gdp 1/2", "union basic 0", "union zcdp 3"],
)
def test_the_stored_rule_reads_back(text: str) -> None:
    union = union_filter.Union.parse(text)
    assert union is not None and union.text() == text


@pytest.mark.parametrize("text", ["union", "union best 1", "union gdp -1", "union gdp x", "gdp"])
def test_other_rule_texts_are_not_unions(text: str) -> None:
    assert union_filter.Union.parse(text) is None


def test_a_first_spend_without_a_mu_keeps_one_currency() -> None:
    session = dpkit.Session(budget=(2.0, DELTA), composition="best")
    _release(session, ApproximateDP(0.5, 1e-6))
    assert session.ledger.union is None and session.rule == "basic"
    with_mu = dpkit.Session(budget=(2.0, DELTA), composition="best")
    _release(with_mu, LaplaceDP(0.5))
    assert with_mu.ledger.union == union_filter.Union("basic", Fraction(1, 2))
    assert [e.rule for e in with_mu.history()] == ["union"]


def test_a_pure_budget_keeps_one_currency() -> None:
    session = dpkit.Session(budget=(2.0, 0.0), composition="best")
    _release(session, LaplaceDP(0.5))
    assert session.ledger.union is None


def _admitted(session: dpkit.Session, event: PrivacyEvent, limit: int = 100) -> int:
    for n in range(limit):
        try:
            _release(session, event)
        except BudgetExceeded:
            return n
    return limit


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_union_survives_reopening_the_ledger(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """The union and its first pure ε are read back from the store: a reopened session
    admits as many Gaussians as the one that made the first spend, and the ledger verifies
    (SQLite, and a real PostgreSQL server)."""
    path: Any = tmp_path / "ledger.sqlite"
    if store == "postgresql":
        path = request.getfixturevalue("postgres_server").url()
    budget = (4.0, DELTA)
    first = dpkit.Session(budget=budget, ledger=path, composition="best", dataset="d")
    _release(first, LaplaceDP(2.0))
    first.close()
    again = dpkit.Session(ledger=path)
    memory = dpkit.Session(budget=budget, composition="best")
    _release(memory, LaplaceDP(2.0))
    count = _admitted(again, _gaussian(0.5))
    assert count == _admitted(memory, _gaussian(0.5)) >= 10  # basic alone: 4 (ε = 0.5 each)
    assert again.ledger.union == union_filter.Union("basic", Fraction(2))
    again.ledger.verify()
    assert Ledger(str(path)).union == again.ledger.union


def test_the_preview_agrees_with_the_ledger() -> None:
    """Session.admits says yes exactly when the ledger then admits the release."""
    session = dpkit.Session(budget=(3.0, DELTA), composition="best")
    events = [LaplaceDP(0.5), _gaussian(0.5), LaplaceDP(1.0)] + [_gaussian(0.5)] * 40
    for event in events:
        cost = session.cost(event)
        fits, charged, _ = session.admits([cost])
        assert charged == cost
        try:
            _release(session, event)
            admitted = True
        except BudgetExceeded as refused:
            admitted = False
            assert refused.remaining.epsilon >= 0
        assert admitted == fits
    assert not fits  # the budget ran out on the way


def test_verify_finds_a_union_ledger_over_every_filter(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "ledger.sqlite"
    session = dpkit.Session(budget=(1.0, DELTA), ledger=path, composition="best", dataset="d")
    _release(session, LaplaceDP(0.9))
    session.close()
    with sqlite3.connect(path) as connection:  # the entry's ε raised past every filter
        connection.execute("UPDATE dpkit_entries SET epsilon = '3/2'")
        connection.execute("UPDATE dpkit_meta SET value = '3/2' WHERE key = 'spent_epsilon'")
    with pytest.raises(dpkit.ledger.LedgerCorrupt, match="exceed the budget"):
        Ledger(str(path)).verify()


def test_a_moved_union_ledger_keeps_its_filters(tmp_path: Path) -> None:
    from dpkit.ledger import move_ledger

    source, destination = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    session = dpkit.Session(budget=(3.0, DELTA), ledger=source, composition="best", dataset="d")
    _release(session, LaplaceDP(1.0))
    session.close()
    move_ledger(str(source), str(destination))
    moved = dpkit.Session(ledger=destination)
    assert moved.ledger.union == union_filter.Union("basic", Fraction(1))
    assert _admitted(moved, _gaussian(0.5)) >= 6  # the hybrids came along: basic alone admits 4
    moved.ledger.verify()

"""A ``"best"`` session under hostile sequences: whatever an analyst asks for, one release at a
time or as declared plans, the releases a union ledger admits never compose to more than the
budget, and each refusal is typed and writes nothing.

Hypothesis draws a budget and 1–14 requests of every kind of event the built-in mechanisms
declare — Gaussian, Laplace, pure, randomized response (binary and k-ary), bounded range,
(ε, δ) events with no μ — with ε from tiny to larger than the budget, some grouped into
declared plans (``release_all``). Each admitted release is checked against:

* the **exact non-adaptive composition** of everything admitted (dpkit's tightest accountant,
  :func:`dpkit.accounting.account`, the privacy-loss distribution): the session's guarantee
  must never be tighter than a non-adaptive one, so that composition must fit the budget;
* an **independent re-derivation** of the union's filters from the Gaussian curve
  (:func:`dpkit.privacy.gaussian_mu_epsilon`) and the zCDP conversion
  (:func:`dpkit.accounting.zcdp_epsilon`), not :mod:`dpkit.union_filter`'s own μ² budgets:
  some filter must fit the whole transcript;
* the preview (:meth:`dpkit.Session.admits`), which must agree with the ledger, and
  :meth:`dpkit.ledger.Ledger.verify`.

Hypothesis runs with a derandomised seed; a failure is a real counter-example (the checks are
exact inequalities up to the accountant's stated discretisation, not statistics).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.charged import Charged

import dpkit
from dpkit import union_filter
from dpkit.accounting import account, gaussian_noise_multiplier, zcdp_epsilon
from dpkit.budget import Cost
from dpkit.errors import BudgetExceeded, InvalidParameter
from dpkit.privacy import (
    ApproximateDP,
    BoundedRangeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    gaussian_mu_epsilon,
)

#: The documented shares (docs/accounting.md): the hybrids hold a tenth of δ, nine of them.
_SHARE, _HYBRIDS = 0.1, 9
#: The PLD's pessimistic grid is within ~1e-4 relative of the truth (test_session_charge.py).
_PLD_SLACK = 1 + 2e-4


_EPS = st.sampled_from([1e-3, 0.05, 0.3, 0.5, 1.0, 2.0, 6.0])
_EVENT = st.one_of(
    st.builds(
        lambda e, d: GaussianDP(gaussian_noise_multiplier(e, delta=d), d),
        _EPS,
        st.sampled_from([1e-7, 1e-6]),
    ),
    st.builds(LaplaceDP, _EPS),
    st.builds(PureDP, _EPS),
    st.builds(RandomizedResponseDP, _EPS),
    st.builds(lambda e, k: RandomizedResponseDP(e, k=k), _EPS, st.sampled_from([3, 16])),
    st.builds(BoundedRangeDP, _EPS),
    st.builds(ApproximateDP, _EPS, st.sampled_from([1e-8, 1e-7])),
)
#: A request: one release, or a declared plan of 2–3.
_REQUEST = st.lists(_EVENT, min_size=1, max_size=3)


def _fits_some_filter(
    admitted: list[tuple[Cost, bool]], epsilon: float, delta: float, union: union_filter.Union
) -> bool:
    """The union's filters re-derived from the curves: the main filter at (1 − η)δ, or a
    hybrid at ηδ/J whose outright pure ε plus its μ²'s ε at that δ fits ε."""
    costs = [cost for cost, _ in admitted]
    main_delta = delta * (1 - _SHARE)
    if union.currency == "basic":
        main = float(sum(c.epsilon for c in costs)) <= epsilon and float(
            sum(c.delta for c in costs)
        ) <= main_delta * (1 + 1e-12)
    elif union.currency == "zcdp":
        main = all(c.rho is not None for c in costs) and zcdp_epsilon(
            float(sum(c.rho or 0 for c in costs)), main_delta
        ) <= epsilon * (1 + 1e-9)
    else:
        main = all(c.mu2 is not None for c in costs) and gaussian_mu_epsilon(
            main_delta, sum((c.mu2 or Fraction(0) for c in costs), Fraction(0))
        ) <= epsilon * (1 + 1e-9)
    if main:
        return True
    outright = [c for c, plan in admitted if c.delta == 0 and not plan]
    rest = [c for c, plan in admitted if not (c.delta == 0 and not plan)]
    if any(c.mu2 is None for c in rest):
        return False
    pure = float(sum(c.epsilon for c in outright))
    mu2 = sum((c.mu2 or Fraction(0) for c in rest), Fraction(0))
    hybrid_delta = delta * _SHARE / _HYBRIDS
    spent = pure + (gaussian_mu_epsilon(hybrid_delta, mu2) if mu2 > 0 else 0.0)
    return spent <= epsilon * (1 + 1e-9)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    epsilon=st.sampled_from([0.5, 2.0, 5.0]),
    delta=st.sampled_from([1e-5, 1e-7]),
    requests=st.lists(_REQUEST, min_size=1, max_size=14),
    fill=st.sampled_from([0.2, 0.5]),
)
def test_a_union_session_never_admits_more_than_its_budget(
    epsilon: float, delta: float, requests: list[list[PrivacyEvent]], fill: float
) -> None:
    """The drawn requests, then Gaussians until one is refused: the checks bite where the
    budget runs out."""
    session = dpkit.Session(budget=(epsilon, delta), composition="best")
    admitted_events: list[PrivacyEvent] = []
    admitted: list[tuple[Cost, bool]] = []
    gaussian = GaussianDP(gaussian_noise_multiplier(fill, delta=1e-7), 1e-7)
    filling = [[gaussian]] * 400
    for request in [*requests, *filling]:
        costs = [session.cost(event) for event in request]
        plan = len(request) > 1
        before = session.history()
        try:
            preview = session.admits(session.plan_costs([(e, 1) for e in request]))[0]
        except InvalidParameter:
            preview = None  # no filter can charge it: the release must be refused the same way
        try:
            items = [(Charged(e), np.zeros(1), np.random.default_rng(0)) for e in request]
            if plan:
                session.release_all(items)
            else:
                session.release(items[0][0], items[0][1], rng=items[0][2])
        except (BudgetExceeded, InvalidParameter) as refused:
            assert preview is not True, refused
            assert session.history() == before  # nothing written
            if request is filling[0]:
                break  # the budget is full
            continue
        assert preview is True
        admitted_events += request
        entries = session.history()[len(before) :]
        admitted += [(entry.cost, plan) for entry in entries]
        if session.ledger.union is not None and not plan:
            assert entries[0].cost == costs[0]  # a union charges a release its full cost
    if not admitted_events:
        return
    exact = account([(event, 1) for event in admitted_events], delta=delta).epsilon
    assert exact <= epsilon * _PLD_SLACK, (exact, epsilon)
    session.ledger.verify()
    union = session.ledger.union
    if union is not None:
        assert _fits_some_filter(admitted, epsilon, delta, union)

"""RAPPOR: ε₁, ε∞ and the exact ε of T memoized reports, the real sampler, the device's memo and
its accounting, and decoding against candidates.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

import decimal
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.rappor import Rappor, RapporClient, longitudinal_epsilon
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpkit

Z = float(stats.norm.isf(0.5e-7))


def test_epsilon_one_and_infinity_are_the_papers() -> None:
    """Erlingsson et al. 2014, Section 3: the paper's parameters h = 2, f = 0.5, p = 0.5,
    q = 0.75 give ε∞ = 4 ln 3 and ε₁ = 2 ln(q*(1 − p*)/(p*(1 − q*))) with q* = 0.6875,
    p* = 0.5625."""
    mech = dpkit.mechanism("rappor", key="00" * 16)
    assert mech.epsilon_infinity == pytest.approx(4 * math.log(3), rel=1e-12)
    assert mech.epsilon_one == pytest.approx(2 * math.log(0.6875 * 0.4375 / (0.5625 * 0.3125)))
    assert mech.privacy.epsilon == mech.epsilon_one
    steps = [mech.epsilon_after(t) for t in (1, 2, 3, 10, 100, 10_000)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(steps))
    assert steps[-1] <= mech.epsilon_infinity
    assert steps[-1] == pytest.approx(mech.epsilon_infinity, rel=1e-9)
    # No permanent RR: nothing bounds repeated reports, ε_T = T·ε₁.
    assert longitudinal_epsilon(f=0.0, p=0.25, q=0.75, hashes=1, reports=5) == pytest.approx(
        5 * math.log(9)
    )
    with pytest.raises(dpkit.InvalidParameter, match="greater than p"):
        dpkit.mechanism("rappor", p=0.7, q=0.6)


def _direct_epsilon(mech: Rappor) -> decimal.Decimal:
    """ε_T straight from its definition, h·ln(g(t_T)/g(t_0)) with g(t) = (π₁t + 1 − π₁)/
    (π₀t + 1 − π₀) and t_T = (q/p)^T, t_0 = ((1 − q)/(1 − p))^T, in 80-digit decimal
    arithmetic from the realised f, p, q (t up to 10^(10⁶) there: no cancellation to fear)."""
    c = decimal.Context(prec=80, Emin=-(10**9), Emax=10**9)
    f, p, q = (decimal.Decimal(v) for v in mech.realised)
    pi1, pi0 = 1 - f / 2, f / 2
    t_high = c.exp(mech.reports * c.ln(c.divide(q, p)))
    t_low = c.exp(mech.reports * c.ln(c.divide(1 - q, 1 - p)))

    def g(t: decimal.Decimal) -> decimal.Decimal:
        return c.divide(c.add(c.multiply(pi1, t), 1 - pi1), c.add(c.multiply(pi0, t), 1 - pi0))

    return mech.hashes * c.ln(c.divide(g(t_high), g(t_low)))


@pytest.mark.parametrize(
    ("f", "p", "q", "hashes"),
    [
        (0.966078708438937, 0.04263339202714232, 0.6928453475465705, 5),
        (0.8941792653393332, 0.020545531922287617, 0.6556871182071894, 8),
    ],
)
def test_epsilon_of_many_reports_is_not_below_the_realised_one(
    f: float, p: float, q: float, hashes: int
) -> None:
    """At T = 10⁶ the float ε_T cancelled two terms of size T·ln(q/p) and came out below the
    exact ε_T of the realised f, p, q by a relative 1.8·10⁻⁹ (and 9.6·10⁻¹⁰)."""
    mech = Rappor(f=f, p=p, q=q, hashes=hashes, reports=10**6, bits=16, cohorts=1)
    exact = _direct_epsilon(mech)
    assert decimal.Decimal(mech.privacy.epsilon) >= exact
    assert mech.privacy.epsilon == pytest.approx(float(exact), rel=1e-15)


@settings(max_examples=30, derandomize=True, deadline=None, database=None)
@given(
    f=st.floats(0.0, 0.99),
    p=st.floats(0.01, 0.6),
    gap=st.floats(1e-3, 0.39),
    hashes=st.integers(1, 8),
    reports=st.sampled_from([1, 2, 5, 100, 10**6]),
)
def test_declared_epsilon_is_the_realised_one_rounded_up(
    f: float, p: float, gap: float, hashes: int, reports: int
) -> None:
    """ε_T is never below the exact ε_T of the realised parameters, at either reading of the
    double (its binary value, and its shortest decimal, which the ledger charges), and within
    1e-15 of it."""
    mech = Rappor(f=f, p=p, q=p + gap, hashes=hashes, reports=reports, bits=16, cohorts=1)
    exact = _direct_epsilon(mech)
    assert decimal.Decimal(mech.privacy.epsilon) >= exact
    assert decimal.Decimal(repr(mech.privacy.epsilon)) >= exact
    assert mech.privacy.epsilon == pytest.approx(float(exact), rel=1e-15)
    assert mech.epsilon_one <= mech.privacy.epsilon <= mech.epsilon_infinity


def _brute_log_pmf(mech: Rappor, reports: np.ndarray, item: str) -> float:
    """log P[T reports | item] summed over every permanent B′ (no independence assumed)."""
    f, p, q = mech.realised
    cohort = int(reports[0, 0])
    bloom = mech.bloom(np.array([item]), cohort)[0, 0]
    k = mech.bits
    total = 0.0
    for permanent in range(1 << k):
        weight = 1.0
        for i in range(k):
            b, b2 = (int(bloom) >> i) & 1, (permanent >> i) & 1
            weight *= f / 2 + (1 - f) * (b2 == b)
            for row in reports:
                s = (int(row[1]) >> i) & 1
                on = q if b2 else p
                weight *= on if s else 1 - on
        total += weight
    return math.log(total / mech.cohorts)


@pytest.mark.parametrize("reports", [1, 2, 3])
def test_declared_law_is_exact_and_exactly_epsilon_after_t(reports: int) -> None:
    mech = dpkit.mechanism(
        "rappor", bits=2, hashes=1, cohorts=2, f=0.4, p=0.3, q=0.8, reports=reports,
        key="42" * 16,
    )  # fmt: skip
    space = mech.output_space()
    items = [f"i{j}" for j in range(12)]
    table = np.stack([mech.log_probability(space, np.full(len(space), x)) for x in items])
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=1e-12)
    rows = space if reports > 1 else space[:, None, :]
    for index in (0, 5, len(space) - 1):
        assert table[0, index] == pytest.approx(_brute_log_pmf(mech, rows[index], items[0]))
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(12), 2))
    assert worst == pytest.approx(mech.privacy.epsilon, rel=1e-9)  # some two items differ


def test_sampler_matches_declared_law_of_memoized_reports() -> None:
    """χ² of 200,000 devices' T = 2 reports against the declared joint law (false positive
    1e-6)."""
    mech = dpkit.mechanism(
        "rappor", bits=2, hashes=1, cohorts=2, f=0.4, p=0.3, q=0.8, reports=2, key="42" * 16
    )
    space = mech.output_space()
    out = mech.randomize(np.full(200_000, "item"), rng=np.random.default_rng(3))
    index = {row.tobytes(): i for i, row in enumerate(space)}
    observed = np.bincount([index[row.tobytes()] for row in out], minlength=len(space))
    expected = 200_000 * np.exp(mech.log_probability(space, np.full(len(space), "item")))
    assert stats.chisquare(observed[expected > 0], expected[expected > 0]).pvalue > 1e-6


def test_the_device_memo_reuses_its_permanent_response_and_is_accounted() -> None:
    mech = dpkit.mechanism("rappor", bits=64, key="01" * 16)
    rng = np.random.default_rng(5)
    client = mech.client(rng=rng)
    for value in ["home", "home", "work", "home"]:
        row = client.report(value, rng=rng)
        assert row.shape == (2,) and int(row[0]) == client.cohort
    first = client.memo[b"home"].copy()
    client.report("home", rng=rng)
    np.testing.assert_array_equal(client.memo[b"home"], first)  # one PRR per item, for good
    assert client.uses == {b"home": 4, b"work": 1}
    expected = mech.epsilon_after(4) + mech.epsilon_after(1)
    assert client.epsilon == pytest.approx(expected, rel=1e-12)
    assert client.epsilon == pytest.approx(dpkit.account(client.privacy_events(), delta=0).epsilon)
    # Across a restart: JSON out and back, the same memo and the same accounting.
    restored = RapporClient.from_dict(json.loads(json.dumps(client.to_dict())))
    assert restored.cohort == client.cohort and restored.uses == client.uses
    np.testing.assert_array_equal(restored.memo[b"home"], first)
    assert restored.epsilon == client.epsilon
    # However often one item is reported, the device stays under ε∞.
    steady = mech.client(rng=rng)
    for _ in range(500):
        steady.report("same", rng=rng)
    # ε₅₀₀ is within 10⁻¹⁵⁰ of ε∞ (their gap decays like 2⁻ᵀ here): both rounded up to a
    # double, they are the same one; at T = 20 the gap is still a relative 4·10⁻⁴.
    assert mech.epsilon_one < steady.epsilon <= mech.epsilon_infinity
    assert mech.epsilon_after(20) < mech.epsilon_infinity
    with pytest.raises(dpkit.InvalidData, match="RAPPOR client"):
        RapporClient.from_dict({"parameters": {}})


ITEMS = np.array([f"site{i}.example" for i in range(8)])
COUNTS = np.array([4000, 2500, 1500, 900, 500, 300, 200, 100])
TARGET = 2


def _decode(draw: Any, repetitions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    errors, variances, hits = [], [], []
    for r in range(repetitions):
        estimate = draw(r).estimate(ITEMS)
        low, high = estimate.confidence_interval(0.95)
        errors.append(estimate.estimates[TARGET] - COUNTS[TARGET])
        variances.append(estimate.variance[TARGET])
        hits.append(low[TARGET] <= COUNTS[TARGET] <= high[TARGET])
    return np.array(errors), np.array(variances), np.array(hits)


def test_decoding_is_unbiased_with_its_variance() -> None:
    """2,000 exact simulations (a fresh key and cohort draw each): the target's mean error
    within Z standard errors of 0, MSE/variance within Z·√(2/R) of 1, 95 % coverage within
    Z·√(0.0475/R) of 0.95 (false positive ≤ 3e-7)."""
    rng = np.random.default_rng(8)

    def draw(r: int) -> Any:
        mech = dpkit.mechanism("rappor", bits=16, hashes=2, cohorts=4, key=rng.bytes(16).hex())
        return dpkit.get_registry().estimator(mech).estimate(mech.simulate(ITEMS, COUNTS, rng=rng))

    errors, variances, hits = _decode(draw, 2000)
    r = errors.size
    assert abs(errors.mean()) <= Z * errors.std() / math.sqrt(r)
    assert abs(np.mean(errors**2) / np.mean(variances) - 1) <= Z * math.sqrt(2 / r)
    assert abs(hits.mean() - 0.95) <= Z * math.sqrt(0.0475 / r)


def test_simulation_has_the_law_of_real_reports() -> None:
    """One key: 200 real collections against 200 simulated ones; the decoded counts of 3 items
    agree in mean (|z| ≤ Z) and variance (two-sided F test at 1e-7): 6 checks, false positive
    ≤ 6e-7."""
    mech = dpkit.mechanism("rappor", bits=16, hashes=2, cohorts=4, key="31" * 16)
    rng = np.random.default_rng(9)
    population = np.repeat(ITEMS, COUNTS)
    estimator = dpkit.get_registry().estimator(mech)

    def decoded(counts: Any) -> np.ndarray:
        return estimator.estimate(counts).estimate(ITEMS).estimates[:3]

    real = np.array([decoded(estimator.accumulate(mech.randomize(population, rng=rng)))
                     for _ in range(200)])  # fmt: skip
    simulated = np.array([decoded(mech.simulate(ITEMS, COUNTS, rng=rng)) for _ in range(200)])
    z = (real.mean(0) - simulated.mean(0)) / np.sqrt(
        real.var(0, ddof=1) / 200 + simulated.var(0, ddof=1) / 200
    )
    assert np.all(np.abs(z) <= Z)
    f = real.var(0, ddof=1) / simulated.var(0, ddof=1)
    assert np.all(stats.f.sf(np.maximum(f, 1 / f), 199, 199) > 0.5e-7)


def test_counts_merge_and_bad_reports_are_refused() -> None:
    mech = dpkit.mechanism("rappor", bits=70, hashes=2, cohorts=3, key="05" * 16)
    rng = np.random.default_rng(1)
    out = mech.randomize(rng.choice(ITEMS, 900), rng=rng)
    estimator = dpkit.get_registry().estimator(mech)
    whole = estimator.accumulate(out)
    parts = estimator.accumulate(out[:400]) + estimator.accumulate(out[400:])
    np.testing.assert_array_equal(whole.ones, parts.ones)
    bits = np.unpackbits(out[:, 1:].astype("<u8").view(np.uint8), axis=1, bitorder="little")
    np.testing.assert_array_equal(whole.ones[1], bits[out[:, 0] == 1, :70].sum(axis=0))
    many = dpkit.mechanism("rappor", bits=8, reports=3).randomize(["a", "b"])
    assert many.shape == (2, 3, 2)
    with pytest.raises(dpkit.InvalidData, match=r"reports\[:, t\]"):
        dpkit.get_registry().estimator(dpkit.mechanism("rappor", bits=8)).accumulate(many)
    with pytest.raises(dpkit.InvalidData, match="cohort 7"):
        estimator.accumulate(np.array([[7, 0, 0]], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match="beyond bit 69"):
        estimator.accumulate(np.array([[0, 0, 1 << 8]], dtype=np.uint64))
    decoder = estimator.estimate(whole)
    with pytest.raises(dpkit.InvalidData, match="linearly dependent"):
        decoder.estimate(np.array(["a", "a"]))

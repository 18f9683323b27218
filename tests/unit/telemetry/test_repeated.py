"""Repeated collection (Ding, Kulkarni & Yekhanin 2017): dBitFlip and 1BitMean with α-point
rounding — exact privacy, estimators, and the memoizing device state and its accounting.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from dpkit_ldp.dbitflip import DBitFlipClient, draw_buckets
from dpkit_ldp.one_bit_mean import OneBitMeanClient
from scipy import stats

import dpkit

Z = float(stats.norm.isf(0.5e-7))


def test_buckets_are_uniform_ordered_samples_without_replacement() -> None:
    """χ² of 200,000 draws of 2 of 5 buckets over the 20 ordered pairs (false positive 1e-6)."""
    drawn = draw_buckets(np.random.default_rng(1), 200_000, 5, 2)
    assert np.all(drawn[:, 0] != drawn[:, 1])
    codes = drawn[:, 0] * 5 + drawn[:, 1]
    counts = np.bincount(codes, minlength=25)
    assert stats.chisquare(counts[counts > 0]).pvalue > 1e-6 and np.count_nonzero(counts) == 20
    assert sorted(draw_buckets(dpkit.SecureRandom(), 1, 6, 6)[0].tolist()) == list(range(6))


@pytest.mark.parametrize(("k", "d", "reports"), [(4, 2, 1), (5, 1, 3), (3, 3, 1)])
def test_dbitflip_is_exactly_epsilon_with_its_exact_moments(k: int, d: int, reports: int) -> None:
    """By enumeration of every report: the pmf sums to 1, the worst log-ratio is the realised ε
    (for memoized T reports too), and one device's ĉ(v) has mean 1{x = v} and variance
    (k/d)·A + 1{x = v}(k/d − 1), the estimator's formula."""
    mech = dpkit.mechanism("dbitflip", epsilon=1.3, k=k, d=d, reports=reports)
    space = mech.output_space()
    table = np.stack([mech.log_probability(space, np.full(len(space), x)) for x in range(k)])
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=1e-12)
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(k), 2))
    phi = mech.flip_probability
    bits_changed = 1 if d == 1 else 2  # with d = 1 the one bit takes the whole ε
    assert worst == pytest.approx(bits_changed * math.log((1 - phi) / phi), rel=1e-9)
    assert worst <= 1.3 + 1e-12
    one = space[:, 0] if reports > 1 else space
    estimator = dpkit.get_registry().estimator(dpkit.mechanism("dbitflip", epsilon=1.3, k=k, d=d))
    estimates = np.stack(
        [estimator.estimate(estimator.accumulate(row[None])).estimates for row in one]
    )
    a, b = estimator.estimate(estimator.accumulate(one[:1])).variance_model
    for x in range(k):
        weights = np.exp(table[x])
        mean = weights @ estimates
        variance = weights @ (estimates - mean) ** 2
        np.testing.assert_allclose(mean, np.arange(k) == x, atol=1e-12)
        np.testing.assert_allclose(variance, a + b * (np.arange(k) == x), rtol=1e-9)


def test_dbitflip_sampler_matches_declared_pmf() -> None:
    """χ² of 200,000 reports of one value against the declared pmf (false positive 1e-6)."""
    mech = dpkit.mechanism("dbitflip", epsilon=2.0, k=4, d=2)
    space = mech.output_space()
    reports = mech.randomize(np.full(200_000, 2), rng=np.random.default_rng(2))
    index = {row.tobytes(): i for i, row in enumerate(space)}
    observed = np.bincount([index[r.tobytes()] for r in reports], minlength=len(space))
    expected = 200_000 * np.exp(mech.log_probability(space, np.full(len(space), 2)))
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_dbitflip_estimates_cover_at_their_level() -> None:
    """2,000 runs of 3,000 devices over 6 buckets: for each bucket the mean error is within Z
    standard errors, MSE/variance within Z·√(2/R) of 1 (12 checks at 1e-7), and the score
    interval's coverage averaged over the buckets within Z·√(0.0475/R) of 0.95 (an average of
    dependent indicators has at most one indicator's variance; 1e-7): false positive ≤ 1.3e-6."""
    mech = dpkit.mechanism("dbitflip", epsilon=2.0, k=6, d=2)
    rng = np.random.default_rng(3)
    values = np.repeat(np.arange(6), [1200, 800, 500, 300, 200, 0])
    truth = np.bincount(values, minlength=6)
    errors, variances, hits = [], [], []
    for _ in range(2000):
        estimate = dpkit.estimate(mech, mech.randomize(values, rng=rng))
        low, high = estimate.confidence_interval()
        errors.append(estimate.estimates - truth)
        variances.append(estimate.variance)
        hits.append((low <= truth) & (truth <= high))
    e, v, h = np.array(errors), np.array(variances), np.array(hits)
    r = e.shape[0]
    assert np.all(np.abs(e.mean(0)) <= Z * e.std(0) / math.sqrt(r))
    assert np.all(np.abs((e**2).mean(0) / v.mean(0) - 1) <= Z * math.sqrt(2 / r))
    assert abs(h.mean() - 0.95) <= Z * math.sqrt(0.0475 / r)


def test_dbitflip_device_memo_costs_once_per_key() -> None:
    mech = dpkit.mechanism("dbitflip", epsilon=1.0, k=10, d=3)
    rng = np.random.default_rng(4)
    device = mech.client(rng=rng)
    outside = next(v for v in range(10) if v not in device.buckets)
    first = device.report(outside, rng=rng)
    for _ in range(200):  # the same value, every day: one release, ε
        np.testing.assert_array_equal(device.report(outside, rng=rng), first)
    assert device.epsilon == pytest.approx(1.0)
    other = next(v for v in range(10) if v not in device.buckets and v != outside)
    np.testing.assert_array_equal(device.report(other, rng=rng), first)  # same key: "none"
    assert device.epsilon == pytest.approx(1.0)
    device.report(int(device.buckets[1]), rng=rng)
    assert device.epsilon == pytest.approx(2.0)  # a second key
    for value in device.buckets:
        device.report(int(value), rng=rng)
    assert device.epsilon == pytest.approx(4.0)  # at most d + 1 keys, ever
    assert device.epsilon == dpkit.account(device.privacy_events(), delta=0).epsilon
    restored = DBitFlipClient.from_dict(json.loads(json.dumps(device.to_dict())))
    np.testing.assert_array_equal(restored.report(outside, rng=rng), first)
    assert restored.epsilon == pytest.approx(4.0)
    with pytest.raises(dpkit.InvalidData, match="dBitFlip client"):
        DBitFlipClient.from_dict({"parameters": {"epsilon": 1.0, "k": 10, "d": 3}})


def test_alpha_point_rounding_is_unbiased() -> None:
    """Rounded points of one value over 400,000 offsets: mean within Z standard errors of u
    (false positive 1e-7); an offset at 1 − frac(u) is the boundary."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=1.0, lower=0.0, upper=10.0, intervals=4)
    offsets = np.random.default_rng(5).random(400_000)
    points = mech.rounded(np.full(offsets.size, 3.3), offsets)
    u = 3.3 / 2.5
    assert set(np.unique(points).tolist()) == {1, 2}
    assert abs(points.mean() - u) <= Z * points.std() / math.sqrt(points.size)
    below = 1.0 - (u - 1.0)
    assert mech.rounded(np.array([3.3, 3.3]), np.array([below - 1e-9, below + 1e-9])).tolist() == [
        1,
        2,
    ]


def test_one_bit_mean_is_exactly_epsilon_and_its_estimate_covers() -> None:
    """Exact: P[b = 1 | x] is linear from the realised π_0 at lower to π_s ≤ 1 − π_0 at upper,
    so the worst log-ratio is the realised ε ≤ ε. Sampler: the mean of 400,000 bits within Z
    standard errors of P[b = 1 | x] (1e-7). Estimate: 1,500 runs of 2,000 devices, coverage
    of the 95 % interval within Z·√(0.0475/R) of 0.95 and |mean error| within Z standard
    errors (false positive ≤ 3e-7 in all)."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=2.0, lower=0.0, upper=100.0, intervals=3)
    grid = np.linspace(0.0, 100.0, 11)
    ones = mech.log_probability(np.ones(11, dtype=np.uint8), grid)
    zeros = mech.log_probability(np.zeros(11, dtype=np.uint8), grid)
    worst = max(float(np.ptp(ones)), float(np.ptp(zeros)))
    assert worst <= 2.0 + 1e-12 and worst >= 2.0 - 1e-9
    rng = np.random.default_rng(6)
    bits = mech.randomize(np.full(400_000, 37.0), rng=rng)
    p = math.exp(mech.log_probability(np.uint8(1), np.array(37.0)))
    assert abs(bits.mean() - p) <= Z * math.sqrt(p * (1 - p) / bits.size)
    values = rng.uniform(0.0, 100.0, 2000)
    errors, hits = [], []
    for _ in range(1500):
        estimate = dpkit.estimate(mech, mech.randomize(values, rng=rng))
        low, high = estimate.confidence_interval()
        errors.append(float(estimate.estimates[0]) - values.mean())
        hits.append(low[0] <= values.mean() <= high[0])
    assert abs(np.mean(errors)) <= Z * np.std(errors) / math.sqrt(1500)
    assert abs(np.mean(hits) - 0.95) <= Z * math.sqrt(0.0475 / 1500)


def test_one_bit_mean_device_costs_once_per_rounded_point() -> None:
    mech = dpkit.mechanism("one_bit_mean", epsilon=0.5, lower=0.0, upper=24.0, intervals=1)
    rng = np.random.default_rng(7)
    device = mech.client(rng=rng)
    daily = [device.report(v, rng=rng) for v in np.random.default_rng(8).uniform(0, 24, 365)]
    assert set(daily) <= {0, 1}
    assert set(device.memo) <= {0, 1} and device.epsilon <= 2 * 0.5 + 1e-12  # s = 1: ≤ 2ε
    assert sum(device.uses.values()) == 365
    fine = dpkit.mechanism("one_bit_mean", epsilon=0.5, lower=0.0, upper=24.0, intervals=24)
    steady = fine.client(rng=rng)
    for v in np.random.default_rng(9).uniform(10.0, 11.0, 365):  # within one interval
        steady.report(v, rng=rng)
    assert len(steady.memo) <= 2 and steady.epsilon <= 1.0 + 1e-12
    restored = OneBitMeanClient.from_dict(json.loads(json.dumps(steady.to_dict())))
    assert restored.memo == steady.memo and restored.offset == steady.offset
    with pytest.raises(dpkit.InvalidParameter, match="state"):
        OneBitMeanClient.from_dict({**steady.to_dict(), "offset": 1.5})
    with pytest.raises(dpkit.InvalidData, match="outside"):
        device.report(30.0, rng=rng)

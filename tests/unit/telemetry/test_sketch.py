"""Apple's count mean sketches (cms, hcms): exact privacy, the real sampler, counting, accuracy.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test). The
accuracy tests draw a fresh key for every repetition: the estimator is unbiased, and its
variance exact, over the key and the reports (:mod:`dpkit_ldp.count_mean_sketch`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.count_mean_sketch import SketchCounts
from scipy import stats

import dpkit

#: Two-sided normal quantile for a false-positive rate of 1e-7 per check.
Z = float(stats.norm.isf(0.5e-7))
ITEMS = np.array([f"w{i}" for i in range(40)])
COUNTS = np.maximum(1, (4000 / np.arange(1, 41) ** 1.1).astype(int))
TARGET = 3  # a middling item


def _pmf_table(mech: Any, items: list[str]) -> np.ndarray:
    space = mech.output_space()
    return np.stack([mech.log_probability(space, np.full(len(space), x)) for x in items])


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("cms", {"width": 4, "hashes": 3}),
        ("hcms", {"width": 5, "hashes": 3}),
        ("cms", {"width": 6, "hashes": 1, "epsilon": 0.3}),
    ],
)
def test_declared_distribution_is_normalised_and_exactly_epsilon(name: str, params: Any) -> None:
    mech = dpkit.mechanism(name, **{"epsilon": 2.0, **params, "key": "5a" * 16})
    items = ["a", "b", "c", "", "telemetry"]
    table = _pmf_table(mech, items)
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=1e-12)
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(5), 2))
    realised = getattr(mech, "realised_epsilon", None)
    if realised is None:
        phi = mech.flip_probability
        realised = math.log((1 - phi) / phi)
    assert worst <= mech.epsilon + 1e-9
    assert realised <= mech.epsilon and realised >= 0.999 * mech.epsilon
    separated = np.any(mech.buckets(items)[:, None, :] != mech.buckets(items)[None, :, :])
    assert separated and worst == pytest.approx(realised, rel=1e-9)


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_sampler_matches_declared_pmf(name: str) -> None:
    """χ² of 200,000 real reports of one item against the declared pmf; 5e-7 per case."""
    mech = dpkit.mechanism(name, epsilon=1.5, width=4, hashes=2, key="33" * 16)
    space = mech.output_space()
    reports = mech.randomize(np.full(200_000, "apple"), rng=np.random.default_rng(7))
    index = {tuple(row): i for i, row in enumerate(space.tolist())}
    observed = np.bincount([index[tuple(r)] for r in reports.tolist()], minlength=len(space))
    expected = 200_000 * np.exp(mech.log_probability(space, np.full(len(space), "apple")))
    assert stats.chisquare(observed, expected).pvalue > 5e-7


def test_secure_mode_reports_are_well_formed() -> None:
    mech = dpkit.mechanism("cms", epsilon=1.0, width=70, hashes=3)
    reports = mech.randomize(np.array(["x", "y", "z"]))
    assert reports.shape == (3, 3) and reports.dtype == np.uint64
    assert not np.any(reports[:, 2] >> np.uint64(6))  # bits beyond m = 70 stay zero
    assert np.all(np.isfinite(mech.log_probability(reports, np.array(["x", "y", "z"]))))
    hcms = dpkit.mechanism("hcms", epsilon=1.0, width=6, hashes=3)
    rows = hcms.randomize(["x"] * 50)
    assert rows.shape == (50, 3) and int(rows[:, 1].max()) < 8


def test_sketch_counts_match_the_reports_and_merge() -> None:
    mech = dpkit.mechanism("cms", epsilon=2.0, width=70, hashes=5, key="11" * 16)
    rng = np.random.default_rng(3)
    reports = mech.randomize(rng.choice(ITEMS, 5000), rng=rng)
    estimator = dpkit.get_registry().estimator(mech)
    counts = estimator.accumulate(reports)
    bits = np.unpackbits(reports[:, 1:].astype("<u8").view(np.uint8), axis=1, bitorder="little")
    for j in range(5):
        np.testing.assert_array_equal(counts.cells[j], bits[reports[:, 0] == j, :70].sum(axis=0))
    assert counts.rows.tolist() == np.bincount(reports[:, 0], minlength=5).tolist()
    halves = estimator.accumulate(reports[:2000]) + estimator.accumulate(reports[2000:])
    np.testing.assert_array_equal(halves.cells, counts.cells)
    hcms = dpkit.mechanism("hcms", epsilon=2.0, width=8, hashes=4, key="11" * 16)
    rows = hcms.randomize(rng.choice(ITEMS, 3000), rng=rng)
    cells = dpkit.get_registry().estimator(hcms).accumulate(rows).cells
    brute = np.zeros((4, 8), dtype=np.int64)
    np.add.at(
        brute, (rows[:, 0].astype(int), rows[:, 1].astype(int)), 2 * rows[:, 2].astype(int) - 1
    )
    np.testing.assert_array_equal(cells, brute)
    with pytest.raises(dpkit.InvalidData, match="merge"):
        _ = counts + SketchCounts("cms", np.zeros((2, 2)), np.zeros(2), 0)


def _errors(draw: Any, repetitions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Errors, reported variances and interval hits of the target's count, one per repetition."""
    errors, variances, hits = [], [], []
    for r in range(repetitions):
        estimate = draw(r).estimate(ITEMS)
        low, high = estimate.confidence_interval(0.95)
        truth = COUNTS[TARGET]
        errors.append(estimate.estimates[TARGET] - truth)
        variances.append(estimate.variance[TARGET])
        hits.append(low[TARGET] <= truth <= high[TARGET])
    return np.array(errors), np.array(variances), np.array(hits)


def _check_accuracy(
    errors: np.ndarray, variances: np.ndarray, hits: np.ndarray, *, ratio: tuple[float, float],
    coverage: tuple[float, float],
) -> None:  # fmt: skip
    r = errors.size
    assert abs(errors.mean()) <= Z * errors.std() / math.sqrt(r)  # unbiased
    mse_ratio = float(np.mean(errors**2) / np.mean(variances))
    assert ratio[0] <= mse_ratio <= ratio[1], mse_ratio
    assert coverage[0] <= hits.mean() <= coverage[1], hits.mean()


def _windows(repetitions: int) -> dict[str, tuple[float, float]]:
    """Acceptance windows at Z standard errors: MSE/variance ≈ mean of χ²₁ (sd √(2/R)),
    coverage a binomial proportion around 0.95 (sd √(0.95·0.05/R))."""
    ratio = Z * math.sqrt(2.0 / repetitions)
    cover = Z * math.sqrt(0.95 * 0.05 / repetitions)
    return {"ratio": (1 - ratio, 1 + ratio), "coverage": (0.95 - cover, 0.95 + cover)}


def _cms_draw(seed: int, **params: Any) -> Any:
    rng = np.random.default_rng(seed)

    def draw(r: int) -> Any:
        mech = dpkit.mechanism("cms", key=rng.bytes(16).hex(), **params)
        counts = mech.simulate(ITEMS, COUNTS, rng=rng)
        return dpkit.get_registry().estimator(mech).estimate(counts)

    return draw


def test_cms_is_unbiased_with_its_variance_over_keys() -> None:
    """3,000 repetitions (exact count-level simulation, a fresh key each): |mean error| within
    Z standard errors, MSE/variance and the 95 % coverage within Z standard errors of 1 and
    0.95 (false positive ≤ 3e-7). Few rows (k = 6) make the key's collisions count."""
    draw = _cms_draw(11, epsilon=3.0, width=32, hashes=6)
    _check_accuracy(*_errors(draw, 3000), **_windows(3000))


@pytest.mark.slow
def test_cms_accuracy_within_the_issue_windows() -> None:
    """20,000 repetitions: MSE/variance in [0.9, 1.1] and coverage in [0.94, 0.96] (both wider
    than Z standard errors; false positive ≤ 3e-7). Fewer would not do: the normal interval
    covers about 95.2 % here, and the coverage window keeps Z standard errors from 0.952 only
    from R = Z²·0.95·0.05/0.008² ≈ 21,000 (20,000: 5.2 sd); 14,000 would hold only a coverage
    of exactly 0.95. The ratio (excess kurtosis about 2, sd √(4/R)) needs 11,000."""
    draw = _cms_draw(12, epsilon=3.0, width=32, hashes=6)
    windows = _windows(20_000)
    assert windows["ratio"][0] >= 0.9 and windows["coverage"][1] <= 0.96
    _check_accuracy(*_errors(draw, 20_000), ratio=(0.9, 1.1), coverage=(0.94, 0.96))


def test_hcms_is_unbiased_with_its_variance_over_keys() -> None:
    """600 repetitions of the real sampler (n = 9,010, a fresh key each); windows as above
    (false positive ≤ 3e-7)."""
    rng = np.random.default_rng(13)
    population = np.repeat(ITEMS, COUNTS)

    def draw(r: int) -> Any:
        mech = dpkit.mechanism("hcms", epsilon=3.0, width=16, hashes=4, key=rng.bytes(16).hex())
        return dpkit.estimate(mech, mech.randomize(population, rng=rng))

    _check_accuracy(*_errors(draw, 600), **_windows(600))


def test_simulation_has_the_law_of_real_reports() -> None:
    """One key: 300 real runs against 300 simulated ones; for 5 items the mean estimates agree
    (two-sample z, |z| ≤ Z) and so do their variances (two-sided F test at 1e-7): 10 checks at
    1e-7, false positive ≤ 1e-6."""
    mech = dpkit.mechanism("cms", epsilon=2.0, width=16, hashes=3, key="77" * 16)
    rng = np.random.default_rng(17)
    population = np.repeat(ITEMS, COUNTS)
    estimator = dpkit.get_registry().estimator(mech)
    real = np.array(
        [estimator.estimate(estimator.accumulate(mech.randomize(population, rng=rng))).estimate(ITEMS[:5]).estimates
         for _ in range(300)]
    )  # fmt: skip
    simulated = np.array(
        [estimator.estimate(mech.simulate(ITEMS, COUNTS, rng=rng)).estimate(ITEMS[:5]).estimates
         for _ in range(300)]
    )  # fmt: skip
    z_mean = (real.mean(0) - simulated.mean(0)) / np.sqrt(
        real.var(0, ddof=1) / 300 + simulated.var(0, ddof=1) / 300
    )
    assert np.all(np.abs(z_mean) <= Z)
    f = real.var(0, ddof=1) / simulated.var(0, ddof=1)
    assert np.all(stats.f.sf(np.maximum(f, 1 / f), 299, 299) > 0.5e-7)


def test_frequency_queries_refuse_bad_input() -> None:
    mech = dpkit.mechanism("cms", epsilon=1.0, width=8, hashes=2)
    sketch = dpkit.estimate(mech, mech.randomize(["a", "b"], rng=np.random.default_rng(0)))
    with pytest.raises(dpkit.InvalidData, match="1-D"):
        sketch.estimate([["a"]])
    with pytest.raises(dpkit.InvalidParameter, match="second_moment"):
        sketch.estimate(["a"], second_moment=-1.0)
    estimator = dpkit.get_registry().estimator(mech)
    with pytest.raises(dpkit.InvalidData, match="hash function 9"):
        estimator.accumulate(np.array([[9, 0]], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match="beyond bit 7"):
        estimator.accumulate(np.array([[0, 1 << 9]], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match=r"shape \(\.\.\., 2\)"):
        estimator.accumulate(np.array([[0, 1, 2]], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match="text, bytes or integers"):
        mech.randomize(np.array([0.5]))
    assert sketch.estimate(["a", "a"]).categories == ("a", "a")


def test_reports_aggregate_in_parts_and_on_dask() -> None:
    """The sketch's counts add up: chunks of an iterator, or a Dask array's partitions, give
    the sketch of the whole (and the same estimates)."""
    da = pytest.importorskip("dask.array")
    mech = dpkit.mechanism("cms", epsilon=2.0, width=64, hashes=8, key="13" * 16)
    rng = np.random.default_rng(23)
    reports = mech.randomize(rng.choice(ITEMS, 5000), rng=rng)
    whole = dpkit.estimate(mech, reports).estimate(ITEMS[:5])
    chunks = dpkit.estimate(mech, iter(np.array_split(reports, 7))).estimate(ITEMS[:5])
    lazy = dpkit.estimate(mech, da.from_array(reports, chunks=(900, -1))).estimate(ITEMS[:5])
    np.testing.assert_allclose(chunks.estimates, whole.estimates)
    np.testing.assert_allclose(lazy.estimates, whole.estimates)
    pem = dpkit.mechanism("pem", epsilon=4.0, bits=16, top=2, step=4)
    out = pem.randomize(rng.integers(0, 2**16, 3000), rng=rng)
    found = dpkit.estimate(pem, da.from_array(out, chunks=(700, -1)))
    assert found.n == 3000 and found.items.tolist() == dpkit.estimate(pem, out).items.tolist()

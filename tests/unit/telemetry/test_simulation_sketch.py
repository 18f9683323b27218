"""Count-level simulation of the count mean sketches (cms, hcms): the simulated statistic has
the law of the statistic of real reports, jointly over the rows and cells.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.count_mean_sketch import SketchCounts
from scipy import stats

import dpkit

KEY = "5a" * 16


def _flat(statistic: SketchCounts) -> np.ndarray:
    """The whole statistic as one integer row: cells, then reports per row."""
    return np.concatenate([statistic.cells.ravel(), statistic.rows])


def _exact_law(mech: Any, items: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every value of the statistic of one report from each device holding ``items`` and its
    exact probability, from every combination of reports weighted by the per-report pmf."""
    space = mech.output_space()
    log_p = [mech.log_probability(space, np.full(len(space), x)) for x in items]
    estimator = dpkit.get_registry().estimator(mech)
    combos = np.array(list(itertools.product(range(len(space)), repeat=len(items))))
    weight = np.exp(sum(log_p[i][combos[:, i]] for i in range(len(items))))
    keep = weight > 0
    flat = np.array([_flat(estimator.accumulate(space[c])) for c in combos[keep]])
    values, where = np.unique(flat, axis=0, return_inverse=True)
    return values, np.bincount(where.ravel(), weights=weight[keep], minlength=len(values))


def _fit_p_value(values: np.ndarray, exact: np.ndarray, drawn: np.ndarray) -> tuple[float, bool]:
    """χ² goodness of fit of the drawn statistics (rows) to the exact law, over the cells
    expected ≥ 5 (the rest pooled), and whether every draw lies on the support."""
    position = {tuple(v): i for i, v in enumerate(values.tolist())}
    index = np.array([position.get(tuple(row), -1) for row in drawn.tolist()])
    on_support = bool(np.all(index >= 0))
    observed = np.bincount(index[index >= 0], minlength=len(values))
    expected = len(drawn) * exact
    big = expected >= 5
    observed = np.append(observed[big], observed[~big].sum() + np.sum(index < 0))
    expected = np.append(expected[big], expected[~big].sum())
    return float(stats.chisquare(observed, expected).pvalue), on_support


def _columns_drawn_independently(
    mech: Any, items: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> SketchCounts:
    """A plausible wrong hcms simulation: every (bucket, column) cell's devices drawn as an
    independent Binomial(G[j, u], 1/K), so the columns of a bucket do not share its devices."""
    k, size = mech.hashes, mech.columns
    buckets = mech.buckets(items)
    per_row = rng.multinomial(counts, np.full(k, 1.0 / k))
    hits = np.zeros((k, size), dtype=np.int64)
    np.add.at(hits, (np.broadcast_to(np.arange(k), buckets.shape), buckets), per_row)
    at = rng.binomial(hits[:, :, None], 1.0 / size, size=(k, size, size))  # [j, u, l]
    u, column = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    sign = np.where(np.bitwise_count(u & column) % 2 == 0, 1, -1)
    flips = rng.binomial(at, mech.flip_probability)
    cells = ((at - 2 * flips) * sign[None]).sum(axis=1)
    return SketchCounts(mech.name, cells, per_row.sum(axis=0), int(counts.sum()))


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_the_law_is_the_exact_law_of_real_reports(name: str) -> None:
    """Three devices holding a, b, b (k = 2 rows, m = 3, so hcms has K = 4 columns and a
    bucket-free column): the exact pmf of the whole statistic (cells and reports per row),
    against 6,000 simulated statistics: every draw on the support, and χ² goodness of fit
    over the cells expected ≥ 5 (the rest pooled) at false positive 1e-6."""
    mech = dpkit.mechanism(name, epsilon=1.5, width=3, hashes=2, key=KEY)
    items = ["a", "b", "b"]
    values, exact = _exact_law(mech, items)
    assert exact.sum() == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(31)
    distinct, counts = np.array(["a", "b"]), np.array([1, 2])
    drawn = np.array([_flat(mech.simulate(distinct, counts, rng=rng)) for _ in range(6000)])
    p_value, on_support = _fit_p_value(values, exact, drawn)
    assert on_support
    assert p_value > 1e-6


def test_the_exact_law_test_rejects_independent_columns() -> None:
    """The test above, run on a simulation that draws every column's devices independently
    (:func:`_columns_drawn_independently`): its statistics leave the support (a bucket's
    devices are no longer conserved) and fail the χ² fit. Deterministic given the seed; it
    guards the power of the test, not a random property."""
    mech = dpkit.mechanism("hcms", epsilon=1.5, width=3, hashes=2, key=KEY)
    values, exact = _exact_law(mech, ["a", "b", "b"])
    rng = np.random.default_rng(32)
    distinct, counts = np.array(["a", "b"]), np.array([1, 2])
    drawn = np.array(
        [_flat(_columns_drawn_independently(mech, distinct, counts, rng)) for _ in range(6000)]
    )
    p_value, on_support = _fit_p_value(values, exact, drawn)
    assert not on_support
    assert p_value < 1e-6


def test_hcms_simulated_and_per_device_statistics_agree() -> None:
    """60 devices over 5 items (k = 2, m = 8): 1,500 statistics from per-device reports
    (``randomize`` + the estimator's ``accumulate``) against 1,500 simulated ones. Two-sample
    χ² tests of homogeneity of each of the 16 cells, of the reports of row 0 and of the joint
    pair (cells[0, 1], cells[0, 2]): 18 tests at 0.5e-7 each, false positive ≤ 0.9e-6."""
    mech = dpkit.mechanism("hcms", epsilon=1.0, width=8, hashes=2, key=KEY)
    estimator = dpkit.get_registry().estimator(mech)
    items = np.array(["a", "b", "c", "d", "e"])
    counts = np.array([25, 15, 10, 7, 3])
    population = np.repeat(items, counts)
    rng = np.random.default_rng(33)
    runs = 1500
    real = np.array(
        [_flat(estimator.accumulate(mech.randomize(population, rng=rng))) for _ in range(runs)]
    )
    fake = np.array([_flat(mech.simulate(items, counts, rng=rng)) for _ in range(runs)])
    assert np.all(fake[:, -2:].sum(axis=1) == 60)

    def homogeneous(a: np.ndarray, b: np.ndarray) -> float:
        values, where = np.unique(np.concatenate([a, b]), return_inverse=True)
        table = np.stack(
            [
                np.bincount(where[:runs], minlength=values.size),
                np.bincount(where[runs:], minlength=values.size),
            ]
        )
        keep = table.sum(0) >= 10  # sparse cells pooled
        table = np.column_stack([table[:, keep], table[:, ~keep].sum(1)])
        table = table[:, table.sum(0) > 0]
        return float(stats.chi2_contingency(table).pvalue)

    projections = [(real[:, c], fake[:, c]) for c in range(17)]  # 16 cells, row 0's reports
    pair = [group[:, 1] * 1000 + group[:, 2] for group in (real, fake)]
    projections.append((pair[0], pair[1]))
    for a, b in projections:
        assert homogeneous(a, b) > 0.5e-7


def test_hcms_simulates_a_billion_devices() -> None:
    """10⁹ devices over 50 items (k = 16, m = 64): the simulation completes (its time is the
    benchmark's) and the estimated counts of the 5 largest items lie within 5.3 of their
    standard deviations (false positive ≤ 5 · 1.2e-7 = 6e-7: the count is a sum of 10⁹
    independent bounded terms, normal to far better than that)."""
    mech = dpkit.mechanism("hcms", epsilon=2.0, width=64, hashes=16, key=KEY)
    items = np.array([f"item{i}" for i in range(50)])
    weights = 1.0 / np.arange(1, 51)
    counts = np.floor(1e9 * weights / weights.sum()).astype(np.int64)
    start = time.perf_counter()
    statistic = mech.simulate(items, counts, rng=np.random.default_rng(34))
    elapsed = time.perf_counter() - start
    assert statistic.n == counts.sum() and statistic.rows.sum() == statistic.n
    estimate = dpkit.estimate(mech, statistic).estimate(
        items[:5], second_moment=float(np.sum(counts.astype(float) ** 2))
    )
    z = (estimate.estimates - counts[:5]) / np.sqrt(estimate.variance)
    assert np.all(np.abs(z) <= 5.3), (z, elapsed)


def test_hcms_simulation_refuses_what_it_cannot_draw() -> None:
    mech = dpkit.mechanism("hcms", epsilon=1.0, width=4, hashes=2, key=KEY)
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidData, match="one count >= 0 per item"):
        mech.simulate(np.array(["a", "b"]), np.array([1]), rng=rng)
    with pytest.raises(dpkit.InvalidData, match="one count >= 0 per item"):
        mech.simulate(np.array(["a", "b"]), np.array([1, -1]), rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="Generator"):
        mech.simulate(np.array(["a"]), np.array([1]), rng=dpkit.SecureRandom())  # type: ignore[arg-type]

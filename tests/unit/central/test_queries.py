"""Queries with derived sensitivity: count, sum, mean, histogram, quantile.

Statistical tests use fixed seeds and reject at p < 1e-6 (false-positive rate ≤ 1e-6 each).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import attrs
import numpy as np
import pytest
from dpkit_central import (
    Count,
    Histogram,
    Mean,
    Quantile,
    QueryResult,
    Sum,
    analytic_gaussian_sigma,
)
from scipy import stats

import dpkit

ALPHA = 1e-6
QUERIES = [
    Count(epsilon=1.0),
    Sum(lower=-2.0, upper=5.0, epsilon=1.0),
    Mean(lower=0.0, upper=10.0, epsilon=1.0),
    Histogram(categories=("a", "b"), epsilon=1.0),
    Quantile(q=0.5, lower=0.0, upper=10.0, epsilon=1.0),
]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_session_convention(query: object) -> None:
    """``privacy`` is an accounting event; ``run(data, /, *, rng)`` returns a frozen result."""
    assert isinstance(query.privacy, dpkit.plugin.PrivacyEvent)  # type: ignore[attr-defined]
    params = inspect.signature(query.run).parameters  # type: ignore[attr-defined]
    assert [p.kind for p in params.values()] == [
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.KEYWORD_ONLY,
    ]
    assert list(params) == ["data", "rng"]
    data = np.array(["a", "b", "a"]) if query.name == "histogram" else np.array([1.0, 2.0, 3.0])  # type: ignore[attr-defined]
    result = query.run(data, rng=np.random.default_rng(0))  # type: ignore[attr-defined]
    assert isinstance(result, QueryResult)
    assert result.privacy == query.privacy  # type: ignore[attr-defined]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.value = 0  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        query.epsilon = 2.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", [Sum, Mean, Quantile, Count, Histogram])
def test_sensitivity_cannot_be_supplied(cls: type) -> None:
    assert "sensitivity" not in attrs.fields_dict(cls)
    with pytest.raises(TypeError):
        cls(lower=0.0, upper=1.0, epsilon=1.0, sensitivity=0.001)


def test_derived_sensitivities() -> None:
    assert Count(epsilon=1.0).sensitivity == 1.0
    assert Sum(lower=-7.0, upper=3.0, epsilon=1.0).sensitivity == 7.0
    assert Sum(lower=2.0, upper=3.0, epsilon=1.0).sensitivity == 3.0
    assert Histogram(categories=(1, 2, 3), epsilon=1.0).sensitivity == 1.0
    assert Sum(lower=-7.0, upper=3.0, epsilon=0.5).mechanism.scale == 14.0


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Sum, Mean])
@pytest.mark.parametrize(
    "lower,upper,field",
    [(5.0, 1.0, "upper"), (1.0, 1.0, "upper"), (-math.inf, 1.0, "lower"), (0.0, math.nan, "upper")],
)
def test_bounds_must_be_finite_and_ordered(
    cls: type, lower: float, upper: float, field: str
) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        cls(lower=lower, upper=upper, epsilon=1.0)
    assert info.value.parameter == field
    assert cls.name in str(info.value)


def test_quantile_validates() -> None:
    with pytest.raises(dpkit.InvalidParameter, match=r"q=1\.5"):
        Quantile(q=1.5, lower=0.0, upper=1.0, epsilon=1.0)
    with pytest.raises(dpkit.InvalidParameter, match="upper"):
        Quantile(q=0.5, lower=1.0, upper=0.0, epsilon=1.0)


def test_noise_and_delta_must_agree() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="delta"):
        Sum(lower=0.0, upper=1.0, epsilon=1.0, noise="gaussian")
    with pytest.raises(dpkit.InvalidParameter, match="delta"):
        Count(epsilon=1.0, delta=1e-6)
    with pytest.raises(dpkit.InvalidParameter, match="delta"):
        Count(epsilon=1.0, noise="gaussian", delta=1.0)
    with pytest.raises(dpkit.InvalidParameter, match="noise"):
        Sum(lower=0.0, upper=1.0, epsilon=1.0, noise="geometric")


@pytest.mark.parametrize("query", QUERIES[:3] + QUERIES[4:], ids=lambda q: q.name)
def test_nan_is_dropped_by_default(query: object) -> None:
    """No error after the spend: missing values are dropped (the documented default)."""
    assert query.nan == "drop"  # type: ignore[attr-defined]
    query.run(np.array([1.0, np.nan]), rng=np.random.default_rng(0))  # type: ignore[attr-defined]


def test_non_numeric_and_non_1d_data_are_refused_by_the_public_check() -> None:
    with pytest.raises(dpkit.InvalidData, match="real numbers"):
        Sum(lower=0.0, upper=1.0, epsilon=1.0).check_input(np.array(["x"]))
    with pytest.raises(dpkit.InvalidData, match="1-D"):
        Mean(lower=0.0, upper=1.0, epsilon=1.0).check_input(np.zeros((2, 2)))


# --- values --------------------------------------------------------------------------------------

HUGE_EPSILON = 1e9  # noise of scale ~1e-9·Δ: the release equals the exact answer to ~1e-6


def test_clamping_and_dropping_are_counted_correctly() -> None:
    data = np.array([1.0, np.nan, 20.0, -5.0, np.nan, 3.0, np.inf])
    rng = np.random.default_rng(1)
    count = Count(epsilon=HUGE_EPSILON, nan="drop").run(data, rng=rng)
    assert count.value == 5 and isinstance(count.value, int)
    total = Sum(lower=0.0, upper=10.0, epsilon=HUGE_EPSILON, nan="drop").run(data, rng=rng)
    assert total.value == pytest.approx(1 + 10 + 0 + 3 + 10, abs=1e-6)
    mean = Mean(lower=0.0, upper=10.0, epsilon=HUGE_EPSILON, nan="drop").run(data, rng=rng)
    assert mean.value == pytest.approx(24 / 5, abs=1e-6)
    assert [p.query for p in mean.parts] == ["centred_sum", "count"]
    assert mean.parts[1].value == pytest.approx(5.0, abs=1e-6)


def test_mean_is_clamped_to_bounds_and_handles_empty_data() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        value = Mean(lower=0.0, upper=1.0, epsilon=0.01).run(np.array([]), rng=rng).value
        assert 0.0 <= value <= 1.0


def test_laplace_release_is_answer_plus_declared_noise() -> None:
    """KS test of 5,000 sum releases against Lap(Δ/ε) around the exact clamped sum."""
    query = Sum(lower=-1.0, upper=4.0, epsilon=0.5)
    data = np.array([0.5, 10.0, -3.0, 2.0])
    exact = 0.5 + 4.0 - 1.0 + 2.0
    rng = np.random.default_rng(3)
    values = np.array([query.run(data, rng=rng).value for _ in range(5_000)])
    assert stats.kstest(values, stats.laplace(loc=exact, scale=8.0).cdf).pvalue > ALPHA
    result = query.run(data, rng=rng)
    assert result.noise_scale == 8.0 and result.variance == 128.0


def test_mean_budget_split_laplace() -> None:
    query = Mean(lower=10.0, upper=20.0, epsilon=0.8)
    result = query.run(np.array([12.0, 18.0]), rng=np.random.default_rng(4))
    half = dpkit.LaplaceDP(epsilon=0.4)  # two Laplace releases at ε/2, composed as such
    assert query.privacy == dpkit.plugin.CompositeDP((half, half))
    assert [p.privacy for p in result.parts] == [half, half]
    assert result.parts[0].noise_scale == pytest.approx(5.0 / 0.4)  # Δ = (U − L)/2
    assert result.parts[1].noise_scale == pytest.approx(1.0 / 0.4)


def test_mean_gaussian_joint_calibration() -> None:
    """The two Gaussian parts compose to exactly the query's event: 1/z² = Σ 1/z_i²."""
    query = Mean(lower=0.0, upper=4.0, epsilon=1.0, noise="gaussian", delta=1e-6)
    z = analytic_gaussian_sigma(1.0, 1e-6)
    assert query.privacy == dpkit.GaussianDP(noise_multiplier=z, delta=1e-6)
    result = query.run(np.arange(5.0), rng=np.random.default_rng(5))
    multipliers = [p.privacy.noise_multiplier for p in result.parts]
    assert sum(1 / m**2 for m in multipliers) == pytest.approx(1 / z**2, rel=1e-12)
    assert result.parts[0].noise_scale == pytest.approx(math.sqrt(2) * z * 2.0)


def test_mean_is_accurate_for_large_n() -> None:
    data = np.random.default_rng(6).uniform(0, 10, size=100_000)
    value = Mean(lower=0.0, upper=10.0, epsilon=1.0).run(data, rng=np.random.default_rng(7)).value
    # noise: sum ~ Lap(10), count ~ Lap(2) → error ≪ 0.01 except with probability < 1e-6
    assert value == pytest.approx(data.mean(), abs=0.01)


def test_histogram_counts_in_declared_order() -> None:
    query = Histogram(categories=("x", "y", "z"), epsilon=HUGE_EPSILON)
    result = query.run(np.array(["z", "x", "z", "z"]), rng=np.random.default_rng(8))
    np.testing.assert_array_equal(result.value, [1, 0, 3])
    assert result.categories == ("x", "y", "z")
    ints = Histogram(categories=(3, 1), epsilon=HUGE_EPSILON, noise="laplace")
    np.testing.assert_allclose(
        ints.run(np.array([1, 1, 3]), rng=np.random.default_rng(9)).value, [1, 2], atol=1e-6
    )


def test_histogram_drops_undeclared_categories_and_missing_values() -> None:
    np.testing.assert_array_equal(
        Histogram(categories=("x",), epsilon=1.0).counts(np.array(["x", "w"])), [1]
    )
    data = np.array(["x", None, "y", float("nan"), "w"], dtype=object)
    counts = Histogram(categories=("x", "y"), epsilon=1.0).counts(data)
    np.testing.assert_array_equal(counts, [1, 1])
    other = Histogram(categories=("x", "y"), epsilon=1.0, other=True)
    np.testing.assert_array_equal(other.counts(data), [1, 1, 1])


def test_histogram_gaussian_event() -> None:
    query = Histogram(categories=("a", "b"), epsilon=2.0, noise="gaussian", delta=1e-7)
    assert query.privacy == dpkit.GaussianDP(
        noise_multiplier=analytic_gaussian_sigma(2.0, 1e-7), delta=1e-7
    )


# --- quantile ------------------------------------------------------------------------------------


def quantile_log_density(
    v: np.ndarray, data: np.ndarray, q: float, lo: float, hi: float, eps: float
) -> np.ndarray:
    """Independent: density ∝ exp(−ε|#{x < v} − qn|/2) on [lo, hi], normalised exactly."""
    x = np.clip(data, lo, hi)
    n = len(x)

    def utility(points: np.ndarray) -> np.ndarray:
        below = (x[None, :] < points[:, None]).sum(axis=1)
        return -np.abs(below - q * n)

    breaks = np.unique(np.concatenate(([lo, hi], x)))
    mids = 0.5 * (breaks[:-1] + breaks[1:])
    norm = np.sum(np.diff(breaks) * np.exp(eps * utility(mids) / 2))
    return eps * utility(v) / 2 - np.log(norm)


def test_quantile_is_epsilon_dp_under_add_remove() -> None:
    """Log-density ratio between D and D ∪ {x} stays ≤ ε for every v (grid off the data)."""
    rng = np.random.default_rng(10)
    eps, lo, hi = 0.7, 0.0, 10.0
    for q in (0.0, 0.25, 0.5, 0.9, 1.0):
        for _ in range(10):
            data = np.round(rng.uniform(-2, 12, size=rng.integers(0, 15)), 1)
            extra = np.append(data, np.round(rng.uniform(-2, 12), 1))
            v = np.linspace(lo, hi, 997) + 1e-4
            v = v[v < hi]
            ratio = quantile_log_density(v, data, q, lo, hi, eps) - quantile_log_density(
                v, extra, q, lo, hi, eps
            )
            assert np.max(np.abs(ratio)) <= eps + 1e-9


def test_quantile_sampler_matches_density() -> None:
    """KS test of 5,000 releases against the CDF of the piecewise-constant density."""
    data = np.array([1.0, 2.0, 2.0, 3.5, 7.0, 9.0, 15.0])
    query = Quantile(q=0.5, lower=0.0, upper=10.0, epsilon=1.0)
    edges, log_w = query.log_weights(data)
    w = np.exp(log_w - log_w.max())
    cum = np.concatenate(([0.0], np.cumsum(w))) / w.sum()

    def cdf(v: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, len(w) - 1)
        width = edges[i + 1] - edges[i]
        frac = np.where(width > 0, (v - edges[i]) / np.where(width > 0, width, 1), 1.0)
        return np.clip(cum[i] + (cum[i + 1] - cum[i]) * frac, 0, 1)

    # the density used by the sampler agrees with the independent formula
    mids = 0.5 * (edges[:-1] + edges[1:])[np.diff(edges) > 0]
    independent = quantile_log_density(mids, data, 0.5, 0.0, 10.0, 1.0)
    i = np.searchsorted(edges, mids) - 1
    ours = log_w[i] - np.log(np.diff(edges)[i]) - np.log(np.sum(np.exp(log_w)))
    np.testing.assert_allclose(ours, independent, rtol=1e-10, atol=1e-12)

    rng = np.random.default_rng(11)
    values = np.array([query.run(data, rng=rng).value for _ in range(5_000)])
    assert np.all((values >= 0.0) & (values <= 10.0))
    assert stats.kstest(values, cdf).pvalue > ALPHA


def test_quantile_handles_empty_data_and_drop() -> None:
    rng = np.random.default_rng(12)
    value = Quantile(q=0.5, lower=-1.0, upper=1.0, epsilon=1.0).run(np.array([]), rng=rng).value
    assert -1.0 <= value <= 1.0
    value = (
        Quantile(q=0.5, lower=0.0, upper=100.0, epsilon=5.0, nan="drop")
        .run(np.concatenate((np.linspace(40.0, 60.0, 201), [np.nan] * 5)), rng=rng)
        .value
    )
    # Pr[more than 20 ranks (2.0) from the median] ≤ 2·(100/0.1)·e^(−2.5·20) < 1e-17
    assert value == pytest.approx(50.0, abs=2.0)


def test_queries_are_registered_by_name(registry: dpkit.registry.Registry) -> None:
    from dpkit_central import QUERIES

    assert set(QUERIES) == {Count, Sum, Mean, Histogram, Quantile}
    queries = getattr(registry, "queries", None)
    if queries is not None:  # the query hook (another issue) is present
        assert {"count", "sum", "mean", "histogram", "quantile"} <= set(queries)


@pytest.mark.parametrize(
    ("query", "level"),
    [
        (Count(epsilon=0.7, noise="laplace"), 0.9),
        (Count(epsilon=0.7), 0.9),
        (Count(epsilon=0.7, noise="gaussian", delta=1e-5), 0.8),
    ],
)
def test_noise_intervals_cover_at_their_level(query: Any, level: float) -> None:
    """Coverage of the exact count over 4000 releases: binomial test at 1e-6, and at least the
    nominal level (geometric intervals are conservative by construction)."""
    data = np.arange(50)
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(4000):
        low, high = query.run(data, rng=rng).confidence_interval(level)
        hits += low <= 50 <= high
    assert stats.binomtest(hits, 4000, level, alternative="less").pvalue > 1e-6
    if query.noise != "geometric":
        assert stats.binomtest(hits, 4000, level).pvalue > 1e-6


def test_mean_has_no_symmetric_noise_interval() -> None:
    """A mean is not answer + noise: its interval is the ratio interval
    (tests/unit/central/test_intervals.py), never value ± a noise half-width."""
    result = Mean(lower=0.0, upper=1.0, epsilon=1.0).run(
        np.array([0.5]), rng=np.random.default_rng(1)
    )
    assert result.noise_half_width(0.95) is None


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_secure_histogram_covers_the_rounding_of_one_changed_cell(noise: str) -> None:
    """Adding or removing a record moves one cell of a histogram, so its secure lattice noise
    is that of one changed coordinate (t = (Δ₁/g + 1)/ε), not of all d cells: the release
    equals the mechanism's own release with ``changed=1`` on the same keyed stream, and the
    reported noise and the accuracy preview are those of one coordinate."""
    delta = 1e-6 if noise == "gaussian" else None
    query = Histogram(categories=tuple(range(200)), epsilon=0.5, noise=noise, delta=delta)
    data = np.array([1, 2, 2, 7, 199, 199, 199])
    key = bytes(range(32))  # a fixed key: reproducible streams, for tests only
    got = query.run(data, rng=dpkit.SecureRandom.from_key(key))
    mechanism = query.mechanism
    expected = mechanism.randomize(
        query.counts(data).astype(np.float64), rng=dpkit.SecureRandom.from_key(key), changed=1
    )
    np.testing.assert_array_equal(got.value, expected)
    one, all_cells = mechanism.noise_for(None, 1), mechanism.noise_for(None, 200)
    assert one.variance < all_cells.variance
    assert got.noise == one
    assert query.accuracy(0.05).noise == one


def test_a_release_prints_its_value_and_interval() -> None:
    """``print`` shows the value with the interval the result computes: ± its noise's
    half-width, a mean's [lower, upper], a quantile's rank bound, a histogram per category."""
    from dpkit._summary import number

    x = np.random.default_rng(0).uniform(0, 10, 500)
    rng = np.random.default_rng(1)
    count = Count(epsilon=1.0).run(x, rng=rng)
    half = count.noise_half_width(0.95)
    assert str(count).splitlines()[0] == (
        f"count (geometric): {number(float(count.value))} ±{number(half)} (95%)"
    )
    mean = Mean(lower=0, upper=10, epsilon=1.0).run(x, rng=rng)
    low, high = mean.confidence_interval(0.95)
    assert f"[{number(low)}, {number(high)}] (95%)" in str(mean)
    median = Quantile(q=0.5, lower=0, upper=10, epsilon=1.0).run(x, rng=None)
    assert "ranks (95%)" in str(median) and "rank guarantee" in str(median)
    fast = Quantile(q=0.5, lower=0, upper=10, epsilon=1.0).run(x, rng=rng)  # no guarantee
    assert str(fast) == f"quantile (exponential): {number(float(fast.value))}"
    histogram = Histogram(categories=["a", "b"], epsilon=1.0).run(
        np.array(["a", "b", "a"]), rng=rng
    )
    lines = str(histogram).splitlines()
    assert lines[1].split() == ["category", "value", "(95%)"]
    assert [line.split()[0] for line in lines[3:5]] == ["a", "b"]
    assert all(f"±{number(histogram.noise_half_width(0.95))}" in line for line in lines[3:5])

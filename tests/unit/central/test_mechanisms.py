"""Central additive mechanisms: laplace, gaussian, geometric (registration, privacy, samplers, errors).

Statistical tests use fixed seeds and reject at p < 1e-6, so each has a false-positive rate
of at most 1e-6 (the seeds are never changed to make a test pass).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpkit_central import Gaussian, Geometric, Laplace
from scipy import integrate, stats

import dpkit

ALPHA = 1e-6
CENTRAL = (
    "laplace",
    "gaussian",
    "geometric",
    "exponential",
    "report_noisy_max",
    "permute_and_flip",
)


# --- registration ------------------------------------------------------------------------------


def test_every_central_mechanism_is_registered_by_the_central_plugin(
    registry: dpkit.registry.Registry,
) -> None:
    for name in CENTRAL:
        info = registry.info(name)
        assert info.kind == "central"
        assert info.provenance.plugin == "central"


def test_construct_by_name() -> None:
    mech = dpkit.mechanism("laplace", epsilon=1, sensitivity=1)
    assert isinstance(mech, Laplace)
    assert mech.scale == 1.0
    assert isinstance(dpkit.mechanism("gaussian", epsilon=1, delta=1e-5), Gaussian)
    assert isinstance(dpkit.mechanism("geometric", epsilon=0.5), Geometric)


@pytest.mark.parametrize("name", CENTRAL)
def test_constructible_from_typical_parameters(
    registry: dpkit.registry.Registry, name: str
) -> None:
    """The harness draws parameters with a ``typical`` range and leaves the others at defaults."""
    cls = registry.info(name).cls
    params = {k: spec.typical[0] for k, spec in cls.parameters().items() if spec.typical}
    mech = cls(**params)
    assert mech.privacy.epsilon <= params["epsilon"] + 1e-12
    params = {k: spec.typical[1] for k, spec in cls.parameters().items() if spec.typical}
    assert cls(**params).privacy.delta < 1


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["laplace", "geometric", "gaussian"])
@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, "1"])
def test_sensitivity_must_be_positive_and_finite(name: str, bad: object) -> None:
    extra = {"delta": 1e-5} if name == "gaussian" else {}
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism(name, epsilon=1.0, sensitivity=bad, **extra)
    assert info.value.parameter == "sensitivity"
    assert ">= 1e-100" in str(info.value) and name in str(info.value)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-5, 2.0, math.nan])
def test_gaussian_delta_must_be_in_the_open_unit_interval(bad: float) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("gaussian", epsilon=1.0, delta=bad)
    assert info.value.parameter == "delta"
    assert "< 1" in str(info.value)


def test_gaussian_delta_is_required() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="delta"):
        dpkit.mechanism("gaussian", epsilon=1.0)


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf], [-math.inf, 0.0]])
@pytest.mark.parametrize("cls", [Laplace, Gaussian])
def test_non_finite_answers_are_refused(cls: type, bad: list[float]) -> None:
    mech = cls(epsilon=1.0, delta=1e-5) if cls is Gaussian else cls(epsilon=1.0)
    with pytest.raises(dpkit.InvalidData, match="not finite"):
        mech.randomize(np.array(bad), rng=np.random.default_rng(0))


def test_huge_but_finite_answers_are_accepted() -> None:
    """The fast path sums the answers; an overflowing sum must not be mistaken for inf."""
    out = Laplace(epsilon=1.0).randomize(np.array([1e308, 1e308]), rng=np.random.default_rng(0))
    assert np.isfinite(out).all()


def test_geometric_refuses_fractional_answers() -> None:
    with pytest.raises(dpkit.InvalidData, match="integers"):
        Geometric(epsilon=1.0).randomize(np.array([1.5]), rng=np.random.default_rng(0))
    out = Geometric(epsilon=1.0).randomize(np.array([1.0, 2.0]), rng=np.random.default_rng(0))
    assert out.dtype == np.int64


@pytest.mark.parametrize("bad", [42, "seed", np.random.RandomState(0)])
def test_rng_must_be_a_generator_or_secure(bad: object) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        Laplace(epsilon=1.0).randomize([1.0], rng=bad)


def test_shapes_and_dtypes_are_kept() -> None:
    rng = np.random.default_rng(1)
    assert Laplace(epsilon=1.0).randomize(np.zeros((3, 4)), rng=rng).shape == (3, 4)
    assert Gaussian(epsilon=1.0, delta=1e-5).randomize(5.0, rng=rng).shape == ()
    assert Geometric(epsilon=1.0).randomize(np.zeros(7, dtype=np.int32), rng=rng).dtype == np.int64


# --- exact privacy from the declared distributions ----------------------------------------------


@pytest.mark.parametrize("epsilon,sensitivity", [(0.1, 1.0), (1.0, 3.0), (5.0, 0.5)])
def test_laplace_log_density_ratio_is_at_most_epsilon_and_tight(
    epsilon: float, sensitivity: float
) -> None:
    mech = Laplace(epsilon=epsilon, sensitivity=sensitivity)
    rng = np.random.default_rng(2)
    x = rng.normal(size=200)
    x_prime = x + rng.uniform(-sensitivity, sensitivity, size=200)
    y = np.linspace(-50, 50, 2001)[:, None]
    ratio = mech.log_probability(y, x) - mech.log_probability(y, x_prime)
    assert np.max(np.abs(ratio)) <= epsilon + 1e-9
    worst = mech.log_probability(100.0, 0.0) - mech.log_probability(100.0, -sensitivity)
    assert worst == pytest.approx(epsilon, rel=1e-12)


def test_laplace_density_integrates_to_one() -> None:
    mech = Laplace(epsilon=0.7, sensitivity=2.0)
    total, _ = integrate.quad(lambda y: math.exp(mech.log_probability(y, 1.0)), -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("epsilon,sensitivity", [(0.2, 1.0), (1.0, 1.0), (3.0, 4.0)])
def test_geometric_pmf_is_normalised_and_epsilon_dp(epsilon: float, sensitivity: float) -> None:
    mech = Geometric(epsilon=epsilon, sensitivity=sensitivity)
    k = np.arange(-5000, 5001)
    assert np.exp(mech.log_probability(k, 0)).sum() == pytest.approx(1.0, abs=1e-12)
    # Independent pmf: P[k] ∝ exp(−ε|k|/Δ), normalised by the geometric series.
    a = math.exp(-epsilon / sensitivity)
    assert np.exp(mech.log_probability(3, 0)) == pytest.approx((1 - a) / (1 + a) * a**3, rel=1e-12)
    worst = 0.0
    for shift in range(1, int(sensitivity) + 1):
        worst = max(
            worst,
            float(np.max(np.abs(mech.log_probability(k, 0) - mech.log_probability(k, shift)))),
        )
    assert worst <= epsilon + 1e-9
    assert worst == pytest.approx(epsilon, rel=1e-9)
    assert mech.log_probability(0.5, 0) == -np.inf


def _hockey_stick(mech: Gaussian, epsilon: float) -> float:
    """δ(ε) = ∫ max(0, p(y|0) − e^ε p(y|Δ)) dy from the declared log-densities, by quadrature."""
    s, d = mech.sigma, mech.sensitivity

    def integrand(y: float) -> float:
        p = mech.log_probability(y, 0.0)
        q = mech.log_probability(y, d)
        return max(0.0, math.exp(p) - math.exp(epsilon + q))

    # The integrand is positive only where the log-ratio exceeds ε, i.e. y < d/2 − εs²/d.
    edge = d / 2 - epsilon * s**2 / d
    value, _ = integrate.quad(integrand, edge - 40 * s, edge, epsabs=1e-16, epsrel=1e-10, limit=200)
    return float(value)


@pytest.mark.parametrize(
    "epsilon,delta,calibration",
    [
        (0.5, 1e-5, "analytic"),
        (1.0, 1e-5, "analytic"),
        (2.0, 1e-6, "analytic"),
        (0.5, 1e-5, "classic"),
    ],
)
def test_gaussian_hockey_stick_divergence_is_at_most_delta(
    epsilon: float, delta: float, calibration: str
) -> None:
    """Numerical δ(ε) of the declared densities at the chosen σ never exceeds the claimed δ."""
    mech = Gaussian(epsilon=epsilon, delta=delta, sensitivity=2.0, calibration=calibration)
    measured = _hockey_stick(mech, epsilon)
    assert measured <= delta * (1 + 1e-6)
    if calibration == "analytic":  # tight: the analytic σ is the smallest that works
        assert measured == pytest.approx(delta, rel=1e-4)


def test_gaussian_accounting_event() -> None:
    mech = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=3.0)
    event = mech.privacy
    assert isinstance(event, dpkit.GaussianDP)
    assert event.noise_multiplier == pytest.approx(mech.sigma / 3.0)
    assert event.delta == 1e-5
    assert event.epsilon == pytest.approx(1.0, rel=1e-6)


# --- samplers against the declared distributions -----------------------------------------------


def test_laplace_sampler_matches_declared_distribution() -> None:
    """KS test at α = 1e-6, plus a power check: a 30% wrong scale is rejected."""
    mech = Laplace(epsilon=0.5, sensitivity=2.0)
    x = np.full(200_000, 3.0)
    y = mech.randomize(x, rng=np.random.default_rng(11))
    assert stats.kstest(y, stats.laplace(loc=3.0, scale=mech.scale).cdf).pvalue > ALPHA
    assert stats.kstest(y, stats.laplace(loc=3.0, scale=1.3 * mech.scale).cdf).pvalue < ALPHA


def test_gaussian_sampler_matches_declared_distribution() -> None:
    mech = Gaussian(epsilon=1.0, delta=1e-6)
    y = mech.randomize(np.full(200_000, -1.0), rng=np.random.default_rng(12))
    assert stats.kstest(y, stats.norm(loc=-1.0, scale=mech.sigma).cdf).pvalue > ALPHA
    assert stats.kstest(y, stats.norm(loc=-1.0, scale=0.7 * mech.sigma).cdf).pvalue < ALPHA


@pytest.mark.parametrize("epsilon,sensitivity", [(0.3, 1.0), (2.0, 1.0), (1.0, 3.0)])
def test_geometric_sampler_matches_declared_pmf(epsilon: float, sensitivity: float) -> None:
    """χ² goodness of fit at α = 1e-6 on the bins with expected count ≥ 20 (tails pooled)."""
    mech = Geometric(epsilon=epsilon, sensitivity=sensitivity)
    n = 200_000
    y = mech.randomize(np.full(n, 10), rng=np.random.default_rng(13)) - 10
    support = np.arange(-400, 401)
    expected = n * np.exp(mech.log_probability(support, 0))
    keep = expected >= 20
    lo, hi = support[keep].min(), support[keep].max()
    observed = np.array(
        [np.sum(y < lo)] + [np.sum(y == k) for k in range(lo, hi + 1)] + [np.sum(y > hi)]
    )
    inner = expected[(support >= lo) & (support <= hi)]
    exp_bins = np.concatenate(
        ([expected[support < lo].sum()], inner, [expected[support > hi].sum()])
    )
    exp_bins = exp_bins * n / exp_bins.sum()
    mask = exp_bins > 0
    assert stats.chisquare(observed[mask], exp_bins[mask]).pvalue > ALPHA
    assert np.var(y) == pytest.approx(mech.variance, rel=0.05)


# --- secure mode (dpkit's SecureRandom) ----------------------------------------------------------


def secure_rng(tag: bytes) -> object:
    from dpkit.randomness import SecureRandom

    return SecureRandom.from_key(tag.ljust(32, b"\0"))  # fixed key: reproducible, tests only


def test_geometric_secure_mode_uses_the_exact_sampler_and_matches_pmf() -> None:
    """χ² at α = 1e-6 of 50,000 secure draws against the declared pmf."""
    mech = Geometric(epsilon=0.8, sensitivity=1.0)
    n = 50_000
    y = mech.randomize(np.full(n, 3), rng=secure_rng(b"central-geometric")) - 3  # type: ignore[arg-type]
    assert y.dtype == np.int64
    support = np.arange(-12, 13)
    expected = n * np.exp(mech.log_probability(support, 0))
    observed = np.array([np.sum(y == k) for k in support])
    tail_expected = n - expected.sum()
    tail_observed = n - observed.sum()
    p = stats.chisquare(
        np.append(observed, tail_observed), np.append(expected, tail_expected)
    ).pvalue
    assert p > ALPHA


def test_gaussian_secure_generator_releases_on_the_lattice() -> None:
    """Secure mode no longer refuses: it releases multiples of g (details and the privacy
    check in test_central_secure_gaussian.py)."""
    mech = Gaussian(epsilon=1.0, delta=1e-5)
    out = mech.randomize([1.0, 1 / 3], rng=secure_rng(b"central-float"))
    steps = out / mech.lattice_step()
    assert np.array_equal(steps, np.round(steps))

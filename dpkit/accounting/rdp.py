"""Rényi differential privacy (Mironov 2017) on a dense grid of orders.

A mechanism is (α, D_α)-RDP if the Rényi divergence of order α between its outputs on
neighbouring inputs is at most D_α. D_α adds up under adaptive composition (Mironov 2017,
Proposition 1), so each event contributes a curve over the order grid and a composition is the
count-weighted sum. Curves (add/remove neighbours, Δ = 1):

* Gaussian, noise multiplier σ: D_α = α/(2σ²) (Mironov 2017, Table II).
* Laplace at ε (scale 1/ε): D_α = ln(α/(2α−1)·e^{(α−1)ε} + (α−1)/(2α−1)·e^{−αε})/(α−1)
  (Mironov 2017, Table II).
* Any pure ε-DP mechanism is a post-processing of binary randomized response at ε (Kairouz, Oh &
  Viswanath 2015, Theorem 2.4), so D_α ≤ ln((e^{αε} + e^{(1−α)ε})/(e^ε + 1))/(α−1), which is
  k-RR's curve at k = 2; k-ary RR: ln((e^{αε} + e^{(1−α)ε} + k − 2)/(e^ε + k − 1))/(α−1).
* ε-bounded range: min(α·ε²/8, the randomized-response curve) (Cesar & Rogers 2021, Section 3:
  ε-BR ⇒ (ε²/8)-zCDP, i.e. D_α ≤ αε²/8; and ε-BR is ε-DP).
* A composite event: the sum of its parts' curves.
* Poisson-subsampled Gaussian at rate q (Mironov, Talwar & Zhang 2019, "Rényi Differential
  Privacy of the Sampled Gaussian Mechanism", Section 3.3), D_α = ln A_α/(α − 1) with
  A_α = E_{z∼N(0,σ²)}[(1 − q + q·e^{(2z−1)/(2σ²)})^α]. Integer α ≥ 2:
  A_α = Σ_{j=0}^{α} C(α, j)(1 − q)^{α−j} q^j e^{(j² − j)/(2σ²)}. Fractional α (up to 12, where
  the optimum of a DP-SGD composition usually is, and down to the orders just above 1, where
  the optimum of a small-σ, many-step composition is): split at z₀ = σ² ln(1/q − 1) + 1/2, where
  the two terms are equal, and expand each side in a convergent binomial series,
  A_α = Σ_{j≥0} C(α, j)[(1 − q)^{α−j} q^j e^{(j²−j)/(2σ²)} Φ((z₀ − j)/σ)
  + (1 − q)^j q^{α−j} e^{((α−j)²−(α−j))/(2σ²)} Φ((α − j − z₀)/σ)], with the signs of the
  generalised binomial coefficients kept (dp-accounting 0.6.0 drops them, which over-states
  A_α slightly); the sum stops on a positive term below 10⁻¹² of the largest (the terms
  alternate and shrink there, so that partial sum is an upper bound) and is moved up by a
  relative 10⁻¹² (in ln A_α). The series holds for every real α > 1 (ibid., Section 3.3);
  below α = 2 its terms shrink like j^{−α−2}, so it still stops after some thousand terms.
  A_α is the remove direction, D_α(qN(1, σ²) + (1 − q)N(0, σ²) ‖ N(0, σ²)); for add/remove
  neighbours the add direction must be below it, which Mironov, Talwar & Zhang prove (ibid.,
  Section 3) and the tests check by quadrature at orders below 2. Sampling without replacement uses the same pair (Zhu, Dong & Wang
  2022, Section 5), with σ stated under replacement.
* A subsampled pure, Laplace, RR or bounded-range event: the exact curve of the subsampled
  randomized-response pair at ε (Kairouz, Oh & Viswanath 2015 make RR dominate every ε-DP
  pair; Zhu, Dong & Wang 2022 give the subsampled pairs (qP + (1 − q)Q, Q) and
  (P, (1 − q)P + qQ)), the larger of the two directions. A pair that dominates another in
  every hockey-stick divergence is, by Blackwell's theorem (Dong, Roth & Su 2022,
  Theorem 2.10), a post-processing of it, so its Rényi divergence is at least as large.

Conversion to (ε, δ) (every order gives a valid bound; the smallest is reported):
ε = min_α D_α + ln((α − 1)/α) − (ln δ + ln α)/(α − 1)  (Balle, Barthe, Gaboardi, Hsu & Sato
2020, "Hypothesis Testing Interpretations and Rényi Differential Privacy", Theorem 21), and the
classic ε = D_α + ln(1/δ)/(α − 1) (Mironov 2017, Proposition 3).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    check_delta,
    inverse_square,
    normalise,
)
from dpkit.accounting._losslaw import randomized_response_law, subsample
from dpkit.privacy import (
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
    _log_phi,
)

__all__ = ["ORDERS", "compose_rdp", "event_rdp", "rdp_epsilon"]

#: The Rényi orders: dense near 1 (and steps of 0.01 up to 2), steps of 0.1 up to 64, every
#: integer to 256, then sparser up to 4096 (dp_accounting's default grid has 156 orders up to
#: 1024; this one has ~1000).
ORDERS: NDArray[np.float64] = np.unique(
    np.round(
        np.concatenate(
            [
                1.0 + np.geomspace(1e-4, 1.0, 60)[:-1],
                np.arange(101, 200) / 100.0,
                np.arange(20, 641) / 10.0,
                np.arange(65, 257, dtype=float),
                np.array([288, 320, 384, 448, 512, 640, 768, 1024, 1536, 2048, 3072, 4096.0]),
            ]
        ),
        12,
    )
)


def _log_binomial_row(n: int) -> NDArray[np.float64]:
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))])
    row: NDArray[np.float64] = log_factorial[n] - log_factorial - log_factorial[::-1]
    return row


def _rr_curve(epsilon: float, orders: NDArray[np.float64], k: int = 2) -> NDArray[np.float64]:
    a = orders
    numerator = np.logaddexp(a * epsilon, (1 - a) * epsilon)
    if k > 2:
        numerator = np.logaddexp(numerator, math.log(k - 2))
    curve: NDArray[np.float64] = np.maximum(
        (numerator - np.logaddexp(epsilon, math.log(k - 1))) / (a - 1), 0.0
    )
    return curve


def _laplace_curve(epsilon: float, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    a = orders
    value = np.logaddexp(
        np.log(a / (2 * a - 1)) + (a - 1) * epsilon, np.log((a - 1) / (2 * a - 1)) - a * epsilon
    ) / (a - 1)
    return np.maximum(value, 0.0)


_lgamma = np.frompyfunc(math.lgamma, 1, 1)
_log_phi_each = np.frompyfunc(_log_phi, 1, 1)
_LOG_PHI: list[Any] = []


def _log_phi_array(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """ln Φ elementwise: scipy's ``log_ndtr`` when scipy is installed (vectorised; accurate to
    a few ulps in both tails), else :func:`dpkit.privacy._log_phi` value by value."""
    if not _LOG_PHI:
        try:
            from scipy.special import log_ndtr  # type: ignore[import-untyped]
        except ImportError:  # pragma: no cover - scipy comes with the test and audit extras
            log_ndtr = _log_phi_each
        _LOG_PHI.append(log_ndtr)
    return np.asarray(_LOG_PHI[0](x), dtype=np.float64)


@functools.lru_cache(maxsize=4096)
def _fractional_log_a(sigma: float, q: float, alpha: float) -> float:
    """ln A_α of the subsampled Gaussian at a fractional α (module docstring), rounded up.

    Beyond j = α + 1 the generalised binomial coefficients alternate in sign while both
    series' terms shrink (like j^{−α−2}), so a partial sum that ends on a positive term is an
    upper bound of the whole: the sum stops at such a term below 10⁻¹² of the largest.
    """
    z0 = sigma * sigma * math.log(1 / q - 1) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    two_var = 2 * sigma * sigma
    total, top = 0.0, -math.inf
    start = 0
    while start < 200_000:
        j = np.arange(start, start + 512, dtype=float)
        k = alpha - j
        # C(α, j) = Γ(α + 1)/(j! Γ(α − j + 1)); its sign is (−1)^{#{i < j : i > α}}
        log_c = math.lgamma(alpha + 1) - _lgamma(j + 1) - _lgamma(k + 1)
        sign = np.where(np.maximum(0, j - math.floor(alpha) - 1) % 2, -1.0, 1.0)
        t0 = log_c + k * log_1mq + j * log_q + (j * j - j) / two_var
        t0 = np.asarray(t0 + _log_phi_array((z0 - j) / sigma), dtype=float)
        t1 = log_c + j * log_1mq + k * log_q + (k * k - k) / two_var
        t1 = np.asarray(t1 + _log_phi_array((k - z0) / sigma), dtype=float)
        terms = np.logaddexp(t0, t1)
        if start == 0:
            top = float(terms.max())
        scaled = sign * np.exp(terms - top)
        partial = total + np.cumsum(scaled)
        done = (j > alpha + 1) & (sign > 0) & (terms < top - 27.6)  # below 1e-12 of the top
        if done.any():
            total = float(partial[int(np.argmax(done))])
            return top + math.log(total) + 1e-12 if total > 0 else math.inf
        total = float(partial[-1])
        start += 512
    return math.inf


#: Fractional orders up to this one are summed for the subsampled Gaussian.
_FRACTIONAL_MAX = 12.0


def _subsampled_gaussian_curve(
    sigma: float, q: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    out = np.full(orders.shape, np.inf)
    if q == 1:
        return orders * (0.5 * inverse_square(sigma))  # α/(2σ²)
    integer = (orders >= 2) & (np.abs(orders - np.round(orders)) < 1e-9)
    log_q, log_1mq = math.log(q), math.log1p(-q)
    if not inverse_square(sigma) < 1e300:  # σ below ~1e-150: no privacy at any order
        return out
    for index in np.flatnonzero(integer):
        alpha = round(float(orders[index]))
        j = np.arange(alpha + 1, dtype=float)
        terms = (
            _log_binomial_row(alpha)
            + (alpha - j) * log_1mq
            + j * log_q
            + (j * j - j) / (2 * sigma**2)
        )
        top = terms.max()
        if not math.isfinite(top):
            continue
        log_a = top + math.log(np.exp(terms - top).sum())
        out[index] = max(log_a, 0.0) / (alpha - 1)
    fractional = ~integer & (orders > 1) & (orders <= _FRACTIONAL_MAX)
    if sigma >= 0.1:  # below, e^{(j²−j)/(2σ²)} overflows long before the series settles
        for index in np.flatnonzero(fractional):
            order = float(orders[index])
            out[index] = max(_fractional_log_a(sigma, q, order), 0.0) / (order - 1)
    return out


def _discrete_curve(
    atoms: tuple[tuple[float, float], ...], orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """D_α = ln E_P[e^{(α−1)L}]/(α − 1) of a pair whose loss takes finitely many values."""
    loss = np.array([a for a, _ in atoms])
    log_p = np.log(np.array([p for _, p in atoms]))
    values = log_p[None, :] + (orders[:, None] - 1) * loss[None, :]
    top = values.max(axis=1)
    log_sum = top + np.log(np.exp(values - top[:, None]).sum(axis=1))
    curve: NDArray[np.float64] = np.maximum(log_sum / (orders - 1), 0.0)
    return curve


def _subsampled_pure_curve(event: SubsampledDP, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    inner = event.event
    k = inner.k if isinstance(inner, RandomizedResponseDP) else 2
    base = randomized_response_law(inner.epsilon, k)
    remove, add = (
        _discrete_curve(subsample(base, event.sampling_rate, d).atoms, orders)
        for d in ("remove", "add")
    )
    return np.maximum(remove, add)


def event_rdp(event: PrivacyEvent, orders: NDArray[np.float64] = ORDERS) -> NDArray[np.float64]:
    """D_α of one use of ``event`` at each order (``inf`` where no bound is known)."""
    orders = np.asarray(orders, dtype=float)
    if isinstance(event, CompositeDP):
        return np.asarray(sum(event_rdp(part, orders) for part in event.parts), dtype=float)
    if isinstance(event, GaussianDP):
        return orders * (0.5 * inverse_square(event.noise_multiplier))  # α/(2σ²)
    pure = (PureDP, RandomizedResponseDP, LaplaceDP, BoundedRangeDP)
    if isinstance(event, pure) and event.epsilon > 700:
        # e^ε overflows a float: use D_α ≤ ε, true of any ε-DP pair (Mironov 2017, Prop. 3)
        return np.full(orders.shape, event.epsilon)
    if isinstance(event, PureDP):
        return _rr_curve(event.epsilon, orders)
    if isinstance(event, RandomizedResponseDP):
        return np.minimum(
            _rr_curve(event.epsilon, orders, event.k), _rr_curve(event.epsilon, orders)
        )
    if isinstance(event, LaplaceDP):
        return np.minimum(_laplace_curve(event.epsilon, orders), _rr_curve(event.epsilon, orders))
    if isinstance(event, BoundedRangeDP):
        eps = event.epsilon
        return np.minimum(orders * (eps * eps / 8), _rr_curve(eps, orders))
    if isinstance(event, SubsampledDP):
        inner = event.event
        if isinstance(inner, GaussianDP):
            return _subsampled_gaussian_curve(inner.noise_multiplier, event.sampling_rate, orders)
        if isinstance(inner, pure) and inner.epsilon <= 500:
            return _subsampled_pure_curve(event, orders)
        if isinstance(inner, pure):
            return _rr_curve(event.epsilon, orders)
    raise NotApplicable("rdp", event, "RDP covers pure-DP, Gaussian and subsampled events")


def rdp_epsilon(
    rdp: NDArray[np.float64], delta: float, orders: NDArray[np.float64] = ORDERS
) -> tuple[float, float]:
    """(ε, optimal order) from an RDP curve at ``delta`` (Balle et al. 2020 Thm 21; Mironov Prop 3),
    each order's ε moved up by 2⁻⁴⁴ of its terms' magnitudes (about 256 float roundings of
    them: the curves' own evaluation and the conversion), so float rounding never lowers it."""
    a = np.asarray(orders, dtype=float)
    log_delta = math.log(delta)
    with np.errstate(invalid="ignore"):
        improved = rdp + np.log1p(-1 / a) - (log_delta + np.log(a)) / (a - 1)
        classic = rdp - log_delta / (a - 1)
        # the float evaluation's rounding error, bounded by 2⁻⁴⁴ of its terms' magnitudes
        margin = 2.0**-44 * (
            np.abs(rdp) + np.abs(np.log1p(-1 / a)) + np.abs((log_delta + np.log(a)) / (a - 1))
        )
    eps = np.fmin(improved, classic) + margin
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(a[i])


def compose_rdp(
    events: Events | Any, *, delta: float, orders: NDArray[np.float64] = ORDERS
) -> Bound:
    """Sum the events' RDP curves (times their counts) and convert at ``delta``."""
    target = check_delta(delta, owner="compose_rdp")
    total = np.zeros(len(orders))
    with np.errstate(over="ignore"):  # a sum beyond the float range is +inf: ε = inf
        for event, count in normalise(events):
            total = total + count * event_rdp(event, orders)
    eps, order = rdp_epsilon(total, target, orders)
    return Bound(epsilon=eps, delta=target, method="rdp", detail={"order": order})

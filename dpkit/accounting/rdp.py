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
* Poisson-subsampled Gaussian at rate q, integer α ≥ 2 (Mironov, Talwar & Zhang 2019, "Rényi
  Differential Privacy of the Sampled Gaussian Mechanism", Section 3.3):
  A_α = Σ_{j=0}^{α} C(α, j)(1 − q)^{α−j} q^j e^{(j² − j)/(2σ²)},  D_α = ln A_α/(α − 1).
  Fractional orders are not used for it (they would need MTZ19's series; the bound at the
  integer orders is valid on its own).
* Subsampled pure ε-DP: pure ln(1 + q(e^ε − 1))-DP (Balle, Barthe & Gaboardi 2018, Theorem 8).

Conversion to (ε, δ) (every order gives a valid bound; the smallest is reported):
ε = min_α D_α + ln((α − 1)/α) − (ln δ + ln α)/(α − 1)  (Balle, Barthe, Gaboardi, Hsu & Sato
2020, "Hypothesis Testing Interpretations and Rényi Differential Privacy", Theorem 21), and the
classic ε = D_α + ln(1/δ)/(α − 1) (Mironov 2017, Proposition 3).
"""

from __future__ import annotations

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
from dpkit.privacy import (
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["ORDERS", "compose_rdp", "event_rdp", "rdp_epsilon"]

#: The Rényi orders: dense near 1, steps of 0.1 up to 64, every integer to 256, then sparser
#: up to 4096 (dp_accounting's default grid has 156 orders up to 1024; this one has ~900).
ORDERS: NDArray[np.float64] = np.unique(
    np.round(
        np.concatenate(
            [
                1.0 + np.geomspace(1e-4, 1.0, 60)[:-1],
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


def _subsampled_gaussian_curve(
    sigma: float, q: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    out = np.full(orders.shape, np.inf)
    if q == 1:
        return orders * (0.5 * inverse_square(sigma))  # α/(2σ²)
    integer = (orders >= 2) & (np.abs(orders - np.round(orders)) < 1e-9)
    log_q, log_1mq = math.log(q), math.log1p(-q)
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
        log_a = top + math.log(np.exp(terms - top).sum())
        out[index] = max(log_a, 0.0) / (alpha - 1)
    return out


def event_rdp(event: PrivacyEvent, orders: NDArray[np.float64] = ORDERS) -> NDArray[np.float64]:
    """D_α of one use of ``event`` at each order (``inf`` where no bound is known)."""
    orders = np.asarray(orders, dtype=float)
    if isinstance(event, GaussianDP):
        return orders * (0.5 * inverse_square(event.noise_multiplier))  # α/(2σ²)
    if isinstance(event, (PureDP, RandomizedResponseDP, LaplaceDP)) and event.epsilon > 700:
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
    if isinstance(event, SubsampledDP):
        inner = event.event
        if isinstance(inner, GaussianDP):
            return _subsampled_gaussian_curve(inner.noise_multiplier, event.sampling_rate, orders)
        if isinstance(inner, (PureDP, LaplaceDP, RandomizedResponseDP)):
            return _rr_curve(event.epsilon, orders)
    raise NotApplicable("rdp", event, "RDP covers pure-DP, Gaussian and subsampled events")


def rdp_epsilon(
    rdp: NDArray[np.float64], delta: float, orders: NDArray[np.float64] = ORDERS
) -> tuple[float, float]:
    """(ε, optimal order) from an RDP curve at ``delta`` (Balle et al. 2020 Thm 21; Mironov Prop 3)."""
    a = np.asarray(orders, dtype=float)
    log_delta = math.log(delta)
    with np.errstate(invalid="ignore"):
        improved = rdp + np.log1p(-1 / a) - (log_delta + np.log(a)) / (a - 1)
        classic = rdp - log_delta / (a - 1)
    eps = np.fmin(improved, classic)
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

"""Privacy-loss distributions (PLD), discretised pessimistically and composed by FFT.

For a dominating pair (P, Q) of a mechanism the privacy loss is L = ln(P(o)/Q(o)) with o ~ P,
and the tight privacy profile is δ(ε) = P[L = ∞] + E[(1 − e^{ε − L})₊] (Sommer, Meiser &
Mohammadi 2019, "Privacy Loss Classes", Theorem 1). Under adaptive composition the losses of
the dominating pairs add, so the composed PLD is the convolution of the PLDs (Koskela, Jälkö
& Honkela 2020, Section 3; Doroshenko et al. 2022, "Connect the Dots", Section 2).

Discretisation: every loss value is rounded *up* to the grid h·ℤ. δ(ε) is increasing in each
loss value, so the rounded PLD, and any convolution of rounded PLDs, over-estimates δ(ε): the
reported ε is an upper bound up to floating-point error in the FFT (≈1e-16 per bin). Tails
below 1e-30 are moved pessimistically: a lower tail up to the first kept bin, an upper tail to
L = ∞. Dominating pairs used (add/remove or, for local mechanisms, any two inputs):

* pure ε-DP (and any (ε, δ)-DP): binary randomized response with an extra atom δ at L = ∞, the
  worst case of every (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath 2015, Theorem 2.4);
* k-ary RR: L = ε, 0, −ε with probabilities (e^ε, k − 2, 1)/(e^ε + k − 1);
* Laplace at ε (scale 1/ε, o ~ Lap(0, 1/ε), Q = Lap(1, 1/ε)): L = ε(|o − 1| − |o|), atoms
  P[L = ε] = 1/2, P[L = −ε] = e^{−ε}/2 and P[L ≤ l] = (e^{−(ε − l)/2} − e^{−ε})/2 on (−ε, ε);
* Gaussian with noise multiplier σ: L ~ N(μ²/2, μ²), μ = 1/σ (Balle & Wang 2018); Gaussians
  compose exactly (μ² adds) before being discretised once.

Each event is composed one use at a time (``count`` uses are count self-convolutions, by
repeated squaring): dp_accounting 0.6.0's PLD accountant composes a randomized-response event
once whatever its count; this backend does not.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.accounting._common import Bound, Events, NotApplicable, check_delta, normalise
from dpkit.privacy import (
    ApproximateDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["DiscretePLD", "compose_pld"]

_TAIL = 1e-30
_MAX_BINS = 1 << 20
_erfc = np.frompyfunc(math.erfc, 1, 1)


@attrs.frozen(eq=False)
class DiscretePLD:
    """pmf[i] is the mass of loss (offset + i)·h; ``infinity`` is the mass of L = ∞."""

    h: float
    offset: int
    pmf: NDArray[np.float64]
    infinity: float

    def delta(self, epsilon: float) -> float:
        """δ(ε) = P[L = ∞] + Σ_{L_i > ε} p_i (1 − e^{ε − L_i})."""
        losses = (self.offset + np.arange(len(self.pmf))) * self.h
        above = losses > epsilon
        return self.infinity + float(np.sum(self.pmf[above] * -np.expm1(epsilon - losses[above])))

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ delta (exact on the discrete distribution)."""
        if self.infinity > delta:
            return math.inf
        if self.delta(0.0) <= delta:
            return 0.0
        losses = (self.offset + np.arange(len(self.pmf))) * self.h
        lo, hi = int(np.searchsorted(losses, 0.0)), len(losses) - 1  # δ(losses[hi]) = infinity
        while hi - lo > 1:  # invariant: δ(losses[lo]) > delta ≥ δ(losses[hi])
            mid = (lo + hi) // 2
            if self.delta(float(losses[mid])) > delta:
                lo = mid
            else:
                hi = mid
        # on (L_lo, L_hi] the losses above ε are those ≥ L_hi: δ(ε) = ∞-mass + S1 − e^ε S2
        tail, tail_losses = self.pmf[hi:], losses[hi:]
        shift = float(tail_losses[0])
        s1 = float(tail.sum())
        s2 = float(np.sum(tail * np.exp(shift - tail_losses)))  # Σ p e^{−L}, scaled by e^{shift}
        need = self.infinity + s1 - delta
        if need <= 0 or s2 <= 0:
            return float(losses[lo])
        return max(float(losses[lo]), min(float(losses[hi]), shift + math.log(need / s2)))


def _from_atoms(
    losses: list[float], probs: list[float], h: float, infinity: float = 0.0
) -> DiscretePLD:
    index = np.ceil(np.asarray(losses) / h - 1e-9).astype(np.int64)
    lo = int(index.min())
    pmf = np.zeros(int(index.max()) - lo + 1)
    np.add.at(pmf, index - lo, probs)
    return DiscretePLD(h, lo, pmf, infinity)


def _from_cdf(
    lo_loss: float,
    hi_loss: float,
    cdf: Any,
    h: float,
    atoms: list[tuple[float, float]],
    infinity: float = 0.0,
) -> DiscretePLD:
    """Continuous mass on (lo_loss, hi_loss] given by ``cdf`` plus atoms; rounded up to the grid."""
    first = math.ceil(lo_loss / h - 1e-9)
    last = math.ceil(hi_loss / h - 1e-9)
    grid = np.arange(first, last + 1) * h
    cuts = np.concatenate([[lo_loss], np.minimum(grid, hi_loss)])
    cuts[-1] = hi_loss
    masses = np.maximum(np.diff(cdf(cuts)), 0.0)  # mass of (cut_{j-1}, cut_j] goes to grid_j
    pmf = masses.astype(float)
    base = _from_atoms([a for a, _ in atoms], [p for _, p in atoms], h) if atoms else None
    pld = DiscretePLD(h, first, pmf, infinity)
    return _convolve_identity_merge(pld, base) if base is not None else pld


def _convolve_identity_merge(a: DiscretePLD, b: DiscretePLD) -> DiscretePLD:
    """The mixture sum of two sub-probability PLDs on the same grid (not a convolution)."""
    lo = min(a.offset, b.offset)
    hi = max(a.offset + len(a.pmf), b.offset + len(b.pmf))
    pmf = np.zeros(hi - lo)
    pmf[a.offset - lo : a.offset - lo + len(a.pmf)] += a.pmf
    pmf[b.offset - lo : b.offset - lo + len(b.pmf)] += b.pmf
    return DiscretePLD(a.h, lo, pmf, a.infinity + b.infinity)


def _truncate(pld: DiscretePLD) -> DiscretePLD:
    pmf = np.maximum(pld.pmf, 0.0)
    cum = np.cumsum(pmf)
    total = float(cum[-1]) if len(cum) else 0.0
    start = int(np.searchsorted(cum, _TAIL, side="right"))
    rev = np.cumsum(pmf[::-1])
    stop = len(pmf) - int(np.searchsorted(rev, _TAIL, side="right"))
    start = min(start, max(stop - 1, 0))
    kept = pmf[start:stop].copy()
    if len(kept) == 0:
        return DiscretePLD(pld.h, pld.offset, np.zeros(1), min(1.0, pld.infinity + total))
    kept[0] += float(cum[start - 1]) if start > 0 else 0.0
    upper = float(pmf[stop:].sum())
    return DiscretePLD(pld.h, pld.offset + start, kept, min(1.0, pld.infinity + upper))


def _convolve(a: DiscretePLD, b: DiscretePLD) -> DiscretePLD:
    n = len(a.pmf) + len(b.pmf) - 1
    size = 1 << max(1, (n - 1).bit_length())
    pmf = np.fft.irfft(np.fft.rfft(a.pmf, size) * np.fft.rfft(b.pmf, size), size)[:n]
    infinity = 1.0 - (1.0 - a.infinity) * (1.0 - b.infinity)
    return _truncate(DiscretePLD(a.h, a.offset + b.offset, pmf, infinity))


def _self_compose(pld: DiscretePLD, count: int) -> DiscretePLD:
    result: DiscretePLD | None = None
    power = pld
    while count:
        if count & 1:
            result = power if result is None else _convolve(result, power)
        count >>= 1
        if count:
            power = _convolve(power, power)
    assert result is not None
    return result


def _phi(x: NDArray[np.float64]) -> NDArray[np.float64]:
    values = np.asarray(_erfc(-np.asarray(x, dtype=float) / math.sqrt(2.0)), dtype=float)
    return 0.5 * values


def _event_pld(event: PrivacyEvent, h: float) -> DiscretePLD:
    if isinstance(event, SubsampledDP) and not isinstance(event.event, GaussianDP):
        if isinstance(event.event, ApproximateDP):
            return _event_pld(ApproximateDP(event.epsilon, event.delta), h)
        return _event_pld(PureDP(event.epsilon), h)
    if isinstance(event, (PureDP, ApproximateDP)):
        eps, d = event.epsilon, event.delta
        p = 1.0 / (1.0 + math.exp(-eps))
        return _from_atoms([eps, -eps], [(1 - d) * p, (1 - d) * (1 - p)], h, infinity=d)
    if isinstance(event, RandomizedResponseDP):
        eps, k = event.epsilon, event.k
        z = math.exp(eps) + k - 1
        return _from_atoms([eps, 0.0, -eps], [math.exp(eps) / z, (k - 2) / z, 1 / z], h)
    if isinstance(event, LaplaceDP):
        eps = event.epsilon

        def cdf(loss: NDArray[np.float64]) -> NDArray[np.float64]:
            return 0.5 * (np.exp(-(eps - loss) / 2) - math.exp(-eps))

        return _from_cdf(-eps, eps, cdf, h, [(eps, 0.5), (-eps, 0.5 * math.exp(-eps))])
    raise NotApplicable(
        "pld", event, "the PLD backend covers pure, approximate, RR, Laplace and Gaussian events"
    )


def _gaussian_pld(mu: float, h: float) -> DiscretePLD:
    mean, sd = mu * mu / 2, mu
    lo, hi = mean - 40 * sd, mean + 40 * sd
    lo_mass = float(_phi(np.array([(lo - mean) / sd]))[0])
    upper = float(_phi(np.array([-(hi - mean) / sd]))[0])
    pld = _from_cdf(
        lo, hi, lambda loss: _phi((loss - mean) / sd), h, [(lo, lo_mass)], infinity=upper
    )
    return _truncate(pld)


def _span(event: PrivacyEvent) -> float:
    if isinstance(event, GaussianDP):
        return 0.0
    return 2.0 * event.epsilon


def compose_pld(events: Events | Any, *, delta: float, h: float | None = None) -> Bound:
    """The ε at ``delta`` of the convolution of the events' discretised PLDs (module doc).

    ``h`` is the grid width; by default the composed distribution spans about a million
    bins (and h ≥ 1e-5). Rounding adds at most h per use to the reported ε; a single ε shared by
    all pure events is put exactly on the grid, so randomized response is not rounded at all.
    """
    target = check_delta(delta, owner="compose_pld")
    items = normalise(events)
    mu_squared = 0.0
    others: list[tuple[PrivacyEvent, int]] = []
    for event, count in items:
        if isinstance(event, GaussianDP):
            mu_squared += count / event.noise_multiplier**2
        elif isinstance(event, SubsampledDP) and isinstance(event.event, GaussianDP):
            raise NotApplicable("pld", event, "use rdp for the subsampled Gaussian")
        else:
            others.append((event, count))
    full = sum(c * _span(e) for e, c in others)
    spread = 80 * math.sqrt(sum(c * e.epsilon**2 for e, c in others))  # ±40 sd, Hoeffding scale
    span = min(full, spread) + (80 * math.sqrt(mu_squared) if mu_squared else 0.0)
    if h is None:
        h = max(span / _MAX_BINS, 1e-5)
        epsilons = {e.epsilon for e, _ in others if not isinstance(e, SubsampledDP)}
        if (
            len(epsilons) == 1 and mu_squared == 0 and min(epsilons) > 0
        ):  # put the atoms ±ε exactly on the grid
            (eps,) = epsilons
            h = eps / math.ceil(eps / h)
    result: DiscretePLD | None = None
    for event, count in others:
        part = _self_compose(_truncate(_event_pld(event, h)), count)
        result = part if result is None else _convolve(result, part)
    if mu_squared:
        part = _gaussian_pld(math.sqrt(mu_squared), h)
        result = part if result is None else _convolve(result, part)
    if result is None:
        return Bound(epsilon=0.0, delta=target, method="pld")
    return Bound(epsilon=result.epsilon(target), delta=target, method="pld", detail={"grid": h})

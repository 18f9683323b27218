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

from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    check_delta,
    inverse_square,
    normalise,
)
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
_MAX_SPAN = 1e7  # h = span / 2^20 ≤ 10: a wider loss range has no useful grid
_DIRECT = 1 << 22  # convolve directly (relative error bound) up to this many products
_ULP = 2.0**-52
_SPIKES = 16  # the largest bins of each side are convolved directly, not by FFT
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _up(x: float, ulps: int = 4) -> float:
    """``x`` moved up by ``ulps`` units in the last place (covers a few roundings)."""
    return x + ulps * math.ulp(x) if x > 0 else x


def _down(x: float, ulps: int = 4) -> float:
    """``x`` (≤ 0) moved down by ``ulps`` units in the last place; an exact 0 stays 0."""
    return x - ulps * math.ulp(x) if x < 0 else x


def _log_keep_after(log_keep: float, mass: float) -> float:
    """ln(1 − P∞ − mass) from ln(1 − P∞), rounded down: moving ``mass`` to L = ∞.

    1 − P∞ − m = (1 − P∞)(1 − m/(1 − P∞)), so no difference of numbers near 1 is formed.
    """
    if mass <= 0:
        return log_keep
    ratio = _up(mass * math.exp(-log_keep))
    if ratio >= 1:
        return -math.inf
    return _down(log_keep + math.log1p(-ratio))


def _grid_index(x: NDArray[np.float64]) -> NDArray[np.int64]:
    """⌈x⌉, except that x within a float rounding (|x|·2⁻⁵⁰) above an integer maps to it.

    x = loss/h carries a relative rounding error of at most two ulps, so an atom that is on the
    grid by construction (h = ε/n) stays on it; the loss is then under-stated by at most
    |loss|·2⁻⁵⁰ — a relative float tolerance, never a grid step.
    """
    x = np.asarray(x, dtype=float)
    return np.ceil(x - np.abs(x) * 2.0**-50).astype(np.int64)


@attrs.frozen(eq=False)
class DiscretePLD:
    """pmf[i] is the mass of loss (offset + i)·h; ``log_keep`` = ln(1 − P[L = ∞]).

    The mass at L = ∞ is carried as ln(1 − P∞), rounded down at every step, because composing
    it as 1 − (1 − a)(1 − b) in floats cancels: with δ = 1e-7 each, 1 − δ keeps only nine
    significant digits of δ. Under composition ln(1 − P∞) adds exactly (the finite parts of
    independent losses are finite iff both are), so P∞ = −expm1(Σ log1p(−δ_i)), which is
    accurate to a few ulps (the treatment of the "infinity mass" in Koskela, Jälkö, Prediger &
    Honkela 2021, "Tight differential privacy for discrete-valued mechanisms and for the
    subsampled Gaussian mechanism using FFT", Section 3, and Meiser & Mohammadi 2018, "Tight on
    budget?", Section 4: δ(ε) = P∞ + E[(1 − e^{ε−L})₊] with P∞ = 1 − Π(1 − δ_i)).
    """

    h: float
    offset: int
    pmf: NDArray[np.float64]
    log_keep: float = 0.0

    @property
    def infinity(self) -> float:
        """P[L = ∞] = −expm1(ln(1 − P∞)), rounded up."""
        return min(1.0, _up(-math.expm1(self.log_keep)))

    def losses(self) -> NDArray[np.float64]:
        return np.asarray((self.offset + np.arange(len(self.pmf))) * self.h, dtype=np.float64)

    def delta(self, epsilon: float) -> float:
        """δ(ε) = P[L = ∞] + Σ_{L_i > ε} p_i (1 − e^{ε − L_i})."""
        losses = self.losses()
        above = losses > epsilon
        finite = float(np.sum(self.pmf[above] * -np.expm1(epsilon - losses[above])))
        return self.infinity + _up(finite)

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ delta (exact on the discrete distribution, checked)."""
        infinity = self.infinity
        if infinity > delta:
            return math.inf
        if self.delta(0.0) <= delta:
            return 0.0
        losses = self.losses()
        lo, hi = int(np.searchsorted(losses, 0.0)), len(losses) - 1  # δ(losses[hi]) = infinity
        while hi - lo > 1:  # invariant: δ(losses[lo]) > delta ≥ δ(losses[hi])
            mid = (lo + hi) // 2
            if self.delta(float(losses[mid])) > delta:
                lo = mid
            else:
                hi = mid
        # on (L_lo, L_hi] the losses above ε are those ≥ L_hi: δ(ε) = P∞ + S1 − e^ε S2
        tail, tail_losses = self.pmf[hi:], losses[hi:]
        shift = float(tail_losses[0])
        s1 = float(tail.sum())
        s2 = float(np.sum(tail * np.exp(shift - tail_losses)))  # Σ p e^{−L}, scaled by e^{shift}
        need = s1 - (delta - infinity)
        if need <= 0 or s2 <= 0:
            return float(losses[lo])
        top = float(losses[hi])
        candidate = _up(max(float(losses[lo]), shift + math.log(need / s2)))
        step = max(abs(candidate), 1.0) * 2.0**-40
        while candidate < top:  # the float solve may fall a hair short: step up, checked
            if self.delta(candidate) <= delta:
                return candidate
            candidate, step = candidate + step, step * 16
        return top


def _from_atoms(
    losses: list[float], probs: list[float], h: float, log_keep: float = 0.0
) -> DiscretePLD:
    index = _grid_index(np.asarray(losses) / h)
    lo = int(index.min())
    pmf = np.zeros(int(index.max()) - lo + 1)
    np.add.at(pmf, index - lo, np.asarray(probs, dtype=float) * (1 + 8 * _ULP))
    return DiscretePLD(h, lo, pmf, log_keep)


def _from_masses(
    lo_loss: float,
    hi_loss: float,
    masses: Any,
    h: float,
    atoms: list[tuple[float, float]],
    log_keep: float = 0.0,
) -> DiscretePLD:
    """Continuous mass on (lo_loss, hi_loss] plus atoms, each interval's mass rounded up to the
    grid point above it. ``masses(a, b)`` is an upper bound on the mass of each (a_j, b_j]."""
    first = int(_grid_index(np.array([lo_loss / h]))[0])
    last = int(_grid_index(np.array([hi_loss / h]))[0])
    grid = np.arange(first, last + 1) * h
    cuts = np.concatenate([[lo_loss], np.minimum(grid, hi_loss)])
    cuts[-1] = hi_loss
    pmf = np.maximum(np.asarray(masses(cuts[:-1], cuts[1:]), dtype=float), 0.0)
    base = _from_atoms([a for a, _ in atoms], [p for _, p in atoms], h) if atoms else None
    pld = DiscretePLD(h, first, pmf, log_keep)
    return _mixture(pld, base) if base is not None else pld


def _mixture(a: DiscretePLD, b: DiscretePLD) -> DiscretePLD:
    """The mixture sum of two sub-probability PLDs on the same grid (not a convolution);
    ``b`` has no mass at infinity."""
    lo = min(a.offset, b.offset)
    hi = max(a.offset + len(a.pmf), b.offset + len(b.pmf))
    pmf = np.zeros(hi - lo)
    pmf[a.offset - lo : a.offset - lo + len(a.pmf)] += a.pmf
    pmf[b.offset - lo : b.offset - lo + len(b.pmf)] += b.pmf
    return DiscretePLD(a.h, lo, pmf * (1 + 2 * _ULP), a.log_keep)


def _truncate(pld: DiscretePLD) -> DiscretePLD:
    """Drop tails below 1e-30, pessimistically: the lower tail joins the first kept bin (its
    losses only grow), the upper tail moves to L = ∞."""
    pmf = np.maximum(pld.pmf, 0.0)
    cum = np.cumsum(pmf)
    total = float(cum[-1]) if len(cum) else 0.0
    start = int(np.searchsorted(cum, _TAIL, side="right"))
    rev = np.cumsum(pmf[::-1])
    stop = len(pmf) - int(np.searchsorted(rev, _TAIL, side="right"))
    start = min(start, max(stop - 1, 0))
    kept = pmf[start:stop].copy()
    if len(kept) == 0:
        return DiscretePLD(pld.h, pld.offset, np.zeros(1), _log_keep_after(pld.log_keep, total))
    kept[0] += _up(float(cum[start - 1]) * (1 + start * _ULP)) if start > 0 else 0.0
    upper = _up(float(pmf[stop:].sum()) * (1 + (len(pmf) - stop) * _ULP))
    return DiscretePLD(pld.h, pld.offset + start, kept, _log_keep_after(pld.log_keep, upper))


def _split(pmf: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The indices of the (up to) _SPIKES largest bins, and the pmf without them."""
    if len(pmf) <= _SPIKES:
        return np.arange(len(pmf)), np.zeros_like(pmf)
    top = np.argpartition(pmf, -_SPIKES)[-_SPIKES:]
    rest = pmf.copy()
    rest[top] = 0.0
    return top, rest


def _convolve(a: DiscretePLD, b: DiscretePLD) -> DiscretePLD:
    """The PLD of the sum of independent losses, with every bin an upper bound.

    Small or sparse products are convolved directly: each output is a sum of at most m (the
    smaller number of non-zero bins) non-negative products, so its relative error is at most
    γ_m = m·u/(1 − m·u)
    (Higham 2002, "Accuracy and Stability of Numerical Algorithms", Lemma 3.1 and §3.1), and
    the bins are scaled up by that. Larger ones use the FFT, whose componentwise error is at
    most ‖a‖₂‖b‖₂·u·(13 log₂ N + 3) to first order (Percival 2003, "Rapid multiplication modulo
    the sum and difference of highly composite numbers", Math. Comp. 72, Theorem 5.1, with
    twiddle factors accurate to u); the largest bins (atoms such as Laplace's P[L = ε] = 1/2)
    are split off and convolved directly, so the norms are those of the smooth parts. Twice
    that bound, times the number of bins, is moved to
    L = ∞: the result then has at least the true mass above every loss, which is what δ(ε) is
    monotone in, and convolution keeps that order. The masses at
    infinity compose without cancellation: ln(1 − P∞) adds (see :class:`DiscretePLD`).
    """
    n = len(a.pmf) + len(b.pmf) - 1
    extra = 0.0
    nz_a, nz_b = np.flatnonzero(a.pmf), np.flatnonzero(b.pmf)
    terms = min(len(nz_a), len(nz_b))
    if len(a.pmf) * len(b.pmf) <= _DIRECT:
        pmf = np.convolve(a.pmf, b.pmf) * (1 + (terms + 4) * _ULP)
    elif len(nz_a) * len(nz_b) <= _DIRECT:  # sparse (atoms on a fine grid): sum the products
        index = (nz_a[:, None] + nz_b[None, :]).ravel()
        products = (a.pmf[nz_a][:, None] * b.pmf[nz_b][None, :]).ravel()
        counts = np.bincount(index, weights=products, minlength=n)
        pmf = np.asarray(counts * (1 + (terms + 4) * _ULP), dtype=np.float64)
    else:  # a = spikes + smooth part: the spikes directly, smooth * smooth by FFT
        a_top, a_rest = _split(a.pmf)
        b_top, b_rest = _split(b.pmf)
        size = 1 << max(1, (n - 1).bit_length())
        pmf = np.fft.irfft(np.fft.rfft(a_rest, size) * np.fft.rfft(b_rest, size), size)[:n]
        norms = float(np.linalg.norm(a_rest)) * float(np.linalg.norm(b_rest))
        error = 2.0 * norms * (_ULP / 2) * (13 * math.log2(size) + 3)
        pmf = np.maximum(pmf, 0.0)
        for i in a_top:
            pmf[i : i + len(b.pmf)] += a.pmf[i] * b.pmf
        for j in b_top:
            pmf[j : j + len(a_rest)] += b.pmf[j] * a_rest
        pmf *= 1 + (len(a_top) + len(b_top) + 8) * _ULP
        extra = _up(n * error)  # every bin may be short by `error`: that much mass goes to ∞
    log_keep = _down(a.log_keep + b.log_keep)
    if extra:
        log_keep = _log_keep_after(log_keep, extra)
    return _truncate(DiscretePLD(a.h, a.offset + b.offset, pmf, log_keep))


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
    """One use's PLD; probabilities are written with e^{−ε} only, so no ε overflows."""
    if isinstance(event, SubsampledDP) and not isinstance(event.event, GaussianDP):
        if isinstance(event.event, ApproximateDP):
            return _event_pld(ApproximateDP(event.epsilon, event.delta), h)
        return _event_pld(PureDP(event.epsilon), h)
    if isinstance(event, (PureDP, ApproximateDP)):
        eps, d = event.epsilon, event.delta
        tail = math.exp(-eps)
        p, q = 1.0 / (1.0 + tail), tail / (1.0 + tail)  # e^ε/(1 + e^ε), 1/(1 + e^ε)
        log_keep = _down(math.log1p(-d))
        return _from_atoms([eps, -eps], [(1 - d) * p, (1 - d) * q], h, log_keep=log_keep)
    if isinstance(event, RandomizedResponseDP):
        eps, k = event.epsilon, event.k
        tail = math.exp(-eps)
        z = 1.0 + (k - 1) * tail  # (e^ε + k − 1)/e^ε
        return _from_atoms([eps, 0.0, -eps], [1 / z, (k - 2) * tail / z, tail / z], h)
    if isinstance(event, LaplaceDP):
        eps = event.epsilon

        def masses(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
            # F(l) = (e^{−(ε − l)/2} − e^{−ε})/2, so F(b) − F(a) = e^{(b−ε)/2}(1 − e^{(a−b)/2})/2
            exact = 0.5 * np.exp((b - eps) / 2) * -np.expm1((a - b) / 2)
            return np.asarray(exact * (1 + 16 * _ULP), dtype=float)

        return _from_masses(-eps, eps, masses, h, [(eps, 0.5), (-eps, 0.5 * math.exp(-eps))])
    raise NotApplicable(
        "pld", event, "the PLD backend covers pure, approximate, RR, Laplace and Gaussian events"
    )


def _gaussian_pld(mu: float, h: float) -> DiscretePLD:
    """L ~ N(μ²/2, μ²) on ±40 sd; the mass beyond (< 1e-348) is rounded up to the smallest float.

    Each bin's mass Φ(z_b) − Φ(z_a) is taken from the tail it lies in (Q(z_a) − Q(z_b) above
    the mean) so it does not cancel, plus 16 ulps of the two terms for erfc's error.
    """
    mean, sd = mu * mu / 2, mu
    lo, hi = mean - 40 * sd, mean + 40 * sd
    smallest = math.ulp(0.0)
    lo_mass = max(float(_phi(np.array([(lo - mean) / sd]))[0]), smallest)
    upper = max(float(_phi(np.array([-(hi - mean) / sd]))[0]), smallest)

    def masses(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        za, zb = (a - mean) / sd, (b - mean) / sd
        right = za >= 0
        fa = np.where(right, _phi(-za), _phi(za))  # Q(z_a) above the mean, else Φ(z_a)
        fb = np.where(right, _phi(-zb), _phi(zb))
        diff = np.where(right, fa - fb, fb - fa)
        return np.asarray(np.maximum(diff, 0.0) + 16 * _ULP * (fa + fb), dtype=float)

    log_keep = _down(math.log1p(-upper))
    pld = _from_masses(lo, hi, masses, h, [(lo, lo_mass)], log_keep=log_keep)
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
            mu_squared += count * inverse_square(event.noise_multiplier)
        elif isinstance(event, SubsampledDP) and isinstance(event.event, GaussianDP):
            raise NotApplicable("pld", event, "use rdp for the subsampled Gaussian")
        else:
            others.append((event, count))
    full = sum(c * _span(e) for e, c in others)
    spread = 80 * math.sqrt(sum(c * e.epsilon * e.epsilon for e, c in others))  # ±40 sd
    span = min(full, spread) + (80 * math.sqrt(mu_squared) if mu_squared else 0.0)
    if not span <= _MAX_SPAN:
        raise NotApplicable(
            "pld", items, f"the privacy losses span {span:g} > {_MAX_SPAN:g} (no useful grid)"
        )
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

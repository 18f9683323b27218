"""Privacy-loss distributions (PLD): pessimistic "connect the dots" grids, composed by FFT.

For a dominating pair (P, Q) the privacy loss is L = ln(dP/dQ) under P, and the privacy profile
is δ(ε) = P[L = ∞] + E[(1 − e^{ε − L})₊] (Sommer, Meiser & Mohammadi 2019, "Privacy Loss
Classes", Theorem 1). Under adaptive composition the losses of the dominating pairs add, so the
composed PLD is the convolution of the PLDs (Koskela, Jälkö & Honkela 2020, Section 3;
Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, "Connect the Dots", Section 2). The pairs
of every event, subsampled ones included, are in :mod:`dpkit.accounting._losslaw`.

**Neighbouring directions.** Every non-subsampled pair is symmetric, so one PLD serves
addition and removal. A subsampled pair is not: the removal and the addition PLDs are composed
separately and the profile is the larger of the two, δ(ε) = max(δ_remove(ε), δ_add(ε)) — the
same neighbouring pair (x, x′) is in one direction for every step of a composition (Zhu, Dong &
Wang 2022, Section 5).

**Discretisation, never below the truth.** Losses are put on the grid h·ℤ by connecting the
dots (Doroshenko et al. 2022, Section 3): the mass p at loss l ∈ (a, a + h] is split between
a and a + h as (p − w, w) with the same P-mass and the same Q-mass p·e^{−l}. In y = e^{−L}
that is a mean-preserving spread, and δ(ε) = E[(1 − e^ε·Π_i y_i)₊] is convex in each y_i, so
the split PLD over-states δ(ε) for every ε, after any number of compositions (Jensen,
conditionally on the other steps). The error is second order in h, where rounding every loss
up is first order (k steps of rounding add up to k·h to ε). Rounding errors of the masses are
bounded and always moved upwards (more mass, or mass at a higher loss), tails below 10⁻³⁰ are
moved up (the lower one to the first kept loss, the upper one to L = ∞), and the FFT's error
bound is moved to L = ∞.

**Exact atoms.** An event whose law is two or three atoms (randomized response, pure and
(ε, δ) events, and their subsampled versions) is composed exactly over its ``count`` uses —
the multinomial law of how many uses fall on each atom — and rounded onto the grid once, so
its error is at most h in all instead of h per use.

**Adaptive grid.** Without ``h`` the grid starts coarse and is halved until it is fine enough.
Rounding every loss up instead of connecting the dots moves each rounded law by at most h, and
rounding it down gives a lower bound, so ε(h) is within (number of rounded laws)·h of the truth:
when that is below ``tolerance``·ε (0.1 % by default; a tenth of it for atoms only) refinement
stops, rigorously. Otherwise, for laws with a density, the error of the second-order scheme at
h/2 is about a third of ε(h) − ε(h/2) (Richardson), and refinement stops when that is below
``tolerance``·ε, once h has reached half the smallest single-use scale. Every answer is an upper
bound, so the smallest is reported. A single ε shared by all pure events is put exactly on the
grid, so randomized response is exact.

"Below ``tolerance``·ε" cannot be met when ε is tiny (δ close to the total variation distance
δ(0) of the composition: ε = 1e-9 would ask for a grid of 1e-12). There the error is measured
in δ instead: δ is convex in ε, so an answer t above the ε at which δ(ε) = δ on the grid is
exact for δ − t·s or above, with s = −δ′(ε) = Σ_{L_i > ε} p_i e^{ε − L_i}; refinement stops
when the error is below ``tolerance``·max(ε, δ/s) — ε is then at most the exact ε at
δ·(1 − ``tolerance``), wherever it is. For an ε of order 1 the first term is the larger, so
the stopping rule there is unchanged. An answer of 0 stops refinement at once (nothing is
smaller).

**ε from δ.** The reported ε solves δ(ε) = δ on the discrete distribution from suffix sums
computed once: on (l_{i−1}, l_i], δ(ε) = P∞ + S₁(i) − e^ε·S₂(i) with S₁(i) = Σ_{j≥i} p_j and
S₂(i) = Σ_{j≥i} p_j e^{−l_j}; the interval is found by one search and the answer checked by a
direct sum over the tail above it.

Each event is composed one use at a time (``count`` uses are count self-convolutions, by
repeated squaring): dp-accounting 0.6.0's PLD accountant composes a randomized-response event
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
from dpkit.accounting._losslaw import (
    LossLaw,
    approximate_law,
    gaussian_law,
    laplace_law,
    randomized_response_law,
    subsample,
)
from dpkit.privacy import (
    ApproximateDP,
    BoundedRangeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
    flatten,
)

__all__ = ["DiscretePLD", "compose_pld", "discretise", "pld_of"]

_TAIL = 1e-30
_MAX_SPAN = 1e7  # a wider loss range has no useful grid
_MAX_BINS = 1 << 23  # a composed grid larger than this stops the refinement
_DIRECT = 1 << 22  # convolve directly (relative error bound) up to this many products
_ULP = 2.0**-52
_TOLERANCE = 1e-3  # relative: stop refining when the estimated grid error is below this
_MAX_LEVELS = 24


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


@attrs.frozen(eq=False)
class DiscretePLD:
    """pmf[i] is the mass of loss (offset + i)·h; ``log_keep`` = ln(1 − P[L = ∞]).

    The mass at L = ∞ is carried as ln(1 − P∞), rounded down at every step, because composing
    it as 1 − (1 − a)(1 − b) in floats cancels: with δ = 1e-7 each, 1 − δ keeps only nine
    significant digits of δ. Under composition ln(1 − P∞) adds exactly (the finite parts of
    independent losses are finite iff both are), so P∞ = −expm1(Σ log1p(−δ_i)), which is
    accurate to a few ulps (Koskela, Jälkö, Prediger & Honkela 2021, "Tight differential
    privacy for discrete-valued mechanisms and for the subsampled Gaussian mechanism using
    FFT", Section 3; Meiser & Mohammadi 2018, "Tight on budget?", Section 4).
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

    def _tail_delta(self, epsilon: float, start: int) -> float:
        """P∞ + Σ_{i ≥ start, L_i > ε} p_i (1 − e^{ε − L_i}): non-negative terms, rounded up."""
        losses = (self.offset + np.arange(start, len(self.pmf))) * self.h
        pmf = self.pmf[start:]
        above = losses > epsilon
        finite = float(np.sum(pmf[above] * -np.expm1(epsilon - losses[above])))
        return self.infinity + _up(finite * (1 + 64 * _ULP))

    def delta(self, epsilon: float) -> float:
        """δ(ε) = P[L = ∞] + Σ_{L_i > ε} p_i (1 − e^{ε − L_i})."""
        start = max(0, min(len(self.pmf), math.floor(epsilon / self.h) - self.offset))
        return self._tail_delta(epsilon, start)

    def slope(self, epsilon: float) -> float:
        """−δ′(ε) = Σ_{L_i > ε} p_i e^{ε − L_i}: how fast δ falls as ε grows (rounded up).

        δ is convex in ε, so δ(ε + t) ≥ δ(ε) − t·slope(ε) for every t ≥ 0.
        """
        start = max(0, min(len(self.pmf), math.floor(epsilon / self.h) - self.offset))
        losses = (self.offset + np.arange(start, len(self.pmf))) * self.h
        above = losses > epsilon
        return _up(float(np.sum(self.pmf[start:][above] * np.exp(epsilon - losses[above]))))

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ delta on this distribution (module docstring)."""
        infinity = self.infinity
        if infinity > delta:
            return math.inf
        start = max(0, -self.offset)  # the first loss ≥ 0
        if start >= len(self.pmf) or self._tail_delta(0.0, start) <= delta:
            return 0.0
        pmf = self.pmf[start:]
        losses = (self.offset + start + np.arange(len(pmf))) * self.h
        top = float(losses[-1])
        if top - float(losses[0]) > 600:  # e^{±600} would not fit the scaled sums below
            return self._bisect(delta, start)
        s1 = np.cumsum(pmf[::-1])[::-1]  # Σ_{j≥i} p_j
        s2 = np.cumsum((pmf * np.exp(top - losses))[::-1])[::-1]  # Σ_{j≥i} p_j e^{top − l_j}
        # δ(l_i): the losses above l_i are those with j ≥ i + 1
        after1, after2 = np.append(s1[1:], 0.0), np.append(s2[1:], 0.0)
        at_losses = infinity + after1 - np.exp(losses - top) * after2
        m = int(np.argmax(at_losses <= delta))  # δ(l_last) = P∞ ≤ delta: m exists
        lower = float(losses[m - 1]) if m > 0 else 0.0
        need = s1[m] + infinity - delta  # on (l_{m−1}, l_m]: δ(ε) = P∞ + S₁ − e^ε·S₂
        candidate = lower
        if need > 0 and s2[m] > 0:
            candidate = top + math.log(need / s2[m])
        candidate = _up(min(max(candidate, lower), float(losses[m])))
        step = max(abs(candidate), 1.0) * 2.0**-40
        first = start + max(m - 1, 0)
        while candidate < top:  # the float solve may fall a hair short: step up, checked
            if self._tail_delta(candidate, first) <= delta:
                return candidate
            candidate, step = candidate + step, step * 16
        return top

    def _bisect(self, delta: float, start: int) -> float:
        """ε by bisection over the grid (only for loss ranges wider than 600)."""
        losses = self.losses()
        lo, hi = start, len(losses) - 1  # δ(losses[hi]) = P∞ ≤ delta
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._tail_delta(float(losses[mid]), 0) > delta:
                lo = mid
            else:
                hi = mid
        return float(losses[hi])


def _grid_index(x: NDArray[np.float64]) -> NDArray[np.int64]:
    """⌈x⌉, except that x within a float rounding (|x|·2⁻⁵⁰) above an integer maps to it.

    x = loss/h carries a relative rounding error of at most two ulps, so an atom that is on the
    grid by construction (h = ε/n) stays on it; the loss is then under-stated by at most
    |loss|·2⁻⁵⁰ — a relative float tolerance, never a grid step.
    """
    x = np.asarray(x, dtype=float)
    return np.ceil(x - np.abs(x) * 2.0**-50).astype(np.int64)


def _split_up(p: NDArray[np.float64], log_r: NDArray[np.float64], h: float) -> Any:
    """The share of mass p that goes to the upper grid point a + h when its Q-mass is r·p·e^{−a}
    (r ∈ [e^{−h}, 1]): w = p(1 − r)/(1 − e^{−h}). ``log_r`` must be a lower bound of ln r, so
    w is an upper bound (the safe direction); w ∈ [0, p]."""
    with np.errstate(invalid="ignore", over="ignore"):
        share = -np.expm1(np.minimum(log_r, 0.0)) / -math.expm1(-h)
    share = np.where(np.isnan(share), 1.0, share)
    return np.minimum(p, p * np.clip(share, 0.0, 1.0) * (1 + 8 * _ULP))


def _atom_arrays(law: LossLaw) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    atoms = np.asarray(law.atoms, dtype=float).reshape(-1, 2)
    return atoms[:, 0], atoms[:, 1]


def compose_atoms(law: LossLaw, count: int) -> LossLaw | None:
    """``count`` uses of a law made of atoms only, composed exactly: the multinomial law of
    how many uses fall on each atom (two or three atoms; None if there are more, or more than
    2·10⁶ outcomes). Probabilities are computed in log space and moved up by a relative 1e-9
    (the error of the log-factorial sums); P[L = ∞] composes as 1 − (1 − P∞)^count.

    Rounding this composed law onto the grid moves it by at most h in all, instead of h per
    use, so the grid needed for a given precision does not shrink with the count.
    """
    loss, mass = _atom_arrays(law)
    keep = mass > 0
    loss, mass = loss[keep], mass[keep]
    m = len(loss)
    if m == 0 or m > 3 or law.continuous is not None:
        return None
    outcomes = (count + 1) if m <= 2 else (count + 1) * (count + 2) // 2
    if outcomes > 2_000_000:
        return None
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, count + 1, dtype=float)))])
    log_p = np.log(mass)
    if m == 1:
        counts = np.array([[count]])
    elif m == 2:
        first = np.arange(count + 1)
        counts = np.stack([first, count - first], axis=1)
    else:
        first, second = np.triu_indices(
            count + 1
        )  # first ≤ second: n₁ = first, n₂ = second − first
        counts = np.stack([first, second - first, count - second], axis=1)
    log_w = log_fact[count] - log_fact[counts].sum(axis=1) + counts @ log_p
    composed_loss = counts @ loss
    composed_mass = np.exp(log_w) * (1 + 1e-9)
    log_keep = count * math.log1p(-min(law.p_inf, 1.0)) if law.p_inf < 1 else -math.inf
    p_inf = _up(-math.expm1(log_keep)) if math.isfinite(log_keep) else 1.0
    atoms = np.stack([composed_loss, composed_mass], axis=1)
    return LossLaw(atoms=atoms, p_inf=min(p_inf, 1.0))  # type: ignore[arg-type]


def discretise(law: LossLaw, h: float, tail: float = _TAIL) -> DiscretePLD:
    """``law`` on the grid h·ℤ by connecting the dots, every bin an upper bound (module doc)."""
    indices: list[NDArray[np.int64]] = []
    weights: list[NDArray[np.float64]] = []
    infinity = law.p_inf
    if len(law.atoms):
        loss, mass = _atom_arrays(law)
        mass = mass * (1 + 8 * _ULP)
        upper = _grid_index(loss / h)
        on_grid = np.abs(upper * h - loss) <= np.abs(loss) * 2.0**-48
        lower = np.where(on_grid, upper, np.floor(loss / h).astype(np.int64))
        upper = np.where(on_grid, upper, lower + 1)
        # ln r = a − l, moved down by a few ulps of l so that the share is never too small
        gap = lower * h - loss - 4 * np.abs(loss) * _ULP
        high = np.where(on_grid, mass, _split_up(mass, gap, h))
        indices += [upper, lower]
        weights += [high, mass - high]
    part = law.continuous
    if part is not None:
        first, last = math.floor(part.lo / h), math.ceil(part.hi / h)
        grid = np.arange(first, last + 1, dtype=np.int64)
        edges = np.clip(grid * h, part.lo, part.hi)
        p, q, p_err, q_err = part.masses(edges[:-1], edges[1:])
        p_up = p + p_err
        with np.errstate(divide="ignore"):
            log_r = np.log(np.maximum(q - q_err, 0.0)) - np.log(p_up) + grid[:-1] * h
        high = _split_up(p_up, log_r, h)
        indices += [grid[1:], grid[:-1], np.array([math.ceil(part.lo / h)])]
        weights += [high, p_up - high, np.array([_up(part.lower_tail[0] * (1 + 8 * _ULP))])]
        infinity += _up(part.upper_tail[0] * (1 + 8 * _ULP))
    index = np.concatenate(indices) if indices else np.zeros(1, dtype=np.int64)
    weight = np.concatenate(weights) if weights else np.zeros(1)
    keep = weight > 0
    index, weight = (index[keep], weight[keep]) if keep.any() else (index[:1], weight[:1] * 0)
    lo = int(index.min())
    pmf = np.bincount(index - lo, weights=weight) * (1 + 4 * _ULP)
    log_keep = _down(math.log1p(-min(infinity, 1.0))) if infinity < 1 else -math.inf
    return _truncate(DiscretePLD(h, lo, np.asarray(pmf, dtype=np.float64), log_keep), tail)


def _truncate(pld: DiscretePLD, tail: float = _TAIL) -> DiscretePLD:
    """Drop tails of mass below ``tail``, pessimistically: the lower tail joins the first kept
    bin (its losses only grow), the upper tail moves to L = ∞."""
    pmf = np.maximum(pld.pmf, 0.0)
    cum = np.cumsum(pmf)
    total = float(cum[-1]) if len(cum) else 0.0
    start = int(np.searchsorted(cum, tail, side="right"))
    rev = np.cumsum(pmf[::-1])
    stop = len(pmf) - int(np.searchsorted(rev, tail, side="right"))
    start = min(start, max(stop - 1, 0))
    kept = pmf[start:stop].copy()
    if len(kept) == 0:
        return DiscretePLD(pld.h, pld.offset, np.zeros(1), _log_keep_after(pld.log_keep, total))
    kept[0] += _up(float(cum[start - 1]) * (1 + start * _ULP)) if start > 0 else 0.0
    upper = _up(float(pmf[stop:].sum()) * (1 + (len(pmf) - stop) * _ULP))
    return DiscretePLD(pld.h, pld.offset + start, kept, _log_keep_after(pld.log_keep, upper))


@attrs.frozen
class _Budget:
    """The mass a composition may move pessimistically, per operation: ``fft`` is the FFT
    error mass moved to L = ∞ by one convolution, ``tail`` the mass of each tail that
    truncation may move (up to the first kept loss, or to L = ∞)."""

    fft: float
    tail: float

    def shared(self, uses: int, parts: int) -> _Budget:
        """The budget of a node whose result is used ``uses`` times, one of ``parts`` nodes."""
        return _Budget(self.fft / (parts * max(uses, 1)), self.tail / (parts * max(uses, 1)))


def _window(pmf: NDArray[np.float64], half: int) -> tuple[int, int]:
    """[lo, hi): the bins within ``half`` of the largest one."""
    mode = int(np.argmax(pmf))
    return max(0, mode - half), min(len(pmf), mode + half + 1)


def _rest_norm(pmf: NDArray[np.float64], window: tuple[int, int], total: float) -> float:
    """The L2 norm of ``pmf`` outside ``window`` (total = the squared norm of all of it)."""
    return math.sqrt(max(total - _square_sum(pmf[window[0] : window[1]]), 0.0))


def _square_sum(values: NDArray[np.float64]) -> float:
    """Σ x² without BLAS (whose threads only spin on a small machine)."""
    return float(np.einsum("i,i->", values, values))


def _convolve(a: DiscretePLD, b: DiscretePLD, budget: _Budget) -> DiscretePLD:
    """The PLD of the sum of independent losses, with every bin an upper bound.

    Small or sparse products are convolved directly: each output is a sum of at most m (the
    smaller number of non-zero bins) non-negative products, so its relative error is at most
    γ_m = m·u/(1 − m·u) (Higham 2002, "Accuracy and Stability of Numerical Algorithms",
    Lemma 3.1 and §3.1), and the bins are scaled up by that. Larger ones use the FFT, whose
    componentwise error is at most ‖a‖₂‖b‖₂·u·(13 log₂ N + 3) to first order (Percival 2003,
    "Rapid multiplication modulo the sum and difference of highly composite numbers", Math.
    Comp. 72, Theorem 5.1, with twiddle factors accurate to u). To keep that small, a window
    around each side's largest bin (its atoms, or the bulk of a concentrated distribution) is
    convolved directly, a = a_w + a_r: a*b = a_w*b + a_r*b_w + a_r*b_r with only a_r*b_r by
    FFT, so the norms are those of the parts outside the windows; the window grows (8 to 2048
    bins each side) until the error mass below is at most ``budget.fft``. A square is
    a_w*a_w + 2·a_w*a_r + a_r*a_r.

    With e = twice the FFT bound, a bin below e is indistinguishable from rounding noise: it is
    set to 0 (so that the tails can be truncated), and 2e times the number of bins is moved to
    L = ∞, which covers every bin's shortfall (below e for a kept bin, below 2e for a zeroed
    one). The result then has at least the true mass above every loss, which is what δ(ε) is
    monotone in, and convolution keeps that order. The masses at infinity compose without
    cancellation: ln(1 − P∞) adds (see :class:`DiscretePLD`).
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
    else:
        size = 1 << max(1, (n - 1).bit_length())
        unit = 2.0 * (_ULP / 2) * (13 * math.log2(size) + 3)  # e per unit of ‖a_r‖‖b_r‖
        total_a, total_b = _square_sum(a.pmf), _square_sum(b.pmf)
        half = 8
        while True:
            wa, wb = _window(a.pmf, half), _window(b.pmf, half)
            error = unit * _rest_norm(a.pmf, wa, total_a) * _rest_norm(b.pmf, wb, total_b)
            if 2 * n * error <= budget.fft or half >= 2048:
                break
            half *= 4
        a_rest = a.pmf.copy()
        a_rest[wa[0] : wa[1]] = 0.0
        if a is b:  # a square: a_r*a_r by FFT, 2·a_w*a_r and a_w*a_w directly
            spectrum = np.fft.rfft(a_rest, size)
            pmf = np.fft.irfft(spectrum * spectrum, size)[:n]
            pmf = np.where(pmf > error, pmf, 0.0)  # below e: noise (see the docstring)
            window = a.pmf[wa[0] : wa[1]]
            direct = 2.0 * np.convolve(window, a_rest)
            pmf[wa[0] : wa[0] + len(direct)] += direct
            direct = np.convolve(window, window)
            pmf[2 * wa[0] : 2 * wa[0] + len(direct)] += direct
        else:
            b_rest = b.pmf.copy()
            b_rest[wb[0] : wb[1]] = 0.0
            pmf = np.fft.irfft(np.fft.rfft(a_rest, size) * np.fft.rfft(b_rest, size), size)[:n]
            pmf = np.where(pmf > error, pmf, 0.0)  # below e: noise (see the docstring)
            direct = np.convolve(a.pmf[wa[0] : wa[1]], b.pmf)  # a_w * b
            pmf[wa[0] : wa[0] + len(direct)] += direct
            direct = np.convolve(b.pmf[wb[0] : wb[1]], a_rest)  # b_w * a_r
            pmf[wb[0] : wb[0] + len(direct)] += direct
        terms = max(wa[1] - wa[0], wb[1] - wb[0])
        pmf *= 1 + (terms + 8) * _ULP
        extra = _up(2 * n * error)  # every bin may be short by 2e: that much goes to ∞
    log_keep = _down(a.log_keep + b.log_keep)
    if extra:
        log_keep = _log_keep_after(log_keep, extra)
    return _truncate(DiscretePLD(a.h, a.offset + b.offset, pmf, log_keep), budget.tail)


def _self_compose(pld: DiscretePLD, count: int, budget: _Budget) -> DiscretePLD:
    """``count`` uses by repeated squaring. The budget is shared so that a square, which is
    used ``count >> j`` times in the result, gets that much less:
    Σ (uses of a node) × (its budget) ≤ the budget."""
    parts = 2 * max(count.bit_length(), 1)
    result: DiscretePLD | None = None
    power = pld
    while count:
        if count & 1:
            result = power if result is None else _convolve(result, power, budget.shared(1, parts))
        count >>= 1
        if count:  # the square is used `count` times (or fewer) in the result
            power = _convolve(power, power, budget.shared(count, parts))
    assert result is not None
    return result


def _base_law(event: PrivacyEvent, *, cover_q: bool) -> LossLaw:
    if isinstance(event, GaussianDP):
        return gaussian_law(1.0 / event.noise_multiplier, cover_q=cover_q)
    if isinstance(event, LaplaceDP):
        return laplace_law(event.epsilon)
    if isinstance(event, RandomizedResponseDP):
        return randomized_response_law(event.epsilon, event.k)
    if isinstance(event, (PureDP, BoundedRangeDP)):  # ε-BR is ε-DP: the pure worst case
        return randomized_response_law(event.epsilon) if event.epsilon > 0 else LossLaw()
    if isinstance(event, ApproximateDP):
        return approximate_law(event.epsilon, event.delta)
    raise NotApplicable(
        "pld", event, "the PLD backend covers pure, approximate, RR, Laplace and Gaussian events"
    )


def pld_of(event: PrivacyEvent, direction: str = "remove") -> LossLaw:
    """The loss law of one use of ``event`` (a subsampled one in ``direction``)."""
    if isinstance(event, SubsampledDP):
        if not isinstance(event.event, GaussianDP) and event.event.epsilon > 500:
            raise NotApplicable("pld", event, "e^ε of the inner event must be a float")
        base = _base_law(event.event, cover_q=True)
        return subsample(base, event.sampling_rate, direction)
    return _base_law(event, cover_q=False)


def _loss_range(event: PrivacyEvent) -> float:
    """The largest |loss| of one use (a subsampled Gaussian's is about 12σ-worth, bounded)."""
    if isinstance(event, SubsampledDP) and isinstance(event.event, GaussianDP):
        mu = 1.0 / event.event.noise_multiplier
        return 0.5 * mu * mu + 12 * mu
    return event.epsilon


def _scale(event: PrivacyEvent) -> float:
    """A typical size of one use's privacy loss (roughly its standard deviation); 0 if none."""
    if isinstance(event, SubsampledDP):
        inner = event.event
        if isinstance(inner, GaussianDP):
            mu2 = min(inverse_square(inner.noise_multiplier), 50.0)
            return event.sampling_rate * math.sqrt(math.expm1(mu2))
        return event.sampling_rate * math.expm1(min(inner.epsilon, 50.0))
    if isinstance(event, GaussianDP):
        return 1.0 / event.noise_multiplier
    return event.epsilon


@attrs.frozen
class _Plan:
    """What a composition needs at every grid: the events in groups, the merged Gaussian."""

    others: list[tuple[PrivacyEvent, int]]
    mu: float
    directions: tuple[str, ...]
    aligned: float | None  # the one ε of all pure events, when it can be put on the grid


def _plan(items: list[tuple[PrivacyEvent, int]]) -> _Plan:
    mu_squared = 0.0
    others: list[tuple[PrivacyEvent, int]] = []
    for event, count in items:
        for part in flatten(event):
            if isinstance(part, GaussianDP):
                mu_squared += count * inverse_square(part.noise_multiplier)
            else:
                others.append((part, count))
    if not math.isfinite(mu_squared):
        raise NotApplicable("pld", items, "a Gaussian with a noise multiplier below 1e-154")
    span = math.fsum(2 * c * _loss_range(e) for e, c in others) + 24 * math.sqrt(mu_squared)
    if not span <= _MAX_SPAN:
        raise NotApplicable(
            "pld", items, f"the privacy losses span {span:g} > {_MAX_SPAN:g} (no useful grid)"
        )
    subsampled = any(isinstance(e, SubsampledDP) for e, _ in others)
    directions = ("remove", "add") if subsampled else ("remove",)
    epsilons = {
        e.epsilon
        for e, _ in others
        if isinstance(e, (PureDP, RandomizedResponseDP, ApproximateDP, BoundedRangeDP, LaplaceDP))
    }
    aligned = None
    if len(epsilons) == 1 and mu_squared == 0 and not subsampled and min(epsilons) > 0:
        aligned = min(epsilons)
    return _Plan(others, math.sqrt(mu_squared), directions, aligned)


@attrs.frozen
class _Level:
    """One grid's answer: ε (max over the directions), the largest composed grid, and how many
    uses were not on the grid: ``atoms_off`` counts uses with an atom between grid points,
    ``smooth`` uses with a continuous part (each moves the answer by at most h); ``slope`` is
    −δ′(ε) of the direction that gave ε."""

    epsilon: float
    size: int
    atoms_off: int
    smooth: int
    slope: float = 0.0


def _off_grid(law: LossLaw, h: float) -> bool:
    loss = _atom_arrays(law)[0]
    return bool(len(loss)) and bool(
        np.any(np.abs(_grid_index(loss / h) * h - loss) > np.abs(loss) * 2.0**-48)
    )


def _level(plan: _Plan, h: float, delta: float) -> _Level:
    worst, size, atoms_off, smooth, slope = 0.0, 0, 0, 0, 0.0
    for direction in plan.directions:
        laws = [(pld_of(event, direction), count) for event, count in plan.others]
        # the events' own mass at L = ∞; what δ leaves above it is the margin that rounding
        # may use: FFT error (to L = ∞) a thousandth of it, truncated tails a 1e-5 part
        own = -math.expm1(math.fsum(c * math.log1p(-min(law.p_inf, 1.0)) for law, c in laws))
        margin = delta - own
        if margin <= 0:
            return _Level(math.inf, 0, 0, 0)
        parts = len(laws) + 2
        budget = _Budget(1e-3 * margin / parts, 1e-5 * margin / parts)
        result: DiscretePLD | None = None
        atoms_off = smooth = 0
        for law, count in laws:
            composed = compose_atoms(law, count) if count > 1 else None
            if composed is not None:  # rounded once, not once per use; exact, so no tails cut
                atoms_off += _off_grid(composed, h)
                part = discretise(composed, h)
            else:
                atoms_off += count * _off_grid(law, h)
                smooth += count * (law.continuous is not None)
                single = discretise(law, h, budget.tail / count)  # its tails count `count` times
                part = _self_compose(single, count, budget)
            result = part if result is None else _convolve(result, part, budget)
        if plan.mu:
            smooth += 1
            part = discretise(gaussian_law(plan.mu), h, budget.tail)
            result = part if result is None else _convolve(result, part, budget)
        assert result is not None
        epsilon = result.epsilon(delta)
        if epsilon >= worst:
            worst = epsilon
            slope = result.slope(epsilon) if math.isfinite(epsilon) else 0.0
        size = max(size, len(result.pmf))
    return _Level(worst, size, atoms_off, smooth, slope)


def _finest(plan: _Plan) -> float:
    """The finest grid on which one use's losses span at most _MAX_BINS bins.

    A subsampled Gaussian of rate 1e-9 has a loss scale of 1e-7 but losses over tens of nats,
    which a grid at its scale holds in 1.5e9 bins (11 GiB) before the tails are cut. A coarser
    grid is only more pessimistic (module docstring), so the answer stays an upper bound.
    """
    return max((2 * _loss_range(e) for e, _ in plan.others), default=0.0) / _MAX_BINS


def _grids(plan: _Plan) -> tuple[float, float]:
    """(first grid width, the width the refinement must reach before it may stop).

    The first grid resolves the composed loss (its standard deviation, about
    sqrt(Σ count·scale²)) in 16 steps, but is never finer than :func:`_finest`; the refinement
    goes at least down to half the smallest single-use scale (or 1/4096 of the composed one,
    if that is coarser).
    """
    scales = [(s, c) for s, c in ((_scale(e), c) for e, c in plan.others) if s > 0]
    if plan.mu:
        scales.append((plan.mu, 1))
    if not scales:
        return 0.05, 0.05
    composed = math.sqrt(math.fsum(c * s * s for s, c in scales))
    h = min(0.05, composed / 16)
    if plan.aligned is not None:
        h = plan.aligned / math.ceil(plan.aligned / h)
    finest = _finest(plan)
    if h < finest:
        h = finest if plan.aligned is None else plan.aligned / max(1, plan.aligned // finest)
    required = max(min(s for s, _ in scales) / 2, composed / 4096)
    return h, required


def _scale_of(level: _Level, delta: float) -> float:
    """What the grid error in ε is measured against: ε itself, or, when ε is tiny, δ/slope —
    the shift in ε that changes δ by δ itself (module docstring, "Adaptive grid").

    δ is convex in ε, so an ε that is t too high on a PLD whose δ(ε) = δ is exact at
    δ − t·slope or above: within ``tolerance``·δ/slope of ε, the answer is at most the exact
    ε at δ·(1 − ``tolerance``).
    """
    if level.slope > 0:
        return max(level.epsilon, delta / level.slope)
    return level.epsilon


def compose_pld(
    events: Events | Any,
    *,
    delta: float,
    h: float | None = None,
    tolerance: float = _TOLERANCE,
) -> Bound:
    """The ε at ``delta`` of the composed privacy-loss distributions (module docstring).

    ``h`` fixes the grid width; by default the grid is refined until the estimated error is
    below ``tolerance``·ε. Non-subsampled Gaussians compose exactly (μ² adds) and are
    discretised once. ``Bound.detail`` has the final grid, its size and the refinement steps.
    """
    target = check_delta(delta, owner="compose_pld")
    plan = _plan(normalise(events))
    if not plan.others and not plan.mu:
        return Bound(epsilon=0.0, delta=target, method="pld")
    if h is not None:
        fixed = _level(plan, h, target)
        return Bound(fixed.epsilon, target, "pld", detail={"grid": h, "bins": fixed.size})
    h, required = _grids(plan)
    level = _level(plan, h, target)
    best, previous, levels = level.epsilon, math.inf, 1
    while levels < _MAX_LEVELS and 0 < level.epsilon < math.inf:  # 0 is exact: nothing is below
        # atoms only: the bound below is rigorous and grids of atoms are cheap (sparse), so aim
        # ten times closer
        allowed = tolerance * _scale_of(level, target) * (1.0 if level.smooth else 0.1)
        if (level.atoms_off + level.smooth) * h <= allowed:
            break  # rigorous: within h per use of the rounded-down (optimistic) distribution
        richardson = abs(previous - level.epsilon) / 3  # the error of a second-order scheme
        if level.smooth and h <= required and richardson <= allowed:
            break
        factor = 2
        if not level.smooth and level.epsilon > 0:  # atoms only: go straight to the rigorous grid
            factor = 1 << max(1, math.ceil(math.log2(level.atoms_off * h / allowed)))
        if level.size * factor > _MAX_BINS or h / factor < _finest(plan):
            break
        h /= factor
        previous = level.epsilon
        level = _level(plan, h, target)
        best = min(best, level.epsilon)
        levels += 1
    return Bound(
        epsilon=best,
        delta=target,
        method="pld",
        detail={"grid": h, "bins": level.size, "refinements": levels},
    )

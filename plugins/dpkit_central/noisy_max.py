"""Report-noisy-max (``report_noisy_max``) and permute-and-flip (``permute_and_flip``).

Both release only the index of the winning candidate. Releasing the noisy maximum *value*
as well is not covered by the privacy proof (Dwork & Roth 2014, Claim 3.9, conditions on the
other candidates' noise and bounds only the probability of each index) and is not offered.

On seed 003's Theorem 3.13. The seed (after Dwork & Roth 2014, Section 3.4) states that
report-noisy-arg-max with *one-sided exponential* noise of rate ε/(2Δu) has the same output
distribution as the exponential mechanism. That is not so. With two candidates of utilities
0 and c > 0 and noise E_i ~ Exp(rate λ), Pr[0 wins] = Pr[E₀ > c + E₁] = e^(−λc)/2, whereas the
exponential mechanism gives 1/(1 + e^(λc)); the two differ for every c > 0. The correct
statements, both implemented and tested here, are:

* arg-max with iid **Gumbel** noise of scale 1/λ is exactly the exponential mechanism
  (Yellott 1977; the "Gumbel-max trick");
* arg-max with iid **one-sided exponential** noise of rate λ is exactly permute-and-flip
  (Ding et al. 2021, "The Permute-and-Flip Mechanism is Identical to Report-Noisy-Max with
  Exponential Noise", arXiv:2105.07260) — which is still ε-DP at λ = ε/(2Δu) (ε/Δu for
  monotone utilities), and never worse in expected utility than the exponential mechanism
  (McKenna & Sheldon 2020).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import (
    InvalidData,
    InvalidParameter,
    Real,
)
from dpkit_central._selection import Selection, exact_rate, permute_and_flip_secure
from dpkit_central._validation import as_utilities, require_generator
from dpkit_central.exponential import selection_indices

__all__ = [
    "PermuteAndFlip",
    "ReportNoisyMax",
    "permute_and_flip_log_pmf",
    "report_noisy_max_log_pmf",
    "report_one_sided_noisy_argmax",
]

POSITIVE = Real(low=0.0, low_open=True)


@functools.lru_cache(maxsize=64)
def _gauss_legendre_01(n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gauss–Legendre nodes and weights on [0, 1] (exact for polynomials of degree ≤ 2n − 1)."""
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (x + 1.0), 0.5 * w


def permute_and_flip_log_pmf(utilities: Any, rate: float) -> NDArray[np.float64]:
    """Exact log Pr[r] of permute-and-flip for every candidate r, shape (..., m).

    McKenna & Sheldon 2020 ("Permute-and-Flip: A new mechanism for differentially private
    selection", NeurIPS), Algorithm 1: visit the candidates in a uniformly random order and stop
    at r with probability p_r = exp(λ(u_r − u*)), u* = max u. A uniform order is the order of iid
    U(0, 1) arrival times T_j; r is returned iff it is accepted and no j with T_j < T_r is, so

        Pr[r] = p_r ∫₀¹ ∏_{j≠r} (1 − t·p_j) dt.

    The integrand is a polynomial of degree m − 1 in t with every factor in [0, 1], so
    Gauss–Legendre quadrature with ⌊m/2⌋ + 1 nodes is exact (up to rounding, with no
    cancellation); the cost is O(m²) per row, meant for audits and tests rather than large m.
    """
    u = as_utilities(utilities, owner="permute_and_flip", field="utilities")
    m = u.shape[-1]
    log_p = rate * (u - np.max(u, axis=-1, keepdims=True))  # ≤ 0; −inf for −inf utilities
    p = np.exp(log_p)
    t, w = _gauss_legendre_01(m // 2 + 1)
    # log(1 − t_k p_j): shape (..., m, n); t_k < 1 so every term is finite.
    log_factors = np.log1p(-p[..., :, None] * t)
    log_all = np.sum(log_factors, axis=-2, keepdims=True)  # (..., 1, n)
    log_excl = log_all - log_factors  # (..., m, n): product over j ≠ r
    top = np.max(log_excl, axis=-1, keepdims=True)
    log_integral = np.log(np.sum(w * np.exp(log_excl - top), axis=-1)) + top[..., 0]
    return np.asarray(log_p + log_integral, dtype=np.float64)


#: Largest number of finite candidates for which the Laplace report-noisy-max pmf is computed:
#: the expansion below loses up to ~3^m units in the last place (≈ 1e-8 relative at m = 16).
RNM_EXACT_MAX_CANDIDATES = 16
_LOG_HALF = math.log(0.5)


def _rnm_row(v: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Pr[r] for one row of finite utilities already divided by the Laplace scale."""
    n = v.shape[0]
    if n == 1:
        return np.zeros(1)
    c = np.unique(v)
    out = np.empty(n)
    for r in range(n):
        others = np.delete(v, r)
        logs = []
        # (−∞, c₀): everyone lies above y; ∫ 2^−n e^{n y − Σv} dy up to c₀.
        logs.append(n * _LOG_HALF + n * c[0] - v.sum() - math.log(n))
        # Middle segments (c_{k−1}, c_k) and the last one (c_{K−1}, ∞), with y = a + s.
        for k in range(1, len(c) + 1):
            a = c[k - 1]
            last = k == len(c)
            length = math.inf if last else c[k] - a
            below = others[others <= a]
            above = others[others > a]
            r_below = v[r] <= a
            log_d = _LOG_HALF + (-(a - v[r]) if r_below else (a - v[r]))
            sigma = -1 if r_below else 1
            log_c = above.size * _LOG_HALF + float(np.sum(a - above))
            # ∏(1 − B_j e^{−s}) = Σ_t coef_t e^{−t s}, B_j = ½e^{−(a − v_j)} ≤ ½.
            coef = np.ones(1)
            for b in 0.5 * np.exp(-(a - below)):
                coef = np.append(coef, 0.0) - b * np.append(0.0, coef)
            kappa = above.size + sigma - np.arange(coef.size)
            if last:  # every κ < 0 here: ∫₀^∞ e^{κ s} ds = 1/(−κ)
                log_i = -np.log(-kappa.astype(np.float64))
            else:
                log_i = np.empty(coef.size)
                for t, kap in enumerate(kappa):
                    if kap == 0:
                        log_i[t] = math.log(length)
                    elif kap > 0:
                        log_i[t] = (
                            kap * length + math.log(-math.expm1(-kap * length)) - math.log(kap)
                        )
                    else:
                        log_i[t] = math.log(-math.expm1(kap * length)) - math.log(-kap)
            with np.errstate(divide="ignore"):
                log_terms = np.log(np.abs(coef)) + log_i
            top = float(np.max(log_terms))
            total = float(np.sum(np.sign(coef) * np.exp(log_terms - top)))
            if total > 0:
                logs.append(log_d + log_c + top + math.log(total))
        top = max(logs)
        out[r] = top + math.log(sum(math.exp(x - top) for x in logs))
    return out


def report_noisy_max_log_pmf(utilities: Any, scale: float) -> NDArray[np.float64]:
    """Exact log Pr[r] of Laplace report-noisy-max for every candidate r, shape (..., m).

    Pr[r] = ∫ f(y − u_r) ∏_{j≠r} F(y − u_j) dy with f, F the Lap(``scale``) density and CDF
    (Dwork & Roth 2014, Section 3.3). Between consecutive distinct utilities every factor is
    ½e^{±(y − u)/b} or 1 − ½e^{−(y − u)/b}, so on each such segment the integrand is a finite
    sum of exponentials in y: the product of the (1 − B_j e^{−s}) factors is expanded into its
    polynomial in e^{−s} (coefficients by repeated multiplication, every B_j ≤ ½) and each term
    is integrated in closed form; segments are combined in log space. O(m³) per row and
    subject to cancellation of order 3^m ulps, so it is offered for at most
    ``RNM_EXACT_MAX_CANDIDATES`` finite candidates (audits use a handful). −inf utilities
    have probability 0.
    """
    u = as_utilities(utilities, owner="report_noisy_max", field="utilities")
    counts = np.isfinite(u).sum(axis=-1)
    if counts.max() > RNM_EXACT_MAX_CANDIDATES:
        raise InvalidData(
            f"report_noisy_max: the exact pmf is computed for at most "
            f"{RNM_EXACT_MAX_CANDIDATES} finite candidates, got {int(counts.max())}",
            field="utilities",
        )
    # Each distinct row is computed once (O(m³) in Python): audits repeat one row many times.
    flat = u.reshape(-1, u.shape[-1])
    if flat.shape[0] > 1 and bool(np.all(flat == flat[0])):
        rows, inverse = flat[:1], np.zeros(flat.shape[0], dtype=np.intp)
    else:
        rows, inverse = np.unique(flat, axis=0, return_inverse=True)
    out = np.full(rows.shape, -np.inf)
    for i, row in enumerate(rows):
        keep = np.isfinite(row)
        out[i, keep] = _rnm_row(row[keep] / scale)
    return out[inverse.ravel()].reshape(u.shape)


def report_one_sided_noisy_argmax(
    utilities: Any, /, *, rate: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """arg-max_r (u_r + E_r), E_r iid exponential with rate ``rate`` (mean 1/rate).

    Dwork & Roth 2014, Section 3.4 ("Report One-Sided Noisy Arg-Max"). Its output law is that of
    permute-and-flip at the same rate (Ding et al. 2021), not that of the exponential
    mechanism (see the module docstring).
    """
    rng = dpkit.check_rng(rng, owner="report_one_sided_noisy_argmax")
    require_generator(rng, owner="report_one_sided_noisy_argmax")
    u = as_utilities(utilities, owner="report_one_sided_noisy_argmax")
    noisy = rng.exponential(1.0 / rate, size=u.shape)
    noisy += u
    return np.asarray(np.argmax(noisy, axis=-1), dtype=np.int64)


def _candidate_space(owner: str, candidates: int | None) -> NDArray[np.int64]:
    if candidates is None or isinstance(candidates, bool) or candidates < 1:
        raise InvalidParameter(
            "candidates",
            candidates,
            "the number m >= 1 of candidates (the output space is 0 .. m-1)",
            owner=owner,
        )
    return np.arange(int(candidates), dtype=np.int64)


def _log_pmf_at(log_pmf: NDArray[np.float64], outputs: Any) -> NDArray[np.float64]:
    idx, valid = selection_indices(outputs, log_pmf.shape[-1], log_pmf.shape[:-1])
    lb = np.broadcast_to(log_pmf, (*idx.shape, log_pmf.shape[-1]))
    chosen = np.take_along_axis(lb, idx[..., None], axis=-1)[..., 0]
    return np.asarray(np.where(valid, chosen, -np.inf), dtype=np.float64)


@attrs.frozen
class ReportNoisyMax(Selection):
    """Report the index of the largest utility after adding iid Laplace noise; not the value.

    Dwork & Roth 2014, Claim 3.9: for counting queries (monotone, Δ = 1), Lap(1/ε) noise is
    ε-DP. For utilities of sensitivity Δu that may move in different directions between
    neighbours, the noise scale must be doubled to Lap(2Δu/ε) (as used by McKenna & Sheldon
    2020 for general quality scores): conditioned on the other candidates' noise, r wins iff
    its noise exceeds a threshold that moves by at most 2Δu between neighbours, and
    Pr[X > s] ≤ e^(2Δu/b) Pr[X > s + 2Δu] for X ~ Lap(b).
    So the scale is b = 2Δu/ε by default and Δu/ε with ``monotone=True``.

    Input and output as for ``exponential``: utilities (..., m) → indices (...). A −inf
    utility is never chosen.

    Secure mode is refused with a typed error naming ``rng``. An exact version would need
    either exact comparisons of continuous Laplace variables or discrete (geometric) noise
    with a tie-breaking rule, and we know of no published proof for the latter; OpenDP,
    whose noise is all exact, offers report-noisy-max only with exponential noise
    (permute-and-flip) and Gumbel noise (the exponential mechanism), and its Laplace-max
    issue is open (opendp/opendp#950; #939 notes that Laplace max has worse utility than
    exponential max). Both alternatives run exactly in secure mode here. ``log_probability`` integrates the Laplace densities in closed
    form segment by segment (:func:`report_noisy_max_log_pmf`); it is exact up to rounding
    and offered for up to ``RNM_EXACT_MAX_CANDIDATES`` finite candidates.
    """

    name: ClassVar[str] = "report_noisy_max"

    @property
    def scale(self) -> float:
        """The Laplace scale b: 2Δu/ε, or Δu/ε when monotone."""
        return (1.0 if self.monotone else 2.0) * self.sensitivity / self.epsilon

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """arg-max_r (u_r + Lap(b)) along the last axis."""
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter(
                "rng",
                rng,
                "a numpy.random.Generator (fast mode): report_noisy_max adds continuous Laplace "
                "noise and has no exact secure sampler; for a secure selection use "
                "'permute_and_flip' (report-noisy-max with exponential noise) or 'exponential' "
                "(report-noisy-max with Gumbel noise), which sample exactly on the secure source",
                owner=self.name,
            )
        u = as_utilities(values, owner=self.name)
        noisy = rng.laplace(0.0, self.scale, size=u.shape)
        noisy += u
        return np.asarray(np.argmax(noisy, axis=-1), dtype=np.int64)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        """Exact log Pr[r | u] (see :func:`report_noisy_max_log_pmf`), broadcasting."""
        return _log_pmf_at(report_noisy_max_log_pmf(inputs, self.scale), outputs)

    def output_space(self, candidates: int | None = None) -> NDArray[np.int64]:
        """The candidate indices 0 .. m−1; m is the length of the utility vector."""
        return _candidate_space(self.name, candidates)


@attrs.frozen
class PermuteAndFlip(Selection):
    """Permute-and-flip selection (McKenna & Sheldon 2020, Algorithm 1).

    Visit the candidates in a uniformly random order; at candidate r flip a coin with
    Pr[heads] = exp(λ(u_r − u*)), u* = max u, λ = ε/(2Δu), and stop at the first heads (the
    maximiser always comes up heads, so the loop ends). ε-DP (McKenna & Sheldon 2020).
    With ``monotone=True`` λ = ε/Δu, which is ε-DP because permute-and-flip is
    report-noisy-max with Exp(rate λ) noise (Ding et al. 2021) and for monotone
    utilities that shifts every winning threshold by at most Δu in one direction (the argument
    of Dwork & Roth 2014, Claim 3.9; Pr[E ≥ s + Δu] ≥ e^(−λΔu) Pr[E ≥ s]).

    Fast mode, vectorised form of the loop: iid arrival times T_r ~ U(0, 1) give the uniform order and
    iid coins V_r ~ U(0, 1) < p_r the flips; the output is the accepted candidate with the
    smallest T. ``log_probability`` is exact (:func:`permute_and_flip_log_pmf`).
    """

    name: ClassVar[str] = "permute_and_flip"

    @property
    def rate(self) -> float:
        """λ: ε/(2Δu), or ε/Δu when monotone."""
        return self.epsilon / ((1.0 if self.monotone else 2.0) * self.sensitivity)

    @property
    def exact_rate(self) -> Fraction:
        """λ as an exact rational of the binary values of ε and Δu (used in secure mode)."""
        return exact_rate(self.epsilon, self.sensitivity, self.monotone)

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """The chosen candidate indices, shape ``utilities.shape[:-1]``.

        Secure mode (``rng=None`` or a SecureRandom) runs Algorithm 1 exactly: every coin is
        the exact Bernoulli(exp(−γ_r)) of CKS20 with γ_r = λ(u* − u_r) an exact rational of the
        float utilities, ε and Δu, and the winner is uniform among the heads (the first heads
        in a uniform order); see :func:`dpkit_central._selection.permute_and_flip_secure`.
        Its output law is exactly :meth:`log_probability`'s, at the declared ε.
        """
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        u = as_utilities(values, owner=self.name)
        if not isinstance(rng, np.random.Generator):
            return permute_and_flip_secure(u, self.exact_rate, rng)
        p = np.exp(self.rate * (u - np.max(u, axis=-1, keepdims=True)))
        arrival = rng.random(u.shape)
        accepted = rng.random(u.shape) < p  # the maximiser has p = 1 > V
        arrival[~accepted] = np.inf
        return np.asarray(np.argmin(arrival, axis=-1), dtype=np.int64)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        """Exact log Pr[r | u] (see :func:`permute_and_flip_log_pmf`), broadcasting."""
        return _log_pmf_at(permute_and_flip_log_pmf(inputs, self.rate), outputs)

    def output_space(self, candidates: int | None = None) -> NDArray[np.int64]:
        """The candidate indices 0 .. m−1; m is the length of the utility vector."""
        return _candidate_space(self.name, candidates)

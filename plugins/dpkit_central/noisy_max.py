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

import decimal
import functools
import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    InvalidData,
    InvalidParameter,
    Real,
    SecureRandom,
    array_library,
    check_rng,
    discrete_laplace,
    permute_and_flip_indices,
    report_noisy_max_indices,
    resolve_rng,
)
from dpkit_central._noise import smaller_reading
from dpkit_central._selection import (
    Selection,
    exact_rate,
    exact_utility,
    from_the_top,
    odd_mantissas,
    permute_and_flip_secure,
)
from dpkit_central._validation import as_utilities, require_generator
from dpkit_central.exponential import selection_indices, selection_log_probability

__all__ = [
    "NoisyMaxLattice",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "noisy_max_lattice",
    "permute_and_flip_log_pmf",
    "report_noisy_max_log_pmf",
    "report_one_sided_noisy_argmax",
    "secure_report_noisy_max_log_pmf",
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
    return np.asarray(_permute_and_flip_rows(np, None, u, rate), dtype=np.float64)


def _permute_and_flip_rows(xp: Any, device: Any, u: Any, rate: float) -> Any:
    """:func:`permute_and_flip_log_pmf` of float64 utilities of the namespace ``xp`` (numpy's
    on the host, an accelerator's on its device); the nodes and weights are the host's,
    copied there."""
    m = int(u.shape[-1])
    log_p = rate * (u - xp.max(u, axis=-1, keepdims=True))  # ≤ 0; −inf for −inf utilities
    p = xp.exp(log_p)
    nodes, weights = _gauss_legendre_01(m // 2 + 1)
    t, w = (
        (nodes, weights) if xp is np else (xp.asarray(a, device=device) for a in (nodes, weights))
    )
    # log(1 − t_k p_j): shape (..., m, n); t_k < 1 so every term is finite.
    log_factors = xp.log1p(-p[..., :, None] * t)
    log_all = xp.sum(log_factors, axis=-2, keepdims=True)  # (..., 1, n)
    log_excl = log_all - log_factors  # (..., m, n): product over j ≠ r
    top = xp.max(log_excl, axis=-1, keepdims=True)
    log_integral = xp.log(xp.sum(w * xp.exp(log_excl - top), axis=-1)) + top[..., 0]
    return log_p + log_integral


#: Largest number of finite candidates for which the Laplace report-noisy-max pmf is computed:
#: the expansion below loses up to ~3^m units in the last place (≈ 1e-8 relative at m = 16).
RNM_EXACT_MAX_CANDIDATES = 16
_LOG_HALF = math.log(0.5)


#: Candidates more than this many Laplace scales below candidate r are left out of Pr[r]
#: (:func:`_rnm_row`): they change it by a relative 4·10⁻²⁰ at most.
RNM_NEGLIGIBLE_GAP = 50.0


def _rnm_row(v: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Pr[r] for one row of finite utilities already divided by the Laplace scale.

    Pr[r] is computed among the candidates j with v_j ≥ v_r − G, G = ``RNM_NEGLIGIBLE_GAP``
    (r's near set; candidates with one near set share one expansion), so the expansion's
    logarithms stay as large as the near candidates' spread, not the whole row's. Leaving the
    others out is exact to a relative (m − 1)·e^(−G)(2 + G)/4 < 4·10⁻²⁰: given Y_r = y, r
    beating the near candidates is increasing in y and a far candidate k beating y is
    decreasing, so by Chebyshev's association inequality P(r beats the near ∧ Y_k > Y_r) ≤
    P(r beats the near)·P(Y_k > Y_r), and P(Y_k > Y_r) = e^(−D)(2 + D)/4 for the difference
    of two Laplace(1) variables at D = v_r − v_k ≥ G.
    """
    out = np.empty(v.shape[0])
    sets: dict[bytes, list[int]] = {}
    for r in range(v.shape[0]):
        sets.setdefault((v >= v[r] - RNM_NEGLIGIBLE_GAP).tobytes(), []).append(r)
    for key, members in sets.items():
        near = np.frombuffer(key, dtype=np.bool_)
        position = np.cumsum(near) - 1
        out[members] = _rnm_expansion(v[near])[position[members]]
    return out


def _rnm_expansion(v: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Pr[r] for every candidate of one row of finite scaled utilities, all of them
    taken into account: the segment expansion of :func:`report_noisy_max_log_pmf`."""
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


def _rnm_rows(xp: Any, device: Any, v: Any) -> Any:
    """:func:`_rnm_row` for every row of ``v`` (..., m) at once, in the namespace ``xp`` (an
    accelerator's on its device): float64 utilities already divided by the Laplace scale,
    −inf for a candidate that cannot win, at least one finite per row.

    The same expansion with the same IEEE operations on the same doubles, in branch-free form:
    the row sorted, segment k runs from the k-th smallest value a to the next (to ∞ for the
    largest; a segment of length 0 between tied values, or starting at −inf, is dropped, as
    the host drops repeated values); candidate r's expansion takes r's near set, as the
    host's (the candidates at most ``RNM_NEGLIGIBLE_GAP`` below v_r, whose segments are the
    row's from there up); a candidate of utility −inf is "below" every segment
    with B = ½e^(−∞) = 0, whose factor 1 − 0·e^(−s) leaves every coefficient unchanged to the
    bit; the coefficient arrays are padded with zeros to m terms (their terms are e^(−∞) = 0);
    the three cases of κ are evaluated everywhere and selected. What may differ from the
    host's value: the device's ``exp``, ``expm1``, ``log``, and the order of its sums over the
    candidates above a segment and over all of them (the bound of docs/tensors.md).

    Rows go :data:`_RNM_DEVICE_ROWS` at a time (a shape, public): each holds about ten
    (m, m, m) float64 arrays at once, 320 KiB at m = 16.
    """
    shape, m = tuple(v.shape), int(v.shape[-1])
    flat = xp.reshape(v, (-1, m))
    rows = int(flat.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # masked below
        parts = [
            _rnm_rows_masked(xp, device, flat[start : min(start + _RNM_DEVICE_ROWS, rows), ...])
            for start in range(0, rows, _RNM_DEVICE_ROWS)
        ]
    if not parts:
        return xp.reshape(flat, shape)  # no row: nothing to score
    return xp.reshape(parts[0] if len(parts) == 1 else xp.concat(parts, axis=0), shape)


#: Rows scored at once on a device by :func:`_rnm_rows` (about 640 MiB of arrays at m = 16).
_RNM_DEVICE_ROWS = 2048


def _rnm_rows_masked(xp: Any, device: Any, v: Any) -> Any:
    """:func:`_rnm_rows` of rows (R, m); axes (R, r, k, j or t): candidate r, segment k, other
    candidate j or term t. Values of dropped segments and −inf candidates are masked."""
    m = int(v.shape[-1])
    finite = v > -math.inf
    # r's near set (its own expansion, as the host's): j finite with v_j ≥ v_r − G.
    near = finite[..., None, :] & (v[..., None, :] >= v[..., :, None] - RNM_NEGLIGIBLE_GAP)
    count = xp.sum(xp.astype(near, xp.float64), axis=-1)  # (..., m)
    w = xp.sort(v, axis=-1)
    a = w[..., None, :]  # (..., 1, K): segment starts; K = m segments
    end = xp.concat([w[..., 1:], xp.full_like(w[..., :1], math.inf)], axis=-1)[..., None, :]
    last = xp.arange(m, device=device) == m - 1  # (K,)
    length = end - a
    vr = v[..., :, None]  # (..., m, 1): candidate r
    # (..., m, K): the segments of r's near set, which are the row's from v_r − G up
    segment = (a > -math.inf) & (last | (length > 0)) & (a >= vr - RNM_NEGLIGIBLE_GAP)
    vj = v[..., None, None, :]  # (..., 1, 1, m): the other candidates j
    other = ~xp.eye(m, dtype=xp.bool, device=device)[:, None, :]  # (m, 1, m): j ≠ r
    safe = xp.where(segment, a, 0.0)  # a finite stand-in where the segment is dropped
    safe_j = safe[..., None]
    r_below = vr <= safe
    x = safe - vr
    log_d = _LOG_HALF + xp.where(r_below, -x, x)
    above = other & (vj > safe_j)  # (..., m, K, m)
    n_above = xp.sum(xp.astype(above, xp.float64), axis=-1)
    log_c = n_above * _LOG_HALF + xp.sum(xp.where(above, safe_j - vj, 0.0), axis=-1)
    # ∏_{j below}(1 − B_j e^{−s}) = Σ_t coef_t e^{−t s}, the host's recursion in index order.
    below = other & (vj <= safe_j) & near[..., :, None, :]
    b = xp.where(below, 0.5 * xp.exp(-(safe_j - xp.where(below, vj, safe_j))), 0.0)
    zero = xp.zeros_like(b[..., :1])  # (..., m, K, 1)
    coef = xp.concat([xp.ones_like(zero), xp.zeros_like(b[..., 1:])], axis=-1)  # (..., m, K, m)
    for j in range(m):
        shifted = xp.concat([zero, coef[..., :-1]], axis=-1)
        coef = coef - b[..., j : j + 1] * shifted
    sigma = 1.0 - 2.0 * xp.astype(r_below, xp.float64)  # −1 below, +1 above
    kappa = (n_above + sigma)[..., None] - xp.astype(
        xp.arange(m, device=device), xp.float64
    )  # (..., m, K, m)
    span = xp.where(last | ~segment, 1.0, length)[..., None]  # finite stand-in
    positive = xp.where(kappa > 0, kappa, 1.0)
    negative = xp.where(kappa < 0, -kappa, 1.0)
    up = positive * span
    log_up = up + xp.log(-xp.expm1(-up)) - xp.log(positive)
    log_down = xp.log(-xp.expm1(-negative * span)) - xp.log(negative)
    log_i = xp.where(kappa > 0, log_up, xp.where(kappa < 0, log_down, xp.log(span)))
    log_i = xp.where(last[:, None], -xp.log(negative), log_i)
    log_terms = xp.log(xp.abs(coef)) + log_i
    top = xp.max(log_terms, axis=-1)
    total = xp.sum(xp.sign(coef) * xp.exp(log_terms - top[..., None]), axis=-1)
    kept = segment & (total > 0)
    part = log_d + log_c + top + xp.log(xp.where(kept, total, 1.0))
    part = xp.where(kept, part, -math.inf)  # (..., m, K)
    near_v = v[..., None, :]
    smallest = xp.min(xp.where(near, near_v, math.inf), axis=-1)  # (..., m)
    spread = xp.sum(xp.where(near, near_v, 0.0), axis=-1)
    first = count * _LOG_HALF + count * smallest - spread - xp.log(count)  # (..., m)
    parts = xp.concat([first[..., None], part], axis=-1)
    peak = xp.max(parts, axis=-1)
    out = peak + xp.log(xp.sum(xp.exp(parts - peak[..., None]), axis=-1))
    out = xp.where(count == 1.0, 0.0, out)
    return xp.where(finite, out, -math.inf)


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
    have probability 0. The utilities are taken less their row's largest, and Pr[r] over the
    candidates at most ``RNM_NEGLIGIBLE_GAP`` scales below u_r (:func:`_rnm_row`: exact to a
    relative 4·10⁻²⁰), so the logarithms added are as large as those candidates' spread.
    """
    u = as_utilities(utilities, owner="report_noisy_max", field="utilities")
    return np.asarray(_rnm_log_pmf(np, None, u, scale, field="utilities"), dtype=np.float64)


def _rnm_log_pmf(xp: Any, device: Any, u: Any, scale: float, *, field: str) -> Any:
    """:func:`report_noisy_max_log_pmf` of checked float64 utilities of the namespace ``xp``:
    on the host each distinct row by :func:`_rnm_row`, on an accelerator's device every row
    at once by :func:`_rnm_rows` (the same expansion, branch-free). A row of more than
    ``RNM_EXACT_MAX_CANDIDATES`` finite candidates is refused (the count is read from the
    values, on either side; the message quotes none)."""
    counts = xp.sum(xp.astype(u > -math.inf, xp.int64), axis=-1)
    if bool(xp.any(counts > RNM_EXACT_MAX_CANDIDATES)):
        raise InvalidData(
            f"report_noisy_max: the exact pmf is computed for at most "
            f"{RNM_EXACT_MAX_CANDIDATES} finite candidates in each row of {field}",
            field=field,
        )
    v = from_the_top(xp, u / scale)
    if xp is not np:
        return _rnm_rows(xp, device, v)
    # Each distinct row is computed once (O(m³) in Python): audits repeat one row many times.
    flat = v.reshape(-1, v.shape[-1])
    if flat.shape[0] > 1 and bool(np.all(flat == flat[0])):
        rows, inverse = flat[:1], np.zeros(flat.shape[0], dtype=np.intp)
    else:
        rows, inverse = np.unique(flat, axis=0, return_inverse=True)
    out = np.full(rows.shape, -np.inf)
    for i, row in enumerate(rows):
        keep = np.isfinite(row)
        out[i, keep] = _rnm_row(row[keep])
    return out[inverse.ravel()].reshape(v.shape)


# --------------------------------------------------------------------------------------------
# Secure mode: report-noisy-max with discrete Laplace noise on a power-of-two lattice
# --------------------------------------------------------------------------------------------

#: Resolution of the secure-mode lattice: g = 2^(⌈log₂ Δu⌉ − RNM_LATTICE_BITS).
RNM_LATTICE_BITS = 20
#: The secure noise scale t is rounded up to a multiple of 2⁻¹⁶ (more noise, never less).
_SCALE_DENOMINATOR = 1 << 16
#: Largest numerator of t the exact discrete Laplace sampler takes.
_MAX_SCALE_NUMERATOR = 1 << 62
#: Relative scores below −2⁶² are clipped there; such a candidate cannot win (see below).
_CLIP = 1 << 62
_INT64_MIN = np.iinfo(np.int64).min


@attrs.frozen
class NoisyMaxLattice:
    """Secure report-noisy-max's lattice: step g = 2^``exponent``, score sensitivity D, scale t.

    Scores are k_r = round(u_r / g); neighbouring score vectors differ by at most
    D = ``steps`` per candidate; the noise is discrete Laplace with P[Z = z] ∝ exp(−|z|/t),
    t = ``scale`` an exact rational. The mechanism is (2D/t)-DP (D/t when monotone), and
    2D/t ≤ ε (D/t ≤ ε) by construction.
    """

    exponent: int
    steps: int
    scale: Fraction
    monotone: bool

    @property
    def step(self) -> float:
        """g as a float (0.0 only if g is below the smallest subnormal)."""
        return math.ldexp(1.0, self.exponent)

    @property
    def epsilon(self) -> Fraction:
        """The ε actually realised, exactly: 2D/t, or D/t when monotone (≤ the declared ε)."""
        return (1 if self.monotone else 2) * self.steps / self.scale


def noisy_max_lattice(
    epsilon: float,
    sensitivity: float,
    monotone: bool,
    *,
    bits: int = RNM_LATTICE_BITS,
    owner: str = "report_noisy_max",
) -> NoisyMaxLattice:
    """The secure-mode lattice for report-noisy-max at ε, Δu (see :class:`ReportNoisyMax`).

    g = 2^(⌈log₂ Δu⌉ − ``bits``), a power of two, so u/g is exact. Rounding moves each
    coordinate by at most ½, so |round(x) − round(x′)| ≤ |x − x′| + 1 and, being an integer,
    ≤ ⌊Δu/g⌋ + 1 = D (Δu/g is exact; D is the same at Δu's decimal reading, since no double
    lies strictly between a double and the decimal that rounds to it). t = c·D/ε (c = 2, or 1
    when monotone) at ε's smaller reading (:func:`dpkit_central._noise.smaller_reading`:
    never above what the ledger charges), rounded up to a multiple of 2⁻¹⁶ so that the exact
    sampler can take it (numerator ≤ 2⁶²); rounding t up only lowers the realised ε = c·D/t.
    """
    frac, exp = math.frexp(sensitivity)
    exponent = (exp - 1 if frac == 0.5 else exp) - bits  # ⌈log₂ Δu⌉ − bits, exactly
    ratio = Fraction(sensitivity) * (
        Fraction(1, 1 << exponent) if exponent >= 0 else 1 << -exponent
    )
    steps = math.floor(ratio) + 1
    exact = Fraction((1 if monotone else 2) * steps) / smaller_reading(epsilon)
    units = math.ceil(exact * _SCALE_DENOMINATOR)
    # Decided on t's size in units of 2⁻¹⁶, not on its reduced numerator: a whole or dyadic
    # c·D/ε (ε = 1e-9 at its decimal reading) would pass the latter far below the bound.
    if units > _MAX_SCALE_NUMERATOR:
        smallest = float((1 if monotone else 2) * steps * _SCALE_DENOMINATOR / _MAX_SCALE_NUMERATOR)
        raise InvalidParameter(
            "epsilon",
            epsilon,
            f"at least about {smallest:.3g} in secure mode (the exact discrete Laplace scale "
            f"{float(exact):.3g} in lattice steps is too large); use fast mode for smaller ε",
            owner=owner,
        )
    scale = Fraction(units, _SCALE_DENOMINATOR)
    return NoisyMaxLattice(exponent=exponent, steps=steps, scale=scale, monotone=monotone)


def lattice_scores(
    utilities: NDArray[np.float64], exponent: int
) -> tuple[NDArray[Any], NDArray[np.bool_]]:
    """(k, finite): k = round(u / 2^exponent) exactly (ties to even), and the finite mask.

    Each double is M·2^E exactly (:func:`dpkit_central._selection.odd_mantissas`); with
    s = E − exponent, k = M·2^s when s ≥ 0 (int64 when every |k| < 2⁶², Python ints in an
    object array otherwise, e.g. 1e300 on a fine lattice), and M / 2^(−s) rounded to the
    nearest integer, ties to even, when s < 0 (integer shifts; |M| < 2⁵³, so k = 0 once
    −s ≥ 55). −inf utilities get k = 0 and ``finite`` False.

    Fast path, used whenever every |u|/2^exponent is below 2⁵²: u·2^(−exponent) is then an
    exact double (scaling by a power of two is exact unless it overflows, and a result that
    underflows is below ½ and rounds to k = 0 either way), and ``np.rint`` rounds it to the
    nearest integer, ties to even, exactly (IEEE 754 roundToIntegralTiesToEven): the same k
    in five array passes instead of the integer shifts.
    """
    if utilities.dtype == object:  # values no double holds (Fractions): rounded exactly
        return _exact_lattice_scores(utilities, exponent)
    finite = np.isfinite(utilities)
    with np.errstate(over="ignore"):  # an overflow to ±inf sends the row to the exact path
        scaled = np.ldexp(np.where(finite, utilities, 0.0), -exponent)
    if not scaled.size or float(np.abs(scaled).max()) < 2.0**52:
        np.rint(scaled, out=scaled)
        return scaled.astype(np.int64), finite
    mant, exp = odd_mantissas(np.where(finite, utilities, 0.0))
    shift = np.where(mant == 0, 0, exp - exponent)
    down = shift < 0
    r = np.where(down, np.minimum(-shift, 55), 1)
    quotient = mant >> r  # floor division by 2^r
    remainder = mant - (quotient << r)  # in [0, 2^r)
    half = np.left_shift(1, r - 1)
    round_up = (remainder > half) | ((remainder == half) & ((quotient & 1) == 1))
    rounded = quotient + round_up
    up_shift = np.where(down, 0, shift)
    bits = np.frexp(np.abs(mant).astype(np.float64))[1] + up_shift
    if not bits.size or int(bits.max()) <= 62:
        return np.where(down, rounded, mant << up_shift), finite
    wide = np.left_shift(mant.astype(object), up_shift.astype(object))
    wide[down] = rounded[down].astype(object)
    return wide, finite


def _exact_lattice_scores(
    utilities: NDArray[Any], exponent: int
) -> tuple[NDArray[Any], NDArray[np.bool_]]:
    """:func:`lattice_scores` of an object array of doubles and Fractions
    (:func:`~dpkit_central._validation.total_utilities`): k = round(u / 2^exponent) in exact
    rationals, ties to even as for a double (int64 when every |k| < 2⁶², else Python ints)."""
    step = Fraction(2) ** exponent
    flat = utilities.reshape(-1).tolist()
    finite = np.array([u != -math.inf for u in flat], dtype=np.bool_).reshape(utilities.shape)
    scores = [round(exact_utility(u) / step) if u != -math.inf else 0 for u in flat]
    if all(abs(k) < 1 << 62 for k in scores):
        return np.array(scores, dtype=np.int64).reshape(utilities.shape), finite
    wide = np.empty(len(scores), dtype=object)
    wide[:] = scores
    return wide.reshape(utilities.shape), finite


def _relative_scores(scores: NDArray[Any], finite: NDArray[np.bool_]) -> NDArray[np.int64]:
    """max(k_r − max_j k_j, −2⁶²) per row (int64); the maximum is over finite candidates."""
    if scores.dtype == object:
        low = min(scores[finite].min(initial=0), 0) - 1
        top = np.max(np.where(finite, scores, low), axis=-1, keepdims=True)
        rel = np.where(finite, scores - top, 0)
        return np.maximum(rel, -_CLIP).astype(np.int64)
    top = np.max(np.where(finite, scores, _INT64_MIN), axis=-1, keepdims=True)
    rel = np.where(finite, scores - top, 0)  # in (−2⁶³, 0]: |k| < 2⁶²
    return np.asarray(np.maximum(rel, -_CLIP), dtype=np.int64)


def report_noisy_max_secure(
    utilities: NDArray[np.float64], lattice: NoisyMaxLattice, rng: Any
) -> NDArray[np.int64]:
    """argmax_r (k_r + Z_r), lowest index on ties, Z_r iid exact discrete Laplace(t).

    k = :func:`lattice_scores`, Z from :func:`dpkit.plugin.discrete_laplace` (Canonne, Kamath &
    Steinke 2020, Algorithm 2) at the exact rational t of ``lattice``. Subtracting each row's
    maximum score changes no comparison. A relative score below −2⁶² is clipped to −2⁶²: when
    every |Z| < 2⁶¹ such a candidate's noisy score, clipped or not, is below −2⁶¹, while the
    maximiser's is Z > −2⁶¹, so it loses either way and the arg-max is unchanged; otherwise
    (probability below e^(−2⁶¹/t)) the row is recomputed with Python integers. Every step is
    exact integer arithmetic; ``numpy.argmax`` returns the first maximum (lowest index).
    """
    m = utilities.shape[-1]
    flat = utilities.reshape(-1, m)
    scores, finite = lattice_scores(flat, lattice.exponent)
    noise = np.asarray(discrete_laplace(lattice.scale, size=flat.shape, rng=rng), dtype=np.int64)
    largest_noise = int(np.abs(noise).max()) if noise.size else 0
    if largest_noise >= 1 << 61:  # probability below e^(−2⁶¹/t)
        exact = scores.astype(object) + noise.astype(object)
        exact[~finite] = -math.inf
        return np.asarray(np.argmax(exact, axis=-1), dtype=np.int64).reshape(utilities.shape[:-1])
    if scores.dtype != object and int(np.abs(scores).max(initial=0)) < 1 << 61:
        noisy = scores + noise  # |k + Z| < 2⁶²: no relative scores needed
    else:
        noisy = _relative_scores(scores, finite) + noise
    noisy[~finite] = _INT64_MIN
    return np.asarray(np.argmax(noisy, axis=-1), dtype=np.int64).reshape(utilities.shape[:-1])


#: The exact pmf takes scores spanning at most this many lattice steps.
_PMF_MAX_SPREAD = 1 << 62


def _lattice_rnm_row(scores: list[int], t: Fraction, ctx: decimal.Context) -> list[decimal.Decimal]:
    """Pr[r] for argmax_r (k_r + Z_r), lowest index on ties, Z iid discrete Laplace(t).

    With q = e^(−1/t), P[Z = z] = A q^|z|, A = (1 − q)/(1 + q), and the CDF
    F(x) = q^(−x)/(1 + q) for x ≤ −1, 1 − q^(x+1)/(1 + q) for x ≥ 0. Candidate i wins iff
    Z_j ≤ Z_i + c_j for every j ≠ i, c_j = k_i − k_j − [j < i] (strict against lower
    indices), so Pr[i] = Σ_z A q^|z| ∏_j F(z + c_j). Split ℤ at 0 and at every −c_j: on a
    segment [lo, hi] the set L of j with z + c_j ≤ −1 is fixed and, with z = lo + w,

        summand = A(1 + q)^(−|L|) q^(E₀ + (σ − |L|)w) ∏_{j∉L} (1 − β_j q^w),

    E₀ = |lo| + Σ_L |lo + c_j|, σ = sign(z) (±1), β_j = q^(lo + c_j + 1)/(1 + q) < ½. The
    product is expanded into Σ_s a_s q^(sw) and each Σ_w q^((σ − |L| + s)w) summed in closed form
    (the dominant end factored out, so every power of q taken is ≤ 1). No truncation: the
    only error is rounding at ``ctx``'s precision, amplified at most 3^m times by cancellation
    (for each z the expanded terms sum in absolute value to ≤ (3/2)^|H| against a product
    ≥ 2^(−|H|)) and by ≈ t in 1 − q^e.
    """
    m = len(scores)
    if m == 1:
        return [decimal.Decimal(1)]
    num, den = t.numerator, t.denominator

    def qpow(e: int) -> decimal.Decimal:
        return ctx.exp(ctx.divide(decimal.Decimal(-e * den), decimal.Decimal(num)))

    def one_minus_qpow(e: int) -> decimal.Decimal:
        return ctx.subtract(1, qpow(e))

    q = qpow(1)
    one_plus_q = ctx.add(1, q)
    a_const = ctx.divide(one_minus_qpow(1), one_plus_q)
    out = []
    for i in range(m):
        c = [scores[i] - scores[j] - (1 if j < i else 0) for j in range(m) if j != i]
        breaks = sorted({-cj for cj in c} | {0})
        hi = breaks[0] - 1  # first segment (−∞, hi]: z < 0 and every j in L
        e0 = -hi + sum(-(hi + cj) for cj in c)
        total = ctx.divide(
            ctx.multiply(a_const, qpow(e0)),
            ctx.multiply(ctx.power(one_plus_q, m - 1), one_minus_qpow(m)),
        )
        for index, lo in enumerate(breaks):
            n = None if index + 1 == len(breaks) else breaks[index + 1] - lo
            low = [cj for cj in c if lo + cj < 0]
            sigma = 1 if lo >= 0 else -1
            e0 = abs(lo) + sum(-(lo + cj) for cj in low)
            coef = [decimal.Decimal(1)]
            for cj in c:
                if lo + cj >= 0:
                    beta = ctx.divide(qpow(lo + cj + 1), one_plus_q)
                    coef = [
                        ctx.subtract(
                            coef[s] if s < len(coef) else 0,
                            ctx.multiply(beta, coef[s - 1]) if s else 0,
                        )
                        for s in range(len(coef) + 1)
                    ]
            pre = ctx.divide(a_const, ctx.power(one_plus_q, len(low)))
            for s, a in enumerate(coef):
                e = sigma - len(low) + s
                extra = 0
                if n is None:  # last segment: lo ≥ 0, L empty, e ≥ 1
                    geometric = ctx.divide(1, one_minus_qpow(e))
                elif e == 0:
                    geometric = decimal.Decimal(n)
                elif e > 0:
                    geometric = ctx.divide(one_minus_qpow(e * n), one_minus_qpow(e))
                else:  # factor out the largest term, q^(e(n−1)); E₀ + e(n − 1) ≥ 0
                    extra = e * (n - 1)
                    geometric = ctx.divide(one_minus_qpow(-e * n), one_minus_qpow(-e))
                term = ctx.multiply(ctx.multiply(pre, a), qpow(e0 + extra))
                total = ctx.add(total, ctx.multiply(term, geometric))
        out.append(total)
    return out


def secure_report_noisy_max_log_pmf(
    utilities: Any,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotone: bool = False,
    lattice_bits: int = RNM_LATTICE_BITS,
) -> NDArray[np.float64]:
    """Exact log Pr[r] of *secure* report-noisy-max for every candidate r, shape (..., m).

    The output law of ``ReportNoisyMax(epsilon, sensitivity, monotone).randomize(u, rng=None)``:
    scores k = round(u/g) on the lattice of :func:`noisy_max_lattice`, discrete Laplace noise
    of scale t, arg-max with the lowest index on ties. Computed in closed form segment by
    segment at 90 significant digits (see :func:`_lattice_rnm_row`; no truncation of the
    noise's support), then rounded to float64. ``lattice_bits`` gives a coarser lattice for
    audits and tests (the mechanism itself always uses ``RNM_LATTICE_BITS``). Offered for at
    most ``RNM_EXACT_MAX_CANDIDATES`` finite candidates whose scores span at most 2⁶² lattice
    steps (utilities within about 4·10¹² Δu of each other). −inf utilities have
    probability 0.
    """
    owner = "report_noisy_max"
    u = as_utilities(utilities, owner=owner, field="utilities")
    lattice = noisy_max_lattice(epsilon, sensitivity, monotone, bits=lattice_bits, owner=owner)
    counts = np.isfinite(u).sum(axis=-1)
    if counts.max() > RNM_EXACT_MAX_CANDIDATES:
        raise InvalidData(
            f"{owner}: the exact secure pmf is computed for at most "
            f"{RNM_EXACT_MAX_CANDIDATES} finite candidates, got {int(counts.max())}",
            field="utilities",
        )
    flat = u.reshape(-1, u.shape[-1])
    rows, inverse = np.unique(flat, axis=0, return_inverse=True)
    scores, finite = lattice_scores(rows, lattice.exponent)
    ctx = decimal.Context(prec=90, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    out = np.full(rows.shape, -np.inf)
    for index in range(rows.shape[0]):
        keep = np.flatnonzero(finite[index])
        row = [int(k) for k in scores[index, keep]]
        if max(row) - min(row) > _PMF_MAX_SPREAD:
            raise InvalidData(
                f"{owner}: the exact secure pmf is computed for scores within 2^62 lattice "
                f"steps of each other (utilities within about 4e12 sensitivities)",
                field="utilities",
            )
        for r, p in zip(keep, _lattice_rnm_row(row, lattice.scale, ctx), strict=True):
            out[index, r] = float(ctx.ln(p)) if p > 0 else -math.inf
    return out[inverse.ravel()].reshape(u.shape)


def report_one_sided_noisy_argmax(
    utilities: Any, /, *, rate: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """arg-max_r (u_r + E_r), E_r iid exponential with rate ``rate`` (mean 1/rate).

    Dwork & Roth 2014, Section 3.4 ("Report One-Sided Noisy Arg-Max"). Its output law is that of
    permute-and-flip at the same rate (Ding et al. 2021), not that of the exponential
    mechanism (see the module docstring).
    """
    rng = check_rng(rng, owner="report_one_sided_noisy_argmax")
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

    ``log_probability`` describes fast mode: it integrates the Laplace densities in closed form
    segment by segment (:func:`report_noisy_max_log_pmf`); it is exact up to rounding and
    offered for up to ``RNM_EXACT_MAX_CANDIDATES`` finite candidates.

    **Secure mode** (``rng=None`` or a SecureRandom) runs report-noisy-max exactly with
    discrete Laplace noise on a power-of-two lattice (:func:`report_noisy_max_secure`):

    1. g = 2^(⌈log₂ Δu⌉ − 20) (``lattice``); integer scores k_r = round(u_r/g), computed
       exactly (:func:`lattice_scores`). Rounding moves each coordinate by at most ½, so
       neighbouring score vectors differ by at most D = ⌊Δu/g⌋ + 1 per candidate (Δu/g is
       exact), and rounding is monotone, so monotone utilities give monotone scores.
    2. Z_r iid discrete Laplace, P[Z = z] ∝ exp(−|z|/t) (Ghosh, Roughgarden & Sundararajan
       2009; sampled exactly by Canonne, Kamath & Steinke 2020, Algorithm 2), with
       t = 2D/ε (D/ε when monotone) at ε's smaller reading (never above the ledger's),
       rounded up to a multiple of 2⁻¹⁶.
    3. Output argmax_r (k_r + Z_r), ties broken by the lowest index.

    Privacy (the argument of Dwork & Roth 2014, Claim 3.9, with discrete noise). Fix i and
    Z_{−i}. With lowest-index tie-breaking, i wins iff Z_i ≥ ρ(k) :=
    max(max_{j<i}(k_j + Z_j) + 1, max_{j>i}(k_j + Z_j)) − k_i, an integer threshold. For a
    neighbour k′ (|k_j − k′_j| ≤ D) ρ(k′) ≤ ρ(k) + 2D, and ρ(k′) ≤ ρ(k) + D when every score
    moves in the same direction. The discrete Laplace tail satisfies
    P[Z ≥ ρ + 1] ≥ e^(−1/t) P[Z ≥ ρ] for every integer ρ: the ratio is exactly e^(−1/t) for
    ρ ≥ 1, and for ρ ≤ 0 it is 1 − P[Z = ρ]/P[Z ≥ ρ] ≥ 1 − P[Z = 0]/P[Z ≥ 0] = e^(−1/t)
    (P[Z = ρ] falls and P[Z ≥ ρ] grows as ρ decreases). Hence, averaging over Z_{−i},
    Pr[i | k′] ≥ e^(−2D/t) Pr[i | k] ≥ e^(−ε) Pr[i | k] (e^(−D/t) when monotone), and the
    neighbour relation is symmetric. The realised ε is ``lattice.epsilon`` = 2D/t ≤ ε.
    The noise is larger than fast mode's by the factor D·g/Δu ≤ 1 + 2⁻¹⁹ in utility units.
    The secure output law is computed exactly by :meth:`secure_log_probability`
    (:func:`secure_report_noisy_max_log_pmf`); it differs from ``log_probability`` by about
    2⁻²⁰ (lattice rounding) and is what the tests check the secure sampler against.
    Secure mode needs ε ≥ about 2⁻²⁵ (t's numerator must fit the exact sampler); below
    that it raises :class:`~dpkit.InvalidParameter` naming ``epsilon``.
    """

    name: ClassVar[str] = "report_noisy_max"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def scale(self) -> float:
        """The Laplace scale b: 2Δu/ε, or Δu/ε when monotone."""
        return (1.0 if self.monotone else 2.0) * self.sensitivity / self.epsilon

    @property
    def lattice(self) -> NoisyMaxLattice:
        """Secure mode's lattice g, score sensitivity D and discrete Laplace scale t."""
        return noisy_max_lattice(self.epsilon, self.sensitivity, self.monotone, owner=self.name)

    def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
        """arg-max_r (u_r + noise) along the last axis.

        Fast mode (a numpy Generator): continuous Lap(b) noise in floating point. Secure mode
        (``rng=None`` or a SecureRandom): exact discrete Laplace noise on integer lattice
        scores, lowest index on ties (see the class docstring and
        :func:`report_noisy_max_secure`); its law is :meth:`secure_log_probability`.

        An accelerator's array is selected on its device, int64 indices in its type, with the
        same law in secure mode (:mod:`dpkit.tensors.selection`: the same lattice scores and
        the host's exact discrete Laplace sampler on the device's ChaCha20 words); ``rng`` may
        then also be a ``torch.Generator`` (fast mode).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            secure = rng is None or isinstance(rng, SecureRandom)
            lattice = self.lattice if secure else None  # public: refused before any value
            return report_noisy_max_indices(
                library,
                values,
                scale=self.scale,
                lattice=None if lattice is None else (lattice.exponent, lattice.scale),
                rng=rng,
                owner=self.name,
            )
        rng = resolve_rng(rng, owner=self.name)[0]
        u = as_utilities(values, owner=self.name, exact=True)
        if not isinstance(rng, np.random.Generator):
            return report_noisy_max_secure(u, self.lattice, rng)
        u = np.asarray(u, dtype=np.float64)  # values no double holds: their nearest doubles
        noisy = rng.laplace(0.0, self.scale, size=u.shape)
        with np.errstate(over="ignore"):  # near ±1.8e308 the sum may round to ±inf: same order
            noisy += u
        return np.asarray(np.argmax(noisy, axis=-1), dtype=np.int64)

    def secure_log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        """Exact log Pr[r | u] of secure mode (:func:`secure_report_noisy_max_log_pmf`)."""
        pmf = secure_report_noisy_max_log_pmf(
            inputs, epsilon=self.epsilon, sensitivity=self.sensitivity, monotone=self.monotone
        )
        return _log_pmf_at(pmf, outputs)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """Exact log Pr[r | u] (see :func:`report_noisy_max_log_pmf`), broadcasting; −inf at
        an index outside 0..m−1; a row of more than ``RNM_EXACT_MAX_CANDIDATES`` finite
        utilities is refused (:class:`~dpkit.InvalidData` naming ``inputs``).

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:func:`dpkit_central.exponential.selection_log_probability`): the same expansion,
        branch-free over every row at once (:func:`_rnm_rows`), with the device's ``exp``,
        ``expm1`` and ``log`` and its summation order — within the bound of docs/tensors.md of
        the host's value (it grows with the expansion's cancellation), −inf exactly where the
        host's is.
        """
        scale = self.scale
        return selection_log_probability(
            outputs,
            inputs,
            lambda xp, device, u: _rnm_log_pmf(xp, device, u, scale, field="inputs"),
            owner=self.name,
        )

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
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def rate(self) -> float:
        """λ: ε/(2Δu), or ε/Δu when monotone."""
        return self.epsilon / ((1.0 if self.monotone else 2.0) * self.sensitivity)

    @property
    def exact_rate(self) -> Fraction:
        """λ as an exact rational, at ε's smaller reading and Δu's larger one (used in
        secure mode: :func:`dpkit_central._selection.exact_rate`)."""
        return exact_rate(self.epsilon, self.sensitivity, self.monotone)

    def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
        """The chosen candidate indices, shape ``utilities.shape[:-1]``.

        Secure mode (``rng=None`` or a SecureRandom) runs Algorithm 1 exactly: every coin is
        the exact Bernoulli(exp(−γ_r)) of CKS20 with γ_r = λ(u* − u_r) an exact rational of the
        float utilities, ε and Δu, and the winner is uniform among the heads (the first heads
        in a uniform order); see :func:`dpkit_central._selection.permute_and_flip_secure`.
        Its output law is exactly :meth:`log_probability`'s, at the declared ε.

        An accelerator's array is selected on its device, int64 indices in its type
        (:mod:`dpkit.tensors.selection`): in secure mode by the same exact sampler (ChaCha20
        words on the device, the exact coins of :mod:`dpkit.tensors.exp_coins`), in fast mode
        (a numpy or ``torch.Generator``) by the fast algorithm below.
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return permute_and_flip_indices(
                library,
                values,
                rate=self.rate,
                rng=rng,
                owner=self.name,
                exact_rate=self.exact_rate,
            )
        rng = resolve_rng(rng, owner=self.name)[0]
        u = as_utilities(values, owner=self.name, exact=True)
        if not isinstance(rng, np.random.Generator):
            return permute_and_flip_secure(u, self.exact_rate, rng)
        u = np.asarray(u, dtype=np.float64)  # values no double holds: their nearest doubles
        with np.errstate(over="ignore"):  # a gap beyond the float range → −inf → p = 0
            p = np.exp(self.rate * (u - np.max(u, axis=-1, keepdims=True)))
        arrival = rng.random(u.shape)
        accepted = rng.random(u.shape) < p  # the maximiser has p = 1 > V
        arrival[~accepted] = np.inf
        return np.asarray(np.argmin(arrival, axis=-1), dtype=np.int64)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """Exact log Pr[r | u] (see :func:`permute_and_flip_log_pmf`), broadcasting; −inf at an
        index outside 0..m−1.

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:func:`dpkit_central.exponential.selection_log_probability`): the same quadrature, its
        nodes and weights computed on the host and copied there, with the device's ``exp``,
        ``log`` and ``log1p`` and its summation order — within the bound of docs/tensors.md of
        the host's value, −inf exactly where the host's is.
        """
        rate = self.rate
        return selection_log_probability(
            outputs,
            inputs,
            lambda xp, device, u: _permute_and_flip_rows(xp, device, u, rate),
            owner=self.name,
        )

    def output_space(self, candidates: int | None = None) -> NDArray[np.int64]:
        """The candidate indices 0 .. m−1; m is the length of the utility vector."""
        return _candidate_space(self.name, candidates)

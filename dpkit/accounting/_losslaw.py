"""Privacy-loss laws of dominating pairs, before discretisation.

A pair (P, Q) *dominates* a mechanism if, for every pair of neighbours x, x′, the hockey-stick
divergence H_{e^ε}(M(x) ‖ M(x′)) is at most H_{e^ε}(P ‖ Q) for every real ε (Zhu, Dong &
Wang 2022, "Optimal Accounting of Differential Privacy via Characteristic Function", the
definition of dominating pairs in Section 3). Its privacy loss is L = ln(dP/dQ) under P; the
mechanism's privacy profile is at most δ(ε) = P[L = ∞] + E_P[(1 − e^{ε − L})₊], and under
adaptive composition the product of the dominating pairs dominates, so their losses add
(ibid., the composition theorem of Section 3). A :class:`LossLaw` holds the law of L under P:

* finite atoms (loss l, P-mass p), whose Q-mass is p·e^{−l};
* ``p_inf`` = P[L = +∞] and ``q_ninf`` = Q[L = −∞] (outputs that only Q produces: they do not
  enter δ(ε), but a subsampled pair mixes P with Q and then they do);
* a continuous part on [lo, hi] that returns, for bins (a, b], the P-mass and the Q-mass
  (= E_P[e^{−L}; a < L ≤ b]) with bounds on their rounding errors, and the P- and Q-masses
  of the two tails it leaves out (below lo, above hi; each below 10⁻³²).

Dominating pairs (all symmetric: (Q, P) is the same pair up to relabelling the outputs):

* Gaussian with μ = 1/noise multiplier: P = N(μ, 1), Q = N(0, 1), so L ~ N(μ²/2, μ²) under P
  and N(−μ²/2, μ²) under Q (Balle & Wang 2018, Lemma 3);
* Laplace at ε: L = ε(|o − 1| − |o|) with o ~ Lap(0, 1/ε): atoms P[L = ε] = 1/2,
  P[L = −ε] = e^{−ε}/2 and the density e^{(l−ε)/2}/4 on (−ε, ε) (Koskela et al. 2021,
  Section 6);
* k-ary randomized response: L = ε, 0, −ε with P-masses (e^ε, k − 2, 1)/(e^ε + k − 1);
* any (ε, δ)-DP event (pure DP when δ = 0): binary randomized response with an extra atom δ
  at L = +∞ under P and at L = −∞ under Q (Kairouz, Oh & Viswanath 2015, Theorem 2.4: every
  (ε, δ)-DP pair is a post-processing of it).

Subsampling at rate q (:func:`subsample`; Zhu, Dong & Wang 2022, Section 5): removal is
dominated by (qP + (1 − q)Q, Q), whose loss is L′ = ln(q·e^L + 1 − q), and addition by
(P, (1 − q)P + qQ), whose loss is L′ = −ln(1 − q + q·e^{−L}). Both maps are increasing in L,
so a bin of L′ is the image of a bin of L, and its masses are mixtures of the base masses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Continuous",
    "LossLaw",
    "approximate_law",
    "gaussian_law",
    "laplace_law",
    "randomized_response_law",
    "subsample",
]

_ULP = 2.0**-52
#: z beyond which a Gaussian tail is left out: Φ(−12) ≈ 1.8e-33.
_GAUSS_T = 12.0

Arrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def _standard_normal_cdf() -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """Φ, vectorised: scipy's ndtr if scipy is installed (fast), else ``math.erfc`` per value.

    Both are accurate to a few ulps relative, in both tails (ndtr(−38) ≈ 2.9e-316).
    """
    try:
        from scipy.special import ndtr  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scipy comes with the test and audit extras
        erfc = np.frompyfunc(math.erfc, 1, 1)

        def phi(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return 0.5 * np.asarray(erfc(-np.asarray(x, dtype=float) / math.sqrt(2.0)), float)

        return phi

    def scipy_phi(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(ndtr(x), dtype=np.float64)

    return scipy_phi


_CDF: list[Callable[[NDArray[np.float64]], NDArray[np.float64]]] = []


def _PHI(x: NDArray[np.float64]) -> NDArray[np.float64]:  # noqa: N802 - the symbol Φ
    """Φ, chosen on first use (scipy is imported lazily: importing dpkit must stay cheap)."""
    if not _CDF:
        _CDF.append(_standard_normal_cdf())
    return _CDF[0](x)


def _interval(za: NDArray[np.float64], zb: NDArray[np.float64]) -> tuple[Any, Any]:
    """Φ(zb) − Φ(za) for za ≤ zb, taken from the tail it lies in (no cancellation), and a bound
    on its rounding error: 64 ulps of the two terms (Φ's own error is a few ulps)."""
    upper = za >= 0
    lower_a, lower_b = _PHI(np.where(upper, -zb, za)), _PHI(np.where(upper, -za, zb))
    mass = np.maximum(lower_b - lower_a, 0.0)  # in the upper tail: Φ(−za) − Φ(−zb)
    straddle = (za < 0) & (zb > 0)  # 1 − Φ(za) − Φ(−zb), both terms small near a wide bin
    if straddle.any():
        mass = np.where(straddle, 1.0 - _PHI(za) - _PHI(-zb), mass)
    return mass, 64 * _ULP * (lower_a + lower_b + straddle)


@attrs.frozen(eq=False)
class Continuous:
    """The continuous part of a loss law on [lo, hi] (see the module docstring).

    ``masses(a, b)`` → (P-mass, Q-mass, P error bound, Q error bound) of the bins (a_j, b_j];
    ``lower_tail``/``upper_tail`` are the (P, Q) masses below lo and above hi.
    """

    lo: float
    hi: float
    masses: Callable[[NDArray[np.float64], NDArray[np.float64]], Arrays]
    lower_tail: tuple[float, float] = (0.0, 0.0)
    upper_tail: tuple[float, float] = (0.0, 0.0)


@attrs.frozen(eq=False)
class LossLaw:
    """The law of L = ln(dP/dQ) under P for one dominating pair (module docstring)."""

    atoms: tuple[tuple[float, float], ...] = ()
    p_inf: float = 0.0
    q_ninf: float = 0.0
    continuous: Continuous | None = None


def gaussian_law(mu: float, *, cover_q: bool = False) -> LossLaw:
    """P = N(μ, 1) against Q = N(0, 1): L ~ N(μ²/2, μ²) under P, N(−μ²/2, μ²) under Q.

    [lo, hi] leaves out 1.8e-33 of P on each side; with ``cover_q`` it also covers Q's lower
    tail (a subsampled pair puts Q's mass under P′).
    """
    mean, sd = 0.5 * mu * mu, mu
    lo = (-mean if cover_q else mean) - _GAUSS_T * sd
    hi = mean + _GAUSS_T * sd

    def masses(a: NDArray[np.float64], b: NDArray[np.float64]) -> Arrays:
        p, p_err = _interval((a - mean) / sd, (b - mean) / sd)
        q, q_err = _interval((a + mean) / sd, (b + mean) / sd)
        return p, q, p_err, q_err

    def tail(z: float) -> float:
        return float(_PHI(np.array([z]))[0])

    lower = (tail((lo - mean) / sd), tail((lo + mean) / sd))
    upper = (tail(-(hi - mean) / sd), tail(-(hi + mean) / sd))
    return LossLaw(continuous=Continuous(lo, hi, masses, lower, upper))


def laplace_law(epsilon: float) -> LossLaw:
    """The Laplace mechanism at ε (module docstring); probabilities written with e^{−ε} only."""
    eps = epsilon

    def masses(a: NDArray[np.float64], b: NDArray[np.float64]) -> Arrays:
        # P: F(b) − F(a) = e^{(b−ε)/2}(1 − e^{(a−b)/2})/2; Q: e^{−(a+ε)/2}(1 − e^{(a−b)/2})/2
        width = -np.expm1((a - b) / 2)
        p = 0.5 * np.exp((b - eps) / 2) * width
        q = 0.5 * np.exp(-(a + eps) / 2) * width
        return p, q, 8 * _ULP * p, 8 * _ULP * q

    atoms = ((eps, 0.5), (-eps, 0.5 * math.exp(-eps)))
    return LossLaw(atoms=atoms, continuous=Continuous(-eps, eps, masses))


def randomized_response_law(epsilon: float, k: int = 2) -> LossLaw:
    """k-ary randomized response at ε: L = ε, 0, −ε (the 0 atom only when k > 2)."""
    tail = math.exp(-epsilon)
    z = 1.0 + (k - 1) * tail  # (e^ε + k − 1)/e^ε
    atoms = [(epsilon, 1 / z), (-epsilon, tail / z)]
    if k > 2:
        atoms.append((0.0, (k - 2) * tail / z))
    return LossLaw(atoms=tuple(atoms))


def approximate_law(epsilon: float, delta: float) -> LossLaw:
    """The worst (ε, δ)-DP pair: RR at ε with probability 1 − δ, L = ±∞ with probability δ."""
    tail = math.exp(-epsilon)
    keep = 1.0 - delta
    atoms = ((epsilon, keep / (1.0 + tail)), (-epsilon, keep * tail / (1.0 + tail)))
    return LossLaw(atoms=atoms, p_inf=delta, q_ninf=delta)


def _remove(q: float) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """L′ = ln(q·e^L + 1 − q) and its inverse L = ln(1 + (e^{L′} − 1)/q)."""
    return (
        lambda x: np.log1p(q * np.expm1(x)),
        lambda y: np.log1p(np.expm1(y) / q),
    )


def _add(q: float) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """L′ = −ln(1 − q + q·e^{−L}) and its inverse L = −ln(1 + (e^{−L′} − 1)/q)."""
    return (
        lambda x: -np.log1p(q * np.expm1(-x)),
        lambda y: -np.log1p(np.expm1(-y) / q),
    )


def subsample(law: LossLaw, q: float, direction: str) -> LossLaw:
    """The loss law of the subsampled pair, ``direction`` "remove" or "add" (module docstring)."""
    if q >= 1.0:
        return law
    remove = direction == "remove"
    forward, inverse = _remove(q) if remove else _add(q)
    atoms: list[tuple[float, float]] = []
    for loss, p in law.atoms:
        moved = float(forward(np.float64(loss)))
        # removal: P′ = qP + (1 − q)Q, and the atom's Q-mass is p·e^{−loss}
        atoms.append((moved, p * (q + (1 - q) * math.exp(-loss)) if remove else p))
    if remove:
        p_inf, q_ninf = q * law.p_inf, 0.0
        if law.q_ninf:  # Q-only outputs: under P′ they have mass (1 − q)·Q, at L′ = ln(1 − q)
            atoms.append((math.log1p(-q), (1 - q) * law.q_ninf))
    else:
        p_inf, q_ninf = 0.0, q * law.q_ninf
        if law.p_inf:  # P-only outputs: Q′ gives them (1 − q)·P, so L′ = −ln(1 − q)
            atoms.append((-math.log1p(-q), law.p_inf))
    continuous = None
    if law.continuous is not None:
        base = law.continuous

        def mix(p: Any, qm: Any, pe: Any, qe: Any) -> Arrays:
            if remove:  # P′ = qP + (1 − q)Q, Q′ = Q
                return q * p + (1 - q) * qm, qm, q * pe + (1 - q) * qe, qe
            return p, (1 - q) * p + q * qm, pe, (1 - q) * pe + q * qe  # P′ = P, Q′ mixed

        def masses(a: NDArray[np.float64], b: NDArray[np.float64]) -> Arrays:
            with np.errstate(divide="ignore", invalid="ignore"):
                xa = np.clip(np.nan_to_num(inverse(a), nan=base.lo), base.lo, base.hi)
                xb = np.clip(np.nan_to_num(inverse(b), nan=base.lo), base.lo, base.hi)
            return mix(*base.masses(xa, xb))

        lower = mix(*(np.array([v]) for v in (*base.lower_tail, 0.0, 0.0)))
        upper = mix(*(np.array([v]) for v in (*base.upper_tail, 0.0, 0.0)))
        continuous = Continuous(
            float(forward(np.float64(base.lo))),
            float(forward(np.float64(base.hi))),
            masses,
            (float(lower[0][0]), float(lower[1][0])),
            (float(upper[0][0]), float(upper[1][0])),
        )
    return LossLaw(tuple(atoms), p_inf, q_ninf, continuous)

"""Canonne, Kamath & Steinke's rejection samplers (CKS20), kept as the reference to compare with.

CKS20 = "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020; arXiv 2004.00010),
Section 5: Algorithm 1 (Bernoulli(exp(−γ)) for rational γ) and Algorithm 2 (discrete Laplace
with rational scale), run over whole arrays: each step draws for every entry still pending and
keeps only the entries that must go round again. dpkit's samplers used these until the
fixed-work digit samplers (:mod:`dpkit.randomness.geometric`) replaced them; this module stays
because its run time *grows with the sampled value* (the loop for V in Algorithm 2 runs about
|Z|/t times), which is the timing channel of Jin et al. 2022 that ``benchmarks/bench_secure.py``
measures, against the fixed-work sampler, and because a second, independent exact algorithm is
a useful cross-check in tests.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._words import U64, WordReader, bernoulli_ratio, uniform_below
from dpkit.randomness.discrete import rejection_fill
from dpkit.randomness.modes import resolve_rng, word_reader

__all__ = ["cks20_discrete_laplace"]


def cks20_discrete_laplace(scale: Fraction, /, size: int, *, rng: Any = None) -> NDArray[np.int64]:
    """``size`` discrete Laplace draws of scale t = ``scale`` by CKS20 Algorithm 2 (int64).

    Numerator and denominator of ``scale`` at most 2⁶². Exact, but its work grows with |Z|.
    """
    generator, _ = resolve_rng(rng, owner="cks20_discrete_laplace")
    return _discrete_laplace(word_reader(generator), scale.denominator, scale.numerator, size)


def _bernoulli_exp_minus_one(words: WordReader, n: int) -> NDArray[np.bool_]:
    """Bernoulli(e⁻¹): CKS20 Algorithm 1 with γ = 1.

    Draw A_K ~ Bernoulli(1/K) for K = 1, 2, ... until the first A_K = 0; return 1 iff that K is
    odd. A₁ = 1 surely, so the loop starts at K = 2. P[stop at K] = (1/(K−1)!)(1 − 1/K), and
    P[K odd] = Σ_k (−1)^k / k! = e⁻¹. About e − 1 ≈ 1.72 words per draw.
    """
    out = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    k = 2
    while active.size:
        more = uniform_below(words, k, active.size) == 0
        out[active[~more]] = k % 2 == 1
        active = active[more]
        k += 1
    return out


def _bernoulli_ratio_over_k(
    words: WordReader, r: NDArray[Any], d: int | NDArray[Any], k: int, n: int
) -> NDArray[np.bool_]:
    """Bernoulli(r/(d·k)) exactly: one draw of uniform_below(d·k) when d·k < 2⁶⁴, else the
    product Bernoulli(r/d) · Bernoulli(1/k) of two independent draws (same probability)."""
    if r.dtype == object or (not isinstance(d, np.ndarray) and int(d) >= U64):
        dk: int | NDArray[Any] = d * k if not isinstance(d, np.ndarray) else d.astype(object) * k
        return bernoulli_ratio(words, np.asarray(r, dtype=object), dk, n)
    largest = int(d.max()) if isinstance(d, np.ndarray) else int(d)
    if largest * k < U64:
        dk = d * np.uint64(k) if isinstance(d, np.ndarray) else int(d) * k
        return bernoulli_ratio(words, r, dk, n)
    both: NDArray[np.bool_] = bernoulli_ratio(words, r, d, n) & (uniform_below(words, k, n) == 0)
    return both


def _bernoulli_exp_fraction(
    words: WordReader, r: NDArray[Any], d: int | NDArray[Any], n: int
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−r/d)) for 0 ≤ r ≤ d: CKS20 Algorithm 1, case γ ∈ [0, 1].

    K ← 1; draw A ~ Bernoulli(γ/K), and while A = 1 set K ← K + 1 and draw again; return 1
    iff the final K is odd. P[K odd] = Σ_k (−γ)^k/k! = e^−γ (CKS20, Section 5).
    All entries still looping share K, so each round is one vectorised draw.
    """
    out = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    k = 1
    while active.size:
        dk = d[active] if isinstance(d, np.ndarray) else d
        more = _bernoulli_ratio_over_k(words, r[active], dk, k, active.size)
        out[active[~more]] = k % 2 == 1
        active = active[more]
        k += 1
    return out


# --------------------------------------------------------------------------------------------
# Algorithm 2: discrete Laplace, scale t/s
# --------------------------------------------------------------------------------------------


def _geometric_exp_minus_one(words: WordReader, n: int) -> NDArray[np.uint64]:
    """n iid V with P[V = v] = e^−v(1 − e⁻¹): the number of Bernoulli(e⁻¹) successes before
    the first failure (the loop for V in CKS20 Algorithm 2).

    Vectorised by parsing one long stream of iid Bernoulli(e⁻¹) trials into its runs "1…10":
    the run lengths of an iid stream are iid with exactly this law. Trials are drawn in pools;
    a run still open at the end of a pool is carried into the next pool (dropping it would
    bias the sample toward short runs).
    """
    out = np.empty(n, dtype=np.uint64)
    have, carry = 0, 0
    while have < n:
        need = n - have
        length = int(need * 1.66) + 64  # ≈ need / (1 − e⁻¹) trials, with a margin
        trials = _bernoulli_exp_minus_one(words, length)
        failures = np.flatnonzero(~trials)
        if failures.size == 0:
            carry += length
            continue
        runs = np.diff(failures, prepend=-1) - 1
        runs[0] += carry
        take = min(need, runs.size)
        out[have : have + take] = runs[:take]
        have += take
        carry = length - 1 - int(failures[-1])
    return out


def _discrete_laplace(words: WordReader, s: int, t: int, n: int) -> NDArray[np.int64]:
    """CKS20 Algorithm 2: P[Z = z] = (e^{s/t} − 1)/(e^{s/t} + 1) · e^{−|z|·s/t}, z ∈ ℤ.

    Repeat until accepted: U ~ Uniform{0..t−1}; D ~ Bernoulli(exp(−U/t)) (reject if 0);
    V ~ Geometric(1 − e⁻¹) (failures of Bernoulli(e⁻¹)); X = U + t·V, which is geometric:
    P[X = x] ∝ e^{−x/t}; Y = ⌊X/s⌋, so P[Y = y] ∝ e^{−y·s/t}; B ~ Bernoulli(1/2);
    reject if B = 1 and Y = 0 (so that 0 is not counted twice); return (1 − 2B)·Y.
    """
    t64, s64 = np.uint64(t), np.uint64(s)
    v_max = (U64 - t) // t  # U + t·V < 2⁶⁴ whenever V ≤ v_max (U < t)

    def propose(m: int) -> NDArray[np.int64]:
        u = uniform_below(words, t, m)
        accept = np.ones(m, dtype=np.bool_)  # D = 1 surely when U = 0
        positive = np.flatnonzero(u)
        if positive.size:
            accept[positive] = _bernoulli_exp_fraction(words, u[positive], t, positive.size)
        u = u[accept]
        v = _geometric_exp_minus_one(words, u.size)
        wide = np.flatnonzero(v > np.uint64(v_max))
        wide_x = [int(u[i]) + t * int(v[i]) for i in wide]  # U + t·V ≥ 2⁶⁴: rare, exact ints
        v[wide] = 0
        y = (u + t64 * v) // s64
        for i, x in zip(wide, wide_x, strict=True):
            y[i] = x // s if x // s < 1 << 63 else 1 << 63
        if u.size and int(y.max()) >= 1 << 63:  # P ≤ e^{−2⁶³·s/t}: negligible for t/s ≤ 2⁵⁶
            msg = "a discrete Laplace sample does not fit in int64: the scale is too large"
            raise OverflowError(msg)
        negative = (words(u.size) >> np.uint64(63)).astype(np.bool_)
        z = y.astype(np.int64)
        np.negative(z, out=z, where=negative)
        accepted: NDArray[np.int64] = z[~(negative & (y == 0))]
        return accepted

    # Acceptance rate, only to size the batches: P[D = 1]·(1 − P[Y = 0]/2).
    p_d = -math.expm1(-1.0) / (t * -math.expm1(-1.0 / t))
    rate = p_d * (1 + math.exp(-s / t)) / 2
    return rejection_fill(propose, n, rate)

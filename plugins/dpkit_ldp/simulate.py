"""Count-level simulation: draw the aggregate support counts without materialising reports.

For experiments (accuracy curves, protocol comparisons) only the estimator's sufficient
statistic matters. :func:`simulate_counts` draws it from its distribution given the true counts
n_v, in time independent of the number of users (10⁹ simulated users cost milliseconds), and
returns the same :class:`dpkit.plugin.FrequencyCounts` the estimator computes from real reports, so the
same ``dpkit.estimate(mechanism, counts)`` consumes both. It runs no per-user randomizer and must
never be used to protect real data.

What is exact, per mechanism:

``rr``
    ones ~ Binomial(n₁, p) + Binomial(n₀, 1 − p): exact.
``krr``
    the channel is the mixture P[y | x] = (1 − kq)·1{y = x} + kq·(1/k) (p = 1 − (k − 1)q), so
    M_x ~ Binomial(n_x, kq) of the users holding x report a uniform value and the others their
    own: C = n − M + Multinomial(Σ_x M_x, uniform) — exact, jointly, in O(k).
``sue``, ``oue``
    every bit of every report is independent given the truth, so C_v ~ Binomial(n_v, p) +
    Binomial(n − n_v, q) independently over v: exact, jointly.
``hr``
    the histogram of reports is Σ_x [Multinomial(M_x, uniform on C_x) + Multinomial(n_x − M_x,
    uniform on the complement)] with M_x ~ Binomial(n_x, p*); the support counts follow by the
    Walsh–Hadamard transform: exact, jointly (O(k·K) binomial draws).
``olh``
    each C_v ~ Binomial(n_v, p*) + Binomial(n − n_v, q*) with the family's exact p*, q*: the
    *marginal* law of every count is exact. The counts are drawn independently across v, which
    is the joint law under a fully random hash function; the implemented pairwise-independent
    family can correlate the counts of different categories, so statistics that combine
    categories (sums, post-processing) are approximate under this simulation.

A third-party mechanism takes part by defining ``simulate_support_counts(true_counts, *, rng)``
returning the support counts.

**Numeric protocols** (:func:`simulate_numeric`): the statistic is drawn from the values
(grouped by distinct value, O(number of distinct values), or given as ``values`` with
``counts``):

``duchi``
    a report is ±B with P[+B] = 1/2 + t/(2B), so the number of +B reports among the n_v users
    holding v is Binomial(n_v, ·), and :class:`dpkit.plugin.MeanSums` follows (Σ T = B·(plus − minus),
    Σ T² = nB²): exact.
``sw``
    the report bucket of a user holding v is categorical with the probabilities of
    :func:`dpkit_ldp.square_wave.bucket_probabilities`, so the histogram is a sum of
    Multinomial(n_v, ·): exact for the continuous (fast-mode) mechanism.
``one_bit_mean``
    :meth:`dpkit_ldp.one_bit_mean.OneBitMean.simulate`: how many devices of each value round
    to each point (the exact law of α-point rounding on the offsets' 2⁻⁵³ grid), then the ones
    among them Binomial(·, π_t); the sums follow from the number of ones: exact.
``pm``, ``hm``, ``duchi_multi``, ``pm_multi``, ``hm_multi``
    not simulated: the sufficient statistic (the sum and the sum of squares of continuous
    reports, or of 2^d-valued vertices) has no finite exact law to draw from; use
    ``randomize`` (fast mode) on the values instead.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    FrequencyCounts,
    InvalidData,
    InvalidParameter,
    MeanSums,
    Mechanism,
    ReportHistogram,
    describe_dtype,
)
from dpkit_ldp.duchi import Duchi, plus_probability
from dpkit_ldp.hadamard import HadamardResponse, support_counts_from_histogram
from dpkit_ldp.kary_rr import KaryRandomizedResponse
from dpkit_ldp.local_hashing import OptimalLocalHashing
from dpkit_ldp.one_bit_mean import OneBitMean
from dpkit_ldp.randomized_response import RandomizedResponse
from dpkit_ldp.square_wave import SquareWave, bucket_probabilities
from dpkit_ldp.unary_encoding import UnaryEncoding

__all__ = ["simulate_counts", "simulate_numeric"]


def _check_true_counts(true_counts: Any, k: int, owner: str) -> NDArray[np.int64]:
    array = np.asarray(true_counts)
    if array.shape != (k,) or not (
        np.issubdtype(array.dtype, np.integer)
        or (np.issubdtype(array.dtype, np.floating) and np.all(array == np.floor(array)))
    ):
        raise InvalidData(
            f"{owner}: true_counts must be {k} non-negative integer counts (one per category), "
            f"got shape {array.shape} and an array of {describe_dtype(array)}",
            field="true_counts",
        )
    counts = array.astype(np.int64)
    if np.any(counts < 0):
        raise InvalidData(f"{owner}: true_counts must be non-negative", field="true_counts")
    return counts


def _independent_supports(
    counts: NDArray[np.int64], p: float, q: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    n = int(counts.sum())
    return rng.binomial(counts, p) + rng.binomial(n - counts, q)


def _kary(
    mech: KaryRandomizedResponse, counts: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.int64]:
    k = mech.size
    # P[y | x] = (1 − kq)·1{y = x} + kq·(1/k): a user reports a uniform value with probability
    # kq = k/(e^ε + k − 1) ≤ 1 and their own value otherwise.
    uniform_share = k * mech.other_probability
    scrambled = rng.binomial(counts, uniform_share)
    uniform = rng.multinomial(int(scrambled.sum()), np.full(k, 1.0 / k))
    return counts - scrambled + uniform


@functools.lru_cache(maxsize=16)
def _hadamard_halves(k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Uniform distributions on C_x and on its complement, one row per x (cached per k)."""
    mech = HadamardResponse(epsilon=1.0, k=k)
    size = mech.output_size
    member = mech.in_support(np.arange(size)[None, :], np.arange(k)[:, None])  # (k, K)
    inside = member / (size // 2)
    outside = ~member / (size // 2)
    inside.setflags(write=False)
    outside.setflags(write=False)
    return inside, outside


def _hadamard(
    mech: HadamardResponse, counts: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.int64]:
    uniform_in, uniform_out = _hadamard_halves(mech.k)
    inside = rng.binomial(counts, mech.inside_probability)
    histogram = rng.multinomial(inside, uniform_in).sum(axis=0)
    histogram += rng.multinomial(counts - inside, uniform_out).sum(axis=0)
    return support_counts_from_histogram(histogram, mech.k)


def simulate_counts(
    mechanism: Mechanism, true_counts: Any, /, *, rng: np.random.Generator
) -> FrequencyCounts:
    """The estimator's :class:`FrequencyCounts` for users with ``true_counts``, drawn directly.

    ``true_counts[v]`` is the number of users holding category v (for ``rr``: [zeros, ones]).
    See the module docstring for what is exact for each mechanism.
    """
    if not isinstance(rng, np.random.Generator):  # experiments: fast, seedable mode only
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator, e.g. numpy.random.default_rng(seed)",
            owner="simulate_counts",
        )
    owner = f"simulate_counts({mechanism.name})"
    if isinstance(mechanism, RandomizedResponse):
        counts = _check_true_counts(true_counts, 2, owner)
        ones = rng.binomial(counts[1], mechanism.keep_probability) + rng.binomial(
            counts[0], mechanism.flip_probability
        )
        n = int(counts.sum())
        return FrequencyCounts(mechanism.name, [n - ones, ones], n)
    size = getattr(mechanism, "size", None)
    if size is None:
        raise InvalidParameter(
            "mechanism",
            mechanism.name,
            "a frequency oracle with a finite domain",
            owner="simulate_counts",
        )
    counts = _check_true_counts(true_counts, int(size), owner)
    if isinstance(mechanism, KaryRandomizedResponse):
        support = _kary(mechanism, counts, rng)
    elif isinstance(mechanism, UnaryEncoding):
        support = _independent_supports(
            counts, mechanism.keep_probability, mechanism.other_probability, rng
        )
    elif isinstance(mechanism, OptimalLocalHashing):
        support = _independent_supports(counts, *mechanism.support_probabilities, rng)
    elif isinstance(mechanism, HadamardResponse):
        support = _hadamard(mechanism, counts, rng)
    elif hasattr(mechanism, "simulate_support_counts"):
        support = np.asarray(mechanism.simulate_support_counts(counts, rng=rng))
    else:
        raise InvalidParameter(
            "mechanism",
            mechanism.name,
            "one with a count-level simulation (rr, krr, sue, oue, olh, hr, or a mechanism "
            "defining simulate_support_counts)",
            owner="simulate_counts",
        )
    return FrequencyCounts(mechanism.name, support, int(counts.sum()))


def _distinct(mechanism: Any, values: Any, counts: Any, owner: str) -> tuple[Any, Any]:
    """(distinct values in the domain, how many users hold each)."""
    x = mechanism.checked_values(values)
    if counts is None:
        distinct, held = np.unique(x.reshape(-1), return_counts=True)
        return distinct, held.astype(np.int64)
    held = _check_true_counts(counts, x.size, owner)
    return x.reshape(-1), held


def simulate_numeric(
    mechanism: Mechanism,
    values: Any,
    /,
    *,
    rng: np.random.Generator,
    counts: Any = None,
) -> MeanSums | ReportHistogram:
    """The estimator's statistic for users holding ``values``, drawn directly (duchi, sw,
    one_bit_mean).

    ``values`` are the users' values (or, with ``counts``, distinct values and how many users
    hold each). Returns :class:`dpkit.plugin.MeanSums` (duchi, one_bit_mean) or :class:`dpkit.plugin.ReportHistogram` (sw),
    which ``dpkit.estimate`` consumes like real reports. See the module docstring for what is
    exact and why the other numeric protocols are not simulated.
    """
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator, e.g. numpy.random.default_rng(seed)",
            owner="simulate_numeric",
        )
    owner = f"simulate_numeric({mechanism.name})"
    if isinstance(mechanism, Duchi):
        distinct, held = _distinct(mechanism, values, counts, owner)
        t = mechanism.standardize(distinct)
        bound = mechanism.bound
        plus = int(rng.binomial(held, plus_probability(t, mechanism.epsilon)).sum())
        n = int(held.sum())
        return MeanSums(mechanism.name, n, [bound * (2 * plus - n)], [n * bound**2])
    if isinstance(mechanism, OneBitMean):
        distinct, held = _distinct(mechanism, values, counts, owner)
        return mechanism.simulate(distinct, held, rng=rng)
    if isinstance(mechanism, SquareWave):
        distinct, held = _distinct(mechanism, values, counts, owner)
        probabilities = bucket_probabilities(
            mechanism.epsilon, mechanism.bins, mechanism.standardize(distinct)
        )
        histogram = rng.multinomial(held, probabilities).sum(axis=0)
        return ReportHistogram(mechanism.name, histogram, int(held.sum()))
    raise InvalidParameter(
        "mechanism",
        mechanism.name,
        "one_bit_mean, duchi or sw (the other numeric protocols have no finite sufficient statistic "
        "to draw from: use randomize in fast mode)",
        owner="simulate_numeric",
    )

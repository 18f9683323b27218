"""Optimal local hashing (``olh``) and its estimator.

Wang, Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency Estimation"
(USENIX Security), Sections 4.4–4.5 (binary and optimal local hashing): each user draws a hash
function H from a universal family mapping {0..k−1} to {0..g−1}, hashes their value x and
reports (H, y) where y is g-ary randomized response applied to H(x):

    P[y = H(x)] = p' = e^ε/(e^ε + g − 1),    P[y = z] = 1/(e^ε + g − 1) for each z ≠ H(x).

The hash is chosen independently of x, so the report is ε-LDP whatever the family. OLH takes
g = round(e^ε) + 1 (the integer closest to the optimum e^ε + 1); ``g`` may be given instead.

**Hash family.** Dietzfelbinger's multiply-add-shift (Dietzfelbinger 1996, "Universal hashing and
k-wise independent random variables via integer arithmetic without primes", STACS;
Thorup 2015, "High Speed Hashing for Integers and Strings", arXiv:1504.06804): with a, b uniform
64-bit words and x < 2³²,

    h_{a,b}(x) = ((a·x + b) mod 2⁶⁴) >> 32

is strongly universal onto 32-bit values: for x ≠ x' the pair (h(x), h(x')) is exactly uniform on
[2³²]² (the tests verify this by enumeration on a reduced word size). It is mapped to [g] by
H(x) = (h(x)·g) >> 32 (Lemire 2019, "Fast Random Integer Generation in an Interval"), which hits
each z with probability π_z = n_z/2³², n_z ∈ {⌊2³²/g⌋, ⌈2³²/g⌉}. The family is pairwise
independent, not more. A report is the row (a, b, y) of a ``uint64`` array: the 128-bit hash
seed is part of the report.

**Support probabilities of this family** (exact, by pairwise independence): a report supports v
when H(v) = y. Then p* = p' and, for v ≠ x, with s = Σ_z π_z²,

    q* = p'·s + (1 − p')(1 − s)/(g − 1),

which is 1/g when the π_z are all 1/g, and differs from 1/g by less than g·2⁻⁶⁴ otherwise. The
estimator uses these exact values. The supports of different users are independent, so the
variance of Wang et al. 2017, Theorem 2 is exact:
Var[ĉ_v] = n q*(1 − q*)/(p* − q*)² + n_v (1 − p* − q*)/(p* − q*).

Aggregation evaluates n·k hashes (every report against every category), vectorised over blocks
of reports, in uint64 arithmetic.

On an accelerator's array of indices, ``randomize`` and the estimator's ``accumulate`` run on the
device with the same hash and report format (:mod:`dpkit.tensors.hashing`; the lie probability
rounded up to the 2⁻³² grid there, to the 2⁻⁶⁴ grid here), so reports of either path are
estimated by the other.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    EPSILON,
    CategoricalDomain,
    Integer,
    InvalidData,
    Mechanism,
    PureDP,
    SecureRandom,
    array_library,
    as_array,
    describe_dtype,
    device_operands,
    hashed_log_probability,
    hashed_reports,
    hashed_support_counts,
    lie_threshold,
    parameter,
    resolve_rng,
)
from dpkit_ldp import _oracle
from dpkit_ldp._arrays import CategoricalInput, as_category_indices
from dpkit_ldp._bits import random_words

__all__ = ["OptimalLocalHashing", "OptimalLocalHashingEstimator", "multiply_add_shift"]

#: Reports per block during aggregation (three 256 kB working arrays).
_BLOCK_USERS = 1 << 15
_MAX_K = 1 << 32
_MAX_G = 1 << 31


def multiply_add_shift(
    a: NDArray[np.uint64],
    b: NDArray[np.uint64],
    x: NDArray[Any],
    g: int,
    *,
    word_bits: int = 64,
) -> NDArray[np.uint64]:
    """H(x) = (((a·x + b) mod 2^w >> w/2) · g) >> w/2, broadcasting; w = ``word_bits``.

    With w = 64 (the mechanism) arithmetic wraps in ``uint64``; smaller w (for exhaustive tests)
    masks to w bits. Requires x < 2^{w/2} and g ≤ 2^{w/2}.
    """
    half = np.uint64(word_bits // 2)
    with np.errstate(over="ignore"):
        h = np.multiply(np.asarray(a, dtype=np.uint64), np.asarray(x).astype(np.uint64))
        h += np.asarray(b, dtype=np.uint64)
    if word_bits < 64:
        h &= np.uint64((1 << word_bits) - 1)
    h >>= half
    h *= np.uint64(g)
    h >>= half
    return h


def collision_sum(g: int, *, half_bits: int = 32) -> float:
    """s = Σ_z π_z² for the map t ↦ (t·g) >> half_bits on t uniform in [2^half_bits]."""
    scale = 1 << half_bits
    # n_z = #{t : ⌊t g / 2^h⌋ = z} = ⌈(z+1) 2^h / g⌉ − ⌈z 2^h / g⌉; two distinct sizes.
    small, large = scale // g, -(-scale // g)
    n_large = scale - small * g  # how many z get ⌈2^h/g⌉ values
    n_small = g - n_large
    return (n_small * small**2 + n_large * large**2) / float(scale) ** 2


@attrs.frozen
class OptimalLocalHashing(CategoricalInput, Mechanism):
    """Optimal local hashing: hash to g = round(e^ε) + 1 values, then g-ary randomized response.

    Wang et al. 2017, Section 4.5; see the module docstring for the hash family, the exact p* and
    q*, and the variance. Var*[f̂_v] = (e^ε − 1 + g)² / (n (e^ε − 1)² (g − 1)) (Section 4.4,
    general local hashing), 4e^ε/(n (e^ε − 1)²) at the real-valued optimum g = e^ε + 1.
    """

    name: ClassVar[str] = "olh"
    kind: ClassVar[Literal["local", "central"]] = "local"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.05, 6.0))
    k: int = parameter(Integer(low=2, high=_MAX_K), doc="number of categories", typical=(2, 1024))
    g: int | None = parameter(
        Integer(low=2, high=_MAX_G),
        doc="hash range (default round(e^ε) + 1)",
        default=None,
        optional=True,
    )

    def __attrs_post_init__(self) -> None:
        if self.g is None:
            object.__setattr__(self, "g", self.optimal_range(self.epsilon))
        # A tiny ε with a huge g has no lie probability on the 2⁻⁶⁴ grid within [λ, (g − 1)/g]
        # (dpkit.plugin.lie_threshold): refused here, from the parameters alone.
        lie_threshold(self.epsilon, self.range)

    @staticmethod
    def optimal_range(epsilon: float) -> int:
        """g = round(e^ε) + 1, at least 2 (Wang et al. 2017, Section 4.5)."""
        return int(min(_MAX_G, max(2, round(math.exp(min(epsilon, 21.0))) + 1)))

    @property
    def range(self) -> int:
        assert self.g is not None  # set in __attrs_post_init__
        return self.g

    @property
    def size(self) -> int:
        return self.k

    @property
    def keep_probability(self) -> float:
        """p' = e^ε/(e^ε + g − 1) = 1/(1 + (g − 1) e^−ε)."""
        return 1.0 / (1.0 + (self.range - 1) * math.exp(-self.epsilon))

    @property
    def lie_probability(self) -> float:
        """(g − 1)/(e^ε + g − 1): the probability of reporting a hash value other than H(x)."""
        t = (self.range - 1) * math.exp(-self.epsilon)
        return t / (1.0 + t)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """(p*, q*) of the implemented hash family (exact; see the module docstring)."""
        p = self.keep_probability
        g = self.range
        s = collision_sum(g)
        return p, p * s + (1.0 - p) * (1.0 - s) / (g - 1)

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        """Var*[f̂_v] = (e^ε − 1 + g)²/(n (e^ε − 1)² (g − 1)) with g = round(e^ε) + 1.

        Wang et al. 2017, Section 4.4 (local hashing with range g, the f_v term dropped).
        """
        k, epsilon, n = _oracle.check_variance_arguments(k, epsilon, n, owner=cls.name)
        g = cls.optimal_range(epsilon)
        e1 = math.expm1(epsilon)
        return (e1 + g) ** 2 / (n * e1**2 * (g - 1))

    def hash(self, seeds: Any, values: Any, /) -> NDArray[np.uint64]:
        """H_{a,b}(x) for seeds[..., 0] = a, seeds[..., 1] = b (broadcasting against values)."""
        s = np.asarray(seeds, dtype=np.uint64)
        return multiply_add_shift(s[..., 0], s[..., 1], values, self.range)

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """Reports (a, b, y) as a ``uint64`` array of shape ``values.shape + (3,)``.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array of indices is hashed and perturbed there
        (:mod:`dpkit.tensors.hashing`).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return hashed_reports(
                library,
                values,
                k=self.k,
                g=self.range,
                lie_threshold64=lie_threshold(self.epsilon, self.range),
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        indices = as_category_indices(values, self.k, owner=self.name)
        g = self.range
        n = indices.size
        a, b = random_words(generator, n), random_words(generator, n)
        y = multiply_add_shift(a, b, indices.reshape(-1), g)
        # g-ary randomized response on H(x): lie with probability (g − 1)/(e^ε + g − 1); the lie is
        # uniform over the other g − 1. Secure mode uses an integer threshold rounded up from the
        # exact lie probability, so the realised ε never exceeds ε.
        if isinstance(generator, SecureRandom):
            lie = generator.bernoulli_threshold(lie_threshold(self.epsilon, g), n)
        else:
            lie = generator.random(n) < self.lie_probability
        other = generator.integers(0, g - 1, size=n, dtype=np.uint32).astype(np.uint64)
        other += other >= y
        np.copyto(y, other, where=lie)
        reports = np.empty((n, 3), dtype=np.uint64)
        reports[:, 0], reports[:, 1], reports[:, 2] = a, b, y
        return reports.reshape((*indices.shape, 3))

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[(a, b, y) | x] = −128 ln 2 + log P[y | H_{a,b}(x)] (seed uniform on 2¹²⁸).

        An accelerator's array (either operand) is scored on its device, float64, in its type:
        the same numbers chosen by the same hash (:func:`dpkit.plugin.hashed_log_probability`;
        a numpy or list operand beside it is copied there); there the reports must be integers
        or booleans.
        """
        log_norm = math.log1p((self.range - 1) * math.exp(-self.epsilon))
        seeds = 128.0 * math.log(2.0)
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return hashed_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                k=self.k,
                g=self.range,
                log_terms=(-log_norm, -self.epsilon - log_norm, seeds),
                owner=self.name,
            )
        reports = np.asarray(outputs, dtype=np.uint64)
        x = as_category_indices(inputs, self.k, owner=self.name, field="inputs")
        same = self.hash(reports[..., :2], x) == reports[..., 2]
        return np.where(same, -log_norm, -self.epsilon - log_norm) - seeds


class OptimalLocalHashingEstimator(_oracle.PureProtocolEstimator):
    """Support counts C_v = #{reports (a, b, y) with H_{a,b}(v) = y}, evaluated in blocks.

    Debiasing and variance: :class:`dpkit_ldp._oracle.PureProtocolEstimator` with the family's
    exact (p*, q*). An accelerator's reports are counted there
    (:func:`dpkit.plugin.hashed_support_counts`).
    """

    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: OptimalLocalHashing

    def check_reports(self, reports: Any, /) -> NDArray[np.uint64]:
        owner = f"{self.mechanism.name} estimator"
        array = as_array(reports, owner=owner, field="reports")
        if array.ndim == 0 or array.shape[-1] != 3:
            raise InvalidData(
                f"{owner}: reports must have shape (..., 3): the hash seeds a, b and the "
                f"perturbed hash y of each user; got shape {array.shape}"
                + (" (are the hash seeds missing?)" if array.ndim == 1 else ""),
                field="reports",
            )
        if not np.issubdtype(array.dtype, np.integer):
            raise InvalidData(
                f"{owner}: reports must be integers (uint64 seeds and hash values), got an "
                f"array of {describe_dtype(array)}",
                field="reports",
            )
        rows = array.reshape(-1, 3).astype(np.uint64, copy=False)  # int64 storage keeps the bits
        bad = rows[:, 2] >= np.uint64(self.mechanism.range)
        if bad.any():
            first = int(rows[int(np.flatnonzero(bad)[0]), 2])
            raise InvalidData(
                f"{owner}: reports contain the hash value {first}, outside 0..{self.mechanism.range - 1} "
                f"(g={self.mechanism.range}); were they produced with another epsilon or g?",
                field="reports",
            )
        return rows

    def support_counts(self, reports: Any, /) -> tuple[NDArray[np.int64], int]:
        """C_v for every v, as one range test per (report, category).

        H(v) = y ⟺ ⌊h·g/2³²⌋ = y ⟺ c_y ≤ h < c_{y+1} with c_y = ⌈y·2³²/g⌉, and h = z >> 32 for
        z = (a·v + b) mod 2⁶⁴, so H(v) = y ⟺ (z − c_y·2³²) mod 2⁶⁴ < (c_{y+1} − c_y)·2³²: a
        compare per cell, with z advanced from v to v + 1 by adding a (no multiplication), over
        blocks of reports that stay in cache.
        """
        k, g = self.mechanism.k, self.mechanism.range
        library = array_library(reports, owner=self.mechanism.name, field="reports")
        if library is not None:  # counted on the accelerator
            owner = f"{self.mechanism.name} estimator"
            return hashed_support_counts(library, reports, k=k, g=g, owner=owner)
        rows = self.check_reports(reports)
        edges = [-(-(z << 32) // g) for z in range(g + 1)]  # c_y = ⌈y·2³²/g⌉, exact ints
        low = np.array([e << 32 for e in edges[:-1]], dtype=np.uint64)
        width = np.array([(e1 - e0) << 32 for e0, e1 in itertools.pairwise(edges)], dtype=np.uint64)
        y = rows[:, 2].astype(np.intp)
        shifted = rows[:, 1] - low[y]  # b − c_y·2³² (mod 2⁶⁴)
        bound = width[y]
        counts = np.zeros(k, dtype=np.int64)
        for start in range(0, rows.shape[0], _BLOCK_USERS):
            a = rows[start : start + _BLOCK_USERS, 0]
            z = shifted[start : start + _BLOCK_USERS].copy()  # a·v + b − c_y·2³² at v = 0
            w = bound[start : start + _BLOCK_USERS]
            hit = np.empty(z.size, dtype=bool)
            for v in range(k):  # a loop over categories; each step is vectorised over users
                np.less(z, w, out=hit)
                counts[v] += np.count_nonzero(hit)
                z += a  # a·(v + 1) + b − c_y·2³², wrapping mod 2⁶⁴
        return counts, rows.shape[0]

"""Duchi, Jordan & Wainwright's mean mechanisms: one value (``duchi``) or a vector (``duchi_multi``).

Duchi, Jordan & Wainwright 2018, "Minimax Optimal Procedures for Locally Private Estimation"
(JASA 113(521), arXiv:1604.02390), Section 4.2: for t ∈ [−1, 1] (the value in standard units,
see :mod:`dpkit_ldp._numeric`) the one-dimensional mechanism reports

    +B with probability 1/2 + t/(2B),   −B otherwise,      B = (e^ε + 1)/(e^ε − 1) = 1/tanh(ε/2),

so E[Y] = t and Var[Y | t] = B² − t² ≤ B² (restated by Wang et al. 2019, "Collecting and
Analyzing Multidimensional Data with Local Differential Privacy", ICDE, arXiv:1907.00782,
Section III-A, Algorithm 1). P[+B | t] ranges over [1/(e^ε + 1), e^ε/(e^ε + 1)], so the
likelihood ratio is at most e^ε.

**Vectors** (``duchi_multi``, DJW 2018 Section 4.2.3, the ℓ∞ ball; restated by Wang et al.
2019, Section IV, Algorithm 3). For t ∈ [−1, 1]^d:

1. draw v ∈ {−1, 1}^d with independent coordinates, P[v_j = 1] = (1 + t_j)/2 (so E[v] = t);
2. draw a coin, heads with probability π_d;
3. on heads report z uniform on T⁺(v) = {z ∈ {−B_d, B_d}^d : ⟨z, v⟩ > 0}, on tails uniform on
   T⁻(v) = {z : ⟨z, v⟩ ≤ 0}.

With b = C(d, d/2) vertices orthogonal to v for even d (b = 0 for odd d) and A = (2^d − b)/2 on
each strict side, |T⁺| = A and |T⁻| = A + b. The coin is fitted to these sizes (derived here):
π_d = A e^ε/(A e^ε + A + b), so that P[z | v] is h = π_d/A on T⁺ and l = (1 − π_d)/(A + b) on
T⁻ with h/l = e^ε exactly: the ratio between any two inputs is at most e^ε (P[z | x] is a
mixture over v of these two values). For odd d this is DJW's π = e^ε/(e^ε + 1). By symmetry
E[z | v] = c·v, and per unit of B_d, c = (h − l)·C(d − 1, ⌊(d − 1)/2⌋): among the vertices
of T⁺, those with z_1 = v_1 outnumber those with z_1 ≠ v_1 by the number of ways the other d − 1
coordinates can sum to 0 (odd d) or 1 (even d), and the orthogonal vertices contribute 0.
Unbiasedness (c·B_d = 1) gives

    B_d = (A(e^ε + 1) + b) / ((e^ε − 1)·C(d − 1, ⌊(d − 1)/2⌋)),

which for odd d is (e^ε + 1)/(e^ε − 1)·2^{d−1}/C(d − 1, (d − 1)/2) (DJW's and Wang et al.'s
constant). Giving the orthogonal vertices the low level l (rather than anything higher) is what
maximises h − l under h/l ≤ e^ε, hence the smallest B_d. Even d is where restatements and
implementations go wrong, and the tests enumerate every (x, v, z) in exact rationals for
d ≤ 6 to show it: with π = e^ε/(e^ε + 1) and the split above the ratio is
e^ε(A + b)/A > e^ε; letting both sets contain the orthogonal vertices (⟨z, v⟩ ≥ 0 and ≤ 0)
gives them probability 1/N against the (1 − π)/N of the far side, a ratio 1 + e^ε; and sampling
{⟨z, v⟩ ≥ 0} by negating a uniform vertex when ⟨z, v⟩ < 0 gives the orthogonal vertices half
the weight of the others, which biases the mean with that B_d.

Sampling here, with z = v ⊙ w: on heads, w uniform on {Σ w > 0} — a uniform sign vector,
negated when Σ w < 0 (a bijection of the two strict sides), redrawn when Σ w = 0; on tails,
w = −w′ with w′ uniform on {Σ w′ ≥ 0} — a uniform sign vector negated when Σ < 0, then (even d
only) kept with probability 1/2 when Σ > 0 and redrawn otherwise, so that every w′ with Σ > 0
(probability 2·2^{−d}·1/2) and with Σ = 0 (2^{−d}) is equally likely. Var[z_j | t] = B_d² − t_j².

Randomness: fast mode (a numpy ``Generator``) compares uniforms on the 2⁻⁵³ grid with float
probabilities. Secure mode (``rng=None`` or a :class:`dpkit.SecureRandom`) draws v_j (and the
one-dimensional report's rounding of t) as ``u < (1 + t)/2`` with u uniform on the 2⁻⁵³ grid,
the one-dimensional lie as a 64-bit word against :func:`dpkit.plugin.lie_threshold` (ε, 2), the
vector's heads as a 64-bit word against ⌊π_d·2⁶⁴⌋ (π_d in 60-digit arithmetic, rounded
*down*: then h/l ≤ e^ε still), and the signs from uniform words. Whatever the rounding of v's
probabilities, the ratio stays ≤ h/l, because P[z | x] is a mixture over v. The reports are
fixed values (±B or ±B_d on the data's scale), so no low bit depends on the input.

On an accelerator's array, ``duchi``'s ``randomize`` runs on the device with the same law in
either mode, the secure rounding and lie decided exactly as here (:mod:`dpkit.tensors.duchi`:
the same words give the same reports), and float64 reports as here; ``duchi_multi``'s too,
with the same law (:mod:`dpkit.tensors.duchi_multi`). Both score ``log_probability`` there:
the probability by this module's float64 operations in its order, its logarithm by the
device's, within two ulps of the host's value (:mod:`dpkit.tensors.log_probability`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache
from itertools import product
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    SecureRandom,
    device_operands,
    duchi_multi_reports,
    duchi_reports,
    lie_threshold,
)
from dpkit_ldp._bits import random_words
from dpkit_ldp._lattice import band_threshold
from dpkit_ldp._numeric import (
    NumericMechanism,
    VectorMechanism,
    check_scalar,
    check_vector,
    float64_constants,
)

__all__ = [
    "Duchi",
    "DuchiMulti",
    "duchi_bound",
    "duchi_multi_bound",
    "duchi_sample",
    "heads_probability",
    "plus_probability",
    "vertex_sides",
]


def duchi_bound(epsilon: float) -> float:
    """B = (e^ε + 1)/(e^ε − 1) = 1/tanh(ε/2): the one-dimensional report's magnitude."""
    return 1.0 / math.tanh(epsilon / 2.0)


@cache
def vertex_sides(d: int) -> tuple[int, int]:
    """(A, b): A vertices on each strict side of v's hyperplane, b = C(d, d/2) on it (even d)."""
    b = math.comb(d, d // 2) if d % 2 == 0 else 0
    return ((1 << d) - b) // 2, b


def heads_probability(epsilon: float, d: int) -> float:
    """π_d = A e^ε/(A e^ε + A + b) = 1/(1 + (1 + b/A) e^{−ε})."""
    sides, on_plane = vertex_sides(d)
    return 1.0 / (1.0 + float(1 + Fraction(on_plane, sides)) * math.exp(-epsilon))


@cache
def _heads_threshold(epsilon: float, d: int) -> int:
    """⌊π_d·2⁶⁴⌋: secure heads as ``word < T`` (rounded down, so h/l ≤ e^ε)."""
    sides, on_plane = vertex_sides(d)
    return band_threshold(epsilon, 2 * sides + on_plane, sides)


@cache
def _vertex_probabilities(epsilon: float, d: int) -> tuple[float, float]:
    """(h, l) = (T/(2⁶⁴A), (2⁶⁴ − T)/(2⁶⁴(A + b))), T = :func:`_heads_threshold`, each rounded
    once to a double: the probability of one vertex on heads' side and of one on tails', as the
    secure sampler draws them. l ≥ 2⁻⁶⁴/(A + b) > 0 at every ε (T < 2⁶⁴), where 1 − π_d in
    floating point is 0 once π_d rounds to 1 (ε ≳ 37)."""
    sides, on_plane = vertex_sides(d)
    threshold = _heads_threshold(epsilon, d)
    return (
        float(Fraction(threshold, sides << 64)),
        float(Fraction((1 << 64) - threshold, (sides + on_plane) << 64)),
    )


def duchi_multi_bound(epsilon: float, d: int) -> float:
    """B_d = (A(e^ε + 1) + b)/((e^ε − 1)·C(d − 1, ⌊(d − 1)/2⌋)), as
    (A/m)·coth(ε/2) + (b/m)/(e^ε − 1) with m the binomial (exact ratios, no overflow)."""
    sides, on_plane = vertex_sides(d)
    m = math.comb(d - 1, (d - 1) // 2)
    return float(Fraction(sides, m)) / math.tanh(epsilon / 2.0) + float(
        Fraction(on_plane, m)
    ) / math.expm1(epsilon)


def _tails(generator: Any, epsilon: float, n: int) -> NDArray[np.bool_]:
    """n coins with P[true] = 1/(e^ε + 1) (rounded up to the 2⁻⁶⁴ grid in secure mode)."""
    if isinstance(generator, SecureRandom):
        tails: NDArray[np.bool_] = generator.bernoulli_threshold(lie_threshold(epsilon, 2), n)
        return tails
    lie = math.exp(-epsilon) / (1.0 + math.exp(-epsilon))
    tails = generator.random(n) < lie
    return tails


def duchi_sample(t: NDArray[np.float64], epsilon: float, generator: Any) -> NDArray[np.float64]:
    """±B with P[+B] = 1/2 + t/(2B), elementwise, for t in [−1, 1] (standard units).

    Fast mode: one uniform against the float probability. Secure mode: stochastic rounding of t
    to ±1 (u < (1 + t)/2), then binary randomized response with the exact lie threshold.
    """
    flat = np.asarray(t, dtype=np.float64).reshape(-1)
    bound = duchi_bound(epsilon)
    if isinstance(generator, SecureRandom):
        up = generator.random(flat.size) < (1.0 + flat) / 2.0
        plus = up != _tails(generator, epsilon, flat.size)
    else:
        plus = generator.random(flat.size) < plus_probability(flat, epsilon)
    reports: NDArray[np.float64] = np.where(plus, bound, -bound).reshape(np.shape(t))
    return reports


def plus_probability(t: Any, epsilon: float) -> NDArray[np.float64]:
    """P[+B | t] = 1/2 + t/(2B), as ((1 + t) + (1 − t)e^{−ε})/(2(1 + e^{−ε})): no cancellation
    (the form 1/2 + t/(2B) loses the relative precision of the small probabilities at large ε)."""
    t_arr = np.asarray(t, dtype=np.float64)
    return np.asarray(_plus_probability(t_arr, math.exp(-epsilon)))


def _plus_probability(t: Any, tail: float) -> Any:
    """:func:`plus_probability` of a float64 array of any array namespace, ``tail`` = e^{−ε}:
    the same IEEE 754 operations in the same order on the host and on a device."""
    return ((1.0 + t) + (1.0 - t) * tail) / (2.0 * (1.0 + tail))


def _signs(generator: Any, n: int, d: int) -> NDArray[np.int8]:
    """An (n, d) array of independent uniform ±1: bit j of word ⌊j/64⌋ of each row's words."""
    columns = np.arange(d)
    words = random_words(generator, n * (d // 64 + 1)).reshape(n, d // 64 + 1)
    bits = (words[:, columns // 64] >> (columns % 64).astype(np.uint64)) & np.uint64(1)
    signs: NDArray[np.int8] = 2 * bits.astype(np.int8) - 1
    return signs


def _side_signs(generator: Any, n: int, d: int, *, strict: bool) -> NDArray[np.int8]:
    """n sign vectors w, uniform on {Σ w > 0} (``strict``) or on {Σ w ≥ 0} (see the module
    docstring): a uniform vector, negated when Σ w < 0, then redrawn as needed."""
    out = np.empty((n, d), dtype=np.int8)
    pending = np.arange(n)
    while pending.size:
        w = _signs(generator, pending.size, d)
        total = w.sum(axis=1, dtype=np.int64)
        w[total < 0] *= -1
        if strict:
            keep = total != 0
        elif d % 2 == 0:
            coin = (random_words(generator, pending.size) >> np.uint64(63)).astype(bool)
            keep = (total == 0) | coin
        else:
            keep = np.ones(pending.size, dtype=bool)
        out[pending[keep]] = w[keep]
        pending = pending[~keep]
    return out


@attrs.frozen
class Duchi(NumericMechanism):
    """Duchi et al.'s one-bit mean mechanism: report ±B on the data's scale.

    On the data's scale the reports are ``centre ± scale·B``; E[report] = the value. Its
    variance per report is scale²·(B² − t²) ≤ scale²·B² (module docstring). Equivalent to
    stochastic rounding to {lower, upper} followed by binary randomized response
    (:func:`dpkit_ldp.estimate_mean`), with the reports already debiased.
    """

    name: ClassVar[str] = "duchi"
    statistic: ClassVar[str] = "mean"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def bound(self) -> float:
        """B in standard units."""
        return duchi_bound(self.epsilon)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        minus, plus = (float(report) for report in self.output_space())
        return duchi_reports(
            library,
            values,
            units=self.units,
            reports=(minus, plus),
            epsilon=self.epsilon,
            lie_threshold64=lie_threshold(self.epsilon, 2),
            rng=rng,
            owner=self.name,
        )

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        return duchi_sample(t, self.epsilon, generator)

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(self.bound**2 - np.square(t), dtype=np.float64)

    def output_space(self) -> NDArray[np.float64]:
        return self.to_data(np.array([-self.bound, self.bound]))

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[y | x]: log(1/2 ± t/(2B)) at the two report values, −inf elsewhere.

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there): the probability with the host's operations in the host's order, so the same
        double, and its logarithm by the device's ``log`` — within two ulps of the host's
        value, −inf, NaN and 0 where the host's are (the bound:
        :mod:`dpkit.tensors.log_probability`).
        """
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            y, x = operands.reals(owner=self.name)
            with np.errstate(divide="ignore"):  # a numpy-backed namespace's warning for log 0
                return self._log_probability(operands.library.xp, operands.library.device, y, x)
        y = np.asarray(outputs, dtype=np.float64)
        x = np.asarray(inputs, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.asarray(self._log_probability(np, None, y, x), dtype=np.float64)

    def _log_probability(self, xp: Any, device: Any, y: Any, x: Any) -> Any:
        """log P[y | x] of float64 arrays of the namespace ``xp`` on ``device`` (numpy's on the
        host): y on the data's scale, x the inputs."""
        low, high = (float(report) for report in self.output_space())
        _, t = self.standard_operands(xp, y, x)
        tail = math.exp(-self.epsilon)
        log_plus = xp.log(_plus_probability(t, tail))
        log_minus = xp.log(_plus_probability(-t, tail))
        (none,) = float64_constants(xp, device, -math.inf)
        return xp.where(y == high, log_plus, xp.where(y == low, log_minus, none))

    def report_bound(self) -> NDArray[np.float64]:
        """The largest report magnitude in standard units: B."""
        return np.array([self.bound])

    def worst_case_variance(self) -> NDArray[np.float64]:
        """max over t of Var[Y | t] in standard units: B² (at t = 0)."""
        return np.array([self.bound**2])

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        """Worst-case variance of the mean of n reports on [−1, 1]: B²/n (DJW 2018; Wang et al.
        2019, Section III-A)."""
        check_scalar(cls.name, dimension)
        return duchi_bound(epsilon) ** 2 / n


def _agreement_law(xp: Any, p: Any) -> Any:
    """P[A = a], a = 0..d, for A a sum of independent Bernoulli(p_j) (last axis of a float64
    array of the namespace ``xp``), by dynamic programming (the Poisson-binomial law): after
    coordinate j, P[A = a] ← P[A = a]·(1 − p_j) + P[A = a − 1]·p_j, every a at once."""
    join = xp.concat if hasattr(xp, "concat") else xp.concatenate  # numpy < 2: concatenate
    law = join([xp.ones_like(p[..., :1]), xp.zeros_like(p)], axis=-1)
    for j in range(p.shape[-1]):
        pj = p[..., j : j + 1]
        keep = 1.0 - pj
        law = join([law[..., :1] * keep, law[..., 1:] * keep + law[..., :-1] * pj], axis=-1)
    return law


@attrs.frozen
class DuchiMulti(VectorMechanism):
    """Duchi et al.'s mechanism for a vector of d values: a vertex of {−B_d, B_d}^d.

    See the module docstring for T⁺/T⁻ and B_d. Reports have shape (n, d) on the data's scale;
    each coordinate is unbiased with Var = scale²·(B_d² − t_j²). The whole vector costs ε.
    """

    name: ClassVar[str] = "duchi_multi"
    statistic: ClassVar[str] = "multivariate_mean"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def bound(self) -> float:
        """B_d in standard units."""
        return duchi_multi_bound(self.epsilon, self.dimension)

    @property
    def heads_probability(self) -> float:
        """π_d: the probability of reporting from T⁺(v) = {⟨z, v⟩ > 0}."""
        return heads_probability(self.epsilon, self.dimension)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        minus, plus = (float(r) for r in self.to_data(np.array([-self.bound, self.bound])))
        return duchi_multi_reports(
            library,
            values,
            dimension=self.dimension,
            units=self.units,
            reports=(minus, plus),
            heads_probability=self.heads_probability,
            heads_threshold64=_heads_threshold(self.epsilon, self.dimension),
            rng=rng,
            owner=self.name,
        )

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        n, d = t.shape
        v = np.where(generator.random((n, d)) < (1.0 + t) / 2.0, 1, -1).astype(np.int8)
        if isinstance(generator, SecureRandom):
            heads = generator.bernoulli_threshold(_heads_threshold(self.epsilon, d), n)
        else:
            heads = generator.random(n) < self.heads_probability
        w = np.empty((n, d), dtype=np.int8)
        w[heads] = _side_signs(generator, int(heads.sum()), d, strict=True)
        w[~heads] = -_side_signs(generator, int(n - heads.sum()), d, strict=False)
        vertices: NDArray[np.float64] = (v * w).astype(np.float64) * self.bound
        return vertices

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(self.bound**2 - np.square(t), dtype=np.float64)

    def output_space(self) -> NDArray[np.float64]:
        if self.dimension > 16:
            raise NotImplementedError(f"{self.name}: 2^{self.dimension} outputs are too many")
        vertices = np.array(list(product((-1.0, 1.0), repeat=self.dimension)))
        return self.to_data(vertices * self.bound)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[z | x] = log Σ_a P[A = a]·g(2a − d) (outputs and inputs broadcasting to
        (..., d); ``ValueError`` for another last axis).

        A, the number of coordinates where v agrees with the signs of z, is a sum of independent
        Bernoulli((1 + s_j t_j)/2) (its law by dynamic programming); g is h = π′/A where
        ⟨z, v⟩ = 2A − d > 0 and l = (1 − π′)/(A + b) elsewhere (module docstring), with π′ =
        T/2⁶⁴ the secure sampler's heads probability (π_d rounded down to the 2⁻⁶⁴ grid, so
        h/l ≤ e^ε, and l > 0 at every ε), the sum taken in the order a = 0, 1, …, d. Outputs
        that are not a vertex have probability 0.

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there): the sum with the host's operations in the host's order, so the same double, and
        its logarithm by the device's ``log`` — within two ulps of the host's value, −inf and
        NaN where the host's are (the bound: :mod:`dpkit.tensors.log_probability`).
        """
        return self._scored(outputs, inputs)

    def _log_probability(self, xp: Any, device: Any, y: Any, x: Any) -> Any:
        """log P[z | x] of float64 arrays of the namespace ``xp`` on ``device`` (numpy's on the
        host), broadcasting to (..., d): z = y in standard units, x the inputs."""
        z, t = self.standard_operands(xp, y, x)
        shape = tuple(np.broadcast_shapes(tuple(z.shape), tuple(t.shape)))
        z, t = xp.broadcast_to(z, shape), xp.broadcast_to(t, shape)
        d, bound = self.dimension, self.bound
        # numpy's isclose(|z|, B, rtol=1e-12, atol=0): |(|z| − B)| ≤ 0 + 1e-12·|B|
        vertex = xp.all(xp.abs(xp.abs(z) - bound) <= 0.0 + 1e-12 * abs(bound), axis=-1)
        law = _agreement_law(xp, (1.0 + xp.sign(z) * t) / 2.0)
        high, low = _vertex_probabilities(self.epsilon, d)
        total = law[..., 0] * low  # a = 0: ⟨z, v⟩ = −d
        for a in range(1, d + 1):
            total = total + law[..., a] * (high if 2 * a - d > 0 else low)
        (none,) = float64_constants(xp, device, -math.inf)
        return xp.where(vertex, xp.log(total), none)

    def report_bound(self) -> NDArray[np.float64]:
        """The largest report magnitude per coordinate in standard units: B_d."""
        return np.full(self.dimension, self.bound)

    def worst_case_variance(self) -> NDArray[np.float64]:
        """B_d² per coordinate (at t_j = 0), in standard units."""
        return np.full(self.dimension, self.bound**2)

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        """Worst-case variance of one coordinate's mean of n reports on [−1, 1]: B_d²/n. For
        one value (d = 1) it is ``duchi``."""
        check_vector(cls.name, dimension)
        return duchi_multi_bound(epsilon, dimension) ** 2 / n

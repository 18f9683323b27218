"""Hadamard response (``hr``) and its estimator.

Acharya, Sun & Zhang 2019, "Hadamard Response: Estimating Distributions Privately, Efficiently,
and with Little Communication" (AISTATS; arXiv:1802.04705): the Hadamard response for the
high-privacy regime (one block: each category owns a set of half the outputs, the +1 entries of a
row of a Sylvester–Hadamard matrix), analysed here as a "pure protocol" in the sense of Wang et
al. 2017, Section 3, as Cormode, Maddock & Maple 2021, "Frequency Estimation under Local
Differential Privacy" (PVLDB 14(11)) do. The p*, q* and variance below are derived in this
docstring from the definition (and checked by enumeration in the tests).

Let K be the smallest power of two larger than k, and H the K × K Sylvester–Hadamard matrix,
H[i, j] = (−1)^{popcount(i & j)}. Category x is assigned the row r = x + 1 (row 0, all ones, is
skipped) and the set C_x = {y ∈ [K] : H[x + 1, y] = +1}, of size K/2. A user holding x reports
one index y ∈ [K]:

    P[y | x] = 2e^ε / (K (e^ε + 1))   if y ∈ C_x,        2 / (K (e^ε + 1))   otherwise,

so the likelihood ratio is at most e^ε. The report supports v when y ∈ C_v. Two distinct
non-zero rows agree on exactly K/4 positions of each sign, so

    p* = P[y ∈ C_x] = e^ε/(e^ε + 1),      q* = P[y ∈ C_v | x ≠ v] = 1/2,

and the estimator of Wang et al. 2017, Theorem 2 applies with the exact variance
Var[ĉ_v] = n (e^ε + 1)²/(e^ε − 1)² − n_v (the f_v coefficient (1 − p* − q*)/(p* − q*) is −1).
Var*[f̂_v] = (e^ε + 1)²/(n (e^ε − 1)²), that of binary local hashing.

Sampling: inside or outside C_x with probabilities p*, 1 − p* (in secure mode the "outside"
probability is an integer threshold rounded up from its exact value, so the realised ε never
exceeds ε), then y uniform on that half: a uniform
y ∈ [K] whose parity popcount((x+1) & y) mod 2 is wrong is moved across by flipping the lowest
set bit of x + 1, a bijection between the halves. Aggregation: C_v = (n + (H·h)[v + 1])/2 where
h is the histogram of the reports, by a fast Walsh–Hadamard transform in O(n + K log K).

On an accelerator's array of indices, ``randomize`` runs on the device with the same law
(:mod:`dpkit.tensors.hadamard`; the outside probability rounded up to the 2⁻³² grid there, to
the 2⁻⁶⁴ grid here), and the estimator's ``accumulate`` takes the histogram there (only the K
counts come back; the transform runs on the host).
"""

from __future__ import annotations

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
    category_counts,
    device_operands,
    hadamard_log_probability,
    hadamard_reports,
    lie_threshold,
    parameter,
    resolve_rng,
)
from dpkit_ldp import _oracle
from dpkit_ldp._arrays import CategoricalInput, as_category_indices

__all__ = ["HadamardResponse", "HadamardResponseEstimator", "parity", "walsh_hadamard"]


def parity(values: NDArray[Any]) -> NDArray[np.uint64]:
    """popcount(v) mod 2 of non-negative integers below 2⁶⁴, elementwise.

    ``np.bitwise_count`` (numpy ≥ 2.0: one hardware popcount per element) when numpy has it,
    else XOR folding: v ^= v >> s for s = 32, 16, …, 1 leaves the parity of all 64 bits in the
    lowest one.
    """
    v = np.asarray(values).astype(np.uint64)
    if _BITWISE_COUNT is not None:
        bit: NDArray[np.uint64] = _odd(v).astype(np.uint64)
        return bit
    return _parity_fold(v)


def _odd(v: NDArray[np.uint64]) -> NDArray[np.bool_]:
    """popcount(v) is odd, as a bool array (no uint64 temporaries on numpy ≥ 2.0)."""
    if _BITWISE_COUNT is None:
        return _parity_fold(v).astype(np.bool_)
    counts = _BITWISE_COUNT(v)
    counts &= np.uint8(1)
    odd: NDArray[np.bool_] = counts.view(np.bool_)
    return odd


def _parity_fold(v: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The XOR-folding parity (the fallback for numpy < 2.0; also checked against popcount)."""
    v = v.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        v ^= v >> np.uint64(shift)
    bit: NDArray[np.uint64] = v & np.uint64(1)
    return bit


_BITWISE_COUNT = getattr(np, "bitwise_count", None)


def walsh_hadamard(vector: NDArray[Any]) -> NDArray[np.int64]:
    """H·v for the Sylvester–Hadamard matrix of size len(v) (a power of two), exactly, in int64."""
    x = np.array(vector, dtype=np.int64)
    size = x.size
    h = 1
    while h < size:
        x = x.reshape(-1, 2, h)
        x = np.concatenate((x[:, 0] + x[:, 1], x[:, 0] - x[:, 1]), axis=1)
        h *= 2
    return x.reshape(size)


@attrs.frozen
class HadamardResponse(CategoricalInput, Mechanism):
    """Hadamard response over k categories: report an index of [K], K = 2^⌈log₂(k+1)⌉.

    See the module docstring: P[y | x] = 2e^ε/(K(e^ε + 1)) on the K/2 indices where row x + 1 of
    the Hadamard matrix is +1, 2/(K(e^ε + 1)) on the others; p* = e^ε/(e^ε + 1), q* = 1/2.
    """

    name: ClassVar[str] = "hr"
    kind: ClassVar[Literal["local", "central"]] = "local"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.05, 6.0))
    k: int = parameter(  # the estimator holds K = 2^⌈log₂(k+1)⌉ counts
        Integer(low=2, high=1 << 24), doc="number of categories", typical=(2, 64)
    )

    @property
    def size(self) -> int:
        return self.k

    @property
    def output_size(self) -> int:
        """K: the smallest power of two larger than k."""
        return 1 << self.k.bit_length()

    @property
    def inside_probability(self) -> float:
        """p* = e^ε/(e^ε + 1): the probability that y ∈ C_x."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    @property
    def outside_probability(self) -> float:
        """1 − p* = 1/(e^ε + 1)."""
        t = math.exp(-self.epsilon)
        return t / (1.0 + t)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        return self.inside_probability, 0.5

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        """Var*[f̂_v] = (e^ε + 1)²/(n (e^ε − 1)²) (Theorem 2 with p* = e^ε/(e^ε+1), q* = 1/2)."""
        k, epsilon, n = _oracle.check_variance_arguments(k, epsilon, n, owner=cls.name)
        return (math.exp(epsilon) + 1.0) ** 2 / (n * math.expm1(epsilon) ** 2)

    def in_support(self, reports: Any, values: Any, /) -> NDArray[np.bool_]:
        """Whether report y lies in C_v, i.e. popcount((v + 1) & y) is even (broadcasting)."""
        rows = np.asarray(values).astype(np.uint64) + np.uint64(1)
        even: NDArray[np.bool_] = ~_odd(rows & np.asarray(reports).astype(np.uint64))
        return even

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """One index y ∈ [K] per value, same shape as ``values``.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array of indices is perturbed there (:mod:`dpkit.tensors.hadamard`).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return hadamard_reports(
                library,
                values,
                k=self.k,
                outside_threshold64=lie_threshold(self.epsilon, 2),
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        x = as_category_indices(values, self.k, owner=self.name)
        rows = x.astype(np.uint64) + np.uint64(1)
        if isinstance(generator, SecureRandom):  # 1/(e^ε + 1) rounded up: realised ε ≤ ε
            threshold = lie_threshold(self.epsilon, 2)
            outside = generator.bernoulli_threshold(threshold, x.size).reshape(x.shape)
        else:
            outside = generator.random(x.shape) < self.outside_probability
        y = generator.integers(0, self.output_size, size=x.shape, dtype=np.uint64)
        wrong = _odd(rows & y) != outside  # y's half is not the one drawn (even = inside)
        lowest = rows & (~rows + np.uint64(1))  # lowest set bit of x + 1
        y ^= np.where(wrong, lowest, np.uint64(0))
        reports: NDArray[np.int64] = y.astype(np.int64)
        return reports

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[y | x]: log(2e^ε/(K(e^ε+1))) for y ∈ C_x, log(2/(K(e^ε+1))) otherwise.

        An accelerator's array (either operand) is scored on its device, float64, in its type:
        the same two numbers chosen by the same parity
        (:func:`dpkit.plugin.hadamard_log_probability`; a numpy or list operand beside it is
        copied there), refused as here (the same fields).
        """
        base = math.log(2.0 / self.output_size) - math.log1p(math.exp(-self.epsilon))
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return hadamard_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                k=self.k,
                log_terms=(base, base - self.epsilon),
                owner=self.name,
            )
        y = as_category_indices(outputs, self.output_size, owner=self.name, field="outputs")
        x = as_category_indices(inputs, self.k, owner=self.name, field="inputs")
        return np.where(self.in_support(y, x), base, base - self.epsilon)

    def output_space(self) -> NDArray[np.int64]:
        return np.arange(self.output_size, dtype=np.int64)


class HadamardResponseEstimator(_oracle.PureProtocolEstimator):
    """Support counts C_v = #{reports y ∈ C_v}, by a histogram and a Walsh–Hadamard transform.

    Debiasing and variance: :class:`dpkit_ldp._oracle.PureProtocolEstimator`. An accelerator's
    reports are histogrammed there (:func:`dpkit.plugin.category_counts`).
    """

    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: HadamardResponse

    def support_counts(self, reports: Any, /) -> tuple[NDArray[np.int64], int]:
        size = self.mechanism.output_size
        library = array_library(reports, owner=self.mechanism.name, field="reports")
        if library is not None:  # the histogram on the accelerator, the transform here
            owner = f"{self.mechanism.name} estimator"
            histogram = category_counts(library, reports, size, owner=owner)
            counts = support_counts_from_histogram(histogram, self.mechanism.k)
            return counts, int(histogram.sum())
        y = as_category_indices(
            reports, size, owner=f"{self.mechanism.name} estimator", field="reports"
        )
        histogram = np.bincount(y.ravel().astype(np.intp), minlength=size)
        return support_counts_from_histogram(histogram, self.mechanism.k), y.size


def support_counts_from_histogram(histogram: NDArray[Any], k: int) -> NDArray[np.int64]:
    """C_v = (n + (H·h)[v + 1]) / 2 for v < k, from the histogram h of the reports."""
    histogram = np.asarray(histogram, dtype=np.int64)
    if histogram.ndim != 1 or histogram.size & (histogram.size - 1):
        raise InvalidData("the report histogram must have a power-of-two length", field="reports")
    transformed = walsh_hadamard(histogram)
    return (int(histogram.sum()) + transformed[1 : k + 1]) // 2

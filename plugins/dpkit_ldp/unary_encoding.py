"""Unary encoding: symmetric (``sue``, basic one-time RAPPOR) and optimized (``oue``), with estimators.

Wang, Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency Estimation"
(USENIX Security), Section 4.3 (unary encoding): the value v ∈ {0..k−1} is encoded as the one-hot k-bit vector e_v
and every bit is reported independently:

    P[B_i = 1] = p  if i = v,        P[B_i = 1] = q  if i ≠ v,

which is ε-LDP with ε = ln(p(1 − q) / ((1 − p) q)) (two inputs differ in two bits).

* SUE (Erlingsson, Pihur & Korolova 2014, "RAPPOR", one-time/permanent response without Bloom
  filter): p = e^{ε/2}/(e^{ε/2} + 1), q = 1/(e^{ε/2} + 1), so p + q = 1.
* OUE (Wang et al. 2017, Section 4.3, "optimized UE"): p = 1/2, q = 1/(e^ε + 1), which minimises the variance.

Reports are packed bits: ``numpy.packbits`` order (bit i of the vector is bit 7 − i mod 8 of byte
i // 8), one row of ⌈k/8⌉ ``uint8`` per user, padding bits zero.

Sampling. Every probability is realised exactly on the grid of 2⁻³² (:data:`PRECISION_BITS`):
q — from its exact value, :func:`dpkit.plugin.lie_threshold` — is rounded *up* and p *down* to
that grid, which can only lower the ratio p(1 − q)/((1 − p)q),
so the realised ε never exceeds the declared ε (:attr:`UnaryEncoding.realised_epsilon` is the
exact value; it is below ε by at most 2⁻³¹(1/(p(1 − p)) + 1/(q(1 − q))): about 2·10⁻⁹ at
ε = 1, 10⁻⁵ at ε = 10). The declared distribution
(``log_probability``) and the estimator use these realised p and q, so the estimates are exactly
unbiased. The k − 1 "other" bits are drawn 64 at a time directly in packed form: with
q = Σ_j c_j 2^{j−32} (binary digits c_j), start from x = 0 and for j = 0 .. 31 replace x by
x | r if c_j = 1, else by x & r, where r is a fresh uniformly random 64-bit word; each bit of the
result is then 1 with probability exactly q, independently (P ← (c_j + P)/2 at every step).
That costs ≤ 32 random words per 64 report bits (a float draw per bit costs 64), and no
``packbits``. The true bit is then overwritten with an independent Bernoulli(p) draw.
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
    InvalidParameter,
    Mechanism,
    PureDP,
    Real,
    SecureRandom,
    array_library,
    as_array,
    describe_dtype,
    device_operands,
    lie_threshold,
    parameter,
    resolve_rng,
    unary_counts,
    unary_log_probability,
    unary_reports,
)
from dpkit_ldp import _oracle
from dpkit_ldp._arrays import CategoricalInput, as_category_indices
from dpkit_ldp._bits import random_words

__all__ = [
    "PRECISION_BITS",
    "OptimizedUnaryEncoding",
    "SymmetricUnaryEncoding",
    "UnaryEncoding",
    "UnaryEncodingEstimator",
]

#: Report-bit probabilities are realised exactly as multiples of 2**-PRECISION_BITS.
PRECISION_BITS = 32
_SCALE = 1 << PRECISION_BITS
#: Random 64-bit words drawn per block while perturbing (bounds temporary memory: 8 MB each).
_BLOCK_WORDS = 1 << 20
#: Users per block while setting the true bits.
_TRUE_BLOCK = 1 << 16
#: Rows per block while counting packed reports.
_COUNT_ROWS = 1 << 12
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


def bernoulli_words(
    rng: np.random.Generator | SecureRandom,
    size: int,
    numerator: int,
    *,
    precision: int = PRECISION_BITS,
) -> NDArray[np.uint64]:
    """``size`` random 64-bit words whose bits are independent Bernoulli(numerator / 2**precision).

    The AND/OR construction described in the module docstring; exact, not approximate.
    """
    if not 0 <= numerator <= 1 << precision:
        raise InvalidParameter("numerator", numerator, f"an integer in [0, 2**{precision}]")
    if numerator == 1 << precision:
        return np.full(size, np.iinfo(np.uint64).max, dtype=np.uint64)
    if numerator == 0 or size == 0:
        return np.zeros(size, dtype=np.uint64)
    lowest = (numerator & -numerator).bit_length() - 1  # bits below it would AND into zeros
    words = random_words(rng, size)
    for j in range(lowest + 1, precision):
        if (numerator >> j) & 1:
            np.bitwise_or(words, random_words(rng, size), out=words)
        else:
            np.bitwise_and(words, random_words(rng, size), out=words)
    return words


def _set_true_bits(
    rows: NDArray[np.uint8], indices: NDArray[np.intp], bits: NDArray[np.bool_]
) -> None:
    """Set bit ``indices[i]`` of packed row i to ``bits[i]`` (packbits order: bit j is bit
    7 − j mod 8 of byte j // 8), in place."""
    byte = indices >> 3
    mask = np.right_shift(np.uint8(0x80), (indices & 7).astype(np.uint8))
    at = (np.arange(rows.shape[0]), byte)
    current = rows[at]
    rows[at] = np.where(bits, current | mask, current & ~mask)


def _grid_lie(epsilon: float) -> int:
    """⌈q·2³²⌉ for q = 1/(e^ε + 1) exactly: ⌈T/2³²⌉ with T = :func:`dpkit.plugin.lie_threshold`
    (ε, 2) (q in 60-digit arithmetic, rounded up to the 2⁻⁶⁴ grid, T/2⁶⁴ < q + 2⁻⁶³).

    Rounding the float t/(1 + t) up instead fell short where q·2³² lies just above an integer
    and the float q just below it: the realised q′ was then below q and the realised ε above the
    declared one (by about 10⁻¹⁶, for about one in five of the ε built to sit there)."""
    return -(-lie_threshold(epsilon, 2) >> PRECISION_BITS)


def _grid_down(probability: float) -> int:
    return max(0, math.floor(probability * _SCALE))


class UnaryEncoding(CategoricalInput, Mechanism):
    """Shared implementation of ``sue`` and ``oue``; see the module docstring.

    Subclasses define :meth:`_grid_probabilities` (the realised p and q, as multiples of 2⁻³²).
    """

    kind: ClassVar[Literal["local", "central"]] = "local"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})
    epsilon: float
    k: int

    def _grid_probabilities(self) -> tuple[int, int]:
        raise NotImplementedError

    def _check_resolution(self) -> None:
        p, q = self._grid_probabilities()
        if p <= q or q == 0:
            raise InvalidParameter(
                "epsilon",
                self.epsilon,
                f"large enough that p > q on the 2^-{PRECISION_BITS} probability grid "
                f"(about 1e-8 or more)",
                owner=self.name,
            )

    @property
    def size(self) -> int:
        return self.k

    @property
    def width(self) -> int:
        """Bytes per packed report, ⌈k/8⌉."""
        return (self.k + 7) // 8

    @property
    def keep_probability(self) -> float:
        """The realised p = P[true bit is 1]."""
        return self._grid_probabilities()[0] / _SCALE

    @property
    def other_probability(self) -> float:
        """The realised q = P[any other bit is 1]."""
        return self._grid_probabilities()[1] / _SCALE

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """(p*, q*) = (p, q): a report supports v when bit v is set."""
        return self.keep_probability, self.other_probability

    @property
    def realised_epsilon(self) -> float:
        """ln(p(1 − q)/((1 − p) q)) for the realised p, q; never above ``epsilon``."""
        p, q = self._grid_probabilities()
        return math.log(p) + math.log(_SCALE - q) - math.log(_SCALE - p) - math.log(q)

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.k)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """Perturb category indices of shape ``s``; returns packed reports of shape ``s + (⌈k/8⌉,)``.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode). Both modes use the same exact construction on uniform words.
        An accelerator's array of indices gives packed reports there, with the same law
        (:mod:`dpkit.tensors.unary`).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            true_bit, other_bit = self._grid_probabilities()
            return unary_reports(
                library, values, k=self.k, keep=true_bit, other=other_bit, rng=rng, owner=self.name
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        indices = as_category_indices(values, self.k, owner=self.name)
        shape = indices.shape
        flat_indices = indices.reshape(-1).astype(np.intp, copy=False)
        n, width = flat_indices.size, self.width
        p, q = self._grid_probabilities()
        reports = np.empty((n, width), dtype=np.uint8)
        flat = reports.reshape(-1)
        total_words = (flat.size + 7) // 8
        # Whole words go straight into the report buffer; a ragged tail goes through a copy.
        full_words = flat.size // 8
        words_view = flat[: full_words * 8].view(np.uint64)
        # Secure mode sizes the blocks to the output (temporaries ≤ output/8); fast mode keeps
        # the fixed block, so that a seed gives the same reports as before.
        step = _BLOCK_WORDS
        if isinstance(generator, SecureRandom):
            step = max(1 << 14, min(_BLOCK_WORDS, total_words // 16))
        for start in range(0, total_words, step):
            stop = min(total_words, start + step)
            block = bernoulli_words(generator, stop - start, q)
            if stop <= full_words:
                words_view[start:stop] = block
            else:
                tail = block.view(np.uint8)
                flat[start * 8 :] = tail[: flat.size - start * 8]
        if self.k % 8:
            reports[:, -1] &= np.uint8((0xFF << (8 - self.k % 8)) & 0xFF)
        # The true bit: an independent Bernoulli(p); p is on the 2⁻³² grid, so u < p is exact.
        # Set in place, a block of users at a time: no n-sized temporaries (peak memory stays
        # within the reports plus a few MB).
        keep = p / _SCALE
        for start in range(0, n, _TRUE_BLOCK):
            stop = min(n, start + _TRUE_BLOCK)
            _set_true_bits(
                reports[start:stop], flat_indices[start:stop], generator.random(stop - start) < keep
            )
        return reports.reshape((*shape, width))

    def unpack(self, reports: Any, /) -> NDArray[np.uint8]:
        """Packed reports → 0/1 bit vectors of length k (validated)."""
        packed = self._check_reports(reports)
        return np.unpackbits(packed, axis=-1, count=self.k)

    def _check_reports(self, reports: Any, *, owner: str | None = None) -> NDArray[np.uint8]:
        who = owner or self.name
        array = as_array(reports, owner=who, field="reports")
        if array.dtype != np.uint8:
            hint = (
                "; pack 0/1 vectors with numpy.packbits(bits, axis=-1)"
                if array.ndim >= 1 and array.shape[-1] == self.k
                else ""
            )
            raise InvalidData(
                f"{who}: reports must be packed bits (unsigned bytes, numpy uint8, ⌈k/8⌉ = "
                f"{self.width} bytes per report), got an array of {describe_dtype(array)}{hint}",
                field="reports",
            )
        if array.ndim == 0 or array.shape[-1] != self.width:
            raise InvalidData(
                f"{who}: reports must have shape (..., {self.width}) for k={self.k} "
                f"(⌈k/8⌉ bytes per report), got shape {array.shape}",
                field="reports",
            )
        if self.k % 8 and array.size:
            padding = np.uint8(0xFF >> (self.k % 8))
            if np.any(array[..., -1] & padding):
                raise InvalidData(
                    f"{who}: reports set padding bits beyond bit {self.k - 1}; "
                    f"they were not produced for k={self.k}",
                    field="reports",
                )
        return array

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[report | x] for packed reports (last axis) and category indices (broadcasting).

        The bits are independent: log P = Σ_{i≠x} [b_i log q + (1 − b_i) log(1 − q)]
        + b_x log p + (1 − b_x) log(1 − p), with the realised p and q.

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        with the same operations (:func:`dpkit.plugin.unary_log_probability`; a numpy or list
        operand beside it is copied there).
        """
        log_q, log_not_q, log_p, log_not_p = log_terms = self._log_terms()
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return unary_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                k=self.k,
                log_terms=log_terms,
                owner=self.name,
            )
        bits = self.unpack(outputs).astype(np.int64)
        x = as_category_indices(inputs, self.k, owner=self.name, field="inputs")
        x = x.astype(np.intp, copy=False)  # booleans (k = 2) index as 0/1
        ones = bits.sum(axis=-1)
        shape = np.broadcast_shapes(ones.shape, x.shape)
        ones = np.broadcast_to(ones, shape)
        own = np.take_along_axis(
            np.broadcast_to(bits, (*shape, self.k)), np.broadcast_to(x, shape)[..., None], axis=-1
        )[..., 0]
        others = ones - own
        return (
            others * log_q
            + (self.k - 1 - others) * log_not_q
            + np.where(own == 1, log_p, log_not_p)
        )

    def _log_terms(self) -> tuple[float, float, float, float]:
        """(log q, log(1 − q), log p, log(1 − p)) of the realised p and q."""
        p, q = self.keep_probability, self.other_probability
        return math.log(q), math.log1p(-q), math.log(p), math.log1p(-p)

    def log_probability_bit(self, bit: Any, is_true: Any, /) -> NDArray[np.float64]:
        """log P[B_i = bit] for one bit, as the true bit (``is_true``) or another bit."""
        b = np.asarray(bit)
        t = np.asarray(is_true, dtype=bool)
        p, q = self.keep_probability, self.other_probability
        one = np.where(t, math.log(p), math.log(q))
        zero = np.where(t, math.log1p(-p), math.log1p(-q))
        return np.where(b == 1, one, zero)

    def output_space(self) -> NDArray[np.uint8]:
        """All 2^k packed reports (only for k ≤ 16)."""
        if self.k > 16:
            raise NotImplementedError(f"{self.name}: 2^{self.k} outputs are too many to list")
        bits = (np.arange(1 << self.k)[:, None] >> np.arange(self.k - 1, -1, -1)) & 1
        return np.packbits(bits.astype(np.uint8), axis=-1)


def _epsilon_field(low: float) -> Any:
    """ε from ``low``, the round number above the smallest ε at which p > q on the 2⁻³² grid
    (:meth:`UnaryEncoding._check_resolution`), to :data:`~dpkit.params.EPSILON`'s 700: the
    declared domain is then exactly what the mechanism accepts (the spec schema says so)."""
    domain = Real(low=low, high=EPSILON.high)
    return parameter(domain, doc="privacy loss ε per report", typical=(0.05, 6.0))


def _k_field() -> Any:
    # a report is k bits: k ≤ 2^24 keeps one report at 2 MiB
    return parameter(Integer(low=2, high=1 << 24), doc="number of categories", typical=(2, 64))


@attrs.frozen
class SymmetricUnaryEncoding(UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR): p = e^{ε/2}/(e^{ε/2}+1), q = 1 − p.

    Wang et al. 2017, Section 4.3 (SUE). Var*[f̂_v] = e^{ε/2}/(n (e^{ε/2} − 1)²), and the f_v
    term of the exact variance vanishes because p + q = 1.
    """

    name: ClassVar[str] = "sue"
    epsilon: float = _epsilon_field(2e-9)  # p > q on the grid from ε ≈ 1.8626e-9 (≈ 2⁻²⁹)
    k: int = _k_field()

    def __attrs_post_init__(self) -> None:
        self._check_resolution()

    def _grid_probabilities(self) -> tuple[int, int]:
        q = _grid_lie(self.epsilon / 2.0)  # ε/2: exact
        return _SCALE - q, q  # floor(p·2³²) = 2³² − ceil(q·2³²) since p = 1 − q

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        """Var*[f̂_v] = e^{ε/2} / (n (e^{ε/2} − 1)²) (Wang et al. 2017, Section 4.3)."""
        k, epsilon, n = _oracle.check_variance_arguments(k, epsilon, n, owner=cls.name)
        h = math.exp(epsilon / 2.0)
        return h / (n * (h - 1.0) ** 2)


@attrs.frozen
class OptimizedUnaryEncoding(UnaryEncoding):
    """Optimized unary encoding: p = 1/2, q = 1/(e^ε + 1).

    Wang et al. 2017, Section 4.3 (OUE). Var*[f̂_v] = 4e^ε/(n (e^ε − 1)²); the exact variance adds
    f_v (1 − p − q)/(n (p − q)) = f_v / n.
    """

    name: ClassVar[str] = "oue"
    epsilon: float = _epsilon_field(1e-9)  # q < 1/2 on the grid from ε ≈ 9.3132e-10 (≈ 2⁻³⁰)
    k: int = _k_field()

    def __attrs_post_init__(self) -> None:
        self._check_resolution()

    def _grid_probabilities(self) -> tuple[int, int]:
        return _SCALE // 2, _grid_lie(self.epsilon)

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        """Var*[f̂_v] = 4e^ε / (n (e^ε − 1)²) (Wang et al. 2017, Section 4.3)."""
        k, epsilon, n = _oracle.check_variance_arguments(k, epsilon, n, owner=cls.name)
        return 4.0 * math.exp(epsilon) / (n * math.expm1(epsilon) ** 2)


class UnaryEncodingEstimator(_oracle.PureProtocolEstimator):
    """Support counts C_v = number of reports with bit v set, from packed reports.

    Counting is one ``bincount`` per block of rows over (byte position, byte value) pairs,
    followed by a 256 × 8 lookup of each byte value's bits: O(n ⌈k/8⌉) with ``uint8`` reports and
    no unpacking. Debiasing and variance: :class:`dpkit_ldp._oracle.PureProtocolEstimator`.
    """

    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: UnaryEncoding

    def support_counts(self, reports: Any, /) -> tuple[NDArray[np.int64], int]:
        mech = self.mechanism
        library = array_library(reports, owner=mech.name, field="reports")
        if library is not None:  # counted on the accelerator
            return unary_counts(library, reports, k=mech.k, owner=f"{mech.name} estimator")
        packed = mech._check_reports(reports, owner=f"{mech.name} estimator")
        width = mech.width
        rows = packed.reshape(-1, width)
        offsets = (np.arange(width, dtype=np.intp) << 8)[None, :]
        histogram = np.zeros(width * 256, dtype=np.int64)
        for start in range(0, rows.shape[0], _COUNT_ROWS):
            block = rows[start : start + _COUNT_ROWS]
            index = block.astype(np.intp)
            index += offsets
            histogram += np.bincount(index.ravel(), minlength=width * 256)
        counts = histogram.reshape(width, 256) @ _BYTE_BITS  # (width, 8): ones per bit position
        return counts.reshape(-1)[: mech.k].astype(np.int64), rows.shape[0]

"""Apple's count mean sketch (``cms``) and Hadamard count mean sketch (``hcms``), with estimators.

Apple Differential Privacy Team 2017, "Learning with Privacy at Scale" (Apple Machine Learning
Journal 1(8)), Section 3 (Algorithms 1–4). Items come from an unbounded domain (any text or
bytes, :mod:`dpkit_ldp.items`); k hash functions h_1..h_k of the keyed family of
:mod:`dpkit_ldp.keyed_hash` map them to [m].

**cms** (client, Algorithm 1). Draw j uniform on [k]; start from v ∈ {−1, +1}^m, −1 everywhere
but v[h_j(x)] = +1; flip every coordinate independently with probability φ = 1/(e^{ε/2} + 1);
report (j, ṽ). Two items change at most two coordinates of v for the same j, each by a factor
(1 − φ)/φ = e^{ε/2}: ε-LDP. A report is a row of ``uint64``: j, then the m bits of ṽ (bit u
set when ṽ[u] = +1) packed little-endian into ⌈m/64⌉ words.

**hcms** (client, Algorithm 3). Draw j uniform on [k] and l uniform on [K], K the smallest
power of two ≥ m (Apple takes m a power of two, K = m); w = H[h_j(x), l], the
Sylvester–Hadamard entry (−1)^{popcount(h_j(x) & l)}; flip w with probability
φ = 1/(e^ε + 1); report (j, l, y) with y = 1 for +1, 0 for −1. One bit per report, ε-LDP (only
w depends on x).

**Sampling.** φ is realised exactly: rounded up to a grid 2⁻ᵇ (cms: the coarsest b ≤ 32 that
keeps the realised ε within 0.1 % of ε, the m bits drawn 64 at a time by
:func:`dpkit_ldp._biased_bits.biased_words` with at most b random words per 64 bits) or as
``word < T`` with T = :func:`lie_threshold` (hcms). Rounding φ up can only lower the
ratio (1 − φ)/φ, so the realised ε never exceeds the declared one, in fast and secure mode
alike. The estimators use the realised φ.

**Server** (Algorithms 2 and 4). With c = 1/(1 − 2φ), every report of row j contributes to
row j of the sketch: x̃ = (c·ṽ + 1)/2 (cms; E[x̃] = (v + 1)/2, the indicator of h_j(x)), or
c·y·H[:, l] (hcms, after the Walsh–Hadamard transform of the row; E = the same indicator since
E_l[H[u, l]H[u', l]] = 1{u = u'}). Summed per row: T[j, u]. The frequency of any candidate d is

    f̂(d) = m/(m − 1) · (Σ_j T[j, h_j(d)] − n/m).

**Unbiased, over the key.** Write Z_i for report i's term of Σ_j T[j, h_j(d)] and
π_i = P_j[h_j(d) = h_j(x_i)]: E[Z_i | key] = π_i, which is 1 for x_i = d and c(d, x_i)/k
otherwise, c the number of functions on which the two items collide. Over a uniformly random
key (the h_j independent uniform functions), π_i has mean 1/m, so E[f̂(d)] = n_d exactly. Given
one key, items colliding with d by that key's luck bias f̂(d) by m/(m − 1)·Σ_{d'≠d} n_{d'}
(c(d, d')/k − 1/m): zero on average over keys, with variance S_{−d}/(k(m − 1)), S_{−d} =
Σ_{d'≠d} n_{d'}² (Pan 2024, "Count-mean Sketch as an Optimized Framework for Frequency
Estimation with Local Differential Privacy", arXiv:2406.03785, makes the same correction to the
expectation and variance first stated by Apple). The errors quoted here are over the reports'
randomness and the key's.

**Variance** (derived here by the law of total variance over the key; ρ = (1/m)(1 − 1/m)):

* cms: Var[Z_i | key] = A + π_i(1 − π_i), A = c²φ(1 − φ) the flip noise of one cell, so

      Var f̂(d) = (m/(m−1))²·n·A + (1 − 1/k)(n − n_d)/(m − 1) + S_{−d}/(k(m − 1));

* hcms: Z_i = ±c, Var[Z_i | key] = c² − π_i², so

      Var f̂(d) = (m/(m−1))²·[n c² − n_d − (n − n_d)(1/m² + ρ/k)] + S_{−d}/(k(m − 1)).

The first terms are exact and linear in n_d (estimated by plugging in f̂(d)); S_{−d}, the
collision mass of the other items, is estimated from the candidates queried together unless
``second_moment`` (S = Σ_d n_d²) is given: with v̂ the variance without this term and
γ = 1/(k(m − 1)), E[f̂(c)² − v̂(c)] = n_c² + γ(S − n_c²), so over C distinct candidates
Ŝ = Σ_c (f̂(c)² − v̂(c))/(1 + γ(C − 1)) and Ŝ_{−d} = Ŝ − (f̂(d)² − v̂(d) − γŜ)/(1 − γ) are
unbiased when the candidates hold every item (floored at 0). Items outside the candidate list
are missed; their share of S is small when the candidates hold the heavy items. The interval
is the normal one (a sum of n independent bounded terms).

**On an accelerator.** cms's and hcms's ``randomize`` take an accelerator's array of integer
items (an integer is the item of its decimal text, as on the host) and run there with the
CPU's law and report format, the keyed hash computed on the device bit for bit as the host
computes it (:mod:`dpkit.tensors.siphash`, :mod:`dpkit.tensors.sketch`), so reports of either
path are estimated by the other; the estimator's ``accumulate`` counts them there, and
``log_probability`` scores them there against integer items, the host's numbers to the bit
(the same hash, bit counts and comparisons, and the host's constants added in its order). Text and
bytes cannot live on a device: hash them on the host.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    EPSILON,
    Estimate,
    Estimator,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    Statistics,
    array_library,
    as_array,
    device_operands,
    hadamard_sketch_counts,
    hadamard_sketch_log_probability,
    hadamard_sketch_reports,
    lie_threshold,
    parameter,
    resolve_rng,
    sketch_counts,
    sketch_log_probability,
    sketch_reports,
)
from dpkit_ldp._biased_bits import biased_words, uniform_words
from dpkit_ldp._reports import read_only_ints, report_words
from dpkit_ldp.hadamard import _odd
from dpkit_ldp.items import ItemInput, as_items
from dpkit_ldp.keyed_hash import ItemWords, KeyedHashFamily, fresh_key, key_parameter

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CountMeanSketch",
    "FrequencySketch",
    "HadamardCountMeanSketch",
    "SketchCounts",
    "SketchEstimator",
]

_GRID = 32
_SCALE = 1 << _GRID
#: Reports unpacked per block while counting cms reports (below 2¹⁶: their sums fit uint16).
_COUNT_BLOCK = (1 << 14) - 1
_MAX_OUTPUTS = 1 << 16
#: Cells (rows × 2K) of hcms's simulation state drawn at a time.
_SIMULATED_CELLS = 1 << 21


@attrs.frozen(eq=False)
class SketchCounts(Statistics):
    """A sketch's sufficient statistic: per row j and cell u, ``cells[j, u]`` (cms: the reports
    of row j with bit u set, u < m; hcms: Σ y over the reports of row j at column u < K,
    y = ±1), the number of reports of each row, and n. Adds up chunk by chunk."""

    mechanism: str
    cells: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    rows: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        if other.mechanism != self.mechanism or other.cells.shape != self.cells.shape:
            raise InvalidData(
                f"cannot merge the sketch of {other.mechanism!r} of shape {other.cells.shape} "
                f"into the sketch of {self.mechanism!r} of shape {self.cells.shape}",
                field="statistics",
            )
        return type(self)(
            self.mechanism, self.cells + other.cells, self.rows + other.rows, self.n + other.n
        )


class _Sketch(ItemInput, Mechanism):
    """What cms and hcms share: parameters, the hash family, the sketch query and its variance."""

    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "sketch"
    epsilon: float
    width: int
    hashes: int
    key: str | None

    def _set_key(self) -> None:
        if self.key is None:
            object.__setattr__(self, "key", fresh_key())

    @property
    def family(self) -> KeyedHashFamily:
        assert self.key is not None  # set at construction
        return KeyedHashFamily(self.key)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    @property
    def flip_probability(self) -> float:
        """The realised φ."""
        raise NotImplementedError

    @property
    def gain(self) -> float:
        """c = 1/(1 − 2φ), which makes a flipped ±1 unbiased."""
        return 1.0 / (1.0 - 2.0 * self.flip_probability)

    def buckets(self, items: Any, /) -> NDArray[np.int64]:
        """h_j(x) for every item and every j < k: shape (items, k)."""
        words = ItemWords.from_items(as_items(items, owner=self.name, field="items").reshape(-1))
        return self.family.table(words, self.hashes, self.width)

    def count_variance(
        self, counts: NDArray[np.float64], n: int, collisions: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var f̂(d) for true counts n_d and collision masses S_{−d} (module docstring)."""
        raise NotImplementedError

    def _hashed(self, items: NDArray[np.bytes_], index: NDArray[np.int64]) -> NDArray[np.int64]:
        words = ItemWords.from_items(items.reshape(-1))
        return self.family.bucket(words, index.reshape(-1).astype(np.uint64), self.width)


def _flip_grid(epsilon: float) -> tuple[int, int]:
    """(numerator, b): φ = 1/(e^ε + 1) rounded up to the coarsest grid 2⁻ᵇ, b ∈ [8, 32], on
    which the realised ε' = ln((1 − φ')/φ') stays within 0.1 % of ε (so ε(1 − 10⁻³) ≤ ε' ≤ ε).

    Rounded up from T = lie_threshold(ε, 2) ≥ φ·2⁶⁴, so φ' ≥ φ. A coarse grid costs fewer
    random words: :func:`~dpkit_ldp.unary_encoding.bernoulli_words` draws at most b words per 64
    report bits.
    """
    threshold = lie_threshold(epsilon, 2)
    for bits in range(8, _GRID + 1):
        numerator = -(-threshold >> (64 - bits))
        if 2 * numerator >= 1 << bits:
            continue
        realised = math.log((1 << bits) - numerator) - math.log(numerator)
        if realised >= epsilon * (1.0 - 1e-3) or bits == _GRID:
            return numerator, bits
    return -(-threshold >> (64 - _GRID)), _GRID


@attrs.frozen
class CountMeanSketch(_Sketch):
    """Apple's count mean sketch: (j, ṽ) with ṽ a one-hot ±1 vector of length m, every
    coordinate flipped with probability 1/(e^{ε/2} + 1). See the module docstring."""

    name: ClassVar[str] = "cms"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.5, 6.0))
    width: int = parameter(
        Integer(low=2, high=1 << 16),
        doc="sketch width m (bits per report)",
        default=1024,
        typical=(2, 8),
    )
    hashes: int = parameter(
        Integer(low=1, high=1 << 16),
        doc="number k of hash functions (sketch rows)",
        default=256,
        typical=(1, 4),
    )
    key: str | None = key_parameter()

    def __attrs_post_init__(self) -> None:
        self._set_key()
        numerator, bits = self._flip_grid
        if 2 * numerator >= 1 << bits:
            raise InvalidParameter(
                "epsilon",
                self.epsilon,
                "large enough that the flip probability is below 1/2 on the 2^-32 grid "
                "(about 1e-9 or more)",
                owner=self.name,
            )

    @property
    def _flip_grid(self) -> tuple[int, int]:
        return _flip_grid(self.epsilon / 2.0)

    @property
    def flip_probability(self) -> float:
        """The realised φ ≥ 1/(e^{ε/2} + 1), a multiple of 2⁻ᵇ (:func:`_flip_grid`)."""
        numerator, bits = self._flip_grid
        return numerator / (1 << bits)

    @property
    def realised_epsilon(self) -> float:
        """2·ln((1 − φ)/φ) for the realised φ: never above ``epsilon``, at least 0.999·ε."""
        numerator, bits = self._flip_grid
        return 2.0 * (math.log((1 << bits) - numerator) - math.log(numerator))

    @property
    def words(self) -> int:
        """⌈m/64⌉: the words of ṽ in a report."""
        return (self.width + 63) // 64

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports of shape ``values.shape + (1 + ⌈m/64⌉,)``: j, then the packed bits of ṽ.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array of integer items is randomized there (module docstring).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return sketch_reports(
                library,
                values,
                key=self.family.key_bytes,
                hashes=self.hashes,
                width=self.width,
                flip=self._flip_grid,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        items = as_items(values, owner=self.name)
        n = items.size
        j = generator.integers(0, self.hashes, size=n, dtype=np.int64)
        h = self._hashed(items, j)
        reports = np.empty((n, 1 + self.words), dtype=np.uint64)
        reports[:, 0] = j
        numerator, precision = self._flip_grid
        bits = biased_words(generator, n * self.words, numerator, precision).reshape(n, self.words)
        if self.width % 64:
            bits[:, -1] &= np.uint64((1 << (self.width % 64)) - 1)
        bits[np.arange(n), h >> 6] ^= np.uint64(1) << (h & 63).astype(np.uint64)
        reports[:, 1:] = bits
        return reports.reshape((*items.shape, 1 + self.words))

    def _check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        rows = _uint_reports(reports, 1 + self.words, owner, "j and the ⌈m/64⌉ words of ṽ")
        if rows.size and int(rows[:, 0].max()) >= self.hashes:
            raise InvalidData(
                f"{owner}: reports name the hash function {int(rows[:, 0].max())}, outside "
                f"0..{self.hashes - 1} (k={self.hashes}); were they produced with another k?",
                field="reports",
            )
        if self.width % 64 and rows.size:
            padding = ~np.uint64((1 << (self.width % 64)) - 1)
            if np.any(rows[:, -1] & padding):
                raise InvalidData(
                    f"{owner}: reports set bits beyond bit {self.width - 1}; they were not "
                    f"produced for m={self.width}",
                    field="reports",
                )
        return rows

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[(j, ṽ) | x] = −ln k + D·ln φ + (m − D)·ln(1 − φ), D the coordinates where ṽ
        differs from the one-hot vector of h_j(x) (−inf for a j ≥ k or bits beyond m).

        An accelerator's array (either operand; a numpy or list operand beside it is copied
        there) is scored on its device by the same operations, the host's numbers to the bit
        (:func:`dpkit.plugin.sketch_log_probability`): the reports integers, the inputs
        integer items (module docstring, "On an accelerator")."""
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            phi = self.flip_probability
            return sketch_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                key=self.family.key_bytes,
                hashes=self.hashes,
                width=self.width,
                log_terms=(math.log(self.hashes), math.log(phi), math.log1p(-phi)),
                owner=self.name,
            )
        out = np.asarray(outputs, dtype=np.uint64)
        items = as_items(inputs, owner=self.name, field="inputs")
        shape = np.broadcast_shapes(out.shape[:-1], items.shape)
        out = np.broadcast_to(out, (*shape, out.shape[-1])).reshape(-1, out.shape[-1])
        flat_items = np.broadcast_to(items, shape).reshape(-1)
        j = out[:, 0]
        valid = j < np.uint64(self.hashes)
        h = self._hashed(flat_items, np.where(valid, j, 0).astype(np.int64))
        bits = out[:, 1:].copy()
        bits[np.arange(bits.shape[0]), h >> 6] ^= np.uint64(1) << (h & 63).astype(np.uint64)
        if self.width % 64:
            valid &= (out[:, -1] & ~np.uint64((1 << (self.width % 64)) - 1)) == 0
        differ = np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
        phi = self.flip_probability
        log_p = (
            -math.log(self.hashes)
            + differ * math.log(phi)
            + (self.width - differ) * math.log1p(-phi)
        )
        return np.where(valid, log_p, -np.inf).reshape(shape)

    def output_space(self) -> NDArray[np.uint64]:
        """Every (j, ṽ) (only when k·2^m ≤ 2¹⁶)."""
        if self.hashes << self.width > _MAX_OUTPUTS:
            raise NotImplementedError(f"{self.name}: k·2^m outputs are too many to list")
        j, v = np.meshgrid(
            np.arange(self.hashes, dtype=np.uint64),
            np.arange(1 << self.width, dtype=np.uint64),
            indexing="ij",
        )
        return np.stack([j.ravel(), v.ravel()], axis=1)

    def count_variance(
        self, counts: NDArray[np.float64], n: int, collisions: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        m, k, phi = self.width, self.hashes, self.flip_probability
        noise = self.gain**2 * phi * (1.0 - phi)
        return (
            (m / (m - 1)) ** 2 * n * noise
            + (1.0 - 1.0 / k) * (n - counts) / (m - 1)
            + collisions / (k * (m - 1))
        )

    @classmethod
    def sketch_variance(
        cls, *, epsilon: float, n: int = 1, width: int = 1024, hashes: int = 256
    ) -> float:
        """Var[f̂(d)/n] for a rare item among many distinct ones (n_d, S_{−d} ≪ n): the cms
        variance of the module docstring divided by n², (m/(m−1))²·A/n + (1 − 1/k)/((m − 1)n)."""
        probe = cls(epsilon=epsilon, width=width, hashes=hashes, key="0" * 32)
        zero = np.zeros(1)
        return float(probe.count_variance(zero, n, zero)[0]) / n**2

    def simulate(self, items: Any, counts: Any, /, *, rng: np.random.Generator) -> SketchCounts:
        """The :class:`SketchCounts` of ``counts[i]`` users holding ``items[i]``, drawn exactly
        without materialising reports (for experiments; never to protect data).

        Users of item d spread over the rows as Multinomial(n_d, 1/k); with G[j, u] the users
        of row j whose item hashes to u and N_j those of row j, the set bits of cell (j, u) are
        Binomial(G[j, u], 1 − φ) + Binomial(N_j − G[j, u], φ), independently: exact.
        """
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter("rng", rng, "a numpy Generator (simulation is fast mode only)")
        buckets = self.buckets(items)
        n_items = np.asarray(counts, dtype=np.int64).reshape(-1)
        if n_items.shape[0] != buckets.shape[0] or np.any(n_items < 0):
            raise InvalidData("counts must be one count >= 0 per item", field="counts")
        per_row = rng.multinomial(n_items, np.full(self.hashes, 1.0 / self.hashes))
        hits = np.zeros((self.hashes, self.width), dtype=np.int64)
        rows = np.broadcast_to(np.arange(self.hashes), buckets.shape)
        np.add.at(hits, (rows, buckets), per_row)
        totals = per_row.sum(axis=0)
        phi = self.flip_probability
        cells = rng.binomial(hits, 1.0 - phi) + rng.binomial(totals[:, None] - hits, phi)
        return SketchCounts(self.name, cells, totals, int(n_items.sum()))


@attrs.frozen
class HadamardCountMeanSketch(_Sketch):
    """Apple's Hadamard count mean sketch: (j, l, ±H[h_j(x), l]) flipped with probability
    1/(e^ε + 1): one bit per report. See the module docstring."""

    name: ClassVar[str] = "hcms"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.5, 6.0))
    width: int = parameter(
        Integer(low=2, high=1 << 24),
        doc="sketch width m (hash range; the Hadamard transform has the next power of two)",
        default=1024,
        typical=(2, 8),
    )
    hashes: int = parameter(
        Integer(low=1, high=1 << 16),
        doc="number k of hash functions (sketch rows)",
        default=256,
        typical=(1, 4),
    )
    key: str | None = key_parameter()

    def __attrs_post_init__(self) -> None:
        self._set_key()

    @property
    def columns(self) -> int:
        """K: the smallest power of two ≥ m (the Hadamard columns a report's l ranges over)."""
        return 1 << (self.width - 1).bit_length()

    @property
    def _threshold(self) -> int:
        return lie_threshold(self.epsilon, 2)

    @property
    def flip_probability(self) -> float:
        """The realised φ = T/2⁶⁴ ≥ 1/(e^ε + 1)."""
        return self._threshold / 2.0**64

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports of shape ``values.shape + (3,)``: j, l and the bit y (1 for +1).

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array of integer items is randomized there (module docstring).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return hadamard_sketch_reports(
                library,
                values,
                key=self.family.key_bytes,
                hashes=self.hashes,
                width=self.width,
                columns=self.columns,
                flip_threshold64=self._threshold,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        items = as_items(values, owner=self.name)
        n = items.size
        j = generator.integers(0, self.hashes, size=n, dtype=np.int64)
        column = generator.integers(0, self.columns, size=n, dtype=np.uint64)
        h = self._hashed(items, j).astype(np.uint64)
        flip = uniform_words(generator, n) < np.uint64(self._threshold)
        plus = ~_odd(h & column)  # H[h, l] = +1
        reports = np.empty((n, 3), dtype=np.uint64)
        reports[:, 0], reports[:, 1], reports[:, 2] = j, column, plus != flip
        return reports.reshape((*items.shape, 3))

    def _check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        rows = _uint_reports(reports, 3, owner, "j, l and the bit y")
        if rows.size:
            limits = ((0, self.hashes, "j"), (1, self.columns, "l"), (2, 2, "y"))
            for column, limit, name in limits:
                top = int(rows[:, column].max())
                if top >= limit:
                    raise InvalidData(
                        f"{owner}: reports hold {name}={top}, outside 0..{limit - 1}; were they "
                        f"produced with another k or m?",
                        field="reports",
                    )
        return rows

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[(j, l, y) | x] = −ln k − ln K + ln(1 − φ) if y is H[h_j(x), l], else + ln φ.

        An accelerator's array (either operand) is scored on its device, the host's numbers to
        the bit (:func:`dpkit.plugin.hadamard_sketch_log_probability`; as cms's)."""
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            phi = self.flip_probability
            base = -math.log(self.hashes) - math.log(self.columns)
            return hadamard_sketch_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                key=self.family.key_bytes,
                hashes=self.hashes,
                width=self.width,
                columns=self.columns,
                log_terms=(base + math.log1p(-phi), base + math.log(phi)),
                owner=self.name,
            )
        out = np.asarray(outputs, dtype=np.uint64)
        items = as_items(inputs, owner=self.name, field="inputs")
        shape = np.broadcast_shapes(out.shape[:-1], items.shape)
        out = np.broadcast_to(out, (*shape, 3)).reshape(-1, 3)
        flat_items = np.broadcast_to(items, shape).reshape(-1)
        valid = (out[:, 0] < self.hashes) & (out[:, 1] < self.columns) & (out[:, 2] < 2)
        j = np.where(valid, out[:, 0], 0).astype(np.int64)
        h = self._hashed(flat_items, j).astype(np.uint64)
        agree = (~_odd(h & out[:, 1])) == (out[:, 2] == 1)
        phi = self.flip_probability
        base = -math.log(self.hashes) - math.log(self.columns)
        log_p = np.where(agree, base + math.log1p(-phi), base + math.log(phi))
        return np.where(valid, log_p, -np.inf).reshape(shape)

    def output_space(self) -> NDArray[np.uint64]:
        """Every (j, l, y) (only when 2kK ≤ 2¹⁶)."""
        if 2 * self.hashes * self.columns > _MAX_OUTPUTS:
            raise NotImplementedError(f"{self.name}: 2kK outputs are too many to list")
        grid = np.meshgrid(
            np.arange(self.hashes), np.arange(self.columns), np.arange(2), indexing="ij"
        )
        return np.stack([g.ravel() for g in grid], axis=1).astype(np.uint64)

    def count_variance(
        self, counts: NDArray[np.float64], n: int, collisions: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        m, k = self.width, self.hashes
        rho = (1.0 / m) * (1.0 - 1.0 / m)
        inner = n * self.gain**2 - counts - (n - counts) * (1.0 / m**2 + rho / k)
        return (m / (m - 1)) ** 2 * inner + collisions / (k * (m - 1))

    @classmethod
    def sketch_variance(
        cls, *, epsilon: float, n: int = 1, width: int = 1024, hashes: int = 256
    ) -> float:
        """Var[f̂(d)/n] for a rare item among many distinct ones: the hcms variance of the
        module docstring at n_d = S_{−d} = 0, divided by n²."""
        probe = cls(epsilon=epsilon, width=width, hashes=hashes, key="0" * 32)
        zero = np.zeros(1)
        return float(probe.count_variance(zero, n, zero)[0]) / n**2

    def simulate(self, items: Any, counts: Any, /, *, rng: np.random.Generator) -> SketchCounts:
        """The :class:`SketchCounts` of one report from each of ``counts[i]`` devices holding
        ``items[i]``, drawn from exactly the law of real reports without materialising them, in
        O(k·K·log K) draws whatever n (for experiments; never to protect data).

        *Why the law is the same.* (1) Devices of item d spread over the rows as
        Multinomial(n_d, 1/k), independently over items; G[j, u] of row j hash to bucket u.
        (2) A device's flip is independent of its row and column, and a flipped device reports
        −H[u, l] = (−1)^{f + popcount(u & l)}, f = 1: of the G[j, u] devices, Binomial(G[j, u],
        φ) start with parity f = 1. (3) A device picks its column l uniformly, i.e. the log₂K
        bits of l as fair coins, and reports y = +1 iff f + popcount(u & l) is even. Draw the
        bits of l from the top: after the bits above i, what decides the rest of a device's
        report is only u's bits below i and its parity so far, and the devices alike in that
        are exchangeable; so for every prefix of l, every remaining part of u and every
        parity, the devices whose next bit of l is 1 are Binomial(count, 1/2), independently
        (the devices are), and the groups then merge on (remaining part of u, new parity) —
        the fast Walsh–Hadamard transform's butterfly, 2K draws per bit of l per row. After
        the last bit this leaves, for every column l, the devices reporting y = +1 and −1
        there: their exact joint law over the rows and columns, and cells = plus − minus.
        Every step draws the conditional law of the next part given the parts before.
        """
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter("rng", rng, "a numpy Generator (simulation is fast mode only)")
        buckets = self.buckets(items)
        n_items = np.asarray(counts, dtype=np.int64).reshape(-1)
        if n_items.shape[0] != buckets.shape[0] or np.any(n_items < 0):
            raise InvalidData("counts must be one count >= 0 per item", field="counts")
        k, size = self.hashes, self.columns
        per_row = rng.multinomial(n_items, np.full(k, 1.0 / k))
        hits = np.zeros((k, size), dtype=np.int64)
        np.add.at(hits, (np.broadcast_to(np.arange(k), buckets.shape), buckets), per_row)
        flipped = rng.binomial(hits, self.flip_probability)
        cells = np.empty((k, size), dtype=np.int64)
        chunk = max(1, _SIMULATED_CELLS // size)  # rows at a time: bounded memory
        for lo in range(0, k, chunk):
            rows = slice(lo, lo + chunk)
            signs = _column_signs(hits[rows] - flipped[rows], flipped[rows], rng)
            cells[rows] = signs[:, :, 0] - signs[:, :, 1]
        return SketchCounts(self.name, cells, per_row.sum(axis=0), int(n_items.sum()))


def _column_signs(
    even: NDArray[np.int64], odd: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.int64]:
    """Devices ``even[j, u]`` and ``odd[j, u]`` of row j in bucket u with parity 0 and 1, each
    picking a uniform column l < K: per row and column, those whose parity plus
    popcount(u & l) is even and odd, shape (rows, K, 2), drawn bit by bit of l from the top
    (:meth:`HadamardCountMeanSketch.simulate`, step 3)."""
    rows = even.shape[0]
    # state[j, prefix of l, parity, remaining low bits of u]
    state = np.stack([even, odd], axis=1)[:, None]
    while state.shape[-1] > 1:
        half = state.shape[-1] // 2
        split = state.reshape(rows, -1, 2, 2, half)  # [..., parity, top bit of u, rest]
        one = rng.binomial(split, 0.5)  # next bit of l is 1
        zero = split - one
        stay = zero[:, :, :, 0] + zero[:, :, :, 1]  # bit 0: parity unchanged
        moved = one[:, :, :, 0] + one[:, :, ::-1, 1]  # bit 1: flips the parity where u's is 1
        state = np.stack([stay, moved], axis=2).reshape(rows, -1, 2, half)
    return state[..., 0]


def _uint_reports(reports: Any, columns: int, owner: str, what: str) -> NDArray[np.uint64]:
    array = as_array(reports, owner=owner, field="reports")
    if array.ndim == 0 or array.shape[-1] != columns:
        raise InvalidData(
            f"{owner}: reports must have shape (..., {columns}): {what}; got shape {array.shape}",
            field="reports",
        )
    return report_words(array, owner).reshape(-1, columns)


def _hadamard_rows(matrix: NDArray[np.int64]) -> NDArray[np.int64]:
    """H·row for every row (Sylvester–Hadamard, exact in int64)."""
    x = np.array(matrix, dtype=np.int64)
    rows, size = x.shape
    h = 1
    while h < size:
        x = x.reshape(rows, -1, 2, h)
        x = np.concatenate((x[:, :, 0] + x[:, :, 1], x[:, :, 0] - x[:, :, 1]), axis=2)
        h *= 2
    return x.reshape(rows, size)


@attrs.frozen(eq=False)
class FrequencySketch:
    """The debiased sketch: ``table[j, u]`` = T[j, u] of the module docstring, for n reports.

    :meth:`estimate` answers the frequency of any candidate items, with variance and intervals.
    """

    mechanism: Any
    table: NDArray[np.float64]
    n: int

    @property
    def estimates(self) -> NDArray[np.float64]:
        """The debiased sketch itself (query items with :meth:`estimate`)."""
        return self.table

    def estimate(self, items: Any, /, *, second_moment: float | None = None) -> Estimate:
        """Estimated counts of ``items`` (text, bytes or integers), with variance and intervals.

        ``second_moment``: Σ n_d² over all items, if known; by default it is estimated from the
        candidates themselves (module docstring, "Variance").
        """
        mech = self.mechanism
        labels = as_array(items, owner=f"{mech.name} sketch", field="items")
        if labels.ndim != 1:
            raise InvalidData(
                f"{mech.name} sketch: items must be a 1-D list of candidates, got shape "
                f"{labels.shape}",
                field="items",
            )
        if second_moment is not None and not (
            isinstance(second_moment, (int, float))
            and math.isfinite(second_moment)
            and second_moment >= 0
        ):
            raise InvalidParameter(
                "second_moment", second_moment, "a finite number >= 0", owner=f"{mech.name} sketch"
            )
        buckets = mech.buckets(labels)
        m, n = mech.width, self.n
        sums = self.table[np.arange(mech.hashes)[None, :], buckets].sum(axis=1)
        counts = (m / (m - 1)) * (sums - n / m)
        zero = np.zeros_like(counts)
        excess = counts**2 - mech.count_variance(counts, n, zero)  # n_d² + γ(S − n_d²) on average
        gamma = 1.0 / (mech.hashes * (m - 1))
        if second_moment is None:
            _, first = np.unique(
                as_items(labels, owner=mech.name, field="items"), return_index=True
            )
            total = max(0.0, float(excess[first].sum()) / (1.0 + gamma * (first.size - 1)))
        else:
            total = float(second_moment)
        own = (excess - gamma * total) / (1.0 - gamma)
        collisions = np.maximum(total - own, 0.0)
        variance = np.maximum(mech.count_variance(counts, n, collisions), 0.0)
        return Estimate(
            mech.name, "unbiased", n, counts, variance, categories=tuple(labels.tolist())
        )


class SketchEstimator(Estimator):
    """Reports → :class:`SketchCounts` → :class:`FrequencySketch` (cms and hcms)."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: Any

    def accumulate(self, reports: Any, /) -> SketchCounts:
        """The sketch's counts; an accelerator's reports are counted there."""
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        library = array_library(reports, owner=owner, field="reports")
        if library is not None and isinstance(mech, HadamardCountMeanSketch):
            cells, per_row, n = hadamard_sketch_counts(
                library, reports, hashes=mech.hashes, columns=mech.columns, owner=owner
            )
            return SketchCounts(mech.name, cells, per_row, n)
        if library is not None:
            cells, per_row, n = sketch_counts(
                library, reports, hashes=mech.hashes, width=mech.width, owner=owner
            )
            return SketchCounts(mech.name, cells, per_row, n)
        rows = mech._check_reports(reports, owner)
        k, m = mech.hashes, mech.width
        j = rows[:, 0].astype(np.intp)
        per_row = np.bincount(j, minlength=k).astype(np.int64)
        if isinstance(mech, HadamardCountMeanSketch):
            size = mech.columns
            cell = j * size + rows[:, 1].astype(np.intp)
            plus = np.bincount(cell[rows[:, 2] == 1], minlength=k * size)
            total = np.bincount(cell, minlength=k * size)
            cells = (2 * plus - total).reshape(k, size).astype(np.int64)
        else:
            cells = _count_bits(j, rows[:, 1:], k, m)
        return SketchCounts(mech.name, cells, per_row, rows.shape[0])

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> FrequencySketch:
        self.check_method(method)
        mech = self.mechanism
        shape = (mech.hashes, getattr(mech, "columns", mech.width))
        if (
            not isinstance(statistics, SketchCounts)
            or statistics.mechanism != mech.name
            or statistics.cells.shape != shape
        ):
            raise InvalidData(
                f"expected the SketchCounts of {mech.name!r} with shape {shape}",
                field="statistics",
            )
        c = mech.gain
        rows = statistics.rows.astype(np.float64)[:, None]
        if isinstance(mech, HadamardCountMeanSketch):
            table = c * _hadamard_rows(statistics.cells)[:, : mech.width].astype(np.float64)
        else:  # Σ (c·ṽ + 1)/2 with ṽ = 2·bit − 1
            table = c * (statistics.cells - rows / 2.0) + rows / 2.0
        return FrequencySketch(mech, table, statistics.n)


def _count_bits(
    j: NDArray[np.intp], words: NDArray[np.uint64], k: int, m: int
) -> NDArray[np.int64]:
    """cells[j, u] = reports of row j with bit u set: row by row (reports sorted by j), the
    bits unpacked and summed as ``uint16`` (exact for up to 65,535 rows at a time, and about
    ten times faster than summing into int64)."""
    cells = np.zeros((k, m), dtype=np.int64)
    order = np.argsort(j, kind="stable")
    bounds = np.searchsorted(j[order], np.arange(k + 1))
    data = np.ascontiguousarray(words.astype("<u8", copy=False)).view(np.uint8)
    for row in np.flatnonzero(np.diff(bounds)):
        for lo in range(int(bounds[row]), int(bounds[row + 1]), _COUNT_BLOCK):
            rows = order[lo : min(int(bounds[row + 1]), lo + _COUNT_BLOCK)]
            bits = np.unpackbits(data[rows], axis=1, count=m, bitorder="little")
            cells[row] += np.add.reduce(bits, axis=0, dtype=np.uint16)
    return cells

"""RAPPOR (``rappor``): Bloom filters, permanent and instantaneous randomized response, decoding.

Erlingsson, Pihur & Korolova 2014, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response" (CCS), Sections 3–4.

**Client.** A device belongs to one of m cohorts (drawn once, uniformly). Its item x sets h
bits of a k-bit Bloom filter B, at h_{c·h + i}(x) mod k for i < h (the keyed family of
:mod:`dpkit_ldp.keyed_hash`, c the cohort). The *permanent* randomized response (PRR) replaces
each bit by a fair coin with probability f: B′_i = 1 with probability f/2, 0 with probability
f/2, B_i otherwise; B′ is memoized per item and reused for every report of that item. Each
report is a fresh *instantaneous* randomized response (IRR) of B′: S_i = 1 with probability q
where B′_i = 1 and p where B′_i = 0. A report is a ``uint64`` row: the cohort, then the k bits
of S packed little-endian into ⌈k/64⌉ words.

**Privacy** (Section 3.2). Two items differ in at most 2h Bloom bits. For one bit the PRR
ratio is (1 − f/2)/(f/2), so the memoized B′ — and any number of reports built from it — is

    ε∞ = 2h·ln((1 − f/2)/(f/2))                                      (Theorem 1),

and one report, with q* = P[S = 1 | B = 1] = ½f(p + q) + (1 − f)q and
p* = P[S = 1 | B = 0] = ½f(p + q) + (1 − f)p, is

    ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*)))                               (Theorem 2).

**T reports of one item** (derived here). Given B′_i the T IRR bits are independent, so one
bit's T reports have law π_B·Bin(·; T, q) + (1 − π_B)·Bin(·; T, p) with π₁ = 1 − f/2,
π₀ = f/2. Their likelihood ratio is g(t) = (π₁t + 1 − π₁)/(π₀t + 1 − π₀) with
t = (q/p)^c((1 − q)/(1 − p))^{T−c}, c the reports with the bit set: increasing in c, so it is
largest at c = T and smallest at c = 0, and

    ε_T = h·ln(g(t_T)/g(t_0)),   t_T = (q/p)^T,  t_0 = ((1 − q)/(1 − p))^T,

exactly (the worst case: the 2h bits where the two items' filters differ, h one way and h the
other). ε_T rises from ε₁ (T = 1) to ε∞ (T → ∞); ``reports`` = T is a parameter, and
:attr:`Rappor.privacy` is ε_T.

**Repeated collection** (:class:`RapporClient`, the device's own memo). A device reporting D
distinct items over time, item u T_u times, has its reports of each item built from that item's
own PRR, independent of the others': the history is a post-processing of D independent
releases, and costs Σ_u ε_{T_u} ≤ D·ε∞ by basic composition (the accountant composes the
per-item events, :meth:`RapporClient.privacy_events`). This protects *which* items the device
held, for histories with the same pattern of repeats; *when* its item changed is protected only
by the IRR (memoization makes reports of one item alike), which is why the IRR exists (Section
3.2).

**Sampling.** f, p, q are realised exactly on the 2⁻³² grid — f rounded up, p and q to the
nearest grid point — with bits drawn 64 at a time (:func:`dpkit_ldp._biased_bits.biased_words`);
every ε above is computed from the realised values (within about 10⁻⁸ of the nominal ones), in
60-digit decimal arithmetic and rounded up (:func:`longitudinal_epsilon`).

**Decoding** (Section 4). With c_{j,i} the set bits i among cohort j's N_j reports,
t_{j,i} = (c_{j,i} − p*N_j)/(q* − p*) is unbiased for the number of cohort-j devices whose
filter has bit i set. Against candidate items s with filters b_{s,j}, E[t] = X·n with
X[(j,i), s] = b_{s,j,i}/m exactly (the cohort is uniform and independent of the item) when
every item held is a candidate; the least-squares fit n̂ = X⁺t (the paper's regression; its
Lasso screening of a large candidate list is not implemented) is then unbiased. Its variance
(derived here) has two parts: the reports' noise, Var c_{j,i} = T_{j,i}q*(1 − q*) +
(N_j − T_{j,i})p*(1 − p*), estimated unbiasedly from t; and the cohort draw, under which the
users of item s fall in the cohorts as Multinomial(n_s, 1/m), giving
Var n̂_s ⊇ Σ_{s′} n_{s′}·(1/m)Σ_j (X⁺_{s,j·}·b_{s′,j})² − n_s (n plugged in by n̂). The interval
is the normal one.

**On an accelerator.** ``randomize`` takes an accelerator's array of integer items (an integer
is the item of its decimal text, as on the host) and draws one collection there — cohort, PRR
and T IRRs — with the CPU's law and report format, the keyed hash computed on the device bit for
bit as the host computes it (:mod:`dpkit.tensors.rappor`); the estimator's ``accumulate``
counts such reports there, and either path's reports are decoded alike; ``log_probability``
scores reports against integer items there, the host's formula by the same code (a
``logaddexp`` per bit, then their sum: within a derived absolute bound of the host's value,
docs/tensors.md). The PRR is not kept on the device: :class:`RapporClient` is the device's
host-side memo, and its ``report`` refuses an accelerator's array.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    Estimate,
    Estimator,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    Real,
    Statistics,
    array_library,
    as_array,
    device_operands,
    parameter,
    rappor_log_operands,
    rappor_reports,
    resolve_rng,
    sketch_counts,
)
from dpkit_ldp._biased_bits import biased_words, uniform_words
from dpkit_ldp._memo import MemoizingDevice
from dpkit_ldp._numeric import float64_constants
from dpkit_ldp._reports import read_only_ints, report_words
from dpkit_ldp.items import ItemInput, as_items
from dpkit_ldp.keyed_hash import ItemWords, KeyedHashFamily, fresh_key, key_parameter

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "Rappor",
    "RapporClient",
    "RapporCounts",
    "RapporDecoder",
    "RapporEstimator",
    "longitudinal_epsilon",
]

_GRID = 32
_SCALE = 1 << _GRID
_MAX_OUTPUTS = 1 << 16
#: Entries of the (candidates × candidates × cohorts) array per block of the decoder's variance.
_VARIANCE_BLOCK = 1 << 22


def _grid(value: float, rounding: str) -> int:
    scaled = Fraction(value) * _SCALE
    return int(math.ceil(scaled) if rounding == "up" else round(scaled))


_CONTEXT = decimal.Context(prec=60, Emin=-(10**9), Emax=10**9)
#: A relative margin ≫ the ~10⁻⁵⁸ error of the 60-digit evaluation, on the upper side.
_MARGIN = decimal.Decimal("1e-45")


def longitudinal_epsilon(*, f: float, p: float, q: float, hashes: int, reports: float) -> float:
    """ε_T of ``reports`` = T reports of one memoized item (module docstring); T = inf gives ε∞.

    Evaluated in 60-digit decimal arithmetic from the exact values of the doubles and rounded
    up to a double (at both of its readings), so that the ε charged is never below the one the
    realised f, p, q give. In
    floating point the two terms ln g(t_T) ≈ T·ln(q/p) + … cancelled: at T = 10⁶ the result
    fell below the exact one by a relative 1.8·10⁻⁹. Here ln g(t) is formed from e^{−|ln t|}
    ≤ 1, so that nothing of size T·ln(q/p) is ever subtracted.
    """
    c = _CONTEXT
    pi1 = c.subtract(1, c.divide(decimal.Decimal(f), 2))
    pi0 = c.divide(decimal.Decimal(f), 2)
    if math.isinf(reports):
        if f == 0:
            return math.inf
        value = c.multiply(2 * hashes, c.subtract(c.ln(pi1), c.ln(pi0)))
        return _double_at_least(value)
    dp, dq = decimal.Decimal(p), decimal.Decimal(q)
    count = decimal.Decimal(reports)
    high = c.multiply(count, c.subtract(c.ln(dq), c.ln(dp)))  # ln t_T > 0
    low = c.multiply(count, c.subtract(c.ln(c.subtract(1, dq)), c.ln(c.subtract(1, dp))))

    def log_mixture(pi: decimal.Decimal, log_t: decimal.Decimal) -> decimal.Decimal:
        """ln(π·t + 1 − π), from e^{−|ln t|} (which may underflow to 0 harmlessly)."""
        if pi == 0:
            return decimal.Decimal(0)
        if pi == 1:
            return log_t
        if log_t >= 0:
            return c.add(log_t, c.ln(c.add(pi, c.multiply(c.subtract(1, pi), c.exp(-log_t)))))
        return c.ln(c.add(c.subtract(1, pi), c.multiply(pi, c.exp(log_t))))

    def log_g(log_t: decimal.Decimal) -> decimal.Decimal:
        return c.subtract(log_mixture(pi1, log_t), log_mixture(pi0, log_t))

    return _double_at_least(c.multiply(hashes, c.subtract(log_g(high), log_g(low))))


def _double_at_least(value: decimal.Decimal) -> float:
    """The smallest double not below ``value`` raised by the relative margin, at either of its
    readings: its exact value and its shortest decimal (what the ledger charges,
    :func:`dpkit.plugin.exact`, up to half an ulp below the double)."""
    bound = _CONTEXT.add(value, _CONTEXT.multiply(abs(value), _MARGIN))
    result = float(bound)
    while decimal.Decimal(result) < bound or decimal.Decimal(repr(result)) < bound:
        result = math.nextafter(result, math.inf)
    return result


@attrs.frozen
class Rappor(ItemInput, Mechanism):
    """RAPPOR over items: Bloom filter, memoized permanent RR, instantaneous RR per report.

    See the module docstring for the algorithm, ε₁, ε∞, the exact ε_T of T reports of one item
    (:attr:`privacy`), repeated collection (:meth:`client`) and decoding.
    """

    name: ClassVar[str] = "rappor"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "sketch"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    bits: int = parameter(
        Integer(low=1, high=1 << 16),
        doc="Bloom filter size k (bits per report)",
        default=128,
        typical=(2, 4),
    )
    hashes: int = parameter(
        Integer(low=1, high=64),
        doc="hash functions h per Bloom filter",
        default=2,
        typical=(1, 2),
    )
    cohorts: int = parameter(
        Integer(low=1, high=1 << 16), doc="number m of cohorts", default=64, typical=(1, 2)
    )
    f: float = parameter(
        Real(low=0.0, high=1.0, high_open=True),
        doc="probability f that the permanent RR replaces a bit by a fair coin",
        default=0.5,
        typical=(0.2, 0.8),
    )
    p: float = parameter(
        Real(low=0.0, high=1.0, low_open=True, high_open=True),
        doc="P[report bit = 1] where the permanent bit is 0",
        default=0.5,
        typical=(0.1, 0.45),
    )
    q: float = parameter(
        Real(low=0.0, high=1.0, low_open=True, high_open=True),
        doc="P[report bit = 1] where the permanent bit is 1 (> p)",
        default=0.75,
        typical=(0.55, 0.9),
    )
    reports: int = parameter(
        Integer(low=1, high=1 << 30),
        doc="reports per user of one item, built from one memoized permanent RR",
        default=1,
    )
    key: str | None = key_parameter()

    def __attrs_post_init__(self) -> None:
        if self.key is None:
            object.__setattr__(self, "key", fresh_key())
        f, p, q = self._grid
        if not 0 < p < q < _SCALE:
            raise InvalidParameter(
                "q", self.q, f"greater than p={self.p} (on the 2^-32 grid)", owner=self.name
            )
        if f >= _SCALE:
            raise InvalidParameter("f", self.f, "below 1 on the 2^-32 grid", owner=self.name)

    # -- parameters --------------------------------------------------------------------------

    @property
    def _grid(self) -> tuple[int, int, int]:
        return _grid(self.f, "up"), _grid(self.p, "nearest"), _grid(self.q, "nearest")

    @property
    def realised(self) -> tuple[float, float, float]:
        """(f, p, q) as realised (multiples of 2⁻³²)."""
        f, p, q = self._grid
        return f / _SCALE, p / _SCALE, q / _SCALE

    @property
    def family(self) -> KeyedHashFamily:
        assert self.key is not None  # set at construction
        return KeyedHashFamily(self.key)

    @property
    def words(self) -> int:
        """⌈k/64⌉: words of a report's bits."""
        return (self.bits + 63) // 64

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """(q*, p*): P[report bit = 1] where the Bloom bit is 1, and where it is 0."""
        f, p, q = self.realised
        shared = 0.5 * f * (p + q)
        return shared + (1.0 - f) * q, shared + (1.0 - f) * p

    def epsilon_after(self, reports: float) -> float:
        """ε_T of T reports of one item from one memoized PRR (module docstring)."""
        f, p, q = self.realised
        return longitudinal_epsilon(f=f, p=p, q=q, hashes=self.hashes, reports=reports)

    @property
    def epsilon_one(self) -> float:
        """ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*))): one report (Erlingsson et al. 2014, Theorem 2)."""
        return self.epsilon_after(1)

    @property
    def epsilon_infinity(self) -> float:
        """ε∞ = 2h·ln((1 − f/2)/(f/2)): any number of reports of one item (Theorem 1)."""
        return self.epsilon_after(math.inf)

    @property
    def privacy(self) -> PureDP:
        """ε_T for T = ``reports`` (ε₁ for one report)."""
        return PureDP(epsilon=self.epsilon_after(self.reports))

    # -- the client ---------------------------------------------------------------------------

    def bloom(self, items: Any, cohorts: Any, /) -> NDArray[np.uint64]:
        """The Bloom filters of ``items`` in ``cohorts`` (broadcast): rows of ⌈k/64⌉ words."""
        array = as_items(items, owner=self.name, field="items")
        group = np.asarray(cohorts, dtype=np.int64)
        shape = np.broadcast_shapes(array.shape, group.shape)
        flat = np.broadcast_to(array, shape).reshape(-1)
        cohort = np.broadcast_to(group, shape).reshape(-1).astype(np.uint64)
        words = ItemWords.from_items(flat)
        filters = np.zeros((flat.size, self.words), dtype=np.uint64)
        rows = np.arange(flat.size)
        for i in range(self.hashes):
            index = cohort * np.uint64(self.hashes) + np.uint64(i)
            position = self.family.bucket(words, index, self.bits)
            filters[rows, position >> 6] |= np.uint64(1) << (position & 63).astype(np.uint64)
        return filters.reshape((*shape, self.words))

    def filter_bits(self, items: Any, /) -> NDArray[np.int64]:
        """Every item's Bloom filter in every cohort, as 0/1: shape (items, m, k)."""
        array = as_items(items, owner=self.name, field="items").reshape(-1)
        words = self.bloom(array[:, None], np.arange(self.cohorts)[None, :])
        return _unpack(words, self.bits)

    def _tail(self, words: NDArray[np.uint64]) -> None:
        if self.bits % 64:
            words[..., -1] &= np.uint64((1 << (self.bits % 64)) - 1)

    def permanent(self, filters: NDArray[np.uint64], generator: Any) -> NDArray[np.uint64]:
        """B′: each bit replaced by a fair coin with probability f (exactly)."""
        f, _, _ = self._grid
        size = filters.size
        replace = biased_words(generator, size, f, _GRID).reshape(filters.shape)
        coin = uniform_words(generator, size).reshape(filters.shape)
        out = (replace & coin) | (~replace & filters)
        self._tail(out)
        return out

    def instantaneous(self, permanent: NDArray[np.uint64], generator: Any) -> NDArray[np.uint64]:
        """S: each bit 1 with probability q where B′ is 1, p where it is 0 (exactly)."""
        _, p, q = self._grid
        size = permanent.size
        on = biased_words(generator, size, q, _GRID).reshape(permanent.shape)
        off = biased_words(generator, size, p, _GRID).reshape(permanent.shape)
        out = (permanent & on) | (~permanent & off)
        self._tail(out)
        return out

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports of one collection from devices reporting for the first time.

        Each value gets a fresh cohort and PRR; with ``reports`` = T > 1 the T reports built
        from that PRR, shape ``values.shape + (T, 1 + ⌈k/64⌉)``, else ``values.shape +
        (1 + ⌈k/64⌉,)``. Devices that report repeatedly keep their memo in a
        :class:`RapporClient` (:meth:`client`). An accelerator's array of integer items is
        randomized there (module docstring).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return rappor_reports(
                library,
                values,
                key=self.family.key_bytes,
                cohorts=self.cohorts,
                hashes=self.hashes,
                bits=self.bits,
                grid=self._grid,
                repeats=self.reports,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        items = as_items(values, owner=self.name)
        n = items.size
        cohort = generator.integers(0, self.cohorts, size=n, dtype=np.int64)
        permanent = self.permanent(self.bloom(items.reshape(-1), cohort), generator)
        out = np.empty((n, self.reports, 1 + self.words), dtype=np.uint64)
        out[:, :, 0] = cohort[:, None]
        for t in range(self.reports):
            out[:, t, 1:] = self.instantaneous(permanent, generator)
        if self.reports == 1:
            return out[:, 0].reshape((*items.shape, 1 + self.words))
        return out.reshape((*items.shape, self.reports, 1 + self.words))

    def client(
        self, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> RapporClient:
        """A new device: its cohort drawn, an empty memo (:class:`RapporClient`)."""
        generator, _ = resolve_rng(rng, owner=self.name)
        cohort = int(generator.integers(0, self.cohorts, size=1, dtype=np.int64)[0])
        return RapporClient(mechanism=self, cohort=cohort)

    # -- the declared distribution ---------------------------------------------------------------

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[reports | x]: −ln m + Σ_i ln(π_{B_i}·q^{c_i}(1 − q)^{T−c_i} + (1 − π_{B_i})·
        p^{c_i}(1 − p)^{T−c_i}), c_i the reports with bit i set, B the item's filter in the
        reports' cohort (all T reports must name one cohort; −inf otherwise, and for a cohort
        ≥ m or bits set beyond k).

        An accelerator's array (either operand; a numpy or list operand beside it is copied
        there) is scored on its device: the counts c and the filter B there (the host's keyed
        hash of integer items, :func:`dpkit.plugin.rappor_log_operands`), then the host's
        formula by the same namespace-generic code (:meth:`_bit_log_probability`). Its per-bit
        ``logaddexp`` and its sum over the k bits are the device's, so the contract is a derived
        absolute bound on the difference from the host's value (docs/tensors.md), −inf exactly
        where the host's is. There the reports must be integers or booleans of shape (…, 1 +
        ⌈k/64⌉), or (…, T, 1 + ⌈k/64⌉) for T > 1 (the host casts floats and does not check
        those axes), the items integer items (``uint64`` refused; hash text or bytes on the
        host), refused (``outputs``, ``inputs``) before any value is read."""
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            library = operands.library
            ones, bloom, valid, shape = rappor_log_operands(
                library,
                operands.outputs,
                operands.inputs,
                key=self.family.key_bytes,
                cohorts=self.cohorts,
                hashes=self.hashes,
                bits=self.bits,
                repeats=self.reports,
                owner=self.name,
            )
            xp, device = library.xp, library.device
            rest = xp.astype(self.reports - ones, xp.float64)
            total = self._bit_log_probability(xp, device, xp.astype(ones, xp.float64), rest, bloom)
            (minus,) = float64_constants(xp, device, -math.inf)
            return xp.reshape(xp.where(valid, total, minus), shape)
        out = np.asarray(outputs, dtype=np.uint64)
        if self.reports == 1:
            out = out[..., None, :]
        items = as_items(inputs, owner=self.name, field="inputs")
        shape = np.broadcast_shapes(out.shape[:-2], items.shape)
        out = np.broadcast_to(out, (*shape, *out.shape[-2:])).reshape(
            -1, self.reports, out.shape[-1]
        )
        flat_items = np.broadcast_to(items, shape).reshape(-1)
        cohort = out[:, 0, 0]
        valid = (cohort < self.cohorts) & np.all(out[:, :, 0] == cohort[:, None], axis=1)
        safe = np.where(valid, cohort, 0).astype(np.int64)
        filters = self.bloom(flat_items, safe)
        if self.bits % 64:
            padding = ~np.uint64((1 << (self.bits % 64)) - 1)
            valid &= ~np.any(out[:, :, -1] & padding, axis=1)
        ones = _unpack(out[:, :, 1:], self.bits).sum(axis=1)  # (n, k)
        bloom = _unpack(filters[:, None, :], self.bits)[:, 0] == 1
        total = self._bit_log_probability(
            np, None, ones.astype(np.float64), (self.reports - ones).astype(np.float64), bloom
        )
        return np.where(valid, total, -np.inf).reshape(shape)

    def _bit_log_probability(self, xp: Any, device: Any, ones: Any, rest: Any, bloom: Any) -> Any:
        """Σ_i ln(π_{B_i}·q^{c_i}(1 − q)^{r_i} + (1 − π_{B_i})·p^{c_i}(1 − p)^{r_i}) − ln m per
        row, of float64 arrays (n, k) c = ``ones`` and r = ``rest`` = T − c and the boolean
        filters B = ``bloom`` of the namespace ``xp`` on ``device`` (numpy's on the host): one
        formula for both paths. Each term is ``logaddexp``(ln π_B + c·ln q + r·ln(1 − q),
        ln(1 − π_B) + c·ln p + r·ln(1 − p)), the logarithms of π₁ = 1 − f/2, π₀ = f/2 and their
        complements computed once on the host by numpy's ``log`` and ``log1p`` (so the host's
        numbers are those of its former elementwise logarithms, to the bit), then summed by
        the namespace's ``sum``."""
        f, p, q = self.realised
        with np.errstate(divide="ignore"):
            pi = np.array([1.0 - f / 2.0, f / 2.0])
            log_pi, log_not_pi = np.log(pi), np.log1p(-pi)
        on_1, on_0, off_1, off_0 = float64_constants(
            xp, device, *(float(v) for v in (*log_pi, *log_not_pi))
        )
        log_q = ones * math.log(q) + rest * math.log1p(-q)
        log_p = ones * math.log(p) + rest * math.log1p(-p)
        per_bit = xp.logaddexp(
            xp.where(bloom, on_1, on_0) + log_q, xp.where(bloom, off_1, off_0) + log_p
        )
        return xp.sum(per_bit, axis=-1) - math.log(self.cohorts)

    def output_space(self) -> NDArray[np.uint64]:
        """Every report (every T reports of one cohort), when m·2^{kT} ≤ 2¹⁶."""
        if self.bits * self.reports > 16 or self.cohorts << (self.bits * self.reports) > (
            _MAX_OUTPUTS
        ):
            raise NotImplementedError(f"{self.name}: m·2^(kT) outputs are too many to list")
        patterns = np.arange(1 << (self.bits * self.reports), dtype=np.uint64)
        grid = np.meshgrid(np.arange(self.cohorts, dtype=np.uint64), patterns, indexing="ij")
        cohort, pattern = grid[0].ravel(), grid[1].ravel()
        mask = np.uint64((1 << self.bits) - 1)
        out = np.empty((cohort.size, self.reports, 2), dtype=np.uint64)
        for t in range(self.reports):
            out[:, t, 0] = cohort
            out[:, t, 1] = (pattern >> np.uint64(t * self.bits)) & mask
        return out[:, 0] if self.reports == 1 else out

    def _check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        array = as_array(reports, owner=owner, field="reports")
        width = 1 + self.words
        if array.ndim != 2 or array.shape[-1] != width:
            hint = (
                "; give one collection's reports, reports[:, t]"
                if array.ndim == 3 and array.shape[-1] == width
                else ""
            )
            raise InvalidData(
                f"{owner}: reports must have shape (n, {width}): the cohort and the ⌈k/64⌉ "
                f"words of the bits, one report per device; got shape {array.shape}{hint}",
                field="reports",
            )
        rows = report_words(array, owner)
        if rows.size and int(rows[:, 0].max()) >= self.cohorts:
            raise InvalidData(
                f"{owner}: reports name the cohort {int(rows[:, 0].max())}, outside "
                f"0..{self.cohorts - 1}; were they produced with another number of cohorts?",
                field="reports",
            )
        if self.bits % 64 and rows.size:
            padding = ~np.uint64((1 << (self.bits % 64)) - 1)
            if np.any(rows[:, -1] & padding):
                raise InvalidData(
                    f"{owner}: reports set bits beyond bit {self.bits - 1}; they were not "
                    f"produced for k={self.bits}",
                    field="reports",
                )
        return rows

    def simulate(self, items: Any, counts: Any, /, *, rng: np.random.Generator) -> RapporCounts:
        """The :class:`RapporCounts` of one collection from ``counts[i]`` devices holding
        ``items[i]``, drawn exactly without materialising reports (experiments only).

        Devices spread over cohorts as Multinomial(n_s, 1/m); with T_{j,i} of cohort j's N_j
        devices having Bloom bit i set, c_{j,i} = Binomial(T_{j,i}, q*) +
        Binomial(N_j − T_{j,i}, p*), independently over bits and cohorts: exact.
        """
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter("rng", rng, "a numpy Generator (simulation is fast mode only)")
        array = as_items(items, owner=self.name, field="items").reshape(-1)
        n_items = np.asarray(counts, dtype=np.int64).reshape(-1)
        if n_items.shape != array.shape or np.any(n_items < 0):
            raise InvalidData("counts must be one count >= 0 per item", field="counts")
        per_cohort = rng.multinomial(n_items, np.full(self.cohorts, 1.0 / self.cohorts))
        filters = self.filter_bits(array)  # (items, m, k)
        set_bits = np.einsum("sj,sjk->jk", per_cohort, filters)
        totals = per_cohort.sum(axis=0)
        q_star, p_star = self.support_probabilities
        ones = rng.binomial(set_bits, q_star) + rng.binomial(totals[:, None] - set_bits, p_star)
        return RapporCounts(self.name, ones, totals, int(n_items.sum()))


def _unpack(words: NDArray[np.uint64], bits: int) -> NDArray[np.int64]:
    """Rows of little-endian words → their first ``bits`` bits, on a new last axis."""
    data = np.ascontiguousarray(words.astype("<u8", copy=False)).view(np.uint8)
    unpacked = np.unpackbits(data, axis=-1, count=bits, bitorder="little")
    return unpacked.astype(np.int64)


@attrs.frozen(eq=False)
class RapporCounts(Statistics):
    """Set bits per cohort and bit (``ones``, m × k), reports per cohort, and n: mergeable."""

    mechanism: str
    ones: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    cohorts: NDArray[np.int64] = attrs.field(converter=read_only_ints)
    n: int = attrs.field(converter=int)

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        if other.mechanism != self.mechanism or other.ones.shape != self.ones.shape:
            raise InvalidData(
                f"cannot merge RAPPOR counts of {other.mechanism!r} with shape "
                f"{other.ones.shape} into counts of shape {self.ones.shape}",
                field="statistics",
            )
        return type(self)(
            self.mechanism, self.ones + other.ones, self.cohorts + other.cohorts, self.n + other.n
        )


@attrs.frozen(eq=False)
class RapporDecoder:
    """The debiased bit counts t_{j,i} of one collection; :meth:`estimate` fits candidates."""

    mechanism: Rappor
    counts: RapporCounts

    @property
    def n(self) -> int:
        return self.counts.n

    @property
    def estimates(self) -> NDArray[np.float64]:
        """t_{j,i}: unbiased counts of devices per cohort with Bloom bit i set (m × k)."""
        q_star, p_star = self.mechanism.support_probabilities
        return (self.counts.ones - p_star * self.counts.cohorts[:, None]) / (q_star - p_star)

    def estimate(self, items: Any, /) -> Estimate:
        """Least-squares counts of the candidate ``items``, with variance and intervals (module
        docstring, "Decoding"). Candidates whose filters are linearly dependent (more
        candidates than m·k, or identical filters) are an :class:`~InvalidData`."""
        mech = self.mechanism
        labels = as_array(items, owner=f"{mech.name} decoder", field="items")
        if labels.ndim != 1 or labels.size == 0:
            raise InvalidData(
                f"{mech.name} decoder: items must be a non-empty 1-D list of candidates, got "
                f"shape {labels.shape}",
                field="items",
            )
        m, k = mech.cohorts, mech.bits
        filters = mech.filter_bits(labels).astype(np.float64)  # (s, m, k)
        design = filters.reshape(labels.size, m * k).T / m
        rank = np.linalg.matrix_rank(design)
        if rank < labels.size:
            raise InvalidData(
                f"{mech.name} decoder: the {labels.size} candidates' Bloom filters are linearly "
                f"dependent (rank {rank}); use fewer candidates, more bits or more cohorts",
                field="items",
            )
        pinv = np.linalg.pinv(design)  # (s, m·k)
        t = self.estimates
        counts = pinv @ t.reshape(-1)
        q_star, p_star = mech.support_probabilities
        gap = q_star - p_star
        set_bits = t.reshape(-1)
        reports = np.repeat(self.counts.cohorts, k).astype(np.float64)
        noise = (
            set_bits * q_star * (1.0 - q_star) + (reports - set_bits) * p_star * (1.0 - p_star)
        ) / gap**2
        variance = (pinv**2) @ noise
        variance += _cohort_variance(pinv.reshape(labels.size, m, k), filters, counts) - counts
        return Estimate(
            mech.name,
            "unbiased",
            self.n,
            counts,
            np.maximum(variance, 0.0),
            categories=tuple(labels.tolist()),
        )


def _cohort_variance(
    pinv: NDArray[np.float64], filters: NDArray[np.float64], counts: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Σ_{s′} n_{s′}·(1/m)·Σ_j (X⁺_{s,j·}·b_{s′,j})² for every s, in blocks of s."""
    size, m, _ = pinv.shape
    out = np.empty(size)
    step = max(1, _VARIANCE_BLOCK // max(1, size * m))
    for start in range(0, size, step):
        inner = np.einsum("sjk,tjk->stj", pinv[start : start + step], filters)
        out[start : start + step] = (inner**2).sum(axis=2) @ counts / m
    return out


class RapporEstimator(Estimator):
    """Reports of one collection → :class:`RapporCounts` → :class:`RapporDecoder`."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: Rappor

    def accumulate(self, reports: Any, /) -> RapporCounts:
        """Set bits per cohort and bit; an accelerator's reports are counted there."""
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        library = array_library(reports, owner=owner, field="reports")
        if library is not None:
            width = 1 + mech.words
            if len(reports.shape) != 2 or int(reports.shape[-1]) != width:
                raise InvalidData(
                    f"{owner}: reports must have shape (n, {width}): the cohort and the "
                    f"⌈k/64⌉ words of the bits, one report per device (reports[:, t] of one "
                    f"collection); got shape {tuple(reports.shape)}",
                    field="reports",
                )
            ones, per_cohort, n = sketch_counts(
                library,
                reports,
                hashes=mech.cohorts,
                width=mech.bits,
                owner=owner,
                row_name="cohort",
                layout="the cohort and the ⌈k/64⌉ words of the bits",
            )
            return RapporCounts(mech.name, ones, per_cohort, n)
        rows = mech._check_reports(reports, f"{mech.name} estimator")
        cohort = rows[:, 0].astype(np.intp)
        ones = np.zeros((mech.cohorts, mech.bits), dtype=np.int64)
        order = np.argsort(cohort, kind="stable")
        bounds = np.searchsorted(cohort[order], np.arange(mech.cohorts + 1))
        data = np.ascontiguousarray(rows[:, 1:].astype("<u8")).view(np.uint8)
        for j in np.flatnonzero(np.diff(bounds)):
            for lo in range(int(bounds[j]), int(bounds[j + 1]), 0xFFFF):
                chunk = order[lo : min(int(bounds[j + 1]), lo + 0xFFFF)]
                bits = np.unpackbits(data[chunk], axis=1, count=mech.bits, bitorder="little")
                ones[j] += np.add.reduce(bits, axis=0, dtype=np.uint16)
        per_cohort = np.bincount(cohort, minlength=mech.cohorts)
        return RapporCounts(mech.name, ones, per_cohort, rows.shape[0])

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> RapporDecoder:
        self.check_method(method)
        mech = self.mechanism
        if (
            not isinstance(statistics, RapporCounts)
            or statistics.mechanism != mech.name
            or statistics.ones.shape != (mech.cohorts, mech.bits)
        ):
            raise InvalidData(
                f"expected the RapporCounts of {mech.name!r} with shape "
                f"({mech.cohorts}, {mech.bits})",
                field="statistics",
            )
        return RapporDecoder(mech, statistics)


def _hex_words(words: NDArray[np.uint64]) -> list[str]:
    return [f"{int(w):016x}" for w in words]


@attrs.define
class RapporClient(MemoizingDevice):
    """One device's RAPPOR state: its cohort and, per item it reported, the memoized PRR B′
    and how many reports it has made from it.

    It belongs on the device (it holds the device's own items) and nowhere else; it is
    serialisable (:meth:`to_dict` / :meth:`from_dict`, JSON-compatible) so that the device can
    keep it across restarts. Losing it and starting afresh would draw a new PRR for the same
    item — a fresh ε∞ each time, the failure memoization exists to prevent.
    """

    mechanism: Rappor
    cohort: int
    memo: dict[bytes, NDArray[np.uint64]] = attrs.field(factory=dict)
    uses: dict[bytes, int] = attrs.field(factory=dict)

    def report(
        self, value: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> NDArray[np.uint64]:
        """One report of ``value`` (an item): the memoized PRR of this item (drawn on its
        first use), a fresh IRR. Shape (1 + ⌈k/64⌉,), like one row of ``randomize``."""
        mech = self.mechanism
        self.check_host_value(value)
        generator, _ = resolve_rng(rng, owner=f"{mech.name} client")
        item = bytes(as_items(np.array([value], dtype=object), owner=mech.name)[0])
        if item not in self.memo:
            filters = mech.bloom(np.array([item], dtype=object), self.cohort)
            self.memo[item] = mech.permanent(filters, generator)[0]
        self.uses[item] = self.uses.get(item, 0) + 1
        out = np.empty(1 + mech.words, dtype=np.uint64)
        out[0] = self.cohort
        out[1:] = mech.instantaneous(self.memo[item][None, :], generator)[0]
        return out

    def privacy_events(self) -> list[tuple[PureDP, int]]:
        """One event per item reported: ε_{T_u} for its T_u reports (module docstring)."""
        per_count: dict[int, int] = {}
        for uses in self.uses.values():
            per_count[uses] = per_count.get(uses, 0) + 1
        return [
            (PureDP(epsilon=self.mechanism.epsilon_after(uses)), items)
            for uses, items in sorted(per_count.items())
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible form: the mechanism's parameters (key included), the cohort, and
        per item (hexadecimal) its PRR words and its number of reports."""
        return {
            "mechanism": self.mechanism.name,
            "parameters": self.saved_parameters(),
            "cohort": self.cohort,
            "items": [
                {"item": item.hex(), "permanent": _hex_words(words), "reports": self.uses[item]}
                for item, words in self.memo.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RapporClient:
        """The inverse of :meth:`to_dict`."""
        try:
            mechanism = Rappor(**data["parameters"])
            memo = {
                bytes.fromhex(entry["item"]): np.array(
                    [int(w, 16) for w in entry["permanent"]], dtype=np.uint64
                )
                for entry in data["items"]
            }
            uses = {bytes.fromhex(entry["item"]): int(entry["reports"]) for entry in data["items"]}
            cohort = int(data["cohort"])
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidData(
                f"not a saved RAPPOR client ({type(error).__name__}: {error})", field="state"
            ) from None
        if not 0 <= cohort < mechanism.cohorts or any(
            w.shape != (mechanism.words,) for w in memo.values()
        ):
            raise InvalidData(
                "a saved RAPPOR client that does not fit its mechanism", field="state"
            )
        return cls(mechanism=mechanism, cohort=cohort, memo=memo, uses=uses)

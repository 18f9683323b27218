"""The prefix extending method (``pem``): heavy hitters of L-bit items without a candidate list.

Wang, Li & Jha 2021, "Locally Differentially Private Heavy Hitter Identification" (IEEE TDSC
18(2); arXiv:1708.06674), Section 5 (PEM).

**Rounds.** With k = ``top`` and η = ``step``, let γ = ⌈log₂ k⌉ and g = ⌈(L − γ)/η⌉; round t
(t = 0..g − 1) is about prefixes of s_t = min(L, γ + (t + 1)η) bits. Each device joins one
round, uniformly at random (:mod:`dpkit_ldp.heavy_hitters`), and reports the s_t-bit prefix of
its item through optimal local hashing at ε. The server takes as round 0's candidates all
2^{s_0} prefixes, keeps the k with the largest estimated counts, and gives round t + 1 the
k·2^{s_{t+1} − s_t} extensions of the kept prefixes; the k kept in the last round are the heavy
hitters, reported with that round's estimates. A device reports once: ε-LDP, whatever g.

**Local hashing on prefixes** (Wang, Blocki, Li & Jha 2017, Section 4.4). Prefixes have up to
64 bits, so the hash is the vector multiply-shift of Thorup 2015 ("High Speed Hashing for
Integers and Strings", arXiv:1504.06804: vector multiply-shift, after Dietzfelbinger 1996) on the two
32-bit halves x = (x_hi, x_lo): with a₁, a₂, b uniform 64-bit words,

    h(x) = ((a₁·x_lo + a₂·x_hi + b) mod 2⁶⁴) >> 32,

strongly universal onto 32 bits (the tests enumerate it on reduced words), then
H(x) = (h(x)·g′) >> 32 onto [g′], g′ = round(e^ε) + 1. The report is (t, a₁, a₂, b, y), y the
g′-ary randomized response of H(prefix): P[y = H] = e^ε/(e^ε + g′ − 1). By pairwise
independence a report supports another prefix with probability q* = p*·s + (1 − p*)(1 − s)/(g′ − 1),
s = Σ_z π_z² (as for ``olh``), and Theorem 2 of Wang et al. 2017 gives the unbiased round count
ĉ = (C − N_t q*)/(p* − q*) with Var = N_t q*(1 − q*)/(p* − q*)² + n^{(t)}(1 − p* − q*)/(p* − q*).

**Estimates.** n̂ = (n/N_t)·ĉ with the variance of :mod:`dpkit_ldp.heavy_hitters` (the round's
devices are a random subset). The last round both chooses the heavy hitters and estimates them,
so the reported counts of the chosen items are biased upwards near the cut (an item chosen
because its noise was high); :class:`~dpkit_ldp.heavy_hitters.HeavyHitters` says so. For
unbiased counts of found items, query them with an independent frequency oracle
(``treehist`` spends part of ε on one).

**Decoding cost.** A report of round t is tested against each of that round's candidates:
C_0 = 2^{s_0}, then C_t = k·2^{s_t − s_{t−1}} (:attr:`PrefixExtendingMethod.candidates_per_round`),
at most 2^{γ+η} ≤ 2²⁰ each (the construction's bound on round 0), so the server's work is
Σ_t N_t·C_t tests — linear in n, and fixed per report by the parameters. A test costs a few
nanoseconds (about 1.7·10⁸ per CPU second measured on one core): the default (k = 20, η = 4,
C ≤ 512) decodes 10⁶ reports in seconds, but at γ + η = 20 (k = 4096 with η = 8, or k = 16
with η = 16) every report meets about 10⁶ candidates, some 6 ms of CPU each: 10⁶ reports take
about two hours. The cost depends on n, which the parameters do not fix, so such parameters
are not refused: they suit small populations; choose them knowing the cost.

**Sampling.** The lie is ``word < T``, T = :func:`lie_threshold` (ε, g′) (rounded up:
the realised ε never exceeds ε), the other value exactly uniform over the g′ − 1 others.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    EPSILON,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    array_library,
    as_array,
    device_operands,
    lie_threshold,
    parameter,
    prefix_log_probability,
    prefix_reports,
    resolve_rng,
)
from dpkit_ldp._biased_bits import uniform_words
from dpkit_ldp._reports import report_words
from dpkit_ldp.heavy_hitters import (
    BitItemInput,
    GroupedReportsEstimator,
    HeavyHitters,
    as_bit_items,
    hypergeometric_variance,
    prefix_search,
)
from dpkit_ldp.local_hashing import OptimalLocalHashing, collision_sum

__all__ = ["PrefixExtendingEstimator", "PrefixExtendingMethod", "vector_multiply_shift"]

_U = np.uint64
#: (report, candidate) pairs per block of the support counter.
_PAIRS = 1 << 21
_MAX_FIRST = 20
_MAX_TOP = 1 << 12


def vector_multiply_shift(
    a1: Any, a2: Any, b: Any, x: Any, g: int, *, word_bits: int = 64
) -> NDArray[np.uint64]:
    """H(x) = ((((a₁·x_lo + a₂·x_hi + b) mod 2^w) >> w/2)·g) >> w/2 (broadcasting), with x_lo,
    x_hi the low and high w/2 bits of x; w < 64 (for exhaustive tests) masks to w bits."""
    half = _U(word_bits // 2)
    mask = _U((1 << (word_bits // 2)) - 1)
    value = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = np.multiply(np.asarray(a1, dtype=np.uint64), value & mask)
        z += np.multiply(np.asarray(a2, dtype=np.uint64), value >> half)
        z += np.asarray(b, dtype=np.uint64)
    if word_bits < 64:
        z &= _U((1 << word_bits) - 1)
    z >>= half
    z *= _U(g)
    z >>= half
    out: NDArray[np.uint64] = z
    return out


@attrs.frozen
class PrefixExtendingMethod(BitItemInput, Mechanism):
    """PEM over L-bit items: one round per device, local hashing of its prefix (module
    docstring)."""

    name: ClassVar[str] = "pem"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "heavy_hitters"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per device", typical=(0.5, 6.0))
    bits: int = parameter(
        Integer(low=2, high=64), doc="item length L in bits", default=32, typical=(3, 6)
    )
    top: int = parameter(
        Integer(low=1, high=_MAX_TOP),
        doc="number k of heavy hitters sought",
        default=20,
        typical=(1, 2),
    )
    step: int = parameter(
        Integer(low=1, high=16), doc="bits η added per round", default=4, typical=(1, 2)
    )

    def __attrs_post_init__(self) -> None:
        if self.start >= self.bits:
            raise InvalidParameter(
                "top", self.top, f"at most 2^{self.bits - 1} for bits={self.bits}", owner=self.name
            )
        if self.prefix_bits[0] > _MAX_FIRST:
            raise InvalidParameter(
                "step",
                self.step,
                f"small enough that round 0 has at most 2^{_MAX_FIRST} candidates "
                f"(⌈log2 top⌉ + step ≤ {_MAX_FIRST})",
                owner=self.name,
            )

    @classmethod
    def parameter_rules(cls) -> list[dict[str, Any]]:
        """The checks of ``__attrs_post_init__`` as JSON Schema rules on the parameters (so a
        spec's schema admits exactly what constructs): ``top`` ≤ 2^(bits − 1) (γ < L), and,
        where round 0 could exceed 2^20 candidates (L > 20, the default 32 included),
        ``top`` ≤ 2^(20 − step) (γ + η ≤ 20); a ``top`` left at its default must fit too."""
        defaults = cls(epsilon=1.0)  # bits and top as a spec that omits them gets them
        bits_default, top_default = defaults.bits, defaults.top

        def cap(given: str, value: int, most: int, why: str) -> dict[str, Any]:
            bound = {"maximum": most, "errorMessage": f"at most {most} for {given}={value} ({why})"}
            then: dict[str, Any] = {"properties": {"top": bound}}
            if top_default > most:
                then["required"] = ["top"]
                then["errorMessage"] = (
                    f"{given}={value} needs top ≤ {most} (the default is {top_default})"
                )
            return {
                "if": {"required": [given], "properties": {given: {"const": value}}},
                "then": then,
            }

        rules = [
            cap("bits", b, 1 << (b - 1), "⌈log2 top⌉ < bits")
            for b in range(2, 64)
            if 1 << (b - 1) < _MAX_TOP
        ]
        steps = [
            cap("step", s, 1 << (_MAX_FIRST - s), f"⌈log2 top⌉ + step ≤ {_MAX_FIRST}")
            for s in range(1, 17)
            if 1 << (_MAX_FIRST - s) < _MAX_TOP
        ]
        short = {"required": ["bits"], "properties": {"bits": {"maximum": _MAX_FIRST}}}
        assert bits_default > _MAX_FIRST  # without bits, round 0 is γ + η bits
        rules.append({"if": short, "else": {"allOf": steps}})
        return rules

    @property
    def start(self) -> int:
        """γ = ⌈log₂ k⌉."""
        return (self.top - 1).bit_length()

    @property
    def groups(self) -> int:
        """g = ⌈(L − γ)/η⌉ rounds."""
        return -(-(self.bits - self.start) // self.step)

    @property
    def prefix_bits(self) -> tuple[int, ...]:
        """s_t = min(L, γ + (t + 1)η) for each round t."""
        return tuple(min(self.bits, self.start + (t + 1) * self.step) for t in range(self.groups))

    @property
    def candidates_per_round(self) -> tuple[int, ...]:
        """C_t, the candidates each report of round t is tested against: 2^{s_0}, then
        k·2^{s_t − s_{t−1}} (round 0 has 2^{s_0} ≥ 2k prefixes, so k are kept every round)."""
        s = self.prefix_bits
        return (1 << s[0], *(self.top << (s[t] - s[t - 1]) for t in range(1, len(s))))

    @property
    def range(self) -> int:
        """g′ = round(e^ε) + 1."""
        return OptimalLocalHashing.optimal_range(self.epsilon)

    @property
    def _threshold(self) -> int:
        return lie_threshold(self.epsilon, self.range)

    @property
    def keep_probability(self) -> float:
        """The realised p* = 1 − T/2⁶⁴."""
        return 1.0 - self._threshold / 2.0**64

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """(p*, q*) of one round's reports."""
        p, g = self.keep_probability, self.range
        s = collision_sum(g)
        return p, p * s + (1.0 - p) * (1.0 - s) / (g - 1)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    @classmethod
    def search_deviation(cls, *, epsilon: float, n: int, bits: int = 32, top: int = 20) -> float:
        """The standard deviation of a round's count of a rare prefix, scaled to n devices:
        √(g·n·q*(1 − q*))/(p* − q*) with N = n/g devices per round (module docstring), at the
        default step — what the search must beat to find an item (``dpkit advise --telemetry``)."""
        mech = cls(epsilon=epsilon, bits=bits, top=top)
        p, q = mech.support_probabilities
        return math.sqrt(mech.groups * n * q * (1.0 - q)) / (p - q)

    def _prefixes(self, items: NDArray[np.uint64], group: NDArray[np.int64]) -> NDArray[np.uint64]:
        lengths = np.asarray(self.prefix_bits, dtype=np.uint64)[group]
        shifted: NDArray[np.uint64] = items >> (_U(self.bits) - lengths)
        return shifted

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports (t, a₁, a₂, b, y) as ``uint64``, shape ``values.shape + (5,)``. An
        accelerator's array of integer items is randomized there with the same hash and law
        (:mod:`dpkit.tensors.prefixes`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return prefix_reports(
                library,
                values,
                bits=self.bits,
                prefix_bits=self.prefix_bits,
                g=self.range,
                lie_threshold64=self._threshold,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        items = as_bit_items(values, self.bits, owner=self.name)
        flat = items.reshape(-1)
        n = flat.size
        group = generator.integers(0, self.groups, size=n, dtype=np.int64)
        a1, a2, b = (uniform_words(generator, n) for _ in range(3))
        g = self.range
        y = vector_multiply_shift(a1, a2, b, self._prefixes(flat, group), g)
        lie = uniform_words(generator, n) < _U(self._threshold)
        other = generator.integers(0, g - 1, size=n, dtype=np.uint64)
        other += other >= y
        np.copyto(y, other, where=lie)
        reports = np.stack([group.astype(np.uint64), a1, a2, b, y], axis=1)
        return reports.reshape((*items.shape, 5))

    def _log_terms(self) -> tuple[float, float]:
        """(base + ln p*, base + ln((1 − p*)/(g′ − 1))), base = −ln g − 192 ln 2: the two
        values a report's log-probability takes (computed once on the host, with ``math``)."""
        keep = self.keep_probability
        log_keep, log_other = math.log(keep), math.log1p(-keep) - math.log(self.range - 1)
        base = -math.log(self.groups) - 192.0 * math.log(2.0)
        return base + log_keep, base + log_other

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[(t, a₁, a₂, b, y) | x] = −ln g − 192 ln 2 + ln P[y | H(prefix_t(x))] (−inf for
        a round t ≥ g or a y ≥ g′).

        An accelerator's array (either operand; a numpy or list operand beside it is copied
        there) is scored on its device, the host's numbers to the bit: the same hash of the
        same prefix (:func:`dpkit.plugin.prefix_log_probability`) selects between the same two
        constants, computed on the host. There the reports must be integers or booleans with
        the report's last axis 5 (the host casts floats and broadcasts that axis), the items
        integer L-bit items (text and bytes are encoded on the host), refused (``outputs``,
        ``inputs``) from the dtypes and shapes before any value is read; an item outside
        [0, 2ᴸ) is refused as on the host, without quoting it."""
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return prefix_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                bits=self.bits,
                prefix_bits=self.prefix_bits,
                g=self.range,
                log_terms=self._log_terms(),
                owner=self.name,
            )
        out = np.asarray(outputs, dtype=np.uint64)
        x = as_bit_items(inputs, self.bits, owner=self.name, field="inputs")
        shape = np.broadcast_shapes(out.shape[:-1], x.shape)
        out = np.broadcast_to(out, (*shape, 5)).reshape(-1, 5)
        flat = np.broadcast_to(x, shape).reshape(-1)
        valid = (out[:, 0] < self.groups) & (out[:, 4] < self.range)
        group = np.where(valid, out[:, 0], 0).astype(np.int64)
        hashed = vector_multiply_shift(
            out[:, 1], out[:, 2], out[:, 3], self._prefixes(flat, group), self.range
        )
        kept, other = self._log_terms()
        log_p = np.where(hashed == out[:, 4], kept, other)
        return np.where(valid, log_p, -np.inf).reshape(shape)

    def check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        array = as_array(reports, owner=owner, field="reports")
        if array.ndim != 2 or array.shape[1] != 5:
            raise InvalidData(
                f"{owner}: reports must have shape (n, 5): the round t, the hash seeds a₁, a₂, "
                f"b and the perturbed hash y of each device; got shape {array.shape}",
                field="reports",
            )
        rows = report_words(array, owner)
        if rows.size and (
            int(rows[:, 0].max()) >= self.groups or int(rows[:, 4].max()) >= self.range
        ):
            raise InvalidData(
                f"{owner}: reports name a round outside 0..{self.groups - 1} or a hash value "
                f"outside 0..{self.range - 1}; were they produced with other parameters?",
                field="reports",
            )
        return rows

    def support_counts(
        self, rows: NDArray[np.uint64], candidates: NDArray[np.uint64]
    ) -> NDArray[np.int64]:
        """C(c) = #{reports with H_{a₁,a₂,b}(c) = y} for every candidate prefix c.

        H(c) = y ⟺ (z − c_y·2³²) mod 2⁶⁴ < (c_{y+1} − c_y)·2³² with c_y = ⌈y·2³²/g′⌉ and
        z = a₁c_lo + a₂c_hi + b: one subtraction folded into b and one compare per pair, over
        blocks of (report, candidate) pairs.
        """
        g = self.range
        edges = [-(-(z << 32) // g) for z in range(g + 1)]
        low = np.array([e << 32 for e in edges[:-1]], dtype=np.uint64)
        width = np.array([(e1 - e0) << 32 for e0, e1 in itertools.pairwise(edges)], dtype=np.uint64)
        y = rows[:, 4].astype(np.intp)
        shifted = rows[:, 3] - low[y]
        bound = width[y]
        lo = candidates & _U(0xFFFFFFFF)
        hi = candidates >> _U(32)
        counts = np.zeros(candidates.size, dtype=np.int64)
        step = max(1, _PAIRS // max(1, candidates.size))
        for start in range(0, rows.shape[0], step):
            stop = min(rows.shape[0], start + step)
            z = rows[start:stop, 1, None] * lo[None, :]
            z += rows[start:stop, 2, None] * hi[None, :]
            z += shifted[start:stop, None]
            counts += np.count_nonzero(z < bound[start:stop, None], axis=0)
        return counts


class PrefixExtendingEstimator(GroupedReportsEstimator):
    """Reports → :class:`~dpkit_ldp.heavy_hitters.GroupedReports` → the rounds of PEM →
    :class:`~dpkit_ldp.heavy_hitters.HeavyHitters`."""

    mechanism: PrefixExtendingMethod

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> HeavyHitters:
        mech = self.mechanism
        grouped = self.grouped(statistics, method)
        reports, n = grouped.reports, grouped.n
        p, q = mech.support_probabilities

        def score(rows: NDArray[np.uint64], candidates: NDArray[np.uint64]) -> NDArray[Any]:
            counts = mech.support_counts(rows, candidates)
            estimates: NDArray[np.float64] = (counts - rows.shape[0] * q) / (p - q)
            return estimates

        candidates, estimates, rounds = prefix_search(reports, mech.prefix_bits, mech.top, score)
        devices = rounds[-1].devices
        a = devices * q * (1.0 - q) / (p - q) ** 2
        b = (1.0 - p - q) / (p - q)
        if devices:
            scale = n / devices
            found = scale * estimates
            variance = scale**2 * (
                np.maximum(a + b * estimates, 0.0) + hypergeometric_variance(found, n, devices)
            )
        else:
            found, variance = np.zeros_like(estimates), np.full_like(estimates, np.inf)
        return HeavyHitters(
            mech.name,
            mech.bits,
            n,
            candidates,
            found,
            variance,
            rounds=rounds,
            unbiased=False,
            note=(
                "the counts are the last round's estimates of the items it chose: biased "
                "upwards near the cut (selection on the same reports)"
            ),
        )

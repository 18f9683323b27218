"""TreeHist (``treehist``): heavy hitters of L-bit items by a prefix tree, with unbiased counts.

Bassily, Nissim, Stemmer & Thakurta 2017, "Practical Locally Private Heavy Hitters" (NeurIPS;
JMLR 21, 2020), Section 3 (TreeHist): a prefix tree searched level by level with a frequency
oracle, and a second frequency oracle that estimates the counts of the items found.

**Client.** ε is split: ε_tree = ``split``·ε for the tree, ε_final = ε − ε_tree for the
estimate (rounded down so that the two parts sum to at most ε exactly). Each device joins one level t of the tree, uniformly at random
(:mod:`dpkit_ldp.heavy_hitters`); level t is about prefixes of s_t = min(L, (t + 1)γ) bits
(γ = ``step``). It reports its s_t-bit prefix v through the Hadamard response of the paper's
frequency oracle: r uniform on [2^{s_t}], w = (−1)^{popcount(r & v)} = H[r, v], flipped with
probability 1/(e^{ε_tree} + 1) — and, the same way at ε_final, its whole item. A report is the
row (t, r, y, r′, y′) of ``uint64``, y = 1 for +1. The two parts compose: ε_tree + ε_final = ε
(:attr:`TreeHist.privacy` is their :class:`CompositeDP`).

**Frequency oracle** (derived from the definition): with c = 1/(1 − 2φ) (φ the realised flip
probability), each report contributes Z = c·y·H[r, v′] to candidate v′, and
E_r[H[r, v]H[r, v′]] = 1{v = v′}, so Σ Z over N reports is unbiased for the count of v′ among
them, exactly, for any domain size, with Var = N·c² − n_{v′} (Z = ±c, E Z = 1{v = v′}).

**Search and estimates.** Level 0's candidates are all 2^γ prefixes; each level keeps the k
(``top``) largest estimated counts and passes their 2^γ extensions to the next. The k kept at
the last level are the heavy hitters. Their counts come from the ε_final reports of all n
devices, which are independent of the search given the data: n̂(x) = c′·Σ_i y′_i H[r′_i, x] is
unbiased for n_x whichever items were chosen, with the exact variance n·c′² − n_x (plugged in
with n̂) and a normal interval.

**Sampling.** The flips are ``word < T``, T = :func:`lie_threshold` (ε_part, 2) (rounded
up: the realised ε of each part never exceeds it); r is a uniform word masked to s_t bits.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    EPSILON,
    CompositeDP,
    Integer,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    Real,
    array_library,
    as_array,
    device_operands,
    lie_threshold,
    parameter,
    resolve_rng,
    tree_log_probability,
    tree_reports,
)
from dpkit_ldp._biased_bits import uniform_words
from dpkit_ldp._reports import report_words
from dpkit_ldp.hadamard import _odd
from dpkit_ldp.heavy_hitters import (
    BitItemInput,
    GroupedReportsEstimator,
    HeavyHitters,
    as_bit_items,
    prefix_search,
)

__all__ = ["TreeHist", "TreeHistEstimator"]

_U = np.uint64
_PAIRS = 1 << 21
_MAX_OUTPUTS = 1 << 16


def _low_bits(bits: Any) -> NDArray[np.uint64]:
    """2^s − 1 for s ≥ 1 bits (s = 64 included)."""
    mask: NDArray[np.uint64] = ~_U(0) >> (_U(64) - np.asarray(bits, dtype=np.uint64))
    return mask


@attrs.frozen
class TreeHist(BitItemInput, Mechanism):
    """TreeHist over L-bit items (module docstring)."""

    name: ClassVar[str] = "treehist"
    kind: ClassVar[Literal["local", "central"]] = "local"
    statistic: ClassVar[str] = "heavy_hitters"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per device", typical=(0.5, 6.0))
    bits: int = parameter(
        Integer(low=1, high=64), doc="item length L in bits", default=32, typical=(2, 3)
    )
    top: int = parameter(
        Integer(low=1, high=1 << 12),
        doc="prefixes k kept per level (heavy hitters sought)",
        default=20,
        typical=(1, 2),
    )
    step: int = parameter(
        Integer(low=1, high=16), doc="bits γ added per level", default=2, typical=(1, 1)
    )
    split: float = parameter(
        Real(low=0.0, high=1.0, low_open=True, high_open=True),
        doc="share of ε spent on the tree (the rest estimates the counts)",
        default=0.5,
    )

    @property
    def levels(self) -> int:
        return -(-self.bits // self.step)

    @property
    def prefix_bits(self) -> tuple[int, ...]:
        return tuple(min(self.bits, (t + 1) * self.step) for t in range(self.levels))

    @property
    def epsilon_tree(self) -> float:
        return self.epsilon * self.split

    @property
    def epsilon_final(self) -> float:
        """ε − ε_tree, rounded down to the largest double with ε_tree + ε_final ≤ ε exactly.

        The float difference is rounded to the nearest double, and the parts then summed
        (basic composition, Dwork & Roth 2014, Theorem 3.16) to more than the declared ε for
        about one (ε, split) in six, and the thresholds' realised ε too for one in ten: secure
        TreeHist at ε = 1, split = 0.1 (parts 0.1 and 0.9) realised 1 + 2.8·10⁻¹⁷.
        """
        final = self.epsilon - self.epsilon_tree
        while final > 0 and Fraction(self.epsilon_tree) + Fraction(final) > Fraction(self.epsilon):
            final = math.nextafter(final, 0.0)
        return final

    def __attrs_post_init__(self) -> None:
        for part, value in (("split", self.epsilon_tree), ("split", self.epsilon_final)):
            if not value >= 1e-12:
                raise InvalidParameter(
                    part,
                    self.split,
                    "such that both parts of ε are at least 1e-12",
                    owner=self.name,
                )

    @property
    def privacy(self) -> CompositeDP:
        """ε_tree for the tree report and ε_final for the estimation report."""
        return CompositeDP((PureDP(epsilon=self.epsilon_tree), PureDP(epsilon=self.epsilon_final)))

    @classmethod
    def search_deviation(cls, *, epsilon: float, n: int, bits: int = 32, top: int = 20) -> float:
        """The standard deviation of a level's count of a rare prefix, scaled to n devices:
        c·√(levels·n) (module docstring), at the default step and split — what the search
        must beat to find an item (``dpkit advise --telemetry``)."""
        mech = cls(epsilon=epsilon, bits=bits, top=top)
        return mech.gains()[0] * math.sqrt(mech.levels * n)

    def _threshold(self, epsilon: float) -> int:
        return lie_threshold(epsilon, 2)

    def gains(self) -> tuple[float, float]:
        """(c, c′) = 1/(1 − 2φ) for the tree and the estimation reports (realised φ)."""
        return tuple(  # type: ignore[return-value]
            1.0 / (1.0 - 2.0 * self._threshold(e) / 2.0**64)
            for e in (self.epsilon_tree, self.epsilon_final)
        )

    def _respond(
        self, generator: Any, values: NDArray[np.uint64], bits: NDArray[np.uint64], epsilon: float
    ) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
        """(r, y): r uniform on [2^bits], y = 1{H[r, v] = +1} flipped with probability φ."""
        r = uniform_words(generator, values.size) & _low_bits(bits)
        flip = uniform_words(generator, values.size) < _U(self._threshold(epsilon))
        y = ((~_odd(r & values)) != flip).astype(np.uint64)
        return r, y

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """Reports (t, r, y, r′, y′) as ``uint64``, shape ``values.shape + (5,)``. An
        accelerator's array of integer items is randomized there with the same law
        (:mod:`dpkit.tensors.prefix_tree`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return tree_reports(
                library,
                values,
                bits=self.bits,
                prefix_bits=self.prefix_bits,
                tree_threshold64=self._threshold(self.epsilon_tree),
                final_threshold64=self._threshold(self.epsilon_final),
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        items = as_bit_items(values, self.bits, owner=self.name)
        flat = items.reshape(-1)
        n = flat.size
        level = generator.integers(0, self.levels, size=n, dtype=np.int64)
        lengths = np.asarray(self.prefix_bits, dtype=np.uint64)[level]
        prefix = flat >> (_U(self.bits) - lengths)
        r, y = self._respond(generator, prefix, lengths, self.epsilon_tree)
        full = np.full(n, self.bits, dtype=np.uint64)
        r2, y2 = self._respond(generator, flat, full, self.epsilon_final)
        reports = np.stack([level.astype(np.uint64), r, y, r2, y2], axis=1)
        return reports.reshape((*items.shape, 5))

    def _log_terms(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(ln(1 − φ), ln φ) of the tree part and of the final part (realised φ), with ``math``."""
        terms = []
        for epsilon in (self.epsilon_tree, self.epsilon_final):
            phi = self._threshold(epsilon) / 2.0**64
            terms.append((math.log1p(-phi), math.log(phi)))
        return terms[0], terms[1]

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[(t, r, y, r′, y′) | x] = −ln(levels) − s_t ln 2 − L ln 2 + ln P[y | H[r, v_t]]
        + ln P[y′ | H[r′, x]], added in that order (−inf for a t ≥ levels, a y or y′ ≥ 2, an
        r ≥ 2^{s_t} or an r′ ≥ 2ᴸ).

        An accelerator's array (either operand; a numpy or list operand beside it is copied
        there) is scored on its device, the host's numbers to the bit: the same parities of the
        same prefixes select the same constants, computed on the host, added in the host's
        order (:func:`dpkit.plugin.tree_log_probability`). There the reports must be integers
        or booleans with the report's last axis 5 (the host casts floats and broadcasts that
        axis), the items integer L-bit items (text and bytes are encoded on the host), refused
        (``outputs``, ``inputs``) from the dtypes and shapes before any value is read; an item
        outside [0, 2ᴸ) is refused as on the host, without quoting it."""
        log2 = math.log(2.0)
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return tree_log_probability(
                operands.library,
                operands.outputs,
                operands.inputs,
                bits=self.bits,
                prefix_bits=self.prefix_bits,
                bases=tuple(
                    -math.log(self.levels) - (float(s) + self.bits) * log2 for s in self.prefix_bits
                ),
                log_terms=self._log_terms(),
                owner=self.name,
            )
        out = np.asarray(outputs, dtype=np.uint64)
        x = as_bit_items(inputs, self.bits, owner=self.name, field="inputs")
        shape = np.broadcast_shapes(out.shape[:-1], x.shape)
        out = np.broadcast_to(out, (*shape, 5)).reshape(-1, 5)
        flat = np.broadcast_to(x, shape).reshape(-1)
        valid = (out[:, 0] < self.levels) & (out[:, 2] < 2) & (out[:, 4] < 2)
        level = np.where(valid, out[:, 0], 0).astype(np.int64)
        lengths = np.asarray(self.prefix_bits, dtype=np.uint64)[level]
        valid &= (out[:, 1] & ~_low_bits(lengths)) == 0
        valid &= (out[:, 3] & ~_low_bits(np.full(flat.size, self.bits))) == 0
        prefix = flat >> (_U(self.bits) - lengths)
        total = -math.log(self.levels) - (lengths.astype(np.float64) + self.bits) * log2
        for r, y, value, (agree_term, other_term) in (
            (out[:, 1], out[:, 2], prefix, self._log_terms()[0]),
            (out[:, 3], out[:, 4], flat, self._log_terms()[1]),
        ):
            agree = (~_odd(r & value)) == (y == 1)
            total = total + np.where(agree, agree_term, other_term)
        return np.where(valid, total, -np.inf).reshape(shape)

    def output_space(self) -> NDArray[np.uint64]:
        """Every report, when there are at most 2¹⁶ of them (tiny L only)."""
        per_level = [4 << (s + self.bits) for s in self.prefix_bits]
        if sum(per_level) > _MAX_OUTPUTS:
            raise NotImplementedError(f"{self.name}: too many outputs to list")
        rows = []
        for t, s in enumerate(self.prefix_bits):
            grid = np.meshgrid(
                np.arange(1 << s),
                np.arange(2),
                np.arange(1 << self.bits),
                np.arange(2),
                indexing="ij",
            )
            block = np.stack([np.full(grid[0].size, t)] + [g.ravel() for g in grid], axis=1)
            rows.append(block)
        return np.concatenate(rows).astype(np.uint64)

    def check_reports(self, reports: Any, owner: str) -> NDArray[np.uint64]:
        array = as_array(reports, owner=owner, field="reports")
        if array.ndim != 2 or array.shape[1] != 5:
            raise InvalidData(
                f"{owner}: reports must have shape (n, 5): the level t, r, y, r′, y′ of each "
                f"device; got shape {array.shape}",
                field="reports",
            )
        rows = report_words(array, owner)
        if rows.size and (
            int(rows[:, 0].max()) >= self.levels
            or int(rows[:, 2].max()) > 1
            or int(rows[:, 4].max()) > 1
        ):
            raise InvalidData(
                f"{owner}: reports name a level outside 0..{self.levels - 1} or a bit other "
                "than 0/1; were they produced with other parameters?",
                field="reports",
            )
        return rows

    @staticmethod
    def signed_sums(
        r: NDArray[np.uint64], y: NDArray[np.uint64], candidates: NDArray[np.uint64]
    ) -> NDArray[np.float64]:
        """Σ_i (2y_i − 1)·H[r_i, c] for every candidate c, over blocks of pairs."""
        sign = 2.0 * y.astype(np.float64) - 1.0
        out = np.zeros(candidates.size)
        step = max(1, _PAIRS // max(1, candidates.size))
        for start in range(0, r.size, step):
            stop = min(r.size, start + step)
            odd = _odd(r[start:stop, None] & candidates[None, :])
            out += sign[start:stop] @ (1.0 - 2.0 * odd)
        return out


class TreeHistEstimator(GroupedReportsEstimator):
    """Reports → :class:`~dpkit_ldp.heavy_hitters.GroupedReports` → the tree search →
    :class:`~dpkit_ldp.heavy_hitters.HeavyHitters` with unbiased counts."""

    mechanism: TreeHist

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> HeavyHitters:
        mech = self.mechanism
        grouped = self.grouped(statistics, method)
        reports, n = grouped.reports, grouped.n
        gain, final_gain = mech.gains()

        def score(rows: NDArray[np.uint64], candidates: NDArray[np.uint64]) -> NDArray[Any]:
            return gain * mech.signed_sums(rows[:, 1], rows[:, 2], candidates)

        candidates, _, rounds = prefix_search(reports, mech.prefix_bits, mech.top, score)
        counts = final_gain * mech.signed_sums(reports[:, 3], reports[:, 4], candidates)
        variance = np.maximum(n * final_gain**2 - counts, 0.0)
        return HeavyHitters(mech.name, mech.bits, n, candidates, counts, variance, rounds=rounds)

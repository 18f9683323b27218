"""Exact alias tables for the digits of geometric variables (fixed work, no rejection).

A *digit law* is P[D = d] ∝ e^(−y·d) on d ∈ {0, …, K − 1}, K = 2^b, for a rational rate
y > 0, either truncated to that range (``truncated=True``) or *with a tail*: the last cell
then stands for every d ≥ K − 1, with mass e^(−y(K−1)) (the geometric law's tail beyond K − 2),
and a draw that lands there continues with a fresh draw of the same law (the geometric law is
memoryless: given D ≥ K − 1, D − (K − 1) has the law of D).

Walker's alias method (Walker 1977, "An efficient method for generating discrete random
variables with general distributions", ACM TOMS 3(3); built here by Vose's algorithm, Vose
1991, IEEE TSE 17(9)) turns any law on K cells into K pairs (θ_i, a_i): pick a cell i
uniformly, then keep i with probability θ_i or take its alias a_i. One 64-bit word does both:
its low b bits are i, its high k = 64 − b bits are the first k binary digits of a uniform
U ∈ [0, 1), and the draw keeps i iff U < θ_i. The θ_i are real numbers (sums of e^(−y·d) terms),
so the comparison is made *exactly*: with T_i = ⌊2^k·θ_i⌋, the k bits u decide it unless
u = T_i (probability 2^−k), in which case fresh words are compared with the next 64 binary
digits of θ_i, and so on (an exact lazy comparison of U with θ_i). The sampled law is then
exactly the digit law — no rounding, no truncation — and every draw takes the same operations
except for those ties and the tail.

Exact construction. The masses are computed in fixed point with F fractional bits and a
tracked bound on the error (in units of 2^−F); Vose's algorithm runs on these integers; every
comparison it makes (is a residual below 1?) is required to be decided by more than the error
bound, and otherwise the table is rebuilt with twice the precision. The cell left over at the
end holds exactly the residual mass 1 (all masses sum to K). Every other θ_i is a
non-constant rational function, with rational coefficients, of Q = e^(−y), which is
transcendental for rational y ≠ 0 (Lindemann 1882); so θ_i is transcendental too (were it
algebraic, Q would be a root of a non-zero polynomial), never equals 1 or a dyadic rational,
and the precision loop ends. The binary digits of θ_i that
a tie needs are read from the fixed-point value when the error bound allows, else from a
rebuild at higher precision.
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._words import WordReader

__all__ = ["AliasTable", "alias_table", "cutoff_bits"]

#: −ln(2⁻⁶⁴): a tail beyond this many units of rate·d has mass below 2⁻⁶⁴.
TAIL_NATS = 64 * math.log(2)
_WORD = 64


def cutoff_bits(rate: Fraction, limit: int) -> int | None:
    """The least b ≤ ``limit`` with (2^b − 1)·rate ≥ 64·ln 2 (tail mass ≤ 2⁻⁶⁴), or None."""
    for bits in range(1, limit + 1):
        if ((1 << bits) - 1) * rate >= Fraction(TAIL_NATS):
            return bits
    return None


def _exp_neg_fixed(rate: Fraction, frac_bits: int) -> tuple[int, int]:
    """(q, e): q = ⌊e^(−rate)·2^F⌋ up to |error| ≤ e units of 2^−F.

    ``decimal`` evaluates exp correctly rounded; the quotient rate = n/d is rounded first
    (relative error ≤ 10^(1−P)), which moves e^(−rate) by a factor e^(±rate·10^(1−P)). The
    precision P is chosen so that both errors are far below one unit.
    """
    digits = int(frac_bits * 0.30103) + 12 + len(str(max(1, math.ceil(rate))))
    context = decimal.Context(prec=digits, Emin=-999_999_999, Emax=999_999_999)
    value = context.exp(
        context.minus(
            context.divide(decimal.Decimal(rate.numerator), decimal.Decimal(rate.denominator))
        )
    )
    scaled = context.multiply(value, decimal.Decimal(1 << frac_bits))
    return int(scaled.to_integral_value(decimal.ROUND_FLOOR)), 2


def _smallest_mass_lower_bound(rate: Fraction, size: int, truncated: bool) -> Fraction:
    """A rational lower bound on min_d K·p_d (within 10⁻³⁰ of it), from 40-digit decimals."""
    with decimal.localcontext(decimal.Context(prec=40)) as context:
        y = decimal.Decimal(rate.numerator) / decimal.Decimal(rate.denominator)
        q = context.exp(-y)
        last = q ** (size - 1)
        if truncated:
            value = size * last * (1 - q) / (1 - q**size)
        else:
            value = min(size * q ** (size - 2) * (1 - q), size * last)
    # Each of the few operations is correctly rounded to 40 digits: the result is within
    # 10⁻³⁵ relative of the true value, far inside the margin.
    return max(Fraction(0), Fraction(value) - Fraction(1, 10**30))


class AliasTable:
    """An exact alias table for a digit law (see the module docstring).

    ``packed[i] = (T_i << b) | a_i`` with T_i = ⌊2^k·θ_i⌋, k = 64 − b; a cell whose θ_i is
    exactly 1 has a_i = i (its alias is itself), so its threshold never matters.

    Fast path: every θ_i ≥ min_d K·p_d (Vose's algorithm only ever lowers a residual by
    1 − θ of a cell it fills, and a residual goes below 1 at most once), so when that bound L is
    at least ½ (a nearly uniform law), a word whose k bits are below ⌊2^k·L⌋ keeps its cell
    without looking at the table (``fast_limit``). The table itself is built on first use.
    """

    __slots__ = (
        "_cache",
        "_mask",
        "_packed",
        "_theta_one",
        "bits",
        "fast_limit",
        "rate",
        "truncated",
        "word_bits",
    )

    def __init__(
        self, rate: Fraction, bits: int, truncated: bool, *, word_bits: int = _WORD
    ) -> None:
        self.rate = rate
        self.bits = bits
        self.truncated = truncated
        self.word_bits = word_bits  # 64; smaller only in tests that enumerate every word
        self._cache: dict[int, tuple[list[int], list[int], int, int]] = {}
        self._packed: NDArray[np.uint64] | None = None
        self._theta_one: list[bool] = []
        self._mask = np.uint64(self.size - 1)
        k = word_bits - bits
        bound = _smallest_mass_lower_bound(rate, self.size, truncated)
        fast = math.floor(bound * (1 << k)) if bound >= Fraction(1, 2) else 0
        self.fast_limit = np.uint64(min(fast, (1 << k) - 1) << bits)

    @property
    def packed(self) -> NDArray[np.uint64]:
        """The table ((T_i << b) | a_i per cell), built exactly on first use."""
        if self._packed is None:
            _, aliases, _, _ = self._table(self._initial_precision())
            self._theta_one = [a == i for i, a in enumerate(aliases)]
            k = self.word_bits - self.bits
            thresholds = [
                (1 << k) - 1 if one else self.theta_digits(i, 0, k)
                for i, one in enumerate(self._theta_one)
            ]
            self._packed = np.array(
                [(t << self.bits) | a for t, a in zip(thresholds, aliases, strict=True)],
                dtype=np.uint64,
            )
        return self._packed

    @property
    def size(self) -> int:
        return 1 << self.bits

    def _initial_precision(self) -> int:
        small = max(0, -math.floor(math.log2(self.rate))) if self.rate < 1 else 0
        return 160 + 2 * small + 4 * self.bits

    # -- construction -----------------------------------------------------------------------

    def _masses(self, frac_bits: int) -> tuple[list[int], int]:
        """K·p_d in fixed point (F bits) and a bound on their error, in units of 2^−F."""
        one = 1 << frac_bits
        size = self.size
        q, q_err = _exp_neg_fixed(self.rate, frac_bits)
        powers = [one]
        for _ in range(size - 1):
            powers.append(powers[-1] * q >> frac_bits)
        # |error of Q^d| ≤ d·(q_err + 1) units (one rounding per step, Q ≤ 1).
        power_err = size * (q_err + 1)
        if self.truncated:
            last, last_err = _exp_neg_fixed(self.rate * size, frac_bits)
            norm = one - last  # 1 − Q^K
            masses = [size * p * (one - q) // norm for p in powers]
            # K·A·B/N with A = Q^d, B = 1 − Q ≤ N = 1 − Q^K, each off by ≤ power_err, q_err,
            # last_err units: the error is ≤ K·(δA + (δB + δN)·2^F/N) + 1 (doubled for the
            # second-order terms).
            spread = -(-one // norm)
            error = 2 * (size * (power_err + (q_err + last_err) * spread) + 1)
        else:
            masses = [size * p * (one - q) >> frac_bits for p in powers[:-1]]
            masses.append(size * powers[-1])  # the tail: Q^(K−1)
            error = 2 * (size * (power_err + q_err) + 1)
        return masses, error

    def _build(self, frac_bits: int) -> tuple[list[int], list[int], int, int]:
        while True:
            built = self._vose(frac_bits)
            if built is not None:
                thetas, aliases, error = built
                return thetas, aliases, frac_bits, error
            frac_bits *= 2

    def _vose(self, frac_bits: int) -> tuple[list[int], list[int], int] | None:
        """Vose's algorithm on fixed-point masses; None when a decision is within the error."""
        one = 1 << frac_bits
        masses, error = self._masses(frac_bits)
        size = self.size
        residual = list(masses)
        err = [error] * size
        thetas = [one] * size
        aliases = list(range(size))
        small: list[int] = []
        large: list[int] = []
        for i, m in enumerate(residual):
            if abs(m - one) <= err[i]:
                return None
            (small if m < one else large).append(i)
        while small and large:
            lo, hi = small.pop(), large.pop()
            thetas[lo], aliases[lo] = residual[lo], hi
            residual[hi] -= one - residual[lo]
            err[hi] += err[lo]
            if not small and not large:  # the last active cell: its exact residual is 1
                break
            if abs(residual[hi] - one) <= err[hi]:
                return None
            (small if residual[hi] < one else large).append(hi)
        if small:  # impossible when every decision above was certain (masses sum to K)
            return None
        worst = max(err)
        for i in range(size):
            if aliases[i] != i and not (worst < thetas[i] < one - worst):
                return None
        return thetas, aliases, worst

    # -- exact binary digits of θ_i --------------------------------------------------------

    @staticmethod
    def _digits(
        cell: int, start: int, width: int, thetas: list[int], frac_bits: int, error: int
    ) -> int:
        """Bits [start, start + width) of θ_cell's binary expansion, or −1 if not certain."""
        end = start + width
        if end > frac_bits:
            return -1
        shift = frac_bits - end
        value = thetas[cell]
        low = value & ((1 << shift) - 1)
        if shift and not (error < low < (1 << shift) - error):
            return -1
        return (value >> shift) & ((1 << width) - 1)

    def _table(self, frac_bits: int) -> tuple[list[int], list[int], int, int]:
        """(θ fixed point, aliases, F used, error bound) at ≥ ``frac_bits`` bits, cached."""
        if frac_bits not in self._cache:
            self._cache[frac_bits] = self._build(frac_bits)
        return self._cache[frac_bits]

    def theta_digits(self, cell: int, start: int, width: int = _WORD) -> int:
        """Bits [start, start + width) of θ_cell (θ_cell < 1), exactly, rebuilding if needed.

        Every build decides each step of Vose's algorithm with certainty, so every precision
        gives the same cells and aliases, and θ_cell is the same real number.
        """
        frac_bits = self._initial_precision()
        while True:
            thetas, _, used, error = self._table(frac_bits)
            digits = self._digits(cell, start, width, thetas, used, error)
            if digits >= 0:
                return digits
            frac_bits = 2 * max(used, start + width + 64)

    # -- sampling ---------------------------------------------------------------------------

    def keeps_cell(self, cell: int, words: WordReader) -> bool:
        """After a tie (the k bits of U equal T_cell): is U < θ_cell? Compared 64 bits at a
        time with fresh words (each tie again has probability 2⁻⁶⁴)."""
        self.packed  # noqa: B018 - builds the table (and _theta_one) if needed
        if self._theta_one[cell]:
            return True
        start = self.word_bits - self.bits
        while True:
            word = int(words(1)[0])
            digit = self.theta_digits(cell, start, self.word_bits)
            if word != digit:
                return word < digit
            start += self.word_bits

    def sample(self, words: WordReader, n: int) -> NDArray[np.int64]:
        """n iid draws of the digit law (tail included), as int64."""
        w = words(n)
        return self.decode(w, words)

    def decode(self, w: NDArray[np.uint64], words: WordReader) -> NDArray[np.int64]:
        """The digits that the words ``w`` select (ties and tails resolved with fresh words)."""
        out = self.select(w, words)
        if not self.truncated:
            tail = np.flatnonzero(out == self.size - 1)
            if tail.size:  # memoryless: continue from K − 1 with a fresh draw of the same law
                out[tail] += self.sample(words, tail.size)
        return out

    def select(self, w: NDArray[np.uint64], words: WordReader) -> NDArray[np.int64]:
        """The cells (tail cell included, not continued) that the words ``w`` select."""
        cell: NDArray[np.int64] = (w & self._mask).view(np.int64)  # < 2^b: the same bits
        if not self.fast_limit:
            return self._choose(w, cell, words)
        slow = np.flatnonzero(w >= self.fast_limit)  # most words keep their cell: no lookup
        if slow.size:
            cell[slow] = self._choose(w[slow], cell[slow], words)
        return cell

    def _choose(
        self, w: NDArray[np.uint64], cell: NDArray[np.int64], words: WordReader
    ) -> NDArray[np.int64]:
        """Cell or alias: keep the cell iff U < θ_cell (w < packed entry, ties refined)."""
        entry = self.packed.take(cell)
        chosen = np.where(w < entry, cell, (entry & self._mask).view(np.int64))
        for j in np.flatnonzero((w ^ entry) <= self._mask):  # U's k bits equal T_cell
            i = int(cell[j])
            chosen[j] = i if self.keeps_cell(i, words) else int(entry[j] & self._mask)
        return chosen


@functools.lru_cache(maxsize=256)
def alias_table(rate: Fraction, bits: int, truncated: bool) -> AliasTable:
    """The (cached) exact alias table of a digit law on 64-bit words; see :class:`AliasTable`."""
    return AliasTable(rate, bits, truncated)

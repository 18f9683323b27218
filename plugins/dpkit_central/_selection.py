"""The shared shape of the selection mechanisms (exponential, report-noisy-max, permute-and-flip).

Each picks a candidate index from a vector of utilities whose neighbours differ by at most
Δu per candidate (L∞), all in the same direction when ``monotone``; each is pure ε-DP.

In a session (``docs/security.md``) the utilities (..., m) are checked for structure only
(a numeric dtype, at least one dimension, m ≥ 1 candidates), a batch of R = ∏ leading
dimensions selections is R releases, and ``coerce`` maps every utility into the domain
(:func:`dpkit_central._validation.total_utilities`): NaN → −inf, +inf → the largest double, a
row of −inf only → zeros.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CENTRAL_EPSILON,
    EXP_TABLE_CAP,
    EXP_TABLE_STEPS,
    SENSITIVITY,
    Boolean,
    InvalidData,
    Mechanism,
    PrivacyEvent,
    PureDP,
    Real,
    VectorDomain,
    bernoulli_bracketed,
    bernoulli_exp_bracketed,
    exp_table,
    parameter,
)
from dpkit_central._noise import larger_reading, smaller_reading
from dpkit_central._validation import as_array, check_kind, total_utilities

U64 = 1 << 64

POSITIVE = Real(low=0.0, low_open=True)


@attrs.frozen
class Selection(Mechanism):
    """Base of the selection mechanisms: parameters, input domain and privacy event."""

    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"

    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    sensitivity: float = parameter(
        SENSITIVITY, doc="sensitivity Δu of every utility", default=1.0, typical=(0.1, 10.0)
    )
    monotone: bool = parameter(
        Boolean(), doc="utilities move in the same direction between neighbours", default=False
    )

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=math.inf, monotone=self.monotone)

    @property
    def privacy(self) -> PrivacyEvent:
        """Pure ε-DP; the exponential mechanism states more (ε-bounded range)."""
        return PureDP(epsilon=self.epsilon)

    def check_input(self, values: Any, /) -> None:
        """Public phase: utilities of shape (..., m), real numbers, m ≥ 1 (structure only)."""
        array = as_array(values, owner=self.name, field="utilities")
        check_kind(array, "iufO", owner=self.name, field="utilities", allowed="real numbers")
        if array.ndim == 0 or array.shape[-1] == 0:
            raise InvalidData(
                f"{self.name}: utilities must hold at least one candidate along the last axis, "
                f"got shape {array.shape}",
                field="utilities",
            )

    def releases(self, values: Any, /) -> int:
        """R = the product of the leading dimensions: utilities (R, m) are R selections, each
        an ε-DP release of its own (charged R times; one row (m,) is one release)."""
        return math.prod(np.shape(values)[:-1])

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.float64]:
        """Private phase: NaN → −inf, +inf → the largest double, a row of −inf only → zeros
        (:func:`dpkit_central._validation.total_utilities`); never raises."""
        return total_utilities(values)


# --------------------------------------------------------------------------------------------
# Secure mode: exact selection on dpkit's SecureRandom
# --------------------------------------------------------------------------------------------
#
# Design. A double is a dyadic rational, so the gaps γ_r = λ(u* − u_r) of the float utilities,
# with λ = ε/(2Δu) (ε/Δu if monotone) at the smaller reading of ε and the larger of Δu
# (:func:`exact_rate`), are exact rationals, and sampling with them is *the* mechanism on the
# utilities the caller gave: nothing is rounded, the ε the ledger charges holds exactly and the
# output law is fast mode's ``log_probability`` (at the float λ, which differs from the exact
# one by the rounding of ε/(cΔu) and the readings' gap, about 10⁻¹⁶ relatively). Each coin
# Bernoulli(e^(−γ_r)) is the event E_r > γ_r for an exponential E_r
# (:mod:`dpkit.randomness._exponential`, drawn digit by digit, about one word each). The
# comparison needs γ_r only to the precision that separates it from E_r: three float
# operations bracket it within a relative 2⁻⁵⁰ (:func:`gap_brackets`), which decides all but a
# fraction ~2⁻⁶ of the coins at the first digit and nearly all the rest at the next; the exact
# rational γ_r (Python integers) is formed only for the few comparisons the brackets leave
# open. No utility is converted to a big integer up front.


def exact_rate(epsilon: float, sensitivity: float, monotone: bool) -> Fraction:
    """λ = ε/(2Δu), or ε/Δu when ``monotone``, exactly, at ε's smaller reading
    (:func:`dpkit_central._noise.smaller_reading`: never above what the ledger charges) and Δu's
    larger one (utilities that differ by the binary Δu or by its decimal alike are within it,
    as the Gaussian's calibration takes Δ)."""
    return smaller_reading(epsilon) / ((1 if monotone else 2) * larger_reading(sensitivity))


def odd_mantissas(
    values: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(M, E) with ``values == M·2^E`` exactly, M an odd integer (|M| < 2⁵³) or 0.

    ``np.frexp`` gives f·2^e with f ∈ [0.5, 1) (subnormals included); f·2⁵³ is an integer.
    Trailing zero bits are moved into E (the lowest set bit of M is M & −M, a power of two
    whose exponent ``frexp`` reads exactly), so that integer-valued utilities get E ≥ 0.
    """
    frac, exp = np.frexp(values)
    mant = np.ldexp(frac, 53).astype(np.int64)
    exp = exp.astype(np.int64) - 53
    low = mant & -mant  # 0 for M = 0
    tz = np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1
    tz[mant == 0] = 0
    return mant >> tz, exp + tz


def exact_utility(value: Any) -> Fraction:
    """A finite utility (a double, or a Fraction that no double holds) as a Fraction."""
    return value if isinstance(value, Fraction) else Fraction(float(value))


def _exact_utilities(utilities: NDArray[Any], top: Any) -> bool:
    """Whether the utilities (or their maxima) hold values no double holds: an object array
    of :func:`~dpkit_central._validation.total_utilities`, worked on in exact rationals."""
    return utilities.dtype == object or np.asarray(top).dtype == object


#: Relative bracket of a gap computed in three correctly rounded float operations (< 2⁻⁵¹).
_MARGIN = 2.0**-50
_HUGE = 1e300


def gap_brackets(
    top: NDArray[np.float64], utilities: NDArray[np.float64], rate: Fraction
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """[lo, hi] ∋ γ = λ(u* − u) elementwise (``top`` = u*, broadcasting), or None.

    u* − u is one correctly rounded subtraction (exact when the result is subnormal), λ the
    correctly rounded double of the rational λ, and the product one more rounding: relative
    error below 3·2⁻⁵³ whenever the result is a normal double (IEEE 754, §4.3). A result that
    overflows (u = −inf, or a gap beyond 1e300) is bracketed by [1e299, inf], one below 1e-290
    (subnormal rounding) by [0, 1e-290]. None when λ itself is not a normal double (ε/Δu
    beyond 1e300 or below 1e-300), or when the utilities hold values no double holds
    (Fractions, :func:`~dpkit_central._validation.total_utilities`): the caller then uses exact
    rationals for every gap.
    """
    if _exact_utilities(utilities, top):
        return None
    try:
        scale = float(rate)
    except OverflowError:
        return None
    if not 1e-300 < scale < _HUGE:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        approx = top - utilities
        approx *= scale
    lo = approx * (1.0 - _MARGIN)
    hi = approx * (1.0 + _MARGIN)
    wide = ~(approx < _HUGE)  # inf (overflow, −inf utilities) or beyond 1e300
    if wide.any():  # γ ≥ 1e300·(1 − 2⁻⁵⁰) there: [1e299, inf] holds it
        lo[wide] = _HUGE / 10
        hi[wide] = np.inf
    tiny = approx < 1e-290
    if tiny.any():
        lo[tiny] = 0.0
        hi[tiny] = 1e-290
    return lo, hi


#: Coins per pass: the temporaries stay in the CPU cache (fresh large arrays cost page faults).
_COIN_CHUNK = 1 << 15


def coins(
    top: NDArray[np.float64],
    utilities: NDArray[np.float64],
    rate: Fraction,
    rng: Any,
    *,
    offset: NDArray[np.int64] | None = None,
) -> NDArray[np.bool_]:
    """Independent exact Bernoulli(exp(−x)) coins, one per utility (``top`` = u*, broadcasting),
    with x = γ = λ(u* − u), or x = γ − k/64 with k = ``offset`` (each k ≤ 64γ); False for −inf
    utilities. :func:`dpkit.plugin.bernoulli_exp_bracketed` on the float brackets of
    :func:`gap_brackets` (widened by the rounding of the subtraction of k/64), with the exact
    rational exponent formed only on demand; in chunks of 2¹⁵ coins."""
    flat_top = np.broadcast_to(top, utilities.shape).reshape(-1)
    flat = utilities.reshape(-1)
    shift = None if offset is None else offset.reshape(-1)
    heads = np.empty(flat.size, dtype=np.bool_)
    for start in range(0, flat.size, _COIN_CHUNK):
        part = slice(start, start + _COIN_CHUNK)
        heads[part] = _coins(
            flat_top[part], flat[part], rate, rng, None if shift is None else shift[part]
        )
    return heads.reshape(utilities.shape)


def _coins(
    top: NDArray[np.float64],
    u: NDArray[np.float64],
    rate: Fraction,
    rng: Any,
    offset: NDArray[np.int64] | None,
) -> NDArray[np.bool_]:
    brackets = gap_brackets(top, u, rate)
    if brackets is None:  # decide every coin with exact rationals
        brackets = (np.zeros(u.size), np.full(u.size, np.inf))
    lo, hi = brackets
    if offset is not None:
        shift = offset.astype(np.float64) / 64.0  # exact
        slack = (hi + 1.0) * 2.0**-50  # one rounding of each difference, below 2⁻⁵³·max
        lo = np.maximum(lo - shift - slack, 0.0)
        hi = hi - shift + slack
    infinite = 1 << 1100  # the gap of a −inf utility: beyond any exponential draw that fits

    def exact(indices: NDArray[np.intp]) -> list[Fraction]:
        gaps = []
        for i in indices.tolist():
            if not math.isfinite(u[i]):
                gaps.append(Fraction(infinite))
                continue
            gap = rate * (exact_utility(top[i]) - exact_utility(u[i]))
            gaps.append(gap if offset is None else gap - Fraction(int(offset[i]), 64))
        return gaps

    heads: NDArray[np.bool_] = bernoulli_exp_bracketed(lo, hi, exact, rng=rng)
    heads &= np.asarray(u != -np.inf, dtype=np.bool_)
    return heads


def uniform_among(mask: NDArray[np.bool_], rng: Any) -> NDArray[np.int64]:
    """For each row of ``mask`` (R, m) with at least one True: a uniformly random True index.

    Draw k uniform on [0, h) (h the row's number of True entries; ``SecureRandom.integers``,
    exact by rejection) and return the position of the (k+1)-th True entry: the first index
    whose running count of True entries exceeds k.
    """
    m = mask.shape[-1]
    rank = rng.integers(0, np.count_nonzero(mask, axis=-1))
    running = np.cumsum(mask, axis=-1, dtype=np.int32 if m < 1 << 31 else np.int64)
    chosen: NDArray[np.int64] = np.argmax(running > rank[:, None], axis=-1).astype(np.int64)
    return chosen


def permute_and_flip_secure(
    utilities: NDArray[np.float64], rate: Fraction, rng: Any
) -> NDArray[np.int64]:
    """Permute-and-flip on rows of utilities (..., m), exactly, on a SecureRandom.

    McKenna & Sheldon 2020, Algorithm 1: visit the candidates in a uniformly random order and
    return the first r whose coin, Bernoulli(exp(−γ_r)) with γ_r = λ(u* − u_r), comes up
    heads. The coins do not depend on the order, so the result is the first heads in a
    uniform order, i.e. a uniformly random element of the set of heads: we flip every coin
    (:func:`coins`, exact) and pick uniformly among the heads (:func:`uniform_among`). The
    maximiser has γ = 0, so the set of heads is never empty. Flipping all m coins does not
    change the output law (the coins after the first heads are independent of it) and makes
    the work independent of the visiting order. Cost: about one word per coin.
    """
    m = utilities.shape[-1]
    flat = utilities.reshape(-1, m)
    top = flat.max(axis=-1, keepdims=True)  # −inf utilities never win it (a row has a finite one)
    heads = coins(top, flat, rate, rng)
    return uniform_among(heads, rng).reshape(utilities.shape[:-1])


#: Proposal buckets: candidate r goes to bucket k_r = ⌊64·γ_r⌋ (from a lower bound of γ_r),
#: capped at 64·512 (a weight below e^(−512) per candidate is still a valid upper bound); the
#: weights are the table of :func:`dpkit.plugin.exp_table`.
BUCKETS_PER_UNIT = EXP_TABLE_STEPS
_BUCKET_CAP = EXP_TABLE_CAP
#: Candidates whose proposal weights are computed per pass (bounds the temporaries).
_PASS = 1 << 20


def _proposal_weights(
    block: NDArray[Any], top: NDArray[Any] | float | Fraction, rate: Fraction, bits: int
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """(V, k) for every candidate of ``block`` (flat, row by row; ``top`` broadcasts against
    ``block``): k_r ≤ 64·γ_r and V_r = ⌈e^(−k_r/64)·2^bits⌉_up, an integer upper bound of
    e^(−γ_r)·2^bits; V = 0 for −inf utilities (never proposed)."""
    upper, _ = exp_table()
    if _exact_utilities(block, top):  # k = ⌊64γ⌋ exactly, capped
        tops = np.broadcast_to(np.asarray(top, dtype=object), block.shape).reshape(-1).tolist()
        flat = block.reshape(-1).tolist()
        k = np.array(
            [
                _BUCKET_CAP
                if u == -math.inf
                else min(math.floor(64 * rate * (exact_utility(t) - exact_utility(u))), _BUCKET_CAP)
                for t, u in zip(tops, flat, strict=True)
            ],
            dtype=np.int64,
        )
        v = np.ceil(upper[k] * float(1 << bits)).astype(np.uint64)
        v[np.asarray(block.reshape(-1) == -np.inf, dtype=np.bool_)] = 0
        return v, k
    scale = float(rate) if 1e-300 < rate < 1e300 else 0.0
    # c·fl(u* − u) ≤ 64γ: u* − u is rounded once (relative 2⁻⁵³), λ and c once each, the
    # product once; the factor (1 − 2⁻⁵⁰) covers the four roundings.
    c = 64.0 * scale * (1.0 - 2.0**-50)
    with np.errstate(over="ignore", invalid="ignore"):
        t = top - block
        t *= c
    np.floor(t, out=t)
    np.minimum(t, float(_BUCKET_CAP), out=t)  # inf (−inf utilities, overflow) → the cap
    k = t.astype(np.int64).reshape(-1)
    v = np.ceil(upper[k] * float(1 << bits)).astype(np.uint64)
    v[block.reshape(-1) == -np.inf] = 0
    return v, k


def _accept(
    u: NDArray[np.float64],
    top: NDArray[np.float64],
    k: NDArray[np.int64],
    v: NDArray[np.uint64],
    rate: Fraction,
    bits: int,
    rng: Any,
) -> NDArray[np.bool_]:
    """Accept proposals (utility u, row maximum top, bucket k, weight V) with probability
    e^(−γ)·2^bits/V: two independent exact coins (see :func:`exponential_secure`)."""
    return coins(top, u, rate, rng, offset=k) & _second_coin(k, v, bits, rng)


def _second_coin(
    k: NDArray[np.int64], v: NDArray[np.uint64], bits: int, rng: Any
) -> NDArray[np.bool_]:
    """Exact Bernoulli(e^(−k/64)·2^bits/V) for each proposal (≤ 1 by the choice of V)."""
    upper, lower = exp_table()
    scale = float(1 << bits) / v.astype(np.float64)  # two roundings: covered by the margins
    lo = lower[k] * scale * (1.0 - 2.0**-50)
    hi = np.minimum(upper[k] * scale * (1.0 + 2.0**-50), 1.0)
    lo[k == 0] = 1.0  # V = 2^bits exactly when k = 0: probability 1

    def exact(indices: NDArray[np.intp]) -> list[Any]:
        def evaluator(kk: int, vv: int) -> Any:
            return lambda ctx: ctx.divide(
                ctx.multiply(ctx.exp(decimal.Decimal(-kk) / 64), 1 << bits), vv
            )

        return [evaluator(int(k[i]), int(v[i])) for i in indices.tolist()]

    return bernoulli_bracketed(lo, hi, exact, rng=rng)


def exponential_secure(
    utilities: NDArray[np.float64], rate: Fraction, rng: Any, copies: int | None = None
) -> NDArray[np.int64]:
    """The exponential mechanism Pr[r] ∝ exp(−γ_r), γ_r = λ(u* − u_r), exactly, by rejection.

    Von Neumann's rejection method with a proposal close to the target. Candidates are put in
    buckets k_r ≤ 64γ_r (from a float lower bound of γ_r, :func:`_proposal_weights`) and
    given integer weights V_r = ⌈e^(−k_r/64)·2^b⌉ ≥ e^(−γ_r)·2^b; a proposal r is drawn with
    probability V_r/ΣV exactly (a uniform integer below ΣV located in the integer prefix sums)
    and accepted with probability e^(−γ_r)·2^b/V_r ≤ 1, as the product of two independent exact
    coins: Bernoulli(e^(−(γ_r − k_r/64))) (:func:`coins`, on the exact rational exponent) and
    Bernoulli(e^(−k_r/64)·2^b/V_r) (:func:`_second_coin`). An accepted r therefore has
    probability ∝ V_r·e^(−γ_r)·2^b/V_r ∝ e^(−γ_r) = e^(λu_r)/e^(λu*): exactly the exponential
    mechanism (McSherry & Talwar 2007; Dwork & Roth 2014, Definition 3.4), whatever the
    buckets are, since they only need k_r ≤ 64γ_r. A proposal is accepted with probability at
    least about e^(−1/64)·(1 − m·2^(−b)) ≈ 0.98, so a selection takes one or two rounds.

    Cost: one pass over the utilities, in blocks of 2²⁰ that stay in cache, to form the
    weights and their prefix sums; then per proposal a binary search, a few words, and exact
    rationals only for the rare undecided coins. There are no uniform proposals (their
    number grows like 1/(mean of e^(−γ)), i.e. like m for skewed utilities) and no conversion
    of every utility to a big integer. ``utilities`` is (..., m) for one selection per row, or
    one row (m,) with ``copies`` independent selections.
    """
    m = utilities.shape[-1]
    flat = utilities.reshape(-1, m)
    top = flat.max(axis=-1)
    exact = flat.dtype == object  # utilities no double holds: the maxima kept exact too
    if copies is not None:
        return _select_in_row(flat[0], top[0] if exact else float(top[0]), rate, rng, copies)
    if m > _PASS:
        chosen = [
            _select_in_row(row, t if exact else float(t), rate, rng, 1)[0]
            for row, t in zip(flat, top, strict=True)
        ]
        return np.array(chosen, dtype=np.int64).reshape(utilities.shape[:-1])
    rows_per_pass = max(1, _PASS // m)
    parts = [
        _select_in_rows(flat[s : s + rows_per_pass], top[s : s + rows_per_pass], rate, rng)
        for s in range(0, flat.shape[0], rows_per_pass)
    ]
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return out.reshape(utilities.shape[:-1])


def _select_in_rows(
    block: NDArray[np.float64], top: NDArray[np.float64], rate: Fraction, rng: Any
) -> NDArray[np.int64]:
    """One selection per row of ``block`` (at most 2²⁰ utilities in all)."""
    rows, m = block.shape
    bits = 62 - block.size.bit_length()  # ΣV < block.size·2^bits ≤ 2⁶²
    weights, buckets = _proposal_weights(block, top[:, None], rate, bits)
    prefix = np.cumsum(weights)
    ends = prefix[m - 1 :: m].astype(np.int64)
    starts = np.concatenate(([0], ends[:-1]))
    flat = block.reshape(-1)
    out = np.empty(rows, dtype=np.int64)
    pending = np.arange(rows)
    while pending.size:
        target = starts[pending] + rng.integers(0, ends[pending] - starts[pending])
        chosen = np.searchsorted(prefix, target.astype(np.uint64), side="right")
        ok = _accept(flat[chosen], top[pending], buckets[chosen], weights[chosen], rate, bits, rng)
        out[pending[ok]] = chosen[ok] - pending[ok] * m
        pending = pending[~ok]
    return out


def _select_in_row(
    row: NDArray[Any], top: float | Fraction, rate: Fraction, rng: Any, copies: int
) -> NDArray[np.int64]:
    """``copies`` selections from one row of any length, in blocks of 2²⁰ candidates: the
    blocks' totals are formed in one pass; a proposal first picks a block by its total, and
    the weights of the blocks that proposals land in are formed again to find the candidate."""
    m = row.size
    bits = 62 - m.bit_length()  # ΣV < m·2^bits ≤ 2⁶²
    starts = range(0, m, _PASS)
    totals = [int(_proposal_weights(row[s : s + _PASS], top, rate, bits)[0].sum()) for s in starts]
    block_ends = np.cumsum(np.array(totals, dtype=np.uint64))
    out = np.empty(copies, dtype=np.int64)
    pending = np.arange(copies)
    while pending.size:
        target = rng.integers(0, int(block_ends[-1]), size=pending.size, dtype=np.uint64)
        block_of = np.searchsorted(block_ends, target, side="right")
        chosen = np.empty(pending.size, dtype=np.int64)
        weight = np.empty(pending.size, dtype=np.uint64)
        bucket = np.empty(pending.size, dtype=np.int64)
        for b in np.unique(block_of).tolist():
            here = np.flatnonzero(block_of == b)
            start = b * _PASS
            v, k = _proposal_weights(row[start : start + _PASS], top, rate, bits)
            before = int(block_ends[b - 1]) if b else 0
            local = np.searchsorted(np.cumsum(v), target[here] - np.uint64(before), side="right")
            chosen[here], weight[here], bucket[here] = start + local, v[local], k[local]
        tops = np.array(top, dtype=object if isinstance(top, Fraction) else np.float64)
        ok = _accept(row[chosen], tops, bucket, weight, rate, bits, rng)
        out[pending[ok]] = chosen[ok]
        pending = pending[~ok]
    return out


#: Proposals drawn per round of :func:`nearest_rank_secure` (iid: the first accepted is the draw).
_RANK_PROPOSALS = 8


def nearest_rank_secure(
    ranks: NDArray[np.int64],
    counts: NDArray[np.int64],
    target: Fraction,
    rate: Fraction,
    rng: Any,
) -> int:
    """Index i with probability ∝ c_i·exp(−λ·|r_i − t|) exactly (c_i = ``counts``, r_i =
    ``ranks``, t = ``target``, λ = ``rate``), on a SecureRandom: the exponential mechanism over
    Σc_i outputs, c_i of them with utility −|r_i − t| (a quantile's lattice points by rank).

    The rejection method of :func:`exponential_secure` with multiplicities: with d* the
    smallest |r_i − t| of a candidate that has outputs (exactly, as a Fraction) and
    γ_i = λ(|r_i − t| − d*) ≥ 0, candidate i is proposed with probability c_i·V_i/Σc_jV_j
    (V_i = ⌈e^(−k_i/64)·2^b⌉ ≥ e^(−γ_i)·2^b, k_i ≤ 64γ_i: a uniform integer below the integer
    total, located in the prefix sums) and accepted with probability e^(−γ_i)·2^b/V_i (the two
    exact coins of :func:`_accept`), so an accepted i has probability ∝ c_i·e^(−γ_i): exact,
    whatever the float brackets are, since they only need to hold. Only the undecided coins
    form the exact rational γ_i. Candidates with c_i = 0 are never proposed.
    """
    live = np.flatnonzero(counts > 0)
    r = ranks[live].astype(np.float64)  # exact: ranks are below 2⁵³
    c = counts[live].astype(np.uint64)
    t = float(target)
    approx = np.abs(r - t)
    nearest = live[approx <= approx.min() + 1.0]  # holds every exact minimiser (error ≪ 1)
    best = min(abs(Fraction(int(ranks[i])) - target) for i in nearest.tolist())
    # |approx − |r − t|| ≤ ulp(t) + ulp(|r − t|); the gap to d* and the products by λ add a few
    # roundings more: 2⁻⁵⁰·(|r| + |t| + 1) bounds them all, a hundred times over.
    scale = float(rate)
    gap = approx - float(best)
    slack = 2.0**-50 * (r + abs(t) + 1.0 + np.abs(gap))
    lo = np.maximum(gap - slack, 0.0) * scale * (1.0 - 2.0**-50)
    hi = (gap + slack) * scale * (1.0 + 2.0**-50)
    k = np.minimum(np.floor(lo * 64.0), float(_BUCKET_CAP)).astype(np.int64)  # k ≤ 64γ
    bits = 62 - int(c.sum()).bit_length()  # Σ c_i·V_i < Σc_i·2^bits ≤ 2⁶²
    upper, _ = exp_table()
    v = np.ceil(upper[k] * float(1 << bits)).astype(np.uint64)
    prefix = np.cumsum(c * v)
    shift = k.astype(np.float64) / 64.0  # exact
    first_lo = np.maximum(lo - shift - 2.0**-50 * (hi + 1.0), 0.0)
    first_hi = hi - shift + 2.0**-50 * (hi + 1.0)
    while True:
        drawn = rng.integers(0, int(prefix[-1]), size=_RANK_PROPOSALS, dtype=np.uint64)
        chosen = np.searchsorted(prefix, drawn, side="right")

        def exact(indices: NDArray[np.intp], chosen: NDArray[np.intp] = chosen) -> list[Fraction]:
            return [
                rate * (abs(Fraction(int(ranks[live[j]])) - target) - best)
                - Fraction(int(k[j]), 64)
                for j in chosen[indices].tolist()
            ]

        heads = bernoulli_exp_bracketed(first_lo[chosen], first_hi[chosen], exact, rng=rng)
        heads &= _second_coin(k[chosen], v[chosen], bits, rng)
        if heads.any():
            return int(live[chosen[int(np.argmax(heads))]])


def from_the_top(xp: Any, v: Any) -> Any:
    """Utilities (..., m) less their row's largest, in the namespace ``xp``: every selection's
    law depends on differences only, so its formulas take these and no rounding carries the
    utilities' common offset (at 10¹⁵, a log-sum-exp of λu loses 0.03 in its last place). A
    finite difference too large for a double is kept at the most negative double (such a
    candidate's probability is below e^(−10³⁰⁸)); −inf stays −inf."""
    finite = v > -math.inf
    shifted = v - xp.max(v, axis=-1, keepdims=True)
    lowest = -float(np.finfo(np.float64).max)
    return xp.where(finite, xp.where(shifted > -math.inf, shifted, lowest), -math.inf)

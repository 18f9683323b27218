"""1BitMean with α-point rounding (``one_bit_mean``): means of counters collected every day.

Ding, Kulkarni & Yekhanin 2017, "Collecting Telemetry Data Privately" (NeurIPS), Section 2.1
(1BitMean) and Section 3 (α-point rounding and memoization).

**Client, one round.** A value x ∈ [lower, upper] is rounded to one of the s + 1 points
lower + t·w, w = (upper − lower)/s, t ∈ {0..s}: with u = (x − lower)/w and a rounding offset α
uniform on [0, 1) drawn once per device, t = ⌊u + α⌋, so t = ⌊u⌋ + 1 with probability
frac(u) and E[t] = u (α-point rounding). The report is one bit,

    b = 1 with probability π_t = π_0 + (t/s)(π_s − π_0),   π_0 = 1/(e^ε + 1), π_s = e^ε/(e^ε + 1),

and π_s/π_0 = (1 − π_0)/(1 − π_s) = e^ε: ε-LDP. Over α the bit is Bernoulli(π_0 + z(π_s − π_0)),
z = (x − lower)/(upper − lower): the 1BitMean of Section 2.1, whatever s.

**Estimator.** x̂ = lower + (upper − lower)·(b − π_0)/(π_s − π_0) is unbiased for x, so the mean
of the reports' x̂ is unbiased for the mean; Var[x̂] = (upper − lower)²·π(1 − π)/(π_s − π_0)²
≤ (upper − lower)²/(4(π_s − π_0)²) (the worst case, at π = 1/2). The estimate is a
:class:`MeanEstimate` (plug-in variance s²/n, normal interval).

**Memoization** (:class:`OneBitMeanClient`). A device fixes α once and draws the bit of each
point t the first time its value rounds there, then reports that bit every time. Its reports
are a function of the memo entries its values select: a device whose rounded value stays at
one point leaks ε over any number of days, and one that visits D distinct points at most
D·ε ≤ (s + 1)·ε, for histories with the same pattern of repeats (basic composition of the
independent entries; the accountant composes them, :meth:`OneBitMeanClient.privacy_events`).
With s = 1 (the default) a device's whole history costs at most 2ε. What memoization does not
hide: a change of the rounded value can change the bit, and then the collector sees *that* it
changed (Section 3.2 discusses this; its output perturbation is not implemented here).

**Sampling.** π_0 is realised as T_0/2⁶⁴ with T_0 = :func:`lie_threshold` (ε, 2) (rounded
up) and π_t as (T_0 + t·D)/2⁶⁴ with D = ⌊(2⁶⁴ − 2T_0)/s⌋, so π_s ≤ 1 − π_0: every ratio stays
within e^ε, and E[b | t] is exactly linear in t (the estimator uses these realised values). α
is a double on the 2⁻⁵³ grid, which moves a rounding probability by at most 2⁻⁵³.

On an accelerator's array, ``randomize`` and the estimator's ``accumulate`` run on the device
with this law exactly, α on the same grid and the bit on the same 64-bit thresholds
(:mod:`dpkit.tensors.one_bit_mean`: the same words give the same bits), and
``log_probability`` is scored there: π by this module's float64 operations, its logarithm by
the device's, within two ulps of the host's value (:mod:`dpkit.tensors.log_probability`). The
client (memoization) is a host object: :meth:`OneBitMeanClient.report` refuses an
accelerator's array.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.plugin import (
    Estimator,
    Integer,
    InvalidData,
    InvalidParameter,
    MeanEstimate,
    MeanSums,
    PureDP,
    array_library,
    as_array,
    describe_dtype,
    device_operands,
    lie_threshold,
    one_bit_counts,
    one_bit_reports,
    parameter,
    resolve_rng,
)
from dpkit_ldp._biased_bits import uniform_words
from dpkit_ldp._memo import MemoizingDevice
from dpkit_ldp._numeric import NumericMechanism, float64_constants

__all__ = ["OneBitMean", "OneBitMeanClient", "OneBitMeanEstimator"]

_U64 = 1 << 64
#: The offsets α are k·2⁻⁵³, k < 2⁵³.
_GRID = 1 << 53
_UNIT = 2.0**-53


@attrs.frozen
class OneBitMean(NumericMechanism):
    """1BitMean with α-point rounding to s + 1 points (module docstring)."""

    name: ClassVar[str] = "one_bit_mean"
    statistic: ClassVar[str] = "telemetry_mean"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})
    standard: ClassVar[tuple[float, float]] = (0.0, 1.0)

    intervals: int = parameter(
        Integer(low=1, high=1 << 20), doc="rounding intervals s (s + 1 points)", default=1
    )
    reports: int = parameter(
        Integer(low=1, high=1 << 30),
        doc="memoized reports per device of one value (all identical)",
        default=1,
    )

    @property
    def _thresholds(self) -> tuple[int, int]:
        """(T_0, D): π_t = (T_0 + t·D)/2⁶⁴."""
        low = lie_threshold(self.epsilon, 2)
        return low, (_U64 - 2 * low) // self.intervals

    def bit_probability(self, points: Any) -> NDArray[np.float64]:
        """The realised π_t at rounded points t ∈ {0..s}."""
        low, step = self._thresholds
        t = np.asarray(points, dtype=np.float64)
        return np.asarray((low + t * step) / _U64, dtype=np.float64)

    @property
    def gap(self) -> float:
        """π_s − π_0 (realised)."""
        step = self._thresholds[1]
        return self.intervals * step / _U64

    def rounded(self, values: Any, offsets: Any) -> NDArray[np.int64]:
        """t = ⌊u + α⌋ ∈ {0..s} for values x and offsets α (u = (x − lower)/w)."""
        return self._round(self._scaled(values), offsets)

    def _scaled(self, values: Any) -> NDArray[np.float64]:
        """u = (x − lower)/w, as the device computes it."""
        u: NDArray[np.float64] = self.standardize(np.asarray(values, dtype=np.float64))
        return u * self.intervals

    def _round(self, scaled: NDArray[np.float64], offsets: Any) -> NDArray[np.int64]:
        t = np.floor(scaled + np.asarray(offsets, dtype=np.float64))
        return np.clip(t, 0, self.intervals).astype(np.int64)

    def _bits(self, points: NDArray[np.int64], generator: Any) -> NDArray[np.uint8]:
        low, step = self._thresholds
        threshold = np.uint64(low) + points.astype(np.uint64) * np.uint64(step)
        bits: NDArray[np.uint8] = (uniform_words(generator, points.size) < threshold).astype(
            np.uint8
        )
        return bits

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> Any:
        """One bit per value (``uint8``), each with its own α; with ``reports`` = T > 1, T
        identical memoized bits per value (shape ``values.shape + (T,)``).

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An
        accelerator's array is randomized there with the same law
        (:mod:`dpkit.tensors.one_bit_mean`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return one_bit_reports(
                library,
                values,
                lower=self.lower,
                upper=self.upper,
                centre=self.centre,
                scale=self.scale,
                intervals=self.intervals,
                thresholds=self._thresholds,
                repeats=self.reports,
                rng=rng,
                owner=self.name,
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        x = self.checked_values(values)
        offsets = generator.random(x.size).reshape(x.shape)
        bits = self._bits(self.rounded(x, offsets).reshape(-1), generator).reshape(x.shape)
        if self.reports > 1:
            return np.repeat(bits[..., None], self.reports, axis=-1)
        return bits

    def client(
        self, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> OneBitMeanClient:
        """A new device: its α drawn, no bits yet (:class:`OneBitMeanClient`)."""
        generator, _ = resolve_rng(rng, owner=self.name)
        return OneBitMeanClient(self, float(generator.random(1)[0]))

    @property
    def privacy(self) -> PureDP:
        """ε, for any number of memoized reports of one value."""
        return PureDP(epsilon=self.epsilon)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[b | x] = log of π_0 + z(π_s − π_0) for b = 1 (its complement for 0), over α
        (T reports must be identical): the realised thresholds of the module docstring, the
        complement summed from its own non-negative terms, so a bit drawn with probability
        near 2⁻⁶⁴ at a large ε scores its logarithm, not −inf.

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there; the reports must be real numbers there): the probability with the host's
        operations in the host's order, so the same double, and ``log`` by the device's — within two ulps of the host's value, −inf, NaN and 0 where the host's are
        (the bound: :mod:`dpkit.tensors.log_probability`).
        """
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            library = operands.library
            xp = library.xp
            reports = operands.outputs
            if self.reports > 1:
                # The host's indexing, on a view of no memory: its error, before any value.
                np.broadcast_to(np.zeros((), dtype=np.int8), tuple(reports.shape))[..., :1]
                operands = attrs.evolve(operands, outputs=reports[..., 0])
            b, x = operands.reals(owner=self.name)  # the broadcast shape, then the dtypes
            # As float64: a boolean or integer report is 0 or 1 exactly when its double is.
            with np.errstate(divide="ignore"):  # a numpy-backed namespace's warning for log 0
                log_p = self._log_probability(xp, library.device, b == 1.0, b == 0.0, x)
            if self.reports == 1:
                return log_p
            (none,) = float64_constants(xp, library.device, -math.inf)
            return xp.where(xp.all(reports == reports[..., :1], axis=-1), log_p, none)
        b = np.asarray(outputs)
        if self.reports > 1:
            same = np.all(b == b[..., :1], axis=-1)
            b = b[..., 0]
        else:
            same = np.ones(b.shape, dtype=bool)
        x = np.asarray(inputs, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_p = self._log_probability(np, None, b == 1, b == 0, x)
        return np.where(same, log_p, -np.inf)

    def _log_probability(self, xp: Any, device: Any, one: Any, zero: Any, x: Any) -> Any:
        """log P[b | x] of the reports' masks ``one`` (b = 1) and ``zero`` (b = 0) and float64
        inputs x, arrays of the namespace ``xp`` on ``device`` (numpy's on the host)."""
        _, z = self.standard_operands(xp, x, x)  # standardize(x), with its clip
        low, step = self._thresholds
        # P[b = 1] = (T_0 + z·s·D)/2⁶⁴ and P[b = 0] = (T_0 + R + (1 − z)·s·D)/2⁶⁴, R = 2⁶⁴ − 2T_0
        # − s·D the remainder of D's floor: each a sum of non-negative terms, so its relative
        # error is a few ulps even near 2⁻⁶⁴, where 1 − π would round to 0 (π rounds to 1 once
        # ε ≳ 37, yet the sampler draws that bit with probability ≥ 2⁻⁶⁴).
        spare = _U64 - 2 * low - self.intervals * step
        pi = low / _U64 + z * self.gap
        rest = (low + spare) / _U64 + (1.0 - z) * self.gap
        (none,) = float64_constants(xp, device, -math.inf)
        return xp.where(one, xp.log(pi), xp.where(zero, xp.log(rest), none))

    def output_space(self) -> NDArray[np.uint8]:
        base = np.array([0, 1], dtype=np.uint8)
        return np.repeat(base[:, None], self.reports, axis=1) if self.reports > 1 else base

    def from_bits(self, bits: NDArray[Any]) -> NDArray[np.float64]:
        """Standard units: (b − π_0)/(π_s − π_0), unbiased for z."""
        low, _ = self._thresholds
        return (np.asarray(bits, dtype=np.float64) - low / _U64) / self.gap

    def worst_case_variance(self) -> NDArray[np.float64]:
        """max over inputs of Var[(b − π_0)/(π_s − π_0)]: 1/(4(π_s − π_0)²)."""
        return np.array([0.25 / self.gap**2])

    @classmethod
    def worst_mean_variance(cls, *, epsilon: float, n: int = 1) -> float:
        """Worst-case variance of the mean of n reports on [0, 1]: ((e^ε + 1)/(e^ε − 1))²/(4n)."""
        return ((math.exp(epsilon) + 1.0) / math.expm1(epsilon)) ** 2 / (4.0 * n)

    def rounding_law(self, values: Any, /) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The exact law of the rounded point t of each value over the device's offset α.

        α is k·2⁻⁵³ with k uniform on [0, 2⁵³) (numpy's ``Generator.random`` and
        :meth:`dpkit.SecureRandom.random` alike), and t = :meth:`rounded` (x, α) is
        non-decreasing in k (a floating-point sum, ⌊·⌋ and the clip are all monotone), with
        t(0) = t₀ and t < t₀ + 3 (u + α < u + 1 rounds to at most ⌊u⌋ + 2). So the law is
        fixed by the first k at which t reaches t₀ + 1 and t₀ + 2, found by bisection on the
        very arithmetic the device runs (near the real-number answer, bracket checked): returns (t₀, K) with K[..., i] that first k for
        t₀ + 1 + i (2⁵³ if never), i.e. P[t ≥ t₀ + 1 + i] = (2⁵³ − K[..., i])/2⁵³ exactly.
        """
        u = self._scaled(np.asarray(values, dtype=np.float64).reshape(-1))
        start = self._round(u, np.zeros_like(u))
        # both thresholds at once: rows t₀ + 1 and t₀ + 2
        target = start + np.arange(1, 3)[:, None]
        scaled = np.broadcast_to(u, target.shape)
        # The answer is within a few units of u per grid step of the real-number one,
        # (target − u)·2⁵³ (the sum's rounding error is at most (u + 1)·2⁻⁵³): search there,
        # and over the whole grid wherever the window turns out not to bracket it.
        guess = np.clip(np.ceil((target - scaled) * _GRID), 0, _GRID).astype(np.int64)
        width = 2 * (self.intervals + 3)
        lo = np.maximum(guess - width, 0)
        hi = np.minimum(guess + width, _GRID)
        below = (lo == 0) | (self._round(scaled, (lo - 1).astype(np.float64) * _UNIT) < target)
        above = (hi == _GRID) | (self._round(scaled, hi.astype(np.float64) * _UNIT) >= target)
        lo = np.where(below & above, lo, 0)
        hi = np.where(below & above, hi, _GRID)
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            reached = self._round(scaled, mid.astype(np.float64) * _UNIT) >= target
            hi = np.where(reached, mid, hi)
            lo = np.where(reached, lo, np.minimum(mid + 1, hi))
        first = np.ascontiguousarray(hi.T)
        return start, first

    def simulate(self, values: Any, counts: Any, /, *, rng: np.random.Generator) -> MeanSums:
        """The :class:`MeanSums` of one report from each of ``counts[i]`` devices holding
        ``values[i]``, drawn from exactly the law of real reports, in O(distinct values) draws
        whatever n (for experiments; never to protect data).

        *Why the law is the same.* A device's report is a function of its offset α and one
        uniform word, drawn independently: t from :meth:`rounding_law` (exact on the 2⁻⁵³
        grid of α), then b = 1 with probability π_t. The devices holding one value are
        independent and alike, so how many round to each point is Multinomial(c, law of t),
        and given those, the ones at point t are Binomial(·, π_t), independently; B, the ones
        in all, is their sum. The statistic of real reports is a function of B alone (Σ x̂ and
        Σ x̂² with x̂ ∈ {x̂(0), x̂(1)}), computed here from the same x̂(0), x̂(1). The draws use
        π_t and the rounding probabilities as doubles (π_t rounded from T/2⁶⁴, as every
        simulation here; the rounding probabilities k/2⁵³ are doubles exactly).
        """
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter("rng", rng, "a numpy Generator (simulation is fast mode only)")
        x = self.checked_values(values).reshape(-1)
        held = np.asarray(counts)
        if (
            held.shape != (x.size,)
            or not np.issubdtype(held.dtype, np.integer)
            or (held.size and int(held.min()) < 0)
        ):
            raise InvalidData(
                f"{self.name}: counts must be {x.size} integers >= 0 (devices per value), got "
                f"{describe_dtype(held)} of shape {held.shape}",
                field="counts",
            )
        held = held.astype(np.int64)
        start, first = self.rounding_law(x)
        edges = np.column_stack([np.zeros(x.size, dtype=np.int64), first, np.full(x.size, _GRID)])
        law = np.diff(edges, axis=1).astype(np.float64) * _UNIT  # P[t = t₀ + i], i = 0, 1, 2
        at_point = rng.multinomial(held, law) if x.size else np.zeros((0, 3), dtype=np.int64)
        points = np.minimum(start[:, None] + np.arange(3), self.intervals)
        ones = int(rng.binomial(at_point, self.bit_probability(points)).sum())
        n = int(held.sum())
        zero, one = self.from_bits(np.array([0, 1]))
        return MeanSums(
            self.name,
            n,
            [ones * one + (n - ones) * zero],
            [ones * one**2 + (n - ones) * zero**2],
        )


class OneBitMeanEstimator(Estimator):
    """The mean of x̂ = lower + (upper − lower)(b − π_0)/(π_s − π_0) (:class:`MeanEstimate`)."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: OneBitMean

    def accumulate(self, reports: Any, /) -> MeanSums:
        """Σ x̂ and Σ x̂² over a 1-D array of bits; an accelerator's bits are counted there
        (only the number of ones comes back)."""
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        library = array_library(reports, owner=owner, field="reports")
        if library is not None:
            ones, n = one_bit_counts(library, reports, owner=owner)
            zero, one = mech.from_bits(np.array([0, 1]))
            return MeanSums(
                mech.name,
                n,
                [ones * one + (n - ones) * zero],
                [ones * one**2 + (n - ones) * zero**2],
            )
        array = as_array(reports, owner=owner, field="reports")
        if array.size and (
            array.dtype.kind not in "biuf" or not np.all((array == 0) | (array == 1))
        ):
            raise InvalidData(
                f"{owner}: reports must be bits 0/1, got an array of {describe_dtype(array)}"
                + (" with other values" if array.dtype.kind in "biuf" else ""),
                field="reports",
            )
        if array.ndim != 1:
            raise InvalidData(
                f"{owner}: reports must be a 1-D array, one bit per device (reports[:, t] of "
                f"memoized ones); got shape {array.shape}",
                field="reports",
            )
        t = mech.from_bits(array)
        return MeanSums(mech.name, t.size, [t.sum()], [np.square(t).sum()])

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> MeanEstimate:
        self.check_method(method)
        mech = self.mechanism
        if not isinstance(statistics, MeanSums) or statistics.mechanism != mech.name:
            raise InvalidData(f"expected the MeanSums of {mech.name!r}", field="statistics")
        return MeanEstimate.from_sums(
            statistics,
            centre=[mech.lower],
            scale=[mech.upper - mech.lower],
            worst_case=mech.worst_case_variance(),
        )


@attrs.define
class OneBitMeanClient(MemoizingDevice):
    """One device's 1BitMean state: its rounding offset α and, per rounded point it has used,
    the memoized bit and how many reports it made. It belongs on the device;
    :meth:`to_dict` / :meth:`from_dict` keep it across restarts."""

    mechanism: OneBitMean
    offset: float
    memo: dict[int, int] = attrs.field(factory=dict)
    uses: dict[int, int] = attrs.field(factory=dict)

    def report(
        self, value: Any, /, *, rng: np.random.Generator | dpkit.SecureRandom | None = None
    ) -> int:
        """One report (0 or 1): the memoized bit of ``value``'s rounded point. An
        accelerator's array is refused: the memo lives on the host."""
        mech = self.mechanism
        self.check_host_value(value)
        generator, _ = resolve_rng(rng, owner=f"{mech.name} client")
        x = mech.checked_values(np.array([value], dtype=np.float64))
        point = int(mech.rounded(x, self.offset)[0])
        if point not in self.memo:
            self.memo[point] = int(mech._bits(np.array([point]), generator)[0])
        self.uses[point] = self.uses.get(point, 0) + 1
        return self.memo[point]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism.name,
            "parameters": self.saved_parameters(),
            "offset": self.offset,
            "points": [
                {"point": p, "bit": b, "reports": self.uses[p]} for p, b in self.memo.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OneBitMeanClient:
        try:
            mechanism = OneBitMean(**data["parameters"])
            offset = float(data["offset"])
            memo = {int(e["point"]): int(e["bit"]) for e in data["points"]}
            uses = {int(e["point"]): int(e["reports"]) for e in data["points"]}
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidData(
                f"not a saved 1BitMean client ({type(error).__name__}: {error})", field="state"
            ) from None
        if not (0.0 <= offset < 1.0) or any(
            not 0 <= p <= mechanism.intervals or b not in (0, 1) for p, b in memo.items()
        ):
            raise InvalidParameter("state", data, "a saved client that fits its mechanism")
        return cls(mechanism, offset, memo, uses)

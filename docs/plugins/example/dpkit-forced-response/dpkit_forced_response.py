"""The forced-response survey design as a dpkit plugin (an example for plugin authors).

Each respondent rolls a die: with probability ``forced_yes`` they answer "yes", with
probability ``forced_no`` they answer "no", and otherwise they answer truthfully
(Boruch 1971, "Assuring Confidentiality of Responses in Social Research: A Note on Strategies",
The American Sociologist 6(4); Fox & Tracy 1986, "Randomized Response", Section 2.3).
With t = 1 − forced_yes − forced_no the probability of a truthful answer,

    P[yes | 1] = t + forced_yes,   P[yes | 0] = forced_yes,
    P[no | 0] = t + forced_no,     P[no | 1] = forced_no,

so the design is ε-LDP with ε = max(ln((t + forced_yes)/forced_yes), ln((t + forced_no)/forced_no)).

:class:`NumericForcedResponse` asks the same of a number x in [low, high]: the respondent first
rounds x at random to one of the ends — to ``high`` with probability (x − low)/(high − low), so
the rounded bit is unbiased — and answers the bit by forced response. P[1 | x] =
forced_yes + t·(x − low)/(high − low) is linear in x, so the worst pair is the two ends and ε
is the binary design's (stochastic rounding then randomized response, as in Duchi, Jordan &
Wainwright 2018, JASA 113(521), §4.2.3). Its domain is ``dpkit.Interval(low, high)``: the
auditor draws its neighbouring inputs from there (the ends, the midpoint, the quarter points).

Both randomness modes are supported, as dpkit's built-ins do: ``rng=None`` or a
``dpkit.SecureRandom`` is secure mode, where each respondent's die is one 64-bit word compared
with integer thresholds rounded up (the realised forced probabilities are never below the
declared ones, so the realised ε never exceeds the claim); a ``numpy.random.Generator`` is fast
mode (seedable, for simulations), where it is a float uniform.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit

__all__ = ["ForcedResponse", "ForcedResponseEstimator", "NumericForcedResponse"]

_PROBABILITY = dpkit.Real(low=0.0, high=1.0, low_open=True, high_open=True)


@attrs.frozen
class ForcedResponse(dpkit.Mechanism):
    """Forced response: a forced "yes", a forced "no", or the truth."""

    name: ClassVar[str] = "forced_response"
    kind: ClassVar[Literal["local", "central"]] = "local"

    forced_yes: float = dpkit.parameter(
        _PROBABILITY, doc="probability of a forced 'yes'", default=1 / 6, typical=(0.05, 0.45)
    )
    forced_no: float = dpkit.parameter(
        _PROBABILITY, doc="probability of a forced 'no'", default=1 / 6, typical=(0.05, 0.45)
    )

    def __attrs_post_init__(self) -> None:
        if self.forced_yes + self.forced_no >= 1.0:
            raise dpkit.InvalidParameter(
                "forced_no",
                self.forced_no,
                f"< 1 - forced_yes = {1 - self.forced_yes:g}",
                owner=self.name,
            )

    @property
    def truthful(self) -> float:
        return 1.0 - self.forced_yes - self.forced_no

    @property
    def domain(self) -> dpkit.CategoricalDomain:
        return dpkit.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        t = self.truthful
        epsilon = max(
            math.log((t + self.forced_yes) / self.forced_yes),
            math.log((t + self.forced_no) / self.forced_no),
        )
        return dpkit.PureDP(epsilon=epsilon)

    def check_input(self, values: NDArray[Any], /) -> None:
        """Public phase (structure only): one answer per respondent."""
        if values.ndim != 1:
            raise dpkit.InvalidData(
                f"{self.name}: values must be a 1-D array, one answer per respondent",
                field="values",
            )

    def coerce(self, values: NDArray[Any], /, *, rng: Any) -> NDArray[np.int64]:
        """Private phase, total: an answer that is not 0 or 1 becomes a uniformly random bit,
        chosen for that respondent alone, so each report stays ε-LDP and none is dropped."""
        array = np.asarray(values)
        if array.dtype.kind in "biuf":
            valid = (array == 0) | (array == 1)  # NaN compares unequal: invalid
        else:  # text or objects: only the integers 0 and 1 are answers
            answers = [isinstance(v, (int, np.integer)) and v in (0, 1) for v in array.flat]
            valid = np.array(answers, dtype=bool).reshape(array.shape)
        out = np.zeros(array.shape, dtype=np.int64)
        out[valid] = array[valid].astype(np.int64)
        invalid = ~valid
        out[invalid] = rng.integers(0, 2, size=int(np.count_nonzero(invalid)))
        return out

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Each answer forced to 1, forced to 0, or kept. ``rng``: None or a SecureRandom
        (secure mode), or a numpy Generator (fast mode)."""
        generator, _mode = dpkit.resolve_rng(rng, owner=self.name)  # None → secure mode
        answers = dpkit.as_array(values, owner=self.name)
        if answers.size and (
            not np.issubdtype(answers.dtype, np.integer) or ((answers != 0) & (answers != 1)).any()
        ):
            raise dpkit.InvalidData(f"{self.name}: values must be 0 or 1", field="values")
        forced_yes, forced_no = self.forced(generator, answers.shape)
        return np.where(forced_yes, 1, np.where(forced_no, 0, answers)).astype(np.int64)

    def forced(
        self, generator: Any, shape: tuple[int, ...]
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """Who is forced to say "yes" and who "no": one die per respondent.

        Secure mode: one 64-bit word w per respondent, "yes" when w < T_yes and "no" when
        T_yes ≤ w < T_yes + T_no, with T = ⌈p·2⁶⁴⌉ (``dpkit.probability_threshold``, exact).
        Rounding both forced probabilities *up* can only lower ε, which falls as either grows.
        Fast mode: a float uniform u, "yes" when u < forced_yes, "no" when it is in the next
        forced_no.
        """
        if isinstance(generator, dpkit.SecureRandom):
            yes = dpkit.probability_threshold(self.forced_yes, rounding="up")
            # forced_yes + forced_no < 1 leaves room for both thresholds; min() keeps it total.
            no = min(dpkit.probability_threshold(self.forced_no, rounding="up"), 2**64 - yes)
            words = generator.words(math.prod(shape)).reshape(shape)
            forced_yes = words < np.uint64(yes)
            # words − T_yes wraps around below T_yes, where forced_yes already holds.
            return forced_yes, ~forced_yes & (words - np.uint64(yes) < np.uint64(no))
        u = generator.random(shape)
        forced_yes = u < self.forced_yes
        return forced_yes, (u >= self.forced_yes) & (u < self.forced_yes + self.forced_no)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        y, x = np.broadcast_arrays(np.asarray(outputs), np.asarray(inputs))
        p_yes = np.where(x == 1, self.truthful + self.forced_yes, self.forced_yes)
        return np.log(np.where(y == 1, p_yes, 1.0 - p_yes))

    def output_space(self) -> NDArray[np.int64]:
        return np.arange(2)


@attrs.frozen
class NumericForcedResponse(ForcedResponse):
    """Forced response on a number in [low, high], after unbiased random rounding to an end.

    The forced answers are a 1 (``forced_yes``) and a 0 (``forced_no``); ε is the binary
    design's (inherited ``privacy``), reached at the two ends of the interval.
    """

    name: ClassVar[str] = "numeric_forced_response"

    low: float = dpkit.parameter(dpkit.Real(), doc="lowest possible answer", default=0.0)
    high: float = dpkit.parameter(dpkit.Real(), doc="highest possible answer", default=1.0)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not self.low < self.high:
            raise dpkit.InvalidParameter(
                "high", self.high, f"> low = {self.low:g}", owner=self.name
            )

    @property
    def domain(self) -> dpkit.Interval:  # type: ignore[override]
        return dpkit.Interval(self.low, self.high)

    def coerce(self, values: NDArray[Any], /, *, rng: Any) -> NDArray[np.float64]:
        """Private phase, total: answers are clamped into [low, high]; one that is not a real
        number (NaN, text, None) becomes a uniformly random point of the interval, for that
        respondent alone, so each report stays ε-LDP and none is dropped."""
        array = np.asarray(values)
        if array.dtype.kind in "biuf":
            numbers = array.astype(np.float64)
        else:
            numbers = np.array([_real(v) for v in array.ravel().tolist()], dtype=np.float64)
            numbers = numbers.reshape(array.shape)
        missing = np.isnan(numbers)
        out = self.domain.clip(numbers)
        out[missing] = self.low + (self.high - self.low) * rng.random(int(missing.sum()))
        return out

    def _p_one(self, values: Any) -> NDArray[np.float64]:
        share = (np.asarray(values, dtype=np.float64) - self.low) / (self.high - self.low)
        return np.asarray(self.forced_yes + (1 - self.forced_yes - self.forced_no) * share)

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Round each answer at random to an end, then answer by forced response (secure
        mode for None or a SecureRandom, fast mode for a numpy Generator).

        The rounding compares a uniform on the 2⁻⁵³ grid (``random()``, exact in both modes)
        with the share: whatever its rounding, P[1 | x] stays between P[1 | low] and
        P[1 | high], so ε is still the forced answers' (reached at the ends, where the share is
        exactly 0 or 1).
        """
        generator, _mode = dpkit.resolve_rng(rng, owner=self.name)
        answers = dpkit.as_array(values, owner=self.name)
        if answers.dtype.kind not in "iuf" or not bool(self.domain.contains(answers).all()):
            raise dpkit.InvalidData(
                f"{self.name}: values must lie in [{self.low:g}, {self.high:g}]", field="values"
            )
        share = (answers.astype(np.float64) - self.low) / (self.high - self.low)
        rounded = generator.random(answers.shape) < share
        forced_yes, forced_no = self.forced(generator, answers.shape)
        return np.where(forced_yes, 1, np.where(forced_no, 0, rounded)).astype(np.int64)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        y, p_one = np.broadcast_arrays(np.asarray(outputs), self._p_one(inputs))
        return np.log(np.where(y == 1, p_one, 1.0 - p_one))


def _real(value: Any) -> float:
    """A record as a real number, or NaN when it is not one (never raises)."""
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        try:
            return float(value)
        except OverflowError:  # an integer beyond the floats: not a usable answer
            return math.nan
    return math.nan


class ForcedResponseEstimator(dpkit.Estimator):
    """Unbiased counts: with s "yes" among n answers, n̂₁ = (s − n·forced_yes) / t.

    Var[n̂₁] = (n₁ a(1 − a) + n₀ b(1 − b)) / t² with a = t + forced_yes, b = forced_yes
    (a sum of independent Bernoullis); the estimate clipped to [0, n] is plugged in for n₁.
    """

    mechanism: ForcedResponse

    def accumulate(self, reports: Any, /) -> dpkit.FrequencyCounts:
        answers = dpkit.as_array(reports, owner="forced_response estimator", field="reports")
        ones = int(np.count_nonzero(answers))
        return dpkit.FrequencyCounts(self.mechanism.name, [answers.size - ones, ones], answers.size)

    def estimate(
        self, statistics: dpkit.FrequencyCounts, /, *, method: str = "unbiased"
    ) -> dpkit.Estimate:
        self.check_method(method)
        self.check_statistics(statistics, 2)
        mech, n = self.mechanism, statistics.n
        ones = (statistics.counts[1] - n * mech.forced_yes) / mech.truthful
        n1 = min(max(ones, 0.0), float(n))
        a, b = mech.truthful + mech.forced_yes, mech.forced_yes
        variance = (n1 * a * (1 - a) + (n - n1) * b * (1 - b)) / mech.truthful**2
        return dpkit.Estimate(
            mech.name, method, n, [n - ones, ones], [variance, variance], categories=(0, 1)
        )


@dpkit.hookimpl
def dpkit_register_mechanisms(register: Callable[[type[dpkit.Mechanism]], None]) -> None:
    register(ForcedResponse)
    register(NumericForcedResponse)


@dpkit.hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], dpkit.Estimator]], None],
) -> None:
    register("forced_response", ForcedResponseEstimator)

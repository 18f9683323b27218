"""Means of numeric values from local reports: mergeable moment sums and the estimate.

The mean protocols (Duchi, Jordan & Wainwright 2018; Wang et al. 2019; ``dpkit_ldp``) give
each user a report Y_i with E[Y_i | x_i] = x_i, coordinate by coordinate. The estimator keeps,
per coordinate, the number of reports n, their sum and their sum of squares (:class:`MeanSums`,
which add up across chunks and machines), in the mechanism's *standardised* units
T = (Y − centre)/scale, in which the reports are of order one whatever the data's bounds (so the
sum of squares does not lose the spread to cancellation).

:class:`MeanEstimate` holds, per coordinate, μ̂ = centre + scale·T̄ and

* ``variance``: the plug-in s²/n, with s² = (Σ T² − (Σ T)²/n)/(n − 1) the sample variance of the
  reports (times scale²). For users who are an i.i.d. sample of a population, E[s²/n] is exactly
  Var[μ̂] around the population mean (the reports are then i.i.d. with variance Var(Y)); for the
  n users' own mean it overstates the variance by the spread of their values,
  Σ(x_i − x̄)²/(n(n − 1)), so the interval is conservative there. With n < 2 it is the
  worst case instead;
* ``worst_case_variance``: the mechanism's closed form max over inputs of Var[Y | x], divided by
  n (the papers' bound);
* ``confidence_interval``: the normal (Wald) interval μ̂ ± z·√v (central limit theorem: μ̂ is
  an average of n independent bounded reports), for one of two targets:

  - ``target="population"`` (the default): the mean of the population the users are an
    i.i.d. sample of, with v = ``variance`` (s²/n, whose expectation is exactly Var[μ̂]
    around it);
  - ``target="sample"``: the n users' own mean x̄, with v = min(``variance``,
    ``worst_case_variance``). Given the users' values, μ̂ − x̄ = Σ(Y_i − x_i)/n has variance
    Σ Var[Y | x_i]/n², below both: the worst case bounds every Var[Y | x_i], and s²/n
    estimates Σ Var[Y | x_i]/n² plus the spread of the x_i. It is narrower than the
    population interval when the mechanism's noise is small next to that spread (a large
    ε), where the population interval over-covers x̄.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.estimator import Statistics

__all__ = ["TARGETS", "MeanEstimate", "MeanSums"]

#: The means a :class:`MeanEstimate` interval is for: the population's, or the users' own.
TARGETS = ("population", "sample")


def _vector(values: Any) -> NDArray[np.float64]:
    array = np.atleast_1d(np.array(values, dtype=np.float64))
    array.setflags(write=False)
    return array


@attrs.frozen(eq=False)
class MeanSums(Statistics):
    """n, Σ T and Σ T² per coordinate of standardised reports: a sufficient statistic that adds up.

    >>> a = MeanSums(mechanism="pm", n=2, sums=[0.5], squares=[1.25])
    >>> b = MeanSums(mechanism="pm", n=1, sums=[-1.0], squares=[1.0])
    >>> (a + b).n, (a + b).sums.tolist(), (a + b).squares.tolist()
    (3, [-0.5], [2.25])
    """

    mechanism: str
    n: int = attrs.field(converter=int)
    sums: NDArray[np.float64] = attrs.field(converter=_vector)
    squares: NDArray[np.float64] = attrs.field(converter=_vector)

    @property
    def dimension(self) -> int:
        return int(self.sums.size)

    def __add__(self, other: MeanSums) -> MeanSums:
        if not isinstance(other, MeanSums):
            return NotImplemented
        if other.mechanism != self.mechanism or other.dimension != self.dimension:
            raise InvalidData(
                f"cannot merge sums of {other.mechanism!r} in {other.dimension} dimension(s) "
                f"into sums of {self.mechanism!r} in {self.dimension} dimension(s)",
                field="statistics",
            )
        return MeanSums(
            self.mechanism, self.n + other.n, self.sums + other.sums, self.squares + other.squares
        )


@attrs.frozen(eq=False)
class MeanEstimate:
    """The estimated mean of each coordinate, its variance and its confidence interval.

    See the module docstring. ``estimates`` has one entry per coordinate (one for a scalar
    mechanism; :attr:`mean` is that value). There is none of no reports (``n == 0`` is an
    :class:`~dpkit.errors.InvalidData`).

    Attributes:
        variance: the plug-in variance s²/n (``variance_method`` says which was used).
        worst_case_variance: the mechanism's worst case over inputs, divided by n.
    """

    mechanism: str
    n: int
    estimates: NDArray[np.float64] = attrs.field(converter=_vector)
    variance: NDArray[np.float64] = attrs.field(converter=_vector)
    worst_case_variance: NDArray[np.float64] = attrs.field(converter=_vector)
    variance_method: str = "sample variance of the reports / n"
    method: str = "unbiased"

    @classmethod
    def from_sums(
        cls,
        sums: MeanSums,
        *,
        centre: Any,
        scale: Any,
        worst_case: Any,
    ) -> MeanEstimate:
        """The estimate from merged sums of reports standardised as T = (Y − centre)/scale.

        ``worst_case`` is the mechanism's max over inputs of Var[T | x] per coordinate.
        """
        n = sums.n
        centre_v, scale_v = _vector(centre), _vector(scale)
        worst = _vector(worst_case) * scale_v**2
        if n == 0:
            raise InvalidData(
                f"{sums.mechanism}: no reports, so there is no mean to estimate", field="reports"
            )
        mean_t = sums.sums / n
        if n >= 2:
            spread = np.maximum(sums.squares - sums.sums * mean_t, 0.0) / (n - 1)
            variance, how = spread * scale_v**2 / n, "sample variance of the reports / n"
        else:
            variance, how = worst / n, "worst case over inputs (fewer than 2 reports)"
        return cls(sums.mechanism, n, centre_v + scale_v * mean_t, variance, worst / n, how)

    @property
    def dimension(self) -> int:
        return int(self.estimates.size)

    @property
    def mean(self) -> float:
        """The estimate of a scalar mechanism (one coordinate)."""
        if self.dimension != 1:
            raise InvalidParameter(
                "mean",
                f"{self.dimension} coordinates",
                "a one-dimensional estimate; read estimates[j] for coordinate j",
                owner="MeanEstimate",
            )
        return float(self.estimates[0])

    def confidence_interval(
        self, level: float = 0.95, *, target: str = "population"
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """μ̂ ± z·√v per coordinate, z = Φ⁻¹((1 + level)/2): the normal (Wald) interval for the
        ``target`` mean — ``"population"`` (v = ``variance``) or ``"sample"``, the users' own
        mean (v = min(``variance``, ``worst_case_variance``)); the module docstring says why."""
        if not isinstance(level, (int, float)) or not (0.0 < level < 1.0) or math.isnan(level):
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        if target not in TARGETS:
            raise InvalidParameter(
                "target", target, "'population' or 'sample'", owner="MeanEstimate"
            )
        variance = self.variance
        if target == "sample":
            variance = np.minimum(self.variance, self.worst_case_variance)
        half = NormalDist().inv_cdf(0.5 + level / 2.0) * np.sqrt(variance)
        return self.estimates - half, self.estimates + half

    def interval(
        self, level: float = 0.95, *, target: str = "population"
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`confidence_interval` (the same interval, the same ``target``)."""
        return self.confidence_interval(level, target=target)

    def rows(self, level: float = 0.95) -> list[dict[str, Any]]:
        """One dict per coordinate: ``coordinate``, ``estimate``, ``variance``, the interval's
        ``ci_lower`` and ``ci_upper`` at ``level`` and ``ci_method``."""
        low, high = self.confidence_interval(level)
        method = self.to_document(confidence=level)["confidence_interval"]["method"]
        return [
            {
                "coordinate": j,
                "estimate": float(self.estimates[j]),
                "variance": float(self.variance[j]),
                "ci_lower": float(low[j]),
                "ci_upper": float(high[j]),
                "ci_method": method,
            }
            for j in range(self.dimension)
        ]

    def table(self, level: float = 0.95) -> Any:
        """:meth:`rows` as a table: a pandas DataFrame (PyArrow where pandas is missing;
        needs ``dpkit[tables]``)."""
        from dpkit._summary import as_table

        columns = ("coordinate", "estimate", "variance", "ci_lower", "ci_upper", "ci_method")
        return as_table(self.rows(level), columns)

    def __str__(self) -> str:
        """A readable summary: the mean (per coordinate) with its 95 % interval."""
        from dpkit._summary import summary

        what = "mean" if self.dimension == 1 else f"mean of {self.dimension} coordinates"
        title = f"{self.mechanism} estimate: {what} from {self.n:,} reports"
        return summary(title, self.rows(0.95), "coordinate", 0.95)

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The estimate in a result document (:class:`dpkit.document.Document`): the number of
        reports, the mean, its variance and worst case, and the normal interval for the
        population mean at ``confidence`` (the users' own mean: :meth:`confidence_interval`); numbers for a scalar mechanism, lists (per coordinate) otherwise."""
        low, high = self.confidence_interval(confidence)

        def shown(values: NDArray[np.float64]) -> Any:
            return float(values[0]) if self.dimension == 1 else values.tolist()

        return {
            "n": self.n,
            "categories": None,
            "estimate": shown(self.estimates),
            "variance": shown(self.variance),
            "worst_case_variance": shown(self.worst_case_variance),
            "confidence_interval": {
                "level": confidence,
                "lower": shown(low),
                "upper": shown(high),
                "method": "normal approximation, for the population mean; variance: "
                f"{self.variance_method}",
            },
        }


def no_mean_document(n: int = 0) -> dict[str, Any]:
    """The result document of a local mean over no reports: no estimate, every field null."""
    return {
        "n": n,
        "categories": None,
        "estimate": None,
        "variance": None,
        "worst_case_variance": None,
        "confidence_interval": None,
    }

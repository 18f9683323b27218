"""Wang et al.'s Hybrid Mechanism (``hm``): the piecewise mechanism or Duchi et al.'s, at random.

Wang et al. 2019 (ICDE; arXiv:1907.00782), Section III-C: with probability α report the piecewise
mechanism's y (:mod:`dpkit_ldp.piecewise`), otherwise Duchi et al.'s ±B
(:mod:`dpkit_ldp.duchi`), both at the full ε. Each branch is ε-LDP and chosen independently of the
input, so the mixture is ε-LDP; both are unbiased, so

    Var[y | t] = α·Var_PM[y | t] + (1 − α)·(B² − t²).

Wang et al. take α = 1 − e^{−ε/2} for ε > ε*, which makes the t² terms cancel
(α/(e^{ε/2} − 1) = e^{−ε/2} = 1 − α), so the variance is the constant

    (e^{ε/2} + 3)/(3e^{ε/2}(e^{ε/2} − 1)) + (e^ε + 1)²/(e^{ε/2}(e^ε − 1)²),

and α = 0 (Duchi et al.'s mechanism alone) for ε ≤ ε*. ε* is where PM's variance at t = 0
equals Duchi's: with z = e^{ε/2}, (z + 3)/(3(z − 1)²) = (z² + 1)²/(z² − 1)², i.e.
3z³ − z² + z − 7 = 0 (derived here), whose real root gives ε* = 2 ln z ≈ 0.61; Wang et al.
state it as ε* = ln((−5 + 2∛(6353 − 405√241) + 2∛(6353 + 405√241))/27). Below ε*, raising α
from 0 increases the variance at t = 0, the worst case.

The law of a report is a mixture of atoms at ±B (probability (1 − α)·P_Duchi) and a density
(α·p_PM); :meth:`Hybrid.log_probability` is not declared (no single base measure), and the tests
check both parts. Secure mode: α is a 64-bit threshold (any α keeps ε-LDP and unbiasedness),
and each branch runs its own secure sampler.

On an accelerator's array, ``randomize`` runs on the device with the same law in either mode
(:mod:`dpkit.tensors.piecewise`): in secure mode the branch, the piecewise lattice release and
Duchi et al.'s report drawn as here from 64-bit words, in this order (the same words give the
same reports), and float64 reports as here.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import ArrayLibrary, SecureRandom, hybrid_reports, lie_threshold
from dpkit_ldp._numeric import NumericMechanism, check_scalar
from dpkit_ldp.duchi import duchi_bound, duchi_sample
from dpkit_ldp.piecewise import (
    piecewise_lattice,
    piecewise_report_bound,
    piecewise_sample,
    piecewise_variance,
)

__all__ = ["EPSILON_STAR", "Hybrid", "hybrid_alpha", "hybrid_sample", "hybrid_variance"]


def _epsilon_star() -> float:
    """2 ln z for the real root z of 3z³ − z² + z − 7 (Newton's method from z = 1.5)."""
    z = 1.5
    for _ in range(50):
        z -= (3 * z**3 - z**2 + z - 7) / (9 * z**2 - 2 * z + 1)
    return 2.0 * math.log(z)


#: ε* ≈ 0.61: below it the hybrid mechanism is Duchi et al.'s alone.
EPSILON_STAR = _epsilon_star()


def hybrid_alpha(epsilon: float) -> float:
    """α = 1 − e^{−ε/2} for ε > ε*, else 0."""
    return -math.expm1(-epsilon / 2.0) if epsilon > EPSILON_STAR else 0.0


def hybrid_variance(t: Any, epsilon: float) -> NDArray[np.float64]:
    """Var[y | t] = α·Var_PM[y | t] + (1 − α)(B² − t²)."""
    alpha = hybrid_alpha(epsilon)
    t2 = np.square(np.asarray(t, dtype=np.float64))
    duchi = duchi_bound(epsilon) ** 2 - t2
    return np.asarray(alpha * piecewise_variance(t, epsilon) + (1 - alpha) * duchi)


def hybrid_sample(t: NDArray[np.float64], epsilon: float, generator: Any) -> NDArray[np.float64]:
    """One report per t (standard units): PM with probability α, Duchi et al.'s otherwise."""
    flat = np.asarray(t, dtype=np.float64).reshape(-1)
    alpha = hybrid_alpha(epsilon)
    if isinstance(generator, SecureRandom):
        piecewise = generator.bernoulli(alpha, flat.size)
    else:
        piecewise = generator.random(flat.size) < alpha
    out = np.empty(flat.size)
    chosen = np.flatnonzero(piecewise)
    other = np.flatnonzero(~piecewise)
    out[chosen] = piecewise_sample(flat[chosen], epsilon, generator)
    out[other] = duchi_sample(flat[other], epsilon, generator)
    return out.reshape(np.shape(t))


@attrs.frozen
class Hybrid(NumericMechanism):
    """The Hybrid Mechanism of Wang et al. 2019 (module docstring), on ``[lower, upper]``.

    Reports lie in ``centre ± scale·C`` (C of the piecewise mechanism, > B).
    """

    name: ClassVar[str] = "hm"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    statistic: ClassVar[str] = "mean"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize"})

    @property
    def alpha(self) -> float:
        """The probability of the piecewise branch."""
        return hybrid_alpha(self.epsilon)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        return hybrid_reports(
            library,
            values,
            units=self.units,
            epsilon=self.epsilon,
            alpha=self.alpha,
            bound=duchi_bound(self.epsilon),
            lattice=piecewise_lattice(self.epsilon).device_law(),
            lie_threshold64=lie_threshold(self.epsilon, 2),
            rng=rng,
            owner=self.name,
        )

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        return hybrid_sample(t, self.epsilon, generator)

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return hybrid_variance(t, self.epsilon)

    def report_bound(self) -> NDArray[np.float64]:
        """The largest report magnitude in standard units (the piecewise branch's, ≥ B)."""
        return np.array([piecewise_report_bound(self.epsilon)])

    def worst_case_variance(self) -> NDArray[np.float64]:
        """max over t of Var[y | t] (linear in t², so at t = 0 or |t| = 1), standard units."""
        ends = hybrid_variance(np.array([0.0, 1.0]), self.epsilon)
        return np.array([float(ends.max())])

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        """Worst-case variance of the mean of n reports on [−1, 1] (Wang et al. 2019,
        Section III-C: the constant above for ε > ε*, B² otherwise), over n."""
        check_scalar(cls.name, dimension)
        return float(hybrid_variance(np.array([0.0, 1.0]), epsilon).max()) / n

"""Vectors of d values by sampling k attributes (``pm_multi``, ``hm_multi``).

Wang et al. 2019 (ICDE; arXiv:1907.00782), Section IV, Algorithm 4: a user with
t ∈ [−1, 1]^d (standard units) draws k of the d attributes uniformly without replacement and
reports, for each drawn attribute j, (d/k)·y_j with y_j the one-dimensional mechanism (the
piecewise or the hybrid mechanism) at ε/k, and 0 for the others. Each drawn attribute costs
ε/k (the largest double e with k·e ≤ ε exactly, :func:`share_epsilon`) and the draw does not
depend on the data, so the report is ε-LDP (basic composition over the k attributes: the
density ratio is a product of k ratios each ≤ e^{ε/k}). It is unbiased,
E = (k/d)·(d/k)·t_j, and

    Var[report_j | t] = (d/k)·(Var_1[y | t_j; ε/k] + t_j²) − t_j²,

largest at t_j² ∈ {0, 1} (it is linear in t_j²). Wang et al. choose k = max(1, min(d, ⌊ε/2.5⌋))
(their analysis of the variance bound in ε and k); ``k`` may be given instead.

The attributes are drawn by a partial Fisher–Yates shuffle of the column indices, vectorised over
users (k rounds of one exactly uniform integer per user), in both modes; secure mode then uses the
one-dimensional mechanism's secure sampler. A report on the data's scale is ``centre`` for an
attribute not drawn and ``centre + scale·(d/k)·y`` for a drawn one.

On an accelerator's array, ``randomize`` runs on the device with the same law in either mode
(:mod:`dpkit.tensors.sampled`): the same partial Fisher–Yates draw from 64-bit words, then the
one-dimensional device release at ε/k (secure mode: the lattice release and, for the hybrid,
its branch and Duchi et al.'s report, drawn as here), so that the same words give the same
reports, and float64 reports as here.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    Integer,
    InvalidParameter,
    hybrid_multi_reports,
    lie_threshold,
    parameter,
    piecewise_multi_reports,
    share_epsilon,
)
from dpkit_ldp._numeric import VectorMechanism, check_vector, float64_constants, row_sum
from dpkit_ldp.duchi import duchi_bound
from dpkit_ldp.hybrid import hybrid_alpha, hybrid_sample, hybrid_variance
from dpkit_ldp.piecewise import (
    _log_density,
    piecewise_lattice,
    piecewise_report_bound,
    piecewise_sample,
    piecewise_variance,
)

__all__ = [
    "HybridMulti",
    "PiecewiseMulti",
    "SampledAttributes",
    "choose_attributes",
    "optimal_k",
]


def optimal_k(epsilon: float, d: int) -> int:
    """k = max(1, min(d, ⌊ε/2.5⌋)) (Wang et al. 2019, Section IV)."""
    return max(1, min(d, math.floor(epsilon / 2.5)))


def choose_attributes(generator: Any, n: int, d: int, k: int) -> NDArray[np.int64]:
    """(n, k) attribute indices, each row a uniform k-subset of [d] in uniform order."""
    order = np.tile(np.arange(d, dtype=np.int64), (n, 1))
    rows = np.arange(n)
    for i in range(k):
        j = i + generator.integers(0, d - i, size=n, dtype=np.int64)
        picked = order[rows, j]
        order[rows, j] = order[rows, i]
        order[rows, i] = picked
    return order[:, :k]


@attrs.frozen
class SampledAttributes(VectorMechanism):
    """Shared by pm_multi and hm_multi: sample k attributes, report each at ε/k, scaled by d/k.

    Subclasses name the one-dimensional sampler (``_one``) and its variance (``_one_variance``),
    both in standard units at a given ε.
    """

    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    statistic: ClassVar[str] = "multivariate_mean"
    # The mechanism advised for one value (d = 1); None: this name without "_multi".
    one_value: ClassVar[str | None] = None
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize"})

    k: int | None = parameter(
        Integer(low=1, high=1 << 12),
        doc="number k of attributes reported per user (default max(1, min(d, ⌊ε/2.5⌋)))",
        default=None,
        optional=True,
    )

    def __attrs_post_init__(self) -> None:
        self._check_bounds()
        if self.k is not None and self.k > self.dimension:
            raise InvalidParameter(
                "k", self.k, f"at most dimension={self.dimension}", owner=self.name
            )

    @staticmethod
    def _one(t: NDArray[np.float64], epsilon: float, generator: Any) -> NDArray[np.float64]:
        raise NotImplementedError

    @staticmethod
    def _one_variance(t: Any, epsilon: float) -> NDArray[np.float64]:
        raise NotImplementedError

    @property
    def sampled(self) -> int:
        """k in use."""
        return self.k if self.k is not None else optimal_k(self.epsilon, self.dimension)

    @property
    def attribute_epsilon(self) -> float:
        """ε_k, each drawn attribute's ε: ε/k rounded down so that k·ε_k ≤ ε exactly
        (:func:`share_epsilon`)."""
        return share_epsilon(self.epsilon, self.sampled)

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        n, d = t.shape
        k = self.sampled
        columns = choose_attributes(generator, n, d, k).reshape(-1)
        rows = np.repeat(np.arange(n), k)
        reports = np.zeros((n, d))
        reports[rows, columns] = (d / k) * self._one(
            t[rows, columns], self.attribute_epsilon, generator
        )
        return reports

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """(d/k)·(Var_1[y | t_j; ε/k] + t_j²) − t_j²."""
        ratio = self.dimension / self.sampled
        t2 = np.square(np.asarray(t, dtype=np.float64))
        one = self._one_variance(t, self.attribute_epsilon)
        return np.asarray(ratio * (one + t2) - t2, dtype=np.float64)

    def _standard_rows(self, xp: Any, y: Any, x: Any) -> tuple[Any, Any]:
        """(reports, inputs) in standard units (:meth:`standard_operands`), both broadcast to
        their common shape."""
        z, t = self.standard_operands(xp, y, x)
        shape = tuple(np.broadcast_shapes(tuple(z.shape), tuple(t.shape)))
        return xp.broadcast_to(z, shape), xp.broadcast_to(t, shape)

    def report_bound(self) -> NDArray[np.float64]:
        """The largest report magnitude per coordinate in standard units: (d/k)·C(ε/k)."""
        k = self.sampled
        bound = self.dimension / k * piecewise_report_bound(self.attribute_epsilon)
        return np.full(self.dimension, bound)

    def worst_case_variance(self) -> NDArray[np.float64]:
        """The larger of the variance at t_j = 0 and |t_j| = 1, per coordinate (standard units)."""
        worst = float(self._standard_variance(np.array([0.0, 1.0])).max())
        return np.full(self.dimension, worst)

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        """Worst-case variance of one coordinate's mean of n reports on [−1, 1] at Wang et al.'s
        k (Section IV), over n. For one value (d = 1) it is the one-dimensional mechanism."""
        check_vector(cls.name, dimension, cls.one_value)
        mechanism = cls(epsilon=epsilon, dimension=dimension)
        return float(mechanism.worst_case_variance()[0]) / n


@attrs.frozen
class PiecewiseMulti(SampledAttributes):
    """Wang et al.'s multidimensional Piecewise Mechanism (module docstring)."""

    name: ClassVar[str] = "pm_multi"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    _one = staticmethod(piecewise_sample)
    _one_variance = staticmethod(piecewise_variance)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        k = self.sampled
        epsilon = self.attribute_epsilon  # the CPU's ε/k, as _sample passes it
        return piecewise_multi_reports(
            library,
            values,
            dimension=self.dimension,
            sampled=k,
            units=self.units,
            epsilon=epsilon,
            lattice=piecewise_lattice(epsilon).device_law(),
            rng=rng,
            owner=self.name,
        )

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log-density of a report (..., d), w.r.t. (which attributes are non-zero) × Lebesgue
        on them: −log C(d, k) + Σ_drawn [log p_PM(y_j·k/d | t_j; ε/k) + log(k/d) − log scale].
        A report with other than k non-zero attributes has density 0 (outputs and inputs
        broadcasting to (..., d); ``ValueError`` for another last axis).

        The sum runs over the d attributes left to right (0 for one not drawn), then
        −log C(d, k). An accelerator's array (either operand) is scored on its device,
        float64, in its type, by the same operations in its namespace
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there): the logarithms are constants, so the host's numbers.
        """
        return self._scored(outputs, inputs)

    def _log_probability(self, xp: Any, device: Any, y: Any, x: Any) -> Any:
        """:meth:`log_probability` of float64 arrays of the namespace ``xp`` on ``device``
        (numpy's on the host): y on the data's scale, x the inputs."""
        d, k = self.dimension, self.sampled
        y, t = self._standard_rows(xp, y, x)
        drawn = y != 0.0
        per = _log_density(xp, device, y * (k / d), t, self.attribute_epsilon)
        per = per + math.log(k / d) - math.log(self.scale)
        zero, none = float64_constants(xp, device, 0.0, -math.inf)
        total = row_sum(xp.where(drawn, per, zero)) - math.log(math.comb(d, k))
        count = xp.sum(xp.astype(drawn, xp.int64), axis=-1)
        return xp.where(count == k, total, none)


@attrs.frozen
class HybridMulti(SampledAttributes):
    """Wang et al.'s multidimensional Hybrid Mechanism (module docstring)."""

    name: ClassVar[str] = "hm_multi"

    _one = staticmethod(hybrid_sample)
    _one_variance = staticmethod(hybrid_variance)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        k = self.sampled
        epsilon = self.attribute_epsilon  # the CPU's ε/k, as _sample passes it
        return hybrid_multi_reports(
            library,
            values,
            dimension=self.dimension,
            sampled=k,
            units=self.units,
            epsilon=epsilon,
            alpha=hybrid_alpha(epsilon),
            bound=duchi_bound(epsilon),
            lattice=piecewise_lattice(epsilon).device_law(),
            lie_threshold64=lie_threshold(epsilon, 2),
            rng=rng,
            owner=self.name,
        )

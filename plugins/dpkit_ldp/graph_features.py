"""Node features for graph learning: the multi-bit mechanism (``multibit``).

Sajadmanesh & Gatica-Perez 2021, "Locally Private Graph Neural Networks" (CCS), Section 4.1,
Algorithm 1 (the multi-bit encoder) and its rectifier (Eq. 3): a node with features
x ∈ [α, β]^d draws m of its d features uniformly without replacement and, for each drawn
feature i, sends a ±1 bit with

    P[+1] = 1/(e^{ε/m} + 1) + (x_i − α)/(β − α) · (e^{ε/m} − 1)/(e^{ε/m} + 1),

and 0 for the others; the server's rectified feature is

    x′_i = (d(β − α)/(2m)) · ((e^{ε/m} + 1)/(e^{ε/m} − 1)) · x*_i + (α + β)/2,

an unbiased estimate of x_i. In the standard units t = (x − (α + β)/2)/((β − α)/2) this is
exactly Wang et al. 2019's Algorithm 4 (sample m attributes, report each at ε/m, scaled by
d/m; :mod:`dpkit_ldp.sampled`) with the one-bit mechanism of Duchi, Jordan & Wainwright 2018
(±B, B = (e^{ε/m} + 1)/(e^{ε/m} − 1), P[+B] = 1/2 + t/(2B)), which is how it is implemented:
``randomize`` returns the rectified features x′ (float64, the caller's array type), secure by
default (:func:`dpkit_ldp.duchi.duchi_sample`: stochastic rounding, then randomized response
with the exact lie threshold). On an accelerator's array ``randomize`` runs on the device with
the same law in either mode, the features drawn and each bit decided exactly as here
(:mod:`dpkit.tensors.multibit`: the same words give the same reports).

Privacy: each drawn feature's two report laws are within e^{ε/m} (ε/m rounded down so that m
parts compose to at most ε exactly, :func:`dpkit.privacy.share_epsilon`), the draw of the
features does not depend on the data, so a node's whole feature vector is ε-LDP (basic composition over m).
Variance per feature: Var[x′_i] = scale²·((d/m)·B² − t_i²) (the sampled mechanism's
(d/m)(Var₁ + t²) − t² with Var₁ = B² − t²). The number of drawn features defaults to
Sajadmanesh & Gatica-Perez's m* = max(1, min(d, ⌊ε/2.18⌋)), which minimises the worst-case
variance.

Node *labels* are categories: perturb them with ``krr`` (k-ary randomized response), whose
estimator gives the label distribution with its exact variance. Both are denoised over the
(public) graph by post-processing: :func:`dpkit.graph.propagate` (KProp, for the rectified
features) and :func:`dpkit.graph.label_distribution` (for the krr labels).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    Integer,
    lie_threshold,
    multibit_reports,
    parameter,
)
from dpkit_ldp._numeric import float64_constants, row_sum
from dpkit_ldp.duchi import _plus_probability, duchi_bound, duchi_sample
from dpkit_ldp.sampled import SampledAttributes

__all__ = ["MultiBit", "optimal_m"]

#: Largest number of outputs C(d, m)·2^m that output_space() enumerates.
_ENUMERABLE = 1 << 12


def optimal_m(epsilon: float, d: int) -> int:
    """m* = max(1, min(d, ⌊ε/2.18⌋)) (Sajadmanesh & Gatica-Perez 2021, Section 4.1)."""
    return max(1, min(d, math.floor(epsilon / 2.18)))


def _duchi_variance(t: Any, epsilon: float) -> NDArray[np.float64]:
    return np.asarray(duchi_bound(epsilon) ** 2 - np.square(t), dtype=np.float64)


@attrs.frozen
class MultiBit(SampledAttributes):
    """The multi-bit mechanism and its rectifier for node features (module docstring)."""

    name: ClassVar[str] = "multibit"
    one_value: ClassVar[str | None] = "duchi"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    k: int | None = parameter(
        Integer(low=1, high=1 << 12),
        doc="number m of features drawn per node (default m* = max(1, min(d, ⌊ε/2.18⌋)))",
        default=None,
        optional=True,
    )

    _one = staticmethod(duchi_sample)
    _one_variance = staticmethod(_duchi_variance)

    @property
    def sampled(self) -> int:
        """m in use."""
        return self.k if self.k is not None else optimal_m(self.epsilon, self.dimension)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        d, m = self.dimension, self.sampled
        level = d / m * duchi_bound(self.attribute_epsilon)
        minus, centre, plus = (
            float(report) for report in self.to_data(np.array([-level, 0.0, level]))
        )
        return multibit_reports(
            library,
            values,
            dimension=d,
            sampled=m,
            units=self.units,
            reports=(minus, centre, plus),
            epsilon=self.attribute_epsilon,
            lie_threshold64=lie_threshold(self.attribute_epsilon, 2),
            rng=rng,
            owner=self.name,
        )

    def report_bound(self) -> NDArray[np.float64]:
        """(d/m)·B per coordinate, in standard units."""
        m = self.sampled
        return np.full(self.dimension, self.dimension / m * duchi_bound(self.attribute_epsilon))

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[report | x] = −log C(d, m) + Σ_drawn log P[±B | t_j; ε/m]; −inf for a report
        that is not m features at ±(d/m)B and the rest at the centre (outputs and inputs
        broadcasting to (..., d); ``ValueError`` for another last axis).

        The sum runs over the d features left to right (0 for one not drawn), then −log C(d, m).
        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there): each probability with the host's operations in the host's order, so the same
        double, its logarithm by the device's ``log`` (within two ulps of the host's), and the
        sum in the host's order, so within the bound that :mod:`dpkit.tensors.log_probability`
        derives for a sum of m such logarithms; −inf and NaN where the host's are.
        """
        return self._scored(outputs, inputs)

    def _log_probability(self, xp: Any, device: Any, y: Any, x: Any) -> Any:
        """:meth:`log_probability` of float64 arrays of the namespace ``xp`` on ``device``
        (numpy's on the host): y on the data's scale, x the inputs."""
        d, m = self.dimension, self.sampled
        level = d / m * duchi_bound(self.attribute_epsilon)  # finite: ε/m > 0
        y, t = self._standard_rows(xp, y, x)
        drawn = y != 0.0
        # numpy's isclose(|y|, level, rtol=1e-9) (atol = 1e-8), as numpy computes it:
        # |(|y|) − level| ≤ 1e-8 + 1e-9·|level|, for a finite level (x == level is within it).
        on_level = (xp.abs(xp.abs(y) - level) <= 1e-8 + 1e-9 * abs(level)) | ~drawn
        tail = math.exp(-self.attribute_epsilon)  # plus_probability's e^{−ε} at ε/m
        per = xp.where(
            y > 0.0,
            xp.log(_plus_probability(t, tail)),
            xp.log(_plus_probability(-t, tail)),
        )
        zero, none = float64_constants(xp, device, 0.0, -math.inf)
        total = row_sum(xp.where(drawn, per, zero)) - math.log(math.comb(d, m))
        count = xp.sum(xp.astype(drawn, xp.int64), axis=-1)
        valid = (count == m) & xp.all(on_level, axis=-1)
        return xp.where(valid, total, none)

    def output_space(self) -> NDArray[np.float64]:
        """Every report (C(d, m)·2^m of them, up to 4096), on the data's scale."""
        d, m = self.dimension, self.sampled
        if math.comb(d, m) << m > _ENUMERABLE:
            raise NotImplementedError(f"C({d}, {m})·2^{m} outputs are too many to enumerate")
        level = d / m * duchi_bound(self.attribute_epsilon)
        rows = []
        for chosen in itertools.combinations(range(d), m):
            for signs in itertools.product((-1.0, 1.0), repeat=m):
                row = np.zeros(d)
                row[list(chosen)] = np.array(signs) * level
                rows.append(row)
        return self.to_data(np.array(rows))

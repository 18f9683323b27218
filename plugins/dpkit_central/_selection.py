"""The shared shape of the selection mechanisms (exponential, report-noisy-max, permute-and-flip).

Each picks a candidate index from a vector of utilities whose neighbours differ by at most
Δu per candidate (L∞), all in the same direction when ``monotone``; each is pure ε-DP.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import attrs

from dpkit import Boolean, Mechanism, PureDP, Real, VectorDomain, parameter

POSITIVE = Real(low=0.0, low_open=True)


@attrs.frozen
class Selection(Mechanism):
    """Base of the selection mechanisms: parameters, input domain and privacy event."""

    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"

    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    sensitivity: float = parameter(
        POSITIVE, doc="sensitivity Δu of every utility", default=1.0, typical=(0.1, 10.0)
    )
    monotone: bool = parameter(
        Boolean(), doc="utilities move in the same direction between neighbours", default=False
    )

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=math.inf, monotone=self.monotone)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

"""Asymmetric randomized response with edge sampling (``graph_arr``)."""

from __future__ import annotations

import decimal
import math
from typing import ClassVar

import attrs

from dpkit.plugin import EPSILON, InvalidParameter, Real, parameter
from dpkit_ldp._adjacency import (
    AdjacencyMechanism,
    decimal_of,
    nodes_parameter,
    output_parameter,
    pairs_parameter,
)
from dpkit_ldp._lattice import epsilon_decimal

__all__ = ["AsymmetricRandomizedResponse"]

_CONTEXT = decimal.Context(prec=60)


@attrs.frozen
class AsymmetricRandomizedResponse(AdjacencyMechanism):
    """Asymmetric randomized response (ARR) on every bit of a user's neighbour list.

    Imola, Murakami & Chaudhuri 2022, "Communication-Efficient Triangle Counting under Local
    Differential Privacy" (USENIX Security), Section 4.1:

        P[report 1 | a_ij = 1] = μ,      P[report 1 | a_ij = 0] = μ·e^{−ε},

    with 0 < μ ≤ e^ε/(1 + e^ε). It is ε-edge LDP: the ratio of the two laws of a bit is e^ε at a
    reported 1 and (1 − μe^{−ε})/(1 − μ) ≤ e^ε at a 0 (the bound on μ). It is randomized
    response followed by keeping each reported 1 with probability μ(1 + e^ε)/e^ε (ibid.;
    μ = e^ε/(1 + e^ε) is plain randomized response); a small μ makes the noisy graph sparse —
    about μe^{−ε}·n²/2 reported pairs in the ``"once"`` form — so the ``"sparse"`` encoding
    reaches graphs of millions of nodes. Relationship DP as for ``graph_rr``: ε with
    ``pairs="once"``, 2ε with ``"both"`` (:attr:`relationship_privacy`).
    """

    name: ClassVar[str] = "graph_arr"

    epsilon: float = parameter(EPSILON, doc="privacy loss ε of each bit", typical=(0.05, 6.0))
    nodes: int = nodes_parameter()
    mu: float = parameter(
        Real(low=0.0, high=1.0, low_open=True, high_open=True),
        doc="probability μ of reporting an existing edge, at most e^ε/(1 + e^ε)",
        typical=(0.01, 0.5),
    )
    pairs: str = pairs_parameter()
    output: str = output_parameter()

    def __attrs_post_init__(self) -> None:
        if self.mu > self.largest_mu(self.epsilon):
            raise InvalidParameter(
                "mu",
                self.mu,
                f"at most e^ε/(1 + e^ε) = {self.largest_mu(self.epsilon):.6g} at ε = "
                f"{self.epsilon:g} (else a reported 0 reveals more than ε)",
                owner=self.name,
            )

    @staticmethod
    def largest_mu(epsilon: float) -> float:
        """The largest double μ ≤ e^ε/(1 + e^ε) (evaluated in 60 digits)."""
        odds = _CONTEXT.exp(epsilon_decimal(epsilon))
        bound = _CONTEXT.divide(odds, _CONTEXT.add(odds, decimal.Decimal(1)))
        value = float(bound)
        return value if decimal_of(value) <= bound else math.nextafter(value, 0.0)

    def _decimals(self) -> tuple[decimal.Decimal, decimal.Decimal]:
        mu = decimal_of(self.mu)
        return mu, _CONTEXT.multiply(mu, _CONTEXT.exp(-epsilon_decimal(self.epsilon)))

    @property
    def report_one(self) -> float:
        """μ."""
        return self.mu

    @property
    def report_zero(self) -> float:
        """μ·e^{−ε}."""
        return self.mu * math.exp(-self.epsilon)

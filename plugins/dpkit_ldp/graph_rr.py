"""Randomized response on neighbour lists (``graph_rr``): each adjacency bit flipped.

The randomizer of the seed's graph example (perturb the adjacency matrix, then train on it),
with its privacy stated per user and per edge, and secure sampling.
"""

from __future__ import annotations

import decimal
import math
from typing import ClassVar

import attrs

from dpkit.plugin import EPSILON, parameter
from dpkit_ldp._adjacency import (
    AdjacencyMechanism,
    nodes_parameter,
    output_parameter,
    pairs_parameter,
)
from dpkit_ldp._lattice import epsilon_decimal

__all__ = ["GraphRandomizedResponse"]

_CONTEXT = decimal.Context(prec=60)


@attrs.frozen
class GraphRandomizedResponse(AdjacencyMechanism):
    """Warner's randomized response on every bit of a user's neighbour list.

    Qin et al. 2017 (CCS), Section 4; Imola, Murakami & Chaudhuri 2021 (USENIX Security),
    Section 4.1 ("RR" on the lower triangle of the adjacency matrix):

        P[report a_ij] = p = e^ε/(1 + e^ε),      P[report 1 − a_ij] = 1 − p = 1/(1 + e^ε),

    so p₁ = p and p₀ = 1/(1 + e^ε), and a neighbour list is **ε-edge LDP** (its neighbours
    differ in one bit, whose two report laws are within e^ε). For the whole graph
    (**relationship DP**): with ``pairs="once"`` user i reports only the pairs j < i, so each
    edge is reported once and the graph's reports are ε-relationship DP; with ``pairs="both"``
    both endpoints report it, independently, and they are 2ε-relationship DP (Imola et al.
    2021, Proposition 1) — :attr:`relationship_privacy` says which, and a session on graphs
    (:meth:`on_graphs`) charges it. Perturbing all n² entries independently (the seed's code)
    is the ``"both"`` form: its guarantee per edge is 2ε, not ε.

    Secure mode (``rng=None``) compares one ChaCha20 word per bit with the flip threshold of
    :func:`dpkit.plugin.lie_threshold` (1/(1 + e^ε) rounded up to the 2⁻⁶⁴ grid), as ``rr`` does;
    the sparse encoding draws the reported 1s only (:mod:`dpkit_ldp._adjacency`).
    """

    name: ClassVar[str] = "graph_rr"

    epsilon: float = parameter(EPSILON, doc="privacy loss ε of each bit", typical=(0.05, 6.0))
    nodes: int = nodes_parameter()
    pairs: str = pairs_parameter()
    output: str = output_parameter()

    def _decimals(self) -> tuple[decimal.Decimal, decimal.Decimal]:
        odds = _CONTEXT.exp(epsilon_decimal(self.epsilon))
        zero = _CONTEXT.divide(decimal.Decimal(1), _CONTEXT.add(odds, decimal.Decimal(1)))
        return _CONTEXT.subtract(decimal.Decimal(1), zero), zero

    @property
    def report_one(self) -> float:
        """p = e^ε/(1 + e^ε)."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    @property
    def report_zero(self) -> float:
        """1 − p = 1/(1 + e^ε), computed without overflow."""
        t = math.exp(-self.epsilon)
        return t / (1.0 + t)

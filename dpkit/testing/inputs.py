"""Neighbouring inputs for the auditor, derived from a mechanism's declared domain.

A violation is only visible on the right pair of neighbours (auditing note §1; Ding et al. 2018,
§5.1), so the auditor always includes the *worst-case* pairs of the declared relation:

* :class:`~dpkit.CategoricalDomain` (local DP): any two distinct values neighbour; the pairs are
  the extremes ``(0, k−1)``, ``(0, 1)`` (both orders) plus further distinct pairs drawn at random.
* :class:`~dpkit.VectorDomain` (central DP) in *scalar* mode, where ``randomize`` maps an array of
  answers element by element: ``x = 0`` and ``x' = ±Δ``. The one-dimensional reduction is exact
  for the mechanisms dpkit knows: product Laplace/geometric noise has privacy loss
  ε·‖x − x'‖₁/Δ₁ whichever coordinates move, and an isotropic Gaussian's loss depends only on
  ‖x − x'‖₂ (Balle & Wang 2018, Lemma 3), so moving one coordinate by the full Δ is worst.
* :class:`~dpkit.VectorDomain` in *vector* mode, where one input is a vector (the utilities of the
  exponential mechanism, the scores of report-noisy-max) and ``randomize`` maps a batch of rows:
  StatDP's patterns (Ding et al. 2018, §5.1) clipped to the norm ball: one coordinate up, all
  coordinates up ("all shift", which exposes a released noisy maximum), and the "x-shape" pair
  where one coordinate goes up and the rest go down (which exposes an exponential mechanism
  missing its factor 2 on a non-monotone utility). Pairs that move coordinates in both
  directions are left out when the domain declares ``monotone=True``.

The plan of how to call ``randomize`` is found by probing it once with a small batch: the
auditor never guesses a calling convention it has not seen work.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.domains import CategoricalDomain, VectorDomain
from dpkit.mechanism import Mechanism

__all__ = ["InputPlan", "Unsupported", "plan_inputs"]

#: Number of candidates (coordinates) used for vector-input mechanisms.
VECTOR_DIMENSION = 8


class Unsupported(Exception):
    """The auditor cannot handle this mechanism (or this tier of it); the message says why."""


@attrs.frozen
class InputPlan:
    """How to feed one input value ``n`` times to ``randomize`` and which pairs to try."""

    mode: Literal["categorical", "scalar", "vector"]
    dimension: int
    sensitivity: float
    integer: bool

    def batch(self, value: Any, n: int) -> NDArray[Any]:
        """``n`` copies of one input, shaped for a vectorised ``randomize`` call."""
        if self.mode == "vector":
            return np.tile(np.asarray(value, dtype=self.dtype), (n, 1))
        return np.full(n, value, dtype=self.dtype)

    @property
    def dtype(self) -> type:
        return np.int64 if self.mode == "categorical" or self.integer else np.float64

    def describe(self, value: Any) -> str:
        array = np.asarray(value)
        if array.ndim == 0:
            return f"{array.item():g}" if self.mode != "categorical" else str(int(array))
        return "[" + ", ".join(f"{v:g}" for v in array.tolist()) + "]"


def _first_dimension(output: Any) -> int | None:
    shape = np.shape(output)
    return shape[0] if shape else None


def plan_inputs(mechanism: Mechanism, *, rng: np.random.Generator) -> InputPlan:
    """Find how ``randomize`` takes a batch of one input, or raise :class:`Unsupported`."""
    domain = mechanism.domain
    probe = 16
    if isinstance(domain, CategoricalDomain):
        plan = InputPlan("categorical", 1, 1.0, True)
        try:
            output = mechanism.randomize(plan.batch(0, probe), rng=rng)
        except Exception as error:
            raise Unsupported(
                f"randomize refused category indices ({type(error).__name__}: {error})"
            ) from None
        if _first_dimension(output) != probe:
            raise Unsupported(
                f"randomize of {probe} copies of one value returned shape {np.shape(output)}, "
                f"not one report per value"
            )
        return plan
    if not isinstance(domain, VectorDomain):
        raise Unsupported(f"unknown input domain {type(domain).__name__}")
    sensitivity = float(domain.sensitivity)
    if not math.isfinite(sensitivity) or sensitivity <= 0:
        raise Unsupported(f"declared sensitivity {sensitivity!r} is not a positive number")
    integer = bool(domain.integer)
    if integer:
        # Integer answers within Δ of each other differ by at most ⌊Δ⌋.
        sensitivity = float(math.floor(sensitivity))
        if sensitivity < 1:
            raise Unsupported(
                f"no two integer answers are within the sensitivity {domain.sensitivity:g}"
            )
    scalar = InputPlan("scalar", 1, sensitivity, integer)
    try:
        output = mechanism.randomize(scalar.batch(0, probe), rng=rng)
        if _first_dimension(output) == probe:
            return scalar
    except Exception:
        pass
    vector = InputPlan("vector", VECTOR_DIMENSION, sensitivity, integer)
    try:
        output = mechanism.randomize(vector.batch(np.zeros(VECTOR_DIMENSION), probe), rng=rng)
    except Exception as error:
        raise Unsupported(
            "randomize accepts neither an array of answers (one output each) nor a batch of "
            f"vectors, one per row ({type(error).__name__}: {error})"
        ) from None
    if _first_dimension(output) != probe:
        raise Unsupported(
            f"randomize of a ({probe}, {VECTOR_DIMENSION}) batch returned shape "
            f"{np.shape(output)}, not one output per row"
        )
    return vector


def worst_case_pairs(mechanism: Mechanism, plan: InputPlan) -> list[tuple[Any, Any]]:
    """The worst-case neighbouring pairs of the declared relation (both orders)."""
    domain = mechanism.domain
    pairs: list[tuple[Any, Any]] = []
    if plan.mode == "categorical":
        assert isinstance(domain, CategoricalDomain)
        last = domain.size - 1
        pairs = [(0, last), (last, 0)]
        if last > 1:
            pairs += [(0, 1), (1, 0)]
        return pairs
    delta = plan.sensitivity
    if plan.mode == "scalar":
        return (
            [(0.0, delta), (delta, 0.0)] if not plan.integer else [(0, int(delta)), (int(delta), 0)]
        )
    assert isinstance(domain, VectorDomain)
    m = plan.dimension
    zero = np.zeros(m)
    one_up = zero.copy()
    one_up[0] = delta
    pairs = [(zero, one_up), (one_up, zero)]
    if domain.norm == math.inf:
        all_up = np.full(m, delta)
        pairs += [(zero, all_up), (all_up, zero)]
        if not getattr(domain, "monotone", False):
            rest_up = all_up.copy()
            rest_up[0] = 0.0
            pairs += [(one_up, rest_up), (rest_up, one_up)]
    if plan.integer:
        pairs = [(np.rint(a).astype(np.int64), np.rint(b).astype(np.int64)) for a, b in pairs]
    return pairs


def random_pairs(
    mechanism: Mechanism, plan: InputPlan, count: int, *, rng: np.random.Generator
) -> list[tuple[Any, Any]]:
    """Further neighbouring pairs drawn at random from the declared relation."""
    domain = mechanism.domain
    pairs: list[tuple[Any, Any]] = []
    if count <= 0:
        return pairs
    if plan.mode == "categorical":
        assert isinstance(domain, CategoricalDomain)
        if domain.size < 2:
            return pairs
        x = rng.integers(0, domain.size, size=count)
        y = (x + rng.integers(1, domain.size, size=count)) % domain.size
        return [(int(a), int(b)) for a, b in zip(x, y, strict=True)]
    delta = plan.sensitivity
    for _ in range(count):
        if plan.mode == "scalar":
            base = rng.uniform(-10.0, 10.0) * delta
            shift = rng.choice([-1.0, 1.0]) * delta * rng.uniform(0.5, 1.0)
            if plan.integer:
                base, shift = round(base), int(rng.choice([-1, 1]) * delta)
            pairs.append((base, base + shift))
            continue
        origin = rng.uniform(-2.0, 2.0, size=plan.dimension) * delta
        assert isinstance(domain, VectorDomain)
        if domain.norm == math.inf:
            move = rng.uniform(-1.0, 1.0, size=plan.dimension) * delta
            if getattr(domain, "monotone", False):
                move = np.abs(move) * rng.choice([-1.0, 1.0])
        else:
            move = np.zeros(plan.dimension)
            move[rng.integers(plan.dimension)] = rng.choice([-1.0, 1.0]) * delta
        if plan.integer:
            origin, move = np.rint(origin), np.trunc(move)
        pairs.append((origin, origin + move))
    return pairs

"""Simulated populations for figures and demos: a Zipf-distributed categorical attribute.

The truncated Zipf law over the categories 0 .. k−1 is

    P(v) = (v + 1)^(−s) / Σ_{u=1..k} u^(−s),

the usual shape of survey answers and telemetry values (a few common values, a long tail; Wang,
Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency Estimation",
Section 6.1, evaluate frequency oracles on Zipf data with s = 1.1).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.domains import CategoricalDomain
from dpkit.errors import InvalidParameter
from dpkit.estimator import Estimate
from dpkit.mechanism import Mechanism
from dpkit.params import Integer, Real
from dpkit.registry import Registry, get_registry

__all__ = ["SimulatedHistogram", "simulate_histogram", "zipf_probabilities", "zipf_values"]


def _check(name: str, value: Any, domain: Integer | Real, owner: str) -> Any:
    try:
        return domain.convert(value)
    except (ValueError, TypeError, OverflowError):
        raise InvalidParameter(name, value, domain.describe(), owner=owner) from None


def zipf_probabilities(k: int, *, s: float = 1.1) -> NDArray[np.float64]:
    """P(0), …, P(k − 1) of the truncated Zipf law with exponent ``s`` (module docstring)."""
    k = _check("k", k, Integer(low=2), "zipf")
    s = _check("s", s, Real(low=0.0), "zipf")
    weights = np.arange(1, k + 1, dtype=np.float64) ** (-s)
    probabilities: NDArray[np.float64] = weights / weights.sum()
    return probabilities


def zipf_values(k: int, n: int, *, s: float = 1.1, rng: np.random.Generator) -> NDArray[np.int64]:
    """``n`` values drawn i.i.d. from the truncated Zipf law on 0 .. k−1 (vectorised)."""
    n = _check("n", n, Integer(low=1), "zipf")
    probabilities = zipf_probabilities(k, s=s)
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng", rng, "a numpy.random.Generator, e.g. numpy.random.default_rng(7)", owner="zipf"
        )
    return rng.choice(probabilities.size, size=n, p=probabilities).astype(np.int64)


@attrs.frozen(eq=False)
class SimulatedHistogram:
    """A simulated survey: the population's true counts and the mechanism's estimate of them."""

    mechanism: Mechanism
    true_counts: NDArray[np.int64]
    estimate: Estimate


def simulate_histogram(
    mechanism: Mechanism,
    *,
    n: int = 10_000,
    s: float = 1.1,
    rng: np.random.Generator,
    registry: Registry | None = None,
) -> SimulatedHistogram:
    """Draw a Zipf population, randomize every value with ``mechanism``, estimate the histogram.

    ``mechanism`` must be a local mechanism over a :class:`~dpkit.plugin.CategoricalDomain` with a
    registered estimator (krr, sue, oue, olh, hr, rr, ...). The estimate is the estimator's
    default (``"unbiased"``) method.
    """
    domain = mechanism.domain
    if mechanism.kind != "local" or not isinstance(domain, CategoricalDomain):
        raise InvalidParameter(
            "mechanism",
            mechanism.name,
            "a local mechanism over categories (e.g. krr, sue, oue, olh, hr)",
            owner="simulate_histogram",
        )
    registry = registry or get_registry()
    estimator = registry.estimator(mechanism)
    values = zipf_values(domain.size, n, s=s, rng=rng)
    true_counts = np.bincount(values, minlength=domain.size).astype(np.int64)
    reports = mechanism.randomize(values, rng=rng)
    estimate = estimator.estimate(estimator.accumulate(reports))
    return SimulatedHistogram(mechanism, true_counts, estimate)

"""dpkit: differential privacy mechanisms, estimators, accounting and auditing as plugins.

>>> import numpy as np, dpkit
>>> rr = dpkit.mechanism("rr", epsilon=1.0)
>>> reports = rr.randomize(np.array([0, 1, 1, 0, 1]), rng=np.random.default_rng(7))
>>> dpkit.estimate(rr, reports).n
5
"""

from __future__ import annotations

from typing import Any

from dpkit.domains import CategoricalDomain, Domain, VectorDomain
from dpkit.errors import (
    BudgetExceeded,
    DPKitError,
    InvalidData,
    InvalidParameter,
    PluginConflict,
    PluginError,
    SpecError,
    UnknownMechanism,
)
from dpkit.estimator import Estimate, Estimator, FrequencyCounts
from dpkit.hookspecs import hookimpl
from dpkit.mechanism import Mechanism
from dpkit.params import Boolean, Choice, Integer, ParameterSpec, Real, Sequence_, parameter
from dpkit.privacy import ApproximateDP, GaussianDP, PrivacyEvent, PureDP, RandomizedResponseDP
from dpkit.registry import MechanismInfo, Registry, get_registry, load_registry

__version__ = "0.1.0"

__all__ = [
    "ApproximateDP",
    "Boolean",
    "BudgetExceeded",
    "CategoricalDomain",
    "Choice",
    "DPKitError",
    "Domain",
    "Estimate",
    "Estimator",
    "FrequencyCounts",
    "GaussianDP",
    "Integer",
    "InvalidData",
    "InvalidParameter",
    "Mechanism",
    "MechanismInfo",
    "ParameterSpec",
    "PluginConflict",
    "PluginError",
    "PrivacyEvent",
    "PureDP",
    "RandomizedResponseDP",
    "Real",
    "Registry",
    "Sequence_",
    "SpecError",
    "UnknownMechanism",
    "VectorDomain",
    "__version__",
    "check_rng",
    "estimate",
    "get_registry",
    "hookimpl",
    "load_registry",
    "mechanism",
    "parameter",
]

from dpkit._rng import check_rng


def mechanism(name: str, /, *, registry: Registry | None = None, **params: Any) -> Mechanism:
    """Construct a registered mechanism by name: ``dpkit.mechanism("krr", epsilon=1, k=4)``."""
    return (registry or get_registry()).mechanism(name, **params)


def estimate(
    mechanism: Mechanism,
    reports: Any,
    /,
    *,
    method: str = "unbiased",
    registry: Registry | None = None,
) -> Estimate:
    """Estimate from ``reports`` (an array of reports or merged :class:`FrequencyCounts`).

    ``method`` names the estimator variant; ``"unbiased"`` is the default and any
    post-processing is a separately named method.
    """
    estimator = (registry or get_registry()).estimator(mechanism)
    estimator.check_method(method)
    statistics = reports if isinstance(reports, FrequencyCounts) else estimator.accumulate(reports)
    return estimator.estimate(statistics, method=method)

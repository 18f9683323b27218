"""dpkit: differential privacy mechanisms, estimators, accounting and auditing as plugins.

>>> import numpy as np, dpkit
>>> rr = dpkit.mechanism("rr", epsilon=1.0)
>>> reports = rr.randomize(np.array([0, 1, 1, 0, 1]), rng=np.random.default_rng(7))
>>> dpkit.estimate(rr, reports).n
5
"""

from __future__ import annotations

from typing import Any

from dpkit import graph
from dpkit.accounting import (
    Bound,
    Calibration,
    account,
    calibrate,
    compose_advanced,
    compose_basic,
    compose_gdp,
    compose_parallel,
    compose_pld,
    compose_rdp,
    compose_zcdp,
    gaussian_noise_multiplier,
)
from dpkit.advisor import Advice, MeanAdvice, advise, advise_mean
from dpkit.arrays import as_array
from dpkit.distribution_estimate import DistributionEstimate, ReportHistogram
from dpkit.domains import Box, CategoricalDomain, Domain, Interval, VectorDomain
from dpkit.errors import (
    BudgetExceeded,
    DPKitError,
    InvalidData,
    InvalidParameter,
    PluginConflict,
    PluginError,
    ReleaseFailed,
    SpecError,
    UnknownMechanism,
)
from dpkit.estimator import Estimate, Estimator, FrequencyCounts, Statistics
from dpkit.hookspecs import hookimpl
from dpkit.ledger import (
    Budget,
    Cost,
    Ledger,
    LedgerCorrupt,
    LedgerEntry,
    LedgerError,
    LedgerMismatch,
    LedgerMoved,
    LedgerUnitsMixed,
    NotALedger,
    UnitMismatch,
)
from dpkit.mean_estimate import MeanEstimate, MeanSums
from dpkit.mechanism import Mechanism
from dpkit.params import Boolean, Choice, Integer, ParameterSpec, Real, Sequence_, parameter
from dpkit.partitions import ParquetReports, accumulate
from dpkit.privacy import (
    ApproximateDP,
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)
from dpkit.registry import MechanismInfo, Registry, get_registry, load_registry
from dpkit.session import Deferred, Query, Release, Session
from dpkit.units import IdUnit, RecordUnit, UnitIdentity, privacy_unit, unit_of

__version__ = "0.1.0"

__all__ = [
    "Advice",
    "ApproximateDP",
    "Boolean",
    "Bound",
    "BoundedRangeDP",
    "Box",
    "Budget",
    "BudgetExceeded",
    "Calibration",
    "CategoricalDomain",
    "Choice",
    "CompositeDP",
    "Cost",
    "DPKitError",
    "Deferred",
    "DistributionEstimate",
    "Domain",
    "Estimate",
    "Estimator",
    "FrequencyCounts",
    "GaussianDP",
    "IdUnit",
    "Integer",
    "Interval",
    "InvalidData",
    "InvalidParameter",
    "LaplaceDP",
    "Ledger",
    "LedgerCorrupt",
    "LedgerEntry",
    "LedgerError",
    "LedgerMismatch",
    "LedgerMoved",
    "LedgerUnitsMixed",
    "MeanAdvice",
    "MeanEstimate",
    "MeanSums",
    "Mechanism",
    "MechanismInfo",
    "NotALedger",
    "ParameterSpec",
    "ParquetReports",
    "PluginConflict",
    "PluginError",
    "PrivacyEvent",
    "PureDP",
    "Query",
    "RandomizedResponseDP",
    "Real",
    "RecordUnit",
    "Registry",
    "Release",
    "ReleaseFailed",
    "ReportHistogram",
    "SecureRandom",
    "SecureWordSource",
    "Sequence_",
    "Session",
    "SpecError",
    "Statistics",
    "SubsampledDP",
    "UnitIdentity",
    "UnitMismatch",
    "UnknownMechanism",
    "VectorDomain",
    "__version__",
    "account",
    "accumulate",
    "advise",
    "advise_mean",
    "as_array",
    "bernoulli_bracketed",
    "bernoulli_exp",
    "bernoulli_exp_bracketed",
    "calibrate",
    "check_rng",
    "compose_advanced",
    "compose_basic",
    "compose_gdp",
    "compose_parallel",
    "compose_pld",
    "compose_rdp",
    "compose_zcdp",
    "constant_time_tv_bound",
    "discrete_gaussian",
    "discrete_laplace",
    "discrete_laplace_constant_time",
    "estimate",
    "gaussian_noise_multiplier",
    "get_registry",
    "graph",
    "hookimpl",
    "lie_threshold",
    "load_registry",
    "mechanism",
    "parameter",
    "privacy_unit",
    "probability_threshold",
    "resolve_rng",
    "unit_of",
]

from dpkit._rng import check_rng
from dpkit.randomness import (
    SecureRandom,
    SecureWordSource,
    bernoulli_bracketed,
    bernoulli_exp,
    bernoulli_exp_bracketed,
    constant_time_tv_bound,
    discrete_gaussian,
    discrete_laplace,
    discrete_laplace_constant_time,
    lie_threshold,
    probability_threshold,
    resolve_rng,
)


def mechanism(name: str, /, *, registry: Registry | None = None, **params: Any) -> Mechanism:
    """Construct a registered mechanism by name: ``dpkit.mechanism("krr", epsilon=1, k=4)``."""
    return (registry or get_registry()).mechanism(name, **params)


def estimate(
    mechanism: Mechanism,
    reports: Any,
    /,
    *,
    method: str | None = None,
    registry: Registry | None = None,
) -> Any:
    """Estimate from ``reports``: an array of reports, merged :class:`Statistics`, or reports
    in parts — a Dask array, Series or DataFrame, a :class:`ParquetReports` source, an iterator
    of chunks — reduced part by part to mergeable statistics (:func:`accumulate`).

    Returns what the mechanism's estimator estimates: an :class:`Estimate` of category counts
    (frequency oracles), a :class:`MeanEstimate` (mean protocols) or a
    :class:`DistributionEstimate` (distribution protocols). ``method`` names the estimator
    variant; None is the estimator's default (``"unbiased"`` for the frequency oracles and the
    means), and any post-processing is a separately named method.
    """
    registry = registry or get_registry()
    estimator = registry.estimator(mechanism)
    chosen = estimator.default_method if method is None else method
    estimator.check_method(chosen)
    statistics = accumulate(mechanism, reports, registry=registry)
    return estimator.estimate(statistics, method=chosen)

"""dpkit: differential privacy mechanisms, estimators, accounting and auditing as plugins.

>>> import numpy as np, dpkit
>>> rr = dpkit.mechanism("rr", epsilon=1.0)
>>> reports = rr.randomize(np.array([0, 1, 1, 0, 1]), rng=np.random.default_rng(7))
>>> dpkit.estimate(rr, reports).n
5
"""

from __future__ import annotations

import importlib
import sys
import types

#: ``typing.TYPE_CHECKING`` without importing typing (tens of milliseconds before the
#: ``dpkit`` command can handle an interrupt); type checkers read it as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from dpkit._rng import check_rng
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
    from dpkit.registry import MechanismInfo, Registry, get_registry, load_registry
    from dpkit.session import Deferred, Query, Release, Session
    from dpkit.units import IdUnit, RecordUnit, UnitIdentity, privacy_unit, unit_of

#: Where each public name lives. ``import dpkit`` imports none of them: each is imported on
#: first use (PEP 562), so the package is cheap to import — the ``dpkit`` command handles an
#: interrupt from its first moment (:mod:`dpkit.cli`), and a script pays only for what it uses.
_LAZY: dict[str, str] = {
    "Advice": "dpkit.advisor",
    "ApproximateDP": "dpkit.privacy",
    "Boolean": "dpkit.params",
    "Bound": "dpkit.accounting",
    "BoundedRangeDP": "dpkit.privacy",
    "Box": "dpkit.domains",
    "Budget": "dpkit.ledger",
    "BudgetExceeded": "dpkit.errors",
    "Calibration": "dpkit.accounting",
    "CategoricalDomain": "dpkit.domains",
    "Choice": "dpkit.params",
    "CompositeDP": "dpkit.privacy",
    "Cost": "dpkit.ledger",
    "DPKitError": "dpkit.errors",
    "Deferred": "dpkit.session",
    "DistributionEstimate": "dpkit.distribution_estimate",
    "Domain": "dpkit.domains",
    "Estimate": "dpkit.estimator",
    "Estimator": "dpkit.estimator",
    "FrequencyCounts": "dpkit.estimator",
    "GaussianDP": "dpkit.privacy",
    "IdUnit": "dpkit.units",
    "Integer": "dpkit.params",
    "Interval": "dpkit.domains",
    "InvalidData": "dpkit.errors",
    "InvalidParameter": "dpkit.errors",
    "LaplaceDP": "dpkit.privacy",
    "Ledger": "dpkit.ledger",
    "LedgerCorrupt": "dpkit.ledger",
    "LedgerEntry": "dpkit.ledger",
    "LedgerError": "dpkit.ledger",
    "LedgerMismatch": "dpkit.ledger",
    "LedgerMoved": "dpkit.ledger",
    "LedgerUnitsMixed": "dpkit.ledger",
    "MeanAdvice": "dpkit.advisor",
    "MeanEstimate": "dpkit.mean_estimate",
    "MeanSums": "dpkit.mean_estimate",
    "Mechanism": "dpkit.mechanism",
    "MechanismInfo": "dpkit.registry",
    "NotALedger": "dpkit.ledger",
    "ParameterSpec": "dpkit.params",
    "ParquetReports": "dpkit.partitions",
    "PluginConflict": "dpkit.errors",
    "PluginError": "dpkit.errors",
    "PrivacyEvent": "dpkit.privacy",
    "PureDP": "dpkit.privacy",
    "Query": "dpkit.session",
    "RandomizedResponseDP": "dpkit.privacy",
    "Real": "dpkit.params",
    "RecordUnit": "dpkit.units",
    "Registry": "dpkit.registry",
    "Release": "dpkit.session",
    "ReleaseFailed": "dpkit.errors",
    "ReportHistogram": "dpkit.distribution_estimate",
    "SecureRandom": "dpkit.randomness",
    "SecureWordSource": "dpkit.randomness",
    "Sequence_": "dpkit.params",
    "Session": "dpkit.session",
    "SpecError": "dpkit.errors",
    "Statistics": "dpkit.estimator",
    "SubsampledDP": "dpkit.privacy",
    "UnitIdentity": "dpkit.units",
    "UnitMismatch": "dpkit.ledger",
    "UnknownMechanism": "dpkit.errors",
    "VectorDomain": "dpkit.domains",
    "account": "dpkit.accounting",
    "accumulate": "dpkit.partitions",
    "advise": "dpkit.advisor",
    "advise_mean": "dpkit.advisor",
    "as_array": "dpkit.arrays",
    "bernoulli_bracketed": "dpkit.randomness",
    "bernoulli_exp": "dpkit.randomness",
    "bernoulli_exp_bracketed": "dpkit.randomness",
    "calibrate": "dpkit.accounting",
    "check_rng": "dpkit._rng",
    "compose_advanced": "dpkit.accounting",
    "compose_basic": "dpkit.accounting",
    "compose_gdp": "dpkit.accounting",
    "compose_parallel": "dpkit.accounting",
    "compose_pld": "dpkit.accounting",
    "compose_rdp": "dpkit.accounting",
    "compose_zcdp": "dpkit.accounting",
    "constant_time_tv_bound": "dpkit.randomness",
    "discrete_gaussian": "dpkit.randomness",
    "discrete_laplace": "dpkit.randomness",
    "discrete_laplace_constant_time": "dpkit.randomness",
    "gaussian_noise_multiplier": "dpkit.accounting",
    "get_registry": "dpkit.registry",
    "hookimpl": "dpkit.hookspecs",
    "lie_threshold": "dpkit.randomness",
    "load_registry": "dpkit.registry",
    "parameter": "dpkit.params",
    "privacy_unit": "dpkit.units",
    "probability_threshold": "dpkit.randomness",
    "resolve_rng": "dpkit.randomness",
    "unit_of": "dpkit.units",
}


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


def mechanism(name: str, /, *, registry: Registry | None = None, **params: Any) -> Mechanism:
    """Construct a registered mechanism by name: ``dpkit.mechanism("krr", epsilon=1, k=4)``."""
    from dpkit.registry import get_registry

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
    from dpkit.partitions import accumulate
    from dpkit.registry import get_registry

    registry = registry or get_registry()
    estimator = registry.estimator(mechanism)
    chosen = estimator.default_method if method is None else method
    estimator.check_method(chosen)
    statistics = accumulate(mechanism, reports, registry=registry)
    return estimator.estimate(statistics, method=chosen)


def __getattr__(name: str) -> Any:
    """A public name (:data:`_LAZY`) or a submodule (``dpkit.accounting``), imported on first
    use and then kept in the module's namespace."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package's module type: importing the submodule ``dpkit.mechanism`` (the Mechanism
    contract) sets the package attribute of that name to the submodule, which would hide the
    public function :func:`mechanism` — the eager package imported it first and defined the
    function after; a lazy one keeps the function this way."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "mechanism" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

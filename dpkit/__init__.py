"""dpkit: differential privacy mechanisms, estimators, accounting and auditing as plugins.

This package is the user's face: sessions and budgets, mechanisms by name, estimates, accounting,
privacy units and the errors to catch. Composition by method lives in :mod:`dpkit.accounting`,
graph statistics in :mod:`dpkit.graph`; a mechanism author's names are in :mod:`dpkit.plugin`.

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

    from dpkit.accounting import account, calibrate
    from dpkit.advisor import advise, advise_mean
    from dpkit.budget import Budget
    from dpkit.errors import (
        BudgetExceeded,
        DPKitError,
        InvalidData,
        InvalidParameter,
        ReleaseFailed,
        SpecError,
        SqlError,
        UnknownMechanism,
    )
    from dpkit.ledger import Ledger, UnitMismatch
    from dpkit.mechanism import Mechanism
    from dpkit.partitions import ParquetReports, accumulate
    from dpkit.privacy import ApproximateDP, GaussianDP, LaplaceDP, PureDP, SubsampledDP
    from dpkit.randomness import SecureRandom
    from dpkit.registry import Registry, get_registry, load_registry
    from dpkit.session import Session
    from dpkit.sql_statements.query import sql
    from dpkit.units import IdUnit, RecordUnit, privacy_unit, unit_of

#: Where each public name lives. ``import dpkit`` imports none of them: each is imported on
#: first use (PEP 562), so the package is cheap to import — the ``dpkit`` command handles an
#: interrupt from its first moment (:mod:`dpkit.cli`), and a script pays only for what it uses.
_LAZY: dict[str, str] = {
    "ApproximateDP": "dpkit.privacy",
    "Budget": "dpkit.budget",
    "BudgetExceeded": "dpkit.errors",
    "DPKitError": "dpkit.errors",
    "GaussianDP": "dpkit.privacy",
    "IdUnit": "dpkit.units",
    "InvalidData": "dpkit.errors",
    "InvalidParameter": "dpkit.errors",
    "LaplaceDP": "dpkit.privacy",
    "Ledger": "dpkit.ledger",
    "ParquetReports": "dpkit.partitions",
    "PureDP": "dpkit.privacy",
    "RecordUnit": "dpkit.units",
    "ReleaseFailed": "dpkit.errors",
    "SecureRandom": "dpkit.randomness",
    "Session": "dpkit.session",
    "SpecError": "dpkit.errors",
    "SqlError": "dpkit.errors",
    "SubsampledDP": "dpkit.privacy",
    "UnitMismatch": "dpkit.ledger",
    "UnknownMechanism": "dpkit.errors",
    "account": "dpkit.accounting",
    "accumulate": "dpkit.partitions",
    "advise": "dpkit.advisor",
    "advise_mean": "dpkit.advisor",
    "calibrate": "dpkit.accounting",
    "get_registry": "dpkit.registry",
    "load_registry": "dpkit.registry",
    "privacy_unit": "dpkit.units",
    "sql": "dpkit.sql_statements.query",
    "unit_of": "dpkit.units",
}


__version__ = "0.1.0"

__all__ = [
    "ApproximateDP",
    "Budget",
    "BudgetExceeded",
    "DPKitError",
    "GaussianDP",
    "IdUnit",
    "InvalidData",
    "InvalidParameter",
    "LaplaceDP",
    "Ledger",
    "ParquetReports",
    "PureDP",
    "RecordUnit",
    "ReleaseFailed",
    "SecureRandom",
    "Session",
    "SpecError",
    "SqlError",
    "SubsampledDP",
    "UnitMismatch",
    "UnknownMechanism",
    "__version__",
    "account",
    "accumulate",
    "advise",
    "advise_mean",
    "calibrate",
    "estimate",
    "get_registry",
    "graph",
    "load_registry",
    "mechanism",
    "privacy_unit",
    "sql",
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
    """Estimate from ``reports``: an array of reports, merged
    :class:`~dpkit.plugin.Statistics`, or reports in parts — a Dask array, Series or DataFrame,
    a :class:`ParquetReports` source, an iterator of chunks — reduced part by part to mergeable
    statistics (:func:`accumulate`).

    Returns what the mechanism's estimator estimates: an :class:`~dpkit.plugin.Estimate` of
    category counts (frequency oracles), a :class:`~dpkit.plugin.MeanEstimate` (mean protocols)
    or a :class:`~dpkit.plugin.DistributionEstimate` (distribution protocols). ``method`` names the estimator
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

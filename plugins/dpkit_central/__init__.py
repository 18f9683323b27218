"""dpkit's built-in central-DP mechanisms and queries, registered as an ordinary plugin.

Mechanisms (by registry name): ``laplace``, ``gaussian``, ``geometric``, ``exponential``,
``report_noisy_max``, ``permute_and_flip``. Statistics with sensitivity derived from their
bounds, one module each (:mod:`~dpkit_central.count`, :mod:`~dpkit_central.sum`,
:mod:`~dpkit_central.mean`, :mod:`~dpkit_central.histogram`, :mod:`~dpkit_central.quantile`):
each is a query over an array and, through the :class:`TableStatistic` protocol
(:mod:`dpkit_central.statistic`), over tables, per group and per person
(:mod:`dpkit_central.tables`: :class:`TableQuery`, with :class:`PartitionSelection` for
private group keys); accuracy before spending (:mod:`dpkit_central.accuracy`).

Imports only dpkit's public API, exactly as a third-party plugin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpkit.plugin import Estimator, Mechanism, hookimpl
from dpkit_central._query import QueryResult
from dpkit_central.accuracy import Accuracy
from dpkit_central.aggregates import Aggregates
from dpkit_central.count import Count
from dpkit_central.exponential import Exponential, utility_guarantee
from dpkit_central.gaussian import Gaussian, analytic_gaussian_sigma, classic_gaussian_sigma
from dpkit_central.geometric import Geometric
from dpkit_central.gradient_noise import add_gaussian_noise_
from dpkit_central.histogram import Histogram
from dpkit_central.keys import PrivateKeys, PublicKeys
from dpkit_central.laplace import Laplace
from dpkit_central.mean import Mean
from dpkit_central.noisy_max import (
    PermuteAndFlip,
    ReportNoisyMax,
    permute_and_flip_log_pmf,
    report_noisy_max_log_pmf,
    report_one_sided_noisy_argmax,
    secure_report_noisy_max_log_pmf,
)
from dpkit_central.partition_selection import PartitionSelection
from dpkit_central.quantile import Quantile
from dpkit_central.statistic import TableStatistic
from dpkit_central.sum import Sum
from dpkit_central.table_result import TableResult
from dpkit_central.tables import TableQuery

__all__ = [
    "QUERIES",
    "Accuracy",
    "Aggregates",
    "Count",
    "Exponential",
    "Gaussian",
    "Geometric",
    "Histogram",
    "Laplace",
    "Mean",
    "PartitionSelection",
    "PermuteAndFlip",
    "PrivateKeys",
    "PublicKeys",
    "Quantile",
    "QueryResult",
    "ReportNoisyMax",
    "Sum",
    "TableQuery",
    "TableResult",
    "TableStatistic",
    "add_gaussian_noise_",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "dpkit_register_estimators",
    "dpkit_register_mechanisms",
    "dpkit_register_queries",
    "permute_and_flip_log_pmf",
    "report_noisy_max_log_pmf",
    "report_one_sided_noisy_argmax",
    "secure_report_noisy_max_log_pmf",
    "utility_guarantee",
]

MECHANISMS: tuple[type[Mechanism], ...] = (
    Laplace,
    Gaussian,
    Geometric,
    Exponential,
    ReportNoisyMax,
    PermuteAndFlip,
)


@hookimpl
def dpkit_register_mechanisms(register: Callable[[type[Mechanism]], None]) -> None:
    """Register the central mechanisms."""
    for cls in MECHANISMS:
        register(cls)


QUERIES: tuple[type[Any], ...] = (Count, Sum, Mean, Histogram, Quantile)


@hookimpl
def dpkit_register_queries(register: Callable[[type[Any]], None]) -> None:
    """Register the queries (statistics over a dataset) that JSON specs and sessions run."""
    for cls in QUERIES:
        register(cls)


@hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], Estimator]], None],
) -> None:
    """Central mechanisms release their estimates directly; no estimator is needed."""

"""Figures drawn by dpkit (needs the optional extra: ``pip install 'dpkit[plot]'``).

Every function returns a :class:`matplotlib.figure.Figure` built with matplotlib's object API
(no pyplot, no global figure state: it works headless); write it with :func:`save` or
``figure.savefig(path)``. matplotlib is imported only when a figure is drawn, so ``import
dpkit.plot`` works without it; drawing then raises :class:`MissingDependency`.

>>> import numpy as np, dpkit
>>> from dpkit.plot import utility_figure
>>> figure = utility_figure(16, [0.5, 1, 2, 4])              # doctest: +SKIP
>>> dpkit.plot.save(figure, "utility.png")                   # doctest: +SKIP

``histogram_figure``  true vs estimated histogram with confidence intervals
``release_figure``    a released result (``dpkit run --json``) with its intervals
``utility_figure``    estimator variance vs ε for the local frequency oracles
``mean_utility_figure`` exact, worst-case and empirical variance vs ε for the mean protocols
``audit_figure``      the auditor's certified lower bound vs the claimed ε
``budget_figure``     cumulative ε (δ, ρ) spent from a ledger, with the budget
``docs_figures``      the figures of the documentation site
"""

from __future__ import annotations

from dpkit.plot._mpl import MissingDependency, save
from dpkit.plot.audit import audit_figure, audit_reports
from dpkit.plot.budget import BudgetSeries, budget_figure, budget_series
from dpkit.plot.docs import docs_figures
from dpkit.plot.histogram import histogram_figure
from dpkit.plot.mean_utility import MeanCurves, mean_curves, mean_utility_figure
from dpkit.plot.population import (
    SimulatedHistogram,
    simulate_histogram,
    zipf_probabilities,
    zipf_values,
)
from dpkit.plot.release import release_cells, release_figure
from dpkit.plot.utility import DEFAULT_PROTOCOLS, UtilityCurves, utility_curves, utility_figure

__all__ = [
    "DEFAULT_PROTOCOLS",
    "BudgetSeries",
    "MeanCurves",
    "MissingDependency",
    "SimulatedHistogram",
    "UtilityCurves",
    "audit_figure",
    "audit_reports",
    "budget_figure",
    "budget_series",
    "docs_figures",
    "histogram_figure",
    "mean_curves",
    "mean_utility_figure",
    "release_cells",
    "release_figure",
    "save",
    "simulate_histogram",
    "utility_curves",
    "utility_figure",
    "zipf_probabilities",
    "zipf_values",
]

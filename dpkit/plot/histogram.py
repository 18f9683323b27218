"""True versus estimated histogram, with the estimate's confidence intervals as error bars."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.estimator import Estimate
from dpkit.plot._mpl import PALETTE, new_figure, style_axes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["histogram_figure"]

_MAX_LABELLED = 24  # more categories than this: let matplotlib thin out the tick labels


def histogram_figure(
    estimate: Estimate,
    true_counts: Any = None,
    *,
    level: float = 0.95,
    scale: str = "count",
    title: str | None = None,
) -> Figure:
    """Bars of the true histogram (if given) and the estimate with its confidence intervals.

    The error bars are exactly ``estimate.confidence_interval(level, scale=scale)`` (a score
    or normal interval, possibly asymmetric, not clipped to [0, n] for an unbiased estimate: an
    unbiased estimate of a rare category can be negative).
    ``true_counts`` are counts per category (divided by ``estimate.n`` when
    ``scale="frequency"``). Returns a :class:`matplotlib.figure.Figure`.
    """
    if not isinstance(estimate, Estimate):
        raise InvalidParameter(
            "estimate", type(estimate).__name__, "a dpkit.plugin.Estimate", owner="histogram_figure"
        )
    if scale not in ("count", "frequency"):
        raise InvalidParameter("scale", scale, "'count' or 'frequency'", owner="histogram_figure")
    low, high = estimate.confidence_interval(level, scale=scale)
    centre = estimate.estimates if scale == "count" else estimate.frequencies
    k = centre.size
    truth = None
    if true_counts is not None:
        truth = np.asarray(true_counts, dtype=np.float64)
        if truth.shape != (k,):
            raise InvalidData(
                f"true_counts has shape {truth.shape}; the estimate has {k} categories",
                field="true_counts",
            )
        if scale == "frequency":
            truth = truth / estimate.n
    x = np.arange(k)
    labels = [str(c) for c in estimate.categories] if estimate.categories else [str(v) for v in x]
    width = min(10.0, max(6.5, 0.45 * k + 2.5))
    with new_figure(width, 4.2) as figure:
        from matplotlib.ticker import StrMethodFormatter

        ax = figure.add_subplot()
        if truth is not None:
            ax.bar(x, truth, width=0.7, color="#c9c9c9", edgecolor="#8a8a8a", label="true " + scale)
        ax.errorbar(
            x,
            centre,
            yerr=np.vstack([centre - low, high - centre]),
            fmt="o",
            color=PALETTE[0],
            ecolor=PALETTE[0],
            elinewidth=1.6,
            capsize=4,
            markersize=6,
            label=f"estimate ± {level:.0%} confidence interval",
        )
        ax.axhline(0.0, color="#404040", linewidth=0.8)
        if k <= _MAX_LABELLED:
            ax.set_xticks(x, labels)
        ax.set_xlabel("category")
        users = f"{estimate.n:,} users"
        ax.set_ylabel(f"count (of {users})" if scale == "count" else f"frequency ({users})")
        method = "" if estimate.method == "unbiased" else f" ({estimate.method})"
        figure.suptitle(title or f"{estimate.mechanism}{method}: estimated vs true histogram")
        style_axes(ax, grid="y")
        if scale == "count":
            ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        ax.legend(loc="upper right")
    return figure

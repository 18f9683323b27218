"""A released result as a figure: each value (per group and category) with its interval, drawn
from the result document ``dpkit run --json`` writes (or any result's ``to_document()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.plot._mpl import PALETTE, new_figure, style_axes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["release_cells", "release_figure"]

_MAX_LABELLED = 30  # more values than this: let matplotlib thin out the tick labels


def _at(values: Any, *index: int) -> Any:
    for i in index:
        if not isinstance(values, list) or i >= len(values):
            return None
        values = values[i]
    return values


def _float(value: Any) -> float:
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan
    )


def release_cells(result: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(label, value, lower, upper) for every value of one result document (NaN bounds where
    the interval has none in the value's units, e.g. a quantile's rank interval)."""
    estimate = result.get("estimate")
    interval = result.get("confidence_interval") or {}
    lower, upper = interval.get("lower"), interval.get("upper")
    keys, categories = result.get("keys"), result.get("categories")
    cells: list[tuple[str, Any, Any, Any]] = []
    if keys is not None:
        for i, key in enumerate(keys):
            group = ", ".join(str(k) for k in key)
            if categories:
                for j, category in enumerate(categories):
                    cells.append(
                        (
                            f"{group} / {category}",
                            _at(estimate, i, j),
                            _at(lower, i, j),
                            _at(upper, i, j),
                        )
                    )
            else:
                cells.append((group, _at(estimate, i), _at(lower, i), _at(upper, i)))
    elif isinstance(estimate, list):
        names = categories or list(range(len(estimate)))
        cells = [
            (str(c), _at(estimate, j), _at(lower, j), _at(upper, j)) for j, c in enumerate(names)
        ]
    else:
        cells = [
            (str(result.get("query_id") or result.get("statistic") or ""), estimate, lower, upper)
        ]
    return [(label, _float(v), _float(lo), _float(hi)) for label, v, lo, hi in cells]


def release_figure(result: dict[str, Any], *, title: str | None = None) -> Figure:
    """The values of one released result with their intervals as error bars.

    ``result`` is one entry of a result document's ``results`` (``dpkit run --json``), or a
    release's ``to_document()`` (a central ``TableResult`` or ``QueryResult``, a local
    :class:`~dpkit.Estimate` or :class:`~dpkit.MeanEstimate`). Intervals that are not in the
    value's units (a quantile's, in ranks) are named in the legend and drawn as points only.
    """
    if not isinstance(result, dict) or "estimate" not in result:
        raise InvalidData("a result has no 'estimate' to draw", field="result")
    cells = release_cells(result)
    if not cells or all(np.isnan(value) for _, value, _, _ in cells):
        raise InvalidData("the result has no released value to draw", field="result")
    labels = [label for label, _, _, _ in cells]
    values = np.array([value for _, value, _, _ in cells])
    low = np.array([lo for _, _, lo, _ in cells])
    high = np.array([hi for _, _, _, hi in cells])
    interval = result.get("confidence_interval") or {}
    level = interval.get("level")
    x = np.arange(len(cells))
    width = min(12.0, max(6.5, 0.45 * len(cells) + 2.5))
    with new_figure(width, 4.2) as figure:
        ax = figure.add_subplot()
        bounded = ~(np.isnan(low) | np.isnan(high))
        if bounded.any():
            ax.errorbar(
                x[bounded],
                values[bounded],
                yerr=np.vstack([values[bounded] - low[bounded], high[bounded] - values[bounded]]),
                fmt="o",
                color=PALETTE[0],
                ecolor=PALETTE[0],
                elinewidth=1.6,
                capsize=4,
                markersize=6,
                label=f"released value ± {level:.0%} interval" if level else "released value",
            )
        if (~bounded).any():
            unit = interval.get("unit")
            note = (
                f" (±{interval['half_width']:.4g} ranks, {level:.0%})"
                if unit == "ranks" and level
                else ""
            )
            ax.plot(
                x[~bounded],
                values[~bounded],
                "o",
                color=PALETTE[1],
                markersize=6,
                label=f"released value{note}",
            )
        ax.axhline(0.0, color="#404040", linewidth=0.8)
        if len(cells) <= _MAX_LABELLED:
            ax.set_xticks(
                x,
                labels,
                rotation=30 if len(cells) > 8 else 0,
                ha="right" if len(cells) > 8 else "center",
            )
        statistic = result.get("statistic") or result.get("mechanism", {}).get("name") or ""
        ax.set_ylabel(str(statistic))
        query = result.get("query_id")
        figure.suptitle(title or f"{query or statistic}: released values")
        style_axes(ax, grid="y")
        ax.legend(loc="best")
    return figure

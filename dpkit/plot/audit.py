"""The audit report as a picture: certified lower bound ε_lb against the claimed ε.

For each audited mechanism the bar is the statistical tier's lower bound ε_lb — the larger of
the randomness modes sampled (:attr:`~dpkit.testing.AuditReport.epsilon_lower_bound`) — which
holds with confidence 1 − α (one-sided Clopper–Pearson bounds; see
:mod:`dpkit.testing.blackbox`); the
diamond is the ε the mechanism claims, and the ring the exact tier's ε* (the largest log-ratio of
the declared output probabilities, for pure-DP claims). A correct mechanism has ε_lb ≤ ε* = ε;
a bar past its diamond is a violation (drawn in vermillion).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from dpkit.errors import InvalidParameter
from dpkit.params import Integer
from dpkit.plot._mpl import PALETTE, new_figure, style_axes
from dpkit.registry import Registry, get_registry

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from dpkit.testing import AuditReport

__all__ = ["audit_figure", "audit_reports"]

_OWNER = "audit_figure"


def _short_label(report: AuditReport) -> str:
    """The mechanism's name with its integer parameters (k, g, ...) and δ; ε is on the x-axis."""
    shown = []
    for key, value in report.parameters.items():
        if key == "delta" and isinstance(value, (int, float)) and value > 0:
            shown.append(f"δ={value:g}")
        elif isinstance(value, int) and not isinstance(value, bool):
            shown.append(f"{key}={value}")
    return report.mechanism + (f" ({', '.join(shown)})" if shown else "")


def audit_figure(
    results: AuditReport | Sequence[AuditReport], *, title: str | None = None
) -> Figure:
    """One row per :class:`dpkit.testing.AuditReport`: ε_lb bar, claimed-ε diamond, exact ε* ring.

    ``results`` is what :func:`dpkit.testing.audit` (or ``dpkit audit``) produced, one report or
    a sequence of them; rows keep their order, top to bottom.
    """
    from dpkit.testing import AuditReport

    reports = [results] if isinstance(results, AuditReport) else list(results)
    if not reports or not all(isinstance(r, AuditReport) for r in reports):
        raise InvalidParameter(
            "results", results, "one or more dpkit.testing.AuditReport objects", owner=_OWNER
        )
    rows = list(range(len(reports)))[::-1]  # first report on top
    bounds = [r.epsilon_lower_bound if r.statistical.checked else 0.0 for r in reports]
    claims = [r.claimed_epsilon for r in reports]
    exact = [
        (row, r.exact.epsilon)
        for row, r in zip(rows, reports, strict=True)
        if r.exact.checked and r.claimed_delta == 0 and math.isfinite(r.exact.epsilon)
    ]
    colours = [PALETTE[1] if r.verdict == "violation" else PALETTE[0] for r in reports]
    checked = [r for r in reports if r.statistical.checked]
    confidence = min((r.confidence for r in checked), default=0.0)
    height = 1.4 + 0.42 * len(reports)
    with new_figure(7.0, max(2.8, height)) as figure:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        ax = figure.add_subplot()
        ax.barh(rows, bounds, height=0.55, color=colours, gid="epsilon_lower_bound")
        ax.scatter(claims, rows, marker="D", s=55, color="#000000", zorder=3, gid="claimed_epsilon")
        if exact:
            ax.scatter(
                [e for _, e in exact],
                [row for row, _ in exact],
                marker="o",
                s=120,
                facecolors="none",
                edgecolors=PALETTE[4],
                linewidths=1.8,
                zorder=4,
                gid="exact_epsilon",
            )
        for row, report in zip(rows, reports, strict=True):
            if not report.statistical.checked:
                ax.annotate(
                    "not sampled",
                    (0, row),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=9,
                    color="#606060",
                )
        ax.set_yticks(rows, [_short_label(r) for r in reports])
        ax.set_xlabel("privacy loss ε")
        ax.set_xlim(0, max([*claims, *bounds, *(e for _, e in exact)]) * 1.12 or 1.0)
        ax.set_ylim(-0.6, len(reports) - 0.4)
        figure.suptitle(title or "Privacy audit: certified lower bound vs claimed ε")
        style_axes(ax, grid="x")
        handles = [
            Patch(
                color=PALETTE[0],
                label=f"certified lower bound ε$_{{lb}}$ (confidence {confidence:.6g})",
            ),
            Line2D([], [], marker="D", color="#000000", linestyle="none", label="claimed ε"),
        ]
        if exact:
            ring = Line2D(
                [],
                [],
                marker="o",
                markerfacecolor="none",
                markeredgecolor=PALETTE[4],
                markeredgewidth=1.8,
                markersize=9,
                linestyle="none",
                label="exact ε* of the declared distribution",
            )
            handles.append(ring)
        if any(r.verdict == "violation" for r in reports):
            handles.append(Patch(color=PALETTE[1], label="violation found"))
        figure.legend(handles=handles, loc="outside lower center", ncols=2)
    return figure


def audit_reports(
    names: Sequence[str] | None = None,
    *,
    epsilon: float = 1.0,
    k: int = 8,
    samples: int = 20_000,
    alpha: float = 1e-3,
    seed: int = 0,
    registry: Registry | None = None,
) -> list[AuditReport]:
    """Audit the named mechanisms (default: every registered one) with :func:`dpkit.testing.audit`.

    Each is built with ``epsilon`` and ``k`` where the mechanism has those parameters, its
    defaults, and the middle of the declared ``typical`` range for any other required parameter
    (:func:`dpkit.testing.parameter_points`; e.g. the Gaussian's δ = 1e-6). Every audit uses
    the same ``seed``.
    """
    from dpkit.testing import audit, parameter_points

    registry = registry or get_registry()
    chosen = list(registry.names() if names is None else names)
    if not chosen:
        raise InvalidParameter("mechanisms", chosen, "at least one mechanism name", owner="audit")
    if samples < 100:
        raise InvalidParameter("samples", samples, "an integer >= 100", owner="audit")
    reports = []
    for name in chosen:
        cls = registry.info(name).cls
        declared = cls.parameters()
        params: dict[str, Any] = {}
        if "epsilon" in declared:
            params["epsilon"] = epsilon
        if "k" in declared and isinstance(declared["k"].domain, Integer):
            params["k"] = k
        points = parameter_points(cls)
        middle = points[len(points) // 2]
        for field in attrs.fields(cast(Any, cls)):
            if field.name in middle and field.default is attrs.NOTHING:
                params.setdefault(field.name, middle[field.name])
        mechanism = registry.mechanism(name, **params)
        reports.append(audit(mechanism, samples=samples, alpha=alpha, seed=seed))
    return reports

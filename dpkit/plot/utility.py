"""The privacy–utility curve: each local frequency oracle's estimator variance against ε.

The variances are not derived here: they are the ``frequency_variance`` each registered
mechanism declares, as ranked by :func:`dpkit.advise` — Var*[f̂_v], the variance of the
frequency estimate of a value held by no user (the term proportional to the true frequency is
left out), Wang, Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency
Estimation" (USENIX Security), Sections 4–5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.advisor import advise
from dpkit.errors import InvalidParameter
from dpkit.params import Real
from dpkit.plot._mpl import MARKERS, PALETTE, new_figure, style_axes
from dpkit.registry import Registry, get_registry

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DEFAULT_PROTOCOLS", "UtilityCurves", "utility_curves", "utility_figure"]

#: The frequency oracles compared by Wang et al. 2017 (k-RR is their GRR) plus Hadamard response.
DEFAULT_PROTOCOLS: tuple[str, ...] = ("krr", "sue", "oue", "olh", "hr")

_DISPLAY = {
    "krr": "k-RR (GRR)",
    "sue": "SUE (basic RAPPOR)",
    "oue": "OUE",
    "olh": "OLH",
    "hr": "HR (Hadamard)",
    "rr": "RR",
}

_OWNER = "utility_figure"


@attrs.frozen(eq=False)
class UtilityCurves:
    """Var*[f̂_v] for each protocol (rows, in ``mechanisms`` order) at each ε (columns)."""

    k: int
    n: int
    epsilons: NDArray[np.float64]
    mechanisms: tuple[str, ...]
    variances: NDArray[np.float64]

    def variance(self, mechanism: str) -> NDArray[np.float64]:
        """The curve of one protocol."""
        if mechanism not in self.mechanisms:
            raise InvalidParameter(
                "mechanism", mechanism, "one of " + ", ".join(self.mechanisms), owner=_OWNER
            )
        row: NDArray[np.float64] = self.variances[self.mechanisms.index(mechanism)]
        return row


def _epsilons(epsilons: Any) -> NDArray[np.float64]:
    domain = Real(low=0.0, low_open=True)
    try:
        values = [domain.convert(e) for e in np.atleast_1d(np.asarray(epsilons, dtype=object))]
    except (ValueError, TypeError, OverflowError):
        values = []
    if not values:
        raise InvalidParameter(
            "epsilons", epsilons, "a non-empty list of finite numbers > 0", owner=_OWNER
        )
    return np.array(sorted(set(values)), dtype=np.float64)


def utility_curves(
    k: int,
    epsilons: Sequence[float] | NDArray[np.float64],
    *,
    n: int = 10_000,
    mechanisms: Sequence[str] = DEFAULT_PROTOCOLS,
    registry: Registry | None = None,
) -> UtilityCurves:
    """Var*[f̂_v] of every protocol in ``mechanisms`` at each ε, from :func:`dpkit.advise`.

    Raises :class:`dpkit.InvalidParameter` naming ``mechanisms`` when a protocol is not a
    registered local frequency oracle for ``k`` categories (the advisor's reason is given).
    """
    registry = registry or get_registry()
    grid = _epsilons(epsilons)
    names = tuple(mechanisms)
    if not names or any(not isinstance(name, str) for name in names):
        raise InvalidParameter("mechanisms", mechanisms, "a non-empty list of names", owner=_OWNER)
    for name in names:
        registry.info(name)  # UnknownMechanism (with "did you mean") if not registered
    table = np.empty((len(names), grid.size), dtype=np.float64)
    for column, epsilon in enumerate(grid):
        advice = advise(k, float(epsilon), n=n, registry=registry)
        for row, name in enumerate(names):
            if name not in advice.variances:
                reason = advice.skipped.get(name, "it does not define frequency_variance")
                raise InvalidParameter(
                    "mechanisms",
                    name,
                    f"a local frequency oracle for k={advice.k} at ε={float(epsilon):g} ({reason})",
                    owner=_OWNER,
                )
            table[row, column] = advice.variances[name]
    return UtilityCurves(advice.k, advice.n, grid, names, table)


def utility_figure(
    k: int,
    epsilons: Sequence[float] | NDArray[np.float64],
    *,
    n: int = 10_000,
    mechanisms: Sequence[str] = DEFAULT_PROTOCOLS,
    registry: Registry | None = None,
) -> Figure:
    """Estimator variance Var*[f̂_v] against ε for each protocol at domain size ``k`` (log y).

    One line per protocol, labelled with its registered name; the y-values are exactly
    :func:`utility_curves` (that is, :func:`dpkit.advise`). Lower is better.
    """
    curves = utility_curves(k, epsilons, n=n, mechanisms=mechanisms, registry=registry)
    markers = curves.epsilons.size <= 12
    with new_figure(7.0, 4.4) as figure:
        from matplotlib.ticker import NullFormatter

        ax = figure.add_subplot()
        for index, name in enumerate(curves.mechanisms):
            ax.plot(
                curves.epsilons,
                curves.variances[index],
                color=PALETTE[index % len(PALETTE)],
                marker=MARKERS[index % len(MARKERS)] if markers else None,
                linestyle=("-", "--", "-.", ":")[index % 4],
                label=_DISPLAY.get(name, name),
                gid=name,
            )
        ax.set_yscale("log")
        ax.set_xlabel("privacy loss per user, ε")
        ax.set_ylabel(r"variance of a frequency estimate, Var*$[\hat{f}_v]$")
        ax.set_title(
            f"Privacy–utility: k = {curves.k} categories, n = {curves.n:,} users (lower is better)"
        )
        style_axes(ax)
        ax.grid(True, which="minor", axis="y", alpha=0.15)
        ax.legend(title="protocol", loc="upper right")
        if curves.epsilons.size > 1:
            ax.set_xlim(curves.epsilons[0], curves.epsilons[-1])
        standard_error = ax.secondary_yaxis(
            "right",
            functions=(np.sqrt, np.square),  # std error = sqrt(variance)
        )
        standard_error.set_ylabel("standard error")
        standard_error.tick_params(labelsize=10)
        standard_error.yaxis.set_minor_formatter(NullFormatter())
    return figure

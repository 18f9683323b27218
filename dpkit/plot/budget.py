"""The budget spent over time: cumulative ε (and δ, or ρ under zCDP) from a session ledger.

The totals are the ledger's own bookkeeping: partial sums, in exact rationals, of the costs of
the entries with status ``spent`` in commit order (aborted releases gave their cost back and
are left out), so the last point equals :meth:`dpkit.Ledger.spent`. Under ``basic``
composition ε and δ add up (Dwork & Roth 2014, "The Algorithmic Foundations of Differential
Privacy", Theorem 3.16); under ``zcdp`` composition ρ adds up (Bun & Steinke 2016,
"Concentrated Differential Privacy", Lemma 2.3) and the budget is the ρ whose (ε, δ) fits.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from dpkit._enclosure import rounded
from dpkit.errors import InvalidParameter
from dpkit.ledger import Budget, Ledger, LedgerEntry
from dpkit.plot._mpl import MARKERS, PALETTE, new_figure, style_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["BudgetSeries", "budget_figure", "budget_series"]

_OWNER = "budget_figure"


@attrs.frozen(eq=False)
class BudgetSeries:
    """The spent entries of a ledger and the running totals after each of them (exact)."""

    dataset: str
    composition: str
    budget: Budget | None
    entries: tuple[LedgerEntry, ...]
    epsilon: tuple[Fraction, ...]
    delta: tuple[Fraction, ...]
    rho: tuple[Fraction, ...]

    @property
    def times(self) -> list[_dt.datetime]:
        return [_dt.datetime.fromisoformat(e.time) for e in self.entries]


def _running(values: Sequence[Fraction]) -> tuple[Fraction, ...]:
    total, out = Fraction(0), []
    for value in values:
        total += value
        out.append(total)
    return tuple(out)


def _open(ledger: str | os.PathLike[str], dataset: str | None) -> Ledger:
    text = os.fspath(ledger)
    if "://" not in text and text != ":memory:" and not Path(text).is_file():
        raise InvalidParameter(
            "ledger", text, "the path of an existing dpkit ledger file", owner=_OWNER
        )
    return Ledger(text, dataset=dataset)  # NotALedger / LedgerMismatch name what is wrong


def budget_series(
    ledger: str | os.PathLike[str] | Ledger | Sequence[LedgerEntry],
    *,
    dataset: str | None = None,
    budget: Budget | None = None,
    composition: Literal["basic", "zcdp"] | None = None,
) -> BudgetSeries:
    """Running totals of a ledger (a path, a :class:`dpkit.Ledger`, or a list of entries).

    With a path, the ledger must exist (it is opened read-only in effect: nothing is written);
    ``dataset`` checks that it is that dataset's ledger. With a list of entries, ``budget`` and
    ``composition`` (default ``"basic"``) stand in for the ledger's, and ``dataset`` keeps only
    that dataset's entries.
    """
    if isinstance(ledger, (str, os.PathLike)):
        ledger = _open(ledger, dataset)
    if isinstance(ledger, Ledger):
        if dataset is not None and dataset != ledger.dataset:
            raise InvalidParameter(
                "dataset", dataset, f"the ledger's dataset {ledger.dataset!r}", owner=_OWNER
            )
        entries = ledger.entries()
        name, rule = ledger.dataset, ledger.composition
        limit: Budget | None = budget or ledger.budget
    else:
        entries = list(ledger)
        if not all(isinstance(e, LedgerEntry) for e in entries):
            raise InvalidParameter(
                "ledger",
                type(ledger).__name__,
                "a ledger path, a dpkit.Ledger or a list of dpkit.LedgerEntry",
                owner=_OWNER,
            )
        if dataset is not None:
            entries = [e for e in entries if e.dataset_id == dataset]
        names = sorted({e.dataset_id for e in entries})
        name = dataset or ", ".join(names) or "(no entries)"
        rule, limit = composition or "basic", budget
    if rule not in ("basic", "zcdp"):
        raise InvalidParameter("composition", rule, "'basic' or 'zcdp'", owner=_OWNER)
    spent = tuple(e for e in entries if e.status == "spent")
    return BudgetSeries(
        dataset=name,
        composition=rule,
        budget=limit,
        entries=spent,
        epsilon=_running([e.cost.epsilon for e in spent]),
        delta=_running([e.cost.delta for e in spent]),
        rho=_running([e.cost.rho or Fraction(0) for e in spent]),
    )


def budget_figure(
    ledger: str | os.PathLike[str] | Ledger | Sequence[LedgerEntry],
    *,
    dataset: str | None = None,
    budget: Budget | None = None,
    composition: Literal["basic", "zcdp"] | None = None,
    x: Literal["release", "time"] = "release",
    title: str | None = None,
) -> Figure:
    """Cumulative spend after each release, with the budget as a horizontal line.

    Panels: ε and (if the budget or any release has δ > 0) δ under ``basic`` composition; ρ
    under ``zcdp``. Each release is a marker coloured by mechanism; ``x`` is the release
    number (commit order) or its commit ``"time"``. Arguments as in :func:`budget_series`.
    """
    if x not in ("release", "time"):
        raise InvalidParameter("x", x, "'release' or 'time'", owner=_OWNER)
    series = budget_series(ledger, dataset=dataset, budget=budget, composition=composition)
    limit = series.budget
    panels: list[tuple[str, tuple[Fraction, ...], Fraction | None]] = []
    if series.composition == "zcdp":
        panels.append(("ρ", series.rho, None if limit is None else limit.rho))
    else:
        panels.append(("ε", series.epsilon, None if limit is None else limit.epsilon))
        if (limit is not None and limit.delta > 0) or any(e.cost.delta > 0 for e in series.entries):
            panels.append(("δ", series.delta, None if limit is None else limit.delta))
    with new_figure(7.0, 2.0 + 2.3 * len(panels)) as figure:
        axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (symbol, totals, cap) in zip(axes, panels, strict=True):
            _panel(ax, series, symbol, totals, cap, x)
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            figure.legend(
                handles,
                labels,
                loc="outside lower center",
                ncols=min(len(handles), 4),
                title="each release, by mechanism",
            )
        axes[-1].set_xlabel("release (in commit order)" if x == "release" else "commit time (UTC)")
        if x == "time":
            from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

            locator = AutoDateLocator()  # type: ignore[no-untyped-call]
            axes[-1].xaxis.set_major_locator(locator)
            formatter = ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]
            axes[-1].xaxis.set_major_formatter(formatter)
        rule = "basic composition" if series.composition == "basic" else "zCDP composition"
        figure.suptitle(
            title
            or f"Privacy budget spent on {series.dataset!r}: {len(series.entries)} releases, {rule}"
        )
    return figure


def _panel(
    ax: Axes,
    series: BudgetSeries,
    symbol: str,
    totals: tuple[Fraction, ...],
    cap: Fraction | None,
    x: str,
) -> None:
    values = [0.0, *map(float, totals)]
    if x == "release":
        positions: list[Any] = list(range(len(values)))
    else:
        times = series.times
        positions = [times[0] if times else _dt.datetime.now(_dt.timezone.utc), *times]
    ax.plot(
        positions,
        values,
        drawstyle="steps-post",
        color="#404040",
        linewidth=1.8,
        gid=f"{symbol}_spent",
        label="_cumulative",
    )
    mechanisms = list(dict.fromkeys(e.mechanism for e in series.entries))
    for index, name in enumerate(mechanisms):
        at = [i for i, e in enumerate(series.entries) if e.mechanism == name]
        ax.scatter(
            [positions[i + 1] for i in at],
            [values[i + 1] for i in at],
            color=PALETTE[index % len(PALETTE)],
            marker=MARKERS[index % len(MARKERS)],
            s=46,
            zorder=3,
            clip_on=False,
            label=name,
        )
    if cap is not None:
        ax.axhline(
            float(cap),
            color=PALETTE[1],
            linestyle="--",
            linewidth=1.6,
            gid=f"{symbol}_budget",
            label="_budget",
        )
        ax.annotate(
            f"budget {symbol} = {float(cap):.6g}",
            (1.0, float(cap)),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            va="bottom",
            color=PALETTE[1],
            fontsize=10,
        )
        ax.set_ylim(0, max(float(cap), values[-1]) * 1.18 or 1.0)
    spent = rounded(totals[-1] if totals else Fraction(0))  # up: never below what was spent
    ax.set_ylabel(f"cumulative {symbol}\n(spent {spent})")
    style_axes(ax)
    if x == "release":
        ax.set_xlim(-0.2, max(1, len(values) - 1) + 0.2)
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))

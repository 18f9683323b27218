"""dpkit.plot: the figures draw exactly the library's numbers (checked on the artists' data).

No statistical assertions here: the simulations only provide inputs, and every check compares
a plotted value with an independent computation of the same number (closed forms, the raw
SQLite rows, the estimate's own interval), so there is no false-positive rate to state.
"""

from __future__ import annotations

import math
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import dpkit
from dpkit.plot import (
    audit_figure,
    audit_reports,
    budget_figure,
    budget_series,
    histogram_figure,
    save,
    simulate_histogram,
    utility_curves,
    utility_figure,
    zipf_probabilities,
    zipf_values,
)
from dpkit.testing import AuditReport, ExactResult, StatisticalResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _line(ax: Axes, gid: str) -> Line2D:
    found = [line for line in ax.get_lines() if line.get_gid() == gid]
    assert len(found) == 1, [line.get_gid() for line in ax.get_lines()]
    return found[0]


def _collection(ax: Axes, gid: str) -> PathCollection:
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1
    assert isinstance(found[0], PathCollection)
    return found[0]


# -- histogram ---------------------------------------------------------------------------------


def _krr_estimate(n: int = 4000, seed: int = 5) -> tuple[dpkit.Estimate, np.ndarray[Any, Any]]:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=6)
    simulated = simulate_histogram(krr, n=n, rng=np.random.default_rng(seed))
    return simulated.estimate, simulated.true_counts


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_histogram_error_bars_are_the_estimates_interval(level: float) -> None:
    estimate, truth = _krr_estimate()
    figure = histogram_figure(estimate, truth, level=level)
    ax = figure.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    errors = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1 and len(errors) == 1
    np.testing.assert_array_equal([p.get_height() for p in bars[0].patches], truth)
    data_line, _, (segments,) = errors[0].lines
    np.testing.assert_allclose(data_line.get_ydata(), estimate.estimates, rtol=0, atol=1e-9)
    low, high = estimate.confidence_interval(level)
    ends = np.array(segments.get_segments())  # one [[x, low], [x, high]] per category
    np.testing.assert_allclose(ends[:, 0, 1], low, rtol=1e-12)
    np.testing.assert_allclose(ends[:, 1, 1], high, rtol=1e-12)
    # independent: the score interval's width 2z·sqrt(a + b·ĉ + z²b²/4), z the normal quantile,
    # Var[ĉ] = a + b·(true count) (issue 20: it replaced the Wald width 2z·sqrt(variance))
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    a, b = estimate.variance_model
    width = 2 * z * np.sqrt(a + b * estimate.estimates + (z * b) ** 2 / 4)
    np.testing.assert_allclose(ends[:, 1, 1] - ends[:, 0, 1], width, rtol=1e-9)
    assert f"{level:.0%}" in ax.get_legend_handles_labels()[1][1]


def test_histogram_frequency_scale_and_without_truth() -> None:
    estimate, truth = _krr_estimate()
    ax = histogram_figure(estimate, truth, scale="frequency").axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    np.testing.assert_allclose([p.get_height() for p in bars.patches], truth / estimate.n)
    ax = histogram_figure(estimate).axes[0]
    assert not [c for c in ax.containers if isinstance(c, BarContainer)]


def test_histogram_rejects_bad_inputs() -> None:
    estimate, truth = _krr_estimate()
    with pytest.raises(dpkit.InvalidData, match="true_counts"):
        histogram_figure(estimate, truth[:-1])
    with pytest.raises(dpkit.InvalidParameter, match="level"):
        histogram_figure(estimate, level=1.5)
    with pytest.raises(dpkit.InvalidParameter, match="scale"):
        histogram_figure(estimate, scale="log")
    with pytest.raises(dpkit.InvalidParameter, match="estimate"):
        histogram_figure(truth)  # type: ignore[arg-type]


def test_zipf_population() -> None:
    p = zipf_probabilities(5, s=1.0)
    harmonic = 1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5
    np.testing.assert_allclose(p, [1 / (v * harmonic) for v in range(1, 6)], rtol=1e-12)
    values = zipf_values(5, 1000, rng=np.random.default_rng(1))
    assert values.shape == (1000,) and values.min() >= 0 and values.max() <= 4
    estimate, truth = _krr_estimate(n=1234)
    assert truth.sum() == 1234 and estimate.n == 1234
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        zipf_values(5, 10, rng=1)  # type: ignore[arg-type]
    with pytest.raises(dpkit.InvalidParameter, match="mechanism"):
        simulate_histogram(dpkit.mechanism("laplace", epsilon=1.0), rng=np.random.default_rng(1))


# -- utility -----------------------------------------------------------------------------------


def _closed_form(name: str, k: int, epsilon: float, n: int) -> float:
    """Var*[f̂_v] of Wang, Blocki, Li & Jha 2017 (Sections 4.1, 4.3, 4.4), written out here."""
    e = math.exp(epsilon)
    if name == "krr":
        return (e + k - 2) / (n * (e - 1) ** 2)
    if name == "sue":
        h = math.exp(epsilon / 2)
        return h / (n * (h - 1) ** 2)
    if name == "oue":
        return 4 * e / (n * (e - 1) ** 2)
    if name == "olh":
        g = max(2, round(e) + 1)
        return (e - 1 + g) ** 2 / (n * (e - 1) ** 2 * (g - 1))
    raise AssertionError(name)


def test_utility_curves_are_the_advisors_variances() -> None:
    epsilons = [0.5, 1.0, 2.0, 4.0]
    k, n = 16, 10_000
    figure = utility_figure(k, epsilons, n=n)
    ax = figure.axes[0]
    assert ax.get_yscale() == "log"
    for name in ("krr", "sue", "oue", "olh", "hr"):
        line = _line(ax, name)
        np.testing.assert_array_equal(line.get_xdata(), epsilons)
        expected = [dpkit.advise(k, e, n=n).variances[name] for e in epsilons]
        np.testing.assert_array_equal(line.get_ydata(), expected)
        if name != "hr":
            # independent closed forms; OLH's exact hash family makes it a little worse
            closed = [_closed_form(name, k, e, n) for e in epsilons]
            rtol = 1e-2 if name == "olh" else 1e-12
            np.testing.assert_allclose(line.get_ydata(), closed, rtol=rtol)


def test_utility_curves_order_and_errors() -> None:
    curves = utility_curves(8, [2.0, 0.5, 1.0], n=100, mechanisms=("oue", "krr"))
    np.testing.assert_array_equal(curves.epsilons, [0.5, 1.0, 2.0])  # sorted
    np.testing.assert_allclose(
        curves.variance("krr"), [_closed_form("krr", 8, e, 100) for e in (0.5, 1, 2)]
    )
    with pytest.raises(dpkit.InvalidParameter, match="mechanism"):
        curves.variance("sue")
    with pytest.raises(dpkit.UnknownMechanism):
        utility_curves(8, [1.0], mechanisms=("nope",))
    with pytest.raises(dpkit.InvalidParameter, match="mechanisms='laplace'"):
        utility_curves(8, [1.0], mechanisms=("laplace",))
    with pytest.raises(dpkit.InvalidParameter, match="epsilons"):
        utility_curves(8, [])
    with pytest.raises(dpkit.InvalidParameter, match="epsilons"):
        utility_curves(8, [1.0, -2.0])
    with pytest.raises(dpkit.InvalidParameter, match="k=1"):
        utility_curves(1, [1.0])


# -- audit -------------------------------------------------------------------------------------


def _report(
    name: str, claimed: float, bound: float, *, exact: float | None, delta: float = 0.0
) -> AuditReport:
    exact_result = (
        ExactResult(True, "declared", violation=delta == 0 and exact > claimed, epsilon=exact)
        if exact is not None
        else ExactResult(False, "no log_probability")
    )
    statistical = StatisticalResult(
        True, "", violation=bound > claimed, epsilon_lower_bound=bound, confidence=0.999
    )
    return AuditReport(
        mechanism=name,
        parameters={"epsilon": claimed, "k": 4, "delta": delta or None},
        claimed_epsilon=claimed,
        claimed_delta=delta,
        exact=exact_result,
        modes=(statistical,),
        alpha=1e-3,
        seed=0,
    )


def test_audit_figure_plots_bounds_claims_and_exact_epsilon() -> None:
    reports = [
        _report("good", 1.0, 0.9, exact=1.0),
        _report("leaky", 0.5, 1.3, exact=2.0),
        _report("approx", 2.0, 0.4, exact=3.0, delta=1e-6),
    ]
    figure = audit_figure(reports)
    ax = figure.axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    rows = [2, 1, 0]  # first report on top
    np.testing.assert_allclose([p.get_width() for p in bars.patches], [0.9, 1.3, 0.4])
    np.testing.assert_allclose([p.get_y() + p.get_height() / 2 for p in bars.patches], rows)
    claimed = _collection(ax, "claimed_epsilon").get_offsets()
    np.testing.assert_allclose(np.asarray(claimed), [[1.0, 2], [0.5, 1], [2.0, 0]])
    # the exact ε* is shown for pure-DP claims only
    exact = _collection(ax, "exact_epsilon").get_offsets()
    np.testing.assert_allclose(np.asarray(exact), [[1.0, 2], [2.0, 1]])
    colours = [tuple(p.get_facecolor()) for p in bars.patches]
    assert colours[0] == colours[2] != colours[1]  # the violation stands out
    labels = {
        int(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
    }
    assert labels == {2: "good (k=4)", 1: "leaky (k=4)", 0: "approx (k=4, δ=1e-06)"}
    assert any("violation" in t.get_text() for t in figure.legends[0].get_texts())


def test_audit_figure_from_real_audits() -> None:
    reports = audit_reports(["krr", "laplace"], epsilon=1.5, k=5, samples=5_000, seed=3)
    assert [r.mechanism for r in reports] == ["krr", "laplace"]
    assert [r.claimed_epsilon for r in reports] == [1.5, 1.5]
    assert reports[0].parameters["k"] == 5
    ax = audit_figure(reports).axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    np.testing.assert_allclose(
        [p.get_width() for p in bars.patches], [r.epsilon_lower_bound for r in reports]
    )
    assert isinstance(audit_figure(reports[0]), Figure)
    with pytest.raises(dpkit.InvalidParameter, match="results"):
        audit_figure([])
    with pytest.raises(dpkit.InvalidParameter, match="samples"):
        audit_reports(["krr"], samples=10)


# -- budget ------------------------------------------------------------------------------------


def _sqlite_running_totals(path: Path) -> tuple[list[float], list[float]]:
    """Independent of dpkit: read the spent rows straight from SQLite and add them up."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT epsilon, delta FROM dpkit_entries WHERE status = 'spent' ORDER BY seq"
        ).fetchall()
    eps = np.cumsum([float(Fraction(e)) for e, _ in rows]).tolist()
    delta = np.cumsum([float(Fraction(d)) for _, d in rows]).tolist()
    return eps, delta


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "survey.ledger"
    rr = dpkit.mechanism("rr", epsilon=0.3)
    krr = dpkit.mechanism("krr", epsilon=0.5, k=3)
    gauss = dpkit.mechanism("gaussian", epsilon=0.5, delta=1e-6)
    rng = np.random.default_rng(2)
    with dpkit.Session(budget=(2.0, 1e-5), ledger=path, dataset="survey") as session:
        session.release(rr, np.array([0, 1, 1]), rng=rng)
        session.release(krr, np.array([0, 2]), rng=rng)
        # a batch that does not fit: its first reservation is released before any data are read
        with pytest.raises(dpkit.BudgetExceeded):
            session.release_all(
                [
                    (krr, np.array([1]), rng),
                    (dpkit.mechanism("rr", epsilon=5.0), np.array([1]), rng),
                ]
            )
        session.release(gauss, np.array([3.0]), rng=rng)
        session.release(rr, np.array([1]), rng=rng)
    return path


def test_budget_lines_are_the_ledger_sums(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    eps, delta = _sqlite_running_totals(path)
    assert len(eps) == 4  # the aborted release is not counted
    figure = budget_figure(path)
    top, bottom = figure.axes
    np.testing.assert_allclose(_line(top, "ε_spent").get_ydata(), [0.0, *eps], rtol=1e-15)
    np.testing.assert_allclose(_line(bottom, "δ_spent").get_ydata(), [0.0, *delta], rtol=1e-15)
    np.testing.assert_array_equal(_line(top, "ε_spent").get_xdata(), range(5))
    assert _line(top, "ε_budget").get_ydata()[0] == 2.0
    assert _line(bottom, "δ_budget").get_ydata()[0] == 1e-5
    # the last point is what the ledger says it has spent
    spent = dpkit.Ledger(path).spent()
    assert eps[-1] == pytest.approx(float(spent.epsilon), rel=1e-15)
    # markers by mechanism, in order of first use
    labels = top.get_legend_handles_labels()[1]
    assert labels == ["rr", "krr", "gaussian"]


def test_budget_time_axis_entries_and_dataset(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    figure = budget_figure(path, x="time", dataset="survey")
    line = _line(figure.axes[0], "ε_spent")
    assert len(line.get_xdata()) == 5
    entries = dpkit.Ledger(path).entries()
    series = budget_series(entries, budget=dpkit.Budget(Fraction(2), Fraction(0)))
    assert [float(e) for e in series.epsilon] == pytest.approx(_sqlite_running_totals(path)[0])
    assert len(budget_figure(entries).axes) == 2  # δ was spent, so δ gets a panel
    with pytest.raises(dpkit.LedgerMismatch, match="dataset"):
        budget_figure(path, dataset="other")
    with pytest.raises(dpkit.InvalidParameter, match="ledger"):
        budget_figure(tmp_path / "missing.ledger")
    with pytest.raises(dpkit.NotALedger):
        (tmp_path / "notes.txt").write_text("hello")
        budget_figure(tmp_path / "notes.txt")
    with pytest.raises(dpkit.InvalidParameter, match="x="):
        budget_figure(path, x="day")  # type: ignore[arg-type]


def test_budget_zcdp_plots_rho(tmp_path: Path) -> None:
    path = tmp_path / "z.ledger"
    with dpkit.Session(budget=(6.0, 1e-6), ledger=path, composition="zcdp") as session:
        for epsilon in (0.5, 1.0):
            session.release(
                dpkit.mechanism("rr", epsilon=epsilon), np.array([1]), rng=np.random.default_rng(0)
            )
        rho_budget = float(session.budget.rho or 0)
    (ax,) = budget_figure(path).axes
    # pure ε-DP costs ρ = ε·tanh(ε/2), rounded up to 14 digits (dpkit.accounting.zcdp)
    first, second = 0.5 * math.tanh(0.25), 1.0 * math.tanh(0.5)
    expected = [0, first, first + second]
    np.testing.assert_allclose(_line(ax, "ρ_spent").get_ydata(), expected, rtol=1e-12)
    assert _line(ax, "ρ_budget").get_ydata()[0] == pytest.approx(rho_budget)


# -- saving ------------------------------------------------------------------------------------


def test_save_writes_png_svg_and_refuses_bad_paths(tmp_path: Path) -> None:
    figure = utility_figure(4, [1.0, 2.0])
    assert save(figure, tmp_path / "u.png").read_bytes().startswith(PNG_MAGIC)
    assert b"<svg" in save(figure, tmp_path / "u.svg").read_bytes()[:500]
    with pytest.raises(dpkit.InvalidParameter, match=r"out=.*ending in"):
        save(figure, tmp_path / "u.gif")
    with pytest.raises(dpkit.InvalidParameter, match="existing directory"):
        save(figure, tmp_path / "missing" / "u.png")

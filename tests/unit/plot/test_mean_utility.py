"""dpkit.plot.mean_utility_figure draws exactly the numbers of mean_curves, and those are the
closed forms (checked here independently for Duchi et al.'s mechanism). No statistical
assertions: the simulated MSE is drawn, not tested (test_ldp_numeric_estimators.py tests it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure

import dpkit
from dpkit.plot import mean_curves, mean_utility_figure, save


def test_curves_are_the_closed_forms() -> None:
    epsilons = [0.5, 1.0, 3.0]
    curves = mean_curves(epsilons, n=50, trials=5, rng=np.random.default_rng(1))
    assert curves.mechanisms == ("duchi", "pm", "hm")
    values = 2.0 * np.random.default_rng(1).beta(2.0, 5.0, size=50) - 1.0  # the same draw
    for column, epsilon in enumerate(epsilons):
        b2 = ((math.exp(epsilon) + 1) / (math.exp(epsilon) - 1)) ** 2
        assert curves.exact[0, column] == pytest.approx(np.sum(b2 - values**2) / 50**2)
        assert curves.worst[0, column] == pytest.approx(b2 / 50)
    assert np.all(curves.exact <= curves.worst * (1 + 1e-12))
    assert np.all(curves.empirical > 0)


def test_figure_draws_the_curves(tmp_path: object) -> None:
    figure = mean_utility_figure(
        [0.5, 2.0], n=40, trials=4, dimension=3, rng=np.random.default_rng(2)
    )
    assert isinstance(figure, Figure)
    left, right = figure.axes[:2]
    again = mean_curves([0.5, 2.0], n=40, trials=4, rng=np.random.default_rng(2))
    line = next(ln for ln in left.get_lines() if ln.get_gid() == "pm")
    np.testing.assert_allclose(line.get_ydata(), again.exact[1])
    assert {ln.get_gid() for ln in right.get_lines()} >= {
        "duchi_multi",
        "pm_multi:worst",
        "hm_multi:empirical",
    }
    save(figure, f"{tmp_path}/numeric.png")


def test_bad_arguments() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidParameter, match="trials"):
        mean_curves([1.0], trials=1, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="epsilons"):
        mean_curves([], rng=rng)
    with pytest.raises(dpkit.UnknownMechanism):
        mean_curves([1.0], mechanisms=["nope"], rng=rng)

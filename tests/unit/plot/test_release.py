"""Plotting one's own release: ``dpkit.plot.release_figure`` and ``dpkit plot result`` from a
``dpkit run --json`` document, and ``histogram_figure`` on an estimate one made."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import dpkit
from dpkit.cli import main
from dpkit.plot import histogram_figure, release_cells, release_figure
from dpkit.spec import run_spec

ROOT = Path(__file__).resolve().parents[3]
VISITS = ROOT / "schemas" / "examples" / "valid" / "visits_by_city.json"


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    ledger = tmp_path_factory.mktemp("ledger") / "l.sqlite"
    found: dict[str, object] = run_spec(
        json.loads(VISITS.read_text()), base_dir=VISITS.parent, ledger=ledger
    )
    return found


def test_cells_follow_groups_and_categories(document: dict[str, list[dict[str, object]]]) -> None:
    results = {r["query_id"]: r for r in document["results"]}
    devices = release_cells(results["devices"])
    assert devices[0][0].endswith(" / phone") and len(devices) == 3 * len(
        results["devices"]["keys"]
    )
    for _, value, low, high in devices + release_cells(results["mean-minutes"]):
        assert low <= value <= high
    ((label, value, low, high),) = release_cells(results["median-minutes"])
    assert label == "median-minutes" and np.isnan(low) and np.isnan(high)  # ranks, not values


def test_every_result_draws(document: dict[str, list[dict[str, object]]]) -> None:
    for result in document["results"]:
        figure = release_figure(result)
        assert figure.axes and figure.axes[0].get_legend() is not None


def test_dpkit_plot_result(
    tmp_path: Path, document: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "mean.png"
    assert main(["plot", "result", str(path), "--query", "mean-minutes", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["plot", "result", str(path), "--out", str(out)]) == 2  # which query?
    assert "mean-minutes" in capsys.readouterr().err
    assert main(["plot", "result", str(path), "--query", "nope", "--out", str(out)]) == 2
    assert main(["plot", "result", str(tmp_path / "missing.json"), "--out", str(out)]) == 2


def test_histogram_figure_of_one_s_own_estimate() -> None:
    rng = np.random.default_rng(3)
    krr = dpkit.mechanism("krr", epsilon=2.0, categories=["bus", "bike", "car"])
    truth = np.array(["bus"] * 500 + ["bike"] * 300 + ["car"] * 200)
    estimate = dpkit.estimate(krr, krr.randomize(truth, rng=rng))
    figure = histogram_figure(estimate, [500, 300, 200])
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == ["bus", "bike", "car"]

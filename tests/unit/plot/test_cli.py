"""``dpkit plot ...``, ``dpkit audit --plot`` and :func:`dpkit.plot.docs_figures`.

Files are checked to be real PNGs (magic bytes, and decoded by matplotlib to the expected
size); bad inputs exit 2 with a one-line message naming the field. No statistical assertions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import dpkit
from dpkit.cli import main
from dpkit.plot import MissingDependency, docs_figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> tuple[int, int]:
    """Check the magic bytes and decode the image; return (height, width)."""
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_MAGIC
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    assert image[..., :3].std() > 0.05  # not blank
    return image.shape[0], image.shape[1]


def _ledger(path: Path) -> None:
    with dpkit.Session(budget=(1.0, 0.0), ledger=path, dataset="poll") as session:
        for _ in range(3):
            session.release(
                dpkit.mechanism("rr", epsilon=0.25), np.array([0, 1]), rng=np.random.default_rng(1)
            )


def test_utility_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "utility.png"
    assert main(["plot", "utility", "--k", "16", "--epsilons", "0.5,1,2,4", "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    _png(out)


def test_histogram_audit_budget_write_pngs(tmp_path: Path) -> None:
    hist = tmp_path / "h.png"
    args = ["--mechanism", "oue", "--epsilon", "2", "--k", "6", "--n", "3000", "--seed", "4"]
    assert main(["plot", "histogram", *args, "--out", str(hist)]) == 0
    _png(hist)
    audit = tmp_path / "a.svg"
    argv = ["plot", "audit", "--mechanism", "krr", "--mechanism", "rr", "--samples", "3000"]
    assert main([*argv, "--out", str(audit)]) == 0
    assert b"<svg" in audit.read_bytes()[:500]
    ledger = tmp_path / "poll.ledger"
    _ledger(ledger)
    budget = tmp_path / "b.png"
    assert (
        main(["plot", "budget", "--ledger", str(ledger), "--dataset", "poll", "--out", str(budget)])
        == 0
    )
    _png(budget)


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["utility", "--k", "16", "--epsilons", "0.5,x"], "--epsilons"),
        (["utility", "--k", "16", "--epsilons", "1,-2"], "--epsilons"),
        (["utility", "--k", "1", "--epsilons", "1"], "k=1"),
        (["utility", "--k", "8", "--epsilons", "1", "--mechanisms", "krr,laplace"], "mechanisms"),
        (["utility", "--k", "8", "--epsilons", "1", "--mechanisms", "krx"], "did you mean"),
        (["histogram", "--mechanism", "laplace"], "mechanism='laplace'"),
        (["histogram", "--epsilon", "-1"], "epsilon=-1"),
        (["histogram", "--mechanism", "rr", "--k", "4"], "--k=4"),
        (["histogram", "--n", "0"], "n=0"),
        (["histogram", "--level", "2"], "--level"),
        (["audit", "--mechanism", "nope"], "unknown mechanism 'nope'"),
        (["audit", "--samples", "5"], "--samples"),
        (["budget", "--ledger", "MISSING"], "ledger="),
        (["budget", "--ledger", "NOT_A_LEDGER"], "not a dpkit ledger"),
        (["budget", "--ledger", "LEDGER", "--dataset", "other"], "dataset=poll"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(
    argv: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "poll.ledger"
    _ledger(ledger)
    (tmp_path / "notes.txt").write_text("not a ledger")
    paths = {
        "MISSING": str(tmp_path / "missing.ledger"),
        "NOT_A_LEDGER": str(tmp_path / "notes.txt"),
        "LEDGER": str(ledger),
    }
    argv = [paths.get(a, a) for a in argv]
    out = tmp_path / "figure.png"
    assert main(["plot", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpkit: error: ") and err.count("\n") == 1, err
    assert field in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("out", "allowed"), [("figure.gif", "ending in .png"), ("nowhere/f.png", "existing directory")]
)
def test_bad_output_path_fails_before_any_work(
    out: str, allowed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / out
    assert main(["plot", "audit", "--samples", "1000000000", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "--out=" in err and allowed in err


def test_missing_matplotlib_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    out = tmp_path / "u.png"
    assert main(["plot", "utility", "--k", "4", "--epsilons", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'dpkit[plot]'" in err and err.count("\n") == 1
    with pytest.raises(MissingDependency) as caught:
        dpkit.plot.utility_figure(4, [1.0])
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, dpkit.DPKitError)
    assert main(["audit", "rr", "-p", "epsilon=1", "--plot", str(out)]) == 2
    assert "dpkit[plot]" in capsys.readouterr().err
    assert not out.exists()


def test_core_imports_without_matplotlib() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import dpkit, dpkit.plot, dpkit.cli\n"
        "dpkit.cli.build_parser()\n"
        "print(dpkit.advise(8, 1.0).best)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    # and importing dpkit (and its CLI) never imports matplotlib by itself
    code = "import sys, dpkit, dpkit.plot, dpkit.cli; dpkit.cli.build_parser(); print('matplotlib' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr


def test_audit_plot_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit.png"
    argv = ["audit", "krr", "-p", "epsilon=1", "-p", "k=4", "--samples", "5000", "--alpha", "5e-7"]
    assert main([*argv, "--plot", str(out)]) == 0
    _png(out)
    assert main([*argv, "--plot", str(tmp_path / "audit.bmp")]) == 2
    assert "--plot=" in capsys.readouterr().err


def test_docs_figures(tmp_path: Path) -> None:
    """`dpkit plot docs` draws the site's figures, the same pictures every build (fixed seeds,
    no timestamps in the files): compared byte for byte with those of the site that `.ci/run`
    has just built in another process (DPKIT_BUILT_SITE), else with a second drawing here."""
    assert main(["plot", "docs", str(tmp_path / "figures")]) == 0
    written = {path.stem: path for path in (tmp_path / "figures").iterdir()}
    assert sorted(written) == ["audit", "budget", "histogram", "numeric", "utility"]
    for name, path in written.items():
        assert path.name == f"{name}.png"
        _png(path)
    built = os.environ.get("DPKIT_BUILT_SITE")
    if built:
        reference = Path(built) / "figures"
    else:
        reference = tmp_path / "again"
        assert sorted(docs_figures(reference)) == sorted(written)
    for name, path in written.items():
        assert (reference / path.name).read_bytes() == path.read_bytes(), name

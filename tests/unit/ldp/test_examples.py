"""The LDP example scripts run, and what they print is right (checked independently).

Statistical checks use fixed seeds and normal bounds of 5.33 standard deviations (two-sided
false-positive rate 1e-7 each) around values computed here from the formulas or by exact
enumeration, not by the example's own code.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import attrs
import numpy as np
import pytest
from scipy import stats

import dpkit

LDP_DIR = Path(__file__).resolve().parents[3] / "examples" / "ldp"
EXAMPLES = sorted(LDP_DIR.glob("*.py"))
Z = 5.33  # P[|N(0,1)| > 5.33] ≈ 1e-7
Z95 = float(stats.norm.ppf(0.975))


def load(stem: str) -> ModuleType:
    path = LDP_DIR / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"ldp_example_{stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_there_are_ldp_examples() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "histogram_demo",
        "warner_two_coin",
        "hundred_person_survey",
        "graph_adjacency",
    }


def test_histogram_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    load("histogram_demo").main(n=5_000, k=8, seed=1)
    out = capsys.readouterr().out
    assert "RMSE" in out and "nan" not in out.lower()


def test_warner_two_coin(capsys: pytest.CaptureFixture[str]) -> None:
    """The coin protocol is rr(keep=3/4) exactly; the estimate is within 5.33 sd of the truth."""
    module = load("warner_two_coin")
    result = module.main(seed=1, n=20_000)
    assert "ln 3" in capsys.readouterr().out
    assert result.coin_yes_given == {True: Fraction(3, 4), False: Fraction(1, 4)}
    assert result.rr_yes_given[True] == pytest.approx(0.75, abs=1e-15)
    assert result.rr_yes_given[False] == pytest.approx(0.25, abs=1e-15)
    assert result.epsilon == pytest.approx(math.log(3), rel=1e-15)
    n = result.n
    assert result.estimated_share == pytest.approx((result.yes_reports / n - 0.25) / 0.5, abs=1e-12)
    sd = math.sqrt(0.75 * 0.25 / (n * 0.5**2))  # = √(3/(4n))
    assert result.standard_error == pytest.approx(sd, rel=1e-12)
    assert abs(result.estimated_share - result.true_share) <= Z * sd
    assert result.interval == pytest.approx(
        (result.estimated_share - Z95 * sd, result.estimated_share + Z95 * sd), rel=1e-9
    )


def test_warner_coin_simulation_has_rr_distribution() -> None:
    """The simulated coins say "yes" w.p. 3/4 (truth yes) and 1/4 (truth no): 5.33-sd bounds."""
    module = load("warner_two_coin")
    n = 200_000
    rng = np.random.default_rng(3)
    for truth, expected in ((True, 0.75), (False, 0.25)):
        answers = module.two_coin_answers(np.full(n, truth), rng)
        assert abs(answers.mean() - expected) <= Z * math.sqrt(expected * (1 - expected) / n)


def exact_rr_share_distribution(yes: int, n: int, keep: float) -> tuple[np.ndarray, np.ndarray]:
    """All values of π̂ = (Y/n − (1 − keep))/(2 keep − 1) and their probabilities, where
    Y = Bin(yes, keep) + Bin(n − yes, 1 − keep), by exact convolution of binomial pmfs."""
    ones = stats.binom.pmf(np.arange(yes + 1), yes, keep)
    zeros = stats.binom.pmf(np.arange(n - yes + 1), n - yes, 1 - keep)
    pmf = np.convolve(ones, zeros)
    shares = (np.arange(n + 1) / n - (1 - keep)) / (2 * keep - 1)
    return shares, pmf


def test_hundred_person_survey(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's 30/100 gives 0.10 with variance 0.0075; the simulation matches exact values."""
    result = load("hundred_person_survey").main(seed=1, trials=20_000)
    assert "honest remark" in capsys.readouterr().out
    assert result.estimated_share == pytest.approx(0.10, abs=1e-12)
    assert result.variance == pytest.approx((3 / 16) / (100 * 0.25), rel=1e-12)
    half = Z95 * math.sqrt(0.0075)
    assert result.interval == pytest.approx((0.10 - half, 0.10 + half), rel=1e-9)
    assert result.respondents_for_five_points == math.ceil((Z95 / 0.05) ** 2 * 0.75)

    shares, pmf = exact_rr_share_distribution(10, 100, 0.75)
    mean = float(pmf @ shares)
    variance = float(pmf @ (shares - mean) ** 2)
    coverage = float(pmf[np.abs(shares - 0.10) <= half].sum())
    negative = float(pmf[shares < 0].sum())
    trials = result.trials
    assert mean == pytest.approx(0.10, abs=1e-12) and variance == pytest.approx(0.0075, rel=1e-9)
    assert result.simulated_true_share == 0.10
    assert abs(result.simulated_mean - mean) <= Z * math.sqrt(variance / trials)
    # sd of a sample variance ≈ σ² √(2/(T − 1)) (near-normal estimates): 6% is > 5.33 sd here.
    assert abs(result.simulated_variance / variance - 1) <= 0.06
    assert abs(result.simulated_coverage - coverage) <= Z * math.sqrt(
        coverage * (1 - coverage) / trials
    )
    assert abs(result.negative_share - negative) <= Z * math.sqrt(
        negative * (1 - negative) / trials
    )


def test_graph_adjacency(capsys: pytest.CaptureFixture[str]) -> None:
    """A symmetric, loop-free 0/1 output; edge count within 5.33 sd; degree MSE ≈ its variance."""
    result = load("graph_adjacency").main(seed=1, nodes=200, epsilon=1.5)
    assert "edges" in capsys.readouterr().out
    noisy = result.noisy
    assert np.array_equal(noisy, noisy.T) and not np.any(np.diag(noisy))
    assert set(np.unique(noisy)) <= {0, 1}

    n, eps = result.nodes, result.epsilon
    p = math.exp(eps) / (1 + math.exp(eps))
    assert result.keep == pytest.approx(p, rel=1e-15)
    pairs = n * (n - 1) // 2
    upper = noisy[np.triu_indices(n, 1)]
    assert result.noisy_edges == int(upper.sum())
    m_hat = (result.noisy_edges - pairs * (1 - p)) / (2 * p - 1)
    m_var = pairs * p * (1 - p) / (2 * p - 1) ** 2
    assert result.estimated_edges == pytest.approx(m_hat, rel=1e-12)
    assert result.edge_variance == pytest.approx(m_var, rel=1e-12)
    assert abs(result.estimated_edges - result.true_edges) <= Z * math.sqrt(m_var)
    assert result.true_edges == int(result.true_degrees.sum()) // 2

    d_var = (n - 1) * p * (1 - p) / (2 * p - 1) ** 2
    assert result.degree_variance == pytest.approx(d_var, rel=1e-12)
    # Σ_i d̂_i = 2 m̂ exactly (each noisy edge counted at both ends).
    assert result.estimated_degrees.sum() == pytest.approx(2 * result.estimated_edges, rel=1e-9)
    # Mean squared degree error over n nodes: mean of n near-independent (σ² χ²₁)-like terms,
    # relative sd ≈ √(2/n) = 0.10 at n = 200; 0.55 is > 5.33 sd.
    mse = float(np.mean((result.estimated_degrees - result.true_degrees) ** 2))
    assert abs(mse / d_var - 1) <= 0.55


PAGES = Path(__file__).resolve().parents[3] / "docs" / "mechanisms"


def parameter_rows(page: Path) -> dict[str, list[str]]:
    """The rows of the table under a page's ``## Parameters`` heading, by parameter name."""
    text = page.read_text(encoding="utf-8")
    section = text.split("## Parameters", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


@pytest.mark.parametrize("name", ["rr", "krr", "sue", "oue", "olh", "hr"])
def test_ldp_mechanism_page_documents_its_parameters(name: str) -> None:
    """The page's parameter table lists exactly the declared parameters, with the domain's own
    description, "required" exactly for the parameters without a default, and the declared doc."""
    cls = dpkit.get_registry().info(name).cls
    specs = cls.parameters()
    rows = parameter_rows(PAGES / f"{name}.md")
    assert set(rows) == set(specs)
    fields = {field.name: field for field in attrs.fields(cls)}
    for parameter, (allowed, default, meaning) in rows.items():
        spec = specs[parameter]
        assert allowed == spec.domain.describe(), parameter
        assert (default == "required") == (fields[parameter].default is attrs.NOTHING), parameter
        assert meaning.startswith(spec.doc), parameter

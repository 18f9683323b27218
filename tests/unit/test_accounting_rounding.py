"""Every ε (and δ, and calibrated noise) dpkit reports is on the safe side of the exact value:
the computed float under both of its readings (binary and shortest decimal), and every digit
the command line prints.

The exact values come from :mod:`tests.support.high_precision` (plain decimal arithmetic at
~120 digits, by routes dpkit does not use). The two first cases are the ones where float
evaluation landed below the truth: the Gaussian curve at a large noise multiplier and a tiny δ
(its two terms cancel), and the optimal composition of (ε, δ) events at a δ a hair above their
own (the slack 1 − (1 − δ)/(1 − δ₀)^k cancels).
"""

from __future__ import annotations

import json
import re
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from dpkit_central import analytic_gaussian_sigma

import dpkit
from dpkit.accounting import account, calibrate, compose_advanced, kov_optimal_epsilon
from dpkit.cli import main
from dpkit.ledger import Budget, Cost, Ledger
from dpkit.privacy import ApproximateDP, GaussianDP, PureDP, gaussian_epsilon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import high_precision as hp

#: δ a hair above what 100 uses of (0.5, 1e-7) spend themselves: 1 − (1 − 1e-7)^100 + 3e-15.
SPENT = 1 - (1 - Fraction(1, 10**7)) ** 100
NEAR_SPENT = float(SPENT + Fraction(3, 10**15))


def at_least(value: float | str, truth: Decimal) -> bool:
    """Both readings of a float (or the printed text) are ≥ the exact value."""
    if isinstance(value, str):
        return Decimal(value) >= truth
    return Decimal(value) >= truth and Decimal(repr(value)) >= truth


def at_most(value: float | str, truth: Decimal) -> bool:
    if isinstance(value, str):
        return Decimal(value) <= truth
    return Decimal(value) <= truth and Decimal(repr(value)) <= truth


def printed_epsilon(text: str) -> str:
    found = re.search(r"ε = ([0-9.e+-]+)", text)
    assert found, text
    return found.group(1)


@pytest.fixture(scope="module")
def gaussian_truth() -> Decimal:
    """ε at δ = 1e-100 of the Gaussian with noise multiplier 1000 (μ = 1/1000)."""
    smaller_delta = hp.readings(1e-100)[0]
    return hp.gaussian_epsilon(smaller_delta, Fraction(1, 10**6), 0.02080217411)


@pytest.fixture(scope="module")
def kov_truth() -> Decimal:
    """The optimal ε of 100 uses of (0.5, 1e-7) at NEAR_SPENT (its smaller reading: the
    larger ε)."""
    return hp.kov_epsilon(Fraction(1, 2), 100, hp.readings(NEAR_SPENT)[0], Fraction(1, 10**7))


def test_gaussian_at_a_tiny_delta_is_never_below_the_exact_epsilon(
    gaussian_truth: Decimal,
) -> None:
    bound = account([(GaussianDP(noise_multiplier=1000.0, delta=0.5), 1)], delta=1e-100)
    assert at_least(bound.epsilon, gaussian_truth), (bound.epsilon, gaussian_truth)
    for method in ("exact-gaussian", "basic", "gdp"):
        value = bound.candidates[method]
        assert isinstance(value, float) and at_least(value, gaussian_truth), (method, value)
    assert bound.epsilon <= gaussian_truth * Decimal(1 + 1e-12)  # and still tight
    assert at_least(gaussian_epsilon(1e-100, 1000.0), gaussian_truth)


def test_cli_prints_the_gaussian_epsilon_rounded_up(
    gaussian_truth: Decimal, capsys: pytest.CaptureFixture[str]
) -> None:
    event = "gaussian(noise_multiplier=1000)"
    assert main(["account", "--delta", "1e-100", event]) == 0
    out = capsys.readouterr().out
    assert at_least(printed_epsilon(out), gaussian_truth), out
    assert main(["account", "--json", "--delta", "1e-100", event]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert at_least(shown["epsilon"], gaussian_truth), shown


def test_optimal_composition_next_to_the_events_own_delta(kov_truth: Decimal) -> None:
    events = [(ApproximateDP(epsilon=0.5, delta=1e-7), 100)]
    bound = dpkit.account(events, delta=NEAR_SPENT)
    assert bound.detail["bound"] == "kov-optimal"
    assert at_least(bound.epsilon, kov_truth), (bound.epsilon, kov_truth)
    assert bound.epsilon <= kov_truth * Decimal(1 + 1e-12)
    assert at_least(compose_advanced(events, delta=NEAR_SPENT).epsilon, kov_truth)
    found = kov_optimal_epsilon(0.5, 100, NEAR_SPENT, delta0=1e-7)
    assert at_least(found, kov_truth)


def test_cli_prints_the_optimal_composition_rounded_up(
    kov_truth: Decimal, capsys: pytest.CaptureFixture[str]
) -> None:
    event = "approx(epsilon=0.5, delta=1e-7)*100"
    assert main(["account", "--delta", repr(NEAR_SPENT), event]) == 0
    assert at_least(printed_epsilon(capsys.readouterr().out), kov_truth)
    assert main(["account", "--json", "--delta", repr(NEAR_SPENT), event]) == 0
    assert at_least(json.loads(capsys.readouterr().out)["epsilon"], kov_truth)


@pytest.mark.parametrize(
    ("epsilon", "k", "delta", "delta0"),
    [(1.0, 50, 1e-8, 0.0), (0.1, 300, 1e-6, 0.0), (0.25, 40, 2e-5, 5e-7)],
)
def test_optimal_composition_is_never_below_the_exact_epsilon(
    epsilon: float, k: int, delta: float, delta0: float
) -> None:
    truth = hp.kov_epsilon(
        Fraction(repr(epsilon)), k, hp.readings(delta)[0], Fraction(repr(delta0))
    )
    found = kov_optimal_epsilon(epsilon, k, delta, delta0=delta0)
    assert at_least(found, truth) and found <= truth * Decimal(1 + 1e-9), (found, truth)


@pytest.mark.parametrize(
    ("noise_multiplier", "delta"), [(1.0, 1e-5), (3.7, 1e-10), (0.05, 1e-10), (40.0, 1e-30)]
)
def test_gaussian_epsilon_is_never_below_the_exact_epsilon(
    noise_multiplier: float, delta: float
) -> None:
    found = gaussian_epsilon(delta, noise_multiplier)
    mu_squared = 1 / Fraction(noise_multiplier) ** 2
    truth = hp.gaussian_epsilon(hp.readings(delta)[0], mu_squared, found)
    assert at_least(found, truth) and found <= truth * Decimal(1 + 1e-9), (found, truth)


def test_calibrated_noise_is_never_below_the_exact_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """σ for 100 Gaussian releases at (1, 1e-5): at least √100/μ* with μ* the largest μ-GDP
    meeting (1, 1e-5) — the value, the analytic single-release σ, and the printed digits."""
    mu = hp.gaussian_mu(Fraction(1), hp.readings(1e-5)[0], 0.2680511232)
    exact_sigma = 10 / mu
    found = calibrate("gaussian", epsilon=1.0, delta=1e-5, count=100)
    assert at_least(found.value, exact_sigma), (found.value, exact_sigma)
    assert at_least(analytic_gaussian_sigma(1.0, 1e-5), 1 / mu)
    assert main(["account", "--delta", "1e-5", "--calibrate", "1", "gaussian*100"]) == 0
    out = capsys.readouterr().out
    printed = re.search(r"σ = ([0-9.e+-]+)", out)
    assert printed and at_least(printed.group(1), exact_sigma), out
    assert at_least(printed_epsilon(out.replace("gives ε", "ε")), Decimal(found.epsilon))


def test_printed_amounts_are_rounded_the_safe_way(capsys: pytest.CaptureFixture[str]) -> None:
    """Six digits of 0.1234561 read 0.123456 to the nearest: below the ε spent. Printed: up; a
    calibrated per-query ε (the most each query may spend): down."""
    assert main(["account", "pure(epsilon=0.1234561)"]) == 0
    assert printed_epsilon(capsys.readouterr().out) == "0.123457"
    assert main(["account", "--delta", "1e-6", "--calibrate", "1", "laplace*7"]) == 0
    out = capsys.readouterr().out
    per_query = re.search(r"per-query ε = ([0-9.e+-]+)", out)
    found = calibrate("laplace", epsilon=1.0, delta=1e-6, count=7)
    assert per_query and at_most(per_query.group(1), Decimal(repr(found.value))), out


def test_budget_show_rounds_what_was_spent_up_and_what_remains_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path, dataset="d", budget=Budget(Fraction(1), Fraction(0)))
    spent = Fraction(1234567890123456, 10**16)  # 0.1234567890123456: 16 digits
    ledger.spend(
        Cost(spent, Fraction(0)),
        mechanism="m",
        parameters={},
        event={"kind": "pure"},
        session_id="s",
        randomness="fast",
    )
    assert main(["budget", "show", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    shown_spent = re.search(r"spent\s+ε=([0-9.e+-]+)", out)
    shown_left = re.search(r"remaining\s+ε=([0-9.e+-]+)", out)
    assert shown_spent and Fraction(shown_spent.group(1)) >= spent, out
    assert shown_left and Fraction(shown_left.group(1)) <= 1 - spent, out


def test_basic_composition_float_is_never_below_the_exact_sum() -> None:
    """Σε with more digits than a float holds: its float reads at or above the exact sum."""
    bound = account([(PureDP(0.1234567890123456), 3), (PureDP(1e-17), 1)], delta=1e-9)
    exact = Fraction(repr(0.1234567890123456)) * 3 + Fraction(1, 10**17)
    basic = bound.candidates["basic"]
    assert isinstance(basic, float) and Fraction(repr(basic)) >= exact

"""Noisy-SGD schedules: epochs, batch size and dataset size as accounting events, and simple
fractions for sampling rates, in Python and on the command line.

The expected figures are computed here from their definitions: ⌈N/B⌉ batches per epoch, q = B/N
exactly, and for shuffled batches one Gaussian at σ/2 per epoch (replace-one neighbours), whose
exact composition is one Gaussian of multiplier (σ/2)/√epochs (Dong, Roth & Su 2022,
Corollary 3.3), solved with scipy on Balle & Wang's curve.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from scipy import optimize, stats

import dpkit
from dpkit.accounting import account, calibrate
from dpkit.accounting.training import Schedule, parse_rate
from dpkit.cli import main
from dpkit.errors import InvalidParameter
from dpkit.privacy import GaussianDP, SubsampledDP


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    def excess(eps: float) -> float:
        return (
            stats.norm.cdf(mu / 2 - eps / mu)
            - math.exp(eps + stats.norm.logcdf(-mu / 2 - eps / mu))
            - delta
        )

    return float(optimize.brentq(excess, 0.0, 200.0, xtol=1e-13, rtol=1e-14))


def test_poisson_schedule_steps_and_rate() -> None:
    schedule = Schedule(epochs=3, batch_size=256, dataset_size=60000)
    assert schedule.batches_per_epoch == 235  # ⌈60000/256⌉ = ⌈234.375⌉
    assert schedule.steps == 705
    assert schedule.sampling_rate == Fraction(256, 60000)
    event, count = schedule.events(1.1, 1e-5)
    assert count == 705
    assert isinstance(event, SubsampledDP) and event.event == GaussianDP(1.1, 1e-5)
    assert Fraction(event.sampling_rate) >= Fraction(256, 60000)  # rounded up, never down
    assert "705 steps" in schedule.describe() and "256/60000" in schedule.describe()


@pytest.mark.parametrize(
    ("text", "exact"),
    [("256/60000", Fraction(256, 60000)), ("1/3", Fraction(1, 3)), (" 0.5 ", Fraction(1, 2))],
)
def test_rates_as_fractions_round_up(text: str, exact: Fraction) -> None:
    rate = parse_rate(text)
    assert Fraction(rate) >= exact
    assert rate == pytest.approx(float(exact), rel=1e-15)
    assert parse_rate(exact) == rate


@pytest.mark.parametrize("bad", ["256/0", "3/2", "0/5", "a/b", "1/-2", True, 0, 1.5])
def test_rates_outside_zero_one_are_refused(bad: object) -> None:
    with pytest.raises(InvalidParameter, match="sampling_rate"):
        parse_rate(bad)


def test_calibrate_accepts_a_fraction_and_a_schedule() -> None:
    by_hand = calibrate("gaussian", epsilon=8, delta=1e-5, count=705, sampling_rate=256 / 60000)
    as_text = dpkit.calibrate(
        "gaussian", epsilon=8, delta=1e-5, count=705, sampling_rate="256/60000"
    )
    found = dpkit.calibrate(
        "gaussian", epsilon=8, delta=1e-5, epochs=3, batch_size=256, dataset_size=60000
    )
    assert as_text.value == pytest.approx(by_hand.value, rel=1e-3)
    assert found.value == as_text.value
    assert found.schedule is not None and found.schedule.steps == 705
    record = found.as_dict()["schedule"]
    assert record["steps"] == 705 and record["sampling_rate_exact"] == "8/1875"
    event = SubsampledDP(GaussianDP(found.value, 1e-5), parse_rate("256/60000"))
    assert account([(event, 705)], delta=1e-5).epsilon <= 8


def test_shuffled_batches_are_one_gaussian_at_half_sigma_per_epoch() -> None:
    found = calibrate(
        "gaussian",
        epsilon=2.0,
        delta=1e-5,
        epochs=5,
        batch_size=100,
        dataset_size=1000,
        batching="shuffle",
    )
    sigma = found.value
    assert found.schedule is not None and found.schedule.neighbours == "replace one record"
    # 5 epochs of a Gaussian at σ/2 (L2 sensitivity 2C under replacement): μ = 2√5/σ
    exact = _exact_gaussian_epsilon(2 * math.sqrt(5) / sigma, 1e-5)
    assert exact == pytest.approx(2.0, rel=2e-4) and exact <= 2.0 * (1 + 1e-9)


def test_schedule_refuses_what_it_cannot_account() -> None:
    with pytest.raises(InvalidParameter, match="batching"):
        calibrate(epsilon=1, delta=1e-5, epochs=1, batch_size=1, dataset_size=2, batching="x")
    with pytest.raises(InvalidParameter, match="batch_size"):
        calibrate(epsilon=1, delta=1e-5, epochs=1, batch_size=3, dataset_size=2)
    with pytest.raises(InvalidParameter, match="count"):
        calibrate(epsilon=1, delta=1e-5, count=10, epochs=1, batch_size=1, dataset_size=2)
    with pytest.raises(InvalidParameter, match="event"):
        calibrate("laplace", epsilon=1, delta=1e-5, epochs=1, batch_size=1, dataset_size=2)


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_calibrates_a_training_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--epochs", "3", "--batch-size", "256", "--dataset-size", "60000"]
    code, out, _ = _cli(
        ["account", "--delta", "1e-5", "--calibrate", "8", *common, "gaussian"], capsys
    )
    assert code == 0
    assert "705 steps" in out and "q = 256/60000" in out and "noise multiplier σ" in out
    code, out, _ = _cli(
        ["account", "--json", "--delta", "1e-5", "--calibrate", "8", *common, "gaussian"], capsys
    )
    payload = json.loads(out)
    assert payload["schedule"]["steps"] == 705 and payload["schedule"]["batching"] == "poisson"
    code, out, _ = _cli(
        ["account", "--delta", "1e-5", *common, "gaussian(noise_multiplier=1.1)"], capsys
    )
    assert code == 0 and "705 steps" in out


def test_cli_accepts_a_fraction_for_the_rate(capsys: pytest.CaptureFixture[str]) -> None:
    event = "subsampled_gaussian(noise_multiplier=1.1,sampling_rate=256/60000)*705"
    code, out, err = _cli(["account", "--json", "--delta", "1e-5", event], capsys)
    assert code == 0, err
    with_float = "subsampled_gaussian(noise_multiplier=1.1,sampling_rate=0.004266666666666667)*705"
    code, other, _ = _cli(["account", "--json", "--delta", "1e-5", with_float], capsys)
    assert json.loads(out)["epsilon"] == pytest.approx(json.loads(other)["epsilon"], rel=1e-6)


def test_cli_refuses_a_partial_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(
        ["account", "--delta", "1e-5", "--epochs", "3", "gaussian(noise_multiplier=1.1)"], capsys
    )
    assert code == 2 and "--batch-size" in err
    code, _, err = _cli(
        [
            "account",
            "--delta",
            "1e-5",
            "--epochs",
            "1",
            "--batch-size",
            "2",
            "--dataset-size",
            "10",
            "laplace(epsilon=1)",
        ],
        capsys,
    )
    assert code == 2 and "gaussian" in err

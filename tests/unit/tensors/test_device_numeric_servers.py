"""The numeric mechanisms' servers on the device path, run on the CPU (torch tensors and
array-api-strict arrays treated as an accelerator's): the mean protocols' sums of the device's
reports are the CPU's (to rounding), the square wave's report histogram is the CPU's exactly,
and the CPU's refusals come first, naming the field and quoting no value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import duchi, mean_estimator, sampled, square_wave  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import device_random  # noqa: E402

DUCHI = duchi.Duchi(epsilon=1.0, lower=-2.0, upper=5.0)


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(
        monkeypatch,
        [(mean_estimator, "mean_sums"), (square_wave, "report_histogram")],
    )


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize(
    "mech",
    [
        DUCHI,
        sampled.PiecewiseMulti(epsilon=2.0, lower=0.0, upper=10.0, dimension=3),
        sampled.HybridMulti(epsilon=1.5, lower=-1.0, upper=1.0, dimension=5, k=2),
    ],
    ids=["duchi", "pm_multi", "hm_multi"],
)
def test_the_device_sums_are_the_cpus(spell: str, mech: Any, device_arrays: list[str]) -> None:
    # 5 000 reports drawn on the CPU, summed on the "device": n exact, every t the CPU's
    # (elementwise IEEE arithmetic), the sums to within the rounding of a different order of
    # addition (n·2⁻⁵³·max|t| at most; 1e-12 relative to Σ|t| is far above it, far below a
    # wrong law or a lost report).
    d = getattr(mech, "dimension", 1)
    values = np.random.default_rng(2).uniform(mech.lower, mech.upper, size=(5_000, d))
    reports = mech.randomize(values if d > 1 else values[:, 0], rng=np.random.default_rng(3))
    estimator = mean_estimator.MeanEstimator(mech)
    on_host = estimator.accumulate(reports)
    spelled = torch.from_numpy(reports) if spell == "torch" else xs.asarray(reports)
    on_device = estimator.accumulate(spelled)
    assert device_arrays == ["mean_sums"]
    assert on_device.n == on_host.n == 5_000
    for got, want, magnitude in (
        (on_device.sums, on_host.sums, on_host.squares),
        (on_device.squares, on_host.squares, on_host.squares),
    ):
        assert np.all(np.abs(got - want) <= 1e-12 * (magnitude + 5_000))
    assert estimator.estimate(on_device).estimates.shape == (d,)


def test_a_device_report_out_of_range_is_counted_not_quoted(device_arrays: list[str]) -> None:
    estimator = mean_estimator.MeanEstimator(DUCHI)
    good = DUCHI.randomize(np.zeros(6), rng=np.random.default_rng(0))
    for bad_value, count in ((float("nan"), 1), (1e6, 2)):
        bad = good.copy()
        bad[:count] = bad_value
        with pytest.raises(InvalidData) as refused:
            estimator.accumulate(torch.from_numpy(bad))
        assert refused.value.field == "reports"
        assert f"{count} report value(s) are NaN or outside the range of duchi" in str(
            refused.value
        )
        assert "1000000" not in str(refused.value)
    assert len(device_arrays) == 2


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    vector = mean_estimator.MeanEstimator(
        sampled.PiecewiseMulti(epsilon=2.0, lower=0.0, upper=1.0, dimension=3)
    )
    for estimator, bad, message in (
        (mean_estimator.MeanEstimator(DUCHI), torch.ones(4, dtype=torch.bool), "real numbers"),
        (vector, torch.zeros((4, 2), dtype=torch.float64), "3 columns"),
        (vector, torch.zeros((), dtype=torch.float64), "3 columns"),
    ):
        with pytest.raises(InvalidData, match=message) as refused:
            estimator.accumulate(bad)
        assert refused.value.field == "reports"
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="the sums need float64") as refused:
        mean_estimator.MeanEstimator(DUCHI).accumulate(torch.zeros(3, dtype=torch.float64))
    assert refused.value.field == "reports"


SW = square_wave.SquareWave(epsilon=1.0, lower=-3.0, upper=7.0, bins=32)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_the_square_wave_histogram_is_the_cpus(
    spell: str, rng: str, device_arrays: list[str]
) -> None:
    # 4 000 reports of either mode plus the report range's two ends: every report counted in
    # the CPU's bucket (the same IEEE operations), so the counts are equal, not close.
    generator = np.random.default_rng(5) if rng == "fast" else None
    values = np.random.default_rng(4).uniform(SW.lower, SW.upper, size=4_000)
    reports = np.concatenate([SW.randomize(values, rng=generator), SW.report_edges[[0, -1]]])
    estimator = square_wave.SquareWaveEstimator(SW)
    on_host = estimator.accumulate(reports)
    on_device = estimator.accumulate(
        torch.from_numpy(reports) if spell == "torch" else xs.asarray(reports)
    )
    assert device_arrays == ["report_histogram"]
    assert on_device.n == on_host.n == 4_002
    assert np.array_equal(on_device.counts, on_host.counts)
    assert on_host.counts[0] > 0 and on_host.counts[-1] > 0


def test_the_square_wave_refusals_count_and_never_quote(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    estimator = square_wave.SquareWaveEstimator(SW)
    reports = SW.randomize(np.zeros(5), rng=np.random.default_rng(0))
    for bad_value, count in ((float("nan"), 1), (123456.0, 3)):
        bad = reports.copy()
        bad[:count] = bad_value
        with pytest.raises(InvalidData) as refused:
            estimator.accumulate(torch.from_numpy(bad))
        assert refused.value.field == "reports"
        assert f"{count} report(s) are not square-wave reports" in str(refused.value)
        assert "123456" not in str(refused.value)
    with pytest.raises(InvalidData, match="real numbers"):
        estimator.accumulate(torch.ones(3, dtype=torch.bool))
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="the buckets need float64"):
        estimator.accumulate(torch.zeros(3, dtype=torch.float64))
    assert device_arrays == ["report_histogram"] * 4

"""The central selections on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): report-noisy-max's secure release is the host's on the
same words (its exact relative scores checked against the host's big-integer ones), the laws of
both modes against the exact selection probabilities, fast mode reproducible from a seed, the
caller's type and int64 indices, and the refusals before any word is drawn.

False-positive rate: each χ² test passes a correct sampler unless its p-value is below 1e-6
(a false alarm with probability 1e-6 per test, six tests); the other checks are exact.
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_central import exponential, noisy_max  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import selection  # noqa: E402

KEY = bytes(range(7, 39))
RNM = noisy_max.ReportNoisyMax(epsilon=1.0)
EXPONENTIAL = exponential.Exponential(epsilon=1.0)
PERMUTE_AND_FLIP = noisy_max.PermuteAndFlip(epsilon=1.0)
#: Three candidates whose probabilities all differ (−inf never chosen).
UTILITIES = np.array([0.0, 1.0, -np.inf, 2.5])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path; the list holds each call's
    words (none for a call refused before drawing)."""
    return device_reference.recording_calls(monkeypatch, selection)


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


def _spelled(values: np.ndarray, spell: str) -> Any:
    return torch.from_numpy(values.copy()) if spell == "torch" else xs.asarray(values)


def _chi_square(chosen: np.ndarray, log_pmf: np.ndarray) -> float:
    p = np.exp(log_pmf)
    keep = p > 0
    counts = np.bincount(chosen, minlength=p.size)
    assert np.all(counts[~keep] == 0), "a candidate of probability 0 was chosen"
    expected = p[keep] / p[keep].sum() * chosen.size
    return float(stats.chisquare(counts[keep], expected).pvalue)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_report_noisy_max_is_the_hosts_release_on_the_same_words(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    # Ties between candidates, −inf, scores rounded half to even, scores far apart (clipped)
    # and beyond float64 on the lattice: the host's release fed the same 64-bit words.
    g = RNM.lattice.step
    rows = np.random.default_rng(1).normal(0.0, 3.0, size=(40, 5))
    rows[0] = [1.0, 1.0, -np.inf, 0.5 * g, 1.0]
    rows[1] = [1e300, -1e300, 1e300, 1.7e308, -1.7e308]
    rows[2] = [2.5 * g, 1.5 * g, -2.5 * g, 1e15, 1e15 + 1.0]
    released = RNM.randomize(_spelled(rows, spell), rng=SecureRandom.from_key(KEY))
    (call,) = calls
    assert call.secure and type(released) is type(_spelled(rows, spell))
    assert str(released.dtype).endswith("int64") and tuple(released.shape) == (40,)
    host = RNM.randomize(rows, rng=device_reference.replaying(call.words64()))
    assert np.array_equal(_host(released), host)
    assert _host(released)[1] == 3  # the largest utility wins by 2⁹⁷¹ lattice steps


def test_relative_scores_are_the_hosts_exactly() -> None:
    # Against the host's scores (Python integers where they leave int64), on a coarse lattice
    # (so that rounding matters) and a fine one (so that scores overflow float64).
    xp = array_api_compat.array_namespace(torch.zeros(1))
    rng = np.random.default_rng(2)
    rows = rng.normal(0.0, 1e3, size=(6, 8)) * 10.0 ** rng.integers(-300, 300, size=(6, 8))
    rows[0] = [0.5, 1.5, 2.5, -0.5, 3.5, -np.inf, 2.0**62, 2.0**62 + 2.0**10]
    rows[1] = [1.7e308, 1.7e308, -1.7e308, 1e-320, 0.0, -0.0, 5e-324, 1.0]
    rows[2] = [2.0**63, 2.0**63 - 2.0**11, -(2.0**62), 2.0**62, 1.0, 0.0, 3.0, 7.0]
    for exponent in (0, 1, -60, -1074, 900):
        scores, finite = noisy_max.lattice_scores(rows, exponent)
        expected = noisy_max._relative_scores(scores, finite)
        got = selection.relative_scores(xp, torch.from_numpy(rows), exponent).numpy()
        assert np.array_equal(np.where(finite, got, 0), np.where(finite, expected, 0)), exponent


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_report_noisy_max_has_the_exact_selection_probabilities(
    mode: str, calls: list[device_reference.RecordingWords]
) -> None:
    n = 10_000 if mode == "secure" else 20_000  # the secure draws cost a few words each
    batch = torch.from_numpy(np.tile(UTILITIES, (n, 1)))
    rng = None if mode == "secure" else torch.Generator().manual_seed(3)
    chosen = _host(RNM.randomize(batch, rng=rng))
    assert calls[0].secure == (mode == "secure")
    if mode == "secure":
        log_pmf = noisy_max.secure_report_noisy_max_log_pmf(UTILITIES, epsilon=RNM.epsilon)
    else:
        log_pmf = noisy_max.report_noisy_max_log_pmf(UTILITIES, RNM.scale)
    assert _chi_square(chosen, log_pmf) > 1e-6


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_fast_exponential_and_permute_and_flip_have_their_laws(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    n = 20_000
    batch = _spelled(np.tile(UTILITIES, (n, 1)), spell)
    rng = np.random.default_rng(4)
    rate = EXPONENTIAL.rate
    with np.errstate(divide="ignore"):  # log 0 = −inf for the −inf utility
        log_pmf = np.log(np.exp(rate * (UTILITIES - UTILITIES.max())))
    log_pmf -= np.log(np.exp(log_pmf).sum())
    chosen = _host(EXPONENTIAL.randomize(batch, rng=rng))
    assert _chi_square(chosen, log_pmf) > 1e-6
    repeated = _host(EXPONENTIAL.randomize(_spelled(UTILITIES, spell), rng=rng, size=n))
    assert repeated.shape == (n,)
    assert _chi_square(repeated, log_pmf) > 1e-6
    flipped = _host(PERMUTE_AND_FLIP.randomize(batch, rng=rng))
    pf_log_pmf = noisy_max.permute_and_flip_log_pmf(UTILITIES, PERMUTE_AND_FLIP.rate)
    assert _chi_square(flipped, pf_log_pmf) > 1e-6
    assert len(calls) == 3 and not any(call.secure for call in calls)


@pytest.mark.parametrize("mechanism", [RNM, EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
def test_fast_mode_is_reproducible_from_a_seed(
    mechanism: Any, calls: list[device_reference.RecordingWords]
) -> None:
    batch = torch.from_numpy(np.tile(np.array([0.0, 0.3, 0.1, 0.2]), (200, 1)))

    def draw(seed: int) -> np.ndarray:
        return _host(mechanism.randomize(batch, rng=torch.Generator().manual_seed(seed)))

    first, again, other = draw(11), draw(11), draw(12)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert first.dtype == np.int64 and first.shape == (200,)


@pytest.mark.parametrize("mechanism", [RNM, EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
@pytest.mark.parametrize(
    ("values", "field"),
    [
        (np.array([[0.0, np.nan]]), "utilities"),
        (np.array([[0.0, np.inf]]), "utilities"),
        (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), "utilities"),
        (np.array([[True, False]]), "utilities"),
        (np.zeros((3, 0)), "utilities"),
        (np.float64(1.0), "utilities"),
    ],
    ids=["nan", "inf", "empty-row", "bool", "no-candidate", "scalar"],
)
def test_values_the_host_refuses_are_refused_before_any_word(
    mechanism: Any, values: np.ndarray, field: str, calls: list[device_reference.RecordingWords]
) -> None:
    with pytest.raises(InvalidData) as refused:
        mechanism.randomize(torch.from_numpy(np.asarray(values)), rng=np.random.default_rng(0))
    assert refused.value.field == field
    assert not any(call.taken for call in calls)
    with pytest.raises(InvalidData):  # the host refuses them too
        mechanism.randomize(np.asarray(values), rng=np.random.default_rng(0))


@pytest.mark.parametrize("mechanism", [EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
@pytest.mark.parametrize("rng", [None, "keyed"])
def test_secure_exponential_and_permute_and_flip_are_refused_on_the_device(
    mechanism: Any, rng: Any, calls: list[device_reference.RecordingWords]
) -> None:
    # Before any value is read: the NaN would otherwise be the refusal.
    generator = SecureRandom.from_key(KEY) if rng == "keyed" else None
    with pytest.raises(InvalidParameter) as refused:
        mechanism.randomize(torch.tensor([[0.0, float("nan")]]), rng=generator)
    assert refused.value.parameter == "rng" and not calls


def test_secure_report_noisy_max_refuses_a_tiny_epsilon_before_reading_values(
    calls: list[device_reference.RecordingWords],
) -> None:
    with pytest.raises(InvalidParameter) as refused:
        noisy_max.ReportNoisyMax(epsilon=1e-9).randomize(torch.tensor([[0.0, float("nan")]]))
    assert refused.value.parameter == "epsilon" and not calls


def test_a_batch_size_with_a_batch_is_refused(calls: list[device_reference.RecordingWords]) -> None:
    with pytest.raises(InvalidParameter) as refused:
        EXPONENTIAL.randomize(torch.zeros(2, 3), rng=np.random.default_rng(0), size=4)
    assert refused.value.parameter == "size" and not calls

"""Duchi et al.'s mechanism on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): the 53-bit uniform and the 64-bit lie compared exactly on
32-bit words, the keystream word map, the CPU's reports from the same words, the exact report
rates in both modes, and the CPU's refusals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import duchi  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.plugin import lie_threshold  # noqa: E402
from dpkit.tensors import array_library, device_random  # noqa: E402
from dpkit.tensors import duchi as device_duchi  # noqa: E402
from dpkit.tensors.duchi import below_64, uniform_53  # noqa: E402

KEY = bytes(range(32))
DUCHI = duchi.Duchi(epsilon=1.0, lower=-2.0, upper=5.0)  # centre 1.5, scale 3.5
T64 = lie_threshold(1.0, 2)


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(monkeypatch, [(duchi, "duchi_reports")])


def _host(reports: Any) -> np.ndarray:
    return reports.numpy() if isinstance(reports, torch.Tensor) else np.from_dlpack(reports)


def test_the_53_bit_uniform_and_the_64_bit_comparison_are_exact() -> None:
    # Words on either side of each threshold's halves (the ties are where a comparison of the
    # high words alone, or a float64 of the word, would be wrong); 2⁶⁴ means every word.
    thresholds = [0, 1, T64, 2**32 - 1, 2**32, 2**32 + 1, 2**63, 2**64 - 1, 2**64]
    for threshold in thresholds:
        high0, low0 = divmod(threshold, 2**32)
        highs = [h for h in (0, high0 - 1, high0, high0 + 1, 2**32 - 1) if 0 <= h < 2**32]
        lows = [w for w in (0, low0 - 1, low0, low0 + 1, 2**11, 2**32 - 1) if 0 <= w < 2**32]
        high = np.repeat(np.array(highs, dtype=np.uint64), len(lows))
        low = np.tile(np.array(lows, dtype=np.uint64), len(highs))
        words = (high << np.uint64(32)) | low
        expected = (
            np.ones(words.shape, bool) if threshold == 2**64 else words < np.uint64(threshold)
        )
        uniform = (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
        spelled = [  # torch's words are int64 holding 32 bits, the others' uint32
            tuple(torch.from_numpy(half.astype(np.int64)) for half in (high, low)),
            tuple(xs.asarray(half.astype(np.uint32)) for half in (high, low)),
        ]
        for halves in spelled:
            library = array_library(halves[0], owner="test")
            assert library is not None
            namespace = library.xp
            assert np.array_equal(_host(below_64(namespace, *halves, threshold)), expected)
            assert np.array_equal(_host(uniform_53(namespace, *halves)), uniform)


class _Words:
    """Secure device words chosen by the test, for one call of ``count`` words."""

    secure = True

    def __init__(self, words: np.ndarray) -> None:
        self._words = words

    def take(self, count: int) -> Any:
        assert count == self._words.size
        return torch.from_numpy(self._words.astype(np.int64))


def test_ties_are_decided_as_on_the_cpu(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each value meets u = (M − 1)·2⁻⁵³ and u = M·2⁻⁵³, M = ⌈(1 + t)/2·2⁵³⌉ (up, then not: u
    # equals (1 + t)/2 when that is on the grid, as at t = 0), with low bits that u ignores,
    # and lie words T − 1 and T (lie, then not: the high halves tie, which a 32-bit threshold
    # would decide otherwise). The CPU path fed the same 64-bit words gives the same reports.
    t = np.array([-0.5, 0.0, 0.3, 1.0]).repeat(4)
    x = DUCHI.to_data(t)
    m = np.ceil((1.0 + DUCHI.standardize(x)) / 2.0 * 2.0**53).astype(np.uint64)
    m -= np.tile(np.array([1, 1, 0, 0], dtype=np.uint64), 4)
    m = np.minimum(m, np.uint64(2**53 - 1))  # t = 1: every u is below 1
    uniforms = (m << np.uint64(11)) | np.uint64(2**11 - 1)
    lies = np.uint64(T64) - np.tile(np.array([1, 0], dtype=np.uint64), 8)
    words64 = np.concatenate([uniforms, lies])
    assert np.all(lies >> np.uint64(32) == np.uint64(T64 >> 32))
    halves = np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1)
    monkeypatch.setattr(
        device_duchi, "device_words", lambda *args, **kwargs: _Words(halves.reshape(-1))
    )
    reports = _host(DUCHI.randomize(torch.from_numpy(x)))
    assert device_arrays == ["duchi_reports"]
    expected = DUCHI.randomize(x, rng=device_reference.replaying(words64))
    assert np.array_equal(reports, expected)
    assert np.count_nonzero(expected == DUCHI.output_space()[1]) not in (0, expected.size)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_reports_are_the_cpu_law_on_the_keystream_words_in_order(
    spell: str, device_arrays: list[str]
) -> None:
    # Value i: u from the 64-bit word w[2i]·2³² + w[2i+1] (its top 53 bits), up if
    # u < (1 + t)/2; its lie word w[2n+2i]·2³² + w[2n+2i+1] < T. The same words fed to the CPU
    # path give the same reports.
    x = np.random.default_rng(7).uniform(-2.0, 5.0, size=(4, 50))
    x[0, :3] = [-2.0, 5.0, 1.5]  # both ends and the centre
    if spell == "torch":
        values: Any = torch.from_numpy(x.astype(np.float32))
        x = x.astype(np.float32).astype(np.float64)
    else:
        x = np.round(x)
        values = xs.asarray(x.astype(np.int64))
    reports = DUCHI.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["duchi_reports"]
    assert type(reports) is type(values) and tuple(reports.shape) == (4, 50)
    assert reports.dtype == (torch.float64 if spell == "torch" else xs.float64)
    n = x.size
    w = device_reference.stream(device_reference.call_key(KEY), -(-4 * n // 16)).reshape(-1)
    w = w.astype(np.uint64)
    words = (w[0 : 4 * n : 2] << np.uint64(32)) | w[1 : 4 * n : 2]  # 2n 64-bit words
    t = DUCHI.standardize(x.reshape(-1))
    up = (words[:n] >> np.uint64(11)).astype(np.float64) * 2.0**-53 < (1.0 + t) / 2.0
    lie = words[n:] < np.uint64(T64)
    low, high = DUCHI.output_space()
    expected = np.where(up != lie, high, low).reshape(4, 50)
    assert np.array_equal(_host(reports), expected)
    assert 0 < np.count_nonzero(up) < n and 0 < np.count_nonzero(lie) < n
    cpu = DUCHI.randomize(x, rng=device_reference.replaying(words))
    assert cpu.dtype == np.float64 and np.array_equal(cpu, expected)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_report_rates_are_exact_in_both_modes(rng: str, device_arrays: list[str]) -> None:
    # 100 000 reports at each of t = −1, −0.5, 0, 0.3, 1. Secure: P[+] = P_up(1 − λ′) +
    # (1 − P_up)λ′, P_up = ⌈(1 + t)/2·2⁵³⌉/2⁵³, λ′ = T/2⁶⁴; fast: the float P[+ | t] on the 2⁻⁵³
    # grid. |z| < 5.5 for each: false-positive rate 5 × 3.8e-8 = 1.9e-7 per mode.
    standard = np.array([-1.0, -0.5, 0.0, 0.3, 1.0])
    points = DUCHI.to_data(standard)
    per_point = 100_000
    x = torch.from_numpy(np.repeat(points, per_point))
    generator = None if rng == "secure" else torch.Generator().manual_seed(11)
    reports = _host(DUCHI.randomize(x, rng=generator)).reshape(standard.size, per_point)
    assert device_arrays == ["duchi_reports"]
    low, high = DUCHI.output_space()
    assert np.all((reports == low) | (reports == high))
    t = DUCHI.standardize(points)
    if rng == "secure":
        up = np.ceil((1.0 + t) / 2.0 * 2.0**53) / 2.0**53
        lie = T64 / 2**64
        plus = up * (1.0 - lie) + (1.0 - up) * lie
    else:
        plus = np.ceil(duchi.plus_probability(t, DUCHI.epsilon) * 2.0**53) / 2.0**53
    for observed, p in zip(np.count_nonzero(reports == high, axis=1), plus, strict=True):
        assert abs(observed - per_point * p) / math.sqrt(per_point * p * (1 - p)) < 5.5


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    bad_values = [[0.0, math.nan], [0.0, -2.5], [5.000001, 0.0], [-math.inf, 0.0]]
    for bad in bad_values:
        for spelled in (torch.tensor(bad, dtype=torch.float64), xs.asarray(bad)):
            with pytest.raises(InvalidData, match=r"NaN or values outside \[-2, 5\]") as found:
                DUCHI.randomize(spelled)
            assert found.value.field == "values"
        with pytest.raises(InvalidData, match=r"NaN or out of range") as cpu:
            DUCHI.randomize(np.array(bad))
        assert cpu.value.field == "values"
    for refused in (torch.tensor([1 + 1j]), np.array([1 + 1j])):
        with pytest.raises(InvalidData, match="must be real numbers"):
            DUCHI.randomize(refused)
    for values in (torch.tensor([0.0]), np.array([0.0])):
        with pytest.raises(InvalidParameter, match="rng"):
            DUCHI.randomize(values, rng=42)  # type: ignore[arg-type]
    # Without 64-bit types (JAX without x64) the refusal comes from the library alone.
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        DUCHI.randomize(torch.tensor([math.nan]))

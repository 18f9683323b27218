"""Hadamard response on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): the keystream word map, the exact law in both modes, and
reports that either path's estimator counts alike."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp.hadamard import HadamardResponse, HadamardResponseEstimator, parity  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.plugin import lie_threshold  # noqa: E402
from dpkit.tensors import array_library  # noqa: E402
from dpkit.tensors.device_random import threshold32  # noqa: E402
from dpkit.tensors.hadamard import hadamard_reports  # noqa: E402

KEY = bytes(range(32))
HR = HadamardResponse(epsilon=1.0, k=5)  # K = 8
K = HR.output_size
T64 = lie_threshold(1.0, 2)


def _as_device(values: object):
    library = array_library(values, owner="test")
    assert library is not None
    return attrs.evolve(library, on_host=False)


def _reports(values: object, rng: object) -> object:
    return hadamard_reports(
        _as_device(values), values, k=HR.k, outside_threshold64=T64, rng=rng, owner="hr"
    )


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_reports_are_the_keystream_words_in_order(spell: str) -> None:
    # Report i: outside if w[i] < T; y = w[n + i] mod K, moved across by the lowest set bit of
    # x + 1 when its half is not the one drawn.
    x = np.array([[0, 4, 2], [3, 1, 1]])
    n = x.size
    values = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = _reports(values, SecureRandom.from_key(KEY))
    assert type(reports) is type(values) and tuple(reports.shape) == (2, 3)
    w = device_reference.stream(device_reference.call_key(KEY), 1).reshape(-1).astype(np.uint64)
    rows = x.reshape(-1).astype(np.uint64) + np.uint64(1)
    outside = w[:n] < threshold32(T64)
    y = w[n : 2 * n] % np.uint64(K)
    wrong = parity(rows & y).astype(bool) != outside
    y ^= np.where(wrong, rows & (~rows + np.uint64(1)), np.uint64(0))
    assert np.array_equal(np.from_dlpack(reports).reshape(-1), y.astype(np.int64))


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_hr_on_the_device_path_has_the_exact_law(rng: str) -> None:
    # Chi-square of 60 000 reports of index 3 against the exact pmf on [K]: 2(1 − λ′)/K on
    # C_3, 2λ′/K off it, λ′ = ⌈λ·2³²⌉/2³²; p-value > 1e-6: a false-positive rate of 1e-6 per mode.
    x = torch.full((60_000,), 3, dtype=torch.int16)
    generator = None if rng == "secure" else torch.Generator().manual_seed(6)
    y = _reports(x, generator)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.int64
    outside = threshold32(T64) / 2**32
    inside = HR.in_support(np.arange(K), 3)
    expected = np.where(inside, 2 * (1 - outside) / K, 2 * outside / K)
    counts = np.bincount(y.numpy(), minlength=K)
    assert stats.chisquare(counts, expected * x.numel()).pvalue > 1e-6


def test_device_and_cpu_estimators_count_each_others_reports_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    device_reference.on_device(monkeypatch)
    values = np.random.default_rng(4).integers(0, 5, size=300)
    estimator = HadamardResponseEstimator(HR)
    on_device = HR.randomize(torch.from_numpy(values))
    cpu = HR.randomize(values, rng=np.random.default_rng(5))
    for device_reports, host_reports in [
        (on_device, on_device.numpy()),
        (torch.from_numpy(cpu), cpu),
    ]:
        statistics = estimator.accumulate(device_reports)
        expected = estimator.support_counts(host_reports)
        assert statistics.n == expected[1] == 300
        assert np.array_equal(statistics.counts, expected[0])
    with pytest.raises(InvalidData, match=r"outside 0\.\.7"):
        estimator.accumulate(torch.tensor([0, 8]))

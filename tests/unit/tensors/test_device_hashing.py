"""Optimal local hashing on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): the CPU's hash on 32-bit words, the keystream word map, the
exact law in both modes, and reports and counts that either path's estimator reads."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp.local_hashing import (  # noqa: E402
    OptimalLocalHashing,
    OptimalLocalHashingEstimator,
    multiply_add_shift,
)
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.plugin import lie_threshold  # noqa: E402
from dpkit.tensors import array_library, hashing  # noqa: E402
from dpkit.tensors.device_random import threshold32  # noqa: E402
from dpkit.tensors.hashing import (  # noqa: E402
    hashed_reports,
    hashed_support_counts,
    multiply_add_shift_words,
)

KEY = bytes(range(32))
OLH = OptimalLocalHashing(epsilon=1.0, k=5)  # g = 4
G = OLH.range
T64 = lie_threshold(1.0, G)


def _as_device(values: object):
    library = array_library(values, owner="test")
    assert library is not None
    return attrs.evolve(library, on_host=False)


def _reports(values: object, rng: object, mechanism: OptimalLocalHashing = OLH):
    threshold = lie_threshold(mechanism.epsilon, mechanism.range)
    return hashed_reports(
        _as_device(values),
        values,
        k=mechanism.k,
        g=mechanism.range,
        lie_threshold64=threshold,
        rng=rng,
        owner="olh",
    )


def _host(reports: object) -> np.ndarray:
    if isinstance(reports, torch.Tensor):
        return reports.view(torch.int64).numpy().view(np.uint64)
    return np.from_dlpack(reports)


def _halves(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return words >> np.uint64(32), words & np.uint64(0xFFFFFFFF)


@pytest.mark.parametrize("g", [2, 3, 4, 1000, 2**31 - 1])
def test_the_hash_on_32_bit_words_is_the_cpu_hash(g: int) -> None:
    rng = np.random.default_rng(g)
    edge = np.array([0, 1, 2**32 - 1, 2**63, 2**64 - 1], dtype=np.uint64)
    a = np.concatenate([edge.repeat(5), rng.integers(0, 2**64, 3000, dtype=np.uint64)])
    b = np.concatenate([np.tile(edge, 5), rng.integers(0, 2**64, 3000, dtype=np.uint64)])
    x = np.concatenate([np.tile(edge[:3], 9)[:25], rng.integers(0, 2**32, 3000, dtype=np.uint64)])
    expected = multiply_add_shift(a, b, x, g)
    (a_hi, a_lo), (b_hi, b_lo) = _halves(a), _halves(b)
    words = (a_hi, a_lo, b_hi, b_lo, x)
    wide = multiply_add_shift_words(
        *(torch.from_numpy(w.astype(np.int64)) for w in words), g, wide=True
    )
    narrow = multiply_add_shift_words(
        *(xs.asarray(w.astype(np.uint32)) for w in words), g, wide=False
    )
    assert np.array_equal(wide.numpy().astype(np.uint64), expected)
    assert np.array_equal(np.from_dlpack(narrow).astype(np.uint64), expected)


def test_secure_reports_are_the_keystream_words_in_order() -> None:
    # Report i: a = w[4i]·2³² + w[4i+1], b = w[4i+2]·2³² + w[4i+3]; lie if w[4n+i] < T; the
    # other value w[16·⌈5n/16⌉ + i] mod (g − 1), from the next whole block (no word is rejected
    # for this key: asserted).
    x = torch.tensor([[0, 4, 2], [3, 1, 1]])
    n = x.numel()
    first = 16 * -(-5 * n // 16)
    reports = _reports(x, SecureRandom.from_key(KEY))
    assert isinstance(reports, torch.Tensor) and reports.dtype == torch.uint64
    assert tuple(reports.shape) == (2, 3, 3)
    w = device_reference.stream(device_reference.call_key(KEY), 3).reshape(-1).astype(np.uint64)
    assert np.all(w[first : first + n] < (2**32 // (G - 1)) * (G - 1))
    a = (w[0 : 4 * n : 4] << np.uint64(32)) | w[1 : 4 * n : 4]
    b = (w[2 : 4 * n : 4] << np.uint64(32)) | w[3 : 4 * n : 4]
    hashed = multiply_add_shift(a, b, x.numpy().reshape(-1), G)
    lie = w[4 * n : 5 * n] < threshold32(T64)
    other = w[first : first + n] % np.uint64(G - 1)
    other += other >= hashed
    expected = np.stack([a, b, np.where(lie, other, hashed)], axis=1).reshape(2, 3, 3)
    assert np.array_equal(_host(reports), expected)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_olh_on_the_device_path_has_the_exact_law(rng: str) -> None:
    # 60 000 users holding 2. Three chi-square tests at p > 1e-6 (false-positive rate 3e-6 per
    # mode): the joint law of (H(2), y) on g × g cells, P = π_h (1 − λ′) on the diagonal and
    # π_h λ′/(g − 1) off it (π_h = n_h/2³², λ′ = ⌈λ·2³²⌉/2³²); and the top four bits of a and
    # the low four bits of b, uniform.
    x = torch.full((60_000,), 2, dtype=torch.int32)
    generator = None if rng == "secure" else torch.Generator().manual_seed(5)
    rows = _host(_reports(x, generator)).reshape(-1, 3)
    hashed = OLH.hash(rows[:, :2], np.full(rows.shape[0], 2))
    cells = np.bincount((hashed * G + rows[:, 2]).astype(np.intp), minlength=G * G)
    sizes = np.array([-(-((z + 1) << 32) // G) - -(-(z << 32) // G) for z in range(G)])
    pi = sizes / 2**32
    lie = threshold32(T64) / 2**32
    expected = np.where(np.eye(G, dtype=bool), 1 - lie, lie / (G - 1)) * pi[:, None]
    assert stats.chisquare(cells, expected.reshape(-1) * rows.shape[0]).pvalue > 1e-6
    for nibble in (rows[:, 0] >> np.uint64(60), rows[:, 1] & np.uint64(15)):
        counts = np.bincount(nibble.astype(np.intp), minlength=16)
        assert stats.chisquare(counts).pvalue > 1e-6


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_device_and_cpu_estimators_count_each_others_reports_alike(
    spell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small passes (2¹² cells: 4 reports × 1024 categories) and k > 1024 exercise both loops of
    # the device count.
    monkeypatch.setattr(hashing, "_CELLS", 1 << 12)
    mechanism = OptimalLocalHashing(epsilon=2.0, k=1100)
    estimator = OptimalLocalHashingEstimator(mechanism)
    values = np.random.default_rng(2).integers(0, 1100, size=(10, 3))
    if spell == "torch":
        on_device = _reports(torch.from_numpy(values), None, mechanism)
        cpu = mechanism.randomize(values, rng=np.random.default_rng(3))
        cpu_on_device = [torch.from_numpy(cpu), torch.from_numpy(cpu.view(np.int64))]
    else:
        on_device = _reports(xs.asarray(values), None, mechanism)
        cpu = mechanism.randomize(values, rng=np.random.default_rng(3))
        cpu_on_device = [xs.asarray(cpu), xs.asarray(cpu.view(np.int64))]
    for device_reports, host_reports in [
        (on_device, _host(on_device)),
        *((spelled, cpu) for spelled in cpu_on_device),
    ]:
        counts, n = hashed_support_counts(
            _as_device(device_reports), device_reports, k=1100, g=mechanism.range, owner="olh"
        )
        expected, expected_n = estimator.support_counts(host_reports)
        assert n == expected_n == 30 and np.array_equal(counts, expected)
        assert counts.sum() > 0


def test_the_device_count_is_through_the_estimator(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkit_ldp import local_hashing

    called = device_reference.on_device(monkeypatch, [(local_hashing, "hashed_support_counts")])
    reports = OLH.randomize(torch.tensor([0, 1, 4, 4]))
    statistics = OptimalLocalHashingEstimator(OLH).accumulate(reports)
    assert called and statistics.n == 4
    expected = OptimalLocalHashingEstimator(OLH).support_counts(_host(reports))[0]
    assert np.array_equal(statistics.counts, expected)


def test_the_device_path_refuses_bad_values_and_reports() -> None:
    for bad in (torch.tensor([0, 5]), torch.tensor([0, -1]), torch.tensor([0.0, 1.0])):
        with pytest.raises(InvalidData, match=r"category indices|outside 0\.\.4"):
            _reports(bad, None)
    good = _reports(torch.tensor([1, 2]), None).view(torch.int64)
    wrong_y = good.clone()
    wrong_y[0, 2] = G
    negative_y = good.clone()
    negative_y[1, 2] = -1
    cases = [
        (wrong_y, r"outside 0\.\.3"),
        (negative_y, r"outside 0\.\.3"),
        (good[:, :2], r"shape \(\.\.\., 3\)"),
        (good.to(torch.int32), "64-bit integers"),
        (good.to(torch.float64), "64-bit integers"),
    ]
    for reports, message in cases:
        with pytest.raises(InvalidData, match=message):
            hashed_support_counts(_as_device(reports), reports, k=5, g=G, owner="olh")

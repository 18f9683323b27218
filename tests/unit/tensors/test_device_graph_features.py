"""The multi-bit mechanism on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): the CPU's reports from the same keystream words (rejected
words included), the exact law in both modes, and the CPU's refusals before any word is drawn."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import graph_features  # noqa: E402
from dpkit_ldp.duchi import plus_probability  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.plugin import lie_threshold  # noqa: E402
from dpkit.tensors import device_random  # noqa: E402
from dpkit.tensors import multibit as device_multibit  # noqa: E402

KEY = bytes(range(32))
# d = 7, m = 3: the moduli 7, 6, 5 reject the words below 2⁶⁴ mod 7 = 2, 2⁶⁴ mod 6 = 4 and
# 2⁶⁴ mod 5 = 1. The centre is 1.5, the scale 3.5.
MULTIBIT = graph_features.MultiBit(epsilon=6.0, lower=-2.0, upper=5.0, dimension=7, k=3)


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(monkeypatch, [(graph_features, "multibit_reports")])


def _host(reports: Any) -> np.ndarray:
    return reports.numpy() if isinstance(reports, torch.Tensor) else np.from_dlpack(reports)


def _replayed(words64: np.ndarray) -> tuple[SecureRandom, Any]:
    rng = device_reference.replaying(words64)
    return rng, rng._source  # the source counts the words the CPU took


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_reports_are_the_cpu_law_on_the_keystream_words_in_order(
    spell: str, device_arrays: list[str]
) -> None:
    # n = 40 nodes in a (2, 20, 7) array: 64-bit words 0 … 3n − 1 draw the features (round i,
    # node r: word i·n + r), then 3n uniforms and 3n lies (node r's c-th feature: r·3 + c).
    # The CPU path fed the same 64-bit words, in order, gives the same reports and takes them
    # all.
    x = np.random.default_rng(7).uniform(-2.0, 5.0, size=(2, 20, 7))
    x[0, 0, :3] = [-2.0, 5.0, 1.5]  # both ends and the centre
    if spell == "torch":
        values: Any = torch.from_numpy(x.astype(np.float32))
        x = x.astype(np.float32).astype(np.float64)
    else:
        x = np.round(x)
        values = xs.asarray(x.astype(np.int64))
    reports = MULTIBIT.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["multibit_reports"]
    assert type(reports) is type(values) and tuple(reports.shape) == (2, 20, 7)
    assert reports.dtype == (torch.float64 if spell == "torch" else xs.float64)
    n = 40
    w = device_reference.stream(device_reference.call_key(KEY), -(-18 * n // 16)).reshape(-1)
    w = w.astype(np.uint64)[: 18 * n]
    words64 = (w[0::2] << np.uint64(32)) | w[1::2]
    rng, source = _replayed(words64)
    cpu = MULTIBIT.randomize(x, rng=rng)
    assert source._next == words64.size
    assert cpu.dtype == np.float64 and np.array_equal(_host(reports), cpu)
    _, centre, plus = np.unique(cpu)
    assert centre == MULTIBIT.centre
    assert np.all(np.count_nonzero(cpu != centre, axis=-1) == 3)
    assert 0 < np.count_nonzero(cpu == plus) < 3 * n


class _Words:
    """Secure device words chosen by the test, handed out in order across the call's takes."""

    secure = True

    def __init__(self, words: np.ndarray) -> None:
        self._words = words.astype(np.int64)
        self.taken = 0

    def take(self, count: int) -> Any:
        out = self._words[self.taken : self.taken + count]
        assert out.size == count, "the device took more words than the test gave"
        self.taken += count
        return torch.from_numpy(out)


def test_rejected_words_and_ties_are_decided_as_on_the_cpu(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # n = 4 nodes. Round 0 (modulus 7, words below 2 rejected): words 1 and 3 rejected, their
    # replacements are words 4 (rejected again: replaced by word 6) and 5; round 1 (modulus 6,
    # below 4) is words 7 … 10 with word 8 rejected (replaced by 11); round 2 (modulus 5) words
    # 12 … 15; then 12 uniforms and 12 lies: 40 words, 4 more than the call's first take.
    # Node r's features all sit at t_r, and its uniforms meet u = (M − 1)·2⁻⁵³ and M·2⁻⁵³,
    # M = ⌈(1 + t_r)/2·2⁵³⌉ (up, then not; low bits that u ignores), its lie words T − 1 and T
    # (lie, then not: the high halves tie, which a 32-bit threshold would decide otherwise).
    words64 = np.random.default_rng(3).integers(0, 2**64, size=40, dtype=np.uint64)
    for position, word in ((1, 0), (3, 1), (4, 1), (8, 3), (13, 1)):
        words64[position] = word  # word 13 (round 2: 1 is not below 1) is kept
    words64[6] = 2  # not rejected in round 0 (2 is not below 2): J = 2 mod 7 = 2
    t = np.array([-0.5, 0.0, 0.3, 1.0])
    x = np.repeat(MULTIBIT.to_data(t)[:, None], 7, axis=1)
    m = np.ceil((1.0 + MULTIBIT.standardize(x[:, 0])) / 2.0 * 2.0**53).astype(np.uint64)
    m = np.repeat(m, 3) - np.tile(np.array([1, 0, 0], dtype=np.uint64), 4)
    m = np.minimum(m, np.uint64(2**53 - 1))  # t = 1: every u is below 1
    words64[16:28] = (m << np.uint64(11)) | np.uint64(2**11 - 1)
    threshold = lie_threshold(MULTIBIT.epsilon / 3, 2)
    words64[28:40] = np.uint64(threshold) - np.tile(np.array([1, 0], dtype=np.uint64), 6)
    assert np.all(words64[28:40] >> np.uint64(32) == np.uint64(threshold >> 32))
    halves = np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1)
    source = _Words(halves.reshape(-1))
    monkeypatch.setattr(device_multibit, "device_words", lambda *args, **kwargs: source)
    reports = _host(MULTIBIT.randomize(torch.from_numpy(x)))
    assert device_arrays == ["multibit_reports"] and source.taken == 80
    rng, cpu_source = _replayed(words64)
    cpu = MULTIBIT.randomize(x, rng=rng)
    assert cpu_source._next == 40 and np.array_equal(reports, cpu)
    assert cpu[1, 2] != MULTIBIT.centre  # node 1's first draw: feature 2, after two rejections
    assert len(np.unique(cpu)) == 3


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_the_law_is_exact_in_both_modes(rng: str, device_arrays: list[str]) -> None:
    # 30 000 nodes with d = 3 features at t = −0.5, 0.3, 1, m = 2 (ε/m = 1.5): each feature is
    # drawn with probability 2/3, and reported at plus with P[+ | t] (secure: P_up(1 − λ′) +
    # (1 − P_up)λ′, P_up = ⌈(1 + t)/2·2⁵³⌉/2⁵³, λ′ = T/2⁶⁴; fast: the float P[+ | t] on the 2⁻⁵³
    # grid). Six counts with |z| < 5.5 each: false-positive rate 6 × 3.8e-8 = 2.3e-7 per mode.
    mechanism = graph_features.MultiBit(epsilon=3.0, lower=0.0, upper=4.0, dimension=3, k=2)
    standard = np.array([-0.5, 0.3, 1.0])
    nodes = 30_000
    x = torch.from_numpy(np.tile(mechanism.to_data(standard), (nodes, 1)))
    generator = None if rng == "secure" else torch.Generator().manual_seed(11)
    reports = _host(mechanism.randomize(x, rng=generator))
    assert device_arrays == ["multibit_reports"]
    centre = mechanism.centre
    high = reports.max()
    drawn = reports != centre
    assert np.all(np.count_nonzero(drawn, axis=1) == 2)
    t = mechanism.standardize(mechanism.to_data(standard))
    if rng == "secure":
        up = np.ceil((1.0 + t) / 2.0 * 2.0**53) / 2.0**53
        lie = lie_threshold(1.5, 2) / 2**64
        plus = up * (1.0 - lie) + (1.0 - up) * lie
    else:
        plus = np.ceil(plus_probability(t, 1.5) * 2.0**53) / 2.0**53
    for j in range(3):
        chosen = int(np.count_nonzero(drawn[:, j]))
        z = (chosen - nodes * 2 / 3) / math.sqrt(nodes * 2 / 9)
        assert abs(z) < 5.5
        hits = int(np.count_nonzero(reports[:, j] == high))
        p = plus[j]
        assert abs(hits - chosen * p) / math.sqrt(chosen * p * (1 - p)) < 5.5


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses_before_drawing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawn: list[Any] = []
    real_words = device_multibit.device_words

    def watched(*args: Any, **kwargs: Any) -> Any:
        drawn.append(args)
        return real_words(*args, **kwargs)

    monkeypatch.setattr(device_multibit, "device_words", watched)
    ok = [0.0] * 7
    for wrong in (math.nan, -2.5, 5.000001, -math.inf):
        bad = [*ok[1:], wrong]
        for spelled in (torch.tensor([ok, bad], dtype=torch.float64), xs.asarray([ok, bad])):
            with pytest.raises(InvalidData, match=r"NaN or values outside \[-2, 5\]") as found:
                MULTIBIT.randomize(spelled)
            assert found.value.field == "values"
        with pytest.raises(InvalidData, match=r"NaN or out of range"):
            MULTIBIT.randomize(np.array([ok, bad]))
    for shape in ((3, 6), (7, 3), ()):
        with pytest.raises(InvalidData, match=r"must have 7 columns") as found:
            MULTIBIT.randomize(torch.full(shape, math.nan))  # the shape, not the values
        assert found.value.field == "values"
        with pytest.raises(InvalidData, match=r"must have 7 columns"):
            MULTIBIT.randomize(np.zeros(shape))
    for refused in (torch.ones((1, 7), dtype=torch.complex64), np.ones((1, 7), dtype=complex)):
        with pytest.raises(InvalidData, match="must be real numbers"):
            MULTIBIT.randomize(refused)
    assert drawn == []
    for values in (torch.zeros((1, 7)), np.zeros((1, 7))):
        with pytest.raises(InvalidParameter, match="rng"):
            MULTIBIT.randomize(values, rng=42)  # type: ignore[arg-type]
    empty = MULTIBIT.randomize(torch.zeros((0, 7)))
    assert empty.shape == (0, 7) and empty.dtype == torch.float64
    # Without 64-bit types (JAX without x64) the refusal comes from the library alone.
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        MULTIBIT.randomize(torch.full((2, 3), math.nan))

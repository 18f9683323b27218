"""The local graph mechanisms on neighbour lists on the device path, run on the CPU (torch
tensors and array-api-strict arrays treated as an accelerator's).

Noisy degrees and noisy k-stars: the counts of the lists (the projection included), the exact
discrete Laplace law of the noise in both modes against the mechanism's own
``log_probability``, and the CPU's refusals before any word is drawn. graph_rr and graph_arr:
the reported bits are the CPU's on the same 64-bit words (the keystream's, in the stated order;
thresholds tied on the high half decided by the low), the channel's law in both modes, the
caller's array type, and the CPU's refusals before any word is drawn.

χ² tests below: each refuses a correct law with probability at most ALPHA = 1e-6."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import graph_arr, graph_degree, graph_rr  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import array_library, device_random, list_bits, list_counts  # noqa: E402

ALPHA = 1e-6
DEGREE = graph_degree.NoisyDegree(epsilon=1.0, nodes=9)
KSTAR = graph_degree.LocalKStars(epsilon=2.0, nodes=9, max_degree=4, k=2)
RR = graph_rr.GraphRandomizedResponse(epsilon=1.0, nodes=5)
ARR = graph_arr.AsymmetricRandomizedResponse(epsilon=1.0, nodes=5, mu=0.3)
KEY = bytes(range(32))


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(monkeypatch, [(graph_degree, "noisy_list_counts")])


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [DEGREE, KSTAR], ids=["degree", "kstar"])
def test_the_counts_are_the_cpus(
    spell: str, mech: Any, device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Noise switched off to read the counts: every degree 0 … 8, so the k-star projection at
    # D = 4 shows; lists in a (3, 3, 8) array of booleans, integers or floats.
    monkeypatch.setattr(list_counts, "geometric_noise", lambda library, counts, **kw: counts)
    lists = np.tril(np.ones((9, 8)), -1)[:, ::-1].reshape(3, 3, 8)
    for dtype in (np.bool_, np.int32, np.float32):
        values = lists.astype(dtype)
        got = mech.randomize(torch.from_numpy(values) if spell == "torch" else xs.asarray(values))
        assert tuple(got.shape) == (3, 3)
        degrees = values.astype(bool).sum(axis=-1)
        assert np.array_equal(_host(got), mech.count(degrees.reshape(-1)).reshape(3, 3))
    assert set(device_arrays) == {"noisy_list_counts"}


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("mech", [DEGREE, KSTAR], ids=["degree", "kstar"])
def test_the_noise_has_the_exact_law_in_both_modes(
    rng: str, mech: Any, device_arrays: list[str]
) -> None:
    # 20 000 releases of one list of degree 5: the outputs' counts against the mechanism's own
    # pmf (log_probability) on its output window, the tails beyond it pooled.
    lists = np.zeros((20_000, 8), dtype=np.int64)
    lists[:, :5] = 1
    generator = None if rng == "secure" else torch.Generator().manual_seed(2)
    out = _host(mech.randomize(torch.from_numpy(lists), rng=generator))
    assert out.dtype == np.int64 and device_arrays == ["noisy_list_counts"]
    window = np.arange(*mech.output_window())
    inside = np.exp(mech.log_probability(window, np.broadcast_to(lists[0], (window.size, 8))))
    observed = np.append(np.bincount(out - window[0], minlength=window.size)[: window.size], 0)
    observed[-1] = np.count_nonzero((out < window[0]) | (out > window[-1]))
    expected = np.append(inside, max(1.0 - inside.sum(), 0.0)) * out.size
    keep = expected > 5  # the χ² approximation's rule; the rare outputs pooled into the last
    pooled = np.append(observed[keep], observed[~keep].sum())
    pooled_expected = np.append(expected[keep], expected[~keep].sum())
    assert (
        stats.chisquare(pooled, pooled_expected * pooled.sum() / pooled_expected.sum()).pvalue
        > ALPHA
    )


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(list_counts, "geometric_noise", _no_noise_expected)
    for bad, message in (
        (torch.tensor([0, 2, 1]), "must hold 0 or 1"),
        (torch.tensor([0.0, float("nan")]), "must hold 0 or 1"),
        (torch.tensor(1), "must be a 0/1 array"),
        (torch.tensor([1 + 1j]), "must be a 0/1 array"),
    ):
        for mech in (DEGREE, KSTAR):
            with pytest.raises(InvalidData, match=message) as refused:
                mech.randomize(bad)
            assert refused.value.field == "values"
            with pytest.raises(InvalidData, match=message):
                mech.randomize(_host(bad))  # the CPU says the same
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="64-bit integers"):
        DEGREE.randomize(torch.tensor([0, 2]))  # the library is refused before the values


def _no_noise_expected(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("noise was drawn before the refusal")


# -- graph_rr and graph_arr: the neighbour-list bits --------------------------------------


@pytest.fixture
def bit_calls(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path; the list holds the words of
    each call of the neighbour-list bits there (none for a call refused before drawing)."""
    return device_reference.recording_calls(monkeypatch, list_bits)


def _spelled(values: np.ndarray, spell: str) -> Any:
    return torch.from_numpy(values.copy()) if spell == "torch" else xs.asarray(values)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [RR, ARR], ids=["rr", "arr"])
def test_secure_bits_are_the_cpus_on_the_same_words(
    spell: str, mech: Any, bit_calls: list[device_reference.RecordingWords]
) -> None:
    # 40 lists of 5 bits as booleans, integers and floats: bit i takes the 64-bit word of
    # keystream words 2i (high) and 2i + 1 (low); the CPU's sampler fed those words in that
    # order gives the same bits.
    lists = np.random.default_rng(4).random((40, 5)) < 0.5
    for dtype in (np.bool_, np.int32, np.float32):
        values = _spelled(lists.astype(dtype), spell)
        got = mech.randomize(values, rng=SecureRandom.from_key(KEY))
        assert type(got) is type(values) and tuple(got.shape) == (40, 5)
        assert got.dtype == (torch.bool if spell == "torch" else xs.bool)
        call = bit_calls[-1]
        assert call.secure and call.real.key == device_reference.call_key(KEY)
        words = device_reference.stream(call.real.key, 25).reshape(-1).astype(np.uint64)
        assert np.array_equal(np.concatenate(call.taken), words)  # blocks 0 … 24, in order
        host = mech.randomize(lists, rng=device_reference.replaying(call.words64()))
        assert np.array_equal(_host(got), host)
        assert 0 < np.count_nonzero(host != lists) < lists.size
    assert len(bit_calls) == 3


def test_bits_drawn_a_pass_at_a_time_take_the_same_words(
    bit_calls: list[device_reference.RecordingWords], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Passes of 8 bits (one block of words each, 25 of them): the words of one draw, in order,
    # so the same bits as one pass under the same key, and the host's on those words.
    lists = np.random.default_rng(5).random((40, 5)) < 0.5
    whole = _host(ARR.randomize(torch.from_numpy(lists), rng=SecureRandom.from_key(KEY)))
    monkeypatch.setattr(list_bits, "_PASS", 8)
    got = _host(ARR.randomize(torch.from_numpy(lists), rng=SecureRandom.from_key(KEY)))
    assert len(bit_calls[-1].taken) == 25 and np.array_equal(got, whole)
    host = ARR.randomize(lists, rng=device_reference.replaying(bit_calls[-1].words64()))
    assert np.array_equal(got, host)


class _Chosen:
    """Secure device words chosen by the test, for one ``take`` (the halves of given 64-bit
    words)."""

    secure = True

    def __init__(self, words64: np.ndarray) -> None:
        halves = np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1)
        self._halves = halves.reshape(-1)
        self.library = array_library(torch.zeros(1), owner="test")

    def take(self, count: int) -> Any:
        assert count == self._halves.size
        return torch.from_numpy(self._halves.astype(np.int64))


@pytest.mark.usefixtures("bit_calls")
@pytest.mark.parametrize("mech", [RR, ARR], ids=["rr", "arr"])
def test_thresholds_tied_on_the_high_half_are_decided_by_the_low(
    mech: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Words T − 1 and T for each threshold: their high halves are T's, so only the low
    # halves (the exact 64-bit comparison) report the first and not the second.
    one, zero = mech._thresholds()
    words = np.array([one - 1, one, zero - 1, zero], dtype=np.uint64)
    assert len(set((words[:2] >> np.uint64(32)).tolist())) == 1
    assert len(set((words[2:] >> np.uint64(32)).tolist())) == 1
    monkeypatch.setattr(list_bits, "device_words", lambda *a, **k: _Chosen(words))
    truth = np.array([1, 1, 0, 0], dtype=np.uint8)
    got = mech.randomize(torch.from_numpy(truth))
    assert got.tolist() == [True, False, True, False]
    host = mech.randomize(truth, rng=device_reference.replaying(words))
    assert np.array_equal(_host(got), host)


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("mech", [RR, ARR], ids=["rr", "arr"])
def test_bits_have_the_channels_law_in_both_modes(
    rng: str, mech: Any, bit_calls: list[device_reference.RecordingWords]
) -> None:
    # 20 000 reports of the list (1, 0, 1): the counts of the 8 reports against the product
    # law of the exact channel (p₁ = T₁/2⁶⁴ for a 1, p₀ = T₀/2⁶⁴ for a 0), which also sees
    # bits that share a word.
    truth = np.array([1, 0, 1], dtype=np.int64)
    lists = np.broadcast_to(truth, (20_000, 3)).copy()
    generator = None if rng == "secure" else torch.Generator().manual_seed(2)
    out = _host(mech.randomize(torch.from_numpy(lists), rng=generator))
    assert out.dtype == np.bool_ and len(bit_calls) == 1
    assert bit_calls[0].secure == (rng == "secure")
    one, zero = (t / 2.0**64 for t in mech._thresholds())
    p = np.where(truth == 1, one, zero)
    space = ((np.arange(8)[:, None] >> np.arange(2, -1, -1)) & 1).astype(bool)
    law = np.prod(np.where(space, p, 1.0 - p), axis=1)
    observed = np.bincount(out.astype(np.int64) @ np.array([4, 2, 1]), minlength=8)
    assert stats.chisquare(observed, law * out.shape[0]).pvalue > ALPHA


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_bits_keep_the_shape_of_any_list_batch(
    spell: str, bit_calls: list[device_reference.RecordingWords]
) -> None:
    # One list, a batch of batches, none, and a 0-d bit, as on the CPU; the dense booleans
    # whatever the output parameter (randomize_graph's encoding).
    sparse = graph_arr.AsymmetricRandomizedResponse(epsilon=1.0, nodes=5, mu=0.3, output="sparse")
    for shape in ((5,), (2, 3, 5), (0, 5), ()):
        values = _spelled(np.ones(shape, dtype=np.uint8), spell)
        for mech in (RR, sparse):
            got = mech.randomize(values, rng=SecureRandom.from_key(KEY))
            assert type(got) is type(values) and tuple(got.shape) == shape
            expected = mech.randomize(np.ones(shape), rng=np.random.default_rng(0))
            assert _host(got).dtype == expected.dtype == np.bool_
    assert len(bit_calls) == 8  # the empty batches draw no word, but take the device path


def test_the_bits_device_path_refuses_what_the_cpu_refuses(
    bit_calls: list[device_reference.RecordingWords], monkeypatch: pytest.MonkeyPatch
) -> None:
    for bad, message in (
        (torch.tensor([0, 2, 1]), "must hold 0 or 1"),
        (torch.tensor([0.0, float("nan")]), "must hold 0 or 1"),
        (torch.tensor([0.5, 1.0]), "must hold 0 or 1"),
        (torch.tensor([1 + 0j]), "must hold 0/1"),  # the dtype alone: no value is read
    ):
        for mech in (RR, ARR):
            with pytest.raises(InvalidData, match=message) as refused:
                mech.randomize(bad)
            assert refused.value.field == "values"
            with pytest.raises(InvalidData, match=message):
                mech.randomize(_host(bad))  # the CPU says the same
    assert all(not call.taken for call in bit_calls)  # nothing drawn before a refusal
    with pytest.raises(InvalidParameter, match="rng"):
        RR.randomize(torch.tensor([0, 1]), rng=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidData, match="must hold 0 or 1") as refused:
        RR.randomize_graph(torch.full((5, 5), 2.0))  # a whole graph: refused as a graph
    assert refused.value.field == "graph"

    def read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a value was read before the dtype's refusal")

    monkeypatch.setattr(torch.Tensor, "__ne__", read)
    with pytest.raises(InvalidData, match="must hold 0/1"):
        ARR.randomize(torch.tensor([1 + 0j]))

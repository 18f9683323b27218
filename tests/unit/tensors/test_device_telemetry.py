"""The telemetry mechanisms on the device path, run on the CPU (torch tensors and
array-api-strict arrays treated as an accelerator's): dbitflip, one_bit_mean, cms, hcms,
rappor (with the keyed hash of integer items, the host's to the bit), pem and treehist. For
each: the keystream word map and the CPU's reports from the same words, the exact law in both
randomness modes, either path's estimator reading the other's reports, and the refusals (typed,
naming the field, before any word is drawn)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import (  # noqa: E402
    count_mean_sketch,
    dbitflip,
    one_bit_mean,
    pem,
    rappor,
    treehist,
)
from dpkit_ldp.items import as_items  # noqa: E402
from dpkit_ldp.keyed_hash import ItemWords, KeyedHashFamily  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import array_library, device_random  # noqa: E402
from dpkit.tensors import dbitflip as device_dbitflip  # noqa: E402
from dpkit.tensors import one_bit_mean as device_one_bit  # noqa: E402
from dpkit.tensors import prefix_tree as device_prefix_tree  # noqa: E402
from dpkit.tensors import prefixes as device_prefixes  # noqa: E402
from dpkit.tensors import sketch as device_sketch  # noqa: E402
from dpkit.tensors.siphash import keyed_buckets, siphash_integers  # noqa: E402

KEY = bytes(range(32))
DBF = dbitflip.DBitFlip(epsilon=1.0, k=5, d=2)
OBM = one_bit_mean.OneBitMean(epsilon=1.0, lower=-1.0, upper=3.0, intervals=3)
#: χ² and z tests below: each refuses a correct law with probability at most 1e-6.
ALPHA = 1e-6


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    functions, recorded."""
    return device_reference.on_device(
        monkeypatch,
        [
            (dbitflip, "dbitflip_reports"),
            (dbitflip, "dbitflip_counts"),
            (one_bit_mean, "one_bit_reports"),
            (one_bit_mean, "one_bit_counts"),
            (count_mean_sketch, "sketch_reports"),
            (count_mean_sketch, "sketch_counts"),
            (count_mean_sketch, "hadamard_sketch_reports"),
            (count_mean_sketch, "hadamard_sketch_counts"),
            (rappor, "rappor_reports"),
            (rappor, "sketch_counts"),
            (pem, "prefix_reports"),
            (treehist, "tree_reports"),
        ],
    )


def _host(array: Any) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        return array.view(torch.int64).numpy() if array.dtype == torch.uint64 else array.numpy()
    return np.from_dlpack(array)


def _join(w: np.ndarray) -> np.ndarray:
    """64-bit words from consecutive (high, low) 32-bit words."""
    w = w.astype(np.uint64)
    return (w[0::2] << np.uint64(32)) | w[1::2]


# -- dbitflip ------------------------------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_dbitflip_secure_reports_follow_the_stated_word_map(
    spell: str, device_arrays: list[str]
) -> None:
    # 32 values (two whole blocks per bucket draw): bucket 0 of report i is w[i] mod 5 (block
    # 0-1), bucket 1 is w[32 + i] mod 4 raised past bucket 0 (blocks 2-3), and bit p is the
    # 64-bit word (w[64 + 2(2i + p)], w[64 + 2(2i + p) + 1]) against T; the CPU's bit law fed
    # those 64-bit words gives the same bits.
    x = np.arange(32) % 5
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = DBF.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["dbitflip_reports"]
    assert type(reports) is type(values) and tuple(reports.shape) == (32, 2, 2)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 12).reshape(-1)
    w = w.astype(np.int64)
    assert np.all(w[:64] < (2**32 // 5) * 5)  # no rejected word in these draws
    first = w[:32] % 5
    second = w[32:64] % 4
    second += second >= first
    buckets = np.stack([first, second], axis=1)
    flip_words = _join(w[64:192]).reshape(32, 2)
    truth = buckets == x[:, None]
    bits = truth != (flip_words < np.uint64(DBF._threshold))
    got = _host(reports)
    assert np.array_equal(got[..., 0], buckets) and np.array_equal(got[..., 1], bits)
    assert 0 < np.count_nonzero(bits != truth) < bits.size
    cpu = DBF._bits(device_reference.replaying(flip_words.reshape(-1)), truth)
    assert np.array_equal(cpu, bits.astype(np.uint64))


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_dbitflip_reports_follow_the_exact_law_in_both_modes(
    rng: str, device_arrays: list[str]
) -> None:
    # k = 3, d = 2: 24 reports; 30 000 at each of x = 0, 2 against exp(log_probability) (the
    # CPU's realised φ = T/2⁶⁴), a χ² test at false-positive rate ALPHA per value.
    mech = dbitflip.DBitFlip(epsilon=1.0, k=3, d=2)
    space = mech.output_space()
    generator = None if rng == "secure" else torch.Generator().manual_seed(3)
    for value in (0, 2):
        x = torch.full((30_000,), value, dtype=torch.int64)
        reports = _host(mech.randomize(x, rng=generator)).astype(np.uint64)
        matches = np.all(reports[:, None] == space[None], axis=(-2, -1))
        assert np.all(matches.sum(axis=1) == 1)  # every report is one of the law's
        observed = np.bincount(np.argmax(matches, axis=1), minlength=len(space))
        expected = x.shape[0] * np.exp(mech.log_probability(space, np.full(len(space), value)))
        assert math.isclose(expected.sum(), x.shape[0])
        statistic = float(((observed - expected) ** 2 / expected).sum())
        assert statistic < stats.chi2.isf(ALPHA, len(space) - 1)
    assert set(device_arrays) == {"dbitflip_reports"}


@pytest.mark.usefixtures("device_arrays")
def test_dbitflip_memoized_copies_are_one_draw() -> None:
    mech = dbitflip.DBitFlip(epsilon=1.0, k=5, d=2, reports=3)
    reports = _host(mech.randomize(torch.arange(5).reshape(1, 5)))
    assert reports.shape == (1, 5, 3, 2, 2)
    assert np.array_equal(reports, np.broadcast_to(reports[:, :, :1], reports.shape))


def test_dbitflip_either_estimator_reads_either_path(device_arrays: list[str]) -> None:
    estimator = dbitflip.DBitFlipEstimator(DBF)
    x = np.arange(200) % 5
    device = DBF.randomize(torch.from_numpy(x))
    host = DBF.randomize(x, rng=np.random.default_rng(5))
    for reports in (_host(device).astype(np.uint64), host):
        on_device = estimator.accumulate(torch.from_numpy(reports.astype(np.int64)))
        strict = estimator.accumulate(xs.asarray(reports))
        on_host = estimator.accumulate(reports)
        for counts in (on_device, strict):
            assert np.array_equal(counts.sampled, on_host.sampled)
            assert np.array_equal(counts.ones, on_host.ones) and counts.n == on_host.n == 200
    assert estimator.accumulate(device).n == 200  # torch.uint64, as randomize gives it
    assert device_arrays.count("dbitflip_counts") == 5


@pytest.mark.usefixtures("device_arrays")
def test_dbitflip_device_refusals_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    estimator = dbitflip.DBitFlipEstimator(DBF)
    for bad in (torch.tensor([0, 5]), torch.tensor([-1, 0]), torch.tensor([0.0, 1.0])):
        with pytest.raises(InvalidData) as found:
            DBF.randomize(bad)
        assert found.value.field == "values"
    with pytest.raises(InvalidParameter, match="rng"):
        DBF.randomize(torch.tensor([0]), rng=42)  # type: ignore[arg-type]
    for reports, message in (
        (torch.zeros((3, 1, 2), dtype=torch.int64), r"shape \(n, 2, 2\)"),
        (torch.zeros((3, 2, 2), dtype=torch.float64), "must be integers"),
        (torch.tensor([[[0, 2], [1, 0]]]), "bit other than 0/1"),
        (torch.tensor([[[5, 0], [1, 0]]]), "bucket outside 0..4"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            estimator.accumulate(reports)
        assert found.value.field == "reports"
    client = DBF.client()
    with pytest.raises(InvalidData, match="memo lives on the host") as found:
        client.report(torch.tensor(3))
    assert found.value.field == "value" and not client.memo
    # Nothing is drawn before the values are checked; without 64-bit integers (JAX without
    # x64) the refusal comes from the library alone, whatever the values.
    monkeypatch.setattr(
        device_dbitflip, "device_words", lambda *a, **k: device_reference.Drawless()
    )
    with pytest.raises(InvalidData, match=r"outside 0\.\.4"):
        DBF.randomize(torch.tensor([7]))
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="64-bit integers") as found:
        DBF.randomize(torch.tensor([7]))
    assert found.value.field == "values"


class _Sequence:
    """Secure device words chosen by the test: the given arrays, one per ``take``, in order."""

    secure = True

    def __init__(self, *takes: np.ndarray) -> None:
        self._takes = list(takes)
        self.library = array_library(torch.zeros(1), owner="test")

    def take(self, count: int) -> Any:
        words = self._takes.pop(0)
        assert count == words.size
        return torch.from_numpy(words.astype(np.int64))


def test_dbitflip_flip_words_tied_on_the_high_half_are_decided_by_the_low(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Flip words T − 1 and T (flip, then not): their high halves equal T's, so a comparison
    # on the 32-bit grid would decide both alike. d = 1, k = 5, buckets 0 and 1 for value 0.
    mech = dbitflip.DBitFlip(epsilon=1.0, k=5, d=1)
    threshold = mech._threshold
    flip_words = np.array([threshold - 1, threshold], dtype=np.uint64)
    assert len(set((flip_words >> np.uint64(32)).tolist())) == 1
    halves = np.stack([flip_words >> np.uint64(32), flip_words & np.uint64(2**32 - 1)], axis=1)
    source = _Sequence(np.array([0, 1]), halves.reshape(-1))
    monkeypatch.setattr(device_dbitflip, "device_words", lambda *args, **kwargs: source)
    reports = _host(mech.randomize(torch.tensor([0, 0])))
    assert np.array_equal(reports[:, 0, 0], [0, 1])
    assert np.array_equal(reports[:, 0, 1], [0, 0])  # truth 1 flipped; truth 0 kept
    cpu = mech._bits(device_reference.replaying(flip_words), np.array([[True], [False]]))
    assert np.array_equal(cpu.reshape(-1), reports[:, 0, 1])
    assert device_arrays == ["dbitflip_reports"]


# -- one_bit_mean --------------------------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_one_bit_secure_bits_are_the_cpu_law_on_the_keystream_words_in_order(
    spell: str, device_arrays: list[str]
) -> None:
    # Value i: α from the 64-bit word (w[2i], w[2i + 1]) (its top 53 bits), t = min(3,
    # ⌊u + α⌋); its bit is (w[2n + 2i], w[2n + 2i + 1]) < T_0 + t·D. The CPU path fed the same
    # 64-bit words gives the same bits.
    x = np.linspace(-1.0, 3.0, 256)
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    bits = OBM.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["one_bit_reports"]
    assert type(bits) is type(values) and tuple(bits.shape) == (256,)
    assert bits.dtype == (torch.uint8 if spell == "torch" else xs.uint8)
    words = _join(device_reference.stream(device_reference.call_key(KEY), 64).reshape(-1))
    offsets = (words[:256] >> np.uint64(11)).astype(np.float64) * 2.0**-53
    t = np.clip(np.floor((x + 1.0) / 4.0 * 3.0 + offsets), 0, 3).astype(np.uint64)
    low, step = OBM._thresholds
    expected = (words[256:] < np.uint64(low) + t * np.uint64(step)).astype(np.uint8)
    assert np.array_equal(_host(bits), expected)
    assert 0 < np.count_nonzero(expected) < expected.size and len(set(t.tolist())) == 4
    assert np.array_equal(OBM.randomize(x, rng=device_reference.replaying(words)), expected)


class _Words:
    """Secure device words chosen by the test, for one call of ``count`` words."""

    secure = True

    def __init__(self, words: np.ndarray) -> None:
        self._words = words

    def take(self, count: int) -> Any:
        assert count == self._words.size
        return torch.from_numpy(self._words.astype(np.int64))


def test_one_bit_thresholds_are_compared_exactly(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The points t = 0..3 (α = 0), each with bit words T_t − 1 and T_t (a one, then a zero):
    # the 64-bit thresholds formed on halves, the ties of the high halves decided by the low.
    x = np.repeat(np.array([-1.0, 1.0 / 3.0, 5.0 / 3.0, 3.0]), 2)
    low, step = OBM._thresholds
    thresholds = np.array([low + t * step for t in (0, 1, 2, 3)], dtype=np.uint64).repeat(2)
    bit_words = thresholds - np.tile(np.array([1, 0], dtype=np.uint64), 4)
    words64 = np.concatenate([np.zeros(8, dtype=np.uint64), bit_words])
    halves = np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1)
    monkeypatch.setattr(
        device_one_bit, "device_words", lambda *args, **kwargs: _Words(halves.reshape(-1))
    )
    bits = _host(OBM.randomize(torch.from_numpy(x)))
    assert np.array_equal(bits, np.tile(np.array([1, 0], dtype=np.uint8), 4))
    assert np.array_equal(OBM.randomize(x, rng=device_reference.replaying(words64)), bits)
    assert device_arrays == ["one_bit_reports"]


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_one_bit_rates_are_exact_in_both_modes(rng: str, device_arrays: list[str]) -> None:
    # 20 000 bits at each of four values: P[1 | x] = π_0 + z(π_s − π_0) over α (to 2⁻⁵³), a
    # z test at false-positive rate ALPHA per value.
    points = np.array([-1.0, 0.1, 1.7, 3.0])
    per_point = 20_000
    x = torch.from_numpy(np.repeat(points, per_point))
    generator = None if rng == "secure" else torch.Generator().manual_seed(11)
    bits = _host(OBM.randomize(x, rng=generator)).reshape(points.size, per_point)
    assert device_arrays == ["one_bit_reports"]
    p = np.exp(OBM.log_probability(np.ones(points.size), points))
    bound = stats.norm.isf(ALPHA / 2)
    for observed, probability in zip(bits.sum(axis=1), p, strict=True):
        spread = math.sqrt(per_point * probability * (1 - probability))
        assert abs(observed - per_point * probability) / spread < bound


def test_one_bit_either_estimator_reads_either_path(device_arrays: list[str]) -> None:
    estimator = one_bit_mean.OneBitMeanEstimator(OBM)
    x = np.linspace(-1.0, 3.0, 101)
    device = _host(OBM.randomize(torch.from_numpy(x)))
    host = OBM.randomize(x, rng=np.random.default_rng(2))
    for bits in (device, host):
        on_host = estimator.accumulate(bits)
        for spelled in (torch.from_numpy(bits), xs.asarray(bits), torch.from_numpy(bits == 1)):
            sums = estimator.accumulate(spelled)
            assert sums.n == on_host.n == 101
            assert np.allclose(sums.sums, on_host.sums) and np.allclose(
                sums.squares, on_host.squares
            )
    assert device_arrays.count("one_bit_counts") == 6


@pytest.mark.usefixtures("device_arrays")
def test_one_bit_device_refusals_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    estimator = one_bit_mean.OneBitMeanEstimator(OBM)
    for bad in ([0.0, math.nan], [0.0, -1.5], [3.01, 0.0]):
        with pytest.raises(InvalidData, match=r"NaN or values outside \[-1, 3\]") as found:
            OBM.randomize(torch.tensor(bad, dtype=torch.float64))
        assert found.value.field == "values"
    with pytest.raises(InvalidData, match="must be real numbers"):
        OBM.randomize(torch.tensor([1 + 1j]))
    with pytest.raises(InvalidParameter, match="rng"):
        OBM.randomize(torch.tensor([0.0]), rng=42)  # type: ignore[arg-type]
    for reports, message in (
        (torch.tensor([0, 2], dtype=torch.uint8), "no other values"),
        (torch.zeros((2, 2), dtype=torch.uint8), "1-D array"),
        (torch.tensor([1 + 1j]), "must be bits"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            estimator.accumulate(reports)
        assert found.value.field == "reports"
    client = OBM.client()
    with pytest.raises(InvalidData, match="memo lives on the host") as found:
        client.report(torch.tensor(0.5, dtype=torch.float64))
    assert found.value.field == "value" and not client.memo
    monkeypatch.setattr(device_one_bit, "device_words", lambda *a, **k: device_reference.Drawless())
    with pytest.raises(InvalidData, match="NaN or values outside"):
        OBM.randomize(torch.tensor([math.nan]))
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="64-bit integers"):
        OBM.randomize(torch.tensor([math.nan]))


# -- the keyed hash of integer items and cms -----------------------------------------------

CMS = count_mean_sketch.CountMeanSketch(epsilon=2.0, width=70, hashes=3, key="5a" * 16)
HCMS = count_mean_sketch.HadamardCountMeanSketch(epsilon=2.0, width=70, hashes=3, key="5a" * 16)
#: Integer items of every text length 1..20, both signs, and the int64 extremes.
ITEMS = np.array(
    [0, 7, -7, 10, -99, 12345678, -1234567, 123456789012345, 1234567890123456, -123456789012345]
    + [10**e + 3 for e in range(15, 19)]
    + [-(10**18), 2**63 - 1, -(2**63), -1],
    dtype=np.int64,
)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_integer_items_hash_on_the_device_as_on_the_host(spell: str) -> None:
    family = KeyedHashFamily("5a" * 16)
    index = np.arange(ITEMS.size, dtype=np.int64) * 977 % 65536
    host = family.digest(ItemWords.from_items(as_items(ITEMS, owner="test")), index)
    text = family.digest(ItemWords.from_items(as_items(ITEMS.astype(str), owner="test")), index)
    assert np.array_equal(host, text)  # an integer is the item of its decimal text
    spelled = torch.from_numpy if spell == "torch" else xs.asarray
    library = array_library(spelled(ITEMS), owner="test")
    assert library is not None
    high, low = siphash_integers(library, family.key_bytes, spelled(index), spelled(ITEMS))
    device = (_host(high).astype(np.uint64) << np.uint64(32)) | _host(low).astype(np.uint64)
    assert np.array_equal(device, host)
    buckets = keyed_buckets(library, family.key_bytes, spelled(index), spelled(ITEMS), 70)
    assert np.array_equal(
        _host(buckets),
        family.bucket(
            ItemWords.from_items(as_items(ITEMS, owner="test")), index.astype(np.uint64), 70
        ),
    )


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_cms_secure_reports_follow_the_stated_word_map(
    spell: str, device_arrays: list[str]
) -> None:
    # 16 items: row j of report i is w[i] mod 3 (block 0), bit u is 1{u = h_j(x)} flipped when
    # w[16 + 70i + u] (blocks 1..70) is below a·2³²⁻ᵇ; packed little-endian in one uint64
    # word (bits 64..69 in a second).
    x = np.resize(ITEMS, 16)
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = CMS.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["sketch_reports"]
    assert tuple(reports.shape) == (16, 3)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 71).reshape(-1).astype(np.int64)
    assert np.all(w[:16] < (2**32 // 3) * 3)  # no rejected word
    j = w[:16] % 3
    h = CMS.buckets(x)[np.arange(16), j]
    numerator, bits = CMS._flip_grid
    flips = w[16 : 16 + 16 * 70].reshape(16, 70) < numerator << (32 - bits)
    set_bits = (np.arange(70)[None, :] == h[:, None]) != flips
    padded = np.concatenate([set_bits, np.zeros((16, 58), dtype=bool)], axis=1)
    packed = np.packbits(padded, axis=1, bitorder="little").view("<u8")
    got = _host(reports).astype(np.uint64)
    assert np.array_equal(got[:, 0], j) and np.array_equal(got[:, 1:], packed)
    assert 0 < np.count_nonzero(flips) < flips.size


SKETCHES = [
    pytest.param(count_mean_sketch.CountMeanSketch, "sketch_reports", id="cms"),
    pytest.param(count_mean_sketch.HadamardCountMeanSketch, "hadamard_sketch_reports", id="hcms"),
]


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize(("sketch", "primitive"), SKETCHES)
def test_sketch_reports_follow_the_exact_law_in_both_modes(
    sketch: Any, primitive: str, rng: str, device_arrays: list[str]
) -> None:
    # k = 2, m = 3 (hcms: K = 4): 16 reports; 20 000 at each of two items against
    # exp(log_probability) (the realised φ), a χ² test at false-positive rate ALPHA per item.
    mech = sketch(epsilon=2.0, width=3, hashes=2, key="5a" * 16)
    space = mech.output_space()
    generator = None if rng == "secure" else torch.Generator().manual_seed(5)
    for item in (12, -40):
        x = torch.full((20_000,), item, dtype=torch.int64)
        reports = _host(mech.randomize(x, rng=generator)).astype(np.uint64)
        matches = np.all(reports[:, None] == space[None], axis=-1)
        assert np.all(matches.sum(axis=1) == 1)
        observed = np.bincount(np.argmax(matches, axis=1), minlength=len(space))
        expected = x.shape[0] * np.exp(mech.log_probability(space, np.full(len(space), item)))
        assert math.isclose(expected.sum(), x.shape[0])
        statistic = float(((observed - expected) ** 2 / expected).sum())
        assert statistic < stats.chi2.isf(ALPHA, len(space) - 1)
    assert set(device_arrays) == {primitive}


@pytest.mark.parametrize(
    ("mech", "counter"),
    [(CMS, "sketch_counts"), (HCMS, "hadamard_sketch_counts")],
    ids=["cms", "hcms"],
)
def test_sketch_either_estimator_reads_either_path(
    mech: Any, counter: str, device_arrays: list[str]
) -> None:
    estimator = count_mean_sketch.SketchEstimator(mech)
    x = np.resize(ITEMS, 300)
    device = mech.randomize(torch.from_numpy(x))
    host = mech.randomize(x.astype(str), rng=np.random.default_rng(4))  # the same items as text
    for reports in (_host(device).astype(np.uint64), host):
        on_host = estimator.accumulate(reports)
        for spelled in (torch.from_numpy(reports.astype(np.int64)), xs.asarray(reports)):
            counts = estimator.accumulate(spelled)
            assert np.array_equal(counts.cells, on_host.cells)
            assert np.array_equal(counts.rows, on_host.rows) and counts.n == on_host.n == 300
    assert estimator.accumulate(device).n == 300  # torch.uint64, as randomize gives it
    assert device_arrays.count(counter) == 5


@pytest.mark.usefixtures("device_arrays")
def test_cms_device_refusals_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in (torch.tensor([1.0]), torch.tensor([True]), torch.tensor([1], dtype=torch.uint64)):
        with pytest.raises(InvalidData, match="integer items") as found:
            CMS.randomize(bad)
        assert found.value.field == "values"
    with pytest.raises(InvalidParameter, match="rng"):
        CMS.randomize(torch.tensor([0]), rng=42)  # type: ignore[arg-type]
    estimator = count_mean_sketch.SketchEstimator(CMS)
    for reports, message in (
        (torch.zeros((2, 2), dtype=torch.int64), r"shape \(\.\.\., 3\)"),
        (torch.zeros((2, 3), dtype=torch.float64), "64-bit integers"),
        (torch.tensor([[3, 0, 0]]), "hash function outside 0..2"),
        (torch.tensor([[0, 0, 1 << 6]]), "beyond bit 69"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            estimator.accumulate(reports)
        assert found.value.field == "reports"
    hcms = count_mean_sketch.HadamardCountMeanSketch(epsilon=2.0, width=4, hashes=2)
    with pytest.raises(InvalidData, match="integer items") as found:
        hcms.randomize(torch.tensor([1.0]))
    assert found.value.field == "values"
    for reports, message in (
        (torch.zeros((2, 2), dtype=torch.int64), r"shape \(\.\.\., 3\)"),
        (torch.tensor([[2, 0, 0]]), "j outside 0..1"),
        (torch.tensor([[0, 4, 0]]), "l outside 0..3"),
        (torch.tensor([[0, 0, 2]]), "y outside 0..1"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            count_mean_sketch.SketchEstimator(hcms).accumulate(reports)
        assert found.value.field == "reports"
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    with pytest.raises(InvalidData, match="64-bit integers") as found:
        CMS.randomize(torch.tensor([1.5]))
    assert found.value.field == "values"


def test_cms_flips_exactly_below_the_grid_threshold(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # φ = a/2ᵇ exactly: the words a·2³²⁻ᵇ − 1 flip and a·2³²⁻ᵇ does not (rows 0 and 1).
    mech = count_mean_sketch.CountMeanSketch(epsilon=2.0, width=3, hashes=2, key="5a" * 16)
    numerator, bits = mech._flip_grid
    threshold = numerator << (32 - bits)
    flip_words = np.array([threshold - 1, threshold, threshold, threshold, threshold - 1, 0])
    source = _Sequence(np.array([0, 1]), flip_words)
    monkeypatch.setattr(device_sketch, "device_words", lambda *args, **kwargs: source)
    x = np.array([7, 7])
    reports = _host(mech.randomize(torch.from_numpy(x))).astype(np.uint64)
    h = mech.buckets(x)[np.arange(2), [0, 1]]
    flips = flip_words.reshape(2, 3) < threshold
    expected = (np.arange(3)[None, :] == h[:, None]) != flips
    weights = np.array([1, 2, 4], dtype=np.uint64)
    assert np.array_equal(reports[:, 0], [0, 1])
    assert np.array_equal(reports[:, 1], (expected * weights).sum(axis=1))
    assert device_arrays == ["sketch_reports"]


# -- hcms ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_hcms_secure_reports_follow_the_stated_word_map(
    spell: str, device_arrays: list[str]
) -> None:
    # 16 items: j = w[i] mod 3 (block 0), l = w[16 + i] mod 128 (block 1), the flip word
    # (w[32 + 2i], w[32 + 2i + 1]) < T (blocks 2-3); y = 1 when popcount(h_j(x) & l) is even,
    # flipped.
    x = np.resize(ITEMS, 16)
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = HCMS.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["hadamard_sketch_reports"]
    assert tuple(reports.shape) == (16, 3)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 4).reshape(-1).astype(np.int64)
    assert np.all(w[:16] < (2**32 // 3) * 3)
    j, column = w[:16] % 3, w[16:32] % HCMS.columns
    flips = _join(w[32:64]) < np.uint64(HCMS._threshold)
    h = HCMS.buckets(x)[np.arange(16), j]
    plus = np.array([bin(int(v)).count("1") % 2 == 0 for v in h & column])
    got = _host(reports)
    assert np.array_equal(got[:, 0], j) and np.array_equal(got[:, 1], column)
    assert np.array_equal(got[:, 2], plus != flips)
    assert 0 < np.count_nonzero(flips) < 16 and 0 < np.count_nonzero(plus) < 16


def test_hcms_flip_words_tied_on_the_high_half_are_decided_by_the_low(
    device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    threshold = HCMS._threshold
    flip_words = np.array([threshold - 1, threshold], dtype=np.uint64)
    halves = np.stack([flip_words >> np.uint64(32), flip_words & np.uint64(2**32 - 1)], axis=1)
    source = _Sequence(np.array([0, 0]), np.array([5, 5]), halves.reshape(-1))
    monkeypatch.setattr(device_sketch, "device_words", lambda *args, **kwargs: source)
    x = np.array([7, 7])
    reports = _host(HCMS.randomize(torch.from_numpy(x)))
    h = int(HCMS.buckets(x[:1])[0, 0])
    plus = bin(h & 5).count("1") % 2 == 0
    assert np.array_equal(reports[:, 2], [int(not plus), int(plus)])  # flipped, then kept
    assert device_arrays == ["hadamard_sketch_reports"]


# -- rappor --------------------------------------------------------------------------------

RAPPOR = rappor.Rappor(bits=70, hashes=2, cohorts=3, key="5a" * 16)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_rappor_secure_reports_follow_the_stated_word_map(
    spell: str, device_arrays: list[str]
) -> None:
    # 16 items: cohort w[i] mod 3 (block 0); bit u of item i: replaced when w[16 + 70i + u] < F
    # (blocks 1..70), the coin w[16 + 1120 + 70i + u] < 2³¹ (blocks 71..140), reported as
    # w[16 + 2240 + 70i + u] < Q (or P) (blocks 141..210).
    x = np.resize(ITEMS, 16)
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = RAPPOR.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["rappor_reports"]
    assert tuple(reports.shape) == (16, 3)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 211).reshape(-1)
    w = w.astype(np.int64)
    assert np.all(w[:16] < (2**32 // 3) * 3)
    cohort = w[:16] % 3
    bloom = rappor._unpack(RAPPOR.bloom(x, cohort), 70).astype(bool)
    f, p, q = RAPPOR._grid
    replace = w[16 : 16 + 1120].reshape(16, 70) < f
    coin = w[16 + 1120 : 16 + 2240].reshape(16, 70) < 2**31
    permanent = np.where(replace, coin, bloom)
    drawn = w[16 + 2240 : 16 + 3360].reshape(16, 70)
    sent = np.where(permanent, drawn < q, drawn < p)
    padded = np.concatenate([sent, np.zeros((16, 58), dtype=bool)], axis=1)
    packed = np.packbits(padded, axis=1, bitorder="little").view("<u8")
    got = _host(reports).astype(np.uint64)
    assert np.array_equal(got[:, 0], cohort) and np.array_equal(got[:, 1:], packed)
    assert 0 < np.count_nonzero(replace) < replace.size and np.any(sent != permanent)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_rappor_reports_follow_the_exact_law_in_both_modes(
    rng: str, device_arrays: list[str]
) -> None:
    # k = 2 bits, h = 1, m = 2 cohorts, T = 2 reports of one PRR: 32 outcomes; 20 000 at each
    # of two items against exp(log_probability), a χ² test at false-positive rate ALPHA.
    mech = rappor.Rappor(bits=2, hashes=1, cohorts=2, reports=2, key="5a" * 16)
    space = mech.output_space()
    generator = None if rng == "secure" else torch.Generator().manual_seed(5)
    for item in (12, -40):
        x = torch.full((20_000,), item, dtype=torch.int64)
        reports = _host(mech.randomize(x, rng=generator)).astype(np.uint64)
        matches = np.all(reports[:, None] == space[None], axis=(-2, -1))
        assert np.all(matches.sum(axis=1) == 1)
        observed = np.bincount(np.argmax(matches, axis=1), minlength=len(space))
        expected = x.shape[0] * np.exp(mech.log_probability(space, np.full(len(space), item)))
        assert math.isclose(expected.sum(), x.shape[0])
        keep = expected > 0
        statistic = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
        assert np.all(observed[~keep] == 0)
        assert statistic < stats.chi2.isf(ALPHA, int(keep.sum()) - 1)
    assert set(device_arrays) == {"rappor_reports"}


def test_rappor_either_estimator_reads_either_path(device_arrays: list[str]) -> None:
    estimator = rappor.RapporEstimator(RAPPOR)
    x = np.resize(ITEMS, 300)
    device = RAPPOR.randomize(torch.from_numpy(x))
    host = RAPPOR.randomize(x.astype(str), rng=np.random.default_rng(4))
    for reports in (_host(device).astype(np.uint64), host):
        on_host = estimator.accumulate(reports)
        for spelled in (torch.from_numpy(reports.astype(np.int64)), xs.asarray(reports)):
            counts = estimator.accumulate(spelled)
            assert np.array_equal(counts.ones, on_host.ones)
            assert np.array_equal(counts.cohorts, on_host.cohorts)
            assert counts.n == on_host.n == 300
    assert estimator.accumulate(device).n == 300
    assert device_arrays.count("sketch_counts") == 5


@pytest.mark.usefixtures("device_arrays")
def test_rappor_device_refusals_name_the_field() -> None:
    with pytest.raises(InvalidData, match="integer items") as found:
        RAPPOR.randomize(torch.tensor([1.0]))
    assert found.value.field == "values"
    estimator = rappor.RapporEstimator(RAPPOR)
    for reports, message in (
        (torch.zeros((2, 2, 3), dtype=torch.int64), r"shape \(n, 3\)"),
        (torch.tensor([[3, 0, 0]]), "cohort outside 0..2"),
        (torch.tensor([[0, 0, 1 << 6]]), "beyond bit 69"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            estimator.accumulate(reports)
        assert found.value.field == "reports"
    client = RAPPOR.client()
    with pytest.raises(InvalidData, match="memo lives on the host") as found:
        client.report(torch.tensor(3))
    assert found.value.field == "value" and not client.memo


# -- pem -----------------------------------------------------------------------------------

PEM = pem.PrefixExtendingMethod(epsilon=2.0, bits=40, top=2, step=3)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_pem_secure_reports_follow_the_stated_word_map(
    spell: str, device_arrays: list[str]
) -> None:
    # 16 items: round w[i] mod g (block 0), seeds w[16 + 6i .. 16 + 6i + 5] (blocks 1-6), lie
    # word (w[112 + 2i], w[112 + 2i + 1]) (blocks 7-8), other value w[144 + i] mod (g′ − 1)
    # (block 9); H is the CPU's vector multiply-shift of the round's prefix.
    x = np.random.default_rng(3).integers(0, 2**40, size=16, dtype=np.int64)
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = PEM.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["prefix_reports"]
    assert tuple(reports.shape) == (16, 5)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 10).reshape(-1).astype(np.uint64)
    g = PEM.range
    assert np.all(w[:16] < np.uint64((2**32 // PEM.groups) * PEM.groups))
    assert np.all(w[144:160] < np.uint64((2**32 // (g - 1)) * (g - 1)))
    group = (w[:16] % np.uint64(PEM.groups)).astype(np.int64)
    seeds = _join(w[16:112]).reshape(16, 3)
    lie = _join(w[112:144]) < np.uint64(PEM._threshold)
    hashed = pem.vector_multiply_shift(
        seeds[:, 0], seeds[:, 1], seeds[:, 2], PEM._prefixes(x.astype(np.uint64), group), g
    )
    other = w[144:160] % np.uint64(g - 1)
    other += other >= hashed
    expected = np.column_stack([group.astype(np.uint64), seeds, np.where(lie, other, hashed)])
    assert np.array_equal(_host(reports).astype(np.uint64), expected)
    assert 0 < np.count_nonzero(lie) < 16 and len(set(group.tolist())) > 1


def test_pem_hash_on_halves_is_the_cpus_before_the_reduction() -> None:
    # g = 2³² − 1 keeps (almost) all 32 bits of the sum's top half, so a lost carry or a wrong
    # product shows; random 64-bit seeds and values, and the largest ones.
    words = np.random.default_rng(8).integers(0, 2**63, size=(6, 200), dtype=np.int64)
    a1, a2, b, x = (w.astype(np.uint64) * np.uint64(2) + np.uint64(1) for w in words[:4])
    a1[0] = a2[0] = b[0] = x[0] = np.uint64(2**64 - 1)
    g = 2**32 - 1
    expected = pem.vector_multiply_shift(a1, a2, b, x, g)

    def halves(v: np.ndarray) -> tuple[Any, Any]:
        return (
            torch.from_numpy((v >> np.uint64(32)).astype(np.int64)),
            torch.from_numpy((v & np.uint64(2**32 - 1)).astype(np.int64)),
        )

    got = device_prefixes.vector_multiply_shift_words(
        *halves(a1), *halves(a2), *halves(b), *halves(x), g
    )
    assert np.array_equal(got.numpy().astype(np.uint64), expected)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_pem_keeps_the_hash_at_the_stated_rate_in_both_modes(
    rng: str, device_arrays: list[str]
) -> None:
    # 40 000 reports of one item: y = H(prefix) with probability 1 − T/2⁶⁴ (the other values
    # equally likely), the round uniform; z and χ² tests at false-positive rate ALPHA each.
    generator = None if rng == "secure" else torch.Generator().manual_seed(9)
    n = 40_000
    x = np.full(n, 123456789, dtype=np.int64)
    reports = _host(PEM.randomize(torch.from_numpy(x), rng=generator)).astype(np.uint64)
    group = reports[:, 0].astype(np.int64)
    hashed = pem.vector_multiply_shift(
        reports[:, 1],
        reports[:, 2],
        reports[:, 3],
        PEM._prefixes(x.astype(np.uint64), group),
        PEM.range,
    )
    kept = hashed == reports[:, 4]
    p = 1.0 - PEM._threshold / 2**64
    assert abs(kept.sum() - n * p) / math.sqrt(n * p * (1 - p)) < stats.norm.isf(ALPHA / 2)
    offset = (reports[~kept, 4] + np.uint64(PEM.range) - hashed[~kept]) % np.uint64(PEM.range)
    observed = np.bincount(offset.astype(np.int64), minlength=PEM.range)[1:]
    assert stats.chisquare(observed).pvalue > ALPHA
    per_group = np.bincount(group, minlength=PEM.groups)
    assert stats.chisquare(per_group).pvalue > ALPHA
    assert set(device_arrays) == {"prefix_reports"}


# -- treehist ------------------------------------------------------------------------------


def _tree_reports_of_words(mech: Any, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """TreeHist's reports of items ``x`` (n ≤ 16) from the stated word map: the level from
    w[0 .. n) (block 0), then blocks of 2n words from 16 on: r, the tree flip word, r′, the
    final flip word, report i taking words 2i (high) and 2i + 1 (low) of each."""
    n = x.size
    runs = [_join(w[16 + 32 * k : 16 + 32 * k + 2 * n]) for k in range(4)]
    level = (w[:n] % np.uint64(mech.levels)).astype(np.int64)
    lengths = np.asarray(mech.prefix_bits, dtype=np.uint64)[level]
    columns = [level.astype(np.uint64)]
    for (r_words, flip_words), value, width, epsilon in (
        (runs[0:2], x >> (np.uint64(mech.bits) - lengths), lengths, mech.epsilon_tree),
        (runs[2:4], x, np.full(n, mech.bits, dtype=np.uint64), mech.epsilon_final),
    ):
        r = r_words & treehist._low_bits(width)
        flip = flip_words < np.uint64(mech._threshold(epsilon))
        columns += [r, ((~treehist._odd(r & value)) != flip).astype(np.uint64)]
    return np.column_stack(columns)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize(("bits", "step"), [(40, 7), (64, 16)])
def test_treehist_secure_reports_follow_the_stated_word_map(
    spell: str, bits: int, step: int, device_arrays: list[str]
) -> None:
    # Prefixes on both sides of 32 bits (7 … 40, and 16 … 64 with the top bit set), so the
    # masks, the shift and the parity of both halves all show.
    mech = treehist.TreeHist(epsilon=1.0, bits=bits, top=3, step=step)
    x = np.random.default_rng(4).integers(0, 2**63, size=16, dtype=np.int64).astype(np.uint64)
    x = x * np.uint64(2) + np.uint64(1) if bits == 64 else x >> np.uint64(64 - bits)
    host = x if bits == 64 else x.astype(np.int64)
    values: Any = torch.from_numpy(host) if spell == "torch" else xs.asarray(host)
    reports = mech.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["tree_reports"]
    assert tuple(reports.shape) == (16, 5)
    assert reports.dtype == (torch.uint64 if spell == "torch" else xs.uint64)
    w = device_reference.stream(device_reference.call_key(KEY), 9).reshape(-1).astype(np.uint64)
    assert np.all(w[:16] < np.uint64((2**32 // mech.levels) * mech.levels))  # none rejected
    expected = _tree_reports_of_words(mech, x, w)
    assert np.array_equal(_host(reports).astype(np.uint64), expected)
    assert len(set(expected[:, 0].tolist())) > 2 and 0 < expected[:, 2].sum() < 16
    assert np.all(mech.log_probability(expected, x) > -np.inf)


TREE = treehist.TreeHist(epsilon=2.0, bits=36, top=2, step=12)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_treehist_reports_follow_the_exact_law_in_both_modes(
    rng: str, device_arrays: list[str]
) -> None:
    # 40 000 reports of one item: the level uniform on its 3 values, r uniform on its level's
    # 2^{s_t} (its top bit set half the time), and each part's y = 1{H[r, v] = +1} kept with
    # probability 1 − T/2⁶⁴; z and χ² tests at false-positive rate ALPHA each.
    generator = None if rng == "secure" else torch.Generator().manual_seed(5)
    n, item = 40_000, 0xA_BCDE_F012
    x = np.full(n, item, dtype=np.int64)
    reports = _host(TREE.randomize(torch.from_numpy(x), rng=generator)).astype(np.uint64)
    level = reports[:, 0].astype(np.int64)
    assert stats.chisquare(np.bincount(level, minlength=TREE.levels)).pvalue > ALPHA
    lengths = np.asarray(TREE.prefix_bits, dtype=np.uint64)[level]
    assert np.all(reports[:, 1] >> lengths == 0) and np.all(reports[:, 3] >> np.uint64(36) == 0)
    top = (reports[:, 1] >> (lengths - np.uint64(1))) & np.uint64(1)
    assert abs(top.sum() - n / 2) / math.sqrt(n / 4) < stats.norm.isf(ALPHA / 2)
    z = stats.norm.isf(ALPHA / 2)
    prefix = np.uint64(item) >> (np.uint64(36) - lengths)
    for r, y, value, epsilon in (
        (reports[:, 1], reports[:, 2], prefix, TREE.epsilon_tree),
        (reports[:, 3], reports[:, 4], np.uint64(item), TREE.epsilon_final),
    ):
        kept = ((~treehist._odd(r & value)).astype(np.uint64) == y).sum()
        p = 1.0 - TREE._threshold(epsilon) / 2**64
        assert abs(kept - n * p) / math.sqrt(n * p * (1 - p)) < z
    assert set(device_arrays) == {"tree_reports"}


@pytest.mark.parametrize(
    ("mech", "server"),
    [
        (treehist.TreeHist(epsilon=4.0, bits=12, top=3, step=4), treehist.TreeHistEstimator),
        (
            pem.PrefixExtendingMethod(epsilon=4.0, bits=12, top=3, step=3),
            pem.PrefixExtendingEstimator,
        ),
    ],
    ids=["treehist", "pem"],
)
def test_heavy_hitter_estimators_read_device_reports(
    mech: Any, server: type, device_arrays: list[str]
) -> None:
    # The estimator takes the device's reports (one copy to the host: the search needs them
    # all) and decodes exactly what it decodes from the same reports as a numpy array; three
    # items of 4 000 among 12 000 devices are found.
    x = np.repeat(np.array([5, 1234, 4000], dtype=np.int64), 4_000)
    reports = mech.randomize(torch.from_numpy(x), rng=torch.Generator().manual_seed(6))
    estimator = server(mech)
    from_device = estimator.estimate(estimator.accumulate(reports))
    from_host = estimator.estimate(estimator.accumulate(_host(reports).astype(np.uint64)))
    assert np.array_equal(from_device.items, from_host.items)
    assert np.array_equal(from_device.estimates, from_host.estimates)
    assert sorted(from_device.items.tolist()) == [5, 1234, 4000]
    assert device_arrays[0] in {"tree_reports", "prefix_reports"}


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize(
    ("mech", "device_module"),
    [(PEM, device_prefixes), (TREE, device_prefix_tree)],
    ids=["pem", "treehist"],
)
def test_heavy_hitter_device_refusals_name_the_field(
    mech: Any, device_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bits = mech.bits
    for bad, message in (
        (torch.tensor([1.0]), f"integer {bits}-bit items"),
        (torch.tensor([2**bits]), f"outside the {bits}-bit items"),
        (torch.tensor([-1]), f"outside the {bits}-bit items"),
    ):
        with pytest.raises(InvalidData, match=message) as found:
            mech.randomize(bad)
        assert found.value.field == "values"
    monkeypatch.setattr(device_module, "device_words", lambda *a, **k: device_reference.Drawless())
    with pytest.raises(InvalidData, match=f"outside the {bits}-bit items"):
        mech.randomize(torch.tensor([2 ** (bits + 1)]))
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="64-bit integers") as refused:
        mech.randomize(torch.tensor([1]))
    assert refused.value.field == "values"

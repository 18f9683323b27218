"""The device path, run on the CPU (a torch tensor or an array-api-strict array treated as if it
lived on an accelerator): the law of randomized response in both modes, one word per element or
per pair, and exactly uniform integers."""

from __future__ import annotations

import decimal
import math

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.plugin import lie_threshold  # noqa: E402
from dpkit.tensors import array_library  # noqa: E402
from dpkit.tensors.bits import flip_bits, flip_graph  # noqa: E402
from dpkit.tensors.categories import check_categories, kary_response  # noqa: E402
from dpkit.tensors.device_random import device_words, threshold32, uniform_below  # noqa: E402

RR = dpkit.mechanism("rr", epsilon=1.0)
KEY = bytes(range(32))
T64 = RR._flip_threshold()


def _as_device(values: object):
    library = array_library(values, owner="test")
    assert library is not None
    return attrs.evolve(library, on_host=False)


def test_the_32_bit_threshold_rounds_the_flip_probability_up() -> None:
    t = threshold32(T64)
    assert t / 2**32 >= T64 / 2**64 >= RR.flip_probability - 2**-60
    assert t / 2**32 - T64 / 2**64 < 2**-32
    assert threshold32(2**64) == 2**32 and threshold32(0) == 0


def test_secure_flips_are_the_keystream_words_in_order() -> None:
    x = torch.randint(0, 2, (1000,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    y = flip_bits(_as_device(x), x, threshold64=T64, rng=SecureRandom.from_key(KEY), owner="rr")
    words = device_reference.stream(device_reference.call_key(KEY), 63).reshape(-1)[:1000]
    assert np.array_equal(y.numpy(), x.numpy() ^ (words < threshold32(T64)))


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_flip_rate_both_modes(rng: str) -> None:
    # |z| < 5.3 under the exact law: false-positive rate 1.2e-7 per mode.
    x = torch.zeros(200_000, dtype=torch.bool)
    generator = None if rng == "secure" else torch.Generator().manual_seed(9)
    y = flip_bits(_as_device(x), x, threshold64=T64, rng=generator, owner="rr")
    p = threshold32(T64) / 2**32
    z = (int(y.sum()) - x.numel() * p) / math.sqrt(x.numel() * p * (1 - p))
    assert abs(z) < 5.3


def test_graph_portable_path_one_word_per_pair_in_row_major_order() -> None:
    n = 40
    upper = np.triu(np.random.default_rng(3).random((n, n)) < 0.3, 1)
    adjacency = (upper | upper.T).astype(np.int64)
    strict = xs.asarray(adjacency)
    out = flip_graph(
        _as_device(strict),
        strict,
        threshold64=T64,
        rng=SecureRandom.from_key(KEY),
        owner="rr",
        field="adjacency",
    )
    result = np.from_dlpack(out)
    pairs = n * (n - 1) // 2
    words = device_reference.stream(device_reference.call_key(KEY), -(-pairs // 16)).reshape(-1)
    rows, cols = np.triu_indices(n, 1)  # row-major order of the pairs i < j
    flips = np.zeros((n, n), dtype=np.int64)
    flips[rows, cols] = words[:pairs] < threshold32(T64)
    expected = np.triu(adjacency ^ flips, 1)
    assert np.array_equal(result, expected + expected.T)


def test_graph_portable_path_refuses_an_asymmetric_matrix() -> None:
    x = torch.tensor([[0, 1], [0, 0]])
    with pytest.raises(InvalidData, match="not symmetric"):
        flip_graph(_as_device(x), x, threshold64=T64, rng=None, owner="rr", field="adjacency")


@pytest.mark.parametrize("bound", [3, 7, 1000])
def test_uniform_below_is_exactly_uniform(bound: int) -> None:
    # Chi-square goodness of fit at p > 1e-6: false-positive rate 1e-6 per bound.
    x = torch.zeros(1, dtype=torch.int64)
    words = device_words(_as_device(x), SecureRandom.from_key(KEY), owner="test")
    draws = uniform_below(words, 300_000, bound).numpy()
    counts = np.bincount(draws, minlength=bound)
    assert counts.size == bound
    assert stats.chisquare(counts).pvalue > 1e-6


KRR = dpkit.mechanism("krr", epsilon=1.0, k=5)


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_krr_on_the_device_path_has_the_exact_law(rng: str) -> None:
    # Chi-square of the reports of 60 000 copies of index 2 against the exact pmf
    # (p for 2, q for the others, λ rounded up to the 32-bit grid): p-value > 1e-6 gives a
    # false-positive rate of 1e-6 per mode.
    x = torch.full((60_000,), 2, dtype=torch.int16)
    generator = None if rng == "secure" else torch.Generator().manual_seed(4)
    library = _as_device(x)
    from dpkit.tensors.categories import kary_response

    threshold = lie_threshold(1.0, 5)
    y = kary_response(library, x, k=5, lie_threshold64=threshold, rng=generator, owner="krr")
    assert isinstance(y, torch.Tensor) and y.dtype == torch.int16
    lie = threshold32(threshold) / 2**32
    expected = np.full(5, lie / 4)
    expected[2] = 1 - lie
    counts = np.bincount(y.numpy(), minlength=5)
    assert stats.chisquare(counts, expected * x.numel()).pvalue > 1e-6


def test_krr_on_the_device_path_refuses_out_of_range_indices_and_floats() -> None:
    from dpkit.tensors.categories import kary_response

    for bad in (torch.tensor([0, 5]), torch.tensor([0, -1]), torch.tensor([0.0, 1.0])):
        with pytest.raises(InvalidData, match=r"category indices|outside 0\.\.4"):
            kary_response(_as_device(bad), bad, k=5, lie_threshold64=1, rng=None, owner="krr")


NARROW_INDICES = ("uint8", "int8", "int16", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("dtype", NARROW_INDICES)
def test_krr_reports_of_narrow_indices_never_wrap(dtype: str) -> None:
    # k = 1000 > 256: a report in uint8 (int8) used to wrap to its residue mod 256, on the
    # device before the shift past the truth (so two inputs' lies moved by 4/3 in ratio, a
    # realised ε of ln 4/3 at a declared 0.01) and on the host after it; torch's uint16, uint32
    # and uint64 had no comparisons at all (a NotImplementedError). At ε = 0.01 nearly every
    # report is a uniform other index: 3000 of them take far more than 256 values.
    mechanism = dpkit.mechanism("krr", epsilon=0.01, k=1000)
    expected = torch.int64 if dtype in ("uint8", "int8") else getattr(torch, dtype)
    x = torch.full((3000,), 5, dtype=getattr(torch, dtype))
    y = kary_response(
        _as_device(x), x, k=1000, lie_threshold64=lie_threshold(0.01, 1000), rng=None, owner="krr"
    )
    assert y.dtype == expected
    reports = y.to(torch.int64).numpy()
    assert reports.min() >= 0 and reports.max() <= 999 and np.unique(reports).size > 900
    if dtype in ("uint8", "int8", "int16"):  # the host keeps the same rule
        host = mechanism.randomize(x.numpy(), rng=SecureRandom.from_key(KEY))
        assert host.dtype == np.dtype(str(expected).removeprefix("torch."))
        assert host.min() >= 0 and host.max() <= 999 and np.unique(host).size > 900


def test_device_indices_are_checked_in_a_dtype_that_compares_them() -> None:
    # Indices below k are accepted whatever the dtype (torch compared an int8 or uint8 tensor
    # with a k beyond its range after wrapping k: 5 >= 260 was true); those of k or more, and a
    # uint64 beyond 2⁶³, are refused by a typed error.
    for dtype in ("uint8", "int8", *NARROW_INDICES[2:]):
        fine = torch.tensor([0, 5, 100], dtype=getattr(torch, dtype))
        check_categories(_as_device(fine), fine, 260, owner="krr", field="values")
    for bad in (
        torch.tensor([0, 260], dtype=torch.int16),
        torch.tensor([0, 260], dtype=torch.uint16),
        torch.tensor([0, 2**32 - 1], dtype=torch.uint32),
        torch.tensor([0, -1], dtype=torch.int64).view(torch.uint64),
    ):
        with pytest.raises(InvalidData, match=r"outside 0\.\.259"):
            check_categories(_as_device(bad), bad, 260, owner="krr", field="values")


def test_category_counts_on_the_device_path_match_numpy() -> None:
    from dpkit.tensors.categories import category_counts

    values = np.random.default_rng(1).integers(0, 7, size=999)
    for spelled in (torch.from_numpy(values), xs.asarray(values)):
        counts = category_counts(_as_device(spelled), spelled, 7, owner="krr")
        assert np.array_equal(counts, np.bincount(values, minlength=7))


@pytest.mark.parametrize("name", ["sue", "oue"])
def test_unary_encoding_on_the_device_path_is_the_cpu_law_bit_for_bit(name: str) -> None:
    # Same key: the device reports are the CPU's construction on the device's words (bit j of
    # report i = word i·k + j < P_j), checked against a numpy computation of that rule.
    mechanism = dpkit.mechanism(name, epsilon=1.0, k=11)
    keep, other = mechanism._grid_probabilities()
    x = torch.tensor([[3, 0], [10, 7], [5, 5]])
    from dpkit.tensors.unary import unary_counts, unary_reports

    reports = unary_reports(
        _as_device(x), x, k=11, keep=keep, other=other, rng=SecureRandom.from_key(KEY), owner=name
    )
    assert isinstance(reports, torch.Tensor) and reports.dtype == torch.uint8
    assert tuple(reports.shape) == (3, 2, 2)
    words = device_reference.stream(device_reference.call_key(KEY), 6).reshape(-1)[: 6 * 11]
    thresholds = np.where(np.arange(11)[None, :] == x.numpy().reshape(-1, 1), keep, other)
    expected = np.packbits(words.reshape(6, 11) < thresholds, axis=-1).reshape(3, 2, 2)
    assert np.array_equal(reports.numpy(), expected)
    counts, n = unary_counts(_as_device(reports), reports, k=11, owner=name)
    bits = np.unpackbits(expected.reshape(6, 2), axis=-1)[:, :11]
    assert n == 6 and np.array_equal(counts, bits.sum(axis=0))


@pytest.mark.parametrize("rng", ["secure", "fast"])
def test_oue_on_the_device_path_has_the_exact_bit_rates(rng: str) -> None:
    # The true bit set with probability 1/2, the others with q (on the 2^-32 grid): |z| < 5.3
    # for each, a false-positive rate below 3e-7 per mode.
    from dpkit.tensors.unary import unary_counts, unary_reports

    oue = dpkit.mechanism("oue", epsilon=1.0, k=6)
    keep, other = oue._grid_probabilities()
    x = torch.full((40_000,), 4, dtype=torch.int64)
    generator = None if rng == "secure" else torch.Generator().manual_seed(8)
    reports = unary_reports(
        _as_device(x), x, k=6, keep=keep, other=other, rng=generator, owner="oue"
    )
    counts, n = unary_counts(_as_device(reports), reports, k=6, owner="oue")
    for bit, count in enumerate(counts):
        p = (keep if bit == 4 else other) / 2**32
        assert abs(count - n * p) / math.sqrt(n * p * (1 - p)) < 5.3


class _ProbeWords:
    """Device words: ``prefix`` (32-bit values), then zeros (a word no rejection refuses)."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = list(prefix)
        self.library = array_library(torch.zeros(1), owner="test")

    def take(self, count: int):
        head, self.prefix = self.prefix[:count], self.prefix[count:]
        return torch.tensor(head + [0] * (count - len(head)), dtype=torch.int64)


def _realised_device_lie(report_lies, seeds: int) -> int:
    """T with the device lying exactly when the 64-bit value of its first lie word(s), after
    ``seeds`` other words, is below T (bisection; words high then low): the realised lie
    probability is T/2⁶⁴ on either grid."""
    low, high = 0, 2**64
    while low < high:
        middle = (low + high) // 2
        words = _ProbeWords([0] * seeds + [middle >> 32, middle & 0xFFFFFFFF])
        if report_lies(words):
            low = middle + 1
        else:
            high = middle
    return low


def _within_both_ways(threshold: int, k: int, epsilon: float) -> bool:
    context = decimal.Context(prec=60)
    lie = decimal.Decimal(threshold) / decimal.Decimal(2**64)
    p, q = context.subtract(1, lie), context.divide(lie, k - 1)
    return max(context.divide(p, q), context.divide(q, p)) <= context.exp(decimal.Decimal(epsilon))


@pytest.mark.parametrize(
    ("name", "k", "epsilon"),
    [
        ("krr", 3, 1e-12),
        ("krr", 1000, 1e-8),
        ("krr", 5, 1.0),
        ("krr", 4, 1e-12),
        ("olh", 3, 1e-10),
        ("olh", 10, 1e-9),
        ("olh", 4, 1.0),
    ],
)
def test_device_lie_keeps_both_ratios_within_epsilon(
    name: str, k: int, epsilon: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """⌈λ·2³²⌉ rounds λ up, but at small ε it passed the uniform point (k − 1)/k (k not a power
    of two), where the truth becomes the least likely report: k = 3, ε = 10⁻¹² realised
    3.5·10⁻¹⁰. The device's realised lie probability, probed word by word, keeps both
    ratios of k-RR within e^ε (olh: over its g hash values)."""
    from dpkit.tensors import categories, hashing
    from dpkit.tensors.categories import kary_response
    from dpkit.tensors.hashing import hashed_reports

    threshold = lie_threshold(epsilon, k)
    x = torch.zeros(1, dtype=torch.int64)
    module = categories if name == "krr" else hashing

    def lies(words: _ProbeWords) -> bool:
        monkeypatch.setattr(module, "device_words", lambda *args, **kwargs: words)
        if name == "krr":
            report = kary_response(
                _as_device(x), x, k=k, lie_threshold64=threshold, rng=None, owner="krr"
            )
            return int(report[0]) != 0
        reports = hashed_reports(  # a = b = 0 hashes every value to 0
            _as_device(x), x, k=2, g=k, lie_threshold64=threshold, rng=None, owner="olh"
        )
        return int(reports.view(torch.int64)[0, 2]) != 0

    realised = _realised_device_lie(lies, 0 if name == "krr" else 4)
    assert _within_both_ways(realised, k, epsilon), (name, k, epsilon, realised)


@settings(max_examples=10, derandomize=True, deadline=None, database=None)
@given(k=st.integers(3, 1 << 16), log10_epsilon=st.floats(-12.0, -6.0))
def test_device_krr_small_epsilon_realised_ratio(k: int, log10_epsilon: float) -> None:
    """The class above, searched over k and small ε (deterministic examples)."""
    from dpkit.tensors import categories

    epsilon = 10.0**log10_epsilon
    threshold = lie_threshold(epsilon, k)
    x = torch.zeros(1, dtype=torch.int64)

    def lies(words: _ProbeWords) -> bool:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(categories, "device_words", lambda *args, **kwargs: words)
            report = categories.kary_response(
                _as_device(x), x, k=k, lie_threshold64=threshold, rng=None, owner="krr"
            )
        return int(report[0]) != 0

    realised = _realised_device_lie(lies, 0)
    assert _within_both_ways(realised, k, epsilon), (k, epsilon, realised)

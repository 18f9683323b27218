"""The sampled-attribute vector mechanisms (pm_multi, hm_multi) on the device path, run on the
CPU (torch tensors and array-api-strict arrays treated as an accelerator's): the shared draw of
k of d attributes against the CPU's ``choose_attributes`` on the same words (rejections
included), the CPU's reports from the same keystream words, the fast laws, and the CPU's
refusals made before any word is used.

χ² tests below: each refuses a correct law with probability at most ALPHA = 1e-6."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")
stats = pytest.importorskip("scipy.stats")

from dpkit_ldp import duchi, hybrid, piecewise, sampled  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import array_library, device_random, lattice  # noqa: E402
from dpkit.tensors.sampled import draw_attributes  # noqa: E402

KEY = bytes(range(32))
ALPHA = 1e-6
#: pm_multi at Wang et al.'s k (1 at ε = 4) and at k = 2; hm_multi with both branches at ε/k = 2,
#: Duchi's alone at ε/k = 0.5 (below ε* ≈ 0.61), and k = d.
MECHANISMS = [
    sampled.PiecewiseMulti(epsilon=4.0, lower=-2.0, upper=5.0, dimension=5),
    sampled.PiecewiseMulti(epsilon=4.0, lower=-2.0, upper=5.0, dimension=5, k=2),
    sampled.HybridMulti(epsilon=4.0, lower=-2.0, upper=5.0, dimension=5, k=2),
    sampled.HybridMulti(epsilon=1.0, lower=-2.0, upper=5.0, dimension=5, k=2),
    sampled.HybridMulti(epsilon=10.0, lower=-2.0, upper=5.0, dimension=5, k=5),
]
DEVICE_FUNCTIONS = {"pm_multi": "piecewise_multi_reports", "hm_multi": "hybrid_multi_reports"}


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    functions, recorded."""
    counted = [(sampled, name) for name in DEVICE_FUNCTIONS.values()]
    return device_reference.on_device(monkeypatch, counted)


def _host(reports: Any) -> np.ndarray:
    return reports.numpy() if isinstance(reports, torch.Tensor) else np.from_dlpack(reports)


def _pairs(words: np.ndarray) -> np.ndarray:
    """32-bit words (w[2k], w[2k + 1]) as 64-bit words w[2k]·2³² + w[2k + 1]."""
    w = words.astype(np.uint64)
    return (w[0::2] << np.uint64(32)) | w[1::2]


class _Given:
    """Device words chosen by the test (as 64-bit words), handed out in order, then words the
    test did not choose (the device reads ahead)."""

    secure = True

    def __init__(self, words64: np.ndarray) -> None:
        padding = np.random.default_rng(99).integers(0, 2**64, size=1 << 12, dtype=np.uint64)
        words = np.concatenate([words64, padding])
        halves = np.stack([words >> np.uint64(32), words & np.uint64(2**32 - 1)], axis=1)
        self._words = halves.reshape(-1).astype(np.int64)
        self._next = 0
        library = array_library(torch.zeros(1), owner="test")
        assert library is not None
        self.library = library

    def take(self, count: int) -> Any:
        out = self._words[self._next : self._next + count]
        assert out.size == count, "the device read further ahead than the test expected"
        self._next += count
        return torch.from_numpy(out)


def _rejecting_words(size: int, rows: int) -> np.ndarray:
    """64-bit words of which a third are 0 (below 2⁶⁴ mod m for every m ≤ 2¹² not a power of
    two: drawn again), including rows 1 and 3 of the first round and the first replacement."""
    rng = np.random.default_rng(3)
    words64 = rng.integers(0, 2**64, size=size, dtype=np.uint64)
    words64[rng.random(size) < 1 / 3] = 0
    words64[[1, 3, rows]] = 0
    return words64


@pytest.mark.parametrize(("d", "k"), [(5, 3), (7, 7), (3, 1)])
def test_the_draw_is_the_cpus_on_the_same_words_and_takes_as_many(d: int, k: int) -> None:
    # 40 rows; a third of the words are 0, so most rounds redraw (2⁶⁴ mod 5, 3, 7, 6 > 0; 4, 2
    # and 1 never reject): the device's drawn attributes, in draw order, are the CPU's
    # choose_attributes fed the same words, and it takes exactly the words the CPU takes.
    n = 40
    words64 = _rejecting_words(600, n)
    given = _Given(words64)
    library = given.library
    taken: list[int] = []

    def take(count: int) -> Any:
        taken.append(count)
        halves = given.take(2 * count).reshape(count, 2)
        return halves[:, 0], halves[:, 1]

    drawn, slot = draw_attributes(library, take, n, d, k)
    replay = device_reference.replaying(words64)
    cpu = sampled.choose_attributes(replay, n, d, k)
    assert np.array_equal(_host(drawn), cpu)
    assert sum(taken) == replay.source._next > k * n  # the rejected words were redrawn
    expected = np.full((n, d), -1)
    expected[np.arange(n)[:, None], cpu] = np.arange(k)
    assert np.array_equal(_host(slot), expected)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize(
    "mechanism", MECHANISMS, ids=lambda m: f"{m.name}-{m.epsilon:g}-k{m.sampled}"
)
def test_secure_reports_are_the_cpu_reports_from_the_keystream_words(
    mechanism: Any, spell: str, device_arrays: list[str]
) -> None:
    # The call's 32-bit keystream words paired into 64-bit words, fed to the CPU path in order:
    # the same reports, bit for bit (float64, the input's shape and type; any leading shape).
    x = np.random.default_rng(7).uniform(-2.0, 5.0, size=(3, 8, 5))
    x[0, 0] = [-2.0, 5.0, 1.5, -2.0, 5.0]  # both ends and the centre
    if spell == "torch":
        values: Any = torch.from_numpy(x.astype(np.float32))
        x = x.astype(np.float32).astype(np.float64)
    else:
        x = np.round(x)
        values = xs.asarray(x.astype(np.int64))
    reports = mechanism.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == [DEVICE_FUNCTIONS[mechanism.name]]
    assert type(reports) is type(values) and tuple(reports.shape) == (3, 8, 5)
    assert reports.dtype == (torch.float64 if spell == "torch" else xs.float64)
    stream = device_reference.stream(device_reference.call_key(KEY), 256).reshape(-1)
    cpu = mechanism.randomize(x, rng=device_reference.replaying(_pairs(stream)))
    assert np.array_equal(_host(reports), cpu)
    drawn = cpu != mechanism.centre
    assert np.all(drawn.sum(axis=-1) == mechanism.sampled) and np.unique(cpu[drawn]).size > 1


@pytest.mark.parametrize("name", ["pm_multi", "hm_multi"])
def test_redrawn_attribute_words_are_followed_as_on_the_cpu(
    name: str, device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A third of the 64-bit words are 0: the attribute draw's rounds redraw (rows 1 and 3 of
    # the first round and the first replacement, at least) and so do the lattice's uniform
    # draws; the one-dimensional release starts where the CPU's does, so every report agrees.
    cls = sampled.PiecewiseMulti if name == "pm_multi" else sampled.HybridMulti
    mechanism = cls(epsilon=4.0, lower=-2.0, upper=5.0, dimension=5, k=3)
    n = 60
    words64 = _rejecting_words(4000, n)
    monkeypatch.setattr(lattice, "device_words", lambda *a, **k: _Given(words64))
    x = np.random.default_rng(8).uniform(-2.0, 5.0, size=(n, 5))
    reports = _host(mechanism.randomize(torch.from_numpy(x)))
    assert device_arrays == [DEVICE_FUNCTIONS[name]]
    replay = device_reference.replaying(words64)
    assert np.array_equal(reports, mechanism.randomize(x, rng=replay))
    assert replay.source._next > 3 * n + 3 * 3 * n  # redraws beyond one word per draw


def _piecewise_bins(t: float, epsilon: float, edges: np.ndarray) -> np.ndarray:
    """pm's continuous law at ε (density p on its band, p·e^{−ε} elsewhere) in the bins."""
    width = piecewise.piecewise_band_width(epsilon)
    left = (1.0 + width / 2.0) * t - width / 2.0
    high = 1.0 / (1.0 + math.exp(-epsilon / 2.0)) / width
    lo, hi = edges[:-1], edges[1:]
    overlap = np.maximum(np.minimum(hi, left + width) - np.maximum(lo, left), 0.0)
    return high * overlap + high * math.exp(-epsilon) * (hi - lo - overlap)


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("name", ["pm_multi", "hm_multi"])
def test_the_laws_are_the_cpus(rng: str, name: str, device_arrays: list[str]) -> None:
    # 12 000 rows of d = 3 values, k = 2 (ε/k = 1.5): the three drawn pairs equally likely, in
    # both modes (χ²). Fast mode (torch's Philox words, not the CPU's numpy bits): attribute 0's
    # reports where drawn, times k/d, against the one-dimensional law at ε/k, in 12 equal bins
    # of [−C, C] (pm), or in its two atoms ±B and the piecewise branch (hm). Secure mode's law
    # is the CPU's by the word-for-word tests above.
    cls = sampled.PiecewiseMulti if name == "pm_multi" else sampled.HybridMulti
    mechanism = cls(epsilon=3.0, lower=0.0, upper=4.0, dimension=3, k=2)
    row = mechanism.to_data(np.array([0.4, -0.7, 1.0]))
    n = 12_000
    generator = None if rng == "secure" else torch.Generator().manual_seed(13)
    reports = _host(mechanism.randomize(torch.from_numpy(np.tile(row, (n, 1))), rng=generator))
    assert device_arrays == [DEVICE_FUNCTIONS[name]]
    drawn = reports != mechanism.centre
    assert np.all(drawn.sum(axis=1) == 2)
    left_out = np.argmin(drawn, axis=1)  # the attribute not drawn
    observed = np.bincount(left_out, minlength=3)
    assert stats.chisquare(observed).pvalue > ALPHA
    if rng == "secure":
        return
    epsilon, t = 1.5, 0.4
    y = mechanism.from_data(reports[drawn[:, 0], 0]) * 2 / 3
    c = piecewise.piecewise_bound(epsilon)
    edges = np.linspace(-c, c, 13)
    probabilities = _piecewise_bins(t, epsilon, edges)
    if name == "hm_multi":
        alpha = hybrid.hybrid_alpha(epsilon)
        bound = duchi.duchi_bound(epsilon)
        atoms = np.isclose(np.abs(y), bound, rtol=1e-12, atol=0.0)
        plus = float(duchi.plus_probability(t, epsilon))
        counts = [np.count_nonzero(atoms & (y < 0)), np.count_nonzero(atoms & (y > 0))]
        observed = np.concatenate([counts, np.histogram(y[~atoms], edges)[0]])
        probabilities = np.concatenate(
            [[(1 - alpha) * (1 - plus), (1 - alpha) * plus], alpha * probabilities]
        )
    else:
        observed = np.histogram(y, edges)[0]
    assert observed.sum() == y.size and math.isclose(probabilities.sum(), 1.0, rel_tol=1e-9)
    assert stats.chisquare(observed, y.size * probabilities).pvalue > ALPHA


class _NoWords(device_reference.Drawless):
    """Device words of ``library`` that fail if a single word is drawn."""

    def __init__(self, library: Any) -> None:
        self.library = library


@pytest.mark.parametrize("name", ["pm_multi", "hm_multi"])
def test_the_device_path_refuses_what_the_cpu_refuses_before_drawing(
    name: str, device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = sampled.PiecewiseMulti if name == "pm_multi" else sampled.HybridMulti
    mechanism = cls(epsilon=2.0, lower=-2.0, upper=5.0, dimension=3, k=2)
    real_words = lattice.device_words
    monkeypatch.setattr(lattice, "device_words", lambda library, *a, **k: _NoWords(library))
    for bad, message in (
        (torch.zeros((4, 2), dtype=torch.float64), "must have 3 columns"),
        (torch.full((), math.nan, dtype=torch.float64), "must have 3 columns"),
        (torch.tensor([[0.0, 1.0, math.nan]]), r"NaN or values outside \[-2, 5\]"),
        (xs.asarray([[0.0, 1.0, 5.5]]), r"NaN or values outside \[-2, 5\]"),
        (torch.tensor([[-math.inf, 1.0, 0.0]]), r"NaN or values outside \[-2, 5\]"),
        (torch.tensor([[1 + 1j, 0, 0]]), "must be real numbers"),
    ):
        with pytest.raises(InvalidData, match=message) as refused:
            mechanism.randomize(bad)
        assert refused.value.field == "values"
    with pytest.raises(InvalidData, match=r"NaN or out of range"):
        mechanism.randomize(np.array([[0.0, 1.0, 5.5]]))  # the CPU's own refusal
    monkeypatch.setattr(lattice, "device_words", real_words)
    for values in (torch.zeros((1, 3)), np.zeros((1, 3))):
        with pytest.raises(InvalidParameter, match="rng"):
            mechanism.randomize(values, rng=42)
    empty = mechanism.randomize(torch.zeros((0, 3)))
    assert empty.shape == (0, 3) and empty.dtype == torch.float64
    # Without 64-bit types (JAX without x64) the refusal comes from the library alone.
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    monkeypatch.setattr(lattice, "device_words", lambda *a, **k: pytest.fail("words drawn"))
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        mechanism.randomize(torch.full((2, 2), math.nan))
    assert set(device_arrays) == {DEVICE_FUNCTIONS[name]}

"""The piecewise (pm), hybrid (hm) and square wave (sw) mechanisms on the device path, run on the
CPU (torch tensors and array-api-strict arrays treated as an accelerator's): exact 64-bit
modulus and rejection on 32-bit halves, the CPU's reports from the same keystream words (ties,
redraws and masks included), the exact secure lattice law, the fast continuous laws, and the
CPU's refusals made before any word is used."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")
stats = pytest.importorskip("scipy.stats")

from dpkit_ldp import duchi, hybrid, piecewise, square_wave  # noqa: E402
from dpkit_ldp._lattice import BandLattice  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.randomness._words import uniform_below  # noqa: E402
from dpkit.tensors import array_library, device_random, lattice  # noqa: E402
from dpkit.tensors.exact import WordPairs  # noqa: E402
from dpkit.tensors.lattice import LatticeLaw, mod_64, uniform_below_64  # noqa: E402

KEY = bytes(range(32))
PM = piecewise.Piecewise(epsilon=1.0, lower=-2.0, upper=5.0)
HM = hybrid.Hybrid(epsilon=2.0, lower=-2.0, upper=5.0)
SW = square_wave.SquareWave(epsilon=1.0, lower=-2.0, upper=5.0)
#: pm, hm (both branches; Duchi's alone below ε* ≈ 0.61; the piecewise one alone where α
#: rounds to 1, with no branch word drawn) and sw.
MECHANISMS = [
    PM,
    HM,
    hybrid.Hybrid(epsilon=0.3, lower=-2.0, upper=5.0),
    hybrid.Hybrid(epsilon=100.0, lower=-2.0, upper=5.0),
    SW,
]
#: Chi-square tests reject at this p-value: each test's false-positive rate.
ALPHA = 1e-6


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch and array-api-strict host arrays take the device path (as a CUDA tensor would)."""
    device_reference.on_device(monkeypatch)


def _host(reports: Any) -> np.ndarray:
    return reports.numpy() if isinstance(reports, torch.Tensor) else np.from_dlpack(reports)


def _pairs(words: np.ndarray) -> np.ndarray:
    """32-bit words (w[2k], w[2k + 1]) as 64-bit words w[2k]·2³² + w[2k + 1]."""
    w = words.astype(np.uint64)
    return (w[0::2] << np.uint64(32)) | w[1::2]


class _Given:
    """Device words chosen by the test, handed out in order (as :class:`DeviceWords` does), then
    words the test did not give (the device reads ahead; the CPU fed the given words alone
    fails if the reports needed those)."""

    secure = True

    def __init__(self, words32: np.ndarray, spell: str = "torch") -> None:
        padding = np.random.default_rng(99).integers(0, 2**32, size=1 << 13, dtype=np.uint64)
        self._words = np.concatenate([words32, padding])
        self._next = 0
        values = torch.zeros(1) if spell == "torch" else xs.zeros(1)
        library = array_library(values, owner="test")
        assert library is not None
        self.library = library

    def take(self, count: int) -> Any:
        out = self._words[self._next : self._next + count].astype(np.int64)
        assert out.size == count, "the device read further ahead than the test expected"
        self._next += count
        if self.library.name == "torch":
            return torch.from_numpy(out)
        return xs.asarray(out)


def _words32(words64: np.ndarray) -> np.ndarray:
    return np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1).reshape(-1)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_the_64_bit_modulus_is_exact(spell: str) -> None:
    # Every modulus class: 1, powers of two (≤ 2³², above it, 2⁶²), just around 2³² and 2⁶¹,
    # and moduli needing 32, a few and one bit per reduction step; words at the extremes.
    moduli = [1, 2, 3, 2**31 - 1, 2**32 - 1, 2**32, 2**32 + 1, 3 * 2**40 + 7]
    moduli += [2**61 - 1, 2**61, 2**61 + 1, 2**62 - 3, 2**62]
    rng = np.random.default_rng(5)
    edges = np.array([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1], dtype=np.uint64)
    words = np.concatenate([edges, rng.integers(0, 2**64, size=200, dtype=np.uint64)])
    halves = [words >> np.uint64(32), words & np.uint64(2**32 - 1)]
    spelled = torch.from_numpy if spell == "torch" else xs.asarray
    high, low = (spelled(half.astype(np.int64)) for half in halves)
    library = array_library(high, owner="test")
    assert library is not None
    namespace = library.xp
    for modulus in moduli:
        expected = np.array([int(w) % modulus for w in words], dtype=np.int64)
        assert np.array_equal(_host(mod_64(namespace, high, low, modulus)), expected), modulus
    with pytest.raises(ValueError, match="modulus"):
        mod_64(namespace, high, low, 2**62 + 1)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_uniform_integers_are_the_cpu_rejection_on_the_same_words(spell: str) -> None:
    # m = 2⁶¹ + 1 rejects the words below 2⁶⁴ mod m = 2⁶¹ − 7, about one in eight: several
    # rounds of redraws for 300 elements. The masked elements take the words in index order, as
    # the CPU's uniform_below called on them alone, which must use exactly as many words.
    modulus = 2**61 + 1
    rng = np.random.default_rng(11)
    words64 = rng.integers(0, 2**64, size=400, dtype=np.uint64)
    mask_np = rng.random(300) < 0.8
    count = int(mask_np.sum())
    given = _Given(_words32(words64), spell)
    pairs = WordPairs(given)  # type: ignore[arg-type]
    xp = given.library.xp
    mask = xp.asarray(mask_np) if spell == "strict" else torch.from_numpy(mask_np)
    device = _host(uniform_below_64(pairs, mask, count, modulus))
    replay = device_reference.replaying(words64)
    cpu = uniform_below(replay.words, modulus, count).astype(np.int64)
    assert np.array_equal(device[mask_np], cpu) and np.all(device[~mask_np] == 0)
    assert pairs.used == replay.source._next > count + 20  # the rejections were redrawn


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: f"{m.name}-{m.epsilon:g}")
def test_secure_reports_are_the_cpu_reports_from_the_keystream_words(
    mechanism: Any, spell: str
) -> None:
    # The call's 32-bit keystream words paired into 64-bit words, fed to the CPU path in order:
    # the same reports, bit for bit (float64, the input's shape and type).
    x = np.random.default_rng(7).uniform(-2.0, 5.0, size=(4, 60))
    x[0, :3] = [-2.0, 5.0, 1.5]  # both ends and the centre
    if spell == "torch":
        values: Any = torch.from_numpy(x.astype(np.float32))
        x = x.astype(np.float32).astype(np.float64)
    else:
        x = np.round(x)
        values = xs.asarray(x.astype(np.int64))
    reports = mechanism.randomize(values, rng=SecureRandom.from_key(KEY))
    assert type(reports) is type(values) and tuple(reports.shape) == (4, 60)
    assert reports.dtype == (torch.float64 if spell == "torch" else xs.float64)
    stream = device_reference.stream(device_reference.call_key(KEY), 256).reshape(-1)
    cpu = mechanism.randomize(x, rng=device_reference.replaying(_pairs(stream)))
    assert np.array_equal(_host(reports), cpu)
    assert np.unique(cpu).size > 1


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize("mechanism", [PM, HM, SW], ids=lambda m: m.name)
def test_ties_and_redraws_are_decided_as_on_the_cpu(
    mechanism: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A third of the 64-bit words are 0: a zero uniform rounds every start up unless it is on
    # the lattice (then it ties with frac(c) = 0, as hm's Duchi rounding at t = −1), a zero coin lands in the band (and takes hm's piecewise branch), and a zero
    # word is below 2⁶⁴ mod m for both uniform draws (band and outside), so it is drawn again.
    law = piecewise.piecewise_lattice(mechanism.epsilon).device_law()
    if mechanism is SW:
        law = square_wave.square_wave_lattice(mechanism.epsilon).device_law()
    assert 2**64 % law.band  # (sw's cells outside the band are 2³²: no redraws there)
    assert mechanism is SW or 2**64 % (law.cells - law.band)
    rng = np.random.default_rng(3)
    words64 = rng.integers(0, 2**64, size=6000, dtype=np.uint64)
    words64[rng.random(words64.size) < 1 / 3] = 0
    monkeypatch.setattr(lattice, "device_words", lambda *a, **k: _Given(_words32(words64)))
    x = np.random.default_rng(8).uniform(-2.0, 5.0, size=500)
    x[:90] = np.repeat([-2.0, 1.5, 5.0], 30)  # t = −1, 0, 1: u = 0 ties (1 + t)/2 = 0 at t = −1,
    # and the start's frac(c) = 0 where c is an integer (sw's v·2³², pm's K − H/2 at t = 0)
    reports = _host(mechanism.randomize(torch.from_numpy(x)))
    replay = device_reference.replaying(words64)
    assert np.array_equal(reports, mechanism.randomize(x, rng=replay))
    assert replay.source._next > 3 * x.size + 100  # words beyond one per draw: redraws


def _coarse_piecewise(monkeypatch: pytest.MonkeyPatch, epsilon: float) -> Any:
    """pm's lattice at ε with cells of 1/8 (tens of cells), for both paths."""
    real = piecewise.piecewise_lattice
    coarse = real(epsilon, -3)
    monkeypatch.setattr(piecewise, "piecewise_lattice", lambda eps, exponent=None: coarse)
    return coarse


def _cell_law(law: LatticeLaw, t: float) -> np.ndarray:
    """The exact secure law of the cells at t: the start ⌊c⌋ + 1 with probability
    ⌈frac(c)·2⁵³⌉/2⁵³ (u on the 2⁻⁵³ grid), then a = π/H in the band, b = (1 − π)/(N − H)."""
    position = law.offset + t * law.stretch
    floor = math.floor(position)
    up = Fraction(math.ceil((position - floor) * 2**53), 2**53)
    pi = Fraction(law.threshold, 2**64)
    a, b = pi / law.band, (1 - pi) / (law.cells - law.band)
    probabilities = np.zeros(law.cells)
    free = law.cells - law.band
    for start, weight in ((floor, 1 - up), (floor + 1, up)):
        start = min(max(start, 0), free)
        for m in range(law.cells):
            inside = start <= m < start + law.band
            probabilities[m] += float(weight * (a if inside else b))
    return probabilities


def _chi_square_p(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    return float(stats.chi2.sf(np.sum((observed - expected) ** 2 / expected), observed.size - 1))


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize("name", ["pm", "sw"])
def test_the_secure_release_has_the_exact_lattice_law(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On coarse lattices (tens of cells), 25 000 secure device reports at one input: the cell
    # counts against the exact law (rounding on the 2⁻⁵³ grid, the 64-bit band threshold).
    # Chi-square at p < ALPHA: false-positive rate 1e-6 per case.
    if name == "pm":
        mechanism: Any = PM
        law = _coarse_piecewise(monkeypatch, PM.epsilon).device_law()
    else:
        mechanism = SW
        per_unit, band = 16, 9
        coarse = square_wave.SquareWaveLattice(
            -4, BandLattice.build(SW.epsilon, per_unit + band, band)
        )
        monkeypatch.setattr(square_wave, "square_wave_lattice", lambda eps: coarse)
        law = coarse.device_law()
    x = 0.37 * mechanism.lower + 0.63 * mechanism.upper
    t = float(mechanism.standardize(np.array([x]))[0])
    reports = _host(mechanism.randomize(torch.full((25_000,), x, dtype=torch.float64)))
    standard = mechanism.from_data(reports)
    cells = np.round(standard / 2.0**law.exponent - 0.5 + law.half).astype(np.int64) + law.shift
    assert np.allclose(((cells - law.shift) + 0.5 - law.half) * 2.0**law.exponent, standard)
    observed = np.bincount(cells, minlength=law.cells)
    assert observed.size == law.cells
    assert _chi_square_p(observed, _cell_law(law, t)) > ALPHA


def _bins(edges: np.ndarray, low: float, high: float, band: tuple[float, float]) -> np.ndarray:
    """The mass of each bin [edges[j], edges[j + 1]] under density ``high`` on ``band`` and
    ``low`` elsewhere."""
    left, right = edges[:-1], edges[1:]
    overlap = np.maximum(np.minimum(right, band[1]) - np.maximum(left, band[0]), 0.0)
    return high * overlap + low * (right - left - overlap)


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize("name", ["pm", "hm", "sw"])
def test_fast_reports_have_the_continuous_laws(name: str) -> None:
    # 25 000 fast device reports (torch's Philox words) at one input, in 12 equal bins of the
    # report range (and hm's two atoms ±B): chi-square at p < ALPHA, false-positive rate 1e-6.
    mechanism = {"pm": PM, "hm": HM, "sw": SW}[name]
    x = 0.37 * mechanism.lower + 0.63 * mechanism.upper
    t = float(mechanism.standardize(np.array([x]))[0])
    generator = torch.Generator().manual_seed(13)
    reports = _host(mechanism.randomize(torch.full((25_000,), x), rng=generator))
    y = mechanism.from_data(reports)
    if name == "sw":
        b = SW.half_width
        edges = np.linspace(-b, 1.0 + b, 13)
        p, q = SW.densities
        probabilities = _bins(edges, q, p, (t - b, t + b))
        observed = np.histogram(y, edges)[0]
    else:
        eps = mechanism.epsilon
        c, width = piecewise.piecewise_bound(eps), piecewise.piecewise_band_width(eps)
        left = (1.0 + width / 2.0) * t - width / 2.0
        high = 1.0 / (1.0 + math.exp(-eps / 2.0)) / width
        edges = np.linspace(-c, c, 13)
        probabilities = _bins(edges, high * math.exp(-eps), high, (left, left + width))
        observed = np.histogram(y, edges)[0]
        if name == "hm":
            bound = 1.0 / math.tanh(eps / 2.0)
            atoms = np.isclose(np.abs(y), bound, rtol=1e-12, atol=0.0)
            plus = float(duchi.plus_probability(t, eps))
            alpha = HM.alpha
            observed = np.concatenate(
                [
                    [np.count_nonzero(atoms & (y < 0)), np.count_nonzero(atoms & (y > 0))],
                    np.histogram(y[~atoms], edges)[0],
                ]
            )
            probabilities = np.concatenate(
                [[(1 - alpha) * (1 - plus), (1 - alpha) * plus], alpha * probabilities]
            )
    assert math.isclose(probabilities.sum(), 1.0, rel_tol=1e-9)
    assert _chi_square_p(observed, probabilities) > ALPHA


@pytest.mark.usefixtures("device_arrays")
@pytest.mark.parametrize("mechanism", [PM, HM, SW], ids=lambda m: m.name)
def test_the_device_path_refuses_what_the_cpu_refuses(
    mechanism: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_values = [[0.0, math.nan], [0.0, -2.5], [5.000001, 0.0], [-math.inf, 0.0]]
    for bad in bad_values:
        for spelled in (torch.tensor(bad, dtype=torch.float64), xs.asarray(bad)):
            with pytest.raises(InvalidData, match=r"NaN or values outside \[-2, 5\]") as found:
                mechanism.randomize(spelled)
            assert found.value.field == "values"
        with pytest.raises(InvalidData, match=r"NaN or out of range"):
            mechanism.randomize(np.array(bad))
    for refused in (torch.tensor([1 + 1j]), np.array([1 + 1j])):
        with pytest.raises(InvalidData, match="must be real numbers"):
            mechanism.randomize(refused)
    for values in (torch.tensor([0.0]), np.array([0.0])):
        with pytest.raises(InvalidParameter, match="rng"):
            mechanism.randomize(values, rng=42)
    # Without 64-bit types (JAX without x64) the refusal comes from the library alone, before
    # any word is drawn.
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)
    monkeypatch.setattr(lattice, "device_words", lambda *a, **k: pytest.fail("words drawn"))
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        mechanism.randomize(torch.tensor([math.nan]))

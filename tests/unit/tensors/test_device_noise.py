"""The central noise on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): the device's word→noise map is the host's exact sampler
(the same words give the same values, ties and tails included), secure releases are the host's
releases on the device's ChaCha20 words, the exact pmf in both modes, the caller's type, shape
and dtype, and the refusals before any word is drawn."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_central import gaussian, geometric, laplace  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.randomness._exact import laplace_nonzero  # noqa: E402
from dpkit.randomness.discrete import _accept_integer  # noqa: E402
from dpkit.randomness.geometric import discrete_laplace_digits, geometric_plan  # noqa: E402
from dpkit.tensors import array_library, device_random, exact, noise  # noqa: E402

KEY = bytes(range(32))
LAPLACE = laplace.Laplace(epsilon=1.0)
GEOMETRIC = geometric.Geometric(epsilon=0.5)
GAUSSIAN = gaussian.Gaussian(epsilon=1.0, delta=1e-6)


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path (as a CUDA tensor would);
    the list holds the DeviceWords of each call (none when a call is refused before drawing)."""
    return device_reference.recording_calls(monkeypatch, noise)


class _Given:
    """DeviceWords handing out given 32-bit words in order (as the library's word arrays),
    then zeros (the read-ahead past what the device uses)."""

    def __init__(self, library: Any, words64: np.ndarray) -> None:
        self.library = library
        halves = np.stack([words64 >> np.uint64(32), words64 & np.uint64(2**32 - 1)], axis=1)
        self._words = halves.reshape(-1)
        self._next = 0

    def take(self, count: int) -> Any:
        out = np.zeros(count, dtype=np.uint64)
        given = self._words[self._next : self._next + count]
        out[: given.size] = given
        self._next += count
        if self.library.name == "torch":
            return torch.from_numpy(out.astype(np.int64))
        return xs.asarray(out.astype(np.uint32))


class _Reader:
    """The host's word reader over given 64-bit words, counting what it reads."""

    def __init__(self, words64: np.ndarray) -> None:
        self._words = words64
        self.used = 0

    def __call__(self, n: int) -> np.ndarray:
        out = self._words[self.used : self.used + n].copy()
        self.used += n
        assert out.size == n
        return out


class _Replay:
    keyed = True

    def __init__(self, words: np.ndarray) -> None:
        self.reader = _Reader(words)

    def words(self, size: int | None = None) -> np.ndarray:
        return self.reader(1 if size is None else int(size))


def _replaying(words64: np.ndarray) -> SecureRandom:
    """A SecureRandom whose words are the given ones: the host path fed chosen words."""
    rng = SecureRandom.__new__(SecureRandom)
    object.__setattr__(rng, "_source", _Replay(words64))
    return rng


def _library(spell: str) -> Any:
    sample = torch.zeros(1) if spell == "torch" else xs.asarray([0.0])
    return attrs.evolve(array_library(sample, owner="test"), on_host=False)


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


def _both(spell: str, rate: Fraction, words64: np.ndarray, n: int) -> tuple[Any, ...]:
    """(device values, host values, words each read) for the same 64-bit words."""
    pairs = exact.WordPairs(_Given(_library(spell), words64))  # type: ignore[arg-type]
    device = _host(exact.discrete_laplace(pairs, rate, n))
    reader = _Reader(words64)
    host = discrete_laplace_digits(rate, reader, n)
    assert pairs.used <= words64.size, "the device used more words than were given"
    return device, host, pairs.used, reader.used


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize(
    "scale",
    [Fraction(3), LAPLACE.lattice_scale(40), Fraction(1, 64), Fraction(2**40, 3)],
    ids=["one-table", "lattice", "bernoulli-run", "four-digits"],
)
def test_the_device_map_is_the_hosts_sampler_on_the_same_words(spell: str, scale: Fraction) -> None:
    # Random words: one table with its tail (scale 3), the lattice Laplace's digits (t ≈ 2³⁰),
    # a rate beyond 64·ln 2 (a run of Bernoulli draws) and four digit tables.
    n = 2000
    words64 = np.random.default_rng(5).integers(0, 2**64, size=12 * n, dtype=np.uint64)
    if scale == Fraction(1, 64):
        # e^(−64) and 2q/(1 + q) are below 2⁻⁶³: their first word is 0, so a word 0 ties and
        # the next word 0 is below their next digits. Element 0: one success (word 0, tie
        # word n), the run's second round (word n + 1) fails; its sign word (n + 2) is 0, tied
        # (word 2n + 2): Z = +2.
        words64[[0, n, n + 2, 2 * n + 2]] = 0
    device, host, device_used, host_used = _both(spell, 1 / scale, words64, n)
    assert device.dtype == np.int64 and np.array_equal(device, host)
    assert device_used == host_used
    assert np.count_nonzero(host) > 0
    if scale == Fraction(1, 64):
        assert host[0] == 2 and np.count_nonzero(host) == 1


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_ties_and_tails_are_resolved_as_on_the_host(spell: str) -> None:
    # Scale 3: one table of 2^8 cells with a tail. Element 0's digit word ties with its cell's
    # threshold (decided by the next word against θ's next 64 digits); element 1's word falls in the tail cell, whose θ is
    # below 2⁻⁵⁶ (a tie at u = 0, kept by a next word 0, then continued by a fresh draw);
    # element 2's sign word ties with N's 63 bits and its next word ties again with the next 64.
    rate = Fraction(1, 3)
    (table,) = geometric_plan(rate).tables
    assert not table.truncated
    bits, last = table.bits, table.size - 1
    packed = table.packed
    thresholds, aliases = packed >> np.uint64(bits), packed & np.uint64(last)
    cell = next(i for i in range(last) if int(aliases[i]) != i)
    assert int(thresholds[last]) == 0 and table.theta_digits(last, 64 - bits, 64) > 0
    n = 4
    w = np.random.default_rng(9).integers(0, 2**64, size=40, dtype=np.uint64)
    w[0] = (thresholds[cell] << np.uint64(bits)) | np.uint64(cell)  # a tie in the cell
    w[1] = np.uint64(last)  # u = 0 in the tail cell: a tie
    # Element 0's next word lies strictly between θ's digit groups at k and k + 64: it decides
    # one way against the right group and the other way against the wrong one.
    groups = [table.theta_digits(cell, 64 - bits + 64 * j, 64) for j in (0, 1)]
    w[n] = np.uint64(sum(groups) // 2)
    w[n + 1] = 0  # below θ_last's next digits: the tail cell is kept
    w[n + 2] = np.uint64(1 << 40)  # the tail's continuation: cell 0, u small
    nonzero = laplace_nonzero(rate)
    w[[n + 3, n + 4]] = 0  # elements 0 and 1 are not zero (their magnitudes show)
    w[n + 3 + 2] = np.uint64(nonzero.floor_scaled(63))  # element 2's sign word: a tie
    w[2 * n + 3] = np.uint64(nonzero.digits(63, 64))  # ties again
    # ... and the next word lies strictly between the digit groups at 63 and at 127, so it
    # decides one way against the right group and the other against a repeated one.
    w[2 * n + 4] = np.uint64((nonzero.digits(63, 64) + nonzero.digits(127, 64)) // 2)
    device, host, device_used, host_used = _both(spell, rate, w, n)
    assert np.array_equal(device, host)
    assert device_used == host_used == 2 * n + 5  # every tie and the tail were resolved
    assert abs(int(host[1])) > last  # the tail continued past the table


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("name", ["laplace", "geometric"])
def test_secure_releases_are_the_hosts_on_the_device_keystream(
    spell: str, name: str, device_arrays: list[Any]
) -> None:
    # The device's words are ChaCha20's keystream under the call's key (drawn from the
    # keyed SecureRandom); the host's release fed the same 64-bit words is the same, bit for bit.
    rows = np.random.default_rng(3).normal(0.0, 50.0, size=(3, 40))
    if name == "laplace":
        mechanism: Any = LAPLACE
        g = LAPLACE.lattice_step()
        rows[0, :4] = [0.5 * g, 1.5 * g, 2.5 * g, -2.5 * g]  # rounded half to even
        host_values = rows.astype(np.float32).astype(np.float64)
        values: Any = torch.from_numpy(rows.astype(np.float32)) if spell == "torch" else None
    else:
        mechanism = GEOMETRIC
        host_values = np.round(rows).astype(np.int64)
        values = torch.from_numpy(host_values.astype(np.int32)) if spell == "torch" else None
    if values is None:
        values = xs.asarray(host_values)
    released = mechanism.randomize(values, rng=SecureRandom.from_key(KEY))
    (call,) = device_arrays
    assert call.real.key == device_reference.call_key(KEY)
    first = device_reference.stream(call.real.key, 1).reshape(-1)
    assert np.array_equal(call.taken[0][:16], first.astype(np.uint64))  # block 0, word by word
    assert type(released) is type(values) and tuple(released.shape) == (3, 40)
    expected_dtype = "float64" if name == "laplace" else "int64"
    assert str(released.dtype).endswith(expected_dtype)
    host = mechanism.randomize(host_values, rng=_replaying(call.words64()))
    assert np.array_equal(_host(released), host)
    assert not np.array_equal(host, host_values)


def _chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities / probabilities.sum() * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


def _laplace_cells(draws: np.ndarray, scale: Fraction, span: int) -> tuple[np.ndarray, ...]:
    """Counts of z = −span … span (the two tails pooled into the end cells) and the exact pmf."""
    q = math.exp(-1 / float(scale))
    z = np.arange(-span, span + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(z)
    tail = q ** (span + 1) / (1 + q)  # P[Z > span] = P[Z < −span]
    pmf[0] += tail
    pmf[-1] += tail
    counts = np.bincount(np.clip(draws, -span, span) + span, minlength=z.size)
    return counts, pmf


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_geometric_noise_has_the_exact_pmf_in_both_modes(
    mode: str, device_arrays: list[Any]
) -> None:
    # ε = 0.5: P[Z = z] ∝ e^(−|z|/2) on z = −12 … 12 (tails pooled). χ² p-value > 1e-6: a false
    # alarm with probability 1e-6 per mode.
    n = 30_000 if mode == "secure" else 200_000
    generator = None if mode == "secure" else torch.Generator().manual_seed(4)
    draws = _host(GEOMETRIC.randomize(torch.zeros(n, dtype=torch.int64), rng=generator))
    assert device_arrays[0].secure == (mode == "secure")
    counts, pmf = _laplace_cells(draws, GEOMETRIC.secure_scale, 12)
    assert _chi_square(counts, pmf) > 1e-6


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_fast_float_noise_has_its_law(name: str, device_arrays: list[Any]) -> None:
    # 200 000 draws in 40 cells of equal probability under Lap(b) or N(0, σ²) (the fast
    # mode's law): χ² p-value > 1e-6, a false alarm with probability 1e-6 per mechanism.
    mechanism: Any = LAPLACE if name == "laplace" else GAUSSIAN
    n = 200_000
    draws = _host(mechanism.randomize(torch.zeros(n), rng=torch.Generator().manual_seed(8)))
    assert draws.dtype == np.float64 and not device_arrays[0].secure
    law = (
        stats.laplace(scale=mechanism.scale)
        if name == "laplace"
        else stats.norm(scale=mechanism.sigma)
    )
    edges = law.ppf(np.linspace(0.0, 1.0, 41)[1:-1])
    counts = np.bincount(np.searchsorted(edges, draws), minlength=40)
    assert _chi_square(counts, np.full(40, 1 / 40)) > 1e-6


@pytest.mark.parametrize("mechanism", [LAPLACE, GAUSSIAN], ids=["laplace", "gaussian"])
def test_secure_releases_are_on_their_lattice(mechanism: Any, device_arrays: list[Any]) -> None:
    # Every output is a multiple of g whatever the input, an overflowing x/g included.
    g = mechanism.lattice_step()
    x = torch.tensor([[0.5 * g, 1.5 * g, 2.5 * g], [-0.5 * g, 1e300, -3.0]], dtype=torch.float64)
    released = mechanism.randomize(x)
    assert released.dtype == torch.float64 and tuple(released.shape) == (2, 3)
    assert np.all(np.mod(_host(released), g) == 0) and device_arrays[0].secure


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("sigma2", [400, GAUSSIAN.lattice(40).sigma2_steps])
def test_the_gaussian_acceptance_is_the_hosts_on_the_same_words(spell: str, sigma2: int) -> None:
    # CKS20's test X > c²/2^r (c = |Y| − ⌊σ⌋) for c over ±4σ, at σ² = 400 and at the lattice
    # Gaussian's σ_L² ≈ 2⁵⁴: the host's decision on the same words, words read alike (the
    # fraction digits of J = ⌊c²/2^r⌋ ties included; the rare ties where the host reads an
    # extra digit are the next test's).
    r = (2 * sigma2).bit_length() - 6
    rate = Fraction(1 << r, 2 * sigma2)
    rng = np.random.default_rng(6)
    sigma = math.isqrt(sigma2)
    c = rng.integers(-4 * sigma, 4 * sigma, size=3000)
    words64 = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    pairs = exact.WordPairs(_Given(_library(spell), words64))  # type: ignore[arg-type]
    c_device = torch.from_numpy(c) if spell == "torch" else xs.asarray(c)
    device = _host(exact._exceeds(pairs, rate, c_device, r))
    reader = _Reader(words64)
    host = _accept_integer(rate, c, r, reader)
    assert np.array_equal(device, host) and pairs.used == reader.used
    assert reader.used > c.size and 0 < np.count_nonzero(host) < c.size  # ties, both outcomes


def test_the_square_is_exact_in_int64_limbs() -> None:
    # ⌊c²/2^r⌋ (saturated at 2⁶²) and c² mod 2^r against Python integers, |c| up to 2⁶².
    c = np.random.default_rng(2).integers(-(2**62), 2**62, size=300)
    c[:4] = [0, 1, -(2**31), 2**32 + 5]
    for r in (4, 31, 32, 33, 57):
        k, remainder = exact._square(torch, torch.from_numpy(c), r)
        squares = [int(v) ** 2 for v in c]
        assert k.tolist() == [min(q >> r, 1 << 62) for q in squares]
        assert remainder.tolist() == [q % (1 << r) for q in squares]


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_the_discrete_gaussian_has_the_exact_pmf(mode: str) -> None:
    # σ² = 300: P[Z = z] ∝ e^(−z²/600) on |z| ≤ 40 (tails pooled; beyond 4.4σ the mass is
    # 1e-5). χ² p-value > 1e-6: a false alarm with probability 1e-6 per mode.
    n = 15_000 if mode == "secure" else 40_000
    library = _library("torch")
    rng = SecureRandom.from_key(KEY) if mode == "secure" else np.random.default_rng(12)
    words = noise.device_words(library, rng, owner="test")
    draws = _host(exact.discrete_gaussian(exact.WordPairs(words), 300, n))
    z = np.arange(-40, 41)
    pmf = np.exp(-(z**2) / 600.0)
    full = np.exp(-(np.arange(-400, 401) ** 2) / 600.0).sum()
    tail = (full - pmf.sum()) / 2
    pmf[0] += tail
    pmf[-1] += tail
    counts = np.bincount(np.clip(draws, -40, 40) + 40, minlength=z.size)
    assert _chi_square(counts, pmf) > 1e-6


def test_refusals_come_before_any_word_is_drawn(
    device_arrays: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    refused: list[tuple[Any, Any, type[Exception], str]] = [
        (LAPLACE, torch.tensor([0.0, math.nan]), InvalidData, "not finite"),
        (LAPLACE, xs.asarray([math.inf, 0.0]), InvalidData, "not finite"),
        (LAPLACE, torch.tensor([True]), InvalidData, "must be real numbers"),
        (LAPLACE, torch.tensor([1 + 1j]), InvalidData, "must be real numbers"),
        (GEOMETRIC, torch.tensor([0.5, 1.0]), InvalidData, "must be integers"),
        (GEOMETRIC, xs.asarray([2.0**63]), InvalidData, "must be integers"),
        (GAUSSIAN, torch.tensor([math.nan]), InvalidData, "not finite"),
    ]
    for mechanism, values, error, message in refused:
        rng = torch.Generator().manual_seed(1) if mechanism is GAUSSIAN else None
        with pytest.raises(error, match=message) as found:
            mechanism.randomize(values, rng=rng)
        assert found.value.field == "values"  # type: ignore[attr-defined]
        assert "nan" not in str(found.value)  # no value quoted
    with pytest.raises(InvalidParameter, match="rng"):
        LAPLACE.randomize(torch.zeros(2), rng=42)
    with pytest.raises(InvalidParameter, match="scale"):  # t beyond 2⁵⁵ lattice steps
        LAPLACE.randomize(torch.zeros(2), changed=2**60)
    with pytest.raises(InvalidParameter, match="sigma2"):  # σ_L² beyond 2⁶² lattice steps
        GAUSSIAN.randomize(torch.zeros(2), changed=2**62)
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        GEOMETRIC.randomize(torch.tensor([1]))
    assert device_arrays == []


def _kept(table: Any, cell: int) -> int:
    """A 64-bit word that draws ``cell`` of an alias table: its index, and u = 0 below T_cell."""
    assert int(table.packed[cell] >> np.uint64(table.bits)) > 0
    return cell


@pytest.mark.parametrize(
    ("sigma2", "c", "fraction_cells", "exceeds"),
    [
        # r = 4: c² = 25 = 1·16 + 9; J = 1 and F's first digit 9·2⁸ equal X's target digits,
        # which are then used up: X ≥ c²/2^r, so X exceeds it (almost surely), as on the host.
        (400, 5, [9 << 8], True),
        # r = 16: c² = 1002001 = 15·2¹⁶ + 0x4A11; F's first digit equals 0x4A1 and its second
        # (0) is below 0x100: X is below the target.
        (1 << 20, 1001, [0x4A1, 0], False),
    ],
)
def test_fraction_digits_equal_to_the_targets_continue(
    sigma2: int, c: int, fraction_cells: list[int], exceeds: bool
) -> None:
    from dpkit.randomness._exponential import _fraction_table

    r = (2 * sigma2).bit_length() - 6
    rate = Fraction(1 << r, 2 * sigma2)
    (table,) = geometric_plan(rate).tables
    words = [_kept(table, c * c >> r)]  # J = K: the fraction decides
    words += [_kept(_fraction_table(rate, d + 1), cell) for d, cell in enumerate(fraction_cells)]
    pairs = exact.WordPairs(_Given(_library("torch"), np.array(words, np.uint64)))  # type: ignore[arg-type]
    decided = _host(exact._exceeds(pairs, rate, torch.tensor([c]), r))
    assert decided.tolist() == [exceeds] and pairs.used == len(words)

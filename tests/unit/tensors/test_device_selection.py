"""The central selections on the device path, run on the CPU (torch tensors and array-api-strict
arrays treated as an accelerator's): report-noisy-max's secure release is the host's on the
same words (its exact relative scores checked against the host's big-integer ones), the laws of
both modes against the exact selection probabilities (the secure exponential mechanism's and
permute-and-flip's on rows with ties, −inf, huge and subnormal gaps, and with their open coins
forced through the exact settling), the exact coins' float brackets against the exact
probabilities, an open coin's continuation on crafted words, fast mode reproducible from a
seed, the caller's type and int64 indices, and the refusals before any word is drawn.

False-positive rate: each χ² test passes a correct sampler unless its p-value is below 1e-6
(a false alarm with probability 1e-6 per test, 32 tests: below 4e-5 in all); a candidate whose
expected count is below 1e-7 must never be chosen (a false alarm with probability below 1e-7
per candidate, 16 such candidates); the other checks are exact.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any

import array_api_compat
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_central import exponential, noisy_max  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.randomness.exp_table import exp_table  # noqa: E402
from dpkit.tensors import exp_coins, libraries, selection  # noqa: E402
from dpkit.tensors.exact import WordPairs  # noqa: E402

KEY = bytes(range(7, 39))
RNM = noisy_max.ReportNoisyMax(epsilon=1.0)
EXPONENTIAL = exponential.Exponential(epsilon=1.0)
PERMUTE_AND_FLIP = noisy_max.PermuteAndFlip(epsilon=1.0)
#: Three candidates whose probabilities all differ (−inf never chosen).
UTILITIES = np.array([0.0, 1.0, -np.inf, 2.5])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[device_reference.RecordingWords]:
    """torch and array-api-strict host arrays take the device path; the list holds each call's
    words (none for a call refused before drawing)."""
    return device_reference.recording_calls(monkeypatch, selection)


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


def _spelled(values: np.ndarray, spell: str) -> Any:
    return torch.from_numpy(values.copy()) if spell == "torch" else xs.asarray(values)


def _chi_square(chosen: np.ndarray, log_pmf: np.ndarray) -> float:
    p = np.exp(log_pmf)
    keep = p > 0
    counts = np.bincount(chosen, minlength=p.size)
    assert np.all(counts[~keep] == 0), "a candidate of probability 0 was chosen"
    expected = p[keep] / p[keep].sum() * chosen.size
    return float(stats.chisquare(counts[keep], expected).pvalue)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_report_noisy_max_is_the_hosts_release_on_the_same_words(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    # Ties between candidates, −inf, scores rounded half to even, scores far apart (clipped)
    # and beyond float64 on the lattice: the host's release fed the same 64-bit words.
    g = RNM.lattice.step
    rows = np.random.default_rng(1).normal(0.0, 3.0, size=(40, 5))
    rows[0] = [1.0, 1.0, -np.inf, 0.5 * g, 1.0]
    rows[1] = [1e300, -1e300, 1e300, 1.7e308, -1.7e308]
    rows[2] = [2.5 * g, 1.5 * g, -2.5 * g, 1e15, 1e15 + 1.0]
    released = RNM.randomize(_spelled(rows, spell), rng=SecureRandom.from_key(KEY))
    (call,) = calls
    assert call.secure and type(released) is type(_spelled(rows, spell))
    assert str(released.dtype).endswith("int64") and tuple(released.shape) == (40,)
    host = RNM.randomize(rows, rng=device_reference.replaying(call.words64()))
    assert np.array_equal(_host(released), host)
    assert _host(released)[1] == 3  # the largest utility wins by 2⁹⁷¹ lattice steps


def test_relative_scores_are_the_hosts_exactly() -> None:
    # Against the host's scores (Python integers where they leave int64), on a coarse lattice
    # (so that rounding matters) and a fine one (so that scores overflow float64).
    xp = array_api_compat.array_namespace(torch.zeros(1))
    rng = np.random.default_rng(2)
    rows = rng.normal(0.0, 1e3, size=(6, 8)) * 10.0 ** rng.integers(-300, 300, size=(6, 8))
    rows[0] = [0.5, 1.5, 2.5, -0.5, 3.5, -np.inf, 2.0**62, 2.0**62 + 2.0**10]
    rows[1] = [1.7e308, 1.7e308, -1.7e308, 1e-320, 0.0, -0.0, 5e-324, 1.0]
    rows[2] = [2.0**63, 2.0**63 - 2.0**11, -(2.0**62), 2.0**62, 1.0, 0.0, 3.0, 7.0]
    for exponent in (0, 1, -60, -1074, 900):
        scores, finite = noisy_max.lattice_scores(rows, exponent)
        expected = noisy_max._relative_scores(scores, finite)
        got = selection.relative_scores(xp, torch.from_numpy(rows), exponent).numpy()
        assert np.array_equal(np.where(finite, got, 0), np.where(finite, expected, 0)), exponent


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_report_noisy_max_has_the_exact_selection_probabilities(
    mode: str, calls: list[device_reference.RecordingWords]
) -> None:
    n = 10_000 if mode == "secure" else 20_000  # the secure draws cost a few words each
    batch = torch.from_numpy(np.tile(UTILITIES, (n, 1)))
    rng = None if mode == "secure" else torch.Generator().manual_seed(3)
    chosen = _host(RNM.randomize(batch, rng=rng))
    assert calls[0].secure == (mode == "secure")
    if mode == "secure":
        log_pmf = noisy_max.secure_report_noisy_max_log_pmf(UTILITIES, epsilon=RNM.epsilon)
    else:
        log_pmf = noisy_max.report_noisy_max_log_pmf(UTILITIES, RNM.scale)
    assert _chi_square(chosen, log_pmf) > 1e-6


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_fast_exponential_and_permute_and_flip_have_their_laws(
    spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    n = 20_000
    batch = _spelled(np.tile(UTILITIES, (n, 1)), spell)
    rng = np.random.default_rng(4)
    rate = EXPONENTIAL.rate
    with np.errstate(divide="ignore"):  # log 0 = −inf for the −inf utility
        log_pmf = np.log(np.exp(rate * (UTILITIES - UTILITIES.max())))
    log_pmf -= np.log(np.exp(log_pmf).sum())
    chosen = _host(EXPONENTIAL.randomize(batch, rng=rng))
    assert _chi_square(chosen, log_pmf) > 1e-6
    repeated = _host(EXPONENTIAL.randomize(_spelled(UTILITIES, spell), rng=rng, size=n))
    assert repeated.shape == (n,)
    assert _chi_square(repeated, log_pmf) > 1e-6
    flipped = _host(PERMUTE_AND_FLIP.randomize(batch, rng=rng))
    pf_log_pmf = noisy_max.permute_and_flip_log_pmf(UTILITIES, PERMUTE_AND_FLIP.rate)
    assert _chi_square(flipped, pf_log_pmf) > 1e-6
    assert len(calls) == 3 and not any(call.secure for call in calls)


#: Rows of every kind: distinct probabilities and −inf; ties; huge gaps (e^(−5·10²⁹⁹): never
#: chosen); subnormal gaps (equal probabilities up to 10⁻³²³); gaps of e^(−30) and e^(−350)
#: (expected counts below 10⁻⁷: never chosen).
ROWS = np.array(
    [
        [0.0, 1.0, -np.inf, 2.5],
        [1.0, 1.0, 0.0, 1.0],
        [0.0, 1e300, -1e300, 1e300],
        [5e-324, 0.0, 1.5e-323, 1e-323],
        [0.0, -1.5, -60.0, -700.0],
    ]
)


def _law_holds(chosen: np.ndarray, log_pmf: np.ndarray) -> float:
    """The χ² p-value of ``chosen`` against the pmf, over the candidates whose expected count
    is at least 10⁻⁷; the others must never be chosen (a false alarm with probability below
    10⁻⁷ a candidate)."""
    p = np.exp(log_pmf)
    negligible = p * chosen.size < 1e-7
    counts = np.bincount(chosen, minlength=p.size)
    assert np.all(counts[negligible] == 0), "a candidate of negligible probability was chosen"
    return _chi_square(chosen[~negligible[chosen]], np.where(negligible, -np.inf, log_pmf))


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mechanism", [EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
def test_secure_exponential_and_permute_and_flip_have_their_exact_laws(
    mechanism: Any, spell: str, calls: list[device_reference.RecordingWords]
) -> None:
    n = 1_500  # 30 000 coins: below torch's grain for splitting an operation across threads
    chosen = _host(mechanism.randomize(_spelled(np.tile(ROWS, (n, 1, 1)), spell)))
    assert chosen.shape == (n, len(ROWS)) and chosen.dtype == np.int64
    assert len(calls) == 1 and calls[0].secure
    for j, row in enumerate(ROWS):
        log_pmf = mechanism.log_probability(np.arange(row.size), row)
        assert _law_holds(chosen[:, j], log_pmf) > 1e-6, j
    if mechanism is EXPONENTIAL:  # ``size`` draws from one row
        repeated = mechanism.randomize(_spelled(ROWS[0], spell), size=n)
        assert type(repeated) is type(_spelled(ROWS[0], spell))
        assert _law_holds(_host(repeated), mechanism.log_probability(np.arange(4), ROWS[0])) > 1e-6


@pytest.mark.parametrize("mechanism", [EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
def test_undecided_coins_are_settled_with_the_exact_probability(
    mechanism: Any, calls: list[device_reference.RecordingWords], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Brackets widened to [p/2, 3p/2]: about p of every coin's draws go to the exact settling
    # on the host (instead of about 2⁻⁴²·p); the law must not move. The exponential mechanism
    # proposes uniformly here (every bucket 0: λ unknown to the weights, which stay upper
    # bounds), so that its acceptance coins e^(−γ) decide the law.
    monkeypatch.setattr(exp_coins, "MARGIN", 0.5)
    monkeypatch.setattr(selection, "rate_double", lambda rate: None)
    settled: list[int] = []
    real = exp_coins._settle

    def counted(pairs: Any, u: Any, *args: Any) -> Any:
        settled.append(int(u.shape[0]))
        return real(pairs, u, *args)

    monkeypatch.setattr(exp_coins, "_settle", counted)
    n = 3_000
    chosen = _host(mechanism.randomize(torch.from_numpy(np.tile(ROWS[0], (n, 1)))))
    assert sum(settled) > n // 10  # the exact path decided many coins
    assert _law_holds(chosen, mechanism.log_probability(np.arange(4), ROWS[0])) > 1e-6


class _ScriptedWords:
    """Device words handing out the given 64-bit words (as 32-bit halves), then zeros."""

    def __init__(self, words64: list[int]) -> None:
        self.library = libraries.array_library(torch.zeros(1), owner="test")
        halves = [half for w in words64 for half in (w >> 32, w & 0xFFFFFFFF)]
        self._words = torch.tensor(halves, dtype=torch.int64)

    def take(self, count: int) -> Any:
        out = torch.zeros(count, dtype=torch.int64)
        head = self._words[:count]
        out[: head.shape[0]] = head
        self._words = self._words[count:]
        return out


@pytest.mark.parametrize(
    ("script", "heads", "words"),
    [
        (lambda t, d, e: [t - 1], True, 1),
        (lambda t, d, e: [t + 1], False, 1),
        (lambda t, d, e: [t, d - 1], True, 2),
        (lambda t, d, e: [t, d + 1], False, 2),
        (lambda t, d, e: [t, d, e - 1], True, 3),
        (lambda t, d, e: [t, d, e + 1], False, 3),
    ],
    ids=["below", "above", "tie-below", "tie-above", "tie-tie-below", "tie-tie-above"],
)
def test_an_undecided_coin_reads_the_exact_digits_and_fresh_words(
    script: Any, heads: bool, words: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # p = e^(−1/2) (u = −1 below u* = 0 at λ = 1/2): a first word next to ⌊2⁶⁴p⌋ lies inside
    # the float bracket (about 2²⁰ words wide), so the host settles it: against p's first 64
    # binary digits t, then, on a tie, fresh words against the next 64 (d), and the next (e).
    rate = Fraction(1, 2)
    p = exp_coins.exact_probability(Fraction(1, 2), Fraction(1))
    t, d, e = p.floor_scaled(64), p.digits(64), p.digits(128)
    pairs = WordPairs(_ScriptedWords(script(t, d, e)))  # type: ignore[arg-type]
    settled: list[int] = []
    real = exp_coins._settle
    monkeypatch.setattr(exp_coins, "_settle", lambda *a: settled.append(1) or real(*a))
    xp = array_api_compat.array_namespace(torch.zeros(1))
    one = exp_coins.exp_coins(
        pairs, torch.tensor([-1.0], dtype=torch.float64), torch.zeros(1, dtype=torch.float64), rate
    )
    assert xp.all(one == heads) and settled == [1]
    assert pairs.used == words  # U's first word, then one fresh word per tie


def test_uniform_below_rejects_the_top_words_and_draws_fresh_ones() -> None:
    # B = 3: 2⁶³ mod 3 = 2, so of the low 63 bits x, 2⁶³ − 2 and 2⁶³ − 1 are rejected (x mod 3
    # would favour 0 and 1); the word's top bit is not used. B = 2⁶²: nothing is rejected.
    top = 1 << 63
    script = [top | (top - 1), top - 2, top - 2, top | 5]  # the third and fourth for B = 3
    pairs = WordPairs(_ScriptedWords(script))  # type: ignore[arg-type]
    got = selection.uniform_below_64(pairs, torch.tensor([3, 1 << 62], dtype=torch.int64))
    assert got.tolist() == [5 % 3, (top - 2) % (1 << 62)] and pairs.used == 4


def test_the_table_brackets_e_to_the_minus_k_over_64() -> None:
    # An independent evaluation: e^(−k/64) to 60 digits, one exp per entry, against the
    # table's doubles (two ulps outward of the nearest: lower < e^(−k/64) < upper strictly).
    upper, lower = exp_table()
    context = decimal.Context(prec=60)
    for k in [*range(0, 200), *range(32_768 - 100, 32_769), 777, 12_345]:
        exact = context.exp(decimal.Decimal(-k) / 64)
        assert decimal.Decimal(lower[k]) <= exact <= decimal.Decimal(upper[k])
        if k:
            assert decimal.Decimal(lower[k]) < exact < decimal.Decimal(upper[k])
            assert upper[k] <= np.nextafter(np.nextafter(float(exact), 2.0), 2.0)


@pytest.mark.parametrize("function", ["exponential_indices", "permute_and_flip_indices"])
def test_secure_mode_without_the_exact_rate_is_refused_before_reading_values(
    function: str, calls: list[device_reference.RecordingWords]
) -> None:
    values = torch.tensor([[0.0, float("nan")]])
    library = libraries.array_library(values, owner="test")
    assert library is not None
    with pytest.raises(InvalidParameter) as refused:
        getattr(selection, function)(library, values, rate=0.5, rng=None, owner="test")
    assert refused.value.parameter == "exact_rate" and not calls


@pytest.mark.parametrize("with_weights", [False, True])
def test_brackets_hold_the_exact_probability(with_weights: bool) -> None:
    # lo ≤ p ≤ hi against p's exact binary digits, for gaps of every size (subnormal, at the
    # table's steps k/64, beyond the table, beyond the float range) and several rates; and the
    # bracket is tight: hi − lo ≤ p·(2⁻⁴¹ + γ·2⁻⁴⁷) below the table's end.
    rng = np.random.default_rng(8)
    xp = array_api_compat.array_namespace(torch.zeros(1))
    gaps = np.concatenate(
        [
            10.0 ** rng.uniform(-320, 2.9, size=150),
            np.arange(1, 40) / 64.0,
            np.nextafter(np.arange(1, 40) / 64.0, 0.0),
            [0.0, 5e-324, 1e-300, 511.9, 512.0, 700.0, 1e300, np.inf],
        ]
    )
    for rate in (Fraction(1, 2), Fraction(7, 3), Fraction(3, 10**9)):
        with np.errstate(over="ignore"):  # 10³⁰⁰/λ beyond the doubles: the largest one
            scaled = np.minimum(gaps / float(rate), 1.7e308)
        u = torch.from_numpy(np.where(np.isinf(gaps), -np.inf, -scaled))
        top = torch.zeros_like(u)
        weights, bits = None, 0
        if with_weights:
            bits = 40
            weights = selection._proposal_weights(xp, u[None, :], top[None, :], rate, bits)[0]
        lo, hi = (x.numpy() for x in exp_coins.brackets(xp, u, top, rate, weights, bits))
        for i, utility in enumerate(u.numpy().tolist()):
            if utility in (-np.inf, 0.0):  # p = 0, p = 1: exactly
                assert lo[i] == hi[i] == float(utility == 0.0)
                continue
            gamma = rate * -Fraction(utility)
            scale = Fraction(1 << bits, int(weights[i])) if with_weights else Fraction(1)
            precision = 140 + math.ceil(1.45 * float(min(gamma, 800)))
            floor = exp_coins.exact_probability(gamma, scale).floor_scaled(precision)
            low, high = Fraction(floor, 1 << precision), Fraction(floor + 1, 1 << precision)
            assert Fraction(lo[i]) <= low and high <= Fraction(hi[i]), (rate, utility)
            if gamma < 500:
                assert Fraction(hi[i]) - Fraction(lo[i]) <= high * (
                    Fraction(1, 1 << 41) + gamma / (1 << 47)
                ), (rate, utility)


@pytest.mark.parametrize("mechanism", [RNM, EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
def test_fast_mode_is_reproducible_from_a_seed(
    mechanism: Any, calls: list[device_reference.RecordingWords]
) -> None:
    batch = torch.from_numpy(np.tile(np.array([0.0, 0.3, 0.1, 0.2]), (200, 1)))

    def draw(seed: int) -> np.ndarray:
        return _host(mechanism.randomize(batch, rng=torch.Generator().manual_seed(seed)))

    first, again, other = draw(11), draw(11), draw(12)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert first.dtype == np.int64 and first.shape == (200,)


@pytest.mark.parametrize("mechanism", [RNM, EXPONENTIAL, PERMUTE_AND_FLIP], ids=lambda m: m.name)
@pytest.mark.parametrize(
    ("values", "field"),
    [
        (np.array([[0.0, np.nan]]), "utilities"),
        (np.array([[0.0, np.inf]]), "utilities"),
        (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), "utilities"),
        (np.array([[True, False]]), "utilities"),
        (np.zeros((3, 0)), "utilities"),
        (np.float64(1.0), "utilities"),
    ],
    ids=["nan", "inf", "empty-row", "bool", "no-candidate", "scalar"],
)
@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_values_the_host_refuses_are_refused_before_any_word(
    mechanism: Any,
    values: np.ndarray,
    field: str,
    mode: str,
    calls: list[device_reference.RecordingWords],
) -> None:
    def rng() -> Any:
        return SecureRandom.from_key(KEY) if mode == "secure" else np.random.default_rng(0)

    with pytest.raises(InvalidData) as refused:
        mechanism.randomize(torch.from_numpy(np.asarray(values)), rng=rng())
    assert refused.value.field == field
    assert not any(call.taken for call in calls)
    with pytest.raises(InvalidData):  # the host refuses them too
        mechanism.randomize(np.asarray(values), rng=rng())


def test_secure_report_noisy_max_refuses_a_tiny_epsilon_before_reading_values(
    calls: list[device_reference.RecordingWords],
) -> None:
    with pytest.raises(InvalidParameter) as refused:
        noisy_max.ReportNoisyMax(epsilon=1e-9).randomize(torch.tensor([[0.0, float("nan")]]))
    assert refused.value.parameter == "epsilon" and not calls


def test_a_batch_size_with_a_batch_is_refused(calls: list[device_reference.RecordingWords]) -> None:
    with pytest.raises(InvalidParameter) as refused:
        EXPONENTIAL.randomize(torch.zeros(2, 3), rng=np.random.default_rng(0), size=4)
    assert refused.value.parameter == "size" and not calls

"""The fixed-work samplers: exact alias tables, exact real thresholds, geometric digits, discrete
Laplace.

Two kinds of evidence:

* **Enumeration on a reduced word size.** The samplers take their randomness as words of a
  fixed size; with 8-bit words every word (and every continuation after a tie, to a fixed
  depth) can be enumerated, so the probability of each output is computed *exactly* as a
  dyadic rational, up to the mass of the continuations not enumerated, and compared with the
  law computed independently in 50-digit decimal arithmetic.
* **Goodness of fit at the production word size** (64 bits, 2⁻⁶⁴ ties that enumeration cannot
  reach): G-tests against the exact pmf from scipy or direct summation, each with a
  false-positive rate of at most 1e-6 for a correct sampler (fixed keys: deterministic).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit.randomness import SecureRandom
from dpkit.randomness._alias import AliasTable, alias_table
from dpkit.randomness._exact import ExactReal, bernoulli_real, exp_neg, laplace_nonzero
from dpkit.randomness.geometric import (
    discrete_laplace_digits,
    geometric_digits,
    geometric_plan,
)

ALPHA = 1e-6
CONTEXT = decimal.Context(prec=50)


def keyed(label: int) -> SecureRandom:
    return SecureRandom.from_key(bytes([label, 0xA1]) * 16)


class NeedMore(Exception):
    """The scripted words ran out."""


def scripted(words: list[int]) -> Callable[[int], np.ndarray]:
    queue = list(words)

    def read(n: int) -> np.ndarray:
        if len(queue) < n:
            raise NeedMore
        taken = [queue.pop(0) for _ in range(n)]
        return np.array(taken, dtype=np.uint64)

    return read


def enumerate_law(
    draw: Callable[[Callable[[int], np.ndarray]], int], word_bits: int, depth: int
) -> tuple[dict[int, Fraction], Fraction]:
    """{outcome: exact probability of the enumerated word sequences}, unresolved mass.

    Every sequence of up to ``depth`` words is tried (depth first); a sequence the sampler
    needs more words after is extended by every possible next word, or, at full depth, its
    probability is counted as unresolved.
    """
    law: dict[int, Fraction] = {}
    unresolved = Fraction(0)
    stack: list[list[int]] = [[]]
    while stack:
        prefix = stack.pop()
        try:
            outcome = draw(scripted(prefix))
        except NeedMore:
            if len(prefix) == depth:
                unresolved += Fraction(1, 1 << (word_bits * depth))
            else:
                stack.extend([*prefix, w] for w in range(1 << word_bits))
            continue
        law[outcome] = law.get(outcome, Fraction(0)) + Fraction(1, 1 << (word_bits * len(prefix)))
    return law, unresolved


def digit_law(rate: Fraction, size: int, truncated: bool) -> list[decimal.Decimal]:
    """P[D = d] ∝ e^(−rate·d) on [0, size) (truncated), or with the last cell the tail."""
    q = CONTEXT.exp(-CONTEXT.divide(rate.numerator, rate.denominator))
    if truncated:
        norm = (1 - q**size) / (1 - q)
        return [q**d / norm for d in range(size)]
    return [(1 - q) * q**d for d in range(size - 1)] + [q ** (size - 1)]


def assert_matches(
    law: dict[int, Fraction], unresolved: Fraction, exact: list[decimal.Decimal]
) -> None:
    """Every exact probability lies in [enumerated, enumerated + unresolved] (50 digits)."""
    assert set(law) <= set(range(len(exact)))
    slack = Fraction(1, 10**40)
    for d, p in enumerate(exact):
        seen = law.get(d, Fraction(0))
        assert seen - slack <= Fraction(p) <= seen + unresolved + slack, (d, float(seen), p)


@pytest.mark.parametrize(
    ("rate", "bits", "truncated"),
    [
        (Fraction(1, 3), 3, True),
        (Fraction(2), 3, True),
        (Fraction(1, 40), 2, True),  # nearly uniform: the fast path
        (Fraction(1, 2), 3, False),
        (Fraction(3), 2, False),
        (Fraction(5, 7), 1, False),
    ],
)
def test_alias_table_law_by_enumeration_of_8_bit_words(
    rate: Fraction, bits: int, truncated: bool
) -> None:
    """All 8-bit words and every continuation after a tie, three words deep: the enumerated
    law of the selected cell brackets the exact one (the tail cell holds the mass of every
    d ≥ K − 1; its continuation is a fresh draw of the same law, by memorylessness)."""
    table = AliasTable(rate, bits, truncated, word_bits=8)
    law, unresolved = enumerate_law(lambda read: int(table.select(read(1), read)[0]), 8, 3)
    assert unresolved < Fraction(1, 10**5)
    assert_matches(law, unresolved, digit_law(rate, table.size, truncated))


def test_enumeration_catches_a_wrong_threshold() -> None:
    """The same enumeration on a table whose thresholds are off by one unit (the rounding
    direction a careless implementation might pick) fails: the test has power."""
    table = AliasTable(Fraction(1, 3), 3, True, word_bits=8)
    packed = table.packed.copy()
    table._packed = packed + np.uint64(1 << table.bits)  # T_i + 1 for every cell
    law, unresolved = enumerate_law(lambda read: int(table.sample(read, 1)[0]), 8, 3)
    with pytest.raises(AssertionError):
        assert_matches(law, unresolved, digit_law(Fraction(1, 3), 8, True))


@pytest.mark.parametrize(
    "p",
    [exp_neg(Fraction(1, 3)), exp_neg(Fraction(7)), laplace_nonzero(Fraction(2, 5))],
    ids=["e^-1/3", "e^-7", "2q/(1+q)"],
)
def test_bernoulli_real_by_enumeration(p: ExactReal) -> None:
    """[U < p] over every 8-bit word sequence three deep: P[1] brackets p (50 digits)."""
    law, unresolved = enumerate_law(
        lambda read: int(bernoulli_real(p, read, 1, word_bits=8)[0]), 8, 3
    )
    assert unresolved == Fraction(1, 1 << 24)
    exact = Fraction(p.floor_scaled(200), 1 << 200)
    assert law[1] <= exact <= law[1] + unresolved


def test_exact_real_digits_agree_with_high_precision() -> None:
    """⌊2^k·e^(−1/3)⌋ for k up to 300 against a 200-digit decimal evaluation."""
    context = decimal.Context(prec=200)
    value = context.exp(context.divide(-1, 3))
    p = exp_neg(Fraction(1, 3))
    for k in (1, 8, 63, 64, 65, 128, 300):
        assert p.floor_scaled(k) == int(
            context.multiply(value, 2**k).to_integral_value(decimal.ROUND_FLOOR)
        )
    assert exp_neg(Fraction(10**6)).floor_scaled(64) == 0  # below 2⁻⁶⁴: no evaluation needed


def test_tie_is_decided_by_the_next_word() -> None:
    """A 64-bit word equal to a cell's threshold is decided by the next 64 digits of θ."""
    table = alias_table(Fraction(1, 5), 4, True)
    packed = table.packed
    mask = table.size - 1
    cell = next(i for i in range(table.size) if int(packed[i]) & mask != i)  # θ < 1
    threshold = int(packed[cell]) >> table.bits
    word = (threshold << table.bits) | cell
    digit = table.theta_digits(cell, 64 - table.bits)
    alias = int(packed[cell]) & mask
    for follow, expected in ((digit - 1, cell), (digit + 1, alias)):
        out = table.decode(np.array([word], dtype=np.uint64), scripted([follow]))
        assert int(out[0]) == expected


def g_test_p(samples: np.ndarray, law: Any, bins: int = 40) -> float:
    """G-test of integer ``samples`` against a scipy discrete ``law`` in ~equal-mass bins.

    Bin edges are the law's quantiles; bin i holds (edge[i−1], edge[i]], with its exact mass
    from the law's CDF, so the test works for any scale without enumerating the support.
    """
    edges = np.unique(law.ppf(np.linspace(0, 1, bins + 1)[1:-1]))
    cdf = law.cdf(edges)
    expected = np.diff(np.concatenate([[0.0], cdf, [1.0]])) * samples.size
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    keep = observed > 0
    g = 2.0 * float(np.sum(observed[keep] * np.log(observed[keep] / expected[keep])))
    return float(stats.chi2.sf(g, df=edges.size))


RATES = [
    Fraction(1),  # one table
    Fraction(1, 3),
    Fraction(5),  # one small table
    Fraction(1, 1000),  # two digits
    Fraction(3, 2**20 + 1),  # two digits, a 14-bit nearly uniform one
    Fraction(1, 2**30),  # three digits, as the Laplace mechanism uses
]


@pytest.mark.parametrize("rate", RATES, ids=str)
def test_geometric_digits_match_the_geometric_law(rate: Fraction) -> None:
    """G-test against scipy's geometric pmf (support ≥ 0); false-positive rate 1e-6 each."""
    samples = geometric_digits(rate, keyed(1).words, 200_000)
    law = stats.geom(-math.expm1(-float(rate)), loc=-1)  # support 0, 1, 2, …
    assert g_test_p(samples, law) > ALPHA


@pytest.mark.parametrize("rate", RATES, ids=str)
def test_discrete_laplace_digits_match_the_discrete_laplace_law(rate: Fraction) -> None:
    """G-test against scipy's dlaplace; false-positive rate 1e-6 each."""
    samples = discrete_laplace_digits(rate, keyed(2).words, 200_000)
    assert g_test_p(samples, stats.dlaplace(float(rate))) > ALPHA


def test_bernoulli_mode_matches_the_geometric_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rates ≥ 64·ln 2 draw G as a run of exact Bernoulli(e^(−rate)) successes; that path is
    forced here at rate 1 (lowering the switch point) so that it can be tested statistically.
    G-test, false-positive rate 1e-6; and at rate 50 (the real switch) every draw is 0 (a
    nonzero draw among 200000 has probability 4e-17)."""
    import dpkit.randomness.geometric as module

    monkeypatch.setattr(module, "TAIL_NATS", 0.5)
    module.geometric_plan.cache_clear()
    try:
        assert module.geometric_plan(Fraction(1)).tables == ()
        samples = module.geometric_digits(Fraction(1), keyed(4).words, 200_000)
        assert g_test_p(samples, stats.geom(-math.expm1(-1.0), loc=-1)) > ALPHA
    finally:
        module.geometric_plan.cache_clear()
    assert geometric_plan(Fraction(50)).tables == ()
    assert not discrete_laplace_digits(Fraction(50), keyed(4).words, 200_000).any()


def test_geometric_plan_uses_few_words() -> None:
    """Three words per draw at the Laplace mechanism's scale 2³⁰, one at scale 1."""
    assert geometric_plan(Fraction(1, 2**30)).words_per_draw == 3
    assert geometric_plan(Fraction(1)).words_per_draw == 1
    assert geometric_plan(Fraction(100)).tables == ()


class CountingReader:
    def __init__(self, source: Any) -> None:
        self.source = source
        self.count = 0

    def __call__(self, n: int) -> np.ndarray:
        self.count += n
        return self.source(n)


@pytest.mark.parametrize("rate", [Fraction(1, 7), Fraction(1, 2**30)], ids=str)
def test_discrete_laplace_reads_a_fixed_number_of_words(rate: Fraction) -> None:
    """(digits + 1) words per draw, whatever values come out (ties have probability ~2⁻⁵⁰)."""
    reader = CountingReader(keyed(3).words)
    discrete_laplace_digits(rate, reader, 50_000)
    assert reader.count == 50_000 * (geometric_plan(rate).words_per_draw + 1)


def test_the_g_test_catches_a_magnitude_off_by_one() -> None:
    """Z = S·N·G instead of S·N·(1 + G) (a plausible slip) fails the same G-test at scale 1
    (its law puts mass (1 − q)/(1 + q)·(1 + ½(1 − q)) on 0): the statistical test has power."""
    z = discrete_laplace_digits(Fraction(1), keyed(2).words, 200_000)
    buggy = np.sign(z) * (np.abs(z) - 1)
    assert g_test_p(buggy, stats.dlaplace(1.0)) < ALPHA


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10), Fraction(7, 3)], ids=str)
def test_cks20_reference_sampler_matches_the_law(scale: Fraction) -> None:
    """The CKS20 Algorithm 2 sampler kept for comparison: G-test, false-positive rate 1e-6."""
    from dpkit.randomness.cks20 import cks20_discrete_laplace

    samples = cks20_discrete_laplace(scale, 200_000, rng=keyed(5))
    assert g_test_p(samples, stats.dlaplace(float(1 / scale))) > ALPHA


# --- Bernoulli draws from float brackets ------------------------------------------------------


@pytest.mark.parametrize("tight", [True, False], ids=["tight", "open"])
def test_bernoulli_exp_bracketed_has_probability_exp_minus_gamma(tight: bool) -> None:
    """γ ∈ {0, 1/3, 1, 5/2, 40}: with tight float brackets (few exact gaps asked for) and with
    open ones [0, inf] (every draw decided from the exact rationals). Binomial test per γ,
    false-positive rate 1e-6/5 each; γ = 40 is never drawn (probability 4e-18·n)."""
    import dpkit

    gammas = [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(40)]
    reps = 40_000 if tight else 4_000  # open brackets: every draw goes through Fractions
    g = np.repeat(np.array([float(x) for x in gammas]), reps)
    lo = g * (1 - 2**-50) if tight else np.zeros(g.size)
    hi = g * (1 + 2**-50) if tight else np.full(g.size, np.inf)
    asked = []

    def exact(indices: np.ndarray) -> list[Fraction]:
        asked.extend(indices.tolist())
        return [gammas[i // reps] for i in indices.tolist()]

    heads = dpkit.plugin.bernoulli_exp_bracketed(lo, hi, exact, rng=keyed(8))
    for j, gamma in enumerate(gammas):
        hits = int(heads[j * reps : (j + 1) * reps].sum())
        assert stats.binomtest(hits, reps, math.exp(-float(gamma))).pvalue > ALPHA / 5
    if tight:
        assert len(asked) < 0.05 * g.size  # ≈ 1/48 of the draws whose ⌊64E⌋ meets ⌊64γ⌋


@pytest.mark.parametrize("tight", [True, False], ids=["tight", "open"])
def test_bernoulli_bracketed_has_probability_p(tight: bool) -> None:
    """p = e^(−k/64)·2⁴⁰/⌈e^(−k/64)·2⁴⁰⌉ (the exponential mechanism's second coin, close to 1)
    and p = e^(−1/3) from decimal evaluators; binomial tests at 1e-6/2."""
    import dpkit

    n = 200_000 if tight else 5_000  # open brackets: every draw evaluates p in decimal
    ps = [math.exp(-7 / 64) * 2**40 / math.ceil(math.exp(-7 / 64) * 2**40), math.exp(-1 / 3)]
    evaluators = [
        lambda c: c.divide(
            c.multiply(c.exp(decimal.Decimal(-7) / 64), 2**40),
            math.ceil(math.exp(-7 / 64) * 2**40),
        ),
        lambda c: c.exp(c.divide(-1, 3)),
    ]
    for p, evaluate in zip(ps, evaluators, strict=True):
        lo = np.full(n, p * (1 - 2**-50) if tight else 0.0)
        hi = np.full(n, p * (1 + 2**-50) if tight else 1.0)
        draws = dpkit.plugin.bernoulli_bracketed(
            lo, hi, lambda i, f=evaluate: [f] * len(i), rng=keyed(9)
        )
        assert stats.binomtest(int(draws.sum()), n, p).pvalue > ALPHA / 2


@pytest.mark.parametrize("rate", [Fraction(1, 64), Fraction(1, 5000)], ids=["one table", "two"])
def test_exponential_comparisons_have_the_exponential_tail(rate: Fraction) -> None:
    """P[X > t] = e^(−rate·t) for X exponential of ``rate``, for targets with tight brackets
    (t = 0, integers, a dyadic fraction, a big value) and one open bracket (decided by
    Fractions only); the two-table rate exercises the top-digit-first integer part. Binomial
    tests, false-positive rate 1e-6/6 each."""
    from dpkit.randomness._exponential import exponential_exceeds

    scale = float(1 / rate)
    targets = [
        Fraction(0),
        Fraction(1),
        Fraction(37, 8),
        Fraction(int(scale)),
        Fraction(3 * int(scale)),
        Fraction(5, 4),
    ]
    reps = 30_000
    t = np.repeat([float(x) for x in targets], reps)
    lo, hi = t * (1 - 2**-50), t * (1 + 2**-50)
    lo[-reps:], hi[-reps:] = 0.0, np.inf  # the last target: nothing known but the exact value
    hits = exponential_exceeds(
        rate, lo, hi, lambda i: [targets[j // reps] for j in i.tolist()], keyed(10).words
    )
    for j, target in enumerate(targets):
        count = int(hits[j * reps : (j + 1) * reps].sum())
        p = math.exp(-float(rate * target))
        assert stats.binomtest(count, reps, p).pvalue > ALPHA / 6, target

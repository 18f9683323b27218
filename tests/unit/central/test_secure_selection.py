"""Secure (exact) selection: permute-and-flip and the exponential mechanism on a SecureRandom.

Every statistical test is a χ² goodness-of-fit test at α = 1e-6 (false-positive rate ≤ 1e-6
per test) with a fixed test key, against a pmf computed independently of the code under test:
exact rationals (``fractions``) for the gaps, 60-digit ``decimal`` for the exponentials, and
for permute-and-flip the subset formula below rather than the quadrature of
``permute_and_flip_log_pmf``. Privacy checks compute the realised ε exactly (to 60 digits) over
brute-force sets of neighbouring utility vectors.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ParamSpec, TypeVar

import numpy as np
import pytest
from dpkit_central import Quantile
from dpkit_central._selection import (
    coins,
    exact_rate,
    gap_brackets,
    nearest_rank_secure,
    uniform_among,
)
from dpkit_central.exponential import Exponential, sample_by_weight
from dpkit_central.noisy_max import PermuteAndFlip, ReportNoisyMax
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats
from support.high_precision import readings

import dpkit
from dpkit.accounting import event_cost
from dpkit.randomness import SecureRandom

ALPHA = 1e-6
N = 30_000
CTX = decimal.Context(prec=60)
P = ParamSpec("P")
T = TypeVar("T")
Pmf = Callable[[list[Fraction | None]], list[decimal.Decimal]]


def at_60_digits(function: Callable[P, T]) -> Callable[P, T]:
    """Run a reference computation with every Decimal operation at 60 digits."""

    @functools.wraps(function)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        with decimal.localcontext(CTX):
            return function(*args, **kwargs)

    return wrapped


def secure(tag: bytes) -> SecureRandom:
    return SecureRandom.from_key(tag.ljust(32, b"\0"))  # fixed key: reproducible, tests only


def chi2_pvalue(samples: np.ndarray, probabilities: list[float]) -> float:
    p = np.asarray(probabilities, dtype=np.float64)
    observed = np.bincount(samples.ravel(), minlength=p.size)
    expected = p * samples.size
    keep = expected > 0
    assert observed[~keep].sum() == 0, "a zero-probability candidate was drawn"
    if keep.sum() == 1:
        return 1.0 if observed[keep].sum() == samples.size else 0.0
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


# --- independent exact references ------------------------------------------------------------


def gaps_reference(
    u: list[float], eps: float, delta: float, monotone: bool
) -> list[Fraction | None]:
    """γ_r = ε(u* − u_r)/(cΔu): the utilities at their exact binary values, ε at the smaller of
    its two readings and Δu at the larger (binary value, shortest decimal)."""
    rate = readings(eps)[0] / ((1 if monotone else 2) * readings(delta)[1])
    top = max(Fraction(x) for x in u if math.isfinite(x))
    return [rate * (top - Fraction(x)) if math.isfinite(x) else None for x in u]


def dexp(gamma: Fraction | None) -> decimal.Decimal:
    if gamma is None:
        return decimal.Decimal(0)
    if gamma > 10**6:  # e^(−10⁶) is far below anything these tests resolve
        return decimal.Decimal(0)
    return CTX.exp(-CTX.divide(decimal.Decimal(gamma.numerator), gamma.denominator))


@at_60_digits
def em_pmf(gammas: list[Fraction | None]) -> list[decimal.Decimal]:
    w = [dexp(g) for g in gammas]
    total = sum(w, decimal.Decimal(0))
    return [CTX.divide(x, total) for x in w]


@at_60_digits
def pf_pmf(gammas: list[Fraction | None]) -> list[decimal.Decimal]:
    """Pr[r] = p_r Σ_{S ⊆ others} ∏_{S} p_j ∏_{others∖S} (1 − p_j) / (|S| + 1).

    The first heads in a uniform order is uniform over the set of heads; sum over which other
    coins came up heads (McKenna & Sheldon 2020, Algorithm 1). Exponential in m: m ≤ 6.
    """
    p = [dexp(g) for g in gammas]
    out = []
    for r, pr in enumerate(p):
        others = [x for j, x in enumerate(p) if j != r]
        total = decimal.Decimal(0)
        for heads in itertools.product((0, 1), repeat=len(others)):
            term = decimal.Decimal(1)
            for h, pj in zip(heads, others, strict=True):
                term = CTX.multiply(term, pj if h else 1 - pj)
            total += CTX.divide(term, sum(heads) + 1)
        out.append(CTX.multiply(pr, total))
    return out


# --- exact gaps ---------------------------------------------------------------------------------


GAP_ROWS = [
    [0.0, 1.0, 2.0, -np.inf],
    [0.1, 0.2, 0.30000000000000004, -0.7],
    [1e300, -1e300, 1e-300, 0.0],
    [5e-324, 1e-310, -2.5e-320, 0.0],  # subnormals
    [3.0, 3.0, 3.0, 3.0],
    [-7.25, -np.inf, -1e6, 2.0**60],
    [1e15, 1e15 + 2.0, -1e15, 123456.789],
]


@pytest.mark.parametrize("eps", [1.0, 0.1, 6.0, 1e-3])
@pytest.mark.parametrize("delta", [1.0, 0.3, 1e-9])
@pytest.mark.parametrize("monotone", [False, True])
def test_gap_brackets_contain_the_exact_gaps(eps: float, delta: float, monotone: bool) -> None:
    """lo ≤ ε(u* − u_r)/(cΔu) ≤ hi at the sampler's readings (fractions reference), including
    subnormals, gaps near 1e300 and overflowing ones; −inf utilities get [1e299, inf]."""
    rows = GAP_ROWS + np.random.default_rng(3).normal(0, 50, (5, 4)).tolist()
    u = np.array(rows)
    top = np.max(u, axis=-1, keepdims=True)
    brackets = gap_brackets(top, u, exact_rate(eps, delta, monotone))
    assert brackets is not None
    lo, hi = brackets
    for i, row in enumerate(rows):
        want = gaps_reference(row, eps, delta, monotone)
        for r, g in enumerate(want):
            if g is None:
                assert lo[i, r] == 1e299 and hi[i, r] == np.inf
            elif hi[i, r] == np.inf:  # a gap of about 1e300 or more
                assert lo[i, r] == 1e299 and g >= Fraction(1e299)
            else:
                assert Fraction(lo[i, r]) <= g <= Fraction(hi[i, r]), (i, r)
                assert hi[i, r] - lo[i, r] <= 1e-14 * hi[i, r] or hi[i, r] <= 1e-290


class CountingExact:
    """Counts how many exact gaps a run of ``coins`` asks for."""

    def __init__(self) -> None:
        self.asked = 0


def test_coins_form_exact_gaps_for_few_utilities(monkeypatch: pytest.MonkeyPatch) -> None:
    """10⁵ float utilities (N(0, 3), so most gaps are O(1) and the brackets are tight): the
    exact rational gap is formed for well under 5% of them (about 2⁻⁶ of the coins whose
    exponential lands in the same 1/64 as the gap), and the coins are still exact: χ² per
    group of equal utilities would be the test, here the overall heads count against Σ e^(−γ)
    (binomial, false-positive rate 1e-6)."""
    import dpkit_central._selection as selection

    counter = CountingExact()
    real = selection.bernoulli_exp_bracketed

    def counting(lo: Any, hi: Any, exact: Any, **kwargs: Any) -> Any:
        def wrapped(indices: Any) -> Any:
            counter.asked += len(indices)
            return exact(indices)

        return real(lo, hi, wrapped, **kwargs)

    monkeypatch.setattr(selection, "bernoulli_exp_bracketed", counting)
    u = np.random.default_rng(4).normal(0.0, 3.0, 100_000)
    heads = coins(np.array(u.max()), u, exact_rate(1.0, 1.0, False), secure(b"few-exact"))
    assert counter.asked < 5_000
    p = np.exp(-0.5 * (u.max() - u))
    mean, sd = p.sum(), math.sqrt((p * (1 - p)).sum())
    assert abs(int(heads.sum()) - mean) < 5.4 * sd  # two-sided normal tail 6.7e-8 < 1e-6


# --- distributions ------------------------------------------------------------------------------


CASES = [
    ("counts", [0.0, 1.0, 2.0, -np.inf], 1.0, 1.0, False),
    ("fractional", [0.1, 0.35, -0.2, 0.3, 0.05], 2.0, 0.3, False),
    ("monotone", [4.0, 1.0, 3.5], 0.7, 1.0, True),
    ("ties", [1.0, 1.0, 0.0, 1.0], 1.5, 1.0, False),
    ("tiny gaps", [1e-300, 2e-300, -1e-300], 1.0, 1.0, False),
    ("wide", [-1e6, 0.5, 1e6, 1e6 - 1.0, -np.inf], 1.0, 2.0, False),
]


@pytest.mark.parametrize(("label", "u", "eps", "delta", "monotone"), CASES)
def test_secure_permute_and_flip_matches_exact_pmf(
    label: str, u: list[float], eps: float, delta: float, monotone: bool
) -> None:
    """χ² at α = 1e-6 of N secure draws (a batch of identical rows) against the subset pmf;
    the reference also agrees with ``log_probability`` (what fast mode documents)."""
    mech = PermuteAndFlip(epsilon=eps, sensitivity=delta, monotone=monotone)
    pmf = pf_pmf(gaps_reference(u, eps, delta, monotone))
    logp = mech.log_probability(np.arange(len(u)), np.array(u))
    np.testing.assert_allclose(np.exp(logp), [float(x) for x in pmf], rtol=1e-9, atol=1e-300)
    draws = mech.randomize(np.tile(u, (N, 1)), rng=secure(b"pf-" + label.encode()))
    assert draws.shape == (N,) and draws.dtype == np.int64
    assert chi2_pvalue(draws, [float(x) for x in pmf]) > ALPHA


@pytest.mark.parametrize(("label", "u", "eps", "delta", "monotone"), CASES)
def test_secure_exponential_matches_exact_pmf(
    label: str, u: list[float], eps: float, delta: float, monotone: bool
) -> None:
    """χ² at α = 1e-6, for a batch of rows and for ``size=N`` draws from one row."""
    mech = Exponential(epsilon=eps, sensitivity=delta, monotone=monotone)
    pmf = [float(x) for x in em_pmf(gaps_reference(u, eps, delta, monotone))]
    logp = mech.log_probability(np.arange(len(u)), np.array(u))
    np.testing.assert_allclose(np.exp(logp), pmf, rtol=1e-9, atol=1e-300)
    rng = secure(b"em-" + label.encode())
    batch = mech.randomize(np.tile(u, (N, 1)), rng=rng)
    assert batch.shape == (N,) and chi2_pvalue(batch, pmf) > ALPHA
    copies = mech.randomize(np.array(u), rng=rng, size=N)
    assert copies.shape == (N,) and chi2_pvalue(copies, pmf) > ALPHA


@pytest.mark.parametrize(("label", "u", "eps", "delta", "monotone"), CASES[:3])
def test_secure_exponential_in_small_blocks_matches_exact_pmf(
    monkeypatch: pytest.MonkeyPatch,
    label: str,
    u: list[float],
    eps: float,
    delta: float,
    monotone: bool,
) -> None:
    """The block-wise paths (rows longer than a pass, proposals that land in different blocks
    of one row) on small rows, by making a pass two candidates long: χ² at α = 1e-6."""
    import dpkit_central._selection as selection

    monkeypatch.setattr(selection, "_PASS", 2)
    mech = Exponential(epsilon=eps, sensitivity=delta, monotone=monotone)
    pmf = [float(x) for x in em_pmf(gaps_reference(u, eps, delta, monotone))]
    rng = secure(b"em-blocks-" + label.encode())
    batch = mech.randomize(np.tile(u, (3_000, 1)), rng=rng)
    assert chi2_pvalue(batch, pmf) > ALPHA
    copies = mech.randomize(np.array(u), rng=rng, size=N)
    assert chi2_pvalue(copies, pmf) > ALPHA


def test_secure_selection_on_many_candidates() -> None:
    """m = 200 candidates in 8 utility levels: the law of the chosen *level* (χ² at 1e-6),
    exactly computable from the level sizes: EM ∝ n_k e^{λu_k}."""
    levels = np.repeat(np.arange(8.0), 25)
    mech = Exponential(epsilon=1.0)
    pmf = np.array([25 * math.exp(0.5 * k) for k in range(8)])
    draws = mech.randomize(levels, rng=secure(b"em-many"), size=20_000)
    assert chi2_pvalue(levels[draws].astype(np.int64), list(pmf / pmf.sum())) > ALPHA


def test_uniform_among_is_uniform_over_the_marked_entries() -> None:
    """χ² at 1e-6: the winner is uniform over each row's True entries, never a False one."""
    mask = np.array([[True, False, True, True, False, True]] * 24_000)
    chosen = uniform_among(mask, secure(b"uniform-among"))
    assert chi2_pvalue(chosen, [0.25, 0, 0.25, 0.25, 0, 0.25]) > ALPHA


# --- realised ε -----------------------------------------------------------------------------------


@at_60_digits
def realised_epsilon(
    pmf: Pmf,
    rows: list[list[float]],
    neighbours: list[tuple[float, ...]],
    eps: float,
    delta: float,
    monotone: bool,
) -> decimal.Decimal:
    """max over rows u, neighbours u′ and outputs r of |ln P(r | u) − ln P(r | u′)|, with the
    gaps the sampler's coins realise exactly (the rational λ(u* − u_r) of the binary values),
    evaluated to 60 digits."""
    worst = decimal.Decimal(0)
    for u in rows:
        for d in neighbours:
            other = [a + b for a, b in zip(u, d, strict=True)]
            laws = [pmf(gaps_reference(row, eps, delta, monotone)) for row in (u, other)]
            for p, q in zip(*laws, strict=True):
                worst = max(worst, abs(CTX.ln(p) - CTX.ln(q)))
    return worst


@pytest.mark.parametrize("monotone", [False, True])
@pytest.mark.parametrize(("name", "pmf"), [("permute_and_flip", pf_pmf), ("exponential", em_pmf)])
def test_realised_epsilon_never_exceeds_the_declared_one(
    name: str, pmf: Pmf, monotone: bool
) -> None:
    """Brute force over utility rows on a grid and every neighbour u′ = u + d with
    d ∈ {−Δu, −Δu/2, 0, Δu/2, Δu}^m (one sign throughout when monotone): realised ε ≤ ε.

    ε = 0.1 and Δu = 0.3 have long binary expansions, so a gap rounded the wrong way would
    show. The negative control (the same sampler gaps at twice the rate) exceeds ε, so the
    check can fail."""
    eps, delta = 0.1, 0.3
    rows = [list(r) for r in itertools.product([0.0, 0.45], repeat=3)] + [[0.0, 0.3, 0.45]]
    steps = [-delta, -delta / 2, 0.0, delta / 2, delta]
    if monotone:
        neighbours = [d for d in itertools.product(steps, repeat=3) if min(d) >= 0 or max(d) <= 0]
    else:
        neighbours = list(itertools.product(steps, repeat=3))
    got = realised_epsilon(pmf, rows, neighbours, eps, delta, monotone)
    charged = Fraction(repr(eps))  # the ledger's reading of ε
    declared = CTX.divide(decimal.Decimal(charged.numerator), charged.denominator)
    assert got <= CTX.add(declared, decimal.Decimal("1e-50"))
    assert got > declared / 4  # the search does reach a non-trivial privacy loss
    loose = realised_epsilon(pmf, rows[:4], neighbours, 2 * eps, delta, monotone)
    assert loose > declared


# --- the ε the exact samplers spend, against the ε the ledger charges ---------------------------
#
# The ledger charges a float ε at its shortest decimal (0.1 is 1/10), which can lie below its
# binary value (0.1000000000000000055…); each exact sampler's realised ε, an exact rational
# formed from its parameters, must not exceed that charge. Utilities may differ by Δu at either
# of its readings. Deterministic checks (Hypothesis draws the floats; no false positives).

FLOATS = st.floats(min_value=1e-12, max_value=1e12, allow_nan=False, allow_infinity=False)
SENSITIVITIES = st.floats(min_value=1e-100, max_value=1e100, allow_nan=False)


def _selection_spends_at_most_the_charge(eps: float, delta: float, monotone: bool) -> None:
    for cls in (Exponential, PermuteAndFlip):
        mech = cls(epsilon=eps, sensitivity=delta, monotone=monotone)
        spent = mech.exact_rate * (1 if monotone else 2) * readings(delta)[1]
        assert spent <= event_cost(mech.privacy)[0]


def test_the_selections_spend_at_most_what_the_ledger_charges_at_one_tenth() -> None:
    assert readings(0.1) == (Fraction(1, 10), Fraction(0.1))  # the decimal is the smaller
    for monotone in (False, True):
        _selection_spends_at_most_the_charge(0.1, 0.3, monotone)
        _selection_spends_at_most_the_charge(0.1, 1.0, monotone)
    assert Exponential(epsilon=0.1).exact_rate == Fraction(1, 20)


@settings(max_examples=150, deadline=None)
@given(FLOATS, SENSITIVITIES, st.booleans())
@example(0.1, 0.3, False)
def test_the_selections_spend_at_most_what_the_ledger_charges(
    eps: float, delta: float, monotone: bool
) -> None:
    _selection_spends_at_most_the_charge(eps, delta, monotone)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=3e-8, max_value=1e12), st.booleans())
@example(2.0**-25, False)  # t = 2D·2²⁵ exactly at the binary value: no rounding up to spare
@example(2.0**-25, True)
@example(0.1, False)
def test_report_noisy_max_spends_at_most_what_the_ledger_charges(
    eps: float, monotone: bool
) -> None:
    """The secure lattice's realised ε = c·D/t (its privacy argument) ≤ the charged ε (an ε
    too small for the lattice is refused: nothing is spent)."""
    mech = ReportNoisyMax(epsilon=eps, monotone=monotone)
    try:
        lattice = mech.lattice
    except dpkit.InvalidParameter:
        assume(False)
    spent = (1 if monotone else 2) * lattice.steps / lattice.scale
    assert spent <= event_cost(mech.privacy)[0]


def test_the_secure_quantile_spends_at_most_what_the_ledger_charges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rank sampler's rate λ (rank utility of sensitivity 1: realised ε = 2λ) at ε = 0.1,
    whose binary value exceeds the charged 1/10."""
    import dpkit_central.quantile as quantile

    rates: list[Fraction] = []

    def spy(*args: Any) -> int:
        rates.append(args[3])
        return int(nearest_rank_secure(*args))

    monkeypatch.setattr(quantile, "nearest_rank_secure", spy)
    query = Quantile(q=0.5, lower=0.0, upper=10.0, epsilon=0.1)
    query.run(np.array([1.0, 2.0, 7.0]), rng=secure(b"quantile-charge"))
    assert len(rates) == 1 and 2 * rates[0] <= event_cost(query.privacy)[0] == Fraction(1, 10)


# --- edge cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Exponential, PermuteAndFlip])
def test_edge_cases(cls: Any) -> None:
    mech = cls(epsilon=1.0)
    rng = secure(b"edges-" + cls.name.encode())
    assert np.all(mech.randomize(np.array([[5.0]] * 100), rng=rng) == 0)  # one candidate
    only = mech.randomize(np.tile([-np.inf, 3.0, -np.inf], (2_000, 1)), rng=rng)
    assert np.all(only == 1)  # −inf is never chosen
    huge = mech.randomize(np.tile([-1e308, 1e308, 0.0, 1e300], (2_000, 1)), rng=rng)
    assert np.all(huge == 1)  # every other gap is astronomically large
    shaped = mech.randomize(np.zeros((2, 3, 5)), rng=rng)
    assert shaped.shape == (2, 3) and shaped.min() >= 0 and shaped.max() <= 4
    scalar_row = mech.randomize(np.array([0.0, 9.0]), rng=rng)
    assert np.asarray(scalar_row).shape == ()
    default = mech.randomize(np.array([0.0, 1.0]))  # rng=None: the process-wide secure source
    assert int(default) in (0, 1)


def test_exponential_size_zero_and_default_secure_mode() -> None:
    mech = Exponential(epsilon=1.0)
    assert mech.randomize(np.array([0.0, 1.0]), rng=secure(b"size0"), size=0).shape == (0,)


@pytest.mark.parametrize("cls", [Exponential, PermuteAndFlip, ReportNoisyMax])
@pytest.mark.parametrize(
    "bad",
    [[0.0, np.nan], [0.0, np.inf], [-np.inf, -np.inf], [], [True, False], ["a", "b"]],
)
def test_invalid_utilities_are_typed_errors(cls: Any, bad: list[Any]) -> None:
    for rng in (np.random.default_rng(0), secure(b"bad")):
        with pytest.raises(dpkit.InvalidData):
            cls(epsilon=1.0).randomize(np.array(bad), rng=rng)


@pytest.mark.parametrize("cls", [Exponential, PermuteAndFlip])
def test_invalid_rng_is_a_typed_error(cls: Any) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        cls(epsilon=1.0).randomize(np.zeros(3), rng=np.random.RandomState(0))


@pytest.mark.parametrize("rng", [None, "key"])
def test_report_noisy_max_runs_in_secure_mode(rng: Any) -> None:
    """report_noisy_max no longer refuses secure mode: it releases an index drawn exactly from
    its secure law (details and the privacy checks in test_central_secure_noisy_max.py)."""
    source = secure(b"rnm") if rng == "key" else None
    mech = ReportNoisyMax(epsilon=1.0)
    out = mech.randomize(np.array([[0.0, 5.0, -np.inf], [3.0, 0.0, 1.0]]), rng=source)
    assert out.dtype == np.int64 and out.shape == (2,) and out[0] in (0, 1)


def test_fast_mode_is_unchanged() -> None:
    """With a numpy Generator the samplers are the float ones, draw for draw."""
    u = np.array([0.0, 1.5, 3.0, -np.inf, 2.0])
    em = Exponential(epsilon=2.0, sensitivity=1.5)
    got = em.randomize(u, rng=np.random.default_rng(11), size=500)
    want = sample_by_weight(u, np.random.default_rng(11), 500, rate=em.rate)
    np.testing.assert_array_equal(got, want)
    pf = PermuteAndFlip(epsilon=2.0)
    rng = np.random.default_rng(12)
    p = np.exp(pf.rate * (u - u.max()))
    arrival, coins = rng.random((300, 5)), rng.random((300, 5))
    arrival[~(coins < p)] = np.inf
    got_pf = pf.randomize(np.tile(u, (300, 1)), rng=np.random.default_rng(12))
    np.testing.assert_array_equal(got_pf, np.argmin(arrival, axis=-1))


# --- the array form of the exact Bernoulli(exp(−γ)) ---------------------------------------------


def test_bernoulli_exp_array_matches_exp_minus_gamma() -> None:
    """χ² at α = 1e-6 per γ (two-cell test of heads/tails), uint64 and Python-int paths:
    γ = 3/2 (small ints), γ = (2⁷⁰ + 2⁶⁹)/2⁷⁰ = 3/2 with big ints, γ = 1/3 · 2⁶⁶/2⁶⁶."""
    from dpkit.randomness.discrete import bernoulli_exp_array

    rng = secure(b"bernoulli-exp-array")
    n = 40_000
    cases = [
        (np.full(n, 3, dtype=np.uint64), np.array([2], dtype=np.uint64), 1.5),
        (np.array([2**70 + 2**69] * n, dtype=object), np.array([2**70], dtype=object), 1.5),
        (np.array([2**66] * n, dtype=object), np.array([3 * 2**66], dtype=object), 1 / 3),
    ]
    for num, den, gamma in cases:
        heads = bernoulli_exp_array(num, den, rng=rng)
        assert heads.shape == (n,) and heads.dtype == np.bool_
        p = math.exp(-gamma)
        assert chi2_pvalue(heads.astype(np.int64), [1 - p, p]) > ALPHA


@pytest.mark.parametrize(
    ("num", "den"),
    [
        (np.array([-1]), np.array([1])),
        (np.array([1]), np.array([0])),
        (np.array([1.5]), np.array([1])),
        (np.array([1, "a"], dtype=object), np.array([1])),
        (np.array([2**70, -(2**70)], dtype=object), np.array([1])),
    ],
)
def test_bernoulli_exp_array_rejects_bad_input(num: Any, den: Any) -> None:
    from dpkit.randomness.discrete import bernoulli_exp_array

    with pytest.raises(dpkit.InvalidParameter):
        bernoulli_exp_array(num, den, rng=secure(b"bad-bern"))


#: Utilities that no double holds, near 2⁵² where the doubles are 1 apart: read as doubles
#: (2⁵², 2⁵² + 2, 2⁵²) their gaps would be 2, 0 and 2 instead of 1, 0 and 7/6.
EXACT_ROW = [Fraction(2**52) + Fraction(1, 2), Fraction(2**52) + Fraction(3, 2)]
EXACT_ROW.append(Fraction(2**52) + Fraction(1, 3))


@pytest.mark.parametrize("cls", [Exponential, PermuteAndFlip])
def test_secure_selections_of_utilities_no_double_holds_match_the_exact_pmf(cls: Any) -> None:
    """Fractions in an object array (as ``coerce`` keeps them) are selected with their exact
    gaps, in a batch of rows and (the exponential mechanism) as copies from one row: χ² at
    α = 1e-6 against the pmf of the exact gaps, whose doubles' pmf it would reject."""
    mech = cls(epsilon=1.0, sensitivity=1.0)
    rate = Fraction(1, 2)
    top = max(EXACT_ROW)
    gaps: list[Fraction | None] = [rate * (top - u) for u in EXACT_ROW]
    pmf = [float(x) for x in (em_pmf if cls is Exponential else pf_pmf)(gaps)]
    row = mech.coerce(np.array(EXACT_ROW, dtype=object))
    assert row.dtype == object and list(row) == EXACT_ROW
    rng = secure(b"exact-" + cls.__name__.encode())
    batch = mech.randomize(np.tile(row, (3_000, 1)), rng=rng)
    assert chi2_pvalue(batch, pmf) > ALPHA
    if cls is Exponential:
        copies = mech.randomize(row, rng=rng, size=N)
        assert chi2_pvalue(copies, pmf) > ALPHA


def test_secure_report_noisy_max_scores_utilities_no_double_holds_exactly() -> None:
    """Report-noisy-max's lattice scores of Fractions are round(u/g) in exact rationals (the
    doubles would give 2⁵² and 2⁵² + 2 for the first two, which are 1/g steps apart)."""
    from dpkit_central.noisy_max import lattice_scores

    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0)
    exponent = mech.lattice.exponent
    scores, finite = lattice_scores(np.array([[*EXACT_ROW, -math.inf]], dtype=object), exponent)
    step = Fraction(2) ** exponent
    assert scores[0, :3].tolist() == [round(u / step) for u in EXACT_ROW]
    assert finite.tolist() == [[True, True, True, False]]
    assert mech.randomize(np.array(EXACT_ROW, dtype=object), rng=secure(b"rnm")) in (0, 1, 2)

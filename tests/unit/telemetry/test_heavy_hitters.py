"""Heavy hitters without a candidate list (pem, treehist): items as bit strings, the hash family,
exact privacy, the rounds' population split, the search and the counts.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

import decimal
import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_ldp.heavy_hitters import GroupedReports, as_bit_items, coerce_bit_items
from dpkit_ldp.pem import vector_multiply_shift
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpkit

Z = float(stats.norm.isf(0.5e-7))


@pytest.mark.parametrize("g", [4, 3])
def test_vector_multiply_shift_is_strongly_universal_by_enumeration(g: int) -> None:
    """w = 4 (2-bit halves): over all 2¹² seeds (a₁, a₂, b), every pair x ≠ x′ < 16 hashes to a
    pair with the product law π⊗π of the marginal (what q* assumes)."""
    grid = np.meshgrid(*[np.arange(16, dtype=np.uint64)] * 3, indexing="ij")
    a1, a2, b = (v.ravel() for v in grid)
    pi = np.bincount((np.arange(4) * g) >> 2, minlength=g) / 4
    for x, x2 in itertools.combinations(range(16), 2):
        h1 = vector_multiply_shift(a1, a2, b, np.uint64(x), g, word_bits=4).astype(int)
        h2 = vector_multiply_shift(a1, a2, b, np.uint64(x2), g, word_bits=4).astype(int)
        joint = np.bincount(h1 * g + h2, minlength=g * g).reshape(g, g) / a1.size
        np.testing.assert_allclose(joint, np.outer(pi, pi), atol=1e-15)


def test_items_are_bit_strings_whose_prefixes_are_the_strings_prefixes() -> None:
    items = as_bit_items(np.array(["ab", "abc", "b"]), 32, owner="t")
    assert items.tolist() == [0x61620000, 0x61626300, 0x62000000]
    assert (items[:2] >> np.uint64(16)).tolist() == [0x6162, 0x6162]  # the prefix "ab"
    assert as_bit_items(np.array([5, 2**64 - 1], dtype=np.uint64), 64, owner="t")[1] == 2**64 - 1
    found = dpkit.get_registry().mechanism("treehist", epsilon=1.0, bits=16)
    assert found.domain.are_neighbours(1, "a") and not found.domain.are_neighbours(-1, 2)
    for bad, message in (
        (np.array([16]), "outside the 4-bit items"),
        (np.array([-1]), "outside"),
        (np.array([0.5]), "integers, text or bytes"),
    ):
        with pytest.raises(dpkit.InvalidData, match=message):
            as_bit_items(bad, 4, owner="t")
    with pytest.raises(dpkit.InvalidData, match="longer than 2 bytes"):
        as_bit_items(np.array(["abc"]), 16, owner="t")
    with pytest.raises(dpkit.InvalidData, match="not a whole number of bytes"):
        as_bit_items(np.array(["a"]), 12, owner="t")
    rng = np.random.default_rng(0)
    total = coerce_bit_items(np.array([3, "abc", None, 2.5, 70000], dtype=object), 16, rng)
    assert total[:2].tolist() == [3, 0x6162]
    assert np.all(total < 2**16)
    assert coerce_bit_items(np.array(["abcdef"]), 16, rng).tolist() == [0x6162]


@pytest.mark.parametrize("epsilon", [0.4, 2.0, 7.0])
def test_pem_declared_distribution_is_exactly_epsilon(epsilon: float) -> None:
    """For 60 random seeds, every round, every y and all pairs of 6 items: the worst log-ratio
    is the realised ε (some seed separates some pair), and P[y | seed] sums to 1."""
    pem = dpkit.mechanism("pem", epsilon=epsilon, bits=12, top=2, step=3)
    rng = np.random.default_rng(int(epsilon * 10))
    g = pem.range
    seeds = rng.integers(0, 2**64, size=(60, 3), dtype=np.uint64, endpoint=False)
    rows = []
    for t in range(pem.groups):
        for y in range(g):
            block = np.zeros((60, 5), dtype=np.uint64)
            block[:, 0], block[:, 1:4], block[:, 4] = t, seeds, y
            rows.append(block)
    outputs = np.concatenate(rows)
    items = [0, 1, 2**11, 4095, 77, 2048 + 1]
    table = np.stack([pem.log_probability(outputs, np.full(len(outputs), x)) for x in items])
    shifted = table + math.log(pem.groups) + 192 * math.log(2)
    sums = np.exp(shifted).reshape(len(items), pem.groups, g, 60).sum(axis=2)
    np.testing.assert_allclose(sums, 1.0, rtol=1e-12)
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(6), 2))
    keep = pem.keep_probability
    realised = math.log(keep * (g - 1) / (1 - keep))
    assert realised <= epsilon + 1e-12
    assert worst == pytest.approx(realised, rel=1e-9)


def test_treehist_declared_distribution_is_exactly_its_composite_epsilon() -> None:
    tree = dpkit.mechanism("treehist", epsilon=2.0, bits=3, step=1, split=0.3)
    space = tree.output_space()
    table = np.stack([tree.log_probability(space, np.full(len(space), x)) for x in range(8)])
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=1e-12)
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(8), 2))
    realised = sum(
        math.log((1 - phi) / phi)
        for phi in (dpkit.plugin.lie_threshold(e, 2) / 2**64 for e in (0.6, 2.0 - 0.6))
    )
    assert worst == pytest.approx(realised, rel=1e-9)
    assert realised <= tree.privacy.epsilon + 1e-12
    assert tree.privacy.epsilon == pytest.approx(2.0)


def _realised_log_odds(epsilon: float) -> decimal.Decimal:
    """ln((1 − φ)/φ) of the flip the secure sampler draws at ``epsilon`` (φ = T/2⁶⁴), 60 digits."""
    threshold = dpkit.plugin.lie_threshold(epsilon, 2)
    context = decimal.Context(prec=60)
    return context.ln(
        context.divide(decimal.Decimal((1 << 64) - threshold), decimal.Decimal(threshold))
    )


@pytest.mark.parametrize(("epsilon", "split"), [(1.0, 0.1), (2.0, 0.2), (3.0, 0.1), (6.0, 0.1)])
def test_treehist_parts_realise_at_most_epsilon_exactly(epsilon: float, split: float) -> None:
    """The two flips' realised ε (the thresholds the sampler draws with) sum to at most ε, in
    60-digit arithmetic. With ε_final = ε − ε_tree in floating point, ε = 1, split = 0.1 gave
    parts 0.1 and 0.9 whose flips realised 1 + 2.8e-17."""
    tree = dpkit.mechanism("treehist", epsilon=epsilon, split=split)
    parts = (tree.epsilon_tree, tree.epsilon_final)
    assert sum(_realised_log_odds(e) for e in parts) <= decimal.Decimal(epsilon)


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(
    epsilon=st.floats(min_value=1e-9, max_value=700.0),
    split=st.floats(min_value=1e-3, max_value=1 - 1e-3),
)
def test_treehist_parts_sum_to_at_most_epsilon(epsilon: float, split: float) -> None:
    """ε_tree + ε_final ≤ ε exactly, and ε_final is the largest double that keeps it."""
    tree = dpkit.mechanism("treehist", epsilon=epsilon, split=split)
    tree_part, final = Fraction(tree.epsilon_tree), tree.epsilon_final
    assert tree_part + Fraction(final) <= Fraction(epsilon)
    assert tree_part + Fraction(math.nextafter(final, math.inf)) > Fraction(epsilon)


def test_samplers_match_their_declared_laws() -> None:
    """treehist (L = 3): χ² of 200,000 reports of one item against the declared pmf (5e-7).
    pem: the offset (y − H(prefix)) mod g′ has law p* at 0 and uniform elsewhere, and the
    rounds are uniform (χ² each at 2.5e-7). Total false positive ≤ 1e-6."""
    tree = dpkit.mechanism("treehist", epsilon=1.5, bits=3, step=1)
    space = tree.output_space()
    reports = tree.randomize(np.full(200_000, 5), rng=np.random.default_rng(21))
    index = {row.tobytes(): i for i, row in enumerate(space)}
    observed = np.bincount([index[r.tobytes()] for r in reports], minlength=len(space))
    expected = 200_000 * np.exp(tree.log_probability(space, np.full(len(space), 5)))
    assert stats.chisquare(observed[expected > 0], expected[expected > 0]).pvalue > 5e-7
    pem = dpkit.mechanism("pem", epsilon=1.5, bits=20, top=4, step=3)
    x = 0xABCDE
    out = pem.randomize(np.full(300_000, x), rng=np.random.default_rng(22))
    groups = out[:, 0].astype(int)
    assert stats.chisquare(np.bincount(groups, minlength=pem.groups)).pvalue > 2.5e-7
    prefix = np.uint64(x) >> (np.uint64(20) - np.array(pem.prefix_bits, dtype=np.uint64)[groups])
    hashed = vector_multiply_shift(out[:, 1], out[:, 2], out[:, 3], prefix, pem.range)
    g = pem.range
    offset = ((out[:, 4] + np.uint64(g) - hashed) % np.uint64(g)).astype(int)
    law = np.full(g, (1 - pem.keep_probability) / (g - 1))
    law[0] = pem.keep_probability
    assert stats.chisquare(np.bincount(offset, minlength=g), 300_000 * law).pvalue > 2.5e-7


def test_the_population_split_costs_each_device_epsilon_once() -> None:
    pem = dpkit.mechanism("pem", epsilon=1.0, bits=32, top=16, step=4)
    assert pem.groups == 7 and pem.prefix_bits == (8, 12, 16, 20, 24, 28, 32)
    assert pem.privacy == dpkit.PureDP(epsilon=1.0)
    # Each device reports in one round: disjoint groups compose in parallel, not in sequence.
    rounds = [[(pem.privacy, 1)] for _ in range(pem.groups)]
    assert dpkit.accounting.compose_parallel(rounds, delta=1e-9).epsilon == pytest.approx(1.0)
    sequential = dpkit.account([(pem.privacy, pem.groups)], delta=0).epsilon
    assert sequential == pytest.approx(7.0)
    tree = dpkit.mechanism("treehist", epsilon=1.0, bits=32, step=2, split=0.25)
    assert tree.levels == 16
    assert [p.epsilon for p in tree.privacy.parts] == pytest.approx([0.25, 0.75])
    assert dpkit.account([(tree.privacy, 1)], delta=0).epsilon == pytest.approx(1.0)


def _population(rng: np.random.Generator, n: int, bits: int) -> tuple[np.ndarray, list[int]]:
    heavy = [int(v) for v in rng.integers(0, 2**bits, size=4, dtype=np.uint64)]
    shares = np.array([0.25, 0.18, 0.13, 0.1])
    counts = (shares * n).astype(int)
    rest = rng.integers(0, 2**bits, size=n - counts.sum(), dtype=np.uint64)
    values = np.concatenate([np.repeat(np.array(heavy, dtype=np.uint64), counts), rest])
    return rng.permutation(values), heavy


def _margin_in_deviations(mech: dpkit.plugin.Mechanism, n: int, share: float, rest: float) -> float:
    """The smallest planted item's lead over a prefix of the uniform rest, in standard
    deviations of their difference, at the round where the rest is most concentrated (round 0,
    2^{s_0} prefixes): noise of both round counts (the variance formulas) and the rest's
    binomial spread."""
    if mech.name == "pem":
        devices = n / mech.groups
        p, q = mech.support_probabilities
        noise = devices * q * (1 - q) / (p - q) ** 2 + devices * share * (1 - p - q) / (p - q)
    else:
        devices = n / mech.levels
        noise = devices * mech.gains()[0] ** 2
    per_prefix = devices * rest / 2 ** mech.prefix_bits[0]
    return devices * share / math.sqrt(2 * noise + per_prefix)


@pytest.mark.parametrize("name", ["pem", "treehist"])
def test_planted_heavy_hitters_are_found(name: str) -> None:
    """Four items hold 66 % of 200,000 devices among uniformly random others; ε = 4. The
    smallest planted item leads any prefix of the random rest by at least 7 standard
    deviations at every comparison (checked below from the variance formulas), so with fewer
    than 10³ comparisons a miss has probability below 1e-9."""
    rng = np.random.default_rng(31)
    values, heavy = _population(rng, 200_000, 24)
    params = {"step": 4} if name == "pem" else {"step": 3, "split": 0.5}
    mech = dpkit.mechanism(name, epsilon=4.0, bits=24, top=4, **params)
    assert _margin_in_deviations(mech, 200_000, 0.1, 0.34) >= 7
    found = dpkit.estimate(mech, mech.randomize(values, rng=rng))
    assert sorted(found.items.tolist()) == sorted(heavy)
    assert len(found.rounds) == (mech.groups if name == "pem" else mech.levels)
    assert found.unbiased == (name == "treehist") and (name == "pem") == bool(found.note)
    assert found.labels()[0] == int(found.items[0]).to_bytes(3, "big").rstrip(b"\0")


def test_treehist_counts_are_unbiased_with_their_exact_variance() -> None:
    """The estimation reports of 3,000 independent runs (1,000 devices, three fixed items):
    mean error within Z standard errors, MSE/variance within Z·√(2/R) of 1 and 95 % coverage
    within Z·√(0.0475/R) of 0.95, for each item (9 checks at 1e-7: false positive ≤ 1e-6)."""
    tree = dpkit.mechanism("treehist", epsilon=2.0, bits=16, step=4, split=0.5)
    rng = np.random.default_rng(41)
    values = np.concatenate([np.full(300, 7), np.full(150, 900), rng.integers(1000, 65536, 550)])
    truth = np.array([300, 150, 0])
    items = np.array([7, 900, 999], dtype=np.uint64)
    _, gain = tree.gains()
    errors, variances, hits = [], [], []
    for _ in range(3000):
        out = tree.randomize(values, rng=rng)
        counts = gain * tree.signed_sums(out[:, 3], out[:, 4], items)
        variance = np.maximum(len(values) * gain**2 - counts, 0.0)
        half = 1.959963984540054 * np.sqrt(variance)
        errors.append(counts - truth)
        variances.append(variance)
        hits.append((counts - half <= truth) & (truth <= counts + half))
    e, v, h = np.array(errors), np.array(variances), np.array(hits)
    r = e.shape[0]
    assert np.all(np.abs(e.mean(0)) <= Z * e.std(0) / math.sqrt(r))
    assert np.all(np.abs((e**2).mean(0) / v.mean(0) - 1) <= Z * math.sqrt(2 / r))
    assert np.all(np.abs(h.mean(0) - 0.95) <= Z * math.sqrt(0.0475 / r))


def test_pem_round_counts_are_unbiased() -> None:
    """One round's debiased support counts of fixed candidates over 1,500 runs: mean error
    within Z standard errors and MSE/variance within Z·√(2/R) of 1, for 3 candidates (6 checks
    at 1e-7: false positive ≤ 6e-7)."""
    pem = dpkit.mechanism("pem", epsilon=2.0, bits=16, top=2, step=15)  # one round, 16 bits
    assert pem.groups == 1
    rng = np.random.default_rng(43)
    values = np.concatenate([np.full(300, 7), np.full(100, 900), rng.integers(1000, 65536, 600)])
    truth = np.array([300, 100, 0])
    candidates = np.array([7, 900, 999], dtype=np.uint64)
    p, q = pem.support_probabilities
    errors, variances = [], []
    for _ in range(1500):
        out = pem.randomize(values, rng=rng)
        counts = (pem.support_counts(out, candidates) - len(values) * q) / (p - q)
        errors.append(counts - truth)
        variances.append(len(values) * q * (1 - q) / (p - q) ** 2 + truth * (1 - p - q) / (p - q))
    e, v = np.array(errors), np.array(variances)
    assert np.all(np.abs(e.mean(0)) <= Z * e.std(0) / math.sqrt(1500))
    assert np.all(np.abs((e**2).mean(0) / v.mean(0) - 1) <= Z * math.sqrt(2 / 1500))


def test_reports_merge_and_bad_ones_are_refused() -> None:
    pem = dpkit.mechanism("pem", epsilon=1.0, bits=16, top=4, step=4)
    out = pem.randomize(np.arange(100), rng=np.random.default_rng(0))
    estimator = dpkit.get_registry().estimator(pem)
    merged = estimator.accumulate(out[:40]) + estimator.accumulate(out[40:])
    np.testing.assert_array_equal(merged.reports, out)
    with pytest.raises(dpkit.InvalidData, match="merge"):
        _ = merged + GroupedReports("treehist", out)
    with pytest.raises(dpkit.InvalidData, match=r"shape \(n, 5\)"):
        estimator.accumulate(out[:, :4])
    bad = out.copy()
    bad[0, 0] = 99
    with pytest.raises(dpkit.InvalidData, match="round outside"):
        estimator.accumulate(bad)
    with pytest.raises(dpkit.InvalidParameter, match="top"):
        dpkit.mechanism("pem", epsilon=1.0, bits=4, top=16)
    with pytest.raises(dpkit.InvalidParameter, match="split"):
        dpkit.mechanism("treehist", epsilon=1e-12, split=0.5)


def test_advise_ranks_the_telemetry_protocols(capsys: pytest.CaptureFixture[str]) -> None:
    """``dpkit advise --telemetry``: the heavy-hitter searches by the noise of a round's count,
    the sketches by the standard error of an item's count, each from the mechanisms' formulas."""
    from dpkit.cli import main

    assert main(["advise", "--telemetry", "--epsilon", "2", "--n", "1000000", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)
    pem = dpkit.mechanism("pem", epsilon=2.0, bits=32)
    p, q = pem.support_probabilities
    assert search["standard_errors"]["pem"] == pytest.approx(
        math.sqrt(pem.groups * 1e6 * q * (1 - q)) / (p - q)
    )
    assert set(search["standard_errors"]) == {"pem", "treehist"} and search["best"] == "pem"
    args = ["advise", "--telemetry", "--candidates", "--epsilon", "4", "--n", "1000", "--json"]
    assert main(args) == 0
    sketches = json.loads(capsys.readouterr().out)
    assert set(sketches["standard_errors"]) == {"cms", "hcms"}
    cms = sketches["standard_errors"]["cms"]
    assert cms == pytest.approx(1000 * math.sqrt(
        dpkit.get_registry().info("cms").cls.sketch_variance(epsilon=4.0, n=1000)
    ))  # fmt: skip
    assert main(["advise", "--telemetry", "--epsilon", "0", "--n", "10"]) == 2
    assert main(["advise", "--telemetry", "--epsilon", "1", "--n", "10", "--bits", "99"]) == 2


@pytest.mark.parametrize(("top", "step"), [(20, 4), (5, 3), (4096, 8)])
def test_pem_states_each_rounds_candidates(top: int, step: int) -> None:
    """``candidates_per_round`` (the decoding cost per report) is what the decoder tests."""
    mech = dpkit.mechanism("pem", epsilon=2.0, bits=24, top=top, step=step)
    rng = np.random.default_rng(5)
    reports = mech.randomize(rng.integers(0, 1 << 24, size=400, dtype=np.uint64), rng=rng)
    found = dpkit.estimate(mech, reports)
    assert tuple(r.candidates for r in found.rounds) == mech.candidates_per_round
    assert max(mech.candidates_per_round) <= 1 << 20

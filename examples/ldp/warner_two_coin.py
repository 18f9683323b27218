"""Warner's two-coin survey is randomized response with keep = 3/4, i.e. ε = ln 3.

Source: Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*, Section 3.2
(the notes in seeds 001 and 004 after it): to answer a yes/no question, toss a coin; on heads
answer truthfully; on tails toss again and answer "yes" on heads, "no" on tails. Then

    P[yes | truth yes] = 1/2 + 1/4 = 3/4,      P[yes | truth no] = 1/4,

the ratio is 3, so the survey is (ln 3, 0)-DP (Dwork & Roth, Claim 3.5). Warner's original
design (Warner 1965; seeds 001 and 002) uses one biased coin instead: answer truthfully with
probability p = 3/4, otherwise answer the opposite. All three are the same distribution as
dpkit's ``rr`` with ``keep=0.75``. The script

1. enumerates the coin outcomes exactly (fractions) and compares them with ``rr``'s
   ``log_probability``;
2. simulates the coin protocol for ``n`` respondents (fast mode, a seeded numpy Generator — the
   coin *simulation* is for illustration; a real survey sends ``rr.randomize(answers)``, secure
   mode) and debiases the "yes" share with dpkit's estimator: π̂ = (ȳ − 1/4)/(1/2), with
   Var[π̂] = p(1 − p)/(n (2p − 1)²) = 3/(4n) given the respondents' true answers (Warner 1965;
   Wang et al. 2017, Theorem 2 with k = 2).

Run: ``python examples/ldp/warner_two_coin.py [--n 10000] [--seed 2026]``
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

import dpkit

HALF = Fraction(1, 2)


def two_coin_probability_of_yes(truth: bool) -> Fraction:
    """P[answer "yes" | truth] by enumerating the four equally likely coin outcomes."""
    total = Fraction(0)
    for first_heads, second_heads in itertools.product((True, False), repeat=2):
        answer = truth if first_heads else second_heads
        total += HALF * HALF * int(answer)
    return total


def one_biased_coin_probability_of_yes(truth: bool, keep: Fraction = Fraction(3, 4)) -> Fraction:
    """Warner's single biased coin: the truth with probability ``keep``, else its opposite."""
    return keep if truth else 1 - keep


def two_coin_answers(truth: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.uint8]:
    """Simulate the coin protocol for every respondent at once (vectorised)."""
    first_heads = rng.random(truth.shape) < 0.5
    second_heads = rng.random(truth.shape) < 0.5
    return np.where(first_heads, truth, second_heads).astype(np.uint8)


@dataclass(frozen=True)
class Result:
    """What the example computed (the tests check these)."""

    coin_yes_given: dict[bool, Fraction]
    rr_yes_given: dict[bool, float]
    epsilon: float
    n: int
    yes_reports: int
    true_share: float
    estimated_share: float
    standard_error: float
    interval: tuple[float, float]


def main(seed: int = 2026, n: int = 10_000) -> Result:
    rng = np.random.default_rng(seed)
    rr = dpkit.mechanism("rr", keep=0.75)

    coin = {truth: two_coin_probability_of_yes(truth) for truth in (True, False)}
    warner = {truth: one_biased_coin_probability_of_yes(truth) for truth in (True, False)}
    exact_rr = {truth: float(np.exp(rr.log_probability(1, int(truth)))) for truth in (True, False)}
    print("P[answer yes | truth]      two coins   one biased coin   dpkit rr(keep=0.75)")
    for truth in (True, False):
        print(
            f"  truth = {'yes' if truth else 'no ':<3}               {coin[truth]!s:>5}"
            f"         {warner[truth]!s:>5}            {exact_rr[truth]:.4f}"
        )
    ratio = coin[True] / coin[False]
    print(
        f"likelihood ratio {ratio} = e^ε with ε = ln 3 = {math.log(3):.6f}; rr reports {rr.privacy}"
    )

    population = rng.random(n) < 0.3  # 30% of the population would truly answer "yes"
    answers = two_coin_answers(population, rng)
    estimate = dpkit.estimate(rr, answers)  # the coin answers have exactly rr's distribution
    low, high = estimate.confidence_interval(0.95, scale="frequency")
    share, se = float(estimate.frequencies[1]), float(np.sqrt(estimate.frequency_variance[1]))
    print(f"\n{n:,} respondents toss the two coins:")
    print(f"  share of 'yes' answers        {answers.mean():.4f}  (biased towards 1/2)")
    print(f"  estimate (ȳ − 1/4)/(1/2)      {share:.4f} ± {se:.4f}  (standard error √(3/(4n)))")
    print(f"  95% confidence interval       [{low[1]:.4f}, {high[1]:.4f}]")
    print(f"  true share                    {population.mean():.4f}")
    return Result(
        coin_yes_given=coin,
        rr_yes_given=exact_rr,
        epsilon=rr.privacy.epsilon,
        n=n,
        yes_reports=int(answers.sum()),
        true_share=float(population.mean()),
        estimated_share=share,
        standard_error=se,
        interval=(float(low[1]), float(high[1])),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    main(args.seed, args.n)

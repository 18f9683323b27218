"""The 100-person survey: 30 "yes" answers out of 100, so about 10% — but how sure is that?

Source: seed 004 ("举例说明", after Dwork & Roth 2014, Section 3.2). 100 people answer "have you
ever broken the law?" with the two-coin protocol (heads: the truth; tails: a fair random
yes/no), which is randomized response keeping the truth with probability p = 3/4 (ε = ln 3).
30 answers are "yes". The notes reason: about 50 answers are random, 25 of them "yes", so
30 − 25 = 5 of the ~50 truthful answers are "yes", hence about 10%. That is exactly the unbiased
estimator (Warner 1965; Wang et al. 2017, Theorem 2 with k = 2):

    π̂ = (s/n − (1 − p)) / (2p − 1) = (0.30 − 0.25) / 0.5 = 0.10,
    Var[π̂] = p(1 − p) / (n (2p − 1)²) = (3/16) / (100 · 1/4) = 0.0075,   sd ≈ 0.087,

given the 100 people's true answers. If the 100 are a random sample from a larger population
and π is that population's share, Warner's variance adds the sampling term π(1 − π)/n.

The honest remark: at n = 100 the 95% interval is 0.10 ± 0.17, i.e. from "nobody" to about a
quarter of the group: the privacy noise alone has variance p(1 − p)/(2p − 1)² = 3/4 per person,
against π(1 − π) = 0.09 for a direct question. The script prints how many respondents a
±5-point interval would need and checks the variance and the interval's coverage by simulating
the survey many times (fast mode, seeded).

Run: ``python examples/ldp/hundred_person_survey.py [--trials 20000] [--seed 2026]``
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

import dpkit

N = 100
YES_ANSWERS = 30  # the seed's observed answers
Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


@dataclass(frozen=True)
class Result:
    """What the example computed (the tests check these)."""

    estimated_share: float
    variance: float
    interval: tuple[float, float]
    respondents_for_five_points: int
    simulated_true_share: float
    simulated_mean: float
    simulated_variance: float
    simulated_coverage: float
    negative_share: float
    trials: int


def main(seed: int = 2026, trials: int = 20_000) -> Result:
    rng = np.random.default_rng(seed)
    rr = dpkit.mechanism("rr", keep=0.75)
    p = rr.keep_probability

    # 1. The seed's numbers: 70 "no" and 30 "yes" reports. FrequencyCounts is the estimator's
    #    sufficient statistic, so the published totals are enough.
    counts = dpkit.plugin.FrequencyCounts("rr", [N - YES_ANSWERS, YES_ANSWERS], N)
    estimate = dpkit.estimate(rr, counts)
    share = float(estimate.frequencies[1])
    variance = float(estimate.frequency_variance[1])
    # The normal interval π̂ ± z·sd (for binary RR also the score interval), named: with
    # n·p(1 − p) < 50 the default is the exact interval from the counts' law (printed below).
    low, high = estimate.confidence_interval(0.95, scale="frequency", method="score")
    exact = estimate.confidence_interval(0.95, scale="frequency")
    print(
        f"{N} respondents, {YES_ANSWERS} 'yes' answers, randomized response with p = {p} (ε = ln 3)"
    )
    print(f"  estimated share        π̂ = ({YES_ANSWERS / N} − {1 - p}) / {2 * p - 1} = {share:.3f}")
    print(
        f"  variance               p(1 − p)/(n(2p − 1)²) = {variance:.4f}  (sd {variance**0.5:.3f})"
    )
    print(f"  95% interval           [{low[1]:.3f}, {high[1]:.3f}]  (normal)")
    print(f"  exact 95% interval     [{exact[0][1]:.3f}, {exact[1][1]:.3f}]  (the default here)")
    direct = share * (1 - share) / N
    print(
        f"  a direct (non-private) question with the same result would have sd {direct**0.5:.3f};\n"
        f"  if the 100 are a sample of a larger population, RR's sd is {(variance + direct) ** 0.5:.3f}"
    )
    needed = math.ceil((Z95 / 0.05) ** 2 * p * (1 - p) / (2 * p - 1) ** 2)
    needed_direct = math.ceil((Z95 / 0.05) ** 2 * share * (1 - share))
    print(
        f"  honest remark: with n = {N} the interval runs from below zero to about a quarter;\n"
        f"  a ±0.05 interval needs n ≥ {needed:,} respondents (a direct question: {needed_direct})."
    )

    # 2. Simulate the survey: a group of 100 with 10 true "yes", surveyed `trials` times.
    truth = np.zeros(N, dtype=np.uint8)
    truth[:10] = 1
    reports = rr.randomize(np.broadcast_to(truth, (trials, N)), rng=rng)
    shares = (reports.mean(axis=1) - (1 - p)) / (2 * p - 1)
    half = Z95 * math.sqrt(variance)
    coverage = float(np.mean(np.abs(shares - truth.mean()) <= half))
    print(f"\nsimulation: the same 100 people (10 true 'yes') surveyed {trials:,} times")
    print(f"  mean of the estimates     {shares.mean():.4f}  (truth {truth.mean():.2f}: unbiased)")
    print(f"  variance of the estimates {shares.var():.4f}  (formula {variance:.4f})")
    print(f"  95% intervals covering    {coverage:.3f}")
    print(f"  negative estimates        {np.mean(shares < 0):.3f} of the surveys")
    return Result(
        estimated_share=share,
        variance=variance,
        interval=(float(low[1]), float(high[1])),
        respondents_for_five_points=needed,
        simulated_true_share=float(truth.mean()),
        simulated_mean=float(shares.mean()),
        simulated_variance=float(shares.var()),
        simulated_coverage=coverage,
        negative_share=float(np.mean(shares < 0)),
        trials=trials,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    main(args.seed, args.trials)

"""Which of two diseases is more common? (Dwork & Roth 2014, Example 3.6)

Disease A has true count 0 and disease B count c > 0. The utility of a disease is its count
(Δu = 1). The exponential mechanism reports A with probability 1/(1 + e^(cε/2)), and Corollary
3.12 bounds that by 2e^(−cε/2). Counts are monotone, so report-noisy-max with Lap(1/ε)
(Dwork & Roth Claim 3.9) and permute-and-flip with rate ε are also ε-DP; they are shown for
comparison, with the exponential mechanism's monotone variant (∝ e^(ε·u)).

Run: ``python examples/central/two_diseases.py``
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import dpkit


def main(seed: int = 2026, trials: int = 100_000) -> None:
    rng = np.random.default_rng(seed)
    epsilon = 0.5
    print(f"ε = {epsilon}; Pr[report A (count 0) instead of B (count c)], {trials} trials each\n")
    header = "  c | bound 2e^(−cε/2) | exponential exact | sampled | monotone EM | RNM   | PF"
    print(header)
    em = dpkit.mechanism("exponential", epsilon=epsilon)
    em_mono = dpkit.mechanism("exponential", epsilon=epsilon, monotone=True)
    rnm = dpkit.mechanism("report_noisy_max", epsilon=epsilon, monotone=True)
    pf = dpkit.mechanism("permute_and_flip", epsilon=epsilon, monotone=True)
    for c in (1, 2, 5, 10, 20):
        u = np.array([0.0, float(c)])
        batch = np.tile(u, (trials, 1))
        exact = math.exp(em.log_probability(0, u))
        sampled = np.mean(em.randomize(batch, rng=rng) == 0)
        mono = math.exp(em_mono.log_probability(0, u))
        noisy_max = np.mean(rnm.randomize(batch, rng=rng) == 0)
        flip = math.exp(pf.log_probability(0, u))
        print(
            f" {c:2d} | {min(1.0, 2 * math.exp(-c * epsilon / 2)):16.4f} | {exact:17.4f} | "
            f"{sampled:7.4f} | {mono:11.4f} | {noisy_max:.4f} | {flip:.4f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2026)
    main(parser.parse_args().seed)

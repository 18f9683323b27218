"""A small privacy-preserving survey: each respondent randomizes their own answer.

Run: ``./scripts/demo`` (or ``python examples/survey.py`` with dpkit installed).
"""

from __future__ import annotations

import math

import numpy as np

import dpkit


def main(seed: int = 2026) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000

    # A yes/no question with Warner's two-coin design: keep the truth with probability 3/4 (ε = ln 3).
    smokes = (rng.random(n) < 0.23).astype(np.uint8)
    rr = dpkit.mechanism("rr", keep=0.75)
    answers = rr.randomize(smokes, rng=rng)
    estimate = dpkit.estimate(rr, answers)
    low, high = estimate.confidence_interval(0.95, scale="frequency")
    print(
        f"Do you smoke?  {n} respondents, randomized response with ε = ln 3 = {rr.privacy.epsilon:.4f}"
    )
    print(f"  raw 'yes' share in the reports : {answers.mean():.4f}")
    print(
        f"  estimated share of smokers     : {estimate.frequencies[1]:.4f}  (95% CI {low[1]:.4f} .. {high[1]:.4f})"
    )
    print(f"  true share                     : {smokes.mean():.4f}")
    print()

    # A multiple-choice question with k-ary randomized response at ε = 1.
    options = ["bus", "bike", "car", "train", "walk"]
    shares = np.array([0.30, 0.25, 0.20, 0.15, 0.10])
    commute = rng.choice(options, size=n, p=shares)
    krr = dpkit.mechanism("krr", epsilon=1.0, categories=options)
    reports = krr.randomize(commute, rng=rng)
    estimate = dpkit.estimate(krr, reports)
    low, high = estimate.confidence_interval(0.95)
    truth = {option: int(np.count_nonzero(commute == option)) for option in options}
    print(f"How do you commute?  k-ary randomized response, ε = {krr.privacy.epsilon}, k = {krr.k}")
    print(f"  {'option':<7}{'true':>7}{'estimate':>10}   95% confidence interval")
    for i, option in enumerate(options):
        print(
            f"  {option:<7}{truth[option]:>7}{estimate.estimates[i]:>10.0f}   [{low[i]:.0f}, {high[i]:.0f}]"
        )
    covered = sum(low[i] <= truth[o] <= high[i] for i, o in enumerate(options))
    print(
        f"  {covered} of {len(options)} intervals cover the truth; "
        f"the standard error is ±{math.sqrt(estimate.variance.mean()):.0f} people per option"
    )


if __name__ == "__main__":
    main()

"""A private mean, median, count and histogram of a small CSV (examples/data/survey.csv).

Each query derives its own sensitivity from its declared bounds or categories; the analyst
never states a sensitivity. Three ages are missing: the mean and median drop them
(``nan="drop"``), so those records are neither counted nor summed. The four releases together
cost the sum of their ε (basic composition, Dwork & Roth 2014, Theorem 3.14).

Run: ``python examples/central/survey_statistics.py``
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from dpkit_central import Count, Histogram, Mean, Quantile

DATA = Path(__file__).resolve().parent.parent / "data" / "survey.csv"
REGIONS = ("north", "south", "east", "west")


def load() -> tuple[np.ndarray, np.ndarray]:
    with DATA.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    ages = np.array([float(r["age"]) if r["age"] else np.nan for r in rows])
    regions = np.array([r["region"] for r in rows])
    return ages, regions


def main(seed: int = 2026) -> None:
    rng = np.random.default_rng(seed)
    ages, regions = load()
    queries = {
        "respondents": (Count(epsilon=0.25), regions),
        "mean age": (Mean(lower=18, upper=100, epsilon=0.5, nan="drop"), ages),
        "median age": (Quantile(q=0.5, lower=18, upper=100, epsilon=0.25, nan="drop"), ages),
        "region histogram": (Histogram(categories=REGIONS, epsilon=0.5), regions),
    }
    total = 0.0
    for label, (query, column) in queries.items():
        result = query.run(column, rng=rng)
        total += result.privacy.epsilon
        value = result.value
        shown = (
            ", ".join(f"{c}={int(v)}" for c, v in zip(result.categories, value, strict=True))
            if result.categories
            else f"{value:.2f}"
        )
        print(f"{label:17s} ε={result.privacy.epsilon:<5g} {shown}")
    print(f"total ε spent: {total:g}")
    valid = ages[~np.isnan(ages)]
    print(
        f"(not private, for comparison: n={len(regions)}, mean age {valid.mean():.2f}, "
        f"median {np.median(valid):.1f}, regions "
        + ", ".join(f"{c}={int(np.sum(regions == c))}" for c in REGIONS)
        + ")"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2026)
    main(parser.parse_args().seed)

"""Central mechanisms against the numpy floor, measured side by side in the same run.

Run: ``nice .venv/bin/python benchmarks/bench_central.py [--n 1000000] [--repeat 7]``

* laplace / gaussian on n = 10^6 answers: the floor is the noise draw alone
  (``rng.laplace(0, b, n)`` / ``rng.normal(0, σ, n)``); dpkit also validates the answers and adds.
* exponential mechanism, 1,000 selections of 1 of 10,000 candidates, two ways:
  (a) a batch of 1,000 *different* utility rows (1,000 datasets), against the same algorithm in
      bare numpy (subtract the row max, exp, cumsum, one uniform per row, count) and against a
      Gumbel-max baseline;
  (b) 1,000 draws from *one* utility row (``size=1000``), against ``rng.choice(p=softmax)``
      and against the per-draw loop of the central-peers benchmark (softmax recomputed from the
      scores and ``rng.choice`` called once per draw).
* diffprivlib and OpenDP, when importable, through their own APIs: diffprivlib's per-value
  ``randomise`` on a subset extrapolated linearly (marked *), its ``Exponential`` built once
  and drawn 1,000 times. They do not install next to each other cleanly (see
  ../shared/reference/central-peers.md); use a separate environment, e.g.

      python -m venv /tmp/peers-central
      /tmp/peers-central/bin/pip install diffprivlib==0.6.6 scikit-learn==1.8.0 pluggy attrs jsonschema
      /tmp/peers-central/bin/pip install --no-deps -e .
      /tmp/peers-central/bin/python benchmarks/bench_central.py

Ratios are implementation / floor (1.0 = the floor; lower is better).
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
from _timing import best_time, side_by_side

import dpkit


def numpy_exponential_batch(
    scores: np.ndarray, rate: float, rng: np.random.Generator
) -> np.ndarray:
    """The same inverse-CDF algorithm as dpkit, with no validation."""
    w = np.exp(rate * (scores - scores.max(axis=1, keepdims=True)))
    np.cumsum(w, axis=1, out=w)
    target = rng.random(len(w)) * w[:, -1]
    return np.count_nonzero(w <= target[:, None], axis=1)


def numpy_gumbel_batch(scores: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(rate * scores + rng.gumbel(size=scores.shape), axis=1)


def softmax(scores: np.ndarray, rate: float) -> np.ndarray:
    w = np.exp(rate * (scores - scores.max()))
    return w / w.sum()


def diffprivlib_rows(
    values: np.ndarray,
    b: float,
    sigma: float,
    delta: float,
    scores: np.ndarray,
    rate: float,
    subset: int,
) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = []
    try:
        from diffprivlib.mechanisms import Exponential, GaussianAnalytic, Laplace
    except Exception as error:  # ImportError, or sklearn-internal breakage (see the peers note)
        return [("all", f"diffprivlib (not importable: {type(error).__name__})", math.nan)]
    n = len(values)
    sample = values[:subset].tolist()
    lap = Laplace(epsilon=1.0 / b, sensitivity=1.0)
    rows.append(
        (
            "laplace",
            "diffprivlib Laplace.randomise*",
            best_time(lambda: [lap.randomise(v) for v in sample]) * n / subset,
        )
    )
    gauss = GaussianAnalytic(epsilon=1.0, delta=delta, sensitivity=1.0)
    rows.append(
        (
            "gaussian",
            f"diffprivlib GaussianAnalytic.randomise (σ={gauss._scale:.3f})*",
            best_time(lambda: [gauss.randomise(v) for v in sample]) * n / subset,
        )
    )
    candidates = len(scores)
    # diffprivlib's utility convention: Pr ∝ exp(ε·u/(2Δ)); ε = 2·rate·Δ with Δ = 1.
    expo = Exponential(
        epsilon=2 * rate,
        sensitivity=1.0,
        utility=scores.tolist(),
        candidates=list(range(candidates)),
    )
    draws = 1000
    rows.append(
        (
            "exp (b)",
            "diffprivlib Exponential, built once, 1,000 draws",
            best_time(lambda: [expo.randomise() for _ in range(draws)]),
        )
    )
    return rows


def opendp_rows(values: np.ndarray, b: float, subset: int) -> list[tuple[str, str, float]]:
    try:
        import opendp.prelude as dp
    except Exception as error:
        return [("all", f"opendp (not importable: {type(error).__name__})", math.nan)]
    try:
        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
        meas = space >> dp.m.then_laplace(scale=b)
        sample = values[:subset].tolist()
        seconds = best_time(lambda: meas(sample)) * len(values) / subset
        return [("laplace", "opendp make_laplace (vector)*", seconds)]
    except Exception as error:  # API drift across versions: report, do not crash
        return [("laplace", f"opendp failed: {type(error).__name__}: {error}"[:60], math.nan)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--selections", type=int, default=1_000)
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--peer-subset", type=int, default=20_000)
    args = parser.parse_args()
    n, epsilon, delta = args.n, 1.0, 1e-6
    rng = np.random.default_rng(1)
    values = rng.normal(100.0, 10.0, n)

    laplace = dpkit.mechanism("laplace", epsilon=epsilon, sensitivity=1.0)
    start = time.perf_counter()
    gaussian = dpkit.mechanism("gaussian", epsilon=epsilon, delta=delta, sensitivity=1.0)
    calibration = time.perf_counter() - start
    b, sigma = laplace.scale, gaussian.sigma

    exponential = dpkit.mechanism("exponential", epsilon=epsilon, sensitivity=1.0)
    rate = exponential.rate
    m, k = args.candidates, args.selections
    batch = rng.normal(0.0, 20.0, size=(k, m))
    row = batch[0]

    def peer_loop() -> None:
        for _ in range(k):
            rng.choice(m, p=softmax(row, rate))

    labels = {
        "laplace": ("numpy floor: rng.laplace(0, b, n)", "dpkit laplace.randomize"),
        "gaussian": ("numpy floor: rng.normal(0, σ, n)", "dpkit gaussian.randomize"),
        "exp (a)": ("numpy: same inverse-CDF algorithm", "dpkit exponential, 1,000-row batch"),
        "exp (b)": ("numpy: rng.choice(m, 1000, p=softmax)", "dpkit exponential, size=1000"),
    }
    timed = side_by_side(
        {
            labels["laplace"][0]: lambda: rng.laplace(0.0, b, n),
            labels["laplace"][1]: lambda: laplace.randomize(values, rng=rng),
            labels["gaussian"][0]: lambda: rng.normal(0.0, sigma, n),
            labels["gaussian"][1]: lambda: gaussian.randomize(values, rng=rng),
            labels["exp (a)"][0]: lambda: numpy_exponential_batch(batch, rate, rng),
            labels["exp (a)"][1]: lambda: exponential.randomize(batch, rng=rng),
            "numpy: Gumbel-max arg-max": lambda: numpy_gumbel_batch(batch, rate, rng),
            labels["exp (b)"][0]: lambda: rng.choice(m, k, p=softmax(row, rate)),
            labels["exp (b)"][1]: lambda: exponential.randomize(row, rng=rng, size=k),
        },
        args.repeat,
    )
    loop_label = "numpy: per-draw softmax + rng.choice loop"
    timed[loop_label] = best_time(peer_loop, 3)

    rows: list[tuple[str, str, float, float]] = []
    for group, (floor_label, ours_label) in labels.items():
        floor = timed[floor_label]
        rows.append((group, floor_label, floor, floor))
        rows.append((group, ours_label, timed[ours_label], floor))
        if group == "exp (a)":
            rows.append(
                (group, "numpy: Gumbel-max arg-max", timed["numpy: Gumbel-max arg-max"], floor)
            )
        if group == "exp (b)":
            rows.append((group, loop_label, timed[loop_label], floor))

    peers = diffprivlib_rows(values, b, sigma, delta, row, rate, args.peer_subset)
    peers += opendp_rows(values, b, args.peer_subset)
    ours_by_group = {group: timed[labels[group][1]] for group in labels}
    floor_by_group = {group: timed[labels[group][0]] for group in labels}
    for group, label, seconds in peers:
        rows.append((group, label, seconds, floor_by_group.get(group, math.nan)))

    print(
        f"# dpkit {dpkit.__version__} | numpy {np.__version__} | python {platform.python_version()}"
        f" | n = {n:,} | ε = {epsilon}, δ = {delta} | exponential: {k:,} × 1 of {m:,}"
    )
    print(f"# gaussian σ = {sigma:.6f} (analytic calibration took {calibration * 1e3:.2f} ms)")
    print(f"| {'group':<8} | {'implementation':<52} | {'seconds':>9} | {'ratio to floor':>14} |")
    print(f"|{'-' * 10}|{'-' * 54}|{'-' * 11}|{'-' * 16}|")
    for group, label, seconds, floor in rows:
        ratio = seconds / floor if math.isfinite(seconds) and math.isfinite(floor) else math.nan
        print(f"| {group:<8} | {label:<52} | {seconds:>9.4f} | {ratio:>14.2f} |")
    print("* per-value API timed on a subset and extrapolated linearly to n")
    for group, label, seconds in peers:
        if math.isfinite(seconds) and group in ours_by_group:
            print(
                f"{group}: dpkit is {seconds / ours_by_group[group]:,.0f}x faster than {label.rstrip('*')}"
            )


if __name__ == "__main__":
    main()

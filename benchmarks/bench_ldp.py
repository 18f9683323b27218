"""Local-DP frequency oracles: speed against the numpy floor, accuracy against the theory, memory.

Run: ``nice .venv/bin/python benchmarks/bench_ldp.py [--n 1000000] [--repeat 3] [--trials 200]
[--report-seconds 8] [--numeric-only] [--numeric-trials 200]``

Sections (all at ε = 1 unless stated):

1. Report-level perturbation of n users: sue/oue (k = 64) and olh (k = 1024), with the numpy
   floor measured in the same run, interleaved. The UE floor is the least a float-based
   implementation does: ``rng.random((rows, k)) < q`` in blocks of 2^17 rows, the true column
   overwritten by ``rng.random(rows) < p`` (unpacked bools; packing would cost more). The OLH
   floor draws the per-user seeds (two 64-bit words), hashes each value once and applies g-ary
   RR. Ratios are dpkit / floor (lower is better). The peers (pure-ldp, multi-freq-ldpy) are
   timed in ``bench_foundation.py``, in their own environment and with the same harness as
   dpkit (``benchmarks/peers/``).

2. Aggregation (reports → support counts) for the same reports.
3. Accuracy: empirical MSE / theoretical variance of the unbiased frequency estimates for
   krr (k = 16), sue/oue (k = 64), olh (k = 1024), hr (k = 64), Zipf(1.1) data, n users. The
   theory is the exact Var[f̂_v] of Wang et al. 2017, Theorem 2, averaged over categories; the
   ratio pools (f̂_v − f_v)²/Var[f̂_v] over trials and categories (± = its standard error, see
   ``trial_standard_error``). Count-level simulation gives ``--trials``
   trials (exact for krr, ue, hr; exact marginals for olh); report-level trials (as many as fit in
   ``--report-seconds`` per protocol) run the real randomizer and estimator end to end.
4. Coverage of the 95% confidence intervals over repeated count-level trials.
5. Count-level simulation of 10⁹ users: time per draw.
6. Peak traced memory (tracemalloc) for n users, k = 1024 UE: randomize + accumulate.
7. Numeric protocols (issue 18; :mod:`_ldp_numeric`): perturbation of n values (n/8 rows of
   d = 8 for the vector protocols) at ε = 4 in fast and secure mode against the numpy floor;
   MSE of the mean against ε next to the papers' variance at the same data and the worst case
   (``--numeric-trials`` report-level runs each, n = 20,000 users); count-level simulation of
   10⁹ users (duchi, sw). ``--numeric-only`` runs this section alone. No peer library implements
   these protocols (see :mod:`_ldp_numeric`).
"""

from __future__ import annotations

import argparse
import math
import platform
import time
import tracemalloc
from functools import partial

import _ldp_numeric
import dpkit_ldp
import numpy as np
from _timing import side_by_side
from dpkit_ldp.datasets import distribution_probabilities

import dpkit

EPSILON = 1.0


def simulate_and_estimate(
    mech: dpkit.Mechanism, counts: np.ndarray, rng: np.random.Generator
) -> dpkit.Estimate:
    return dpkit.estimate(mech, dpkit_ldp.simulate_counts(mech, counts, rng=rng))


def ue_floor(
    values: np.ndarray, k: int, p: float, q: float, rng: np.random.Generator
) -> np.ndarray:
    n = values.size
    out = np.empty((n, k), dtype=bool)
    block = 1 << 17
    for start in range(0, n, block):
        stop = min(n, start + block)
        bits = rng.random((stop - start, k)) < q
        bits[np.arange(stop - start), values[start:stop]] = rng.random(stop - start) < p
        out[start:stop] = bits
    return out


def olh_floor(values: np.ndarray, g: int, keep: float, rng: np.random.Generator) -> np.ndarray:
    seeds = rng.integers(0, 2**64 - 1, size=(values.size, 2), dtype=np.uint64, endpoint=True)
    with np.errstate(over="ignore"):
        h = ((seeds[:, 0] * values.astype(np.uint64) + seeds[:, 1]) >> np.uint64(32)) * np.uint64(g)
    h >>= np.uint64(32)
    lie = rng.random(values.size) >= keep
    other = rng.integers(0, g - 1, size=values.size, dtype=np.uint64)
    other += other >= h
    return np.where(lie, other, h)


def print_table(title: str, rows: list[list[str]], headers: list[str]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def trial_standard_error(z2: list[np.ndarray]) -> float:
    """Standard error of the pooled mean of (f̂_v − f_v)²/Var over trials.

    From the spread of the per-trial means when there are ≥ 10 trials (valid whatever the
    correlation between categories); with fewer, sqrt(2/(trials·k)), which assumes independent
    categories and understates the error for krr, hr and olh, whose categories are correlated.
    """
    means = np.array([row.mean() for row in z2])
    if means.size >= 10:
        return float(means.std(ddof=1) / math.sqrt(means.size))
    return math.sqrt(2 / sum(row.size for row in z2))


def exact_frequency_variance(mech: dpkit.Mechanism, freqs: np.ndarray, n: int) -> np.ndarray:
    p, q = mech.support_probabilities  # type: ignore[attr-defined]
    return (q * (1 - q) / (p - q) ** 2 + freqs * (1 - p - q) / (p - q)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description="dpkit LDP frequency-oracle benchmark")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument(
        "--report-seconds",
        type=float,
        default=8.0,
        help="time budget per protocol for report-level trials (at least 3, at most 300)",
    )
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--numeric-only", action="store_true", help="run section 7 alone")
    parser.add_argument("--numeric-trials", type=int, default=200)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(args.seed)
    print(f"# dpkit LDP benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# python {platform.python_version()} | numpy {np.__version__} | {platform.machine()}")
    print(f"# n={n:,} eps={EPSILON} repeat={args.repeat} trials={args.trials} seed={args.seed}")
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    if not args.numeric_only:
        frequency_oracles(args, rng)
    numeric_protocols(args, rng)
    print(
        f"\ntotal wall {time.perf_counter() - wall_start:.1f} s, process CPU {time.process_time() - cpu_start:.1f} s"
    )


def numeric_protocols(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """Section 7 (see the module docstring)."""
    d = 8
    print_table(
        f"Numeric perturbation, {args.n:,} values at ε = 4 (wall seconds, best of {args.repeat})",
        _ldp_numeric.speed_rows(args.n, d, args.repeat, rng),
        ["protocol", "fast s", "secure s", "numpy floor s", "fast / floor", "secure / fast"],
    )
    print_table(
        f"Mean estimates: MSE over {args.numeric_trials} runs vs the papers' variance at the data",
        _ldp_numeric.accuracy_rows(20_000, d, [0.5, 1.0, 2.0, 4.0, 8.0], args.numeric_trials, rng),
        ["protocol", "ε", "users", "MSE", "variance at data", "worst case", "MSE / variance"],
    )
    print_table(
        "Count-level simulation of 10^9 users (mean of 5 draws)",
        _ldp_numeric.simulation_rows(rng),
        ["protocol", "users", "ms per draw"],
    )
    print("\n" + _ldp_numeric.peer_note())


def frequency_oracles(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """Sections 1–6 (see the module docstring)."""
    n = args.n

    # 1-2. Perturbation and aggregation ----------------------------------------------------------
    speed_rows: list[list[str]] = []
    for name, k in (("sue", 64), ("oue", 64)):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=k)
        values = dpkit_ldp.synthetic("zipf", n=n, k=k, rng=rng).values
        p, q = mech.keep_probability, mech.other_probability  # type: ignore[attr-defined]
        times = side_by_side(
            {
                "dpkit": partial(mech.randomize, values, rng=rng),
                "floor": partial(ue_floor, values, k, p, q, rng),
            },
            args.repeat,
        )
        reports = mech.randomize(values, rng=rng)
        estimator = dpkit.get_registry().estimator(mech)
        agg = side_by_side({"agg": partial(estimator.accumulate, reports)}, args.repeat)["agg"]
        speed_rows.append(
            [
                f"{name} randomize (k={k}, packed)",
                f"{times['dpkit']:.3f}",
                f"{times['floor']:.3f}",
                f"{times['dpkit'] / times['floor']:.2f}",
            ]
        )
        speed_rows.append([f"{name} accumulate (k={k})", f"{agg:.3f}", "", ""])
    k = 1024
    olh = dpkit.mechanism("olh", epsilon=EPSILON, k=k)
    values = dpkit_ldp.synthetic("zipf", n=n, k=k, rng=rng).values
    times = side_by_side(
        {
            "dpkit": partial(olh.randomize, values, rng=rng),
            "floor": partial(olh_floor, values, olh.range, olh.keep_probability, rng),  # type: ignore[attr-defined]
        },
        args.repeat,
    )
    speed_rows.append(
        [
            f"olh randomize (k={k}, g={olh.range})",
            f"{times['dpkit']:.3f}",
            f"{times['floor']:.3f}",
            f"{times['dpkit'] / times['floor']:.2f}",
        ]
    )  # type: ignore[attr-defined]
    olh_reports = olh.randomize(values, rng=rng)
    start = time.perf_counter()
    dpkit.get_registry().estimator(olh).accumulate(olh_reports)
    speed_rows.append(
        [
            f"olh accumulate (k={k}, {n * k:.2g} hashes)",
            f"{time.perf_counter() - start:.3f}",
            "",
            "",
        ]
    )
    print_table(
        f"Perturbation and aggregation, n = {n:,} (wall seconds, best of {args.repeat})",
        speed_rows,
        ["operation", "dpkit s", "numpy floor s", "dpkit / floor"],
    )

    # 3-4. Accuracy and coverage -------------------------------------------------------------------
    accuracy_rows: list[list[str]] = []
    coverage_rows: list[list[str]] = []
    for name, k in (("krr", 16), ("sue", 64), ("oue", 64), ("olh", 1024), ("hr", 64)):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=k)
        data = dpkit_ldp.synthetic("zipf", n=n, k=k, rng=rng)
        freqs = data.histogram / n
        var = exact_frequency_variance(mech, freqs, n)
        z2 = []
        covered = 0
        for _ in range(args.trials):
            est = dpkit.estimate(mech, dpkit_ldp.simulate_counts(mech, data.histogram, rng=rng))
            z2.append((est.frequencies - freqs) ** 2 / var)
            low, high = est.confidence_interval(0.95)
            covered += int(np.sum((low <= data.histogram) & (data.histogram <= high)))
        z2_all = np.concatenate(z2)
        se = trial_standard_error(z2)
        var_star = type(mech).frequency_variance(k=k, epsilon=EPSILON, n=n)  # type: ignore[attr-defined]
        accuracy_rows.append(
            [
                name,
                str(k),
                "count-level",
                str(args.trials),
                f"{np.mean(np.stack(z2) * var):.4e}",
                f"{var.mean():.4e}",
                f"{var_star:.4e}",
                f"{z2_all.mean():.3f} ± {se:.3f}",
            ]
        )
        coverage_rows.append(
            [name, str(k), str(args.trials * k), f"{100 * covered / (args.trials * k):.2f}%"]
        )
        z2_reports = []
        start = time.perf_counter()
        while len(z2_reports) < 3 or (
            len(z2_reports) < 300 and time.perf_counter() - start < args.report_seconds
        ):
            est = dpkit.estimate(mech, mech.randomize(data.values, rng=rng))
            z2_reports.append((est.frequencies - freqs) ** 2 / var)
        report_trials = len(z2_reports)
        elapsed = (time.perf_counter() - start) / report_trials
        zr = np.concatenate(z2_reports)
        accuracy_rows.append(
            [
                name,
                str(k),
                f"report-level ({elapsed:.1f} s/trial)",
                str(report_trials),
                f"{np.mean(np.stack(z2_reports) * var):.4e}",
                f"{var.mean():.4e}",
                f"{var_star:.4e}",
                f"{zr.mean():.3f} ± {trial_standard_error(z2_reports):.3f}",
            ]
        )
    print_table(
        f"Accuracy at n = {n:,}, ε = {EPSILON}: empirical MSE of f̂ / exact variance",
        accuracy_rows,
        [
            "protocol",
            "k",
            "trials of",
            "trials",
            "MSE (mean over v)",
            "exact Var (mean)",
            "Var*",
            "MSE / Var",
        ],
    )
    print_table(
        "95% confidence interval coverage (count-level trials)",
        coverage_rows,
        ["protocol", "k", "intervals", "coverage"],
    )

    # 5. Simulation of 10^9 users ------------------------------------------------------------------
    sim_rows: list[list[str]] = []
    for name, k in (
        ("krr", 16),
        ("sue", 64),
        ("oue", 64),
        ("olh", 1024),
        ("hr", 64),
        ("krr", 1024),
    ):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=k)
        probs = distribution_probabilities("zipf", k)
        counts = np.floor(probs * 1e9).astype(np.int64)
        best = side_by_side({"sim": partial(dpkit_ldp.simulate_counts, mech, counts, rng=rng)}, 5)[
            "sim"
        ]
        est_time = side_by_side(
            {"est": partial(simulate_and_estimate, mech, counts, rng)},
            3,
        )["est"]
        sim_rows.append(
            [name, str(k), f"{counts.sum():,}", f"{best * 1000:.2f}", f"{est_time * 1000:.2f}"]
        )
    print_table(
        "Count-level simulation of 10^9 users (best of 5)",
        sim_rows,
        ["protocol", "k", "users", "simulate ms", "simulate + estimate ms"],
    )

    # 6. Memory ---------------------------------------------------------------------------------
    mem_rows: list[list[str]] = []
    for name in ("sue", "oue"):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=1024)
        values = dpkit_ldp.synthetic("zipf", n=n, k=1024, rng=rng).values
        tracemalloc.start()
        reports = mech.randomize(values, rng=rng)
        _, peak_randomize = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        dpkit.get_registry().estimator(mech).accumulate(reports)
        _, peak_accumulate = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        mem_rows.append(
            [
                name,
                f"{reports.nbytes / 2**20:.1f}",
                f"{peak_randomize / 2**20:.1f}",
                f"{peak_accumulate / 2**20:.1f}",
            ]
        )
        del reports
    print_table(
        f"Peak traced memory, n = {n:,}, k = 1024 (MiB; input values not counted)",
        mem_rows,
        ["protocol", "reports", "peak in randomize", "peak in accumulate (reports held)"],
    )


if __name__ == "__main__":
    main()

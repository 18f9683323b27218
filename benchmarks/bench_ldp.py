"""Local-DP frequency oracles: speed against the numpy floor, accuracy against the theory, memory.

Run: ``nice .venv/bin/python benchmarks/bench_ldp.py [--n 1000000] [--repeat 3] [--trials 200]
[--report-seconds 8] [--numeric-only] [--numeric-trials 200] [--no-save]``

Every contender is timed by ``_timing.measure`` (one warm-up call, ``--repeat`` rounds in
rotated order, CPU and wall clock; ratios are medians of per-round CPU ratios). Writes sections
``ldp`` (1), ``ldp_accuracy`` (2–6) and ``ldp_numeric`` (7) of ``benchmarks/results.json``
(``--numeric-only``: ``ldp_numeric`` alone; ``--no-save`` prints only). Parts (all at ε = 1
unless stated):

1. Report-level perturbation of n users: sue/oue (k = 64) and olh (k = 1024): the numpy
   floor, dpkit in fast mode (a seeded ``Generator``) and in secure mode (``rng=None``) in one
   ``measure`` call. The UE floor is the least a float-based
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
5. Count-level simulation of 10⁹ users: CPU time per draw.
6. Peak traced memory (tracemalloc) for n users, k = 1024 UE: randomize + accumulate.
7. Numeric protocols (:mod:`_ldp_numeric`): perturbation of n values (n/8 rows of
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
import sys
import time
import tracemalloc
from functools import partial
from typing import Any

import _ldp_numeric
import dpkit_ldp
import numpy as np
from _results import FLOOR_COLUMNS, RATIOS_NOTE, Run, floor_row
from _timing import measure
from dpkit_ldp.datasets import distribution_probabilities

import dpkit

EPSILON = 1.0
#: ``rng=None`` is secure mode (dpkit.randomness.modes), as in bench_central.py.
SECURE: Any = None


def simulate_and_estimate(
    mech: dpkit.plugin.Mechanism, counts: np.ndarray, rng: np.random.Generator
) -> dpkit.plugin.Estimate:
    estimate: dpkit.plugin.Estimate = dpkit.estimate(
        mech, dpkit_ldp.simulate_counts(mech, counts, rng=rng)
    )
    return estimate


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
    reports: np.ndarray = np.where(lie, other, h)
    return reports


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


def exact_frequency_variance(mech: dpkit.plugin.Mechanism, freqs: np.ndarray, n: int) -> np.ndarray:
    p, q = mech.support_probabilities  # type: ignore[attr-defined]
    variance: np.ndarray = (q * (1 - q) / (p - q) ** 2 + freqs * (1 - p - q) / (p - q)) / n
    return variance


def main() -> None:
    parser = argparse.ArgumentParser(description="dpkit LDP frequency-oracle benchmark")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (_timing.measure)")
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
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(args.seed)
    command = ("python benchmarks/bench_ldp.py " + " ".join(sys.argv[1:])).strip()
    harness = {"rounds": args.repeat, "warmup": 1}
    print(f"# dpkit LDP benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# python {platform.python_version()} | numpy {np.__version__} | {platform.machine()}")
    print(f"# n={n:,} eps={EPSILON} repeat={args.repeat} trials={args.trials} seed={args.seed}")
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    if not args.numeric_only:
        frequency_oracles(args, rng, command, harness)
    numeric_protocols(args, rng, command, harness)
    print(
        f"\ntotal wall {time.perf_counter() - wall_start:.1f} s, "
        f"process CPU {time.process_time() - cpu_start:.1f} s"
    )


SHARED = "Measured on a shared 2-core machine: quote the ratios, not the milliseconds."


def numeric_protocols(
    args: argparse.Namespace, rng: np.random.Generator, command: str, harness: dict[str, int]
) -> None:
    """Section 7 (see the module docstring): section ``ldp_numeric`` of results.json."""
    run = Run("ldp_numeric", command, harness=harness)
    d = 8
    epsilons = [0.5, 1.0, 2.0, 4.0, 8.0]
    print(f"\n## Numeric perturbation, {args.n:,} values at ε = 4 (CPU, {args.repeat} rounds)")
    speed = _ldp_numeric.speed(args.n, d, args.repeat, rng)
    print(f"\n## Mean estimates: MSE over {args.numeric_trials} runs vs the variance at the data")
    accuracy = _ldp_numeric.accuracy(20_000, d, epsilons, args.numeric_trials, rng)
    print("\n## Count-level simulation of 10^9 users")
    simulated = _ldp_numeric.simulation(rng)
    print(simulated)
    rows = []
    for protocol, ratios in speed.items():
        mine = [r for r in accuracy if r["protocol"] == protocol]
        spread = (
            {
                "MSE ÷ variance, lowest": round(min(r["ratio"] for r in mine), 2),
                "MSE ÷ variance, highest": round(max(r["ratio"] for r in mine), 2),
                "largest ± (1 s.e.)": round(max(r["se"] for r in mine), 2),
            }
            if mine
            else {}
        )
        sim = {"simulate 10⁹ users, cpu ms": simulated[protocol]} if protocol in simulated else {}
        rows.append({"protocol": protocol, **ratios, **spread, **sim})
    note = _ldp_numeric.peer_note()
    print("\n" + note)
    if not args.no_save:
        run.save(
            title=f"Numeric protocols: {args.n:,} values at ε = 4 against the numpy floor; "
            "the mean's MSE against the papers' variance",
            columns=[
                "protocol",
                "floor cpu ms",
                "fast ÷ floor",
                "secure ÷ floor",
                "secure ÷ fast",
                "MSE ÷ variance, lowest",
                "MSE ÷ variance, highest",
                "largest ± (1 s.e.)",
                "simulate 10⁹ users, cpu ms",
            ],
            rows=rows,
            notes=[
                RATIOS_NOTE,
                f"Vector protocols: {args.n // d:,} rows of d = {d}. Floors: plain numpy written "
                "from each paper, without validation, scaling or (duchi_multi) the even-d redraws.",
                f"MSE of the mean over {args.numeric_trials} report-level runs of 20,000 users "
                f"(Beta(2, 5) data) ÷ the papers' variance at those data, lowest and highest over "
                f"ε = {', '.join(f'{e:g}' for e in epsilons)}; 1 is exact. sw estimates a "
                "distribution, not a mean.",
                "Simulation: count-level, 10⁹ users with 100 distinct values, CPU per draw.",
                note,
                SHARED,
            ],
        )


def frequency_oracles(
    args: argparse.Namespace, rng: np.random.Generator, command: str, harness: dict[str, int]
) -> None:
    """Sections 1–6 (see the module docstring): sections ``ldp`` (speed against the floor)
    and ``ldp_accuracy`` (accuracy, coverage, aggregation and simulation) of results.json."""
    n = args.n
    speed_run = Run("ldp", command, harness=harness)

    # 1. Perturbation: the floor, fast and secure mode in one measure call each -----------------
    print(f"\n## Perturbation, n = {n:,} (CPU, {args.repeat} rounds)\n")
    print(f"{'task':40s} {'floor ms':>9s} {'fast÷floor':>10s} {'secure÷floor':>12s}  floor")
    speed_rows = []
    reports: dict[str, np.ndarray] = {}
    for name, k in (("sue", 64), ("oue", 64), ("olh", 1024)):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=k)
        values = dpkit_ldp.synthetic("zipf", n=n, k=k, rng=rng).values
        if name == "olh":
            g, keep = mech.range, mech.keep_probability  # type: ignore[attr-defined]
            floor = partial(olh_floor, values, g, keep, rng)
            text, task = "seeds, one hash per value, g-ary RR", f"olh randomize, k = {k}, g = {g}"
        else:
            p, q = mech.keep_probability, mech.other_probability  # type: ignore[attr-defined]
            floor = partial(ue_floor, values, k, p, q, rng)
            text, task = "rng.random((rows, k)) < q, blocks of 2¹⁷", f"{name} randomize, k = {k}"
        timed = measure(
            {
                "floor": floor,
                "fast": partial(mech.randomize, values, rng=rng),
                "secure": partial(mech.randomize, values, rng=SECURE),
            },
            rounds=args.repeat,
        )
        speed_rows.append(floor_row(task, text, timed))
        reports[name] = mech.randomize(values, rng=rng)
    if not args.no_save:
        speed_run.save(
            title=f"Frequency oracles: perturbation of {n:,} users at ε = {EPSILON:g}",
            columns=FLOOR_COLUMNS,
            rows=speed_rows,
            notes=[
                RATIOS_NOTE,
                "UE floor: unpacked bools (packing would cost more), the true column overwritten "
                "by rng.random(rows) < p. OLH floor: two 64-bit seed words per user, one "
                "multiply-shift hash per value, g-ary randomized response. The peers are timed "
                "in the local DP section above (bench_foundation.py).",
                SHARED,
            ],
        )

    # 2–5. Aggregation, accuracy, coverage and simulation, one row per protocol -----------------
    accuracy_run = Run("ldp_accuracy", command, harness={**harness, "trials": args.trials})
    rows = []
    for name, k in (
        ("krr", 16),
        ("sue", 64),
        ("oue", 64),
        ("olh", 1024),
        ("hr", 64),
        ("krr", 1024),
    ):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=k)
        row: dict[str, object] = {"protocol": name, "k": k}
        if name in reports:
            estimator = dpkit.get_registry().estimator(mech)
            timed = measure(
                {"accumulate": partial(estimator.accumulate, reports[name])}, rounds=args.repeat
            )
            row["accumulate cpu ms"] = round(timed["accumulate"].cpu * 1e3, 1)
        if k <= 64 or name == "olh":
            row.update(accuracy(mech, args, rng))
        probs = distribution_probabilities("zipf", k)
        counts = np.floor(probs * 1e9).astype(np.int64)
        timed = measure(
            {
                "simulate": partial(dpkit_ldp.simulate_counts, mech, counts, rng=rng),
                "estimate": partial(simulate_and_estimate, mech, counts, rng),
            },
            rounds=5,
        )
        row["simulate 10⁹ users, cpu ms"] = round(timed["simulate"].cpu * 1e3, 2)
        row["simulate + estimate, cpu ms"] = round(timed["estimate"].cpu * 1e3, 2)
        print("  ".join(f"{key} {value}" for key, value in row.items()))
        rows.append(row)

    # 6. Memory ---------------------------------------------------------------------------------
    memory = []
    for name in ("sue", "oue"):
        mech = dpkit.mechanism(name, epsilon=EPSILON, k=1024)
        values = dpkit_ldp.synthetic("zipf", n=n, k=1024, rng=rng).values
        tracemalloc.start()
        held = mech.randomize(values, rng=rng)
        _, peak_randomize = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        dpkit.get_registry().estimator(mech).accumulate(held)
        _, peak_accumulate = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        memory.append(
            f"{name}: reports {held.nbytes / 2**20:.1f} MiB, peak {peak_randomize / 2**20:.1f} MiB "
            f"in randomize, {peak_accumulate / 2**20:.1f} MiB in accumulate"
        )
        del held
    print("\n".join(memory))
    if not args.no_save:
        accuracy_run.save(
            title=f"Frequency oracles: accuracy, coverage and speed of aggregation, n = {n:,}, "
            f"ε = {EPSILON:g}",
            columns=ACCURACY_COLUMNS,
            rows=rows,
            notes=[
                "MSE ÷ Var pools (f̂_v − f_v)²/Var[f̂_v] over trials and categories, Var the exact "
                "variance of Wang et al. 2017, Theorem 2, at the data (Zipf(1.1)); 1 is exact; ± is "
                f"one standard error. Count-level: {args.trials} simulated trials (exact for krr, ue, "
                "hr; exact marginals for olh); report-level: the real randomizer and estimator, as "
                f"many trials as fit in {args.report_seconds:g} s (at least 3).",
                "Coverage of the 95% confidence intervals over the count-level trials.",
                "Accumulate: the support counts of the reports timed above (CPU, median). "
                "Simulation: count-level draw for 10⁹ users (CPU per draw, median of 5).",
                f"Peak traced memory, n = {n:,}, k = 1024 (input not counted): "
                + "; ".join(memory)
                + ".",
                SHARED,
            ],
        )


ACCURACY_COLUMNS = [
    "protocol",
    "k",
    "accumulate cpu ms",
    "MSE ÷ Var, count-level",
    "MSE ÷ Var, report-level",
    "report-level trials",
    "95% CI coverage",
    "simulate 10⁹ users, cpu ms",
    "simulate + estimate, cpu ms",
]


def accuracy(
    mech: dpkit.plugin.Mechanism, args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, object]:
    """Count-level and report-level MSE ÷ exact variance, and the intervals' coverage."""
    n, k = args.n, mech.k  # type: ignore[attr-defined]
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
    z2_reports: list[np.ndarray] = []
    start = time.perf_counter()
    while len(z2_reports) < 3 or (
        len(z2_reports) < 300 and time.perf_counter() - start < args.report_seconds
    ):
        est = dpkit.estimate(mech, mech.randomize(data.values, rng=rng))
        z2_reports.append((est.frequencies - freqs) ** 2 / var)
    return {
        "MSE ÷ Var, count-level": f"{np.concatenate(z2).mean():.3f} ± {trial_standard_error(z2):.3f}",
        "MSE ÷ Var, report-level": (
            f"{np.concatenate(z2_reports).mean():.3f} ± {trial_standard_error(z2_reports):.3f}"
        ),
        "report-level trials": len(z2_reports),
        "95% CI coverage": f"{100 * covered / (args.trials * k):.2f}%",
    }


if __name__ == "__main__":
    main()

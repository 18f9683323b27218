"""Secure mode (the default) against fast mode and the plain-numpy floor, measured side by side.

Run: ``nice .venv/bin/python benchmarks/bench_secure.py [--rounds 7] [--only secure,samplers]
[--tasks laplace krr] [--quick] [--no-save]``

Sections (each prints a table and is written to ``benchmarks/results.json``):

1. **secure** — for each task the floor is the fastest plain-numpy code a user would write for
   it (``_floors.py``: chunked where that is faster; shown in the table); dpkit runs it in
   fast mode (a numpy ``Generator``) and in secure mode (``rng=None``: ChaCha20 words, exact
   samplers). Figures are medians over rounds of per-round CPU-time ratios
   (``_timing.ratio``), with the issue-19 targets beside them.
2. **samplers** — ``discrete_laplace`` / ``discrete_gaussian`` throughput at several scales
   (the mechanisms' lattice scales among them) against numpy's float ``laplace``/``normal``,
   and CKS20's rejection sampler (``dpkit.randomness.cks20``) for reference.
3. **timing_channel** — Jin et al. 2022's timing attack: the CPU time of one secure discrete
   Laplace draw against the value it returned, for dpkit's fixed-work sampler, for the
   vectorised CKS20 sampler it replaced (whose batching mostly hides the channel at one
   value) and for CKS20 written the textbook way, one value at a time (the check's positive
   control). Draws are grouped by quartile of |Z|; the check passes when the median times of
   the quartiles are within 5% of each other.
4. **memory** — peak traced memory (``tracemalloc``) of ``oue.randomize`` for 10⁷ users,
   k = 64, as a multiple of the output's size (target ≤ 1.5×).

Every timed contender goes through ``_timing.measure``: the same warm-up call, the same rounds
in rotated order, CPU and wall clock, medians. Peers are in ``bench_central.py`` (OpenDP's
discrete Laplace among them) and ``bench_foundation.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from _floors import (
    floor_exponential,
    floor_hr,
    floor_krr,
    floor_noisy_max,
    floor_permute_and_flip,
    floor_rr,
)
from _results import FLOOR_COLUMNS, RATIOS_NOTE, Run, floor_row
from _timing import measure, ratio

import dpkit

SEED = 20241124
TARGETS = {
    "laplace": 3.0,
    "gaussian": 8.0,
    "exponential": 4.0,
    "report_noisy_max": 4.0,
    "permute_and_flip": 4.0,
    "krr": 1.3,
}


# --------------------------------------------------------------------------------------------
# 1. secure ÷ floor
# --------------------------------------------------------------------------------------------


def secure_tasks(n: int, quick: bool) -> dict[str, dict[str, Any]]:
    """task -> {floor (text), calls: floor / fast / secure}."""
    data = np.random.default_rng(SEED)
    values = data.normal(100.0, 10.0, n)
    floor_rng, fast_rng = np.random.default_rng(SEED + 1), np.random.default_rng(SEED + 2)
    laplace: Any = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    gaussian: Any = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6, sensitivity=1.0)
    exponential: Any = dpkit.mechanism("exponential", epsilon=1.0)
    rnm: Any = dpkit.mechanism("report_noisy_max", epsilon=1.0)
    pf: Any = dpkit.mechanism("permute_and_flip", epsilon=1.0)
    krr: Any = dpkit.mechanism("krr", epsilon=1.0, k=16)
    rr: Any = dpkit.mechanism("rr", epsilon=1.0)
    hr: Any = dpkit.mechanism("hr", epsilon=1.0, k=64)
    big_row = data.normal(0.0, 20.0, n // 10 if quick else 10 * n)
    batch = data.normal(0.0, 20.0, (n // 1000, 10_000))
    square = data.normal(0.0, 20.0, (1000, n // 1000))
    categories = data.integers(0, 16, n)
    codes = data.integers(0, 64, n)
    bits = (data.random(n) < 0.3).astype(np.uint8)
    b, sigma, rate = laplace.scale, gaussian.sigma, exponential.rate
    row_label = f"exponential, 1 row × 10{'⁶' if quick else '⁷'}"

    def task(floor: str, floor_fn: Callable[[], object], mech: Any, data: Any) -> dict[str, Any]:
        return {
            "floor": floor,
            "calls": {
                "floor": floor_fn,
                "fast": lambda: mech.randomize(data, rng=fast_rng),
                "secure": lambda: mech.randomize(data),
            },
        }

    return {
        "laplace": task(
            "values + rng.laplace(0, b, n)",
            lambda: values + floor_rng.laplace(0.0, b, n),
            laplace,
            values,
        ),
        "gaussian": task(
            "values + rng.normal(0, σ, n)",
            lambda: values + floor_rng.normal(0.0, sigma, n),
            gaussian,
            values,
        ),
        row_label: task(
            "exp, sum per block; cumsum, searchsorted in one",
            lambda: floor_exponential(big_row, rate, floor_rng),
            exponential,
            big_row,
        ),
        "exponential, 1000 rows × 10⁴": task(
            "exp, cumsum, count per row (blocks of 2²⁰)",
            lambda: floor_exponential(batch, rate, floor_rng),
            exponential,
            batch,
        ),
        "report_noisy_max, 1000 rows × 10³": task(
            "argmax(u + rng.laplace(0, b, shape))",
            lambda: floor_noisy_max(square, rnm.scale, floor_rng),
            rnm,
            square,
        ),
        "permute_and_flip, 1000 rows × 10³": task(
            "argmax(u + rng.exponential(1/λ, shape))",
            lambda: floor_permute_and_flip(square, pf.rate, floor_rng),
            pf,
            square,
        ),
        "krr, k = 16": task(
            "chunked uint8: random < λ, integers, where",
            lambda: floor_krr(categories, 16, krr.lie_probability, floor_rng),
            krr,
            categories,
        ),
        "rr": task(
            "chunked: bits ^ (random < q)",
            lambda: floor_rr(bits, rr.flip_probability, floor_rng),
            rr,
            bits,
        ),
        "hr, k = 64": task(
            "chunked: random, integers, bitwise_count parity",
            lambda: floor_hr(codes, hr.output_size, hr.outside_probability, floor_rng),
            hr,
            codes,
        ),
    }


def bench_ratios(n: int, rounds: int, quick: bool, tasks: list[str]) -> list[dict[str, Any]]:
    print(
        "\n1. secure ÷ floor (CPU-time medians of per-round ratios)\n"
        f"{'task (10⁶ values unless noted)':36s} {'floor ms':>9s} {'fast÷floor':>10s} "
        f"{'secure÷floor':>12s}  floor"
    )
    rows: list[dict[str, Any]] = []
    for name, spec in secure_tasks(n, quick).items():
        if tasks and not any(t in name for t in tasks):
            continue
        try:
            timed = measure(spec["calls"], rounds=rounds)
        except MemoryError:  # reported, not hidden (an earlier version needed > 6 GB)
            print(f"{name:36s} MemoryError")
            rows.append({"task": name, "secure ÷ floor": "MemoryError"})
            continue
        row = floor_row(name, spec["floor"], timed, width=36)
        target = TARGETS.get(name.split(",")[0])
        met = "" if target is None else ("met" if row["secure ÷ floor"] <= target else "NOT met")
        wall = ratio(timed["secure"], timed["floor"], "wall")
        print(f"{'':36s}   secure ÷ floor (wall) {wall:.2f}; target {target or '-'} {met}")
        row["secure ÷ floor (wall)"] = round(wall, 2)
        row["target"] = "" if target is None else f"≤ {target:g}×"
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# 2. samplers
# --------------------------------------------------------------------------------------------


def bench_samplers(n: int, rounds: int) -> list[dict[str, Any]]:
    from dpkit.randomness.cks20 import cks20_discrete_laplace

    laplace: Any = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    gaussian: Any = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6, sensitivity=1.0)
    lattice_t = laplace.lattice_scale(n)
    lattice_s2 = gaussian.lattice(n).sigma2_steps
    fast = np.random.default_rng(SEED)
    calls: dict[str, Callable[[], object]] = {
        "numpy float laplace (leaks; the floor)": lambda: fast.laplace(0.0, 10.0, n),
        "numpy float normal (leaks)": lambda: fast.normal(0.0, 10.0, n),
    }
    for label, scale in (("1", 1), ("10³", 1000), ("the laplace lattice's ≈ 2³⁰", lattice_t)):
        calls[f"discrete_laplace, scale {label}"] = lambda s=scale: dpkit.plugin.discrete_laplace(  # type: ignore[misc]  # a lambda with default arguments
            s, size=n
        )
    for label, scale in (("10", Fraction(10)), ("≈ 2³⁰", lattice_t)):
        calls[f"CKS20 discrete Laplace (reference), scale {label}"] = lambda s=scale: (  # type: ignore[misc]  # a lambda with default arguments
            cks20_discrete_laplace(s, n)
        )
    for label, s2 in (("1", 1), ("10⁴", 10**4), ("the gaussian lattice's ≈ 2⁵⁴", lattice_s2)):
        calls[f"discrete_gaussian, σ² = {label}"] = lambda v=s2: dpkit.plugin.discrete_gaussian(
            v, size=n
        )  # type: ignore[misc]  # a lambda with default arguments
    timed = measure(calls, rounds=rounds)
    base = timed["numpy float laplace (leaks; the floor)"]
    print(
        f"\n2. exact samplers, secure words, {n:.0e} draws\n{'':60s} {'M/s':>8s} {'÷ numpy laplace':>16s}"
    )
    rows = []
    for label, t in timed.items():
        r = ratio(t, base)
        print(f"  {label:58s} {n / t.cpu / 1e6:8.2f} {r:15.2f}x")
        rows.append(
            {
                "sampler": label,
                "M draws/s (cpu)": round(n / t.cpu / 1e6, 2),
                "÷ numpy laplace": round(r, 2),
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# 3. timing channel
# --------------------------------------------------------------------------------------------


def textbook_discrete_laplace(t: int, words: Callable[[int], np.ndarray]) -> int:
    """One discrete Laplace draw of integer scale t, the way a scalar library samples it:
    Canonne, Kamath & Steinke 2020, Algorithm 2 (with Algorithm 1 for the Bernoulli(e^−γ)
    coins), one word at a time. Written for this demonstration only: its loop for V runs
    about |Z|/t times, the channel Jin et al. 2022 measure."""

    def below(m: int) -> int:  # uniform on [0, m) by rejection
        limit = (1 << 64) % m
        while True:
            w = int(words(1)[0])
            if w >= limit:
                return w % m

    def exp_minus(num: int, den: int) -> bool:  # Bernoulli(e^(−num/den)), num ≤ den
        k = 1
        while below(den * k) < num:
            k += 1
        return k % 2 == 1

    while True:
        u = below(t)
        if not exp_minus(u, t):
            continue
        v = 0
        while exp_minus(1, 1):
            v += 1
        x = u + t * v
        negative = int(words(1)[0]) & 1
        if negative and x == 0:
            continue
        return -x if negative else x


def time_single_draws(draw: Callable[[], Any], count: int) -> tuple[np.ndarray, np.ndarray]:
    """(CPU ns, |value|) of ``count`` single draws, after 50 warm-up draws."""
    for _ in range(50):
        draw()
    times = np.empty(count)
    values = np.empty(count)
    for i in range(count):
        start = time.process_time_ns()
        z = draw()
        times[i] = time.process_time_ns() - start
        values[i] = abs(int(z))
    return times, values


def bench_timing_channel(count: int, tolerance: float = 0.05) -> list[dict[str, Any]]:
    """Median CPU time per quartile of |Z| for single draws at scale 100."""
    from dpkit.randomness.cks20 import cks20_discrete_laplace

    scale = 100
    words = dpkit.SecureRandom().words
    samplers = {
        "dpkit discrete_laplace (fixed work)": lambda: dpkit.plugin.discrete_laplace(scale),
        "dpkit's CKS20 sampler (vectorised rejection)": lambda: cks20_discrete_laplace(
            Fraction(scale), 1
        )[0],
        "textbook CKS20, one value at a time": lambda: textbook_discrete_laplace(scale, words),
    }
    print(
        f"\n3. timing channel: one draw at scale {scale}, {count} draws, CPU µs by quartile of |Z|"
    )
    rows = []
    for label, draw in samplers.items():
        times, values = time_single_draws(draw, count)
        edges = np.quantile(values, [0.25, 0.5, 0.75])
        groups = np.searchsorted(edges, values, side="right")
        medians = [statistics.median(times[groups == g]) / 1e3 for g in range(4)]
        spread = max(medians) / min(medians) - 1
        verdict = "within" if spread <= tolerance else "OUTSIDE"
        print(
            f"  {label:46s} quartiles {' '.join(f'{m:7.1f}' for m in medians)}  "
            f"spread {spread:6.1%} ({verdict} {tolerance:.0%})"
        )
        rows.append(
            {
                "sampler": label,
                "median µs, |Z| quartile 1": round(medians[0], 1),
                "2": round(medians[1], 1),
                "3": round(medians[2], 1),
                "4": round(medians[3], 1),
                "spread": f"{spread:.1%}",
                f"within {tolerance:.0%}": bool(spread <= tolerance),
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# 4. memory
# --------------------------------------------------------------------------------------------


def bench_memory(users: int) -> list[dict[str, Any]]:
    values = np.random.default_rng(SEED).integers(0, 64, users)
    oue: Any = dpkit.mechanism("oue", epsilon=1.0, k=64)
    print(f"\n4. peak traced memory of oue.randomize, {users:.0e} users, k = 64")
    rows = []
    for mode, rng in (("fast", np.random.default_rng(SEED)), ("secure", None)):
        tracemalloc.start()
        reports = oue.randomize(values, rng=rng)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        multiple = peak / reports.nbytes
        print(
            f"  {mode:7s} output {reports.nbytes / 2**20:7.1f} MiB, peak {peak / 2**20:7.1f} MiB "
            f"= {multiple:.2f}x the output (target ≤ 1.5x)"
        )
        rows.append(
            {
                "mode": mode,
                "output MiB": round(reports.nbytes / 2**20, 1),
                "peak MiB": round(peak / 2**20, 1),
                "peak ÷ output": round(multiple, 2),
                "target": "≤ 1.5×",
            }
        )
        del reports
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smaller inputs, for a smoke run")
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument("--only", default="", help="comma-separated sections to run")
    parser.add_argument("--tasks", nargs="*", default=[], help="secure-section tasks to run")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    print(
        f"dpkit {dpkit.__version__}, numpy {np.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()}"
    )
    command = ("python benchmarks/bench_secure.py " + " ".join(sys.argv[1:])).strip()
    harness = {"rounds": args.rounds, "warmup": 1, "clock": "cpu (process_time)"}
    sections: dict[str, tuple[str, list[str], Callable[[], list[dict[str, Any]]], list[str]]] = {
        "secure": (
            "Secure mode against the plain-numpy floor",
            [*FLOOR_COLUMNS, "secure ÷ floor (wall)", "target"],
            lambda: bench_ratios(args.n, args.rounds, args.quick, args.tasks),
            [RATIOS_NOTE],
        ),
        "samplers": (
            "Exact samplers on secure words",
            ["sampler", "M draws/s (cpu)", "÷ numpy laplace"],
            lambda: bench_samplers(args.n, args.rounds),
            [RATIOS_NOTE],
        ),
        "timing_channel": (
            "Timing channel: CPU time of one discrete Laplace draw by quartile of |Z| (scale 100)",
            ["sampler", "median µs, |Z| quartile 1", "2", "3", "4", "spread", "within 5%"],
            lambda: bench_timing_channel(400 if args.quick else 4000),
            ["Spread = largest quartile median ÷ smallest − 1 (CPU time of single draws)."],
        ),
        "memory": (
            "Peak traced memory of oue.randomize (tracemalloc)",
            ["mode", "output MiB", "peak MiB", "peak ÷ output", "target"],
            lambda: bench_memory(10**6 if args.quick else 10**7),
            [],
        ),
    }
    for name, (title, columns, bench, notes) in sections.items():
        if only and name not in only:
            continue
        run = Run(name, command, harness=harness)
        rows = bench()
        if not args.no_save:
            run.save(title=title, columns=columns, rows=rows, notes=notes)


if __name__ == "__main__":
    main()

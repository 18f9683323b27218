"""Central mechanisms against the plain-numpy floor and the peer libraries, in both modes.

Run: ``nice .venv/bin/python benchmarks/bench_central.py [--n 1000000] [--rounds 7] [--no-save]``

* Each task is timed for the floor (the fastest plain-numpy code a user would write for it,
  shown in the table), dpkit in fast mode (a seeded numpy ``Generator``) and dpkit in secure
  mode (``rng=None``), all through ``_timing.measure`` in one call: one warm-up call each, the
  same rounds in rotated order, CPU and wall clock; ratios are medians of per-round ratios.
* Tasks: laplace and gaussian on n answers; the exponential mechanism as (a) 1,000 selections,
  one per row of a 1,000 × 10⁴ batch, and (b) 1,000 selections from one row of 10⁴
  candidates (``size=1000``), whose floor is ``rng.choice(m, 1000, p=softmax)``.
* Peers (diffprivlib, OpenDP) run in their own environment (``benchmarks/peers/``; create it
  with ``python benchmarks/peers/make_venvs.py central``), through the same harness, next to
  dpkit in that process; a speed-up compares dpkit and the peer *in the same mode* (secure vs
  secure, fast vs fast; see ``peers/worker.py``).

Writes section ``central`` of ``benchmarks/results.json`` (see ``_results.py``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _floors import floor_exponential
from _peers import compare_peers
from _results import FLOOR_COLUMNS, RATIOS_NOTE, Run, floor_row
from _timing import measure

import dpkit

SEED = 20241124


def softmax(u: np.ndarray, rate: float) -> np.ndarray:
    w = np.exp(rate * (u - u.max()))
    return w / w.sum()


def tasks(n: int) -> dict[str, dict[str, Any]]:
    data = np.random.default_rng(SEED)
    values = data.normal(100.0, 10.0, n)
    floor_rng, fast = np.random.default_rng(SEED + 1), np.random.default_rng(SEED + 2)
    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    gaussian = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6, sensitivity=1.0)
    exponential = dpkit.mechanism("exponential", epsilon=1.0)
    batch = data.normal(0.0, 20.0, (1000, 10_000))
    row = batch[0]
    b, sigma, rate = laplace.scale, gaussian.sigma, exponential.rate

    def task(floor: str, floor_fn: Callable[[], object], run: Callable[[Any], object]) -> Any:
        return {
            "floor": floor,
            "calls": {"floor": floor_fn, "fast": lambda: run(fast), "secure": lambda: run(None)},
        }

    return {
        f"laplace, {n:.0e} answers": task(
            "values + rng.laplace(0, b, n)",
            lambda: values + floor_rng.laplace(0.0, b, n),
            lambda rng: laplace.randomize(values, rng=rng),
        ),
        f"gaussian, {n:.0e} answers": task(
            "values + rng.normal(0, σ, n)",
            lambda: values + floor_rng.normal(0.0, sigma, n),
            lambda rng: gaussian.randomize(values, rng=rng),
        ),
        "exponential, 1000 rows × 10⁴ (a)": task(
            "exp, cumsum, count per row (blocks of 2²⁰)",
            lambda: floor_exponential(batch, rate, floor_rng),
            lambda rng: exponential.randomize(batch, rng=rng),
        ),
        "exponential, 1000 draws from 10⁴ (b)": task(
            "rng.choice(m, 1000, p=softmax(λu))",
            lambda: floor_rng.choice(row.size, 1000, p=softmax(row, rate)),
            lambda rng: exponential.randomize(row, rng=rng, size=1000),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--peer-subset", type=int, default=20_000)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    command = "python benchmarks/bench_central.py " + " ".join(sys.argv[1:])
    run = Run("central", command.strip(), harness={"rounds": args.rounds, "warmup": 1})
    print(
        f"dpkit {dpkit.__version__} | numpy {np.__version__} | python {platform.python_version()}"
        f" | {os.cpu_count()} CPUs | load {os.getloadavg()[0]:.1f} | rounds {args.rounds}"
    )
    print(f"\n{'task':40s} {'floor ms':>9s} {'fast÷floor':>10s} {'secure÷floor':>12s}  floor")
    rows = [
        floor_row(name, spec["floor"], measure(spec["calls"], rounds=args.rounds))
        for name, spec in tasks(args.n).items()
    ]
    entries, notes = compare_peers("central", n=args.n, subset=args.peer_subset, rounds=args.rounds)
    if not args.no_save:
        run.save(
            title="Central mechanisms: floor, fast and secure mode, peers",
            columns=FLOOR_COLUMNS,
            rows=rows,
            peers=entries,
            notes=[RATIOS_NOTE, *notes],
        )


if __name__ == "__main__":
    main()

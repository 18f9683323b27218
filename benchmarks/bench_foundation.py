"""rr and krr against the plain-numpy floor in both modes, and the local-DP peer libraries.

Run: ``nice .venv/bin/python benchmarks/bench_foundation.py [--n 10000000] [--rounds 7] [--no-save]``

The floor is the fastest plain-numpy code a user would write, written the way dpkit works:
chunked (2¹⁵ values at a time, so that the temporaries stay in cache; a floor written with
whole-array passes pays for their memory traffic, which once made dpkit look *faster* than
the floor) and in the narrowest dtype. rr: ``bits ^ (rng.random(c) < q)``; krr: one
``rng.random`` and one ``rng.integers`` per value, the other value shifted past the truth.
dpkit runs in fast mode (a seeded numpy ``Generator``) and in secure mode (``rng=None``). All
contenders go through ``_timing.measure`` in one call; ratios are medians of per-round CPU
ratios.

Peers (pure-ldp, multi-freq-ldpy: rr, krr k = 16, oue k = 64) run in their own environment
(``python benchmarks/peers/make_venvs.py ldp``) through the same harness next to dpkit's fast
mode: they have no secure mode. Their per-user APIs are timed on a subset and scaled to n.

Writes section ``foundation`` of ``benchmarks/results.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np
from _floors import floor_krr, floor_rr
from _peers import compare_peers
from _results import FLOOR_COLUMNS, RATIOS_NOTE, Run, floor_row
from _timing import measure

import dpkit

SEED = 20241124


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--peer-n", type=int, default=1_000_000)
    parser.add_argument("--peer-subset", type=int, default=20_000)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    n = args.n
    command = "python benchmarks/bench_foundation.py " + " ".join(sys.argv[1:])
    run = Run("foundation", command.strip(), harness={"rounds": args.rounds, "warmup": 1})
    data = np.random.default_rng(SEED)
    bits = (data.random(n) < 0.3).astype(np.uint8)
    categories = data.integers(0, 16, n)
    floor_rng, fast = np.random.default_rng(SEED + 1), np.random.default_rng(SEED + 2)
    rr = dpkit.mechanism("rr", epsilon=1.0)
    krr = dpkit.mechanism("krr", epsilon=1.0, k=16)
    print(
        f"dpkit {dpkit.__version__} | numpy {np.__version__} | python {platform.python_version()}"
        f" | {os.cpu_count()} CPUs | load {os.getloadavg()[0]:.1f} | n = {n:,}"
    )
    tasks = {
        f"rr, {n:.0e} values": (
            "chunked: bits ^ (rng.random(c) < q)",
            {
                "floor": lambda: floor_rr(bits, rr.flip_probability, floor_rng),
                "fast": lambda: rr.randomize(bits, rng=fast),
                "secure": lambda: rr.randomize(bits),
            },
        ),
        f"krr, k = 16, {n:.0e} values": (
            "chunked uint8: random < λ, integers, where",
            {
                "floor": lambda: floor_krr(categories, 16, krr.lie_probability, floor_rng),
                "fast": lambda: krr.randomize(categories, rng=fast),
                "secure": lambda: krr.randomize(categories),
            },
        ),
    }
    print(f"\n{'task':32s} {'floor ms':>9s} {'fast÷floor':>10s} {'secure÷floor':>12s}  floor")
    rows = [
        floor_row(name, floor_text, measure(calls, rounds=args.rounds), width=32)
        for name, (floor_text, calls) in tasks.items()
    ]
    entries, notes = compare_peers(
        "ldp", n=args.peer_n, subset=args.peer_subset, rounds=args.rounds
    )
    if not args.no_save:
        run.save(
            title="Randomized response: floor, fast and secure mode, peers",
            columns=FLOOR_COLUMNS,
            rows=rows,
            peers=entries,
            notes=[
                RATIOS_NOTE,
                "The local-DP peers have no secure mode: fast column only.",
                *notes,
            ],
        )


if __name__ == "__main__":
    main()

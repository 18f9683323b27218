"""rr and krr on 10^7 values against the plain numpy floor, measured side by side.

Run: ``.venv/bin/python benchmarks/bench_foundation.py [--n 10000000] [--repeat 7]``

The floor is the least work any implementation must do: for rr one uniform draw and one
comparison per value (``rng.random(n) < p``); for krr one ``rng.random`` and one
``rng.integers`` draw per value. Ratios are dpkit / floor (lower is better; 1.0 = the floor).
pure-ldp and multi-freq-ldpy, when importable, are timed on a subset through their per-user
APIs and extrapolated linearly (marked *), as their own documentation uses them. To include
them, run from a separate environment (their dependencies are not all declared):

    python -m venv /tmp/peers
    /tmp/peers/bin/pip install -e . pure-ldp multi-freq-ldpy scikit-learn statsmodels
    /tmp/peers/bin/python benchmarks/bench_foundation.py
"""

from __future__ import annotations

import argparse
import math
import platform

import numpy as np
from _timing import best_time, side_by_side

import dpkit


def peer_rows(
    values_k: np.ndarray, k: int, epsilon: float, n: int, subset: int
) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []
    sample = values_k[:subset]
    try:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client

        GRR_Client(int(sample[0]), k, epsilon)  # JIT warm-up, excluded
        t = best_time(lambda: [GRR_Client(int(v), k, epsilon) for v in sample], 1)
        rows.append((f"multi-freq-ldpy GRR_Client (k={k})*", t * n / subset))
    except ImportError:
        rows.append(("multi-freq-ldpy (not installed)", math.nan))
    try:
        from pure_ldp.frequency_oracles.direct_encoding import DEClient

        client = DEClient(epsilon=epsilon, d=k, index_mapper=lambda x: x)
        t = best_time(lambda: [client.privatise(int(v)) for v in sample], 1)
        rows.append((f"pure-ldp DEClient (k={k})*", t * n / subset))
    except ImportError:
        rows.append(("pure-ldp (not installed)", math.nan))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--peer-subset", type=int, default=20_000)
    args = parser.parse_args()
    n, epsilon, k = args.n, 1.0, 16
    rng = np.random.default_rng(1)
    bits = (rng.random(n) < 0.3).astype(np.uint8)
    categories = rng.integers(0, k, n).astype(np.int64)

    rr = dpkit.mechanism("rr", epsilon=epsilon)
    krr = dpkit.mechanism("krr", epsilon=epsilon, k=k)
    p = rr.keep_probability

    bools = bits.astype(bool)

    def krr_floor() -> None:
        rng.random(n)
        rng.integers(0, k - 1, n)

    floor_rr_label, floor_krr_label = (
        "numpy floor: rng.random(n) < p",
        "numpy floor: rng.random + rng.integers",
    )
    timed = side_by_side(
        {
            floor_rr_label: lambda: rng.random(n) < p,
            "dpkit rr.randomize (uint8 0/1)": lambda: rr.randomize(bits, rng=rng),
            "dpkit rr.randomize (bool)": lambda: rr.randomize(bools, rng=rng),
            floor_krr_label: krr_floor,
            f"dpkit krr.randomize (k={k}, int64)": lambda: krr.randomize(categories, rng=rng),
        },
        args.repeat,
    )
    results: list[tuple[str, str, float, float]] = []
    for label, seconds in timed.items():
        mech = "krr" if "krr" in label or label == floor_krr_label else "rr"
        results.append(
            (mech, label, seconds, timed[floor_krr_label if mech == "krr" else floor_rr_label])
        )
    peers: list[tuple[str, str, float, float]] = []
    for mech, values, size, ours in (
        ("rr", bits, 2, "dpkit rr.randomize (uint8 0/1)"),
        ("krr", categories, k, f"dpkit krr.randomize (k={k}, int64)"),
    ):
        floor = timed[floor_krr_label if mech == "krr" else floor_rr_label]
        for label, seconds in peer_rows(values, size, epsilon, n, args.peer_subset):
            results.append((mech, label, seconds, floor))
            peers.append((mech, label, seconds, timed[ours]))

    print(
        f"# dpkit {dpkit.__version__} | numpy {np.__version__} | python {platform.python_version()} | n = {n:,} | ε = {epsilon}"
    )
    print(
        f"| {'mechanism':<9} | {'implementation':<42} | {'seconds':>9} | {'ratio to floor':>14} |"
    )
    print(f"|{'-' * 11}|{'-' * 44}|{'-' * 11}|{'-' * 16}|")
    for mech, label, seconds, floor in results:
        ratio = seconds / floor if not math.isnan(seconds) else math.nan
        print(f"| {mech:<9} | {label:<42} | {seconds:>9.4f} | {ratio:>14.2f} |")
    print("* per-user API timed on a subset and extrapolated linearly to n")
    for mech, label, seconds, ours in peers:
        if not math.isnan(seconds):
            print(f"{mech}: dpkit is {seconds / ours:,.0f}x faster than {label.rstrip('*')}")


if __name__ == "__main__":
    main()

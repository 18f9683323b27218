"""Accounting: dpkit against dp-accounting (PLD and RDP) and against the numpy floor.

Run: ``nice .venv/bin/python benchmarks/bench_accounting.py [--repeat 3] [--peers PYTHON]``

With ``--peers`` (default ``.venv-peers/bin/python`` when it exists; see
``benchmarks/peer_accounting.py`` for how to make that environment) the same questions are
answered by dp-accounting 0.6.0 in a subprocess, and the table puts both side by side:
seconds (best of ``--repeat``, wall clock and CPU, both sides measured in this one run) and ε.
The ratio column is dpkit's CPU time over dp-accounting's (lower is better; below 1 dpkit is
faster). dpkit's ε is its default ``best`` accountant (for these questions, its PLD); the
"ε/PLD" column is dpkit's ε over dp-accounting's PLD ε (both upper bounds of the truth; the
reference vectors in ``tests/data`` bracket the truth with lower bounds).

Floors, the least work an implementation of each answer must do, for the closed forms:
* exact Gaussian: one evaluation of Balle & Wang's δ(ε) × the ~60 bisection steps any
  root-finder needs;
* RDP: one vectorised pass over the order grid.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _timing import best_time

import dpkit
from dpkit.accounting import ORDERS, account, calibrate, compose_rdp
from dpkit.privacy import (
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    RandomizedResponseDP,
    SubsampledDP,
    gaussian_delta,
)

ROOT = Path(__file__).resolve().parents[1]

#: The questions (shared with peer_accounting.py, which reads them as JSON).
CASES: list[dict[str, Any]] = [
    {"label": "100 x Laplace(1)", "kind": "laplace", "epsilon": 1.0, "count": 100, "delta": 1e-6},
    {"label": "100 x Laplace(0.1)", "kind": "laplace", "epsilon": 0.1, "count": 100, "delta": 1e-6},
    {"label": "100 x RR(1)", "kind": "rr", "epsilon": 1.0, "count": 100, "delta": 1e-6},
    {
        "label": "DP-SGD q=0.01 s=1, 1000 steps",
        "kind": "gaussian",
        "noise_multiplier": 1.0,
        "sampling_rate": 0.01,
        "count": 1000,
        "delta": 1e-5,
    },
    {
        "label": "DP-SGD q=0.01 s=1, 10000 steps",
        "kind": "gaussian",
        "noise_multiplier": 1.0,
        "sampling_rate": 0.01,
        "count": 10000,
        "delta": 1e-5,
    },
    {
        "label": "DP-SGD q=0.01 s=0.5, 1000 steps",
        "kind": "gaussian",
        "noise_multiplier": 0.5,
        "sampling_rate": 0.01,
        "count": 1000,
        "delta": 1e-5,
    },
    {
        "label": "DP-SGD q=0.001 s=0.8, 100000 steps",
        "kind": "gaussian",
        "noise_multiplier": 0.8,
        "sampling_rate": 0.001,
        "count": 100000,
        "delta": 1e-6,
    },
    {
        "label": "Laplace(1) q=0.1, 100 steps",
        "kind": "laplace",
        "epsilon": 1.0,
        "sampling_rate": 0.1,
        "count": 100,
        "delta": 1e-6,
    },
    {
        "label": "calibrate s: e=8, d=1e-5, 10000 steps q=0.01",
        "kind": "calibrate",
        "target_epsilon": 8.0,
        "sampling_rate": 0.01,
        "count": 10000,
        "delta": 1e-5,
    },
]


def _events(case: dict[str, Any]) -> list[tuple[PrivacyEvent, int]]:
    event: PrivacyEvent
    if case["kind"] == "laplace":
        event = LaplaceDP(case["epsilon"])
    elif case["kind"] == "rr":
        event = RandomizedResponseDP(case["epsilon"])
    else:
        event = GaussianDP(case["noise_multiplier"], case["delta"])
    if "sampling_rate" in case:
        event = SubsampledDP(event, case["sampling_rate"])
    return [(event, case["count"])]


def _ours(case: dict[str, Any]) -> tuple[Callable[[], float], Callable[[], float | None]]:
    """(dpkit's best answer, dpkit's RDP answer) of one question."""
    if case["kind"] == "calibrate":
        kwargs = {
            "epsilon": case["target_epsilon"],
            "delta": case["delta"],
            "count": case["count"],
            "sampling_rate": case["sampling_rate"],
        }
        return (
            lambda: calibrate("gaussian", **kwargs).value,
            lambda: calibrate("gaussian", method="rdp", **kwargs).value,
        )
    events = _events(case)

    def rdp() -> float | None:
        try:
            return compose_rdp(events, delta=case["delta"]).epsilon
        except dpkit.DPKitError:
            return None

    return (lambda: account(events, delta=case["delta"]).epsilon), rdp


def _timed(fn: Callable[[], Any], repeat: int) -> dict[str, Any]:
    wall = best_time(fn, repeat)
    cpu = math.inf
    for _ in range(repeat):
        start = time.process_time()
        value = fn()
        cpu = min(cpu, time.process_time() - start)
    return {"value": value, "seconds": wall, "cpu_seconds": cpu}


def _peers(python: str, repeat: int) -> list[dict[str, Any]] | None:
    script = ROOT / "benchmarks" / "peer_accounting.py"
    command = [python, str(script), "--repeat", str(repeat), "--cases", json.dumps(CASES)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"peers failed ({done.returncode}): {done.stderr.strip()[-400:]}")
        return None
    return list(json.loads(done.stdout))


def _floors(repeat: int) -> None:
    def gauss_floor() -> None:
        for _ in range(60):
            gaussian_delta(600.0, 1 / math.sqrt(1000))

    gaussian = [(GaussianDP(1.0, 1e-5), 1000)]
    rows = [
        ("k-fold Gaussian, exact (k=1000)", lambda: account(gaussian, delta=1e-5), gauss_floor),
        (
            "100 x pure(0.1), rdp",
            lambda: account([(dpkit.PureDP(0.1), 100)], delta=1e-6, method="rdp"),
            lambda: np.logaddexp(ORDERS, ORDERS),
        ),
    ]
    print(f"{'closed form':40} {'dpkit s':>10} {'floor s':>10} {'ratio':>8}")
    for label, fn, floor in rows:
        ours, base = best_time(fn, repeat), best_time(floor, repeat)
        print(f"{label:40} {ours:10.5f} {base:10.5f} {ours / base:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    default = ROOT / ".venv-peers" / "bin" / "python"
    parser.add_argument(
        "--peers",
        default=str(default) if default.exists() else None,
        help="python of an environment with dp-accounting 0.6.0 (see peer_accounting.py)",
    )
    args = parser.parse_args()
    print(
        f"dpkit {dpkit.__version__}, numpy {np.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores"
    )
    _floors(args.repeat)
    peers = _peers(args.peers, args.repeat) if args.peers else None
    if peers is None:
        print("dp-accounting not run (give --peers PYTHON): dpkit's columns only")
    print()
    head = (
        f"{'question':44} {'dpkit cpu':>9} {'dp-acc cpu':>10} {'ratio':>6} "
        f"{'dpkit ε/σ':>10} {'dp-acc PLD':>10} {'ε/PLD':>7} {'dpkit RDP':>10} {'dp-acc RDP':>10}"
    )
    print(head)
    for index, case in enumerate(CASES):
        best, rdp = _ours(case)
        ours = _timed(best, args.repeat)
        our_rdp = rdp()
        peer = peers[index] if peers else None
        peer_cpu = (peer["pld"]["cpu_seconds"] if peer else None) or math.nan
        peer_value = (peer["pld"]["value"] if peer else None) or math.nan
        peer_rdp = peer["rdp"]["value"] if peer and peer["rdp"]["value"] is not None else math.nan
        print(
            f"{case['label']:44} {ours['cpu_seconds']:9.3f} {peer_cpu:10.3f} "
            f"{ours['cpu_seconds'] / peer_cpu:6.2f} {ours['value']:10.4f} {peer_value:10.4f} "
            f"{ours['value'] / peer_value:7.4f} {our_rdp if our_rdp is not None else math.nan:10.4f}"
            f" {peer_rdp:10.4f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()

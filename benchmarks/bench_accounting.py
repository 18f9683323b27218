"""Accounting: dpkit against dp-accounting (PLD and RDP) and against the numpy floor.

Run: ``nice .venv/bin/python benchmarks/bench_accounting.py [--repeat 3] [--peers PYTHON]
[--no-save] [--questions TEXT]`` (``--questions calibrate``: the calibrations only)

With ``--peers`` (default: the ``accounting`` environment of ``benchmarks/peers/make_venvs.py``,
else ``.venv-peers/bin/python``, when it exists) the same questions are answered by
dp-accounting 0.6.0 in a subprocess (``peer_accounting.py``), and the table puts both side by
side: CPU milliseconds (both sides through ``_timing.measure``: one warm-up call, ``--repeat``
rounds, medians; both measured in this one run) and ε. The ratio column is dp-accounting's CPU
time over dpkit's (above 1 dpkit is faster). dpkit's ε is its default ``best`` accountant
(for these questions, its PLD); "dpkit above PLD, %" is how much larger dpkit's ε is than
dp-accounting's PLD ε (both upper bounds of the truth; the reference vectors in ``tests/data``
bracket the truth with lower bounds).

Floors, the least work an implementation of each answer must do, for the closed forms:
* exact Gaussian: one evaluation of Balle & Wang's δ(ε) × the ~60 bisection steps any
  root-finder needs;
* RDP: one vectorised pass over the order grid.

Writes sections ``accounting`` and ``accounting_floors`` of ``benchmarks/results.json``
(``--no-save`` prints only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _peers import peers_python
from _results import RATIOS_NOTE, Run
from _timing import measure, ratio

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
    {
        "label": "calibrate s: e=1, d=1e-9, 10000 steps q=0.01",
        "kind": "calibrate",
        "target_epsilon": 1.0,
        "sampling_rate": 0.01,
        "count": 10000,
        "delta": 1e-9,
    },
    {
        "label": "calibrate s: e=1e-9, d=1e-5, 10000 steps q=0.01",
        "kind": "calibrate",
        "target_epsilon": 1e-9,
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

        def rdp_sigma() -> float | None:
            try:  # RDP's ε stays above ~5e-4 here at every σ: it cannot reach ε = 1e-9
                return calibrate("gaussian", method="rdp", **kwargs).value
            except dpkit.DPKitError:
                return None

        return (lambda: calibrate("gaussian", **kwargs).value), rdp_sigma
    events = _events(case)

    def rdp() -> float | None:
        try:
            return compose_rdp(events, delta=case["delta"]).epsilon
        except dpkit.DPKitError:
            return None

    return (lambda: account(events, delta=case["delta"]).epsilon), rdp


def _peers(python: str, repeat: int) -> tuple[list[dict[str, Any]] | None, str]:
    """dp-accounting's answers and timings (or None) and its version, from peer_accounting.py."""
    script = ROOT / "benchmarks" / "peer_accounting.py"
    command = [python, str(script), "--repeat", str(repeat), "--cases", json.dumps(CASES)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"peers failed ({done.returncode}): {done.stderr.strip()[-400:]}")
        return None, f"dp-accounting failed: {done.stderr.strip()[-200:]}"
    result = json.loads(done.stdout)
    return list(result["cases"]), f"dp-accounting {result['version']}"


def _floors(repeat: int, command: str, save: bool) -> None:
    """Section ``accounting_floors``: dpkit's closed forms against the least work of each."""
    run = Run("accounting_floors", command, harness={"rounds": repeat, "warmup": 1})

    def gauss_floor() -> None:
        for _ in range(60):
            gaussian_delta(600.0, 1 / math.sqrt(1000))

    gaussian = [(GaussianDP(1.0, 1e-5), 1000)]
    tasks = [
        (
            "k-fold Gaussian, exact (k = 1000)",
            "60 evaluations of Balle & Wang's δ(ε) (bisection steps)",
            lambda: account(gaussian, delta=1e-5),
            gauss_floor,
        ),
        (
            "100 × pure(0.1), RDP",
            "one vectorised pass over the order grid",
            lambda: account([(dpkit.PureDP(0.1), 100)], delta=1e-6, method="rdp"),
            lambda: np.logaddexp(ORDERS, ORDERS),
        ),
    ]
    rows = []
    print(f"{'closed form':40} {'dpkit ms':>10} {'floor ms':>10} {'ratio':>8}")
    for label, text, fn, floor in tasks:
        timed = measure({"dpkit": fn, "floor": floor}, rounds=repeat)
        times = ratio(timed["dpkit"], timed["floor"])
        print(
            f"{label:40} {timed['dpkit'].cpu * 1e3:10.3f} {timed['floor'].cpu * 1e3:10.3f} {times:8.1f}"
        )
        rows.append({
            "closed form": label,
            "floor": text,
            "dpkit cpu ms": round(timed["dpkit"].cpu * 1e3, 3),
            "floor cpu ms": round(timed["floor"].cpu * 1e3, 3),
            "dpkit ÷ floor": round(times, 1),
        })  # fmt: skip
    if save:
        run.save(
            title="Accounting closed forms against their floors",
            columns=["closed form", "floor", "dpkit cpu ms", "floor cpu ms", "dpkit ÷ floor"],
            rows=rows,
            notes=[RATIOS_NOTE, "Measured on a shared 2-core machine."],
        )


ACCOUNTING_COLUMNS = [
    "question",
    "dpkit cpu ms",
    "dp-accounting PLD cpu ms",
    "dp-accounting ÷ dpkit (cpu)",
    "dpkit ε (σ)",
    "dp-accounting PLD ε (σ)",
    "dpkit above PLD, %",
    "dpkit RDP ε (σ)",
    "dp-accounting RDP ε (σ)",
]


def _number(value: float | None, digits: int) -> float | str:
    return "" if value is None or not math.isfinite(value) else round(value, digits)


def _exact(value: float | None) -> str:
    """ε or σ to 4 decimals, as text: the docs round numbers to 3 significant digits."""
    return "" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _default_peers() -> str | None:
    for python in (peers_python("accounting"), ROOT / ".venv-peers" / "bin" / "python"):
        if python.exists():
            return str(python)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (_timing.measure)")
    parser.add_argument(
        "--peers",
        default=_default_peers(),
        help="python of an environment with dp-accounting 0.6.0 (see peer_accounting.py)",
    )
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument(
        "--questions",
        default="",
        help="only the questions whose label contains this text (prints only, saves nothing)",
    )
    args = parser.parse_args()
    CASES[:] = [case for case in CASES if args.questions in case["label"]]
    if args.questions:  # a part of the table would replace the whole section
        args.no_save = True
    command = ("python benchmarks/bench_accounting.py " + " ".join(sys.argv[1:])).strip()
    run = Run("accounting", command, harness={"rounds": args.repeat, "warmup": 1})
    print(
        f"dpkit {dpkit.__version__}, numpy {np.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores"
    )
    _floors(args.repeat, command, not args.no_save)
    peers, peer_name = _peers(args.peers, args.repeat) if args.peers else (None, "")
    notes = [
        "CPU ms: medians of the rounds of _timing.measure, each side in its own process "
        "(dp-accounting in its own environment, made by python benchmarks/peers/make_venvs.py "
        "accounting); the ratio is of the medians. Above 1, dpkit is faster.",
        "dpkit's ε is its default accountant ('best'; for these questions its PLD); dpkit above "
        "PLD is how much larger its ε is than dp-accounting's PLD ε, in percent (both are upper "
        "bounds of the true ε). RDP columns: "
        "each library's RDP accountant (blank: not applicable). The calibration row gives σ.",
    ]
    if peers is None:
        notes.append(
            f"dp-accounting skipped: {peer_name or 'no environment (give --peers PYTHON)'}."
        )
        print("dp-accounting not run (give --peers PYTHON): dpkit's columns only")
    else:
        notes.append(f"Peer: {peer_name}.")
    print()
    head = (
        f"{'question':44} {'dpkit cpu':>9} {'dp-acc cpu':>10} {'ratio':>6} "
        f"{'dpkit ε/σ':>10} {'dp-acc PLD':>10} {'PLD +%':>7} {'dpkit RDP':>10} {'dp-acc RDP':>10}"
    )
    print(head)
    rows = []
    for index, case in enumerate(CASES):
        best, rdp = _ours(case)
        ours = measure({"dpkit": best}, rounds=args.repeat)["dpkit"]
        value, our_rdp = best(), rdp()
        peer = peers[index] if peers else None
        peer_cpu = (peer["pld"]["cpu_seconds"] if peer else None) or math.nan
        peer_value = (peer["pld"]["value"] if peer else None) or math.nan
        peer_rdp = peer["rdp"]["value"] if peer and peer["rdp"]["value"] is not None else math.nan
        row = {
            "question": case["label"],
            "dpkit cpu ms": _number(ours.cpu * 1e3, 2),
            "dp-accounting PLD cpu ms": _number(peer_cpu * 1e3, 2),
            "dp-accounting ÷ dpkit (cpu)": _number(
                peer_cpu / ours.cpu if ours.cpu else math.nan, 1
            ),
            "dpkit ε (σ)": _exact(value),
            "dp-accounting PLD ε (σ)": _exact(peer_value),
            "dpkit above PLD, %": _number(100 * (value / peer_value - 1), 4),
            "dpkit RDP ε (σ)": _exact(our_rdp),
            "dp-accounting RDP ε (σ)": _exact(peer_rdp),
        }
        print(f"{case['label']:44} " + " ".join(f"{v!s:>10}" for v in list(row.values())[1:]))
        rows.append(row)
    sys.stdout.flush()
    if not args.no_save:
        run.save(
            title="Composition questions: dpkit against dp-accounting",
            columns=ACCOUNTING_COLUMNS,
            rows=rows,
            notes=[*notes, "Measured on a shared 2-core machine; quote the ratios."],
        )


if __name__ == "__main__":
    main()

"""The dp-accounting side of ``bench_accounting.py``: run in the peers' own environment.

dp-accounting 0.6.0 pins attrs<24, which dpkit cannot share, so it gets its own venv:

    python3 -m venv .venv-peers            # .venv-*/ is git-ignored
    .venv-peers/bin/pip install dp-accounting==0.6.0
    .venv-peers/bin/python benchmarks/peer_accounting.py --repeat 3   # prints JSON

``bench_accounting.py --peers .venv-peers/bin/python`` runs this script itself and prints both
sides together. The questions are the ``CASES`` of that script (repeated here so that this
file needs nothing from dpkit); each is answered with dp-accounting's PLD accountant (default
grid 1e-4, connect the dots) and its RDP accountant (default orders), timed best-of-``repeat``
in wall-clock and in CPU seconds. Randomized response is composed with the low-level PLD's
``self_compose``: the accountant ignores an RR event's count (accounting.md §6.1).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

from dp_accounting import dp_event, mechanism_calibration, pld, rdp
from dp_accounting.pld import privacy_loss_distribution as plds


def _event(case: dict[str, Any]) -> dp_event.DpEvent:
    kind = case["kind"]
    if kind == "laplace":
        inner: dp_event.DpEvent = dp_event.LaplaceDpEvent(1 / case["epsilon"])
    else:
        inner = dp_event.GaussianDpEvent(case["noise_multiplier"])
    if "sampling_rate" in case:
        inner = dp_event.PoissonSampledDpEvent(case["sampling_rate"], inner)
    return dp_event.SelfComposedDpEvent(inner, case["count"])


def _pld(case: dict[str, Any]) -> float:
    if case["kind"] == "rr":  # k = 2: noise parameter p = 2/(1 + e^ε)
        single = plds.from_randomized_response(2 / (1 + math.exp(case["epsilon"])), 2)
        return float(single.self_compose(case["count"]).get_epsilon_for_delta(case["delta"]))
    accountant = pld.PLDAccountant()
    accountant.compose(_event(case))
    return float(accountant.get_epsilon(case["delta"]))


def _rdp(case: dict[str, Any]) -> float | None:
    if case["kind"] == "rr":
        return None
    accountant = rdp.RdpAccountant()
    accountant.compose(_event(case))
    return float(accountant.get_epsilon(case["delta"]))


def _calibrate(case: dict[str, Any], make: Callable[[], Any]) -> float:
    def event(sigma: float) -> dp_event.DpEvent:
        inner = dp_event.GaussianDpEvent(sigma)
        sampled = dp_event.PoissonSampledDpEvent(case["sampling_rate"], inner)
        return dp_event.SelfComposedDpEvent(sampled, case["count"])

    return float(
        mechanism_calibration.calibrate_dp_mechanism(
            make,
            event,
            case["target_epsilon"],
            case["delta"],
            mechanism_calibration.LowerEndpointAndGuess(0.3, 1.0),
            tol=1e-4,
        )
    )


def _timed(fn: Callable[[], Any], repeat: int) -> dict[str, Any]:
    wall, cpu, value = math.inf, math.inf, None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            value = fn()
        except Exception as error:  # e.g. the RDP accountant refuses a subsampled Laplace
            return {"value": None, "error": str(error)[:200], "seconds": None, "cpu_seconds": None}
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return {"value": value, "seconds": wall, "cpu_seconds": cpu}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", required=True, help="JSON list of the questions")
    args = parser.parse_args()
    out: list[dict[str, Any]] = []
    for case in json.loads(args.cases):
        row: dict[str, Any] = {"label": case["label"]}
        if case["kind"] == "calibrate":
            row["pld"] = _timed(lambda c=case: _calibrate(c, pld.PLDAccountant), args.repeat)
            row["rdp"] = _timed(lambda c=case: _calibrate(c, rdp.RdpAccountant), args.repeat)
        else:
            row["pld"] = _timed(lambda c=case: _pld(c), args.repeat)
            row["rdp"] = _timed(lambda c=case: _rdp(c), args.repeat)
        out.append(row)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

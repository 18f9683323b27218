"""Generate ``calibration_vectors.json``: calibrations by dp-accounting, bracketing the truth.

Runs in dp-accounting's own environment (it pins attrs<24; see ``make_accounting_vectors.py``
and ``benchmarks/peers/make_venvs.py accounting``); its output is committed:

    PYTHON tests/data/make_calibration_vectors.py > tests/data/calibration_vectors.json

For each question (a composition, δ and a target ε) it records

* ``upper``: dp-accounting's ``calibrate_dp_mechanism`` on its PLD accountant (pessimistic
  connect-the-dots at the default grid 1e-4, tol 1e-4): a noise multiplier (or a Laplace
  scale b = 1/ε₀) that meets the target by an upper bound of ε, so at least the smallest one
  that truly does;
* ``lower``: the largest of ``upper``·(0.9995, 0.999, 0.995, 0.99, 0.98, 0.95, 0.9) at which
  dp-accounting's *optimistic* PLD (``pessimistic_estimate=False``, a lower bound of ε) is
  already above the target: no smaller parameter can meet it (ε falls as the parameter grows);
  ``null`` when there is none (the optimistic estimate rounds each step's loss down by up to
  the grid 1e-4, so it is loose after many steps).

The noise that truly meets the target is in [lower, upper].
"""

from __future__ import annotations

import json
import platform
import sys
import time
from importlib.metadata import version

import numpy as np
import scipy
from dp_accounting import dp_event, mechanism_calibration
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import privacy_loss_distribution as plds

CASES = [
    {
        "kind": "subsampled_gaussian",
        "sampling_rate": 0.01,
        "count": 10_000,
        "delta": 1e-5,
        "target_epsilon": 8.0,
    },
    {
        "kind": "subsampled_gaussian",
        "sampling_rate": 0.01,
        "count": 10_000,
        "delta": 1e-9,
        "target_epsilon": 1.0,
    },
    {
        "kind": "subsampled_gaussian",
        "sampling_rate": 0.001,
        "count": 100_000,
        "delta": 1e-7,
        "target_epsilon": 1.0,
    },
    {"kind": "laplace", "count": 100, "delta": 1e-6, "target_epsilon": 1.0},
    {
        "kind": "subsampled_laplace",
        "sampling_rate": 0.01,
        "count": 1000,
        "delta": 1e-6,
        "target_epsilon": 1.0,
    },
]


def _event(case: dict, parameter: float) -> dp_event.DpEvent:
    if case["kind"].endswith("gaussian"):
        inner: dp_event.DpEvent = dp_event.GaussianDpEvent(parameter)
    else:
        inner = dp_event.LaplaceDpEvent(parameter)  # parameter = the scale b = 1/ε₀
    if "sampling_rate" in case:
        inner = dp_event.PoissonSampledDpEvent(case["sampling_rate"], inner)
    return dp_event.SelfComposedDpEvent(inner, case["count"])


def _optimistic(case: dict, parameter: float) -> float:
    rate = case.get("sampling_rate", 1.0)
    if case["kind"].endswith("gaussian"):
        single = plds.from_gaussian_mechanism(
            parameter, sampling_prob=rate, pessimistic_estimate=False
        )
    else:
        single = plds.from_laplace_mechanism(
            parameter, sampling_prob=rate, pessimistic_estimate=False
        )
    return float(single.self_compose(case["count"]).get_epsilon_for_delta(case["delta"]))


def main() -> None:
    out = []
    for case in CASES:
        started = time.perf_counter()
        # σ from 0.3 (a smaller one builds a PLD of billions of bins); a Laplace scale from 0.01
        lowest = 0.3 if case["kind"].endswith("gaussian") else 0.01
        upper = float(
            mechanism_calibration.calibrate_dp_mechanism(
                PLDAccountant,
                lambda x, c=case: _event(c, x),
                case["target_epsilon"],
                case["delta"],
                mechanism_calibration.LowerEndpointAndGuess(lowest, 1.0),
                tol=1e-4,
            )
        )
        lower = None
        for factor in (0.9995, 0.999, 0.995, 0.99, 0.98, 0.95, 0.9):
            if _optimistic(case, upper * factor) > case["target_epsilon"]:
                lower = upper * factor
                break
        row = {
            **case,
            "upper": upper,
            "lower": lower,
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(row, file=sys.stderr, flush=True)
        out.append(row)
    print(
        json.dumps(
            {
                "generated_by": "tests/data/make_calibration_vectors.py",
                "date": time.strftime("%Y-%m-%d"),
                "versions": {
                    "dp-accounting": version("dp-accounting"),
                    "scipy": scipy.__version__,
                    "numpy": np.__version__,
                    "python": platform.python_version(),
                },
                "cases": out,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

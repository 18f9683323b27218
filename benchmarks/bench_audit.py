"""Auditor benchmark: soundness, power and speed of ``dpkit.testing`` on the installed mechanisms.

Run: ``python benchmarks/bench_audit.py [--seeds N] [--quick]``. A plain script, not a test.

* soundness: audits of every registered mechanism at several parameter points and seeds, at a
  deliberately loose α = 0.05 (so false violations would be frequent enough to measure: the
  nominal bound is 2α = 0.10 per audit including the fit test) and at the default α = 1e-3;
* power: ε_lb / ε at ε = 1 with the default budget (2·10⁵ samples per input, α = 1e-3);
* speed: wall time of the ``dpkit audit NAME`` command, and of the statistical tier against the
  numpy floor of drawing the same number of uniforms (``rng.random``) in the same run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

import dpkit
from dpkit.testing import audit, parameter_points

POWER = {
    "rr": {"epsilon": 1.0},
    "krr": {"epsilon": 1.0, "k": 4},
    "sue": {"epsilon": 1.0, "k": 4},
    "oue": {"epsilon": 1.0, "k": 4},
    "olh": {"epsilon": 1.0, "k": 4},
    "hr": {"epsilon": 1.0, "k": 4},
    "laplace": {"epsilon": 1.0},
    "geometric": {"epsilon": 1.0},
    "exponential": {"epsilon": 1.0},
    "report_noisy_max": {"epsilon": 1.0},
    "permute_and_flip": {"epsilon": 1.0},
}


def soundness(registry: dpkit.Registry, seeds: int, alpha: float, samples: int) -> None:
    print(f"\nsoundness: α = {alpha:g}, {samples:,} samples per input, {seeds} seed(s) per point")
    print(f"{'mechanism':<18}{'audits':>8}{'violations':>12}{'max ε_lb/ε':>12}")
    total = flagged = 0
    for name in registry.names():
        cls = registry.info(name).cls
        audits = violations = 0
        worst = 0.0
        for point in parameter_points(cls):
            mechanism = cls(**point)
            for seed in range(seeds):
                report = audit(mechanism, samples=samples, alpha=alpha, seed=1000 + seed)
                audits += 1
                violations += report.verdict == "violation"
                if report.claimed_epsilon > 0:
                    worst = max(worst, report.epsilon_lower_bound / report.claimed_epsilon)
        total += audits
        flagged += violations
        print(f"{name:<18}{audits:>8}{violations:>12}{worst:>12.3f}")
    print(f"{'all':<18}{total:>8}{flagged:>12}   (false-violation rate {flagged / total:.3f})")


def power_and_speed(registry: dpkit.Registry) -> None:
    print("\npower and speed at ε = 1, default budget (200,000 samples per input, α = 1e-3)")
    print(f"{'mechanism':<18}{'ε_lb/ε':>8}{'samples':>12}{'audit s':>9}{'floor s':>9}{'ratio':>8}")
    rng = np.random.default_rng(0)
    for name, params in POWER.items():
        if name not in registry.mechanisms:
            continue
        mechanism = registry.mechanism(name, **params)
        start = time.perf_counter()
        report = audit(mechanism, seed=7, exact=False)
        elapsed = time.perf_counter() - start
        start = time.perf_counter()
        rng.random(report.samples)
        floor = time.perf_counter() - start
        print(
            f"{name:<18}{report.epsilon_lower_bound:>8.4f}{report.samples:>12,}"
            f"{elapsed:>9.2f}{floor:>9.4f}{elapsed / floor:>8.0f}"
        )


def command_times(registry: dpkit.Registry) -> None:
    print("\n`dpkit audit NAME` wall time with default settings (incl. interpreter start-up)")
    for name in registry.names():
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "dpkit", "audit", name, *_required(name)],
            capture_output=True,
            text=True,
        )
        print(f"  {name:<18}{time.perf_counter() - start:>7.2f} s  exit {result.returncode}")


def _required(name: str) -> list[str]:
    params = POWER.get(name, {"epsilon": 1.0})
    if name == "gaussian":
        params = {"epsilon": 1.0, "delta": 1e-5}
    return [arg for key, value in params.items() for arg in ("-p", f"{key}={value}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the command timings")
    args = parser.parse_args()
    registry = dpkit.get_registry()
    soundness(registry, args.seeds, alpha=0.05, samples=50_000)
    soundness(registry, args.seeds, alpha=1e-3, samples=200_000)
    power_and_speed(registry)
    if not args.quick:
        command_times(registry)


if __name__ == "__main__":
    main()

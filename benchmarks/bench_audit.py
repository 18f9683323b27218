"""Auditor benchmark: soundness, power and speed of ``dpkit.testing``.

Run: ``python benchmarks/bench_audit.py [--seeds N] [--quick] [--only SECTION ...] [--rounds 3]
[--no-save] [--mechanisms NAME ...] [--first-seed S]``.
A plain script, not a test. Sections:

* ``catalog`` — the catalog of ``tests/support/audit_catalog.py`` (correct mechanisms and
  queries and known bugs, registered as a plugin): the false-violation rate of every correct
  case over ``--seeds`` seeds (default 20) at a deliberately loose α = 0.05, so that false
  alarms would be frequent enough to see. Every audit samples both randomness modes (fast, and
  secure on a keyed SecureRandom), each at α/2. Design rate: a correct case is flagged with
  probability ≤ α by the ε certificates and ≤ α by the goodness-of-fit tests (where a
  distribution is declared), so ≤ 2α = 0.10 per audit, ≤ α = 0.05 for cases without a
  declared distribution. Then the verdict rate on every buggy case (power) over 5 seeds at the
  CI level α = 1e-7, and ε_lb / ε of every correct case at the default budget (200,000
  samples per input for a mechanism, 20,000 for a query) and α = 1e-3;
* ``registry`` — the same soundness measurement on every installed mechanism (or those of
  ``--mechanisms``) at its declared parameter points (α = 0.05), ``--seeds``/10 seeds each
  from ``--first-seed``, with how many false alarms came from the goodness-of-fit test;
* ``startup`` — the wall and CPU time of ``dpkit audit rr`` with a tiny sample (interpreter
  start and imports dominate), against the interpreter floor (``python -c pass``),
  ``import dpkit`` and the ``import scipy.stats`` the auditor used to pay, in the same run;
* ``speed`` — the statistical tier against the numpy floor of drawing the same number of
  uniforms, on tight built-in mechanisms.

Timings (``startup``, ``speed``) go through ``_timing.measure``. Writes sections ``audit``
(catalog and registry: soundness and power), ``audit_startup`` and ``audit_speed`` of
``benchmarks/results.json``, each only when its part runs (``--no-save`` prints only).
Timings on a shared machine are noisy: compare the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import dpkit
from dpkit.testing import audit, parameter_points

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import audit_catalog as catalog
from _results import RATIOS_NOTE, Run
from _timing import measure, ratio

LOOSE_ALPHA = 0.05
CI_ALPHA = 1e-7
DEFAULT_BUDGET = {"samples": 200_000}
DEFAULT_QUERY_BUDGET = {"samples": 20_000}

POWER = {
    "rr": {"epsilon": 1.0},
    "krr": {"epsilon": 1.0, "k": 4},
    "sue": {"epsilon": 1.0, "k": 4},
    "oue": {"epsilon": 1.0, "k": 4},
    "laplace": {"epsilon": 1.0},
    "geometric": {"epsilon": 1.0},
    "exponential": {"epsilon": 1.0},
    "report_noisy_max": {"epsilon": 1.0},
}


AUDIT_COLUMNS = [
    "audits of",
    "α",
    "cases",
    "audits",
    "violations reported",
    "rate",
    "design: expected false ≤",
    "largest ε_lb ÷ ε",
    "median ε_lb ÷ ε",
]


def catalog_soundness(seeds: int) -> dict[str, Any]:
    registry = catalog.catalog_registry()
    correct = [c for c in catalog.CASES if c.expected == "pass"]
    print(f"\ncatalog soundness: {len(correct)} correct cases × {seeds} seeds, α = {LOOSE_ALPHA}")
    print(f"{'case':<28}{'audits':>7}{'false':>7}{'design ≤':>10}{'max ε_lb/ε':>12}{'s/audit':>9}")
    total = flagged = 0
    bound = largest = 0.0
    for case in correct:
        start = time.perf_counter()
        reports = [
            catalog.run_case(case, registry, seed=1000 + s, alpha=LOOSE_ALPHA) for s in range(seeds)
        ]
        per = (time.perf_counter() - start) / seeds
        false = sum(r.verdict == "violation" for r in reports)
        declared = any(m.fit.checked for r in reports for m in r.modes)
        worst = max(r.epsilon_lower_bound / r.claimed_epsilon for r in reports)
        total, flagged = total + len(reports), flagged + false
        design = 2 * LOOSE_ALPHA if declared else LOOSE_ALPHA
        bound, largest = bound + design * len(reports), max(largest, worst)
        print(
            f"{case.label:<28}{len(reports):>7}{false:>7}{design:>10.2f}{worst:>12.3f}{per:>9.2f}"
        )
    print(f"{'all correct cases':<28}{total:>7}{flagged:>7}   rate {flagged / total:.4f}")
    return {
        "audits of": "correct catalog cases",
        "α": LOOSE_ALPHA,
        "cases": len(correct),
        "audits": total,
        "violations reported": flagged,
        "rate": round(flagged / total, 4),
        "design: expected false ≤": round(bound, 1),
        "largest ε_lb ÷ ε": round(largest, 3),
    }


def catalog_power(seeds: int) -> dict[str, Any]:
    registry = catalog.catalog_registry()
    buggy = [c for c in catalog.CASES if c.expected == "violation"]
    print(
        f"\ncatalog power: {len(buggy)} buggy cases × {seeds} seeds, α = {CI_ALPHA:g} (CI budget)"
    )
    print(f"{'case':<38}{'flagged':>9}{'median ε_lb':>13}  truth")
    total = flagged = 0
    for case in buggy:
        reports = [
            catalog.run_case(case, registry, seed=2000 + s, alpha=CI_ALPHA) for s in range(seeds)
        ]
        hits = sum(r.verdict == "violation" for r in reports)
        total, flagged = total + len(reports), flagged + hits
        median = float(np.median([r.epsilon_lower_bound for r in reports]))
        print(f"{case.label:<38}{hits:>5}/{seeds:<3}{median:>13.3f}  {case.truth}")
    return {
        "audits of": "buggy catalog cases",
        "α": CI_ALPHA,
        "cases": len(buggy),
        "audits": total,
        "violations reported": flagged,
        "rate": round(flagged / total, 4),
    }


def catalog_tightness() -> dict[str, Any]:
    registry = catalog.catalog_registry()
    print("\nε_lb / ε of the correct cases at the default budget (α = 1e-3, seed 7)")
    print(f"{'case':<28}{'ε_lb/ε':>8}{'samples':>12}{'seconds':>9}  event")
    ratios = []
    correct = [c for c in catalog.CASES if c.expected == "pass"]
    for case in correct:
        budget = DEFAULT_QUERY_BUDGET if case.query else DEFAULT_BUDGET
        start = time.perf_counter()
        report = catalog.run_case(case, registry, seed=7, alpha=1e-3, budget=budget)
        elapsed = time.perf_counter() - start
        ratio = report.epsilon_lower_bound / report.claimed_epsilon
        ratios.append(ratio)
        event = report.statistical.event[:60]
        print(f"{case.label:<28}{ratio:>8.3f}{report.samples:>12,}{elapsed:>9.2f}  {event}")
    return {
        "audits of": "correct catalog cases, default budget (power: ε_lb ÷ ε)",
        "α": 1e-3,
        "cases": len(correct),
        "audits": len(correct),
        "violations reported": sum(r > 1 for r in ratios),
        "largest ε_lb ÷ ε": round(max(ratios), 3),
        "median ε_lb ÷ ε": round(float(np.median(ratios)), 3),
    }


def registry_soundness(
    seeds: int, names: list[str] | None = None, first_seed: int = 1000
) -> dict[str, Any]:
    registry = dpkit.get_registry()
    print(f"\ninstalled mechanisms: α = {LOOSE_ALPHA}, 50,000 samples, {seeds} seed(s) per point")
    print(f"{'mechanism':<24}{'audits':>8}{'false':>7}{'by fit':>8}{'max ε_lb/ε':>12}")
    total = flagged = 0
    largest = 0.0
    names = names or registry.names()
    for name in names:
        cls = registry.info(name).cls
        reports = [
            audit(cls(**point), samples=50_000, alpha=LOOSE_ALPHA, seed=first_seed + seed)
            for point in parameter_points(cls)
            for seed in range(seeds)
        ]
        false = sum(r.verdict == "violation" for r in reports)
        # the rest: an ε certificate (of either randomness mode)
        by_fit = sum(any(m.fit.mismatch for m in r.modes) for r in reports)
        worst = max(
            (r.epsilon_lower_bound / r.claimed_epsilon for r in reports if r.claimed_epsilon),
            default=0.0,
        )
        total, flagged = total + len(reports), flagged + false
        largest = max(largest, worst)
        print(f"{name:<24}{len(reports):>8}{false:>7}{by_fit:>8}{worst:>12.3f}")
    print(f"{'all':<24}{total:>8}{flagged:>7}   rate {flagged / max(total, 1):.4f}")
    return {
        "audits of": "installed mechanisms at their parameter points",
        "α": LOOSE_ALPHA,
        "cases": len(names),
        "audits": total,
        "violations reported": flagged,
        "rate": round(flagged / max(total, 1), 4),
        "design: expected false ≤": round(2 * LOOSE_ALPHA * total, 1),
        "largest ε_lb ÷ ε": round(largest, 3),
    }


class Child:
    """A command run in a fresh process, as a contender of ``_timing.measure``; its CPU time
    (user + system) is read from ``getrusage`` of the children after each call."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.cpu: list[float] = []

    def __call__(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(self.argv, capture_output=True, check=False, env=_env())
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def startup(rounds: int) -> list[dict[str, Any]]:
    python = sys.executable
    print(f"\nstart-up (median of {rounds} rounds; CPU and wall seconds of a fresh interpreter)")
    children = {
        "python -c pass (floor)": Child([python, "-c", "pass"]),
        "import dpkit": Child([python, "-c", "import dpkit"]),
        "import scipy.special": Child([python, "-c", "import scipy.special"]),
        "import scipy.stats (before)": Child([python, "-c", "import scipy.stats"]),
        "dpkit audit rr --samples 100": Child(
            [python, "-m", "dpkit", "audit", "rr", "-p", "epsilon=1", "--samples", "100"]
        ),
        "dpkit audit count --samples 100": Child(
            [python, "-m", "dpkit", "audit", "count", "-p", "epsilon=1", "--samples", "100"]
        ),
    }
    timed = measure(dict(children), rounds=rounds)
    cpu = {label: statistics.median(child.cpu[1:]) for label, child in children.items()}
    floor = cpu["python -c pass (floor)"]
    print(f"{'command':<34}{'wall s':>8}{'CPU s':>8}{'CPU − floor':>13}")
    rows = []
    for label, timing in timed.items():
        print(f"{label:<34}{timing.wall:>8.3f}{cpu[label]:>8.3f}{cpu[label] - floor:>13.3f}")
        rows.append({
            "command": label,
            "cpu s": round(cpu[label], 3),
            "wall s": round(timing.wall, 3),
            "cpu − floor s": round(cpu[label] - floor, 3),
        })  # fmt: skip
    return rows


def speed(rounds: int) -> list[dict[str, Any]]:
    registry = dpkit.get_registry()
    print(
        "\nstatistical tier vs the numpy floor "
        "(ε = 1, 200,000 samples per input in each mode, α = 1e-3)"
    )
    print(f"{'mechanism':<18}{'ε_lb/ε':>8}{'samples':>12}{'audit s':>9}{'floor s':>9}{'ratio':>8}")
    rng = np.random.default_rng(0)
    rows = []
    for name, params in POWER.items():
        if name not in registry.mechanisms:
            continue
        mechanism = registry.mechanism(name, **params)
        report = audit(mechanism, seed=7, exact=False)
        drawn = report.samples
        timed = measure(
            {
                "audit": partial(audit, mechanism, seed=7, exact=False),
                "floor": partial(rng.random, drawn),
            },
            rounds=rounds,
        )
        times = ratio(timed["audit"], timed["floor"])
        print(
            f"{name:<18}{report.epsilon_lower_bound:>8.4f}{report.samples:>12,}"
            f"{timed['audit'].cpu:>9.2f}{timed['floor'].cpu:>9.4f}{times:>8.0f}"
        )
        rows.append({
            "mechanism": name,
            "ε_lb": round(report.epsilon_lower_bound, 4),
            "samples": drawn,
            "audit cpu s": round(timed["audit"].cpu, 3),
            "floor cpu ms": round(timed["floor"].cpu * 1e3, 2),
            "audit ÷ floor": round(times),
        })  # fmt: skip
    return rows


SECTIONS = ("catalog", "registry", "startup", "speed")
SHARED = "Measured on a shared 2-core machine."


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per correct case (≥ 20)")
    parser.add_argument("--quick", action="store_true", help="3 seeds, no registry section")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (_timing.measure)")
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument(
        "--mechanisms", nargs="*", default=None, help="registry: only these (default: all)"
    )
    parser.add_argument(
        "--first-seed", type=int, default=1000, help="registry: seeds from this one (fresh seeds)"
    )
    args = parser.parse_args()
    seeds = 3 if args.quick else args.seeds
    chosen = args.only or [s for s in SECTIONS if not (args.quick and s == "registry")]
    command = ("python benchmarks/bench_audit.py " + " ".join(sys.argv[1:])).strip()
    harness = {"rounds": args.rounds, "warmup": 1}
    if "startup" in chosen:
        run = Run("audit_startup", command, harness=harness)
        rows = startup(args.rounds)
        if not args.no_save:
            run.save(
                title="Start-up of dpkit audit: CPU and wall seconds of a fresh process",
                columns=["command", "cpu s", "wall s", "cpu − floor s"],
                rows=rows,
                notes=[
                    "Each command runs in a fresh interpreter, through _timing.measure; CPU is the "
                    "child's (getrusage), medians. The floor is python -c pass; import "
                    "scipy.stats is what the auditor used to import (it now imports "
                    "scipy.special only).",
                    SHARED,
                ],
            )
    summary: list[dict[str, Any]] = []
    soundness = Run("audit", command, harness={"seeds": seeds})
    if "catalog" in chosen:
        summary.append(catalog_soundness(seeds))
        summary.append(catalog_power(5 if not args.quick else 2))
        summary.append(catalog_tightness())
    if "registry" in chosen:
        summary.append(registry_soundness(max(1, seeds // 10), args.mechanisms, args.first_seed))
    if summary and not args.no_save:
        soundness.save(
            title="The auditor's soundness (false alarms at a loose α) and power",
            columns=AUDIT_COLUMNS,
            rows=summary,
            notes=[
                f"Soundness: every correct case audited with {seeds} seeds at α = {LOOSE_ALPHA}, "
                "loose on purpose so that false alarms would be frequent enough to see; every "
                "audit samples both randomness modes (fast, and secure on a keyed SecureRandom), "
                "each at α/2, so a correct case is flagged with probability ≤ α by the ε "
                "certificates and ≤ α by the goodness-of-fit tests where a distribution is "
                "declared, and the design bound is Σ (α or 2α) over the audits.",
                f"Power: every buggy case over {5 if not args.quick else 2} seeds at the CI level "
                f"α = {CI_ALPHA:g}, and ε_lb ÷ ε of the correct cases at the default budget "
                "(200,000 samples per input for a mechanism, 20,000 for a query, in each mode).",
                "Cases: tests/support/audit_catalog.py (mechanisms and queries with known privacy).",
            ],
        )
    if "speed" in chosen:
        run = Run("audit_speed", command, harness=harness)
        rows = speed(args.rounds)
        if not args.no_save:
            run.save(
                title="Statistical tier of the auditor against the numpy floor of its draws",
                columns=[
                    "mechanism",
                    "ε_lb",
                    "samples",
                    "audit cpu s",
                    "floor cpu ms",
                    "audit ÷ floor",
                ],
                rows=rows,
                notes=[
                    "ε = 1, 200,000 samples per input in each randomness mode (fast and secure), "
                    "α = 1e-3, exact=False; the floor draws the same number of uniforms "
                    "(rng.random). " + RATIOS_NOTE,
                    SHARED,
                ],
            )


if __name__ == "__main__":
    main()

"""Generate ``accounting_vectors.json``: reference ε values from the peer accountants.

dp-accounting cannot be installed next to dpkit (0.6.0 pins attrs<24), so this script runs in a
separate virtual environment and its output is committed:

    python3 -m venv .venv-peers   # .venv-*/ is git-ignored
    .venv-peers/bin/pip install dp-accounting==0.6.0 prv-accountant==0.2.0
    .venv-peers/bin/python tests/data/make_accounting_vectors.py > tests/data/accounting_vectors.json

Generated on 2026-11-24 with dp-accounting 0.6.0, prv-accountant 0.2.0, scipy 1.17.1, numpy
2.4.6, Python 3.11.7 (about 45 minutes on two busy cores). For each case it records what is
known of the true ε at δ:

* ``pld``: dp-accounting's PLD, pessimistic connect-the-dots at its default grid 1e-4 (an
  upper bound), and ``pld_optimistic``: the same with ``pessimistic_estimate=False`` (a lower
  bound; dp-accounting uses its "privacy buckets" rounding there), for Laplace and the
  subsampled events;
* ``prv``: the PRV accountant's (lower, estimate, upper) with eps_error 0.01 and
  delta_error δ/1000, for the Gaussian, the subsampled Gaussian and Laplace; pure DP is given
  ``eps_max`` = k·ε₀ (its automatic domain is too small there, accounting.md §6.2);
* ``exact``: the exact value where one is known — k Gaussians are one Gaussian of σ/√k
  (Balle & Wang's curve solved with scipy's brentq in log space), and k-fold pure ε-DP is
  k-fold randomized response (Kairouz, Oh & Viswanath 2015, Theorem 3.3, summed with exact
  binomials); both in ``exact_references.py``.

Randomized-response events are composed one at a time in dp-accounting (its accountant
ignores the count of an RR event, accounting.md §6.1); this script only uses the low-level
PLD objects and ``self_compose``, which are not affected.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time

import dp_accounting
import numpy as np
import scipy
from dp_accounting.pld import privacy_loss_distribution as pld
from exact_references import exact_gaussian, exact_rr  # tests/data, beside this script
from prv_accountant import PRVAccountant
from prv_accountant.privacy_random_variables import (
    GaussianMechanism,
    LaplaceMechanism,
    PoissonSubsampledGaussianMechanism,
    PureDPMechanism,
)


def prv(mechanism: object, k: int, delta: float, eps_max: float | None = None) -> list[float] | str:
    """(lower, estimate, upper), or the error prv-accountant raised (its issues #36/#42:
    "Discrete mean differs from continuous mean significantly" for some DP-SGD settings)."""
    try:
        accountant = PRVAccountant(
            prvs=[mechanism],
            max_self_compositions=[k],
            eps_error=0.01,
            delta_error=delta / 1000,
            eps_max=eps_max,
        )
        found = accountant.compute_epsilon(delta=delta, num_self_compositions=[k])
    except (RuntimeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return [float(x) for x in found]


def timed(fn: object) -> tuple[object, float]:
    start = time.perf_counter()
    value = fn()  # type: ignore[operator]
    return value, time.perf_counter() - start


def main() -> None:
    cases: list[dict[str, object]] = []

    def add(kind: str, params: dict[str, object], delta: float, **found: object) -> None:
        cases.append({"kind": kind, **params, "delta": delta, **found})
        print(f"{kind} {params} δ={delta}: {found}", file=sys.stderr, flush=True)

    for sigma in (0.5, 1.0, 2.0, 5.0):
        for k in (1, 10, 100, 1000):
            for delta in (1e-5, 1e-6):
                # k Gaussians are one Gaussian of σ/√k: dp-accounting builds that PLD directly
                # (its self_compose of a small σ takes minutes, accounting.md §6.4)
                single = sigma / math.sqrt(k)
                found: dict[str, object] = {"exact": exact_gaussian(1 / single, delta)}
                if 1 / single <= 20:
                    found["pld"] = pld.from_gaussian_mechanism(single).get_epsilon_for_delta(delta)
                if k <= 100:
                    found["prv"] = prv(GaussianMechanism(sigma), k, delta)
                add("gaussian", {"noise_multiplier": sigma, "count": k}, delta, **found)
    for eps0 in (0.1, 0.5, 1.0, 2.0):
        for k in (10, 100):
            for delta in (1e-5, 1e-6):
                parameter = 1 / eps0
                upper = pld.from_laplace_mechanism(parameter).self_compose(k)
                lower = pld.from_laplace_mechanism(parameter, pessimistic_estimate=False)
                add(
                    "laplace",
                    {"epsilon": eps0, "count": k},
                    delta,
                    pld=upper.get_epsilon_for_delta(delta),
                    pld_optimistic=lower.self_compose(k).get_epsilon_for_delta(delta),
                    prv=prv(LaplaceMechanism(eps0), k, delta),
                )
                add(
                    "pure",
                    {"epsilon": eps0, "count": k},
                    delta,
                    exact=exact_rr(eps0, k, delta),
                    prv=prv(PureDPMechanism(eps0), k, delta, eps_max=2 * k * eps0),
                )
    for q in (0.001, 0.01, 0.1):
        for sigma in (0.5, 0.8, 1.0, 2.0):
            for k in (100, 1000, 10000):
                if q == 0.1 and sigma < 1.0 and k == 10000:
                    continue  # ε in the hundreds: no DP-SGD run is there
                delta = 1e-5
                (upper, seconds) = timed(
                    lambda s=sigma, r=q, n=k, d=delta: (
                        pld.from_gaussian_mechanism(s, sampling_prob=r)
                        .self_compose(n)
                        .get_epsilon_for_delta(d)
                    )
                )
                lower = pld.from_gaussian_mechanism(
                    sigma, sampling_prob=q, pessimistic_estimate=False
                )
                add(
                    "subsampled_gaussian",
                    {"noise_multiplier": sigma, "sampling_rate": q, "count": k},
                    delta,
                    pld=upper,
                    pld_seconds=round(seconds, 3),
                    pld_optimistic=lower.self_compose(k).get_epsilon_for_delta(delta),
                    prv=prv(PoissonSubsampledGaussianMechanism(q, sigma), k, delta),
                )
    for q in (0.01, 0.1):
        for eps0 in (0.5, 1.0, 2.0):
            for k in (100, 1000):
                delta = 1e-6
                upper = pld.from_laplace_mechanism(1 / eps0, sampling_prob=q).self_compose(k)
                lower = pld.from_laplace_mechanism(
                    1 / eps0, sampling_prob=q, pessimistic_estimate=False
                )
                add(
                    "subsampled_laplace",
                    {"epsilon": eps0, "sampling_rate": q, "count": k},
                    delta,
                    pld=upper.get_epsilon_for_delta(delta),
                    pld_optimistic=lower.self_compose(k).get_epsilon_for_delta(delta),
                )
    document = {
        "generated_by": "tests/data/make_accounting_vectors.py",
        "command": (
            ".venv-peers/bin/python tests/data/make_accounting_vectors.py"
            " > tests/data/accounting_vectors.json"
        ),
        "date": time.strftime("%Y-%m-%d"),
        "versions": {
            "dp-accounting": dp_accounting.__version__
            if hasattr(dp_accounting, "__version__")
            else "0.6.0",
            "prv-accountant": "0.2.0",
            "scipy": scipy.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "cases": cases,
    }
    json.dump(document, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

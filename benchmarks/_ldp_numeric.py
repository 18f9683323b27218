"""The numeric local-DP protocols in bench_ldp.py: speed against the numpy floor, MSE against ε.

Floors are the least a float implementation of each protocol does in plain numpy, written from
the papers (no validation, no scaling back to the data's range, one ``Generator``):

* duchi: one uniform per value against 1/2 + t/(2B);
* pm: two uniforms per value (band or not; the position), as in Wang et al. 2019, Algorithm 2;
* hm: one more uniform for the branch, then the pm or duchi floor on each part;
* sw: two uniforms per value (Li et al. 2020);
* duchi_multi: v from d uniforms per row, then the vertex by a uniform sign vector flipped to
  the chosen side (the even-d redraws ignored: a floor, not a correct sampler);
* pm_multi / hm_multi: k attributes per row by ``argpartition`` of random keys, then the
  one-dimensional floor at ε/k.

peers: multi-freq-ldpy 0.2.5 and pure-ldp 1.2.0 implement no numeric mean or distribution
protocol (multi-freq-ldpy's ``dBitFlipPM`` is a bucketed histogram for telemetry, not a mean);
sunDP has per-user Duchi and piecewise mechanisms but is not on PyPI. So there is no peer to time
here; the script says so when run.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import dpkit_ldp
import numpy as np
from _timing import measure, ratio

import dpkit

SCALAR = ("duchi", "pm", "hm", "sw")
VECTOR = ("duchi_multi", "pm_multi", "hm_multi")


def duchi_floor(t: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    bound = 1.0 / math.tanh(epsilon / 2.0)
    return np.where(rng.random(t.size) < 0.5 + t / (2 * bound), bound, -bound)


def pm_floor(t: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    z = math.exp(epsilon / 2.0)
    c = (z + 1) / (z - 1)
    left = (c + 1) / 2 * t - (c - 1) / 2
    u = rng.random(t.size)
    w = (c + 1) * u
    outside = np.where(w < left + c, w - c, w - 1)  # [−C, l) then (r, C]: r − (l + C) = −1
    return np.where(rng.random(t.size) < z / (z + 1), left + (c - 1) * u, outside)


def hm_floor(t: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    alpha = 1 - math.exp(-epsilon / 2) if epsilon > 0.61 else 0.0
    out = np.empty(t.size)
    chosen = rng.random(t.size) < alpha
    out[chosen] = pm_floor(t[chosen], epsilon, rng)
    out[~chosen] = duchi_floor(t[~chosen], epsilon, rng)
    return out


def sw_floor(v: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    e = math.exp(epsilon)
    b = (epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon))
    u = rng.random(v.size)
    inside = rng.random(v.size) < 2 * b * e / (2 * b * e + 1)
    return np.where(inside, v - b + 2 * b * u, np.where(u < v, u - b, u + b))


def duchi_multi_floor(t: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    n, d = t.shape
    v = np.where(rng.random((n, d)) < (1 + t) / 2, 1, -1).astype(np.int8)
    w = np.where(rng.random((n, d)) < 0.5, 1, -1).astype(np.int8)
    w[w.sum(axis=1) < 0] *= -1
    heads = rng.random(n) < math.exp(epsilon) / (math.exp(epsilon) + 1)
    return (v * w) * np.where(heads, 1.0, -1.0)[:, None]


def sampled_floor(
    one: Callable[..., np.ndarray], t: np.ndarray, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    n, d = t.shape
    k = max(1, min(d, math.floor(epsilon / 2.5)))
    columns = np.argpartition(rng.random((n, d)), k - 1, axis=1)[:, :k].reshape(-1)
    rows = np.repeat(np.arange(n), k)
    out = np.zeros((n, d))
    out[rows, columns] = d / k * one(t[rows, columns], epsilon / k, rng)
    return out


FLOORS: dict[str, Callable[..., np.ndarray]] = {
    "duchi": duchi_floor,
    "pm": pm_floor,
    "hm": hm_floor,
    "sw": sw_floor,
    "duchi_multi": duchi_multi_floor,
    "pm_multi": partial(sampled_floor, pm_floor),
    "hm_multi": partial(sampled_floor, hm_floor),
}


def _mechanism(name: str, epsilon: float, d: int) -> Any:
    extra: dict[str, Any] = {"dimension": d} if name in VECTOR else {}
    return dpkit.mechanism(name, epsilon=epsilon, lower=-1.0, upper=1.0, **extra)


def label(name: str, d: int) -> str:
    return name + (f", d = {d}" if name in VECTOR else "")


def speed(n: int, d: int, rounds: int, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Perturbation of n values (n/d rows of d for the vector protocols) at ε = 4: the floor,
    fast and secure mode through ``_timing.measure`` (medians of per-round CPU ratios)."""
    out = {}
    secure = dpkit.SecureRandom()
    for name in SCALAR + VECTOR:
        mech = _mechanism(name, 4.0, d)
        shape = (n // d, d) if name in VECTOR else (n,)
        values = rng.uniform(0.0, 1.0, size=shape) if name == "sw" else rng.uniform(-1, 1, shape)
        timed = measure(
            {
                "floor": partial(FLOORS[name], values, 4.0, rng),
                "fast": partial(mech.randomize, values, rng=rng),
                "secure": partial(mech.randomize, values, rng=secure),
            },
            rounds=rounds,
        )
        floor = timed["floor"]
        out[label(name, d)] = {
            "floor cpu ms": round(floor.cpu * 1e3, 2),
            "fast ÷ floor": round(ratio(timed["fast"], floor), 2),
            "secure ÷ floor": round(ratio(timed["secure"], floor), 2),
            "secure ÷ fast": round(ratio(timed["secure"], timed["fast"]), 2),
        }
        print(
            f"{label(name, d):24s}", "  ".join(f"{k} {v}" for k, v in out[label(name, d)].items())
        )
    return out


def accuracy(
    n: int, d: int, epsilons: list[float], trials: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Empirical MSE of the mean (first coordinate) over ``trials`` report-level runs on fixed
    data (Beta(2, 5) on [−1, 1]) against the papers' variance at these data
    (Σ variance_at/n²) and the worst case; the ratio's ``se`` is its standard error from the
    spread of the squared errors."""
    rows = []
    for name in ("duchi", "pm", "hm", *VECTOR):
        rows_n = max(2, n // d) if name in VECTOR else n
        shape = (rows_n, d) if name in VECTOR else (rows_n,)
        values = 2.0 * rng.beta(2.0, 5.0, size=shape) - 1.0
        first = values.reshape(rows_n, -1)[:, 0]
        for epsilon in epsilons:
            mech = _mechanism(name, epsilon, d)
            exact = np.asarray(mech.variance_at(values)).reshape(rows_n, -1)[:, 0].sum() / rows_n**2
            worst = float(mech.worst_case_variance()[0]) / rows_n
            squared = np.empty(trials)
            for i in range(trials):
                reports = mech.randomize(values, rng=rng).reshape(rows_n, -1)[:, 0]
                squared[i] = (reports.mean() - first.mean()) ** 2
            row = {
                "protocol": label(name, d),
                "epsilon": epsilon,
                "users": rows_n,
                "mse": float(squared.mean()),
                "variance": float(exact),
                "worst": worst,
                "ratio": float(squared.mean() / exact),
                "se": float(squared.std(ddof=1) / math.sqrt(trials) / exact),
            }
            print(
                "  ".join(
                    f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                )
            )
            rows.append(row)
    return rows


def simulation(rng: np.random.Generator) -> dict[str, float]:
    """Count-level simulation (duchi, sw) of 10⁹ users with 100 distinct values: CPU ms per
    draw (median of 5 rounds of ``_timing.measure``)."""
    distinct = np.linspace(0.0, 1.0, 100)
    counts = np.full(100, 10**7)
    calls = {
        name: partial(
            dpkit_ldp.simulate_numeric,
            dpkit.mechanism(name, epsilon=1.0, lower=0.0, upper=1.0),
            distinct,
            counts=counts,
            rng=rng,
        )
        for name in ("duchi", "sw")
    }
    timed = measure(calls, rounds=5)
    return {name: round(timing.cpu * 1e3, 2) for name, timing in timed.items()}


def peer_note() -> str:
    found = [
        f"{name} installed" if importlib.util.find_spec(module) else f"{name} not installed"
        for name, module in (("multi-freq-ldpy", "multi_freq_ldpy"), ("pure-ldp", "pure_ldp"))
    ]
    return (
        "peers: " + ", ".join(found) + ". Neither implements a numeric mean or distribution "
        "protocol (Duchi et al., PM, HM, SW), so none is timed; sunDP has per-user Duchi and PM "
        "but is not on PyPI."
    )

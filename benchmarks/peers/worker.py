"""Time the peer libraries and dpkit side by side, in one process of a peer environment.

Run (from the repository root, with a peer environment made by ``make_venvs.py``)::

    /tmp/dpkit-peers/central/bin/python benchmarks/peers/worker.py central [--rounds 7]
    /tmp/dpkit-peers/ldp/bin/python benchmarks/peers/worker.py ldp [--rounds 7]

It prints one JSON document on stdout; ``benchmarks/_peers.py`` runs it for the main scripts.

Every contender goes through ``_timing.measure`` in the same call, dpkit included: the same
warm-up call (which also absorbs numba's JIT compilation for multi-freq-ldpy), the same number
of rounds in rotated order, CPU and wall clock per round. The peers' per-value APIs (one call
per user or per answer, as their documentation uses them) are timed on ``--subset`` values and
their times scaled by n/subset; dpkit runs its vectorised call on all n values. A speed-up is
the median over rounds of (peer time scaled to n) / (dpkit time), in the same mode: dpkit's
secure mode against a peer's cryptographically seeded default (diffprivlib with
``random_state=None`` uses ``secrets.SystemRandom``; OpenDP always uses its CSPRNG), and
dpkit's fast mode (a seeded numpy Generator) against a peer seeded through numpy. The LDP
peers have no secure mode (they draw from numpy's global state or numba's generator), so they
appear in the fast column only.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _timing import Timing, measure, ratio

import dpkit

SEED = 20241124


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class Task:
    """One task: dpkit contenders on n values, peer contenders on a subset (scaled to n)."""

    def __init__(self, name: str, n: int) -> None:
        self.name = name
        self.n = n
        self.dpkit: dict[str, Callable[[], object]] = {}  # mode -> call
        self.peers: list[tuple[str, str, Callable[[], object], int]] = []  # peer, mode, call, m

    def peer(self, label: str, mode: str, call: Callable[[], object], timed: int) -> None:
        self.peers.append((label, mode, call, timed))


def run(tasks: list[Task], rounds: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    for task in tasks:
        contenders: dict[str, Callable[[], object]] = {
            f"dpkit {mode}": call for mode, call in task.dpkit.items()
        }
        for label, mode, call, _ in task.peers:
            contenders[f"{label} ({mode})"] = call
        try:
            timed = measure(contenders, rounds=rounds)
        except Exception as error:  # a broken peer install: reported, not fatal
            rows.append({"task": task.name, "error": f"{type(error).__name__}: {error}"[:200]})
            continue
        scaled: dict[str, Timing] = {}
        for label, mode, _, m in task.peers:
            key = f"{label} ({mode})"
            scaled[key] = timed[key].scaled(task.n / m)
        for key, timing in list(timed.items()):
            t = scaled.get(key, timing)
            rows.append(
                {
                    "task": task.name,
                    "contender": key,
                    "cpu_s": t.cpu,
                    "wall_s": t.wall,
                    "timed_on": next(
                        (m for lb, md, _, m in task.peers if key == f"{lb} ({md})"), task.n
                    ),
                }
            )
        for label, mode, _, m in task.peers:
            ours = timed.get(f"dpkit {mode}")
            if ours is None:
                continue
            key = f"{label} ({mode})"
            comparisons.append(
                {
                    "task": task.name,
                    "peer": label,
                    "mode": mode,
                    "speedup": ratio(scaled[key], ours),
                    "speedup_wall": ratio(scaled[key], ours, "wall"),
                    "peer_timed_on": m,
                    "n": task.n,
                }
            )
    return {"rows": rows, "peers": comparisons}


def central_tasks(n: int, subset: int) -> list[Task]:
    data = np.random.default_rng(SEED)
    values = data.normal(100.0, 10.0, n)
    sample = values[:subset].tolist()
    laplace: Any = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    gaussian: Any = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-6, sensitivity=1.0)
    exponential: Any = dpkit.mechanism("exponential", epsilon=1.0)
    fast = np.random.default_rng(SEED + 1)
    row = data.normal(0.0, 20.0, 10_000)
    draws, peer_draws = 1000, 100
    tasks = []

    lap = Task(f"laplace, {n:.0e} answers", n)
    lap.dpkit = {
        "secure": lambda: laplace.randomize(values),
        "fast": lambda: laplace.randomize(values, rng=fast),
    }
    gau = Task(f"gaussian, {n:.0e} answers", n)
    gau.dpkit = {
        "secure": lambda: gaussian.randomize(values),
        "fast": lambda: gaussian.randomize(values, rng=fast),
    }
    exp = Task("exponential, 1000 draws from 10⁴ candidates", draws)
    exp.dpkit = {
        "secure": lambda: exponential.randomize(row, size=draws),
        "fast": lambda: exponential.randomize(row, rng=fast, size=draws),
    }
    try:
        from diffprivlib.mechanisms import Exponential, GaussianAnalytic, Laplace

        lib = f"diffprivlib {version('diffprivlib')}"
        for mode, state in (("secure", None), ("fast", np.random.RandomState(SEED))):
            lap_peer = Laplace(epsilon=1.0, sensitivity=1.0, random_state=state)
            lap.peer(lib, mode, lambda m=lap_peer: [m.randomise(v) for v in sample], subset)  # type: ignore[misc]  # a lambda with default arguments
            gau_peer = GaussianAnalytic(
                epsilon=1.0, delta=1e-6, sensitivity=1.0, random_state=state
            )
            gau.peer(lib, mode, lambda m=gau_peer: [m.randomise(v) for v in sample], subset)  # type: ignore[misc]  # a lambda with default arguments
            # diffprivlib's convention: Pr ∝ exp(ε·u/(2Δ)); the same law at its ε = 2·rate.
            exp_peer = Exponential(
                epsilon=2 * exponential.rate,
                sensitivity=1.0,
                utility=row.tolist(),
                candidates=list(range(row.size)),
                random_state=state,
            )
            exp.peer(
                lib,
                mode,
                lambda m=exp_peer: [m.randomise() for _ in range(peer_draws)],  # type: ignore[misc]
                peer_draws,
            )
    except Exception as error:  # ImportError, or sklearn-internal breakage (central-peers notes)
        print(f"diffprivlib unavailable: {type(error).__name__}: {error}", file=sys.stderr)
    tasks += [lap, gau, exp]

    scale = 10
    dl = Task(f"exact discrete Laplace, scale {scale}, {n:.0e} draws", n)
    dl.dpkit = {"secure": lambda: dpkit.plugin.discrete_laplace(scale, size=n)}
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        lib = f"OpenDP {version('opendp')}"
        ints = [0] * subset
        integer = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=float(scale)
        )
        dl.peer(lib, "secure", lambda: integer(ints), subset)
        floats = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
        small = max(1, subset // 10)  # OpenDP's float samplers run at ~30k values/s
        float_lap = dp.m.make_laplace(*floats, scale=laplace.scale)
        lap.peer(lib, "secure", lambda: float_lap(sample[:small]), small)
        float_gau = dp.m.make_gaussian(*floats[:1], dp.l2_distance(T=float), scale=gaussian.sigma)
        gau.peer(lib, "secure", lambda: float_gau(sample[:small]), small)
    except Exception as error:
        print(f"OpenDP unavailable: {type(error).__name__}: {error}", file=sys.stderr)
    tasks.append(dl)
    return tasks


def ldp_tasks(n: int, subset: int) -> list[Task]:
    data = np.random.default_rng(SEED)
    fast = np.random.default_rng(SEED + 1)
    tasks = []
    for name, k in (("rr", 2), ("krr", 16), ("oue", 64)):
        values = data.integers(0, k, n)
        sample = [int(v) for v in values[:subset]]
        mech = (
            dpkit.mechanism(name, epsilon=1.0)
            if name == "rr"
            else dpkit.mechanism(name, epsilon=1.0, k=k)
        )
        task = Task(f"{name}{'' if name == 'rr' else f', k = {k}'}, {n:.0e} values", n)
        task.dpkit = {"fast": lambda m=mech, v=values: m.randomize(v, rng=fast)}  # type: ignore[misc]  # a lambda with default arguments
        np.random.seed(SEED)  # both peers draw from numpy's global state (or numba's)
        try:
            from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
            from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

            lib = f"multi-freq-ldpy {version('multi-freq-ldpy')}"
            if name == "oue":
                task.peer(
                    lib,
                    "fast",
                    lambda s=sample: [UE_Client(v, 64, 1.0, True) for v in s],  # type: ignore[misc]  # a lambda with default arguments
                    subset,
                )
            else:
                task.peer(
                    lib,
                    "fast",
                    lambda s=sample, kk=k: [GRR_Client(v, kk, 1.0) for v in s],  # type: ignore[misc]  # a lambda with default arguments
                    subset,
                )
        except Exception as error:
            print(f"multi-freq-ldpy unavailable: {type(error).__name__}: {error}", file=sys.stderr)
        try:
            lib = f"pure-ldp {version('pure-ldp')}"
            if name == "oue":
                from pure_ldp.frequency_oracles.unary_encoding import UEClient

                client: Any = UEClient(epsilon=1.0, d=64, use_oue=True, index_mapper=lambda x: x)
            else:
                from pure_ldp.frequency_oracles.direct_encoding import DEClient

                client = DEClient(epsilon=1.0, d=k, index_mapper=lambda x: x)
            task.peer(lib, "fast", lambda c=client, s=sample: [c.privatise(v) for v in s], subset)  # type: ignore[misc]  # a lambda with default arguments
        except Exception as error:
            print(f"pure-ldp unavailable: {type(error).__name__}: {error}", file=sys.stderr)
        tasks.append(task)
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("kind", choices=("central", "ldp"))
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--subset", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tasks = (
        central_tasks(args.n, args.subset)
        if args.kind == "central"
        else ldp_tasks(args.n, args.subset)
    )
    result = run(tasks, args.rounds)
    result["environment"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "dpkit": dpkit.__version__,
        "peers": {
            name: version(name)
            for name in (
                "diffprivlib",
                "opendp",
                "scikit-learn",
                "pure-ldp",
                "multi-freq-ldpy",
                "numba",
            )
        },
        "harness": {"rounds": args.rounds, "warmup": 1, "subset": args.subset, "n": args.n},
    }
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()

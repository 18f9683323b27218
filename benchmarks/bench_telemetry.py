"""Telemetry at scale: heavy hitters and sketches on 10⁶ devices, against pure-ldp.

Run: ``nice .venv/bin/python benchmarks/bench_telemetry.py [--users 1000000] [--peer-users
20000] [--no-save]``

Two populations of ``--users`` devices: (1) a Zipf(1.1) law over 2³² items (rank r drawn from
the Zipf law truncated to 2³², mapped to a 32-bit string by the bijection r ↦ (a·r + b) mod 2³²,
a odd); (2) the words of a real text corpus that Python ships, the reference documentation in
``pydoc_data.topics`` (its word frequencies; words cut to 8 bytes for the 64-bit heavy-hitter
items). At ε ∈ {1, 2, 4}:

* **heavy hitters without candidates** — pem (step 4) and treehist (step 4 on 32 bits, 8 on 64,
  split 0.5): precision and recall of the 20 items found against the true top 20, and the
  RMSE of their estimated counts (over the items found, against their true counts), as a
  share of n;
* **sketches with candidates** — cms and hcms (m = 1024, k = 256): the RMSE of the true top
  20's estimated counts, as a share of n.

Speed (``_timing.measure``, 3 rounds, CPU clock): the client per report and the server per 10⁶
reports, in fast and secure mode, at ε = 2; and one count-level simulation of 10⁹ devices
(``simulate``: cms, hcms, dbitflip, one_bit_mean).

**pure-ldp** (1.2.0, its own environment: ``python benchmarks/peers/make_venvs.py telemetry``;
``peer_telemetry.py``) runs the same four protocols at equal ε and report size (the same m, k,
steps and OLH range) on the first ``--peer-users`` devices of the Zipf population — its
per-report Python loops take minutes at 10⁶ — with the heavy-hitter items cut to their first
12 bits (pure-ldp's local-hashing server keeps a float per item of the domain, 64 GiB at 2³³,
and aggregates each report by a loop over the whole domain);
dpkit runs the same subset: errors are
compared there, and speed-ups are of CPU time on that subset (dpkit fast mode against pure-ldp,
which draws from numpy's global generator).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from _peers import peers_python
from _results import Run
from _timing import measure

import dpkit

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (1.0, 2.0, 4.0)
TOP = 20
WIDTH, HASHES = 1024, 256
#: Item bits of the heavy-hitter comparison with pure-ldp: its local-hashing server keeps a
#: float per item of the domain (np.zeros(d): 64 GiB at 2³³) and aggregates each report by a
#: Python loop over the whole domain (about 0.7 s per report at 2²⁰).
PEER_BITS = 12


def zipf_population(n: int, rng: np.random.Generator) -> np.ndarray:
    """n 32-bit items: Zipf(1.1) ranks truncated to 2³², through an odd affine bijection."""
    ranks = np.empty(0, dtype=np.uint64)
    while ranks.size < n:
        draw = rng.zipf(1.1, size=2 * n).astype(np.uint64)
        ranks = np.concatenate([ranks, draw[draw <= 2**32]])
    a, b = np.uint64(2_654_435_761), np.uint64(0x9E3779B9)
    with np.errstate(over="ignore"):
        items: np.ndarray = ((ranks[:n] - np.uint64(1)) * a + b) & np.uint64(0xFFFFFFFF)
    return items


def corpus_population(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n words drawn from the word frequencies of Python's own reference text (pydoc_data):
    (words as bytes, the same words as 64-bit items — their first 8 bytes)."""
    from pydoc_data.topics import topics

    text = " ".join(topics.values()).lower()
    words = re.findall(r"[a-z][a-z_]+", text)
    counts = Counter(words)
    vocabulary = np.array(sorted(counts), dtype="S")
    weights = np.array([counts[w.decode()] for w in vocabulary], dtype=np.float64)
    drawn = vocabulary[rng.choice(vocabulary.size, size=n, p=weights / weights.sum())]
    padded = np.zeros((n, 8), dtype=np.uint8)
    raw = drawn.astype("S8")
    padded[:, : raw.dtype.itemsize] = raw.view(np.uint8).reshape(n, -1)
    return drawn, padded.view(">u8").reshape(n).astype(np.uint64)


def top_items(values: np.ndarray, k: int) -> tuple[np.ndarray, dict[Any, int]]:
    unique, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return unique[order[:k]], dict(zip(unique.tolist(), counts.tolist(), strict=True))


def heavy_scores(
    found: np.ndarray, estimates: np.ndarray, truth: np.ndarray, counts: dict[Any, int], n: int
) -> dict[str, float]:
    hits = len(set(found.tolist()) & set(truth.tolist()))
    true_counts = np.array([counts.get(item, 0) for item in found.tolist()], dtype=np.float64)
    rmse = (
        float(np.sqrt(np.mean((np.asarray(estimates) - true_counts) ** 2)))
        if found.size
        else math.nan
    )
    return {
        "precision": hits / max(1, found.size),
        "recall": hits / truth.size,
        "rmse / n": rmse / n,
    }


def sketch_rmse(estimates: np.ndarray, truth: np.ndarray, counts: dict[Any, int], n: int) -> float:
    true_counts = np.array([counts[item] for item in truth.tolist()], dtype=np.float64)
    return float(np.sqrt(np.mean((np.asarray(estimates) - true_counts) ** 2))) / n


def mechanisms(epsilon: float, bits: int) -> dict[str, dpkit.plugin.Mechanism]:
    step = 4 if bits == 32 else 8
    return {
        "pem": dpkit.mechanism("pem", epsilon=epsilon, bits=bits, top=TOP, step=4),
        "treehist": dpkit.mechanism("treehist", epsilon=epsilon, bits=bits, top=TOP, step=step),
        "cms": dpkit.mechanism("cms", epsilon=epsilon, width=WIDTH, hashes=HASHES),
        "hcms": dpkit.mechanism("hcms", epsilon=epsilon, width=WIDTH, hashes=HASHES),
    }


def run_dpkit(
    name: str, mech: dpkit.plugin.Mechanism, items: np.ndarray, bit_items: np.ndarray,
    truth: np.ndarray, bit_truth: np.ndarray, counts: dict[Any, int], bit_counts: dict[Any, int],
    rng: np.random.Generator,
) -> dict[str, float]:  # fmt: skip
    n = items.size
    if name in ("pem", "treehist"):
        found = dpkit.estimate(mech, mech.randomize(bit_items, rng=rng))
        return heavy_scores(found.items, found.estimates, bit_truth, bit_counts, n)
    sketch = dpkit.estimate(mech, mech.randomize(items, rng=rng))
    return {"rmse / n": sketch_rmse(sketch.estimate(truth).estimates, truth, counts, n)}


def speed(users: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Client µs per report and server s per 10⁶ reports, fast and secure, at ε = 2."""
    values = zipf_population(users, rng)
    rows = []
    for name, mech in mechanisms(2.0, 32).items():
        reports: dict[str, Any] = {}

        def client(
            mode: str,
            mech: dpkit.plugin.Mechanism = mech,
            data: np.ndarray = values,
            reports: dict[str, Any] = reports,
        ) -> None:
            generator = np.random.default_rng(1) if mode == "fast" else None
            reports[mode] = mech.randomize(data, rng=generator)  # type: ignore[arg-type]

        def server(mech: dpkit.plugin.Mechanism = mech, reports: dict[str, Any] = reports) -> None:
            dpkit.estimate(mech, reports["fast"])

        timed = measure(
            {"fast": lambda: client("fast"), "secure": lambda: client("secure")}, rounds=3
        )
        timed.update(measure({"server": server}, rounds=3))
        row = {
            "task": f"{name}, ε = 2, {users:.0e} reports",
            "client µs/report (fast)": timed["fast"].cpu / users * 1e6,
            "client µs/report (secure)": timed["secure"].cpu / users * 1e6,
            "server s per 10⁶ reports": timed["server"].cpu / users * 1e6,
        }
        print(row)
        rows.append(row)
    return rows


def simulation(rng: np.random.Generator) -> list[dict[str, Any]]:
    """CPU seconds of one count-level simulation of 10⁹ devices (10⁹ − 1 for dbitflip, below
    numpy's hypergeometric range), at ε = 2: the sketches over the 10⁴ heaviest items of a
    Zipf(1.1) law, dbitflip over 1024 buckets, one_bit_mean over 1001 values."""
    ranks = np.arange(1, 10_001)
    law = ranks**-1.1 / np.sum(ranks**-1.1)
    items = np.array([f"item{r}" for r in ranks])
    devices = rng.multinomial(10**9, law)
    buckets = rng.multinomial(10**9 - 1, np.full(1024, 1 / 1024))
    values = np.linspace(0.0, 1.0, 1001)
    held = rng.multinomial(10**9, np.full(values.size, 1 / values.size))
    sketches = mechanisms(2.0, 32)
    cms, hcms = sketches["cms"], sketches["hcms"]
    flips = dpkit.mechanism("dbitflip", epsilon=2.0, k=1024, d=4)
    mean = dpkit.mechanism("one_bit_mean", epsilon=2.0, lower=0.0, upper=1.0, intervals=4)
    runs = {
        f"cms (m = {WIDTH}, k = {HASHES})": lambda: cms.simulate(items, devices, rng=rng),
        f"hcms (m = {WIDTH}, k = {HASHES})": lambda: hcms.simulate(items, devices, rng=rng),
        "dbitflip (k = 1024, d = 4)": lambda: flips.simulate(buckets, rng=rng),
        "one_bit_mean (s = 4)": lambda: mean.simulate(values, held, rng=rng),
    }
    timed = measure(runs, rounds=3)
    rows = []
    for label in runs:
        row = {"task": f"simulate 10⁹ devices: {label}", "simulation s": timed[label].cpu}
        print(row)
        rows.append(row)
    return rows


def run_peers(
    values: np.ndarray, rng: np.random.Generator
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """pure-ldp and dpkit on the same devices: (rows, peer speed-ups, note)."""
    python = peers_python("telemetry")
    if not python.exists():
        return [], [], f"pure-ldp skipped: no environment at {python.parent.parent}"
    n = values.size
    short = values >> np.uint64(32 - PEER_BITS)  # pure-ldp's servers hold a count per item
    data = {"cms": values, "hcms": values, "pem": short, "treehist": short}
    tops = {name: top_items(v, TOP) for name, v in data.items()}
    rows, peers = [], []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, v in data.items():
            paths[name] = Path(tmp) / f"{name}.npy"
            np.save(paths[name], v)
        tasks = []
        for epsilon in EPSILONS:
            for name in ("cms", "hcms", "pem", "treehist"):
                tasks.append(
                    {
                        "name": f"{name} ε={epsilon:g}", "protocol": name, "epsilon": epsilon,
                        "values": str(paths[name]), "width": WIDTH, "hashes": HASHES,
                        "bits": PEER_BITS, "top": TOP, "step": 4,
                        "candidates": tops[name][0].tolist(),
                    }
                )  # fmt: skip
        spec = Path(tmp) / "tasks.json"
        spec.write_text(json.dumps(tasks), encoding="utf-8")
        done = subprocess.run(
            [str(python), str(ROOT / "benchmarks" / "peer_telemetry.py"), str(spec)],
            capture_output=True, text=True, check=False, cwd=ROOT / "benchmarks",
        )  # fmt: skip
        if done.returncode != 0:
            return [], [], f"pure-ldp failed: {done.stderr.strip()[-300:]}"
        result = json.loads(done.stdout)
    peer = f"pure-ldp {result['version']}"
    for task, outcome in zip(tasks, result["results"], strict=True):
        name, epsilon = task["protocol"], task["epsilon"]
        truth, counts = tops[name]
        mech = mechanisms(epsilon, PEER_BITS)[name]
        if name == "treehist":
            mech = dpkit.mechanism("treehist", epsilon=epsilon, bits=PEER_BITS, top=TOP, step=4)
        ours: dict[str, Any] = {}

        def client(
            mech: dpkit.plugin.Mechanism = mech, name: str = name, ours: dict[str, Any] = ours
        ) -> None:
            ours["reports"] = mech.randomize(data[name], rng=rng)

        def server(mech: dpkit.plugin.Mechanism = mech, ours: dict[str, Any] = ours) -> None:
            ours["estimate"] = dpkit.estimate(mech, ours["reports"])

        timed = measure({"client": client}, rounds=1, warmup=0)
        timed.update(measure({"server": server}, rounds=1, warmup=0))
        if name in ("pem", "treehist"):
            mine = heavy_scores(
                ours["estimate"].items, ours["estimate"].estimates, truth, counts, n
            )
            theirs = heavy_scores(
                np.array(outcome["items"], dtype=np.uint64), np.array(outcome["estimates"]),
                truth, counts, n,
            )  # fmt: skip
        else:
            mine = {
                "rmse / n": sketch_rmse(
                    ours["estimate"].estimate(truth).estimates, truth, counts, n
                )
            }
            theirs = {"rmse / n": sketch_rmse(np.array(outcome["estimates"]), truth, counts, n)}
        ours_time = timed["client"].cpu + timed["server"].cpu
        their_time = outcome["client"] + outcome["server"]
        row = {
            "data": f"Zipf(1.1) over 2³², first {n:,} devices"
            + (f" (items cut to {PEER_BITS} bits)" if name in ("pem", "treehist") else ""),
            "protocol": name,
            "ε": epsilon,
            **{f"dpkit {k}": v for k, v in mine.items()},
            **{f"pure-ldp {k}": v for k, v in theirs.items()},
            "dpkit cpu s": ours_time,
            "pure-ldp cpu s": their_time,
            "speed-up": their_time / ours_time,
        }
        print(row)
        rows.append(row)
        peers.append(
            {"task": f"{name}, ε = {epsilon:g}, {n:,} reports", "peer": peer, "mode": "fast",
             "speedup": round(their_time / ours_time, 1)}
        )  # fmt: skip
    return rows, peers, f"pure-ldp: {peer} (numpy < 2, xxhash < 4, its own environment)"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--peer-users", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    command = ("python benchmarks/bench_telemetry.py " + " ".join(sys.argv[1:])).strip()
    run = Run("telemetry", command, harness={"users": args.users, "peer users": args.peer_users,
                                             "top": TOP, "width": WIDTH, "hashes": HASHES})  # fmt: skip
    rng = np.random.default_rng(args.seed)
    zipf = zipf_population(args.users, rng)
    words, word_items = corpus_population(args.users, rng)
    datasets = {
        "Zipf(1.1) over 2³²": (zipf, zipf, 32),
        "pydoc words": (words, word_items, 64),
    }
    rows: list[dict[str, Any]] = []
    for label, (items, bit_items, bits) in datasets.items():
        truth, counts = top_items(items, TOP)
        bit_truth, bit_counts = top_items(bit_items, TOP)
        for epsilon in EPSILONS:
            for name, mech in mechanisms(epsilon, bits).items():
                scores = run_dpkit(
                    name, mech, items, bit_items, truth, bit_truth, counts, bit_counts, rng
                )
                row = {"data": label, "protocol": name, "ε": epsilon, **scores}
                print(row)
                rows.append(row)
    timing_rows = speed(args.users, rng) + simulation(rng)
    peer_rows, peers, note = run_peers(zipf[: args.peer_users], rng)
    print(note)
    columns = ["data", "protocol", "ε", "precision", "recall", "rmse / n"]
    timing_columns = ["task", "client µs/report (fast)", "client µs/report (secure)",
                      "server s per 10⁶ reports", "simulation s"]  # fmt: skip
    peer_columns = list(dict.fromkeys(key for row in peer_rows for key in row))
    if args.no_save:
        return
    run.save(
        title=f"Telemetry on {args.users:,} devices: heavy hitters (top {TOP}) and sketches",
        columns=columns + [c for c in timing_columns + peer_columns if c not in columns],
        rows=rows + timing_rows + peer_rows,
        peers=peers,
        notes=[
            "rmse / n: root mean square error of the estimated counts (heavy hitters: of the "
            "items found; sketches: of the true top 20 as candidates), divided by n",
            "pydoc words: the word frequencies of Python's pydoc_data.topics, words cut to 8 "
            "bytes for pem and treehist (64-bit items)",
            note,
            "speed-ups: CPU seconds of client + server on the same devices, pure-ldp against "
            "dpkit's fast mode (pure-ldp draws from numpy's global generator)",
        ],
    )


if __name__ == "__main__":
    main()

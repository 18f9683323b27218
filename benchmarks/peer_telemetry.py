"""The pure-ldp side of ``bench_telemetry.py``: run in the peer's own environment.

pure-ldp 1.2.0's sketch and heavy-hitter servers call ``np.zeros(None)`` (an error on numpy 2)
and hash ``str`` with xxhash (refused by xxhash 4), so it gets an environment of its own with
numpy < 2 and xxhash < 4 (``python benchmarks/peers/make_venvs.py telemetry``); dpkit is not
installed there. ``bench_telemetry.py`` writes the devices' items to ``.npy`` files, runs this
script on them and reads the JSON it prints: for each task, pure-ldp's estimates (or heavy
hitters) and its client and server times (``_timing.measure``: one round, no warm-up — one run
of pure-ldp's per-report Python loop already takes seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from importlib.metadata import version
from typing import Any

import numpy as np
from _timing import measure
from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
from pure_ldp.heavy_hitters.treehistogram import TreeHistClient, TreeHistServer


def _bits(values: np.ndarray, width: int) -> list[str]:
    return [format(int(v), f"0{width}b") for v in values]


def _sketch(task: dict[str, Any], items: list[str], candidates: list[str]) -> dict[str, Any]:
    hadamard = task["protocol"] == "hcms"
    server = CMSServer(task["epsilon"], task["hashes"], task["width"], is_hadamard=hadamard)
    client = CMSClient(
        task["epsilon"], server.get_hash_funcs(), task["width"], is_hadamard=hadamard
    )
    reports: list[Any] = []

    def privatise() -> None:
        reports[:] = [client.privatise(x) for x in items]

    def aggregate() -> None:
        server.reset()
        for report in reports:
            server.aggregate(report)

    out: dict[str, Any] = {}
    timed = measure({"client": privatise}, rounds=1, warmup=0)
    timed.update(measure({"server": aggregate}, rounds=1, warmup=0))
    estimates = [float(server.estimate(c, suppress_warnings=True)) for c in candidates]
    out.update(estimates=estimates, client=timed["client"].cpu, server=timed["server"].cpu)
    return out


def _heavy(task: dict[str, Any], values: np.ndarray) -> dict[str, Any]:
    bits, top = task["bits"], task["top"]
    words = _bits(values, bits)
    if task["protocol"] == "pem":
        start = math.ceil(math.log2(top))
        client: Any = PEMClient(task["epsilon"], start, bits, task["step"])
        server: Any = PEMServer(task["epsilon"], start, bits, task["step"])
    else:
        client = TreeHistClient(task["epsilon"], task["step"], bits)
        server = TreeHistServer(task["epsilon"], bits, task["step"])
    reports: list[Any] = []
    found: dict[str, Any] = {}

    def privatise() -> None:
        reports[:] = [client.privatise(w) for w in words]

    def decode() -> None:
        for report in reports:
            server.aggregate(report)
        items, counts = server.find_heavy_hitters(k=top)
        found["items"] = [int(i, 2) for i in items]
        found["estimates"] = [float(c) for c in counts]

    timed = measure({"client": privatise}, rounds=1, warmup=0)
    timed.update(measure({"server": decode}, rounds=1, warmup=0))
    return {**found, "client": timed["client"].cpu, "server": timed["server"].cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tasks", help="a JSON file: a list of tasks (see bench_telemetry.py)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # pure-ldp warns below 10,000 reports
    with open(args.tasks, encoding="utf-8") as handle:
        tasks = json.load(handle)
    results = []
    for task in tasks:
        values = np.load(task["values"], allow_pickle=False)
        if task["protocol"] in ("cms", "hcms"):
            items = [str(v) for v in values.tolist()]
            result = _sketch(task, items, [str(c) for c in task["candidates"]])
        else:
            result = _heavy(task, values)
        results.append({"name": task["name"], **result})
    print(json.dumps({"version": version("pure-ldp"), "results": results}))


if __name__ == "__main__":
    main()

"""Run the peer-library worker (``peers/worker.py``) in its own environment and read its JSON.

The environments are made by ``python benchmarks/peers/make_venvs.py`` under ``$DPKIT_PEERS``
(default ``/tmp/dpkit-peers``): ``central/`` (diffprivlib, OpenDP) and ``ldp/`` (pure-ldp,
multi-freq-ldpy). When one is missing the benchmark says so and leaves the peers out.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "worker.py"


def peers_python(kind: str) -> Path:
    return Path(os.environ.get("DPKIT_PEERS", "/tmp/dpkit-peers")) / kind / "bin" / "python"


def run_peers(kind: str, *, n: int, subset: int, rounds: int) -> dict[str, Any] | None:
    """The worker's result (``rows``, ``peers``, ``environment``), or None (and a message)."""
    python = peers_python(kind)
    if not python.exists():
        print(
            f"\n{kind} peers: no environment at {python.parent.parent} "
            f"(create it with: python benchmarks/peers/make_venvs.py {kind})"
        )
        return None
    command = [
        str(python),
        str(WORKER),
        kind,
        f"--n={n}",
        f"--subset={subset}",
        f"--rounds={rounds}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent, check=False)
    if done.returncode != 0:
        print(f"\n{kind} peers: the worker failed:\n{done.stderr[-2000:]}")
        return None
    if done.stderr.strip():
        print(done.stderr.strip())
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def print_peers(result: dict[str, Any]) -> None:
    """The speed-ups, one line each, secure and fast apart."""
    print(f"  {'task':44s} {'peer':26s} {'mode':7s} {'dpkit faster (cpu)':>18s} {'(wall)':>8s}")
    for mode in ("secure", "fast"):
        for row in result["peers"]:
            if row["mode"] == mode:
                print(
                    f"  {row['task']:44s} {row['peer']:26s} {mode:7s} "
                    f"{row['speedup']:17.1f}x {row['speedup_wall']:7.1f}x"
                )


def compare_peers(
    kind: str, *, n: int, subset: int, rounds: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run the ``kind`` worker, print its speed-ups and return (results.json peer entries,
    notes); both empty when the environment is missing."""
    result = run_peers(kind, n=n, subset=subset, rounds=rounds)
    if result is None:
        return [], []
    print(f"\n{kind} peers, timed next to dpkit in their own environment (same harness):")
    print_peers(result)
    entries = [
        {
            "task": row["task"],
            "peer": row["peer"],
            "mode": row["mode"],
            "speedup": round(row["speedup"], 1),
            "speedup (wall)": round(row["speedup_wall"], 1),
            "peer timed on": row["peer_timed_on"],
        }
        for row in result["peers"]
    ]
    notes = [
        "Peers: per-value APIs timed on a subset and scaled to n; dpkit timed on all n in the "
        "same process and the same rounds, in the same mode (secure vs secure, fast vs fast).",
        f"Peer environment: {result['environment']}",
    ]
    return entries, notes

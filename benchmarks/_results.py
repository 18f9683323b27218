"""Writing a benchmark's figures into ``benchmarks/results.json`` (read by the docs build).

Every figure in ``results.json`` is written by the script that measures it, with the command
that was run, the date, the machine and its load before and after the run; the docs page
``docs/benchmarks.md`` shows each section through a ``<!-- dpkit:benchmark NAME -->`` marker
(``docs_build/hooks.py`` turns it into a table) and the peer comparisons as a figure. A script
owns one or more *sections* and replaces only those::

    from _results import Run

    run = Run("central", "python benchmarks/bench_central.py", harness={"rounds": 7})
    ...  # measure (see _timing.measure)
    run.save(
        title="Central mechanisms against the numpy floor",
        columns=["task", "contender", "cpu ms", "÷ floor"],
        rows=[{"task": "laplace", "contender": "dpkit secure", "cpu ms": 51.0, "÷ floor": 2.1}],
        peers=[{"task": "laplace, 10⁶", "peer": "diffprivlib 0.6.6", "mode": "secure",
                "speedup": 49.0}],
        notes=["ratios are medians of per-round CPU-time ratios"],
    )

A section holds ``title``, ``command``, ``date`` (UTC, ISO 8601), ``machine`` (CPUs, platform,
Python, numpy and dpkit versions), ``load`` (1/5/15-minute load averages at the start and at
the end of the run), ``harness``, ``columns``, ``rows`` (dicts keyed by the columns; numbers
are formatted by the docs build), optional ``peers`` (one speed-up of dpkit over a peer library
per entry, ``mode`` ``"secure"`` or ``"fast"``: dpkit and the peer in the same mode) and
``notes``. ``python benchmarks/bench_X.py --no-save`` prints without writing.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import dpkit

RESULTS = Path(__file__).resolve().with_name("results.json")
ABOUT = (
    "Benchmark figures, one section per script run; each section records the command that "
    "produced it, the date, the machine and its load. Written by benchmarks/_results.py, "
    "read by the docs build (docs/benchmarks.md and its figure)."
)


#: The columns of a task timed against its floor in both modes.
FLOOR_COLUMNS = ["task", "floor (plain numpy)", "floor cpu ms", "fast ÷ floor", "secure ÷ floor"]
RATIOS_NOTE = "Ratios are medians of per-round CPU-time ratios measured in one run."


def floor_row(task: str, floor_text: str, timed: dict[str, Any], width: int = 40) -> dict[str, Any]:
    """The row (and a printed line) for ``timed`` = measure({"floor", "fast", "secure"}):
    fast and secure mode as medians of per-round CPU ratios to the floor."""
    from _timing import ratio

    floor = timed["floor"]
    fast, secure = ratio(timed["fast"], floor), ratio(timed["secure"], floor)
    print(f"{task:{width}s} {floor.cpu * 1e3:9.1f} {fast:10.2f} {secure:12.2f}  {floor_text}")
    return {
        "task": task,
        "floor (plain numpy)": floor_text,
        "floor cpu ms": round(floor.cpu * 1e3, 2),
        "fast ÷ floor": round(fast, 2),
        "secure ÷ floor": round(secure, 2),
    }


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "dpkit": dpkit.__version__,
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _plain(value: Any) -> Any:
    """numpy scalars (np.bool_, np.float64, ...) as the Python values they hold."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class Run:
    """One run of a benchmark script: started now, saved into one section of results.json."""

    def __init__(self, section: str, command: str, *, harness: dict[str, Any] | None = None):
        self.section = section
        self.command = command
        self.harness = harness or {}
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.load_before = load()

    def save(
        self,
        *,
        title: str,
        columns: list[str],
        rows: list[dict[str, Any]],
        peers: list[dict[str, Any]] | None = None,
        notes: list[str] | None = None,
        path: Path = RESULTS,
    ) -> None:
        entry = {
            "title": title,
            "command": self.command,
            "date": self.date,
            "machine": machine(),
            "load": {"before": self.load_before, "after": load()},
            "harness": self.harness,
            "columns": columns,
            "rows": rows,
            "peers": peers or [],
            "notes": notes or [],
        }
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if "sections" not in data:  # an old file: start afresh
            data = {}
        data["about"] = ABOUT
        sections = data.setdefault("sections", {})
        sections[self.section] = entry
        data["sections"] = dict(sorted(sections.items()))
        text = json.dumps(data, indent=1, ensure_ascii=False, default=_plain) + "\n"
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
        ) as handle:
            handle.write(text)
        os.replace(handle.name, path)
        print(f"wrote section {self.section!r} of {path.name}")

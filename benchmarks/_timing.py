"""Timing helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], repeat: int = 1) -> float:
    """The fastest of ``repeat`` wall-clock runs of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def side_by_side(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` times, the candidates interleaved so that load affects all alike."""
    best = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for label, fn in fns.items():
            best[label] = min(best[label], best_time(fn))
    return best

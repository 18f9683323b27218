"""Timing helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``).

:func:`measure` is the harness every contender goes through — dpkit, the numpy floor and the
peer libraries alike: the same ``warmup`` untimed calls, then ``rounds`` rounds in which every
contender runs once (in an order rotated from round to round, so that a burst of load falls on
all of them alike), each call timed by the CPU clock of the process (``time.process_time``)
and by the wall clock (``time.perf_counter``). A :class:`Timing` keeps every round; figures are
*medians*, and a ratio of two contenders is the median of their per-round ratios
(:func:`ratio`), which cancels load that varies between rounds. Prefer CPU time on a shared
machine: another process taking a core inflates wall time, not CPU time.

:func:`best_time` and :func:`side_by_side` (best-of-N wall clock) are the older helpers; they
still work, but new figures should come from :func:`measure`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


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


@dataclass(frozen=True)
class Timing:
    """Every round of one contender: CPU and wall seconds per call."""

    cpu_rounds: tuple[float, ...]
    wall_rounds: tuple[float, ...]

    @property
    def cpu(self) -> float:
        """Median CPU seconds per call."""
        return statistics.median(self.cpu_rounds)

    @property
    def wall(self) -> float:
        """Median wall-clock seconds per call."""
        return statistics.median(self.wall_rounds)

    def scaled(self, factor: float) -> Timing:
        """The same rounds times ``factor`` (e.g. a per-value API timed on a subset, scaled to n)."""
        return Timing(
            tuple(t * factor for t in self.cpu_rounds), tuple(t * factor for t in self.wall_rounds)
        )


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(
    contenders: dict[str, Callable[[], object]], *, rounds: int = 7, warmup: int = 1
) -> dict[str, Timing]:
    """Time every contender the same way: ``warmup`` untimed calls, then ``rounds`` rounds.

    In round i the contenders run in the order of the dict rotated by i. Returns one
    :class:`Timing` per label, in the order given.
    """
    labels = list(contenders)
    for _ in range(warmup):
        for label in labels:
            contenders[label]()
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    wall: dict[str, list[float]] = {label: [] for label in labels}
    for i in range(rounds):
        shift = i % len(labels) if labels else 0
        for label in labels[shift:] + labels[:shift]:
            c, w = _timed(contenders[label])
            cpu[label].append(c)
            wall[label].append(w)
    return {label: Timing(tuple(cpu[label]), tuple(wall[label])) for label in labels}


def ratio(a: Timing, b: Timing, clock: str = "cpu") -> float:
    """The median over rounds of a/b, round by round (``clock`` is ``"cpu"`` or ``"wall"``).

    Both must come from the same :func:`measure` call (or the same number of rounds).
    """
    first = a.cpu_rounds if clock == "cpu" else a.wall_rounds
    second = b.cpu_rounds if clock == "cpu" else b.wall_rounds
    pairs = [x / y for x, y in zip(first, second, strict=True) if y > 0]
    return statistics.median(pairs) if pairs else math.nan

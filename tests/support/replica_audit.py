"""An empirical privacy audit of grouped, id-level table queries on id neighbours, in both
randomness modes — for table queries (``Stat(...).on(...)``) and SQL statements alike.

Method (the statistical tier of :mod:`dpkit.testing.blackbox`, written out here for whole
tables): release the query many times on D (a table without person x) and on D′ (with all of
x's rows, many in every city); choose on a first batch the output event S (a half-line of one
released cell) with the largest certified bound; then, on a fresh batch, certify
ε_lb = ln((LCB(P[M(D′) ∈ S]) − δ) / UCB(P[M(D) ∈ S])) with one-sided Clopper–Pearson bounds at
level α/2 each (and the same with D and D′ swapped). ε_lb > ε is a violation; a correct query
exceeds its ε this way with probability ≤ α = 1e-7 per direction and mode (the union bound
gives 4·1e-7 for one audit of both modes).

Each mode draws from its own generator (:func:`dpkit.testing.modes.mode_generator`): numpy's
in fast mode, a keyed SecureRandom in secure mode, so that secure mode's exact samplers and
integer thresholds are what is audited there.

To draw many independent releases cheaply, the table holds R *replicas* of D (or D′): every
id and every group key is tagged with its replica, so one release bounds every replica's ids
independently (each id's selection depends only on its own rows) and releases one vector
whose coordinates for replica r are exactly one run on replica r. A group a release leaves
out (partition selection) is the value −∞: absence is an outcome like any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats

from dpkit.testing.modes import MODES, Mode, mode_generator

ALPHA = 1e-7
REPLICAS = 4_000
CITIES = ("a", "b", "c")

#: One audit's releases: (R, cells) released values for D (False) or D′ (True), drawn with
#: the generator given.
Release = Callable[[bool, Any], np.ndarray]


def people(with_x: bool, per_city: int = 4) -> list[tuple[str, str, float]]:
    """(user, city, minutes) rows: ``per_city`` people in each city with one row each, and x
    (in D′) with eight rows in every city, whose values are beyond the clamping bounds the tests
    declare: without truncation they all count."""
    rows = [(f"p{i}", CITIES[i % 3], float(i % 5)) for i in range(len(CITIES) * per_city)]
    if with_x:
        rows += [("x", city, 99.0) for city in CITIES for _ in range(8)]
    return rows


def replicated(with_x: bool, replicas: int = REPLICAS, per_city: int = 4) -> pa.Table:
    """R replicas of :func:`people`, each id and city tagged with its replica."""
    rows = people(with_x, per_city)
    users, cities, values = [], [], []
    for r in range(replicas):
        for user, city, value in rows:
            users.append(f"{r}:{user}")
            cities.append(f"{r}:{city}")
            values.append(value)
    return pa.table({"user": users, "city": cities, "minutes": values})


def replica_keys(replicas: int = REPLICAS) -> list[str]:
    """Every replica's cities, the group keys of a release over :func:`replicated`."""
    return [f"{r}:{city}" for r in range(replicas) for city in CITIES]


def by_replica(
    keys: Iterable[str], columns: list[list[float]], replicas: int = REPLICAS
) -> np.ndarray:
    """(R, cities × columns) cells of a release whose rows are the keys ``r:city`` and their
    released ``columns``; a city a release left out is −∞."""
    out = np.full((replicas, len(CITIES) * max(len(columns), 1)), -np.inf)
    for row, key in enumerate(keys):
        replica, city = str(key).split(":", 1)
        for j, column in enumerate(columns):
            value = column[row]
            out[int(replica), CITIES.index(city) * len(columns) + j] = (
                -np.inf if value is None or math.isnan(value) else value
            )
    return out


def _bound(hits_a: int, hits_b: int, trials: int, delta: float) -> float:
    lower = stats.beta.ppf(ALPHA / 2, hits_a, trials - hits_a + 1) if hits_a else 0.0
    upper = stats.beta.ppf(1 - ALPHA / 2, hits_b + 1, trials - hits_b) if hits_b < trials else 1.0
    return math.log((lower - delta) / upper) if lower - delta > 0 else 0.0


def _certify(selection: list[np.ndarray], test: list[np.ndarray], delta: float) -> float:
    """The certified ε lower bound over half-line events of each cell, both directions."""
    trials = selection[0].shape[0]
    best: tuple[float, Any] = (0.0, None)
    for cell in range(selection[0].shape[1]):
        small, large = selection[0][:, cell], selection[1][:, cell]
        both = np.concatenate([small, large])
        finite = both[np.isfinite(both)]
        thresholds = np.quantile(finite, np.linspace(0.02, 0.98, 49)) if finite.size else []
        for t in [*thresholds, -np.inf]:  # −∞: the group released at all
            for sign in (1, -1):  # the event {sign·y ≥ sign·t} (−∞ ≥ −∞: absent included)
                for first_large in (True, False):  # D′ over D, or D over D′
                    a, b = (large, small) if first_large else (small, large)
                    hits = (int(np.sum(sign * a >= sign * t)), int(np.sum(sign * b >= sign * t)))
                    bound = _bound(*hits, trials, delta)
                    if bound > best[0]:
                        best = (bound, (cell, t, sign, first_large))
    if best[1] is None:
        return 0.0
    cell, t, sign, first_large = best[1]
    small, large = test[0][:, cell], test[1][:, cell]
    a, b = (large, small) if first_large else (small, large)
    hits = (int(np.sum(sign * a >= sign * t)), int(np.sum(sign * b >= sign * t)))
    return _bound(*hits, small.shape[0], delta)


def audit_modes(
    release: Release, *, delta: float = 0.0, seed: int = 0, modes: Iterable[Mode] = MODES
) -> dict[Mode, float]:
    """Each mode's certified ε lower bound: a selection batch and a fresh test batch of
    releases on D and D′, all drawn from the mode's own generator."""
    found: dict[Mode, float] = {}
    for mode in modes:
        rng = mode_generator(mode, seed, np.random.default_rng(seed))
        selection = [release(False, rng), release(True, rng)]
        test = [release(False, rng), release(True, rng)]
        found[mode] = _certify(selection, test, delta)
    return found

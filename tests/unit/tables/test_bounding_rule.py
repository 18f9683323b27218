"""``keep_mask`` against a brute-force reading of the bounding rule, row by row.

The reference below follows the module docstring of :mod:`dpkit.tables.bounding` with Python
loops and no sorting machinery: each row's priority is computed on its own (its number j
among the earlier rows of equal pair and content), a pair keeps its R rows of highest
priority, and an id keeps a pair when at most G of its pairs have a priority at least as
high. ``keep_mask`` sorts, ranks only the pairs with more than R rows and packs sort keys; it
must keep the same multiset of (pair, content) rows and mark exactly one kept row per kept
pair, on tables with many equal rows, pairs above and below R, and ids above and below G.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from dpkit.tables.bounding import BoundingKey, keep_mask, pair_priority, row_priority
from dpkit.tables.encoding import mix


def _reference(
    ids: np.ndarray,
    pairs: np.ndarray,
    words: np.ndarray,
    content: np.ndarray | None,
    max_rows: int,
    max_groups: int | None,
    key: BoundingKey,
) -> Counter[tuple[int, int]]:
    """The kept rows as a multiset of (pair, content) (content 0 for a count)."""
    rows_of: dict[int, list[int]] = defaultdict(list)
    for i, pair in enumerate(pairs.tolist()):
        rows_of[pair].append(i)
    chosen: dict[int, list[int]] = {}
    score: dict[int, int] = {}
    for pair, rows in rows_of.items():
        score[pair] = max(int(pair_priority(words[[i]], key)[0]) for i in rows)
        if content is None:
            chosen[pair] = rows[:max_rows]  # interchangeable rows: any R of them
            continue
        seen: Counter[int] = Counter()
        ranked = []
        for i in rows:
            value = int(content[i])
            j = np.array([seen[value]], dtype=np.int64)
            seen[value] += 1
            ranked.append((int(row_priority(words[[i]], content[[i]], j, key)[0]), i))
        ranked.sort(key=lambda t: -t[0])  # distinct 64-bit priorities here (no collision)
        chosen[pair] = [i for _, i in ranked[:max_rows]]
    kept: Counter[tuple[int, int]] = Counter()
    for pair, rows in chosen.items():
        person = int(ids[rows_of[pair][0]])
        rivals = [score[p] for p in rows_of if int(ids[rows_of[p][0]]) == person]
        if max_groups is not None and sum(s >= score[pair] for s in rivals) > max_groups:
            continue
        for i in rows:
            kept[(pair, 0 if content is None else int(content[i]))] += 1
    return kept


def _table(seed: int, n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 12, n)
    groups = rng.integers(0, 5, n)
    pairs = ids * 5 + groups
    words = mix(mix(ids.astype(np.uint64)) ^ groups.astype(np.uint64))
    content = rng.integers(0, 4, n).astype(np.uint64)  # many equal rows
    return ids, pairs, words, content


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("max_rows", "max_groups"), [(1, 1), (2, 3), (3, None), (50, 2)])
@pytest.mark.parametrize("with_content", [True, False])
def test_keep_mask_keeps_what_the_rule_keeps(
    seed: int, max_rows: int, max_groups: int | None, with_content: bool
) -> None:
    ids, pairs, words, content = _table(seed, 300)
    values = content if with_content else None
    key = BoundingKey.draw(np.random.default_rng(seed + 100))
    keep, first = keep_mask(ids, pairs, words, values, max_rows, max_groups, key)
    found = Counter(
        (int(pairs[i]), 0 if values is None else int(content[i])) for i in np.flatnonzero(keep)
    )
    assert found == _reference(ids, pairs, words, values, max_rows, max_groups, key)
    assert not (first & ~keep).any()
    assert sorted(pairs[first].tolist()) == sorted({int(p) for p in pairs[keep]})


def test_a_rule_that_ignores_the_row_priorities_would_fail() -> None:
    """The reference can tell: keeping a crowded pair's *first* R rows (input order) instead
    of its R rows of highest priority keeps a different multiset on the same table."""
    ids, pairs, words, content = _table(1, 300)
    key = BoundingKey.draw(np.random.default_rng(101))
    reference = _reference(ids, pairs, words, content, 1, None, key)
    first_rows: Counter[tuple[int, int]] = Counter()
    for pair in np.unique(pairs).tolist():
        first_rows[(pair, int(content[np.flatnonzero(pairs == pair)[0]]))] += 1
    assert first_rows != reference

"""Contribution bounding and the derived sensitivities, against brute force on small tables.

For a table D and an id x, D′ is D plus all of x's rows. The bounding priorities are drawn in
row order from one seeded generator, and x's rows are appended at the end, so D's rows get the
same priorities in both runs (the coupling of :mod:`dpkit.tables.bounding`). Every released
aggregate of D′ must then be within the declared sensitivity of D's: L1 ≤ G·R·c, L2 ≤ √G·R·c,
at most the declared number of coordinates changed, at most one more id per group for
partition selection, and each group's quantile utility within R. A variant without the
truncation (the same data under a record unit, i.e. each row taken as its own person) breaks
these bounds on the same tables — the check can fail.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum, TableQuery
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit

CITIES = ["a", "b", "c"]
MODES = ["bus", "car"]


def _rows(draw: Any, ids: list[str]) -> list[tuple[str, str, float, str]]:
    rows = []
    for person in ids:
        for _ in range(draw(st.integers(1, 6))):
            rows.append(
                (
                    person,
                    draw(st.sampled_from(CITIES)),
                    draw(st.floats(-20, 120, allow_nan=False)),
                    draw(st.sampled_from(MODES)),
                )
            )
    return rows


def _table(rows: list[tuple[str, str, float, str]]) -> pa.Table:
    columns = ["user", "city", "minutes", "mode"]
    return pa.table(
        {
            c: pa.array([r[i] for r in rows], pa.float64() if c == "minutes" else pa.string())
            for i, c in enumerate(columns)
        }
    )


@st.composite
def neighbours(draw: Any) -> tuple[pa.Table, pa.Table]:
    """(D, D plus all the rows of id x, appended at the end): PyArrow tables (the fastest
    backend here; the backends agree, see test_table_backends.py)."""
    people = [f"p{i}" for i in range(draw(st.integers(0, 5)))]
    base = _rows(draw, people)
    extra = _rows(draw, ["x"])
    return _table(base), _table(base + extra)


QUERIES = {
    "count": (Count(epsilon=1.0), None, 1.0),
    "sum": (Sum(lower=0, upper=100, epsilon=1.0), "minutes", 100.0),
    "mean": (Mean(lower=0, upper=100, epsilon=1.0), "minutes", 50.0),
    "histogram": (Histogram(categories=("bus", "car"), epsilon=1.0), "mode", 1.0),
}


def _vector(aggregates: Any, name: str) -> np.ndarray:
    if name == "histogram":
        return np.asarray(aggregates.values["cells"], dtype=np.float64).reshape(-1)
    if name == "mean":
        return np.asarray(aggregates.values["centred_sum"], dtype=np.float64)
    if name == "sum":
        return np.asarray(aggregates.values["sum"], dtype=np.float64)
    return np.asarray(aggregates.values["count"], dtype=np.float64)


def _check(query: TableQuery, name: str, per_row: float, small: Any, large: Any) -> list[str]:
    """Every way the neighbours' aggregates exceed the declared bounds (empty: none)."""
    seed = 17
    a = query.aggregate(small, rng=np.random.default_rng(seed))
    b = query.aggregate(large, rng=np.random.default_rng(seed))
    assert a.keys == b.keys
    groups, rows = query.bounds()
    slack = 1e-6 * per_row
    diff = _vector(b, name) - _vector(a, name)
    problems = []
    if np.abs(diff).sum() > groups * rows * per_row * (1 + 1e-6) + slack:
        problems.append(f"L1 {np.abs(diff).sum()} > {groups * rows * per_row}")
    if math.sqrt((diff**2).sum()) > math.sqrt(groups) * rows * per_row * (1 + 1e-6) + slack:
        problems.append("L2")
    # An id's rows touch ≤ G groups; in a histogram, ≤ min(R, cells) cells of each.
    changed = groups * min(rows, len(query.statistic.cells)) if name == "histogram" else groups
    if np.count_nonzero(diff) > changed:
        problems.append(f"{np.count_nonzero(diff)} coordinates changed > {changed}")
    if name == "mean":
        count_diff = b.values["count"] - a.values["count"]
        if np.abs(count_diff).sum() > groups * rows:
            problems.append("mean count L1")
    return problems


@settings(max_examples=30, deadline=None)
@given(pair=neighbours())
@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 2), (3, 4)])
def test_adding_one_id_moves_aggregates_within_the_sensitivity(
    name: str, max_groups: int, max_rows: int, pair: tuple[pa.Table, pa.Table]
) -> None:
    statistic, column, per_row = QUERIES[name]
    query = statistic.on(
        column,
        by="city",
        keys=CITIES,
        unit=dpkit.IdUnit("user", max_rows=max_rows, max_groups=max_groups),
    )
    small, large = pair
    assert _check(query, name, per_row, small, large) == []


@settings(max_examples=30, deadline=None)
@given(pair=neighbours())
@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 3)])
def test_private_keys_gain_at_most_one_id_in_at_most_g_groups(
    max_groups: int, max_rows: int, pair: tuple[pa.Table, pa.Table]
) -> None:
    query = Count(epsilon=1.0).on(
        by="city",
        keys=PrivateKeys(epsilon=1.0, delta=1e-6),
        unit=dpkit.IdUnit("user", max_rows=max_rows, max_groups=max_groups),
    )
    small, large = pair
    a = query.aggregate(small, rng=np.random.default_rng(5))
    b = query.aggregate(large, rng=np.random.default_rng(5))
    before = dict(zip(a.keys, a.values["units"], strict=True))
    after = dict(zip(b.keys, b.values["units"], strict=True))
    changes = [after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)]
    assert all(c in (0, 1) for c in changes)
    assert sum(changes) <= max_groups


@settings(max_examples=30, deadline=None)
@given(pair=neighbours())
def test_quantile_utilities_move_by_at_most_r(pair: tuple[pa.Table, pa.Table]) -> None:
    """Each group's rank utility −|#{x < v} − q·n| moves by ≤ R for every candidate v."""
    rows = 2
    query = Quantile(q=0.3, lower=0, upper=100, epsilon=1.0).on(
        "minutes", by="city", keys=CITIES, unit=dpkit.IdUnit("user", max_rows=rows, max_groups=2)
    )
    small, large = pair
    a = query.aggregate(small, rng=np.random.default_rng(9))
    b = query.aggregate(large, rng=np.random.default_rng(9))
    step = query.statistic.per_group(query.contribution).lattice_step()
    candidates = np.floor(np.linspace(0, 100, 41) / step)  # lattice points m (outputs m·h)
    assert a.lattice is not None and b.lattice is not None
    moved = 0
    for (x_cells, x_counts), (y_cells, y_counts) in zip(a.lattice, b.lattice, strict=True):
        # rank of m·h: the records x < m·h, i.e. those of cell ⌊x/h⌋ < m
        below_x = (x_cells[None, :] < candidates[:, None]) @ x_counts
        below_y = (y_cells[None, :] < candidates[:, None]) @ y_counts
        ux = -np.abs(below_x - 0.3 * x_counts.sum())
        uy = -np.abs(below_y - 0.3 * y_counts.sum())
        assert np.max(np.abs(ux - uy)) <= rows
        moved += int(y_counts.sum() != x_counts.sum())
    assert moved <= 2


def test_without_truncation_the_same_check_fails() -> None:
    """One person with many rows in one group: under an id unit with R = 1 the count moves by 1;
    treating rows as units (no truncation, a record unit over per-person data) moves it by 6,
    far beyond the sensitivity that unit declares — the brute-force check reports it."""
    base = pd.DataFrame({"user": ["p"], "city": ["a"], "minutes": [1.0], "mode": ["bus"]})
    extra = pd.DataFrame(
        {"user": ["x"] * 6, "city": ["a"] * 6, "minutes": [9.0] * 6, "mode": ["car"] * 6}
    )
    large = pd.concat([base, extra], ignore_index=True)
    bounded = Count(epsilon=1.0).on(
        by="city", keys=CITIES, unit=dpkit.IdUnit("user", max_rows=1, max_groups=1)
    )
    assert _check(bounded, "count", 1.0, base, large) == []
    untruncated = Count(epsilon=1.0).on(by="city", keys=CITIES)  # record unit: no bounding
    assert _check(untruncated, "count", 1.0, base, large) != []


def _bounding(by: tuple[str, ...], rows: int, groups: int, seed: int, content: Any = None) -> Any:
    from dpkit.tables import Bounding, BoundingKey

    key = BoundingKey.draw(np.random.default_rng(seed))
    return Bounding("user", by, content, rows, groups if by else None, key)


def test_bounding_keeps_exactly_what_the_bounds_allow() -> None:
    """Each id keeps min(G, its groups) groups, and min(R, its rows there) rows in each; the
    FIRST column marks one row per kept pair."""
    rng = np.random.default_rng(1)
    n = 5000
    table = pd.DataFrame(
        {
            "user": rng.integers(0, 50, n),
            "city": rng.choice(list("abcdefgh"), n),
            "value": rng.integers(0, 4, n),
        }
    )
    original = table.groupby(["user", "city"]).size()
    for groups, rows, content in itertools.product((1, 2, 5), (1, 3), (None, "value")):
        kept = _bounding(("city",), rows, groups, 2, content).apply(table)
        per_pair = kept.groupby(["user", "city"]).size()
        assert (per_pair == original[per_pair.index].clip(upper=rows)).all()
        chosen = kept.groupby("user")["city"].nunique()
        available = table.groupby("user")["city"].nunique().clip(upper=groups)
        assert (chosen == available[chosen.index]).all() and chosen.size == available.size
        assert (kept.groupby(["user", "city"])["__dpkit_first"].sum() == 1).all()


def _kept(frame: pd.DataFrame, bounding: Any) -> list[tuple[Any, ...]]:
    """The kept rows as a sorted list (a multiset) of what the bounding reads: id, groups and
    content (without content, a pair's rows are interchangeable: a count reads no value)."""
    columns = [bounding.id_column, *bounding.by, *([bounding.content] if bounding.content else [])]
    kept = bounding.apply(frame)[columns]
    return sorted(kept.itertuples(index=False, name=None))


@st.composite
def id_tables(draw: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(D, rows of one more id x): ids with repeated rows, repeated values and ties."""
    rows = []
    for person in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(1, 8))):
            rows.append((f"p{person}", draw(st.sampled_from("abc")), draw(st.integers(0, 3))))
    extra = [("x", draw(st.sampled_from("abc")), draw(st.integers(0, 3))) for _ in range(5)]
    columns = ["user", "city", "value"]
    return pd.DataFrame(rows, columns=columns), pd.DataFrame(extra, columns=columns)


@settings(max_examples=60, deadline=None)
@given(tables=id_tables(), seed=st.integers(0, 2**32), content=st.sampled_from([None, "value"]))
def test_every_other_id_keeps_the_same_rows_when_one_id_is_added(
    tables: tuple[pd.DataFrame, pd.DataFrame], seed: int, content: Any
) -> None:
    """Id-stability, directly: with one key, adding all the rows of id x — anywhere in the
    table, here in the middle — leaves every other id's kept rows (as a multiset) unchanged,
    and x keeps at most R rows in at most G groups. The rows are also kept whatever their order."""
    base, extra = tables
    bounding = _bounding(("city",), 2, 2, seed, content)
    middle = len(base) // 2
    larger = pd.concat([base.iloc[:middle], extra, base.iloc[middle:]], ignore_index=True)
    before = _kept(base, bounding)
    after = _kept(larger, bounding)
    assert [r for r in after if r[0] != "x"] == before
    mine = [r for r in after if r[0] == "x"]
    assert len({r[1] for r in mine}) <= 2 and len(mine) <= 4
    shuffled = larger.sample(frac=1.0, random_state=seed % 1000).reset_index(drop=True)
    assert _kept(shuffled, bounding) == after


def test_positional_priorities_would_fail_the_stability_check() -> None:
    """The variant the bounding module rules out: priorities from a row's *position* (here
    its index is made the content the priority hashes). Adding one id before the others shifts
    their positions and changes which of their rows are kept; with the content itself as the
    hashed content the same addition changes nothing."""
    rng = np.random.default_rng(3)
    base = pd.DataFrame({"user": rng.integers(0, 20, 400), "city": rng.choice(list("ab"), 400)})
    base["value"] = rng.integers(0, 1000, 400)
    extra = pd.DataFrame({"user": [99] * 3, "city": ["a"] * 3, "value": [1, 2, 3]})
    larger = pd.concat([extra, base], ignore_index=True)

    def others(frame: pd.DataFrame, content: str) -> list[Any]:
        """The (user, city, value) rows kept for the ids other than 99."""
        bounding = _bounding(("city",), 1, 1, 5, content)
        kept = bounding.apply(frame.assign(position=np.arange(len(frame))))
        rows = kept[["user", "city", "value"]].itertuples(index=False, name=None)
        return sorted(r for r in rows if r[0] != 99)

    assert others(larger, "position") != others(base, "position")
    assert others(larger, "value") == others(base, "value")


def test_group_choice_is_uniform_whatever_the_group_sizes() -> None:
    """5,000 ids, each with one row in group 'a' and 30 in group 'b', G = 1: each id keeps a
    uniform group (the pair priority is a hash of the pair, not of its rows), not the larger
    one. The number of ids keeping 'a' lies within the binomial(5000, 1/2) quantiles at 1e-7
    and 1 − 1e-7 (false-positive rate 2e-7). A variant scoring a pair by its rows' largest
    priority keeps 'b' with probability 30/31 and fails (next test)."""
    from scipy import stats

    ids = 5_000
    table = pd.DataFrame(
        {
            "user": np.repeat(np.arange(ids), 31),
            "city": np.tile(["a"] + ["b"] * 30, ids),
            "value": np.tile(np.arange(31), ids),
        }
    )
    kept = _bounding(("city",), 1, 1, 4, "value").apply(table)
    kept_a = int((kept["city"] == "a").sum())
    low, high = stats.binom.ppf([1e-7, 1 - 1e-7], ids, 0.5)
    assert low <= kept_a <= high


def test_a_max_row_priority_group_score_would_fail_the_uniformity_check() -> None:
    """The variant named above: keep the group whose *largest row priority* is highest. On
    the same 5,000 ids it keeps 'a' about 1/31 of the time, outside the bounds."""
    from scipy import stats

    from dpkit.tables import BoundingKey
    from dpkit.tables.bounding import row_priority
    from dpkit.tables.encoding import mix

    ids = 5_000
    key = BoundingKey.draw(np.random.default_rng(4))
    user = np.repeat(np.arange(ids), 31).astype(np.uint64)
    city = np.tile(np.r_[0, np.ones(30)], ids).astype(np.uint64)
    value = np.tile(np.arange(31), ids).astype(np.uint64)
    pair = mix(mix(user) ^ city)
    priority = row_priority(pair, value, np.zeros(user.size, dtype=np.int64), key)
    top = pd.DataFrame({"user": user, "city": city, "p": priority})
    top = top.groupby(["user", "city"])["p"].max().unstack()
    kept_a = int((top[0] > top[1]).sum())
    low, high = stats.binom.ppf([1e-7, 1 - 1e-7], ids, 0.5)
    assert not low <= kept_a <= high


@settings(max_examples=40, deadline=None)
@given(tables=id_tables(), seed=st.integers(0, 2**32), parts=st.integers(1, 4))
def test_bounding_each_ids_part_keeps_what_bounding_the_whole_table_keeps(
    tables: tuple[pd.DataFrame, pd.DataFrame], seed: int, parts: int
) -> None:
    """What an engine does after its shuffle by id — bound each partition on its own — keeps
    exactly the rows that bounding the whole table keeps, however the ids are spread."""
    base, extra = tables
    table = pd.concat([base, extra], ignore_index=True)
    bounding = _bounding(("city",), 2, 1, seed, "value")
    bucket = table["user"].map(lambda u: hash(u) % parts)
    pieces = [bounding.apply(table[bucket == b]) for b in range(parts)]
    joined = pd.concat(pieces, ignore_index=True)[["user", "city", "value"]]
    assert sorted(joined.itertuples(index=False, name=None)) == _kept(table, bounding)


@pytest.mark.parametrize(("epsilon", "groups", "rows"), [(0.1, 3, 7), (0.1, 5, 3), (5.0, 7, 1)])
def test_quantile_shares_compose_to_at_most_epsilon_exactly(
    epsilon: float, groups: int, rows: int
) -> None:
    """The per-group ε of a table quantile times G·R, in exact rationals, is at most the
    declared ε (the exact sampler realises the share it is given; the float quotient ε/(G·R)
    lies above the true one for these, e.g. 21·fl(0.1/21) > 0.1)."""
    from fractions import Fraction

    query = Quantile(q=0.5, lower=0, upper=1, epsilon=epsilon).on(
        "v", by="k", keys=list(range(9)), unit=dpkit.IdUnit("u", max_rows=rows, max_groups=groups)
    )
    assert (query.contribution.groups, query.contribution.rows) == (groups, rows)
    share = query.statistic.per_group(query.contribution).epsilon
    assert Fraction(share) * groups * rows <= min(Fraction(epsilon), Fraction(repr(epsilon)))
    assert Fraction(epsilon / (groups * rows)) * groups * rows > Fraction(epsilon)  # the float's

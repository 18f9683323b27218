"""Contribution bounding: keep at most G groups per id and R rows per (id, group), at random.

Under an id privacy unit (:class:`dpkit.units.IdUnit`) neighbouring tables differ by all the
rows of one id. Every sensitivity of a grouped query is derived from two declared bounds —
G = ``max_groups`` groups per id and R = ``max_rows`` rows per id and group — and this module
makes them true whatever the data, before anything is aggregated:

1. each row gets a **priority** u, iid uniform on (0, 1], drawn from the release's random
   source (:func:`with_priority`; secure by default);
2. within each (id, group) pair the R rows of highest priority are kept (a uniformly random
   R-subset of the pair's rows, or all of them);
3. each pair gets the score s = n·ln(max u) over its n rows. The maximum M of n iid uniforms
   has P[M ≤ t] = tⁿ, so Mⁿ = e^s is itself uniform on (0, 1], and the scores of distinct pairs
   are independent (they use disjoint rows): ranking an id's pairs by s ranks them by iid
   uniforms, and keeping the G highest keeps a uniformly random G-subset of the id's groups,
   whatever their sizes. (Which rows step 2 keeps is independent of the pair's score: for iid
   continuous draws the order of the rows is independent of the values of the order
   statistics.)

**Why the truncation is id-stable** (the property the privacy proof needs). The rows kept for
an id depend only on that id's own rows and on priorities drawn independently of every other
row. Let D′ be D plus all the rows of one id x. Couple the two runs by giving every row of D
the same priority in both: the rows kept for every id other than x are then identical, and x
contributes at most R rows to each of at most G groups. So every coupled pair of truncated
tables is a pair of neighbours *with bounded contributions* — one adds at most G·R rows, at
most R per group, in at most G groups — and each aggregate of the truncated tables moves by at
most its bounded sensitivity (L1 = G·R·c, L2 = √G·R·c for a per-row contribution ≤ c). Since
the priorities of distinct rows are iid, the coupling has the right marginals, and a mechanism
that is (ε, δ)-DP for bounded neighbours is (ε, δ)-DP for id neighbours after the truncation
(the argument of "stable transformations"; McSherry 2009, PINQ, Section 2.3, and of Wilson
et al. 2020, "Differentially Private SQL with Bounded User Contribution", PoPETs, Section 3).

**Engines.** On a lazy frame the steps are narwhals expressions the engine runs where the
data are: a window rank (``rank().over(...)``) within (id, group) and within id, a group-by for
the pairs' scores and a join. Ranking within partitions is correct when an id's rows are spread
over many partitions of a distributed engine, since the window brings them together. On an
eager frame, whose rows are in memory already, the same selection is computed with numpy on
integer codes of the keys (:func:`keep_mask`: one stable sort per step) and the frame is
filtered by it; the two formulations keep the same rows (tested). Only the priorities come
from the driver: here a column drawn for an eager frame; a distributed engine draws them per
partition from a key derived from the session's secure source.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tables.frame import narwhals

__all__ = [
    "PRIORITY",
    "bound_contributions",
    "keep_mask",
    "key_codes",
    "pair_counts",
    "with_priority",
]

#: The name of the priority column added to a frame (dropped again after bounding).
PRIORITY = "__dpkit_priority"
_RANK = "__dpkit_rank"
_COUNT = "__dpkit_rows"
_TOP = "__dpkit_top"
_SCORE = "__dpkit_score"
_KEEP = "__dpkit_keep"


def with_priority(frame: Any, rng: Any) -> Any:
    """``frame`` with the priority column: iid uniform on (0, 1], one per row, from ``rng``.

    ``rng`` is a numpy Generator (fast mode) or a :class:`~dpkit.SecureRandom` (secure mode);
    both draw ``random(n)`` on the 2⁻⁵³ grid, and 1 − u maps [0, 1) onto (0, 1] so that
    ln(u) is finite. Only eager frames can be given a drawn column; a lazy frame is refused
    with a typed error (its engine must draw the priorities itself).
    """
    nw = narwhals()
    if not isinstance(frame, nw.DataFrame):
        raise InvalidData(
            "contribution bounding on a lazy frame needs priorities drawn by its engine; "
            "collect the frame first",
            field="data",
        )
    n = frame.shape[0]
    priority = 1.0 - np.asarray(rng.random(n), dtype=np.float64)
    series = nw.new_series(PRIORITY, priority, nw.Float64, backend=frame.implementation)
    return frame.with_columns(series)


def _ranked(frame: Any, partition: list[str], score: str) -> Any:
    """``frame`` (lazy) with ``_RANK``: the 1-based rank of each row by ``score`` (highest
    first) within its ``partition``, each rank once (a window function of the engine)."""
    nw = narwhals()
    rank = nw.col(score).rank(method="ordinal", descending=True).over(*partition)
    return frame.with_columns(rank.alias(_RANK))


def pair_counts(frame: Any, id_column: str, by: tuple[str, ...]) -> Any:
    """One row per (id, group) pair with its number of rows and its highest priority."""
    nw = narwhals()
    return frame.group_by(id_column, *by).agg(
        nw.len().alias(_COUNT), nw.col(PRIORITY).max().alias(_TOP)
    )


def bound_contributions(
    frame: Any, *, id_column: str, by: tuple[str, ...], max_rows: int, max_groups: int
) -> Any:
    """Keep at most ``max_rows`` rows per (id, group) and ``max_groups`` groups per id.

    ``frame`` must carry the priority column (:func:`with_priority`) and hold no missing id or
    group key (drop those rows first). Returns the kept rows, without the helper columns. With
    no ``by`` (an ungrouped query) only the rows per id are bounded.

    A lazy frame runs the narwhals window formulation (ranks over partitions, a group-by and
    a join), which its engine distributes. An eager frame (the rows are in memory already) is
    bounded by the same selection computed with numpy on integer codes of the keys
    (:func:`keep_mask`), then filtered: the same rows are kept (the tests compare the two).
    """
    nw = narwhals()
    if isinstance(frame, nw.LazyFrame):
        return _bound_lazy(frame, id_column, by, max_rows, max_groups)
    ids = key_codes(frame, [id_column])
    pairs = key_codes(frame, [id_column, *by]) if by else ids
    priority = np.asarray(frame.get_column(PRIORITY).to_numpy(), dtype=np.float64)
    mask = keep_mask(pairs, ids, priority, max_rows, max_groups if by else None)
    keep = nw.new_series(_KEEP, mask, nw.Boolean, backend=frame.implementation)
    return frame.with_columns(keep).filter(nw.col(_KEEP)).drop(_KEEP, PRIORITY)


def _bound_lazy(
    frame: Any, id_column: str, by: tuple[str, ...], max_rows: int, max_groups: int
) -> Any:
    nw = narwhals()
    pair = [id_column, *by]
    rows = _ranked(frame, pair, PRIORITY).filter(nw.col(_RANK) <= max_rows).drop(_RANK)
    if not by:
        return rows.drop(PRIORITY)
    pairs = pair_counts(frame, id_column, by).with_columns(
        (nw.col(_COUNT).cast(nw.Float64) * nw.col(_TOP).log()).alias(_SCORE)
    )
    kept = _ranked(pairs, [id_column], _SCORE).filter(nw.col(_RANK) <= max_groups)
    return rows.join(kept.select(*pair), on=pair, how="inner").drop(PRIORITY)


def _column_codes(series: Any) -> tuple[NDArray[np.int64], int]:
    """(an int64 code per value, the number of distinct values) of one eager column: equal
    values get equal codes (a hash encoding where the library has one)."""
    native = series.to_native()
    module = type(native).__module__.split(".", 1)[0]
    nw = narwhals()
    wide = series.dtype in (nw.Int128, nw.UInt128)  # no numpy type: codes by the library
    if series.dtype.is_integer() and not wide and series.null_count() == 0 and len(series):
        values = np.asarray(series.to_numpy(), dtype=np.int64)  # integers: their own codes
        low, high = int(values.min()), int(values.max())
        if high - low < 1 << 40:
            return values - low, high - low + 1
    if module == "pyarrow":
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(native)
        if hasattr(encoded, "combine_chunks"):
            encoded = encoded.combine_chunks()
        return (
            np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
            len(encoded.dictionary),
        )
    if module == "pandas":
        import pandas as pd

        codes, uniques = pd.factorize(native)
        return np.asarray(codes, dtype=np.int64), len(uniques)
    if module == "polars":
        ranks = np.asarray(native.rank("dense").to_numpy(), dtype=np.int64) - 1
        return ranks, int(ranks.max()) + 1 if ranks.size else 0
    _, inverse = np.unique(np.asarray(series.to_numpy()), return_inverse=True)
    inverse = np.asarray(inverse, dtype=np.int64).reshape(-1)
    return inverse, int(inverse.max()) + 1 if inverse.size else 0


def key_codes(frame: Any, columns: list[str]) -> NDArray[np.int64]:
    """One int64 per row, equal exactly when the rows' values in ``columns`` are equal."""
    codes = np.zeros(frame.shape[0], dtype=np.int64)
    size = 1
    for column in columns:
        column_codes, distinct = _column_codes(frame.get_column(column))
        if size * max(distinct, 1) >= 1 << 62:  # re-number before the product could overflow
            _, codes = np.unique(codes, return_inverse=True)
            codes = np.asarray(codes, dtype=np.int64).reshape(-1)
            size = int(codes.max()) + 1 if codes.size else 1
        codes = codes * max(distinct, 1) + column_codes
        size *= max(distinct, 1)
    return codes


#: Scores in (0, 1] are sorted as 31-bit integers next to the key when the key fits in 32 bits.
_SCORE_BITS = 31


def _ranks(keys: NDArray[np.int64], scores: NDArray[np.float64]) -> tuple[Any, Any, Any]:
    """(order, start of each key's run in that order, run lengths): rows sorted by key, then
    by score in (0, 1] from highest; ties keep their input order (a stable sort).

    When the keys fit in 32 bits, key and score are one int64 (key·2³¹ + (2³¹ − 1 − ⌊s·2³¹⌋))
    and one stable sort orders both, about three times faster than a two-key lexsort; two
    scores in the same 2⁻³¹ step then count as tied (input order), which only decides which
    of a pair's rows — or of an id's groups — is kept, from that id's own rows.
    """
    n = keys.shape[0]
    if n and int(keys.max()) < 1 << 32:
        steps = np.minimum(np.floor(scores * 2.0**_SCORE_BITS), 2.0**_SCORE_BITS - 1)
        combined = (keys << _SCORE_BITS) + ((1 << _SCORE_BITS) - 1 - steps.astype(np.int64))
        order = np.argsort(combined, kind="stable")
    else:
        order = np.lexsort((-scores, keys))
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if n else keys
    lengths = np.diff(np.r_[starts, n])
    return order, starts, lengths


def keep_mask(
    pairs: NDArray[np.int64],
    ids: NDArray[np.int64],
    priority: NDArray[np.float64],
    max_rows: int,
    max_groups: int | None,
) -> NDArray[np.bool_]:
    """Which rows the bounding keeps, in input order (see the module docstring): in each
    (id, group) pair the ``max_rows`` rows of highest priority; of each id's pairs, the
    ``max_groups`` of highest score n·ln(max u) (None: ungrouped, every pair kept)."""
    n = priority.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return keep
    order, starts, lengths = _ranks(pairs, priority)
    rank = np.arange(n) - np.repeat(starts, lengths)  # 0-based, within the pair
    kept = rank < max_rows
    if max_groups is not None:
        # Mⁿ for the pair's max priority M (its first row) and n rows: uniform on (0, 1].
        score = np.exp(lengths * np.log(priority[order][starts]))
        pair_ids = ids[order][starts]
        order2, starts2, lengths2 = _ranks(pair_ids, score)
        pair_rank = np.arange(pair_ids.shape[0]) - np.repeat(starts2, lengths2)
        pair_kept = np.empty(pair_ids.shape[0], dtype=np.bool_)
        pair_kept[order2] = pair_rank < max_groups
        kept &= np.repeat(pair_kept, lengths)
    keep[order] = kept
    return keep

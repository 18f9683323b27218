"""Contribution bounding: keep at most G groups per id and R rows per (id, group), at random.

Under an id privacy unit (:class:`dpkit.units.IdUnit`) neighbouring tables differ by all the
rows of one id. Every sensitivity of a grouped query is derived from two declared bounds —
G = ``max_groups`` groups per id and R = ``max_rows`` rows per id and group — and this module
makes them true whatever the data, before anything is aggregated:

1. within each (id, group) pair the R rows of highest **row priority** are kept (all of them
   if the pair has at most R);
2. of each id's pairs, those whose **pair priority** is among the G highest are kept.

**Priorities from the rows' content.** A release draws one :class:`BoundingKey` (six 64-bit
words) from its random source — secure by default — and every priority is a keyed hash of a
row's content (:mod:`dpkit.tables.encoding` turns values into 64-bit words):

* the pair priority q = F(key, id, group keys) — one word per pair;
* the row priority p = F(key, id, group keys, v, j), where v is the *content* the aggregate
  reads from the row (a sum's fixed-point integer, a histogram cell, a quantile's lattice
  cell; nothing for a count; for rows bounded once for several aggregates, a chained hash
  of the float64 values they all read) and j numbers the rows of equal (id, group, v)
  0, 1, 2, …

F chains MurmurHash3's finaliser (:func:`~dpkit.tables.encoding.mix`) over the words, each step
keyed by a word of the key. Rows with equal content are interchangeable — they add the same
to every aggregate — so numbering them j = 0, 1, … gives each row its own priority while
the *multiset* of priorities depends on the multiset of rows only. Ties (equal p for distinct
content, which needs a 64-bit collision) are broken by a fixed hash of the content v, then
by v, and a tie among pair priorities keeps *none* of the tied pairs that do not all fit among
the G (a pair is kept when at most G of its id's pairs have a priority ≥ its own), so that
what is kept never depends on row order or on the engine. Where the hash behaves like a random function, step 1 keeps a
uniformly random R-subset of each pair's rows and step 2 a uniformly random G-subset of each
id's groups, whatever their sizes.

**Why the truncation is id-stable** (the property the privacy proof needs). For a fixed key,
the rows kept for an id are a function of that id's own rows alone: its pairs' priorities
depend on its id and group keys, its rows' priorities on its own rows, and the ties are broken
by content. Let D′ be D plus all the rows of one id x. With the same key, every id other than
x keeps exactly the same rows in D and in D′, and x keeps at most R rows in each of at most G
groups. So the two truncated tables are neighbours *with bounded contributions* — one adds at
most G·R rows, at most R per group, in at most G groups — and each aggregate of the truncated
tables moves by at most its bounded sensitivity (L1 = G·R·c, L2 = √G·R·c for a per-row
contribution ≤ c). A mechanism that is (ε, δ)-DP for bounded neighbours is therefore (ε, δ)-DP
for id neighbours after the truncation, for every key, hence also for a random key (the
argument of "stable transformations"; McSherry 2009, PINQ, Section 2.3, and of Wilson et al.
2020, "Differentially Private SQL with Bounded User Contribution", PoPETs, Section 3).

**What the key and the hash are for.** The argument above holds for *any* key and any hash
function, even a known one: privacy rests on the selection being a per-id function, never on
the priorities being unpredictable. The key and the hash's quality decide only *which* rows
are kept — the bias of a bounded statistic when people exceed the bounds, i.e. utility. That
is why a fast, non-cryptographic mixer is acceptable here (a chosen key cannot make anyone's
contribution exceed the bounds), and why the key is drawn from the release's source anyway:
independent releases truncate independently, and nobody can arrange in advance which of a
person's rows survive. Priorities derived from a row's *position* would not do: adding a
person shifts other people's positions, and with them their kept rows.

**The same on every engine.** Because a priority is a function of the row and the key alone
— not of where the row is or which worker sees it — the selection is identical on a pandas
table, on a Dask DataFrame spread over partitions and on a Spark DataFrame, and a retried task
recomputes exactly the rows it kept before. An engine only has to bring each id's rows
together (a shuffle by id: :mod:`dpkit.tables.engines`) and apply :meth:`Bounding.apply` to
each part; an eager table is one part. The rows of one id may start in any number of
partitions.

Rows whose id or group key is missing must be dropped before (they belong to no unit that
could be bounded).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.tables.encoding import PRIME, encode_column, mix
from dpkit.tables.frame import narwhals

__all__ = [
    "FIRST",
    "Bounding",
    "BoundingKey",
    "ChainedWords",
    "bound_eager",
    "keep_mask",
    "lexsort_codes",
    "pair_priority",
    "row_priority",
    "values_content",
]

#: The column bounding adds: 1 on exactly one kept row of each kept (id, group) pair and 0
#: elsewhere (int64), so that summing it per group counts the ids there (what partition
#: selection needs).
FIRST = "__dpkit_first"
_KEEP = "__dpkit_keep"
_ODD = np.uint64(0x9FB21C651E98DF25)


@attrs.frozen(repr=False)
class BoundingKey:
    """The key of one release's bounding priorities: six 64-bit words, drawn once from the
    release's random source (:meth:`draw`). Its ``repr`` hides the words."""

    words: tuple[int, int, int, int, int, int]

    @classmethod
    def draw(cls, rng: Any) -> BoundingKey:
        """Six words from ``rng`` (a :class:`~dpkit.SecureRandom` or a numpy Generator)."""
        from dpkit.randomness.modes import word_reader

        drawn = word_reader(rng)(6)
        return cls(tuple(int(w) for w in drawn))  # type: ignore[arg-type]

    @property
    def lanes(self) -> tuple[int, int]:
        """The two multipliers of the text hash, in [1, 2³¹ − 2]."""
        return 1 + self.words[4] % (PRIME - 1), 1 + self.words[5] % (PRIME - 1)

    def word(self, i: int) -> NDArray[np.uint64]:
        """Word ``i`` as a one-element array (array arithmetic wraps without warnings)."""
        return np.array([self.words[i]], dtype=np.uint64)

    def __repr__(self) -> str:
        return "BoundingKey(<hidden>)"


def _pair_words(words: list[NDArray[np.uint64]], key: BoundingKey) -> NDArray[np.uint64]:
    """g = F(key, id, group keys): the words of a row's id and group keys, chained."""
    out = np.full(words[0].shape, key.word(0), dtype=np.uint64)
    for word in words:
        out = mix(out ^ word)
    return out


@attrs.frozen(eq=False)
class ChainedWords:
    """The chained words g of the rows, computed only for the rows asked (``words[rows]``):
    bounding needs them at one row per pair and at the rows of crowded pairs, not at all."""

    columns: list[NDArray[np.uint64]]
    key: BoundingKey

    def __getitem__(self, rows: NDArray[np.intp]) -> NDArray[np.uint64]:
        return _pair_words([column[rows] for column in self.columns], self.key)


def pair_priority(pair: NDArray[np.uint64], key: BoundingKey) -> NDArray[np.uint64]:
    """q: the priority of an (id, group) pair from its chained words g."""
    return mix(pair ^ key.word(1))


def row_priority(
    pair: NDArray[np.uint64],
    content: NDArray[np.uint64],
    occurrence: NDArray[np.int64],
    key: BoundingKey,
) -> NDArray[np.uint64]:
    """p: the priority of a row from its pair's words g, its content v and its number j among
    the rows of equal (pair, content)."""
    inner = mix(mix(pair ^ key.word(2)) ^ content)
    return mix((inner + occurrence.astype(np.uint64) * _ODD) ^ key.word(3))


def _lengths(starts: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    """The length of each run of ``n`` sorted rows, from the runs' ``starts``."""
    lengths = np.empty_like(starts)
    if starts.size:
        np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
        lengths[-1] = n - starts[-1]
    return lengths


def _runs(*sorted_keys: NDArray[Any]) -> NDArray[np.int64]:
    """Start of each run of equal keys (all arrays sorted together)."""
    n = sorted_keys[0].shape[0]
    change = np.zeros(n, dtype=np.bool_)
    if n:
        change[0] = True
    for key in sorted_keys:
        change[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(change)


def keep_mask(
    ids: NDArray[np.int64],
    pairs: NDArray[np.int64],
    pair_words: NDArray[np.uint64] | ChainedWords,
    content: NDArray[np.uint64] | None,
    max_rows: int,
    max_groups: int | None,
    key: BoundingKey,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(kept rows, one marked kept row of each kept pair), in input order.

    ``ids`` and ``pairs`` are exact codes of the rows' id and (id, group) (equal exactly for
    equal values), ``pair_words`` the rows' chained words g (an array, or a
    :class:`ChainedWords`; indexed by rows), equal for rows of one pair — encoded words are a
    function of the codes (:mod:`dpkit.tables.encoding` spreads one word per distinct value by
    the codes), so a pair's priority is that of any of its rows —, ``content`` the 64-bit content v
    (None: the rows of a pair are interchangeable, as for a count). ``max_groups`` None keeps
    every pair (an ungrouped query). See the module docstring for the rule.
    """
    n = ids.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    first = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return keep, first
    # Rows by pair (then, with content, by a hash of their content and the content: equal
    # (pair, content) rows end up together, in input order; the hash makes the order fast).
    order = (
        lexsort_codes(pairs)
        if content is None
        else lexsort_codes(pairs, mix(content ^ _ODD), content)
    )
    # Arrays are deleted as soon as they are spent: at 10⁷ rows each is 80 MB, and the
    # bounding's peak memory is the sum of those alive at once.
    sorted_pairs = pairs[order]
    starts = _runs(sorted_pairs)
    lengths = _lengths(starts, n)
    if content is not None:
        # Only the rows of a pair with more than R rows need priorities (a pair with at most
        # R keeps them all): rank those, within their pair, by priority, highest first; equal
        # priorities (a collision) stay in the order above (the sort is stable).
        crowded = np.flatnonzero(np.repeat(lengths > max_rows, lengths))
        if crowded.size:
            rows = order[crowded]
            crowded_pairs, crowded_content = sorted_pairs[crowded], content[rows]
            equal = _runs(crowded_pairs, crowded_content)
            occurrence = np.arange(rows.size) - np.repeat(equal, _lengths(equal, rows.size))
            priority = row_priority(pair_words[rows], crowded_content, occurrence, key)
            order[crowded] = rows[lexsort_codes(crowded_pairs, ~priority)]
    del sorted_pairs
    pair_kept = np.ones(starts.shape[0], dtype=np.bool_)
    if max_groups is not None:
        # Every row of a pair has the pair's words (see above): its first row's will do.
        heads = order[starts]
        priority = pair_priority(pair_words[heads], key)
        pair_ids = ids[heads]
        del heads
        ranked = lexsort_codes(pair_ids, ~priority)
        ids_sorted, priority_sorted = pair_ids[ranked], priority[ranked]
        del pair_ids, priority
        pairs_count = ranked.shape[0]
        id_starts = _runs(ids_sorted)
        id_first = np.repeat(id_starts, _lengths(id_starts, pairs_count))
        del id_starts
        tie_starts = _runs(ids_sorted, priority_sorted)
        del ids_sorted, priority_sorted
        tie_last = np.repeat(
            np.r_[tie_starts[1:], pairs_count] - 1, _lengths(tie_starts, pairs_count)
        )
        del tie_starts
        # At most G pairs of the id have a priority ≥ this pair's (ties counted in full).
        tie_last -= id_first
        del id_first
        pair_kept[ranked] = tie_last + 1 <= max_groups
        del ranked, tie_last
    rank = np.arange(n) - np.repeat(starts, lengths)
    kept = (rank < max_rows) & np.repeat(pair_kept, lengths)
    keep[order] = kept
    first[order] = kept & (rank == 0)
    return keep, first


def lexsort_codes(major: NDArray[np.int64], *minors: NDArray[np.uint64]) -> NDArray[np.intp]:
    """``np.lexsort((*reversed(minors), major))``: rows by ``major`` (non-negative codes), then
    by each of ``minors`` (64-bit words, the first a hash), ties in input order — the same
    permutation, found faster.

    One 64-bit key per row packs ``major``, as many top bits of ``minors[0]`` as fit and the
    row's index, and is sorted by value (numpy's vectorised sort of plain integers, several
    times faster than a stable argsort); the index in the low bits makes the order stable and
    is read back as the permutation. That is the lexicographic order except within a run of
    rows whose packed keys differ only in the index (equal ``major``, equal top bits) while
    their minor words differ — for a hash as likely as equal top bits — so exactly the rows of
    such runs are re-ordered by ``np.lexsort`` on their full words, run by run. When ``major``
    and the index need more than 64 bits, or ``major`` is negative, ``np.lexsort`` orders all.
    Either way the result is the lexicographic order, so it never depends on which path ran.
    """
    n = major.shape[0]
    exact = (*reversed(minors), major)
    if n == 0 or int(major.min()) < 0:
        return np.lexsort(exact)
    index_bits = max(1, (n - 1).bit_length())
    hash_bits = 64 - index_bits - int(major.max()).bit_length()
    if hash_bits < 0:
        return np.lexsort(exact)
    shift = np.uint64(index_bits)
    packed: NDArray[np.uint64] = major.astype(np.uint64) << np.uint64(index_bits + hash_bits)
    if minors and hash_bits:
        top = minors[0] >> np.uint64(64 - hash_bits)
        top <<= shift
        packed |= top
        del top
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    # The index bits, read in place as signed (they are below 2⁶³): no copy.
    order: NDArray[np.intp] = (packed & np.uint64((1 << index_bits) - 1)).view(np.intp)
    if not minors:
        return order
    head = packed
    head >>= shift  # the packed keys are no longer needed: their heads, in place
    tied = head[1:] == head[:-1]
    if not tied.any():
        return order
    # The rows of each run of equal heads (a run's first row and every row tied to the one
    # before), ordered by their full words within the run; the run's rows are in input order
    # already, so the stable lexsort keeps ties in input order.
    in_run = np.zeros(n, dtype=np.bool_)
    in_run[1:] = tied
    in_run[:-1] |= tied
    at = np.flatnonzero(in_run)
    run = np.cumsum(np.r_[True, ~tied][at])
    rows = order[at]
    order[at] = rows[np.lexsort((*(m[rows] for m in reversed(minors)), run))]
    return order


def _combine(codes: list[NDArray[np.int64]]) -> NDArray[np.int64]:
    """One int64 per row, equal exactly when every column's code is equal."""
    out = codes[0]
    size = int(out.max()) + 1 if out.size else 1
    for column in codes[1:]:
        distinct = int(column.max()) + 1 if column.size else 1
        if size * distinct >= 1 << 62:  # re-number before the product could overflow
            _, inverse = np.unique(out, return_inverse=True)
            out = np.asarray(inverse, dtype=np.int64).reshape(-1)
            size = int(out.max()) + 1 if out.size else 1
        out = out * distinct + column
        size *= distinct
    return out


def content_bits(values: NDArray[Any]) -> NDArray[np.uint64]:
    """The 64-bit content of a value column: an integer's two's complement, a float's bits
    (−0.0 as 0.0, the same value either way)."""
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return (np.asarray(array, dtype=np.float64) + 0.0).view(np.uint64)
    return np.asarray(array, dtype=np.int64).view(np.uint64)


def values_content(columns: list[NDArray[Any]]) -> NDArray[np.uint64]:
    """The 64-bit content of rows that several aggregates read, one float64 value each: each
    value's bits (every NaN as one NaN, −0.0 as 0.0), chained by :func:`mix` — equal for rows
    whose values are all equal, so such rows are interchangeable for every aggregate (and,
    for two rows of unequal values, with probability about 2⁻⁶⁴: they are then numbered in
    input order, which changes which rows are kept, never how many)."""
    out = np.zeros(columns[0].shape[0] if columns else 0, dtype=np.uint64)
    for column in columns:
        values = np.asarray(column, dtype=np.float64)
        out = mix(out ^ content_bits(np.where(np.isnan(values), np.nan, values)))
    return out


@attrs.frozen
class Bounding:
    """One release's contribution bounding: which columns, which bounds, which key.

    ``content`` names the column whose value the aggregate reads (None for a count);
    ``values`` instead names several float64 columns, the values that the several aggregates
    of one statement read (:func:`values_content`; rows bounded once for all of them);
    ``max_groups`` is None for an ungrouped query. :meth:`apply` bounds a pandas DataFrame
    holding all the rows of its ids (an engine's partition after a shuffle by id, or a whole
    table); :meth:`masks` is the same on columns given by a getter. Picklable, so that an
    engine ships it to its workers.
    """

    id_column: str
    by: tuple[str, ...]
    content: str | None
    max_rows: int
    max_groups: int | None
    key: BoundingKey
    values: tuple[str, ...] = ()

    def masks(
        self, column: Callable[[str], Any], rows: int
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """(kept rows, first kept row of each kept pair) of ``rows`` rows whose columns
        ``column(name)`` returns (pandas, Polars or PyArrow columns, without missing keys)."""
        if rows == 0:
            empty = np.zeros(0, dtype=np.bool_)
            return empty, empty
        _return_arrow_pages()
        lanes = self.key.lanes
        encoded = [encode_column(column(c), lanes) for c in (self.id_column, *self.by)]
        ids = encoded[0][0]
        pairs = _combine([codes for codes, _ in encoded]) if self.by else ids
        words = ChainedWords([w for _, w in encoded], self.key)
        content = None
        if self.content is not None:
            content = content_bits(_numbers(column(self.content)))
        elif self.values:
            content = values_content([_numbers(column(c)) for c in self.values])
        groups = self.max_groups if self.by else None
        return keep_mask(ids, pairs, words, content, self.max_rows, groups, self.key)

    def apply(self, frame: Any) -> Any:
        """The kept rows of a pandas DataFrame, with the :data:`FIRST` column."""
        keep, first = self.masks(frame.__getitem__, len(frame))
        kept = np.flatnonzero(keep)
        # Copy the kept rows once (most rows are dropped), then add the column to the copy.
        out = frame.take(kept).reset_index(drop=True)
        out[FIRST] = first[kept].astype(np.int64)
        return out

    def apply_arrow(self, table: Any) -> Any:
        """The kept rows of a PyArrow table, with the :data:`FIRST` column."""
        import pyarrow as pa

        keep, first = self.masks(table.column, table.num_rows)
        kept = np.flatnonzero(keep)
        return table.take(kept).append_column(FIRST, pa.array(first[kept].astype(np.int64)))


def _numbers(native: Any) -> NDArray[Any]:
    return np.asarray(native.to_numpy() if hasattr(native, "to_numpy") else native)


def _return_arrow_pages() -> None:
    """Give the pages PyArrow's allocator keeps from freed arrays back to the system before
    the bounding's numpy arrays are allocated (numpy cannot reuse them): a few hundred MB of
    a 10⁷-row query's peak. Cheap (tens of µs), and nothing if PyArrow is not loaded."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()


def bound_eager(frame: Any, bounding: Bounding) -> Any:
    """The rows ``bounding`` keeps of an eager narwhals frame (see the module docstring), with
    the :data:`FIRST` column: the whole table as one part. A lazy frame is bounded by its
    engine (:func:`dpkit.tables.engines.bound_contributions`), which brings each id's rows
    together first."""
    nw = narwhals()
    keep, first = bounding.masks(lambda c: frame.get_column(c).to_native(), frame.shape[0])
    backend = frame.implementation
    columns = [
        nw.new_series(FIRST, first.astype(np.int64), nw.Int64, backend=backend),
        nw.new_series(_KEEP, keep, nw.Boolean, backend=backend),
    ]
    return frame.with_columns(*columns).filter(nw.col(_KEEP)).drop(_KEEP)

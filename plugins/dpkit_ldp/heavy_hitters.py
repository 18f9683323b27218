"""What the heavy-hitter protocols (``pem``, ``treehist``) share: items as L-bit strings, their
domain and session hooks, the rounds' group draw, and the :class:`HeavyHitters` result.

**Items.** An item is an L-bit string (L = ``bits`` ≤ 64), held as an unsigned integer whose
binary digits, most significant first, are the string; its prefix of length s is x >> (L − s).
Integers in [0, 2^L) are items as they are; text (UTF-8) and bytes of at most L/8 bytes (L a
multiple of 8) are read big-endian and padded with zero bytes on the right, so that the
prefixes of the integer are the prefixes of the string, and :meth:`HeavyHitters.labels` gives
them back as bytes.

**Rounds.** The protocols split the population into groups by a draw that does not depend on
the data (each device's group uniform, independently): each device reports in exactly one group
of the tree (and, for ``treehist``, once more in the estimation group), so the rounds cost a
device ε in all — the groups are disjoint, and one device's reports are its only releases.
Given the group sizes N_t, the devices of group t are a uniformly random subset of the n, so
the count n_v^{(t)} of an item among them is hypergeometric, and n̂_v = (n/N_t)·ĉ_v^{(t)} is
unbiased for n_v when ĉ^{(t)} is unbiased for n_v^{(t)}, with

    Var n̂_v = (n/N_t)²·(E Var[ĉ | group] + N_t·(n_v/n)(1 − n_v/n)(n − N_t)/(n − 1)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    Domain,
    Estimator,
    InvalidData,
    InvalidParameter,
    Statistics,
    array_library,
    as_array,
    describe_dtype,
    plain,
    readable,
    resolve_rng,
)
from dpkit_ldp._reports import read_only_floats, read_only_words
from dpkit_ldp.items import as_items, coerce_items

__all__ = [
    "BitItemDomain",
    "BitItemInput",
    "GroupedReports",
    "GroupedReportsEstimator",
    "HeavyHitters",
    "Round",
    "as_bit_items",
    "hypergeometric_variance",
    "prefix_search",
]


def _from_bytes(items: NDArray[Any], bits: int) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Big-endian, right-padded byte strings (a bytes array, or an object array of ``bytes``)
    → L-bit integers, and which ones fitted."""
    width = bits // 8
    flat = np.ascontiguousarray(items.reshape(-1))
    if flat.dtype == object:  # long items kept unpadded (dpkit_ldp.items): their first bytes
        fits = np.fromiter((len(b) <= width for b in flat), dtype=bool, count=flat.shape[0])
        flat = np.array([b[: width + 1] for b in flat.tolist()], dtype=f"S{width + 1}")
    else:
        fits = np.strings.str_len(flat) <= width
    n = flat.shape[0]
    size = flat.dtype.itemsize
    buffer = np.zeros((n, 8), dtype=np.uint8)
    take = min(size, width)
    if take:
        buffer[:, :take] = flat.view(np.uint8).reshape(n, size)[:, :take]
    value = buffer.view(">u8").reshape(n).astype(np.uint64)
    value >>= np.uint64(64 - bits)
    return value.reshape(items.shape), fits.reshape(items.shape)


def as_bit_items(
    values: Any, bits: int, *, owner: str, field: str = "values"
) -> NDArray[np.uint64]:
    """``values`` as L-bit items (``uint64``), or :class:`~InvalidData` (the strict path)."""
    array = as_array(values, owner=owner, field=field)
    kind = array.dtype.kind
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.uint64)
    if kind in "iu":
        unsigned = array.view(np.dtype(f"u{array.dtype.itemsize}")).astype(np.uint64)
        bad = (array < 0) | (unsigned >> np.uint64(bits) > 0) if bits < 64 else array < 0
        if np.any(bad):
            first = plain(array.flat[int(np.flatnonzero(np.asarray(bad).ravel())[0])])
            raise InvalidData(
                f"{owner}: {field} contain {first!r}, outside the {bits}-bit items "
                f"0..{(1 << bits) - 1}",
                field=field,
            )
        return unsigned.reshape(array.shape)
    if kind in "USOT":
        if bits % 8:
            raise InvalidData(
                f"{owner}: {field} are text or bytes, but bits={bits} is not a whole number of "
                "bytes; give integers, or a multiple of 8 bits",
                field=field,
            )
        items = as_items(array, owner=owner, field=field)
        value, fits = _from_bytes(items, bits)
        if not np.all(fits):
            raise InvalidData(
                f"{owner}: {field} hold {int(np.count_nonzero(~fits))} item(s) longer than "
                f"{bits // 8} bytes (bits={bits}); truncate them, or release through a Session, "
                "which keeps their first bytes",
                field=field,
            )
        return value
    raise InvalidData(
        f"{owner}: {field} must be integers, text or bytes (the items), got an array of "
        f"{describe_dtype(array)}",
        field=field,
    )


def _object_bit_item(value: Any, bits: int) -> int | None:
    """One Python value's L-bit item (:func:`coerce_bit_items`), or None: also where its
    conversion raises (a subclass whose ``__int__``, ``__lt__``, ``encode`` or ``__bytes__``
    raises), so that the private phase stays total."""
    try:
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            number = int(value)
            return number if 0 <= number < 1 << bits else None
        if bits % 8 == 0 and isinstance(value, (str, bytes)):
            if isinstance(value, str):
                raw = str.encode(value, "utf-8", "surrogatepass")
            else:
                raw = bytes(value)
            width = bits // 8
            return int.from_bytes(raw.rstrip(b"\0")[:width].ljust(width, b"\0"), "big")
    except Exception:
        return None
    return None


def coerce_bit_items(values: Any, bits: int, rng: Any) -> NDArray[np.uint64]:
    """Every value as an L-bit item, never raising (the private phase): integers in range are
    themselves; text and bytes keep their first L/8 bytes; anything else — out-of-range
    integers, NaN, None, real numbers — becomes an item drawn uniformly at random (with the
    session's ``rng``), a mixture of the mechanism's ε-LDP laws and so ε-LDP itself."""
    array = readable(values)
    if array.dtype.kind == "T":  # numpy's variable-width text: its str values
        array = array.astype(object)
    flat = array.reshape(-1)
    out = np.zeros(flat.shape, dtype=np.uint64)
    valid = np.zeros(flat.shape, dtype=bool)
    kind = array.dtype.kind
    if kind in "iu" and flat.size:
        unsigned = flat.view(np.dtype(f"u{flat.dtype.itemsize}")).astype(np.uint64)
        valid = flat >= 0
        if bits < 64:
            valid &= (unsigned >> np.uint64(bits)) == 0
        out = np.where(valid, unsigned, 0).astype(np.uint64)
    elif kind in "US" and bits % 8 == 0 and flat.size:
        out, _ = _from_bytes(coerce_items(flat), bits)  # the first L/8 bytes of each
        valid[:] = True
    elif kind == "O":
        for i, value in enumerate(flat):
            item = _object_bit_item(value, bits)
            if item is not None:
                out[i], valid[i] = item, True
    bad = np.flatnonzero(~valid)
    if bad.size:
        generator = resolve_rng(rng)[0]
        out[bad] = random_items(generator, bad.size, bits)
    return out.reshape(array.shape)


def random_items(generator: Any, size: int, bits: int) -> NDArray[np.uint64]:
    """``size`` items uniform on [0, 2^L), exactly."""
    if bits == 64:
        words: NDArray[np.uint64] = generator.integers(
            0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True
        )
        return words
    drawn: NDArray[np.uint64] = generator.integers(0, 1 << bits, size=size, dtype=np.uint64)
    return drawn


@attrs.frozen
class BitItemDomain(Domain):
    """One device's L-bit item; any two items neighbour. Worst-case pairs: items that differ in
    the first bit, in the last bit, and everywhere (both orders)."""

    bits: int
    relation: ClassVar[str] = "replace one device's item by any other item (local DP)"  # type: ignore[misc]

    def pairs(self) -> list[tuple[Any, Any]]:
        top = (1 << self.bits) - 1
        half = 1 << (self.bits - 1)
        found = [(0, top), (0, 1), (half - 1, half)] if self.bits > 1 else [(0, 1)]
        return [pair for a, b in found for pair in ((a, b), (b, a))]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        if n <= 0:
            return []
        x = random_items(rng, n, self.bits)
        y = random_items(rng, n, self.bits)
        y = np.where(x == y, x ^ np.uint64(1), y)
        return [(int(a), int(b)) for a, b in zip(x, y, strict=True)]

    def are_neighbours(self, x: Any, y: Any) -> bool:
        try:
            a, b = as_bit_items(np.array([x, y]), self.bits, owner="domain")
        except (InvalidData, ValueError, TypeError, OverflowError):
            return False
        return bool(a != b)


class BitItemInput:
    """Session hooks of a mechanism on L-bit items: a 1-D array (structure only) in the
    public phase, :func:`coerce_bit_items` in the private phase."""

    __slots__ = ()

    name: ClassVar[str]
    bits: int

    @property
    def domain(self) -> BitItemDomain:
        return BitItemDomain(self.bits)

    def check_input(self, values: Any, /) -> None:
        try:
            array = np.asarray(values)
        except (ValueError, TypeError):
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one item per device; the nested "
                "sequences have different lengths",
                field="values",
            ) from None
        if array.ndim != 1:
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one item per device, got shape "
                f"{array.shape}",
                field="values",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.uint64]:
        return coerce_bit_items(values, self.bits, rng)


def hypergeometric_variance(counts: NDArray[np.float64], n: int, group: int) -> NDArray[np.float64]:
    """Var of an item's count in a uniformly random group of ``group`` of n devices."""
    if n <= 1:
        return np.zeros_like(counts)
    share = np.clip(counts / n, 0.0, 1.0)
    return np.asarray(group * share * (1.0 - share) * (n - group) / (n - 1), dtype=np.float64)


@attrs.frozen(eq=False)
class GroupedReports(Statistics):
    """The reports themselves (the heavy-hitter servers decode round after round, choosing each
    round's candidates from the previous one, so no fixed-size summary suffices); merged by
    concatenation, n·(8 × columns) bytes."""

    mechanism: str
    reports: NDArray[np.uint64] = attrs.field(converter=read_only_words)

    @property
    def n(self) -> int:  # type: ignore[override]
        return int(self.reports.shape[0])

    def __add__(self, other: GroupedReports) -> GroupedReports:
        if not isinstance(other, GroupedReports):
            return NotImplemented
        if other.mechanism != self.mechanism or other.reports.shape[1:] != self.reports.shape[1:]:
            raise InvalidData(
                f"cannot merge reports of {other.mechanism!r} into reports of {self.mechanism!r}",
                field="statistics",
            )
        return GroupedReports(self.mechanism, np.concatenate([self.reports, other.reports]))


@attrs.frozen
class Round:
    """One round of the decoding: its prefix length, its devices, its candidates, and the
    prefixes it kept."""

    prefix_bits: int
    devices: int
    candidates: int
    kept: tuple[int, ...]


@attrs.frozen(eq=False)
class HeavyHitters:
    """The heavy hitters found: ``items`` (L-bit integers, most frequent first), their estimated
    counts and the variance of each estimate.

    ``unbiased`` says whether the estimates are unbiased for the found items' counts: true when
    they come from reports independent of the search (``treehist``'s estimation group), false
    when the last round both chose and estimated them (``pem``), where an item chosen because
    its noisy estimate was high is over-estimated on average (``note`` says so).
    """

    mechanism: str
    bits: int
    n: int
    items: NDArray[np.uint64] = attrs.field(converter=read_only_words)
    estimates: NDArray[np.float64] = attrs.field(converter=read_only_floats)
    variance: NDArray[np.float64] = attrs.field(converter=read_only_floats)
    rounds: tuple[Round, ...] = ()
    unbiased: bool = True
    note: str = ""

    @property
    def frequencies(self) -> NDArray[np.float64]:
        return self.estimates / self.n if self.n else np.full_like(self.estimates, np.nan)

    def labels(self) -> list[bytes]:
        """The items as byte strings (L/8 bytes each, trailing zero bytes removed)."""
        if self.bits % 8:
            raise InvalidParameter("bits", self.bits, "a multiple of 8 to read items as bytes")
        width = self.bits // 8
        shifted = self.items.astype(np.uint64) << np.uint64(64 - self.bits)
        raw = shifted.astype(">u8").view(np.uint8).reshape(-1, 8)[:, :width]
        return [bytes(row).rstrip(b"\0") for row in raw]

    def confidence_interval(
        self, level: float = 0.95
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The normal interval estimate ± z·√variance for each found item's count."""
        if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        half = z * np.sqrt(np.maximum(self.variance, 0.0))
        return self.estimates - half, self.estimates + half

    def names(self) -> list[Any]:
        """The items as a result names them: their text (:meth:`labels` read as UTF-8, a byte
        that is not UTF-8 — a character cut at the L/8-th byte — written ``\\xNN``) when L is a
        whole number of bytes, else the integers; ``items`` are exact either way."""
        if self.bits % 8:
            return [int(item) for item in self.items]
        return [label.decode("utf-8", "backslashreplace") for label in self.labels()]

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The heavy hitters in a result document (:class:`dpkit.document.Document`): the
        number of reports, the items found (``categories``: :meth:`names`; ``items``: the
        L-bit integers), their estimated counts, variances and normal intervals at
        ``confidence``, whether the counts are unbiased (and ``note`` when not), and each
        round's prefix length, devices and candidates."""
        low, high = self.confidence_interval(confidence)

        def finite(values: NDArray[np.float64]) -> list[float | None]:
            """JSON has no infinity: an unbounded variance or bound (a round that no device
            joined) is null."""
            return [float(v) if np.isfinite(v) else None for v in values]

        return {
            "n": self.n,
            "categories": self.names(),
            "items": [int(item) for item in self.items],
            "estimate": finite(self.estimates),
            "variance": finite(self.variance),
            "confidence_interval": {
                "level": confidence,
                "lower": finite(low),
                "upper": finite(high),
                "method": "normal: estimate ± z·√variance",
            },
            "unbiased": self.unbiased,
            "note": self.note or None,
            "rounds": [
                {"prefix_bits": r.prefix_bits, "devices": r.devices, "candidates": r.candidates}
                for r in self.rounds
            ],
        }


def top_candidates(
    candidates: NDArray[np.uint64], estimates: NDArray[np.float64], k: int
) -> NDArray[np.intp]:
    """Indices of the k largest estimates, largest first (ties by candidate order)."""
    order = np.argsort(-estimates, kind="stable")
    return order[: min(k, order.size)]


def extend(prefixes: Sequence[int] | NDArray[np.uint64], extra: int) -> NDArray[np.uint64]:
    """Every prefix followed by every ``extra``-bit suffix."""
    base = np.asarray(prefixes, dtype=np.uint64)[:, None] << np.uint64(extra)
    out: NDArray[np.uint64] = (base | np.arange(1 << extra, dtype=np.uint64)[None, :]).reshape(-1)
    return out


def prefix_search(
    reports: NDArray[np.uint64],
    lengths: Sequence[int],
    top: int,
    score: Callable[[NDArray[np.uint64], NDArray[np.uint64]], NDArray[np.float64]],
) -> tuple[NDArray[np.uint64], NDArray[np.float64], tuple[Round, ...]]:
    """The rounds of a prefix search: round t's candidates are all 2^{s_0} prefixes (t = 0),
    then every extension to s_t bits of the ``top`` kept by round t − 1; ``score(rows,
    candidates)`` estimates their counts from the round's own reports (the rows with t in
    column 0). Returns the last round's kept candidates, their scores, and the rounds."""
    candidates = np.arange(1 << lengths[0], dtype=np.uint64)
    estimates = np.zeros(0)
    rounds: list[Round] = []
    for t, length in enumerate(lengths):
        if t:
            candidates = extend(candidates, length - lengths[t - 1])
        rows = reports[reports[:, 0] == t]
        estimates = score(rows, candidates)
        kept = top_candidates(candidates, estimates, top)
        rounds.append(
            Round(length, rows.shape[0], candidates.size, tuple(int(c) for c in candidates[kept]))
        )
        candidates, estimates = candidates[kept], estimates[kept]
    return candidates, estimates, tuple(rounds)


class GroupedReportsEstimator(Estimator):
    """The server of a heavy-hitter protocol: :meth:`accumulate` keeps the checked reports
    (:class:`GroupedReports`); the protocol's :meth:`estimate` decodes them."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})

    def accumulate(self, reports: Any, /) -> GroupedReports:
        """The checked reports. An accelerator's reports are copied to the host once: the
        search chooses each round's candidates from the previous round's estimates, so the
        statistic is the reports themselves (n·40 bytes), not a sum the device could keep."""
        mech: Any = self.mechanism
        owner = f"{mech.name} estimator"
        library = array_library(reports, owner=owner, field="reports")
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            reports = library.small_to_host(reports)
        return GroupedReports(mech.name, mech.check_reports(reports, owner))

    def grouped(self, statistics: Any, method: str) -> GroupedReports:
        """``statistics`` if they are this protocol's reports (after checking ``method``)."""
        self.check_method(method)
        name = self.mechanism.name
        if not isinstance(statistics, GroupedReports) or statistics.mechanism != name:
            raise InvalidData(f"expected the GroupedReports of {name!r}", field="statistics")
        return statistics

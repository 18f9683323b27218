"""Codes and words of a dictionary-encoded column (PyArrow, Polars categoricals) equal those
of its decoded values: codes equal exactly for equal values (whatever duplicate or unused
dictionary entries there are), words the same per value."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from dpkit.tables.encoding import encode_column

LANES = (12345, 67890)


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two code arrays group the rows alike (equal in one exactly when in the other)."""
    return bool(np.array_equal(a[:, None] == a[None, :], b[:, None] == b[None, :]))


@pytest.mark.parametrize(
    "column",
    [
        # duplicate entries ("b" twice) and an unused one ("zz")
        pa.DictionaryArray.from_arrays(
            pa.array([0, 1, 3, 1, 0, 3], pa.int32()), pa.array(["a", "b", "zz", "b"])
        ),
        pa.DictionaryArray.from_arrays(
            pa.array([2, 0, 1, 1], pa.int8()), pa.array([1.5, -0.0, 0.0])
        ),
        pa.chunked_array(
            [
                pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["x", "y"])),
                pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int32()), pa.array(["x", "w"])),
            ]
        ),
        pl.Series(["p", "q", "p", "r"], dtype=pl.Categorical),
    ],
)
def test_a_dictionary_column_is_coded_as_its_values(column: object) -> None:
    codes, words = encode_column(column, LANES)
    if isinstance(column, pl.Series):
        decoded = pa.array(column.cast(pl.String).to_list())
    elif isinstance(column, pa.ChunkedArray):
        decoded = pa.chunked_array([c.dictionary_decode() for c in column.chunks])
    else:
        decoded = column.dictionary_decode()
    plain_codes, plain_words = encode_column(decoded, LANES)
    assert _same_partition(codes, plain_codes)
    assert np.array_equal(words, plain_words)


def _fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finaliser in Python integers (Appleby 2011, ``fmix64``)."""
    mask = (1 << 64) - 1
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & mask
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & mask
    return k ^ (k >> 33)


def test_mix_is_murmur3_fmix64() -> None:
    from dpkit.tables.encoding import mix

    words = np.random.default_rng(5).integers(0, 2**63, 500).astype(np.uint64) * np.uint64(3)
    words[:3] = [0, 1, 2**64 - 1]
    original = words.copy()
    assert mix(words).tolist() == [_fmix64(int(w)) for w in original]
    assert np.array_equal(words, original)  # the input is not changed in place


#: Stored values one step apart, of types whose Python value or text is coarser than the value
#: (a time64[ns] as a ``datetime.time`` of microseconds, a date64 of odd milliseconds as its
#: day) or whose double is (decimals beyond 2⁵³).
_ADJACENT = [
    (pa.decimal128(38, 0), 2**53),
    (pa.decimal256(60, 0), 2**53),
    (pa.time64("ns"), 1),
    (pa.time64("us"), 1),
    (pa.time32("ms"), 1),
    (pa.date64(), 86_400_000),
    (pa.timestamp("ns"), 1),
    (pa.timestamp("ns", tz="Europe/Paris"), 1),
    (pa.duration("ns"), 1),
]


@pytest.mark.parametrize(("kind", "value"), _ADJACENT, ids=[str(k) for k, _ in _ADJACENT])
def test_distinct_stored_values_have_distinct_codes(kind: pa.DataType, value: int) -> None:
    """Codes decide who is one person: two ids one step apart are two, however they print."""
    column = pa.chunked_array([pa.array([value, value + 1], kind), pa.array([value], kind)])
    codes, _ = encode_column(column, LANES)
    assert codes[0] != codes[1] and codes[0] == codes[2]

"""``lexsort_codes``: the bounding's fast stable sort gives exactly ``np.lexsort``'s order.

The fast path packs the major code with the top bits of the first minor word; these cases make
it tie (equal packed keys with different words), run out of bits, and see negative or empty
codes, and check every time against numpy's lexsort, the independent reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.tables.bounding import lexsort_codes


def _reference(major: np.ndarray, *minors: np.ndarray) -> np.ndarray:
    return np.lexsort((*reversed(minors), major))


@pytest.mark.parametrize("seed", range(8))
def test_random_codes_with_many_equal_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5000
    major = rng.integers(0, 40, n)
    content = rng.integers(0, 6, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    words = rng.integers(0, 2**63, n).astype(np.uint64)
    assert np.array_equal(lexsort_codes(major, content), _reference(major, content))
    assert np.array_equal(lexsort_codes(major, words), _reference(major, words))
    assert np.array_equal(lexsort_codes(major, content, words), _reference(major, content, words))


def test_packed_ties_with_different_low_bits_take_the_exact_path() -> None:
    major = np.array([3, 3, 3, 1, 1], dtype=np.int64)
    high = np.uint64(0xABCD) << np.uint64(48)
    minor = np.array([high | np.uint64(5), high | np.uint64(2), high, high | np.uint64(9), high])
    assert np.array_equal(lexsort_codes(major, minor), _reference(major, minor))
    second = np.array([4, 1, 7, 0, 0], dtype=np.uint64)
    first = np.full(5, high)  # every packed key ties; only the second word orders them
    assert np.array_equal(lexsort_codes(major, first, second), _reference(major, first, second))


def test_codes_that_leave_too_few_bits_and_odd_inputs() -> None:
    rng = np.random.default_rng(9)
    minor = rng.integers(0, 2**63, 100).astype(np.uint64)
    wide = rng.integers(0, 2**61, 100)  # 61-bit codes leave 3 bits: the exact path
    assert np.array_equal(lexsort_codes(wide, minor), _reference(wide, minor))
    negative = rng.integers(-5, 5, 100)
    assert np.array_equal(lexsort_codes(negative, minor), _reference(negative, minor))
    zeros = np.zeros(100, dtype=np.int64)  # one code: 63 bits of the hash
    assert np.array_equal(lexsort_codes(zeros, minor), _reference(zeros, minor))
    empty = np.zeros(0, dtype=np.int64)
    assert lexsort_codes(empty, np.zeros(0, dtype=np.uint64)).size == 0


def test_major_alone_is_a_stable_argsort() -> None:
    rng = np.random.default_rng(11)
    major = rng.integers(0, 30, 4000)
    assert np.array_equal(lexsort_codes(major), np.argsort(major, kind="stable"))


def test_no_bit_left_for_the_hash_orders_every_run_by_its_words() -> None:
    """60-bit codes and 16 rows (4 index bits) leave no bit of the hash in the packed key: every
    run of equal codes is ordered by its full words; 61-bit codes do not fit with the index."""
    rng = np.random.default_rng(12)
    minor = rng.integers(0, 4, 16).astype(np.uint64) << np.uint64(62)
    for top in (1 << 60, 1 << 61):
        major = rng.integers(top - 3, top, 16)
        assert np.array_equal(lexsort_codes(major, minor), _reference(major, minor))

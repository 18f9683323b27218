"""The telemetry items and their keyed hash family: SipHash-2-4, UTF-8, item conversion, keys.

Statistical tests use fixed seeds; each states its false-positive rate (≤ 1e-6 per test).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from dpkit_ldp import items as items_module
from dpkit_ldp import keyed_hash
from dpkit_ldp.heavy_hitters import coerce_bit_items
from dpkit_ldp.items import ItemDomain, as_items, coerce_items, utf8_encode
from dpkit_ldp.keyed_hash import HashKey, ItemWords, KeyedHashFamily, siphash24
from scipy import stats

import dpkit

_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def reference_siphash(key: bytes, message: bytes) -> int:
    """SipHash-2-4 as Aumasson & Bernstein 2012 write it, in plain Python integers."""
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261,
         k1 ^ 0x7465646279746573]  # fmt: skip

    def sip_round() -> None:
        v[0] = (v[0] + v[1]) & _MASK
        v[1] = _rotl(v[1], 13) ^ v[0]
        v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & _MASK
        v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & _MASK
        v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & _MASK
        v[1] = _rotl(v[1], 17) ^ v[2]
        v[2] = _rotl(v[2], 32)

    blocks = len(message) // 8
    tail = message[8 * blocks :] + bytes(7 - len(message) % 8) + bytes([len(message) & 0xFF])
    for m in [int.from_bytes(message[8 * i : 8 * i + 8], "little") for i in range(blocks)] + [
        int.from_bytes(tail, "little")
    ]:
        v[3] ^= m
        sip_round()
        sip_round()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        sip_round()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


KEY = bytes(range(16))


def test_reference_matches_the_paper_vector() -> None:
    """Aumasson & Bernstein 2012, Appendix A: key 00..0f, the empty message."""
    assert reference_siphash(KEY, b"") == 0x726FDB47DD0E0E31
    assert reference_siphash(KEY, bytes(range(15))) == 0xA129CA6149BE45E5


def test_vectorised_siphash_matches_the_reference_on_every_length() -> None:
    rng = np.random.default_rng(0)
    messages = [rng.bytes(int(n)) for n in rng.integers(0, 41, 300)]
    messages = [m.rstrip(b"\0") or b"x" for m in messages]
    items = np.array(messages, dtype=object)
    family = KeyedHashFamily(KEY.hex())
    index = rng.integers(0, 2**63, len(messages), dtype=np.uint64)
    got = family.digest(ItemWords.from_items(as_items(items, owner="t")), index)
    want = [
        reference_siphash(KEY, int(i).to_bytes(8, "little") + m)
        for i, m in zip(index.tolist(), messages, strict=True)
    ]
    assert got.tolist() == want
    with pytest.raises(dpkit.InvalidParameter, match="16 bytes"):
        siphash24(b"short", np.zeros((1, 2), dtype=np.uint64), np.ones(1, dtype=np.int64))


def test_buckets_are_uniform_and_the_table_agrees_with_bucket() -> None:
    """χ² of 40,000 item hashes over 64 buckets against uniform: false positive 1e-7."""
    family = KeyedHashFamily("0f" * 16)
    words = ItemWords.from_items(as_items(np.arange(40_000), owner="t"))
    buckets = family.bucket(words, 3, 64)
    assert stats.chisquare(np.bincount(buckets, minlength=64)).pvalue > 1e-7
    table = family.table(words.take(np.arange(50)), 5, 64)
    assert table[:, 3].tolist() == buckets[:50].tolist()
    assert family.bucket(words, 4, 64)[:50].tolist() == table[:, 4].tolist()


def test_utf8_matches_python_including_surrogates() -> None:
    rng = np.random.default_rng(1)
    points = (
        list(range(1, 0x80))
        + list(range(0x80, 0x800, 13))
        + list(range(0x800, 0x10000, 211))
        + list(range(0x10000, 0x110000, 5003))
        + [0xD800, 0xDFFF]
    )
    words = ["".join(chr(c) for c in rng.choice(points, rng.integers(0, 9))) for _ in range(3000)]
    encoded = utf8_encode(np.array(words))
    assert encoded.tolist() == [w.encode("utf-8", "surrogatepass") for w in words]
    ascii_only = utf8_encode(np.array(["abc", "", "z"]))
    assert ascii_only.tolist() == [b"abc", b"", b"z"]


def test_items_from_every_kind_of_array() -> None:
    assert as_items(np.array([7, -3]), owner="t").tolist() == [b"7", b"-3"]
    assert as_items(np.array([7], dtype=np.uint64), owner="t").tolist() == [b"7"]
    mixed = np.array(["é", b"\x00ab", 12], dtype=object)
    assert as_items(mixed, owner="t").tolist() == ["é".encode(), b"\x00ab", b"12"]
    # numpy's bytes drop trailing zero bytes, everywhere alike
    assert as_items(np.array([b"ab\x00"]), owner="t").tolist() == [b"ab"]
    for bad in (np.array([1.5]), np.array([True]), np.array([None, "a"], dtype=object)):
        with pytest.raises(dpkit.InvalidData, match="text, bytes or integers"):
            as_items(bad, owner="t")
    total = coerce_items(np.array([None, "a", 2.5, np.nan, 3, True], dtype=object))
    assert total.tolist() == [b"", b"a", b"", b"", b"3", b""]
    assert coerce_items(np.array([np.nan, 1e308])).tolist() == [b"", b""]


def test_items_of_numpy_variable_width_text_are_their_text() -> None:
    """numpy's StringDType is text: the same items as a fixed-width text array, on the strict
    path and in the private phase (which read it as empty items, every record alike)."""
    text = ["crash:é", "", "7"]
    fixed = as_items(np.array(text), owner="t").tolist()
    variable = np.array(text, dtype=np.dtypes.StringDType())
    assert as_items(variable, owner="t").tolist() == fixed
    assert coerce_items(variable).tolist() == fixed
    assert coerce_bit_items(variable, 16, np.random.default_rng(0)).tolist() == (
        coerce_bit_items(np.array(text), 16, np.random.default_rng(0)).tolist()
    )


def test_an_integer_without_decimal_text_is_no_item() -> None:
    """CPython refuses the decimal text of an int of more than 4300 digits (ValueError): the
    private phase raised it after the spend. There it has no item, as a table's object column
    has it no text; the strict path refuses it as the other values it cannot read."""
    huge = np.array([10**5000, 7, "7"], dtype=object)
    assert coerce_items(huge).tolist() == [b"", b"7", b"7"]
    with pytest.raises(dpkit.InvalidData, match="text, bytes or integers"):
        as_items(huge, owner="t")


def test_item_domain_declares_distinct_neighbours() -> None:
    domain = ItemDomain()
    assert all(domain.are_neighbours(a, b) for a, b in domain.pairs())
    assert all(
        domain.are_neighbours(a, b) for a, b in domain.neighbours(np.random.default_rng(0), 20)
    )
    assert not domain.are_neighbours("a", "a")
    assert not domain.are_neighbours("a", 1.5)
    assert domain.are_neighbours(7, "8") and not domain.are_neighbours(7, "7")


def test_keys_are_declared_public_parameters() -> None:
    assert HashKey().convert("AB" * 16) == "ab" * 16
    assert HashKey().convert(bytes(16)) == "00" * 16
    for bad in ("ab" * 15, "zz" * 16, 7, bytes(15)):
        with pytest.raises(ValueError):
            HashKey().convert(bad)
    a, b = dpkit.mechanism("cms", epsilon=1.0), dpkit.mechanism("cms", epsilon=1.0)
    assert a.key != b.key and len(a.key) == 32  # fresh from the OS by default
    fixed = dpkit.mechanism("cms", epsilon=1.0, key="01" * 16)
    assert fixed.key == "01" * 16 and "key" in type(fixed).parameters()
    with pytest.raises(dpkit.InvalidParameter, match="key"):
        dpkit.mechanism("hcms", epsilon=1.0, key="not hex")


def test_one_long_item_costs_its_own_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """1000 words and one item of 5000 bytes: the private phase and the hash used to pad every
    item to the longest (n × 5000 bytes, three times over; 2·10⁴ words and one 10⁶-byte item
    took 20 GB, and a larger n failed after the spend). Now the peak stays near the items' own
    size, and the reports are those of the padded array on the same words. (The padding limit
    and the hash's block are lowered from 64 and 16 MiB to 256 KiB here, so that a small input
    shows them: about 20 MB before, under 3 MB now.)"""
    monkeypatch.setattr(items_module, "_PADDED_BYTES", 1 << 18, raising=False)
    monkeypatch.setattr(keyed_hash, "_BLOCK_BYTES", 1 << 18, raising=False)
    values = np.array([f"w{i}" for i in range(1000)], dtype=object)
    values[5] = "x" * 5000
    mechanism = dpkit.mechanism("cms", epsilon=2.0, width=64, hashes=4, key="0" * 32)
    tracemalloc.start()
    try:
        coerced = coerce_items(values)
        reports = mechanism.randomize(coerced, rng=np.random.default_rng(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20, peak
    padded = np.array([bytes(b) for b in coerced.tolist()], dtype="S5000")
    again = mechanism.randomize(padded, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(reports, again)
    words = ItemWords.from_items(as_items(values, owner="t"))
    assert max(block.nbytes for _, block, _ in words.blocks_by_length()) <= 1 << 18

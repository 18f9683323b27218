"""The sketches' keyed hash of integer items on an accelerator: the CPU's SipHash-2-4, to the bit.

The host family (``dpkit_ldp.keyed_hash``) hashes an item x with the i-th function as
h_i(x) = SipHash-2-4_K(le64(i) ‖ x) (Aumasson & Bernstein 2012, "SipHash: a Fast Short-Input
PRF", INDOCRYPT, §2), and an integer item is its decimal text (``dpkit_ldp.items``: ``7`` and
``"7"`` are one item). Text and bytes cannot live on a device, so a device array of items is an
integer array, hashed here as the host hashes the same integers: the decimal text (a minus
sign, then at most 19 digits: L ≤ 20 bytes) is built on the device, the message le64(i) ‖ text
is cut into 8-byte little-endian words with the length byte (8 + L) mod 256 in the top byte of
word 1 + ⌊L/8⌋ (2 to 4 words), and each word takes two SipRounds, then four finalise. So the
device's h_i(x) is the host's, and host and device reports of the same item are
interchangeable for an estimator.

**Arithmetic.** No array library offers portable 64-bit unsigned arithmetic (torch has none for
``uint64``), so every 64-bit word is a pair of 32-bit halves held in ``int64`` arrays (each half
in [0, 2³²)): addition carries from the low half, a rotation by r < 32 moves bits across the
halves, by 32 swaps them, and exclusive or works on each half; every intermediate stays below
2⁶³, so the arithmetic is exact. A message shorter than 4 words leaves its state unchanged at
the words it does not have (a ``where``).
"""

from __future__ import annotations

from typing import Any

from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["keyed_buckets", "siphash_integers"]

_MASK = (1 << 32) - 1
_C = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)
_DIGITS = 19  # |x| ≤ 2⁶³ < 10¹⁹: at most 19 decimal digits
_TEXT_WORDS = 3  # 20 bytes of text and the length byte fit in 3 words after le64(i)


class _Word:
    """A 64-bit word as (high, low) 32-bit halves in ``int64`` arrays."""

    __slots__ = ("high", "low")

    def __init__(self, high: Any, low: Any) -> None:
        self.high = high
        self.low = low

    def __add__(self, other: _Word) -> _Word:
        low = self.low + other.low
        return _Word((self.high + other.high + (low >> 32)) & _MASK, low & _MASK)

    def __xor__(self, other: _Word) -> _Word:
        return _Word(self.high ^ other.high, self.low ^ other.low)

    def rotl(self, bits: int) -> _Word:
        high, low = (self.low, self.high) if bits >= 32 else (self.high, self.low)
        bits %= 32
        if not bits:
            return _Word(high, low)
        return _Word(
            ((high << bits) & _MASK) | (low >> (32 - bits)),
            ((low << bits) & _MASK) | (high >> (32 - bits)),
        )


def _rounds(v: tuple[_Word, _Word, _Word, _Word], count: int) -> tuple[_Word, ...]:
    """``count`` SipRounds (Aumasson & Bernstein 2012, §2.2)."""
    v0, v1, v2, v3 = v
    for _ in range(count):
        v0 = v0 + v1
        v1 = v1.rotl(13) ^ v0
        v0 = v0.rotl(32)
        v2 = v2 + v3
        v3 = v3.rotl(16) ^ v2
        v0 = v0 + v3
        v3 = v3.rotl(21) ^ v0
        v2 = v2 + v1
        v1 = v1.rotl(17) ^ v2
        v2 = v2.rotl(32)
    return v0, v1, v2, v3


def _text_words(library: ArrayLibrary, values: Any) -> tuple[list[_Word], Any]:
    """The words 1..3 of le64(i) ‖ decimal(x) for int64 ``values`` (1-D), the length byte
    included, and ⌊L/8⌋ (the last word is 1 + ⌊L/8⌋)."""
    xp, device = library.xp, library.device
    n = int(values.shape[0])
    negative = values < 0
    rest = xp.where(negative, values, -values)  # −|x|: −2⁶³ has no int64 absolute value
    digits = []
    for _ in range(_DIGITS):  # least significant first
        quotient = (rest + 9) // 10  # ⌈rest/10⌉ for rest ≤ 0 (floor division)
        digits.append(quotient * 10 - rest)
        rest = quotient
    table = xp.stack(digits[::-1], axis=1)  # (n, 19), most significant first
    positions = xp.reshape(xp.arange(_DIGITS, dtype=xp.int64, device=device), (1, _DIGITS))
    last = xp.full((n, _DIGITS), _DIGITS - 1, dtype=xp.int64, device=device)
    first = xp.min(xp.where(table != 0, positions, last), axis=1)  # 0 has one digit
    sign = xp.astype(negative, xp.int64)
    length = _DIGITS - first + sign
    width = 8 * _TEXT_WORDS
    p = xp.reshape(xp.arange(width, dtype=xp.int64, device=device), (1, width))
    source = xp.clip(xp.reshape(first - sign, (n, 1)) + p, 0, _DIGITS - 1)
    text = xp.take_along_axis(table, source, axis=1) + 48  # ASCII digits
    text = xp.where((p == 0) & xp.reshape(negative, (n, 1)), xp.full_like(text, 45), text)
    text = xp.where(p < xp.reshape(length, (n, 1)), text, xp.zeros_like(text))
    shifts = xp.reshape(xp.asarray([0, 8, 16, 24], dtype=xp.int64, device=device), (1, 1, 4))
    halves = xp.sum(xp.reshape(text, (n, 2 * _TEXT_WORDS, 4)) << shifts, axis=2)
    tail = length // 8
    length_byte = ((length + 8) & 0xFF) << 24
    words = []
    for w in range(_TEXT_WORDS):
        high = halves[:, 2 * w + 1]
        high = xp.where(tail == w, high | length_byte, high)
        words.append(_Word(high, halves[:, 2 * w]))
    return words, tail


def siphash_integers(library: ArrayLibrary, key: bytes, index: Any, values: Any) -> Any:
    """(high, low) 32-bit halves (``int64``) of h_i(x) = SipHash-2-4_K(le64(i) ‖ decimal(x))
    for 1-D int64 arrays ``index`` (i < 2³²) and ``values`` of one length, on their device."""
    xp = library.xp
    words, tail = _text_words(library, values)
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:], "little")
    zero = xp.zeros_like(values)

    def constant(value: int) -> _Word:
        return _Word(zero + (value >> 32), zero + (value & _MASK))

    v = (constant(k0 ^ _C[0]), constant(k1 ^ _C[1]), constant(k0 ^ _C[2]), constant(k1 ^ _C[3]))
    message = [_Word(zero, xp.astype(index, xp.int64)), *words]
    for w, m in enumerate(message):
        v0, v1, v2, v3 = v
        v0, v1, v2, v3 = _rounds((v0, v1, v2, v3 ^ m), 2)
        stepped = (v0 ^ m, v1, v2, v3)
        if w < 2:  # every message has le64(i) and at least one text word
            v = stepped
        else:  # word w exists where the length byte is in it or after it
            here = tail >= w - 1
            v = tuple(
                _Word(xp.where(here, new.high, old.high), xp.where(here, new.low, old.low))
                for new, old in zip(stepped, v, strict=True)
            )  # type: ignore[assignment]
    v0, v1, v2, v3 = v
    v2 = v2 ^ constant(0xFF)
    v0, v1, v2, v3 = _rounds((v0, v1, v2, v3), 4)
    out = v0 ^ v1 ^ v2 ^ v3
    return out.high, out.low


def keyed_buckets(library: ArrayLibrary, key: bytes, index: Any, values: Any, size: int) -> Any:
    """(h_i(x) >> 32)·size >> 32 (``int64``), the host family's ``bucket``, for size ≤ 2³¹."""
    high, _ = siphash_integers(library, key, index, values)
    return (high * size) >> 32

"""The ChaCha20 block function on arrays of any array-API library, on their device.

Bernstein 2008, "ChaCha, a variant of Salsa20"; the IETF layout of RFC 8439 §2.3: a state of
sixteen 32-bit words — the constants "expand 32-byte k", the 256-bit key as eight little-endian
words, a 32-bit block counter and a 96-bit nonce — mixed by 20 rounds (ten "double rounds" of
four quarter rounds, §2.1–2.2), after which the input state is added word by word. The 64-byte
block is the keystream; its sixteen words are uniform and independent as long as ChaCha20 is a
secure stream cipher.

Here the counter and the first nonce word hold one 64-bit block index (low, high), the other two
nonce words are zero: every key is used for one stream only (:mod:`dpkit.tensors.device_random`
draws a fresh 256-bit key for each call), so block indices never repeat under a key. With the
high word zero this is exactly RFC 8439's keystream with counter = block index and nonce 0.

The words are ``uint32`` arrays, whose additions wrap modulo 2³² as ChaCha20's do, except on
torch, which has no ``uint32`` arithmetic: there they are ``int64`` holding 32-bit values,
masked after each addition and shift (:func:`word_dtype`). This is the portable path and the
reference for the fused kernels of :mod:`dpkit.tensors._kernels`.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["CONSTANTS", "chacha20_words", "key_words", "word_dtype"]

#: "expand 32-byte k" as four little-endian words (RFC 8439 §2.3).
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_MASK = 0xFFFFFFFF


def key_words(key: bytes) -> tuple[int, ...]:
    """A 32-byte key as the eight little-endian 32-bit words of the ChaCha20 state."""
    return struct.unpack("<8I", bytes(key))


def word_dtype(xp: Any) -> Any:
    """``uint32``, or ``int64`` for torch (no ``uint32`` arithmetic there)."""
    return xp.int64 if "torch" in getattr(xp, "__name__", "") else xp.uint32


def _quarter(s: list[Any], a: int, b: int, c: int, d: int, wide: bool) -> None:
    """RFC 8439 §2.1, on word arrays: a += b; d ^= a; d <<<= 16; c += d; b ^= c; b <<<= 12; ...
    (``wide``: int64 words, masked back to 32 bits after each addition and shift)."""

    def add(x: Any, y: Any) -> Any:
        return (x + y) & _MASK if wide else x + y

    def rotl(x: Any, bits: int) -> Any:
        left = (x << bits) & _MASK if wide else x << bits
        return left | (x >> (32 - bits))

    s[a] = add(s[a], s[b])
    s[d] = rotl(s[d] ^ s[a], 16)
    s[c] = add(s[c], s[d])
    s[b] = rotl(s[b] ^ s[c], 12)
    s[a] = add(s[a], s[b])
    s[d] = rotl(s[d] ^ s[a], 8)
    s[c] = add(s[c], s[d])
    s[b] = rotl(s[b] ^ s[c], 7)


def chacha20_words(
    xp: Any, key: tuple[int, ...], first_block: int, blocks: int, *, device: Any = None
) -> list[Any]:
    """The keystream of ``blocks`` consecutive blocks from ``first_block``: a list of sixteen
    arrays of shape ``(blocks,)`` and dtype :func:`word_dtype`, array ``i`` holding word ``i``
    of every block (values in [0, 2³²)), computed with ``xp``'s operations on ``device``."""
    dtype = word_dtype(xp)
    wide = dtype == xp.int64

    def constant(word: int) -> Any:
        return xp.full((blocks,), word, dtype=dtype, device=device)

    start_low, start_high = first_block & _MASK, first_block >> 32
    if wide:
        index = xp.arange(first_block, first_block + blocks, dtype=dtype, device=device)
        low, high = index & _MASK, index >> 32
    else:  # 32-bit words: the low word wraps, and the high word takes the carry
        low = xp.arange(0, blocks, dtype=dtype, device=device) + constant(start_low)
        high = constant(start_high) + xp.astype(low < start_low, dtype)
    initial = [constant(w) for w in (*CONSTANTS, *key)]
    initial += [low, high, constant(0), constant(0)]
    state = list(initial)
    for _ in range(10):  # ten double rounds: columns, then diagonals (RFC 8439 §2.3)
        _quarter(state, 0, 4, 8, 12, wide)
        _quarter(state, 1, 5, 9, 13, wide)
        _quarter(state, 2, 6, 10, 14, wide)
        _quarter(state, 3, 7, 11, 15, wide)
        _quarter(state, 0, 5, 10, 15, wide)
        _quarter(state, 1, 6, 11, 12, wide)
        _quarter(state, 2, 7, 8, 13, wide)
        _quarter(state, 3, 4, 9, 14, wide)
    if wide:
        return [(word + start) & _MASK for word, start in zip(state, initial, strict=True)]
    return [word + start for word, start in zip(state, initial, strict=True)]

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

The arithmetic is in ``int64`` holding 32-bit values (masked after each addition and shift),
because not every library implements ``uint32`` arithmetic (torch does not). This is the
portable path and the reference for the fused kernels of :mod:`dpkit.tensors._kernels`.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["CONSTANTS", "chacha20_words", "key_words"]

#: "expand 32-byte k" as four little-endian words (RFC 8439 §2.3).
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_MASK = 0xFFFFFFFF


def key_words(key: bytes) -> tuple[int, ...]:
    """A 32-byte key as the eight little-endian 32-bit words of the ChaCha20 state."""
    return struct.unpack("<8I", bytes(key))


def _rotl(x: Any, bits: int) -> Any:
    return ((x << bits) & _MASK) | (x >> (32 - bits))


def _quarter(s: list[Any], a: int, b: int, c: int, d: int) -> None:
    """RFC 8439 §2.1, on word arrays: a += b; d ^= a; d <<<= 16; c += d; b ^= c; b <<<= 12; ..."""
    s[a] = (s[a] + s[b]) & _MASK
    s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & _MASK
    s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & _MASK
    s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & _MASK
    s[b] = _rotl(s[b] ^ s[c], 7)


def chacha20_words(
    xp: Any, key: tuple[int, ...], first_block: int, blocks: int, *, device: Any = None
) -> list[Any]:
    """The keystream of ``blocks`` consecutive blocks from ``first_block``: a list of sixteen
    ``int64`` arrays of shape ``(blocks,)``, array ``i`` holding word ``i`` of every block
    (values in [0, 2³²)), computed with ``xp``'s operations on ``device``."""
    index = xp.arange(first_block, first_block + blocks, dtype=xp.int64, device=device)

    def constant(word: int) -> Any:
        return xp.full((blocks,), word, dtype=xp.int64, device=device)

    initial = [constant(w) for w in (*CONSTANTS, *key)]
    initial += [index & _MASK, index >> 32, constant(0), constant(0)]
    state = list(initial)
    for _ in range(10):  # ten double rounds: columns, then diagonals (RFC 8439 §2.3)
        _quarter(state, 0, 4, 8, 12)
        _quarter(state, 1, 5, 9, 13)
        _quarter(state, 2, 6, 10, 14)
        _quarter(state, 3, 7, 11, 15)
        _quarter(state, 0, 5, 10, 15)
        _quarter(state, 1, 6, 11, 12)
        _quarter(state, 2, 7, 8, 13)
        _quarter(state, 3, 4, 9, 14)
    return [(word + start) & _MASK for word, start in zip(state, initial, strict=True)]

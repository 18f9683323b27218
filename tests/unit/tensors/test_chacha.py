"""The portable ChaCha20 block function against OpenSSL (through ``cryptography``) and the test
vector of RFC 8439 §2.3.2, on numpy, torch (CPU) and array-api-strict."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from dpkit.tensors.chacha import chacha20_words, key_words

xp_numpy = pytest.importorskip("array_api_compat.numpy")
torch = pytest.importorskip("torch")
import array_api_compat.torch as xp_torch  # noqa: E402
import array_api_strict as xp_strict  # noqa: E402

NAMESPACES = {"numpy": xp_numpy, "torch": xp_torch, "array-api-strict": xp_strict}


def _bytes(words: list) -> bytes:
    stacked = np.stack([np.asarray(w) if not hasattr(w, "numpy") else w.numpy() for w in words], 1)
    return stacked.astype("<u4").tobytes()


def _openssl(key: bytes, first: int, blocks: int) -> bytes:
    """Block by block: the state's words 12–13 hold the block index (low, high)."""
    out = b""
    for block in range(first, first + blocks):
        nonce = struct.pack("<IIII", block & 0xFFFFFFFF, block >> 32, 0, 0)
        out += Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(64))
    return out


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("first", [0, 7, 2**32 - 2])
def test_keystream_is_openssls(name: str, first: int) -> None:
    key = bytes(range(100, 132))
    words = chacha20_words(NAMESPACES[name], key_words(key), first, 5)
    if name == "array-api-strict":
        words = [np.asarray(list(w)) for w in words]
    assert _bytes(words) == _openssl(key, first, 5)


def test_the_reference_is_rfc_8439_chacha20() -> None:
    # RFC 8439 §2.3.2's state (key 00..1f, counter 1, nonce 000000090000004a00000000) is not
    # one dpkit uses (its third nonce word is not 0), so the RFC vector checks the oracle the
    # test above compares with: OpenSSL's block function gives the RFC's first words.
    key = bytes(range(32))
    rfc_nonce = struct.pack("<I", 1) + bytes.fromhex("000000090000004a00000000")
    stream = Cipher(algorithms.ChaCha20(key, rfc_nonce), mode=None).encryptor().update(bytes(64))
    assert struct.unpack("<16I", stream)[:2] == (0xE4E7F110, 0x15593BD1)

"""SecureWordSource: the ChaCha20 keystream, re-keying, fork safety, no pickling, no key leaks."""

from __future__ import annotations

import copy
import os
import pickle
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

import dpkit
from dpkit.randomness import SecureRandom, SecureWordSource
from dpkit.randomness import source as source_module

KEY = bytes(range(32))

# RFC 8439, Appendix A.1, ChaCha20 block function test vector #1: all-zero key and nonce,
# block counter 0 — the first 64 keystream bytes.
RFC8439_A1_TV1 = bytes.fromhex(
    "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
    "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
)


def chacha20_keystream(key: bytes, nbytes: int) -> bytes:
    """The reference keystream, computed directly with the cipher (block counter and nonce 0)."""
    return Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor().update(bytes(nbytes))


def test_words_are_the_rfc8439_keystream_as_little_endian_uint64() -> None:
    words = SecureWordSource.from_key(bytes(32)).words(8)
    assert words.dtype == np.uint64
    expected = [int.from_bytes(RFC8439_A1_TV1[8 * i : 8 * i + 8], "little") for i in range(8)]
    assert [int(w) for w in words] == expected


def test_stream_does_not_depend_on_how_requests_are_split() -> None:
    total = 300_000  # crosses the 2^17-word buffer twice
    reference = np.frombuffer(chacha20_keystream(KEY, 8 * total), dtype="<u8")
    source = SecureWordSource.from_key(KEY)
    pieces = [source.words(n) for n in (1, 5, 131_066, 7, 140_000, 28_921)]
    assert np.array_equal(np.concatenate(pieces), reference)


def test_size_shapes() -> None:
    source = SecureWordSource.from_key(KEY)
    assert source.words((2, 3)).shape == (2, 3)
    assert source.words(None).shape == ()
    assert source.words(0).shape == (0,)
    with pytest.raises(dpkit.InvalidParameter, match="size"):
        source.words((2, -1))


def test_rekeys_on_schedule_with_fast_key_erasure(monkeypatch: pytest.MonkeyPatch) -> None:
    """After REKEY_BYTES the deterministic source continues with the key made of the next 32
    keystream bytes (never output); computed here independently with the raw cipher."""
    monkeypatch.setattr(source_module, "REKEY_BYTES", 1024)
    first = chacha20_keystream(KEY, 1024 + 32)
    next_key = first[1024:]
    second = chacha20_keystream(next_key, 1024 + 32)
    third_key = second[1024:]
    expected = first[:1024] + second[:1024] + chacha20_keystream(third_key, 512)
    words = SecureWordSource.from_key(KEY).words(320)  # 2560 bytes: two re-keys
    assert words.tobytes() == expected


def test_rekey_interval_is_far_below_the_32_bit_counter_wrap() -> None:
    assert source_module.REKEY_BYTES * 16 <= 64 * 2**32  # ≤ 1/16 of 2^32 64-byte blocks


def test_os_keyed_sources_differ() -> None:
    assert not np.array_equal(SecureWordSource().words(4), SecureWordSource().words(4))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # Python ≥ 3.12, threads
@pytest.mark.parametrize("make", [SecureWordSource, lambda: SecureWordSource.from_key(KEY)])
def test_forked_child_draws_differ_from_parent(make: object) -> None:
    """Without re-keying, a child would draw exactly the parent's next words."""
    source = make()  # type: ignore[operator]
    source.words(10)  # the buffer now holds words the parent has not used yet
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read_end)
            os.write(write_end, source.words(64).tobytes() + bytes([source.keyed]))
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while len(data) < 8 * 64 + 1:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    assert data[-1:] == b"\x00"  # the child re-keyed from os.urandom: no longer keyed
    child = np.frombuffer(data[:-1], dtype=np.uint64)
    parent = source.words(64)
    assert child.size == 64
    assert not np.array_equal(child, parent)
    assert len(set(child.tolist()) & set(parent.tolist())) == 0


def test_pid_check_rekeys_when_the_fork_hook_did_not_run() -> None:
    source, twin = SecureWordSource.from_key(KEY), SecureWordSource.from_key(KEY)
    assert np.array_equal(source.words(3), twin.words(3))
    source._pid = -1  # as if this process were a child that skipped os.register_at_fork
    assert not np.array_equal(source.words(3), twin.words(3))


@pytest.mark.parametrize("make", [SecureWordSource, SecureRandom])
def test_pickling_and_copying_are_refused(make: type) -> None:
    obj = make()
    for attempt in (
        lambda: pickle.dumps(obj),
        lambda: copy.copy(obj),
        lambda: copy.deepcopy(obj),
    ):
        with pytest.raises(TypeError, match="replay"):
            attempt()


def test_key_is_never_shown_or_kept() -> None:
    source = SecureWordSource.from_key(KEY)
    text = repr(source) + str(source) + repr(SecureRandom(source))
    assert KEY.hex() not in text and "hidden" in text
    for name in SecureWordSource.__slots__:
        value = getattr(source, name, None)
        assert not (isinstance(value, (bytes, bytearray)) and KEY in bytes(value)), name


@pytest.mark.parametrize("bad", [b"short", "x" * 32, 123])
def test_from_key_needs_32_bytes_and_does_not_echo_them(bad: object) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="32 bytes") as info:
        SecureWordSource.from_key(bad)  # type: ignore[arg-type]
    assert "short" not in str(info.value)


def test_concurrent_readers_split_one_stream_without_loss_or_repeats() -> None:
    source = SecureWordSource.from_key(KEY)
    reference = np.frombuffer(chacha20_keystream(KEY, 8 * 8 * 20 * 3001), dtype="<u8")
    drawn: list[np.ndarray] = []
    lock = threading.Lock()

    def reader(n: int) -> None:
        for _ in range(20):
            words = source.words(n)
            with lock:
                drawn.append(words)

    threads = [threading.Thread(target=reader, args=(3001,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    together = np.sort(np.concatenate(drawn))
    assert np.array_equal(together, np.sort(reference))

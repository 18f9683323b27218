"""A cryptographically secure source of uniform 64-bit words (the ChaCha20 keystream).

Why not ``numpy.random.default_rng()``: PCG64 is not a cryptographically secure generator;
Bouillaguet, Martinez & Sauvage 2020, "Practical seed-recovery for the PCG pseudo-random number
generator" (IACR ToSC 2020(3)), recover its full state from 512 output bytes. Anyone who sees
enough randomized reports from one stream could then undo the randomization of every other one.

The secure source is the keystream of ChaCha20 (Bernstein 2008, "ChaCha, a variant of Salsa20";
the IETF variant of RFC 8439, §2.3–2.4, with a 32-bit block counter and a 96-bit nonce) as
computed by OpenSSL through the ``cryptography`` package, keyed with 32 bytes from
:func:`os.urandom`. A keystream is pseudo-random as long as ChaCha20 is a secure stream
cipher; reading it as little-endian ``uint64`` words gives independent uniform 64-bit words.

Hazards a numpy ``Generator`` has and this source closes:

* **fork**: a forked child would repeat its parent's buffered words. Every live source is
  re-keyed from :func:`os.urandom` in the child (:func:`os.register_at_fork`), and each draw also
  checks the process id (defence in depth, e.g. against a ``fork`` that skipped the hooks).
* **pickling / copying**: an unpickled or copied generator replays its stream. A source refuses
  both with :class:`TypeError`.
* **counter wrap**: the 32-bit block counter wraps after 2³² blocks (256 GiB). The source
  re-keys after every :data:`REKEY_BYTES` (4 GiB) of keystream, long before that.
* **key exposure**: the key is not stored on the object once the cipher is keyed, and
  ``repr`` never shows it.

The source is thread-safe: one lock guards the keystream and the word buffer.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from typing import Any, NoReturn

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from numpy.typing import NDArray

from dpkit.errors import InvalidParameter

__all__ = ["REKEY_BYTES", "SecureWordSource"]

KEY_BYTES = 32
#: Keystream bytes produced under one key before the source re-keys: 2³² bytes = 2²⁶ ChaCha20
#: blocks, 1/64 of the 2³² blocks after which the 32-bit block counter would wrap.
REKEY_BYTES = 1 << 32
_PIECE_BYTES = 1 << 20  # keystream generated per cipher call (1 MiB)
_BUFFER_WORDS = 1 << 17  # small requests are served from a 1 MiB buffer of words
_ZEROS = np.zeros(_PIECE_BYTES, dtype=np.uint8)  # ChaCha20(0) is the keystream itself
_ZEROS.flags.writeable = False

_LIVE: weakref.WeakSet[SecureWordSource] = weakref.WeakSet()


def _rekey_all_after_fork() -> None:
    for source in list(_LIVE):
        source._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_rekey_all_after_fork)


def _keystream(key: bytes) -> Any:
    """A ChaCha20 encryptor at block 0 (RFC 8439 nonce: 4-byte counter ‖ 12-byte nonce, all 0).

    A zero nonce is safe because every key is used for exactly one stream: keys are fresh
    :func:`os.urandom` bytes or (for :meth:`SecureWordSource.from_key`) derived once from the
    previous stream.
    """
    return Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()


class SecureWordSource:
    """Uniform ``uint64`` words from a ChaCha20 keystream keyed by :func:`os.urandom`.

    >>> source = SecureWordSource()
    >>> source.words(3).dtype
    dtype('uint64')
    >>> "key" in repr(source) and "hidden" in repr(source)
    True

    Words are read in bulk into preallocated buffers (``update_into``), so a large request costs
    little more than the cipher itself. Use :meth:`from_key` only for tests and reproducible
    examples: whoever knows the key can predict every word.
    """

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_deterministic",
        "_encryptor",
        "_lock",
        "_pid",
        "_position",
        "_used",
    )

    def __init__(self) -> None:
        self._deterministic = False
        self._setup(os.urandom(KEY_BYTES))

    @classmethod
    def from_key(cls, key: bytes, /) -> SecureWordSource:
        """A source whose stream is fixed by a 32-byte ``key``: for tests and reproducibility ONLY.

        The same key always gives the same words (however the requests are split), which makes
        statistical tests deterministic. It is *not* secret once written down: never use it
        to protect data. A forked child still re-keys from :func:`os.urandom`, so the child
        never repeats the parent's stream. When the source re-keys (every :data:`REKEY_BYTES`)
        the next key is the next 32 bytes of the current keystream ("fast key erasure"), so the
        whole stream stays a function of ``key``. Such a source is :attr:`keyed`, and a release
        drawn from it is recorded with the randomness mode ``"keyed"``, not ``"secure"``.
        """
        if not isinstance(key, (bytes, bytearray, memoryview)) or len(key) != KEY_BYTES:
            shown = f"<{len(key)} bytes>" if isinstance(key, (bytes, bytearray)) else type(key)
            raise InvalidParameter(
                "key", shown, f"exactly {KEY_BYTES} bytes", owner="SecureWordSource.from_key"
            )
        source = cls.__new__(cls)
        source._deterministic = True
        source._setup(bytes(key))
        return source

    def _setup(self, key: bytes) -> None:
        self._lock = threading.Lock()
        self._buffer = np.empty(_BUFFER_WORDS, dtype=np.uint64)
        self._position = _BUFFER_WORDS  # empty: filled lazily
        self._rekey(key)
        _LIVE.add(self)

    def _rekey(self, key: bytes) -> None:
        self._encryptor = _keystream(key)
        self._used = 0
        self._pid = os.getpid()

    @property
    def keyed(self) -> bool:
        """Whether the stream is a function of a key given to :meth:`from_key` (reproducible by
        whoever knows the key, so not secret). False for a source keyed by :func:`os.urandom`,
        and in a forked child, which re-keys from :func:`os.urandom`."""
        return self._deterministic

    def _after_fork(self) -> None:
        """In a forked child: new lock, new key from the OS, no buffered words of the parent."""
        self._lock = threading.Lock()
        self._position = _BUFFER_WORDS
        self._deterministic = False  # the child's stream no longer follows the given key
        self._rekey(os.urandom(KEY_BYTES))

    def _next_key(self) -> bytes:
        if not self._deterministic:
            return os.urandom(KEY_BYTES)
        derived = bytearray(KEY_BYTES)
        self._encryptor.update_into(_ZEROS[:KEY_BYTES], derived)
        return bytes(derived)

    def _fill(self, out: NDArray[np.uint8]) -> None:
        """Write the next ``out.size`` keystream bytes into ``out``, re-keying on schedule."""
        view = memoryview(out.data)
        start, total = 0, out.size
        while start < total:
            if self._used >= REKEY_BYTES:
                self._rekey(self._next_key())
            stop = min(total, start + _PIECE_BYTES, start + REKEY_BYTES - self._used)
            self._encryptor.update_into(_ZEROS[: stop - start], view[start:stop])
            self._used += stop - start
            start = stop

    def words(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.uint64]:
        """``size`` independent uniform 64-bit words (an array; one word if ``size`` is None)."""
        if isinstance(size, int) and size >= 0:  # the common case, kept cheap
            shape: tuple[int, ...] = (size,)
            count = size
        else:
            shape = () if size is None else tuple(size) if isinstance(size, tuple) else (int(size),)
            if any(int(d) < 0 for d in shape):
                raise InvalidParameter("size", size, "a non-negative int or tuple of ints")
            count = math.prod(int(d) for d in shape)
        out = np.empty(count, dtype=np.uint64)
        with self._lock:
            if self._pid != os.getpid():  # a fork that bypassed the at-fork hook
                self._after_fork_locked()
            available = _BUFFER_WORDS - self._position
            taken = min(available, count)
            out[:taken] = self._buffer[self._position : self._position + taken]
            self._position += taken
            rest = count - taken
            if rest >= _BUFFER_WORDS:
                self._fill(out[taken:].view(np.uint8))
            elif rest:
                self._fill(self._buffer.view(np.uint8))
                out[taken:] = self._buffer[:rest]
                self._position = rest
        return out if len(shape) == 1 else out.reshape(shape)

    def _after_fork_locked(self) -> None:
        # Called with the (inherited) lock held: keep it, refresh everything else.
        self._position = _BUFFER_WORDS
        self._deterministic = False
        self._rekey(os.urandom(KEY_BYTES))

    def __repr__(self) -> str:
        keyed = "a fixed key (tests only)" if self._deterministic else "os.urandom"
        return f"<SecureWordSource ChaCha20 keystream, key=<hidden>, keyed from {keyed}>"

    def _refuse(self, what: str) -> NoReturn:
        msg = (
            f"a SecureWordSource cannot be {what}: the copy would replay the same random words. "
            "Create a new SecureWordSource (or SecureRandom) in each process or thread instead."
        )
        raise TypeError(msg)

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._refuse("pickled")

    def __reduce__(self) -> NoReturn:
        self._refuse("pickled")

    def __getstate__(self) -> NoReturn:
        self._refuse("pickled")

    def __copy__(self) -> NoReturn:
        self._refuse("copied")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self._refuse("copied")

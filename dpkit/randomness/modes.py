"""The two randomness modes, ``"secure"`` (the default) and ``"fast"``, and how a release records
its source: ``"secure"``, ``"keyed"`` or ``"fast"``.

* **secure** — a :class:`~dpkit.randomness.SecureRandom` on a ChaCha20 keystream keyed from
  :func:`os.urandom`. This is what ``rng=None`` means. It cannot be seeded.
* **keyed** — secure mode's code and samplers on a keystream fixed by a key
  (``SecureRandom.from_key(key)``, for tests only): the same key gives the same draws, so
  whoever knows the key can reproduce every release. Recorded as ``"keyed"``, never as
  ``"secure"``.
* **fast** — a seedable ``numpy.random.Generator`` (PCG64 by default), for simulation, tests
  and benchmarks. Not attack-resistant: PCG64's state can be recovered from its outputs
  (Bouillaguet, Martinez & Sauvage 2020), and float samplers on it leak through their low
  bits (Mironov 2012). Passing a Generator is how a caller opts in.

Every release should record the mode that produced it; :func:`resolve_rng` returns it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np

from dpkit.errors import InvalidParameter
from dpkit.randomness._words import U64, WordReader
from dpkit.randomness.secure_rng import SecureRandom

__all__ = ["RandomnessMode", "default_secure_random", "keyed_default", "resolve_rng"]

RandomnessMode = Literal["secure", "keyed", "fast"]

_DEFAULT: SecureRandom | None = None
_DEFAULT_LOCK = threading.Lock()
#: A keyed SecureRandom standing in for the process-wide one, in one context only
#: (:func:`keyed_default`).
_STAND_IN: contextvars.ContextVar[SecureRandom | None] = contextvars.ContextVar(
    "dpkit_keyed_default", default=None
)


def default_secure_random() -> SecureRandom:
    """The process-wide :class:`SecureRandom` (created on first use; re-keyed in forked children),
    or the keyed one standing in for it in this context (:func:`keyed_default`)."""
    stand_in = _STAND_IN.get()
    if stand_in is not None:
        return stand_in
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = SecureRandom()
    return _DEFAULT


def resolve_rng(
    rng: Any, /, *, owner: str | None = None
) -> tuple[SecureRandom | np.random.Generator, RandomnessMode]:
    """``(generator, mode)`` for a sampling call's ``rng`` argument.

    ``None`` → the process-wide :class:`SecureRandom`, ``"secure"``; a :class:`SecureRandom`
    → itself, ``"secure"``, or ``"keyed"`` when it was made by ``SecureRandom.from_key``
    (:attr:`SecureRandom.keyed`: secure mode's samplers on a reproducible stream); a
    ``numpy.random.Generator`` → itself, ``"fast"``. Anything else
    (an int seed, ``numpy.random.RandomState``, the ``random`` module) is an
    :class:`~dpkit.errors.InvalidParameter` naming ``rng``: dpkit never falls back to global
    state, and a seed is accepted only by building a Generator explicitly.

    >>> resolve_rng(None)[1], resolve_rng(SecureRandom.from_key(bytes(32)))[1]
    ('secure', 'keyed')
    >>> resolve_rng(np.random.default_rng(1))[1]
    'fast'
    """
    if rng is None:
        default = default_secure_random()
        return default, "keyed" if default.keyed else "secure"
    if isinstance(rng, SecureRandom):
        return rng, "keyed" if rng.keyed else "secure"
    if isinstance(rng, np.random.Generator):
        return rng, "fast"
    raise InvalidParameter(
        "rng",
        rng,
        "None (secure mode), a dpkit SecureRandom, or a numpy.random.Generator "
        "(fast mode, not attack-resistant), e.g. numpy.random.default_rng(seed)",
        owner=owner,
    )


def word_reader(generator: SecureRandom | np.random.Generator) -> WordReader:
    """``n -> n uniform uint64 words`` from either kind of generator."""
    if isinstance(generator, SecureRandom):
        return generator.source.words

    def fast_words(n: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
        return generator.integers(0, U64, size=n, dtype=np.uint64)

    return fast_words


@contextlib.contextmanager
def keyed_default(generator: SecureRandom) -> Iterator[SecureRandom]:
    """Within the block, ``rng=None`` draws from ``generator``, a keyed SecureRandom
    (``SecureRandom.from_key``), and is recorded as ``"keyed"``: how the auditor samples the
    ``rng=None`` spelling of secure mode reproducibly (:mod:`dpkit.testing.modes`).

    The stand-in is a context variable: it holds in this thread (or asyncio task) only, never
    in another thread's releases, and the process-wide generator is untouched. A plugin that
    builds its own ``SecureRandom()`` for ``rng=None`` still draws from the OS there.
    """
    if not isinstance(generator, SecureRandom) or not generator.keyed:
        raise InvalidParameter(
            "generator",
            generator,
            "a keyed SecureRandom (SecureRandom.from_key)",
            owner="keyed_default",
        )
    token = _STAND_IN.set(generator)
    try:
        yield generator
    finally:
        _STAND_IN.reset(token)

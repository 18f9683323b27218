"""Uniform 32-bit words on an accelerator, for one call of a mechanism, in either mode.

* **secure** (``rng=None`` or a :class:`~dpkit.randomness.SecureRandom`): each call draws a
  fresh 256-bit key from the secure generator's own ChaCha20 stream (keyed from
  :func:`os.urandom`), and the words are ChaCha20's keystream under that key, blocks 0, 1, 2, …,
  computed on the device (:mod:`dpkit.tensors.chacha`, or the fused kernels of
  :mod:`dpkit.tensors._kernels` on CUDA). Never the framework's Philox or XORWOW. With
  ``SecureRandom.from_key(key)`` the device stream is a function of ``key`` (mode ``"keyed"``).
* **fast** (a ``numpy.random.Generator``, or the array's own library's: a ``torch.Generator``,
  a CuPy ``Generator``, a JAX key): a 62-bit seed drawn from the caller's generator (from a JAX
  key's own bits); the words are torch's Philox stream on torch's device, and elsewhere
  ChaCha20 keyed from that seed — seedable, not attack-resistant.

Word ``j`` of a call's stream is word ``j mod 16`` of block ``j div 16``; :class:`DeviceWords`
hands out consecutive ranges of it, so two draws of one call never share a word.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.randomness.modes import RandomnessMode, resolve_rng
from dpkit.randomness.secure_rng import SecureRandom
from dpkit.tensors.chacha import chacha20_words, word_dtype
from dpkit.tensors.libraries import ArrayLibrary

__all__ = [
    "DeviceWords",
    "below",
    "device_words",
    "host_rng",
    "index_dtype",
    "lie_below",
    "lie_words",
    "require_64_bit",
    "threshold32",
    "uniform_below",
]

_TWO_32 = 1 << 32


def threshold32(threshold64: int, /) -> int:
    """A 64-bit integer threshold T (``word < T`` with probability T/2⁶⁴) on the 32-bit grid,
    rounded up: ⌈T/2³²⌉, so the probability of ``word32 < T′`` is never below T/2⁶⁴ (a flip or
    lie probability rounded up keeps randomized response's ε at or below the declared one)."""
    return -(-int(threshold64) // _TWO_32)


def lie_words(threshold64: int, k: int, /) -> int:
    """The words each lie of k-ary randomized response (lie probability T/2⁶⁴, k outcomes)
    takes on the device: 1 where the 2⁻³² grid realises it, else 2.

    :func:`threshold32` rounds λ′ = T/2⁶⁴ up, which keeps p′/q′ = (1 − λ′)(k − 1)/λ′ ≤ e^ε; it
    must also stay at or below the uniform point (k − 1)/k, past which the truth is the least
    likely report and q′/p′ = λ′/((k − 1)(1 − λ′)) exceeds 1. At small ε λ lies within 2⁻³² of
    that point; where (k − 1)/k is not on the 2⁻³² grid (k not a power of two) the rounding
    passed it (k = 3, ε = 10⁻¹²: a realised ε of 3.5·10⁻¹⁰; k = 1000, ε = 10⁻⁸: 6.9·10⁻⁸).
    Those lies compare two words, high then low, with T itself (whose λ′ ≤ (k − 1)/k or whose
    reverse ratio is within e^ε: :func:`dpkit.plugin.lie_threshold`)."""
    return 1 if threshold32(threshold64) * k <= (k - 1) * _TWO_32 else 2


def lie_below(xp: Any, drawn: Any, count: int, threshold64: int, k: int) -> Any:
    """``count`` lies of k-ary randomized response from ``drawn``, its first
    ``lie_words(threshold64, k)·count`` words: ``word < ⌈T/2³²⌉``, or ``high·2³² + low < T``
    with the highs words 0 … count − 1 and the lows the next ``count``."""
    if lie_words(threshold64, k) == 1:
        return below(xp, drawn[:count], threshold32(threshold64))
    from dpkit.tensors.duchi import below_64  # duchi imports this module

    return below_64(xp, drawn[:count], drawn[count : 2 * count], threshold64)


def below(xp: Any, words: Any, threshold: int) -> Any:
    """``words < threshold`` for 32-bit words and an integer threshold in [0, 2³²] (2³²: all
    true, a value no ``uint32`` array can be compared with)."""
    import array_api_compat

    device = array_api_compat.device(words)
    if threshold >= _TWO_32:
        return xp.ones(words.shape, dtype=xp.bool, device=device)
    # An array, not a Python int: JAX reads a bare int as a 32-bit signed one.
    return words < xp.asarray(max(int(threshold), 0), dtype=words.dtype, device=device)


def index_dtype(xp: Any) -> Any:
    """The library's default integer type for indices (int64, or int32 for JAX without x64)."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is not None:
        try:
            return info().default_dtypes()["indexing"]
        except (AttributeError, KeyError, TypeError):
            pass
    return xp.int64


def require_64_bit(
    library: ArrayLibrary,
    *,
    owner: str,
    field: str,
    needs: str = "the exact law needs 64-bit integers",
) -> None:
    """Refuse a library without 64-bit integers (JAX without x64): decided by the library alone,
    before any value is read. ``needs`` says what wants them, in the message."""
    if index_dtype(library.xp) != library.xp.int64:
        raise InvalidData(
            f"{owner}: {field}: {needs}, which {library.name} has not enabled "
            "(for JAX, enable jax_enable_x64)",
            field=field,
        )


def require_real_64_bit(
    library: ArrayLibrary, values: Any, *, owner: str, field: str, needs: str
) -> None:
    """:func:`require_64_bit`, then real numbers (integers or floats; booleans refused, as on
    the host): decided by the library and the dtype, before any value is read."""
    xp = library.xp
    require_64_bit(library, owner=owner, field=field, needs=needs)
    if not xp.isdtype(values.dtype, ("integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got a {library.name} array of {values.dtype}",
            field=field,
        )


def _is_torch_generator(rng: Any) -> bool:
    return type(rng).__module__.partition(".")[0] == "torch" and type(rng).__name__ == "Generator"


def _is_cupy_generator(rng: Any) -> bool:
    return type(rng).__module__.partition(".")[0] == "cupy" and type(rng).__name__ == "Generator"


def _is_jax_key(rng: Any) -> bool:
    """A JAX typed PRNG key (``jax.random.key(seed)``; legacy raw ``uint32[2]`` keys are not
    told apart from data, so they are not taken)."""
    if type(rng).__module__.partition(".")[0] not in ("jax", "jaxlib"):
        return False
    import jax

    dtype = getattr(rng, "dtype", None)
    return dtype is not None and bool(jax.numpy.issubdtype(dtype, jax.dtypes.prng_key))


def _framework(rng: Any) -> str | None:
    """The array library whose own generator ``rng`` is, or None."""
    if _is_torch_generator(rng):
        return "torch"
    if _is_cupy_generator(rng):
        return "cupy"
    return "jax" if _is_jax_key(rng) else None


def _framework_seed(rng: Any, owner: str) -> int:
    """A 62-bit seed drawn from a ``torch.Generator`` or a CuPy ``Generator``, or taken from a
    JAX key (the key's own bits: the same key gives the same seed, as JAX's keys are meant to
    be split by the caller)."""
    if _is_torch_generator(rng):
        import torch

        return int(torch.randint(0, 2**62, (1,), generator=rng, device=rng.device).item())
    if _is_cupy_generator(rng):
        return int(rng.integers(0, 2**62, size=1, dtype=np.int64).get()[0])
    import jax
    import jax.numpy as jnp

    if rng.shape != ():
        raise InvalidParameter("rng", rng, "a single JAX key, not an array of keys", owner=owner)
    high, low = (int(w) for w in jax.device_get(jax.random.bits(rng, (2,), dtype=jnp.uint32)))
    return ((high << 32) | low) >> 2


class DeviceWords:
    """The words of one call: ``take(n)`` returns the next ``n`` words as ``int64`` values in
    [0, 2³²) on the library's device."""

    def __init__(
        self,
        library: ArrayLibrary,
        *,
        mode: RandomnessMode,
        key: tuple[int, ...] | None = None,
        seed: int | None = None,
    ) -> None:
        self.library = library
        self.mode = mode
        self.key = key
        self.seed = seed
        self._next_block = 0
        self._torch_generator: Any = None

    @property
    def secure(self) -> bool:
        return self.key is not None

    def reserve_blocks(self, blocks: int) -> int:
        """The first of ``blocks`` consecutive unused block indices (for the fused kernels)."""
        first = self._next_block
        self._next_block += blocks
        return first

    def take(self, count: int) -> Any:
        xp, device = self.library.xp, self.library.device
        if count == 0:
            return xp.zeros((0,), dtype=word_dtype(xp), device=device)
        if self.key is None and self.library.name == "torch":
            return self._philox(count)
        blocks = -(-count // 16)
        first = self.reserve_blocks(blocks)
        key = self.key if self.key is not None else _seed_key(self.seed or 0)
        words = chacha20_words(xp, key, first, blocks, device=device)
        return xp.reshape(xp.stack(words, axis=1), (-1,))[:count]

    def span(self, first_block: int, start: int, count: int) -> Any:
        """Words ``start`` … ``start + count − 1`` of the stream that begins at ``first_block``
        (reserved by the caller with :meth:`reserve_blocks`): exactly the slice of what one
        :meth:`take` of the whole range would give, computed without the rest of it, so that a
        large draw can be made a piece at a time in bounded memory.

        Torch's Philox (fast mode on torch) has no random access: there the pieces must be asked
        for in order, each the generator's next ``count`` words. On the CPU that is the slice of
        one large draw; on CUDA, where torch rounds each call's Philox offset, it is an
        equally-distributed but different stream.
        """
        xp, device = self.library.xp, self.library.device
        if count == 0:
            return xp.zeros((0,), dtype=word_dtype(xp), device=device)
        if self.key is None and self.library.name == "torch":
            return self._philox(count)
        first, last = start // 16, -(-(start + count) // 16)
        key = self.key if self.key is not None else _seed_key(self.seed or 0)
        words = chacha20_words(xp, key, first_block + first, last - first, device=device)
        offset = start - 16 * first
        return xp.reshape(xp.stack(words, axis=1), (-1,))[offset : offset + count]

    def _philox(self, count: int) -> Any:
        import torch

        if self._torch_generator is None:
            self._torch_generator = torch.Generator(device=self.library.device)
            self._torch_generator.manual_seed(self.seed or 0)
        return torch.randint(
            0,
            _TWO_32,
            (count,),
            generator=self._torch_generator,
            dtype=torch.int64,
            device=self.library.device,
        )


def _seed_key(seed: int) -> tuple[int, ...]:
    return struct.unpack("<8I", seed.to_bytes(8, "little") * 4)


def device_words(library: ArrayLibrary, rng: Any, *, owner: str) -> DeviceWords:
    """The :class:`DeviceWords` of one call for ``rng`` (None, a :class:`SecureRandom`, a numpy
    ``Generator``, or the array's own library's: a ``torch.Generator``, a CuPy ``Generator``, a
    JAX key)."""
    framework = _framework(rng)
    if framework is not None:
        if library.name != framework:
            raise InvalidParameter(
                "rng", rng, f"a generator of the array's own library ({library.name})", owner=owner
            )
        return DeviceWords(library, mode="fast", seed=_framework_seed(rng, owner))
    generator, mode = resolve_rng(rng, owner=owner)
    if isinstance(generator, SecureRandom):
        key = tuple(int(w) for w in generator.words(4).view(np.uint32))
        return DeviceWords(library, mode=mode, key=key)
    return DeviceWords(library, mode="fast", seed=int(generator.integers(0, 2**62)))


def uniform_below(words: DeviceWords, count: int, bound: int) -> Any:
    """``count`` integers exactly uniform on {0, …, bound − 1} (the words' dtype, on the device),
    by rejection: a word w < ⌊2³²/bound⌋·bound gives w mod bound; the others are drawn again."""
    xp = words.library.xp
    if not 1 <= bound < _TWO_32:
        raise InvalidParameter("bound", bound, "an integer in [1, 2**32)")
    limit = (_TWO_32 // bound) * bound
    out = words.take(count)
    rejected = xp.logical_not(below(xp, out, limit))
    while bool(xp.any(rejected)):  # rare: P(a word is rejected) = (2³² mod bound)/2³² < bound/2³²
        out = xp.where(rejected, words.take(count), out)  # fresh words: no word is used twice
        rejected = xp.logical_not(below(xp, out, limit))
    return out % bound


def host_rng(rng: Any, *, owner: str) -> Any:
    """``rng`` for dpkit's numpy path on a host array: an array library's own generator (a
    ``torch.Generator``, a JAX key) becomes a numpy ``Generator`` seeded from it (fast mode,
    still reproducible from the generator's seed or the key); anything else is passed on
    unchanged (and checked there)."""
    if _framework(rng) is None:
        return rng
    return np.random.default_rng(_framework_seed(rng, owner))

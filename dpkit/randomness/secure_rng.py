"""``SecureRandom``: the part of ``numpy.random.Generator`` that dpkit's samplers use, made secure.

Local mechanisms call only ``rng.random(size)`` and ``rng.integers(low, high, size=, dtype=)``,
so they run unchanged on a :class:`SecureRandom`. Both are built from the words of a
:class:`~dpkit.randomness.SecureWordSource`, with integer arithmetic only:

* ``random()`` returns k/2⁵³ with k the top 53 bits of a word: the same 2⁻⁵³ grid and exact
  uniformity as numpy's ``Generator.random`` (each of the 2⁵³ values has probability 2⁻⁵³).
* ``integers()`` is exactly uniform by rejection (never ``word % m`` alone, which favours small
  residues when m does not divide 2⁶⁴).
* ``bernoulli(p)`` compares one word with the integer threshold ⌈p·2⁶⁴⌉, so the realised
  probability is p rounded *up* to the 2⁻⁶⁴ grid (see :func:`probability_threshold`).

Methods of ``Generator`` that a :class:`SecureRandom` does not have — notably the float
samplers ``laplace``, ``normal`` and ``exponential``, whose outputs leak the true value through
their low bits (Mironov 2012, CCS) — raise a :class:`~dpkit.errors.UnsupportedRandomness` (an
``AttributeError``) that says so.
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction
from typing import Any, Literal, NoReturn

import numpy as np
from numpy.typing import DTypeLike, NDArray

from dpkit._enclosure import decimal_low
from dpkit.errors import InvalidParameter, UnsupportedRandomness
from dpkit.randomness._words import U64, uniform_below
from dpkit.randomness.source import SecureWordSource

__all__ = ["SecureRandom", "lie_threshold", "probability_threshold"]

Size = int | tuple[int, ...] | None
_DOUBLE_UNIT = 1.0 / (1 << 53)
_SINGLE_UNIT = np.float32(1.0 / (1 << 24))


def probability_threshold(
    probability: float | Fraction, /, *, rounding: Literal["up", "down"] = "up"
) -> int:
    """The integer T ∈ [0, 2⁶⁴] with ``word < T`` true with probability T/2⁶⁴ ≈ ``probability``.

    T = ⌈p·2⁶⁴⌉ (``rounding="up"``) or ⌊p·2⁶⁴⌋ (``"down"``), computed exactly from the value of
    ``p`` (a float is taken at its exact binary value). Rounding a lie/flip probability up is
    what keeps a randomized-response ε at or below its declared value.

    >>> probability_threshold(0.5), probability_threshold(Fraction(1, 3)) == (2**64 + 2) // 3
    (9223372036854775808, True)
    """
    exact = Fraction(probability)
    if not 0 <= exact <= 1:
        raise InvalidParameter("probability", probability, "a number in [0, 1]")
    scaled = exact * U64
    return math.ceil(scaled) if rounding == "up" else math.floor(scaled)


@functools.lru_cache(maxsize=256)
def lie_threshold(epsilon: float, k: int, /) -> int:
    """T with T/2⁶⁴ ≥ λ = (k − 1)/(e^ε + k − 1), the lie probability of k-ary randomized
    response (k = 2: binary RR's flip probability 1/(e^ε + 1)), and T/2⁶⁴ < λ + 2·2⁻⁶⁴.

    λ is evaluated in 60-digit decimal arithmetic, not in floating point (a float λ can fall
    below the true λ by more than the 2⁻⁶⁴ rounding, and then the realised ε would exceed the
    declared one), from the smaller of the double ε's two readings: its exact value and its
    shortest decimal, which is what the ledger charges and can lie below the exact value
    (:func:`dpkit._enclosure.decimal_low`; at ε = 0.1 the binary value's λ realised 0.1 +
    5.5·10⁻¹⁸). With λ′ = T/2⁶⁴ ≥ λ the realised ratio
    p′/q′ = (1 − λ′)(k − 1)/λ′ ≤ (1 − λ)(k − 1)/λ = e^ε (Kairouz, Bonawitz & Ramage 2016, §2.2).

    Rounding up guards that ratio only. The reverse one, q′/p′ = λ′/((k − 1)(1 − λ′)), exceeds 1
    once λ′ passes the uniform point (k − 1)/k; at ε ≲ k·2⁻⁶⁴ (large k, tiny ε) λ lies within
    2⁻⁶⁴ of that point, no point of the grid may lie in [λ, (k − 1)/k], and the rounded λ′ can
    realise q′/p′ > e^ε (k = 2.8·10⁸, ε = 5.5·10⁻¹²: 9.5·10⁻¹²). Such (ε, k) raise
    :class:`~dpkit.errors.InvalidParameter` (decided on the 60-digit e^ε, the margin on the
    refusing side); every T returned has both ratios within e^ε. (ε = 0 is not checked: then
    λ = (k − 1)/k is the uniform law itself, and λ′ a step above it.)

    >>> lie_threshold(0.0, 2) - 2**63 in (0, 1)
    True
    """
    if not (isinstance(k, int) and k >= 2) or not (math.isfinite(epsilon) and epsilon >= 0):
        raise InvalidParameter("epsilon", epsilon, "finite and >= 0, with k >= 2")
    context = decimal.Context(prec=60)
    odds = context.exp(decimal_low(epsilon))  # never above what the ledger charges
    lie = context.divide(decimal.Decimal(k - 1), context.add(odds, decimal.Decimal(k - 1)))
    scaled = context.multiply(lie, decimal.Decimal(U64))
    margin = decimal.Decimal("1e-30")  # ≫ the ~1e-40 error of 60-digit arithmetic at 2⁶⁴
    threshold = min(
        int(context.add(scaled, margin).to_integral_value(decimal.ROUND_FLOOR)) + 1, U64
    )
    if epsilon > 0 and threshold * k > (k - 1) * U64:  # past (k − 1)/k: is q′/p′ ≤ e^ε?
        keep = decimal.Decimal((k - 1) * (U64 - threshold))
        if threshold == U64 or context.divide(decimal.Decimal(threshold), keep) > odds - margin:
            raise InvalidParameter(
                "epsilon",
                epsilon,
                f"large enough for {k} outcomes: on the 2^-64 grid the lie probability rounded "
                "up passes (k - 1)/k so far that the truth's odds fall below e^-epsilon",
            )
    return threshold


def _shape(size: Size) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _count(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class SecureRandom:
    """A cryptographically secure stand-in for the ``numpy.random.Generator`` methods dpkit uses.

    >>> rng = SecureRandom()
    >>> u = rng.random(4)
    >>> bool(np.all((0 <= u) & (u < 1))) and bool(np.all(u * 2**53 == np.floor(u * 2**53)))
    True
    >>> x = rng.integers(0, 10, size=1000)
    >>> int(x.min()) >= 0 and int(x.max()) <= 9
    True

    It cannot be seeded: a seed would make it predictable. For reproducible tests use
    ``SecureRandom.from_key(key)`` (32 fixed bytes; tests only) or a numpy ``Generator`` (fast
    mode). Like its source it refuses to be pickled or copied.
    """

    __slots__ = ("_source",)

    def __init__(self, source: SecureWordSource | None = None) -> None:
        if source is not None and not isinstance(source, SecureWordSource):
            raise InvalidParameter(
                "source", source, "a SecureWordSource or None", owner="SecureRandom"
            )
        self._source = source if source is not None else SecureWordSource()

    @classmethod
    def from_key(cls, key: bytes, /) -> SecureRandom:
        """A reproducible instance from a fixed 32-byte key: for tests ONLY (see
        :meth:`SecureWordSource.from_key`)."""
        return cls(SecureWordSource.from_key(key))

    @property
    def source(self) -> SecureWordSource:
        return self._source

    @property
    def keyed(self) -> bool:
        """Whether this instance came from :meth:`from_key` (a reproducible stream: its
        releases are recorded with the randomness mode ``"keyed"``)."""
        return self._source.keyed

    def words(self, size: Size = None) -> NDArray[np.uint64]:
        """Uniform 64-bit words straight from the keystream."""
        return self._source.words(size)

    def random(
        self, size: Size = None, dtype: DTypeLike = np.float64, out: NDArray[Any] | None = None
    ) -> Any:
        """Uniform floats in [0, 1) on the 2⁻⁵³ grid (float64) or 2⁻²⁴ grid (float32).

        x = ⌊w / 2¹¹⌋ · 2⁻⁵³ for a uniform word w: the top 53 bits, converted and scaled exactly
        (an integer below 2⁵³ is a double, and multiplying by a power of two is exact).
        """
        kind = np.dtype(dtype)
        if kind not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise InvalidParameter(
                "dtype", dtype, "float64 or float32", owner="SecureRandom.random"
            )
        shape = out.shape if out is not None else _shape(size)
        w = self._source.words(_count(shape))
        if kind == np.float64:
            values = (w >> np.uint64(11)).astype(np.float64)
            values *= _DOUBLE_UNIT
        else:
            values32 = (w >> np.uint64(40)).astype(np.float32)
            values32 *= _SINGLE_UNIT
            values = values32
        values = values.reshape(shape)
        if out is not None:
            out[...] = values
            return out
        return values if shape else values.dtype.type(values[()])

    def integers(
        self,
        low: int,
        high: int | NDArray[np.integer[Any]] | None = None,
        size: Size = None,
        dtype: DTypeLike = np.int64,
        endpoint: bool = False,
    ) -> Any:
        """Exactly uniform integers in [low, high) (or [low, high] with ``endpoint=True``).

        Like ``Generator.integers``: ``integers(high)`` means [0, high), and ``high`` may be an
        integer array (one bound per draw, broadcast against ``size``). The range
        m = high − low is drawn by :func:`~dpkit.randomness._words.uniform_below` (rejection of
        words below 2⁶⁴ mod m, redrawn in vectorised rounds) and shifted by ``low``.
        """
        if high is None:
            low, high = 0, low
        kind = np.dtype(dtype)
        if not np.issubdtype(kind, np.integer):
            raise InvalidParameter(
                "dtype", dtype, "an integer dtype", owner="SecureRandom.integers"
            )
        lo = _as_int(low, "low")
        if isinstance(high, np.ndarray):
            return self._integers_array(lo, high, size, kind, endpoint)
        hi = _as_int(high, "high")
        last = hi if endpoint else hi - 1
        info = np.iinfo(kind)
        if lo > last:
            raise InvalidParameter(
                "high",
                high,
                f"greater than low={low}" + (" or equal" if endpoint else ""),
                owner="SecureRandom.integers",
            )
        if lo < info.min or last > info.max:
            raise InvalidParameter(
                "low" if lo < info.min else "high",
                low if lo < info.min else high,
                f"within the range of {kind} [{info.min}, {info.max}]",
                owner="SecureRandom.integers",
            )
        shape = _shape(size)
        offsets = uniform_below(self._source.words, last - lo + 1, _count(shape))
        return _shifted(offsets, lo, kind, shape)

    def _integers_array(
        self, lo: int, high: NDArray[Any], size: Size, kind: np.dtype[Any], endpoint: bool
    ) -> Any:
        """integers(low, high_array): one exactly uniform draw in [low, high_i) per element."""
        info = np.iinfo(kind)
        if not np.issubdtype(high.dtype, np.integer):
            raise InvalidParameter("high", "an array", "integers", owner="SecureRandom.integers")
        shape = np.broadcast_shapes(high.shape, _shape(size)) if size is not None else high.shape
        bounds = np.broadcast_to(high, shape).reshape(-1)
        shift = 0 if endpoint else 1
        if bounds.size:
            smallest, largest = int(bounds.min()) - shift, int(bounds.max()) - shift
            if smallest < lo or lo < info.min or largest > info.max:
                raise InvalidParameter(
                    "high",
                    "an array",
                    f"every bound above low={lo} and within {kind}",
                    owner="SecureRandom.integers",
                )
        # m = last − low + 1 in wrapping uint64 arithmetic: exact, except that a full 64-bit
        # range (m = 2⁶⁴) wraps to 0, where any word is uniform.
        moduli = bounds.astype(np.uint64) - np.uint64((lo + shift - 1) % U64)
        full = moduli == 0
        offsets = uniform_below(self._source.words, np.where(full, 1, moduli), moduli.size)
        if full.any():
            offsets[full] = self._source.words(int(full.sum()))
        return _shifted(offsets, lo, kind, shape)

    def bernoulli(self, probability: float | Fraction, size: Size = None) -> Any:
        """Booleans, true with probability ⌈p·2⁶⁴⌉/2⁶⁴ ≥ p (one word and one compare each)."""
        return self.bernoulli_threshold(probability_threshold(probability), size)

    def bernoulli_threshold(self, threshold: int, size: Size = None) -> Any:
        """Booleans ``word < threshold``: true with probability exactly threshold/2⁶⁴.

        ``threshold`` is an int in [0, 2⁶⁴]; :func:`probability_threshold` makes one from a
        probability with the rounding you choose.
        """
        t = _as_int(threshold, "threshold")
        if not 0 <= t <= U64:
            raise InvalidParameter(
                "threshold", threshold, "an integer in [0, 2**64]", owner="SecureRandom"
            )
        shape = _shape(size)
        if t == U64:
            result = np.ones(shape, dtype=np.bool_)
        else:
            result = self._source.words(_count(shape)).reshape(shape) < np.uint64(t)
        return result if shape else bool(result[()])

    def __getattr__(self, name: str) -> NoReturn:
        if not name.startswith("_") and hasattr(np.random.Generator, name):
            msg = (
                f"SecureRandom has no {name}(): it only offers what can be sampled securely "
                "(random, integers, bernoulli, words). Float noise such as laplace()/normal() "
                "leaks the true value through its low bits (Mironov 2012); use the exact samplers "
                "in dpkit.randomness, or pass a numpy Generator to opt into fast, "
                "not attack-resistant mode."
            )
            raise UnsupportedRandomness(msg)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"SecureRandom({self._source!r})"

    def _refuse(self, what: str) -> NoReturn:
        msg = (
            f"a SecureRandom cannot be {what}: the copy would replay the same random words. "
            "Create a new SecureRandom in each process instead."
        )
        raise TypeError(msg)

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._refuse("pickled")

    def __reduce__(self) -> NoReturn:
        self._refuse("pickled")

    def __copy__(self) -> NoReturn:
        self._refuse("copied")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self._refuse("copied")


def _shifted(
    offsets: NDArray[np.uint64], low: int, kind: np.dtype[Any], shape: tuple[int, ...]
) -> Any:
    shifted = offsets + np.uint64(low % U64)  # wraps modulo 2⁶⁴, exactly as intended
    values = shifted.view(np.int64) if np.iinfo(kind).min < 0 else shifted
    result = values.astype(kind).reshape(shape)
    return result if shape else result.dtype.type(result[()])


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidParameter(name, value, "an integer", owner="SecureRandom")
    return int(value)

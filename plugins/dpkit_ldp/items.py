"""Items from an unbounded domain (words, URLs, crash signatures): byte strings, their domain,
and the privacy-boundary hooks of the mechanisms that take them (``cms``, ``hcms``, ``rappor``).

An item is a byte string. Text is encoded as UTF-8 (vectorised here: numpy's own
``np.strings.encode`` calls ``str.encode`` once per element, about 1.8 s per 10⁶ words); an
integer is its decimal text, so ``7`` and ``"7"`` are one item. Items are held in numpy's
fixed-width bytes dtype, which cannot hold trailing zero bytes: ``b"ab\\0"`` is the item
``b"ab"`` everywhere (client, server and candidate queries alike). Python values whose longest
item would make that array large (over 64 MiB, and over four times the items' own bytes) are
kept as an object array of ``bytes`` instead, the same items, hashed alike: one long record
then costs its own length, never n times it (:func:`_as_bytes_array`). Lone surrogates in text
are encoded as Python's ``errors="surrogatepass"`` would, so every text value has an encoding.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import Domain, InvalidData, as_array, describe_dtype, plain, readable

__all__ = [
    "ItemDomain",
    "ItemInput",
    "as_items",
    "coerce_items",
    "utf8_encode",
]


def utf8_encode(text: NDArray[np.str_]) -> NDArray[np.bytes_]:
    """UTF-8 of every element of a numpy text array, vectorised over code points.

    Rows of ASCII text (all code points below 0x80) are their code points as bytes. In other
    rows a code point c takes 1, 2, 3 or 4 bytes (c < 0x80, < 0x800, < 0x10000, else): the lead
    byte carries the top bits after the prefix 0, 110, 1110 or 11110, each continuation byte
    10 and six bits (RFC 3629, Section 3), scattered to its offset in the row (the running sum
    of the lengths before it).
    """
    flat = np.ascontiguousarray(text.reshape(-1))
    n = flat.shape[0]
    width = flat.dtype.itemsize // 4
    if n == 0 or width == 0:
        return np.zeros(text.shape, dtype="S1")
    cp = flat.view(np.uint32).reshape(n, width)
    wide = np.flatnonzero((cp >= 0x80).any(axis=1))
    if wide.size == 0:
        return cp.astype(np.uint8).view(f"S{width}").reshape(text.shape)
    encoded = _encode_wide(cp[wide], np.strings.str_len(flat[wide]).astype(np.int64))
    out = np.zeros((n, max(width, encoded.shape[1])), dtype=np.uint8)
    out[:, :width] = cp  # the ASCII rows (the others are overwritten next)
    out[wide] = 0
    out[wide, : encoded.shape[1]] = encoded
    return out.view(f"S{out.shape[1]}").reshape(text.shape)


def _encode_wide(cp: NDArray[np.uint32], length: NDArray[np.int64]) -> NDArray[np.uint8]:
    """The UTF-8 bytes of rows of code points (see :func:`utf8_encode`), one row per text."""
    n, width = cp.shape
    inside = np.arange(width)[None, :] < length[:, None]
    wide = (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    size: NDArray[np.int64] = inside * (1 + wide)
    offset: NDArray[np.int64] = np.cumsum(size, axis=1) - size
    out = np.zeros((n, max(1, int(size.sum(axis=1).max()))), dtype=np.uint8)
    rows = np.broadcast_to(np.arange(n)[:, None], cp.shape)
    prefix = np.array([0, 0, 0xC0, 0xE0, 0xF0], dtype=np.uint32)[size]
    for s in range(4):
        where = size > s
        if not where.any():
            break
        # byte s of a code point of size z carries bits 6(z − 1 − s) and up.
        shift = (6 * np.maximum(size - 1 - s, 0)).astype(np.uint32)
        bits = cp >> shift
        value = prefix | bits if s == 0 else 0x80 | (bits & 0x3F)
        out[rows[where], (offset + s)[where]] = value[where]
    return out


#: Bytes beyond which the object path keeps long items unpadded (:func:`_as_bytes_array`).
_PADDED_BYTES = 1 << 26


def _decimal(values: NDArray[Any]) -> NDArray[np.bytes_]:
    """Integers as their decimal text (numpy's own conversion; exact for 64-bit integers)."""
    return values.astype("S21")


def _object_item(value: Any) -> bytes | None:
    """One Python value's item, or None if it has none: not text, bytes or an integer, or one
    whose conversion raises — an integer whose decimal text Python refuses to form (more than
    ``sys.get_int_max_str_digits()`` digits, 4300 by default: CPython's limit on int → str),
    or a subclass whose ``encode``, ``__bytes__`` or ``__int__`` raises. Such a value has no
    text, as :func:`dpkit.tables.text.object_text` has it for a table's ``object`` column."""
    try:
        if isinstance(value, (bytes, np.bytes_)):
            return bytes(value).rstrip(b"\0")
        if isinstance(value, str):
            return str.encode(value, "utf-8", "surrogatepass").rstrip(b"\0")
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return str(int(value)).encode("ascii")
    except Exception:
        return None
    return None


def _quoted(value: Any) -> str:
    """The ``repr`` of a refused value for the strict path's message, or nothing where it raises."""
    try:
        return f" {plain(value)!r}"
    except Exception:
        return ""


def _from_objects(flat: NDArray[Any], *, strict: bool, owner: str, field: str) -> list[bytes]:
    """Python objects → bytes, one call each (object arrays have no vectorised path); a value
    with no item (:func:`_object_item`) is an :class:`~InvalidData` (``strict``) or ``b""``."""
    out: list[bytes] = []
    for value in flat:
        item = _object_item(value)
        if item is None and strict:
            raise InvalidData(
                f"{owner}: {field} must be text, bytes or integers (an integer of at most "
                f"{sys.get_int_max_str_digits() or 'any number of'} digits), got "
                f"{type(value).__name__}{_quoted(value)}",
                field=field,
            )
        out.append(b"" if item is None else item)
    return out


def _as_bytes_array(items: list[bytes], shape: tuple[int, ...]) -> NDArray[Any]:
    """The items as a fixed-width bytes array, or as an object array of ``bytes`` where padding
    every item to the longest would take over :data:`_PADDED_BYTES` and over four times the
    items' own bytes: one long record then costs its length, not n times it (2·10⁴ words and
    one text of 10⁶ characters took 20 GB; a larger n failed after the spend). Both forms hold
    the same items and hash alike (:class:`dpkit_ldp.keyed_hash.ItemWords`)."""
    width = max(1, max((len(b) for b in items), default=1))
    padded = len(items) * width
    if padded > _PADDED_BYTES and padded > 4 * sum(len(b) + 1 for b in items):
        loose = np.empty(len(items), dtype=object)
        loose[:] = items
        return loose.reshape(shape)
    array = np.array(items, dtype=f"S{width}") if items else np.zeros(0, dtype="S1")
    return array.reshape(shape)


def _plain_text(array: NDArray[Any]) -> NDArray[Any]:
    """numpy's variable-width text (``StringDType``, kind ``"T"``) as an object array of its
    ``str`` values, which the item paths read; any other array unchanged (from the dtype)."""
    return array.astype(object) if array.dtype.kind == "T" else array


def as_items(values: Any, /, *, owner: str, field: str = "values") -> NDArray[np.bytes_]:
    """``values`` as a bytes array of the same shape (the strict path of ``randomize``), or an
    object array of ``bytes`` where padding long items would be large (:func:`_as_bytes_array`).

    Text (UTF-8), bytes, integers (decimal text) and object arrays holding those are items;
    booleans, real numbers and anything else are an :class:`~InvalidData`.
    """
    array = _plain_text(as_array(values, owner=owner, field=field))
    kind = array.dtype.kind
    if kind == "S":
        return array
    if kind == "U":
        return utf8_encode(array)
    if kind in "iu":
        return _decimal(array)
    if array.size == 0 and kind in "fO":
        return np.zeros(array.shape, dtype="S1")
    if kind == "O":
        flat = array.reshape(-1)
        return _as_bytes_array(
            _from_objects(flat, strict=True, owner=owner, field=field), array.shape
        )
    raise InvalidData(
        f"{owner}: {field} must be text, bytes or integers (the items), got an array of "
        f"{describe_dtype(array)}",
        field=field,
    )


def coerce_items(values: Any, /) -> NDArray[np.bytes_]:
    """Every value as an item, never raising (the private phase).

    Text, bytes and integers become their item as in :func:`as_items`; anything else — NaN,
    None, a real number, a boolean, a date, and a value whose conversion raises (an integer of
    over 4300 digits, :func:`_object_item`) — becomes the empty item ``b""``. A fixed item
    replaces each such record, so its report is still the mechanism applied to an item (ε-LDP),
    and no record is dropped.
    """
    array = _plain_text(readable(values))
    kind = array.dtype.kind
    if kind == "S":
        return array
    if kind == "U":
        return utf8_encode(array)
    if kind in "iu":
        return _decimal(array)
    if kind == "O":
        flat = array.reshape(-1)
        return _as_bytes_array(_from_objects(flat, strict=False, owner="", field=""), array.shape)
    return np.zeros(array.shape, dtype="S1")


@attrs.frozen
class ItemDomain(Domain):
    """One user's item, a byte string of any length; any two distinct items neighbour.

    The worst-case pairs are two short items and the empty item against a longer one (both
    orders); random neighbours are random short words. A mechanism's leak through its hashes
    does not depend on which two items differ, as long as their hashes differ somewhere, which
    the auditor sees over many draws of the hash index.
    """

    relation: ClassVar[str] = "replace one user's item by any other item (local DP)"  # type: ignore[misc]

    def pairs(self) -> list[tuple[Any, Any]]:
        found = [("a", "b"), ("", "telemetry"), ("apple", "banana")]
        return [pair for a, b in found for pair in ((a, b), (b, a))]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        if n <= 0:
            return []
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        out: list[tuple[Any, Any]] = []
        for _ in range(n):
            size = rng.integers(1, 8, size=2)
            a = "".join(rng.choice(letters, size=int(size[0])))
            b = "".join(rng.choice(letters, size=int(size[1])))
            out.append((a, b if b != a else b + "x"))
        return out

    def are_neighbours(self, x: Any, y: Any) -> bool:
        """Two items (text, bytes or integers) that differ as byte strings."""
        try:
            a, b = as_items(np.array([x, y], dtype=object), owner="domain")
        except InvalidData:
            return False
        return bool(a != b)


class ItemInput:
    """The privacy-boundary hooks of a mechanism on items (``docs/security.md``).

    ``check_input`` (public phase, structure only): a 1-D array, one item per user, of any dtype.
    ``coerce`` (private phase, total): :func:`coerce_items`.
    """

    __slots__ = ()

    name: ClassVar[str]

    @property
    def domain(self) -> ItemDomain:
        return ItemDomain()

    def check_input(self, values: Any, /) -> None:
        """Public phase: a 1-D array, one item per user (structure only, never values)."""
        try:
            array = np.asarray(values)
        except (ValueError, TypeError):
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one item per user; the nested "
                "sequences have different lengths",
                field="values",
            ) from None
        if array.ndim != 1:
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one item per user, got shape "
                f"{array.shape}",
                field="values",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.bytes_]:
        """Private phase: every value as an item (:func:`coerce_items`); never raises."""
        return coerce_items(values)


def distinct(items: NDArray[np.bytes_]) -> list[bytes]:
    """The distinct items of an array, in first-seen order, as Python bytes."""
    return list(dict.fromkeys(bytes(b) for b in items.reshape(-1).tolist()))

"""Column values as exact integer codes and as keyed 64-bit words, on every backend alike.

Contribution bounding (:mod:`dpkit.tables.bounding`) needs two things from an id or group
column, and this module computes both from one column of a pandas, Polars or PyArrow table (a
whole eager table, or one partition of a Dask or Spark table):

* **codes** — one int64 per row with *equal codes exactly for equal values*. They decide which
  rows belong to one person (one id) and to one (id, group) pair, so they must never merge two
  distinct values (two people bounded as one) nor split one value (one person bounded twice):
  pandas' ``factorize`` and PyArrow's ``dictionary_encode`` (hash tables over the values),
  integers as themselves, floats by value (−0.0 is 0.0).
* **words** — one uint64 per row, a *keyed hash* of the value that is the same on every
  backend for the same value: integers (and integral floats, and booleans) as the integer's
  two's complement; other floats as their bits; text as a keyed polynomial hash of its UTF-8
  bytes (two lanes modulo the prime 2³¹ − 1 with multipliers from the key: distinct strings of
  at most L bytes collide with probability ≤ (L/(2³¹ − 1))², Carter & Wegman 1979, the
  polynomial family); anything else (dates, decimals, lists) by its text, its code by its
  exact stored value where Arrow can hash it (a time64[ns] prints whole microseconds). Words
  are computed once per distinct value and spread by the codes, so every row of one value
  gets one word.

Words only feed the bounding's *priorities*: a collision (or a backend that spells an unusual
value differently) can only change which rows are kept, never how many, and never whose rows
are grouped together — codes decide that. See the bounding module for why the priorities' quality
affects utility and not privacy.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MASK", "PRIME", "encode_column", "mix", "number_words", "text_words"]

MASK = (1 << 64) - 1
#: The Mersenne prime 2³¹ − 1 of the text hash's lanes (a lane's products stay below 2⁶²).
PRIME = (1 << 31) - 1
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
#: Odd constants that separate the kinds of value (a float's bits from an integer, text from
#: the text of an unusual value).
_FLOAT = np.uint64(0x9E3779B97F4A7C15)
_TEXT = np.uint64(0xD6E8FEB86659FD93)
_OTHER = np.uint64(0xA0761D6478BD642F)
_LENGTH = np.uint64(0xE7037ED1A0B428DB)
_INT64 = float(1 << 63)


def mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finaliser (Appleby 2011): a bijection of 64-bit words whose every
    output bit depends on every input bit. Wraps modulo 2⁶⁴ (array arithmetic: no warning)."""
    x = np.array(x, dtype=np.uint64)  # one copy, then in place: two arrays, not six
    shifted = x >> _S33
    x ^= shifted
    x *= _M1
    np.right_shift(x, _S33, out=shifted)
    x ^= shifted
    x *= _M2
    np.right_shift(x, _S33, out=shifted)
    x ^= shifted
    return x


def number_words(values: NDArray[Any]) -> NDArray[np.uint64]:
    """Words of real numbers: integers in the int64 range (integral floats and booleans
    included, so 1, 1.0 and True agree, as they compare equal) as their two's complement, any
    other float (±inf, NaN, fractions, huge values) as ``mix(bits ^ tag)``; −0.0 is 0."""
    array = np.asarray(values)
    if array.dtype.kind == "b":
        return np.asarray(array, dtype=np.uint64)
    if array.dtype.kind == "i":
        return np.asarray(array, dtype=np.int64).view(np.uint64)
    if array.dtype.kind == "u":
        wide = np.asarray(array, dtype=np.uint64)
        small = wide < np.uint64(1 << 63)
        if small.all():
            return wide
        out: NDArray[np.uint64] = wide.copy()
        out[~small] = number_words(wide[~small].astype(np.float64))
        return out
    floats = np.asarray(array, dtype=np.float64) + 0.0  # −0.0 + 0.0 is +0.0
    with np.errstate(invalid="ignore"):
        integral = (np.floor(floats) == floats) & (np.abs(floats) < _INT64)
    out = mix(floats.view(np.uint64) ^ _FLOAT)
    out[integral] = floats[integral].astype(np.int64).view(np.uint64)
    return out


def _powers(multiplier: int, count: int) -> NDArray[np.uint64]:
    """multiplier⁰, multiplier¹, … modulo PRIME (count of them), by doubling."""
    out = np.ones(1, dtype=np.uint64)
    while out.size < count:
        step = np.uint64(pow(multiplier, out.size, PRIME))
        out = np.concatenate((out, out * step % np.uint64(PRIME)))
    return out[: max(count, 1)]


def text_words(array: Any, lanes: tuple[int, int], tag: np.uint64 = _TEXT) -> NDArray[np.uint64]:
    """Words of a PyArrow string or binary array (no nulls): two keyed polynomial lanes over
    the bytes (each byte b weighted (b + 1)·aʲ, j its position, a ∈ [1, 2³¹ − 2] a lane's
    multiplier) and the length, mixed."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    array = array.cast(pa.large_binary())
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64, count=n + 1, offset=array.offset * 8)
    lengths = np.diff(offsets)
    first, last = int(offsets[0]), int(offsets[-1])
    body = (
        np.frombuffer(buffers[2], dtype=np.uint8)[first:last].astype(np.uint64) + np.uint64(1)
        if last > first
        else np.zeros(0, dtype=np.uint64)
    )
    nonempty = np.flatnonzero(lengths > 0)
    position = np.arange(body.size, dtype=np.int64) - np.repeat(offsets[:-1] - first, lengths)
    combined = np.zeros(n, dtype=np.uint64)
    for shift, multiplier in zip((np.uint64(31), np.uint64(0)), lanes, strict=True):
        if not body.size:
            break
        terms = body * _powers(multiplier, int(lengths.max()))[position] % np.uint64(PRIME)
        lane = np.zeros(n, dtype=np.uint64)
        lane[nonempty] = np.add.reduceat(terms, offsets[:-1][nonempty] - first) % np.uint64(PRIME)
        combined |= lane << shift
    return mix(combined ^ mix(lengths.astype(np.uint64) ^ _LENGTH) ^ tag)


def _text_array(texts: list[str]) -> Any:
    """A PyArrow array of the texts' UTF-8 bytes; a lone surrogate (which UTF-8 cannot hold)
    is encoded as its code unit rather than refused (total: any Python string is hashed)."""
    import pyarrow as pa

    return pa.array([t.encode("utf-8", "surrogatepass") for t in texts], type=pa.large_binary())


def _object_words(values: list[Any], lanes: tuple[int, int]) -> NDArray[np.uint64]:
    """Words of Python values one by one: text, real numbers (as :func:`number_words`), and
    anything else by its text (``repr`` if even ``str`` fails). Total."""
    out = np.zeros(len(values), dtype=np.uint64)
    numbers_at, numbers_of, texts_at, texts, others_at, others = [], [], [], [], [], []
    for i, value in enumerate(values):
        if isinstance(value, str):
            texts_at.append(i)
            texts.append(value)
        elif isinstance(value, (bool, np.bool_)):
            out[i] = int(value)
        elif isinstance(value, numbers.Integral) and -(1 << 63) <= int(value) < (1 << 63):
            out[i] = int(value) & MASK
        elif isinstance(value, numbers.Real):
            numbers_at.append(i)
            numbers_of.append(_as_float(value))
        else:
            others_at.append(i)
            others.append(_text_of(value))
    if numbers_at:
        out[numbers_at] = number_words(np.array(numbers_of, dtype=np.float64))
    if texts_at:
        out[texts_at] = text_words(_text_array(texts), lanes)
    if others_at:
        out[others_at] = text_words(_text_array(others), lanes, _OTHER)
    return out


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond the doubles
        try:
            return math.inf if value > 0 else -math.inf
        except Exception:
            return math.nan
    except Exception:  # a Real whose conversion fails: any fixed word will do
        return math.nan


def _text_of(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return object.__repr__(value)


def _dense(values: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[Any]]:
    uniques, inverse = np.unique(values, return_inverse=True)
    return np.asarray(inverse, dtype=np.int64).reshape(-1), uniques


def _number_codes(values: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """(codes, words) of a numeric column: integers as their own codes when their range is
    small, otherwise (and for floats, −0.0 read as 0.0) by sorting the distinct values."""
    if values.dtype.kind in "iu" and values.size:
        low, high = int(values.min()), int(values.max())
        if high - low < 1 << 40:
            codes = np.subtract(values, values.dtype.type(low), dtype=np.int64)
            return codes, number_words(values)
    if values.dtype.kind == "f":
        values = values + 0.0
    codes, uniques = _dense(values)
    return codes, number_words(uniques)[codes]


def _arrow_codes(
    array: Any, lanes: tuple[int, int]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], array.type)
    kind = array.type
    if pa.types.is_dictionary(kind):  # the entries' codes and words, spread by the indices
        if len(array.dictionary) == 0:  # no entry: every row is missing (dropped before)
            return np.zeros(len(array), dtype=np.int64), np.zeros(len(array), dtype=np.uint64)
        entry_codes, entry_words = _arrow_codes(array.dictionary, lanes)
        indices = array.indices
        if indices.null_count:
            indices = pc.fill_null(indices, 0)
        at = np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.intp)
        return entry_codes[at], entry_words[at]
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return _number_codes(np.asarray(array.to_numpy(zero_copy_only=False)))
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string_view(kind)
    ):
        encoded = pc.dictionary_encode(array)
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return codes, text_words(encoded.dictionary, lanes)[codes]
    if not pa.types.is_nested(kind):
        # Codes by the exact stored value (Arrow's hash table), words by the text: a text can
        # be coarser than the value (a decimal as a double would be; a time64[ns] or an odd
        # date64 prints whole microseconds or days), and two ids one text would be one person.
        try:
            encoded = pc.dictionary_encode(array)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            encoded = None
        if encoded is not None:
            codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            texts = [_text_of(v) for v in encoded.dictionary.to_pylist()]
            return codes, text_words(_text_array(texts), lanes, _OTHER)[codes]
    return _object_codes([_text_of(v) for v in array.to_pylist()], lanes, _OTHER)


def _object_codes(
    values: list[Any] | NDArray[Any], lanes: tuple[int, int], tag: np.uint64 | None = None
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """(codes, words) of Python values: codes by Python equality (pandas' hash table), words
    per distinct value; unhashable values (which an id column might hold) by their text."""
    import pandas as pd

    try:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    except TypeError:
        texts = [_text_of(v) for v in values]
        return _object_codes(texts, lanes, _OTHER)
    distinct = list(uniques)
    words = (
        text_words(_text_array([str(v) for v in distinct]), lanes, tag)
        if tag is not None
        else _object_words(distinct, lanes)
    )
    codes = np.asarray(codes, dtype=np.int64)
    return codes, words[codes]


def _pandas_codes(
    series: Any, lanes: tuple[int, int]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    import pandas as pd
    import pyarrow as pa

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categories = pd.Series(np.asarray(dtype.categories, dtype=object))
        positions = np.asarray(series.cat.codes, dtype=np.int64)
        # Two categories of equal value (1 and 1.0 in an object index) share a code.
        category_codes, category_words = _pandas_codes(categories, lanes)
        return category_codes[positions], category_words[positions]
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return _number_codes(series.to_numpy())
    if isinstance(dtype, np.dtype) and dtype.kind in "mM":
        return _number_codes(series.to_numpy().view(np.int64))
    if isinstance(dtype, np.dtype):  # object columns: Python values
        return _object_codes(series.to_numpy(dtype=object), lanes)
    numpy_dtype = getattr(dtype, "numpy_dtype", None)  # nullable Int64, Float64, boolean
    if isinstance(numpy_dtype, np.dtype) and numpy_dtype.kind in "biuf":
        return _number_codes(series.to_numpy(dtype=numpy_dtype))
    try:  # pandas' string dtypes and Arrow-backed columns
        return _arrow_codes(pa.array(series), lanes)
    except Exception:  # anything PyArrow cannot hold: Python values
        return _object_codes(series.to_numpy(dtype=object), lanes)


def encode_column(
    native: Any, lanes: tuple[int, int]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """(codes, words) of one column without missing values: a pandas Series, a Polars Series
    or a PyArrow (chunked) array. See the module docstring. Total: any value gets a code and a
    word (an unusual one by its text)."""
    module = type(native).__module__.split(".", 1)[0]
    if module == "polars":
        try:
            native = native.to_arrow()
        except Exception:  # a type Arrow cannot hold (Int128): its values by their text
            return _object_codes([_text_of(v) for v in native.to_list()], lanes, _OTHER)
        module = "pyarrow"
    if module == "pyarrow":
        return _arrow_codes(native, lanes)
    import pandas as pd

    series = native if isinstance(native, pd.Series) else pd.Series(native)
    return _pandas_codes(series, lanes)

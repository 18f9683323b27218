"""Validation of category arrays: one vectorised pass, typed errors naming the problem.

Also the session hooks of the local mechanisms (:class:`CategoricalInput`): a structural
``check_input`` and a total, per-record ``coerce`` into the domain.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CategoricalDomain,
    InvalidData,
    as_array,
    describe_dtype,
    lookup_index,
    plain,
    readable,
    resolve_rng,
)


def as_category_indices(values: Any, k: int, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``values`` as an integer array with every entry in ``0 .. k-1``.

    Boolean arrays are accepted as 0/1 only when ``k == 2``. An empty input of any dtype is an
    empty ``int64`` array. Floats are refused: category indices are not measurements.
    """
    array = as_array(values, owner=owner, field=field)
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    if array.dtype == np.bool_:
        if k == 2:
            return array
        raise InvalidData(
            f"{owner}: {field} are booleans, but the domain has k={k} categories; "
            f"give integer category indices 0..{k - 1}",
            field=field,
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise InvalidData(
            f"{owner}: {field} must be integer category indices 0..{k - 1}, got an array of "
            f"{describe_dtype(array)}" + ("; map labels through categories=[...]" if k > 2 else ""),
            field=field,
        )
    # One pass: negative numbers become huge when viewed as unsigned.
    unsigned = array.view(np.dtype(f"u{array.dtype.itemsize}"))
    bad = unsigned >= k
    if bad.any():
        first = array.flat[int(np.flatnonzero(bad.ravel())[0])]
        raise InvalidData(
            f"{owner}: {field} contain {int(first)}, outside the domain 0..{k - 1} "
            f"({int(np.count_nonzero(bad))} value(s) out of range)",
            field=field,
        )
    return array


def as_binary(values: Any, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``values`` as an array of 0/1 (bool, integer, or float exactly 0.0/1.0)."""
    array = as_array(values, owner=owner, field=field)
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    if np.issubdtype(array.dtype, np.floating):
        bad = (array != 0.0) & (array != 1.0)
        if bad.any():
            first = plain(array.flat[int(np.flatnonzero(bad.ravel())[0])])
            raise InvalidData(
                f"{owner}: {field} must be 0 or 1, got {first!r} "
                f"({int(np.count_nonzero(bad))} value(s) not 0/1)",
                field=field,
            )
        return array
    return as_category_indices(array, 2, owner=owner, field=field)


def _index_of(value: Any, k: int) -> int:
    """One Python value as a category index in 0..k−1, or −1 (never raises).

    Integers (and booleans, as 0/1) in range are themselves; a real number equal to such an
    integer (2.0) is that integer; anything else (1.5, NaN, ±inf, text, None) is −1.
    """
    try:  # a user-defined number may raise anything from __int__/__float__: not an index
        if isinstance(value, (numbers.Integral, np.bool_)):
            index = int(value)
        elif isinstance(value, numbers.Real):
            as_float = float(value)
            if not (math.isfinite(as_float) and as_float.is_integer()):
                return -1
            index = int(as_float)
        else:
            return -1
    except Exception:
        return -1
    return index if 0 <= index < k else -1


def _per_value(flat: NDArray[Any], index_of: Any) -> NDArray[np.int64]:
    """``index_of`` on each distinct value (one call per value when numpy can sort them)."""
    try:
        unique, inverse = np.unique(flat, return_inverse=True)
    except Exception:  # mixed types numpy cannot order: one call per record
        return np.fromiter((index_of(v) for v in flat), dtype=np.int64, count=flat.shape[0])
    mapped = np.fromiter((index_of(u) for u in unique), dtype=np.int64, count=unique.shape[0])
    return np.asarray(mapped[inverse.ravel()], dtype=np.int64)


def category_codes(values: Any, k: int, labels: tuple[Any, ...] | None = None) -> NDArray[np.int64]:
    """Every value's category index in 0..k−1, or −1 when it is outside the domain; total.

    Without ``labels`` the domain is the integers 0..k−1 (booleans as 0/1, whole floats such as
    2.0 as integers); with ``labels`` a value is matched by a dictionary lookup on its Python
    value (as :meth:`KaryRandomizedResponse.encode` matches by equality: 2.0 matches the label
    2, text never matches an integer). Vectorised for numeric dtypes; object arrays and labels
    take one Python call per distinct value. Same shape as ``values``; never raises.
    """
    array = readable(values)
    flat = array.reshape(-1)
    if flat.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    if labels is not None:
        position = {label: i for i, label in enumerate(labels)}
        return _per_value(flat, lambda v: lookup_index(position, v)).reshape(array.shape)
    kind = array.dtype.kind
    if kind == "b":
        codes = flat.astype(np.int64)
    elif kind in "iu":
        # Compare as unsigned: negative numbers become huge, so one test covers both ends.
        inside = flat.view(np.dtype(f"u{flat.dtype.itemsize}")) < k
        codes = np.where(inside, flat, -1).astype(np.int64, copy=False)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            inside = (flat >= 0) & (flat < k) & (flat == np.floor(flat))  # False for NaN
        codes = np.where(inside, flat, -1.0).astype(np.int64, copy=False)
    elif kind == "O":
        codes = _per_value(flat, lambda v: _index_of(v, k))
    else:  # text, bytes, dates: never an index 0..k−1
        codes = np.full(flat.shape, -1, dtype=np.int64)
    return codes.reshape(array.shape)


class CategoricalInput:
    """The privacy-boundary hooks shared by the local mechanisms over k categories.

    Used by rr, krr, sue, oue, olh and hr (``docs/security.md``, "The privacy boundary"):

    ``check_input`` (public phase, structure only): the values must form a 1-D array, one value
    per user, of any dtype; booleans are refused only when the domain has more than two
    categories and no labels (as ``randomize`` refuses them).

    ``coerce`` (private phase, total): every value outside the domain — not one of 0..k−1 (or
    of the declared labels), e.g. NaN, None, 1.5, −1, an unknown label — is replaced by a
    category drawn **uniformly at random** from the domain with the session's ``rng``
    (a numpy Generator or a :class:`dpkit.SecureRandom`: ``integers`` is exactly uniform in
    both), independently for each such record. Valid values are unchanged; labels are mapped as
    ``randomize`` maps them and returned as labels. Why this keeps the guarantee: the report
    of a replaced record is the mechanism applied to a uniformly random input, a mixture of
    the report distributions of the domain's values, and a mixture of ε-LDP distributions
    satisfies the same likelihood-ratio bound e^ε against any value's report distribution —
    so every report is still ε-LDP. Records are never dropped: the number of reports is
    unchanged, so it cannot reveal how many values were invalid. Only the replaced records
    draw randomness (a secure stream's later words are independent of how many were drawn).
    """

    __slots__ = ()

    name: ClassVar[str]

    @property
    def domain(self) -> CategoricalDomain:
        raise NotImplementedError

    def _labels(self) -> tuple[Any, ...] | None:
        labels: tuple[Any, ...] | None = getattr(self, "categories", None)
        return labels

    def check_input(self, values: Any, /) -> None:
        """Public phase: a 1-D array, one value per user (structure only, never values)."""
        try:
            array = np.asarray(values)
        except (ValueError, TypeError):
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one value per user; the nested "
                "sequences have different lengths",
                field="values",
            ) from None
        if array.ndim != 1:
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one value per user, got shape "
                f"{array.shape}",
                field="values",
            )
        k = self.domain.size
        if array.dtype == np.bool_ and k > 2 and self._labels() is None:
            raise InvalidData(
                f"{self.name}: values are booleans, but the domain has k={k} categories; "
                f"give integer category indices 0..{k - 1}",
                field="values",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[Any]:
        """Private phase: out-of-domain values → a uniformly random category; never raises."""
        k = self.domain.size
        labels = self._labels()
        codes = category_codes(values, k, labels)
        outside = np.flatnonzero(codes.reshape(-1) < 0)
        if outside.size:
            generator = resolve_rng(rng, owner=self.name)[0]
            replacement = generator.integers(0, k, size=outside.size, dtype=np.int64)
            codes.reshape(-1)[outside] = replacement
        if labels is None:
            return codes
        decoded: NDArray[Any] = np.asarray(labels)[codes]
        return decoded

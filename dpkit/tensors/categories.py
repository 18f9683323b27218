"""k-ary randomized response and category counts on an accelerator's arrays.

The law is the CPU path's (Wang et al. 2017, §4.1, "direct encoding"): the true index stays with
probability p = e^ε/(e^ε + k − 1), and otherwise (probability λ = (k − 1)/(e^ε + k − 1)) the
report is uniform over the k − 1 other indices. On the device the lie is decided by a 32-bit
word below ⌈λ·2³²⌉ (λ rounded up, as :mod:`dpkit.tensors.bits` rounds a flip: the realised ε
never exceeds the declared one) — or, at small ε where that rounding would pass (k − 1)/k, by
two words against λ's 64-bit threshold (:func:`~dpkit.tensors.device_random.lie_words`) — and
the other index by :func:`~dpkit.tensors.device_random.uniform_below` (k − 1), shifted past the
truth, exactly uniform. The lie words are the call's words 0 … n − 1 (0 … 2n − 1 with two
words a lie), the other indices the following ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import (
    device_words,
    index_dtype,
    lie_below,
    lie_words,
    uniform_below,
)
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["category_counts", "check_categories", "kary_response", "report_dtype"]


def check_categories(library: ArrayLibrary, values: Any, k: int, *, owner: str, field: str) -> None:
    """Refuse anything but integer (or, for k = 2, boolean) indices in 0 … k − 1 (one pass on
    the device; the message never quotes a value)."""
    xp = library.xp
    if values.dtype == xp.bool and k == 2:
        return
    if not xp.isdtype(values.dtype, "integral"):
        raise InvalidData(
            f"{owner}: {field} must be integer category indices 0..{k - 1} "
            f"(on the device labels are not mapped: encode them first)",
            field=field,
        )
    indices = _comparable(xp, values)
    outside = indices < 0
    if xp.iinfo(indices.dtype).max >= k:  # else no value reaches k (a wider k would wrap)
        outside = outside | (indices >= k)
    if bool(xp.any(outside)):
        raise InvalidData(f"{owner}: {field} contain indices outside 0..{k - 1}", field=field)


def _comparable(xp: Any, values: Any) -> Any:
    """Integer ``values`` in a dtype every library compares: unsigned integers wider than 8 bits
    as int64 (torch has no comparisons of uint16, uint32 or uint64; a uint64 of 2⁶³ or more
    turns negative, which is outside every domain too), any other as they are."""
    dtype = values.dtype
    if xp.isdtype(dtype, "unsigned integer") and xp.iinfo(dtype).bits > 8:
        return xp.astype(values, xp.int64)
    return values


def report_dtype(xp: Any, dtype: Any, k: int) -> Any:
    """The dtype of k-RR's reports of indices of ``dtype``: that dtype where it holds every index
    0 … k − 1 (booleans for k = 2), else int64 (the host's rule): narrower, a report would wrap
    around."""
    if dtype == xp.bool or xp.iinfo(dtype).max >= k - 1:
        return dtype
    return xp.int64


def kary_response(
    library: ArrayLibrary,
    values: Any,
    *,
    k: int,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """k-RR of every element of ``values`` (indices 0 … k − 1, any shape), on their device,
    in their dtype where it holds k − 1, else in int64 (:func:`report_dtype`)."""
    check_categories(library, values, k, owner=owner, field=field)
    xp = library.xp
    words = device_words(library, rng, owner=owner)
    out = report_dtype(xp, values.dtype, k)
    comparable = xp.isdtype(out, "signed integer") or out == xp.uint8
    integers = out if comparable else index_dtype(xp)  # every index < k fits it
    flat = xp.reshape(xp.astype(values, integers), (-1,))
    count = int(flat.shape[0])
    lie = lie_below(
        xp, words.take(lie_words(lie_threshold64, k) * count), count, lie_threshold64, k
    )
    other = xp.astype(uniform_below(words, count, k - 1), integers)  # < k − 1: fits
    other = other + xp.astype(other >= flat, integers)  # the k − 1 indices other than the truth
    reports = xp.where(lie, other, flat)
    return xp.reshape(xp.astype(reports, out), values.shape)


def category_counts(
    library: ArrayLibrary, values: Any, k: int, *, owner: str, field: str = "reports"
) -> NDArray[np.int64]:
    """How many of ``values`` are each index 0 … k − 1, counted on the device (a host array of
    k counts comes back, nothing else)."""
    check_categories(library, values, k, owner=owner, field=field)
    xp = library.xp
    flat = xp.reshape(xp.astype(values, index_dtype(xp)), (-1,))
    if library.name == "torch":
        import torch

        return np.asarray(library.small_to_host(torch.bincount(flat, minlength=k)), dtype=np.int64)
    found, counts = xp.unique_counts(flat)
    out = np.zeros(k, dtype=np.int64)
    out[library.small_to_host(found)] = library.small_to_host(counts)
    return out

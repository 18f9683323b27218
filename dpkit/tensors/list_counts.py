"""The per-node graph counts on an accelerator's arrays: noisy degrees and noisy k-stars.

The law is the CPU path's (the plugins ``graph_degree`` and ``graph_kstar``; Imola, Murakami &
Chaudhuri 2021, "Locally Differentially Private Analysis of Graph Statistics", USENIX
Security, §§4.2–4.3): each neighbour list (the last axis, 0/1) is counted — its degree d, or
C(min(d, D), k) for k-stars after the graph projection — and released as count + Z with Z
exact discrete Laplace of the mechanism's scale t (Canonne, Kamath & Steinke 2020), drawn by
:func:`~dpkit.tensors.noise.geometric_noise`: in secure mode the host's exact sampler on the
device's ChaCha20 words, in fast mode the same sampler on the framework's words, so both modes
have the exact law and the mechanism's ``log_probability`` holds for these reports.

The count is an integer computed on the device (a sum of the list's nonzero entries, then a
lookup in the public table C(0, k), …, C(D, k) for k-stars); only the noisy counts leave, on
the device, as ``int64`` of the lists' shape without their last axis.

**Checks**, as the CPU's, before any word is drawn and quoting no value: 64-bit integers (from
the library alone), a real or boolean array of at least one axis, every entry 0 or 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import require_64_bit
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.noise import geometric_noise

__all__ = ["noisy_list_counts", "through_table"]


def noisy_list_counts(
    library: ArrayLibrary,
    values: Any,
    *,
    table: Sequence[int] | None,
    scale: Fraction,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Each neighbour list's count plus exact discrete Laplace noise of ``scale``, ``int64``:
    the degree (``table`` None) or ``table[min(degree, len(table) − 1)]``."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    xp = library.xp
    if values.ndim < 1 or not xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(f"{owner}: neighbour lists must be a 0/1 array", field=field)
    ones = values
    if values.dtype != xp.bool:
        if bool(xp.any((values != 0) & (values != 1))):
            raise InvalidData(f"{owner}: neighbour lists must hold 0 or 1", field=field)
        ones = values != 0
    counts = through_table(library, xp.sum(xp.astype(ones, xp.int64), axis=-1), table)
    return geometric_noise(library, counts, scale=scale, rng=rng, owner=owner, field=field)


def through_table(library: ArrayLibrary, counts: Any, table: Sequence[int] | None) -> Any:
    """int64 ``counts`` as they are (``table`` None) or as ``table[min(count, len(table) − 1)]``
    (a public table, copied to the counts' device)."""
    if table is None:
        return counts
    xp = library.xp
    lookup = xp.asarray(list(table), dtype=xp.int64, device=library.device)
    clipped = xp.minimum(xp.reshape(counts, (-1,)), len(table) - 1)
    return xp.reshape(xp.take(lookup, clipped), tuple(counts.shape))

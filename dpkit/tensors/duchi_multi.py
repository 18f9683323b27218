"""Duchi et al.'s mechanism for vectors on an accelerator's arrays: the CPU's law, exactly.

The law is the CPU path's (Duchi, Jordan & Wainwright 2018, "Minimax Optimal Procedures for
Locally Private Estimation", JASA 113(521), §4.2.3; the plugin ``duchi_multi``): a row of d
values in standard units t ∈ [−1, 1]^d is rounded coordinate by coordinate to v ∈ {±1}^d
(v_j = +1 when u_j < (1 + t_j)/2, u_j uniform on the 2⁻⁵³ grid, as :mod:`dpkit.tensors.duchi`
draws it); with probability π_d ("heads") the report is B_d·v∘s for s uniform on
{s : Σ s > 0}, otherwise B_d·v∘(−s) for s uniform on {Σ s ≥ 0}. Such an s is drawn as on
the CPU: d uniform signs, negated when Σ s < 0; a heads row draws again (that row alone) when
Σ s = 0; a tails row of even d keeps Σ s = 0, and keeps Σ s > 0 when a fresh coin shows 1
(else draws again), so that each s of {Σ s ≥ 0} is equally likely. v∘s and v∘(−s) are the
reports of the CPU's vertex sampling, so every report has the CPU's probability and the
mechanism's ``log_probability``, privacy statement and estimator hold unchanged.

**Secure mode**: heads is a 64-bit word below T = ⌊π_d·2⁶⁴⌋ (the CPU's threshold, compared on
32-bit halves by :func:`~dpkit.tensors.duchi.below_64`); the u_j are the top 53 bits of 64-bit
words (:func:`~dpkit.tensors.duchi.uniform_53`), exactly as on the CPU. **Fast mode** (a
``torch.Generator`` or a numpy ``Generator``): heads is a 53-bit uniform below the float π_d,
as the CPU's fast mode.

**Words.** For n rows: 2nd words give the u (row i, coordinate j: words 2(i·d + j) and
2(i·d + j) + 1 as the high and low halves), then 2n the heads words (high, low); then, round
by round over the rows still pending, :data:`CANDIDATES` sign vectors per row (candidate c of
pending row i: ⌈d/32⌉ words from word (i·C + c)·⌈d/32⌉ on, bit j mod 32 of word ⌊j/32⌋ its
sign j, 1 for +1), and for even d one coin word per candidate (its top bit); the row takes its
first acceptable candidate. Each run starts on a fresh block.

**Values and reports.** As the CPU's ``randomize``: real numbers of [lower, upper] with d in
the last axis; anything else is an :class:`~dpkit.errors.InvalidData` that quotes no value,
decided before a word is drawn. Reports are float64, the values' shape, their two values
computed on the host by the CPU's arithmetic.
"""

from __future__ import annotations

from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import DeviceWords, device_words, require_64_bit
from dpkit.tensors.duchi import below_64, uniform_53
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits, reals_within

__all__ = ["duchi_multi_reports"]


#: Sign vectors drawn at once for each pending row (the first acceptable one is taken: the
#: same law as drawing them one by one, in fewer rounds: a heads row of d = 2 is done after a
#: round with probability 15/16 rather than 1/2).
CANDIDATES = 4


def _signs(library: ArrayLibrary, words: DeviceWords, rows: int, d: int) -> Any:
    """``rows``×d uniform signs as booleans (true for +1): bit j mod 32 of word ⌊j/32⌋."""
    xp, device = library.xp, library.device
    per_row = -(-d // 32)
    drawn = xp.reshape(xp.astype(words.take(rows * per_row), xp.int64), (rows, per_row))
    column = xp.arange(d, dtype=xp.int64, device=device)
    spread = xp.take(drawn, column // 32, axis=1)
    return ((spread >> (column % 32)) & 1) == 1


def side_signs(library: ArrayLibrary, words: DeviceWords, strict: Any, d: int) -> Any:
    """One sign vector s per row (booleans, true for +1): uniform on {Σ s > 0} where
    ``strict``, else uniform on {Σ s ≥ 0} (module docstring)."""
    xp, device = library.xp, library.device
    n = int(strict.shape[0])
    pending = xp.arange(n, dtype=xp.int64, device=device)
    found_rows: list[Any] = []
    found_signs: list[Any] = []
    while int(pending.shape[0]):
        m = int(pending.shape[0])
        plus = _signs(library, words, m * CANDIDATES, d)  # candidate c of row i: row i·C + c
        total = 2 * xp.sum(xp.astype(plus, xp.int64), axis=1) - d
        plus = plus != (total < 0)[:, None]  # negated when Σ s < 0
        on_plane = xp.reshape(total == 0, (m, CANDIDATES))
        if d % 2 == 0:
            coin = xp.reshape(
                (xp.astype(words.take(m * CANDIDATES), xp.int64) >> 31) == 1, (m, CANDIDATES)
            )
            strict_rows = xp.take(strict, pending)[:, None]
            keep = xp.where(strict_rows, xp.logical_not(on_plane), on_plane | coin)
        else:  # Σ s is odd: never on the plane
            keep = xp.logical_not(on_plane)
        first = xp.argmax(xp.astype(keep, xp.int8), axis=1)  # the first acceptable candidate
        done = xp.any(keep, axis=1)
        chosen = xp.arange(m, dtype=xp.int64, device=device) * CANDIDATES + xp.astype(
            first, xp.int64
        )
        found_rows.append(pending[done])
        found_signs.append(xp.take(plus, chosen[done], axis=0))
        pending = pending[xp.logical_not(done)]
    order = xp.argsort(xp.concat(found_rows))
    return xp.take(xp.concat(found_signs, axis=0), order, axis=0)


def duchi_multi_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    dimension: int,
    units: StandardUnits,
    reports: tuple[float, float],
    heads_probability: float,
    heads_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Reports of rows of ``dimension`` values (shape (..., d), on their device): each
    coordinate ``reports[1]`` (centre + scale·B_d) or ``reports[0]``; float64, same shape."""
    xp, device = library.xp, library.device
    require_64_bit(
        library, owner=owner, field=field, needs="the exact law needs float64 and 64-bit integers"
    )  # decided by the library, before values
    words = device_words(library, rng, owner=owner)
    d = dimension
    if values.ndim < 1 or values.shape[-1] != d:
        raise InvalidData(
            f"{owner}: {field} must have {d} columns (one row per user), got shape "
            f"{tuple(values.shape)}",
            field=field,
        )
    x = reals_within(library, values, units.lower, units.upper, owner=owner, field=field)
    t = xp.reshape(
        xp.clip((x - units.centre) / units.scale, -1.0, 1.0), (-1, d)
    )  # the CPU's, op for op
    n = int(t.shape[0])
    drawn = xp.reshape(words.take(2 * n * d), (n, d, 2))
    up = uniform_53(xp, drawn[..., 0], drawn[..., 1]) < (1.0 + t) / 2.0
    coin = xp.reshape(words.take(2 * n), (n, 2))
    if words.secure:
        heads = below_64(xp, coin[:, 0], coin[:, 1], heads_threshold64)
    else:
        heads = uniform_53(xp, coin[:, 0], coin[:, 1]) < heads_probability
    side = side_signs(library, words, heads, d)
    plus = up == (side == heads[:, None])  # v∘s for heads, v∘(−s) for tails
    minus_report, plus_report = (
        xp.asarray(report, dtype=xp.float64, device=device) for report in reports
    )
    return xp.reshape(xp.where(plus, plus_report, minus_report), tuple(values.shape))

"""Accuracy before spending: a query's cost, noise and error bound, known before any data is read.

Every central query can say, from its parameters alone, what it will cost, which noise it will
add and how far each released value may be from the exact (clamped, bounded) answer:
``query.accuracy(alpha)`` returns an :class:`Accuracy` whose ``half_width`` h satisfies

    P[ |released − exact| ≤ h ] ≥ 1 − α    for each released value,

computed from the exact distribution of the noise the release will add in the chosen
randomness mode (:class:`~dpkit_central._noise.AdditiveNoise`: fast-mode Laplace, Gaussian and
geometric noise, and in secure mode the discrete lattice noise with its rounding). Like
OpenDP's ``summarize_polars_measurement``, it needs no data and spends nothing; ``dpkit run
--plan SPEC`` prints it for every query of a spec.

Two statistics are not answer + noise:

* the **mean** is a ratio of a noisy centred sum and a noisy count; its ``parts`` give both
  half-widths, each at level 1 − α/2, so that both hold at once with probability ≥ 1 − α
  (union bound); for a group with n records the mean's error is then at most
  (h_S + h_C·(U − L)/2)/(n − h_C) when n > h_C (:meth:`Accuracy.mean_error`);
* the **quantile** is chosen by the exponential mechanism; in secure mode its output is one of
  the m ≤ 2³⁰ + 1 lattice points, so its rank is within (2/ε)(ln m + ln(1/α)) of the best
  achievable rank with probability ≥ 1 − α (Dwork & Roth 2014, Theorem 3.11), reported in
  ``unit="ranks"``. Fast mode samples a continuous density whose guarantee depends on the gaps
  between data values, so no data-free bound is reported there.
"""

from __future__ import annotations

from typing import Any

import attrs

from dpkit.plugin import InvalidParameter, PrivacyEvent, resolve_rng
from dpkit_central._noise import NOISE_INTERVAL, AdditiveNoise
from dpkit_central.intervals import MEAN_INTERVAL

__all__ = ["MEAN_ERROR_AT", "RANK_INTERVAL", "Accuracy", "check_alpha", "mode_of"]

#: Group sizes at which a plan states a mean's error bound (:meth:`Accuracy.mean_error`).
MEAN_ERROR_AT = (100, 1_000, 10_000, 100_000)

#: How a quantile's interval is given before the release (:mod:`dpkit_central.intervals`).
RANK_INTERVAL = (
    "exponential mechanism's rank guarantee (Dwork & Roth 2014, Theorem 3.11): the released "
    "value's rank is within the half-width of the best achievable; no interval in the value's "
    "units follows from public quantities"
)


def check_alpha(alpha: Any, owner: str) -> float:
    """α as a float in (0, 1), or an :class:`~dpkit.InvalidParameter` naming it."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise InvalidParameter("alpha", alpha, "a real number in (0, 1)", owner=owner)
    return float(alpha)


def mode_of(rng: Any) -> Any:
    """A stand-in random source of the same mode as ``rng`` (never drawn from): the noise a
    release adds depends on the mode only."""
    return resolve_rng(rng, owner="accuracy")[0]


@attrs.frozen
class Accuracy:
    """A query's cost, noise and error bound at confidence 1 − α, before any data is read.

    Attributes:
        query: the statistic (``"count"``, ``"sum"``, ...).
        privacy: the accounting event the release will spend.
        confidence: 1 − α.
        noise: the noise added to each released value (None for mean and quantile).
        half_width: h with P[|released − exact| ≤ h] ≥ ``confidence`` for each released value,
            in the statistic's units (``unit="value"``) or in ranks (``unit="ranks"``); None
            where no data-free bound exists.
        unit: ``"value"`` or ``"ranks"``.
        parts: named parts with their own accuracy (the mean's centred sum and count, each at
            confidence 1 − α/2).
        selection: for private group keys, the ids a group needs to be released with
            probability ≥ ``confidence`` (None otherwise).
        cells: the number of released values per group (1, or a histogram's cells).
        half_range: the mean's (U − L)/2 (for :meth:`mean_error`).
    """

    query: str
    privacy: PrivacyEvent
    confidence: float
    noise: AdditiveNoise | None = None
    half_width: float | None = None
    unit: str = "value"
    parts: tuple[tuple[str, Accuracy], ...] = ()
    selection: int | None = None
    cells: int = 1
    half_range: float | None = None

    def mean_error(self, records: float) -> float | None:
        """The mean's error bound (h_S + h_C·r)/(n − h_C) for a group of n = ``records``
        records, with r = ``half_range`` = (U − L)/2: when both parts are within their
        half-widths, |S̃/C̃ − S/n| ≤ (|S̃ − S| + |S/n|·|C̃ − n|)/C̃ and |S/n| ≤ r. None when
        n − h_C < 1 or this is not a mean."""
        parts = dict(self.parts)
        if self.half_range is None or "centred_sum" not in parts or "count" not in parts:
            return None
        h_sum, h_count = parts["centred_sum"].half_width, parts["count"].half_width
        if h_sum is None or h_count is None or records - h_count < 1:
            return None
        return (h_sum + h_count * self.half_range) / (records - h_count)

    @property
    def method(self) -> str:
        """How the released values' intervals are computed (as their result documents say)."""
        if self.half_range is not None:
            return MEAN_INTERVAL
        if self.unit == "ranks":
            return RANK_INTERVAL
        return NOISE_INTERVAL

    def describe(self) -> str:
        """The error bound in words: ``±30`` or ``±12 ranks`` (or the parts of a mean)."""
        if self.half_width is not None:
            suffix = " ranks" if self.unit == "ranks" else ""
            return f"±{_short(self.half_width)}{suffix}"
        if self.parts:
            return ", ".join(f"{name} {part.describe()}" for name, part in self.parts)
        return "n/a"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (used by ``dpkit run --plan --json``)."""
        out: dict[str, Any] = {
            "statistic": self.query,
            "confidence": self.confidence,
            "half_width": self.half_width,
            "unit": self.unit,
            "cells": self.cells,
            "noise": None
            if self.noise is None
            else {
                "distribution": self.noise.kind,
                "scale": self.noise.scale,
                "variance": self.noise.variance,
            },
        }
        if self.parts:
            out["parts"] = {name: part.as_dict() for name, part in self.parts}
        if self.half_range is not None:
            found = {n: self.mean_error(n) for n in MEAN_ERROR_AT}
            out["mean_error"] = {str(n): e for n, e in found.items() if e is not None}
        out["method"] = self.method
        if self.selection is not None:
            out["ids_for_release"] = self.selection
        return out


def _short(value: float) -> str:
    """A number in at most 4 significant digits (``12.35``, ``1.235e+07``)."""
    return f"{value:.4g}"

"""A noisy-SGD training schedule as accounting events: epochs, batch size and dataset size.

DP-SGD adds Gaussian noise of multiplier σ (noise std / clipping norm C) to each step's sum of
clipped per-example gradients. How the batches are drawn decides the accounting:

``"poisson"``
    Each step keeps every record independently with probability q = batch_size/dataset_size
    (the expected batch size is ``batch_size``): each step is a Poisson-subsampled Gaussian
    under add/remove neighbours (Abadi et al. 2016; Mironov, Talwar & Zhang 2019), accounted
    as :class:`~dpkit.privacy.SubsampledDP` at that q. An epoch is ⌈N/B⌉ steps (a data loader
    iterates ⌈N/B⌉ batches, the last partial one included), so ``epochs`` epochs are
    epochs·⌈N/B⌉ steps — for 3 epochs of 256 out of 60 000, 3·235 = 705 (the 703 of
    ⌊3N/B⌋ would under-count a loop that runs whole epochs).
``"shuffle"``
    Each epoch shuffles the records and cuts them into fixed-size batches, so every record is
    in exactly one batch per epoch. No amplification is credited: shuffled batches are not
    Poisson subsampling, and accounting them as if they were can under-state ε by a wide
    margin (Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang 2024, "How Private are
    DP-SGD Implementations?"). The guarantee is for *replace-one* neighbours (the dataset
    size is public): the permutation does not depend on the data, and given it the replaced
    record changes one step's gradient sum by at most 2C in L2 norm, while every other step has
    the same conditional distribution on both sides. So each epoch is one Gaussian release of
    multiplier σ/2, and ``epochs`` epochs compose adaptively (:class:`~dpkit.privacy.GaussianDP`
    at σ/2, ``epochs`` times; Dong, Roth & Su 2022, Corollary 3.3).

Rates may be written as simple fractions (``"256/60000"``): :func:`parse_rate`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import attrs

from dpkit.errors import InvalidParameter
from dpkit.privacy import GaussianDP, PrivacyEvent, SubsampledDP

__all__ = ["BATCHINGS", "Schedule", "parse_rate"]

#: How a training loop draws its batches.
BATCHINGS = ("poisson", "shuffle")

_FRACTION = re.compile(
    r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*/\s*"
    r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*$"
)


def parse_rate(value: Any, *, name: str = "sampling_rate", owner: str = "calibrate") -> float:
    """A sampling rate in (0, 1] given as a number, a :class:`~fractions.Fraction` or a simple
    fraction in text (``"256/60000"``), as the float at or just above its exact value (a rate
    rounded up never under-states the privacy loss)."""
    exact: Fraction | None = None
    if isinstance(value, bool):
        exact = None
    elif isinstance(value, (int, Fraction)) or (isinstance(value, float) and math.isfinite(value)):
        exact = Fraction(value)
    elif isinstance(value, str):
        match = _FRACTION.match(value)
        try:
            if match:
                denominator = Fraction(match[2])
                exact = Fraction(match[1]) / denominator if denominator else None
            else:
                exact = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            exact = None
    if exact is None or not 0 < exact <= 1:
        raise InvalidParameter(
            name, value, "a number in (0, 1], or a fraction such as '256/60000'", owner=owner
        )
    rate = float(exact)
    return math.nextafter(rate, 2.0) if Fraction(rate) < exact else rate


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameter(name, value, "an integer >= 1", owner="calibrate")
    return value


def _epochs(value: Any) -> int:
    return _whole(value, "epochs")


def _batch_size(value: Any) -> int:
    return _whole(value, "batch_size")


def _dataset_size(value: Any) -> int:
    return _whole(value, "dataset_size")


@attrs.frozen
class Schedule:
    """``epochs`` passes over ``dataset_size`` records in batches of ``batch_size`` (the
    expected size under Poisson sampling), drawn as ``batching`` says (module docstring)."""

    epochs: int = attrs.field(converter=_epochs)
    batch_size: int = attrs.field(converter=_batch_size)
    dataset_size: int = attrs.field(converter=_dataset_size)
    batching: str = "poisson"

    def __attrs_post_init__(self) -> None:
        if self.batching not in BATCHINGS:
            raise InvalidParameter(
                "batching", self.batching, "one of " + ", ".join(BATCHINGS), owner="calibrate"
            )
        if self.batch_size > self.dataset_size:
            raise InvalidParameter(
                "batch_size", self.batch_size, "at most dataset_size", owner="calibrate"
            )

    @property
    def batches_per_epoch(self) -> int:
        """⌈N/B⌉: the batches one epoch iterates, the last partial one included."""
        return -(-self.dataset_size // self.batch_size)

    @property
    def steps(self) -> int:
        """The gradient steps the schedule runs: epochs·⌈N/B⌉."""
        return self.epochs * self.batches_per_epoch

    @property
    def sampling_rate(self) -> Fraction:
        """q = B/N, exactly (Poisson sampling's rate; the share of a shuffled batch)."""
        return Fraction(self.batch_size, self.dataset_size)

    @property
    def neighbours(self) -> str:
        """The neighbouring relation the accounting is for."""
        return "add/remove one record" if self.batching == "poisson" else "replace one record"

    def events(self, noise_multiplier: float, delta: float) -> tuple[PrivacyEvent, int]:
        """The schedule as ``(event, count)`` for the accountant (module docstring)."""
        gaussian = GaussianDP(noise_multiplier=noise_multiplier, delta=delta)
        if self.batching == "shuffle":
            return GaussianDP(noise_multiplier=noise_multiplier / 2, delta=delta), self.epochs
        rate = parse_rate(self.sampling_rate)
        if rate == 1:
            return gaussian, self.steps
        return SubsampledDP(gaussian, rate), self.steps

    def describe(self) -> str:
        """One line: the batching, the rate and the step count, as they are accounted."""
        q = self.sampling_rate
        steps = (
            f"{self.steps} steps ({self.epochs} epoch{'s' if self.epochs != 1 else ''} of "
            f"⌈{self.dataset_size}/{self.batch_size}⌉ = {self.batches_per_epoch} batches)"
        )
        if self.batching == "poisson":
            return (
                f"Poisson sampling at q = {self.batch_size}/{self.dataset_size} = {float(q):.6g}, "
                f"{steps}; neighbours: {self.neighbours}"
            )
        return (
            f"shuffled batches, {steps}, accounted as {self.epochs} Gaussian release"
            f"{'s' if self.epochs != 1 else ''} at σ/2 (one batch per record per epoch, no "
            f"amplification); neighbours: {self.neighbours}"
        )

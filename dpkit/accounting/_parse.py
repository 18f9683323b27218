"""The event syntax of ``dpkit account``: ``NAME(key=value, ...)*COUNT``, parsed without eval.

>>> parse_event("subsampled_gaussian(noise_multiplier=1.0,sampling_rate=0.01)*1000", delta=1e-5)
(SubsampledDP(event=GaussianDP(noise_multiplier=1.0, delta=1e-05), sampling_rate=0.01, scheme='poisson'), 1000)

A sampling rate may be a simple fraction, ``sampling_rate=256/60000`` (rounded up to a float).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from dpkit.accounting.training import parse_rate
from dpkit.errors import DPKitError, InvalidParameter
from dpkit.privacy import (
    SCHEMES,
    ApproximateDP,
    BoundedRangeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["EVENT_KINDS", "EventSyntaxError", "open_parameter", "parse_event"]


class EventSyntaxError(DPKitError, ValueError):
    """An accounting event could not be parsed; the message shows where and what is allowed."""

    code = "invalid_event"

    def __init__(self, text: str, problem: str):
        self.text = text
        self.problem = problem
        super().__init__(
            f"cannot read event {text!r}: {problem}. Write NAME(key=value,...)*COUNT, e.g. "
            "'gaussian(noise_multiplier=1.0)*100'; NAME is one of " + ", ".join(EVENT_KINDS)
        )


def _gaussian(p: dict[str, float], delta: float) -> PrivacyEvent:
    return GaussianDP(noise_multiplier=p["noise_multiplier"], delta=delta)


_SAMPLING = ("sampling_rate", "scheme")

#: name → (required keys, optional keys, constructor(params, delta))
EVENT_KINDS: dict[
    str, tuple[tuple[str, ...], tuple[str, ...], Callable[[dict[str, Any], float], PrivacyEvent]]
] = {
    "gaussian": (("noise_multiplier",), _SAMPLING, _gaussian),
    "subsampled_gaussian": (("noise_multiplier", "sampling_rate"), ("scheme",), _gaussian),
    "laplace": (("epsilon",), _SAMPLING, lambda p, d: LaplaceDP(epsilon=p["epsilon"])),
    "rr": (
        ("epsilon",),
        _SAMPLING,
        lambda p, d: RandomizedResponseDP(epsilon=p["epsilon"]),
    ),
    "krr": (
        ("epsilon", "k"),
        _SAMPLING,
        lambda p, d: RandomizedResponseDP(epsilon=p["epsilon"], k=p["k"]),
    ),
    "pure": (("epsilon",), _SAMPLING, lambda p, d: PureDP(epsilon=p["epsilon"])),
    "bounded_range": (
        ("epsilon",),
        _SAMPLING,
        lambda p, d: BoundedRangeDP(epsilon=p["epsilon"]),
    ),
    "approx": (
        ("epsilon", "delta"),
        _SAMPLING,
        lambda p, d: ApproximateDP(epsilon=p["epsilon"], delta=p["delta"]),
    ),
}

#: The parameter an event may leave out when ``dpkit account --calibrate`` solves for it.
_OPEN = {
    "gaussian": "noise_multiplier",
    "subsampled_gaussian": "noise_multiplier",
    "laplace": "epsilon",
    "rr": "epsilon",
    "pure": "epsilon",
    "bounded_range": "epsilon",
}

_EVENT = re.compile(
    r"^\s*(?P<name>[a-z_][a-z0-9_]*)\s*(?:\((?P<args>[^()]*)\))?\s*(?:\*\s*(?P<count>[^\s*]+))?\s*$"
)
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def _number(text: str, key: str, whole: str) -> float | int | str:
    value = text.strip()
    if key == "scheme":
        if value not in SCHEMES:
            raise EventSyntaxError(whole, f"scheme={value!r} is not one of {', '.join(SCHEMES)}")
        return value
    if key == "sampling_rate" and "/" in value:  # a simple fraction: 256/60000
        try:
            return parse_rate(value)
        except InvalidParameter:
            raise EventSyntaxError(
                whole, f"{key}={value!r} is not a number or a fraction in (0, 1]"
            ) from None
    if not _NUMBER.match(value):
        raise EventSyntaxError(whole, f"{key}={value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise EventSyntaxError(whole, f"{key}={value!r} is not finite")
    if key in ("k",):
        if not number.is_integer():
            raise EventSyntaxError(whole, f"{key}={value!r} must be an integer")
        return int(number)
    return number


def parse_event(
    text: str, *, delta: float, fill: dict[str, float] | None = None
) -> tuple[PrivacyEvent, int]:
    """Parse one EVENT into ``(event, count)``.

    A Gaussian is reported at ``delta``; ``fill`` supplies parameters written without a value
    (as ``--calibrate`` does while it searches).
    """
    match = _EVENT.match(text)
    if match is None:
        raise EventSyntaxError(text, "it does not have the form NAME(key=value,...)*COUNT")
    name = match["name"]
    if name not in EVENT_KINDS:
        raise EventSyntaxError(text, f"unknown event {name!r}")
    required, optional, make = EVENT_KINDS[name]
    params: dict[str, Any] = {}
    args = (match["args"] or "").strip()
    for part in filter(None, (piece.strip() for piece in args.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise EventSyntaxError(text, f"{part!r} is not key=value")
        if key not in required + optional:
            allowed = ", ".join(required + optional)
            raise EventSyntaxError(text, f"{name} has no parameter {key!r} (it takes {allowed})")
        if key in params:
            raise EventSyntaxError(text, f"{key} is given twice")
        params[key] = _number(value, key, text)
    for key, value in (fill or {}).items():
        if key in required:
            params.setdefault(key, value)
    missing = [key for key in required if key not in params]
    if missing:
        raise EventSyntaxError(text, f"{name} needs {', '.join(missing)}")
    count_text = match["count"]
    count = 1
    if count_text is not None:
        if not re.fullmatch(r"\d+", count_text):
            raise EventSyntaxError(text, f"count {count_text!r} is not a whole number >= 0")
        count = int(count_text)
    if "scheme" in params and "sampling_rate" not in params:
        raise EventSyntaxError(text, "scheme= needs sampling_rate=")
    event = make(params, delta)  # parameter domains raise InvalidParameter
    if "sampling_rate" in params:
        event = SubsampledDP(event, params["sampling_rate"], params.get("scheme", "poisson"))
    return event, count


def open_parameter(text: str) -> str | None:
    """The parameter EVENT leaves out for calibration (a Gaussian without its noise
    multiplier, a pure event without its ε), or None."""
    match = _EVENT.match(text)
    if not match or match["name"] not in _OPEN:
        return None
    wanted = _OPEN[match["name"]]
    given = {part.partition("=")[0].strip() for part in (match["args"] or "").split(",")}
    return None if wanted in given else wanted

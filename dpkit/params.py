"""Declared parameter domains for mechanisms.

A mechanism declares each parameter with :func:`parameter`, giving its domain. The domain is
the single source of truth for validation (with messages naming the mechanism, the parameter,
the value and the allowed range), for the JSON Schema of the parameters, for the test
harness's Hypothesis strategies (through ``typical``) and for ``dpkit mechanisms``.

>>> import attrs
>>> @attrs.frozen
... class Coin:
...     name = "coin"
...     epsilon: float = parameter(Real(low=0, low_open=True), doc="privacy loss")
>>> Coin(epsilon=-1)
Traceback (most recent call last):
...
dpkit.errors.InvalidParameter: coin: epsilon=-1 is not allowed; epsilon must be a finite real number > 0
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from dpkit.errors import InvalidParameter

__all__ = [
    "BOUND",
    "CENTRAL_EPSILON",
    "DELTA",
    "EPSILON",
    "MAX_FLOAT",
    "SENSITIVITY",
    "Boolean",
    "Choice",
    "Integer",
    "ParameterDomain",
    "ParameterSpec",
    "Real",
    "Sequence_",
    "parameter",
    "parameter_specs",
]


class ParameterDomain:
    """The set of values a parameter may take; subclasses validate and normalise."""

    def convert(self, value: Any) -> Any:
        """Return the normalised value, or raise ``ValueError`` with no message if not allowed."""
        raise NotImplementedError

    def describe(self) -> str:
        """A phrase completing 'must be ...'."""
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of the allowed values."""
        raise NotImplementedError


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: The largest finite float: the bounds of a JSON Schema for an unbounded real, so that the
#: schema refuses what no float can hold (a JSON integer such as 10**400) as the domain does.
MAX_FLOAT = sys.float_info.max


@attrs.frozen
class Real(ParameterDomain):
    """A real number in an interval; NaN and infinities are never allowed (a value must be a
    finite float, whatever the bounds).

    The bounds are checked on the value as given (Python compares an int with a float
    exactly, as a JSON Schema validator does) and again on its float, so the domain and its
    schema agree on every number a JSON document can hold.
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def convert(self, value: Any) -> float:
        if not _is_real(value):
            raise ValueError
        try:
            x = float(value)
        except OverflowError:  # an int beyond the float range
            raise ValueError from None
        if math.isnan(x) or math.isinf(x):
            raise ValueError
        for v in (value, x):
            if v < self.low or (self.low_open and v == self.low):
                raise ValueError
            if v > self.high or (self.high_open and v == self.high):
                raise ValueError
        return x

    def describe(self) -> str:
        parts = []
        if self.low > -math.inf:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high < math.inf:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return "a finite real number" + (" " + " and ".join(parts) if parts else "")

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "number"}
        if self.low > -math.inf:
            schema["exclusiveMinimum" if self.low_open else "minimum"] = self.low
        else:
            schema["minimum"] = -MAX_FLOAT
        if self.high < math.inf:
            schema["exclusiveMaximum" if self.high_open else "maximum"] = self.high
        else:
            schema["maximum"] = MAX_FLOAT
        return schema


@attrs.frozen
class Integer(ParameterDomain):
    """An integer in a closed range; integral floats such as ``4.0`` are accepted as ``4``."""

    low: int | None = None
    high: int | None = None

    def convert(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError
        if isinstance(value, numbers.Integral):
            n = int(value)
        else:
            x = float(value)
            if not math.isfinite(x) or x != math.floor(x):
                raise ValueError
            n = int(x)
        if (self.low is not None and n < self.low) or (self.high is not None and n > self.high):
            raise ValueError
        return n

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"an integer in [{self.low}, {self.high}]"
        if self.low is not None:
            return f"an integer >= {self.low}"
        if self.high is not None:
            return f"an integer <= {self.high}"
        return "an integer"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        if self.low is not None:
            schema["minimum"] = self.low
        if self.high is not None:
            schema["maximum"] = self.high
        return schema


@attrs.frozen
class Boolean(ParameterDomain):
    """``True`` or ``False`` (not 0/1)."""

    def convert(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError
        return value

    def describe(self) -> str:
        return "true or false"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


@attrs.frozen
class Choice(ParameterDomain):
    """One of a fixed set of strings."""

    options: tuple[str, ...]

    def convert(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.options:
            raise ValueError
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(map(repr, self.options))

    def json_schema(self) -> dict[str, Any]:
        return {"enum": list(self.options)}


def _label(item: Any) -> Any:
    """A label as kept: a string, or an integer (an integral float such as ``2.0`` is the
    integer 2, as JSON Schema's ``integer`` type reads it)."""
    if isinstance(item, bool):
        raise ValueError
    if isinstance(item, str):
        return item
    if isinstance(item, numbers.Integral):
        return int(item)
    if isinstance(item, float) and math.isfinite(item) and item.is_integer():
        return int(item)
    raise ValueError


@attrs.frozen
class Sequence_(ParameterDomain):  # noqa: N801 - avoids shadowing typing.Sequence
    """A non-empty sequence of distinct hashable labels (strings or integers), kept as a tuple;
    with ``uniform``, all strings or all integers."""

    min_length: int = 1
    uniform: bool = False

    def convert(self, value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, bytes)):
            raise ValueError
        if not isinstance(value, Sequence):
            if not hasattr(value, "tolist"):
                raise ValueError
            value = value.tolist()
        items = tuple(_label(item) for item in value)
        if len(items) < self.min_length:
            raise ValueError
        if len(set(items)) != len(items):
            raise ValueError
        if self.uniform and len({isinstance(item, str) for item in items}) > 1:
            raise ValueError
        return items

    def describe(self) -> str:
        kinds = "all strings or all integers" if self.uniform else "strings or integers"
        return f"a list of at least {self.min_length} distinct labels ({kinds})"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "array",
            "items": {"type": ["string", "integer"]},
            "minItems": self.min_length,
            "uniqueItems": True,
        }
        if self.uniform:
            schema["anyOf"] = [{"items": {"type": "string"}}, {"items": {"type": "integer"}}]
        return schema


#: ε of a mechanism. Above 700, e^ε (in every RR probability, exponential-mechanism weight and
#: privacy-loss bound) is within e^{9.78} of float overflow (ln of the largest double is
#: 709.78); below 1e-12 the privacy signal e^ε − 1 ≈ ε is lost in rounding next to 1 (2.2e-16)
#: and scales Δ/ε, variances 1/ε² overflow for large Δ. Such ε give no meaningful release.
EPSILON = Real(low=1e-12, high=700.0)

#: ε of a central mechanism whose derived quantities are only Δ/ε and e^{−ε} (Laplace,
#: Gaussian, geometric, selection): large ε is a legitimate "almost no noise" setting there, and
#: ε ≤ 1e12 keeps ε/Δ and ε·score finite; below 1e-12 as for :data:`EPSILON`.
CENTRAL_EPSILON = Real(low=1e-12, high=1e12)

#: A sensitivity Δ: with ε in :data:`EPSILON`, the noise scale Δ/ε lies in [1e-103, 1e112] and
#: its square (a variance) in [1e-206, 1e224], all finite, non-zero floats.
SENSITIVITY = Real(low=1e-100, high=1e100)

#: δ of a Gaussian: ln(1.25/δ) and the tail Φ(−x) at δ stay well inside the float range.
DELTA = Real(low=1e-200, high=1.0, high_open=True)

#: A clamping bound of a central query: |bound| ≤ 1e100, so ranges (upper − lower) and
#: sensitivities derived from them stay finite (sums of 2^64 such values still fit).
BOUND = Real(low=-1e100, high=1e100)


@attrs.frozen
class ParameterSpec:
    """What a mechanism declares about one parameter (stored in the attrs field metadata)."""

    domain: ParameterDomain
    doc: str
    typical: tuple[float, float] | None = None
    optional: bool = False
    given_when: tuple[str, Any] | None = None


_METADATA_KEY = "dpkit"
_NO_DEFAULT: Any = attrs.NOTHING


def parameter(
    domain: ParameterDomain,
    *,
    doc: str,
    default: Any = _NO_DEFAULT,
    typical: tuple[float, float] | None = None,
    optional: bool = False,
    given_when: tuple[str, Any] | None = None,
) -> Any:
    """Declare a mechanism parameter as an attrs field validated against ``domain``.

    ``typical`` is a range of ordinary values that the test harness draws from; ``optional``
    marks a parameter whose default ``None`` means "not given" (for alternative
    parameterisations, such as randomized response by ``epsilon`` or by ``keep``);
    ``given_when=("noise", "gaussian")`` declares an optional parameter that is given exactly
    when another parameter has that value (δ with Gaussian noise only), which the spec schema
    states as a rule (the class still checks it).
    """

    def convert(value: Any, self: Any, field: attrs.Attribute[Any]) -> Any:
        if optional and value is None:
            return None
        try:
            return domain.convert(value)
        except (ValueError, TypeError, OverflowError):
            owner = getattr(type(self), "name", type(self).__name__)
            raise InvalidParameter(field.name, value, domain.describe(), owner=owner) from None

    return attrs.field(
        default=default,
        converter=attrs.Converter(convert, takes_self=True, takes_field=True),
        metadata={_METADATA_KEY: ParameterSpec(domain, doc, typical, optional, given_when)},
    )


def parameter_specs(cls: type) -> dict[str, ParameterSpec]:
    """The declared parameters of an attrs class, in field order."""
    return {
        f.name: f.metadata[_METADATA_KEY] for f in attrs.fields(cls) if _METADATA_KEY in f.metadata
    }

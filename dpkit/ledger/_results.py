"""How the ledger records a release: its privacy event and its released result as JSON.

A release's accounting event is stored as a JSON record of its fields (:func:`event_record`),
and its released value as a JSON document (:func:`stored_result`): arrays as lists, attrs values
as dicts, exact fractions as text — or, for a value too large to keep in full (millions of
local reports), its shape or size and SHA-256, so that the ledger stays small and still pins
down what was released.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.privacy import PrivacyEvent

__all__ = ["MAX_STORED_RESULT", "event_record", "jsonable", "stored_result"]


def event_record(event: PrivacyEvent) -> dict[str, Any]:
    """The JSON record of an accounting event: its type's name and its fields, a composite's
    parts as records of their own."""
    record: dict[str, Any] = {"type": type(event).name}
    if attrs.has(type(event)):
        for field in attrs.fields(type(event)):  # type: ignore[arg-type]
            value = getattr(event, field.name)
            if isinstance(value, PrivacyEvent):
                value = event_record(value)
            elif isinstance(value, tuple) and all(isinstance(v, PrivacyEvent) for v in value):
                value = [event_record(v) for v in value]  # a composite's parts
            record[field.name] = value
    return record


#: Results larger than this (as JSON) are stored in the ledger as a digest, not in full.
MAX_STORED_RESULT = 1 << 20


def jsonable(value: Any) -> Any:
    """A JSON-ready form of a released value (arrays as lists, attrs values as dicts)."""
    if isinstance(value, PrivacyEvent):
        return event_record(value)
    if attrs.has(type(value)):
        return {
            f.name: jsonable(getattr(value, f.name))
            for f in attrs.fields(type(value))
            if not f.name.startswith("_")
        }
    if isinstance(value, np.ndarray):
        if value.nbytes > MAX_STORED_RESULT:  # e.g. millions of local reports: never list them
            return _digest(value)
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, Fraction):
        return str(value)
    return value


def _digest(array: NDArray[Any]) -> dict[str, Any]:
    """A large array as its shape, dtype and the SHA-256 of its bytes (C order)."""
    data = np.ascontiguousarray(array)
    # Hash the buffer itself: no copy of millions of reports.
    raw = data.data.cast("B") if data.dtype != object else repr(data.tolist()).encode()
    digest = hashlib.sha256(raw)
    return {
        "stored": "digest",
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "sha256": digest.hexdigest(),
    }


def stored_result(value: Any) -> Any:
    """What the ledger keeps of a released value: the value itself, or, for an array over
    :data:`MAX_STORED_RESULT` bytes (e.g. millions of local reports) or a document over that
    size as JSON, its shape or size and SHA-256."""
    document = jsonable(value)
    text = json.dumps(document, default=str, allow_nan=True)
    if len(text) <= MAX_STORED_RESULT:
        return document
    return {
        "stored": "digest",
        "bytes": len(text),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }

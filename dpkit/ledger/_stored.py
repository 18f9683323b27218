"""Reading the ledger's stored text back: exact fractions, metadata values and JSON columns.

Every value of a ledger is stored as text (:mod:`dpkit.ledger._schema`). A value that does not
read back as what it must be raises :class:`~dpkit.ledger.LedgerCorrupt` naming the ledger,
where the value is and what was expected, and how to check the whole ledger.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from dpkit.ledger._errors import VERIFY_HINT, LedgerCorrupt

#: How many entries a read of every entry (verification, migration) holds in memory at once.
READ_BATCH = 5000

__all__ = [
    "READ_BATCH",
    "compact",
    "damaged",
    "load_json",
    "meta_fraction",
    "meta_value",
    "parse_fraction",
]


def parse_fraction(text: Any) -> Fraction | None:
    """An exact fraction from its stored text (``"1/10"``), or None if it is not one."""
    if not isinstance(text, str):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def damaged(path: str, key: str, value: Any, allowed: str) -> LedgerCorrupt:
    """The error for metadata ``key`` of the ledger at ``path`` stored as ``value``."""
    return LedgerCorrupt(
        f"ledger {path} has damaged metadata: {key}={value!r}, expected {allowed}; "
        + VERIFY_HINT.format(path=path),
        path=path,
    )


def meta_value(path: str, meta: dict[str, str], key: str, allowed: str) -> str:
    if key not in meta:
        raise damaged(path, key, "missing", allowed)
    return meta[key]


def meta_fraction(path: str, meta: dict[str, str], key: str) -> Fraction:
    """A metadata amount (a budget or a spent total): an exact fraction >= 0."""
    value = parse_fraction(meta_value(path, meta, key, "a fraction such as '1/10'"))
    if value is None or value < 0:
        raise damaged(path, key, meta[key], "an exact fraction >= 0 such as '1/10'")
    return value


def load_json(path: str, seq: Any, column: str, text: Any) -> Any:
    """A JSON column of entry ``seq`` (None if NULL); :class:`LedgerCorrupt` if it does not
    parse."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise LedgerCorrupt(
            f"ledger {path} has damaged {column} JSON in entry {seq}: "
            f"{text!r:.80}; " + VERIFY_HINT.format(path=path),
            path=path,
        ) from None


def compact(document: Any) -> str:
    """A JSON document as the ledger stores it in its metadata and columns (sorted keys, no
    spaces), so that equal documents are equal texts."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"))

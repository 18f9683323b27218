"""Strict JSON for the documents a user gives dpkit: a key repeated in an object is refused.

Python's :func:`json.loads` keeps the last of two equal keys, so ``{"budget": {"epsilon":
0.1}, "budget": {"epsilon": 0.9}}`` would be read — and charged — as ε = 0.9 while a reader of
the file sees 0.1 first. RFC 8259 (Section 4) leaves such a document's meaning to the parser;
dpkit gives it none. ``NaN``, ``Infinity`` and ``-Infinity``, which Python accepts but which
are not JSON numbers, are refused too. Either is a :class:`~dpkit.errors.SpecError` carrying
the JSON Pointer (RFC 6901) of the offending key or value, raised before any value of the
document is used.
"""

from __future__ import annotations

import json
from typing import Any

from dpkit.errors import SpecError

__all__ = ["loads"]


class _Repeated(dict[str, Any]):
    """An object in which ``key`` appeared more than once (found again by :func:`_problem`)."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str):
        super().__init__(pairs)
        self.key = key


class _NonFinite:
    """Where the text held ``NaN``, ``Infinity`` or ``-Infinity``."""

    def __init__(self, text: str):
        self.text = text


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Repeated(pairs, key)
        seen.add(key)
    return dict(pairs)


def _escape(part: Any) -> str:
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


def _problem(document: Any) -> SpecError | None:
    """The first repeated key or non-finite number in document order (an explicit stack: a
    deep document does not recurse)."""
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, _Repeated):
            error = SpecError(
                f"the key {node.key!r} appears more than once in one object; keys must be "
                "unique (which value would count?)",
                pointer=at + _escape(node.key),
                rule="unique_keys",
            )
            error.code = "duplicate_key"
            return error
        if isinstance(node, _NonFinite):
            error = SpecError(
                f"{node.text} is not a JSON number (RFC 8259 has no NaN or infinities)",
                pointer=at,
                rule="finite_numbers",
            )
            error.code = "invalid_json"
            return error
        if isinstance(node, dict):
            stack.extend((value, at + _escape(key)) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((value, f"{at}/{i}") for i, value in reversed(list(enumerate(node))))
    return None


def loads(text: str | bytes) -> Any:
    """Parse ``text`` as JSON, refusing repeated keys and non-finite numbers with a
    :class:`~dpkit.errors.SpecError` at their JSON Pointer (module docstring). Text that is not
    JSON at all raises :class:`json.JSONDecodeError` (a ``ValueError``), as :func:`json.loads`.
    """
    document = json.loads(text, object_pairs_hook=_object, parse_constant=_NonFinite)
    problem = _problem(document)
    if problem is not None:
        raise problem
    return document

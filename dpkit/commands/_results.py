"""Readable text for ``dpkit run``: a result document or a plan as aligned tables.

The JSON documents (``--json``) are the machine form; these tables show the same releases —
per query and group, the value ± the half-width of its interval, the noise and the cost —
and the same plans, for people.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from dpkit.commands._output import rounded, table

__all__ = ["format_plan", "format_result", "number"]


def number(value: Any) -> str:
    """A released number for reading: integers as they are, large values without decimals,
    others to four significant digits."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if abs(value) >= 1e5 or (value.is_integer() and abs(value) < 1e15):
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.4g}"


#: Characters a terminal acts on instead of showing (C0/C1 controls, bidirectional overrides).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _printable(value: Any) -> str:
    """A key or category as text a terminal shows as written: its control characters escaped
    (a key comes from the data; raw escape sequences could rewrite the table on screen)."""

    def escape(found: re.Match[str]) -> str:
        code = ord(found.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(escape, str(value))


def _cost(amount: dict[str, Any]) -> str:
    """A cost, rounded up (from its exact fields where the document has them)."""

    def value(name: str) -> Any:
        exact = amount.get(f"{name}_exact")
        return Fraction(exact) if isinstance(exact, str) else amount[name]

    text = f"ε={rounded(value('epsilon'))}"
    if amount.get("delta"):
        text += f", δ={rounded(value('delta'), 3)}"
    return text


def _at(values: Any, *index: int) -> Any:
    for i in index:
        if not isinstance(values, list):
            return None
        values = values[i]
    return values


def _cells(result: dict[str, Any]) -> Iterator[tuple[str, Any, Any, Any]]:
    """(label, value, lower, upper) for every released value of one result."""
    estimate = result["estimate"]
    interval = result.get("confidence_interval") or {}
    lower, upper = interval.get("lower"), interval.get("upper")
    categories = result.get("categories")
    keys = result.get("keys")
    if keys is not None:
        for i, key in enumerate(keys):
            group = ", ".join(_printable(k) for k in key)
            if categories:
                for j, category in enumerate(categories):
                    yield (
                        f"{group} / {_printable(category)}",
                        _at(estimate, i, j),
                        _at(lower, i, j),
                        _at(upper, i, j),
                    )
            else:
                yield group, _at(estimate, i), _at(lower, i), _at(upper, i)
        if not keys:
            yield "(no group released)", None, None, None
        return
    if categories and isinstance(estimate, list):
        for j, category in enumerate(categories):
            yield _printable(category), _at(estimate, j), _at(lower, j), _at(upper, j)
        return
    yield "", estimate, lower, upper


def _half(lower: Any, upper: Any) -> str:
    if not isinstance(lower, (int, float)) or not isinstance(upper, (int, float)):
        return ""
    return f"±{number((upper - lower) / 2.0)}"


def format_result(document: dict[str, Any]) -> str:
    """The releases of a ``dpkit run`` result document as a table, then the budget."""
    rows = []
    for result in document["results"]:
        interval = result.get("confidence_interval") or {}
        level = interval.get("level")
        noise = result.get("mechanism", {}).get("noise") or result["mechanism"]["name"]
        first = True
        for label, value, lower, upper in _cells(result):
            half = _half(lower, upper)
            if half and level is not None:
                half += f" ({level:.0%})"
            rows.append(
                [
                    result["query_id"] if first else "",
                    result["statistic"] if first else "",
                    label,
                    number(value),
                    half,
                    str(noise) if first else "",
                    _cost(result["spent"]) if first else "",
                ]
            )
            first = False
    text = table(rows, ["query", "statistic", "group", "value", "± error", "noise", "cost"])
    session = document["session"]
    spent, budget = session["spent"], session["budget"]
    remaining = session["remaining"]
    footer = (
        f"spent ε={spent['epsilon_exact']}, δ={spent['delta_exact']} of "
        f"ε={budget['epsilon_exact']}, δ={budget['delta_exact']} (exactly); remaining "
        f"ε={remaining['epsilon_exact']}, δ={remaining['delta_exact']}; ledger {session['ledger']}"
    )
    return f"{text}\n{footer}"


def _error(accuracy: dict[str, Any] | None) -> str:
    if accuracy is None:
        return "depends on n (local estimate)"
    half = accuracy.get("half_width")
    if half is not None:
        text = f"±{number(half)}" + (" ranks" if accuracy.get("unit") == "ranks" else "")
    elif accuracy.get("parts"):
        text = ", ".join(
            f"{name} ±{number(part['half_width'])}" for name, part in accuracy["parts"].items()
        )
    elif accuracy.get("unit") == "ranks":
        text = "no data-free bound (fast mode)"
    else:
        text = "n/a"
    if accuracy.get("ids_for_release") is not None:
        text += f"; a key needs {accuracy['ids_for_release']} ids"
    return text


def _noise(accuracy: dict[str, Any] | None, mechanism: str) -> str:
    if accuracy is None:
        return mechanism
    noise = accuracy.get("noise")
    if noise is None and accuracy.get("parts"):
        kinds = {part["noise"]["distribution"] for part in accuracy["parts"].values()}
        return f"{'/'.join(sorted(kinds))} (sum and count)"
    if noise is None:
        return "exponential mechanism" if accuracy.get("unit") == "ranks" else mechanism
    return f"{noise['distribution']}, scale {number(noise['scale'])}"


def format_plan(document: dict[str, Any]) -> str:
    """A plan (:func:`dpkit.spec.preview.preview_spec`) as a table: cost, noise, ± error."""
    rows = []
    for query in document["queries"]:
        accuracy = query["accuracy"]
        rows.append(
            [
                query["query_id"],
                query["statistic"],
                _cost(query["cost"]),
                _noise(accuracy, str(query["mechanism"])),
                f"{_error(accuracy)} ({query['confidence']:.0%})",
            ]
        )
    text = table(rows, ["query", "statistic", "cost", "noise", "± error"])
    total = document["total"]
    footer = (
        f"the queries cost ε={total['epsilon_exact']}, δ={total['delta_exact']} together "
        "(the sum of their costs); nothing was spent and no data were read"
    )
    return f"{text}\n{footer}"

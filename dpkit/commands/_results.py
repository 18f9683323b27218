"""Readable text for ``dpkit run``: a result document or a plan as aligned tables.

The JSON documents (``--json``) are the machine form; these tables show the same releases —
per query and group, the value ± the half-width of its interval, the noise and the cost —
and the same plans, for people.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from dpkit._summary import error_text, number
from dpkit.commands._output import rounded, table

__all__ = ["format_plan", "format_result", "number", "summarize"]


#: Characters a terminal acts on instead of showing (C0/C1 controls, bidirectional overrides).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _printable(value: Any) -> str:
    """A key or category as text a terminal shows as written: its control characters escaped
    (a key comes from the data; raw escape sequences could rewrite the table on screen)."""

    def escape(found: re.Match[str]) -> str:
        code = ord(found.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(escape, str(value))


def _cost(amount: dict[str, Any], *, up: bool = True) -> str:
    """A cost, rounded up (``up=False``: down, for what remains), from its exact fields where
    the document has them."""

    def value(name: str) -> Any:
        exact = amount.get(f"{name}_exact")
        return Fraction(exact) if isinstance(exact, str) else amount[name]

    text = f"ε={rounded(value('epsilon'), up=up)}"
    if amount.get("delta"):
        text += f", δ={rounded(value('delta'), 3, up=up)}"
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


def _sql_cells(result: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any] | None]]:
    """(label, value, interval) for every value of a SQL statement's released table: a row's
    group columns, then the value's column, as the label."""
    columns = result["columns"]
    keys = [i for i, column in enumerate(columns) if column in result["key_columns"]]
    unknown = [[None] * len(columns)] * len(result["rows"])  # a stored table: values only
    cells = (result.get("intervals") or {}).get("cells", unknown)
    for row, intervals in zip(result["rows"], cells, strict=True):
        group = ", ".join(_printable(row[i]) for i in keys)
        for i in (i for i in range(len(columns)) if i not in keys):
            label = f"{group} / {columns[i]}" if group else str(columns[i])
            yield label, row[i], intervals[i]
    if not result["rows"]:
        yield "(no group released)", None, None


def _half(value: Any, lower: Any, upper: Any, interval: dict[str, Any]) -> str:
    """The interval as ``±h`` where it is symmetric about the value, else ``[lower, upper]``;
    a quantile's as ``±t ranks`` (:func:`~dpkit._summary.error_text`)."""
    ranks = interval.get("half_width") if interval.get("unit") == "ranks" else None
    return error_text(value, lower, upper, ranks if isinstance(ranks, (int, float)) else None)


def _bounds(error: dict[str, Any] | None) -> tuple[Any, Any]:
    """A SQL cell's interval as (lower, upper); (None, None) for none or one in ranks."""
    return (None, None) if error is None else (error.get("lower"), error.get("upper"))


def _methods(entries: list[tuple[str, str]]) -> str:
    """One line per distinct interval method: the queries that use it, then the method."""
    used: dict[str, list[str]] = {}
    for query_id, method in entries:
        if method:
            used.setdefault(method, []).append(query_id)
    return "\n".join(f"  {', '.join(ids)}: {method}" for method, ids in used.items())


def _decimal(amount: dict[str, Any]) -> str:
    """An amount as decimals rounded up (from its exact fields): ``ε=0.964795, δ=1e-06``."""
    return _cost(amount) if amount.get("delta") else _cost(amount) + ", δ=0"


def summarize(result: Any) -> str:
    """One stored result (a ``dpkit run`` result, or any JSON value) in a few words: its
    value(s) per group or category, and the interval of a single value."""
    if isinstance(result, dict) and {"columns", "rows", "key_columns"} <= result.keys():
        return ", ".join(f"{label} {number(value)}" for label, value, _ in _sql_cells(result))
    if not isinstance(result, dict) or "estimate" not in result:
        return json.dumps(result, allow_nan=True, default=str)
    interval = result.get("confidence_interval") or {}
    cells = list(_cells(result))
    if len(cells) == 1:
        label, value, lower, upper = cells[0]
        half = _half(value, lower, upper, interval)
        text = " ".join(part for part in (label, number(value), half) if part)
    else:
        text = ", ".join(f"{label} {number(value)}" for label, value, _, _ in cells)
    level = interval.get("level")
    return f"{text} ({level:.0%})" if len(cells) == 1 and level and half else text


def format_result(document: dict[str, Any]) -> str:
    """The releases of a ``dpkit run`` result document as a table, then the budget."""
    rows = []
    methods = []
    for result in document["results"]:
        interval = result.get("confidence_interval") or {}
        level = interval.get("level")
        methods.append((str(result["query_id"]), str(interval.get("method") or "")))
        # The noise as the plan names it: its distribution where the document has one.
        noise = (result.get("noise") or {}).get("distribution") or (
            result.get("mechanism", {}).get("noise") or result["mechanism"]["name"]
        )
        first = True
        if result.get("kind") == "sql":
            level = result["intervals"]["level"]
            cells = [
                (label, value, *_bounds(error), error or {})
                for label, value, error in _sql_cells(result)
            ]
        else:
            cells = [(*cell, interval) for cell in _cells(result)]
        for label, value, lower, upper, shown in cells:
            half = _half(value, lower, upper, shown)
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
    legend = _methods(methods)
    if legend:
        text += "\nhow each interval was computed:\n" + legend
    session = document["session"]
    lines = [text]
    charged = session.get("charged")
    if charged is not None:
        lines.append(f"this run was charged {charged['composed']}")
    remaining = _cost(session["remaining"], up=False)
    if not session["remaining"].get("delta"):
        remaining += ", δ=0"
    lines.append(
        f"ledger {session['ledger']}: spent {_decimal(session['spent'])} of "
        f"{_decimal(session['budget'])}; remaining {remaining} (exact fractions: --json)"
    )
    return "\n".join(lines)


def _error(accuracy: dict[str, Any] | None) -> str:
    if accuracy is None:
        return "depends on n (local estimate)"
    half = accuracy.get("half_width")
    if half is not None:
        text = f"±{number(half)}" + (" ranks" if accuracy.get("unit") == "ranks" else "")
    elif accuracy.get("parts"):
        parts = ", ".join(
            f"{name} ±{number(part['half_width'])}" for name, part in accuracy["parts"].items()
        )
        at = accuracy.get("mean_error") or {}
        shown = [f"±{number(error)} at n={int(n):,}" for n, error in list(at.items())[:2]]
        text = ", ".join(shown) + f" ({parts})" if shown else parts
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
        return "exponential" if accuracy.get("unit") == "ranks" else mechanism
    return f"{noise['distribution']}, scale {number(noise['scale'])}"


def sql_rows(accuracy: dict[str, Any], level: str) -> list[list[str]]:
    """A SQL statement's plan (:func:`dpkit.spec.preview.sql_accuracy`) as rows under the
    statement: each aggregate's text, statistic, share of the cost, noise and ± error, as a
    plan shows any other query; then the partition selection's share, where the groups are
    found in the data, and the ids a group needs to be released."""
    rows = [
        [
            f"  {part['aggregate']}",
            str(part["statistic"]),
            _cost(part["cost"]),
            _noise(part, str(part["statistic"])),
            f"{_error({**part, 'ids_for_release': None})} {level}",
        ]
        for part in accuracy["aggregates"]
    ]
    selection = accuracy.get("selection")
    if selection is not None:
        rows.append(
            [
                "  groups found in the data",
                "partition selection",
                _cost(selection["cost"]),
                "",
                f"a group needs {selection['ids_for_release']} ids {level}",
            ]
        )
    return rows


def format_plan(document: dict[str, Any]) -> str:
    """A plan (:func:`dpkit.spec.preview.preview_spec`) as a table: cost, noise, ± error."""
    rows = []
    methods = []
    for query in document["queries"]:
        accuracy = query["accuracy"]
        level = f"({query['confidence']:.0%})"
        if accuracy is not None and "aggregates" in accuracy:  # a SQL statement
            rows.append([query["query_id"], query["statistic"], _cost(query["cost"]), "", ""])
            rows += sql_rows(accuracy, level)
            methods += [
                (f"{query['query_id']} {part['aggregate']}", part["method"])
                for part in accuracy["aggregates"]
            ]
            continue
        methods.append((str(query["query_id"]), str((accuracy or {}).get("method") or "")))
        rows.append(
            [
                query["query_id"],
                query["statistic"],
                _cost(query["cost"]),
                _noise(accuracy, str(query["mechanism"])),
                f"{_error(accuracy)} {level}",
            ]
        )
    text = table(rows, ["query", "statistic", "cost", "noise", "± error"])
    legend = _methods(methods)
    if legend:
        text += "\nhow each interval is computed:\n" + legend
    total = document["total"]
    composed = total.get("composed") or f"the sum of their costs: {_decimal(total)}"
    footer = f"the run will be charged {composed}; nothing was spent and no data were read"
    return f"{text}\n{footer}"

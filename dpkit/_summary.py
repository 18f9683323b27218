"""Estimates for people: a readable summary (``str(estimate)``), one row per value with its
interval (``estimate.rows()``) and the same as a table (``estimate.table()``), for the local
estimates (:class:`~dpkit.Estimate`, :class:`~dpkit.MeanEstimate`) as for central releases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["SHOWN_ROWS", "as_table", "error_text", "number", "summary", "text_table"]

#: The rows a summary shows before it says how many more there are.
SHOWN_ROWS = 20


def number(value: Any) -> str:
    """A number for reading: integers as they are, large values without decimals, others to
    four significant digits."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1e5 or (value.is_integer() and abs(value) < 1e15):
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.4g}"


def error_text(value: Any, lower: Any, upper: Any, ranks: float | None = None) -> str:
    """A value's interval for reading: ``±t ranks`` for a rank bound, ``±h`` where [lower,
    upper] is symmetric about the value, else ``[lower, upper]``; "" for none (or NaN
    bounds)."""
    if ranks is not None:
        return f"±{number(float(ranks))} ranks"
    if not all(isinstance(b, (int, float)) and math.isfinite(b) for b in (lower, upper)):
        return ""
    half = (upper - lower) / 2.0
    if isinstance(value, (int, float)) and abs(value - (lower + half)) <= 1e-9 * max(1.0, half):
        return f"±{number(half)}"
    return f"[{number(lower)}, {number(upper)}]"


def text_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain aligned text table."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)


def summary(title: str, rows: list[dict[str, Any]], label: str, level: float) -> str:
    """``title``, then a table of the rows (``label`` column, estimate, interval), abridged to
    :data:`SHOWN_ROWS`, then how the interval was computed."""
    shown = [
        [
            str(row[label]),
            number(row["estimate"]),
            f"[{number(row['ci_lower'])}, {number(row['ci_upper'])}]",
        ]
        for row in rows[:SHOWN_ROWS]
    ]
    text = text_table(shown, [label, "estimate", f"{level:.0%} interval"])
    if len(rows) > SHOWN_ROWS:
        text += f"\n… and {len(rows) - SHOWN_ROWS} more (all of them: .table() or .rows())"
    method = rows[0]["ci_method"] if rows else ""
    return f"{title}\n{text}\ninterval: {method}" if method else f"{title}\n{text}"


def as_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> Any:
    """The rows as a pandas DataFrame (PyArrow's Table where pandas is not installed), through
    narwhals (``dpkit[tables]``)."""
    from dpkit.tables.frame import narwhals

    nw = narwhals()
    data = {c: [r[c] for r in rows] for c in columns}
    try:
        import pandas  # noqa: F401
    except ImportError:
        backend = "pyarrow"
    else:
        backend = "pandas"
    return nw.from_dict(data, backend=backend).to_native()

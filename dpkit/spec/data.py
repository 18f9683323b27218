"""Reading a query's input: inline values or a CSV column, with errors that point at the field."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.spec.issues import SpecIssue

__all__ = ["load_values"]


def _as_array(values: list[Any]) -> NDArray[Any]:
    """Integers if every value is one, floats (None → NaN) if all are numbers, else strings."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return np.array(
            [math.nan if v is None else int(v) for v in values],
            dtype=float if len(present) < len(values) else np.int64,
        )
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if numbers:
        if len(present) == len(values) and all(isinstance(v, int) for v in present):
            return np.array(values, dtype=np.int64)
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    return np.array(["" if v is None else str(v) for v in values])


def _parse_cell(text: str) -> Any:
    text = text.strip()
    if text == "" or text.lower() in ("na", "nan", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def load_values(
    spec: dict[str, Any], *, at: str, base_dir: Path, data_file: Path | None
) -> tuple[NDArray[Any] | None, list[SpecIssue]]:
    """The input values of one query, or ``None`` with the issues found."""
    if spec["source"] == "inline":
        return _as_array(list(spec["values"])), []
    path = (
        data_file
        if data_file is not None
        else (base_dir / spec["path"] if "path" in spec else None)
    )
    if path is None:
        return None, [
            SpecIssue(f"{at}/path", "data_missing", "no CSV file: give input.path or --data")
        ]
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            column = spec["column"]
            if column not in columns:
                return None, [
                    SpecIssue(
                        f"{at}/column",
                        "column_not_found",
                        f"column {column!r} is not in {path.name} (columns: {', '.join(columns) or 'none'})",
                    )
                ]
            cells = [_parse_cell(row[column] or "") for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        where = f"{at}/path" if data_file is None else at
        return None, [SpecIssue(where, "data_unreadable", f"cannot read {path}: {error}")]
    return _as_array(cells), []


def encode_categories(
    values: NDArray[Any], categories: list[Any], *, at: str
) -> tuple[NDArray[np.int64] | None, list[SpecIssue]]:
    """Labels → indices 0..k−1 by position in ``categories``; unknown labels are an issue."""
    table = {label: index for index, label in enumerate(categories)}
    unique, inverse = np.unique(values, return_inverse=True)
    lookup = []
    for label in unique.tolist():
        key = label if label in table else str(label) if str(label) in table else None
        if key is None:
            return None, [
                SpecIssue(
                    f"{at}/categories",
                    "unknown_category",
                    f"value {label!r} is not one of the categories {categories!r}",
                )
            ]
        lookup.append(table[key])
    return np.asarray(lookup, dtype=np.int64)[inverse.reshape(values.shape)], []

"""The text of a value of an ``object`` column: one rule for every reader.

An object column's keys, ids and labels are read as text, record by record, by the rule of
pandas' conversion to its string dtype (``Series.astype("string")``) — which is what Dask
applies to every object column of ``dd.from_pandas`` by default (``dataframe.convert-string``)
and what pandas 3 stores text as. So one table is the same rows on every engine and in SQL:
the ids ``1``, ``1.0`` and ``True`` are the texts ``"1"``, ``"1.0"`` and ``"True"`` — three
ids — and ``b"1"`` is ``"1"``, the id ``1`` is.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np

__all__ = ["object_text"]


def object_text(value: Any) -> str | None:
    """One value of an ``object`` column as the text pandas gives it, or None if it is missing.

    Text is itself; a missing value (None, NaN, ``pd.NA``, ``NaT``, a NaN decimal) is missing;
    bytes are their UTF-8 text; a float is ``str(value)``; anything else ``f"{value}"``.
    Total: bytes that are not UTF-8, text that UTF-8 cannot encode (a lone surrogate, which
    Dask's shuffle, DuckDB and Arrow refuse when they meet it), and a value whose conversion
    raises (where pandas itself would fail), are missing.
    """
    try:
        if isinstance(value, str):
            text = str(value)
        elif _missing(value):
            return None
        elif isinstance(value, bytes):
            text = value.decode("utf-8")
        elif isinstance(value, (float, np.floating)):
            text = str(value)
        else:
            text = f"{value}"
        text.encode("utf-8")  # a lone surrogate: no UTF-8 text (no engine can hash or hold it)
    except Exception:  # undecodable bytes, or a value whose __str__/__format__ raises
        return None
    return text


def _missing(value: Any) -> bool:
    """Whether a Python value is one of pandas' missing values (its ``checknull``)."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(value != value)
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(value))
    return type(value).__name__ in ("NAType", "NaTType")

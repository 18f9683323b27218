"""The statements users write (``support.sql_corpus``): each is answered, or refused before
anything is read or spent with a typed error naming its clause."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit

pytest.importorskip("sqlglot")
pytest.importorskip("duckdb")
from support.sql_corpus import CORPUS, PUBLIC, tables


def _query(statement: str, beside: dict[str, Any] | None, data: dict[str, Any]) -> Any:
    beside = dict(beside or {})
    bounds = beside.pop("bounds", None)
    private = {name: data[name] for name in ("lineitem", "visits")}
    public = {name: data[name] for name in PUBLIC}
    return dpkit.sql(
        statement, tables=private, public=public, options=beside or None, bounds=bounds
    )


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 60
    assert sum(expected == "answer" for _, _, expected in CORPUS) >= 30
    assert sum(expected != "answer" for _, _, expected in CORPUS) >= 30


@pytest.mark.parametrize(("statement", "beside", "expected"), CORPUS)
def test_each_statement_is_answered_or_refused_by_clause(
    statement: str, beside: dict[str, Any] | None, expected: str
) -> None:
    data = tables()
    with dpkit.Session(budget=(20.0, 0.1)) as session:
        if expected == "answer":
            query = _query(statement, beside, data)
            release = session.release(query, None, rng=np.random.default_rng(1))
            table = release.values.table()
            assert list(table.columns) == list(query.plan.outputs)
            assert session.spent.epsilon > 0
            return
        error_type = dpkit.InvalidData if expected == "data" else dpkit.SqlError
        with pytest.raises(error_type) as raised:
            query = _query(statement, beside, data)
            session.release(query, None, rng=np.random.default_rng(1))
        if expected != "data":
            assert raised.value.clause == expected, str(raised.value)
        assert session.spent.epsilon == 0 and not session.history()

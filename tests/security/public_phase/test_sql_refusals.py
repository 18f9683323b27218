"""Red team: a refused SQL statement discloses nothing about the rows.

* **Nothing read.** Every refusal of the corpus happens before a private table's rows are
  read: the private inputs are opened only empty (their schema) until the spend
  (``sources.relation`` is watched; a public lookup table is read whole), and nothing is
  spent.
* **No oracle.** Whether a statement is refused, and the message, depend on the statement,
  its options and the tables' schemas only: on two tables of one schema whose values differ
  (one of them adversarial: NaN, ±inf, huge and negative numbers, text that no cast reads,
  a secret string), every corpus statement is refused with the same message or accepted on
  both, and no message quotes a value.
* **Total afterwards.** Every statement the corpus answers is released on the adversarial
  table too (no :class:`~dpkit.ReleaseFailed`): expressions that fail on a value (a cast, a
  division) give NULL, which the statistics' missing-value policy drops.

Deterministic: no false positives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit

pytest.importorskip("sqlglot")
pytest.importorskip("duckdb")
from support.sql_corpus import CORPUS, PUBLIC, tables

SECRET = "SECRET-4242"
SECRET_NUMBER = 987654.321


def _adversarial(data: dict[str, Any]) -> dict[str, Any]:
    """The same schemas, hostile values."""
    visits = data["visits"].copy()
    n = len(visits)
    visits["minutes"] = np.resize([np.nan, np.inf, -np.inf, 1e308, -5.0, SECRET_NUMBER, 0.0], n)
    visits["city"] = np.resize([SECRET, "", "x'; DROP TABLE visits; --", "\u00e9", "Lyon"], n)
    visits["quantity"] = np.resize([0, -(2**62), 2**62, 7], n)
    lineitem = data["lineitem"].copy()
    lineitem["l_quantity"] = np.resize([0.0, np.nan, 1e300, -1e300, SECRET_NUMBER], len(lineitem))
    lineitem["l_discount"] = np.resize([0.0, np.inf, np.nan], len(lineitem))
    lineitem["l_shipmode"] = np.resize([SECRET, None, "MAIL"], len(lineitem))
    return {"lineitem": lineitem, "visits": visits, **{name: data[name] for name in PUBLIC}}


def _outcome(statement: str, beside: dict[str, Any] | None, data: dict[str, Any]) -> str:
    beside = dict(beside or {})
    bounds = beside.pop("bounds", None)
    private = {name: data[name] for name in ("lineitem", "visits")}
    with dpkit.Session(budget=(20.0, 0.1)) as session:
        try:
            public = {name: data[name] for name in PUBLIC}
            query = dpkit.sql(
                statement, tables=private, public=public, options=beside or None, bounds=bounds
            )
            query.check_input(None)
        except dpkit.DPKitError as error:
            assert not session.history()
            return f"{type(error).__name__}: {error}"
    return "accepted"


@pytest.mark.parametrize(("statement", "beside", "expected"), CORPUS)
def test_a_refusal_reads_no_row_and_depends_on_no_value(
    statement: str, beside: dict[str, Any] | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpkit.sql_statements import query as module

    opened: list[bool] = []
    relation = module.relation

    def watched(con: Any, data: Any, *, name: str, empty: bool, **options: Any) -> Any:
        opened.append(empty or name in PUBLIC)
        return relation(con, data, name=name, empty=empty, **options)

    monkeypatch.setattr(module, "relation", watched)
    plain = tables()
    hostile = _adversarial(plain)
    first = _outcome(statement, beside, plain)
    second = _outcome(statement, beside, hostile)
    assert first == second
    assert all(opened), "a table's rows were read in the public phase"
    assert (first == "accepted") == (expected == "answer")
    assert SECRET not in first and str(SECRET_NUMBER) not in first


@pytest.mark.parametrize(
    ("statement", "beside"),
    [(s, b) for s, b, expected in CORPUS if expected == "answer"],
)
def test_an_answered_statement_is_total_on_hostile_values(
    statement: str, beside: dict[str, Any] | None
) -> None:
    beside = dict(beside or {})
    bounds = beside.pop("bounds", None)
    hostile = _adversarial(tables())
    private = {name: hostile[name] for name in ("lineitem", "visits")}
    public = {name: hostile[name] for name in PUBLIC}
    query = dpkit.sql(
        statement, tables=private, public=public, options=beside or None, bounds=bounds
    )
    with dpkit.Session(budget=(20.0, 0.1)) as session:
        release = session.release(query, None, rng=np.random.default_rng(2))
    table = release.values.table()
    assert list(table.columns) == list(query.plan.outputs)

"""SQL: the ZetaSQL differential-privacy syntax (and plain ``SELECT ... GROUP BY`` with the
options beside it) compiled into the table-query plan, its row-level part run by DuckDB.

Needs the optional extra ``dpkit[sql]`` (sqlglot, duckdb, pyarrow, narwhals), imported only
when a statement is given. :mod:`dpkit.sql.plan` reads and checks a statement,
:mod:`dpkit.sql.sources` turns inputs into DuckDB relations, :mod:`dpkit.sql.query` is the
query a session releases (:func:`sql`).
"""

from __future__ import annotations

from dpkit.sql.query import SqlQuery, SqlResult, sql

__all__ = ["SqlQuery", "SqlResult", "sql"]

"""SQL: the ZetaSQL differential-privacy syntax (and plain ``SELECT ... GROUP BY`` with the
options beside it) compiled into the table-query plan, its row-level part run by DuckDB.

Needs the optional extra ``dpkit[sql]`` (sqlglot, duckdb, pyarrow, narwhals), imported only
when a statement is given. :mod:`dpkit.sql_statements.plan` reads and checks a statement,
:mod:`dpkit.sql_statements.sources` turns inputs into DuckDB relations,
:mod:`dpkit.sql_statements.spark` runs the row-level part on a Spark DataFrame in Spark,
:mod:`dpkit.sql_statements.query` is the query a session releases (:func:`sql`, which the
package :mod:`dpkit` exports as ``dpkit.sql``).
"""

from __future__ import annotations

from dpkit.sql_statements.query import SqlQuery, SqlResult, sql

__all__ = ["SqlQuery", "SqlResult", "sql"]

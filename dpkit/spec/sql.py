"""A spec's ``sql`` query: its statement bound to the files its ``tables`` name (and the public
lookup tables its ``public`` names, for a JOIN), in the public phase.

The statement, its options and bounds and the tables' footers or header lines are checked by
:func:`dpkit.sql` exactly as for a statement given in Python (a row-level part run on empty
relations), so a spec refuses what the API refuses, before anything is spent. Each refusal is
a :class:`~dpkit.spec.issues.SpecIssue` at the field it is about: ``sql/statement`` for the
statement (its message names the clause, line and column), ``budget/epsilon`` or
``budget/delta`` for the privacy cost, ``sql/options/NAME``, ``sql/bounds/NAME``,
``sql/tables/NAME/path`` or ``sql/public/NAME/path`` for a file. The private files are read
by the query itself, after the spend; a public one is read whole before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpkit.errors import DPKitError, InvalidParameter, SqlError
from dpkit.registry import Provenance
from dpkit.spec.data import DataPolicy, check_path
from dpkit.spec.issues import SpecIssue

__all__ = ["PROVENANCE", "bind_sql"]

#: Who runs a ``sql`` query: dpkit's own SQL front end, not a plugin.
PROVENANCE = Provenance(plugin="dpkit.sql", distribution="dpkit")


def _tables(
    tables: dict[str, Any], at: str, base_dir: Path, policy: DataPolicy
) -> tuple[dict[str, str], list[SpecIssue]]:
    """Each table's file, inside the data root and of the kind its ``source`` says."""
    paths: dict[str, str] = {}
    issues: list[SpecIssue] = []
    for name, given in tables.items():
        where = f"{at}/{_escape(name)}/path"
        path, found = check_path(given["path"], at=where, base_dir=base_dir, policy=policy)
        if path is not None and not path.name.lower().endswith(f".{given['source']}"):
            found.append(
                SpecIssue(
                    where,
                    "invalid_parameter",
                    f"a {given['source']} table's file name ends in .{given['source']}",
                )
            )
        issues += found
        if not found and path is not None:
            paths[name] = str(path)
    return paths, issues


def _escape(key: str) -> str:
    """One JSON Pointer reference token (RFC 6901 §4)."""
    return key.replace("~", "~0").replace("/", "~1")


def _issue(error: DPKitError, query: dict[str, Any], at: str) -> SpecIssue:
    """Where a refusal of :func:`dpkit.sql` points in the spec."""
    own = query["sql"]
    if isinstance(error, SqlError):
        detail = {"clause": error.clause, "line": error.line, "column": error.column}
        return SpecIssue(f"{at}/sql/statement", error.code, str(error), detail=detail)
    if isinstance(error, InvalidParameter):
        name = str(error.parameter)
        for field in ("options", "bounds"):
            if name in own.get(field, {}):
                where = f"{at}/sql/{field}/{_escape(name)}"
                return SpecIssue(where, error.code, str(error), detail={"allowed": error.allowed})
        if name in ("epsilon", "delta") and name in query["budget"]:
            where = f"{at}/budget/{name}"
            return SpecIssue(where, error.code, str(error), detail={"allowed": error.allowed})
        if name == "keys" and "keys" in own:
            return SpecIssue(f"{at}/sql/keys", error.code, str(error))
    if getattr(error, "field", None) in ("tables", "public"):
        return SpecIssue(f"{at}/sql/{error.field}", error.code, str(error))  # type: ignore[attr-defined]
    return SpecIssue(f"{at}/sql", error.code, str(error))


def bind_sql(
    query: dict[str, Any], at: str, *, base_dir: Path, policy: DataPolicy, registry: Any
) -> tuple[Any, list[SpecIssue]]:
    """The query's :class:`~dpkit.sql_statements.SqlQuery` (its cost is the spec's ``budget``,
    given to the statement as the options ``epsilon`` and ``delta``), or the issues refusing
    it; reads no row."""
    own = query["sql"]
    paths, issues = _tables(own["tables"], f"{at}/sql/tables", base_dir, policy)
    public, found = _tables(own.get("public", {}), f"{at}/sql/public", base_dir, policy)
    issues += found
    if issues:
        return None, issues
    budget = query["budget"]
    options = dict(own.get("options", {}), epsilon=budget["epsilon"])
    if budget.get("delta", 0) != 0:
        options["delta"] = budget["delta"]
    for column, (lower, upper) in own.get("bounds", {}).items():
        if not lower < upper:  # the schema has made them finite numbers
            return None, [
                SpecIssue(
                    f"{at}/sql/bounds/{_escape(column)}",
                    "invalid_parameter",
                    f"bounds [{lower!r}, {upper!r}] of {column!r}: the lower bound must be below "
                    "the upper",
                )
            ]
    for name in ("epsilon", "delta"):
        if name in own.get("options", {}):
            return None, [
                SpecIssue(
                    f"{at}/sql/options/{name}",
                    "invalid_parameter",
                    f"a spec's sql query takes {name} from budget, not from sql.options",
                )
            ]
    try:
        from dpkit.sql_statements import sql

        target = sql(
            own["statement"],
            tables=paths,
            public=public,
            options=options,
            bounds={name: (lo, hi) for name, (lo, hi) in own.get("bounds", {}).items()},
            keys=own.get("keys"),
            registry=registry,
        )
        target.check_input(None)  # the row-level part on the tables' empty relations
    except DPKitError as error:
        return None, [_issue(error, query, at)]
    return target, []

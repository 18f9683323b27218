"""Turning a spec into a checked plan: the public phase of every query, before any spend.

Planning reads no private value: it validates the schema, binds each query to its mechanism
or query object (parameter checks), checks the output options and the randomness, and checks
each input's file and header (:func:`dpkit.spec.data.open_input`) — never the data. Every
problem is collected (not only the first) as a :class:`SpecIssue` with its JSON Pointer. A spec
that plans without issues can still be refused by the budget check in
:func:`dpkit.spec.run_spec`; either way nothing is spent unless all of this is valid, and
nothing here can depend on the data, which are read only after the spend.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import jsonschema  # type: ignore[import-untyped]
import numpy as np

from dpkit.errors import DPKitError, InvalidParameter
from dpkit.randomness import SecureRandom
from dpkit.registry import Provenance, Registry
from dpkit.spec.columnar import FileTable
from dpkit.spec.data import (
    ColumnSource,
    DataPolicy,
    encode_categories,
    match_categories,
    open_input,
)
from dpkit.spec.issues import SpecInvalid, SpecIssue, pointer
from dpkit.spec.schema import (
    CONFIDENCE,
    FREQUENCY,
    GRAPH,
    HEAVY_HITTERS,
    SEED,
    SQL,
    compose_schema,
    is_local,
    local_mechanisms,
)
from dpkit.units import UnitIdentity, unit_of

__all__ = ["Plan", "PlannedQuery", "heavy_hitter_items", "plan_spec", "spec_hash"]

_DEFAULTABLE = ("input", "privacy_unit", "output", "rng")

#: Other names people give the statistics: the statistic, and what to put in its params.
_SYNONYMS = {
    "median": ("quantile", " with params q = 0.5"),
    "percentile": ("quantile", " with params q in [0, 1]"),
    "quartile": ("quantile", " with params q = 0.25 or 0.75"),
    "average": ("mean", ""),
    "avg": ("mean", ""),
    "total": ("sum", ""),
    "rows": ("count", ""),
    "hist": ("histogram", ""),
    "counts": ("histogram", " (a count per category)"),
}


@attrs.frozen
class PlannedQuery:
    """One query, validated and bound to its mechanism (or query object) and data."""

    at: str
    query_id: str
    statistic: str
    target: Any
    provenance: Provenance
    source: ColumnSource
    categories: tuple[Any, ...] | None
    confidence: float
    rng_mode: str
    seed: int | None
    stream: np.random.SeedSequence | None = None
    #: A local mechanism (``frequency``, or ``mean`` with a mechanism) rather than a query.
    local: bool = False

    def load(self) -> Any:
        """The query's input (private phase, after the spend; total): a PyArrow table of the
        columns a table query needs, or the values of the input column."""
        if self.statistic == SQL:  # the query reads the files its tables name
            return None
        needed = getattr(self.target, "columns_needed", None)
        if self.source.table is not None and needed is not None:
            return self.source.frame(needed())
        kind = self.read_kind()
        values = self.source.read(kind)
        if self.statistic == HEAVY_HITTERS:
            return heavy_hitter_items(values, self.target.bits)
        if self.local and self.statistic != FREQUENCY:  # a local mean: numbers, NaN if missing
            return values
        if self.statistic == FREQUENCY:
            if self.categories is None:  # integer categories 0..k-1 given directly
                values = np.nan_to_num(values, nan=-1.0, posinf=-1.0)
                codes = np.clip(values, -1.0, 2.0**62)  # out of domain → −1 (coerced later)
                return np.where(codes == np.round(codes), codes, -1.0).astype(np.int64)
            return encode_categories(values, list(self.categories))
        declared = getattr(self.target, "categories", None)
        if isinstance(declared, tuple) and declared:  # e.g. a histogram: match by text
            return match_categories(values, declared)
        return values

    def read_kind(self) -> Any:
        """How :meth:`load` reads the input column when it is not a table query's input."""
        if self.statistic == HEAVY_HITTERS:  # items of whole bytes are text, others integers
            return "number" if self.target.bits % 8 else "text"
        if self.local and self.statistic != FREQUENCY:
            return "number"
        if self.statistic == FREQUENCY:
            return "number" if self.categories is None else "text"
        declared = getattr(self.target, "categories", None)
        if isinstance(declared, tuple) and declared:
            return "text"
        return _input_kind(self.target)

    def generator(self) -> Any:
        """The random source for this query: secure (None) or a seeded/unseeded numpy Generator."""
        if self.rng_mode == "secure":
            return None
        return np.random.default_rng(self.stream)


def heavy_hitter_items(values: Any, bits: int) -> Any:
    """The input column as a heavy-hitter protocol's items (private phase; total, record by
    record). Items of a whole number of bytes (L = ``bits``) are text: each cell's text as
    written (an inline JSON number or boolean its JSON text), a missing cell None; otherwise
    each whole number in [0, 2^L) is itself and anything else −1. The protocol's ``coerce``
    then keeps a text's first L/8 bytes and replaces None and −1 by a uniformly random item."""
    if bits % 8 == 0:
        out = np.empty(len(values), dtype=object)
        out[:] = [v if v is None or isinstance(v, str) else json.dumps(v) for v in values]
        return out
    numbers = np.asarray(values, dtype=np.float64)
    whole = np.isfinite(numbers) & (numbers == np.floor(numbers))
    valid = whole & (numbers >= 0.0) & (numbers < 2.0**bits)
    return np.where(valid, numbers, -1.0).astype(np.int64)


@attrs.frozen
class Plan:
    """A spec ready to run: its queries, the session budget and the spec's hash; ``unit`` is
    the one privacy unit its queries protect (the ledger's budget is for it)."""

    kind: str
    dataset: str | None
    budget: tuple[float, float] | None
    composition: str | None
    queries: tuple[PlannedQuery, ...]
    spec_sha256: str
    unit: UnitIdentity | None = None


def query_stream(seed: int, index: int, query: dict[str, Any]) -> np.random.SeedSequence:
    """The fast-mode random stream of one query: the seed, spawned by the query's place and content.

    Two queries must never share noise, or subtracting their releases cancels it (a count of
    all rows minus a count of the non-missing rows, both with the same noise, is the exact number
    of missing values). A spec-level seed is inherited by every query, and the same seed may be
    reused by another spec over the same data, so the stream is keyed by the query's index *and*
    its canonical JSON: the same query with the same seed reproduces its release (which reveals
    nothing new), any other query draws an unrelated stream.
    """
    digest = hashlib.sha256(
        json.dumps(query, sort_keys=True, separators=(",", ":"), default=str).encode()
    ).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    return np.random.SeedSequence(seed, spawn_key=(index, *words))


def spec_hash(spec: dict[str, Any]) -> str:
    """SHA-256 of the spec's canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _schema_issues(spec: Any, kind: str, registry: Registry) -> list[SpecIssue]:
    validator = jsonschema.Draft202012Validator(compose_schema(kind, registry))
    issues = []
    for error in validator.iter_errors(spec):
        at = pointer(*error.absolute_path)
        code, message = "schema", error.message
        field = list(error.absolute_path)[-2:]
        if error.validator == "enum" and field and field[-1] in ("statistic", "name"):
            known = list(error.validator_value)
            close = difflib.get_close_matches(
                str(error.instance), [str(k) for k in known], n=3, cutoff=0.5
            )
            what = "statistic" if field[-1] == "statistic" else "mechanism"
            code = f"unknown_{what}"
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            synonym = _SYNONYMS.get(str(error.instance).strip().lower())
            if what == "statistic" and synonym is not None and synonym[0] in known:
                hint = f"; that is statistic {synonym[0]!r}{synonym[1]}."
            message = f"unknown {what} {error.instance!r}{hint} Known: {', '.join(map(str, known))}"
        elif isinstance(error.schema, dict) and error.schema.get("errorMessage"):
            message = f"{error.instance!r} is not allowed: {error.schema['errorMessage']}"
        issues.append(SpecIssue(at, code, message, rule=str(error.validator)))
    return sorted(issues, key=lambda i: (i.pointer, i.code))


def _query_items(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "queries" not in spec:
        return [("", spec)]
    defaults = spec.get("defaults", {})
    items = []
    for index, query in enumerate(spec["queries"]):
        merged = {key: copy.deepcopy(defaults[key]) for key in _DEFAULTABLE if key in defaults}
        merged.update(query)
        items.append((pointer("queries", index), merged))
    return items


def _is_table_query(query: dict[str, Any]) -> bool:
    """Whether a query runs on a table: grouped, per id, or over a CSV or Parquet file."""
    unit = query.get("privacy_unit", {"kind": "record"})
    return (
        "group_by" in query
        or unit.get("kind") == "id"
        or query["input"]["source"] in ("csv", "parquet")
    )


def _table(target: Any, query: dict[str, Any], at: str) -> tuple[Any, list[SpecIssue]]:
    """Wrap a query object into its table form (``target.on(...)``) when the spec asks for a
    grouped or per-id release, or reads a file; a query without a table form runs on the column
    values unless the spec needs grouping or an id unit."""
    group_by = query.get("group_by")
    unit = query.get("privacy_unit")
    on = getattr(target, "on", None)
    if on is None:
        if group_by is None and (unit is None or unit.get("kind") == "record"):
            return target, []
        return None, [
            SpecIssue(
                f"{at}/statistic",
                "invalid_parameter",
                f"statistic {query['statistic']!r} cannot be grouped or bounded per id",
            )
        ]
    if query["input"]["source"] == "inline":
        return None, [
            SpecIssue(
                f"{at}/input/source",
                "invalid_parameter",
                "a grouped or per-id query reads a table: give a csv or parquet input",
            )
        ]
    keys: Any = None
    if group_by is not None:
        keys = group_by["keys"]
        if keys == "private":  # the selection budget stands for private keys
            keys = dict(group_by["selection"])
    try:
        return on(
            query["input"]["column"],
            by=tuple(group_by["columns"]) if group_by else (),
            keys=keys,
            unit=unit,
        ), []
    except InvalidParameter as error:
        return None, [
            SpecIssue(
                f"{at}{pointer(*error.path)}" or "/",
                error.code,
                str(error),
                detail={"allowed": error.allowed},
            )
        ]


def _named_columns(items: list[tuple[str, dict[str, Any]]]) -> frozenset[str]:
    """Every column the spec names (values, groups, ids): public, so a misspelt one may be
    matched against them (never against the file's header, which is not shown)."""
    names: set[str] = set()
    for _, query in items:
        source = query.get("input")
        if isinstance(source, dict) and isinstance(source.get("column"), str):
            names.add(source["column"])
        if source is not None and isinstance(source, dict) and source.get("source") != "inline":
            names.update(_table_columns(query, ""))
    return frozenset(names)


def _table_columns(query: dict[str, Any], at: str) -> dict[str, str]:
    """The columns a query reads besides its value column, with the pointer naming each."""
    if query["input"]["source"] == "inline":
        return {}
    columns = {
        name: f"{at}/group_by/columns/{i}"
        for i, name in enumerate(query.get("group_by", {}).get("columns", []))
    }
    unit = query.get("privacy_unit", {})
    if unit.get("kind") == "id":
        columns[unit["column"]] = f"{at}/privacy_unit/column"
    if query["statistic"] == GRAPH:  # an edge list: the input column and the second end's
        target = query.get("params", {}).get("target_column", "target")
        columns[target] = f"{at}/params/target_column"
    columns.pop(query["input"]["column"], None)
    return columns


def _local_table_issues(query: dict[str, Any], at: str) -> list[SpecIssue]:
    """A local mechanism protects each report: it has no groups and no id unit."""
    issues = []
    statistic = query["statistic"]
    if "group_by" in query:
        issues.append(
            SpecIssue(
                f"{at}/group_by",
                "invalid_parameter",
                f"statistic {statistic!r} with a local mechanism cannot be grouped",
            )
        )
    if query.get("privacy_unit", {}).get("kind") == "id":
        issues.append(
            SpecIssue(
                f"{at}/privacy_unit/kind",
                "invalid_parameter",
                f"statistic {statistic!r} with a local mechanism protects each report: "
                "the privacy unit is 'record'",
            )
        )
    return issues


def _bind(
    query: dict[str, Any], at: str, registry: Registry
) -> tuple[Any, Provenance | None, list[SpecIssue]]:
    """Construct the local mechanism ('frequency', a local 'mean') or the query object."""
    budget = query["budget"]
    if is_local(query):
        name = query["mechanism"]["name"]
        info = registry.info(name)
        params = dict(query["mechanism"].get("params", {}))
        where, build, declared = f"{at}/mechanism/params", registry.mechanism, info.cls.parameters()
    else:
        name = query["statistic"]
        info = registry.query_info(name)  # type: ignore[assignment]
        params = dict(query.get("params", {}))
        where, build, declared = f"{at}/params", registry.query, _declared(info.cls)
    params["epsilon"] = budget["epsilon"]
    if "delta" in budget and budget["delta"] != 0:
        if "delta" not in declared:
            return (
                None,
                None,
                [
                    SpecIssue(
                        f"{at}/budget/delta",
                        "invalid_parameter",
                        f"{name} is pure ε-DP and takes no delta; remove budget.delta",
                    )
                ],
            )
        params["delta"] = budget["delta"]
    try:
        return build(name, **params), info.provenance, []
    except InvalidParameter as error:
        field = error.parameter
        at_field = f"{at}/budget/{field}" if field in ("epsilon", "delta") else f"{where}/{field}"
        return (
            None,
            None,
            [SpecIssue(at_field, error.code, str(error), detail={"allowed": error.allowed})],
        )


def _declared(cls: type[Any]) -> dict[str, Any]:
    from dpkit.params import parameter_specs

    return parameter_specs(cls)


def _input_kind(target: Any) -> Any:
    """How a query reads its column: ``"number"`` (floats, NaN missing) or ``"label"``."""
    return getattr(target, "input_kind", "label")


def _stand_in_table(needed: dict[str, tuple[str, tuple[str, ...]]]) -> Any:
    """A one-row public table with the columns a table query reads (never the data)."""
    from dpkit.spec.columnar import pyarrow

    pa = pyarrow()
    sample = {"numbers": pa.array([0.0]), "labels": pa.array(["0"]), "ids": pa.array([0])}
    columns = [sample[how] for how, _keep in needed.values()]
    return pa.Table.from_arrays(columns, names=list(needed))


def _dry_run(target: Any, query: dict[str, Any], registry: Registry, mode: str) -> None:
    """Run the target once on a public stand-in input (never the data), releasing nothing, to
    check that it and its estimator accept the randomness mode (and, for a local mean, a column
    of numbers)."""
    rng = SecureRandom() if mode == "secure" else np.random.default_rng(0)
    needed = getattr(target, "columns_needed", None)
    if needed is not None:
        target.run(_stand_in_table(needed()), rng=rng)
    elif query["statistic"] == FREQUENCY:
        reports = target.randomize(np.zeros(1, dtype=np.int64), rng=rng)
        registry.estimator(target).accumulate(reports)
    elif is_local(query):
        stand_in = np.zeros(1, dtype=np.float64)
        target.check_input(stand_in)
        reports = target.randomize(target.coerce(stand_in, rng=rng), rng=rng)
        registry.estimator(target).accumulate(reports)
    elif _input_kind(target) == "number":
        target.run(np.zeros(1, dtype=np.float64), rng=rng)
    else:
        target.run(np.array([], dtype=object), rng=rng)


#: The largest confidence level (:data:`dpkit.spec.schema.CONFIDENCE`).
MAX_CONFIDENCE = CONFIDENCE.high
#: Seeds are integers in [0, 2^128) (:data:`dpkit.spec.schema.SEED`).
MAX_SEED = 2**128
assert SEED.high == MAX_SEED - 1


def _output_issues(query: dict[str, Any], at: str) -> list[SpecIssue]:
    """Output options are checked before the spend, so a bad one never costs budget."""
    confidence = query.get("output", {}).get("confidence", 0.95)
    try:
        CONFIDENCE.convert(confidence)
    except (ValueError, TypeError, OverflowError):
        return [
            SpecIssue(
                f"{at}/output/confidence",
                "invalid_parameter",
                f"output.confidence={confidence!r} is not allowed; it must be a finite number "
                f"in (0, {MAX_CONFIDENCE!r}]",
            )
        ]
    return []


#: No spec needs deeper nesting; deeper documents would make validation recurse without end.
MAX_SPEC_DEPTH = 64


def nesting_depth(document: Any) -> int:
    """How deeply lists and dicts nest in ``document`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_SPEC_DEPTH:
                break
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _seed_issues(seed: Any, at: str) -> list[SpecIssue]:
    if seed is None:
        return []
    try:
        SEED.convert(seed)
    except (ValueError, TypeError, OverflowError):
        return [
            SpecIssue(
                at,
                "invalid_parameter",
                f"seed={seed!r} is not allowed; a seed must be a whole number in [0, 2^128)",
            )
        ]
    return []


def _unit_issues(planned: list[PlannedQuery]) -> list[SpecIssue]:
    """A spec is charged on one budget, which is for one privacy unit: every query must
    protect the first query's (identity only: id units on one column with other bounds
    agree)."""
    if not planned:
        return []
    first = unit_of(planned[0].target).identity
    issues = []
    for query in planned[1:]:
        unit = unit_of(query.target).identity
        if unit != first:
            issues.append(
                SpecIssue(
                    f"{query.at}/privacy_unit",
                    "unit_mismatch",
                    f"this query protects the privacy unit {unit!s} but query "
                    f"{planned[0].query_id!r} protects {first!s}: a spec is charged on one "
                    "budget, which is for one privacy unit; run queries of another unit from "
                    "another spec, on another ledger",
                    detail={"unit": unit.describe(), "spec_unit": first.describe()},
                )
            )
    return issues


def _query_id(query: dict[str, Any], index: int) -> str:
    """A query's id: its own, or ``q<index>`` (its place in the spec)."""
    return str(query.get("id", f"q{index}"))


def _id_issues(spec: dict[str, Any]) -> list[SpecIssue]:
    """Each query's id names its result and its ledger entry: two queries of one spec with the
    same id (written, or a written one equal to another's default ``q<index>``) are refused,
    at the second one."""
    if "queries" not in spec:
        return []
    issues: list[SpecIssue] = []
    first: dict[str, int] = {}
    for index, query in enumerate(spec["queries"]):
        query_id = _query_id(query, index)
        if query_id in first:
            at = pointer("queries", first[query_id])
            written = "id" in query
            issues.append(
                SpecIssue(
                    pointer("queries", index, *(["id"] if written else [])),
                    "duplicate_id",
                    f"the id {query_id!r} is already the id of {at}"
                    + ("" if written else " (this query's default id): give it an id"),
                    rule="unique_ids",
                )
            )
        else:
            first[query_id] = index
    return issues


def _seed_mode_issues(spec: dict[str, Any], seed: int | None) -> list[SpecIssue]:
    """A seed (``dpkit run --seed``) means fast, seeded randomness for every query; a query
    that asks for secure randomness explicitly (its ``rng`` or the ``defaults``' says
    ``"mode": "secure"``) contradicts it and is refused, before anything is read. A query
    that says nothing about randomness runs in fast mode under a seed."""
    if seed is None:
        return []
    defaults = spec.get("defaults", {}).get("rng") if "queries" in spec else None
    asking: dict[str, list[str]] = {}
    for index, query in enumerate(spec.get("queries", [spec])):
        at = pointer("queries", index) if "queries" in spec else ""
        if "rng" in query:
            mode, where = query["rng"].get("mode"), f"{at}/rng/mode"
        elif defaults is not None:
            mode, where = defaults.get("mode"), "/defaults/rng/mode"
        else:
            continue
        if mode == "secure":
            asking.setdefault(where, []).append(_query_id(query, index))
    return [
        SpecIssue(
            where,
            "rng_conflict",
            f"{'queries' if len(ids) > 1 else 'query'} {', '.join(map(repr, ids))} "
            f"{'ask' if len(ids) > 1 else 'asks'} for secure randomness, but a seed (--seed) "
            "means fast, seeded randomness for every query: drop the seed, or set the mode "
            "to 'fast'",
            rule="rng",
        )
        for where, ids in asking.items()
    ]


def located(spec: Any, issues: Sequence[SpecIssue]) -> list[SpecIssue]:
    """``issues`` pointing at fields that are in the file: a query's field it inherits from
    ``defaults`` (``/queries/2/input/column`` where query 2 has no ``input``) is pointed at
    where it is written (``/defaults/input/column``), and the queries' identical problems
    with such a field are reported once; so is a missing dependency (one line for the
    spec, at the first query that needs it)."""
    queries = spec.get("queries") if isinstance(spec, dict) else None
    defaults = spec.get("defaults") if isinstance(spec, dict) else None
    out: list[SpecIssue] = []
    for issue in issues:
        parts = issue.pointer.split("/")  # "", "queries", i, key, ...
        if (
            isinstance(queries, list)
            and isinstance(defaults, dict)
            and len(parts) >= 4
            and parts[1] == "queries"
            and parts[2].isdigit()
            and int(parts[2]) < len(queries)
            and isinstance(queries[int(parts[2])], dict)
            and parts[3] in _DEFAULTABLE
            and parts[3] not in queries[int(parts[2])]
            and parts[3] in defaults
        ):
            issue = attrs.evolve(issue, pointer="/".join(["", "defaults", *parts[3:]]))
        missing = issue.code == "missing_dependency"
        if issue not in out and not (
            missing and any(o.code == issue.code and o.message == issue.message for o in out)
        ):
            out.append(issue)
    return out


def _plan_sql(
    query: dict[str, Any],
    at: str,
    index: int,
    *,
    seed: int | None,
    base_dir: Path,
    policy: DataPolicy,
    registry: Registry,
) -> tuple[PlannedQuery | None, list[SpecIssue]]:
    """A ``sql`` query (:mod:`dpkit.spec.sql`), bound like the others but to its own tables."""
    from dpkit.spec.sql import PROVENANCE, bind_sql

    query = {key: value for key, value in query.items() if key not in ("input", "privacy_unit")}
    target, issues = bind_sql(query, at, base_dir=base_dir, policy=policy, registry=registry)
    if target is None:
        return None, issues
    rng_spec = query.get("rng", {"mode": "secure"})
    mode, user_seed, stream = rng_spec["mode"], rng_spec.get("seed"), None
    if seed is not None:
        mode, user_seed = "fast", seed
    if user_seed is not None:
        user_seed = int(user_seed)
        stream = query_stream(user_seed, index, query)
    return PlannedQuery(
        at=at,
        query_id=_query_id(query, index),
        statistic=SQL,
        target=target,
        provenance=PROVENANCE,
        source=ColumnSource("sql tables"),
        categories=None,
        confidence=float(query.get("output", {}).get("confidence", 0.95)),
        rng_mode=mode,
        seed=user_seed,
        stream=stream,
    ), []


def plan_spec(
    spec: Any,
    *,
    registry: Registry,
    base_dir: Path,
    data_file: Path | None = None,
    seed: int | None = None,
    policy: DataPolicy | None = None,
) -> Plan:
    """Validate ``spec`` completely and bind it to mechanisms and input files, reading no
    private value; raise :class:`SpecInvalid` with every problem found, each pointing at a
    field of the file (:func:`located`)."""
    try:
        return _plan_spec(
            spec,
            registry=registry,
            base_dir=base_dir,
            data_file=data_file,
            seed=seed,
            policy=policy,
        )
    except SpecInvalid as error:
        raise SpecInvalid(located(spec, error.issues)) from None


def _plan_spec(
    spec: Any,
    *,
    registry: Registry,
    base_dir: Path,
    data_file: Path | None,
    seed: int | None,
    policy: DataPolicy | None,
) -> Plan:
    policy = policy or DataPolicy()
    seed_problems = _seed_issues(seed, "/")
    if seed_problems:
        raise SpecInvalid(seed_problems)
    if nesting_depth(spec) > MAX_SPEC_DEPTH:
        raise SpecInvalid(
            [SpecIssue("", "invalid_json", f"JSON nested deeper than {MAX_SPEC_DEPTH} levels")]
        )
    kind = "session" if isinstance(spec, dict) and "queries" in spec else "query"
    issues = _schema_issues(spec, kind, registry)
    if issues:
        raise SpecInvalid(issues)
    issues = _id_issues(spec) + _seed_mode_issues(spec, seed)
    if issues:
        raise SpecInvalid(issues)
    files: dict[tuple[int, int], FileTable] = {}
    planned: list[PlannedQuery] = []
    items = _query_items(spec)
    named = _named_columns(items)
    for index, (at, query) in enumerate(items):
        if query["statistic"] == SQL:
            found = _output_issues(query, at) + _seed_issues(
                query.get("rng", {}).get("seed"), f"{at}/rng/seed"
            )
            sql_query, bound = _plan_sql(
                query, at, index, seed=seed, base_dir=base_dir, policy=policy, registry=registry
            )
            issues += found + bound
            if sql_query is not None and not found:
                planned.append(sql_query)
            continue
        local = is_local(query)
        if local and query["mechanism"]["name"] not in local_mechanisms(
            registry, query["statistic"]
        ):
            issues.append(
                SpecIssue(
                    f"{at}/mechanism/name",
                    "unknown_mechanism",
                    f"not a local mechanism of statistic {query['statistic']!r}",
                )
            )
            continue
        if "input" not in query:
            issues.append(
                SpecIssue(
                    at or "/",
                    "schema",
                    "'input' is a required property (here or in defaults)",
                    rule="required",
                )
            )
            continue
        target, provenance, found = _bind(query, at, registry)
        issues += found
        if query["statistic"] == GRAPH and target is not None:  # an edge list: its first end
            target = target.on_column(query["input"]["column"])
        table_issues: list[SpecIssue] = []
        if local:
            table_issues = _local_table_issues(query, at)
        elif target is not None and _is_table_query(query):
            target, table_issues = _table(target, query, at)
        issues += table_issues
        output_found = _output_issues(query, at)
        issues += output_found
        rng_spec = query.get("rng", {"mode": "secure"})
        seed_found = _seed_issues(rng_spec.get("seed"), f"{at}/rng/seed")
        issues += seed_found
        source, found = open_input(
            query["input"],
            at=f"{at}/input",
            base_dir=base_dir,
            data_file=data_file,
            policy=policy,
            columns=_table_columns(query, at),
            files=files,
            named=named,
        )
        issues += found
        if target is None or source is None or seed_found or table_issues or output_found:
            continue
        categories = query["input"].get("categories")
        try:
            if query["statistic"] != GRAPH:  # takes either mode; its run costs O(n²) bits
                _dry_run(target, query, registry, "fast" if seed is not None else rng_spec["mode"])
        except InvalidParameter as error:
            where = f"{at}/rng/mode" if error.parameter == "rng" else at or "/"
            issues.append(SpecIssue(where, error.code, str(error)))
            continue
        except DPKitError as error:
            issues.append(SpecIssue(at or "/", error.code, str(error)))
            continue
        except Exception as error:  # a plugin bug must not become a traceback
            issues.append(SpecIssue(at or "/", "plugin_error", f"{type(error).__name__}: {error}"))
            continue
        mode, user_seed, stream = rng_spec["mode"], rng_spec.get("seed"), None
        if seed is not None:  # a seed: fast mode (a query asking for secure was refused)
            mode, user_seed = "fast", seed
        if user_seed is not None:
            user_seed = int(user_seed)
            stream = query_stream(user_seed, index, query)
        planned_query = PlannedQuery(
            at=at,
            query_id=_query_id(query, index),
            statistic=query["statistic"],
            target=target,
            provenance=provenance,  # type: ignore[arg-type]
            source=source,
            categories=tuple(categories) if categories is not None else None,
            confidence=float(query.get("output", {}).get("confidence", 0.95)),
            rng_mode=mode,
            seed=user_seed,
            stream=stream,
            local=local,
        )
        needed = getattr(target, "columns_needed", None)
        source.expect(needed() if needed is not None else None, planned_query.read_kind())
        planned.append(planned_query)
    issues += _unit_issues(planned)
    if issues:
        raise SpecInvalid(issues)
    budget = spec.get("budget") if kind == "session" else spec.get("session_budget")
    return Plan(
        kind=kind,
        dataset=spec.get("dataset"),
        budget=(budget["epsilon"], budget.get("delta", 0.0)) if budget else None,
        composition=budget.get("composition", "basic") if budget else None,
        queries=tuple(planned),
        spec_sha256=spec_hash(spec),
        unit=unit_of(planned[0].target).identity if planned else None,
    )

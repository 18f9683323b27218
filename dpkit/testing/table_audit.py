"""Auditing a SQL statement (:func:`audit_sql`; any grouped table query through
:func:`audit_releases`) on id neighbours: a table D, and D′ = D plus every row of one *heavy*
person x, in both randomness modes.

A ``dpkit.sql(...)`` release costs a tenth of a second or more, so the thousands of releases
of :func:`~dpkit.testing.audit_query` are out of reach. This audit draws them from a few
releases of a *replicated* table instead:

* **Replicas.** The audited table holds R replicas of D (or of D′); every id and every group
  key is tagged with its replica (``"r:value"``). A person's rows lie in one replica only, and
  bounding keeps or drops each id's rows by its own rows alone, so one release of the
  replicated table is R independent releases on D (or D′): the cells of the groups ``r:…``
  are exactly one run on replica r. A group a release leaves out (partition selection) is the
  value −∞: absence is an outcome like any other.
* **Certificate** (the statistical tier of :mod:`dpkit.testing.blackbox`, for whole tables).
  On a first batch (one release of each table) choose the event S — a half-line
  ``{y ≥ t}`` or ``{y ≤ t}`` of one released cell, or a group's absence — and the direction
  with the largest bound; then, on a fresh batch, certify
  ε_lb = ln((LCB(P[M(D′) ∈ S]) − δ) / UCB(P[M(D) ∈ S])) (or D and D′ swapped), with
  one-sided Clopper–Pearson bounds at level α/2 each (Clopper & Pearson 1934; the method of
  Ding et al. 2018, "Detecting Violations of Differential Privacy", CCS). With probability
  ≥ 1 − α the true ε on this pair is at least ε_lb, whichever event was chosen, since the
  choice saw only the first batch.
* **Both randomness modes** (:mod:`dpkit.testing.modes`): fast mode on a seeded numpy
  Generator, secure mode on a keyed SecureRandom, each with its own batches, event and
  certificate at level α/m for the m modes audited.

**False positives.** A statement that keeps its claim is reported as a violation
(ε_lb > ε in some mode) with probability at most α over the whole audit (α/m per mode, by
the union bound), for any number of replicas: fewer replicas cost power, never confidence.

**What a pass proves, and what not.** ε_lb is an empirical *lower* bound on the ε of this one
pair (D, D′): a violation proves the claim false — for the privacy unit audited — while a pass
only says that no violation was found on this pair with this power. It is no proof of privacy,
and says nothing of other tables, other persons, or of the claim's δ beyond its effect on this
pair's events.

The audit spends no budget and is not a release: its report (thresholds, hit counts) comes
from thousands of releases of D, so D is a small test table, never data to protect.

A LIMIT or OFFSET is refused: over the replicas it would keep other rows than on one table
(post-processing cannot add to ε, so audit the statement without it). The replicas need the
group and id columns as text: a statement whose groups are not plain columns of its table, or
which computes with a group or the id column elsewhere, is refused before anything runs, as is
one without a GROUP BY.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidParameter, SqlError
from dpkit.testing.blackbox import Progress, StatisticalResult
from dpkit.testing.exact import ExactResult
from dpkit.testing.fit import FitResult
from dpkit.testing.modes import MODES, Mode, check_modes, mode_alpha, mode_generator
from dpkit.testing.report import AuditReport

__all__ = [
    "REPLICAS",
    "Certificate",
    "Release",
    "audit_releases",
    "audit_sql",
    "by_replica",
    "certify",
    "replicate",
    "tag_keys",
]

#: Default replicas per release: the releases per input of the tested pair, in each mode.
REPLICAS = 2_000
#: The most rows a replicated table may hold (R times the rows of D′).
MAX_ROWS = 5_000_000
#: Quantiles of a cell's values tried as thresholds on the selection batch.
_THRESHOLDS = np.linspace(0.02, 0.98, 49)

#: One batch of releases: ``release(with_x, rng)`` is the (R, cells) array of R independent
#: releases on D (``with_x`` False) or D′ (True), drawn with the generator ``rng``.
Release = Callable[[bool, Any], NDArray[np.float64]]


# -- replicas ----------------------------------------------------------------------------------


def _tag(values: Any, replicas: int) -> Any:
    """``values`` (an Arrow array of n values) R times, as text ``"r:value"`` for replica r."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    text = pc.cast(values, pa.string())
    tiled = pa.concat_arrays([text] * replicas) if replicas else pa.array([], pa.string())
    prefix = pa.array(np.repeat(np.arange(replicas), n).astype(str))
    return pc.binary_join_element_wise(prefix, tiled, ":")


def replicate(table: Any, replicas: int, tagged: Sequence[str]) -> Any:
    """R copies of a PyArrow ``table`` in one, the ``tagged`` columns (the id and the group
    columns) as text ``"r:value"`` for the copy r; the others unchanged."""
    import pyarrow as pa

    n = table.num_rows
    copies = table.take(pa.array(np.tile(np.arange(n), replicas), pa.int64()))
    for name in tagged:
        index = copies.schema.get_field_index(name)
        copies = copies.set_column(index, name, _tag(table.column(name).combine_chunks(), replicas))
    return copies


def tag_keys(keys: Iterable[Any], replicas: int) -> list[Any]:
    """Every replica's copy of each group key (a value, or a tuple of one per group column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = list(keys)
    if not keys:
        return []
    width = len(keys[0]) if isinstance(keys[0], tuple) else 0
    columns = [[k[i] for k in keys] for i in range(width)] if width else [keys]
    texts = [pc.cast(pa.array(c), pa.string()).to_pylist() for c in columns]
    found: list[Any] = []
    for r in range(replicas):
        for row in zip(*texts, strict=True):
            tagged = tuple(f"{r}:{v}" for v in row)
            found.append(tagged if width else tagged[0])
    return found


def by_replica(
    keys: Sequence[Any],
    columns: Sequence[Sequence[Any]],
    replicas: int,
    groups: Sequence[Any],
) -> NDArray[np.float64]:
    """The (R, groups × columns) cells of one release over a replicated table: ``keys`` are
    its rows' group keys (``"r:key"``, or tuples of them), ``columns`` their released values,
    ``groups`` the untagged keys in the order of the cells. A group the release left out,
    or a value that is missing or not a number, is −∞."""
    index = {group: i for i, group in enumerate(groups)}
    width = max(len(columns), 1)
    out = np.full((replicas, len(groups) * width), -np.inf)
    for row, key in enumerate(keys):
        parts = key if isinstance(key, tuple) else (key,)
        split = [str(part).split(":", 1) for part in parts]
        replica = int(split[0][0])
        plain = tuple(rest for _, rest in split)
        group = index[plain if isinstance(key, tuple) else plain[0]]
        for j, column in enumerate(columns):
            out[replica, group * width + j] = _cell(column[row])
    return out


def _cell(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return -math.inf
    return number if not math.isnan(number) else -math.inf


# -- the certificate ---------------------------------------------------------------------------


@attrs.frozen
class Certificate:
    """One mode's certified lower bound: ``epsilon`` (ε_lb), the chosen event (``cell``,
    ``threshold``, ``sign``: {sign·y ≥ sign·t}), whether D′ is the numerator
    (``larger_first``) and the fresh batch's hits in the numerator's and the denominator's
    releases out of ``trials`` each. ``epsilon`` is 0 when no event bounds anything."""

    epsilon: float
    cell: int = -1
    threshold: float = -math.inf
    sign: int = 1
    larger_first: bool = True
    hits: tuple[int, int] = (0, 0)
    trials: int = 0


def _bound(
    hits_a: NDArray[np.int64], hits_b: NDArray[np.int64], trials: int, delta: float, alpha: float
) -> NDArray[np.float64]:
    """ln((LCB(p_a) − δ) / UCB(p_b)) for each pair of hit counts out of ``trials``, with
    one-sided Clopper–Pearson bounds at α/2 each (Clopper & Pearson 1934: the Beta quantiles
    B(α/2; k, n − k + 1) and B(1 − α/2; k + 1, n − k)); 0 where the lower bound does not
    exceed δ."""
    from scipy import stats  # type: ignore[import-untyped]

    a = np.asarray(hits_a, dtype=np.float64)
    b = np.asarray(hits_b, dtype=np.float64)
    lower = np.where(a > 0, stats.beta.ppf(alpha / 2, np.maximum(a, 1), trials - a + 1), 0.0)
    upper = np.where(
        b < trials, stats.beta.ppf(1 - alpha / 2, b + 1, np.maximum(trials - b, 1)), 1.0
    )
    excess = lower - delta
    with np.errstate(divide="ignore"):
        return np.where(excess > 0, np.log(np.maximum(excess, 1e-300) / upper), 0.0)


def _hits(
    a: NDArray[np.float64], b: NDArray[np.float64], thresholds: NDArray[np.float64], sign: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Hits of the events {sign·y ≥ sign·t}, one per threshold t, in ``a`` and ``b``."""
    t = sign * thresholds[:, None]
    return np.sum(sign * a[None, :] >= t, axis=1), np.sum(sign * b[None, :] >= t, axis=1)


def certify(
    selection: Sequence[NDArray[np.float64]],
    test: Sequence[NDArray[np.float64]],
    *,
    delta: float = 0.0,
    alpha: float = 1e-7,
) -> Certificate:
    """The event with the largest bound on the ``selection`` batch ([D's, D′'s] releases),
    certified on the fresh ``test`` batch at level ``alpha`` (module docstring)."""
    trials = selection[0].shape[0]
    best: tuple[float, tuple[int, float, int, bool] | None] = (0.0, None)
    for cell in range(selection[0].shape[1]):
        small, large = selection[0][:, cell], selection[1][:, cell]
        both = np.concatenate([small, large])
        finite = both[np.isfinite(both)]
        # −∞: whether the group is released at all ({y ≤ −∞} is its absence)
        found = np.quantile(finite, _THRESHOLDS) if finite.size else np.empty(0)
        thresholds = np.append(found, -math.inf)
        for sign in (1, -1):
            for larger_first in (True, False):
                a, b = (large, small) if larger_first else (small, large)
                bounds = _bound(*_hits(a, b, thresholds, sign), trials, delta, alpha)
                at = int(np.argmax(bounds))
                if bounds[at] > best[0]:
                    best = (float(bounds[at]), (cell, float(thresholds[at]), sign, larger_first))
    if best[1] is None:
        return Certificate(0.0, trials=test[0].shape[0])
    cell, t, sign, larger_first = best[1]
    small, large = test[0][:, cell], test[1][:, cell]
    a, b = (large, small) if larger_first else (small, large)
    hits = _hits(a, b, np.array([t]), sign)
    bound = max(float(_bound(*hits, small.shape[0], delta, alpha)[0]), 0.0)  # ε ≥ 0 holds
    return Certificate(
        bound, cell, t, sign, larger_first, (int(hits[0][0]), int(hits[1][0])), small.shape[0]
    )


def _event(certificate: Certificate, cells: Sequence[str]) -> str:
    if certificate.cell < 0:
        return "none (no event bounds ε above 0 on the selection batch)"
    name = cells[certificate.cell] if certificate.cell < len(cells) else f"cell {certificate.cell}"
    if certificate.threshold == -math.inf:
        return f"{name} left out" if certificate.sign < 0 else f"{name} released"
    shown = "≥" if certificate.sign > 0 else "≤"
    return f"{name} {shown} {certificate.threshold:.4g}"


def audit_releases(
    release: Release,
    *,
    epsilon: float,
    delta: float = 0.0,
    name: str = "query",
    parameters: Mapping[str, Any] | None = None,
    relation: str = "",
    inputs: tuple[str, str] = ("D", "D′"),
    cells: Sequence[str] = (),
    alpha: float = 1e-3,
    seed: int = 0,
    modes: Iterable[Mode] = MODES,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit the releases ``release`` draws on the pair (D, D′) against the claim (ε, δ):
    in each mode a selection batch and a fresh test batch, each one release of D and one of
    D′ (module docstring), certified at ``alpha`` shared by the ``modes``. ``inputs`` and
    ``cells`` name the pair and the cells in the report."""
    chosen = check_modes(modes, owner="audit_releases")
    if not (0 < alpha < 1):
        raise InvalidParameter("alpha", alpha, "a number in (0, 1)", owner="audit_releases")
    start = time.perf_counter()
    results = []
    steps = 4 * len(chosen)
    for index, mode in enumerate(chosen):
        rng = mode_generator(mode, seed, np.random.default_rng(seed))
        batches = []
        for step, with_x in enumerate((False, True, False, True)):
            if progress is not None:
                what = "selection" if step < 2 else "test"
                progress(f"{mode} mode: {what} batch", (4 * index + step) / steps)
            batches.append(release(with_x, rng))
        level = mode_alpha(alpha, chosen)
        if not any(np.isfinite(batch).any() for batch in batches):  # nothing to compare
            reason = "no release held a value: every group was left out in every replica"
            results.append(StatisticalResult(False, reason, mode=mode))
            continue
        found = certify(batches[:2], batches[2:], delta=delta, alpha=level)
        pair = inputs if not found.larger_first else (inputs[1], inputs[0])
        results.append(
            StatisticalResult(
                True,
                violation=found.epsilon > epsilon,
                epsilon_lower_bound=found.epsilon,
                confidence=1.0 - level,
                samples=sum(batch.shape[0] for batch in batches),
                samples_per_input=found.trials,
                pair=pair,
                event=_event(found, cells),
                hits=found.hits,
                pairs_screened=1,
                fit=FitResult(False, "a query declares no output distribution"),
                pair_sources="1 given",
                mode=mode,
            )
        )
    if progress is not None:
        progress("done", 1.0)
    return AuditReport(
        mechanism=name,
        parameters=dict(parameters or {}),
        claimed_epsilon=float(epsilon),
        claimed_delta=float(delta),
        exact=ExactResult(False, "a query declares no output distribution"),
        modes=tuple(results),
        alpha=alpha,
        seed=seed,
        elapsed=time.perf_counter() - start,
        subject="query",
        relation=relation,
    )


# -- SQL statements ----------------------------------------------------------------------------


def _refuse(parameter: str, value: Any, allowed: str) -> InvalidParameter:
    return InvalidParameter(parameter, value, allowed, owner="audit_sql")


def _arrow(table: Any, name: str, parameter: str) -> Any:
    """A table (a Parquet or CSV path, a pandas, Polars or PyArrow table, a DuckDB relation)
    as a PyArrow table, read as ``dpkit.sql`` reads it."""
    from dpkit.errors import InvalidData
    from dpkit.sql_statements.sources import connect, relation

    try:
        return relation(connect(), table, name=name, empty=False).to_arrow_table()
    except InvalidData as error:
        raise _refuse(parameter, type(table).__name__, str(error)) from None


def _column_names(sql: str | None) -> set[str]:
    """The columns a row-level expression (DuckDB SQL) reads."""
    if not sql:
        return set()
    import sqlglot
    from sqlglot import exp

    return {c.name for c in sqlglot.parse_one(sql, read="duckdb").find_all(exp.Column)}


def _group_columns(plan: Any, unit: str) -> list[str]:
    """The statement's group columns, each a plain column read nowhere else, and the id column
    read nowhere but in the bounding (the replicas tag them as text)."""
    import sqlglot
    from sqlglot import exp

    if not plan.groups:
        raise SqlError(
            "the audit tells the replicas apart by their groups: give the statement a GROUP BY",
            clause="GROUP BY",
        )
    columns = []
    for group in plan.groups:
        node = sqlglot.parse_one(group.expression, read="duckdb")
        if not isinstance(node, exp.Column):
            raise SqlError(
                f"the audit tags each group column with its replica; group by a column, not "
                f"{group.expression}",
                clause="GROUP BY",
            )
        columns.append(node.name)
    elsewhere = _column_names(plan.where)
    for aggregate in plan.aggregates:
        elsewhere |= _column_names(aggregate.argument)
    for join in plan.joins:
        elsewhere |= {key.name for key, _ in join.keys}
    for name in [*columns, unit]:
        if name in elsewhere:
            raise SqlError(
                f"the audit reads the column {name!r} as text tagged with its replica, and the "
                "statement computes with it outside GROUP BY; audit a statement that does not",
                clause="column",
            )
    for group in plan.groups:
        if group.output not in plan.outputs:
            raise SqlError(
                f"the audit needs each group in the released table: select {group.output!r}",
                clause="SELECT",
            )
    return columns


def _limit(plan: Any) -> None:
    import sqlglot

    post = sqlglot.parse_one(plan.post, read="duckdb")
    if post.args.get("limit") is not None or post.args.get("offset") is not None:
        raise SqlError(
            "LIMIT and OFFSET over the replicas keep other rows than on one table; audit the "
            "statement without them (post-processing cannot add to ε)",
            clause="LIMIT",
        )


def _fresh_id(ids: Any) -> Any:
    """An id no row of D has, for the heavy person x (of the id column's type)."""
    import pyarrow as pa

    taken = set(ids.to_pylist())
    if pa.types.is_integer(ids.type):
        return max((v for v in taken if v is not None), default=0) + 1
    fresh = "x"
    while fresh in taken:
        fresh += "'"
    return fresh


def _with_person(table: Any, person: Any, unit: str) -> tuple[Any, Any]:
    """D′ = D plus x's rows (the ``person`` table's, or every row of D twice), x's id fresh."""
    import pyarrow as pa

    rows = pa.concat_tables([table, table]) if person is None else person
    if set(rows.column_names) != set(table.column_names):
        # Neither table's columns are shown: a file's header is never echoed.
        raise _refuse(
            "person", "a table with other columns", "a table of x's rows with the table's columns"
        )
    if rows.num_rows == 0:
        raise _refuse("person", 0, "a table of at least one row (the heavy person's)")
    x = _fresh_id(table.column(unit))
    rows = rows.select(table.column_names)
    index = rows.schema.get_field_index(unit)
    rows = rows.set_column(
        index, unit, pa.array([x] * rows.num_rows, table.schema.field(unit).type)
    )
    try:
        rows = rows.cast(table.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        raise _refuse(
            "person", "rows whose columns do not cast", "x's rows with the table's column types"
        ) from None
    return pa.concat_tables([table, rows]), x


def audit_sql(
    statement: str,
    *,
    table: Any,
    person: Any = None,
    privacy_unit: str | None = None,
    options: Mapping[str, Any] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    keys: Any = None,
    dialect: str = "duckdb",
    bounding: str = "numpy",
    replicas: int = REPLICAS,
    alpha: float = 1e-3,
    seed: int = 0,
    modes: Iterable[Mode] = MODES,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit a SQL statement on id neighbours and return the :class:`AuditReport` (module
    docstring: the replicas, the certificate, what a pass proves).

    ``statement``, ``options``, ``bounds``, ``keys``, ``dialect`` and ``bounding`` are those of
    :func:`dpkit.sql`. ``table`` is D, the statement's one private table (a Parquet or CSV
    path, a pandas, Polars or PyArrow table, a DuckDB relation: keep it small, it is copied
    ``replicas`` times); D′ is D plus every row of one new person x: the rows of ``person``
    (a table with D's columns; its id column is replaced by x's id), by default every row of
    D twice, so that x has twice as many rows in each group as D. ``privacy_unit`` is the
    column naming a person (default: the statement's ``privacy_unit_column``; give it to
    audit a statement that declares none, or another, at the level of persons).
    ``replicas`` are the releases per table in each batch; ``alpha`` (shared by the
    ``modes``, default both) is the probability that a statement keeping its claim is
    reported as a violation. Everything above is checked — the statement, its options, the
    tables' schemas — before any release runs.
    """
    from dpkit.sql_statements.query import sql
    from dpkit.units import IdUnit

    chosen = check_modes(modes, owner="audit_sql")
    if not (0 < alpha < 1):
        raise _refuse("alpha", alpha, "a number in (0, 1)")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 100:
        raise _refuse("replicas", replicas, "an integer >= 100")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _refuse("seed", seed, "an integer >= 0")
    if table is None:
        raise _refuse("table", None, "the statement's table D (a path, a frame or a relation)")
    probe = sql(statement, options=options, bounds=bounds, keys=keys, dialect=dialect)
    plan = probe.plan
    declared = probe.unit.column if isinstance(probe.unit, IdUnit) else None
    unit = privacy_unit if privacy_unit is not None else declared
    if unit is None:
        raise _refuse(
            "privacy_unit",
            None,
            "the column naming each person: the statement declares no privacy_unit_column",
        )
    if not isinstance(unit, str) or (declared is not None and unit != declared):
        raise _refuse("privacy_unit", unit, f"the statement's privacy unit column {declared!r}")
    groups = _group_columns(plan, unit)
    _limit(plan)
    if "public_groups" in plan.options:
        raise _refuse(
            "options", "public_groups", "public keys given as keys= (the audit tags them)"
        )
    small = _arrow(table, plan.table, "table")
    for name in {unit, *groups}:
        if name not in small.column_names:
            raise _refuse("table", f"no column {name!r}", f"a table with a column {name!r}")
        if small.column(name).null_count:
            raise _refuse("table", name, "no NULL in the id and group columns")
    extra = None if person is None else _arrow(person, "person", "person")
    large, x = _with_person(small, extra, unit)
    if replicas * large.num_rows > MAX_ROWS:
        raise _refuse(
            "replicas",
            replicas,
            f"at most {MAX_ROWS // large.num_rows} for a D′ of {large.num_rows} rows "
            f"(a replicated table of at most {MAX_ROWS} rows; give a smaller table)",
        )
    tagged = [unit, *groups]
    tables = {False: replicate(small, replicas, tagged), True: replicate(large, replicas, tagged)}
    public_keys = _public_keys(keys)
    query = sql(
        statement,
        tables={plan.table: tables[False]},
        options=options,
        bounds=bounds,
        keys=None if public_keys is None else tag_keys(public_keys, replicas),
        dialect=dialect,
        bounding=bounding,
    )
    for found in tables.values():  # the public phase, before any release
        query.check_input({plan.table: found})
    order = _texts(public_keys) if public_keys is not None else _distinct(large, groups)
    outputs = [g.output for g in plan.groups]
    values = [name for name in plan.outputs if name not in outputs]
    cells = [f"{key}/{name}" for key in order for name in values]

    def release(with_x: bool, rng: Any) -> NDArray[np.float64]:
        result = query.run({plan.table: tables[with_x]}, rng=rng)
        at = {c: i for i, c in enumerate(result.columns)}
        rows = result.rows
        if len(outputs) == 1:
            found_keys: list[Any] = [row[at[outputs[0]]] for row in rows]
        else:
            found_keys = [tuple(row[at[o]] for o in outputs) for row in rows]
        columns = [[row[at[name]] for row in rows] for name in values]
        return by_replica(found_keys, columns, replicas, order)

    claim = query.privacy
    relation = (
        f"id neighbours ({unit!r}): the table ({small.num_rows} rows) and it plus the "
        f"{large.num_rows - small.num_rows} rows of one person x, {replicas} replicas each"
    )
    return audit_releases(
        release,
        epsilon=float(claim.epsilon),
        delta=float(claim.delta),
        name="sql",
        parameters={"statement": plan.text, "bounding": bounding},
        relation=relation,
        inputs=("D", f"D′ = D + x ({x!r})"),
        cells=cells,
        alpha=alpha,
        seed=seed,
        modes=chosen,
        progress=progress,
    )


def _public_keys(keys: Any) -> list[Any] | None:
    """The public keys given beside the statement (already checked by ``dpkit.sql``)."""
    if keys is None:
        return None
    if isinstance(keys, Mapping):
        return list(next(iter(keys.values())))
    return list(keys)


def _texts(keys: Sequence[Any]) -> list[Any]:
    """Group keys as the release's tagged keys show them: Arrow's text of each value."""
    return [
        key.split(":", 1)[1] if isinstance(key, str) else tuple(p.split(":", 1)[1] for p in key)
        for key in tag_keys(keys, 1)
    ]


def _distinct(table: Any, columns: Sequence[str]) -> list[Any]:
    """The distinct group keys of ``table``, in first-seen order, as the release shows them
    (Arrow's text of each value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = [pc.cast(table.column(c), pa.string()).to_pylist() for c in columns]
    found: dict[Any, None] = {}
    for row in zip(*texts, strict=True):
        found[row if len(columns) > 1 else row[0]] = None
    return list(found)

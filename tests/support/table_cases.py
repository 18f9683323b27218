"""Table queries on adversarial tables, for the property tests of the table layer.

Every registered statistic with a table form (``Stat(...).on(column, by=..., keys=...,
unit=...)``) is drawn from here: :data:`STATISTICS` is read from the registry, so a new
statistic joins the properties without a change to them; :func:`statistics` draws its
parameters (dpkit's own statistics adversarially, a third party's at its declared defaults and
typical ranges). :func:`cases` draws a :class:`Case`: an adversarial table
(:func:`dpkit.testing.strategies.logical_tables`), a query over it and the privacy unit that
a neighbour removes (:meth:`Case.neighbour`).

What the noise is calibrated to is read from the query's noise mechanisms
(``TableQuery.noise_mechanisms``) and compared with the pre-noise aggregates
(:func:`answers`): :func:`distance` is the norm of the change of each noised answer, which
:func:`calibration` bounds.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from dpkit_central import Aggregates, Count, Histogram, Mean, PrivateKeys, PublicKeys, Quantile, Sum
from hypothesis import HealthCheck, Phase, event, reject
from hypothesis import strategies as st

import dpkit
from dpkit.params import BOUND, Labels, parameter_specs
from dpkit.tables import as_frame, narwhals
from dpkit.testing.strategies import logical_tables, public_keys
from dpkit.testing.tables import (
    ENGINES,
    GROUPS,
    ID,
    INTEGER_STORAGES,
    LABEL_STORAGES,
    NUMBER_STORAGES,
    STORAGES,
    TEXT_STORAGES,
    VALUE,
    LogicalTable,
    Unrepresentable,
    held,
    key_group,
    refused_keys,
    same_value,
)
from dpkit.testing.tables import person as person_of

REGISTRY = dpkit.get_registry()
#: The registered statistics that run over tables (``.on(...)``), by name.
STATISTICS = sorted(name for name, info in REGISTRY.queries.items() if hasattr(info.cls, "on"))
#: The engines that need no cluster, and Dask's two (``dataframe.convert-string`` off, on).
#: DuckDB's relations are among the first: one machine's lazy frames, bounded on the collected
#: rows or in DuckDB (``duckdb[bounded]``, run within :func:`~dpkit.testing.tables.held`).
DASK = tuple(engine for engine in ENGINES if engine.startswith("dask"))
EAGER = tuple(engine for engine in ENGINES if engine not in DASK)
#: Group storages: every label storage, text twice as often (on a text column a key list may
#: name a group by a number for its text, or by both: keys equal once coerced, refused).
GROUP_STORAGES = (*LABEL_STORAGES, *TEXT_STORAGES)
#: The stratum where public keys meet text group columns (a number key names its text), drawn
#: on its own as well (``cases(name, **SPELLED_KEYS)``): it is a small part of all the cases.
SPELLED_KEYS: dict[str, Any] = {
    "group_storages": TEXT_STORAGES,
    "keys": ("public",),
    "groups": (1, 2),
}
#: The stratum of Arrow layouts — dictionaries (per chunk: each chunk its own), run-end
#: encoding, the view types, and text that a Parquet read turns into dictionaries — for ids,
#: groups and labels, drawn on their own as well (``cases(name, **ARROW_LAYOUTS)``).
_LAYOUTS = (
    "dictionary<string>",
    "dictionary<int64>",
    "run_end<string>",
    "run_end<int64>",
    "string_view",
    "string",
)
ARROW_LAYOUTS: dict[str, Any] = {
    "ids": (*_LAYOUTS, "binary_view", "large_binary"),
    "group_storages": _LAYOUTS,
    "groups": (1, 2),
}
#: Id storages of the eager examples: every storage, an object column eight times as often —
#: its cells are the ones spelled many ways (the heavy person's id as ``1``, ``np.int64(1)``,
#: ``"1"``, ``b"1"`` on its rows; ``1.0`` and ``True`` other persons), and an engine that reads
#: them by another rule than text splits or merges persons (a third of the examples).
ID_STORAGES = (*STORAGES, *("object",) * 8)
#: Id and group storages of the Dask examples: object columns (what Dask's convert-string
#: rewrites, and what its shuffle hashes by text) half the time, and typed ones.
DASK_IDS = ("object", "object", "object", "int64", "float64", "string")
DASK_GROUPS = ("object", "object", "object", "string", "int64", "float64")
#: Hypothesis settings of the adversarial tier: derandomized (the same examples on every run,
#: locally and in CI), no example database (nothing carried between runs), no deadline (the
#: engines' speeds vary), no explain phase (it reruns a failure many times over, engines
#: included, to annotate it); a property that measures how close an example comes to its
#: bound says so with ``hypothesis.target``, and the target phase climbs towards it. Each test
#: sets its own ``max_examples``.
SETTINGS: dict[str, Any] = {
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
}
#: The value column's storages a statistic can read.
VALUE_STORAGES: dict[type[Any], tuple[str, ...]] = {
    Count: STORAGES,
    Sum: NUMBER_STORAGES,
    Mean: NUMBER_STORAGES,
    Quantile: NUMBER_STORAGES,
    Histogram: LABEL_STORAGES,
}
#: Clamping bounds: both signs, a bound at zero, fractions, and near the widest allowed (the
#: sensitivity G·R·max(|L|, |U|) must stay ≤ 1e100).
BOUNDS = ((0.0, 1.0), (-5.0, 10.0), (-2.5, 2.5), (1.0, 3.0), (-1e3, -1.0), (-1e99, 1e99))
NORMS = {"laplace": 1.0, "geometric": 1.0, "gaussian": 2.0}
#: Relative slack on a sensitivity computed in floating point (√G·R, G·R·c + g/2): an exact
#: bound below it would be a rounding of the calibration, not a finding of these properties.
SLACK = 1e-12


@attrs.frozen
class Case:
    """A query on a logical table, and the unit a neighbour removes: the row ``victim`` (None:
    no row) — under the record unit that row, under an id unit every row of its id."""

    table: LogicalTable
    query: Any
    victim: int | None
    seed: int

    def neighbour(self, engine: str) -> LogicalTable | None:
        """The table less the victim's unit as ``engine`` reads the table (an id is one person
        however it is spelled: :meth:`LogicalTable.read_on`), or None when there is none."""
        if self.victim is None:
            return None
        return self.table.without_rows(self.victim_rows(engine))

    def victim_rows(self, engine: str) -> list[int]:
        if self.victim is None:
            return []
        if isinstance(self.query.unit, dpkit.IdUnit):
            read = self.table.read_on(engine)
            return read.rows_of(ID, read.column(ID).values[self.victim])
        return [self.victim]

    def rng(self) -> np.random.Generator:
        """The release's generator: the same seed on both neighbours, so the bounding key —
        and with it every other id's kept rows — is the same on both."""
        return np.random.default_rng(self.seed)


@st.composite
def _categories(draw: st.DrawFn, table: LogicalTable) -> tuple[Any, ...]:
    """Histogram categories: values of the value column (or of its storage), each spelled one
    or more ways that name it (a number and its text, for a text column); text and integers
    only (what a histogram declares)."""
    spelled = draw(public_keys(table, (VALUE,), max_keys=4))
    labels = [
        k for k in spelled if isinstance(k, (str, numbers.Integral)) and not isinstance(k, bool)
    ]
    return tuple(dict.fromkeys(labels)) or ("1", 1)


def _noised_by(
    cls: type[Any], noises: tuple[str, ...], **params: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """``cls`` built with each noise of ``noises`` (δ for Gaussian noise), so that a falsifying
    example shows the statistic as it was constructed."""
    return st.one_of(
        *(
            st.builds(
                cls,
                noise=st.just(noise),
                delta=st.just(1e-6 if noise == "gaussian" else None),
                **params,
            )
            for noise in noises
        )
    )


def _generic(cls: type[Any], table: LogicalTable) -> st.SearchStrategy[dict[str, Any]]:
    """A third party's statistic: the middle of each typical range, clamping bounds for its
    BOUND parameters, categories from the table for a sequence; defaults elsewhere."""
    params: dict[str, Any] = {}
    for field, spec in parameter_specs(cls).items():
        if spec.typical is not None:
            low, high = spec.typical
            params[field] = math.sqrt(low * high) if low > 0 < high else (low + high) / 2
        elif spec.domain is BOUND:
            params[field] = -5.0 if field == "lower" else 10.0
    sequences = [f for f, s in parameter_specs(cls).items() if isinstance(s.domain, Labels)]
    if not sequences:
        return st.just(params)
    return st.tuples(*(_categories(table) for _ in sequences)).map(
        lambda drawn: {**params, **dict(zip(sequences, drawn, strict=True))}
    )


def statistics(name: str, table: LogicalTable) -> st.SearchStrategy[Any]:
    """The registered statistic ``name`` at adversarial parameters for ``table``."""
    cls = REGISTRY.query_info(name).cls
    epsilon = st.sampled_from([0.5, 1.0, 3.0])
    bounds = st.sampled_from(BOUNDS)
    if cls is Count:
        return _noised_by(
            Count,
            ("geometric", "laplace", "gaussian"),
            epsilon=epsilon,
            nan=st.sampled_from(["drop", "keep"]),
        )
    if cls in (Sum, Mean):
        return bounds.flatmap(
            lambda b: _noised_by(
                cls,
                ("laplace", "gaussian"),
                epsilon=epsilon,
                lower=st.just(b[0]),
                upper=st.just(b[1]),
            )
        )
    if cls is Quantile:
        return bounds.flatmap(
            lambda b: st.builds(
                Quantile,
                q=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
                lower=st.just(b[0]),
                upper=st.just(b[1]),
                epsilon=epsilon,
            )
        )
    if cls is Histogram:
        return _noised_by(
            Histogram,
            ("geometric", "laplace", "gaussian"),
            epsilon=epsilon,
            categories=_categories(table),
            other=st.booleans(),
        )
    return _generic(cls, table).map(lambda params: REGISTRY.query(name, **params))


@st.composite
def cases(
    draw: st.DrawFn,
    name: str,
    *,
    ids: tuple[str, ...] = ID_STORAGES,
    group_storages: tuple[str, ...] = GROUP_STORAGES,
    values: tuple[str, ...] | None = None,
    units: tuple[str, ...] = ("id", "record"),
    keys: tuple[str, ...] = ("public", "private"),
    groups: tuple[int, int] = (0, 2),
    min_rows: int = 1,
    max_rows: int = 12,
) -> Case:
    """A :class:`Case` for the statistic ``name``: an adversarial table whose value column
    it can read (``values``: storages, default :data:`VALUE_STORAGES`), grouped by all the
    table's group columns (``groups``: how many) with public keys spelled adversarially or
    private keys (``keys``), under an id unit (G, R in 1..3) or the record unit (``units``),
    and a victim (the heavy person, often)."""
    cls = REGISTRY.query_info(name).cls
    value_storages = values if values is not None else VALUE_STORAGES.get(cls, STORAGES)
    table = draw(
        logical_tables(
            ids=ids,
            groups=groups,
            group_storages=group_storages,
            values=value_storages,
            min_rows=min_rows,
            max_rows=max_rows,
        )
    )
    statistic = draw(statistics(name, table))
    by = tuple(g for g in GROUPS if g in table.names)
    declared: Any = None
    if by:
        kinds = {
            "public": public_keys(table, by),
            "private": st.builds(PrivateKeys, st.sampled_from([0.5, 1.0]), st.just(1e-6)),
        }
        declared = draw(st.one_of(*(kinds[k] for k in keys)))
    unit: Any = None
    if draw(st.sampled_from(units)) == "id":
        unit = dpkit.IdUnit(
            ID,
            max_rows=draw(st.integers(1, 3)),
            max_groups=draw(st.integers(1, 3)) if by else None,
        )
    column = VALUE if cls is not Count or draw(st.booleans()) else None
    try:
        query = statistic.on(column, by=by, keys=declared, unit=unit)
    except dpkit.DPKitError:  # refused before any data: no property to check
        reject()
    victim: int | None = None
    if isinstance(unit, dpkit.IdUnit):
        ids = table.column(ID)
        rows: dict[Any, list[int]] = {}  # each person's rows, as the logical table reads them
        for i, cell in enumerate(ids.values):
            person = person_of(cell, ids.storage)
            if person is not None:
                rows.setdefault(person, []).append(i)
        if rows:
            heavy = max(rows.values(), key=len)[0]
            victim = draw(st.sampled_from([heavy, *(found[0] for found in rows.values())]))
    elif table.rows:
        victim = draw(st.integers(0, table.rows - 1))
    return Case(table, query, victim, draw(st.integers(0, 2**32 - 1)))


def engines_for(case: Case, engines: tuple[str, ...]) -> tuple[str, ...]:
    """The engines of ``engines`` that can hold ``case``'s table, to draw one from: PyArrow,
    its Parquet file and Polars hold no object column (all of ``engines`` if none is left)."""
    if all(column.storage != "object" for _, column in case.table.columns):
        return engines
    return tuple(e for e in engines if e.startswith(("pandas", "dask"))) or engines


def native(table: LogicalTable, engine: str) -> Any:
    """``table`` on ``engine``, or None when the engine cannot hold it."""
    try:
        return table.native(engine)
    except Unrepresentable:
        return None


def aggregated(case: Case, frame: Any) -> Aggregates | None:
    """``case.query.aggregate(frame)`` with the case's seed, or None when it raises. A failure
    after the public phase is ``test_table_total.py``'s finding; the other properties skip
    such an example rather than report it, so that one such failure cannot hide theirs.

    Under an id unit, a case of odd seed is aggregated over its rows bounded by the
    statement-level bounding instead (``query.bound_with([], frame)``, what every SQL
    statement does: :mod:`dpkit_central.shared_bounding`), so that every property holds for
    that path too."""
    query = case.query
    try:
        with held(frame):
            if isinstance(query.unit, dpkit.IdUnit) and case.seed % 2:
                return query.bound_with([], frame, rng=case.rng()).aggregate(query)
            return query.aggregate(frame, rng=case.rng())
    except Exception:
        event("raised after the public phase (test_table_total.py's finding)")
        return None


def read_alike(case: Case, engine: str) -> tuple[Any, ...]:
    """What of the table's reading on ``engine`` an aggregate depends on: the partition of the
    rows into persons and how an id is hashed for the bounding's priorities (an id unit), and
    the kind each group and label column is read as (text, integers, float64, booleans, or an
    object column's text). Engines with one reading give identical aggregates; pandas reads
    decimals, bytes and dates as object columns, which PyArrow and Polars read as their type
    (:func:`~dpkit.testing.tables.reading`)."""
    read = case.table.read_on(engine)
    query = case.query
    persons: tuple[Any, ...] = ()
    if isinstance(query.unit, dpkit.IdUnit):
        ids = read.column(ID)
        first: dict[Any, int] = {}
        persons = tuple(
            None
            if (person := person_of(cell, ids.storage)) is None
            else first.setdefault(person, i)
            for i, cell in enumerate(ids.values)
        )
    labels = [*query.by]
    if query.column is not None and query.statistic.reads_labels:
        labels.append(query.column)
    kinds = tuple(_KINDS.get(read.column(c).storage, "") for c in labels)
    # An id that is neither a number nor text is hashed for the bounding's priorities by the
    # text an engine spells it with: which of a person's rows are kept may differ between
    # engines that spell it differently — how many may not (the other properties check that).
    words = _id_words(read.column(ID).storage, engine)
    return persons, kinds, words if isinstance(query.unit, dpkit.IdUnit) else None


def _id_words(storage: str, engine: str) -> Any:
    """How the bounding hashes an id of ``storage`` (as read) into the words its priorities
    come from (:mod:`dpkit.tables.encoding`): numbers and booleans by value, text (an object
    column's too) by its bytes — the same on every engine —, anything else by the text the
    engine spells it with, pandas' NumPy types their own way."""
    kind = _KINDS.get(storage, "")
    if kind in ("text", "object"):
        return "text"
    if storage == "decimal128":  # a decimal id by its exact value (text), not as a double
        return storage
    if kind:
        return "number"
    return storage, "numpy" if engine in ("pandas", *DASK) else "arrow"


#: The kinds of values a label storage is read as (what a group's key is released as).
_KINDS = {
    **{name: "text" for name in TEXT_STORAGES},
    **{name: "integer" for name in (*INTEGER_STORAGES, "dictionary<int64>", "run_end<int64>")},
    **{name: "float64" for name in ("float16", "float32", "float64", "decimal128")},
    "bool": "boolean",
    "object": "object",
}


def refusal(case: Case, engine: str) -> tuple[str, Any, Any] | None:
    """What the public phase must refuse in ``case``'s declared keys and categories, from the
    keys and the column types alone (:func:`~dpkit.testing.tables.refused_keys`):
    ``("keys", key, None)`` for a key the group columns cannot hold, ``("keys", a, b)`` for two
    keys that name one group, ``("categories", a, b)`` for two histogram categories that name
    one value (a category of another type is no cell, not refused); None for neither."""
    query = case.query
    table = case.table.read_on(engine)
    if isinstance(query.keys, PublicKeys):
        kinds = [table.column(c).storage for c in query.by]
        why = refused_keys(query.keys.values, kinds)
        if why is not None:
            return ("keys", *why)
    if isinstance(query.statistic, Histogram) and query.column is not None:
        storage = table.column(query.column).storage
        cells = [(c,) for c in query.statistic.categories if key_group(c, storage) is not None]
        why = refused_keys(cells, (storage,))
        if why is not None:
            return ("categories", why[0][0], why[1][0])
    return None


def _refusable(expected: tuple[str, Any, Any]) -> str:
    what, first, second = expected
    if second is None:
        return f"the key {first!r}, of a type the group column cannot hold"
    return (
        f"the {what} {first!r} and {second!r}, one value of the column's type: each would be "
        "released on its own while the sensitivity counts the group once"
    )


def frames_to_check(case: Case, engine: str, *, neighbour_needed: bool) -> list[Any] | None:
    """The case's table and its neighbour (if it has one) on ``engine``, both accepted by the
    public phase (:func:`accepted_on_both`), or None where there is nothing to check: no unit
    to remove (if ``neighbour_needed``), a table the engine cannot hold, a refusal. The
    Hypothesis event says which."""
    neighbour = case.neighbour(engine)
    if neighbour is None and neighbour_needed:
        event("no unit to remove")
        return None
    frames = [native(t, engine) for t in (case.table, neighbour) if t is not None]
    if any(f is None for f in frames):
        event(f"{engine} cannot hold the table")
        return None
    if not accepted_on_both(case, frames, engine):
        event("refused in the public phase")
        return None
    event("checked")
    return frames


def accepted_on_both(case: Case, frames: Sequence[Any], engine: str) -> bool:
    """Whether the public phase accepts the table and its neighbour (:func:`accepted`), which
    it must decide alike: from the schema and the declared keys, never from a value."""
    found = [accepted(case, frame, engine) for frame in frames]
    assert len(set(found)) <= 1, (
        f"{engine}: the public phase accepted {found} of the table and its neighbour, which "
        "have one schema: a decision that depends on the data"
    )
    return all(found)


def accepted(case: Case, frame: Any, engine: str) -> bool:
    """Whether the public phase accepts ``frame`` (a typed refusal: no property to check) —
    and it refuses the declared keys and categories exactly when :func:`refusal` says so: two
    keys that name one group would each be released with their own noise while the
    sensitivity counts the group once."""
    expected = refusal(case, engine)
    try:
        with held(frame):
            case.query.check_input(frame)
    except dpkit.InvalidParameter as refused:
        if refused.parameter in ("keys", "categories") or expected is not None:
            assert expected is not None, (
                f"{engine}: the public phase refused {refused.parameter}={refused.value!r}, "
                f"which name distinct groups of the column types: {refused}"
            )
            twice = "distinct" in refused.allowed
            assert refused.parameter == expected[0] and twice == (expected[2] is not None), (
                f"{engine}: expected the refusal of {_refusable(expected)}, got: {refused}"
            )
        return False
    except dpkit.InvalidData as refused:  # a column the query cannot read: before the keys
        assert expected is None or refused.field != "data", (
            f"{engine}: expected the refusal of {_refusable(expected)} before the schema check, "
            f"got: {refused}"
        )
        return False
    assert expected is None, f"{engine}: the public phase accepted {_refusable(expected)}"
    return True


# -- what the noise is added to, and what it is calibrated to ----------------------------------


Coordinates = dict[tuple[Any, ...], Fraction]


def _keyed(aggregates: Aggregates, array: Any) -> Coordinates:
    out: Coordinates = {}
    for key, row in zip(aggregates.keys, np.asarray(array), strict=True):
        for i, value in enumerate(np.atleast_1d(row).tolist()):
            out[(key, i)] = Fraction(value)
    return out


#: The aggregates each statistic adds noise to, one noise mechanism each, in the order of
#: ``TableQuery.noise_mechanisms`` (a quantile's are its lattice cells: :func:`answers`).
NOISED: dict[type[Any], tuple[str, ...]] = {
    Count: ("count",),
    Sum: ("sum",),
    Histogram: ("cells",),
    Mean: ("centred_sum", "count"),
    Quantile: ("lattice",),
}


def _noised(statistic: Any) -> tuple[str, ...]:
    for cls, names in NOISED.items():
        if type(statistic) is cls:
            return names
    raise NotImplementedError(
        f"tests/support/table_cases.py: say which aggregates the noise of {statistic.name!r} "
        "is added to (NOISED)"
    )


def answers(query: Any, aggregates: Aggregates) -> dict[str, Coordinates]:
    """Each answer the noise is added to, coordinate by coordinate (exactly, as fractions):
    a count's, a sum's and a histogram's cells (one noise mechanism each), a mean's centred
    sum and count (two), a quantile's records per lattice cell of each group (its exponential
    mechanism at ε/(G·R) pays once per record that comes or goes)."""
    found: dict[str, Coordinates] = {}
    for name in _noised(query.statistic):
        if name != "lattice":
            found[name] = _keyed(aggregates, aggregates.values[name])
            continue
        cells: Coordinates = {}
        for key, (lattice, counts) in zip(aggregates.keys, aggregates.lattice or (), strict=True):
            for cell, count in zip(lattice.tolist(), counts.tolist(), strict=True):
                cells[(key, cell)] = cells.get((key, cell), Fraction(0)) + count
        found[name] = cells
    return found


def _norm(mechanism: Any) -> float:
    domain = getattr(mechanism, "domain", None)
    if isinstance(domain, dpkit.plugin.VectorDomain):
        return float(domain.norm)
    return NORMS[mechanism.name]


def calibration(query: Any) -> dict[str, tuple[Fraction, float]]:
    """Each answer's sensitivity (with :data:`SLACK`) and norm, as the query's noise
    mechanisms are calibrated; a quantile's is the number of records G·R = ε/ε_group whose
    coming or going its per-group exponential mechanisms pay for together."""
    mechanisms = query.noise_mechanisms()
    names = _noised(query.statistic)
    if names == ("lattice",):
        (per_group,) = mechanisms
        return {"lattice": (Fraction(round(query.statistic.epsilon / per_group.epsilon)), 1.0)}
    slack = 1 + Fraction(SLACK)
    return {
        name: (Fraction(m.sensitivity) * slack, _norm(m))
        for name, m in zip(names, mechanisms, strict=True)
    }


def changeable(query: Any) -> int:
    """How many coordinates of a noised answer one unit can change, as the secure lattice
    noise is told (:func:`dpkit_central.statistic.noisy`): a histogram's cells
    (``Histogram.changed``), every other statistic's G groups."""
    changed = getattr(query.statistic, "changed", None)
    return int(changed(query.contribution)) if changed is not None else query.bounds()[0]


def distance(a: Coordinates, b: Coordinates, norm: float) -> Fraction:
    """‖a − b‖ in L1 (the distance) or L2 (its square), over the union of the coordinates (a
    group one side lacks is zero there)."""
    moves = [a.get(k, Fraction(0)) - b.get(k, Fraction(0)) for k in {*a, *b}]
    if norm == 1.0:
        return sum((abs(m) for m in moves), Fraction(0))
    return sum((m * m for m in moves), Fraction(0))


def within(move: Fraction, sensitivity: Fraction, norm: float) -> bool:
    return move <= (sensitivity if norm == 1.0 else sensitivity * sensitivity)


def changed_groups(a: Coordinates, b: Coordinates) -> set[Any]:
    return {k[0] for k in {*a, *b} if a.get(k, Fraction(0)) != b.get(k, Fraction(0))}


def rows_per_group(query: Any, aggregates: Aggregates) -> dict[tuple[Any, ...], int]:
    """The rows each group aggregates (after bounding): its count, its cells or its lattice."""
    values = aggregates.values
    if aggregates.lattice is not None:
        return {
            k: int(c.sum()) for k, (_, c) in zip(aggregates.keys, aggregates.lattice, strict=True)
        }
    if "cells" in values:
        return {k: int(r.sum()) for k, r in zip(aggregates.keys, values["cells"], strict=True)}
    return {k: int(n) for k, n in zip(aggregates.keys, values["count"], strict=True)}


def bounded_rows(case: Case, frame: Any) -> list[tuple[Any, tuple[Any, ...]]] | None:
    """(id, group key) of every row that survives the per-record steps and contribution
    bounding on ``frame`` (the id None under the record unit; None when a step raises: as
    :func:`aggregated`)."""
    nw = narwhals()
    query = case.query
    try:
        with held(frame):
            prepared = query._prepared(as_frame(frame, owner=query.name), case.rng())
            if isinstance(prepared, nw.LazyFrame):
                prepared = prepared.collect()
    except Exception:
        event("raised after the public phase (test_table_total.py's finding)")
        return None
    keys = [prepared.get_column(c).to_list() for c in query.by] or [[()] * prepared.shape[0]]
    by_id = isinstance(query.unit, dpkit.IdUnit)
    ids = prepared.get_column(ID).to_list() if by_id else [None] * prepared.shape[0]
    if not query.by:
        return [(person, ()) for person in ids]
    return [(person, tuple(k)) for person, *k in zip(ids, *keys, strict=True)]


def touched(case: Case, engine: str) -> list[tuple[Any, ...]]:
    """The group keys of the removed unit's rows, as ``engine`` holds them
    (:meth:`LogicalTable.read_on`)."""
    read = case.table.read_on(engine)
    return [read.row(i, case.query.by) for i in case.victim_rows(engine)]


def among(key: tuple[Any, ...], keys: Iterable[tuple[Any, ...]], storages: Sequence[str]) -> bool:
    """Whether ``key`` is one of ``keys``, each value compared as its column reads it
    (:func:`~dpkit.testing.tables.same_value`: an engine's text for an object column's ``1``
    is the logical ``1``)."""
    return any(
        len(key) == len(k)
        and all(same_value(a, b, s) for a, b, s in zip(key, k, storages, strict=True))
        for k in keys
    )

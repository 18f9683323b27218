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
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from dpkit_central import Aggregates, Count, Histogram, Mean, PrivateKeys, Quantile, Sum
from hypothesis import HealthCheck, Phase, event, reject
from hypothesis import strategies as st

import dpkit
from dpkit.params import BOUND, Sequence_, parameter_specs
from dpkit.tables import as_frame, narwhals
from dpkit.testing.strategies import logical_tables, public_keys
from dpkit.testing.tables import (
    GROUPS,
    ID,
    LABEL_STORAGES,
    NUMBER_STORAGES,
    STORAGES,
    TEXT_STORAGES,
    VALUE,
    LogicalTable,
    Unrepresentable,
    same_value,
)

REGISTRY = dpkit.get_registry()
#: The registered statistics that run over tables (``.on(...)``), by name.
STATISTICS = sorted(name for name, info in REGISTRY.queries.items() if hasattr(info.cls, "on"))
#: The engines that need no cluster, and Dask's two (``dataframe.convert-string`` off, on).
EAGER = ("pyarrow", "pyarrow[parquet]", "pandas", "pandas[arrow]", "polars")
DASK = ("dask", "dask[convert-string]")
#: Group storages: every label storage, text twice as often (on a text column a key list may
#: spell a group as a number and as its text: keys equal once coerced).
GROUP_STORAGES = (*LABEL_STORAGES, *TEXT_STORAGES)
#: The stratum where public keys meet text group columns (a number key matches its text), drawn
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
    """A query on a logical table, and the unit a neighbour removes: an id's value under an
    id unit (``None``: the table has no id), a row's index under the record unit (``None``:
    no row)."""

    table: LogicalTable
    query: Any
    victim: Any
    seed: int

    def neighbour(self) -> LogicalTable | None:
        """The table less the victim's unit, or None when there is no unit to remove."""
        if self.victim is None:
            return None
        if isinstance(self.query.unit, dpkit.IdUnit):
            return self.table.without_value(ID, self.victim)
        return self.table.without_row(self.victim)

    def victim_rows(self) -> list[int]:
        if self.victim is None:
            return []
        if isinstance(self.query.unit, dpkit.IdUnit):
            return self.table.rows_of(ID, self.victim)
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
    sequences = [f for f, s in parameter_specs(cls).items() if isinstance(s.domain, Sequence_)]
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
    ids: tuple[str, ...] = STORAGES,
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
    victim: Any = None
    if isinstance(unit, dpkit.IdUnit):
        persons = table.distinct(ID)
        if persons:
            heavy = max(persons, key=lambda p: len(table.rows_of(ID, p)))
            victim = draw(st.sampled_from([heavy, *persons]))
    elif table.rows:
        victim = draw(st.integers(0, table.rows - 1))
    return Case(table, query, victim, draw(st.integers(0, 2**32 - 1)))


def native(table: LogicalTable, engine: str) -> Any:
    """``table`` on ``engine``, or None when the engine cannot hold it."""
    try:
        return table.native(engine)
    except Unrepresentable:
        return None


def aggregated(case: Case, frame: Any) -> Aggregates | None:
    """``case.query.aggregate(frame)`` with the case's seed, or None when it raises. A failure
    after the public phase is ``test_table_total.py``'s finding; the other properties skip
    such an example rather than report it, so that one such failure cannot hide theirs."""
    try:
        return case.query.aggregate(frame, rng=case.rng())
    except Exception:
        event("raised after the public phase (test_table_total.py's finding)")
        return None


def accepted(query: Any, frame: Any) -> bool:
    """Whether the public phase accepts ``frame`` (a typed refusal: no property to check)."""
    try:
        query.check_input(frame)
    except dpkit.DPKitError:
        return False
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
    if isinstance(domain, dpkit.VectorDomain):
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


def touched(case: Case, frame: Any) -> list[tuple[Any, ...]]:
    """The group keys of the removed unit's rows as the engine holds them in ``frame`` (the
    table on that engine): a key the engine spells its own way — Dask's text for an object
    column's number — is still the unit's group."""
    nw = narwhals()
    native = as_frame(frame, owner="test")
    if isinstance(native, nw.LazyFrame):
        native = native.collect()
    columns = [native.get_column(c).to_list() for c in case.query.by]
    return [tuple(column[i] for column in columns) for i in case.victim_rows()]


def among(key: tuple[Any, ...], keys: Iterable[tuple[Any, ...]]) -> bool:
    return any(
        len(key) == len(k) and all(same_value(a, b) for a, b in zip(key, k, strict=True))
        for k in keys
    )

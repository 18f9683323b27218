"""Queries over tables: group-by, user-level privacy, DataFrames in and out.

A :class:`TableQuery` runs a statistic — any :class:`~dpkit_central.statistic.TableStatistic`:
the built-in :class:`~dpkit_central.Count`, :class:`~dpkit_central.Sum`,
:class:`~dpkit_central.Mean`, :class:`~dpkit_central.Histogram`,
:class:`~dpkit_central.Quantile` — over a column of a table (pandas, Polars, PyArrow; lazily
Polars LazyFrames and other narwhals backends), optionally per group, under a privacy unit:

>>> import pandas as pd, numpy as np
>>> from dpkit_central import Sum, TableQuery
>>> from dpkit import IdUnit
>>> visits = pd.DataFrame({"user": [1, 1, 2, 3], "city": ["a", "b", "a", "a"],
...                        "spent": [10.0, 20.0, 5.0, 7.0]})
>>> query = TableQuery(Sum(lower=0, upper=50, epsilon=1.0), column="spent", by="city",
...                    keys=["a", "b"], unit=IdUnit("user", max_rows=2, max_groups=1))
>>> query.aggregate(visits, rng=np.random.default_rng(0)).keys
(('a',), ('b',))

**Steps** (each a narwhals expression over the frame; only the last two run on the driver).
The pipeline is the same for every statistic; what differs is asked of the statistic
(:mod:`dpkit_central.statistic`), never switched on here:

1. *per-record transformations*: rows whose id or group key is missing are dropped, rows whose
   key is not among the public keys are dropped, values are cleaned by the statistic's
   declared policy (missing values dropped, values clamped to [L, U], histogram values outside
   the categories dropped or counted as "other");
2. *contribution bounding* under an id unit (:func:`dpkit.tables.bound_contributions`): at most
   G = ``max_groups`` groups per id and R = ``max_rows`` rows per (id, group), chosen at random
   from the release's random source;
3. *aggregation*: per group, elementary aggregations (count, sum of clamped values, sum of
   centred values, cell counts; the number of distinct ids for partition selection), collected
   as small arrays (:class:`Aggregates`);
4. *partition selection* (private keys only; :mod:`dpkit_central.partition_selection`);
5. *noise*, drawn once on the driver, calibrated to the sensitivities below.

**Sensitivities** (adding or removing one privacy unit with all its rows, after bounding; a
record unit is G = R = 1). With public keys an id can touch at most min(G, #keys) groups, and
an ungrouped query one group, so G is replaced by that (never by anything read from the data):

=========  ==================  ==================  =========================================
statistic  L1 (Laplace, geom.)  L2 (Gaussian)      coordinates that can change
=========  ==================  ==================  =========================================
count      G·R                 √G·R                G
sum        G·R·max(|L|, |U|)   √G·R·max(|L|, |U|)  G
mean       G·R·(U−L)/2 and G·R  √G·R·(U−L)/2, √G·R  G (centred sum, count; as :class:`Mean`)
histogram  G·R                 √G·R                G·min(R, cells)
quantile   exponential mechanism per group at ε/(G·R) with Δu = 1
=========  ==================  ==================  =========================================

An id moves each of its ≤ G groups' count by ≤ R and each clamped row adds at most
max(|L|, |U|) to a sum, so the L1 change is at most G·R·c and the L2 change √(G·(R·c)²). In a
histogram an id's R rows in one group change that group's cells by R in L1 and at most R in
L2 (all in one cell). A group's quantile utility −|#{x < v} − q·n| moves by at most R·max(q,
1 − q) ≤ R when R rows come or go, so the exponential mechanism at ε/(G·R) with Δu = 1 is
ε/G-DP per group, and an id touches ≤ G groups (basic composition, Dwork & Roth 2014, Theorem
3.16). The event of the release is the statistic's own (its noise is calibrated to the larger
sensitivity); with private keys the partition selection's (ε_s, δ_s) is added by basic
composition. Secure-mode lattice noise covers the rounding of the coordinates that can change
only (:meth:`~dpkit_central.Laplace.randomize`, ``changed``).

**Keys.** Public keys (:class:`PublicKeys`, or a plain list): every key appears in the output,
an absent one as a noisy zero; a key of the data not in the list is dropped. Private keys
(:class:`PrivateKeys`): the keys found in the data, released only if partition selection keeps
them. Keys are matched by value in the key column's type (:mod:`dpkit_central.keys`): on a
text column a number key matches its text (the key ``1`` matches the cell ``"1"``), an
``object`` column is read as text, and two declared keys that are one group are refused.

**Results** (:class:`TableResult`) come back as a table of the same kind as the input
(:meth:`TableResult.table`), with the noise scale and the confidence interval of every cell.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from dpkit.plugin import (
    FIRST,
    ApproximateDP,
    Bounding,
    BoundingKey,
    ColumnKind,
    DPKitError,
    IdUnit,
    InvalidData,
    InvalidParameter,
    PrivacyEvent,
    RecordUnit,
    as_frame,
    bound_contributions,
    column_kinds,
    exact,
    implementation,
    is_table,
    narwhals,
    per_record,
    privacy_unit,
    require_columns,
    resolve_rng,
)
from dpkit_central.accuracy import Accuracy, check_alpha
from dpkit_central.aggregates import Aggregates, aligned, collect, key_tuples, sorted_keys
from dpkit_central.keys import KEYS_PATH, LABELS, PrivateKeys, PublicKeys, canonical_keys
from dpkit_central.partition_selection import PartitionSelection
from dpkit_central.records import (
    missing,
    only_keys,
    only_keys_expr,
    plain_labels,
    unsigned_zero,
)
from dpkit_central.statistic import Contribution, TableStatistic
from dpkit_central.table_result import TableResult

if TYPE_CHECKING:
    from dpkit_central.shared_bounding import BoundedRows

__all__ = ["TableQuery"]

_ANY: tuple[ColumnKind, ...] = ("number", "boolean", "text", "object", "other")
#: Where the group columns sit in a query's JSON form (an error's path).
_BY = ("group_by", "columns")


def _names(value: Any) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidParameter(
                "by", value, "column names (non-empty strings)", owner="table", path=_BY
            )
    if len(set(names)) != len(names):
        raise InvalidParameter("by", value, "distinct column names", owner="table", path=_BY)
    return names


def _keys(value: Any, self: Any) -> PublicKeys | PrivateKeys | None:
    if value is None or isinstance(value, (PublicKeys, PrivateKeys)):
        return value
    if isinstance(value, dict):  # a selection budget (the spec's form): private keys
        if set(value) != {"epsilon", "delta"}:
            raise InvalidParameter(
                "keys",
                value,
                "a selection budget {'epsilon': ..., 'delta': ...}",
                owner="table",
                path=KEYS_PATH,
            )
        return PrivateKeys(epsilon=value["epsilon"], delta=value["delta"])
    if value == "private":
        raise InvalidParameter(
            "keys",
            value,
            "PrivateKeys(epsilon=..., delta=...): private keys need a partition-selection budget",
            owner="table",
            path=KEYS_PATH,
        )
    return PublicKeys.of(value, max(len(self.by), 1))


def _unit(value: Any) -> RecordUnit | IdUnit:
    return RecordUnit() if value is None else privacy_unit(value)


def _statistic(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, TableStatistic):
        raise InvalidParameter(
            "statistic",
            value,
            "a statistic with a table face (Count, Sum, Mean, Histogram, Quantile, or any "
            "dpkit_central.statistic.TableStatistic)",
            owner="table",
        )


def _upper_float(value: Fraction) -> float:
    """The float whose exact (decimal-repr) value is the least one ≥ ``value``."""
    out = float(value)
    if exact(out) < value:
        out = math.nextafter(out, math.inf)
    return out


def _empty_like(frame: Any) -> Any:
    """No rows of ``frame`` as an eager frame of its column types, without computing a lazy
    frame (None where the engine offers none: e.g. Spark): a Polars LazyFrame's schema as an
    empty Polars DataFrame (the query then runs on Polars, as the lazy frame's does)."""
    nw = narwhals()
    if isinstance(frame, nw.DataFrame):
        return frame.head(0)
    if implementation(frame) == "polars":
        import polars as pl

        empty = pl.DataFrame(schema=frame.to_native().collect_schema())
        return nw.from_native(empty, eager_only=True)
    meta = getattr(frame.to_native(), "_meta", None)  # a Dask DataFrame's empty pandas frame
    if meta is not None and type(meta).__module__.split(".", 1)[0] == "pandas":
        return nw.from_native(meta, eager_only=True)
    return None


def _analysable(frame: Any, needs: Mapping[str, Any]) -> bool:
    """Whether the plan of a query on ``frame`` can be built and analysed by its engine
    without computing any row: a Spark frame (classic or Connect) whose needed columns are
    not ``object`` columns (those are converted by a Python function of the *collected*
    frame on engines other than Dask)."""
    if not implementation(frame).startswith("pyspark"):
        return False
    kinds = column_kinds(frame)
    return all(kinds.get(column) != "object" for column in needs)


@attrs.frozen
class TableQuery:
    """A central statistic over a table column, per group, under a privacy unit.

    Args:
        statistic: the statistic run per group (its ε, δ, bounds, noise and missing-value
            policy): any :class:`~dpkit_central.statistic.TableStatistic`.
        column: the value column (a statistic that reads none, a count, may leave it out).
        by: the group column(s); empty for one ungrouped release.
        keys: the groups: a list or :class:`PublicKeys` (released whatever the data hold) or
            :class:`PrivateKeys` (found in the data, released by partition selection). Required
            when ``by`` is given.
        unit: the privacy unit (:class:`~dpkit.RecordUnit` by default, or
            :class:`~dpkit.IdUnit`), as an object or its JSON form.

    See the module docstring for the steps, the sensitivities and their sources.
    """

    statistic: Any = attrs.field(validator=_statistic)
    column: str | None = attrs.field(default=None, kw_only=True)
    by: tuple[str, ...] = attrs.field(default=(), converter=_names, kw_only=True)
    keys: PublicKeys | PrivateKeys | None = attrs.field(
        default=None,
        converter=attrs.Converter(_keys, takes_self=True),  # type: ignore[misc]
        kw_only=True,
    )
    unit: RecordUnit | IdUnit = attrs.field(factory=RecordUnit, converter=_unit, kw_only=True)
    _selection: PartitionSelection | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        self._check()
        self.statistic.table_noise(self.contribution)  # a refusal now, not after the spend
        if isinstance(self.keys, PrivateKeys):
            selection = PartitionSelection(
                epsilon=self.keys.epsilon,
                delta=self.keys.delta,
                max_groups=self.contribution.groups,
            )
            object.__setattr__(self, "_selection", selection)

    def _check(self) -> None:
        owner = self.name
        if self.column is None and self.statistic.needs_column:
            raise InvalidParameter("column", None, "the value column of the table", owner=owner)
        if self.column is not None and (not isinstance(self.column, str) or not self.column):
            raise InvalidParameter("column", self.column, "a column name", owner=owner)
        if bool(self.by) != (self.keys is not None):
            raise InvalidParameter(
                "keys",
                self.keys,
                "given exactly when the query groups its rows (by)",
                owner=owner,
            )
        if isinstance(self.keys, PublicKeys):
            width = {len(k) for k in self.keys.values}
            if width != {len(self.by)}:
                raise InvalidParameter(
                    "keys",
                    self.keys.describe()[:3],
                    f"{len(self.by)} value(s) per key",
                    owner=owner,
                )
        if isinstance(self.unit, IdUnit):
            if self.by:
                self.unit.require_groups()
            clash = {self.unit.column} & {*self.by, self.column}
            if clash:
                raise InvalidParameter(
                    "column",
                    self.unit.column,
                    "an id column that is neither the value column nor a group column",
                    owner="privacy unit",
                    path=("privacy_unit", "column"),
                )
        if self.column is not None and self.column in self.by:
            raise InvalidParameter(
                "column", self.column, "a value column that is not a group column", owner=owner
            )

    # -- identity ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The statistic's name (what the ledger records as the mechanism)."""
        return str(self.statistic.name)

    def describe(self) -> dict[str, Any]:
        """The query as JSON: statistic and parameters, column, grouping, keys, unit."""
        out: dict[str, Any] = {
            "statistic": self.name,
            "params": {
                f.name: getattr(self.statistic, f.name) for f in attrs.fields(type(self.statistic))
            },
            "column": self.column,
            "privacy_unit": self.unit.describe(),
        }
        if self.by:
            out["group_by"] = {"columns": list(self.by)}
            if isinstance(self.keys, PublicKeys):
                out["group_by"]["keys"] = self.keys.describe()
            elif isinstance(self.keys, PrivateKeys):
                out["group_by"].update(self.keys.describe())
        return out

    # -- bounds and cost ----------------------------------------------------------------------

    @property
    def contribution(self) -> Contribution:
        """(G, R): the groups one unit can change and the rows it has in each, from the
        declared unit and keys only (G ≤ #public keys; 1 for an ungrouped query)."""
        if isinstance(self.unit, RecordUnit):
            return Contribution(1, 1)
        groups = self.unit.require_groups() if self.by else 1
        if isinstance(self.keys, PublicKeys):
            groups = min(groups, len(self.keys.values))
        return Contribution(groups, self.unit.max_rows)

    def bounds(self) -> tuple[int, int]:
        """(G, R) as a pair (:attr:`contribution`)."""
        return self.contribution.groups, self.contribution.rows

    @property
    def selection(self) -> PartitionSelection | None:
        """The partition selection of private keys (None for public keys)."""
        return self._selection

    @property
    def privacy(self) -> PrivacyEvent:
        """The statistic's event; with private keys, plus the selection's (ε_s, δ_s) by basic
        composition (rounded up to the next float whose decimal value covers the exact sum)."""
        event: PrivacyEvent = self.statistic.privacy
        if self._selection is None:
            return event
        epsilon = exact(event.epsilon) + exact(self._selection.epsilon)
        delta = exact(event.delta) + exact(self._selection.delta)
        return ApproximateDP(epsilon=_upper_float(epsilon), delta=_upper_float(delta))

    def noise_mechanisms(self) -> tuple[Any, ...]:
        """The mechanisms that will draw the noise, calibrated to the bounded contribution
        (their ``sensitivity`` is what two neighbouring tables' pre-noise aggregates can differ
        by)."""
        return tuple(self.statistic.table_noise(self.contribution))

    # -- public phase ------------------------------------------------------------------------

    def _needs(self) -> dict[str, tuple[str, tuple[ColumnKind, ...]]]:
        needs: dict[str, tuple[str, tuple[ColumnKind, ...]]] = {}
        if self.column is not None:
            needs[self.column] = ("value", self.statistic.value_kinds)
        for column in self.by:
            needs[column] = ("group", LABELS)
        if isinstance(self.unit, IdUnit):
            needs[self.unit.column] = ("id", _ANY)
        return needs

    def check_input(self, data: Any, /) -> None:
        """Public phase: ``data`` is a table with the needed columns, of kinds that can hold
        what they must, and public keys of a type the key columns can hold, no two of them one
        group (the schema and the declared keys only; no value is read)."""
        if not is_table(data):
            raise InvalidData(
                f"{self.name}: data must be a table (pandas, Polars, PyArrow, ...) with the "
                f"columns {sorted(self._needs())}, got {type(data).__name__}",
                field="data",
            )
        frame = as_frame(data, owner=self.name)
        require_columns(frame, self._needs(), owner=self.name)
        kinds, schema = column_kinds(frame), dict(frame.collect_schema())
        self._coerced_keys(kinds, schema)
        if self.column is not None:
            self.statistic.table_check(self.column, kinds[self.column], schema[self.column])
        self._dry_run(frame)

    def _coerced_keys(
        self, kinds: Mapping[str, ColumnKind], schema: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], ...] | None:
        """The public keys as the group columns hold them (None for private keys): refuses two
        declared keys that are one group of the data (:func:`~dpkit_central.keys.canonical_keys`;
        from the keys and the schema only)."""
        if not isinstance(self.keys, PublicKeys):
            return None
        return canonical_keys(self.keys, self.by, kinds, schema, owner=self.name)

    def _dry_run(self, frame: Any) -> None:
        """Steps 1–3 on no rows of ``frame``: what an engine cannot do with these column types
        (an is_in of Float32 against integer keys, a float16 group-by, a 128-bit id) fails
        here, from the schema alone, instead of after the spend. A lazy frame is never
        computed in the public phase: a Polars LazyFrame is tried on an empty DataFrame of its
        schema, a Dask frame on its empty pandas ``_meta`` (its partitions are pandas frames
        of those dtypes); on Spark (classic or Connect) the
        whole plan of steps 1–3 is built and the engine *analyses* it (its schema: types are
        resolved, no job runs); other engines are not tried."""
        empty = _empty_like(frame)
        analysed = empty is None and _analysable(frame, self._needs())
        if empty is None and not analysed:
            return
        try:
            if analysed:
                self._grouped(self._prepared(frame, np.random.default_rng(0))).collect_schema()
            else:
                self._aggregate(self._prepared(empty, np.random.default_rng(0)))
        except DPKitError:
            raise
        except Exception:
            schema = frame.collect_schema()
            types = {c: str(schema[c]) for c in self._needs()}
            raise InvalidData(
                f"{self.name}: the table's column types {types} cannot be processed by this "
                "query (give numbers, text or booleans of common types)",
                field="data",
            ) from None

    def releases(self, data: Any, /) -> int:
        return 1

    def columns_needed(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The columns read from a file and how each cell is converted
        (:mod:`dpkit.spec.columnar`): ``("numbers", ())``, ``("labels", texts kept even if they
        spell a missing token)`` or ``("ids", ())``."""
        needed: dict[str, tuple[str, tuple[str, ...]]] = {}
        if self.column is not None:
            needed[self.column] = self.statistic.file_cells()
        for i, column in enumerate(self.by):
            keep: tuple[str, ...] = ()
            if isinstance(self.keys, PublicKeys):
                keep = tuple(str(k[i]) for k in self.keys.values)
            needed[column] = ("labels", keep)
        if isinstance(self.unit, IdUnit):
            needed[self.unit.column] = ("ids", ())
        return needed

    # -- private phase -----------------------------------------------------------------------

    def _prepared(self, frame: Any, rng: Any) -> Any:
        """Steps 1–2: the per-record transformations and the contribution bounding (total).

        Step 1 is decided from the schema alone (the column kinds and types) and then runs
        where the rows are (:func:`dpkit.tables.per_record`): on each partition of a Dask
        frame as one task, on other engines as their own expressions."""
        schema = dict(frame.collect_schema())
        kinds = column_kinds(frame)
        records = functools.partial(
            self._records, kinds=kinds, schema=schema, keys=self._coerced_keys(kinds, schema)
        )
        frame = per_record(frame, records)
        if isinstance(self.unit, IdUnit):
            bounding = Bounding(
                id_column=self.unit.column,
                by=self.by,
                content=self.statistic.content,
                max_rows=self.unit.max_rows,
                max_groups=self.unit.require_groups() if self.by else None,
                key=BoundingKey.draw(rng),
            )
            frame = bound_contributions(frame, bounding)
        return frame

    def _records(
        self,
        frame: Any,
        *,
        kinds: dict[str, ColumnKind],
        schema: dict[str, Any],
        keys: tuple[tuple[Any, ...], ...] | None,
        bounded: bool = False,
    ) -> Any:
        """Step 1 on ``frame`` (any rows of the table: a whole table or one partition): the
        needed columns, the per-record drops, and the statistic's value (its fixed point,
        lattice cell or category). ``bounded``: the rows were bounded already
        (:mod:`dpkit_central.shared_bounding`), their :data:`FIRST` column is kept."""
        nw = narwhals()
        stat = self.statistic
        columns = [*self._needs(), *([FIRST] if bounded else [])]
        frame, keep = self._key_steps(frame, columns, kinds=kinds, schema=schema, keys=keys)
        kind = kinds[self.column] if self.column is not None else "other"
        dtype = schema[self.column] if self.column is not None else None
        frame, value_keep = stat.table_value(nw, frame, self.column, kind, dtype)
        # One filter for every per-record drop: a missing key or id, a missing value (the
        # statistic's policy), a key not among the public ones (one column: is_in).
        frame = self._drop(frame, [*keep, *value_keep], schema=schema, keys=keys)
        return stat.table_cells(nw, frame, self.column, kind, dtype)

    def _key_steps(
        self,
        frame: Any,
        columns: list[str],
        *,
        kinds: Mapping[str, ColumnKind],
        schema: Mapping[str, Any],
        keys: tuple[tuple[Any, ...], ...] | None,
        values: bool = True,
    ) -> tuple[Any, list[Any]]:
        """The per-record steps of the group and id columns (and of the value column when it
        holds labels, with ``values``): ``columns`` selected, object columns read as text,
        float columns' −0.0 as 0.0; and the expressions of the rows to keep (a key and an
        id present, a key among the public ones of one group column)."""
        nw = narwhals()
        if columns:  # a row count needs no column at all
            frame = frame.select(*columns)
        for column in columns:  # object columns: keys, ids and labels as text, per record
            labels = values and column == self.column and self.statistic.reads_labels
            if column == FIRST or not (column in self.by or labels or self._is_id(column)):
                continue
            if kinds[column] == "object":
                frame = plain_labels(nw, frame, column)
            elif _as_float(schema[column], person=self._is_id(column)):
                frame = frame.with_columns(unsigned_zero(nw, column))
        drops = [*self.by, *([self.unit.column] if isinstance(self.unit, IdUnit) else [])]
        keep = [~missing(nw, column, schema[column]) for column in drops]
        if keys is not None and len(self.by) == 1:
            keep.append(only_keys_expr(nw, self.by[0], keys, schema))
        return frame, keep

    def _drop(
        self,
        frame: Any,
        keep: list[Any],
        *,
        schema: Mapping[str, Any],
        keys: tuple[tuple[Any, ...], ...] | None,
    ) -> Any:
        """The rows ``keep`` keeps, then (several group columns) those of a public key."""
        nw = narwhals()
        if keep:
            frame = frame.filter(nw.all_horizontal(*keep, ignore_nulls=False))
        if keys is not None and len(self.by) > 1:
            frame = only_keys(nw, frame, self.by, keys, schema)
        return frame

    def _grouped(self, frame: Any) -> Any:
        """Step 3's plan (lazy on a lazy frame): per group (and cell) the elementary
        aggregations, not collected."""
        nw = narwhals()
        aggregations = [nw.len().alias("count")]
        if self._selection is not None:
            ids = nw.col(FIRST).sum() if isinstance(self.unit, IdUnit) else nw.len()
            aggregations.append(ids.alias("units"))
        aggregations += self.statistic.table_aggregations(nw)
        cell = self.statistic.cell
        keys = (*self.by, cell) if cell is not None else self.by
        return frame.group_by(*keys).agg(*aggregations) if keys else frame.select(*aggregations)

    def _aggregate(self, frame: Any) -> Aggregates:
        """Step 3: per-group elementary aggregations, in one pass of the engine, collected as
        small arrays (the statistic's :meth:`~dpkit_central.statistic.TableStatistic.
        table_collect`, and the ids per group for partition selection)."""
        table = collect(self._grouped(frame))
        rows = key_tuples(table, self.by)
        ordered = sorted_keys(rows) if self.by else [()]
        where = {k: i for i, k in enumerate(ordered)}
        group = np.array([where[k] for k in rows], dtype=np.int64)
        found = {  # an engine may give a null sum for no rows: that sum is 0
            name: table.get_column(name).fill_null(0).to_numpy().astype(np.int64)
            for name in table.columns
            if name in ("count", "units", "sum")
        }
        values, lattice = self.statistic.table_collect(len(ordered), group, table, found)
        if "units" in found:
            values["units"] = np.zeros(len(ordered), dtype=np.int64)
            np.add.at(values["units"], group, found["units"])
        return Aggregates(tuple(ordered), values, lattice)

    def _is_id(self, column: str) -> bool:
        return isinstance(self.unit, IdUnit) and column == self.unit.column

    def aggregate(self, data: Any, /, *, rng: Any = None) -> Aggregates:
        """Steps 1–3: the per-group aggregates before any noise (not private: for tests and
        for building on). ``rng`` draws the bounding priorities under an id unit."""
        generator = resolve_rng(rng, owner=self.name)[0]
        frame = as_frame(data, owner=self.name)
        keys = self._coerced_keys(column_kinds(frame), dict(frame.collect_schema()))
        return self._aligned(self._aggregate(self._prepared(frame, generator)), keys)

    def bound_with(
        self, others: Sequence[TableQuery], data: Any, /, *, rng: Any = None
    ) -> BoundedRows:
        """The rows of ``data`` bounded once for this query and ``others`` (one statement's
        aggregates under one id unit), each query then aggregated over them by
        :meth:`~dpkit_central.shared_bounding.BoundedRows.aggregate`
        (:mod:`dpkit_central.shared_bounding`)."""
        from dpkit_central.shared_bounding import bound_together

        return bound_together([self, *others], data, rng=rng)

    def _bounded_aggregate(self, frame: Any) -> Aggregates:
        """Steps 1 and 3 on a narwhals frame of rows bounded already, with their
        :data:`FIRST` column (:mod:`dpkit_central.shared_bounding` bounds them under this
        query's unit, or with more rows per group when this one allows one: then the
        first kept row of each pair is its one)."""
        schema = dict(frame.collect_schema())
        kinds = column_kinds(frame)
        keys = self._coerced_keys(kinds, schema)
        records = functools.partial(
            self._records, kinds=kinds, schema=schema, keys=keys, bounded=True
        )
        if isinstance(self.unit, IdUnit) and self.unit.max_rows == 1:
            frame = frame.filter(narwhals().col(FIRST) == 1)
        return self._aligned(self._aggregate(per_record(frame, records)), keys)

    def _aligned(self, found: Aggregates, keys: tuple[tuple[Any, ...], ...] | None) -> Aggregates:
        """The aggregates of the public keys (absent ones as zeros), or of the groups found."""
        if isinstance(self.keys, PublicKeys):
            assert keys is not None
            return aligned(found, self.keys.values, keys)
        if not self.by:
            return aligned(found, ((),), ((),))
        return found

    def release(
        self, aggregates: Aggregates, /, *, rng: Any = None, backend: str | None = None
    ) -> TableResult:
        """Steps 4–5: partition selection (private keys) and noise, on the driver."""
        generator = resolve_rng(rng, owner=self.name)[0]
        if self._selection is not None:
            keep = self._selection.select(aggregates.values["units"], rng=generator)
            aggregates = aggregates.subset(keep)
        released = self.statistic.table_release(aggregates, self.contribution, generator)
        return TableResult(
            query=self.name,
            by=self.by,
            keys=aggregates.keys,
            values=released.values,
            mechanism=released.mechanism,
            privacy=self.privacy,
            noise=released.noise,
            categories=released.categories,
            parts=tuple(
                TableResult(name, self.by, aggregates.keys, v, released.mechanism, self.privacy, n)
                for name, v, n in released.parts
            ),
            unit=self.unit.describe(),
            backend=backend,
            interval=released.interval,
        )

    def run(self, data: Any, /, *, rng: Any = None) -> TableResult:
        """Release the query on ``data`` (a table); total once :meth:`check_input` passed."""
        generator = resolve_rng(rng, owner=self.name)[0]
        frame = as_frame(data, owner=self.name)
        aggregates = self.aggregate(data, rng=generator)
        return self.release(aggregates, rng=generator, backend=implementation(frame))

    # -- accuracy ----------------------------------------------------------------------------

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """Cost, noise and the (1 − α) half-width of each released value, before any data is
        read, in the mode of ``rng`` (:mod:`dpkit_central.accuracy`); with private keys,
        ``selection`` is the number of ids a group needs to be released with probability
        ≥ 1 − α."""
        alpha = check_alpha(alpha, self.name)
        needed = None if self._selection is None else self._selection.units_needed(1.0 - alpha)
        found: Accuracy = self.statistic.table_accuracy(self.contribution, alpha, rng)
        return attrs.evolve(found, privacy=self.privacy, selection=needed)


def _as_float(dtype: Any, *, person: bool = False) -> bool:
    """Key and id columns read as float64 (:func:`unsigned_zero`): floats, and decimal keys
    (whose matching against number keys fails in some engines on non-integral values).

    A decimal *id* keeps its exact value: the rounding to float64 is many-to-one (the ids
    2⁵³ and 2⁵³ + 1 of a ``decimal128(38, 0)`` column are one double), and two persons read as
    one are bounded as one — adding one of them could then move the other's kept rows into
    other groups, twice the sensitivity. (Merging two *groups* is a per-record map of the key,
    applied before the bounding: harmless.) A float id is exact in float64."""
    return bool(dtype.is_float() or (dtype.is_decimal() and not person))

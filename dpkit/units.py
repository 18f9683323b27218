"""Privacy units: who a release protects, and the contribution bounds that make it so.

A differential-privacy guarantee protects the difference between *neighbouring* datasets.
:class:`RecordUnit` (the default) protects one record: neighbours differ by adding or removing
one row. :class:`IdUnit` protects one *person* (any privacy unit named by an id column):
neighbours differ by adding or removing **all** the rows that carry one id (Tumult Analytics'
``AddRowsWithID``; PipelineDP's privacy id; BigQuery's ``privacy_unit_column``). A person may
own many rows, so a query that protects rows protects a person less than it says; an id unit
makes the library bound each person's contribution before anything is aggregated:

* ``max_groups`` — at most this many groups (of a group-by) per id;
* ``max_rows`` — at most this many rows per id within each group.

Both bounds are *declared*, never inferred from the data, and a bound that is not declared is
not assumed: a grouped query with an id unit and no ``max_groups`` is refused before anything
is read (:meth:`IdUnit.require_groups`). The library enforces the bounds itself by a random
per-id sample (:mod:`dpkit.tables.bounding`), and every sensitivity derives from them.

>>> IdUnit("user", max_rows=3, max_groups=2).describe()
{'kind': 'id', 'column': 'user', 'max_rows': 3, 'max_groups': 2}

**Who is protected** is a unit's :class:`UnitIdentity`: ``record``, or ``id`` with the id
column. The bounds are not part of it: they are per query, enforced by the library, and change
the noise, not who is protected. A ledger's budget is for one identity
(:class:`dpkit.ledger.Ledger`): ε spent under a record unit bounds one *record*'s loss, and a
person with k records may lose up to kε (group privacy, Dwork & Roth 2014, Theorem 2.2), so
spends under two identities never add up to a bound on either. :func:`unit_of` says which
identity a release protects.

>>> IdUnit("user", max_rows=3).identity == IdUnit("user", max_rows=40, max_groups=2).identity
True
>>> str(IdUnit("user", max_rows=3).identity), str(RecordUnit().identity)
("id column 'user'", 'record')
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from dpkit.errors import InvalidParameter
from dpkit.params import Integer, parameter
from dpkit.privacy import NEIGHBOURS

__all__ = [
    "MAX_BOUND",
    "IdUnit",
    "PrivacyUnit",
    "RecordUnit",
    "UnitIdentity",
    "as_identity",
    "privacy_unit",
    "unit_of",
]

#: The largest contribution bound: sensitivities G·R·max(|L|, |U|) stay finite for every
#: declared clamping bound (|bound| ≤ 1e100, so G·R·|bound| ≤ 1e112 is still a double).
MAX_BOUND = 1_000_000
_BOUND = Integer(low=1, high=MAX_BOUND)


_KINDS = ("record", "id")
#: Where a unit's fields sit in a query's JSON form (an error's path).
_PATH = ("privacy_unit",)


def _neighbours(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if value not in NEIGHBOURS:
        raise InvalidParameter(
            "neighbours", value, "'add_remove' or 'replace_one'", owner="privacy unit"
        )


def _kind(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if value not in _KINDS:
        raise InvalidParameter("kind", value, "'record' or 'id'", owner="privacy unit")


@attrs.frozen
class UnitIdentity:
    """Who a privacy unit protects, without its bounds: one record (``kind="record"``), or
    everything one id of ``column`` contributes (``kind="id"``); and how neighbours differ
    in it (``neighbours``): by adding or removing it (``"add_remove"``, every built-in
    release), or by replacing it with another, the dataset size public (``"replace_one"``:
    sampling without replacement, :func:`dpkit.privacy.neighbours`).

    Two id units on the same column protect the same people whatever their bounds, so their
    spends compose on one budget; a record unit and an id unit, id units on two columns, or
    one unit under the two neighbour relations protect different neighbours and never share a
    budget.
    """

    kind: str = attrs.field(validator=_kind)
    column: str | None = attrs.field(default=None)
    neighbours: str = attrs.field(default="add_remove", kw_only=True, validator=_neighbours)

    def __attrs_post_init__(self) -> None:
        if self.kind == "id":
            _column(self, attrs.fields(UnitIdentity).column, self.column)
        elif self.column is not None:
            raise InvalidParameter(
                "column",
                self.column,
                "absent for a record unit",
                owner="privacy unit",
                path=(*_PATH, "column"),
            )

    def describe(self) -> dict[str, Any]:
        """The identity as JSON: ``{"kind": "record"}`` or ``{"kind": "id", "column": ...}``,
        with ``"neighbours": "replace_one"`` under replacement (add/remove is left out, as
        every ledger written before replacement existed stores it)."""
        found: dict[str, Any] = {"kind": "record"}
        if self.kind == "id":
            found = {"kind": "id", "column": self.column}
        if self.neighbours != "add_remove":
            found["neighbours"] = self.neighbours
        return found

    @classmethod
    def parse(cls, document: Any) -> UnitIdentity:
        """An identity from its JSON form (:meth:`describe`), and nothing else."""
        relation = document.get("neighbours") if isinstance(document, dict) else None
        if relation == "replace_one":
            document = {key: value for key, value in document.items() if key != "neighbours"}
        kind = "add_remove" if relation is None else relation
        if document == {"kind": "record"} and kind in NEIGHBOURS:
            return cls("record", neighbours=kind)
        if (
            isinstance(document, dict)
            and set(document) == {"kind", "column"}
            and document["kind"] == "id"
            and kind in NEIGHBOURS
        ):
            return cls("id", document["column"], neighbours=kind)
        raise InvalidParameter(
            "unit",
            document,
            "{'kind': 'record'} or {'kind': 'id', 'column': ...} (with 'neighbours': "
            "'replace_one' under replacement)",
            owner="privacy unit",
        )

    def __str__(self) -> str:
        who = "record" if self.kind == "record" else f"id column {self.column!r}"
        return who if self.neighbours == "add_remove" else f"{who} (replace-one neighbours)"


@attrs.frozen
class RecordUnit:
    """Protect one record (row): neighbours add or remove one row. No bounding is needed: a
    row lies in one group and is one row."""

    kind: str = attrs.field(default="record", init=False)

    @property
    def max_rows(self) -> int:
        return 1

    @property
    def max_groups(self) -> int:
        return 1

    @property
    def identity(self) -> UnitIdentity:
        """Who this unit protects (:class:`UnitIdentity`): one record."""
        return UnitIdentity("record")

    def describe(self) -> dict[str, Any]:
        """The unit as JSON (as the spec writes it and the ledger records it)."""
        return {"kind": "record"}


def _column(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidParameter(
            field.name,
            value,
            "a non-empty column name",
            owner="privacy unit",
            path=(*_PATH, field.name),
        )


@attrs.frozen
class IdUnit:
    """Protect everything one id contributes: neighbours add or remove all rows of one id.

    ``column`` names the id column; ``max_rows`` (required) bounds the rows kept per id in each
    group, ``max_groups`` the groups kept per id (required when the query groups its rows).
    Rows whose id is missing are dropped (they belong to no unit that could be bounded).
    """

    column: str = attrs.field(validator=_column)
    max_rows: int = parameter(_BOUND, doc="rows kept per id and group (R)")
    max_groups: int | None = parameter(
        _BOUND, doc="groups kept per id (G); required when grouping", default=None, optional=True
    )
    kind: str = attrs.field(default="id", init=False)
    name: ClassVar[str] = "privacy unit"
    field_path: ClassVar[tuple[str, ...]] = ("privacy_unit",)  # see dpkit.params.parameter

    def require_groups(self) -> int:
        """``max_groups``, or an :class:`~dpkit.errors.InvalidParameter` if it was not declared
        (a grouped query never assumes a bound)."""
        if self.max_groups is None:
            raise InvalidParameter(
                "max_groups",
                None,
                "an integer in [1, 1000000] when the query groups its rows: the number of "
                "groups one id may contribute to is never assumed",
                owner="privacy unit",
                path=(*_PATH, "max_groups"),
            )
        return self.max_groups

    @property
    def identity(self) -> UnitIdentity:
        """Who this unit protects (:class:`UnitIdentity`): one id of ``column``, whatever
        the bounds."""
        return UnitIdentity("id", self.column)

    def describe(self) -> dict[str, Any]:
        """The unit as JSON (as the spec writes it and the ledger records it)."""
        out: dict[str, Any] = {"kind": "id", "column": self.column, "max_rows": self.max_rows}
        if self.max_groups is not None:
            out["max_groups"] = self.max_groups
        return out


PrivacyUnit = RecordUnit | IdUnit


def privacy_unit(document: Any) -> RecordUnit | IdUnit:
    """A unit from its JSON form (``{"kind": "record"}`` or ``{"kind": "id", ...}``), or a unit
    given as itself; an :class:`~dpkit.errors.InvalidParameter` names what is wrong."""
    if isinstance(document, (RecordUnit, IdUnit)):
        return document
    if not isinstance(document, dict) or document.get("kind") not in ("record", "id"):
        raise InvalidParameter(
            "privacy_unit",
            document,
            "{'kind': 'record'} or {'kind': 'id', 'column': ..., 'max_rows': ..., "
            "'max_groups': ...}",
        )
    if document["kind"] == "record":
        extra = sorted(set(document) - {"kind"})
        if extra:
            raise InvalidParameter(extra[0], document[extra[0]], "absent for a record unit")
        return RecordUnit()
    allowed = {"kind", "column", "max_rows", "max_groups"}
    extra = sorted(set(document) - allowed)
    if extra:
        raise InvalidParameter(extra[0], document[extra[0]], f"one of {sorted(allowed)}")
    if "max_rows" not in document:
        raise InvalidParameter(
            "max_rows",
            None,
            "an integer in [1, 1000000]: the rows one id may contribute are never assumed",
            owner="privacy unit",
            path=(*_PATH, "max_rows"),
        )
    return IdUnit(
        document.get("column"),  # type: ignore[arg-type]
        max_rows=document["max_rows"],
        max_groups=document.get("max_groups"),
    )


def unit_of(target: Any) -> RecordUnit | IdUnit:
    """The privacy unit a release of ``target`` (a mechanism or a query) protects.

    A target may declare it as ``privacy_unit`` (a :class:`RecordUnit`, an :class:`IdUnit`,
    its JSON form, or ``"record"``); a table query's ``unit`` is read; anything else protects
    one record: a mechanism or a query over a column of values treats each value (a report, a
    row) as one record. So a third-party mechanism that declares nothing is a record unit; one
    that declares something that is not a unit is refused here, before any spend.

    >>> import dpkit
    >>> unit_of(dpkit.mechanism("rr", epsilon=1.0))
    RecordUnit(kind='record')
    """
    declared = getattr(target, "privacy_unit", None)
    if declared is not None:
        if isinstance(declared, str) and declared == "record":
            return RecordUnit()
        try:
            return privacy_unit(declared)
        except InvalidParameter:
            raise InvalidParameter(
                "privacy_unit",
                declared,
                "a dpkit.RecordUnit, a dpkit.IdUnit (or its JSON form) or 'record'",
                owner=str(getattr(target, "name", type(target).__name__)),
            ) from None
    unit = getattr(target, "unit", None)
    if isinstance(unit, (RecordUnit, IdUnit)):  # a table query's (any other `unit` is not one)
        return unit
    return RecordUnit()


def as_identity(value: Any) -> UnitIdentity:
    """A declared unit as its identity: a :class:`UnitIdentity`, a :class:`RecordUnit` or
    :class:`IdUnit`, ``"record"``, or the JSON form of either (an id unit's bounds may be left
    out: they are not part of who is protected)."""
    if isinstance(value, UnitIdentity):
        return value
    if isinstance(value, (RecordUnit, IdUnit)):
        return value.identity
    if isinstance(value, str) and value == "record":
        return UnitIdentity("record")
    if isinstance(value, dict) and "neighbours" in value:
        relation = value["neighbours"]
        rest = {key: item for key, item in value.items() if key != "neighbours"}
        return attrs.evolve(as_identity(rest), neighbours=relation)
    if isinstance(value, dict):
        if value.get("kind") == "id" and "column" in value:
            privacy_unit({"max_rows": 1, **value})  # bounds, if given, must be valid ones
            return UnitIdentity("id", value["column"])
        return privacy_unit(value).identity  # a record unit, or the error naming the field
    raise InvalidParameter(
        "unit",
        value,
        "a dpkit.RecordUnit, a dpkit.IdUnit, a dpkit.units.UnitIdentity, 'record', or "
        "{'kind': 'id', 'column': ...}",
    )

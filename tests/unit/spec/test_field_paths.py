"""A table query's refusals carry where the refused field sits in the query's JSON form
(``InvalidParameter.path``); the spec points at it, and at the query itself for a refusal with
no such place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dpkit_central import Count, PrivateKeys, PublicKeys
from dpkit_central.keys import coerce
from dpkit_central.partition_selection import keep_thresholds

import dpkit
from dpkit.errors import InvalidParameter
from dpkit.spec import plan_spec
from dpkit.spec.data import DataPolicy
from dpkit.spec.issues import SpecInvalid
from dpkit.units import IdUnit, UnitIdentity, privacy_unit

UNIT = IdUnit("user", max_rows=1, max_groups=1)

CASES: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
    ("empty id column", lambda: IdUnit("", max_rows=1), ("privacy_unit", "column")),
    ("record with a column", lambda: UnitIdentity("record", "u"), ("privacy_unit", "column")),
    ("max_rows out of range", lambda: IdUnit("u", max_rows=0), ("privacy_unit", "max_rows")),
    (
        "max_groups out of range",
        lambda: IdUnit("u", max_rows=1, max_groups=0),
        ("privacy_unit", "max_groups"),
    ),
    (
        "max_rows missing",
        lambda: privacy_unit({"kind": "id", "column": "u"}),
        ("privacy_unit", "max_rows"),
    ),
    (
        "max_groups missing when grouping",
        lambda: IdUnit("u", max_rows=1).require_groups(),
        ("privacy_unit", "max_groups"),
    ),
    (
        "id column is a group column",
        lambda: Count(epsilon=1.0).on(by="user", keys=["a"], unit=UNIT),
        ("privacy_unit", "column"),
    ),
    (
        "repeated group columns",
        lambda: Count(epsilon=1.0).on(by=("a", "a"), keys=[(1, 2)]),
        ("group_by", "columns"),
    ),
    (
        "empty group column",
        lambda: Count(epsilon=1.0).on(by=("",), keys=[1]),
        ("group_by", "columns"),
    ),
    (
        "selection budget malformed",
        lambda: Count(epsilon=1.0).on(by="a", keys={"epsilon": 1.0}),
        ("group_by", "keys"),
    ),
    (
        "private without a budget",
        lambda: Count(epsilon=1.0).on(by="a", keys="private"),
        ("group_by", "keys"),
    ),
    ("keys not a list", lambda: PublicKeys.of("abc"), ("group_by", "keys")),
    ("no keys", lambda: PublicKeys(()), ("group_by", "keys")),
    ("repeated keys", lambda: PublicKeys.of([1, 1]), ("group_by", "keys")),
    ("key of the wrong width", lambda: PublicKeys.of([1], width=2), ("group_by", "keys")),
    ("number key for text", lambda: coerce(True, "text", "c"), ("group_by", "keys")),
    ("text key for numbers", lambda: coerce("a", "number", "c"), ("group_by", "keys")),
    ("missing key", lambda: coerce(None, "text", "c"), ("group_by", "keys")),
    ("number key for booleans", lambda: coerce(1, "boolean", "c"), ("group_by", "keys")),
    (
        "selection ε out of range",
        lambda: PrivateKeys(epsilon=-1.0, delta=1e-6),
        ("group_by", "selection", "epsilon"),
    ),
    (
        "selection δ out of range",
        lambda: PrivateKeys(epsilon=1.0, delta=2.0),
        ("group_by", "selection", "delta"),
    ),
    (
        "selection ε too small",
        lambda: keep_thresholds(1e-7, 1e-9),
        ("group_by", "selection", "epsilon"),
    ),
    (
        "selection δ too small",
        lambda: keep_thresholds(1.0, 1e-30),
        ("group_by", "selection", "delta"),
    ),
    # No place in a query's JSON form: the spec points at the query.
    ("unknown unit kind", lambda: UnitIdentity("person"), ()),
    ("unit identity malformed", lambda: UnitIdentity.parse(1), ()),
    ("keys without grouping", lambda: Count(epsilon=1.0).on(keys=[1]), ()),
]


@pytest.mark.parametrize(
    ("refusal", "path"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_refusal_carries_its_path(refusal: Callable[[], Any], path: tuple[str, ...]) -> None:
    with pytest.raises(InvalidParameter) as info:
        refusal()
    assert info.value.path == path


VISITS = (
    Path(__file__).resolve().parents[3] / "schemas" / "examples" / "valid" / "data" / "visits.csv"
)


def _spec(query: dict[str, Any]) -> dict[str, Any]:
    base = {
        "id": "q",
        "statistic": "count",
        "input": {"source": "csv", "path": VISITS.name, "column": "minutes"},
        "budget": {"epsilon": 1.0},
    }
    base.update(query)
    return {"dpkit": "1", "dataset": "visits", "budget": {"epsilon": 10.0, "delta": 1e-5},
            "queries": [base]}  # fmt: skip


@pytest.mark.parametrize(
    ("query", "pointer"),
    [
        (
            {"privacy_unit": {"kind": "id", "column": "user", "max_rows": 1},
             "group_by": {"columns": ["city"], "keys": ["Lyon"]}},
            "/queries/0/privacy_unit/max_groups",
        ),
        (
            {"group_by": {"columns": ["city"], "keys": "private",
                          "selection": {"epsilon": 1.0, "delta": 1e-30}}},
            "/queries/0/group_by/selection/delta",
        ),
    ],
)  # fmt: skip
def test_a_spec_points_at_the_path(query: dict[str, Any], pointer: str) -> None:
    with pytest.raises(SpecInvalid) as info:
        plan_spec(
            _spec(query),
            registry=dpkit.get_registry(),
            base_dir=VISITS.parent,
            policy=DataPolicy(root=VISITS.parent),
        )
    assert pointer in [issue.pointer for issue in info.value.issues], info.value.issues

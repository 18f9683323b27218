"""Whole queries audited on neighbouring datasets: the relation, totality, other relations.

Audits that must pass run at α = 5e-7 (false alarm ≤ 1e-6 per test); the leaks tested for
are at least 2× their claim. The relation checks are deterministic.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

import dpkit
from dpkit.testing import AddRemoveOne, audit_query, check_query, records_for
from dpkit.testing.datasets import UNLISTED

ALPHA = 5e-7
BUDGET = {"samples": 3_000, "selection_samples": 500, "random_pairs": 2}


def test_records_reach_beyond_the_declared_bounds() -> None:
    relation = records_for(dpkit.get_registry().query("sum", lower=-10, upper=5, epsilon=1.0))
    numbers = [r for r in relation.records if isinstance(r, float) and not math.isnan(r)]
    assert min(numbers) < -10 and max(numbers) > 5
    assert any(isinstance(r, float) and math.isnan(r) for r in relation.records)
    histogram = dpkit.get_registry().query("histogram", categories=["x", "y", "z"], epsilon=1.0)
    labels = records_for(histogram).records
    assert "x" in labels and "z" in labels and UNLISTED in labels


@pytest.mark.parametrize(
    "relation",
    [
        records_for(dpkit.get_registry().query("count", epsilon=1.0)),
        records_for(dpkit.get_registry().query("histogram", categories=["a", "b"], epsilon=1.0)),
    ],
)
def test_every_pair_differs_by_one_record(relation: AddRemoveOne) -> None:
    pairs = relation.pairs() + relation.neighbours(np.random.default_rng(5), 50)
    assert all(relation.are_neighbours(a, b) for a, b in pairs)
    assert any(len(a) == 0 for a, _ in pairs) and any(len(a) >= 4 for a, _ in pairs)
    assert not relation.are_neighbours(relation.column([0.0]), relation.column([0.0, 1.0, 1.0]))
    assert not relation.are_neighbours(relation.column([1.0]), relation.column([2.0, 3.0]))


@attrs.frozen
class FragileCount:
    """A count that raises on missing values: its exception depends on the data."""

    name: ClassVar[str] = "fragile_count"
    epsilon: float = dpkit.parameter(dpkit.Real(low=0, low_open=True), doc="ε", default=1.0)
    everywhere: bool = False

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=self.epsilon)

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        values = np.asarray(data, dtype=np.float64)
        if self.everywhere or np.isnan(values).any():
            raise ValueError("missing value")
        return float(len(values) + rng.laplace(0.0, 1.0 / self.epsilon))


def test_a_run_whose_exceptions_depend_on_the_data_is_a_violation() -> None:
    report = audit_query(FragileCount(), alpha=ALPHA, seed=1, **BUDGET)
    assert report.verdict == "violation"
    assert any("privacy boundary: run raised ValueError" in f for f in report.findings())
    assert report.statistical.checked and not report.statistical.violation


def test_a_run_that_always_raises_is_unchecked() -> None:
    report = audit_query(FragileCount(everywhere=True), alpha=ALPHA, seed=1, **BUDGET)
    assert report.verdict == "unchecked" and "raised on every dataset" in report.reason


@attrs.frozen
class ByPerson(FragileCount):
    """Declares an id-level privacy unit, which the default relation does not cover."""

    privacy_unit: str = "id"


def test_another_privacy_unit_needs_its_relation() -> None:
    report = audit_query(ByPerson(), seed=0, **BUDGET)
    assert report.verdict == "unchecked" and "pass relation=" in report.reason


def test_a_table_query_per_person_is_not_audited_on_record_neighbours() -> None:
    """A table query keeps its unit in ``unit``: an id-level count audited on add/remove-one
    record would test a weaker claim than the one it makes (one person's rows)."""
    from dpkit_central import Count

    query = Count(epsilon=1.0).on(unit=dpkit.IdUnit("user", max_rows=2))
    report = audit_query(query, seed=0, **BUDGET)
    assert report.verdict == "unchecked" and "pass relation=" in report.reason
    assert "'kind': 'id'" in report.reason


class RemoveOnePerson(dpkit.Domain):
    """Tables of (person, value) rows; neighbours differ by all the rows of one person.

    A sketch of the id-level relation the DataFrame layer needs, built on the same protocol.
    """

    relation = "remove one person's rows"

    def _table(self, people: list[int]) -> Any:
        rows = [(p, 1.0) for p in people for _ in range(3)]  # three rows per person
        return np.asarray(rows, dtype=np.float64).reshape(-1, 2)

    def pairs(self) -> list[tuple[Any, Any]]:
        found = [([], [7]), ([1, 2], [1, 2, 7])]
        return [(self._table(a), self._table(b)) for a, b in found] + [
            (self._table(b), self._table(a)) for a, b in found
        ]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        return []

    def describe(self, table: Any) -> str:
        return f"{len(table)} rows of {len(np.unique(np.asarray(table)[:, 0]))} people"


@attrs.frozen
class RowCount:
    """Rows counted with noise for Δ = ``max_rows`` after keeping at most ``max_rows`` rows per
    person (``truncate=False`` is the bug: Δ is really 3 rows per person)."""

    name: ClassVar[str] = "row_count"
    epsilon: float = 1.0
    max_rows: int = 1
    truncate: bool = True

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=self.epsilon)

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        people = np.asarray(data, dtype=np.float64).reshape(-1, 2)[:, 0]
        if self.truncate:
            _, counts = np.unique(people, return_counts=True)
            rows = int(np.minimum(counts, self.max_rows).sum())
        else:
            rows = len(people)
        return rows + rng.laplace(0.0, self.max_rows / self.epsilon)


def test_an_id_level_relation_plugs_in() -> None:
    relation = RemoveOnePerson()
    good = audit_query(RowCount(), relation=relation, alpha=ALPHA, seed=2, **BUDGET)
    assert good.verdict == "pass" and good.relation == "remove one person's rows"
    bad = audit_query(RowCount(truncate=False), relation=relation, alpha=ALPHA, seed=2, **BUDGET)
    assert bad.verdict == "violation", bad.format_text()  # true ε = 3


def test_explicit_dataset_pairs() -> None:
    count = dpkit.get_registry().query("count", epsilon=1.0, noise="laplace")
    report = audit_query(count, pairs=[([1, 2], [1, 2, 3])], alpha=ALPHA, seed=3, **BUDGET)
    assert "1 explicit" in report.statistical.pair_sources and report.verdict == "pass"
    with pytest.raises(dpkit.InvalidParameter):
        audit_query(count, pairs=[([1, 2], [1, 2, 3, 4])], **BUDGET)  # two records apart


def test_check_query_raises_on_a_sensitivity_bug() -> None:
    @attrs.frozen
    class HalfCount(RowCount):
        def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
            return len(np.asarray(data)) + rng.laplace(0.0, 0.5 / self.epsilon)

    with pytest.raises(dpkit.testing.DPViolation, match="statistical tier"):
        check_query(HalfCount(), samples=3_000)

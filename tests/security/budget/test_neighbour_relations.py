"""Costs stated under two neighbour relations never add up on one budget.

Sampling without replacement states its guarantee for neighbours that *replace* one record
(the dataset size is public); every other event, for neighbours that add or remove one. An
add/remove ε implies only a replace-one 2ε (a replacement is a removal and an addition), and a
replace-one guarantee says nothing about datasets of two sizes, so a sum of the two kinds of
cost bounds neither. For example, 100 replace-one releases of ε = 0.01 beside one add/remove
Laplace release of ε = 1 were charged 2 in all, where under replacement the Laplace alone is
worth 2. The accountant, the composites, parallel composition, the calibration of a shuffled
training schedule and a session's ledger all refuse such a mix before anything is spent.
Deterministic checks (false-positive rate 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

import dpkit
from dpkit.errors import InvalidParameter
from dpkit.ledger import UnitMismatch
from dpkit.privacy import (
    CompositeDP,
    LaplaceDP,
    SubsampledDP,
    common_neighbours,
    neighbours,
)
from dpkit.units import UnitIdentity

REPLACED = SubsampledDP(LaplaceDP(epsilon=1.0), 0.01, "without_replacement")
ADDED = LaplaceDP(epsilon=1.0)


def test_each_event_states_its_relation() -> None:
    assert neighbours(REPLACED) == "replace_one"
    assert neighbours(ADDED) == "add_remove"
    assert neighbours(SubsampledDP(ADDED, 0.01)) == "add_remove"  # Poisson: add/remove
    assert neighbours(CompositeDP((REPLACED, REPLACED))) == "replace_one"
    assert common_neighbours([(REPLACED, 3), REPLACED]) == "replace_one"


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_the_accountant_refuses_a_mix(delta: float) -> None:
    with pytest.raises(InvalidParameter, match="one neighbour relation"):
        dpkit.account([(REPLACED, 100), (ADDED, 1)], delta=delta)
    for alone in ([(REPLACED, 100)], [(ADDED, 1)]):
        assert dpkit.account(alone, delta=delta).epsilon > 0


def test_a_composite_and_parallel_composition_refuse_replacement() -> None:
    with pytest.raises(InvalidParameter, match="one neighbour relation"):
        CompositeDP((REPLACED, ADDED))
    with pytest.raises(InvalidParameter, match="add/remove neighbours"):
        dpkit.accounting.compose_parallel([[REPLACED], [REPLACED]], delta=1e-6)


def test_calibration_refuses_a_mix() -> None:
    with pytest.raises(InvalidParameter, match="one neighbour relation"):
        dpkit.calibrate(
            "gaussian",
            epsilon=1.0,
            delta=1e-6,
            count=10,
            sampling_rate=0.01,
            scheme="without_replacement",
            others=[(ADDED, 1)],
        )
    with pytest.raises(InvalidParameter, match="batching='shuffle'"):
        dpkit.calibrate(
            "gaussian",
            epsilon=8.0,
            delta=1e-5,
            epochs=1,
            batch_size=100,
            dataset_size=1000,
            batching="shuffle",
            others=[(ADDED, 1)],
        )


@attrs.frozen
class _Query:
    """A query whose guarantee is ``privacy`` (a third party's, or a subsampled one)."""

    privacy: Any
    name: str = "subsample"

    def run(self, data: Any, /, *, rng: Any) -> float:
        return 0.0


@pytest.mark.parametrize("first", ["replaced", "added"])
def test_a_ledger_never_mixes_the_relations(tmp_path: Path, first: str) -> None:
    """Whichever comes first fixes the ledger's unit, with its relation; the other is refused
    with nothing spent, also after the ledger is opened again."""
    path = tmp_path / "ledger.db"
    replaced = _Query(REPLACED)
    added = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    one, other = (replaced, added) if first == "replaced" else (added, replaced)
    with dpkit.Session(budget=(3.0, 1e-6), ledger=path) as session:
        session.release(one, [1.0])
        left = session.remaining
        with pytest.raises(UnitMismatch):
            session.release(other, [1.0])
        assert session.remaining == left
    with dpkit.Session(budget=(3.0, 1e-6), ledger=path) as session:
        expected = "replace_one" if first == "replaced" else "add_remove"
        assert session.unit == UnitIdentity("record", neighbours=expected)
        with pytest.raises(UnitMismatch):
            session.release(other, [1.0])
        assert session.remaining == left


def test_a_replace_one_identity_is_stored_and_read_back() -> None:
    unit = UnitIdentity("id", "user", neighbours="replace_one")
    assert unit.describe() == {"kind": "id", "column": "user", "neighbours": "replace_one"}
    assert UnitIdentity.parse(unit.describe()) == unit
    assert UnitIdentity("record").describe() == {"kind": "record"}  # as older ledgers store it
    assert str(unit) == "id column 'user' (replace-one neighbours)"
    with pytest.raises(InvalidParameter):
        UnitIdentity.parse({"kind": "record", "neighbours": "add_or_remove"})

"""One budget, one privacy unit: a ledger admits releases under its unit only.

ε spent under the record unit is worth up to kε to a person with k rows (group privacy), so
spends under two units never add up to a bound on either. For any sequence of releases drawn
under record and id units (mechanisms and central queries protect a record; table queries
their ``unit``: the record, or an id of one of two columns at any bounds) — single releases
and batches (``release_all``), through sessions that open the one ledger file again, with the
ledger's unit declared when it is created or not — the ledger's unit is the declared one, or
else that of the first release it admits, and:

* a release (or a batch) under that unit is admitted, charged, and recorded with it; id units
  on one column compose whatever their bounds (their people are the same);
* any other — and a batch that mixes units, even before the unit is fixed — is refused with
  :class:`dpkit.UnitMismatch` before the spend: nothing is spent or recorded, and the data
  are never read (each input is :class:`~dpkit.session.Deferred`, loaded only after a spend).

False-positive rate: 0. Whether a release is admitted is decided by the drawn units alone
(deterministic); the releases themselves run in fast mode on seeded generators, and the
budget is far above what any drawn sequence costs, so no refusal is the budget's. Hypothesis
is derandomized (the same examples on every run).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dpkit_central import Count
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS

import dpkit
from dpkit.session import Deferred
from dpkit.units import UnitIdentity

#: Sequences drawn (each opens a fresh ledger file): a mismatch, when the check is gone, shows
#: in most of them (a sequence of two or more releases mixes units three times in four).
EXAMPLES = 60
BUDGET = (1000.0, 0.0)  # above any drawn sequence's cost: a refusal here is not the budget's
#: The table every query reads: two id columns, so that id units on either can be drawn.
TABLE = pd.DataFrame({"user": [1, 1, 2, 3], "household": [7, 7, 7, 8], "v": [1.0, 2.0, 3.0, 4.0]})
COLUMNS = ("user", "household")


class _Load:
    """A deferred input that counts its reads (a refused release must have none)."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.reads = 0

    def __call__(self) -> Any:
        self.reads += 1
        return self.data


@st.composite
def targets(draw: st.DrawFn) -> tuple[Any, Any, UnitIdentity]:
    """A target, its input, and the unit identity it protects (computed here, not read from
    dpkit): a mechanism over answers (a record), or a table count under the record unit or an
    id unit on one of two columns at drawn bounds."""
    epsilon = draw(st.sampled_from([0.25, 0.5, 1.0]))
    kind = draw(st.sampled_from(["mechanism", "record", "id"]))
    if kind == "mechanism":
        mechanism = dpkit.mechanism("laplace", epsilon=epsilon, sensitivity=1.0)
        return mechanism, np.array([3.0]), UnitIdentity("record")
    if kind == "record":
        return Count(epsilon=epsilon).on(), TABLE, UnitIdentity("record")
    column = draw(st.sampled_from(COLUMNS))
    unit = dpkit.IdUnit(column, max_rows=draw(st.integers(1, 3)))
    return Count(epsilon=epsilon).on(unit=unit), TABLE, UnitIdentity("id", column)


#: A declared unit for the ledger, in each form a caller may give it (None: not declared).
DECLARED: tuple[tuple[Any, UnitIdentity | None], ...] = (
    (None, None),
    ("record", UnitIdentity("record")),
    (dpkit.RecordUnit(), UnitIdentity("record")),
    (dpkit.IdUnit("user", max_rows=5), UnitIdentity("id", "user")),
    ({"kind": "id", "column": "household"}, UnitIdentity("id", "household")),
)

steps = st.lists(
    st.tuples(
        st.lists(targets(), min_size=1, max_size=3),  # one release, or a batch of several
        st.booleans(),  # whether the step opens the ledger in a new session first
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(declared=st.sampled_from(DECLARED), steps=steps, seed=st.integers(0, 2**32 - 1))
def test_a_ledger_admits_only_its_own_unit(
    declared: tuple[Any, UnitIdentity | None], steps: list[Any], seed: int
) -> None:
    given_unit, unit = declared
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ledger.db"
        session = dpkit.Session(budget=BUDGET, ledger=path, unit=given_unit)
        assert session.unit == unit, f"declared {given_unit!r}, the ledger says {session.unit}"
        rng = np.random.default_rng(seed)
        for batch, reopen in steps:
            if reopen:
                session = dpkit.Session(ledger=path)
            spent, entries = session.spent, len(session.history())
            loads = [_Load(data) for _, data, _ in batch]
            items = [(t, Deferred(load), rng) for (t, _, _), load in zip(batch, loads, strict=True)]
            units = {identity for _, _, identity in batch}
            expected = unit if unit is not None else next(iter(units))
            admitted = units == {expected}
            try:
                if len(items) == 1:
                    session.release(*items[0][:2], rng=rng)
                else:
                    session.release_all(items)
            except dpkit.UnitMismatch as refused:
                assert not admitted, (
                    f"a release under {expected} was refused on a ledger for {unit}: {refused}"
                )
                assert session.spent == spent and len(session.history()) == entries, (
                    f"the refusal of {units} spent {session.spent} (was {spent})"
                )
                assert not any(load.reads for load in loads), "a refused release read its data"
                continue
            assert admitted, (
                f"a ledger for {expected if unit is None else unit} admitted releases under "
                f"{sorted(map(str, units))}: ε spent under one unit is no bound for the other"
            )
            unit = expected
            assert session.unit == unit
            recorded = [entry.unit for entry in session.history()[entries:]]
            assert recorded == [unit] * len(items), f"entries recorded {recorded}, not {unit}"
            assert all(load.reads == 1 for load in loads)

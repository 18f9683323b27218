"""One budget, one privacy unit: a ledger's budget bounds the loss of one privacy unit.

ε spent under a record unit is up to kε for a person with k rows, so a record-unit release
and an id-unit release on one ledger do not add up to a bound on anyone. The ledger's unit is
fixed when it is created with one, or by its first spend; a release under another unit is
refused before anything is read or spent; a batch (``release_all``, a spec) that mixes units
is refused whole; ledgers made before the unit was recorded are migrated (their unit derived
from their entries; one whose entries mix units takes no more spends); a move carries the
unit. The contract tests run on SQLite and on the tests' PostgreSQL server (``ledger_store``,
tests/conftest.py).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from dpkit_central import Count
from support.ledgers import open_at_once

import dpkit
from dpkit import Session
from dpkit.cli import main
from dpkit.errors import BudgetExceeded, InvalidParameter
from dpkit.ledger import (
    SCHEMA_VERSION,
    Budget,
    Cost,
    Ledger,
    LedgerCorrupt,
    LedgerMismatch,
    LedgerUnitsMixed,
    SpendRequest,
    UnitMismatch,
    move_ledger,
)
from dpkit.session import Deferred
from dpkit.spec import DataPolicy, SpecInvalid, run_spec
from dpkit.units import IdUnit, RecordUnit, UnitIdentity, as_identity, unit_of

pa = pytest.importorskip("pyarrow")

#: tests/conftest.py's LedgerStore (a conftest cannot be imported under --import-mode=importlib)
LedgerStore = Any

RECORD = UnitIdentity("record")
USER = UnitIdentity("id", "user")
TENTH = Cost(Fraction(1, 10), Fraction(0))
EXAMPLES = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "valid"


def _table() -> Any:
    """Person 1 owns 40 rows: a record-unit count protects each row, not them."""
    return pa.table(
        {"user": [1] * 40 + [2, 3], "household": [1] * 42, "city": ["a"] * 42, "v": [1.0] * 42}
    )


def _record_count() -> Any:
    return Count(epsilon=1.0).on("v")


def _id_count(column: str = "user", max_rows: int = 1) -> Any:
    return Count(epsilon=1.0).on("v", unit=IdUnit(column, max_rows=max_rows))


class _Loads:
    """Deferred data that records whether the private phase read them."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return _table()


def _spend(ledger: Ledger, unit: Any = None, parameters: dict[str, Any] | None = None) -> Any:
    return ledger.spend(
        TENTH,
        mechanism="m",
        parameters=parameters or {},
        event={},
        session_id="s",
        randomness="fast",
        unit=unit,
    )


# -- the attack: a record-unit release, then an id-unit release on one ledger ------------------
@pytest.mark.parametrize("order", ["record-then-id", "id-then-record"])
def test_a_release_under_another_unit_is_refused_before_anything_is_spent(
    ledger_store: LedgerStore, order: str
) -> None:
    first, second = (_record_count(), _id_count())
    if order == "id-then-record":
        first, second = second, first
    session = Session(budget=(10, 0), ledger=ledger_store.location, dataset="visits")
    session.release(first, _table(), rng=np.random.default_rng(1))
    assert session.unit == unit_of(first).identity
    spent, entries = session.spent, session.history()
    loads = _Loads()
    with pytest.raises(UnitMismatch) as info:
        session.release(second, Deferred(loads), rng=np.random.default_rng(2))
    message = str(info.value)
    assert "privacy unit record" in message and "privacy unit id column 'user'" in message
    assert "nothing was spent" in message
    assert (info.value.found, info.value.given) == (
        unit_of(first).identity,
        unit_of(second).identity,
    )
    assert info.value.code == "unit_mismatch" and isinstance(info.value, LedgerMismatch)
    assert loads.calls == 0  # nothing read
    assert session.spent == spent and session.history() == entries  # nothing written
    # a fresh handle (another process) is refused the same way: the unit is in the ledger
    other = Session(ledger=ledger_store.location)
    with pytest.raises(UnitMismatch):
        other.release(second, Deferred(loads), rng=np.random.default_rng(2))
    assert loads.calls == 0 and other.spent == spent


def test_id_units_on_one_column_compose_whatever_their_bounds(ledger_store: LedgerStore) -> None:
    session = Session(budget=(10, 0), ledger=ledger_store.location)
    session.release(_id_count(max_rows=1), _table(), rng=np.random.default_rng(1))
    grouped = Count(epsilon=1.0).on(
        "v", by="city", keys=["a", "b"], unit=IdUnit("user", max_rows=3, max_groups=2)
    )
    session.release(grouped, _table(), rng=np.random.default_rng(2))
    assert session.spent.epsilon == 2 and session.unit == USER
    assert [e.unit for e in session.history()] == [USER, USER]
    with pytest.raises(UnitMismatch, match="id column 'household'"):
        session.release(_id_count("household"), _table(), rng=np.random.default_rng(3))
    assert session.spent.epsilon == 2


def test_the_first_spend_fixes_the_unit_in_its_transaction(ledger_store: LedgerStore) -> None:
    # two handles open the new ledger before either spends: the second spend is checked
    # against the unit the first one fixed (read in its transaction, not when it opened)
    budget = Budget(Fraction(10), Fraction(0))
    one = Ledger(ledger_store.location, budget=budget)
    two = Ledger(ledger_store.location)
    assert one.unit is None and two.unit is None
    _spend(one, unit=IdUnit("user", max_rows=2))
    with pytest.raises(UnitMismatch):
        _spend(two)  # one record
    assert two.unit == USER and two.spent().epsilon == Fraction(1, 10)
    assert len(two.entries()) == 1


def test_a_refused_first_spend_fixes_nothing(ledger_store: LedgerStore) -> None:
    ledger = Ledger(ledger_store.location, budget=Budget(Fraction(1, 20), Fraction(0)))
    with pytest.raises(BudgetExceeded):
        _spend(ledger, unit=USER)
    assert ledger.unit is None  # rolled back with the spend: another unit may still spend
    with pytest.raises(BudgetExceeded):
        _spend(ledger, unit=RECORD)


# -- declared units -----------------------------------------------------------------------------
def test_a_unit_declared_at_creation_is_fixed_with_the_budget(ledger_store: LedgerStore) -> None:
    location = ledger_store.location
    session = Session(budget=(1, 0), ledger=location, unit=IdUnit("user", max_rows=3))
    assert session.unit == USER and session.spent.epsilon == 0  # before any spend
    assert Session(ledger=location, unit={"kind": "id", "column": "user"}).unit == USER
    with pytest.raises(UnitMismatch) as info:
        Session(ledger=location, unit="record")
    assert isinstance(info.value, LedgerMismatch) and info.value.field == "privacy unit"
    assert "privacy unit=id column 'user' but unit=record was given" in str(info.value)
    with pytest.raises(UnitMismatch):
        Session(ledger=location).release(_record_count(), _table())
    assert Ledger(location).entries() == []


def test_a_unit_declared_by_a_session_binds_its_releases(ledger_store: LedgerStore) -> None:
    location = ledger_store.location
    Ledger(location, budget=Budget(Fraction(1), Fraction(0)))  # no unit yet
    session = Session(ledger=location, unit=RecordUnit())
    loads = _Loads()
    with pytest.raises(UnitMismatch, match=r"opened for the privacy unit record \(unit=\)"):
        session.release(_id_count(), Deferred(loads))
    assert loads.calls == 0 and session.unit is None  # refused before the ledger was touched
    session.release(_record_count(), _table(), rng=np.random.default_rng(1))
    assert session.unit == RECORD


@pytest.mark.parametrize(
    ("value", "identity"),
    [
        ("record", RECORD),
        (RecordUnit(), RECORD),
        ({"kind": "record"}, RECORD),
        (IdUnit("user", max_rows=3, max_groups=2), USER),
        ({"kind": "id", "column": "user"}, USER),
        ({"kind": "id", "column": "user", "max_rows": 5}, USER),
        (USER, USER),
    ],
)
def test_units_are_declared_by_identity(value: Any, identity: UnitIdentity) -> None:
    assert as_identity(value) == identity
    assert UnitIdentity.parse(identity.describe()) == identity


@pytest.mark.parametrize(
    "value",
    [
        "id",
        {"kind": "id"},
        {"kind": "id", "column": ""},
        {"kind": "id", "column": "u", "x": 1},
        {"kind": "id", "column": "u", "max_rows": 0},
        {"kind": "person"},
        3,
    ],
)
def test_a_bad_declared_unit_is_refused_before_the_ledger_is_opened(
    value: Any, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParameter):
        Session(budget=(1, 0), ledger=tmp_path / "l.db", unit=value)
    assert not (tmp_path / "l.db").exists()


# -- what unit a target protects ----------------------------------------------------------------
@attrs.frozen
class _Declaring:
    """A third-party query: a privacy event, ``run``, and optionally a declared unit."""

    privacy_unit: Any = None
    unit: Any = None
    name = "declaring"

    @property
    def privacy(self) -> Any:
        return dpkit.PureDP(epsilon=0.1)

    def run(self, data: Any, /, *, rng: Any) -> Any:
        return 0


@pytest.mark.parametrize(
    ("target", "identity"),
    [
        (_Declaring(), RECORD),  # declares nothing: one record
        (_Declaring(unit="seconds"), RECORD),  # a `unit` that is not a privacy unit
        (_Declaring(privacy_unit="record"), RECORD),
        (_Declaring(privacy_unit=IdUnit("user", max_rows=2)), USER),
        (_Declaring(privacy_unit={"kind": "id", "column": "user", "max_rows": 2}), USER),
        (Count(epsilon=1.0), RECORD),  # a query over a column of values
        (_id_count(), USER),  # a table query's unit
    ],
)
def test_unit_of(target: Any, identity: UnitIdentity) -> None:
    assert unit_of(target).identity == identity


def test_every_builtin_mechanism_protects_one_record(registry: dpkit.registry.Registry) -> None:
    for name in registry.names():
        info = registry.info(name)
        assert unit_of(info.cls).identity == RECORD, name


def test_a_target_declaring_a_bad_unit_is_refused_before_the_spend() -> None:
    session = Session(budget=(1, 0))
    with pytest.raises(InvalidParameter, match="declaring: privacy_unit='person'"):
        session.release(_Declaring(privacy_unit="person"), [1])
    assert session.spent.epsilon == 0 and session.unit is None
    session.release(_Declaring(privacy_unit=IdUnit("user", max_rows=2)), [1])
    assert session.unit == USER


# -- batches ------------------------------------------------------------------------------------
def test_a_batch_that_mixes_units_is_refused_whole(ledger_store: LedgerStore) -> None:
    session = Session(budget=(10, 0), ledger=ledger_store.location)
    loads = _Loads()
    with pytest.raises(UnitMismatch) as info:
        session.release_all(
            [
                (_record_count(), Deferred(loads), None, "rows"),
                (_record_count(), Deferred(loads), None, "rows again"),
                (_id_count(), Deferred(loads), None, "people"),
            ]
        )
    message = str(info.value)
    assert "release 0 ('rows') protects record" in message
    assert "release 2 ('people') protects id column 'user'" in message
    assert loads.calls == 0 and session.history() == [] and session.unit is None
    requests = [SpendRequest(TENTH, "m", {}, {}, "s", "fast", unit=unit) for unit in (USER, RECORD)]
    with pytest.raises(UnitMismatch):
        session.ledger.spend_all(requests)
    assert session.history() == [] and session.unit is None


# -- specs --------------------------------------------------------------------------------------
def _spec(*units: dict[str, Any]) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "dataset": "visits",
        "budget": {"epsilon": 5},
        "defaults": {"input": {"source": "csv", "path": "data/visits.csv", "column": "minutes"}},
        "queries": [
            {"id": f"q{i}", "statistic": "count", "privacy_unit": unit, "budget": {"epsilon": 1}}
            for i, unit in enumerate(units)
        ],
    }


RECORD_SPEC = {"kind": "record"}
USER_SPEC = {"kind": "id", "column": "user", "max_rows": 2}


def _no_data_read(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every read of a query's data is recorded (none may happen before the spend)."""
    from dpkit.spec.plan import PlannedQuery

    reads: list[Any] = []
    monkeypatch.setattr(PlannedQuery, "load", lambda self: reads.append(self) or None)
    return reads


def test_a_spec_that_mixes_units_is_refused_before_reading_data(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _no_data_read(monkeypatch)
    spec = _spec(RECORD_SPEC, dict(USER_SPEC, max_rows=5), USER_SPEC)
    with pytest.raises(SpecInvalid) as info:
        run_spec(
            spec,
            base_dir=EXAMPLES,
            ledger=ledger_store.location,
            policy=DataPolicy(root=EXAMPLES),
        )
    issues = [(issue.pointer, issue.code) for issue in info.value.issues]
    assert issues == [
        ("/queries/1/privacy_unit", "unit_mismatch"),
        ("/queries/2/privacy_unit", "unit_mismatch"),
    ]
    assert "id column 'user'" in info.value.issues[0].message
    assert "query 'q0' protects record" in info.value.issues[0].message
    assert info.value.exit_code == 2
    assert reads == []
    # no ledger was opened: a PostgreSQL location holds no ledger, an SQLite file none
    with pytest.raises(dpkit.ledger.LedgerError, match="no ledger"):
        Ledger(ledger_store.location)


def test_a_spec_fixes_the_unit_of_the_ledger_it_creates(ledger_store: LedgerStore) -> None:
    spec = _spec(USER_SPEC, dict(USER_SPEC, max_rows=5))  # other bounds, one unit
    policy = DataPolicy(root=EXAMPLES)
    document = run_spec(spec, base_dir=EXAMPLES, ledger=ledger_store.location, policy=policy)
    assert [r["privacy_unit"]["column"] for r in document["results"]] == ["user", "user"]
    ledger = Ledger(ledger_store.location)
    assert ledger.unit == USER and [e.unit for e in ledger.entries()] == [USER, USER]


def _cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dpkit_run_refuses_a_spec_of_another_unit_with_exit_2(
    ledger_store: LedgerStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    location = ledger_store.location
    session = Session(budget=(5, 0), ledger=location, dataset="visits")
    session.release(_record_count(), _table(), rng=np.random.default_rng(1))
    spec = _spec(USER_SPEC)
    spec["defaults"]["input"]["path"] = str(EXAMPLES / "data" / "visits.csv")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    reads = _no_data_read(monkeypatch)
    out_file = tmp_path / "result.json"  # (capsys's stdout has no file descriptor)
    run = ("run", str(path), "--allow-any-path", "--ledger", location, "--out", str(out_file))
    code, out, _ = _cli(*run, "--json", capsys=capsys)
    text_code, text_out, err = _cli(*run, capsys=capsys)
    assert code == text_code == 2 and text_out == "" and "[unit_mismatch]" in err
    assert not out_file.exists()
    (error,) = json.loads(out)["errors"]
    assert error["code"] == "unit_mismatch"
    assert "privacy unit=record but unit=id column 'user' was given" in error["message"]
    assert reads == [] and session.spent.epsilon == 1 and len(session.history()) == 1


# -- ledgers made before the unit was recorded ---------------------------------------------------
def _to_version_4(ledger_store: LedgerStore) -> None:
    """The ledger taken back to schema version 4: no ``unit`` column or metadata."""
    ledger_store.sql(
        "ALTER TABLE dpkit_entries DROP COLUMN unit",
        "DELETE FROM dpkit_meta WHERE key = 'unit'",
        "UPDATE dpkit_meta SET value = '4' WHERE key = 'schema_version'",
    )


def _old_ledger(ledger_store: LedgerStore, *parameters: dict[str, Any]) -> list[str]:
    """A version-4 ledger with one spent entry per parameters (as dpkit 4 recorded them:
    a table query's ``unit`` among its parameters); returns the release ids."""
    ledger = Ledger(ledger_store.location, dataset="d", budget=Budget(Fraction(1), Fraction(0)))
    ids = []
    for params in parameters:
        ids.append(_spend(ledger, parameters=params).release_id)
    ledger.close()
    _to_version_4(ledger_store)
    return ids


ID_PARAMETERS = {"unit": {"kind": "id", "column": "user", "max_rows": 3, "max_groups": None}}


@pytest.mark.parametrize(
    ("parameters", "unit"),
    [
        ([{}, {"epsilon": 1.0}], RECORD),  # bare mechanisms: a record each
        ([{"unit": {"kind": "record"}}, {}], RECORD),  # a record-unit table query
        (  # id units on one column with other bounds: one unit
            [ID_PARAMETERS, {"unit": {"kind": "id", "column": "user", "max_rows": 9}}],
            USER,
        ),
        ([], None),  # nothing spent: the first spend fixes it
    ],
)
def test_older_ledgers_get_the_unit_of_their_entries(
    ledger_store: LedgerStore, parameters: list[dict[str, Any]], unit: UnitIdentity | None
) -> None:
    _old_ledger(ledger_store, *parameters)
    assert open_at_once(ledger_store.location, openers=6) == []  # concurrent openers migrate once
    assert ledger_store.query("SELECT value FROM dpkit_meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    assert len(ledger_store.query("SELECT value FROM dpkit_meta WHERE key = 'unit'")) == 1
    ledger = Ledger(ledger_store.location)
    assert ledger.unit == unit and ledger.mixed_units == ()
    assert [e.unit for e in ledger.entries()] == [None] * len(parameters)  # as they were
    if unit is None:
        _spend(ledger, unit=USER)  # the first spend fixes it
        assert ledger.unit == USER
    else:
        with pytest.raises(UnitMismatch):
            _spend(ledger, unit=RECORD if unit == USER else USER)
        _spend(ledger, unit=unit)
    assert ledger.verify().epsilon == Fraction(len(parameters) + 1, 10)


def test_an_older_ledger_whose_entries_mix_units_takes_no_more_spends(
    ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    location = ledger_store.location
    _old_ledger(ledger_store, {}, ID_PARAMETERS, {})  # spent as the attack spent it
    assert open_at_once(location, openers=6) == []
    ledger = Ledger(location)
    assert ledger.unit is None and ledger.mixed_units == (RECORD, USER)
    for unit in (RECORD, USER):
        with pytest.raises(LedgerUnitsMixed) as info:
            _spend(ledger, unit=unit)
    assert "several privacy units (record, id column 'user')" in str(info.value)
    assert info.value.units == (RECORD, USER) and info.value.code == "ledger_units_mixed"
    assert len(ledger.entries()) == 3 and ledger.spent().epsilon == Fraction(3, 10)
    with pytest.raises(LedgerUnitsMixed):
        ledger.verify()
    with pytest.raises(LedgerUnitsMixed):
        Session(ledger=location).release(_id_count(), Deferred(_Loads()))
    # `budget verify` reports it (exit 2); `budget show` shows the ledger and says so
    code, _, err = _cli("budget", "verify", "--ledger", location, "--json", capsys=capsys)
    assert code == 2 and json.loads(err)["error"]["code"] == "ledger_units_mixed"
    code, out, _ = _cli("budget", "show", "--ledger", location, capsys=capsys)
    assert code == 0
    assert "unit         mixed (record, id column 'user'): spent under several" in out
    code, out, _ = _cli("budget", "show", "--ledger", location, "--json", capsys=capsys)
    shown = json.loads(out)
    assert shown["unit"] is None
    assert shown["mixed_units"] == [{"kind": "record"}, {"kind": "id", "column": "user"}]


def test_an_older_ledger_whose_unit_cannot_be_determined_is_not_migrated(
    ledger_store: LedgerStore,
) -> None:
    _old_ledger(ledger_store, {}, ID_PARAMETERS)
    ledger_store.sql(
        'UPDATE dpkit_entries SET parameters = \'{"unit": {"kind": "id"\' WHERE seq = 2'
    )
    with pytest.raises(LedgerCorrupt, match="entry 2 is damaged"):
        Ledger(ledger_store.location)
    assert ledger_store.query("SELECT value FROM dpkit_meta WHERE key = 'schema_version'") == [
        ("4",)
    ]


# -- the unit in the ledger ---------------------------------------------------------------------
def test_verify_checks_each_entry_against_the_ledger_unit(ledger_store: LedgerStore) -> None:
    ledger = Ledger(ledger_store.location, budget=Budget(Fraction(1), Fraction(0)))
    _spend(ledger, unit=USER)
    _spend(ledger, unit=USER)
    assert ledger.verify().epsilon == Fraction(1, 5)
    # the metadata rewritten to another unit (to spend another unit's releases on it)
    ledger_store.sql("UPDATE dpkit_meta SET value = '{\"kind\":\"record\"}' WHERE key = 'unit'")
    with pytest.raises(LedgerCorrupt, match="entry 1 protects the privacy unit id column 'user'"):
        ledger.verify()
    ledger_store.sql("UPDATE dpkit_meta SET value = '' WHERE key = 'unit'")
    with pytest.raises(LedgerCorrupt, match="its budget is for no privacy unit yet"):
        ledger.verify()
    ledger_store.sql("UPDATE dpkit_meta SET value = 'person' WHERE key = 'unit'")
    with pytest.raises(LedgerCorrupt, match="damaged metadata: unit='person'"):
        _spend(ledger, unit=USER)
    with pytest.raises(LedgerCorrupt, match="damaged metadata: unit='person'"):
        Ledger(ledger_store.location)


def test_budget_show_and_verify_name_the_unit(
    ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    location = ledger_store.location
    ledger = Ledger(location, budget=Budget(Fraction(1), Fraction(0)))
    code, out, _ = _cli("budget", "show", "--ledger", location, capsys=capsys)
    assert "unit         not fixed yet (the first spend fixes it)" in out.splitlines()
    _spend(ledger, unit=USER)
    code, out, _ = _cli("budget", "show", "--ledger", location, capsys=capsys)
    assert "unit         id column 'user'" in out.splitlines()
    code, out, _ = _cli("budget", "show", "--ledger", location, "--json", capsys=capsys)
    shown = json.loads(out)
    assert (shown["unit"], shown["mixed_units"]) == ({"kind": "id", "column": "user"}, [])
    code, out, _ = _cli("budget", "verify", "--ledger", location, capsys=capsys)
    assert code == 0 and "for the privacy unit id column 'user' in 1 releases" in out
    code, out, _ = _cli("budget", "verify", "--ledger", location, "--json", capsys=capsys)
    assert json.loads(out)["unit"] == {"kind": "id", "column": "user"}
    code, out, _ = _cli("budget", "history", "--ledger", location, "--json", capsys=capsys)
    assert json.loads(out)[0]["unit"] == {"kind": "id", "column": "user"}


# -- moves --------------------------------------------------------------------------------------
@pytest.mark.parametrize("destination_kind", ["sqlite", "postgresql"])
def test_a_move_keeps_the_unit(
    ledger_store: LedgerStore, destination_kind: str, tmp_path: Path, request: Any
) -> None:
    if destination_kind == "sqlite":
        destination = str(tmp_path / "moved.sqlite")
    else:
        destination = request.getfixturevalue("postgres_server").url()
    budget = Budget(Fraction(1), Fraction(0))
    source = Ledger(ledger_store.location, dataset="d", budget=budget)
    _spend(source, unit=IdUnit("user", max_rows=4))
    move_ledger(ledger_store.location, destination)
    moved = Ledger(destination)
    assert moved.unit == USER and [e.unit for e in moved.entries()] == [USER]
    with pytest.raises(UnitMismatch):
        _spend(moved)
    _spend(moved, unit=USER)
    assert moved.verify().epsilon == Fraction(1, 5)


def test_a_move_refuses_a_destination_of_another_unit(
    ledger_store: LedgerStore, tmp_path: Path
) -> None:
    budget = Budget(Fraction(1), Fraction(0))
    source = Ledger(ledger_store.location, dataset="d", budget=budget)
    _spend(source, unit=USER)
    destination = str(tmp_path / "empty.sqlite")
    Ledger(destination, dataset="d", budget=budget, unit="record")  # empty, another unit
    with pytest.raises(LedgerMismatch, match="privacy unit"):
        move_ledger(ledger_store.location, destination)
    assert source.move_state().state == "live"
    unfixed = str(tmp_path / "unfixed.sqlite")
    Ledger(unfixed, dataset="d", budget=budget)  # empty, no unit yet: takes the source's
    move_ledger(ledger_store.location, unfixed)
    assert Ledger(unfixed).unit == USER

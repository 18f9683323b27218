"""The PostgreSQL ledger's own behaviour, beyond the contract it shares with SQLite
(tests/unit/ledger/test_ledger.py runs that on both): its URL (ledger names, passwords never shown),
a missing driver, typed errors for a server that is down, a failed login, a bad URL, a missing
database and a schema that is not a ledger; several ledgers in one database; roles with fewer
privileges (the setup of docs/scaling.md); and a connection that the server dropped.

Everything that needs a server uses the real one of tests/conftest.py (``postgres_server``).
"""

from __future__ import annotations

import sys
from fractions import Fraction
from typing import Any

import pytest

from dpkit.cli import main
from dpkit.errors import DPKitError, InvalidParameter, MissingDependency
from dpkit.ledger import Budget, Cost, Ledger, LedgerError, LedgerMismatch, NotALedger
from dpkit.ledger._postgresql import parse_url

#: tests/conftest.py's PostgresServer (a conftest cannot be imported under --import-mode=importlib)
PostgresServer = Any

TENTH = Cost(Fraction(1, 10), Fraction(0))
ONE = Budget(Fraction(1), Fraction(0))


def _spend(ledger: Ledger) -> Any:
    return ledger.spend(
        TENTH, mechanism="m", parameters={}, event={}, session_id="s", randomness="fast"
    )


# -- the URL ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "conninfo", "name", "shown", "secrets"),
    [
        (
            "postgresql://ana:s3cret@db.example.org:5433/stats?ledger=survey",
            "postgresql://ana:s3cret@db.example.org:5433/stats",
            "survey",
            "postgresql://ana@db.example.org:5433/stats?ledger=survey",
            ("s3cret",),
        ),
        (  # the default ledger name; a password in the query; other libpq parameters kept
            "postgres://db/stats?password=p%26w&sslmode=require",
            "postgres://db/stats?password=p%26w&sslmode=require",
            "dpkit",
            "postgres://db/stats?sslmode=require&ledger=dpkit",
            ("p%26w", "p&w"),
        ),
        (  # several hosts, an encoded password, no user
            "postgresql://:p%40ss@h1:5432,h2:5433/stats?ledger=a_1&target_session_attrs=read-write",
            "postgresql://:p%40ss@h1:5432,h2:5433/stats?target_session_attrs=read-write",
            "a_1",
            "postgresql://@h1:5432,h2:5433/stats?target_session_attrs=read-write&ledger=a_1",
            ("p%40ss", "p@ss"),
        ),
        (
            "postgresql://u@h/db",
            "postgresql://u@h/db",
            "dpkit",
            "postgresql://u@h/db?ledger=dpkit",
            (),
        ),
    ],
)
def test_urls_are_parsed_and_shown_without_passwords(
    url: str, conninfo: str, name: str, shown: str, secrets: tuple[str, ...]
) -> None:
    assert parse_url(url) == (conninfo, name, shown, tuple(sorted(secrets)))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?ledger=Survey",
        "postgresql://h/db?ledger=a-b",
        "postgresql://h/db?ledger=",
        "postgresql://h/db?ledger=1abc",
        "postgresql://h/db?ledger=pg_catalog",
        "postgresql://h/db?ledger=" + "a" * 64,
        "postgresql://h/db?ledger=a&ledger=b",
        'postgresql://h/db?ledger=a"b',
    ],
)
def test_bad_ledger_names_are_refused(url: str) -> None:
    with pytest.raises(InvalidParameter, match="lowercase letters, digits and underscores"):
        Ledger(url)


def test_an_unreadable_url_shows_none_of_itself() -> None:
    with pytest.raises(InvalidParameter) as info:
        Ledger("postgresql://u:hunter22@[::1/db")
    assert "hunter22" not in str(info.value) and "postgresql://..." in str(info.value)


def test_other_schemes_are_refused_without_their_password() -> None:
    with pytest.raises(InvalidParameter) as info:
        Ledger("mysql://u:hunter22@h/db")
    assert "hunter22" not in str(info.value) and "no other store is built in" in str(info.value)


# -- the driver is an extra ---------------------------------------------------------------------
def test_a_missing_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(MissingDependency) as info:
        Ledger("postgresql://u:pw@h/db")
    assert str(info.value) == "a PostgreSQL ledger needs psycopg: pip install 'dpkit[postgresql]'"
    assert main(["budget", "show", "--ledger", "postgresql://u:pw@h/db"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"dpkit: error: {info.value}\n" and captured.out == ""


# -- typed errors from a real server -----------------------------------------------------------
def _refused_port() -> int:
    import socket

    with socket.socket() as probe:  # bound, never listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("kind", "error", "says"),
    [
        ("down", LedgerError, "cannot reach the PostgreSQL server"),
        ("password", LedgerError, "cannot log in"),
        ("role", LedgerError, "cannot log in"),
        ("database", LedgerError, "the database must exist"),
        ("port", InvalidParameter, "invalid integer value"),
        ("parameter", InvalidParameter, "invalid URI query parameter"),
    ],
)
def test_connection_problems_are_typed_and_never_show_the_password(
    postgres_server: PostgresServer,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    error: type[DPKitError],
    says: str,
) -> None:
    wrong = "Wr0ng-p4ssw0rd"
    s = postgres_server
    url = {
        "down": f"postgresql://dpkit:{s.password}@127.0.0.1:{_refused_port()}/dpkit_test",
        "password": s.base(password=wrong),
        "role": s.base(user="nobody"),
        "database": f"postgresql://dpkit:{s.password}@{s.host}:{s.port}/no_such_db",
        "port": f"postgresql://dpkit:{s.password}@{s.host}:http/dpkit_test",
        "parameter": s.base() + "?colour=blue",
    }[kind]
    with pytest.raises(error, match=says) as info:
        Ledger(url, budget=ONE)
    message = str(info.value)
    assert s.password not in message and wrong not in message
    assert main(["budget", "show", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpkit: error: ") and len(err.splitlines()) == 1
    assert s.password not in err and wrong not in err and "Traceback" not in err


def test_a_schema_of_other_tables_is_not_a_ledger(postgres_server: PostgresServer) -> None:
    with postgres_server.admin() as admin:
        admin.execute("CREATE SCHEMA shop AUTHORIZATION dpkit")
        admin.execute("CREATE TABLE shop.orders (id int)")
    for budget in (None, ONE):
        with pytest.raises(NotALedger, match="holds other tables"):
            Ledger(postgres_server.url("shop"), budget=budget)
    with postgres_server.admin() as admin:  # untouched
        tables = admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'shop'"
        ).fetchall()
    assert tables == [("orders",)]


# -- several ledgers in one database ------------------------------------------------------------
def test_ledgers_of_several_datasets_share_one_database(postgres_server: PostgresServer) -> None:
    with postgres_server.admin("postgres") as admin:
        admin.execute("CREATE DATABASE shared OWNER dpkit")
    base = postgres_server.base().rsplit("/", 1)[0] + "/shared"
    default = Ledger(base, dataset="first", budget=ONE)  # no ledger=: the "dpkit" ledger
    assert default.path.endswith("/shared?ledger=dpkit")
    survey = Ledger(f"{base}?ledger=survey", dataset="survey", budget=Budget(Fraction(2), 0))
    for _ in range(10):
        _spend(default)
    _spend(survey)
    assert default.remaining().epsilon == 0 and survey.remaining().epsilon == Fraction(19, 10)
    assert Ledger(base).dataset == "first" and Ledger(f"{base}?ledger=survey").dataset == "survey"
    with pytest.raises(LedgerMismatch, match="dataset"):
        Ledger(f"{base}?ledger=survey", dataset="first")
    with pytest.raises(LedgerMismatch, match="budget"):
        Ledger(base, budget=Budget(Fraction(2), Fraction(0)))


# -- roles (docs/scaling.md) ----------------------------------------------------------------------
def test_a_role_without_create_on_the_database_uses_a_schema_made_for_it(
    postgres_server: PostgresServer,
) -> None:
    s = postgres_server
    with s.admin() as admin:
        admin.execute("CREATE ROLE analyst LOGIN PASSWORD 'analyst-pw'")
        admin.execute("CREATE SCHEMA census AUTHORIZATION analyst")
        admin.execute("CREATE ROLE auditor LOGIN PASSWORD 'auditor-pw'")
        admin.execute("GRANT USAGE ON SCHEMA census TO auditor")
        admin.execute(
            "ALTER DEFAULT PRIVILEGES FOR ROLE analyst IN SCHEMA census GRANT SELECT ON TABLES"
            " TO auditor"
        )
    analyst = s.base(user="analyst", password="analyst-pw") + "?ledger=census"
    ledger = Ledger(analyst, dataset="census", budget=ONE)
    _spend(ledger)
    with pytest.raises(LedgerError, match="may not use ledger"):  # no schema of its own
        Ledger(s.base(user="analyst", password="analyst-pw") + "?ledger=other", budget=ONE)
    # an auditor reads and verifies, but cannot spend (nothing is written)
    auditor = Ledger(s.base(user="auditor", password="auditor-pw") + "?ledger=census")
    assert auditor.verify().epsilon == Fraction(1, 10) and len(auditor.entries()) == 1
    with pytest.raises(LedgerError, match="may not use ledger") as info:
        _spend(auditor)
    assert "auditor-pw" not in str(info.value)
    assert ledger.verify().epsilon == Fraction(1, 10)


# -- a connection the server dropped ------------------------------------------------------------
def _terminate(server: PostgresServer) -> int:
    """End every session of the test role (as a restart or an idle timeout would)."""
    with server.admin() as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE usename = 'dpkit' AND application_name = 'dpkit'"
        ).fetchall()
    return len(rows)


def test_a_dropped_idle_connection_is_replaced(postgres_server: PostgresServer) -> None:
    url = postgres_server.url()
    ledger = Ledger(url, budget=ONE)
    _spend(ledger)
    assert _terminate(postgres_server) >= 1
    _spend(ledger)  # only BEGIN had been sent on the dead connection: a new one starts over
    assert ledger.verify().epsilon == Fraction(1, 5) and len(ledger.entries()) == 2


# -- the other commands that take --ledger ------------------------------------------------------
def test_plot_budget_draws_a_postgresql_ledger(
    postgres_server: PostgresServer, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="dpkit plot needs dpkit[plot]")
    url = postgres_server.url()
    ledger = Ledger(url, dataset="plotted", budget=ONE)
    for _ in range(3):
        _spend(ledger)
    out = tmp_path / "budget.png"
    assert main(["plot", "budget", "--ledger", url, "--dataset", "plotted", "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    assert postgres_server.password not in capsys.readouterr().out


def test_writes_are_durable_even_where_the_database_says_otherwise(
    postgres_server: PostgresServer,
) -> None:
    # a database whose default would acknowledge commits before they are on disk
    with postgres_server.admin("postgres") as admin:
        admin.execute("CREATE DATABASE hasty OWNER dpkit")
        admin.execute("ALTER DATABASE hasty SET synchronous_commit = off")
    url = postgres_server.base().rsplit("/", 1)[0] + "/hasty?ledger=l"
    ledger = Ledger(url, budget=ONE, timeout=2.5)
    with ledger._transaction() as tx:  # every write transaction, spends included
        assert tx.one("SHOW synchronous_commit") == ("on",)
        assert tx.one("SHOW lock_timeout") == ("2500ms",)
    with ledger._store.read() as tx:  # set for the transaction only (poolers hand sessions on)
        assert tx.one("SHOW synchronous_commit") == ("off",)


def test_without_a_server_the_tests_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from support import postgres_server as _postgres

    monkeypatch.setattr(_postgres, "_bindir", lambda: None)
    with pytest.raises(_postgres.Unavailable, match=r"binaries .* were not found"):
        _postgres.start_server()
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(_postgres.Unavailable, match=r"pip install 'dpkit\[postgresql\]'"):
        _postgres.start_server()


def test_a_connection_left_inside_a_transaction_is_replaced(
    postgres_server: PostgresServer,
) -> None:
    # as after an interrupt that stopped a rollback half-way: the next call starts clean
    ledger = Ledger(postgres_server.url(), budget=ONE)
    stale = ledger._store._connection()  # type: ignore[attr-defined]
    stale.execute("BEGIN")
    _spend(ledger)
    assert stale.closed and ledger.verify().epsilon == Fraction(1, 10)

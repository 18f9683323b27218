"""Attacks and accidents on a PostgreSQL ledger, against a real server (tests/conftest.py).

The hazards differ from SQLite's: a forked child that closes its inherited connection ends the
parent's server session (the socket is shared); a connection can be dropped by the server or
the network in the middle of a spend, or while committing; a password travels in the URL. The
contract is the same: no release without a committed spend, a refused spend leaves nothing,
and no message, result or error ever shows the password. Tampered totals and damaged metadata
are refused as for SQLite (tests/unit/ledger/test_ledger.py and tests/security/private_phase/test_cli.py run those on both
backends).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.errors import BudgetExceeded
from dpkit.ledger import Budget, Cost, Ledger, LedgerError
from dpkit.privacy import PureDP

# Timed races (backends waiting on the server's locks): they run in the
# serial run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = pytest.mark.serial

#: tests/conftest.py's PostgresServer and LedgerStore (a conftest cannot be imported here)
PostgresServer = Any
LedgerStore = Any

STEP = Cost(Fraction(1, 100), Fraction(0))


def _spend(ledger: Ledger, session: str = "s") -> Any:
    return ledger.spend(
        STEP, mechanism="m", parameters={}, event={}, session_id=session, randomness="fast"
    )


def _new(url: str, releases: int = 100) -> Ledger:
    return Ledger(url, dataset="pg", budget=Budget(releases * STEP.epsilon, Fraction(0)))


# -- fork -------------------------------------------------------------------------------------
FORKER = r"""
import os, sys
from fractions import Fraction
from dpkit.ledger import Cost, Ledger

def spend(ledger):
    cost = Cost(Fraction(1, 100), Fraction(0))
    ledger.spend(cost, mechanism="m", parameters={}, event={}, session_id=str(os.getpid()),
                 randomness="fast")

def session_pid(ledger):  # the server process of this thread's connection
    return ledger._store._connection().info.backend_pid

ledger = Ledger(sys.argv[1])
spend(ledger)  # the parent's connection is open across the fork
before = session_pid(ledger)
pid = os.fork()
if pid == 0:
    spend(ledger)     # through the inherited object: a connection of the child's own
    ledger.close()
    del ledger
    sys.exit(0)       # a normal exit: finalisers and atexit run
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
spend(ledger)         # the parent's session must have survived the child (not a new one)
assert session_pid(ledger) == before, "the child ended the parent's session"
print(len(ledger.entries()))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_ends_the_parents_session(postgres_server: PostgresServer) -> None:
    url = postgres_server.url()
    _new(url).close()
    done = subprocess.run(
        [sys.executable, "-c", FORKER, url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
    assert Ledger(url).verify().epsilon == 3 * STEP.epsilon


# -- connections dropped mid-spend -------------------------------------------------------------
def _waiting_backend(server: PostgresServer, timeout: float = 30) -> int:
    """The pid of the dpkit session that waits for a lock."""
    deadline = time.monotonic() + timeout
    with server.admin() as admin:
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'dpkit'"
                " AND wait_event_type = 'Lock'"
            ).fetchone()
            if row:
                return int(row[0])
            time.sleep(0.05)
    pytest.fail("no dpkit session waited for the ledger's lock")


@pytest.mark.parametrize("ledger_store", ["postgresql"], indirect=True)
def test_a_connection_dropped_mid_spend_spends_nothing(
    postgres_server: PostgresServer, ledger_store: LedgerStore
) -> None:
    url = ledger_store.location
    ledger = _new(url)
    _spend(ledger)
    outcome: list[BaseException] = []

    def spend() -> None:
        try:
            _spend(ledger)
        except BaseException as error:
            outcome.append(error)

    with ledger_store.write_locked():  # the spend will wait inside its transaction
        thread = threading.Thread(target=spend)
        thread.start()
        pid = _waiting_backend(postgres_server)
        with postgres_server.admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        thread.join(timeout=60)
    (error,) = outcome
    assert type(error) is LedgerError
    assert "lost its connection" in str(error) and "nothing was written" in str(error)
    assert postgres_server.password not in str(error)
    assert len(ledger.entries()) == 1 and ledger.verify().epsilon == STEP.epsilon
    _spend(ledger)  # and the ledger works on a new connection
    assert ledger.verify().epsilon == 2 * STEP.epsilon


class _Probe:
    """A query that records whether it ran (it must not, if its spend was not confirmed)."""

    privacy = PureDP(0.25)

    def __init__(self) -> None:
        self.ran = False

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Any:
        self.ran = True
        return 0


@pytest.mark.parametrize("ledger_store", ["postgresql"], indirect=True)
def test_a_connection_lost_while_committing_releases_nothing(
    postgres_server: PostgresServer, ledger_store: LedgerStore
) -> None:
    url = ledger_store.location
    session = dpkit.Session(budget=(1.0, 0.0), ledger=url, dataset="commit")
    # a deferred trigger ends the spending session at COMMIT: the client cannot know whether
    # the commit happened (as when the network fails at that moment)
    with postgres_server.admin() as admin:
        schema = ledger_store.name
        admin.execute(
            f"CREATE FUNCTION {schema}.cut() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$"
        )
        admin.execute(
            f"CREATE CONSTRAINT TRIGGER cut AFTER INSERT ON {schema}.dpkit_entries"
            f" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.cut()"
        )
    probe = _Probe()
    with pytest.raises(LedgerError, match="may or may not have been recorded") as info:
        session.release(probe, np.array([1, 2]), rng=np.random.default_rng(0))
    assert "nothing was released" in str(info.value)
    assert postgres_server.password not in str(info.value)
    assert not probe.ran  # no release without a confirmed spend
    with postgres_server.admin() as admin:
        admin.execute(f"DROP TRIGGER cut ON {ledger_store.name}.dpkit_entries")
    ledger = Ledger(url)
    assert ledger.verify().epsilon in (0, Fraction(1, 4))  # either way: consistent
    assert not any(e.result_stored for e in ledger.entries())


# -- the command line: no password anywhere -----------------------------------------------------
def test_the_cli_never_shows_the_password(
    rt: Any, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.url()
    spec = rt.write_json(
        tmp_path / "spec.json", rt.query_spec("count", "age", epsilon=0.5, session_epsilon=1.0)
    )
    rt.write_csv(tmp_path / "data.csv", ["age"], [[a] for a in (30, 41, 52)])
    first = rt.fork_cli("run", "--json", str(spec), "--ledger", url)
    assert first.returncode == 0, first.explain()
    assert first.json()["session"]["ledger"] == url.replace(f":{postgres_server.password}@", "@")
    refused = rt.fork_cli(
        "run", "--json", str(spec), "--ledger", url
    )  # 0.5 + 0.5 fits; a third not
    assert refused.returncode == 0, refused.explain()
    third = rt.fork_cli("run", "--json", str(spec), "--ledger", url)
    rt.assert_clean_refusal(third, (3,))
    shown = [
        rt.fork_cli("budget", action, "--ledger", url, *extra)
        for action in ("show", "history", "verify")
        for extra in ((), ("--json",))
    ]
    assert all(result.returncode == 0 for result in shown), [r.explain() for r in shown]
    wrong = url.replace(postgres_server.password, "not-the-password-42")
    denied = rt.fork_cli("run", "--json", str(spec), "--ledger", wrong)
    rt.assert_clean_refusal(denied)
    for result in [first, refused, third, *shown, denied]:
        printed = result.stdout + result.stderr
        assert postgres_server.password not in printed and "not-the-password-42" not in printed
    assert json.loads(shown[1].stdout)["releases"] == 2


# -- many sessions at once, each its own process and handle ----------------------------------
SESSIONS = r"""
import sys
import numpy as np
import dpkit

url, n = sys.argv[1], int(sys.argv[2])
ok = 0
for i in range(n):
    with dpkit.Session(ledger=url) as session:  # a new session (and connection) per release
        try:
            session.release(dpkit.mechanism("rr", epsilon=0.05), np.array([1, 0]),
                            rng=np.random.default_rng(i))
        except dpkit.BudgetExceeded:
            continue
        ok += 1
print(ok)
"""


def test_short_sessions_from_many_processes_spend_exactly(postgres_server: PostgresServer) -> None:
    url = postgres_server.url()
    dpkit.Session(budget=(1.0, 0.0), ledger=url, dataset="sessions").close()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", SESSIONS, url, "12"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    released = 0
    for worker in workers:
        out, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
        released += int(out)
    assert released == 20  # 36 tries of ε = 0.05 against ε = 1
    ledger = Ledger(url)
    assert ledger.verify().epsilon == 1 and len(ledger.entries()) == 20
    with pytest.raises(BudgetExceeded):
        _spend(ledger)


def test_a_ledger_over_verified_tls(tmp_path: Path, postgres_server: PostgresServer) -> None:
    """TLS, as a deployment would use it: the test server gets ``ssl = on`` with a certificate
    signed by a new CA (made with ``cryptography``), and the ledger URL asks for
    ``sslmode=verify-full`` with that CA as ``sslrootcert``. A release goes through, and the
    ledger's own session is encrypted (``pg_stat_ssl``). With another CA as the root the
    connection is refused before anything is written: a typed ``LedgerError`` naming the
    ledger, not the password; so is ``verify-full`` against a server whose TLS is off."""
    from support.postgres_server import make_certificates, tls

    other = make_certificates(str(tmp_path))  # a CA that did not sign the server's certificate
    with tls(postgres_server) as certificates:
        url = f"{postgres_server.url()}&sslmode=verify-full&sslrootcert={certificates.ca}"
        with dpkit.Session(budget=(1.0, 0.0), ledger=url, dataset="tls") as session:
            session.release(dpkit.mechanism("rr", epsilon=0.25), np.array([1, 0, 1]))
        ledger = Ledger(url)
        assert ledger.verify().epsilon == Fraction(1, 4)
        with ledger._store.read() as tx:  # the ledger's own connection
            row = tx.one("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        assert row is not None and row[0] is True and str(row[1]).startswith("TLS"), row
        wrong = url.replace(certificates.ca, other.ca)
        with pytest.raises(LedgerError, match="secure connection") as refused:
            Ledger(wrong)
        assert type(refused.value) is LedgerError
        assert "certificate verify failed" in str(refused.value)
        assert refused.value.path == Ledger(url).path.replace(certificates.ca, other.ca)
        assert postgres_server.password not in str(refused.value)
    with pytest.raises(LedgerError, match="secure connection") as refused:  # TLS off again
        Ledger(url)
    assert postgres_server.password not in str(refused.value)
    assert Ledger(postgres_server.url(url.partition("ledger=")[2].partition("&")[0])).spent() == (
        Budget(Fraction(1, 4), Fraction(0))
    )

"""Shared test configuration.

Statistical tests use fixed seeds and thresholds chosen for a stated false-positive rate
(at most 1e-6 per test unless a test says otherwise); they are never re-seeded to pass.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# The suite's own helpers (tests/support/, imported as support.<module>: pytest's pythonpath):
# throwaway PostgreSQL, Dask and Spark servers; they are not part of the package.
from support import engine_servers as _engines
from support.postgres_server import PostgresServer, Unavailable, start_server

import dpkit

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def registry() -> dpkit.registry.Registry:
    """A fresh registry of the installed plugins (built-ins and any third-party)."""
    return dpkit.load_registry()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


# The parallel run (pytest-xdist) hands the tests to its workers in this order, and ends when
# the last one finishes: a long test near the end keeps one worker busy while the other waits.
# The larger-sample statistical tests (`slow`, tens of seconds each) are sent first; the rest
# keep their order. The workers all sort the same way, as xdist requires.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# -- a real PostgreSQL server for the PostgreSQL ledger's tests ------------------------------
# Started once per test session from the PostgreSQL binaries, in a temporary directory, on a
# free localhost port (tests/support/postgres_server.py; as root, as the `postgres` user, since initdb
# refuses root), and stopped at the end. Without the binaries (or psycopg) the tests that need
# it skip and say why, unless DPKIT_REQUIRE_POSTGRES=1 (set by .ci/run): then they fail.
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_server()
    except Unavailable as reason:
        if os.environ.get("DPKIT_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (DPKIT_REQUIRE_POSTGRES=1: these tests must run)")
        pytest.skip(str(reason))
    try:
        yield server
    finally:
        server.stop()


# -- a Dask cluster and Spark sessions for the queries and estimators on engines ---------------
# Started once per test session: a distributed LocalCluster of 2 worker processes, Spark in
# local mode (local[2], 4 shuffle partitions; its startup is slow, so one session for the whole
# run), and a Spark Connect server with a client session on it. Without the packages (the
# `cluster` extra) or a Java runtime the tests that need them skip and say why, unless
# DPKIT_REQUIRE_CLUSTER=1 (set by .ci/run): then they fail.
def _engine_unavailable(reason: Exception) -> None:
    if os.environ.get("DPKIT_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"{reason} (DPKIT_REQUIRE_CLUSTER=1: these tests must run)")
    pytest.skip(str(reason))


@pytest.fixture(scope="session")
def dask_client() -> Iterator[Any]:
    try:
        cluster, client = _engines.start_dask(workers=2)
    except _engines.Unavailable as reason:
        _engine_unavailable(reason)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


# The tests on Spark are marked `spark`: scripts/test runs them in one process, so that one
# Spark session and one Connect server serve the whole run. A Spark fixture asked for in a
# worker process of pytest-xdist (a JVM per worker, each local[2] on the same cores) fails.
def _one_spark_per_run() -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail(
            "a test on Spark runs in the Spark run (mark it `spark`; run it without -n): "
            "one Spark session for the whole test run, not one per worker process"
        )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    _one_spark_per_run()
    try:
        session = _engines.start_spark(cores=2, partitions=4)
    except _engines.Unavailable as reason:
        _engine_unavailable(reason)
    try:
        yield session
    finally:
        session.stop()


# A Spark Connect server of its own (a second JVM, local[2]; tests/support/engine_servers.py) for the
# tests of Connect DataFrames, shared by them all. Its JVM takes some 20 s to start, so it is
# launched as soon as the selected tests (after -m and -k) are known to need it, and starts
# while others run.
_CONNECT_LAUNCH = pytest.StashKey[_engines.ConnectLaunch]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # no test on Spark runs here (_one_spark_per_run)
    if not any("spark_connect_server" in getattr(i, "fixturenames", ()) for i in session.items):
        return
    try:
        launch = _engines.launch_spark_connect(cores=2, partitions=4)
    except _engines.Unavailable:
        return  # the fixture tries again, and reports why
    session.config.stash[_CONNECT_LAUNCH] = launch
    session.config.add_cleanup(launch.stop)


@pytest.fixture(scope="session")
def spark_connect_server(request: pytest.FixtureRequest) -> Iterator[_engines.ConnectServer]:
    _one_spark_per_run()
    try:
        launch = request.config.stash.get(_CONNECT_LAUNCH, None)
        if launch is None:  # not launched at collection (e.g. a docs page asked for it)
            launch = _engines.launch_spark_connect(cores=2, partitions=4)
        server = launch.ready()
    except _engines.Unavailable as reason:
        _engine_unavailable(reason)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_connect(spark_connect_server: _engines.ConnectServer) -> Any:
    """A Spark Connect client session (``pyspark.sql.connect``) on the tests' server."""
    return spark_connect_server.session


@attrs.frozen
class LedgerStore:
    """Where a test's ledger lives (``location``, for ``Ledger``/``--ledger``), and raw SQL on
    its two tables, as an attacker or a damaged disk would change them. SQL uses ``?``
    placeholders and the unqualified table names, in either backend."""

    kind: str
    location: str
    path: Path | None = None  # the SQLite file
    server: PostgresServer | None = None
    name: str = ""  # the PostgreSQL ledger (schema)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        if self.path is not None:
            import sqlite3

            db = sqlite3.connect(self.path, isolation_level=None)
            try:
                yield db
            finally:
                db.close()
            return
        import psycopg

        assert self.server is not None
        with psycopg.connect(self.server.base(), autocommit=True) as db:
            db.execute(f"SET search_path TO {self.name}")
            yield db

    def _sql(self, statement: str) -> str:
        return statement if self.path is not None else statement.replace("?", "%s")

    def sql(self, *statements: str) -> None:
        with self.connection() as db:
            for statement in statements:
                db.execute(statement)

    def executemany(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        with self.connection() as db:
            db.cursor().executemany(self._sql(statement), rows)

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        with self.connection() as db:
            return [tuple(row) for row in db.execute(statement).fetchall()]

    @contextlib.contextmanager
    def write_locked(self) -> Iterator[None]:
        """Another writer holds the ledger's write lock (and does not let go) inside."""
        with self.connection() as db:
            if self.path is not None:
                db.execute("BEGIN IMMEDIATE")
            else:
                db.execute("BEGIN")
                db.execute("SELECT key FROM dpkit_meta WHERE key = 'format' FOR UPDATE")
            try:
                yield
            finally:
                db.execute("ROLLBACK")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_store(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerStore:
    """A place for a new ledger: an SQLite file, or a fresh ledger on the PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "l.db"
        return LedgerStore("sqlite", str(path), path=path)
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"t_{uuid.uuid4().hex[:16]}"
    return LedgerStore("postgresql", server.url(name), server=server, name=name)

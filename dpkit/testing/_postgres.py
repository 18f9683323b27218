"""A throwaway PostgreSQL server, for dpkit's own tests and benchmarks (not public API).

:func:`start_server` finds the PostgreSQL binaries (``pg_config --bindir``, or
``/usr/lib/postgresql/*/bin``), runs ``initdb`` and ``pg_ctl start`` in a new temporary
directory on a free localhost port with password (SCRAM) authentication, creates a login role
``dpkit`` and a database ``dpkit_test`` that it owns, and returns a :class:`PostgresServer`
whose :meth:`~PostgresServer.stop` stops the server and deletes the directory. ``initdb``
refuses to run as root, so as root the server runs as the ``postgres`` system user. It raises
:class:`Unavailable` (with the reason) when the binaries or psycopg are missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "ADMIN_USER",
    "DATABASE",
    "USER",
    "PostgresServer",
    "Unavailable",
    "database",
    "start_server",
]

USER = "dpkit"
ADMIN_USER = "dpkit_admin"
DATABASE = "dpkit_test"


class Unavailable(Exception):
    """No server can be started here; the message says why."""


@attrs.frozen
class PostgresServer:
    """A running throwaway server (see the module docstring)."""

    host: str
    port: int
    password: str
    admin_password: str
    root: str
    run: Any  # runs one of the server's binaries, as the server's user

    def base(self, user: str = USER, password: str | None = None) -> str:
        """The URL of the test database, for ``user`` (default: the test role)."""
        secret = self.password if password is None else password
        return f"postgresql://{user}:{secret}@{self.host}:{self.port}/{DATABASE}"

    def url(self, ledger: str | None = None) -> str:
        """A ledger URL: a new ledger (a fresh name) unless ``ledger`` names one."""
        return f"{self.base()}?ledger={ledger or 't_' + uuid.uuid4().hex[:16]}"

    def admin(self, database: str = DATABASE) -> Any:
        """A superuser connection (autocommit); use it in a ``with`` block."""
        import psycopg

        return psycopg.connect(
            f"postgresql://{ADMIN_USER}:{self.admin_password}@{self.host}:{self.port}/{database}",
            autocommit=True,
        )

    def stop(self) -> None:
        self.run("pg_ctl", "-D", os.path.join(self.root, "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _bindir() -> str | None:
    candidates = []
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            candidates.append(
                subprocess.run(
                    ["pg_config", "--bindir"], capture_output=True, text=True, check=True
                ).stdout.strip()
            )
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if all(os.access(os.path.join(directory, n), os.X_OK) for n in ("initdb", "pg_ctl")):
            return directory
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server() -> PostgresServer:
    """Start a server (see the module docstring); :class:`Unavailable` if none can be."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise Unavailable("psycopg is not installed: pip install 'dpkit[postgresql]'") from None
    bindir = _bindir()
    if bindir is None:
        raise Unavailable(
            "the PostgreSQL server binaries (initdb, pg_ctl) were not found: "
            "put pg_config on PATH or install PostgreSQL under /usr/lib/postgresql"
        )
    as_user: list[str] = []
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        import pwd

        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable(
                "running as root, and there is no 'postgres' user to run the server"
            ) from None
        owner = (entry.pw_uid, entry.pw_gid)
        as_user = ["setpriv", f"--reuid={owner[0]}", f"--regid={owner[1]}", "--init-groups"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*as_user, os.path.join(bindir, argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    root = tempfile.mkdtemp(prefix="dpkit-pg-")
    data, log = os.path.join(root, "data"), os.path.join(root, "server.log")
    admin_password, password = secrets.token_hex(16), secrets.token_hex(16)
    pwfile = os.path.join(root, "pw")
    Path(pwfile).write_text(admin_password)
    if owner is not None:
        for path in (root, pwfile):
            os.chown(path, *owner)
    done = run(
        "initdb", "-D", data, "-U", ADMIN_USER, f"--pwfile={pwfile}", "--auth=scram-sha-256",
        "--locale=C", "-E", "UTF8", "--no-sync",
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")
    for _ in range(5):  # the free port may be taken before the server binds it: try another
        port = _free_port()
        options = (
            f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} "
            "-c max_connections=120 -c shared_buffers=16MB -c fsync=on"
        )
        done = run("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start")
        if done.returncode == 0:
            break
    else:
        text = Path(log).read_text() if os.path.exists(log) else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{text}")
    server = PostgresServer("127.0.0.1", port, password, admin_password, root, run)
    try:
        with server.admin("postgres") as admin:
            admin.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{password}'")
            admin.execute(f"CREATE DATABASE {DATABASE} OWNER {USER}")
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def database(url: str | None = None) -> Iterator[str]:
    """``url`` if one is given (a benchmark's ``--postgres``), else the test database of a
    throwaway server started here and stopped at the end of the block."""
    if url:
        yield url
        return
    server = start_server()
    try:
        yield server.base()
    finally:
        server.stop()

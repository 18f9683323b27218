"""A throwaway PostgreSQL server, for dpkit's own tests and benchmarks (not shipped).

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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "ADMIN_USER",
    "DATABASE",
    "USER",
    "Certificates",
    "PostgresServer",
    "Unavailable",
    "database",
    "make_certificates",
    "start_server",
    "tls",
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


@attrs.frozen
class Certificates:
    """PEM files for TLS tests: a certificate authority, and a server certificate it signed
    for 127.0.0.1 and localhost (with its key)."""

    ca: str
    cert: str
    key: str


def make_certificates(directory: str, *, hosts: tuple[str, ...] = ("127.0.0.1",)) -> Certificates:
    """A new CA and a server certificate for ``hosts`` (IP addresses; ``localhost`` too),
    written as PEM files in ``directory`` with the ``cryptography`` package (no ``openssl``
    binary). Keys are ECDSA P-256; valid from an hour ago for a day."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def signed(builder: x509.CertificateBuilder, key: Any) -> x509.Certificate:
        return builder.sign(key, hashes.SHA256())

    def base(subject: str, issuer: str, public: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    issuer = f"dpkit test CA {uuid.uuid4().hex[:8]}"
    ca = signed(
        base(issuer, issuer, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        ),
        ca_key,
    )
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    names += [x509.IPAddress(ipaddress.ip_address(host)) for host in hosts]
    cert = signed(
        base("localhost", issuer, key.public_key())
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False),
        ca_key,
    )
    paths = Certificates(
        *(os.path.join(directory, n) for n in ("ca.crt", "server.crt", "server.key"))
    )
    Path(paths.ca).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    Path(paths.cert).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    Path(paths.key).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(paths.key, 0o600)  # the server refuses a key others can read
    return paths


@contextlib.contextmanager
def tls(server: PostgresServer) -> Iterator[Certificates]:
    """TLS on ``server`` inside the block (``ssl = on`` with a new CA's certificate, set with
    ``ALTER SYSTEM`` and a configuration reload: PostgreSQL 10+ reloads its SSL settings);
    connections made before it, or without ``sslmode``, are unaffected or stay as they were.
    Turned off again at the end."""
    directory = tempfile.mkdtemp(prefix="tls-", dir=server.root)
    certificates = make_certificates(directory)
    owner = os.stat(server.root)
    for path in (directory, certificates.cert, certificates.key):
        os.chown(path, owner.st_uid, owner.st_gid)  # the server's user reads them
    settings = {"ssl_cert_file": certificates.cert, "ssl_key_file": certificates.key, "ssl": "on"}
    try:
        _reconfigure(server, settings)
        yield certificates
    finally:
        _reconfigure(server, dict.fromkeys(settings))
        shutil.rmtree(directory, ignore_errors=True)


def _reconfigure(server: PostgresServer, settings: Mapping[str, str | None]) -> None:
    """``ALTER SYSTEM SET`` (or ``RESET``, for None) each setting, reload, and wait until a new
    session sees the last one (the reload is asynchronous)."""
    import time

    from psycopg import sql

    with server.admin() as admin:
        for key, value in settings.items():
            if value is None:
                admin.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(key)))
            else:
                admin.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(key), value)
                )
        admin.execute("SELECT pg_reload_conf()")
    key, value = list(settings.items())[-1]
    deadline = time.monotonic() + 30
    while True:
        with server.admin() as admin:
            row = admin.execute(sql.SQL("SHOW {}").format(sql.Identifier(key))).fetchone()
        if row is not None and row[0] == (value or "off"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not reload {key} = {value}")
        time.sleep(0.05)

"""Red-team tests of ``dpkit audit``'s input paths: ``--pair``, ``--pairs FILE`` and query names.

The audit reads no private data, but its inputs are user input like any other: every bad one
must be refused before the audit runs (no progress line, nothing sampled) with exit code 2 and
one ``dpkit: error:`` line naming the option — never a traceback — and a ``--pairs`` file's
contents are never echoed (pointing it at a file that is not a pairs file must not print that
file). Each case runs in a forked process (``fork_cli``), so an uncaught exception would show
exactly as a user would see it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-token-0123456789"


def _refused(result: Any, option: str) -> None:
    returncode, stdout, stderr = result.returncode, result.stdout, result.stderr
    assert returncode == 2, (stdout, stderr)
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpkit: error:"), stderr
    assert option in lines[0]
    assert "screening" not in stderr and stdout == ""  # nothing ran
    assert SECRET not in stderr


@pytest.mark.parametrize(
    "pair",
    [
        "not json",
        "[0]",
        "[0, 1, 2]",
        '{"x": 0}',
        "[0, 5]",  # beyond the sensitivity 1 of laplace
        "[0, NaN]",
        "[0, Infinity]",
        '[0, "1"]',
        "[[0], [1]]",
        "[true, false]",
        "[" * 5000 + "]" * 5000,
    ],
)
def test_a_bad_pair_is_refused_before_anything_runs(rt: Any, pair: str) -> None:
    _refused(rt.fork_cli("audit", "laplace", "-p", "epsilon=1", "--pair", pair), "--pair")


@pytest.mark.parametrize(
    ("name", "pair"),
    [("krr", "[0, 9]"), ("krr", "[1.5, 0]"), ("count", "[[1], [1, 2, 3]]"), ("count", "[1, 2]")],
)
def test_pairs_outside_the_relation_are_refused(rt: Any, name: str, pair: str) -> None:
    params = ["-p", "k=4"] if name == "krr" else []
    result = rt.fork_cli("audit", name, "-p", "epsilon=1", *params, "--pair", pair)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "not allowed" in result.stderr and "screening" not in result.stderr


def _pairs_file(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "pairs.json"
    path.write_bytes(body)
    return path


@pytest.mark.parametrize(
    "body",
    [
        SECRET.encode(),
        b"\xff\xfe" + SECRET.encode("utf-16-le"),
        b'{"pairs": [[0, 1]]}',
        b"[[0, 1], [2]]",
        b"[" * 100_000 + b"]" * 100_000,
        b"",
    ],
)
def test_a_bad_pairs_file_is_refused_without_echoing_it(
    rt: Any, tmp_path: Path, body: bytes
) -> None:
    path = _pairs_file(tmp_path, body)
    _refused(rt.fork_cli("audit", "laplace", "-p", "epsilon=1", "--pairs", str(path)), "--pairs")


def test_a_pairs_path_that_is_not_a_small_regular_file_is_refused(rt: Any, tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.json", Path("/dev/zero")):
        _refused(
            rt.fork_cli("audit", "laplace", "-p", "epsilon=1", "--pairs", str(path)), "--pairs"
        )
    big = _pairs_file(tmp_path, b"[" + b"[0, 1], " * 1_500_000 + b"[0, 1]]")
    _refused(rt.fork_cli("audit", "laplace", "-p", "epsilon=1", "--pairs", str(big)), "--pairs")


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "count", "-p", "epsilon=-1"],
        ["audit", "count", "-p", "colour=3"],
        ["audit", "laplace", "--query", "-p", "epsilon=1"],
        ["audit", "sum", "-p", "epsilon=1"],  # bounds are required
        ["audit", "laplace", "-p", "epsilon=" + "[" * 5000 + "]" * 5000],
    ],
)
def test_bad_query_usage_is_a_typed_error(rt: Any, argv: list[str]) -> None:
    result = rt.fork_cli(*argv)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("dpkit: error:")


STATEMENT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
    "privacy_unit_column = user, max_groups_contributed = 1) city, COUNT(*) FROM t GROUP BY city"
)


@pytest.fixture()
def sql_files(tmp_path: Path) -> dict[str, str]:
    """A small table, a CSV whose header is the secret, a text file and a FIFO."""
    (tmp_path / "t.csv").write_text("user,city,minutes\nu1,a,3\nu2,b,4\n")
    (tmp_path / "secret.csv").write_text(f"{SECRET},city\n1,a\n")
    (tmp_path / "secret.txt").write_text(f"{SECRET}\n")
    os.mkfifo(tmp_path / "fifo.csv")
    return {
        name: str(tmp_path / name) for name in ("t.csv", "secret.csv", "secret.txt", "fifo.csv")
    }


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        ([], "--table"),
        (["--table", "t=secret.txt"], "--table"),
        (["--table", "t=fifo.csv"], "--table"),
        (["--table", "t=secret.csv"], "table"),  # no column user: the header is not shown
        (["--table", "t=t.csv", "--person", "secret.csv"], "person"),
        (["--table", "t=t.csv", "--person", "secret.txt"], "--person"),
        (["--table", "t=t.csv", "--person", "fifo.csv"], "--person"),
        (["--table", "t=t.csv", "--privacy-unit", "nosuch"], "privacy_unit"),
        (["--table", "t=t.csv", "--samples", "5"], "--samples"),
        (["--table", "t=t.csv", "-p", "epsilon=1"], "--param"),
    ],
)
def test_a_bad_sql_audit_input_is_refused_before_anything_runs(
    rt: Any, sql_files: dict[str, str], extra: list[str], option: str
) -> None:
    """``dpkit audit --sql``: its tables and options are refused by name, before a release
    runs, and a file's contents — its header included — are never echoed."""
    argv = [_with_paths(part, sql_files) for part in extra]
    _refused(rt.fork_cli("audit", "--sql", STATEMENT, *argv), option)


def _with_paths(part: str, files: dict[str, str]) -> str:
    """``NAME=FILE`` or ``FILE`` with FILE one of ``files``: its path in the test's directory."""
    prefix, _, name = part.rpartition("=")
    if name not in files:
        return part
    return f"{prefix}={files[name]}" if prefix else files[name]

"""Shared helpers for the red-team tests of the privacy boundary.

Two ways of running the command line:

* :func:`run_cli` runs ``python -m dpkit ...`` in a fresh interpreter (``sys.executable``, so the
  venv's dpkit) — used where real process semantics matter (closed stdout, SIGINT, timeouts);
* :func:`fork_cli` forks this (already imported) test process and calls :func:`dpkit.cli.main`
  in the child, with the child's own stdout/stderr files, cwd, warning filters and an alarm as a
  timeout. The child is a real process: its exit code, stdout and stderr (an uncaught exception
  prints a traceback and exits 1, exactly as the interpreter would) are what a user would see,
  at about a tenth of the cost of a new interpreter. The attacks that need hundreds of runs use
  it; ``test_fork_cli_matches_subprocess`` checks the two agree.

Ledger arithmetic is exact (:class:`fractions.Fraction`) through ``dpkit.ledger.Ledger``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "schemas" / "examples"
VALID_EXAMPLES = EXAMPLES / "valid"
PEOPLE_CSV = VALID_EXAMPLES / "data" / "people.csv"

#: Canaries planted in private data: none of them may ever be printed.
CANARY_NUMBER = 7355608
CANARY_LABEL = "carol_has_hiv"
SECRET_HEADER = "root:x:0:0:SECRET_CANARY:/root:/bin/bash"

#: The result fields that carry the DP release itself (noisy, allowed to depend on the data),
#: and the per-run identifiers; everything else a run prints must not depend on the data.
RELEASED_FIELDS = frozenset({"estimate", "variance", "confidence_interval", "release_id"})

# The interpreter's warning filters as a user's ``dpkit`` process has them (pytest turns
# warnings into errors per test; a forked child must behave like the real command).
_DEFAULT_WARNING_FILTERS = list(warnings.filters)


@dataclass(frozen=True)
class CliResult:
    """What a user sees from one ``dpkit`` invocation."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def observable(self) -> tuple[int, str, Any]:
        """(exit code, stderr, stdout with the released values removed): what must not depend
        on the data."""
        try:
            document: Any = strip_released(json.loads(self.stdout))
        except ValueError:
            document = self.stdout
        return self.returncode, self.stderr, document

    def explain(self) -> str:
        return (
            f"dpkit {' '.join(self.args)}\n-> exit {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[:3000]}\n--- stderr ---\n{self.stderr[:3000]}"
        )


def strip_released(document: Any) -> Any:
    """A copy of a result/error document without the released (noisy) fields."""
    if isinstance(document, dict):
        return {k: strip_released(v) for k, v in document.items() if k not in RELEASED_FIELDS}
    if isinstance(document, list):
        return [strip_released(v) for v in document]
    return copy.deepcopy(document)


def dpkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "dpkit", *args]


def run_cli(
    *args: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
    **kwargs: Any,
) -> CliResult:
    """Run the installed ``dpkit`` in a new interpreter; a hang past ``timeout`` fails the test."""
    argv = [os.fspath(a) for a in args]
    try:
        done = subprocess.run(
            dpkit_command(*argv),
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kwargs,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"dpkit {' '.join(argv)} did not finish within {timeout}s (it must refuse promptly)"
        )
    return CliResult(tuple(argv), done.returncode, done.stdout, done.stderr)


def fork_cli(
    *args: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    timeout: int = 30,
) -> CliResult:
    """Run ``dpkit.cli.main(args)`` in a forked child process (see the module docstring)."""
    import dpkit.cli
    import dpkit.registry

    # load the plugins once, in the parent, as a warm CLI would (the child reports failures)
    with contextlib.suppress(Exception):
        dpkit.registry.get_registry()
    argv = [os.fspath(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="dpkit-fork-") as scratch:
        out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                signal.alarm(timeout)
                out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                null_fd = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null_fd, 0)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.argv = ["dpkit", *argv]
                warnings.filters[:] = _DEFAULT_WARNING_FILTERS
                if cwd is not None:
                    os.chdir(cwd)
                try:
                    result = dpkit.cli.main(argv)
                    code = int(result or 0)
                except SystemExit as stop:
                    if stop.code is None:
                        code = 0
                    elif isinstance(stop.code, int):
                        code = stop.code
                    else:
                        print(stop.code, file=sys.stderr)
                        code = 1
                except BaseException:  # as the interpreter would: a traceback and exit 1
                    traceback.print_exc()
                    code = 1
                try:
                    sys.stdout.flush()
                except BaseException:
                    code = code or 120
                sys.stderr.flush()
            finally:
                os._exit(code)
        deadline_status = os.waitpid(pid, 0)[1]
        returncode = os.waitstatus_to_exitcode(deadline_status)
        stdout = Path(out_path).read_text(encoding="utf-8", errors="replace")
        stderr = Path(err_path).read_text(encoding="utf-8", errors="replace")
    if returncode == -signal.SIGALRM:
        pytest.fail(
            f"dpkit {' '.join(argv)} did not finish within {timeout}s (it must refuse promptly)"
        )
    return CliResult(tuple(argv), returncode, stdout, stderr)


# -- ledgers -----------------------------------------------------------------------------------


def ledger_spent(path: str | os.PathLike[str]) -> Fraction:
    """ε spent by the ledger at ``path`` (its own accounting), 0 when no ledger was created."""
    from dpkit.ledger import Ledger

    if not Path(path).exists() or Path(path).stat().st_size == 0:
        return Fraction(0)
    ledger = Ledger(os.fspath(path))
    try:
        return Fraction(ledger.spent().epsilon)
    finally:
        ledger.close()


def entries_spent(path: str | os.PathLike[str]) -> Fraction:
    """ε spent according to the ledger's entries themselves (immune to tampered totals)."""
    import sqlite3

    if not Path(path).exists():
        return Fraction(0)
    with sqlite3.connect(os.fspath(path)) as db:
        rows = db.execute("SELECT epsilon FROM dpkit_entries WHERE status = 'spent'").fetchall()
    return sum((Fraction(r[0]) for r in rows), Fraction(0))


def spent_entry_count(path: str | os.PathLike[str]) -> int:
    import sqlite3

    if not Path(path).exists():
        return 0
    with sqlite3.connect(os.fspath(path)) as db:
        return int(
            db.execute("SELECT COUNT(*) FROM dpkit_entries WHERE status = 'spent'").fetchone()[0]
        )


# -- assertions --------------------------------------------------------------------------------


def assert_clean_refusal(result: CliResult, codes: Iterable[int] = (2,)) -> dict[str, Any]:
    """A public-phase refusal: the expected exit code, a JSON error document with
    ``"spent": false`` on stdout, exactly one line on stderr, and no traceback."""
    codes = tuple(codes)
    assert result.returncode in codes, result.explain()
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.explain()
    try:
        document = json.loads(result.stdout)
    except ValueError:
        pytest.fail("a refusal must print a JSON error document on stdout\n" + result.explain())
    assert document.get("spent") is False, result.explain()
    assert document.get("errors"), result.explain()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, "a refusal prints exactly one line on stderr\n" + result.explain()
    return document


def assert_no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.explain()


def assert_not_echoed(results: Sequence[CliResult], secrets: Iterable[str]) -> None:
    """None of ``secrets`` appears in what was printed, the released values excepted."""
    secrets = list(secrets)
    for result in results:
        _, stderr, document = result.observable()
        printed = stderr + "\n" + json.dumps(document, ensure_ascii=False)
        for secret in secrets:
            assert secret not in printed, f"{secret!r} was echoed\n" + result.explain()


# -- specs and data ----------------------------------------------------------------------------


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(header)]
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def query_spec(
    statistic: str,
    column: str,
    *,
    params: dict[str, Any] | None = None,
    epsilon: float = 0.5,
    path: str = "data.csv",
    session_epsilon: float = 1000.0,
    **extra: Any,
) -> dict[str, Any]:
    """A one-query spec over a CSV column (relative to the spec's directory)."""
    spec: dict[str, Any] = {
        "dpkit": "1",
        "dataset": "redteam",
        "session_budget": {"epsilon": session_epsilon},
        "statistic": statistic,
        "input": {"source": "csv", "path": path, "column": column},
        "budget": {"epsilon": epsilon},
    }
    if params:
        spec["params"] = params
    spec.update(extra)
    return spec


@pytest.fixture(scope="session")
def example_specs() -> dict[str, dict[str, Any]]:
    """The valid examples, by file stem."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(VALID_EXAMPLES.glob("*.json"))}


@pytest.fixture(scope="session")
def rt() -> Any:
    """The helpers of this module, for the test modules (conftest cannot be imported under
    ``--import-mode=importlib``)."""
    import types

    return types.SimpleNamespace(
        **{k: v for k, v in globals().items() if not k.startswith("__") and k != "rt"}
    )

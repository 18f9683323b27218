"""Malformed SQL: a typed error, nothing spent, no traceback.

Seeded mutations of the corpus's statements (``support.sql_corpus``) — a span of tokens
deleted, a token repeated or moved, a keyword, a punctuation mark or a stray character
inserted, the statement cut short, an output named as one of dpkit's own columns — and random
strings are each given to ``dpkit.sql`` and released in a fresh session: either the statement
is still one dpkit answers (and is released), or the refusal is a :class:`~dpkit.DPKitError`
with nothing in the ledger. Any other exception is a finding. A sample also goes through the ``dpkit sql`` command in process: exit
code 0, 2 or 3, never an exception, and a ledger left untouched by every refusal.

Deterministic (one seed per statement): no false positives.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit

pytest.importorskip("sqlglot")
pytest.importorskip("duckdb")
from support.sql_corpus import CORPUS, PUBLIC, tables

STATEMENTS = 520
_INSERTS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "JOIN", "OVER ()",
    "(", ")", ",", "*", "=>", "'", '"', ";", "--", "/*", "COUNT(", "SUM(", "DISTINCT",
    "WITH", "OPTIONS (", "epsilon = 0", "NULL", "1e309", "-", "UNION", "\u00e9", "\x00", "?",
    "$1", "::", "[", "]", "{", "}", "`", "\\", "WITH DIFFERENTIAL_PRIVACY",
    "contribution_bounds_per_group => (", "privacy_unit_column = user_id",
]  # fmt: skip


#: Names dpkit gives its own columns and tables, as a statement's output names.
_RESERVED = [
    "__dpkit_group", "__DPKIT_GROUP", "__a0", "__a1", "__g0", "__v0", "__dpkit_source",
    "__dpkit_released", "__dpkit_row", "__dpkit_public0", "user_id", "__first",
]  # fmt: skip


def _mutate(statement: str, rng: random.Random) -> str:
    if not statement:  # cut short to nothing already
        return statement
    words = statement.split(" ")
    kind = rng.randrange(8)
    aliases = [j for j, word in enumerate(words[:-1]) if word.upper() == "AS"]
    if kind == 6 and aliases:  # an output named as one of dpkit's own columns
        at = rng.choice(aliases) + 1
        name = words[at].rstrip(",);")
        words[at] = rng.choice(_RESERVED) + words[at][len(name) :]  # its comma kept
        return " ".join(words)
    i = rng.randrange(len(words))
    if kind == 0:  # delete a span
        j = min(len(words), i + rng.randint(1, 4))
        words[i:j] = []
    elif kind == 1:  # repeat a word
        words.insert(i, words[i])
    elif kind == 2:  # move a word
        word = words.pop(i)
        words.insert(rng.randrange(len(words) + 1), word)
    elif kind == 3:  # insert a keyword or a mark
        words.insert(i, rng.choice(_INSERTS))
    elif kind == 4:  # cut short
        return statement[: rng.randrange(len(statement))]
    elif kind == 5:  # a stray character inside a word
        word = words[i]
        at = rng.randrange(len(word) + 1)
        words[i] = word[:at] + rng.choice("()',;*=.\"x0-+/") + word[at:]
    else:  # two mutations
        return _mutate(_mutate(statement, rng), rng)
    return " ".join(words)


def _statements() -> list[tuple[str, dict[str, Any] | None]]:
    rng = random.Random(20261127)
    found = []
    for index in range(STATEMENTS):
        statement, beside, _ = CORPUS[index % len(CORPUS)]
        if index % 13 == 0:  # a random string
            text = "".join(
                rng.choice(" SELECTFROMWHERE()*,'=;x1") for _ in range(rng.randint(0, 60))
            )
        else:
            text = _mutate(statement, rng)
        found.append((text, beside))
    return found


STATEMENT_CASES = _statements()


def _beside(beside: dict[str, Any] | None) -> tuple[dict[str, Any] | None, Any]:
    beside = dict(beside or {})
    bounds = beside.pop("bounds", None)
    return beside or None, bounds


def test_the_fuzz_is_large_enough() -> None:
    assert len(STATEMENT_CASES) >= 500


@pytest.mark.parametrize("chunk", range(8))
def test_malformed_statements_are_typed_errors_with_nothing_spent(chunk: int) -> None:
    data = tables(rows=120)
    private = {name: data[name] for name in ("lineitem", "visits")}
    public = {name: data[name] for name in PUBLIC}
    answered = refused = 0
    for text, beside in STATEMENT_CASES[chunk::8]:
        options, bounds = _beside(beside)
        with dpkit.Session(budget=(50.0, 0.5)) as session:
            try:
                query = dpkit.sql(
                    text, tables=private, public=public, options=options, bounds=bounds
                )
                session.release(query, None, rng=np.random.default_rng(0))
            except dpkit.DPKitError as error:
                assert not isinstance(error, dpkit.ReleaseFailed), text
                assert not session.history(), text
                refused += 1
            else:
                answered += 1
    assert refused > answered  # the mutations do break statements, most of the time


def test_the_command_refuses_malformed_statements_with_an_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpkit.cli import main

    data = tables(rows=120)
    paths = {}
    for name in ("lineitem", "visits"):
        paths[name] = tmp_path / f"{name}.parquet"
        data[name].to_parquet(paths[name])
    ledger = tmp_path / "ledger.sqlite"
    for text, beside in STATEMENT_CASES[:40]:
        argv = ["sql", text, "--ledger", str(ledger), "--budget", "50,0.5", "--seed", "1"]
        argv += [f"--table={name}={path}" for name, path in paths.items()]
        options, bounds = _beside(beside)
        argv += [f"--option={k}={v}" for k, v in (options or {}).items()]
        argv += [f"--bounds={k}={lo}:{hi}" for k, (lo, hi) in (bounds or {}).items()]
        before = len(dpkit.Ledger(str(ledger)).entries()) if ledger.exists() else 0
        code = main(argv)
        captured = capsys.readouterr()
        assert code in (0, 2, 3), (text, captured.err)
        assert "Traceback" not in captured.err
        if code != 0:
            after = len(dpkit.Ledger(str(ledger)).entries()) if ledger.exists() else 0
            assert after == before, text

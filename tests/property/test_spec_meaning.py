"""A spec means one thing: what a reviewer reads is what runs, or nothing runs.

A reader of a spec sees the first of two values of a repeated key, while a plain JSON parser
keeps the last; two queries with one id leave one result and one ledger entry unnamed; a
``--seed`` over a spec that asks for secure randomness would run it in fast mode. For every
valid example spec (``schemas/examples/valid``), with a key drawn anywhere in it written twice
(another value first, the spec's own last: what a plain parser would run is the valid spec), a
query repeated under another query's id (written or its default ``q<index>``), or secure
randomness asked for (the spec's ``rng``, a session spec's defaults or one query's) and a drawn ``--seed``
given, ``dpkit run`` exits 2 with the error at its JSON Pointer and its rule, no traceback, and
no ledger entry.

False-positive rate: 0. The refusal is decided by the spec's text and the command line alone
(deterministic); Hypothesis is derandomized (the same examples on every run).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS

from dpkit import cli

ROOT = Path(__file__).resolve().parents[2]
VALID = sorted((ROOT / "schemas" / "examples" / "valid").glob("*.json"))
SESSIONS = [path for path in VALID if "queries" in json.loads(path.read_text())]
#: Examples per property: each is one ``dpkit run`` (about 0.1 s); the refusal, when it is
#: gone, shows on the first example that reaches it (every example asks for one).
EXAMPLES = 40
OTHER_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.1, 0.9, 1e-6, "secure", "fast", "x"]),
    st.just({"epsilon": 0.9}),
)


def members(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every member of every object in ``node`` (list items are stepped into)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found += [(*prefix, key), *members(value, (*prefix, key))]
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += members(value, (*prefix, index))
    return found


def written_twice(node: Any, path: tuple[Any, ...], other: Any) -> str:
    """``node`` as JSON text with the member at ``path`` written twice: ``other``, then its own
    value (a parser that keeps the last value reads ``node`` itself)."""
    if isinstance(node, dict):
        parts = []
        for key, value in node.items():
            if path and key == path[0]:
                if len(path) == 1:
                    parts.append(f"{json.dumps(key)}: {json.dumps(other)}")
                    parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
                else:
                    parts.append(f"{json.dumps(key)}: {written_twice(value, path[1:], other)}")
            else:
                parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(node, list) and path:
        items = [
            written_twice(v, path[1:], other) if i == path[0] else json.dumps(v)
            for i, v in enumerate(node)
        ]
        return "[" + ", ".join(items) + "]"
    return json.dumps(node)


def pointer(path: tuple[Any, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def refused(
    source: Path, text: str, capfd: pytest.CaptureFixture[str], *extra: str
) -> list[dict[str, Any]]:
    """Run ``text`` as a spec beside ``source`` (relative paths resolve): it must exit 2, with
    no traceback and no ledger entry; its errors."""
    name = uuid.uuid4().hex
    spec = source.parent / f".meaning-{source.stem}-{name}.json"
    ledger = Path(tempfile.gettempdir()) / f"dpkit-meaning-{name}.sqlite"
    try:
        spec.write_text(text)
        capfd.readouterr()
        root = ["--data-root", str(source.parent.parent)]  # where the examples' data are
        code = cli.main(["run", "--json", str(spec), "--ledger", str(ledger), *root, *extra])
        captured = capfd.readouterr()
        assert code == 2, (code, captured)
        assert "Traceback" not in captured.err
        if ledger.exists():
            with sqlite3.connect(ledger) as db:
                assert db.execute("SELECT COUNT(*) FROM dpkit_entries").fetchone()[0] == 0
    finally:
        spec.unlink(missing_ok=True)
        ledger.unlink(missing_ok=True)
    return list(json.loads(captured.out)["errors"])


@st.composite
def repeated_keys(draw: st.DrawFn) -> tuple[Path, str, tuple[Any, ...]]:
    source = draw(st.sampled_from(VALID))
    spec = json.loads(source.read_text())
    path = draw(st.sampled_from(members(spec)))
    other = draw(OTHER_VALUES)
    return source, written_twice(spec, path, other), path


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(case=repeated_keys())
def test_a_key_written_twice_is_refused_at_its_pointer(
    case: tuple[Path, str, tuple[Any, ...]], capfd: pytest.CaptureFixture[str]
) -> None:
    source, text, path = case
    errors = refused(source, text, capfd)
    assert [(e["pointer"], e.get("code")) for e in errors] == [(pointer(path), "duplicate_key")], (
        f"the key at {pointer(path)} written twice: {errors}"
    )


@st.composite
def repeated_ids(draw: st.DrawFn) -> tuple[Path, str, int]:
    source = draw(st.sampled_from(SESSIONS))
    spec = json.loads(source.read_text())
    queries = spec["queries"]
    named = draw(st.integers(0, len(queries) - 1))
    copy = dict(draw(st.sampled_from(queries)))
    copy["id"] = queries[named].get("id", f"q{named}")
    at = draw(st.integers(0, len(queries)))
    queries.insert(at, copy)
    return source, json.dumps(spec), at if at > named else named + 1


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(case=repeated_ids())
def test_two_queries_with_one_id_are_refused(
    case: tuple[Path, str, int], capfd: pytest.CaptureFixture[str]
) -> None:
    source, text, second = case
    errors = refused(source, text, capfd)
    assert any(e.get("code") == "duplicate_id" for e in errors), errors
    assert f"/queries/{second}/id" in {e["pointer"] for e in errors}, errors


@st.composite
def seeded_secure(draw: st.DrawFn) -> tuple[Path, str, int]:
    source = draw(st.sampled_from(VALID))
    spec = json.loads(source.read_text())
    if "queries" not in spec:
        spec["rng"] = {"mode": "secure"}
    elif draw(st.booleans()):
        spec.setdefault("defaults", {})["rng"] = {"mode": "secure"}
    else:
        spec["queries"][draw(st.integers(0, len(spec["queries"]) - 1))]["rng"] = {"mode": "secure"}
    return source, json.dumps(spec), draw(st.integers(0, 2**31 - 1))


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(case=seeded_secure())
def test_a_seed_over_secure_randomness_is_refused(
    case: tuple[Path, str, int], capfd: pytest.CaptureFixture[str]
) -> None:
    source, text, seed = case
    errors = refused(source, text, capfd, "--seed", str(seed))
    assert any("secure" in e["message"] and "seed" in e["message"] for e in errors), errors

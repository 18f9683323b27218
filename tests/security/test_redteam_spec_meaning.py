"""Red-team tests: specs that say one thing and would do another.

A reader of a spec — the analyst's reviewer, a privacy officer — must see what it will do:

* a key written twice in one object (``"budget": {"epsilon": 0.1}`` then ``"budget":
  {"epsilon": 0.9}``): Python's JSON reader keeps the last one, so the file would be charged
  0.9 while its first, visible budget says 0.1. Refused, anywhere in the document, with the
  JSON Pointer of the repeated key, before anything is read or spent;
* ``NaN`` and ``Infinity``, which are not JSON numbers: refused the same way;
* two queries with the same id (their results and ledger entries would be indistinguishable):
  refused at the second;
* ``dpkit run --seed N`` over a spec that asks for ``"rng": {"mode": "secure"}`` (a query's
  own or the defaults'): the seed means fast, seeded randomness, so the run would silently
  not be what the spec says. Refused, naming the queries; a spec that says nothing about
  randomness still runs in fast mode under a seed, as documented.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpkit import _json as strict_json
from dpkit.errors import SpecError
from dpkit.spec import SpecInvalid, load_spec

pytestmark = pytest.mark.integration

COUNT_SPEC = (
    '{"dpkit": "1", "session_budget": {"epsilon": 1}, "statistic": "count", '
    '"input": {"source": "inline", "values": [1, 2, 3]}, %s}'
)


def _session(queries: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "budget": {"epsilon": 1.0},
        "defaults": {"input": {"source": "inline", "values": [1, 2, 3]}},
        "queries": queries,
        **extra,
    }


def _count(**extra: Any) -> dict[str, Any]:
    return {"statistic": "count", "budget": {"epsilon": 0.1}, **extra}


# -- repeated keys -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ('"budget": {"epsilon": 0.1}, "budget": {"epsilon": 0.9}', "/budget"),
        ('"budget": {"epsilon": 0.1, "epsilon": 0.9}', "/budget/epsilon"),
        ('"budget": {"epsilon": 0.1}, "rng": {"mode": "secure", "mode": "fast"}', "/rng/mode"),
        ('"budget": {"epsilon": 0.1}, "output": {"confidence": 0.9}, "output": {}', "/output"),
    ],
)
def test_a_repeated_key_is_refused_at_its_pointer(
    rt: Any, tmp_path: Path, fields: str, where: str
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(COUNT_SPEC % fields)
    ledger = tmp_path / "ledger.sqlite"
    document = rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger))
    )
    assert [(e["pointer"], e["code"]) for e in document["errors"]] == [(where, "duplicate_key")]
    assert rt.ledger_spent(ledger) == 0 and not ledger.exists()


def test_a_repeated_key_deep_in_a_session_is_refused(rt: Any, tmp_path: Path) -> None:
    """Inside the third query's params, in a list: the pointer goes all the way down."""
    text = json.dumps(_session([_count(), _count(), {"statistic": "sum", "params": {}}]))
    text = text.replace('"params": {}', '"params": {"lower": 0, "upper": 9, "lower": -1e9}')
    spec = tmp_path / "session.json"
    spec.write_text(text)
    with pytest.raises(SpecInvalid) as refused:
        load_spec(spec)
    assert isinstance(refused.value, SpecError)  # the typed spec error, with its pointer
    assert refused.value.pointer == "/queries/2/params/lower"
    assert refused.value.issues[0].code == "duplicate_key"
    ledger = tmp_path / "ledger.sqlite"
    rt.assert_clean_refusal(rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger)))
    assert not ledger.exists()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_not_json(rt: Any, tmp_path: Path, constant: str) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(COUNT_SPEC % f'"budget": {{"epsilon": {constant}}}')
    ledger = tmp_path / "ledger.sqlite"
    document = rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger))
    )
    assert [(e["pointer"], e["code"]) for e in document["errors"]] == [
        ("/budget/epsilon", "invalid_json")
    ]
    assert not ledger.exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a/b": 1, "a/b": 2}', "/a~1b"),
        ('{"x": [{"t~": 1}, {"t~": 1, "t~": 1}]}', "/x/1/t~0"),
        ('{"x": {"y": NaN}}', "/x/y"),
        ('[{"z": 1, "z": 1}]', "/0/z"),
    ],
)
def test_strict_reader_pointers(text: str, where: str) -> None:
    with pytest.raises(SpecError) as refused:
        strict_json.loads(text)
    assert refused.value.pointer == where


def test_strict_reader_reads_ordinary_json_as_json_does() -> None:
    text = '{"a": [1, 2.5, "x", null, true, {"b": {}}], "c": -0.0, "d": 1e308}'
    assert strict_json.loads(text) == json.loads(text)


def test_audit_pairs_file_with_a_repeated_key(rt: Any, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.json"
    pairs.write_text('[[{"v": 0, "v": 1}, {"v": 1}]]')
    result = rt.fork_cli("audit", "laplace", "--param", "epsilon=1", "--pairs", str(pairs))
    assert result.returncode == 2, result.explain()
    rt.assert_no_traceback(result)
    assert "appears more than once" in result.stderr and "/0/0/v" in result.stderr


# -- repeated query ids --------------------------------------------------------------------------


def test_two_queries_with_one_id_are_refused(rt: Any, tmp_path: Path) -> None:
    spec = rt.write_json(
        tmp_path / "session.json",
        _session([_count(id="rows"), _count(id="other"), _count(id="rows")]),
    )
    ledger = tmp_path / "ledger.sqlite"
    document = rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger))
    )
    assert [(e["pointer"], e["code"]) for e in document["errors"]] == [
        ("/queries/2/id", "duplicate_id")
    ]
    assert "/queries/0" in document["errors"][0]["message"]
    assert not ledger.exists()


def test_a_written_id_equal_to_a_default_id_is_refused(rt: Any, tmp_path: Path) -> None:
    """The second query has no id, so it is 'q1' — which the first one already calls itself."""
    spec = rt.write_json(tmp_path / "session.json", _session([_count(id="q1"), _count()]))
    document = rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(spec), "--ledger", str(tmp_path / "l.sqlite"))
    )
    assert [(e["pointer"], e["code"]) for e in document["errors"]] == [
        ("/queries/1", "duplicate_id")
    ]


# -- --seed against an explicit secure mode ------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "where", "names"),
    [
        (
            _session([_count(id="a"), _count(id="b", rng={"mode": "secure"})]),
            "/queries/1/rng/mode",
            "'b'",
        ),
        (
            _session(
                [_count(id="a"), _count(id="b", rng={"mode": "fast"}), _count(id="c")],
                defaults={
                    "input": {"source": "inline", "values": [1, 2, 3]},
                    "rng": {"mode": "secure"},
                },
            ),
            "/defaults/rng/mode",
            "'a', 'c'",
        ),
    ],
    ids=["query", "defaults"],
)
def test_seed_over_an_explicit_secure_mode_is_refused(
    rt: Any, tmp_path: Path, spec: dict[str, Any], where: str, names: str
) -> None:
    path = rt.write_json(tmp_path / "session.json", spec)
    ledger = tmp_path / "ledger.sqlite"
    document = rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(path), "--ledger", str(ledger), "--seed", "7")
    )
    (error,) = document["errors"]
    assert (error["pointer"], error["code"]) == (where, "rng_conflict")
    assert names in error["message"] and "--seed" in error["message"]
    assert "fast" in error["message"]
    assert not ledger.exists()
    # without the seed the same spec runs, in secure mode where it says so
    assert rt.fork_cli("run", "--json", str(path), "--ledger", str(ledger)).returncode == 0


def test_seed_over_a_single_secure_query_is_refused(rt: Any, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(COUNT_SPEC % '"budget": {"epsilon": 0.1}, "rng": {"mode": "secure"}')
    document = rt.assert_clean_refusal(
        rt.fork_cli(
            "run", "--json", str(spec), "--ledger", str(tmp_path / "l.sqlite"), "--seed", "1"
        )
    )
    assert [e["pointer"] for e in document["errors"]] == ["/rng/mode"]


def test_seed_without_an_explicit_mode_runs_in_fast_mode(rt: Any, tmp_path: Path) -> None:
    """As documented: ``--seed`` forces fast mode where the spec does not say otherwise, and
    the same seed reproduces the release."""
    path = rt.write_json(tmp_path / "session.json", _session([_count(id="a"), _count(id="b")]))
    released = []
    for run in ("one", "two"):
        result = rt.fork_cli(
            "run", "--json", str(path), "--ledger", str(tmp_path / f"{run}.sqlite"), "--seed", "7"
        )
        assert result.returncode == 0, result.explain()
        released.append(result.json()["results"])
    assert [r["randomness"] for r in released[0]] == [{"mode": "fast", "seed": 7}] * 2
    assert [r["estimate"] for r in released[0]] == [r["estimate"] for r in released[1]]

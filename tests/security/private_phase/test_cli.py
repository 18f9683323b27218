"""Red-team tests of ``dpkit run``: an analyst who writes specs tries to learn private values
from anything but the DP release — exit codes, error messages, refunds, files, the ledger.

The contract ("Seal the privacy boundary"): a public phase (spec, bounds,
categories, the data file's existence/type/size/header, output options, ledger, budget) whose
failures exit 2 or 3 with a JSON error document (``"spent": false``) and one line on stderr,
and a private phase, after the spend is committed, that is total: nothing observable except
the noisy estimate/variance/confidence interval may depend on the data.

Each attack's assertion is an equality of *everything observable* between neighbouring
datasets (or across the attacker's sweep): equal observations carry zero bits about the
difference. Released noisy fields are removed before comparing (they are the DP release).
"""

from __future__ import annotations

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

# Interrupts sent at moments of a run are in test_cli_interrupts.py (the serial run); these
# compare outcomes whatever the timing, and run in parallel.
pytestmark = pytest.mark.integration

AGES = [a for a in range(18, 78) if a != 37]  # 59 distinct ages; 37 is a hole
LABELS = ["bus", "bike", "car", "train", "walk"]
ROW_WIDTH = 48  # every CSV row is padded to this width: neighbours have equal file sizes


def _row(age: Any, label: Any, score: Any) -> str:
    """One fixed-width CSV row (a trailing ``note`` column absorbs the difference), so that the
    file's size — public under the contract — is the same for neighbouring datasets."""
    body = f"{age},{label},{score},"
    assert len(body) < ROW_WIDTH
    return body + "x" * (ROW_WIDTH - len(body))


def _dataset(path: Path, rows: list[tuple[Any, Any, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "age,label,score,note\n" + "".join(_row(*r) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def _base_rows() -> list[tuple[Any, Any, Any]]:
    return [(age, LABELS[i % 5], f"{(i * 37) % 100}.5") for i, age in enumerate(AGES)]


def _with_record(record: tuple[Any, Any, Any], at: int = 30) -> list[tuple[Any, Any, Any]]:
    rows = _base_rows()
    rows.insert(at, record)
    return rows


def _frequency(column: str, categories: list[Any], mechanism: str = "krr") -> dict[str, Any]:
    return {
        "dpkit": "1",
        "dataset": "redteam",
        "session_budget": {"epsilon": 1000.0},
        "statistic": "frequency",
        "mechanism": {"name": mechanism, "params": {"k": len(categories)}},
        "input": {"source": "csv", "path": "data.csv", "column": column, "categories": categories},
        "budget": {"epsilon": 0.5},
    }


def _age_probes(rt: Any, v: int) -> dict[str, dict[str, Any]]:
    """Specs an attacker hopes fail only if age ``v`` occurs in the data."""
    return {
        "histogram_of_everyone_else": rt.query_spec(
            "histogram", "age", params={"categories": AGES}
        ),
        "histogram_with_other": rt.query_spec(
            "histogram", "age", params={"categories": [v, 18, 19], "other": True}
        ),
        "sum_bounds_v_v1": rt.query_spec("sum", "age", params={"lower": v, "upper": v + 1}),
        "quantile_bounds_v_v1": rt.query_spec(
            "quantile", "age", params={"q": 0.5, "lower": v, "upper": v + 1}
        ),
        "krr_of_everyone_else": _frequency("age", AGES),
    }


def _label_probes(rt: Any, v: str) -> dict[str, dict[str, Any]]:
    """Specs an attacker hopes fail only if label ``v`` occurs in the data."""
    return {
        "histogram_of_known_labels": rt.query_spec(
            "histogram", "label", params={"categories": LABELS}
        ),
        "histogram_with_other": rt.query_spec(
            "histogram", "label", params={"categories": [v, "bus"], "other": True}
        ),
        "krr_of_known_labels": _frequency("label", LABELS),
        "oue_of_known_labels": _frequency("label", LABELS, "oue"),
        "count_labels": rt.query_spec("count", "label"),
    }


def _run_world(
    rt: Any, world: Path, rows: list[tuple[Any, Any, Any]], probes: dict[str, Any]
) -> dict[str, Any]:
    """Run every probe, in order, against one ledger in ``world`` (relative paths only, so the
    two worlds' outputs are comparable byte for byte)."""
    _dataset(world / "data.csv", rows)
    results = {}
    for name, spec in probes.items():
        rt.write_json(world / f"{name}.json", spec)
        results[name] = rt.fork_cli(
            "run", "--json", f"{name}.json", "--ledger", "ledger.sqlite", cwd=world
        )
    return results


def _compare_worlds(
    rt: Any, tmp_path: Path, record_a: tuple, record_b: tuple, probes: dict
) -> None:
    with_v = _run_world(rt, tmp_path / "with", _with_record(record_a), probes)
    without_v = _run_world(rt, tmp_path / "without", _with_record(record_b), probes)
    for name in probes:
        assert with_v[name].observable() == without_v[name].observable(), (
            f"probe {name!r} distinguishes the neighbours\n"
            + with_v[name].explain()
            + "\n=== neighbour ===\n"
            + without_v[name].explain()
        )
    for name, spec in probes.items():  # planted canaries, where the spec does not name them
        secrets = [s for s in (str(rt.CANARY_NUMBER), rt.CANARY_LABEL) if s not in json.dumps(spec)]
        rt.assert_not_echoed([with_v[name], without_v[name]], secrets)
    for name in probes:  # every probe is a valid spec: it must release, in both worlds
        assert with_v[name].returncode == 0, with_v[name].explain()
    assert (
        rt.ledger_spent(tmp_path / "with" / "ledger.sqlite")
        == rt.ledger_spent(tmp_path / "without" / "ledger.sqlite")
        == Fraction(len(probes), 2)
    )


# -- 1. enumerating values through refused specs -------------------------------------------------


@pytest.mark.parametrize("v", [37, 7355608, -3], ids=["hole_37", "canary", "negative"])
def test_enumerate_ages_through_refusals(rt: Any, tmp_path: Path, v: int) -> None:
    """Attack: for a candidate age v, run specs that a leaky implementation refuses only when v
    occurs — a histogram (or k-RR) over every *other* age, a histogram declaring v with an
    'other' cell, bounds [v, v + 1] — on a dataset with one record of age v and on its
    neighbour where that record is 40 instead.

    Recovered bits: the (exit code, stderr, stdout without the noisy fields) sequences are equal
    for the two neighbours, so they carry no information about whether v occurs; and the
    planted value 7355608 is never printed by a spec that does not name it.
    """
    _compare_worlds(rt, tmp_path, (v, "car", "50.5"), (40, "car", "50.5"), _age_probes(rt, v))


@pytest.mark.parametrize("v", ["carol_has_hiv", "plane"])
def test_enumerate_labels_through_refusals(rt: Any, tmp_path: Path, v: str) -> None:
    """Attack: is anyone's label v ('carol_has_hiv': a secret planted in the data)? Histograms
    and local frequency oracles over the known labels fail, in a leaky implementation, only when
    an unknown label occurs, and their error message names it.

    Recovered bits: identical observables for the dataset with label v and the neighbour with
    'bus' instead, and 'carol_has_hiv' never printed unless the spec named it.
    """
    _compare_worlds(rt, tmp_path, (40, v, "50.5"), (40, "bus", "50.5"), _label_probes(rt, v))


# -- 2. reading a maximum through exit codes -----------------------------------------------------


def test_maximum_not_readable_through_exit_codes(rt: Any, tmp_path: Path) -> None:
    """Attack: sweep the upper bound t of sum/mean/quantile over a range spanning the true
    maximum (77) — a leaky implementation fails (or warns about clamping) once t < max.

    Recovered bits: every run exits 0 with the same stderr, whatever t is relative to the max.
    """
    _dataset(tmp_path / "data.csv", _base_rows())
    observed = []
    for t in (60, 76, 77, 78, 1000):
        spec = {
            "dpkit": "1",
            "dataset": "redteam",
            "budget": {"epsilon": 1000.0},
            "defaults": {"input": {"source": "csv", "path": "data.csv", "column": "age"}},
            "queries": [
                {
                    "statistic": "sum",
                    "params": {"lower": 0, "upper": t},
                    "budget": {"epsilon": 0.5},
                },
                {
                    "statistic": "mean",
                    "params": {"lower": 0, "upper": t},
                    "budget": {"epsilon": 0.5},
                },
                {
                    "statistic": "quantile",
                    "params": {"q": 0.99, "lower": 0, "upper": t},
                    "budget": {"epsilon": 0.5},
                },
            ],
        }
        rt.write_json(tmp_path / f"t{t}.json", spec)
        result = rt.fork_cli(
            "run", "--json", f"t{t}.json", "--ledger", "ledger.sqlite", cwd=tmp_path
        )
        observed.append((t, result))
    assert {r.returncode for _, r in observed} == {0}, [r.explain() for _, r in observed]
    assert len({r.stderr for _, r in observed}) == 1, [r.explain() for _, r in observed]
    shapes = {
        json.dumps(rt.strip_released(r.json())["results"][0], sort_keys=True).count(":")
        for _, r in observed
    }
    assert len(shapes) == 1


# -- 3. counting missing / out-of-category records through messages ------------------------------

BAD_CELLS = ["", "NaN", "abc", "N/A", "-"]


def _bad_records_dataset(path: Path, k: int) -> Path:
    rows = _base_rows()
    for i in range(k):  # k scores unusable, k labels outside the categories, spread out
        age, _, _ = rows[7 + 10 * i]
        rows[7 + 10 * i] = (age, f"zz_unknown_{i}", BAD_CELLS[i % len(BAD_CELLS)])
    return _dataset(path, rows)


def test_bad_record_counts_not_readable(rt: Any, tmp_path: Path) -> None:
    """Attack: learn how many records are missing or outside the categories from messages,
    warnings or exit codes (datasets with 0, 1 and 5 such records, same size and row count).

    Recovered bits: the three runs' exit codes, stderr and stdout without the noisy fields are
    identical, so no count of bad records (and no bad value) is printed.
    """
    q = lambda statistic, column, **params: {  # noqa: E731
        "statistic": statistic,
        "input": {"source": "csv", "path": "data.csv", "column": column},
        "budget": {"epsilon": 0.1},
        **({"params": params} if params else {}),
    }
    spec = {
        "dpkit": "1",
        "dataset": "redteam",
        "budget": {"epsilon": 100.0},
        "queries": [
            q("count", "score"),
            q("count", "score", nan="keep"),
            q("count", "score", nan="drop"),
            q("sum", "score", lower=0, upper=100),
            q("sum", "score", lower=0, upper=100, nan="drop"),
            q("mean", "score", lower=0, upper=100),
            q("quantile", "score", q=0.5, lower=0, upper=100),
            q("histogram", "label", categories=LABELS),
            q("histogram", "label", categories=LABELS, other=True),
            {**_frequency("label", LABELS), "budget": {"epsilon": 0.1}},
            q("count", "label"),
        ],
    }
    for query in spec["queries"]:
        for key in ("dpkit", "dataset", "session_budget"):
            query.pop(key, None)
    runs = []
    for k in (0, 1, 5):
        world = tmp_path / f"bad{k}"
        _bad_records_dataset(world / "data.csv", k)
        rt.write_json(world / "spec.json", spec)
        runs.append(
            rt.fork_cli("run", "--json", "spec.json", "--ledger", "ledger.sqlite", cwd=world)
        )
    assert runs[0].observable() == runs[1].observable() == runs[2].observable(), "\n".join(
        r.explain() for r in runs
    )
    rt.assert_not_echoed(runs, ["zz_unknown", "abc", "N/A"])
    assert runs[0].returncode == 0, runs[0].explain()


@pytest.mark.parametrize(
    "cell",
    ["4\x000", "\udcff\udcfe", '"4', "4,5,6,7", "ü"],
    ids=["nul_byte", "invalid_utf8", "open_quote", "extra_fields", "non_ascii"],
)
def test_malformed_record_in_body_is_private(rt: Any, tmp_path: Path, cell: str) -> None:
    """Attack: a record whose cell is malformed (a NUL byte, invalid UTF-8, an open quote,
    extra fields) makes a naive CSV reader raise *after* the header was accepted — an error
    that reveals the record exists (and often echoes it).

    Only the header is public; the body is private data. Recovered bits: the run on the file
    with the malformed record and on its neighbour (a plain '40', same file size) look the
    same, and the malformed bytes are never echoed.
    """
    observed = []
    for name, value in (("odd", cell), ("plain", "40")):
        world = tmp_path / name
        world.mkdir()
        rows = _base_rows()
        body = "age,label,score,note\n" + "".join(_row(*r) + "\n" for r in rows[:20])
        odd = f"{value},car,50.5,".encode("utf-8", errors="surrogateescape")
        line = odd + b"x" * (ROW_WIDTH + 8 - len(odd)) + b"\n"
        tail = "".join(_row(*r) + "\n" for r in rows[20:])
        (world / "data.csv").write_bytes(body.encode() + line + tail.encode())
        rt.write_json(
            world / "spec.json",
            rt.query_spec("sum", "age", params={"lower": 0, "upper": 100}),
        )
        observed.append(
            rt.fork_cli("run", "--json", "spec.json", "--ledger", "ledger.sqlite", cwd=world)
        )
    odd_run, plain_run = observed
    assert odd_run.observable() == plain_run.observable(), (
        odd_run.explain() + "\n" + plain_run.explain()
    )
    assert plain_run.returncode == 0, plain_run.explain()


# -- 4. refusals in the public phase never spend ---------------------------------------------------


def test_repeated_public_refusals_spend_exactly_nothing(rt: Any, tmp_path: Path) -> None:
    """Attack: hammer the ledger with specs refused in the public phase (invalid output option,
    over budget), hoping some partial spend or refund bookkeeping drifts.

    After one valid spend of ε = 1/4, K = 3 refusals of each kind leave the spent total at
    exactly 1/4 (exact Fractions), with one spent entry.
    """
    _dataset(tmp_path / "data.csv", _base_rows())
    good = rt.query_spec("count", "age", epsilon=0.25, session_epsilon=1.0)
    bad_output = {**good, "output": {"confidence": 1.5}}
    over_budget = {**good, "budget": {"epsilon": 2.0}}
    for name, spec in (("good", good), ("bad_output", bad_output), ("over", over_budget)):
        rt.write_json(tmp_path / f"{name}.json", spec)
    first = rt.fork_cli("run", "--json", "good.json", "--ledger", "ledger.sqlite", cwd=tmp_path)
    assert first.returncode == 0, first.explain()
    for _ in range(3):
        rt.assert_clean_refusal(
            rt.fork_cli(
                "run", "--json", "bad_output.json", "--ledger", "ledger.sqlite", cwd=tmp_path
            ),
            (2,),
        )
        rt.assert_clean_refusal(
            rt.fork_cli("run", "--json", "over.json", "--ledger", "ledger.sqlite", cwd=tmp_path),
            (3,),
        )
    assert rt.ledger_spent(tmp_path / "ledger.sqlite") == Fraction(1, 4)
    assert rt.entries_spent(tmp_path / "ledger.sqlite") == Fraction(1, 4)
    assert rt.spent_entry_count(tmp_path / "ledger.sqlite") == 1


# -- 6. data files: confinement, special files, size limit, no echo -------------------------------


@pytest.fixture()
def tree(rt: Any, tmp_path: Path) -> dict[str, Path]:
    """root/specs/ (the spec's directory), root/data/d.csv, and a file outside root."""
    root = tmp_path / "root"
    (root / "specs" / "subdir").mkdir(parents=True)
    data = rt.write_csv(root / "data" / "d.csv", ["age"], [[a] for a in AGES])
    inside = rt.write_csv(root / "specs" / "d.csv", ["age"], [[a] for a in AGES])
    outside = rt.write_csv(tmp_path / "outside.csv", ["age"], [[a] for a in AGES])
    return {
        "root": root,
        "specs": root / "specs",
        "data": data,
        "inside": inside,
        "outside": outside,
    }


def _path_spec(rt: Any, tree: dict[str, Path], path: str) -> Path:
    return rt.write_json(
        tree["specs"] / "q.json", rt.query_spec("count", "age", path=path, session_epsilon=10.0)
    )


@pytest.mark.parametrize(
    ("path", "flags", "allowed"),
    [
        ("d.csv", (), True),
        ("../data/d.csv", (), False),
        ("subdir/../../data/d.csv", (), False),
        ("../../outside.csv", ("--data-root", "{root}"), False),
        ("{outside}", (), False),
        ("{outside}", ("--allow-any-path",), True),
        ("{data}", (), False),
    ],
    ids=[
        "inside_spec_dir",
        "dotdot_escape",
        "dotdot_through_subdir",
        "escape_data_root",
        "absolute",
        "absolute_allowed",
        "absolute_inside_root_without_flag",
    ],
)
def test_input_path_confinement(
    rt: Any, tree: dict[str, Path], path: str, flags: tuple, allowed: bool
) -> None:
    """Attack: a spec's input.path reads a file outside the spec's directory (``..``, an
    absolute path) — e.g. another dataset, or /etc/passwd. Refused with exit 2 and nothing
    spent unless the operator widened the scope (--data-root, --allow-any-path)."""
    fill = {k: str(v) for k, v in tree.items()}
    spec = _path_spec(rt, tree, path.format(**fill))
    ledger = tree["root"].parent / "ledger.sqlite"
    args = [a.format(**fill) for a in flags]
    result = rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger), *args)
    if allowed:
        assert result.returncode == 0, result.explain()
        assert rt.ledger_spent(ledger) == Fraction(1, 2)
    else:
        rt.assert_clean_refusal(result)
        assert rt.ledger_spent(ledger) == 0


def test_data_root_widens_the_scope(rt: Any, tree: dict[str, Path]) -> None:
    """--data-root DIR lets a spec read a file inside DIR outside the spec's directory. Whether
    input.path is then written relative to the spec's directory ('../data/d.csv') or to the data
    root ('data/d.csv') is not fixed by the contract: one of the two must run; a refused one is a
    clean public-phase refusal with nothing spent."""
    ledger = tree["root"].parent / "ledger.sqlite"
    outcomes = []
    for path in ("../data/d.csv", "data/d.csv"):
        spec = _path_spec(rt, tree, path)
        result = rt.fork_cli(
            "run", "--json", str(spec), "--ledger", str(ledger), "--data-root", str(tree["root"])
        )
        if result.returncode != 0:
            rt.assert_clean_refusal(result)
        outcomes.append(result.returncode)
    assert 0 in outcomes, outcomes
    assert rt.ledger_spent(ledger) == Fraction(outcomes.count(0), 2)


def test_data_option_allowed_anywhere(rt: Any, tree: dict[str, Path]) -> None:
    """--data FILE is named by the operator on the command line: it may be anywhere."""
    spec = _path_spec(rt, tree, "d.csv")
    ledger = tree["root"].parent / "ledger.sqlite"
    result = rt.fork_cli(
        "run", "--json", str(spec), "--data", str(tree["outside"]), "--ledger", str(ledger)
    )
    assert result.returncode == 0, result.explain()


@pytest.mark.parametrize(
    "kind", ["directory", "fifo", "dev_zero", "fifo_as_path", "dev_zero_as_path"]
)
def test_special_files_refused_promptly(rt: Any, tree: dict[str, Path], kind: str) -> None:
    """Attack/accident: a directory, a FIFO (blocks forever on open) or /dev/zero (never ends)
    as data. Refused before reading, exit 2, nothing spent, within the timeout (a hang fails)."""
    ledger = tree["root"].parent / "ledger.sqlite"
    fifo = tree["specs"] / "pipe.csv"
    os.mkfifo(fifo)
    extra: list[str] = []
    if kind == "directory":
        spec = _path_spec(rt, tree, "subdir")
    elif kind == "fifo_as_path":
        spec = _path_spec(rt, tree, "pipe.csv")
    elif kind == "dev_zero_as_path":
        spec = _path_spec(rt, tree, "/dev/zero")
        extra = ["--allow-any-path"]
    else:
        spec = _path_spec(rt, tree, "d.csv")
        extra = ["--data", str(fifo) if kind == "fifo" else "/dev/zero"]
    result = rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger), *extra, timeout=10)
    rt.assert_clean_refusal(result)
    assert rt.ledger_spent(ledger) == 0


def test_size_limit(rt: Any, tree: dict[str, Path]) -> None:
    """A file over --max-input-bytes is refused before reading (exit 2, nothing spent); a file
    under it runs. The size is public metadata, so this leaks nothing about the values."""
    ledger = tree["root"].parent / "ledger.sqlite"
    spec = _path_spec(rt, tree, "d.csv")
    size = tree["inside"].stat().st_size
    refused = rt.fork_cli(
        "run", "--json", str(spec), "--ledger", str(ledger), "--max-input-bytes", str(size - 1)
    )
    rt.assert_clean_refusal(refused)
    assert rt.ledger_spent(ledger) == 0
    ok = rt.fork_cli(
        "run", "--json", str(spec), "--ledger", str(ledger), "--max-input-bytes", str(size)
    )
    assert ok.returncode == 0, ok.explain()


@pytest.mark.parametrize("via", ["path", "data_option", "non_utf8"])
def test_missing_column_does_not_echo_header(rt: Any, tree: dict[str, Path], via: str) -> None:
    """Attack: point the spec at a file whose first line is a secret (/etc/passwd-like) and ask
    for a column that is not there: a leaky error lists "the columns", i.e. echoes the line.

    The refusal (exit 2, nothing spent) names the column and the file, never the header."""
    secret = tree["specs"] / "secret.csv"
    if via == "non_utf8":
        secret.write_bytes(b"\xff\xfe" + rt.SECRET_HEADER.encode() + b"\n1\n2\n")
    else:
        secret.write_text(rt.SECRET_HEADER + "\n1\n2\n", encoding="utf-8")
    ledger = tree["root"].parent / "ledger.sqlite"
    if via == "path":
        spec, extra = _path_spec(rt, tree, "secret.csv"), []
    else:
        spec, extra = _path_spec(rt, tree, "d.csv"), ["--data", str(secret)]
    result = rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger), *extra)
    rt.assert_clean_refusal(result)
    printed = result.stdout + result.stderr
    for leak in ("SECRET_CANARY", "root:x", "/bin/bash", "0:0"):
        assert leak not in printed, result.explain()
    if via != "non_utf8":
        assert "age" in printed and "secret.csv" in printed, result.explain()
    assert rt.ledger_spent(ledger) == 0


# -- 7. ledger rules on the command line -------------------------------------------------------


@pytest.fixture()
def small(rt: Any, tmp_path: Path) -> Path:
    """A valid spec (count over a small CSV, ε = 0.6 of a session budget of 1)."""
    rt.write_csv(tmp_path / "data.csv", ["age"], [[a] for a in AGES])
    return rt.write_json(
        tmp_path / "spec.json", rt.query_spec("count", "age", epsilon=0.6, session_epsilon=1.0)
    )


@pytest.mark.parametrize("ledger", [":memory:", "sqlite:///:memory:"])
def test_memory_ledger_refused(rt: Any, small: Path, ledger: str) -> None:
    """An in-memory ledger forgets every spend when the process exits: re-running the command
    would reset the budget. Refused (exit 2), nothing released."""
    result = rt.fork_cli("run", "--json", str(small), "--ledger", ledger)
    rt.assert_clean_refusal(result)


def test_ledger_in_missing_or_bad_directory(rt: Any, small: Path, tmp_path: Path) -> None:
    """A ledger in a missing directory, or under a regular file, is a clear error (exit 2, one
    line, no traceback) and nothing is released."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    for ledger in (tmp_path / "nope" / "deeper" / "l.sqlite", afile / "l.sqlite"):
        rt.assert_clean_refusal(rt.fork_cli("run", "--json", str(small), "--ledger", str(ledger)))


def test_ledger_in_unwritable_directory(rt: Any, small: Path, tmp_path: Path) -> None:
    """An unwritable directory: mode 0500 for a normal user; for root, who ignores modes,
    /proc (a file system where no file can be created)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        rt.assert_clean_refusal(
            rt.fork_cli("run", "--json", str(small), "--ledger", "/proc/self/l.sqlite")
        )
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        rt.assert_clean_refusal(
            rt.fork_cli("run", "--json", str(small), "--ledger", str(locked / "l.sqlite"))
        )
    finally:
        locked.chmod(0o700)


def _tamper(store: Any, sql: str, *params: Any) -> None:
    store.executemany(sql, [params])


def _entries_spent(store: Any) -> Fraction:
    """ε spent according to the ledger's entries themselves (immune to tampered totals)."""
    rows = store.query("SELECT epsilon FROM dpkit_entries WHERE status = 'spent'")
    return sum((Fraction(r[0]) for r in rows), Fraction(0))


def test_tampered_totals_give_nothing_back(rt: Any, small: Path, ledger_store: Any) -> None:
    """Attack: reset the cached totals (dpkit_meta.spent_epsilon = 0) to get the budget back.

    The second run of ε = 0.6 (which would fit the forged totals) is refused (exit 2, or 3
    against the true totals); the entries still sum to exactly 3/5 ≤ 1; ``budget verify``
    reports the inconsistency (exit 2, no traceback). On both backends (``ledger_store``)."""
    ledger = ledger_store.location
    assert rt.fork_cli("run", "--json", str(small), "--ledger", ledger).returncode == 0
    verified = rt.fork_cli("budget", "verify", "--ledger", ledger)
    assert verified.returncode == 0, verified.explain()
    _tamper(ledger_store, "UPDATE dpkit_meta SET value = '0/1' WHERE key = 'spent_epsilon'")
    again = rt.fork_cli("run", "--json", str(small), "--ledger", ledger)
    rt.assert_clean_refusal(again, (2, 3))
    assert _entries_spent(ledger_store) == Fraction(3, 5)
    broken = rt.fork_cli("budget", "verify", "--ledger", ledger)
    assert broken.returncode == 2, broken.explain()
    rt.assert_no_traceback(broken)
    assert (broken.stdout + broken.stderr).strip(), "verify must say why"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("budget_epsilon", "garbage"),
        ("schema_version", "x"),
        ("spent_epsilon", "1/0"),
        ("composition", "telepathy"),
        ("format", "something-else"),
    ],
)
def test_damaged_metadata_is_a_clear_error(
    rt: Any, small: Path, ledger_store: Any, key: str, value: str
) -> None:
    """Damaged ledger metadata: ``run`` refuses with exit 2 (one line, no traceback, nothing
    spent) and ``budget verify`` exits 2 with a reason. On both backends."""
    ledger = ledger_store.location
    assert rt.fork_cli("run", "--json", str(small), "--ledger", ledger).returncode == 0
    _tamper(ledger_store, "UPDATE dpkit_meta SET value = ? WHERE key = ?", value, key)
    rt.assert_clean_refusal(rt.fork_cli("run", "--json", str(small), "--ledger", ledger))
    assert _entries_spent(ledger_store) == Fraction(3, 5)
    verify = rt.fork_cli("budget", "verify", "--ledger", ledger)
    assert verify.returncode == 2, verify.explain()
    rt.assert_no_traceback(verify)


def test_verify_missing_ledger(rt: Any, tmp_path: Path) -> None:
    result = rt.fork_cli("budget", "verify", "--ledger", str(tmp_path / "none.sqlite"))
    assert result.returncode == 2, result.explain()
    rt.assert_no_traceback(result)
    assert not (tmp_path / "none.sqlite").exists()


# -- 8. output -----------------------------------------------------------------------------------


def _find_release(document: Any, release_id: str) -> Any:
    """The smallest JSON object in ``document`` that mentions ``release_id`` as a value."""
    if isinstance(document, dict):
        for value in document.values():
            found = _find_release(value, release_id)
            if found is not None:
                return found
        if release_id in document.values():
            return document
    elif isinstance(document, list):
        for value in document:
            found = _find_release(value, release_id)
            if found is not None:
                return found
    return None


def _values_of(document: Any, key: str) -> list[Any]:
    out = []
    if isinstance(document, dict):
        for k, v in document.items():
            if k == key:
                out.append(v)
            out += _values_of(v, key)
    elif isinstance(document, list):
        for v in document:
            out += _values_of(v, key)
    return out


def _stored_estimate(rt: Any, ledger: Path) -> Any:
    """The estimate stored with the ledger's only spent release (``budget show --releases``)."""
    from dpkit.ledger import Ledger

    handle = Ledger(str(ledger))
    try:
        (entry,) = [e for e in handle.entries() if e.status == "spent"]
    finally:
        handle.close()
    shown = rt.fork_cli("budget", "show", "--ledger", str(ledger), "--releases", "--json")
    assert shown.returncode == 0, shown.explain()
    record = _find_release(shown.json(), entry.release_id)
    assert record is not None, "the release is not listed\n" + shown.explain()
    estimates = _values_of(record, "estimate")
    assert estimates, "the release's result is not stored\n" + shown.explain()
    return estimates[0]


def _survey(rt: Any) -> Path:
    return rt.VALID_EXAMPLES / "survey_rr.json"


def _reference(rt: Any, tmp_path: Path) -> Any:
    result = rt.run_cli("run", "--json", _survey(rt), "--ledger", tmp_path / "reference.sqlite")
    assert result.returncode == 0, result.explain()
    return result.json()["results"][0]["estimate"]


def _check_unwritable_stdout(rt: Any, tmp_path: Path, ledger: Path, code: int, stderr: str) -> None:
    """Either refused before the spend (exit 2, nothing spent: an unwritable stdout noticed in
    the public phase), or spent and then exit 1 with the result kept in the ledger."""
    assert "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    if code == 2:
        assert rt.ledger_spent(ledger) == 0 and rt.spent_entry_count(ledger) == 0
        return
    assert code == 1, (code, stderr)
    assert rt.ledger_spent(ledger) > 0
    assert _stored_estimate(rt, ledger) == _reference(rt, tmp_path)
    assert rt.fork_cli("budget", "verify", "--ledger", str(ledger)).returncode == 0


def test_closed_stdout_loses_nothing(rt: Any, tmp_path: Path) -> None:
    """stdout closed (``>&-``): if the spend is committed, the command exits 1 — and the
    result is not lost: ``budget show --releases --json`` has the same estimate a normal run
    with the same seed prints, and the ledger verifies. (Refusing before the spend, exit 2 with
    nothing spent, is also acceptable.)"""
    ledger = tmp_path / "ledger.sqlite"
    command = [
        "sh",
        "-c",
        'exec "$0" "$@" >&-',
        *rt.dpkit_command("run", "--json", str(_survey(rt)), "--ledger", str(ledger)),
    ]
    done = subprocess.run(
        command, capture_output=False, stderr=subprocess.PIPE, text=True, timeout=60, check=False
    )
    _check_unwritable_stdout(rt, tmp_path, ledger, done.returncode, done.stderr)


def test_broken_pipe_loses_nothing(rt: Any, tmp_path: Path) -> None:
    """The reader of stdout goes away before the result is written (``dpkit run | head -0``):
    exit 1, no traceback, and the result is retrievable from the ledger (or exit 2 with nothing
    spent, if noticed before the spend)."""
    ledger = tmp_path / "ledger.sqlite"
    process = subprocess.Popen(
        rt.dpkit_command("run", "--json", str(_survey(rt)), "--ledger", str(ledger)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the interpreter has even imported dpkit
    stderr = process.stderr.read().decode()
    process.stderr.close()
    _check_unwritable_stdout(rt, tmp_path, ledger, process.wait(timeout=60), stderr)


@pytest.mark.parametrize("target", ["missing_dir", "a_directory"])
def test_out_unwritable_refused_before_spend(
    rt: Any, small: Path, tmp_path: Path, target: str
) -> None:
    """``--out`` into a missing directory (or onto a directory) is known before the spend: exit
    2, nothing spent (spending then failing would waste budget on an unseen result)."""
    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "no" / "such" / "r.json" if target == "missing_dir" else tmp_path
    rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(small), "--ledger", str(ledger), "--out", str(out))
    )
    assert rt.ledger_spent(ledger) == 0


def _confidence_spec(tmp_path: Path, kind: str, text: str) -> Path:
    if kind == "sum":
        body = (
            '{"dpkit": "1", "session_budget": {"epsilon": 10}, "statistic": "sum",'
            ' "params": {"lower": 0, "upper": 10}, "input": {"source": "inline", "values": [1, 2, 3]},'
            ' "budget": {"epsilon": 0.5}, "output": {"confidence": %s}}'
        )
    else:
        body = (
            '{"dpkit": "1", "session_budget": {"epsilon": 10}, "statistic": "frequency",'
            ' "mechanism": {"name": "rr"}, "input": {"source": "inline", "values": [0, 1, 1, 0]},'
            ' "budget": {"epsilon": 0.5}, "output": {"confidence": %s}}'
        )
    path = tmp_path / f"{kind}.json"
    path.write_text(body % text, encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["sum", "rr"])
@pytest.mark.parametrize("confidence", ["NaN", "0", "1", "1.5", "-0.5", "Infinity"])
def test_bad_confidence_refused_before_spend(
    rt: Any, tmp_path: Path, kind: str, confidence: str
) -> None:
    """output.confidence outside (0, 1) — NaN included, written as the literal NaN token that
    Python's json accepts — is refused in the public phase: exit 2, nothing spent."""
    ledger = tmp_path / "ledger.sqlite"
    result = rt.fork_cli(
        "run", "--json", str(_confidence_spec(tmp_path, kind, confidence)), "--ledger", str(ledger)
    )
    rt.assert_clean_refusal(result)
    assert rt.ledger_spent(ledger) == 0


@pytest.mark.parametrize("kind", ["sum", "rr"])
def test_confidence_next_to_one_never_spends_then_fails(rt: Any, tmp_path: Path, kind: str) -> None:
    """0.9999999999999999: either refused before the spend, or released — never spent and then
    failed (exit 1) for a reason known in advance."""
    ledger = tmp_path / "ledger.sqlite"
    result = rt.fork_cli(
        "run",
        "--json",
        str(_confidence_spec(tmp_path, kind, "0.9999999999999999")),
        "--ledger",
        str(ledger),
    )
    if result.returncode == 2:
        rt.assert_clean_refusal(result)
        assert rt.ledger_spent(ledger) == 0
    else:
        assert result.returncode == 0, result.explain()
        assert result.json()["results"][0]["estimate"] is not None
        assert rt.ledger_spent(ledger) == Fraction(1, 2)


# -- bad input is a typed error ------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["1.5", "1" + "0" * 40, "-1", "abc", ""])
def test_bad_seed(rt: Any, small: Path, tmp_path: Path, seed: str) -> None:
    """--seed that is not a small non-negative integer: exit 2, no traceback, nothing spent."""
    ledger = tmp_path / "ledger.sqlite"
    result = rt.fork_cli("run", "--json", str(small), "--ledger", str(ledger), "--seed", seed)
    assert result.returncode == 2, result.explain()
    rt.assert_no_traceback(result)
    assert rt.ledger_spent(ledger) == 0


@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("where", ["top", "params"])
def test_deeply_nested_spec(rt: Any, tmp_path: Path, depth: int, where: str) -> None:
    """A spec nested ``depth`` levels deep (a recursion bomb for parsers and validators):
    exit 2 with a JSON error document, no traceback, nothing spent."""
    nest = "[" * depth + "]" * depth
    if where == "top":
        text = nest
    else:
        text = (
            '{"dpkit": "1", "session_budget": {"epsilon": 1}, "statistic": "sum",'
            ' "params": {"lower": %s, "upper": 10}, "input": {"source": "inline", "values": [1]},'
            ' "budget": {"epsilon": 0.5}}'.replace("%s", nest)
        )
    spec = tmp_path / "deep.json"
    spec.write_text(text)
    ledger = tmp_path / "ledger.sqlite"
    rt.assert_clean_refusal(rt.fork_cli("run", "--json", str(spec), "--ledger", str(ledger)))
    assert rt.ledger_spent(ledger) == 0


@pytest.mark.parametrize(
    "content", [b"{not json", b"\xff\xfe\x00garbage", b"", b"NaN", b"[]", b"null", b'"spec"']
)
def test_spec_not_a_json_object(rt: Any, tmp_path: Path, content: bytes) -> None:
    spec = tmp_path / "bad.json"
    spec.write_bytes(content)
    rt.assert_clean_refusal(
        rt.fork_cli("run", "--json", str(spec), "--ledger", str(tmp_path / "l.sqlite"))
    )
    assert rt.ledger_spent(tmp_path / "l.sqlite") == 0


def test_spec_is_a_special_file(rt: Any, tmp_path: Path) -> None:
    """The spec itself is /dev/zero or a FIFO: refused promptly, no traceback."""
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    for spec in ("/dev/zero", str(fifo), str(tmp_path)):
        rt.assert_clean_refusal(
            rt.fork_cli("run", "--json", spec, "--ledger", str(tmp_path / "l.sqlite"), timeout=10)
        )


def test_fork_cli_matches_subprocess(rt: Any, tmp_path: Path) -> None:
    """The fast in-process fork runner shows what a real ``python -m dpkit`` shows."""
    for name, spec in (("ok", _survey(rt)), ("bad", rt.EXAMPLES / "invalid" / "many_errors.json")):
        a, b = tmp_path / f"{name}-fork", tmp_path / f"{name}-proc"
        a.mkdir()
        b.mkdir()
        forked = rt.fork_cli("run", "--json", str(spec), "--ledger", "l.sqlite", cwd=a)
        real = rt.run_cli("run", "--json", str(spec), "--ledger", "l.sqlite", cwd=b)
        assert forked.returncode == real.returncode
        assert forked.stderr == real.stderr
        assert rt.strip_released(json.loads(forked.stdout)) == rt.strip_released(
            json.loads(real.stdout)
        )

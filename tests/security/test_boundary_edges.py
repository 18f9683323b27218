"""Edges of the privacy boundary found by an independent review, each pinned by an attack.

Each test plays the attack through the public API and asserts that it recovers nothing (or
cannot overspend): the public phase's answer does not depend on the values, the private phase
never fails on them, and what is charged is what runs.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dpkit_central import Histogram, Sum

import dpkit
from dpkit.spec import DataPolicy, plan_spec, run_spec


def test_a_deferred_batch_is_charged_for_what_it_loads() -> None:
    """A loader that declares one release but returns 1000 selections must not run them for
    the price of one: it fails closed, with the declared spend kept and nothing released."""
    session = dpkit.Session(budget=(5.0, 0.0), ledger=":memory:")
    noisy_max = dpkit.mechanism("report_noisy_max", epsilon=1.0)
    utilities = np.tile([0.0, 0.0, 50.0, 0.0], (1000, 1))
    with pytest.raises(dpkit.ReleaseFailed):
        session.release(noisy_max, dpkit.session.Deferred(lambda: utilities))
    assert session.spent.epsilon == 1
    honest = session.release(noisy_max, dpkit.session.Deferred(lambda: utilities[:3], releases=3))
    assert honest.values.shape == (3,) and session.spent.epsilon == 4
    for bad in (True, 0.5, "2"):
        with pytest.raises(dpkit.InvalidParameter):
            session.release(noisy_max, dpkit.session.Deferred(lambda: utilities, releases=bad))  # type: ignore[arg-type]
    assert session.spent.epsilon == 4


@pytest.mark.parametrize(
    "make, pairs",
    [
        (lambda: Sum(lower=0, upper=10, epsilon=0.25), ([1, 2, 3], [1, "x", 3], [1, [2, 3], 3])),
        (lambda: dpkit.mechanism("krr", epsilon=0.25, k=3), ([True, False], [True, 2], [0, "z"])),
        (
            lambda: Histogram(categories=("a", "b"), epsilon=0.25),
            (["a", "b"], ["a", 7], ["a", None]),
        ),
    ],
)
def test_python_lists_are_judged_by_structure_not_values(make: Any, pairs: Any) -> None:
    """Whether a Python list holds a text, a bool or a nested list is a value: neighbouring
    lists must all be released and charged alike (a refusal would be a free answer)."""
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    for data in pairs:
        session.release(make(), data, rng=np.random.default_rng(0))
    assert session.spent.epsilon == Fraction(len(pairs), 4)


class _RaisingFloat(float):
    def __float__(self) -> float:
        raise RuntimeError("SECRET")


@pytest.mark.parametrize("rng", [None, np.random.default_rng(1)], ids=["secure", "fast"])
def test_numbers_whose_conversion_raises_are_missing(rng: Any) -> None:
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    data = np.array([1.0, _RaisingFloat(2.0), 3.0], dtype=object)
    session.release(Sum(lower=0, upper=10, epsilon=1.0), data, rng=rng)
    session.release(dpkit.mechanism("krr", epsilon=1.0, k=3), data, rng=rng)


def _spec(path: str, column: str, **query: Any) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "budget": {"epsilon": 100},
        "queries": [
            {"input": {"source": "csv", "path": path, "column": column}, **query},
        ],
    }


def test_a_file_swapped_after_its_check_is_not_read(tmp_path: Path) -> None:
    """The public phase checks link.csv → inside.csv; an attacker then points the link outside
    the data root. The private reader must not read the other file (it reads nothing)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.csv").write_text("x\n1\n2\n")
    outside = tmp_path / "secret.csv"
    outside.write_text("x\n" + "5\n" * 50)
    (root / "link.csv").symlink_to(root / "inside.csv")
    spec = _spec(
        "link.csv", "x", statistic="sum", params={"lower": 0, "upper": 10}, budget={"epsilon": 1}
    )
    plan = plan_spec(spec, registry=dpkit.get_registry(), base_dir=root, policy=DataPolicy())
    (root / "link.csv").unlink()
    (root / "link.csv").symlink_to(outside)
    (query,) = plan.queries
    assert len(query.load()) == 0  # no record: not the checked file
    # and a plain rename of the checked file, another file put in its place: same answer
    (root / "link.csv").unlink()
    (root / "direct.csv").write_text("x\n1\n2\n")
    spec["queries"][0]["input"]["path"] = "direct.csv"
    plan = plan_spec(spec, registry=dpkit.get_registry(), base_dir=root, policy=DataPolicy())
    os.replace(root / "direct.csv", root / "moved.csv")
    os.replace(outside, root / "direct.csv")
    (query,) = plan.queries
    assert len(query.load()) == 0


@pytest.mark.parametrize(
    "body",
    [b"1\r2\r3\r", b"1\r\xe92\r3\r", b"1\r" + b"7" * (2 << 20) + b"\r"],
    ids=["plain", "not-utf8", "long-field"],
)
def test_cr_only_files_answer_the_same_whatever_the_values(tmp_path: Path, body: bytes) -> None:
    """Old Mac line ends (CR alone): the header is the first record, as the private reader
    parses it, so the public answer never depends on the values after it."""
    (tmp_path / "d.csv").write_bytes(b"\xef\xbb\xbfa\r" + body)
    spec = _spec("d.csv", "a", statistic="count", budget={"epsilon": 1})
    document = run_spec(spec, base_dir=tmp_path, ledger=tmp_path / "l.sqlite")
    assert document["results"][0]["estimate"] is not None
    missing = _spec("d.csv", "b", statistic="count", budget={"epsilon": 1})
    with pytest.raises(dpkit.spec.SpecInvalid) as info:
        run_spec(missing, base_dir=tmp_path, ledger=tmp_path / "l.sqlite")
    assert [issue.code for issue in info.value.issues] == ["column_not_found"]


def test_categories_match_the_cells_text(tmp_path: Path) -> None:
    """Declared categories are matched by the cell's text before any conversion: "02139" is not
    the number 2139, "NA" can be a category, "1" matches the category 1; a BOM is not part of
    the first column's name."""
    rows = ["02139"] * 3 + ["NA"] * 2 + ["1"]
    (tmp_path / "d.csv").write_text("\ufeffzip\n" + "\n".join(rows) + "\n", encoding="utf-8")
    histogram = _spec(
        "d.csv",
        "zip",
        statistic="histogram",
        params={"categories": ["02139", "NA", 1]},
        budget={"epsilon": 1},
    )
    plan = plan_spec(histogram, registry=dpkit.get_registry(), base_dir=tmp_path)
    aggregates = plan.queries[0].target.aggregate(plan.queries[0].load())
    assert aggregates.values["cells"][0].tolist() == [3, 2, 1]
    frequency = _spec(
        "d.csv",
        "zip",
        statistic="frequency",
        mechanism={"name": "krr", "params": {"k": 3}},
        budget={"epsilon": 1},
    )
    frequency["queries"][0]["input"]["categories"] = ["02139", "NA", 1]
    plan = plan_spec(frequency, registry=dpkit.get_registry(), base_dir=tmp_path)
    assert plan.queries[0].load().tolist() == [0, 0, 0, 1, 1, 2]
    json.dumps(frequency)  # the spec itself stays plain JSON

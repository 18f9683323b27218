"""Files after their check: a file swapped after its check is not read, CR-only line ends answer the
same whatever the values, and categories match the cells' text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import dpkit
from dpkit.spec import DataPolicy, plan_spec, run_spec


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

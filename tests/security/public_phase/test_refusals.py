"""What the public phase refuses, before any spend: column types no engine can read, noise no sampler
can draw, ledger URLs of another store (without echoing a password), sampler parameters out of
range — each with a typed error.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dpkit_central import Count

import dpkit

_NESTED = {
    "list": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
    "struct": pa.array([{"a": 1}, None, {"a": 2}], pa.struct([("a", pa.int64())])),
    "map": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
}


@pytest.mark.parametrize("kind", sorted(_NESTED))
@pytest.mark.parametrize("role", ["value", "group", "id"])
def test_parquet_columns_of_nested_types_are_refused_before_the_spend(
    rt: Any, tmp_path: Path, kind: str, role: str
) -> None:
    """Attack: name a Parquet column of a nested type (a list, a struct, a map) as the value,
    a group or the id column. Its type is in the footer (public), but the query failed only
    after the spend (exit 1, ``ReleaseFailed``): budget burnt by a failure that the public phase
    could decide. Now it is a public-phase refusal (exit 2, ``column_type``), nothing spent."""
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"odd": _NESTED[kind], "user": ["a", "b", "c"], "v": [1.0, 2.0, 3.0]}),
        tmp_path / "data.parquet",
    )
    column = {"value": "odd", "group": "v", "id": "v"}[role]
    spec = rt.query_spec("count", column, path="data.parquet")
    spec["input"]["source"] = "parquet"
    if role == "group":
        spec["group_by"] = {
            "columns": ["odd"],
            "keys": "private",
            "selection": {"epsilon": 1.0, "delta": 1e-6},
        }
        spec["session_budget"]["delta"] = 0.01
    if role == "id":
        spec["privacy_unit"] = {"kind": "id", "column": "odd", "max_rows": 2}
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    document = rt.assert_clean_refusal(result)
    assert [e["code"] for e in document["errors"]] == ["column_type"], result.explain()
    assert rt.ledger_spent(tmp_path / "l.sqlite") == 0


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@host/db?password=hunter2",  # a password in the query: was echoed
        "mysql://u:hunter2@[bad/x",  # an unparsable URL: was a traceback
        "redis://:hunter2@host:notaport/0",
    ],
)
@pytest.mark.parametrize("command", ["run", "budget"])
def test_a_ledger_url_of_another_store_is_refused_without_its_password(
    rt: Any, tmp_path: Path, url: str, command: str
) -> None:
    """Attack: a ledger URL of a store dpkit does not have. The refusal quoted the URL with
    only a ``user:password@`` password removed — a ``?password=`` stayed in the message — and
    a URL that does not parse raised a ValueError (a traceback, exit 1). Now the refusal
    quotes the scheme only, exit 2."""
    rt.write_json(tmp_path / "spec.json", rt.query_spec("count", "v"))
    (tmp_path / "data.csv").write_text("v\n1\n", encoding="utf-8")
    args = ["run", "--json", "spec.json"] if command == "run" else ["budget", "show"]
    result = rt.fork_cli(*args, "--ledger", url, cwd=tmp_path)
    rt.assert_no_traceback(result)
    assert result.returncode == 2, result.explain()
    assert "hunter2" not in result.stdout + result.stderr, result.explain()


@pytest.mark.parametrize(
    ("epsilon", "sensitivity"), [(1e-12, 1e6), (1e-9, 1e9), (1e-12, 1e12), (1e-12, 1e100)]
)
def test_geometric_with_a_huge_scale_is_refused_before_the_spend(
    epsilon: float, sensitivity: float
) -> None:
    """Attack: a geometric release with an enormous scale Δ/ε. Secure mode overflowed int64
    after the spend (``ReleaseFailed`` with probability about 1e-4 per draw at Δ/ε = 1e18, and
    always beyond 2⁶²); fast mode's numpy draws saturated, G₁ − G₂ = 0, and the *exact* answer
    came out: the release 5 for the answer 5, eight times out of eight. Now Δ/ε > 2⁵² is an
    InvalidParameter at construction, so nothing is spent."""
    if sensitivity / epsilon > 2.0**64:  # fast mode's failure that the refusal prevents
        rng = np.random.default_rng(3)
        p = -math.expm1(-epsilon / sensitivity)
        assert not np.any(rng.geometric(p, size=8) - rng.geometric(p, size=8))
    with pytest.raises(dpkit.InvalidParameter, match="sensitivity"):
        dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity)


def test_a_table_query_whose_noise_cannot_be_drawn_is_refused_at_construction() -> None:
    """The same limit reached through contribution bounds: a count at ε = 1e-10 with
    R = 10⁶ rows per id has noise scale 10¹⁶. Its noise mechanism was built only in the
    private phase (``ReleaseFailed`` after the spend); now it is built with the query."""
    with pytest.raises(dpkit.InvalidParameter, match="sensitivity"):
        Count(epsilon=1e-10, noise="geometric").on(
            by="c", keys=["a"], unit=dpkit.IdUnit("u", max_rows=10**6, max_groups=1)
        )


@pytest.mark.parametrize(
    ("sampler", "parameter"),
    [
        ("discrete_laplace", Fraction(1, 2**62)),  # was a MemoryError
        ("discrete_laplace", 2**62),  # was an OverflowError (a "probability below e^(-2^40)")
        ("discrete_gaussian", 1e-300),  # was an OverflowError
        ("discrete_gaussian", Fraction(2**124, 3)),  # was an OverflowError
    ],
)
def test_samplers_refuse_parameters_they_cannot_draw_with_a_typed_error(
    sampler: str, parameter: Any
) -> None:
    """Attack: the public samplers at the ends of their documented ranges. Each raised an
    untyped error (memory, overflow) after starting to draw; now each parameter outside the
    range the sampler can draw exactly is an InvalidParameter before any word is read."""
    with pytest.raises(dpkit.InvalidParameter):
        getattr(dpkit.plugin, sampler)(parameter, size=1000, rng=dpkit.SecureRandom())


def test_a_numpy_integer_scale_is_a_scale() -> None:
    """``np.int64(3)`` is a rational scale; it raised a TypeError inside Fraction arithmetic."""
    z = dpkit.plugin.discrete_laplace(np.int64(3), size=10, rng=np.random.default_rng(0))
    assert z.shape == (10,)

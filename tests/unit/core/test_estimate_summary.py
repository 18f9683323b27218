"""A local estimate reads well: ``str(estimate)``, ``rows()`` and ``table()`` with intervals."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit._summary import number


def _krr(k: int = 3) -> dpkit.Estimate:
    categories = [f"c{i}" for i in range(k)]
    krr = dpkit.mechanism("krr", epsilon=2.0, categories=categories)
    rng = np.random.default_rng(4)
    return dpkit.estimate(krr, krr.randomize(rng.choice(categories, 2000), rng=rng))


def test_str_is_a_summary_not_an_attrs_dump() -> None:
    estimate = _krr()
    text = str(estimate)
    assert text.startswith("krr estimate: counts of 3 categories from 2,000 reports")
    assert "95% interval" in text and "c0" in text and "score interval (Wilson 1927)" in text
    assert "Estimate(" not in text and "array(" not in text
    low, high = estimate.confidence_interval(0.95)
    assert f"[{number(float(low[0]))}, {number(float(high[0]))}]" in text
    many = str(_krr(50))
    assert "… and 30 more" in many and "c49" not in many
    assert repr(estimate).startswith("Estimate(")  # the full value stays in repr


def test_rows_and_table_carry_the_interval_and_its_method() -> None:
    pytest.importorskip("narwhals")
    pytest.importorskip("pandas")
    estimate = _krr()
    rows = estimate.rows(0.9)
    low, high = estimate.confidence_interval(0.9)
    assert [r["category"] for r in rows] == ["c0", "c1", "c2"]
    assert np.allclose([r["ci_lower"] for r in rows], low)
    assert np.allclose([r["ci_upper"] for r in rows], high)
    table = estimate.table(0.9)
    assert list(table.columns) == [
        "category", "estimate", "frequency", "ci_lower", "ci_upper", "ci_method"
    ]  # fmt: skip
    assert np.allclose(table["frequency"], estimate.frequencies)


def test_a_mean_estimate_reads_well() -> None:
    hm = dpkit.mechanism("hm", epsilon=1.0, lower=18, upper=90)
    rng = np.random.default_rng(5)
    estimate = dpkit.estimate(hm, hm.randomize(rng.uniform(18, 90, 3000), rng=rng))
    text = str(estimate)
    assert text.startswith("hm estimate: mean from 3,000 reports") and "95% interval" in text
    (row,) = estimate.rows()
    low, high = estimate.confidence_interval()
    assert (row["ci_lower"], row["ci_upper"]) == pytest.approx((low[0], high[0]))
    assert row["estimate"] == estimate.mean

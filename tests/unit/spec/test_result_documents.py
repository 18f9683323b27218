"""Every result type writes its own result document (``to_document``), the same document the
spec runner built field by field from whatever attributes a result happened to have."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum

import dpkit
from dpkit.document import Document
from dpkit.graph import GraphEstimate
from dpkit.mean_estimate import MeanEstimate, no_mean_document

NOISE = "exact quantiles of the privacy noise (data taken as given)"


def _listify(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def by_attributes(value: Any, level: float) -> dict[str, Any]:
    """The result fields as the runner read them off a central result, attribute by attribute
    (the reference the documents must equal, byte for byte as JSON)."""
    out: dict[str, Any] = {"mechanism": {"noise": getattr(value, "mechanism", None)}}
    noise = getattr(value, "noise", None)
    if noise is not None:
        out["noise"] = {
            "distribution": noise.kind,
            "scale": noise.scale,
            "variance": noise.variance,
        }
    by = getattr(value, "by", ())
    unit = getattr(value, "unit", None)
    if unit is not None:
        out["privacy_unit"] = unit
    if by:
        out["group_by"] = list(by)
        out["keys"] = [list(key) for key in value.keys]
    interval = getattr(value, "confidence_interval", None)
    bounds = interval(level) if interval is not None else None
    method = value.interval_method(level) if hasattr(value, "interval_method") else NOISE
    ranks = value.rank_half_width(level) if hasattr(value, "rank_half_width") else None
    out.update(
        n=None,
        categories=list(value.categories) if getattr(value, "categories", None) else None,
        estimate=_listify(getattr(value, "value", value)),
        variance=_listify(getattr(value, "variance", None)),
        confidence_interval=None
        if bounds is None
        else {
            "level": level,
            "lower": _listify(bounds[0]),
            "upper": _listify(bounds[1]),
            "method": method,
        },
    )
    if ranks is not None:  # a quantile: its rank interval, no bounds in the value's units
        out["confidence_interval"] = {
            "level": level,
            "lower": None,
            "upper": None,
            "unit": "ranks",
            "half_width": ranks,
            "method": method,
        }
    return out


AGES = np.array([23.0, 35.0, 41.0, 58.0, 62.0, 19.0, 77.0])
TABLE = pd.DataFrame(
    {
        "user": ["a", "a", "b", "c", "c", "d", "e"],
        "city": ["Lyon", "Nantes", "Lyon", "Lyon", "Brest", "Nantes", "Lyon"],
        "age": AGES,
    }
)
UNIT = dpkit.IdUnit("user", max_rows=2, max_groups=2)

RELEASES: dict[str, Any] = {
    "count": (Count(epsilon=1.0), AGES),
    "sum laplace": (Sum(lower=0, upper=90, epsilon=1.0), AGES),
    "sum gaussian": (Sum(lower=0, upper=90, epsilon=1.0, noise="gaussian", delta=1e-6), AGES),
    "mean": (Mean(lower=0, upper=90, epsilon=1.0), AGES),
    "quantile": (Quantile(q=0.5, lower=0, upper=90, epsilon=1.0), AGES),
    "histogram": (Histogram(categories=("Lyon", "Brest"), epsilon=1.0), TABLE["city"].to_numpy()),
    "table ungrouped": (Count(epsilon=1.0).on(), TABLE),
    "table grouped": (
        Sum(lower=0, upper=90, epsilon=1.0).on("age", by="city", keys=["Lyon", "Brest"]),
        TABLE,
    ),
    "table per id": (
        Count(epsilon=1.0).on(by="city", keys=["Lyon", "Nantes"], unit=UNIT),
        TABLE,
    ),
    "table private keys": (
        Count(epsilon=1.0).on(by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6)),
        TABLE,
    ),
    "table mean": (
        Mean(lower=0, upper=90, epsilon=1.0).on("age", by="city", keys=["Lyon"]),
        TABLE,
    ),
}


@pytest.mark.parametrize("name", list(RELEASES))
@pytest.mark.parametrize("level", [0.95, 0.8])
def test_central_documents_are_the_attribute_documents(name: str, level: float) -> None:
    query, data = RELEASES[name]
    for seed in range(3):
        result = query.run(data, rng=np.random.default_rng(seed))
        assert isinstance(result, Document)
        document = result.to_document(confidence=level)
        assert json.dumps(document) == json.dumps(by_attributes(result, level))


def test_local_estimates_are_documents() -> None:
    rr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    reports = rr.randomize(np.array([0, 1, 2, 2, 1, 0, 0]), rng=np.random.default_rng(1))
    estimate = dpkit.estimate(rr, reports)
    document = estimate.to_document(confidence=0.9)
    low, high = estimate.confidence_interval(0.9)
    assert isinstance(estimate, Document)
    assert document["categories"] == [0, 1, 2] and document["n"] == 7
    assert document["estimate"] == estimate.estimates.tolist()
    assert document["confidence_interval"]["lower"] == low.tolist()
    assert document["confidence_interval"]["upper"] == high.tolist()

    mean = MeanEstimate("duchi", 4, [0.25], [0.01], [0.04])
    low, high = mean.confidence_interval(0.9)
    document = mean.to_document(confidence=0.9)
    assert isinstance(mean, Document)
    assert document["estimate"] == 0.25 and document["n"] == 4
    assert document["confidence_interval"]["lower"] == float(low[0])
    two = MeanEstimate("duchi", 4, [0.25, 0.5], [0.01, 0.02], [0.04, 0.04])
    assert two.to_document()["estimate"] == [0.25, 0.5]  # per coordinate
    assert set(no_mean_document()) == set(document) and not any(
        no_mean_document()[key] for key in document
    )


def test_distribution_estimates_are_documents() -> None:
    sw = dpkit.mechanism("sw", epsilon=2.0, lower=0, upper=120)
    reports = sw.randomize(np.array([3.0, 50.0, 101.0, 30.0, 64.0]), rng=np.random.default_rng(1))
    estimate = dpkit.estimate(sw, reports, method="em")
    assert isinstance(estimate, Document)
    for level in (0.95, 0.5):  # the reconstruction has no variance and no interval
        document = estimate.to_document(confidence=level)
        assert document["variance"] is None and document["confidence_interval"] is None
    assert document["n"] == 5 and document["categories"] is None
    assert document["estimate"] == estimate.probabilities.tolist()
    assert document["edges"] == estimate.edges.tolist()
    assert len(document["edges"]) == len(document["estimate"]) + 1
    assert (document["method"], document["iterations"], document["converged"]) == (
        "em",
        estimate.iterations,
        estimate.converged,
    )
    assert document["log_likelihood"] == estimate.log_likelihood
    # The fields every local result document has, and strict JSON throughout.
    assert {"n", "categories", "estimate", "variance", "confidence_interval"} <= set(document)
    assert json.loads(json.dumps(document, allow_nan=False)) == document


def test_graph_estimates_are_the_graph_commands_documents() -> None:
    estimate = GraphEstimate(
        "degrees", "rr", [1.5, 2.0], [0.25, 0.5], 2, note="bounded degree", labels=(0, 1)
    )
    low, high = estimate.confidence_interval(0.95)
    assert isinstance(estimate, Document)
    assert estimate.to_document() == {
        "estimate": [1.5, 2.0],
        "variance": [0.25, 0.5],
        "variance_kind": "exact",
        "unbiased": True,
        "note": "bounded degree",
        "categories": [0, 1],
        "confidence_interval": {
            "level": 0.95,
            "lower": low.tolist(),
            "upper": high.tolist(),
            "method": "normal approximation; variance: exact",
        },
        "interval_95": [low.tolist(), high.tolist()],
    }

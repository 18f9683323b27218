"""dpkit.graph.advise_triangles: its one-round bound is below, its two-round bound above, the
exact standard deviations of the two protocols on graphs within the degree bound."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.graph_datasets import erdos_renyi, graph_counts
from dpkit_ldp.graph_estimators import triangle_variance
from dpkit_ldp.graph_triangles import TwoRoundTriangles, projected_lower

import dpkit
from dpkit.cli import main


def _one_round_sd(adjacency: np.ndarray, epsilon: float) -> float:
    """The exact sd: the unbiased variance estimate's formula applied to the true graph."""
    v = math.exp(epsilon) / math.expm1(epsilon) ** 2
    return math.sqrt(triangle_variance(adjacency.astype(float), v, v))


def _two_round_sd(adjacency: np.ndarray, protocol: TwoRoundTriangles) -> float:
    graph = dpkit_graph(adjacency)
    offsets, neighbours = projected_lower(graph, protocol.max_degree)
    p1, p0 = protocol.first_mechanism.channel
    n = adjacency.shape[0]
    total = 0.0
    for j in range(n):
        for k in range(j + 1, n):
            w = sum(
                1
                for i in range(n)
                if j in neighbours[offsets[i] : offsets[i + 1]]
                and k in neighbours[offsets[i] : offsets[i + 1]]
            )
            p = p1 if adjacency[j, k] else p0
            total += w * w * p * (1 - p)
    return math.sqrt((total + n * protocol.noise_variance) / (p1 - p0) ** 2)


def dpkit_graph(adjacency: np.ndarray) -> Any:
    from dpkit_ldp.graphs import as_graph

    return as_graph(adjacency)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_bounds_bracket_the_exact_errors(epsilon: float) -> None:
    rng = np.random.default_rng(4)
    graph = erdos_renyi(30, 0.3, rng=rng)
    adjacency = graph.dense(np.int64)
    bound = int(graph.degrees().max())
    advice = dpkit.graph.advise_triangles(30, epsilon, bound)
    assert advice.one_round_sd <= _one_round_sd(adjacency, epsilon)
    split = advice.split
    protocol = TwoRoundTriangles(
        epsilon1=split * epsilon, epsilon2=(1 - split) * epsilon, nodes=30, max_degree=bound
    )
    assert _two_round_sd(adjacency, protocol) <= advice.two_round_sd
    assert graph_counts(graph).triangles > 0


def test_large_sparse_graphs_get_two_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    advice = dpkit.graph.advise_triangles(100_000, 1.0, 200, target=2e6)
    assert advice.best == "two_round" and advice.reaches_target
    assert (
        main(
            [
                "advise",
                "--triangles",
                "--nodes",
                "60",
                "--max-degree",
                "40",
                "--epsilon",
                "2",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["best"] == "one_round"
    assert (
        main(["advise", "--triangles", "--nodes", "2", "--max-degree", "4", "--epsilon", "1"]) == 2
    )

"""Perturb a graph's adjacency matrix with randomized response, then estimate edges and degrees.

Source: seed 000 (``matrix_randomized_response`` / ``rr_adj``, used to protect the edges of a
graph before training a graph neural network). Each potential edge {i, j} is one private bit,
flipped with probability 1 − p = 1/(1 + e^ε) (edge-LDP; Warner 1965; Dwork & Roth 2014,
Section 3.2). The seed's ``rr_adj`` flips all n² entries independently, so an undirected edge
is released twice — as (i, j) and as (j, i) — at 2ε, and the result is not even symmetric.
dpkit's ``rr.randomize_graph(adjacency, undirected=True)`` perturbs each unordered pair once
(the upper triangle) and mirrors it, so each edge costs ε; the diagonal is 0.

The noisy graph is far denser than the true one: each of the M = n(n − 1)/2 non-edges becomes an
edge with probability 1 − p. Debiasing (Wang et al. 2017, Theorem 2 with k = 2):

    m̂ = (s − M(1 − p)) / (2p − 1),       Var[m̂] = M p(1 − p) / (2p − 1)²,

with s the number of noisy edges, and for node i with noisy degree s_i over its n − 1 pairs,

    d̂_i = (s_i − (n − 1)(1 − p)) / (2p − 1),   Var[d̂_i] = (n − 1) p(1 − p) / (2p − 1)².

Both are exactly unbiased for the given graph; the variances are exact (the flips are
independent). The degree estimates of two nodes share one pair, so they are (weakly) correlated.

Run: ``python examples/ldp/graph_adjacency.py [--nodes 300] [--epsilon 2] [--seed 2026]``
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

import dpkit


def two_community_graph(nodes: int, rng: np.random.Generator) -> NDArray[np.uint8]:
    """A symmetric 0/1 adjacency matrix: two communities, dense inside, sparse across."""
    community = np.arange(nodes) < nodes // 2
    same = community[:, None] == community[None, :]
    probability = np.where(same, 0.08, 0.01)
    upper = np.triu(rng.random((nodes, nodes)) < probability, 1)
    return (upper | upper.T).astype(np.uint8)


@dataclass(frozen=True)
class Result:
    """What the example computed (the tests check these)."""

    nodes: int
    epsilon: float
    keep: float
    true_edges: int
    noisy_edges: int
    estimated_edges: float
    edge_variance: float
    true_degrees: NDArray[np.int64]
    estimated_degrees: NDArray[np.float64]
    degree_variance: float
    noisy: NDArray[np.uint8]


def main(seed: int = 2026, nodes: int = 300, epsilon: float = 2.0) -> Result:
    rng = np.random.default_rng(seed)
    adjacency = two_community_graph(nodes, rng)
    rr = dpkit.mechanism("rr", epsilon=epsilon)
    noisy = rr.randomize_graph(adjacency, rng=rng, undirected=True)

    # Edge count: the M upper-triangle bits are the reports; dpkit's rr estimator debiases them.
    rows, cols = np.triu_indices(nodes, 1)
    estimate = dpkit.estimate(rr, noisy[rows, cols])
    m_hat, m_var = float(estimate.estimates[1]), float(estimate.variance[1])
    true_edges = int(adjacency[rows, cols].sum())
    noisy_edges = int(noisy[rows, cols].sum())

    # Degrees: the same debiasing, row by row (vectorised over nodes).
    p, flip = rr.keep_probability, rr.flip_probability
    pairs = nodes - 1
    degrees = adjacency.sum(axis=1).astype(np.int64)
    noisy_degrees = noisy.sum(axis=1).astype(np.int64)
    d_hat = (noisy_degrees - pairs * flip) / (p - flip)
    d_var = pairs * p * flip / (p - flip) ** 2

    print(f"graph: {nodes} nodes, two communities; rr with ε = {epsilon:g} per edge (p = {p:.4f})")
    print(
        f"  output symmetric: {bool(np.array_equal(noisy, noisy.T))}, "
        f"self-loops: {int(np.trace(noisy))}"
    )
    low, high = estimate.confidence_interval(0.95)
    print(
        f"  edges: true {true_edges}, in the noisy graph {noisy_edges}, "
        f"debiased {m_hat:.0f} ± {math.sqrt(m_var):.0f} (95% CI {low[1]:.0f} .. {high[1]:.0f})"
    )
    print(
        f"  mean degree: true {degrees.mean():.2f}, noisy {noisy_degrees.mean():.2f}, "
        f"debiased {d_hat.mean():.2f}"
    )
    naive_rmse = float(np.sqrt(np.mean((noisy_degrees - degrees) ** 2)))
    rmse = float(np.sqrt(np.mean((d_hat - degrees) ** 2)))
    print(
        f"  per-node degree RMSE: noisy degree {naive_rmse:.1f}, debiased {rmse:.1f} "
        f"(theory {math.sqrt(d_var):.1f})"
    )
    print("  first nodes (true / noisy / debiased degree):")
    for i in range(5):
        print(f"    node {i}: {degrees[i]:3d} / {noisy_degrees[i]:3d} / {d_hat[i]:6.1f}")
    return Result(
        nodes=nodes,
        epsilon=epsilon,
        keep=p,
        true_edges=true_edges,
        noisy_edges=noisy_edges,
        estimated_edges=m_hat,
        edge_variance=m_var,
        true_degrees=degrees,
        estimated_degrees=d_hat,
        degree_variance=d_var,
        noisy=noisy,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    main(args.seed, args.nodes, args.epsilon)

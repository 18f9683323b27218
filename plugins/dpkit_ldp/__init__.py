"""dpkit's built-in local-DP mechanisms, registered as an ordinary plugin.

Imports only dpkit's public API, exactly as a third-party plugin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpkit.plugin import Estimator, Mechanism, hookimpl

__all__ = [
    "barabasi_albert",
    "dpkit_register_estimators",
    "dpkit_register_mechanisms",
    "erdos_renyi",
    "estimate_mean",
    "graph_counts",
    "powerlaw_cluster",
    "simulate_counts",
    "simulate_numeric",
    "stochastic_discretize",
    "synthetic",
    "synthetic_numbers",
]

# Helpers for experiments, imported on first use so that loading the plugin stays light.
_HELPERS = {
    "barabasi_albert": "dpkit_ldp.graph_datasets",
    "erdos_renyi": "dpkit_ldp.graph_datasets",
    "graph_counts": "dpkit_ldp.graph_datasets",
    "powerlaw_cluster": "dpkit_ldp.graph_datasets",
    "estimate_mean": "dpkit_ldp.discretize",
    "simulate_counts": "dpkit_ldp.simulate",
    "simulate_numeric": "dpkit_ldp.simulate",
    "stochastic_discretize": "dpkit_ldp.discretize",
    "synthetic": "dpkit_ldp.datasets",
    "synthetic_numbers": "dpkit_ldp.numeric_datasets",
}


def __getattr__(name: str) -> Any:
    if name in _HELPERS:
        import importlib

        return getattr(importlib.import_module(_HELPERS[name]), name)
    raise AttributeError(f"module 'dpkit_ldp' has no attribute {name!r}")


@hookimpl
def dpkit_register_mechanisms(register: Callable[[type[Mechanism]], None]) -> None:
    from dpkit_ldp.duchi import Duchi, DuchiMulti
    from dpkit_ldp.hadamard import HadamardResponse
    from dpkit_ldp.hybrid import Hybrid
    from dpkit_ldp.kary_rr import KaryRandomizedResponse
    from dpkit_ldp.local_hashing import OptimalLocalHashing
    from dpkit_ldp.piecewise import Piecewise
    from dpkit_ldp.randomized_response import RandomizedResponse
    from dpkit_ldp.sampled import HybridMulti, PiecewiseMulti
    from dpkit_ldp.square_wave import SquareWave
    from dpkit_ldp.unary_encoding import OptimizedUnaryEncoding, SymmetricUnaryEncoding

    register(RandomizedResponse)
    register(KaryRandomizedResponse)
    register(SymmetricUnaryEncoding)
    register(OptimizedUnaryEncoding)
    register(OptimalLocalHashing)
    register(HadamardResponse)
    # Numeric values: means and distributions.
    for numeric in (Duchi, DuchiMulti, Piecewise, PiecewiseMulti, Hybrid, HybridMulti, SquareWave):
        register(numeric)
    # Graphs under edge LDP: each node randomizes its own neighbour list.
    from dpkit_ldp.graph_arr import AsymmetricRandomizedResponse
    from dpkit_ldp.graph_degree import LocalKStars, NoisyDegree
    from dpkit_ldp.graph_rr import GraphRandomizedResponse

    for graph in (GraphRandomizedResponse, AsymmetricRandomizedResponse, NoisyDegree, LocalKStars):
        register(graph)
    from dpkit_ldp.graph_features import MultiBit

    register(MultiBit)
    # Telemetry: items from unbounded domains, heavy hitters, repeated collection.
    from dpkit_ldp.count_mean_sketch import CountMeanSketch, HadamardCountMeanSketch
    from dpkit_ldp.dbitflip import DBitFlip
    from dpkit_ldp.one_bit_mean import OneBitMean
    from dpkit_ldp.pem import PrefixExtendingMethod
    from dpkit_ldp.rappor import Rappor
    from dpkit_ldp.treehist import TreeHist

    for telemetry in (
        CountMeanSketch,
        HadamardCountMeanSketch,
        Rappor,
        PrefixExtendingMethod,
        TreeHist,
        DBitFlip,
        OneBitMean,
    ):
        register(telemetry)


@hookimpl
def dpkit_register_queries(register: Callable[[type[Any]], None]) -> None:
    """The ``graph`` statistic of an edge list (:mod:`dpkit_ldp.graph_query`)."""
    from dpkit_ldp.graph_query import GraphQuery

    register(GraphQuery)


@hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], Estimator]], None],
) -> None:
    from dpkit_ldp.hadamard import HadamardResponseEstimator
    from dpkit_ldp.kary_rr import KaryRandomizedResponseEstimator
    from dpkit_ldp.local_hashing import OptimalLocalHashingEstimator
    from dpkit_ldp.randomized_response import RandomizedResponseEstimator
    from dpkit_ldp.unary_encoding import UnaryEncodingEstimator

    register("rr", RandomizedResponseEstimator)
    register("krr", KaryRandomizedResponseEstimator)
    register("sue", UnaryEncodingEstimator)
    register("oue", UnaryEncodingEstimator)
    register("olh", OptimalLocalHashingEstimator)
    register("hr", HadamardResponseEstimator)
    from dpkit_ldp.mean_estimator import MeanEstimator
    from dpkit_ldp.square_wave import SquareWaveEstimator

    for name in ("duchi", "duchi_multi", "pm", "pm_multi", "hm", "hm_multi", "multibit"):
        register(name, MeanEstimator)
    register("sw", SquareWaveEstimator)
    from dpkit_ldp.graph_estimators import AdjacencyEstimator, CountEstimator, TwoRoundEstimator

    register("graph_rr", AdjacencyEstimator)
    register("graph_arr", AdjacencyEstimator)
    register("graph_degree", CountEstimator)
    register("graph_kstar", CountEstimator)
    register("graph_triangles", TwoRoundEstimator)
    from dpkit_ldp.graph_one_round import OneRoundEstimator

    register("graph_one_round", OneRoundEstimator)
    from dpkit_ldp.count_mean_sketch import SketchEstimator
    from dpkit_ldp.dbitflip import DBitFlipEstimator
    from dpkit_ldp.one_bit_mean import OneBitMeanEstimator
    from dpkit_ldp.pem import PrefixExtendingEstimator
    from dpkit_ldp.rappor import RapporEstimator
    from dpkit_ldp.treehist import TreeHistEstimator

    for sketch in ("cms", "hcms"):
        register(sketch, SketchEstimator)
    register("rappor", RapporEstimator)
    register("pem", PrefixExtendingEstimator)
    register("treehist", TreeHistEstimator)
    register("dbitflip", DBitFlipEstimator)
    register("one_bit_mean", OneBitMeanEstimator)

"""dpkit's built-in local-DP mechanisms, registered as an ordinary plugin.

Imports only dpkit's public API, exactly as a third-party plugin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dpkit

__all__ = [
    "dpkit_register_estimators",
    "dpkit_register_mechanisms",
    "estimate_mean",
    "simulate_counts",
    "stochastic_discretize",
    "synthetic",
]

# Helpers for experiments, imported on first use so that loading the plugin stays light.
_HELPERS = {
    "estimate_mean": "dpkit_ldp.discretize",
    "simulate_counts": "dpkit_ldp.simulate",
    "stochastic_discretize": "dpkit_ldp.discretize",
    "synthetic": "dpkit_ldp.datasets",
}


def __getattr__(name: str) -> Any:
    if name in _HELPERS:
        import importlib

        return getattr(importlib.import_module(_HELPERS[name]), name)
    raise AttributeError(f"module 'dpkit_ldp' has no attribute {name!r}")


@dpkit.hookimpl
def dpkit_register_mechanisms(register: Callable[[type[dpkit.Mechanism]], None]) -> None:
    from dpkit_ldp.hadamard import HadamardResponse
    from dpkit_ldp.kary_rr import KaryRandomizedResponse
    from dpkit_ldp.local_hashing import OptimalLocalHashing
    from dpkit_ldp.randomized_response import RandomizedResponse
    from dpkit_ldp.unary_encoding import OptimizedUnaryEncoding, SymmetricUnaryEncoding

    register(RandomizedResponse)
    register(KaryRandomizedResponse)
    register(SymmetricUnaryEncoding)
    register(OptimizedUnaryEncoding)
    register(OptimalLocalHashing)
    register(HadamardResponse)


@dpkit.hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], dpkit.Estimator]], None],
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

"""dpkit's built-in local-DP mechanisms, registered as an ordinary plugin.

Imports only dpkit's public API, exactly as a third-party plugin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dpkit

__all__ = ["dpkit_register_estimators", "dpkit_register_mechanisms"]


@dpkit.hookimpl
def dpkit_register_mechanisms(register: Callable[[type[dpkit.Mechanism]], None]) -> None:
    from dpkit_ldp.kary_rr import KaryRandomizedResponse
    from dpkit_ldp.randomized_response import RandomizedResponse

    register(RandomizedResponse)
    register(KaryRandomizedResponse)


@dpkit.hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], dpkit.Estimator]], None],
) -> None:
    from dpkit_ldp.kary_rr import KaryRandomizedResponseEstimator
    from dpkit_ldp.randomized_response import RandomizedResponseEstimator

    register("rr", RandomizedResponseEstimator)
    register("krr", KaryRandomizedResponseEstimator)

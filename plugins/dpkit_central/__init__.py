"""dpkit's built-in central-DP mechanisms, registered as an ordinary plugin.

Imports only dpkit's public API, exactly as a third-party plugin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dpkit

__all__ = ["dpkit_register_estimators", "dpkit_register_mechanisms"]


@dpkit.hookimpl
def dpkit_register_mechanisms(register: Callable[[type[dpkit.Mechanism]], None]) -> None:
    """The central mechanisms (laplace, gaussian, ...) are registered here."""


@dpkit.hookimpl
def dpkit_register_estimators(
    register: Callable[[str, Callable[[Any], dpkit.Estimator]], None],
) -> None:
    """Central mechanisms release their estimates directly; no estimator is needed yet."""

"""Checks on the explicit random generator every sampling call takes."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.errors import InvalidParameter


def check_rng(rng: Any, *, owner: str | None = None) -> np.random.Generator:
    """Return ``rng`` if it is a ``numpy.random.Generator``; never fall back to global state."""
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator, e.g. numpy.random.default_rng(seed)",
            owner=owner,
        )
    return rng

"""Checks on the explicit random generator every sampling call takes."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from dpkit.errors import InvalidParameter
from dpkit.randomness.secure_rng import SecureRandom

_R = TypeVar("_R")


def check_rng(rng: _R, *, owner: str | None = None) -> _R:
    """Return ``rng`` if it is a ``numpy.random.Generator`` (fast mode) or a
    :class:`~dpkit.randomness.SecureRandom` (secure mode); never fall back to global state.

    ``None`` is refused here: a mechanism that gives ``None`` its secure meaning resolves it
    first with :func:`dpkit.plugin.resolve_rng`.
    """
    if not isinstance(rng, (np.random.Generator, SecureRandom)):
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator, e.g. numpy.random.default_rng(seed), "
            "or a dpkit SecureRandom",
            owner=owner,
        )
    return rng

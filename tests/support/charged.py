"""A query that releases nothing but costs a given privacy event: what the accounting tests
spend to see what a session admits."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.privacy import PrivacyEvent


class Charged:
    """A query of cost ``privacy`` whose release is 0.0."""

    name = "charged"

    def __init__(self, privacy: PrivacyEvent):
        self.privacy = privacy

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        return 0.0

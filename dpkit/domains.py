"""Input domains and their neighbouring relations.

A mechanism declares the domain of one input and which inputs are neighbours, so that a generic
auditor can enumerate (or draw) neighbouring pairs without knowing the mechanism:

* local mechanisms protect one user's value: any two values of the domain are neighbours
  (the "replace one value" relation of local DP, Kasiviswanathan et al. 2008);
* central mechanisms protect a query answer whose neighbours differ by at most the declared
  sensitivity in a norm (Dwork & Roth 2014, Definition 3.1).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs
import numpy as np
from numpy.typing import NDArray

__all__ = ["CategoricalDomain", "Domain", "VectorDomain"]


class Domain:
    """Base of the input domains."""

    #: The neighbouring relation, in words, for reports and docs.
    relation: str = ""

    @property
    def is_finite(self) -> bool:
        return False

    def elements(self) -> NDArray[np.int64]:
        """All elements of a finite domain."""
        raise NotImplementedError

    def neighbouring_pairs(self) -> Iterator[tuple[int, int]]:
        """Every ordered pair of distinct neighbours of a finite domain."""
        raise NotImplementedError


@attrs.frozen
class CategoricalDomain(Domain):
    """The categories ``0 .. size-1`` of one user's value; every two distinct values neighbour."""

    size: int
    relation = "replace one user's value by any other value (local DP)"

    @property
    def is_finite(self) -> bool:
        return True

    def elements(self) -> NDArray[np.int64]:
        return np.arange(self.size, dtype=np.int64)

    def neighbouring_pairs(self) -> Iterator[tuple[int, int]]:
        return iter(itertools.permutations(range(self.size), 2))


@attrs.frozen
class VectorDomain(Domain):
    """Real vectors (query answers) whose neighbours differ by at most ``sensitivity`` in L``norm``.

    ``norm`` is 1, 2 or ``inf``; ``integer`` restricts the vectors to integers. ``monotone``
    further restricts neighbours to move every coordinate in the same direction (all up or all
    down), as the utilities of a monotone query do when one record is added or removed
    (e.g. counts; McSherry & Talwar 2007, Section 2; Dwork & Roth 2014, Section 3.4).
    """

    sensitivity: float
    norm: float = 1.0
    integer: bool = False
    monotone: bool = False

    @property
    def relation(self) -> str:  # type: ignore[override]
        norm = "∞" if self.norm == float("inf") else f"{self.norm:g}"
        text = f"answers differ by at most {self.sensitivity:g} in the L{norm} norm"
        return text + (", all in the same direction" if self.monotone else "")

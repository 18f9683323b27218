"""Parallel composition over disjoint partitions.

McSherry 2009 ("Privacy Integrated Queries", Theorem 2): if the data are split into disjoint
parts by a rule that does not depend on the private data, and each part is analysed by its own
composition, then under add/remove-one neighbours one record changes only one part, so the whole
is (max_j ε_j, max_j δ_j)-DP. This does not hold for replace-one neighbours (a changed record can
move between two parts: then use 2·max, or basic composition).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpkit.accounting._common import Bound, Events, check_delta, normalise
from dpkit.accounting.accountant import account
from dpkit.errors import InvalidParameter
from dpkit.privacy import neighbours

__all__ = ["compose_parallel"]


def compose_parallel(
    partitions: Sequence[Events | Any], *, delta: float, method: str = "best"
) -> Bound:
    """Account each partition at ``delta`` with ``method`` and keep the worst one. Every
    event must be under add/remove neighbours (:func:`~dpkit.privacy.neighbours`): under
    replacement the theorem does not hold."""
    target = check_delta(delta, owner="compose_parallel")
    for events in partitions:
        for event, _ in normalise(events):
            if neighbours(event) != "add_remove":
                raise InvalidParameter(
                    "partitions",
                    event,
                    "events under add/remove neighbours: under replacement one record can "
                    "move between two partitions (account them together with dpkit.account "
                    "instead)",
                    owner="compose_parallel",
                )
    bounds = [account(events, delta=target, method=method) for events in partitions]
    if not bounds:
        return Bound(epsilon=0.0, delta=0.0, method="parallel")
    worst = max(range(len(bounds)), key=lambda i: bounds[i].epsilon)
    return Bound(
        epsilon=bounds[worst].epsilon,
        delta=max(b.delta for b in bounds),
        method="parallel",
        detail={"partition": worst, "method": bounds[worst].method, "partitions": len(bounds)},
    )

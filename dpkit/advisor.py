"""Which frequency oracle to use: the registered local protocol with the lowest variance.

Every local mechanism class that defines the classmethod

    frequency_variance(*, k: int, epsilon: float, n: int = 1) -> float

(the approximate variance Var* of its frequency estimate f̂_v for k categories at level ε with n
users, as in Wang, Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency
Estimation", USENIX Security, Sections 4–5) takes part, built-in or third-party: :func:`advise`
asks each and ranks them. Var* leaves out the term proportional to the true frequency f_v, so it
compares protocols for rare values; Wang et al. use it to choose between GRR (best when
k < 3e^ε + 2) and OUE/OLH.

>>> from dpkit import advise
>>> advice = advise(64, 1.0)
>>> advice.best in advice.variances
True
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from dpkit.errors import DPKitError, InvalidParameter
from dpkit.params import Integer, Real
from dpkit.registry import Registry, get_registry

__all__ = ["Advice", "advise"]


@attrs.frozen
class Advice:
    """The protocol with the lowest Var*, and the Var* of every protocol that applies.

    ``variances`` maps mechanism name → Var*[f̂_v] (frequency scale, n users), sorted from best
    to worst; ``skipped`` maps the name of each local mechanism whose ``frequency_variance``
    refused the arguments (e.g. a binary-only protocol for k > 2) to the reason.
    """

    k: int
    epsilon: float
    n: int
    best: str
    variances: dict[str, float]
    skipped: dict[str, str] = attrs.field(factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "n": self.n,
            "best": self.best,
            "variances": dict(self.variances),
            "standard_errors": {name: math.sqrt(v) for name, v in self.variances.items()},
            "skipped": dict(self.skipped),
        }


def _check(name: str, value: Any, domain: Integer | Real) -> Any:
    try:
        return domain.convert(value)
    except (ValueError, TypeError, OverflowError):
        raise InvalidParameter(name, value, domain.describe(), owner="advise") from None


def advise(k: int, epsilon: float, *, n: int = 1, registry: Registry | None = None) -> Advice:
    """Rank the registered local frequency oracles by Var*[f̂_v] for ``k`` categories at ``epsilon``.

    Raises :class:`dpkit.InvalidParameter` for bad arguments, or if no registered mechanism
    defines ``frequency_variance`` for them. Ties go to the name that sorts first.
    """
    k = _check("k", k, Integer(low=2))
    epsilon = _check("epsilon", epsilon, Real(low=0.0, low_open=True))
    n = _check("n", n, Integer(low=1))
    registry = registry or get_registry()
    variances: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for name in registry.names():
        cls = registry.mechanisms[name].cls
        method = getattr(cls, "frequency_variance", None)
        if cls.kind != "local" or not callable(method):
            continue
        try:
            value = float(method(k=k, epsilon=epsilon, n=n))
        except DPKitError as error:
            skipped[name] = str(error)
            continue
        if not math.isfinite(value) or value < 0:
            skipped[name] = f"frequency_variance returned {value!r}"
            continue
        variances[name] = value
    if not variances:
        raise InvalidParameter(
            "k",
            k,
            "a domain size some registered local mechanism can estimate frequencies for "
            "(none defines frequency_variance for it)",
            owner="advise",
        )
    ranked = dict(sorted(variances.items(), key=lambda item: (item[1], item[0])))
    return Advice(k, epsilon, n, next(iter(ranked)), ranked, skipped)

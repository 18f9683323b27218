"""The accountant: every applicable backend, and the tightest valid bound among them.

Every backend returns a valid upper bound on ε at the requested δ, so their minimum is valid
too. Gaussian-only compositions are answered exactly: k uses of noise multipliers σ_i compose to
one Gaussian with μ = sqrt(Σ 1/σ_i²) (Dong, Roth & Su 2022, "Gaussian Differential Privacy",
Corollary 3.3), whose ε(δ) is Balle & Wang 2018, Theorem 8.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs

from dpkit._enclosure import decimal_low
from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    check_delta,
    normalise,
)
from dpkit.accounting.advanced import compose_advanced
from dpkit.accounting.basic import compose_basic
from dpkit.accounting.gdp import compose_gdp
from dpkit.accounting.pld import compose_pld
from dpkit.accounting.rdp import compose_rdp
from dpkit.accounting.zcdp import compose_zcdp
from dpkit.errors import DPKitError, InvalidParameter
from dpkit.privacy import (
    ApproximateDP,
    GaussianDP,
    SubsampledDP,
    flatten,
    gaussian_mu_epsilon,
)

__all__ = ["METHODS", "account", "compose_exact_gaussian"]

#: μ² beyond which a composition of Gaussians has no privacy at any δ < 1 (ε is +inf).
_NO_PRIVACY = Fraction(10) ** 300


def compose_exact_gaussian(events: Events | Any, *, delta: float) -> Bound:
    """Exact ε(δ) of a composition of Gaussian mechanisms (module docstring), rounded up:
    μ² = Σ count/σ_i² is summed exactly and ε is checked on an enclosure of the curve
    (:func:`dpkit.privacy.gaussian_mu_epsilon`)."""
    target = check_delta(delta, owner="compose_exact_gaussian")
    mu_squared = Fraction(0)
    for whole, count in normalise(events):
        for event in flatten(whole):
            if not isinstance(event, GaussianDP):
                raise NotApplicable("exact-gaussian", event, "only Gaussian events compose exactly")
            mu_squared += count / Fraction(decimal_low(event.noise_multiplier)) ** 2
    if mu_squared == 0:
        return Bound(epsilon=0.0, delta=target, method="exact-gaussian")
    if mu_squared > _NO_PRIVACY:  # σ/Δ below ~1e-150: no privacy at any δ < 1
        return Bound(epsilon=math.inf, delta=target, method="exact-gaussian")
    return Bound(
        epsilon=gaussian_mu_epsilon(target, mu_squared),
        delta=target,
        method="exact-gaussian",
        detail={"mu": math.sqrt(float(mu_squared))},
    )


def _basic_at(events: Events, *, delta: float) -> Bound:
    bound = compose_basic(events, delta=delta)
    if bound.exact_delta is None or bound.exact_delta > Fraction(decimal_low(delta)):
        raise NotApplicable("basic", events, f"the events spend δ = {bound.delta} > {delta}")
    return bound


_Backend = Callable[..., Bound]

#: The composition methods by name, in the order ``best`` tries them.
METHODS: dict[str, _Backend] = {
    "exact-gaussian": compose_exact_gaussian,
    "basic": _basic_at,
    "advanced": compose_advanced,
    "zcdp": compose_zcdp,
    "gdp": compose_gdp,
    "rdp": compose_rdp,
    "pld": compose_pld,
}


def _pure(events: Events) -> Bound:
    """δ = 0: Σε, exact. It is also the smallest ε at δ = 0: the randomized-response pairs that
    dominate pure events reach the loss Σε_i with positive probability (Kairouz, Oh &
    Viswanath 2015, Theorem 3.3 at δ = 0), and a subsampled pair reaches Σ ln(1 + q(e^ε − 1))."""
    for event, _ in events:
        for part in flatten(event):
            inner = part.event if isinstance(part, SubsampledDP) else part
            if isinstance(inner, (GaussianDP, ApproximateDP)) and inner.delta > 0:
                raise InvalidParameter(
                    "delta",
                    0,
                    f"> 0 for {type(inner).__name__} (it has no finite ε at δ = 0)",
                    owner="account",
                )
    bound = compose_basic(events)
    return attrs.evolve(bound, method="pure", candidates={"pure": bound.epsilon})


def account(events: Events | Any, *, delta: float, method: str = "best") -> Bound:
    """The (ε, δ) of running ``events`` (``[(event, count), ...]``) in adaptive composition.

    ``method`` is one of :data:`METHODS` or ``"best"``: the smallest ε among every backend
    that applies; ``Bound.method`` names the one that gave it and ``Bound.candidates`` lists
    each backend's ε (or why it did not apply). ``delta=0`` asks a pure-DP question: the
    events must all be pure (Σε is then exact and tight; ``Bound.method`` is ``"pure"``).
    """
    items = normalise(events)
    if isinstance(delta, (int, float)) and not isinstance(delta, bool) and delta == 0:
        return _pure(items)
    target = check_delta(delta, owner="account")
    if method != "best":
        if method not in METHODS:
            raise InvalidParameter("method", method, f"one of {', '.join([*METHODS, 'best'])}")
        if method == "pld" and items and all(isinstance(e, GaussianDP) for e, _ in items):
            exact = compose_exact_gaussian(items, delta=target)
            return Bound(exact.epsilon, exact.delta, "pld", detail={"exact": True, **exact.detail})
        return METHODS[method](items, delta=target)
    candidates: dict[str, float | str] = {}
    best: Bound | None = None
    for name, backend in METHODS.items():
        if name == "pld" and best is not None and best.method == "exact-gaussian":
            candidates[name] = "skipped: the exact Gaussian answer is already tight"
            continue
        try:
            bound = backend(items, delta=target)
        except DPKitError as error:  # NotApplicable, or a δ that this backend cannot reach
            candidates[name] = f"not applicable: {error}"
            continue
        candidates[name] = bound.epsilon
        if best is None or bound.epsilon < best.epsilon:
            best = bound
    if best is None:
        raise NotApplicable("best", items, "no composition method applies")
    return Bound(
        epsilon=best.epsilon,
        delta=best.delta,
        method=best.method,
        exact_epsilon=best.exact_epsilon,
        exact_delta=best.exact_delta,
        detail=best.detail,
        candidates=candidates,
    )

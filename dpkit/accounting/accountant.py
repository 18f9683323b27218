"""The accountant: every applicable backend, and the tightest valid bound among them.

Every backend returns a valid upper bound on ε at the requested δ, so their minimum is valid
too. Gaussian-only compositions are answered exactly: k uses of noise multipliers σ_i compose to
one Gaussian with μ = sqrt(Σ 1/σ_i²) (Dong, Roth & Su 2022, "Gaussian Differential Privacy",
Corollary 3.3), whose ε(δ) is Balle & Wang 2018, Theorem 8.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    check_delta,
    inverse_square,
    normalise,
)
from dpkit.accounting.advanced import compose_advanced
from dpkit.accounting.basic import compose_basic
from dpkit.accounting.pld import compose_pld
from dpkit.accounting.rdp import compose_rdp
from dpkit.accounting.zcdp import compose_zcdp
from dpkit.errors import DPKitError, InvalidParameter
from dpkit.privacy import GaussianDP, PrivacyEvent, SubsampledDP, gaussian_delta, gaussian_epsilon

__all__ = ["METHODS", "account", "compose_exact_gaussian", "gaussian_noise_multiplier"]


def compose_exact_gaussian(events: Events | Any, *, delta: float) -> Bound:
    """Exact ε(δ) of a composition of Gaussian mechanisms (module docstring)."""
    target = check_delta(delta, owner="compose_exact_gaussian")
    mu_squared = 0.0
    for event, count in normalise(events):
        if not isinstance(event, GaussianDP):
            raise NotApplicable("exact-gaussian", event, "only Gaussian events compose exactly")
        mu_squared += count * inverse_square(event.noise_multiplier)
    if mu_squared == 0:
        return Bound(epsilon=0.0, delta=target, method="exact-gaussian")
    if not math.isfinite(mu_squared):  # σ/Δ below ~1e-154: no privacy at any δ < 1
        return Bound(epsilon=math.inf, delta=target, method="exact-gaussian")
    mu = math.sqrt(mu_squared)
    return Bound(
        epsilon=gaussian_epsilon(target, 1 / mu),
        delta=target,
        method="exact-gaussian",
        detail={"mu": mu},
    )


def _basic_at(events: Events, *, delta: float) -> Bound:
    bound = compose_basic(events, delta=delta)
    if bound.delta > delta * (1 + 1e-12):
        raise NotApplicable("basic", events, f"the events spend δ = {bound.delta} > {delta}")
    return bound


_Backend = Callable[..., Bound]

#: The composition methods by name, in the order ``best`` tries them.
METHODS: dict[str, _Backend] = {
    "exact-gaussian": compose_exact_gaussian,
    "basic": _basic_at,
    "advanced": compose_advanced,
    "zcdp": compose_zcdp,
    "rdp": compose_rdp,
    "pld": compose_pld,
}


def account(events: Events | Any, *, delta: float, method: str = "best") -> Bound:
    """The (ε, δ) of running ``events`` (``[(event, count), ...]``) in adaptive composition.

    ``method`` is one of :data:`METHODS` or ``"best"``: the smallest ε among every backend
    that applies; ``Bound.method`` names the one that gave it and ``Bound.candidates`` lists
    each backend's ε (or why it did not apply).
    """
    target = check_delta(delta, owner="account")
    items = normalise(events)
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


def gaussian_noise_multiplier(
    target_epsilon: float,
    *,
    delta: float,
    steps: int = 1,
    sampling_rate: float | None = None,
    others: Events = (),
    method: str = "best",
) -> float:
    """The smallest noise multiplier σ for which ``steps`` Gaussian releases (Poisson-subsampled
    at ``sampling_rate`` if given), composed with ``others``, are (target_epsilon, delta)-DP.

    Without subsampling or other events this is the exact answer: μ solves Balle & Wang's
    δ(ε; μ) = δ and σ = sqrt(steps)/μ. Otherwise σ is found by bisection on ``method``'s ε,
    to a relative precision of 1e-6 (rounded up).
    """
    check_delta(delta, owner="gaussian_noise_multiplier")
    if not target_epsilon > 0:
        raise InvalidParameter("target_epsilon", target_epsilon, "a real number > 0")
    if sampling_rate is None and not others:
        lo, hi = 0.0, 1.0  # δ(ε; μ) increases with μ = 1/σ: find the largest μ with δ ≤ delta
        while gaussian_delta(target_epsilon, 1 / hi) <= delta:
            lo, hi = hi, 2 * hi
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if gaussian_delta(target_epsilon, 1 / mid) <= delta:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-13 * hi:
                break
        if lo == 0:
            raise InvalidParameter("target_epsilon", target_epsilon, "reachable by some noise")
        return math.sqrt(steps) / lo

    def epsilon_at(sigma: float) -> float:
        event: PrivacyEvent = GaussianDP(noise_multiplier=sigma, delta=delta)
        if sampling_rate is not None:
            event = SubsampledDP(event, sampling_rate)
        return account([*others, (event, steps)], delta=delta, method=method).epsilon

    lo, hi = 0.0, 1.0
    while epsilon_at(hi) > target_epsilon:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            raise InvalidParameter(
                "target_epsilon", target_epsilon, "reachable with a noise multiplier below 1e6"
            )
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        if mid > 0 and epsilon_at(mid) <= target_epsilon:
            hi = mid
        else:
            lo = mid
    return hi

"""Running both tiers on a mechanism: :func:`audit` and :func:`check_mechanism`."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, cast

import attrs
import numpy as np

from dpkit.mechanism import Mechanism
from dpkit.params import Integer, Real
from dpkit.testing.blackbox import Progress, StatisticalResult, statistical_check
from dpkit.testing.exact import ExactResult, exact_check
from dpkit.testing.inputs import InputPlan, Unsupported, with_pairs
from dpkit.testing.modes import MODES, Mode, check_modes, mode_alpha
from dpkit.testing.report import AuditReport, DPViolation

__all__ = ["CHECK_ALPHA", "audit", "check_mechanism", "parameter_points"]

#: Per-audit false-alarm level of :func:`check_mechanism` (each of the two statistical tests,
#: shared by the randomness modes: see :mod:`dpkit.testing.modes`).
CHECK_ALPHA = 1e-7


def _parameters(mechanism: Mechanism) -> dict[str, Any]:
    names = type(mechanism).parameters()
    return {
        k: v for k, v in attrs.asdict(cast(Any, mechanism), recurse=False).items() if k in names
    }


def audit(
    mechanism: Mechanism,
    *,
    samples: int = 200_000,
    selection_samples: int | None = None,
    alpha: float = 1e-3,
    seed: int = 0,
    pairs: list[tuple[Any, Any]] | None = None,
    random_pairs: int = 4,
    exact: bool = True,
    statistical: bool = True,
    progress: Progress | None = None,
    modes: Iterable[Mode] = MODES,
) -> AuditReport:
    """Run both tiers on one mechanism instance and return the :class:`AuditReport`.

    ``samples`` is the number of outputs per input of the tested pair, in each randomness mode;
    ``alpha`` the level of the ε certificate (and, separately, of the goodness-of-fit test) of
    the whole audit, shared evenly by the ``modes`` sampled (default both, ``"fast"`` and
    ``"secure"``: :mod:`dpkit.testing.modes`); ``pairs`` explicit neighbouring inputs to try
    beside the worst-case ones (checked against the domain before anything runs: a pair that
    does not neighbour is an :class:`~dpkit.errors.InvalidParameter`) and ``random_pairs``
    random neighbours.
    """
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"expected a dpkit.Mechanism instance, got {type(mechanism).__name__}")
    chosen = check_modes(modes, owner="audit")
    start = time.perf_counter()
    claim = mechanism.privacy
    plan, checked = _checked_pairs(mechanism, pairs)
    exact_result = (
        exact_check(mechanism, pairs=checked, plan=plan)
        if exact
        else ExactResult(False, "not requested")
    )
    results = tuple(
        statistical_check(
            mechanism,
            samples=samples,
            selection_samples=selection_samples,
            alpha=mode_alpha(alpha, chosen),
            seed=seed,
            pairs=pairs,
            random_pair_count=random_pairs,
            progress=mode_progress(progress, mode, index, len(chosen)),
            mode=mode,
        )
        if statistical
        else StatisticalResult(False, "not requested", mode=mode)
        for index, mode in enumerate(chosen)
    )
    return AuditReport(
        mechanism=mechanism.name,
        parameters=_parameters(mechanism),
        claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta),
        exact=exact_result,
        modes=results,
        alpha=alpha,
        seed=seed,
        elapsed=time.perf_counter() - start,
        relation=_relation(mechanism),
    )


def mode_progress(progress: Progress | None, mode: str, index: int, count: int) -> Progress | None:
    """``progress`` for the ``index``-th of ``count`` modes: messages named by the mode,
    fractions scaled to the mode's share of the audit."""
    if progress is None:
        return None
    report = progress

    def scaled(message: str, fraction: float) -> None:
        report(f"{mode} mode: {message}", (index + fraction) / count)

    return scaled


def _checked_pairs(
    mechanism: Mechanism, pairs: list[tuple[Any, Any]] | None
) -> tuple[InputPlan | None, list[tuple[Any, Any]]]:
    """The input plan and the explicit pairs, checked before either tier runs."""
    try:
        plan, checked, _ = with_pairs(mechanism, pairs, rng=np.random.default_rng(0))
    except Unsupported:
        return None, []
    return plan, checked


def _relation(mechanism: Mechanism) -> str:
    try:
        return str(mechanism.domain.relation)
    except Exception:  # a third-party domain may not describe itself
        return ""


def parameter_points(cls: type[Mechanism]) -> list[dict[str, Any]]:
    """Parameter sets spanning the declared ``typical`` ranges: all-low, middle, all-high.

    Parameters without ``typical`` keep their defaults. Real ranges use the geometric middle
    when both ends are positive (ε = 0.05 .. 6 → 0.55), integers round it.
    """
    points: list[dict[str, Any]] = [{}, {}, {}]
    for name, spec in cls.parameters().items():
        if spec.typical is None:
            continue
        low, high = spec.typical
        middle = math.sqrt(low * high) if low > 0 and high > 0 else (low + high) / 2
        for point, value in zip(points, (low, middle, high), strict=True):
            point[name] = round(value) if isinstance(spec.domain, Integer) else float(value)
        if not isinstance(spec.domain, (Integer, Real)):
            for point in points:
                point.pop(name, None)
    unique: list[dict[str, Any]] = []
    for point in points:
        if point not in unique:
            unique.append(point)
    return unique


def check_mechanism(
    mechanism: Mechanism | type[Mechanism],
    *,
    params: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None = None,
    samples: int = 50_000,
    alpha: float = CHECK_ALPHA,
    seed: int = 20261122,
    raise_on_violation: bool = True,
    pairs: list[tuple[Any, Any]] | None = None,
    modes: Iterable[Mode] = MODES,
) -> list[AuditReport]:
    """Audit a mechanism (instance, or class at :func:`parameter_points`) and fail loudly.

    Raises :class:`DPViolation` (an ``AssertionError``, so pytest shows it as a failure) when any
    audit finds a violation — in any randomness mode — and an ``AssertionError`` naming the
    reason when an audit could check nothing; returns the reports otherwise. Each audit samples
    ``modes`` (default both fast and secure, ``samples`` outputs per input in each) and falsely
    alarms on a correct mechanism with probability ≤ 2·``alpha`` in all; the seed is fixed so
    runs reproduce. ``pairs`` are explicit neighbouring inputs tried at every parameter point.
    """
    chosen = check_modes(modes, owner="check_mechanism")
    if isinstance(mechanism, Mechanism):
        instances = [mechanism]
    elif isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        if params is None:
            points: list[Mapping[str, Any]] = list(parameter_points(mechanism))
        elif isinstance(params, Mapping):
            points = [params]
        else:
            points = list(params)
        instances = [mechanism(**point) for point in points]
    else:
        raise TypeError(f"expected a Mechanism class or instance, got {mechanism!r}")
    reports = [
        audit(instance, samples=samples, alpha=alpha, seed=seed + i, pairs=pairs, modes=chosen)
        for i, instance in enumerate(instances)
    ]
    return judge(reports, raise_on_violation=raise_on_violation)


def judge(reports: list[AuditReport], *, raise_on_violation: bool = True) -> list[AuditReport]:
    """Fail on the first unchecked audit (nothing checked is not a pass), then on violations."""
    unchecked = [r for r in reports if r.verdict == "unchecked"]
    if unchecked:
        report = unchecked[0]
        raise AssertionError(f"{report.label} could not be audited: {report.reason}")
    failed = [r for r in reports if r.verdict == "violation"]
    if failed and raise_on_violation:
        raise DPViolation(failed)
    return reports

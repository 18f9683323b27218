"""The statistical tier: a certified lower bound on ε from the real code path.

It never trusts a declared distribution for its verdict, so a correct formula with a buggy
sampler is caught. The design follows the auditors surveyed in the auditing note (StatDP, Ding
et al. CCS 2018; DP-Sniper, Bichsel et al. S&P 2021; LDP-Auditor, Arcolezi & Gambs PETS 2024):

1. **Inputs.** Neighbouring pairs: the worst-case pairs the domain declares (or the auditor
   derives for a :class:`~dpkit.plugin.VectorDomain`), pairs the caller names, and random ones
   (:mod:`dpkit.testing.inputs`); for a whole query, neighbouring *datasets*
   (:mod:`dpkit.testing.datasets`).
2. **Event selection, on batch A.** For every pair, candidate events are upper level sets
   {o : g(o) ≥ t} of scores g (:mod:`dpkit.testing.events`): the declared log-likelihood
   ratio when there is one, per-output and per-coordinate events, and joint scores of whole
   output vectors. Scores are fitted on one half of batch A and their thresholds chosen on the
   other. Each event is ranked by the ε bound it would certify on batch B if its true hit
   rates were their one-sided Clopper–Pearson bounds on batch A at level 0.05 (pessimistic
   for x, optimistic for x'): a rare event seen a few dozen times in a small batch A still
   ranks by its ratio, and a lucky one among thousands of candidates is discounted. The
   (pair, event) that ranks first is kept.
3. **Test, on a fresh batch B.** ε_lb = ln((LCB(P[M(x)∈S]) − δ) / UCB(P[M(x')∈S])) with
   one-sided Clopper–Pearson bounds, each at level α/2. Because the pair and S were chosen on
   an independent batch, exactly **one** test is made on batch B, whatever the number of
   candidate pairs (declared, derived, explicit and random alike) and events screened: the
   certificate ε_true ≥ ε_lb holds with probability ≥ 1 − α by the union bound over its two
   bounds, and no Bonferroni factor over the candidates is needed (auditing note §5.1).
   Verdict: violation iff ε_lb > ε.
4. **Goodness of fit** (where the distribution is declared; :mod:`dpkit.testing.fit`), at
   level α split over the two inputs of the tested pair, so it also falsely alarms with
   probability ≤ α.

All of this runs once per randomness mode (:mod:`dpkit.testing.modes`), with the mode's own
generator and its share of α. Before sampling, every candidate input is released once in that
mode: when every input is refused with a typed error (a :class:`~dpkit.errors.DPKitError`, e.g.
the :class:`~dpkit.errors.UnsupportedRandomness` of a float sampler asked of a SecureRandom),
the mode is reported as *refused* — it cannot release, so it cannot leak; when only some are,
the exception itself depends on the input, a finding of its own (the private phase must be
total, ``docs/security.md``), and the pairs that released are audited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import DPKitError
from dpkit.mechanism import Mechanism
from dpkit.randomness import SecureRandom
from dpkit.randomness.modes import keyed_default
from dpkit.testing import exact
from dpkit.testing._stats import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
)
from dpkit.testing.events import Candidate, candidate_scores
from dpkit.testing.fit import FitResult, goodness_of_fit
from dpkit.testing.inputs import (
    InputPlan,
    Unsupported,
    key,
    random_pairs,
    with_pairs,
    worst_case_pairs,
)
from dpkit.testing.modes import Mode, mode_generator

__all__ = ["FitResult", "StatisticalResult", "Subject", "run_mode", "statistical_check"]

Progress = Callable[[str, float], None]
Fit = Callable[[list[tuple[Any, NDArray[Any]]], list[NDArray[Any]]], FitResult]

MAX_THRESHOLDS = 512
EMPIRICAL_WEIGHT = 0.97
#: The confidence level of the bounds that *rank* candidate events on batch A (not a test).
SELECTION_LEVEL = 0.05


@attrs.frozen
class StatisticalResult:
    """What the statistical tier certified.

    ``pair_sources`` says where the screened pairs came from (declared, derived, explicit,
    random), ``pairs_screened`` how many there were. ``mode`` is the randomness mode sampled;
    ``refused`` is true when the subject refused that mode on every input with a typed error
    (``reason`` quotes it); ``boundary`` holds one sentence per input on which it raised while
    releasing on the others.
    """

    checked: bool
    reason: str = ""
    violation: bool = False
    epsilon_lower_bound: float = 0.0
    confidence: float = 0.0
    samples: int = 0
    samples_per_input: int = 0
    pair: tuple[str, str] | None = None
    event: str = ""
    hits: tuple[int, int] = (0, 0)
    pairs_screened: int = 0
    fit: FitResult = attrs.field(factory=lambda: FitResult(False, "not run"))
    pair_sources: str = ""
    mode: str = "fast"
    refused: bool = False
    boundary: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """This mode's own verdict: ``"violation"`` (a certified ε_lb above the claim, a
        sampler that does not fit its declaration, or input-dependent exceptions),
        ``"refused"``, ``"pass"`` or ``"unchecked"``."""
        if self.violation or self.fit.mismatch or self.boundary:
            return "violation"
        if self.refused:
            return "refused"
        return "pass" if self.checked else "unchecked"

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self, recurse=False)
        data["verdict"] = self.verdict
        data["pair"] = list(self.pair) if self.pair else None
        data["hits"] = list(self.hits)
        data["fit"] = self.fit.to_dict()
        data["boundary"] = list(self.boundary)
        return data


@attrs.frozen
class Subject:
    """What the statistical tier samples: a claim, and ``draw(input, n, rng)`` → n outputs.

    ``declared(pair)`` gives the declared log-likelihood-ratio score of a pair, when the
    distribution is declared. ``action`` and ``inputs`` name the call and what it takes, for
    the report (``"randomize"`` of an ``"input"``, or ``"run"`` on a ``"dataset"``).
    """

    epsilon: float
    delta: float
    draw: Callable[[Any, int, Any], NDArray[Any]]
    describe: Callable[[Any], str]
    declared: Callable[[tuple[Any, Any]], Candidate] | None = None
    action: str = "randomize"
    inputs: str = "input"


class Refused(Unsupported):
    """The subject refused the randomness mode with a typed error on every input."""


@attrs.frozen
class _Candidate:
    bound: float
    pair: tuple[Any, Any]
    score: Callable[[NDArray[Any]], NDArray[np.float64]]
    threshold: float
    describe: Callable[[float], str]


def _no_progress(message: str, fraction: float) -> None:
    return None


def mechanism_subject(mechanism: Mechanism, plan: InputPlan) -> Subject:
    """The statistical tier's view of a mechanism: ``randomize`` on a batch of one input."""

    def draw(value: Any, n: int, rng: Any) -> NDArray[Any]:
        return np.asarray(mechanism.randomize(plan.batch(value, n), rng=rng))

    declared = None
    if mechanism.has_exact_distribution:

        def declared(pair: tuple[Any, Any]) -> Candidate:
            return _declared_ratio(mechanism, plan, pair)

    claim = mechanism.privacy
    return Subject(float(claim.epsilon), float(claim.delta), draw, plan.describe, declared)


def describe_sources(sources: list[tuple[str, int]]) -> str:
    return ", ".join(f"{count} {what}" for what, count in sources if count)


def statistical_check(
    mechanism: Mechanism,
    *,
    samples: int = 200_000,
    selection_samples: int | None = None,
    alpha: float = 1e-3,
    seed: int = 0,
    pairs: list[tuple[Any, Any]] | None = None,
    random_pair_count: int = 4,
    progress: Progress | None = None,
    mode: Mode = "fast",
) -> StatisticalResult:
    """Audit ``mechanism`` by sampling in one randomness ``mode`` (see the module docstring).

    ``samples`` outputs per input of the tested pair (batch B); ``selection_samples`` (default
    ``samples // 2``) per input of every screened pair (batch A). ``alpha`` bounds the
    probability of a false violation (and, separately, of a false goodness-of-fit alarm) in
    this mode. ``pairs`` are explicit neighbouring pairs, checked against the domain first (a
    bad one is an :class:`~dpkit.errors.InvalidParameter`). The candidate pairs depend on
    ``seed`` only, so every mode screens the same ones; the draws come from the mode's
    generator (:func:`~dpkit.testing.modes.mode_generator`).
    """
    rng = np.random.default_rng(seed)
    try:
        plan, explicit, note = with_pairs(mechanism, pairs, rng=rng)
    except Unsupported as why:
        return StatisticalResult(False, str(why), mode=mode)
    worst = worst_case_pairs(mechanism, plan)
    drawn = random_pairs(mechanism, plan, random_pair_count, rng=rng)
    origin = "declared" if plan.mode in ("categorical", "declared") else "derived"
    sources = describe_sources(
        [
            (f"{origin} by {type(mechanism.domain).__name__}", len(worst)),
            (f"explicit ({note})", len(explicit)),
            ("random", len(drawn)),
        ]
    )

    def fit(tested: list[tuple[Any, NDArray[Any]]], batch_a: list[NDArray[Any]]) -> FitResult:
        return goodness_of_fit(mechanism, plan, tested, batch_a, alpha=alpha)

    return run_mode(
        mechanism_subject(mechanism, plan),
        worst + explicit + drawn,
        sources,
        mode=mode,
        samples=samples,
        selection_samples=selection_samples,
        alpha=alpha,
        rng=mode_generator(mode, seed, rng),
        progress=progress,
        fit=fit,
    )


def run_mode(
    subject: Subject,
    candidates: list[tuple[Any, Any]],
    sources: str,
    *,
    mode: Mode,
    samples: int,
    selection_samples: int | None,
    alpha: float,
    rng: Any,
    progress: Progress | None = None,
    fit: Fit | None = None,
) -> StatisticalResult:
    """One mode's audit: release every candidate input once, then :func:`run_statistical`
    on the pairs that released; a refused mode, or one that releases nothing, is unchecked."""
    if isinstance(rng, SecureRandom) and rng.keyed:  # secure mode: both spellings
        subject = attrs.evolve(subject, draw=both_spellings(subject.draw))
    try:
        kept, boundary = releasing_pairs(subject, candidates, rng)
    except Refused as why:
        return StatisticalResult(False, str(why), mode=mode, refused=True, pair_sources=sources)
    except Unsupported as why:
        return StatisticalResult(False, str(why), mode=mode, pair_sources=sources)
    result = run_statistical(
        subject,
        kept,
        sources,
        samples=samples,
        selection_samples=selection_samples,
        alpha=alpha,
        rng=rng,
        progress=progress,
        fit=fit,
    )
    return attrs.evolve(result, mode=mode, boundary=boundary)


def both_spellings(draw: Callable[[Any, int, Any], NDArray[Any]]) -> Callable[..., NDArray[Any]]:
    """Secure mode's draws of ``n`` outputs in both of its spellings: n − ⌊n/2⌋ with the keyed
    SecureRandom passed as ``rng``, then ⌊n/2⌋ with ``rng=None`` while that generator stands in
    for the process-wide one (:func:`~dpkit.randomness.modes.keyed_default`), so a subject
    whose ``rng=None`` branch differs is sampled too, reproducibly. One output (the release
    probe) draws one of each and keeps the first: an error of either spelling is seen there.
    A subject whose two spellings share a law draws n independent outputs of it, so the
    statistical tier's false-positive rate is unchanged."""

    def drawn(value: Any, n: int, rng: Any) -> NDArray[Any]:
        passed = np.asarray(draw(value, max(n - n // 2, 1), rng))
        with keyed_default(rng):
            default = np.asarray(draw(value, max(n // 2, 1), None))
        return passed if n == 1 else np.concatenate([passed, default], axis=0)

    return drawn


def releasing_pairs(
    subject: Subject, pairs: list[tuple[Any, Any]], rng: Any
) -> tuple[list[tuple[Any, Any]], tuple[str, ...]]:
    """Release once from every input of ``pairs``; keep the pairs on which the subject releases.

    An exception on some inputs and not on others is a finding (it depends on the input). On
    every input: :class:`Refused` when every exception is a typed
    :class:`~dpkit.errors.DPKitError` (the subject refuses this randomness mode), otherwise
    :class:`~dpkit.testing.inputs.Unsupported` (nothing could be released).
    """
    describe, action, what = subject.describe, subject.action, subject.inputs
    failed: dict[Any, tuple[str, BaseException]] = {}
    released = 0
    seen: set[Any] = set()
    for value in (v for pair in pairs for v in pair):
        k = key(value)
        if k in seen:
            continue
        seen.add(k)
        try:
            subject.draw(value, 1, rng)
            released += 1
        except Exception as error:
            failed[k] = (f"{type(error).__name__} on {what} {describe(value)}", error)
    if failed and not released:
        first, raised = next(iter(failed.values()))
        if all(isinstance(e, DPKitError) for _, e in failed.values()):
            raise Refused(f"{action} raised {type(raised).__name__}: {raised}")
        raise Unsupported(f"{action} raised on every {what} ({first}); nothing could be released")
    kept = [(a, b) for a, b in pairs if key(a) not in failed and key(b) not in failed]
    findings = tuple(
        f"privacy boundary: {action} raised {text} but released on its neighbours: an exception "
        "that depends on the data reveals it (the private phase must be total)"
        for text, _ in list(failed.values())[:3]
    )
    return kept, findings


def run_statistical(
    subject: Subject,
    candidates: list[tuple[Any, Any]],
    sources: str,
    *,
    samples: int,
    selection_samples: int | None,
    alpha: float,
    rng: Any,
    progress: Progress | None = None,
    fit: Fit | None = None,
) -> StatisticalResult:
    """Screen ``candidates`` on batch A, test the best (pair, event) on batch B; the draws
    come from ``rng`` (a numpy Generator or a SecureRandom)."""
    progress = progress or _no_progress
    if not candidates:
        return StatisticalResult(False, "no neighbouring pair to test", pair_sources=sources)
    n_select = selection_samples or max(samples // 2, 1000)
    drawn = 0
    batch_a: dict[Any, NDArray[Any]] = {}
    best: _Candidate | None = None
    steps = len(candidates) + 2
    for index, (x, y) in enumerate(candidates):
        progress(f"screening pair {index + 1}/{len(candidates)}", index / steps)
        for value in (x, y):
            if key(value) not in batch_a:
                batch_a[key(value)] = subject.draw(value, n_select, rng)
                drawn += n_select
        found = _best_event(subject, (x, y), batch_a[key(x)], batch_a[key(y)], alpha, samples)
        if found is not None and (best is None or found.bound > best.bound):
            best = found
    if best is None:
        return StatisticalResult(
            False, "no output event could be formed", samples=drawn, pair_sources=sources
        )
    x, y = best.pair
    progress("testing the selected event on a fresh batch", len(candidates) / steps)
    out_x = subject.draw(x, samples, rng)
    out_y = subject.draw(y, samples, rng)
    drawn += 2 * samples
    hits_x = int(np.count_nonzero(best.score(out_x) >= best.threshold))
    hits_y = int(np.count_nonzero(best.score(out_y) >= best.threshold))
    bound = float(epsilon_lower_bound(hits_x, hits_y, samples, samples, alpha / 2, subject.delta))
    fitted = FitResult(False, "no declared distribution")
    if fit is not None:
        progress("goodness of fit", (len(candidates) + 1) / steps)
        fitted = fit([(x, out_x), (y, out_y)], list(batch_a.values()))
    progress("done", 1.0)
    return StatisticalResult(
        True,
        "Clopper–Pearson bounds on an event chosen on an independent batch",
        violation=bound > subject.epsilon,
        epsilon_lower_bound=bound,
        confidence=1.0 - alpha,
        samples=drawn,
        samples_per_input=samples,
        pair=(subject.describe(x), subject.describe(y)),
        event=best.describe(best.threshold),
        hits=(hits_x, hits_y),
        pairs_screened=len(candidates),
        fit=fitted,
        pair_sources=sources,
    )


def _best_event(
    subject: Subject,
    pair: tuple[Any, Any],
    out_x: NDArray[Any],
    out_y: NDArray[Any],
    alpha: float,
    samples: int,
) -> _Candidate | None:
    best: _Candidate | None = None
    level = max(alpha / 2, SELECTION_LEVEL)
    # Scores learned from data are fitted on one half of batch A and their thresholds chosen on
    # the other, so an outcome seen once under x does not look like a perfect distinguisher.
    half_x, half_y = len(out_x) // 2, len(out_y) // 2
    fit_x, fit_y, out_x, out_y = out_x[:half_x], out_y[:half_y], out_x[half_x:], out_y[half_y:]
    declared = subject.declared(pair) if subject.declared is not None else None
    try:
        scores = candidate_scores(fit_x, fit_y, declared)
    except Exception:
        scores = [declared] if declared is not None else []
    for number, (score, describe) in enumerate(scores):
        try:
            sx, sy = score(out_x), score(out_y)
        except Exception:
            continue
        # The declared likelihood ratio (first, when present) is Neyman–Pearson optimal if the
        # declaration is right; the data-driven scores must beat it clearly, not by selection
        # noise among their many thresholds, to be preferred.
        weight = 1.0 if number == 0 and declared is not None else EMPIRICAL_WEIGHT
        finite = np.concatenate([sx[np.isfinite(sx)], sy[np.isfinite(sy)]])
        if finite.size == 0:
            continue
        thresholds = np.unique(finite)
        if len(thresholds) > MAX_THRESHOLDS:
            thresholds = np.unique(np.quantile(finite, np.linspace(0, 1, MAX_THRESHOLDS)))
        sorted_x, sorted_y = np.sort(sx), np.sort(sy)
        kx = len(sx) - np.searchsorted(sorted_x, thresholds, side="left")
        ky = len(sy) - np.searchsorted(sorted_y, thresholds, side="left")
        planned_x = clopper_pearson_lower(kx, len(sx), level) * samples
        planned_y = clopper_pearson_upper(ky, len(sy), level) * samples
        bounds = weight * epsilon_lower_bound(
            planned_x, planned_y, samples, samples, alpha / 2, subject.delta
        )
        i = int(np.argmax(bounds))
        if best is None or bounds[i] > best.bound:
            best = _Candidate(float(bounds[i]), pair, score, float(thresholds[i]), describe)
    return best


def _declared_ratio(mechanism: Mechanism, plan: InputPlan, pair: tuple[Any, Any]) -> Candidate:
    x, y = pair

    def score(outputs: NDArray[Any]) -> NDArray[np.float64]:
        distinct, inverse = _distinct_outputs(outputs)
        n = len(distinct)
        lp_x = np.asarray(mechanism.log_probability(distinct, plan.batch(x, n)), dtype=float)
        lp_y = np.asarray(mechanism.log_probability(distinct, plan.batch(y, n)), dtype=float)
        if lp_x.shape != (n,) or lp_y.shape != (n,):
            raise ValueError("log_probability did not return one value per output")
        ratio = np.nan_to_num(exact._log_ratio(lp_x, lp_y), nan=-np.inf)
        # Rounded to 1e-9 so the events are level sets of the likelihood ratio, not of the
        # rounding error of the float arithmetic that computed it: the low-order bits of
        # x + noise differ between x and x' (Mironov 2012), a real but separate finding that
        # needs bit-level features and is out of this tier's scope.
        rounded = np.asarray(np.round(ratio, 9), dtype=np.float64)
        return rounded if inverse is None else rounded[inverse]

    return score, lambda t: f"declared ln p(o|x) − ln p(o|x') ≥ {t:.6g}"


def _distinct_outputs(outputs: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.intp] | None]:
    """The distinct outputs of a mechanism with integer (or boolean) scalar outputs and where
    each output is among them; any other outputs unchanged (None).

    ``log_probability`` is a function of each (output, input) row alone, so it is evaluated
    once per distinct output: a batch of 10⁵ draws of a selection mechanism holds as many
    distinct outputs as it has candidates. (Vector outputs are left whole: finding their
    distinct rows costs more than most mechanisms' ``log_probability``.)
    """
    array = np.asarray(outputs)
    if array.ndim != 1 or array.dtype.kind not in "biu":
        return outputs, None
    distinct, inverse = np.unique(array, return_inverse=True)
    return distinct, inverse

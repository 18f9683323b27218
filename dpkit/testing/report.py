"""The audit report: both tiers' findings, a verdict, and their text and JSON forms."""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs

from dpkit.testing.blackbox import StatisticalResult
from dpkit.testing.exact import ExactResult

Verdict = Literal["pass", "violation", "unchecked"]

__all__ = ["AuditReport", "DPViolation"]


class DPViolation(AssertionError):
    """Raised by :func:`dpkit.testing.check_mechanism` when a mechanism fails its audit."""

    def __init__(self, reports: list[AuditReport]):
        self.reports = reports
        lines = [f"{r.label}: {finding}" for r in reports for finding in r.findings()]
        super().__init__("privacy audit failed:\n  " + "\n  ".join(lines))


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@attrs.frozen
class AuditReport:
    """The result of :func:`dpkit.testing.audit` (one mechanism instance) or
    :func:`dpkit.testing.audit_query` (one query).

    ``verdict`` is ``"violation"`` when the exact tier finds the declared distribution breaks the
    claim (or does not sum to 1), or when, in any randomness mode sampled, the statistical tier
    certifies ε_lb > ε, the sampler does not fit its declared distribution, or the subject raises
    on some inputs and not on their neighbours; ``"unchecked"`` when no tier could run in any
    mode (``reason`` says why: nothing was checked, so nothing passed); otherwise ``"pass"`` —
    which means "no violation found with this power", not "private".

    ``modes`` holds the statistical tier's result in each randomness mode sampled, in order
    (:mod:`dpkit.testing.modes`): each with its own verdict (:attr:`verdicts`), certificate at
    level α/m for m modes, and fit test. A mode the subject refuses with a typed error is
    ``"refused"``: it cannot release, so it cannot leak, and the report says so.
    ``statistical`` is the headline mode: the first with a finding, else the one with the
    largest ε_lb; ``epsilon_lower_bound`` is the largest ε_lb over the modes, which holds with
    confidence 1 − α (every mode's certificate at once, by the union bound).

    ``subject`` is ``"mechanism"`` or ``"query"``; ``relation`` the neighbouring relation the
    inputs were drawn from.
    """

    mechanism: str
    parameters: dict[str, Any]
    claimed_epsilon: float
    claimed_delta: float
    exact: ExactResult
    modes: tuple[StatisticalResult, ...]
    alpha: float
    seed: int
    elapsed: float = 0.0
    subject: Literal["mechanism", "query"] = "mechanism"
    relation: str = ""

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items() if v is not None)
        return f"{self.mechanism}({shown})"

    def mode(self, name: str) -> StatisticalResult:
        """The statistical tier's result in the randomness mode ``name`` (KeyError if not sampled)."""
        for result in self.modes:
            if result.mode == name:
                return result
        raise KeyError(name)

    @property
    def verdicts(self) -> dict[str, str]:
        """Each sampled mode's own verdict: pass, violation, refused or unchecked."""
        return {result.mode: result.verdict for result in self.modes}

    @property
    def statistical(self) -> StatisticalResult:
        """The headline mode: the first with a finding, else the checked one with the largest
        ε_lb, else the first."""
        for result in self.modes:
            if result.verdict == "violation":
                return result
        checked = [result for result in self.modes if result.checked]
        if checked:
            return max(checked, key=lambda result: result.epsilon_lower_bound)
        return self.modes[0] if self.modes else StatisticalResult(False, "no mode sampled")

    @property
    def checked(self) -> bool:
        """Whether at least one tier could run (in at least one mode)."""
        return self.exact.checked or any(result.checked for result in self.modes)

    @property
    def verdict(self) -> Verdict:
        if self.findings():
            return "violation"
        return "pass" if self.checked else "unchecked"

    @property
    def reason(self) -> str:
        """Why the audit checked nothing (empty when a tier ran)."""
        if self.checked:
            return ""
        reasons = {result.reason for result in self.modes}
        if len(reasons) == 1 and not any(result.refused for result in self.modes):
            statistical = reasons.pop()
        else:
            statistical = "; ".join(
                f"{r.mode} mode {'refused' if r.refused else 'unchecked'}: {r.reason}"
                for r in self.modes
            )
        return f"exact tier: {self.exact.reason}; statistical tier: {statistical}"

    @property
    def boundary(self) -> tuple[str, ...]:
        """Privacy-boundary findings (a subject whose exceptions depend on its input), by mode."""
        return tuple(
            f"{finding} ({result.mode} mode)"
            for result in self.modes
            for finding in result.boundary
        )

    @property
    def epsilon_lower_bound(self) -> float:
        """The largest ε_lb certified in any mode (0 when no mode was checked)."""
        return max((r.epsilon_lower_bound for r in self.modes if r.checked), default=0.0)

    @property
    def confidence(self) -> float:
        """The confidence of :attr:`epsilon_lower_bound`: 1 − α, every mode's certificate holding
        at once (each is at 1 − α/m); 0 when no mode was checked."""
        return 1.0 - self.alpha if any(r.checked for r in self.modes) else 0.0

    @property
    def samples(self) -> int:
        """Outputs drawn in all, over every mode."""
        return sum(result.samples for result in self.modes)

    def findings(self) -> list[str]:
        """One sentence per problem found (empty when the audit passes)."""
        found = []
        e = self.exact
        if e.violation and e.total is not None:
            found.append(f"exact tier: {e.reason}")
        elif e.violation:
            if self.claimed_delta == 0 or math.isinf(e.epsilon):
                what = f"declared distribution reaches ε = {e.epsilon:.6g} > claimed {self.claimed_epsilon:.6g}"
            else:
                what = f"declared distribution has δ(ε) = {e.delta:.3g} > claimed δ = {self.claimed_delta:.3g}"
            found.append(f"exact tier: {what} ({e.reason}; pair {e.pair}, {e.event})")
        for s in self.modes:
            if s.violation:
                found.append(
                    f"statistical tier ({s.mode} mode): ε ≥ {s.epsilon_lower_bound:.4f} with "
                    f"confidence {s.confidence:.6g} > claimed {self.claimed_epsilon:.6g} "
                    f"(pair {s.pair}, event {s.event}, hits {s.hits[0]}/{s.samples_per_input} vs "
                    f"{s.hits[1]}/{s.samples_per_input})"
                )
        found += list(self.boundary)
        for s in self.modes:
            fit = s.fit
            if fit.mismatch:
                found.append(
                    f"goodness of fit ({s.mode} mode): the sampler does not follow the declared "
                    f"distribution at input {fit.input} (p = {fit.p_value:.3g} < {fit.alpha:.3g}; "
                    f"{fit.reason})"
                )
        return found

    def to_dict(self) -> dict[str, Any]:
        s = self.statistical
        modes = {}
        for result in self.modes:
            record = result.to_dict()
            record["epsilon_lower_bound"] = _number(result.epsilon_lower_bound)
            modes[result.mode] = record
        return {
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "epsilon_lower_bound": _number(self.epsilon_lower_bound),
            "confidence": self.confidence,
            "samples": self.samples,
            "verdict": self.verdict,
            "verdicts": self.verdicts,
            "checked": self.checked,
            "reason": self.reason,
            "subject": self.subject,
            "relation": self.relation,
            "findings": self.findings(),
            "most_revealing": {
                "mode": s.mode,
                "pair": list(s.pair) if s.pair else None,
                "event": s.event,
            },
            "exact": self.exact.to_dict(),
            "modes": modes,
            "alpha": self.alpha,
            "seed": self.seed,
            "elapsed_seconds": round(self.elapsed, 3),
        }

    def format_text(self) -> str:
        e = self.exact
        lines = [
            f"audit of {self.label}" + (" (a whole query)" if self.subject == "query" else ""),
            f"  claimed            ε = {self.claimed_epsilon:.6g}, δ = {self.claimed_delta:.3g}",
        ]
        if self.relation:
            lines.append(f"  neighbours         {self.relation}")
        if e.checked and e.total is not None:
            lines.append(f"  exact tier         VIOLATION: {e.reason}")
        elif e.checked:
            lines.append(
                f"  exact tier         ε* = {e.epsilon:.6g}"
                + (f", δ(ε) = {e.delta:.3g}" if self.claimed_delta > 0 else "")
                + f" over {e.pairs_checked} pair(s) — {'VIOLATION' if e.violation else 'ok'}"
            )
            lines.append(f"                     ({e.reason})")
        else:
            lines.append(f"  exact tier         skipped: {e.reason}")
        if len(self.modes) > 1:
            share = self.alpha / len(self.modes)
            lines.append(
                f"  statistical tier   α = {self.alpha:.3g} over {len(self.modes)} randomness "
                f"modes: {share:.3g} each"
            )
        for s in self.modes:
            lines += self._mode_lines(s)
        verdict = self.verdict.upper()
        if self.verdict == "unchecked":
            verdict += " (no tier could run: nothing was checked)"
        shown = ", ".join(f"{mode} {v}" for mode, v in self.verdicts.items())
        lines.append(f"  verdict            {verdict}  ({shown}; {self.elapsed:.1f} s)")
        for finding in self.findings():
            lines.append(f"    - {finding}")
        return "\n".join(line for line in lines if line)

    def _mode_lines(self, s: StatisticalResult) -> list[str]:
        """The statistical tier's lines for one randomness mode."""
        name = f"{s.mode} mode".ljust(19)
        if s.refused:
            return [f"  {name}REFUSED: {s.reason} (it cannot release in this mode)"]
        if not s.checked:
            return [f"  {name}skipped: {s.reason}"]
        lines = [
            f"  {name}ε_lb = {s.epsilon_lower_bound:.4f} "
            f"({s.epsilon_lower_bound / self.claimed_epsilon:.1%} of ε) with confidence "
            f"{s.confidence:.6g} — {'VIOLATION' if s.violation else 'ok'}"
            if self.claimed_epsilon > 0
            else f"  {name}ε_lb = {s.epsilon_lower_bound:.4f}",
            f"    samples          {s.samples:,} in all; {s.samples_per_input:,} per input "
            f"in the test, {s.pairs_screened} pair(s) screened"
            + (f" ({s.pair_sources})" if s.pair_sources else ""),
            f"    most revealing   x = {s.pair[0]}, x' = {s.pair[1]}" if s.pair else "",
            f"                     event {s.event}: {s.hits[0]:,} vs {s.hits[1]:,} hits",
        ]
        fit = s.fit
        if fit.checked:
            lines.append(
                f"    goodness of fit  p = {fit.p_value:.3g} (alpha {fit.alpha:.3g}) — "
                f"{'MISMATCH' if fit.mismatch else 'ok'}"
            )
        else:
            lines.append(f"    goodness of fit  skipped: {fit.reason}")
        if s.boundary:
            lines.append(f"    boundary         VIOLATION: {len(s.boundary)} input(s) raised")
        return lines

"""Running a checked plan inside a budget-tracked session: all or nothing.

The order is the privacy boundary's (``docs/security.md``): plan (public: spec, parameters,
files and headers), open the ledger, check the total cost, commit every spend — and only then
read the data, one query at a time, with total readers and queries. A refusal before the commit
costs nothing and cannot depend on the data; nothing after it can fail because of the data, and
each release's result document is stored with its ledger entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import dpkit
from dpkit import _json as strict_json
from dpkit._enclosure import float_above, float_below
from dpkit.budget import Cost
from dpkit.document import Document, json_value
from dpkit.errors import BudgetExceeded, InvalidParameter, SpecError
from dpkit.ledger import exact_text
from dpkit.mean_estimate import no_mean_document
from dpkit.pricing import PricedPlan, composition_note
from dpkit.registry import Registry, get_registry
from dpkit.session import Deferred, Release, Session
from dpkit.spec.data import DataPolicy, open_regular
from dpkit.spec.issues import SpecInvalid, SpecIssue
from dpkit.spec.plan import MAX_SPEC_DEPTH, Plan, PlannedQuery, plan_spec
from dpkit.spec.schema import FREQUENCY, HEAVY_HITTERS, SQL

__all__ = ["load_spec", "run_spec"]

DEFAULT_LEDGER = "dpkit-ledger.sqlite"


#: A spec larger than this is refused unread: specs are small documents.
MAX_SPEC_BYTES = 16 << 20


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings, without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def load_spec(path: str | Path) -> Any:
    """Parse a spec file strictly (:mod:`dpkit._json`); unreadable files and bad JSON are a
    :class:`SpecInvalid` at ``/``, a repeated key or a ``NaN`` at its JSON Pointer."""
    handle = open_regular(Path(path))
    if handle is None:
        reason = "no such file" if not Path(path).exists() else "not a regular file"
        raise SpecInvalid([SpecIssue("", "spec_unreadable", f"cannot read {path}: {reason}")])
    with handle:
        raw = handle.read(MAX_SPEC_BYTES + 1)
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecInvalid(
            [SpecIssue("", "spec_too_large", f"{path} is over {MAX_SPEC_BYTES} bytes")]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecInvalid(
            [SpecIssue("", "spec_unreadable", f"cannot read {path}: not UTF-8 text")]
        ) from None
    if _depth(text) > MAX_SPEC_DEPTH:
        raise SpecInvalid(
            [SpecIssue("", "invalid_json", f"JSON nested deeper than {MAX_SPEC_DEPTH} levels")]
        )
    try:
        return strict_json.loads(text)
    except SpecError as error:  # a repeated key or a non-finite number, at its pointer
        raise SpecInvalid(
            [SpecIssue(error.pointer, error.code, error.reason, rule=error.rule)]
        ) from None
    except json.JSONDecodeError as error:
        message = f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        raise SpecInvalid([SpecIssue("", "invalid_json", message)]) from None
    except (RecursionError, ValueError) as error:
        message = f"not valid JSON: {type(error).__name__}"
        raise SpecInvalid([SpecIssue("", "invalid_json", message)]) from None


def _amount(budget: Any, *, up: bool = True) -> dict[str, Any]:
    """An amount of privacy as floats for reading — rounded up (a cost, what was spent) or down
    (``up=False``: a budget, what remains), never to the unsafe side — and as exact fractions
    for accounting."""
    rounded = float_above if up else float_below
    out: dict[str, Any] = {
        "epsilon": rounded(budget.epsilon, binary=False),
        "delta": rounded(budget.delta, binary=False),
        "epsilon_exact": exact_text(budget.epsilon),
        "delta_exact": exact_text(budget.delta),
    }
    for name, value in (("rho", budget.rho), ("mu2", budget.mu2)):
        if value is not None:
            out[name] = rounded(value, binary=False)
            out[f"{name}_exact"] = exact_text(value)
    return out


def _check_total(session: Session, plan: Plan) -> PricedPlan:
    """The plan's exact cost (the session's plan pricing: basic composition charges the queries'
    tight joint ε), priced once, must fit what remains, else point at the first query that
    overflows (:meth:`Session.overflow`). Returns the price, to charge as it is."""
    priced = session.price([(query.target.privacy, 1) for query in plan.queries])
    try:
        overflow = session.overflow(priced)
    except InvalidParameter as error:  # e.g. an (ε, δ) query under zCDP or Gaussian DP
        raise SpecInvalid([SpecIssue("/budget", error.code, str(error))]) from None
    if overflow is None:
        return priced
    query, charged, remaining = plan.queries[overflow.index], overflow.charged, overflow.remaining
    over_delta = charged.rho is None and charged.mu2 is None and charged.delta > remaining.delta
    field = "delta" if over_delta and charged.epsilon <= remaining.epsilon else "epsilon"
    requested = {
        "epsilon": float(charged.epsilon),
        "delta": float(charged.delta),
        "epsilon_exact": exact_text(charged.epsilon),
    }
    requested.update(_amount(charged))
    left = _amount(remaining, up=False)
    raise SpecInvalid(
        [
            SpecIssue(
                f"{query.at}/budget/{field}",
                "budget_exceeded",
                f"the queries up to here cost {charged} in total (charged under "
                f"{_charged_under(session)}); the ledger has "
                f"{remaining} left",
                detail={"requested": requested, "remaining": left},
            )
        ]
    )


def _document(query: PlannedQuery, values: Any, registry: Registry) -> dict[str, Any]:
    """The result's own fields of its document (:class:`~dpkit.document.Document`)."""
    if query.statistic == HEAVY_HITTERS:  # the protocol's decoding of its reports
        found: Document = dpkit.estimate(query.target, values, registry=registry)
        return found.to_document(confidence=query.confidence)
    if query.local and query.statistic != FREQUENCY:  # a local mean
        sums = registry.estimator(query.target).accumulate(values)
        if not sums.n:  # no reports (an empty column, public): no mean, every field null
            return no_mean_document(sums.n)
        mean: Document = dpkit.estimate(query.target, sums, registry=registry)
        return mean.to_document(confidence=query.confidence)
    if query.statistic == FREQUENCY:
        estimate: Document = dpkit.estimate(query.target, values, registry=registry)
        document = estimate.to_document(confidence=query.confidence)
        if query.categories:  # the spec's names for the categories
            document["categories"] = list(query.categories)
        return document
    if query.statistic == SQL:  # the released table, a row an object, and each aggregate's
        released: dict[str, Any] = values.to_document(confidence=query.confidence)
        columns = released["columns"]
        released["estimate"] = [dict(zip(columns, row, strict=True)) for row in released["rows"]]
        return released
    if isinstance(values, Document):
        return values.to_document(confidence=query.confidence)
    # A third-party query's plain value: the value alone.
    return {
        "mechanism": {"noise": None},
        "n": None,
        "categories": None,
        "estimate": json_value(values),
        "variance": None,
        "confidence_interval": None,
    }


def _result(query: PlannedQuery, release: Any, registry: Registry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query_id": query.query_id,
        "statistic": query.statistic,
        "mechanism": {
            "name": query.target.name,
            "plugin": query.provenance.plugin,
            "distribution": query.provenance.distribution,
            "version": query.provenance.version,
        },
        "spent": _amount(release.cost),
        "release_id": release.release_id,
        # The mode the ledger recorded for this release: what produced it, not what was asked.
        "randomness": {"mode": release.entry.randomness, "seed": query.seed},
    }
    document = _document(query, release.values, registry)
    out["mechanism"].update(document.pop("mechanism", {}))  # e.g. laplace under a sum
    out.update(document)
    return out


def run_spec(
    spec: Any,
    *,
    base_dir: Path,
    ledger: str | Path = DEFAULT_LEDGER,
    data_file: Path | None = None,
    seed: int | None = None,
    registry: Registry | None = None,
    policy: DataPolicy | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Validate, check the total cost, spend it atomically, then read the data, release, and
    return the result document.

    Raises :class:`SpecInvalid` (nothing spent) for any invalid schema, parameter, input file
    or budget; ledger problems raise their own typed errors, also before anything is spent.
    After the spend nothing depends on the data but the releases; a third-party plugin that
    fails there raises :class:`~dpkit.errors.ReleaseFailed` with the spend kept.
    ``policy`` says where input files may be read from (:class:`DataPolicy`); ``progress``, if
    given, is called as ``progress(released, count)`` after each of the ``count`` queries is
    released (a file's reading progress is the policy's).
    """
    registry = registry or get_registry()
    plan = plan_spec(
        spec,
        registry=registry,
        base_dir=base_dir,
        data_file=data_file,
        seed=seed,
        policy=policy,
    )
    try:
        session = Session(
            budget=plan.budget,
            ledger=str(ledger),
            dataset=plan.dataset,
            composition=plan.composition,  # type: ignore[arg-type]
            unit=plan.unit,  # its queries' one unit: fixed when this run creates the ledger
        )
    except InvalidParameter as error:
        where = "/budget" if plan.kind == "session" else "/session_budget"
        raise SpecInvalid([SpecIssue(where, error.code, str(error))]) from None
    with session:
        priced = _check_total(session, plan)
        results: dict[int, dict[str, Any]] = {}

        def document(index: int, release: Release) -> dict[str, Any]:
            results[index] = _result(plan.queries[index], release, registry)
            if progress is not None:
                progress(len(results), len(plan.queries))
            return results[index]

        try:
            session.release_all(
                [
                    (query.target, Deferred(query.load), query.generator(), query.query_id)
                    for query in plan.queries
                ],
                priced=priced,
                document=document,
            )
        except BudgetExceeded as error:  # another process spent in between: nothing was spent here
            raise SpecInvalid(
                [SpecIssue(plan.queries[0].at or "/", "budget_exceeded", str(error))]
            ) from None
        return {
            "dpkit": "1",
            "dpkit_version": dpkit.__version__,
            "spec_sha256": plan.spec_sha256,
            "session": {
                "dataset": session.dataset,
                "composition": session.composition,
                "ledger": session.ledger.path,  # as shown: a URL without its password
                "budget": _amount(session.budget, up=False),
                "spent": _amount(session.spent),
                "remaining": _amount(session.remaining, up=False),
                "charged": {
                    **_amount(priced.total or Cost(Fraction(0), Fraction(0))),
                    "composed": composition_note(
                        priced, session.rule if session.ledger.union is None else "basic"
                    ),
                },
            },
            "results": [results[index] for index in range(len(plan.queries))],
        }


def _charged_under(session: Session) -> str:
    """What a refusal names as the rule that charged it."""
    if session.ledger.union is not None:
        return f"a union of filters, the main one in {session.rule}"
    return session.rule or "the rule best would choose"

"""Auditing whole queries: the release of ``query.run`` on neighbouring datasets.

Only the public query API is used: ``query.privacy`` (the claim) and ``query.run(data, /, *,
rng)`` (one release; its ``value`` attribute, or the result itself, must be a number or an
array of numbers). The datasets come from the query's relation (:mod:`dpkit.testing.datasets`;
add/remove one record by default) and the statistical tier runs on the whole release exactly
as for a mechanism (:mod:`dpkit.testing.blackbox`): events chosen on one batch of releases,
one Clopper–Pearson certificate on a fresh batch.

A query has no declared output distribution, so the exact tier does not apply. One more check
comes for free: the private phase of a release must be *total* (``docs/security.md``, "The
privacy boundary"), so a ``run`` that raises on some neighbouring datasets and releases on
others is reported as a violation — the exception itself depends on the data.

Both randomness modes are audited, as for a mechanism (:mod:`dpkit.testing.modes`): the
candidate datasets are the same, the releases of each mode come from its own generator (a
keyed SecureRandom in secure mode), and each mode has its own certificate at level α/m.

A release takes one Python call, so a query audit draws far fewer samples than a vectorised
mechanism's (default 20,000 per input of the tested pair, in each mode): enough for a wrong
sensitivity (true ε ≥ 1.5 ε), not to certify ε_lb within a few per cent of ε.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.domains import Domain
from dpkit.errors import InvalidParameter
from dpkit.params import parameter_specs
from dpkit.testing._audit import judge, mode_progress
from dpkit.testing.blackbox import (
    Progress,
    StatisticalResult,
    Subject,
    describe_sources,
    run_mode,
)
from dpkit.testing.datasets import records_for
from dpkit.testing.exact import ExactResult
from dpkit.testing.inputs import Unsupported, check_pairs
from dpkit.testing.modes import MODES, Mode, check_modes, mode_alpha, mode_generator
from dpkit.testing.report import AuditReport
from dpkit.units import IdUnit, RecordUnit, unit_of

__all__ = ["QUERY_SAMPLES", "audit_query", "check_query", "release_value"]

#: Default releases per dataset of the tested pair for a query audit.
QUERY_SAMPLES = 20_000


def release_value(result: Any) -> NDArray[np.float64]:
    """The released number(s) of one ``run``: ``result.value`` if it has one, else ``result``."""
    return np.asarray(getattr(result, "value", result), dtype=np.float64)


def relation_for(query: Any) -> Domain:
    """The neighbouring relation a query protects: add/remove one record, unless its privacy
    unit (:func:`dpkit.units.unit_of`: a declared ``privacy_unit``, or a table query's
    ``unit``) is another — then pass ``relation=`` to :func:`audit_query`, since auditing a
    per-person query on record neighbours would test a weaker claim than it makes."""
    try:
        unit: Any = unit_of(query)
    except InvalidParameter:  # declares a unit of its own kind
        unit = getattr(query, "privacy_unit", None)
    if not isinstance(unit, RecordUnit):
        shown = unit.describe() if isinstance(unit, IdUnit) else unit
        raise Unsupported(
            f"{query.name} protects the privacy unit {shown!r}; pass relation= (a Domain of "
            "datasets declaring its neighbours, e.g. one that removes one id's rows)"
        )
    return records_for(query)


def _parameters(query: Any) -> dict[str, Any]:
    try:
        names = parameter_specs(type(query))
    except Exception:
        return {}
    return {name: getattr(query, name) for name in names if hasattr(query, name)}


def _describe(relation: Domain) -> Any:
    describe = getattr(relation, "describe", None)
    return describe if callable(describe) else (lambda dataset: repr(dataset))


def audit_query(
    query: Any,
    *,
    relation: Domain | None = None,
    samples: int = QUERY_SAMPLES,
    selection_samples: int | None = None,
    alpha: float = 1e-3,
    seed: int = 0,
    pairs: Sequence[tuple[Any, Any]] | None = None,
    random_pairs: int = 4,
    progress: Progress | None = None,
    modes: Iterable[Mode] = MODES,
) -> AuditReport:
    """Audit a whole query on neighbouring datasets and return the :class:`AuditReport`.

    ``relation`` (default: add/remove one record over :func:`~dpkit.testing.datasets.records_for`)
    gives the datasets; ``pairs`` adds explicit pairs of datasets (checked with the relation's
    ``are_neighbours`` first: a pair that does not neighbour is an
    :class:`~dpkit.errors.InvalidParameter`); ``samples`` releases per dataset of the tested
    pair, ``selection_samples`` (default ``samples // 4``) per dataset screened, in each of the
    randomness ``modes`` (default both; ``alpha`` is shared by them evenly).
    """
    if not (hasattr(query, "privacy") and callable(getattr(query, "run", None))):
        raise TypeError(f"expected a query with privacy and run(data, /, *, rng), got {query!r}")
    chosen = check_modes(modes, owner="audit_query")
    start = time.perf_counter()
    claim = query.privacy
    name = str(getattr(query, "name", type(query).__name__))
    rng = np.random.default_rng(seed)
    exact = ExactResult(False, "a query declares no output distribution")
    relation_text = ""
    try:
        relation = relation or relation_for(query)
        relation_text = str(getattr(relation, "relation", ""))
        explicit, note = check_pairs(
            relation, None, [_as_datasets(relation, pair) for pair in pairs or []], owner=name
        )
        worst = list(relation.pairs())
        drawn = list(relation.neighbours(rng, random_pairs))
        sources = describe_sources(
            [
                (f"declared by {type(relation).__name__}", len(worst)),
                (f"explicit ({note})", len(explicit)),
                ("random", len(drawn)),
            ]
        )
        subject = Subject(
            float(claim.epsilon),
            float(claim.delta),
            _drawer(query),
            _describe(relation),
            action="run",
            inputs="dataset",
        )
        results = tuple(
            run_mode(
                subject,
                worst + explicit + drawn,
                sources,
                mode=mode,
                samples=samples,
                selection_samples=selection_samples or max(samples // 4, 500),
                alpha=mode_alpha(alpha, chosen),
                rng=mode_generator(mode, seed, rng),
                progress=mode_progress(progress, mode, index, len(chosen)),
            )
            for index, mode in enumerate(chosen)
        )
    except Unsupported as why:
        results = tuple(StatisticalResult(False, str(why), mode=mode) for mode in chosen)
    return AuditReport(
        mechanism=name,
        parameters=_parameters(query),
        claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta),
        exact=exact,
        modes=results,
        alpha=alpha,
        seed=seed,
        elapsed=time.perf_counter() - start,
        subject="query",
        relation=relation_text,
    )


def _as_datasets(relation: Domain, pair: Any) -> Any:
    """A pair of record lists (e.g. from JSON) as datasets of the relation's type."""
    column = getattr(relation, "column", None)
    datasets = isinstance(pair, (list, tuple)) and len(pair) == 2
    if callable(column) and datasets and all(isinstance(d, (list, tuple)) for d in pair):
        return (column(list(pair[0])), column(list(pair[1])))
    return pair


def _drawer(query: Any) -> Any:
    def draw(dataset: Any, n: int, rng: Any) -> NDArray[np.float64]:
        first = release_value(query.run(dataset, rng=rng))
        out = np.empty((n, *first.shape), dtype=np.float64)
        out[0] = first
        for i in range(1, n):
            out[i] = release_value(query.run(dataset, rng=rng))
        return out

    return draw


def check_query(
    query: Any,
    *,
    relation: Domain | None = None,
    samples: int = QUERY_SAMPLES,
    alpha: float = 1e-7,
    seed: int = 20261122,
    pairs: Sequence[tuple[Any, Any]] | None = None,
    raise_on_violation: bool = True,
    modes: Iterable[Mode] = MODES,
) -> list[AuditReport]:
    """Audit a whole query and fail loudly, as :func:`~dpkit.testing.check_mechanism` does.

    Raises :class:`~dpkit.testing.DPViolation` on a violation in any of the randomness
    ``modes`` (default both) and ``AssertionError`` when nothing could be checked. A correct
    query is flagged with probability ≤ ``alpha`` in all (the default 1e-7 matches
    ``check_mechanism``'s :data:`~dpkit.testing.CHECK_ALPHA`).
    """
    report = audit_query(
        query,
        relation=relation,
        samples=samples,
        alpha=alpha,
        seed=seed,
        pairs=pairs,
        modes=modes,
    )
    return judge([report], raise_on_violation=raise_on_violation)

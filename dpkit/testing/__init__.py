"""dpkit's DP test harness: check that a mechanism keeps the ε (and δ) it claims.

One line in a plugin's own test suite::

    from dpkit.testing import check_mechanism

    def test_my_mechanism_is_private():
        check_mechanism(MyMechanism)            # or an instance: MyMechanism(epsilon=0.5)

Two tiers run (see :mod:`dpkit.testing.exact` and :mod:`dpkit.testing.blackbox`):

* the **exact tier** checks the declared ``log_probability`` against the claim (no sampling, no
  false positives beyond a 1e-9 floating-point tolerance);
* the **statistical tier** samples the real ``randomize`` and certifies a lower bound ε_lb on
  the true ε with confidence 1 − α (one-sided Clopper–Pearson bounds on an event chosen on an
  independent batch), plus a χ² goodness-of-fit of the sampler to the declared distribution at
  level α. It does so in **both randomness modes** (:mod:`dpkit.testing.modes`): fast mode on
  a seeded numpy Generator and secure mode on a keyed :class:`~dpkit.SecureRandom`, each with
  its own batches, event and certificate at α/2 (``modes=("fast",)`` audits one). A correct
  mechanism is flagged with probability at most 2α per audit, modes included.

``check_mechanism`` uses α = 1e-7 by default, so a suite running up to 5,000 such audits keeps
a family-wise false-alarm rate ≤ 1e-3. A pass means "no violation found with this power",
never a proof of privacy; an audit that could check nothing is ``"unchecked"``, not a pass.

:func:`check_coerce` checks the private phase's map into the domain: a mechanism's ``coerce``
must keep neighbouring inputs neighbours (:mod:`dpkit.testing.coerce`); ``dp_check`` runs it
after the audit.

Neighbouring inputs come from the mechanism's domain (:mod:`dpkit.testing.inputs`: any
:class:`dpkit.plugin.Domain` that declares its neighbours, plus explicit ``pairs``), and whole queries
are audited on neighbouring datasets by :func:`audit_query` / :func:`check_query`
(:mod:`dpkit.testing.datasets`). A SQL statement is audited by :func:`audit_sql` on tables that
differ in one person with many rows, from a few releases of many replicas of each table
(:mod:`dpkit.testing.table_audit`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpkit.testing._audit import CHECK_ALPHA, audit, check_mechanism, parameter_points
    from dpkit.testing.blackbox import StatisticalResult, statistical_check
    from dpkit.testing.coerce import check_coerce
    from dpkit.testing.datasets import AddRemoveOne, records_for
    from dpkit.testing.exact import NORMALISATION_TOLERANCE, ExactResult, exact_check
    from dpkit.testing.fit import FitResult
    from dpkit.testing.inputs import InputPlan, Unsupported, plan_inputs
    from dpkit.testing.modes import MODES
    from dpkit.testing.query_audit import QUERY_SAMPLES, audit_query, check_query
    from dpkit.testing.report import AuditReport, DPViolation
    from dpkit.testing.table_audit import audit_releases, audit_sql

__all__ = [
    "CHECK_ALPHA",
    "MODES",
    "NORMALISATION_TOLERANCE",
    "QUERY_SAMPLES",
    "AddRemoveOne",
    "AuditReport",
    "DPViolation",
    "ExactResult",
    "FitResult",
    "InputPlan",
    "StatisticalResult",
    "Unsupported",
    "audit",
    "audit_query",
    "audit_releases",
    "audit_sql",
    "check_coerce",
    "check_mechanism",
    "check_query",
    "exact_check",
    "parameter_points",
    "plan_inputs",
    "records_for",
    "statistical_check",
]

# Public name -> defining submodule. Imported on first use, so that the pytest plugin (a
# submodule of this package, loaded by every pytest run in the environment) stays cheap.
_HOMES = {
    "CHECK_ALPHA": "_audit",
    "audit": "_audit",
    "check_mechanism": "_audit",
    "parameter_points": "_audit",
    "check_coerce": "coerce",
    "AddRemoveOne": "datasets",
    "records_for": "datasets",
    "QUERY_SAMPLES": "query_audit",
    "audit_query": "query_audit",
    "check_query": "query_audit",
    "NORMALISATION_TOLERANCE": "exact",
    "FitResult": "fit",
    "StatisticalResult": "blackbox",
    "statistical_check": "blackbox",
    "ExactResult": "exact",
    "exact_check": "exact",
    "MODES": "modes",
    "InputPlan": "inputs",
    "Unsupported": "inputs",
    "plan_inputs": "inputs",
    "AuditReport": "report",
    "DPViolation": "report",
    "audit_releases": "table_audit",
    "audit_sql": "table_audit",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'dpkit.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dpkit.testing.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

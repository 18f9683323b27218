"""dpkit's pytest plugin (entry point ``pytest11``): privacy checks in one line.

Installed with dpkit, so any test suite in the same environment gets the ``dp_check`` fixture::

    def test_private(dp_check):
        dp_check(MyMechanism)        # audits MyMechanism at its typical parameters

``dp_check`` is :func:`dpkit.testing.check_mechanism` then :func:`dpkit.testing.check_coerce`
for a mechanism (class or instance), and
:func:`dpkit.testing.check_query` for a query (audited whole, on neighbouring datasets), with
``--dpkit-samples N`` on the pytest command line overriding the default sample budget. It
samples both randomness modes (fast, and secure on a keyed SecureRandom) and fails on a
violation in either; ``dp_check(MyMechanism, modes=("fast",))`` audits one. Explicit
neighbouring pairs go in as ``dp_check(MyMechanism, pairs=[(x, y), ...])``. The plugin imports nothing but pytest
until the fixture is used, so it costs nothing to suites that do not use it and cannot break
them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["dp_check"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpkit", "dpkit privacy audits")
    group.addoption(
        "--dpkit-samples",
        type=int,
        default=None,
        metavar="N",
        help="outputs per input, in each randomness mode, for dp_check audits "
        "(default: check_mechanism's)",
    )


@pytest.fixture
def dp_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``dp_check(MechanismOrQuery, **options)``: audit it, failing the test on a violation
    (and when nothing could be checked)."""
    from dpkit.mechanism import Mechanism
    from dpkit.testing import check_coerce, check_mechanism, check_query

    samples = request.config.getoption("dpkit_samples", default=None)

    def check(target: Any, /, **options: Any) -> Any:
        if samples is not None:
            options.setdefault("samples", samples)
        is_mechanism = isinstance(target, Mechanism) or (
            isinstance(target, type) and issubclass(target, Mechanism)
        )
        if not is_mechanism:
            return check_query(target, **options)
        reports = check_mechanism(target, **options)
        check_coerce(target)  # the private phase's map keeps neighbours neighbours
        return reports

    return check

"""dpkit's pytest plugin (entry point ``pytest11``): privacy checks in one line.

Installed with dpkit, so any test suite in the same environment gets the ``dp_check`` fixture::

    def test_private(dp_check):
        dp_check(MyMechanism)        # audits MyMechanism at its typical parameters

``dp_check`` is :func:`dpkit.testing.check_mechanism`, with ``--dpkit-samples N`` on the
pytest command line overriding the default sample budget. The plugin imports nothing but pytest
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
        help="outputs per input for dp_check audits (default: check_mechanism's)",
    )


@pytest.fixture
def dp_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``dp_check(MechanismClassOrInstance, **options)``: audit it, failing the test on a violation."""
    from dpkit.testing import check_mechanism

    samples = request.config.getoption("dpkit_samples", default=None)

    def check(mechanism: Any, /, **options: Any) -> Any:
        if samples is not None:
            options.setdefault("samples", samples)
        return check_mechanism(mechanism, **options)

    return check

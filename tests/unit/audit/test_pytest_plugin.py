"""The ``pytest11`` plugin: a third-party suite gets ``dp_check`` with no configuration.

Audits inside run at check_mechanism's alpha = 1e-7 (false alarm ≤ 2e-7 per audit, both
randomness modes together).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

MECHANISM = '''
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

import dpkit


@attrs.frozen
class Coin(dpkit.plugin.Mechanism):
    """Randomized response claiming ``epsilon``; ``true_epsilon`` is what it really spends."""

    name: ClassVar[str] = "coin"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = dpkit.plugin.parameter(
        dpkit.plugin.Real(low=0, low_open=True), doc="claimed ε", default=1.0, typical=(0.5, 2.0)
    )
    true_epsilon: float | None = None

    @property
    def domain(self):
        return dpkit.plugin.CategoricalDomain(2)

    @property
    def privacy(self):
        return dpkit.PureDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        eps = self.true_epsilon if self.true_epsilon is not None else self.epsilon
        x = np.asarray(values, dtype=np.int64)
        return np.where(rng.random(x.shape) < 1 / (1 + math.exp(eps)), 1 - x, x)
'''


def test_fixture_passes_a_private_mechanism_and_fails_a_leaky_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(coin=MECHANISM)
    pytester.makepyfile(
        test_coin="""
from coin import Coin
from dpkit.testing import check_mechanism

def test_class(dp_check):
    dp_check(Coin)

def test_one_line():
    check_mechanism(Coin(epsilon=1.0), samples=20_000)

def test_leaky(dp_check):
    dp_check(Coin(epsilon=0.5, true_epsilon=2.0))

def test_pairs_of_our_own(dp_check):
    dp_check(Coin(epsilon=1.0), pairs=[(1, 0)])

def test_a_whole_query(dp_check):
    import dpkit
    dp_check(dpkit.get_registry().query("count", epsilon=1.0, noise="laplace"), samples=3000)
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--dpkit-samples", "20000")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*DPViolation*privacy audit failed*", "*statistical tier*"])


def test_fixture_fails_a_bug_in_the_secure_branch_only(pytester: pytest.Pytester) -> None:
    """The guide's forced response with a × 2 in its secure branch alone: ``dp_check`` fails
    it (secure mode is audited by default), and passes it when told to audit fast mode only."""
    source = Path(__file__).resolve().parents[2] / "support" / "forced_response_secure_bug.py"
    pytester.makepyfile(buggy=source.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_buggy="""
from buggy import SecureDoubledForcedResponse

def test_both_modes(dp_check):
    dp_check(SecureDoubledForcedResponse)

def test_fast_mode_alone(dp_check):
    dp_check(SecureDoubledForcedResponse, modes=("fast",))
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--dpkit-samples", "20000")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_both_modes*", "*DPViolation*privacy audit failed*", "*(secure mode)*"]
    )
    assert "test_fast_mode_alone FAILED" not in result.stdout.str()


def test_plugin_module_is_cheap_to_import() -> None:
    """Loading the plugin must not import the auditor (or scipy) until a fixture asks."""
    import subprocess

    code = (
        "import sys, dpkit.testing.pytest_plugin; "
        "print('dpkit.testing.blackbox' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


def test_the_audit_extra_installs_what_dp_check_needs() -> None:
    """``pip install 'dpkit[audit]'`` is enough to run ``dp_check`` (pytest and scipy)."""
    tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    audit = {r.split(">")[0].split("[")[0] for r in extras["optional-dependencies"]["audit"]}
    assert {"pytest", "scipy"} <= audit

"""``dpkit audit``: report, JSON fields, exit codes (0 pass, 1 violation, 2 bad usage).

The passing audits run at alpha = 5e-7 (false alarm ≤ 1e-6 per test). The violation is
injected by registering a deliberately wrong plugin in the default registry for one test.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit import registry as registry_module
from dpkit.cli import main


def test_text_report_and_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "rr", "--param", "epsilon=1", "--samples", "20000", "--alpha", "5e-7"])
    out, err = capsys.readouterr()
    assert code == 0
    for text in ("claimed", "ε_lb", "most revealing", "event", "PASS"):
        assert text in out
    assert "auditing rr" in err  # progress goes to stderr


def test_json_report_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "audit",
            "krr",
            "-p",
            "epsilon=0.5",
            "-p",
            "k=3",
            "--samples",
            "20000",
            "--seed",
            "3",
            "--alpha",
            "5e-7",
            "--json",
        ]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == 0
    assert record["mechanism"] == "krr"
    assert record["claimed_epsilon"] == 0.5 and record["claimed_delta"] == 0.0
    assert 0 < record["epsilon_lower_bound"] <= 0.5
    assert record["confidence"] == pytest.approx(1 - 5e-7)
    assert record["samples"] >= 2 * 20000
    assert record["verdict"] == "pass"
    assert record["seed"] == 3
    assert record["most_revealing"]["pair"] and record["most_revealing"]["event"]


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "no_such_mechanism"],
        ["audit", "rr", "-p", "epsilon=-1"],
        ["audit", "rr", "-p", "epsilon"],
        ["audit", "rr", "-p", "epsilon=1", "-p", "colour=3"],
        ["audit", "rr", "-p", "epsilon=1", "--samples", "5"],
        ["audit", "rr", "-p", "epsilon=1", "--alpha", "2"],
    ],
)
def test_bad_usage_exits_two_without_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "dpkit: error:" in err and "Traceback" not in err


@attrs.frozen
class LeakyCoin(dpkit.Mechanism):
    """Claims ε = 0.5 but is randomized response at ε = 2 (true ε = 2)."""

    name: ClassVar[str] = "leaky_coin"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = dpkit.parameter(dpkit.Real(low=0, low_open=True), doc="ε", default=0.5)

    @property
    def domain(self) -> dpkit.CategoricalDomain:
        return dpkit.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, dtype=np.int64)
        return np.where(rng.random(x.shape) < 1 / (1 + math.exp(2.0)), 1 - x, x)


class _LeakyPlugin:
    @dpkit.hookimpl
    def dpkit_register_mechanisms(self, register: Any) -> None:
        register(LeakyCoin)


def test_violation_exits_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    leaky = dpkit.load_registry(plugins=[("leaky", _LeakyPlugin())])
    monkeypatch.setattr(registry_module, "get_registry", lambda **_: leaky)
    monkeypatch.setattr("dpkit.commands.audit.get_registry", lambda **_: leaky)
    code = main(["audit", "leaky_coin", "--samples", "20000", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert code == 1
    assert record["verdict"] == "violation"
    assert record["epsilon_lower_bound"] > 0.5
    assert record["exact"]["checked"] is False  # no declared pmf: the sampler alone proves it

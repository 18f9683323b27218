"""``dpkit audit``: report, JSON fields, exit codes (0 pass, 1 violation, 2 bad usage).

The passing audits run at alpha = 5e-7 (false alarm ≤ 1e-6 per test). The violation is
injected by registering a deliberately wrong plugin in the default registry for one test.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest

import dpkit
from dpkit import registry as registry_module
from dpkit.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import forced_response_secure_bug as secure_bug


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


def test_both_modes_are_reported_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["audit", "krr", "-p", "epsilon=1", "-p", "k=3", "--samples", "5000", "--alpha", "5e-7"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "fast mode          ε_lb = " in text and "secure mode        ε_lb = " in text
    assert "α = 5e-07 over 2 randomness modes: 2.5e-07 each" in text
    assert "PASS  (fast pass, secure pass;" in text
    assert main([*argv, "--json", "--mode", "secure"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["verdicts"] == {"secure": "pass"} and list(record["modes"]) == ["secure"]
    assert record["modes"]["secure"]["confidence"] == pytest.approx(1 - 5e-7)  # all of α
    assert 0 < record["modes"]["secure"]["epsilon_lower_bound"] <= 1.0
    with pytest.raises(SystemExit) as refused:  # argparse's usage error, as for every choice
        main([*argv, "--mode", "slow"])
    assert refused.value.code == 2 and "invalid choice: 'slow'" in capsys.readouterr().err


def test_a_bug_in_the_secure_branch_only_exits_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's forced response with its × 2 in the secure branch: the fast-only audit of
    before passes it, the default audit of both modes exits 1."""
    buggy = dpkit.load_registry(plugins=[("secure_bug", secure_bug.Plugin())])
    monkeypatch.setattr("dpkit.commands.audit.get_registry", lambda **_: buggy)
    argv = ["audit", "secure_doubled_forced_response", "--samples", "20000", "--alpha", "5e-7"]
    assert main([*argv, "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "violation"
    assert record["verdicts"] == {"fast": "pass", "secure": "violation"}
    assert record["modes"]["secure"]["epsilon_lower_bound"] > record["claimed_epsilon"]
    assert record["modes"]["fast"]["epsilon_lower_bound"] <= record["claimed_epsilon"]
    assert record["most_revealing"]["mode"] == "secure"
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "VIOLATION  (fast pass, secure violation;" in text
    assert "statistical tier (secure mode): ε ≥ " in text
    assert main([*argv, "--mode", "fast"]) == 0  # what fast mode alone would have said
    capsys.readouterr()


def test_a_query_is_audited_whole(capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--alpha", "5e-7", "--pair", "[[1, 2], [1, 2, 3]]", "--json"]
    code = main(
        ["audit", "count", "-p", "epsilon=1", "-p", "noise=laplace", "--samples", "2000", *options]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["verdict"] == "pass"
    assert record["subject"] == "query" and record["relation"].startswith("add or remove one")
    assert record["exact"]["checked"] is False
    assert "1 explicit" in record["modes"]["fast"]["pair_sources"]


def test_explicit_pairs_from_the_command_line_and_a_file(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = tmp_path / "pairs.json"
    pairs.write_text("[[0, 0.5], [1, 0]]", encoding="utf-8")
    options = ["--samples", "20000", "--alpha", "5e-7", "--json", "--pairs", str(pairs)]
    code = main(["audit", "laplace", "-p", "epsilon=1", "--pair", "[0.25, 1]", *options])
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["exact"]["pairs_checked"] == 5  # 2 derived + 3 explicit
    assert "3 explicit" in record["modes"]["secure"]["pair_sources"]


def test_an_unknown_name_lists_mechanisms_and_queries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "cuont"]) == 2
    err = capsys.readouterr().err
    assert "'count'" in err and "laplace" in err


class _Blind(LeakyCoin):
    name: ClassVar[str] = "blind_coin"

    @property
    def domain(self) -> dpkit.Domain:  # type: ignore[override]
        return dpkit.Domain()


class _BlindPlugin:
    @dpkit.hookimpl
    def dpkit_register_mechanisms(self, register: Any) -> None:
        register(attrs.frozen(_Blind))


def test_nothing_checked_is_unchecked_with_exit_two(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blind = dpkit.load_registry(plugins=[("blind", _BlindPlugin())])
    monkeypatch.setattr("dpkit.commands.audit.get_registry", lambda **_: blind)
    code = main(["audit", "blind_coin", "--samples", "1000", "--json"])
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert code == 2
    assert record["verdict"] == "unchecked" and record["checked"] is False
    assert "does not declare its neighbours" in record["reason"]
    assert "could not be audited: " in captured.err
